"""Bad input to every command is one line and a non-zero exit (issue 38), for what a review
of the fresh clone still found with a traceback or a wrong name: a damaged ``config.yaml``
in a run directory, a features file that is not a torch archive, output names whose
suffix says another format, and the wording of three messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import spacl
from spacl.cli import main

QUICK = [
    "train.max_steps=2",
    "eval.every_epochs=0",
    "eval.linear_probe=false",
    "eval.geometry=false",
]


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """stderr of ``spacl ARGV``, which must exit 2 with one line and no traceback."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-step digits run, trained from a relative ``out_dir``."""
    base = tmp_path_factory.mktemp("digits")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(base)
        assert main(["train", "digits/supcon", *QUICK, "out_dir=myruns", "--quiet"]) == 0
    (run,) = (base / "myruns").iterdir()
    return run


def test_a_damaged_config_yaml_is_one_line_in_every_command(
    digits_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose ``config.yaml`` is not YAML any more: predict, eval, export, embed and
    train --resume each name the file in one line (a review saw 30 lines of yaml's
    traceback); ``spacl.load`` raises the same ``ValueError``."""
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(digits_run, bad)
    (bad / "config.yaml").write_text("garbage: : [\n")
    image = tmp_path / "x.png"
    from PIL import Image

    Image.new("L", (8, 8)).save(image)
    for argv in (
        ["predict", str(bad), str(image)],
        ["eval", str(bad)],
        ["export", str(bad), "--out", str(tmp_path / "e.pt2")],
        ["embed", str(bad), "--out", str(tmp_path / "e.npz")],
        ["train", str(bad), "--resume"],
    ):
        err = _one_line_error(capsys, argv)
        assert f"{bad / 'config.yaml'} is damaged, not valid YAML" in err, (argv, err)
    with pytest.raises(ValueError, match="is damaged, not valid YAML"):
        spacl.load(bad)
    (bad / "config.yaml").write_text("- a list\n")
    err = _one_line_error(capsys, ["eval", str(bad)])
    assert "is damaged: it must hold a mapping, got ListConfig" in err


@pytest.mark.parametrize(
    ("content", "cause"), [(b"hello world", "KeyError"), (b"junk", "struct.error")]
)
def test_a_features_file_that_is_not_a_torch_archive_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, cause: str
) -> None:
    """Text saved as ``.pt``: torch's weights-only reader raises a ``KeyError`` (``hello
    world``) or, on a file shorter than its legacy header, a ``struct.error`` (``junk``),
    which reached the user as a traceback from ``geometry`` and ``align``."""
    text = tmp_path / "hw.pt"
    text.write_bytes(content)
    with pytest.raises(Exception) as raised:  # the reader's own error, which is named
        torch.load(text, weights_only=True)
    assert cause.endswith(type(raised.value).__name__), raised.value
    good = tmp_path / "f.pt"
    torch.save({"features": torch.randn(20, 4)}, good)
    for argv in (
        ["geometry", str(text)],
        ["geometry", str(good), "--labels", str(text)],
        ["align", str(text), str(good)],
    ):
        err = _one_line_error(capsys, argv)
        assert f"{text} is not a readable .pt file ({cause}" in err, (argv, err)


def test_an_output_name_whose_suffix_says_another_format_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--plot`` writes a PNG, ``--json`` JSON, ``train --out`` and ``reproduce --out`` a
    directory: a name that says otherwise is refused before any work (they all exited 0);
    the right names still work."""
    feats = tmp_path / "f.pt"
    torch.save({"features": torch.randn(30, 4)}, feats)
    err = _one_line_error(capsys, ["geometry", str(feats), "--plot", str(tmp_path / "p.txt")])
    assert "--plot writes a .png file" in err
    err = _one_line_error(
        capsys, ["geometry", str(feats), "--no-plot", "--json", str(tmp_path / "j.png")]
    )
    assert "--json writes a .json file" in err
    err = _one_line_error(
        capsys, ["align", str(feats), str(feats), "--plot", str(tmp_path / "a.jpg")]
    )
    assert "--plot writes a .png file" in err
    run_out = tmp_path / "runs" / "d.pt"
    err = _one_line_error(capsys, ["train", "digits/supcon", "--out", str(run_out)])
    assert "--out names the directory the run writes" in err and not run_out.exists()
    err = _one_line_error(capsys, ["reproduce", "alignment", "--report-only", "--out", "r.json"])
    assert "--out names the directory" in err
    err = _one_line_error(capsys, ["demo", "--out", str(tmp_path / "res.json")])
    assert "--out names the directory" in err and not (tmp_path / "res.json").exists()
    (tmp_path / "taken.npz").write_bytes(b"")  # an existing file: no NotADirectoryError
    for cmd in (["demo"], ["train", "digits/supcon"]):
        err = _one_line_error(capsys, [*cmd, "--out", str(tmp_path / "taken.npz")])
        assert "names the directory the run writes" in err and "a file" in err, err
    # the names that say what is written pass
    plot, data = tmp_path / "p.png", tmp_path / "j.json"
    argv = ["geometry", str(feats), "--plot", str(plot), "--json", str(data)]
    assert main(argv) == 0
    assert plot.read_bytes()[:4] == b"\x89PNG" and data.read_text().startswith("{")


