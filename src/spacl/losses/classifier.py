"""The cross-entropy baseline: a linear classifier's loss on every view (SPEC §3)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["CrossEntropyObjective"]


class CrossEntropyObjective(nn.Module):
    """Cross-entropy of a linear classifier on the backbone features (the CE baseline, SPEC §3).

    The task builds the classifier (the engine's head ``Linear(feature_dim, num_classes)``,
    the text tasks' ``Linear`` over the head or the encoder), so the "projections" this
    loss receives are logits ``[B, V, C]``; every view is classified:
    ``loss = mean_{i, v} CE(logits_iv, y_i)`` (with optional label smoothing).

    Example:
        >>> import torch
        >>> from spacl.losses import CrossEntropyObjective
        >>> logits = torch.zeros(4, 2, 3)                    # [B, V, C]: uniform logits
        >>> loss = CrossEntropyObjective()(logits, torch.tensor([0, 1, 2, 0]))
        >>> round(loss.item(), 4) == round(torch.log(torch.tensor(3.0)).item(), 4)
        True
        >>> CrossEntropyObjective()(torch.zeros(4, 3), torch.zeros(4, dtype=torch.long))
        Traceback (most recent call last):
        ...
        ValueError: logits must be [B, V, C], got shape (4, 3)
    """

    def __init__(self, label_smoothing: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = float(label_smoothing)

    def forward(self, logits: Tensor, labels: Tensor | None = None) -> Tensor:
        """The mean cross-entropy of every view's logits ``[B, V, C]`` against ``labels [B]``."""
        if labels is None:
            raise ValueError("CrossEntropyObjective needs labels")
        if logits.ndim != 3:
            raise ValueError(f"logits must be [B, V, C], got shape {tuple(logits.shape)}")
        b, v, c = logits.shape
        return F.cross_entropy(
            logits.reshape(b * v, c),
            labels.repeat_interleave(v),
            label_smoothing=self.label_smoothing,
        )
