"""Representational similarity analysis (Kriegeskorte et al. 2008) on two representations."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Literal

import torch
from scipy.stats import rankdata
from torch import Tensor

from spacl._validation import check_choice
from spacl.geometry.inputs import (
    F64,
    as_matrix,
    check_same_rows,
    column_mean,
    nan_with_warning,
    row_slices,
)

__all__ = ["RDM_KINDS", "rdm", "rsa"]

RdmKind = Literal["cosine", "sqeuclidean", "euclidean"]
RDM_KINDS: tuple[str, ...] = ("cosine", "sqeuclidean", "euclidean")


def rdm(features: Any, kind: RdmKind = "cosine") -> Tensor:
    """Condensed representational dissimilarity matrix (upper triangle, row-major) in float64.

    ``cosine``: ``1 - <u, v> / (|u| |v|)``; ``sqeuclidean``: ``|u - v|^2``; ``euclidean``:
    ``|u - v|``, the same ordering as ``scipy.spatial.distance.pdist``.  (rsatoolbox's
    "euclidean" is squared Euclidean divided by the dimension: Pearson RSA on it equals
    ``sqeuclidean`` here, Spearman RSA is the same for all three Euclidean variants.)
    Memory O(N^2); :func:`rsa` with ``method="pearson"`` does not need it.
    RDMs as in Kriegeskorte, Mur & Bandettini (2008).

    Example:
        >>> import torch
        >>> from spacl.alignment import rdm
        >>> rdm(torch.eye(3))  # pairs (0, 1), (0, 2), (1, 2) of orthogonal rows
        tensor([1., 1., 1.], dtype=torch.float64)
        >>> [round(v, 4) for v in rdm(torch.eye(3), "sqeuclidean").tolist()]
        [2.0, 2.0, 2.0]
    """
    x = prepare_inputs(
        as_matrix(features, "features", min_rows=2), check_rdm_kind(kind), "features"
    )
    return torch.cat(list(rdm_blocks(x, kind)))


def rsa(
    X: Any,
    Y: Any,
    rdm: RdmKind = "cosine",
    method: Literal["pearson", "spearman"] = "pearson",
) -> float:
    """Correlation between the RDMs of ``X [N, dx]`` and ``Y [N, dy]`` over the N(N-1)/2 pairs.

    ``method="pearson"`` is computed in row blocks (memory O(N * block)) with float64 Chan
    merges of the block means and co-moments.  ``method="spearman"`` is the Pearson
    correlation of the ranks, with average ranks for ties (as ``scipy.stats.spearmanr``);
    it needs the whole condensed RDMs (O(N^2) memory).  A constant RDM gives NaN with a
    warning.  Zero rows are an error for the cosine RDM.  ``dx`` and ``dy`` may differ;
    the RDMs are computed in float64, so float32 and float64 inputs may be mixed.

    ``RSA(X, Y) = corr(a, b)``, ``a``, ``b`` the upper triangles of the RDMs of ``X`` and
    ``Y`` (Kriegeskorte, Mur & Bandettini 2008).

    Example:
        >>> import torch
        >>> from spacl.alignment import rsa
        >>> _ = torch.manual_seed(0)
        >>> X = torch.randn(30, 8)
        >>> Q, _ = torch.linalg.qr(torch.randn(8, 8))
        >>> round(rsa(X, 2.0 * X), 4)
        1.0
        >>> round(rsa(X, X @ Q, rdm="sqeuclidean", method="spearman"), 4)  # distances kept
        1.0
    """
    kind = check_rdm_kind(rdm)
    check_choice(method, "method", ("pearson", "spearman"))
    xt = as_matrix(X, "X", min_rows=3)
    yt = as_matrix(Y, "Y", min_rows=3)
    check_same_rows(xt, yt)
    x = prepare_inputs(xt, kind, "X")
    y = prepare_inputs(yt, kind, "Y")
    if method == "spearman":
        a = rankdata(torch.cat(list(rdm_blocks(x, kind))).cpu().numpy(), method="average")
        b = rankdata(torch.cat(list(rdm_blocks(y, kind))).cpu().numpy(), method="average")
        return _pearson_blocks(iter([(torch.from_numpy(a), torch.from_numpy(b))]))
    offset = 1.0 if kind == "cosine" else 0.0
    return _pearson_blocks(zip(rdm_blocks(x, kind), rdm_blocks(y, kind), strict=True), offset)


def check_rdm_kind(kind: str) -> str:
    check_choice(kind, "rdm", RDM_KINDS)
    return kind


def prepare_inputs(x: Tensor, kind: str, name: str) -> Tensor:
    """Float64 copy: unit rows for cosine, centred rows (exact translation) for Euclidean."""
    xd = x.to(F64)
    if kind == "cosine":
        norms = xd.norm(dim=1, keepdim=True)
        if bool((norms == 0).any()):
            bad = int((norms == 0).sum())
            raise ValueError(f"{name} has {bad} all-zero row(s): the cosine RDM is undefined")
        return xd / norms
    return xd - column_mean(x)


def rdm_blocks(x: Tensor, kind: str) -> Iterator[Tensor]:
    """Condensed RDM in consecutive pieces: rows i of a block against all j > i.

    Euclidean distances are computed from the differences (not ``|u|^2 + |v|^2 - 2<u,v>``),
    so equal distances stay exactly equal and Spearman's tie handling sees true ties.
    """
    n = x.shape[0]
    cols = torch.arange(n, device=x.device)
    for rows in row_slices(n, n):
        if kind == "cosine":
            block = 1.0 - x[rows] @ x.T
        else:
            block = torch.cdist(x[rows], x, compute_mode="donot_use_mm_for_euclid_dist")
            if kind == "sqeuclidean":
                block = block.square_()
        upper = cols[None, :] > torch.arange(rows.start, rows.stop, device=x.device)[:, None]
        yield block[upper]


def _pearson_blocks(pairs: Iterator[tuple[Tensor, Tensor]], offset: float = 0.0) -> float:
    """Pearson correlation of two long vectors given as aligned pieces (Chan merges).

    A vector whose standard deviation is within ``64 eps`` of its magnitude (plus
    ``offset``, the scale the values were computed at, 1 for ``1 - cosine``) is constant up
    to rounding: the correlation is then undefined (NaN with a warning).
    """
    n = 0.0
    mean_a = mean_b = 0.0
    m2a = m2b = cab = 0.0
    top_a = top_b = 0.0
    for a, b in pairs:
        nb = float(a.numel())
        if nb == 0:
            continue
        a64, b64 = a.to(F64), b.to(F64)
        top_a = max(top_a, float(a64.abs().max()))
        top_b = max(top_b, float(b64.abs().max()))
        ma, mb = float(a64.mean()), float(b64.mean())
        da, db = a64 - ma, b64 - mb
        sa, sb, sab = float(da @ da), float(db @ db), float(da @ db)
        total = n + nb
        delta_a, delta_b = ma - mean_a, mb - mean_b
        m2a += sa + delta_a * delta_a * n * nb / total
        m2b += sb + delta_b * delta_b * n * nb / total
        cab += sab + delta_a * delta_b * n * nb / total
        mean_a += delta_a * nb / total
        mean_b += delta_b * nb / total
        n = total
    noise = 64 * torch.finfo(F64).eps
    if not (
        math.sqrt(m2a / n) > noise * (top_a + offset)
        and math.sqrt(m2b / n) > noise * (top_b + offset)
    ):
        return nan_with_warning(
            "RSA is undefined: an RDM is constant over all pairs (up to rounding); returning NaN"
        )
    return cab / math.sqrt(m2a * m2b)
