"""Target encoder ``g`` for SPACL (SPEC 1.5): an EMA copy of the online encoder, or itself.

``EMATarget(online, momentum)``:

* ``momentum = 0`` - shared encoder: the target IS the online model (no copy, nothing
  in ``state_dict``); ``update()`` is a no-op. ``g(x)`` runs ``online`` under
  ``torch.no_grad()``; note that in train mode this updates BatchNorm running
  statistics a second time. An engine that already has the online outputs may use
  ``.detach()`` on them instead (check ``target.shared``).
* ``0 < momentum < 1`` - exponential moving average (BYOL, Grill et al. 2020; MoCo,
  He et al. 2020): a deep copy with ``requires_grad=False``, updated after each
  optimiser step by ``theta_t <- m * theta_t + (1 - m) * theta_o`` for every
  parameter (one vectorised ``torch._foreach_lerp_`` over all of them), while
  buffers (BatchNorm running statistics, counters) are copied from the online model.

Outputs of ``target(x)`` never carry gradient (computed under ``no_grad``, detached).
The copy starts in the online model's train/eval mode; ``target.train()`` /
``target.eval()`` switch it (BYOL and MoCo run the target in train mode).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import Tensor, nn

from .._validation import check_in_range

__all__ = ["EMATarget", "cosine_momentum"]


def _detach(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj.detach()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # NamedTuple, e.g. Encoded
        return type(obj)(*(_detach(o) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_detach(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _detach(v) for k, v in obj.items()}
    return obj


class EMATarget(nn.Module):
    """Target encoder following ``online`` (see module docstring).

    Args:
        online: the online encoder ``f`` (not registered as a submodule, so the
            target's ``state_dict`` holds only the EMA copy).
        momentum: ``m`` in ``[0, 1)``; ``0`` shares the encoder.
    """

    def __init__(self, online: nn.Module, momentum: float = 0.99) -> None:
        super().__init__()
        if not isinstance(online, nn.Module):
            raise TypeError(f"online must be an nn.Module, got {type(online).__name__}")
        m = check_in_range(momentum, "momentum", 0.0, 1.0, high_inclusive=False)
        self.__dict__["_online"] = online  # deliberately not a registered submodule
        self.momentum = m
        self.shared = m == 0.0
        if not self.shared:
            self.ema = copy.deepcopy(online)
            self.ema.requires_grad_(False)
            self.ema.train(online.training)

    @property
    def online(self) -> nn.Module:
        online: nn.Module = self.__dict__["_online"]
        return online

    @property
    def module(self) -> nn.Module:
        """The network ``g`` runs: the EMA copy, or the online model when shared."""
        return self.online if self.shared else self.ema

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return _detach(self.module(*args, **kwargs))

    def encode_views(self, views: Tensor) -> Any:
        """``module.encode_views(views)`` without gradient (for a ``ContrastiveModel``)."""
        with torch.no_grad():
            return _detach(self.module.encode_views(views))  # type: ignore[operator]

    @torch.no_grad()
    def update(self, momentum: float | None = None) -> None:
        """One EMA step ``theta_t <- m theta_t + (1 - m) theta_o``; buffers copied.

        ``momentum`` overrides ``self.momentum`` for this step (``[0, 1]``, e.g. from
        :func:`cosine_momentum`; ``1`` leaves the parameters unchanged). No-op when shared.
        """
        if self.shared:
            return
        m = self.momentum if momentum is None else check_in_range(momentum, "momentum", 0.0, 1.0)
        target_params: list[Tensor] = list(self.ema.parameters())
        online_params = list(self.online.parameters())
        if len(target_params) != len(online_params):
            raise ValueError(
                f"online model has {len(online_params)} parameters, target {len(target_params)}"
            )
        if target_params and m < 1.0:
            torch._foreach_lerp_(target_params, [p.detach() for p in online_params], 1.0 - m)
        target_bufs: list[Tensor] = list(self.ema.buffers())
        online_bufs = list(self.online.buffers())
        if len(target_bufs) != len(online_bufs):
            raise ValueError(
                f"online model has {len(online_bufs)} buffers, target {len(target_bufs)}"
            )
        if target_bufs:
            torch._foreach_copy_(target_bufs, online_bufs)

    def extra_repr(self) -> str:
        return f"momentum={self.momentum}, shared={self.shared}"


def cosine_momentum(base: float, step: int, total_steps: int) -> float:
    """BYOL's schedule ``1 - (1 - base) * (cos(pi * step / total_steps) + 1) / 2``.

    Rises from ``base`` at step 0 to ``1`` at ``total_steps``.
    """
    check_in_range(base, "base", 0.0, 1.0, high_inclusive=False)
    if not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be an int >= 1, got {total_steps!r}")
    if not isinstance(step, int) or not 0 <= step <= total_steps:
        raise ValueError(f"step must be an int in [0, {total_steps}], got {step!r}")
    return 1.0 - (1.0 - base) * (math.cos(math.pi * step / total_steps) + 1.0) / 2.0
