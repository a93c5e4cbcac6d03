"""``spacl predict RUN_DIR INPUT ... [--json] [--arm NAME]``: predictions of a trained run.

Image runs: each input is an image file; the prediction is the nearest class centre of
the run's evaluation (``RUN_DIR/centres.pt``, the float64 training means of the features
``spacl eval`` probes), with the distance to it.  One line per input::

    PATH<TAB>CLASS<TAB>DISTANCE

``--json`` prints one JSON object per input instead (``input``, ``class``, ``distance``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

__all__ = ["nearest_centres", "register"]


def register(subparsers: Any) -> None:
    """Add the ``predict`` sub-command."""
    parser = subparsers.add_parser(
        "predict",
        help="predict with a trained run (image runs: nearest class centre)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", type=Path, help="a run directory written by spacl train")
    parser.add_argument("inputs", nargs="+", help="image files")
    parser.add_argument("--arm", help="the arm to use (default: the run's first)")
    parser.add_argument("--json", action="store_true", help="one JSON object per input")
    parser.set_defaults(func=run)


def nearest_centres(run_dir: Path, arm: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    """``(classes, centres [C, d], feature kind)`` of ``arm`` from ``RUN_DIR/centres.pt``."""
    from spacl.engine.checkpoint import load_checkpoint
    from spacl.engine.rundir import RunDirectory

    path = RunDirectory(run_dir).centres
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: run `spacl eval {run_dir}` to compute the class centres"
        )
    arms = load_checkpoint(path)["arms"]
    if arm not in arms:
        raise ValueError(f"arm must be one of {sorted(arms)}, got {arm!r}")
    entry = arms[arm]
    return entry["classes"], entry["centres"], str(entry["features"])


def run(args: argparse.Namespace) -> int:
    from spacl.trained import load

    model = load(args.run_dir, args.arm)
    classes, centres, kind = nearest_centres(args.run_dir, model.arm)
    which = "projections" if kind == "projections" else "backbone"
    feats = model.embed(list(args.inputs), features=which).to(torch.float64)
    dist = torch.cdist(feats, centres.to(torch.float64))
    best, index = dist.min(dim=1)
    for path, k, d in zip(args.inputs, index.tolist(), best.tolist(), strict=True):
        label = int(classes[k])
        if args.json:
            print(json.dumps({"input": path, "class": label, "distance": d}))
        else:
            print(f"{path}\t{label}\t{d:.6g}")
    return 0
