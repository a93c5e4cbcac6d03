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


def test_a_features_file_that_is_not_a_torch_archive_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text saved as ``.pt``: torch's weights-only reader raises a ``KeyError``, which
    reached the user as a traceback from ``geometry`` and ``align``."""
    text = tmp_path / "hw.pt"
    text.write_text("hello world")
    good = tmp_path / "f.pt"
    torch.save({"features": torch.randn(20, 4)}, good)
    for argv in (
        ["geometry", str(text)],
        ["geometry", str(good), "--labels", str(text)],
        ["align", str(text), str(good)],
    ):
        err = _one_line_error(capsys, argv)
        assert f"{text} is not a readable .pt file" in err, (argv, err)


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
