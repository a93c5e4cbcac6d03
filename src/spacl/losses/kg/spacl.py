"""The SPACL-KG loss object (:class:`LinkSPACLLoss`, SPEC §1.2-1.5): its state, and the
dispatch of a forward pass; formula and **Decisions** in the module docstring of
:mod:`spacl.losses.kg`.

The object holds what persists between calls (the switches as
:class:`~spacl.losses.kg.options.LinkSPACLOptions`, the generator/discriminator game and
its optimiser, the random generator, the cut, :attr:`LinkSPACLLoss.last`) and hands data
to the functions of the package: :func:`~spacl.losses.kg.positives.hard_pairs`, then
:func:`~spacl.losses.kg.objective.link_spacl_objective` (the generated negatives and the
cut: :mod:`spacl.losses.kg.negatives`).
"""

from __future__ import annotations

import inspect
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from spacl.losses.game import LazyGameModule
from spacl.losses.kg.objective import LinkBatch, LinkSPACLStep, link_spacl_objective
from spacl.losses.kg.options import LinkSPACLFields, LinkSPACLOptions, link_options_with
from spacl.losses.kg.positives import hard_pairs, hard_positives
from spacl.losses.kg.terms import check_link_inputs, check_link_loss, known_pairs
from spacl.losses.spacl.options import SPACLParts
from spacl.mining.adversarial import AdversarialNegatives, PlayerOptions, game_players
from spacl.mining.cut import RelativeThresholdNegatives

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

__all__ = ["LinkSPACLLoss"]

#: the fields the constructor also takes by position, in this order (as before the record)
POSITIONAL_FIELDS = ("temperature", "num_positives", "share", "num_adversarial", "variant")


class _ClassSignature:
    """``LinkSPACLLoss.__signature__``: what :func:`inspect.signature` shows of the class
    (and what the objective registry reads as its accepted arguments): the fields of
    :class:`LinkSPACLOptions` with their defaults (:data:`POSITIONAL_FIELDS` also by
    position), then ``options`` and ``generator``.  Read off an instance it is absent, so
    that ``inspect.signature(loss)`` stays the call's."""

    def __get__(self, obj: object, owner: type | None = None) -> inspect.Signature:
        if obj is not None:
            raise AttributeError("__signature__")
        params = [
            inspect.Parameter(
                f.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD
                if f.name in POSITIONAL_FIELDS
                else inspect.Parameter.KEYWORD_ONLY,
                default=f.default,
                annotation=f.type,
            )
            for f in fields(LinkSPACLOptions)
        ]
        kw = inspect.Parameter.KEYWORD_ONLY
        state = [
            inspect.Parameter("options", kw, default=None, annotation="LinkSPACLOptions | None"),
            inspect.Parameter("generator", kw, default=None, annotation="torch.Generator | None"),
        ]
        return inspect.Signature([*params, *state], return_annotation="None")


