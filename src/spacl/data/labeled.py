"""``LabeledData``: the in-memory dataset every loader returns, and a stratified split."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .._validation import check_in_range, check_tensor
from .seeding import generator_for

__all__ = ["LabeledData", "stratified_indices", "stratified_split"]


@dataclass(frozen=True)
class LabeledData:
    """An in-memory labelled dataset (a richer ``TensorDataset``).

    Attributes:
        inputs: ``Tensor[N, ...]`` floating point. Images are ``[N, C, H, W]`` with
            values in ``[0, 1]`` (un-normalised; normalisation belongs to the view
            maker); vectors are ``[N, d]``.
        labels: ``LongTensor[N]`` with values in ``[0, num_classes)``.
        coarse_labels: ``LongTensor[N]`` of super-class labels (CIFAR-100's 20 coarse
            classes, used for weak supervision) or ``None``.
        num_classes: number of fine classes ``C``.
        name: short identifier (``"digits"``, ``"cifar100-train"``, ...).
        class_names: optional names of the fine classes.

    ``len(data)`` is ``N``; ``data[i]`` (int, slice, index tensor) returns a subset.
    """

    inputs: Tensor
    labels: Tensor
    coarse_labels: Tensor | None
    num_classes: int
    name: str
    class_names: tuple[str, ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_tensor(self.inputs, "inputs")
        if self.inputs.ndim < 2:
            raise ValueError(
                f"inputs must be [N, ...] with ndim >= 2, got {tuple(self.inputs.shape)}"
            )
        n = self.inputs.shape[0]
        if not isinstance(self.num_classes, int) or self.num_classes < 1:
            raise ValueError(f"num_classes must be a positive int, got {self.num_classes!r}")
        _check_label_vector(self.labels, n, "labels", self.num_classes)
        if self.coarse_labels is not None:
            _check_label_vector(self.coarse_labels, n, "coarse_labels", None)
        if self.class_names is not None and len(self.class_names) != self.num_classes:
            raise ValueError(
                f"class_names has {len(self.class_names)} entries, num_classes={self.num_classes}"
            )

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def __repr__(self) -> str:
        coarse = "None" if self.coarse_labels is None else f"[{self.num_coarse_classes} classes]"
        return (
            f"LabeledData(name={self.name!r}, n={len(self)}, input_shape={self.input_shape}, "
            f"dtype={self.inputs.dtype}, num_classes={self.num_classes}, coarse_labels={coarse}, "
            f"device={self.device})"
        )

    def __getitem__(self, index: int | slice | Tensor) -> LabeledData:
        if isinstance(index, int):
            index = slice(index, index + 1) if index != -1 else slice(-1, None)
        coarse = None if self.coarse_labels is None else self.coarse_labels[index]
        return LabeledData(
            self.inputs[index],
            self.labels[index],
            coarse,
            self.num_classes,
            self.name,
            self.class_names,
        )

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input, e.g. ``(1, 8, 8)`` for digits."""
        return tuple(self.inputs.shape[1:])

    @property
    def num_coarse_classes(self) -> int | None:
        """``max(coarse_labels) + 1`` or ``None`` without coarse labels."""
        if self.coarse_labels is None or len(self) == 0:
            return None
        return int(self.coarse_labels.max()) + 1

    @property
    def device(self) -> torch.device:
        return self.inputs.device

    def class_counts(self) -> Tensor:
        """``LongTensor[num_classes]``: number of samples per fine class."""
        return torch.bincount(self.labels, minlength=self.num_classes)

    def to(self, device: torch.device | str) -> LabeledData:
        """Copy to ``device`` (e.g. keep a whole small dataset on the GPU)."""
        coarse = None if self.coarse_labels is None else self.coarse_labels.to(device)
        return LabeledData(
            self.inputs.to(device),
            self.labels.to(device),
            coarse,
            self.num_classes,
            self.name,
            self.class_names,
        )

    def with_name(self, name: str) -> LabeledData:
        return LabeledData(
            self.inputs, self.labels, self.coarse_labels, self.num_classes, name, self.class_names
        )


def _check_label_vector(labels: object, n: int, name: str, num_classes: int | None) -> None:
    if not isinstance(labels, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(labels).__name__}")
    if labels.dtype != torch.long:
        raise TypeError(f"{name} must have dtype torch.long, got {labels.dtype}")
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), got {tuple(labels.shape)}")
    if n == 0:
        return
    lo, hi = int(labels.min()), int(labels.max())
    if lo < 0 or (num_classes is not None and hi >= num_classes):
        bound = "" if num_classes is None else f" < num_classes={num_classes}"
        raise ValueError(f"{name} must be >= 0{bound}, found range [{lo}, {hi}]")


def stratified_split(
    data: LabeledData, test_fraction: float = 0.2, seed: int = 0
) -> tuple[LabeledData, LabeledData]:
    """Split ``data`` into ``(train, test)`` with the same class proportions in both.

    The indices of :func:`stratified_indices`; both parts keep the original order.
    """
    train_idx, test_idx = stratified_indices(data.labels, test_fraction, seed, data.num_classes)
    return (
        data[train_idx.to(data.device)].with_name(f"{data.name}-train"),
        data[test_idx.to(data.device)].with_name(f"{data.name}-test"),
    )


def stratified_indices(
    labels: Tensor, test_fraction: float = 0.2, seed: int = 0, num_classes: int | None = None
) -> tuple[Tensor, Tensor]:
    """``(train indices, test indices)`` (CPU, increasing) of a stratified split of ``labels``.

    For each class with ``n_c`` samples, ``round(test_fraction * n_c)`` go to the test
    set, chosen by a permutation from ``generator_for(seed, "split")``; the rest train.
    Deterministic in ``seed``. Vectorised: one random key per sample, a stable sort by
    ``(class, key)`` and a per-class rank.
    """
    check_in_range(
        test_fraction, "test_fraction", 0.0, 1.0, low_inclusive=False, high_inclusive=False
    )
    gen = generator_for(seed, "split")
    labels = torch.as_tensor(labels).cpu().long()
    n = labels.numel()
    keys = torch.rand(n, generator=gen, dtype=torch.float64)
    # Sort by class, then by random key: a random order inside each class.
    order = torch.argsort(keys)
    order = order[torch.argsort(labels[order], stable=True)]
    counts = torch.bincount(labels, minlength=num_classes or 0)
    starts = torch.cumsum(counts, 0) - counts
    rank_in_class = torch.arange(n) - starts[labels[order]]
    n_test = torch.round(counts.double() * test_fraction).long()
    is_test_sorted = rank_in_class < n_test[labels[order]]
    is_test = torch.zeros(n, dtype=torch.bool)
    is_test[order] = is_test_sorted
    return torch.nonzero(~is_test).squeeze(1), torch.nonzero(is_test).squeeze(1)
