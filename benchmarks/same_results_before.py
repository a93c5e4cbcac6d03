"""The five tiny seeded runs of ``tests/test_same_results.py`` at an earlier commit.

``tests/test_same_results.py`` holds the ``eval.json`` of one tiny seeded run per task
(image, kg, text_head, text_finetuned, text_detector) in ``GOLDEN``, recorded at 029ec10.
This script runs the same five runs at another commit (default bbf3c33, the commit before
issue 40's first change) and compares them with ``GOLDEN``:

* the commit's tree is exported with ``git archive`` into a temporary folder (the
  repository itself is not touched: no worktree, no checkout);
* each run is a fresh process of this script (``--child NAME``) with
  ``PYTHONPATH=<tree>/src:<tree>/tests``, its working directory and ``HOME`` in a
  temporary folder, one torch thread (as the test's ``one_thread`` fixture); the process
  checks that ``spacl`` is imported from the exported tree;
* each run is written with that commit's import paths and APIs (:data:`CHILD_RUNS`) and
  the test's configs, overrides and seeds, through the commit's own test helpers
  (``test_kg_model.cycle_graph``, ``test_ood.FakeEncoder`` / ``write_topic_dataset``,
  ``test_text_finetune.tiny_backbone``).  A run the commit's API cannot express (an
  import or a config key that did not exist) is recorded as ``"not comparable: <the
  error>"``, not adapted.

Writes ``benchmarks/results/same_results_before.json``: ``commit`` (full sha), ``date``,
``command``, ``runs`` (name: the run's ``eval.json``, or the not-comparable string),
``kg_losses`` (the KG run's epoch losses, ``summary.json``'s ``history``, which the test
also checks), and ``comparison`` (per run: equal or not to ``GOLDEN`` at the test's
relative tolerance ``REL``, the largest relative difference and its key).

Usage::

    python benchmarks/same_results_before.py [--commit bbf3c33] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "same_results_before.json"
NAMES = ("image", "kg", "text_head", "text_finetuned", "text_detector")
#: the test's absolute floor beside its relative tolerance (``pytest.approx(abs=1e-12)``)
ABS = 1e-12


# ------------------------------------------------------------ the runs, at the old commit
# These functions run in the child process, on the exported commit's ``src`` and
# ``tests``: the import paths below are that commit's (bbf3c33), not the checkout's.


def _image(tmp: Path) -> dict[str, Any]:
    from spacl.tasks import run_recipe

    overrides = [
        "train.epochs=2",
        "train.max_steps=8",
        "train.progress=false",
        "eval.linear_probe=true",
        "eval.probe_max_iter=50",
        "eval.every_epochs=1",
        "log.tensorboard=false",
    ]
    run_recipe("digits/spacl", overrides, out=tmp / "image", quiet=True)
    return dict(json.loads((tmp / "image" / "eval.json").read_text()))


def _kg(tmp: Path) -> dict[str, Any]:
    from spacl.tasks.kg import train_kg
    from test_kg_model import cycle_graph

    recipe = {
        "data": {"name": "toy", "root": str(cycle_graph(tmp / "toy")), "unseen": "error"},
        "model": {"dim": 16, "init_scale": 0.1, "dropout": 0.1},
        "objective": {"name": "spacl", "temperature": 0.5},
        "optim": {"name": "adagrad", "lr": 0.02, "n3": 0.001},
        "train": {"epochs": 3, "batch_size": 16, "progress": False},
        "eval": {"every_epochs": 2},
    }
    train_kg(recipe, log=None, run_dir=tmp / "kg")
    return dict(json.loads((tmp / "kg" / "eval.json").read_text()))


def _split(tmp: Path) -> Any:
    from spacl.data.text import load_intent_dataset, open_intent_split
    from test_ood import write_topic_dataset

    root = write_topic_dataset(tmp / "topics")
    return open_intent_split(load_intent_dataset("topics", root), 0.5, 0)


def _text_head(tmp: Path) -> dict[str, Any]:
    from spacl.tasks.text import train_ood
    from test_ood import FakeEncoder

    cfg = {
        "objective": {"name": "spacl"},
        "encoder": {"cache_dir": str(tmp / "cache")},
        "model": {"hidden_dim": 32, "proj_dim": 16},
        "train": {"epochs": 3, "batch_size": 16, "progress": False, "seed": 1},
    }
    split, out = _split(tmp), tmp / "head"
    train_ood(cfg, encoder=FakeEncoder(dim=64), split=split, log=None, run_dir=out)
    return dict(json.loads((out / "eval.json").read_text()))


def _text_finetuned(tmp: Path) -> dict[str, Any]:
    # bbf3c33: spacl.tasks.text_config / text_finetune_run (029ec10 moved them to
    # spacl.tasks.text.config / spacl.tasks.text.task)
    from spacl.tasks.text_config import ood_config
    from spacl.tasks.text_finetune_run import train_finetuned

    from test_text_finetune import tiny_backbone

    overrides = [
        "train.epochs=3",
        "finetune.max_steps=7",
        "finetune.select_epoch=dev_accuracy",
        "optim.lr=1e-3",
        "ood.min_class_count=2",
    ]
    cfg = ood_config("text/stackoverflow_finetune_spacl", overrides)
    split, out = _split(tmp), tmp / "tuned"
    train_finetuned(cfg, backbone=tiny_backbone(), split=split, log=None, run_dir=out)  # type: ignore[arg-type]
    return dict(json.loads((out / "eval.json").read_text()))


def _text_detector(tmp: Path) -> dict[str, Any]:
    from spacl.tasks.text import train_ood
    from test_ood import FakeEncoder

    cfg = {
        "detector": {"method": "da_adb", "lr": 1e-2, "max_epochs": 30, "patience": 3,
                     "batch_size": 16},
        "encoder": {"cache_dir": str(tmp / "cache")},
        "train": {"seed": 3},
    }  # fmt: skip
    split, out = _split(tmp), tmp / "adb"
    train_ood(cfg, encoder=FakeEncoder(dim=64), split=split, log=None, run_dir=out)
    return dict(json.loads((out / "eval.json").read_text()))


#: the test's RUNS, written with the old commit's import paths
CHILD_RUNS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "image": _image,
    "kg": _kg,
    "text_head": _text_head,
    "text_finetuned": _text_finetuned,
    "text_detector": _text_detector,
}


def child(name: str, tree: Path, result: Path) -> None:
    """One run in this process (on the exported tree); its eval.json, or why it could not
    run, to ``result``."""
    here = Path(__file__).resolve().parent  # benchmarks/ holds kg.py, ood.py...: not these
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != here]
    import torch

    import spacl

    where = Path(spacl.__file__).resolve()
    if not where.is_relative_to(tree.resolve()):
        raise SystemExit(f"spacl imported from {where}, not from the exported tree {tree}")
    # the test module imports these helpers before any run (collection)
    import test_kg_model  # noqa: F401
    import test_ood  # noqa: F401
    import test_text_finetune  # noqa: F401

    torch.set_num_threads(1)  # the test's one_thread fixture
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=os.getcwd()))
    record: dict[str, Any] = {"spacl_file": str(where.relative_to(tree.resolve()))}
    try:
        record["eval"] = CHILD_RUNS[name](tmp)
    except (ImportError, AttributeError, TypeError, ValueError, KeyError) as err:
        record["error"] = f"{type(err).__name__}: {err}"
        record["traceback"] = traceback.format_exc()
    if name == "kg" and "eval" in record:
        summary = json.loads((tmp / "kg" / "summary.json").read_text())
        record["kg_losses"] = [entry["loss"] for entry in summary["history"]]
    result.write_text(json.dumps(record))


# ------------------------------------------------------------------ the parent: compare


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def relative_difference(got: float, want: float) -> float:
    """``|got - want| / |want|`` (0 when equal; inf for a nonzero against zero)."""
    if got == want:
        return 0.0
    return abs(got - want) / abs(want) if want != 0 else math.inf


def compare(got: dict[str, Any], want: dict[str, Any], rel: float) -> dict[str, Any]:
    """Whether ``got`` equals ``want`` as the test checks it (the same keys; every value
    within ``rel`` relative or :data:`ABS` absolute), the largest relative difference and
    its key."""
    flat_got, flat_want = _flat(got), _flat(want)
    if sorted(flat_got) != sorted(flat_want):
        return {
            "equal": False,
            "missing_keys": sorted(set(flat_want) - set(flat_got)),
            "extra_keys": sorted(set(flat_got) - set(flat_want)),
        }
    worst_key: str | None = None
    worst, equal, bitwise = 0.0, True, 0
    for key, value in flat_want.items():
        diff = relative_difference(flat_got[key], value)
        if diff > worst:
            worst_key, worst = key, diff
        bitwise += flat_got[key] == value
        equal &= abs(flat_got[key] - value) <= max(rel * abs(value), ABS)
    return {
        "equal": equal,
        "max_rel_diff": worst,
        "max_rel_diff_key": worst_key,  # None: every value bitwise equal
        "values": len(flat_want),
        "bitwise_equal": bitwise,
    }


def export_tree(commit: str, dest: Path) -> None:
    """The commit's files under ``dest`` (``git archive``; the repository is untouched)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def run_child(name: str, tree: Path, tmp: Path) -> dict[str, Any]:
    """One run in a fresh process on the exported tree (cwd and HOME in ``tmp``)."""
    work, home = tmp / f"cwd-{name}", tmp / "home"
    work.mkdir()
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree / 'src'}:{tree / 'tests'}",
        "HOME": str(home),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    result = tmp / f"{name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--tree", str(tree)]
    proc = subprocess.run([*cmd, "--result", str(result)], cwd=work, env=env, check=False)
    if proc.returncode != 0 or not result.exists():
        raise SystemExit(f"run {name!r} failed (exit {proc.returncode}); its output is above")
    return dict(json.loads(result.read_text()))


