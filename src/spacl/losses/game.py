"""The state of a loss that plays the adversarial game (:class:`LazyGameModule`).

:class:`~spacl.losses.SPACLLoss` and :class:`~spacl.losses.kg.LinkSPACLLoss` each keep a
generator/discriminator pair (:class:`~spacl.mining.adversarial.AdversarialNegatives`,
``self.adversarial``) built at the first call, and a random generator (``self.rng``).
Both build their players with the plain functions of :mod:`spacl.mining.adversarial`
(:func:`~spacl.mining.adversarial.game_players` / ``build_players``), handing them a
frozen :class:`~spacl.mining.adversarial.PlayerOptions` record and the generator: no
mining code reads or calls a loss.  This base makes their checkpoints complete.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from spacl.mining.adversarial import (
    AdversarialNegatives,
    PlayerOptions,
    build_players,
    saved_players_shape,
)

__all__ = ["LazyGameModule"]


class LazyGameModule(nn.Module):
    """Base of a loss whose :class:`AdversarialNegatives` (``self.adversarial``) is built at
    its first call from a seed drawn from ``self.rng``.

    Its checkpoint is complete: loading a ``state_dict`` that holds saved players builds
    them first (:func:`~spacl.mining.adversarial.saved_players_shape`,
    :func:`~spacl.mining.adversarial.build_players` with :meth:`player_options`) so that
    their weights, optimiser states and noise stream load into them, and ``self.rng``'s
    state travels as the module's extra state.  A subclass sets ``self.rng`` and
    ``self.adversarial`` in its ``__init__`` and says how its players are built
    (:meth:`player_options`).
    """

    rng: torch.Generator
    adversarial: AdversarialNegatives | None

    def player_options(self) -> PlayerOptions:
        """The loss's options for its players (a frozen record)."""
        raise NotImplementedError

    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        # build the lazily created players first so that their weights load into them
        shape = saved_players_shape(state_dict, prefix + "adversarial.")
        if self.adversarial is None and shape is not None:
            dim, hidden, noise_dim = shape
            self.adversarial = build_players(
                dim, self.player_options(), self.rng, hidden=hidden, noise_dim=noise_dim
            )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> dict[str, Any]:
        return {"rng_state": self.rng.get_state()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.rng.set_state(state["rng_state"])
