"""Dynamic anchor and farthest-point positives against slow loop references (SPEC §1.2)."""

from __future__ import annotations

import math

import pytest
import torch

from spacl.mining import DynamicAnchor, FarthestPointPositives, hardness

DTYPES = (torch.float32, torch.float64)


# -- slow references -----------------------------------------------------------------------
def dissimilarity_ref(u: torch.Tensor, v: torch.Tensor) -> float:
    uu = [float(x) for x in u]
    vv = [float(x) for x in v]
    nu = math.sqrt(sum(x * x for x in uu))
    nv = math.sqrt(sum(x * x for x in vv))
    return 1.0 - sum(a * b for a, b in zip(uu, vv, strict=True)) / (nu * nv)


def hardness_ref(pool_i: torch.Tensor) -> list[float]:
    v = pool_i.shape[0]
    return [
        sum(dissimilarity_ref(pool_i[u], pool_i[w]) for w in range(v) if w != u) / (v - 1)
        for u in range(v)
    ]


def anchor_ref(pool_i: torch.Tensor) -> int:
    h = hardness_ref(pool_i)
    best = 0
    for u in range(1, len(h)):
        if h[u] > h[best]:  # strict: ties keep the lowest index
            best = u
    return best


def farthest_ref(cands: torch.Tensor, allowed: list[int], start: int, k: int) -> list[int]:
    """Greedy farthest point over ``allowed`` candidate rows, from ``start``."""
    chosen = [start]
    out = []
    for _ in range(k):
        best, best_val = None, -math.inf
        for u in allowed:
            if u in chosen:
                continue
            val = min(dissimilarity_ref(cands[u], cands[s]) for s in chosen)
            if val > best_val:  # strict: ties keep the lowest index
                best, best_val = u, val
        assert best is not None
        chosen.append(best)
        out.append(best)
    return out