def test_a_run_stores_out_dir_absolute(digits_run: Path) -> None:
    """``out_dir=myruns`` from a working directory: the run's ``config.yaml`` names the
    directory absolute, not relative to where ``spacl train`` ran (issue 38)."""
    from omegaconf import OmegaConf

    saved = OmegaConf.load(digits_run / "config.yaml")
    assert Path(saved.out_dir).is_absolute() and Path(saved.out_dir) == digits_run.parent


def test_embed_names_a_numpy_dtype_as_numpy(digits_run: Path) -> None:
    """A uint8 numpy batch is refused naming numpy's dtype (it said ``torch.uint8``)."""
    model = spacl.load(digits_run)
    with pytest.raises(TypeError, match=r"got numpy uint8 \(images: divide 0-255"):
        model.embed(np.zeros((2, 1, 8, 8), dtype=np.uint8))
    with pytest.raises(TypeError, match=r"got torch.uint8"):
        model.embed(torch.zeros(2, 1, 8, 8, dtype=torch.uint8))


def test_a_missing_image_folder_of_a_new_run_is_not_said_to_have_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh ``spacl train imagefolder/supcon`` on a folder that does not exist: the
    message allows a typo first (it said "moved since training?" before any training)."""
    missing = tmp_path / "nonexist"
    err = _one_line_error(capsys, ["train", "imagefolder/supcon", f"data.root={missing}"])
    assert f"image folder {str(missing)!r} does not exist (a typo?" in err


def test_the_unreadable_image_advice_fits_a_trained_run() -> None:
    """The advice for an unreadable file names what a trained run needs: its split holds
    the file, so ``eval`` / ``embed`` / ``--resume`` need it back (they refuse
    ``data.bad_images=skip``, which the message alone offered)."""
    from spacl.data.imagefolder import BAD_IMAGE_ADVICE

    assert "data.bad_images=skip to train without it" in BAD_IMAGE_ADVICE
    assert "restore the file" in BAD_IMAGE_ADVICE


def test_an_output_that_cannot_be_written_is_refused_naming_its_argument(
    digits_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` / ``--json`` / ``--plot`` naming an existing folder (for a file) or a path
    under a file: one line naming the argument, before any work (they were tracebacks,
    ``embed`` after computing every feature and leaving ``d.npz.tmp.npz`` behind)."""
    feats = tmp_path / "f.pt"
    torch.save({"features": torch.randn(20, 4)}, feats)
    junk = tmp_path / "j.npz"  # a file where a folder would have to be
    junk.write_bytes(b"junk")
    folders = {name: tmp_path / name for name in ("d.npz", "d.pt2", "d.json", "d.png")}
    for folder in folders.values():
        folder.mkdir()
    a_folder = [
        (["embed", str(digits_run), "--out", str(folders["d.npz"])], "--out"),
        (["export", str(digits_run), "--out", str(folders["d.pt2"])], "--out"),
        (["geometry", str(feats), "--no-plot", "--json", str(folders["d.json"])], "--json"),
        (["geometry", str(feats), "--plot", str(folders["d.png"])], "--plot"),
        (["align", str(feats), str(feats), "--no-plot", "--json", str(folders["d.json"])],
         "--json"),
    ]  # fmt: skip
    for argv, option in a_folder:
        err = _one_line_error(capsys, argv)
        assert f"{option} writes a" in err and "an existing folder: name a file" in err, err
        assert str(Path(argv[argv.index(option) + 1])) in err, err
    under_a_file = [
        (["embed", str(digits_run), "--out", str(junk / "x.npz")], "--out"),
        (["export", str(digits_run), "--out", str(junk / "x.pt2")], "--out"),
        (["geometry", str(feats), "--no-plot", "--json", str(junk / "g.json")], "--json"),
        (["geometry", str(feats), "--plot", str(junk / "p.png")], "--plot"),
        (["train", "digits/supcon", *QUICK, "--out", str(junk / "run")], "--out"),
    ]
    for argv, option in under_a_file:
        err = _one_line_error(capsys, argv)
        assert f"{option} {str(Path(argv[argv.index(option) + 1]))!r} cannot be written" in err
        assert f"{str(junk)!r} is a file, not a folder" in err, err
    assert junk.read_bytes() == b"junk"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*folders, "f.pt", "j.npz"])
    assert all(not any(folder.iterdir()) for folder in folders.values())  # nothing written


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_out_that_the_system_refuses_names_out_not_a_scratch_file(
    digits_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``/proc`` takes no new file: the system's refusal is one line naming ``--out`` (it
    named ``x.npz.features.npy``, the memory map written next to it)."""
    for command, out in (("embed", "/proc/x.npz"), ("export", "/proc/x.pt2")):
        err = _one_line_error(capsys, [command, str(digits_run), "--out", out])
        assert f"--out {out!r} cannot be written (No such file or directory)" in err, err
        assert ".features.npy" not in err and not Path(out).exists(), err


def test_write_features_leaves_no_scratch_file_when_the_output_fails(tmp_path: Path) -> None:
    """The packed ``.tmp`` file and the memory map are removed when the last step fails
    (a folder at ``path``: ``replace`` cannot put a file there), and the error names the
    output as its argument."""
    from spacl.commands.embed import write_features

    out = tmp_path / "d.npz"
    out.mkdir()
    rows = iter([(torch.randn(3, 2), torch.arange(3))])
    with pytest.raises(OSError, match=r"^--data-out '.*d\.npz' cannot be written \(Is a"):
        write_features(out, 3, rows, option="--data-out")
    assert [p.name for p in tmp_path.iterdir()] == ["d.npz"] and not any(out.iterdir())
    good = tmp_path / "f.NPZ"  # any case of the suffix: np.savez adds none
    assert write_features(good, 3, iter([(torch.randn(3, 2), torch.arange(3))])) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npz", "f.NPZ"]
    assert np.load(good)["labels"].tolist() == [0, 1, 2]


def test_os_errors_past_the_checks_are_one_line_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ``OSError`` the checks could not foresee (a full disk, a permission) is one line
    with the system's reason and the file, exit 2; a broken pipe is still no error."""
    import errno
    import os
    import sys

    from spacl.commands import recipes

    def full_disk(args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "out/x.npz")

    monkeypatch.setattr(recipes, "run", full_disk)
    err = _one_line_error(capsys, ["recipes"])
    assert err == "spacl recipes: error: No space left on device: 'out/x.npz'"

    def reader_left(args: object) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(recipes, "run", reader_left)
    with open(os.devnull, "w") as devnull:  # a stdout with a descriptor, left as it is
        monkeypatch.setattr(sys, "stdout", devnull)
        monkeypatch.setattr(os, "dup2", lambda fd, fd2: None)
        assert main(["recipes"]) == 0


