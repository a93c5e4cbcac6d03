"""VarConLoss and MaskConLoss against loops over the papers' formulas (float64, 1e-10)."""

from __future__ import annotations

import math

import pytest
import torch

from spacl.losses import MaskConLoss, VarConLoss

F64 = torch.float64


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


# ----------------------------------------------------------------------------- VarCon
def varcon_ref(views, labels, tau1, eps, normalize=True):
    """Eqs. 7-13 of Wang et al. (2025), one row at a time."""
    b, v, _ = views.shape
    rows = [_unit(views[i, j]) if normalize else views[i, j] for i in range(b) for j in range(v)]
    ys = [int(labels[i]) for i in range(b) for _ in range(v)]
    classes = sorted(set(ys))
    cents = {}
    for c in classes:
        members = [rows[r] for r in range(len(rows)) if ys[r] == c]
        mean = sum(members) / len(members)
        cents[c] = (_unit(mean) if normalize else mean).detach()
    total = []
    for r, z in enumerate(rows):
        logits = {c: (z @ cents[c]) / tau1 for c in classes}
        den = sum(torch.exp(logits[c]) for c in classes)
        p = {c: torch.exp(logits[c]) / den for c in classes}
        tau2 = (tau1 - eps) + 2 * eps * p[ys[r]]
        q_exp = {
            c: (torch.exp(1 / tau2) if c == ys[r] else torch.ones((), dtype=z.dtype))
            for c in classes
        }
        q_sum = sum(q_exp.values())
        q = {c: q_exp[c] / q_sum for c in classes}
        kl = sum(q[c] * (torch.log(q[c]) - torch.log(p[c])) for c in classes)
        total.append(kl - torch.log(p[ys[r]]))
    return sum(total) / len(total)


def _batch(seed=0, b=6, v=2, d=5, classes=3):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(b, v, d, dtype=F64, generator=g)
    y = torch.arange(b) % classes
    return z, y[torch.randperm(b, generator=g)]


@pytest.mark.parametrize("v", [1, 2, 3])
def test_varcon_equals_the_loop_reference(v):
    z, y = _batch(v=v)
    for tau, eps in ((0.1, 0.02), (0.5, 0.3), (0.2, 0.0)):
        got = VarConLoss(tau, eps)(z, y)
        assert abs(float(got - varcon_ref(z, y, tau, eps))) < 1e-10


def test_varcon_gradient_equals_the_loop_reference():
    z, y = _batch(1)
    a = z.clone().requires_grad_(True)
    b = z.clone().requires_grad_(True)
    VarConLoss(0.3, 0.1)(a, y).backward()
    varcon_ref(b, y, 0.3, 0.1).backward()
    assert float((a.grad - b.grad).abs().max()) < 1e-10
    # detached centroids are not the numerical derivative: check the undetached loss
    x = z.clone().requires_grad_(True)
    full = VarConLoss(0.3, 0.1, detach_centroids=False)
    assert torch.autograd.gradcheck(lambda t: full(t, y), (x,))


def test_varcon_two_view_form_unnormalised_and_small_temperature():
    z, y = _batch(2)
    loss = VarConLoss(0.2, 0.05)
    assert torch.equal(loss(z[:, 0], z[:, 1], labels=y), loss(z, y))
    got = VarConLoss(0.4, 0.1, normalize="none")(z * 0.3, y)
    assert abs(float(got - varcon_ref(z * 0.3, y, 0.4, 0.1, normalize=False))) < 1e-10
    tiny = VarConLoss(0.005, 0.001)(z.float(), y)  # exp(1/tau2) overflows float32
    assert torch.isfinite(tiny)


def test_varcon_detach_confidence_changes_only_the_gradient():
    z, y = _batch(3)
    a = z.clone().requires_grad_(True)
    b = z.clone().requires_grad_(True)
    la, lb = VarConLoss(0.2, 0.1)(a, y), VarConLoss(0.2, 0.1, detach_confidence=True)(b, y)
    assert torch.equal(la, lb)
    la.backward()
    lb.backward()
    assert float((a.grad - b.grad).abs().max()) > 1e-8


def test_varcon_bad_input():
    with pytest.raises(ValueError, match="epsilon"):
        VarConLoss(0.1, 0.1)
    with pytest.raises(ValueError, match="temperature"):
        VarConLoss(0.0)
    z, _ = _batch()
    with pytest.raises(ValueError, match="needs labels"):
        VarConLoss()(z)
    with pytest.raises(ValueError, match="2 classes"):
        VarConLoss()(z, torch.zeros(6, dtype=torch.long))


