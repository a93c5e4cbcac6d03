"""Open-intent detection on StackOverflow, BANKING77 and CLINC150-oos: SPACL vs baselines.

One frozen encoder (all-MiniLM-L6-v2, cached embeddings) and a projection head trained
by each objective's recipe (``configs/text/stackoverflow_{spacl,supcon,ce}.yaml``, the
dataset overridden); ``frozen`` is the raw embeddings, ``reject-all`` predicts OOD for
every input.  Configurations: StackOverflow and BANKING77 at 25/50/75% known classes
(TEXTOIR protocol), CLINC150 with its real out-of-scope queries (every class known, the
``oos`` test queries are OOD).  Seed ``s`` picks the known classes and initialises the
heads.

No choice reads test data: the decision rule of every run is chosen on a simulated open
split of dev (``ood.method=select``, criterion in :mod:`spacl.tasks.text_decision`);
every rule's test numbers are shown too, marked "not used for selection".  Targets are
margins over the frozen baseline, decided by Welch's t-test at 5%
(:func:`spacl.studies.common.compare`).

    python benchmarks/ood.py --json benchmarks/results/ood_runs.json   # every config
    python benchmarks/ood.py --configs banking:0.25 --seeds 0           # one config
    python benchmarks/ood.py --render benchmarks/results/ood_runs.json  # re-render only
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
from spacl.models.text import EmbeddingCache, MiniLMEncoder
from spacl.tasks.text import ood_config, train_ood

log = logging.getLogger("benchmarks.ood")

REPO = Path(__file__).resolve().parents[1]
RECIPES = {
    "spacl": REPO / "configs" / "text" / "stackoverflow_spacl.yaml",
    "supcon": REPO / "configs" / "text" / "stackoverflow_supcon.yaml",
    "cross_entropy": REPO / "configs" / "text" / "stackoverflow_ce.yaml",
    "frozen": REPO / "configs" / "text" / "stackoverflow_ce.yaml",  # objective overridden
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


def run_config(
    name: str,
    ratio: float,
    seeds: list[int],
    methods: list[str],
    root: str | None,
    extra: list[str],
    encoder: MiniLMEncoder,
) -> list[dict[str, Any]]:
    data = load_intent_dataset(name, root)
    runs = []
    for seed in seeds:
        split = open_intent_split(data, ratio, seed)
        for method in methods:
            overrides = [
                f"name={name}-{method}",
                f"data.name={name}",
                f"data.known_ratio={ratio}",
                f"data.split_seed={seed}",
                f"train.seed={seed}",
                "ood.method=select",
                *extra,
            ]
            if method == "frozen":
                overrides.append("objective.name=frozen")
            summary = train_ood(
                ood_config(RECIPES[method], overrides), encoder=encoder, split=split, log=log.info
            )
            summary.pop("config", None)
            summary.pop("known_classes", None)
            summary.update(
                method=method,
                dataset=name,
                test_size=len(split.test_texts),
                num_known=split.num_known,
                test_ood=int((split.test_labels == split.num_known).sum()),
            )
            runs.append(summary)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), help="NAME:KNOWN_RATIO")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--root", default=None, help="data root (default: SPACL_DATA_DIR)")
    parser.add_argument("--set", nargs="*", default=[], help="extra overrides (key=value)")
    parser.add_argument("--json", default=None, help="write every run's summary here")
    parser.add_argument(
        "--render",
        nargs="+",
        default=None,
        help="only render ood.md from these --json files (no training)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    if args.render:
        runs = [r for path in args.render for r in json.loads(Path(path).read_text())]
        meta: dict[str, Any] = {"embed_seconds": None, "encoded": None}
    else:
        encoder, cache = MiniLMEncoder(device="auto"), EmbeddingCache()
        start = time.perf_counter()
        configs = [parse_config(c) for c in args.configs]
        for name in dict.fromkeys(n for n, _ in configs):
            cache.embed(
                encoder, [t for s in load_intent_dataset(name, args.root).values() for t in s.texts]
            )
        meta = {"embed_seconds": time.perf_counter() - start, "encoded": cache.encoded}
        runs = []
        for name, ratio in configs:
            runs += run_config(name, ratio, args.seeds, args.methods, args.root, args.set, encoder)
            if args.json:  # after every configuration: a partial file survives a crash
                Path(args.json).write_text(json.dumps(runs, indent=1, default=str) + "\n")
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
