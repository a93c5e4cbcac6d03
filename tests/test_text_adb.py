"""ADB / DA-ADB detectors (spacl.tasks.text.adb): loop references, early stopping, boundaries."""

from __future__ import annotations

import math

import pytest
import torch

from spacl.evaluate.adb import fit_adb
from spacl.tasks.text.adb import (
    ADBSchedule,
    OpenIntentNet,
    distance_aware_logits,
    fit_boundaries,
    pretrain,
    train_detector,
)
from spacl.tasks.text.states import CachedTexts, length_batches


def _loop_da_logits(z: torch.Tensor, c: torch.Tensor, w: torch.Tensor, s: float) -> torch.Tensor:
    rows = []
    for x in z:
        d = sorted(float((x - ck).norm()) for ck in c)
        x = math.exp(d[1] - d[0]) * x
        n = float(x.norm())
        squashed = (n / (1 + n)) * x / n
        rows.append(torch.stack([s * (squashed @ (wk / wk.norm())) for wk in w]))
    return torch.stack(rows)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_distance_aware_logits_match_a_loop(dtype: torch.dtype, tol: float) -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(7, 5, generator=g, dtype=dtype)
    c = torch.randn(4, 5, generator=g, dtype=dtype)
    w = torch.randn(4, 5, generator=g, dtype=dtype)
    got = distance_aware_logits(z, c, w, 4.0)
    torch.testing.assert_close(got, _loop_da_logits(z, c, w, 4.0), rtol=tol, atol=tol)
    # cosine of a squashed vector: every logit is below the scale in magnitude
    assert bool((got.abs() < 4.0).all())


def test_length_batches_cover_every_index_once_with_less_padding() -> None:
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 60, (1000,), generator=g)
    batches = length_batches(lengths, 32, torch.Generator().manual_seed(1))
    flat = torch.cat(batches)
    assert sorted(flat.tolist()) == list(range(1000))
    assert sorted(len(b) for b in batches).count(32) == 1000 // 32
    again = length_batches(lengths, 32, torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(batches, again, strict=True))
    padded = sum(int(lengths[b].max()) * len(b) for b in batches)
    plain = sum(int(lengths[b].max()) * len(b) for b in torch.randperm(1000, generator=g).split(32))
    assert padded < 0.8 * plain


def _blobs(n_per: int, k: int, d: int, seed: int, spread: float = 0.3, offset: float = 0.0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(k, d, generator=g) * 3 + offset
    x = centres.repeat_interleave(n_per, 0) + spread * torch.randn(k * n_per, d, generator=g)
    y = torch.arange(k).repeat_interleave(n_per)
    return x, y


def test_schedule_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="method"):
        ADBSchedule(method="adb2")
    with pytest.raises(ValueError, match="patience"):
        ADBSchedule(method="adb", patience=0)
    with pytest.raises(ValueError, match="lr"):
        ADBSchedule(method="adb", lr=0.0)
    with pytest.raises(ValueError, match="dropout"):
        ADBSchedule(method="adb", dropout=1.0)
    with pytest.raises(ValueError, match="temperature"):
        ADBSchedule(method="spacl", temperature=-1.0)


def test_cached_texts_checks_shapes_and_cuts_batches() -> None:
    states = [torch.ones(3, 4), torch.ones(5, 4), torch.ones(2, 4)]
    texts = CachedTexts.from_states(states, torch.tensor([0, 1, 0]), max_tokens=4)
    assert texts.lengths.tolist() == [3, 4, 2]
    h, mask = texts.batch(torch.tensor([0, 2]))
    assert h.shape == (2, 3, 4) and mask is not None and mask.sum(1).tolist() == [3, 2]
    with pytest.raises(ValueError, match="lengths and labels"):
        CachedTexts(
            torch.zeros(3, 4), torch.ones(2, dtype=torch.long), torch.zeros(3, dtype=torch.long)
        )
    with pytest.raises(ValueError, match="width"):
        OpenIntentNet(None, 3, "adb")


