"""The relative-threshold cut (SPEC §1.4) against a sorted-prefix loop reference."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.mining import RelativeThresholdNegatives
from spacl.mining.cut import CUT_FORMS
from spacl.mining.cut import kernel as cut_kernel
from spacl.mining.cut import threshold as cut_threshold

DTYPES = (torch.float32, torch.float64)


@pytest.fixture(autouse=True, params=["kernel", "tensor", "sort"])
def cut_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test of this file on the three paths of the cut: the numba kernel
    (:mod:`spacl.mining.cut.kernel`) and the tensor fast path of the CPU, and the GPU's
    one sort per row (:func:`spacl.mining.cut.exact.sorted_prefixes`), run here on the CPU."""
    monkeypatch.setattr(cut_kernel, "ENABLED", request.param == "kernel")
    if request.param == "sort":
        monkeypatch.setattr(cut_threshold, "SORTED_DEVICES", frozenset({"cpu"}))
    return str(request.param)


def prefix_ref(
    weights: torch.Tensor, share: float, valid: torch.Tensor, keys: torch.Tensor | None = None
) -> torch.Tensor:
    """Stable sort by decreasing key (ties: lower index first), shortest prefix reaching share."""
    keys = weights if keys is None else keys
    out = torch.zeros_like(valid)
    for i in range(weights.shape[0]):
        idx = [j for j in range(weights.shape[1]) if valid[i, j]]
        idx.sort(key=lambda j: -float(keys[i, j]))  # Python's sort is stable
        total = sum(float(weights[i, j]) for j in idx)
        if total == 0.0 or share == 1.0:
            out[i, idx] = True
            continue
        acc = 0.0
        for j in idx:
            out[i, j] = True
            acc += float(weights[i, j])
            if acc >= share * total:
                break
    return out


