"""The SPACL report renders the per-arm averages stored in results.json's ``metrics``; they
must be the means of its per-run rows (``runs``), for every arm, so that a stale average
cannot be rendered (issue 39).  Tolerance: float rounding only."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "spacl" / "results.json"
#: float rounding of a mean of a few percentages (the stored numbers are sums / n * 100)
TOL = 1e-9


def _row(runs: Sequence[Mapping[str, Any]], key: tuple[str, str, str, float, int]) -> Any:
    bench, setting, method, tau, seed = key
    hits = [
        r
        for r in runs
        if (r["bench"], r["setting"], r["method"], r["seed"]) == (bench, setting, method, seed)
        and math.isclose(float(r["tau"]), float(tau))
    ]
    assert len(hits) == 1, f"{key}: {len(hits)} run rows"
    return hits[0]


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _groups(m: Mapping[str, Any]) -> Iterator[tuple[str, str, str, str, Mapping[str, Any]]]:
    """Every over-seeds arm the report renders: ``(label, bench, setting, method, group)``."""
    for bench, sets in m["benches"].items():
        for setting, g in sets.items():
            arms = {name: (name, grp) for name, grp in g["baselines"].items()}
            arms["SPACL base"] = (g["base_name"], g["spacl"]["base"])
            arms["SPACL selected"] = (g["selected_name"], g["spacl"]["selected"])
            arms |= {f"ablation {k}": (a["name"], a) for k, a in g["ablations"].items()}
            for label, (name, grp) in arms.items():
                yield f"{bench} {setting} {label}", bench, setting, name, grp
    bc = m["best_chance"]
    for part, arms_ in (("", bc["arms"]), (" grown", (bc.get("grown") or {}).get("arms", {}))):
        for name, grp in arms_.items():
            yield f"best chance{part} {name}", "best_chance", "supervised", name, grp


def stale(m: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every stored number that differs from the one recomputed from the run rows."""
    bad: list[str] = []
    checked = 0
    for label, bench, setting, name, grp in _groups(m):
        if not grp.get("seeds"):
            continue
        rows = [_row(runs, (bench, setting, name, grp["tau"], s)) for s in grp["seeds"]]
        for split in ("val", "test"):
            for metric, stored in grp[split].items():
                values = [100.0 * float(r[split][metric]) for r in rows]
                mean, std = _mean_std(values)
                checked += 1
                if any(abs(a - b) > TOL for a, b in zip(values, stored["values"], strict=True)):
                    bad.append(f"{label} {split} {metric}: values")
                if abs(mean - stored["mean"]) > TOL or abs(std - stored["std"]) > TOL:
                    bad.append(f"{label} {split} {metric}: mean {stored['mean']} vs {mean}")
        seconds = [r.get("seconds") for r in rows]
        if grp.get("seconds") is not None and not _same(grp["seconds"], seconds):
            bad.append(f"{label}: seconds")
        kept = [float(r["kept_fraction_end"]) for r in rows if r.get("kept_fraction_end")]
        if grp.get("kept_fraction_end") is not None and not _same(grp["kept_fraction_end"], kept):
            bad.append(f"{label}: kept fraction")
    assert checked > 0
    for bench, sets in m["benches"].items():
        for setting, g in sets.items():
            crit = g["criterion"]
            tau0 = g["spacl"]["base"]["tau"]
            for name, tune in g["tuning"].items():  # seed-0 validation per grid value
                for t, score in tune.items():
                    row = _row(runs, (bench, setting, name, float(t), 0))
                    if abs(100.0 * float(row["val"][crit]) - score) > TOL:
                        bad.append(f"{bench} {setting} {name} tuning {t}")
            for name, opt in g["options"].items():  # seed 0 at the base's temperature
                row = _row(runs, (bench, setting, name, tau0, 0))
                for split in ("val", "test"):
                    for metric, score in opt[split].items():
                        if abs(100.0 * float(row[split][metric]) - score) > TOL:
                            bad.append(f"{bench} {setting} option {name} {split} {metric}")
            for name, u in g["untrained"].items():
                row = _row(runs, (bench, setting, name, 0.0, 0))
                for split in ("val", "test"):
                    for metric, score in u[split].items():
                        if abs(100.0 * float(row[split][metric]) - score) > TOL:
                            bad.append(f"{bench} {setting} {name} {split} {metric}")
    bc = m["best_chance"]
    for part in (bc, bc.get("grown") or {}):
        for name, tune in (part.get("tuning") or {}).items():
            for t, score in tune.items():
                row = _row(runs, ("best_chance", "supervised", name, float(t), 0))
                if abs(100.0 * float(row["val"]["ncc"]) - score) > TOL:
                    bad.append(f"best chance {name} tuning {t}")
    for cut in bc["cut_by_tau"]:
        for key, name in (("ib", "SPACL IB"), ("ib_h", "SPACL IB+H")):
            seeds = range(len(cut[key]))
            rows = [_row(runs, ("best_chance", "supervised", name, cut["tau"], s)) for s in seeds]
            values = [100.0 * float(r["test"]["ncc"]) for r in rows]
            if any(abs(a - b) > TOL for a, b in zip(values, cut[key], strict=True)):
                bad.append(f"best chance cut x tau {cut['tau']} {key}")
    return bad


def _same(stored: Sequence[Any], recomputed: Sequence[Any]) -> bool:
    """Equal lists of per-run numbers; a missing one (``None``, or NaN) only equals a
    missing one."""

    def missing(x: Any) -> bool:
        return x is None or (isinstance(x, float) and math.isnan(x))

    return len(stored) == len(recomputed) and all(
        missing(a) and missing(b) if missing(a) or missing(b) else abs(float(a) - float(b)) <= TOL
        for a, b in zip(stored, recomputed, strict=True)
    )


def test_every_stored_average_is_the_mean_of_its_run_rows() -> None:
    results = json.loads(RESULTS.read_text())
    assert stale(results["metrics"], results["runs"]) == []


def test_a_stale_average_is_caught() -> None:
    """Counter-example: one arm's stored mean, one stored per-seed value, one option and
    one tuning score changed after the runs: each is named."""
    results = json.loads(RESULTS.read_text())
    m = copy.deepcopy(results["metrics"])
    g = m["benches"]["clinc150"]["self-supervised"]
    g["spacl"]["selected"]["test"]["ncc"]["mean"] += 0.01
    g["baselines"]["SimCLR"]["val"]["knn"]["values"][2] -= 0.05
    next(iter(g["options"].values()))["test"]["ncc"] += 0.1
    g["tuning"]["SimCLR"]["0.1"] += 0.1
    bad = stale(m, results["runs"])
    assert "clinc150 self-supervised SPACL selected test ncc: mean" in " ".join(bad)
    assert any(b.startswith("clinc150 self-supervised SimCLR val knn") for b in bad)
    assert any("option" in b for b in bad) and any("tuning 0.1" in b for b in bad)
