"""The stages of the fair SPACL study on one bench and setting (issue 11).

1. **tune**: every baseline and SPACL's base choice (:data:`~.methods.BASE`) on seed 0 at
   every temperature of :data:`~.methods.TEMPERATURES`; each keeps its best validation
   temperature (the same four-temperature budget for every method).
2. **options**: every one-factor change of the base (:func:`~.methods.spacl_choices`)
   and the paper's part-ablations, seed 0, at the base's temperature; the choice with
   the best validation score is SPACL's **selected** setting.
3. **retune**: the selected choice at every temperature (seed 0), if it is not the base.
4. **seeds**: every baseline, the base and the selected choice at their temperatures,
   with seeds ``1..S-1`` (seed 0 is the tuning run), and the paper's ablations
   (:func:`paper_ablations`) at the base's temperature with seeds 1 and 2.

Only ``val`` scores enter a choice; ``test`` is read by the report only.  The frozen
(untrained) encoder and the raw inputs are scored as the untrained baselines.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from spacl.studies.spacl_bench.benches import Bench
from spacl.studies.spacl_bench.methods import (
    BASE,
    Method,
    SpaclChoice,
    baselines,
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

__all__ = ["ABLATIONS", "SettingResult", "paper_ablations", "run_setting"]

log = logging.getLogger(__name__)
#: the paper's part-ablations not already a factor option (cut none = no selection,
#: generator 0 = no adversarial)
ABLATIONS: tuple[str, ...] = ("no_anchor", "no_hard_positive", "oaa")
#: the paper's ablations run with the first 3 seeds only (CPU budget)
ABLATION_SEEDS = 3


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


def run_setting(
    bench: Bench,
    setting: str,
    store: RunStore,
    seeds: Sequence[int],
    proj_dim: int,
    criterion: str = "linear",
    *,
    quick: bool = False,
) -> SettingResult:
    """Run the four stages (module docstring); resumable through ``store``.

    ``quick``: every method gets one value of its four (no tuning), and stage 2 tries only
    the base, the paper's ablations and the EMA option (a smoke run).
    """
    name = bench.name
    _untrained(bench, setting, store)
    bases = [_thin(m, quick) for m in baselines(setting)]
    base = _thin(spacl_method(BASE, setting, proj_dim), quick)
    tuned: list[Method] = [*bases, base]
    train_runs(bench, setting, [(m, t) for m in tuned for t in m.temperatures], 0, store)
    temps = {m.name: select_temperature(store, name, setting, m, criterion) for m in tuned}
    tau0 = temps[base.name]
    options, best = _select_option(bench, setting, store, proj_dim, criterion, tau0, quick)
    if best.name != base.name:
        train_runs(bench, setting, [(best, t) for t in best.temperatures], 0, store)
        temps[best.name] = select_temperature(store, name, setting, best, criterion)
    final = [*bases, base] + ([best] if best.name != base.name else [])
    ablations = [spacl_method(c, setting, proj_dim) for c in paper_ablations().values()]
    for seed in seeds:
        if seed != 0:
            jobs = [(m, temps[m.name]) for m in final]
            if seed in seeds[:ABLATION_SEEDS]:
                jobs += [(m, tau0) for m in ablations]
            train_runs(bench, setting, jobs, seed, store)
    log.info("%s/%s: selected %s (tau %g)", name, setting, best.name, temps[best.name])
    names = [m.name for m in options]
    return SettingResult(name, setting, temps, base.name, best.name, names, criterion, list(seeds))


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
    train_runs(bench, setting, [(m, tau0) for m in options], 0, store)
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
    }
