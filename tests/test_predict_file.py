"""``spacl predict RUN --file FILE`` reads the texts a user has: a plain list, or a TSV in
the dialect training reads, its ``text`` column found by the header (a review saw the
header line classified as an input, and a ``label<TAB>text`` file classify its labels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spacl.commands.predict import read_texts


@pytest.mark.parametrize(
    ("content", "texts"),
    [
        ("how do I sort a list\nsecond one\n", ["how do I sort a list", "second one"]),
        (
            "text\tlabel\nsort a list\tpython\n\nvirtual host\tapache\n",
            ["sort a list", "virtual host"],
        ),
        (
            "label\ttext\npython\tsort a list\napache\tvirtual host\n",
            ["sort a list", "virtual host"],
        ),
        ('label\tText\npython\t"a, ""quoted"" one"\n', ['a, "quoted" one']),
        ("a line\twith a tab but no header\n", ["a line"]),
    ],
)
def test_the_texts_of_a_file(tmp_path: Path, content: str, texts: list[str]) -> None:
    path = tmp_path / "q.tsv"
    path.write_text(content, encoding="utf-8")
    assert read_texts(path) == texts


def test_a_row_without_the_text_column_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text("label\ttext\npython\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"q.tsv, line 2: no column 2 \('text'\)"):
        read_texts(path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_texts(tmp_path / "missing.txt")
