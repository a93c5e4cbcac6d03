"""``spacl recipes [NAME]``: list the built-in recipes, or print one.

Recipes ship inside the package (:mod:`spacl.recipes`); ``spacl train NAME`` runs one
by name from any directory (``spacl train mnist5k/spacl train.epochs=1``).  With NAME,
the recipe's file path and its YAML are printed (copy it to start your own).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["format_recipes", "register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "recipes",
        help="list the built-in recipes (spacl train NAME runs one), or print one",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", nargs="?", default=None, help="a recipe name: print its YAML")
    parser.add_argument("--task", choices=("image", "kg", "text"), help="only recipes of a task")
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
    from spacl.recipes import resolve_recipe

    if args.name is None:
        print(format_recipes(args.task))
        return 0
    path = resolve_recipe(args.name)
    print(f"# {path}")
    print(path.read_text(encoding="utf-8"), end="")
    return 0
