"""Report sections and plots of the hard-negatives study."""

from __future__ import annotations

from typing import Any

import numpy as np

from spacl.studies.hard_negatives.config import (
    PAPER_NCC_CIFAR100,
    SPECTRUM_FLOOR,
    HardNegativesConfig,
)
from spacl.studies.hard_negatives.data import DataShape
from spacl.studies.report import StudyReport, new_figure
from spacl.studies.stats import fmt
from spacl.studies.study import values as _vals

__all__ = ["plots", "sections"]


def _row(name: str, g: dict[str, Any], c1: int) -> list[str]:
    return [
        name,
        fmt(_vals(g, "ncc", 100), digits=1),
        fmt(_vals(g, "class_mean_rank"), digits=1) + f" / {c1}",
        fmt(_vals(g, "etf_deviation"), digits=3),
        fmt(_vals(g, "cdnv"), digits=3),
        fmt(_vals(g, "equiangularity"), digits=3),
        f"{g['nc1']['mean']:.3g}",
    ]


HEADER = [
    "run",
    "NCC %",
    "class-mean eff. rank",
    "ETF dev.",
    "CDNV",
    "equiangularity",
    "NC1 (mean)",
]


def sections(
    report: StudyReport, cfg: HardNegativesConfig, m: dict[str, Any], shape: DataShape
) -> None:
    """Recipe, one table per part, timing (``shape``: the many-class data's size)."""
    c1 = shape.num_classes - 1
    report.section(
        "Recipe",
        f"MLP encoder `{shape.input_dim} -> {cfg.hidden} -> {c1}` "
        f"(embedding dim C-1), features in the unit ball unless stated, Adam lr {cfg.lr:g}, "
        f"no augmentation, sampling estimator with K={cfg.num_negatives} negative(s) per "
        f"anchor drawn from `p ∝ exp(beta <a, n>)`, no temperature. Supervised: batch "
        f"{cfg.batch_size}, {cfg.epochs} epochs. Unsupervised: {cfg.unsup_batch_size} "
        f"instances x 2 views (positive = another sample of the latent class), "
        f"{cfg.unsup_epochs} epochs. NCC: test accuracy with training-set class centres; "
        f"geometry on {cfg.track_per_class} training samples per class. The authors' "
        "notebook recipe (SPEC §2) for comparison: ResNet on CIFAR-100, batch 512, 400 "
        "epochs.",
    )
    init_ncc = m["history"]["beta=0"]["ncc"][0] * 100
    report.section(
        "Supervised: SCL (beta = 0) vs HSCL",
        f"For reference, the randomly initialised MLP on the frozen embeddings (epoch 0) has "
        f"NCC {init_ncc:.1f}%: SCL's dimensional collapse first destroys and then only "
        "partly recovers the class structure the sentence encoder already provides.",
    )
    report.table(HEADER, [_row(k, v, c1) for k, v in m["supervised"].items()])
    _other_sections(report, cfg, m, c1)


def _other_sections(
    report: StudyReport, cfg: HardNegativesConfig, m: dict[str, Any], c1: int
) -> None:
    report.section("Unsupervised: UCL (beta = 0) vs HUCL (latent-class positives)")
    report.table(HEADER, [_row(k, v, c1) for k, v in m["unsupervised"].items()])
    report.section(f"Normalisation (HSCL beta = {cfg.norm_beta:g})")
    report.table(HEADER, [_row(k, v, c1) for k, v in m["normalization"].items()])
    report.section(f"Batch size (HSCL beta = {cfg.batch_beta:g}, {cfg.epochs} epochs each)")
    report.table(HEADER, [_row(f"B={k}", v, c1) for k, v in m["batch_size"].items()])
    steps = m["batch_size_steps"]
    report.section(
        f"Batch size at equal steps (HSCL beta = {cfg.batch_beta:g}, {steps['steps']} optimiser "
        "steps each: the largest batch's epochs)"
    )
    rows = [_row(f"B={k}", v, c1) for k, v in steps.items() if k != "steps"]
    report.table(HEADER, rows)
    near = m["near_nc"]
    report.section(
        "Near-NC initialisation (SCL, beta = 0)",
        f"The encoder is first fitted to a simplex ETF ({cfg.near_nc_pretrain_epochs} "
        "epochs of mean-squared error to unit ETF class targets), then trained with SCL.",
    )
    report.table(
        HEADER,
        [
            _row("after ETF fit (start)", near["init"], c1),
            _row("near-NC init -> SCL", near["final"], c1),
            _row("random init -> SCL", near["random_init_final"], c1),
        ],
    )
    report.section(
        "Synthetic latent classes: label-based vs Gaussian-noise positives (unsupervised)",
        f"{cfg.synthetic_classes} classes in R^{cfg.synthetic_dim}, {cfg.synthetic_per_class} "
        f"samples per class, within-class std {cfg.synthetic_within_std}; noise positives "
        f"`x + {cfg.synthetic_noise_sigma} * eps`; {cfg.synthetic_epochs} epochs, batch "
        f"{cfg.synthetic_batch_size}; geometry on the training set.",
    )
    report.table(HEADER, [_row(k, v, cfg.synthetic_classes - 1) for k, v in m["synthetic"].items()])
    report.section(
        "Few classes: MNIST-5k (10 digits, raw pixels), same recipe",
        "Not a claim of the papers: the contrast the many-class data is chosen for. With few "
        "classes the embedding dimension C - 1 = 9 is small and every beta gets close to "
        "collapse, so SCL and HSCL differ little.",
    )
    report.table(HEADER, [_row(k, v, 9) for k, v in m["few_classes"].items()])
    if "in_batch" in m:
        report.section(
            "In-batch reweighting estimator (HardNegativeLoss, supervised)",
            "The supervised recipe above (batches, seeds, steps, unit ball) with the HCL-style "
            "estimator instead of sampling: every in-batch negative of another class, weighted "
            "by `softmax(beta <a, n>)`, temperature 1; positives the other samples of the "
            "anchor's class.",
        )
        report.table(HEADER, [_row(k, v, c1) for k, v in m["in_batch"].items()])
    report.section(
        "Timing (seconds)",
        ", ".join(f"{k}: {v:.0f}" for k, v in m["timing"].items()),
    )


