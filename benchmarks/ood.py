"""Open-intent detection on StackOverflow, BANKING77 and CLINC150-oos: SPACL vs baselines.

One frozen encoder (all-MiniLM-L6-v2, cached embeddings) and a projection head trained
by each objective's recipe (``configs/text/stackoverflow_{spacl,supcon,ce}.yaml``, the
dataset overridden); ``frozen`` is the raw embeddings, ``reject-all`` predicts OOD for
every input.  Configurations: StackOverflow and BANKING77 at 25/50/75% known classes
(TEXTOIR protocol), CLINC150 with its real out-of-scope queries (every class known, the
``oos`` test queries are OOD).  Seed ``s`` picks the known classes and initialises the
heads.

No choice reads test data: every run uses the task's one fixed decision rule (the
recipes' ``ood.method=quantile``, ``scope=class``, q = 0.95, issue 18,
``docs/kg_and_text.md``); the other rules' and ADB's test numbers are shown too,
marked "not used for selection".  ``--set ood.method=select`` reproduces the per-run
selection of earlier versions.  Targets are margins over the frozen baseline, decided
by Welch's t-test at 5% (:func:`spacl.studies.verdicts.compare`).

Run store (crash-safe): with ``--store FILE.jsonl`` every finished run is appended as
one JSON line, and a rerun skips the (dataset, known ratio, seed, method) runs the file
already holds, so an interrupted command only adds what is missing.

    python benchmarks/ood.py --store benchmarks/results/ood_runs/fixed_rule.jsonl
    python benchmarks/ood.py --configs banking:0.25 --seeds 0 --store /tmp/x.jsonl
    python benchmarks/ood.py --render benchmarks/results/ood_runs/fixed_rule.jsonl

Every run records the names of its known classes (``known_classes``).  The runs stored
before it did (``ood_runs/fixed_rule.jsonl``, ``ood_finetune_runs.jsonl``) got them from
their recorded dataset, known ratio and seed, the draw recomputed and checked against
every field of the run it decides (:func:`backfill_known_classes`):

    python benchmarks/ood.py --backfill-known-classes benchmarks/results/ood_runs/fixed_rule.jsonl \
        benchmarks/results/ood_finetune_runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import header, write_result
from ood_report import render
from spacl.data.text import load_intent_dataset, open_intent_split
from spacl.evaluate.ood import reject_all_metrics
from spacl.models.text import EmbeddingCache, MiniLMEncoder
from spacl.tasks.text import ood_config, train_ood

log = logging.getLogger("benchmarks.ood")

REPO = Path(__file__).resolve().parents[1]
RECIPES = {
    "spacl": REPO / "configs" / "text" / "stackoverflow_frozen_spacl.yaml",
    "supcon": REPO / "configs" / "text" / "stackoverflow_frozen_supcon.yaml",
    "cross_entropy": REPO / "configs" / "text" / "stackoverflow_frozen_ce.yaml",
    "frozen": REPO / "configs" / "text" / "stackoverflow_frozen_ce.yaml",  # objective overridden
}
CONFIGS = (
    "stackoverflow:0.25",
    "stackoverflow:0.5",
    "stackoverflow:0.75",
    "banking:0.25",
    "banking:0.5",
    "banking:0.75",
    "oos:1.0",
)


def parse_config(text: str) -> tuple[str, float]:
    name, _, ratio = text.partition(":")
    try:
        value = float(ratio)
    except ValueError:
        raise SystemExit(f"--configs entries are NAME:KNOWN_RATIO, got {text!r}") from None
    return name, value


def run_key(run: dict[str, Any]) -> tuple[str, float, int, str]:
    """The identity of one run in the store: (dataset, known ratio, seed, method)."""
    return (str(run["dataset"]), float(run["known_ratio"]), int(run["split_seed"]), run["method"])


def read_store(path: str | Path) -> list[dict[str, Any]]:
    """Every run of a store: a JSONL file (one run per line) or a JSON list (older files)."""
    text = Path(path).read_text() if Path(path).is_file() else ""
    if text.lstrip().startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_config(
    name: str,
    ratio: float,
    seeds: list[int],
    methods: list[str],
    root: str | None,
    extra: list[str],
    encoder: MiniLMEncoder,
    store: Path | None = None,
) -> list[dict[str, Any]]:
    data = load_intent_dataset(name, root)
    done = {run_key(r) for r in read_store(store)} if store is not None else set()
    runs = []
    for seed in seeds:
        split = open_intent_split(data, ratio, seed)
        for method in methods:
            if (name, float(ratio), seed, method) in done:
                continue
            overrides = [
                f"name={name}-{method}",
                f"data.name={name}",
                f"data.known_ratio={ratio}",
                f"data.split_seed={seed}",
                f"train.seed={seed}",
                *extra,
            ]
            if method == "frozen":
                overrides.append("objective.name=frozen")
            summary = train_ood(
                ood_config(RECIPES[method], overrides), encoder=encoder, split=split, log=log.info
            )
            summary.pop("config", None)
            summary.update(
                method=method,
                dataset=name,
                known_classes=list(split.known_classes),
                test_size=len(split.test_texts),
                num_known=split.num_known,
                test_ood=int((split.test_labels == split.num_known).sum()),
            )
            runs.append(summary)
            if store is not None:  # one line per finished run: a crash loses one run at most
                with store.open("a") as handle:
                    handle.write(json.dumps(summary, default=str) + "\n")
    return runs


#: the fine-tuned recipes' batch (``_finetune_base.yaml``: ``train.batch_size``,
#: class-balanced, the last incomplete batch dropped): a fine-tuned run takes
#: ``train // 8`` steps per epoch, one stored loss per epoch
FINETUNE_BATCH = 8


def draw_disagreements(run: dict[str, Any], split: Any) -> list[str]:
    """The fields of a stored run that its known classes decide, each compared with
    ``split`` (the draw recomputed from the run's dataset, known ratio and seed): the
    names of those that disagree (none: the draw is the run's).

    ``num_known``, ``test_size``, ``test_ood`` (the test texts of unknown classes),
    ``reject_all`` (the floor's metrics), ``dev_accuracy`` (a multiple of 100 / the
    known-class dev size) and, for a fine-tuned run, ``steps`` (epochs x train // 8).
    """
    k = split.num_known
    bad = [
        key
        for key, value in (
            ("num_known", k),
            ("test_size", len(split.test_texts)),
            ("test_ood", int((split.test_labels == k).sum())),
        )
        if run.get(key) != value
    ]
    floor = reject_all_metrics(split.test_labels, k)
    stored = run.get("reject_all", {})
    if set(stored) != set(floor) or any(
        (floor[key] is None) != (value is None)
        or (value is not None and abs(float(floor[key]) - float(value)) > 1e-9)
        for key, value in stored.items()
    ):
        bad.append("reject_all")
    correct = float(run["dev_accuracy"]) * len(split.dev_labels) / 100
    if abs(correct - round(correct)) > 1e-6:
        bad.append("dev_accuracy")
    if run.get("steps") and run.get("losses"):
        if run["steps"] != len(run["losses"]) * (len(split.train_labels) // FINETUNE_BATCH):
            bad.append("steps")
    return bad


def backfill_known_classes(path: Path, root: str | None = None) -> tuple[int, list[str]]:
    """Add ``known_classes`` to every run of a store that lacks it: the draw this
    benchmark (and ``ood_finetune.py``) made, :func:`open_intent_split` with the run's
    dataset, known ratio and seed, recomputed.  A run whose recorded fields disagree with
    the draw (:func:`draw_disagreements`), or whose line would not be written back
    unchanged but for the new field, is left as it is and listed.  Every other field,
    the order of the fields and the order of the runs are kept; the file is replaced
    atomically.  Returns the number of runs filled and the runs left."""
    lines = path.read_text().splitlines()
    data: dict[str, Any] = {}
    out, filled, left = [], 0, []
    for number, line in enumerate(lines, 1):
        run = json.loads(line) if line.strip() else None
        if run is None or "known_classes" in run:
            out.append(line)
            continue
        name = str(run["dataset"])
        if name not in data:
            data[name] = load_intent_dataset(name, root)
        split = open_intent_split(data[name], float(run["known_ratio"]), int(run["split_seed"]))
        bad = draw_disagreements(run, split)
        if json.dumps(run, default=str) != line:
            bad.append("the line (not written back unchanged)")
        if bad:
            left.append(f"{path} line {number} ({', '.join(map(str, run_key(run)))}): {bad}")
            out.append(line)
            continue
        out.append(json.dumps({**run, "known_classes": list(split.known_classes)}))
        filled += 1
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("\n".join(out) + "\n")
    tmp.replace(path)
    return filled, left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), help="NAME:KNOWN_RATIO")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--root", default=None, help="data root (default: SPACL_DATA_DIR)")
    parser.add_argument("--set", nargs="*", default=[], help="extra overrides (key=value)")
    parser.add_argument("--store", default=None, help="append every finished run here (JSONL)")
    parser.add_argument(
        "--backfill-known-classes",
        nargs="+",
        default=None,
        metavar="STORE",
        help="add known_classes to the stored runs that lack it (recomputed, checked)",
    )
    parser.add_argument(
        "--render",
        nargs="+",
        default=None,
        help="only render ood.md from these run stores (no training)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    if args.backfill_known_classes:
        unresolved = []
        for store in args.backfill_known_classes:
            filled, left = backfill_known_classes(Path(store), args.root)
            log.info("%s: known_classes added to %d runs, %d left", store, filled, len(left))
            unresolved += left
        for line in unresolved:
            log.warning("left: %s", line)
        return 1 if unresolved else 0
    if args.render:
        runs = [r for path in args.render for r in read_store(path)]
        meta: dict[str, Any] = {"embed_seconds": None, "encoded": None}
        meta["planned"] = {"configs": args.configs, "methods": args.methods, "seeds": args.seeds}
    else:
        encoder, cache = MiniLMEncoder(device="auto"), EmbeddingCache()
        start = time.perf_counter()
        configs = [parse_config(c) for c in args.configs]
        for name in dict.fromkeys(n for n, _ in configs):
            cache.embed(
                encoder, [t for s in load_intent_dataset(name, args.root).values() for t in s.texts]
            )
        meta = {"embed_seconds": time.perf_counter() - start, "encoded": cache.encoded}
        store = Path(args.store) if args.store else None
        runs = []
        for name, ratio in configs:
            runs += run_config(
                name, ratio, args.seeds, args.methods, args.root, args.set, encoder, store
            )
        if store is not None:  # the table shows every run of the store
            runs = read_store(store)
        meta["planned"] = {"configs": args.configs, "methods": args.methods, "seeds": args.seeds}
    path = write_result(
        "ood",
        header("Open-intent detection: StackOverflow, BANKING77, CLINC150-oos")
        + "\n"
        + render(runs, meta),
    )
    log.info("wrote %s", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
