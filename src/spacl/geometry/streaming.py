"""Streaming geometry statistics for datasets that do not fit in memory."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from spacl.geometry._state import GeometryState, batch_state
from spacl.geometry.inputs import F64, as_labels, as_matrix
from spacl.geometry.neural_collapse import (
    Classifier,
    ClassStatistics,
    between_basis,
    check_classes,
    metrics_from_statistics,
    nc3,
    resolve_classifier,
)
from spacl.geometry.spectrum import (
    FeatureSpectra,
    class_mean_spectrum_entries,
    entropy_rank,
    rankme_from_eigenvalues,
    spectra_from_gram,
    spectrum_entries,
)

__all__ = ["GeometryAccumulator", "state_report"]

Report = dict[str, float | list[float]]


class GeometryAccumulator:
    """Accumulate what :func:`~spacl.geometry.geometry_report` needs, batch by batch.

    Keeps float64 counts, means and scatter matrices - of all features or, when
    ``num_classes`` is given, per class plus the pooled within-class scatter (from which
    the total scatter follows exactly) - merged with the Chan et al. (1979) update (no raw
    sums minus ``n * mean^2``).  Memory is O(d^2 + C d).  ``compute()`` returns the
    spectra, effective ranks, RankMe and (with labels) NC1, NC2, CDNV, the uncentred NC/DC
    metrics and, given a classifier, NC3.  Not available from one streaming pass: NC4
    (needs the final class means per sample) and uniformity (pairwise); compute those with
    :func:`~spacl.geometry.geometry_report` on a subsample.

    Labels must lie in ``[0, num_classes)``; classes never seen are left out at ``compute``.
    ``merge`` and ``all_reduce`` (torch.distributed: all-gather, then merge in rank order)
    combine accumulators exactly.  The formulas are those of
    :func:`~spacl.geometry.neural_collapse` (Papyan, Han & Donoho 2020) and
    :func:`~spacl.geometry.effective_rank` (Roy & Vetterli 2007); the merge of two batches
    ``(n_a, m_a, S_a)``, ``(n_b, m_b, S_b)`` is ``S = S_a + S_b + n_a n_b / n (m_b - m_a)
    (m_b - m_a)^T``.

    Example:
        >>> import torch
        >>> from spacl.geometry import GeometryAccumulator
        >>> acc = GeometryAccumulator(num_classes=3)
        >>> labels = torch.arange(3).repeat(4)
        >>> etf = torch.eye(3) - 1 / 3  # a simplex ETF: perfect collapse
        >>> for part in labels.split(5):
        ...     acc.update(etf[part], part)
        >>> out = acc.compute()
        >>> acc.n, round(out["nc1"], 4), round(out["nc2_etf_deviation"], 4)
        (12, 0.0, 0.0)
    """

    def __init__(self, num_classes: int | None = None) -> None:
        if num_classes is not None and (
            isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2
        ):
            raise ValueError(f"num_classes must be an int >= 2 or None, got {num_classes!r}")
        self.num_classes = num_classes
        self._state: GeometryState | None = None

    @property
    def n(self) -> int:
        """Number of samples seen."""
        return 0 if self._state is None else round(float(self._state.n))

    def update(self, features: Any, labels: Any = None) -> None:
        """Add a batch ``features [b, d]`` (with ``labels [b]`` iff ``num_classes`` was given)."""
        x = as_matrix(features, "features", check_finite=False)  # checked from the sums
        if self._state is not None and self._state.mean.numel() != x.shape[1]:
            raise ValueError(
                f"feature dimension changed: accumulator has {self._state.mean.numel()}, "
                f"got {x.shape[1]}"
            )
        index = None
        if self.num_classes is None:
            if labels is not None:
                raise ValueError("labels given but the accumulator was built without num_classes")
        else:
            if labels is None:
                raise ValueError("labels are required when num_classes is set")
            index = as_labels(labels, x.shape[0]).to(x.device)
            low, high = int(index.min()), int(index.max())
            if low < 0 or high >= self.num_classes:
                raise ValueError(f"labels must lie in [0, {self.num_classes}), got [{low}, {high}]")
        batch = batch_state(x, index, self.num_classes or 0)
        self._state = batch if self._state is None else self._state.merged(batch)

    def merge(self, other: GeometryAccumulator) -> GeometryAccumulator:
        """Fold ``other``'s samples into this accumulator (in place) and return ``self``."""
        if not isinstance(other, GeometryAccumulator):
            raise TypeError(f"other must be a GeometryAccumulator, got {type(other).__name__}")
        if other.num_classes != self.num_classes:
            raise ValueError(f"num_classes differ: {self.num_classes} and {other.num_classes}")
        if other._state is None:
            return self
        if self._state is None:
            self._state = other._state.copy()
        else:
            if self._state.mean.numel() != other._state.mean.numel():
                raise ValueError("feature dimensions differ between the accumulators")
            self._state = self._state.merged(other._state)
        return self

    def all_reduce(self, group: Any = None) -> GeometryAccumulator:
        """Merge all processes' accumulators (no-op unless torch.distributed is initialised)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return self
        if self._state is None:
            raise ValueError("all_reduce needs at least one update() on every rank")
        d, c = self._state.mean.numel(), self.num_classes or 0
        flat = self._state.flatten()
        gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, flat, group=group)
        state = GeometryState.unflatten(gathered[0], d, c)
        for part in gathered[1:]:
            state = state.merged(GeometryState.unflatten(part, d, c))
        self._state = state
        return self

    def compute(self, classifier: Classifier | None = None) -> Report:
        """The streaming subset of :func:`~spacl.geometry.geometry_report`'s entries."""
        if self._state is None or float(self._state.n) < 2:
            raise ValueError(f"GeometryAccumulator needs at least 2 samples, has seen {self.n}")
        if self.num_classes is None and classifier is not None:
            raise ValueError("classifier metrics need labels (num_classes)")
        out, _ = state_report(self._state, classifier=classifier)
        return out


