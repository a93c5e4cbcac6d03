"""The shape of the house: no import circle, no import up a floor, small task / study files.

Which imports count.  Every module under ``src/spacl`` is parsed with :mod:`ast` (nothing is
imported).  An edge ``a -> b`` is an ``import spacl.b`` / ``from spacl.b import x`` (or a
relative import resolving to ``spacl.b``), at any depth of nesting (``if`` / ``try`` /
``with`` / loops / ``match`` cases), or a dynamic import of a name the source spells:
``importlib.import_module("spacl.b")`` or ``__import__("spacl.b")``, also through an alias
(``import importlib as il``, ``from importlib import import_module as im``, a name rebound
to one; :func:`importer_names`) (the name a literal, a module-level string constant or
``__name__``), and ``import_module(f"spacl.b.{x}")``
(a name built from a literal beginning) is an edge to every module under ``spacl.b.``.
An edge to ``spacl.pkg.sub`` from outside ``spacl.pkg`` is one to ``spacl.pkg`` too: its
``__init__`` runs first.  An importer handed on uncalled counts as unresolved.
Imports whose module name is data count too (the audit after issue 40).  A *loader*
(:data:`LOADERS`: ``ObjectiveSpec.load`` of ``spacl.losses.registry``, ``_runner`` of
``spacl.tasks``) imports the ``"spacl.b:attr"`` targets of its registry: its dynamic
import is an edge to every module named by the target of a registering call anywhere in
the tree (``ObjectiveSpec(name, target, ...)``, ``@register_task(..., runner=...)``; the
target a literal, a constant or an f-string of those).  A *factory*
(:data:`LAZY_FACTORIES`: ``spacl._lazy.lazy_attributes``) is resolved where it is
called: ``lazy_attributes(X, MAP)``, ``X`` a literal or ``__name__`` and ``MAP`` a dict
literal or a module-level name bound once to one, is a lazy edge from the caller to
``X + "." + each value``.  Every other dynamic import of a name the source does not spell,
a registration or factory call it cannot read, and a ``"spacl.a:b"`` string in no
loader's registry, fails :func:`test_every_dynamic_import_is_resolved` unless
:data:`ALLOWED_UNRESOLVED` (empty) names it.  Not seen: a module imported by other means
(``importlib.util`` specs, ``runpy``), a registry entry made without its registering call
(``dataclasses.replace`` of a row).  Three graphs are read: module level only
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
still tie a low floor to a high one), and ``if TYPE_CHECKING:`` blocks too (a type a low
floor names from a high one ties them as well; issue 40 counts them).  Upward
imports allowed on purpose would be listed in :data:`ALLOWED_UPWARD` (empty: there are
none).  No import read as above is exempt from either rule: the schema's task registry
is filled by the tasks and read where they are known (``spacl.tasks``), so the schema
imports no task, not even by name inside a function.

The size rule (issue 40, replacing issue 21's caps on files): no function anywhere over
80 physical lines, from ``def`` to its last line, docstring included, unless it carries a
one-line ``# long: <reason>`` (``src/spacl``, ``benchmarks`` and ``tests`` alike).
Files have no cap: size follows from what a module is about.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "spacl"
MAX_FUNCTION_LINES = 80
#: the floors, lowest first: a module may import its own floor and the ones below
#: (a package is named by its first component under ``spacl``; ``""`` is ``spacl`` itself)
FLOORS: tuple[tuple[str, ...], ...] = (
    (
        "_validation",
        "_progress",
        "_extras",
        "_lazy",
        "recipes",
        "schema",
        "schema_checks",
        "schema_files",
    ),
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


#: calls that import a module named by a string (``importlib.import_module`` also when
#: imported by name); :func:`importer_names` adds a module's aliases of them
DYNAMIC_IMPORTS = ("importlib.import_module", "import_module", "__import__", "importlib.__import__")
#: the functions of DYNAMIC_IMPORTS by module: what an alias of that module reaches
IMPORTING_FUNCTIONS = {"importlib": ("import_module", "__import__"), "builtins": ("__import__",)}


def importer_names(tree: ast.AST) -> set[str]:
    """The callee spellings that import a module by name in ``tree``: DYNAMIC_IMPORTS,
    ``X.import_module`` for ``import importlib as X``, ``Y`` for ``from importlib import
    import_module as Y`` (``__import__`` too, and ``builtins``), and ``Z`` for a name bound
    to one of those (``Z = importlib.import_module``), at any depth (the audit of issue
    40: an alias hid a circle)."""
    names = set(DYNAMIC_IMPORTS) | {"builtins.__import__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in IMPORTING_FUNCTIONS:
                    bound = alias.asname or alias.name
                    names.update(f"{bound}.{f}" for f in IMPORTING_FUNCTIONS[alias.name])
        elif isinstance(node, ast.ImportFrom) and node.module in IMPORTING_FUNCTIONS:
            for alias in node.names:
                if alias.name in IMPORTING_FUNCTIONS[node.module]:
                    names.add(alias.asname or alias.name)
    changed = True
    while changed:  # names bound to an importer, also in a chain (a = b = import_module)
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _dotted(node.value) in names:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in names:
                        names.add(target.id)
                        changed = True
    return names


#: the fields of a compound statement that hold statements run with it
BLOCK_FIELDS = ("body", "orelse", "finalbody")


def _blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists nested in ``node``: bodies, ``else`` and ``finally`` blocks,
    ``except`` handlers and ``match`` cases (``if`` / ``try`` / ``with`` / loops /
    ``match``, async forms included)."""
    for field in BLOCK_FIELDS:
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        yield part.body


