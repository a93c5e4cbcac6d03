"""SPACL's switches as one frozen record (:class:`SPACLOptions`), and the ablation table.

Every function of :mod:`spacl.losses.spacl` reads what it needs from a
:class:`SPACLOptions`; the loss object keeps only state (its game, the generator of its
random positives) and dispatches.  The variants (SPEC §1.6) and what each switch means:
module docstring of :mod:`spacl.losses.spacl`.  :class:`SPACLFields` types the same
fields as keyword arguments (``SPACLLoss(temperature=0.1, ...)``), :func:`options_with`
checks their names and makes the record.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypedDict

from spacl._validation import check_choice, check_flag, check_int, check_positive
from spacl.losses.normalize import NormalizeMode, check_normalize_mode
from spacl.mining.adversarial import PlayerOptions
from spacl.mining.cut import MASSES, check_share
from spacl.mining.positives import check_num_positives

VARIANTS: tuple[str, ...] = (
    "full",
    "no_anchor",
    "no_hard_positive",
    "no_adversarial",
    "no_negative_selection",
    "oaa",
    "ib",
    "ib_h",
)
NEGATIVE_SETS: tuple[str, ...] = ("all_views", "anchor_views")
#: how labels enter (module docstring of :mod:`spacl.losses.spacl`); the two last need labels
SPACL_POSITIVE_POOLS: tuple[str, ...] = ("instance", "instance_class", "class")
POSITIVE_MODES: tuple[str, ...] = ("log_sum_exp", "mean")
#: how the image task's Arm (spacl.tasks.image.arm) feeds the loss: one online pass of every
#: view, or the online encoder on the anchor view only (with the target on the pool)
ONLINE_MODES: tuple[str, ...] = ("all_views", "anchor_view")
#: one dynamic anchor per instance (the paper), or every view an anchor once
ANCHOR_SETS: tuple[str, ...] = ("dynamic", "every_view")
REDUCTIONS: tuple[str, ...] = ("mean", "sum", "none")


@dataclass(frozen=True)
class SPACLParts:
    """Which SPACL parts a variant keeps."""

    dynamic_anchor: bool
    hard_positives: bool
    adversarial: bool
    negative_selection: bool


VARIANT_PARTS: dict[str, SPACLParts] = {
    "full": SPACLParts(True, True, True, True),
    "no_anchor": SPACLParts(False, True, True, True),
    "no_hard_positive": SPACLParts(True, False, True, True),
    "no_adversarial": SPACLParts(True, True, False, True),
    "no_negative_selection": SPACLParts(True, True, True, False),
    "oaa": SPACLParts(False, False, True, True),
    "ib": SPACLParts(True, True, False, False),
    "ib_h": SPACLParts(True, True, False, True),
}


class VariantGame:
    """What a SPACL options record's ``variant`` keeps and the game it plays, read off the
    record's fields (``variant``, ``share``, ``num_adversarial``, ``adversarial_hidden``,
    ``adversarial_lr``; :attr:`sees_anchor` where the record has the switch): the one reading for
    :class:`SPACLOptions` and the KG loss's
    :class:`~spacl.losses.kg.options.LinkSPACLOptions`, which inherit it."""

    variant: str
    share: float
    num_adversarial: int
    adversarial_hidden: int | None
    adversarial_lr: float

    @property
    def sees_anchor(self) -> bool:
        """Whether the game's discriminator sees the anchor (a record without the switch:
        never)."""
        return False

    @property
    def parts(self) -> SPACLParts:
        """The parts :attr:`variant` keeps."""
        return VARIANT_PARTS[self.variant]

    @property
    def effective_share(self) -> float:
        """``lambda_Q`` as the cut applies it (1 where the variant drops the selection)."""
        return self.share if self.parts.negative_selection else 1.0

    @property
    def effective_adversarial(self) -> int:
        """``K_adv`` as played (0 where the variant drops the adversarial negatives)."""
        return self.num_adversarial if self.parts.adversarial else 0

    @property
    def players(self) -> PlayerOptions:
        """How the game's players are built (:func:`spacl.mining.adversarial.build_players`):
        :attr:`effective_adversarial` negatives per anchor (0: no game), the hidden width,
        the learning rate and the conditional discriminator switch."""
        return PlayerOptions(
            self.effective_adversarial,
            self.adversarial_hidden,
            self.adversarial_lr,
            self.sees_anchor,
        )


@dataclass(frozen=True)
class SPACLOptions(VariantGame):
    """The switches of :class:`~spacl.losses.SPACLLoss`, checked when made (errors name
    the argument); the fields are its keyword arguments, documented there."""

    temperature: float = 0.1
    num_positives: int = 2
    share: float = 0.95
    num_adversarial: int = 1
    variant: str = "full"
    positive_pool: str = "instance"
    positive_mode: str = "log_sum_exp"
    mass: str = "similarity"
    negatives: str = "all_views"
    online: str = "all_views"
    anchor_set: str = "dynamic"
    normalize: NormalizeMode = "sphere"
    detach_candidates: bool = True
    adversarial_lr: float = 1e-3
    adversarial_hidden: int | None = None
    conditional_discriminator: bool = False
    reduction: str = "mean"

    def __post_init__(self) -> None:
        check_choice(self.variant, "variant", VARIANTS)
        k_adv = self.num_adversarial
        if not isinstance(k_adv, int) or isinstance(k_adv, bool) or k_adv < 0:
            raise ValueError(f"num_adversarial must be an integer >= 0, got {k_adv!r}")
        check_choice(self.negatives, "negatives", NEGATIVE_SETS)
        check_choice(self.mass, "mass", MASSES)
        check_choice(self.positive_pool, "positive_pool", SPACL_POSITIVE_POOLS)
        check_choice(self.positive_mode, "positive_mode", POSITIVE_MODES)
        check_choice(self.anchor_set, "anchor_set", ANCHOR_SETS)
        if self.anchor_set == "every_view" and self.online == "anchor_view":
            raise ValueError(
                "anchor_set='every_view' needs the online embeddings of every view; "
                "online='anchor_view' embeds one: use online='all_views'"
            )
        check_choice(self.online, "online", ONLINE_MODES)
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {self.reduction!r}")
        checked = {
            "temperature": check_positive(self.temperature, "temperature"),
            "num_positives": check_num_positives(self.num_positives),
            "share": check_share(self.share),
            "normalize": check_normalize_mode(self.normalize),
            "detach_candidates": check_flag(self.detach_candidates, "detach_candidates"),
            "adversarial_lr": check_positive(self.adversarial_lr, "adversarial_lr"),
            "adversarial_hidden": (
                None
                if self.adversarial_hidden is None
                else check_int(self.adversarial_hidden, "adversarial_hidden", low=1)
            ),
            "conditional_discriminator": check_flag(
                self.conditional_discriminator, "conditional_discriminator"
            ),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def sees_anchor(self) -> bool:
        """:attr:`conditional_discriminator`: the discriminator sees the anchor."""
        return self.conditional_discriminator


class SPACLFields(TypedDict, total=False):
    """The fields of :class:`SPACLOptions` as keyword arguments, each optional: the type of
    ``**fields`` in ``SPACLLoss(...)`` and :meth:`~spacl.losses.SPACLLoss.replace_options`
    (a test holds its keys equal to the record's fields)."""

    temperature: float
    num_positives: int
    share: float
    num_adversarial: int
    variant: str
    positive_pool: str
    positive_mode: str
    mass: str
    negatives: str
    online: str
    anchor_set: str
    normalize: NormalizeMode
    detach_candidates: bool
    adversarial_lr: float
    adversarial_hidden: int | None
    conditional_discriminator: bool
    reduction: str


#: the names of :class:`SPACLOptions`' fields, in order
OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(SPACLOptions))


def check_option_names(names: Mapping[str, Any] | list[str], caller: str) -> None:
    """``TypeError`` naming the first name of ``names`` that is no field of
    :class:`SPACLOptions` (with the closest field, where one is close), as Python names an
    unexpected keyword argument of ``caller``."""
    for name in names:
        if name in OPTION_NAMES:
            continue
        close = difflib.get_close_matches(str(name), OPTION_NAMES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TypeError(f"{caller} got an unexpected keyword argument {name!r}{hint}")


def options_with(
    base: SPACLOptions | None, changes: Mapping[str, Any], caller: str = "SPACLOptions"
) -> SPACLOptions:
    """``base`` (default: :class:`SPACLOptions`'s defaults) with ``changes`` set: the
    names checked first (:func:`check_option_names`), then the values (the record's own
    checks, errors naming the argument)."""
    if base is not None and not isinstance(base, SPACLOptions):
        raise TypeError(f"options must be a SPACLOptions or None, got {type(base).__name__}")
    check_option_names(list(changes), caller)
    return replace(base, **changes) if base is not None else SPACLOptions(**changes)
