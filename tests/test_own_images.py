"""Own image folders without surprises: no test/ folder, unreadable files, spacl.load on them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import spacl
from spacl.cli import main
from spacl.data import stratified_indices
from spacl.tasks.image import Trainer, load_config


def write_folder(root: Path, per_class: int = 8, classes: int = 3, seed: int = 0) -> list[Path]:
    from PIL import Image

    gen = torch.Generator().manual_seed(seed)
    paths = []
    for c in range(classes):
        folder = root / f"class{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            pixels = (torch.rand(20, 20, 3, generator=gen) * 80 + 80 * c).to(torch.uint8)
            Image.fromarray(pixels.numpy()).save(folder / f"{i}.png")
            paths.append(folder / f"{i}.png")
    return paths


def write_colour_folder(
    root: Path, per_class: int = 8, seed: int = 0, size: int = 20
) -> list[Path]:
    """Class folders ``red`` and ``blue`` of nearly solid images (each pixel jittered by a
    few levels): classes any encoder tells apart, so a prediction is certain."""
    from PIL import Image

    gen = torch.Generator().manual_seed(seed)
    colours = {"red": (220, 30, 30), "blue": (30, 30, 220)}
    paths = []
    for name, rgb in colours.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            noise = torch.randint(-20, 21, (size, size, 3), generator=gen)
            pixels = (torch.tensor(rgb) + noise).clamp(0, 255).to(torch.uint8)
            Image.fromarray(pixels.numpy()).save(folder / f"{i}.png")
            paths.append(folder / f"{i}.png")
    return paths


def overrides(root: Path, *extra: str) -> list[str]:
    return [
        "data.name=imagefolder",
        f"data.root={root}",
        "data.image_size=16",
        "data.num_workers=0",
        "model.backbone=small_cnn",
        "model.channels=[8]",
        "model.feature_dim=8",
        "model.proj_dim=8",
        "objective.name=simclr",
        "train.batch_size=6",
        "train.epochs=1",
        "train.progress=false",
        "eval.knn_k=3",
        "eval.geometry=false",
        "log.tensorboard=false",
        *extra,
    ]


def test_stratified_indices_keep_class_shares_and_follow_the_seed() -> None:
    labels = torch.tensor([0] * 10 + [1] * 6 + [2] * 4)
    train, test = stratified_indices(labels, 0.25, seed=3)
    assert torch.bincount(labels[test], minlength=3).tolist() == [2, 2, 1]  # round(n_c / 4)
    assert sorted(torch.cat([train, test]).tolist()) == list(range(20))
    again, _ = stratified_indices(labels, 0.25, seed=3)
    other, _ = stratified_indices(labels, 0.25, seed=4)
    assert torch.equal(train, again) and not torch.equal(train, other)


@pytest.mark.parametrize("layout", ["train_only", "classes_at_root"])
def test_a_folder_without_test_is_split_by_test_fraction(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "folder"
    write_folder(root / "train" if layout == "train_only" else root)
    cfg = load_config(None, overrides(root, "data.test_fraction=0.25"))
    trainer = Trainer(cfg, tmp_path / "run", quiet=True)
    test_files = [p for p, _ in trainer.data.test_eval.loader.dataset.samples]
    train_files = [p for p, _ in trainer.data.train_eval.loader.dataset.samples]
    assert len(test_files) == 6 and len(train_files) == 18  # round(8 / 4) = 2 per class
    assert not set(test_files) & set(train_files)
    result = trainer.fit()
    assert 0.0 <= result.metrics["main"]["knn_accuracy"] <= 1.0
    model = spacl.load(tmp_path / "run")
    assert model.embed([test_files[0], test_files[1]]).shape == (2, 8)


def corrupt(path: Path, kind: str) -> Path:
    """Spoil an image file: ``header`` (not an image at all) or ``truncated`` (a sound PNG
    header, half its bytes: PIL opens it and fails only when decoding the pixels)."""
    if kind == "header":
        path.write_bytes(b"\x89PNG\r\n\x1a\n this is not a png")
    else:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.parametrize(("kind", "workers"), [("header", 0), ("truncated", 0), ("truncated", 1)])
def test_an_unreadable_image_is_named_in_one_line_or_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, workers: int
) -> None:
    """Train on a folder with a corrupt file: one line naming it, exit 2, also when a
    ``DataLoader`` worker decodes it; ``data.bad_images=skip`` trains without it."""
    root = tmp_path / "folder"
    write_folder(root / "train")
    write_folder(root / "test")  # the corrupt file is a training image
    bad = corrupt(root / "train" / "class1" / "3.png", kind)
    capsys.readouterr()
    out = tmp_path / "run"
    # one batch of every training image: the corrupt one is met in the first step
    first = [f"data.num_workers={workers}", "train.batch_size=64"]
    code = main(["train", "digits/simclr", *overrides(root, *first), "--out", str(out)])
    assert code == 2
    notes, _, err = capsys.readouterr().err.strip().rpartition("\n")
    assert str(bad) in err and "data.bad_images=skip" in err
    assert err.startswith("spacl train: error: unreadable image")
    if kind == "truncated":  # found when decoded: after the notes on the data
        assert "truncated" in err and "Traceback" not in notes and len(notes.splitlines()) <= 2
    else:
        assert notes == ""
    # the run is named only after its first step, and a failed start leaves nothing behind
    assert "run directory" not in notes and not out.exists()
    skip = [*overrides(root), "data.bad_images=skip"]
    again = tmp_path / "skipped"
    assert main(["train", "digits/simclr", *skip, "--out", str(again)]) == 0
    assert "data.bad_images=skip: left out 1 unreadable image(s)" in capsys.readouterr().err
    assert (again / "checkpoints" / "last.pt").is_file()
    with pytest.raises(ValueError, match=r"data\.bad_images"):
        load_config(None, [*overrides(root), "data.bad_images=ignore"])


def test_an_unreadable_test_image_met_after_training_loses_no_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated *test* image is met at the first online evaluation, after the epoch's
    steps: one line saying the run is saved and how to resume; once the file is fixed,
    ``--resume`` trains no step again and ends as an uninterrupted run does."""
    root = tmp_path / "folder"
    write_folder(root / "train")
    write_folder(root / "test")
    image = root / "test" / "class1" / "3.png"
    good = image.read_bytes()
    args = overrides(root, "train.epochs=2", "eval.every_epochs=1")
    whole = tmp_path / "whole"
    assert main(["train", "digits/simclr", *args, "--out", str(whole), "--quiet"]) == 0
    corrupt(image, "truncated")
    run = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "digits/simclr", *args, "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"spacl train: error: unreadable image {image}")
    assert err.endswith(
        f"the run is saved at step 4; once fixed, resume with: spacl train {run} --resume"
    )
    image.write_bytes(good)
    assert main(["train", str(run), "--resume"]) == 0
    assert "resuming at step 4" in capsys.readouterr().err
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (whole / "eval.json").read_text()
    )
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    keys = [(r["kind"], r.get("arm"), r.get("step"), r.get("epoch")) for r in records]
    assert len(keys) == len(set(keys)) and ("epoch", "main", 4, 0) in keys
    # resuming the finished run trains and evaluates nothing: it says so and shows its results
    written = (run / "eval.json").stat().st_mtime_ns
    lines = (run / "metrics.jsonl").read_text()
    assert '"kind": "final"' in lines
    assert main(["train", str(run), "--resume"]) == 0
    captured = capsys.readouterr()
    assert f"{run}: finished at step 8" in captured.err and "linear probe" in captured.out
    assert (run / "eval.json").stat().st_mtime_ns == written
    assert (run / "metrics.jsonl").read_text() == lines  # the final rows kept too


