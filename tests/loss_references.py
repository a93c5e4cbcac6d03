"""Slow, obviously-correct per-anchor loop references for the contrastive losses.

Each reference loops over anchors and candidates in Python and builds every sum
term by term, so that it shares no code path with the vectorised kernel.
"""

from __future__ import annotations

import math

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
