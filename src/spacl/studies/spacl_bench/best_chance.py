"""SPACL's best chance (issue 20): a bench built so that hard negatives matter most.

Fine classes clustered inside coarse groups (:func:`spacl.data.make_synthetic` with
``cluster_spread``) plus class-free nuisance coordinates, all mixed by a random rotation
(so the raw inputs are not already the ideal geometry and an encoder has something to
learn), trained with fine labels and a large labelled negative queue, so
most negatives are easy (other groups) and a few are hard (the siblings in the group).
Every arm sees the same queue size, views, initial encoder and steps, and gets its own
validation-tuned temperature from the same four values.  The decision rule below
(:data:`PREREGISTRATION`) was committed before the first run and is printed in the report.
An addendum, **not pre-registered** (:func:`run_grown`, issue 39), grows each arm's grid by
the benches' rule and reports the same comparisons there, beside the pre-registered ones;
no verdict reads it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from spacl.data import LabeledData, derive_seed, make_synthetic, stratified_split
from spacl.models import build_model
from spacl.studies.spacl_bench.benches import Bench, FeatureDropoutViews
from spacl.studies.spacl_bench.methods import TEMPERATURES, Method
from spacl.studies.spacl_bench.protocol import RunKey, RunStore, select_temperature, train_runs
from spacl.studies.stats import summarize, welch

__all__ = [
    "ARMS",
    "CRITERION",
    "MIN_GAP",
    "PREREGISTRATION",
    "BestChance",
    "arms",
    "collect",
    "collect_grown",
    "load_best_chance",
    "run_best_chance",
    "run_grown",
]

NAME = "best_chance"
SETTING = "supervised"
#: the validation criterion, fixed before any run
CRITERION = "ncc"
#: the pre-registered effect size (points of test accuracy)
MIN_GAP = 0.5
ARMS: tuple[str, ...] = ("SupCon+queue", "HSCL", "SPACL IB", "SPACL IB+H", "SPACL full")


@dataclass(frozen=True)
class BestChance:
    """The bench's sizes (fixed before any run)."""

    groups: int = 16
    fine_per_group: int = 8
    dim: int = 32
    per_class: int = 40  # 24 train / 6 val / 10 test per class after the splits
    within_std: float = 0.08
    cluster_spread: float = 0.35
    nuisance_dims: int = 32  # class-free Gaussian coordinates an encoder must learn to ignore
    nuisance_std: float = 0.25
    queue_size: int = 2048
    proj_dim: int = 32
    epochs: int = 8
    batch_size: int = 128
    lr: float = 2e-3
    seeds: int = 5

    @property
    def classes(self) -> int:
        return self.groups * self.fine_per_group


FULL = BestChance()
QUICK = BestChance(groups=4, fine_per_group=4, per_class=20, queue_size=256, epochs=1, seeds=1)

PREREGISTRATION = f"""\
**Pre-registered before the first run** (committed with the code that runs it).  Bench:
{FULL.groups} coarse groups x {FULL.fine_per_group} fine classes = {FULL.classes} classes of
{FULL.dim}-d synthetic vectors, fine centres clustered inside their group
(`cluster_spread = {FULL.cluster_spread}`, `within_std = {FULL.within_std}`) plus
{FULL.nuisance_dims} class-free coordinates (std {FULL.nuisance_std}), rotated at random; fine
labels; a labelled negative queue of {FULL.queue_size} past embeddings (most negatives come
from other groups: easy; the siblings are hard); {FULL.epochs} epochs; {FULL.seeds} seeds (a
run costs well under a minute).  Arms: SupCon with the queue; HSCL (beta = 1 tilt, in-batch
negatives: with a 4096-row queue one run took 150 s here, so its hardness comes from the
tilt alone); SPACL IB (in-batch + queue negatives, all kept, no generator); SPACL IB+H (the
same with the relative-threshold cut, `lambda_Q = 0.95`); full SPACL (IB+H plus the
adversarial generator).  Every arm gets its own temperature from {{0.05, 0.1, 0.2, 0.5}},
chosen on the validation split (seed 0) by nearest-class-centre accuracy.  **Decision
rule**: "the cut helps" only if IB+H beats IB by more than {MIN_GAP} points of test NCC
accuracy with Welch p < 0.05 over the {FULL.seeds} seeds, each at its own tuned
temperature; IB beating IB+H by that much is "opposite"; anything else is "not reproduced".
IB and IB+H are also trained at every temperature with every seed, and the cut x
temperature table is reported whatever the verdict.  Test accuracies are read by no
choice."""


