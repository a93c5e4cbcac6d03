"""SPACLLoss (SPEC §1.5–1.6) against a per-anchor loop reference, identities and ablations."""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch

from loss_references import (
    anchor_loop,
    cut_loop,
    dot,
    farthest_loop,
    spacl_every_view_ref,
    unit_rows,
)
from spacl.losses import NTXentLoss, SPACLLoss
from spacl.losses import _mirror as mirror_module
from spacl.losses.spacl import VARIANT_PARTS, VARIANTS
from spacl.losses.spacl import compact as spacl_compact_module

DTYPES = (torch.float32, torch.float64)


@pytest.fixture(autouse=True, params=["dense", "compact"])
def kernel_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: the dense kernel only, and the compact one wherever it applies
    (issue 19: the loss on the kept negatives only, however many the cut keeps)."""
    monkeypatch.setattr(
        spacl_compact_module, "_COMPACT_SHARE", -1.0 if request.param == "dense" else 2.0
    )
    return str(request.param)


# -- slow reference (the miners' and the cut's loops live in loss_references) -------------
def spacl_loop(
    online: torch.Tensor,
    pool: torch.Tensor,
    positives: list[list[int]],
    tau: float,
    share: float,
    generated: torch.Tensor | None = None,
    labels: torch.Tensor | None = None,
) -> float:
    """``online[B, d]`` anchor embeddings, ``pool[B, V, d]`` targets, positives as flat rows."""
    b, v, d = pool.shape
    f = unit_rows(online.double())
    t = unit_rows(pool.double()).reshape(b * v, d)
    total = 0.0
    for i in range(b):
        pos = [dot(f[i], t[r]) / tau for r in positives[i]]
        cand = [
            dot(f[i], t[r]) / tau
            for r in range(b * v)
            if r // v != i and (labels is None or labels[r // v] != labels[i])
        ]
        if generated is not None:
            cand += [dot(f[i], generated[i, k].double()) / tau for k in range(generated.shape[1])]
        keep = cut_loop(cand, share, tau) if cand else []
        num = sum(math.exp(x) for x in pos)
        den = num + sum(math.exp(x) for x, k in zip(cand, keep, strict=True) if k)
        total += -math.log(num / den)
    return total / b


def random_pool(b: int, v: int, d: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    centre = torch.randn(b, 1, d, generator=g, dtype=torch.float64)
    return (centre + 0.9 * torch.randn(b, v, d, generator=g, dtype=torch.float64)).to(dtype)


def tol(dtype: torch.dtype) -> dict[str, float]:
    return (
        {"rtol": 1e-10, "atol": 1e-10} if dtype == torch.float64 else {"rtol": 2e-5, "atol": 2e-5}
    )


# -- against the reference -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("share", [0.5, 0.95, 1.0])
def test_no_adversarial_matches_loop(dtype: torch.dtype, share: float) -> None:
    b, v, d = 7, 5, 6
    pool = random_pool(b, v, d, dtype, seed=1)
    online = random_pool(b, v, d, dtype, seed=2)
    loss = SPACLLoss(0.2, num_positives=2, share=share, variant="no_adversarial")
    value = loss(online, pool)
    anchors = anchor_loop(pool)
    positives = [
        [i * v + p for p in farthest_loop(pool[i], list(range(v)), anchors[i], 2)] for i in range(b)
    ]
    assert loss.last is not None
    assert loss.last.anchor.tolist() == anchors
    assert (loss.last.positives + torch.arange(b).unsqueeze(1) * v).tolist() == positives
    f = torch.stack([online[i, anchors[i]] for i in range(b)])
    want = spacl_loop(f, pool, positives, 0.2, share)
    torch.testing.assert_close(
        value.double(), torch.tensor(want, dtype=torch.float64), **tol(dtype)
    )
    kept = [
        sum(
            cut_loop(
                [
                    dot(unit_rows(f[i].double()), unit_rows(pool.double()).reshape(b * v, d)[r])
                    / 0.2
                    for r in range(b * v)
                    if r // v != i
                ],
                share,
                0.2,
            )
        )
        for i in range(b)
    ]
    assert loss.last.kept_negatives.tolist() == kept


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("one_class", [False, True])
def test_full_with_generated_negatives_matches_loop(dtype: torch.dtype, one_class: bool) -> None:
    """``one_class``: labels leave no in-batch candidate, the generated negatives are the
    only ones (the compact path finds a widest row of 0 and hands over to the dense one)."""
    b, v, d = 6, 4, 5
    pool = random_pool(b, v, d, dtype, seed=3)
    labels = torch.zeros(b, dtype=torch.long) if one_class else None
    share = 0.7 if one_class else 0.9
    loss = SPACLLoss(0.1, num_positives=2, share=share, num_adversarial=3, embedding_dim=d)
    twin = copy.deepcopy(loss)  # replays the same game to recover the generated negatives
    value = loss(None, pool, labels)
    anchors = anchor_loop(pool)
    positives = [
        [i * v + p for p in farthest_loop(pool[i], list(range(v)), anchors[i], 2)] for i in range(b)
    ]
    unit_pool = unit_rows(pool)
    rows = torch.arange(b)
    assert twin.adversarial is not None
    generated, d_loss, g_loss = twin.adversarial.play(
        unit_pool[rows, anchors], unit_pool.reshape(b * v, d)[torch.tensor(positives)]
    )
    want = spacl_loop(pool[rows, anchors], pool, positives, 0.1, share, generated, labels)
    torch.testing.assert_close(
        value.double(), torch.tensor(want, dtype=torch.float64), **tol(dtype)
    )
    assert loss.last is not None
    assert loss.last.d_loss == d_loss and loss.last.g_loss == g_loss
    in_batch = 0 if one_class else (b - 1) * v
    assert loss.last.candidate_negatives.tolist() == [in_batch + 3] * b
    if one_class:  # every row keeps one at least
        assert 0 < int(loss.last.kept_generated.min())


@pytest.mark.parametrize("dtype", DTYPES)
def test_supervised_class_pool_matches_loop(dtype: torch.dtype) -> None:
    b, v, d = 8, 3, 5
    pool = random_pool(b, v, d, dtype, seed=4)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 2, 1])
    loss = SPACLLoss(
        0.3, num_positives=3, share=0.8, variant="no_adversarial", positive_pool="class"
    )
    value = loss(None, pool, labels)
    anchors = anchor_loop(pool)
    flat = pool.reshape(b * v, d)
    positives = [
        farthest_loop(
            flat, [r for r in range(b * v) if labels[r // v] == labels[i]], i * v + anchors[i], 3
        )
        for i in range(b)
    ]
    assert loss.last is not None
    assert loss.last.positives.tolist() == positives
    want = spacl_loop(pool[torch.arange(b), anchors], pool, positives, 0.3, 0.8, labels=labels)
    torch.testing.assert_close(
        value.double(), torch.tensor(want, dtype=torch.float64), **tol(dtype)
    )
    same = (labels.unsqueeze(1) == labels.unsqueeze(0)).sum(1)
    assert loss.last.candidate_negatives.tolist() == ((b - same) * v).tolist()


def test_weak_labels_only_remove_same_class_negatives() -> None:
    b, v, d = 8, 4, 5
    pool = random_pool(b, v, d, torch.float64, seed=5)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss = SPACLLoss(0.2, share=0.9, variant="no_adversarial")
    value = loss(None, pool, labels)
    assert loss.last is not None
    pos = (loss.last.positives + torch.arange(b).unsqueeze(1) * v).tolist()
    want = spacl_loop(pool[torch.arange(b), loss.last.anchor], pool, pos, 0.2, 0.9, labels=labels)
    torch.testing.assert_close(
        value, torch.tensor(want, dtype=torch.float64), rtol=1e-10, atol=1e-10
    )
    assert loss.last.candidate_negatives.tolist() == [(b - 2) * v] * b


def test_anchor_views_negatives_match_loop() -> None:
    b, v, d = 6, 4, 5
    pool = random_pool(b, v, d, torch.float64, seed=6)
    loss = SPACLLoss(0.2, share=0.7, variant="no_adversarial", negatives="anchor_views")
    value = loss(None, pool)
    anchors = anchor_loop(pool)
    f = unit_rows(pool[torch.arange(b), anchors])
    total = 0.0
    for i in range(b):
        pos = [dot(f[i], unit_rows(pool[i, p])) / 0.2 for p in loss.last.positives[i].tolist()]  # type: ignore[union-attr]
        cand = [dot(f[i], f[j]) / 0.2 for j in range(b) if j != i]
        keep = cut_loop(cand, 0.7, 0.2)
        num = sum(math.exp(x) for x in pos)
        total += -math.log(
            num / (num + sum(math.exp(x) for x, k in zip(cand, keep, strict=True) if k))
        )
    torch.testing.assert_close(
        value, torch.tensor(total / b, dtype=torch.float64), rtol=1e-10, atol=1e-10
    )


# -- identity with InfoNCE -----------------------------------------------------------------
@pytest.mark.parametrize("variant", ["no_anchor", "oaa"])
def test_reduces_to_infonce_with_one_positive(variant: str) -> None:
    """share=1, no generator, view 0 as anchor, one positive: InfoNCE exactly."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(12, 2, 8, generator=g, dtype=torch.float64)
    t = torch.randn(12, 2, 8, generator=g, dtype=torch.float64)
    spacl = SPACLLoss(
        0.3, num_positives=1, share=1.0, num_adversarial=0, variant=variant, detach_candidates=False
    )
    info = NTXentLoss(0.3, anchor_mode="one")
    torch.testing.assert_close(spacl(z, t), info(z, targets=t), rtol=1e-13, atol=1e-13)
    # shared encoder: the gradients agree as well
    a = z.clone().requires_grad_(True)
    c = z.clone().requires_grad_(True)
    ls, li = spacl(None, a), info(c)
    torch.testing.assert_close(ls, li, rtol=1e-13, atol=1e-13)
    ls.backward()
    li.backward()
    torch.testing.assert_close(a.grad, c.grad, rtol=1e-12, atol=1e-13)


