"""Open-intent detection, dev only: a threshold from pseudo-open classes held out of the
training split (issue 37's untried candidate), against ADB's learned radii.

Plan, written and committed before any run: ``docs/results/open_intent/HELDOUT_PLAN.md``.
Only the train and dev files of a dataset are read (its test file is never opened) and
only selection draws (seeds 1000+) are accepted, never a table seed.

Rule (fixed before any run; the same words in benchmarks/open_intent_heldout.py and
docs/results/open_intent/HELDOUT_PLAN.md):

1. Draws.  For each setting of `open_intent.py`'s `SETTINGS` (stackoverflow, banking,
   oos at 25%, 75%, 50% known, in that order) and each selection draw s in 1000, 1001,
   1002: the known classes are `textoir_known_classes(dataset, ratio, s)` (K of them,
   labels 0..K-1 in the drawn order); train = the known classes' train texts; known dev
   = the known classes' dev texts; both as `select_runs` builds them, on the cached
   mean-pooled outputs of the frozen all-MiniLM-L6-v2.
2. Full detector.  `train_detector(None, train, known dev, K, schedule_of("da_adb", 0,
   {"lr": 1e-4, "patience": 10}))`, exactly as `select_runs`.  Its boundary metrics on
   the whole dev split are recorded beside those of the stored selection row of that
   draw (`selection_runs.jsonl`: da_adb, lr 1e-4, patience 10, rule boundary), with
   whether every stored metric matches within 1e-3.
3. Held-out draws j = 0, 1, 2.  `hidden, kept = hidden_classes(K, 0.25, seed=s * 10 +
   j)` (`spacl.tasks.text.decision`).  An auxiliary detector is trained the same way on
   the kept classes only: their train texts, labels remapped to 0..len(kept)-1, early
   stopping on the kept classes' dev texts.  On the known-class dev texts (kept classes'
   texts as known with their remapped labels, hidden classes' texts as open, label
   len(kept)) each text's nearest centre and distance under the auxiliary detector
   (`det.scores`, radii `det.boundary.radii`) give, for every scale c of `SCALES` (0.5
   to 2.0, step 0.025), pred = nearest if dist < c * radii[nearest] else len(kept).  The
   chosen scale c_j maximises the macro-F1 over len(kept) + 1 classes (`per_class_f1`), the
   first of `SCALES` on ties.
4. The held-out rule.  Its scale is c = (c_0 + c_1 + c_2) / 3, applied to the full
   detector's radii on the whole dev split, where the dev texts of the classes the draw
   left unknown play open (label K, pseudo-open): pred = nearest if dist < c *
   radii[nearest] else K; open score dist - c * radii[nearest].  Metrics by `rounded_metrics`
   (`open_intent_metrics`) as `select_runs`: macro-F1, F1-open, F1-known, accuracy,
   AUROC.
5. Beside it, on the same dev texts: scale 1.0 (the boundary rule of the pre-registered
   detector) and, as a diagnostic only, never a rule, the scale of `SCALES` with the
   highest pseudo-open dev macro-F1 (the first on ties), which reads the pseudo-open
   labels.
6. Decision.  The held-out rule is "better on dev" if its mean pseudo-open dev macro-F1
   over the 27 draws (9 settings x 3 draws) exceeds the boundary rule's (scale 1.0);
   the per-setting means are reported too.  No test text is loaded or scored in either
   case; any later use of the rule on test needs its own pre-registration.

Store: ``docs/results/open_intent/heldout_runs.jsonl``, one line per (setting, draw),
appended when the draw finishes; a rerun skips the draws stored.  Summary:
``docs/results/open_intent/heldout.md``.

    python benchmarks/open_intent_heldout.py
    python benchmarks/open_intent_heldout.py --settings stackoverflow:0.25 --seeds 1000
    python benchmarks/open_intent_heldout.py --summarise --write
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from open_intent import (
    LABELS,
    MAX_TOKENS,
    OUT,
    SCALES,
    SETTINGS,
    append_runs,
    known_rows,
    load_runs,
    open_labels,
    per_class_f1,
    provenance,
    rounded_metrics,
    schedule_of,
)
from spacl.data import split_file
from spacl.data.text import SPLIT_SUFFIXES, IntentExamples, intent_path, read_intent_tsv
from spacl.data.textoir import textoir_known_classes
from spacl.evaluate.adb import ADBModel
from spacl.models.text import EmbeddingCache
from spacl.tasks.text.adb import ADBSchedule, Detector, train_detector
from spacl.tasks.text.decision import hidden_classes
from spacl.tasks.text.states import CachedTexts, PooledEncoder, load_backbone

log = logging.getLogger("benchmarks.open_intent_heldout")

#: the pre-registered detector (PREREGISTRATION.md) and its stage-1 options
METHOD = "da_adb"
OPTIONS: dict[str, Any] = {"lr": 1e-4, "patience": 10}
#: the selection draws (SELECTION.md); a table seed is refused
SEEDS = (1000, 1001, 1002)
#: the held-out draws per selection draw, and the share of known classes each hides
HELD_OUT_DRAWS = (0, 1, 2)
HIDDEN_FRACTION = 0.25
#: the tolerance of the check that the full detector reproduces the stored selection row
REPRODUCE_TOL = 1e-3
STORE = OUT / "heldout_runs.jsonl"
SELECTION_STORE = OUT / "selection_runs.jsonl"
SUMMARY = OUT / "heldout.md"
#: the splits read: never ``test``
DEV_SPLITS = ("train", "dev")


@dataclasses.dataclass(frozen=True)
class Variant:
    """Which detector a plan tries the rule on: the head on the frozen encoder
    (``layers = 0``, HELDOUT_PLAN.md) or MiniLM's top layer trained too (``layers = 1``,
    HELDOUT_TOP_PLAN.md), with its store, summary, plan and planned settings and draws."""

    layers: int
    method: str
    store: Path
    summary: Path
    plan: str
    settings: tuple[str, ...]
    seeds: tuple[int, ...]

    @property
    def run_command(self) -> str:
        return "python benchmarks/open_intent_heldout.py" + (" --top-layer" if self.layers else "")

    @property
    def summary_command(self) -> str:
        return self.run_command + " --summarise --write"


#: HELDOUT_PLAN.md: the pre-registered head-only detector, every setting
HEAD = Variant(0, METHOD, STORE, SUMMARY, "HELDOUT_PLAN.md", SETTINGS, SEEDS)
#: HELDOUT_TOP_PLAN.md: the top-layer detector (``da_adb_top1``) in the three settings
#: where it fell short on fresh draws (confirmation.md), in that order
TOP = Variant(
    1,
    "da_adb_top1",
    OUT / "heldout_top_runs.jsonl",
    OUT / "heldout_top.md",
    "HELDOUT_TOP_PLAN.md",
    ("stackoverflow:0.75", "stackoverflow:0.5", "oos:0.5"),
    SEEDS,
)
RUN_COMMAND = HEAD.run_command
SUMMARY_COMMAND = HEAD.summary_command


def subset(texts: CachedTexts, rows: torch.Tensor, labels: torch.Tensor) -> CachedTexts:
    """``texts`` at the ``rows`` mask, with ``labels`` (pooled or token states alike)."""
    return CachedTexts(texts.states[rows], texts.lengths[rows], labels)


class DevEncoded:
    """A dataset's train and dev texts (its test file is never opened) and the frozen
    encoder's outputs of them: the cached mean-pooled outputs ``select_runs`` used
    (``layers = 0``), or the token states after the bottom ``6 - layers`` layers, cut to
    TEXTOIR's max_seq_length as the table's top-layer runs cut them."""

    def __init__(self, name: str, backbone: Any, layers: int = 0) -> None:
        self.name = name
        directory = intent_path(name)
        self.data: dict[str, IntentExamples] = {}
        for split in DEV_SPLITS:
            path = split_file(directory, split, SPLIT_SUFFIXES)
            if path is None:
                raise FileNotFoundError(f"{directory}: no {split} file")
            self.data[split] = read_intent_tsv(path)
        start = time.perf_counter()
        self.inputs: dict[str, CachedTexts] = {}
        if layers == 0:
            encoder = PooledEncoder(backbone.model, backbone.tokenize, backbone.name)
            cache = EmbeddingCache()
            for split in DEV_SPLITS:
                texts = self.data[split].texts
                unset = torch.full((len(texts),), -1, dtype=torch.long)
                self.inputs[split] = CachedTexts.pooled(cache.embed(encoder, texts), unset)
        else:
            for split in DEV_SPLITS:
                texts = self.data[split].texts
                unset = torch.full((len(texts),), -1, dtype=torch.long)
                states = backbone.states(texts, layers)
                self.inputs[split] = CachedTexts.from_states(states, unset, MAX_TOKENS[name])
        log.info("%s: train and dev inputs in %.0f s", name, time.perf_counter() - start)


@dataclasses.dataclass(frozen=True)
class Draw:
    """One selection draw of a setting, as ``select_runs`` builds it: the known classes,
    the known classes' train and dev texts (labels ``0..K-1``) and the whole dev split
    (the classes the draw left unknown labelled ``K``, pseudo-open)."""

    known: list[str]
    train: CachedTexts
    dev: CachedTexts
    whole_dev: CachedTexts

    @property
    def k(self) -> int:
        return len(self.known)


def draw_of(enc: DevEncoded, ratio: float, seed: int) -> Draw:
    """The draw ``seed`` of ``enc``'s dataset at ``ratio`` (as ``select_runs``)."""
    known = textoir_known_classes(enc.name, ratio, seed)
    tr = known_rows(enc.data["train"].labels, known)
    dv_known = known_rows(enc.data["dev"].labels, known)
    y_tr = open_labels(enc.data["train"].labels, known)[tr]
    y_dev_all = open_labels(enc.data["dev"].labels, known)
    every_dev = torch.ones(len(y_dev_all), dtype=torch.bool)
    return Draw(
        known=known,
        train=subset(enc.inputs["train"], tr, y_tr),
        dev=subset(enc.inputs["dev"], dv_known, y_dev_all[dv_known]),
        whole_dev=subset(enc.inputs["dev"], every_dev, y_dev_all),
    )


