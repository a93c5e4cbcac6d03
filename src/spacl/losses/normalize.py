"""Explicit feature normalisation: ``sphere | ball | none`` (Jiang et al., SPEC §2)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from spacl._validation import check_choice

NormalizeMode = Literal["sphere", "ball", "none"]
NORMALIZE_MODES: tuple[str, ...] = ("sphere", "ball", "none")


def check_normalize_mode(mode: str) -> NormalizeMode:
    """Return ``mode`` if it is a known normalisation, else raise ``ValueError``."""
    check_choice(mode, "normalize", NORMALIZE_MODES)
    return mode  # type: ignore[return-value]


def normalize(z: Tensor, mode: NormalizeMode | str = "sphere", dim: int = -1) -> Tensor:
    """Project embeddings onto the unit sphere, into the unit ball, or leave them.

    - ``"sphere"``: ``z / ||z||`` (L2; a zero vector stays zero, with a zero gradient),
    - ``"ball"``:   ``z / max(1, ||z||)`` (only vectors outside the ball are shrunk),
    - ``"none"``:   ``z`` unchanged.

    Example:
        >>> import torch
        >>> from spacl.losses import normalize
        >>> normalize(torch.tensor([[3.0, 4.0]]))  # sphere
        tensor([[0.6000, 0.8000]])
        >>> normalize(torch.tensor([[0.3, 0.4]]), "ball")  # inside the unit ball: unchanged
        tensor([[0.3000, 0.4000]])
    """
    check_normalize_mode(mode)
    if mode == "none":
        return z
    norm = torch.linalg.vector_norm(z, dim=dim, keepdim=True)
    if mode == "sphere":
        # exact z / ||z|| for every nonzero row; a zero row maps to zero with a zero
        # gradient (its direction is undefined: 1 / clamp would send ~1e38 back through it)
        return z / norm.clamp_min(torch.finfo(z.dtype).tiny) * (norm > 0)
    return z / norm.clamp_min(1.0)