def _golden() -> tuple[dict[str, dict[str, Any]], list[float], float]:
    """GOLDEN, KG_LOSSES and REL of the checkout's tests/test_same_results.py."""
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "src")]
    import test_same_results as t

    return t.GOLDEN, t.KG_LOSSES, t.REL


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def record_runs(commit: str) -> dict[str, Any]:
    """The five runs at ``commit``, in the record's layout (module docstring)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{commit}^{{commit}}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    runs: dict[str, Any] = {}
    details: dict[str, Any] = {}
    imported: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="spacl-before-") as tmp_name:
        tmp = Path(tmp_name)
        tree = tmp / "tree"
        export_tree(sha, tree)
        for name in NAMES:
            print(f"[{name}] running at {sha[:7]} ...", flush=True)
            details[name] = run_child(name, tree, tmp)
    for name, got in details.items():
        runs[name] = got["eval"] if "eval" in got else f"not comparable: {got['error']}"
        imported[name] = f"<tree>/{got['spacl_file']}"
    cmd = " ".join(["python", "benchmarks/same_results_before.py", *sys.argv[1:]])
    return {
        "commit": sha,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": cmd,
        "how": (
            "git archive of the commit into a temporary folder; each run in a fresh process "
            "with PYTHONPATH=<tree>/src:<tree>/tests, cwd and HOME in a temporary folder, "
            "one torch thread; the runs of tests/test_same_results.py written with the "
            "commit's import paths (benchmarks/same_results_before.py, CHILD_RUNS)"
        ),
        "python": sys.version.split()[0],
        "torch": _torch_version(),
        "spacl_imported_from": imported,
        "runs": runs,
        "kg_losses": details["kg"].get("kg_losses"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="bbf3c33")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--child", choices=NAMES, help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.tree, args.result)
        return
    golden, kg_losses, rel = _golden()
    record = record_runs(args.commit)
    comparison: dict[str, Any] = {}
    for name in NAMES:
        got = record["runs"][name]
        if isinstance(got, str):
            comparison[name] = {"equal": None, "note": got}
            print(f"{name}: {got}")
            continue
        comparison[name] = compare(got, golden[name], rel)
        c = comparison[name]
        word = "equal" if c["equal"] else "different"
        worst = (
            f"largest relative difference {c.get('max_rel_diff')} ({c.get('max_rel_diff_key')}); "
            f"{c.get('bitwise_equal')} of {c.get('values')} values bitwise equal"
        )
        print(f"{name}: {word} to GOLDEN at rel {rel:g}; {worst}")
    if record["kg_losses"] is not None:
        diffs = [
            relative_difference(a, b) for a, b in zip(record["kg_losses"], kg_losses, strict=False)
        ]
        equal = len(diffs) == len(kg_losses) and max(diffs) <= rel
        comparison["kg_losses"] = {"equal": equal, "max_rel_diff": max(diffs, default=0.0)}
        print(f"kg_losses: {'equal' if equal else 'different'} to KG_LOSSES; {max(diffs):g}")
    record["tolerance"] = {"rel": rel, "abs": ABS}
    record["comparison"] = comparison
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    print(json.dumps(record, indent=2))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
