"""Validation of ``(features, labels)`` pairs shared by the evaluation functions."""

from __future__ import annotations

import torch
from torch import Tensor

from spacl._validation import check_labels, check_tensor


def check_split(features: Tensor, labels: Tensor, name: str) -> tuple[Tensor, Tensor]:
    """Validate ``features[N, d]`` (finite float) and ``labels[N]`` (integers >= 0).

    ``name`` is ``"train"`` or ``"test"``; errors name ``{name}_features`` /
    ``{name}_labels`` and what was found.
    """
    check_tensor(features, f"{name}_features", ndim=2)
    if features.shape[0] < 1:
        raise ValueError(
            f"{name}_features needs at least one row, got shape {tuple(features.shape)}"
        )
    labels = check_labels(labels, int(features.shape[0]), f"{name}_labels")
    if labels.numel() and int(labels.min()) < 0:
        raise ValueError(f"{name}_labels must be >= 0, got minimum {int(labels.min())}")
    return features, labels.to(features.device)


def check_pair(
    train_features: Tensor, train_labels: Tensor, test_features: Tensor, test_labels: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate a train/test pair: same feature width, same device."""
    train_features, train_labels = check_split(train_features, train_labels, "train")
    test_features, test_labels = check_split(test_features, test_labels, "test")
    if train_features.shape[1] != test_features.shape[1]:
        raise ValueError(
            "train_features and test_features must have the same width, got "
            f"{train_features.shape[1]} and {test_features.shape[1]}"
        )
    test_features = test_features.to(train_features.device)
    return train_features, train_labels, test_features, test_labels.to(train_features.device)


def num_classes_of(train_labels: Tensor, test_labels: Tensor, num_classes: int | None) -> int:
    """``num_classes`` if given (checked against the labels), else ``max label + 1``."""
    seen = int(torch.maximum(train_labels.max(), test_labels.max())) + 1
    if num_classes is None:
        return seen
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(f"num_classes must be an int >= 1, got {num_classes!r}")
    if num_classes < seen:
        raise ValueError(f"num_classes={num_classes} but the labels go up to {seen - 1}")
    return num_classes


def check_chunk_size(chunk_size: int) -> int:
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
    return chunk_size
