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
  the anchor's class are not negatives (and are positives under ``"instance_class"``).
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
  against the loop references): one anchor per instance in
  :mod:`spacl.losses.spacl_one_anchor`; ``anchor_set="every_view"`` fused, with no loop
  over views, in :mod:`spacl.losses.spacl_every_view`; the loss on the kept negatives
  only (``negatives="all_views"``, ``share < 1``, any positive pool, the widest row
  keeping at most a quarter of its candidates) in :mod:`spacl.losses.spacl_compact`,
  else the dense kernel of :mod:`spacl.losses.spacl_dense`.
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

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice, check_positive
from spacl.losses.kernel import reduce_anchors
from spacl.losses.normalize import NormalizeMode, check_normalize_mode, normalize
from spacl.losses.spacl_compact import compact_loss
from spacl.losses.spacl_every_view import every_view_loss, mine_every
from spacl.losses.spacl_inputs import check_extra, check_inputs, check_pool
from spacl.losses.spacl_one_anchor import mine, one_anchor_loss, positives_of
from spacl.losses.spacl_step import SPACLStep
from spacl.mining._common import unit
from spacl.mining.adversarial import AdversarialNegatives
from spacl.mining.negatives import MASSES, RelativeThresholdNegatives, check_share
from spacl.mining.positives import (
    DynamicAnchor,
    check_num_positives,
    pool_dissimilarity,
)

VARIANTS: tuple[str, ...] = (
    "full",
    "no_anchor",
    "no_hard_positive",
    "no_adversarial",
    "no_negative_selection",
    "oaa",
    "ib",
    "ib_h",
)
NEGATIVE_SETS: tuple[str, ...] = ("all_views", "anchor_views")
#: how labels enter (module docstring); the two last need labels
SPACL_POSITIVE_POOLS: tuple[str, ...] = ("instance", "instance_class", "class")
POSITIVE_MODES: tuple[str, ...] = ("log_sum_exp", "mean")
#: how the training engine feeds the loss (spacl.engine.arm): one online pass of every
#: view, or the online encoder on the anchor view only (with the target on the pool)
ONLINE_MODES: tuple[str, ...] = ("all_views", "anchor_view")
#: one dynamic anchor per instance (the paper), or every view an anchor once
ANCHOR_SETS: tuple[str, ...] = ("dynamic", "every_view")


@dataclass(frozen=True)
class SPACLParts:
    """Which SPACL parts a variant keeps."""

    dynamic_anchor: bool
    hard_positives: bool
    adversarial: bool
    negative_selection: bool


VARIANT_PARTS: dict[str, SPACLParts] = {
    "full": SPACLParts(True, True, True, True),
    "no_anchor": SPACLParts(False, True, True, True),
    "no_hard_positive": SPACLParts(True, False, True, True),
    "no_adversarial": SPACLParts(True, True, False, True),
    "no_negative_selection": SPACLParts(True, True, True, False),
    "oaa": SPACLParts(False, False, True, True),
    "ib": SPACLParts(True, True, False, False),
    "ib_h": SPACLParts(True, True, False, True),
}