def test_variant_switches_reach_infonce_from_full() -> None:
    """The same identity reached through variant="ib" plus the anchor override."""
    g = torch.Generator().manual_seed(1)
    z = torch.randn(10, 2, 4, generator=g, dtype=torch.float64)
    spacl = SPACLLoss(0.5, num_positives=1, variant="ib")
    zero = torch.zeros(10, dtype=torch.long)
    torch.testing.assert_close(
        spacl(None, z, anchor_index=zero),
        NTXentLoss(0.5, anchor_mode="one")(z),
        rtol=1e-13,
        atol=1e-13,
    )


# -- input forms ---------------------------------------------------------------------------
def test_anchor_input_forms_agree() -> None:
    pool = random_pool(9, 5, 6, torch.float64, seed=7)
    online = random_pool(9, 5, 6, torch.float64, seed=8)

    def fresh() -> SPACLLoss:
        return SPACLLoss(0.2, share=0.9, num_adversarial=2, embedding_dim=6)

    full_views = fresh()(online, pool)
    a = fresh().choose_anchor(pool)
    rows = torch.arange(9)
    with_index = fresh()(online[rows, a], pool, anchor_index=a)
    without_index = fresh()(online[rows, a], pool)
    torch.testing.assert_close(with_index, full_views, rtol=0, atol=0)
    torch.testing.assert_close(without_index, full_views, rtol=0, atol=0)
    shared = fresh()(None, pool)
    torch.testing.assert_close(fresh()(pool, pool), shared, rtol=0, atol=0)


