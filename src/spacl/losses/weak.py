"""MaskCon: masked contrastive learning for coarse-labelled data (Feng & Patras, CVPR 2023)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from spacl._validation import check_flag, check_in_range, check_positive
from spacl.losses._batch import check_anchor_mode, check_extra_negatives, parse_views
from spacl.losses.kernel import masked_logsumexp, reduce_anchors
from spacl.losses.normalize import NormalizeMode, check_normalize_mode, normalize

__all__ = ["MaskConLoss"]


class MaskConLoss(nn.Module):
    """MaskCon (Feng & Patras, "MaskCon: Masked Contrastive Learning for Coarse-Labelled
    Dataset", CVPR 2023): soft instance targets from a coarse-label-masked similarity.

    A query ``q_i`` (online encoder) is scored against candidates ``c_j``: its own key
    ``k_i`` (momentum encoder, another view), the other keys of the batch and the rows of
    a key queue, each with a coarse label.  The target over the candidates is built from
    the *key's* similarities, masked to the candidates of the query's coarse class
    (no gradient)::

        M_ij   = [y_j == y_i] and j != own(i)                       (coarse mask)
        t_ij   = exp(<k_i, c_j>/T2 - max_{j' in M_i} <k_i, c_j'>/T2)   for j in M_i, else 0
        t_i,own = 1                                                  (the own key scores as
                                                                      the nearest neighbour)
        z_i    = w * t_i / sum_j t_ij + (1 - w) * onehot(own(i))     (mixed with self-supervision)
        loss_i = -sum_j z_ij log softmax_j(<q_i, c_j> / T1)

    and the mean over queries.  ``w = 0`` is MoCo's InfoNCE; large ``T2`` spreads the
    target over the whole coarse class (coarse SupCon), small ``T2`` concentrates it on
    the nearest same-class keys (the fine-grained relations the paper is after).

    **Decisions** (the authors' code, ``MaskCon_CVPR2023``, is followed unless stated):

    - *Queries and keys*: with ``targets=[B, V, d]`` (a momentum encoder) the key of the
      query view ``v`` is ``targets[:, (v+1) % V]``; without targets it is
      ``features[:, (v+1) % V]`` **detached** (keys never carry gradient, as in MoCo).
      ``anchor_mode="all"`` makes every view a query (for ``V = 2`` the symmetrised
      loss); ``"one"`` uses view 0 only (the code's single direction).
    - *Candidates*: own key, then (``in_batch_keys=True``, default) the other
      instances' keys of the same key view, then the queue (``extra_negatives`` with
      ``extra_negative_labels``, e.g. a :class:`~spacl.mining.NegativeQueue` of keys).
      The code uses only ``[own key, queue]`` and enqueues the batch after the loss;
      ``in_batch_keys=False`` is that exact form and needs a non-empty queue.  The
      default keeps the loss defined from the first step without pre-filling the queue.
    - A query with no same-coarse candidate gets the one-hot self target (the code
      divides 0 by 0 there).
    - Defaults are the code's: ``T1 = 0.1``, ``T2 = 0.05``, ``w = 0.5``; queue 8192
      and key momentum 0.99 belong to the recipe.
    - Labels (the coarse ones) are required; normalisation ``"sphere"`` as in the code.

    Example (coarse labels: 4 coarse classes over 16 instances):
        >>> import torch
        >>> from spacl.losses import MaskConLoss
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> MaskConLoss(temperature=0.1)(z0, z1, labels=torch.arange(16) % 4).shape
        torch.Size([])
    """

    requires_labels = True

    def __init__(
        self,
        temperature: float = 0.1,
        target_temperature: float = 0.05,
        weight: float = 0.5,
        *,
        in_batch_keys: bool = True,
        anchor_mode: str = "all",
        normalize: NormalizeMode = "sphere",
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.target_temperature = check_positive(target_temperature, "target_temperature")
        self.weight = check_in_range(weight, "weight", 0.0, 1.0)
        self.in_batch_keys = check_flag(in_batch_keys, "in_batch_keys")
        self.anchor_mode = check_anchor_mode(anchor_mode)
        self.normalize = check_normalize_mode(normalize)
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    def forward(
        self,
        features: Tensor,
        other: Tensor | None = None,
        *,
        labels: Tensor | None = None,
        targets: Tensor | None = None,
        extra_negatives: Tensor | None = None,
        extra_negative_labels: Tensor | None = None,
    ) -> Tensor:
        """Loss of ``features[B, V, d]`` (or ``z0, z1``) with coarse ``labels[B]``.

        Args:
            targets: ``[B, V, d]`` key-encoder embeddings (else detached ``features``).
            extra_negatives, extra_negative_labels: the key queue ``[Q, d]`` and its
                coarse labels ``[Q]``.
        """
        batch = parse_views(features, other, labels, targets)
        if batch.labels is None:
            raise ValueError("MaskConLoss needs (coarse) labels: call loss(features, labels)")
        if batch.num_instances == 0:
            raise ValueError(
                f"MaskConLoss: features is an empty batch, of shape {tuple(features.shape)} "
                "(it needs at least 1 instance)"
            )
        queue, queue_labels = check_extra_negatives(extra_negatives, extra_negative_labels, batch)
        v = int(batch.views.shape[1])
        if v < 2:
            raise ValueError(f"MaskConLoss needs V >= 2 views (query and key), got V = {v}")
        if not self.in_batch_keys and queue is None:
            raise ValueError(
                "MaskConLoss(in_batch_keys=False) needs a non-empty key queue "
                "(extra_negatives): its only candidates are the own key and the queue"
            )
        keys_all = (batch.targets if batch.targets is not None else batch.views).detach()
        y = batch.labels
        if queue is not None:
            assert queue_labels is not None
            queue = normalize(queue.detach(), self.normalize)
        views = range(v) if self.anchor_mode == "all" else range(1)
        losses = []
        for view in views:
            q = normalize(batch.views[:, view], self.normalize)
            k = normalize(keys_all[:, (view + 1) % v], self.normalize)
            losses.append(self._view_loss(q, k, y, queue, queue_labels))
        return reduce_anchors(torch.cat(losses), self.reduction)

    def _view_loss(
        self, q: Tensor, k: Tensor, y: Tensor, queue: Tensor | None, queue_labels: Tensor | None
    ) -> Tensor:
        b = int(q.shape[0])
        rows = torch.arange(b, device=q.device)
        if self.in_batch_keys:
            cands, cand_y = k, y
            own = rows
            if queue is not None:
                assert queue_labels is not None
                cands, cand_y = torch.cat((k, queue)), torch.cat((y, queue_labels))
            logits = (q / self.temperature) @ cands.T
        else:
            assert queue is not None and queue_labels is not None
            cands, cand_y = queue, queue_labels
            own = torch.zeros(b, dtype=torch.long, device=q.device)
            pos = (q * k).sum(1, keepdim=True)
            logits = torch.cat((pos, q @ queue.T), 1) / self.temperature
        target = self._targets(k, y, cands, cand_y, own)
        lse = masked_logsumexp(logits, None)
        return lse - (target * logits).sum(1)

    @torch.no_grad()
    def _targets(self, k: Tensor, y: Tensor, cands: Tensor, cand_y: Tensor, own: Tensor) -> Tensor:
        """``[B, M]`` soft targets ``z`` over the candidate columns (see the class docstring)."""
        sim = (k / self.target_temperature) @ cands.T
        mask = y.unsqueeze(1) == cand_y.unsqueeze(0)
        if self.in_batch_keys:
            mask.scatter_(1, own.unsqueeze(1), False)
        else:  # columns are [own key, queue]: add the own column
            sim = torch.cat((torch.zeros_like(sim[:, :1]), sim), 1)
            mask = torch.cat((torch.zeros_like(mask[:, :1]), mask), 1)
        sim = sim.masked_fill(~mask, -math.inf)
        top = sim.amax(1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        soft = (sim - top).exp()  # 0 off the mask, 1 at the nearest same-class key
        soft.scatter_(1, own.unsqueeze(1), 1.0)
        soft = soft / soft.sum(1, keepdim=True)
        onehot = torch.zeros_like(soft)
        onehot.scatter_(1, own.unsqueeze(1), 1.0)
        return self.weight * soft + (1.0 - self.weight) * onehot

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, target_temperature={self.target_temperature}, "
            f"weight={self.weight}, in_batch_keys={self.in_batch_keys}, "
            f"anchor_mode={self.anchor_mode!r}"
        )
