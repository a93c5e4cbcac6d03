"""The long-row cut's two heaviest passes, compiled (opt-in: ``compiled=True``).

The exact selection of long rows (:func:`spacl.mining.cut.exact.wide_prefix`, the
link-prediction rows of ``[B, 14541]`` entities under ``mass="exp"``) makes about a
dozen eager passes over ``[B, K]``.  Two of them carry most of its cost, and
``torch.compile`` (inductor) fuses each into one loop:

1. :func:`bucket_histogram`: the bucket coordinate ``p = clamp((hi - key) * scale, 0,
   NB - 1)``, the float64 weight histogram over ``floor(p)`` and the float64 row total,
   without writing the ``[B, K]`` float64 weights or int64 bucket index eager mode needs
   (and with the end buckets, where most keys land, spread over several accumulators);
2. :func:`bucket_masks`: ``keep = [p < c]`` and ``member = [floor(p) == c]`` (0/1 in
   the keys' dtype) for the chosen bucket ``c`` of each row.

They are the eager path's floating-point operations (a subtraction and a product in
the keys' dtype, a clamp), so they give the same buckets and masks; the histogram's
end buckets and the row total are float64 sums of the same weights added in another
order (a few ulps at most; where the float32 weights span few binades the sums are
exact and equal).  The test suite compares both
paths entry by entry.  Where compilation fails (no C++ compiler, an unsupported
platform or PyTorch), one warning, and the eager path from then on.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

#: buckets of the one-level long-row selection (``exact._WIDE_BUCKETS``)
NUM_BUCKETS = 2048


#: accumulators each end bucket is spread over while the histogram is added up
SPREAD = 32


def bucket_histogram(
    keys: Tensor, weights: Tensor, hi: Tensor, scale: Tensor
) -> tuple[Tensor, Tensor]:
    """``(hist[B, NB], total[B])``, float64: weights summed per bucket and per row.

    Bucket of ``keys[b, j]``: ``floor(clamp((hi[b] - keys[b, j]) * scale[b], 0, NB - 1))``
    (bucket 0 holds the largest keys; ``-inf`` lands in the last one).  ``weights``: any
    float dtype, converted to float64 entry by entry.  Keys outside the range ``[lo,
    hi]`` fall into an end bucket (the ``-inf`` of the known tails, keys below a narrow
    range); a histogram that adds many into one accumulator is a chain of dependent
    additions, so the two end buckets are first spread over ``SPREAD`` accumulators each
    (by column) and summed at the end: the same sums, added in another order.
    """
    position = ((hi.unsqueeze(1) - keys) * scale.unsqueeze(1)).clamp(0, NUM_BUCKETS - 1)
    spread = torch.arange(keys.shape[1], device=keys.device) % SPREAD
    top, bottom = NUM_BUCKETS + spread, NUM_BUCKETS + SPREAD + spread
    index = torch.where(
        position < 1, top, torch.where(position >= NUM_BUCKETS - 1, bottom, position.long())
    )
    w = weights.to(torch.float64)
    hist = torch.zeros(
        keys.shape[0], NUM_BUCKETS + 2 * SPREAD, dtype=torch.float64, device=keys.device
    ).scatter_add(1, index, w)
    first = hist[:, NUM_BUCKETS : NUM_BUCKETS + SPREAD].sum(1, keepdim=True)
    last = hist[:, NUM_BUCKETS + SPREAD :].sum(1, keepdim=True)
    inner = hist[:, 1 : NUM_BUCKETS - 1]
    return torch.cat((first, inner, last), 1), w.sum(1)


def bucket_masks(keys: Tensor, hi: Tensor, scale: Tensor, chosen: Tensor) -> tuple[Tensor, Tensor]:
    """``(keep, member)``: ``[p < c]`` and ``[floor(p) == c]``, 0/1 in the keys' dtype.

    ``p`` as in :func:`bucket_histogram`, ``c = chosen[b]`` (an integer bucket):
    ``floor(p) < c`` iff ``p < c``.  Both masks are floats: inductor writes a
    float mask several times faster than a boolean one on CPU.
    """
    position = ((hi.unsqueeze(1) - keys) * scale.unsqueeze(1)).clamp(0, NUM_BUCKETS - 1)
    c = chosen.to(keys.dtype).unsqueeze(1)
    keep = (position < c).to(keys.dtype)
    member = torch.where(position.floor() == c, 1.0, 0.0).to(keys.dtype)
    return keep, member


class CompiledPasses:
    """:func:`bucket_histogram` and :func:`bucket_masks`, compiled on first use.

    Calls return what the plain functions return; if compiling or running the compiled
    code raises, one ``RuntimeWarning`` and the plain functions from then on.
    """

    def __init__(self) -> None:
        self._compiled: dict[str, Callable[..., Any]] = {}
        self.failed: str | None = None

    def _call(self, name: str, fn: Callable[..., Any], *args: Tensor) -> Any:
        if self.failed is None:
            try:
                if name not in self._compiled:
                    self._compiled[name] = torch.compile(fn, dynamic=True)
                return self._compiled[name](*args)
            except Exception as error:  # any compiler failure: the eager passes
                self.failed = f"{type(error).__name__}: {error}".splitlines()[0][:300]
                warnings.warn(
                    f"the compiled cut is unavailable ({self.failed}); using the eager passes",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return fn(*args)

    def histogram(
        self, keys: Tensor, weights: Tensor, hi: Tensor, scale: Tensor
    ) -> tuple[Tensor, Tensor]:
        """:func:`bucket_histogram`, compiled."""
        out: tuple[Tensor, Tensor] = self._call(
            "histogram", bucket_histogram, keys, weights, hi, scale
        )
        return out

    def masks(
        self, keys: Tensor, hi: Tensor, scale: Tensor, chosen: Tensor
    ) -> tuple[Tensor, Tensor]:
        """:func:`bucket_masks`, compiled."""
        out: tuple[Tensor, Tensor] = self._call("masks", bucket_masks, keys, hi, scale, chosen)
        return out


#: one per process: inductor compiles each function once (dynamic shapes) and caches it
PASSES = CompiledPasses()

__all__ = ["NUM_BUCKETS", "PASSES", "CompiledPasses", "bucket_histogram", "bucket_masks"]
