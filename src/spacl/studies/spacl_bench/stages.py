"""The stages of the fair SPACL study on one bench and setting (issue 11).

1. **tune**: every baseline and SPACL's base choice (:data:`~.methods.BASE`) on seed 0 at
   every temperature of :data:`~.methods.TEMPERATURES`; each keeps its best validation
   temperature (the same grid rule for every method).  Where the choice
   sits at an edge of the grid, or ties the validation score of an edge value (ties go
   to the lower value), the grid grows by one value beyond that edge and the choice is
   made again, up to :data:`~.methods.MAX_GROWTH` values per end
   (:func:`~.methods.grow_grid`, issue 39); every tuning below does the same.
2. **options**: every one-factor change of the base (:func:`~.methods.spacl_choices`)
   and the paper's part-ablations, seed 0, at the base's temperature; the choice with
   the best validation score is SPACL's **selected** setting.
3. **retune**: the selected choice at every temperature (seed 0), if it is not the base.
4. **ablation tuning**: the paper's ablations (:func:`paper_ablations`) and the
   negative-side pair IB / IB+H (:data:`NEGATIVE_SIDE`) at every temperature (seed 0):
   each ablation arm gets the same temperature budget as the full model.
5. **seeds**: every baseline, the base and the selected choice, then every ablation arm,
   at their own temperatures with seeds ``1..S-1`` (seed 0 is the tuning run).  ``S``
   follows the project's rule from the measured run time (:func:`seed_count`): 5 where
   a run costs under a minute, else 3.

``train=False`` trains nothing: the stages read what the run store holds, and what is
missing stays missing (the report says which claims lack runs).

Only ``val`` scores enter a choice; ``test`` is read by the report only.  The frozen
(untrained) encoder and the raw inputs are scored as the untrained baselines.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spacl.studies.spacl_bench.benches import Bench
from spacl.studies.spacl_bench.methods import (
    BASE,
    Method,
    SpaclChoice,
    baselines,
    grow_grid,
    spacl_choices,
    spacl_method,
)
from spacl.studies.spacl_bench.protocol import (
    RunKey,
    RunStore,
    evaluate,
    select_temperature,
    train_runs,
)
from spacl.studies.stats import seeds_needed

__all__ = [
    "ABLATIONS",
    "NEGATIVE_SIDE",
    "SettingResult",
    "ablation_arms",
    "paper_ablations",
    "run_setting",
    "seed_count",
    "tune_over_grid",
]

log = logging.getLogger(__name__)
#: the paper's part-ablations not already a factor option (cut none = no selection,
#: generator 0 = no adversarial)
ABLATIONS: tuple[str, ...] = ("no_anchor", "no_hard_positive", "oaa")
#: SPEC §1.6's IB / IB+H: in-batch negatives (no generator), all kept / cut.  IB+H
#: computes the same as ``no_adversarial`` (spacl.losses.spacl.options.VARIANT_PARTS),
#: so it shares its runs.
NEGATIVE_SIDE: dict[str, SpaclChoice] = {
    "ib": replace(BASE, generator="0", cut="none"),
    "ib_h": replace(BASE, generator="0"),
}


@dataclass
class SettingResult:
    """What the stages chose (the numbers live in the run store)."""

    bench: str
    setting: str
    temperatures: dict[str, float]  # method name -> chosen tau
    base: str  # SPACL base method name
    selected: str  # SPACL selected method name
    options: list[str]  # every SPACL option tried in stage 2 (base first)
    criterion: str
    seeds: list[int]
    ablations: dict[str, str] = field(default_factory=dict)  # short name -> method name
    run_seconds: float | None = None  # median measured compute time of one run
    #: method name -> the values it was tuned over (its grid, grown where the choice
    #: sat at or tied an edge: :func:`~.methods.grow_grid`)
    grids: dict[str, list[float]] = field(default_factory=dict)


def _score(store: RunStore, key: RunKey, criterion: str) -> float:
    return float(store.get(key)["val"][criterion])


def paper_ablations() -> dict[str, SpaclChoice]:
    """The paper's ablation rows (SPEC §1.6) as choices: w/o Anc, HP, AN, NS, and OAA."""
    return {
        "no_anchor": replace(BASE, variant="no_anchor"),
        "no_hard_positive": replace(BASE, variant="no_hard_positive"),
        "no_adversarial": replace(BASE, generator="0"),
        "no_negative_selection": replace(BASE, cut="none"),
        "oaa": replace(BASE, variant="oaa"),
    }


