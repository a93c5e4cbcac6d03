"""Supervised objectives: SupCon (Khosla et al. 2020, L_out and L_in) and NSCL (SPEC §3)."""

from __future__ import annotations

from torch import Tensor

from spacl._validation import check_choice, check_flag
from spacl.losses._batch import PairLayout
from spacl.losses.base import PairwiseContrastiveLoss, instance_select, label_select
from spacl.losses.kernel import GroupPositives
from spacl.losses.normalize import NormalizeMode


class SupConLoss(PairwiseContrastiveLoss):
    """Supervised contrastive loss (Khosla et al. 2020) in its two forms.

    ``variant="out"`` (**L_out**, the paper's recommended form, SupContrast's code)::

        loss_a = -1/|P_a| sum_{p in P_a} log( e^{l_ap} / sum_{k != a} e^{l_ak} )

    ``variant="in"`` (**L_in**, solo-learn's "SupCon")::

        loss_a = -log( 1/|P_a| sum_{p in P_a} e^{l_ap} / sum_{k != a} e^{l_ak} )

    with ``l = s / tau``, ``P_a`` the other samples (all views) of the anchor's class.
    Without labels each instance is its own class: SupCon is NT-Xent exactly.

    Policy for anchors without a positive (a class seen once, one view): they are left
    out of the mean — not counted as zero as in SupContrast's later fix, and never NaN.
    A batch in which *no* anchor has a positive raises ``ValueError`` (pytorch-metric-
    learning silently returns 0 there).  No ``tau / base_tau`` rescaling is applied.

    **One-class batches** (every sample of the same class, or one instance with
    ``V >= 2`` views) are *defined*: the denominator ``sum_{k != a} e^{l_ak}`` is then
    the positives alone, so ``loss_a = log sum_{k != a} e^{l_ak} - 1/|P_a| sum_p l_ap``
    (L_out), finite and ``>= log |P_a|`` with equality iff all positives tie; SupContrast's
    ``SupConLoss`` computes the same value (``needs_negative_pair = False``).  The only
    undefined case is the one above: no anchor has a positive.  The decoupled losses
    (NSCL, DCL), whose denominator excludes the positives, still raise there.

    With a negative queue (``extra_negatives`` + ``extra_negative_labels``, MoCo-SupCon)
    every queue row joins the denominator and the rows of the anchor's class join
    ``P_a`` (so they are positives of L_out / L_in, counted in ``|P_a|``).

    Example (every label distinct: each anchor's only positive is its other view, NT-Xent):
        >>> import torch
        >>> from spacl.losses import NTXentLoss, SupConLoss
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> feats = torch.stack([z0, z1], dim=1)  # [B, V, d]
        >>> supcon = SupConLoss(temperature=0.5)(feats, labels=torch.arange(16))
        >>> torch.allclose(supcon, NTXentLoss(temperature=0.5)(z0, z1))
        True
    """

    needs_negative_pair = False

    def __init__(
        self,
        temperature: float = 0.1,
        variant: str = "out",
        *,
        normalize: NormalizeMode = "sphere",
        anchor_mode: str = "all",
        reduction: str = "mean",
    ) -> None:
        super().__init__(
            temperature, normalize=normalize, anchor_mode=anchor_mode, reduction=reduction
        )
        check_choice(variant, "variant", ("out", "in"))
        self.variant = variant
        self.positive_mode = "mean" if variant == "out" else "log_mean_exp"

    def select(self, layout: PairLayout) -> tuple[Tensor | GroupPositives, Tensor | None]:
        return label_select(layout)

    def extra_repr(self) -> str:
        return f"variant={self.variant!r}, " + super().extra_repr()


class NSCLLoss(PairwiseContrastiveLoss):
    """Negatives-only supervised contrastive loss, NSCL (CL-vs-NSCL paper, SPEC §3).

    DCL whose denominator keeps only samples of a *different* class::

        loss_a = -1/|P_a| sum_{p in P_a} l_ap + log sum_{j: y_j != y_a} e^{l_aj}

    ``P_a`` are the other views of the anchor's instance; same-class samples of other
    instances are neither positive nor negative.  ``positive_in_denominator=True``
    adds the positives to the denominator, as in the authors' code.  Labels required.
    Bound (SPEC §3): ``L_NSCL <= L_DCL <= L_NSCL + e^2/(C-1)``.

    Example (every label distinct: only the other view is left out of the denominator, DCL):
        >>> import torch
        >>> from spacl.losses import DecoupledContrastiveLoss, NSCLLoss
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> nscl = NSCLLoss(temperature=0.5)(z0, z1, labels=torch.arange(16))
        >>> torch.allclose(nscl, DecoupledContrastiveLoss(temperature=0.5)(z0, z1))
        True
    """

    requires_labels = True

    def __init__(
        self,
        temperature: float = 0.5,
        positive_in_denominator: bool = False,
        *,
        normalize: NormalizeMode = "sphere",
        anchor_mode: str = "all",
        reduction: str = "mean",
    ) -> None:
        super().__init__(
            temperature, normalize=normalize, anchor_mode=anchor_mode, reduction=reduction
        )
        self.positive_in_denominator = check_flag(
            positive_in_denominator, "positive_in_denominator"
        )

    def select(self, layout: PairLayout) -> tuple[Tensor | GroupPositives, Tensor | None]:
        positives, _ = instance_select(layout)
        return positives, ~layout.same_label()

    def extra_repr(self) -> str:
        return f"positive_in_denominator={self.positive_in_denominator}, " + super().extra_repr()
