"""Every key acts or is rejected (issue 21): the image-folder path follows ``views.flip``,
``data.normalize``, ``views.augment`` and ``views.augment_strength`` as the in-memory path
does; ``train.drop_last``; ``data.num_workers`` defaults to what the machine has."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import Tensor

from spacl.tasks.image import load_config
from spacl.tasks.image.data import build_run_data
from test_own_images import overrides, write_folder


def first_batch(root: Path, *extra: str) -> Tensor:
    """The views ``[b, V, C, H, W]`` of the first batch an image-folder run's loader yields."""
    cfg = load_config(None, overrides(root, "views.num_views=3", *extra))
    data = build_run_data(cfg, device=torch.device("cpu"), dtype=torch.float32)
    return next(iter(data.stream.epoch_batches(0))).views


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("folder")
    write_folder(root / "train")
    write_folder(root / "test", per_class=2, seed=1)
    return root


def test_flip_normalize_identity_change_the_batches(folder: Path) -> None:
    default = first_batch(folder)
    plain = first_batch(
        folder, "views.flip=false", "data.normalize=false", "views.augment=identity"
    )
    assert default.shape == plain.shape
    assert not torch.equal(default, plain)
    # identity: every view is the same centre crop; no normalisation: pixels in [0, 1]
    assert torch.equal(plain[:, 0], plain[:, 1]) and torch.equal(plain[:, 0], plain[:, 2])
    assert plain.min() >= 0 and plain.max() <= 1
    assert default.min() < 0  # ImageNet mean / std by default
    assert not torch.equal(default[:, 0], default[:, 1])  # augmented views differ


def test_each_key_alone_changes_the_batches(folder: Path) -> None:
    default = first_batch(folder)
    for key in ("views.flip=false", "data.normalize=false", "views.augment=identity"):
        assert not torch.equal(first_batch(folder, key), default), key
    # augment_strength=0: no randomness left, every view is the resized image
    still = first_batch(folder, "views.augment_strength=0.0")
    assert torch.equal(still[:, 0], still[:, 1]) and torch.equal(still[:, 1], still[:, 2])
    assert not torch.equal(still, default)


def test_in_memory_only_augments_are_rejected_for_a_folder(folder: Path) -> None:
    for kind in ("noise", "same_class"):
        with pytest.raises(ValueError, match=r"config key 'views\.augment' must be one of"):
            load_config(None, overrides(folder, f"views.augment={kind}"))


@pytest.mark.parametrize("drop_last", [True, False])
def test_drop_last_is_a_key(drop_last: bool) -> None:
    cfg = load_config(
        None,
        [
            "data.name=synthetic",
            "data.synthetic.num_classes=2",
            "data.synthetic.samples_per_class=10",
            "data.test_fraction=0.25",  # 16 training rows (8 a class)
            "train.batch_size=6",
            f"train.drop_last={drop_last}",
        ],
    )
    data = build_run_data(cfg, device=torch.device("cpu"), dtype=torch.float32)
    sizes = [len(b.labels) for b in data.stream.epoch_batches(0)]
    assert sizes == ([6, 6] if drop_last else [6, 6, 4])


def test_num_workers_defaults_to_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacl.data import default_num_workers

    cfg = load_config(None, ["data.name=digits"])
    assert cfg.data.num_workers is None
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert default_num_workers() == 2
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert default_num_workers() == 8
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert default_num_workers() == 1
    with pytest.raises(ValueError, match=r"config key 'data\.num_workers'"):
        load_config(None, ["data.num_workers=-1"])
