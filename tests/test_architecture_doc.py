"""docs/architecture.md is true to the code (issue 40): every claim a test can check.

- every module, package, file and object the doc names exists: the file names of its
  package tree (each under the package whose entry names it), the backticked paths
  (``losses/_gram.py``, ``tasks/kg/train.py:train_kg``, ``mining/cut/threshold.SORTED_DEVICES``,
  a recipe name such as ``digits/spacl``, a profiler region such as ``spacl/cut``) and the
  backticked dotted names (``spacl.tasks.load_recipe``, ``tasks.image.config.ViewsConfig``),
  all resolved statically (:mod:`ast`, nothing imported);
- its two import tables are the code's: the floors are ``FLOORS`` of
  ``tests/test_import_graph.py``, and what each package of floors 1 and 2 imports (spacl
  packages and third-party ones, every import counted) is what the tree imports;
- the registries it lists are the code's: the objective lists (each defined once, where the
  doc says, as ``objective_names(task)``), the tasks an objective row names, the task
  registry, the cut's forms, the loop body's methods and the tasks' bodies, the CLI's
  sub-commands, the install extras, the ``views`` keys;
- who keeps the negative queue: the image task's Arm, and nothing in ``engine/``.

Each checker is a function of the doc's text, with a counter-example.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from pathlib import Path

import pytest

from test_import_graph import FLOORS, import_graph, modules

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "spacl"
DOC = REPO / "docs" / "architecture.md"
#: first components of backticked dotted names that are recipe sections, not modules
CONFIG_SECTIONS = frozenset(
    {"data", "optim", "train", "eval", "views", "model", "objective", "ood", "finetune"}
)
#: suffixes of files a run writes (named in the doc, never in the repository)
RUN_FILES = (".yaml", ".jsonl", ".json", ".pt", ".md")


def doc_text() -> str:
    return DOC.read_text()


def _flat(text: str) -> str:
    """``text`` on one line: runs of whitespace as one space."""
    return re.sub(r"\s+", " ", text)


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)


def prose(text: str) -> str:
    """``text`` without its fenced code blocks."""
    return re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)


def inline_code(text: str) -> list[str]:
    """The backticked spans of ``text``'s prose, whitespace flattened."""
    return [_flat(span).strip() for span in re.findall(r"`([^`]+)`", prose(text))]


# --------------------------------------------------------------------------- resolving


