"""``geometry_report``: every geometry diagnostic of a feature matrix in one call."""

from __future__ import annotations

from typing import Any

import torch

from spacl.geometry._state import batch_state
from spacl.geometry.inputs import as_labels, as_matrix, check_same_columns, check_same_rows
from spacl.geometry.neural_collapse import Classifier, nc4, resolve_classifier
from spacl.geometry.spectrum import (
    FeatureSpectra,
    entropy_rank,
    feature_spectra,
    rankme_from_eigenvalues,
    spectrum_entries,
)
from spacl.geometry.streaming import Report, state_report
from spacl.geometry.uniformity import pair_alignment, uniformity

__all__ = ["geometry_report"]


def geometry_report(
    features: Any,
    labels: Any = None,
    *,
    classifier: Classifier | None = None,
    views: Any = None,
    uniformity_sample: int | None = 2048,
    seed: int = 0,
    uniformity_t: float = 2.0,
) -> Report:
    """Neural collapse, dimensional collapse and alignment/uniformity of ``features [N, d]``.

    Keys (floats unless noted):

    * always: ``n``, ``dim``, ``effective_rank_singular``, ``effective_rank_eigen``,
      ``rankme``, ``uniformity`` and the lists ``singular_values``,
      ``covariance_eigenvalues``, ``log_spectrum`` (see :func:`~spacl.geometry.spectrum`);
    * with ``labels``: everything of :func:`~spacl.geometry.neural_collapse` (``nc1``,
      ``nc2_*``, ``cdnv``, ``nc_*``, ``num_classes``), ``class_mean_effective_rank`` and the
      class-mean spectrum lists; with ``classifier`` also ``nc3`` and ``nc4``;
    * with ``views`` (a second view ``[N, d]`` of the same samples): ``alignment``.

    Cost: one pass over the data (float64 chunks centred at their class means, one
    ``d x d`` product each, merged exactly; see :mod:`spacl.geometry._state`), plus one
    ``N x (C + K)`` score pass for NC4 - nothing O(N^2) except uniformity, which uses all
    pairs of at most ``uniformity_sample`` points drawn with
    ``torch.Generator().manual_seed(seed)`` (``None``: all N points, exact, O(N^2 d) time).
    Uniformity and alignment use L2-normalised features, the other metrics the raw ones,
    all in float64 (float32 ``features``, float64 ``views`` of their shape are fine).

    Formulas: :func:`~spacl.geometry.neural_collapse` (Papyan, Han & Donoho 2020),
    :func:`~spacl.geometry.effective_rank` (Roy & Vetterli 2007),
    :func:`~spacl.geometry.rankme` (Garrido et al. 2023),
    :func:`~spacl.geometry.alignment` / :func:`~spacl.geometry.uniformity` (Wang & Isola 2020).

    Example:
        >>> import torch
        >>> from spacl.geometry import geometry_report
        >>> _ = torch.manual_seed(0)
        >>> labels = torch.arange(3).repeat(10)
        >>> features = torch.eye(3)[labels] + 0.01 * torch.randn(30, 3)
        >>> report = geometry_report(features, labels, views=features)
        >>> report["n"], report["dim"], report["alignment"]
        (30.0, 3.0, 0.0)
        >>> report["nc1"] < 1e-3  # near-perfect within-class collapse
        True
    """
    x = as_matrix(features, "features", min_rows=4, check_finite=False)  # see batch_state
    n, d = x.shape
    if views is not None:  # the shapes before the passes over the data
        v = as_matrix(views, "views", check_finite=False)
        check_same_rows(x, v, "features", "views")
        check_same_columns(x, v, "features", "views")
    report: Report = {"n": float(n), "dim": float(d)}
    if labels is None:
        if classifier is not None:
            raise ValueError("classifier metrics (NC3, NC4) need labels")
        report.update(_unlabelled_entries(x))
    else:
        report.update(_labelled_entries(x, as_labels(labels, n), classifier))
    generator = torch.Generator().manual_seed(seed)
    report["uniformity"] = uniformity(
        x, uniformity_t, sample=uniformity_sample, generator=generator, check_finite=False
    )
    if views is not None:
        report["alignment"] = pair_alignment(x, views, 2.0, True, ("features", "views"))
    return report


def _unlabelled_entries(x: torch.Tensor) -> Report:
    """The spectra of unlabelled features ``x [N, d]``: from one pass over the data when
    ``d <= N``, else from the ``N x N`` Gram matrix (finiteness checked first)."""
    n, d = x.shape
    if d <= n:
        return state_report(batch_state(x, None, 0))[0]
    as_matrix(x, "features")  # the N x N path below does not check finiteness itself
    return _spectra_report(feature_spectra(x))


def _labelled_entries(x: torch.Tensor, y: torch.Tensor, classifier: Classifier | None) -> Report:
    """The spectra and every class statistic of ``x [N, d]`` with labels ``y [N]`` from one
    pass over the data (the spectra from the ``N x N`` Gram matrix when ``d > N``), with
    ``classifier`` NC3 and NC4 too."""
    n, d = x.shape
    classes, index = torch.unique(y, sorted=True, return_inverse=True)
    resolved = None if classifier is None else resolve_classifier(classifier, d, classes)
    # one pass over the data gives the spectra and every class statistic
    report, stats = state_report(batch_state(x, index, classes.numel()), classes, classifier)
    if d > n:  # the d x d spectra would hold d - N + 1 structural zeros: use N x N
        report.update(_spectra_report(feature_spectra(x)))
    if resolved is not None and stats is not None:
        report["nc4"] = nc4(x, stats, *resolved)
    return report


def _spectra_report(spectra: FeatureSpectra) -> Report:
    out: Report = {}
    out["effective_rank_singular"] = entropy_rank(spectra.centred.sqrt())
    out["effective_rank_eigen"] = entropy_rank(spectra.centred)
    out["rankme"] = rankme_from_eigenvalues(spectra.uncentred)
    out.update(spectrum_entries(spectra))
    return out
