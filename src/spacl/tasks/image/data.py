"""Build the training stream and the evaluation sets of a run from its config.

Two paths, one interface (``len(stream)`` batches per epoch,
``stream.epoch_batches(epoch, start)`` yielding :class:`spacl.data.Batch`):

* in memory (synthetic, digits, MNIST-5k, CIFAR): :class:`spacl.data.ViewStream` with a
  batched view maker — views are built on the data's device (the GPU when
  ``data.on_device``);
* on disk (``imagefolder``, e.g. ImageNet-100): :class:`LoaderStream`, a ``DataLoader``
  with worker processes over :class:`spacl.data.MultiViewDataset` and
  :class:`spacl.data.PlanBatchSampler` — the same seeded, resumable, rank-sliced plan.

Evaluation inputs get the deterministic part of the training transform only (the
normalisation; for image folders the centre crop), never augmentation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from spacl._validation import check_choice
from spacl.data import (
    Batch,
    IdentityViews,
    ImageAugment,
    LabeledData,
    MultiViewDataset,
    NoiseViews,
    PlanBatchSampler,
    SameClassViews,
    ViewMaker,
    ViewStream,
    collate_views,
    data_root,
    default_num_workers,
    eval_transform,
    get_dataset,
    simclr_transform,
)
from spacl.data.sampling import BatchPlan
from spacl.data.transforms import IMAGENET_MEAN, IMAGENET_STD
from spacl.engine.interrupt import end_workers_at_exit, leave_signals_to_the_main_process
from spacl.tasks.image.config import FOLDER_AUGMENTS

__all__ = ["LoaderStream", "RunData", "build_run_data", "folder_splits"]


class LoaderStream:
    """``ViewStream``'s interface over a ``DataLoader`` (on-disk data, CPU workers)."""

    def __init__(
        self, dataset: MultiViewDataset, plan: BatchPlan, num_workers: int, pin: bool
    ) -> None:
        self.plan = plan
        self.sampler = PlanBatchSampler(plan)
        if num_workers > 0:
            end_workers_at_exit()
        self.loader = DataLoader(
            dataset,
            batch_sampler=self.sampler,
            collate_fn=collate_views,
            num_workers=num_workers,
            pin_memory=pin,
            persistent_workers=num_workers > 0,
            worker_init_fn=leave_signals_to_the_main_process,
        )

    def __len__(self) -> int:
        return len(self.plan)

    def epoch_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        self.sampler.set_epoch(epoch, start)
        yield from self.loader


_logger = logging.getLogger(__name__)

#: per-channel ``(mean, std)`` of a normalisation
Normalization = tuple[tuple[float, ...], tuple[float, ...]]


@dataclass
class RunData:
    """Everything data-related a run needs."""

    stream: ViewStream | LoaderStream
    train_eval: Any  # LabeledData or an iterable of (inputs, labels) batches
    test_eval: Any
    eval_transform: Callable[[Tensor], Tensor] | None
    num_classes: int
    input_shape: tuple[int, ...]
    name: str
    #: per-channel ``(mean, std)`` of the evaluation normalisation (tensor datasets), or None
    normalization: Normalization | None = None
    #: the names of the classes in label order (folder names, CIFAR's), or None
    class_names: tuple[str, ...] | None = None
    #: the global batch trained on when it is not ``train.batch_size`` (an image folder
    #: with fewer training images: :func:`capped_batch_note`), else None
    batch_size: int | None = None
    #: why ``batch_size`` differs from ``train.batch_size`` (one line), else None
    batch_note: str | None = None


def _dataset_kwargs(cfg: Any) -> dict[str, Any]:
    d = cfg.data
    if d.name == "synthetic":
        s = d.synthetic
        return {
            "num_classes": s.num_classes,
            "dim": s.dim,
            "samples_per_class": s.samples_per_class,
            "within_std": s.within_std,
            "center_scale": s.center_scale,
            "seed": d.split_seed,
            "num_superclasses": s.num_superclasses,
            "test_fraction": d.test_fraction,
            "split_seed": d.split_seed,
        }
    if d.name in ("digits", "mnist5k"):
        return {"test_fraction": d.test_fraction, "split_seed": d.split_seed}
    return {}


