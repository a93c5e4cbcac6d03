"""ADB: adaptive decision boundaries for open-intent detection (Zhang, Xu, Lin; AAAI 2021).

"Deep Open Intent Classification with Adaptive Decision Boundary": on *frozen* features of
the known classes, every class ``k`` gets a centroid ``c_k`` and a learned radius
``Delta_k``; an input outside the ball of its nearest centroid is an open (unknown)
intent.  The radii minimise the boundary loss

    L_b = 1/N sum_i [ delta_i (d_i - Delta_{y_i}) + (1 - delta_i) (Delta_{y_i} - d_i) ],
    d_i = ||z_i - c_{y_i}||_2,   delta_i = [d_i > Delta_{y_i}],   Delta_k = softplus(Delta^_k)

which pulls a radius out while known examples lie outside it and in while the ball is
larger than they need (the open-space risk).  ``L_b = 1/N sum_i |d_i - Delta_{y_i}|``
exactly (TEXTOIR's ``pos_loss.mean() + neg_loss.mean()``), so the optimal radius of
class ``k`` is a **median** of its distances: on fixed features this module gives that
closed form (``solver="median"``), the exact minimiser the paper's gradient procedure
(Adam, lr 0.05, ``Delta^ ~ N(0, 1)``) approaches.  That procedure matters where the
features move from batch to batch (dropout on, as ADB trains it):
:mod:`spacl.tasks.text.adb` runs it there, in the engine's loop, with
:func:`boundary_loss`.

**Which distances** (issue 18).  A median rejects half of the examples it is fitted on
by construction.  ADB (TEXTOIR's ``ADBManager.train``) fits it on the *training*
examples in training mode — dropout on — so the distances are inflated by dropout
noise and the median of the noisy distances covers more than half of clean inputs,
by an amount set by the dropout rate and the encoder, not by any stated target.  On
frozen, clean features (this module's input) the median rejects half of the known
training examples, and more of unseen known ones, whose distances to the train
centroids are larger.  Hence ``solver="quantile"`` (recommended): centroids from the
training features as in ADB, radii from **known-class dev features** — the
split-conformal ``q``-quantile (0.95) of the distance of each dev example to its
*nearest* centroid (the score :meth:`ADBModel.predict` compares), per assigned class
with at least ``min_class_count`` (100) dev examples, pooled for the others
(:func:`spacl.evaluate.ood.conformal_thresholds`).  Dev examples are unseen by the
centroids, so their distances are distributed as those of known test inputs: the
radii accept a share ``j / (n + 1) >= q`` of them in expectation (``j = ceil(q (n +
1))``), whatever the representation.  ADB as published (dropout features, dev early
stopping) is :func:`spacl.tasks.text.adb.train_detector` with ``method="adb"``.

**DA-ADB** (Zhang et al. 2022) changes the *representation learning* (distance-aware,
cosine-normalised features) before the same boundary step: ``normalize=True`` runs this
boundary step on unit features; the whole detector, its representation stage
included, is :mod:`spacl.tasks.text.adb` (which fits its radii with
:func:`boundary_loss` in the engine's loop).  Not implemented: **MOGB** (Li et
al., AAAI 2025, multi-granularity granular-ball boundaries): its decision rule is this
one over many balls per class (nearest ball centre, open when ``d >= `` that ball's
radius), but the balls come from a purity-driven granular-ball splitting that the paper
alternates with representation learning and states without its splitting, purity and
radius rules (the authors' code spreads them over three variants, ``cluster*.py``), so
it is not implemented here rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from spacl._validation import (
    check_choice,
    check_in_range,
    check_labels,
    check_tensor,
)
from spacl.evaluate.ood import MIN_CLASS_COUNT, conformal_thresholds

__all__ = ["SOLVERS", "ADBModel", "adb_boundary_loss", "boundary_loss", "fit_adb"]

SOLVERS = ("median", "quantile")


@dataclass
class ADBModel:
    """Centroids, radii and the open label of a fitted ADB rule (module docstring).

    ``predict`` assigns the nearest centroid's class (Euclidean distance, as the
    authors' code) when the input lies strictly inside that class's ball
    (``d < Delta``; the code's ``d >= Delta`` is open), else ``open_label``:
    ``predict(z) = y_{k*}`` if ``||z - c_{k*}|| < Delta_{k*}``, ``k* = argmin_k ||z - c_k||``
    (Zhang, Xu & Lin 2021).  Features of another float dtype than the centroids are
    compared in the wider of the two.

    Example:
        >>> import torch
        >>> from spacl.evaluate import ADBModel
        >>> model = ADBModel(torch.eye(2), torch.tensor([0.5, 0.5]), torch.tensor([3, 7]))
        >>> model.predict(torch.tensor([[0.9, 0.1], [0.0, 1.2], [5.0, 5.0]]))
        tensor([ 3,  7, -1])
    """

    centroids: Tensor  # [K, d]
    radii: Tensor  # [K]
    classes: Tensor  # [K] the known label values, sorted
    open_label: int = -1
    normalize: bool = False

    @property
    def num_known(self) -> int:
        return int(self.centroids.shape[0])

    @property
    def ood_label(self) -> int:
        """What :meth:`predict` returns for an open input (``open_label``)."""
        return self.open_label

    def prepare(self, features: Tensor, name: str = "features") -> Tensor:
        """``features[N, d]`` as the model compares them: checked (``name`` in the
        errors), on the centroids' device, in the wider of the two float dtypes,
        normalised when the model is."""
        check_tensor(features, name, ndim=2)
        if int(features.shape[1]) != int(self.centroids.shape[1]):
            raise ValueError(
                f"{name} must be [N, {int(self.centroids.shape[1])}] (the centroids' width), "
                f"got shape {tuple(features.shape)}"
            )
        wide = torch.promote_types(features.dtype, self.centroids.dtype)
        z = features.to(device=self.centroids.device, dtype=wide)
        return F.normalize(z, dim=1) if self.normalize else z

    def distances(self, features: Tensor, name: str = "features") -> Tensor:
        """``[N, K]`` Euclidean distances of :meth:`prepare`'d ``features`` to the
        centroids (``name``: what the errors call ``features``)."""
        z = self.prepare(features, name)
        return torch.cdist(z, self.centroids.to(z.dtype))

    def open_score(self, features: Tensor) -> Tensor:
        """``[N]`` distance to the nearest centroid minus its radius (``>= 0``: open)."""
        best, k = self.distances(features).min(dim=1)
        return best - self.radii[k]

    def predict(self, features: Tensor) -> Tensor:
        """``LongTensor[N]``: the nearest known class, or ``open_label`` outside its ball."""
        best, k = self.distances(features).min(dim=1)
        known = self.classes[k]
        return torch.where(best < self.radii[k], known, torch.full_like(known, self.open_label))


def boundary_loss(distances: Tensor, radii: Tensor) -> Tensor:
    """ADB's boundary loss of examples at ``distances`` from their class centroids, whose
    classes have radii ``radii`` (both ``[N]``, the radius of each example's class):

        L_b = 1/N sum_i [ delta_i (d_i - Delta_i) + (1 - delta_i) (Delta_i - d_i) ]
            = 1/N sum_i |d_i - Delta_i|,      delta_i = [d_i > Delta_i]

    (the indicator carries no gradient; both forms have the same value and gradient in
    ``Delta`` wherever ``d_i != Delta_i``).  The one form of the loss: the closed-form
    check (:func:`adb_boundary_loss`), the gradient solver of :func:`fit_adb` and the
    text detector's boundary stage (:mod:`spacl.tasks.text.adb`) all call it.

    Example:
        >>> import torch
        >>> from spacl.evaluate.adb import boundary_loss
        >>> float(boundary_loss(torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0])))
        1.0
    """
    if distances.shape != radii.shape:
        raise ValueError(
            f"distances and radii must have one shape, got {tuple(distances.shape)} "
            f"and {tuple(radii.shape)}"
        )
    return (distances - radii).abs().mean()


def adb_boundary_loss(features: Tensor, labels: Tensor, model: ADBModel) -> Tensor:
    """ADB's boundary loss ``L_b`` (:func:`boundary_loss`) of ``model`` on labelled
    known-class features."""
    z = model.prepare(features)
    idx = _class_index(check_labels(labels, int(z.shape[0])).to(z.device), model.classes)
    return boundary_loss((z - model.centroids[idx]).norm(dim=1), model.radii[idx])


def _class_index(labels: Tensor, classes: Tensor) -> Tensor:
    idx = torch.searchsorted(classes, labels)
    bad = (idx >= classes.numel()) | (classes[idx.clamp_max(classes.numel() - 1)] != labels)
    if bool(bad.any()):
        raise ValueError(f"labels hold a class the model does not know: {int(labels[bad][0])}")
    return idx


def fit_adb(
    features: Tensor,
    labels: Tensor,
    *,
    open_label: int = -1,
    solver: str = "median",
    normalize: bool = False,
    dev: tuple[Tensor, Tensor] | None = None,
    quantile: float = 0.95,
    min_class_count: int = MIN_CLASS_COUNT,
) -> ADBModel:
    """Fit ADB's centroids and radii on frozen known-class ``features[N, d]`` / ``labels[N]``.

    Args:
        features: frozen representations of known-class training examples.
        labels: their integer labels (any values; each is a known class).
        open_label: what :meth:`ADBModel.predict` returns for an open input; must not be
            a known label (``-1`` default; pass ``K`` for the ``K + 1``-class metrics).
        solver: ``"median"`` — the exact minimiser of ``L_b``, the median distance per
            class (the mean of the two middle values for an even count: ``L_b`` is flat
            between them; the paper's Adam on ``Delta^`` approaches it on fixed
            features: module docstring); ``"quantile"`` — radii from ``dev`` (module
            docstring): the split-conformal ``quantile`` of the dev examples'
            nearest-centroid distances, per assigned class, raised to the next float so
            that ``d < Delta`` accepts exactly the dev examples at or below the quantile.
        normalize: L2-normalise the features first (the boundary step of DA-ADB).
        dev: ``(features, labels)`` of known-class dev examples, the set the radii of
            ``solver="quantile"`` are fitted on (required there, unused by the median).
        quantile, min_class_count: ``q`` and the fewest dev examples assigned to a class
            for its own radius, of ``solver="quantile"``.

    Returns:
        An :class:`ADBModel` (centroids: the class means of the (normalised) features).

    The radii minimise ADB's boundary loss ``L_b = 1/N sum_i |d_i - Delta_{y_i}|``,
    ``d_i = ||z_i - c_{y_i}||`` (Zhang, Xu & Lin 2021; module docstring).

    Example:
        >>> import torch
        >>> from spacl.evaluate import fit_adb
        >>> features = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 2.0], [9.0, 0.0], [9.0, 2.0]])
        >>> model = fit_adb(features, torch.tensor([0, 0, 0, 1, 1]))  # centroids (0, 1), (9, 1)
        >>> model.radii  # the median distance of each class to its centroid
        tensor([1., 1.])
        >>> model.predict(torch.tensor([[0.0, 1.5], [4.5, 1.0]]))
        tensor([ 0, -1])
    """
    check_tensor(features, "features", ndim=2)
    labels = check_labels(labels, int(features.shape[0])).to(features.device)
    _check_solver(solver, open_label, quantile)
    z = features.detach()
    z = F.normalize(z, dim=1) if normalize else z
    classes, idx = torch.unique(labels, return_inverse=True)
    if bool((classes == open_label).any()):
        raise ValueError(f"open_label={open_label} is also a known class label")
    k = int(classes.numel())
    centroids = _class_means(z, idx, k)
    dist = (z - centroids[idx]).norm(dim=1)
    if solver == "median":
        return ADBModel(centroids, _class_medians(dist, idx, k), classes, open_label, normalize)
    model = ADBModel(centroids, torch.zeros(k, dtype=z.dtype), classes, open_label, normalize)
    model.radii = _dev_quantile_radii(model, dev, quantile, min_class_count)
    return model


#: where the paper's gradient procedure lives (a ``solver`` of this module until issue 40)
GRADIENT_MOVED = (
    "solver='gradient' is not a solver of fit_adb: on fixed features its exact minimiser "
    "is solver='median'; ADB's Adam on training-mode (dropout) features is "
    "spacl.tasks.text.adb.train_detector(..., ADBSchedule(method='adb'))"
)


def _check_solver(solver: str, open_label: int, quantile: float) -> None:
    """The checks of :func:`fit_adb`'s solver arguments (errors name the argument)."""
    if solver == "gradient":
        raise ValueError(GRADIENT_MOVED)
    check_choice(solver, "solver", SOLVERS)
    if not isinstance(open_label, int) or isinstance(open_label, bool):
        raise TypeError(f"open_label must be an int, got {type(open_label).__name__}")
    if solver == "quantile":
        check_in_range(quantile, "quantile", 0.0, 1.0)


