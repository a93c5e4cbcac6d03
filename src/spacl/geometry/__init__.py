"""Geometry of learned representations (SPEC §1.1 and §2 "Geometry metrics").

Inputs are torch tensors or numpy arrays ``[N, d]`` (labels: integer ``[N]``); outputs are
Python floats, lists and dicts.  Everything is computed in float64.

* :func:`neural_collapse` - NC1 (thin SVD of the centred means), NC2 (equinorm,
  equiangularity, ETF deviation), NC3/NC4 with a classifier, CDNV, and the uncentred
  metrics of the NC/DC paper.
* :func:`spectrum`, :func:`effective_rank` (``spectrum="singular" | "eigen"``),
  :func:`rankme` - dimensional collapse.
* :func:`alignment_uniformity` - Wang & Isola (2020), blocked for large N.
* :func:`collapse_condition` (Theorem 2.1), :func:`non_collapse_certificate`
  (Corollary 2.2, an LP), :func:`gradient_norm` (Lemma 2.4) - SPACL's theory.
* :func:`geometry_report` - all of the above in one dict; :class:`GeometryAccumulator` -
  the streaming version for data that does not fit in memory.
"""

from spacl.geometry.neural_collapse import neural_collapse
from spacl.geometry.optimality import collapse_condition, gradient_norm, non_collapse_certificate
from spacl.geometry.report import geometry_report
from spacl.geometry.spectrum import effective_rank, rankme, spectrum
from spacl.geometry.streaming import GeometryAccumulator
from spacl.geometry.uniformity import alignment, alignment_uniformity, uniformity

__all__ = [
    "GeometryAccumulator",
    "alignment",
    "alignment_uniformity",
    "collapse_condition",
    "effective_rank",
    "geometry_report",
    "gradient_norm",
    "neural_collapse",
    "non_collapse_certificate",
    "rankme",
    "spectrum",
    "uniformity",
]