def state_report(
    state: GeometryState,
    class_values: Tensor | None = None,
    classifier: Classifier | None = None,
) -> tuple[Report, ClassStatistics | None]:
    """Report entries from a state; ``class_values`` maps class indices to label values.

    Returns the entries and, for labelled states, the :class:`ClassStatistics` used.
    """
    n = round(float(state.n))
    d = state.mean.numel()
    keep = min(n, d)  # rank bound, as in the in-memory spectra
    gram = state.centred_gram()
    full = spectra_from_gram(gram, state.mean, n)
    spectra = FeatureSpectra(full.centred[:keep], full.uncentred[:keep], n)
    out: Report = {"n": float(n), "dim": float(d)}
    out["effective_rank_singular"] = entropy_rank(spectra.centred.sqrt())
    out["effective_rank_eigen"] = entropy_rank(spectra.centred)
    out["rankme"] = rankme_from_eigenvalues(spectra.uncentred)
    out.update(spectrum_entries(spectra))
    if not state.labelled:
        return out, None
    present = state.counts > 0
    indices = torch.arange(state.counts.numel(), device=state.counts.device)[present]
    classes = indices if class_values is None else class_values.to(indices.device)[indices]
    check_classes(classes, state.counts[present])
    means = state.class_means[present]
    s, v = between_basis(means)
    stats = ClassStatistics(
        classes,
        state.counts[present],
        means,
        state.within_sq[present],
        n,
        s,
        ((state.within @ v) * v).sum(0) / n,
    )
    out.update(metrics_from_statistics(stats))
    mean_entries = class_mean_spectrum_entries(stats.means)
    out.update(mean_entries)
    out["class_mean_effective_rank"] = entropy_rank(
        torch.tensor(mean_entries["class_mean_singular_values"], dtype=F64),
        "class-mean effective rank",
    )
    if classifier is not None:
        weight, _ = resolve_classifier(classifier, d, classes)
        out["nc3"] = nc3(stats, weight)
    return out, stats
