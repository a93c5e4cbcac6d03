"""View makers: label-based positives, Gaussian-noise positives, identity views."""

from __future__ import annotations

import pytest
import torch

from spacl.data import (
    IdentityViews,
    LabeledData,
    NoiseViews,
    SameClassViews,
    ViewStream,
    generator_for,
)


def _data() -> LabeledData:
    # Inputs encode their own index, so gathered views reveal which sample they are.
    y = torch.tensor([0, 0, 0, 1, 1, 2, 0, 1, 3, 3, 3, 3])
    x = torch.arange(len(y), dtype=torch.float64).unsqueeze(1).repeat(1, 2)
    return LabeledData(x, y, None, 4, "ids")


def test_same_class_views_are_other_members_of_the_class() -> None:
    data = _data()
    maker = SameClassViews()
    index = torch.arange(len(data)).repeat(300)
    views = maker(data, index, 4, generator_for(0, "sc"))
    assert views.shape == (len(index), 4, 2)
    ids = views[..., 0].long()
    assert torch.equal(ids[:, 0], index)  # view 0 is the instance itself
    counts: dict[tuple[int, int], int] = {}
    for i, row in zip(index.tolist(), ids[:, 1:].tolist(), strict=True):  # loop reference
        for j in row:
            assert int(data.labels[j]) == int(data.labels[i])
            members = (data.labels == data.labels[i]).sum()
            assert j != i or int(members) == 1  # self only when alone in the class
            counts[(i, j)] = counts.get((i, j), 0) + 1
    # Uniform over the other members: instance 0 (class 0 = {0, 1, 2, 6}) sees 1, 2, 6
    # about 300 * 3 / 3 = 300 times each.
    for j in (1, 2, 6):
        assert 300 - 5 * 14 < counts[(0, j)] < 300 + 5 * 14
    assert counts[(5, 5)] == 900  # class 2 has a single member


def test_same_class_views_without_original_and_cache_refresh() -> None:
    data = _data()
    maker = SameClassViews(keep_original=False)
    views = maker(data, torch.tensor([8, 9]), 3, generator_for(1, "x"))
    ids = views[..., 0].long()
    assert bool((data.labels[ids] == 3).all()) and bool((ids[0] != 8).all())
    # A different dataset (new labels) must not reuse the cached class tables.
    other = LabeledData(data.inputs, torch.zeros(12, dtype=torch.long), None, 1, "one")
    ids2 = maker(other, torch.tensor([8]), 20, generator_for(1, "x"))[..., 0].long()
    assert set(ids2[0].tolist()) - set(range(12)) == set() and len(set(ids2[0].tolist())) > 3


@pytest.mark.parametrize("keep_original", [True, False])
def test_noise_views_statistics(keep_original: bool) -> None:
    n, d, sigma = 500, 30, 0.7
    x = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    data = LabeledData(x, torch.zeros(n, dtype=torch.long), None, 1, "g")
    views = NoiseViews(sigma, keep_original)(data, torch.arange(n), 3, generator_for(2, "noise"))
    assert views.shape == (n, 3, d)
    if keep_original:
        assert torch.equal(views[:, 0], x)
        noisy = views[:, 1:]
    else:
        noisy = views
    eps = (noisy - x.unsqueeze(1)) / sigma
    count = eps.numel()
    assert abs(float(eps.mean())) < 5 / count**0.5
    assert abs(float(eps.var()) - 1) < 5 * (2 / count) ** 0.5
    # Views of one instance are independent draws.
    corr = torch.corrcoef(torch.stack([eps[:, 0].flatten(), eps[:, 1].flatten()]))[0, 1]
    assert abs(float(corr)) < 5 / count**0.5 * 2


def test_noise_and_label_views_in_a_stream_are_seeded() -> None:
    data = _data()
    for maker in (NoiseViews(0.1), SameClassViews()):
        a = ViewStream(data, 4, 3, maker, seed=0).batch(0, 1)
        b = ViewStream(data, 4, 3, maker, seed=0).batch(0, 1)
        assert torch.equal(a.views, b.views)


def test_identity_views_and_errors() -> None:
    data = _data()
    views = IdentityViews()(data, torch.tensor([3, 1]), 2, generator_for(0))
    assert torch.equal(views, data.inputs[[3, 1]].unsqueeze(1).repeat(1, 2, 1))
    with pytest.raises(ValueError, match="num_views must be an int >= 1, got 0"):
        IdentityViews()(data, torch.tensor([0]), 0, generator_for(0))
    with pytest.raises(ValueError, match="sigma must be > 0, got -1"):
        NoiseViews(-1.0)
