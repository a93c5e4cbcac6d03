"""SPEC §1.1 diagnostics of trained SPACL and NT-Xent encoders (MNIST-5k, self-supervised).

Encoders: SPACL's base and SimCLR (NT-Xent), trained per seed at their validation-tuned
temperatures on the same views, at the bench's projection dimension (64) and at a low one
(4, where convex hulls fill the sphere and the certificate can discriminate).  For
``ANCHORS`` test instances with the bench's five views (L2-normalised projections): the
dynamic anchor ``x``, its farthest-point hard positive ``p``, and as negatives the views of
the other instances (the same set for both encoders: an encoder comparison, not a subset
against its superset).

* **Lemma 2.4, what the paper uses it for**: the gradient norm of ``log(s^-/s^+ + 1)`` at
  the encoder's own temperature against the number ``n`` of negatives (random subsets of
  the views of ``POOL`` other test instances, ``n`` in :data:`SIZES`); the claim is that it
  levels off (:func:`~spacl.studies.verdicts.saturates`).  The bound ``||grad|| <= 2`` at
  ``tau = 1`` holds by construction (unit vectors) and is reported as a sanity check.
* **Corollary 2.2**: the share of anchors whose LP certifies non-collapse, per encoder.
* **Theorem 2.1**: the relative residual of ``r = sum_j w_j n_j`` orthogonal to ``p``
  (0 exactly when the collapse condition holds), per encoder.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from spacl.data import ViewStream, derive_seed
from spacl.geometry import collapse_condition, gradient_norm, non_collapse_certificate
from spacl.losses import SPACLLoss
from spacl.losses.registry import objective_spec

__all__ = ["ANCHORS", "LOW_DIM", "SIZES", "certified", "collapse_diagnostics", "run_diagnostics"]

ANCHORS = 48
#: test instances whose views are the negatives of the gradient-norm curves
POOL = 256
#: numbers of negatives of the Lemma 2.4 curves (the last: 4x the training batch's ~635)
SIZES: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
LOW_DIM = 4


def certified(p: Tensor, negatives: Tensor) -> bool | None:
    """Corollary 2.2 for one anchor; ``None`` when the LP solver gives no answer."""
    try:
        return bool(non_collapse_certificate(p, negatives)["certified"])
    except RuntimeError:  # HiGHS occasionally ends with an unknown model status
        return None


def _share(values: list[bool | None]) -> tuple[float, int]:
    decided = [v for v in values if v is not None]
    return sum(decided) / max(len(decided), 1), len(values) - len(decided)


@torch.no_grad()
def _embed(model: nn.Module, bench: Any, count: int, seed: int) -> Tensor:
    """``[count, V, d]`` unit embeddings of ``count`` test instances' views."""
    n = min(count, len(bench.test))
    stream = ViewStream(bench.test, n, bench.num_views, bench.views, seed=derive_seed(seed, "diag"))
    batch = stream.batch(0, 0)
    b, v = batch.views.shape[:2]
    was = model.training
    model.eval()
    z = model(batch.views.reshape(b * v, *batch.views.shape[2:])).projections
    model.train(was)
    return nn.functional.normalize(z.double(), dim=1).reshape(b, v, -1)


@torch.no_grad()
def collapse_diagnostics(
    model: nn.Module, bench: Any, tau: float, seed: int, anchors: int = ANCHORS
) -> dict[str, Any]:
    """Every measure of one trained ``model`` (module docstring)."""
    pool = _embed(model, bench, POOL, seed)
    b, v = pool.shape[:2]
    form = {"num_positives": 1, "share": 0.95, "num_adversarial": 0, "variant": "no_adversarial"}
    probe = objective_spec("spacl").build(form, given={"temperature": tau})
    assert isinstance(probe, SPACLLoss)
    probe.eval()
    probe(None, pool[:anchors].float())
    assert probe.last is not None
    a = min(anchors, b)
    rows = torch.arange(a)
    x = pool[rows, probe.last.anchor]
    p = pool[rows, probe.last.positives[:, 0]]
    flat = pool.reshape(b * v, -1)
    owner = torch.arange(b).repeat_interleave(v)
    # LP and Theorem 2.1 on the views of the other anchors' instances (as before)
    near = [flat[(owner < a) & (owner != i)] for i in range(a)]
    certified_ = [certified(p[i], near[i]) for i in range(a)]
    share, undecided = _share(certified_)
    theorem = collapse_condition(x, p, torch.stack(near), temperature=1.0)
    # gradient norm against the number of negatives (random subsets of the whole pool)
    gen = torch.Generator().manual_seed(derive_seed(seed, "diag", "subsets"))
    curves: dict[str, list[float]] = {"own": [], "tau1": []}
    for n in SIZES:
        picks = []
        for i in range(a):
            others = torch.nonzero(owner != i).squeeze(1)
            picks.append(flat[others[torch.randperm(len(others), generator=gen)[:n]]])
        negs = torch.stack(picks)
        for key, t in (("own", tau), ("tau1", 1.0)):
            norms = gradient_norm(x, p.unsqueeze(1), negs, t)
            assert isinstance(norms, list)
            curves[key].append(sum(norms) / len(norms))
    bound = gradient_norm(x, p.unsqueeze(1), torch.stack(near), 1.0)
    assert isinstance(bound, list)
    return {
        "certified": 100.0 * share,
        "undecided_lps": float(undecided),
        "collapse_residual": sum(theorem["relative_residual"]) / a,
        "grad_curve_own_tau": curves["own"],
        "grad_curve_tau1": curves["tau1"],
        "grad_max_tau1": max(bound),
    }


