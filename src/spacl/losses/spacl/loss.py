"""The SPACL loss object (:class:`SPACLLoss`): its state, and the dispatch of a forward pass.

The objective, its decisions and its ablations are described in the docstring of
:mod:`spacl.losses.spacl`.  The object holds what persists between calls (the switches
as :class:`~spacl.losses.spacl.options.SPACLOptions`, the generator/discriminator game
and its optimiser, the random generator, :attr:`SPACLLoss.last`) and hands data to the
functions of the package: :func:`~spacl.losses.spacl.mining.mine`, then
:func:`~spacl.losses.spacl.one_anchor.one_anchor_loss` or
:func:`~spacl.losses.spacl.every_view.every_view_loss`.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Generic, TypeVar, overload

import torch
from torch import Tensor
from torch.profiler import record_function

from spacl._validation import check_int
from spacl.losses.game import LazyGameModule
from spacl.losses.kernel import reduce_anchors
from spacl.losses.normalize import NormalizeMode
from spacl.losses.spacl.every_view import every_view_loss
from spacl.losses.spacl.inputs import check_pool, checked_batch, one_anchor
from spacl.losses.spacl.mining import anchor_of, mine, mine_every
from spacl.losses.spacl.one_anchor import one_anchor_loss
from spacl.losses.spacl.options import SPACLFields, SPACLOptions, SPACLParts, options_with
from spacl.losses.spacl.step import SPACLStep
from spacl.mining.adversarial import (
    AdversarialNegatives,
    PlayerOptions,
    build_players,
    game_players,
)
from spacl.mining.cut import RelativeThresholdNegatives
from spacl.mining.pool import unit

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

_T = TypeVar("_T")


class _Option(Generic[_T]):
    """An attribute of :class:`SPACLLoss` that reads its :attr:`~SPACLLoss.options` field of
    the same name; setting it replaces the record (:meth:`SPACLLoss.replace_options`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Option[_T]: ...
    @overload
    def __get__(self, obj: SPACLLoss, owner: type | None = None) -> _T: ...
    def __get__(self, obj: SPACLLoss | None, owner: type | None = None) -> _T | _Option[_T]:
        if obj is None:
            return self
        value: _T = getattr(obj.options, self.name)
        return value

    def __set__(self, obj: SPACLLoss, value: _T) -> None:
        obj._use_options(options_with(obj.options, {self.name: value}, f"SPACLLoss.{self.name}"))


class _ClassSignature:
    """``SPACLLoss.__signature__``: what :func:`inspect.signature` shows of the class (and
    what the objective registry reads as its accepted arguments): ``temperature``, every
    other field of :class:`SPACLOptions` as a keyword with its default, then ``options``,
    ``embedding_dim`` and ``generator``.  Read off an instance it is absent, so that
    ``inspect.signature(loss)`` stays the call's."""

    def __get__(self, obj: object, owner: type | None = None) -> inspect.Signature:
        if obj is not None:
            raise AttributeError("__signature__")
        kw = inspect.Parameter.KEYWORD_ONLY
        first, *rest = (
            inspect.Parameter(f.name, kw, default=f.default, annotation=f.type)
            for f in dataclasses.fields(SPACLOptions)
        )
        state = [
            inspect.Parameter("options", kw, default=None, annotation="SPACLOptions | None"),
            inspect.Parameter("embedding_dim", kw, default=None, annotation="int | None"),
            inspect.Parameter("generator", kw, default=None, annotation="torch.Generator | None"),
        ]
        temperature = first.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return inspect.Signature([temperature, *rest, *state], return_annotation="None")


class SPACLLoss(LazyGameModule):
    """SPACL objective (SPEC §1): hard positives, adversarial negatives, relative cut.

    ``SPACLLoss(temperature=None, /, *, options=None, embedding_dim=None, generator=None,
    **fields)``: the options are keyword arguments (``temperature`` also the one
    positional), typed by :class:`~spacl.losses.spacl.options.SPACLFields`; or a record
    ``options=SPACLOptions(...)``, in which case the keyword fields given override its
    fields (``SPACLLoss(options=base, share=0.5)``: ``base`` with another share).  An
    unknown keyword is a ``TypeError`` naming it (and the closest field), a bad value a
    ``ValueError`` naming the argument.  ``inspect.signature(SPACLLoss)`` lists every field.

    Args:
        temperature: ``tau`` (default 0.1).
        num_positives: ``lambda_P``, hard positives per anchor (default 2).
        share: ``lambda_Q``, kept share of the negative mass, ``0 < share <= 1`` (0.95).
        num_adversarial: ``K_adv``, generated negatives per anchor (default 1; 0: none).
        variant: ablation switch, one of :data:`VARIANTS` (module docstring).
        positive_pool: ``"instance"`` (self- or weakly supervised), ``"instance_class"`` or
            ``"class"`` (supervised, need labels); see the module docstring.
        positive_mode: ``"log_sum_exp"`` (the paper) or ``"mean"`` (``L_out`` form).
        mass: reading of the cut: ``"similarity"`` (the paper's formula on raw
            similarities, default), ``"exp"`` (weights ``exp(s / tau)``) or ``"linear"``
            (``(1 + s) / 2``); see :mod:`spacl.mining.cut.threshold`.
        negatives: ``"all_views"`` or ``"anchor_views"`` of the other instances.
        online: how :class:`spacl.tasks.image.Arm` feeds this loss: ``"all_views"`` (one online
            forward pass of every view; anchors ``[B, V, d]``) or ``"anchor_view"``
            (online encoder on the anchor views only, the target on the pool).  The
            loss itself accepts every form whatever this says.
        anchor_set: ``"dynamic"`` (the paper: one anchor per instance, the hardest view)
            or ``"every_view"``: each of the ``V`` views is an anchor once, with its own
            farthest-point positives from the instance's pool (``B V`` anchors, as the
            baselines have; needs ``anchors`` ``[B, V, d]`` or ``None``), computed in
            one fused pass with one game round; per-anchor rows (``reduction="none"``,
            :attr:`last`) are instance-major.  An explicit ``anchor_index`` overrides it.
        normalize: ``sphere | ball | none`` for the loss's embeddings; mining always
            works on the unit sphere.
        detach_candidates: treat the target (candidate) embeddings as constants.
        adversarial_lr: Adam learning rate of the game (default ``1e-3``).
        adversarial_hidden: hidden width of ``G`` and ``D`` (default ``2 d``).
        conditional_discriminator: feed ``D`` the anchor too (not in the paper).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        options: a :class:`~spacl.losses.spacl.options.SPACLOptions` record to start
            from (default: the defaults above); the fields given override it.
        embedding_dim: ``d`` (state, not an option); builds the generator and
            discriminator now (else at the first forward pass, or when a
            ``state_dict`` holding them is loaded).
        generator: ``torch.Generator`` (state, not an option) for random positives and
            for seeding the game (default: seeded with 0).

    Call: ``loss(anchors, pool, labels=None, *, anchor_index=None, extra_negatives=None,
    extra_negative_labels=None) -> Tensor`` with ``pool[B, V, d]`` and ``anchors``
    ``None``, ``[B, d]`` or ``[B, V, d]`` (module docstring).  After each call
    :attr:`last` holds a :class:`SPACLStep`.  The options are kept as one frozen
    :class:`~spacl.losses.spacl.options.SPACLOptions` record, :attr:`options` (each
    also readable as an attribute, e.g. ``loss.temperature``); :meth:`from_options`
    builds the loss from one.

    **In your own training loop**, three things differ from a plain loss:

    - the loss trains its own generator and discriminator (the adversarial negatives)
      with its own Adam optimiser, one round per call in training mode: keep its
      parameters **out of your optimiser** (give it ``encoder.parameters()`` only);
    - those networks are built on the first call, when ``d`` is known (pass
      ``embedding_dim`` to build them at once, e.g. before loading a checkpoint);
    - its ``state_dict()`` (the networks and their optimiser's moments) belongs in your
      checkpoint beside the encoder's, or a resumed run plays a fresh game.

    Example:
        >>> import torch
        >>> from spacl.losses import SPACLLoss
        >>> loss_fn = SPACLLoss(temperature=0.1, embedding_dim=128)
        >>> encoder = torch.nn.Linear(32, 128)                  # your model
        >>> opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)  # not loss_fn's
        >>> pool = torch.nn.functional.normalize(torch.randn(8, 5, 128), dim=-1)
        >>> float(loss_fn(None, pool)) > 0      # anchors None: picked from the pool
        True
        >>> state = {"loss": loss_fn.state_dict()}  # with the encoder's, in a checkpoint
    """

    __signature__ = _ClassSignature()

    def __init__(
        self,
        temperature: float | None = None,
        /,
        *,
        options: SPACLOptions | None = None,
        embedding_dim: int | None = None,
        generator: torch.Generator | None = None,
        **fields: Unpack[SPACLFields],
    ) -> None:
        super().__init__()
        if temperature is not None:
            if "temperature" in fields:
                raise TypeError("SPACLLoss() got multiple values for argument 'temperature'")
            fields["temperature"] = temperature
        self._use_options(options_with(options, fields, "SPACLLoss()"))
        if embedding_dim is not None:
            embedding_dim = check_int(embedding_dim, "embedding_dim", low=1)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"generator must be a torch.Generator or None, got {type(generator).__name__}"
            )
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)
        self.register_module("adversarial", None)
        self.adversarial: AdversarialNegatives | None
        if embedding_dim is not None and self.options.effective_adversarial > 0:
            self.adversarial = build_players(embedding_dim, self.options.players, self.rng)
        self.last: SPACLStep | None = None

    @classmethod
    def from_options(
        cls,
        options: SPACLOptions,
        *,
        embedding_dim: int | None = None,
        generator: torch.Generator | None = None,
    ) -> SPACLLoss:
        """The loss of an :class:`SPACLOptions` record (``embedding_dim`` and
        ``generator`` as in the constructor: state, not options)."""
        return cls(options=options, embedding_dim=embedding_dim, generator=generator)

    # -- the options: each readable and settable as an attribute (a new record) -----------
    temperature = _Option[float]()
    num_positives = _Option[int]()
    share = _Option[float]()
    num_adversarial = _Option[int]()
    variant = _Option[str]()
    positive_pool = _Option[str]()
    positive_mode = _Option[str]()
    mass = _Option[str]()
    negatives = _Option[str]()
    online = _Option[str]()
    anchor_set = _Option[str]()
    normalize = _Option[NormalizeMode]()
    detach_candidates = _Option[bool]()
    reduction = _Option[str]()

    def replace_options(self, **changes: Unpack[SPACLFields]) -> None:
        """Replace some options (names and values checked again, as in the constructor)
        and rebuild the cut from them; the game, once built, keeps its networks."""
        self._use_options(options_with(self.options, changes, "replace_options()"))

    def _use_options(self, options: SPACLOptions) -> None:
        """Keep ``options`` (a checked record) and the cut they make."""
        self.options = options
        self.cut = RelativeThresholdNegatives(
            options.effective_share, options.mass, options.temperature
        )

    @property
    def parts(self) -> SPACLParts:
        """The parts :attr:`variant` keeps."""
        return self.options.parts

    @property
    def effective_share(self) -> float:
        """``lambda_Q`` as the cut applies it."""
        return self.options.effective_share

    @property
    def effective_adversarial(self) -> int:
        """``K_adv`` as played."""
        return self.options.effective_adversarial

    # -- the game's players ------------------------------------------------------------------
    def player_options(self) -> PlayerOptions:
        """How the game's players are built: :attr:`SPACLOptions.players` of
        :attr:`options` (a frozen record; the constructor and :meth:`forward` hand it on
        as data, and a checkpoint's players are rebuilt from it)."""
        return self.options.players

    # -- mining ------------------------------------------------------------------------------
    @torch.no_grad()
    def choose_anchor(self, pool: Tensor) -> Tensor:
        """``LongTensor[B]``: the anchor view of every instance under this variant.

        The dynamic anchor ``argmax_u h(u)`` on the (target) ``pool[B, V, d]``, or view 0
        for ``no_anchor`` / ``oaa``.  A training step (the image task's Arm) calls this
        on the target embeddings, runs the online encoder on ``views[arange(B), a]``
        only, and passes ``anchor_index=a`` to :meth:`forward`.
        """
        check_pool(self.options, pool, None, positives=False)
        return anchor_of(self.options.parts, unit(pool.detach()), None)

    # -- the loss ----------------------------------------------------------------------------
    def forward(
        self,
        anchors: Tensor | None,
        pool: Tensor,
        labels: Tensor | None = None,
        *,
        anchor_index: Tensor | None = None,
        extra_negatives: Tensor | None = None,
        extra_negative_labels: Tensor | None = None,
    ) -> Tensor:
        """SPACL loss of a batch (see the class and module docstrings for the contract).

        Args:
            anchors: online embeddings: ``None`` (take the anchor view from ``pool``),
                ``[B, d]`` (one embedded view per instance) or ``[B, V, d]`` (all views).
            pool: ``[B, V, d]`` target embeddings of every view (view 0 the original).
            labels: optional ``[B]`` integer class labels.
            anchor_index: optional ``[B]`` view index of the anchor (overrides the
                variant's choice; with ``anchors[B, d]`` it names the embedded view).
            extra_negatives: optional ``[Q, d]`` constant candidates (a negative queue),
                joined to ``Q_i`` before the cut.
            extra_negative_labels: ``[Q]`` labels of ``extra_negatives``, required exactly
                when ``labels`` are given (same-class rows are not negatives), whatever
                ``positive_pool``; a ``ValueError`` otherwise, as for the baselines.

        Under :mod:`torch.profiler` the call is the region ``"spacl/loss"``, with
        ``"spacl/mine"`` (anchor and positives), ``"spacl/game"`` (the generator and
        discriminator round) and ``"spacl/cut"`` inside it.
        """
        with record_function("spacl/loss"):
            # the object's state read once and handed on as data: nothing below calls it
            options = self.options
            batch = checked_batch(
                options, anchors, pool, labels, anchor_index, extra_negatives, extra_negative_labels
            )
            single = one_anchor(options, batch)
            with record_function("spacl/mine"):
                if single:
                    mined = mine(options, self.rng, pool, batch.labels, batch.anchor_index)
                else:  # every view an anchor, fused
                    mined = mine_every(options, self.rng, pool, batch.labels)
            game = game_players(self.adversarial, pool.shape[2], options.players, self.rng)
            if game is not None and self.adversarial is None:
                self.adversarial = game  # built at this first call
            objective = one_anchor_loss if single else every_view_loss
            per_anchor, self.last = objective(options, self.cut, batch, mined, game, self.training)
            return reduce_anchors(per_anchor, options.reduction)

    def extra_repr(self) -> str:
        o = self.options
        return (
            f"temperature={o.temperature}, num_positives={o.num_positives}, "
            f"share={o.share}, num_adversarial={o.num_adversarial}, "
            f"variant={o.variant!r}, positive_pool={o.positive_pool!r}, "
            f"positive_mode={o.positive_mode!r}, mass={o.mass!r}, "
            f"negatives={o.negatives!r}"
        )
