"""``spacl predict RUN_DIR ...``: predictions of a trained run, per task.

* **Image runs** (``spacl predict RUN IMAGE ...``): each image goes to the nearest class
  centre of the run's evaluation (``RUN_DIR/centres.pt``, the float64 training means of
  the features ``spacl eval`` probes).  One line per input: ``PATH<TAB>CLASS<TAB>DISTANCE``
  (the Euclidean distance to that centre, 6 significant digits: smaller is closer),
  the class by name (the image folder's, CIFAR's) or, for data without names, its label.
* **Open intent** (``spacl predict RUN "sentence" ...`` or ``--file FILE``, one text per
  line; a TSV's first column): the intent name, or ``open`` when the distance to the
  nearest class centre exceeds that class's saved threshold.  One line per input:
  ``INTENT<TAB>DISTANCE<TAB>TEXT`` (the distance is the score the rule thresholds).
* **KG** (``spacl predict RUN --head H --relation R [--top 10] [--filter]``, or
  ``--tail T --relation R`` for heads): ranked entities ``RANK<TAB>NAME<TAB>SCORE``;
  ``--filter`` leaves out answers that complete a known training triple.  Names or ids;
  an unknown name is refused with the graph's closest names.

``--json`` prints one JSON object per line instead.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spacl._validation import check_choice
from spacl.commands import did_you_mean

if TYPE_CHECKING:  # torch is imported where used: `spacl predict --help` is quick
    import torch

__all__ = ["nearest_centres", "read_centres", "register"]


def register(subparsers: Any) -> None:
    """Add the ``predict`` sub-command."""
    parser = subparsers.add_parser(
        "predict",
        help="predict with a trained run (image runs: nearest class centre)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", type=Path, help="a run directory written by spacl train")
    parser.add_argument("inputs", nargs="*", help="image files (image runs) or texts (text)")
    parser.add_argument(
        "--file",
        type=Path,
        help="text runs: one text per line (a TSV with a header: its 'text' column)",
    )
    parser.add_argument("--head", help="KG runs: the head entity (name or id)")
    parser.add_argument("--tail", help="KG runs: the tail entity, to rank heads")
    parser.add_argument("--relation", help="KG runs: the relation (name or id)")
    parser.add_argument("--top", type=int, default=None, help="KG runs: answers to print (10)")
    parser.add_argument("--filter", action="store_true", help="KG runs: drop known train triples")
    parser.add_argument("--arm", help="image runs: the arm to use (default: the run's first)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.set_defaults(func=run)


def read_centres(run_dir: Path) -> dict[str, Any]:
    """``RUN_DIR/centres.pt``, the class centres ``spacl eval`` writes: a dict of ``arms``
    (per arm its ``classes``, ``centres`` and ``features`` kind) and ``class_names``.

    A missing file is a ``FileNotFoundError``, a damaged one (not a torch archive, or
    not that layout) a ``ValueError``, each one line naming the file and saying that
    ``spacl eval RUN_DIR`` writes it again."""
    from spacl.engine.checkpoint import load_checkpoint
    from spacl.engine.rundir import RunDirectory

    path = RunDirectory(run_dir).centres
    again = f"run `spacl eval {run_dir}` to compute the class centres again"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: run `spacl eval {run_dir}` to compute the class centres"
        )
    try:
        saved = load_checkpoint(path)
    except ValueError as err:
        cause = err.__cause__  # torch's own error; none: the file holds no dict
        text = str(cause).strip() if cause is not None else ""
        kind = type(cause).__name__
        if kind == "error":  # struct.error, zlib.error...: the module says which
            kind = f"{type(cause).__module__}.error"
        why = (
            "not a dict of centres"
            if cause is None
            else kind + (f": {text.splitlines()[0]}" if text else "")
        )
        raise ValueError(f"the class-centres file {path} is damaged ({why}); {again}") from None
    arms = saved.get("arms")
    if not isinstance(arms, dict) or not all(
        isinstance(e, dict) and {"classes", "centres", "features"} <= set(e) for e in arms.values()
    ):
        raise ValueError(f"the class-centres file {path} is damaged (no per-arm centres); {again}")
    return saved


def nearest_centres(run_dir: Path, arm: str) -> tuple[torch.Tensor, torch.Tensor, str, list[str]]:
    """``(classes, centres [C, d], feature kind, class names)`` of ``arm`` from
    ``RUN_DIR/centres.pt`` (:func:`read_centres`); the names (in label order) are empty
    when the data has none (the digits) or the run predates them."""
    saved = read_centres(run_dir)
    arms = saved["arms"]
    check_choice(arm, "arm", sorted(arms))
    entry = arms[arm]
    names = [str(n) for n in saved.get("class_names", [])]
    return entry["classes"], entry["centres"], str(entry["features"]), names


def run(args: argparse.Namespace) -> int:
    from spacl.engine.rundir import run_config

    task = str(run_config(args.run_dir).get("task", "image"))
    _check_flags(args, task)
    if task == "kg":
        return _predict_kg(args)
    if task == "text":
        return _predict_text(args)
    if task != "image":
        raise ValueError(f"{args.run_dir} is a run of task {task!r}: nothing to predict with")
    return _predict_images(args)


#: the flags of one kind of run: given to another kind, they would be ignored
_TASK_FLAGS = {
    "kg": ("head", "tail", "relation", "top", "filter"),
    "text": ("file",),
    "image": ("arm",),
}


def _check_flags(args: argparse.Namespace, task: str) -> None:
    """A flag of another kind of run is refused in one line, never silently ignored."""
    for owner, flags in _TASK_FLAGS.items():
        given = [f"--{f}" for f in flags if getattr(args, f) not in (None, False)]
        if owner != task and given:
            raise ValueError(
                f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to {owner} runs, "
                f"and {args.run_dir} is {'an' if task[0] in 'aeiou' else 'a'} {task} run"
            )


def _predict_kg(args: argparse.Namespace) -> int:
    from spacl.tasks.kg.run import load_link_model

    if args.inputs or args.file:
        raise ValueError("a KG run takes --head/--tail and --relation, not inputs")
    if args.relation is None or (args.head is None) == (args.tail is None):
        raise ValueError("give --relation and exactly one of --head and --tail")
    link = load_link_model(args.run_dir)
    _known_name(args.relation, link.kg.relations.names, "relation")
    _known_name(args.head if args.head is not None else args.tail, link.kg.entities.names, "entity")
    answers = link.predict(
        args.relation,
        head=args.head,
        tail=args.tail,
        top=10 if args.top is None else args.top,
        filtered=args.filter,
    )
    for rank, (name, ident, score) in enumerate(answers, 1):
        if args.json:
            print(json.dumps({"rank": rank, "entity": name, "id": ident, "score": score}))
        else:
            print(f"{rank}\t{name}\t{score:.6g}")
    return 0


def _known_name(name: str, names: list[str], what: str) -> None:
    """An unknown entity or relation name is refused with the graph's closest names
    (``unknown relation 'lives' ...; did you mean 'lives_in'?``); ids are checked by the
    link model."""
    if name.isdigit() or name in set(names):
        return
    raise ValueError(
        f"unknown {what} {name!r} (not a name in the graph, nor an id){did_you_mean(name, names)}"
    )


def read_texts(path: Path) -> list[str]:
    """The texts of a file: one per line; a TSV (the quoted dialect training reads) whose
    first line names a ``text`` column, as a training file's header does (``text<TAB>label``
    or ``label<TAB>text``), gives that column of every later line, else the first column
    of every line."""
    import csv

    if not path.is_file():
        raise FileNotFoundError(f"--file {path} does not exist")
    with path.open(encoding="utf-8", newline="") as handle:
        rows = [row for row in csv.reader(handle, delimiter="\t") if any(c.strip() for c in row)]
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    column = header.index("text") if "text" in header else None
    if column is None:
        return [row[0] for row in rows]
    short = next((i + 2 for i, row in enumerate(rows[1:]) if len(row) <= column), None)
    if short is not None:
        raise ValueError(f"--file {path}, line {short}: no column {column + 1} ('text')")
    return [row[column] for row in rows[1:]]


def _predict_text(args: argparse.Namespace) -> int:
    from spacl.tasks.text.run import load_intent_detector

    texts = list(args.inputs) + (read_texts(args.file) if args.file else [])
    if not texts:
        raise ValueError("give texts to classify, or --file FILE")
    detector = load_intent_detector(args.run_dir)
    for text, (intent, distance) in zip(texts, detector.predict(texts), strict=True):
        if args.json:
            print(json.dumps({"input": text, "intent": intent, "distance": distance}))
        else:
            print(f"{intent}\t{distance:.6g}\t{text}")
    return 0


def _predict_images(args: argparse.Namespace) -> int:
    import torch

    from spacl.trained import load_image_run

    if not args.inputs:
        raise ValueError("give image files to classify")
    model = load_image_run(args.run_dir, args.arm)
    classes, centres, kind, names = nearest_centres(args.run_dir, model.arm)
    which = "projections" if kind == "projections" else "backbone"
    feats = model.embed(list(args.inputs), features=which).to(torch.float64)
    dist = torch.cdist(feats, centres.to(torch.float64))
    best, index = dist.min(dim=1)
    for path, k, d in zip(args.inputs, index.tolist(), best.tolist(), strict=True):
        label = int(classes[k])
        name = names[label] if names else str(label)
        if args.json:
            print(json.dumps({"input": path, "class": label, "name": name, "distance": d}))
        else:
            print(f"{path}\t{name}\t{d:.6g}")
    return 0