def test_anchor_index_names_the_embedded_view() -> None:
    pool = random_pool(6, 5, 4, torch.float64, seed=9)
    zero = torch.zeros(6, dtype=torch.long)
    full = SPACLLoss(variant="no_adversarial")
    value = full(pool[:, 0], pool, anchor_index=zero)
    assert full.last is not None
    assert (full.last.anchor == 0).all() and not (full.last.positives == 0).any()
    no_anchor = SPACLLoss(variant="no_anchor", num_adversarial=0)
    torch.testing.assert_close(value, no_anchor(pool[:, 0], pool), rtol=0, atol=0)


def test_choose_anchor_follows_the_variant() -> None:
    pool = random_pool(10, 5, 4, torch.float32, seed=10)
    dynamic = torch.tensor(anchor_loop(pool))
    for variant in VARIANTS:
        got = SPACLLoss(variant=variant).choose_anchor(pool)
        want = torch.zeros(10, dtype=torch.long) if variant in ("no_anchor", "oaa") else dynamic
        assert torch.equal(got, want), variant


# -- ablations -----------------------------------------------------------------------------
def test_every_variant_runs_and_reports() -> None:
    pool = random_pool(12, 5, 8, torch.float32, seed=11).requires_grad_(True)
    for variant in VARIANTS:
        loss = SPACLLoss(0.1, variant=variant)
        value = loss(None, pool)
        value.backward()
        assert torch.isfinite(value)
        step = loss.last
        assert step is not None
        logs = step.log_dict()
        assert all(isinstance(x, float) and math.isfinite(x) for x in logs.values())
        adversarial = variant not in ("no_adversarial", "ib", "ib_h")
        selection = variant not in ("no_negative_selection", "ib")
        assert (loss.adversarial is not None) == adversarial
        assert ("spacl/d_loss" in logs) == adversarial
        assert step.candidate_negatives.tolist() == [11 * 5 + int(adversarial)] * 12
        if selection:
            assert (step.kept_negatives < step.candidate_negatives).any()
        else:
            assert torch.equal(step.kept_negatives, step.candidate_negatives)
        if variant in ("no_anchor", "oaa"):
            assert (step.anchor == 0).all()
        assert not (step.positives == step.anchor.unsqueeze(1)).any()
        assert (step.positives.sort(1).values.diff(dim=1) > 0).all()  # distinct


def test_ib_h_is_no_adversarial() -> None:
    pool = random_pool(8, 5, 6, torch.float64, seed=12)
    a = SPACLLoss(variant="ib_h")(None, pool)
    b = SPACLLoss(variant="no_adversarial")(None, pool)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_random_positives_are_uniform_and_reproducible() -> None:
    pool = random_pool(4, 5, 6, torch.float64, seed=13)
    loss = SPACLLoss(num_positives=2, variant="no_hard_positive", num_adversarial=0)
    counts = torch.zeros(4, 5)
    draws = []
    for _ in range(150):
        loss(None, pool)
        assert loss.last is not None
        draws.append(loss.last.positives.clone())
        counts.scatter_add_(1, loss.last.positives, torch.ones(4, 2))
    anchor = torch.tensor(anchor_loop(pool))
    assert (counts.gather(1, anchor.unsqueeze(1)) == 0).all()
    others = counts.masked_fill(torch.nn.functional.one_hot(anchor, 5).bool(), math.nan)
    # each non-anchor view is picked with probability 1/2 per draw: Binomial(150, 1/2), sd 6.1
    assert ((others.nan_to_num(75.0) - 75).abs() < 31).all()
    again = SPACLLoss(num_positives=2, variant="no_hard_positive", num_adversarial=0)
    for want in draws[:5]:
        again(None, pool)
        assert again.last is not None
        assert torch.equal(again.last.positives, want)


def test_oaa_positives_are_augmented_views() -> None:
    pool = random_pool(16, 5, 6, torch.float64, seed=14)
    loss = SPACLLoss(variant="oaa", num_positives=3)
    loss(None, pool)
    assert loss.last is not None
    assert (loss.last.anchor == 0).all()
    assert ((loss.last.positives >= 1) & (loss.last.positives <= 4)).all()


# -- gradients and the game ----------------------------------------------------------------
def test_no_gradient_from_the_game_reaches_the_encoder() -> None:
    torch.manual_seed(0)
    encoder = torch.nn.Linear(6, 4)
    x = torch.randn(10, 5, 6)
    loss = SPACLLoss(0.2, num_adversarial=2)
    value = loss(None, encoder(x))
    assert loss.adversarial is not None
    # the game ran its own backward passes: nothing landed in the encoder
    assert all(p.grad is None for p in encoder.parameters())
    players = list(loss.adversarial.parameters())
    assert all(
        g is None for g in torch.autograd.grad(value, players, retain_graph=True, allow_unused=True)
    )
    d_grads = [
        p.grad.clone() for p in loss.adversarial.discriminator.parameters() if p.grad is not None
    ]
    value.backward()
    assert all(p.grad is not None for p in encoder.parameters())
    after = [p.grad for p in loss.adversarial.discriminator.parameters() if p.grad is not None]
    assert all(torch.equal(u, w) for u, w in zip(d_grads, after, strict=True))
    assert all(p.grad is None for p in loss.adversarial.generator.parameters())


