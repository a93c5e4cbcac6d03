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
- ``anchor_set="every_view"`` is computed fused, with no loop over views: the pool is
  normalised and its ``[B, V, V]`` dissimilarities computed once, farthest-point
  selection runs once for the ``B V`` rows (row ``r`` = instance ``r // V`` with view
  ``r % V`` as anchor, instance-major), then one ``[B V] x [B V (+ K_adv + Q)]`` logit
  matrix with masks from instance ids, one cut and one kernel call.  It equals the
  view-by-view loop (tests/loss_references.py) to rounding.
- The kernel runs on the kept negatives only where it can (``negatives="all_views"``,
  index positives, ``share < 1``, the widest row keeping at most a quarter of its
  candidates), in either anchor set: the logits are taken once without gradient for
  the cut, which returns the kept columns as an index; the loss is then computed on
  ``[A, P + K_adv + m]`` and its gradient reaches the embeddings through a sparse
  product (``SPACLLoss._compact``).  Same value and gradient as the dense kernel (the
  tests run both).
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

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice, check_labels, check_positive, check_tensor
from spacl.losses.kernel import PositiveMode, contrastive_kernel, reduce_anchors
from spacl.losses.normalize import NormalizeMode, check_normalize_mode, normalize
from spacl.mining._common import check_anchor_index, unit
from spacl.mining.adversarial import AdversarialNegatives
from spacl.mining.negatives import MASSES, RelativeThresholdNegatives, _mask_of, check_share
from spacl.mining.positives import (
    DynamicAnchor,
    check_num_positives,
    check_pool_size,
    class_pool_members,
    farthest_point_flat,
    farthest_point_from_dissimilarity,
    farthest_point_rows,
    pool_dissimilarity,
    random_positives,
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


#: the compact path runs while the widest row keeps at most this share of its candidates
_COMPACT_SHARE = 0.25


class _KeptLogits(torch.autograd.Function):
    """``out[a, j] = <online[a], table[rows[a, j]]>``, its values given (already computed).

    Forward returns ``values`` (the entries of the dense no-gradient logits, so the cut
    and the loss see the same numbers); backward is the sparse product
    ``grad_online = G @ table`` with ``G[a, rows[a, j]] += grad[a, j]`` (a CSR matrix of
    ``A m`` entries), and ``grad_table = G^T @ online`` when the table needs one.
    Entries with a zero incoming gradient (masked ones) contribute nothing.
    """

    @staticmethod
    def forward(ctx: Any, online: Tensor, table: Tensor, rows: Tensor, values: Tensor) -> Tensor:
        ctx.save_for_backward(online, table, rows)
        return values.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
        online, table, rows = ctx.saved_tensors
        a, m = rows.shape
        grad_online = grad_table = None
        if ctx.needs_input_grad[0]:
            crow = torch.arange(0, a * m + 1, m, device=rows.device)
            with warnings.catch_warnings():  # "sparse CSR support is in beta"
                warnings.simplefilter("ignore", UserWarning)
                sparse = torch.sparse_csr_tensor(
                    crow, rows.reshape(-1), grad.reshape(-1), size=(a, table.shape[0])
                )
            grad_online = (sparse @ table.detach()).to(online.dtype)
        if ctx.needs_input_grad[1]:
            contrib = grad.unsqueeze(2) * online.detach().unsqueeze(1)  # [A, m, d]
            grad_table = torch.zeros_like(table).index_add_(
                0, rows.reshape(-1), contrib.reshape(a * m, -1)
            )
        return grad_online, grad_table, None, None


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
        self._check_pool(pool, None, positives=False)
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
        """``(positives, flat)``: indices as returned to users and flat pool indices."""
        b, v, d = unit_pool.shape
        rows = torch.arange(b, device=unit_pool.device)
        start = rows * v + anchor
        if self.positive_pool == "class":
            assert labels is not None
            member = class_pool_members(labels, v, start)
            if self.parts.hard_positives:
                flat = farthest_point_flat(
                    unit_pool.reshape(b * v, d), start, member, self.num_positives
                )
            else:
                flat = random_positives(member, self.num_positives, self.rng)
            return flat, flat
        if self.parts.hard_positives:
            if dissimilarity is None:
                dissimilarity = pool_dissimilarity(unit_pool)
            views = farthest_point_from_dissimilarity(dissimilarity, anchor, self.num_positives)
        else:
            member = torch.ones(b, v, dtype=torch.bool, device=unit_pool.device)
            member[rows, anchor] = False
            views = random_positives(member, self.num_positives, self.rng)
        return views, rows.unsqueeze(1) * v + views

    # -- validation --------------------------------------------------------------------------
    def _check_pool(self, pool: Tensor, labels: Tensor | None, *, positives: bool = True) -> None:
        check_tensor(pool, "pool", ndim=3)
        b, v, d = pool.shape
        if b < 1 or d < 1:
            raise ValueError(
                f"pool must be [B, V, d] with B >= 1 and d >= 1, got {tuple(pool.shape)}"
            )
        if self.parts.dynamic_anchor and v < 2:
            raise ValueError(
                f"pool holds {v} view per instance; the dynamic anchor needs at least 2 "
                f"(got shape {tuple(pool.shape)})"
            )
        if positives:
            class_labels = labels if self.positive_pool == "class" else None
            check_pool_size(v, self.num_positives, class_labels)

    def _check_inputs(
        self,
        anchors: Tensor | None,
        pool: Tensor,
        labels: Tensor | None,
        anchor_index: Tensor | None,
    ) -> tuple[Tensor | None, Tensor | None]:
        check_tensor(pool, "pool", ndim=3)
        b, v, d = pool.shape
        if labels is not None:
            labels = check_labels(labels, b).to(pool.device)
        elif self.positive_pool != "instance":
            raise ValueError(
                f"positive_pool={self.positive_pool!r} is a supervised mode and needs labels: "
                "call loss(anchors, pool, labels)"
            )
        self._check_pool(pool, labels)
        if anchors is not None:
            check_tensor(anchors, "anchors", ndim=(2, 3))
            want = (b, d) if anchors.ndim == 2 else (b, v, d)
            if tuple(anchors.shape) != want:
                raise ValueError(
                    f"anchors must be [B, d] or [B, V, d] matching pool {tuple(pool.shape)}, "
                    f"got {tuple(anchors.shape)}"
                )
            if anchors.dtype != pool.dtype:
                raise TypeError(
                    f"anchors dtype {anchors.dtype} differs from pool dtype {pool.dtype}"
                )
        if anchor_index is not None:
            anchor_index = check_anchor_index(anchor_index, b, v, "anchor_index").to(pool.device)
        return labels, anchor_index

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
        labels, anchor_index = self._check_inputs(anchors, pool, labels, anchor_index)
        extra, extra_labels = self._check_extra(
            pool, labels, extra_negatives, extra_negative_labels
        )
        if self.anchor_set == "dynamic" or anchor_index is not None:
            per_anchor, self.last = self._one_anchor(
                anchors, pool, labels, anchor_index, extra, extra_labels
            )
            return reduce_anchors(per_anchor, self.reduction)
        if anchors is not None and anchors.ndim == 2:
            raise ValueError(
                "anchor_set='every_view' needs the online embeddings of every view: "
                f"anchors [B, V, d] or None, got {tuple(anchors.shape)}"
            )
        per_anchor, self.last = self._every_view(anchors, pool, labels, extra, extra_labels)
        return reduce_anchors(per_anchor, self.reduction)

    def _one_anchor(
        self,
        anchors: Tensor | None,
        pool: Tensor,
        labels: Tensor | None,
        anchor_index: Tensor | None,
        extra: Tensor | None,
        extra_labels: Tensor | None,
    ) -> tuple[Tensor, SPACLStep]:
        """Per-anchor losses ``[B]`` with one anchor per instance, and what was chosen."""
        b = pool.shape[0]
        rows = torch.arange(b, device=pool.device)
        unit_pool, anchor, positives, flat_pos = self._mine(pool, labels, anchor_index)

        if anchors is None:
            online = pool[rows, anchor]
        elif anchors.ndim == 3:
            online = anchors[rows, anchor]
        else:
            online = anchors
        online = normalize(online, self.normalize) / self.temperature  # logits = online @ g
        target = self._target(pool, unit_pool)
        gen_logits = d_loss = g_loss = None
        if self.effective_adversarial > 0:
            gen_logits, d_loss, g_loss = self._generated(online, unit_pool, anchor, flat_pos)
        compact = self._compact(
            online, target, flat_pos, rows, labels, labels, gen_logits, extra, extra_labels
        )
        if isinstance(compact, tuple):
            per_anchor, n_candidates, n_kept, kept_gen = compact
        else:
            cand_logits, pos_logits, other, same = self._in_batch(
                online, target, anchor, flat_pos, labels
            )
            per_anchor, candidates, kept, kept_gen = self._objective(
                online,
                cand_logits,
                pos_logits,
                other,
                same,
                gen_logits,
                labels,
                extra,
                extra_labels,
                compact,
            )
            n_candidates, n_kept = candidates.sum(1), kept.sum(1)
        step = SPACLStep(
            anchor=anchor.detach(),
            positives=positives.detach(),
            candidate_negatives=n_candidates,
            kept_negatives=n_kept,
            kept_generated=kept_gen,
            d_loss=d_loss,
            g_loss=g_loss,
        )
        return per_anchor, step

    def _every_view(
        self,
        anchors: Tensor | None,
        pool: Tensor,
        labels: Tensor | None,
        extra: Tensor | None,
        extra_labels: Tensor | None,
    ) -> tuple[Tensor, SPACLStep]:
        """Per-anchor losses ``[B V]`` with every view an anchor, fused (no loop over views).

        Row ``r`` is instance ``r // V`` with view ``r % V`` as its anchor (instance-major,
        as :mod:`spacl.losses._batch` lays out rows).  The pool is normalised and its
        ``[B, V, V]`` dissimilarities computed once; farthest-point selection runs once
        for all ``B V`` rows; one ``[B V] x [B V]`` logit matmul (one batched
        ``[B] x [B]`` per view for ``negatives="anchor_views"``), one game round, one cut
        and one kernel call over every row.
        """
        b, v, d = pool.shape
        n = b * v
        unit_pool, positives, flat_pos, game_anchor = self._mine_every(pool, labels)
        online = pool if anchors is None else anchors
        online = normalize(online.reshape(n, d), self.normalize) / self.temperature
        target = self._target(pool, unit_pool)
        row_labels = None if labels is None else labels.repeat_interleave(v)
        gen_logits = d_loss = g_loss = None
        if self.effective_adversarial > 0:
            gen_logits, d_loss, g_loss = self._generated_every(
                online, unit_pool, game_anchor, flat_pos
            )
        row_inst = torch.arange(b, device=pool.device).repeat_interleave(v)
        compact = self._compact(
            online, target, flat_pos, row_inst, row_labels, labels, gen_logits, extra, extra_labels
        )
        if isinstance(compact, tuple):
            per_anchor, n_candidates, n_kept, kept_gen = compact
        else:
            cand_logits, pos_logits, other, same = self._in_batch_every(
                online, target, flat_pos, labels, row_labels
            )
            per_anchor, candidates, kept, kept_gen = self._objective(
                online,
                cand_logits,
                pos_logits,
                other,
                same,
                gen_logits,
                row_labels,
                extra,
                extra_labels,
                compact,
            )
            n_candidates, n_kept = candidates.sum(1), kept.sum(1)
        step = SPACLStep(
            anchor=torch.arange(v, device=pool.device).repeat(b),
            positives=positives.detach(),
            candidate_negatives=n_candidates,
            kept_negatives=n_kept,
            kept_generated=kept_gen,
            d_loss=d_loss,
            g_loss=g_loss,
        )
        return per_anchor, step

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
    ) -> tuple[Tensor, Tensor, Tensor, Tensor] | Tensor | None:
        """The loss on the kept negatives only: ``(per_anchor, candidates, kept, kept_gen)``.

        Same value as :meth:`_objective` (``negatives="all_views"``, index positives, a
        cut with ``share < 1``), computed without any ``[A, K]`` tensor in the graph:
        the in-batch logits are taken once without gradient and their non-candidates
        filled with ``-inf`` in place (an ``[A, V]`` scatter, or one label mask); the
        cut returns the kept columns as an index (:meth:`RelativeThresholdNegatives.select_keys`,
        the signed total from sums of the candidate embeddings); the kernel then runs on
        ``[A, P + K_adv + m]`` (positives, generated, the ``m`` kept columns), whose
        in-batch and queue logits carry their gradient through :class:`_KeptLogits`
        (backward: a sparse ``[A, m]`` product, no dense ``[A, K]`` matmul).  ``None``
        when the case is not covered; the kept mask in the dense kernel's columns when
        the cut keeps too many for the compact form to pay (then the dense path).
        """
        if (
            self.negatives != "all_views"
            or self.positive_pool == "instance_class"
            or self.effective_share >= 1.0
        ):
            return None
        b, v, d = target.shape
        a = online.shape[0]
        n = b * v
        device = online.device
        table = target.reshape(n, d)
        k_adv = 0 if gen_logits is None else gen_logits.shape[1]
        with torch.no_grad():
            anchors = online.detach()
            queue = None
            columns = [table.detach()]
            if k_adv:
                columns.append(table.new_zeros(k_adv, d))  # filled with gen_logits below
            if extra is not None:
                queue = normalize(extra.detach(), self.normalize).to(online.dtype)
                columns.append(queue)
            # one matmul for every candidate column: [in-batch | generated | queue]
            joint = anchors @ (torch.cat(columns, 0) if len(columns) > 1 else table.detach()).T
            keys = joint[:, :n]
            if row_labels is None:
                own = (row_inst * v).unsqueeze(1) + torch.arange(v, device=device)
                keys.scatter_(1, own, -torch.inf)
                excluded = target.detach().sum(1)[row_inst]  # [A, d]
                count = torch.full((a,), n - v, device=device)
            else:
                assert labels is not None
                groups, inverse = torch.unique(labels, return_inverse=True)
                cand_groups = inverse.repeat_interleave(v)
                row_groups = cand_groups[row_inst * v]
                keys.masked_fill_(row_groups.unsqueeze(1) == cand_groups.unsqueeze(0), -torch.inf)
                sums = torch.zeros(len(groups), d, dtype=table.dtype, device=device)
                excluded = sums.index_add_(0, cand_groups, table.detach())[row_groups]
                count = n - torch.bincount(cand_groups, minlength=len(groups))[row_groups]
            total = (anchors * (table.detach().sum(0) - excluded)).sum(1)
            if gen_logits is not None:
                joint[:, n : n + k_adv] = gen_logits.detach()
                total = total + gen_logits.detach().sum(1)
                count = count + k_adv
            if extra is not None:
                q_logits = joint[:, n + k_adv :]
                q_neg, _ = self._extra_masks(row_labels, extra_labels, a, extra.shape[0], device)
                if row_labels is not None and extra_labels is not None:
                    q_logits.masked_fill_(~q_neg, -torch.inf)
                    total = total + torch.where(q_neg, q_logits, 0.0).sum(1)
                    count = count + q_neg.sum(1)
                else:
                    total = total + q_logits.sum(1)
                    count = count + extra.shape[0]
            if not bool((count > 0).any()):
                return None  # the dense path raises its error
            cols, kept, _, rest, rest_keep = self.cut._select_keys(joint, None, total)
            width = max(int(kept.sum(1).max()), 1)  # the kept entries lead each row
            if rest_keep is not None:
                width = max(width, int(rest_keep.sum(1).max()))
            if width > _COMPACT_SHARE * joint.shape[1]:
                # many candidates kept: the dense kernel, with this selection moved to its
                # columns [in-batch | P positives | generated | queue]
                mask = _mask_of(cols, kept, joint.shape[1])
                if rest is not None and rest_keep is not None:
                    mask[rest] = rest_keep
                p = flat_pos.shape[1]
                hole = torch.zeros(a, p, dtype=torch.bool, device=device)
                return torch.cat((mask[:, :n], hole, mask[:, n:]), 1)
            cols, kept = self.cut._merge(cols, kept, rest, rest_keep)
            cols, kept = cols[:, :width], kept[:, :width]
            values = joint.gather(1, cols)
            is_gen = (cols >= n) & (cols < n + k_adv)
            in_table = kept & ~is_gen
            rows = torch.where(cols < n, cols, cols - k_adv).masked_fill_(~in_table, 0)
        full_table = table if queue is None else torch.cat((table, queue), 0)
        values = values.masked_fill(~in_table, 0.0)
        kept_logits = _KeptLogits.apply(online, full_table, rows, values)
        pos_logits = torch.einsum("ad,apd->ap", online, table[flat_pos])
        p = pos_logits.shape[1]
        pieces = [pos_logits, kept_logits]
        negatives = [torch.zeros(a, p, dtype=torch.bool, device=device), in_table]
        kept_gen = torch.zeros(a, dtype=torch.long, device=device)
        if gen_logits is not None:
            gen_kept = torch.zeros(a, k_adv + 1, dtype=torch.bool, device=device)
            gen_kept.scatter_(1, torch.where(kept & is_gen, cols - n, k_adv), True)
            pieces.append(gen_logits)
            negatives.append(gen_kept[:, :k_adv])
            kept_gen = gen_kept[:, :k_adv].sum(1)
        positives = torch.arange(p, device=device).expand(a, p)
        mode: PositiveMode = "log_sum_exp" if self.positive_mode == "log_sum_exp" else "mean"
        per_anchor = contrastive_kernel(
            torch.cat(pieces, 1), positives, torch.cat(negatives, 1), positive_mode=mode
        )
        return per_anchor, count, kept.sum(1), kept_gen

    def _objective(
        self,
        online: Tensor,
        cand_logits: Tensor,
        pos_logits: Tensor,
        other: Tensor,
        same: Tensor,
        gen_logits: Tensor | None,
        labels: Tensor | None,
        extra: Tensor | None,
        extra_labels: Tensor | None,
        kept: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Assemble every anchor row's candidates, cut once, and call the kernel once.

        Columns: the in-batch candidates, the ``P`` hard positives, the ``K_adv``
        generated negatives, the queue.  ``labels`` are those of the anchor rows.
        Returns the per-anchor losses, the candidate and kept masks, and the number of
        generated negatives kept per row.  ``kept``: the cut's mask, if already taken.
        """
        a = online.shape[0]
        device = online.device
        k_adv = 0 if gen_logits is None else gen_logits.shape[1]
        p = pos_logits.shape[1]
        n_cand = cand_logits.shape[1]
        pieces, neg_blocks, pos_blocks = [cand_logits, pos_logits], [other], [same]
        neg_blocks.append(torch.zeros(a, p, dtype=torch.bool, device=device))
        pos_blocks.append(torch.ones(a, p, dtype=torch.bool, device=device))
        if gen_logits is not None:
            pieces.append(gen_logits)
            neg_blocks.append(torch.ones(a, k_adv, dtype=torch.bool, device=device))
            pos_blocks.append(torch.zeros(a, k_adv, dtype=torch.bool, device=device))
        if extra is not None:
            queue = normalize(extra.detach(), self.normalize).to(online.dtype)
            pieces.append(online @ queue.T)
            q_neg, q_pos = self._extra_masks(labels, extra_labels, a, extra.shape[0], device)
            neg_blocks.append(q_neg)
            pos_blocks.append(q_pos)
        candidates = torch.cat(neg_blocks, dim=1)
        if not bool(candidates.any()):
            raise ValueError(
                f"SPACL: no anchor has a negative ({a} anchor(s), K_adv={k_adv}"
                + (", labels leave no other class" if labels is not None else "")
                + ")"
            )
        logits = torch.cat(pieces, dim=1)
        if kept is None:  # else the compact path's selection, on the same logits
            kept = self.cut.select(logits.detach(), candidates)
        positives: Tensor
        if self.positive_pool == "instance_class" or extra_labels is not None:
            positives = torch.cat(pos_blocks, dim=1)
        else:  # the common case: the P positive columns, as an index (no [A, K] mask)
            positives = torch.arange(n_cand, n_cand + p, device=device).expand(a, p)
        mode: PositiveMode = "log_sum_exp" if self.positive_mode == "log_sum_exp" else "mean"
        per_anchor = contrastive_kernel(logits, positives, kept, positive_mode=mode)
        kept_gen = kept[:, n_cand + p : n_cand + p + k_adv].sum(1)
        return per_anchor, candidates, kept, kept_gen

    def _check_extra(
        self,
        pool: Tensor,
        labels: Tensor | None,
        extra: Tensor | None,
        extra_labels: Tensor | None,
    ) -> tuple[Tensor | None, Tensor | None]:
        """Validate ``extra_negatives`` / ``extra_negative_labels``; ``None`` for an empty queue."""
        if extra is None:
            if extra_labels is not None:
                raise ValueError("extra_negative_labels given without extra_negatives")
            return None, None
        check_tensor(extra, "extra_negatives", ndim=2)
        if extra.shape[1] != pool.shape[2]:
            raise ValueError(
                f"extra_negatives must be [Q, {pool.shape[2]}] (the pool's d), "
                f"got {tuple(extra.shape)}"
            )
        if extra.dtype != pool.dtype:
            raise TypeError(f"extra_negatives dtype {extra.dtype} differs from pool {pool.dtype}")
        if extra_labels is not None:
            extra_labels = check_labels(extra_labels, extra.shape[0], "extra_negative_labels")
            extra_labels = extra_labels.to(pool.device)
        elif labels is not None and self.positive_pool != "instance":
            raise ValueError(
                f"positive_pool={self.positive_pool!r} with extra_negatives needs "
                "extra_negative_labels (a queue of the wrong class would be a negative)"
            )
        if extra.shape[0] == 0:
            return None, None
        return extra.to(pool.device), extra_labels if labels is not None else None

    def _extra_masks(
        self,
        labels: Tensor | None,
        extra_labels: Tensor | None,
        b: int,
        q: int,
        device: torch.device,
    ) -> tuple[Tensor, Tensor]:
        """``(negative, positive)`` masks ``[B, Q]`` of the queue rows."""
        if labels is None or extra_labels is None:
            ones = torch.ones(b, q, dtype=torch.bool, device=device)
            return ones, ~ones
        same = labels.unsqueeze(1) == extra_labels.unsqueeze(0)
        positive = same if self.positive_pool == "instance_class" else torch.zeros_like(same)
        return ~same, positive

    @torch.no_grad()
    def _mine(
        self, pool: Tensor, labels: Tensor | None, anchor_index: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(unit_pool, anchor, positives, flat_positives)`` on the target pool, no gradient."""
        unit_pool = unit(pool.detach())
        dissimilarity = None
        if self.parts.dynamic_anchor or self.parts.hard_positives:
            dissimilarity = pool_dissimilarity(unit_pool)
        anchor = anchor_index
        if anchor is None:
            anchor = self._anchor(unit_pool, dissimilarity)
        positives, flat_pos = self._positives(unit_pool, anchor, labels, dissimilarity)
        return unit_pool, anchor, positives, flat_pos

    @torch.no_grad()
    def _mine_every(
        self, pool: Tensor, labels: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Mining of the every-view rows, once for all ``B V`` anchors, no gradient.

        Returns ``(unit_pool, positives[BV, P], flat_positives[BV, P], game_anchor[B])``:
        row ``r`` has view ``r % V`` as its anchor and flat pool index ``r``;
        ``game_anchor`` is the anchor the dynamic form would use (the dynamic anchor, or
        view 0 for ``no_anchor`` / ``oaa``), the rows the game round is played on.
        """
        b, v, d = pool.shape
        n = b * v
        device = pool.device
        unit_pool = unit(pool.detach())
        dissimilarity = None
        if self.parts.dynamic_anchor or self.parts.hard_positives:
            dissimilarity = pool_dissimilarity(unit_pool)  # [B, V, V], once
        game_anchor = self._anchor(unit_pool, dissimilarity)
        start = torch.arange(n, device=device)  # row r starts at its own view
        if self.positive_pool == "class":
            assert labels is not None
            row_labels = labels.repeat_interleave(v)
            member = row_labels.unsqueeze(1) == row_labels.unsqueeze(0)
            member.fill_diagonal_(False)  # row r's anchor is view r itself
            flat_unit = unit_pool.reshape(n, d)
            if self.parts.hard_positives:
                # every row of the [BV, BV] Gram matrix is some row's start: one matmul
                dist = 1.0 - flat_unit @ flat_unit.T
                flat = farthest_point_rows(dist, member, self.num_positives)
            else:
                flat = random_positives(member, self.num_positives, self.rng)
            return unit_pool, flat, flat, game_anchor
        view = start % v
        if self.parts.hard_positives:
            assert dissimilarity is not None
            per_row = dissimilarity.repeat_interleave(v, dim=0)  # [BV, V, V], small
            views = farthest_point_from_dissimilarity(per_row, view, self.num_positives)
        else:
            member = torch.ones(n, v, dtype=torch.bool, device=device)
            member[start, view] = False
            views = random_positives(member, self.num_positives, self.rng)
        return unit_pool, views, (start - view).unsqueeze(1) + views, game_anchor

    def _in_batch_every(
        self,
        online: Tensor,
        target: Tensor,
        flat_pos: Tensor,
        labels: Tensor | None,
        row_labels: Tensor | None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:meth:`_in_batch` for the ``B V`` every-view rows (masks from instance ids).

        ``online[BV, d]`` (already divided by the temperature), ``target[B, V, d]``.
        ``"all_views"``: one ``[BV, BV]`` matmul; ``"anchor_views"``: row ``(i, u)``'s
        candidates are view ``u`` of every instance, one batched ``[B, B]`` matmul per
        view index.
        """
        b, v, d = target.shape
        n = b * v
        device = target.device
        target_flat = target.reshape(n, d)
        row_inst = torch.arange(b, device=device).repeat_interleave(v)
        if self.negatives == "all_views":
            cand_logits = online @ target_flat.T
            pos_logits = cand_logits.gather(1, flat_pos)
            cand_inst, cand_labels = row_inst, row_labels
        else:
            by_view = torch.bmm(online.view(b, v, d).transpose(0, 1), target.permute(1, 2, 0))
            cand_logits = by_view.transpose(0, 1).reshape(n, b)  # [V, B, B] -> rows (i, u)
            pos_logits = torch.einsum("ad,apd->ap", online, target_flat[flat_pos])
            cand_inst, cand_labels = torch.arange(b, device=device), labels
        other = cand_inst.unsqueeze(0) != row_inst.unsqueeze(1)
        same = torch.zeros_like(other)
        if row_labels is not None and cand_labels is not None:
            same_class = cand_labels.unsqueeze(0) == row_labels.unsqueeze(1)
            if self.positive_pool == "instance_class":
                same = other & same_class
            other &= ~same_class
        return cand_logits, pos_logits, other, same

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

    def _generated_every(
        self, online: Tensor, unit_pool: Tensor, game_anchor: Tensor, flat_pos: Tensor
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Logits ``[BV, K_adv]`` of the generated negatives of every row, and the game's losses.

        Training mode: **one** round of the game per forward pass, played on the rows
        the dynamic form plays it on (each instance's ``game_anchor`` view and its hard
        positives), so the generator takes the same steps whatever the anchor set; then
        one draw of the updated generator gives ``K_adv`` negatives to every one of the
        ``B V`` anchor rows.  Eval mode: the draw only.
        """
        b, v, d = unit_pool.shape
        adversarial = self._players(d)
        flat_unit = unit_pool.reshape(b * v, d)
        d_loss = g_loss = None
        if self.training:
            rows = torch.arange(b, device=unit_pool.device) * v + game_anchor
            d_loss, g_loss = adversarial.step(flat_unit[rows], flat_unit[flat_pos[rows]])
        generated = adversarial.sample(flat_unit)
        logits = torch.einsum("ad,akd->ak", online, generated.to(online.dtype))
        return logits, d_loss, g_loss

    def _in_batch(
        self,
        online: Tensor,
        target: Tensor,
        anchor: Tensor,
        flat_pos: Tensor,
        labels: Tensor | None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Logits of the in-batch candidates and of the positives, and two candidate masks.

        ``online`` is already divided by the temperature.  Candidates are every view
        (``"all_views"``, ``[B, B*V]``) or the anchor view (``"anchor_views"``, ``[B, B]``) of
        every instance; the negative mask keeps the other instances (of another class,
        with labels); the positive mask marks the other same-class instances under
        ``positive_pool="instance_class"`` (else nothing).
        """
        b, v, d = target.shape
        rows = torch.arange(b, device=target.device)
        target_flat = target.reshape(b * v, d)
        if self.negatives == "all_views":
            cand_logits = online @ target_flat.T
            pos_logits = cand_logits.gather(1, flat_pos)
            cand_inst = rows.repeat_interleave(v)
            cand_labels = None if labels is None else labels.repeat_interleave(v)
        else:
            cand_logits = online @ target[rows, anchor].T
            pos_logits = torch.einsum("bd,bpd->bp", online, target_flat[flat_pos])
            cand_inst, cand_labels = rows, labels
        other = cand_inst.unsqueeze(0) != rows.unsqueeze(1)
        same = torch.zeros_like(other)
        if labels is not None and cand_labels is not None:
            same_class = cand_labels.unsqueeze(0) == labels.unsqueeze(1)
            if self.positive_pool == "instance_class":
                same = other & same_class
            other &= ~same_class
        return cand_logits, pos_logits, other, same

    def _generated(
        self, online: Tensor, unit_pool: Tensor, anchor: Tensor, flat_pos: Tensor
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Logits ``[B, K_adv]`` of the generated negatives (constants) and the game's losses.

        In training mode one round of the game is played on the target anchor embeddings
        ``g(a_i)`` and the hard positives, and its draw is used; in eval mode a fresh draw.
        """
        b, v, d = unit_pool.shape
        adversarial = self._players(d)
        gen_anchor = unit_pool[torch.arange(b, device=unit_pool.device), anchor]
        d_loss = g_loss = None
        if self.training:
            real = unit_pool.reshape(b * v, d)[flat_pos]
            generated, d_loss, g_loss = adversarial.play(gen_anchor, real)
        else:
            generated = adversarial.sample(gen_anchor)
        logits = torch.einsum("bd,bkd->bk", online, generated.to(online.dtype))
        return logits, d_loss, g_loss

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, num_positives={self.num_positives}, "
            f"share={self.share}, num_adversarial={self.num_adversarial}, "
            f"variant={self.variant!r}, positive_pool={self.positive_pool!r}, "
            f"positive_mode={self.positive_mode!r}, mass={self.mass!r}, "
            f"negatives={self.negatives!r}"
        )
