"""Optimisers (SGD, Adam, AdamW, LARS), parameter groups and the warmup + cosine schedule.

* :class:`LARS` — layer-wise adaptive rate scaling (You, Gitman & Ginsburg 2017), as used
  by SimCLR: SGD with momentum whose update for each parameter tensor ``w`` with
  gradient ``g`` is scaled by the trust ratio
  ``eta * ||w|| / (||g + wd * w||)`` (1 when either norm is 0).  Parameters in a group
  with ``lars_exclude=True`` (biases and normalisation weights, following SimCLR)
  get neither weight decay nor adaptation.
* :class:`WarmupCosine` — ``lr(step) / base_lr``: linear warmup from ``1/warmup`` to 1
  over ``warmup_steps``, then cosine decay to ``min_ratio`` at ``total_steps``
  (``schedule="constant"`` keeps 1 after the warmup).  A callable object (not a
  closure) so that ``LambdaLR.state_dict()`` stores its fields and loads with
  ``weights_only=True``.
* :class:`WarmupLinear` — ``lr(step) / base_lr``: linear warmup from 0 over the first
  ``warmup`` share of ``total_steps``, then linear decay to 0 at ``total_steps`` (the
  schedule of ``transformers.get_linear_schedule_with_warmup``, TEXTOIR's);
  :func:`build_scheduler` wraps either multiplier in a ``LambdaLR``.
* :func:`build_optimizer` — every task's optimiser (images, link prediction, text
  heads and fine-tuning, ADB): over a model's parameters (with the decay / no-decay
  groups) or over given parameters or parameter groups.
* :func:`scaled_lr` — ``lr * f(B / reference_batch)`` with ``f`` = identity
  (``linear``, Goyal et al. 2017), ``sqrt``, ``fourth_root`` or ``1`` (``none``): the
  learning-rate scaling rules of the CL-vs-NSCL batch-size study (SPEC §3).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice

__all__ = [
    "LARS",
    "LR_SCALINGS",
    "OPTIMIZERS",
    "WarmupCosine",
    "WarmupLinear",
    "build_optimizer",
    "build_scheduler",
    "parameter_groups",
    "scaled_lr",
]

#: the image recipes' optimisers (``optim.name``)
OPTIMIZERS = ("sgd", "adam", "adamw", "lars")
#: every optimiser :func:`build_optimizer` builds (link prediction adds ``adagrad``)
ALL_OPTIMIZERS = (*OPTIMIZERS, "adagrad")
LR_SCALINGS = ("none", "linear", "sqrt", "fourth_root")


class LARS(torch.optim.Optimizer):
    """SGD with momentum and layer-wise trust ratio (module docstring).

    Args:
        params: parameters or groups; a group may set ``lars_exclude=True``.
        lr: learning rate; momentum: heavy-ball momentum; weight_decay: L2 coefficient;
        trust_coefficient: ``eta`` (SimCLR: 1e-3); nesterov: Nesterov momentum.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        trust_coefficient: float = 1e-3,
        nesterov: bool = False,
    ) -> None:
        if lr <= 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            weight_decay=weight_decay,
            trust_coefficient=trust_coefficient,
            nesterov=nesterov,
            lars_exclude=False,
        )
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            exclude = group["lars_exclude"]
            wd, mom, eta = group["weight_decay"], group["momentum"], group["trust_coefficient"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                d_p = p.grad
                if not exclude:
                    if wd != 0:
                        d_p = d_p.add(p, alpha=wd)
                    w_norm = torch.linalg.vector_norm(p)
                    g_norm = torch.linalg.vector_norm(d_p)
                    trust = torch.where(
                        (w_norm > 0) & (g_norm > 0), eta * w_norm / g_norm, torch.ones_like(w_norm)
                    )
                    d_p = d_p.mul(trust)
                if mom != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = d_p.detach().clone()
                    else:
                        buf.mul_(mom).add_(d_p)
                    d_p = d_p.add(buf, alpha=mom) if group["nesterov"] else buf
                p.add_(d_p, alpha=-group["lr"])
        return loss


def _is_bias_or_norm(module: nn.Module, name: str, param: Tensor) -> bool:
    norm_types = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)
    return param.ndim <= 1 or isinstance(module, norm_types) or name.endswith("bias")