def test_candidates_are_constants_by_default() -> None:
    pool = random_pool(6, 5, 4, torch.float64, seed=15).requires_grad_(True)
    loss = SPACLLoss(variant="no_adversarial")
    loss(None, pool).backward()
    assert loss.last is not None and pool.grad is not None
    nonzero = pool.grad.abs().sum(-1) > 0
    expected = torch.nn.functional.one_hot(loss.last.anchor, 5).bool()
    assert torch.equal(nonzero, expected)


def test_eval_mode_does_not_play() -> None:
    pool = random_pool(6, 5, 4, torch.float32, seed=16)
    loss = SPACLLoss(embedding_dim=4).eval()
    assert loss.adversarial is not None
    before = copy.deepcopy(loss.adversarial.state_dict())
    loss(None, pool)
    assert loss.last is not None and loss.last.d_loss is None
    after = loss.adversarial.state_dict()
    assert all(
        torch.equal(before[k], after[k]) for k in before if isinstance(before[k], torch.Tensor)
    )


def test_state_dict_resume_is_exact() -> None:
    pools = [random_pool(6, 5, 4, torch.float32, seed=20 + k) for k in range(5)]
    a = SPACLLoss(
        variant="no_hard_positive", num_adversarial=2, generator=torch.Generator().manual_seed(3)
    )
    for p in pools[:3]:
        a(None, p)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    b = SPACLLoss(
        variant="no_hard_positive", num_adversarial=2, generator=torch.Generator().manual_seed(99)
    )
    assert b.adversarial is None  # built lazily from the checkpoint
    b.load_state_dict(torch.load(buffer, weights_only=True))
    for p in pools[3:]:
        va, vb = a(None, p), b(None, p)
        assert torch.equal(va, vb)
        assert a.last is not None and b.last is not None
        assert torch.equal(a.last.positives, b.last.positives)
        assert torch.equal(a.last.d_loss, b.last.d_loss)  # type: ignore[arg-type]


# -- bad input -----------------------------------------------------------------------------
def test_bad_inputs_name_the_problem() -> None:
    pool = torch.randn(4, 5, 3)
    with pytest.raises(ValueError, match="num_positives=4"):
        SPACLLoss(num_positives=4)(None, torch.randn(4, 4, 3))
    with pytest.raises(ValueError, match="share"):
        SPACLLoss(share=0.0)
    with pytest.raises(ValueError, match="share"):
        SPACLLoss(share=1.2)
    with pytest.raises(ValueError, match="anchors must be"):
        SPACLLoss()(torch.randn(4, 2), pool)
    with pytest.raises(ValueError, match="anchors must be"):
        SPACLLoss()(torch.randn(3, 5, 3), pool)
    with pytest.raises(ValueError, match="labels has length 3"):
        SPACLLoss()(None, pool, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="pool contains 1 non-finite"):
        bad = pool.clone()
        bad[1, 2, 0] = math.nan
        SPACLLoss()(None, bad)
    with pytest.raises(ValueError, match="anchors contains"):
        SPACLLoss()(torch.full((4, 3), math.inf), pool)
    with pytest.raises(ValueError, match="needs labels"):
        SPACLLoss(positive_pool="class")(None, pool)
    with pytest.raises(ValueError, match="variant"):
        SPACLLoss(variant="no_game")
    with pytest.raises(ValueError, match="no anchor has a negative"):
        SPACLLoss(num_adversarial=0)(None, torch.randn(1, 5, 3))
    with pytest.raises(ValueError, match="anchor_index"):
        SPACLLoss()(None, pool, anchor_index=torch.tensor([0, 1, 2, 5]))
    with pytest.raises(TypeError, match="dtype"):
        SPACLLoss()(pool.double(), pool)
    with pytest.raises(ValueError, match="class pool of instance"):
        SPACLLoss(num_positives=2, positive_pool="class")(
            None, torch.randn(3, 2, 3), torch.tensor([0, 1, 1])
        )
    with pytest.raises(ValueError, match="num_adversarial"):
        SPACLLoss(num_adversarial=-1)
    with pytest.raises(ValueError, match="temperature"):
        SPACLLoss(temperature=0.0)
    with pytest.raises(ValueError, match="embedding_dim=8"):
        SPACLLoss(embedding_dim=8)(None, pool)
    with pytest.raises(ValueError, match="negatives"):
        SPACLLoss(negatives="everything")


