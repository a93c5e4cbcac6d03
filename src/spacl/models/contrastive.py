"""``ContrastiveModel``: backbone + projection head, returning features and projections."""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from .backbones import build_backbone, feature_dim_of
from .heads import ProjectionHead

__all__ = ["ContrastiveModel", "Encoded", "build_model"]


class Encoded(NamedTuple):
    """Outputs of :class:`ContrastiveModel`.

    ``features``: backbone output ``f(x)`` (used by probes, kNN, geometry);
    ``projections``: ``h(f(x))``, what contrastive losses consume.
    Shapes ``[N, d]`` from ``forward`` and ``[B, V, d]`` from ``encode_views``.
    """

    features: Tensor
    projections: Tensor


class ContrastiveModel(nn.Module):
    """Encoder wrapper: ``features = backbone(x)``, ``projections = head(features)``.

    ``forward(x)`` takes ``[N, ...]``; ``encode_views(views)`` takes a multi-view batch
    ``[B, V, ...]``, runs all ``B*V`` inputs in ONE forward pass (so BatchNorm sees every
    view, as in SimCLR's concatenated batch) and returns ``[B, V, d]`` tensors in the
    layout losses expect (SPEC notation, instance x view x dim).
    """

    def __init__(self, backbone: nn.Module, head: nn.Module | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Identity() if head is None else head

    @property
    def feature_dim(self) -> int:
        return feature_dim_of(self.backbone)

    def forward(self, x: Tensor) -> Encoded:
        features = self.backbone(x)
        return Encoded(features, self.head(features))

    def encode_views(self, views: Tensor) -> Encoded:
        """``[B, V, ...] -> Encoded([B, V, d_f], [B, V, d_z])``."""
        if views.ndim < 3:
            raise ValueError(f"views must be [B, V, ...], got shape {tuple(views.shape)}")
        b, v = views.shape[:2]
        out = self(views.reshape(b * v, *views.shape[2:]))
        return Encoded(out.features.reshape(b, v, -1), out.projections.reshape(b, v, -1))


def build_model(
    backbone: str,
    head: str = "mlp",
    proj_dim: int = 128,
    hidden_dim: int | None = None,
    head_batchnorm: bool = False,
    **backbone_kw: object,
) -> ContrastiveModel:
    """Build ``ContrastiveModel(build_backbone(backbone, **backbone_kw), ProjectionHead(...))``.

    ``head`` is ``identity``, ``linear`` or ``mlp`` (see :class:`ProjectionHead`).
    """
    net = build_backbone(backbone, **backbone_kw)
    proj = ProjectionHead(feature_dim_of(net), proj_dim, head, hidden_dim, head_batchnorm)
    return ContrastiveModel(net, proj)
