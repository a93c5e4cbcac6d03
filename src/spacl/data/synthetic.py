"""Synthetic latent-class data (SPEC 2, the NC/DC paper's controlled setting).

Model: ``C`` class centres ``mu_c = center_scale * g_c / ||g_c||`` with
``g_c ~ N(0, I_d)`` (random directions on a sphere of radius ``center_scale``), and
samples ``x = mu_y + within_std * eps``, ``eps ~ N(0, I_d)``, ``samples_per_class``
per class. So ``E||x - mu_y||^2 = d * within_std^2`` and two centres sit about
``sqrt(2) * center_scale`` apart in high dimension.

Positives (the two settings of SPEC 2) are view makers of the stream, not data:
label-based positives with :class:`spacl.data.SameClassViews` (views are other
samples of the same class), noise-based positives with
:class:`spacl.data.NoiseViews` (``x + sigma * eps``; breaks the conditional
independence the NC theory assumes, so no neural collapse is expected for UCL).

``num_superclasses`` optionally groups classes into ``coarse_labels = y mod K`` for
weak-supervision experiments.  By default that only relabels; ``cluster_spread`` (with
``num_superclasses``) also places every fine class near its group: group directions
``h_k`` (unit, random) and ``mu_c = center_scale * unit(h_{c mod K} + cluster_spread *
unit(g_c))``, so siblings sit about ``sqrt(2) * center_scale * cluster_spread`` apart
(small spread: hard negatives) and other groups about ``sqrt(2) * center_scale`` away.
"""

from __future__ import annotations

import torch

from .._validation import check_positive
from .labeled import LabeledData
from .seeding import generator_for

__all__ = ["make_synthetic"]


def make_synthetic(
    num_classes: int = 10,
    dim: int = 32,
    samples_per_class: int = 100,
    within_std: float = 0.3,
    center_scale: float = 1.0,
    seed: int = 0,
    *,
    num_superclasses: int | None = None,
    cluster_spread: float | None = None,
    dtype: torch.dtype = torch.float32,
) -> LabeledData:
    """Draw ``num_classes * samples_per_class`` vectors around random class centres.

    Returns ``LabeledData`` with ``inputs [N, dim]`` ordered class by class (the
    stream shuffles) and the class centres NOT included (recompute them as class means
    or regenerate with the same seed via :func:`synthetic_centers`).
    """
    for name, value in (
        ("num_classes", num_classes),
        ("dim", dim),
        ("samples_per_class", samples_per_class),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    check_positive(center_scale, "center_scale")
    if not isinstance(within_std, (int, float)) or not 0 <= within_std < float("inf"):
        raise ValueError(f"within_std must be a finite number >= 0, got {within_std!r}")
    if cluster_spread is not None:
        check_positive(cluster_spread, "cluster_spread")
        if num_superclasses is None:
            raise ValueError("cluster_spread needs num_superclasses (the groups to cluster in)")
    centers = synthetic_centers(num_classes, dim, center_scale, seed)
    if cluster_spread is not None and num_superclasses is not None:
        centers = _clustered_centers(centers, num_superclasses, cluster_spread, seed)
    gen = generator_for(seed, "synthetic", "noise")
    labels = torch.arange(num_classes).repeat_interleave(samples_per_class)
    eps = torch.randn((len(labels), dim), generator=gen, dtype=torch.float64)
    inputs = centers[labels] + float(within_std) * eps
    coarse = None
    if num_superclasses is not None:
        if not isinstance(num_superclasses, int) or not 1 <= num_superclasses <= num_classes:
            raise ValueError(
                f"num_superclasses must be an int in [1, {num_classes}], got {num_superclasses!r}"
            )
        coarse = labels % num_superclasses
    return LabeledData(inputs.to(dtype), labels, coarse, num_classes, "synthetic")


def _clustered_centers(
    centers: torch.Tensor, groups: int, spread: float, seed: int
) -> torch.Tensor:
    """Fine centres moved next to their group's direction (module docstring)."""
    if not isinstance(groups, int) or not 1 <= groups <= len(centers):
        raise ValueError(f"num_superclasses must be an int in [1, {len(centers)}], got {groups!r}")
    gen = generator_for(seed, "synthetic", "groups")
    h = torch.randn((groups, centers.shape[1]), generator=gen, dtype=torch.float64)
    h = h / h.norm(dim=1, keepdim=True)
    scale = centers.norm(dim=1, keepdim=True)
    own = centers / scale
    moved = h[torch.arange(len(centers)) % groups] + float(spread) * own
    return scale * moved / moved.norm(dim=1, keepdim=True)


def synthetic_centers(
    num_classes: int, dim: int, center_scale: float = 1.0, seed: int = 0
) -> torch.Tensor:
    """The float64 class centres ``[num_classes, dim]`` that :func:`make_synthetic` uses."""
    gen = generator_for(seed, "synthetic", "centers")
    g = torch.randn((num_classes, dim), generator=gen, dtype=torch.float64)
    return center_scale * g / g.norm(dim=1, keepdim=True)
