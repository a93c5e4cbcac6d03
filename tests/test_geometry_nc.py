"""Neural-collapse metrics against loop references and a simplex-ETF fixture."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import spacl.geometry.inputs as inputs
from spacl.geometry import neural_collapse

F64 = torch.float64


def simplex_etf(c: int, d: int, seed: int = 0) -> torch.Tensor:
    """C unit vectors in R^d, zero sum, pairwise cosine -1/(C-1), randomly rotated."""
    m = (torch.eye(c, dtype=F64) - 1.0 / c) * math.sqrt(c / (c - 1))
    m = torch.cat([m, torch.zeros(c, d - c, dtype=F64)], 1)
    q, _ = torch.linalg.qr(
        torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=F64)
    )
    return m @ q


def labelled(
    c: int, per_class: int, d: int, spread: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(c).repeat_interleave(per_class)
    y = y[torch.randperm(len(y), generator=g)]
    centres = 3.0 * torch.randn(c, d, generator=g, dtype=F64)
    x = centres[y] + spread * torch.randn(len(y), d, generator=g, dtype=F64)
    return x, y


# ---------------------------------------------------------------- references (loops)
def reference(
    x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, b: np.ndarray | None = None
) -> dict:
    classes = sorted(set(y.tolist()))
    c, (n, d) = len(classes), x.shape
    means = np.stack([x[y == k].mean(0) for k in classes])
    mu_g = means.mean(0)
    sigma_w = np.zeros((d, d))
    for i in range(n):
        r = x[i] - means[classes.index(y[i])]
        sigma_w += np.outer(r, r)
    sigma_w /= n
    sigma_b = sum(np.outer(m - mu_g, m - mu_g) for m in means) / c
    lam, vec = np.linalg.eigh(sigma_b)
    top = np.argsort(lam)[::-1][: c - 1]
    pinv = sum(np.outer(vec[:, k], vec[:, k]) / lam[k] for k in top)
    out = {"nc1": np.trace(sigma_w @ pinv) / c}
    centred = means - mu_g
    norms = [np.linalg.norm(v) for v in centred]
    out["nc2_equinorm"] = np.std(norms) / np.mean(norms)
    cos = [
        centred[i] @ centred[j] / (norms[i] * norms[j])
        for i in range(c)
        for j in range(c)
        if i != j
    ]
    out["nc2_equiangularity"] = np.mean([abs(v + 1 / (c - 1)) for v in cos])
    g = centred @ centred.T
    out["nc2_etf_deviation"] = np.linalg.norm(
        g / np.linalg.norm(g) - (np.eye(c) - 1 / c) / np.sqrt(c - 1)
    )
    var = [
        np.mean([np.sum((v - means[k]) ** 2) for v in x[y == cl]]) for k, cl in enumerate(classes)
    ]
    pairs = [
        (var[i] + var[j]) / (2 * np.sum((means[i] - means[j]) ** 2))
        for i in range(c)
        for j in range(i + 1, c)
    ]
    out["cdnv"] = np.mean(pairs)
    out["nc_zero_sum"] = np.linalg.norm(means.mean(0))
    out["nc_unit_norm"] = np.mean([abs(np.linalg.norm(m) - 1) for m in means])
    raw = [
        means[i] @ means[j] / (np.linalg.norm(means[i]) * np.linalg.norm(means[j]))
        for i in range(c)
        for j in range(c)
        if i != j
    ]
    out["nc_equal_inner_product"] = np.mean([abs(v + 1 / (c - 1)) for v in raw])
    out["nc_within_class_distance"] = np.mean(
        [np.sum((x[i] - means[classes.index(y[i])]) ** 2) for i in range(n)]
    )
    if w is not None:
        wk = w[classes]
        out["nc3"] = np.sum((wk / np.linalg.norm(wk) - centred / np.linalg.norm(centred)) ** 2)
        disagree = 0
        for i in range(n):
            ncc = classes[int(np.argmin([np.sum((x[i] - m) ** 2) for m in means]))]
            clf = int(np.argmax(w @ x[i] + (0 if b is None else b)))
            disagree += ncc != clf
        out["nc4"] = disagree / n
    return out


# ---------------------------------------------------------------- fixtures with known answers
def test_simplex_etf_is_perfect_collapse() -> None:
    c, d = 6, 10
    etf = simplex_etf(c, d)
    y = torch.arange(c).repeat(7)
    out = neural_collapse(etf[y], y, classifier=etf)
    assert out["nc1"] < 1e-20
    for key in ("nc2_equinorm", "nc2_equiangularity", "nc2_etf_deviation"):
        assert out[key] < 1e-10, key
    for key in (
        "nc_zero_sum",
        "nc_unit_norm",
        "nc_equal_inner_product",
        "nc_within_class_distance",
    ):
        assert out[key] < 1e-10, key
    assert out["cdnv"] < 1e-20
    assert out["nc3"] < 1e-20  # self-dual classifier
    assert out["nc4"] == 0.0


def test_offset_etf_keeps_centred_metrics_but_not_uncentred_ones() -> None:
    etf = simplex_etf(4, 6) * 5.0 + 2.0
    y = torch.arange(4).repeat(3)
    out = neural_collapse(etf[y], y)
    assert out["nc2_etf_deviation"] < 1e-10 and out["nc2_equinorm"] < 1e-10
    assert out["nc_zero_sum"] == pytest.approx(2.0 * math.sqrt(6), rel=1e-12)
    assert out["nc_unit_norm"] > 1.0


def test_within_class_noise_scales_nc1_quadratically() -> None:
    etf = simplex_etf(5, 8)
    g = torch.Generator().manual_seed(1)
    y = torch.arange(5).repeat_interleave(40)
    noise = torch.randn(200, 8, generator=g, dtype=F64)
    small = neural_collapse(etf[y] + 0.01 * noise, y)["nc1"]
    large = neural_collapse(etf[y] + 0.1 * noise, y)["nc1"]
    assert 0 < small < large
    assert large / small == pytest.approx(100.0, rel=0.05)  # means move slightly too


# ---------------------------------------------------------------- loop references
@pytest.mark.parametrize(("c", "d"), [(4, 6), (7, 5), (3, 20)])
def test_metrics_equal_loop_reference(c: int, d: int) -> None:
    x, y = labelled(c, 9, d, spread=1.0, seed=c * d)
    y = y * 3 + 2  # non-contiguous label values
    out = neural_collapse(x, y)
    ref = reference(x.numpy(), y.numpy())
    for key, value in ref.items():
        assert out[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert out["num_classes"] == c


def test_classifier_metrics_equal_loop_reference() -> None:
    x, y = labelled(5, 12, 6, spread=2.5, seed=3)
    g = torch.Generator().manual_seed(4)
    layer = torch.nn.Linear(6, 7, dtype=F64)  # 7 rows: 2 classes never observed
    with torch.no_grad():
        layer.weight.copy_(torch.randn(7, 6, generator=g, dtype=F64))
        layer.bias.copy_(torch.randn(7, generator=g, dtype=F64))
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    ref = reference(x.numpy(), y.numpy(), w, b)
    out = neural_collapse(x, y, classifier=layer)
    assert out["nc3"] == pytest.approx(ref["nc3"], rel=1e-10)
    assert out["nc4"] == pytest.approx(ref["nc4"], abs=1e-15)
    assert 0 < out["nc4"] < 1
    no_bias = neural_collapse(x.numpy(), y.numpy(), classifier=w)
    assert no_bias["nc4"] == pytest.approx(reference(x.numpy(), y.numpy(), w)["nc4"], abs=1e-15)
    pair = neural_collapse(x, y, classifier=(layer.weight.detach(), layer.bias.detach()))
    assert pair["nc4"] == out["nc4"]


def test_float32_input_and_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = labelled(6, 10, 5, spread=0.5, seed=5)
    exact = neural_collapse(x, y)
    monkeypatch.setattr(inputs, "CHUNK_ELEMENTS", 7)
    chunked = neural_collapse(x, y)
    as_float = neural_collapse((x + 100.0).float(), y)
    shifted = neural_collapse(x + 100.0, y)
    for key in ("nc1", "nc2_etf_deviation", "cdnv", "nc_within_class_distance"):
        assert chunked[key] == pytest.approx(exact[key], rel=1e-12), key
        assert as_float[key] == pytest.approx(shifted[key], rel=1e-4), key
        assert shifted[key] == pytest.approx(exact[key], rel=1e-9), key


def test_few_dimensions_uses_the_top_pseudo_inverse() -> None:
    """d < C - 1: Sigma_B has rank d, the pseudo-inverse keeps the d non-zero eigenpairs."""
    x, y = labelled(6, 8, 3, spread=1.0, seed=6)
    out = neural_collapse(x, y)
    xs, ys = x.numpy(), y.numpy()
    means = np.stack([xs[ys == k].mean(0) for k in range(6)])
    sigma_b = np.cov((means - means.mean(0)).T, bias=True)
    resid = xs - means[ys]
    sigma_w = resid.T @ resid / len(xs)
    assert out["nc1"] == pytest.approx(np.trace(sigma_w @ np.linalg.pinv(sigma_b)) / 6, rel=1e-9)


# ---------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors() -> None:
    x, y = labelled(3, 4, 5, spread=1.0, seed=7)
    with pytest.raises(ValueError, match="at least 2 classes"):
        neural_collapse(x, torch.zeros(12, dtype=torch.int64))
    single = y.clone()
    single[0] = 99
    with pytest.raises(ValueError, match=r"at least 2 samples; class\(es\) \[99\]"):
        neural_collapse(x, single)
    with pytest.raises(ValueError, match="length 11"):
        neural_collapse(x, y[:11])
    with pytest.raises(TypeError, match="integer"):
        neural_collapse(x, y.double())
    with pytest.raises(ValueError, match="non-finite"):
        neural_collapse(x.masked_fill(x > 2, math.nan), y)
    with pytest.raises(ValueError, match="expected \\[K, 5\\]"):
        neural_collapse(x, y, classifier=torch.zeros(3, 4, dtype=F64))
    with pytest.raises(ValueError, match="labels must lie in \\[0, 2\\)"):
        neural_collapse(x, y, classifier=torch.zeros(2, 5, dtype=F64))


def test_coincident_means_give_nan_with_warning() -> None:
    rows = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]], dtype=F64)
    x = torch.cat([rows, rows])
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    with pytest.warns(RuntimeWarning, match="undefined"):
        out = neural_collapse(x, y)
    assert math.isnan(out["nc1"]) and math.isnan(out["cdnv"]) and math.isnan(out["nc2_equinorm"])
