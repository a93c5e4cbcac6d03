"""SPACL — "SnaPhArd Contrast Learning" (ICLR 2026, OpenReview 4cZvjp8Iwk), SPEC §1.

Hard positives, adversarial hard negatives and a relative-threshold cut, on the shared
masked-logsumexp kernel.  For every instance ``i`` with candidate pool
``C_i = {z_i, z_i^(1..M)}`` (target embeddings ``g``, views ``[B, V, d]``)::

    a_i    = argmax_{u in C_i} h(u)                       dynamic anchor          (§1.2)
    P_i^h  = farthest-point selection from a_i, |P_i^h| = num_positives            (§1.2)
    Q_i    = views of the other instances  U  K_adv generated negatives G(g(a_i), xi)  (§1.3)
    Q_i^h  = shortest most-similar prefix of Q_i with sum s_iq >= share * sum_Q s_iq   (§1.4)
    loss_i = -log( S_i^+ / (S_i^+ + sum_{q in Q_i^h} e^{l_iq}) ),  S_i^+ = sum_{p in P_i^h} e^{l_ip}
    l_ic   = <f(a_i), g(c)> / tau                                                     (§1.5)

and the loss is the mean over anchors (the paper writes a sum; SPEC §1.5).  Mining runs
on the target embeddings without gradient; selection carries no gradient; generated
negatives are constants; the game's gradients never reach the encoders.

How the online anchor ``f(a_i)`` is obtained (``forward(anchors, pool, ...)``):

- ``anchors=None``: ``f(a_i) = pool[i, a_i]`` — one shared encoder embedded every view
  and the gradient flows through the pool's anchor views.
- ``anchors[B, V, d]`` (online embeddings of every view): ``f(a_i) = anchors[i, a_i]``.
- ``anchors[B, d]``: the caller embedded *one* view per instance with the online
  encoder.  The intended protocol is ``a = loss.choose_anchor(pool)`` on the target
  embeddings, then ``anchors = f(views[arange(B), a])`` and
  ``loss(anchors, pool, anchor_index=a)`` — five views through the target without
  gradient, one through the online encoder.  Without ``anchor_index`` the loss assumes
  exactly that (the positives are chosen around the dynamic anchor, which is then used
  for positive selection only); if you embedded another view, e.g. always the
  original, pass ``anchor_index`` so that the positives are chosen around *that* view
  and never include it.

**Decisions** (beyond those of :mod:`spacl.mining`):

- Negatives ``Q_i``: ``negatives="all_views"`` (default) takes every view of every other
  instance (``(B-1) V`` candidates); ``"anchor_views"`` only the anchor view ``a_j`` of
  every other instance (``B-1``).  With labels, same-class instances are never
  negatives (SPEC §1.3).  ``extra_negatives=[Q, d]`` (a :class:`~spacl.mining.NegativeQueue`
  of past target embeddings) join ``Q_i`` *before* the cut; with labels, queue rows of
  the anchor's class are not negatives (and are positives under ``"instance_class"``),
  so a labelled batch needs ``extra_negative_labels=[Q]`` under every ``positive_pool``
  (a ``ValueError`` without them, as for the baseline losses).
- How labels enter (SPEC §1.2 revised; the paper does not say), ``positive_pool``:

  ====================  ===========================================  ================
  ``positive_pool``     positives ``P_i``                            labels
  ====================  ===========================================  ================
  ``"instance"``        ``lambda_P`` hard views of ``C_i``           optional: they
                                                                     only remove
                                                                     same-class
                                                                     negatives (mode a)
  ``"instance_class"``  the hard views of ``C_i`` plus every view    required (mode b)
                        of every other same-class instance
  ``"class"``           farthest point over every same-class view    required (the
                        of the batch (the earlier decision)          earlier default)
  ====================  ===========================================  ================

  Under ``"instance_class"`` the instance's own views that are not hard positives stay
  neutral, so the hard-positive choice still matters.
- ``positive_mode="log_sum_exp"`` (default) is the paper's numerator
  ``log sum_{p in P_i} e^{l_ip}``; ``"mean"`` averages ``log(e^{l_ip} / den_i)`` over the
  positives (SupCon's ``L_out`` form), which weighs every positive equally.
- The instance's own views that are neither the anchor nor a positive are neither
  positives nor negatives.
- Candidate (target) embeddings are constants (``detach_candidates=True``), as SPEC §1.5
  says of ``g``, also when ``g`` is ``f``; ``detach_candidates=False`` lets the gradient
  through them (the SimCLR convention).
- The game is played **once per forward pass** in training mode (``loss.train()``),
  whatever the anchor set: one ``D`` step and one ``G`` step on the target embeddings
  ``g(a_i)`` of each instance's anchor (the dynamic anchor, view 0 for ``no_anchor`` /
  ``oaa``, or ``anchor_index``) and their hard positives.  With one anchor per instance
  the round's draw of generated negatives is the one the loss uses.  With
  ``anchor_set="every_view"`` the round is the same one (the rows the dynamic form
  would play), then one draw of the updated generator gives ``K_adv`` negatives to
  each of the ``B V`` anchor rows: the every-view option adds anchors, not generator
  steps.  In eval mode nothing is updated and fresh negatives are sampled.
- How it is computed (same value and gradient whichever path runs; the tests run each
  against the loop references): the loss object holds state (its game, its random
  generator) and dispatches; every function below takes data (a
  :class:`~spacl.losses.spacl.options.SPACLOptions` record, tensors, a
  :class:`~spacl.losses.spacl.rows.Rows` bundle), never the loss.  Checks in
  :mod:`.inputs`; mining (anchor, positives) in :mod:`.mining`; one anchor per instance
  in :mod:`.one_anchor`; ``anchor_set="every_view"`` fused, with no loop over views, in
  :mod:`.every_view`; both build the anchor rows (:mod:`.rows`) and call
  :func:`.objective.row_objective`: the loss on the kept negatives only
  (``negatives="all_views"``, ``share < 1``, any positive pool, the widest row keeping
  at most a quarter of its candidates) in :mod:`.compact` (the class positives of
  ``"instance_class"`` in :mod:`.class_pool`), else the dense kernel of :mod:`.dense`.
  The class is :class:`.loss.SPACLLoss`, its switches :mod:`.options`, its log record
  :mod:`.step`.
- Ablations are one argument, ``variant`` (SPEC §1.6):

  ========================  =====================  ==================  ========  =========
  variant                   anchor                 positives           K_adv     share
  ========================  =====================  ==================  ========  =========
  ``full``                  dynamic                farthest point      K_adv     share
  ``no_anchor``             view 0 (original)      farthest point      K_adv     share
  ``no_hard_positive``      dynamic                random              K_adv     share
  ``no_adversarial``        dynamic                farthest point      0         share
  ``no_negative_selection`` dynamic                farthest point      K_adv     1
  ``oaa``                   view 0 (original)      random augmented    K_adv     share
  ``ib``                    dynamic                farthest point      0         1
  ``ib_h``                  dynamic                farthest point      0         share
  ========================  =====================  ==================  ========  =========

  ``oaa`` ablates the positive side only, ``ib``/``ib_h`` the negative side only (in-batch
  negatives, all kept / cut); ``ib_h`` therefore computes the same as
  ``no_adversarial`` (the paper reports them in different tables).  Random positives
  are drawn uniformly without replacement from the pool minus the anchor with an
  explicit ``torch.Generator`` whose state is saved in ``state_dict()``.
- ``share=1, num_adversarial=0, num_positives=1`` with view 0 as anchor
  (``variant="no_anchor"`` or ``"oaa"``) and two views is InfoNCE with one positive
  (NT-Xent with ``anchor_mode="one"``) exactly.
"""

from spacl.losses.spacl.loss import SPACLLoss
from spacl.losses.spacl.options import (
    ANCHOR_SETS,
    NEGATIVE_SETS,
    ONLINE_MODES,
    POSITIVE_MODES,
    SPACL_POSITIVE_POOLS,
    VARIANT_PARTS,
    VARIANTS,
    SPACLOptions,
    SPACLParts,
)
from spacl.losses.spacl.step import SPACLStep

__all__ = [
    "ANCHOR_SETS",
    "NEGATIVE_SETS",
    "ONLINE_MODES",
    "POSITIVE_MODES",
    "SPACL_POSITIVE_POOLS",
    "VARIANTS",
    "VARIANT_PARTS",
    "SPACLLoss",
    "SPACLOptions",
    "SPACLParts",
    "SPACLStep",
]
