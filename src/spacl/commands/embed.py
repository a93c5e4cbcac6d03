"""``spacl embed`` and ``spacl export``: a trained run's encoder outside its run directory.

Each sub-command has its own help (:data:`EMBED_HELP`, :data:`EXPORT_HELP`): ``spacl
embed`` writes the features of a data set, ``spacl export`` the trained model in a form
that runs without spacl.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spacl.commands import (
    check_file_out,
    check_out_parent,
    moved_data_error,
    moved_data_root,
    one_line,
)

if TYPE_CHECKING:  # torch and numpy are imported where used: `spacl embed --help` is quick
    from torch import Tensor

__all__ = ["EMBED_HELP", "EXPORT_HELP", "embed_batches", "register", "write_features"]

#: ``spacl embed --help``
EMBED_HELP = """``spacl embed RUN_DIR [data.root=DIR] --out FILE [--split train|test] [--features
backbone|projections] [--data IMAGE_FOLDER] [--arm NAME]``: the features of a data set
under a trained run's encoder.

Writes ``features [N, d]`` (float32) and ``labels [N]`` to ``FILE`` (``.npz`` or
``.pt``), which ``spacl geometry FILE`` and ``spacl align`` read as they are.
``data.root=DIR`` says where a run's data is now when it moved since training (an
image run's own split is made again from there, held to the run's ``split.json``; a
text run's split is drawn again; as ``spacl eval RUN data.root=DIR`` does).  Features
are written batch by batch into a memory map next to ``FILE`` (then packed), so the
memory used is one batch plus the labels.  Text runs give the head outputs of a split's
texts, KG runs every entity's embedding.
"""

#: ``spacl export --help``
EXPORT_HELP = """``spacl export RUN_DIR --out PATH [--arm NAME]``: a trained run in a form that runs
without spacl.  It reads the run directory alone (no dataset).