def detector(
    train: CachedTexts, dev: CachedTexts, k: int, layers: int = 0, backbone: Any = None
) -> Detector:
    """The detector trained on ``train``, early-stopped on ``dev``: the pre-registered
    head-only one (``layers = 0``), or with a fresh copy of MiniLM's top ``layers``
    trained too (``da_adb_top1``'s schedule: the same options, ``trainable_layers=1``)."""
    if layers == 0:
        return train_detector(None, train, dev, k, schedule_of(METHOD, 0, OPTIONS))
    schedule = ADBSchedule(method=METHOD, seed=0, trainable_layers=layers, **OPTIONS)
    return train_detector(backbone.top(layers), train, dev, k, schedule)


def best_scale(
    y: np.ndarray, nearest: np.ndarray, dist: np.ndarray, radii: np.ndarray, k: int
) -> tuple[float, float]:
    """``(scale, macro-F1 in percent)``: the scale of :data:`SCALES` whose prediction
    ``nearest if dist < scale * radii[nearest] else k`` has the highest macro-F1 over
    ``k + 1`` classes (``per_class_f1``), the first on ties."""
    best = (SCALES[0], -1.0)
    for scale in SCALES:
        pred = np.where(dist < scale * radii[nearest], nearest, k)
        macro = 100 * float(per_class_f1(y, pred, k).mean())
        if macro > best[1]:
            best = (scale, macro)
    return best


