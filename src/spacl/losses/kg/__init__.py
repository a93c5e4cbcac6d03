"""Link-prediction objectives: filtered InfoNCE over all entities and SPACL (SPEC §1).

Both score queries ``f(h, r)`` of a :class:`~spacl.models.kg.LinkPredictor` against its
entity table ``g(e)`` (score ``<f(h, r), g(e)>``) and take ``positives[B, E]``: the known
training tails ``P(h, r)`` of each query (K-vs-all) or the one tail of a training triple
(``P(h, r) = {t}``, 1-vs-all); :func:`spacl.tasks.kg.train_kg` builds them.
With ``l_e = <f(h, r), g(e)> / tau``:

**Filtered InfoNCE** (:class:`LinkInfoNCELoss`), per training triple ``(h, r, t)``::

    loss(h, r, t) = -log( e^{l_t} / (e^{l_t} + sum_{e not in P(h, r)} e^{l_e}) )

the 1-N cross-entropy of Dettmers et al. (2018) with the other known tails of the query
taken out of the denominator.  All tails of one query share one score row (the
kernel's ``"pairwise"`` mode); the mean runs over triples (each query weighted by
``|P(h, r)|``).  ``num_negatives=k`` scores only ``k`` uniformly sampled entities
(shared by the batch) plus the batch's positives instead of every entity.

**SPACL for link prediction** (:class:`LinkSPACLLoss`, SPEC §1.2-1.5)::

    P^h   = farthest-point selection of lambda_P tails from P(h, r), starting at f(h, r)
    Q     = {e not in P(h, r)}  U  K_adv generated negatives G(f(h, r), xi)
    Q^h   = the heaviest prefix of Q holding lambda_Q of sum_q e^{l_q}
    loss  = -log( sum_{p in P^h} e^{l_p} / (sum_{p in P^h} e^{l_p} + sum_{q in Q^h} e^{l_q}) )

**Decisions** (the image recipe of SPEC §1 translated to triples):

- the anchor is the query ``f(h, r)`` itself: there are no views, so there is no dynamic
  anchor (``variant="no_anchor"`` is therefore the same as ``"full"`` and not offered);
- the positive pool is the known training tails of ``(h, r)``; a query with at most
  ``lambda_P`` of them uses them all; otherwise at most ``pool_size`` of them (chosen
  uniformly at random, the analogue of the ``M`` augmented views) enter farthest-point
  selection with the dissimilarity ``1 - cos`` and ``S = {f(h, r)}`` at the start;
- known tails that are not selected are neither positives nor negatives;
- the candidates ``g(e)`` are the trained entity table itself, **with** gradient: in
  link prediction the tails are the same parameters as the heads and freezing that
  side halves the training signal (SPEC §1.5's constant ``g`` is kept for images);
- generated negatives (unit vectors from :class:`~spacl.mining.AdversarialNegatives`,
  played on ``unit(f(h, r))`` against the unit hard positives) are rescaled by the mean
  norm of the query's hard positives, so that they live where entities live; they are
  constants;
- the loss is the mean over queries (SPEC §1.5: mean over anchors); ``weighting=
  "triple"`` weights each query by ``|P(h, r)|`` as the InfoNCE baseline does.
"""

from spacl.losses.kg.infonce import LinkInfoNCELoss
from spacl.losses.kg.objective import LinkSPACLStep
from spacl.losses.kg.options import KG_SPACL_VARIANTS, LinkSPACLOptions
from spacl.losses.kg.spacl import LinkSPACLLoss
from spacl.losses.kg.terms import WEIGHTINGS

__all__ = [
    "KG_SPACL_VARIANTS",
    "WEIGHTINGS",
    "LinkInfoNCELoss",
    "LinkSPACLLoss",
    "LinkSPACLOptions",
    "LinkSPACLStep",
]
