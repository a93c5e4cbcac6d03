"""Report sections and plots of the alignment study."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from spacl.studies.alignment_study.config import ARMS, AlignmentConfig
from spacl.studies.report import StudyReport, new_figure
from spacl.studies.stats import fmt
from spacl.studies.study import values as _v

__all__ = [
    "BoundRuns",
    "bound_records",
    "bound_runs",
    "bound_values",
    "max_drift",
    "plots",
    "sandwich_runs",
    "sections",
]


def _tagged(m: Mapping[str, Any]) -> list[tuple[int | None, float | None, dict[str, Any]]]:
    """Every sweep point once, as ``(C', tau, point)`` (``None``: the study's own value).

    A point is known by its content, not by the object (the shared reference-batch runs
    appear in several rules): the metrics read back from ``results.json`` hold a separate
    copy of a shared point in every rule that lists it, the ones of a live run the same
    object.  Equal points are equal settings, so the first one's tags stand for them."""
    tagged: list[tuple[int | None, float | None, dict[str, Any]]] = [
        (int(c), None, g) for c, g in m["classes"].items()
    ]
    tagged += [(None, float(t), g) for t, g in m["tau"].items()]
    tagged += [
        (None, None, g)
        for part in ("batch", "batch_steps")
        for pts in m[part].values()
        for g in pts.values()
    ]
    unique: dict[str, tuple[int | None, float | None, dict[str, Any]]] = {}
    for entry in tagged:
        unique.setdefault(json.dumps(entry[2], sort_keys=True, default=str), entry)
    return list(unique.values())


