"""The per-item path: v2 SimCLR recipe, MultiViewDataset, PlanBatchSampler, DataLoader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from spacl.data import (
    Batch,
    BatchPlan,
    LabeledData,
    MultiViewDataset,
    PlanBatchSampler,
    collate_views,
    eval_transform,
    load_imagefolder,
    simclr_transform,
)


def _pil(size: int = 40, seed: int = 0) -> Image.Image:
    arr = np.random.default_rng(seed).integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    return Image.fromarray(arr)


def _tensor_data(n: int = 24) -> LabeledData:
    x = torch.rand((n, 3, 16, 16), generator=torch.Generator().manual_seed(0))
    y = torch.arange(n) % 4
    return LabeledData(x, y, y // 2, 4, "toy")


def test_simclr_transform_output_and_blur_switch() -> None:
    t = simclr_transform(32, mean=None)
    out = t(_pil())
    assert out.shape == (3, 32, 32) and out.dtype == torch.float32
    assert 0.0 <= float(out.min()) and float(out.max()) <= 1.0
    names = [type(s).__name__ for s in simclr_transform(224).transforms]
    assert "Normalize" in names and sum("RandomApply" == n for n in names) == 2  # jitter + blur
    names32 = [type(s).__name__ for s in simclr_transform(32).transforms]
    assert sum("RandomApply" == n for n in names32) == 1  # no blur on small images
    with pytest.raises(ValueError, match="size must be a positive int, got 0"):
        simclr_transform(0)


def test_eval_transform_is_deterministic_centre_crop() -> None:
    img = _pil(40)
    t = eval_transform(32, crop_fraction=1.0, mean=None)
    a, b = t(img), t(img)
    assert torch.equal(a, b) and a.shape == (3, 32, 32)
    plain = eval_transform(40, crop_fraction=1.0, mean=None)(img)
    ref = torch.from_numpy(np.array(img)).permute(2, 0, 1).float() / 255.0
    torch.testing.assert_close(plain, ref)


def test_multiview_items_are_seeded_and_do_not_touch_global_rng() -> None:
    data = _tensor_data()
    ds = MultiViewDataset(
        data,
        simclr_transform(16, mean=None),
        num_views=4,
        seed=3,
        original_transform=eval_transform(16, crop_fraction=1.0, mean=None),
    )
    torch.manual_seed(0)
    before = torch.get_rng_state()
    item = ds[(2, 5, 7)]
    assert torch.equal(torch.get_rng_state(), before)  # forked, nothing leaks
    assert item["views"].shape == (4, 3, 16, 16)
    assert item["label"] == 3 and item["coarse_label"] == 1 and item["index"] == 7
    torch.testing.assert_close(item["views"][0], data.inputs[7])  # view 0 = original
    again = ds[(2, 5, 7)]
    assert torch.equal(again["views"], item["views"])
    assert not torch.equal(ds[(3, 5, 7)]["views"][1], item["views"][1])  # other epoch
    assert not torch.equal(item["views"][1], item["views"][2])  # views differ
    other_seed = MultiViewDataset(data, simclr_transform(16, mean=None), 4, seed=4)
    assert not torch.equal(other_seed[(2, 5, 7)]["views"][1], item["views"][1])


def test_plan_batch_sampler_resume_and_rank_slices() -> None:
    data = _tensor_data(24)
    ds = MultiViewDataset(data, simclr_transform(16, mean=None), num_views=2, seed=1)
    glob = PlanBatchSampler(BatchPlan(24, 6, seed=5))
    glob.set_epoch(1)
    full = [collate_views([ds[k] for k in keys]) for keys in glob]
    assert len(full) == 4 and all(isinstance(b, Batch) for b in full)
    assert all(b.epoch == 1 and b.step == s for s, b in enumerate(full))
    # Resume at step 2.
    glob.set_epoch(1, start=2)
    assert len(glob) == 2
    resumed = [collate_views([ds[k] for k in keys]) for keys in glob]
    for x, y in zip(resumed, full[2:], strict=True):
        assert torch.equal(x.views, y.views) and torch.equal(x.index, y.index)
    # Two ranks of 3 reproduce the global batch of 6.
    ranks = [
        PlanBatchSampler(BatchPlan(24, 3, seed=5, rank=r, world_size=2), epoch=1) for r in range(2)
    ]
    for step, parts in enumerate(zip(*ranks, strict=True)):
        batches = [collate_views([ds[k] for k in keys]) for keys in parts]
        assert torch.equal(torch.cat([b.views for b in batches]), full[step].views)
        assert torch.equal(torch.cat([b.labels for b in batches]), full[step].labels)
    with pytest.raises(ValueError, match="start must be an int in"):
        glob.set_epoch(0, start=9)


def test_dataloader_with_workers_matches_in_process(tmp_path: Path) -> None:
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for j in range(4):
            _pil(20, seed=10 * ord(cls) + j).save(tmp_path / cls / f"{j}.png")
    folder = load_imagefolder(tmp_path)
    ds = MultiViewDataset(folder, simclr_transform(16, mean=None), num_views=3, seed=0)
    sampler = PlanBatchSampler(BatchPlan(len(folder), 4, seed=2), epoch=3)
    serial = list(DataLoader(ds, batch_sampler=sampler, collate_fn=collate_views))
    parallel = list(DataLoader(ds, batch_sampler=sampler, collate_fn=collate_views, num_workers=2))
    assert len(serial) == 2
    for x, y in zip(serial, parallel, strict=True):
        assert x.views.shape == (4, 3, 3, 16, 16)
        assert torch.equal(x.views, y.views) and torch.equal(x.labels, y.labels)
        assert x.coarse_labels is None


def test_collate_rejects_empty() -> None:
    with pytest.raises(ValueError, match="empty"):
        collate_views([])