def _statements(
    body: list[ast.stmt], lazy: bool = False, typing_only: bool = False
) -> Iterator[ast.stmt]:
    """The statements run when the module is imported, at any depth of nesting (no
    ``if TYPE_CHECKING:`` branch; its ``else`` counts); with ``lazy``, those inside
    function and class bodies too; with ``typing_only``, those of ``if TYPE_CHECKING:``
    blocks too."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            if typing_only or not _is_type_checking(node.test):
                yield from _statements(node.body, lazy, typing_only)
            yield from _statements(node.orelse, lazy, typing_only)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if lazy:
                yield from _statements(node.body, lazy, typing_only)
        else:
            for block in _blocks(node):
                yield from _statements(block, lazy, typing_only)


def _module_level_imports(
    body: list[ast.stmt], lazy: bool = False, typing_only: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements among :func:`_statements`."""
    for node in _statements(body, lazy, typing_only):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _own_expressions(node: ast.stmt) -> Iterator[ast.AST]:
    """Every node of ``node`` but the statements nested in it (its condition, iterable,
    ``with`` items, ``match`` subject, decorators, assigned value...)."""
    nested = {id(s) for block in _blocks(node) for s in block}
    todo = [child for child in ast.iter_child_nodes(node) if id(child) not in nested]
    while todo:
        child = todo.pop()
        if isinstance(child, (ast.stmt, ast.ExceptHandler, ast.match_case)):
            continue
        yield child
        todo.extend(ast.iter_child_nodes(child))


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of an attribute chain (``""`` when it is not one)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _text(node: ast.AST, name: str, constants: Mapping[str, str]) -> str | None:
    """The whole string ``node`` spells, when the source says it: a literal, ``__name__``,
    a module-level string constant, and an f-string or ``+`` of those
    (``f"{_L}.kg:LinkSPACLLoss"``); ``None`` otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return name if node.id == "__name__" else constants.get(node.id)
    if isinstance(node, ast.FormattedValue) and node.format_spec is None:
        return _text(node.value, name, constants) if node.conversion in (-1, 115) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [_text(node.left, name, constants), _text(node.right, name, constants)]
    elif isinstance(node, ast.JoinedStr):
        parts = [_text(part, name, constants) for part in node.values]
    else:
        return None
    return None if None in parts else "".join(p for p in parts if p is not None)


def _string_constants(tree: ast.Module, name: str = "") -> dict[str, str]:
    """The module's ``NAME = "..."`` string constants (top-level assignments, in order; the
    value an f-string of the constants above counts: ``_SPACL = f"{_L}.spacl:SPACLLoss"``)."""
    found: dict[str, str] = {}
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        text = None if value is None else _text(value, name, found)
        if text is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = text
    return found


#: the methods that change a dict in place (a map so changed is no constant)
MUTATORS = ("update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__")


def _dict_constants(
    tree: ast.Module, name: str, constants: Mapping[str, str]
) -> dict[str, list[str]]:
    """The module's ``NAME = {...}`` dict literals whose values the source spells (top-level
    assignments): ``NAME -> [values]``; a name bound twice, or changed in place
    (``NAME[k] = v``, ``NAME.update(...)``...), is none."""
    found: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            values = [_text(v, name, constants) for v in value.values]
            if None not in values and None not in value.keys:  # no ``**other``
                found[target.id] = [v for v in values if v is not None]
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            changed = node.value
        elif isinstance(node, ast.Attribute) and node.attr in MUTATORS:
            changed = node.value
        else:
            changed = node if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Del) else None
        if isinstance(changed, ast.Name):
            found.pop(changed.id, None)
    stores = [
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    ]
    return {k: v for k, v in found.items() if stores.count(k) == 1}


def _named_modules(
    arg: ast.expr | None, name: str, constants: Mapping[str, str]
) -> tuple[str, bool] | None:
    """What a dynamic import's argument names: ``(module, False)`` for a whole name
    (:func:`_text`: a string literal, a module-level string constant, ``__name__``),
    ``(prefix, True)`` for a name built from a literal beginning
    (``f"spacl.studies.{name}"``, ``f"{__name__}.{sub}"``, ``"spacl.x." + sub``); ``None``
    when nothing of it is known."""
    if arg is None:
        return None
    whole = _text(arg, name, constants)
    if whole is not None:
        return whole, False
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        left = _text(arg.left, name, constants)
        return (left, True) if left else None
    if isinstance(arg, ast.JoinedStr):
        prefix = ""
        for part in arg.values:
            text = _text(part, name, constants)
            if text is None:
                return (prefix, True) if prefix else None
            prefix += text
    return None


def _argument(call: ast.Call, position: int | None, keyword: str) -> ast.expr | None:
    """The argument of ``call`` at ``position`` or passed as ``keyword`` (``None`` when
    absent; the call itself, which spells no string, when ``*args`` / ``**kwargs`` hide it)."""
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return call
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def _qualnames(body: list[ast.stmt]) -> dict[int, str]:
    """``id`` of every node in ``body`` -> the function or class it runs in (``"f"``,
    ``"C.m"``, ``"f.inner"``; ``""`` at module level; decorators and defaults run outside)."""
    found: dict[int, str] = {}
    todo: list[tuple[ast.AST, str]] = [(stmt, "") for stmt in body]
    while todo:
        node, qual = todo.pop()
        found[id(node)] = qual
        inner, own = qual, set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner, own = f"{qual}.{node.name}".lstrip("."), {id(s) for s in node.body}
        todo.extend((c, inner if id(c) in own else qual) for c in ast.iter_child_nodes(node))
    return found


#: A loader imports a module whose name is data, read from a registry of ``"module:attr"``
#: targets: ``(loader module, function)`` -> how a target is registered (the registering
#: call, the target's position and keyword).  A dynamic import there is an edge to every
#: module named by the target of any such call in the tree.  Each loader reads its own
#: registry: edges from every loader to every target would make false arrows, the loss
#: registry running up to the tasks (``spacl.losses.registry -> spacl.tasks.kg``) and a
#: circle through the engine (``spacl.losses.registry -> spacl.tasks.image.trainer``, a task
#: runner, which imports the engine's objectives, which import the loss registry).
LOADERS: dict[tuple[str, str], tuple[str, int | None, str]] = {
    ("spacl.losses.registry", "ObjectiveSpec.load"): ("ObjectiveSpec", 1, "target"),
    ("spacl.tasks", "_runner"): ("register_task", None, "runner"),
}
#: ``lazy_attributes(package, public)`` factories: their own import
#: (``import_module(f"{package}.{module}")``) is resolved where they are called, an edge
#: from the caller to ``package + "." + each value of public``; (module, function) -> the
#: factory's name
LAZY_FACTORIES: dict[tuple[str, str], str] = {
    ("spacl._lazy", "lazy_attributes.__getattr__"): "lazy_attributes"
}
#: dynamic imports whose target the test cannot resolve, allowed on purpose:
#: ``(module, function) -> reason`` (empty: every one is resolved)
ALLOWED_UNRESOLVED: dict[tuple[str, str], str] = {}
#: a registry target: ``"spacl.a.b:attr"``
TARGET_SHAPE = re.compile(r"spacl(\.\w+)*:\w+(\.\w+)*")


class Rules(NamedTuple):
    """How the names of data-driven dynamic imports are found (the module docstring)."""

    loaders: Mapping[tuple[str, str], tuple[str, int | None, str]]
    factories: Mapping[tuple[str, str], str]
    allowed: Mapping[tuple[str, str], str]


#: the rules of this tree
RULES = Rules(LOADERS, LAZY_FACTORIES, ALLOWED_UNRESOLVED)
#: no loader, no factory, nothing allowed: every data-driven import unresolved
NO_RULES = Rules({}, {}, {})


def _parsed(root: Path) -> dict[str, tuple[ast.Module, bool]]:
    """Every module under ``root``: name -> (its tree, whether a package)."""
    return {
        name: (ast.parse(path.read_text()), path.name == "__init__.py")
        for name, path in modules(root).items()
    }


def registrations(
    trees: Mapping[str, tuple[ast.Module, bool]], rules: Rules = RULES
) -> tuple[dict[tuple[str, str], set[str]], set[str], list[tuple[str, int, str, str, str]]]:
    """The registries of :data:`LOADERS` as the source spells them: loader -> the modules
    its targets name (in ``trees``), every target registered, and the registering calls
    whose target the source does not spell (as :func:`unresolved_dynamic_imports` lists)."""
    found: dict[tuple[str, str], set[str]] = {loader: set() for loader in rules.loaders}
    registered: set[str] = set()
    unknown: list[tuple[str, int, str, str, str]] = []
    for name, (tree, _) in trees.items():
        constants = _string_constants(tree, name)
        quals = _qualnames(tree.body)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for loader, (call, position, keyword) in rules.loaders.items():
                if _dotted(node.func).rsplit(".", 1)[-1] != call:
                    continue
                arg = _argument(node, position, keyword)
                if arg is None or (isinstance(arg, ast.Constant) and arg.value is None):
                    continue
                text = _text(arg, name, constants)
                if text is None:
                    where = quals.get(id(node), "")
                    unknown.append((name, node.lineno, where, "registration", ast.unparse(node)))
                    continue
                registered.add(text)
                if text.partition(":")[0] in trees:
                    found[loader].add(text.partition(":")[0])
    return found, registered, unknown


def _lazy_modules(
    call: ast.Call, name: str, constants: Mapping[str, str], maps: Mapping[str, list[str]]
) -> set[str] | None:
    """The modules ``lazy_attributes(package, public)`` imports on first use:
    ``package + "." + each value of public`` (``package`` spelled by :func:`_text`,
    ``public`` a dict literal or a module-level name bound to one); ``None`` when the source
    does not spell them."""
    package = _text(_argument(call, 0, "package") or call, name, constants)
    public = _argument(call, 1, "public")
    if isinstance(public, ast.Name):
        values = maps.get(public.id)
    elif isinstance(public, ast.Dict) and None not in public.keys:
        texts = [_text(v, name, constants) for v in public.values]
        values = None if None in texts else [t for t in texts if t is not None]
    else:
        values = None
    if package is None or values is None:
        return None
    return {f"{package}.{value}" for value in values}


def dynamic_imports(
    body: list[ast.stmt],
    name: str,
    known: Mapping[str, object],
    lazy: bool = False,
    typing_only: bool = False,
    constants: Mapping[str, str] | None = None,
    loads: Mapping[str, set[str]] | None = None,
    importers: set[str] | None = None,
) -> set[str]:
    """The ``spacl`` modules (keys of ``known``) that the dynamic imports among
    :func:`_statements` name (a call of one of ``importers``, by default
    :func:`importer_names` of ``body``): ``importlib.import_module("spacl.x")`` (or ``__import__``)
    is an edge to ``spacl.x``; a name built from a literal beginning
    (``import_module(f"spacl.studies.{name}")``) an edge to every module under it; a name
    the source does not spell, in a function of ``loads`` (a loader), an edge to each
    module ``loads`` gives it (:func:`registrations`)."""
    found: set[str] = set()
    quals = _qualnames(body)
    if importers is None:
        importers = importer_names(ast.Module(body=body, type_ignores=[]))
    for stmt in _statements(body, lazy, typing_only):
        for node in _own_expressions(stmt):
            if not (isinstance(node, ast.Call) and _dotted(node.func) in importers):
                continue
            named = _named_modules(_argument(node, 0, "name"), name, constants or {})
            if named is None:
                found.update((loads or {}).get(quals[id(node)], ()))
                continue
            text, is_prefix = named
            if is_prefix:
                found.update(m for m in known if m.startswith(text) and m != text.rstrip("."))
            elif text in known:
                found.add(text)
    found.discard(name)
    return found


def lazy_attribute_imports(
    tree: ast.Module, name: str, known: Mapping[str, object], rules: Rules = RULES
) -> set[str]:
    """The ``spacl`` modules (keys of ``known``) that the module's ``lazy_attributes(X,
    MAP)`` calls import on first use (:func:`_lazy_modules`): lazy imports, anywhere in the
    module but ``if TYPE_CHECKING:`` blocks."""
    constants = _string_constants(tree, name)
    maps = _dict_constants(tree, name, constants)
    factories = set(rules.factories.values())
    found: set[str] = set()
    for stmt in _statements(tree.body, lazy=True):
        for node in _own_expressions(stmt):
            if isinstance(node, ast.Call) and _dotted(node.func).rsplit(".", 1)[-1] in factories:
                found.update(
                    m for m in _lazy_modules(node, name, constants, maps) or () if m in known
                )
    found.discard(name)
    return found


def _resolve(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    """The absolute module a ``from`` import names (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    base = name.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _tree_imports(
    tree: ast.Module,
    name: str,
    known: Mapping[str, object],
    is_package: bool,
    lazy: bool = False,
    typing_only: bool = False,
    loads: Mapping[str, set[str]] | None = None,
    rules: Rules = RULES,
) -> set[str]:
    """:func:`imports_of` of a parsed module."""
    found: set[str] = set()
    for node in _module_level_imports(tree.body, lazy, typing_only):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _resolve(node, name, is_package)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        found.update(t for t in targets if t in known and t != name)
    constants = _string_constants(tree, name)
    importers = importer_names(tree)
    dynamic = dynamic_imports(
        tree.body, name, known, lazy, typing_only, constants, loads, importers
    )
    deferred = lazy_attribute_imports(tree, name, known, rules) if lazy else set()
    return found | dynamic | deferred


def imports_of(
    source: str,
    name: str,
    known: Mapping[str, object],
    is_package: bool,
    lazy: bool = False,
    typing_only: bool = False,
    loads: Mapping[str, set[str]] | None = None,
) -> set[str]:
    """The ``spacl`` modules (keys of ``known``) that module ``name`` imports at module
    level (``lazy``: inside functions too; ``typing_only``: in ``if TYPE_CHECKING:`` too),
    by an import statement at any depth of nesting, by a dynamic import of a known name or
    in a loader (:func:`dynamic_imports`), and (``lazy``) by ``lazy_attributes`` calls
    (:func:`lazy_attribute_imports`)."""
    return _tree_imports(ast.parse(source), name, known, is_package, lazy, typing_only, loads)


def import_graph(
    root: Path = ROOT, lazy: bool = False, typing_only: bool = False, rules: Rules = RULES
) -> dict[str, set[str]]:
    """Module -> the ``spacl`` modules it imports at module level (``lazy``: inside
    functions too; ``typing_only``: in ``if TYPE_CHECKING:`` blocks too); the loaders and
    factories of ``rules`` read as :func:`registrations` and :func:`lazy_attribute_imports`
    say."""
    trees = _parsed(root)
    targets = registrations(trees, rules)[0]
    graph: dict[str, set[str]] = {}
    for name, (tree, is_package) in trees.items():
        loads = {qual: found for (module, qual), found in targets.items() if module == name}
        found = _tree_imports(tree, name, trees, is_package, lazy, typing_only, loads, rules)
        graph[name] = found | _entered_packages(name, found, trees)
    return graph


def _entered_packages(name: str, targets: set[str], known: Mapping[str, object]) -> set[str]:
    """The packages that importing ``targets`` runs first: every package above a target
    (its ``__init__``), unless it is also above ``name`` (already being imported).  So
    ``spacl.x -> spacl.pkg.sub`` is also ``spacl.x -> spacl.pkg``, and a ``pkg/__init__``
    that imports ``spacl.x`` closes a circle (the audit of issue 40)."""
    above_name = {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
    entered: set[str] = set()
    for target in targets:
        for i in range(1, target.count(".") + 1):
            package = target.rsplit(".", i)[0]
            if package in known and package not in above_name and package != name:
                entered.add(package)
    return entered


def unresolved_dynamic_imports(
    root: Path = ROOT, rules: Rules = RULES
) -> list[tuple[str, int, str, str, str]]:
    """Every dynamic import whose target the test cannot resolve, ``(module, line,
    function, kind, code)``: an ``import_module`` / ``__import__`` of a name the source
    does not spell outside the loaders, factories and allowed sites of ``rules`` (kind
    ``import``), a factory call whose package or map it does not spell (``lazy``), a
    registration whose target it does not spell (``registration``) and a ``"spacl.a:b"``
    string registered in no loader's registry (``target``: a loader may read it)."""
    trees = _parsed(root)
    _, registered, found = registrations(trees, rules)
    factories = set(rules.factories.values())
    resolved = {*rules.loaders, *rules.factories, *rules.allowed}
    for name, (tree, _) in trees.items():
        constants = _string_constants(tree, name)
        maps = _dict_constants(tree, name, constants)
        quals = _qualnames(tree.body)
        importers = importer_names(tree)
        # a callee, or the value of a plain rebinding (``importer_names`` follows it)
        followed = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)} | {
            id(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) for t in n.targets)
        }
        for node in ast.walk(tree):
            site = (name, getattr(node, "lineno", 0), quals.get(id(node), ""))
            if (
                isinstance(node, ast.Name | ast.Attribute)
                and id(node) not in followed
                and _dotted(node) in importers
                and isinstance(node.ctx, ast.Load)
            ):  # an importer handed on (``map(importlib.import_module, names)``): unread
                found.append((*site, "import", ast.unparse(node)))
            text = (
                _text(node, name, constants)
                if isinstance(node, ast.Constant | ast.JoinedStr)
                else None
            )
            if text is not None and TARGET_SHAPE.fullmatch(text) and text not in registered:
                found.append((*site, "target", text))
            if not isinstance(node, ast.Call):
                continue
            func = _dotted(node.func)
            if func in importers and (name, site[2]) not in resolved:
                if _named_modules(_argument(node, 0, "name"), name, constants) is None:
                    found.append((*site, "import", ast.unparse(node)))
            elif func.rsplit(".", 1)[-1] in factories:
                if _lazy_modules(node, name, constants, maps) is None:
                    found.append((*site, "lazy", ast.unparse(node)))
    return sorted(found)


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