def test_linear_mass_and_reduction() -> None:
    b, v, d, tau = 6, 4, 5, 0.25
    pool = random_pool(b, v, d, torch.float64, seed=30)
    loss = SPACLLoss(tau, share=0.6, variant="no_adversarial", mass="linear", reduction="none")
    per_anchor = loss(None, pool)
    assert per_anchor.shape == (b,) and loss.last is not None
    f = unit_rows(pool[torch.arange(b), loss.last.anchor])
    t = unit_rows(pool).reshape(b * v, d)
    for i in range(b):
        sims = [dot(f[i], t[r]) for r in range(b * v) if r // v != i]
        order = sorted(range(len(sims)), key=lambda j: -sims[j])
        w = [(1 + x) / 2 for x in sims]
        keep, acc = set(), 0.0
        for j in order:
            keep.add(j)
            acc += w[j]
            if acc >= 0.6 * sum(w):
                break
        pos = [math.exp(dot(f[i], t[i * v + p]) / tau) for p in loss.last.positives[i].tolist()]
        neg = [math.exp(sims[j] / tau) for j in keep]
        want = -math.log(sum(pos) / (sum(pos) + sum(neg)))
        assert abs(float(per_anchor[i]) - want) < 1e-10
        assert int(loss.last.kept_negatives[i]) == len(keep)


# -- supervised modes, positive forms, queue negatives (issue 11 / 14) ----------------------
def supervised_loop(
    online: torch.Tensor,
    pool: torch.Tensor,
    hard: list[list[int]],
    labels: torch.Tensor,
    tau: float,
    share: float,
    mode: str,
    positive_mode: str = "log_sum_exp",
    queue: torch.Tensor | None = None,
    queue_labels: torch.Tensor | None = None,
) -> float:
    """Per-anchor loop of SPACL's supervised modes (flat positive rows ``hard``).

    ``instance``: the hard views are the positives, same-class instances are neither;
    ``instance_class``: plus every view of every other same-class instance (and same-class
    queue rows).  Negatives: other-class views (and queue rows), cut before the loss.
    """
    b, v, d = pool.shape
    f = unit_rows(online.double())
    t = unit_rows(pool.double()).reshape(b * v, d)
    q = None if queue is None else unit_rows(queue.double())
    total = 0.0
    for i in range(b):
        pos = [dot(f[i], t[r]) / tau for r in hard[i]]
        cand = [dot(f[i], t[r]) / tau for r in range(b * v) if labels[r // v] != labels[i]]
        if mode == "instance_class":
            pos += [
                dot(f[i], t[r]) / tau
                for r in range(b * v)
                if r // v != i and labels[r // v] == labels[i]
            ]
        if q is not None and queue_labels is not None:
            for k in range(q.shape[0]):
                x = dot(f[i], q[k]) / tau
                if queue_labels[k] != labels[i]:
                    cand.append(x)
                elif mode == "instance_class":
                    pos.append(x)
        keep = cut_loop(cand, share, tau)
        neg = sum(math.exp(x) for x, k in zip(cand, keep, strict=True) if k)
        den = math.log(sum(math.exp(x) for x in pos) + neg)
        if positive_mode == "log_sum_exp":
            total += den - math.log(sum(math.exp(x) for x in pos))
        else:
            total += sum(den - x for x in pos) / len(pos)
    return total / b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["instance", "instance_class"])
@pytest.mark.parametrize("positive_mode", ["log_sum_exp", "mean"])
def test_supervised_modes_match_loop(dtype: torch.dtype, mode: str, positive_mode: str) -> None:
    b, v, d, tau = 8, 4, 5, 0.25
    pool = random_pool(b, v, d, dtype, seed=40)
    online = random_pool(b, v, d, dtype, seed=41)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 2, 1])
    loss = SPACLLoss(
        tau, share=0.8, variant="no_adversarial", positive_pool=mode, positive_mode=positive_mode
    )
    value = loss(online, pool, labels)
    anchors = anchor_loop(pool)
    hard = [
        [i * v + p for p in farthest_loop(pool[i], list(range(v)), anchors[i], 2)] for i in range(b)
    ]
    assert loss.last is not None and loss.last.anchor.tolist() == anchors
    f = torch.stack([online[i, anchors[i]] for i in range(b)])
    want = supervised_loop(f, pool, hard, labels, tau, 0.8, mode, positive_mode)
    torch.testing.assert_close(
        value.double(), torch.tensor(want, dtype=torch.float64), **tol(dtype)
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["instance", "instance_class"])
def test_queue_negatives_join_before_the_cut(dtype: torch.dtype, mode: str) -> None:
    b, v, d, tau = 6, 4, 5, 0.2
    pool = random_pool(b, v, d, dtype, seed=42)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    g = torch.Generator().manual_seed(43)
    queue = torch.randn(30, d, generator=g, dtype=torch.float64).to(dtype)
    queue_labels = torch.randint(0, 4, (30,), generator=g)
    loss = SPACLLoss(tau, share=0.9, variant="no_adversarial", positive_pool=mode)
    value = loss(None, pool, labels, extra_negatives=queue, extra_negative_labels=queue_labels)
    assert loss.last is not None
    rows = torch.arange(b)
    hard = (loss.last.positives + rows.unsqueeze(1) * v).tolist()
    f = pool[rows, loss.last.anchor]
    want = supervised_loop(
        f, pool, hard, labels, tau, 0.9, mode, queue=queue, queue_labels=queue_labels
    )
    torch.testing.assert_close(
        value.double(), torch.tensor(want, dtype=torch.float64), **tol(dtype)
    )
    other = (labels.unsqueeze(1) != labels.unsqueeze(0)).sum(1) * v
    from_queue = (labels.unsqueeze(1) != queue_labels.unsqueeze(0)).sum(1)
    assert loss.last.candidate_negatives.tolist() == (other + from_queue).tolist()


