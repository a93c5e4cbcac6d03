"""Build the models, objectives, optimisers and schedules of a run's arms from its config."""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from spacl.data import derive_seed
from spacl.engine.device import precision_dtypes
from spacl.engine.distributed import DistributedContext
from spacl.engine.optim import WarmupCosine, build_optimizer, build_scheduler, scaled_lr
from spacl.mining.queue import NegativeQueue
from spacl.models import ContrastiveModel, EMATarget, ProjectionHead, build_backbone, feature_dim_of
from spacl.tasks.image.arm import Arm, Precision
from spacl.tasks.image.objectives import build_objective

__all__ = ["arm_configs", "build_arms", "build_base_model", "resolve_precision"]


def resolve_precision(name: str, device: torch.device) -> Precision:
    """The arms' :class:`Precision` of ``train.precision`` on ``device``, read by the
    engine (:func:`spacl.engine.device.precision_dtypes`; ``auto``: bf16 autocast on CUDA
    when supported, fp16 otherwise, fp32 on the CPU)."""
    param_dtype, autocast_dtype = precision_dtypes(name, device)
    return Precision(param_dtype, autocast_dtype, device.type)


def build_base_model(cfg: Any, input_shape: tuple[int, ...]) -> ContrastiveModel:
    """The online encoder ``f``: backbone + projection head, initialised from ``torch``'s RNG."""
    m = cfg.model
    kw: dict[str, Any]
    if m.backbone == "mlp":
        kw = {
            "in_dim": int(math.prod(input_shape)),
            "hidden_dims": tuple(m.hidden_dims),
            "out_dim": m.feature_dim,
            "batchnorm": m.batchnorm,
        }
    elif m.backbone == "small_cnn":
        if len(input_shape) != 3:
            raise ValueError(
                f"config key 'model.backbone'='small_cnn' needs images, got inputs {input_shape}"
            )
        kw = {
            "in_channels": input_shape[0],
            "feature_dim": m.feature_dim,
            "channels": tuple(m.channels),
        }
    else:
        if len(input_shape) != 3:
            raise ValueError(
                f"config key 'model.backbone'={m.backbone!r} needs images, got inputs {input_shape}"
            )
        kw = {"cifar_stem": m.cifar_stem, "in_channels": input_shape[0]}
    backbone = build_backbone(m.backbone, **kw)
    dim = feature_dim_of(backbone)
    head = ProjectionHead(dim, m.proj_dim, m.head, m.head_hidden_dim, m.head_batchnorm)
    return ContrastiveModel(backbone, head)


def arm_configs(cfg: Any) -> list[Any]:
    """The arms of a run: ``cfg.arms``, or one arm ``main`` made of ``cfg.objective``."""
    if cfg.arms:
        return list(cfg.arms)
    return [
        OmegaConf.create(
            {"name": "main", "objective": cfg.objective, "optim": {}, "momentum": None}
        )
    ]


def _classifier(dim: int, num_classes: int, seed: int) -> nn.Linear:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "classifier"))
        return nn.Linear(dim, num_classes)


