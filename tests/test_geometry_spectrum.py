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


def svd_reference(x: np.ndarray) -> np.ndarray:
    """Singular values with the rank-deficient tail set to 0 by the library's stated bound.

    The library zeroes Gram eigenvalues ``<= max(N, d) eps lambda_max``, i.e. singular
    values ``<= sqrt(max(N, d) eps) sigma_max``; an SVD returns them as ``~eps sigma_max``.
    """
    s = np.linalg.svd(x, compute_uv=False)
    return np.where(s > np.sqrt(max(x.shape) * np.finfo(np.float64).eps) * s[0], s, 0.0)


@pytest.mark.parametrize(("n", "d"), [(200, 12), (9, 30)])
def test_effective_rank_equals_svd_reference(n: int, d: int) -> None:
    # well-conditioned nonzero singular values: the Gram route's relative error on
    # sigma_k is about max(N, d) eps (sigma_max / sigma_k)^2, far below 1e-10 here
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, d)) * np.geomspace(5, 0.05, d) + 7.0
    s = svd_reference(x - x.mean(0))
    assert effective_rank(x, "singular") == pytest.approx(entropy_rank(s), rel=1e-10)
    assert effective_rank(x, "eigen") == pytest.approx(entropy_rank(s**2), rel=1e-10)
    su = svd_reference(x)
    assert effective_rank(x, "singular", center=False) == pytest.approx(entropy_rank(su), rel=1e-10)
    p = su / su.sum() + 1e-7
    assert rankme(x) == pytest.approx(float(np.exp(-(p * np.log(p)).sum())), rel=1e-10)


def exact_spectrum_matrix(n: int, d: int, singular: np.ndarray, seed: int) -> np.ndarray:
    """``X = U diag(s) V^T`` with centred orthonormal ``U`` [n, r], orthonormal ``V`` [d, r].

    The columns of ``U`` are orthogonal to the ones vector, so ``X`` has zero column
    means: its centred and uncentred singular values are both exactly ``s`` and 0.
    """
    rng = np.random.default_rng(seed)
    r = singular.size
    a = rng.normal(size=(n, r))
    u, _ = np.linalg.qr(a - a.mean(0))
    v, _ = np.linalg.qr(rng.normal(size=(d, r)))
    return (u * singular) @ v.T


def closed_form_ranks(singular: np.ndarray, length: int) -> tuple[float, float, float]:
    """Effective rank (singular, eigen) and RankMe of ``s`` padded with zeros to ``length``."""
    s = np.concatenate([singular, np.zeros(length - singular.size)])
    p = s / s.sum() + 1e-7  # RankMe: every one of the min(N, d) values, zeros included
    return entropy_rank(singular), entropy_rank(singular**2), float(np.exp(-(p * np.log(p)).sum()))


@pytest.mark.parametrize(("n", "d"), [(12, 40), (9, 30), (60, 15)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rank_deficient_input_gives_the_exact_spectrum(n: int, d: int, dtype: str) -> None:
    singular = np.array([6.0, 3.0, 2.0, 0.75, 0.5])
    x = exact_spectrum_matrix(n, d, singular, seed=n + d)
    singular_rank, eigen_rank, rank_me = closed_form_ranks(singular, min(n, d))
    if dtype == "float64":
        rel = 1e-12  # zeros are exact after the cut; nonzero values carry ~max(N,d) eps
    else:
        # rounding X to float32 perturbs every singular value by up to
        # ||E||_2 <= eps32 ||X||_F, so up to min(N, d) spurious values of relative size
        # delta = eps32 ||X||_F / sum(s) may survive; each moves the entropy by
        # <= delta (1 + |log delta|)
        eps32 = float(np.finfo(np.float32).eps)
        delta = eps32 * float(np.linalg.norm(singular)) / float(singular.sum())
        rel = min(n, d) * delta * (1 - np.log(delta)) + 1e-6
    features = torch.from_numpy(x).to(getattr(torch, dtype))
    assert effective_rank(features, "singular") == pytest.approx(singular_rank, rel=rel)
    assert effective_rank(features, "eigen") == pytest.approx(eigen_rank, rel=rel)
    assert rankme(features) == pytest.approx(rank_me, rel=rel)
    if dtype == "float64":
        out = spectrum(features)
        kept = min(n - 1, d)
        np.testing.assert_allclose(out["singular_values"][:5], singular, rtol=1e-12)
        assert out["singular_values"][5:kept] == [0.0] * (kept - 5)
        assert all(v == -math.inf for v in out["log_spectrum"][5:])


def test_rounding_cut_follows_the_stated_bound() -> None:
    from spacl.geometry.spectrum import clip_rounding

    eps = torch.finfo(F64).eps
    values = torch.tensor([4.0, 1.0, 30 * eps * 4.0 * 1.01, 30 * eps * 4.0, -1e-15], dtype=F64)
    out = clip_rounding(values, summed=30, size=9)
    assert out.tolist() == [4.0, 1.0, 30 * eps * 4.0 * 1.01, 0.0, 0.0]
    # the bound takes the larger of the summed count and the Gram size
    assert clip_rounding(values, summed=2, size=30).tolist() == out.tolist()


def test_the_two_effective_rank_definitions_differ_on_decaying_spectra() -> None:
    x = torch.randn(500, 20, generator=torch.Generator().manual_seed(1), dtype=F64)
    x = x * torch.logspace(0, -2, 20, dtype=F64)
    assert effective_rank(x, "singular") > 1.3 * effective_rank(x, "eigen")


def test_low_rank_features() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(300, 3, generator=g, dtype=F64) @ torch.randn(3, 10, generator=g, dtype=F64)
    assert effective_rank(x) <= 3.0 + 1e-6
    out = spectrum(x)
    assert out["log_spectrum"][3] == -math.inf  # collapsed directions: exact zeros


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
    from spacl.geometry.inputs import gram

    x = torch.randn(40, d, generator=torch.Generator().manual_seed(d), dtype=F64)
    out = gram(x)
    torch.testing.assert_close(out, x.T @ x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, out.T, rtol=1e-14, atol=1e-12)