class _Option:
    """A read-only attribute of :class:`LinkSPACLLoss`: its :attr:`~LinkSPACLLoss.options`
    field of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: LinkSPACLLoss | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj.options, self.name)


class LinkSPACLLoss(LazyGameModule):
    """SPACL for link prediction: hard tails, adversarial and relative-threshold negatives.

    Call: ``loss(query[B, d], entities[E, d], positives[B, E] bool) -> scalar``; after the
    call :attr:`last` holds a :class:`LinkSPACLStep`.  Formula and **Decisions** in the
    module docstring; the cut is :meth:`RelativeThresholdNegatives.select`, the one
    implementation :class:`~spacl.losses.SPACLLoss` calls too (same tie rule: the
    lowest-indexed of the candidates tied at the threshold are kept first).

    The options are the fields of :class:`~spacl.losses.kg.options.LinkSPACLOptions`:
    keyword arguments (the first five also by position, in the order below), or a record
    ``options=LinkSPACLOptions(...)``, in which case the fields given override its fields
    (``LinkSPACLLoss(options=base, share=0.5)``).  An unknown keyword is a ``TypeError``
    naming it, a bad value a ``ValueError`` naming the argument; the record is kept as
    :attr:`options` (each field also readable as an attribute, ``num_adversarial`` as
    played by the variant).

    Args:
        temperature: ``tau``.
        num_positives: ``lambda_P``, hard positives per query (default 2).
        share: ``lambda_Q``, kept share of the negative mass (default 0.95).
        num_adversarial: ``K_adv`` generated negatives per query (default 1; 0: none).
        variant: ``"full"``, ``"no_hard_positive"`` (random positives),
            ``"no_adversarial"`` or ``"no_negative_selection"`` (SPEC §1.6).
        pool_size: most known tails entering farthest-point selection per query.
        mass: reading of the cut (SPEC §1.4): ``"exp"`` (default here: the measured KG
            recipe), ``"similarity"`` (the paper's formula on raw scores) or
            ``"linear"``.
        positive_mode: ``"log_sum_exp"`` (SPEC §1.5) or ``"pairwise"`` (each hard
            positive against the kept negatives, InfoNCE-style).
        weighting: ``"query"`` (SPEC: mean over anchors) or ``"triple"``.
        adversarial_lr: Adam learning rate of the generator/discriminator game.
        adversarial_hidden: hidden width of ``G`` and ``D`` (default ``2 d``, SPEC §1.3).
        game_batch: the game's round is played on at most this many queries of the
            batch, drawn at random (**Decision**: one ``D`` and one ``G`` step per
            training step as in SPEC §1.3, on a sub-batch to bound its cost; ``None``:
            all); the trained generator then draws the negatives of every query.
        compiled_cut: run the cut's long-row passes through ``torch.compile``
            (:class:`~spacl.mining.RelativeThresholdNegatives` ``compiled=True``): the
            same negatives, a faster step on CPU after a one-off compilation.
        options: a :class:`~spacl.losses.kg.options.LinkSPACLOptions` record to start
            from (default: the defaults above); the fields given override it.
        generator: source of random positives and of the game's seed (state, not an
            option).

    Example:
        >>> import torch
        >>> from spacl.losses.kg import LinkSPACLLoss
        >>> query, entities = torch.randn(4, 16, requires_grad=True), torch.randn(10, 16)
        >>> positives = torch.zeros(4, 10, dtype=torch.bool)
        >>> positives[:, :3] = True                    # three known tails per query
        >>> link_spacl = LinkSPACLLoss(temperature=0.5, num_positives=2)
        >>> loss = link_spacl(query, entities, positives)  # builds and plays its own G/D game
        >>> loss.backward()
        >>> link_spacl.last.hard_positives             # lambda_P hard tails of each query
        2.0
    """

    __signature__ = _ClassSignature()

    def __init__(
        self,
        *args: Any,
        options: LinkSPACLOptions | None = None,
        generator: torch.Generator | None = None,
        **fields: Unpack[LinkSPACLFields],
    ) -> None:
        super().__init__()
        if len(args) > len(POSITIONAL_FIELDS):
            raise TypeError(
                f"LinkSPACLLoss() takes at most {len(POSITIONAL_FIELDS)} positional "
                f"arguments ({len(args)} given)"
            )
        given: dict[str, Any] = dict(fields)
        for name, value in zip(POSITIONAL_FIELDS, args, strict=False):
            if name in given:
                raise TypeError(f"LinkSPACLLoss() got multiple values for argument {name!r}")
            given[name] = value
        self.options = link_options_with(options, given, "LinkSPACLLoss()")
        self.cut = RelativeThresholdNegatives(
            self.options.effective_share,
            self.options.mass,
            self.options.temperature,
            compiled=self.options.compiled_cut,
        )
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)
        self.register_module("adversarial", None)
        self.adversarial: AdversarialNegatives | None
        self.last: LinkSPACLStep | None = None

    @classmethod
    def from_options(
        cls, options: LinkSPACLOptions, *, generator: torch.Generator | None = None
    ) -> LinkSPACLLoss:
        """The loss of a :class:`LinkSPACLOptions` record (``generator`` as in the
        constructor: state, not an option)."""
        return cls(options=options, generator=generator)

    # -- the options: each readable as an attribute -----------------------------------------
    temperature = _Option()
    num_positives = _Option()
    share = _Option()
    variant = _Option()
    pool_size = _Option()
    mass = _Option()
    positive_mode = _Option()
    weighting = _Option()
    adversarial_lr = _Option()
    adversarial_hidden = _Option()
    game_batch = _Option()
    compiled_cut = _Option()

    @property
    def num_adversarial(self) -> int:
        """``K_adv`` as played (:attr:`LinkSPACLOptions.effective_adversarial`: 0 where the
        variant drops the adversarial negatives; ``options.num_adversarial`` is the one
        given)."""
        return self.options.effective_adversarial

    @property
    def parts(self) -> SPACLParts:
        """The parts the variant keeps, as the image loss reads them (SPACLOptions)."""
        return self.options.parts

    def player_options(self) -> PlayerOptions:
        """How the game's players are built, as a frozen record:
        :attr:`LinkSPACLOptions.players` of :attr:`options` (``K_adv`` as played, the
        hidden width and the learning rate)."""
        return self.options.players

    def hard_positives(
        self, query: Tensor, entities: Tensor, positives: Tensor, counts: Tensor | None = None
    ) -> Tensor:
        """``BoolTensor[B, E]`` of the hard positives ``P^h`` (module docstring), drawn
        from :attr:`rng` (:func:`spacl.losses.kg.positives.hard_positives`).
        ``counts``: ``positives.sum(1)`` if the caller has it."""
        return hard_positives(self.options, self.rng, query, entities, positives, counts)

    def forward(
        self,
        query: Tensor,
        entities: Tensor,
        positives: Tensor,
        known: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """The loss; ``known``: the ``(row, col)`` pairs of ``positives``' ``True``
        entries, if the caller has them (saves a ``[B, E]`` scan)."""
        # the object's state read once and handed on as data: nothing below calls it
        options = self.options
        query, entities = check_link_inputs(query, entities, positives)
        known_row, known_col, counts = known_pairs(positives, known)  # a few per query
        batch = LinkBatch(query, entities, positives, (known_row, known_col), counts)
        hard = hard_pairs(
            options, self.rng, query.detach(), entities.detach(), positives, batch.known, counts
        )
        # the players are built at the first call, after the draws of the hard positives
        game = game_players(self.adversarial, query.shape[1], options.players, self.rng)
        if game is not None and self.adversarial is None:
            self.adversarial = game
        loss, self.last = link_spacl_objective(
            options, self.cut, game, self.rng, self.training, batch, hard
        )
        return check_link_loss(loss, query, entities, type(self).__name__)

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, num_positives={self.num_positives}, "
            f"share={self.share}, num_adversarial={self.num_adversarial}, "
            f"variant={self.variant!r}, positive_mode={self.positive_mode!r}"
        )
