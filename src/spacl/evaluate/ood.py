"""Out-of-domain (open-intent) detection: nearest class centre with fitted thresholds, metrics.

Decision rule (a distance-based open classifier, as in ADB, Zhang et al. 2021): with
unit-normalised embeddings ``z``, class centres ``c_k = normalise(mean_{y_i = k} z_i)``
and the cosine distance ``d_k(z) = 1 - <z, c_k>``::

    k*(z) = argmin_k d_k(z)
    predict(z) = k*            if d_{k*}(z) <= threshold_{k*}
               = OOD (label K)  otherwise

Thresholds are fitted on **known-class dev data only** (no OOD example is ever seen),
by one of two rules (``method``):

- ``"pseudo_ood"`` (default), leave-own-class-out: every dev example also plays an
  unknown-class example by hiding its own class — its distance to the nearest
  *other* centre, ``o_i = min_{k != y_i} d_k(z_i)``, is a sample of the distances of
  OOD inputs, while ``a_i = min_k d_k(z_i)`` is a sample of in-domain distances.  The
  threshold maximises the balanced accuracy ``P(a <= t) + P(o > t)`` over the
  candidate values ``{a_i} U {o_i}`` (the smallest maximiser); ``scope="global"``
  fits one threshold, ``scope="class"`` one per class ``k`` (in-domain: dev examples
  of ``k`` at their distance to ``c_k``; pseudo-OOD: examples of other classes whose
  nearest other centre is ``c_k``; a class without pseudo-OOD sample gets the global
  threshold).
- ``"quantile"``: the ``quantile`` of the distances of dev examples to their own
  centre, per class (``scope="class"``) or pooled (``"global"``).

**Decision**: ``pseudo_ood`` with one global threshold is this function's default: a
fixed quantile has no principled value (it sets the in-domain rejection rate, whatever
the OOD distances), while leave-own-class-out samples place the threshold between
in-domain and out-of-domain distances using known classes only.  They are unbiased
for a *frozen* representation; after training on the known classes they are not
(trained classes are pushed apart), which is why the open-intent experiment
(:func:`spacl.experiments.text_decision.held_out_threshold`) calibrates on classes held out of
an auxiliary head's training and feeds :func:`balanced_threshold` itself.

Metrics (TEXTOIR, Zhang et al. 2021), over the ``K + 1`` classes (``K`` known + OOD):
accuracy; macro-F1 over all ``K + 1``; **F1-OOD** the F1 of the OOD class; **F1-IND** the
macro-F1 over the ``K`` known classes.  Reported in percent.  Beside them, the
threshold-free :func:`ood_auroc` of an OOD score (the nearest-centre distance: how
well the representation ranks OOD inputs above in-domain ones, whatever the rule),
and :func:`reject_all_metrics`, the floor every table should show: on a test set
that is mostly OOD, rejecting everything already scores a high F1-OOD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from spacl._validation import check_in_range, check_labels, check_tensor

__all__ = [
    "THRESHOLD_METHODS",
    "THRESHOLD_SCOPES",
    "OpenClassifier",
    "balanced_threshold",
    "class_centres",
    "fit_open_classifier",
    "ood_auroc",
    "open_intent_metrics",
    "reject_all_metrics",
]

THRESHOLD_SCOPES = ("class", "global")
THRESHOLD_METHODS = ("pseudo_ood", "quantile")


def _unit(z: Tensor) -> Tensor:
    return z / z.norm(dim=1, keepdim=True).clamp_min(torch.finfo(z.dtype).tiny)


def class_centres(z: Tensor, labels: Tensor, num_classes: int) -> Tensor:
    """``[K, d]`` unit-normalised means of the unit-normalised embeddings of each class.

    Raises ``ValueError`` naming the class if one has no example.
    """
    check_tensor(z, "z", ndim=2)
    check_labels(labels, z.shape[0])
    counts = torch.bincount(labels, minlength=num_classes)
    if counts.shape[0] > num_classes:
        raise ValueError(f"labels hold values >= num_classes ({num_classes})")
    empty = (counts == 0).nonzero()
    if empty.numel():
        raise ValueError(f"class {int(empty[0, 0])} has no example to compute its centre from")
    sums = torch.zeros(num_classes, z.shape[1], dtype=z.dtype).index_add_(0, labels, _unit(z))
    return _unit(sums / counts.unsqueeze(1).to(z.dtype))


@dataclass
class OpenClassifier:
    """Nearest class centre with per-class rejection thresholds (module docstring)."""

    centres: Tensor  # [K, d] unit
    thresholds: Tensor  # [K] cosine distances

    @property
    def num_known(self) -> int:
        return int(self.centres.shape[0])

    @property
    def ood_label(self) -> int:
        return self.num_known

    def distances(self, z: Tensor) -> Tensor:
        """``[N, K]`` cosine distances ``1 - <unit(z), c_k>``."""
        check_tensor(z, "z", ndim=2)
        return 1.0 - _unit(z) @ self.centres.T

    def predict(self, z: Tensor) -> Tensor:
        """``LongTensor[N]``: the nearest known class, or ``K`` (OOD) beyond its threshold."""
        d = self.distances(z)
        best, k = d.min(dim=1)
        return torch.where(best <= self.thresholds[k], k, torch.full_like(k, self.ood_label))


def balanced_threshold(inside: Tensor, outside: Tensor) -> Tensor:
    """Smallest ``t`` in ``inside U outside`` maximising ``P(inside <= t) + P(outside > t)``.

    Vectorised with two ``searchsorted`` over the sorted samples (``O(n log n)``).
    """
    if inside.numel() == 0 or outside.numel() == 0:
        raise ValueError("balanced_threshold needs at least one in-domain and one OOD sample")
    a, o = inside.sort().values, outside.sort().values
    cands = torch.cat((a, o)).sort().values
    accept_in = torch.searchsorted(a, cands, right=True).double() / a.numel()
    reject_out = 1.0 - torch.searchsorted(o, cands, right=True).double() / o.numel()
    return cands[(accept_in + reject_out).argmax()]


def fit_open_classifier(
    train_z: Tensor,
    train_y: Tensor,
    dev_z: Tensor,
    dev_y: Tensor,
    num_known: int,
    *,
    method: str = "pseudo_ood",
    scope: str = "global",
    quantile: float = 0.95,
) -> OpenClassifier:
    """Centres from train, thresholds from known-class dev data (module docstring)."""
    if method not in THRESHOLD_METHODS:
        raise ValueError(f"method must be one of {THRESHOLD_METHODS}, got {method!r}")
    check_in_range(quantile, "quantile", 0.0, 1.0)
    if scope not in THRESHOLD_SCOPES:
        raise ValueError(f"scope must be one of {THRESHOLD_SCOPES}, got {scope!r}")
    centres = class_centres(train_z, train_y, num_known)
    check_tensor(dev_z, "dev_z", ndim=2)
    check_labels(dev_y, dev_z.shape[0], "dev_y")
    if int(dev_y.max()) >= num_known or int(dev_y.min()) < 0:
        raise ValueError(f"dev_y must hold known-class labels in [0, {num_known})")
    counts = torch.bincount(dev_y, minlength=num_known)
    missing = (counts == 0).nonzero()
    if missing.numel():
        raise ValueError(
            f"known class {int(missing[0, 0])} has no dev example to fit its threshold"
        )
    dist = 1.0 - _unit(dev_z) @ centres.T  # [N_dev, K]
    if method == "pseudo_ood":
        return OpenClassifier(centres, _pseudo_ood_thresholds(dist, dev_y, num_known, scope))
    own = dist.gather(1, dev_y.unsqueeze(1)).squeeze(1)  # [N_dev]
    if scope == "global":
        value = torch.quantile(own.double(), quantile).to(own.dtype)
        return OpenClassifier(centres, value.expand(num_known).clone())
    # per-class quantiles: sort by (class, distance) once, index the quantile position
    order = torch.argsort(dev_y.double() * 4.0 + own.double())  # distances lie in [0, 2]
    sorted_d = own[order]
    starts = torch.cumsum(counts, 0) - counts
    pos = quantile * (counts - 1).double()
    lo, hi = pos.floor().long(), pos.ceil().long()
    frac = (pos - lo.double()).to(own.dtype)
    thresholds = sorted_d[starts + lo] * (1 - frac) + sorted_d[starts + hi] * frac
    return OpenClassifier(centres, thresholds)


def _pseudo_ood_thresholds(dist: Tensor, dev_y: Tensor, num_known: int, scope: str) -> Tensor:
    """Leave-own-class-out thresholds (module docstring), ``[K]``."""
    if num_known < 2:
        raise ValueError("method='pseudo_ood' needs at least 2 known classes")
    hidden = dist.scatter(1, dev_y.unsqueeze(1), math.inf)
    other, nearest_other = hidden.min(1)  # pseudo-OOD distance and the centre it lands on
    glob = balanced_threshold(dist.min(1).values, other)
    thresholds = glob.expand(num_known).clone()
    if scope == "global":
        return thresholds
    own = dist.gather(1, dev_y.unsqueeze(1)).squeeze(1)
    for k in range(num_known):  # K thresholds, each vectorised over the dev set
        outside = other[nearest_other == k]
        if outside.numel():
            thresholds[k] = balanced_threshold(own[dev_y == k], outside)
    return thresholds


def _f1_per_class(y_true: Tensor, y_pred: Tensor, num_classes: int) -> Tensor:
    """``[C]`` F1 of every class (0 where precision and recall are both undefined or 0)."""
    idx = y_true * num_classes + y_pred
    confusion = torch.bincount(idx, minlength=num_classes * num_classes).reshape(
        num_classes, num_classes
    )
    tp = confusion.diagonal().double()
    predicted = confusion.sum(0).double()
    actual = confusion.sum(1).double()
    denom = predicted + actual
    return torch.where(denom > 0, 2.0 * tp / denom.clamp_min(1.0), torch.zeros_like(tp))


def open_intent_metrics(y_true: Tensor, y_pred: Tensor, num_known: int) -> dict[str, float]:
    """Accuracy, macro-F1 (``K + 1`` classes), F1-OOD and F1-IND, in percent.

    Labels ``0..K-1`` are known classes, ``K`` is OOD.  ``F1 = 2 TP / (2 TP + FP + FN)``
    per class, 0 for a class never predicted nor present.
    """
    check_labels(y_true, y_true.shape[0] if isinstance(y_true, Tensor) else 0, "y_true")
    check_labels(y_pred, y_true.shape[0], "y_pred")
    if y_true.numel() == 0:
        raise ValueError("y_true is empty")
    c = num_known + 1
    for name, y in (("y_true", y_true), ("y_pred", y_pred)):
        if int(y.min()) < 0 or int(y.max()) >= c:
            raise ValueError(f"{name} must hold labels in [0, {num_known}] (OOD = {num_known})")
    f1 = _f1_per_class(y_true.long(), y_pred.long(), c)
    return {
        "accuracy": 100.0 * float((y_true == y_pred).double().mean()),
        "macro_f1": 100.0 * float(f1.mean()),
        "f1_ood": 100.0 * float(f1[num_known]),
        "f1_ind": 100.0 * float(f1[:num_known].mean()),
    }


def ood_auroc(scores: Tensor, is_ood: Tensor) -> float:
    """Area under the ROC curve of ``scores`` (higher = more OOD) for ``is_ood``, percent.

    The Mann-Whitney statistic ``P(s_ood > s_ind) + P(s_ood = s_ind) / 2`` computed from
    average ranks (ties count one half), ``O(n log n)``; threshold-free.

    Raises:
        ValueError: shapes differ, or one of the two groups is empty.
    """
    check_tensor(scores, "scores", ndim=1)
    if not isinstance(is_ood, Tensor) or is_ood.shape != scores.shape:
        raise ValueError(
            f"is_ood must be a tensor of shape {tuple(scores.shape)}, "
            f"got {getattr(is_ood, 'shape', type(is_ood).__name__)}"
        )
    positive = is_ood.bool()
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            f"ood_auroc needs OOD and in-domain examples, got {n_pos} OOD and {n_neg} in-domain"
        )
    s = scores.double()
    order = torch.argsort(s)
    sorted_s = s[order]
    _, inverse, counts = torch.unique_consecutive(sorted_s, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    average_rank = ends - (counts.double() - 1.0) / 2.0  # 1-based mean rank of each tie group
    ranks = torch.empty_like(s)
    ranks[order] = average_rank[inverse]
    u = float(ranks[positive].sum()) - n_pos * (n_pos + 1) / 2.0
    return 100.0 * u / (n_pos * n_neg)


def reject_all_metrics(y_true: Tensor, num_known: int) -> dict[str, float]:
    """:func:`open_intent_metrics` of the rule that predicts OOD for every input.

    Its AUROC is 50 (a constant score ranks nothing), reported as ``auroc``.
    """
    check_labels(y_true, y_true.shape[0] if isinstance(y_true, Tensor) else 0, "y_true")
    metrics = open_intent_metrics(y_true, torch.full_like(y_true, num_known), num_known)
    metrics["auroc"] = 50.0
    return metrics
