"""``spacl recipes [NAME]``: list the built-in recipes, or print one.

Recipes ship inside the package (:mod:`spacl.recipes`); ``spacl train NAME`` runs one
by name from any directory (``spacl train mnist5k/spacl train.epochs=1``).  With NAME,
the recipe's file path and its YAML are printed (copy it to start your own: its ``base:``
names a built-in base such as ``digits/_base``, found from any directory); ``--flat``
prints it with the base chain merged in, a copy that needs no other file.
"""

from __future__ import annotations

import argparse
from typing import Any

from spacl._validation import check_choice

__all__ = ["format_recipes", "register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "recipes",
        help="list the built-in recipes (spacl train NAME runs one), or print one",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", nargs="?", default=None, help="a recipe name: print its YAML")
    parser.add_argument("--task", default=None, help="only recipes of a task (image, kg, text)")
    parser.add_argument(
        "--flat",
        action="store_true",
        help="print NAME with its base: chain merged in (a self-contained copy)",
    )
    parser.set_defaults(func=run)


def format_recipes(task: str | None = None) -> str:
    """The table of built-in recipes (name, task, first comment line of the file)."""
    from spacl.recipes import list_recipes

    rows = [r for r in list_recipes() if task is None or r.task == task]
    width = max((len(r.name) for r in rows), default=4)
    lines = [f"{'name':<{width}}  task   summary"]
    lines += [f"{r.name:<{width}}  {r.task:<5}  {r.summary}" for r in rows]
    lines.append("")
    lines.append(f"{len(rows)} recipes; run one with `spacl train NAME [key=value ...]`.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from spacl.schema_files import find_recipe_file, flat_recipe

    if args.task is not None:
        from spacl.tasks import task_names  # the built-in tasks registered

        check_choice(args.task, "--task", task_names())
    if args.name is None:
        print(format_recipes(args.task))
        return 0
    path = find_recipe_file(args.name)
    print(f"# {path}" + (" with its bases merged in" if args.flat else ""))
    text = flat_recipe(path) if args.flat else path.read_text(encoding="utf-8")
    print(text, end="")
    return 0