def test_graph_reading_sees_dynamic_and_nested_imports() -> None:
    """Counter-examples the first reader missed (review of issue 40): dynamic imports of
    a literal, a module constant, ``__import__`` or an f-string's literal beginning, and
    imports in ``match`` cases and a loop's ``else``."""
    names = "spacl.u spacl.v spacl.w spacl.x spacl.y spacl.z spacl.st spacl.st.a spacl.st.b"
    known = dict.fromkeys(names.split(), 0)
    source = (
        "import importlib\n"
        "from importlib import import_module\n"
        "TARGET = 'spacl.y'\n"
        "importlib.import_module('spacl.x')\n"
        "def f(kind, name):\n"
        "    match kind:\n"
        "        case 'z':\n"
        "            from spacl.z import Z\n"
        "        case _:\n"
        "            import_module(f'spacl.st.{name}')\n"
        "    return import_module(TARGET), __import__('spacl.u')\n"
        "def g(name):\n"
        "    for _ in range(2):\n"
        "        pass\n"
        "    else:\n"
        "        import spacl.v\n"
        "    return importlib.import_module(name)\n"  # nothing known: no edge
    )
    assert imports_of(source, "spacl.w", known, False) == {"spacl.x"}
    lazy = imports_of(source, "spacl.w", known, False, lazy=True)
    assert lazy == {
        "spacl.u",
        "spacl.v",
        "spacl.x",
        "spacl.y",
        "spacl.z",
        "spacl.st.a",
        "spacl.st.b",
    }
    own = "import importlib\ndef f(sub):\n    return importlib.import_module(f'{__name__}.{sub}')\n"
    assert imports_of(own, "spacl.st", known, True, lazy=True) == {"spacl.st.a", "spacl.st.b"}