def test_a_damaged_class_centres_file_is_named_as_such(
    digits_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``centres.pt`` that torch cannot read, or that holds no per-arm centres: predict
    names the class-centres file and the command that writes it again (it said
    "checkpoint ... could not be read"); ``spacl eval`` does write it again."""
    import shutil

    from PIL import Image

    run = tmp_path / "run"
    shutil.copytree(digits_run, run)
    image = tmp_path / "x.png"
    Image.new("L", (8, 8)).save(image)
    for content in (b"junk", None):
        if content is None:
            torch.save({"arms": {"main": {"classes": torch.arange(3)}}}, run / "centres.pt")
        else:
            (run / "centres.pt").write_bytes(content)
        err = _one_line_error(capsys, ["predict", str(run), str(image)])
        assert f"the class-centres file {run / 'centres.pt'} is damaged" in err, err
        assert err.endswith(f"run `spacl eval {run}` to compute the class centres again"), err
        assert "checkpoint" not in err
    assert main(["eval", str(run)]) == 0
    capsys.readouterr()
    assert main(["predict", str(run), str(image)]) == 0
    assert capsys.readouterr().out.startswith(f"{image}\t")


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-epoch run on an own image folder without ``test/``: it writes ``split.json``."""
    from test_own_images import overrides, write_folder

    base = tmp_path_factory.mktemp("folder")
    write_folder(base / "photos", per_class=4)
    run = base / "run"
    argv = ["train", "digits/simclr", *overrides(base / "photos"), "--out", str(run), "--quiet"]
    assert main(argv) == 0
    assert (run / "split.json").is_file()
    return run


@pytest.mark.parametrize(
    ("content", "why"),
    [("", "not valid JSON: Expecting value"), ("[]\n", "no train fingerprint"),
     ('{"train": {"sha256": "x", "count": 1}}', "no test fingerprint")],
)  # fmt: skip
def test_a_damaged_split_record_is_named_with_what_to_do(
    folder_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    why: str,
) -> None:
    """A ``split.json`` that is not JSON (or not the record's layout): ``embed``, ``eval``
    and ``train --resume`` name the file and the ways on in one line (they printed
    ``error: Expecting value: line 1 column 1 (char 0)``)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(folder_run, run)
    (run / "split.json").write_text(content)
    for argv in (
        ["embed", str(run), "--out", str(tmp_path / "e.npz"), "--quiet"],
        ["eval", str(run), "--no-write"],
        ["train", str(run), "--resume", "--quiet"],
    ):
        err = _one_line_error(capsys, argv)
        assert f"the split record {run / 'split.json'} is damaged ({why}" in err, (argv, err)
        assert "restore it from a copy of the run, or delete it to skip this check" in err
    (run / "split.json").unlink()  # the way out it names
    assert main(["eval", str(run), "--no-write"]) == 0


def test_an_out_dir_key_that_cannot_hold_a_run_names_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``out_dir=`` (the folder a new run is made in) under a file, or a file itself, is
    one line naming the config key before anything is written; a spacl FileNotFoundError
    keeps its message, and a system one loses its ``[Errno N]`` prefix."""
    note = tmp_path / "notes.txt"
    note.write_text("x")
    err = _one_line_error(capsys, ["train", "digits/supcon", *QUICK, f"out_dir={note}/runs"])
    assert err == (
        f"spacl train: error: config key 'out_dir' {str(note / 'runs')!r} cannot be written: "
        f"{str(note)!r} is a file, not a folder"
    )
    err = _one_line_error(capsys, ["train", "digits/supcon", *QUICK, f"out_dir={note}"])
    assert "config key 'out_dir' names the directory the run writes" in err
    assert not any(p.name != "notes.txt" for p in tmp_path.iterdir())
    err = _one_line_error(capsys, ["eval", str(tmp_path / "no-such-run")])
    assert "[Errno" not in err and "no-such-run" in err


def test_out_suffixes_match_in_any_case_in_embed_and_export(
    digits_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every ``--out`` suffix is matched in any case (``embed --out f.NPZ`` was taken and
    ``export --out x.PT2`` refused): the file is written under the name given, holding
    what its suffix says; a suffix of another format is one line in both commands."""
    program = tmp_path / "enc.PT2"
    assert main(["export", str(digits_run), "--out", str(program)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc.PT2"]  # that name, no other
    extra = {"spacl.json": ""}
    with program.open("rb") as handle:  # a torch.export archive
        exported = torch.export.load(handle, extra_files=extra).module()
    model = spacl.load(digits_run)
    x = torch.rand(3, *model.input_shape)
    torch.testing.assert_close(exported(model.transform(x)), model.embed(x))
    assert '"input_shape": [1, 8, 8]' in extra["spacl.json"]
    features = tmp_path / "f.NPZ"
    assert main(["embed", str(digits_run), "--out", str(features), "--quiet"]) == 0
    with np.load(features) as z:  # an npz archive under the name given
        assert z["features"].shape[0] == z["labels"].shape[0] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc.PT2", "f.NPZ"]
    err = _one_line_error(capsys, ["export", str(digits_run), "--out", str(tmp_path / "e.ONNX")])
    assert "--out must name a .pt2 file" in err and "'" + str(tmp_path / "e.ONNX") in err
    err = _one_line_error(capsys, ["embed", str(digits_run), "--out", str(tmp_path / "f.Pt2")])
    assert "--out writes a .npz or .pt file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc.PT2", "f.NPZ"]
    with pytest.raises(ValueError, match=r"must name a \.pt2 file"):
        spacl.trained.export_encoder(model, tmp_path / "e.pt")


def test_predict_names_a_missing_image_without_the_errno_prefix(
    digits_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``spacl predict RUN nope.png`` kept ``[Errno 2]`` in its line, which the rest of the
    command line strips: the system's reason and the file, as every other command says."""
    missing = tmp_path / "nope.png"
    err = _one_line_error(capsys, ["predict", str(digits_run), str(missing)])
    assert err == (
        f"spacl predict: error: cannot read image {str(missing)!r}: No such file or directory"
    )
    with pytest.raises(ValueError, match=r"nope\.png'\: No such file or directory$"):
        spacl.load(digits_run).embed([missing])
