"""``torch.export`` of a trained module for plain torch: any batch size, no spacl needed."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def export_batch_program(module: nn.Module, example: Tensor) -> torch.export.ExportedProgram:
    """``module`` exported on ``example`` (``[2, ...]``) with its first dimension dynamic.

    ``torch.export.load(path).module()`` of the saved program then maps ``[N, ...]`` to
    the module's output for any ``N >= 1``, exactly as ``module`` in its present mode
    (callers put it in eval mode first).  Exported without gradient.
    """
    batch = torch.export.Dim("batch", min=1, max=1 << 30)
    with torch.no_grad():
        return torch.export.export(module, (example,), dynamic_shapes=({0: batch},))


__all__ = ["export_batch_program"]
