"""Methods of the fair SPACL study: baselines and SPACL's choices as data (issue 11).

A :class:`Method` names an engine objective, whether it sees labels in a setting, and
how to build its loss for a temperature ``tau`` and a seed.  SPACL's options are a
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

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from spacl.data import derive_seed
from spacl.losses import (
    BarlowTwinsLoss,
    HardNegativeLoss,
    MaskConLoss,
    NTXentLoss,
    SPACLLoss,
    SupConLoss,
    VarConLoss,
)

__all__ = [
    "BASE",
    "FACTORS",
    "Method",
    "SpaclChoice",
    "baselines",
    "spacl_choices",
    "spacl_method",
]

TEMPERATURES: tuple[float, ...] = (0.05, 0.1, 0.2, 0.5)
#: Barlow Twins has no temperature: its four-value budget is lambda_offdiag (the paper's
#: 5e-3 is for d = 8192; the off-diagonal count scales with d^2)
BARLOW_LAMBDAS: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05)


@dataclass(frozen=True)
class Method:
    """One trainable method of a setting."""

    name: str
    objective: str  # engine registry name
    uses_labels: bool
    build: Callable[[float, int], nn.Module]  # (tau, seed) -> loss module
    momentum: float = 0.0  # EMA target momentum (0: shared encoder)
    family: str = "baseline"  # baseline | spacl
    temperatures: tuple[float, ...] = TEMPERATURES
    queue_size: int = 0  # labelled negative queue of past target embeddings (0: none)
    queue_dim: int = 0  # its width (the projection dimension)


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

    def build(tau: float, seed: int) -> nn.Module:
        return SPACLLoss(
            tau,
            2,
            share,
            k_adv,
            variant=choice.variant,
            positive_pool=pool,
            positive_mode=positive_mode,
            mass=mass,
            online="anchor_view" if choice.gradient == "ema" else "all_views",
            anchor_set=choice.anchors,
            detach_candidates=choice.gradient != "shared_full",
            conditional_discriminator=choice.generator == "cond1",
            embedding_dim=proj_dim,
            generator=torch.Generator().manual_seed(
                derive_seed(seed, "spacl-bench", choice.label())
            ),
        )

    return Method(
        f"SPACL[{choice.label(supervised)}]",
        "spacl",
        setting != "self-supervised",
        build,
        momentum=0.99 if choice.gradient == "ema" else 0.0,
        family="spacl",
    )


def baselines(setting: str) -> list[Method]:
    """The baselines of a setting, each on all V views.

    Self-supervised: SimCLR (NT-Xent), HCL, Barlow Twins (the paper's best
    self-supervised baseline; no temperature: its tuning budget is four values of
    ``lambda_offdiag``, :data:`BARLOW_LAMBDAS`).  Supervised: SimCLR, SupCon, HSCL,
    VarCon (the paper's best supervised baseline).  Weak (coarse labels): SimCLR,
    SupCon, HSCL and MaskCon (the paper's best weak baseline) on the coarse labels.
    """
    simclr = Method("SimCLR", "ntxent", False, lambda tau, seed: NTXentLoss(tau))
    if setting == "self-supervised":
        return [
            simclr,
            Method("HCL", "hcl", False, lambda tau, seed: HardNegativeLoss(1.0, 0.1, tau)),
            Method(
                "Barlow Twins",
                "barlow_twins",
                False,
                lambda lam, seed: BarlowTwinsLoss(lambda_offdiag=lam),
                temperatures=BARLOW_LAMBDAS,
            ),
        ]
    out = [
        simclr,
        Method("SupCon", "supcon", True, lambda tau, seed: SupConLoss(tau)),
        Method("HSCL", "hscl", True, lambda tau, seed: HardNegativeLoss(1.0, 0.0, tau)),
    ]
    if setting == "supervised":
        out.append(Method("VarCon", "varcon", True, lambda tau, seed: VarConLoss(tau)))
    else:
        out.append(Method("MaskCon", "maskcon", True, lambda tau, seed: MaskConLoss(tau)))
    return out
