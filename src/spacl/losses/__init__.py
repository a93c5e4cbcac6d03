"""Contrastive objectives, all on one masked-logsumexp kernel (:mod:`spacl.losses.kernel`).

============================  ==============================================================
``SPACLLoss``                  SPACL (ICLR 2026): dynamic anchor, farthest-point hard
                               positives, adversarial negatives, relative-threshold cut;
                               every ablation as a switch (trains its own game: see it)
``NTXentLoss``                 InfoNCE / SimCLR, any ``V >= 2`` views, two-view form
``DecoupledContrastiveLoss``   DCL (Yeh et al.): positive out of the denominator
``DebiasedContrastiveLoss``    Chuang et al., ``tau_plus``
``HardNegativeLoss``           HCL / HUCL / HSCL in-batch reweighting (``beta``, ``tau_plus``)
``TiltedNegativeSampler``      draws negatives from ``p ∝ exp(beta <z_i, z_j>)``
``SampledHardNegativeLoss``    the NC/DC paper's sampling estimator
``SupConLoss``                 Khosla et al., ``variant="out"`` (L_out) or ``"in"`` (L_in)
``NSCLLoss``                   negatives-only supervised CL (SPEC §3)
``BarlowTwinsLoss``            Zbontar et al.: redundancy reduction (not a contrastive kernel)
``VarConLoss``                 Wang et al. 2025: posterior-weighted ELBO over class centroids
``MaskConLoss``                Feng & Patras 2023: coarse labels, masked soft instance targets
``CrossEntropyObjective``      the cross-entropy baseline: a linear classifier's logits, every view
``PairwiseContrastiveLoss``    base of the view-pair losses (hooks ``select``, ``kernel_options``)
``contrastive_kernel``         the shared kernel: ``-log(sum_pos e^l / sum_pos+neg e^l)``
``masked_logsumexp``           a row's log-sum-exp over masked entries (empty rows: ``-inf``)
``normalize``                  ``sphere | ball | none``
============================  ==============================================================

Link prediction (:mod:`spacl.losses.kg`: ``loss(query[B, d], entities[E, d],
positives[B, E])``):

============================  ==============================================================
``LinkInfoNCELoss``            filtered InfoNCE over all (or ``k`` sampled) entities
``LinkSPACLLoss``              SPACL on triples: hard tails, adversarial negatives, the cut
``LinkSPACLStep``              diagnostics of the last ``LinkSPACLLoss`` call (``.last``)
``LinkSPACLOptions``           ``LinkSPACLLoss``'s switches as one frozen record (``options=``)
``KG_SPACL_VARIANTS``          ``LinkSPACLLoss``'s ablations (``variant=``)
``WEIGHTINGS``                 ``"query"`` or ``"triple"``: how the mean weights queries
============================  ==============================================================

Example:
    >>> import torch
    >>> from spacl.losses import NTXentLoss, SupConLoss
    >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
    >>> loss = NTXentLoss(temperature=0.5)(z0, z1)          # SimCLR on two views
    >>> feats = torch.stack([z0, z1], dim=1)                # [B, V, d]
    >>> loss = SupConLoss(temperature=0.1)(feats, torch.arange(16) % 4)
"""

from spacl.losses.base import PairwiseContrastiveLoss
from spacl.losses.classifier import CrossEntropyObjective
from spacl.losses.hard import HardNegativeLoss, SampledHardNegativeLoss, TiltedNegativeSampler
from spacl.losses.infonce import DebiasedContrastiveLoss, DecoupledContrastiveLoss, NTXentLoss
from spacl.losses.kernel import contrastive_kernel, masked_logsumexp
from spacl.losses.normalize import normalize
from spacl.losses.redundancy import BarlowTwinsLoss
from spacl.losses.spacl import SPACLLoss
from spacl.losses.supervised import NSCLLoss, SupConLoss
from spacl.losses.variational import VarConLoss
from spacl.losses.weak import MaskConLoss

__all__ = [
    "BarlowTwinsLoss",
    "CrossEntropyObjective",
    "DebiasedContrastiveLoss",
    "DecoupledContrastiveLoss",
    "HardNegativeLoss",
    "MaskConLoss",
    "NSCLLoss",
    "NTXentLoss",
    "PairwiseContrastiveLoss",
    "SPACLLoss",
    "SampledHardNegativeLoss",
    "SupConLoss",
    "TiltedNegativeSampler",
    "VarConLoss",
    "contrastive_kernel",
    "masked_logsumexp",
    "normalize",
]
