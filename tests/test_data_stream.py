"""ViewStream / BatchPlan: determinism, resume, rank slicing, balanced batches, errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.data import (
    Batch,
    BatchPlan,
    IdentityViews,
    ImageAugment,
    LabeledData,
    NoiseViews,
    SameClassViews,
    ViewStream,
    derive_seed,
    generator_for,
    make_synthetic,
)


def _images(n: int = 60, c: int = 3, size: int = 8, num_classes: int = 4) -> LabeledData:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand((n, c, size, size), generator=gen)
    y = torch.arange(n) % num_classes
    coarse = y // 2
    return LabeledData(x, y, coarse, num_classes, "toy")


def _vectors() -> LabeledData:
    return make_synthetic(num_classes=5, dim=6, samples_per_class=12, seed=3)


MAKERS = {
    "identity": (IdentityViews(), _vectors),
    "noise": (NoiseViews(0.5), _vectors),
    "same_class": (SameClassViews(), _vectors),
    "image": (ImageAugment(blur_p=0.5), _images),
    "image_no_original": (ImageAugment(keep_original=False), _images),
}


def _assert_batch_equal(a: Batch, b: Batch) -> None:
    assert torch.equal(a.views, b.views)
    assert torch.equal(a.labels, b.labels)
    assert torch.equal(a.index, b.index)
    if a.coarse_labels is None:
        assert b.coarse_labels is None
    else:
        assert b.coarse_labels is not None
        assert torch.equal(a.coarse_labels, b.coarse_labels)
    assert (a.epoch, a.step) == (b.epoch, b.step)


# ----------------------------------------------------------------------------- seeding
def test_derive_seed_stable_and_distinct() -> None:
    s = derive_seed(7, "batch", 1, 2)
    assert s == derive_seed(7, "batch", 1, 2)
    assert 0 <= s < 2**63
    others = {
        derive_seed(7, "batch", 1, 3),
        derive_seed(8, "batch", 1, 2),
        derive_seed(7, "batch", 2, 1),
        derive_seed(7, "views", 1, 2),
    }
    assert s not in others and len(others) == 4
    a = torch.rand(5, generator=generator_for(7, "x"))
    assert torch.equal(a, torch.rand(5, generator=generator_for(7, "x")))
    with pytest.raises(TypeError, match="seed"):
        derive_seed(1.5, 1)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ shapes/dtype
@pytest.mark.parametrize("maker_name", sorted(MAKERS))
def test_batch_shapes_and_dtypes(maker_name: str) -> None:
    maker, data_fn = MAKERS[maker_name]
    data = data_fn()
    stream = ViewStream(data, batch_size=8, num_views=3, augment=maker, seed=1)
    assert len(stream) == len(data) // 8
    batches = list(stream.epoch_batches(0))
    assert len(batches) == len(stream)
    for k, b in enumerate(batches):
        assert b.views.shape == (8, 3, *data.input_shape)
        assert b.views.dtype == data.inputs.dtype
        assert b.labels.dtype == torch.long and b.index.dtype == torch.long
        assert torch.equal(b.labels, data.labels[b.index])
        assert b.step == k and b.epoch == 0 and len(b) == 8 and b.num_views == 3
    # An epoch visits distinct instances.
    seen = torch.cat([b.index for b in batches])
    assert len(torch.unique(seen)) == len(seen)


def test_uniform_epoch_is_a_permutation_without_drop_last() -> None:
    data = _vectors()  # 60 samples
    stream = ViewStream(data, batch_size=7, num_views=1, seed=5, drop_last=False)
    assert len(stream) == 9
    batches = list(stream.epoch_batches(2))
    assert [len(b) for b in batches] == [7] * 8 + [4]
    seen = torch.cat([b.index for b in batches])
    assert torch.equal(torch.sort(seen).values, torch.arange(60))
    # Identity views are the inputs themselves.
    assert torch.equal(batches[0].views[:, 0], data.inputs[batches[0].index])


def test_views_keep_original() -> None:
    data = _images()
    for maker in (ImageAugment(), NoiseViews(0.3), SameClassViews()):
        stream = ViewStream(
            data if isinstance(maker, ImageAugment) else _vectors(), 6, 4, maker, seed=0
        )
        b = stream.batch(0, 0)
        assert torch.equal(b.views[:, 0], stream.data.inputs[b.index])
        assert not torch.equal(b.views[:, 1], b.views[:, 0])


# ------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("maker_name", sorted(MAKERS))
def test_same_seed_same_batches_different_seed_different(maker_name: str) -> None:
    maker, data_fn = MAKERS[maker_name]
    data = data_fn()
    a = ViewStream(data, 8, 3, maker, seed=11)
    b = ViewStream(data, 8, 3, maker, seed=11)
    c = ViewStream(data, 8, 3, maker, seed=12)
    for x, y in zip(a.epoch_batches(1), b.epoch_batches(1), strict=True):
        _assert_batch_equal(x, y)
    assert not torch.equal(a.batch(1, 0).index, c.batch(1, 0).index)
    # Different epochs differ too.
    assert not torch.equal(a.batch(0, 0).index, a.batch(1, 0).index)


def test_batches_do_not_depend_on_global_rng_or_order() -> None:
    data = _images()
    stream = ViewStream(data, 8, 3, ImageAugment(), seed=4)
    ref = [stream.batch(3, k) for k in range(len(stream))]
    torch.manual_seed(123)
    other = ViewStream(data, 8, 3, ImageAugment(), seed=4)
    for k in reversed(range(len(stream))):  # random access, reversed order
        _assert_batch_equal(other.batch(3, k), ref[k])


@pytest.mark.parametrize("balanced", [False, True])
def test_resume_at_start_k_equals_uninterrupted(balanced: bool) -> None:
    data = _images(n=64, num_classes=4)
    full = list(ViewStream(data, 8, 2, ImageAugment(), seed=9, balanced=balanced).epoch_batches(5))
    for k in (0, 1, 4, len(full) - 1, len(full)):
        fresh = ViewStream(data, 8, 2, ImageAugment(), seed=9, balanced=balanced)
        resumed = list(fresh.epoch_batches(5, start=k))
        assert len(resumed) == len(full) - k
        for x, y in zip(resumed, full[k:], strict=True):
            _assert_batch_equal(x, y)


# ------------------------------------------------------------------------ rank slicing
@pytest.mark.parametrize("maker_name", sorted(MAKERS))
@pytest.mark.parametrize("balanced", [False, True])
def test_rank_slices_concatenate_to_global_batch(maker_name: str, balanced: bool) -> None:
    maker, data_fn = MAKERS[maker_name]
    data = data_fn()
    world, b = 3, 4 if not balanced else 5
    if balanced and data.num_classes == 4:
        b = 4  # global 12 = 3 per class
    single = ViewStream(data, b * world, 3, maker, seed=2, balanced=balanced)
    ranks = [
        ViewStream(data, b, 3, maker, seed=2, balanced=balanced, rank=r, world_size=world)
        for r in range(world)
    ]
    assert all(len(r) == len(single) for r in ranks)
    for step in range(len(single)):
        one = single.batch(1, step)
        parts = [r.batch(1, step) for r in ranks]
        assert all(len(p) == b for p in parts)
        _assert_batch_equal(
            Batch(
                torch.cat([p.views for p in parts]),
                torch.cat([p.labels for p in parts]),
                None if one.coarse_labels is None else torch.cat([p.coarse_labels for p in parts]),  # type: ignore[misc]
                torch.cat([p.index for p in parts]),
                1,
                step,
            ),
            one,
        )
        _assert_batch_equal(ranks[0].global_batch(1, step), one)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(5, 60),
    b=st.integers(1, 6),
    world=st.integers(1, 4),
    seed=st.integers(0, 99),
    epoch=st.integers(0, 5),
)
def test_plan_rank_slices_property(n: int, b: int, world: int, seed: int, epoch: int) -> None:
    if b * world > n:
        with pytest.raises(ValueError, match="batch_size"):
            BatchPlan(n, b, seed, world_size=world)
        return
    glob = BatchPlan(n, b * world, seed)
    plans = [BatchPlan(n, b, seed, rank=r, world_size=world) for r in range(world)]
    assert len(glob) == n // (b * world)
    for step in range(len(glob)):
        cat = torch.cat([p.local_indices(epoch, step) for p in plans])
        assert torch.equal(cat, glob.global_indices(epoch, step))


# ---------------------------------------------------------------------------- balanced
def test_balanced_batches_equal_counts_and_epoch_coverage() -> None:
    y = torch.arange(10).repeat_interleave(20)  # 10 classes x 20
    data = LabeledData(torch.randn(200, 3), y, None, 10, "bal")
    stream = ViewStream(data, 40, 2, seed=0, balanced=True)
    assert stream.plan.samples_per_class == 4 and len(stream) == 5
    batches = list(stream.epoch_batches(0))
    for b in batches:
        assert torch.equal(torch.bincount(b.labels, minlength=10), torch.full((10,), 4))
        assert not torch.equal(b.labels, torch.sort(b.labels).values)  # classes mixed
    seen = torch.cat([b.index for b in batches])
    assert torch.equal(torch.sort(seen).values, torch.arange(200))  # each once per epoch


def test_balanced_subset_of_classes_and_imbalanced_data() -> None:
    y = torch.cat([torch.full((n,), c) for c, n in enumerate([30, 8, 12, 50, 9, 7])])
    data = LabeledData(torch.randn(len(y), 2), y, None, 6, "imb")
    stream = ViewStream(data, 12, 1, seed=3, balanced=True, samples_per_class=4)
    classes_seen = set()
    for b in stream.epoch_batches(0):
        counts = torch.bincount(b.labels, minlength=6)
        assert sorted(counts.tolist()) == [0, 0, 0, 4, 4, 4]
        assert len(torch.unique(b.index)) == 12
        classes_seen |= set(torch.nonzero(counts).squeeze(1).tolist())
    assert classes_seen == set(range(6))


def test_balanced_errors() -> None:
    y = torch.arange(3).repeat_interleave(4)
    data = LabeledData(torch.randn(12, 2), y, None, 3, "small")
    with pytest.raises(ValueError, match="multiple of the number of classes 3"):
        ViewStream(data, 4, 1, balanced=True)
    with pytest.raises(ValueError, match="samples_per_class=5 exceeds the smallest class"):
        ViewStream(data, 10, 1, balanced=True, samples_per_class=5)
    with pytest.raises(ValueError, match="labels are required"):
        BatchPlan(12, 3, balanced=True)


# ------------------------------------------------------------------------------ errors
def test_bad_arguments_name_the_value() -> None:
    data = _vectors()
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        ViewStream(data, 0, 2)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got -3"):
        ViewStream(data, -3, 2)
    with pytest.raises(ValueError, match=r"batch_size=61 .* exceeds the number of samples 60"):
        ViewStream(data, 61, 2)
    with pytest.raises(ValueError, match="num_views must be an int >= 1, got 0"):
        ViewStream(data, 4, 0)
    with pytest.raises(ValueError, match="rank must be < world_size=2, got 2"):
        ViewStream(data, 4, 1, rank=2, world_size=2)
    with pytest.raises(ValueError, match="drop_last must be True"):
        ViewStream(data, 4, 1, drop_last=False, world_size=2)
    with pytest.raises(ValueError, match="start must be"):
        next(ViewStream(data, 4, 1).epoch_batches(0, start=99))
    with pytest.raises(ValueError, match="step must be < 15"):
        ViewStream(data, 4, 1).batch(0, 15)
    with pytest.raises(TypeError, match="augment must be a ViewMaker"):
        ViewStream(data, 4, 1, augment="simclr")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ImageAugment needs images"):
        ViewStream(data, 4, 2, ImageAugment()).batch(0, 0)
    # batch_size > N is fine without drop_last: one short batch.
    short = ViewStream(data, 100, 1, drop_last=False)
    assert len(short) == 1 and len(short.batch(0, 0)) == 60


def test_batch_to_device_roundtrip() -> None:
    b = ViewStream(_images(), 4, 2, ImageAugment(), seed=0).batch(0, 0)
    moved = b.to("cpu")
    _assert_batch_equal(moved, b)