def test_queue_without_labels_and_empty_queue() -> None:
    b, v, d, tau = 5, 3, 4, 0.3
    pool = random_pool(b, v, d, torch.float64, seed=44)
    queue = torch.randn(12, d, generator=torch.Generator().manual_seed(45), dtype=torch.float64)
    loss = SPACLLoss(tau, share=0.95, variant="no_adversarial")
    value = loss(None, pool, extra_negatives=queue)
    assert loss.last is not None
    f = unit_rows(pool[torch.arange(b), loss.last.anchor])
    t = unit_rows(pool).reshape(b * v, d)
    qu = unit_rows(queue)
    total = 0.0
    for i in range(b):
        pos = [dot(f[i], t[i * v + p]) / tau for p in loss.last.positives[i].tolist()]
        cand = [dot(f[i], t[r]) / tau for r in range(b * v) if r // v != i]
        cand += [dot(f[i], qu[k]) / tau for k in range(12)]
        keep = cut_loop(cand, 0.95, tau)
        num = sum(math.exp(x) for x in pos)
        total += -math.log(
            num / (num + sum(math.exp(x) for x, k in zip(cand, keep, strict=True) if k))
        )
    torch.testing.assert_close(
        value, torch.tensor(total / b, dtype=torch.float64), rtol=1e-10, atol=1e-10
    )
    # a queue with zero rows is no queue
    plain = SPACLLoss(tau, share=0.95, variant="no_adversarial")(None, pool)
    empty = SPACLLoss(tau, share=0.95, variant="no_adversarial")(
        None, pool, extra_negatives=queue[:0]
    )
    assert torch.equal(plain, empty)


def test_exp_mass_is_still_available() -> None:
    """The old reading changes the loss by at most -log(share) against no cut."""
    pool = random_pool(8, 5, 6, torch.float64, seed=46)
    share = 0.95
    cut = SPACLLoss(0.2, share=share, variant="no_adversarial", mass="exp", reduction="none")
    full = SPACLLoss(0.2, share=1.0, variant="no_adversarial", reduction="none")
    gap = full(None, pool) - cut(None, pool)
    assert bool((gap >= -1e-12).all()) and bool((gap <= -math.log(share) + 1e-12).all())
    literal = SPACLLoss(0.2, share=share, variant="no_adversarial", reduction="none")
    assert float((full(None, pool) - literal(None, pool)).max()) > -math.log(share)


def test_new_options_reject_bad_input() -> None:
    pool = torch.randn(4, 5, 3)
    with pytest.raises(ValueError, match="mass must be one of"):
        SPACLLoss(mass="softmax")
    with pytest.raises(ValueError, match="positive_pool must be one of"):
        SPACLLoss(positive_pool="batch")
    with pytest.raises(ValueError, match="positive_mode must be one of"):
        SPACLLoss(positive_mode="sum")
    with pytest.raises(ValueError, match="num_adversarial must be an integer >= 0"):
        SPACLLoss(num_adversarial=-2)
    for mode in ("instance_class", "class"):
        with pytest.raises(ValueError, match=f"positive_pool='{mode}' is a supervised mode"):
            SPACLLoss(positive_pool=mode)(None, pool)
    labels = torch.tensor([0, 1, 0, 1])
    with pytest.raises(ValueError, match="needs extra_negative_labels"):
        SPACLLoss(positive_pool="instance_class")(
            None, pool, labels, extra_negatives=torch.randn(6, 3)
        )
    with pytest.raises(ValueError, match=r"extra_negatives must be \[Q, 3\]"):
        SPACLLoss()(None, pool, extra_negatives=torch.randn(6, 4))
    with pytest.raises(ValueError, match="extra_negative_labels has length 2"):
        SPACLLoss()(
            None,
            pool,
            labels,
            extra_negatives=torch.randn(6, 3),
            extra_negative_labels=torch.tensor([0, 1]),
        )


def test_every_view_anchor_set_is_the_mean_over_view_anchors() -> None:
    b, v, d = 6, 4, 5
    pool = random_pool(b, v, d, torch.float64, seed=50)
    online = random_pool(b, v, d, torch.float64, seed=51)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    every = SPACLLoss(
        0.2, variant="no_adversarial", anchor_set="every_view", positive_pool="instance_class"
    )
    value = every(online, pool, labels)
    one = SPACLLoss(0.2, variant="no_adversarial", positive_pool="instance_class")
    per_view = [one(online, pool, labels, anchor_index=torch.full((b,), u)) for u in range(v)]
    torch.testing.assert_close(value, torch.stack(per_view).mean(), rtol=1e-12, atol=1e-12)
    assert every.last is not None and every.last.anchor.tolist() == [
        u for _ in range(b) for u in range(v)
    ]
    assert every(online, pool, labels).shape == ()
    every.reduction = "none"  # instance-major rows: i V + u
    per_row = every(online, pool, labels).reshape(b, v)
    one.reduction = "none"
    for u in range(v):
        index = torch.full((b,), u)
        torch.testing.assert_close(
            per_row[:, u], one(online, pool, labels, anchor_index=index), rtol=1e-12, atol=1e-12
        )
    with pytest.raises(ValueError, match="anchor_set must be one of"):
        SPACLLoss(anchor_set="all")
    with pytest.raises(ValueError, match="online='anchor_view' embeds one"):
        SPACLLoss(anchor_set="every_view", online="anchor_view")
    with pytest.raises(ValueError, match=r"needs the online embeddings of every view"):
        every(online[:, 0], pool, labels)


# -- every view an anchor: the fused path against the view-by-view loop (issue 19) ---------
#: (positive_pool, labels, queue) settings of the every-view comparison
EVERY_VIEW_SETTINGS = {
    "unsupervised": ("instance", False, False),
    "unsupervised_queue": ("instance", False, True),
    "weak_labels": ("instance", True, False),
    "instance_class": ("instance_class", True, False),
    "instance_class_queue": ("instance_class", True, True),
    "class": ("class", True, False),
}


def replay_every_view_game(
    twin: SPACLLoss, pool: torch.Tensor, positives: list[list[int]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The every-view game with its randomness and state fixed: one round, then one draw.

    ``twin`` is a copy of the loss taken before its forward pass.  The round is played on
    each instance's dynamic anchor (view 0 without one) and that row's positives, then the
    updated generator draws the negatives of all ``B V`` rows.
    """
    from spacl.mining.pool import unit

    b, v, d = pool.shape
    flat = unit(pool.detach()).reshape(b * v, d)
    anchor = anchor_loop(pool) if twin.parts.dynamic_anchor else [0] * b
    rows = [i * v + anchor[i] for i in range(b)]
    assert twin.adversarial is not None
    d_loss, g_loss = twin.adversarial.step(
        flat[rows], flat[torch.tensor([positives[r] for r in rows])]
    )
    return twin.adversarial.sample(flat), d_loss, g_loss


def every_view_case(
    variant: str,
    setting: str,
    k_adv: int,
    dtype: torch.dtype,
    pool_as_anchors: bool = False,
    **options: object,
) -> None:
    """Fused every-view loss == the view loop, values, kept counts, positives and gradients.

    ``pool_as_anchors``: ``anchors=None`` (one encoder: the pool's views are the anchors),
    the gradient taken with respect to the pool."""
    b, v, d, tau = 6, 4, 5, 0.2
    pool_kind, with_labels, with_queue = EVERY_VIEW_SETTINGS[setting]
    pool = random_pool(b, v, d, dtype, seed=60)
    online = None if pool_as_anchors else random_pool(b, v, d, dtype, seed=61)
    source = pool if online is None else online
    source.requires_grad_(True)
    labels = torch.tensor([0, 1, 2, 0, 1, 2]) if with_labels else None
    g = torch.Generator().manual_seed(62)
    queue = torch.randn(9, d, generator=g, dtype=torch.float64).to(dtype) if with_queue else None
    queue_labels = torch.randint(0, 4, (9,), generator=g) if with_queue and with_labels else None
    loss = SPACLLoss(
        tau,
        num_positives=2,
        share=0.8,
        num_adversarial=k_adv,
        variant=variant,
        positive_pool=pool_kind,
        anchor_set="every_view",
        embedding_dim=d,
        reduction="none",
        **options,  # type: ignore[arg-type]
    )
    twin = copy.deepcopy(loss)
    value = loss(online, pool, labels, extra_negatives=queue, extra_negative_labels=queue_labels)
    assert value.shape == (b * v,)
    (grad,) = torch.autograd.grad(value.mean(), source)
    step = loss.last
    assert step is not None

    given = None
    if not loss.parts.hard_positives:  # random positives: check them, then use them
        flat = step.positives
        if pool_kind != "class":
            assert not bool((step.positives == step.anchor.unsqueeze(1)).any())
            flat = step.positives + (torch.arange(b * v) // v * v).unsqueeze(1)
        given = flat.tolist()
        assert all(len(set(row)) == 2 and r not in row for r, row in enumerate(given))
    ref_source = source.detach().double().requires_grad_(True)
    ref_online, ref_pool = (None, ref_source) if online is None else (ref_source, pool)
    _, _, positives = spacl_every_view_ref(loss, ref_online, ref_pool, labels, positives=given)
    if given is None:
        want_pos = (
            positives if pool_kind == "class" else [[p % v for p in row] for row in positives]
        )
        assert step.positives.tolist() == want_pos
    generated = None
    if loss.effective_adversarial > 0:
        generated, d_loss, g_loss = replay_every_view_game(twin, pool, positives)
        assert step.d_loss is not None and step.g_loss is not None
        torch.testing.assert_close(step.d_loss, d_loss, **tol(dtype))
        torch.testing.assert_close(step.g_loss, g_loss, **tol(dtype))
    else:
        assert step.d_loss is None and loss.adversarial is None
    want, kept, _ = spacl_every_view_ref(
        loss, ref_online, ref_pool, labels, queue, queue_labels, generated, positives
    )
    (want_grad,) = torch.autograd.grad(want.mean(), ref_source)
    torch.testing.assert_close(value.double(), want.detach(), **tol(dtype))
    torch.testing.assert_close(grad.double(), want_grad, **tol(dtype))
    assert step.kept_negatives.tolist() == kept
    assert step.anchor.tolist() == [u for _ in range(b) for u in range(v)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k_adv", [0, 1, 8])
@pytest.mark.parametrize("setting", list(EVERY_VIEW_SETTINGS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_view_fused_matches_the_view_loop(
    variant: str, setting: str, k_adv: int, dtype: torch.dtype
) -> None:
    if k_adv != 1 and not VARIANT_PARTS[variant].adversarial:
        pytest.skip("K_adv is not used by this variant")
    every_view_case(variant, setting, k_adv, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "options",
    [
        {"negatives": "anchor_views"},
        {"positive_mode": "mean"},
        {"mass": "exp"},
        {"mass": "linear"},
        {"normalize": "ball", "detach_candidates": False},
        {"negatives": "anchor_views", "mass": "exp", "positive_mode": "mean"},
    ],
    ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()),
)
@pytest.mark.parametrize("setting", ["unsupervised_queue", "instance_class_queue"])
def test_every_view_fused_options_match_the_view_loop(
    options: dict[str, object], setting: str, dtype: torch.dtype
) -> None:
    every_view_case("full", setting, 2, dtype, **options)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("detach", "positive_mode"), [(True, "log_sum_exp"), (False, "log_sum_exp"), (False, "mean")]
)
@pytest.mark.parametrize("k_adv", [0, 8])
@pytest.mark.parametrize("setting", list(EVERY_VIEW_SETTINGS))
def test_every_view_mirrored_logits_match_the_view_loop(
    setting: str,
    k_adv: int,
    detach: bool,
    positive_mode: str,
    dtype: torch.dtype,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``anchors=None``: the in-batch logits are mirrored from their upper block triangle
    (blocks of 6 rows here, 4 block rows), and under ``instance_class`` with
    ``detach_candidates=False`` the class positives' gradient is one ``bmm`` of
    ``W + W^T``: equal to the view loop, values and gradients, with the game on."""
    monkeypatch.setattr(mirror_module, "_BLOCK_ROWS", 6)
    monkeypatch.setattr(mirror_module, "_MIN_ROWS", 8)
    monkeypatch.setattr(mirror_module, "_MAX_THREADS", 1024)
    variant = "full" if k_adv else "no_adversarial"
    every_view_case(
        variant,
        setting,
        k_adv,
        dtype,
        pool_as_anchors=True,
        detach_candidates=detach,
        positive_mode=positive_mode,
    )


@pytest.mark.parametrize("positive_mode", ["log_sum_exp", "mean"])
@pytest.mark.parametrize("detach", [True, False])
def test_every_view_class_pool_with_a_one_instance_class_matches_the_view_loop(
    detach: bool, positive_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class with one instance: its rows have no class positive (log-sum-exp ``-inf``,
    zero gradient through it), the others as usual; mirrored blocks, tied or not."""
    monkeypatch.setattr(mirror_module, "_BLOCK_ROWS", 6)
    monkeypatch.setattr(mirror_module, "_MIN_ROWS", 8)
    monkeypatch.setattr(mirror_module, "_MAX_THREADS", 1024)
    b, v, d = 6, 4, 5
    pool = random_pool(b, v, d, torch.float64, seed=66).requires_grad_(True)
    labels = torch.tensor([0, 1, 2, 0, 1, 3])
    loss = SPACLLoss(
        0.2,
        share=0.8,
        variant="ib_h",
        positive_pool="instance_class",
        anchor_set="every_view",
        reduction="none",
        detach_candidates=detach,
        positive_mode=positive_mode,  # type: ignore[arg-type]
    )
    value = loss(None, pool, labels)
    (grad,) = torch.autograd.grad(value.mean(), pool)
    ref_pool = pool.detach().clone().requires_grad_(True)
    want, kept, _ = spacl_every_view_ref(loss, None, ref_pool, labels)
    (want_grad,) = torch.autograd.grad(want.mean(), ref_pool)
    assert bool(torch.isfinite(value).all()) and bool(torch.isfinite(grad).all())
    torch.testing.assert_close(value, want, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(grad, want_grad, rtol=1e-10, atol=1e-10)
    assert loss.last is not None and loss.last.kept_negatives.tolist() == kept


@pytest.mark.parametrize("supervised", [False, True])
def test_every_view_pool_as_anchors_matches_the_view_loop(supervised: bool) -> None:
    """``anchors=None``: the gradient reaches the pool through its anchor views (and,
    supervised with ``detach_candidates=False`` as the shipped recipes, through the
    candidates too: the online and target sides are then one normalised pool)."""
    b, v, d = 5, 3, 4
    pool = random_pool(b, v, d, torch.float64, seed=63).requires_grad_(True)
    labels = torch.tensor([0, 1, 0, 1, 1]) if supervised else None
    options: dict[str, object] = {}
    if supervised:
        options = {
            "positive_pool": "instance_class",
            "positive_mode": "mean",
            "detach_candidates": False,
        }
    loss = SPACLLoss(
        0.3,
        share=0.9,
        variant="ib_h",
        anchor_set="every_view",
        reduction="none",
        **options,  # type: ignore[arg-type]
    )
    value = loss(None, pool, labels)
    (grad,) = torch.autograd.grad(value.mean(), pool)
    want, kept, _ = spacl_every_view_ref(loss, None, pool, labels)
    (want_grad,) = torch.autograd.grad(want.mean(), pool)
    torch.testing.assert_close(value, want, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(grad, want_grad, rtol=1e-10, atol=1e-10)
    assert loss.last is not None and loss.last.kept_negatives.tolist() == kept


def adam_steps(optimizer: torch.optim.Optimizer) -> list[int]:
    return [int(state["step"]) for state in optimizer.state.values()]


@pytest.mark.parametrize("mode", ["dynamic", "dynamic_views", "anchor_index", "every_view"])
@pytest.mark.parametrize("variant", [v for v in VARIANTS if VARIANT_PARTS[v].adversarial])
def test_one_forward_plays_exactly_one_game_round(mode: str, variant: str) -> None:
    """The game is played once per forward pass in every anchor mode (issue 19)."""
    b, v, d = 6, 4, 5
    pool = random_pool(b, v, d, torch.float32, seed=64)
    loss = SPACLLoss(
        0.2,
        num_adversarial=3,
        variant=variant,
        embedding_dim=d,
        anchor_set="every_view" if mode == "every_view" else "dynamic",
    )
    adversarial = loss.adversarial
    assert adversarial is not None
    for round_ in (1, 2):
        if mode == "anchor_index":
            a = loss.choose_anchor(pool)
            loss(pool[torch.arange(b), a], pool, anchor_index=a)
        elif mode == "dynamic":
            loss(None, pool)
        else:
            loss(random_pool(b, v, d, torch.float32, seed=65), pool)
        # one D step and one G step: every parameter of each player stepped once per call
        assert adam_steps(adversarial.opt_g) == [round_] * 4
        assert adam_steps(adversarial.opt_d) == [round_] * 4
    loss.eval()
    loss(None, pool)
    assert adam_steps(adversarial.opt_g) == [2] * 4
