"""Slow, obviously-correct per-anchor loop references for the contrastive losses.

Each reference loops over anchors and candidates in Python and builds every sum
term by term, so that it shares no code path with the vectorised kernel.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor


def unit(z: Tensor, mode: str = "sphere") -> Tensor:
    if mode == "none":
        return z
    n = z.norm(dim=-1, keepdim=True)
    return z / n if mode == "sphere" else z / n.clamp_min(1.0)


def flat(views: Tensor) -> tuple[Tensor, list[int], list[int]]:
    b, v, d = views.shape
    z = views.reshape(b * v, d)
    inst = [r // v for r in range(b * v)]
    view = [r % v for r in range(b * v)]
    return z, inst, view


def ntxent_ref(views: Tensor, tau: float, targets: Tensor | None = None) -> Tensor:
    """SupCon L_out with instance labels; candidates from ``targets`` if given."""
    za, inst, _ = flat(unit(views))
    zc = za if targets is None else flat(unit(targets))[0]
    total = []
    for a in range(za.shape[0]):
        den = sum(torch.exp(za[a] @ zc[k] / tau) for k in range(zc.shape[0]) if k != a)
        terms = [
            -torch.log(torch.exp(za[a] @ zc[p] / tau) / den)
            for p in range(zc.shape[0])
            if p != a and inst[p] == inst[a]
        ]
        total.append(sum(terms) / len(terms))
    return sum(total) / len(total)


def dcl_ref(views: Tensor, tau: float) -> Tensor:
    z, inst, _ = flat(unit(views))
    total = []
    for a in range(z.shape[0]):
        den = sum(torch.exp(z[a] @ z[k] / tau) for k in range(z.shape[0]) if inst[k] != inst[a])
        terms = [
            -z[a] @ z[p] / tau + torch.log(den)
            for p in range(z.shape[0])
            if p != a and inst[p] == inst[a]
        ]
        total.append(sum(terms) / len(terms))
    return sum(total) / len(total)


def hcl_ref(
    views: Tensor,
    tau: float,
    beta: float,
    tau_plus: float,
    labels: Tensor | None = None,
    detach_imp: bool = False,
) -> Tensor:
    """Robinson et al.'s formula written term by term (positives in the denominator)."""
    z, inst, _ = flat(unit(views))
    v = views.shape[1]
    group = inst if labels is None else [int(labels[r // v]) for r in range(z.shape[0])]
    total = []
    for a in range(z.shape[0]):
        negs = [k for k in range(z.shape[0]) if group[k] != group[a]]
        poss = [k for k in range(z.shape[0]) if k != a and group[k] == group[a]]
        n = len(negs)
        neg = [torch.exp(z[a] @ z[k] / tau) for k in negs]
        imp = [torch.exp(beta * (z[a] @ z[k]) / tau) for k in negs]
        if detach_imp:
            imp = [i.detach() for i in imp]
        reweight = sum(i * e for i, e in zip(imp, neg, strict=True)) / (sum(imp) / n)
        pos = [torch.exp(z[a] @ z[p] / tau) for p in poss]
        if tau_plus > 0:
            pos_mean = sum(pos) / len(pos)
            ng = (-tau_plus * n * pos_mean + reweight) / (1 - tau_plus)
            ng = torch.clamp(ng, min=n * math.exp(-1 / tau))
        else:
            ng = reweight
        den = sum(pos) + ng
        total.append(sum(-torch.log(p / den) for p in pos) / len(pos))
    return sum(total) / len(total)


def supcon_ref(views: Tensor, labels: Tensor, tau: float, variant: str) -> Tensor:
    """Khosla et al.: anchors without positives are left out of the mean."""
    z, _, _ = flat(unit(views))
    v = views.shape[1]
    lab = [int(labels[r // v]) for r in range(z.shape[0])]
    total = []
    for a in range(z.shape[0]):
        den = sum(torch.exp(z[a] @ z[k] / tau) for k in range(z.shape[0]) if k != a)
        poss = [p for p in range(z.shape[0]) if p != a and lab[p] == lab[a]]
        if not poss:
            continue
        if variant == "out":
            loss = sum(-torch.log(torch.exp(z[a] @ z[p] / tau) / den) for p in poss) / len(poss)
        else:
            loss = -torch.log(sum(torch.exp(z[a] @ z[p] / tau) for p in poss) / len(poss) / den)
        total.append(loss)
    return sum(total) / len(total)


def nscl_ref(views: Tensor, labels: Tensor, tau: float, pos_in_den: bool) -> Tensor:
    z, inst, _ = flat(unit(views))
    v = views.shape[1]
    lab = [int(labels[r // v]) for r in range(z.shape[0])]
    total = []
    for a in range(z.shape[0]):
        poss = [p for p in range(z.shape[0]) if p != a and inst[p] == inst[a]]
        den = sum(torch.exp(z[a] @ z[k] / tau) for k in range(z.shape[0]) if lab[k] != lab[a])
        if pos_in_den:
            den = den + sum(torch.exp(z[a] @ z[p] / tau) for p in poss)
        total.append(sum(-z[a] @ z[p] / tau + torch.log(den) for p in poss) / len(poss))
    return sum(total) / len(total)


def sampled_ref(
    views: Tensor, labels: Tensor | None, neg_index: Tensor, tau: float, mode: str
) -> Tensor:
    """The NC/DC paper's estimator with the negatives already drawn (``neg_index[A, K]``)."""
    z, inst, _ = flat(unit(views, mode))
    v = views.shape[1]
    k_neg = neg_index.shape[1]
    total = []
    for a in range(z.shape[0]):
        if labels is not None:
            poss = [p for p in range(z.shape[0]) if int(labels[p // v]) == int(labels[a // v])]
        else:
            poss = [p for p in range(z.shape[0]) if p != a and inst[p] == inst[a]]
        negmean = sum(torch.exp(z[a] @ z[int(n)] / tau) for n in neg_index[a]) / k_neg
        terms = []
        for p in poss:
            e = torch.exp(z[a] @ z[p] / tau)
            terms.append(-torch.log(e / (e + negmean)))
        total.append(sum(terms) / len(terms))
    return sum(total) / len(total)


def queue_ref(
    views: Tensor,
    tau: float,
    queue: Tensor,
    kind: str,
    labels: Tensor | None = None,
    queue_labels: Tensor | None = None,
    beta: float = 0.0,
    tau_plus: float = 0.0,
) -> Tensor:
    """Per-anchor loop over the in-batch candidates *and* the queue rows.

    Groups: the instance (no labels) or the label; a queue row belongs to no instance,
    so without labels it is a negative of every anchor, with labels it is a positive of
    the anchors of its class.  ``kind``: ntxent | supcon_out | supcon_in | dcl | hcl.
    """
    z, inst, _ = flat(unit(views))
    q = unit(queue)
    v = views.shape[1]
    n = z.shape[0]
    cands = [z[k] for k in range(n)] + [q[j] for j in range(q.shape[0])]
    if labels is None:
        group = list(inst) + [-1 - j for j in range(q.shape[0])]
    else:
        assert queue_labels is not None
        group = [int(labels[r // v]) for r in range(n)]
        group += [int(queue_labels[j]) for j in range(q.shape[0])]
    total = []
    for a in range(n):
        poss = [k for k in range(len(cands)) if k != a and group[k] == group[a]]
        negs = [k for k in range(len(cands)) if group[k] != group[a]]
        if not poss:
            continue
        e = {k: torch.exp(z[a] @ cands[k] / tau) for k in poss + negs}
        if kind == "dcl":
            den = torch.log(sum(e[k] for k in negs))
            total.append(sum(-(z[a] @ cands[p]) / tau + den for p in poss) / len(poss))
            continue
        if kind == "hcl":
            m = len(negs)
            imp = [torch.exp(beta * (z[a] @ cands[k]) / tau) for k in negs]
            ng = sum(i * e[k] for i, k in zip(imp, negs, strict=True)) / (sum(imp) / m)
            if tau_plus > 0:
                pos_mean = sum(e[p] for p in poss) / len(poss)
                ng = torch.clamp(
                    (ng - tau_plus * m * pos_mean) / (1 - tau_plus), min=m * math.exp(-1 / tau)
                )
            den = sum(e[p] for p in poss) + ng
        else:
            den = sum(e[k] for k in poss + negs)
        if kind == "supcon_in":
            total.append(-torch.log(sum(e[p] for p in poss) / len(poss) / den))
        else:
            total.append(sum(-torch.log(e[p] / den) for p in poss) / len(poss))
    return sum(total) / len(total)


# -- SPACL (SPEC §1): miners, the cut and the every-view loop -------------------------------
def unit_rows(x: Tensor) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def dot(u: Tensor, v: Tensor) -> float:
    return sum(float(a) * float(b) for a, b in zip(u, v, strict=True))


def anchor_loop(pool: Tensor) -> list[int]:
    """The dynamic anchor ``argmax_u h(u)`` of every instance, ties to the lowest view."""
    out = []
    for i in range(pool.shape[0]):
        z = unit_rows(pool[i].double())
        v = z.shape[0]
        h = [sum(1 - dot(z[u], z[w]) for w in range(v) if w != u) / (v - 1) for u in range(v)]
        out.append(max(range(v), key=lambda u: (h[u], -u)))
    return out


def farthest_loop(cands: Tensor, allowed: list[int], start: int, k: int) -> list[int]:
    """Greedy farthest-point selection of ``k`` of ``allowed`` from ``start``, ties lowest."""
    z = unit_rows(cands.double())
    chosen, out = [start], []
    for _ in range(k):
        best = max(
            (u for u in allowed if u not in chosen),
            key=lambda u: (min(1 - dot(z[u], z[s]) for s in chosen), -u),
        )
        chosen.append(best)
        out.append(best)
    return out


def cut_loop(
    logits: list[float], share: float, tau: float = 1.0, mass: str = "similarity"
) -> list[bool]:
    """The relative-threshold cut of one anchor, by a stable sort (SPEC §1.4).

    Weights: ``"similarity"`` the raw similarities ``tau * logit``; ``"exp"``
    ``exp(logit)``; ``"linear"`` ``max((1 + tau * logit) / 2, 0)``.  Keep the shortest
    prefix of the candidates in (logit desc, index asc) order whose running weight
    reaches ``share * total`` — the hardest one alone when it never does (a total
    ``<= 0`` of signed similarities); ``share = 1`` or a zero total weight keeps all.
    """
    order = sorted(range(len(logits)), key=lambda j: -logits[j])  # stable: ties by index
    if mass == "similarity":
        w = [x * tau for x in logits]
    elif mass == "exp":
        top = max(logits)
        w = [math.exp(x - top) for x in logits]
    else:
        w = [max((1.0 + x * tau) / 2.0, 0.0) for x in logits]
    total = sum(w)
    if share >= 1.0 or (mass != "similarity" and total == 0.0):
        return [True] * len(logits)
    keep = [False] * len(logits)
    acc = 0.0
    for j in order:
        keep[j] = True
        acc += w[j]
        if acc >= share * total:
            break
    if acc < share * total:  # never reached (total < 0): the hardest alone
        keep = [j == order[0] for j in range(len(logits))]
    return keep


def _spacl_embed(z: Tensor, mode: str) -> Tensor:
    """``normalize`` of spacl.losses.normalize: sphere, ball (norm clamped at 1) or none."""
    return unit(z, mode)


def _every_view_positive_rows(
    loss: Any, pool: Tensor, flat_pool: Tensor, labels: Tensor | None, r: int
) -> list[int]:
    """The default positives of anchor row ``r = i V + u`` (flat pool rows): farthest-point
    selection from the anchor view among its instance's views, or among every view of its
    class (``positive_pool="class"``)."""
    b, v, _ = pool.shape
    i, u = divmod(r, v)
    if loss.positive_pool == "class":
        assert labels is not None
        same = [c for c in range(b * v) if int(labels[c // v]) == int(labels[i])]
        return farthest_loop(flat_pool, same, r, loss.num_positives)
    return [i * v + p for p in farthest_loop(pool[i], list(range(v)), u, loss.num_positives)]


def _every_view_in_batch(
    loss: Any, f: Tensor, t: Tensor, v: int, r: int, labels: Tensor | None
) -> tuple[list[Tensor], list[Tensor]]:
    """The in-batch logits of anchor row ``r = i V + u`` (``f``: its scaled embedding,
    ``t[B V, d]``: the candidates): the extra positives (the other same-class views, for
    ``positive_pool="instance_class"``; dropped otherwise) and the candidate negatives
    (every view, or view ``u`` only; never instance ``i``'s own)."""
    i, u = divmod(r, v)
    b = t.shape[0] // v
    cols = range(b * v) if loss.negatives == "all_views" else [j * v + u for j in range(b)]
    pos: list[Tensor] = []
    cand: list[Tensor] = []
    for c in cols:
        if c // v == i:
            continue
        if labels is not None and int(labels[c // v]) == int(labels[i]):
            if loss.positive_pool == "instance_class":
                pos.append(f @ t[c])
            continue
        cand.append(f @ t[c])
    return pos, cand


def _every_view_queue(
    loss: Any, f: Tensor, queue: Tensor | None, label: int | None, extra_labels: Tensor | None
) -> tuple[list[Tensor], list[Tensor]]:
    """The queue's logits for an anchor of class ``label`` (``None``: unlabelled): its
    same-class entries as extra positives (``positive_pool="instance_class"``; dropped
    otherwise), the others as candidate negatives."""
    pos: list[Tensor] = []
    cand: list[Tensor] = []
    if queue is None:
        return pos, cand
    for k in range(queue.shape[0]):
        same_class = (
            label is not None and extra_labels is not None and int(extra_labels[k]) == label
        )
        if not same_class:
            cand.append(f @ queue[k])
        elif loss.positive_pool == "instance_class":
            pos.append(f @ queue[k])
    return pos, cand


def _anchor_loss(pos: list[Tensor], kept: list[Tensor], positive_mode: str) -> Tensor:
    """One anchor's loss from its positive and kept negative logits: the log-sum-exp of
    the positives against the whole denominator, or the mean over the positives."""
    den = torch.logsumexp(torch.stack(pos + kept), 0)
    if positive_mode == "log_sum_exp":
        return den - torch.logsumexp(torch.stack(pos), 0)
    return torch.stack([den - x for x in pos]).mean()


def spacl_every_view_ref(
    loss: Any,
    anchors: Tensor | None,
    pool: Tensor,
    labels: Tensor | None = None,
    extra: Tensor | None = None,
    extra_labels: Tensor | None = None,
    generated: Tensor | None = None,
    positives: list[list[int]] | None = None,
) -> tuple[Tensor, list[int], list[list[int]]]:
    """SPACL with every view an anchor, one view and one anchor at a time (the old loop).

    For ``u`` in ``0..V-1`` and every instance ``i`` the anchor is view ``u`` of ``i``;
    everything is written term by term.  ``loss`` supplies the options (a
    :class:`spacl.losses.SPACLLoss`); ``generated[BV, K, d]`` are the generated
    negatives of each anchor row (fixed by the caller, who replays the game);
    ``positives`` the flat pool rows of each anchor row's positives (for random
    positives; default: farthest-point selection from the anchor view).  Returns the
    per-anchor losses ``[B V]`` (row ``i V + u``), the kept negatives per row and the
    positives used.
    """
    b, v, d = pool.shape
    tau = loss.temperature
    mode = loss.normalize
    online_src = (pool if anchors is None else anchors).double()
    target_src = pool.detach() if loss.detach_candidates else pool
    t = _spacl_embed(target_src.double(), mode).reshape(b * v, d)
    flat_pool = pool.detach().double().reshape(b * v, d)
    queue = None if extra is None else _spacl_embed(extra.detach().double(), mode)
    share = loss.effective_share
    per_anchor: dict[int, Tensor] = {}
    kept_count: dict[int, int] = {}
    used: dict[int, list[int]] = {}
    for u in range(v):
        for i in range(b):
            r = i * v + u
            if positives is not None:
                pos_rows = positives[r]
            else:
                pos_rows = _every_view_positive_rows(loss, pool, flat_pool, labels, r)
            used[r] = pos_rows
            f = _spacl_embed(online_src[i, u], mode) / tau
            # the terms built in this order (positives, in-batch, generated, queue): the
            # backward accumulates the gradients in the same order, bit for bit
            pos = [f @ t[c] for c in pos_rows]
            batch_pos, batch_cand = _every_view_in_batch(loss, f, t, v, r, labels)
            generated_cand = (
                []
                if generated is None
                else [f @ generated[r, k].double() for k in range(generated.shape[1])]
            )
            label = None if labels is None else int(labels[i])
            queue_pos, queue_cand = _every_view_queue(loss, f, queue, label, extra_labels)
            pos += batch_pos + queue_pos
            cand = batch_cand + generated_cand + queue_cand
            keep = cut_loop([float(x.detach()) for x in cand], share, tau, loss.mass)
            kept = [x for x, k in zip(cand, keep, strict=True) if k]
            kept_count[r] = len(kept)
            per_anchor[r] = _anchor_loss(pos, kept, loss.positive_mode)
    rows = range(b * v)
    return (
        torch.stack([per_anchor[r] for r in rows]),
        [kept_count[r] for r in rows],
        [used[r] for r in rows],
    )