* Image runs: ``--out FILE.pt2`` (the suffix in any case, as every ``--out`` of spacl:
  ``.PT2`` is written under that very name), the encoder (of ``--arm``, default the
  run's first) as a ``torch.export`` program: ``torch.export.load(FILE).module()`` runs
  it without spacl installed (see :func:`spacl.trained.export_encoder` for its input and
  its metadata).
* Text runs (an open-intent detector): ``--out`` is a new (or empty) folder holding the
  sentence-transformers encoder (fine-tuned layers included), the head as a
  ``torch.export`` program, the class centres, thresholds and names, and a README with
  the code that runs it without spacl (:mod:`spacl.tasks.text.export`).
* KG runs (a link predictor): ``--out`` is a new (or empty) folder holding the entity and
  relation tables, the names, and a README with the scoring code
  (:mod:`spacl.tasks.kg.export`).
"""


def register(subparsers: Any) -> None:
    """Add the ``embed`` and ``export`` sub-commands."""
    embed = subparsers.add_parser(
        "embed",
        help="write the features of a data set under a trained run's encoder",
        description=EMBED_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    embed.add_argument("run_dir", type=Path, help="a run directory written by spacl train")
    embed.add_argument(
        "overrides",
        nargs="*",
        help="data.root=DIR: where the run's data is now, if it moved (as for spacl eval)",
    )
    embed.add_argument("--out", type=Path, required=True, help="output file (.npz or .pt)")
    embed.add_argument(
        "--split",
        choices=("train", "test"),
        default=None,
        help="the run's own split (default test; not with --data, another folder)",
    )
    embed.add_argument(
        "--features",
        choices=("backbone", "projections"),
        default=None,
        help="which output of an image run (default backbone)",
    )
    embed.add_argument(
        "--data", type=Path, help="an image folder (one sub-folder per class) instead of the run's"
    )
    embed.add_argument("--arm", help="the arm to use (default: the run's first)")
    embed.add_argument("--batch-size", type=int, default=256, help="rows per forward pass")
    embed.add_argument("--quiet", action="store_true", help="no progress bar")
    embed.set_defaults(func=run_embed)

    export = subparsers.add_parser(
        "export",
        help="write a trained run's encoder (image runs), open-intent detector (text runs) "
        "or link predictor (kg runs) in a form that runs without spacl",
        description=EXPORT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("run_dir", type=Path, help="a run directory written by spacl train")
    export.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output file (.pt2); for text and kg runs a new folder",
    )
    export.add_argument("--arm", help="the arm to export (default: the run's first)")
    export.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    from spacl._validation import check_export_archive
    from spacl.engine.rundir import run_config

    task = str(run_config(args.run_dir).get("task", "image"))
    if task in ("text", "kg"):
        if args.arm is not None:
            raise ValueError(f"--arm applies to image runs, not to a {task} run (got {args.arm!r})")
        check_out_parent(args.out, "--out")  # the folder's own checks: its exporter's
        folder = _folder_exporter(task)(args.run_dir, args.out)
        print(f"wrote {folder} (README.md there shows how to use it)", file=sys.stderr)
        return 0
    if task != "image":
        raise ValueError(
            f"spacl export writes image encoders, text detectors and link predictors; "
            f"{args.run_dir} is a {task} run"
        )
    check_export_archive(args.out)  # before loading the run: one line, at once (any case)
    check_file_out(args.out, "--out", (".pt2",))  # not a folder, not under a file
    from spacl.trained import export_encoder, load_image_run

    model = load_image_run(args.run_dir, args.arm)
    _check_writable(args.out, "--out")  # torch's own error is a traceback
    path = export_encoder(model, args.out)
    print(f"wrote {path} (arm {model.arm}, input {list(model.input_shape)})", file=sys.stderr)
    return 0


def _check_writable(path: Path, option: str) -> None:
    """An ``OSError`` naming ``option`` when the file ``path`` cannot be created (a folder
    that does not exist and cannot be made, no permission); the writer's folder is made."""
    existed = path.exists()
    with _naming(path, option):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab"):
            pass
    if not existed:
        path.unlink()


def _folder_exporter(task: str) -> Any:
    """The exporter of a text run (the detector) or a KG run (the link predictor)."""
    if task == "text":
        from spacl.tasks.text.export import export_text_run

        return export_text_run
    from spacl.tasks.kg.export import export_kg_run

    return export_kg_run


def run_embed(args: argparse.Namespace) -> int:
    from spacl._progress import progress
    from spacl.engine.rundir import run_config

    check_file_out(args.out, "--out", (".npz", ".pt"))  # before any work: one line
    task = str(run_config(args.run_dir).get("task", "image"))
    root = moved_data_root(args.overrides, "embed")
    if args.split is not None and args.data is not None:
        raise ValueError(
            f"--split {args.split} names the run's own split and --data another folder: give one"
        )
    split = args.split or "test"
    if task == "image":
        from spacl.trained import load_image_run  # torch: once the arguments are checked

        model = load_image_run(args.run_dir, args.arm)
        if root is not None:
            model.config.data.root = root
        features = args.features or "backbone"
        total, batches = embed_batches(
            model, split, args.data, features, args.batch_size, run_dir=args.run_dir
        )
        what = f"arm {model.arm}, {features}"
    else:
        image_only = {"--data": args.data, "--arm": args.arm, "--features": args.features}
        if task == "kg":  # every entity: no split to choose
            image_only["--split"] = args.split
        given = [flag for flag, value in image_only.items() if value is not None]
        if given:
            raise ValueError(
                f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} to image "
                f"runs, not to a {task} run"
                + (" (a KG run embeds every entity)" if task == "kg" else "")
            )
        total, batches, what = _task_batches(args.run_dir, task, split, root)
    bar = progress(total=total, desc="embed", unit="row", mode=False if args.quiet else None)
    with bar:
        n = write_features(args.out, total, batches, on_rows=bar.update)
    print(f"wrote {args.out}: {n} rows ({what})", file=sys.stderr)
    return 0


