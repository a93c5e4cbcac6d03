"""SPACL-KG's switches as one frozen record (:class:`LinkSPACLOptions`), and its variants.

Every function of SPACL-KG (:mod:`spacl.losses.kg.positives`,
:mod:`spacl.losses.kg.negatives`, :mod:`spacl.losses.kg.objective`) reads what it needs
from a :class:`LinkSPACLOptions`; :class:`~spacl.losses.kg.LinkSPACLLoss` keeps only state
(its game, the generator of its random draws, the cut) and dispatches.
:class:`LinkSPACLFields` types the same fields as keyword arguments
(``LinkSPACLLoss(temperature=0.5, ...)``), :func:`link_options_with` checks their names
and makes the record.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypedDict

from spacl._validation import check_choice, check_flag, check_in_range, check_int, check_positive
from spacl.losses.kg.terms import WEIGHTINGS
from spacl.losses.spacl.options import VariantGame
from spacl.mining.cut import MASSES

#: the variants of :data:`spacl.losses.spacl.options.VARIANT_PARTS` that a link query has
#: (no second view to anchor: the dynamic anchor's ablations do not apply)
KG_SPACL_VARIANTS = ("full", "no_hard_positive", "no_adversarial", "no_negative_selection")
#: how the hard positives enter the loss (SPEC §1.5, or each against the kept negatives)
LINK_POSITIVE_MODES = ("log_sum_exp", "pairwise")


@dataclass(frozen=True)
class LinkSPACLOptions(VariantGame):
    """The switches of :class:`~spacl.losses.kg.LinkSPACLLoss`, checked when made (each bad
    value a ``ValueError`` or ``TypeError`` naming the argument and the value); the
    fields are its keyword arguments, documented there."""

    temperature: float = 1.0
    num_positives: int = 2
    share: float = 0.95
    num_adversarial: int = 1
    variant: str = "full"
    pool_size: int = 32
    mass: str = "exp"
    positive_mode: str = "log_sum_exp"
    weighting: str = "query"
    adversarial_lr: float = 1e-3
    adversarial_hidden: int | None = None
    game_batch: int | None = 256
    compiled_cut: bool = False

    def __post_init__(self) -> None:
        check_choice(self.variant, "variant", KG_SPACL_VARIANTS)
        for name, low in (("num_positives", 1), ("num_adversarial", 0), ("pool_size", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if self.pool_size < self.num_positives:
            raise ValueError(
                f"pool_size ({self.pool_size}) must be >= num_positives ({self.num_positives})"
            )
        check_choice(self.positive_mode, "positive_mode", LINK_POSITIVE_MODES)
        check_choice(self.weighting, "weighting", WEIGHTINGS)
        check_choice(self.mass, "mass", MASSES)
        checked: dict[str, Any] = {
            "share": check_in_range(self.share, "share", 0.0, 1.0, low_inclusive=False),
            "temperature": check_positive(self.temperature, "temperature"),
            "adversarial_lr": check_positive(self.adversarial_lr, "adversarial_lr"),
        }
        game_batch = self.game_batch
        if game_batch is not None and (not isinstance(game_batch, int) or game_batch < 1):
            raise ValueError(f"game_batch must be None or an int >= 1, got {game_batch!r}")
        checked["adversarial_hidden"] = (
            None
            if self.adversarial_hidden is None
            else check_int(self.adversarial_hidden, "adversarial_hidden", low=1)
        )
        checked["compiled_cut"] = check_flag(self.compiled_cut, "compiled_cut")
        for name, value in checked.items():
            object.__setattr__(self, name, value)


class LinkSPACLFields(TypedDict, total=False):
    """The fields of :class:`LinkSPACLOptions` as keyword arguments, each optional: the
    type of ``**fields`` in ``LinkSPACLLoss(...)``."""

    temperature: float
    num_positives: int
    share: float
    num_adversarial: int
    variant: str
    pool_size: int
    mass: str
    positive_mode: str
    weighting: str
    adversarial_lr: float
    adversarial_hidden: int | None
    game_batch: int | None
    compiled_cut: bool


#: the names of :class:`LinkSPACLOptions`' fields, in order
LINK_OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(LinkSPACLOptions))


def link_options_with(
    base: LinkSPACLOptions | None, changes: Mapping[str, Any], caller: str = "LinkSPACLOptions"
) -> LinkSPACLOptions:
    """``base`` (default: :class:`LinkSPACLOptions`' defaults) with ``changes`` set: the
    names checked first (a ``TypeError`` naming the first unknown one, and the closest
    field, as Python names an unexpected keyword argument of ``caller``), then the
    values (the record's own checks, errors naming the argument)."""
    if base is not None and not isinstance(base, LinkSPACLOptions):
        raise TypeError(f"options must be a LinkSPACLOptions or None, got {type(base).__name__}")
    for name in changes:
        if name not in LINK_OPTION_NAMES:
            close = difflib.get_close_matches(str(name), LINK_OPTION_NAMES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{caller} got an unexpected keyword argument {name!r}{hint}")
    return replace(base, **changes) if base is not None else LinkSPACLOptions(**changes)
