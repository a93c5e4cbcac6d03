"""The run directory of a KG or text run, laid out as the image engine's.

::

    RUN_DIR/
      config.yaml          the resolved recipe (``task: kg`` / ``task: text``)
      metrics.jsonl        one JSON object per line (``kind``: ``epoch`` | ``valid`` | ``final``)
      checkpoints/last.pt  atomic; KG: the latest epoch (resumable) and the best weights;
                           text: the head and the open-intent detector
      eval.json            test metrics beside the trivial baselines
      summary.json         the run's summary (what ``train_kg`` / ``train_ood`` return)

Where it goes: ``run_dir`` (``spacl train --out``) exactly, else
``<out_dir>/<name>-<YYYYmmdd-HHMMSS>`` when the recipe sets ``out_dir`` (its parent, as
for image runs), else nowhere (the Python API without a directory).  A directory that
already holds files is refused unless the run resumes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from spacl.engine.checkpoint import load_checkpoint, save_checkpoint
from spacl.engine.rundir import RunDirectory, jsonable

__all__ = ["TaskRun", "read_task_checkpoint"]

#: version of the KG / text checkpoint layout
TASK_CHECKPOINT_FORMAT = 1


class TaskRun:
    """Writes one KG / text run directory (module docstring)."""

    def __init__(self, path: Path, task: str) -> None:
        self.dir = RunDirectory(path)
        self.task = task

    @property
    def path(self) -> Path:
        return self.dir.path

    @classmethod
    def open(
        cls, cfg: DictConfig, task: str, name: str, run_dir: str | Path | None, resume: bool
    ) -> TaskRun | None:
        """The run directory of ``cfg`` (module docstring), refused when occupied."""
        if run_dir is None and not cfg.out_dir:
            return None
        if run_dir is not None:
            path = Path(run_dir).expanduser()
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = base = Path(str(cfg.out_dir)).expanduser() / f"{name}-{stamp}"
            i = 2
            while path.exists():
                path, i = base.with_name(f"{base.name}-{i}"), i + 1
        if path.exists() and not path.is_dir():
            raise ValueError(f"run directory {path} is a file")
        if not resume and path.is_dir() and any(path.iterdir()):
            raise ValueError(
                f"{path} is not empty; pass --resume to continue the run there, or choose "
                "another --out"
            )
        run = cls(path, task)
        run.dir.write_config(cfg)
        return run

    def log(self, record: dict[str, Any]) -> None:
        """Append one JSON line to ``metrics.jsonl``."""
        with self.dir.metrics.open("a") as handle:
            handle.write(json.dumps(jsonable(record), sort_keys=True) + "\n")

    def reset_metrics(self) -> None:
        """Start ``metrics.jsonl`` afresh (a run that starts from scratch)."""
        self.dir.metrics.write_text("")

    def save(self, state: dict[str, Any]) -> Path:
        """Write ``checkpoints/last.pt`` atomically, stamped with the task and format."""
        payload = {"format": TASK_CHECKPOINT_FORMAT, "task": self.task, **state}
        return save_checkpoint(payload, self.dir.last_checkpoint)

    def checkpoint(self) -> dict[str, Any] | None:
        """The saved checkpoint, or None if the run has none yet."""
        if not self.dir.last_checkpoint.is_file():
            return None
        return read_task_checkpoint(self.path, self.task)

    def finish(self, evaluation: dict[str, Any], summary: dict[str, Any]) -> None:
        """Write ``eval.json`` and ``summary.json``."""
        self.dir.write_json(self.dir.eval_json, evaluation)
        self.dir.write_json(self.path / "summary.json", summary)


def read_task_checkpoint(run_dir: str | Path, task: str) -> dict[str, Any]:
    """``checkpoints/last.pt`` of a ``task`` run (``weights_only``); clear errors otherwise."""
    rd = RunDirectory(run_dir)
    if not rd.last_checkpoint.is_file():
        raise FileNotFoundError(f"{rd.path} has no checkpoint: {rd.last_checkpoint} is missing")
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
        raise FileNotFoundError(f"{rd.path} is not a run directory: {rd.config} is missing")
    cfg = OmegaConf.load(rd.config)
    assert isinstance(cfg, DictConfig)
    return cfg