def cut_of_weights(
    weights: torch.Tensor, share: float, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """The one cut on given non-negative weights: ``mass="linear"`` weighs a score ``s``
    by ``(1 + s) / 2``, so the scores ``2 w - 1`` weigh ``w`` (exactly, for small integers)."""
    return RelativeThresholdNegatives(share, "linear")(2 * weights - 1, valid)


def check_prefix_properties(
    weights: torch.Tensor, share: float, keep: torch.Tensor, valid: torch.Tensor
) -> None:
    """Kept >= dropped; kept share reaches ``share``; dropping the lightest kept one falls below."""
    w = weights.to(torch.float64)
    for i in range(w.shape[0]):
        kept = w[i][keep[i]]
        dropped = w[i][valid[i] & ~keep[i]]
        assert not (keep[i] & ~valid[i]).any()
        total = float(w[i][valid[i]].sum())
        if total == 0.0:
            continue
        if dropped.numel():
            assert float(kept.min()) >= float(dropped.max())
        assert float(kept.sum()) >= share * total
        if share < 1.0:  # share = 1 keeps everything, zero weights included (a decision)
            assert float(kept.sum()) - float(kept.min()) < share * total


# -- exact agreement with the reference ------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("share", [0.3, 0.9, 0.95, 0.999])
def test_logit_cut_matches_sorted_prefix(dtype: torch.dtype, seed: int, share: float) -> None:
    g = torch.Generator().manual_seed(seed)
    a = torch.nn.functional.normalize(torch.randn(6, 16, generator=g, dtype=torch.float64), dim=1)
    c = torch.nn.functional.normalize(torch.randn(700, 16, generator=g, dtype=torch.float64), dim=1)
    logits = ((a @ c.T) / 0.1).to(dtype)
    valid = torch.rand(6, 700, generator=g) > 0.1
    cut = RelativeThresholdNegatives(share, "exp")
    keep = cut(logits, valid)
    weights = torch.exp(
        logits.double() - logits.double().masked_fill(~valid, -math.inf).amax(1, keepdim=True)
    )
    weights = weights.masked_fill(~valid, 0.0)
    assert torch.equal(keep, prefix_ref(weights, share, valid, logits))
    check_prefix_properties(weights, share, keep, valid)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_keep_exactly_the_prefix_lowest_index_first(dtype: torch.dtype) -> None:
    # weights 4, 2, 2, 2, 1 (total 11): share 0.5 needs 4 + 2 -> the first tied 2 only
    w = torch.tensor([[1.0, 2.0, 4.0, 2.0, 2.0]], dtype=dtype)
    keep = cut_of_weights(w, 0.5)
    assert keep.tolist() == [[False, True, True, False, False]]
    keep = cut_of_weights(w, 0.7)  # 7.7 -> 4 + 2 + 2
    assert keep.tolist() == [[False, True, True, True, False]]
    # the same through logits: equal logits are ties, kept in index order
    logits = torch.log(w)
    keep = RelativeThresholdNegatives(0.5, "exp")(logits)
    assert keep.tolist() == [[False, True, True, False, False]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("share", [0.05, 0.5, 0.95])
def test_ties_on_rounded_logits(dtype: torch.dtype, share: float) -> None:
    g = torch.Generator().manual_seed(7)
    logits = (torch.randn(5, 900, generator=g) * 2).round().to(dtype)  # heavy ties
    valid = torch.rand(5, 900, generator=g) > 0.05
    cut = RelativeThresholdNegatives(share, "exp")
    keep = cut(logits, valid)
    weights = cut.weights(logits, valid)
    assert torch.equal(keep, prefix_ref(weights, share, valid, logits))


@pytest.mark.parametrize(
    "logits",
    [
        torch.zeros(3, 500),  # collapse: one block of ties
        torch.cat([torch.zeros(3, 499), torch.full((3, 1), -30.0)], 1),  # outlier + ties
        torch.randn(3, 2000, generator=torch.Generator().manual_seed(1)) * 1e-4,  # narrow cluster
        torch.cat(  # a far outlier squeezes the rest into one bucket: needs a second level
            [
                torch.randn(3, 2000, generator=torch.Generator().manual_seed(2)) * 1e-3,
                torch.full((3, 1), -60.0),
            ],
            1,
        ),
    ],
)
@pytest.mark.parametrize("share", [0.2, 0.95])
@pytest.mark.parametrize("mass", ["exp", "linear"])
def test_degenerate_distributions(logits: torch.Tensor, share: float, mass: str) -> None:
    cut = RelativeThresholdNegatives(share, mass, temperature=0.1)
    valid = torch.ones_like(logits, dtype=torch.bool)
    keep = cut(logits, valid)
    weights = cut.weights(logits, valid)
    assert torch.equal(keep, prefix_ref(weights, share, valid, logits))
    check_prefix_properties(weights, share, keep, valid)


def test_linear_mass_is_the_literal_reading() -> None:
    g = torch.Generator().manual_seed(3)
    s = torch.rand(4, 300, generator=g, dtype=torch.float64) * 2 - 1
    tau = 0.2
    cut = RelativeThresholdNegatives(0.8, "linear", temperature=tau)
    keep = cut(s / tau)
    assert torch.equal(keep, prefix_ref((1 + s) / 2, 0.8, torch.ones_like(keep)))
    # the linear mass keeps far more than the exp mass at a low temperature
    assert keep.sum() > RelativeThresholdNegatives(0.8, "exp")(s / tau).sum()


# -- property tests (exact arithmetic on small integer weights) ----------------------------
@settings(max_examples=150, deadline=None)
@given(
    b=st.integers(1, 4),
    k=st.integers(1, 120),
    share=st.floats(0.01, 1.0),
    data=st.data(),
)
def test_integer_weights_properties(b: int, k: int, share: float, data: st.DataObject) -> None:
    """Small integer weights sum exactly, so the properties hold without tolerance."""
    cells = st.lists(st.integers(0, 6), min_size=b * k, max_size=b * k)
    flags = st.lists(st.booleans(), min_size=b * k, max_size=b * k)
    w = torch.tensor(data.draw(cells), dtype=torch.float64).reshape(b, k)
    valid = torch.tensor(data.draw(flags)).reshape(b, k)
    keep = cut_of_weights(w, share, valid)
    assert torch.equal(keep, prefix_ref(w, share, valid))
    check_prefix_properties(w, share, keep, valid)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.integers(1, 3000),
    scale=st.sampled_from([1e-6, 0.1, 1.0, 10.0, 100.0]),
    share=st.floats(0.01, 0.9999),
    float64=st.booleans(),
)
def test_random_logits_match_reference(
    seed: int, k: int, scale: float, share: float, float64: bool
) -> None:
    g = torch.Generator().manual_seed(seed)
    dtype = torch.float64 if float64 else torch.float32
    logits = (torch.randn(2, k, generator=g, dtype=torch.float64) * scale).to(dtype)
    valid = torch.rand(2, k, generator=g) > 0.2
    cut = RelativeThresholdNegatives(share, "exp")
    keep = cut(logits, valid)
    assert torch.equal(keep, prefix_ref(cut.weights(logits, valid), share, valid, logits))


# -- edge cases and bad input --------------------------------------------------------------
def test_share_one_keeps_everything_even_underflowing_weights() -> None:
    logits = torch.tensor([[0.0, -2000.0, -1.0]], dtype=torch.float64)
    assert RelativeThresholdNegatives(1.0, "exp")(logits).all()
    mask = torch.tensor([[True, True, False]])
    assert torch.equal(RelativeThresholdNegatives(1.0, "exp")(logits, mask), mask)


def test_rows_without_mass_or_candidates() -> None:
    # linear mass of antipodal candidates is 0: the row keeps every valid candidate
    s = -torch.ones(2, 4, dtype=torch.float64)
    valid = torch.tensor([[True, True, False, True], [False, False, False, False]])
    keep = RelativeThresholdNegatives(0.5, "linear")(s, valid)
    assert torch.equal(keep, valid)


@pytest.mark.parametrize("mass", ["exp", "linear", "similarity"])
@pytest.mark.parametrize("k", [7, 300, 5000])
def test_selection_widest_is_the_largest_kept_count(mass: str, k: int) -> None:
    """``Selection.widest()``: the largest kept count of a row, 0 where no row has a
    candidate (the compact SPACL path reads it once, the sort path with its own wait)."""
    g = torch.Generator().manual_seed(k)
    logits = torch.randn(6, k, generator=g, dtype=torch.float64) * 3
    valid = torch.rand(6, k, generator=g) > 0.3
    valid[2] = False  # a row without a candidate
    cut = RelativeThresholdNegatives(0.6, mass, temperature=0.2)  # type: ignore[arg-type]
    keys = logits.masked_fill(~valid, -torch.inf)
    selection = cut.select(keys, form="selection")
    mask = cut.select(keys)
    assert selection.widest() == int(mask.sum(1).max()) > 0
    none = torch.full_like(keys, -torch.inf)
    assert cut.select(none, form="selection").widest() == 0
    assert not cut.select(none).any()


def test_float32_and_float64_logits_agree() -> None:
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(8, 600, generator=g) * 5
    cut = RelativeThresholdNegatives(0.9, "exp")
    assert torch.equal(cut(logits), cut(logits.double()))


def test_bad_inputs() -> None:
    for share in (0.0, -0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="share"):
            RelativeThresholdNegatives(share, "exp")
    with pytest.raises(ValueError, match="mass"):
        RelativeThresholdNegatives(0.9, "log")
    cut = RelativeThresholdNegatives(0.9, "exp")
    with pytest.raises(ValueError, match="non-finite"):
        cut(torch.tensor([[0.0, math.inf]]))
    with pytest.raises(ValueError, match="2 dimensions"):
        cut(torch.zeros(3))
    with pytest.raises(ValueError, match="mask must have the shape"):
        cut(torch.zeros(2, 3), torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        cut(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="share"):
        RelativeThresholdNegatives(0.0)


#: a cut's scores, its candidates, and select's bad inputs built from them: ``(args,
#: keywords, error, message)``; each message names the argument and what was found
_GOOD = torch.tensor([[0.9, 0.5, 0.1], [0.2, -0.3, 0.4]])
_VALID = torch.tensor([[True, True, False], [True, True, True]])


def _with(value: float, row: int, col: int) -> torch.Tensor:
    x = _GOOD.clone()
    x[row, col] = value
    return x


BAD_SELECT = [
    pytest.param(
        (_GOOD.tolist(),),
        {},
        TypeError,
        r"^scores must be a torch\.Tensor, got list$",
        id="scores-list",
    ),
    pytest.param(
        (_GOOD.long(),),
        {},
        TypeError,
        r"^scores must be a floating-point tensor, got dtype torch\.int64$",
        id="scores-int64",
    ),
    pytest.param(
        (_GOOD[0],),
        {},
        ValueError,
        r"^scores must have 2 dimensions, got shape \(3,\)$",
        id="scores-1d",
    ),
    pytest.param(
        (_GOOD[:, :0],),
        {},
        ValueError,
        r"^scores must hold at least one candidate column \(K >= 1\), got shape \(2, 0\)$",
        id="scores-no-column",
    ),
    pytest.param(
        (_with(math.nan, 1, 2),),
        {},
        ValueError,
        r"^scores contains 1 non-finite value\(s\) \(NaN or \+inf; -inf marks a column",
        id="scores-nan",
    ),
    pytest.param(
        (_with(math.inf, 0, 1),),
        {},
        ValueError,
        r"^scores contains 1 non-finite value\(s\) \(NaN or \+inf; -inf marks a column",
        id="scores-plus-inf",
    ),
    pytest.param(
        (_with(-math.inf, 1, 0), _VALID),
        {},
        ValueError,
        r"^scores contains 1 non-finite value\(s\) \(NaN or inf on a candidate of mask\)$",
        id="scores-minus-inf-on-a-candidate",
    ),
    pytest.param(
        (_GOOD, _VALID.float()),
        {},
        TypeError,
        r"^mask must be a bool tensor, got torch\.float32$",
        id="mask-float",
    ),
    pytest.param(
        (_GOOD, _VALID.tolist()),
        {},
        TypeError,
        r"^mask must be a bool tensor, got list$",
        id="mask-list",
    ),
    pytest.param(
        (_GOOD, _VALID[:, :2]),
        {},
        ValueError,
        r"^mask must have the shape \(2, 3\) of scores, got \(2, 2\)$",
        id="mask-shape",
    ),
    pytest.param(
        (_GOOD,),
        {"total": torch.zeros(3)},
        ValueError,
        r"^total must have the shape \(2,\) \(one per row of scores\), got \(3,\)$",
        id="total-shape",
    ),
    pytest.param(
        (_GOOD,),
        {"total": torch.zeros(2, dtype=torch.long)},
        TypeError,
        r"^total must be a floating-point tensor, got dtype torch\.int64$",
        id="total-int64",
    ),
    pytest.param(
        (_GOOD,),
        {"weights_out": []},
        TypeError,
        r"^weights_out must be a dict or None, got list$",
        id="weights_out-list",
    ),
    pytest.param((_GOOD,), {"finite": 1}, TypeError, r"^finite must be a bool", id="finite-int"),
]


@pytest.mark.parametrize("share", [0.8, 1.0])  # 1.0: the keep-every-candidate branch
@pytest.mark.parametrize("form", CUT_FORMS)
@pytest.mark.parametrize(("args", "kwargs", "error", "message"), BAD_SELECT)
def test_every_form_of_select_rejects_bad_inputs(
    args: tuple[object, ...],
    kwargs: dict[str, object],
    error: type[Exception],
    message: str,
    form: str,
    share: float,
) -> None:
    """Issue 40: ``select`` is the one entry point and checks its inputs in every form
    (the module call, :meth:`forward`, is ``select(form="mask")``, so it checks the same)."""
    cut = RelativeThresholdNegatives(share, "similarity")
    with pytest.raises(error, match=message):
        cut.select(*args, form=form, **kwargs)  # type: ignore[call-overload]
    if form == "mask" and not kwargs:
        with pytest.raises(error, match=message):
            cut(*args)


@pytest.mark.parametrize("form", CUT_FORMS)
def test_select_reads_no_score_off_the_candidates(form: str) -> None:
    """``-inf`` without a mask marks a column that is no candidate; with a mask, the
    scores off it are never read (a NaN there changes nothing); ``finite=False`` skips
    only the value scan (the losses' call): the same answer, the other checks kept."""
    cut = RelativeThresholdNegatives(0.8, "similarity")
    # row 0: 0.9 + 0.5 = 1.4 reach 0.8 * 1.5; row 1 (column 1 no candidate): 0.4 alone
    # falls short of 0.8 * 0.6, 0.4 + 0.2 reach it
    want = torch.tensor([[True, True, False], [True, False, True]])
    scores = torch.tensor([[0.9, 0.5, 0.1], [0.2, -0.3, 0.4]])
    valid = torch.tensor([[True, True, True], [True, False, True]])
    answers = [
        cut.select(scores.masked_fill(~valid, -math.inf), form=form),  # type: ignore[call-overload]
        cut.select(scores.masked_fill(~valid, math.nan), valid, form=form),  # type: ignore[call-overload]
        cut.select(scores, valid, form=form, finite=False),  # type: ignore[call-overload]
    ]
    for got in answers:
        if form == "index":
            cols, kept = got
            got = torch.zeros_like(want).scatter_(1, cols, kept)
        elif form == "selection":
            got = got.mask()
        assert torch.equal(got.bool(), want), got
    with pytest.raises(TypeError, match=r"^scores must be a floating-point tensor"):
        cut.select(scores.long(), finite=False)


@pytest.mark.parametrize("mass", ["exp", "linear", "similarity"])
@pytest.mark.parametrize("k", [5, 300, 5000])
def test_calling_the_cut_is_select_in_mask_form(mass: str, k: int) -> None:
    """Issue 40: ``cut(scores, mask)`` (``forward``) is ``cut.select(scores, mask,
    form="mask")``, bit for bit, and both are the loop reference's prefix."""
    g = torch.Generator().manual_seed(k)
    logits = torch.randn(5, k, generator=g, dtype=torch.float64) * 2
    valid = torch.rand(5, k, generator=g) > 0.3
    cut = RelativeThresholdNegatives(0.7, mass, temperature=0.5)
    for mask in (None, valid):
        got = cut(logits, mask)
        assert got.dtype == torch.bool
        assert torch.equal(got, cut.select(logits, mask, form="mask"))
        assert torch.equal(got, cut.select(logits, mask))
    keep = cut(logits, valid)
    assert torch.equal(keep, prefix_ref(cut.weights(logits, valid), 0.7, valid, logits))
    keys = logits.masked_fill(~valid, -math.inf)
    before = keys.clone()
    assert torch.equal(cut(keys), keep)
    assert torch.equal(keys, before)  # the scores are read, never written


# -- the literal reading on raw similarities (SPEC §1.4 revised) -----------------------------
def literal_ref(s: torch.Tensor, share: float, valid: torch.Tensor) -> torch.Tensor:
    """Per-anchor loop of the paper's formula on signed similarities.

    Sort the valid candidates by decreasing similarity (stable: ties by index), keep the
    shortest prefix whose running sum of s reaches share * sum(s); at least the first one;
    share = 1 keeps every candidate.
    """
    out = torch.zeros_like(valid)
    for i in range(s.shape[0]):
        idx = [j for j in range(s.shape[1]) if valid[i, j]]
        if not idx:
            continue
        idx.sort(key=lambda j: -float(s[i, j]))
        if share == 1.0:
            out[i, idx] = True
            continue
        target = share * sum(float(s[i, j]) for j in idx)
        acc, length = 0.0, len(idx)
        for n, j in enumerate(idx, start=1):
            acc += float(s[i, j])
            if acc >= target:
                length = n
                break
        else:
            length = 1  # never reached (all negative, total < 0): the hardest alone
        out[i, idx[:length]] = True
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("share", [0.3, 0.9, 0.95, 1.0])
@pytest.mark.parametrize("offset", [0.5, 0.0, -0.02])  # mostly positive / mixed sign / total < 0
def test_similarity_cut_matches_literal_loop(
    dtype: torch.dtype, seed: int, share: float, offset: float
) -> None:
    g = torch.Generator().manual_seed(seed)
    s = (torch.rand(5, 800, generator=g, dtype=torch.float64) * 0.4 - 0.2 + offset).to(dtype)
    tau = 0.1
    valid = torch.rand(5, 800, generator=g) > 0.1
    keep = RelativeThresholdNegatives(share, "similarity", tau)(s / tau, valid)
    # the reference sees the similarities the cut sees (logits * tau in float64)
    s_seen = (s / tau).double() * tau
    assert torch.equal(keep, literal_ref(s_seen, share, valid))
    if offset < 0 and share < 1.0:  # total <= 0: exactly the hardest negative
        assert keep.sum(1).tolist() == [1] * 5


def test_similarity_cut_hand_cases() -> None:
    cut = RelativeThresholdNegatives(0.5, "similarity")
    # 0.4 + 0.3 + 0.2 + 0.1 - 0.2 = 0.8, target 0.4: the first alone reaches it
    s = torch.tensor([[0.1, 0.4, -0.2, 0.3, 0.2]], dtype=torch.float64)
    assert cut(s).tolist() == [[False, True, False, False, False]]
    # ties: 0.3 0.3 0.3 0.1 (total 1.0), share 0.5 -> 0.3 + 0.3: the two lowest-indexed
    s = torch.tensor([[0.1, 0.3, 0.3, 0.3]], dtype=torch.float64)
    assert cut(s).tolist() == [[False, True, True, False]]
    # total <= 0: exactly the hardest, ties to the lowest index
    s = torch.tensor([[-0.5, 0.2, 0.2, -0.4]], dtype=torch.float64)
    assert cut(s).tolist() == [[False, True, False, False]]
    s = torch.full((1, 4), -0.3, dtype=torch.float64)
    assert cut(s).tolist() == [[True, False, False, False]]
    # share = 1 keeps the negatively similar tail too (no negative selection)
    s = torch.tensor([[0.5, 0.3, -0.1]], dtype=torch.float64)
    assert RelativeThresholdNegatives(1.0, "similarity")(s).all()
    # an empty row keeps nothing
    valid = torch.tensor([[False, False, False]])
    assert not RelativeThresholdNegatives(0.9, "similarity")(s, valid).any()


def test_similarity_cut_is_adaptive() -> None:
    """Alike negatives (early training) keep ~share of them; spread ones far fewer."""
    g = torch.Generator().manual_seed(5)
    alike = 0.9 + 0.01 * torch.randn(2, 1000, generator=g, dtype=torch.float64)
    spread = 0.05 + 0.2 * torch.randn(2, 1000, generator=g, dtype=torch.float64)
    cut = RelativeThresholdNegatives(0.95, "similarity")
    kept_alike = cut(alike).double().mean()
    kept_spread = cut(spread).double().mean()
    assert 0.93 < kept_alike < 0.96
    assert kept_spread < 0.5
    # the softmax-mass reading keeps about the same share of alike negatives at tau = 1
    assert RelativeThresholdNegatives(0.95, "exp")(alike).double().mean() > 0.9


@pytest.mark.parametrize("mass", ["similarity", "exp", "linear"])
@pytest.mark.parametrize("share", [0.3, 0.8, 0.95])
def test_wide_rows_with_ties_match_the_stable_sort_loop(mass: str, share: float) -> None:
    """Rows wide enough for the block fast path, with ties, against the loop (issue 19).

    Keys are rounded to a coarse grid, so every row has many exact ties, also at the
    threshold; some rows are settled by the fast path, the others by the exact path.
    """
    from loss_references import cut_loop

    g = torch.Generator().manual_seed(7)
    b, k, tau = 24, 700, 0.2
    logits = (torch.randn(b, k, generator=g, dtype=torch.float64) * 8).round() / 8 / tau
    logits[:4] += 3.0  # rows with a heavy top: settled among the top blocks
    valid = torch.rand(b, k, generator=g) > 0.1
    cut = RelativeThresholdNegatives(share, mass, tau)
    kept = cut(logits, valid)
    for i in range(b):
        cols = valid[i].nonzero().squeeze(1).tolist()
        want = cut_loop([float(logits[i, c]) for c in cols], share, tau, mass)
        got = [bool(kept[i, c]) for c in cols]
        assert got == want, f"row {i}"
        assert not bool(kept[i][~valid[i]].any())
    # the fast path alone settles some rows here, and its answer is the exact one
    from spacl.mining.cut.fast import mask_of as _mask_of
    from spacl.mining.cut.fast import top_prefix as _top_prefix

    keys = logits.masked_fill(~valid, -math.inf)
    row_max = keys.amax(1)
    target = share * cut._total(logits, keys, valid, row_max)
    cols, fast_kept, done = _top_prefix(
        keys, target, lambda z, r: cut._subset_weights(z, row_max[r])
    )
    if mass == "similarity":
        assert bool(done.any())
    assert torch.equal(_mask_of(cols, fast_kept, k)[done], kept[done])
    # the index form is the same selection
    index, index_kept = cut.select(logits, valid, form="index")
    assert torch.equal(_mask_of(index, index_kept, k), kept)
    assert torch.equal(index_kept.sum(1), kept.sum(1))  # each kept column once


@pytest.mark.parametrize("path", ["dense", "compact"])
@pytest.mark.parametrize("mass", ["similarity", "exp", "linear"])
@pytest.mark.parametrize("share", [0.3, 0.8, 0.95])
def test_kg_objective_and_spacl_keep_the_same_negatives(
    mass: str, share: float, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cut (issue 19): on the same similarities, ties included, both objectives keep
    the same negatives, and those are the stable-sort loop's.

    Embeddings with coordinates +-1/4 in d = 16 are exactly unit: every similarity is a
    multiple of 1/8, computed exactly by either matmul, and rows are full of ties (also
    at the threshold).  SPACL: anchor view 0, the other instances' views the candidates
    (its dense kernel asks ``select`` for a mask, its compact one for the selection);
    link prediction (a float mask): query = view 0, the views the entity table, the
    instance's own views its known tails (so the same candidates).
    """
    from loss_references import cut_loop
    from spacl.losses import SPACLLoss
    from spacl.losses.kg import LinkSPACLLoss
    from spacl.losses.spacl import compact as spacl_compact_module
    from spacl.mining.cut.fast import mask_of as _mask_of

    monkeypatch.setattr(spacl_compact_module, "_COMPACT_SHARE", 2.0 if path == "compact" else -1.0)
    b, v, d, tau = 32, 2, 16, 0.5  # tau a power of 2: logits are exact too
    n = b * v
    g = torch.Generator().manual_seed(11)
    pool = (torch.randint(0, 2, (b, v, d), generator=g).float() * 2 - 1) / 4
    spacl = SPACLLoss(
        tau, num_positives=1, share=share, num_adversarial=0, variant="no_anchor", mass=mass
    )
    link = LinkSPACLLoss(
        tau, num_positives=1, share=share, num_adversarial=0, variant="no_adversarial", mass=mass
    )
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name, cut in (("spacl", spacl.cut), ("kg", link.cut)):

        def record(
            scores: torch.Tensor,
            mask: torch.Tensor | None = None,
            *,
            form: str = "mask",
            _s=cut.select,
            _n=name,
            **options: object,
        ) -> object:
            # every caller goes through the one entry point, whatever the form it asks
            out = _s(scores, mask, form=form, **options)
            if form == "selection":  # the compact kernel (its dense fallback: the mask)
                kept = out.mask()
            elif form == "index":
                kept = _mask_of(*out, scores.shape[1])
            else:  # "float": the link objective's 0/1 float mask
                kept = out > 0 if form == "float" else out
            keys = scores if mask is None else scores.masked_fill(~mask, -math.inf)
            seen[_n] = (keys[:, :n].clone(), kept[:, :n])
            assert not bool(kept[:, n:].any())  # the positive column is no candidate
            return out

        cut.select = record  # type: ignore[method-assign]
    spacl(None, pool)
    entities = pool.reshape(n, d)
    own = torch.arange(n).unsqueeze(0) // v == torch.arange(b).unsqueeze(1)
    link(pool[:, 0], entities, own)
    (s_keys, s_kept), (k_keys, k_kept) = seen["spacl"], seen["kg"]
    torch.testing.assert_close(s_keys, k_keys, rtol=0, atol=0)
    assert torch.equal(s_kept, k_kept)
    ties_at_threshold = 0
    for i in range(b):
        cols = (~own[i]).nonzero().squeeze(1).tolist()
        row = [float(k_keys[i, c]) for c in cols]
        assert [bool(k_kept[i, c]) for c in cols] == cut_loop(row, share, tau, mass)
        kept_values = {x for x, c in zip(row, cols, strict=True) if k_kept[i, c]}
        dropped = {x for x, c in zip(row, cols, strict=True) if not k_kept[i, c]}
        ties_at_threshold += bool(kept_values & dropped)
    assert ties_at_threshold > 0  # the tie rule is exercised


def assert_rows_match_cut_loop(
    kept: torch.Tensor,
    logits: torch.Tensor,
    valid: torch.Tensor,
    share: float,
    tau: float,
    mass: str,
) -> None:
    """Every row's kept mask is the loop's prefix on its valid entries, nothing else kept."""
    from loss_references import cut_loop

    for i in range(kept.shape[0]):
        cols = valid[i].nonzero().squeeze(1).tolist()
        want = cut_loop([float(logits[i, c]) for c in cols], share, tau, mass)
        assert [bool(kept[i, c]) for c in cols] == want, f"row {i}"
        assert not bool(kept[i][~valid[i]].any())


@pytest.mark.parametrize("mass", ["similarity", "exp", "linear"])
@pytest.mark.parametrize("share", [0.5, 0.95])
def test_long_prefixes_take_the_one_level_selection_exactly(
    mass: str, share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wide rows that keep most candidates (the KG cut early in training) against the loop.

    They skip the fast paths and take the one-level bucket selection: a flat row, a
    coarse grid (ties at the threshold), all keys equal (the chosen bucket overflows:
    the multi-level fallback), a few outliers above a bunched bulk, and a wide spread.
    """
    from spacl.mining.cut import threshold as negatives

    monkeypatch.setattr(negatives, "WIDE_ROWS", 1000)  # KG rows are 14,542 wide
    g = torch.Generator().manual_seed(5)
    b, k, tau = 6, 2000, 0.5
    logits = torch.randn(b, k, generator=g, dtype=torch.float64)
    logits[0] *= 1e-3  # flat
    logits[1] = (logits[1] * 4).round() / 4  # ties everywhere
    logits[2] = 0.25  # all equal
    logits[3] = logits[3] * 1e-4 + 0.5
    logits[3, :5] += 4.0  # a few far above a bunched bulk
    logits[5] *= 6.0
    valid = torch.rand(b, k, generator=g) > 0.05
    cut = RelativeThresholdNegatives(share, mass, tau)
    kept = cut(logits, valid)
    assert_rows_match_cut_loop(kept, logits, valid, share, tau, mass)
    keys = logits.masked_fill(~valid, -math.inf)
    assert torch.equal(cut.select(keys), kept)
    assert torch.equal(cut.float().select(keys.float()), cut(logits.float(), valid))
    # the link objective's float mask (made by float arithmetic on these rows): the same
    assert torch.equal(cut.select(keys, form="float"), kept.to(keys.dtype))
    kept32 = cut(logits.float(), valid).float()
    assert torch.equal(cut.select(keys.float(), form="float"), kept32)


def test_long_rows_with_heavy_tops_settle_in_one_level(
    monkeypatch: pytest.MonkeyPatch, cut_path: str
) -> None:
    """Link-prediction-like rows (a bulk of 14,541 scores, a long upper tail) under
    ``"exp"``: the crossing lies in the bulk, and the one level over [lower bound, row
    max] finds it in a bucket of few members, so no row takes a second level.

    Regression: a range read off a strided sample of the columns missed the heavy top
    keys and put the crossing of 20-30% of FB15k-237's rows in a crowded end bucket
    (hundreds of thousands of members, a second level): the same negatives, ~30% more
    cut time.  Checked against the loop too.
    """
    if cut_path == "sort":
        pytest.skip("the one-level selection of long rows is the CPU's; a GPU sorts the rows")
    from spacl.mining.cut import exact as cut_exact

    g = torch.Generator().manual_seed(7)
    b, k = 8, 14541
    logits = torch.randn(b, k, generator=g) * 0.8 - 3.5
    tail = torch.rand(b, k, generator=g) < 0.02  # a long upper tail, up to ~10 above
    top = -2.0 + torch.empty(b, k).exponential_(1.0, generator=g) * 1.5
    logits = torch.where(tail, top, logits)
    calls: list[int] = []
    inner = cut_exact.wide_prefix

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(int(kwargs.get("depth", 0)))  # type: ignore[call-overload]
        return inner(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cut_exact, "wide_prefix", counted)
    from spacl.mining.cut import threshold as negatives

    monkeypatch.setattr(negatives, "wide_prefix", counted)
    cut = RelativeThresholdNegatives(0.95, "exp")
    kept = cut.select(logits, form="float")
    assert calls == [0]  # one level, no crowded bucket
    valid = torch.ones(b, k, dtype=torch.bool)
    assert_rows_match_cut_loop(kept.bool(), logits.double(), valid, 0.95, 1.0, "exp")
    assert int((kept.sum(1) > 1000).sum()) >= 6  # long prefixes: the exact selection ran


@pytest.mark.parametrize("mass", ["similarity", "exp", "linear"])
@pytest.mark.parametrize("settled", [1, 4])
@pytest.mark.parametrize("wide", [False, True])
def test_rows_settled_early_beside_long_prefixes(
    mass: str, settled: int, wide: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch where the fast path settles some rows (one key far above the rest) and
    the others keep long prefixes: with 1 of 8 settled every row takes the exact
    selection, with 4 of 8 only the rest does; each way the loop's prefix, for every
    entry point (mask, keys, float mask, index)."""
    from spacl.mining.cut import threshold as negatives

    if wide:
        monkeypatch.setattr(negatives, "WIDE_ROWS", 1000)
    g = torch.Generator().manual_seed(11)
    b, k, tau, share = 8, 1500, 0.5, 0.9
    logits = 1.0 + torch.randn(b, k, generator=g, dtype=torch.float64) * 0.3
    logits[:, :40] = (logits[:, :40] * 8).round() / 8  # ties
    # one key holding more than `share` of the row's mass under the reading
    logits[:settled, 3] = 60.0 if mass == "exp" else 1e5
    valid = torch.rand(b, k, generator=g) > 0.05
    valid[:, 3] = True
    cut = RelativeThresholdNegatives(share, mass, tau)
    kept = cut(logits, valid)
    assert_rows_match_cut_loop(kept, logits, valid, share, tau, mass)
    assert int(kept[:settled].sum()) == settled  # the settled rows keep their one key
    assert int(kept[settled:].sum(1).min()) > 100  # the others long prefixes
    keys = logits.masked_fill(~valid, -math.inf)
    assert torch.equal(cut.select(keys), kept)
    assert torch.equal(cut.select(keys, form="float"), kept.to(keys.dtype))
    cols, flags = cut.select(keys, form="index")
    rebuilt = torch.zeros_like(kept)
    rebuilt[torch.arange(b).unsqueeze(1).expand_as(cols)[flags], cols[flags]] = True
    assert torch.equal(rebuilt, kept)
