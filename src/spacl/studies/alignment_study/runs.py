"""The parts of the alignment study: the four arms tracked, then the CL-vs-NSCL sweeps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from spacl.data import LabeledData, ViewStream
from spacl.studies.alignment_study.config import ARMS, BOUND_SCALARS, LR_RULES, AlignmentConfig
from spacl.studies.alignment_study.data import augment
from spacl.studies.alignment_study.training import run_once
from spacl.studies.stats import summarize
from spacl.studies.study import StudyRun

__all__ = ["PARTS", "Context"]


@dataclass
class Context:
    """What every part reads: the config, the data per class count, the base lr."""

    cfg: AlignmentConfig
    datasets: dict[int, tuple[LabeledData, LabeledData]]
    lr0: float


def main(study: StudyRun, ctx: Context, m: dict[str, Any]) -> None:
    """The four arms under shared randomness, tracked every epoch, with probes."""
    cfg, mains = ctx.cfg, []

    def one(seed: int) -> dict[str, float]:
        res = run_once(
            cfg,
            names=list(ARMS),
            classes=cfg.classes,
            tau=cfg.tau,
            batch=cfg.batch_size,
            lr=ctx.lr0,
            epochs=cfg.epochs,
            seed=seed,
            track=True,
            data=ctx.datasets[cfg.classes],
            probes=True,
        )
        mains.append(res)
        return {**res["final"], **res["accuracy"], **res["losses"]}

    study.over_seeds("main", one)
    m["main"] = {
        "final": summarize([r["final"] for r in mains]),
        "accuracy": summarize([r["accuracy"] for r in mains]),
        "bound": [r["bound"] for r in mains],
        "losses": [r["losses"] for r in mains],
        "lr": ctx.lr0,
        "steps": mains[0]["steps"],
    }
    m["history"] = {
        k: {
            "mean": np.mean([[h[k] for h in r["history"]] for r in mains], 0).tolist(),
            "std": np.std([[h[k] for h in r["history"]] for r in mains], 0).tolist(),
            "per_seed": [[h[k] for h in r["history"]] for r in mains],
        }
        for k in mains[0]["history"][0]
    }


def sweep_point(
    study: StudyRun,
    ctx: Context,
    *,
    classes: int,
    tau: float,
    batch: int,
    lr: float,
    max_steps: int | None = None,
    part: str = "sweep",
) -> dict[str, Any]:
    """CL and NSCL at one setting for every seed: the seed summary and the bound entries."""
    runs = []

    def one(seed: int) -> dict[str, float]:
        res = run_once(
            ctx.cfg,
            names=["CL", "NSCL"],
            classes=classes,
            tau=tau,
            batch=batch,
            lr=lr,
            epochs=ctx.cfg.sweep_epochs,
            seed=seed,
            track=False,
            data=ctx.datasets[classes],
            max_steps=max_steps,
        )
        runs.append(res)
        return {**res["final"], **res["losses"]}

    study.over_seeds(part, one, classes=classes, tau=tau, batch=batch, lr=lr)
    return {
        **summarize([r["final"] for r in runs]),
        "bound": summarize([{k: r["bound"][k] for k in BOUND_SCALARS} for r in runs]),
        "losses": summarize([r["losses"] for r in runs]),
        "lr": lr,
        "steps": runs[0]["steps"],
    }


def classes_sweep(study: StudyRun, ctx: Context, m: dict[str, Any]) -> None:
    """The number of classes C'."""
    cfg = ctx.cfg
    m["classes"] = {
        str(c): sweep_point(study, ctx, classes=c, tau=cfg.tau, batch=cfg.batch_size, lr=ctx.lr0)
        for c in cfg.classes_sweep
    }


def tau_sweep(study: StudyRun, ctx: Context, m: dict[str, Any]) -> None:
    """The temperature."""
    cfg = ctx.cfg
    m["tau"] = {
        f"{tau:g}": sweep_point(
            study, ctx, classes=cfg.classes, tau=tau, batch=cfg.batch_size, lr=ctx.lr0
        )
        for tau in cfg.tau_sweep
    }


def equal_step_budget(cfg: AlignmentConfig, train: LabeledData) -> int:
    """Steps of the largest batch over ``sweep_epochs`` epochs (class-balanced batches)."""
    stream = ViewStream(train, max(cfg.batch_sweep), 2, augment(cfg), seed=0, balanced=True)
    return len(stream) * cfg.sweep_epochs


def batch_sweep(study: StudyRun, ctx: Context, m: dict[str, Any]) -> None:
    """Batch size x lr scaling, at equal epochs (``batch``) and equal steps (``batch_steps``).

    The reference batch is shared by every rule (its lr does not depend on the rule);
    at equal steps the largest batch is the equal-epoch run itself.
    """
    from spacl.engine import scaled_lr

    cfg, (train, _) = ctx.cfg, ctx.datasets[ctx.cfg.classes]
    steps = equal_step_budget(cfg, train)
    m["batch"], m["batch_steps"] = {}, {}
    shared: dict[tuple[int, bool], dict[str, Any]] = {}
    for label, rule in LR_RULES.items():
        m["batch"][label], m["batch_steps"][label] = {}, {}
        for b in cfg.batch_sweep:
            lr = scaled_lr(cfg.lr, b, cfg.reference_batch, rule)

            def point(equal_steps: bool, b: int = b, lr: float = lr) -> dict[str, Any]:
                return sweep_point(
                    study,
                    ctx,
                    classes=cfg.classes,
                    tau=cfg.tau,
                    batch=b,
                    lr=lr,
                    max_steps=steps if equal_steps else None,
                    part="batch_steps" if equal_steps else "batch",
                )

            for equal_steps, target in ((False, m["batch"]), (True, m["batch_steps"])):
                if equal_steps and b == max(cfg.batch_sweep):
                    target[label][str(b)] = m["batch"][label][str(b)]
                elif b == cfg.reference_batch:  # trained once, then shared by every rule
                    if (b, equal_steps) not in shared:
                        shared[(b, equal_steps)] = point(equal_steps)
                    target[label][str(b)] = shared[(b, equal_steps)]
                else:
                    target[label][str(b)] = point(equal_steps)


#: the parts, in the order they run
PARTS: tuple[tuple[str, Callable[[StudyRun, Context, dict[str, Any]], None]], ...] = (
    ("main", main),
    ("classes", classes_sweep),
    ("tau", tau_sweep),
    ("batch", batch_sweep),
)