def _task_batches(
    run_dir: Path, task: str, split: str, root: str | None = None
) -> tuple[int, Iterator[tuple[Tensor, Tensor]], str]:
    """Text runs: head outputs of a split's texts (test OOD label = K), the dataset read
    from ``root`` when given (it moved); KG: every entity (from the run directory alone)."""
    import torch

    if task == "kg":
        from spacl.tasks.kg.run import load_link_model

        link = load_link_model(run_dir)
        ids = torch.arange(link.kg.num_entities)
        rows = (
            (link.embed(ids[i : i + 4096].tolist()), ids[i : i + 4096])
            for i in range(0, len(ids), 4096)
        )
        return len(ids), rows, "entity embeddings; labels are entity ids"
    from spacl.tasks.text.detector import split_of
    from spacl.tasks.text.run import load_intent_detector

    det = load_intent_detector(run_dir)
    if root is not None:
        det.config.data.root = root
    try:
        parts = split_of(det.config, run_dir)  # the run's own classes and carved splits
    except FileNotFoundError as err:
        if root is not None:
            raise
        raise moved_data_error(err, "embed", run_dir) from None
    texts, labels = {
        "train": (parts.train_texts, parts.train_labels),
        "test": (parts.test_texts, parts.test_labels),
    }[split]
    step = 256
    rows = (
        (det.embed(texts[i : i + step]).float(), labels[i : i + step])
        for i in range(0, len(texts), step)
    )
    return len(texts), rows, "head outputs; test label K = open"


def embed_batches(
    model: Any,
    split: str,
    folder: Path | None,
    features: str,
    batch_size: int,
    run_dir: str | Path | None = None,
) -> tuple[int, Iterator[tuple[Tensor, Tensor]]]:
    """``(row count, iterator of (features, labels) batches)`` of the chosen data.

    The run's own image-folder split is held to ``run_dir/split.json`` when it exists.
    """
    import torch

    if batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
    cfg = model.config
    if folder is not None or cfg.data.name == "imagefolder":
        from torch.utils.data import DataLoader

        from spacl.data import load_imagefolder
        from spacl.data.imagefolder import check_images, subset
        from spacl.data.transforms import eval_transform

        size = int(model.input_shape[-1])
        plain = eval_transform(size, mean=None, std=None)  # embed() normalises
        if folder is not None:
            if folder.is_file():
                raise ValueError(
                    f"--data {str(folder)!r} is a file, not a folder: --data takes an image "
                    f"folder (one sub-folder per class); for single images use `spacl predict "
                    f"RUN FILE...` or spacl.load(RUN).embed([FILE, ...])"
                )
            if not folder.is_dir():
                raise FileNotFoundError(
                    f"--data {str(folder)!r} does not exist (an image folder: one sub-folder "
                    f"per class)"
                )
            dataset = load_imagefolder(folder, None, transform=plain)
            try:  # every header read once: an unreadable file is one line, before any work
                check_images(dataset, "error")
            except ValueError as err:
                raise ValueError(f"--data: {str(err).split(';')[0]}; remove it") from None
            _label_by_run_names(dataset, run_dir)
        else:  # the run's own split, as spacl eval makes it (data.test_fraction...)
            from spacl.tasks.image.data import folder_splits

            if cfg.data.root is not None and not Path(str(cfg.data.root)).is_dir():
                raise FileNotFoundError(  # the folder moved since training
                    f"the run's image folder {cfg.data.root} is gone; pass data.root=DIR "
                    f"(where it is now) or --data DIR (another folder)"
                )
            part = folder_splits(cfg, run_dir)[0 if split == "train" else 1]
            dataset = subset(part, range(len(part)), transform=plain)
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=False)
        batches = ((model.embed(x, features=features, batch_size=batch_size), y) for x, y in loader)
        return len(dataset), _named_data_errors(batches, own_split=folder is None)
    from spacl.tasks.image.data import build_run_data

    data = build_run_data(cfg, device=torch.device("cpu"), dtype=torch.float32)
    labelled = data.train_eval if split == "train" else data.test_eval

    def rows_of() -> Iterator[tuple[Tensor, Tensor]]:
        for start in range(0, len(labelled), batch_size):
            x = labelled.inputs[start : start + batch_size]
            yield model.embed(x, features=features), labelled.labels[start : start + batch_size]

    return len(labelled), rows_of()


