"""Sub-commands of the ``spacl`` CLI; each module exposes ``register(subparsers)``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "check_directory_out",
    "check_file_out",
    "check_out_parent",
    "close_names",
    "did_you_mean",
    "one_line",
]

#: suffixes of the files spacl writes or reads: a directory option ending in one is a
#: file name given where a directory is written
FILE_SUFFIXES = (
    ".pt",
    ".pth",
    ".pt2",
    ".npz",
    ".npy",
    ".json",
    ".jsonl",
    ".yaml",
    ".yml",
    ".png",
    ".jpg",
    ".jpeg",
    ".pdf",
    ".svg",
    ".onnx",
    ".zip",
    ".txt",
    ".tsv",
    ".csv",
    ".md",
)


def check_out_parent(path: str | Path, option: str) -> None:
    """``ValueError`` of one line when a folder above ``path``, what ``option`` writes, is
    an existing file (``--out notes.txt/run``): nothing can be written under a file.

    The nearest existing folder above ``path`` decides; folders that do not exist yet
    are made by the writer."""
    for parent in Path(path).parents:
        if parent.is_dir():
            return
        if parent.exists():
            raise ValueError(
                f"{option} {str(path)!r} cannot be written: {str(parent)!r} is a file, not a folder"
            )


def check_file_out(path: str | Path, option: str, suffixes: Sequence[str]) -> None:
    """``ValueError`` of one line when ``path``, the file ``option`` writes, does not end
    in one of ``suffixes`` (what is written there): a name must say what the file holds;
    or when it cannot be written: an existing folder, or a path under a file
    (:func:`check_out_parent`)."""
    if Path(path).suffix.lower() not in suffixes:
        raise ValueError(
            f"{option} writes a {' or '.join(suffixes)} file; got {str(path)!r}: "
            f"end it in {suffixes[0]}"
        )
    if Path(path).is_dir():
        inside = Path(path) / f"{Path(path).stem or 'out'}{suffixes[0]}"
        raise ValueError(
            f"{option} writes a {' or '.join(suffixes)} file; got {str(path)!r}, an existing "
            f"folder: name a file (e.g. {str(inside)!r})"
        )
    check_out_parent(path, option)


def check_directory_out(path: str | Path, option: str) -> None:
    """``ValueError`` of one line when ``path``, the directory ``option`` writes, ends in a
    file suffix of :data:`FILE_SUFFIXES` (``--out runs/d.pt`` would make a directory
    named like a file), names an existing file or lies under a file
    (:func:`check_out_parent`)."""
    if Path(path).exists() and not Path(path).is_dir():
        raise ValueError(f"{option} names the directory the run writes, got {str(path)!r}, a file")
    if Path(path).suffix.lower() in FILE_SUFFIXES:
        raise ValueError(
            f"{option} names the directory the run writes, got {str(path)!r}, a file name "
            f"({Path(path).suffix}); give a directory, e.g. {str(Path(path).with_suffix(''))!r}"
        )
    check_out_parent(path, option)


def moved_data_root(overrides: list[str], command: str) -> str | None:
    """The one ``data.root=DIR`` of ``overrides`` (where a run's dataset is now, if it
    moved since training), absolute; ``None`` without it.  Anything else is a one-line
    ``ValueError``: these commands re-read a run's own data, they take no other key."""
    roots = [item for item in overrides if item.startswith("data.root=")]
    if len(roots) != len(overrides) or len(roots) > 1:
        raise ValueError(
            f"spacl {command} accepts one data.root=DIR (where the run's data is now, if it "
            f"moved), got {overrides!r}"
        )
    return str(Path(roots[0].split("=", 1)[1]).expanduser().resolve()) if roots else None


def moved_data_error(err: FileNotFoundError, command: str, run_dir: object) -> FileNotFoundError:
    """``err`` (a run's dataset not found where the run read it) with the way out: the
    ``data.root=DIR`` that :func:`moved_data_root` reads: a new sentence after a message
    ending in a full stop, else after ``; ``."""
    text = str(err).rstrip()
    join = " If" if text.endswith(".") else "; if"
    return FileNotFoundError(
        f"{text}{join} it moved since training: spacl {command} {shlex.quote(str(run_dir))} "
        "data.root=DIR"
    )


def one_line(err: BaseException) -> str:
    """The message of ``err``; for an error re-raised from a ``DataLoader`` worker (``Caught
    ValueError in DataLoader worker process 0.`` and the worker's traceback), the worker's
    own one-line message."""
    text = str(err)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Caught ") and "Original Traceback" in text:
        last = lines[-1]  # "module.ErrorType: message"
        return last.split(": ", 1)[1] if ": " in last else last
    return text


#: the words of a name: ``/people/person/places_lived`` -> people, person, places, lived
_WORDS = re.compile(r"[^\W_]+")


def close_names(word: str, names: Sequence[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``names`` close to ``word``, closest first: by :mod:`difflib` (as
    an unknown recipe name or config key is matched), then names with a word close to
    ``word`` (``lives`` finds ``/people/person/places_lived``), then names holding it."""
    import difflib

    found = difflib.get_close_matches(word, list(names), n=n)
    query = word.lower()
    words = {name: [w.lower() for w in _WORDS.findall(name)] for name in names}
    for name in names:
        if len(found) >= n:
            break
        near = difflib.get_close_matches(query, words[name], n=1, cutoff=0.75)
        if name not in found and (near or (len(query) >= 3 and query in name.lower())):
            found.append(name)
    return found[:n]


def did_you_mean(word: str, names: Sequence[str], n: int = 3) -> str:
    """``"; did you mean 'a', 'b'?"`` for :func:`close_names`; with none close, the names
    themselves (the first ``n`` of more, and how many); ``""`` when ``names`` is empty."""
    close = close_names(word, names, n)
    if close:
        return f"; did you mean {', '.join(repr(c) for c in close)}?"
    if not names:
        return ""
    shown = ", ".join(repr(c) for c in names[:n])
    more = f", ... ({len(names)} in all)" if len(names) > n else ""
    return f"; the names are {shown}{more}"


#: the logger of the note that an image folder without a test folder was split
#: (:func:`spacl.tasks.image.data.folder_splits`), and the words that mark that note
