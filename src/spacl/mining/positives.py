"""Hard positives for SPACL (SPEC §1.2): the dynamic anchor and farthest-point selection.

Every miner here runs without gradient on the *target* embeddings of a candidate pool
``pool[B, V, d]`` (view 0 the original, views ``1..M`` augmentations) and returns
indices.  Embeddings are projected onto the unit sphere first, so that the
dissimilarity ``d(u, v) = 1 - <u, v>`` lies in ``[0, 2]``.

**Decisions** (SPEC §1.2):

- the dissimilarity is ``1 - <u, v>``, not the raw inner product (used as a
  dissimilarity the inner product would make the anchor the *easiest* view);
- the positives ``P_i^h`` exclude the anchor, and the pool must hold at least
  ``num_positives + 1`` candidates;
- ties are broken towards the lowest index (``torch.argmax`` returns the first
  maximum), for the anchor and at every farthest-point step.  Duplicated views get
  bit-identical hardness and distances, so the tie rule is exact, not approximate.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from spacl._validation import check_choice
from spacl.mining.pool import (
    check_anchor_index,
    check_pool,
    checked_labels,
    class_membership,
    unit,
)

POSITIVE_POOLS: tuple[str, ...] = ("instance", "class")


def pool_dissimilarity(unit_pool: Tensor) -> Tensor:
    """``[B, V, V]`` dissimilarities ``1 - <u, v>`` within each instance's pool.

    Computed as an elementwise product summed over ``d`` (not a batched matmul) so
    that entry ``(u, v)`` depends only on the two vectors: duplicated views give
    bit-identical rows, which makes the lowest-index tie rule exact.
    """
    gram = (unit_pool.unsqueeze(2) * unit_pool.unsqueeze(1)).sum(-1)
    return 1.0 - gram


def hardness_from_dissimilarity(dissimilarity: Tensor) -> Tensor:
    """``h(u) = 1/(V-1) sum_{v != u} d(u, v)`` from ``[B, V, V]`` dissimilarities.

    The row sum runs over *all* ``v`` (same values in the same positions for duplicated
    views) and the self term is subtracted afterwards, so exact ties stay exact.
    """
    v = dissimilarity.shape[-1]
    total = dissimilarity.sum(-1) - dissimilarity.diagonal(dim1=-2, dim2=-1)
    return total / (v - 1)


@torch.no_grad()
def hardness(pool: Tensor) -> Tensor:
    """Hardness ``h(u) = 1/(|C_i|-1) sum_{v != u} (1 - <u, v>)`` of every view, ``[B, V]``.

    ``pool[B, V, d]`` is normalised to the unit sphere first; ``C_i`` is instance ``i``'s
    pool of ``V`` views (SPACL, ICLR 2026, OpenReview 4cZvjp8Iwk, SPEC §1.2).  The
    hardest view, ``argmax_u h(u)``, is :class:`DynamicAnchor`'s anchor.

    Example (the third view points away from the two others):
        >>> import torch
        >>> from spacl.mining import hardness
        >>> pool = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]]])
        >>> hardness(pool)
        tensor([[0.5000, 0.5000, 1.0000]])
    """
    check_pool(pool, min_views=2)
    return hardness_from_dissimilarity(pool_dissimilarity(unit(pool)))


class DynamicAnchor(nn.Module):
    """Dynamic anchor of SPACL (SPEC §1.2): the hardest view of each instance's pool.

    ``a_i = argmax_u h(u)``, ``h(u) = 1/(|C_i|-1) sum_{v != u} (1 - <u, v>)`` on the unit
    sphere: the view farthest, on average, from the instance's other views.  Ties go to
    the lowest view index.  No gradient.  SPACL (ICLR 2026, OpenReview 4cZvjp8Iwk).

    Call: ``DynamicAnchor()(pool[B, V, d]) -> LongTensor[B]`` (view index of the anchor).

    Example (two instances of three views; the anchor is the odd view out):
        >>> import torch
        >>> from spacl.mining import DynamicAnchor
        >>> pool = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
        ...                      [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]])
        >>> DynamicAnchor()(pool)
        tensor([2, 1])
        >>> DynamicAnchor()(torch.randn(8, 5, 16)).shape  # pool[B, V, d] -> [B]
        torch.Size([8])
    """

    @torch.no_grad()
    def forward(self, pool: Tensor) -> Tensor:
        check_pool(pool, min_views=2)
        return self.from_dissimilarity(pool_dissimilarity(unit(pool)))

    @staticmethod
    def from_dissimilarity(dissimilarity: Tensor) -> Tensor:
        """Anchor indices from precomputed ``[B, V, V]`` dissimilarities."""
        return hardness_from_dissimilarity(dissimilarity).argmax(-1)


def farthest_point_from_dissimilarity(
    dissimilarity: Tensor, anchor: Tensor, num_positives: int
) -> Tensor:
    """Greedy farthest-point order inside each pool, from ``[B, V, V]`` dissimilarities.

    ``S = {a}``; repeat ``num_positives`` times: ``u* = argmax_{u not in S} min_{v in S} d(u, v)``.
    Vectorised over the batch; the loop runs over the ``num_positives`` steps only.
    """
    b, v, _ = dissimilarity.shape
    rows = torch.arange(b, device=dissimilarity.device)
    min_dist = dissimilarity[rows, anchor].clone()  # [B, V]
    taken = torch.zeros(b, v, dtype=torch.bool, device=dissimilarity.device)
    # scatter_ of a scalar: an indexed store (``taken[rows, anchor] = True``) would copy
    # the Python scalar to the device and wait on the host, every step
    taken.scatter_(1, anchor.unsqueeze(1), True)
    chosen = []
    for _ in range(num_positives):
        idx = min_dist.masked_fill(taken, -math.inf).argmax(-1)
        chosen.append(idx)
        taken.scatter_(1, idx.unsqueeze(1), True)
        min_dist = torch.minimum(min_dist, dissimilarity[rows, idx])
    return torch.stack(chosen, dim=1)


def farthest_point_flat(
    unit_flat: Tensor, start: Tensor, member: Tensor, num_positives: int
) -> Tensor:
    """Farthest-point order over a shared candidate set with a per-row membership mask.

    Args:
        unit_flat: ``[N, d]`` unit-norm candidates (all views of the batch, flattened).
        start: ``[B]`` flat index of each row's anchor.
        member: ``[B, N]`` bool, the candidates row ``b`` may choose from.
        num_positives: how many to choose.

    Returns:
        ``[B, num_positives]`` flat indices into ``unit_flat``.
    """
    min_dist = 1.0 - unit_flat[start] @ unit_flat.T  # [B, N]
    taken = ~member
    taken.scatter_(1, start.unsqueeze(1), True)
    chosen = []
    for _ in range(num_positives):
        idx = min_dist.masked_fill(taken, -math.inf).argmax(-1)
        chosen.append(idx)
        taken.scatter_(1, idx.unsqueeze(1), True)
        min_dist = torch.minimum(min_dist, 1.0 - unit_flat[idx] @ unit_flat.T)
    return torch.stack(chosen, dim=1)


def farthest_point_rows(dissimilarity: Tensor, member: Tensor, num_positives: int) -> Tensor:
    """:func:`farthest_point_flat` when row ``r``'s anchor is candidate ``r`` itself.

    Args:
        dissimilarity: ``[N, N]`` dissimilarities ``1 - <u, v>`` of the flat candidates;
            row ``r`` is also the anchor row ``r`` (every view an anchor).
        member: ``[N, N]`` bool, the candidates row ``r`` may choose from (``r`` itself
            excluded).
        num_positives: how many to choose.

    Returns:
        ``[N, num_positives]`` flat indices, ties to the lowest index.  Every step
        gathers rows of ``dissimilarity`` instead of multiplying embeddings again.
    """
    min_dist = dissimilarity.clone()
    taken = ~member
    taken.fill_diagonal_(True)
    chosen = []
    for _ in range(num_positives):
        idx = min_dist.masked_fill(taken, -math.inf).argmax(-1)
        chosen.append(idx)
        taken.scatter_(1, idx.unsqueeze(1), True)
        min_dist = torch.minimum(min_dist, dissimilarity[idx])
    return torch.stack(chosen, dim=1)


def check_positive_pool(positive_pool: str) -> str:
    """``"instance"``: the instance's own views; ``"class"``: all views of its class."""
    check_choice(positive_pool, "positive_pool", POSITIVE_POOLS)
    return positive_pool


