"""Validation of ``(features, labels)`` pairs shared by the evaluation functions.

**Decision** (mixed dtypes): the evaluators are pure math on two feature matrices, so a
train/test pair of different floating dtypes (float32 and float64, float16 and float32)
is promoted to the wider dtype (``torch.promote_types``) for both, never rejected and
never narrowed; the test features also move to the training features' device.
"""

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
    """Validate a train/test pair: same feature width; one device and one (the wider) dtype."""
    train_features, train_labels = check_split(train_features, train_labels, "train")
    test_features, test_labels = check_split(test_features, test_labels, "test")
    train_features, test_features = match_features(
        train_features, test_features, "train_features", "test_features"
    )
    return train_features, train_labels, test_features, test_labels.to(train_features.device)


def check_queries(
    train_features: Tensor,
    test_features: Tensor,
    train_name: str = "train_features",
    test_name: str = "test_features",
) -> tuple[Tensor, Tensor]:
    """Validate unlabelled queries against validated ``train_features``: ``[M, d]`` floats
    of the same width ``d``, then :func:`match_features`."""
    check_tensor(test_features, test_name, ndim=2)
    return match_features(train_features, test_features, train_name, test_name)


def match_features(a: Tensor, b: Tensor, a_name: str, b_name: str) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` (validated 2-D float tensors) of one width, in the wider of their
    dtypes, ``b`` on ``a``'s device; a width mismatch is a ``ValueError`` naming both."""
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"{a_name} and {b_name} must have the same width, got {a.shape[1]} and "
            f"{b.shape[1]} (shapes {tuple(a.shape)} and {tuple(b.shape)})"
        )
    wide = torch.promote_types(a.dtype, b.dtype)
    return a.to(wide), b.to(device=a.device, dtype=wide)


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