def _label_by_run_names(dataset: Any, run_dir: str | Path | None) -> None:
    """A ``--data`` folder's labels in the run's class order (torchvision numbers the
    folder's own classes from 0), when every class folder is one of the run's classes
    (``centres.pt``'s names); otherwise the folder's own order, said on stderr."""
    from spacl.commands.predict import read_centres
    from spacl.data.imagefolder import align_classes
    from spacl.engine.rundir import RunDirectory

    centres = RunDirectory(run_dir).centres if run_dir is not None else None
    names = (
        [str(n) for n in read_centres(Path(run_dir)).get("class_names", [])]
        if run_dir is not None and centres is not None and centres.is_file()
        else []
    )
    if names and set(dataset.classes) <= set(names):
        align_classes(dataset, names, "--data")
    elif names:
        unknown = sorted(set(dataset.classes) - set(names))
        print(
            f"note: --data classes {unknown} are not the run's: labels follow the folder's "
            f"own class order {list(dataset.classes)}",
            file=sys.stderr,
        )


def _named_data_errors(
    batches: Iterator[tuple[Tensor, Tensor]], own_split: bool
) -> Iterator[tuple[Tensor, Tensor]]:
    """``batches``, an image that fails to decode (a truncated file) named in one line:
    in a ``--data`` folder, remove it; in the run's own split (``own_split``), which the
    run's ``split.json`` holds to its files, restore it (``data.bad_images`` is a training
    key, not embed's)."""
    from spacl.data.imagefolder import UnreadableImageError, in_trained_split

    try:
        yield from batches
    except UnreadableImageError as err:
        if own_split:
            raise in_trained_split(err) from None
        raise ValueError(f"--data: {str(err).split(';')[0]}; remove it") from None


def write_features(
    path: Path,
    total: int,
    batches: Iterator[tuple[Tensor, Tensor]],
    on_rows: Any = None,
    option: str = "--out",
) -> int:
    """Write ``features`` / ``labels`` to ``path`` (.npz or .pt) through an on-disk memory map.

    The memory map and the packed file are written next to ``path`` and removed whatever
    happens; a file that cannot be written there is an ``OSError`` naming ``path`` as
    ``option`` (the argument that gave it), not the scratch files.
    """
    import numpy as np
    import torch

    kind = path.suffix.lower()
    scratch = path.with_name(path.name + ".features.npy")
    tmp = path.with_name(path.name + ".tmp" + kind)  # np.savez keeps a name ending in .npz
    labels = np.zeros(total, dtype=np.int64)
    feats: Any = None
    n = 0
    try:
        for f, y in batches:
            if feats is None:
                with _naming(path, option):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    feats = np.lib.format.open_memmap(
                        scratch, mode="w+", dtype=np.float32, shape=(total, f.shape[1])
                    )
            feats[n : n + len(f)] = f.numpy()
            labels[n : n + len(f)] = y.numpy()
            n += len(f)
            if on_rows is not None:
                on_rows(len(f))
        if feats is None:
            raise ValueError("the data set is empty: nothing to embed")
        with _naming(path, option):
            feats.flush()
            if kind == ".npz":
                np.savez(tmp, features=feats[:n], labels=labels[:n])
            else:
                payload = {
                    "features": torch.from_numpy(np.array(feats[:n])),
                    "labels": torch.from_numpy(labels[:n]),
                }
                with tmp.open("wb") as handle:  # an OSError naming the file, not torch's
                    torch.save(payload, handle)
            tmp.replace(path)
    finally:
        del feats
        scratch.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return n


@contextmanager
def _naming(path: Path, option: str) -> Iterator[None]:
    """An ``OSError`` inside the block re-raised naming ``option`` and ``path``: the
    scratch files next to ``path`` are spacl's, not the user's."""
    try:
        yield
    except OSError as err:
        reason = err.strerror or one_line(err)
        raise OSError(f"{option} {str(path)!r} cannot be written ({reason})") from None
