"""The parts of the hard-negatives study: what is trained, over which settings, measured how."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spacl.studies.hard_negatives.config import HardNegativesConfig
from spacl.studies.hard_negatives.data import StudyData, few_class_data, synthetic_data
from spacl.studies.hard_negatives.training import measure, pretrain_near_nc, train_encoder
from spacl.studies.stats import summarize
from spacl.studies.study import StudyRun, group

__all__ = ["PARTS", "equal_step_budget"]

HISTORY_KEYS = ("ncc", "class_mean_rank", "etf_deviation", "cdnv", "nc1")


def _sweep_point(
    study: StudyRun,
    part: str,
    data: StudyData,
    cfg: HardNegativesConfig,
    mode: str = "ball",
    tags: dict[str, Any] | None = None,
    **train: Any,
) -> dict[str, Any]:
    """Train one setting for every seed; the seed summary with the mean log spectrum."""
    spectra: list[list[float]] = []

    def one(seed: int) -> dict[str, float]:
        model, _ = train_encoder(data, cfg, seed=seed, mode=mode, **train)
        record, spectrum = measure(model, data, mode)
        spectra.append(spectrum)
        return record

    records = study.over_seeds(part, one, **(tags or {}))
    mean_spectrum = np.mean(np.asarray(spectra, dtype=np.float64), 0).tolist()
    return group(records, class_mean_log_spectrum=mean_spectrum)


def _history_mean(histories: list[list[dict[str, float]]]) -> dict[str, list[float]]:
    return {
        key: np.mean([[h[key] for h in hist] for hist in histories], 0).tolist()
        for key in HISTORY_KEYS
    }


def supervised(
    study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]
) -> None:
    """SCL / HSCL over the betas, tracked every epoch."""
    m["supervised"] = {}
    m.setdefault("history", {})
    for beta in cfg.betas:
        spectra: list[list[float]] = []
        hists: list[list[dict[str, float]]] = []

        def one(
            seed: int,
            beta: float = beta,
            spectra: list[list[float]] = spectra,
            hists: list[list[dict[str, float]]] = hists,
        ) -> dict[str, float]:
            model, hist = train_encoder(data, cfg, beta=beta, seed=seed, track=True)
            record, spectrum = measure(model, data, "ball")
            spectra.append(spectrum)
            hists.append(hist)
            return record

        key = f"beta={beta:g}"
        records = study.over_seeds("supervised", one, beta=beta)
        m["supervised"][key] = group(
            records, class_mean_log_spectrum=np.mean(np.asarray(spectra), 0).tolist()
        )
        m["history"][key] = _history_mean(hists)


def unsupervised(
    study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]
) -> None:
    """UCL / HUCL with latent-class positives (the loss sees no label)."""
    m["unsupervised"] = {
        f"beta={beta:g}": _sweep_point(
            study, "unsupervised", data, cfg, tags={"beta": beta}, beta=beta, supervised=False
        )
        for beta in cfg.betas
    }


def normalization(
    study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]
) -> None:
    """Unit ball (from the sweep) vs sphere vs no normalisation at ``norm_beta``."""
    m["normalization"] = {"ball": m["supervised"][f"beta={cfg.norm_beta:g}"]}
    for mode in ("sphere", "none"):
        m["normalization"][mode] = _sweep_point(
            study, "normalization", data, cfg, mode, {"mode": mode}, beta=cfg.norm_beta
        )


def equal_step_budget(cfg: HardNegativesConfig, data: StudyData) -> int:
    """Optimiser steps of the largest batch size over ``cfg.epochs`` epochs."""
    largest = min(max(cfg.batch_sizes), len(data.train))
    return math.ceil(len(data.train) / largest) * cfg.epochs


def batch_size(
    study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]
) -> None:
    """Batch sizes at equal epochs (``batch_size``) and at equal steps (``batch_size_steps``)."""
    beta, reuse = cfg.batch_beta, m["supervised"].get(f"beta={cfg.batch_beta:g}")
    m["batch_size"], m["batch_size_steps"] = {}, {}
    steps = equal_step_budget(cfg, data)
    for bsz in cfg.batch_sizes:
        if bsz == cfg.batch_size and reuse is not None:
            m["batch_size"][str(bsz)] = reuse
        else:
            m["batch_size"][str(bsz)] = _sweep_point(
                study,
                "batch_size",
                data,
                cfg,
                tags={"batch_size": bsz},
                beta=beta,
                batch_size=bsz,
            )
        if bsz == max(cfg.batch_sizes):  # its epochs already take exactly `steps` steps
            m["batch_size_steps"][str(bsz)] = m["batch_size"][str(bsz)]
            continue
        m["batch_size_steps"][str(bsz)] = _sweep_point(
            study,
            "batch_size_steps",
            data,
            cfg,
            tags={"batch_size": bsz, "steps": steps},
            beta=beta,
            batch_size=bsz,
            max_steps=steps,
        )
    m["batch_size_steps"]["steps"] = steps


def near_nc(study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]) -> None:
    """SCL from an encoder fitted to a simplex ETF, vs the random start of the sweep."""
    inits, hists = [], []

    def one(seed: int) -> dict[str, float]:
        start = pretrain_near_nc(data, cfg, seed)
        inits.append(measure(start, data, "ball")[0])
        model, hist = train_encoder(data, cfg, beta=0.0, seed=seed, init=start, track=True)
        hists.append(hist)
        return measure(model, data, "ball")[0]

    finals = study.over_seeds("near_nc", one)
    m["near_nc"] = {
        "init": summarize(inits),
        "final": summarize(finals),
        "random_init_final": dict(m["supervised"]["beta=0"]),
    }
    m["history"]["near_nc_scl"] = _history_mean(hists)


def synthetic(
    study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]
) -> None:
    """Synthetic latent classes: label-based vs Gaussian-noise positives, unsupervised."""
    m["synthetic"] = {}
    for pos in ("label", "noise"):
        for beta in cfg.synthetic_betas:
            spectra: list[list[float]] = []

            def one(
                seed: int, pos: str = pos, beta: float = beta, spectra: list[list[float]] = spectra
            ) -> dict[str, float]:
                syn = synthetic_data(cfg, seed)
                model, _ = train_encoder(
                    syn,
                    cfg,
                    beta=beta,
                    seed=seed,
                    supervised=False,
                    positives=pos,
                    batch_size=cfg.synthetic_batch_size,
                    epochs=cfg.synthetic_epochs,
                )
                record, spectrum = measure(model, syn, "ball")
                spectra.append(spectrum)
                return record

            records = study.over_seeds("synthetic", one, positives=pos, beta=beta)
            m["synthetic"][f"{pos}/beta={beta:g}"] = group(
                records, class_mean_log_spectrum=np.mean(np.asarray(spectra), 0).tolist()
            )


def few_classes(
    study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]
) -> None:
    """MNIST-5k (10 classes): the few-class contrast."""
    few = few_class_data(cfg)
    m["few_classes"] = {
        f"beta={beta:g}": _sweep_point(
            study, "few_classes", few, cfg, tags={"beta": beta}, beta=beta
        )
        for beta in cfg.few_class_betas
    }


def in_batch(study: StudyRun, cfg: HardNegativesConfig, data: StudyData, m: dict[str, Any]) -> None:
    """SCL / HSCL with the in-batch reweighting estimator: the supervised recipe (batches,
    seeds, steps, beta) of the sampling arm, only the estimator changed.  Run last, so
    that the parts before it are trained exactly as without it."""
    m["in_batch"] = {
        f"beta={beta:g}": _sweep_point(
            study,
            "in_batch",
            data,
            cfg,
            tags={"beta": beta, "estimator": "in_batch"},
            beta=beta,
            estimator="in_batch",
        )
        for beta in cfg.in_batch_betas
    }


#: the parts, in the order they run (later parts reuse the supervised sweep; the
#: in-batch estimator last, added after the others were published)
PARTS = (
    ("supervised", supervised),
    ("unsupervised", unsupervised),
    ("normalization", normalization),
    ("batch_size", batch_size),
    ("near_nc", near_nc),
    ("synthetic", synthetic),
    ("few_classes", few_classes),
    ("in_batch", in_batch),
)


def spectra_of(m: dict[str, Any]) -> dict[str, list[float]]:
    """``{"supervised/beta=0": log spectrum, ...}`` of the plotted groups."""
    out = {}
    for part in ("supervised", "unsupervised", "normalization"):
        for key, g in m[part].items():
            out[f"{part}/{key}"] = g["class_mean_log_spectrum"]
    return out
