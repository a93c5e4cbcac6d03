"""Filtered link-prediction ranking: MRR and Hits@k over both directions (Bordes et al. 2013).

For a test triple ``(h, r, t)`` the **tail query** ``(h, r, ?)`` ranks ``t`` among all
entities and the **head query** ``(?, r, t)`` — asked as the reciprocal tail query
``(t, r + R, ?)`` — ranks ``h``.  In the *filtered* setting every other entity that
forms a known true triple (train, valid or test) with the query is removed from the
ranking, so a model is not penalised for ranking another correct answer first::

    rank = 1 + #{e not filtered : s_e > s_target} + ties
    MRR = mean 1 / rank,   Hits@k = mean [rank <= k]      (over 2N queries)

**Decision** (ties): ``ties="mean"`` (default) counts half of the other unfiltered
entities whose score equals the target's (the expected rank under random tie
breaking, LibKGE's "mean rank"); ``"optimistic"`` counts none, ``"pessimistic"`` all.
A constant scorer thus gets the expected random rank, never rank 1.

Scoring is vectorised: one call of the scorer per batch of queries returns
``[B, E]`` scores, the filter is one boolean ``[B, E]`` mask from the CSR index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from spacl._validation import check_choice
from spacl.data.kg import TripleIndex, add_reciprocals

__all__ = [
    "TIE_POLICIES",
    "evaluate_link_prediction",
    "filtered_ranks",
    "ranking_metrics",
]

TIE_POLICIES = ("mean", "optimistic", "pessimistic")

#: ``scorer(heads[B], relations[B]) -> scores[B, E]``
Scorer = Callable[[Tensor, Tensor], Tensor]


@torch.no_grad()
def filtered_ranks(
    scorer: Scorer,
    queries: Tensor,
    filter_index: TripleIndex | None,
    *,
    batch_size: int = 512,
    ties: str = "mean",
    device: torch.device | str | None = None,
    progress: bool | None = False,
) -> Tensor:
    """Filtered rank of the tail of each ``(h, r, t)`` of ``queries`` (float64 ``[N]``).

    Args:
        scorer: maps a batch of heads and relations to scores of every entity.
        queries: ``LongTensor[N, 3]`` tail queries (add reciprocals for both directions).
        filter_index: known true tails to remove (``None``: raw, unfiltered ranks).
        batch_size: queries scored per call.
        ties: ``"mean"`` | ``"optimistic"`` | ``"pessimistic"`` (module docstring).
        device: where ids are sent before calling ``scorer`` (default: CPU).
        progress: a tqdm bar over the batches (``None``: when stderr is a terminal).

    ``rank = 1 + #{e not filtered : s_e > s_t} + ties`` (module docstring; the filtered
    setting of Bordes et al. 2013).

    Example:
        >>> import torch
        >>> from spacl.evaluate import filtered_ranks
        >>> scores = torch.tensor([[0.1, 0.9, 0.5], [0.3, 0.2, 0.1], [0.0, 0.0, 0.0]])
        >>> scorer = lambda heads, relations: scores[heads]
        >>> filtered_ranks(scorer, torch.tensor([[0, 0, 1], [1, 0, 2]]), None)
        tensor([1., 3.], dtype=torch.float64)
    """
    from spacl._progress import iterate

    check_choice(ties, "ties", TIE_POLICIES)
    if not isinstance(queries, Tensor) or queries.ndim != 2 or queries.shape[1] != 3:
        got = tuple(queries.shape) if isinstance(queries, Tensor) else type(queries).__name__
        raise ValueError(f"queries must be a LongTensor [N, 3], got {got}")
    if queries.is_floating_point() or queries.is_complex() or queries.dtype == torch.bool:
        raise TypeError(f"queries must hold integer ids (a LongTensor), got dtype {queries.dtype}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    ranks = []
    starts = range(0, queries.shape[0], batch_size)
    for start in iterate(starts, desc="ranking", mode=progress, unit="batch"):
        chunk = queries[start : start + batch_size]
        h, r, t = chunk[:, 0], chunk[:, 1], chunk[:, 2]
        dev = torch.device("cpu") if device is None else torch.device(device)
        scores = scorer(h.to(dev), r.to(dev))
        ranks.append(_ranks_of(scores, h, r, t, filter_index, ties).cpu())
    if not ranks:
        return torch.zeros(0, dtype=torch.float64)
    return torch.cat(ranks)


def _ranks_of(
    scores: Tensor,
    h: Tensor,
    r: Tensor,
    t: Tensor,
    filter_index: TripleIndex | None,
    ties: str,
) -> Tensor:
    if scores.ndim != 2 or scores.shape[0] != h.shape[0]:
        raise ValueError(
            f"scorer must return [B, E] scores for B={h.shape[0]} queries, "
            f"got shape {tuple(scores.shape)}"
        )
    if not bool(torch.isfinite(scores).all()):
        raise ValueError("scorer returned non-finite scores (NaN or inf)")
    t = t.to(scores.device)
    target = scores.gather(1, t.unsqueeze(1))
    other = torch.ones_like(scores, dtype=torch.bool)
    if filter_index is not None:
        other &= ~filter_index.mask(h, r, device=scores.device)
    other.scatter_(1, t.unsqueeze(1), False)  # the target itself never counts
    greater = ((scores > target) & other).sum(1).to(torch.float64)
    if ties == "optimistic":
        return 1.0 + greater
    equal = ((scores == target) & other).sum(1).to(torch.float64)
    return 1.0 + greater + (equal if ties == "pessimistic" else equal / 2.0)


def ranking_metrics(ranks: Tensor, ks: Sequence[int] = (1, 3, 10)) -> dict[str, float]:
    """``{"mrr": mean 1/rank, "hits@k": mean [rank <= k], "mr": mean rank, "count": N}``.

    The link-prediction metrics of Bordes et al. (2013) over (filtered) ranks ``>= 1``, e.g.
    from :func:`filtered_ranks`; ``ks`` are positive ints.

    Example:
        >>> import torch
        >>> from spacl.evaluate import ranking_metrics
        >>> out = ranking_metrics(torch.tensor([1.0, 2.0, 4.0]), ks=(1, 3))
        >>> {k: round(v, 4) for k, v in out.items()}
        {'mrr': 0.5833, 'mr': 2.3333, 'count': 3.0, 'hits@1': 0.3333, 'hits@3': 0.6667}
    """
    if not isinstance(ranks, Tensor) or ranks.ndim != 1 or ranks.numel() == 0:
        got = tuple(ranks.shape) if isinstance(ranks, Tensor) else type(ranks).__name__
        raise ValueError(f"ranks must be a non-empty 1-D tensor, got {got}")
    if ranks.is_complex() or ranks.dtype == torch.bool:
        raise TypeError(f"ranks must be a real tensor, got dtype {ranks.dtype}")
    if not bool((ranks >= 1).all()):  # also catches NaN
        raise ValueError(f"ranks must be >= 1, got minimum {float(ranks.double().min())}")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"ks must hold ints >= 1, got {list(ks)!r}")
    r = ranks.to(torch.float64)
    out = {"mrr": float((1.0 / r).mean()), "mr": float(r.mean()), "count": float(r.numel())}
    for k in ks:
        out[f"hits@{k}"] = float((r <= k).to(torch.float64).mean())
    return out


def evaluate_link_prediction(
    scorer: Scorer,
    triples: Tensor,
    num_relations: int,
    filter_index: TripleIndex | None,
    *,
    batch_size: int = 512,
    ties: str = "mean",
    ks: Sequence[int] = (1, 3, 10),
    device: torch.device | str | None = None,
    progress: bool | None = False,
) -> dict[str, float]:
    """Filtered MRR / Hits@k over both directions of ``triples`` (``[N, 3]`` originals).

    ``num_relations`` is ``R`` (reciprocal of ``r`` is ``r + R``).  Returns the
    metrics over all ``2N`` queries plus ``tail_mrr`` and ``head_mrr``.  ``progress``:
    a tqdm bar over the scoring batches (``None``: when stderr is a terminal).
    ``MRR = mean 1/rank``, ``Hits@k = mean [rank <= k]`` over the ``2N`` filtered ranks
    (Bordes et al. 2013; module docstring).

    Example:
        >>> import torch
        >>> from spacl.evaluate import evaluate_link_prediction
        >>> def scorer(heads, relations):  # relation 0 maps e to e + 1, its reciprocal back
        ...     return torch.nn.functional.one_hot((heads + 1 - 2 * relations) % 3, 3).float()
        >>> triples = torch.tensor([[0, 0, 1], [1, 0, 2]])
        >>> out = evaluate_link_prediction(scorer, triples, num_relations=1, filter_index=None)
        >>> out["mrr"], out["hits@1"], out["count"]
        (1.0, 1.0, 4.0)
    """
    both = add_reciprocals(triples, num_relations)
    ranks = filtered_ranks(
        scorer,
        both,
        filter_index,
        batch_size=batch_size,
        ties=ties,
        device=device,
        progress=progress,
    )
    n = triples.shape[0]
    out = ranking_metrics(ranks, ks)
    out["tail_mrr"] = float((1.0 / ranks[:n]).mean())
    out["head_mrr"] = float((1.0 / ranks[n:]).mean())
    return out
