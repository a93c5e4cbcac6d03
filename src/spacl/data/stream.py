"""``ViewStream``: the deterministic, resumable, rank-sliced multi-view batch stream.

Contract (what the training engine relies on):

* ``len(stream)`` is the number of batches per epoch.
* ``stream.epoch_batches(epoch, start=k)`` yields :class:`Batch` objects for steps
  ``k, k+1, ..., len-1`` of ``epoch``. Batch ``k`` of epoch ``e`` is a pure function of
  ``(seed, e, k)``: its instances come from :class:`~spacl.data.sampling.BatchPlan`
  and its views from a CPU ``torch.Generator`` seeded with
  ``derive_seed(seed, "views", e, k)``. Resuming at step ``k`` needs only the step
  counter; a stream started at ``start=k`` yields exactly the batches an
  uninterrupted stream yields from ``k`` on.
* Distributed: the GLOBAL batch (``batch_size * world_size`` instances and all their
  random view parameters) is drawn identically on every rank; rank ``r`` builds only
  the rows ``[r*b, (r+1)*b)``. Concatenating the ranks' batches in rank order equals
  the single-process batch of size ``W*b`` (same seed) exactly.
* Shared randomness (SPEC 3): two models fed by streams with the same data, seed and
  view maker see identical mini-batches and identical augmentation tensors.

Views are computed on ``data``'s device (move small datasets to the GPU with
``data.to("cuda")``); random parameters are always drawn on the CPU so a batch does
not depend on the device.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from .labeled import LabeledData
from .sampling import BatchPlan
from .seeding import generator_for
from .views import IdentityViews, ViewMaker, check_num_views

__all__ = ["Batch", "ViewStream"]


@dataclass(frozen=True)
class Batch:
    """One multi-view mini-batch.

    Attributes:
        views: ``Tensor[b, V, ...]`` (instance, view, input dims).
        labels: ``LongTensor[b]`` fine labels.
        coarse_labels: ``LongTensor[b]`` super-class labels, or ``None``.
        index: ``LongTensor[b]`` positions of the instances in the dataset.
        epoch, step: where the batch sits in the stream.
    """

    views: Tensor
    labels: Tensor
    coarse_labels: Tensor | None
    index: Tensor
    epoch: int = 0
    step: int = 0

    def __len__(self) -> int:
        return int(self.views.shape[0])

    @property
    def num_views(self) -> int:
        return int(self.views.shape[1])

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """Move every tensor to ``device``."""
        coarse = self.coarse_labels
        return Batch(
            self.views.to(device, non_blocking=non_blocking),
            self.labels.to(device, non_blocking=non_blocking),
            None if coarse is None else coarse.to(device, non_blocking=non_blocking),
            self.index.to(device, non_blocking=non_blocking),
            self.epoch,
            self.step,
        )


class ViewStream:
    """Deterministic multi-view batches over an in-memory :class:`LabeledData`.

    Args:
        data: the dataset.
        batch_size: per-rank batch size ``b >= 1``.
        num_views: views per instance ``V >= 1`` (SPACL: ``1 + M``, view 0 original).
        augment: a :class:`~spacl.data.views.ViewMaker` (``ImageAugment``,
            ``NoiseViews``, ``SameClassViews``, ...); ``None`` means identical copies.
        seed: base seed; batch ``k`` of epoch ``e`` depends on ``(seed, e, k)`` only.
        balanced: class-balanced batches (equal count per class, SPEC 3).
        samples_per_class: per-class count for balanced batches (default ``B / C``).
        drop_last: drop the incomplete last batch (required when ``world_size > 1``).
        rank, world_size: distributed slice, see the module docstring.
    """

    def __init__(
        self,
        data: LabeledData,
        batch_size: int,
        num_views: int,
        augment: ViewMaker | None = None,
        seed: int = 0,
        balanced: bool = False,
        drop_last: bool = True,
        rank: int = 0,
        world_size: int = 1,
        *,
        samples_per_class: int | None = None,
    ) -> None:
        if not isinstance(data, LabeledData):
            raise TypeError(f"data must be a LabeledData, got {type(data).__name__}")
        self.data = data
        self.num_views = check_num_views(num_views)
        self.augment: ViewMaker = IdentityViews() if augment is None else augment
        if not isinstance(self.augment, ViewMaker):
            raise TypeError(f"augment must be a ViewMaker or None, got {type(augment).__name__}")
        self.plan = BatchPlan(
            len(data),
            batch_size,
            seed,
            labels=data.labels,
            balanced=balanced,
            samples_per_class=samples_per_class,
            drop_last=drop_last,
            rank=rank,
            world_size=world_size,
        )

    @property
    def seed(self) -> int:
        return self.plan.seed

    @property
    def batch_size(self) -> int:
        return self.plan.batch_size

    @property
    def rank(self) -> int:
        return self.plan.rank

    @property
    def world_size(self) -> int:
        return self.plan.world_size

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self.plan)

    def epoch_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        """Yield this rank's batches ``start, ..., len(self)-1`` of ``epoch``."""
        if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= len(self):
            raise ValueError(f"start must be an int in [0, {len(self)}], got {start!r}")
        for step in range(start, len(self)):
            yield self.batch(epoch, step)

    def batch(self, epoch: int, step: int) -> Batch:
        """This rank's batch ``step`` of ``epoch`` (random access)."""
        return self._make(epoch, step, self.plan.rank_rows())

    def global_batch(self, epoch: int, step: int) -> Batch:
        """The whole ``W*b`` batch every rank draws (what rank slices concatenate to)."""
        return self._make(epoch, step, slice(None))

    def _make(self, epoch: int, step: int, rows: slice) -> Batch:
        index = self.plan.global_indices(epoch, step)
        gen = generator_for(self.plan.seed, "views", epoch, step)
        params = self.augment.sample(self.data, index, self.num_views, gen)
        local = index[rows]
        local_params = {k: v[rows] for k, v in params.items()}
        views = self.augment.apply(self.data, local, local_params)
        dev_index = local.to(self.data.device)
        coarse = self.data.coarse_labels
        return Batch(
            views=views,
            labels=self.data.labels[dev_index],
            coarse_labels=None if coarse is None else coarse[dev_index],
            index=dev_index,
            epoch=epoch,
            step=step,
        )

    def __repr__(self) -> str:
        return (
            f"ViewStream(data={self.data.name!r}, batch_size={self.batch_size}, "
            f"num_views={self.num_views}, augment={self.augment!r}, seed={self.seed}, "
            f"balanced={self.plan.balanced}, rank={self.rank}, world_size={self.world_size})"
        )