#: a two-factor option of the supervised setting: every view an anchor AND SupCon's mean
#: over the positives — the two ways SPACL's supervised objective weighs anchors and
#: positives differently from SupCon (added after the one-factor round showed each alone
#: short of SupCon on MNIST-5k validation; chosen, like every option, on validation)
SUPCON_LIKE = replace(BASE, supervision="instance_class_mean", anchors="every_view")


def option_choices(setting: str) -> list[SpaclChoice]:
    """Stage 2's SPACL options: the base, its one-factor changes, three ablations and, with
    labels, :data:`SUPCON_LIKE`."""
    extra = [SUPCON_LIKE] if setting == "supervised" else []
    return spacl_choices(setting) + [replace(BASE, variant=v) for v in ABLATIONS] + extra


def ablation_arms() -> dict[str, SpaclChoice]:
    """The paper's ablations and the negative-side pair (IB+H is ``no_adversarial``)."""
    return {**paper_ablations(), "ib": NEGATIVE_SIDE["ib"]}


def seed_count(store: RunStore, bench: str, setting: str, most: int) -> tuple[int, float | None]:
    """Seeds by the project's rule from the median measured run cost of the setting
    (:func:`~spacl.studies.stats.seeds_needed`); ``most`` when no time is recorded.

    The cost is the CPU time where runs record it (``cpu_seconds``; wall time on a
    shared machine counts the other users too), else the wall time."""
    recs = [r for r in store.select(bench=bench, setting=setting) if r["steps"] != 0]
    key = "cpu_seconds" if any(r.get("cpu_seconds") for r in recs) else "seconds"
    times = [float(r[key]) for r in recs if r.get(key)]
    if not times:
        return most, None
    median = statistics.median(times)
    return min(most, seeds_needed(median)), median


def run_setting(
    bench: Bench,
    setting: str,
    store: RunStore,
    seeds: Sequence[int],
    proj_dim: int,
    criterion: str = "linear",
    *,
    quick: bool = False,
    train: bool = True,
) -> SettingResult:
    """Run the five stages (module docstring); resumable through ``store``.  ``quick``:
    one temperature each; stage 2 tries the base, the ablations and the EMA option."""
    name = bench.name

    def fit(jobs: list[tuple[Method, float]], seed: int) -> None:
        if train:
            train_runs(bench, setting, jobs, seed, store)

    grids: dict[str, list[float]] = {}

    def tune(method: Method) -> float | None:
        chosen, grid = tune_over_grid(store, name, setting, method, criterion, fit)
        if chosen is not None:
            grids[method.name] = list(grid)
        return chosen

    if train:
        _untrained(bench, setting, store)
    bases = [_thin(m, quick) for m in baselines(setting)]
    base = _thin(spacl_method(BASE, setting, proj_dim), quick)
    tuned: list[Method] = [*bases, base]
    fit([(m, t) for m in tuned for t in m.temperatures], 0)
    temps = {m.name: tune(m) for m in tuned}
    tau0 = temps[base.name]
    options: list[Method] = [base]
    best = base
    if tau0 is not None:
        options, best = _select_option(
            bench, setting, store, proj_dim, criterion, tau0, quick, train
        )
        if best.name != base.name:
            temps[best.name] = tune(best)
    final = [*bases, base] + ([best] if best.name != base.name else [])
    n_seeds, _ = seed_count(store, name, setting, len(seeds))
    for seed in list(seeds)[1:n_seeds]:  # the main comparison first (CPU is scarce)
        fit([(m, t) for m in final if (t := temps[m.name]) is not None], seed)
    arms = {k: _thin(spacl_method(c, setting, proj_dim), quick) for k, c in ablation_arms().items()}
    for arm in arms.values():
        temps[arm.name] = tune(arm)
    n_seeds, seconds = seed_count(store, name, setting, len(seeds))
    used = list(seeds)[: max(n_seeds, 1)]
    for seed in used[1:]:
        fit([(m, t) for m in arms.values() if (t := temps[m.name]) is not None], seed)
    log.info("%s/%s: selected %s (tau %s)", name, setting, best.name, temps.get(best.name))
    found = {k: v for k, v in temps.items() if v is not None}
    used = _with_extra_seeds(store, name, setting, final, found, list(seeds), used)
    names, abl = [m.name for m in options], {k: m.name for k, m in arms.items()}
    return SettingResult(
        name, setting, found, base.name, best.name, names, criterion, used, abl, seconds, grids
    )


