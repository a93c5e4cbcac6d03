"""Open-intent detection on StackOverflow (25% known) with all-MiniLM-L6-v2 fine-tuned.

Issue 11, item 6b: the SPACL paper fine-tunes the encoder (Adam, lr 1e-5, batch 8).  On
a CPU only the top ``--trainable-layers`` transformer layers are fine-tuned: the
frozen bottom layers' token states are computed once per text and cached in memory
(:mod:`spacl.tasks.text_finetune`); each step runs only the trainable layers.
Views: the same text through the trainable layers ``V`` times, view 0 in eval mode,
the others with dropout on (SimCSE-style); every method sees the same views, steps
and initial weights.  Methods: SPACL (supervised, ``positive_pool="instance_class"``),
SupCon, cross-entropy (linear classifier, discarded after training).

The open-set decision is the frozen benchmark's (``benchmarks/ood.py``,
:func:`spacl.tasks.text_decision.select_rule`): nearest class centre with a
rejection threshold, the rule chosen per run on a simulated open split of dev only;
its auxiliary "head" is here an auxiliary fine-tune of the same budget on the kept
classes.  Rows beside them: ``reject-all``, ``frozen`` (the encoder not fine-tuned,
run here through :func:`spacl.tasks.text.train_ood`) and the frozen-encoder
heads quoted from ``benchmarks/results/ood_runs/stackoverflow_25_50.json`` (same
splits and seeds).

    python benchmarks/ood_finetune.py --seeds 0 --epochs 3 \
        --json benchmarks/results/ood_finetune_runs.json        # the committed run, ~26 min
    python benchmarks/ood_finetune.py --render benchmarks/results/ood_finetune_runs.json
    python benchmarks/ood_finetune.py --seeds 0 --max-steps 3 --no-write   # smoke, ~3 min
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import header, write_result
from spacl.data.text import OpenIntentSplit, load_intent_dataset, open_intent_split
from spacl.evaluate.ood import open_intent_metrics
from spacl.models.text import MiniLMEncoder, _load_sentence_transformer
from spacl.tasks.text import ood_config, train_ood
from spacl.tasks.text_decision import SELECTION_CRITERION, nearest_auroc, select_rule
from spacl.tasks.text_finetune import (
    FINETUNE_OBJECTIVES,
    FinetuneSettings,
    TopLayers,
    bottom_states,
    embed_states,
    finetune,
)

log = logging.getLogger("benchmarks.ood_finetune")

REPO = Path(__file__).resolve().parents[1]
FROZEN_RECIPE = REPO / "configs" / "text" / "stackoverflow_ce.yaml"
FROZEN_RUNS = REPO / "benchmarks" / "results" / "ood_runs" / "stackoverflow_25_50.json"
DATASET, RATIO = "stackoverflow", 0.25
METRICS = ("f1_ood", "f1_ind", "macro_f1", "auroc", "accuracy")
HEADS = ("F1-OOD", "F1-IND", "macro-F1 (K+1)", "AUROC", "accuracy")


class StateCache:
    """Bottom-layer token states of every text seen, computed once (in memory)."""

    def __init__(self, model: Any, tokenize: Any, num_frozen: int) -> None:
        self.model, self.tokenize, self.num_frozen = model, tokenize, num_frozen
        self.table: dict[str, torch.Tensor] = {}
        self.seconds = 0.0

    def get(self, texts: list[str]) -> list[torch.Tensor]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.table))
        if missing:
            start = time.perf_counter()
            states = bottom_states(self.model, self.tokenize, missing, self.num_frozen)
            self.table.update(zip(missing, states, strict=True))
            self.seconds += time.perf_counter() - start
            log.info("bottom states of %d texts: %.0fs", len(missing), self.seconds)
        return [self.table[t] for t in texts]


def decision_settings() -> Any:
    """The frozen benchmark's decision settings (``ood.*`` of its recipe)."""
    return ood_config(FROZEN_RECIPE, ["ood.method=select"]).ood


