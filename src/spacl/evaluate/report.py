"""All frozen-feature metrics of a representation in one call (what runs and the CLI report).

:func:`evaluate_representation` returns a flat ``dict`` of floats:

* ``knn_accuracy`` — weighted kNN (:func:`~spacl.evaluate.knn_accuracy`);
* ``ncc_accuracy`` — nearest class centre (:func:`~spacl.evaluate.nearest_centre_accuracy`);
* ``linear_accuracy`` / ``linear_train_accuracy`` — linear probe
  (:func:`~spacl.evaluate.linear_probe`), when requested;
* ``geometry/<key>`` — every scalar of :func:`spacl.geometry.geometry_report` on the
  *test* features (neural collapse ``nc1``..., effective ranks, uniformity), with the
  probe as the classifier for NC3/NC4, when ``spacl.geometry`` is importable and the
  test split has at least :data:`GEOMETRY_MIN_ROWS` samples and 2 of every class (a
  smaller one, as a small own image folder gives, is evaluated without geometry: logged,
  not an error).

Accuracies are fractions in ``[0, 1]``.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import torch
from torch import Tensor

from spacl.evaluate.knn import knn_accuracy
from spacl.evaluate.linear import LinearProbeResult, linear_probe
from spacl.evaluate.ncc import nearest_centre_accuracy

__all__ = [
    "GEOMETRY_MIN_ROWS",
    "evaluate_representation",
    "geometry_available",
    "geometry_summary",
]

#: the fewest test samples :func:`spacl.geometry.geometry_report` takes
GEOMETRY_MIN_ROWS = 4
_log = logging.getLogger("spacl.evaluate")


def geometry_available() -> bool:
    """Whether ``spacl.geometry.geometry_report`` can be imported in this build.

    Example:
        >>> from spacl.evaluate import geometry_available
        >>> geometry_available()
        True
    """
    try:
        module = importlib.import_module("spacl.geometry")
    except ImportError:
        return False
    return hasattr(module, "geometry_report")


def geometry_summary(
    features: Tensor, labels: Tensor, classifier: tuple[Tensor, Tensor] | None = None
) -> dict[str, float]:
    """Scalar entries of ``spacl.geometry.geometry_report`` (``{}`` if unavailable).

    Neural collapse (Papyan, Han & Donoho 2020; e.g. ``nc1 = tr(Sigma_W Sigma_B^+) / C``),
    effective rank (Roy & Vetterli 2007), RankMe (Garrido et al. 2023) and uniformity
    (Wang & Isola 2020) of ``features [N, d]`` with ``labels [N]``; ``classifier`` a
    ``(weight, bias)`` pair adds NC3 / NC4.

    Example:
        >>> import torch
        >>> from spacl.evaluate import geometry_summary
        >>> labels = torch.arange(3).repeat(4)
        >>> summary = geometry_summary(torch.eye(3)[labels] - 1 / 3, labels)  # a simplex ETF
        >>> summary["n"], round(summary["nc1"], 4), round(summary["nc2_etf_deviation"], 4)
        (12.0, 0.0, 0.0)
    """
    if not geometry_available():
        return {}
    from spacl.geometry import geometry_report

    report = geometry_report(features, labels, classifier=classifier)
    return {k: float(v) for k, v in report.items() if isinstance(v, (int, float))}


def _raw_classifier(probe: LinearProbeResult) -> tuple[Tensor, Tensor]:
    """The probe as ``(W, b)`` acting on raw features: ``W x + b``."""
    weight = probe.weight / probe.scale
    bias = probe.bias - weight @ probe.mean
    return weight, bias


def evaluate_representation(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    knn_k: int = 200,
    knn_t: float = 0.1,
    linear: bool = True,
    probe_weight_decay: float = 1e-4,
    probe_max_iter: int = 500,
    geometry: bool = True,
    num_classes: int | None = None,
) -> dict[str, float]:
    """kNN, NCC, optional linear probe and geometry of one representation (module doc).

    Weighted kNN accuracy (Wu et al. 2018), nearest-class-centre accuracy ``mean [argmin_c
    ||x - mu_c|| = y]`` (Papyan, Han & Donoho 2020), the L2 logistic-regression probe
    (Kolesnikov, Zhai & Beyer 2019) and the ``geometry/`` scalars of the test features.
    Runs under ``torch.random.fork_rng`` so evaluating never changes the caller's
    random state (runs that evaluate and runs that do not stay bit-identical).
    Mixed float32/float64 train and test features are promoted to the wider dtype.

    Example:
        >>> import torch
        >>> from spacl.evaluate import evaluate_representation
        >>> _ = torch.manual_seed(0)
        >>> y = torch.arange(3).repeat(20)
        >>> x = 4.0 * torch.eye(3)[y] + 0.5 * torch.randn(60, 3)
        >>> out = evaluate_representation(x[:45], y[:45], x[45:], y[45:], knn_k=5)
        >>> out["knn_accuracy"], out["ncc_accuracy"], out["linear_accuracy"]
        (1.0, 1.0, 1.0)
        >>> round(out["geometry/num_classes"])
        3
    """
    with torch.random.fork_rng(devices=[]):
        out: dict[str, float] = {
            "knn_accuracy": knn_accuracy(
                train_features,
                train_labels,
                test_features,
                test_labels,
                knn_k,
                knn_t,
                num_classes=num_classes,
            ),
            "ncc_accuracy": nearest_centre_accuracy(
                train_features, train_labels, test_features, test_labels
            ),
        }
        classifier = None
        if linear:
            probe = linear_probe(
                train_features,
                train_labels,
                test_features,
                test_labels,
                num_classes=num_classes,
                weight_decay=probe_weight_decay,
                max_iter=probe_max_iter,
            )
            out["linear_accuracy"] = probe.test_accuracy
            out["linear_train_accuracy"] = probe.train_accuracy
            classifier = _raw_classifier(probe)
        too_small = _too_small_for_geometry(test_labels) if geometry else None
        if too_small:
            _log.warning("geometry skipped: %s", too_small)
        elif geometry:
            geo = _safe_geometry(test_features, test_labels, classifier)
            out.update({f"geometry/{k}": v for k, v in geo.items()})
    return out


def _too_small_for_geometry(labels: Tensor) -> str | None:
    """Why the test split is too small for the geometry report, or ``None``: it needs
    :data:`GEOMETRY_MIN_ROWS` samples and at least 2 of every class present."""
    if int(labels.shape[0]) < GEOMETRY_MIN_ROWS:
        return f"{int(labels.shape[0])} test samples, at least {GEOMETRY_MIN_ROWS} needed"
    counts = torch.bincount(labels.long().flatten())
    single = (counts == 1).nonzero().flatten().tolist()
    if single:
        return f"class(es) {single[:10]} have a single test sample, every class needs 2"
    return None


def _safe_geometry(
    features: Tensor, labels: Tensor, classifier: tuple[Tensor, Tensor] | None
) -> dict[str, Any]:
    try:
        return geometry_summary(features, labels, classifier)
    except ValueError:
        # e.g. a classifier whose rows do not cover every test label: retry without it
        if classifier is None:
            raise
        return geometry_summary(features, labels, None)
