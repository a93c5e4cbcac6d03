"""Per-item multi-view datasets for ``DataLoader`` pipelines (PIL / on-disk path).

Use this path when data does not fit in memory as one tensor (ImageNet folders) or
when augmentation should run in CPU workers with torchvision transforms:

```python
plan = BatchPlan(len(base), batch_size, seed, rank=rank, world_size=world)
sampler = PlanBatchSampler(plan)
views = MultiViewDataset(base, simclr_transform(224), num_views=5, seed=seed,
                         original_transform=eval_transform(224))
loader = DataLoader(views, batch_sampler=sampler, collate_fn=collate_views, num_workers=8)
for epoch in range(epochs):
    sampler.set_epoch(epoch, start=0)   # start=k to resume inside an epoch
    for batch in loader:                 # spacl.data.Batch, views [b, V, C, H, W]
        ...
```

Determinism: the sampler yields ``(epoch, step, index)`` keys, so the instances of a
batch come from the same :class:`~spacl.data.sampling.BatchPlan` as ``ViewStream``
(seeded, resumable, rank-sliced), and the dataset needs no mutable epoch state (safe
with worker processes). View ``v`` of item ``index`` in step ``step`` of ``epoch`` is
produced under ``torch.random.fork_rng`` with torch's global seed set to
``derive_seed(seed, "item", epoch, step, index, v)``: torchvision's transforms draw
from the global RNG, the fork restores it afterwards, so nothing leaks to the caller
and the result does not depend on the worker, the rank or the order of loading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from .labeled import LabeledData
from .sampling import BatchPlan
from .seeding import derive_seed
from .stream import Batch
from .views import check_num_views

__all__ = ["MultiViewDataset", "PlanBatchSampler", "collate_views", "default_num_workers"]

Key = tuple[int, int, int]

#: the most ``DataLoader`` workers :func:`default_num_workers` chooses
MAX_DEFAULT_WORKERS = 8


def default_num_workers() -> int:
    """``DataLoader`` workers when a recipe leaves ``data.num_workers`` unset: what the
    machine has, ``min(8, os.cpu_count())`` (1 when the count is unknown), so a 2-core
    machine gets 2 and no oversubscription warning."""
    import os

    return max(1, min(MAX_DEFAULT_WORKERS, os.cpu_count() or 1))


class MultiViewDataset(Dataset[dict[str, Any]]):
    """Wrap a dataset so that each item is ``V`` independently augmented views.

    Args:
        base: a dataset of ``(image, label)`` pairs (e.g. ``ImageFolder``) or a
            :class:`LabeledData` (items are its ``[C, H, W]`` tensors in ``[0, 1]``,
            with coarse labels when it has them).
        transform: random transform producing one view (e.g. :func:`simclr_transform`).
        num_views: ``V``.
        seed: base seed for the per-item generators.
        original_transform: if given, view 0 is ``original_transform(image)`` (SPACL's
            un-augmented / centre-crop view) and views ``1..V-1`` use ``transform``.

    ``dataset[(epoch, step, index)]`` returns a dict with ``views [V, ...]``,
    ``label``, ``index``, ``epoch``, ``step`` and ``coarse_label`` (``-1`` if none).
    A plain ``dataset[index]`` means ``epoch = step = 0``.
    """

    def __init__(
        self,
        base: Dataset[Any] | LabeledData,
        transform: Callable[[Any], Tensor],
        num_views: int,
        seed: int = 0,
        original_transform: Callable[[Any], Tensor] | None = None,
    ) -> None:
        self.base = base
        self.transform = transform
        self.num_views = check_num_views(num_views)
        self.seed = int(seed)
        self.original_transform = original_transform

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def _item(self, index: int) -> tuple[Any, int, int]:
        if isinstance(self.base, LabeledData):
            coarse = self.base.coarse_labels
            return (
                self.base.inputs[index],
                int(self.base.labels[index]),
                -1 if coarse is None else int(coarse[index]),
            )
        image, label = self.base[index]
        return image, int(label), -1

    def __getitem__(self, key: int | Key) -> dict[str, Any]:
        if isinstance(key, tuple):
            epoch, step, index = (int(k) for k in key)
        else:
            epoch, step, index = 0, 0, int(key)
        image, label, coarse = self._item(index)
        views = []
        for v in range(self.num_views):
            fn = self.original_transform if v == 0 and self.original_transform else self.transform
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(derive_seed(self.seed, "item", epoch, step, index, v))
                views.append(fn(image))
        return {
            "views": torch.stack(views),
            "label": label,
            "coarse_label": coarse,
            "index": index,
            "epoch": epoch,
            "step": step,
        }


class PlanBatchSampler(Sampler[list[Key]]):
    """Batch sampler yielding this rank's ``(epoch, step, index)`` keys from a plan.

    ``set_epoch(epoch, start)`` selects the epoch and the first step (for resuming);
    iteration yields steps ``start, ..., len(plan) - 1``.
    """

    def __init__(self, plan: BatchPlan, epoch: int = 0, start: int = 0) -> None:
        self.plan = plan
        self.epoch = 0
        self.start = 0
        self.set_epoch(epoch, start)

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, got {epoch!r}")
        if not isinstance(start, int) or not 0 <= start <= len(self.plan):
            raise ValueError(f"start must be an int in [0, {len(self.plan)}], got {start!r}")
        self.epoch, self.start = epoch, start

    def __len__(self) -> int:
        return len(self.plan) - self.start

    def __iter__(self) -> Iterator[list[Key]]:
        for step in range(self.start, len(self.plan)):
            idx = self.plan.local_indices(self.epoch, step).tolist()
            yield [(self.epoch, step, i) for i in idx]


def collate_views(items: Sequence[dict[str, Any]]) -> Batch:
    """Stack :class:`MultiViewDataset` items into a :class:`Batch`."""
    if not items:
        raise ValueError("collate_views got an empty list of items")
    views = torch.stack([it["views"] for it in items])
    labels = torch.tensor([it["label"] for it in items], dtype=torch.long)
    coarse_list = [it["coarse_label"] for it in items]
    coarse = None if min(coarse_list) < 0 else torch.tensor(coarse_list, dtype=torch.long)
    index = torch.tensor([it["index"] for it in items], dtype=torch.long)
    return Batch(views, labels, coarse, index, int(items[0]["epoch"]), int(items[0]["step"]))
