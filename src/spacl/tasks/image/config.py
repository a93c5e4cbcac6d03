"""The training configuration: an OmegaConf structured config, loaded, merged and validated.

A run is described by one YAML recipe (``configs/...``) plus dot-list overrides
(``train.epochs=5 optim.lr=0.1``).  The schema below is a tree of dataclasses given to
``OmegaConf.structured``, so unknown keys and wrong types are rejected by OmegaConf
and re-raised here as ``ValueError`` naming the key.  :func:`validate_config` then
checks meaning (``lr > 0``, known objective, data path exists, ...) — all before any
data is loaded or any model is built.

Recipes may extend other recipes with a top-level ``base:`` key (a path, or a list of
paths, relative to the recipe): bases are merged first, in order, then the recipe.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from spacl.schema import (
    DataSection,
    EvalSection,
    OptimSection,
    TrainSection,
    recipe_layer,
    register_task,
    validate_shared,
)
from spacl.schema_checks import choice, fail, format_error, in_range, int_at_least, positive

__all__ = [
    "ArmConfig",
    "Config",
    "DataConfig",
    "EvalConfig",
    "LogConfig",
    "ModelConfig",
    "ObjectiveConfig",
    "OptimConfig",
    "SyntheticConfig",
    "TrainConfig",
    "config_to_dict",
    "data_dir_unchecked",
    "image_config",
    "load_config",
    "validate_config",
]

ON_DISK_DATASETS = ("cifar10", "cifar100", "imagefolder")
AUGMENTS = ("auto", "image", "noise", "same_class", "identity")
#: the ``views.augment`` values an image folder accepts (``noise`` / ``same_class`` need
#: in-memory data)
FOLDER_AUGMENTS = ("auto", "image", "identity")
PRECISIONS = ("auto", "fp32", "fp64", "bf16", "fp16")

#: whether :func:`validate_config` checks that an on-disk dataset's directory exists
_CHECK_DATA_DIR: ContextVar[bool] = ContextVar("spacl_check_data_dir", default=True)


@contextmanager
def data_dir_unchecked() -> Iterator[None]:
    """Within this block, :func:`validate_config` does not check that an on-disk dataset's
    directory exists: a run directory's config is read to load, predict, embed given files
    or export, none of which needs the dataset (every other check still runs)."""
    token = _CHECK_DATA_DIR.set(False)
    try:
        yield
    finally:
        _CHECK_DATA_DIR.reset(token)


@dataclass
class SyntheticConfig:
    """Arguments of :func:`spacl.data.make_synthetic` (``data.name: synthetic``)."""

    num_classes: int = 10
    dim: int = 32
    samples_per_class: int = 100
    within_std: float = 0.3
    center_scale: float = 1.0
    num_superclasses: int | None = None


@dataclass
class DataConfig(DataSection):
    """Dataset, views and batching (shared keys: :class:`spacl.schema.DataSection`)."""

    name: str = "digits"  # synthetic | digits | mnist5k | cifar10 | cifar100 | imagefolder
    root: str | None = None  # on-disk data (default: spacl.data.default_data_root())
    train_split: str = "train"
    test_split: str = "test"  # imagefolder: e.g. "val"
    label_kind: str = "fine"  # labels given to supervised objectives: fine | coarse
    normalize: bool = True  # per-channel mean/std normalisation of images
    balanced: bool = False  # class-balanced batches (shared-randomness study)
    samples_per_class: int | None = None
    test_fraction: float = 0.2  # single-set data (synthetic, digits, mnist5k)
    split_seed: int = 0
    image_size: int = 224  # imagefolder only
    num_workers: int | None = None  # imagefolder: DataLoader workers (None: min(8, CPUs))
    bad_images: str = "error"  # imagefolder only: error | skip (files PIL cannot open)
    on_device: bool = True  # keep in-memory data on the training device
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)


@dataclass
class ViewsConfig:
    """How many views of each instance, and how they are made (``views``, as in every task)."""

    num_views: int = 2  # V; SPACL: 1 + M
    augment: str = "auto"  # auto | image | noise | same_class | identity
    augment_strength: float = 1.0  # ImageAugment strength in [0, 1]
    crop_scale: list[float] = field(default_factory=lambda: [0.08, 1.0])
    color_strength: float = 0.5  # SimCLR colour strength s (jitter 0.8s/0.8s/0.8s/0.2s)
    blur: bool = False  # Gaussian blur (ImageNet-sized images)
    flip: bool = True  # random horizontal flips
    keep_original: bool = False  # view 0 is the un-augmented input (SPACL's original view)
    noise_sigma: float = 0.1  # NoiseViews sigma (synthetic vectors)


@dataclass
class ModelConfig:
    """Encoder ``f`` = backbone + projection head; target ``g`` (EMA or shared)."""

    backbone: str = "mlp"  # mlp | small_cnn | resnet18 | resnet50
    cifar_stem: bool = False  # resnets: 3x3 stride-1 stem, no max-pool
    hidden_dims: list[int] = field(default_factory=lambda: [256, 256])  # mlp
    channels: list[int] = field(default_factory=lambda: [32, 64, 128])  # small_cnn
    feature_dim: int = 128  # mlp / small_cnn output width
    batchnorm: bool = True  # mlp
    head: str = "mlp"  # identity | linear | mlp
    proj_dim: int = 128
    head_hidden_dim: int | None = None
    head_batchnorm: bool = False
    momentum: float = 0.0  # EMA target momentum; 0 = shared encoder (g = f)
    momentum_schedule: str = "constant"  # constant | cosine (BYOL: rises to 1)
    sync_batchnorm: bool = False  # convert BatchNorm to SyncBatchNorm under DDP (CUDA)


@dataclass
class ObjectiveConfig:
    """Which loss, and its hyper-parameters (see :mod:`spacl.tasks.image.objectives`)."""

    name: str = "simclr"
    temperature: float | None = None  # None: the objective's default
    normalize: str | None = None  # sphere | ball | none; None: the objective's default
    use_labels: bool | None = None  # None: the objective's default
    params: dict[str, Any] = field(default_factory=dict)  # other constructor arguments
    queue_size: int = 0  # MoCo-style queue of past targets as extra negatives (0: none)


@dataclass
class OptimConfig(OptimSection):
    """Optimiser and learning-rate schedule (shared keys: :class:`spacl.schema.OptimSection`)."""

    name: str = "sgd"  # sgd | adam | adamw | lars
    lr: float = 0.1  # base lr, scaled by lr_scaling
    lr_scaling: str = "none"  # none | linear | sqrt | fourth_root  (x (B / reference))
    reference_batch_size: int = 256
    weight_decay: float = 1e-6
    momentum: float = 0.9  # sgd / lars
    nesterov: bool = False
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # adam / adamw
    trust_coefficient: float = 1e-3  # lars eta
    exclude_bias_and_norm: bool = False  # no decay / LARS adaptation on biases and norms
    schedule: str = "cosine"  # cosine | constant (after warmup)
    warmup_epochs: float = 0.0
    min_lr_ratio: float = 0.0  # final lr / peak lr for cosine
    grad_clip: float | None = None  # max gradient norm


@dataclass
class TrainConfig(TrainSection):
    """Loop, precision, checkpoints (shared keys: :class:`spacl.schema.TrainSection`)."""

    epochs: int = 10
    batch_size: int = 256  # GLOBAL batch (split across torchrun processes)
    max_steps: int | None = None  # stop after this many optimiser steps
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    precision: str = "auto"  # auto | fp32 | fp64 | bf16 | fp16 (bf16/fp16: CUDA autocast)
    checkpoint_every: int = 500  # steps (and at epoch ends, at the end, on Ctrl-C); 0: no step ones
    log_every: int = 10  # steps between metric records (0: epoch records only)
    drop_last: bool = True  # drop each epoch's incomplete last batch (needed under DDP)
    progress: bool | None = None  # tqdm bar; None: only when stderr is a terminal
    deterministic: bool | None = None  # torch.use_deterministic_algorithms; None: on a CPU
    threads: int | None = None  # torch.set_num_threads for the process (None: leave)


@dataclass
class EvalConfig(EvalSection):
    """Online (every epoch) and final evaluation on frozen features (shared keys:
    :class:`spacl.schema.EvalSection`)."""

    every_epochs: int = 1  # online kNN (+ geometry) every N epochs; 0: never
    features: str = "features"  # features (= backbone, its other name) | projections
    knn_k: int = 200
    knn_t: float = 0.1
    linear_probe: bool = True  # final linear probe
    probe_weight_decay: float = 1e-4
    probe_max_iter: int = 500
    geometry: bool = True  # spacl.geometry.geometry_report, when available
    max_train_samples: int | None = None  # subsample the kNN bank for online eval
    batch_size: int = 512


@dataclass
class LogConfig:
    tensorboard: bool | None = None  # None: when TensorBoard is installed


@dataclass
class ArmConfig:
    """One model of a shared-randomness run: its own objective and optimiser overrides."""

    name: str = ""
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optim: dict[str, Any] = field(default_factory=dict)  # keys of OptimConfig
    momentum: float | None = None  # EMA target momentum of this arm (None: model.momentum)


@dataclass
class Config:
    """A full run.  ``arms`` empty: one model trained with ``objective``."""

    name: str | None = None  # run name (default: <data>-<objective>)
    out_dir: str = "runs"  # run directory parent (the CLI's --out overrides the full path)
    data: DataConfig = field(default_factory=DataConfig)
    views: ViewsConfig = field(default_factory=ViewsConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    arms: list[ArmConfig] = field(default_factory=list)


# ------------------------------------------------------------------------- loading


def _format_omegaconf_error(err: OmegaConfBaseException, prefix: str = "") -> ValueError:
    return format_error(err, Config, prefix, {"arms": ArmConfig})


def load_config(
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    *,
    base: dict[str, Any] | DictConfig | None = None,
    validate: bool = True,
) -> DictConfig:
    """The image task's schema: a recipe and overrides merged onto :class:`Config`, checked.

    Recipes of any task are read by :func:`spacl.tasks.load_recipe` (the CLI's way in),
    which calls this for ``task: image``; it uses the schema's one lookup and layering rule
    (:func:`spacl.schema.recipe_layer`).

    Args:
        path: a YAML recipe or a built-in recipe name (``None``: the schema defaults).
        overrides: dot-list ``key=value`` strings, applied last.
        base: a mapping merged under the recipe (e.g. a saved run's config).
        validate: run :func:`validate_config`.

    Returns a typed ``DictConfig`` (attribute access, e.g. ``cfg.optim.lr``).
    Raises ``ValueError`` naming the key for unknown keys, wrong types and impossible
    values, and ``FileNotFoundError`` for a missing recipe.
    """
    user = recipe_layer([base, path], overrides)
    data = user.get("data") if isinstance(user, DictConfig) else None
    root_missing = isinstance(data, DictConfig) and OmegaConf.is_missing(data, "root")
    task = user.pop("task", None) if isinstance(user, DictConfig) else None
    if task not in (None, "image"):  # kg / text recipes: spacl.tasks.load_recipe
        raise fail("task", task, "must be 'image' (or absent) for the image task")
    arms_raw = user.pop("arms", None) if isinstance(user, DictConfig) else None
    try:
        cfg = OmegaConf.merge(OmegaConf.structured(Config), user)
    except OmegaConfBaseException as err:
        raise _format_omegaconf_error(err) from err
    assert isinstance(cfg, DictConfig)
    if root_missing:  # checked after the merge, so that a mistyped key is named first
        raise ValueError(  # `root: ???`: a recipe for the user's own folder (imagefolder/*)
            "config key 'data.root' must be set: the folder of your images, one sub-folder "
            "per class (e.g. data.root=~/photos)"
        )
    if arms_raw is not None:
        if not isinstance(arms_raw, ListConfig):
            raise ValueError(f"config key 'arms' must be a list of arms, got {arms_raw!r}")
        arms = []
        for i, arm in enumerate(arms_raw):
            try:
                arm_cfg = OmegaConf.merge(OmegaConf.structured(ArmConfig), arm)
                OmegaConf.merge(cfg.optim, arm_cfg.optim)  # type-check the optimiser overrides
            except OmegaConfBaseException as err:
                raise _format_omegaconf_error(err, prefix=f"arms[{i}].") from err
            arms.append(arm_cfg)
        cfg.arms = arms
    if validate:
        validate_config(cfg)
    return cfg


@register_task("image", runner="spacl.tasks.image.trainer:train")
def image_config(recipe: DictConfig, overrides: Sequence[str] = ()) -> DictConfig:
    """The image task's entry in the recipe registry (:func:`spacl.tasks.load_recipe`):
    ``recipe`` (a read recipe, ``task: image`` or none) under ``overrides``, validated."""
    return load_config(None, overrides, base=recipe)


def config_to_dict(cfg: DictConfig) -> dict[str, Any]:
    """Plain nested ``dict`` of ``cfg`` (for checkpoints and ``config.yaml``)."""
    out = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(out, dict)
    return out  # type: ignore[return-value]


# ---------------------------------------------------------------------- validation


def validate_optim(optim: Any, prefix: str = "optim") -> None:
    """Check an optimiser section (also used for each arm's merged optimiser)."""
    from spacl.engine.optim import LR_SCALINGS, OPTIMIZERS

    choice(f"{prefix}.name", optim.name, OPTIMIZERS)
    positive(f"{prefix}.lr", optim.lr)
    choice(f"{prefix}.lr_scaling", optim.lr_scaling, LR_SCALINGS)
    int_at_least(f"{prefix}.reference_batch_size", optim.reference_batch_size, 1)
    in_range(f"{prefix}.weight_decay", optim.weight_decay, 0.0, float("inf"), high_open=True)
    in_range(f"{prefix}.momentum", optim.momentum, 0.0, 1.0, high_open=True)
    if len(optim.betas) != 2:
        raise fail(f"{prefix}.betas", list(optim.betas), "must be two numbers [beta1, beta2]")
    for i, b in enumerate(optim.betas):
        in_range(f"{prefix}.betas[{i}]", b, 0.0, 1.0, high_open=True)
    positive(f"{prefix}.trust_coefficient", optim.trust_coefficient)
    choice(f"{prefix}.schedule", optim.schedule, ("cosine", "constant"))
    in_range(f"{prefix}.warmup_epochs", optim.warmup_epochs, 0.0, float("inf"), high_open=True)
    in_range(f"{prefix}.min_lr_ratio", optim.min_lr_ratio, 0.0, 1.0)
    if optim.grad_clip is not None:
        positive(f"{prefix}.grad_clip", optim.grad_clip)


def _validate_views(v: Any, data_name: str) -> None:
    """The ``views`` section (the number of views and how they are made)."""
    int_at_least("views.num_views", v.num_views, 1)
    choice("views.augment", v.augment, AUGMENTS)
    if data_name == "imagefolder":
        choice("views.augment", v.augment, FOLDER_AUGMENTS, where=" for an image folder")
    in_range("views.augment_strength", v.augment_strength, 0.0, 1.0)
    in_range("views.color_strength", v.color_strength, 0.0, 1.0)
    if len(v.crop_scale) != 2 or not 0 < v.crop_scale[0] <= v.crop_scale[1] <= 1:
        raise fail(
            "views.crop_scale", list(v.crop_scale), "must be [low, high] with 0 < low <= high <= 1"
        )
    positive("views.noise_sigma", v.noise_sigma)


def validate_config(cfg: DictConfig) -> None:
    """Semantic checks, each raising ``ValueError`` that names the offending key.

    Runs before any data or model is built: impossible hyper-parameters, unknown
    names, a missing data directory and unknown objective parameters fail here.
    """
    from spacl.data import DATASET_NAMES
    from spacl.engine.optim import OPTIMIZERS

    validate_shared(cfg, optim_names=OPTIMIZERS, data_names=DATASET_NAMES, min_batch_size=2)
    _validate_views(cfg.views, cfg.data.name)
    _validate_data(cfg)
    _validate_model(cfg.model)
    _validate_train_eval(cfg)
    _validate_objectives(cfg)


def _validate_data(cfg: DictConfig) -> None:
    """``data.*``: the split, the synthetic set, the data directory, the label kind."""
    d = cfg.data
    choice("data.label_kind", d.label_kind, ("fine", "coarse"))
    if d.samples_per_class is not None:
        int_at_least("data.samples_per_class", d.samples_per_class, 1)
    in_range("data.test_fraction", d.test_fraction, 0.0, 1.0, high_open=True)
    if d.test_fraction == 0:
        raise fail("data.test_fraction", d.test_fraction, "must be > 0")
    int_at_least("data.image_size", d.image_size, 1)
    if d.num_workers is not None:
        int_at_least("data.num_workers", d.num_workers, 0)
    choice("data.bad_images", d.bad_images, ("error", "skip"))
    if d.name == "synthetic":
        s = d.synthetic
        int_at_least("data.synthetic.num_classes", s.num_classes, 2)
        int_at_least("data.synthetic.dim", s.dim, 1)
        int_at_least("data.synthetic.samples_per_class", s.samples_per_class, 2)
        in_range("data.synthetic.within_std", s.within_std, 0.0, float("inf"), high_open=True)
        positive("data.synthetic.center_scale", s.center_scale)
        if s.num_superclasses is not None:
            int_at_least("data.synthetic.num_superclasses", s.num_superclasses, 1)
    if d.name in ON_DISK_DATASETS and _CHECK_DATA_DIR.get():
        _validate_data_dir(cfg)
    if d.label_kind == "coarse":
        has_coarse = d.name == "cifar100" or (
            d.name == "synthetic" and d.synthetic.num_superclasses is not None
        )
        if not has_coarse:
            raise fail(
                "data.label_kind",
                "coarse",
                f"needs coarse labels, which dataset {d.name!r} lacks (use cifar100, or "
                "synthetic with data.synthetic.num_superclasses)",
            )


def _validate_data_dir(cfg: DictConfig) -> None:
    """An on-disk dataset's directory exists (an image folder: its train split too)."""
    from spacl.data import data_root

    d = cfg.data
    try:
        root = data_root(cfg)
    except FileNotFoundError as err:
        raise ValueError(f"config key 'data.root' is null and {err}") from None
    if root.is_file():
        raise ValueError(
            f"config key 'data.root': {str(root)!r} is a file, not a directory (for dataset "
            f"{d.name!r}: the folder that holds it; single images go to `spacl predict`)"
        )
    if not root.is_dir() and d.name == "imagefolder":  # the user's own folder: no data dir
        where = "" if root.is_absolute() else f", read from the current directory {Path.cwd()}"
        raise ValueError(
            f"config key 'data.root': image folder {str(root)!r} does not exist{where} (a "
            "typo? for a trained run moved since: set data.root=DIR to where it is now)"
        )
    if not root.is_dir():
        raise ValueError(
            f"config key 'data.root': directory {str(root)!r} for dataset {d.name!r} does "
            "not exist (set data.root=/path/to/data or the SPACL_DATA_DIR variable; "
            "`spacl data` lists every dataset's source and layout)"
        )
    # an image folder: root/<train_split> (+ root/<test_split>), or root holding the
    # class folders themselves (then split by data.test_fraction)
    train_dir, test_dir = root / d.train_split, root / d.test_split
    if d.name == "imagefolder" and test_dir.is_dir() and not train_dir.is_dir():
        raise ValueError(f"config key 'data.train_split': {str(train_dir)!r} is not a directory")


def _validate_model(m: Any) -> None:
    """``model.*``: backbone and head names, widths, the target's momentum."""
    from spacl.models import BACKBONES, HEAD_KINDS

    choice("model.backbone", m.backbone, BACKBONES)
    choice("model.head", m.head, HEAD_KINDS)
    int_at_least("model.proj_dim", m.proj_dim, 1)
    int_at_least("model.feature_dim", m.feature_dim, 1)
    if m.head_hidden_dim is not None:
        int_at_least("model.head_hidden_dim", m.head_hidden_dim, 1)
    for i, w in enumerate(m.hidden_dims):
        int_at_least(f"model.hidden_dims[{i}]", w, 1)
    if not m.channels:
        raise fail("model.channels", [], "must list at least one width")
    for i, w in enumerate(m.channels):
        int_at_least(f"model.channels[{i}]", w, 1)
    in_range("model.momentum", m.momentum, 0.0, 1.0, high_open=True)
    choice("model.momentum_schedule", m.momentum_schedule, ("constant", "cosine"))


def _validate_train_eval(cfg: DictConfig) -> None:
    """``optim.*``, ``train.*``, ``eval.*`` and ``log.*``."""
    t, e = cfg.train, cfg.eval
    validate_optim(cfg.optim)
    if t.max_steps is not None:
        int_at_least("train.max_steps", t.max_steps, 1)
    int_at_least("train.checkpoint_every", t.checkpoint_every, 0)
    int_at_least("train.log_every", t.log_every, 0)
    choice("train.precision", t.precision, PRECISIONS)
    if t.precision in ("bf16", "fp16") and t.device == "cpu":
        raise fail("train.precision", t.precision, "(mixed precision) needs a CUDA device")
    int_at_least("eval.every_epochs", e.every_epochs, 0)
    # "backbone" is "features" by the name embed, predict and .embed use for that output
    choice("eval.features", e.features, ("features", "backbone", "projections"))
    int_at_least("eval.knn_k", e.knn_k, 1)
    positive("eval.knn_t", e.knn_t)
    positive("eval.probe_weight_decay", e.probe_weight_decay)
    int_at_least("eval.probe_max_iter", e.probe_max_iter, 1)
    if e.max_train_samples is not None:
        int_at_least("eval.max_train_samples", e.max_train_samples, 1)
    if cfg.log.tensorboard:
        try:
            import torch.utils.tensorboard  # noqa: F401
        except ImportError:
            raise ValueError(
                "config key 'log.tensorboard' is true but TensorBoard is not installed "
                "(pip install tensorboard)"
            ) from None


def _validate_objectives(cfg: DictConfig) -> None:
    """The objective (its parameters built once, no data), or every arm's."""
    from spacl.tasks.image.objectives import check_objective

    if not cfg.arms:
        check_objective(cfg.objective, cfg, "objective")
    names = set()
    for i, arm in enumerate(cfg.arms):
        if not arm.name or not str(arm.name).replace("_", "").replace("-", "").isalnum():
            raise fail(
                f"arms[{i}].name", arm.name, "must be a non-empty name of letters, digits, - or _"
            )
        if arm.name in names:
            raise fail(f"arms[{i}].name", arm.name, "must be unique among the arms")
        names.add(arm.name)
        if arm.momentum is not None:
            in_range(f"arms[{i}].momentum", arm.momentum, 0.0, 1.0, high_open=True)
        check_objective(arm.objective, cfg, f"arms[{i}].objective", arm.momentum)
        validate_optim(OmegaConf.merge(cfg.optim, arm.optim), f"arms[{i}].optim")