def _points(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every sweep point once (:func:`_tagged`, without its tags)."""
    return [g for _, _, g in _tagged(m)]


def bound_values(m: Mapping[str, Any], key: str) -> list[float]:
    """``key`` of the bound entries of every run (main runs and every sweep point)."""
    values = [float(b[key]) for b in m["main"]["bound"]]
    points = _points(m)
    for g in points:
        values += [float(v) for v in g["bound"][key]["values"]]
    return values


def sandwich_runs(m: Mapping[str, Any], cfg: AlignmentConfig) -> list[dict[str, float]] | None:
    """One record per trained contrastive network of every run (main runs, then every
    sweep point once): ``gap_min``, ``gap_max`` (per-batch ``L_DCL - L_NSCL``), ``below``,
    ``above`` (batches breaking the left side / the right side with the temperature),
    ``bound`` (``e^(2/tau)/(C-1)``), ``batches``, the run's ``classes`` and ``tau``, and
    ``literal``: the paper's ``e^2/(C-1)``, without the temperature.

    ``None`` when the stored metrics predate the loss record (a study run before it)."""
    if "losses" not in m["main"]:
        return None
    runs = [(cfg.classes, cfg.tau, r) for r in _per_network(m["main"]["losses"])]
    for classes, tau, g in _tagged(m):
        setting = (cfg.classes if classes is None else classes, cfg.tau if tau is None else tau)
        runs += [(*setting, r) for r in _per_network(_point_losses(g))]
    return [
        {**r, "classes": float(c), "tau": float(t), "literal": math.e**2 / (c - 1)}
        for c, t, r in runs
    ]


def _point_losses(point: Mapping[str, Any]) -> list[dict[str, float]]:
    """A sweep point's loss records, one per run (its seeds)."""
    losses = point["losses"]
    count = len(losses["sandwich_bound"]["values"])
    return [{k: s["values"][i] for k, s in losses.items()} for i in range(count)]


def _per_network(runs: Sequence[Mapping[str, float]]) -> list[dict[str, float]]:
    """One record per contrastive network of each run record (its ``gap_min_<arm>``...)."""
    out = []
    for run in runs:
        arms = [k.removeprefix("gap_min_") for k in run if k.startswith("gap_min_")]
        for arm in arms:
            out.append(
                {
                    "gap_min": float(run[f"gap_min_{arm}"]),
                    "gap_max": float(run[f"gap_max_{arm}"]),
                    "below": float(run[f"below_{arm}"]),
                    "above": float(run[f"above_{arm}"]),
                    "bound": float(run["sandwich_bound"]),
                    "batches": float(run["sandwich_batches"]),
                }
            )
    return out


def max_drift(points: int) -> float:
    """The largest ``||Sigma_a - Sigma_b||_F`` two cosine-similarity matrices of ``points``
    unit vectors can have: ``sqrt(2) N`` (both are positive semi-definite with trace
    ``N``, so ``||Sigma||_F <= N`` and ``<Sigma_a, Sigma_b> >= 0``).  A Theorem 1 bound at
    least this large holds for any two networks: it is satisfied trivially."""
    return math.sqrt(2.0) * points


_RUN_KEYS = (
    "drift_ratio",
    "vacuous",
    "measured_drift",
    "measured_cka",
    "cka_lower_bound",
    "measured_rsa",
    "measured_r",
    "rsa_lower_bound",
)


def bound_records(m: Mapping[str, Any], cfg: AlignmentConfig) -> list[dict[str, float]]:
    """One record per run (main runs, then every sweep point once) with its temperature
    (``tau``) and the bound entries the claims on Theorem 1 and its corollaries read
    (:data:`_RUN_KEYS`; ``measured_r`` is NaN where the stored metrics predate it): the
    one partition of every bound claim (issue 39: one partition, one denominator)."""
    out = [
        {"tau": float(cfg.tau), **{k: float(b.get(k, math.nan)) for k in _RUN_KEYS}}
        for b in m["main"]["bound"]
    ]
    for _, tau, g in _tagged(m):
        bd = g["bound"]
        count = len(bd["drift_ratio"]["values"])
        for i in range(count):
            row = {k: float(bd[k]["values"][i]) if k in bd else math.nan for k in _RUN_KEYS}
            out.append({"tau": float(cfg.tau if tau is None else tau), **row})
    return out


class BoundRuns(NamedTuple):
    """Theorem 1 over every run (main runs and every sweep point once)."""

    #: measured drift / bound of the informative runs (a finite bound below
    #: :func:`max_drift`); ``[]`` when none is
    ratios: list[float]
    #: measured CKA minus Corollary 1's lower bound, every run
    slacks: list[float]
    #: runs with no finite bound (``Delta`` infinite or the bound overflowing)
    vacuous: int
    #: the bounds of the runs that satisfy it trivially (at least :func:`max_drift`)
    trivial: list[float]
    #: the temperatures of those runs
    trivial_taus: list[float]


def bound_runs(m: Mapping[str, Any], cfg: AlignmentConfig) -> BoundRuns:
    """Theorem 1's runs, the informative ones apart from the vacuous and the trivially
    satisfied ones: a bound at least :func:`max_drift` of the reference set's size
    (``cfg.reference_size``, the most points a run's reference set holds)."""
    records = [
        (
            cfg.tau,
            b["drift_ratio"],
            b["vacuous"],
            b["measured_cka"] - b["cka_lower_bound"],
            b["measured_drift"],
        )
        for b in m["main"]["bound"]
    ]
    for _, tau, g in _tagged(m):
        bd = g["bound"]
        columns = [
            bd[k]["values"]
            for k in ("drift_ratio", "vacuous", "measured_cka", "cka_lower_bound", "measured_drift")
        ]
        records += [
            (cfg.tau if tau is None else tau, r, vac, cka - lb, drift)
            for r, vac, cka, lb, drift in zip(*columns, strict=True)
        ]
    out = BoundRuns([], [], 0, [], [])
    limit = max_drift(cfg.reference_size)
    for tau, ratio, vac, slack, drift in records:
        out.slacks.append(slack)
        if vac:
            out = out._replace(vacuous=out.vacuous + 1)
        elif ratio > 0 and drift / ratio >= limit:
            out.trivial.append(drift / ratio)
            out.trivial_taus.append(tau)
        else:
            out.ratios.append(ratio)
    return out


def sections(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    """The report's sections: recipe, main comparison, Theorem 1, sweeps, timing."""
    _recipe(report, cfg, m)
    _main(report, cfg, m)
    _theorem(report, cfg, m)
    _sandwich(report, cfg, m)
    _sweeps(report, cfg, m)
    report.section("Timing (seconds)", ", ".join(f"{k}: {v:.0f}" for k, v in m["timing"].items()))


def _recipe(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    report.section(
        "Recipe",
        f"MLP encoder `784 -> {cfg.hidden} -> {cfg.feature_dim}` (BatchNorm) + MLP projection "
        f"head to {cfg.proj_dim} (CE: linear classifier on the features); SGD momentum "
        f"{cfg.momentum}, weight decay {cfg.weight_decay:g}, lr {m['main']['lr']:.4g} at batch "
        f"{cfg.batch_size} (= {cfg.lr:g} x sqrt({cfg.batch_size}/{cfg.reference_batch})), "
        f"tau = {cfg.tau:g} for DCL, NSCL and SupCon, class-balanced batches of "
        f"{cfg.batch_size} x 2 views, {cfg.epochs} epochs ({m['main']['steps']} steps). "
        f"Sweeps train CL and NSCL only, {cfg.sweep_epochs} epochs each (the batch sweep "
        "also at equal steps: those of the largest batch). Paper recipe: "
        "ResNet-18/50 on CIFAR / Tiny-ImageNet, hundreds of epochs.",
    )


def _main(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    fin, acc = m["main"]["final"], m["main"]["accuracy"]
    report.section("Main comparison: every model against CL (DCL), end of training")
    rows = []
    for name in ("NSCL", "SCL", "CE"):
        rows.append(
            [
                name,
                fmt(_v(fin, f"cka_{name}"), digits=3),
                fmt(_v(fin, f"rsa_{name}"), digits=3),
                fmt(_v(fin, f"weight_distance_{name}"), digits=3),
            ]
        )
    report.table(["model", "CKA vs CL", "RSA vs CL", "rel. weight distance to CL"], rows)
    report.section("Accuracy of the frozen features (test, %)")
    report.table(
        ["model", "NCC", "kNN", "linear probe"],
        [
            [
                n,
                fmt(_v(acc, f"ncc_{n}"), 100, 1),
                fmt(_v(acc, f"knn_{n}"), 100, 1),
                fmt(_v(acc, f"linear_{n}"), 100, 1),
            ]
            for n in ARMS
        ],
        note="Paper (CIFAR-10, NCC / linear): CL 88.37 / 90.16, NSCL 94.47 / 94.09, "
        "SCL 94.93 / 94.67, CE 92.97 / 93.39.",
    )


def _theorem(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    report.section(
        "Theorem 1 alongside (main runs, CL vs NSCL)",
        "The drift bound `||Sigma^CL - Sigma^NSCL||_F <= exp(S/(2 tau^2 B)) S/(tau sqrt B) "
        "Delta` (S = sum of the step sizes) and the implied CKA / RSA lower bounds, next to "
        "the measured values. Sigma are the cosine-similarity matrices of the L2-normalised "
        "projections (what the losses see) on the reference set; measured CKA / RSA here are "
        "on those projections, unlike the backbone-feature CKA above. Note that the left side "
        "grows with the number N of reference samples while the bound does not depend on N; "
        "at tau = 0.1 the bound (with e^(2/tau) = e^20 and exp(S/(2 tau^2 B))) is so large "
        "that it holds trivially. The theorem is proved for similarity descent (each step moves "
        "Sigma itself by eta_t times the gradient of the batch loss in Sigma, "
        "`spacl.alignment.surrogate`); SGD on the weights moves Sigma by about J J^T times "
        "that, J the Jacobian of Sigma in the weights, so a network's drift can exceed the "
        "bound at its learning rate: the claim's verdict is on these trained networks "
        "(what a reader of the theorem expects), and similarity descent run with each run's "
        "tau, B, learning rate, C and (at most "
        f"{cfg.surrogate_steps}) steps on a two-view reference set of 128 instances is "
        "reported beside it as a check of the bound itself.",
    )
    report.table(
        [
            "seed",
            "drift bound",
            "measured drift",
            "CKA lower bound",
            "measured CKA",
            "RSA lower bound",
            "measured RSA",
        ],
        [
            [
                s,
                _pow10(b["log10_drift_bound"]),
                f"{b['measured_drift']:.3g}",
                f"{b['cka_lower_bound']:.3f}",
                f"{b['measured_cka']:.3f}",
                f"{b['rsa_lower_bound']:.3f}",
                f"{b['measured_rsa']:.3f}",
            ]
            for s, b in zip(report.seeds, m["main"]["bound"], strict=True)
        ],
    )


def _sandwich(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    """The loss sandwich with the temperature: a sanity check, not a claim."""
    runs = sandwich_runs(m, cfg)
    if runs is None:
        report.section("Loss sandwich: a sanity check (not a claim)", "Not measured.")
        return
    points = int(sum(r["batches"] for r in runs))
    below, above = int(sum(r["below"] for r in runs)), int(sum(r["above"] for r in runs))
    bounds = [r["bound"] for r in runs]
    report.section(
        "Loss sandwich: a sanity check (not a claim)",
        "`L_NSCL <= L_DCL <= L_NSCL + e^(2/tau)/(C-1)` holds for any encoder: the left side "
        "because DCL's denominator holds NSCL's different-class terms and more, the right "
        "side because a same-class term is at most e^(2/tau) times a different-class one and "
        "a class-balanced batch holds fewer than 1/(C-1) same-class samples per "
        "different-class one (`spacl.studies.alignment_study.training.sandwich_bound`).  "
        "It cannot fail, so it checks the loss code, not the paper: on "
        f"{len(runs)} trained networks x their batches = {points} points the left side is "
        f"broken at {below}, the right side at {above}; L_DCL - L_NSCL ranges from "
        f"{min(r['gap_min'] for r in runs):.3g} to {max(r['gap_max'] for r in runs):.3g}, at "
        f"most {max(r['gap_max'] / r['bound'] for r in runs):.3g} of e^(2/tau)/(C-1) "
        f"({min(bounds):.3g} .. {max(bounds):.3g}).  The paper writes the margin as "
        "e^2/(C-1), without the temperature: the claims table tests that form.",
    )


def _sweeps(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    report.section("Sweeps (CL vs NSCL)")
    rows = []
    for c, g in m["classes"].items():
        rows.append(
            [
                f"C'={c}",
                fmt(_v(g, "cka_NSCL"), digits=3),
                fmt(_v(g, "rsa_NSCL"), digits=3),
                *_bound_cells(g),
            ]
        )
    for t, g in m["tau"].items():
        rows.append(
            [
                f"tau={t}",
                fmt(_v(g, "cka_NSCL"), digits=3),
                fmt(_v(g, "rsa_NSCL"), digits=3),
                *_bound_cells(g),
            ]
        )
    for part, when in (("batch", "equal epochs"), ("batch_steps", "equal steps")):
        for label, pts in m[part].items():
            for b, g in pts.items():
                rows.append(
                    [
                        f"lr ∝ {label}, B={b}, {when} (lr {g['lr']:.3g}, {g['steps']} steps)",
                        fmt(_v(g, "cka_NSCL"), digits=3),
                        fmt(_v(g, "rsa_NSCL"), digits=3),
                        *_bound_cells(g),
                    ]
                )
    report.table(
        [
            "setting",
            "CKA(CL,NSCL)",
            "RSA(CL,NSCL)",
            "Thm 1: measured drift / bound",
            "CKA lower bound",
        ],
        rows,
    )


def _pow10(log10_value: Any) -> str:
    if isinstance(log10_value, str):
        return log10_value
    return f"{10.0**log10_value:.3g}"


def _bound_cells(g: dict[str, Any]) -> list[str]:
    """``[measured drift / bound, CKA lower bound]`` cells of a sweep point."""
    bd = g["bound"]
    if min(bd["vacuous"]["values"]) > 0:
        return ["vacuous (infinite bound)", fmt(bd["cka_lower_bound"]["values"], digits=3)]
    return [
        fmt(bd["drift_ratio"]["values"], digits=1),
        fmt(bd["cka_lower_bound"]["values"], digits=3),
    ]


# --------------------------------------------------------------------------------- plots


def plots(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    """Alignment over epochs and across the sweeps."""
    _epoch_plot(report, m)
    _sweep_plot(report, m)


def _epoch_plot(report: StudyReport, m: dict[str, Any]) -> None:
    hist = m["history"]
    fig, axes = new_figure(ncols=3, size=(4.2, 3.4))
    for ax, prefix, title in (
        (axes[0], "cka", "linear CKA vs CL"),
        (axes[1], "rsa", "RSA vs CL"),
        (axes[2], "weight_distance", "relative weight distance to CL"),
    ):
        for name in ("NSCL", "SCL", "CE"):
            mean = np.asarray(hist[f"{prefix}_{name}"]["mean"])
            std = np.asarray(hist[f"{prefix}_{name}"]["std"])
            epochs = np.arange(len(mean))
            ax.plot(epochs, mean, label=name)
            ax.fill_between(epochs, mean - std, mean + std, alpha=0.2)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    report.figure(
        "alignment_vs_epoch.png",
        "Shared-randomness training: alignment with CL and weight distance over epochs "
        "(mean ± std over seeds)",
        fig,
    )


def _sweep_plot(report: StudyReport, m: dict[str, Any]) -> None:
    fig, axes = new_figure(ncols=3, size=(4.2, 3.4))
    for ax, key, xlabel in (
        (axes[0], "classes", "number of classes C'"),
        (axes[1], "tau", "temperature tau"),
    ):
        xs = list(m[key])
        means = [m[key][x]["cka_NSCL"]["mean"] for x in xs]
        stds = [m[key][x]["cka_NSCL"]["std"] for x in xs]
        lbs = [m[key][x]["bound"]["cka_lower_bound"]["mean"] for x in xs]
        ax.errorbar(range(len(xs)), means, yerr=stds, marker="o", capsize=3, label="measured CKA")
        ax.plot(range(len(xs)), lbs, "k--", marker="x", label="Thm 1 lower bound")
        ax.set_xticks(range(len(xs)), xs)
        ax.set_xlabel(xlabel)
        ax.set_ylim(-1.05, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CKA(CL, NSCL)")
    axes[0].legend(fontsize=8)
    ax = axes[2]
    for label, pts in m["batch"].items():
        bs = [int(b) for b in pts]
        ax.errorbar(
            bs,
            [g["cka_NSCL"]["mean"] for g in pts.values()],
            yerr=[g["cka_NSCL"]["std"] for g in pts.values()],
            marker="o",
            capsize=3,
            label=f"lr ∝ {label}",
        )
    ax.set_xscale("log", base=2)
    ticks = [int(b) for b in next(iter(m["batch"].values()))]
    ax.set_xticks(ticks, [str(b) for b in ticks])
    ax.minorticks_off()
    ax.set_xlabel("batch size B (equal epochs)")
    ax.set_ylabel("CKA(CL, NSCL)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    report.figure("sweeps.png", "CKA(CL, NSCL) across the sweeps (mean ± std over seeds)", fig)
