"""Spectra, effective rank and RankMe against numpy SVD references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from spacl.geometry import effective_rank, rankme, spectrum

F64 = torch.float64


def entropy_rank(values: np.ndarray) -> float:
    p = values / values.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def test_isotropic_gaussian_has_effective_rank_close_to_d() -> None:
    x = torch.randn(20_000, 16, generator=torch.Generator().manual_seed(0))
    for kind in ("singular", "eigen"):
        value = effective_rank(x, spectrum=kind)
        assert 0.98 * 16 < value <= 16, kind
    assert 0.98 * 16 < rankme(x) <= 16.0001


@pytest.mark.parametrize(("n", "d"), [(200, 12), (9, 30)])
def test_effective_rank_equals_svd_reference(n: int, d: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, d)) * np.geomspace(5, 0.05, d) + 7.0
    s = np.linalg.svd(x - x.mean(0), compute_uv=False)
    assert effective_rank(x, "singular") == pytest.approx(entropy_rank(s), rel=1e-8)
    assert effective_rank(x, "eigen") == pytest.approx(entropy_rank(s**2), rel=1e-8)
    su = np.linalg.svd(x, compute_uv=False)
    assert effective_rank(x, "singular", center=False) == pytest.approx(entropy_rank(su), rel=1e-8)
    p = su / su.sum() + 1e-7
    assert rankme(x) == pytest.approx(float(np.exp(-(p * np.log(p)).sum())), rel=1e-8)


def test_the_two_effective_rank_definitions_differ_on_decaying_spectra() -> None:
    x = torch.randn(500, 20, generator=torch.Generator().manual_seed(1), dtype=F64)
    x = x * torch.logspace(0, -2, 20, dtype=F64)
    assert effective_rank(x, "singular") > 1.3 * effective_rank(x, "eigen")


def test_low_rank_features() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(300, 3, generator=g, dtype=F64) @ torch.randn(3, 10, generator=g, dtype=F64)
    assert effective_rank(x) <= 3.0 + 1e-6
    out = spectrum(x)
    assert out["log_spectrum"][3] < -25  # collapsed directions (float64 rounding level)


@pytest.mark.parametrize(("n", "d"), [(150, 8), (6, 20)])
def test_spectrum_equals_svd_reference(n: int, d: int) -> None:
    rng = np.random.default_rng(d)
    x = rng.normal(size=(n, d)) * np.linspace(3, 0.5, d) - 4.0
    out = spectrum(x)
    s = np.linalg.svd(x - x.mean(0), compute_uv=False)[: min(n - 1, d)]
    np.testing.assert_allclose(out["singular_values"], s, rtol=1e-9)
    np.testing.assert_allclose(out["covariance_eigenvalues"], s**2 / n, rtol=1e-9)
    np.testing.assert_allclose(out["log_spectrum"], np.log(s**2 / s[0] ** 2), rtol=1e-9, atol=1e-9)
    assert out["log_spectrum"][0] == 0.0
    assert "class_mean_singular_values" not in out


def test_class_mean_spectrum() -> None:
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(5), 6)
    x = rng.normal(size=(5, 7))[y] + 0.1 * rng.normal(size=(30, 7))
    out = spectrum(x, y)
    means = np.stack([x[y == k].mean(0) for k in range(5)])
    s = np.linalg.svd(means - means.mean(0), compute_uv=False)[:4]
    np.testing.assert_allclose(out["class_mean_singular_values"], s, rtol=1e-9)
    np.testing.assert_allclose(out["class_mean_covariance_eigenvalues"], s**2 / 5, rtol=1e-9)
    np.testing.assert_allclose(out["class_mean_log_spectrum"], np.log(s**2 / s[0] ** 2), atol=1e-9)


def test_errors() -> None:
    x = torch.randn(10, 3)
    with pytest.raises(ValueError, match="spectrum must be"):
        effective_rank(x, spectrum="participation")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2 classes"):
        spectrum(x, torch.zeros(10, dtype=torch.int64))
    with pytest.raises(ValueError, match="non-finite"):
        rankme(x * math.nan)
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(effective_rank(torch.ones(5, 3)))
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(rankme(torch.zeros(5, 3)))


@pytest.mark.parametrize("d", [5, 255, 300, 512])
def test_blocked_gram_equals_the_product(d: int) -> None:
    from spacl.geometry._inputs import gram

    x = torch.randn(40, d, generator=torch.Generator().manual_seed(d), dtype=F64)
    out = gram(x)
    torch.testing.assert_close(out, x.T @ x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, out.T, rtol=1e-14, atol=1e-12)
