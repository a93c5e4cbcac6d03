"""Use what you trained: :func:`load` a run directory's encoder, embed, export.

``spacl.load(run_dir)`` returns a :class:`TrainedModel`: the trained backbone
(``.encoder``, eval mode), the projection head (``.head``), the run's resolved config
(``.config``), the evaluation preprocessing (``.transform``) and ``.embed(inputs)``.

Everything comes from the run directory alone (``config.yaml`` and
``checkpoints/last.pt``, loaded with ``weights_only=True``): checkpoints written since
the ``model_info`` entry existed carry the input shape and the evaluation normalisation,
so no dataset is read.  Older checkpoints fall back to loading the recipe's training data
once to recompute the normalisation (as ``spacl eval`` does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from spacl._validation import check_choice, check_export_archive
from spacl.engine.checkpoint import load_checkpoint
from spacl.engine.rundir import RunDirectory
from spacl.models.export import export_batch_program
from spacl.schema_files import named_field

if TYPE_CHECKING:
    from spacl.tasks.kg.run import LinkModel
    from spacl.tasks.text.run import IntentDetector

__all__ = ["TrainedModel", "export_encoder", "load", "load_image_run"]

Transform = Callable[[Tensor], Tensor]


@dataclass
class TrainedModel:
    """The trained parts of one arm of a run (module docstring).

    Attributes:
        encoder: the backbone ``f`` (features for probes, kNN, NCC), in eval mode.
        head: the projection head ``g`` (``projections = g(f(x))``), in eval mode.
        config: the run's resolved config (an ``omegaconf.DictConfig``).
        transform: the evaluation preprocessing of a float image batch in ``[0, 1]``
            (``[N, C, H, W]``; the identity for vector data).
        arm: the arm's name.
        input_shape: the shape of one input the encoder takes.
        task: ``"image"`` (the tasks with run directories of this layout).
    """

    encoder: nn.Module
    head: nn.Module
    config: Any
    transform: Transform
    arm: str
    input_shape: tuple[int, ...]
    task: str = "image"

    def __repr__(self) -> str:  # what it is, not the config and the layers
        parameters = sum(p.numel() for p in self.encoder.parameters())
        return (
            f"TrainedModel(task={self.task!r}, {named_field(self.config)}"
            f"arm={self.arm!r}, input_shape={self.input_shape}, "
            f"encoder={type(self.encoder).__name__} ({parameters:,} parameters))"
        )

    @torch.no_grad()
    def embed(
        self,
        inputs: Tensor | np.ndarray | Sequence[Any],
        *,
        features: str = "backbone",
        batch_size: int = 256,
    ) -> Tensor:
        """Embeddings ``[N, d]`` (float32, CPU) of a tensor batch, of images or of image files.

        ``inputs``: a float tensor or numpy array ``[N, *input_shape]`` with values as the
        training data had them: images in ``[0, 1]``, raw pixels, which the model
        normalises itself (:attr:`transform`).  Values within ``PIXEL_TOLERANCE``
        (``1e-3``) of that range, as a bicubic resize of float images gives, are taken and
        clamped to ``[0, 1]``; values further out raise a ``ValueError`` whose hint fits
        the case (0-255 pixels: divide by 255; negative values, images normalised
        already: pass the raw pixels; a small overshoot: clamp).  NaN or infinite values
        raise a ``ValueError``.  Or a list whose items are each an image path (read with
        PIL), a PIL image (both converted to the run's channel count and size), or one
        input (tensor or array ``input_shape``); any other item raises a ``TypeError``.
        An empty batch gives ``[0, d]``.  ``features``: ``"backbone"`` (``f(x)``, what
        ``spacl eval`` probes by default) or ``"projections"`` (``g(f(x))``).

        Example:
            >>> model = spacl.load("runs/photos")              # doctest: +SKIP
            >>> model.embed(["cat.png", Image.open("dog.png")]).shape  # doctest: +SKIP
            torch.Size([2, 512])
        """
        check_choice(features, "features", ("backbone", "projections"))
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        x = self._as_tensor(inputs)
        param = next(iter(self.encoder.parameters()))
        if not x.shape[0]:  # the width of the features, from one all-zero input
            x = torch.zeros(1, *self.input_shape)
            return self._forward(x.to(param.device, param.dtype), features)[:0]
        out = []
        for start in range(0, x.shape[0], batch_size):
            chunk = x[start : start + batch_size].to(param.device, param.dtype)
            out.append(self._forward(chunk, features))
        return torch.cat(out)

    def _forward(self, x: Tensor, features: str) -> Tensor:
        f = self.encoder(self.transform(x))
        return (self.head(f) if features == "projections" else f).float().cpu()

    def _as_tensor(self, inputs: Tensor | np.ndarray | Sequence[Any]) -> Tensor:
        array = isinstance(inputs, np.ndarray)
        if isinstance(inputs, np.ndarray):
            inputs = _from_numpy(inputs)
        if isinstance(inputs, Tensor):
            return self._checked(inputs, array=array)
        if isinstance(inputs, (str, Path)) or _is_pil(inputs):
            inputs = [inputs]
        if not isinstance(inputs, Sequence):
            raise TypeError(
                f"inputs must be a tensor, a numpy array or a list of image paths, PIL images, "
                f"tensors or arrays, got {type(inputs).__name__}"
            )
        if not len(inputs):
            return torch.zeros(0, *self.input_shape)
        crop = self.config.data.name == "imagefolder"
        rows = [self._one(item, i, crop) for i, item in enumerate(inputs)]
        return self._checked(torch.stack(rows))

    def _one(self, item: Any, index: int, crop: bool) -> Tensor:
        """One input of a list: an image path or PIL image read, a tensor or array as is."""
        array = isinstance(item, np.ndarray)
        if isinstance(item, np.ndarray):
            item = _from_numpy(item)
        if isinstance(item, Tensor):
            if tuple(item.shape) != self.input_shape:
                hint = _layout_hint(item, self.input_shape, batch=False, array=array)
                raise ValueError(
                    f"inputs[{index}] must have shape {list(self.input_shape)}, got "
                    f"{list(item.shape)}{hint}"
                )
            return item
        if isinstance(item, (str, Path)) or _is_pil(item):
            if len(self.input_shape) != 3:
                raise TypeError(
                    f"this encoder takes vectors of shape {self.input_shape}: pass a tensor, "
                    "not images"
                )
            if isinstance(item, (str, Path)):
                return read_image(item, self.input_shape, centre_crop=crop)
            try:
                return image_tensor(item, self.input_shape, centre_crop=crop)
            except (OSError, ValueError, SyntaxError) as err:  # a truncated image, say
                raise ValueError(f"inputs[{index}]: cannot read the image: {err}") from None
        raise TypeError(
            f"inputs[{index}] must be an image path, a PIL image, a tensor or a numpy array, "
            f"got {type(item).__name__}"
        )

    def _checked(self, inputs: Tensor, *, array: bool = False) -> Tensor:
        """``inputs`` if a float batch of ``input_shape`` with finite values (images: in
        ``[0, 1]``); otherwise a ``ValueError`` / ``TypeError`` saying what is wrong
        (``array``: ``inputs`` came as a numpy array, for the hint of a shape error)."""
        if tuple(inputs.shape[1:]) != self.input_shape:
            hint = _layout_hint(inputs, self.input_shape, batch=True, array=array)
            raise ValueError(
                f"inputs must have shape [N, {', '.join(map(str, self.input_shape))}], "
                f"got {tuple(inputs.shape)}{hint}"
            )
        if not inputs.is_floating_point():
            given = str(inputs.dtype).replace("torch.", "numpy " if array else "torch.")
            raise TypeError(
                f"inputs must be a float tensor or array, got {given} (images: "
                "divide 0-255 values by 255)"
            )
        if not inputs.numel():
            return inputs
        finite = torch.isfinite(inputs)
        if not bool(finite.all()):
            bad = int((~finite).sum())
            raise ValueError(
                f"inputs must be finite, got {bad} NaN or infinite value(s) of {inputs.numel()}"
            )
        if len(self.input_shape) == 3:
            low, high = float(inputs.min()), float(inputs.max())
            if low < -PIXEL_TOLERANCE or high > 1 + PIXEL_TOLERANCE:
                raise ValueError(
                    f"inputs must be images in [0, 1] as the run was trained on, got values "
                    f"in [{low:g}, {high:g}]{_range_hint(low, high)}"
                )
            if low < 0 or high > 1:  # within the tolerance: a resize's overshoot
                inputs = inputs.clamp(0, 1)
        return inputs


#: how far image values may lie outside ``[0, 1]`` and still be taken (then clamped):
#: a bicubic or antialiased resize of float images overshoots ``[0, 1]`` by a little
PIXEL_TOLERANCE = 1e-3


def _range_hint(low: float, high: float) -> str:
    """What to do with images whose values ``[low, high]`` lie outside ``[0, 1]``: negative
    values well below 0 are images normalised already (``(x - mean) / std``), values above
    2 are 0-255 pixels, a small overshoot either way wants a clamp."""
    if low < -0.1:
        return (
            " (negative values: they look normalised already; pass the raw [0, 1] pixels, "
            "the model normalises them itself)"
        )
    if high > 2:
        return " (they look like 0-255 pixels: divide by 255)"
    return f" (a little outside [0, 1], more than {PIXEL_TOLERANCE:g}: clamp them, x.clamp(0, 1))"


def _from_numpy(array: np.ndarray) -> Tensor:
    """``array`` as a tensor, sharing its memory where it is contiguous and writeable; a
    read-only array (``np.asarray`` of a PIL image, say) is copied, as torch warns on one."""
    array = np.ascontiguousarray(array)
    if not array.flags.writeable:
        array = array.copy()
    return torch.from_numpy(array)


def _layout_hint(x: Tensor, expected: tuple[int, ...], *, batch: bool, array: bool) -> str:
    """What to add to the shape error of images given as ``x`` (``""`` when no hint fits).

    A hint is given when ``x`` looks like images laid out as PIL gives them (height, width,
    channels: the last dim 1 or 3) or holds uint8 values (0-255); it shows the conversion
    to the ``[N, C, H, W]`` floats in ``[0, 1]`` the encoder takes (``batch``: ``x`` is the
    whole batch, else one item of a list; ``array``: numpy spelling, else torch)."""
    if len(expected) != 3:
        return ""  # vectors: no image layout
    shape = tuple(x.shape)
    channels, height, width = expected
    hwc = len(shape) in (3, 4) and shape[-1] in (1, 3)
    if not hwc and x.dtype != torch.uint8:
        return ""
    fix, given = "", (1, *shape[-2:])  # the channels and the size of one given image
    if hwc and batch:  # [N, H, W, C], or one [H, W, C] image for the batch
        fix = "x.transpose(0, 3, 1, 2)" if len(shape) == 4 else "x.transpose(2, 0, 1)[None]"
        given = (shape[-1], *shape[-3:-1])
    elif hwc:
        fix = "x.transpose(2, 0, 1)"
        given = (shape[-1], *shape[-3:-1])
    elif channels == 1 and len(shape) == (3 if batch else 2):  # grayscale without its axis
        fix = "x[:, None]" if batch else "x[None]"
    elif channels == 1 and batch and len(shape) == 2:  # one grayscale image for the batch
        fix = "x[None, None]"
    if not array:
        fix = fix.replace("transpose", "permute")
    layout = f"[N, {channels}, {height}, {width}]" if batch else f"[{channels}, {height}, {width}]"
    hint = f"; images as {'arrays' if array else 'tensors'} are {layout} floats in [0, 1]"
    if not fix:
        return hint + " (0-255 values: divide by 255)"
    uint8 = x.dtype == torch.uint8  # else float HWC images
    what = ("PIL/HWC uint8" if hwc else "PIL grayscale uint8") if uint8 else "HWC images"
    hint += f": for {what} use {fix}{' / 255' if uint8 else ''}"
    if given != expected:
        hint += (
            f" on {channels}-channel {height} x {width} images, or pass the PIL images in a "
            "list (converted and resized for you)"
        )
    return hint


def _is_pil(item: Any) -> bool:
    """Whether ``item`` is a PIL image (without importing PIL when it is not loaded)."""
    import sys

    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(item, pil.Image)


def read_image(path: str | Path, shape: tuple[int, ...], *, centre_crop: bool = False) -> Tensor:
    """One image file as a float tensor ``[C, H, W]`` in ``[0, 1]`` of the given shape.

    ``centre_crop``: resize the short side to ``H / 0.875`` and centre-crop ``H x W`` (the
    ImageFolder evaluation transform, :func:`spacl.data.transforms.eval_transform`);
    otherwise resize to ``H x W``.  Raises ``ValueError`` naming the file when it cannot
    be read as an image.
    """
    from PIL import Image

    if Path(path).is_dir():
        raise ValueError(
            f"cannot read image {str(path)!r}: a folder; give its image files "
            f"({Path(path) / '*'}) or, for a folder of class folders, spacl embed --data"
        )
    try:
        with Image.open(path) as img:
            return image_tensor(img, shape, centre_crop=centre_crop)
    except (OSError, ValueError, SyntaxError) as err:  # unidentified, truncated, corrupt
        # a system error (no such file, no permission) without its "[Errno N] ..." prefix
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise ValueError(f"cannot read image {str(path)!r}: {reason}") from None


def image_tensor(img: Any, shape: tuple[int, ...], *, centre_crop: bool = False) -> Tensor:
    """A PIL image as a float tensor ``[C, H, W]`` in ``[0, 1]`` of the given shape
    (:func:`read_image` without the file)."""
    from torchvision.transforms.v2 import functional as TF

    from spacl.data.transforms import eval_transform

    channels, height, width = shape
    img = img.convert("L" if channels == 1 else "RGB")
    if centre_crop:
        tensor = eval_transform(height, mean=None, std=None)(img)
    else:
        tensor = TF.to_dtype(TF.to_image(img), torch.float32, scale=True)
    if tuple(tensor.shape[1:]) != (height, width):
        tensor = TF.resize(tensor, [height, width], antialias=True)
    return torch.as_tensor(tensor)


def load(
    run_dir: str | Path,
    arm: str | None = None,
    *,
    checkpoint: str | Path | None = None,
    device: str | torch.device = "cpu",
) -> TrainedModel | IntentDetector | LinkModel:
    """The trained model in ``run_dir``: for image runs that of ``arm`` (default: the first).

    Image runs give a :class:`TrainedModel`; text runs the open-intent detector
    (:class:`spacl.tasks.text.run.IntentDetector`: ``.encoder``, ``.head``, ``.config``,
    ``.embed(texts)``, ``.predict(texts)``); KG runs the link predictor
    (:class:`spacl.tasks.kg.run.LinkModel`: ``.model``, ``.config``,
    ``.embed(entities)``, ``.predict(relation, head=...)``).

    Raises ``FileNotFoundError`` for a directory with no ``config.yaml`` or no
    checkpoint, and ``ValueError`` for a checkpoint of another task or an unknown arm.
    """
    rd = RunDirectory(run_dir)
    raw = rd.read_config_dict()
    task = str(raw.get("task", "image"))
    if task in ("kg", "text") and arm is not None:
        raise ValueError(f"arm must be None for a {task} run (it has one model), got {arm!r}")
    if task == "kg":
        from spacl.tasks.kg.run import load_link_model

        return load_link_model(rd.path)
    if task == "text":
        from spacl.tasks.text.run import load_intent_detector

        return load_intent_detector(rd.path)
    if task != "image" or "arms" not in raw:
        raise ValueError(
            f"{rd.path} is a run of task {task!r}; spacl.load reads image, kg and text runs"
        )
    return load_image_run(rd.path, arm, checkpoint=checkpoint, device=device)


def load_image_run(
    run_dir: str | Path,
    arm: str | None = None,
    *,
    checkpoint: str | Path | None = None,
    device: str | torch.device = "cpu",
) -> TrainedModel:
    """The :class:`TrainedModel` of ``arm`` (default: the first) of an image run."""
    rd = RunDirectory(run_dir)
    raw = rd.read_config_dict()
    if str(raw.get("task", "image")) != "image":
        raise ValueError(f"{rd.path} is a run of task {raw['task']!r}, not an image run")
    ckpt = Path(checkpoint) if checkpoint is not None else rd.last_checkpoint
    if not ckpt.is_file():
        raise FileNotFoundError(f"{rd.path} has no checkpoint: {ckpt} is missing")
    state = load_checkpoint(ckpt, map_location="cpu")
    if "arms" not in state or "config" not in state:
        raise ValueError(f"{ckpt} is not a checkpoint of an image run (no 'arms' / 'config')")
    from spacl.schema_files import read_run_config
    from spacl.tasks import registry
    from spacl.tasks.image.config import data_dir_unchecked

    with data_dir_unchecked():  # the run alone: its dataset may be gone or elsewhere
        cfg = registry.load_recipe(read_run_config(rd.config)).config  # the one way in
    names = list(state["arms"])
    name = names[0] if arm is None else arm
    check_choice(name, "arm", names)
    info = state.get("model_info") or _model_info_from_data(cfg)
    shape = tuple(int(v) for v in info["input_shape"])
    model = _build_model(cfg, shape, state["arms"][name]["model"])
    model.to(device).eval()
    return TrainedModel(
        model.backbone, model.head, cfg, _transform(cfg, info), name, shape, task="image"
    )


def _build_model(cfg: Any, shape: tuple[int, ...], weights: dict[str, Tensor]) -> Any:
    from spacl.tasks.image.build import build_base_model

    with torch.random.fork_rng(devices=[]):
        model = build_base_model(cfg, shape)
    head_keys = {k for k in weights if k.startswith("head.")}
    if head_keys == {"head.weight", "head.bias"} and weights["head.weight"].ndim == 2:
        out_dim, in_dim = weights["head.weight"].shape  # the cross-entropy arm's classifier
        model.head = nn.Linear(int(in_dim), int(out_dim))
    model.to(next(iter(weights.values())).dtype)
    model.load_state_dict(weights)
    return model


def _model_info_from_data(cfg: Any) -> dict[str, Any]:
    from spacl.tasks.image.data import build_run_data

    data = build_run_data(cfg, device=torch.device("cpu"), dtype=torch.float32)
    norm = data.normalization
    return {
        "input_shape": list(data.input_shape),
        "num_classes": int(data.num_classes),
        "normalization": None if norm is None else {"mean": list(norm[0]), "std": list(norm[1])},
    }


def _transform(cfg: Any, info: dict[str, Any]) -> Transform:
    norm = info.get("normalization")
    if cfg.data.name == "imagefolder" and norm is None and cfg.data.normalize:  # older runs
        from spacl.data.transforms import IMAGENET_MEAN, IMAGENET_STD

        norm = {"mean": list(IMAGENET_MEAN), "std": list(IMAGENET_STD)}
    if norm is None:
        return _identity
    return ChannelNormalize(norm["mean"], norm["std"])


def _identity(x: Tensor) -> Tensor:
    return x


class ChannelNormalize(nn.Module):
    """``(x - mean_c) / std_c`` per channel of ``[N, C, ...]`` (an exportable module)."""

    mean: Tensor
    std: Tensor

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(list(mean), dtype=torch.float32))
        self.register_buffer("std", torch.tensor(list(std), dtype=torch.float32))

    def forward(self, x: Tensor) -> Tensor:
        shape = [1, -1] + [1] * (x.dim() - 2)
        return (x - self.mean.to(x).view(shape)) / self.std.to(x).view(shape)


def export_encoder(model: TrainedModel, path: str | Path) -> Path:
    """Save ``model.encoder`` as a ``torch.export`` program that plain torch runs.

    ``torch.export.load(path).module()`` maps preprocessed inputs ``[N, *input_shape]``
    (``model.transform`` applied; any ``N >= 1``) to backbone features, exactly as
    ``model.encoder``; spacl need not be installed.  The file also carries
    ``spacl.json`` (input shape, normalisation, arm):
    ``torch.export.load(path, extra_files={"spacl.json": ""})`` fills that dict.
    ``path`` ends in ``.pt2`` (in any case: ``.PT2`` is written under that very name;
    ``torch.export.load`` warns of a name not ending in ``.pt2`` and loads it, or give it
    ``open(path, "rb")``); any other suffix is a ``ValueError``.
    """
    import json

    path = Path(path)
    check_export_archive(path)  # ``.PT2`` is a .pt2 file too, written as named
    param = next(model.encoder.parameters())
    example = torch.zeros(2, *model.input_shape, dtype=param.dtype, device=param.device)
    program = export_batch_program(model.encoder, example)
    norm = model.transform
    meta = {
        "arm": model.arm,
        "input_shape": list(model.input_shape),
        "normalization": (
            {"mean": norm.mean.tolist(), "std": norm.std.tolist()}
            if isinstance(norm, ChannelNormalize)
            else None
        ),
        "output": "backbone features",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:  # a file object: torch warns of a name ending in .PT2
        torch.export.save(program, handle, extra_files={"spacl.json": json.dumps(meta)})
    return path
