"""Link prediction recipes (``task: kg``): training loop and evaluation.

The schema (:class:`KGConfig`, :func:`kg_config`) is in :mod:`spacl.tasks.kg.config`.

:func:`train_kg` trains a :class:`~spacl.models.kg.LinkPredictor` with one of the
objectives of :mod:`spacl.losses.kg` (``objective.name``: ``infonce`` |
``spacl``; formulas and decisions there), validates by filtered MRR every
``eval.every_epochs`` epochs, restores the best epoch and reports filtered test MRR and
Hits@1/3/10 (:func:`spacl.evaluate.ranking.evaluate_link_prediction`).

``train.unit=query`` (default) iterates over the distinct training queries ``(h, r)``
(reciprocal relations included), all known tails of a query positive in one score row
(K-vs-all); ``train.unit=triple`` iterates over training triples, each with its own tail
as the one positive (the unfiltered 1-vs-all cross-entropy of Lacroix et al. 2018).  The
N3 regulariser (``optim.n3``) is the mean over the step's training triples of
``|h|^3 + |r|^3 + |t|^3`` in either unit.  ``train.minutes`` bounds the training time.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from spacl._progress import progress
from spacl.data.kg import GRAPH_FILE, KnowledgeGraph, load_kg, write_graph_vocabulary
from spacl.evaluate.ranking import evaluate_link_prediction
from spacl.losses.kg import (
    KG_SPACL_VARIANTS,
    LinkInfoNCELoss,
    LinkSPACLLoss,
    top_share_cut,
)
from spacl.losses.registry import objective_names
from spacl.models.kg import LinkPredictor
from spacl.tasks.kg.config import KGConfig, build_kg_objective, kg_config
from spacl.tasks.rundir import TaskRun

#: the KG task's logger (``spacl.tasks.kg``, as before the package)
_logger = logging.getLogger("spacl.tasks.kg")

#: the link-prediction objectives: the ``kg`` rows of :mod:`spacl.losses.registry`
KG_OBJECTIVES = objective_names("kg")

__all__ = [
    "KG_OBJECTIVES",
    "KG_SPACL_VARIANTS",
    "KGConfig",
    "LinkInfoNCELoss",
    "LinkSPACLLoss",
    "build_kg_objective",
    "kg_config",
    "top_share_cut",
    "train_kg",
]


# ----------------------------------------------------------------------------- training


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _optimizer(cfg: DictConfig, model: nn.Module) -> torch.optim.Optimizer:
    lr, wd = float(cfg.optim.lr), float(cfg.optim.weight_decay)
    if cfg.optim.name == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=lr, weight_decay=wd)
    return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)


def _evaluate(
    model: LinkPredictor,
    kg: KnowledgeGraph,
    split: str,
    filter_index: Any,
    cfg: DictConfig,
    device: torch.device,
) -> dict[str, float]:
    triples = kg.split(split)
    if split == "valid" and cfg.eval.valid_subset is not None:
        triples = triples[: int(cfg.eval.valid_subset)]
    model.eval()
    metrics = evaluate_link_prediction(
        model,
        triples,
        kg.num_relations,
        filter_index,
        batch_size=int(cfg.eval.batch_size),
        ties=str(cfg.eval.ties),
        device=device,
        progress=cfg.train.progress,
    )
    model.train()
    return metrics


@dataclass
class _KGRun:
    """What the epochs of :func:`train_kg` share."""

    cfg: DictConfig
    kg: KnowledgeGraph
    model: LinkPredictor
    objective: nn.Module
    optimizer: torch.optim.Optimizer
    items: Tensor
    per_triple: bool
    device: torch.device
    say: Callable[[str], None]
    budget: float | None
    train_seconds: float = 0.0

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.items) / int(self.cfg.train.batch_size))


def _kg_step(run: _KGRun, train_index: Any, chunk: Tensor, epoch: int, step: int) -> float:
    """One optimiser step on a chunk of queries (or triples); the loss value."""
    kg, device = run.kg, run.device
    if run.per_triple:  # 1-vs-all: the triple's own tail is the positive
        row, tail = torch.arange(len(chunk)), chunk[:, 2]
    else:  # K-vs-all: every known tail of the query
        row, tail = train_index.pairs(chunk[:, 0], chunk[:, 1])
    positives = torch.zeros(len(chunk), kg.num_entities, dtype=torch.bool)
    positives[row, tail] = True
    chunk, row, tail = chunk.to(device), row.to(device), tail.to(device)
    h, r = chunk[:, 0], chunk[:, 1]
    # the pairs too: the objective need not scan the [B, E] mask for them
    known = (row, tail)
    loss = run.objective(run.model.query(h, r), run.model.entities(), positives.to(device), known)
    n3 = float(run.cfg.optim.n3)
    if n3 > 0:  # per training triple (h, r, t), as in Lacroix et al. (2018)
        loss = loss + n3 * run.model.n3(h[row], r[row], tail)
    if not bool(torch.isfinite(loss)):
        raise ValueError(f"non-finite training loss at epoch {epoch}, step {step}")
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    run.optimizer.step()
    return float(loss.detach())


def _kg_epoch(
    run: _KGRun, train_index: Any, epoch: int, perm: Tensor
) -> tuple[dict[str, Any], bool]:
    """Train one epoch (or until the time budget); its record and whether time ran out."""
    cfg, say = run.cfg, run.say
    batch = int(cfg.train.batch_size)
    start = time.perf_counter()
    total, steps = 0.0, 0
    diagnostics: dict[str, float] = {}
    out_of_time = False
    step_bar = progress(
        total=run.steps_per_epoch, desc=f"epoch {epoch}", mode=cfg.train.progress, unit="step"
    )
    for i in range(0, len(perm), batch):
        total += _kg_step(run, train_index, run.items[perm[i : i + batch]], epoch, steps)
        steps += 1
        step_bar.update(1)
        last_step = getattr(run.objective, "last", None)
        if last_step is not None:
            for key, value in last_step.log_dict().items():
                diagnostics[key] = diagnostics.get(key, 0.0) + value
        log_every = int(cfg.train.log_every)
        if log_every and steps % log_every == 0:
            say(
                f"  epoch {epoch} step {steps}/{run.steps_per_epoch}: loss {total / steps:.4f} "
                f"{(time.perf_counter() - start) / steps:.2f}s/step"
            )
        elapsed = run.train_seconds + time.perf_counter() - start
        if run.budget is not None and elapsed >= run.budget:
            out_of_time = True
            break
    step_bar.close()
    seconds = time.perf_counter() - start
    run.train_seconds += seconds
    record: dict[str, Any] = {
        "epoch": epoch,
        "steps": steps,
        "loss": total / max(steps, 1),
        "seconds": seconds,
        **{k: v / max(steps, 1) for k, v in diagnostics.items()},
    }
    return record, out_of_time


def build_link_predictor(cfg: DictConfig, kg: KnowledgeGraph) -> LinkPredictor:
    """The recipe's :class:`LinkPredictor` over ``kg`` (reciprocal relations included)."""
    return LinkPredictor(
        kg.num_entities,
        2 * kg.num_relations,
        int(cfg.model.dim),
        str(cfg.model.kind),
        init_scale=float(cfg.model.init_scale),
        dropout=float(cfg.model.dropout),
        normalize=bool(cfg.model.normalize),
    )


