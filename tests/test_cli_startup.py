"""``spacl`` imports only the module of the command it runs (issue 38: CLI start-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spacl.cli import COMMANDS, build_parser


def test_the_listed_help_of_every_command_is_its_modules_own() -> None:
    full = build_parser()  # every module imported and registered
    actions = full._subparsers._group_actions[0]  # type: ignore[union-attr]
    registered = {a.dest: a.help for a in actions._choices_actions}
    assert {name: text for name, _, text in COMMANDS} == registered


def test_help_and_version_start_without_torch() -> None:
    code = (
        "import sys\n"
        "from spacl.cli import main\n"
        "for argv in (['--help'], ['--version']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "main(['data'])\n"  # a command runs with its own module
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "COMMAND" in done.stdout and "spacl " in done.stdout


def test_recipes_lists_and_prints_without_torch() -> None:
    code = (
        "import sys\n"
        "from spacl.cli import main\n"
        "main(['recipes'])\n"
        "main(['recipes', 'text/stackoverflow', '--flat'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "text/stackoverflow" in done.stdout and "max_tokens" in done.stdout


def test_a_torchvision_built_for_another_torch_is_one_line_with_the_fix(
    monkeypatch, capsys
) -> None:
    """PyPI's torchvision beside a CPU torch fails on import with ``operator torchvision::nms
    does not exist`` (seen with torch 2.13.0+cpu and torchvision 0.28.0): the CLI says how to
    install a matching pair, in one line; any other RuntimeError still propagates."""
    import pytest

    from spacl import cli
    from spacl._extras import CPU_INSTALL, torch_build_mismatch
    from spacl.commands import data

    def fail(message: str):
        def func(args: object) -> int:
            raise RuntimeError(message)

        return func

    real_register = data.register

    def register(subparsers) -> None:
        real_register(subparsers)
        subparsers.choices["data"].set_defaults(
            func=fail("operator torchvision::nms does not exist")
        )

    monkeypatch.setattr(data, "register", register)
    assert cli.main(["data"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("spacl data: error: torchvision does not match")
    assert (
        err[0].endswith(CPU_INSTALL)
        and "--index-url https://download.pytorch.org/whl/cpu" in err[0]
    )

    def register_other(subparsers) -> None:
        real_register(subparsers)
        subparsers.choices["data"].set_defaults(func=fail("CUDA out of memory"))

    monkeypatch.setattr(data, "register", register_other)
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        cli.main(["data"])
    assert torch_build_mismatch(ValueError("torchvision::nms")) is None  # only RuntimeError


def test_readme_cpu_line_takes_torch_and_torchvision_from_the_cpu_index() -> None:
    """The CPU install line installs both from one index (README's earlier line took only
    torch from it, and pip then took PyPI's torchvision, which fails beside a CPU torch)."""
    from pathlib import Path

    from spacl._extras import CPU_INSTALL

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert CPU_INSTALL in readme
    assert "benchmarks/results/install_size.md" in readme


def _bench() -> object:
    """benchmarks/cli_startup.py as a module (the measurement the results file records)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "cli_startup.py"
    spec = importlib.util.spec_from_file_location("cli_startup_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_fast_command_answers_in_under_a_second() -> None:
    """Issue 38: ``spacl --help``, ``recipes``, ``data`` and every sub-command's ``--help``
    answer in under 1 s (median of 3 fresh processes, on the project's 2 shared cores),
    and none of them imports torch."""
    bench = _bench()
    argvs = bench.commands()  # type: ignore[attr-defined]
    assert ["data"] in argvs and ["predict", "--help"] in argvs and ["align", "--help"] in argvs
    slow = {}
    for argv in argvs:
        median, walls = bench.median_time(argv, 3)  # type: ignore[attr-defined]
        if median >= bench.LIMIT_S:  # type: ignore[attr-defined]
            slow[" ".join(argv)] = walls
    assert not slow, f"slower than 1 s (median of 3): {slow}"
    code = (
        "import sys\n"
        "from spacl.cli import main\n"
        f"for argv in {argvs!r}:\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_startup_results_file_holds_every_command_under_the_bound() -> None:
    """benchmarks/results/cli_startup.md (written by benchmarks/cli_startup.py) lists every
    command the test times, each median under the bound."""
    import re
    from pathlib import Path

    bench = _bench()
    text = (Path(__file__).resolve().parents[1] / "benchmarks/results/cli_startup.md").read_text()
    rows = dict(re.findall(r"^\| `spacl ([^`]+)` \| ([\d.]+) \|", text, flags=re.M))
    assert set(rows) == {" ".join(a) for a in bench.commands()}  # type: ignore[attr-defined]
    assert all(float(v) < bench.LIMIT_S for v in rows.values()), rows  # type: ignore[attr-defined]


def _exit_2_without_torch(argvs: list[list[str]], cwd: Path) -> list[str]:
    """Run every ``spacl`` argv through ``main`` in one fresh interpreter (in ``cwd``),
    assert each exits 2 with torch never imported and prints one line, no traceback;
    the printed lines."""
    code = (
        "import sys\n"
        "from spacl.cli import main\n"
        f"for argv in {argvs!r}:\n"
        "    try:\n"
        "        code = main(argv)\n"
        "    except SystemExit as stop:\n"
        "        code = stop.code\n"
        "    assert code == 2, (argv, code)\n"
        "    assert 'torch' not in sys.modules, ('torch was imported by', argv)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=cwd
    )
    assert done.returncode == 0, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == len(argvs), errors  # one line each, no traceback
    return errors


def test_a_wrong_argument_is_answered_before_torch_loads(tmp_path: Path) -> None:
    """Issue 38: an error a command can see without a model (a missing recipe, run or
    checkpoint, an ``--out`` of the wrong kind) is printed before torch is imported, so
    it comes at once, not after seconds of imports.  Each exits 2 with one line."""
    image_run = tmp_path / "image-run"
    image_run.mkdir()
    (image_run / "config.yaml").write_text("task: image\n")
    missing = str(tmp_path / "no-such-run")
    argvs = [
        ["train", "no/such-recipe"],
        ["train", "digits/simclr", "--resume", "--out", str(tmp_path / "fresh")],
        ["eval", missing],
        ["predict", missing, "a.png"],
        ["embed", missing, "--out", "x.txt"],
        ["embed", missing, "--out", "x.npz"],
        ["export", missing, "--out", "x.pt2"],
        ["export", str(image_run), "--out", "x.onnx"],
        ["geometry", str(tmp_path / "none.npy")],
    ]
    _exit_2_without_torch(argvs, tmp_path)


def test_the_engine_package_loads_its_names_on_first_use() -> None:
    """``spacl.engine`` imports its modules on first use (PEP 562): its run-directory
    module loads no torch, every task's schema no torchvision, and every public name
    resolves to the object its home module defines, the static (TYPE_CHECKING) imports
    naming the same homes."""
    import ast
    import importlib
    import inspect

    code = (
        "import sys\n"
        "import spacl.engine.rundir\n"
        "assert 'torch' not in sys.modules, 'rundir imported torch'\n"
        "import spacl.tasks\n"
        "assert 'torchvision' not in sys.modules, 'the task schemas imported torchvision'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    engine = importlib.import_module("spacl.engine")
    homes = {name: f"spacl.engine.{module}" for name, module in engine._PUBLIC.items()}
    assert sorted(homes) == sorted(engine.__all__)
    static = {}
    for node in ast.walk(ast.parse(inspect.getsource(engine))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spacl.engine"):
            static.update({alias.name: node.module for alias in node.names})
    assert static == homes
    for name, home in homes.items():
        assert getattr(engine, name) is getattr(importlib.import_module(home), name), name
    assert set(engine.__all__) <= set(dir(engine))


def test_a_config_error_exits_2_before_torch_loads(tmp_path: Path) -> None:
    """Issue 38: a recipe key the schema rejects (unknown, misspelt, of the wrong type) is
    one line and exit 2 without importing torch: the image schema is torch-free and the
    task registry imports the KG and text schemas (torch) only on their lookup."""
    argvs = [
        ["train", "digits/supcon", "foo=1"],
        ["train", "digits/supcon", "trian.epochs=3"],
        ["train", "digits/supcon", "train.epochs=abc"],
    ]
    errors = _exit_2_without_torch(argvs, tmp_path)
    assert "unknown config key 'foo'" in errors[0] and "did you mean 'train'" in errors[1]
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_task_registry_imports_a_torch_schema_only_on_its_lookup() -> None:
    """The KG and text schemas (torch) are registered on first lookup; the task list and
    an unknown task's error still name every built-in task."""
    code = (
        "import sys\n"
        "from spacl.tasks import registry\n"
        "assert 'spacl.tasks.kg.config' not in sys.modules\n"
        "assert 'spacl.tasks.text.config' not in sys.modules\n"
        "assert 'torch' not in sys.modules\n"
        "assert registry.task_entry('kg').runner == 'spacl.tasks.kg:train_kg'\n"
        "assert 'spacl.tasks.text.config' not in sys.modules\n"
        "try:\n"
        "    registry.recipe_task({'task': 'audio'})\n"
        "except ValueError as err:\n"
        "    assert \"['image', 'kg', 'text']\" in str(err), err\n"
        "assert registry.task_names() == ['image', 'kg', 'text']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
