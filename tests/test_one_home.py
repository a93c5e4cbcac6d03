"""Every public name has one home: a module lists in ``__all__`` only what it defines.

A module that imports a name only to hand it on (``verdicts`` re-exporting ``stats``'
``fmt``, ``tasks.kg.train`` re-exporting the link losses) makes two import paths for one
thing and hides where it lives.  Packages (``__init__.py``) are the one exception: they
are the front door of their modules, and say so in their docstrings.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "spacl"


def handed_on(source: str) -> list[str]:
    """The names in ``__all__`` of ``source`` that the module does not define itself
    (a ``def``, a ``class`` or an assignment, at any depth: a name bound under ``if`` or
    ``try`` counts as defined)."""
    tree = ast.parse(source)
    defined: set[str] = set()
    public: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, ast.List | ast.Tuple)
            public = [ast.literal_eval(e) for e in node.value.elts]
    return [name for name in public if name not in defined]


def test_the_reader_finds_a_name_handed_on() -> None:
    """The counter-example: an imported name listed in ``__all__`` is found, a defined
    one (function, class, constant, a name bound under ``if``) is not."""
    source = (
        "from spacl.studies.stats import fmt, welch\n"
        "import math as maths\n"
        "__all__ = ['fmt', 'maths', 'own', 'Own', 'LIMIT', 'maybe']\n"
        "def own(): return welch\n"
        "class Own: pass\n"
        "LIMIT = 3\n"
        "if LIMIT:\n"
        "    maybe = 1\n"
    )
    assert handed_on(source) == ["fmt", "maths"]
    assert handed_on("__all__ = ['f']\ndef f(): pass\n") == []


MODULES = sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_a_module_lists_only_what_it_defines(path: Path) -> None:
    found = handed_on(path.read_text())
    assert not found, (
        f"{path.relative_to(SRC)} lists names it imports: {found}; import them from "
        "their own module instead"
    )