def tune_over_grid(
    store: RunStore,
    bench: str,
    setting: str,
    method: Method,
    criterion: str,
    fit: Callable[[list[tuple[Method, float]], int], None],
) -> tuple[float | None, tuple[float, ...]]:
    """``(chosen value, grid)``: the validation choice over ``method``'s grid (seed 0,
    :func:`select_temperature`), the grid grown while the choice sits at an edge or ties
    an edge's validation score (:func:`~.methods.grow_grid`).  ``fit(jobs, seed)``
    trains what the store lacks (a no-op when the study trains nothing: the grid then
    grows as far as the store holds the grown values' runs).  ``None`` when the method's
    own grid has not all run."""

    def ran(m: Method) -> bool:
        return all(RunKey(bench, setting, m.name, t, 0) in store for t in m.temperatures)

    fit([(method, t) for t in method.temperatures], 0)
    if not ran(method):
        return None, method.temperatures
    own = method.temperatures

    def scores(m: Method) -> dict[float, float]:
        return {
            t: _score(store, RunKey(bench, setting, m.name, t, 0), criterion)
            for t in m.temperatures
        }

    chosen = select_temperature(store, bench, setting, method, criterion)
    while (grown := grow_grid(method.temperatures, own, chosen, scores(method))) is not None:
        wider = replace(method, temperatures=grown)
        fit([(wider, t) for t in grown], 0)
        if not ran(wider):
            break
        method, chosen = wider, select_temperature(store, bench, setting, wider, criterion)
    return chosen, method.temperatures


def _with_extra_seeds(
    store: RunStore,
    bench: str,
    setting: str,
    final: list[Method],
    temps: dict[str, float],
    seeds: list[int],
    used: list[int],
) -> list[int]:
    """The rule's seeds, or more where the store holds every main method for them: the rule
    is a minimum, and a seed beyond it is never chosen by its outcome, only by what ran."""
    more = list(used)
    for seed in seeds[len(used) :]:
        if not all(
            RunKey(bench, setting, m.name, temps.get(m.name, -1.0), seed) in store for m in final
        ):
            break
        more.append(seed)
    return more


def _untrained(bench: Bench, setting: str, store: RunStore) -> None:
    """Score the untrained rows once: the frozen initial encoder and the raw inputs."""
    for label, model in (("frozen encoder", bench.encoder(0)), ("raw inputs", None)):
        key = RunKey(bench.name, setting, label, 0.0, 0)
        if key not in store:
            store.add(key, {"steps": 0, **evaluate(bench, model), "kept_fraction": []})


def _select_option(
    bench: Bench,
    setting: str,
    store: RunStore,
    proj_dim: int,
    criterion: str,
    tau0: float,
    quick: bool,
    train: bool = True,
) -> tuple[list[Method], Method]:
    """Stage 2: every option at the base's temperature, seed 0; the best on validation.

    The paper's ablations are trained and reported, never selected; ties go to the base,
    then to the earlier option.
    """
    choices = option_choices(setting)
    if quick:  # the base, the ablations the claims need, and one other option
        keep = [BASE, *paper_ablations().values(), replace(BASE, gradient="ema")]
        choices = [c for c in choices if c in keep]
    options = [_thin(spacl_method(c, setting, proj_dim), quick) for c in choices]
    if train:
        train_runs(bench, setting, [(m, tau0) for m in options], 0, store)
    options = [m for m in options if RunKey(bench.name, setting, m.name, tau0, 0) in store]
    base_name = spacl_method(BASE, setting, proj_dim).name
    ablated = {spacl_method(c, setting, proj_dim).name for c in choices if c.variant != "full"}
    scores = {
        m.name: _score(store, RunKey(bench.name, setting, m.name, tau0, 0), criterion)
        for m in options
    }
    best = max(
        (m for m in options if m.name not in ablated),
        key=lambda m: (scores[m.name], m.name == base_name),
    )
    return options, best


def _thin(method: Method, quick: bool) -> Method:
    return replace(method, temperatures=method.temperatures[1:2]) if quick else method


def summary(result: SettingResult) -> dict[str, Any]:
    """The result as plain data (for ``results.json``)."""
    return {
        "temperatures": result.temperatures,
        "base": result.base,
        "selected": result.selected,
        "options": result.options,
        "criterion": result.criterion,
        "seeds": result.seeds,
        "ablations": result.ablations,
        "run_seconds": result.run_seconds,
        "grids": result.grids,
    }
