"""Filtered ranking against a brute-force loop; metrics against closed forms."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.data.kg import TripleIndex, add_reciprocals
from spacl.evaluate.ranking import evaluate_link_prediction, filtered_ranks, ranking_metrics


def loop_rank(scores: list[float], target: int, filtered: set[int], ties: str) -> float:
    """Rank of ``target`` among entities not in ``filtered`` (target itself excluded)."""
    greater = equal = 0
    for e, s in enumerate(scores):
        if e == target or e in filtered:
            continue
        if s > scores[target]:
            greater += 1
        elif s == scores[target]:
            equal += 1
    if ties == "optimistic":
        return 1.0 + greater
    if ties == "pessimistic":
        return 1.0 + greater + equal
    return 1.0 + greater + equal / 2.0


def random_graph(seed: int, e: int = 17, r: int = 3, n: int = 60) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.stack(
        (
            torch.randint(0, e, (n,), generator=gen),
            torch.randint(0, r, (n,), generator=gen),
            torch.randint(0, e, (n,), generator=gen),
        ),
        1,
    )


@pytest.mark.parametrize("ties", ["mean", "optimistic", "pessimistic"])
@pytest.mark.parametrize("batch_size", [1, 7, 1000])
def test_filtered_ranks_match_loop(ties: str, batch_size: int) -> None:
    e, r = 17, 3
    known = random_graph(0, e, r)
    queries = add_reciprocals(random_graph(1, e, r, 25), r)
    index = TripleIndex(add_reciprocals(known, r), e, 2 * r)
    # integer-valued scores create many ties
    table = torch.randint(0, 4, (e, 2 * r, e), generator=torch.Generator().manual_seed(2))
    table = table.to(torch.float64)

    def scorer(h: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        return table[h, rel]

    got = filtered_ranks(scorer, queries, index, batch_size=batch_size, ties=ties)
    truth: dict[tuple[int, int], set[int]] = {}
    for h, rel, t in add_reciprocals(known, r).tolist():
        truth.setdefault((h, rel), set()).add(t)
    for i, (h, rel, t) in enumerate(queries.tolist()):
        want = loop_rank(table[h, rel].tolist(), t, truth.get((h, rel), set()), ties)
        assert float(got[i]) == want
    raw = filtered_ranks(scorer, queries, None, ties=ties)
    for i, (h, rel, t) in enumerate(queries.tolist()):
        assert float(raw[i]) == loop_rank(table[h, rel].tolist(), t, set(), ties)


def test_constant_scorer_gets_the_expected_random_rank() -> None:
    queries = torch.tensor([[0, 0, 1], [2, 0, 3]])

    def scorer(h: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(h), 10)

    ranks = filtered_ranks(scorer, queries, None)
    assert ranks.tolist() == [5.5, 5.5]  # 1 + 9 / 2


def test_ranking_metrics_closed_form() -> None:
    ranks = torch.tensor([1.0, 2.0, 4.0, 10.0, 11.0])
    m = ranking_metrics(ranks)
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1 / 10 + 1 / 11) / 5, rel=1e-15)
    assert (m["hits@1"], m["hits@3"], m["hits@10"]) == (0.2, 0.4, 0.8)
    assert m["mr"] == pytest.approx(5.6)
    with pytest.raises(ValueError, match=">= 1"):
        ranking_metrics(torch.tensor([0.5]))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_perfect_scorer_has_mrr_one(seed: int) -> None:
    """A scorer that puts every known tail on top has filtered MRR exactly 1."""
    e, r = 11, 2
    triples = random_graph(seed, e, r, 30)
    index = TripleIndex(add_reciprocals(triples, r), e, 2 * r)

    def scorer(h: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        noise = torch.rand(len(h), e, generator=torch.Generator().manual_seed(seed))
        return noise + 2.0 * index.mask(h, rel).double()

    m = evaluate_link_prediction(scorer, triples, r, index)
    assert m["mrr"] == 1.0 and m["hits@1"] == 1.0 and m["count"] == 2 * len(triples)
    assert m["head_mrr"] == 1.0 and m["tail_mrr"] == 1.0


def test_scorer_errors() -> None:
    queries = torch.tensor([[0, 0, 1]])
    with pytest.raises(ValueError, match="non-finite"):
        filtered_ranks(lambda h, r: torch.full((1, 3), math.nan), queries, None)
    with pytest.raises(ValueError, match=r"\[B, E\]"):
        filtered_ranks(lambda h, r: torch.zeros(3), queries, None)
    with pytest.raises(ValueError, match="ties must be"):
        filtered_ranks(lambda h, r: torch.zeros(1, 3), queries, None, ties="random")
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        filtered_ranks(lambda h, r: torch.zeros(1, 3), torch.zeros(3, dtype=torch.long), None)
