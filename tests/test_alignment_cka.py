"""CKA in feature space against Gram-form references written here (float64)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import spacl.geometry.inputs as inputs
from spacl.alignment import debiased_cka, linear_cka, minibatch_cka, rbf_cka, unbiased_hsic

F64 = torch.float64


# ---------------------------------------------------------------- references (Gram form)
def centring(n: int) -> torch.Tensor:
    return torch.eye(n, dtype=F64) - torch.full((n, n), 1.0 / n, dtype=F64)


def gram_cka(k: torch.Tensor, l: torch.Tensor) -> float:
    """Kornblith et al. 2019: <HKH, HLH>_F / (||HKH||_F ||HLH||_F)."""
    h = centring(k.shape[0])
    kc, lc = h @ k @ h, h @ l @ h
    return float((kc * lc).sum() / (kc.norm() * lc.norm()))


def hsic_song(k: torch.Tensor, l: torch.Tensor) -> float:
    """Song et al. 2012 unbiased HSIC, written with explicit loops over the sums."""
    n = k.shape[0]
    kt, lt = k.clone(), l.clone()
    kt.fill_diagonal_(0)
    lt.fill_diagonal_(0)
    one = torch.ones(n, dtype=F64)
    trace = float((kt * lt).sum())
    middle = float(one @ kt @ one) * float(one @ lt @ one) / ((n - 1) * (n - 2))
    last = 2.0 / (n - 2) * float(one @ kt @ lt @ one)
    return (trace + middle - last) / (n * (n - 3))


def u_centre(k: torch.Tensor) -> torch.Tensor:
    """Szekely & Rizzo (2014) U-centring."""
    n = k.shape[0]
    kt = k.clone()
    kt.fill_diagonal_(0)
    row = kt.sum(1, keepdim=True) / (n - 2)
    col = kt.sum(0, keepdim=True) / (n - 2)
    total = kt.sum() / ((n - 1) * (n - 2))
    out = kt - row - col + total
    out.fill_diagonal_(0)
    return out


def hsic_u_centred(k: torch.Tensor, l: torch.Tensor) -> float:
    n = k.shape[0]
    return float((u_centre(k) * u_centre(l)).sum()) / (n * (n - 3))


def random_pair(
    n: int, dx: int, dy: int, seed: int, dtype=F64
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dx, generator=g, dtype=F64)
    mix = torch.randn(dx, dy, generator=g, dtype=F64)
    y = x @ mix + 0.7 * torch.randn(n, dy, generator=g, dtype=F64)
    return x.to(dtype), y.to(dtype)


# ---------------------------------------------------------------- linear CKA
@pytest.mark.parametrize(("n", "dx", "dy"), [(60, 5, 3), (40, 50, 70), (7, 3, 9)])
def test_linear_cka_equals_gram_form(n: int, dx: int, dy: int) -> None:
    x, y = random_pair(n, dx, dy, seed=n + dx)
    x = x + 3.0  # an offset: centring must be handled
    expected = gram_cka(x @ x.T, y @ y.T)
    assert linear_cka(x, y) == pytest.approx(expected, abs=1e-10)


def test_linear_cka_chunked_accumulation(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = random_pair(301, 6, 4, seed=1)
    full = linear_cka(x, y)
    monkeypatch.setattr(inputs, "CHUNK_ELEMENTS", 37)  # many tiny row chunks
    assert linear_cka(x, y) == pytest.approx(full, abs=1e-13)
    assert debiased_cka(x, y) == pytest.approx(
        hsic_song(x @ x.T, y @ y.T)
        / math.sqrt(hsic_song(x @ x.T, x @ x.T) * hsic_song(y @ y.T, y @ y.T)),
        abs=1e-10,
    )


def test_cka_of_itself_is_one() -> None:
    x, _ = random_pair(50, 8, 2, seed=2)
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-14)
    assert debiased_cka(x, x) == pytest.approx(1.0, abs=1e-14)
    assert rbf_cka(x, x) == pytest.approx(1.0, abs=1e-14)
    assert minibatch_cka(x, x, 10) == pytest.approx(1.0, abs=1e-14)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(1e-3, 1e3), shift=st.floats(-50, 50))
def test_cka_invariant_to_orthogonal_maps_and_isotropic_scaling(
    seed: int, scale: float, shift: float
) -> None:
    x, y = random_pair(30, 6, 5, seed)
    g = torch.Generator().manual_seed(seed + 1)
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=F64))
    moved = scale * (x @ q) + shift
    assert linear_cka(moved, y) == pytest.approx(linear_cka(x, y), abs=1e-10)
    assert debiased_cka(moved, y) == pytest.approx(debiased_cka(x, y), abs=1e-9)
    assert minibatch_cka(moved, y, 10) == pytest.approx(minibatch_cka(x, y, 10), abs=1e-9)
    assert rbf_cka(moved, y) == pytest.approx(rbf_cka(x, y), abs=1e-9)


def test_cka_not_invariant_to_anisotropic_scaling() -> None:
    x, y = random_pair(200, 4, 4, seed=3)
    stretch = torch.diag(torch.tensor([10.0, 1.0, 0.1, 0.01], dtype=F64))
    assert abs(linear_cka(x @ stretch, y) - linear_cka(x, y)) > 0.05
    assert abs(debiased_cka(x @ stretch, y) - debiased_cka(x, y)) > 0.05


def test_float32_with_mean_offset_matches_float64() -> None:
    x, y = random_pair(2000, 64, 32, seed=4)
    x64, y64 = x + 100.0, y - 100.0
    x32, y32 = x64.float(), y64.float()
    # the float64 reference on exactly the float32 values
    ref_x, ref_y = x32.double(), y32.double()
    assert abs(linear_cka(x32, y32) - linear_cka(ref_x, ref_y)) < 1e-5
    assert abs(debiased_cka(x32, y32) - debiased_cka(ref_x, ref_y)) < 1e-5
    assert abs(minibatch_cka(x32, y32, 256) - minibatch_cka(ref_x, ref_y, 256)) < 1e-5
    # against the float64 features before rounding (rounding at offset 100 is ~4e-6)
    assert abs(linear_cka(x32, y32) - linear_cka(x64, y64)) < 1e-5
    assert abs(debiased_cka(x32, y32) - debiased_cka(x64, y64)) < 1e-5
    assert abs(linear_cka(x64, y64) - linear_cka(x, y)) < 1e-12  # the offset changes nothing


def test_numpy_input() -> None:
    x, y = random_pair(30, 4, 3, seed=5)
    assert linear_cka(x.numpy(), y.numpy()) == pytest.approx(linear_cka(x, y), abs=1e-15)


# ---------------------------------------------------------------- unbiased HSIC / debiased CKA
@pytest.mark.parametrize(("n", "dx", "dy"), [(4, 3, 2), (25, 6, 9), (60, 40, 3)])
def test_unbiased_hsic_forms_agree(n: int, dx: int, dy: int) -> None:
    x, y = random_pair(n, dx, dy, seed=7 * n)
    x = x + 5.0
    k, l = x @ x.T, y @ y.T
    song = hsic_song(k, l)
    assert hsic_u_centred(k, l) == pytest.approx(song, rel=1e-10, abs=1e-12)
    assert unbiased_hsic(x, y) == pytest.approx(song, rel=1e-9, abs=1e-10)


def test_debiased_cka_equals_gram_form() -> None:
    x, y = random_pair(80, 10, 7, seed=8)
    k, l = x @ x.T, y @ y.T
    expected = hsic_song(k, l) / math.sqrt(hsic_song(k, k) * hsic_song(l, l))
    assert debiased_cka(x, y) == pytest.approx(expected, abs=1e-10)


def test_debiased_cka_can_be_negative_and_is_not_clamped() -> None:
    g = torch.Generator().manual_seed(9)
    values = [
        debiased_cka(
            torch.randn(12, 3, generator=g, dtype=F64), torch.randn(12, 3, generator=g, dtype=F64)
        )
        for _ in range(20)
    ]
    assert min(values) < 0  # independent features: the unbiased estimate straddles zero


# ---------------------------------------------------------------- minibatch CKA
def test_minibatch_cka_equals_loop_reference() -> None:
    x, y = random_pair(103, 5, 4, seed=10)
    hs = np.zeros(3)
    batches = [slice(i, i + 20) for i in range(0, 100, 20)]  # tail of 3 rows is dropped
    for rows in batches:
        k, l = x[rows] @ x[rows].T, y[rows] @ y[rows].T
        hs += [hsic_song(k, l), hsic_song(k, k), hsic_song(l, l)]
    expected = hs[0] / math.sqrt(hs[1] * hs[2])
    assert minibatch_cka(x, y, 20) == pytest.approx(expected, abs=1e-10)


def test_minibatch_cka_keeps_a_tail_of_four_or_more() -> None:
    x, y = random_pair(45, 5, 40, seed=11)  # wide Y: exercises the Gram-form branch
    hs = np.zeros(3)
    for rows in (slice(0, 20), slice(20, 40), slice(40, 45)):
        k, l = x[rows] @ x[rows].T, y[rows] @ y[rows].T
        hs += [hsic_song(k, l), hsic_song(k, k), hsic_song(l, l)]
    assert minibatch_cka(x, y, 20) == pytest.approx(hs[0] / math.sqrt(hs[1] * hs[2]), abs=1e-10)


def test_minibatch_cka_with_generator_is_a_permutation() -> None:
    x, y = random_pair(64, 5, 4, seed=12)
    g1 = torch.Generator().manual_seed(3)
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(3))
    assert minibatch_cka(x, y, 16, generator=g1) == pytest.approx(
        minibatch_cka(x[perm], y[perm], 16), abs=1e-14
    )


# ---------------------------------------------------------------- RBF CKA
def test_rbf_cka_equals_gram_form() -> None:
    x, y = random_pair(70, 4, 6, seed=13)

    def rbf(z: torch.Tensor, rel: float) -> torch.Tensor:
        sq = torch.cdist(z, z) ** 2
        iu = torch.triu_indices(len(z), len(z), 1)
        s2 = rel**2 * float(np.median(sq[iu[0], iu[1]].numpy()))
        return torch.exp(-sq / (2 * s2))

    assert rbf_cka(x, y, 0.5) == pytest.approx(gram_cka(rbf(x, 0.5), rbf(y, 0.5)), abs=1e-10)
    absolute = gram_cka(
        torch.exp(-(torch.cdist(x, x) ** 2) / 8), torch.exp(-(torch.cdist(y, y) ** 2) / 8)
    )
    assert rbf_cka(x, y, 2.0, relative=False) == pytest.approx(absolute, abs=1e-10)


def test_rbf_cka_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = random_pair(50, 4, 6, seed=14)
    full = rbf_cka(x, y)
    monkeypatch.setattr(inputs, "CHUNK_ELEMENTS", 200)
    assert rbf_cka(x, y) == pytest.approx(full, abs=1e-12)


# ---------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors() -> None:
    x, y = random_pair(10, 3, 2, seed=15)
    with pytest.raises(ValueError, match="same number of rows"):
        linear_cka(x, y[:9])
    with pytest.raises(ValueError, match="at least 4 rows"):
        debiased_cka(x[:3], y[:3])
    with pytest.raises(ValueError, match="at least 4 rows"):
        unbiased_hsic(x[:3], y[:3])
    with pytest.raises(ValueError, match="non-finite"):
        linear_cka(torch.where(x > 1, math.nan, x), y)
    with pytest.raises(ValueError, match="2 dimensions"):
        linear_cka(x[:, 0], y)
    with pytest.raises(TypeError, match="floating"):
        linear_cka(torch.ones(10, 3, dtype=torch.int64), y)
    with pytest.raises(TypeError, match=r"torch\.Tensor or numpy"):
        linear_cka([[1.0, 2.0]], y)
    with pytest.raises(ValueError, match="batch_size"):
        minibatch_cka(x, y, 3)
    with pytest.raises(ValueError, match="sigma"):
        rbf_cka(x, y, -1.0)


def test_degenerate_representation_gives_nan_with_warning() -> None:
    _x, y = random_pair(10, 3, 2, seed=16)
    constant = torch.ones(10, 3, dtype=F64)
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(linear_cka(constant, y))
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(debiased_cka(constant, y))
    with pytest.raises(ValueError, match="median"):
        rbf_cka(constant, y)
    # constant up to rounding: rows differ in the last bit only
    almost = torch.full((10, 3), 0.1, dtype=F64)
    almost[::2] = torch.nextafter(almost[::2], torch.ones_like(almost[::2]))
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(linear_cka(almost, y))
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(debiased_cka(y, almost))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_inputs_are_never_modified(dtype: torch.dtype) -> None:
    from spacl.alignment import CKAAccumulator, kernel_drift, rdm_drift, rsa

    x, y = random_pair(40, 5, 3, seed=17, dtype=dtype)
    keep_x, keep_y = x.clone(), y.clone()
    for fn in (linear_cka, debiased_cka, rbf_cka, unbiased_hsic, rsa, kernel_drift, rdm_drift):
        fn(x, y)
    rsa(x, y, rdm="sqeuclidean", method="spearman")
    minibatch_cka(x, y, 8, generator=torch.Generator().manual_seed(0))
    acc = CKAAccumulator()
    acc.update(x, y)
    assert torch.equal(x, keep_x) and torch.equal(y, keep_y)