def _numpy(*tensors: torch.Tensor) -> list[np.ndarray]:
    return [t.detach().cpu().numpy() for t in tensors]


def held_out_draw(
    draw: Draw, draw_seed: int, j: int, layers: int = 0, backbone: Any = None
) -> dict[str, Any]:
    """Held-out draw ``j`` of selection draw ``draw_seed``: ``hidden_classes(K, 0.25,
    seed=draw_seed * 10 + j)`` hidden, an auxiliary detector trained on the kept classes
    (labels remapped), and the scale it chooses on the known-class dev texts (the hidden
    classes' texts open)."""
    k = draw.k
    seed = draw_seed * 10 + j
    hidden, kept = hidden_classes(k, HIDDEN_FRACTION, seed=seed)
    remap = torch.full((k,), -1, dtype=torch.long)
    remap[kept] = torch.arange(len(kept))
    n_kept = len(kept)
    start = time.perf_counter()
    tr = remap[draw.train.labels] >= 0
    dv = remap[draw.dev.labels] >= 0
    aux = detector(
        subset(draw.train, tr, remap[draw.train.labels[tr]]),
        subset(draw.dev, dv, remap[draw.dev.labels[dv]]),
        n_kept,
        layers,
        backbone,
    )
    labels = torch.where(dv, remap[draw.dev.labels], torch.full_like(draw.dev.labels, n_kept))
    every = torch.ones(len(labels), dtype=torch.bool)
    _, nearest, dist = aux.scores(subset(draw.dev, every, labels))
    y, near, d, radii = _numpy(labels, aux.boundary.classes[nearest], dist, aux.boundary.radii)
    scale, macro = best_scale(y, near, d, radii, n_kept)
    return {
        "j": j,
        "seed": seed,
        "hidden": [draw.known[int(c)] for c in hidden],
        "num_kept": n_kept,
        "scale": scale,
        "macro_f1": round(macro, 4),
        "epochs": aux.record["epochs"],
        "seconds": round(time.perf_counter() - start, 2),
    }