def random_pool(b: int, v: int, d: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    centre = torch.randn(b, 1, d, generator=g, dtype=torch.float64)
    return (centre + 0.8 * torch.randn(b, v, d, generator=g, dtype=torch.float64)).to(dtype)


# -- hardness and anchor -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_hardness_matches_loop(dtype: torch.dtype) -> None:
    pool = random_pool(6, 5, 7, dtype, seed=1)
    h = hardness(pool)
    for i in range(pool.shape[0]):
        want = torch.tensor(hardness_ref(pool[i]), dtype=torch.float64)
        tol = 1e-12 if dtype == torch.float64 else 1e-5
        torch.testing.assert_close(h[i].double(), want, rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_dynamic_anchor_matches_loop(dtype: torch.dtype, seed: int) -> None:
    pool = random_pool(16, 5, 8, dtype, seed)
    got = DynamicAnchor()(pool)
    assert got.dtype == torch.long and got.shape == (16,)
    assert got.tolist() == [anchor_ref(pool[i]) for i in range(16)]


def test_dynamic_anchor_is_scale_invariant_and_picks_the_outlier() -> None:
    pool = random_pool(8, 5, 6, torch.float64, seed=3) * 0.01
    pool[:, 3] = -pool[:, 0] * 50.0  # the antipode of view 0 is far from everything
    a = DynamicAnchor()(pool * torch.rand(8, 5, 1, dtype=torch.float64).add(0.5))
    assert a.tolist() == [anchor_ref(pool[i]) for i in range(8)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_anchor_ties_go_to_lowest_index(dtype: torch.dtype) -> None:
    # duplicated hardest view: the first copy wins; orthonormal pool: every view ties
    g = torch.Generator().manual_seed(5)
    c = torch.randn(6, generator=g, dtype=dtype)
    x, y, z = c + 0.1 * torch.randn(3, 6, generator=g, dtype=dtype)
    far = -c
    dup = torch.stack([x, far, y, far.clone(), z])
    basis = torch.eye(5, 6, dtype=dtype)
    same = x.expand(5, 6).clone()
    pool = torch.stack([dup, basis, same])
    got = DynamicAnchor()(pool).tolist()
    assert got == [anchor_ref(pool[i]) for i in range(3)]
    assert got == [1, 0, 0]
    h = hardness(pool)
    assert h[0, 1] == h[0, 3]  # exact tie, not merely close
    assert torch.all(h[1] == h[1, 0])


# -- farthest point ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_positives", [1, 2, 4])
def test_farthest_point_matches_loop(dtype: torch.dtype, num_positives: int) -> None:
    pool = random_pool(12, 5, 8, dtype, seed=num_positives)
    anchor = DynamicAnchor()(pool)
    got = FarthestPointPositives(num_positives)(pool, anchor)
    assert got.shape == (12, num_positives) and got.dtype == torch.long
    for i in range(12):
        want = farthest_ref(pool[i], list(range(5)), int(anchor[i]), num_positives)
        assert got[i].tolist() == want
    assert not (got == anchor.unsqueeze(1)).any()  # the anchor is never a positive


def test_farthest_point_from_any_start() -> None:
    pool = random_pool(10, 6, 5, torch.float64, seed=9)
    start = torch.arange(10) % 6
    got = FarthestPointPositives(3)(pool, start)
    for i in range(10):
        assert got[i].tolist() == farthest_ref(pool[i], list(range(6)), int(start[i]), 3)


def test_farthest_point_ties_go_to_lowest_index() -> None:
    # orthonormal views are all at distance exactly 1: order is 1, 2, ... from anchor 0;
    # a duplicate of the anchor is at distance 0 and comes last
    e = torch.eye(6, dtype=torch.float64)
    pool = torch.stack(
        [
            torch.stack([e[0], e[1], e[2], e[3], e[4]]),
            torch.stack([e[0], e[0], e[2], -e[0], e[2]]),
        ]
    )
    got = FarthestPointPositives(4)(pool, torch.tensor([0, 0]))
    assert got[0].tolist() == [1, 2, 3, 4]
    assert got[1].tolist() == [3, 2, 1, 4]
    for i in range(2):
        assert got[i].tolist() == farthest_ref(pool[i], list(range(5)), 0, 4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_farthest_point_class_pool_matches_loop(dtype: torch.dtype) -> None:
    b, v, d = 10, 3, 6
    pool = random_pool(b, v, d, dtype, seed=11)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 2, 2, 1, 0])
    anchor = DynamicAnchor()(pool)
    got = FarthestPointPositives(4, positive_pool="class")(pool, anchor, labels)
    flat = pool.reshape(b * v, d)
    for i in range(b):
        allowed = [r for r in range(b * v) if labels[r // v] == labels[i]]
        want = farthest_ref(flat, allowed, i * v + int(anchor[i]), 4)
        assert got[i].tolist() == want
        assert all(labels[r // v] == labels[i] for r in got[i].tolist())


# -- bad input -----------------------------------------------------------------------------
def test_pool_too_small_names_num_positives() -> None:
    pool = torch.randn(4, 2, 3)
    with pytest.raises(ValueError, match="num_positives=2"):
        FarthestPointPositives(2)(pool, torch.zeros(4, dtype=torch.long))


def test_class_pool_too_small_names_instance() -> None:
    pool = torch.randn(3, 1, 3)
    labels = torch.tensor([0, 0, 1])
    with pytest.raises(ValueError, match="instance 2"):
        FarthestPointPositives(1, positive_pool="class")(
            pool, torch.zeros(3, dtype=torch.long), labels
        )


def test_bad_inputs() -> None:
    miner = FarthestPointPositives(1)
    with pytest.raises(ValueError, match="at least 2"):
        DynamicAnchor()(torch.randn(4, 1, 3))
    with pytest.raises(ValueError, match="non-finite"):
        DynamicAnchor()(torch.full((2, 3, 4), math.nan))
    with pytest.raises(ValueError, match="3 dimensions"):
        DynamicAnchor()(torch.randn(4, 3))
    with pytest.raises(ValueError, match="outside"):
        miner(torch.randn(2, 3, 4), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="shape"):
        miner(torch.randn(2, 3, 4), torch.tensor([0, 1, 2]))
    with pytest.raises(TypeError, match="integer"):
        miner(torch.randn(2, 3, 4), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="needs labels"):
        FarthestPointPositives(1, "class")(torch.randn(2, 3, 4), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="length 3"):
        FarthestPointPositives(1, "class")(
            torch.randn(2, 3, 4), torch.tensor([0, 1]), torch.tensor([0, 1, 1])
        )
    with pytest.raises(ValueError, match="num_positives"):
        FarthestPointPositives(0)
    with pytest.raises(ValueError, match="positive_pool"):
        FarthestPointPositives(1, "batch")