def plots(report: StudyReport, cfg: HardNegativesConfig, m: dict[str, Any]) -> None:
    """Accuracy vs beta, class-mean spectra, NC metrics over epochs."""
    betas = list(cfg.betas)
    x = np.arange(len(betas))
    fig, (ax,) = new_figure()
    for part, label, marker in (
        ("supervised", "HSCL (labels)", "o"),
        ("unsupervised", "HUCL", "s"),
    ):
        means = [m[part][f"beta={b:g}"]["ncc"]["mean"] * 100 for b in betas]
        stds = [m[part][f"beta={b:g}"]["ncc"]["std"] * 100 for b in betas]
        ax.errorbar(x, means, yerr=stds, marker=marker, capsize=3, label=f"{label}, measured")
    paper = [PAPER_NCC_CIFAR100.get(b, np.nan) for b in betas]
    ax.plot(
        x,
        paper,
        "k--",
        marker="x",
        alpha=0.6,
        label="HSCL, authors' notebook (CIFAR-100, via SPEC)",
    )
    ax.set_xticks(x, [f"{b:g}" for b in betas])
    ax.set_xlabel("hardness beta (0 = SCL / UCL)")
    ax.set_ylabel("nearest-class-centre accuracy (%)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    report.figure(
        "accuracy_vs_beta.png", "NCC test accuracy vs hardness beta (mean ± std over seeds)", fig
    )

    _spectra_plot(report, cfg, m)
    _history_plot(report, m)


def _spectra_plot(report: StudyReport, cfg: HardNegativesConfig, m: dict[str, Any]) -> None:
    betas = list(cfg.betas)
    fig, axes = new_figure(ncols=3, size=(4.4, 3.6))
    for ax, prefix, keys, title in (
        (axes[0], "supervised", [f"beta={b:g}" for b in betas], "supervised (SCL/HSCL)"),
        (axes[1], "unsupervised", [f"beta={b:g}" for b in betas], "unsupervised (UCL/HUCL)"),
        (
            axes[2],
            "normalization",
            ["ball", "sphere", "none"],
            f"normalisation (beta={cfg.norm_beta:g})",
        ),
    ):
        for key in keys:
            spec = m["spectra"][f"{prefix}/{key}"]
            ax.plot(np.arange(1, len(spec) + 1), spec, label=key)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("k")
        ax.set_ylim(max(SPECTRUM_FLOOR, ax.get_ylim()[0]), 0.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("log(lambda_k / lambda_max)")
    report.figure(
        "spectra.png",
        "Class-mean covariance spectra at the end of training (seed mean); a fast drop = "
        "dimensional collapse",
        fig,
    )


def _history_plot(report: StudyReport, m: dict[str, Any]) -> None:
    fig, axes = new_figure(ncols=4, size=(3.6, 3.2))
    metrics = (
        ("ncc", "NCC accuracy"),
        ("class_mean_rank", "class-mean eff. rank"),
        ("etf_deviation", "ETF deviation"),
        ("cdnv", "CDNV"),
    )
    for ax, (metric, label) in zip(axes, metrics, strict=True):
        for key, hist in m["history"].items():
            style = "k--" if key == "near_nc_scl" else "-"
            name = "SCL from near-NC init" if key == "near_nc_scl" else key
            ax.plot(np.arange(len(hist[metric])), hist[metric], style, label=name)
        ax.set_xlabel("epoch")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="center right")
    report.figure(
        "nc_metrics_vs_epoch.png", "Supervised runs: NC metrics over training (seed mean)", fig
    )
