"""``spacl reproduce hard-negatives``: SCL vs HSCL and UCL vs HUCL, neural vs dimensional collapse.

The study as data and three steps: :mod:`.config` (settings, quoted numbers),
:mod:`.data`, :mod:`.training` (one encoder), :mod:`.runs` (the parts: which settings
are trained), :mod:`.claims` (the declarative claims table) and :mod:`.report`
(sections, plots); :func:`run` ties them with the shared scaffolding of
:mod:`spacl.studies.study`.

Reproduces, at laptop scale, the claims of Jiang, Nguyen, Aeron & Ishwar on hard-negative
sampling (SPEC §2) with the recipe of their notebook: no augmentation, an encoder whose
embedding dimension is ``C - 1``, features projected into the unit ball, Adam with
learning rate ``1e-3``, and the *sampling* estimator
(:class:`spacl.losses.SampledHardNegativeLoss`: ``K`` negatives drawn from
``p(n | a) ∝ exp(beta <a, n>)``; ``beta = 0`` is plain SCL / UCL).  The other estimator
of SPEC §2, in-batch reweighting (:class:`spacl.losses.HardNegativeLoss`, HCL-style), is
trained last on the supervised recipe - the same batches, seeds, steps and beta, SCL
(``beta = 0``) and HSCL (``beta = 5``), temperature 1 - for the claim that HSCL beats SCL
with it too.

Data (real, many-class: the geometry claims live there): CLINC150's 150 intents as frozen
all-MiniLM-L6-v2 sentence embeddings (384-dim; :mod:`spacl.models.text`, cached on disk),
the encoder an MLP ``384 -> 512 -> C-1``.  Supervised (SCL/HSCL): labels give the positives
(every same-class sample, the anchor included) and the negatives (other classes).
Unsupervised (UCL/HUCL): the paper's latent-class model - each instance's positive is
another sample of its (hidden) class (:class:`spacl.data.SameClassViews`), negatives are
drawn from all other samples; the loss never sees a label.  Synthetic latent-class data
(:func:`spacl.data.make_synthetic`) for the claim about label-based vs Gaussian-noise
positives, which is a claim about synthetic data.

Measured per run: nearest-class-centre (NCC) test accuracy with training-set centres, and
the geometry of a fixed class-balanced training subset (:func:`spacl.geometry.geometry_report`):
class-mean effective rank (of ``C - 1``), NC2 ETF deviation, CDNV, NC1, the class-mean
spectrum ``log(sigma_k / sigma_max)``; the supervised sweep is tracked every epoch.

**Decisions** (documented in the report): ``K = 1`` negative per anchor (the library's
default; ``K = 8`` gave the same picture in our checks at the same cost); spectra are
floored at ``log(1e-12)`` so exact zeros stay finite in ``results.json``; the near-NC
initialisation fits the encoder to a simplex ETF of unit class targets by mean-squared
error before contrastive training; the batch-size claim is checked at equal epochs (the
small batch takes more steps) and at equal optimiser steps (those of the largest batch
over ``epochs`` epochs); the CLINC class subset of ``--quick`` is a seeded
choice.  If CLINC150 or the MiniLM package is unavailable the study falls back to
synthetic many-class data and says so in the report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spacl.studies.hard_negatives.claims import claims
from spacl.studies.hard_negatives.config import (
    CLAIM_KEYS,
    FULL,
    METRIC_KEYS,
    PAPER_NCC_CIFAR100,
    QUICK,
    HardNegativesConfig,
)
from spacl.studies.hard_negatives.data import (
    DataShape,
    StudyData,
    load_clinc_embeddings,
    per_class_first,
    simplex_etf,
    study_data,
)
from spacl.studies.hard_negatives.report import plots, sections
from spacl.studies.hard_negatives.runs import PARTS, spectra_of
from spacl.studies.hard_negatives.training import measure, train_encoder
from spacl.studies.study import StudyRun, finish_study, stored_results

__all__ = [
    "CLAIM_KEYS",
    "FULL",
    "METRIC_KEYS",
    "PAPER_NCC_CIFAR100",
    "QUICK",
    "HardNegativesConfig",
    "StudyData",
    "load_clinc_embeddings",
    "measure",
    "per_class_first",
    "regenerate",
    "run",
    "simplex_etf",
    "study_data",
    "train_encoder",
]


def regenerate(source: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Write the report of the stored results in ``source`` (a ``results.json`` or its
    directory) again into ``out_dir``: the claims, sections and plots from the stored
    metrics by the current code, nothing trained (``spacl reproduce hard-negatives
    --report-only``)."""
    stored = stored_results(source, "hard-negatives", metrics=METRIC_KEYS)
    study_cfg: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in stored["config"]["study"].items()
    }
    cfg = HardNegativesConfig(**study_cfg)
    shape = DataShape.of_stored(stored)
    study = StudyRun.restore(stored, out_dir)
    return finish_study(
        study,
        dict(stored["metrics"]),
        claims(cfg, shape.num_classes, str(stored["config"]["data_source"])),
        sections=lambda report, metrics: sections(report, cfg, metrics, shape),
        plots=lambda report, metrics: plots(report, cfg, metrics),
        invocation_runs=True,
    )


def run(
    out_dir: str | Path,
    *,
    quick: bool = False,
    seeds: Sequence[int] = (0, 1, 2),
    command: str = "spacl reproduce hard-negatives",
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = None,
    config: HardNegativesConfig | None = None,
    log: Any = None,
) -> dict[str, Any]:
    """Run the study, write ``report.md``, ``results.json`` and the plots; return the results."""
    cfg = config or (QUICK if quick else FULL)
    t0 = time.time()
    data = study_data(cfg, data_root, cache_dir)
    study = StudyRun.start(
        "hard-negatives",
        "Hard-negative sampling: neural vs dimensional collapse (SPEC §2)",
        out_dir,
        command,
        {"study": asdict(cfg), "data_source": data.source, "data_shape": asdict(data.shape)},
        seeds,
        quick,
        notes=[data.note],
        started=t0,
        log=log,
    )
    study.timing["data"] = time.time() - t0
    m = study.run_parts(PARTS, cfg, data)
    m["spectra"] = spectra_of(m)
    return finish_study(
        study,
        m,
        claims(cfg, data.num_classes, data.source),
        sections=lambda report, metrics: sections(report, cfg, metrics, data.shape),
        plots=lambda report, metrics: plots(report, cfg, metrics),
        invocation_runs=True,
    )
