"""The SimCLR recipe as ``torchvision.transforms.v2`` pipelines (on-disk / PIL path).

For data that does not sit in memory as one tensor (ImageNet folders, or CIFAR fed
through a ``DataLoader`` with workers), augmentation runs per item on the CPU with
torchvision's transforms, inside :class:`spacl.data.MultiViewDataset`, which seeds
torch's RNG per item from ``(seed, epoch, index, view)``.

* :func:`simclr_transform`: ``RandomResizedCrop(size, scale)``, horizontal flip,
  ``ColorJitter(0.8s, 0.8s, 0.8s, 0.2s)`` with ``p = 0.8``, grayscale ``p = 0.2``,
  Gaussian blur ``p = 0.5`` (kernel ~10% of ``size``, SimCLR; only when
  ``blur=True``, default for ``size >= 64``), then float + normalisation.
* :func:`eval_transform`: the original / reference view (SPACL's view 0): resize to
  ``size / crop_fraction`` (shorter side), centre crop ``size``, normalisation.
  For 32x32 CIFAR, ``crop_fraction = 1`` makes it the plain image.

Inputs may be PIL images or ``uint8``/float tensor images ``[C, H, W]``.
"""

from __future__ import annotations

from typing import Any

import torch
from torchvision.transforms import v2

__all__ = [
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "CIFAR100_MEAN",
    "CIFAR100_STD",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "eval_transform",
    "simclr_transform",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)


def simclr_transform(
    size: int,
    *,
    strength: float = 0.5,
    scale: tuple[float, float] = (0.08, 1.0),
    blur: bool | None = None,
    mean: tuple[float, ...] | None = IMAGENET_MEAN,
    std: tuple[float, ...] | None = IMAGENET_STD,
    flip_p: float = 0.5,
    augment_strength: float = 1.0,
) -> v2.Compose:
    """SimCLR augmentation (Chen et al. 2020, appendix A) as a v2 pipeline.

    ``strength`` is SimCLR's colour strength ``s`` (1.0 ImageNet, 0.5 CIFAR).
    ``blur=None`` enables the Gaussian blur for ``size >= 64`` ("for large images").
    ``mean=None`` skips normalisation; ``flip_p`` is the horizontal-flip probability.
    ``augment_strength`` in ``[0, 1]`` scales every probability and magnitude and pulls the
    crop range and aspect ratios toward the full image, as
    :class:`spacl.data.ImageAugment`'s ``strength`` does (0: resize only, no randomness).
    """
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    if not 0 <= strength <= 1:
        raise ValueError(f"strength must be in [0, 1], got {strength}")
    if not 0 <= flip_p <= 1:
        raise ValueError(f"flip_p must be in [0, 1], got {flip_p}")
    if not 0 <= augment_strength <= 1:
        raise ValueError(f"augment_strength must be in [0, 1], got {augment_strength}")
    use_blur = size >= 64 if blur is None else bool(blur)
    s, a = strength, augment_strength
    area = (1.0 - a * (1.0 - scale[0]), 1.0 - a * (1.0 - scale[1]))
    ratio = ((3 / 4) ** a, (4 / 3) ** a)
    jitter = v2.ColorJitter(0.8 * s * a, 0.8 * s * a, 0.8 * s * a, 0.2 * s * a)
    steps: list[Any] = [
        v2.ToImage(),
        v2.RandomResizedCrop(size, scale=area, ratio=ratio, antialias=True),
        v2.RandomHorizontalFlip(p=flip_p * a),
        v2.RandomApply([jitter], p=0.8 * a),
        v2.RandomGrayscale(p=0.2 * a),
    ]
    if use_blur:
        kernel = max(3, int(0.1 * size) // 2 * 2 + 1)
        steps.append(v2.RandomApply([v2.GaussianBlur(kernel, sigma=(0.1, 2.0))], p=0.5 * a))
    steps.append(v2.ToDtype(torch.float32, scale=True))
    if mean is not None:
        steps.append(v2.Normalize(mean=list(mean), std=list(std or ())))
    return v2.Compose(steps)


def eval_transform(
    size: int,
    *,
    crop_fraction: float = 0.875,
    mean: tuple[float, ...] | None = IMAGENET_MEAN,
    std: tuple[float, ...] | None = IMAGENET_STD,
) -> v2.Compose:
    """Centre-crop + normalise: SPACL's original view 0 and the evaluation transform."""
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    if not 0 < crop_fraction <= 1:
        raise ValueError(f"crop_fraction must be in (0, 1], got {crop_fraction}")
    steps: list[Any] = [v2.ToImage(), v2.Resize(round(size / crop_fraction), antialias=True)]
    steps += [v2.CenterCrop(size), v2.ToDtype(torch.float32, scale=True)]
    if mean is not None:
        steps.append(v2.Normalize(mean=list(mean), std=list(std or ())))
    return v2.Compose(steps)
