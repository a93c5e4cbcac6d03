"""The CL-vs-NSCL alignment bound (Theorem 1 and Corollaries 1-2 of OpenReview JkitQScjuL, SPEC §3).

Theorem 1 (shared randomness, ``T`` steps of sizes ``eta_t``, batch ``B``, temperature
``tau``, largest class prior ``pi_max``, failure probability ``delta``): with probability at
least ``1 - delta``

    ||Sigma_T^CL - Sigma_T^NSCL||_F <= exp(S / (2 tau^2 B)) * S / (tau sqrt(B)) * Delta,
    S = sum_t eta_t,
    Delta = 2 e^{2/tau} (pi_max + eps) / (1 - pi_max - eps),   eps = sqrt(log(T B / delta) / (2B)).

Corollary 1: ``CKA_T >= (1 - rho_T) / (1 + rho_T)`` with
``rho_T = ||K^CL - K^NSCL||_F / ||K^CL||_F``
(``K = H Sigma H``); centring is a contraction, so ``rho_T <= drift / ||K^CL||_F``.
Corollary 2: ``RSA_T >= (1 - r_T) / (1 + r_T)`` with ``r_T = ||b - a||_2 / (sqrt(M) sigma_a)``
(``a, b`` the two RDMs' upper triangles, ``M = N(N-1)/2``, ``sigma_a`` the population standard
deviation of ``a``).  **Decision**: the RDM is ``1 - Sigma`` and the strict upper triangle holds
half of the symmetric off-diagonal mass, so ``||b - a||_2 <= drift / sqrt(2)``.

The bound is vacuous when ``pi_max + eps >= 1`` (``Delta`` is then reported as ``inf``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from spacl._validation import check_in_range, check_positive
from spacl.alignment._moments import PairMoments, hsic_terms
from spacl.alignment.rsa import RdmKind, check_rdm_kind, prepare_inputs, rdm_blocks
from spacl.geometry.inputs import F64, as_matrix, check_same_rows, nan_with_warning

__all__ = [
    "alignment_bound",
    "cka_lower_bound",
    "kernel_drift",
    "rdm_drift",
    "rsa_lower_bound",
]


def alignment_bound(
    tau: float,
    batch_size: int,
    step_sizes: float | Sequence[float],
    pi_max: float,
    delta: float = 0.05,
    *,
    steps: int | None = None,
    kernel_norm: float | None = None,
    rdm_scale: float | None = None,
) -> dict[str, float]:
    """Evaluate Theorem 1 and, given the normalisers, the CKA / RSA lower bounds.

    ``||Sigma_T^CL - Sigma_T^NSCL||_F <= exp(S / (2 tau^2 B)) S / (tau sqrt(B)) Delta``,
    ``S = sum_t eta_t``, ``Delta = 2 e^{2/tau} (pi_max + eps) / (1 - pi_max - eps)``,
    ``eps = sqrt(log(T B / delta) / (2B))`` (Theorem 1 of OpenReview JkitQScjuL; module
    docstring).

    Args:
        tau: temperature ``> 0``.
        batch_size: ``B >= 1``.
        step_sizes: the sequence ``eta_1..eta_T``, or one constant step size (then ``steps``).
        pi_max: largest class prior, in ``(0, 1)``.
        delta: failure probability, in ``(0, 1)``.
        steps: ``T`` when ``step_sizes`` is a constant.
        kernel_norm: ``||K_T^CL||_F`` (e.g. ``||Z~^T Z~||_F`` of the CL features); adds
            ``rho_bound`` and ``cka_lower_bound``.
        rdm_scale: ``sqrt(M) * sigma_a`` = the norm of the centred CL RDM vector; adds
            ``r_bound`` and ``rsa_lower_bound``.

    Returns:
        ``{"epsilon", "Delta", "total_step", "drift_bound", "vacuous"}`` (``vacuous`` is 1.0
        when ``pi_max + epsilon >= 1``) plus the optional entries above.

    Example:
        >>> from spacl.alignment import alignment_bound
        >>> out = alignment_bound(1.0, 4096, 0.01, pi_max=0.1, steps=10, kernel_norm=100.0)
        >>> out["vacuous"], round(out["total_step"], 4), round(out["drift_bound"], 4)
        (0.0, 0.1, 0.0038)
        >>> round(out["cka_lower_bound"], 4)
        0.9999
    """
    tau = check_positive(tau, "tau")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    pi_max = check_in_range(pi_max, "pi_max", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    delta = check_in_range(delta, "delta", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    etas = _step_sizes(step_sizes, steps)
    total = math.fsum(etas)
    t_steps = len(etas)
    b = float(batch_size)
    eps = math.sqrt(math.log(t_steps * b / delta) / (2.0 * b))
    vacuous = pi_max + eps >= 1.0
    big_delta = (
        math.inf if vacuous else _safe_exp(2.0 / tau) * 2.0 * (pi_max + eps) / (1.0 - pi_max - eps)
    )
    growth = _safe_exp(total / (2.0 * tau * tau * b))
    drift = _product(growth, total / (tau * math.sqrt(b)), big_delta)
    out = {
        "epsilon": eps,
        "Delta": big_delta,
        "total_step": total,
        "drift_bound": drift,
        "vacuous": 1.0 if vacuous else 0.0,
    }
    if kernel_norm is not None:
        rho = drift / check_positive(kernel_norm, "kernel_norm")
        out["rho_bound"] = rho
        out["cka_lower_bound"] = cka_lower_bound(rho)
    if rdm_scale is not None:
        r = drift / (math.sqrt(2.0) * check_positive(rdm_scale, "rdm_scale"))
        out["r_bound"] = r
        out["rsa_lower_bound"] = rsa_lower_bound(r)
    return out


def cka_lower_bound(rho: float) -> float:
    """Corollary 1: ``CKA_T >= (1 - rho) / (1 + rho)`` (``-1`` in the limit ``rho = inf``).

    ``rho`` bounds ``||K^CL - K^NSCL||_F / ||K^CL||_F`` (OpenReview JkitQScjuL; e.g. from
    :func:`kernel_drift` or :func:`alignment_bound`); ``rho`` must be a number ``>= 0``.

    Example:
        >>> from spacl.alignment import cka_lower_bound
        >>> cka_lower_bound(0.0), round(cka_lower_bound(1 / 3), 4), cka_lower_bound(float("inf"))
        (1.0, 0.5, -1.0)
    """
    return _ratio_bound(rho, "rho")


def rsa_lower_bound(r: float) -> float:
    """Corollary 2: ``RSA_T >= (1 - r) / (1 + r)`` (``-1`` in the limit ``r = inf``).

    ``r = ||b - a||_2 / (sqrt(M) sigma_a)`` for the two RDMs (OpenReview JkitQScjuL; e.g.
    from :func:`rdm_drift`); ``r`` must be a number ``>= 0``.

    Example:
        >>> from spacl.alignment import rsa_lower_bound
        >>> rsa_lower_bound(0.0), round(rsa_lower_bound(1 / 3), 4)
        (1.0, 0.5)
    """
    return _ratio_bound(r, "r")


def kernel_drift(Z_a: Any, Z_b: Any) -> float:
    """Measured ``rho = ||H(Z_a Z_a^T - Z_b Z_b^T)H||_F / ||H Z_a Z_a^T H||_F`` in feature space.

    ``||K_a - K_b||_F^2 = ||A^T A||^2 + ||B^T B||^2 - 2 ||A^T B||^2`` on centred features
    ``A, B`` (float64); no ``N x N`` matrix.  Corollary 1 then says
    ``linear_cka(Z_a, Z_b) >= cka_lower_bound(rho)``.  ``Z_a`` and ``Z_b`` need the same
    number of rows; their widths and float dtypes may differ (float64 throughout).

    Example:
        >>> import torch
        >>> from spacl.alignment import cka_lower_bound, kernel_drift, linear_cka
        >>> _ = torch.manual_seed(0)
        >>> Z_a = torch.randn(50, 8)
        >>> Z_b = Z_a + 0.3 * torch.randn(50, 8)
        >>> kernel_drift(Z_a, Z_a)
        0.0
        >>> linear_cka(Z_a, Z_b) >= cka_lower_bound(kernel_drift(Z_a, Z_b))  # Corollary 1
        True
    """
    a = as_matrix(Z_a, "Z_a", min_rows=2)
    b = as_matrix(Z_b, "Z_b", min_rows=2)
    check_same_rows(a, b, "Z_a", "Z_b")
    terms = hsic_terms(PairMoments.from_batch(a, b, ("Z_a", "Z_b"), higher=False))
    if terms.biased_xx <= 0:
        return nan_with_warning("kernel_drift is undefined: Z_a is constant; returning NaN")
    # rounding can make a zero difference slightly negative
    sq = max(terms.biased_xx + terms.biased_yy - 2.0 * terms.biased_xy, 0.0)
    return math.sqrt(sq / terms.biased_xx)


def rdm_drift(Z_a: Any, Z_b: Any, rdm: RdmKind = "cosine") -> float:
    """Measured ``r = ||b - a||_2 / (sqrt(M) sigma_a)`` for the RDMs ``a`` of Z_a and ``b`` of Z_b.

    Computed in row blocks (O(N^2 d) time, O(N * block) memory).  Corollary 2 then says
    ``rsa(Z_a, Z_b) >= rsa_lower_bound(r)`` (Pearson RSA on the same ``rdm``).

    Example:
        >>> import torch
        >>> from spacl.alignment import rdm_drift, rsa, rsa_lower_bound
        >>> _ = torch.manual_seed(0)
        >>> Z_a = torch.randn(30, 8)
        >>> Z_b = Z_a + 0.3 * torch.randn(30, 8)
        >>> rdm_drift(Z_a, Z_a)
        0.0
        >>> rsa(Z_a, Z_b) >= rsa_lower_bound(rdm_drift(Z_a, Z_b))  # Corollary 2
        True
    """
    kind = check_rdm_kind(rdm)
    a = as_matrix(Z_a, "Z_a", min_rows=3)
    b = as_matrix(Z_b, "Z_b", min_rows=3)
    check_same_rows(a, b, "Z_a", "Z_b")
    xa, xb = prepare_inputs(a, kind, "Z_a"), prepare_inputs(b, kind, "Z_b")
    n = 0.0
    mean = m2 = diff = 0.0
    for ra, rb in zip(rdm_blocks(xa, kind), rdm_blocks(xb, kind), strict=True):
        nb = float(ra.numel())
        if nb == 0:
            continue
        ra64, rb64 = ra.to(F64), rb.to(F64)
        diff += float(((rb64 - ra64) ** 2).sum())
        mb = float(ra64.mean())
        total = n + nb
        d = mb - mean
        m2 += float(((ra64 - mb) ** 2).sum()) + d * d * n * nb / total
        mean += d * nb / total
        n = total
    if m2 <= 0:
        return nan_with_warning("rdm_drift is undefined: the RDM of Z_a is constant; returning NaN")
    return math.sqrt(diff / m2)


def _step_sizes(step_sizes: float | Sequence[float], steps: int | None) -> list[float]:
    if isinstance(step_sizes, bool):
        raise TypeError("step_sizes must be a number or a sequence of numbers, got a bool")
    if isinstance(step_sizes, (int, float)):
        if steps is None or isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(
                f"steps must be a positive int when step_sizes is a constant, got {steps!r}"
            )
        etas = [check_positive(float(step_sizes), "step_sizes")] * steps
    else:
        etas = [float(e) for e in step_sizes]
        if steps is not None and steps != len(etas):
            raise ValueError(f"steps={steps} disagrees with len(step_sizes)={len(etas)}")
        if not etas:
            raise ValueError("step_sizes must hold at least one step size")
        for i, e in enumerate(etas):
            check_positive(e, f"step_sizes[{i}]")
    return etas


def _safe_exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _product(*factors: float) -> float:
    out = 1.0
    for f in factors:
        out *= f
    return out


def _ratio_bound(value: float, name: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    if math.isinf(value):
        return -1.0
    return (1.0 - value) / (1.0 + value)
