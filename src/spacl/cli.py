"""The ``spacl`` command line.

Each sub-command lives in its own module under :mod:`spacl.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable taking
the parsed :class:`argparse.Namespace` and returning an exit code).  ``spacl COMMAND``
imports only that command's module; the others are listed with their one-line help
from :data:`COMMANDS` (kept equal to the modules' own, tested), so ``spacl --version``,
``spacl --help`` and the light commands start without importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence

from spacl import __version__
from spacl.commands import one_line

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


#: every sub-command: its name, the module that registers it, its one-line help
COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "demo",
        "demo",
        "train SPACL, SimCLR and SupCon on built-in digits (CPU, about 45 s) and compare",
    ),
    ("train", "train", "train a model from a YAML recipe (or resume a run)"),
    ("recipes", "recipes", "list the built-in recipes (spacl train NAME runs one), or print one"),
    (
        "data",
        "data",
        "list the datasets spacl reads (source, licence, layout); `data check [ROOT]`",
    ),
    ("eval", "eval", "evaluate a trained run (linear probe, kNN, NCC, geometry)"),
    (
        "reproduce",
        "reproduce",
        "reproduce the papers' claims at laptop scale (report + plots + results.json)",
    ),
    (
        "geometry",
        "geometry",
        "neural/dimensional collapse, effective rank and uniformity of saved features",
    ),
    ("align", "geometry", "CKA and RSA between two saved representations of the same samples"),
    ("embed", "embed", "write the features of a data set under a trained run's encoder"),
    (
        "export",
        "embed",
        "write a trained run's encoder (image runs), open-intent detector "
        "(text runs) or link predictor (kg runs) in a form that runs without spacl",
    ),
    ("predict", "predict", "predict with a trained run (image runs: nearest class centre)"),
)


def build_parser(command: str | None = "") -> argparse.ArgumentParser:
    """The top-level parser.  ``command``: the sub-command about to run, whose module is
    imported and registered (``None``: none, every sub-command only listed; ``""``, the
    default: every module imported, every sub-command complete)."""
    parser = argparse.ArgumentParser(
        prog="spacl",
        description="Contrastive learning with hard samples, and the geometry of what it learns.",
    )
    parser.add_argument("--version", action="version", version=f"spacl {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = [module for name, module, _ in COMMANDS if command == "" or name == command]
    for name in COMMAND_MODULES:
        if name not in wanted:
            continue
        try:
            module = importlib.import_module(f"spacl.commands.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"spacl.commands.{name}":
                continue  # sub-command not part of this build
            raise
        module.register(subparsers)
    for name, _, text in COMMANDS:  # the others: listed, not imported
        if name not in subparsers.choices:
            subparsers.add_parser(name, help=text, add_help=False)
    for sub in subparsers.choices.values():
        sub.description = plain_text(sub.description)
        for action in sub._actions:
            action.help = plain_text(action.help)
            if not action.option_strings and action.nargs == argparse.ZERO_OR_MORE:
                # argparse marks a `nargs="*"` positional without a default as required:
                # `spacl train` alone would say "required: config, overrides"
                action.required = False
    return parser


def subcommand_parser(
    parser: argparse.ArgumentParser, command: str | None
) -> argparse.ArgumentParser:
    """The parser of sub-command ``command`` (``parser`` itself when there is none), whose
    usage an error of that command's arguments shows."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            sub: argparse.ArgumentParser = action.choices[command]
            return sub
    return parser


#: the commands whose ``key=value`` words are config keys (the flag hint of
#: :func:`config_key_hint`): the keys each takes (``None``: any key of the recipe) and an
#: example
OVERRIDE_KEYS: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "train": (None, "train.epochs=5; `spacl recipes NAME` prints a recipe's keys"),
    "eval": (("eval.", "data.root"), "eval.knn_k=20"),
}


def _recipe_keys(args: argparse.Namespace) -> list[str]:
    """The dotted keys of the recipe (``spacl train CONFIG``) or run directory the command
    reads, with the sections every task shares; ``[]`` when it cannot be read."""
    import dataclasses
    from pathlib import Path

    from omegaconf import OmegaConf

    from spacl import schema

    keys: list[str] = []

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if prefix or key != "base":
                    walk(value, f"{prefix}{key}.")
        elif prefix:
            keys.append(prefix[:-1])

    source = getattr(args, "config", None) or getattr(args, "run_dir", None)
    try:
        if source is not None and Path(source).is_dir():
            walk(OmegaConf.to_container(OmegaConf.load(Path(source) / "config.yaml")), "")
        elif source is not None:
            walk(OmegaConf.to_container(schema.recipe_layer([str(source)])), "")
    except Exception:  # an unreadable recipe: only the shared keys
        pass
    shared = {
        "data": schema.DataSection,
        "optim": schema.OptimSection,
        "train": schema.TrainSection,
        "eval": schema.EvalSection,
    }
    for section, cls in shared.items():
        keys += [f"{section}.{f.name}" for f in dataclasses.fields(cls)]
    return list(dict.fromkeys(keys))


