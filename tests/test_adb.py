"""ADB (Zhang et al. 2021): closed-form radii, the paper's gradient solver, the decision rule."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction

import pytest
import torch

from spacl.evaluate.adb import adb_boundary_loss, fit_adb

F64 = torch.float64


def _clusters(seed=0, per=(7, 8, 9), d=4, spread=0.5):
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for c, n in enumerate(per):
        centre = torch.randn(d, dtype=F64, generator=g) * 4
        xs.append(centre + spread * torch.randn(n, d, dtype=F64, generator=g))
        ys.append(torch.full((n,), 10 + 3 * c))  # sparse label values
    return torch.cat(xs), torch.cat(ys)


def _loop_fit(x, y):
    """Centroids as means; radii as medians of the distances, written out per class."""
    out = {}
    for c in sorted(set(y.tolist())):
        rows = [x[i] for i in range(len(y)) if int(y[i]) == c]
        centre = sum(rows) / len(rows)
        dist = sorted(float((r - centre).norm()) for r in rows)
        n = len(dist)
        med = dist[n // 2] if n % 2 else (dist[n // 2 - 1] + dist[n // 2]) / 2
        out[c] = (centre, med)
    return out


def test_median_radii_and_centroids_equal_the_loop():
    x, y = _clusters()
    model = fit_adb(x, y)
    ref = _loop_fit(x, y)
    assert model.classes.tolist() == sorted(ref)
    for k, c in enumerate(model.classes.tolist()):
        assert float((model.centroids[k] - ref[c][0]).abs().max()) < 1e-12
        assert abs(float(model.radii[k]) - ref[c][1]) < 1e-12


def test_median_minimises_the_boundary_loss():
    x, y = _clusters(1)
    model = fit_adb(x, y)
    best = float(adb_boundary_loss(x, y, model))
    # the loss equals the mean absolute deviation of the distances from the radius
    d = (x - model.centroids[torch.searchsorted(model.classes, y)]).norm(dim=1)
    mad = (d - model.radii[torch.searchsorted(model.classes, y)]).abs().mean()
    assert abs(best - float(mad)) < 1e-12
    for k in range(model.num_known):
        for step in (-0.05, 0.05):
            moved = fit_adb(x, y)
            moved.radii[k] += step
            assert float(adb_boundary_loss(x, y, moved)) >= best - 1e-12


def test_the_gradient_procedure_is_refused_with_where_it_lives():
    """Issue 40: one boundary training, in the engine's loop (spacl.tasks.text.adb); on
    fixed features fit_adb gives its exact minimiser, the median."""
    x, y = _clusters(2)
    with pytest.raises(ValueError, match=r"solver='median'.*spacl\.tasks\.text\.adb"):
        fit_adb(x, y, solver="gradient")


def test_predict_nearest_centroid_within_its_radius_else_open():
    x, y = _clusters(3)
    model = fit_adb(x, y, open_label=99)
    g = torch.Generator().manual_seed(0)
    probe = torch.cat((x, 20 * torch.randn(10, x.shape[1], dtype=F64, generator=g)))
    got = model.predict(probe)
    for i in range(probe.shape[0]):
        dists = [float((probe[i] - c).norm()) for c in model.centroids]
        k = min(range(len(dists)), key=dists.__getitem__)
        if abs(dists[k] - float(model.radii[k])) < 1e-9:
            continue  # the median example sits on its class's boundary (d == Delta)
        want = int(model.classes[k]) if dists[k] < float(model.radii[k]) else 99
        assert int(got[i]) == want
    assert (got[-10:] == 99).all()  # far away: open
    assert (got[: len(y)] == y).float().mean() >= 0.5  # about half of the known are inside
    assert torch.equal(model.open_score(probe) >= 0, got == 99)


def test_normalize_runs_on_unit_features():
    x, y = _clusters(4)
    model = fit_adb(x, y, normalize=True)
    assert torch.allclose(
        model.centroids, fit_adb(x / x.norm(dim=1, keepdim=True), y).centroids, atol=1e-12
    )
    off_boundary = model.open_score(x).abs() > 1e-9  # medians sit on the boundary
    assert torch.equal(model.predict(x * 3)[off_boundary], model.predict(x)[off_boundary])


def test_bad_input():
    x, y = _clusters()
    with pytest.raises(ValueError, match="solver"):
        fit_adb(x, y, solver="newton")
    with pytest.raises(ValueError, match="open_label"):
        fit_adb(x, y, open_label=10)
    with pytest.raises(ValueError, match="labels"):
        fit_adb(x, y[:-1])
    model = fit_adb(x, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(x[:, :2])


# ---- issue 18: radii that accept a stated share of known inputs ----------------------------


def _conformal_rank(n: int, q: float) -> int:
    return max(1, min(n, math.ceil(Fraction(str(q)) * (n + 1))))


def _draws(per, spread, seed, d=4):
    """Train and dev draws (same centres, fresh noise) of classes 0..len(per)-1."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(len(per), d, dtype=F64, generator=g) * 4

    def draw(counts):
        ys = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
        return centres[ys] + spread * torch.randn(len(ys), d, dtype=F64, generator=g), ys

    return draw([20] * len(per)), draw(per)