def _optimizer_of(
    ocfg: Any, model: nn.Module, batch_size: int, steps_per_epoch: int, total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """An arm's optimiser (``optim.*``, the lr scaled to the batch) and its warm-up +
    cosine schedule over the run's steps."""
    lr = scaled_lr(ocfg.lr, batch_size, ocfg.reference_batch_size, ocfg.lr_scaling)
    optimizer = build_optimizer(
        model,
        ocfg.name,
        lr,
        weight_decay=ocfg.weight_decay,
        momentum=ocfg.momentum,
        betas=(float(ocfg.betas[0]), float(ocfg.betas[1])),
        nesterov=ocfg.nesterov,
        trust_coefficient=ocfg.trust_coefficient,
        exclude_bias_and_norm=ocfg.exclude_bias_and_norm,
    )
    warmup = round(float(ocfg.warmup_epochs) * steps_per_epoch)
    schedule = WarmupCosine(min(warmup, total_steps), total_steps, ocfg.min_lr_ratio, ocfg.schedule)
    return optimizer, build_scheduler(optimizer, schedule)


def _placed(
    model: ContrastiveModel,
    objective: nn.Module,
    precision: Precision,
    ctx: DistributedContext,
    sync_batchnorm: bool,
) -> tuple[ContrastiveModel, nn.Module]:
    """An arm's model and objective on the run's device (the model in the parameter dtype,
    the objective in float64 when that is it), and the model as the step calls it:
    under distributed training with synchronised batch norm if asked, wrapped in DDP.
    Returns ``(model, wrapped)``, ``wrapped`` the model itself on one process."""
    model.to(device=ctx.device, dtype=precision.param_dtype)
    objective.to(device=ctx.device)
    if precision.param_dtype == torch.float64:
        objective.to(dtype=torch.float64)
    if ctx.enabled and sync_batchnorm:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    wrapped: nn.Module = model
    if ctx.enabled:
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=ids)
    return model, wrapped


def _negative_queue(
    size: int, dim: int, precision: Precision, device: torch.device
) -> NegativeQueue | None:
    """An arm's queue of past target embeddings (``objective.queue_size`` rows of ``dim``
    in the loss dtype), ``None`` without one (size 0)."""
    if size <= 0:
        return None
    return NegativeQueue(size, dim, dtype=precision.loss_dtype, device=device)


def build_arms(
    cfg: Any,
    *,
    input_shape: tuple[int, ...],
    num_label_classes: int,
    precision: Precision,
    ctx: DistributedContext,
    steps_per_epoch: int,
) -> list[Arm]:
    """One :class:`Arm` per arm config, all from the SAME initial encoder (SPEC §3).

    The encoder is built once after ``torch.manual_seed(train.seed)`` and deep-copied
    into every arm; the cross-entropy arm's head is a linear classifier initialised from
    a seed-derived generator, so it does not shift anything else.
    """
    seed = int(cfg.train.seed)
    torch.manual_seed(seed)
    base = build_base_model(cfg, input_shape)
    total_steps = max(1, int(cfg.train.epochs) * steps_per_epoch)
    arms = []
    for i, acfg in enumerate(arm_configs(cfg)):
        key = f"arms[{i}].objective" if cfg.arms else "objective"
        momentum = float(cfg.model.momentum if acfg.momentum is None else acfg.momentum)
        spec, objective, use_labels = build_objective(
            acfg.objective,
            cfg,
            key=key,
            seed=seed,
            momentum=momentum,
            embedding_dim=int(getattr(base.head, "out_dim", cfg.model.proj_dim)),
        )
        model = copy.deepcopy(base)
        if spec.classifier_head:
            model.head = _classifier(model.feature_dim, num_label_classes, seed)
        model, wrapped = _placed(model, objective, precision, ctx, cfg.model.sync_batchnorm)
        target = EMATarget(model, momentum)
        ocfg = OmegaConf.merge(cfg.optim, acfg.optim)
        optimizer, scheduler = _optimizer_of(
            ocfg, model, int(cfg.train.batch_size), steps_per_epoch, total_steps
        )
        scaler = torch.amp.GradScaler(ctx.device.type, enabled=precision.uses_scaler)
        queue = _negative_queue(
            int(getattr(acfg.objective, "queue_size", 0)),
            int(getattr(base.head, "out_dim", cfg.model.proj_dim)),
            precision,
            ctx.device,
        )
        arms.append(
            Arm(
                str(acfg.name),
                spec,
                objective,
                use_labels,
                model,
                wrapped,
                target,
                optimizer,
                scheduler,
                scaler,
                precision,
                grad_clip=ocfg.grad_clip,
                momentum_schedule=cfg.model.momentum_schedule,
                total_steps=total_steps,
                queue=queue,
            )
        )
    return arms