def _package(root: Path, files: Mapping[str, str]) -> Path:
    """A synthetic ``spacl`` tree under ``root``: ``{"pkg/a.py": source}`` (every folder a
    package); returns the ``spacl`` folder."""
    top = root / "spacl"
    for rel, source in {"__init__.py": "", **files}.items():
        path = top / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        init = path.parent / "__init__.py"
        if not init.exists():
            init.write_text("")
        path.write_text(source)
    return top


def test_circle_and_floor_rules_count_dynamic_imports(tmp_path: Path) -> None:
    """Synthetic packages whose only circles run through an ``importlib`` literal and a
    lazy import inside a ``match`` case, and whose only upward arrow is an f-string
    import: invisible to the statement reader, found now."""
    root = _package(
        tmp_path,
        {
            "pkg/a.py": "from spacl.pkg.b import f\n",
            "pkg/b.py": (
                "import importlib\ndef f():\n    return importlib.import_module('spacl.pkg.a')\n"
            ),
            "pkg/c.py": "from spacl.pkg.d import g\n",
            "pkg/d.py": (
                "def g(kind):\n"
                "    match kind:\n"
                "        case 'c':\n"
                "            from spacl.pkg.c import x\n"
                "            return x\n"
            ),
            "data/x.py": (
                "import importlib\n"
                "def load(name):\n"
                "    return importlib.import_module(f'spacl.engine.{name}')\n"
            ),
            "engine/y.py": "",
        },
    )
    assert circles(import_graph(root)) == []
    lazy = import_graph(root, lazy=True)
    assert circles(lazy) == [["spacl.pkg.a", "spacl.pkg.b"], ["spacl.pkg.c", "spacl.pkg.d"]]
    assert upward_imports({k: v for k, v in lazy.items() if not k.startswith("spacl.pkg")}) == [
        "spacl.data.x -> spacl.engine",  # the package's __init__ runs first
        "spacl.data.x -> spacl.engine.y",
    ]


