"""One-pass float64 moment state for spectra and neural-collapse metrics, with Chan merges.

``GeometryState`` holds, for ``n`` samples, the mean and - unlabelled - the scatter
``sum (z - m)(z - m)^T``, or - labelled with ``C`` classes - class counts, class means, the
pooled within-class scatter ``S_W = sum_i (z_i - mu_{y_i})(z_i - mu_{y_i})^T`` and the
per-class sums of squared residual norms.  In the labelled case the centred Gram follows
exactly from ``S_W + sum_c n_c (mu_c - m)(mu_c - m)^T`` (the residuals of a class sum to
zero), so one ``d x d`` product per sample suffices.

States of two sample sets merge with the pairwise update of Chan, Golub & LeVeque (1979):
``S = S_a + S_b + n_a n_b / n * delta delta^T`` (per class for ``S_W``), never raw sums
minus ``n * mean^2``.  :func:`batch_state` builds a state chunk by chunk, so memory is
O(d^2 + C d) and the data is read once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor

from spacl.geometry.inputs import F64, check_sums_finite, gram, row_slices

__all__ = ["GeometryState", "batch_state"]


@dataclass
class GeometryState:
    """Float64 moments of ``n`` samples (see the module docstring).

    Unlabelled states have ``C = 0`` and an empty ``within``; labelled ones an empty
    ``scatter``.
    """

    n: Tensor  # scalar
    mean: Tensor  # [d]
    scatter: Tensor  # [d, d] unlabelled, else [0, 0]
    counts: Tensor  # [C]
    class_means: Tensor  # [C, d]
    within: Tensor  # [d, d] labelled, else [0, 0]
    within_sq: Tensor  # [C]

    @classmethod
    def empty(cls, d: int, c: int, device: torch.device | None = None) -> GeometryState:
        """The state of zero samples (``c = 0``: unlabelled)."""

        def z(*shape: int) -> Tensor:
            return torch.zeros(shape, dtype=F64, device=device)

        scatter = z(0, 0) if c else z(d, d)
        within = z(d, d) if c else z(0, 0)
        return cls(z(), z(d), scatter, z(c), z(c, d), within, z(c))

    @property
    def labelled(self) -> bool:
        """Whether per-class moments are kept."""
        return self.counts.numel() > 0

    def merged(self, other: GeometryState) -> GeometryState:
        """The state of the union of both sample sets (Chan et al. 1979)."""
        n = self.n + other.n
        if float(n) == 0:
            return self
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        scatter = self.scatter + other.scatter
        if not self.labelled:
            scatter = scatter + (self.n * other.n / n) * torch.outer(delta, delta)
        counts = self.counts + other.counts
        safe = counts.clamp_min(1.0)
        weight = self.counts * other.counts / safe  # 0 where either side has no sample
        shift = other.class_means - self.class_means
        class_means = self.class_means + shift * (other.counts / safe)[:, None]
        within = self.within + other.within
        if self.labelled:
            within = within + shift.T @ (weight[:, None] * shift)
        within_sq = self.within_sq + other.within_sq + weight * (shift * shift).sum(1)
        return GeometryState(n, mean, scatter, counts, class_means, within, within_sq)

    def centred_gram(self) -> Tensor:
        """``sum (z - m)(z - m)^T`` over all samples."""
        if not self.labelled:
            return self.scatter
        between = self.class_means - self.mean
        return self.within + between.T @ (self.counts[:, None] * between)

    def flatten(self) -> Tensor:
        """All moments in one float64 vector (for ``torch.distributed`` exchange)."""
        return torch.cat([getattr(self, f.name).reshape(-1) for f in fields(self)])

    @classmethod
    def unflatten(cls, flat: Tensor, d: int, c: int) -> GeometryState:
        """Inverse of :meth:`flatten`."""
        template = cls.empty(d, c, flat.device)
        values, offset = [], 0
        for f in fields(template):
            shape = getattr(template, f.name).shape
            size = int(torch.Size(shape).numel())
            values.append(flat[offset : offset + size].reshape(shape).clone())
            offset += size
        return cls(*values)

    def copy(self) -> GeometryState:
        """A deep copy."""
        return GeometryState(*(getattr(self, f.name).clone() for f in fields(self)))


def batch_state(
    features: Tensor, index: Tensor | None, num_classes: int, name: str = "features"
) -> GeometryState:
    """The state of ``features [N, d]`` (class indices ``index`` in ``[0, num_classes)``).

    Reads the data once: each chunk is converted to float64, centred at its own (class)
    means in place, multiplied once, and merged.  Non-finite entries are detected from the
    chunk sums (``ValueError`` naming ``name``), so no separate scan of the data is needed.
    """
    n, d = features.shape
    c = num_classes if index is not None else 0
    state = GeometryState.empty(d, c, features.device)
    for rows in row_slices(n, d):
        x64 = features[rows].to(F64, copy=True)  # modified in place below: never the input
        size = x64.shape[0]
        part = GeometryState.empty(d, c, features.device)
        part.n = torch.tensor(float(size), dtype=F64, device=features.device)
        if index is None:
            total = x64.sum(0)
            check_sums_finite(total, features[rows], name)
            part.mean = total / size
            x64.sub_(part.mean)
            part.scatter = gram(x64)
        else:
            idx = index[rows]
            part.counts = torch.bincount(idx, minlength=c).to(F64)
            sums = torch.zeros(c, d, dtype=F64, device=features.device).index_add_(0, idx, x64)
            check_sums_finite(sums, features[rows], name)
            part.mean = sums.sum(0) / size
            part.class_means = sums / part.counts.clamp_min(1.0)[:, None]
            x64.sub_(part.class_means[idx])  # residuals, in place
            part.within_sq.index_add_(0, idx, torch.einsum("ij,ij->i", x64, x64))
            part.within = gram(x64)
        state = state.merged(part)
    return state