def test_median_radii_reject_half_of_the_training_examples_by_construction():
    # the reason for solver="quantile": a median accepts floor(n / 2) of its own n examples
    x, y = _clusters(6, per=(10, 12, 14), spread=0.3)  # even: no example on a boundary
    model = fit_adb(x, y, open_label=-1)
    accepted = model.predict(x) != -1
    for k, c in enumerate(model.classes.tolist()):
        n = int((y == c).sum())
        assert int(accepted[y == c].sum()) == n // 2, k


@pytest.mark.parametrize(("per", "min_count"), [((30, 40, 50), 35), ((30, 40, 50), 1)])
@pytest.mark.parametrize("q", [0.95, 0.8])
def test_quantile_radii_accept_the_stated_share_of_dev_examples(per, min_count, q):
    (x, y), (dev_x, dev_y) = _draws(per, 2.0, seed=7)
    model = fit_adb(
        x, y, open_label=-1, solver="quantile", dev=(dev_x, dev_y), quantile=q,
        min_class_count=min_count,
    )  # fmt: skip
    # loop reference: nearest-centroid distance, grouped by the class it assigns
    groups: dict[int, list[float]] = {k: [] for k in range(3)}
    for i in range(dev_x.shape[0]):
        dists = [float((dev_x[i] - c).norm()) for c in model.centroids]
        k = min(range(3), key=dists.__getitem__)
        groups[k].append(dists[k])
    assert all(groups.values())  # every class assigned some dev examples
    assert bool((model.distances(dev_x).argmin(1) != dev_y).any())  # misassigned dev
    small = [v for k in range(3) if len(groups[k]) < min_count for v in groups[k]]
    pooled = small if len(small) >= min_count else [v for k in range(3) for v in groups[k]]
    accepted = model.predict(dev_x) != -1
    assigned = model.distances(dev_x).argmin(1)
    for k in range(3):
        values = groups[k] if len(groups[k]) >= min_count else pooled
        want = sorted(values)[_conformal_rank(len(values), q) - 1]
        assert float(model.radii[k]) == pytest.approx(want, abs=1e-12)
        if len(groups[k]) >= min_count:  # d < Delta accepts exactly the j smallest
            n = len(groups[k])
            assert int(accepted[assigned == k].sum()) == _conformal_rank(n, q)
    if min_count == 1:  # every class its own radius: the overall share is the sum of ranks
        total = sum(_conformal_rank(len(groups[k]), q) for k in range(3))
        assert int(accepted.sum()) == total


def test_quantile_radii_accept_the_stated_share_of_fresh_known_inputs():
    # split conformal: E[accepted share of new known inputs] = j / (n + 1) = 49 / 51
    x, y = _clusters(8, per=(20, 20, 20), spread=1.0)
    shares = []
    for r in range(200):
        g = torch.Generator().manual_seed(100 + r)
        pick = torch.randint(0, 60, (50,), generator=g)
        dev_x = x[pick] + 1.0 * torch.randn(50, x.shape[1], dtype=F64, generator=g)
        new_x = x[pick] + 1.0 * torch.randn(50, x.shape[1], dtype=F64, generator=g)
        model = fit_adb(x, y, solver="quantile", dev=(dev_x, y[pick]), min_class_count=100)
        shares.append(float((model.predict(new_x) != -1).double().mean()))
    assert statistics.fmean(shares) == pytest.approx(_conformal_rank(50, 0.95) / 51, abs=0.01)


def test_quantile_solver_bad_input():
    x, y = _clusters()
    with pytest.raises(ValueError, match="solver='quantile' fits the radii on known-class dev"):
        fit_adb(x, y, solver="quantile")
    with pytest.raises(ValueError, match="labels hold a class the model does not know: 99"):
        fit_adb(x, y, solver="quantile", dev=(x, torch.full_like(y, 99)))
    with pytest.raises(ValueError, match="quantile must be in"):
        fit_adb(x, y, solver="quantile", dev=(x, y), quantile=1.5)
    with pytest.raises(ValueError, match="min_class_count must be an integer >= 1, got 0"):
        fit_adb(x, y, solver="quantile", dev=(x, y), min_class_count=0)