def test_circle_rules_see_aliased_importers_and_entered_packages(tmp_path: Path) -> None:
    """The audit after issue 40 built circles the test missed: through ``import importlib
    as il; il.import_module(...)``, ``from importlib import import_module as im``, a
    name rebound to it, and ``spacl.x -> spacl.pkg.sub`` beside a ``pkg/__init__`` that
    imports ``spacl.x`` (importing the submodule runs the package first).  Each is a
    circle now; an importer handed on without a call is an unresolved dynamic import."""
    root = _package(
        tmp_path,
        {
            "one/a.py": "from spacl.one.b import f\n",
            "one/b.py": (
                "import importlib as il\ndef f():\n    return il.import_module('spacl.one.a')\n"
            ),
            "two/a.py": "from spacl.two.b import f\n",
            "two/b.py": (
                "from importlib import import_module as im\n"
                "def f():\n    return im('spacl.two.a')\n"
            ),
            "three/a.py": "from spacl.three.b import f\n",
            "three/b.py": (
                "import importlib\nload = importlib.import_module\nagain = load\n"
                "def f():\n    return again('spacl.three.a')\n"
            ),
            "four/x.py": "import spacl.four.pkg.sub\n",
            "four/pkg/__init__.py": "from spacl.four import x\n",
            "four/pkg/sub.py": "",
            "five/a.py": (
                "import importlib\n"
                "def f(names):\n    return list(map(importlib.import_module, names))\n"
            ),
        },
    )
    lazy = import_graph(root, lazy=True)
    assert circles(lazy) == [
        ["spacl.four.pkg", "spacl.four.x"],
        ["spacl.one.a", "spacl.one.b"],
        ["spacl.three.a", "spacl.three.b"],
        ["spacl.two.a", "spacl.two.b"],
    ]
    assert circles(import_graph(root)) == [["spacl.four.pkg", "spacl.four.x"]]
    unresolved = unresolved_dynamic_imports(root, NO_RULES)
    assert [(m, kind, code) for m, _, _, kind, code in unresolved] == [
        ("spacl.five.a", "import", "importlib.import_module")
    ]


