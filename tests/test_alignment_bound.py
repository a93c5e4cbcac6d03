"""Theorem 1 bound and Corollaries 1-2 (SPEC §3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist

from spacl.alignment import (
    alignment_bound,
    cka_lower_bound,
    kernel_drift,
    linear_cka,
    rdm_drift,
    rsa,
    rsa_lower_bound,
)

F64 = torch.float64


def test_bound_matches_the_formula() -> None:
    tau, b, pi, delta = 0.5, 256, 0.01, 0.1
    etas = [0.1, 0.05, 0.02]
    out = alignment_bound(tau, b, etas, pi, delta)
    eps = math.sqrt(math.log(3 * b / delta) / (2 * b))
    big = 2 * math.exp(2 / tau) * (pi + eps) / (1 - pi - eps)
    s = sum(etas)
    drift = math.exp(s / (2 * tau**2 * b)) * s / (tau * math.sqrt(b)) * big
    assert out["epsilon"] == pytest.approx(eps, rel=1e-14)
    assert out["Delta"] == pytest.approx(big, rel=1e-14)
    assert out["drift_bound"] == pytest.approx(drift, rel=1e-14)
    assert out["vacuous"] == 0.0
    assert "cka_lower_bound" not in out


def test_constant_step_size_equals_the_sequence() -> None:
    a = alignment_bound(1.0, 512, 0.01, 0.001, steps=100, kernel_norm=50.0, rdm_scale=20.0)
    b = alignment_bound(1.0, 512, [0.01] * 100, 0.001, kernel_norm=50.0, rdm_scale=20.0)
    assert a == pytest.approx(b, rel=1e-14)
    assert a["cka_lower_bound"] == pytest.approx((1 - a["rho_bound"]) / (1 + a["rho_bound"]))
    assert a["r_bound"] == pytest.approx(a["drift_bound"] / (math.sqrt(2) * 20.0))


def test_bound_trends() -> None:
    """More classes, larger batches (at fixed total step) and higher tau tighten the bound."""

    def drift(tau: float = 1.0, b: int = 512, classes: int = 100) -> float:
        return alignment_bound(tau, b, 0.01, 1.0 / classes, steps=1000)["drift_bound"]

    assert drift(classes=1000) < drift(classes=100) < drift(classes=10)
    assert drift(b=2048) < drift(b=512) < drift(b=128)
    assert drift(tau=1.0) < drift(tau=0.5) < drift(tau=0.1)


def test_vacuous_bound() -> None:
    out = alignment_bound(0.1, 8, 0.1, 0.9, steps=10, kernel_norm=1.0, rdm_scale=1.0)
    assert out["vacuous"] == 1.0
    assert out["Delta"] == math.inf and out["drift_bound"] == math.inf
    assert out["cka_lower_bound"] == -1.0 and out["rsa_lower_bound"] == -1.0


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="tau"):
        alignment_bound(0.0, 8, 0.1, 0.1, steps=1)
    with pytest.raises(ValueError, match="pi_max"):
        alignment_bound(1.0, 8, 0.1, 1.0, steps=1)
    with pytest.raises(ValueError, match="steps"):
        alignment_bound(1.0, 8, 0.1, 0.1)
    with pytest.raises(ValueError, match="step_sizes"):
        alignment_bound(1.0, 8, [0.1, -1.0], 0.1)
    with pytest.raises(ValueError, match="batch_size"):
        alignment_bound(1.0, 0, 0.1, 0.1, steps=1)
    with pytest.raises(ValueError, match="rho"):
        cka_lower_bound(-0.1)


def test_kernel_drift_equals_gram_form() -> None:
    g = torch.Generator().manual_seed(0)
    za = torch.randn(40, 5, generator=g, dtype=F64) + 1.0
    zb = za + 0.2 * torch.randn(40, 5, generator=g, dtype=F64)
    h = torch.eye(40, dtype=F64) - 1.0 / 40
    ka, kb = h @ za @ za.T @ h, h @ zb @ zb.T @ h
    assert kernel_drift(za, zb) == pytest.approx(float((ka - kb).norm() / ka.norm()), rel=1e-9)
    assert kernel_drift(za, za) == pytest.approx(0.0, abs=1e-7)


def test_rdm_drift_equals_numpy() -> None:
    rng = np.random.default_rng(1)
    za = rng.normal(size=(30, 6))
    zb = za + 0.1 * rng.normal(size=(30, 6))
    a, b = pdist(za, "cosine"), pdist(zb, "cosine")
    expected = np.linalg.norm(b - a) / (math.sqrt(a.size) * a.std())
    assert rdm_drift(za, zb) == pytest.approx(expected, rel=1e-10)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), noise=st.floats(0.0, 3.0))
def test_corollaries_hold_on_perturbed_representations(seed: int, noise: float) -> None:
    g = torch.Generator().manual_seed(seed)
    za = torch.nn.functional.normalize(torch.randn(40, 8, generator=g, dtype=F64), dim=1)
    zb = torch.nn.functional.normalize(
        za + noise * torch.randn(40, 8, generator=g, dtype=F64), dim=1
    )
    assert linear_cka(za, zb) >= cka_lower_bound(kernel_drift(za, zb)) - 1e-12
    assert rsa(za, zb) >= rsa_lower_bound(rdm_drift(za, zb)) - 1e-12
