"""View makers: turn a batch of instances into ``V`` views, ``Tensor[b, V, ...]``.

A view maker splits its work in two so that distributed runs are exact:

* ``sample(data, index, num_views, generator)`` draws *every* random quantity for
  the instances ``index`` (the GLOBAL batch) and returns them as a dict of tensors
  whose first dimension is ``len(index)``; it is the only place randomness enters.
* ``apply(data, index, params)`` is deterministic: it builds the views of the rows
  it is given. Rank ``r`` calls it with the rows of its own slice of ``index`` and
  of every ``params`` tensor, so a rank does the work for its ``b`` instances only,
  and concatenating the ranks' outputs reproduces the single-process batch exactly.

View convention (SPACL, SPEC 1.2): with ``keep_original=True`` view 0 is the
un-augmented instance ("the original view") and views ``1..V-1`` are random views,
so ``V = 1 + M``. With ``keep_original=False`` every view is random (SimCLR).

Makers here:

* :class:`IdentityViews` - every view is the instance itself (``V`` copies).
* :class:`NoiseViews` - additive Gaussian noise, ``x + sigma * eps`` (SPEC 2,
  "positives by additive Gaussian noise on the anchor").
* :class:`SameClassViews` - label-based positives (SPEC 2): view 0 is the instance,
  view ``v >= 1`` is ANOTHER sample of the same class drawn uniformly (excluding the
  instance itself when its class has another member). So ``views[i, v]`` for
  ``v >= 1`` is ``data.inputs[j]`` with ``labels[j] == labels[i]``, ``j != i``.
  This makes the label-based setting a plain multi-view batch ``[b, V, d]``: a
  loss that treats views of one row as positives gets same-class positives.
* ``spacl.data.image_augment.ImageAugment`` - batched SimCLR-style augmentation of
  image tensors.
"""

from __future__ import annotations

import abc

import torch
from torch import Tensor

from .._validation import check_flag, check_positive
from .labeled import LabeledData

__all__ = ["IdentityViews", "NoiseViews", "SameClassViews", "ViewMaker", "check_num_views"]

Params = dict[str, Tensor]


def check_num_views(num_views: object) -> int:
    """Require an int ``num_views >= 1``; ``ValueError`` naming the value otherwise."""
    if not isinstance(num_views, int) or isinstance(num_views, bool) or num_views < 1:
        raise ValueError(f"num_views must be an int >= 1, got {num_views!r}")
    return num_views


class ViewMaker(abc.ABC):
    """Base class: ``maker(data, index, num_views, generator) -> Tensor[b, V, ...]``."""

    keep_original: bool = True

    @abc.abstractmethod
    def sample(
        self, data: LabeledData, index: Tensor, num_views: int, generator: torch.Generator
    ) -> Params:
        """Draw the random parameters for instances ``index`` (first dim ``len(index)``).

        ``generator`` is a CPU generator; returned tensors live on the CPU.
        """

    @abc.abstractmethod
    def apply(self, data: LabeledData, index: Tensor, params: Params) -> Tensor:
        """Deterministically build ``Tensor[len(index), V, *data.input_shape]``."""

    def __call__(
        self, data: LabeledData, index: Tensor, num_views: int, generator: torch.Generator
    ) -> Tensor:
        params = self.sample(data, index, check_num_views(num_views), generator)
        return self.apply(data, index, params)


def num_views_from(params: Params) -> int:
    return int(params["num_views"].shape[1])


def views_marker(n: int, num_views: int) -> Tensor:
    # An empty [n, V] tensor that records V and slices with the batch.
    return torch.empty(n, num_views, 0)


class IdentityViews(ViewMaker):
    """``V`` identical copies of each instance (no randomness)."""

    def sample(
        self, data: LabeledData, index: Tensor, num_views: int, generator: torch.Generator
    ) -> Params:
        return {"num_views": views_marker(len(index), check_num_views(num_views))}

    def apply(self, data: LabeledData, index: Tensor, params: Params) -> Tensor:
        x = data.inputs[index.to(data.device)]
        v = num_views_from(params)
        return x.unsqueeze(1).expand(-1, v, *x.shape[1:]).clone()


