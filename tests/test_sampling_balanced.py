"""Class-balanced batches hold ``B / m`` distinct classes, ``m`` of each, never one class."""

from __future__ import annotations

import pytest
import torch

from spacl.data.sampling import BatchPlan


def labels_of(counts: list[int], seed: int = 0) -> torch.Tensor:
    """Shuffled labels, ``counts[c]`` of class ``c``."""
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
    return y[torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))]


@pytest.mark.parametrize(
    ("counts", "batch", "m", "world"),
    [
        ([40, 25, 60, 9, 30], 8, 2, 1),  # the fine-tune protocol: batch 8 over 5 classes
        ([40, 25, 60, 9, 30], 8, 4, 1),
        ([12, 50, 7], 6, 3, 1),  # 3 classes (the auxiliary fine-tune), 2 per batch
        ([30, 30, 30, 30], 4, 2, 2),  # two ranks of 4: global batch 8, 4 classes of 2
    ],
)
def test_every_balanced_batch_holds_m_of_each_of_b_over_m_classes(
    counts: list[int], batch: int, m: int, world: int
) -> None:
    y = labels_of(counts)
    plan = BatchPlan(
        len(y), batch, seed=3, labels=y, balanced=True, samples_per_class=m, world_size=world
    )
    big = batch * world
    for epoch in range(3):
        for step in range(len(plan)):
            idx = plan.global_indices(epoch, step)
            assert idx.numel() == big and idx.unique().numel() == big  # no repeats
            per_class = torch.bincount(y[idx], minlength=len(counts))
            present = per_class[per_class > 0]
            assert present.numel() == big // m >= 2
            assert bool((present == m).all())


def test_one_class_batches_are_refused() -> None:
    y = labels_of([40, 25, 60])
    with pytest.raises(ValueError, match="hold 1 class"):
        BatchPlan(len(y), 8, labels=y, balanced=True, samples_per_class=8)
    with pytest.raises(ValueError, match=r"fewer than min_classes=4.*lower samples_per_class"):
        BatchPlan(len(y), 8, labels=y, balanced=True, samples_per_class=4, min_classes=4)
    one = torch.zeros(20, dtype=torch.long)
    with pytest.raises(ValueError, match="the labels hold 1"):
        BatchPlan(20, 4, labels=one, balanced=True)
    with pytest.raises(ValueError, match="min_classes must be an int >= 1, got 0"):
        BatchPlan(len(y), 8, labels=y, balanced=True, samples_per_class=2, min_classes=0)
    # min_classes=1 keeps one-class batches available on request
    plan = BatchPlan(len(y), 8, labels=y, balanced=True, samples_per_class=8, min_classes=1)
    assert torch.bincount(y[plan.global_indices(0, 0)]).count_nonzero() == 1


def test_uniform_batches_of_eight_can_hold_one_class() -> None:
    # why the balanced plan: with 3 classes, uniform batches of 8 sometimes hold one class
    y = labels_of([300, 20, 20])
    plan = BatchPlan(len(y), 8, seed=0, labels=y)
    single = sum(
        int(torch.unique(y[plan.global_indices(e, s)]).numel() == 1)
        for e in range(5)
        for s in range(len(plan))
    )
    assert single > 0
