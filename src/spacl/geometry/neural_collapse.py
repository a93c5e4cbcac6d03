"""Neural-collapse metrics (Papyan, Han & Donoho 2020; Galanti et al. 2022; NC/DC paper, SPEC §2).

Notation: class means ``mu_c``, global mean ``mu_G`` = mean of the class means (**Decision**,
SPEC §2; equals the sample mean for balanced classes), centred means ``M~`` (``C x d``, row
``c`` is ``mu_c - mu_G``), ``Sigma_W = 1/N sum_i (z_i - mu_{y_i})(z_i - mu_{y_i})^T`` and
``Sigma_B = 1/C M~^T M~``.

* ``nc1 = tr(Sigma_W Sigma_B^+) / C``.  With the thin SVD ``M~ = U S V^T`` (``C x d``, no
  ``d x d`` pseudo-inverse) ``Sigma_B^+ = V diag(C / s^2) V^T`` restricted to the top ``C - 1``
  singular pairs above ``max(C, d) * eps * s_max``, so ``nc1 = sum_k v_k^T Sigma_W v_k / s_k^2``.
  (The Papyan notebook omits the ``1/C``; some repositories divide by ``d``: both differ.)
* ``nc2_equinorm = std / mean`` of ``||mu_c - mu_G||`` (population std);
  ``nc2_equiangularity = mean_{c != c'} |cos(M~_c, M~_c') + 1/(C-1)|``;
  ``nc2_etf_deviation = || G/||G||_F - (I - 11^T/C)/sqrt(C-1) ||_F`` with ``G = M~ M~^T``.
* ``nc3 = || W/||W||_F - M~/||M~||_F ||_F^2`` (classifier rows of the observed classes);
  ``nc4`` = share of samples where the nearest class mean and the classifier disagree
  (scored in the features' own precision, see :func:`nc4`).
* ``cdnv = mean_{c < c'} (Var_c + Var_c') / (2 ||mu_c - mu_c'||^2)``, ``Var_c`` the mean squared
  distance of class ``c`` to its mean (Galanti et al. 2022).
* Uncentred metrics of the NC/DC paper on the raw means: ``nc_zero_sum = ||mean_c mu_c||``,
  ``nc_unit_norm = mean_c | ||mu_c|| - 1 |``, ``nc_equal_inner_product =
  mean_{c != c'} |cos(mu_c, mu_c') + 1/(C-1)|`` and ``nc_within_class_distance`` =
  ``1/N sum_i ||z_i - mu_{y_i}||^2`` (**Decision**: mean *squared* distance, i.e.
  ``tr(Sigma_W)``, so that it streams exactly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from spacl.geometry.inputs import (
    F64,
    as_labels,
    as_matrix,
    as_tensor,
    nan_with_warning,
    row_slices,
)

__all__ = [
    "ClassStatistics",
    "between_basis",
    "labelled_pass",
    "nc4",
    "neural_collapse",
    "resolve_classifier",
]

Classifier = Any  # Tensor / ndarray [K, d], (weight, bias) pair, or an nn.Linear


@dataclass
class ClassStatistics:
    """Float64 per-class summary of labelled features.

    ``classes`` are the observed label values (sorted), ``counts``/``means`` their sizes and
    means, ``within_sq[c] = sum_{i in c} ||z_i - mu_c||^2`` and ``n`` the number of samples.
    ``between_singular`` are the kept singular values ``s_k`` of ``M~`` (see
    :func:`between_basis`) and ``within_on_between[k] = v_k^T Sigma_W v_k`` for the matching
    right singular vectors.
    """

    classes: Tensor
    counts: Tensor
    means: Tensor
    within_sq: Tensor
    n: int
    between_singular: Tensor
    within_on_between: Tensor


def between_basis(means: Tensor) -> tuple[Tensor, Tensor]:
    """Top ``C - 1`` singular values ``s`` and right vectors ``V [d, r]`` of the centred means.

    Thin SVD of the ``C x d`` matrix ``M~``; singular values at or below
    ``max(C, d) * eps * s_max`` are dropped (the pseudo-inverse's usual cut-off).
    """
    c, d = means.shape
    _, s, vh = torch.linalg.svd(means - means.mean(0), full_matrices=False)
    s, vh = s[: c - 1], vh[: c - 1]
    keep = s > max(c, d) * torch.finfo(F64).eps * s[0] if s.numel() else s > 0
    return s[keep], vh[keep].T


def labelled_pass(features: Tensor, labels: Tensor) -> ClassStatistics:
    """Class statistics of in-memory features in two chunked float64 passes.

    Pass 1: class counts and means.  Pass 2: residuals ``r_i = z_i - mu_{y_i}`` (the
    within-class scatter is never formed as ``total - between``, which cancels
    catastrophically near collapse), their squared norms per class, and their projections
    on the between-class basis ``V`` (``N x (C-1)``: no ``d x d`` matrix), which is all NC1
    needs.  Memory O(C d).
    """
    n, d = features.shape
    classes, index = torch.unique(labels, sorted=True, return_inverse=True)
    index = index.to(features.device)
    counts = torch.bincount(index, minlength=classes.numel())
    check_classes(classes, counts)
    counts64 = counts.to(F64)
    sums = torch.zeros(classes.numel(), d, dtype=F64, device=features.device)
    for rows in row_slices(n, d):
        sums.index_add_(0, index[rows], features[rows].to(F64))
    means = sums / counts64[:, None]
    s, v = between_basis(means)
    within_sq = torch.zeros_like(counts64)
    projected = torch.zeros(s.numel(), dtype=F64, device=features.device)
    for rows in row_slices(n, d):
        residual = features[rows].to(F64) - means[index[rows]]
        within_sq.index_add_(0, index[rows], torch.einsum("ij,ij->i", residual, residual))
        if s.numel():
            p = residual @ v
            projected += (p * p).sum(0)
    return ClassStatistics(classes, counts64, means, within_sq, n, s, projected / n)


def nc4(features: Tensor, stats: ClassStatistics, weight: Tensor, bias: Tensor) -> float:
    """Share of samples whose nearest class mean and ``argmax(W z + b)`` disagree.

    **Decision**: the scores are computed in the features' own precision (float32 features
    give float32 scores, as the model's classifier computes them) on centred features:
    with ``z' = z - m``, ``mu'_c = mu_c - m`` (``m`` the mean of the class means) the nearest
    mean is ``argmax_c <z', mu'_c> - |mu'_c|^2 / 2`` and the classifier
    ``argmax_k <W_k, z'> + (W m + b)_k``, so no large offset enters the products.
    """
    dtype = features.dtype if features.dtype == F64 else torch.float32
    m = stats.means.mean(0)
    centred = stats.means - m
    targets = torch.cat([centred, weight]).to(dtype).T.contiguous()
    offsets = torch.cat([-0.5 * (centred * centred).sum(1), weight @ m + bias]).to(dtype)
    shift = m.to(dtype)
    classes = stats.classes.to(features.device)
    c = classes.numel()
    disagree = 0
    n = features.shape[0]
    for rows in row_slices(n, max(features.shape[1], targets.shape[1])):
        scores = torch.addmm(offsets, features[rows].to(dtype) - shift, targets)
        nearest = classes[scores[:, :c].argmax(1)]
        disagree += int((nearest != scores[:, c:].argmax(1)).sum())
    return disagree / n


def check_classes(classes: Tensor, counts: Tensor) -> None:
    """At least two classes, each with at least two samples, else ``ValueError``."""
    if classes.numel() < 2:
        raise ValueError(
            f"labels must contain at least 2 classes for neural-collapse metrics, "
            f"got {classes.numel()} ({classes.tolist()})"
        )
    single = classes[counts < 2]
    if single.numel():
        raise ValueError(
            f"every class needs at least 2 samples; class(es) {single.tolist()[:10]} have 1"
        )


def neural_collapse(
    features: Any, labels: Any, classifier: Classifier | None = None
) -> dict[str, float]:
    """All neural-collapse metrics of ``features [N, d]`` with integer ``labels [N]``.

    NC1-NC4 of Papyan, Han & Donoho (2020), CDNV of Galanti et al. (2022) and the uncentred
    metrics of the NC/DC paper, with ``mu_c`` the class means, ``M~`` the means centred at
    their mean and ``Sigma_W`` / ``Sigma_B`` the within / between-class covariances:

    * ``nc1 = tr(Sigma_W Sigma_B^+) / C``;
    * ``nc2_etf_deviation = || G/||G||_F - (I - 11^T/C)/sqrt(C-1) ||_F``, ``G = M~ M~^T``
      (0 for a simplex ETF), ``nc2_equinorm`` and ``nc2_equiangularity``;
    * ``nc3 = || W/||W||_F - M~/||M~||_F ||_F^2`` and ``nc4`` (share of samples where the
      nearest class mean and the classifier disagree), with a ``classifier``;
    * ``cdnv = mean_{c < c'} (Var_c + Var_c') / (2 ||mu_c - mu_c'||^2)``;
    * ``nc_zero_sum``, ``nc_unit_norm``, ``nc_equal_inner_product`` and
      ``nc_within_class_distance`` (the module docstring has every formula in full).

    ``classifier``: a linear classifier whose row ``k`` scores label ``k`` - a ``[K, d]``
    weight matrix, a ``(weight, bias)`` pair or an ``nn.Linear``; adds ``nc3`` and ``nc4``
    (labels must then lie in ``[0, K)``).  Requires at least 2 classes and 2 samples per
    class.  Computed in float64 (float32 features with a float64 classifier are fine).
    Returns plain floats.

    Example:
        >>> import torch
        >>> from spacl.geometry import neural_collapse
        >>> labels = torch.arange(3).repeat(4)
        >>> etf = torch.eye(3) - 1 / 3  # a simplex ETF: the centred standard basis
        >>> out = neural_collapse(etf[labels], labels, classifier=etf)
        >>> {k: round(out[k], 4) for k in ("nc1", "nc2_etf_deviation", "nc3", "nc4")}
        {'nc1': 0.0, 'nc2_etf_deviation': 0.0, 'nc3': 0.0, 'nc4': 0.0}
    """
    x = as_matrix(features, "features", min_rows=4)
    y = as_labels(labels, x.shape[0])
    resolved = None
    if classifier is not None:
        resolved = resolve_classifier(classifier, x.shape[1], torch.unique(y))
    stats = labelled_pass(x, y)
    out = metrics_from_statistics(stats)
    if resolved is not None:
        out["nc3"] = nc3(stats, resolved[0])
        out["nc4"] = nc4(x, stats, *resolved)
    return out


def metrics_from_statistics(stats: ClassStatistics) -> dict[str, float]:
    """NC1, NC2, CDNV and the uncentred metrics from :class:`ClassStatistics`."""
    c = stats.means.shape[0]
    global_mean = stats.means.mean(0)
    centred = stats.means - global_mean
    out = {"num_classes": float(c), "nc1": _nc1(stats)}
    out.update(_nc2(centred))
    out["cdnv"] = _cdnv(stats)
    out["nc_zero_sum"] = float(global_mean.norm())
    out["nc_unit_norm"] = float((stats.means.norm(dim=1) - 1.0).abs().mean())
    out["nc_equal_inner_product"] = _equiangularity(stats.means, "class means")
    out["nc_within_class_distance"] = float(stats.within_sq.sum() / stats.n)
    return out


def _nc1(stats: ClassStatistics) -> float:
    if stats.between_singular.numel() == 0:
        return nan_with_warning("NC1 is undefined: all class means coincide; returning NaN")
    s = stats.between_singular
    return float((stats.within_on_between / (s * s)).sum())


def _nc2(centred: Tensor) -> dict[str, float]:
    c = centred.shape[0]
    norms = centred.norm(dim=1)
    mean_norm = float(norms.mean())
    if mean_norm == 0:
        nan = nan_with_warning("NC2 is undefined: all class means coincide; returning NaN")
        return {"nc2_equinorm": nan, "nc2_equiangularity": nan, "nc2_etf_deviation": nan}
    gram = centred @ centred.T
    target = (torch.eye(c, dtype=F64, device=gram.device) - 1.0 / c) / math.sqrt(c - 1)
    return {
        "nc2_equinorm": float(norms.std(correction=0)) / mean_norm,
        "nc2_equiangularity": _equiangularity(centred, "centred class means"),
        "nc2_etf_deviation": float((gram / gram.norm() - target).norm()),
    }


def _equiangularity(vectors: Tensor, what: str) -> float:
    c = vectors.shape[0]
    norms = vectors.norm(dim=1)
    if bool((norms == 0).any()):
        return nan_with_warning(f"cosines of {what} are undefined (a zero vector); returning NaN")
    unit = vectors / norms[:, None]
    cos = unit @ unit.T
    off = ~torch.eye(c, dtype=torch.bool, device=cos.device)
    return float((cos[off] + 1.0 / (c - 1)).abs().mean())


def _cdnv(stats: ClassStatistics) -> float:
    c, d = stats.means.shape
    var = stats.within_sq / stats.counts
    total = 0.0
    zero = False
    # exact pairwise differences, a block of rows at a time (C x C x d would not fit)
    for rows in row_slices(c, c * d):
        diff = stats.means[rows, None, :] - stats.means[None, :, :]
        dist2 = (diff * diff).sum(-1)
        upper = (
            torch.arange(c, device=dist2.device)[None, :]
            > torch.arange(rows.start, rows.stop, device=dist2.device)[:, None]
        )
        if bool((dist2[upper] == 0).any()):
            zero = True
            break
        ratio = (var[rows, None] + var[None, :]) / (2.0 * dist2)
        total += float(ratio[upper].sum())
    if zero:
        return nan_with_warning("CDNV is undefined: two class means coincide; returning NaN")
    return total / (c * (c - 1) / 2)


def resolve_classifier(classifier: Classifier, d: int, classes: Tensor) -> tuple[Tensor, Tensor]:
    """Return float64 ``(weight [K, d], bias [K])`` and check that every label indexes a row."""
    bias: Any = None
    if isinstance(classifier, torch.nn.Linear):
        weight, bias = classifier.weight, classifier.bias
    elif isinstance(classifier, tuple):
        if len(classifier) != 2:
            raise ValueError(
                f"classifier tuple must be (weight, bias), got {len(classifier)} items"
            )
        weight, bias = classifier
    else:
        weight = classifier
    w = as_tensor(weight, "classifier weight", 2).to(F64)
    if w.shape[1] != d:
        raise ValueError(f"classifier weight has shape {tuple(w.shape)}; expected [K, {d}]")
    b = (
        torch.zeros(w.shape[0], dtype=F64, device=w.device)
        if bias is None
        else as_tensor(bias, "classifier bias", 1).to(F64)
    )
    if b.shape[0] != w.shape[0]:
        raise ValueError(f"classifier bias has {b.shape[0]} entries for {w.shape[0]} rows")
    if int(classes.min()) < 0 or int(classes.max()) >= w.shape[0]:
        raise ValueError(
            f"with a classifier, labels must lie in [0, {w.shape[0]}), got "
            f"[{int(classes.min())}, {int(classes.max())}]"
        )
    return w, b


def nc3(stats: ClassStatistics, weight: Tensor) -> float:
    """``|| W_obs/||W_obs||_F - M~/||M~||_F ||_F^2`` over the observed classes' rows."""
    w = weight[stats.classes.to(weight.device)]
    centred = stats.means - stats.means.mean(0)
    wn, mn = float(w.norm()), float(centred.norm())
    if wn == 0 or mn == 0:
        return nan_with_warning("NC3 is undefined: zero classifier or coincident means; NaN")
    return float(((w / wn - centred / mn) ** 2).sum())