class NoiseViews(ViewMaker):
    """Additive Gaussian noise views: ``view = x + sigma * eps``, ``eps ~ N(0, I)``.

    SPEC 2: positives "by additive Gaussian noise on the anchor". With
    ``keep_original=True`` (default) view 0 is the clean anchor ``x`` and views
    ``1..V-1`` are noisy copies; with ``keep_original=False`` all ``V`` views are noisy.
    The noise is drawn in float32 on the CPU generator and cast to the data dtype.
    """

    def __init__(self, sigma: float = 0.1, keep_original: bool = True) -> None:
        self.sigma = check_positive(sigma, "sigma")
        self.keep_original = check_flag(keep_original, "keep_original")

    def sample(
        self, data: LabeledData, index: Tensor, num_views: int, generator: torch.Generator
    ) -> Params:
        num_views = check_num_views(num_views)
        noisy = num_views - 1 if self.keep_original else num_views
        eps = torch.randn((len(index), noisy, *data.input_shape), generator=generator)
        return {"num_views": views_marker(len(index), num_views), "eps": eps}

    def apply(self, data: LabeledData, index: Tensor, params: Params) -> Tensor:
        x = data.inputs[index.to(data.device)].unsqueeze(1)
        eps = params["eps"].to(device=x.device, dtype=x.dtype)
        noisy = x + self.sigma * eps
        return torch.cat([x, noisy], dim=1) if self.keep_original else noisy

    def __repr__(self) -> str:
        return f"NoiseViews(sigma={self.sigma}, keep_original={self.keep_original})"


class SameClassViews(ViewMaker):
    """Label-based positives: views ``1..V-1`` are other samples of the same class.

    View 0 is the instance itself (``keep_original=True``, default) or, with
    ``keep_original=False``, also a random same-class sample. Partners are drawn
    uniformly with replacement among the class members other than the instance
    (the instance itself only if it is alone in its class).

    Vectorised: members are sorted by class once (cached per dataset); instance ``i``
    of class ``c`` with rank ``r_i`` among the ``n_c`` members gets partner rank
    ``(r_i + 1 + u) mod n_c`` with ``u`` uniform in ``{0, ..., n_c - 2}``.
    """

    def __init__(self, keep_original: bool = True) -> None:
        self.keep_original = check_flag(keep_original, "keep_original")
        self._cache_labels: Tensor | None = None  # strong reference: no id reuse
        self._cache: tuple[Tensor, Tensor, Tensor, Tensor, Tensor] | None = None

    def _class_tables(self, data: LabeledData) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        if self._cache_labels is not data.labels or self._cache is None:
            labels = data.labels.cpu()
            order = torch.argsort(labels, stable=True)
            counts = torch.bincount(labels, minlength=data.num_classes)
            starts = torch.cumsum(counts, 0) - counts
            rank = torch.empty_like(order)
            rank[order] = torch.arange(len(labels)) - starts[labels[order]]
            self._cache = (labels, order, counts, starts, rank)
            self._cache_labels = data.labels
        return self._cache

    def sample(
        self, data: LabeledData, index: Tensor, num_views: int, generator: torch.Generator
    ) -> Params:
        num_views = check_num_views(num_views)
        labels, order, counts, starts, rank = self._class_tables(data)
        idx = index.cpu()
        lab = labels[idx]
        n_c = counts[lab].unsqueeze(1)  # [b, 1]
        drawn = num_views - 1 if self.keep_original else num_views
        u = torch.rand((len(idx), drawn), generator=generator, dtype=torch.float64)
        others = (n_c - 1).clamp(min=1)
        offset = torch.floor(u * others).long().clamp(max=others - 1)
        alone = n_c == 1
        partner_rank = torch.where(
            alone, rank[idx].unsqueeze(1), (rank[idx].unsqueeze(1) + 1 + offset) % n_c
        )
        partners = order[starts[lab].unsqueeze(1) + partner_rank]
        if self.keep_original:
            partners = torch.cat([idx.unsqueeze(1), partners], dim=1)
        return {"partners": partners}

    def apply(self, data: LabeledData, index: Tensor, params: Params) -> Tensor:
        partners = params["partners"].to(data.device)
        b, v = partners.shape
        return data.inputs[partners.reshape(-1)].reshape(b, v, *data.input_shape)

    def __repr__(self) -> str:
        return f"SameClassViews(keep_original={self.keep_original})"