def _kg_setup(
    cfg: DictConfig, kg: KnowledgeGraph, say: Callable[[str], None]
) -> tuple[_KGRun, Any, Any]:
    """Model, objective and optimiser of a recipe; ``(run, train_index, filter_index)``."""
    device = _device(str(cfg.train.device))
    seed = int(cfg.train.seed)
    train_index = kg.train_index()
    filter_index = kg.filter_index()
    per_triple = str(cfg.train.unit) == "triple"
    items = train_index.triples() if per_triple else train_index.query_pairs()
    model = build_link_predictor(cfg, kg).to(device)
    objective = build_kg_objective(cfg.objective, seed).to(device)
    optimizer = _optimizer(cfg, model)
    budget = None if cfg.train.minutes is None else 60.0 * float(cfg.train.minutes)
    say(
        f"kg: {kg.name} E={kg.num_entities} R={kg.num_relations} "
        f"train {'triples' if per_triple else 'queries'}={len(items)} "
        f"objective={cfg.objective.name}"
    )
    run = _KGRun(cfg, kg, model, objective, optimizer, items, per_triple, device, say, budget)
    return run, train_index, filter_index


def train_kg(
    config: Any,
    *,
    overrides: Sequence[str] = (),
    log: Callable[[str], None] | None = None,
    kg: KnowledgeGraph | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Train a link predictor from a recipe and return its summary.

    The best epoch on filtered validation MRR (evaluated every ``eval.every_epochs``) is
    restored before the test evaluation.  ``train.minutes`` bounds the *training* time
    (validation excluded; the epoch running when the budget is reached finishes).

    Returns a dict with ``test`` and ``valid`` metrics (``mrr``, ``hits@1/3/10``...),
    ``epochs``, ``seconds_per_epoch``, ``train_seconds``, ``best_epoch`` and
    ``history`` (one record per validation).  Progress lines go to ``log`` (default:
    the ``spacl.tasks.kg`` logger, INFO); ``train.progress`` shows tqdm bars over
    the epochs, the steps of an epoch and the ranking batches (``None``: when stderr is a
    terminal).

    With ``run_dir`` (or ``out_dir`` in the recipe, as its parent) the run writes a run
    directory (:mod:`spacl.tasks.rundir`) with a checkpoint after every epoch (the
    latest state and the best weights); ``resume`` continues from it, and on a finished
    run returns the stored summary.
    """
    cfg = kg_config(config, overrides)
    say = log or _logger.info
    if cfg.train.threads:
        torch.set_num_threads(int(cfg.train.threads))
    seed = int(cfg.train.seed)
    torch.manual_seed(seed)
    store = TaskRun.open(
        cfg, "kg", str(cfg.name or f"{cfg.data.name}-{cfg.objective.name}"), run_dir, resume
    )
    saved = store.checkpoint() if store is not None and resume else None
    if store is not None and saved is not None and saved.get("finished"):
        say(f"{store.path}: finished; its stored summary")
        return dict(json.loads((store.path / "summary.json").read_text()))
    if store is not None and saved is None:
        store.reset_metrics()
    if kg is None:
        kg = load_kg(str(cfg.data.name), cfg.data.root, unseen=str(cfg.data.unseen))
    if store is not None:  # names and training triples: predict/export/load need no dataset
        write_graph_vocabulary(kg, store.path / GRAPH_FILE)
    run, train_index, filter_index = _kg_setup(cfg, kg, say)
    loop = _KGLoop(run, store, torch.Generator().manual_seed(seed))
    if saved is not None:
        loop.restore(saved)
        say(f"resuming after epoch {loop.epoch}")
    loop.train(train_index, filter_index)
    assert loop.best is not None
    summary = _kg_summary(run, loop.best, loop.epochs_done, loop.history, filter_index)
    if store is not None:
        summary["run_dir"] = str(store.path)
        store.save({**loop.state(), "model": loop.best[2], "finished": True})
        evaluation = {"test": summary["test"], "valid": summary["valid"]}
        store.log({"kind": "final", **evaluation})
        store.finish(evaluation, summary)
    return summary


class _KGLoop:
    """The epochs of :func:`train_kg`, with the state a checkpoint keeps."""

    def __init__(self, run: _KGRun, store: TaskRun | None, order_gen: torch.Generator) -> None:
        self.run, self.store, self.order_gen = run, store, order_gen
        self.history: list[dict[str, Any]] = []
        self.best: tuple[float, int, dict[str, Tensor]] | None = None
        self.epochs_done = 0.0
        self.epoch = 0

    def state(self) -> dict[str, Any]:
        best = self.best
        return {
            "epoch": self.epoch,
            "epochs_done": self.epochs_done,
            "train_seconds": self.run.train_seconds,
            "model": self.run.model.state_dict(),
            "optimizer": self.run.optimizer.state_dict(),
            "objective": self.run.objective.state_dict(),
            "best": None if best is None else {"mrr": best[0], "epoch": best[1], "model": best[2]},
            "history": json.dumps(self.history),
            "order_gen": self.order_gen.get_state(),
            "rng": torch.get_rng_state(),
            "finished": False,
        }

    def restore(self, saved: dict[str, Any]) -> None:
        self.epoch, self.epochs_done = int(saved["epoch"]), float(saved["epochs_done"])
        self.run.train_seconds = float(saved["train_seconds"])
        self.run.model.load_state_dict(saved["model"])
        self.run.optimizer.load_state_dict(saved["optimizer"])
        self.run.objective.load_state_dict(saved["objective"])
        best = saved["best"]
        if best is not None:
            self.best = (float(best["mrr"]), int(best["epoch"]), best["model"])
        self.history = list(json.loads(saved["history"]))
        self.order_gen.set_state(saved["order_gen"])
        torch.set_rng_state(saved["rng"])

    def train(self, train_index: Any, filter_index: Any) -> None:
        run, cfg = self.run, self.run.cfg
        every, epochs = int(cfg.eval.every_epochs), int(cfg.train.epochs)
        bar = progress(total=epochs, desc="kg", mode=cfg.train.progress, unit="epoch")
        bar.update(self.epoch)
        for epoch in range(self.epoch + 1, epochs + 1):
            perm = torch.randperm(len(run.items), generator=self.order_gen)
            record, out_of_time = _kg_epoch(run, train_index, epoch, perm)
            self.epochs_done += record["steps"] / run.steps_per_epoch
            if (every and epoch % every == 0) or epoch == epochs or out_of_time:
                self._validate(record, epoch, filter_index)
            else:
                run.say(f"epoch {epoch}: loss {record['loss']:.4f}  {record['seconds']:.1f}s")
            self.history.append(record)
            self.epoch = epoch
            if self.store is not None:
                self.store.log({"kind": "epoch", **record})
                self.store.save(self.state())
            bar.update(1)
            bar.set_postfix(loss=f"{record['loss']:.4f}")
            if out_of_time:
                break
        bar.close()

    def _validate(self, record: dict[str, Any], epoch: int, filter_index: Any) -> None:
        run = self.run
        valid = _evaluate(run.model, run.kg, "valid", filter_index, run.cfg, run.device)
        record["valid"] = valid
        if self.best is None or valid["mrr"] > self.best[0]:
            self.best = (valid["mrr"], epoch, copy.deepcopy(run.model.state_dict()))
        run.say(
            f"epoch {epoch}: loss {record['loss']:.4f}  {record['seconds']:.1f}s  "
            f"valid MRR {valid['mrr']:.4f} H@10 {valid['hits@10']:.4f}"
        )


def _kg_summary(
    run: _KGRun,
    best: tuple[float, int, dict[str, Tensor]],
    epochs_done: float,
    history: list[dict[str, Any]],
    filter_index: Any,
) -> dict[str, Any]:
    """Restore the best epoch, evaluate on the full validation and test sets, write it."""
    cfg, kg, model = run.cfg, run.kg, run.model
    model.load_state_dict(best[2])
    full_cfg = OmegaConf.merge(cfg, {"eval": {"valid_subset": None}})
    assert isinstance(full_cfg, DictConfig)
    valid_full = _evaluate(model, kg, "valid", filter_index, full_cfg, run.device)
    test = _evaluate(model, kg, "test", filter_index, cfg, run.device)
    summary: dict[str, Any] = {
        "name": cfg.name or f"{kg.name}-{cfg.objective.name}",
        "objective": str(cfg.objective.name),
        "epochs": epochs_done,
        "best_epoch": best[1],
        "train_seconds": run.train_seconds,
        "seconds_per_epoch": run.train_seconds / max(epochs_done, 1e-12),
        "valid": valid_full,
        "test": test,
        "history": history,
        "config": OmegaConf.to_container(cfg),
    }
    run.say(
        f"test (best epoch {best[1]}): MRR {test['mrr']:.4f} H@1 {test['hits@1']:.4f} "
        f"H@3 {test['hits@3']:.4f} H@10 {test['hits@10']:.4f}"
    )
    return summary
