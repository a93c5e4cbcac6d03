"""Similarity descent (the dynamics of Theorem 1): gradients vs a loop, and the bound on it."""

from __future__ import annotations

import math

import pytest
import torch

from spacl.alignment import alignment_bound
from spacl.alignment.surrogate import (
    random_pair_batches,
    similarity_gradient,
    surrogate_bound_check,
    surrogate_drift,
    two_view_reference,
)


def reference_set(instances: int, classes: int, seed: int = 0):
    return two_view_reference(instances, classes, dim=6, seed=seed)


def loop_loss(sigma, rows, labels, partner, tau, objective):
    total = sigma.new_zeros(())
    rows = rows.tolist()
    for i in rows:
        p = int(partner[i])
        if objective == "dcl":
            den = [j for j in rows if j not in (i, p)]
        else:
            den = [j for j in rows if int(labels[j]) != int(labels[i])]
        terms = torch.stack([sigma[i, j] / tau for j in den])
        total = total - sigma[i, p] / tau + torch.logsumexp(terms, 0)
    return total / len(rows)


@pytest.mark.parametrize("objective", ["dcl", "nscl"])
def test_similarity_gradient_matches_autograd_of_loop(objective: str) -> None:
    sigma, labels, partner = reference_set(6, 3)
    rows = torch.tensor([0, 1, 4, 5, 8, 9, 10, 11])
    var = sigma.clone().requires_grad_(True)
    loop_loss(var, rows, labels, partner, 0.5, objective).backward()
    assert var.grad is not None
    want = (var.grad + var.grad.T) / 2  # an entry and its mirror are one variable
    got = similarity_gradient(sigma, rows, labels, partner, 0.5, objective)  # type: ignore[arg-type]
    assert torch.allclose(got, want, atol=1e-12)
    outside = torch.ones(12, 12, dtype=torch.bool)
    outside[rows.unsqueeze(1), rows.unsqueeze(0)] = False
    assert bool((got[outside] == 0).all())


@pytest.mark.parametrize(("tau", "classes"), [(0.5, 4), (1.0, 4), (1.0, 8)])
def test_theorem1_bound_holds_on_similarity_descent(tau: float, classes: int) -> None:
    instances, per_batch, steps, eta = 32, 8, 40, 0.2
    sigma, labels, partner = reference_set(instances, classes, seed=classes)
    batches = random_pair_batches(instances, per_batch, steps, seed=1)
    assert all(torch.equal(b[1::2], b[0::2] + 1) for b in batches)
    drift = surrogate_drift(sigma, labels, partner, batches, eta, tau)
    assert drift[0] > 0 and all(math.isfinite(d) for d in drift)
    for t in (1, steps // 2, steps):
        bound = alignment_bound(tau, 2 * per_batch, eta, 1.0 / classes, steps=t)
        assert not bound["vacuous"]
        assert drift[t - 1] <= bound["drift_bound"], (t, drift[t - 1], bound["drift_bound"])


def test_surrogate_rejects_bad_input() -> None:
    sigma, labels, partner = reference_set(4, 2)
    with pytest.raises(ValueError, match="square"):
        similarity_gradient(sigma[:3], torch.tensor([0, 1]), labels, partner, 1.0)
    with pytest.raises(ValueError, match="partner"):
        similarity_gradient(sigma, torch.tensor([0, 2]), labels, partner, 1.0)
    with pytest.raises(ValueError, match="objective"):
        similarity_gradient(sigma, torch.tensor([0, 1]), labels, partner, 1.0, "ce")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="share a label"):
        similarity_gradient(sigma, torch.tensor([0, 1]), torch.arange(8), partner, 1.0)
    with pytest.raises(ValueError, match="tau"):
        similarity_gradient(sigma, torch.tensor([0, 1]), labels, partner, 0.0)
    with pytest.raises(ValueError, match="step sizes"):
        surrogate_drift(sigma, labels, partner, [torch.tensor([0, 1])], [0.1, 0.2], 1.0)


def test_surrogate_bound_check_reports_the_ratio() -> None:
    out = surrogate_bound_check(1.0, 16, 0.2, 30, 8, instances=32)
    assert out["vacuous"] == 0.0 and 0 < out["ratio"] < 1
    assert out["ratio"] == pytest.approx(out["drift"] / out["drift_bound"])
    # a class prior + epsilon >= 1 (2 classes, batch of 2 anchors) makes the bound vacuous
    assert surrogate_bound_check(1.0, 2, 0.2, 5, 2, instances=8)["vacuous"] == 1.0
