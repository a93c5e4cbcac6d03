"""Hard-negative objectives: HCL / HSCL / HUCL (Robinson et al. 2021; Jiang et al.).

Two estimators of the exponentially tilted negative distribution
``p(n | a) ∝ exp(beta <a, n>)`` (SPEC §2):

- :class:`HardNegativeLoss` — in-batch reweighting (HCL reference and H-SCL code);
- :class:`TiltedNegativeSampler` + :class:`SampledHardNegativeLoss` — the NC/DC paper's
  sampling estimator (``K`` negatives drawn with replacement).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import (
    check_choice,
    check_flag,
    check_in_range,
    check_int,
    check_labels,
    check_positive,
    check_real,
    check_tensor,
)
from spacl.losses._batch import PairLayout, parse_views
from spacl.losses.base import (
    PairwiseContrastiveLoss,
    debias_transform,
    instance_select,
    label_select,
)
from spacl.losses.kernel import GroupPositives, contrastive_kernel, reduce_anchors
from spacl.losses.normalize import NormalizeMode, check_normalize_mode, normalize

REDUCTIONS: tuple[str, ...] = ("mean", "sum", "none")


def check_beta(beta: float) -> float:
    """Require a finite real ``beta >= 0`` (the tilt ``exp(beta <a, n>)``)."""
    value = check_real(beta, "beta", finite=False)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    return value


class HardNegativeLoss(PairwiseContrastiveLoss):
    """HCL (unsupervised, Robinson et al. 2021) / HSCL (with labels) by in-batch reweighting.

    With ``l = s / tau`` and the ``N_a`` negatives ``Q_a`` of anchor ``a``::

        Ng_a  = N_a * sum_{q in Q_a} softmax_q(beta * l_aq) * exp(l_aq)
        Ng_a <- max((Ng_a - tau_plus N_a pos_a) / (1 - tau_plus), N_a e^{-1/tau})  (tau_plus > 0)
        loss_a = -1/|P_a| sum_p log( e^{l_ap} / (sum_{p'} e^{l_ap'} + Ng_a) )

    computed in log space (the reference exponentiates first and overflows at small
    ``tau`` or large ``beta``).  Without labels positives are the other views of the
    instance and negatives every other instance (HCL/HUCL); with labels negatives are
    the other classes and positives the same class (HSCL).  ``beta = 0, tau_plus = 0``
    is NT-Xent (resp. SupCon L_out) exactly.

    **Decisions**: the weights are not detached by default (as in HCL's code;
    ``detach_weights=True`` detaches them); the ``N e^{-1/tau}`` clamp is applied only
    when debiasing (``tau_plus > 0``), where it keeps the estimate positive; with ``V > 2``
    views ``pos_a`` is the mean positive ``exp(l_ap)`` and all positives sit in the
    denominator, so the identity with NT-Xent holds for every ``V``.

    Example (``beta = 0`` and ``tau_plus = 0`` weight every negative alike: NT-Xent):
        >>> import torch
        >>> from spacl.losses import HardNegativeLoss, NTXentLoss
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> torch.allclose(HardNegativeLoss(beta=0.0)(z0, z1), NTXentLoss()(z0, z1))
        True
        >>> hscl = HardNegativeLoss(beta=1.0)(z0, z1, labels=torch.arange(16) % 4)  # HSCL
    """

    def __init__(
        self,
        beta: float = 1.0,
        tau_plus: float = 0.0,
        temperature: float = 0.5,
        *,
        detach_weights: bool = False,
        normalize: NormalizeMode = "sphere",
        anchor_mode: str = "all",
        reduction: str = "mean",
    ) -> None:
        super().__init__(
            temperature, normalize=normalize, anchor_mode=anchor_mode, reduction=reduction
        )
        self.beta = check_beta(beta)
        self.tau_plus = check_in_range(tau_plus, "tau_plus", 0.0, 1.0, high_inclusive=False)
        self.detach_weights = check_flag(detach_weights, "detach_weights")

    def select(self, layout: PairLayout) -> tuple[Tensor | GroupPositives, Tensor | None]:
        if layout.anchor_labels is not None:
            return label_select(layout)
        return instance_select(layout)

    def kernel_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"tilt": self.beta, "detach_tilt": self.detach_weights}
        if self.tau_plus > 0.0:
            options["negative_transform"] = debias_transform(self.tau_plus, self.temperature)
        return options

    def extra_repr(self) -> str:
        return (
            f"beta={self.beta}, tau_plus={self.tau_plus}, detach_weights={self.detach_weights}, "
            + super().extra_repr()
        )


def check_generator(generator: torch.Generator | None) -> torch.Generator:
    """``generator``, or a fresh ``torch.Generator`` for ``None``; anything else a ``TypeError``."""
    if generator is None:
        return torch.Generator()
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )
    return generator


class TiltedNegativeSampler(nn.Module):
    """Draw ``K`` negatives per anchor from ``p(j | i) ∝ exp(beta <z_i, z_j>)`` (Jiang et al.).

    ``scope="class"``: over samples of a different class (HSCL); ``scope="all"``: over
    every other sample (HUCL; **Decision**: the anchor itself is never drawn).  Sampling
    is with replacement, detached, vectorised with ``torch.multinomial`` and driven by
    an explicit ``torch.Generator`` whose state travels in ``state_dict()`` so resumed
    runs draw the same negatives.

    Example (3 negatives per row, drawn from other classes):
        >>> import torch
        >>> from spacl.losses import TiltedNegativeSampler
        >>> z, labels = torch.randn(16, 32), torch.arange(16) % 4
        >>> draws = torch.Generator().manual_seed(0)
        >>> sampler = TiltedNegativeSampler(beta=1.0, num_negatives=3, generator=draws)
        >>> index = sampler(z, labels)
        >>> index.shape, bool((labels[index] != labels[:, None]).all())
        (torch.Size([16, 3]), True)
    """

    def __init__(
        self,
        beta: float = 1.0,
        num_negatives: int = 1,
        *,
        scope: str = "class",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.beta = check_beta(beta)
        self.num_negatives = check_int(num_negatives, "num_negatives", low=1)
        check_choice(scope, "scope", ("class", "all"))
        self.scope = scope
        self.generator = check_generator(generator)

    def allowed(self, n: int, labels: Tensor | None, device: torch.device) -> Tensor:
        """``[N, N]`` bool mask of admissible negatives for every anchor."""
        if self.scope == "class":
            if labels is None:
                raise ValueError("scope='class' needs labels")
            return labels.unsqueeze(1) != labels.unsqueeze(0)
        return ~torch.eye(n, dtype=torch.bool, device=device)

    @torch.no_grad()
    def forward(self, z: Tensor, labels: Tensor | None = None) -> Tensor:
        """Indices ``[N, K]`` of the sampled negatives of each row of ``z[N, d]``."""
        check_tensor(z, "z", ndim=2)
        n = int(z.shape[0])
        if labels is not None:
            labels = check_labels(labels, n)
        allowed = self.allowed(n, labels, z.device)
        if not bool(allowed.any(1).all()):
            bad = int((~allowed.any(1)).nonzero()[0, 0])
            raise ValueError(
                f"anchor {bad} has no admissible negative (scope={self.scope!r}); the batch "
                "needs at least two classes and two samples"
            )
        logits = (self.beta * (z @ z.T)).masked_fill(~allowed, -math.inf)
        probs = torch.softmax(logits.float() if logits.dtype == torch.float16 else logits, 1)
        gen = self.generator
        if gen.device != probs.device:
            idx = torch.multinomial(
                probs.cpu(), self.num_negatives, replacement=True, generator=gen
            )
            return idx.to(z.device)
        return torch.multinomial(probs, self.num_negatives, replacement=True, generator=gen)

    def get_extra_state(self) -> dict[str, Tensor]:
        return {"generator_state": self.generator.get_state()}

    def set_extra_state(self, state: dict[str, Tensor]) -> None:
        self.generator.set_state(state["generator_state"])


class SampledHardNegativeLoss(nn.Module):
    """The NC/DC paper's sampling estimator of HSCL / HUCL (Jiang et al.).

    For every anchor ``i`` and positive ``p``::

        loss_ip = -log( e^{<z_i,z_p>/tau} / (e^{<z_i,z_p>/tau} + 1/K sum_k e^{<z_i,z_{n_k}>/tau}) )

    with ``n_1..n_K`` drawn by :class:`TiltedNegativeSampler` (detached indices; the
    gradient flows through the chosen embeddings).  Positives: with labels, every sample
    of the same class *including the anchor itself* (as in the paper's code); without
    labels, the other views of the same instance.  The paper uses no temperature
    (``temperature=1``).  Loss = mean over anchors of the mean over their positives.
    Implemented on the shared kernel with multiplicity log-weights ``log(c_ij / K)``.

    Example:
        >>> import torch
        >>> from spacl.losses import SampledHardNegativeLoss
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> loss = SampledHardNegativeLoss(beta=1.0, generator=torch.Generator().manual_seed(0))
        >>> bool(torch.isfinite(loss(z0, z1, labels=torch.arange(16) % 4)))
        True
    """

    def __init__(
        self,
        beta: float = 1.0,
        num_negatives: int = 1,
        *,
        temperature: float = 1.0,
        normalize: NormalizeMode = "ball",
        generator: torch.Generator | None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.normalize = check_normalize_mode(normalize)
        self.reduction = check_choice(reduction, "reduction", REDUCTIONS)
        self.beta = check_beta(beta)
        self.num_negatives = check_int(num_negatives, "num_negatives", low=1)
        self.sampler_class = TiltedNegativeSampler(
            self.beta, self.num_negatives, scope="class", generator=generator
        )
        self.sampler_all = TiltedNegativeSampler(
            self.beta, self.num_negatives, scope="all", generator=self.sampler_class.generator
        )

    def forward(
        self, features: Tensor, other: Tensor | None = None, *, labels: Tensor | None = None
    ) -> Tensor:
        """Loss for ``features[B, V, d]`` (+ labels) or two views ``(z0, z1)``."""
        batch = parse_views(features, other, labels)
        b, v, d = batch.views.shape
        if b == 0:
            raise ValueError(
                "SampledHardNegativeLoss: features is an empty batch, of shape "
                f"{tuple(features.shape)} (it needs at least 1 instance)"
            )
        z = normalize(batch.views.reshape(b * v, d), self.normalize)
        inst = torch.arange(b, device=z.device).repeat_interleave(v)
        if batch.labels is not None:
            lab = batch.labels.repeat_interleave(v)
            pos = lab.unsqueeze(1) == lab.unsqueeze(0)
            idx = self.sampler_class(z.detach(), lab)
        else:
            pos = (inst.unsqueeze(1) == inst.unsqueeze(0)) & ~torch.eye(
                b * v, dtype=torch.bool, device=z.device
            )
            if v < 2:
                raise ValueError(
                    "without labels SampledHardNegativeLoss needs V >= 2 views (the positives "
                    f"are the other views of an instance), got features of shape "
                    f"{tuple(batch.views.shape)}"
                )
            idx = self.sampler_all(z.detach())
        counts = torch.zeros(b * v, b * v, dtype=z.dtype, device=z.device)
        counts.scatter_add_(1, idx, torch.ones_like(idx, dtype=z.dtype))
        neg = counts > 0
        log_w = (counts.clamp_min(1.0) / self.num_negatives).log()
        logits = (z / self.temperature) @ z.T
        per_anchor = contrastive_kernel(  # a positive each: itself (labels) or a view
            logits,
            pos,
            neg,
            negative_log_weights=log_w,
            positive_mode="pairwise",
            check_positives=False,
        )
        return reduce_anchors(per_anchor, self.reduction)
