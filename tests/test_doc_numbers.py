"""Numbers quoted in README.md, docs/results.md and benchmarks/RESULTS.md come from
committed results files.

Two mechanisms:

- a row of the benchmarks/RESULTS.md index quotes numbers of the results file it links
  (``[results/x.md](results/x.md)``): every decimal number of its headline cell must be
  written in that file or in another results file the row links (rows listed in
  :data:`CHECKED_ROWS`);
- a block of README.md or docs/results.md between ``<!-- numbers from: FILE [FILE...] -->``
  and ``<!-- /numbers -->`` quotes numbers of those files (paths from the repository
  root): every decimal number in the block must be written in one of them.

README.md stays short (at most :data:`README_MAX_LINES` lines); every result lives in
docs/results.md, one numbers block per benchmark.

A number counts as written when the same digits stand in the file as a number (``0.4``
does not match inside ``10.45``).  Integers are not checked (counts, batch sizes, seeds).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS_INDEX = ROOT / "benchmarks" / "RESULTS.md"
README = ROOT / "README.md"
#: the documents whose ``numbers from`` blocks this test checks, and the fewest blocks each has
NUMBER_DOCS = {"README.md": 4, "docs/results.md": 8}
README_MAX_LINES = 150
#: RESULTS.md rows whose numbers this test checks (the others are checked by their owners)
CHECKED_ROWS = (
    "results/losses.md",
    "results/geometry.md",
    "results/ood.md",
    "results/spacl_overhead.md",
    "results/train_step.md",
    "results/gpu.md",
    "results/install_size.md",
    "results/demo_time.md",
    "results/kg.md",
    "../docs/results/open_intent/results.md",
)
LINKED = re.compile(r"\(results/(?P<name>[\w./-]+\.md)\)")
#: a decimal number; a full stop after it ends a sentence, a digit after that dot a version
DECIMAL = re.compile(r"(?<![\d.])\d+\.\d+(?!\d|\.\d)")
BLOCK = re.compile(r"<!-- numbers from: (?P<files>[^>]+?) -->(?P<body>.*?)<!-- /numbers -->", re.S)


def decimals(text: str) -> list[str]:
    """Every decimal number of ``text`` as written (``0.55``, ``92.4``)."""
    return DECIMAL.findall(text)


def missing(numbers: list[str], sources: list[str]) -> list[str]:
    written = {n for text in sources for n in decimals(text)}
    return sorted({n for n in numbers if n not in written})


def test_decimal_matching_is_whole_numbers_only() -> None:
    assert decimals("0.55 / 0.44x, 10.45%, v1.2.3 and 7") == ["0.55", "0.44", "10.45"]
    assert decimals("CE 92.97 / 93.39. Next") == ["92.97", "93.39"]
    assert missing(["0.4"], ["10.45 and 0.45"]) == ["0.4"]
    assert missing(["0.45"], ["10.45 and 0.45"]) == []


def _index_rows() -> dict[str, str]:
    rows = {}
    for line in RESULTS_INDEX.read_text().splitlines():
        match = re.match(r"\| \[([\w./]+\.md)\]\([\w./]+\.md\) \|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


@pytest.mark.parametrize("row", CHECKED_ROWS)
def test_results_index_numbers_are_in_the_linked_file(row: str) -> None:
    rows = _index_rows()
    assert row in rows, f"benchmarks/RESULTS.md has no row linking {row}"
    linked = {row} | {f"results/{m['name']}" for m in LINKED.finditer(rows[row])}
    sources = [(ROOT / "benchmarks" / name).read_text() for name in sorted(linked)]
    bad = missing(decimals(rows[row]), sources)
    assert not bad, f"RESULTS.md row {row} quotes {bad}, written in none of {sorted(linked)}"


@pytest.mark.parametrize("doc", sorted(NUMBER_DOCS))
def test_number_blocks_come_from_their_files(doc: str) -> None:
    text = (ROOT / doc).read_text()
    blocks = list(BLOCK.finditer(text))
    assert len(blocks) >= NUMBER_DOCS[doc], (
        f"{doc} has {len(blocks)} <!-- numbers from: ... --> blocks, expected at least "
        f"{NUMBER_DOCS[doc]}"
    )
    opened = text.count("<!-- numbers from:")
    closed = text.count("<!-- /numbers -->")
    assert opened == closed == len(blocks), f"{doc}: an unclosed or malformed numbers block"
    for block in blocks:
        files = block.group("files").split()
        sources = []
        for name in files:
            path = ROOT / name
            assert path.is_file(), f"{doc} cites {name}, which does not exist"
            sources.append(path.read_text())
        bad = missing(decimals(block.group("body")), sources)
        assert not bad, f"{doc} block from {files} quotes {bad}, in none of those files"


def unsourced_table_rows(text: str) -> list[str]:
    """The table rows (lines opening with ``|``) of ``text`` that quote a decimal number
    outside every ``numbers from`` block: numbers whose file no test checks."""
    outside = BLOCK.sub("", text)
    return [
        line for line in outside.splitlines() if line.lstrip().startswith("|") and decimals(line)
    ]


def test_a_table_row_outside_a_block_is_found() -> None:
    inside = "<!-- numbers from: x.md -->\n| a | 92.4 |\n<!-- /numbers -->\n"
    assert unsourced_table_rows(inside) == []
    assert unsourced_table_rows(inside + "| b | 88.1 |\n| c | 7 |\n") == ["| b | 88.1 |"]


@pytest.mark.parametrize("doc", sorted(NUMBER_DOCS))
def test_every_table_of_numbers_sits_in_a_numbers_block(doc: str) -> None:
    bad = unsourced_table_rows((ROOT / doc).read_text())
    assert not bad, f"{doc}: table rows quoting numbers outside a numbers block: {bad[:3]}"


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"
    assert "docs/results.md" in README.read_text(), "README.md does not link docs/results.md"


def test_committed_reports_are_not_dirty() -> None:
    """The committed study reports were produced from committed code."""
    for name in ("hard-negatives", "alignment"):
        report = (ROOT / "docs" / "results" / name / "report.md").read_text()
        commit = re.search(r"- Commit: `([^`]+)`", report)
        assert commit, f"docs/results/{name}/report.md has no commit line"
        assert not commit.group(1).endswith("+dirty"), f"{name} report stamped {commit.group(1)}"
