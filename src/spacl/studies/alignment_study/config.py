"""Settings of the alignment study: arms, learning-rate rules, sweeps."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ARMS",
    "BOUND_SCALARS",
    "CLAIM_KEYS",
    "FULL",
    "LR_RULES",
    "METRIC_KEYS",
    "QUICK",
    "AlignmentConfig",
]

#: arm name -> engine objective name
ARMS: dict[str, str] = {"CL": "dcl", "NSCL": "nscl", "SCL": "supcon", "CE": "cross_entropy"}
#: lr-scaling rule label -> :func:`spacl.engine.scaled_lr` rule
LR_RULES: dict[str, str] = {
    "B": "linear",
    "sqrt(B)": "sqrt",
    "B^(1/4)": "fourth_root",
    "constant": "none",
}
BOUND_SCALARS = (
    "measured_drift",
    "drift_ratio",
    "measured_rho",
    "measured_r",
    "measured_cka",
    "measured_rsa",
    "vacuous",
    "cka_lower_bound",
    "rsa_lower_bound",
    "surrogate_ratio",
    "surrogate_vacuous",
)
METRIC_KEYS = ("main", "history", "classes", "tau", "batch", "batch_steps", "timing")
CLAIM_KEYS = (
    "cka_cl_nscl_high",
    "cka_nscl_exceeds_scl_ce",
    "rsa_nscl_exceeds_scl_ce",
    "weights_diverge_representations_align",
    "alignment_rises_with_classes",
    "alignment_best_at_tau_1",
    "lr_linear_alignment_falls",
    "lr_sublinear_alignment_rises",
    "nscl_more_accurate_than_cl",
    "theorem1_bound_holds",
    "corollary1_cka_bound_holds",
    "rsa_bound_holds",
    "nscl_dcl_sandwich",
)


@dataclass(frozen=True)
class AlignmentConfig:
    """Every setting of the study (written to ``results.json``)."""

    hidden: int = 256
    feature_dim: int = 128
    proj_dim: int = 64
    epochs: int = 20
    sweep_epochs: int = 8
    batch_size: int = 200
    lr: float = 0.05  # SGD at reference_batch
    reference_batch: int = 100
    momentum: float = 0.9
    weight_decay: float = 5e-4
    tau: float = 0.5
    classes: int = 10
    classes_sweep: tuple[int, ...] = (2, 5, 10)
    tau_sweep: tuple[float, ...] = (0.1, 0.5, 1.0)
    batch_sweep: tuple[int, ...] = (100, 200, 400)
    reference_size: int = 1000
    delta: float = 0.05
    surrogate_steps: int = 200  # similarity-descent steps of the Theorem 1 check (at most)
    crop_scale: tuple[float, float] = (0.6, 1.0)
    train_limit: int | None = None  # cap on training images (quick mode)


FULL = AlignmentConfig()
QUICK = AlignmentConfig(
    hidden=128,
    feature_dim=64,
    proj_dim=32,
    epochs=2,
    sweep_epochs=1,
    batch_size=100,
    batch_sweep=(50, 100),
    reference_size=300,
    train_limit=1000,
)
