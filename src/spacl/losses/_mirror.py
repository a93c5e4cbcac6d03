"""A self-similarity matmul from its upper block triangle (CPU).

The logits of every view against every view, ``L = A B^T`` with ``A = c B`` row by row
(``c > 0`` a scalar: ``A`` the anchors ``g / tau``, ``B`` the candidates ``g``), form a
symmetric matrix: ``L_ij = c <b_i, b_j> = L_ji``.  Split into ``p`` row blocks, block row
``i`` is one matmul of ``A_i`` against ``B_i, ..., B_p`` and each block below the diagonal
is the transpose of the one above it: ``(p + 1) / (2 p)`` of the multiply-adds (0.56 at
``p = 8``) for ``p (p - 1) / 2`` block copies.  The mirrored entries are ``c <b_j, b_i>``
where a full matmul computes ``c <b_i, b_j>``: equal up to the rounding of the products.

At ``N = 1280``, ``d = 128`` on one CPU thread: 2.6 ms against 3.9 ms for ``A @ B.T``;
the Gram log-sum-exp of NT-Xent / SupCon, forward and backward, 0.87x-0.98x the plain
path's time at ``N = 768 .. 3072`` over two interleaved runs (about 1.0x at 512)
(benchmarks/results/spacl_overhead.md times the losses that use it).  Only there: on
several threads the one large matmul parallelises better than the blocks and their copies
(2 threads: the blocks 1.04x-1.29x the plain path's time in one run), and on other
devices or small ``N`` a matmul is not worth splitting; there it is ``A @ B.T``.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: rows per block: large enough that each block's matmul runs at the full BLAS rate
_BLOCK_ROWS = 160
#: below this many rows the saving does not pay for the extra calls
_MIN_ROWS = 768
#: above this many CPU threads the one large matmul parallelises better than the blocks
#: and their copies (module docstring)
_MAX_THREADS = 1
#: padding of the rows of a buffer this module allocates (16 float32: one cache line)
_ROW_PAD = 16


def mirrored_mm(anchors: Tensor, candidates: Tensor, out: Tensor | None = None) -> Tensor:
    """``anchors @ candidates.T`` ``[N, N]`` for ``anchors = c * candidates`` (``c > 0``).

    Computed from the blocks on and above the diagonal (module docstring); ``out``: an
    ``[N, N]`` view (unit column stride) to write into, else a view of a buffer with
    padded rows (not contiguous: its rows are ``N + 16`` apart).  No gradient: for use
    inside ``torch.no_grad()`` or a custom autograd function's forward.
    """
    n, d = candidates.shape
    if anchors.shape != (n, d):
        raise ValueError(
            f"anchors must have the candidates' shape {(n, d)}, got {tuple(anchors.shape)}"
        )
    parts = n // _BLOCK_ROWS
    if (
        anchors.device.type != "cpu"
        or n < _MIN_ROWS
        or parts < 2
        or torch.get_num_threads() > _MAX_THREADS
    ):
        return (
            torch.mm(anchors, candidates.T)
            if out is None
            else torch.mm(anchors, candidates.T, out=out)
        )
    if out is None:
        # rows _ROW_PAD entries apart: the transposed block copies read down columns, and
        # a row stride of a large power of two maps a column onto a few cache sets
        out = anchors.new_empty(n, n + _ROW_PAD)[:, :n]
    bounds = [n * i // parts for i in range(parts + 1)]
    for i in range(parts):
        lo, hi = bounds[i], bounds[i + 1]
        torch.mm(anchors[lo:hi], candidates[lo:].T, out=out[lo:hi, lo:])
        for j in range(i):  # the blocks left of the diagonal, from those above it
            out[lo:hi, bounds[j] : bounds[j + 1]] = out[bounds[j] : bounds[j + 1], lo:hi].T
    return out