def check_num_positives(num_positives: int) -> int:
    """Require an integer ``>= 1``."""
    if not isinstance(num_positives, int) or isinstance(num_positives, bool) or num_positives < 1:
        raise ValueError(f"num_positives must be an integer >= 1, got {num_positives!r}")
    return num_positives


def class_pool_members(labels: Tensor, views: int, anchor_flat: Tensor) -> Tensor:
    """``[B, B*V]`` bool: same-class views of the batch, the anchor itself excluded."""
    member = class_membership(labels, views)
    member.scatter_(1, anchor_flat.unsqueeze(1), False)
    return member


def check_pool_size(
    views: int, num_positives: int, labels: Tensor | None = None, name: str = "pool"
) -> None:
    """Raise ``ValueError`` if some pool holds fewer than ``num_positives + 1`` candidates.

    The instance pool holds ``V`` views; a class pool holds ``V`` views per same-class
    instance of the batch.
    """
    if labels is None:
        if views < num_positives + 1:
            raise ValueError(
                f"{name} holds {views} view(s) per instance but num_positives={num_positives} "
                f"needs at least {num_positives + 1} (the anchor plus its positives)"
            )
        return
    sizes = (labels.unsqueeze(1) == labels.unsqueeze(0)).sum(1) * views
    small = sizes < num_positives + 1
    if bool(small.any()):
        i = int(small.nonzero()[0, 0])
        raise ValueError(
            f"the class pool of instance {i} (label {int(labels[i])}) holds {int(sizes[i])} "
            f"view(s) but num_positives={num_positives} needs at least {num_positives + 1}"
        )


