"""Streaming CKA: batch-wise statistics that merge exactly across batches and processes."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from spacl.alignment._moments import PairMoments, batched_unbiased_hsic, hsic_terms
from spacl.alignment.cka import cka_ratio
from spacl.geometry.inputs import F64, as_matrix, check_same_rows

__all__ = ["CKAAccumulator"]


class CKAAccumulator:
    """Linear, debiased and minibatch CKA over a stream of paired batches.

    ``update(X_batch, Y_batch)`` folds a batch into float64 sufficient statistics (means,
    co-moments ``X~^T X~``, ``Y~^T Y~``, ``X~^T Y~`` and the third/fourth-order row-norm
    moments needed by the unbiased HSIC; see :mod:`spacl.alignment._moments`).  Batches are
    combined with a Chan-style exact re-centring, never raw sums minus ``n * mean^2``, so
    the result equals :func:`~spacl.alignment.linear_cka` / :func:`~spacl.alignment.debiased_cka`
    on the concatenated data to float64 rounding, in any batch order.

    Each ``update`` is also one minibatch of Nguyen et al.'s (2021) minibatch CKA (its
    unbiased HSIC terms are summed); batches with fewer than 4 rows are left out of that
    estimate only.

    ``merge(other)`` adds another accumulator's samples; ``all_reduce()`` does the same across
    the processes of an initialised ``torch.distributed`` group (all-gather, then merge in
    rank order, so every rank ends with identical statistics).  Memory is O(dx^2 + dy^2).
    The formulas are those of :func:`~spacl.alignment.linear_cka` (Kornblith et al. 2019)
    and :func:`~spacl.alignment.debiased_cka` (Song et al. 2012's unbiased HSIC).

    Example:
        >>> import torch
        >>> from spacl.alignment import CKAAccumulator, linear_cka
        >>> _ = torch.manual_seed(0)
        >>> X = torch.randn(50, 8)
        >>> Y = X + 0.3 * torch.randn(50, 8)
        >>> acc = CKAAccumulator()
        >>> for xb, yb in zip(X.split(10), Y.split(10)):
        ...     acc.update(xb, yb)
        >>> out = acc.compute()
        >>> acc.n, abs(out["linear_cka"] - linear_cka(X, Y)) < 1e-12
        (50, True)
    """

    def __init__(self) -> None:
        self._moments: PairMoments | None = None
        self._minibatch = torch.zeros(3, dtype=F64)
        self._num_minibatches = 0
        self._skipped_minibatches = 0

    @property
    def n(self) -> int:
        """Number of samples seen so far."""
        return 0 if self._moments is None else round(self._moments.n)

    def update(self, X_batch: Any, Y_batch: Any) -> None:
        """Add a batch of paired rows ``X_batch [b, dx]``, ``Y_batch [b, dy]``."""
        x = as_matrix(X_batch, "X_batch", check_finite=False)  # from_batch checks the sums
        y = as_matrix(Y_batch, "Y_batch", check_finite=False)
        check_same_rows(x, y, "X_batch", "Y_batch")
        self._check_dims(x.shape[1], y.shape[1])
        batch = PairMoments.from_batch(x, y, ("X_batch", "Y_batch"))
        self._moments = batch if self._moments is None else self._moments.merged(batch)
        if x.shape[0] >= 4:
            hs = batched_unbiased_hsic(x[None], y[None])
            self._minibatch = self._minibatch.to(x.device) + torch.cat(hs)
            self._num_minibatches += 1
        else:
            self._skipped_minibatches += 1

    def merge(self, other: CKAAccumulator) -> CKAAccumulator:
        """Fold ``other``'s samples into this accumulator (in place) and return ``self``."""
        if not isinstance(other, CKAAccumulator):
            raise TypeError(f"other must be a CKAAccumulator, got {type(other).__name__}")
        if other._moments is not None:
            self._check_dims(other._moments.mean_x.numel(), other._moments.mean_y.numel())
            if self._moments is None:
                self._moments = other._moments.copy()
            else:
                self._moments = self._moments.merged(other._moments)
        self._minibatch = self._minibatch + other._minibatch.to(self._minibatch.device)
        self._num_minibatches += other._num_minibatches
        self._skipped_minibatches += other._skipped_minibatches
        return self

    def all_reduce(self, group: Any = None) -> CKAAccumulator:
        """Merge the accumulators of all processes of ``group`` (no-op without distributed).

        Every rank must have seen at least one batch (the feature dimensions are needed to
        size the exchange).  Gathers the flat statistics of every rank and merges them in
        rank order, so all ranks hold the same, exact statistics afterwards.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return self
        if self._moments is None:
            raise ValueError("all_reduce needs at least one update() on every rank")
        dx, dy = self._moments.mean_x.numel(), self._moments.mean_y.numel()
        flat = torch.cat(
            [
                self._moments.flatten(),
                self._minibatch.to(self._moments.mean_x.device),
                torch.tensor(
                    [self._num_minibatches, self._skipped_minibatches],
                    dtype=F64,
                    device=self._moments.mean_x.device,
                ),
            ]
        )
        world = dist.get_world_size(group)
        gathered = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat, group=group)
        merged: PairMoments | None = None
        minibatch = torch.zeros(3, dtype=F64, device=flat.device)
        counts = [0, 0]
        for part in gathered:
            moments = PairMoments.unflatten(part[:-5], dx, dy)
            merged = moments if merged is None else merged.merged(moments)
            minibatch += part[-5:-2]
            counts[0] += round(float(part[-2]))
            counts[1] += round(float(part[-1]))
        self._moments = merged
        self._minibatch = minibatch
        self._num_minibatches, self._skipped_minibatches = counts
        return self

    def compute(self) -> dict[str, float]:
        """``{"n", "linear_cka", "debiased_cka", "minibatch_cka"}`` of everything seen.

        Requires at least 4 samples (the unbiased HSIC).  ``minibatch_cka`` is NaN with a
        warning when no update had 4 or more rows.
        """
        if self._moments is None or self._moments.n < 4:
            raise ValueError(f"CKAAccumulator needs at least 4 samples, has seen {self.n}")
        terms = hsic_terms(self._moments)
        out = {
            "n": float(self._moments.n),
            "linear_cka": cka_ratio(
                terms.biased_xy, terms.biased_xx, terms.biased_yy, "linear CKA"
            ),
            "debiased_cka": cka_ratio(
                terms.unbiased_xy, terms.unbiased_xx, terms.unbiased_yy, "debiased CKA"
            ),
        }
        if self._num_minibatches == 0:
            out["minibatch_cka"] = cka_ratio(0.0, 0.0, 0.0, "minibatch CKA (no batch of >= 4 rows)")
        else:
            if self._skipped_minibatches:
                warnings.warn(
                    f"{self._skipped_minibatches} batch(es) with fewer than 4 rows were left out "
                    "of the minibatch CKA estimate",
                    RuntimeWarning,
                    stacklevel=2,
                )
            hxy, hxx, hyy = (float(v) / self._num_minibatches for v in self._minibatch)
            out["minibatch_cka"] = cka_ratio(hxy, hxx, hyy, "minibatch CKA")
        return out

    def _check_dims(self, dx: int, dy: int) -> None:
        if self._moments is None:
            return
        have = (self._moments.mean_x.numel(), self._moments.mean_y.numel())
        if have != (dx, dy):
            raise ValueError(f"feature dimensions changed: accumulator has {have}, got {(dx, dy)}")
