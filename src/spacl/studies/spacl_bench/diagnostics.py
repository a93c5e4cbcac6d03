"""SPEC §1.1 collapse diagnostics of trained SPACL and SimCLR encoders (MNIST-5k, self-sup.).

For ``ANCHORS`` test instances with the bench's five views (L2-normalised projections):
the dynamic anchor ``x``, its farthest-point hard positive ``p``, and the views of every
other instance as negatives — all of them, and only those the relative-threshold cut
keeps (the literal reading, ``lambda_Q = 0.95``).  Reported: the share of anchors that
Corollary 2.2's linear program certifies as non-collapsing (no nonzero multiple of ``p``
in the convex hull of the negatives), and Lemma 2.4's gradient norm of
``log(s^-/s^+ + 1)`` at ``tau = 1`` (at most 2 asymptotically; ``2 sigmoid(2) = 1.7616``
with one positive and one negative).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from spacl.data import ViewStream, derive_seed
from spacl.geometry import gradient_norm, non_collapse_certificate
from spacl.losses import SPACLLoss
from spacl.mining.negatives import RelativeThresholdNegatives

__all__ = ["ANCHORS", "certified", "collapse_diagnostics"]

ANCHORS = 48


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
def collapse_diagnostics(
    model: nn.Module, bench: Any, tau: float, seed: int, anchors: int = ANCHORS
) -> dict[str, float]:
    """The certificate shares and gradient norms of one trained ``model`` (module docstring)."""
    n = min(anchors, len(bench.test))
    stream = ViewStream(bench.test, n, bench.num_views, bench.views, seed=derive_seed(seed, "diag"))
    batch = stream.batch(0, 0)
    b, v = batch.views.shape[:2]
    was = model.training
    model.eval()
    z = model(batch.views.reshape(b * v, *batch.views.shape[2:])).projections
    model.train(was)
    pool = nn.functional.normalize(z.double(), dim=1).reshape(b, v, -1)
    probe = SPACLLoss(tau, 1, 0.95, 0, variant="no_adversarial").eval()
    probe(None, pool.float())
    assert probe.last is not None
    rows = torch.arange(b)
    flat = pool.reshape(b * v, -1)
    x = pool[rows, probe.last.anchor]
    p = flat[rows * v + probe.last.positives[:, 0]]
    other = rows.repeat_interleave(v).unsqueeze(0) != rows.unsqueeze(1)  # [b, b*v]
    negatives = torch.stack([flat[other[i]] for i in range(b)])
    kept = RelativeThresholdNegatives(0.95, "similarity", tau).select((x @ flat.T) / tau, other)
    every, undecided_all = _share([certified(p[i], negatives[i]) for i in range(b)])
    hard, undecided_hard = _share([certified(p[i], flat[kept[i]]) for i in range(b)])
    norms = gradient_norm(x, p.unsqueeze(1), negatives, 1.0)
    assert isinstance(norms, list)
    return {
        "share_certified_all_negatives": every,
        "share_certified_hard_negatives": hard,
        "undecided_lps": float(undecided_all + undecided_hard),
        "kept_negative_fraction": float(kept.sum() / other.sum()),
        "gradient_norm_mean": sum(norms) / len(norms),
        "gradient_norm_max": max(norms),
    }


def run_diagnostics(
    bench: Any, temperatures: dict[str, float], seeds: list[int], proj_dim: int, cache: Any
) -> dict[str, Any]:
    """Train SimCLR and SPACL's base (self-supervised, their chosen temperatures) per seed
    and diagnose them; per-seed results are cached in the JSON file ``cache``."""
    import json
    from pathlib import Path

    from spacl.studies.spacl_bench.methods import BASE, baselines, spacl_method
    from spacl.studies.spacl_bench.protocol import train_models
    from spacl.studies.verdicts import summarize

    setting = "self-supervised"
    methods = {"SPACL": spacl_method(BASE, setting, proj_dim), "SimCLR": baselines(setting)[0]}
    path = Path(cache)
    done: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
    for seed in seeds:
        if str(seed) in done:
            continue
        jobs = [(m, temperatures[m.name]) for m in methods.values()]
        arms, _, _ = train_models(bench, setting, jobs, seed)
        done[str(seed)] = {
            label: collapse_diagnostics(
                arms[(m.name, temperatures[m.name])].model, bench, temperatures[m.name], seed
            )
            for label, m in methods.items()
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(done, indent=1))
    return {label: summarize([done[str(s)][label] for s in seeds]) for label in methods}
