"""Similarity descent: the surrogate dynamics Theorem 1 (CL vs NSCL, SPEC §3) is proved for.

The theorem does not follow network weights.  It follows the cosine-similarity matrix
``Sigma in [-1, 1]^{N x N}`` of a fixed reference set directly, updated by *similarity
descent*: each step moves only the entries the mini-batch touches,

    Sigma_{t+1} = Sigma_t - eta_t G_t,      G_t = grad_Sigma  mean_{i in B_t} l_i(Sigma_t),

with the batch loss written as a function of the similarity entries (``s = Sigma / tau``,
``p(i)`` the other view of anchor ``i``):

    DCL  (CL):   l_i = -s_{i p(i)} + log sum_{j in B_t, j != i, p(i)}   e^{s_ij}
    NSCL:        l_i = -s_{i p(i)} + log sum_{j in B_t, y_j != y_i}      e^{s_ij}

Both trajectories start from the same ``Sigma_0`` and see the same batches (shared
randomness).  A network trained by SGD with learning rate ``eta`` moves ``Sigma`` by
about ``J J^T`` times that step (``J`` the Jacobian of ``Sigma`` in the weights), so the
bound evaluated at the network's learning rate is not a statement about the network
unless ``||J||^2 <= 1``; on this surrogate it is a statement the tests check.

**Decisions**: ``Sigma`` stays symmetric — an entry ``(i, j)`` and its mirror are one
variable, updated by the mean of their two partial derivatives, ``(G + G^T) / 2``; the
batch size ``B`` of the bound is the number of anchors (rows) in a batch, every row's
other view being in the batch too; no clipping to ``[-1, 1]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from spacl._validation import check_choice, check_positive

__all__ = [
    "random_pair_batches",
    "similarity_gradient",
    "surrogate_bound_check",
    "surrogate_drift",
    "two_view_reference",
]

SurrogateObjective = Literal["dcl", "nscl"]


def _check(sigma: Tensor, labels: Tensor, partner: Tensor) -> int:
    if not isinstance(sigma, Tensor) or sigma.ndim != 2 or sigma.shape[0] != sigma.shape[1]:
        got = tuple(sigma.shape) if isinstance(sigma, Tensor) else type(sigma).__name__
        raise ValueError(f"sigma must be a square [N, N] tensor, got {got}")
    n = int(sigma.shape[0])
    for name, t in (("labels", labels), ("partner", partner)):
        if not isinstance(t, Tensor) or t.shape != (n,) or t.is_floating_point():
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be an integer tensor of shape [{n}], got {got}")
    if bool((partner < 0).any()) or bool((partner >= n).any()):
        raise ValueError(f"partner holds indices outside [0, {n})")
    if bool((partner == torch.arange(n, device=partner.device)).any()):
        raise ValueError("partner must not map a row to itself")
    if not torch.equal(labels[partner], labels):
        raise ValueError("a row and its partner (the other view) must share a label")
    return n


def similarity_gradient(
    sigma: Tensor,
    rows: Tensor,
    labels: Tensor,
    partner: Tensor,
    tau: float,
    objective: SurrogateObjective = "dcl",
) -> Tensor:
    """``G = (g + g^T) / 2`` with ``g = d/dSigma mean_{i in rows} l_i``, zero off the batch.

    Args:
        sigma: ``[N, N]`` similarities of the reference set.
        rows: the batch, ``[b]`` distinct row indices containing each row's partner.
        labels: ``[N]`` class labels; ``partner``: ``[N]`` the other view of each row.
        tau: temperature.
        objective: ``"dcl"`` (CL) or ``"nscl"`` (module docstring).
    """
    n = _check(sigma, labels, partner)
    tau = check_positive(tau, "tau")
    check_choice(objective, "objective", ("dcl", "nscl"))
    if rows.ndim != 1 or rows.numel() < 2 or rows.is_floating_point():
        raise ValueError(f"rows must be a 1-D integer tensor of >= 2 indices, got {rows!r}")
    in_batch = torch.zeros(n, dtype=torch.bool, device=sigma.device)
    in_batch[rows] = True
    if not bool(in_batch[partner[rows]].all()):
        raise ValueError("every row of the batch needs its partner (other view) in the batch")
    b = rows.numel()
    logits = sigma[rows][:, rows] / tau  # [b, b]
    local = torch.full((n,), -1, dtype=torch.long, device=sigma.device)
    local[rows] = torch.arange(b, device=sigma.device)
    pos = local[partner[rows]]  # [b] column of each anchor's positive
    eye = torch.eye(b, dtype=torch.bool, device=sigma.device)
    if objective == "dcl":
        negatives = ~eye
        negatives[torch.arange(b), pos] = False
    else:
        y = labels[rows]
        negatives = y.unsqueeze(1) != y.unsqueeze(0)
    soft = torch.softmax(logits.masked_fill(~negatives, -torch.inf), dim=1)
    soft = torch.nan_to_num(soft, nan=0.0)  # an anchor without negatives: no denominator
    g_local = soft / tau
    g_local[torch.arange(b), pos] -= 1.0 / tau
    g_local /= b
    g = torch.zeros_like(sigma)
    g[rows.unsqueeze(1), rows.unsqueeze(0)] = g_local
    return (g + g.T) / 2.0


def surrogate_drift(
    sigma0: Tensor,
    labels: Tensor,
    partner: Tensor,
    batches: Sequence[Tensor],
    step_sizes: float | Sequence[float],
    tau: float,
) -> list[float]:
    """``||Sigma_t^CL - Sigma_t^NSCL||_F`` after each step of shared-batch similarity descent.

    ``batches[t]`` are the rows of step ``t``; ``step_sizes`` one ``eta`` or one per step.
    Both runs follow ``Sigma_{t+1} = Sigma_t - eta_t G_t`` (module docstring), DCL for CL and
    NSCL, from the same ``sigma0`` on the same batches (the setting of Theorem 1, OpenReview
    JkitQScjuL).  Compare with :func:`spacl.alignment.alignment_bound` evaluated on the
    first ``t`` steps.

    Example:
        >>> from spacl.alignment import surrogate_drift
        >>> from spacl.alignment.surrogate import random_pair_batches, two_view_reference
        >>> sigma0, labels, partner = two_view_reference(instances=16, classes=4)
        >>> batches = random_pair_batches(16, per_batch=8, steps=3)
        >>> drift = surrogate_drift(sigma0, labels, partner, batches, 0.1, tau=1.0)
        >>> len(drift), drift[-1] > drift[0] > 0
        (3, True)
    """
    _check(sigma0, labels, partner)
    etas = (
        [float(step_sizes)] * len(batches)
        if isinstance(step_sizes, (int, float))
        else [float(e) for e in step_sizes]
    )
    if len(etas) != len(batches):
        raise ValueError(f"{len(etas)} step sizes for {len(batches)} batches")
    cl = sigma0.to(torch.float64).clone()
    nscl = cl.clone()
    drift = []
    for rows, eta in zip(batches, etas, strict=True):
        cl = cl - check_positive(eta, "step_sizes") * similarity_gradient(
            cl, rows, labels, partner, tau, "dcl"
        )
        nscl = nscl - eta * similarity_gradient(nscl, rows, labels, partner, tau, "nscl")
        drift.append(float(torch.linalg.matrix_norm(cl - nscl)))
    return drift


def two_view_reference(
    instances: int,
    classes: int,
    dim: int = 16,
    noise: float = 0.4,
    seed: int = 0,
) -> tuple[Tensor, Tensor, Tensor]:
    """A synthetic reference set: ``(Sigma_0 [2n, 2n], labels [2n], partner [2n])``.

    Rows ``2k`` and ``2k + 1`` are two views of instance ``k`` (a Gaussian direction and a
    noisy copy, L2-normalised, float64); labels ``k mod classes`` (balanced priors).
    """
    for name, value in (("instances", instances), ("classes", classes), ("dim", dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(instances, dim, generator=gen, dtype=torch.float64)
    second = base + noise * torch.randn(base.shape, generator=gen, dtype=torch.float64)
    z = torch.nn.functional.normalize(torch.stack((base, second), 1).reshape(-1, dim), dim=1)
    labels = (torch.arange(instances) % classes).repeat_interleave(2)
    partner = torch.arange(2 * instances) ^ 1
    return z @ z.T, labels, partner


def random_pair_batches(instances: int, per_batch: int, steps: int, seed: int = 0) -> list[Tensor]:
    """``steps`` batches of ``per_batch`` random instances, both views each (rows ``2k, 2k+1``)."""
    if not 1 <= per_batch <= instances:
        raise ValueError(f"per_batch must be in [1, {instances}], got {per_batch}")
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        chosen = torch.randperm(instances, generator=gen)[:per_batch]
        out.append(torch.stack((2 * chosen, 2 * chosen + 1), 1).reshape(-1))
    return out


def surrogate_bound_check(
    tau: float,
    batch_rows: int,
    step_size: float,
    steps: int,
    classes: int,
    *,
    instances: int = 128,
    delta: float = 0.05,
    seed: int = 0,
) -> dict[str, float]:
    """Run similarity descent with these hyper-parameters and evaluate Theorem 1 on it.

    ``batch_rows`` anchors per batch (``batch_rows // 2`` instances, both views) over a
    :func:`two_view_reference` of ``instances`` instances; returns ``{"drift",
    "drift_bound", "ratio", "vacuous"}`` (``ratio = 0`` when the bound is vacuous): the
    measured ``||Sigma_T^CL - Sigma_T^NSCL||_F`` of :func:`surrogate_drift` against
    Theorem 1's bound (:func:`~spacl.alignment.alignment_bound`, OpenReview JkitQScjuL).

    Example:
        >>> from spacl.alignment import surrogate_bound_check
        >>> out = surrogate_bound_check(1.0, batch_rows=64, step_size=0.1, steps=5, classes=10)
        >>> out["vacuous"], out["drift"] <= out["drift_bound"]
        (0.0, True)
    """
    from spacl.alignment.bound import alignment_bound

    per_batch = max(1, min(batch_rows // 2, instances))
    sigma, labels, partner = two_view_reference(instances, classes, seed=seed)
    batches = random_pair_batches(instances, per_batch, steps, seed)
    drift = surrogate_drift(sigma, labels, partner, batches, step_size, tau)[-1]
    bound = alignment_bound(tau, 2 * per_batch, step_size, 1.0 / classes, delta, steps=steps)
    finite = not bound["vacuous"] and bound["drift_bound"] < float("inf")
    return {
        "drift": drift,
        "drift_bound": bound["drift_bound"],
        "ratio": drift / bound["drift_bound"] if finite else 0.0,
        "vacuous": 0.0 if finite else 1.0,
    }
