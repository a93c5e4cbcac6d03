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

The epochs run in the engine's one loop (:class:`spacl.engine.loop.TrainLoop`); this
module supplies its body, :class:`KGSteps`: an epoch's queries in a seeded order, one
optimiser step (:func:`kg_step`), the epoch's record, filtered validation MRR (the best
epoch's weights kept), and what a checkpoint keeps of it (its ``state_dict``).  Device,
optimiser, run directory, checkpoints, resume and the signal stop are the engine's
(:class:`spacl.engine.stages.Checkpointer`).
"""

from __future__ import annotations

import copy
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from spacl._progress import progress
from spacl.data.kg import GRAPH_FILE, KnowledgeGraph, load_kg, write_graph_vocabulary
from spacl.engine.device import prepare_run, resolve_device
from spacl.engine.evaluation import Evaluator, evaluating
from spacl.engine.loop import LoopPlan, Progress, TrainLoop
from spacl.engine.optim import build_optimizer
from spacl.engine.rundir import RunDirectory
from spacl.engine.stages import Checkpointer, StageBody
from spacl.evaluate.ranking import evaluate_link_prediction
from spacl.models.kg import LinkPredictor
from spacl.tasks.kg.config import build_kg_objective, kg_config

_logger = logging.getLogger("spacl.tasks.kg")

__all__ = [
    "KGSetup",
    "KGSteps",
    "build_link_predictor",
    "kg_setup",
    "kg_step",
    "train_kg",
]


# ----------------------------------------------------------------------------- training


def link_metrics(
    model: LinkPredictor,
    kg: KnowledgeGraph,
    split: str,
    filter_index: Any,
    cfg: DictConfig,
    device: torch.device,
) -> dict[str, float]:
    """Filtered MRR and Hits@k of ``model`` on ``split`` (the validation subset of
    ``eval.valid_subset``); the caller puts the model in the evaluation state."""
    triples = kg.split(split)
    if split == "valid" and cfg.eval.valid_subset is not None:
        triples = triples[: int(cfg.eval.valid_subset)]
    return evaluate_link_prediction(
        model,
        triples,
        kg.num_relations,
        filter_index,
        batch_size=int(cfg.eval.batch_size),
        ties=str(cfg.eval.ties),
        device=device,
        progress=cfg.train.progress,
    )


def _evaluate(
    model: LinkPredictor,
    kg: KnowledgeGraph,
    split: str,
    filter_index: Any,
    cfg: DictConfig,
    device: torch.device,
) -> dict[str, float]:
    with evaluating(model):
        return link_metrics(model, kg, split, filter_index, cfg, device)


@dataclass
class KGSetup:
    """What the steps of a KG run share: the recipe, graph, model, objective, optimiser and
    the training items (queries, or triples with ``train.unit=triple``)."""

    cfg: DictConfig
    kg: KnowledgeGraph
    model: LinkPredictor
    objective: nn.Module
    optimizer: torch.optim.Optimizer
    items: Tensor
    per_triple: bool
    device: torch.device

    @property
    def batch_size(self) -> int:
        return int(self.cfg.train.batch_size)

    @property
    def steps_per_epoch(self) -> int:
        return -(-len(self.items) // self.batch_size)


def kg_step(setup: KGSetup, train_index: Any, chunk: Tensor, epoch: int, step: int) -> float:
    """One optimiser step on a chunk of queries (or triples); the loss value.  ``epoch``
    (1-based) and ``step`` (0-based, in the epoch) name the step in an error."""
    kg, device = setup.kg, setup.device
    if setup.per_triple:  # 1-vs-all: the triple's own tail is the positive
        row, tail = torch.arange(len(chunk)), chunk[:, 2]
    else:  # K-vs-all: every known tail of the query
        row, tail = train_index.pairs(chunk[:, 0], chunk[:, 1])
    chunk, row, tail = chunk.to(device), row.to(device), tail.to(device)
    # the [B, E] mask made on the device: a few index pairs travel, not B x E bytes
    positives = torch.zeros(len(chunk), kg.num_entities, dtype=torch.bool, device=device)
    positives.index_put_((row, tail), positives.new_ones(()))  # no host-side scalar
    h, r = chunk[:, 0], chunk[:, 1]
    # the pairs too: the objective need not scan the [B, E] mask for them
    known = (row, tail)
    query = setup.model.query(h, r)
    try:  # a non-finite query or entity table is named by the objective's own check
        loss = setup.objective(query, setup.model.entities(), positives, known)
    except ValueError as err:
        raise ValueError(f"at epoch {epoch}, step {step}: {err}") from err
    n3 = float(setup.cfg.optim.n3)
    if n3 > 0:  # per training triple (h, r, t), as in Lacroix et al. (2018)
        loss = loss + n3 * setup.model.n3(h[row], r[row], tail)
    value = float(loss.detach())  # the step's one read of the loss (the N3 term included)
    if not math.isfinite(value):
        raise ValueError(f"non-finite training loss at epoch {epoch}, step {step}")
    setup.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    setup.optimizer.step()
    return value


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


def kg_setup(
    cfg: DictConfig, kg: KnowledgeGraph, say: Callable[[str], None]
) -> tuple[KGSetup, Any, Any]:
    """Model, objective and optimiser of a recipe; ``(setup, train_index, filter_index)``."""
    device = resolve_device(str(cfg.train.device))
    seed = int(cfg.train.seed)
    train_index = kg.train_index()
    filter_index = kg.filter_index()
    per_triple = str(cfg.train.unit) == "triple"
    items = train_index.triples() if per_triple else train_index.query_pairs()
    model = build_link_predictor(cfg, kg).to(device)
    objective = build_kg_objective(cfg.objective, seed).to(device)
    optimizer = build_optimizer(
        list(model.parameters()),
        str(cfg.optim.name),
        float(cfg.optim.lr),
        weight_decay=float(cfg.optim.weight_decay),
    )
    say(
        f"kg: {kg.name} E={kg.num_entities} R={kg.num_relations} "
        f"train {'triples' if per_triple else 'queries'}={len(items)} "
        f"objective={cfg.objective.name}"
    )
    setup = KGSetup(cfg, kg, model, objective, optimizer, items, per_triple, device)
    return setup, train_index, filter_index


def kg_plan(cfg: DictConfig) -> LoopPlan:
    """The loop of a KG recipe: ``train.epochs``, validation every ``eval.every_epochs``
    (and after the last epoch, or the one the ``train.minutes`` budget cut short), a
    checkpoint every ``train.checkpoint_every`` steps and after every epoch, progress
    lines every ``train.log_every`` steps."""
    minutes = cfg.train.minutes
    return LoopPlan(
        epochs=int(cfg.train.epochs),
        log_every=int(cfg.train.log_every),
        checkpoint_every=int(cfg.train.checkpoint_every),
        validate_every=int(cfg.eval.every_epochs),
        budget_seconds=None if minutes is None else 60.0 * float(minutes),
    )


class KGSteps(StageBody):
    """The body of a KG run in the engine's loop (module docstring): its part of a
    checkpoint (:meth:`state_dict`: model, optimiser, objective, order) the engine's
    checkpointer writes beside the loop's."""

    def __init__(
        self,
        setup: KGSetup,
        train_index: Any,
        filter_index: Any,
        store: RunDirectory | None,
        say: Callable[[str], None],
    ) -> None:
        self.setup, self.train_index, self.filter_index = setup, train_index, filter_index
        self.store, self.say = store, say  # the store: the epoch records (metrics.jsonl)
        self.order_gen = torch.Generator().manual_seed(int(setup.cfg.train.seed))
        self.history: list[dict[str, Any]] = []
        self.epochs_done = 0.0
        self.perm = torch.empty(0, dtype=torch.long)
        self.diagnostics: dict[str, float] = {}
        self.epoch_started = 0.0
        self.first_step = 0  # the epoch's first step in this process (a resume's)
        self.step_bar: Any = None
        self.epoch_bar: Any = None

    # ---------------------------------------------------------------- the epoch
    def begin_epoch(self, epoch: int, loop: TrainLoop) -> None:
        self.perm = torch.randperm(len(self.setup.items), generator=self.order_gen)
        self.diagnostics = {}
        self._open_epoch(epoch, 0, loop)

    def resume_epoch(self, epoch: int, start: int, loop: TrainLoop) -> None:
        """Mid-epoch (a resumed run): the epoch's order and sums are the checkpoint's."""
        self._open_epoch(epoch, start, loop)

    def _open_epoch(self, epoch: int, start: int, loop: TrainLoop) -> None:
        """The epoch's clock and bar, from its step ``start`` (a run resumed mid-epoch);
        the bar over the epochs, at this one, the first time."""
        if self.epoch_bar is None:
            cfg = self.setup.cfg
            self.epoch_bar = progress(
                total=int(cfg.train.epochs), desc="kg", mode=cfg.train.progress, unit="epoch"
            )
            self.epoch_bar.update(epoch)
        self.epoch_started, self.first_step = time.perf_counter(), start
        self.step_bar = progress(
            total=self.setup.steps_per_epoch,
            desc=f"epoch {epoch + 1}",
            mode=self.setup.cfg.train.progress,
            unit="step",
        )
        self.step_bar.update(start)

    def batches(self, epoch: int, start: int) -> Iterator[Tensor]:
        b = self.setup.batch_size
        for i in range(start * b, len(self.perm), b):
            yield self.setup.items[self.perm[i : i + b]]

    def step(self, batch: Tensor, loop: TrainLoop) -> float:
        p = loop.progress
        loss = kg_step(self.setup, self.train_index, batch, p.epoch + 1, p.step_in_epoch)
        self.step_bar.update(1)
        last_step = getattr(self.setup.objective, "last", None)
        if last_step is not None:
            for key, value in last_step.log_dict().items():
                self.diagnostics[key] = self.diagnostics.get(key, 0.0) + value
        return loss

    def log_step(self, losses: Any, loop: TrainLoop) -> None:
        p, steps = loop.progress, loop.progress.step_in_epoch
        self.say(
            f"  epoch {p.epoch + 1} step {steps}/{self.setup.steps_per_epoch}: loss "
            f"{p.loss_sums['loss'] / steps:.4f} "
            f"{(time.perf_counter() - self.epoch_started) / max(steps - self.first_step, 1):.2f}"
            "s/step"
        )

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        self.step_bar.close()
        steps = loop.progress.loss_count
        self.epochs_done += steps / self.setup.steps_per_epoch
        return {
            "epoch": epoch + 1,
            "steps": steps,
            "loss": loop.progress.loss_sums.get("loss", 0.0) / max(steps, 1),
            "seconds": seconds,
            **{k: v / max(steps, 1) for k, v in self.diagnostics.items()},
        }

    def evaluator(self) -> Evaluator:
        """The loop's validation (the engine's :class:`~spacl.engine.evaluation.Evaluator`):
        filtered MRR on the validation triples, epochs ranked by it, recorded in the
        epoch's record and its line."""
        s = self.setup

        def score(epoch: int, step: int) -> dict[str, float]:
            return link_metrics(s.model, s.kg, "valid", self.filter_index, s.cfg, s.device)

        return Evaluator(score, (s.model,), key="mrr", log=self.record_valid)

    def record_valid(self, epoch: int, valid: dict[str, Any], record: dict[str, Any]) -> None:
        """The validation of ``epoch`` in its record and its line."""
        record["valid"] = valid
        self.say(
            f"epoch {epoch + 1}: loss {record['loss']:.4f}  {record['seconds']:.1f}s  "
            f"valid MRR {valid['mrr']:.4f} H@10 {valid['hits@10']:.4f}"
        )

    def snapshot(self) -> dict[str, Tensor]:
        return copy.deepcopy(self.setup.model.state_dict())

    def load_best(self, snapshot: Any) -> None:
        self.setup.model.load_state_dict(snapshot)

    def after_epoch(self, record: dict[str, Any], loop: TrainLoop) -> None:
        if "valid" not in record:
            self.say(
                f"epoch {record['epoch']}: loss {record['loss']:.4f}  {record['seconds']:.1f}s"
            )
        self.history.append(record)
        if self.store is not None:
            self.store.log({"kind": "epoch", **record})
        if self.epoch_bar is not None:
            self.epoch_bar.update(1)
            self.epoch_bar.set_postfix(loss=f"{record['loss']:.4f}")

    def close(self) -> None:
        """Close the progress bars (the run ended, or stopped)."""
        for bar in (self.step_bar, self.epoch_bar):
            if bar is not None:
                bar.close()

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The body's part of a checkpoint (the engine's checkpointer adds the loop's
        state and the random state): model, optimiser, objective, the epochs' order
        generator and records, and the running epoch's order and diagnostics sums (a
        checkpoint written mid-epoch: a step interval, Ctrl-C)."""
        return {
            "perm": self.perm,
            "diagnostics": dict(self.diagnostics),
            "epochs_done": self.epochs_done,
            "model": self.setup.model.state_dict(),
            "optimizer": self.setup.optimizer.state_dict(),
            "objective": self.setup.objective.state_dict(),
            "history": json.dumps(self.history),
            "order_gen": self.order_gen.get_state(),
        }

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict` (a checkpoint written before step positions
        were kept: at the next epoch, whose fresh order replaces the saved one)."""
        self.perm = saved.get("perm", self.perm)
        self.diagnostics = dict(saved.get("diagnostics", {}))
        self.epochs_done = float(saved["epochs_done"])
        self.setup.model.load_state_dict(saved["model"])
        self.setup.optimizer.load_state_dict(saved["optimizer"])
        self.setup.objective.load_state_dict(saved["objective"])
        self.history = list(json.loads(saved["history"]))
        self.order_gen.set_state(saved["order_gen"])


