"""Training and measurement of one encoder of the hard-negatives study (the NC/DC recipe)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice
from spacl.data import NoiseViews, SameClassViews, ViewStream, derive_seed, generator_for
from spacl.engine.optim import build_optimizer
from spacl.evaluate import nearest_centre_accuracy
from spacl.geometry import geometry_report
from spacl.losses import normalize
from spacl.losses.registry import objective_spec
from spacl.models import MLP
from spacl.studies.common import ModelSteps, run_steps
from spacl.studies.hard_negatives.config import SPECTRUM_FLOOR, HardNegativesConfig
from spacl.studies.hard_negatives.data import StudyData, simplex_etf

__all__ = ["ESTIMATORS", "measure", "pretrain_near_nc", "train_encoder"]

#: the two estimators of the hard-negative loss (SPEC §2)
ESTIMATORS = ("sampling", "in_batch")


def _encoder(in_dim: int, hidden: int, out_dim: int, seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "hard-negatives", "init"))
        return MLP(in_dim, (hidden,), out_dim, batchnorm=False)


@torch.no_grad()
def _embed(model: nn.Module, x: Tensor, mode: str) -> Tensor:
    return normalize(model(x), mode)


def measure(model: nn.Module, data: StudyData, mode: str) -> tuple[dict[str, float], list[float]]:
    """NCC test accuracy and the geometry of the tracked training subset; the spectrum."""
    ftr = _embed(model, data.train.inputs, mode)
    fte = _embed(model, data.test.inputs, mode)
    ncc = nearest_centre_accuracy(ftr, data.train.labels, fte, data.test.labels)
    g = geometry_report(ftr[data.track], data.train.labels[data.track], uniformity_sample=256)

    def num(key: str) -> float:
        value = g[key]
        assert isinstance(value, float)
        return value

    rank = num("class_mean_effective_rank")
    scalars = {
        "ncc": ncc,
        "class_mean_rank": rank,
        "class_mean_rank_fraction": rank / (data.num_classes - 1),
        "etf_deviation": num("nc2_etf_deviation"),
        "cdnv": num("cdnv"),
        "nc1": num("nc1"),
        "equinorm": num("nc2_equinorm"),
        "equiangularity": num("nc2_equiangularity"),
        "feature_rank": num("effective_rank_singular"),
    }
    log_spectrum = g["class_mean_log_spectrum"]
    assert isinstance(log_spectrum, list)
    spec = [max(float(v), SPECTRUM_FLOOR) for v in log_spectrum]
    return scalars, spec


def _stream(
    data: StudyData,
    cfg: HardNegativesConfig,
    seed: int,
    supervised: bool,
    positives: str,
    batch_size: int | None,
) -> tuple[ViewStream, int]:
    """The batches of one run and the number of views per instance."""
    if supervised:
        b = batch_size or cfg.batch_size
        return ViewStream(data.train, min(b, len(data.train)), 1, None, seed=seed), 1
    augment = (
        SameClassViews(keep_original=True)
        if positives == "label"
        else NoiseViews(cfg.synthetic_noise_sigma, keep_original=True)
    )
    b = batch_size or cfg.unsup_batch_size
    return ViewStream(data.train, min(b, len(data.train)), 2, augment, seed=seed), 2


def _loss(
    cfg: HardNegativesConfig, estimator: str, *, beta: float, mode: str, seed: int, supervised: bool
) -> nn.Module:
    """The hard-negative loss of one run by ``estimator`` (:data:`ESTIMATORS`)."""
    check_choice(estimator, "estimator", ESTIMATORS)
    if estimator == "in_batch":
        loss = objective_spec("hscl" if supervised else "hcl").build(
            {"beta": beta, "normalize": mode}, given={"temperature": 1.0}
        )
    else:
        loss = objective_spec("sampled_hard").build(
            {"beta": beta, "num_negatives": cfg.num_negatives, "normalize": mode},
            optional={"generator": generator_for(seed, "hard-negatives", "negatives")},
        )
    assert loss is not None
    return loss


def train_encoder(
    data: StudyData,
    cfg: HardNegativesConfig,
    *,
    beta: float,
    seed: int,
    supervised: bool = True,
    mode: str = "ball",
    batch_size: int | None = None,
    epochs: int | None = None,
    positives: str = "label",
    init: nn.Module | None = None,
    track: bool = False,
    max_steps: int | None = None,
    estimator: str = "sampling",
) -> tuple[nn.Module, list[dict[str, float]]]:
    """Train one encoder with the NC/DC recipe; return it and the per-epoch history.

    ``supervised``: labels give positives and negatives (SCL/HSCL); otherwise each
    instance gets one positive view - another sample of its class (``positives="label"``)
    or the instance plus Gaussian noise (``"noise"``) - and the loss sees no label.
    ``init``: start from a copy of this encoder's weights.  ``track``: measure after
    every epoch (epoch 0 is the initialisation).  ``max_steps``: stop after that many
    optimiser steps (the batch-size claim at equal steps); ``epochs`` is then an upper
    bound (``None``: as many epochs as the steps need).  ``estimator``: ``"sampling"``
    (:class:`spacl.losses.SampledHardNegativeLoss`, ``cfg.num_negatives`` draws per
    anchor) or ``"in_batch"`` (:class:`spacl.losses.HardNegativeLoss`, every in-batch
    negative reweighted by ``softmax(beta s)``; temperature 1, the sampling loss having
    none, so that ``beta`` means the same tilt; weights not detached, as in HCL's code).
    """
    model = _encoder(int(math.prod(data.train.input_shape)), cfg.hidden, data.num_classes - 1, seed)
    if init is not None:
        model.load_state_dict(init.state_dict())
    opt = build_optimizer(model, "adam", cfg.lr)
    loss_fn = _loss(cfg, estimator, beta=beta, mode=mode, seed=seed, supervised=supervised)
    stream, views = _stream(data, cfg, seed, supervised, positives, batch_size)
    n_epochs = epochs if epochs is not None else (cfg.epochs if supervised else cfg.unsup_epochs)
    if max_steps is not None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        n_epochs = epochs if epochs is not None else -(-max_steps // max(1, len(stream)))
    history = [measure(model, data, mode)[0]] if track else []

    def loss_of(batch: Any) -> Tensor:
        bsz = batch.views.shape[0]
        z = model(batch.views.reshape(bsz * views, -1)).reshape(bsz, views, -1)
        return loss_fn(z, labels=batch.labels if supervised else None)

    def measured(epoch: int) -> None:
        history.append(measure(model, data, mode)[0])

    body = ModelSteps(opt, stream.epoch_batches, loss_of, measured if track else None)
    run_steps(body, n_epochs, max_steps)
    return model, history


def pretrain_near_nc(data: StudyData, cfg: HardNegativesConfig, seed: int) -> nn.Module:
    """An encoder fitted (MSE, Adam) to map every class onto a vertex of a simplex ETF."""
    c = data.num_classes
    in_dim = int(math.prod(data.train.input_shape))
    model = _encoder(in_dim, cfg.hidden, c - 1, seed)
    targets = simplex_etf(c, c - 1)
    opt = build_optimizer(model, "adam", cfg.lr)
    stream = ViewStream(data.train, min(cfg.batch_size, len(data.train)), 1, seed=seed + 7919)

    def loss_of(batch: Any) -> Tensor:
        z = normalize(model(batch.views[:, 0]), "ball")
        return ((z - targets[batch.labels]) ** 2).sum(1).mean()

    run_steps(ModelSteps(opt, stream.epoch_batches, loss_of), cfg.near_nc_pretrain_epochs)
    return model
