"""Small helpers shared by the miners: unit normalisation, pool validation, sparse nonzero."""

from __future__ import annotations

import torch
from torch import Tensor

from spacl._validation import check_labels, check_tensor


def unit(z: Tensor) -> Tensor:
    """``z / ||z||`` along the last dimension (a zero vector stays zero)."""
    norm = torch.linalg.vector_norm(z, dim=-1, keepdim=True)
    return z / norm.clamp_min(torch.finfo(z.dtype).tiny)


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


def check_pool(pool: Tensor, name: str = "pool", *, min_views: int = 1) -> Tensor:
    """Require a finite floating ``[B, V, d]`` pool with ``B >= 1`` and ``V >= min_views``."""
    check_tensor(pool, name, ndim=3)
    b, v, d = pool.shape
    if b < 1 or d < 1:
        raise ValueError(
            f"{name} must be [B, V, d] with B >= 1 and d >= 1, got {tuple(pool.shape)}"
        )
    if v < min_views:
        raise ValueError(
            f"{name} holds {v} view(s) per instance but at least {min_views} are needed, "
            f"got shape {tuple(pool.shape)}"
        )
    return pool


def check_anchor_index(anchor: Tensor, batch: int, views: int, name: str = "anchor") -> Tensor:
    """Require an integer ``[B]`` tensor of view indices in ``[0, V)``."""
    if not isinstance(anchor, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(anchor).__name__}")
    if anchor.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise TypeError(
            f"{name} must be an integer tensor of view indices, got dtype {anchor.dtype}"
        )
    if anchor.shape != (batch,):
        raise ValueError(f"{name} must have shape ({batch},), got {tuple(anchor.shape)}")
    if anchor.numel() and (int(anchor.min()) < 0 or int(anchor.max()) >= views):
        raise ValueError(
            f"{name} holds view indices outside [0, {views}): "
            f"min {int(anchor.min())}, max {int(anchor.max())}"
        )
    return anchor.long()


def class_membership(labels: Tensor, views: int) -> Tensor:
    """``[B, B*V]`` bool: flat pool row ``r`` (instance ``r // V``) is of instance ``b``'s class."""
    flat_labels = labels.repeat_interleave(views)
    return labels.unsqueeze(1) == flat_labels.unsqueeze(0)


def checked_labels(labels: Tensor, batch: int, device: torch.device) -> Tensor:
    """Validate ``labels`` against the batch size and move them to ``device``."""
    return check_labels(labels, batch).to(device)