def test_embed_split_of_a_folder_without_test_is_the_runs_own_split(tmp_path: Path) -> None:
    import numpy as np

    root = tmp_path / "folder"
    write_folder(root / "train")
    run = tmp_path / "run"
    # the own-folder recipe a user starts from, sized down for the test
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
                 "objective.name=supcon", "--out", str(run), "--quiet"]) == 0  # fmt: skip
    out = tmp_path / "test.npz"
    assert main(["embed", str(run), "--split", "test", "--out", str(out), "--quiet"]) == 0
    stored = np.load(out)
    cfg = load_config(run / "config.yaml")
    trainer_test = [
        label
        for _, label in Trainer(
            cfg, tmp_path / "again", quiet=True
        ).data.test_eval.loader.dataset.samples
    ]
    assert stored["labels"].tolist() == trainer_test  # the held-out images, in eval's order
    model = spacl.load(run)
    files = [
        p
        for p, _ in Trainer(
            cfg, tmp_path / "third", quiet=True
        ).data.test_eval.loader.dataset.samples
    ]
    np.testing.assert_allclose(
        stored["features"][:2], model.embed(files[:2]).numpy(), rtol=1e-5, atol=1e-5
    )


def test_embed_follows_a_moved_folder_with_data_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The folder moved after training: ``embed --split`` says so in one line naming
    ``data.root=DIR``, and with it gives the rows it gave before the move (the run's own
    split, held to split.json), as ``spacl eval RUN data.root=DIR`` does."""
    import numpy as np

    root = tmp_path / "folder"
    write_folder(root / "train")
    run = tmp_path / "run"
    # the own-folder recipe a user starts from, sized down for the test
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
                 "objective.name=supcon", "--out", str(run), "--quiet"]) == 0  # fmt: skip
    before, after = tmp_path / "before.npz", tmp_path / "after.npz"
    assert main(["embed", str(run), "--out", str(before), "--quiet"]) == 0
    moved = root.rename(tmp_path / "moved")
    capsys.readouterr()
    assert main(["embed", str(run), "--out", str(after), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "data.root=DIR" in err and "ImageNet" not in err
    assert main(["embed", str(run), f"data.root={moved}", "--out", str(after), "--quiet"]) == 0
    old, new = np.load(before), np.load(after)
    assert old["labels"].tolist() == new["labels"].tolist()
    np.testing.assert_array_equal(old["features"], new["features"])
    # anything but one data.root=DIR is refused in one line
    capsys.readouterr()
    assert main(["embed", str(run), "train.epochs=2", "--out", str(after), "--quiet"]) == 2
    assert "accepts one data.root=DIR" in capsys.readouterr().err


def test_a_folder_of_loose_images_says_one_sub_folder_per_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Images straight in ``data.root`` (no class folders) or an empty folder: one line
    saying a sub-folder per class is expected, not torchvision's bare message."""
    import shutil

    files = write_folder(tmp_path / "classes")
    flat = tmp_path / "flat"
    flat.mkdir()
    for i, f in enumerate(files[:4]):
        shutil.copy(f, flat / f"img{i}.png")
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder in (flat, empty):
        capsys.readouterr()
        assert main(["train", "digits/simclr", *overrides(folder), "--out",
                     str(tmp_path / f"run-{folder.name}"), "--quiet"]) == 2  # fmt: skip
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "one sub-folder of images per class" in err, err
        # the flat folder's line names its loose files
        assert ("loose files (img0.png" in err) == (folder is flat), err