def test_circle_and_floor_rules_count_registry_targets(tmp_path: Path) -> None:
    """Synthetic packages whose only circles and upward arrow run through registry
    targets (``register("a", runner="spacl.pkg.a:go")``, ``Entry("y", f"{__name__}:Y")``)
    that a loader imports by a name it reads at run time: unresolved without the loaders'
    registries, found with them."""
    root = _package(
        tmp_path,
        {
            "pkg/registry.py": (
                "import importlib\n"
                "RUNNERS = {}\n"
                "def register(name, *, runner=None):\n"
                "    RUNNERS[name] = runner\n"
                "def run(name):\n"
                "    module, _, attr = RUNNERS[name].partition(':')\n"
                "    return getattr(importlib.import_module(module), attr)()\n"
            ),
            "pkg/a.py": (
                "from spacl.pkg.registry import register\n"
                "register('a', runner='spacl.pkg.a:go')\n"
                "def go():\n    return 1\n"
            ),
            "data/reg.py": (
                "import importlib\n"
                "class Entry:\n"
                "    def __init__(self, name, target):\n"
                "        self.target = target\n"
                "    def load(self):\n"
                "        return importlib.import_module(self.target.partition(':')[0])\n"
            ),
            "engine/y.py": "from spacl.data.reg import Entry\nE = Entry('y', f'{__name__}:Y')\n",
        },
    )
    lazy = import_graph(root, lazy=True, rules=NO_RULES)
    assert circles(lazy) == [] and upward_imports(_floored(lazy)) == []
    unresolved = unresolved_dynamic_imports(root, NO_RULES)
    assert [(m, f, kind) for m, _, f, kind, _ in unresolved] == [
        ("spacl.data.reg", "Entry.load", "import"),
        ("spacl.engine.y", "", "target"),
        ("spacl.pkg.a", "", "target"),
        ("spacl.pkg.registry", "run", "import"),
    ]
    loaders = {
        ("spacl.pkg.registry", "run"): ("register", None, "runner"),
        ("spacl.data.reg", "Entry.load"): ("Entry", 1, "target"),
    }
    rules = Rules(loaders, {}, {})
    assert unresolved_dynamic_imports(root, rules) == []
    assert circles(import_graph(root, rules=rules)) == []  # the loaders run in functions
    lazy = import_graph(root, lazy=True, rules=rules)
    assert circles(lazy) == [
        ["spacl.data.reg", "spacl.engine.y"],
        ["spacl.pkg.a", "spacl.pkg.registry"],
    ]
    assert upward_imports(_floored(lazy)) == [
        "spacl.data.reg -> spacl.engine",
        "spacl.data.reg -> spacl.engine.y",
    ]


