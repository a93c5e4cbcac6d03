"""ADB (Zhang et al. 2021): closed-form radii, the paper's gradient solver, the decision rule."""

from __future__ import annotations

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


def test_gradient_solver_reaches_the_median():
    x, y = _clusters(2, per=(9, 11, 13))  # odd counts: a unique minimiser
    exact = fit_adb(x, y)
    learned = fit_adb(x, y, solver="gradient", lr=0.05, epochs=600, seed=3)
    assert float((learned.radii - exact.radii).abs().max()) < 0.05
    assert float(adb_boundary_loss(x, y, learned)) < float(adb_boundary_loss(x, y, exact)) + 0.02
    mini = fit_adb(x, y, solver="gradient", epochs=300, batch_size=8, seed=3)
    assert float((mini.radii - exact.radii).abs().max()) < 0.15


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


def test_gradient_solver_early_stopping_keeps_the_best_dev_radii():
    x, y = _clusters(5, per=(9, 11, 13))
    dev_x, dev_y = _clusters(5, per=(9, 11, 13))  # same clusters, a fresh draw
    dev_x = dev_x + 0.05
    model = fit_adb(x, y, solver="gradient", epochs=200, seed=1, dev=(dev_x, dev_y), patience=5)
    assert bool((model.radii > 0).all())
    assert (model.predict(dev_x) == dev_y).float().mean() > 0.3


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
    with pytest.raises(ValueError, match="epochs"):
        fit_adb(x, y, solver="gradient", epochs=0)
    model = fit_adb(x, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(x[:, :2])