def config_key_hint(args: argparse.Namespace, stray: list[str]) -> str:
    """For an unknown flag of a command that takes ``key=value`` overrides, the override
    it may have meant: ``--epochs 1`` -> ``train.epochs=1`` (a key of the recipe whose
    last part, or whole name, is the flag's; dashes read as underscores)."""
    import difflib

    command = getattr(args, "command", None)
    if command not in OVERRIDE_KEYS or not any(w.startswith("--") for w in stray):
        return ""
    allowed, example = OVERRIDE_KEYS[command]
    keys = [k for k in _recipe_keys(args) if allowed is None or k.startswith(allowed)]
    leaves = sorted({k.rsplit(".", 1)[-1] for k in keys})
    meant = []
    for i, word in enumerate(stray):
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        following = stray[i + 1] if i + 1 < len(stray) else ""
        if not eq and following and not following.startswith("-") and "=" not in following:
            value = following
        name = name.replace("-", "_")
        names = [name]
        if not any(name in (k, k.rsplit(".", 1)[-1]) for k in keys):
            names = difflib.get_close_matches(name, leaves, n=3)  # --epoch, --knn
        matches = [
            f"{k}={value or 'VALUE'}"
            for near in names
            for k in keys
            if near in (k, k.rsplit(".", 1)[-1])
        ]
        if matches:
            others = f" (or {' or '.join(matches[1:])})" if matches[1:] else ""
            meant.append(matches[0] + others)
    if meant:
        return f" (config keys are key=value words: did you mean {' '.join(meant)}?)"
    return f" (config keys are key=value words, e.g. {example})"


#: reStructuredText markup of the docstrings the help reuses: ``code`` and :role:`target`
_RST_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def plain_text(text: str | None) -> str | None:
    """``text`` without reStructuredText markup (``x`` -> x, :func:`a.b` -> a.b, bold
    stars), for the command-line help that reuses module docstrings."""
    if text is None:
        return None
    return _RST_ROLE.sub(r"\1", text).replace("``", "").replace("**", "")


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; a command with ``key=value`` overrides takes them anywhere after its
    positional arguments, flags included (``spacl train R.yaml --out X train.epochs=1``).

    argparse fills a ``nargs="*"`` positional only before the first flag; the ``key=value``
    words it leaves are appended to ``overrides`` in order, and for a command with
    ``inputs`` (``spacl predict RUN --json a.png``) the words it leaves are inputs.  Any
    other leftover word is the usual ``unrecognized arguments`` error.
    """
    args, rest = parser.parse_known_args(argv)
    if rest and isinstance(getattr(args, "inputs", None), list):
        # ``spacl predict RUN --json a.png b.png``: inputs after a flag are inputs too
        words = [w for w in rest if not w.startswith("-")]
        args.inputs = [*args.inputs, *words]
        rest = [w for w in rest if w.startswith("-")]
    if rest:
        takes_overrides = isinstance(getattr(args, "overrides", None), list)
        stray = [w for w in rest if w.startswith("-") or "=" not in w]
        if not takes_overrides or stray:
            hint = config_key_hint(args, stray or rest)
            sub = subcommand_parser(parser, getattr(args, "command", None))
            sub.error(f"unrecognized arguments: {' '.join(stray or rest)}{hint}")
        args.overrides = [*args.overrides, *rest]
    return args


def os_error_line(err: OSError) -> str:
    """One line for ``err``: the system's reason and the file(s) it names (``Is a
    directory: 'out.json'``), without the ``[Errno N]`` prefix; the message itself when it
    names no file (spacl's own messages)."""
    if err.strerror is None or err.filename is None:
        return one_line(err)
    names = repr(str(err.filename))
    if err.filename2 is not None:
        names += f" -> {str(err.filename2)!r}"
    return f"{err.strerror}: {names}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spacl`` console script."""
    words = list(argv) if argv is not None else sys.argv[1:]
    first = next((w for w in words if not w.startswith("-")), None)
    known = {name for name, _, _ in COMMANDS}
    parser = build_parser(first if first in known else None)
    args = parse_args(parser, words)
    args.argv = words  # the command as given (a run's summary.md records it)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    from spacl._extras import MissingExtraError, torch_build_mismatch
    from spacl._progress import console_logging

    # library messages (logging, logger "spacl") on stderr; --quiet: no messages, no bars
    console_logging(quiet=bool(getattr(args, "quiet", False)))
    try:
        code = int(func(args) or 0)
        if argv is None:  # the console script: the command is done, its last line printed;
            # a Ctrl-C now would only raise in the interpreter's exit hooks (tqdm's)
            import signal

            signal.signal(signal.SIGINT, signal.SIG_IGN)
        return code
    except (ValueError, TypeError, FileNotFoundError, MissingExtraError) as err:
        line = os_error_line(err) if isinstance(err, OSError) else one_line(err)
        print(f"spacl {args.command}: error: {line}", file=sys.stderr)
        return 2
    except RuntimeError as err:  # torchvision built for another torch: say how to fix it
        fix = torch_build_mismatch(err)
        if fix is None:
            raise
        print(f"spacl {args.command}: error: {fix}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C outside a training loop's step: one line
        print(f"spacl {args.command}: interrupted", file=sys.stderr)
        return 128 + int(getattr(err, "signum", 2))  # the shell's 128 + signal (SIGINT: 2)
    except BrokenPipeError:  # `spacl recipes | head`: the reader left; not an error
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as err:  # a file that cannot be read or written (after the checks)
        print(f"spacl {args.command}: error: {os_error_line(err)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
