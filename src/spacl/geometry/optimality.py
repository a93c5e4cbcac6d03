"""SPACL's optimality theory as diagnostics (SPEC §1.1): Theorem 2.1, Corollary 2.2, Lemma 2.4.

Setting: one anchor ``x`` on the unit sphere, positives ``p_j``, negatives ``n_j`` and the
per-anchor InfoNCE term ``L(x) = log(s^-/s^+ + 1)``, ``s^+ = sum_j exp(<x, p_j>/tau)``,
``s^- = sum_j exp(<x, n_j>/tau)``.

Every function accepts one anchor (``x``/``p`` of shape ``[d]``, negatives ``[K, d]``) and
returns floats/bools, or a batch (``[B, d]``, negatives ``[K, d]`` shared or ``[B, K, d]``)
and returns lists plus the share of anchors that satisfy the property.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch
from scipy.optimize import linprog
from torch import Tensor

from spacl._validation import check_choice, check_in_range, check_positive
from spacl.geometry.inputs import F64, as_tensor

__all__ = ["collapse_condition", "gradient_norm", "non_collapse_certificate"]


def _batched(
    anchor: Any, anchor_name: str, others: list[tuple[Any, str, bool]]
) -> tuple[bool, Tensor, list[Tensor]]:
    """Validate and broadcast to ``[B, d]`` / ``[B, K, d]`` float64; report single or batch.

    Errors report the shapes the caller passed (never the broadcast ones).  Every input is
    converted to float64, so float32 and float64 arguments may be mixed.
    """
    a = as_tensor(anchor, anchor_name, (1, 2)).to(F64)
    anchor_shape = tuple(a.shape)
    single = a.ndim == 1
    a = a[None] if single else a
    b, d = a.shape
    out = []
    for value, name, is_set in others:
        t = as_tensor(value, name, ((2, 3) if is_set else (1, 2))).to(F64).to(a.device)
        given = tuple(t.shape)
        if is_set:
            if t.ndim == 2:
                t = t[None].expand(b, *t.shape)
            if t.shape[0] != b or t.shape[2] != d or t.shape[1] < 1:
                want = f"[K, {d}]" if single else f"[K, {d}] or [{b}, K, {d}]"
                raise ValueError(
                    f"{name} must have shape {want} with K >= 1 for {anchor_name} of shape "
                    f"{anchor_shape}, got {given}"
                )
        else:
            t = t[None] if t.ndim == 1 else t
            if t.shape != (b, d):
                raise ValueError(
                    f"{name} must have the shape of {anchor_name}, {anchor_shape}, got {given}"
                )
        out.append(t)
    return single, a, out


def collapse_condition(
    x: Any,
    p: Any,
    negatives: Any,
    *,
    temperature: float = 1.0,
    tol: float = 1e-6,
) -> dict[str, Any]:
    """Theorem 2.1 (one positive ``p``): ``x = p`` is optimal iff ``r = sum_j w_j n_j = C p``.

    ``w_j = softmax_j(<n_j, p> / temperature)`` (the theorem has ``temperature = 1``).  We
    report ``r``'s component orthogonal to ``p`` (``residual``; ``relative_residual`` divides
    by ``||r||``), the coefficient ``C = <r, p> / ||p||^2`` and ``condition`` =
    ``relative_residual <= tol``.  Derivation: on the sphere the gradient of ``s^-/s^+`` at
    ``x = p`` is ``(s^-/s^+)(r - p)/tau``, whose tangent part vanishes exactly when ``r`` is
    parallel to ``p``.  **Decision**: ``r = 0`` (so ``C = 0``) counts as parallel, since
    ``x = p`` is then stationary too; check ``coefficient`` to tell the cases apart.
    ``collapsed`` says whether the given anchor already equals the positive
    (``||x - p|| <= tol * max(1, ||p||)``).  ``tol`` must be a finite number ``>= 0``.

    Example:
        >>> import torch
        >>> from spacl.geometry import collapse_condition
        >>> p = torch.tensor([0.0, 0.0, 1.0])
        >>> out = collapse_condition(p, p, -p[None])  # r = -p is parallel to p
        >>> out["condition"], out["coefficient"], out["collapsed"]
        (True, -1.0, True)
        >>> collapse_condition(p, p, torch.tensor([[1.0, 0.0, 0.0]]))["condition"]
        False
    """
    temperature = check_positive(temperature, "temperature")
    tol = check_in_range(tol, "tol", 0.0, math.inf, high_inclusive=False)
    single, xs, (ps, ns) = _batched(x, "x", [(p, "p", False), (negatives, "negatives", True)])
    w = torch.softmax((ns @ ps[:, :, None]).squeeze(-1) / temperature, dim=1)  # [B, K]
    r = (w[:, :, None] * ns).sum(1)  # [B, d]
    p_sq = (ps * ps).sum(1)
    if bool((p_sq == 0).any()):
        raise ValueError("p must be non-zero")
    coef = (r * ps).sum(1) / p_sq
    residual = (r - coef[:, None] * ps).norm(dim=1)
    r_norm = r.norm(dim=1)
    relative = torch.where(
        r_norm > 0, residual / r_norm.clamp_min(1e-300), torch.zeros_like(r_norm)
    )
    distance = (xs - ps).norm(dim=1)
    result = {
        "condition": (relative <= tol).tolist(),
        "coefficient": coef.tolist(),
        "residual": residual.tolist(),
        "relative_residual": relative.tolist(),
        "collapsed": (distance <= tol * p_sq.sqrt().clamp_min(1.0)).tolist(),
        "distance_to_positive": distance.tolist(),
    }
    return _finish(result, single, ("condition", "collapsed"))


def non_collapse_certificate(p: Any, negatives: Any, *, tol: float = 1e-9) -> dict[str, Any]:
    """Corollary 2.2: if no non-zero multiple of ``p`` lies in ``conv{n_j}``, then ``x != p``.

    Checked as two linear programs (scipy HiGHS) over ``(lambda, c)``:
    ``max / min c`` subject to ``sum_j lambda_j n_j = c p``, ``lambda >= 0``, ``sum lambda = 1``
    (inputs rescaled to unit size first).  Infeasible: the line through ``p`` misses the
    hull and non-collapse is ``certified``.  Feasible with ``c_max <= tol`` and
    ``c_min >= -tol``: only ``0 * p`` is in the hull, also certified as the corollary is stated
    (``zero_in_hull`` flags this case, where ``x = p`` is still a stationary point - see
    :func:`collapse_condition`).  Otherwise a non-zero multiple ``c p`` is in the hull and
    collapse is not excluded.  Returns ``certified``, ``feasible``, ``c_max``, ``c_min``
    (``None`` when infeasible), ``zero_in_hull`` and a ``reason``; a batch adds
    ``share_certified``.  (One LP pair per anchor: scipy solves one problem at a time.)

    Example:
        >>> import torch
        >>> from spacl.geometry import non_collapse_certificate
        >>> p = torch.tensor([0.0, 0.0, 1.0])
        >>> non_collapse_certificate(p, torch.tensor([[1.0, 0.0, 0.0]]))["certified"]
        True
        >>> out = non_collapse_certificate(p, -p[None])  # -p itself is in the hull
        >>> out["certified"], round(out["c_max"], 4)
        (False, -1.0)
    """
    tol = check_positive(tol, "tol")
    single, ps, (ns,) = _batched(p, "p", [(negatives, "negatives", True)])
    p_norm = ps.norm(dim=1)
    if bool((p_norm == 0).any()):
        raise ValueError("p must be non-zero")
    scale = ns.norm(dim=2).amax(1).clamp_min(1e-300)
    p_unit = (ps / p_norm[:, None]).cpu().numpy()
    n_scaled = (ns / scale[:, None, None]).cpu().numpy()
    ratio = (scale / p_norm).cpu().numpy()
    keys = ("certified", "feasible", "c_max", "c_min", "zero_in_hull", "reason")
    result: dict[str, Any] = {k: [] for k in keys}
    for i in range(ps.shape[0]):
        entry = _certificate_lp(p_unit[i], n_scaled[i], float(ratio[i]), tol)
        for k in keys:
            result[k].append(entry[k])
    return _finish(result, single, ("certified",))


#: HiGHS solvers tried in turn while one reports numerical difficulties (status 4)
LP_METHODS = ("highs", "highs-ds", "highs-ipm")


def _linprog(objective: np.ndarray, a_eq: np.ndarray, b_eq: np.ndarray, bounds: list) -> Any:
    """``linprog`` with HiGHS, falling back to its other solvers on status 4."""
    res = None
    for method in LP_METHODS:
        res = linprog(objective, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method=method)
        if res.status != 4:
            break
    return res


def _certificate_lp(p_unit: np.ndarray, n_scaled: np.ndarray, ratio: float, tol: float) -> dict:
    k, d = n_scaled.shape
    a_eq = np.zeros((d + 1, k + 1))
    a_eq[:d, :k] = n_scaled.T
    a_eq[:d, k] = -p_unit
    a_eq[d, :k] = 1.0
    b_eq = np.zeros(d + 1)
    b_eq[d] = 1.0
    bounds = [(0.0, None)] * k + [(None, None)]
    objective = np.zeros(k + 1)
    objective[k] = -1.0
    high = _linprog(objective, a_eq, b_eq, bounds)
    if high.status == 2:
        return {
            "certified": True,
            "feasible": False,
            "c_max": None,
            "c_min": None,
            "zero_in_hull": False,
            "reason": "no multiple of p lies in conv{n_j}",
        }
    objective[k] = 1.0
    low = _linprog(objective, a_eq, b_eq, bounds)
    for res in (high, low):
        if res.status != 0:
            raise RuntimeError(f"linear program failed (status {res.status}): {res.message}")
    # c in units of p: sum lambda n = c' * scale * p_unit = (c' * scale / |p|) p
    c_max, c_min = float(high.x[k]) * ratio + 0.0, float(low.x[k]) * ratio + 0.0
    if float(high.x[k]) > tol or float(low.x[k]) < -tol:
        return {
            "certified": False,
            "feasible": True,
            "c_max": c_max,
            "c_min": c_min,
            "zero_in_hull": float(low.x[k]) <= tol and float(high.x[k]) >= -tol,
            "reason": f"c*p lies in conv{{n_j}} for c in [{c_min:.6g}, {c_max:.6g}]",
        }
    return {
        "certified": True,
        "feasible": True,
        "c_max": c_max,
        "c_min": c_min,
        "zero_in_hull": True,
        "reason": "only 0*p lies in conv{n_j}",
    }


def gradient_norm(
    x: Any,
    positives: Any,
    negatives: Any,
    temperature: float = 1.0,
    *,
    projection: Literal["none", "tangent"] = "none",
) -> float | list[float]:
    """Norm of ``d/dx log(s^-/s^+ + 1)`` (Lemma 2.4).

    Closed form: ``grad = sigmoid(lse(<x,n>/tau) - lse(<x,p>/tau)) / tau * (n_bar - p_bar)``
    with ``n_bar``, ``p_bar`` the softmax-weighted means of the negatives and positives, so
    on the unit sphere ``||grad|| <= 2 / tau``: Lemma 2.4's asymptotic bound (the weight tends
    to 1 as negatives are added).  With one positive and one negative the maximum is
    ``2 sigmoid(2/tau) / tau`` (``2 sigmoid(2) = 1.7616`` at ``tau = 1``), reached at
    ``p = -n``, ``x = n``: ``||n - p|| = 2`` and ``<x, n - p> = 2`` maximise both factors.

    **Decision** (``projection``): ``"none"`` (default) is the Euclidean gradient in the
    ambient space, which is what the lemma's ``2 sigmoid(2)`` measures; ``"tangent"`` is the
    Riemannian gradient ``(I - x^ x^T) grad`` on the sphere (its one-positive/one-negative
    maximum is about 1.27 at ``tau = 1``, since at ``x = n`` the gradient is radial).

    Example:
        >>> import torch
        >>> from spacl.geometry import gradient_norm
        >>> n = torch.tensor([[1.0, 0.0]])
        >>> round(gradient_norm(n[0], -n, n), 4)  # p = -n, x = n: 2 sigmoid(2)
        1.7616
        >>> [round(v, 4) for v in gradient_norm(torch.eye(2), -n, n)]  # a batch of anchors
        [1.7616, 1.0]
    """
    temperature = check_positive(temperature, "temperature")
    check_choice(projection, "projection", ("none", "tangent"))
    single, xs, (ps, ns) = _batched(
        x, "x", [(positives, "positives", True), (negatives, "negatives", True)]
    )
    sp = (ps @ xs[:, :, None]).squeeze(-1) / temperature  # [B, P]
    sn = (ns @ xs[:, :, None]).squeeze(-1) / temperature  # [B, K]
    weight = torch.sigmoid(torch.logsumexp(sn, 1) - torch.logsumexp(sp, 1))
    n_bar = (torch.softmax(sn, 1)[:, :, None] * ns).sum(1)
    p_bar = (torch.softmax(sp, 1)[:, :, None] * ps).sum(1)
    grad = (weight / temperature)[:, None] * (n_bar - p_bar)
    if projection == "tangent":
        norms = xs.norm(dim=1, keepdim=True)
        if bool((norms == 0).any()):
            raise ValueError("x must be non-zero for the tangent projection")
        unit = xs / norms
        grad = grad - (grad * unit).sum(1, keepdim=True) * unit
    values = grad.norm(dim=1).tolist()
    return values[0] if single else values


def _finish(result: dict[str, Any], single: bool, shares: tuple[str, ...]) -> dict[str, Any]:
    if single:
        return {k: v[0] for k, v in result.items()}
    for key in shares:
        flags = result[key]
        result[f"share_{key}"] = sum(bool(f) for f in flags) / len(flags) if flags else math.nan
    return result