def _load(cfg: Any, split: str) -> Any:
    d = cfg.data
    root = data_root(cfg) if d.name in ("cifar10", "cifar100", "imagefolder") else None
    try:
        return get_dataset(d.name, root, split, **_dataset_kwargs(cfg))
    except FileNotFoundError as err:
        raise ValueError(f"config key 'data.root': {err}") from err


def _channel_stats(inputs: Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x = inputs.transpose(0, 1).reshape(inputs.shape[1], -1).to(torch.float64)
    std = x.std(1, unbiased=False).clamp_min(1e-6)
    return tuple(float(v) for v in x.mean(1)), tuple(float(v) for v in std)


def _normalizer(mean: tuple[float, ...], std: tuple[float, ...]) -> Callable[[Tensor], Tensor]:
    def normalize(x: Tensor) -> Tensor:
        shape = (1, len(mean)) + (1,) * (x.ndim - 2)
        m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(shape)
        s = torch.tensor(std, dtype=x.dtype, device=x.device).view(shape)
        return (x - m) / s

    return normalize


def _view_maker(
    cfg: Any, train: LabeledData
) -> tuple[ViewMaker, Callable[[Tensor], Tensor] | None, Normalization | None]:
    """The view maker, the evaluation transform and its ``(mean, std)`` (or None)."""
    d, v = cfg.data, cfg.views
    is_image = train.inputs.ndim == 4
    kind = v.augment if v.augment != "auto" else ("image" if is_image else "noise")
    mean = std = None
    transform = None
    if is_image and d.normalize:
        mean, std = _channel_stats(train.inputs)
        transform = _normalizer(mean, std)
    if kind == "image":
        if not is_image:
            raise ValueError(
                f"config key 'views.augment': 'image' needs images [N, C, H, W], dataset "
                f"{d.name!r} has inputs of shape {tuple(train.inputs.shape[1:])}"
            )
        s = v.color_strength
        maker: ViewMaker = ImageAugment(
            strength=v.augment_strength,
            scale=(float(v.crop_scale[0]), float(v.crop_scale[1])),
            flip_p=0.5 if v.flip else 0.0,
            jitter=(0.8 * s, 0.8 * s, 0.8 * s, 0.2 * s),
            blur_p=0.5 if v.blur else 0.0,
            mean=mean,
            std=std,
            keep_original=v.keep_original,
        )
        return maker, transform, None if mean is None or std is None else (mean, std)
    if transform is not None:
        raise ValueError(
            f"config key 'views.augment'={kind!r} does not normalise images; use "
            "views.augment=image or set data.normalize=false"
        )
    if kind == "noise":
        return NoiseViews(v.noise_sigma, keep_original=v.keep_original), None, None
    if kind == "same_class":
        return SameClassViews(keep_original=v.keep_original), None, None
    return IdentityViews(), None, None


def _check_labels(cfg: Any, train: LabeledData) -> LabeledData:
    if cfg.data.label_kind == "coarse":
        if train.coarse_labels is None:
            raise ValueError(
                f"config key 'data.label_kind': dataset {train.name!r} has no coarse labels"
            )
    return train


def build_run_data(
    cfg: Any,
    *,
    device: torch.device,
    dtype: torch.dtype,
    rank: int = 0,
    world_size: int = 1,
    run_dir: str | Path | None = None,
    record_split: bool = False,
) -> RunData:
    """Load the data of ``cfg`` and build this rank's stream (``ValueError`` naming keys).

    An image folder's split is recorded in ``run_dir`` (``record_split``: a fresh run) or
    held to the record there (resume, eval); see :func:`folder_splits`.
    """
    d, t = cfg.data, cfg.train
    if t.batch_size % world_size:
        raise ValueError(
            f"config key 'train.batch_size'={t.batch_size} (the global batch) must be divisible "
            f"by the number of processes {world_size}"
        )
    per_rank = t.batch_size // world_size
    if d.name == "imagefolder":
        return _build_folder_data(cfg, per_rank, rank, world_size, device, run_dir, record_split)
    train = _check_labels(cfg, _load(cfg, d.train_split))
    test = _load(cfg, d.test_split)
    train = LabeledData(
        train.inputs.to(dtype),
        train.labels,
        train.coarse_labels,
        train.num_classes,
        train.name,
        train.class_names,
    )
    test = LabeledData(
        test.inputs.to(dtype), test.labels, test.coarse_labels, test.num_classes, test.name
    )
    if d.on_device and device.type != "cpu":
        train, test = train.to(device), test.to(device)
    maker, transform, stats = _view_maker(cfg, train)
    try:
        stream = ViewStream(
            train,
            per_rank,
            cfg.views.num_views,
            maker,
            seed=t.seed,
            balanced=d.balanced,
            drop_last=t.drop_last,
            rank=rank,
            world_size=world_size,
            samples_per_class=d.samples_per_class,
        )
    except ValueError as err:
        raise ValueError(
            f"config key 'train.batch_size' / 'train.drop_last' / 'data': {err}"
        ) from err
    return RunData(
        stream,
        train,
        test,
        transform,
        train.num_classes,
        tuple(train.inputs.shape[1:]),
        train.name,
        stats,
        train.class_names,
    )


class _FolderEval(Iterable[tuple[Tensor, Tensor]]):
    def __init__(self, dataset: Any, batch_size: int, workers: int) -> None:
        if workers > 0:
            end_workers_at_exit()
        self.loader = DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=False,
            num_workers=workers,
            worker_init_fn=leave_signals_to_the_main_process,
        )

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        yield from self.loader


