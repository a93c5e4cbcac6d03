"""``spacl`` imports only the module of the command it runs (issue 38: CLI start-up)."""

from __future__ import annotations

import subprocess
import sys

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
