"""What SPACL chose in a forward pass (:class:`SPACLStep`), for logging."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class SPACLStep:
    """What SPACL chose in its last forward pass (detached tensors), for logging.

    One row per anchor: ``A = B`` (one anchor per instance) or ``A = B V``
    (``anchor_set="every_view"``, row ``r`` = instance ``r // V``, view ``r % V``).
    """

    anchor: Tensor  #: ``[A]`` view index of each anchor row (``A = B``, or ``B V`` every view)
    positives: Tensor  #: ``[A, P]`` view indices (instance pool) / flat indices (class pool)
    candidate_negatives: Tensor  #: ``[A]`` negatives before the cut (in-batch + generated)
    kept_negatives: Tensor  #: ``[A]`` negatives kept by the cut
    kept_generated: Tensor  #: ``[A]`` generated negatives kept by the cut
    d_loss: Tensor | None  #: discriminator loss of the round (training mode, K_adv > 0)
    g_loss: Tensor | None  #: generator loss of the round

    def log_dict(self) -> dict[str, float]:
        """Scalar summaries as plain floats, keys prefixed ``spacl/``."""
        cand = self.candidate_negatives.to(torch.float64)
        kept = self.kept_negatives.to(torch.float64)
        frac = torch.where(cand > 0, kept / cand.clamp_min(1.0), torch.ones_like(cand))
        out = {
            "spacl/anchor_original": float((self.anchor == 0).to(torch.float64).mean()),
            "spacl/candidate_negatives": float(cand.mean()),
            "spacl/kept_negatives": float(kept.mean()),
            "spacl/kept_fraction": float(frac.mean()),
            "spacl/kept_generated": float(self.kept_generated.to(torch.float64).mean()),
        }
        if self.d_loss is not None:
            out["spacl/d_loss"] = float(self.d_loss)
        if self.g_loss is not None:
            out["spacl/g_loss"] = float(self.g_loss)
        return out
