"""The cut's CPU kernel (spacl.mining.cut.kernel) against the tensor path and a loop.

The kernel settles a row where its prefix ends within the row's 128 largest keys; the
tensor fast path and the exact selection take the same rows elsewhere.  Both must keep
exactly the same entries (ties included) for every mass, dtype and share.
"""

from __future__ import annotations

import types

import pytest
import torch

from spacl.mining import RelativeThresholdNegatives
from spacl.mining.cut import kernel as cut_kernel

MASSES = ("similarity", "exp", "linear")
DTYPES = (torch.float32, torch.float64)


def masks_both_paths(
    cut: RelativeThresholdNegatives, keys: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> tuple[torch.Tensor, torch.Tensor]:
    with monkeypatch.context() as m:
        m.setattr(cut_kernel, "ENABLED", True)
        kernel = cut.select(keys)
    with monkeypatch.context() as m:
        m.setattr(cut_kernel, "ENABLED", False)
        tensor = cut.select(keys)
    return kernel, tensor


def stable_prefix(
    keys: torch.Tensor, weights: torch.Tensor, target: torch.Tensor
) -> list[list[int] | None]:
    """Per row: the shortest prefix of a stable sort by decreasing key whose running
    float64 weight (added one by one) reaches the target; ``None`` if none does."""
    out: list[list[int] | None] = []
    for i in range(keys.shape[0]):
        order = sorted(
            (j for j in range(keys.shape[1]) if keys[i, j] > -torch.inf),
            key=lambda j: -float(keys[i, j]),
        )
        acc, kept = 0.0, None
        for n, j in enumerate(order):
            acc += float(weights[i, j])
            if acc >= float(target[i]):
                kept = order[: n + 1]
                break
        out.append(kept)
    return out


def candidate_keys(b: int, k: int, dtype: torch.dtype, seed: int, ties: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    keys = torch.randn(b, k, generator=g, dtype=torch.float64) * 3.0 + 0.5
    if ties:
        keys = keys.round()  # many equal keys, some exactly at the threshold
    keys = keys.to(dtype)
    keys[torch.rand(b, k, generator=g) < 0.1] = -torch.inf  # not candidates
    keys[0] = -torch.inf  # a row without candidates
    keys[1] = -1.0  # a total <= 0 under "similarity"
    return keys


def test_the_kernel_compiles_and_serves_cpu_float_keys() -> None:
    keys = torch.tensor([[3.0, 1.0, -torch.inf, 2.0]])
    assert cut_kernel.applies(keys, "exp")
    wide = torch.zeros(2, 5000)
    assert cut_kernel.applies(wide, "similarity")
    assert not cut_kernel.applies(wide, "exp")  # long rows' own selection
    assert not cut_kernel.applies(wide, "linear")
    out = cut_kernel.row_prefixes(
        keys, keys.amax(1), None, "similarity", 1.0, torch.tensor([4.0], dtype=torch.float64), None
    )
    assert out is not None, "the kernel failed to compile"
    cols, kept, done = out
    assert done.tolist() == [True]
    assert cols[0][kept[0]].tolist() == [0, 3]  # 3 + 2 >= 4, in decreasing order
    assert not cut_kernel.applies(keys.half(), "similarity")
    assert not cut_kernel.applies(keys.to(torch.int64), "similarity")


@pytest.mark.parametrize("mass", MASSES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("share", [0.1, 0.5, 0.95, 0.999])
@pytest.mark.parametrize("ties", [False, True])
def test_kernel_and_tensor_path_keep_the_same_entries(
    mass: str, dtype: torch.dtype, share: float, ties: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = RelativeThresholdNegatives(share, mass, temperature=0.5)
    for seed, (b, k) in enumerate([(24, 300), (12, 1500), (6, 40)]):
        keys = candidate_keys(b, k, dtype, seed, ties)
        kernel, tensor = masks_both_paths(cut, keys, monkeypatch)
        assert torch.equal(kernel, tensor), (mass, dtype, share, ties, b, k)


@pytest.mark.parametrize("mass", MASSES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_settled_rows_are_the_stable_sort_prefix(mass: str, dtype: torch.dtype) -> None:
    keys = candidate_keys(16, 500, dtype, 7, ties=True)
    tau = 0.5
    share = 0.1 if mass == "linear" else 0.9  # short prefixes: rows the kernel settles
    cut = RelativeThresholdNegatives(share, mass, temperature=tau)
    raw_max = keys.amax(1)
    row_max = torch.where(torch.isfinite(raw_max), raw_max, 0.0)
    total, exp_weights = cut._total_and_weights(keys, None, row_max, None)
    target = share * total
    out = cut_kernel.row_prefixes(keys, raw_max, exp_weights, mass, tau, target, total > 0)
    assert out is not None
    cols, kept, done = out
    weights = cut._subset_weights(keys, row_max)
    reference = stable_prefix(keys, weights, target)
    settled = 0
    for i in range(keys.shape[0]):
        if not bool(done[i]):
            continue
        settled += 1
        if bool(torch.isinf(raw_max[i])):
            assert not kept[i].any()  # no candidate: nothing kept
            continue
        assert cols[i][kept[i]].tolist() == reference[i], i
    assert settled >= 3


def test_long_prefixes_and_disallowed_rows_are_left_to_the_exact_selection() -> None:
    keys = torch.linspace(1.0, 2.0, 1000).repeat(3, 1)
    weights = keys.to(torch.float64)
    total = weights.sum(1)
    # row 0: ends after ~60 keys; row 1: needs ~300 (> 128); row 2: not allowed
    top = weights[0].sort(descending=True).values
    ends_at_60 = float(top[:59].sum() + 0.5 * top[59])  # clear of any rounding
    target = torch.tensor([ends_at_60, 0.5 * float(total[1]), 1.0], dtype=torch.float64)
    allow = torch.tensor([True, True, False])
    out = cut_kernel.row_prefixes(keys, keys.amax(1), None, "similarity", 1.0, target, allow)
    assert out is not None
    cols, kept, done = out
    assert done.tolist() == [True, False, False]
    assert int(kept[0].sum()) == 60
    assert cols[0][kept[0]].tolist() == list(range(999, 939, -1))
    assert not kept[1:].any()


def test_every_view_rows_match_between_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's every-view rows: in-batch keys with the own views cut, one
    generated column, the signed total from sums of embeddings."""
    g = torch.Generator().manual_seed(0)
    b, v, d = 64, 5, 32
    z = torch.randn(b, 1, d, generator=g) + 0.7 * torch.randn(b, v, d, generator=g)
    unit = torch.nn.functional.normalize(z.reshape(b * v, d), dim=1)
    keys = (unit / 0.1) @ torch.cat((unit, torch.zeros(1, d))).T
    own = (torch.arange(b * v) // v * v).unsqueeze(1) + torch.arange(v)
    keys[:, : b * v].scatter_(1, own, -torch.inf)
    total = (
        (unit / 0.1) * (unit.sum(0) - unit.reshape(b, v, d).sum(1).repeat_interleave(v, 0))
    ).sum(1)
    cut = RelativeThresholdNegatives(0.95, "similarity", temperature=0.1)
    with monkeypatch.context() as m:
        m.setattr(cut_kernel, "ENABLED", True)
        kernel = cut.select(keys, total=total, form="index")
    with monkeypatch.context() as m:
        m.setattr(cut_kernel, "ENABLED", False)
        tensor = cut.select(keys, total=total, form="index")

    def as_sets(cols: torch.Tensor, kept: torch.Tensor) -> list[set[int]]:
        return [set(c[k].tolist()) for c, k in zip(cols, kept, strict=True)]

    assert as_sets(*kernel) == as_sets(*tensor)
    assert sum(len(s) for s in as_sets(*kernel)) > b * v  # some rows keep several


def test_a_failing_kernel_warns_once_and_the_tensor_path_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object) -> int:
        raise RuntimeError("no compiler here")

    fake = types.ModuleType("fake_kernels")
    fake.SIZES = (32, 64, 128)  # type: ignore[attr-defined]
    fake.prefixes = broken  # type: ignore[attr-defined]
    monkeypatch.setattr(cut_kernel, "_state", {"module": fake})
    monkeypatch.setattr(cut_kernel, "ENABLED", True)
    keys = candidate_keys(8, 200, torch.float32, 3, ties=True)
    cut = RelativeThresholdNegatives(0.8, "similarity", temperature=0.5)
    with pytest.warns(RuntimeWarning, match="no compiler here"):
        first = cut.select(keys)
    assert not cut_kernel.applies(keys, "similarity")  # the tensor path from now on
    monkeypatch.setattr(cut_kernel, "ENABLED", False)
    assert torch.equal(first, cut.select(keys))


@pytest.mark.parametrize(
    ("value", "on"),
    [(None, True), ("1", True), ("yes", True), ("0", False), (" OFF ", False), ("False", False)],
)
def test_the_environment_switch(value: str | None, on: bool) -> None:
    assert cut_kernel.enabled_by(value) is on


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_starting_floor_too_high_rescans_the_row(dtype: torch.dtype) -> None:
    """The scans start above large keys of every 8th column; where the few large keys
    sit exactly in those columns, fewer keys than the prefix needs lie above every such
    floor and the row is scanned again from -inf: the prefix is still the stable sort's
    (20 large keys, then 10 of the equal small ones, lowest index first; in row 1 one
    more large key, off the sample, and 9 small ones)."""
    k = 400
    keys = torch.full((2, k), 1.0, dtype=dtype)
    keys[:, 0:160:8] = 10.0 + torch.arange(20, dtype=dtype) * 1e-3  # 20 large, sampled
    keys[1, 3] = 10.0  # a tie with a sampled key, off the sample
    weights = keys.to(torch.float64)
    top = weights.sort(1, descending=True).values
    target = top[:, :29].sum(1) + 0.5 * top[:, 29]  # 30 keys, clear of any rounding
    out = cut_kernel.row_prefixes(keys, keys.amax(1), None, "similarity", 1.0, target, None)
    assert out is not None
    cols, kept, done = out
    reference = stable_prefix(keys, weights, target)
    assert done.all()
    for i in range(2):
        assert cols[i][kept[i]].tolist() == reference[i]
        assert len(reference[i] or []) == 30


@pytest.mark.parametrize("mass", MASSES)
def test_rows_split_over_threads_give_the_same_prefixes(
    mass: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With several torch threads the rows go to the kernel in blocks, one per thread:
    the same columns, row for row, as one call."""
    keys = candidate_keys(50, 300, torch.float32, 11, ties=True)
    cut = RelativeThresholdNegatives(0.5 if mass == "linear" else 0.9, mass, temperature=0.5)
    raw_max = keys.amax(1)
    row_max = torch.where(torch.isfinite(raw_max), raw_max, 0.0)
    total, exp_weights = cut._total_and_weights(keys, None, row_max, None)
    target = cut.share * total

    def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = cut_kernel.row_prefixes(keys, raw_max, exp_weights, mass, 0.5, target, total > 0)
        assert out is not None
        return out

    threads = torch.get_num_threads()
    monkeypatch.setattr(cut_kernel, "_MIN_ROWS_PER_THREAD", 8)
    try:
        torch.set_num_threads(1)
        one = run()
        torch.set_num_threads(4)  # blocks of 12-13 rows on 4 threads
        split = run()
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(x, y) for x, y in zip(one, split, strict=True))
    assert int(one[2].sum()) >= 10  # rows settled on both


@pytest.mark.parametrize(
    "options",
    [
        {"variant": "ib_h"},
        {"variant": "ib_h", "anchor_set": "every_view"},
        {"variant": "ib_h", "anchor_set": "every_view", "positive_pool": "instance_class"},
        {"variant": "ib_h", "mass": "exp"},
    ],
)
def test_spacl_loss_is_the_same_on_the_gpu_sort_path(
    options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPACL's loss and gradients with the cut the GPU takes (one sort per row, run here
    on the CPU) equal those of the CPU kernel: the same negatives kept."""
    from spacl.losses import SPACLLoss
    from spacl.mining.cut import threshold as cut_threshold

    g = torch.Generator().manual_seed(3)
    b, v, d = 48, 5, 16
    pool = (torch.randn(b, 1, d, generator=g) + 0.6 * torch.randn(b, v, d, generator=g)).double()
    labels = torch.arange(b) % 6
    grads, values = [], []
    for sort in (False, True):
        with monkeypatch.context() as m:
            if sort:
                m.setattr(cut_threshold, "SORTED_DEVICES", frozenset({"cpu"}))
            x = pool.clone().requires_grad_(True)
            loss_fn = SPACLLoss(0.1, **options)  # type: ignore[arg-type]
            torch.manual_seed(0)
            if options.get("anchor_set") == "every_view":
                loss = loss_fn(None, x, labels)
            else:
                loss = loss_fn(x[:, 0], x, labels=None)
            loss.backward()
            values.append(loss.detach())
            assert x.grad is not None
            grads.append(x.grad)
    torch.testing.assert_close(values[1], values[0], rtol=1e-12, atol=0.0)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-10, atol=1e-14)
