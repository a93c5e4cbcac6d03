"""Dimensional collapse: spectra, effective rank and RankMe.

All spectra come from one float64 Gram matrix (``d x d`` when ``d <= N``, else ``N x N``)
accumulated chunk by chunk with Chan merges (:mod:`spacl.geometry._state`), then ``eigh``.
Singular values are ``sqrt`` of its eigenvalues.

**Rank-deficient input.**  An eigenvalue that is zero in exact arithmetic (``N < d``
leaves ``d - N + 1`` of them in the centred ``d x d`` Gram and one in the centred
``N x N`` Gram; low-rank features leave more) comes back from the Gram and ``eigh`` as
rounding noise of either sign, of size about ``eps * lambda_max`` times a small multiple
of the matrix size: forming ``X^T X`` adds an error of at most about
``N * eps * ||X||_2^2`` (Higham, *Accuracy and Stability of Numerical Algorithms*,
section 3.5) and a backward-stable symmetric eigensolver adds ``O(m * eps * ||G||_2)``
for an ``m x m`` Gram.  Its square root, about ``1e-8 * sigma_max``, would enter every
entropy and make the effective rank depend on the BLAS kernel.  So every eigenvalue at or
below

    tol = max(N, d) * eps_float64 * lambda_max

is set to exactly 0 (:func:`clip_rounding`): the numpy ``matrix_rank`` convention applied
to the Gram.  Singular values below ``sqrt(tol) * sigma_max`` (about ``1.5e-7 *
sigma_max`` at ``max(N, d) = 100``) cannot be told from rounding by any Gram-based
method; a spectrum that holds them is reported as rank-deficient there.  Every consumer
(``spectrum``, ``effective_rank``, ``rankme``, ``geometry_report``, the streaming
``GeometryAccumulator``) takes its eigenvalues from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from spacl._validation import check_choice, check_positive
from spacl.geometry._state import batch_state
from spacl.geometry.inputs import (
    F64,
    as_labels,
    as_matrix,
    entropy_of_distribution,
    nan_with_warning,
    row_slices,
)

__all__ = ["effective_rank", "entropy_rank", "log_ratio", "rankme", "spectrum"]

SpectrumKind = Literal["singular", "eigen"]


@dataclass(frozen=True)
class FeatureSpectra:
    """Descending float64 eigenvalues of the centred and the uncentred Gram matrices."""

    centred: Tensor
    uncentred: Tensor
    n: int


def feature_spectra(x: Tensor) -> FeatureSpectra:
    """Eigenvalues (descending, length ``min(N, d)``) of ``X~^T X~`` and ``X^T X``, one pass."""
    n, d = x.shape
    if d <= n:
        state = batch_state(x, None, 0)
        return spectra_from_gram(state.scatter, state.mean, n)
    xd = x.to(F64)  # N < d: the N x N Gram is the smaller one
    xc = xd - xd.mean(0)
    return FeatureSpectra(_eigvals_desc(xc @ xc.T, d), _eigvals_desc(xd @ xd.T, d), n)


def spectra_from_gram(centred_gram: Tensor, mean: Tensor, n: int) -> FeatureSpectra:
    """Spectra from the centred Gram ``X~^T X~`` and the mean: ``X^T X = X~^T X~ + n m m^T``."""
    uncentred = centred_gram + n * torch.outer(mean, mean)
    return FeatureSpectra(_eigvals_desc(centred_gram, n), _eigvals_desc(uncentred, n), n)


def clip_rounding(values: Tensor, summed: int, size: int) -> Tensor:
    """Set the rounding noise of a PSD Gram's eigenvalues to exactly 0.

    ``values`` are the eigenvalues of an ``size x size`` Gram built by summing ``summed``
    outer products (any order).  Every value ``<= max(summed, size) * eps * max(values)``
    (``eps`` of ``values``' dtype) is indistinguishable from an exact zero (module
    docstring) and becomes ``0``; negative values, impossible for a PSD Gram, too.
    """
    top = values.max() if values.numel() else values.new_zeros(())
    tol = max(summed, size) * torch.finfo(values.dtype).eps * top.clamp_min(0.0)
    return torch.where(values > tol, values, torch.zeros_like(values))


def _eigvals_desc(gram: Tensor, summed: int) -> Tensor:
    values = torch.linalg.eigvalsh(gram).flip(0)
    return clip_rounding(values, summed, gram.shape[0])


def log_ratio(values: Tensor) -> list[float]:
    """``log(v_k / v_max)`` of a descending non-negative spectrum (``-inf`` for exact zeros)."""
    top = float(values[0]) if values.numel() else 0.0
    if top <= 0:
        nan_with_warning("log spectrum is undefined for an all-zero spectrum; returning NaN")
        return [math.nan] * values.numel()
    return (values / top).log().tolist()


def entropy_rank(values: Tensor, what: str = "effective rank") -> float:
    """``exp(H(p))`` with ``p = values / sum(values)`` (Roy & Vetterli 2007)."""
    total = float(values.sum())
    if total <= 0:
        return nan_with_warning(f"{what} is undefined for an all-zero spectrum; returning NaN")
    return math.exp(entropy_of_distribution(values / total))


def spectrum(features: Any, labels: Any = None) -> dict[str, list[float]]:
    """Singular-value spectra of the centred embeddings and, with labels, of the class means.

    Returns (descending lists of length ``min(N - 1, d)``):

    * ``singular_values`` - of the centred feature matrix ``Z~ [N, d]``;
    * ``covariance_eigenvalues`` - of ``Sigma = Z~^T Z~ / N`` (= its singular values);
    * ``log_spectrum`` - ``log(sigma_k / sigma_max)`` of the covariance's singular values,
      the dimensional-collapse plot of Jing et al. (2022) (``-inf`` for exact zeros);
    * with ``labels``: ``class_mean_singular_values`` (the top ``C - 1`` of ``M~``, the
      centred class means),
      ``class_mean_covariance_eigenvalues`` (``M~^T M~ / C``) and ``class_mean_log_spectrum``.

    Example:
        >>> import torch
        >>> from spacl.geometry import spectrum
        >>> x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
        >>> out = spectrum(x)
        >>> [round(v, 4) for v in out["singular_values"]]
        [2.8284, 1.4142]
        >>> [round(v, 4) for v in out["covariance_eigenvalues"]]  # sigma^2 / N
        [2.0, 0.5]
    """
    x = as_matrix(features, "features", min_rows=2)
    spectra = feature_spectra(x)
    out = spectrum_entries(spectra)
    if labels is not None:
        y = as_labels(labels, x.shape[0])
        classes, index = torch.unique(y, return_inverse=True)
        if classes.numel() < 2:
            raise ValueError(f"labels must contain at least 2 classes, got {classes.tolist()}")
        counts = torch.bincount(index).to(F64)
        means = torch.zeros(classes.numel(), x.shape[1], dtype=F64, device=x.device)
        index = index.to(x.device)
        for rows in row_slices(x.shape[0], x.shape[1]):
            means.index_add_(0, index[rows], x[rows].to(F64))
        means /= counts.to(x.device)[:, None]
        out.update(class_mean_spectrum_entries(means))
    return out


def spectrum_entries(spectra: FeatureSpectra) -> dict[str, list[float]]:
    """The feature-spectrum entries of :func:`spectrum` (the top ``min(N - 1, d)`` values)."""
    # centred features have rank <= N - 1: drop the structural zero when N <= d
    centred = spectra.centred[: spectra.n - 1]
    cov = centred / spectra.n
    return {
        "singular_values": centred.sqrt().tolist(),
        "covariance_eigenvalues": cov.tolist(),
        "log_spectrum": log_ratio(cov),
    }


def class_mean_spectrum_entries(means: Tensor) -> dict[str, list[float]]:
    """The class-mean entries of :func:`spectrum` from float64 class means ``[C, d]``."""
    centred = means - means.mean(0)
    # the centred means have rank <= C - 1: the last singular value is structurally zero
    s = torch.linalg.svdvals(centred)[: means.shape[0] - 1]
    cov = s * s / means.shape[0]
    return {
        "class_mean_singular_values": s.tolist(),
        "class_mean_covariance_eigenvalues": cov.tolist(),
        "class_mean_log_spectrum": log_ratio(cov),
    }


def effective_rank(
    features: Any, spectrum: SpectrumKind = "singular", *, center: bool = True
) -> float:
    """Effective rank ``exp(entropy(p))`` (Roy & Vetterli 2007) with an explicit spectrum.

    ``spectrum="singular"``: ``p = sigma / sum(sigma)`` over the singular values of the
    (centred, by default) features - Roy & Vetterli's definition.  ``spectrum="eigen"``:
    ``p = sigma^2 / sum(sigma^2)`` over the covariance eigenvalues.  The two (and the
    participation ratio) differ by up to 2-3x on real embeddings; say which you report.
    An isotropic Gaussian in ``d`` dimensions gives close to ``d`` for both.

    Example:
        >>> import torch
        >>> from spacl.geometry import effective_rank
        >>> round(effective_rank(torch.eye(3)), 4)  # centred: two equal singular values
        2.0
        >>> round(effective_rank(torch.eye(3), center=False), 4)
        3.0
        >>> round(effective_rank(torch.eye(3), "eigen"), 4)
        2.0
    """
    check_choice(spectrum, "spectrum", ("singular", "eigen"))
    x = as_matrix(features, "features", min_rows=2)
    spectra = feature_spectra(x)
    eig = spectra.centred if center else spectra.uncentred
    return entropy_rank(eig.sqrt() if spectrum == "singular" else eig)


def rankme(features: Any, eps: float = 1e-7) -> float:
    """RankMe (Garrido et al. 2023): ``exp(-sum p_k log p_k)``, ``p_k = sigma_k/||sigma||_1 + eps``.

    On the singular values of the *uncentred* embedding matrix, as in the paper, with the
    paper's ``eps = 1e-7`` (which makes it slightly differ from :func:`effective_rank`).
    ``eps`` must be a finite number ``> 0`` (``p_k log p_k`` is undefined for ``p_k <= 0``).

    Example:
        >>> import torch
        >>> from spacl.geometry import rankme
        >>> round(rankme(torch.eye(4)), 4)  # four equal singular values
        4.0
        >>> round(rankme(torch.ones(5, 3)), 4)  # rank one
        1.0
    """
    eps = check_positive(eps, "eps")
    x = as_matrix(features, "features", min_rows=1)
    return rankme_from_eigenvalues(feature_spectra(x).uncentred, eps)


def rankme_from_eigenvalues(eigenvalues: Tensor, eps: float = 1e-7) -> float:
    """RankMe from the descending eigenvalues of ``Z^T Z`` (squared singular values)."""
    s = eigenvalues.sqrt()
    total = float(s.sum())
    if total <= 0:
        return nan_with_warning("RankMe is undefined for all-zero embeddings; returning NaN")
    p = s / total + eps
    return math.exp(float(-(p * p.log()).sum()))
