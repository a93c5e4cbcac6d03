"""Methods of the fair SPACL study: baselines and SPACL's choices as data (issue 11).

A :class:`Method` is a row over the one objective registry (:mod:`spacl.losses.registry`):
a registry name, its constructor arguments, whether it sees labels in a setting, and
which argument the tuning values set (the temperature, or Barlow Twins'
``lambda_offdiag``); :meth:`Method.build` makes its loss for a tuning value and a seed.
A method's identity in the run store is its ``name``.  SPACL's options are a
:class:`SpaclChoice`; the study varies one factor at a time around :data:`BASE`:

=============  =================================================================
factor         options
=============  =================================================================
cut            ``similarity`` (the paper's formula), ``exp``, ``linear``, ``none``
               (``lambda_Q = 1``)
supervision    ``instance`` (a: own-view positives, same-class samples out of the
               negatives), ``instance_class`` (b: a + every same-class view as a
               positive), ``instance_class_mean`` (b with SupCon's ``L_out`` mean
               over positives), ``class`` (the earlier class-pool farthest point)
gradient       ``shared`` (one online pass of all views, candidates constant),
               ``shared_full`` (the same, gradient through the candidates too, as
               SimCLR), ``ema`` (EMA target ``m = 0.99`` as the derived encoder, the
               online encoder on the anchor view)
generator      ``K_adv`` in {0, 1, 8, 32}; ``cond1``: K_adv = 1 with a conditional D
anchors        ``dynamic`` (one anchor per instance, the paper) or ``every_view``
               (each of the V views an anchor once, as the baselines' anchors)
=============  =================================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from spacl.data import derive_seed
from spacl.losses.registry import objective_spec

__all__ = [
    "BASE",
    "FACTORS",
    "MAX_GROWTH",
    "UNTRAINED",
    "Method",
    "SpaclChoice",
    "baselines",
    "grow_grid",
    "same_score",
    "spacl_choices",
    "spacl_method",
]

TEMPERATURES: tuple[float, ...] = (0.05, 0.1, 0.2, 0.5)
#: Barlow Twins has no temperature: its four-value budget is lambda_offdiag (the paper's
#: 5e-3 is for d = 8192; the off-diagonal count scales with d^2)
BARLOW_LAMBDAS: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05)
#: how many values a tuning grid may grow beyond each end of its method's grid (issue 39)
MAX_GROWTH = 3
#: the rows scored without training (baselines of every setting): the frozen initial
#: encoder and the raw inputs
UNTRAINED: tuple[str, ...] = ("frozen encoder", "raw inputs")


def same_score(a: float, b: float) -> bool:
    """Equal validation scores (the float noise of ``k / n`` aside): a tie."""
    return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9)


def grow_grid(
    grid: tuple[float, ...],
    base: tuple[float, ...],
    chosen: float,
    scores: Mapping[float, float] | None = None,
) -> tuple[float, ...] | None:
    """``grid`` with one value more beyond the end where the validation choice ``chosen``
    sits, or beyond the end whose validation score it ties (``scores``: value ->
    validation score; :func:`~.protocol.select_temperature` breaks ties toward the lower
    value, so a tie with the top hides a curve still at its best there), or ``None``:
    ``chosen`` is inside and ties neither end, or that end already lies
    :data:`MAX_GROWTH` values beyond ``base`` (the method's own grid), or the grid has
    one value.

    The new value continues the grid's own ratio at that end (``0.05 < 0.1`` gives
    ``0.025``; ``0.2 < 0.5`` gives ``1.25``), to three significant digits: a choice at
    (or tied with) an edge may not be the method's optimum, so the grid grows until it is
    inside, strictly above both ends' scores.

    Example:
        >>> grow_grid((0.05, 0.1, 0.2, 0.5), (0.05, 0.1, 0.2, 0.5), 0.5)
        (0.05, 0.1, 0.2, 0.5, 1.25)
        >>> grow_grid((0.05, 0.1, 0.2, 0.5), (0.05, 0.1, 0.2, 0.5), 0.2) is None
        True
        >>> scores = {0.05: 0.80, 0.1: 0.85, 0.2: 0.90, 0.5: 0.90}  # 0.2 ties the top
        >>> grow_grid((0.05, 0.1, 0.2, 0.5), (0.05, 0.1, 0.2, 0.5), 0.2, scores)
        (0.05, 0.1, 0.2, 0.5, 1.25)
    """
    g = sorted(grid)
    if len(g) < 2:
        return None
    low, high = chosen == g[0], chosen == g[-1]  # at an edge: that end
    own = _score_of(scores, chosen)
    if not (low or high) and own is not None:  # inside: the end whose score it ties
        low, high = _ties(scores, g[0], own), _ties(scores, g[-1], own)
    if low and sum(v < min(base) for v in g) < MAX_GROWTH:
        new = g[0] * g[0] / g[1]
    elif high and sum(v > max(base) for v in g) < MAX_GROWTH:
        new = g[-1] * g[-1] / g[-2]
    else:
        return None
    return tuple(sorted({*g, float(f"{new:.3g}")}))


def _score_of(scores: Mapping[float, float] | None, value: float) -> float | None:
    if not scores:
        return None
    return next((float(v) for t, v in scores.items() if math.isclose(t, value)), None)


def _ties(scores: Mapping[float, float] | None, edge: float, own: float) -> bool:
    score = _score_of(scores, edge)
    return score is not None and same_score(score, own)


@dataclass(frozen=True)
class Method:
    """One trainable method of a setting: a row over the objective registry."""

    name: str
    objective: str  # the registry name (the image task's rows)
    uses_labels: bool
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)  # constructor args
    momentum: float = 0.0  # EMA target momentum (0: shared encoder)
    family: str = "baseline"  # baseline | spacl
    temperatures: tuple[float, ...] = TEMPERATURES
    queue_size: int = 0  # labelled negative queue of past target embeddings (0: none)
    queue_dim: int = 0  # its width (the projection dimension)
    tuned: str = "temperature"  # the constructor argument the tuning values set
    seed_key: tuple[str, ...] = ()  # the loss's generator: derive_seed(seed, *seed_key)

    def build(self, tau: float, seed: int) -> nn.Module:
        """The loss of this method for tuning value ``tau`` and run seed ``seed``."""
        gen = None
        if self.seed_key:
            gen = torch.Generator().manual_seed(derive_seed(seed, *self.seed_key))
        loss = objective_spec(self.objective).build(
            self.params,
            key=f"method {self.name!r}",
            given={self.tuned: tau},
            optional={"generator": gen},
        )
        assert loss is not None  # every image objective has a loss module
        return loss


@dataclass(frozen=True)
class SpaclChoice:
    """SPACL's options (module docstring)."""

    cut: str = "similarity"
    supervision: str = "instance_class"
    gradient: str = "shared"
    generator: str = "1"
    variant: str = "full"
    anchors: str = "dynamic"

    def label(self, supervised: bool = True) -> str:
        """``cut=..., [sup=..., ]grad=..., gen=...[, variant]`` (``sup`` only with labels)."""
        sup = f"sup={self.supervision}, " if supervised else ""
        variant = "" if self.variant == "full" else f", {self.variant}"
        anchors = "" if self.anchors == "dynamic" else f", anchors={self.anchors}"
        return f"cut={self.cut}, {sup}grad={self.gradient}, gen={self.generator}{variant}{anchors}"