class FarthestPointPositives(nn.Module):
    """Hard positives by greedy farthest-point selection from the anchor (SPEC §1.2).

    ``S = {a_i}``; repeat until ``|P_i^h| = num_positives``:
    ``u* = argmax_{u in C_i \\ S} min_{v in S} (1 - <u, v>)``, add ``u*`` to ``P_i^h`` and ``S``.
    The positives are spread out: each is as far as possible from the anchor and from
    the positives already chosen.  Ties go to the lowest index.  No gradient.

    ``positive_pool="instance"`` (default): ``C_i`` is instance ``i``'s own views, the
    result holds *view indices* in ``[0, V)`` and ``labels`` are not used.
    ``positive_pool="class"`` (supervised, needs ``labels``): ``C_i`` holds every view of
    every same-class instance of the batch, and the result holds *flat indices* into
    ``pool.reshape(B * V, d)`` (instance ``r // V``, view ``r % V``).

    Call: ``FarthestPointPositives(num_positives)(pool[B, V, d], anchor[B], labels=None)
    -> LongTensor[B, num_positives]``.  SPACL (ICLR 2026, OpenReview 4cZvjp8Iwk); the
    greedy rule is Gonzalez's farthest-point traversal (1985).

    Example (from the anchor ``(1, 0)``: first its antipode, then the orthogonal view):
        >>> import torch
        >>> from spacl.mining import FarthestPointPositives
        >>> pool = torch.tensor([[[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-1.0, 0.0]]])
        >>> FarthestPointPositives(num_positives=2)(pool, torch.tensor([0]))
        tensor([[3, 2]])
        >>> pool, labels = torch.randn(4, 3, 8), torch.tensor([0, 1, 0, 1])
        >>> miner = FarthestPointPositives(2, positive_pool="class")
        >>> flat = miner(pool, torch.zeros(4, dtype=torch.long), labels)  # rows of [B*V, d]
        >>> flat.shape, bool((labels[flat // 3] == labels[:, None]).all())
        (torch.Size([4, 2]), True)
    """

    def __init__(self, num_positives: int = 2, positive_pool: str = "instance") -> None:
        super().__init__()
        self.num_positives = check_num_positives(num_positives)
        self.positive_pool = check_positive_pool(positive_pool)

    @torch.no_grad()
    def forward(self, pool: Tensor, anchor: Tensor, labels: Tensor | None = None) -> Tensor:
        check_pool(pool)
        b, v, d = pool.shape
        anchor = check_anchor_index(anchor, b, v).to(pool.device)
        if self.positive_pool == "instance":
            check_pool_size(v, self.num_positives)
            return farthest_point_from_dissimilarity(
                pool_dissimilarity(unit(pool)), anchor, self.num_positives
            )
        if labels is None:
            raise ValueError("positive_pool='class' needs labels: call miner(pool, anchor, labels)")
        labels = checked_labels(labels, b, pool.device)
        check_pool_size(v, self.num_positives, labels)
        start = torch.arange(b, device=pool.device) * v + anchor
        member = class_pool_members(labels, v, start)
        return farthest_point_flat(unit(pool).reshape(b * v, d), start, member, self.num_positives)

    def extra_repr(self) -> str:
        return f"num_positives={self.num_positives}, positive_pool={self.positive_pool!r}"


def random_positives(member: Tensor, num_positives: int, generator: torch.Generator) -> Tensor:
    """``num_positives`` distinct members of each row, uniformly at random (no gradient).

    ``member[B, N]`` bool marks the admissible candidates of each row (the anchor already
    removed).  Uniform scores are drawn on ``generator``'s device (then moved), so a
    CPU generator gives the same choice on every device; the chosen indices are the
    top-``num_positives`` scores among members, i.e. a uniform random subset.
    """
    scores = torch.rand(member.shape, generator=generator, device=generator.device)
    scores = scores.to(member.device).masked_fill(~member, -1.0)
    return scores.topk(num_positives, dim=1).indices
