"""Models: encoders, projection heads, the contrastive wrapper and the EMA target.

Backbones (``[N, ...] -> [N, feature_dim]``, each with a ``feature_dim`` attribute):
    ``ResNetEncoder(depth=18|50, cifar_stem, in_channels)`` torchvision ResNet,
    ``weights=None``; ``SmallCNN(in_channels, feature_dim, channels)``;
    ``MLP(in_dim, hidden_dims, out_dim, batchnorm)``;
    ``build_backbone(name, **kw)`` with ``BACKBONES = (resnet18, resnet50, small_cnn, mlp)``.
Heads:
    ``ProjectionHead(in_dim, out_dim, kind="identity"|"linear"|"mlp", hidden_dim, batchnorm)``.
Wrapper:
    ``ContrastiveModel(backbone, head)``: ``forward(x) -> Encoded(features, projections)``,
    ``encode_views(views [B, V, ...]) -> Encoded([B, V, d_f], [B, V, d_z])``;
    ``build_model(backbone, head, proj_dim, hidden_dim, head_batchnorm, **backbone_kw)``.
Target encoder:
    ``EMATarget(online, momentum)``: ``momentum=0`` shares the encoder; otherwise an EMA
    copy updated by ``update()`` (``torch._foreach_lerp_``, buffers copied); outputs carry
    no gradient. ``cosine_momentum(base, step, total_steps)`` (BYOL schedule).
Link prediction: ``LinkPredictor(num_entities, num_relations, dim, kind)`` (1-N
ComplEx / DistMult scorer).  Text: ``MiniLMEncoder`` (frozen all-MiniLM-L6-v2, cached
sentence embeddings via ``EmbeddingCache``), ``ResidualHead``.
"""

from .backbones import BACKBONES, MLP, ResNetEncoder, SmallCNN, build_backbone, feature_dim_of
from .contrastive import ContrastiveModel, Encoded, build_model
from .ema import EMATarget, cosine_momentum
from .heads import HEAD_KINDS, ProjectionHead
from .kg import KG_INTERACTIONS, LinkPredictor
from .text import EmbeddingCache, MiniLMEncoder, ResidualHead, minilm_available

__all__ = [
    "BACKBONES",
    "HEAD_KINDS",
    "KG_INTERACTIONS",
    "MLP",
    "ContrastiveModel",
    "EMATarget",
    "EmbeddingCache",
    "Encoded",
    "LinkPredictor",
    "MiniLMEncoder",
    "ProjectionHead",
    "ResNetEncoder",
    "ResidualHead",
    "SmallCNN",
    "build_backbone",
    "build_model",
    "cosine_momentum",
    "feature_dim_of",
    "minilm_available",
]