def finetuned_run(
    method: str,
    split: OpenIntentSplit,
    states: list[torch.Tensor],
    initial: TopLayers,
    args: argparse.Namespace,
    seed: int,
) -> dict[str, Any]:
    """Fine-tune with ``method``, then the frozen benchmark's dev-chosen decision rule."""
    start = time.perf_counter()
    settings = FinetuneSettings(
        method,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        temperature=args.temperature,
        num_views=args.views,
        seed=seed,
        max_steps=args.max_steps,
    )
    a, b = len(split.train_texts), len(split.train_texts) + len(split.dev_texts)
    train_idx, dev_idx, test_idx = torch.arange(a), torch.arange(a, b), torch.arange(b, len(states))
    steps = [0]

    def tick(step: int, loss: float) -> None:
        steps[0] += 1
        if steps[0] % 200 == 0:
            elapsed = time.perf_counter() - start
            log.info(
                "  %s seed %d: %d steps, loss %.4f, %.0fs", method, seed, steps[0], loss, elapsed
            )

    def train_head(x: torch.Tensor, y: torch.Tensor, n: int) -> torch.nn.Module:
        return finetune(initial, [states[int(i)] for i in x], y, n, settings, on_step=tick)[0]

    def project(head: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        assert isinstance(head, TopLayers)
        return embed_states(head, [states[int(i)] for i in x]).double()

    k = split.num_known
    top, losses = finetune(
        initial, [states[int(i)] for i in train_idx], split.train_labels, k, settings, on_step=tick
    )
    main_steps = steps[0]
    features = tuple(project(top, idx) for idx in (train_idx, dev_idx, test_idx))
    ood = decision_settings()
    clf, extra = select_rule(
        split,
        (train_idx, dev_idx),
        features,
        fraction=float(ood.held_out_fraction),
        quantile=float(ood.quantile),
        seed=seed,
        train_head=train_head,
        project=project,
    )
    test_z = features[2]
    test: dict[str, Any] = dict(open_intent_metrics(split.test_labels, clf.predict(test_z), k))
    test["auroc"] = nearest_auroc(clf, test_z, split.test_labels, k)
    dev_closed = (clf.distances(features[1]).argmin(1) == split.dev_labels).double().mean()
    run = {
        "method": method,
        "split_seed": seed,
        "test": test,
        "dev_accuracy": 100.0 * float(dev_closed),
        **extra,
        "losses": losses,
        "main_steps": main_steps,
        "aux_steps": steps[0] - main_steps,
        "seconds": time.perf_counter() - start,
    }
    log.info(
        "%s seed %d: F1-OOD %.2f F1-IND %.2f macro-F1 %.2f AUROC %.2f (rule %s, %.0fs)",
        method, seed, test["f1_ood"], test["f1_ind"], test["macro_f1"], test["auroc"] or 0.0,
        run["rule"], run["seconds"],
    )  # fmt: skip
    return run


def frozen_run(split: OpenIntentSplit, encoder: MiniLMEncoder, seed: int) -> dict[str, Any]:
    """The encoder not fine-tuned, through the frozen benchmark's own pipeline."""
    overrides = [
        f"name={DATASET}-frozen",
        f"data.name={DATASET}",
        f"data.known_ratio={RATIO}",
        f"data.split_seed={seed}",
        f"train.seed={seed}",
        "ood.method=select",
        "objective.name=frozen",
    ]
    summary = train_ood(ood_config(FROZEN_RECIPE, overrides), encoder=encoder, split=split)
    summary.pop("config", None)
    summary.pop("known_classes", None)
    summary["method"] = "frozen"
    return summary


def reject_all(split: OpenIntentSplit) -> dict[str, Any]:
    """Every test input predicted OOD (AUROC 50 by definition: a constant score)."""
    k = split.num_known
    pred = torch.full_like(split.test_labels, k)
    test: dict[str, Any] = dict(open_intent_metrics(split.test_labels, pred, k))
    test["auroc"] = 50.0
    return {"method": "reject-all", "split_seed": split.seed, "test": test}


def quoted_heads(seeds: list[int]) -> list[dict[str, Any]]:
    """Frozen-encoder head runs of ``benchmarks/ood.py`` on the same splits and seeds."""
    if not FROZEN_RUNS.is_file():
        return []
    rows = []
    for run in json.loads(FROZEN_RUNS.read_text()):
        if (
            run.get("dataset") == DATASET
            and float(run.get("known_ratio", -1)) == RATIO
            and run.get("split_seed") in seeds
            and run.get("method") in FINETUNE_OBJECTIVES
        ):
            rows.append({**run, "method": f"frozen encoder + {run['method']} head"})
    return rows


def _cell(values: list[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def _caveats(runs: list[dict[str, Any]], seeds: list[int]) -> list[str]:
    """Facts a reader needs beside the table (computed from the runs, not judged)."""
    out = []
    frozen = [r for r in runs if r["method"] == "frozen" and "rules_test" in r]
    for r in frozen:
        seed = r["split_seed"]
        tuned = sorted(
            {str(t["rule"]) for t in runs if "main_steps" in t and t["split_seed"] == seed}
        )
        if tuned and r.get("rule") not in tuned:
            other = ", ".join(
                f"{rule} {r['rules_test'][rule]['macro_f1']:.2f}"
                for rule in tuned
                if rule in r["rules_test"]
            )
            out.append(
                f"- Seed {seed}: the dev criterion chose {r['rule']} for `frozen` and "
                f"{' / '.join(tuned)} for the fine-tuned runs; `frozen`'s test macro-F1 with "
                f"the latter: {other} (second table; not used for selection)."
            )
    spacl = [r for r in runs if r["method"] == "spacl" and r.get("losses")]
    if spacl:
        top = max(max(r["losses"]) for r in spacl)
        out.append(
            f"- SPACL's training loss stays at or below {top:.4f} from the first epoch: its "
            "positives are the instance's own dropout views (nearly the same embedding) and "
            "same-class examples are removed from its negatives, so the loss is near zero "
            "(Adam still takes lr-sized steps along its gradient)."
        )
    if FROZEN_RUNS.is_file() and len(seeds) < 3:
        quoted = [
            r["test"]["macro_f1"]
            for r in json.loads(FROZEN_RUNS.read_text())
            if r.get("dataset") == DATASET
            and float(r.get("known_ratio", -1)) == RATIO
            and r.get("method") == "supcon"
        ]
        if quoted:
            out.append(
                f"- {len(seeds)} seed(s) only: no noise estimate, no significance test.  For "
                f"scale, the frozen-encoder supcon head's test macro-F1 over the {len(quoted)} "
                f"seeds of benchmarks/ood.py at this configuration ranges "
                f"{min(quoted):.2f}-{max(quoted):.2f} (each seed draws other known classes)."
            )
    return ["Notes:", "", *out] if out else []


def render(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    seeds = meta["seeds"]
    order = list(dict.fromkeys(r["method"] for r in runs))
    lines = [
        f"Data: StackOverflow (TEXTOIR split), {RATIO:.0%} known classes "
        f"(K = {meta['num_known']}; train {meta['train_size']}, dev {meta['dev_size']}, "
        f"test {meta['test_size']} of which {meta['test_ood']} OOD), seeds "
        f"{', '.join(map(str, seeds))} (a seed picks the known classes and seeds the "
        "fine-tuning); "
        + ("one seed: single values, no spread. " if len(seeds) == 1 else "mean ± sample std. ")
        + "Percent.",
        "",
        f"**Fine-tuned**: all-MiniLM-L6-v2 with only its top {meta['trainable_layers']} of 6 "
        f"transformer layers trainable ({meta['trainable_params']:,} parameters; the bottom "
        f"{6 - meta['trainable_layers']} layers and the embeddings frozen, their token states "
        "computed once per text and cached in memory: a CPU budget, not the paper's full "
        f"fine-tune).  Adam lr {meta['lr']:g} on every trainable parameter, batch "
        f"{meta['batch_size']} instances x {meta['views']} views (view 0 = the text in eval "
        "mode, the others dropout views of the trainable layers, SimCSE-style), "
        f"{meta['epochs_text']}, the same steps, views order and initial weights for every "
        f"method.  Temperature {meta['temperature']:g} for SPACL and SupCon, **not tuned**.  "
        "SPACL: `SPACLLoss(positive_pool='instance_class', detach_candidates=False)`, "
        "defaults otherwise (anchors from the pool: gradient through every view); "
        "`spacl_selected`: the same with `positive_mode='mean', anchor_set='every_view'`, "
        "the supervised setting `spacl reproduce spacl` chose on validation; "
        "cross-entropy: a linear classifier on the unnormalised mean-pooled embedding, "
        "discarded after training.  Features of the decision: the fine-tuned encoder's "
        "L2-normalised embeddings (no projection head).",
        "",
        "**Decision rule, chosen without test data** (the frozen benchmark's, "
        "`text_decision.select_rule`): nearest class centre (cosine) with a rejection "
        f"threshold; criterion fixed in advance: {SELECTION_CRITERION}  For a fine-tuned "
        "method the auxiliary head of that criterion is an auxiliary fine-tune of the same "
        "budget (same epochs) on the kept classes.  AUROC ranks test inputs by their "
        "nearest-centre distance.",
        "",
        "Rows: `reject-all` predicts OOD for every input; `frozen` = the raw (not "
        "fine-tuned) embeddings, run here by `spacl.tasks.text.train_ood`; "
        "`frozen encoder + X head` rows are quoted from "
        "`benchmarks/results/ood_runs/stackoverflow_25_50.json` (benchmarks/ood.py: a "
        "384-512-128 MLP head trained 10 epochs at Adam 1e-3, batch 256, on the frozen "
        "embeddings), same splits and seeds.",
        "",
        "| method | " + " | ".join(HEADS) + " | rule chosen on dev | train loss per epoch |",
        "|---|" + "---|" * (len(HEADS) + 2),
    ]
    for method in order:
        sel = [r for r in runs if r["method"] == method]
        rules = [str(r["rule"]) for r in sel if "rule" in r]
        chosen = ", ".join(f"{rule} x{rules.count(rule)}" for rule in dict.fromkeys(rules)) or "—"
        losses = (
            "; ".join(", ".join(f"{v:.4f}" for v in r["losses"]) for r in sel)
            if "main_steps" in sel[0]
            else "—"
        )
        cells = [
            _cell([float(r["test"][m]) for r in sel if r["test"].get(m) is not None])
            for m in METRICS
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {chosen} | {losses} |")
    tuned = [r for r in runs if "main_steps" in r]
    with_rules = [r for r in runs if r["method"] == "frozen" or "main_steps" in r]
    if tuned:
        lines += [
            "",
            "Every decision rule on test, macro-F1 (**not used for selection**; in brackets "
            "the dev selection score):",
            "",
        ]
        rule_names = list(tuned[0]["rules_test"])
        lines.append("| method | " + " | ".join(rule_names) + " |")
        lines.append("|---|" + "---|" * len(rule_names))
        for method in dict.fromkeys(r["method"] for r in with_rules):
            sel = [r for r in with_rules if r["method"] == method]
            cells = []
            for rule in rule_names:
                test = _cell([r["rules_test"][rule]["macro_f1"] for r in sel])
                dev = [r["selection"][rule] for r in sel if rule in r.get("selection", {})]
                cells.append(f"{test} (dev {_cell(dev)})" if dev else test)
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += ["", *_caveats(runs, seeds)]
    times = "; ".join(
        f"{m} {statistics.mean(r['seconds'] for r in tuned if r['method'] == m):.0f}s "
        f"({statistics.mean(r['main_steps'] for r in tuned if r['method'] == m):.0f} + "
        f"{statistics.mean(r['aux_steps'] for r in tuned if r['method'] == m):.0f} aux steps)"
        for m in dict.fromkeys(r["method"] for r in tuned)
    )
    lines += [
        "",
        f"Wall time: {meta['wall_seconds']:.0f}s in all (torch threads: {meta['threads']}); "
        f"bottom-layer states {meta['state_seconds']:.0f}s for {meta['texts']} texts; per "
        f"fine-tuned run (main + auxiliary fine-tune, embedding, rule choice): {times}.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=list(FINETUNE_OBJECTIVES),
                        choices=list(FINETUNE_OBJECTIVES))  # fmt: skip
    parser.add_argument("--trainable-layers", type=int, default=2)
    parser.add_argument("--views", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--temperature", type=float, default=0.1)
    parser.add_argument("--max-steps", type=int, default=None, help="cap steps (smoke runs)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--root", default=None, help="data root (default: SPACL_DATA_DIR)")
    parser.add_argument("--json", default=None, help="write every run's summary here")
    parser.add_argument("--no-write", action="store_true", help="do not write the results file")
    parser.add_argument("--render", default=None, help="only re-render from this --json file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        text = saved["header"] + "\n" + render(saved["runs"], saved["meta"])
        log.info("wrote %s", write_result("ood_finetune", text))
        return 0
    torch.set_num_threads(args.threads)
    wall = time.perf_counter()
    st = _load_sentence_transformer("cpu")
    model = st[0].auto_model
    layers = list(model.encoder.layer)
    if not 1 <= args.trainable_layers <= len(layers):
        raise SystemExit(f"--trainable-layers must be in [1, {len(layers)}]")
    num_frozen = len(layers) - args.trainable_layers
    initial = TopLayers(layers[num_frozen:])
    cache = StateCache(model, st.preprocess, num_frozen)
    encoder = MiniLMEncoder(device="cpu")
    data = load_intent_dataset(DATASET, args.root)
    runs: list[dict[str, Any]] = []
    split = None
    for seed in args.seeds:
        split = open_intent_split(data, RATIO, seed)
        states = cache.get(split.train_texts + split.dev_texts + split.test_texts)
        runs.append(reject_all(split))
        runs.append(frozen_run(split, encoder, seed))
        for method in args.methods:
            runs.append(finetuned_run(method, split, states, initial, args, seed))
            if args.json:  # after every run: a partial file survives a crash
                Path(args.json).write_text(json.dumps({"runs": runs}, default=str) + "\n")
    assert split is not None
    runs += quoted_heads(args.seeds)
    steps_per_epoch = len(split.train_texts) // args.batch_size
    meta = {
        "seeds": args.seeds,
        "num_known": split.num_known,
        "train_size": len(split.train_texts),
        "dev_size": len(split.dev_texts),
        "test_size": len(split.test_texts),
        "test_ood": int((split.test_labels == split.num_known).sum()),
        "trainable_layers": args.trainable_layers,
        "trainable_params": sum(p.numel() for p in initial.parameters()),
        "lr": args.lr,
        "batch_size": args.batch_size,
        "views": args.views,
        "temperature": args.temperature,
        "epochs_text": (
            f"{args.epochs} epoch(s) (about {steps_per_epoch} steps per epoch on seed "
            f"{args.seeds[-1]}'s train split)"
            if args.max_steps is None
            else f"at most {args.max_steps} steps (a smoke run, not a result)"
        ),
        "wall_seconds": time.perf_counter() - wall,
        "threads": torch.get_num_threads(),
        "state_seconds": cache.seconds,
        "texts": len(cache.table),
    }
    head = header("Open-intent detection, StackOverflow 25% known: MiniLM fine-tuned")
    if args.json:
        saved = {"header": head, "runs": runs, "meta": meta}
        Path(args.json).write_text(json.dumps(saved, default=str) + "\n")
    text = head + "\n" + render(runs, meta)
    if args.no_write:
        print(text)
    else:
        log.info("wrote %s", write_result("ood_finetune", text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
