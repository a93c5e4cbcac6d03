"""RSA against scipy.stats on scipy.spatial.distance.pdist."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist
from scipy.stats import pearsonr, spearmanr

import spacl.geometry.inputs as inputs
from spacl.alignment import rdm, rsa

F64 = torch.float64
SCIPY_METRIC = {"cosine": "cosine", "sqeuclidean": "sqeuclidean", "euclidean": "euclidean"}


def pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 7)) + 2.0
    y = np.tanh(x @ rng.normal(size=(7, 4))) + 0.3 * rng.normal(size=(n, 4))
    return x, y


@pytest.mark.parametrize("kind", ["cosine", "sqeuclidean", "euclidean"])
def test_rdm_equals_pdist(kind: str) -> None:
    x, _ = pair(30, 0)
    np.testing.assert_allclose(
        rdm(x, kind).numpy(), pdist(x, SCIPY_METRIC[kind]), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("kind", ["cosine", "sqeuclidean", "euclidean"])
@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_rsa_equals_scipy(kind: str, method: str) -> None:
    x, y = pair(60, 1)
    a, b = pdist(x, SCIPY_METRIC[kind]), pdist(y, SCIPY_METRIC[kind])
    expected = pearsonr(a, b)[0] if method == "pearson" else spearmanr(a, b)[0]
    assert rsa(x, y, rdm=kind, method=method) == pytest.approx(expected, abs=1e-10)
    assert rsa(
        torch.from_numpy(x).float(), torch.from_numpy(y).float(), kind, method
    ) == pytest.approx(expected, abs=1e-5)


def test_spearman_uses_average_ranks_for_ties() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 3, size=(25, 2)).astype(float)  # many equal squared distances
    y = rng.integers(0, 3, size=(25, 3)).astype(float)
    a, b = pdist(x, "sqeuclidean"), pdist(y, "sqeuclidean")
    assert len(np.unique(a)) < len(a) / 10
    assert rsa(x, y, rdm="sqeuclidean", method="spearman") == pytest.approx(
        spearmanr(a, b)[0], abs=1e-12
    )


def test_pearson_blocks_merge_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = pair(80, 3)
    full = rsa(x, y)
    monkeypatch.setattr(inputs, "CHUNK_ELEMENTS", 150)  # one or two rows per block
    assert rsa(x, y) == pytest.approx(full, abs=1e-13)
    assert rsa(x, y) == pytest.approx(
        pearsonr(pdist(x, "cosine"), pdist(y, "cosine"))[0], abs=1e-10
    )
    np.testing.assert_allclose(rdm(x).numpy(), pdist(x, "cosine"), rtol=1e-10, atol=1e-12)


def test_pearson_on_squared_and_plain_euclidean_differ_spearman_does_not() -> None:
    x, y = pair(40, 4)
    assert abs(rsa(x, y, "sqeuclidean") - rsa(x, y, "euclidean")) > 1e-3
    assert rsa(x, y, "sqeuclidean", "spearman") == pytest.approx(
        rsa(x, y, "euclidean", "spearman"), abs=1e-12
    )


def test_errors_and_degenerate_cases() -> None:
    x, y = pair(10, 5)
    with pytest.raises(ValueError, match="same number of rows"):
        rsa(x, y[:9])
    with pytest.raises(ValueError, match="rdm must be one of"):
        rsa(x, y, rdm="manhattan")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method"):
        rsa(x, y, method="kendall")  # type: ignore[arg-type]
    zero_row = x.copy()
    zero_row[3] = 0.0
    with pytest.raises(ValueError, match="all-zero row"):
        rsa(zero_row, y)
    with pytest.raises(ValueError, match="at least 3 rows"):
        rsa(x[:2], y[:2])
    with pytest.raises(ValueError, match="non-finite"):
        rsa(np.full_like(x, math.inf), y)
    same = np.ones((10, 3)) * np.arange(1, 11)[:, None]  # all rows parallel: cosine RDM is 0
    with pytest.warns(RuntimeWarning, match="constant"):
        assert math.isnan(rsa(same, y))
