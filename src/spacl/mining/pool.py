"""The pool a miner reads: unit normalisation and the checks of a pool, its anchors and labels.

A pool is ``[B, V, d]``: ``B`` instances of ``V`` views each (the target embeddings SPACL
mines).  The miners of :mod:`spacl.mining` and the SPACL loss (:mod:`spacl.losses.spacl`)
share these helpers.
"""

from __future__ import annotations

import torch
from torch import Tensor

from spacl._validation import check_labels, check_tensor

__all__ = [
    "check_anchor_index",
    "check_pool",
    "checked_labels",
    "class_membership",
    "unit",
]


def unit(z: Tensor) -> Tensor:
    """``z / ||z||`` along the last dimension (a zero vector stays zero, with a zero
    gradient: as :func:`spacl.losses.normalize`, whose package this one may not import)."""
    norm = torch.linalg.vector_norm(z, dim=-1, keepdim=True)
    return z / norm.clamp_min(torch.finfo(z.dtype).tiny) * (norm > 0)


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
