"""Miners: which samples are hard (no gradient; they return indices and masks).

==============================  ============================================================
``DynamicAnchor``                SPACL's anchor: the hardest view of each pool (SPEC §1.2)
``FarthestPointPositives``       SPACL's hard positives by farthest-point selection
``RelativeThresholdNegatives``   SPACL's top-share cut of the candidate negatives (§1.4)
``AdversarialNegatives``         SPACL's generator/discriminator game (§1.3)
``hardness``                     ``h(u)`` of every view of a pool
``NegativeQueue``                MoCo-style FIFO queue of past target embeddings (+ labels)
==============================  ============================================================

The exponentially tilted sampler of Jiang et al. lives with its loss in
:mod:`spacl.losses.hard` (``TiltedNegativeSampler``).
"""

from spacl.mining.adversarial import AdversarialNegatives
from spacl.mining.cut import RelativeThresholdNegatives
from spacl.mining.positives import DynamicAnchor, FarthestPointPositives, hardness
from spacl.mining.queue import NegativeQueue

__all__ = [
    "AdversarialNegatives",
    "DynamicAnchor",
    "FarthestPointPositives",
    "NegativeQueue",
    "RelativeThresholdNegatives",
    "hardness",
]
