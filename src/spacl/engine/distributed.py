"""Distributed helpers: process-group setup from ``torchrun`` and a differentiable all-gather.

The contract (DESIGN "Distributed"): ``W`` processes with per-rank batch ``b`` give the
same loss and the same gradients as one process with batch ``W*b``.  Every rank
gathers the embeddings of the whole global batch with :func:`all_gather_with_grad`
and computes the *global* loss (the same number on every rank).  The gather's
backward all-reduces (sums) the incoming gradient and returns this rank's slice, so
rank ``r`` holds ``W * dL/dz_r``; DDP's gradient averaging (``1/W``) then leaves
exactly ``dL/dtheta`` on every rank.

Two bugs shipped by peers are avoided by construction (PEERS.md): gradients are summed
across ranks in the gather's backward (a backward that only slices leaves every
rank's gradients ``1/W`` too small), and no ``all_reduce`` happens inside a loss.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from spacl.engine.device import resolve_device

__all__ = [
    "DistributedContext",
    "all_gather_nograd",
    "all_gather_with_grad",
    "gather_batch",
    "init_from_env",
    "is_distributed",
]


def is_distributed() -> bool:
    """True when a process group with more than one rank is initialised."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class _AllGatherWithGrad(torch.autograd.Function):
    """``forward``: concatenate every rank's ``x`` along dim 0.
    ``backward``: all-reduce (sum) the gradient, return this rank's rows."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        world = dist.get_world_size()
        ctx.rank = dist.get_rank()
        ctx.rows = int(x.shape[0])
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start = ctx.rank * ctx.rows
        return grad[start : start + ctx.rows]


def all_gather_with_grad(x: Tensor) -> Tensor:
    """Concatenate ``x`` from every rank (rank order) along dim 0, differentiably.

    Every rank must pass a tensor of the same shape.  Without an initialised
    multi-rank process group this returns ``x`` unchanged.
    """
    if not is_distributed():
        return x
    out: Tensor = _AllGatherWithGrad.apply(x)
    return out


@torch.no_grad()
def all_gather_nograd(x: Tensor) -> Tensor:
    """Concatenate ``x`` from every rank along dim 0 (no gradient; labels, target outputs)."""
    if not is_distributed():
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=0)


def gather_batch(x: Tensor | None, *, grad: bool) -> Tensor | None:
    """``all_gather_with_grad`` if ``grad`` else ``all_gather_nograd``; ``None`` passes."""
    if x is None:
        return None
    return all_gather_with_grad(x) if grad else all_gather_nograd(x)


@dataclass(frozen=True)
class DistributedContext:
    """Where this process sits: ``rank``, ``world_size``, ``local_rank`` and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    initialized_here: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def shutdown(self) -> None:
        """Destroy the process group if :func:`init_from_env` created it."""
        if self.initialized_here and dist.is_initialized():
            dist.destroy_process_group()


def init_from_env(device: str = "auto") -> DistributedContext:
    """Initialise ``torch.distributed`` from ``torchrun``'s variables, if present.

    Reads ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.  With ``WORLD_SIZE > 1`` the
    backend is ``nccl`` on CUDA (device ``cuda:LOCAL_RANK``) and ``gloo`` on the CPU;
    ``init_method`` is ``env://`` (``MASTER_ADDR`` / ``MASTER_PORT`` set by torchrun).
    Without those variables (or ``WORLD_SIZE=1``) this is a single-process context.
    ``device`` is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device)  # the one reading of train.device (auto: CUDA if any)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"train.device={device!r} but CUDA is not available")
        # one GPU per process under torchrun; cuda:N names the GPU of a single process
        dev = torch.device("cuda", local_rank if world > 1 or dev.index is None else dev.index)
        torch.cuda.set_device(dev)
    if world <= 1:
        return DistributedContext(0, 1, 0, dev, False)
    if dist.is_initialized():
        return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, dev, False)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world)
    return DistributedContext(rank, world, local_rank, dev, True)