BASE = SpaclChoice()
FACTORS: dict[str, tuple[str, ...]] = {
    "cut": ("similarity", "exp", "linear", "none"),
    "supervision": ("instance_class", "instance", "instance_class_mean", "class"),
    "gradient": ("shared", "shared_full", "ema"),
    "generator": ("1", "0", "8", "32", "cond1"),
    "anchors": ("dynamic", "every_view"),
}


def spacl_choices(setting: str, base: SpaclChoice = BASE) -> list[SpaclChoice]:
    """``base`` and every one-factor change of it that applies to ``setting``."""
    out = [base]
    for factor, options in FACTORS.items():
        if factor == "supervision" and setting != "supervised":
            continue
        out += [replace(base, **{factor: o}) for o in options if o != getattr(base, factor)]
    return out


def spacl_method(choice: SpaclChoice, setting: str, proj_dim: int) -> Method:
    """The SPACL method of ``choice`` in ``setting`` (labels: fine / none / coarse)."""
    supervised = setting == "supervised"
    pool = "instance"
    positive_mode = "log_sum_exp"
    if supervised:
        pool = (
            "instance_class"
            if choice.supervision.startswith("instance_class")
            else (choice.supervision)
        )
        positive_mode = "mean" if choice.supervision == "instance_class_mean" else positive_mode
    share = 1.0 if choice.cut == "none" else 0.95
    mass = "similarity" if choice.cut == "none" else choice.cut
    k_adv = 1 if choice.generator == "cond1" else int(choice.generator)

    params = {
        "num_positives": 2,
        "share": share,
        "num_adversarial": k_adv,
        "variant": choice.variant,
        "positive_pool": pool,
        "positive_mode": positive_mode,
        "mass": mass,
        "online": "anchor_view" if choice.gradient == "ema" else "all_views",
        "anchor_set": choice.anchors,
        "detach_candidates": choice.gradient != "shared_full",
        "conditional_discriminator": choice.generator == "cond1",
        "embedding_dim": proj_dim,
    }
    return Method(
        f"SPACL[{choice.label(supervised)}]",
        "spacl",
        setting != "self-supervised",
        params,
        momentum=0.99 if choice.gradient == "ema" else 0.0,
        family="spacl",
        seed_key=("spacl-bench", choice.label()),
    )


def baselines(setting: str) -> list[Method]:
    """The baselines of a setting, each on all V views.

    Self-supervised: SimCLR (NT-Xent), HCL, Barlow Twins (the paper's best
    self-supervised baseline; no temperature: its tuning budget is four values of
    ``lambda_offdiag``, :data:`BARLOW_LAMBDAS`).  Supervised: SimCLR, SupCon, HSCL,
    VarCon (the paper's best supervised baseline).  Weak (coarse labels): SimCLR,
    SupCon, HSCL and MaskCon (the paper's best weak baseline) on the coarse labels.
    """
    simclr = Method("SimCLR", "ntxent", False)
    if setting == "self-supervised":
        return [
            simclr,
            Method("HCL", "hcl", False, {"beta": 1.0, "tau_plus": 0.1}),
            Method(
                "Barlow Twins",
                "barlow_twins",
                False,
                temperatures=BARLOW_LAMBDAS,
                tuned="lambda_offdiag",
            ),
        ]
    out = [
        simclr,
        Method("SupCon", "supcon", True),
        Method("HSCL", "hscl", True, {"beta": 1.0, "tau_plus": 0.0}),
    ]
    if setting == "supervised":
        out.append(Method("VarCon", "varcon", True))
    else:
        out.append(Method("MaskCon", "maskcon", True))
    return out