def load_best_chance(cfg: BestChance = FULL) -> Bench:
    """The bench: train / val / test drawn once (data seed 0), clustered fine classes."""
    per = cfg.per_class
    data = make_synthetic(
        cfg.classes,
        cfg.dim,
        per,
        within_std=cfg.within_std,
        seed=0,
        num_superclasses=cfg.groups,
        cluster_spread=cfg.cluster_spread,
    )
    gen = torch.Generator().manual_seed(derive_seed(0, NAME, "nuisance"))
    nuisance = cfg.nuisance_std * torch.randn(len(data), cfg.nuisance_dims, generator=gen)
    width = cfg.dim + cfg.nuisance_dims
    mix, _ = torch.linalg.qr(torch.randn(width, width, generator=gen, dtype=torch.float64))
    inputs = torch.cat((data.inputs.double(), nuisance.double()), 1) @ mix
    data = LabeledData(
        inputs.float(), data.labels, data.coarse_labels, cfg.classes, NAME, data.class_names
    )
    train, test = stratified_split(data, 0.25, seed=0)
    train, val = stratified_split(train, 0.2, seed=1)
    in_dim = width

    def encoder(seed: int) -> nn.Module:
        return build_model(
            "mlp", "mlp", cfg.proj_dim, in_dim=in_dim, hidden_dims=(128,), out_dim=64
        )

    return Bench(
        NAME,
        train,
        val,
        test,
        FeatureDropoutViews(0.1, 0.05),
        encoder,
        (SETTING,),
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        linear_probe=False,
        description=(
            f"best chance: {cfg.groups} groups x {cfg.fine_per_group} fine classes "
            f"({cfg.dim}-d, clustered), {len(train)} train / {len(val)} val / {len(test)} test, "
            f"queue {cfg.queue_size}"
        ),
    )


def _spacl(name: str, variant: str, cfg: BestChance, temps: tuple[float, ...]) -> Method:
    """A SPACL arm: the registry's ``spacl`` row in the form of ``variant`` (with the queue)."""
    params = {
        "num_positives": 2,
        "share": 1.0 if variant == "ib" else 0.95,
        "num_adversarial": 1 if variant == "full" else 0,
        "variant": variant,
        "positive_pool": "instance_class",
        "mass": "similarity",
        "online": "all_views",
        "embedding_dim": cfg.proj_dim,
    }
    return Method(
        name,
        "spacl",
        True,
        params,
        family="spacl",
        temperatures=temps,
        queue_size=cfg.queue_size,
        queue_dim=cfg.proj_dim,
        seed_key=(NAME, variant),
    )


def arms(cfg: BestChance = FULL, temperatures: Sequence[float] = TEMPERATURES) -> list[Method]:
    """The five arms of :data:`ARMS`; all but HSCL with the queue (:data:`PREREGISTRATION`)."""
    size, dim, temps = cfg.queue_size, cfg.proj_dim, tuple(temperatures)
    return [
        Method("SupCon+queue", "supcon", True, temperatures=temps, queue_size=size, queue_dim=dim),
        Method("HSCL", "hscl", True, {"beta": 1.0, "tau_plus": 0.0}, temperatures=temps),
        _spacl("SPACL IB", "ib", cfg, temps),
        _spacl("SPACL IB+H", "ib_h", cfg, temps),
        _spacl("SPACL full", "full", cfg, temps),
    ]


def run_best_chance(
    store: RunStore, cfg: BestChance = FULL, *, quick: bool = False, train: bool = True
) -> dict[str, float]:
    """Tune every arm (seed 0), then every seed at the tuned temperatures, and IB / IB+H at
    every temperature and seed (the cut x tau table); resumable through ``store``
    (``train=False``: only what it holds).  Returns the tuned temperatures."""
    bench = load_best_chance(cfg)
    temps_grid = TEMPERATURES[1:2] if quick else TEMPERATURES
    methods = arms(cfg, temps_grid)
    seeds = list(range(cfg.seeds))
    if train:
        train_runs(bench, SETTING, [(m, t) for m in methods for t in m.temperatures], 0, store)
    tuned = {
        m.name: select_temperature(store, NAME, SETTING, m, CRITERION)
        for m in methods
        if all(RunKey(NAME, SETTING, m.name, t, 0) in store for t in m.temperatures)
    }
    grid = ("SPACL IB", "SPACL IB+H")
    for seed in seeds[1:] if train else []:
        jobs = [(m, tuned[m.name]) for m in methods if m.name not in grid]
        jobs += [(m, t) for m in methods if m.name in grid for t in m.temperatures]
        train_runs(bench, SETTING, jobs, seed, store)
    return tuned