class SPACLLoss(nn.Module):
    """SPACL objective (SPEC §1): hard positives, adversarial negatives, relative cut.

    Args:
        temperature: ``tau``.
        num_positives: ``lambda_P``, hard positives per anchor (default 2).
        share: ``lambda_Q``, kept share of the negative mass, ``0 < share <= 1`` (0.95).
        num_adversarial: ``K_adv``, generated negatives per anchor (default 1; 0: none).
        variant: ablation switch, one of :data:`VARIANTS` (module docstring).
        positive_pool: ``"instance"`` (self- or weakly supervised), ``"instance_class"`` or
            ``"class"`` (supervised, need labels); see the module docstring.
        positive_mode: ``"log_sum_exp"`` (the paper) or ``"mean"`` (``L_out`` form).
        mass: reading of the cut: ``"similarity"`` (the paper's formula on raw
            similarities, default), ``"exp"`` (weights ``exp(s / tau)``) or ``"linear"``
            (``(1 + s) / 2``); see :mod:`spacl.mining.negatives`.
        negatives: ``"all_views"`` or ``"anchor_views"`` of the other instances.
        online: how :class:`spacl.engine.Arm` feeds this loss: ``"all_views"`` (one online
            forward pass of every view; anchors ``[B, V, d]``) or ``"anchor_view"``
            (online encoder on the anchor views only, the target on the pool).  The
            loss itself accepts every form whatever this says.
        anchor_set: ``"dynamic"`` (the paper: one anchor per instance, the hardest view)
            or ``"every_view"``: each of the ``V`` views is an anchor once, with its own
            farthest-point positives from the instance's pool (``B V`` anchors, as the
            baselines have; needs ``anchors`` ``[B, V, d]`` or ``None``), computed in
            one fused pass with one game round; per-anchor rows (``reduction="none"``,
            :attr:`last`) are instance-major.  An explicit ``anchor_index`` overrides it.
        normalize: ``sphere | ball | none`` for the loss's embeddings; mining always
            works on the unit sphere.
        detach_candidates: treat the target (candidate) embeddings as constants.
        embedding_dim: ``d``; builds the generator and discriminator now (else at the
            first forward pass, or when a ``state_dict`` holding them is loaded).
        adversarial_lr: Adam learning rate of the game.
        adversarial_hidden: hidden width of ``G`` and ``D`` (default ``2 d``).
        conditional_discriminator: feed ``D`` the anchor too (not in the paper).
        generator: ``torch.Generator`` for random positives and for seeding the game
            (default: seeded with 0).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Call: ``loss(anchors, pool, labels=None, *, anchor_index=None, extra_negatives=None,
    extra_negative_labels=None) -> Tensor`` with ``pool[B, V, d]`` and ``anchors``
    ``None``, ``[B, d]`` or ``[B, V, d]`` (module docstring).  After each call
    :attr:`last` holds a :class:`SPACLStep`.

    **In your own training loop**, three things differ from a plain loss:

    - the loss trains its own generator and discriminator (the adversarial negatives)
      with its own Adam optimiser, one round per call in training mode: keep its
      parameters **out of your optimiser** (give it ``encoder.parameters()`` only);
    - those networks are built on the first call, when ``d`` is known (pass
      ``embedding_dim`` to build them at once, e.g. before loading a checkpoint);
    - its ``state_dict()`` (the networks and their optimiser's moments) belongs in your
      checkpoint beside the encoder's, or a resumed run plays a fresh game.

    Example:
        >>> loss_fn = SPACLLoss(temperature=0.1, embedding_dim=128)
        >>> opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)  # doctest: +SKIP
        >>> pool = torch.nn.functional.normalize(torch.randn(8, 5, 128), dim=-1)
        >>> float(loss_fn(None, pool)) > 0      # anchors None: picked from the pool
        True
        >>> state = {"loss": loss_fn.state_dict()}  # with the encoder's, in a checkpoint
    """

    def __init__(
        self,
        temperature: float = 0.1,
        num_positives: int = 2,
        share: float = 0.95,
        num_adversarial: int = 1,
        variant: str = "full",
        positive_pool: str = "instance",
        *,
        positive_mode: str = "log_sum_exp",
        mass: str = "similarity",
        negatives: str = "all_views",
        online: str = "all_views",
        anchor_set: str = "dynamic",
        normalize: NormalizeMode = "sphere",
        detach_candidates: bool = True,
        embedding_dim: int | None = None,
        adversarial_lr: float = 1e-3,
        adversarial_hidden: int | None = None,
        conditional_discriminator: bool = False,
        generator: torch.Generator | None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        check_choice(variant, "variant", VARIANTS)
        if (
            not isinstance(num_adversarial, int)
            or isinstance(num_adversarial, bool)
            or num_adversarial < 0
        ):
            raise ValueError(f"num_adversarial must be an integer >= 0, got {num_adversarial!r}")
        check_choice(negatives, "negatives", NEGATIVE_SETS)
        check_choice(mass, "mass", MASSES)
        check_choice(positive_pool, "positive_pool", SPACL_POSITIVE_POOLS)
        check_choice(positive_mode, "positive_mode", POSITIVE_MODES)
        check_choice(anchor_set, "anchor_set", ANCHOR_SETS)
        if anchor_set == "every_view" and online == "anchor_view":
            raise ValueError(
                "anchor_set='every_view' needs the online embeddings of every view; "
                "online='anchor_view' embeds one: use online='all_views'"
            )
        check_choice(online, "online", ONLINE_MODES)
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.temperature = check_positive(temperature, "temperature")
        self.num_positives = check_num_positives(num_positives)
        self.share = check_share(share)
        self.num_adversarial = num_adversarial
        self.variant = variant
        self.parts = VARIANT_PARTS[variant]
        self.positive_pool = positive_pool
        self.positive_mode = positive_mode
        self.mass = mass
        self.negatives = negatives
        self.online = online
        self.anchor_set = anchor_set
        self.normalize = check_normalize_mode(normalize)
        self.detach_candidates = bool(detach_candidates)
        self.reduction = reduction
        self.adversarial_lr = check_positive(adversarial_lr, "adversarial_lr")
        self.adversarial_hidden = adversarial_hidden
        self.conditional_discriminator = bool(conditional_discriminator)
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)
        self.effective_share = self.share if self.parts.negative_selection else 1.0
        self.effective_adversarial = num_adversarial if self.parts.adversarial else 0
        self.cut = RelativeThresholdNegatives(self.effective_share, mass, self.temperature)
        self.register_module("adversarial", None)
        self.adversarial: AdversarialNegatives | None
        if embedding_dim is not None and self.effective_adversarial > 0:
            self._build_adversarial(embedding_dim)
        self.last: SPACLStep | None = None

    # -- the game's players ------------------------------------------------------------------
    def _build_adversarial(
        self, dim: int, hidden: int | None = None, noise_dim: int | None = None
    ) -> AdversarialNegatives:
        seed = int(torch.randint(0, 2**62, (1,), generator=self.rng, device=self.rng.device))
        self.adversarial = AdversarialNegatives(
            dim,
            self.effective_adversarial,
            hidden=self.adversarial_hidden if hidden is None else hidden,
            noise_dim=noise_dim,
            lr=self.adversarial_lr,
            conditional=self.conditional_discriminator,
            generator=torch.Generator().manual_seed(seed),
        )
        return self.adversarial

    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        # build the lazily created players first so that their weights load into them
        out_key = prefix + "adversarial.generator.2.weight"
        in_key = prefix + "adversarial.generator.0.weight"
        if self.adversarial is None and out_key in state_dict and in_key in state_dict:
            dim, hidden = state_dict[out_key].shape
            self._build_adversarial(
                int(dim), hidden=int(hidden), noise_dim=int(state_dict[in_key].shape[1] - dim)
            )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> dict[str, Any]:
        return {"rng_state": self.rng.get_state()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.rng.set_state(state["rng_state"])

    # -- mining ------------------------------------------------------------------------------
    @torch.no_grad()
    def choose_anchor(self, pool: Tensor) -> Tensor:
        """``LongTensor[B]``: the anchor view of every instance under this variant.

        The dynamic anchor ``argmax_u h(u)`` on the (target) ``pool[B, V, d]``, or view 0
        for ``no_anchor`` / ``oaa``.  An engine calls this on the target embeddings,
        runs the online encoder on ``views[arange(B), a]`` only, and passes
        ``anchor_index=a`` to :meth:`forward`.
        """
        check_pool(self, pool, None, positives=False)
        return self._anchor(unit(pool.detach()), None)

    def _anchor(self, unit_pool: Tensor, dissimilarity: Tensor | None) -> Tensor:
        b = unit_pool.shape[0]
        if not self.parts.dynamic_anchor:
            return torch.zeros(b, dtype=torch.long, device=unit_pool.device)
        if dissimilarity is None:
            dissimilarity = pool_dissimilarity(unit_pool)
        return DynamicAnchor.from_dissimilarity(dissimilarity)

    def _positives(
        self,
        unit_pool: Tensor,
        anchor: Tensor,
        labels: Tensor | None,
        dissimilarity: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        """Positives of one anchor per instance (:func:`.spacl_one_anchor.positives_of`)."""
        return positives_of(self, unit_pool, anchor, labels, dissimilarity)

    # -- validation --------------------------------------------------------------------------
    # -- the loss ----------------------------------------------------------------------------
    def forward(
        self,
        anchors: Tensor | None,
        pool: Tensor,
        labels: Tensor | None = None,
        *,
        anchor_index: Tensor | None = None,
        extra_negatives: Tensor | None = None,
        extra_negative_labels: Tensor | None = None,
    ) -> Tensor:
        """SPACL loss of a batch (see the class and module docstrings for the contract).

        Args:
            anchors: online embeddings: ``None`` (take the anchor view from ``pool``),
                ``[B, d]`` (one embedded view per instance) or ``[B, V, d]`` (all views).
            pool: ``[B, V, d]`` target embeddings of every view (view 0 the original).
            labels: optional ``[B]`` integer class labels.
            anchor_index: optional ``[B]`` view index of the anchor (overrides the
                variant's choice; with ``anchors[B, d]`` it names the embedded view).
            extra_negatives: optional ``[Q, d]`` constant candidates (a negative queue),
                joined to ``Q_i`` before the cut.
            extra_negative_labels: ``[Q]`` labels of ``extra_negatives`` (used with
                ``labels``: same-class rows are not negatives).
        """
        labels, anchor_index = check_inputs(self, anchors, pool, labels, anchor_index)
        extra, extra_labels = check_extra(
            self, pool, labels, extra_negatives, extra_negative_labels
        )
        if self.anchor_set == "dynamic" or anchor_index is not None:
            per_anchor, self.last = one_anchor_loss(
                self, anchors, pool, labels, anchor_index, extra, extra_labels
            )
            return reduce_anchors(per_anchor, self.reduction)
        if anchors is not None and anchors.ndim == 2:
            raise ValueError(
                "anchor_set='every_view' needs the online embeddings of every view: "
                f"anchors [B, V, d] or None, got {tuple(anchors.shape)}"
            )
        per_anchor, self.last = self._every_view(anchors, pool, labels, extra, extra_labels)
        return reduce_anchors(per_anchor, self.reduction)

    def _every_view(
        self,
        anchors: Tensor | None,
        pool: Tensor,
        labels: Tensor | None,
        extra: Tensor | None,
        extra_labels: Tensor | None,
    ) -> tuple[Tensor, SPACLStep]:
        """Every view an anchor, fused (:func:`spacl.losses.spacl_every_view.every_view_loss`)."""
        return every_view_loss(self, anchors, pool, labels, extra, extra_labels)

    def _target(self, pool: Tensor, unit_pool: Tensor) -> Tensor:
        """The candidate (target) embeddings ``g`` the logits are taken against."""
        if self.detach_candidates and self.normalize == "sphere":
            return unit_pool
        return normalize(pool.detach() if self.detach_candidates else pool, self.normalize)

    def _compact(
        self,
        online: Tensor,
        target: Tensor,
        flat_pos: Tensor,
        row_inst: Tensor,
        row_labels: Tensor | None,
        labels: Tensor | None,
        gen_logits: Tensor | None,
        extra: Tensor | None,
        extra_labels: Tensor | None,
        mirrored: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor] | Tensor | None:
        """The loss on the kept negatives only (:func:`spacl.losses.spacl_compact.compact_loss`)."""
        return compact_loss(
            self,
            online,
            target,
            flat_pos,
            row_inst,
            row_labels,
            labels,
            gen_logits,
            extra,
            extra_labels,
            mirrored,
        )

    def _mine(
        self, pool: Tensor, labels: Tensor | None, anchor_index: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """One-anchor mining (:func:`spacl.losses.spacl_one_anchor.mine`)."""
        return mine(self, pool, labels, anchor_index)

    def _mine_every(
        self, pool: Tensor, labels: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Every-view mining (:func:`spacl.losses.spacl_every_view.mine_every`)."""
        return mine_every(self, pool, labels)

    def _players(self, d: int) -> AdversarialNegatives:
        """The game's players, built at the first use (``d`` checked against them)."""
        adversarial = self.adversarial
        if adversarial is None:
            return self._build_adversarial(d)
        if adversarial.dim != d:
            raise ValueError(
                f"pool has embedding dimension d={d} but the generator was built for "
                f"embedding_dim={adversarial.dim}"
            )
        return adversarial

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, num_positives={self.num_positives}, "
            f"share={self.share}, num_adversarial={self.num_adversarial}, "
            f"variant={self.variant!r}, positive_pool={self.positive_pool!r}, "
            f"positive_mode={self.positive_mode!r}, mass={self.mass!r}, "
            f"negatives={self.negatives!r}"
        )
