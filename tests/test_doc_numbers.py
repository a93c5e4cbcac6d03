"""Numbers quoted in README.md, docs/results.md, docs/using.md and benchmarks/RESULTS.md
come from committed results files.

Two mechanisms:

- a row of the benchmarks/RESULTS.md index quotes numbers of the results file it links
  (``[results/x.md](results/x.md)``): every decimal number of its headline cell must be
  written in that file or in another results file the row links (rows listed in
  :data:`CHECKED_ROWS`);
- a block of README.md, docs/results.md or docs/using.md between
  ``<!-- numbers from: FILE [FILE...] -->`` and ``<!-- /numbers -->`` quotes numbers of
  those files (paths from the repository root): every decimal number in the block must
  be written in one of them, and every number of a table row in the block must be
  written in that row's own source rows (a
  ``claim N`` of a report, or the source rows and sentences that name the row; see
  :func:`row_problems`), so rows or columns traded between them fail; a ``mean ± std``
  pair must stand as that pair, a verdict (reproduced, opposite, mixed, not reproduced)
  or target (met, short) must be stated by the row's source lines, and a column must be
  named as its source names it or mapped to the source's cells by a ``columns`` comment
  (:func:`mapped_problems`, compared cell by cell).

Every table row of those documents that holds a digit (outside code spans and link
targets) sits in a numbers block, integers included (``| SupCon | 96 ± 1 |``), except the
digits :data:`NOT_RESULTS` names, which are not results (a cited paper's year, a model's
name); see :func:`unsourced_table_rows`.

README.md stays short (at most :data:`README_MAX_LINES` lines); every result lives in
docs/results.md, one numbers block and one table per benchmark.

A number counts as written when the same digits stand in the file as a number (``0.4``
does not match inside ``10.45``).  In a numbers block, integers of two digits or more
("58 of 95 runs") are checked too (:func:`counts`), outside code spans and link targets;
one-digit integers (seeds, "3 seeds") are not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS_INDEX = ROOT / "benchmarks" / "RESULTS.md"
README = ROOT / "README.md"
#: the documents whose ``numbers from`` blocks this test checks, and the fewest blocks each has
NUMBER_DOCS = {"README.md": 4, "docs/results.md": 13, "docs/using.md": 1}
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
    "../docs/results/open_intent/confirmation.md",
)
LINKED = re.compile(r"\(results/(?P<name>[\w./-]+\.md)\)")
#: a decimal number; a full stop after it ends a sentence, a digit after that dot a version
DECIMAL = re.compile(r"(?<![\d.])\d+\.\d+(?!\d|\.\d)")
BLOCK = re.compile(r"<!-- numbers from: (?P<files>[^>]+?) -->(?P<body>.*?)<!-- /numbers -->", re.S)


def decimals(text: str) -> list[str]:
    """Every decimal number of ``text`` as written (``0.55``, ``92.4``)."""
    return DECIMAL.findall(text)


#: an integer of two digits or more standing alone (not in a decimal, a word, a range's
#: hyphen or a path)
COUNT = re.compile(r"(?<![\w.\-/])\d{2,}(?![\w.]|\.\d)")
#: a whole number as a source writes it (for :func:`counts`)
WHOLE = re.compile(r"(?<![\w.])\d+(?!\w|\.\d)")


def counts(text: str) -> list[str]:
    """The integers of two digits or more in ``text`` outside code spans and link
    targets (``58`` and ``95`` of "58 of 95 runs"; not ``2026`` of a commit or path)."""
    prose = re.sub(r"`[^`]*`", "", re.sub(r"\]\([^)]*\)", "]", text))
    return COUNT.findall(prose)


def missing_counts(numbers: list[str], sources: list[str]) -> list[str]:
    written = {n for text in sources for n in WHOLE.findall(text)}
    return sorted({n for n in numbers if n not in written})


def missing(numbers: list[str], sources: list[str]) -> list[str]:
    written = {n for text in sources for n in decimals(text)}
    return sorted({n for n in numbers if n not in written})


def test_decimal_matching_is_whole_numbers_only() -> None:
    assert decimals("0.55 / 0.44x, 10.45%, v1.2.3 and 7") == ["0.55", "0.44", "10.45"]
    assert decimals("CE 92.97 / 93.39. Next") == ["92.97", "93.39"]
    assert missing(["0.4"], ["10.45 and 0.45"]) == ["0.4"]
    assert missing(["0.45"], ["10.45 and 0.45"]) == []
    # counts: two digits or more, outside code and links; written as whole numbers
    assert counts("58 of 95 runs, 3 seeds, 0-9, `--seeds 10`, [x](a/2026.md), 4.25") == [
        "58",
        "95",
    ]
    assert missing_counts(["58", "95"], ["37 of 95 runs, 58.1"]) == ["58"]


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
        bad = missing_counts(counts(block.group("body")), sources)
        assert not bad, f"{doc} block from {files} quotes the counts {bad}, in none of those files"


#: the digits a table row outside every numbers block may hold because they are not results,
#: each with why (anything else with a digit, outside code spans and link targets, is a
#: number no test checks)
NOT_RESULTS: dict[str, str] = {
    # README's objectives table: "Chen et al. 2020", "Feng & Patras 2023", "ICLR 2026"
    r"(?:et al\.|& \w+|ICLR) (?:19|20)\d\d(?!\d)": "a cited paper's year",
    # README's objectives table: cross-entropy's "SPEC §3"
    r"SPEC §\d+": "a section of SPEC.md",
    # docs/using.md's run-directory table: the encoder's and the tables' names
    r"(?<![\w-])(?:all-MiniLM-L6-v2|float32)(?![\w-])": "a model's or a dtype's name",
}


def unsourced_table_rows(text: str) -> list[str]:
    """The table rows (lines opening with ``|``) of ``text`` outside every ``numbers from``
    block that hold a digit (a decimal, a count, a percentage, a header's ``Hits@10``)
    outside code spans and link targets, once :data:`NOT_RESULTS` is set aside: numbers
    whose file no test checks."""
    outside = BLOCK.sub("", text)
    rows = []
    for line in outside.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        prose = re.sub(r"`[^`]*`", "", re.sub(r"\]\([^)]*\)", "]", line))
        for pattern in NOT_RESULTS:
            prose = re.sub(pattern, "", prose)
        if re.search(r"\d", prose):
            rows.append(line)
    return rows


def test_a_table_row_outside_a_block_is_found() -> None:
    inside = "<!-- numbers from: x.md -->\n| a | 92.4 |\n| b | 96 ± 1 |\n<!-- /numbers -->\n"
    assert unsourced_table_rows(inside) == []
    # the counter-example: integer-only results outside a block are found, as decimals are
    outside = "| SupCon | 96 ± 1 |\n| b | 88.1 |\n| c | 7 of 9 |\n| d | 58% |\n| e | Hits@10 |\n"
    assert unsourced_table_rows(inside + outside) == outside.splitlines()
    # digits that are not results: code spans, link targets and NOT_RESULTS
    quiet = (
        "| InfoNCE, any `V >= 2` | `NTXentLoss` | Chen et al. 2020 |\n"
        "| NSCL | [x](results/2026.md) | CL-vs-NSCL, ICLR 2026 |\n"
        "| cross-entropy | SPEC §3 | all-MiniLM-L6-v2, float32 |\n"
    )
    assert unsourced_table_rows(quiet) == []
    # a year that is not a citation's, or a digit beside an allowed name, is still a number
    assert unsourced_table_rows("| a | 2020 |\n| b | float32, 12 |\n") == [
        "| a | 2020 |",
        "| b | float32, 12 |",
    ]


def test_every_not_results_entry_is_used() -> None:
    texts = [(ROOT / doc).read_text() for doc in NUMBER_DOCS]
    unused = [p for p in NOT_RESULTS if not any(re.search(p, BLOCK.sub("", t)) for t in texts)]
    assert not unused, f"NOT_RESULTS entries matching no doc: {unused}"


@pytest.mark.parametrize("doc", sorted(NUMBER_DOCS))
def test_every_table_of_numbers_sits_in_a_numbers_block(doc: str) -> None:
    bad = unsourced_table_rows((ROOT / doc).read_text())
    assert not bad, f"{doc}: table rows with numbers outside a numbers block:\n" + "\n".join(bad)


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


# --- every table row quotes the numbers of its own source rows -------------------------------
#
# A number written somewhere in the cited files is not enough: swapping two rows' numbers
# keeps every number in the files.  So every table row of a numbers block that quotes a
# decimal is checked against its own source lines, and every decimal of its cells after the
# label must be written in them:
#
# - a row whose label names ``claim N`` (``claims N and M``, ``claims N-M``) quotes what the
#   cited report writes about claim N: its row of the claims table (``| # | section | ...``)
#   and its line of the rules as applied (``N. `rule`: ...``), in the report the label links
#   or else the only cited report with a claim N;
# - any other row quotes the source table rows whose first cell is the row's name (the whole
#   cell, or the cell without a trailing parenthetical) and the source sentences that name the
#   row and no other row of the same table: a sentence naming SPACL and InfoNCE vouches for
#   neither as a whole, only with its stretches from the row's name to the next other row's
#   name (``SPACL 0.3346 ...; InfoNCE 0.3425 ...``), as a claims row does.
#
# A row's name is its key (the label without links, emphasis, backticks and a trailing
# parenthetical, which two labels of one table sharing a key keep; lower-cased; hyphens and
# underscores read as spaces, so ``cross_entropy`` is ``cross-entropy``), as whole words, or
# where the source words it otherwise its entry in :data:`ROW_ALIASES`.  Names are matched
# longest first (``spacl ib+h`` is not ``spacl ib``).  Where a source row's table has a column
# of the same name as a doc column (header without a trailing parenthetical), the doc cell's
# numbers must stand in that column: a row's macro-F1 and F1-open cannot trade places.

#: doc row key -> a regular expression for the source's own name of that row, where the
#: source words it otherwise and no doc label in the source's words reads as well
ROW_ALIASES: dict[str, str] = {
    # one doc row for the source's HCL (self-supervised benches) and HSCL rows
    "hcl / hscl": "hcl|hscl",
    # the SPACL report's "SPACL selected: <the setting>", ood_finetune's spacl_selected
    "spacl, validation chosen setting": r"spacl selected(?:: [^|]*)?",
    # ood_finetune's "SPACL (paper)", kg's "the SPACL paper reports"
    "spacl paper": r"spacl \(?paper\)?",
    # spacl_overhead's rows and its lines over the sessions
    "spacl (one anchor per instance, shared encoder)": r"spacl \(shared\)",
    "spacl (every view an anchor)": r"spacl \(every view an anchor\)|every view \(self supervised",
    "spacl every view, supervised": "spacl every view, supervised|supervised every view",
}

LINK = re.compile(r"\[([^\]]*)\]\(([^)]*)\)")
CLAIM = re.compile(r"\bclaims? (\d+(?:-\d+)?(?:(?:,| and) \d+(?:-\d+)?)*)", re.I)
TRAILING_NOTE = re.compile(r"\s*\([^()]*\)$")
SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")


def plain(text: str) -> str:
    """``text`` without markdown links (their text kept), emphasis and backticks, lower-cased,
    hyphens and underscores read as spaces."""
    text = LINK.sub(r"\1", text).replace("**", "").replace("`", "").replace("\\*", "")
    return " ".join(re.sub(r"[-_]", " ", text).split()).lower()


def split_cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def table_blocks(text: str) -> list[list[str]]:
    """The markdown tables of ``text``: runs of consecutive lines that open with ``|``."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def row_keys(labels: list[str]) -> list[str]:
    """Each label's key; labels whose keys would be the same keep their parentheticals."""
    full = [plain(label) for label in labels]
    short = [TRAILING_NOTE.sub("", f) for f in full]
    return [s if short.count(s) == 1 else f for s, f in zip(short, full, strict=True)]


def row_names(keys: list[str]) -> dict[int, re.Pattern[str]]:
    return {
        i: re.compile(rf"(?<!\w)(?:{ROW_ALIASES.get(key, re.escape(key))})(?!\w)")
        for i, key in enumerate(keys)
    }


def mentions(text: str, names: dict[int, re.Pattern[str]]) -> list[tuple[int, int, int]]:
    """(start, end, row) of each row name in ``text``, longest first, none overlapping."""
    found = [(m.start(), m.end(), row) for row, p in names.items() for m in p.finditer(text)]
    taken: list[tuple[int, int, int]] = []
    for start, end, row in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if all(end <= s or start >= e for s, e, _ in taken):
            taken.append((start, end, row))
    return sorted(taken)


def own_stretches(text: str, row: int, names: dict[int, re.Pattern[str]]) -> list[str]:
    """The stretches of ``text`` from each name of ``row`` to the next name of another row;
    the whole of ``text`` where it names no other row, or not this one."""
    found = mentions(text, names)
    rows = {r for *_, r in found}
    if row not in rows or rows == {row}:
        return [text]
    return [
        text[start : min((s for s, _, r in found if r != row and s >= end), default=len(text))]
        for start, end, r in found
        if r == row
    ]


class Unit(NamedTuple):
    """A line of a source (a sentence of prose), markdown removed; a table row's cells by
    their column's name (its header without a trailing parenthetical)."""

    text: str
    columns: dict[str, str] | None = None
    label: str = ""


def column_names(header: str) -> list[str]:
    return [TRAILING_NOTE.sub("", plain(cell)) for cell in split_cells(header)]


def source_units(text: str) -> list[Unit]:
    """The lines of a source file, a prose line cut into sentences."""
    units = []
    header: list[str] = []
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            header = []
            units += [Unit(plain(part)) for part in SENTENCE_END.split(line)]
            continue
        header = header or column_names(line)
        columns: dict[str, str] = {}
        for name, cell in zip(header, split_cells(line), strict=False):
            columns.setdefault(name, plain(cell))
        units.append(Unit(plain(line), columns, plain(split_cells(line)[0])))
    return units


def named_lines(units: list[Unit], row: int, names: dict[int, re.Pattern[str]]) -> list[Unit]:
    """The source lines (or stretches) that vouch for ``row`` of a table with these names."""
    lines = []
    for unit in units:
        if unit.columns is not None:
            labels = {unit.label, TRAILING_NOTE.sub("", unit.label)}
            if any(names[row].fullmatch(label) for label in labels):
                lines.append(unit)
            continue
        rows = {r for *_, r in mentions(unit.text, names)}
        if rows == {row}:
            lines.append(unit)
        elif row in rows:
            lines += [Unit(part) for part in own_stretches(unit.text, row, names)]
    return lines


def column_problems(
    header: list[str], cells: list[str], lines: list[Unit], mapped: Collection[str] = ()
) -> list[str]:
    """The cells of a doc row quoting a number that stands in none of its source rows' cells
    of the column of the same name.  A column quoting numbers must have such a column in
    the row's source rows when they are table rows, or be mapped to one by a ``columns``
    comment (``mapped``, checked by :func:`mapped_problems`): a doc column no source column
    answers for would let two columns trade their numbers unseen."""
    problems = []
    tabled = any(u.columns for u in lines)
    for name, cell in zip(header[1:], cells[1:], strict=False):
        if name in mapped:
            continue
        column = [u.columns[name] for u in lines if u.columns and name in u.columns]
        written = {n for text in column for n in decimals(text)}
        bad = [n for n in decimals(cell) if column and n not in written]
        if bad:
            problems.append(f"column {name!r} quotes {bad}, in no {name!r} cell of its source rows")
        elif column and re.search(r"\d", cell) and cell_value(cell) not in map(cell_value, column):
            problems.append(f"column {name!r} says {cell!r}, no {name!r} cell of its source rows")
        elif tabled and not column and decimals(cell):
            problems.append(
                f"column {name!r} quotes {decimals(cell)}, and no source row has a {name!r} "
                "column: name it as the source does, or map it with a columns comment"
            )
    return problems


#: a mean with its spread as written (``93.4 ± 0.6``)
PAIR = re.compile(r"(?<![\d.])(\d+\.\d+|\d+) ± (\d+\.\d+|\d+)(?![\d.]|\.\d)")


def pair_problems(cells: list[str], lines: list[Unit]) -> list[str]:
    """The ``mean ± std`` pairs of a doc row's cells that stand in none of its source lines
    as that pair: a std traded with another row's or column's passes the number check."""
    written = {pair for line in lines for pair in PAIR.findall(line.text)}
    return [
        f"quotes {a} ± {b}, a pair in none of its source lines"
        for cell in cells[1:]
        for a, b in PAIR.findall(cell)
        if (a, b) not in written
    ]


#: the verdicts and targets a table cell states, longest first
VERDICT = re.compile(r"\b(not reproduced at this scale|not reproduced|reproduced|opposite|mixed)\b")
TARGET_CELLS = ("met", "short")


def verdict_words(text: str) -> set[str]:
    """The verdict phrases of ``text``: ``reproduced`` alone only where not part of ``not
    reproduced``."""
    return set(VERDICT.findall(text))


def verdict_problems(header: list[str], cells: list[str], lines: list[Unit]) -> list[str]:
    """The verdicts (``reproduced``, ``opposite``, ``mixed``, ``not reproduced``) and target
    cells (``met``, ``short``) of a doc row that its source lines do not state: a verdict
    turned round keeps every number."""
    problems = []
    said = set().union(*(verdict_words(line.text) for line in lines)) if lines else set()
    for name, cell in zip(header[1:], cells[1:], strict=False):
        text = plain(cell)
        bad = sorted(verdict_words(text) - said)
        if bad:
            problems.append(f"column {name!r} states {bad}, which none of its source lines does")
        if text in TARGET_CELLS:
            column = [u.columns[name] for u in lines if u.columns and name in u.columns]
            if text not in column:
                problems.append(f"column {name!r} says {text!r}, no {name!r} cell of its source")
    return problems


def claim_rows(text: str) -> dict[str, list[str]]:
    """What a report writes about each claim, by claim number: its row of the claims table
    (``| # | section | ...``) and its line of the rules as applied (``N. `rule`: ...``)."""
    rows: dict[str, list[str]] = {
        split_cells(line)[0]: [plain(line)]
        for table in table_blocks(text)
        if split_cells(table[0])[:1] == ["#"]
        for line in table[2:]
    }
    for number, line in re.findall(r"^(\d+)\. (`.*)$", text, flags=re.M):
        rows.get(number, []).append(plain(line))
    return rows


def claim_numbers(text: str) -> list[str]:
    """``3`` -> 3; ``3 and 5`` -> 3, 5; ``1-3`` -> 1, 2, 3."""
    return [
        str(n)
        for first, last in re.findall(r"(\d+)(?:-(\d+))?", text)
        for n in range(int(first), int(last or first) + 1)
    ]


def claim_lines(label: str, numbers: str, doc: str, sources: dict[str, str]) -> list[str] | str:
    """The claims rows a table row's label names, or why they cannot be told."""
    here = (ROOT / doc).parent
    linked = [
        name
        for name in sources
        if any(
            (here / m.group(2)).resolve() == (ROOT / name).resolve() for m in LINK.finditer(label)
        )
    ]
    reports = linked or list(sources)
    lines = []
    for number in claim_numbers(numbers):
        holding = [name for name in reports if number in claim_rows(sources[name])]
        if len(holding) != 1:
            return f"claim {number} stands in {len(holding)} of {reports}: link its report"
        lines += claim_rows(sources[holding[0]])[number]
    return lines


#: a table's columns mapped to cells of the source's tables, on the line before the table:
#: ``<!-- columns: DOC COLUMN = SOURCE HEADING / SOURCE COLUMN; ... -->``
COLUMNS = re.compile(r"^<!-- columns: (?P<spec>.*) -->$")


def column_map(spec: str) -> dict[str, tuple[str, str]]:
    """A ``columns`` comment's mapping: doc column name -> (the source heading a source
    table follows, that table's column name), each read as :func:`column_names` reads
    a header."""
    out = {}
    for part in spec.split(";"):
        doc, _, source = part.partition("=")
        heading, _, column = source.rpartition("/")
        out[TRAILING_NOTE.sub("", plain(doc))] = (
            plain(heading),
            TRAILING_NOTE.sub("", plain(column)),
        )
    return out


def mapped_tables(body: str) -> list[tuple[list[str], dict[str, tuple[str, str]]]]:
    """The tables of a numbers block, each with the mapping of the ``columns`` comment on the
    line before it (empty without one)."""
    lines = body.splitlines()
    out = []
    for table in table_blocks(body):
        start = lines.index(table[0])
        match = COLUMNS.match(lines[start - 1].strip()) if start else None
        out.append((table, column_map(match.group("spec")) if match else {}))
    return out


def tables_under(text: str, heading: str) -> list[list[list[str]]]:
    """The tables between the first heading line of ``text`` (``#``...) whose words open
    with ``heading`` and the next heading line: each its header names, then each row's
    cells."""
    lines = text.splitlines()
    for at, line in enumerate(lines):
        if line.startswith("#") and plain(line.lstrip("#")).startswith(heading):
            rest = lines[at + 1 :]
            end = next((i for i, x in enumerate(rest) if x.startswith("#")), len(rest))
            return [
                [column_names(table[0]), *(split_cells(row) for row in table[2:])]
                for table in table_blocks("\n".join(rest[:end]))
            ]
    return []


def cell_value(cell: str) -> str:
    """A cell as compared across documents: markdown, a footnote mark and a trailing
    parenthetical removed."""
    return TRAILING_NOTE.sub("", plain(cell)).strip()


def mapped_problems(
    header: list[str],
    cells: list[str],
    name: re.Pattern[str],
    mapping: dict[str, tuple[str, str]],
    sources: dict[str, str],
) -> list[str]:
    """The cells of a doc row, in the columns a ``columns`` comment maps, that differ from
    the mapped cell of the source row of the same name (a cell of ``—`` where the source
    table has no such row)."""
    problems = []
    for column, (heading, source_column) in mapping.items():
        if column not in header:
            problems.append(f"the columns comment maps {column!r}, not a column of the table")
            continue
        cell = cells[header.index(column)]
        tables = [
            table
            for text in sources.values()
            for table in tables_under(text, heading)
            if source_column in table[0]
        ]
        if not tables:
            problems.append(f"column {column!r}: no table under {heading!r} has {source_column!r}")
            continue
        rows = [
            (table[0].index(source_column), row)
            for table in tables
            for row in table[1:]
            if any(name.fullmatch(label) for label in (plain(row[0]), cell_value(row[0])))
        ]
        if not rows:
            if cell_value(cell) not in ("—", ""):
                problems.append(f"column {column!r} quotes {cell!r}; {heading!r} has no such row")
            continue
        at, row = rows[0]
        if cell_value(cell) != cell_value(row[at]):
            problems.append(
                f"column {column!r} quotes {cell!r}, where {heading!r} / {source_column!r} "
                f"says {row[at]!r}"
            )
    return problems


def row_problems(
    text: str, doc: str, read: Callable[[str], str] = lambda name: (ROOT / name).read_text()
) -> list[str]:
    """The table rows of the numbers blocks of ``text`` (the document ``doc``, a path from the
    repository root) that quote a number their own source lines do not hold, a mean ± std
    pair or a verdict they do not state, or a cell other than the one a ``columns`` comment
    maps it to."""
    problems = []
    for block in BLOCK.finditer(text):
        sources = {name: read(name) for name in block.group("files").split()}
        units = [unit for source in sources.values() for unit in source_units(source)]
        for table, mapping in mapped_tables(block.group("body")):
            header = column_names(table[0])
            body = [split_cells(line) for line in table[2:]]
            keys = row_keys([cells[0] for cells in body])
            names = row_names(keys)
            for i, cells in enumerate(body):
                numbers = decimals(" | ".join(cells[1:]))
                claim = CLAIM.search(LINK.sub(r"\1", cells[0]))
                if not numbers:
                    continue
                if claim:
                    found = claim_lines(cells[0], claim.group(1), doc, sources)
                    if isinstance(found, str):
                        problems.append(f"{doc}: row {cells[0]!r}: {found}")
                        continue
                    lines = [Unit(part) for line in found for part in own_stretches(line, i, names)]
                    where = f"its claims rows of {list(sources)}"
                else:
                    lines = named_lines(units, i, names)
                    where = f"the {len(lines)} lines of {list(sources)} naming {keys[i]!r}"
                written = {n for line in lines for n in decimals(line.text)}
                bad = [n for n in numbers if n not in written and not mapping]
                if bad:
                    problems.append(f"{doc}: row {cells[0]!r} quotes {bad}, in none of {where}")
                    continue
                found = verdict_problems(header, cells, lines)
                if mapping:
                    found += mapped_problems(header, cells, names[i], mapping, sources)
                else:
                    found += pair_problems(cells, lines)
                if not claim:
                    found += column_problems(header, cells, lines, mapping)
                problems += [f"{doc}: row {cells[0]!r}: {p}" for p in found]
    return problems


@pytest.mark.parametrize("doc", sorted(NUMBER_DOCS))
def test_every_table_row_quotes_its_own_source_rows(doc: str) -> None:
    problems = row_problems((ROOT / doc).read_text(), doc)
    assert not problems, "\n".join(problems)


KG_SOURCE = """\
| method | test MRR | Hits@10 |
|---|---|---|
| infonce | 0.3425 | 0.5290 |
| spacl | 0.3361 | 0.5118 |
| SPACL paper | 0.413 | 0.612 |

SPACL / InfoNCE time per epoch: 1.28x.
"""


def kg_doc(*rows: str) -> str:
    table = "| method | test MRR | Hits@10 |\n|---|---|---|\n" + "".join(f"{r}\n" for r in rows)
    return f"<!-- numbers from: results/kg.md -->\n{table}<!-- /numbers -->\n"


def kg_problems(doc: str) -> list[str]:
    return row_problems(doc, "doc.md", {"results/kg.md": KG_SOURCE}.__getitem__)


def test_row_check_passes_rows_quoting_their_own_source_rows() -> None:
    assert kg_problems(kg_doc("| InfoNCE | 0.3425 | 0.5290 |", "| SPACL | 0.3361 | 0.5118 |")) == []
    assert kg_problems(kg_doc("| SPACL (ours) | 0.3361 | — |", "| `infonce` | 0.3425 | — |")) == []


def test_row_check_fails_swapped_rows_that_the_block_check_passes() -> None:
    swapped = kg_doc("| InfoNCE | 0.3361 | 0.5118 |", "| SPACL | 0.3425 | 0.5290 |")
    assert missing(decimals(swapped), [KG_SOURCE]) == []
    problems = kg_problems(swapped)
    assert len(problems) == 2, problems
    assert "doc.md: row 'InfoNCE' quotes ['0.3361', '0.5118'], in none of" in problems[0]
    assert "doc.md: row 'SPACL' quotes ['0.3425', '0.5290'], in none of" in problems[1]


def test_row_check_fails_a_number_of_another_source_row() -> None:
    # SPACL's Hits@10 taken from InfoNCE's row, then from the paper's row, then a ratio of both
    for other in ("0.5290", "0.612", "1.28"):
        problems = kg_problems(
            kg_doc("| InfoNCE | 0.3425 | 0.5290 |", f"| SPACL | 0.3361 | {other} |")
        )
        assert f"doc.md: row 'SPACL' quotes ['{other}'], in none of" in problems[-1], problems


def test_row_check_fails_two_columns_traded_in_a_row() -> None:
    problems = kg_problems(kg_doc("| InfoNCE | 0.5290 | 0.3425 |", "| SPACL | 0.3361 | 0.5118 |"))
    assert problems == [
        "doc.md: row 'InfoNCE': column 'test mrr' quotes ['0.5290'], in no 'test mrr' cell of "
        "its source rows",
        "doc.md: row 'InfoNCE': column 'hits@10' quotes ['0.3425'], in no 'hits@10' cell of "
        "its source rows",
    ]


def test_row_check_reads_a_claims_row_by_its_stretches() -> None:
    report = (
        "| # | section | claim | measured here |\n|---|---|---|---|\n| 3 | kg | SPACL beats "
        "InfoNCE | SPACL MRR 0.3346 ± 0.0004; InfoNCE MRR 0.3425 ± 0.0002 |\n"
    )
    read = {"report.md": report}.__getitem__
    head = "<!-- numbers from: report.md -->\n| method | MRR |\n|---|---|\n"
    right = (
        head + "| InfoNCE (claim 3) | 0.3425 ± 0.0002 |\n| SPACL (claim 3) | 0.3346 ± 0.0004 |\n"
    )
    assert row_problems(right + "<!-- /numbers -->", "doc.md", read) == []
    swapped = (
        head + "| InfoNCE (claim 3) | 0.3346 ± 0.0004 |\n| SPACL (claim 3) | 0.3425 ± 0.0002 |\n"
    )
    assert len(row_problems(swapped + "<!-- /numbers -->", "doc.md", read)) == 2
    unknown = head + "| SPACL (claim 4) | 0.3346 |\n<!-- /numbers -->"
    assert "claim 4 stands in 0 of ['report.md']" in row_problems(unknown, "doc.md", read)[0]


def test_row_check_fails_readme_with_the_kg_rows_swapped() -> None:
    """The reviewer's experiment: InfoNCE's and SPACL's numbers traded in README's FB15k-237
    table (the claim reversed) pass the block check and fail the row check."""
    text = README.read_text()
    infonce = next(line for line in text.splitlines() if line.startswith("| InfoNCE (claim 26)"))
    spacl = next(line for line in text.splitlines() if line.startswith("| SPACL (claim 26"))
    a, b = split_cells(infonce), split_cells(spacl)
    traded = (
        text.replace(infonce, "\0")
        .replace(spacl, "| " + " | ".join([b[0], *a[1:]]) + " |")
        .replace("\0", "| " + " | ".join([a[0], *b[1:]]) + " |")
    )
    assert traded != text
    assert row_problems(text, "README.md") == []
    problems = row_problems(traded, "README.md")
    assert len(problems) == 2, problems
    assert all("InfoNCE" in p or "SPACL" in p for p in problems)


def test_every_row_alias_names_a_doc_row() -> None:
    keys = {
        key
        for doc in NUMBER_DOCS
        for block in BLOCK.finditer((ROOT / doc).read_text())
        for table in table_blocks(block.group("body"))
        for key in row_keys([split_cells(line)[0] for line in table[2:]])
    }
    assert set(ROW_ALIASES) <= keys, f"aliases of no doc row: {sorted(set(ROW_ALIASES) - keys)}"


RESULT_FIELDS = ("Source", "Data", "Protocol", "Hardware", "Time", "Command")


def missing_fields(markdown: str) -> dict[str, list[str]]:
    """Per ``##`` section of a results page: which of :data:`RESULT_FIELDS` (a
    ``- **Field:**`` line each) it lacks."""
    out = {}
    for section in re.split(r"^## ", markdown, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        lacking = [f for f in RESULT_FIELDS if not re.search(rf"^- \*\*{f}:\*\*", body, re.M)]
        if lacking:
            out[title.strip()] = lacking
    return out


def test_every_results_section_states_data_protocol_hardware_time_and_command() -> None:
    """docs/results.md in lightly's manner: each benchmark's section says where its numbers
    come from, the data, the protocol, the hardware, the time and the command, before
    its rows (the counter-example: a section without its hardware line is found)."""
    assert missing_fields((ROOT / "docs" / "results.md").read_text()) == {}
    bare = "## A\n- **Source:** x\n- **Data:** x\n- **Protocol:** x\n- **Time:** x\n"
    assert missing_fields(bare) == {"A": ["Hardware", "Command"]}


#: a reviewer's edits of the real documents that keep every number somewhere in its sources
#: yet change what a row says; each must be found (doc, text, its replacement)
MUTATIONS = [
    # stds traded between two cells of a mapped README row
    (
        "README.md",
        "| SPACL base (as the paper describes it) | 94.8 ± 0.5 | 91.5 ± 0.1 |",
        "| SPACL base (as the paper describes it) | 94.8 ± 0.1 | 91.5 ± 0.5 |",
    ),
    # a verdict turned round
    (
        "README.md",
        "| 0.658 ± 0.013 | opposite |",
        "| 0.658 ± 0.013 | reproduced |",
    ),
    # SupCon's MNIST-5k supervised and weak cells traded (a mapped table)
    (
        "docs/results.md",
        "| SupCon | 96.6 ± 0.3 | — | 95.9 ± 0.2 |",
        "| SupCon | 95.9 ± 0.2 | — | 96.6 ± 0.3 |",
    ),
    # SimCLR's MNIST-5k and CLINC150 cells traded, then one std changed
    (
        "docs/results.md",
        "| SimCLR | 93.4 ± 0.6 | 93.4 ± 0.6 | 93.4 ± 0.6 | 87.5 ± 0.7 |",
        "| SimCLR | 87.5 ± 0.7 | 93.4 ± 0.6 | 93.4 ± 0.6 | 93.4 ± 0.6 |",
    ),
    (
        "docs/results.md",
        "| SimCLR | 93.4 ± 0.6 | 93.4 ± 0.6 | 93.4 ± 0.6 | 87.5 ± 0.7 |",
        "| SimCLR | 93.4 ± 0.6 | 93.4 ± 0.6 | 93.4 ± 0.6 | 87.5 ± 0.6 |",
    ),
    # the confirmation: two settings' F1-open traded, and a std moved to another setting
    # (three tables of the same column names, each mapped to its own dataset)
    (
        "docs/results.md",
        "| 88.26 ± 2.21 | 88.52 ± 2.89 | 87.64 ± 0.67 | 73.03 ± 4.19 |",
        "| 88.26 ± 2.21 | 73.03 ± 4.19 | 87.64 ± 0.67 | 88.52 ± 2.89 |",
    ),
    (
        "docs/results.md",
        "| 76.52 ± 2.14 | 88.53 ± 2.06 | 84.71 ± 0.96 |",
        "| 76.52 ± 2.06 | 88.53 ± 2.14 | 84.71 ± 0.96 |",
    ),
    # a fine-tuned table's macro-F1 and F1-OOD traded (mapped columns)
    (
        "docs/results.md",
        "| SupCon | 69.58 ± 2.31 | 70.31 ± 3.61 |",
        "| SupCon | 70.31 ± 3.61 | 69.58 ± 2.31 |",
    ),
]


@pytest.mark.parametrize(("doc", "text", "edit"), MUTATIONS)
def test_row_check_finds_an_edit_that_keeps_every_number(doc: str, text: str, edit: str) -> None:
    original = (ROOT / doc).read_text()
    assert original.count(text) == 1, f"{doc} no longer holds {text!r} once"
    edited = original.replace(text, edit)
    assert missing(decimals(edited), [original]) == []  # the block check cannot see it
    assert row_problems(edited, doc), f"{doc}: the edit {edit!r} went unseen"


def test_a_columns_comment_maps_cells_exactly() -> None:
    source = "## Bench A\n\n| model | test |\n|---|---|\n| x | 1.0 ± 0.1 |\n| y | 2.0 ± 0.2 |\n"
    read = {"s.md": source}.__getitem__

    def doc(cells: str, spec: str = "A = Bench A / test") -> str:
        return (
            f"<!-- numbers from: s.md -->\n<!-- columns: {spec} -->\n| model | A |\n|---|---|\n"
            f"{cells}<!-- /numbers -->\n"
        )

    assert row_problems(doc("| x | 1.0 ± 0.1 \\* |\n| y | 2.0 ± 0.2 (a) |\n"), "d.md", read) == []
    assert row_problems(doc("| x | 1.0 ± 0.2 |\n"), "d.md", read)
    assert row_problems(doc("| z | 1.0 ± 0.1 |\n"), "d.md", read)  # no such source row
    assert row_problems(doc("| z | — |\n"), "d.md", read) == []
    assert row_problems(doc("| x | 1.0 ± 0.1 |\n", "A = Bench B / test"), "d.md", read)


def test_an_unmapped_column_the_source_does_not_have_is_found() -> None:
    source = "| model | test |\n|---|---|\n| x | 1.0 |\n| y | 2.0 |\n"
    read = {"s.md": source}.__getitem__
    text = "<!-- numbers from: s.md -->\n| model | other |\n|---|---|\n| x | 1.0 |\n"
    text += "<!-- /numbers -->"
    problems = row_problems(text, "d.md", read)
    assert problems and "no source row has a 'other' column" in problems[0]


def one_table_per_section(markdown: str) -> dict[str, int]:
    """Per ``##`` section of a results page, its number of tables where that is not one."""
    out = {}
    for section in re.split(r"^## ", markdown, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        if len(table_blocks(body)) != 1:
            out[title.strip()] = len(table_blocks(body))
    return out


def test_every_results_section_holds_one_table() -> None:
    """One table per benchmark, in lightly's manner (the counter-example: a section with
    two tables is found)."""
    assert one_table_per_section((ROOT / "docs" / "results.md").read_text()) == {}
    two = "## A\n| a |\n|---|\n| 1 |\n\ntext\n\n| b |\n|---|\n| 2 |\n## B\n| c |\n|---|\n"
    assert one_table_per_section(two) == {"A": 2}