def scaled_metrics(
    boundary: ADBModel, z: torch.Tensor, labels: torch.Tensor, k: int, scale: float
) -> dict[str, float]:
    """``rounded_metrics`` of the boundary with every radius times ``scale`` (open score: the
    distance minus the scaled radius), as ``select_runs`` scores its rules."""
    rule = dataclasses.replace(boundary, radii=boundary.radii * scale)
    return rounded_metrics(labels, rule.predict(z), k, rule.open_score(z))


def stored_selection(rows: list[dict], dataset: str, ratio: float, seed: int) -> dict | None:
    """The boundary metrics of the draw's stored selection row of the pre-registered
    detector (the first such row), ``None`` without one."""
    for r in rows:
        if (r["dataset"], float(r["ratio"]), r["seed"], r["method"]) == (
            dataset,
            ratio,
            seed,
            METHOD,
        ) and r["options"] == OPTIONS:
            return dict(r["pseudo_open"]["boundary"])
    return None


def reproduces(ours: dict[str, float], stored: dict[str, float] | None) -> bool | None:
    """Whether every stored metric is matched within :data:`REPRODUCE_TOL` (``None``: no
    stored row)."""
    if stored is None:
        return None
    return all(key in ours and abs(ours[key] - v) <= REPRODUCE_TOL for key, v in stored.items())


def heldout_run(
    enc: DevEncoded,
    ratio: float,
    seed: int,
    selection: list[dict],
    variant: Variant = HEAD,
    backbone: Any = None,
) -> dict[str, Any]:
    """The stored row of one (setting, draw): the full detector, the three held-out
    draws, and the pseudo-open dev metrics at scale 1.0, the held-out rule's scale and
    the dev-best scale (a diagnostic)."""
    start = time.perf_counter()
    draw = draw_of(enc, ratio, seed)
    k = draw.k
    layers = variant.layers
    full = detector(draw.train, draw.dev, k, layers, backbone)
    z, nearest, dist = full.scores(draw.whole_dev)
    draws = [held_out_draw(draw, seed, j, layers, backbone) for j in HELD_OUT_DRAWS]
    scale = sum(d["scale"] for d in draws) / len(draws)
    y, near, d, radii = _numpy(
        draw.whole_dev.labels, full.boundary.classes[nearest], dist, full.boundary.radii
    )
    dev_best, _ = best_scale(y, near, d, radii, k)
    labels = draw.whole_dev.labels
    boundary = scaled_metrics(full.boundary, z, labels, k, 1.0)
    stored = stored_selection(selection, enc.name, ratio, seed) if layers == 0 else None
    return {
        "phase": "heldout",
        "dataset": enc.name,
        "ratio": ratio,
        "seed": seed,
        "method": variant.method,
        "options": OPTIONS,
        "hidden_fraction": HIDDEN_FRACTION,
        "known_classes": draw.known,
        "sizes": {"train": len(draw.train), "dev_known": len(draw.dev), "dev": len(labels)},
        "held_out": draws,
        "scale": scale,
        "dev_best_scale": dev_best,
        "pseudo_open": {
            "boundary": boundary,
            "heldout": scaled_metrics(full.boundary, z, labels, k, scale),
            "dev_best": scaled_metrics(full.boundary, z, labels, k, dev_best),
        },
        "selection_boundary": stored,
        "reproduces_selection": reproduces(boundary, stored),
        "record": {"epochs": full.record["epochs"], "best_epoch": full.record["best_epoch"]},
        "seconds": round(time.perf_counter() - start, 2),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **{key: provenance()[key] for key in ("commit", "dirty")},
    }


