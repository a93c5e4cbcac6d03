"""geometry_report and the streaming GeometryAccumulator agree with the single functions."""

from __future__ import annotations

import itertools

import pytest
import torch

from spacl.geometry import (
    GeometryAccumulator,
    alignment,
    effective_rank,
    geometry_report,
    neural_collapse,
    rankme,
    spectrum,
    uniformity,
)

F64 = torch.float64


def labelled(
    n_per: int = 15, c: int = 6, d: int = 9, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(c).repeat_interleave(n_per)
    y = y[torch.randperm(len(y), generator=g)]
    x = 2.0 * torch.randn(c, d, generator=g, dtype=F64)[y] + torch.randn(
        len(y), d, generator=g, dtype=F64
    )
    return x + 1.5, y


def assert_entries_equal(a: dict, b: dict, keys: list[str], rel: float = 1e-10) -> None:
    for key in keys:
        if isinstance(b[key], list):
            assert len(a[key]) == len(b[key]), key
            for u, v in zip(a[key], b[key], strict=True):
                assert u == pytest.approx(v, rel=rel, abs=1e-9), key
        else:
            assert a[key] == pytest.approx(b[key], rel=rel, abs=1e-12), key


def test_report_equals_the_individual_functions() -> None:
    x, y = labelled()
    w = torch.randn(6, 9, generator=torch.Generator().manual_seed(1), dtype=F64)
    z1 = x + 0.1
    report = geometry_report(x, y, classifier=w, views=z1, uniformity_sample=None)
    nc = neural_collapse(x, y, classifier=w)
    assert_entries_equal(report, nc, list(nc))
    sp = spectrum(x, y)
    assert_entries_equal(report, sp, list(sp))
    assert report["effective_rank_singular"] == pytest.approx(
        effective_rank(x, "singular"), rel=1e-10
    )
    assert report["effective_rank_eigen"] == pytest.approx(effective_rank(x, "eigen"), rel=1e-10)
    assert report["rankme"] == pytest.approx(rankme(x), rel=1e-10)
    assert report["uniformity"] == pytest.approx(uniformity(x), rel=1e-12)
    assert report["alignment"] == pytest.approx(alignment(x, z1), rel=1e-12)
    assert report["n"] == 90 and report["dim"] == 9
    assert all(isinstance(v, (float, list)) for v in report.values())


def test_report_without_labels_and_with_more_dimensions_than_samples() -> None:
    x, y = labelled(n_per=2, c=4, d=20)
    plain = geometry_report(x)
    assert "nc1" not in plain and "alignment" not in plain
    assert plain["effective_rank_singular"] == pytest.approx(effective_rank(x), rel=1e-10)
    full = geometry_report(x, y)
    assert len(full["singular_values"]) == 7  # rank of 8 centred samples
    assert full["nc1"] == pytest.approx(neural_collapse(x, y)["nc1"], rel=1e-10)
    with pytest.raises(ValueError, match="need labels"):
        geometry_report(x, classifier=torch.zeros(4, 20, dtype=F64))


def test_uniformity_subsample_is_seeded() -> None:
    x, y = labelled(n_per=50)
    a = geometry_report(x, y, uniformity_sample=100, seed=3)["uniformity"]
    b = geometry_report(x, y, uniformity_sample=100, seed=3)["uniformity"]
    assert a == b
    assert a == pytest.approx(
        uniformity(x, sample=100, generator=torch.Generator().manual_seed(3)), rel=1e-14
    )


def test_float32_report_matches_float64() -> None:
    x, y = labelled(seed=4)
    r64 = geometry_report(x, y)
    r32 = geometry_report(x.float(), y)
    for key in (
        "nc1",
        "nc2_etf_deviation",
        "cdnv",
        "effective_rank_singular",
        "rankme",
        "uniformity",
    ):
        assert r32[key] == pytest.approx(r64[key], rel=1e-5), key


# ---------------------------------------------------------------- streaming
STREAM_KEYS = [
    "n", "dim", "effective_rank_singular", "effective_rank_eigen", "rankme", "singular_values",
    "covariance_eigenvalues", "log_spectrum", "num_classes", "nc1", "nc2_equinorm",
    "nc2_equiangularity", "nc2_etf_deviation", "cdnv", "nc_zero_sum", "nc_unit_norm",
    "nc_equal_inner_product", "nc_within_class_distance", "class_mean_singular_values",
    "class_mean_covariance_eigenvalues", "class_mean_effective_rank", "nc3",
]  # fmt: skip


@pytest.mark.parametrize("cuts", [[], [1, 2, 40], [30, 31, 60, 89]])
def test_accumulator_equals_in_memory_report(cuts: list[int]) -> None:
    x, y = labelled(seed=5)
    x = x + 1e3  # large offset: the Chan merges must not cancel
    w = torch.randn(6, 9, generator=torch.Generator().manual_seed(6), dtype=F64)
    acc = GeometryAccumulator(num_classes=6)
    bounds = [0, *cuts, 90]
    for a, b in itertools.pairwise(bounds):
        acc.update(x[a:b], y[a:b])
    streamed = acc.compute(classifier=w)
    assert_entries_equal(streamed, geometry_report(x, y, classifier=w), STREAM_KEYS, rel=1e-8)


def test_accumulator_merge_unlabelled_and_unseen_classes() -> None:
    x, y = labelled(seed=7)
    a, b = GeometryAccumulator(num_classes=10), GeometryAccumulator(num_classes=10)
    a.update(x[:50], y[:50])
    b.update(x[50:], y[50:])
    merged = a.merge(b).compute()  # classes 6..9 never seen: left out
    assert merged["num_classes"] == 6
    assert merged["nc1"] == pytest.approx(neural_collapse(x, y)["nc1"], rel=1e-9)
    plain = GeometryAccumulator()
    plain.update(x[:20])
    plain.update(x[20:])
    assert plain.compute()["rankme"] == pytest.approx(rankme(x), rel=1e-9)
    assert "nc1" not in plain.compute()


def test_accumulator_errors() -> None:
    x, y = labelled(seed=8)
    with pytest.raises(ValueError, match="num_classes"):
        GeometryAccumulator(num_classes=1)
    acc = GeometryAccumulator(num_classes=6)
    with pytest.raises(ValueError, match="labels are required"):
        acc.update(x)
    with pytest.raises(ValueError, match=r"lie in \[0, 6\)"):
        acc.update(x, y + 1)
    with pytest.raises(ValueError, match="at least 2 samples"):
        acc.compute()
    acc.update(x[:5], y[:5])
    with pytest.raises(ValueError, match="dimension changed"):
        acc.update(x[:, :3], y)
    with pytest.raises(ValueError, match="num_classes differ"):
        acc.merge(GeometryAccumulator())
    with pytest.raises(ValueError, match="labels given"):
        GeometryAccumulator().update(x, y)
    lonely = GeometryAccumulator(num_classes=6)
    lonely.update(x[:4], torch.tensor([0, 0, 1, 2]))
    with pytest.raises(ValueError, match="at least 2 samples; class"):
        lonely.compute()
    assert GeometryAccumulator(num_classes=6).merge(acc).n == 5  # merge into an empty one


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_inputs_are_never_modified(dtype: torch.dtype) -> None:
    from spacl.geometry import alignment_uniformity, collapse_condition, gradient_norm

    x, y = labelled(seed=9)
    x = x.to(dtype)
    w = torch.randn(6, 9, generator=torch.Generator().manual_seed(2), dtype=dtype)
    keep_x, keep_y, keep_w = x.clone(), y.clone(), w.clone()
    geometry_report(x, y, classifier=w, views=x.flip(0))
    geometry_report(x)
    neural_collapse(x, y, classifier=w)
    spectrum(x, y)
    effective_rank(x)
    rankme(x)
    alignment_uniformity(x, x.flip(0))
    acc = GeometryAccumulator(num_classes=6)
    acc.update(x, y)
    plain = GeometryAccumulator()
    plain.update(x)
    collapse_condition(x[:3], x[3:6], x[6:9])
    gradient_norm(x[:3], x[3:6, None], x[6:9, None])
    assert torch.equal(x, keep_x) and torch.equal(y, keep_y) and torch.equal(w, keep_w)
