"""Use what you trained: spacl.load, spacl embed / export / predict on an image run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import spacl
from spacl.cli import main
from spacl.evaluate import linear_probe
from spacl.evaluate.ncc import nearest_centre_predict
from spacl.tasks.image.config import load_config
from spacl.tasks.image.data import build_run_data

FAST = [
    "train.epochs=1",
    "train.batch_size=128",
    "train.progress=false",
    "model.backbone=small_cnn",
    "model.channels=[8,16]",
    "log.tensorboard=false",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trained") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["train", "digits/simclr", *FAST, "--out", str(out), "--quiet"]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def run_data(run: Path):  # type: ignore[no-untyped-def]
    cfg = load_config(run / "config.yaml")
    return cfg, build_run_data(cfg, device=torch.device("cpu"), dtype=torch.float32)


def test_load_gives_the_trained_encoder_in_eval_mode(run_dir: Path) -> None:
    model = spacl.load(run_dir)
    assert model.arm == "main" and model.task == "image"
    assert model.input_shape == (1, 8, 8)
    parameters = sum(p.numel() for p in model.encoder.parameters())
    shown = repr(model)  # one line naming what it is, not the config and the layers
    assert shown.startswith("TrainedModel(task='image', ") and "\n" not in shown
    assert "None" not in shown  # no recipe=None: the shipped recipes name no run
    assert "arm='main', input_shape=(1, 8, 8)" in shown and f"{parameters:,} parameters" in shown
    assert not model.encoder.training and not model.head.training
    cfg, data = run_data(run_dir)
    x = data.test_eval.inputs[:5]
    ckpt = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    weights = ckpt["arms"]["main"]["model"]
    first = next(k for k in weights if k.startswith("backbone."))
    loaded = model.encoder.state_dict()[first.removeprefix("backbone.")]
    torch.testing.assert_close(loaded, weights[first], rtol=0, atol=0)
    assert data.eval_transform is not None
    with torch.no_grad():
        torch.testing.assert_close(model.transform(x), data.eval_transform(x))
        expected = model.encoder(data.eval_transform(x))
    torch.testing.assert_close(model.embed(x), expected)
    projections = model.embed(x, features="projections")
    assert projections.shape == (5, int(cfg.model.proj_dim))
    # a numpy array is taken as the tensor it holds; 0-255 images are refused, not embedded
    torch.testing.assert_close(model.embed(x.numpy()), model.embed(x))
    with pytest.raises(ValueError, match=r"images in \[0, 1\].*divide by 255"):
        model.embed(x * 255)
    with pytest.raises(TypeError, match="float"):
        model.embed((x * 255).to(torch.uint8))


def test_embed_takes_lists_of_tensors_arrays_and_pil_images_and_refuses_bad_input(
    run_dir: Path, tmp_path: Path
) -> None:
    """Issue 38: a list of tensors, arrays or PIL images is stacked (the same features as
    the batch); NaN / inf input is refused; an empty batch is ``[0, d]``, not ``[0, 0]``."""
    from PIL import Image

    model = spacl.load(run_dir)
    _, data = run_data(run_dir)
    x = data.test_eval.inputs[:4]
    expected = model.embed(x)
    torch.testing.assert_close(model.embed(list(x)), expected)
    torch.testing.assert_close(model.embed([row.numpy() for row in x]), expected)
    torch.testing.assert_close(model.embed((x[0], x[1].numpy())), expected[:2])
    pixels = [(row[0].numpy() * 255).round().astype(np.uint8) for row in x]
    images = [Image.fromarray(p) for p in pixels]
    as_read = torch.stack([torch.from_numpy(p.astype(np.float32) / 255)[None] for p in pixels])
    torch.testing.assert_close(model.embed(images), model.embed(as_read))
    images[0].save(tmp_path / "0.png")
    torch.testing.assert_close(
        model.embed([tmp_path / "0.png", images[1]]), model.embed(as_read[:2])
    )
    torch.testing.assert_close(model.embed(images[2]), model.embed(as_read[2:3]))
    with pytest.raises(
        TypeError, match=r"inputs\[1\] must be an image path, a PIL image, a tensor"
    ):
        model.embed([x[0], 3.5])
    with pytest.raises(TypeError, match="inputs must be a tensor, a numpy array or a list"):
        model.embed(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"inputs\[0\] must have shape \[1, 8, 8\], got \[8, 8\]"):
        model.embed([x[0, 0]])
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"inputs must be finite, got 64 NaN or infinite"):
            model.embed(torch.full((1, 1, 8, 8), bad))
    spoiled = x.clone()
    spoiled[2, 0, 3, 3] = float("nan")
    with pytest.raises(ValueError, match="got 1 NaN or infinite value"):
        model.embed(list(spoiled))
    d = expected.shape[1]
    assert model.embed(torch.zeros(0, 1, 8, 8)).shape == (0, d)
    assert model.embed(np.zeros((0, 1, 8, 8), np.float32)).shape == (0, d)
    assert model.embed([]).shape == (0, d)
    proj = model.embed(x[:1], features="projections").shape[1]
    assert model.embed([], features="projections").shape == (0, proj)


def test_embed_writes_what_geometry_reads_and_reproduces_the_probe(
    run_dir: Path, tmp_path: Path
) -> None:
    cfg, data = run_data(run_dir)
    test_file, train_file = tmp_path / "test.npz", tmp_path / "train.pt"
    assert main(["embed", str(run_dir), "--split", "test", "--out", str(test_file)]) == 0
    assert main(["embed", str(run_dir), "--split", "train", "--out", str(train_file)]) == 0
    stored = np.load(test_file)
    assert stored["features"].shape == (len(data.test_eval), 128)
    np.testing.assert_array_equal(stored["labels"], data.test_eval.labels.numpy())
    assert not list(tmp_path.glob("*.npy")), "the scratch memory map is removed"
    assert main(["geometry", str(test_file), "--no-plot"]) == 0
    train = torch.load(train_file, weights_only=True)
    probe = linear_probe(
        train["features"],
        train["labels"],
        torch.from_numpy(stored["features"]),
        torch.from_numpy(stored["labels"]),
        num_classes=10,
        weight_decay=float(cfg.eval.probe_weight_decay),
        max_iter=int(cfg.eval.probe_max_iter),
    )
    reported = json.loads((run_dir / "eval.json").read_text())["main"]["linear_accuracy"]
    assert 100 * probe.test_accuracy == pytest.approx(100 * reported, abs=0.1)


def test_export_runs_in_a_process_that_never_imports_spacl(run_dir: Path, tmp_path: Path) -> None:
    program = tmp_path / "encoder.pt2"
    assert main(["export", str(run_dir), "--out", str(program)]) == 0
    _, data = run_data(run_dir)
    model = spacl.load(run_dir)
    x = model.transform(data.test_eval.inputs[:17])
    torch.save(x, tmp_path / "x.pt")
    script = f"""
