"""spacl.evaluate: kNN, nearest class centre, linear probe against loop references / sklearn."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from spacl.evaluate import (
    evaluate_representation,
    extract_features,
    knn_accuracy,
    knn_predict,
    linear_probe,
    nearest_centre_accuracy,
    nearest_centre_predict,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def blobs(n: int, d: int, c: int, seed: int, spread: float = 1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    centres = 2.0 * torch.randn(c, d, generator=g, dtype=dtype)
    y = torch.randint(0, c, (n,), generator=g)
    x = centres[y] + spread * torch.randn(n, d, generator=g, dtype=dtype)
    return x, y


# ----------------------------------------------------------------------- references


def knn_loop(train_f, train_y, test_f, k, t, num_classes):
    """Per query: cosine similarities, sort, sum exp(s/t) per class over the top k."""
    preds = []
    for q in test_f:
        sims = []
        for j in range(len(train_f)):
            a, b = q, train_f[j]
            sims.append(float(a @ b) / (float(a.norm()) * float(b.norm())))
        order = sorted(range(len(sims)), key=lambda j: -sims[j])[: min(k, len(sims))]
        scores = [0.0] * num_classes
        for j in order:
            scores[int(train_y[j])] += math.exp(sims[j] / t)
        best = max(range(num_classes), key=lambda c: (scores[c], -c))
        preds.append(best)
    return torch.tensor(preds)


def ncc_loop(train_f, train_y, test_f):
    classes = sorted(set(int(v) for v in train_y))
    means = {c: train_f[train_y == c].mean(0) for c in classes}
    preds = []
    for q in test_f:
        dists = {c: float(((q - means[c]) ** 2).sum()) for c in classes}
        preds.append(min(classes, key=lambda c: (dists[c], c)))
    return torch.tensor(preds)


# ------------------------------------------------------------------------------ kNN


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("k", [1, 5, 200])
def test_knn_matches_loop_reference(dtype, k):
    tr_f, tr_y = blobs(60, 5, 4, seed=1, spread=1.5, dtype=dtype)
    te_f, _ = blobs(25, 5, 4, seed=2, spread=1.5, dtype=dtype)
    fast = knn_predict(tr_f, tr_y, te_f, num_classes=4, k=k, t=0.1, chunk_size=7)
    slow = knn_loop(tr_f.double(), tr_y, te_f.double(), k, 0.1, 4)
    assert torch.equal(fast, slow)


def test_knn_k1_is_nearest_neighbour_sklearn():
    from sklearn.neighbors import KNeighborsClassifier

    tr_f, tr_y = blobs(120, 6, 5, seed=3, spread=2.0)
    te_f, te_y = blobs(50, 6, 5, seed=4, spread=2.0)
    unit_tr = torch.nn.functional.normalize(tr_f, dim=1).numpy()
    unit_te = torch.nn.functional.normalize(te_f, dim=1).numpy()
    sk = KNeighborsClassifier(n_neighbors=1).fit(unit_tr, tr_y.numpy()).predict(unit_te)
    acc = knn_accuracy(tr_f, tr_y, te_f, te_y, k=1, t=0.1)
    assert acc == pytest.approx(float(np.mean(sk == te_y.numpy())), abs=1e-12)


def test_knn_weighted_vote_beats_majority():
    # One very close neighbour of class 1 outweighs two far ones of class 0 at small t.
    train = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.05, 1.0]], dtype=torch.float64)
    train_y = torch.tensor([1, 0, 0])
    query = torch.tensor([[1.0, 0.01]], dtype=torch.float64)
    assert int(knn_predict(train, train_y, query, num_classes=2, k=3, t=0.1)[0]) == 1
    # at a huge temperature the weights are ~equal: the majority wins
    assert int(knn_predict(train, train_y, query, num_classes=2, k=3, t=1e6)[0]) == 0


def test_knn_is_scale_invariant_and_perfect_on_separated_data():
    tr_f, tr_y = blobs(80, 8, 3, seed=5, spread=0.01)
    te_f, te_y = blobs(40, 8, 3, seed=5, spread=0.01)
    assert knn_accuracy(tr_f, tr_y, te_f, te_y) == 1.0
    assert knn_accuracy(3.0 * tr_f, tr_y, te_f, te_y) == 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"k": 0}, "k must be"), ({"t": 0.0}, "t must be"), ({"t": float("nan")}, "t must be")],
)
def test_knn_rejects_bad_hyperparameters(kwargs, match):
    x, y = blobs(10, 3, 2, seed=0)
    with pytest.raises(ValueError, match=match):
        knn_accuracy(x, y, x, y, **kwargs)


def test_inputs_are_validated_by_name():
    x, y = blobs(10, 3, 2, seed=0)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="test_features contains 1 non-finite"):
        knn_accuracy(x, y, bad, y)
    with pytest.raises(ValueError, match="same width"):
        nearest_centre_accuracy(x, y, x[:, :2], y)
    with pytest.raises(ValueError, match="train_labels has length 9"):
        knn_accuracy(x, y[:9], x, y)
    with pytest.raises(TypeError, match="train_labels must be an integer"):
        linear_probe(x, y.double(), x, y)
    with pytest.raises(ValueError, match="train_features must have 2 dimensions"):
        nearest_centre_accuracy(x[:, None], y, x, y)


# ------------------------------------------------------------------------------ NCC


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_ncc_matches_loop_reference(dtype):
    tr_f, tr_y = blobs(90, 4, 6, seed=6, spread=2.5, dtype=dtype)
    te_f, _ = blobs(40, 4, 6, seed=7, spread=2.5, dtype=dtype)
    fast = nearest_centre_predict(tr_f, tr_y, te_f, chunk_size=9)
    slow = ncc_loop(tr_f.double(), tr_y, te_f.double())
    assert torch.equal(fast, slow)


def test_ncc_matches_sklearn_nearest_centroid():
    from sklearn.neighbors import NearestCentroid

    tr_f, tr_y = blobs(150, 5, 4, seed=8, spread=2.0)
    te_f, te_y = blobs(60, 5, 4, seed=9, spread=2.0)
    sk = NearestCentroid().fit(tr_f.numpy(), tr_y.numpy()).predict(te_f.numpy())
    assert torch.equal(nearest_centre_predict(tr_f, tr_y, te_f), torch.as_tensor(sk))
    acc = nearest_centre_accuracy(tr_f, tr_y, te_f, te_y)
    assert acc == pytest.approx(float(np.mean(sk == te_y.numpy())), abs=1e-12)


def test_ncc_only_predicts_classes_present_in_training():
    tr_f, tr_y = blobs(50, 3, 3, seed=10)
    keep = tr_y != 1
    te_f, _ = blobs(30, 3, 3, seed=11)
    pred = nearest_centre_predict(tr_f[keep], tr_y[keep], te_f)
    assert set(pred.tolist()) <= {0, 2}


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    shift=st.floats(-5, 5),
    scale=st.floats(0.1, 10),
)
def test_ncc_invariant_to_translation_and_scaling(seed, shift, scale):
    tr_f, tr_y = blobs(40, 3, 3, seed=seed, spread=1.0)
    te_f, _ = blobs(20, 3, 3, seed=seed + 1, spread=1.0)
    base = nearest_centre_predict(tr_f, tr_y, te_f)
    moved = nearest_centre_predict(scale * tr_f + shift, tr_y, scale * te_f + shift)
    # float64 distances: a tie flips only if two centres are equidistant to ~1e-12
    assert (base != moved).sum() <= 1


# --------------------------------------------------------------------- linear probe


def test_linear_probe_matches_sklearn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    tr_f, tr_y = blobs(200, 6, 3, seed=12, spread=2.5)
    te_f, te_y = blobs(80, 6, 3, seed=13, spread=2.5)
    wd = 1e-2
    probe = linear_probe(tr_f, tr_y, te_f, te_y, weight_decay=wd, tolerance=1e-10, max_iter=1000)
    xs = ((tr_f - probe.mean) / probe.scale).numpy()
    sk = LogisticRegression(C=1.0 / (len(tr_f) * wd), tol=1e-12, max_iter=10_000).fit(
        xs, tr_y.numpy()
    )
    # multinomial logistic regression is invariant to a common shift of the class rows:
    # compare centred weights and biases
    w = probe.weight.numpy()
    b = probe.bias.numpy()
    np.testing.assert_allclose(w - w.mean(0), sk.coef_ - sk.coef_.mean(0), atol=1e-5)
    np.testing.assert_allclose(b - b.mean(), sk.intercept_ - sk.intercept_.mean(), atol=1e-5)
    sk_acc = sk.score(((te_f - probe.mean) / probe.scale).numpy(), te_y.numpy())
    assert probe.test_accuracy == pytest.approx(sk_acc, abs=1e-12)


def test_linear_probe_gradient_vanishes_at_its_solution():
    tr_f, tr_y = blobs(120, 4, 3, seed=14, spread=2.0)
    probe = linear_probe(tr_f, tr_y, tr_f, tr_y, weight_decay=1e-3, tolerance=1e-10)
    w = probe.weight.clone().requires_grad_(True)
    b = probe.bias.clone().requires_grad_(True)
    xs = (tr_f - probe.mean) / probe.scale
    loss = nn.functional.cross_entropy(xs @ w.T + b, tr_y) + 0.5e-3 * (w * w).sum()
    gw, gb = torch.autograd.grad(loss, (w, b))
    assert float(gw.abs().max()) < 1e-7 and float(gb.abs().max()) < 1e-7
    assert probe.loss == pytest.approx(float(loss.detach()), rel=1e-12)


def test_linear_probe_separable_data_and_predict():
    tr_f, tr_y = blobs(100, 5, 4, seed=15, spread=0.05, dtype=torch.float32)
    te_f, te_y = blobs(50, 5, 4, seed=15, spread=0.05, dtype=torch.float32)
    probe = linear_probe(tr_f, tr_y, te_f, te_y)
    assert probe.train_accuracy == 1.0 and probe.test_accuracy == 1.0
    assert torch.equal(probe.predict(te_f), te_y)
    assert probe.weight.dtype == torch.float64  # CPU default


def test_linear_probe_constant_column_and_bad_arguments():
    tr_f, tr_y = blobs(60, 3, 2, seed=16)
    tr_f = torch.cat([tr_f, torch.ones(60, 1, dtype=tr_f.dtype)], dim=1)
    probe = linear_probe(tr_f, tr_y, tr_f, tr_y)
    assert float(probe.scale[-1]) == 1.0 and math.isfinite(probe.loss)
    with pytest.raises(ValueError, match="weight_decay must be > 0"):
        linear_probe(tr_f, tr_y, tr_f, tr_y, weight_decay=0.0)
    with pytest.raises(ValueError, match="max_iter must be"):
        linear_probe(tr_f, tr_y, tr_f, tr_y, max_iter=0)
    with pytest.raises(ValueError, match="num_classes=1"):
        linear_probe(tr_f, tr_y, tr_f, tr_y, num_classes=1)


# ------------------------------------------------------------------ features + report


class _Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        from spacl.models import Encoded

        f = self.bn(self.lin(x))
        return Encoded(f, 2.0 * f)


def test_extract_features_eval_mode_batches_and_restores_mode():
    from spacl.data import LabeledData

    torch.manual_seed(0)
    enc = _Encoder()
    enc.train()
    x = torch.randn(23, 4)
    data = LabeledData(x, torch.arange(23) % 3, None, 3, "toy")
    f, y = extract_features(enc, data, batch_size=5)
    assert enc.training
    enc.eval()
    with torch.no_grad():
        expected = enc(x).features
    assert torch.allclose(f, expected, atol=1e-6) and torch.equal(y, data.labels)
    p, _ = extract_features(enc, data, which="projections", transform=lambda t: t + 1)
    with torch.no_grad():
        assert torch.allclose(p, enc(x + 1).projections, atol=1e-6)
    loader = [(x[:10], data.labels[:10]), (x[10:], data.labels[10:])]
    f2, y2 = extract_features(enc, loader)
    assert torch.allclose(f2, f, atol=1e-6) and torch.equal(y2, y)
    with pytest.raises(ValueError, match="which must be"):
        extract_features(enc, data, which="logits")


def test_evaluate_representation_keys_and_rng_untouched():
    tr_f, tr_y = blobs(120, 6, 3, seed=17, spread=1.0)
    te_f, te_y = blobs(60, 6, 3, seed=18, spread=1.0)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    out = evaluate_representation(tr_f, tr_y, te_f, te_y, knn_k=10)
    assert torch.equal(torch.get_rng_state(), before)
    assert out["knn_accuracy"] == knn_accuracy(tr_f, tr_y, te_f, te_y, k=10)
    assert out["ncc_accuracy"] == nearest_centre_accuracy(tr_f, tr_y, te_f, te_y)
    assert out["linear_accuracy"] == linear_probe(tr_f, tr_y, te_f, te_y).test_accuracy
    from spacl.evaluate import geometry_available

    if geometry_available():
        assert 0 < out["geometry/effective_rank_singular"] <= 6
        assert out["geometry/nc1"] > 0