def test_predict_names_the_class_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    root = tmp_path / "folder"
    files = write_folder(root / "train")
    run = tmp_path / "run"
    # the own-folder recipe a user starts from, sized down for the test
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
                 "objective.name=supcon", "--out", str(run), "--quiet"]) == 0  # fmt: skip
    capsys.readouterr()
    picked = [str(files[i]) for i in (0, 9, 17)]
    assert main(["predict", str(run), *picked, "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    # a KG or text flag on an image run is refused in one line, not silently ignored
    for flag in (["--top", "3"], ["--filter"], ["--file", str(files[0])]):
        assert main(["predict", str(run), *picked, *flag]) == 2
        err = capsys.readouterr().err.strip()
        assert f"{flag[0]} applies to" in err and "is an image run" in err and "\n" not in err
    assert [x["name"] for x in lines] == [f"class{x['class']}" for x in lines]
    assert main(["predict", str(run), *picked]) == 0
    printed = [x.split("\t") for x in capsys.readouterr().out.splitlines()]
    assert [row[1] for row in printed] == [x["name"] for x in lines]
    # embed --data on a folder with an unreadable file: one line naming it, exit 2
    other = tmp_path / "other"
    write_folder(other, per_class=2)
    (other / "class1" / "broken.png").write_bytes(b"not an image")
    capsys.readouterr()
    assert main(["embed", str(run), "--data", str(other), "--out", str(tmp_path / "f.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "broken.png" in err and "\n" not in err and not (tmp_path / "f.npz").exists()
    # --data naming a file, or nothing: one line saying so (not ImageNet's layout)
    assert main(["embed", str(run), "--data", str(files[0]), "--out", str(tmp_path / "f.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"spacl embed: error: --data {str(files[0])!r} is a file, not a folder")
    assert "spacl predict RUN FILE" in err and "ImageNet" not in err and "\n" not in err
    assert main(["embed", str(run), "--data", str(tmp_path / "nope"), "--out", "f.npz"]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is a file, not an image folder"):
        spacl.data.load_imagefolder(files[0])
    # a truncated file (sound header, half the pixels) to embed --data and predict: one line
    (other / "class1" / "broken.png").unlink()
    cut = corrupt(other / "class2" / "1.png", "truncated")
    assert main(["embed", str(run), "--data", str(other), "--out", str(tmp_path / "f.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("spacl embed: error: --data: unreadable image") and str(cut) in err
    assert "truncated" in err and "\n" not in err and not (tmp_path / "f.npz").exists()
    assert main(["predict", str(run), str(cut)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("spacl predict: error: cannot read image") and str(cut) in err
    assert "\n" not in err


def test_a_relative_data_root_is_stored_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "work" / "myimgs"
    write_folder(root / "train")
    monkeypatch.chdir(tmp_path / "work")
    relative = [
        o if not o.startswith("data.root=") else "data.root=myimgs" for o in overrides(root)
    ]
    run = tmp_path / "run"
    assert main(["train", "digits/simclr", *relative, "--out", str(run), "--quiet"]) == 0
    assert load_config(run / "config.yaml").data.root == str(root)
    monkeypatch.chdir(tmp_path)  # elsewhere: the run still finds its data
    assert main(["eval", str(run), "--no-write"]) == 0


def test_the_imagefolder_recipes_need_only_data_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """``imagefolder/supcon``: ``data.root`` is the one key to set (a clear error without
    it); its batch of 64 is cut to the 18 training images, with a note."""
    import logging

    assert main(["train", "imagefolder/supcon", "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "config key 'data.root' must be set" in err and err.strip().count("\n") == 0
    assert main(["train", "imagefolder/supcon", "data.rot=x", "--out", str(tmp_path / "n")]) == 2
    err = capsys.readouterr().err  # a mistyped key is named first, not the missing one
    assert "unknown config key 'data.rot' (did you mean 'data.root'?)" in err
    root = tmp_path / "folder"
    write_folder(root)
    fast = ["data.image_size=16", "data.num_workers=0", "model.backbone=small_cnn",
            "model.channels=[8]", "model.feature_dim=8", "model.proj_dim=8", "train.epochs=1",
            "eval.geometry=false", "log.tensorboard=false"]  # fmt: skip
    run = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="spacl.tasks.image.data"):
        code = main(["train", "imagefolder/supcon", f"data.root={root}", *fast,
                     "--out", str(run), "--quiet"])  # fmt: skip
    assert code == 0
    note = "train.batch_size=64 is more than the 18 training images: batches of 18"
    assert note in caplog.text
    cfg = load_config(run / "config.yaml")
    assert cfg.objective.name == "supcon" and cfg.data.root == str(root)
    # the run's record says what it trained on: the setting (the lr is scaled from it)
    # stays, with the batch used beside it, and summary.md names the batch used
    assert f"  batch_size: 64  # {note}\n" in (run / "config.yaml").read_text()
    assert cfg.train.batch_size == 64
    assert f"schedule, batch 18 ({note})" in (run / "summary.md").read_text()
    caplog.clear()  # eval reads the run's data again: the training note is not repeated
    with caplog.at_level(logging.WARNING, logger="spacl.tasks.image.data"):
        assert main(["eval", str(run), "--no-write", "--json"]) == 0
    assert "is more than the" not in caplog.text


def test_own_folder_chain_train_embed_geometry_predict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38's path in one go, through the real ``spacl`` command (a process each, as
    a user runs it): a folder without test/ -> train -> embed --split test -> geometry ->
    predict (folder names); then, in-process, a corrupt image to predict, embed or eval
    is one line, exit 2."""
    import math

    import numpy as np

    root = tmp_path / "folder"
    files = write_colour_folder(root / "train")  # red and blue: trivially separable
    run = tmp_path / "run"
    # the own-folder recipe a user starts from, sized down for the test
    trained = run_spacl(
        tmp_path,
        "train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
        "objective.name=supcon", "--out", str(run),
    )  # fmt: skip
    # the split is said once, when train makes it; embed reads the same split silently
    assert trained.stderr.count("has no 'test' folder: 4 images held out") == 1, trained.stderr
    record = json.loads((run / "split.json").read_text())["test"]["files"]
    test_files = [root / name for name in record]
    assert len(test_files) == 4 and {f.parent.name for f in test_files} == {"red", "blue"}

    feats = tmp_path / "test.npz"
    embedded = run_spacl(tmp_path, "embed", str(run), "--split", "test", "--out", str(feats))
    assert "held out" not in embedded.stderr and "wrote" in embedded.stderr
    model = spacl.load(run)
    classes = ["blue", "red"]  # the folder names, sorted: the run's class order
    with np.load(feats) as z:
        stored, labels = z["features"], z["labels"]
    # exactly split.json's test files, in its order, at the encoder's width
    assert stored.shape == (4, 8) and stored.dtype == np.float32
    assert labels.tolist() == [classes.index(f.parent.name) for f in test_files]
    np.testing.assert_allclose(stored, model.embed(test_files).numpy(), rtol=1e-5, atol=1e-5)

    report = tmp_path / "geometry.json"
    run_spacl(tmp_path, "geometry", str(feats), "--json", str(report), "--no-plot")
    geometry = json.loads(report.read_text())
    named = ["rankme", "effective_rank_singular", "nc1", "cdnv", "nc2_equinorm", "uniformity"]
    assert all(math.isfinite(geometry[k]) for k in named), geometry
    assert (geometry["n"], geometry["dim"], geometry["num_classes"]) == (4, 8, 2)

    # a fresh image of each colour, outside the folder, is predicted as its own folder
    new = write_colour_folder(tmp_path / "new", per_class=1, seed=1)
    inputs = [str(f) for f in [*test_files, *new]]
    printed = run_spacl(tmp_path, "predict", str(run), *inputs).stdout.splitlines()
    rows = [line.split("\t") for line in printed]
    assert [row[0] for row in rows] == inputs
    assert [row[1] for row in rows] == [Path(f).parent.name for f in inputs]
    assert all(math.isfinite(float(row[2])) and float(row[2]) >= 0 for row in rows)

    # the error checks: in-process
    corrupt_inputs_are_one_line(run, files, tmp_path, capsys)


def run_spacl(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``spacl ARGV`` as a user runs it (the console command, a process of its own), in
    ``cwd``; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "spacl", *argv], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (argv, done.stderr)
    return done


def corrupt_inputs_are_one_line(
    run: Path, files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corrupt image to predict, a folder to predict, the run's own files truncated
    (embed --split, eval) or given as --data: each one line, exit 2."""
    capsys.readouterr()
    feats = tmp_path / "test.npz"
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not a png")
    assert main(["predict", str(run), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "broken.png" in err and "\n" not in err
    assert main(["predict", str(run), str(files[0].parent)]) == 2  # a folder, not an image
    err = capsys.readouterr().err.strip()
    assert "a folder; give its image files" in err and "\n" not in err
    # the run's own folder, its files truncated since: embed --split names one, in one line
    for path in files:
        corrupt(path, "truncated")
    assert main(["embed", str(run), "--split", "test", "--out", str(feats), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("spacl embed: error: unreadable image") and "\n" not in err
    assert "truncated" in err and err.endswith("restore the file as it was in training")
    # eval reads the same split: the same advice (it once said to set data.bad_images,
    # which eval refuses, or to remove the file, which the split record refuses)
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err.strip()  # one line: the split's note is train's alone
    assert "\n" not in err, err
    assert err.startswith("spacl eval: error: unreadable image")
    assert err.endswith("restore the file as it was in training") and "bad_images" not in err
    # the same file given as --data, a folder of the user's: remove it
    argv = ["embed", str(run), "--data", str(files[0].parent.parent), "--out", str(feats)]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--data: unreadable image" in err and err.endswith("; remove it"), err


def test_the_folder_split_note_is_said_once_when_train_makes_the_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``DIR has no 'test' folder: N images held out`` is news when ``spacl train`` makes
    the split; ``--resume``, ``eval`` and ``embed --split`` read that recorded split again
    and said it each time: now only train says it."""
    root = tmp_path / "photos"
    write_folder(root, per_class=4)
    run = tmp_path / "run"
    note = f"{root} has no 'test' folder: 3 images held out as the test split"
    args = overrides(root, "data.test_fraction=0.25")
    assert main(["train", "imagefolder/supcon", *args, "--out", str(run)]) == 0
    assert capsys.readouterr().err.count(note) == 1
    for argv in (
        ["train", str(run), "--resume"],
        ["eval", str(run), "--no-write"],
        ["embed", str(run), "--split", "train", "--out", str(tmp_path / "f.npz")],
    ):
        assert main(argv) == 0, argv
        err = capsys.readouterr().err
        assert "has no 'test' folder" not in err and "held out" not in err, (argv, err)
    # the filter is gone after the command: a new run is told again
    again = tmp_path / "again"
    assert main(["train", "imagefolder/supcon", *args, "--out", str(again)]) == 0
    assert capsys.readouterr().err.count(note) == 1


def test_an_image_run_moved_without_its_folder_predicts_exports_and_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: the run directory alone loads, predicts (class names) and exports, after
    the run is moved and its image folder deleted; only ``embed --split`` needs the data."""
    import shutil

    root = tmp_path / "folder"
    files = write_folder(root / "train")
    keep = tmp_path / "keep.png"
    shutil.copy(files[9], keep)  # a class1 image, kept outside the folder
    trained = tmp_path / "run"
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
                 "--out", str(trained), "--quiet"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["predict", str(trained), str(keep), "--json"]) == 0
    expected = capsys.readouterr().out
    run = tmp_path / "elsewhere" / "moved"
    run.parent.mkdir()
    shutil.move(str(trained), str(run))
    shutil.rmtree(root)
    assert main(["predict", str(run), str(keep), "--json"]) == 0
    assert capsys.readouterr().out == expected
    assert main(["predict", str(run), str(keep)]) == 0
    assert capsys.readouterr().out.split("\t")[1] in {"class0", "class1", "class2"}
    program = tmp_path / "p.pt2"
    assert main(["export", str(run), "--out", str(program)]) == 0
    assert "wrote" in capsys.readouterr().err
    model = spacl.load(run)
    exported = torch.export.load(str(program)).module()
    x = model._as_tensor([keep])
    torch.testing.assert_close(exported(model.transform(x)), model.embed([keep]))
    assert main(["embed", str(run), "--split", "test", "--out", str(tmp_path / "e.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "data.root" in err and str(root) in err and "\n" not in err


def test_a_run_refuses_its_folder_once_files_are_added_or_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The split a run trained on is recorded (split.json); resume, eval and embed --split
    hold the folder to it: unchanged works, added or removed files are one line, exit 2."""
    import json

    root = tmp_path / "photos"
    write_folder(root, per_class=6)  # 18 images, no test/: the run carves its test split
    run = tmp_path / "run"
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
                 "--out", str(run), "--quiet"]) == 0  # fmt: skip
    record = json.loads((run / "split.json").read_text())
    assert record["train"]["count"] + record["test"]["count"] == 18
    assert not set(record["train"]["files"]) & set(record["test"]["files"])
    assert all(f.startswith("class") for f in record["test"]["files"])  # relative paths
    # unchanged folder: everything works as before
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    assert main(["eval", str(run), "--no-write"]) == 0
    feats = tmp_path / "test.npz"
    assert main(["embed", str(run), "--split", "test", "--out", str(feats), "--quiet"]) == 0
    capsys.readouterr()
    write_folder(root, per_class=12)  # 18 more images (the first 18 rewritten the same)
    commands = {
        "train": ["train", str(run), "--resume", "--quiet"],
        "eval": ["eval", str(run), "--no-write"],
        "embed": ["embed", str(run), "--split", "test", "--out", str(feats), "--quiet"],
    }
    for name, argv in commands.items():
        assert main(argv) == 2, name
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"spacl {name}: error:") and "\n" not in err, err
        assert "18 file(s) added (class0/10.png, class0/11.png, class0/6.png" in err
        assert "train a new run" in err and "split.json" in err
    for extra in (root / "class0").glob("*.png"):
        if extra.stem not in {str(i) for i in range(6)}:
            extra.unlink()
    (root / "class2" / "7.png").unlink()
    (root / "class1" / "0.png").unlink()  # one recorded file gone, 11 added ones left
    assert main(commands["eval"]) == 2
    err = capsys.readouterr().err.strip()
    assert "11 file(s) added" in err and "1 file(s) removed (class1/0.png)" in err
    assert "\n" not in err


def test_a_run_without_a_split_record_reads_the_folder_as_it_is(tmp_path: Path) -> None:
    """Runs from before split.json: the folder is split as it is now (today's behaviour)."""
    root = tmp_path / "photos"
    write_folder(root, per_class=6)
    run = tmp_path / "run"
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
                 "--out", str(run), "--quiet"]) == 0  # fmt: skip
    (run / "split.json").unlink()
    write_folder(root, per_class=12)
    assert main(["eval", str(run), "--no-write"]) == 0
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    assert not (run / "split.json").exists()  # a resume does not start a record


def test_a_large_folders_record_keeps_counts_and_fingerprints_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from spacl.data import imagefolder
    from spacl.data.imagefolder import check_split_record, load_imagefolder, write_split_record

    monkeypatch.setattr(imagefolder, "RECORD_PATHS_UP_TO", 4)
    root = tmp_path / "photos"
    write_folder(root, per_class=2)
    data = load_imagefolder(root)
    record = write_split_record(tmp_path / "split.json", data, data, root)
    assert "files" not in json.loads(record.read_text())["train"]
    check_split_record(record, data, data, root)  # unchanged: passes
    write_folder(root, per_class=3)
    more = load_imagefolder(root)
    with pytest.raises(ValueError, match=r"train: 6 file\(s\) recorded, 9 now") as err:
        check_split_record(record, more, data, root)
    assert "\n" not in str(err.value) and "train a new run" in str(err.value)


def test_a_test_folder_with_fewer_classes_is_labelled_by_class_name(tmp_path: Path) -> None:
    """torchvision numbers each folder's classes on its own: a test/ lacking a training
    class shifted every later label (a review's run scored 0% with its cat and dog test
    images labelled 0 and 1, trained as 1 and 2).  Labels follow the class names; a test
    class that is no training class is one line naming it."""
    from spacl.tasks.image.data import folder_splits

    write_folder(tmp_path / "f" / "train", per_class=4)  # class0, class1, class2
    write_folder(tmp_path / "f" / "test", per_class=2)
    import shutil

    shutil.rmtree(tmp_path / "f" / "test" / "class0")
    cfg = load_config(None, overrides(tmp_path / "f"))
    train, test = folder_splits(cfg)
    assert train.classes == test.classes == ["class0", "class1", "class2"]
    assert sorted(set(test.targets)) == [1, 2]  # not [0, 1]
    names = {Path(p).parent.name for p, _ in test.samples}
    assert all(train.classes[y] == Path(p).parent.name for p, y in test.samples) and names
    (tmp_path / "f" / "test" / "fish").mkdir()
    shutil.copy(tmp_path / "f" / "test" / "class1" / "0.png", tmp_path / "f" / "test" / "fish")
    with pytest.raises(ValueError, match=r"class folder\(s\) \['fish'\] that the training"):
        folder_splits(cfg)


def test_a_single_class_folder_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``data.root`` one level too high (``root/animals/{class0,...}``) reads as the one
    class ``animals``: refused in one line before any step, not after training."""
    write_folder(tmp_path / "high" / "animals")
    out = tmp_path / "run"
    assert (
        main(["train", "imagefolder/supcon", "--out", str(out), *overrides(tmp_path / "high")]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 1 class folder ('animals')" in err[0], err
    assert "one level lower" in err[0]
    assert not (out / "checkpoint.pt").exists()


def test_embed_data_labels_follow_the_runs_class_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``embed --data`` on a folder holding some of the run's classes labels them as the
    run does (torchvision would number the folder's own classes from 0); ``--split`` with
    ``--data`` is one line (it was ignored)."""
    import shutil

    import numpy as np

    write_folder(tmp_path / "f")
    run = tmp_path / "run"
    cfg = load_config(None, overrides(tmp_path / "f"))
    Trainer(cfg, run).fit()
    write_folder(tmp_path / "other", per_class=2)
    shutil.rmtree(tmp_path / "other" / "class0")
    out = tmp_path / "o.npz"
    assert main(["embed", str(run), "--data", str(tmp_path / "other"), "--out", str(out)]) == 0
    assert sorted(set(np.load(out)["labels"].tolist())) == [1, 2]
    capsys.readouterr()
    argv = ["embed", str(run), "--data", str(tmp_path / "other"), "--split", "train"]
    assert main([*argv, "--out", str(out)]) == 2
    assert "give one" in capsys.readouterr().err


@pytest.mark.parametrize("not_a_class", [".ipynb_checkpoints", ".hidden", "__MACOSX"])
def test_hidden_and_archive_folders_are_not_classes(tmp_path: Path, not_a_class: str) -> None:
    import pickle

    from spacl.data.imagefolder import load_imagefolder

    root = tmp_path / "folder"
    write_folder(root)
    (root / not_a_class).mkdir()
    first = next((root / "class0").iterdir())
    (root / not_a_class / first.name).write_bytes(first.read_bytes())
    data = load_imagefolder(root)
    assert not_a_class not in data.classes and len(data.classes) >= 2
    assert all(not_a_class not in path for path, _ in data.samples)
    assert pickle.loads(pickle.dumps(data)).classes == data.classes  # spawned workers


def test_an_empty_class_folder_is_named_in_one_line(tmp_path: Path) -> None:
    from spacl.data.imagefolder import load_imagefolder

    root = tmp_path / "folder"
    write_folder(root)
    (root / "emptyclass").mkdir()
    with pytest.raises(FileNotFoundError, match=r"class folder\(s\) emptyclass hold no image"):
        load_imagefolder(root)


def test_a_missing_relative_folder_names_the_directory_it_was_read_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["train", "imagefolder/supcon", "data.root=my imgs", "--out", "r"]) == 2
    err = capsys.readouterr().err
    assert (
        f"image folder 'my imgs' does not exist, read from the current directory {tmp_path}" in err
    )


def test_the_moved_data_hint_quotes_a_run_directory_with_spaces() -> None:
    from spacl.commands import moved_data_error

    err = moved_data_error(FileNotFoundError("gone"), "eval", Path("/tmp/moved place/kg run"))
    assert (
        str(err)
        == "gone; if it moved since training: spacl eval '/tmp/moved place/kg run' data.root=DIR"
    )