def run(
    backbone: Any, settings: list[str], seeds: list[int], store: Path, variant: Variant = HEAD
) -> None:
    """Every (setting, draw) that ``store`` lacks, each appended when it finishes."""
    done = {(r["dataset"], float(r["ratio"]), r["seed"]) for r in load_runs(store)}
    selection = load_runs(SELECTION_STORE)
    enc: DevEncoded | None = None
    for setting in settings:
        name, ratio_text = setting.split(":")
        ratio = float(ratio_text)
        todo = [s for s in seeds if (name, ratio, s) not in done]
        if not todo:
            continue
        if enc is None or enc.name != name:
            enc = DevEncoded(name, backbone, variant.layers)
        for seed in todo:
            row = heldout_run(enc, ratio, seed, selection, variant, backbone)
            append_runs(store, [row])
            po = row["pseudo_open"]
            log.info(
                "heldout %s %.2f draw %d: scales %s -> %.3f (dev-best %.3f); macro-F1 "
                "boundary %.2f held-out %.2f; reproduces selection: %s (%.1f s)",
                name,
                ratio,
                seed,
                [d["scale"] for d in row["held_out"]],
                row["scale"],
                row["dev_best_scale"],
                po["boundary"]["macro_f1"],
                po["heldout"]["macro_f1"],
                row["reproduces_selection"],
                row["seconds"],
            )


#: the summary's rules: (key of a row's ``pseudo_open``, name)
RULES = (
    ("boundary", "boundary (scale 1)"),
    ("heldout", "held-out rule"),
    ("dev_best", "dev-best scale (diagnostic)"),
)
PLANNED_DRAWS = len(SETTINGS) * len(SEEDS)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _cells(rows: list[dict], key: str) -> str:
    return " / ".join(
        f"{_mean([r['pseudo_open'][rule][key] for r in rows]):.2f}" for rule, _ in RULES
    )


def _line(label: str, rows: list[dict], variant: Variant = HEAD) -> str:
    """One row of :func:`summary`: the means over ``rows``."""
    scales = " / ".join(
        f"{_mean([r[key] for r in rows]):.3f}" for key in ("scale", "dev_best_scale")
    )
    cells = [label, str(len(rows)), _cells(rows, "macro_f1"), _cells(rows, "f1_ood"), scales]
    if variant.layers == 0:
        same = sum(r["reproduces_selection"] is True for r in rows)
        cells.append(f"{same} of {len(rows)}")
    return "| " + " | ".join(cells) + " |"


def _setting(setting: str) -> tuple[str, float]:
    """``"name:ratio"`` as ``(name, ratio)``."""
    name, ratio = setting.split(":")
    return name, float(ratio)


def _planned(rows: list[dict], variant: Variant = HEAD) -> list[dict]:
    """The rows of the plan's draws (its settings x its seeds)."""
    planned = {
        (s.split(":")[0], float(s.split(":")[1]), seed)
        for s in variant.settings
        for seed in variant.seeds
    }
    return [r for r in rows if (r["dataset"], float(r["ratio"]), r["seed"]) in planned]


def summary(rows: list[dict], variant: Variant = HEAD) -> str:
    """Per setting (the plan's order) and over every stored draw: the mean pseudo-open
    dev macro-F1 and F1-open of the boundary, the held-out rule and the dev-best scale
    (a diagnostic), and the plan's decision once its draws are stored."""
    names = " / ".join(name for _, name in RULES)
    head = [
        "setting",
        "draws",
        f"macro-F1: {names}",
        f"F1-open: {names}",
        "scale: held-out / dev-best",
    ]
    if variant.layers == 0:
        head.append("reproduces selection")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for setting in variant.settings:
        name, ratio_text = setting.split(":")
        runs = [r for r in rows if (r["dataset"], float(r["ratio"])) == (name, float(ratio_text))]
        if runs:
            lines.append(_line(f"{LABELS[name]} {int(100 * float(ratio_text))}%", runs, variant))
    if not rows:
        return "\n".join([*lines, "", "No draw stored."])
    lines.append(_line("**all draws**", rows, variant))
    return "\n".join([*lines, "", decision(rows, variant)])


def decision(rows: list[dict], variant: Variant = HEAD) -> str:
    """The plan's decision: the held-out rule is better on dev if its mean pseudo-open dev
    macro-F1 over the plan's draws exceeds the boundary rule's (none before all are in)."""
    planned = _planned(rows, variant)
    count = len(variant.settings) * len(variant.seeds)
    if len(planned) != count:
        stored = {(r["dataset"], float(r["ratio"]), r["seed"]) for r in planned}
        missing = [
            (setting, [seed for seed in variant.seeds if (*_setting(setting), seed) not in stored])
            for setting in variant.settings
        ]
        listed = "; ".join(
            f"{LABELS[_setting(s)[0]]} {int(100 * _setting(s)[1])}% "
            + ("draws " if len(seeds) > 1 else "draw ")
            + ", ".join(map(str, seeds))
            for s, seeds in missing
            if seeds
        )
        return (
            f"Decision: none yet ({len(planned)} of the {count} draws stored).  Missing: "
            f"{listed}; each added by `{variant.run_command} --seeds DRAW` (a rerun adds "
            "only what the store lacks)."
        )
    held = _mean([r["pseudo_open"]["heldout"]["macro_f1"] for r in planned])
    base = _mean([r["pseudo_open"]["boundary"]["macro_f1"] for r in planned])
    verdict = "better on dev" if held > base else "not better on dev"
    return (
        f"Decision ({variant.plan}): the held-out rule is **{verdict}**: mean pseudo-open dev "
        f"macro-F1 over the {count} draws {held:.2f} vs the boundary rule's {base:.2f}.  "
        "No test text was loaded or scored; any use on test needs its own pre-registration."
    )


