"""The shape of the house: no import circle, no import up a floor, small task / study files.

Which imports count.  Every module under ``src/spacl`` is parsed with :mod:`ast` (nothing is
imported).  An edge ``a -> b`` is an ``import spacl.b`` / ``from spacl.b import x`` (or a
relative import resolving to ``spacl.b``).  Three graphs are read: module level only
(including module-level ``if`` / ``try`` blocks, not ``if TYPE_CHECKING:``), the one that
breaks an import (a partially initialised module); with the imports inside function and
class bodies (lazy imports) too; and with ``if TYPE_CHECKING:`` blocks too.  No circle is
allowed in any of them, inside a package as between floors (issue 40): a lazy or typing
import still ties two modules together.  ``from spacl.pkg import name`` points to the
submodule ``spacl.pkg.name`` when that is a module, else to ``spacl.pkg``; importing a
submodule does not count as an edge to its parent package (Python loads the parent
first, whatever the parent imports).

The floors (issue 21; :data:`FLOORS`, lowest first): ``studies`` -> ``tasks`` ->
``engine`` / ``losses`` / ``evaluate`` / ``models`` -> ``data`` / ``geometry`` /
``mining`` / ``alignment`` -> the base (``schema`` with ``schema_checks`` /
``schema_files``, ``_validation``...); the CLI, the commands and ``spacl.load`` sit on
top.  A module may import its own floor and the ones below; an import that runs back up
a floor fails the test, **lazy imports inside functions included** (they run later, but
still tie a low floor to a high one), ``if TYPE_CHECKING:`` blocks excepted.  Upward
imports allowed on purpose would be listed in :data:`ALLOWED_UPWARD` (empty: there are
none).  ``schema.task_entry`` reaches the tasks through the task registry (``importlib``
by name), not an import statement.

The size rule (issue 40, replacing issue 21's caps on files): no function anywhere over
80 physical lines, from ``def`` to its last line, docstring included, unless it carries a
one-line ``# long: <reason>`` (``src/spacl``, ``benchmarks`` and ``tests`` alike).
Files have no cap: size follows from what a module is about.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "spacl"
MAX_FUNCTION_LINES = 80
#: the floors, lowest first: a module may import its own floor and the ones below
#: (a package is named by its first component under ``spacl``; ``""`` is ``spacl`` itself)
FLOORS: tuple[tuple[str, ...], ...] = (
    ("_validation", "_progress", "_extras", "recipes", "schema", "schema_checks", "schema_files"),
    ("data", "geometry", "mining", "alignment"),
    ("engine", "losses", "evaluate", "models"),
    ("tasks",),
    ("studies",),
    ("trained", "commands", "cli", "__main__", ""),
)
#: ``(importer, imported)`` module pairs allowed to run up a floor, each with its reason
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module in ``path`` (``spacl.a.b``; a package's ``__init__``
    is the package)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module under ``root``: dotted name -> file."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _module_level_imports(
    body: list[ast.stmt], lazy: bool = False, typing_only: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements run when the module is imported (no ``if TYPE_CHECKING:``
    branch; its ``else`` counts); with ``lazy``, those inside function and class bodies
    too; with ``typing_only``, those of ``if TYPE_CHECKING:`` blocks too."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if typing_only or not _is_type_checking(node.test):
                yield from _module_level_imports(node.body, lazy, typing_only)
            yield from _module_level_imports(node.orelse, lazy, typing_only)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level_imports(block, lazy, typing_only)
            for handler in node.handlers:
                yield from _module_level_imports(handler.body, lazy, typing_only)
        elif isinstance(node, (ast.With, ast.For, ast.While)):
            yield from _module_level_imports(node.body, lazy, typing_only)
        elif lazy and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _module_level_imports(node.body, lazy, typing_only)


def _resolve(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    """The absolute module a ``from`` import names (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    base = name.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(
    source: str,
    name: str,
    known: Mapping[str, object],
    is_package: bool,
    lazy: bool = False,
    typing_only: bool = False,
) -> set[str]:
    """The ``spacl`` modules (keys of ``known``) that module ``name`` imports at module
    level (``lazy``: inside functions too; ``typing_only``: in ``if TYPE_CHECKING:`` too)."""
    found: set[str] = set()
    for node in _module_level_imports(ast.parse(source).body, lazy, typing_only):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _resolve(node, name, is_package)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        found.update(t for t in targets if t in known and t != name)
    return found


def import_graph(
    root: Path = ROOT, lazy: bool = False, typing_only: bool = False
) -> dict[str, set[str]]:
    """Module -> the ``spacl`` modules it imports at module level (``lazy``: inside
    functions too; ``typing_only``: in ``if TYPE_CHECKING:`` blocks too)."""
    files = modules(root)
    return {
        name: imports_of(
            path.read_text(), name, files, path.name == "__init__.py", lazy, typing_only
        )
        for name, path in files.items()
    }


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or round a circle (the
    strongly connected components of more than one module, Tarjan's algorithm,
    iterative), each sorted, sorted by first name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def floor_of(module: str) -> int:
    """The floor of ``spacl.<pkg>...`` (``KeyError`` for a package no floor names)."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    for level, packages in enumerate(FLOORS):
        if top in packages:
            return level
    raise KeyError(f"{module}: package {top!r} is on no floor (add it to FLOORS)")


def upward_imports(
    graph: Mapping[str, set[str]], allowed: Mapping[tuple[str, str], str] = ALLOWED_UPWARD
) -> list[str]:
    """Every ``a -> b`` of ``graph`` where ``b`` is on a higher floor than ``a``."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if floor_of(b) > floor_of(a) and (a, b) not in allowed
    )


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as ``[a, b, ..., a]``, or ``None`` (depth-first
    search, iterative; nodes visited in sorted order so the answer is stable)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def function_lengths(source: str) -> Iterator[tuple[str, int, int]]:
    """``(name, first line, length)`` of every function and method, nested ones too; the
    length counts the physical lines from ``def`` to the end of the body, the docstring,
    comments and blank lines inside included."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        end = node.end_lineno or node.lineno
        yield node.name, node.lineno, end - node.lineno + 1


def test_finder_sees_a_synthetic_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_graph_reading_rules() -> None:
    known = {"spacl.x": 0, "spacl.y": 0, "spacl.z": 0, "spacl.pkg": 0, "spacl.pkg.sub": 0}
    source = (
        "from typing import TYPE_CHECKING\n"
        "import spacl.x\n"
        "from spacl.pkg import sub\n"
        "if TYPE_CHECKING:\n    from spacl.y import Y\n"
        "def f():\n    from spacl.z import Z\n"
    )
    assert imports_of(source, "spacl.w", known, False) == {"spacl.x", "spacl.pkg.sub"}
    everywhere = imports_of(source, "spacl.w", known, False, lazy=True)
    assert everywhere == {"spacl.x", "spacl.pkg.sub", "spacl.z"}  # never TYPE_CHECKING's
    relative = "from . import sub\nfrom ..y import Y\n"
    assert imports_of(relative, "spacl.pkg.other", known, False) == {"spacl.pkg.sub", "spacl.y"}


def test_no_import_circle() -> None:
    graph = import_graph()
    assert "spacl.schema" in graph and len(graph) > 50
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_circle_finder_counts_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    """A synthetic package whose only circle runs through a function-local import and an
    ``if TYPE_CHECKING:`` block: invisible to the module-level graph, found by the full one."""
    pkg = tmp_path / "spacl" / "pkg"
    pkg.mkdir(parents=True)
    (tmp_path / "spacl" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from spacl.pkg.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from spacl.pkg.c import g\n    return g\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from spacl.pkg.a import x\n"
    )
    (pkg / "d.py").write_text("import spacl.pkg.a\n")
    root = tmp_path / "spacl"
    assert circles(import_graph(root)) == []
    assert circles(import_graph(root, lazy=True)) == []
    full = import_graph(root, lazy=True, typing_only=True)
    assert circles(full) == [["spacl.pkg.a", "spacl.pkg.b", "spacl.pkg.c"]]


def test_no_circle_even_through_lazy_or_type_checking_imports() -> None:
    """Inside a package as between floors: function-local and ``TYPE_CHECKING`` imports
    count, and no circle remains (issue 40 removed the last, SPACLLoss's helpers)."""
    found = circles(import_graph(lazy=True, typing_only=True))
    assert found == [], "\n".join(" <-> ".join(c) for c in found)


def test_floor_rule_rejects_an_upward_arrow() -> None:
    """A synthetic graph: data importing the engine (lazily or not) runs up a floor."""
    graph = {
        "spacl.data.x": {"spacl.engine.y", "spacl.mining.z"},
        "spacl.tasks.t": {"spacl.data.x", "spacl.tasks.u"},
        "spacl.studies.s": {"spacl.tasks.t"},
        "spacl.tasks.u": {"spacl.studies.s"},
    }
    assert upward_imports(graph) == [
        "spacl.data.x -> spacl.engine.y",
        "spacl.tasks.u -> spacl.studies.s",
    ]
    assert upward_imports(graph, {("spacl.data.x", "spacl.engine.y"): "why"}) == [
        "spacl.tasks.u -> spacl.studies.s"
    ]
    with pytest.raises(KeyError, match="on no floor"):
        floor_of("spacl.attic.x")


def test_every_package_is_on_a_floor() -> None:
    for name in modules():
        floor_of(name)


def test_no_import_runs_up_a_floor() -> None:
    """Lazy imports inside functions count; ``if TYPE_CHECKING:`` blocks do not."""
    up = upward_imports(import_graph(lazy=True))
    assert not up, "imports up a floor:\n" + "\n".join(up)


def long_functions(source: str) -> list[str]:
    """Functions over :data:`MAX_FUNCTION_LINES` lines without a ``# long: <reason>``
    comment on the lines just above their ``def`` (``name (line N): L lines``)."""
    lines = source.splitlines()
    found = []
    for name, line, length in function_lengths(source):
        if length <= MAX_FUNCTION_LINES:
            continue
        head = lines[max(0, line - 4) : line - 1]
        if not any(text.strip().startswith("# long:") and len(text.strip()) > 10 for text in head):
            found.append(f"{name} (line {line}): {length} lines")
    return found


def test_size_rule_reads_a_long_function() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(70))
    (name, _, length) = next(function_lengths(f'def f():\n    """doc\n    more"""\n{body}'))
    assert (name, length) == ("f", 73)  # the docstring counts
    doc = '    """' + "\n".join(["doc"] * 12) + '"""\n'
    assert long_functions(f"def g():\n{doc}{body}") == ["g (line 1): 83 lines"]
    long_body = "".join(f"    x{i} = {i}\n" for i in range(90))
    assert long_functions(f"def g():\n{long_body}") == ["g (line 1): 91 lines"]
    reason = "# long: one compiled scan, its state in locals\n"
    assert long_functions(f"{reason}def g():\n{long_body}") == []
    assert long_functions(f"# long:\ndef g():\n{long_body}") != []  # a reason is needed


