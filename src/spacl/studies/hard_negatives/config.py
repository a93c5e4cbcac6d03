"""Settings of the hard-negatives study and the numbers it quotes."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "CLAIM_KEYS",
    "FULL",
    "METRIC_KEYS",
    "PAPER_NCC_CIFAR100",
    "QUICK",
    "SPECTRUM_FLOOR",
    "HardNegativesConfig",
]

#: CIFAR-100 nearest-class-mean accuracy (%) from the authors' notebook, as quoted by SPEC §2
#: (not a table of the paper: cited as "authors' code")
PAPER_NCC_CIFAR100: dict[float, float] = {
    0.0: 10.38,
    2.0: 31.86,
    5.0: 58.39,
    10.0: 57.07,
    30.0: 54.57,
}
SPECTRUM_FLOOR = math.log(1e-12)

#: top-level keys of ``results["metrics"]`` (the tests check them)
METRIC_KEYS = (
    "supervised",
    "unsupervised",
    "normalization",
    "batch_size",
    "batch_size_steps",
    "synthetic",
    "near_nc",
    "few_classes",
    "in_batch",
    "history",
    "spectra",
    "timing",
)
#: claim keys of the report, in order
CLAIM_KEYS = (
    "hscl_beats_scl",
    "every_beta_beats_scl",
    "beta5_best_accuracy",
    "hscl_avoids_dc",
    "supervised_nc_improves_with_beta",
    "dc_without_normalisation",
    "hucl_beta5_best_nc",
    "hucl_large_beta_drifts",
    "small_batch_hurts_nc",
    "noise_positives_no_nc",
    "near_nc_init_kept",
    "in_batch_estimator_beats_scl",
)


@dataclass(frozen=True)
class HardNegativesConfig:
    """Every setting of the study (written to ``results.json``)."""

    classes: int | None = None  # CLINC intents used (None: all 150)
    train_per_class: int | None = None  # training sentences per intent (None: all 120)
    track_per_class: int = 30  # training samples per class for the geometry
    hidden: int = 512
    lr: float = 1e-3
    batch_size: int = 512
    epochs: int = 5
    unsup_epochs: int = 2
    unsup_batch_size: int = 256  # instances (x 2 views)
    num_negatives: int = 1
    betas: tuple[float, ...] = (0.0, 2.0, 5.0, 10.0, 30.0)
    norm_beta: float = 5.0
    batch_sizes: tuple[int, ...] = (32, 128, 512)
    batch_beta: float = 5.0
    near_nc_pretrain_epochs: int = 10
    synthetic_classes: int = 20
    synthetic_dim: int = 32
    synthetic_per_class: int = 100
    synthetic_within_std: float = 0.1
    synthetic_noise_sigma: float = 0.1
    synthetic_epochs: int = 20
    synthetic_batch_size: int = 256
    synthetic_betas: tuple[float, ...] = (0.0, 5.0)
    fallback_classes: int = 50  # synthetic stand-in when CLINC150 is unavailable
    few_class_betas: tuple[float, ...] = (0.0, 5.0)  # MNIST-5k contrast (10 classes)
    few_class_limit: int | None = None  # cap on MNIST-5k training images
    fallback_dim: int = 64
    # the in-batch reweighting estimator (HardNegativeLoss, HCL-style) with labels: SCL
    # (beta = 0) and HSCL at these betas, temperature 1 (the sampling arm has none)
    in_batch_betas: tuple[float, ...] = (0.0, 5.0)


FULL = HardNegativesConfig()
QUICK = HardNegativesConfig(
    classes=12,
    train_per_class=20,
    track_per_class=10,
    hidden=128,
    batch_size=128,
    epochs=2,
    unsup_epochs=1,
    unsup_batch_size=64,
    betas=(0.0, 2.0, 5.0, 10.0, 30.0),
    batch_sizes=(32, 128),
    near_nc_pretrain_epochs=3,
    synthetic_classes=8,
    synthetic_per_class=40,
    synthetic_epochs=4,
    synthetic_batch_size=64,
    fallback_classes=12,
    few_class_limit=400,
    fallback_dim=32,
)
