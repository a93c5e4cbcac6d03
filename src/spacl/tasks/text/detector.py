"""The open-intent detector of a text run, shared by the frozen-encoder and fine-tuned tasks.

Both :func:`spacl.tasks.text.train_ood` (a head on a frozen encoder) and
:func:`spacl.tasks.text.task.train_finetuned` (the encoder's top layers) end the
same way, here once:

- :func:`decide`: the open classifier of ``ood.method`` from train / dev features (no
  test data); ``select`` and ``held_out_classes`` train an auxiliary model on the kept
  classes through the task's ``train_head`` / ``project`` (:mod:`.decision`), the
  fixed rules fit on dev; the other rules and ADB are reported on test (``rules_test``);
- :func:`open_text_run`: the run directory (if any), a finished run's stored summary
  when resuming (:func:`stored_summary`) or an unfinished run's checkpoint, and
  ``train.threads``; :func:`checkpointed_stages`: the run's training loops checkpointed
  together and stopped at the step by Ctrl-C / SIGTERM;
- :func:`write_detector_run`: the run directory's checkpoint (the task's model state +
  the detector: centres, thresholds, class names), epoch and final metrics,
  ``eval.json`` and ``summary.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from spacl.data.text import (
    INTENT_SPLIT_RECORD,
    INTENT_SPLITS,
    IntentExamples,
    OpenIntentSplit,
    check_intent_split_record,
    intent_dataset_name,
    load_intent_dataset,
    protocol_split,
    recorded_carve,
    write_intent_split_record,
)
from spacl.engine.device import prepare_run, resolve_device
from spacl.engine.rundir import RunDirectory
from spacl.engine.stages import Checkpointer
from spacl.evaluate.ood import OpenClassifier, class_centres, fit_open_classifier
from spacl.tasks.text.decision import held_out_threshold, rules_on_test, select_rule

__all__ = [
    "carved_note",
    "checkpointed_stages",
    "decide",
    "ood_summary",
    "open_text_run",
    "run_name",
    "split_of",
    "stored_summary",
    "write_detector_run",
]


def split_of(
    cfg: DictConfig,
    run_dir: str | Path | None = None,
    *,
    record: bool = False,
    say: Callable[[str], None] | None = None,
) -> OpenIntentSplit:
    """A text run's split: ``data.name`` at ``data.known_ratio``, its known classes drawn
    by ``data.protocol`` with ``data.split_seed`` (:func:`spacl.data.text.protocol_split`).

    A folder without ``dev.tsv`` / ``test.tsv`` has them carved from ``train.tsv`` by
    ``data.dev_fraction`` / ``data.test_fraction`` (seeded by ``data.split_seed``).  With
    ``run_dir``: ``record`` writes what was carved to the run's ``split.json`` (a fresh
    run); otherwise (resume, eval, embed) the recorded splits are carved again and the
    data is held to the record, so a changed file is one line, never another split.
    ``say`` (a fresh run, or no ``run_dir``) gets one line on what was carved.
    """
    d = cfg.data
    record_path = Path(run_dir) / INTENT_SPLIT_RECORD if run_dir is not None else None
    data = load_intent_dataset(
        str(d.name),
        d.root,
        dev_fraction=float(d.dev_fraction),
        test_fraction=float(d.test_fraction),
        seed=int(d.split_seed),
        carve=recorded_carve(record_path) if record_path is not None and not record else (),
        key_prefix="data.",
    )
    if record_path is not None and record:
        write_intent_split_record(record_path, data)
    elif record_path is not None:
        check_intent_split_record(record_path, data)
    if say is not None and (record or record_path is None):
        note = carved_note(cfg, data)
        if note:
            say(note)
    return protocol_split(
        data,
        str(cfg.data.name),
        str(cfg.data.protocol),
        float(cfg.data.known_ratio),
        int(cfg.data.split_seed),
    )


def carved_note(cfg: DictConfig, data: Mapping[str, IntentExamples]) -> str | None:
    """The one line saying which splits were carved from train, and how (``None``: each
    split is its own file)."""
    carved = [s for s in INTENT_SPLITS if s != "train" and data[s].carved]
    if not carved:
        return None
    keys = ", ".join(f"data.{s}_fraction={cfg.data[f'{s}_fraction']}" for s in carved)
    counts = ", ".join(f"{len(data[s])} {s}" for s in INTENT_SPLITS)
    files = " and ".join(f"{s}.tsv" for s in carved)
    return (
        f"{data['train'].path.parent} has no {files}: carved from {data['train'].path.name}, "
        f"stratified ({keys}, data.split_seed={cfg.data.split_seed}): {counts} examples"
    )


def write_detector_run(
    run: RunDirectory,
    model_state: Mapping[str, Any],
    clf: OpenClassifier,
    split: OpenIntentSplit,
    summary: dict[str, Any],
) -> None:
    """Checkpoint (``model_state`` + the detector), metrics, ``eval.json``, ``summary.json``.

    ``model_state``: what a later prediction rebuilds the features from (the frozen
    task's ``head`` and ``in_dim``; the fine-tuned task's ``encoder`` top layers).
    """
    for epoch, loss in enumerate(summary["losses"]):
        run.log({"kind": "epoch", "epoch": epoch, "loss": loss})
    detector = {
        "centres": clf.centres.cpu(),
        "thresholds": clf.thresholds.cpu(),
        "class_names": list(split.known_classes),
    }
    run.save({**model_state, "detector": detector, "finished": True})
    evaluation = {key: summary[key] for key in ("test", "reject_all", "dev_accuracy")}
    run.log({"kind": "final", **evaluation})
    run.finish(evaluation, summary)


def run_name(cfg: DictConfig) -> str:
    """A text run's name: ``name`` if the config sets one, else from the data and objective.

    ``<data>-<objective>`` for a head on the frozen encoder, ``<data>-finetune-<objective>``
    for a fine-tuned one (objective names with ``-`` for ``_``), ``<data>-frozen`` for the
    encoder as is (also when a named recipe is switched to ``objective.name=frozen``).  The
    shipped recipes set no name, so ``data.name=banking`` names a run ``banking-...``, and
    ``data.root=intents`` (a folder of the user's own TSV files) ``intents-...``.
    """
    data = intent_dataset_name(str(cfg.data.name), cfg.data.root)
    if cfg.objective.name == "frozen" and cfg.detector.method is None:
        return f"{data}-frozen"
    if cfg.name:
        return str(cfg.name)
    if cfg.detector.method is not None:
        return f"{data}-{str(cfg.detector.method).replace('_', '-')}"
    objective = str(cfg.objective.name).replace("_", "-")
    tuned = "-finetune" if int(cfg.finetune.trainable_layers) > 0 else ""
    return f"{data}{tuned}-{objective}"


def open_text_run(
    cfg: DictConfig,
    run_dir: str | Path | None,
    resume: bool,
    say: Callable[[str], None],
    train_device: str,
) -> tuple[RunDirectory | None, dict[str, Any] | None, dict[str, Any] | None]:
    """``(run, stored, saved)``: the run directory of ``cfg`` (``None`` without one); when
    resuming a finished run, its stored summary; when resuming an unfinished one, its
    checkpoint (:func:`checkpointed_stages` continues it).  Unless the run is finished,
    sets ``train.threads`` and the deterministic algorithms of a run that trains on the
    CPU (``train_device``: the device its loops train on)."""
    run = RunDirectory.open_task_run(cfg, "text", run_name(cfg), run_dir, resume)
    saved = run.checkpoint() if run is not None and resume else None
    if saved is not None and not saved.get("finished") and "stages" in saved:
        p = [stage["loop"]["progress"] for stage in saved["stages"]]
        say(f"resuming at stage {len(p)}, step {p[-1]['global_step'] if p else 0}")
        stored = None
    else:
        saved, stored = None, stored_summary(run, resume, say)
    if stored is None:  # deterministic on for a CPU run: a resume equals the uninterrupted run
        prepare_run(resolve_device(train_device), threads=cfg.train.threads)
    return run, stored, saved


@contextmanager
def checkpointed_stages(
    run: RunDirectory | None,
    saved: dict[str, Any] | None,
    cfg: DictConfig,
    counters: dict[str, int],
) -> Iterator[Checkpointer | None]:
    """The training loops of a text run with a run directory, checkpointed together
    (the engine's :class:`~spacl.engine.stages.Checkpointer` of several stages, with the
    run's counters and ``metrics.jsonl`` length as data; every ``train.checkpoint_every`` steps,
    every epoch and stage end) and stopped at the step by Ctrl-C / SIGTERM
    (:class:`~spacl.engine.loop.StopRequested`, naming the run directory).

    ``saved``: an unfinished checkpoint to continue (:func:`open_text_run`): its stages
    resume, ``counters`` (the run's own step counts) are restored and ``metrics.jsonl``
    is cut back to the records written before it.  Without a run directory: ``None``.
    """
    if run is None:
        yield None
        return
    if saved is not None:
        counters.update(saved["counters"])
        run.truncate_metrics(int(saved["metrics_lines"]))

    def data() -> dict[str, Any]:
        return {"counters": dict(counters), "metrics_lines": run.metrics_lines(), "finished": False}

    with Checkpointer(
        run.save,
        saved,
        data=data,
        staged=True,
        checkpoint_every=int(cfg.train.checkpoint_every),
        run_dir=str(run.path),
    ) as stages:
        yield stages


def decide(
    cfg: DictConfig,
    split: OpenIntentSplit,
    inputs: tuple[Tensor, Tensor],
    features: tuple[Tensor, Tensor, Tensor],
    train_head: Callable[[Tensor, Tensor, int], nn.Module],
    project: Callable[[nn.Module, Tensor], Tensor],
) -> tuple[OpenClassifier, dict[str, Any]]:
    """The open classifier of ``cfg.ood.method`` and its summary entries (``rule``...).

    ``inputs``: the train / dev inputs ``train_head`` and ``project`` take (embeddings,
    or the indices of cached states); ``features``: train / dev / test features.  No test
    example is used: ``features[2]`` only feeds the ``rules_test`` report.
    """
    k, ood, seed = split.num_known, cfg.ood, int(cfg.train.seed)
    (train_x, dev_x), (train_z, dev_z, _) = inputs, features
    fraction, q = float(ood.held_out_fraction), float(ood.quantile)
    if ood.method == "select":
        return select_rule(
            split,
            inputs,
            features,
            fraction=fraction,
            quantile=q,
            seed=seed,
            train_head=train_head,
            project=project,
        )
    if ood.method == "held_out_classes":
        centres = class_centres(train_z, split.train_labels, k)
        threshold = held_out_threshold(
            train_x,
            split.train_labels,
            dev_x,
            split.dev_labels,
            k,
            fraction=fraction,
            seed=seed,
            train_head=train_head,
            project=project,
        )
        clf = OpenClassifier(centres, threshold.to(centres.dtype).expand(k).clone())
        return clf, {"rule": "held_out_classes"}
    clf = fit_open_classifier(
        train_z,
        split.train_labels,
        dev_z,
        split.dev_labels,
        k,
        method=str(ood.method),
        scope=str(ood.scope),
        quantile=q,
        min_class_count=int(ood.min_class_count),
    )
    rules = rules_on_test(split, features, quantile=q)
    return clf, {"rule": f"{ood.method}/{ood.scope}", "rules_test": rules}


def stored_summary(
    run: RunDirectory | None, resume: bool, say: Callable[[str], None]
) -> dict[str, Any] | None:
    """A finished run's stored summary when resuming; else start its metrics afresh."""
    if run is None:
        return None
    if resume:
        state = run.checkpoint()
        if state is not None and state.get("finished"):
            say(f"{run.path}: finished; its stored summary")
            return run.stored_summary()
    run.reset_metrics()
    return None


def ood_summary(
    cfg: DictConfig,
    split: OpenIntentSplit,
    test: dict[str, float | None],
    dev_accuracy: float,
    extra: dict[str, Any],
    encoded_texts: int,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """The summary of a head or fine-tuned run (``train_ood``): the run's name, data,
    test metrics and ``extra``, logged in one line through ``say``."""
    summary: dict[str, Any] = {
        "name": run_name(cfg),
        "objective": str(cfg.objective.name),
        "known_ratio": split.known_ratio,
        "split_seed": split.seed,
        "known_classes": split.known_classes,
        "test": test,
        "dev_accuracy": dev_accuracy,
        **extra,
        "encoded_texts": encoded_texts,
        "config": OmegaConf.to_container(cfg),
    }
    floor = extra["reject_all"]
    say(
        f"{summary['name']} known={split.known_ratio:.0%} seed={split.seed}: "
        f"acc {test['accuracy']:.2f} F1 {test['macro_f1']:.2f} "
        f"F1-OOD {test['f1_ood']:.2f} F1-IND {test['f1_ind']:.2f}  "
        f"(reject-all: acc {floor['accuracy']:.2f} F1 {floor['macro_f1']:.2f} "
        f"F1-OOD {floor['f1_ood']:.2f})"
    )
    return summary
