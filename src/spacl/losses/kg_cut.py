"""SPACL's relative-threshold cut over entity logits: a name kept for old imports.

There is one implementation of the cut, :meth:`spacl.mining.RelativeThresholdNegatives.select`
(issue 19); :class:`spacl.losses.kg.LinkSPACLLoss` calls it directly.  The histogram
refinement that lived here (which kept every candidate tied at the threshold) is gone;
:func:`top_share_cut` now only splits the joint call into its two blocks, and goes once
nothing imports it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from spacl.mining.negatives import RelativeThresholdNegatives

__all__ = ["top_share_cut"]


@torch.no_grad()
def top_share_cut(
    masked: Tensor,
    extra: Tensor | None,
    cut: RelativeThresholdNegatives,
    *,
    bins: int = 1024,
    max_exact: int = 256,
    max_levels: int = 4,
) -> tuple[Tensor, Tensor | None]:
    """``cut.select`` of ``cat(masked, extra)``, split into the entity and extra blocks.

    ``masked[B, E]`` holds ``-inf`` at the entities that are not candidates; ``extra``
    (``[B, K]``, the generated negatives) are all candidates.  ``bins``, ``max_exact``
    and ``max_levels`` tuned the removed histogram refinement and are ignored.
    """
    del bins, max_exact, max_levels
    e = masked.shape[1]
    valid = torch.isfinite(masked)
    if extra is None:
        return cut.select(masked, valid), None
    ones = torch.ones(extra.shape, dtype=torch.bool, device=extra.device)
    kept = cut.select(torch.cat((masked, extra), 1), torch.cat((valid, ones), 1))
    return kept[:, :e], kept[:, e:]
