"""Regression tests of the API audit (items 6, 11b and 15) for the metrics and evaluators.

Bad input to ``spacl.geometry``, ``spacl.alignment`` and ``spacl.evaluate`` gives a
``ValueError`` / ``TypeError`` that names the argument and what the caller passed: never a
silent NaN, never a raw torch error, never a shape the caller did not pass.  Two feature
arguments of different float dtypes are promoted to the wider one.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from spacl.evaluate import (
    ADBModel,
    OpenClassifier,
    class_centres,
    filtered_ranks,
    fit_adb,
    fit_open_classifier,
    knn_accuracy,
    linear_probe,
    nearest_centre_accuracy,
    nearest_centre_predict,
    ranking_metrics,
)
from spacl.geometry import (
    alignment,
    alignment_uniformity,
    collapse_condition,
    geometry_report,
    gradient_norm,
    non_collapse_certificate,
    rankme,
)


def blobs(n: int = 24, d: int = 4, c: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % c
    return 3.0 * torch.eye(c, d)[y] + 0.3 * torch.randn(n, d, generator=gen), y


# ------------------------------------------------------------------ (6) rankme's eps


@pytest.mark.parametrize("eps", [0.0, -1e-7, math.nan, math.inf, -math.inf])
def test_rankme_rejects_an_eps_that_is_not_positive_and_finite(eps: float) -> None:
    x, _ = blobs()
    with pytest.raises(ValueError, match=rf"eps must be > 0, got {re.escape(str(eps))}"):
        rankme(x, eps)


@pytest.mark.parametrize("eps", ["1e-7", None, True, torch.tensor(1e-7)])
def test_rankme_rejects_an_eps_that_is_not_a_real_number(eps: object) -> None:
    x, _ = blobs()
    assert math.isfinite(rankme(x)) and rankme(x, 1e-7) == rankme(x)  # the default stays
    with pytest.raises(TypeError, match=r"eps must be a number, got "):
        rankme(x, eps)  # type: ignore[arg-type]


def test_collapse_condition_rejects_a_nan_tol() -> None:
    """Same family: a NaN ``tol`` made every ``condition`` silently False."""
    p = torch.tensor([0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match=r"tol must be in \[0.0, inf\), got nan"):
        collapse_condition(p, p, -p[None], tol=math.nan)


# ---------------------------------------- (11b) mismatched feature arguments, mixed dtypes


def test_alignment_names_both_views_on_a_width_mismatch() -> None:
    pattern = r"z0 and z1 must have the same number of columns .*\(5, 3\) and \(5, 4\)"
    with pytest.raises(ValueError, match=pattern):
        alignment(torch.randn(5, 3), torch.randn(5, 4))
    with pytest.raises(ValueError, match=pattern):
        alignment_uniformity(torch.randn(5, 3), torch.randn(5, 4))


def test_geometry_report_names_features_and_views() -> None:
    x, _ = blobs()
    with pytest.raises(ValueError, match=r"features and views .*\(24, 4\) and \(24, 3\)"):
        geometry_report(x, views=x[:, :3])
    with pytest.raises(ValueError, match=r"features and views .* rows .*24 and 20"):
        geometry_report(x, views=x[:20])


def test_the_evaluators_promote_a_float32_float64_pair_to_float64() -> None:
    """``knn_accuracy`` raised torch's "expected m1 and m2 to have the same dtype"."""
    x, y = blobs()
    want = knn_accuracy(x[:12].double(), y[:12], x[12:].double(), y[12:], k=3)
    assert knn_accuracy(x[:12], y[:12], x[12:].double(), y[12:], k=3) == want
    assert knn_accuracy(x[:12].double(), y[:12], x[12:], y[12:], k=3) == want
    want = nearest_centre_accuracy(x[:12].double(), y[:12], x[12:].double(), y[12:])
    assert nearest_centre_accuracy(x[:12], y[:12], x[12:].double(), y[12:]) == want
    probe = linear_probe(x[:12].half(), y[:12], x[12:], y[12:], max_iter=20)
    assert 0.0 <= probe.test_accuracy <= 1.0


def test_nearest_centre_predict_checks_its_queries_by_name() -> None:
    x, y = blobs()
    with pytest.raises(ValueError, match=r"train_features and test_features .* 4 and 5"):
        nearest_centre_predict(x, y, torch.randn(3, 5))
    # a 1-D query was silently read as one row of the wrong orientation
    with pytest.raises(ValueError, match=r"test_features must have 2 dimensions, got shape \(4,\)"):
        nearest_centre_predict(x, y, x[0])
    assert nearest_centre_predict(x, y, x[:5].double()).tolist() == y[:5].tolist()


