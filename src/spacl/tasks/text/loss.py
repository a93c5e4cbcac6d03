"""The one place a text run's loss is built, from the one objective registry.

Every text objective (the frozen head's ``text`` rows, the fine-tuned and ADB/DA-ADB runs'
``text_finetune`` rows of :mod:`spacl.losses.registry`) comes from :func:`text_loss`: the
recipe schema (:func:`spacl.tasks.text.config.build_text_loss`), the fine-tuning loop
(:func:`spacl.tasks.text.finetune.finetune_loss`) and the open-intent detector's SPACL
stage (:mod:`spacl.tasks.text.adb`) differ only in where they read its arguments.

Example:
    >>> loss = text_loss("supcon", {}, temperature=0.1, seed=0, finetuned=True)
    >>> type(loss).__name__
    'SupConLoss'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from spacl.losses.registry import build_objective

__all__ = ["text_loss"]


def text_loss(
    name: str,
    params: Mapping[str, Any],
    *,
    temperature: float | None,
    seed: int,
    finetuned: bool,
) -> nn.Module | None:
    """The loss of objective ``name`` for a text run: the registry's ``text_finetune`` row
    when the encoder's layers are trained (``finetuned``), else its ``text`` row; ``params``
    override the row's defaults; ``seed`` seeds any sub-network (SPACL's generator and
    discriminator).  A classifier's loss (``cross_entropy``) takes no temperature;
    ``frozen`` has none (``None``)."""
    return build_objective(
        name,
        "text_finetune" if finetuned else "text",
        params,
        temperature=temperature,
        seed=seed,
    )