def run_grown(
    store: RunStore, cfg: BestChance = FULL, *, train: bool = True
) -> dict[str, tuple[float, list[float]]]:
    """The addendum (issue 39), **not pre-registered**: every arm's grid grown from the
    pre-registered four values by the benches' rule (:func:`~.stages.tune_over_grid`:
    past an end that holds the validation choice or whose score it ties, at most
    :data:`~.methods.MAX_GROWTH` values per end; seed 0), then the pre-registered seeds
    at each grown choice.  The pre-registered choices, runs and verdicts are untouched
    (the grown values are runs of their own).  Resumable through ``store``
    (``train=False``: only what it holds).  Returns arm name -> (choice, grid as run)."""
    from spacl.studies.spacl_bench.stages import tune_over_grid

    bench = load_best_chance(cfg)

    def fit(jobs: list[tuple[Method, float]], seed: int) -> None:
        if train:
            train_runs(bench, SETTING, jobs, seed, store)

    grown: dict[str, tuple[float, list[float]]] = {}
    for m in arms(cfg):
        chosen, grid = tune_over_grid(store, NAME, SETTING, m, CRITERION, fit)
        if chosen is not None:
            grown[m.name] = (chosen, list(grid))
    for seed in range(1, cfg.seeds):
        fit([(m, grown[m.name][0]) for m in arms(cfg) if m.name in grown], seed)
    return grown


def collect_grown(
    store: RunStore, grown: dict[str, tuple[float, list[float]]], cfg: BestChance = FULL
) -> dict[str, Any]:
    """The addendum's metrics (:func:`run_grown`; accuracies in %): per arm its grown
    grid's validation curve (seed 0) and its numbers at the grown choice over the seeds."""
    seeds = list(range(cfg.seeds))
    out: dict[str, Any] = {"seeds": seeds, "temperatures": {}, "tuning": {}, "arms": {}}
    for name, (tau, grid) in grown.items():
        out["temperatures"][name] = tau
        out["tuning"][name] = {
            f"{t:g}": 100 * float(store.get(RunKey(NAME, SETTING, name, t, 0))["val"][CRITERION])
            for t in grid
        }
        out["arms"][name] = _arm(_values(store, name, tau, seeds), tau)
    return out


def _arm(recs: list[dict[str, Any]], tau: float) -> dict[str, Any]:
    return {
        "tau": tau,
        "seeds": [r["seed"] for r in recs],
        "val": summarize([{k: 100 * r["val"][k] for k in ("ncc", "knn")} for r in recs]),
        "test": summarize([{k: 100 * r["test"][k] for k in ("ncc", "knn")} for r in recs]),
        "seconds": [float(r.get("seconds") or math.nan) for r in recs],
        "kept_fraction_end": [
            float(r["kept_fraction"][-1]) for r in recs if r.get("kept_fraction")
        ],
    }


def _values(store: RunStore, name: str, tau: float, seeds: Sequence[int]) -> list[dict[str, Any]]:
    return [store.get(k) for s in seeds if (k := RunKey(NAME, SETTING, name, tau, s)) in store]


def collect(store: RunStore, tuned: dict[str, float], cfg: BestChance = FULL) -> dict[str, Any]:
    """The bench's metrics (accuracies in %), with the cut x tau table and run times."""
    seeds = list(range(cfg.seeds))
    out: dict[str, Any] = {"criterion": CRITERION, "seeds": seeds, "temperatures": tuned}
    out["arms"] = {name: _arm(_values(store, name, tau, seeds), tau) for name, tau in tuned.items()}
    out["tuning"] = {
        name: {
            f"{t:g}": 100 * float(store.get(k)["val"][CRITERION])
            for t in TEMPERATURES
            if (k := RunKey(NAME, SETTING, name, t, 0)) in store
        }
        for name in tuned
    }
    grid = []
    for tau in TEMPERATURES:
        ib = [100 * r["test"][CRITERION] for r in _values(store, "SPACL IB", tau, seeds)]
        ibh = [100 * r["test"][CRITERION] for r in _values(store, "SPACL IB+H", tau, seeds)]
        if not ib or not ibh:
            continue
        row: dict[str, Any] = {"tau": tau, "ib": ib, "ib_h": ibh}
        if len(ib) >= 2 and len(ibh) >= 2:
            row["welch_t"], row["p"] = welch(ibh, ib)
        grid.append(row)
    out["cut_by_tau"] = grid
    timed = [
        float(r["seconds"])
        for r in store.select(bench=NAME)
        if r.get("seconds") and r["seed"] in seeds
    ]
    out["compute"] = {"runs": len(timed), "seconds": sum(timed)}
    out["preregistration"] = PREREGISTRATION
    return out