def run_diagnostics(
    bench: Any,
    temperatures: dict[str, float],
    seeds: list[int],
    proj_dim: int,
    cache: Any,
    *,
    train: bool = True,
) -> dict[str, Any]:
    """Train SimCLR and SPACL's base (self-supervised, their tuned temperatures) per seed at
    the bench's and the low projection dimension and diagnose them; per-seed results are
    cached in the JSON file ``cache`` (``train=False``: only what it holds)."""
    import json
    from pathlib import Path

    from spacl.studies.spacl_bench.methods import BASE, spacl_method

    setting = "self-supervised"
    path = Path(cache)
    done: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
    used = {
        "SPACL": temperatures[spacl_method(BASE, setting, proj_dim).name],
        "SimCLR": temperatures["SimCLR"],
    }
    # an entry diagnosed at other temperatures (a grid grew since) is stale
    done = {s: e for s, e in done.items() if e.get("temperatures", used) == used}
    for seed in seeds:
        if str(seed) in done or not train:
            continue
        entry = {**_diagnose_seed(bench, temperatures, seed, proj_dim), "temperatures": used}
        done[str(seed)] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(done, indent=1))
    have = [s for s in seeds if str(s) in done]
    out: dict[str, Any] = {"sizes": list(SIZES), "seeds": have, "low_dim": LOW_DIM}
    out["encoders"] = {
        who: {
            key: [done[str(s)][who][key] for s in have]
            for key in (done[str(have[0])][who] if have else {})
        }
        for who in ("SPACL", "SimCLR")
    }
    out["seconds"] = sum(
        float(done[str(s)].get(k, 0.0)) for s in have for k in ("seconds", "seconds_lowdim")
    )
    out["temperatures"] = used
    return out


def _diagnose_seed(
    bench: Any, temperatures: dict[str, float], seed: int, proj_dim: int
) -> dict[str, Any]:
    """Train and diagnose SPACL's base and SimCLR of one seed at both dimensions."""
    import time
    from dataclasses import replace

    from spacl.models import build_model
    from spacl.studies.spacl_bench.methods import BASE, baselines, spacl_method
    from spacl.studies.spacl_bench.protocol import train_models

    setting = "self-supervised"
    in_dim = int(bench.train.inputs[0].numel())
    entry: dict[str, Any] = {}
    for label, dim in (("", proj_dim), ("_lowdim", LOW_DIM)):
        low = replace(
            bench,
            build_encoder=lambda s, d=dim: build_model(
                "mlp", "mlp", d, in_dim=in_dim, hidden_dims=(256,), out_dim=128
            ),
        )
        methods = {
            "SPACL": spacl_method(BASE, setting, dim),
            "SimCLR": baselines(setting)[0],
        }
        jobs = [(m, temperatures[m.name]) for m in methods.values()]
        start = time.perf_counter()
        arms, _, _ = train_models(low, setting, jobs, seed)
        for who, m in methods.items():
            tau = temperatures[m.name]
            res = collapse_diagnostics(arms[(m.name, tau)].model, low, tau, seed)
            for key, value in res.items():
                entry.setdefault(who, {})[key + label] = value
        entry[f"seconds{label}"] = time.perf_counter() - start
    return entry
