"""Alignment and uniformity (Wang & Isola 2020) against their reference formulas."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import spacl.geometry.inputs as inputs
from spacl.geometry import alignment, alignment_uniformity, uniformity

F64 = torch.float64


def views(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z0 = torch.randn(n, d, generator=g, dtype=F64)
    return z0, z0 + 0.3 * torch.randn(n, d, generator=g, dtype=F64)


def ref_align(x: torch.Tensor, y: torch.Tensor, alpha: float = 2.0) -> float:
    return float((x - y).norm(p=2, dim=1).pow(alpha).mean())


def ref_uniform(x: torch.Tensor, t: float = 2.0) -> float:
    return float(torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log())


def test_equal_to_wang_isola_reference() -> None:
    z0, z1 = views(70, 5, 0)
    n0, n1 = F.normalize(z0, dim=1), F.normalize(z1, dim=1)
    out = alignment_uniformity(z0, z1)
    assert out["alignment"] == pytest.approx(ref_align(n0, n1), rel=1e-12)
    assert out["uniformity_z0"] == pytest.approx(ref_uniform(n0), rel=1e-12)
    assert out["uniformity_z1"] == pytest.approx(ref_uniform(n1), rel=1e-12)
    assert out["uniformity"] == pytest.approx(0.5 * (ref_uniform(n0) + ref_uniform(n1)), rel=1e-12)
    assert alignment(z0, z1, alpha=1.0) == pytest.approx(ref_align(n0, n1, 1.0), rel=1e-12)
    assert uniformity(z0, t=0.5, normalize=False) == pytest.approx(ref_uniform(z0, 0.5), rel=1e-10)


def test_blocked_log_sum_exp(monkeypatch: pytest.MonkeyPatch) -> None:
    z0, _ = views(90, 4, 1)
    exact = ref_uniform(F.normalize(z0, dim=1))
    monkeypatch.setattr(inputs, "CHUNK_ELEMENTS", 200)  # blocks of two rows
    assert uniformity(z0) == pytest.approx(exact, rel=1e-12)


def test_sampling_is_reproducible_and_unbiased_enough() -> None:
    z0, _ = views(600, 3, 2)
    exact = uniformity(z0)
    a = uniformity(z0, sample=200, generator=torch.Generator().manual_seed(5))
    b = uniformity(z0, sample=200, generator=torch.Generator().manual_seed(5))
    assert a == b
    assert a == pytest.approx(exact, abs=0.05)
    assert uniformity(z0, sample=600) == exact  # a sample of all points is exact
    idx = torch.randperm(600, generator=torch.Generator().manual_seed(0))[:100]
    assert uniformity(z0, sample=100) == pytest.approx(
        ref_uniform(F.normalize(z0[idx], dim=1)), rel=1e-12
    )


def test_uniform_sphere_versus_collapsed() -> None:
    spread = torch.randn(500, 8, generator=torch.Generator().manual_seed(3), dtype=F64)
    collapsed = torch.ones(500, 8, dtype=F64) + 1e-3 * spread
    assert uniformity(spread) < uniformity(collapsed)
    assert uniformity(collapsed) == pytest.approx(0.0, abs=1e-4)
    assert alignment(spread, spread) == 0.0


def test_errors() -> None:
    z0, z1 = views(10, 3, 4)
    with pytest.raises(ValueError, match="same number of rows"):
        alignment(z0, z1[:9])
    with pytest.raises(ValueError, match="all-zero row"):
        uniformity(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="t must be > 0"):
        uniformity(z0, t=0.0)
    with pytest.raises(ValueError, match="sample"):
        uniformity(z0, sample=1)
    with pytest.raises(ValueError, match="non-finite"):
        alignment(z0 * math.inf, z1)
