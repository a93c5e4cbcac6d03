"""``spacl data`` / ``spacl data check [ROOT]``: the datasets spacl reads, and where.

``spacl data`` lists every on-disk dataset with its public source, licence, expected
layout and size, and the data roots searched, in order: ``data.root`` (recipes) or
ROOT, then ``$SPACL_DATA_DIR``, then the per-user data directory
(``~/.local/share/spacl`` on Linux, ``$XDG_DATA_HOME/spacl`` when set), then
``../shared/data`` beside a source checkout (development only).  spacl never
downloads: fetch each dataset from its source and unpack it under one of the roots.

``spacl data check [ROOT]`` says in one message what is present, what is missing and
where to put it; it exits with status 1 when a dataset is missing.  Without names it
checks the knowledge-graph and text datasets (the large image sets, CIFAR and
ImageNet-100, are reported but optional); ``--only cifar100,fb15k-237`` checks those.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

__all__ = ["format_catalogue", "register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "data",
        help="list the datasets spacl reads (source, licence, layout); `data check [ROOT]`",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "action", nargs="?", choices=("list", "check"), default="list", help="default: list"
    )
    parser.add_argument(
        "root", nargs="?", default=None, help="check: only this data root (default: all)"
    )
    parser.add_argument(
        "--only", default=None, help="check: comma-separated dataset names (see `spacl data`)"
    )
    parser.set_defaults(func=run)


def format_catalogue() -> str:
    """Every dataset of :data:`spacl.data.sources.DATASETS`, and the data roots."""
    from spacl.data.sources import BUILTIN, DATASETS, data_search_dirs

    wrap = textwrap.TextWrapper(width=96, initial_indent="    ", subsequent_indent="      ")
    lines = ["Datasets read from a data root (spacl never downloads):", ""]
    for info in DATASETS.values():
        optional = "" if info.required else "  [optional: full-scale image recipes]"
        lines.append(f"  {info.name}  ({info.family}) {info.what}{optional}")
        for label, value in (
            ("size", info.size),
            ("layout", f"<root>/{info.subdir}/: {info.layout}"),
            ("source", info.source),
            ("licence", info.licence),
        ):
            lines += wrap.wrap(f"{label}: {value}")
        lines.append("")
    lines.append("Built in (no data root needed):")
    lines += [f"  {name:<10} {what}" for name, what in BUILTIN.items()]
    lines.append("")
    lines.append("Data roots, searched in this order (after a recipe's data.root):")
    lines += [
        f"  {i}. {d}{'' if d.is_dir() else '  (does not exist)'}"
        for i, d in enumerate(data_search_dirs(), 1)
    ]
    lines.append("Check one with `spacl data check [ROOT]`.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from spacl.data.sources import check_data

    if args.action == "list":
        if args.root is not None or args.only is not None:
            raise ValueError("ROOT and --only belong to `spacl data check`")
        print(format_catalogue())
        return 0
    names = [n.strip() for n in (args.only or "").split(",") if n.strip()]
    if args.root is not None:
        from pathlib import Path

        if not Path(args.root).expanduser().is_dir():
            raise FileNotFoundError(f"data root {args.root} is not a directory")
    report = check_data(args.root, names)
    print(report.format())
    return 0 if report.ok else 1