def _class_means(z: Tensor, idx: Tensor, k: int) -> Tensor:
    """``[k, d]``: the mean of the rows of ``z`` of each class index ``0..k-1``."""
    counts = torch.bincount(idx, minlength=k).to(z.dtype)
    sums = torch.zeros(k, z.shape[1], dtype=z.dtype, device=z.device).index_add(0, idx, z)
    return sums / counts.unsqueeze(1)


def _dev_quantile_radii(
    model: ADBModel, dev: tuple[Tensor, Tensor] | None, q: float, min_class_count: int
) -> Tensor:
    """Radii of ``solver="quantile"``: per-assigned-class conformal quantiles of the dev
    examples' nearest-centroid distances, raised to the next float (``predict`` is strict)."""
    if dev is None:
        raise ValueError(
            "solver='quantile' fits the radii on known-class dev features: pass "
            "dev=(features, labels), or use solver='median'"
        )
    dev_z, dev_y = dev
    check_tensor(dev_z, "dev features", ndim=2)
    dev_y = check_labels(dev_y, int(dev_z.shape[0]), "dev labels")
    _class_index(dev_y.to(model.classes.device), model.classes)  # known classes only
    best, assigned = model.distances(dev_z, "dev features").min(dim=1)
    radii = conformal_thresholds(best, assigned, model.num_known, q, min_class_count)
    return torch.nextafter(radii, torch.full_like(radii, torch.inf))


def _macro_f1(y: Tensor, pred: Tensor, classes: Tensor, open_label: int) -> float:
    """Macro-F1 over the known classes and the open class (those present in ``y`` or ``pred``)."""
    labels = torch.unique(torch.cat((classes, torch.tensor([open_label], device=y.device))))
    f1s = []
    for c in labels.tolist():
        tp = int(((pred == c) & (y == c)).sum())
        fp = int(((pred == c) & (y != c)).sum())
        fn = int(((pred != c) & (y == c)).sum())
        if tp + fp + fn:
            f1s.append(2 * tp / (2 * tp + fp + fn))
    return sum(f1s) / len(f1s)


def _class_medians(dist: Tensor, idx: Tensor, k: int) -> Tensor:
    """Per-class median (mean of the two middle values for an even count), no Python loop."""
    order = torch.argsort(idx.double() * (float(dist.max()) + 1.0) + dist.double())
    sorted_d = dist[order]
    counts = torch.bincount(idx, minlength=k)
    starts = torch.cumsum(counts, 0) - counts
    lo = starts + (counts - 1) // 2
    hi = starts + counts // 2
    return (sorted_d[lo] + sorted_d[hi]) / 2
