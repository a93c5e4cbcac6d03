"""The cut's compiled long-row passes (issue 19): the same selection as the eager passes.

One test compiles (inductor, tens of seconds once per process); where this machine
cannot compile, the fallback is tested and the compiled comparison is skipped with the
reason.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from loss_references import cut_loop
from spacl.mining.cut import RelativeThresholdNegatives
from spacl.mining.cut import compiled as cut_compiled
from spacl.mining.cut import threshold as negatives
from spacl.mining.cut.compiled import (
    NUM_BUCKETS,
    PASSES,
    CompiledPasses,
    bucket_histogram,
    bucket_masks,
)


def _long_rows(dtype: torch.dtype) -> torch.Tensor:
    """Rows of 2,000 keys (``-inf`` off the candidates): the shapes the cut meets.

    A spread row, a flat one, a coarse grid (ties at the threshold), a bunched bulk
    under a few outliers (the chosen bucket overflows: the next level), all keys equal,
    and a row like the link-prediction logits (most keys far above the cut's range).
    """
    g = torch.Generator().manual_seed(3)
    b, k = 6, 2000
    logits = torch.randn(b, k, generator=g, dtype=torch.float64)
    logits[0] *= 4.0
    logits[1] *= 1e-3
    logits[2] = (logits[2] * 4).round() / 4
    logits[3] = logits[3] * 1e-4 + 0.5
    logits[3, :5] += 4.0
    logits[4] = 0.25
    logits[5] = -6.0 + 0.3 * logits[5]
    keys = logits.to(dtype)
    keys[torch.rand(b, k, generator=g) < 0.05] = -math.inf
    return keys


def _assert_loop(kept: torch.Tensor, keys: torch.Tensor, share: float) -> None:
    for i in range(keys.shape[0]):
        cols = torch.isfinite(keys[i]).nonzero().squeeze(1).tolist()
        want = cut_loop([float(keys[i, c]) for c in cols], share, 1.0, "exp")
        assert [bool(kept[i, c]) for c in cols] == want, f"row {i}"
        assert not bool(kept[i][~torch.isfinite(keys[i])].any())


def test_compiled_cut_keeps_what_the_eager_cut_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(negatives, "WIDE_ROWS", 1000)  # KG rows are 14,542 wide
    for dtype in (torch.float32, torch.float64):
        keys = _long_rows(dtype)
        for share in (0.5, 0.95):
            eager = RelativeThresholdNegatives(share, "exp")
            compiled = RelativeThresholdNegatives(share, "exp", compiled=True)
            kept = compiled.select(keys, form="float")
            assert kept.dtype == dtype
            assert torch.equal(kept, eager.select(keys, form="float"))
            assert torch.equal(compiled.select(keys), eager.select(keys))
            if dtype == torch.float64:  # the loop's float64 weights are these keys' weights
                _assert_loop(kept.bool(), keys, share)
    if PASSES.failed is not None:
        pytest.skip(f"this machine cannot compile ({PASSES.failed}): the eager fallback ran")
    assert PASSES._compiled.keys() == {"histogram", "masks"}


def test_the_passes_are_the_eager_histogram_and_masks() -> None:
    """The plain functions against the eager path's operations: same buckets, sums, masks."""
    g = torch.Generator().manual_seed(5)
    keys = torch.randn(4, 3000, generator=g) * 3
    keys[:, :7] = -math.inf
    hi = keys.amax(1)
    lo = hi - 2.0  # most keys below the range: the last bucket, spread then summed
    scale = NUM_BUCKETS / (hi - lo)
    weights = (keys - hi.unsqueeze(1)).exp()
    position = (hi.unsqueeze(1) - keys).mul_(scale.unsqueeze(1)).clamp_(0, NUM_BUCKETS - 1)
    bucket = position.long()
    want = torch.zeros(4, NUM_BUCKETS, dtype=torch.float64)
    want.scatter_add_(1, bucket, weights.double())
    hist, total = bucket_histogram(keys, weights, hi, scale)
    assert hist.dtype == total.dtype == torch.float64
    # float64 sums of the same non-negative terms in another order: each within n ulps
    # of the exact sum (n = 3000 terms at most per row)
    bound = keys.shape[1] * torch.finfo(torch.float64).eps
    torch.testing.assert_close(hist, want, rtol=bound, atol=0.0)
    torch.testing.assert_close(total, weights.double().sum(1), rtol=bound, atol=0.0)
    assert torch.equal(hist > 0, want > 0)  # the same occupied buckets
    chosen = torch.tensor([0, 5, 700, NUM_BUCKETS - 1])
    keep, member = bucket_masks(keys, hi, scale, chosen)
    assert torch.equal(keep, (bucket < chosen.unsqueeze(1)).float())
    assert torch.equal(member, (bucket == chosen.unsqueeze(1)).float())


def test_a_failing_compiler_warns_once_and_runs_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("no C++ compiler\nsecond line")

    monkeypatch.setattr(cut_compiled.torch, "compile", broken)
    passes = CompiledPasses()
    keys = torch.randn(2, 50)
    hi, scale = keys.amax(1), torch.full((2,), 100.0)
    weights = (keys - hi.unsqueeze(1)).exp()
    with pytest.warns(RuntimeWarning, match=r"no C\+\+ compiler\); using the eager passes"):
        hist, total = passes.histogram(keys, weights, hi, scale)
    assert passes.failed == "RuntimeError: no C++ compiler"
    want = bucket_histogram(keys, weights, hi, scale)
    assert torch.equal(hist, want[0]) and torch.equal(total, want[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: the eager passes now, silently
        keep, _ = passes.masks(keys, hi, scale, torch.tensor([3, 9]))
    assert torch.equal(keep, bucket_masks(keys, hi, scale, torch.tensor([3, 9]))[0])


def test_compiled_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="compiled must be a bool"):
        RelativeThresholdNegatives(0.9, "exp", compiled="yes")  # type: ignore[arg-type]
    assert "compiled=True" in repr(RelativeThresholdNegatives(0.9, "exp", compiled=True))


@pytest.mark.parametrize("density", [0.0, 0.002, 0.3, 1.0])
def test_sparse_nonzero_equals_nonzero_on_every_layout(density: float) -> None:
    """The word-wise ``nonzero`` of the long-row cut's bucket members gives the pairs of
    ``Tensor.nonzero`` in the same order: contiguous masks with ``K % 8`` zero or not,
    column slices of a wider mask (bytes past the view set: left out), row slices,
    transposes, :func:`padded_bool` views and empty masks."""
    from spacl.mining.cut.sparse import padded_bool, sparse_nonzero

    gen = torch.Generator().manual_seed(int(density * 1000))
    wide = torch.rand(37, 72, generator=gen) < density  # rows at 72 bytes: read in place
    layouts = {
        "contiguous, K % 8 != 0": wide[:, :71].contiguous(),
        "contiguous, K % 8 == 0": wide[:, :64].contiguous(),
        "column slice from 0": wide[:, :13],
        "column slice at 8": wide[:, 8:21],
        "column slice at 3": wide[:, 3:40],
        "row slice": wide[5:, :64],
        "strided rows": wide[::3, :40],
        "transpose": wide.t(),
        "padded_bool": padded_bool(wide[:, :29].float()),
        "one column": wide[:, 5:6],
        "no rows": wide[:0],
        "no columns": wide[:, :0],
    }
    for name, mask in layouts.items():
        want = mask.nonzero(as_tuple=True)
        got = sparse_nonzero(mask)
        assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True)), name
    with pytest.raises(ValueError, match="2-D bool"):
        sparse_nonzero(wide.float())


def test_first_at_least_is_the_first_crossing_of_a_running_sum() -> None:
    """The binary search that picks the chosen bucket gives the first column whose running
    sum reaches the target (equality included), the last column when none does, on rows
    with zero weights (flat runs) and exact hits."""
    from spacl.mining.cut.exact import _first_at_least

    gen = torch.Generator().manual_seed(3)
    for _ in range(100):
        b, n = (int(torch.randint(1, 12, (1,), generator=gen)) for _ in range(2))
        w = torch.rand(b, n, generator=gen, dtype=torch.float64)
        w[torch.rand(b, n, generator=gen) < 0.4] = 0.0
        cum = w.cumsum(1)
        target = torch.rand(b, generator=gen, dtype=torch.float64) * 1.3 * cum[:, -1]
        target[0] = cum[0, n // 2]  # an exact hit of a (possibly flat) running sum
        want = [
            next((j for j in range(n) if float(cum[r, j]) >= float(target[r])), n - 1)
            for r in range(b)
        ]
        assert _first_at_least(cum, target).tolist() == want
