"""``BatchPlan``: which instances make up batch ``k`` of epoch ``e``, as a pure function.

Two samplers, both deterministic in ``(seed, epoch, step)``:

* uniform (default): one permutation of ``range(N)`` per epoch, from
  ``generator_for(seed, "perm", epoch)``; global batch ``k`` is its slice
  ``[k*B, (k+1)*B)`` with ``B = batch_size * world_size``. Every instance appears at
  most once per epoch.
* class-balanced (``balanced=True``, SPEC 3 "shared randomness"): every global batch
  holds exactly ``m`` instances of each of ``B/m`` classes. ``m = samples_per_class``,
  or ``B / C`` when not given (then ``B`` must be a multiple of the number of
  non-empty classes ``C``). Per epoch, each class's members are shuffled (one random
  key per sample from ``generator_for(seed, "perm", epoch)``); batch ``k`` takes
  positions ``k*m ... k*m+m-1`` (modulo the class size) of each chosen class, so
  small classes cycle. When ``B/m < C`` the classes are a random subset drawn from
  ``generator_for(seed, "classes", epoch, k)``. The batch order is then shuffled by
  ``generator_for(seed, "shuffle", epoch, k)`` so every rank's slice mixes classes.
  Epoch length is ``N // B``.  Every balanced batch therefore holds ``B/m`` distinct
  classes, and ``B/m >= min_classes`` (default 2) is required: a contrastive batch of
  one class has no negative pair for most losses (issue 18: at batch 8, a one-class
  batch stopped about 1 fine-tuned run in 4).  For batch 8 over ``C >= 4``
  classes, ``samples_per_class=2`` gives 4 classes of 2.

Distributed contract: the GLOBAL batch is drawn identically on every rank, and rank
``r`` takes the contiguous rows ``[r*b, (r+1)*b)``. Concatenating the ranks' batches
in rank order reproduces the single-process batch of size ``W*b`` exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._validation import check_flag
from .seeding import generator_for

__all__ = ["BatchPlan"]


def _check_int(value: object, name: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


class BatchPlan:
    """Index plan of a seeded, resumable, rank-sliced batch stream.

    Args:
        num_samples: dataset size ``N``.
        batch_size: per-rank batch size ``b`` (global batch ``B = b * world_size``).
        seed: base seed.
        labels: ``LongTensor[N]``, required when ``balanced=True``.
        balanced: class-balanced batches (see module docstring).
        samples_per_class: ``m`` for balanced batches (default ``B / C``).
        min_classes: fewest distinct classes in a balanced batch (``B / m``); a plan that
            would hold fewer raises ``ValueError``.
        drop_last: drop the last incomplete batch (uniform sampler). Must be ``True``
            when ``world_size > 1`` so that every rank gets ``b`` rows.
        rank, world_size: this process's rank and the number of processes.
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        seed: int = 0,
        *,
        labels: Tensor | None = None,
        balanced: bool = False,
        samples_per_class: int | None = None,
        min_classes: int = 2,
        drop_last: bool = True,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.num_samples = _check_int(num_samples, "num_samples", 1)
        self.batch_size = _check_int(batch_size, "batch_size", 1)
        self.world_size = _check_int(world_size, "world_size", 1)
        self.rank = _check_int(rank, "rank", 0)
        if self.rank >= self.world_size:
            raise ValueError(f"rank must be < world_size={world_size}, got {rank}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.seed = seed
        self.balanced = check_flag(balanced, "balanced")
        self.drop_last = check_flag(drop_last, "drop_last")
        if self.world_size > 1 and not self.drop_last:
            raise ValueError(
                f"drop_last must be True when world_size > 1 (got drop_last={drop_last}, "
                f"world_size={world_size}): every rank needs a full batch"
            )
        big = self.global_batch_size
        if big > self.num_samples and (self.drop_last or self.balanced):
            raise ValueError(
                f"batch_size={batch_size} (x world_size={world_size} = {big}) exceeds the "
                f"number of samples {num_samples}; lower batch_size or set drop_last=False "
                "(recipes: train.drop_last=false)"
            )
        self._perm_epoch: int | None = None
        self._perm: Tensor | None = None
        self.samples_per_class: int | None = None
        self.min_classes = _check_int(min_classes, "min_classes", 1)
        if self.balanced:
            self._setup_balanced(labels, samples_per_class)

    # ------------------------------------------------------------------ sizes
    @property
    def global_batch_size(self) -> int:
        """``B = batch_size * world_size``."""
        return self.batch_size * self.world_size

    def __len__(self) -> int:
        """Batches per epoch."""
        big = self.global_batch_size
        if self.drop_last or self.balanced:
            return self.num_samples // big
        return -(-self.num_samples // big)

    def rank_rows(self, rank: int | None = None) -> slice:
        """Rows ``[r*b, (r+1)*b)`` of the global batch that ``rank`` owns."""
        r = self.rank if rank is None else rank
        return slice(r * self.batch_size, (r + 1) * self.batch_size)

    # ---------------------------------------------------------------- indices
    def global_indices(self, epoch: int, step: int) -> Tensor:
        """``LongTensor[B]`` (CPU): instances of global batch ``step`` of ``epoch``."""
        _check_int(epoch, "epoch", 0)
        _check_int(step, "step", 0)
        if step >= len(self):
            raise ValueError(f"step must be < {len(self)} batches per epoch, got {step}")
        if self.balanced:
            return self._balanced_indices(epoch, step)
        big = self.global_batch_size
        return self._epoch_perm(epoch)[step * big : (step + 1) * big]

    def local_indices(self, epoch: int, step: int) -> Tensor:
        """This rank's contiguous slice of :meth:`global_indices`."""
        return self.global_indices(epoch, step)[self.rank_rows()]

    def _epoch_perm(self, epoch: int) -> Tensor:
        if self._perm_epoch != epoch or self._perm is None:
            self._perm = torch.randperm(
                self.num_samples, generator=generator_for(self.seed, "perm", epoch)
            )
            self._perm_epoch = epoch
        return self._perm

    # --------------------------------------------------------------- balanced
    def _setup_balanced(self, labels: Tensor | None, samples_per_class: int | None) -> None:
        if labels is None:
            raise ValueError("labels are required when balanced=True, got None")
        labels = labels.detach().cpu().long()
        if labels.shape != (self.num_samples,):
            raise ValueError(
                f"labels must have shape ({self.num_samples},), got {tuple(labels.shape)}"
            )
        self._labels = labels
        counts = torch.bincount(labels)
        self._classes = torch.nonzero(counts).squeeze(1)
        n_classes = len(self._classes)
        big = self.global_batch_size
        if samples_per_class is None:
            if big % n_classes:
                raise ValueError(
                    f"balanced batches need batch_size * world_size = {big} to be a multiple "
                    f"of the number of classes {n_classes}, or pass samples_per_class"
                )
            m = big // n_classes
        else:
            m = _check_int(samples_per_class, "samples_per_class", 1)
            if big % m or big // m > n_classes:
                raise ValueError(
                    f"samples_per_class={m} must divide batch_size * world_size = {big} "
                    f"into at most {n_classes} classes"
                )
        if big // m < self.min_classes:
            raise ValueError(
                f"balanced batches of {big} with samples_per_class={m} hold {big // m} "
                f"class(es), fewer than min_classes={self.min_classes}: lower "
                "samples_per_class"
                + ("" if n_classes >= self.min_classes else f" (the labels hold {n_classes})")
            )
        smallest = int(counts[self._classes].min())
        if m > smallest:
            raise ValueError(f"samples_per_class={m} exceeds the smallest class size {smallest}")
        self.samples_per_class = m
        self._counts = counts
        self._starts = torch.cumsum(counts, 0) - counts

    def _class_order(self, epoch: int) -> Tensor:
        """Members sorted by class, randomly ordered inside each class (cached per epoch)."""
        if self._perm_epoch != epoch or self._perm is None:
            keys = torch.rand(
                self.num_samples,
                generator=generator_for(self.seed, "perm", epoch),
                dtype=torch.float64,
            )
            order = torch.argsort(keys)
            self._perm = order[torch.argsort(self._labels[order], stable=True)]
            self._perm_epoch = epoch
        return self._perm

    def _balanced_indices(self, epoch: int, step: int) -> Tensor:
        assert self.samples_per_class is not None
        m = self.samples_per_class
        big = self.global_batch_size
        n_chosen = big // m
        classes = self._classes
        if n_chosen < len(classes):
            pick = torch.randperm(
                len(classes), generator=generator_for(self.seed, "classes", epoch, step)
            )
            classes = classes[pick[:n_chosen]]
        counts = self._counts[classes].unsqueeze(1)
        pos = (step * m + torch.arange(m).unsqueeze(0)) % counts  # [n_chosen, m]
        idx = self._class_order(epoch)[self._starts[classes].unsqueeze(1) + pos].reshape(-1)
        shuffle = torch.randperm(big, generator=generator_for(self.seed, "shuffle", epoch, step))
        return idx[shuffle]