def folder_splits(
    cfg: Any, run_dir: str | Path | None = None, record: bool = False
) -> tuple[Any, Any]:
    """``(train, test)`` ImageFolders (PIL images) of ``data.root``, unreadable files handled.

    ``root/<train_split>`` and ``root/<test_split>`` when both exist; a folder without
    ``<test_split>`` (``root/<train_split>`` or, without it, ``root`` itself holding the
    class folders) is split by ``data.test_fraction`` (stratified, ``data.split_seed``).

    With ``run_dir``: ``record`` writes the split to ``run_dir/split.json`` (a fresh run);
    otherwise the split is held to that record when it exists (resume, eval, embed): a
    folder whose files changed since training raises a one-line ``ValueError``.  The note
    that a folder without ``<test_split>`` was split is logged when the split is made
    (``record``, or no ``run_dir``), not each time a run reads it again.
    """
    from spacl.data import load_imagefolder, stratified_indices
    from spacl.data.imagefolder import (
        SPLIT_RECORD,
        align_classes,
        check_class_count,
        check_images,
        check_split_record,
        subset,
        write_split_record,
    )

    d = cfg.data
    root = data_root(cfg)
    has_train, has_test = (root / d.train_split).is_dir(), (root / d.test_split).is_dir()
    try:
        train = load_imagefolder(root, d.train_split if has_train or has_test else None)
    except FileNotFoundError as err:
        raise ValueError(f"config key 'data.root': {err}") from err
    check_class_count(train, root / d.train_split if has_train or has_test else root)
    skipped = check_images(train, d.bad_images)
    if has_test:
        test = load_imagefolder(root, d.test_split)
        test = align_classes(test, train.classes, root / d.test_split)
        skipped += check_images(test, d.bad_images)
    else:
        tr, te = stratified_indices(
            torch.tensor(train.targets), d.test_fraction, d.split_seed, len(train.classes)
        )
        train, test = subset(train, tr.tolist()), subset(train, te.tolist())
    if skipped:
        _logger.warning("data.bad_images=skip: left out %d unreadable image(s)", skipped)
    if not len(train) or not len(test):
        raise ValueError(f"config key 'data.root': {root} gives an empty train or test split")
    if run_dir is not None:  # checked before any note: a refused folder is one line
        record_path = Path(run_dir) / SPLIT_RECORD
        if record:
            write_split_record(record_path, train, test, root)
        else:
            check_split_record(record_path, train, test, root)
    if not has_test and (record or run_dir is None):  # once: when the split is made
        _logger.info(
            "%s has no %r folder: %d images held out as the test split (data.test_fraction=%s)",
            root,
            d.test_split,
            len(test),
            d.test_fraction,
        )
    return train, test


def capped_batch_note(configured: int, num_images: int, used: int) -> str:
    """The one line saying a run's batch was cut to its data (logged as training starts,
    kept in the run's ``config.yaml`` and ``summary.md``).

    Example:
        >>> capped_batch_note(64, 24, 24)
        'train.batch_size=64 is more than the 24 training images: batches of 24'
    """
    return (
        f"train.batch_size={configured} is more than the {num_images} training images: "
        f"batches of {used}"
    )


