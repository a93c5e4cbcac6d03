"""SPACL's relative-threshold cut of the candidate negatives (SPEC §1.4), one implementation.

:class:`RelativeThresholdNegatives` keeps each anchor row's hardest candidates until they
hold ``share`` of the negative mass; :meth:`RelativeThresholdNegatives.select` is its one
entry point, the output form an argument (a bool or 0/1 float mask, an index of the kept
columns, or the :class:`Selection` itself).  The decisions (masses, tie rule, precision)
and the algorithm are in :mod:`spacl.mining.cut.threshold`; the pieces:

===========================  ==============================================================
:mod:`.threshold`            the cut (:class:`RelativeThresholdNegatives`, :data:`MASSES`)
:mod:`.fast`                 the tensor fast path (``topk`` over group maxima), index masks
:mod:`.exact`                the exact radix / long-row selection, the GPU's sorted rows
:mod:`.kernel`               the CPU kernel of the fast rows (numba, :mod:`.rows_nb`)
:mod:`.compiled`             the long rows' histogram and mask passes, ``torch.compile``
===========================  ==============================================================
"""

from spacl.mining.cut.exact import check_share
from spacl.mining.cut.threshold import (
    CUT_FORMS,
    MASSES,
    CutForm,
    RelativeThresholdNegatives,
    Selection,
)

__all__ = [
    "CUT_FORMS",
    "MASSES",
    "CutForm",
    "RelativeThresholdNegatives",
    "Selection",
    "check_share",
]
