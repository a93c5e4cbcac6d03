"""Every loss against a slow loop reference, the SPEC §4 identities, and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from loss_references import (
    dcl_ref,
    hcl_ref,
    nscl_ref,
    ntxent_ref,
    sampled_ref,
    supcon_ref,
)
from spacl.losses import (
    DebiasedContrastiveLoss,
    DecoupledContrastiveLoss,
    HardNegativeLoss,
    NSCLLoss,
    NTXentLoss,
    SampledHardNegativeLoss,
    SupConLoss,
    TiltedNegativeSampler,
)

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}
DTYPES = [torch.float64, torch.float32]


def views(b: int, v: int, d: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, v, d, generator=g, dtype=torch.float64).to(dtype)


def labels_for(b: int, classes: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lab = torch.randint(0, classes, (b,), generator=g)
    lab[:classes] = torch.arange(classes)  # every class present
    return lab


def close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    got, want = got.detach(), want.detach()
    assert torch.isfinite(got)
    assert abs(float(got) - float(want)) <= TOL[dtype] * max(1.0, abs(float(want)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("v", [2, 3])
@pytest.mark.parametrize("tau", [0.5, 0.1])
def test_ntxent_matches_loop(dtype: torch.dtype, v: int, tau: float) -> None:
    x = views(6, v, 5, dtype)
    close(NTXentLoss(tau)(x), ntxent_ref(x.double(), tau), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ntxent_two_view_form_equals_stacked(dtype: torch.dtype) -> None:
    x = views(7, 2, 4, dtype)
    loss = NTXentLoss(0.3)
    assert torch.equal(loss(x[:, 0], x[:, 1]), loss(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ntxent_with_target_candidates(dtype: torch.dtype) -> None:
    x, t = views(5, 3, 4, dtype, 0), views(5, 3, 4, dtype, 9)
    close(NTXentLoss(0.2)(x, targets=t), ntxent_ref(x.double(), 0.2, t.double()), dtype)


def test_ntxent_anchor_mode_one_matches_loop() -> None:
    x = views(5, 3, 4, torch.float64)
    z = x / x.norm(dim=-1, keepdim=True)
    flatz = z.reshape(15, 4)
    terms = []
    for i in range(5):
        a = i * 3
        den = sum(torch.exp(flatz[a] @ flatz[k] / 0.5) for k in range(15) if k != a)
        pos = [-torch.log(torch.exp(flatz[a] @ flatz[a + j] / 0.5) / den) for j in (1, 2)]
        terms.append(sum(pos) / 2)
    close(NTXentLoss(0.5, anchor_mode="one")(x), sum(terms) / 5, torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("v", [2, 3])
def test_decoupled_matches_loop(dtype: torch.dtype, v: int) -> None:
    x = views(6, v, 5, dtype)
    close(DecoupledContrastiveLoss(0.4)(x), dcl_ref(x.double(), 0.4), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("beta", "tau_plus"), [(0.0, 0.0), (1.0, 0.0), (2.0, 0.1), (0.0, 0.1), (0.5, 0.3)]
)
@pytest.mark.parametrize("v", [2, 3])
def test_hcl_matches_loop(dtype: torch.dtype, beta: float, tau_plus: float, v: int) -> None:
    x = views(6, v, 5, dtype)
    got = HardNegativeLoss(beta, tau_plus, temperature=0.5)(x)
    close(got, hcl_ref(x.double(), 0.5, beta, tau_plus), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hscl_with_labels_matches_loop(dtype: torch.dtype) -> None:
    x, lab = views(8, 2, 5, dtype), labels_for(8, 3)
    got = HardNegativeLoss(1.5, 0.0, temperature=0.5)(x, lab)
    close(got, hcl_ref(x.double(), 0.5, 1.5, 0.0, labels=lab), dtype)


def test_hcl_debias_clamp_is_reached_and_finite() -> None:
    # collinear positives make pos large: the debiased mass hits the N e^{-1/tau} floor
    x = views(5, 2, 4, torch.float64)
    x[:, 1] = x[:, 0]
    x.requires_grad_(True)
    loss = HardNegativeLoss(1.0, 0.9, temperature=0.5)(x)
    close(loss.detach(), hcl_ref(x.detach(), 0.5, 1.0, 0.9), torch.float64)
    loss.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_debiased_is_hcl_with_beta_zero() -> None:
    x = views(6, 2, 5, torch.float64)
    got = DebiasedContrastiveLoss(0.2, temperature=0.5)(x)
    close(got, hcl_ref(x, 0.5, 0.0, 0.2), torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["out", "in"])
@pytest.mark.parametrize("v", [1, 2])
def test_supcon_matches_loop(dtype: torch.dtype, variant: str, v: int) -> None:
    x, lab = views(9, v, 5, dtype), labels_for(9, 3)
    close(SupConLoss(0.2, variant)(x, lab), supcon_ref(x.double(), lab, 0.2, variant), dtype)


def test_supcon_anchor_without_positive_is_left_out_not_nan() -> None:
    # PEERS: SupContrast gave NaN for an anchor without positive; we leave it out
    x = views(5, 1, 4, torch.float64)
    lab = torch.tensor([0, 0, 1, 1, 2])  # label 2 appears once with one view
    got = SupConLoss(0.5)(x, lab)
    close(got, supcon_ref(x, lab, 0.5, "out"), torch.float64)


def test_supcon_no_positive_anywhere_raises_instead_of_zero() -> None:
    # PEERS: pytorch-metric-learning silently returned 0 here
    x = views(4, 1, 3, torch.float64)
    with pytest.raises(ValueError, match="positive"):
        SupConLoss(0.5)(x, torch.arange(4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["out", "in"])
@pytest.mark.parametrize(("b", "v"), [(4, 2), (3, 3), (1, 4)])
def test_supcon_single_class_batch_is_defined_and_matches_loop(
    dtype: torch.dtype, variant: str, b: int, v: int
) -> None:
    # issue 18: SupCon's denominator holds the positives, so a one-class batch has a
    # finite loss (SupContrast computes it); values and gradients equal Khosla's loop
    x = views(b, v, 5, dtype, seed=3)
    lab = torch.full((b,), 7)
    a = x.clone().requires_grad_(True)
    ref_in = x.double().clone().requires_grad_(True)
    got = SupConLoss(0.2, variant)(a, lab)
    want = supcon_ref(ref_in, lab, 0.2, variant)
    close(got.detach(), want.detach(), dtype)
    got.backward()
    want.backward()
    assert a.grad is not None and ref_in.grad is not None
    tol = TOL[dtype] * max(1.0, float(ref_in.grad.abs().max()))
    assert float((a.grad.double() - ref_in.grad).abs().max()) <= tol
    if variant == "in":  # every positive is in the denominator: loss_a = log |P_a|
        assert abs(float(got.detach()) - math.log(b * v - 1)) <= TOL[dtype] * 10


def test_supcon_single_class_gradcheck_and_lower_bound() -> None:
    x = views(3, 2, 4, torch.float64, seed=5).requires_grad_(True)
    lab = torch.zeros(3, dtype=torch.long)
    loss = SupConLoss(0.5)
    assert torch.autograd.gradcheck(lambda t: loss(t, lab), (x,), eps=1e-6, atol=1e-7)
    # Jensen: L_out >= log |P_a| = log 5, tight when all views coincide
    assert float(loss(x, lab).detach()) > math.log(5)
    same = torch.ones(3, 2, 4, dtype=torch.float64)
    assert abs(float(loss(same, lab)) - math.log(5)) <= 1e-12


def test_single_class_batch_still_raises_for_losses_that_need_negatives() -> None:
    x = views(4, 2, 3, torch.float64)
    lab = torch.zeros(4, dtype=torch.long)
    for loss in (NSCLLoss(0.5), NSCLLoss(0.5, True), HardNegativeLoss(1.0, 0.0, 0.5)):
        with pytest.raises(ValueError, match="negative"):
            loss(x, lab)
    with pytest.raises(ValueError, match="at least 2 instances"):
        DecoupledContrastiveLoss(0.5)(x[:1])
    with pytest.raises(ValueError, match="positive"):  # one instance, one view: undefined
        SupConLoss(0.5)(x[:1, :1], lab[:1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pos_in_den", [False, True])
def test_nscl_matches_loop(dtype: torch.dtype, pos_in_den: bool) -> None:
    x, lab = views(8, 2, 5, dtype), labels_for(8, 3)
    got = NSCLLoss(0.5, positive_in_denominator=pos_in_den)(x, lab)
    close(got, nscl_ref(x.double(), lab, 0.5, pos_in_den), dtype)


def test_nscl_dcl_bound() -> None:
    # SPEC §3 on unit vectors with tau = 1: L_NSCL <= L_DCL (denominator grows)
    x, lab = views(12, 2, 6, torch.float64), labels_for(12, 4)
    assert float(NSCLLoss(1.0)(x, lab)) <= float(DecoupledContrastiveLoss(1.0)(x)) + 1e-12


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("supervised", [True, False])
@pytest.mark.parametrize("mode", ["ball", "sphere", "none"])
def test_sampled_hard_negative_matches_loop(
    dtype: torch.dtype, supervised: bool, mode: str
) -> None:
    x = views(8, 2, 4, dtype) * 0.7
    lab = labels_for(8, 3) if supervised else None
    gen = torch.Generator().manual_seed(5)
    state = gen.get_state()
    loss = SampledHardNegativeLoss(2.0, 3, normalize=mode, generator=gen)
    got = loss(x, labels=lab)
    # replay the same draw with the public sampler
    replay = torch.Generator()
    replay.set_state(state)
    scope = "class" if supervised else "all"
    z = x.reshape(16, 4)
    z = (
        z
        if mode == "none"
        else (z / z.norm(dim=-1, keepdim=True).clamp_min(1.0 if mode == "ball" else 0))
    )
    idx = TiltedNegativeSampler(2.0, 3, scope=scope, generator=replay)(
        z, None if lab is None else lab.repeat_interleave(2)
    )
    close(got, sampled_ref(x.double(), lab, idx, 1.0, mode), dtype)


def test_tilted_sampler_respects_scope_and_tilt() -> None:
    z = torch.nn.functional.normalize(torch.randn(6, 3, dtype=torch.float64), dim=1)
    lab = torch.tensor([0, 0, 1, 1, 2, 2])
    sampler = TiltedNegativeSampler(30.0, 4000, generator=torch.Generator().manual_seed(0))
    idx = sampler(z, lab)
    assert idx.shape == (6, 4000)
    assert (lab[idx] != lab.unsqueeze(1)).all()
    # empirical frequencies follow p ∝ exp(beta <z_i, z_j>) over other classes
    logits = (30.0 * z @ z.T).masked_fill(lab[:, None] == lab[None, :], -math.inf)
    probs = torch.softmax(logits, 1)
    freq = (
        torch.zeros(6, 6, dtype=torch.float64).scatter_add_(
            1, idx, torch.ones_like(idx, dtype=torch.float64)
        )
        / 4000
    )
    assert (freq - probs).abs().max() < 0.04


def test_sampler_state_travels_in_state_dict() -> None:
    z = torch.randn(8, 3)
    a = TiltedNegativeSampler(1.0, 5, scope="all", generator=torch.Generator().manual_seed(3))
    a(z)
    saved = a.state_dict()
    first = a(z)
    b = TiltedNegativeSampler(1.0, 5, scope="all")
    b.load_state_dict(saved)
    assert torch.equal(b(z), first)


# ---- SPEC §4 identities ---------------------------------------------------------------


@pytest.mark.parametrize("v", [2, 4])
def test_identity_hcl_beta0_tauplus0_is_ntxent(v: int) -> None:
    x = views(7, v, 5, torch.float64)
    assert abs(float(HardNegativeLoss(0.0, 0.0, 0.3)(x)) - float(NTXentLoss(0.3)(x))) < 1e-12


@pytest.mark.parametrize("v", [2, 3])
def test_identity_supcon_without_labels_is_ntxent(v: int) -> None:
    x = views(7, v, 5, torch.float64)
    for variant in ("out",):
        assert abs(float(SupConLoss(0.3, variant)(x)) - float(NTXentLoss(0.3)(x))) < 1e-12
    # instance ids as labels give the same number through the mask path
    ids = torch.arange(7)
    assert abs(float(SupConLoss(0.3)(x, ids)) - float(NTXentLoss(0.3)(x))) < 1e-12


def test_identity_decoupled_is_ntxent_without_positive_in_denominator() -> None:
    x = views(6, 2, 5, torch.float64)
    z = x / x.norm(dim=-1, keepdim=True)
    flatz = z.reshape(12, 5)
    s = flatz @ flatz.T / 0.5
    per = []
    for a in range(12):
        p = a ^ 1  # the other view
        den_nt = torch.logsumexp(torch.cat([s[a, :a], s[a, a + 1 :]]), 0)
        den_dcl = torch.log(torch.exp(den_nt) - torch.exp(s[a, p]))
        per.append(den_dcl - s[a, p])
    close(DecoupledContrastiveLoss(0.5)(x), sum(per) / 12, torch.float64)


@pytest.mark.parametrize("n", [2, 5, 33])
@pytest.mark.parametrize("tau", [0.1, 1.0])
def test_collinear_closed_form(n: int, tau: float) -> None:
    z = torch.ones(n, 2, 3, dtype=torch.float64)
    want = -math.log(1.0 / (2 * n - 1))
    assert abs(float(NTXentLoss(tau)(z)) - want) < 1e-12
    assert abs(float(SupConLoss(tau)(z)) - want) < 1e-12
    assert abs(float(HardNegativeLoss(3.0, 0.0, tau)(z)) - want) < 1e-12


def test_hcl_large_beta_small_tau_is_finite_in_float32() -> None:
    # PEERS: HCL's exponentiate-then-log reference overflows here
    x = views(16, 2, 8, torch.float32, seed=3).requires_grad_(True)
    loss = HardNegativeLoss(30.0, 0.1, temperature=0.05)(x)
    loss.backward()
    assert torch.isfinite(loss) and x.grad is not None and torch.isfinite(x.grad).all()
    ref = hcl_ref(x.detach().double(), 0.05, 30.0, 0.1)
    if torch.isfinite(ref):
        assert abs(float(loss.detach()) - float(ref)) < 1e-3 * max(1.0, abs(float(ref)))


# ---- gradients ------------------------------------------------------------------------

GRAD_CASES = [
    ("ntxent", lambda: NTXentLoss(0.5), False),
    ("dcl", lambda: DecoupledContrastiveLoss(0.5), False),
    ("debiased", lambda: DebiasedContrastiveLoss(0.1, 0.5), False),
    ("hcl", lambda: HardNegativeLoss(1.0, 0.1, 0.5), False),
    ("hscl", lambda: HardNegativeLoss(1.0, 0.0, 0.5), True),
    ("supcon_out", lambda: SupConLoss(0.5, "out"), True),
    ("supcon_in", lambda: SupConLoss(0.5, "in"), True),
    ("nscl", lambda: NSCLLoss(0.5), True),
    ("nscl_pos", lambda: NSCLLoss(0.5, positive_in_denominator=True), True),
]


@pytest.mark.parametrize(("name", "make", "supervised"), GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck(name: str, make, supervised: bool) -> None:
    x = views(5, 2, 3, torch.float64).requires_grad_(True)
    lab = torch.tensor([0, 1, 0, 2, 1]) if supervised else None
    loss = make()
    assert torch.autograd.gradcheck(lambda t: loss(t, lab), (x,), eps=1e-6, atol=1e-7)


def test_gradients_match_loop_reference() -> None:
    x = views(6, 3, 4, torch.float64)
    a = x.clone().requires_grad_(True)
    b = x.clone().requires_grad_(True)
    lab = labels_for(6, 2)
    SupConLoss(0.3, "in")(a, lab).backward()
    supcon_ref(b, lab, 0.3, "in").backward()
    assert a.grad is not None and b.grad is not None
    assert torch.allclose(a.grad, b.grad, atol=1e-10)


def test_sampled_gradcheck() -> None:
    x = views(6, 2, 3, torch.float64).requires_grad_(True)
    lab = torch.tensor([0, 1, 0, 2, 1, 2])

    def f(t: torch.Tensor) -> torch.Tensor:
        gen = torch.Generator().manual_seed(0)  # same draw on every call
        return SampledHardNegativeLoss(1.0, 4, generator=gen)(t, labels=lab)

    assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-7)


def test_hcl_detached_weights_gradient_matches_loop() -> None:
    x = views(5, 2, 3, torch.float64)
    a, b, c = (x.clone().requires_grad_(True) for _ in range(3))
    HardNegativeLoss(2.0, 0.1, 0.5, detach_weights=True)(a).backward()
    hcl_ref(b, 0.5, 2.0, 0.1, detach_imp=True).backward()
    HardNegativeLoss(2.0, 0.1, 0.5)(c).backward()
    assert a.grad is not None and b.grad is not None and c.grad is not None
    assert torch.allclose(a.grad, b.grad, atol=1e-10)
    assert not torch.allclose(a.grad, c.grad, atol=1e-6)


@pytest.mark.parametrize("variant", ["out", "in"])
def test_supcon_arbitrary_label_ids(variant: str) -> None:
    # negative and sparse ids give the same loss as their contiguous relabelling
    x = views(6, 2, 4, torch.float64)
    sparse = torch.tensor([-5, 1000, -5, 7, 1000, 7])
    dense = torch.tensor([0, 2, 0, 1, 2, 1])
    loss = SupConLoss(0.3, variant)
    close(loss(x, sparse), loss(x, dense), torch.float64)
    close(loss(x, sparse), supcon_ref(x, dense, 0.3, variant), torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tau", [0.01, 0.03, 0.2])  # fallback and fixed-shift logsumexp
@pytest.mark.parametrize("supervised", [False, True])
def test_fast_paths_match_generic_kernel(dtype: torch.dtype, tau: float, supervised: bool) -> None:
    from spacl.losses.kernel import GroupPositives, contrastive_kernel

    x = views(6, 2, 5, dtype, seed=11)
    z = (x / x.norm(dim=-1, keepdim=True)).reshape(12, 5)
    lab = labels_for(6, 3).repeat_interleave(2)
    self_index = torch.arange(12)
    if supervised:
        positives = GroupPositives.from_labels(lab, lab)
    else:
        positives = (self_index ^ 1).unsqueeze(1)  # the other view

    def run(fast: bool) -> tuple[torch.Tensor, torch.Tensor]:
        a = z.clone().requires_grad_(True)
        logits = (a / tau) @ a.T
        pos = positives
        if fast and isinstance(pos, GroupPositives):
            pos = pos.with_logit_sums(a / tau, a, self_index)
        out = contrastive_kernel(
            logits, pos, self_index=self_index, inplace=fast, logit_bound=1 / tau if fast else None
        ).mean()
        out.backward()
        assert a.grad is not None
        return out.detach(), a.grad

    (fast_v, fast_g), (slow_v, slow_g) = run(True), run(False)
    tol = TOL[dtype] * (50 if dtype == torch.float32 else 1)
    assert abs(float(fast_v) - float(slow_v)) <= tol * max(1.0, abs(float(slow_v)))
    assert torch.allclose(fast_g, slow_g, atol=tol * 100, rtol=tol * 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tau", [0.01, 0.1, 0.5])  # 0.01: float32 falls back to logits
@pytest.mark.parametrize("mode", ["sphere", "ball"])
@pytest.mark.parametrize("supervised", [False, True])
@pytest.mark.parametrize("blocks", [False, True])
def test_shared_fused_path_matches_loop_and_target_form(
    dtype: torch.dtype,
    tau: float,
    mode: str,
    supervised: bool,
    blocks: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # anchors == candidates takes the fused Gram log-sum-exp (one backward matmul);
    # targets=features (same tensor, not detached) takes the generic A @ C^T path.
    # blocks: the Gram matrix mirrored from its upper block triangle (4 rows a block)
    if blocks:
        from spacl.losses import _mirror

        monkeypatch.setattr(_mirror, "_BLOCK_ROWS", 4)
        monkeypatch.setattr(_mirror, "_MIN_ROWS", 8)
        monkeypatch.setattr(_mirror, "_MAX_THREADS", 1024)
    x = views(7, 3, 5, dtype, seed=5) * (1.5 if mode == "ball" else 1.0)
    lab = labels_for(7, 3) if supervised else None
    loss = SupConLoss(tau, normalize=mode)  # type: ignore[arg-type]
    a = x.clone().requires_grad_(True)
    b = x.clone().requires_grad_(True)
    fused = loss(a, lab)
    generic = loss(b, lab, targets=b)
    x64 = x.double()  # the loop reference overflows in float32 at tau = 0.01
    ref = supcon_ref(x64, lab, tau, "out") if supervised else ntxent_ref(x64, tau)
    if mode == "sphere":
        close(fused.double(), ref.to(dtype).double(), dtype)
    close(fused, generic, dtype)
    fused.backward()
    generic.backward()
    assert a.grad is not None and b.grad is not None
    tol = TOL[dtype] * (10 if dtype == torch.float32 else 1)
    assert torch.allclose(a.grad, b.grad, atol=tol, rtol=tol)


def hessian_vector(fn, x: torch.Tensor, seed: int = 3) -> torch.Tensor:
    """``H v`` of the scalar ``fn(x)`` for a fixed random direction ``v`` (double backward)."""
    direction = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(seed))
    a = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(fn(a), a, create_graph=True)
    (second,) = torch.autograd.grad((grad * direction).sum(), a)
    return second


def test_fused_path_double_backward_matches_loop_reference() -> None:
    # Hessian-vector products through the fused Gram log-sum-exp equal the loop's
    x = views(4, 2, 3, torch.float64)
    got = hessian_vector(NTXentLoss(0.5), x)
    assert torch.allclose(got, hessian_vector(lambda t: ntxent_ref(t, 0.5), x), atol=1e-10)


@pytest.mark.parametrize("tau", [0.5, 0.01])
def test_inplace_kernel_double_backward_matches_loop_reference(tau: float) -> None:
    # targets=... takes the generic path and its in-place self-excluded log-sum-exp
    x = views(4, 2, 3, torch.float64)
    t = views(4, 2, 3, torch.float64, seed=9)
    got = hessian_vector(lambda a: NTXentLoss(tau)(a, targets=t), x)
    want = hessian_vector(lambda a: ntxent_ref(a, tau, targets=t), x)
    assert torch.allclose(got, want, atol=1e-9)


@pytest.mark.parametrize("bound", [None, 2.0])  # row-max shift and fixed shift
def test_kernel_inplace_double_backward_matches_out_of_place(bound: float | None) -> None:
    from spacl.losses.kernel import contrastive_kernel

    z = views(5, 2, 3, torch.float64, seed=2).reshape(10, 3)
    z = z / z.norm(dim=1, keepdim=True)
    positives = (torch.arange(10) ^ 1).unsqueeze(1)

    def loss(inplace: bool):
        def fn(a: torch.Tensor) -> torch.Tensor:
            per_anchor = contrastive_kernel(
                (a / 0.5) @ z.T,
                positives,
                self_index=torch.arange(10),
                inplace=inplace,
                logit_bound=bound,
            )
            return per_anchor.mean()

        return fn

    assert torch.allclose(
        hessian_vector(loss(True), z, 4), hessian_vector(loss(False), z, 4), atol=1e-10
    )


def test_fused_path_keeps_full_precision_under_autocast() -> None:
    x = views(16, 2, 8, torch.float32, seed=4)
    labels = labels_for(16, 4)
    plain = SupConLoss(0.1)(x, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = SupConLoss(0.1)(x, labels)
    assert mixed.dtype == torch.float32
    assert abs(float(mixed) - float(plain)) < 1e-5
