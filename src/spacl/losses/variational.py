"""VarCon: variational supervised contrastive learning (Wang, Fan, Nguyen, Ji, Liu 2025)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from spacl._validation import check_flag, check_positive
from spacl.losses._batch import parse_views
from spacl.losses.kernel import masked_logsumexp, reduce_anchors
from spacl.losses.normalize import NormalizeMode, check_normalize_mode, normalize

__all__ = ["VarConLoss"]


class VarConLoss(nn.Module):
    """VarCon (Wang et al., NeurIPS 2025, arXiv 2506.07413): a posterior-weighted ELBO.

    Supervised contrastive learning recast as variational inference over the latent
    class ``r`` of each embedding.  With ``z_i`` the (normalised) embedding of row ``i``
    (every view of every instance is a row), ``y_i`` its label and ``C`` the classes
    present in the batch::

        w_c      = normalise(mean_{j: y_j = c} z_j)           class centroids (detached)
        p(c|z_i) = softmax_c(<z_i, w_c> / tau1)              (Eq. 8)
        tau2_i   = (tau1 - eps) + 2 eps p(y_i|z_i)           confidence-aware temperature (Eq. 13)
        q(c|z_i) = exp(1/tau2_i)^[c = y_i] / (exp(1/tau2_i) + |C| - 1)        (Eqs. 10-12)
        loss_i   = KL(q(.|z_i) || p(.|z_i)) - log p(y_i|z_i)  (Eq. 7, the negative ELBO)

    and the mean over rows.  ``q`` is the variational posterior: confident samples
    (``p(y|z)`` near 1) get a higher ``tau2``, i.e. a *softer* target, which stops
    pulling them further into their class; uncertain ones get a sharper target.  ``q``
    is computed in log space (``log q_y = -log(1 + (|C|-1) e^{-1/tau2})``), so small
    temperatures do not overflow; ``-log p`` is the kernel's ``lse - l_y``.

    **Decisions** (the paper leaves these open; the authors' code, ``VarContrast``,
    settles them and is followed unless stated):

    - *Centroids* are the means of the batch's rows of each class (all views, the global
      batch under the engine), L2-normalised (``normalize="sphere"``; the plain means
      otherwise) and **detached** (``detach_centroids=True``, as in the code).
    - *Classes* are those present in the batch (``|C|`` varies per batch); no global
      class table is kept.  A batch with a single class raises ``ValueError`` (``q = p
      = 1``: no signal).
    - The *confidence* ``p(y_i|z_i)`` inside ``tau2`` is **not detached** (the code lets
      the gradient flow through ``q``); ``detach_confidence=True`` stops it.
    - ``0 <= eps < tau1`` is required so that ``tau2 > 0`` (the code clamps at 1e-6
      instead); the defaults ``tau1 = 0.1``, ``eps = 0.02`` are the code's.
    - KL and NLL are summed with weight 1 each and averaged over rows (``batchmean``).

    Example:
        >>> import torch
        >>> from spacl.losses import VarConLoss
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> VarConLoss(temperature=0.1)(z0, z1, labels=torch.arange(16) % 4).shape
        torch.Size([])
    """

    requires_labels = True

    def __init__(
        self,
        temperature: float = 0.1,
        epsilon: float = 0.02,
        *,
        detach_centroids: bool = True,
        detach_confidence: bool = False,
        normalize: NormalizeMode = "sphere",
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool):
            raise TypeError(f"epsilon must be a number, got {type(epsilon).__name__}")
        if not math.isfinite(epsilon) or not 0.0 <= epsilon < self.temperature:
            raise ValueError(
                f"epsilon must satisfy 0 <= epsilon < temperature={self.temperature} "
                f"(so that tau2 > 0), got {epsilon}"
            )
        self.epsilon = float(epsilon)
        self.detach_centroids = check_flag(detach_centroids, "detach_centroids")
        self.detach_confidence = check_flag(detach_confidence, "detach_confidence")
        self.normalize = check_normalize_mode(normalize)
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    def centroids(self, z: Tensor, groups: Tensor, num: int) -> Tensor:
        """``[num, d]`` class centroids of rows ``z`` with group ids ``groups`` in ``[0, num)``."""
        sums = torch.zeros(num, z.shape[1], dtype=z.dtype, device=z.device).index_add(0, groups, z)
        counts = torch.bincount(groups, minlength=num).to(z.dtype).unsqueeze(1)
        means = sums / counts
        if self.normalize == "sphere":
            means = F.normalize(means, dim=1)
        return means.detach() if self.detach_centroids else means

    def forward(
        self, features: Tensor, other: Tensor | None = None, *, labels: Tensor | None = None
    ) -> Tensor:
        """``loss(features[B, V, d], labels)`` or ``loss(z0, z1, labels=labels)``."""
        batch = parse_views(features, other, labels)
        if batch.labels is None:
            raise ValueError("VarConLoss needs labels: call loss(features, labels)")
        b, v, d = batch.views.shape
        z = normalize(batch.views.reshape(b * v, d), self.normalize)
        classes, groups = torch.unique(batch.labels.repeat_interleave(v), return_inverse=True)
        num = int(classes.shape[0])
        if num < 2:
            raise ValueError(
                "VarConLoss needs at least 2 classes in the batch (one class: q = p = 1), "
                f"got labels {batch.labels.tolist()[:8]}"
            )
        logits = (z / self.temperature) @ self.centroids(z, groups, num).T  # [N, C]
        lse = masked_logsumexp(logits, None)
        log_p = logits - lse.unsqueeze(1)
        log_p_true = log_p.gather(1, groups.unsqueeze(1)).squeeze(1)
        confidence = log_p_true.exp()
        if self.detach_confidence:
            confidence = confidence.detach()
        tau2 = (self.temperature - self.epsilon) + 2.0 * self.epsilon * confidence
        # log q: true class -log(1 + (C-1) e^{-1/tau2}); others that minus 1/tau2
        log_q_true = -torch.log1p((num - 1) * torch.exp(-1.0 / tau2))
        log_q_other = log_q_true - 1.0 / tau2
        q_true, q_other = log_q_true.exp(), log_q_other.exp()
        # KL(q || p) = sum_c q_c (log q_c - log p_c), split into the true class and the rest
        sum_log_p_other = log_p.sum(1) - log_p_true
        kl = q_true * (log_q_true - log_p_true) + q_other * (
            (num - 1) * log_q_other - sum_log_p_other
        )
        return reduce_anchors(kl - log_p_true, self.reduction)

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, epsilon={self.epsilon}, "
            f"detach_centroids={self.detach_centroids}, "
            f"detach_confidence={self.detach_confidence}, normalize={self.normalize!r}"
        )