import sys, json, torch
extra = {{"spacl.json": ""}}
encoder = torch.export.load({str(program)!r}, extra_files=extra).module()
x = torch.load({str(tmp_path / "x.pt")!r})
torch.save(encoder(x), {str(tmp_path / "y.pt")!r})
assert json.loads(extra["spacl.json"])["input_shape"] == [1, 8, 8]
assert not any(name.split(".")[0] == "spacl" for name in sys.modules), "spacl was imported"
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with torch.no_grad():
        expected = model.encoder(x)
    torch.testing.assert_close(torch.load(tmp_path / "y.pt"), expected, rtol=1e-5, atol=1e-5)


def test_export_refuses_a_name_that_promises_another_format(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["export", str(run_dir), "--out", str(tmp_path / "encoder.onnx")]) == 2
    err = capsys.readouterr().err
    assert "must name a .pt2 file" in err and "encoder.onnx" in err
    assert not (tmp_path / "encoder.onnx").exists()


def test_predict_images_by_the_stored_class_centres(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    _, data = run_data(run_dir)
    x = data.test_eval.inputs[:6]
    paths = []
    for i, image in enumerate(x):
        pixels = (image[0].numpy() * 255).round().astype(np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    capsys.readouterr()
    assert main(["predict", str(run_dir), *paths, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    model = spacl.load(run_dir)
    # the PNG round trip rounds pixels to 1/255: embed what the files hold
    read = torch.stack(
        [torch.from_numpy(np.asarray(Image.open(p), np.float32) / 255) for p in paths]
    )
    train_f = model.embed(data.train_eval.inputs)
    expected = nearest_centre_predict(train_f, data.train_eval.labels, model.embed(read[:, None]))
    assert [line["class"] for line in lines] == expected.tolist()
    assert [line["input"] for line in lines] == paths
    assert [line["name"] for line in lines] == [str(c) for c in expected.tolist()]  # no names


def test_bad_runs_and_inputs_get_one_line_errors(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match=r"arm must be one of \['main'\], got 'nope'"):
        spacl.load(run_dir, "nope")
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        spacl.load(tmp_path)
    empty = tmp_path / "no_checkpoint"
    empty.mkdir()
    (empty / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    with pytest.raises(FileNotFoundError, match="has no checkpoint"):
        spacl.load(empty)
    other = tmp_path / "kg_run"
    other.mkdir()
    (other / "config.yaml").write_text("task: kg\ndata:\n  name: fb15k237\n")
    with pytest.raises(FileNotFoundError, match="has no checkpoint"):
        spacl.load(other)
    (other / "config.yaml").write_text("task: audio\n")
    with pytest.raises(ValueError, match="run of task 'audio'"):
        spacl.load(other)
    bad = tmp_path / "corrupt.png"
    bad.write_bytes(b"not an image")
    capsys.readouterr()
    assert main(["predict", str(run_dir), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "corrupt.png" in err
    with pytest.raises(ValueError, match=r"inputs must have shape \[N, 1, 8, 8\]"):
        spacl.load(run_dir).embed(torch.zeros(2, 64))
    assert main(["embed", str(run_dir), "--out", str(tmp_path / "f.csv")]) == 2


def test_what_a_path_is_instead_is_said_in_one_line(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's config.yaml, a missing directory, a run directory to ``geometry``, a
    features file that is not one, a file as ``data.root``: one line saying what to give."""
    capsys.readouterr()

    def one_line(argv: list[str]) -> str:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err, err
        return err

    err = one_line(["eval", str(run_dir / "config.yaml")])
    assert "is a file, not a run directory" in err and f"its run directory is {run_dir}" in err
    assert "does not exist" in one_line(["eval", str(tmp_path / "nowhere")])
    with pytest.raises(FileNotFoundError, match="is a file, not a run directory"):
        spacl.load(run_dir / "config.yaml")
    err = one_line(["geometry", str(run_dir)])
    assert "is a run directory" in err and f"spacl embed {run_dir} --split test" in err
    fake = tmp_path / "features.npz"
    fake.write_text("x,y\n1,2\n")
    assert f"{fake} is not a .npz array file" in one_line(["geometry", str(fake)])
    text = tmp_path / "features.npy"  # said "contains pickled (object) data": misleading
    text.write_text("hello\n")
    err = one_line(["geometry", str(text)])
    assert f"{text} is not a .npy array file" in err and "pickle" not in err
    truncated = tmp_path / "cut.npz"  # a zip header, then nothing: the reader's own error
    truncated.write_bytes(b"PK\x03\x04")
    assert f"{truncated} is not a readable .npz file" in one_line(["geometry", str(truncated)])
    image = tmp_path / "one.png"
    image.write_bytes(b"\x89PNG")
    err = one_line(["train", "mnist5k/simclr", "data.name=imagefolder", f"data.root={image}"])
    assert "is a file, not a directory" in err


def _as_written_before_the_views_rename(run: Path, old: Path) -> None:
    """A copy of ``run`` whose config.yaml and checkpoint hold the image view keys under
    ``data`` (as runs made before issue 21 did)."""
    import shutil

    from omegaconf import OmegaConf

    shutil.copytree(run, old)

    def downgrade(cfg: dict) -> dict:
        cfg = json.loads(json.dumps(cfg))
        cfg["data"].update(cfg.pop("views"))
        return cfg

    saved = OmegaConf.to_container(OmegaConf.load(old / "config.yaml"))
    (old / "config.yaml").write_text(OmegaConf.to_yaml(downgrade(saved)))
    ckpt_path = old / "checkpoints" / "last.pt"
    ckpt = torch.load(ckpt_path, weights_only=False)
    ckpt["config"] = downgrade(ckpt["config"])
    torch.save(ckpt, ckpt_path)


def test_a_run_written_before_a_key_rename_still_loads_evaluates_and_resumes(
    run_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Saved configs are upgraded (data.num_views -> views.num_views, logged); a recipe a
    user writes with the old key is still an error naming the new one."""
    old = tmp_path / "old_run"
    _as_written_before_the_views_rename(run_dir, old)
    from omegaconf import OmegaConf

    written = OmegaConf.load(old / "config.yaml")
    assert "num_views" in written.data and "views" not in written
    user_copy = tmp_path / "my_recipe.yaml"  # the same keys in a recipe a user writes
    user_copy.write_text((old / "config.yaml").read_text())
    with caplog.at_level("WARNING"):
        model = spacl.load(old)
    assert any("data.num_views -> views.num_views" in r.message for r in caplog.records)
    x = torch.rand(3, 1, 8, 8)  # images in [0, 1]
    torch.testing.assert_close(model.embed(x), spacl.load(run_dir).embed(x), rtol=0, atol=0)
    assert main(["eval", str(old), "--json", "--no-write"]) == 0
    assert main(["train", str(old), "--resume", "--quiet"]) == 0
    assert "num_views" in OmegaConf.load(old / "config.yaml").views  # rewritten on resume
    with pytest.raises(ValueError, match=r"'data\.num_views' was renamed: use 'views\.num_views'"):
        spacl.load_recipe(user_copy)
