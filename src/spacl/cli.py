"""The ``spacl`` command line.

Each sub-command lives in its own module under :mod:`spacl.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable taking
the parsed :class:`argparse.Namespace` and returning an exit code).  Modules are
imported lazily so that ``spacl --version`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from spacl import __version__

#: sub-command modules under ``spacl.commands``, in the order ``--help`` lists them
COMMAND_MODULES: tuple[str, ...] = (
    "demo",
    "train",
    "recipes",
    "data",
    "eval",
    "reproduce",
    "geometry",
    "embed",
    "predict",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available sub-command."""
    parser = argparse.ArgumentParser(
        prog="spacl",
        description="Contrastive learning with hard samples, and the geometry of what it learns.",
    )
    parser.add_argument("--version", action="version", version=f"spacl {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"spacl.commands.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"spacl.commands.{name}":
                continue  # sub-command not part of this build
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spacl`` console script."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    from spacl._extras import MissingExtraError
    from spacl._progress import console_logging

    # library messages (logging, logger "spacl") on stderr; --quiet: no messages, no bars
    console_logging(quiet=bool(getattr(args, "quiet", False)))
    try:
        return int(func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, MissingExtraError) as err:
        print(f"spacl {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `spacl recipes | head`: the reader left; not an error
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
