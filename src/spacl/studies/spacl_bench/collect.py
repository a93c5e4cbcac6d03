"""From the run store to the study's metrics (plain data for ``results.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spacl.studies.spacl_bench.methods import (
    BASE,
    TEMPERATURES,
    UNTRAINED,
    Method,
    baselines,
    spacl_method,
)
from spacl.studies.spacl_bench.protocol import RunKey, RunStore
from spacl.studies.spacl_bench.stages import SettingResult, ablation_arms
from spacl.studies.stats import summarize

__all__ = ["METRICS", "collect_setting"]

METRICS = ("linear", "knn", "ncc")


def _split_summary(records: Sequence[dict[str, Any]], split: str) -> dict[str, Any]:
    return summarize([{k: 100.0 * float(r[split][k]) for k in METRICS} for r in records])


def _over_seeds(
    store: RunStore, res: SettingResult, name: str, tau: float | None
) -> dict[str, Any]:
    """The runs of ``name`` at ``tau`` over the setting's seeds (``seeds`` empty: none)."""
    recs = [
        store.get(key)
        for seed in res.seeds
        if tau is not None and (key := RunKey(res.bench, res.setting, name, tau, seed)) in store
    ]
    out: dict[str, Any] = {"tau": tau, "seeds": [r["seed"] for r in recs]}
    if not recs:
        return out
    kept = [float(r["kept_fraction"][-1]) for r in recs if r.get("kept_fraction")]
    return {
        **out,
        "val": _split_summary(recs, "val"),
        "test": _split_summary(recs, "test"),
        "seconds": [r.get("seconds") for r in recs],
        "cpu_seconds": [r.get("cpu_seconds") for r in recs],
        "kept_fraction_end": kept,
    }


def _tuning(
    store: RunStore, res: SettingResult, name: str, grid: Sequence[float]
) -> dict[str, float]:
    """Validation score (%) of ``name`` per value of its tuning grid (seed 0), the grid
    grown where it grew (``res.grids``)."""
    out = {}
    for tau in res.grids.get(name, grid):
        key = RunKey(res.bench, res.setting, name, tau, 0)
        if key in store:
            out[f"{tau:g}"] = 100.0 * float(store.get(key)["val"][res.criterion])
    return out


def collect_setting(
    store: RunStore, res: SettingResult, proj_dim: int, methods: Sequence[Method] | None = None
) -> dict[str, Any]:
    """Everything the report shows of one bench and setting (accuracies in %)."""
    bases = list(methods) if methods is not None else baselines(res.setting)
    temps = res.temperatures
    main = {m.name: _over_seeds(store, res, m.name, temps.get(m.name)) for m in bases}
    # the best baseline is chosen on validation (mean over seeds of the criterion)
    ran = [n for n in main if main[n]["seeds"]]
    best = max(ran, key=lambda n: main[n]["val"][res.criterion]["mean"]) if ran else None
    tau0 = temps.get(res.base)
    spacl = {"base": _over_seeds(store, res, res.base, tau0)}
    spacl["selected"] = _over_seeds(store, res, res.selected, temps.get(res.selected))
    ablations = {}
    for short, choice in ablation_arms().items():
        method = spacl_method(choice, res.setting, proj_dim)
        tau = temps.get(method.name)
        ablations[short] = {"name": method.name, **_over_seeds(store, res, method.name, tau)}
        # the same arm at the base's temperature, seed 0 (the earlier protocol's reading)
        key = RunKey(res.bench, res.setting, method.name, tau0 or 0.0, 0)
        if key in store:
            ablations[short]["at_base_tau_val"] = 100.0 * float(
                store.get(key)["val"][res.criterion]
            )
    options, untrained = _options_untrained(store, res, tau0)
    tuned = [*bases, spacl_method(BASE, res.setting, proj_dim)]
    tuned += [spacl_method(c, res.setting, proj_dim) for c in ablation_arms().values()]
    grids = {m.name: m.temperatures for m in tuned}
    # every validation choice, SPACL's selected setting included (its grid: its retune's,
    # or the base's when the base is the selected)
    grids.setdefault(res.selected, tuple(res.grids.get(res.selected, TEMPERATURES)))
    used = [
        r
        for r in store.select(bench=res.bench, setting=res.setting)
        if r["seed"] in res.seeds and r["steps"] != 0
    ]
    timed = [float(r["seconds"]) for r in used if r.get("seconds")]
    cpu = [float(r["cpu_seconds"]) for r in used if r.get("cpu_seconds")]
    return {
        "compute": {
            "runs": len(used),
            "timed_runs": len(timed),
            "seconds": sum(timed),
            "cpu_runs": len(cpu),
            "cpu_seconds": sum(cpu),
            "median_run_seconds": res.run_seconds,
        },
        "criterion": res.criterion,
        "seeds": res.seeds,
        "temperatures": temps,
        "baselines": main,
        "best_baseline": best,
        "spacl": spacl,
        "base_name": res.base,
        "selected_name": res.selected,
        "ablations": ablations,
        "options": options,
        "untrained": untrained,
        "tuning": {name: _tuning(store, res, name, grid) for name, grid in grids.items()},
    }


def _options_untrained(
    store: RunStore, res: SettingResult, tau0: float | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stage 2's options (seed 0, the base's tau) and the untrained rows."""
    options = {}
    for name in res.options:
        key = RunKey(res.bench, res.setting, name, tau0 or 0.0, 0)
        if key not in store:  # a partial store: the option's run is missing
            continue
        rec = store.get(key)
        options[name] = {
            "change": option_change(name, res),
            "val": {k: 100.0 * float(rec["val"][k]) for k in METRICS},
            "test": {k: 100.0 * float(rec["test"][k]) for k in METRICS},
            "kept_fraction": rec["kept_fraction"],
        }
    untrained = {}
    for name in UNTRAINED:
        key = RunKey(res.bench, res.setting, name, 0.0, 0)
        if key not in store:
            continue
        rec = store.get(key)
        untrained[name] = {
            s: {k: 100.0 * float(rec[s][k]) for k in METRICS} for s in ("val", "test")
        }
    return options, untrained


def option_change(name: str, res: SettingResult) -> str:
    """``"base"`` or the factor change (``"cut=exp"``, ``"variant=no_anchor"``) of an option."""
    from dataclasses import fields

    from spacl.studies.spacl_bench.stages import option_choices

    for choice in option_choices(res.setting):
        if spacl_method(choice, res.setting, 1).name == name:
            diff = [
                f"{f.name}={getattr(choice, f.name)}"
                for f in fields(choice)
                if getattr(choice, f.name) != getattr(BASE, f.name)
            ]
            return ", ".join(diff) or "base"
    raise ValueError(f"option {name!r} is not an option of setting {res.setting!r}")
