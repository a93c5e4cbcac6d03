"""SPACL theory diagnostics: Lemma 2.4, Theorem 2.1, Corollary 2.2."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.geometry import collapse_condition, gradient_norm, non_collapse_certificate

F64 = torch.float64


def unit(*shape: int, seed: int) -> torch.Tensor:
    return F.normalize(
        torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64), dim=-1
    )


def autograd_grad(
    x: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, tau: float
) -> torch.Tensor:
    x = x.clone().requires_grad_(True)
    s_pos = torch.exp(pos @ x / tau).sum()
    s_neg = torch.exp(neg @ x / tau).sum()
    torch.log(s_neg / s_pos + 1).backward()
    assert x.grad is not None
    return x.grad


# ---------------------------------------------------------------- Lemma 2.4
def test_lemma_configuration_gives_two_sigmoid_two() -> None:
    # p = -n, x = n maximises sigmoid(<x, n - p>) * ||n - p||: both factors at their maximum
    n = unit(5, seed=0)
    x, p = n.clone(), -n
    expected = 2.0 / (1.0 + math.exp(-2.0))
    assert expected == pytest.approx(1.7616, abs=1e-4)
    assert gradient_norm(x, p[None], n[None]) == pytest.approx(expected, abs=1e-14)
    assert float(autograd_grad(x, p[None], n[None], 1.0).norm()) == pytest.approx(
        expected, abs=1e-14
    )
    tau = 0.5
    assert gradient_norm(x, p[None], n[None], tau) == pytest.approx(
        2.0 / tau / (1.0 + math.exp(-2.0 / tau)), abs=1e-12
    )
    # at this configuration the gradient is radial: nothing is left on the tangent space
    assert gradient_norm(x, p[None], n[None], projection="tangent") == pytest.approx(0.0, abs=1e-14)


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_closed_form_equals_autograd_on_a_batch(tau: float) -> None:
    x = unit(6, 4, seed=1)
    pos = unit(6, 3, 4, seed=2)
    neg = unit(6, 7, 4, seed=3)
    euclid = gradient_norm(x, pos, neg, tau)
    tangent = gradient_norm(x, pos, neg, tau, projection="tangent")
    assert isinstance(euclid, list) and isinstance(tangent, list)
    for i in range(6):
        g = autograd_grad(x[i], pos[i], neg[i], tau)
        g_tan = g - (g @ x[i]) * x[i]
        assert euclid[i] == pytest.approx(float(g.norm()), rel=1e-12)
        assert tangent[i] == pytest.approx(float(g_tan.norm()), rel=1e-10, abs=1e-14)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), k=st.integers(1, 200))
def test_bounds_on_the_sphere(seed: int, k: int) -> None:
    x, p = unit(3, seed=seed), unit(1, 3, seed=seed + 1)
    neg = unit(k, 3, seed=seed + 2)
    assert gradient_norm(x, p, neg) <= 2.0
    if k == 1:
        assert gradient_norm(x, p, neg) <= 2.0 / (1.0 + math.exp(-2.0)) + 1e-12
        assert gradient_norm(x, p, neg, projection="tangent") <= 1.27


def test_gradient_norm_errors() -> None:
    with pytest.raises(ValueError, match="positives must have shape"):
        gradient_norm(unit(3, seed=0), unit(2, 4, seed=1), unit(2, 3, seed=2))
    with pytest.raises(ValueError, match="temperature"):
        gradient_norm(unit(3, seed=0), unit(2, 3, seed=1), unit(2, 3, seed=2), 0.0)
    with pytest.raises(ValueError, match="projection"):
        gradient_norm(unit(3, seed=0), unit(2, 3, seed=1), unit(2, 3, seed=2), projection="x")  # type: ignore[arg-type]


# ---------------------------------------------------------------- Theorem 2.1
def ratio_tangent_gradient_at_p(p: torch.Tensor, neg: torch.Tensor) -> tuple[float, float]:
    """Tangent gradient norm of s^-/s^+ at x = p (autograd), and s^-/s^+ there."""
    x = p.clone().requires_grad_(True)
    f = torch.exp(neg @ x).sum() / torch.exp(p @ x)
    f.backward()
    assert x.grad is not None
    g = x.grad - (x.grad @ p) * p
    return float(g.norm()), float(f.detach())


def test_condition_is_stationarity_at_the_positive() -> None:
    p = torch.tensor([0.0, 0.0, 1.0], dtype=F64)
    a = 0.7
    mirrored = torch.tensor(
        [[math.sin(a), 0.0, math.cos(a)], [-math.sin(a), 0.0, math.cos(a)]], dtype=F64
    )
    generic = unit(4, 3, seed=4)
    for neg, holds in ((mirrored, True), (-p[None], True), (generic, False)):
        out = collapse_condition(p, p, neg)
        assert out["condition"] is holds
        assert out["collapsed"] is True
        tangent, ratio = ratio_tangent_gradient_at_p(p, neg)
        # d/dx (s^-/s^+) at x = p is (s^-/s^+)(r - p): its tangent part is ratio * residual
        assert tangent == pytest.approx(ratio * out["residual"], rel=1e-10, abs=1e-14)
    assert collapse_condition(p, p, -p[None])["coefficient"] == pytest.approx(-1.0)
    assert collapse_condition(p, p, mirrored)["coefficient"] == pytest.approx(math.cos(a))


def test_condition_against_the_minimiser() -> None:
    p = torch.tensor([0.0, 0.0, 1.0], dtype=F64)
    # one negative n = e1: f(x) = exp(x1 - x3) is minimised at (-1, 0, 1)/sqrt(2), not at p
    n = torch.tensor([[1.0, 0.0, 0.0]], dtype=F64)
    best = torch.tensor([-1.0, 0.0, 1.0], dtype=F64) / math.sqrt(2)
    assert collapse_condition(best, p, n)["condition"] is False
    assert collapse_condition(best, p, n)["collapsed"] is False
    assert float(torch.exp(n @ best - p @ best)) < float(torch.exp(n @ p - p @ p))
    # n = -p: f(x) = exp(-2 x3) is minimised at x = p and the condition holds
    assert collapse_condition(p, p, -p[None])["condition"] is True


def test_condition_batch_shares() -> None:
    p = unit(5, 4, seed=5)
    out = collapse_condition(p, p, -p[:, None, :])  # every anchor: n = -p
    assert out["share_condition"] == 1.0 and out["share_collapsed"] == 1.0
    out = collapse_condition(p, p, unit(6, 4, seed=6))  # shared generic negatives
    assert out["share_condition"] == 0.0
    assert len(out["residual"]) == 5


# ---------------------------------------------------------------- Corollary 2.2
def c_range_2d(p: np.ndarray, neg: np.ndarray) -> tuple[float, float] | None:
    """Brute force in R^2: the line {c p} meets conv{n_j} in [c_min, c_max] (or misses it)."""
    q = np.array([-p[1], p[0]])
    t, c = neg @ q, neg @ p / (p @ p)
    crossings = [c[i] for i in range(len(t)) if t[i] == 0]
    for i in range(len(t)):
        for j in range(len(t)):
            if t[i] < 0 < t[j]:
                crossings.append((t[j] * c[i] - t[i] * c[j]) / (t[j] - t[i]))
    return (min(crossings), max(crossings)) if crossings else None


@pytest.mark.parametrize("seed", range(12))
def test_certificate_equals_2d_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.normal(size=2) * 2.0
    neg = rng.normal(size=(4, 2)) + rng.normal(size=2)
    out = non_collapse_certificate(p, neg)
    ref = c_range_2d(p, neg)
    if ref is None:
        assert out["certified"] is True and out["feasible"] is False
    else:
        assert out["feasible"] is True
        assert out["c_min"] == pytest.approx(ref[0], abs=1e-7)
        assert out["c_max"] == pytest.approx(ref[1], abs=1e-7)
        assert out["certified"] is bool(abs(ref[0]) < 1e-9 and abs(ref[1]) < 1e-9)


def test_certificate_simple_cases() -> None:
    p = torch.tensor([0.0, 0.0, 1.0], dtype=F64)
    assert non_collapse_certificate(p, -p[None])["certified"] is False  # -1 * p is a negative
    assert non_collapse_certificate(p, torch.eye(3, dtype=F64)[:1])["certified"] is True
    only_zero = non_collapse_certificate(p, torch.tensor([[1.0, 0, 0], [-1.0, 0, 0]], dtype=F64))
    assert only_zero["certified"] is True and only_zero["zero_in_hull"] is True
    # few negatives in many dimensions: the line misses their hull
    assert non_collapse_certificate(unit(16, seed=7), unit(5, 16, seed=8))["certified"] is True
    # many negatives all around the sphere: the hull contains a segment of the line
    dense = non_collapse_certificate(unit(3, seed=9), unit(300, 3, seed=10))
    assert dense["certified"] is False and dense["c_min"] < 0 < dense["c_max"]


def test_certificate_is_consistent_with_the_theorem_on_a_batch() -> None:
    """Certified => r = sum w_j n_j (a point of the hull) is no non-zero multiple of p."""
    p = unit(30, 3, seed=11)
    neg = unit(30, 3, 3, seed=12)
    cert = non_collapse_certificate(p, neg)
    cond = collapse_condition(p, p, neg)
    assert 0 < cert["share_certified"] < 1
    for i in range(30):
        if cert["certified"][i]:
            assert not cond["condition"][i] or abs(cond["coefficient"][i]) < 1e-9
        assert (cert["reason"][i] == "no multiple of p lies in conv{n_j}") is (
            not cert["feasible"][i]
        )


def test_certificate_errors() -> None:
    with pytest.raises(ValueError, match="non-zero"):
        non_collapse_certificate(torch.zeros(3, dtype=F64), unit(2, 3, seed=0))
    with pytest.raises(ValueError, match="negatives must have shape"):
        non_collapse_certificate(unit(3, seed=0), unit(2, 4, seed=1))
    with pytest.raises(ValueError, match="non-finite"):
        non_collapse_certificate(unit(3, seed=0) * math.nan, unit(2, 3, seed=1))


def test_certificate_falls_back_to_other_highs_solvers(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from spacl.geometry import optimality

    real = optimality.linprog
    tried: list[str] = []

    def flaky(*args: Any, method: str, **kwargs: Any) -> Any:
        tried.append(method)
        if method == "highs":  # numerical difficulties, as HiGHS reports on some inputs
            return SimpleNamespace(status=4, message="numerical difficulties", x=None)
        return real(*args, method=method, **kwargs)

    monkeypatch.setattr(optimality, "linprog", flaky)
    p = torch.tensor([0.0, 0.0, 1.0], dtype=F64)
    assert non_collapse_certificate(p, -p[None])["certified"] is False
    assert tried[:2] == ["highs", "highs-ds"]
