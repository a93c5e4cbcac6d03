"""Bad input → clear errors; kernel edge cases; property tests (hypothesis)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.losses import (
    DebiasedContrastiveLoss,
    DecoupledContrastiveLoss,
    HardNegativeLoss,
    NSCLLoss,
    NTXentLoss,
    SampledHardNegativeLoss,
    SupConLoss,
    masked_logsumexp,
    normalize,
)


def test_masked_logsumexp_empty_row_is_minus_inf_with_zero_grad() -> None:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    out = masked_logsumexp(x, mask)
    assert out[1] == -math.inf
    assert torch.allclose(out[0], torch.logsumexp(x[0, [0, 2]], 0))
    torch.logaddexp(out, torch.zeros(3, dtype=torch.float64)).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert (x.grad[1] == 0).all() and (x.grad[0, [1, 3]] == 0).all()


def test_normalize_modes() -> None:
    z = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(normalize(z, "sphere")[:2].norm(dim=1), torch.ones(2, dtype=z.dtype))
    assert torch.equal(normalize(z, "sphere")[2], torch.zeros(2, dtype=z.dtype))
    ball = normalize(z, "ball")
    assert torch.allclose(ball[0], torch.tensor([0.6, 0.8], dtype=z.dtype))
    assert torch.equal(ball[1], z[1])
    assert normalize(z, "none") is z
    with pytest.raises(ValueError, match="normalize"):
        normalize(z, "cube")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: NTXentLoss(0.0), "temperature"),
        (lambda: NTXentLoss(-1.0), "temperature"),
        (lambda: NTXentLoss(float("nan")), "temperature"),
        (lambda: DebiasedContrastiveLoss(1.0), "tau_plus"),
        (lambda: DebiasedContrastiveLoss(-0.1), "tau_plus"),
        (lambda: HardNegativeLoss(-1.0), "beta"),
        (lambda: SupConLoss(0.1, "both"), "variant"),
        (lambda: NTXentLoss(0.5, normalize="l1"), "normalize"),  # type: ignore[arg-type]
        (lambda: NTXentLoss(0.5, anchor_mode="some"), "anchor_mode"),
        (lambda: NTXentLoss(0.5, reduction="max"), "reduction"),
        (lambda: SampledHardNegativeLoss(1.0, 0), "num_negatives"),
    ],
)
def test_bad_hyper_parameters(make, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_shapes_and_values() -> None:
    loss = NTXentLoss()
    with pytest.raises(ValueError, match="features"):
        loss(torch.randn(4, 2, 3, 1))
    with pytest.raises(ValueError, match="second view"):
        loss(torch.randn(4, 3))
    with pytest.raises(ValueError, match="same shape"):
        loss(torch.randn(4, 3), torch.randn(5, 3))
    bad = torch.randn(4, 2, 3)
    bad[1, 0, 2] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        loss(bad)
    inf = torch.randn(4, 3)
    inf[0, 0] = float("inf")
    with pytest.raises(ValueError, match="z1"):
        loss(torch.randn(4, 3), inf)
    with pytest.raises(TypeError, match="floating"):
        loss(torch.ones(4, 2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        loss([[1.0, 2.0]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2 instances"):
        loss(torch.randn(1, 2, 3))
    with pytest.raises(ValueError, match="V >= 2"):
        loss(torch.randn(4, 1, 3))
    with pytest.raises(ValueError, match="targets"):
        loss(torch.randn(4, 2, 3), targets=torch.randn(4, 3, 3))


def test_bad_labels() -> None:
    x = torch.randn(4, 2, 3)
    with pytest.raises(ValueError, match="length 3"):
        SupConLoss()(x, torch.tensor([0, 1, 0]))
    with pytest.raises(TypeError, match="integer"):
        SupConLoss()(x, torch.tensor([0.0, 1.0, 0.0, 1.0]))
    with pytest.raises(TypeError, match="labels"):
        SupConLoss()(x, torch.randn(4, 2, 3))
    with pytest.raises(ValueError, match="unsupervised"):
        NTXentLoss()(x, torch.tensor([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="needs labels"):
        NSCLLoss()(x)
    # a one-class batch: defined for SupCon (issue 18, tests/test_losses.py), not NSCL
    assert torch.isfinite(SupConLoss()(x, torch.zeros(4, dtype=torch.long)))
    with pytest.raises(ValueError, match="negative"):
        NSCLLoss()(x, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="no admissible negative"):
        SampledHardNegativeLoss(1.0, 2)(x, labels=torch.zeros(4, dtype=torch.long))


def test_supcon_single_class_batch_is_finite_only_when_negatives_exist() -> None:
    # anchors of class 0 have no negative in a two-class batch where class 1 is alone?
    x = torch.randn(3, 2, 4, dtype=torch.float64)
    lab = torch.tensor([0, 0, 1])
    assert torch.isfinite(SupConLoss(0.5)(x, lab))
    assert torch.isfinite(NSCLLoss(0.5)(x, lab))


# ---- property tests ---------------------------------------------------------------------

LOSSES = [
    lambda: NTXentLoss(0.5),
    lambda: DecoupledContrastiveLoss(0.5),
    lambda: HardNegativeLoss(1.0, 0.1, 0.5),
]
SUPERVISED = [lambda: SupConLoss(0.2), lambda: SupConLoss(0.2, "in"), lambda: NSCLLoss(0.5)]


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(2, 9),
    v=st.integers(2, 3),
    d=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    which=st.integers(0, len(LOSSES) - 1),
)
def test_permutation_invariance(b: int, v: int, d: int, seed: int, which: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, v, d, generator=g, dtype=torch.float64)
    perm = torch.randperm(b, generator=g)
    vperm = torch.randperm(v, generator=g)
    loss = LOSSES[which]()
    base = float(loss(x))
    assert abs(float(loss(x[perm])) - base) < 1e-10 * max(1.0, abs(base))
    assert abs(float(loss(x[:, vperm])) - base) < 1e-10 * max(1.0, abs(base))


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(3, 10),
    classes=st.integers(2, 4),
    seed=st.integers(0, 2**31 - 1),
    which=st.integers(0, len(SUPERVISED) - 1),
)
def test_supervised_permutation_invariance(b: int, classes: int, seed: int, which: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, 2, 4, generator=g, dtype=torch.float64)
    lab = torch.arange(b) % classes
    perm = torch.randperm(b, generator=g)
    loss = SUPERVISED[which]()
    base = float(loss(x, lab))
    assert abs(float(loss(x[perm], lab[perm])) - base) < 1e-10 * max(1.0, abs(base))


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(2, 16),
    v=st.integers(2, 4),
    seed=st.integers(0, 2**31 - 1),
    tau=st.sampled_from([0.05, 0.1, 0.5, 1.0]),
    which=st.integers(0, len(LOSSES) - 1),
)
def test_float32_agrees_with_float64(b: int, v: int, seed: int, tau: float, which: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, v, 8, generator=g, dtype=torch.float64)
    loss = LOSSES[which]()
    loss.temperature = tau
    hi = float(loss(x))
    lo = float(loss(x.float()))
    assert abs(hi - lo) <= 1e-5 * max(1.0, abs(hi))
