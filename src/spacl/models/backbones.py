"""Encoders ``f``: torchvision ResNets (optional CIFAR stem), a small CNN and an MLP.

Every backbone maps ``[N, ...]`` inputs to features ``[N, feature_dim]`` and exposes
``feature_dim``. :func:`build_backbone` builds one by name for configs.

* :class:`ResNetEncoder` - ``torchvision.models.resnet18/50(weights=None)`` with the
  classifier removed. ``cifar_stem=True`` swaps the 7x7 stride-2 stem and max-pool for
  a 3x3 stride-1 convolution and no pooling (He et al. 2016, section 4.2; the SimCLR /
  SupCon CIFAR recipe), which keeps 32x32 inputs at 32x32 until ``layer2``.
* :class:`SmallCNN` - conv-BN-ReLU blocks with global average pooling; works on any
  image size >= 4 (8x8 digits, 28x28 MNIST) on a CPU.
* :class:`MLP` - flattens its input; for synthetic vectors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from spacl._validation import check_choice, check_flag

__all__ = ["BACKBONES", "MLP", "ResNetEncoder", "SmallCNN", "build_backbone", "feature_dim_of"]


def _check_pos_int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


class ResNetEncoder(nn.Module):
    """ResNet-18/50 feature extractor (512 / 2048 features), randomly initialised.

    Args:
        depth: 18 or 50.
        cifar_stem: 3x3 stride-1 first convolution and no max-pool (small images).
        in_channels: input channels (3 for RGB; 1 for MNIST-like data).
        zero_init_residual: torchvision's option (last BN of each block starts at 0).
    """

    def __init__(
        self,
        depth: int = 18,
        cifar_stem: bool = False,
        in_channels: int = 3,
        zero_init_residual: bool = False,
    ) -> None:
        super().__init__()
        if depth not in (18, 50):
            raise ValueError(f"depth must be 18 or 50, got {depth!r}")
        _check_pos_int(in_channels, "in_channels")
        # imported here: torchvision.models costs about a second, and most runs (and
        # every CLI check before training) build no ResNet
        from torchvision.models import resnet18, resnet50

        factory = resnet18 if depth == 18 else resnet50
        net = factory(weights=None, zero_init_residual=zero_init_residual)
        if cifar_stem:
            net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
            net.maxpool = nn.Identity()
        elif in_channels != 3:
            net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        if cifar_stem or in_channels != 3:
            nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
        self.feature_dim = int(net.fc.in_features)
        net.fc = nn.Identity()
        self.net = net
        self.depth = depth
        self.cifar_stem = check_flag(cifar_stem, "cifar_stem")

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class SmallCNN(nn.Module):
    """A CPU-sized CNN: ``len(channels)`` blocks of conv3x3-BN-ReLU (stride 2 after the
    first), global average pooling, then a linear map to ``feature_dim``.

    Works on any spatial size >= 4 (global pooling), e.g. 8x8 digits and 28x28 MNIST.
    """

    def __init__(
        self,
        in_channels: int = 1,
        feature_dim: int = 128,
        channels: Sequence[int] = (32, 64, 128),
    ) -> None:
        super().__init__()
        _check_pos_int(in_channels, "in_channels")
        _check_pos_int(feature_dim, "feature_dim")
        if not channels:
            raise ValueError(f"channels must be non-empty, got {channels!r}")
        layers: list[nn.Module] = []
        prev = in_channels
        for i, ch in enumerate(channels):
            _check_pos_int(ch, f"channels[{i}]")
            stride = 1 if i == 0 else 2
            layers += [
                nn.Conv2d(prev, ch, kernel_size=3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(ch),
                nn.ReLU(inplace=True),
            ]
            prev = ch
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(prev, feature_dim)
        self.feature_dim = feature_dim

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 4:
            raise ValueError(f"SmallCNN expects [N, C, H, W], got shape {tuple(x.shape)}")
        return self.fc(self.pool(self.features(x)).flatten(1))


class MLP(nn.Module):
    """Multi-layer perceptron on flattened inputs: Linear(-BN)-ReLU blocks, then Linear.

    Args:
        in_dim: flattened input size.
        hidden_dims: widths of the hidden layers (may be empty: a linear map).
        out_dim: output (feature) size, exposed as ``feature_dim``.
        batchnorm: BatchNorm1d after each hidden Linear.
    """

    def __init__(
        self,
        in_dim: int,
        hidden_dims: Sequence[int] = (256, 256),
        out_dim: int = 128,
        batchnorm: bool = True,
    ) -> None:
        super().__init__()
        _check_pos_int(in_dim, "in_dim")
        _check_pos_int(out_dim, "out_dim")
        layers: list[nn.Module] = [nn.Flatten()]
        prev = in_dim
        for i, width in enumerate(hidden_dims):
            _check_pos_int(width, f"hidden_dims[{i}]")
            layers.append(nn.Linear(prev, width, bias=not batchnorm))
            if batchnorm:
                layers.append(nn.BatchNorm1d(width))
            layers.append(nn.ReLU(inplace=True))
            prev = width
        layers.append(nn.Linear(prev, out_dim))
        self.net = nn.Sequential(*layers)
        self.in_dim = in_dim
        self.feature_dim = out_dim

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or math.prod(x.shape[1:]) != self.in_dim:
            raise ValueError(
                f"MLP expects inputs with {self.in_dim} values each, got shape {tuple(x.shape)}"
            )
        return self.net(x)


BACKBONES = ("resnet18", "resnet50", "small_cnn", "mlp")


def build_backbone(name: str, **kw: object) -> nn.Module:
    """Build a backbone by name: ``resnet18``, ``resnet50`` (kw: ``cifar_stem``,
    ``in_channels``), ``small_cnn`` (kw of :class:`SmallCNN`), ``mlp`` (kw of :class:`MLP`).
    """
    check_choice(name, "name", list(BACKBONES))
    if name == "resnet18":
        return ResNetEncoder(18, **kw)  # type: ignore[arg-type]
    if name == "resnet50":
        return ResNetEncoder(50, **kw)  # type: ignore[arg-type]
    if name == "small_cnn":
        return SmallCNN(**kw)  # type: ignore[arg-type]
    return MLP(**kw)  # type: ignore[arg-type]


def feature_dim_of(module: nn.Module, example: Tensor | None = None) -> int:
    """``module.feature_dim`` if present, else the width of ``module(example)``."""
    dim = getattr(module, "feature_dim", None)
    if isinstance(dim, int):
        return dim
    if example is None:
        raise ValueError("module has no feature_dim attribute; pass an example input")
    with torch.no_grad():
        return int(module(example).shape[-1])