REPO = ROOT.parents[1]
#: the folders beside the package that the size rule covers too (their ids are relative
#: to the repository root; the package's stay relative to :data:`ROOT`)
SIZE_RULE_DIRS = (REPO / "benchmarks", REPO / "tests")


def size_rule_paths() -> list[Path]:
    """Every ``*.py`` the size rule reads: the package's, then the benchmarks' and tests'."""
    return sorted(ROOT.rglob("*.py")) + [p for d in SIZE_RULE_DIRS for p in sorted(d.rglob("*.py"))]


def size_rule_id(path: Path) -> str:
    """A readable test id: relative to :data:`ROOT` inside the package (``losses/spacl.py``),
    to the repository root elsewhere (``benchmarks/kg.py``)."""
    return str(path.relative_to(ROOT if path.is_relative_to(ROOT) else REPO))


@pytest.mark.parametrize("path", size_rule_paths(), ids=size_rule_id)
def test_long_functions_are_split_or_say_why(path: Path) -> None:
    """Size follows from design (issue 40): no file cap; a function over 80 physical lines
    (docstring included) is split by meaning or carries a one-line ``# long: <reason>``,
    in the package, the benchmarks and the tests alike."""
    long = long_functions(path.read_text())
    assert not long, f"{path.name}: functions over {MAX_FUNCTION_LINES} lines: {long}"
