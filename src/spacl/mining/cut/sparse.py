"""The members of a sparse bool mask, read eight bytes at a time (the long-row cut's bucket).

:func:`sparse_nonzero` is ``mask.nonzero(as_tuple=True)`` for masks with few entries set;
:func:`padded_bool` lays a mask out the way it reads without a copy.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["padded_bool", "sparse_nonzero"]


def padded_bool(mask: Tensor) -> Tensor:
    """``mask != 0`` as a bool ``[B, K]`` view of a zero-padded ``[B, 8 ceil(K / 8)]``
    buffer: the layout :func:`sparse_nonzero` reads without a copy."""
    return _padded_buffer(mask)[:, : mask.shape[1]]


def _padded_buffer(mask: Tensor) -> Tensor:
    """Bool ``[B, 8 ceil(K / 8)]``: ``mask != 0`` in the first ``K`` columns, then ``False``."""
    b, k = mask.shape
    buffer = torch.zeros(b, -(-k // 8) * 8, dtype=torch.bool, device=mask.device)
    buffer[:, :k] = mask
    return buffer


def sparse_nonzero(mask: Tensor) -> tuple[Tensor, Tensor]:
    """``mask.nonzero(as_tuple=True)`` of a bool ``[B, K]`` mask with few entries set.

    The same ``(row, col)`` pairs in the same row-major order.  The CPU ``nonzero`` reads
    a bool matrix one byte at a time; here its rows are read eight bytes at a time as
    int64 words (one ``nonzero`` over ``[B, ceil(K / 8)]``), and only the eight bytes of
    each non-zero word are looked at afterwards: several times faster where few entries
    are set (the members of the chosen bucket of a long-row cut, tens in ``[B, 14542]``),
    slower where most are.  Rows laid out at a multiple of 8 bytes (a contiguous mask
    with ``K % 8 == 0``, or :func:`padded_bool`'s view) are read in place, the bytes past
    column ``K - 1`` left out; any other mask is first copied into such a layout.
    """
    if mask.dtype != torch.bool or mask.dim() != 2:
        raise ValueError(
            f"mask must be a 2-D bool tensor, got {mask.dtype} of shape {tuple(mask.shape)}"
        )
    b, k = mask.shape
    if mask.numel() == 0:
        return mask.nonzero(as_tuple=True)  # type: ignore[return-value]
    width, offset = mask.stride(0), mask.storage_offset()
    in_place = (
        (mask.stride(1) == 1 or k == 1)
        and width >= k
        and width % 8 == 0
        and offset % 8 == 0
        and mask.untyped_storage().nbytes() >= offset + b * width
    )
    rows = mask.as_strided((b, width), (width, 1)) if in_place else _padded_buffer(mask)
    words = rows.shape[1] // 8
    row, word = rows.view(torch.int64).nonzero(as_tuple=True)
    at, byte = rows.view(b, words, 8)[row, word].nonzero(as_tuple=True)
    row, col = row[at], word[at] * 8 + byte
    if rows.shape[1] > k:  # bytes of the padding or of columns past this view
        inside = col < k
        row, col = row[inside], col[inside]
    return row, col