def loop_state(saved: dict[str, Any]) -> dict[str, Any]:
    """The engine loop's state in a KG checkpoint (:meth:`KGSteps.state`), or the same
    read from a checkpoint written before the loop kept its own (``progress`` or
    ``epoch``, ``train_seconds``, ``best`` as ``{mrr, epoch, model}``)."""
    if "loop" in saved:
        return dict(saved["loop"])
    progress = saved.get("progress") or Progress(epoch=int(saved["epoch"])).as_dict()
    best = saved["best"]
    return {
        "progress": progress,
        "train_seconds": saved["train_seconds"],
        "best": None
        if best is None
        else {"score": best["mrr"], "epoch": best["epoch"], "snapshot": best["model"]},
    }


def best_weights(saved: dict[str, Any]) -> dict[str, Tensor] | None:
    """The weights a KG checkpoint's link predictor loads: the final (best epoch's)
    weights of a finished run, the best validated epoch's so far otherwise, ``None``
    before any validation."""
    if saved.get("finished"):
        return dict(saved["model"])
    best = loop_state(saved)["best"]
    return None if best is None else dict(best["snapshot"])


def _run_loop(
    cfg: DictConfig,
    body: KGSteps,
    store: RunDirectory | None,
    saved: dict[str, Any] | None,
    say: Callable[[str], None],
) -> Checkpointer:
    """The engine's loop over ``body`` under the engine's checkpointer: resumed from
    ``saved``; with a run directory, checkpointed into it, and SIGINT / SIGTERM
    checkpoint at the step and raise ``StopRequested``."""
    if saved is not None:  # an older checkpoint's loop state, read as the loop keeps it
        saved = {**saved, "loop": loop_state(saved)}
        p = Progress.from_dict(saved["loop"]["progress"])
        say(f"resuming at epoch {p.epoch + 1} step {p.step_in_epoch} (step {p.global_step})")
    checkpointer = Checkpointer(
        None if store is None else store.save,
        saved,
        data={"finished": False},
        run_dir=None if store is None else str(store.path),
    )
    with checkpointer:
        try:
            checkpointer.run(body, kg_plan(cfg), evaluator=body.evaluator())
        finally:
            body.close()
    return checkpointer


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
    (validation excluded; the epoch running when the budget is reached stops there and
    is validated).

    Returns a dict with ``test`` and ``valid`` metrics (``mrr``, ``hits@1/3/10``...),
    ``epochs``, ``seconds_per_epoch``, ``train_seconds``, ``best_epoch`` and
    ``history`` (one record per epoch).  Progress lines go to ``log`` (default:
    the ``spacl.tasks.kg`` logger, INFO); ``train.progress`` shows tqdm bars over
    the epochs, the steps of an epoch and the ranking batches (``None``: when stderr is a
    terminal).

    With ``run_dir`` (or ``out_dir`` in the recipe, as its parent) the run writes a run
    directory (:mod:`spacl.engine.rundir`) with a checkpoint every
    ``train.checkpoint_every`` steps and after every epoch (the latest state and the best
    weights); ``resume`` continues from it at the saved step, and on a finished run
    returns the stored summary.  There, SIGINT / SIGTERM (Ctrl-C, ``kill``) finish the
    running step, write the checkpoint and raise
    :class:`~spacl.engine.loop.StopRequested`; a resume then ends as the uninterrupted
    run would (tested).  Without a run directory Ctrl-C is Python's ``KeyboardInterrupt``.
    """
    cfg = kg_config(config, overrides)
    say = log or _logger.info
    # train.threads; the deterministic algorithms on for a CPU run
    prepare_run(resolve_device(str(cfg.train.device)), threads=cfg.train.threads)
    torch.manual_seed(int(cfg.train.seed))
    if kg is None and not resume:  # a new run reads its graph first: a missing one makes no run
        kg = load_kg(str(cfg.data.name), cfg.data.root, unseen=str(cfg.data.unseen))
    name = run_name(cfg, kg.name if kg is not None else str(cfg.data.name))
    store = RunDirectory.open_task_run(cfg, "kg", name, run_dir, resume)
    saved = store.checkpoint() if store is not None and resume else None
    if store is not None and saved is not None and saved.get("finished"):
        say(f"{store.path}: finished; its stored summary")
        return store.stored_summary()
    if store is not None and saved is None:
        store.reset_metrics()
    if kg is None:  # a resumed run: its graph only now, since a finished one needs none
        kg = load_kg(str(cfg.data.name), cfg.data.root, unseen=str(cfg.data.unseen))
    if store is not None:  # names and training triples: predict/export/load need no dataset
        write_graph_vocabulary(kg, store.path / GRAPH_FILE)
    setup, train_index, filter_index = kg_setup(cfg, kg, say)
    body = KGSteps(setup, train_index, filter_index, store, say)
    checkpointer = _run_loop(cfg, body, store, saved, say)
    loop = checkpointer.loop
    assert loop is not None and loop.best is not None
    summary = _kg_summary(setup, loop, body, filter_index)
    if store is not None:
        summary["run_dir"] = str(store.path.resolve())  # never relative to the cwd
        last = checkpointer.last()  # the run's last checkpoint, its best weights in place
        store.save({**last, "model": loop.best.snapshot, "finished": True})
        evaluation = {"test": summary["test"], "valid": summary["valid"]}
        store.log({"kind": "final", **evaluation})
        store.finish(evaluation, summary)
    return summary


def run_name(cfg: Any, graph: str) -> str:
    """A KG run's name: ``cfg.name``, else ``<graph>-<objective>``, named after the graph
    it trains on (a user's own: its directory)."""
    return str(cfg.name or f"{graph}-{cfg.objective.name}")


def _kg_summary(
    setup: KGSetup, loop: TrainLoop, body: KGSteps, filter_index: Any
) -> dict[str, Any]:
    """Restore the best epoch, evaluate on the full validation and test sets, write it."""
    cfg, kg, model = setup.cfg, setup.kg, setup.model
    assert loop.best is not None
    loop.restore_best()
    best_epoch, epochs_done = loop.best.epoch, body.epochs_done
    full_cfg = OmegaConf.merge(cfg, {"eval": {"valid_subset": None}})
    assert isinstance(full_cfg, DictConfig)
    valid_full = _evaluate(model, kg, "valid", filter_index, full_cfg, setup.device)
    test = _evaluate(model, kg, "test", filter_index, cfg, setup.device)
    summary: dict[str, Any] = {
        "name": run_name(cfg, kg.name),
        "graph": kg.name,  # the triples' own directory name for a user's graph
        "objective": str(cfg.objective.name),
        "epochs": epochs_done,
        "best_epoch": best_epoch,
        "train_seconds": loop.train_seconds,
        "seconds_per_epoch": loop.train_seconds / max(epochs_done, 1e-12),
        "valid": valid_full,
        "test": test,
        "history": body.history,
        "config": OmegaConf.to_container(cfg),
    }
    body.say(
        f"test (best epoch {best_epoch}): MRR {test['mrr']:.4f} H@1 {test['hits@1']:.4f} "
        f"H@3 {test['hits@3']:.4f} H@10 {test['hits@10']:.4f}"
    )
    return summary