def _defined_names(body: list[ast.stmt], imports: bool = True) -> set[str]:
    """The names a module or class body binds: defs, classes, assignments, and (unless
    ``imports`` is false) imports."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and imports:
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            names |= _defined_names(node.body, imports)
            for handler in getattr(node, "handlers", []):
                names |= _defined_names(handler.body, imports)
            names |= _defined_names(node.orelse, imports)
    return names


def _attribute_exists(path: Path, attrs: list[str], imports: bool = True) -> bool:
    """``attrs[0]`` is bound at the top of the module in ``path`` (``imports`` false:
    defined there, not imported); a further name, when ``attrs[0]`` is a class there, is
    bound in its body."""
    tree = ast.parse(path.read_text())
    if attrs[0] not in _defined_names(tree.body, imports):
        return False
    if len(attrs) > 1:
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == attrs[0]:
                return attrs[1] in _defined_names(node.body)
    return True


def _module_file(parts: list[str], root: Path = SRC) -> Path | None:
    """The file of the module ``spacl.<parts>`` (a package's ``__init__.py``)."""
    base = root.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def resolve_dotted(name: str, root: Path = SRC) -> bool:
    """``spacl.a.b.attr`` (or ``a.b.attr``): the longest module prefix, then its names."""
    parts = name.split(".")
    if parts[0] == "spacl":
        parts = parts[1:]
    for cut in range(len(parts), -1, -1):  # down to ``spacl`` itself
        path = _module_file(parts[:cut], root)
        if path is not None:
            return cut == len(parts) or _attribute_exists(path, parts[cut:])
    return False


def _top_names(root: Path = SRC) -> set[str]:
    return {p.stem if p.suffix == ".py" else p.name for p in root.iterdir()} - {"__pycache__"}


def _string_in_source(text: str, root: Path = SRC) -> bool:
    return any(f'"{text}"' in p.read_text() for p in root.rglob("*.py"))


def resolve_path(token: str, root: Path = SRC, repo: Path = REPO) -> bool | None:
    """Whether a backticked path names something that exists (``None``: not a path of
    this repository, e.g. a file of a run directory or a placeholder).  A name after a
    file (``dir/file.py:name``, ``dir/module.name``) is defined in that file: a name it
    only imports is elsewhere, and fails."""
    if re.search(r"[\s<>{}*$~%()=\[\]]|RUN_DIR|\.\.", token):
        return None
    token, _, attr = token.partition(":")
    if "/" not in token:
        if not token.endswith(".py"):
            return None
        return any(root.rglob(token)) or (repo / token).is_file()
    if token.startswith("spacl/") and not token.endswith(".py"):
        return _string_in_source(token, root)  # a profiler region, ``spacl/cut``
    head, _, last = token.rstrip("/").rpartition("/")
    stem, dot, rest = last.partition(".")
    if dot and rest not in ("py", "md", "yaml", "toml", "txt"):
        attr, token = rest, f"{head}/{stem}.py"  # ``dir/module.attr``
    tops = {token.split("/")[0]}
    if not tops & (_top_names(root) | {p.name for p in repo.iterdir()}):
        recipe = root / "recipes" / f"{token}.yaml"
        return recipe.is_file() if (root / "recipes" / tops.pop()).is_dir() else None
    for base in (root, repo):
        target = base / token
        if target.exists():
            if attr:
                attrs = attr.split(".")
                return target.suffix == ".py" and _attribute_exists(target, attrs, False)
            return True
    return False


def missing_inline(text: str, root: Path = SRC, repo: Path = REPO) -> list[str]:
    """The backticked paths and dotted names of ``text`` that name nothing."""
    missing = []
    tops = _top_names(root)
    for token in inline_code(text):
        if "/" in token or token.endswith(".py"):
            if resolve_path(token, root, repo) is False:
                missing.append(token)
        elif re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", token):
            first = token.split(".")[0]
            if first == "spacl" or (first in tops and first not in CONFIG_SECTIONS):
                if not resolve_dotted(token, root):
                    missing.append(token)
    return missing


#: prose that places a name in a file: "`file.py`'s `name`", "`name` (`file.py`)",
#: "`name` (in `file.py`)", "`name` in / of / from `file.py`"
_PLACED = (
    r"`(?P<path>[\w/.]+\.py)`'s `(?P<name>[A-Za-z_][\w.]*)`",
    r"`(?P<name>[A-Za-z_][\w.]*)` \((?:in )?`(?P<path>[\w/.]+\.py)`\)",
    r"`(?P<name>[A-Za-z_][\w.]*)` (?:in|of|from) `(?P<path>[\w/.]+\.py)`",
)


def misplaced_names(text: str, root: Path = SRC, repo: Path = REPO) -> list[str]:
    """``file.py:name`` for each name the prose places in a file (:data:`_PLACED`) that
    the file does not define (a name it only imports is defined elsewhere)."""
    flat = _flat(prose(text))
    missing = []
    for pattern in _PLACED:
        for hit in re.finditer(pattern, flat):
            token = f"{hit['path']}:{hit['name']}"
            if resolve_path(token, root, repo) is False:
                missing.append(token)
    return missing


def test_the_placement_reader_sees_a_name_in_the_wrong_file() -> None:
    good = (
        "Built by `mining/adversarial.py`'s `build_players`; `build_run_data` "
        "(`tasks/image/data.py`), `FLOORS` in `tests/test_import_graph.py`, "
        "`build_arms` of `tasks/image/build.py`."
    )
    assert misplaced_names(good) == []
    bad = good.replace("data.py", "trainer.py").replace("image/build.py", "image/trainer.py")
    bad = bad.replace("FLOORS", "ROOFS")
    assert misplaced_names(bad) == [
        "tasks/image/trainer.py:build_run_data",
        "tests/test_import_graph.py:ROOFS",
        "tasks/image/trainer.py:build_arms",
    ]


def test_every_name_the_prose_places_in_a_file_is_defined_there() -> None:
    assert misplaced_names(doc_text()) == []


def tree_entries(text: str) -> list[tuple[str, str]]:
    """``(name, description)`` of each entry of the package tree (the code block after
    ``## Packages``): ``losses/`` with its whole description, ``cli.py``..."""
    section = text[text.index("## Packages") :]
    block = code_blocks(section)[0]
    entries: list[list[str]] = []
    for line in block.splitlines():
        head = re.match(r"^  (\S+)\s+(.*)$", line)
        if head and not line.startswith("   "):
            entries.append([head.group(1), head.group(2)])
        elif entries:
            entries[-1][1] += " " + line.strip()
    return [(name, description) for name, description in entries]


def missing_in_tree(text: str, root: Path = SRC) -> list[str]:
    """The files, folders and ``folder/module.Name`` objects of the package tree that do
    not exist: each entry's own path under ``root``, each name of its description under
    that package (a bare ``x.py`` anywhere inside it) or under ``root``."""
    missing = []
    for name, description in tree_entries(text):
        own = root / name.rstrip("/")
        if not own.exists():
            missing.append(name)
            continue
        package = own if own.is_dir() else root
        for token in re.findall(r"((?:[A-Za-z_]\w*/)*[A-Za-z_]\w*\.py)\b", description):
            if "/" in token:
                found = (package / token).is_file() or (root / token).is_file()
            else:
                found = any(package.rglob(token))
            if not found:
                missing.append(f"{name} {token}")
        for token in re.findall(r"(?<![\w./])((?:[A-Za-z_]\w*/)+)(?![\w])", description):
            if not any((base / token).is_dir() for base in (package, root, root.parents[1])):
                missing.append(f"{name} {token}")
        for folder, module, attr in re.findall(
            r"((?:[A-Za-z_]\w*/)+)([a-z_]\w*)\.([A-Z]\w*)", description
        ):
            path = package / folder / f"{module}.py"
            if not (path.is_file() and _attribute_exists(path, [attr])):
                missing.append(f"{name} {folder}{module}.{attr}")
    return missing


def test_the_checkers_see_a_missing_module() -> None:
    """A doc naming a module, a file, a folder or an object that does not exist fails."""
    good = (
        "## Packages\n\n```\n  losses/          kernel.py, kg/ (spacl.py), "
        "kg/spacl.LinkSPACLLoss\n  cli.py           the CLI\n```\n\n"
        "`losses/_gram.py`, `tasks/kg/train.py:train_kg`, `spacl.losses.kernel`, "
        "`tasks.image.config.ViewsConfig`, `data.num_views`, `digits/spacl`, `spacl/cut`\n"
    )
    assert missing_in_tree(good) == [] and missing_inline(good) == []
    bad = good.replace("kernel.py,", "kernel.py, attic.py, old/,").replace(
        "kg/spacl.LinkSPACLLoss", "kg/spacl.top_share_cut kg/spacl.GoneLoss"
    )
    assert missing_in_tree(bad) == ["losses/ attic.py", "losses/ old/", "losses/ kg/spacl.GoneLoss"]
    bad = good.replace("cli.py  ", "kli.py  ")
    assert missing_in_tree(bad) == ["kli.py"]
    bad = good.replace("`losses/_gram.py`", "`losses/kg_cut.py`, `mining/_common.py`")
    bad = bad.replace("train.py:train_kg", "train.py:top_share_cut")
    bad = bad.replace("spacl.losses.kernel", "spacl.losses.kernel.nothing")
    bad = bad.replace("digits/spacl", "digits/nope").replace("spacl/cut", "spacl/nope")
    assert missing_inline(bad) == [
        "losses/kg_cut.py",
        "mining/_common.py",
        "tasks/kg/train.py:top_share_cut",
        "spacl.losses.kernel.nothing",
        "digits/nope",
        "spacl/nope",
    ]


def test_every_module_and_object_the_doc_names_exists() -> None:
    text = doc_text()
    assert len(list(tree_entries(text))) >= 15
    assert missing_in_tree(text) == []
    assert missing_inline(text) == []


# ----------------------------------------------------------------------- import tables


def table(text: str, header: str) -> list[list[str]]:
    """The rows of the markdown table whose header row starts with ``header``: cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def doc_floors(text: str) -> tuple[tuple[str, ...], ...]:
    """The floors of the doc's table, lowest first (``spacl`` is ``""``, as in FLOORS)."""
    rows = table(text, "| floor | packages |")
    floors = [tuple("" if p == "spacl" else p for p in _ticked(packages)) for _, packages in rows]
    return tuple(reversed(floors))


def doc_imports(text: str) -> dict[str, tuple[set[str], set[str]]]:
    """Package -> (spacl packages, third-party top-level modules) of the doc's table."""
    rows = table(text, "| package | spacl packages |")
    return {
        _ticked(package)[0]: (set(_ticked(spacl)), {m.strip() for m in others.split(",")})
        for package, spacl, others in rows
    }


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def real_imports(packages: set[str]) -> dict[str, tuple[set[str], set[str]]]:
    """What each package imports: other spacl packages and third-party modules, every
    import statement counted (module level, in functions, under ``TYPE_CHECKING``)."""
    graph = import_graph(lazy=True, typing_only=True)
    found: dict[str, tuple[set[str], set[str]]] = {p: (set(), set()) for p in packages}
    for module, targets in graph.items():
        if _top(module) in found:
            found[_top(module)][0].update(_top(t) for t in targets if _top(t) != _top(module))
    for module, path in modules().items():
        if _top(module) not in found:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                first = name.split(".")[0]
                if first != "spacl" and first not in sys.stdlib_module_names:
                    found[_top(module)][1].add(first)
    return found


def test_the_table_readers_see_a_wrong_row() -> None:
    text = (
        "| floor | packages |\n|---|---|\n| 1 | `tasks` |\n| 0 | `spacl`, `data` |\n\n"
        "| package | spacl packages | beyond the standard library |\n|---|---|---|\n"
        "| `losses` | `_validation` | torch |\n"
    )
    assert doc_floors(text) == (("", "data"), ("tasks",))
    assert doc_floors(text) != FLOORS
    assert doc_imports(text) == {"losses": ({"_validation"}, {"torch"})}
    assert doc_imports(text) != real_imports({"losses"})  # losses imports mining too


def test_the_doc_floors_are_the_import_tests_floors() -> None:
    assert doc_floors(doc_text()) == FLOORS


def test_the_doc_import_table_is_the_import_graph() -> None:
    stated = doc_imports(doc_text())
    assert set(stated) == set(FLOORS[1]) | set(FLOORS[2])
    assert stated == real_imports(set(stated))


# -------------------------------------------------------------------------- registries


def _after(text: str, pattern: str) -> str:
    found = re.search(pattern, _flat(text))
    assert found is not None, f"the doc no longer says {pattern!r}"
    return found.group(1)


def doc_objective_lists(text: str) -> dict[str, tuple[str, str]]:
    """``NAME -> (module path, task)`` of the doc's sentence
    ``\\`NAME\\` (\\`path\\` ...) is \\`objective_names("task")\\```."""
    pattern = r'`(\w+_OBJECTIVES)` \(`([\w/]+\.py)`[^)]*\) is `objective_names\("(\w+)"\)`'
    return {name: (path, task) for name, path, task in re.findall(pattern, _flat(text))}


def objective_list_definitions(root: Path = SRC) -> dict[str, list[str]]:
    """``NAME -> [module paths]`` of every module-level ``NAME = objective_names(...)``."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", "") == "objective_names"
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, []).append(str(path.relative_to(root)))
    return found


def test_objective_list_reader_sees_a_wrong_home(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('KG_OBJECTIVES = objective_names("kg")\n')
    (tmp_path / "b.py").write_text(
        '_KG = objective_names("kg")\nKG_OBJECTIVES = objective_names("kg")\n'
    )
    found = objective_list_definitions(tmp_path)
    assert found == {"KG_OBJECTIVES": ["a.py", "b.py"], "_KG": ["b.py"]}  # two homes, a copy
    text = 'their lists, `KG_OBJECTIVES` (`tasks/kg/config.py`) is `objective_names("kg")`'
    assert doc_objective_lists(text) == {"KG_OBJECTIVES": ("tasks/kg/config.py", "kg")}


def test_the_objective_lists_are_defined_once_where_the_doc_says() -> None:
    from spacl.losses.registry import objective_names

    stated = doc_objective_lists(doc_text())
    assert set(stated) == {"OOD_OBJECTIVES", "FINETUNE_OBJECTIVES", "KG_OBJECTIVES"}
    defined = objective_list_definitions()
    assert {name: paths for name, paths in defined.items()} == {
        name: [path] for name, (path, _) in stated.items()
    }, defined
    for name, (path, task) in stated.items():
        module = __import__("spacl." + path[:-3].replace("/", "."), fromlist=[name])
        assert getattr(module, name) == objective_names(task), name


def test_the_registries_the_doc_lists_are_the_codes() -> None:
    from spacl.cli import COMMANDS
    from spacl.engine.loop import LoopBody
    from spacl.losses.registry import OBJECTIVE_TASKS
    from spacl.mining.cut import CUT_FORMS
    from spacl.tasks import task_names
    from spacl.tasks.image.config import ViewsConfig
    from spacl.tasks.text.config import OODViewsConfig

    text = doc_text()
    tasks = _ticked(_after(text, r"the tasks that offer it under that name \(([^)]*)\)"))
    assert tuple(tasks) == OBJECTIVE_TASKS
    assert _ticked(_after(text, r"the registered tasks are (.*?)\)")) == task_names()
    forms = re.findall(
        r'"(\w+)"', _after(text, r'select\(scores, mask=None, form=((?:\s*\|?\s*"\w+")+)')
    )
    assert tuple(forms) == CUT_FORMS
    methods = [m.strip() for m in _after(text, r"LoopBody \(its methods: ([^)]*)\)").split(",")]
    assert methods == [n for n in vars(LoopBody) if not n.startswith("_")]
    bodies = re.findall(r"\.(\w+Steps)|and (\w+Steps)", _after(text, r"a body \(([^)]*)\)"))
    assert sorted(a or b for a, b in bodies) == sorted(task_bodies())
    commands = _after(text, r"`register\(subparsers\)`\): (.*?) trained\.py")
    assert re.split(r"\s*[,/]\s*", commands.strip()) == [name for name, _, _ in COMMANDS]
    extras = _ticked(_after(text, r"\*\*Extras\*\* \(([^)]*)\)"))
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert extras == list(pyproject["project"]["optional-dependencies"])
    for pattern, schema in (
        (
            r"the image task's (`views\.num_views`[^(]*) \(`tasks\.image\.config\.ViewsConfig`\)",
            ViewsConfig,
        ),
        (
            r"the text task's (`views\.num_views`[^(]*) \(`tasks\.text\.config\.OODViewsConfig`\)",
            OODViewsConfig,
        ),
    ):
        keys = [k.removeprefix("views.") for k in _ticked(_after(text, pattern))]
        assert keys == [f.name for f in dataclasses.fields(schema)], schema.__name__


def task_bodies(root: Path = SRC / "tasks") -> list[str]:
    """Every class under ``tasks/`` that subclasses the engine's ``LoopBody`` or
    ``StageBody`` (by name)."""
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", "") in ("LoopBody", "StageBody") for b in node.bases
            ):
                found.append(node.name)
    return found


@pytest.mark.parametrize("claim", ["KNOWN_CIRCLES", "top_share_cut", "top_share_mask"])
def test_the_doc_names_no_removed_thing(claim: str) -> None:
    """Names issue 40 removed are not described as present."""
    assert claim not in doc_text()


# ------------------------------------------------------------- the path of one recipe


def _defined_anywhere(root: Path = SRC) -> set[str]:
    """Every function and class name defined under ``root``."""
    names: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
    return names


def missing_in_recipe_path(text: str, root: Path = SRC, repo: Path = REPO) -> list[str]:
    """The names the code block under "The path of one recipe" uses that name nothing:
    ``file.py:name`` (or ``file.py: name``) and ``dir/module.name`` paths, the name
    defined in that file, dotted ``module.name`` chains of a spacl module, and bare
    function or class names (``snake_case``, ``CamelCase``) defined anywhere."""
    _, found, section = text.partition("## The path of one recipe")
    assert found, "the doc no longer has 'The path of one recipe'"
    block = code_blocks(section)[0]
    missing: list[str] = []
    paths = re.findall(r"\b[\w/]+\.py:\s*\w+|\b(?:\w+/)+\w+\.\w+\b", block)
    for token in (re.sub(r":\s+", ":", path) for path in paths):
        if resolve_path(token, root, repo) is False:
            missing.append(token)
    rest = re.sub(r"\b[\w/]+\.py:\s*\w+|\b(?:\w+/)+[\w.]+", " ", block)
    tops = _top_names(root) - set(CONFIG_SECTIONS)
    for token in re.findall(r"\b[a-z_]\w*(?:\.[A-Za-z_]\w*)+", rest):
        if token.split(".")[0] in tops and not resolve_dotted(token, root):
            missing.append(token)
    rest = re.sub(r"\b[a-z_]\w*(?:\.[A-Za-z_]\w*)+|\.\w+", " ", rest)
    defined = _defined_anywhere(root)
    for token in re.findall(r"\b(?:[a-z]+_[a-z_]+|[A-Z][a-z]+(?:[A-Z][a-z]+)*)\b", rest):
        if token[0].isupper() and token.lower() in ("image", "task", "one"):
            continue
        if token not in defined:
            missing.append(token)
    return missing


def test_the_recipe_path_reader_sees_a_renamed_function() -> None:
    good = (
        "## The path of one recipe\n\n```\ncli.main -> cli.parse_args\n"
        "  commands/train.run -> resolve_run\n  Trainer(cfg).fit()   build_arms\n"
        "  tasks/image/build.py:build_arms, tasks/image/data.py: build_run_data\n"
        "  tasks.run_loaded -> (tasks/kg/train.py:train_kg)\n```\n"
    )
    assert missing_in_recipe_path(good) == []
    bad = good.replace("resolve_run", "resolve_the_run").replace("cli.main", "cli.mane")
    bad = bad.replace("commands/train.run", "commands/train.go").replace("Trainer", "Trainerr")
    bad = bad.replace("train.py:train_kg", "train.py:train_graph")
    # the audit's slip: names put in the file that imports them, not the one defining them
    bad = bad.replace("build.py:build_arms", "trainer.py:build_arms")
    bad = bad.replace("data.py: build_run_data", "trainer.py: build_run_data")
    assert sorted(missing_in_recipe_path(bad)) == sorted(
        [
            "commands/train.go",
            "tasks/kg/train.py:train_graph",
            "tasks/image/trainer.py:build_arms",
            "tasks/image/trainer.py:build_run_data",
            "cli.mane",
            "resolve_the_run",
            "Trainerr",
        ]
    )


def test_every_name_on_the_path_of_one_recipe_exists() -> None:
    assert missing_in_recipe_path(doc_text()) == []


# ------------------------------------------------- the lists the doc quotes from the tests
def doc_paths_between(text: str, start: str, end: str) -> set[str]:
    """The backticked paths of the doc's stretch from ``start`` to ``end``."""
    flat = " ".join(text.split())
    i = flat.index(start)
    return set(re.findall(r"`([\w/.]+\.py)`", flat[i : flat.index(end, i)]))


def said_empty(text: str, name: str) -> bool:
    """Whether the doc says the test's list ``name`` is empty (", is empty)", "(it is
    empty)" or ", are both empty" within the sentence naming it)."""
    flat = " ".join(text.split())
    i = flat.index(f"`{name}`")
    return bool(re.match(r"[^.]*?(, is empty\)|\(it is empty\)|, are both empty\b)", flat[i:]))


def doc_loaders(text: str) -> set[str]:
    flat = " ".join(text.split())
    i = flat.index("(`LOADERS`:")
    return set(re.findall(r"`(spacl\.[\w.]+)`", flat[i : flat.index(")", i)]))


#: the one-engine exceptions the doc names, each phrase -> the module it stands for
ENGINE_EXCEPTIONS = {
    "the linear probe's L-BFGS": "evaluate/linear.py",
    "SPACL's own generator and discriminator": "mining/adversarial.py",
}


def test_the_list_readers_see_a_changed_list() -> None:
    doc = "by design, the shared kernel those build on: `a/x.py`, `b.py` (traced at run time"
    assert doc_paths_between(doc, "shared kernel those build on:", "(traced") == {"a/x.py", "b.py"}
    assert said_empty("the exceptions, `ALLOWED_UPWARD`, is empty), and", "ALLOWED_UPWARD")
    assert not said_empty("the exceptions, `ALLOWED_UPWARD`, lists two), and", "ALLOWED_UPWARD")
    assert said_empty("unless `X` names it with a reason (it is empty).", "X")
    both = "whose lists, `A` (the tree) and `B` (`b/`), are both empty.  `C` lists one."
    assert said_empty(both, "A") and said_empty(both, "B") and not said_empty(both, "C")
    loaders = "A loader (`LOADERS`: `spacl.a.B.load`, `spacl.c._r`) imports"
    assert doc_loaders(loaders) == {"spacl.a.B.load", "spacl.c._r"}


def test_the_lists_the_doc_quotes_are_the_tests_lists() -> None:
    """The shared leaves of the SPACL trace, the import test's exception lists and
    loaders, the private-import test's exception lists (the tree's and the benchmarks'),
    and the one-engine test's solvers are what the doc says they are."""
    from test_import_graph import ALLOWED_UNRESOLVED, ALLOWED_UPWARD, LOADERS
    from test_one_engine import OUTSIDE_ENGINE
    from test_spacl_package import KNOWN_BENCHMARK_PRIVATE_IMPORTS, KNOWN_PRIVATE_IMPORTS
    from test_spacl_trace import SHARED_LEAVES

    text = DOC.read_text()
    leaves = doc_paths_between(text, "the shared kernel those build on,", "(traced at run time")
    assert leaves == set(SHARED_LEAVES)
    assert "stays inside `losses/spacl/` and `mining/`, with one exception, by design" in (
        " ".join(text.split())
    )
    assert said_empty(text, "ALLOWED_UPWARD") == (ALLOWED_UPWARD == {})
    assert said_empty(text, "ALLOWED_UNRESOLVED") == (ALLOWED_UNRESOLVED == {})
    flat = " ".join(text.split())
    for name, known in (
        ("KNOWN_PRIVATE_IMPORTS", KNOWN_PRIVATE_IMPORTS),
        ("KNOWN_BENCHMARK_PRIVATE_IMPORTS", KNOWN_BENCHMARK_PRIVATE_IMPORTS),
    ):
        assert said_empty(text, name) == (known == {}), name
        assert all(f"`{hit}`" in flat for hit in known), name  # an exception is named
    assert doc_loaders(text) == {f"{module}.{name}" for module, name in LOADERS}
    assert all(phrase in flat for phrase in ENGINE_EXCEPTIONS)
    solvers = {
        path for path, (kinds, _) in OUTSIDE_ENGINE.items() if "optimiser or schedule" in kinds
    }
    assert solvers == set(ENGINE_EXCEPTIONS.values())


def loader_calls(task: str) -> set[str]:
    """The names the registered loader of ``task`` calls (its body, statically) and, for
    a one-line delegate, those of the function it delegates to in the same module."""
    import inspect

    from spacl.tasks import task_entry

    loader = task_entry(task).loader
    module = ast.parse(inspect.getsource(inspect.getmodule(loader)))  # type: ignore[arg-type]
    functions = {f.name: f for f in ast.walk(module) if isinstance(f, ast.FunctionDef)}

    def called(fn: ast.FunctionDef) -> set[str]:
        return {
            c.func.id if isinstance(c.func, ast.Name) else c.func.attr
            for c in ast.walk(fn)
            if isinstance(c, ast.Call) and isinstance(c.func, (ast.Name, ast.Attribute))
        }

    names = called(functions[loader.__name__])
    return names | set().union(*(called(functions[n]) for n in names if n in functions))


def test_each_tasks_loader_is_what_the_doc_says() -> None:
    """The doc: KG and text load through ``schema.load_structured``; the image loader
    through ``schema.recipe_layer`` and ``validate_config``."""
    flat = _flat(doc_text())
    assert "The KG and text loaders are `schema.load_structured(" in flat
    assert "merges the same way through `schema.recipe_layer`" in flat
    for task in ("kg", "text"):
        assert "load_structured" in loader_calls(task), task
    assert {"recipe_layer", "validate_config"} <= loader_calls("image")
    assert "load_structured" not in loader_calls("image")  # the reader can fail


def lazy_packages_in_doc(doc: str) -> set[str]:
    """The packages the doc's ``_lazy.py`` entry says import their public names on first
    use: the parenthesised list after "on first use"."""
    match = re.search(r"on first use \(([^)]*)\)", " ".join(doc.split()))
    assert match, "the doc's _lazy.py entry lists no packages"
    return {name.strip() for name in match.group(1).split(",")}


def lazy_packages_in_code() -> set[str]:
    """The packages whose ``__init__.py`` calls ``lazy_attributes`` (paths under spacl/)."""
    return {
        init.parent.relative_to(SRC).as_posix()
        for init in SRC.rglob("__init__.py")
        if "lazy_attributes(" in init.read_text()
    }


def test_the_lazy_packages_are_the_docs() -> None:
    """The ``_lazy.py`` entry names exactly the packages that use it (the counter-example:
    a list missing one is found)."""
    assert lazy_packages_in_doc(DOC.read_text()) == lazy_packages_in_code()
    short = "import their public names on first use (data, engine), so"
    assert lazy_packages_in_doc(short) != lazy_packages_in_code()


# ------------------------------------------------------------------- the negative queue


def queue_identifiers(source: str) -> list[str]:
    """Every identifier of ``source`` that speaks of a queue (case-insensitive): names,
    attributes, definitions, parameters, keywords and imported names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.keyword) and node.arg:
            names = [node.arg]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name for a in node.names]
            names += [getattr(node, "module", None) or ""]
        found.update(n for n in names if "queue" in n.lower())
    return sorted(found)


def test_the_queue_reader_sees_a_queue() -> None:
    source = (
        "from spacl.mining.queue import NegativeQueue\n"
        "def step(arm, queue_size=0):\n"
        "    arm.queue.push(1)\n"
        "    return f(extra_queue=None)\n"
        "note = 'a queue in a string is no identifier'\n"
    )
    assert queue_identifiers(source) == [
        "NegativeQueue",
        "extra_queue",
        "queue",
        "queue_size",
        "spacl.mining.queue",
    ]


def test_the_image_tasks_arm_keeps_the_queue_and_the_engine_none() -> None:
    """The doc says the image task's Arm keeps, pushes and checkpoints the negative queue
    and that ``engine/`` knows none: no identifier of ``engine/`` speaks of a queue."""
    text = _flat(doc_text())
    assert "The image task's Arm (`tasks/image/arm.py`) keeps one queue per arm" in text
    assert "The engine keeps one queue" not in text
    assert "How the engine feeds it" not in text
    engine = {
        str(path.relative_to(SRC)): queue_identifiers(path.read_text())
        for path in sorted((SRC / "engine").rglob("*.py"))
    }
    assert engine and not any(engine.values()), {k: v for k, v in engine.items() if v}
    arm = queue_identifiers((SRC / "tasks" / "image" / "arm.py").read_text())
    assert {"queue", "NegativeQueue"} <= set(arm)
