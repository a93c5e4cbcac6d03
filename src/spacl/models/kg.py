"""Contrastive link predictor: a query encoder ``f(h, r)`` and an entity encoder ``g(t)``.

Both encoders share one entity embedding table; ``f`` combines the head embedding with
a relation embedding through a relation-specific interaction, so that the score of a
triple is an inner product ``s(h, r, t) = <f(h, r), g(t)>``.  Scoring every entity for a
batch of queries is therefore one ``[B, d] x [d, E]`` matmul (the "1-N" scorer of
Dettmers et al. 2018), which is what makes InfoNCE over all entities and filtered
ranking cheap.

Interactions (``kind``):

- ``"complex"`` (Trouillon et al. 2016): ``d = 2k`` holds real and imaginary parts,
  ``f(h, r) = h ∘ r`` as a complex product, ``s = Re <h ∘ r, conj(t)>``; written as a
  real inner product ``<[Re q, Im q], [Re t, Im t]>``.  Handles asymmetric relations
  through the reciprocal relations of the training data.
- ``"distmult"`` (Yang et al. 2015): ``f(h, r) = h ∘ r`` element-wise, real.

``normalize=True`` puts queries and entities on the unit sphere (cosine scores, the
temperature then sets the scale); the default keeps raw inner products and regularises
with the weighted nuclear 3-norm N3 (Lacroix et al. 2018), :meth:`n3`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from spacl._validation import check_choice, check_flag

__all__ = ["KG_INTERACTIONS", "LinkPredictor"]

KG_INTERACTIONS = ("complex", "distmult")


class LinkPredictor(nn.Module):
    """Embedding-table link predictor with a 1-N scorer.

    Args:
        num_entities: ``E``.
        num_relations: relation ids in use (``2R`` with reciprocal relations).
        dim: embedding width ``d`` of queries and entities (even for ``complex``).
        kind: ``"complex"`` or ``"distmult"``.
        init_scale: embeddings start as ``N(0, init_scale^2)`` (small, as in
            Lacroix et al. 2018, so that the first softmax is nearly uniform).
        dropout: dropout on the query ``f(h, r)`` during training.
        normalize: L2-normalise queries and entities (cosine scores).
    """

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        dim: int = 400,
        kind: str = "complex",
        *,
        init_scale: float = 1e-3,
        dropout: float = 0.0,
        normalize: bool = False,
    ) -> None:
        super().__init__()
        for name, value in (
            ("num_entities", num_entities),
            ("num_relations", num_relations),
            ("dim", dim),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        check_choice(kind, "kind", KG_INTERACTIONS)
        if kind == "complex" and dim % 2:
            raise ValueError(f"dim must be even for kind='complex' (real + imaginary), got {dim}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if not init_scale > 0:
            raise ValueError(f"init_scale must be > 0, got {init_scale}")
        self.kind = kind
        self.dim = dim
        self.normalize = check_flag(normalize, "normalize")
        self.entity = nn.Embedding(num_entities, dim)
        self.relation = nn.Embedding(num_relations, dim)
        nn.init.normal_(self.entity.weight, std=init_scale)
        nn.init.normal_(self.relation.weight, std=init_scale)
        self.dropout = nn.Dropout(dropout)

    @property
    def num_entities(self) -> int:
        return int(self.entity.num_embeddings)

    @property
    def num_relations(self) -> int:
        return int(self.relation.num_embeddings)

    def _combine(self, h: Tensor, r: Tensor) -> Tensor:
        if self.kind == "distmult":
            return h * r
        k = self.dim // 2
        h_re, h_im = h[:, :k], h[:, k:]
        r_re, r_im = r[:, :k], r[:, k:]
        return torch.cat((h_re * r_re - h_im * r_im, h_re * r_im + h_im * r_re), dim=1)

    def _check_ids(self, ids: Tensor, name: str, size: int) -> None:
        if not isinstance(ids, Tensor) or ids.ndim != 1 or ids.is_floating_point():
            got = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"{name} must be a 1-D integer tensor, got {got}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= size):
            raise ValueError(f"{name} holds ids outside [0, {size})")

    def query(self, heads: Tensor, relations: Tensor) -> Tensor:
        """``f(h, r)``: ``[B, d]`` query embeddings (dropout in training mode)."""
        self._check_ids(heads, "heads", self.num_entities)
        self._check_ids(relations, "relations", self.num_relations)
        q = self.dropout(self._combine(self.entity(heads), self.relation(relations)))
        return F.normalize(q, dim=1) if self.normalize else q

    def entities(self, ids: Tensor | None = None) -> Tensor:
        """``g(t)``: ``[E, d]`` embeddings of every entity (or of ``ids``)."""
        e = self.entity.weight if ids is None else self.entity(ids)
        return F.normalize(e, dim=1) if self.normalize else e

    def forward(self, heads: Tensor, relations: Tensor) -> Tensor:
        """Scores ``<f(h, r), g(e)>`` of every entity ``e``: ``[B, E]``."""
        return self.query(heads, relations) @ self.entities().T

    def n3(self, heads: Tensor, relations: Tensor, tails: Tensor | None = None) -> Tensor:
        """N3 regulariser (Lacroix et al. 2018): ``mean_b sum_k |h_bk|^3 + |r_bk|^3 (+ |t_bk|^3)``.

        For ``complex`` the modulus of each complex coordinate is used.
        """
        parts = [self.entity(heads), self.relation(relations)]
        if tails is not None:
            parts.append(self.entity(tails))
        total = heads.new_zeros((), dtype=self.entity.weight.dtype)
        for x in parts:
            if self.kind == "complex":
                k = self.dim // 2
                modulus = torch.sqrt(x[:, :k] ** 2 + x[:, k:] ** 2 + 1e-12)
            else:
                modulus = x.abs()
            total = total + (modulus**3).sum() / max(x.shape[0], 1)
        return total
