"""A MoCo-style negative queue: the last ``size`` target embeddings (and their labels).

He et al. (2020, MoCo) keep a FIFO queue of past keys (momentum-encoder outputs) as
extra negatives, decoupling the number of negatives from the batch size.  The queue
is a plain ring buffer here; the losses take its contents as
``extra_negatives=queue.embeddings`` (``extra_negative_labels=queue.labels``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from spacl._validation import check_flag, check_labels, check_tensor

__all__ = ["NegativeQueue"]


class NegativeQueue(nn.Module):
    """FIFO ring buffer of the last ``size`` embeddings ``[size, dim]`` (+ integer labels).

    ``push(embeddings, labels=None)`` appends a batch (detached, cast to the queue's
    dtype) after the oldest rows are dropped; a batch larger than ``size`` keeps only
    its last ``size`` rows.  ``.embeddings`` / ``.labels`` return the filled rows from
    the oldest to the newest (``[n, dim]`` / ``[n]`` with ``n = min(pushed, size)``;
    ``labels`` is ``None`` for an unlabelled queue).  The queue is labelled iff its
    first push had labels; every later push must agree.

    Everything (rows, labels, write position, fill count, labelled flag) is a buffer,
    so ``state_dict()`` / ``load_state_dict()`` round-trip the queue exactly and a
    resumed run continues with the same negatives.

    Distributed: all ranks must hold the same queue, so each rank pushes the *gathered*
    global batch.  The engine does so itself (it already gathers the targets); a
    standalone user can set ``gather_distributed=True`` and push the local batch: with
    an initialised multi-rank process group ``push`` all-gathers it (rank order) first.

    Args:
        size: capacity ``>= 1`` (MoCo: 65536 on ImageNet, 4096 on CIFAR).
        dim: embedding dimension ``>= 1``.
        dtype: storage dtype (default ``torch.float32``).
        device: storage device (moved with the module by ``.to()``).
        gather_distributed: all-gather every pushed batch across ranks.

    Reference: He et al., "Momentum Contrast for Unsupervised Visual Representation
    Learning", CVPR 2020 (MoCo).  With ``n`` rows pushed in all, the queue holds rows
    ``max(0, n - size) .. n - 1``, oldest first.

    Example (a queue of 4 rows: the fifth push drops the oldest):
        >>> import torch
        >>> from spacl.mining import NegativeQueue
        >>> queue = NegativeQueue(size=4, dim=2)
        >>> queue.push(torch.ones(3, 2), labels=torch.tensor([0, 1, 2]))
        >>> queue.push(torch.zeros(2, 2), labels=torch.tensor([3, 4]))
        >>> len(queue), queue.labels, queue.embeddings.shape
        (4, tensor([1, 2, 3, 4]), torch.Size([4, 2]))
        >>> sorted(queue.loss_kwargs(with_labels=True))  # the keywords of a loss call
        ['extra_negative_labels', 'extra_negatives']
    """

    def __init__(
        self,
        size: int,
        dim: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        gather_distributed: bool = False,
    ) -> None:
        super().__init__()
        for name, value in (("size", size), ("dim", dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        self.size = size
        self.dim = dim
        self.gather_distributed = check_flag(gather_distributed, "gather_distributed")
        self.register_buffer("rows", torch.zeros(size, dim, dtype=dtype, device=device))
        self.register_buffer("row_labels", torch.zeros(size, dtype=torch.long, device=device))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.long, device=device))
        # -1: nothing pushed yet, 0: unlabelled, 1: labelled
        self.register_buffer("labelled", torch.full((), -1, dtype=torch.long, device=device))

    rows: Tensor
    row_labels: Tensor
    pointer: Tensor
    count: Tensor
    labelled: Tensor

    def __len__(self) -> int:
        return int(self.count)

    @property
    def has_labels(self) -> bool:
        return int(self.labelled) == 1

    def _ordered(self, x: Tensor) -> Tensor:
        n, ptr = int(self.count), int(self.pointer)
        if n < self.size or ptr == 0:
            return x[:n]
        return torch.cat((x[ptr:], x[:ptr]))

    @property
    def embeddings(self) -> Tensor:
        """``[n, dim]`` filled rows, oldest first (a view when no wrap-around is needed)."""
        return self._ordered(self.rows)

    @property
    def labels(self) -> Tensor | None:
        """``[n]`` labels of :attr:`embeddings`, or ``None`` for an unlabelled queue."""
        return self._ordered(self.row_labels) if self.has_labels else None

    @torch.no_grad()
    def push(self, embeddings: Tensor, labels: Tensor | None = None) -> None:
        """Append ``embeddings[n, dim]`` (and ``labels[n]``), dropping the oldest rows."""
        check_tensor(embeddings, "embeddings", ndim=2)
        if int(embeddings.shape[1]) != self.dim:
            raise ValueError(
                f"embeddings must be [n, {self.dim}] for this queue, got shape "
                f"{tuple(embeddings.shape)}"
            )
        n = int(embeddings.shape[0])
        if labels is not None:
            labels = check_labels(labels, n)
        state = int(self.labelled)
        given = int(labels is not None)
        if state >= 0 and state != given:
            have = "labelled" if state == 1 else "unlabelled"
            raise ValueError(
                f"this queue is {have} (fixed by its first push), but push got "
                f"labels={'a tensor' if given else 'None'}"
            )
        if self.gather_distributed and _multi_rank():
            embeddings = _gather(embeddings.detach())
            labels = None if labels is None else _gather(labels)
            n = int(embeddings.shape[0])
        if n == 0:
            return
        self.labelled.fill_(given)
        rows = embeddings.detach().to(self.rows.dtype)
        if n > self.size:
            rows = rows[-self.size :]
            labels = None if labels is None else labels[-self.size :]
            n = self.size
        ptr = int(self.pointer)
        index = (torch.arange(n, device=self.rows.device) + ptr) % self.size
        self.rows.index_copy_(0, index, rows.to(self.rows.device))
        if labels is not None:
            self.row_labels.index_copy_(0, index, labels.to(self.row_labels.device).long())
        self.pointer.fill_((ptr + n) % self.size)
        self.count.fill_(min(self.size, int(self.count) + n))

    def reset(self) -> None:
        """Empty the queue (and forget whether it is labelled)."""
        self.rows.zero_()
        self.row_labels.zero_()
        self.pointer.zero_()
        self.count.zero_()
        self.labelled.fill_(-1)

    def extra_repr(self) -> str:
        return f"size={self.size}, dim={self.dim}, filled={len(self)}"

    def loss_kwargs(self, with_labels: bool) -> dict[str, Any]:
        """``{"extra_negatives": ..., "extra_negative_labels": ...}`` for a loss call."""
        out: dict[str, Any] = {"extra_negatives": self.embeddings}
        if with_labels:
            if not self.has_labels and len(self) > 0:
                raise ValueError("the loss uses labels but the queue holds none")
            lab = self.labels
            out["extra_negative_labels"] = lab if lab is not None else self.row_labels[:0]
        return out


def _multi_rank() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _gather(x: Tensor) -> Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts)
