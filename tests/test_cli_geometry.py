"""``spacl geometry`` and ``spacl align`` on files written to tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from spacl.alignment import debiased_cka, linear_cka, rsa
from spacl.cli import main
from spacl.geometry import geometry_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def matplotlib_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib caches fonts under $HOME on first import: keep it in a temp dir."""
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("mplconfig")))


@pytest.fixture
def features() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(4).repeat_interleave(30)
    x = 3.0 * torch.randn(4, 12, generator=g)[y] + torch.randn(120, 12, generator=g)
    return x, y


def value(output: str, key: str) -> float:
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return float(parts[1])
    raise AssertionError(f"{key} not in output:\n{output}")


def test_geometry_on_a_pt_dict(
    tmp_path: Path, features, capsys: pytest.CaptureFixture[str]
) -> None:
    x, y = features
    path = tmp_path / "feats.pt"
    torch.save({"features": x, "labels": y}, path)
    report_json = tmp_path / "out" / "report.json"
    assert main(["geometry", str(path), "--json", str(report_json)]) == 0
    out = capsys.readouterr().out
    expected = geometry_report(x, y)
    for key in ("nc1", "nc2_etf_deviation", "effective_rank_singular", "rankme", "uniformity"):
        assert value(out, key) == pytest.approx(expected[key], rel=1e-5), key
    plot = tmp_path / "feats_spectrum.png"
    assert plot.read_bytes()[:8] == PNG_MAGIC and plot.stat().st_size > 5000
    saved = json.loads(report_json.read_text())
    assert saved["nc1"] == pytest.approx(expected["nc1"])
    assert len(saved["log_spectrum"]) == 12


def test_geometry_with_separate_labels_and_npz(
    tmp_path: Path, features, capsys: pytest.CaptureFixture[str]
) -> None:
    x, y = features
    np.savez(tmp_path / "f.npz", features=x.numpy())
    np.save(tmp_path / "labels.npy", y.numpy())
    plot = tmp_path / "plots" / "s.png"
    code = main(
        [
            "geometry",
            str(tmp_path / "f.npz"),
            "--labels",
            str(tmp_path / "labels.npy"),
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    assert value(capsys.readouterr().out, "nc1") == pytest.approx(
        geometry_report(x, y)["nc1"], rel=1e-5
    )
    assert plot.read_bytes()[:8] == PNG_MAGIC
    # a bare tensor without labels: no neural-collapse rows
    torch.save(x, tmp_path / "bare.pt")
    assert main(["geometry", str(tmp_path / "bare.pt"), "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "rankme" in out and "nc1" not in out
    assert not (tmp_path / "bare_spectrum.png").exists()


def test_align(tmp_path: Path, features, capsys: pytest.CaptureFixture[str]) -> None:
    x, _ = features
    g = torch.Generator().manual_seed(1)
    z = torch.tanh(x @ torch.randn(12, 6, generator=g))
    torch.save(x, tmp_path / "a.pt")
    np.savez(tmp_path / "b.npz", features=z.numpy())
    assert main(["align", str(tmp_path / "a.pt"), str(tmp_path / "b.npz")]) == 0
    out = capsys.readouterr().out
    assert value(out, "linear_cka") == pytest.approx(linear_cka(x, z), rel=1e-6)
    assert value(out, "debiased_cka") == pytest.approx(debiased_cka(x, z), rel=1e-6)
    assert value(out, "rsa_spearman_cosine") == pytest.approx(
        rsa(x, z, method="spearman"), rel=1e-6
    )
    assert (tmp_path / "a_align.png").read_bytes()[:8] == PNG_MAGIC


def test_bad_files_exit_with_a_message(
    tmp_path: Path, features, capsys: pytest.CaptureFixture[str]
) -> None:
    x, y = features
    torch.save(x, tmp_path / "a.pt")
    torch.save(x[:50], tmp_path / "short.pt")
    assert main(["align", str(tmp_path / "a.pt"), str(tmp_path / "short.pt"), "--no-plot"]) == 2
    assert "must match" in capsys.readouterr().err
    assert main(["geometry", str(tmp_path / "missing.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "f.csv").write_text("1,2\n")
    assert main(["geometry", str(tmp_path / "f.csv")]) == 2
    assert "unsupported file type" in capsys.readouterr().err
    torch.save({"features": x, "labels": torch.zeros(120, dtype=torch.int64)}, tmp_path / "one.pt")
    assert main(["geometry", str(tmp_path / "one.pt"), "--no-plot"]) == 2
    assert "at least 2 classes" in capsys.readouterr().err
    torch.save({"features": x, "labels": y[:100]}, tmp_path / "len.pt")
    assert main(["geometry", str(tmp_path / "len.pt"), "--no-plot"]) == 2
    assert "length 100" in capsys.readouterr().err
