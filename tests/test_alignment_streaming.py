"""CKAAccumulator: exact merges across batches, against the in-memory functions."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.alignment import CKAAccumulator, debiased_cka, linear_cka, minibatch_cka
from spacl.alignment._moments import PairMoments

F64 = torch.float64


def data(n: int, seed: int, offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g, dtype=F64) * torch.linspace(0.5, 3, 6, dtype=F64)
    y = x[:, :4] @ torch.randn(4, 5, generator=g, dtype=F64) + torch.randn(
        n, 5, generator=g, dtype=F64
    )
    return x + offset, y - 2 * offset


def fill(x: torch.Tensor, y: torch.Tensor, cuts: list[int]) -> CKAAccumulator:
    acc = CKAAccumulator()
    bounds = [0, *cuts, x.shape[0]]
    for a, b in itertools.pairwise(bounds):
        if b > a:
            acc.update(x[a:b], y[a:b])
    return acc


@pytest.mark.filterwarnings("ignore:.*fewer than 4 rows")
@settings(max_examples=20, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 119), max_size=6, unique=True).map(sorted),
    offset=st.sampled_from([0.0, 1e3]),
)
def test_any_batching_gives_the_full_data_answer(cuts: list[int], offset: float) -> None:
    x, y = data(120, seed=len(cuts), offset=offset)
    out = fill(x, y, cuts).compute()
    assert out["n"] == 120
    assert out["linear_cka"] == pytest.approx(linear_cka(x, y), abs=1e-10)
    assert out["debiased_cka"] == pytest.approx(debiased_cka(x, y), abs=1e-9)


def test_batches_with_very_different_means_merge_exactly() -> None:
    x, y = data(200, seed=1)
    # shift each half: a merge that used raw sums minus n*mean^2 would lose ~1e-8 of 1e8
    x2 = torch.cat([x[:100] + 1e4, x[100:] - 1e4])
    y2 = torch.cat([y[:100] - 1e4, y[100:] + 3e4])
    acc = fill(x2, y2, [37, 100, 150])
    assert acc.compute()["linear_cka"] == pytest.approx(linear_cka(x2, y2), abs=1e-10)
    assert acc.compute()["debiased_cka"] == pytest.approx(debiased_cka(x2, y2), abs=1e-9)


def test_recentring_matches_sums_about_the_new_centre() -> None:
    x, y = data(50, seed=2, offset=3.0)
    cx = torch.linspace(-1, 2, 6, dtype=F64)
    cy = torch.linspace(4, 1, 5, dtype=F64)
    shifted = PairMoments.from_batch(x, y).recentred(cx, cy)
    xt, yt = x - cx, y - cy  # the definitions, written out
    a, b = (xt * xt).sum(1), (yt * yt).sum(1)
    expected = {
        "cxx": xt.T @ xt, "cyy": yt.T @ yt, "cxy": xt.T @ yt,
        "qxx": (a * a).sum(), "qyy": (b * b).sum(), "qxy": (a * b).sum(),
        "ux": (a[:, None] * xt).sum(0), "uy": (b[:, None] * yt).sum(0),
        "vx": (b[:, None] * xt).sum(0), "vy": (a[:, None] * yt).sum(0),
    }  # fmt: skip
    for name, value in expected.items():
        torch.testing.assert_close(getattr(shifted, name), value, rtol=1e-11, atol=1e-9)


def test_merge_is_order_independent_and_matches_minibatch_cka() -> None:
    x, y = data(100, seed=3)
    a = fill(x[:60], y[:60], [20, 40])
    b = fill(x[60:], y[60:], [20])
    ab = fill(x[:60], y[:60], [20, 40]).merge(b).compute()
    ba = fill(x[60:], y[60:], [20]).merge(a).compute()
    for key in ("linear_cka", "debiased_cka", "minibatch_cka"):
        assert ab[key] == pytest.approx(ba[key], abs=1e-12)
    assert ab["minibatch_cka"] == pytest.approx(minibatch_cka(x, y, 20), abs=1e-12)


def test_small_batches_are_left_out_of_minibatch_cka_only() -> None:
    x, y = data(43, seed=4)
    acc = fill(x, y, [20, 40])  # last batch has 3 rows
    with pytest.warns(RuntimeWarning, match="fewer than 4 rows"):
        out = acc.compute()
    assert out["minibatch_cka"] == pytest.approx(minibatch_cka(x[:40], y[:40], 20), abs=1e-12)
    assert out["linear_cka"] == pytest.approx(linear_cka(x, y), abs=1e-12)


def test_all_reduce_without_distributed_is_a_no_op() -> None:
    x, y = data(30, seed=5)
    acc = fill(x, y, [10])
    before = acc.compute()
    assert acc.all_reduce().compute() == before


def test_errors() -> None:
    acc = CKAAccumulator()
    with pytest.raises(ValueError, match="at least 4 samples"):
        acc.compute()
    x, y = data(10, seed=6)
    acc.update(x[:3], y[:3])
    with pytest.raises(ValueError, match="at least 4 samples"):
        acc.compute()
    with pytest.raises(ValueError, match="feature dimensions changed"):
        acc.update(x[:, :2], y)
    with pytest.raises(ValueError, match="same number of rows"):
        acc.update(x, y[:5])
    with pytest.raises(ValueError, match="non-finite"):
        acc.update(x * math.inf, y)
    with pytest.raises(TypeError, match="CKAAccumulator"):
        acc.merge(object())  # type: ignore[arg-type]


def test_flatten_round_trip() -> None:
    x, y = data(12, seed=7)
    m = PairMoments.from_batch(x, y)
    back = PairMoments.unflatten(m.flatten(), 6, 5)
    torch.testing.assert_close(back.flatten(), m.flatten(), rtol=0, atol=0)