def _capped_batch(per_rank: int, num_images: int, world_size: int, note: bool = True) -> int:
    """The per-process batch, cut to the training images when there are fewer (a note
    when training starts, ``note``; not when a finished run's data is read again)."""
    fits = max(2, num_images // world_size)
    if per_rank <= fits:
        return per_rank
    line = capped_batch_note(per_rank * world_size, num_images, fits * world_size)
    (_logger.warning if note else _logger.debug)("%s", line)
    return fits


def _build_folder_data(
    cfg: Any,
    per_rank: int,
    rank: int,
    world_size: int,
    device: torch.device,
    run_dir: str | Path | None = None,
    record_split: bool = False,
) -> RunData:
    from spacl.data.imagefolder import subset

    d, t = cfg.data, cfg.train
    root = data_root(cfg)
    base, test = folder_splits(cfg, run_dir, record_split)
    size = int(d.image_size)
    v = cfg.views
    train_transform, evaluate, norm = _folder_transforms(d, v)
    original = evaluate if v.keep_original else None
    views = MultiViewDataset(
        base, train_transform, v.num_views, seed=t.seed, original_transform=original
    )
    labels = torch.as_tensor(getattr(base, "targets", []), dtype=torch.long)
    # noted once, as training starts (not again by eval, embed or a resume of the run)
    configured = per_rank
    per_rank = _capped_batch(per_rank, len(base), world_size, record_split or run_dir is None)
    used, note = None, None
    if per_rank != configured:  # the run's records say so (config.yaml, summary.md)
        used = per_rank * world_size
        note = capped_batch_note(configured * world_size, len(base), used)
    try:
        plan = BatchPlan(
            len(base),
            per_rank,
            t.seed,
            labels=labels if d.balanced else None,
            balanced=d.balanced,
            samples_per_class=d.samples_per_class,
            drop_last=t.drop_last,
            rank=rank,
            world_size=world_size,
        )
    except ValueError as err:
        raise ValueError(
            f"config key 'train.batch_size' / 'train.drop_last' / 'data': {err}"
        ) from err
    workers = default_num_workers() if d.num_workers is None else int(d.num_workers)
    stream = LoaderStream(views, plan, workers, pin=device.type == "cuda")
    every = range(len(base))
    train_eval = _FolderEval(subset(base, every, evaluate), cfg.eval.batch_size, workers)
    test_eval = _FolderEval(subset(test, range(len(test)), evaluate), cfg.eval.batch_size, workers)
    num_classes = len(getattr(base, "classes", [])) or int(labels.max()) + 1
    return RunData(
        stream,
        train_eval,
        test_eval,
        None,
        num_classes,
        (3, size, size),
        f"imagefolder-{root.name}",
        norm,
        tuple(base.classes) if getattr(base, "classes", None) else None,
        batch_size=used,
        batch_note=note,
    )


def _folder_transforms(
    d: Any, v: Any
) -> tuple[Callable[..., Any], Callable[..., Any], Normalization | None]:
    """``(training view transform, evaluation transform, (mean, std) or None)`` of an image
    folder, from the same keys as the in-memory path: ``views.augment`` (``auto`` / ``image``:
    SimCLR's pipeline; ``identity``: every view is the evaluation view, a centre crop),
    ``views.flip``, ``views.augment_strength``, ``data.normalize`` (ImageNet mean / std, or
    none) and the crop / colour / blur keys."""
    size = int(d.image_size)
    kind = "image" if v.augment == "auto" else str(v.augment)
    check_choice(kind, "config key 'views.augment'", FOLDER_AUGMENTS, where=" for an image folder")
    norm: Normalization | None = (IMAGENET_MEAN, IMAGENET_STD) if d.normalize else None
    mean, std = norm if norm is not None else (None, None)
    evaluate = eval_transform(size, mean=mean, std=std)
    if kind == "identity":
        return evaluate, evaluate, norm
    train = simclr_transform(
        size,
        strength=v.color_strength,
        scale=(float(v.crop_scale[0]), float(v.crop_scale[1])),
        blur=v.blur,
        mean=mean,
        std=std,
        flip_p=0.5 if v.flip else 0.0,
        augment_strength=float(v.augment_strength),
    )
    return train, evaluate, norm