def parameter_groups(
    model: nn.Module, weight_decay: float, exclude_bias_and_norm: bool
) -> list[dict[str, Any]]:
    """Split trainable parameters into a decayed group and (optionally) an excluded one.

    Excluded: biases and parameters of normalisation layers (BatchNorm, GroupNorm,
    LayerNorm) — no weight decay, and no LARS adaptation (``lars_exclude=True``).
    """
    decay: list[Tensor] = []
    plain: list[Tensor] = []
    seen: set[int] = set()
    for mod in model.modules():
        for name, p in mod.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            if exclude_bias_and_norm and _is_bias_or_norm(mod, name, p):
                plain.append(p)
            else:
                decay.append(p)
    groups: list[dict[str, Any]] = [{"params": decay, "weight_decay": weight_decay}]
    if plain:
        groups.append({"params": plain, "weight_decay": 0.0, "lars_exclude": True})
    return groups


def build_optimizer(
    model: nn.Module | Iterable[Any],
    name: str,
    lr: float,
    *,
    weight_decay: float = 0.0,
    momentum: float = 0.9,
    betas: tuple[float, float] = (0.9, 0.999),
    nesterov: bool = False,
    trust_coefficient: float = 1e-3,
    exclude_bias_and_norm: bool = False,
) -> torch.optim.Optimizer:
    """Build ``sgd | adam | adamw | lars | adagrad``.

    ``model``: a module (its trainable parameters, grouped by :func:`parameter_groups`),
    or the parameters themselves, or parameter groups (dicts with ``params``, which keep
    their own ``weight_decay``; the others get ``weight_decay``), in the given order.
    """
    check_choice(name, "optimizer", list(ALL_OPTIMIZERS))
    if isinstance(model, nn.Module):
        groups = parameter_groups(model, weight_decay, exclude_bias_and_norm)
    else:
        given = list(model)
        if given and all(isinstance(g, dict) for g in given):
            groups = [{"weight_decay": weight_decay, **g} for g in given]
        else:
            groups = [{"params": given, "weight_decay": weight_decay}]
    if name != "lars":
        for g in groups:
            g.pop("lars_exclude", None)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=nesterov)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=betas)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas)
    if name == "adagrad":
        return torch.optim.Adagrad(groups, lr=lr)
    return LARS(
        groups, lr=lr, momentum=momentum, trust_coefficient=trust_coefficient, nesterov=nesterov
    )


def build_scheduler(
    optimizer: torch.optim.Optimizer, multiplier: Callable[[int], float]
) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning-rate schedule ``lr(step) = base_lr * multiplier(step)`` (step once per
    optimiser step); ``multiplier``: :class:`WarmupCosine` or :class:`WarmupLinear`."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)


def scaled_lr(lr: float, batch_size: int, reference_batch_size: int, rule: str) -> float:
    """``lr * f(batch_size / reference_batch_size)`` for the scaling ``rule`` (module doc)."""
    check_choice(rule, "lr_scaling", list(LR_SCALINGS))
    ratio = batch_size / reference_batch_size
    power = {"none": 0.0, "linear": 1.0, "sqrt": 0.5, "fourth_root": 0.25}[rule]
    return float(lr * ratio**power)


class WarmupCosine:
    """Learning-rate multiplier: linear warmup, then cosine (or constant) to ``min_ratio``."""

    def __init__(
        self, warmup_steps: int, total_steps: int, min_ratio: float = 0.0, schedule: str = "cosine"
    ) -> None:
        check_choice(schedule, "schedule", ("cosine", "constant"))
        if warmup_steps < 0 or total_steps < 1:
            raise ValueError(
                f"need warmup_steps >= 0 and total_steps >= 1, got {warmup_steps}, {total_steps}"
            )
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.min_ratio = float(min_ratio)
        self.schedule = schedule

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


class WarmupLinear:
    """Learning-rate multiplier: linear warmup from 0, then linear decay to 0 (module doc)."""

    def __init__(self, total_steps: int, warmup: float) -> None:
        if total_steps < 1 or not 0.0 <= warmup < 1.0:
            raise ValueError(
                f"need total_steps >= 1 and warmup in [0, 1), got {total_steps}, {warmup}"
            )
        self.total_steps = int(total_steps)
        self.warmup_steps = int(total_steps * warmup)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / max(1, self.warmup_steps)
        span = max(1, self.total_steps - self.warmup_steps)
        return max(0.0, (self.total_steps - step) / span)
