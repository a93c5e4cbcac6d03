"""Data of the alignment study: MNIST-5k digits and their augmentation."""

from __future__ import annotations

import torch

from spacl.data import ImageAugment, LabeledData, load_mnist5k, stratified_split
from spacl.studies.alignment_study.config import AlignmentConfig

__all__ = ["augment", "load_split"]


def load_split(cfg: AlignmentConfig, classes: int) -> tuple[LabeledData, LabeledData]:
    """MNIST-5k restricted to digits ``0..classes-1``, 80/20 stratified (seed 0)."""
    data = load_mnist5k()
    keep = torch.nonzero(data.labels < classes).squeeze(1)
    sub = LabeledData(data.inputs[keep], data.labels[keep], None, classes, f"mnist5k-{classes}")
    train, test = stratified_split(sub, 0.2, seed=0)
    if cfg.train_limit is not None and len(train) > cfg.train_limit:
        keep_fraction = cfg.train_limit / len(train)
        _, train = stratified_split(train, keep_fraction, seed=1)
        _, test = stratified_split(test, keep_fraction, seed=1)
    return train, test


def augment(cfg: AlignmentConfig) -> ImageAugment:
    """Random resized crop + brightness / contrast jitter for 1-channel digits (no flip)."""
    return ImageAugment(
        scale=cfg.crop_scale,
        ratio=(0.8, 1.25),
        flip_p=0.0,
        jitter=(0.4, 0.4, 0.0, 0.0),
        jitter_p=0.8,
        gray_p=0.0,
        keep_original=False,
    )