def test_class_centres_names_its_own_arguments() -> None:
    x, y = blobs()
    with pytest.raises(ValueError, match=r"^features must have 2 dimensions"):
        class_centres(x[0], y)
    with pytest.raises(ValueError, match=r"^labels has length 23"):
        class_centres(x, y[:23])


def test_linear_probe_predict_names_features_and_the_probe_width() -> None:
    x, y = blobs()
    probe = linear_probe(x, y, x, y, max_iter=20)
    with pytest.raises(ValueError, match=r"features must have the probe's width 4 .*\(3, 5\)"):
        probe.predict(torch.randn(3, 5))
    with pytest.raises(TypeError, match=r"dtype must be a floating torch.dtype"):
        linear_probe(x, y, x, y, dtype=torch.int64)


def test_open_classifier_checks_widths_and_promotes_dtypes() -> None:
    x, y = blobs()
    with pytest.raises(ValueError, match=r"train_z and dev_z .* \(24, 4\) and \(24, 5\)"):
        fit_open_classifier(x, y, torch.randn(24, 5), y, 3)
    with pytest.raises(ValueError, match=r"^train_z must have 2 dimensions"):
        fit_open_classifier(x[0], y, x, y, 3)
    with pytest.raises(ValueError, match=r"num_known must be an int >= 1, got 0"):
        fit_open_classifier(x, y, x, y, 0)
    with pytest.raises(ValueError, match=r"train_y must hold labels in \[0, 2\)"):
        fit_open_classifier(x, y, x, y % 2, 2)
    rule = fit_open_classifier(x, y, x.double(), y, 3)
    assert rule.centres.dtype == torch.float64
    want = fit_open_classifier(x.double(), y, x.double(), y, 3).predict(x.double())
    assert torch.equal(rule.predict(x), want)
    with pytest.raises(ValueError, match=r"z must have the centres' width 4 .*\(2, 3\)"):
        OpenClassifier(torch.eye(4), torch.ones(4)).predict(torch.randn(2, 3))


def test_adb_names_the_dev_features_and_promotes() -> None:
    x, y = blobs()
    with pytest.raises(ValueError, match=r"^dev features must be \[N, 4\] .*\(24, 5\)"):
        fit_adb(x, y, solver="quantile", dev=(torch.randn(24, 5), y))
    model = ADBModel(torch.eye(2), torch.tensor([0.5, 0.5]), torch.tensor([0, 1]))
    assert model.distances(torch.eye(2, dtype=torch.float64)).dtype == torch.float64


def test_ranking_checks_its_inputs_by_name() -> None:
    with pytest.raises(TypeError, match=r"queries must hold integer ids .* torch.float32"):
        filtered_ranks(lambda h, r: torch.zeros(len(h), 3), torch.zeros(2, 3), None)
    with pytest.raises(ValueError, match=r"ranks must be >= 1, got minimum nan"):
        ranking_metrics(torch.tensor([1.0, math.nan]))
    with pytest.raises(ValueError, match=r"ks must hold ints >= 1, got \[0\]"):
        ranking_metrics(torch.tensor([1.0, 2.0]), ks=(0,))


# ---------------------------------------------- (15) errors report the caller's shapes


def test_gradient_norm_reports_the_shape_the_caller_passed() -> None:
    with pytest.raises(ValueError, match=r"positives must have shape \[K, 5\]") as info:
        gradient_norm(torch.randn(5), torch.randn(3, 4), torch.randn(7, 5))
    assert "got (3, 4)" in str(info.value)
    assert "(1, 3, 4)" not in str(info.value)


def test_collapse_condition_reports_the_shape_the_caller_passed() -> None:
    with pytest.raises(ValueError, match=r"p must have the shape of x, \(5,\)") as info:
        collapse_condition(torch.randn(5), torch.randn(3), torch.randn(7, 3))
    assert str(info.value).endswith("got (3,)")
    assert "(1, 3)" not in str(info.value)


def test_non_collapse_certificate_reports_the_shape_the_caller_passed() -> None:
    with pytest.raises(ValueError, match=r"negatives must have shape \[K, 3\]") as info:
        non_collapse_certificate(torch.randn(3), torch.randn(2, 4))
    assert str(info.value).endswith("got (2, 4)")
    assert "(1, 2, 4)" not in str(info.value)
