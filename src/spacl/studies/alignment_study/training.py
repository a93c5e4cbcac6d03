"""One shared-randomness run of the alignment study: arms, snapshots, Theorem 1 entries."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice
from spacl.alignment import (
    alignment_bound,
    kernel_drift,
    linear_cka,
    rdm,
    rdm_drift,
    rsa,
    surrogate_bound_check,
)
from spacl.data import LabeledData, ViewStream, derive_seed
from spacl.evaluate import extract_features
from spacl.losses.registry import objective_spec
from spacl.models import build_model
from spacl.studies.alignment_study.config import ARMS, AlignmentConfig
from spacl.studies.alignment_study.data import augment
from spacl.studies.common import make_arm, probe_metrics, train_shared

__all__ = [
    "alignment_snapshot",
    "backbone_vector",
    "bound_entries",
    "build_arms",
    "loss_sandwich",
    "reference_features",
    "run_once",
    "similarity_drift",
]


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
    """One image-task :class:`~spacl.tasks.image.Arm` per name in :data:`ARMS`, from ONE
    initial encoder."""
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
        check_choice(name, "arm name", list(ARMS))
        spec = objective_spec(ARMS[name])  # the arm's row of the one objective registry
        if spec.classifier_head:
            gen = torch.Generator().manual_seed(derive_seed(seed, "alignment", "classifier"))
            head = nn.Linear(cfg.feature_dim, classes)
            with torch.no_grad():
                bound = 1.0 / math.sqrt(cfg.feature_dim)
                head.weight.uniform_(-bound, bound, generator=gen)
                head.bias.uniform_(-bound, bound, generator=gen)
            model.head = head
        loss = spec.build(given={} if spec.classifier_head else {"temperature": tau})
        assert loss is not None
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
        "measured_r": rdm_drift(a, b),
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


def sandwich_bound(tau: float, classes: int) -> float:
    """The right side's margin of ``L_NSCL <= L_DCL <= L_NSCL + e^(2/tau) / (C - 1)``.

    ``e`` is Euler's number: a same-class term of the DCL denominator is at most
    ``e^(2/tau)`` times a different-class one (cosine similarities lie in ``[-1, 1]``), and
    a class-balanced batch holds fewer than ``1 / (C - 1)`` same-class samples per
    different-class one, so ``L_DCL - L_NSCL = log(1 + S_same / S_diff)`` is below this.
    At ``tau = 1`` it is the paper's ``e^2 / (C - 1)``.
    """
    return math.exp(2.0 / tau) / (classes - 1)


@torch.no_grad()
def loss_sandwich(
    arms: dict[str, Any],
    train: LabeledData,
    cfg: AlignmentConfig,
    *,
    tau: float,
    batch: int,
    classes: int,
    seed: int,
) -> dict[str, float]:
    """``L_DCL`` and ``L_NSCL`` of every trained contrastive arm on the same batches.

    One epoch of class-balanced two-view batches of ``train`` (a stream of its own seed,
    each batch drawn once and fed to every arm), each arm's L2-normalised projections in
    eval mode, both losses at the run's ``tau`` in float64.  Per arm ``n`` (the CE arm,
    whose head is a classifier, has no projections and is left out): the mean losses
    ``loss_dcl_n`` / ``loss_nscl_n`` over the batches, the smallest and largest per-batch
    gap ``L_DCL - L_NSCL`` (``gap_min_n`` / ``gap_max_n``) and the number of batches that
    break the left side (``below_n``: ``L_DCL < L_NSCL``) and the right side (``above_n``:
    gap ``>`` :func:`sandwich_bound`); ``sandwich_bound`` and ``sandwich_batches`` once.
    The global random state is left as it was.
    """
    dcl = objective_spec("dcl").build(given={"temperature": tau})
    nscl = objective_spec("nscl").build(given={"temperature": tau})
    assert dcl is not None and nscl is not None
    names = [n for n in arms if not objective_spec(ARMS[n]).classifier_head]
    bound = sandwich_bound(tau, classes)
    gaps: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    stream = ViewStream(
        train, batch, 2, augment(cfg), seed=derive_seed(seed, "alignment", "losses"), balanced=True
    )
    with torch.random.fork_rng(devices=[]):
        for b in stream.epoch_batches(0):
            bsz = b.views.shape[0]
            flat = b.views.reshape(bsz * 2, *b.views.shape[2:])
            for name in names:
                z, _ = extract_features(
                    arms[name].model, [(flat, b.labels.repeat_interleave(2))], which="projections"
                )
                z = z.double().reshape(bsz, 2, -1)
                gaps[name].append((float(dcl(z)), float(nscl(z, labels=b.labels))))
    out: dict[str, float] = {}
    for name, pairs in gaps.items():
        diff = [d - n for d, n in pairs]
        out[f"loss_dcl_{name}"] = sum(d for d, _ in pairs) / len(pairs)
        out[f"loss_nscl_{name}"] = sum(n for _, n in pairs) / len(pairs)
        out[f"gap_min_{name}"] = min(diff)
        out[f"gap_max_{name}"] = max(diff)
        out[f"below_{name}"] = float(sum(g < 0 for g in diff))
        out[f"above_{name}"] = float(sum(g > bound for g in diff))
    out["sandwich_bound"] = bound
    out["sandwich_batches"] = float(len(stream))
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
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Train the arms under shared randomness; return snapshots, bound, accuracies.

    ``max_steps``: stop after that many steps (the batch sweep at equal steps).
    """
    train, test = data
    ref = test[torch.arange(min(cfg.reference_size, len(test)))]
    in_dim = int(math.prod(train.input_shape))
    arms = build_arms(cfg, names, in_dim=in_dim, classes=classes, tau=tau, lr=lr, seed=seed)
    stream = ViewStream(train, batch, 2, augment(cfg), seed=seed, balanced=True)
    history: list[dict[str, float]] = []
    hook = (lambda e: history.append(alignment_snapshot(arms, ref))) if track else None
    steps = train_shared(arms, stream, epochs, hook, max_steps=max_steps)
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
    # last: the losses on their own batches (the global random state is kept)
    out["losses"] = loss_sandwich(
        arms, train, cfg, tau=tau, batch=batch, classes=classes, seed=seed
    )
    return out
