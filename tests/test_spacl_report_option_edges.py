"""SPACL's ordered option grid at an edge (issue 39): the best generator count K_adv of
the one-factor round is flagged where it is (or ties) the lowest or highest count, with
ties broken as the option selection breaks them; an interior best is not flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spacl.studies import spacl_bench
from spacl.studies.spacl_bench.option_edges import (
    LABEL,
    chosen_counts,
    generator_curve,
    option_edge,
    option_edges,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "spacl"

BASE = "SPACL[cut=similarity, grad=shared, gen=1]"


def _setting(scores: dict[str, float], chosen: str = "gradient=ema", best: float = 99.0) -> Any:
    """A setting's metrics: the base (K_adv = 1), the generator options (``cond1``
    included, off the order), and a chosen option ``chosen`` scoring ``best``."""
    options: dict[str, Any] = {}
    for count, score in scores.items():
        name = BASE if count == "1" else BASE.replace("gen=1", f"gen={count}")
        change = "base" if count == "1" else f"generator={count}"
        options[name] = {"change": change, "val": {"ncc": score}, "test": {"ncc": 0.0}}
    selected = next((n for n, o in options.items() if o["change"] == chosen), None)
    if selected is None:
        selected = "SPACL[cut=similarity, grad=ema, gen=1]"
        options[selected] = {"change": chosen, "val": {"ncc": best}, "test": {"ncc": 0.0}}
    return {"criterion": "ncc", "options": options, "selected_name": selected}


def _metrics() -> dict[str, Any]:
    return {
        "benches": {
            "b": {
                # still rising at the top (CLINC150 self-supervised's numbers)
                "top": _setting({"0": 87.38, "1": 87.33, "8": 87.47, "32": 87.64}, best=87.82),
                "zero": _setting({"0": 94.0, "1": 93.625, "8": 93.875, "32": 93.75}, best=94.5),
                # 8 ties 32: the earlier option (8) is the best, tied with the top
                "tied": _setting({"0": 90.0, "1": 91.0, "8": 91.5, "32": 91.5}, best=92.0),
                # the base ties 0: the base is the best, tied with the bottom
                "base_tie": _setting({"0": 91.0, "1": 91.0, "8": 90.0, "32": 89.0}, best=91.0),
                # the counter-example: an interior best; cond1 (off the order) scores
                # highest and must not count
                "inside": _setting(
                    {"0": 90.0, "1": 92.0, "8": 91.0, "32": 89.0, "cond1": 99.0}, best=93.0
                ),
                # the chosen option is the edge count itself
                "chosen": _setting(
                    {"0": 80.0, "1": 81.0, "8": 82.0, "32": 83.0}, chosen="generator=32"
                ),
            }
        }
    }


def test_the_best_generator_count_at_an_edge_is_flagged_and_an_interior_one_is_not() -> None:
    m = _metrics()
    found, checked = option_edges(m)
    assert checked == 6
    got = {o.where: (o.best, o.edge) for o in found}
    assert got == {
        "b top": ("32", "highest"),
        "b zero": ("0", "lowest"),
        "b tied": ("8", "ties the highest (32)"),
        "b base_tie": ("1", "ties the lowest (0)"),
        "b chosen": ("32", "highest"),
    }
    assert option_edge("b inside", m["benches"]["b"]["inside"]) is None
    # cond1 is no count: the curve holds the four ordered counts only, ascending
    assert list(generator_curve(m["benches"]["b"]["inside"])) == ["0", "1", "8", "32"]


def test_each_flag_says_why_the_grid_did_not_grow_and_how_the_edge_scored() -> None:
    by = {o.where: o for o in option_edges(_metrics())[0]}
    top = by["b top"]
    assert top.curve_text() == "0: 87.38, 1: 87.33, 8: 87.47, 32: 87.64"
    assert "option grids are one one-factor round" in top.why()
    assert "`gradient=ema`, scored 87.82" in top.why()
    assert top.why().endswith("K_adv = 32 (87.64) below it")
    zero = by["b zero"].why()
    assert zero.startswith("0 generators is the smallest possible count: nothing lies beyond")
    assert "option grids" not in zero
    assert by["b base_tie"].why().endswith("K_adv = 1 (91.00) tied with it")
    assert by["b chosen"].why().endswith("the chosen option is this count itself (83.00)")


def test_a_setting_with_too_few_counts_is_not_checked() -> None:
    m = {"benches": {"b": {"s": _setting({"1": 90.0, "32": 95.0})}}}
    assert option_edges(m) == ([], 0)


def test_the_regenerated_report_flags_the_committed_k_adv_edges(tmp_path: Path) -> None:
    """On the committed results: MNIST-5k weak and CLINC150 supervised are best at 0
    generators, CLINC150 self-supervised at 32 (still rising); the other two settings
    are best at the base (1) and not flagged.  The section's first sentence names the
    option grid, and the header's grid-edge line counts the three."""
    m = json.loads((RESULTS / "results.json").read_text())["metrics"]
    found, checked = option_edges(m)
    assert checked == 5
    assert [(o.where, o.best, o.edge) for o in found] == [
        ("mnist5k weak", "0", "lowest"),
        ("clinc150 supervised", "0", "lowest"),
        ("clinc150 self-supervised", "32", "highest"),
    ]
    assert set(chosen_counts(m).values()) == {"1"}
    spacl_bench.regenerate(RESULTS, tmp_path)
    report = (tmp_path / "report.md").read_text()
    section = report.split("## Choices at a grid edge (flagged)")[1].split("\n## ")[0]
    first = section.strip().splitlines()[0]
    assert first.startswith("The check covers every ordered grid a choice is made on")
    assert "SPACL's ordered option grid, K_adv (the generator count: 0, 1 (the base)" in first
    assert "in 3 of the 5 settings that swept K_adv its best count is at or tied" in first
    assert (
        f"| clinc150 self-supervised | {LABEL} | 32 | highest | "
        "0: 87.38, 1: 87.33, 8: 87.47, 32: 87.64 |"
    ) in section
    assert f"| mnist5k weak | {LABEL} | 0 | lowest |" in section
    assert f"| mnist5k supervised | {LABEL} |" not in section  # best at the base: inside
    stamp = next(x for x in report.splitlines() if x.startswith("- Grid edges:"))
    assert (
        f"3 of 5 {LABEL} option grids with their best count at or tied with an edge "
        "(mnist5k weak: 0, lowest; clinc150 supervised: 0, lowest; clinc150 "
        "self-supervised: 32, highest)"
    ) in stamp
