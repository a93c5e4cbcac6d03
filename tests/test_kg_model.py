"""Link predictor, its objectives against loop references, and an end-to-end run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from spacl.data.kg import load_kg
from spacl.losses.kg import LinkInfoNCELoss, LinkSPACLLoss
from spacl.losses.kg.positives import hard_pairs
from spacl.mining.cut import RelativeThresholdNegatives
from spacl.models.kg import LinkPredictor
from spacl.tasks.kg import kg_config, train_kg

torch.set_default_dtype(torch.float32)


def test_complex_score_is_re_of_trilinear_product() -> None:
    torch.manual_seed(0)
    m = LinkPredictor(7, 3, 8, "complex", init_scale=1.0).double()
    h, r = torch.tensor([0, 3, 6]), torch.tensor([2, 0, 1])
    k = 4
    ent = torch.complex(m.entity.weight[:, :k], m.entity.weight[:, k:])
    rel = torch.complex(m.relation.weight[:, :k], m.relation.weight[:, k:])
    want = torch.stack(
        [
            torch.stack([(ent[hh] * rel[rr] * ent[t].conj()).sum().real for t in range(7)])
            for hh, rr in zip(h.tolist(), r.tolist(), strict=True)
        ]
    )
    torch.testing.assert_close(m(h, r), want, rtol=1e-12, atol=1e-12)


def test_distmult_and_normalized_scores() -> None:
    torch.manual_seed(0)
    m = LinkPredictor(5, 2, 6, "distmult", init_scale=1.0, normalize=True).double()
    h, r = torch.tensor([1, 4]), torch.tensor([0, 1])
    q = m.entity.weight[h] * m.relation.weight[r]
    q = q / q.norm(dim=1, keepdim=True)
    e = m.entity.weight / m.entity.weight.norm(dim=1, keepdim=True)
    torch.testing.assert_close(m(h, r), q @ e.T, rtol=1e-12, atol=1e-12)
    assert float(m(h, r).detach().abs().max()) <= 1.0 + 1e-12


def test_model_argument_errors() -> None:
    with pytest.raises(ValueError, match="dim must be even"):
        LinkPredictor(3, 2, 5, "complex")
    with pytest.raises(ValueError, match="kind must be one of"):
        LinkPredictor(3, 2, 4, "transe")
    m = LinkPredictor(3, 2, 4)
    with pytest.raises(ValueError, match=r"heads holds ids outside \[0, 3\)"):
        m(torch.tensor([3]), torch.tensor([0]))


def test_n3_closed_form() -> None:
    m = LinkPredictor(2, 1, 2, "complex")
    with torch.no_grad():
        m.entity.weight.copy_(torch.tensor([[3.0, 4.0], [0.0, 1.0]]))
        m.relation.weight.copy_(torch.tensor([[1.0, 0.0]]))
    # |3 + 4i|^3 = 125, |1|^3 = 1; one query
    assert float(m.n3(torch.tensor([0]), torch.tensor([0])).detach()) == pytest.approx(126.0)
    assert float(
        m.n3(torch.tensor([0]), torch.tensor([0]), torch.tensor([1])).detach()
    ) == pytest.approx(127.0)


def _problem(seed: int, b: int = 6, e: int = 12, d: int = 5, dtype: torch.dtype = torch.float64):
    gen = torch.Generator().manual_seed(seed)
    query = torch.randn(b, d, generator=gen, dtype=dtype)
    entities = torch.randn(e, d, generator=gen, dtype=dtype)
    positives = torch.rand(b, e, generator=gen) < 0.25
    positives[torch.arange(b), torch.randint(0, e, (b,), generator=gen)] = True
    return query, entities, positives


def infonce_loop(q: torch.Tensor, ents: torch.Tensor, pos: torch.Tensor, tau: float) -> float:
    losses = []
    for a in range(q.shape[0]):
        logits = [float(q[a] @ ents[k]) / tau for k in range(ents.shape[0])]
        negs = [logits[k] for k in range(len(logits)) if not pos[a, k]]
        for p in range(len(logits)):
            if pos[a, p]:
                den = math.log(math.exp(logits[p]) + sum(math.exp(x) for x in negs))
                losses.append(den - logits[p])
    return sum(losses) / len(losses)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_infonce_matches_per_triple_loop(dtype: torch.dtype) -> None:
    q, ents, pos = _problem(0, dtype=dtype)
    got = LinkInfoNCELoss(temperature=0.5)(q, ents, pos)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert float(got) == pytest.approx(infonce_loop(q.double(), ents.double(), pos, 0.5), rel=tol)


def test_infonce_sampled_negatives_are_a_subset() -> None:
    q, ents, pos = _problem(1)
    loss = LinkInfoNCELoss(num_negatives=3, generator=torch.Generator().manual_seed(0))
    full = LinkInfoNCELoss()
    # fewer negatives in every denominator: never a larger loss
    assert float(loss(q, ents, pos)) <= float(full(q, ents, pos)) + 1e-12
    with pytest.raises(ValueError, match="at least one positive"):
        full(q, ents, torch.zeros_like(pos))


def spacl_loop(q: torch.Tensor, ents: torch.Tensor, pos: torch.Tensor, tau: float) -> float:
    """SPACL with every positive kept, no cut, no generated negative (mean over queries)."""
    losses = []
    for a in range(q.shape[0]):
        logits = [float(q[a] @ ents[k]) / tau for k in range(ents.shape[0])]
        p = sum(math.exp(x) for k, x in enumerate(logits) if pos[a, k])
        n = sum(math.exp(x) for k, x in enumerate(logits) if not pos[a, k])
        losses.append(-math.log(p / (p + n)))
    return sum(losses) / len(losses)


def test_spacl_reduces_to_multi_positive_infonce() -> None:
    q, ents, pos = _problem(2)
    loss = LinkSPACLLoss(
        temperature=0.7,
        num_positives=ents.shape[0],
        share=1.0,
        num_adversarial=0,
        pool_size=ents.shape[0],
    )
    assert float(loss(q, ents, pos)) == pytest.approx(spacl_loop(q, ents, pos, 0.7), rel=1e-12)


def fps_loop(q: torch.Tensor, ents: torch.Tensor, members: list[int], k: int) -> list[int]:
    def d(u: torch.Tensor, v: torch.Tensor) -> float:
        return 1.0 - float(u @ v / (u.norm() * v.norm()))

    chosen: list[int] = []
    points = [q]
    for _ in range(min(k, len(members))):
        rest = [m for m in members if m not in chosen]
        best = max(rest, key=lambda m: (min(d(ents[m], p) for p in points), -m))
        chosen.append(best)
        points.append(ents[best])
    return chosen


def test_hard_positives_are_farthest_point_selection() -> None:
    q, ents, pos = _problem(3, b=8, e=15)
    pos[0] = False
    pos[0, 3] = True  # a query with a single known tail keeps it
    assert int(pos.sum(1).max()) > 3
    loss = LinkSPACLLoss(num_positives=2, pool_size=15)
    hard = loss.hard_positives(q, ents, pos)
    assert not bool((hard & ~pos).any())
    for a in range(q.shape[0]):
        members = pos[a].nonzero().squeeze(1).tolist()
        want = set(fps_loop(q[a], ents, members, 2))
        assert set(hard[a].nonzero().squeeze(1).tolist()) == want
    rand = LinkSPACLLoss(num_positives=2, variant="no_hard_positive")
    random_hard = rand.hard_positives(q, ents, pos)
    assert torch.equal(random_hard.sum(1), pos.sum(1).clamp_max(2))
    assert not bool((random_hard & ~pos).any())


def test_spacl_cut_keeps_the_heaviest_share() -> None:
    q, ents, pos = _problem(4, b=5, e=40)
    loss = LinkSPACLLoss(temperature=0.3, share=0.8, num_adversarial=0)
    loss(q, ents, pos)
    assert loss.last is not None
    # brute force: kept count per row of the top-share prefix of exp(logits) of negatives
    logits = (q @ ents.T) / 0.3
    kept = []
    for a in range(q.shape[0]):
        w = sorted(
            (math.exp(float(x)) for k, x in enumerate(logits[a]) if not pos[a, k]), reverse=True
        )
        total, acc, n = sum(w), 0.0, 0
        while acc < 0.8 * total:
            acc += w[n]
            n += 1
        kept.append(n)
    assert loss.last.kept_negatives == pytest.approx(sum(kept) / len(kept))


@pytest.mark.parametrize("mass", ["exp", "linear"])
def test_spacl_with_a_cut_equals_a_loop_value_and_gradient(mass: str) -> None:
    """SPACL-KG with the cut (every known tail a hard positive, no generated negative)
    against a loop over queries: the kept negatives are the shortest prefix of the
    non-known entities sorted by logit (ties: lower index first) holding ``share`` of
    the mass; ``-log(sum_pos e^l / (sum_pos e^l + sum_kept e^l))``, mean over queries.
    Under ``"exp"`` the loss reuses the cut's weights; the value and the gradients
    match the loop in float64."""
    q, ents, pos = _problem(11, b=7, e=30, d=4)
    tau, share = 0.4, 0.8
    loss = LinkSPACLLoss(
        temperature=tau,
        num_positives=30,
        pool_size=30,
        share=share,
        num_adversarial=0,
        mass=mass,
    )
    qa, ea = q.clone().requires_grad_(True), ents.clone().requires_grad_(True)
    value = loss(qa, ea, pos)
    value.backward()
    qb, eb = q.clone().requires_grad_(True), ents.clone().requires_grad_(True)
    logits = (qb @ eb.T) / tau
    terms = []
    for a in range(q.shape[0]):
        row = logits[a].detach().tolist()
        negs = sorted((k for k in range(len(row)) if not pos[a, k]), key=lambda k: (-row[k], k))
        mass_of = {
            "exp": lambda x: math.exp(x),
            "linear": lambda x: max((1.0 + x * tau) / 2.0, 0.0),
        }[mass]
        total = sum(mass_of(row[k]) for k in negs)
        kept, acc = [], 0.0
        for k in negs:
            if acc >= share * total:
                break
            kept.append(k)
            acc += mass_of(row[k])
        pos_lse = torch.logsumexp(logits[a][pos[a]], 0)
        den = torch.logsumexp(torch.cat((logits[a][pos[a]], logits[a][kept])), 0)
        terms.append(den - pos_lse)
    want = torch.stack(terms).mean()
    want.backward()
    assert float(value.detach()) == pytest.approx(float(want.detach()), rel=1e-12)
    assert qa.grad is not None and qb.grad is not None and ea.grad is not None
    torch.testing.assert_close(qa.grad, qb.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ea.grad, eb.grad, rtol=1e-10, atol=1e-12)


def test_spacl_full_trains_with_adversarial_negatives() -> None:
    q, ents, pos = _problem(5, dtype=torch.float32)
    q.requires_grad_(True)
    ents.requires_grad_(True)
    loss = LinkSPACLLoss(num_adversarial=2)
    value = loss(q, ents, pos)
    value.backward()
    assert torch.isfinite(value) and q.grad is not None and ents.grad is not None
    assert loss.last is not None and loss.last.d_loss is not None
    assert loss.adversarial is not None and loss.adversarial.num_negatives == 2
    with pytest.raises(ValueError, match="variant must be one of"):
        LinkSPACLLoss(variant="no_anchor")


def cycle_graph(root: Path, e: int = 24) -> Path:
    """Relation r maps entity i to i + r + 1 (mod e): learnable, asymmetric."""
    root.mkdir(parents=True, exist_ok=True)
    rows = [(i, r, (i + r + 1) % e) for i in range(e) for r in range(3)]
    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(rows), generator=gen).tolist()
    split = {"train": perm[:-8], "valid": perm[-8:-4], "test": perm[-4:]}
    for name, idx in split.items():
        lines = [f"e{rows[i][0]}\tr{rows[i][1]}\te{rows[i][2]}" for i in idx]
        (root / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize(
    ("objective", "unit"), [("infonce", "query"), ("spacl", "query"), ("infonce", "triple")]
)
def test_train_kg_learns_a_tiny_graph(tmp_path: Path, objective: str, unit: str) -> None:
    root = cycle_graph(tmp_path / "toy")
    cfg = {
        "data": {"name": "toy", "root": str(root), "unseen": "error"},
        "model": {"dim": 32, "init_scale": 0.1},
        "objective": {"name": objective, "temperature": 1.0},
        "optim": {"name": "adam", "lr": 0.05, "n3": 1e-3},
        "train": {"epochs": 40, "batch_size": 128, "unit": unit},
        "eval": {"every_epochs": 10},
    }
    summary = train_kg(cfg, log=None, run_dir=tmp_path / "run")
    # 24 entities: a random scorer has MRR ~ 0.16
    assert summary["valid"]["mrr"] > 0.6
    assert summary["test"]["hits@10"] > 0.6
    assert (tmp_path / "run" / "summary.json").is_file()
    assert summary["epochs"] == 40 and summary["seconds_per_epoch"] > 0
    # 64 training triples + reciprocals: 128 triples, and 128 queries of one tail each
    assert summary["history"][0]["steps"] == 1 and summary["config"]["train"]["unit"] == unit


def test_kg_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"objective\.name"):
        kg_config({"objective": {"name": "triplet"}})
    with pytest.raises(ValueError, match="modle"):
        kg_config({"modle": {}})
    with pytest.raises(ValueError, match=r"optim\.lr"):
        kg_config({}, ["optim.lr=0"])
    root = cycle_graph(tmp_path / "toy")
    kg = load_kg("toy", root)
    with pytest.raises(ValueError, match=r"objective\.params"):
        train_kg({"objective": {"params": {"betta": 1}}}, kg=kg, log=None)


@pytest.mark.parametrize("share", [0.5, 0.9, 0.99])
@pytest.mark.parametrize("mass", ["exp", "similarity", "linear"])
def test_the_link_cut_is_the_one_entry_point_on_the_joint_keys(share: float, mass: str) -> None:
    """LinkSPACLLoss's cut: ``select`` of the entity logits (``-inf`` off the candidates)
    joined with the generated negatives, no mask, equals the checked mask of the joint
    logits and validity, in each form the loss may read."""
    gen = torch.Generator().manual_seed(int(share * 100))
    logits = torch.randn(20, 300, generator=gen) * torch.linspace(0.5, 6.0, 20).unsqueeze(1)
    invalid = torch.rand(20, 300, generator=gen) < 0.2
    extra = torch.randn(20, 3, generator=gen) * 3
    cut = RelativeThresholdNegatives(share, mass, temperature=0.5)
    keys = torch.cat((logits.masked_fill(invalid, -math.inf), extra), 1)
    valid = torch.cat((~invalid, torch.ones(20, 3, dtype=torch.bool)), 1)
    want = cut(torch.cat((logits, extra), 1), valid)
    assert torch.equal(cut.select(keys), want)
    assert torch.equal(cut.select(keys, form="float"), want.to(keys.dtype))
    entities_only = cut.select(logits.masked_fill(invalid, -math.inf))
    assert torch.equal(entities_only, cut(logits, ~invalid))


def test_run_recipe_dispatches_kg(tmp_path: Path) -> None:
    from spacl.tasks import recipe_task, run_recipe

    root = cycle_graph(tmp_path / "toy")
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(
        "task: kg\n"
        f"data: {{name: toy, root: '{root}', unseen: error}}\n"
        "model: {dim: 8}\n"
        "train: {epochs: 1, batch_size: 256}\n"
    )
    assert recipe_task(recipe) == "kg"
    summary = run_recipe(recipe, ["optim.lr=0.05"], out=tmp_path / "out", quiet=True)
    assert summary is not None and summary["config"]["optim"]["lr"] == 0.05
    assert (tmp_path / "out" / "summary.json").is_file()
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: audio\n")
    with pytest.raises(ValueError, match="config key 'task' must be one of"):
        recipe_task(bad)


def test_spacl_train_runs_a_kg_recipe(tmp_path: Path) -> None:
    from spacl.cli import main

    root = cycle_graph(tmp_path / "toy")
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(
        "task: kg\n"
        f"data: {{name: toy, root: '{root}', unseen: error}}\n"
        "model: {dim: 8}\n"
        "train: {epochs: 1, batch_size: 256}\n"
    )
    out = tmp_path / "run"
    assert main(["train", str(recipe), "optim.lr=0.05", "--out", str(out), "--quiet"]) == 0
    assert (out / "summary.json").is_file()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kept_logsumexp_is_the_masked_logsumexp(dtype: torch.dtype) -> None:
    """The link objective's float-mask log-sum-exp equals the kernel's masked one (issue 19):
    values and gradients, rows keeping nothing included (``-inf``, zero gradient)."""
    from spacl.losses.kernel import masked_logsumexp
    from spacl.losses.kg.terms import KeptLogSumExp as _KeptLogSumExp

    gen = torch.Generator().manual_seed(9)
    logits = (torch.randn(7, 50, generator=gen, dtype=torch.float64) * 4).to(dtype)
    keep = torch.rand(7, 50, generator=gen) < 0.6
    keep[3] = False  # a row that keeps nothing
    known = torch.rand(7, 50, generator=gen) < 0.1  # candidates off the mask, larger logits
    logits = torch.where(known & ~keep, logits + 50.0, logits)
    shift = torch.where(keep, logits, -math.inf).amax(1)
    shift = torch.where(torch.isfinite(shift), shift, 0.0)
    a = logits.clone().requires_grad_(True)
    b = logits.clone().requires_grad_(True)
    want = masked_logsumexp(a, keep)
    got = _KeptLogSumExp.apply(b, keep.to(dtype), shift)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    finite = torch.isfinite(want)
    torch.testing.assert_close(
        got[finite], want[finite], rtol=1e-12 if dtype == torch.float64 else 1e-6, atol=0
    )
    # the cut's own weights exp(l - M), M the largest candidate (a larger non-kept one
    # included), 0 off the candidates: the same values and gradients
    candidate = keep | (torch.rand(7, 50, generator=gen) < 0.3)
    top = torch.where(candidate, logits, -math.inf).amax(1)
    top = torch.where(torch.isfinite(top), top, 0.0)
    cut_weights = torch.where(candidate, (logits - top.unsqueeze(1)).exp(), 0.0)
    c = logits.clone().requires_grad_(True)
    got_w = _KeptLogSumExp.apply(c, keep.to(dtype), top, cut_weights.clone())
    assert torch.equal(torch.isinf(got_w), torch.isinf(want))
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    weights = torch.arange(7, dtype=dtype)
    (want[finite] * weights[finite]).sum().backward()
    (got[finite] * weights[finite]).sum().backward()
    (got_w[finite] * weights[finite]).sum().backward()
    assert a.grad is not None and b.grad is not None and c.grad is not None
    torch.testing.assert_close(b.grad, a.grad, rtol=tol, atol=1e-30)
    # exp(l - M) rounds l - M, whose size reaches the gap to a larger non-kept candidate:
    # a relative error of eps |l - M| per weight, twice that in a normalised gradient
    span = float((top.unsqueeze(1) - logits)[keep].abs().max())
    tol_w = max(tol, 4 * torch.finfo(dtype).eps * span)
    torch.testing.assert_close(got_w[finite], want[finite], rtol=tol_w, atol=0)
    torch.testing.assert_close(c.grad, a.grad, rtol=tol_w, atol=1e-30)


@pytest.mark.parametrize("variant", ["full", "no_hard_positive"])
def test_hard_pairs_are_the_hard_mask_nonzero(variant: str) -> None:
    """The forward pass takes the hard positives as pairs from the known ones (issue 19:
    no [B, E] pass over the mask): the same pairs, in the same order, with the same draw."""
    import copy

    q, ents, pos = _problem(6, b=9, e=30)
    assert int(pos.sum(1).max()) > 3  # some queries are subsampled
    loss = LinkSPACLLoss(num_positives=2, pool_size=5, variant=variant)
    twin = copy.deepcopy(loss)
    known = pos.nonzero(as_tuple=True)
    row, col = hard_pairs(loss.options, loss.rng, q, ents, pos, known, pos.sum(1))
    want_row, want_col = twin.hard_positives(q, ents, pos).nonzero(as_tuple=True)
    assert torch.equal(row, want_row) and torch.equal(col, want_col)
    assert torch.equal(loss.rng.get_state(), twin.rng.get_state())


@pytest.mark.parametrize("objective", ["infonce", "spacl"])
def test_known_pairs_give_the_loss_and_gradients_of_the_mask(objective: str) -> None:
    """The task hands the objective its (query, tail) pairs: shuffled, repeated, the same
    loss and gradients as the pairs read off the mask; a wrong pair is an error."""
    q, ents, pos = _problem(4)

    def make() -> torch.nn.Module:
        if objective == "infonce":
            return LinkInfoNCELoss(temperature=0.5)
        return LinkSPACLLoss(
            temperature=0.5, num_positives=2, generator=torch.Generator().manual_seed(1)
        )

    row, col = pos.nonzero(as_tuple=True)
    shuffle = torch.randperm(len(row), generator=torch.Generator().manual_seed(0))
    known = (torch.cat((row[shuffle], row[:3])), torch.cat((col[shuffle], col[:3])))
    results = []
    for pairs in (None, known):
        qq, ee = q.clone().requires_grad_(True), ents.clone().requires_grad_(True)
        loss = make()(qq, ee, pos) if pairs is None else make()(qq, ee, pos, pairs)
        loss.backward()
        results.append((loss.detach(), qq.grad, ee.grad))
    for got, want in zip(results[1], results[0], strict=True):
        assert torch.equal(got, want)
    not_positive = (~pos).nonzero()[0]
    with pytest.raises(ValueError, match="not a positive"):
        make()(
            q, ents, pos, (torch.cat((row, not_positive[:1])), torch.cat((col, not_positive[1:])))
        )
    with pytest.raises(ValueError, match=r"known col must lie in \[0, 12\)"):
        make()(q, ents, pos, (row, col + 100))
    with pytest.raises(ValueError, match="at least one positive"):
        make()(q, ents, pos, (row[row > 0], col[row > 0]))


def test_link_spacl_state_dict_resumes_exactly() -> None:
    """The lazily built players, their optimisers and the loss's random stream travel in
    ``state_dict``: a fresh loss loaded from it continues as the original (issue 38: a KG
    SPACL run resumed mid-run ended elsewhere before)."""
    import io

    problems = [_problem(40 + k, b=6, e=30, d=4) for k in range(5)]
    a = LinkSPACLLoss(num_positives=2, pool_size=4, generator=torch.Generator().manual_seed(3))
    for q, ents, pos in problems[:3]:
        a(q, ents, pos)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    b = LinkSPACLLoss(num_positives=2, pool_size=4, generator=torch.Generator().manual_seed(9))
    assert b.adversarial is None
    b.load_state_dict(torch.load(buffer, weights_only=True))
    for q, ents, pos in problems[3:]:
        assert torch.equal(a(q, ents, pos), b(q, ents, pos))
        assert a.last is not None and b.last is not None
        assert a.last.log_dict() == b.last.log_dict()
