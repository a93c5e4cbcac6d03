"""Self-supervised InfoNCE family: NT-Xent (SimCLR), decoupled (Yeh), debiased (Chuang)."""

from __future__ import annotations

from torch import Tensor

from spacl.losses._batch import PairLayout
from spacl.losses.base import PairwiseContrastiveLoss, instance_select
from spacl.losses.hard import HardNegativeLoss
from spacl.losses.kernel import GroupPositives
from spacl.losses.normalize import NormalizeMode


class NTXentLoss(PairwiseContrastiveLoss):
    """NT-Xent / InfoNCE (Chen et al. 2020, SimCLR) for any number of views ``V >= 2``.

    For anchor view ``a`` of instance ``i``, every other view of ``i`` is a positive and
    every view of every other instance is a negative; one term per positive pair,
    averaged (SupCon's L_out with instance identities as labels)::

        loss_a = -1/|P_a| sum_{p in P_a} log( exp(s_ap/tau) / sum_{k != a} exp(s_ak/tau) )

    then the mean over anchors.  ``loss(z0, z1)`` is the two-view form.  With
    ``targets=`` the candidates come from a target (e.g. EMA) encoder.

    Example (identical embeddings: every logit equal, so the loss is ``log(2B - 1)``):
        >>> import torch
        >>> from spacl.losses import NTXentLoss
        >>> z = torch.ones(4, 8)
        >>> round(NTXentLoss(temperature=0.5)(z, z).item(), 4)  # log 7
        1.9459
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> NTXentLoss(temperature=0.5)(z0, z1).shape  # the two-view form; [B, V, d] for V views
        torch.Size([])
    """

    supports_labels = False

    def __init__(
        self,
        temperature: float = 0.5,
        *,
        normalize: NormalizeMode = "sphere",
        anchor_mode: str = "all",
        reduction: str = "mean",
    ) -> None:
        super().__init__(
            temperature, normalize=normalize, anchor_mode=anchor_mode, reduction=reduction
        )

    def select(self, layout: PairLayout) -> tuple[Tensor | GroupPositives, Tensor | None]:
        return instance_select(layout)


class DecoupledContrastiveLoss(NTXentLoss):
    """Decoupled contrastive loss, DCL (Yeh et al. 2022): the positive leaves the denominator.

    ``loss_a = -1/|P_a| sum_p s_ap/tau + log sum_{q in Q_a} exp(s_aq/tau)`` with ``Q_a``
    every view of every other instance — NT-Xent minus the positive in the denominator.
    This is the CL objective of the CL-vs-NSCL paper (SPEC §3).

    Example (identical embeddings: the positive leaves the denominator, ``log(2B - 2)``):
        >>> import torch
        >>> from spacl.losses import DecoupledContrastiveLoss
        >>> z = torch.ones(4, 8)
        >>> round(DecoupledContrastiveLoss(temperature=0.5)(z, z).item(), 4)  # log 6
        1.7918
    """

    positive_in_denominator = False


class DebiasedContrastiveLoss(HardNegativeLoss):
    """Debiased contrastive loss (Chuang et al. 2020): HCL with ``beta = 0``.

    ``Ng = max((sum_q e^{l_aq} - tau_plus * N * e^{l_ap}) / (1 - tau_plus), N e^{-1/tau})``,
    ``loss = -log(e^{l_ap} / (e^{l_ap} + Ng))``; ``tau_plus`` is the class prior of a
    false negative, in ``[0, 1)``.  ``tau_plus = 0`` is NT-Xent exactly.

    Example (identical embeddings: the debiased negative mass equals the plain one, so the
    loss is NT-Xent's ``log(2B - 1)``):
        >>> import torch
        >>> from spacl.losses import DebiasedContrastiveLoss
        >>> z = torch.ones(4, 8)
        >>> round(DebiasedContrastiveLoss(tau_plus=0.1, temperature=0.5)(z, z).item(), 4)
        1.9459
    """

    def __init__(
        self,
        tau_plus: float = 0.1,
        temperature: float = 0.5,
        *,
        normalize: NormalizeMode = "sphere",
        anchor_mode: str = "all",
        reduction: str = "mean",
    ) -> None:
        super().__init__(
            beta=0.0,
            tau_plus=tau_plus,
            temperature=temperature,
            normalize=normalize,
            anchor_mode=anchor_mode,
            reduction=reduction,
        )
