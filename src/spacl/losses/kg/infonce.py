"""Filtered InfoNCE for link prediction (:class:`LinkInfoNCELoss`), per training triple::

    loss(h, r, t) = -log( e^{l_t} / (e^{l_t} + sum_{e not in P(h, r)} e^{l_e}) )

with ``l_e = <f(h, r), g(e)> / tau``: the 1-N cross-entropy of Dettmers et al. (2018)
with the other known tails of the query taken out of the denominator (the module
docstring of :mod:`spacl.losses.kg` gives the setting).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from spacl._validation import check_choice, check_positive
from spacl.losses.kernel import masked_logsumexp
from spacl.losses.kg.terms import (
    WEIGHTINGS,
    check_link_inputs,
    check_link_loss,
    known_pairs,
    reduce_pairs,
)


class LinkInfoNCELoss(nn.Module):
    """Filtered InfoNCE over all entities, or over sampled ones (module docstring).

    Call: ``loss(query[B, d], entities[E, d], positives[B, E] bool) -> scalar``.
    Computed as the kernel's ``"pairwise"`` mode without materialising it over ``[B, E]``:
    one masked log-sum-exp of the negatives per query, then
    ``log(e^{l_ap} + e^{neg_a}) - l_ap`` for the positive pairs only.

    Args:
        temperature: ``tau``.
        num_negatives: ``None`` scores every entity; ``k`` scores ``k`` uniformly sampled
            entities (shared by the batch, drawn from ``generator``) plus the positives.
        weighting: ``"triple"`` (default: the mean over training triples) or ``"query"``.
        generator: source of the sampled negatives.

    Example:
        >>> import torch
        >>> from spacl.losses.kg import LinkInfoNCELoss
        >>> query, entities = torch.randn(4, 16), torch.randn(10, 16)
        >>> positives = torch.zeros(4, 10, dtype=torch.bool)
        >>> positives[torch.arange(4), torch.tensor([1, 3, 5, 7])] = True  # one known tail each
        >>> loss = LinkInfoNCELoss(temperature=0.5)(query, entities, positives)
        >>> loss.shape, bool(loss > 0)
        (torch.Size([]), True)
    """

    def __init__(
        self,
        temperature: float = 1.0,
        num_negatives: int | None = None,
        weighting: str = "triple",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        if num_negatives is not None and (
            not isinstance(num_negatives, int)
            or isinstance(num_negatives, bool)
            or num_negatives < 1
        ):
            raise ValueError(f"num_negatives must be None or an int >= 1, got {num_negatives!r}")
        check_choice(weighting, "weighting", WEIGHTINGS)
        self.num_negatives = num_negatives
        self.weighting = weighting
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)

    def forward(
        self,
        query: Tensor,
        entities: Tensor,
        positives: Tensor,
        known: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """The loss; ``known``: the ``(row, col)`` pairs of ``positives``' ``True``
        entries, if the caller has them (saves a ``[B, E]`` scan; ignored when sampling)."""
        query, entities = check_link_inputs(query, entities, positives)
        if self.num_negatives is not None:
            sampled = torch.randint(
                0, entities.shape[0], (self.num_negatives,), generator=self.rng
            ).to(positives.device)
            cols = torch.unique(torch.cat((positives.any(0).nonzero().squeeze(1), sampled)))
            entities, positives = entities[cols], positives[:, cols]
            known = None
        row, col, _ = known_pairs(positives, known)
        logits = (query @ entities.T) / self.temperature
        neg = masked_logsumexp(logits, ~positives)  # [B]
        pos = logits[row, col]
        per_pair = torch.logaddexp(neg[row], pos) - pos  # -log(e^l / (e^l + e^neg))
        loss = reduce_pairs(per_pair, row, query.shape[0], self.weighting)
        return check_link_loss(loss, query, entities, "LinkInfoNCELoss")

    def get_extra_state(self) -> dict[str, Tensor]:
        """The sampling generator's state, so a resumed run samples what an
        uninterrupted one samples."""
        return {"rng_state": self.rng.get_state()}

    def set_extra_state(self, state: dict[str, Tensor]) -> None:
        self.rng.set_state(state["rng_state"])

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, num_negatives={self.num_negatives}, "
            f"weighting={self.weighting!r}"
        )