@pytest.mark.parametrize("method", ["adb", "da_adb"])
def test_pretrain_keeps_the_best_epoch_and_stops_after_patience(method: str) -> None:
    x, y = _blobs(40, 3, 8, 0, spread=2.5)  # overlapping: the dev score moves
    dx, dy = _blobs(20, 3, 8, 0, spread=2.5)
    train, dev = CachedTexts.pooled(x, y), CachedTexts.pooled(dx + 0.5, dy)
    torch.manual_seed(0)
    net = OpenIntentNet(None, 3, method, width=8)
    schedule = ADBSchedule(method=method, lr=3e-2, max_epochs=40, patience=3, batch_size=16)
    states: list[dict[str, torch.Tensor]] = []
    scores: list[float] = []

    def log(message: str) -> None:
        if message.startswith("epoch"):
            states.append({k: v.clone() for k, v in net.state_dict().items()})
            scores.append(float(message.rsplit(" ", 1)[1]))

    fit = pretrain(net, train, dev, schedule, log)
    assert fit.dev_scores == pytest.approx(scores, abs=0.006)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    assert fit.best_epoch == best + 1
    assert fit.epochs == min(schedule.max_epochs, fit.best_epoch + schedule.patience)
    for key, value in net.state_dict().items():
        torch.testing.assert_close(value, states[best][key], rtol=0, atol=0)


def test_boundaries_without_dropout_reach_adbs_minimiser_the_median() -> None:
    # distances far above the initial radii (softplus of N(0, 1)): the radii grow to the
    # minimiser of |d - Delta|, the median; a known-only dev set keeps the largest radii
    # visited (any larger ball accepts more known inputs), within Adam's step of it
    x, y = _blobs(101, 3, 6, 1, spread=8.0)
    train = CachedTexts.pooled(x, y)
    torch.manual_seed(0)
    net = OpenIntentNet(None, 3, "adb", width=6, dropout=0.0)
    schedule = ADBSchedule(
        method="adb", boundary_lr=0.05, boundary_max_epochs=400, patience=400, batch_size=64
    )
    model, record = fit_boundaries(net, train, train, schedule)
    with torch.no_grad():
        z = net.features(x, None)
    median = fit_adb(z, y, solver="median")
    torch.testing.assert_close(model.centroids, median.centroids, rtol=1e-5, atol=1e-6)
    # Adam's steps of size ~lr around the minimiser; the dev score picks one of them
    assert bool((median.radii > 3.0).all())
    # Adam's step is at most ~lr while the gradient keeps its sign; momentum (beta1 = 0.9)
    # carries it on for at most ~lr / (1 - beta1) = 10 lr past the minimiser
    torch.testing.assert_close(model.radii, median.radii, rtol=0.0, atol=10 * schedule.boundary_lr)
    assert record["boundary_epochs"] == 400


@pytest.mark.parametrize("method", ["adb", "da_adb", "spacl"])
def test_a_trained_detector_rejects_a_far_away_intent(method: str) -> None:
    x, y = _blobs(60, 4, 16, 2, spread=0.5)
    dx, dy = _blobs(30, 4, 16, 2, spread=0.5)
    far, _ = _blobs(30, 1, 16, 3, spread=0.5, offset=12.0)
    schedule = ADBSchedule(method=method, lr=1e-2, max_epochs=30, patience=5, batch_size=32)
    det = train_detector(None, CachedTexts.pooled(x, y), CachedTexts.pooled(dx, dy), 4, schedule)
    known_pred = det.predict(CachedTexts.pooled(dx, dy))
    open_pred = det.predict(CachedTexts.pooled(far, torch.full((30,), 4)))
    assert float((known_pred == dy).float().mean()) > 0.8
    assert float((open_pred == 4).float().mean()) > 0.9
    assert det.record["epochs"] >= 1 and det.record["boundary_epochs"] >= 1