def summary_text(rows: list[dict], variant: Variant = HEAD) -> str:
    """heldout.md (heldout_top.md): the commands, the plan's pointer and :func:`summary`."""
    if variant.layers == 0:
        title = "a threshold from held-out known classes (dev only)"
        about = (
            "the pre-registered detector (DA-ADB, lr 1e-4, frozen MiniLM) at three scales of "
            "its radii; the dev-best scale reads the pseudo-open labels, a diagnostic, never a "
            "rule.  `reproduces selection`: draws whose scale-1 metrics match the stored "
            "selection row within 1e-3.  The plan's `_f1s` is `per_class_f1` (renamed by "
            "commit 39965ed, the same function)."
        )
    else:
        title = "the held-out threshold for the top-layer detector (dev only)"
        about = (
            "the top-layer detector (`da_adb_top1`: DA-ADB, lr 1e-4, MiniLM's top layer "
            "trained) at three scales of its radii, in the settings where it fell short on "
            "fresh draws (confirmation.md); the dev-best scale reads the pseudo-open labels, "
            "a diagnostic, never a rule."
        )
    return "\n".join(
        [
            f"# Open-intent detection: {title}",
            "",
            f"Runs: `{variant.run_command}`; this file: `{variant.summary_command}`.",
            "",
            f"Plan and rule, committed before the runs: [{variant.plan}]({variant.plan}).  "
            f"Store: `{variant.store.name}`.  Mean over the draws of the pseudo-open dev "
            f"scores (percent) of {about}  No test text is loaded or scored.",
            "",
            *(run_order_lines(rows) if variant.layers else []),
            summary(rows, variant),
            "",
        ]
    )


def run_order_lines(rows: list[dict]) -> list[str]:
    """HELDOUT_TOP_PLAN.md's deviation from its run order ("one process at low priority,
    draw 1000 of every setting first"), read from the store: the order the draws were
    stored in (their ``finished`` time)."""
    if not rows:
        return []
    stored = sorted(rows, key=lambda r: r["finished"])
    order = ", ".join(
        f"{LABELS[r['dataset']]} {int(100 * float(r['ratio']))}% {r['seed']}" for r in stored
    )
    dirty = sum(1 for r in rows if r.get("dirty"))
    return [
        "**Deviation from the plan's run order.**  The plan says one process at low priority, "
        "draw 1000 of every setting first.  What ran: each draw its own process at the "
        f"commit its row records ({dirty} of {len(rows)} rows on a modified tree), up to "
        "three side by side, setting after setting; stored in this order: "
        f"{order}.  Each draw's numbers were read when it was stored; the decision rule was "
        "fixed in the plan, and no decision is read before all the plan's draws are in.",
        "",
    ]


def build_parser() -> argparse.ArgumentParser:
    """The command line (the module docstring is its help)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--settings", nargs="+", default=None, choices=SETTINGS, metavar="NAME:RATIO"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument(
        "--top-layer",
        action="store_true",
        help="HELDOUT_TOP_PLAN.md: the top-layer detector, its settings, store and summary",
    )
    parser.add_argument("--store", type=Path, default=None, help="default: the plan's store")
    parser.add_argument("--summarise", action="store_true", help="print the summary table")
    parser.add_argument("--write", action="store_true", help="with --summarise: write heldout.md")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    variant = TOP if args.top_layer else HEAD
    store = args.store or variant.store
    if args.summarise:
        text = summary_text(load_runs(store), variant)
        if args.write:
            variant.summary.write_text(text)
        print(text)
        return 0
    seeds = args.seeds or list(variant.seeds)
    if any(seed < min(SEEDS) for seed in seeds):
        raise SystemExit(f"--seeds: selection draws only ({min(SEEDS)}+), never a table seed")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    run(load_backbone(), args.settings or list(variant.settings), seeds, store, variant)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
