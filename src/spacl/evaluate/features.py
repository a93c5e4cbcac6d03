"""Frozen-feature extraction: run an encoder in eval mode over a dataset, in batches."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice

__all__ = ["extract_features", "unwrap_model"]

FEATURE_KINDS = ("features", "projections")


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module inside ``DistributedDataParallel`` / ``torch.compile`` wrappers.

    Follows ``.module`` (DDP, DataParallel) and ``._orig_mod`` (``torch.compile``) until a
    plain module is left.

    Example:
        >>> import torch
        >>> from spacl.evaluate import unwrap_model
        >>> net = torch.nn.Linear(4, 2)
        >>> wrapper = torch.nn.Module()
        >>> wrapper.module = net  # as DistributedDataParallel holds it
        >>> unwrap_model(wrapper) is net
        True
    """
    inner = model
    while True:
        if hasattr(inner, "module") and isinstance(inner.module, nn.Module):
            inner = inner.module
        elif hasattr(inner, "_orig_mod") and isinstance(inner._orig_mod, nn.Module):
            inner = inner._orig_mod
        else:
            return inner


def _select(output: Any, which: str) -> Tensor:
    if isinstance(output, Tensor):
        return output
    value = getattr(output, which, None)
    if isinstance(value, Tensor):
        return value
    raise TypeError(
        f"the model returned {type(output).__name__}, which has no tensor attribute {which!r}; "
        "expected a Tensor or spacl.models.Encoded"
    )


@torch.no_grad()
def extract_features(
    model: nn.Module,
    data: Any,
    *,
    which: str = "features",
    batch_size: int = 512,
    device: torch.device | str | None = None,
    transform: Callable[[Tensor], Tensor] | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[Tensor, Tensor]:
    """Embed every input of ``data`` with ``model`` in eval mode; return ``(features, labels)``.

    Args:
        model: an encoder; ``spacl.models.ContrastiveModel`` outputs are reduced to
            ``.features`` (backbone, the default) or ``.projections`` by ``which``.
        data: a :class:`spacl.data.LabeledData` (``inputs``, ``labels``), or an iterable of
            ``(inputs, labels)`` batches (e.g. a ``DataLoader``).
        batch_size: rows per forward pass (``LabeledData`` only).
        device: where to run (default: the model's device).
        transform: applied to each input batch on ``device`` (e.g. normalisation).
        dtype: cast inputs to this dtype (default: the model's parameter dtype).

    Features come back on the CPU as float32 (float64 if the model is float64), labels as
    ``LongTensor``.  The model's train/eval mode is restored afterwards.

    Example:
        >>> import torch
        >>> from spacl.evaluate import extract_features
        >>> _ = torch.manual_seed(0)
        >>> model = torch.nn.Linear(4, 2)
        >>> batches = [(torch.randn(3, 4), torch.tensor([0, 1, 0]))] * 2
        >>> features, labels = extract_features(model, batches)
        >>> features.shape, labels.tolist()
        (torch.Size([6, 2]), [0, 1, 0, 0, 1, 0])
    """
    check_choice(which, "which", list(FEATURE_KINDS))
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    net = unwrap_model(model)
    params = list(net.parameters())
    run_device = (
        torch.device(device)
        if device is not None
        else (params[0].device if params else torch.device("cpu"))
    )
    in_dtype = dtype or (params[0].dtype if params else torch.float32)
    out_dtype = torch.float64 if in_dtype == torch.float64 else torch.float32
    batches: Iterable[tuple[Tensor, Tensor]]
    if hasattr(data, "inputs") and hasattr(data, "labels"):
        inputs, labels = data.inputs, data.labels
        batches = (
            (inputs[i : i + batch_size], labels[i : i + batch_size])
            for i in range(0, len(inputs), batch_size)
        )
    else:
        batches = data
    was_training = net.training
    net.eval()
    feats: list[Tensor] = []
    labs: list[Tensor] = []
    try:
        for x, y in batches:
            x = x.to(device=run_device, dtype=in_dtype, non_blocking=True)
            if transform is not None:
                x = transform(x)
            feats.append(_select(net(x), which).to("cpu", out_dtype))
            labs.append(torch.as_tensor(y).to("cpu", torch.long))
    finally:
        net.train(was_training)
    if not feats:
        raise ValueError("extract_features got no data (empty dataset or loader)")
    return torch.cat(feats), torch.cat(labs)