def _floored(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` without the synthetic ``spacl.pkg`` (on no floor)."""
    return {k: v for k, v in graph.items() if not k.startswith("spacl.pkg")}


def test_circle_and_floor_rules_count_lazy_attribute_maps(tmp_path: Path) -> None:
    """Synthetic packages whose only circle and upward arrow run through
    ``lazy_attributes(package, map)`` (a module constant, a dict literal): unresolved
    without the factory, found with it; a map the source does not spell stays listed."""
    factory = (
        "import importlib\n"
        "def lazy_attributes(package, public):\n"
        "    def __getattr__(name):\n"
        "        return getattr(importlib.import_module(f'{package}.{public[name]}'), name)\n"
        "    return __getattr__\n"
    )
    use = "from spacl.data.exports import lazy_attributes\n"
    root = _package(
        tmp_path,
        {
            "data/exports.py": factory,
            "pkg/__init__.py": use
            + "_PUBLIC = {'f': 'mod'}\n__getattr__ = lazy_attributes(__name__, _PUBLIC)\n",
            "pkg/mod.py": "from spacl.pkg import helper\n",
            "data/__init__.py": use
            + "__getattr__ = lazy_attributes('spacl.engine', {'M': 'model'})\n",
            "data/more.py": use + "__getattr__ = lazy_attributes(__name__, dict(a='b'))\n",
            "engine/model.py": "",
        },
    )
    lazy = import_graph(root, lazy=True, rules=NO_RULES)
    assert circles(lazy) == [] and upward_imports(_floored(lazy)) == []
    unresolved = unresolved_dynamic_imports(root, NO_RULES)
    assert [(m, f, kind) for m, _, f, kind, _ in unresolved] == [
        ("spacl.data.exports", "lazy_attributes.__getattr__", "import")
    ]
    rules = Rules(
        {}, {("spacl.data.exports", "lazy_attributes.__getattr__"): "lazy_attributes"}, {}
    )
    assert [(m, kind) for m, _, _, kind, _ in unresolved_dynamic_imports(root, rules)] == [
        ("spacl.data.more", "lazy")
    ]
    assert circles(import_graph(root, rules=rules)) == []  # imported on first use only
    lazy = import_graph(root, lazy=True, rules=rules)
    assert circles(lazy) == [["spacl.pkg", "spacl.pkg.mod"]]
    assert upward_imports(_floored(lazy)) == [
        "spacl.data -> spacl.engine",
        "spacl.data -> spacl.engine.model",
    ]


def test_every_dynamic_import_is_resolved() -> None:
    """A dynamic import whose target the test cannot resolve (a name neither spelled, nor
    read by a loader of :data:`LOADERS` from its registry, nor built by a factory of
    :data:`LAZY_FACTORIES` at call sites it can read), a registration or a factory call it
    cannot read, or a ``"spacl.a:b"`` target no loader's registry holds, fails here unless
    :data:`ALLOWED_UNRESOLVED` names it with a reason (empty)."""
    found = unresolved_dynamic_imports()
    assert found == [], "unresolved dynamic imports:\n" + "\n".join(map(str, found))


def test_loaders_and_factories_are_the_trees_data_driven_imports() -> None:
    """No stale entry: each loader, factory and allowed site is a dynamic import of a name
    the source does not spell; each loader's registry names modules of the tree."""
    bare = unresolved_dynamic_imports(rules=NO_RULES)
    sites = {(module, function) for module, _, function, kind, _ in bare if kind == "import"}
    assert sites == {*LOADERS, *LAZY_FACTORIES, *ALLOWED_UNRESOLVED}
    targets = registrations(_parsed(ROOT))[0]
    assert all(targets.values()), targets
    assert {"spacl.tasks.kg", "spacl.tasks.image.trainer"} <= targets["spacl.tasks", "_runner"]
    assert "spacl.losses.kg" in targets["spacl.losses.registry", "ObjectiveSpec.load"]
    lazy = import_graph(lazy=True)  # lazy_attributes(__name__, _PUBLIC) read
    assert "spacl.tasks.kg.train" in lazy["spacl.tasks.kg"]
    assert "spacl.tasks.text.task" in lazy["spacl.tasks.text"]


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


def part_circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Circles among the parts of each package: every module read as the direct child of
    the package (a submodule or a subpackage) it lies in, so two subpackages that import
    each other through different modules (``a.x -> b.y``, ``b.z -> a.w``: no module
    circle) form one.  Each circle as :func:`circles` gives it, across all packages."""
    packages = {name.rsplit(".", 1)[0] for name in graph if "." in name}
    found: list[list[str]] = []
    for package in sorted(packages):
        prefix = package + "."

        def part(module: str, prefix: str = prefix) -> str | None:
            if not module.startswith(prefix):
                return None
            return prefix + module[len(prefix) :].split(".")[0]

        parts: dict[str, set[str]] = {}
        for source, targets in graph.items():
            here = part(source)
            if here is None:
                continue
            for target in targets:
                there = part(target)
                if there is not None and there != here:
                    parts.setdefault(here, set()).add(there)
        found.extend(circles(parts))
    return sorted(found)


def test_part_circle_finder_sees_subpackages_tied_through_different_modules(
    tmp_path: Path,
) -> None:
    """A synthetic package whose modules form no circle while its parts do: ``reg`` imports
    ``sub.x``, ``sub.y`` imports ``reg`` lazily (the shape ``tasks.registry`` and
    ``tasks.kg`` / ``tasks.text`` had until the audit after issue 40)."""
    sub = tmp_path / "spacl" / "pkg" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "spacl" / "__init__.py").write_text("")
    (sub.parent / "__init__.py").write_text("")
    (sub / "__init__.py").write_text("")
    (sub / "x.py").write_text("X = 1\n")
    (sub / "y.py").write_text("def f():\n    from spacl.pkg import reg\n    return reg\n")
    (sub.parent / "reg.py").write_text("from spacl.pkg.sub.x import X\n")
    graph = import_graph(tmp_path / "spacl", lazy=True, typing_only=True)
    assert circles(graph) == []
    assert part_circles(graph) == [["spacl.pkg.reg", "spacl.pkg.sub"]]
    assert part_circles(import_graph(tmp_path / "spacl")) == []  # the lazy import ties them


def test_no_circle_among_the_parts_of_a_package() -> None:
    """No two parts of a package (subpackages, modules) import each other round a circle,
    lazy and ``TYPE_CHECKING`` imports counted: a package's parts stack as its floors do."""
    found = part_circles(import_graph(lazy=True, typing_only=True))
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
    known = {"spacl.data.x": 0, "spacl.engine.y": 0}
    typing = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from spacl.engine.y import Y\n"
    )
    read = imports_of(typing, "spacl.data.x", known, False, lazy=True, typing_only=True)
    assert upward_imports({"spacl.data.x": read}) == ["spacl.data.x -> spacl.engine.y"]


def test_every_package_is_on_a_floor() -> None:
    for name in modules():
        floor_of(name)


def test_no_import_runs_up_a_floor() -> None:
    """Lazy imports inside functions count, and so do ``if TYPE_CHECKING:`` blocks."""
    up = upward_imports(import_graph(lazy=True, typing_only=True))
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


def hand_formatted(text: str) -> list[int]:
    """The lines of ``text`` that keep ruff's formatter out (``# fmt: skip`` / ``off``)."""
    return [
        i
        for i, line in enumerate(text.splitlines(), 1)
        if re.search(r"#\s*fmt:\s*(skip|off)", line)
    ]


def test_no_source_line_is_compacted_by_hand() -> None:
    """Size follows from design (issue 40): no code is squeezed past the formatter to stay
    under the function-length rule (the counter-example: a marked line is found)."""
    marked = {
        str(path.relative_to(ROOT)): hand_formatted(path.read_text())
        for path in sorted(ROOT.rglob("*.py"))
    }
    assert {k: v for k, v in marked.items() if v} == {}
    assert hand_formatted("x = (1,\n     2)  # fmt: skip\n") == [2]