# ---------------------------------------------------------------------------- MaskCon
def maskcon_ref(q_rows, k_rows, y, queue, queue_y, t1, t2, w, in_batch=True):
    """Feng & Patras (2023): candidates, masked soft targets and the cross-entropy, by loops."""
    b = q_rows.shape[0]
    total = []
    for i in range(b):
        qi, ki = _unit(q_rows[i]), _unit(k_rows[i]).detach()
        cands = [ki]
        cy = [int(y[i])]
        if in_batch:
            cands += [_unit(k_rows[j]).detach() for j in range(b) if j != i]
            cy += [int(y[j]) for j in range(b) if j != i]
        cands += [_unit(queue[j]) for j in range(queue.shape[0])]
        cy += [int(queue_y[j]) for j in range(queue.shape[0])]
        same = [j for j in range(1, len(cands)) if cy[j] == int(y[i])]
        t = [0.0] * len(cands)
        if same:
            top = max(float(ki @ cands[j]) / t2 for j in same)
            for j in same:
                t[j] = math.exp(float(ki @ cands[j]) / t2 - top)
        t[0] = 1.0
        s = sum(t)
        z = [w * tj / s + (1 - w) * (1.0 if j == 0 else 0.0) for j, tj in enumerate(t)]
        logits = [qi @ c / t1 for c in cands]
        den = sum(torch.exp(x) for x in logits)
        total.append(-sum(z[j] * torch.log(torch.exp(logits[j]) / den) for j in range(len(cands))))
    return total


def _weak(seed=0, b=6, v=2, d=5, q=7):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(b, v, d, dtype=F64, generator=g)
    t = torch.randn(b, v, d, dtype=F64, generator=g)
    y = torch.randint(0, 3, (b,), generator=g)
    queue = torch.randn(q, d, dtype=F64, generator=g)
    qy = torch.randint(0, 3, (q,), generator=g)
    return z, t, y, queue, qy


def test_maskcon_equals_the_loop_reference():
    z, t, y, queue, qy = _weak()
    for in_batch in (True, False):
        loss = MaskConLoss(0.2, 0.1, 0.6, in_batch_keys=in_batch)
        got = loss(z, y, targets=t, extra_negatives=queue, extra_negative_labels=qy)
        ref = maskcon_ref(z[:, 0], t[:, 1], y, queue, qy, 0.2, 0.1, 0.6, in_batch)
        ref += maskcon_ref(z[:, 1], t[:, 0], y, queue, qy, 0.2, 0.1, 0.6, in_batch)
        assert abs(float(got - sum(ref) / len(ref))) < 1e-10
        one = MaskConLoss(0.2, 0.1, 0.6, in_batch_keys=in_batch, anchor_mode="one")(
            z, y, targets=t, extra_negatives=queue, extra_negative_labels=qy
        )
        ref1 = maskcon_ref(z[:, 0], t[:, 1], y, queue, qy, 0.2, 0.1, 0.6, in_batch)
        assert abs(float(one - sum(ref1) / len(ref1))) < 1e-10


def test_maskcon_gradient_reaches_only_the_queries():
    z, t, y, queue, qy = _weak(1)
    a = z.clone().requires_grad_(True)
    b = z.clone().requires_grad_(True)
    MaskConLoss()(a, y, targets=t, extra_negatives=queue, extra_negative_labels=qy).backward()
    ref = maskcon_ref(b[:, 0], t[:, 1], y, queue, qy, 0.1, 0.05, 0.5)
    ref += maskcon_ref(b[:, 1], t[:, 0], y, queue, qy, 0.1, 0.05, 0.5)
    (sum(ref) / len(ref)).backward()
    assert float((a.grad - b.grad).abs().max()) < 1e-10


def test_maskcon_weight_zero_is_infonce_and_no_targets_uses_detached_keys():
    z, t, y, queue, qy = _weak(2)
    got = MaskConLoss(0.3, 0.1, 0.0)(z, y, targets=t)  # no queue: in-batch keys only
    q0, k1 = _unit(z[:, 0]), _unit(t[:, 1])
    q1, k0 = _unit(z[:, 1]), _unit(t[:, 0])
    lse0 = torch.logsumexp(q0 @ k1.T / 0.3, 1) - (q0 * k1).sum(1) / 0.3
    lse1 = torch.logsumexp(q1 @ k0.T / 0.3, 1) - (q1 * k0).sum(1) / 0.3
    assert abs(float(got - torch.cat((lse0, lse1)).mean())) < 1e-10
    x = z.clone().requires_grad_(True)
    MaskConLoss()(x, y).backward()  # keys = detached features of the other view
    ref_x = z.clone().requires_grad_(True)
    refs = maskcon_ref(ref_x[:, 0], z[:, 1], y, queue[:0], qy[:0], 0.1, 0.05, 0.5)
    refs += maskcon_ref(ref_x[:, 1], z[:, 0], y, queue[:0], qy[:0], 0.1, 0.05, 0.5)
    (sum(refs) / len(refs)).backward()
    assert float((x.grad - ref_x.grad).abs().max()) < 1e-10


def test_maskcon_bad_input():
    z, _, y, _, _ = _weak()
    with pytest.raises(ValueError, match="coarse"):
        MaskConLoss()(z)
    with pytest.raises(ValueError, match="non-empty key queue"):
        MaskConLoss(in_batch_keys=False)(z, y)
    with pytest.raises(ValueError, match="weight"):
        MaskConLoss(weight=1.5)
    with pytest.raises(ValueError, match="V >= 2"):
        MaskConLoss()(z[:, :1], y)
