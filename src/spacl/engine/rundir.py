"""The run directory: resolved config, metrics, checkpoints, evaluation and a summary.

Layout::

    RUN_DIR/
      config.yaml          the resolved config (every key, defaults filled in)
      metrics.jsonl        one JSON object per line: {"kind": "train"|"epoch"|"eval", ...}
      checkpoints/last.pt  the latest checkpoint (atomic; see spacl.engine.checkpoint)
      eval.json            final evaluation per arm
      centres.pt           each arm's nearest-class-centre classifier (spacl predict)
      summary.md           a short human-readable report
      tensorboard/         event files, when TensorBoard is installed and enabled

A KG or text run writes the same directory (``task: kg`` / ``task: text``): its
``metrics.jsonl`` kinds are ``epoch`` | ``valid`` | ``final`` (and ``step``), its
``checkpoints/last.pt`` is stamped with the task and :data:`TASK_CHECKPOINT_FORMAT`
(KG: the latest epoch, resumable, and the best weights; text: the model and the
open-intent detector), and it adds ``summary.json`` (what ``train_kg`` / ``train_ood``
return).  :meth:`RunDirectory.open_task_run` places it: ``run_dir`` (``spacl train
--out``) exactly, else ``<out_dir>/<name>-<YYYYmmdd-HHMMSS>`` when the recipe sets
``out_dir``, else nowhere (the Python API without a directory); a directory that already
holds files is refused unless the run resumes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from omegaconf import DictConfig, OmegaConf

from spacl.schema_files import load_run_yaml

__all__ = [
    "TASK_CHECKPOINT_FORMAT",
    "MetricsLogger",
    "RunDirectory",
    "annotate_yaml",
    "default_run_dir",
    "jsonable",
    "not_a_run_directory",
    "read_task_checkpoint",
    "require_checkpoint",
    "run_config",
]

#: version of the KG / text checkpoint layout
TASK_CHECKPOINT_FORMAT = 1


def annotate_yaml(text: str, notes: Mapping[str, str]) -> str:
    r"""``text`` (block-style YAML, as ``OmegaConf.to_yaml`` writes it) with ``notes[key]``
    as a comment at the end of the line of each dotted ``key`` (``train.batch_size``);
    a key not in ``text`` is refused (``KeyError``).

    Example:
        >>> annotate_yaml("train:\n  batch_size: 64\n", {"train.batch_size": "24 used"})
        'train:\n  batch_size: 64  # 24 used\n'
    """
    lines, left = text.splitlines(), dict(notes)
    path: list[str] = []
    for i, line in enumerate(lines):
        key = line.strip().split(":", 1)[0]
        if not line.strip() or line.lstrip().startswith(("#", "-")) or ":" not in line:
            continue
        depth = (len(line) - len(line.lstrip())) // 2
        path[depth:] = [key]
        dotted = ".".join(path)
        if dotted in left:
            lines[i] = f"{line}  # {' '.join(left.pop(dotted).split())}"
    if left:
        raise KeyError(f"no key {sorted(left)} in the YAML to annotate")
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def default_run_dir(cfg: DictConfig, name: str | None = None) -> Path:
    """``<out_dir>/<name>-<YYYYmmdd-HHMMSS>`` (``-2``, ``-3``... if it exists); ``name``
    defaults to the recipe's (or one made of the image recipe's data and objectives)."""
    name = name or cfg.name or _default_name(cfg)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(str(cfg.out_dir)).expanduser() / f"{name}-{stamp}"
    path, i = base, 2
    while path.exists():
        path = base.with_name(f"{base.name}-{i}")
        i += 1
    return path


def _default_name(cfg: DictConfig) -> str:
    if cfg.arms:
        return f"{cfg.data.name}-" + "-".join(a.name for a in cfg.arms)
    return f"{cfg.data.name}-{cfg.objective.name}"


class RunDirectory:
    """Paths of one run and what a run writes there (module docstring); ``task``: the
    task whose checkpoints it holds (``image``, ``kg``, ``text``)."""

    def __init__(self, path: str | Path, task: str = "image") -> None:
        self.path = Path(path)
        self.task = task

    @classmethod
    def open_task_run(
        cls, cfg: DictConfig, task: str, name: str, run_dir: str | Path | None, resume: bool
    ) -> RunDirectory | None:
        """The run directory of a KG / text run (module docstring), its config written;
        refused when it holds files and the run does not resume, unless it holds a run
        stopped before its first checkpoint (a ``config.yaml``, no checkpoint): that one
        starts afresh, as there is nothing to lose or continue."""
        if run_dir is None and not cfg.out_dir:
            return None
        path = Path(run_dir).expanduser() if run_dir is not None else default_run_dir(cfg, name)
        if path.exists() and not path.is_dir():
            raise ValueError(f"run directory {path} is a file")
        run = cls(path, task)
        never_saved = run.config.is_file() and not run.last_checkpoint.is_file()
        if not resume and not never_saved and path.is_dir() and any(path.iterdir()):
            raise ValueError(
                f"{path} is not empty; pass --resume to continue the run there, or choose "
                "another --out"
            )
        run.write_config(cfg)
        return run

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def last_checkpoint(self) -> Path:
        return self.checkpoints / "last.pt"

    @property
    def eval_json(self) -> Path:
        return self.path / "eval.json"

    @property
    def centres(self) -> Path:
        return self.path / "centres.pt"

    @property
    def summary(self) -> Path:
        return self.path / "summary.md"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    def create(self) -> None:
        self.checkpoints.mkdir(parents=True, exist_ok=True)

    def write_config(self, cfg: DictConfig, notes: Mapping[str, str] | None = None) -> None:
        """Save ``cfg`` as ``config.yaml`` (atomically); a relative ``out_dir`` is written
        absolute (from the working directory), so the run's record names no path relative
        to where ``spacl train`` ran.  ``notes``: a comment on a key's line
        (``{"train.batch_size": "..."}``), where the run did not use the value as given
        (:func:`annotate_yaml`)."""
        self.create()
        out_dir = cfg.get("out_dir") if isinstance(cfg, DictConfig) else None
        if isinstance(out_dir, str) and out_dir and not Path(out_dir).expanduser().is_absolute():
            cfg = cfg.copy()
            cfg.out_dir = str(Path(out_dir).expanduser().resolve())
        tmp = self.config.with_suffix(".yaml.tmp")
        tmp.write_text(annotate_yaml(OmegaConf.to_yaml(cfg, resolve=True), notes or {}))
        tmp.replace(self.config)

    def read_config_dict(self) -> dict[str, Any]:
        if not self.config.is_file():
            raise not_a_run_directory(self.path)
        data = OmegaConf.to_container(load_run_yaml(self.config), resolve=True)
        assert isinstance(data, dict)
        return data  # type: ignore[return-value]

    def write_json(self, path: Path, payload: Any) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(jsonable(payload), indent=2, sort_keys=True) + "\n")
        tmp.replace(path)

    def log(self, record: dict[str, Any]) -> None:
        """Append one JSON line to ``metrics.jsonl`` (a KG / text run's records)."""
        with self.metrics.open("a") as handle:
            handle.write(json.dumps(jsonable(record), sort_keys=True) + "\n")

    def reset_metrics(self) -> None:
        """Start ``metrics.jsonl`` afresh (a run that starts from scratch)."""
        self.metrics.write_text("")

    def metrics_lines(self) -> int:
        """How many records ``metrics.jsonl`` holds (what a checkpoint remembers)."""
        if not self.metrics.is_file():
            return 0
        return len(self.metrics.read_text().splitlines())

    def truncate_metrics(self, lines: int) -> None:
        """Keep the first ``lines`` records of ``metrics.jsonl``: a resumed run drops what
        was logged after its checkpoint, so no record is written twice."""
        kept = self.metrics.read_text().splitlines()[:lines] if self.metrics.is_file() else []
        self.metrics.write_text("".join(line + "\n" for line in kept))

    def save(self, state: dict[str, Any]) -> Path:
        """Write ``checkpoints/last.pt`` atomically, stamped with the task and
        :data:`TASK_CHECKPOINT_FORMAT` (a KG / text run)."""
        payload = {"format": TASK_CHECKPOINT_FORMAT, "task": self.task, **state}
        from spacl.engine.checkpoint import save_checkpoint  # torch: only when saving

        return save_checkpoint(payload, self.last_checkpoint)

    def checkpoint(self) -> dict[str, Any] | None:
        """The task's saved checkpoint, or None if the run has none yet."""
        if not self.last_checkpoint.is_file():
            return None
        return read_task_checkpoint(self.path, self.task)

    def finish(self, evaluation: dict[str, Any], summary: dict[str, Any]) -> None:
        """Write ``eval.json`` and ``summary.json`` (a KG / text run)."""
        self.write_json(self.eval_json, evaluation)
        self.write_json(self.path / "summary.json", summary)

    def stored_summary(self) -> dict[str, Any]:
        """A finished KG / text run's ``summary.json``, its ``run_dir`` where the run is now
        (absolute): a moved run names its new place, not the one it was written at."""
        summary = dict(json.loads((self.path / "summary.json").read_text()))
        summary["run_dir"] = str(self.path.resolve())
        return summary


def jsonable(value: Any) -> Any:
    """``value`` with non-finite floats as strings (``"nan"``, ``"inf"``), keys as strings
    and tuples as lists: what ``json.dumps`` writes as standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


class MetricsLogger:
    """Appends JSON lines to ``metrics.jsonl`` (and scalars to TensorBoard when enabled).

    Only the main process logs; other ranks get a logger with ``enabled=False``.
    """

    def __init__(
        self, run: RunDirectory, *, enabled: bool = True, tensorboard: bool | None = None
    ) -> None:
        self.run = run
        self.enabled = enabled
        self._handle: TextIO | None = None
        self._tb: Any = None
        if enabled and tensorboard is not False:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                if tensorboard:
                    raise ValueError(
                        "config key 'log.tensorboard' is true but TensorBoard is not installed "
                        "(pip install tensorboard)"
                    ) from None
            else:
                self._tb = SummaryWriter(log_dir=str(run.tensorboard))

    def truncate_for_resume(self, global_step: int, epoch: int, *, finished: bool = False) -> None:
        """Drop records written after the checkpoint being resumed.

        Kept: epoch/eval records of epochs before ``epoch`` (later ones are recomputed by
        the resumed run), the final evaluation's records only when ``finished`` (the run
        is done and its results written: nothing is recomputed), and every other record
        (train steps, errors) with ``step <= global_step``.
        """
        if not self.enabled or not self.run.metrics.is_file():
            return
        kept = []
        for line in self.run.metrics.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by the kill
            kind = rec.get("kind")
            if kind in ("epoch", "eval"):
                keep = rec.get("epoch", 0) < epoch
            elif kind == "final":
                keep = finished
            else:
                keep = rec.get("step", 0) <= global_step
            if keep:
                kept.append(line)
        tmp = self.run.metrics.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(k + "\n" for k in kept))
        tmp.replace(self.run.metrics)

    def log(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if self._handle is None:
            self.run.path.mkdir(parents=True, exist_ok=True)
            self._handle = self.run.metrics.open("a", buffering=1)
        self._handle.write(json.dumps(jsonable(record), sort_keys=True) + "\n")
        self._handle.flush()
        if self._tb is not None:
            step = int(record.get("step", 0))
            prefix = f"{record.get('kind', 'train')}/{record.get('arm', 'main')}"
            for key, value in record.items():
                if key not in ("step", "epoch") and isinstance(value, (int, float)):
                    self._tb.add_scalar(f"{prefix}/{key}", value, step)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def not_a_run_directory(path: str | Path) -> FileNotFoundError:
    """The one-line error for ``path`` given as a run directory without a ``config.yaml``:
    what it is instead (a file, e.g. the run's own ``config.yaml``; nothing; another
    directory)."""
    path = Path(path)
    if path.is_file():
        where = f"; its run directory is {path.parent}" if path.name == "config.yaml" else ""
        return FileNotFoundError(
            f"{path} is a file, not a run directory (the directory spacl train wrote, "
            f"holding config.yaml){where}"
        )
    if not path.exists():
        return FileNotFoundError(f"run directory {path} does not exist")
    return FileNotFoundError(f"{path} is not a run directory: {path / 'config.yaml'} is missing")


def require_checkpoint(run_dir: str | Path | None) -> Path:
    """``run_dir``'s ``checkpoints/last.pt``, which a resume continues from: a resume
    with none is an error, never a silent fresh start (``--resume`` / ``resume=True``).

    Raises:
        FileNotFoundError: no run directory given, or it holds no checkpoint.
    """
    if run_dir is None or not RunDirectory(run_dir).last_checkpoint.is_file():
        where = run_dir if run_dir is not None else "the new run (no --out, no run directory)"
        raise FileNotFoundError(
            f"--resume: {where} has no checkpoints/last.pt to continue from; "
            "drop --resume to start a new run"
        )
    return RunDirectory(run_dir).last_checkpoint


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def read_task_checkpoint(run_dir: str | Path, task: str) -> dict[str, Any]:
    """``checkpoints/last.pt`` of a ``task`` run (``weights_only``); clear errors otherwise."""
    rd = RunDirectory(run_dir)
    if not rd.last_checkpoint.is_file():
        raise FileNotFoundError(f"{rd.path} has no checkpoint: {rd.last_checkpoint} is missing")
    from spacl.engine.checkpoint import load_checkpoint  # torch: only when reading one

    state = load_checkpoint(rd.last_checkpoint)
    found = state.get("task", "image")
    if found != task:
        raise ValueError(f"{rd.last_checkpoint} is a checkpoint of task {found!r}, not {task!r}")
    if state.get("format") != TASK_CHECKPOINT_FORMAT:
        raise ValueError(
            f"{rd.last_checkpoint} has format {state.get('format')!r}, "
            f"expected {TASK_CHECKPOINT_FORMAT}"
        )
    return state


def run_config(run_dir: str | Path) -> DictConfig:
    """The ``config.yaml`` of a run directory (``FileNotFoundError`` if it has none)."""
    rd = RunDirectory(run_dir)
    if not rd.config.is_file():
        raise not_a_run_directory(rd.path)
    return load_run_yaml(rd.config)
