"""``spacl reproduce NAME --quick`` end to end, and the study building blocks it relies on."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from spacl.cli import main
from spacl.studies import alignment_study, hard_negatives, spacl_bench
from spacl.studies.common import train_shared
from spacl.studies.verdicts import SMOKE, VERDICTS

STUDY_MODULES = {
    "hard-negatives": hard_negatives,
    "alignment": alignment_study,
    "spacl": spacl_bench,
}


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide embedding cache, so nothing is written under $HOME."""
    return tmp_path_factory.mktemp("spacl-embedding-cache")


def _numbers(obj: Any, path: str = "") -> list[tuple[str, float]]:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return []
    if isinstance(obj, (int, float)):
        return [(path, float(obj))]
    if isinstance(obj, dict):
        return [n for k, v in obj.items() for n in _numbers(v, f"{path}.{k}")]
    if isinstance(obj, list):
        return [n for i, v in enumerate(obj) for n in _numbers(v, f"{path}[{i}]")]
    raise AssertionError(f"{path}: unexpected {type(obj).__name__} in results.json")


@pytest.mark.parametrize("name", list(STUDY_MODULES))
def test_quick_study_writes_every_promised_file_and_key(
    name: str, tmp_path: Path, embedding_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("SPACL_CACHE_DIR", str(embedding_cache))
    module = STUDY_MODULES[name]
    out = tmp_path / name
    assert main(["reproduce", name, "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "reproduced" in printed and str(out / "report.md") in printed

    results = json.loads((out / "results.json").read_text())
    assert results["study"] == name and results["quick"] is True
    assert results["seeds"] == [0]
    assert results["command"] == f"spacl reproduce {name} --quick --out {out}"
    assert results["config"]["study"]  # the full config is recorded
    assert results["non_finite"] == []
    assert [c["key"] for c in results["claims"]] == list(module.CLAIM_KEYS)
    for claim in results["claims"]:
        assert claim["verdict"] in VERDICTS
        assert claim["verdict"] == SMOKE  # a quick run is a smoke run: no verdict
        assert claim["claim"] and claim["paper"] and claim["measured"] and claim["rule"]
    assert set(module.METRIC_KEYS) <= set(results["metrics"])
    numbers = _numbers(results["metrics"]) + _numbers(results["runs"])
    assert len(numbers) > 50
    bad = [p for p, v in numbers if not math.isfinite(v)]
    assert not bad, bad

    report = (out / "report.md").read_text()
    assert f"- Command: `spacl reproduce {name} --quick --out {out}`" in report
    assert "- Commit: `" in report and "- Wall time: " in report
    for i, claim in enumerate(results["claims"], 1):
        assert f"| {i} | {claim['section']} |" in report
        assert f"`{claim['key']}`" in report
    assert results["figures"]
    for fig in results["figures"]:
        assert (out / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({fig})" in report


def test_reproduce_rejects_bad_arguments(tmp_path: Path, capsys: Any) -> None:
    assert main(["reproduce", "spacl", "--quick", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert "--seeds must be an integer >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["reproduce", "no-such-study"])


# --------------------------------------------------------------------------- hard negatives
def test_simplex_etf_is_an_etf() -> None:
    from spacl.geometry import neural_collapse

    for c, d in ((2, 1), (5, 4), (10, 12)):
        m = hard_negatives.simplex_etf(c, d).double()
        assert m.shape == (c, d)
        torch.testing.assert_close(m.norm(dim=1), torch.ones(c, dtype=torch.float64))
        gram = m @ m.T
        off = gram[~torch.eye(c, dtype=torch.bool)]
        torch.testing.assert_close(off, torch.full_like(off, -1.0 / (c - 1)), atol=1e-6, rtol=0)
        if c > 2:
            feats = m.repeat_interleave(3, 0)
            labels = torch.arange(c).repeat_interleave(3)
            assert neural_collapse(feats, labels)["nc2_etf_deviation"] < 1e-6
    with pytest.raises(ValueError, match="dim"):
        hard_negatives.simplex_etf(5, 3)


def test_hard_negative_data_falls_back_to_synthetic_and_says_so(tmp_path: Path) -> None:
    cfg = hard_negatives.QUICK
    data = hard_negatives.study_data(cfg, root=tmp_path / "empty", cache_dir=tmp_path / "cache")
    assert data.source == "synthetic-fallback"
    assert data.note.startswith("FALLBACK") and "CLINC150" in data.note
    assert data.num_classes == cfg.fallback_classes
    counts = torch.bincount(data.train.labels[data.track])
    assert torch.all(counts == cfg.track_per_class)


def test_per_class_first_keeps_file_order() -> None:
    labels = torch.tensor([2, 0, 2, 1, 0, 2, 1, 0])
    idx = hard_negatives.per_class_first(labels, 2)
    assert idx.tolist() == [0, 1, 2, 3, 4, 6]
    assert hard_negatives.per_class_first(labels, None).tolist() == list(range(8))


# -------------------------------------------------------------------------------- alignment
class _Recorder:
    """Stands in for an Arm: records what it is fed."""

    def __init__(self) -> None:
        self.seen: list[tuple[torch.Tensor, torch.Tensor, int]] = []

    def train_step(self, views: torch.Tensor, labels: torch.Tensor, step: int) -> float:
        self.seen.append((views.clone(), labels.clone(), step))
        return 0.0


def test_shared_randomness_same_init_same_batches_same_augmentations() -> None:
    from spacl.data import ViewStream

    cfg = alignment_study.QUICK
    train, _ = alignment_study.load_split(cfg, 10)
    arms = alignment_study.build_arms(
        cfg, list(alignment_study.ARMS), in_dim=784, classes=10, tau=0.5, lr=0.1, seed=3
    )
    # same initial encoder in every arm (the CE arm differs only in its classifier head)
    ref = arms["CL"].model.backbone.state_dict()
    for name, arm in arms.items():
        for key, value in arm.model.backbone.state_dict().items():
            assert torch.equal(value, ref[key]), (name, key)
    heads = [arms[n].model.head.state_dict() for n in ("CL", "NSCL", "SCL")]
    for head in heads[1:]:
        assert all(torch.equal(head[k], heads[0][k]) for k in heads[0])
    # every arm is fed the identical batch (instances and augmentation tensors) each step
    stream = ViewStream(train, 100, 2, alignment_study.augment(cfg), seed=3, balanced=True)
    recorders = {n: _Recorder() for n in ("a", "b", "c")}
    steps = train_shared(recorders, stream, 2)
    assert steps == 2 * len(stream)
    first = recorders["a"].seen
    assert len(first) == steps
    for rec in recorders.values():
        for (v1, y1, s1), (v2, y2, s2) in zip(first, rec.seen, strict=True):
            assert torch.equal(v1, v2) and torch.equal(y1, y2) and s1 == s2
    # the two views of an instance differ (augmentation happened) and batches are balanced
    v, y, _ = first[0]
    assert not torch.equal(v[:, 0], v[:, 1])
    assert torch.all(torch.bincount(y, minlength=10) == 10)
    # a second stream with the same seed reproduces the batches exactly
    again = ViewStream(train, 100, 2, alignment_study.augment(cfg), seed=3, balanced=True)
    assert torch.equal(again.batch(1, 0).views, first[len(stream)][0])


def test_shared_training_stops_at_max_steps_and_closes_the_partial_epoch() -> None:
    """``train_shared`` in the engine's loop: ``on_epoch`` before training and after every
    epoch, the last partial one included; ``max_steps`` counts steps, not epochs; the
    steps are numbered from 0 for every arm."""
    from spacl.data import ViewStream

    cfg = alignment_study.QUICK
    train, _ = alignment_study.load_split(cfg, 10)
    stream = ViewStream(train, 100, 2, alignment_study.augment(cfg), seed=3, balanced=True)
    n = len(stream)
    for limit, calls in ((n + 1, [0, 1, 2]), (n, [0, 1]), (None, [0, 1, 2, 3])):
        epochs: list[int] = []
        arms = {"a": _Recorder(), "b": _Recorder()}
        steps = train_shared(arms, stream, 3, epochs.append, max_steps=limit)
        assert steps == (limit or 3 * n) and epochs == calls, (limit, steps, epochs)
        assert [s for _, _, s in arms["b"].seen] == list(range(steps))
    with pytest.raises(ValueError, match="max_steps"):
        train_shared({"a": _Recorder()}, stream, 1, max_steps=0)


def test_alignment_snapshot_of_identical_arms_is_perfect() -> None:
    cfg = alignment_study.QUICK
    _, test = alignment_study.load_split(cfg, 10)
    arms = alignment_study.build_arms(
        cfg, ["CL", "NSCL"], in_dim=784, classes=10, tau=0.5, lr=0.1, seed=0
    )
    snap = alignment_study.alignment_snapshot(arms, test[torch.arange(50)])
    assert snap["cka_NSCL"] == pytest.approx(1.0, abs=1e-9)
    assert snap["rsa_NSCL"] == pytest.approx(1.0, abs=1e-9)
    assert snap["weight_distance_NSCL"] == 0.0


# ------------------------------------------------------------------------------------ spacl
def test_spacl_certificate_failure_is_undecided(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacl.studies.spacl_bench import diagnostics

    p = torch.tensor([1.0, 0.0], dtype=torch.float64)
    negatives = torch.tensor([[0.0, 1.0], [0.0, -1.0]], dtype=torch.float64)
    # the segment between (0, 1) and (0, -1) holds only 0 * p: certified (Corollary 2.2)
    assert diagnostics.certified(p, negatives) is True
    shifted = torch.tensor([[1.0, 1.0], [1.0, -1.0]], dtype=torch.float64)
    assert diagnostics.certified(p, shifted) is False  # (1, 0) = p lies in the hull

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("linear program failed (status 4)")

    monkeypatch.setattr(diagnostics, "non_collapse_certificate", broken)
    assert diagnostics.certified(p, negatives) is None


#: files opened while recording (:func:`_record_opens`; an audit hook stays installed)
_OPENED: list[list[str]] = []


def _record_opens(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _OPENED and isinstance(args[0], (str, Path)):
        _OPENED[-1].append(str(args[0]))


def _untracked_reads(opened: list[str], root: Path) -> list[str]:
    """The data files under ``root`` among ``opened`` that git does not track (sources,
    byte code, the virtual environment and the test's own temporaries left out)."""
    import subprocess

    tracked = set(
        subprocess.run(
            ["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    )
    untracked = set()
    for name in opened:
        path = Path(name).resolve()
        if not path.is_relative_to(root) or path.is_dir():
            continue
        relative = path.relative_to(root)
        if relative.parts[0] in (".venv", ".git") or path.suffix in (".py", ".pyc"):
            continue
        if relative.as_posix() not in tracked:
            untracked.add(relative.as_posix())
    return sorted(untracked)


@pytest.mark.parametrize("name", ["alignment", "hard-negatives", "spacl"])
def test_a_committed_report_regenerates_from_its_committed_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """``spacl reproduce NAME --report-only``: the committed report again, from the
    committed results.json alone (no run store, no data), identical but for the stamp
    line naming the code that regenerated it; the Date line is the stored start (or "not
    recorded"), the same as the committed one, never this invocation's clock."""
    root = Path(__file__).resolve().parents[1]
    committed = root / "docs" / "results" / name
    args = ["reproduce", name, "--report-only", "--from", str(committed)]
    import sys

    if _record_opens not in getattr(sys, "_spacl_audit_hooks", ()):
        sys.addaudithook(_record_opens)
        sys._spacl_audit_hooks = (_record_opens,)  # type: ignore[attr-defined]
    _OPENED.append([])
    try:
        assert main([*args, "--out", str(tmp_path / "again"), "--quiet"]) == 0
    finally:
        opened = _OPENED.pop()
    # it reads committed files only (a fresh clone has nothing else): every file it opened
    # in the checkout is tracked by git
    assert any(Path(x).name == "results.json" for x in opened)
    if (root / ".git").exists():
        assert _untracked_reads(opened, root) == []

    def kept(text: str) -> list[str]:
        return [x for x in text.splitlines() if not x.startswith("- Regenerated")]

    again = (tmp_path / "again" / "report.md").read_text()
    assert kept(again) == kept((committed / "report.md").read_text())
    assert [x for x in again.splitlines() if x.startswith("- Date: ")]  # the Date line kept
    assert "- Regenerated from the stored results.json" in again
    # the committed results.json holds the claims as the code decides them now
    import json

    stored = json.loads((committed / "results.json").read_text())["claims"]
    assert json.loads((tmp_path / "again" / "results.json").read_text())["claims"] == stored
    capsys.readouterr()
    assert main([*args[:3], "--from", str(tmp_path / "nothing"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no stored results.json" in err and "\n" not in err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{}", "missing study, title"),
        ("not json", "not a JSON file"),
        ("[1, 2]", "holds an object, got list"),
        ('{"study": "spacl"}', "missing title"),
    ],
)
def test_report_only_on_a_malformed_store_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    """A ``--from`` file that is not a study's results.json: one line naming the file and
    what is wrong, exit 2 (a review found a 20-line ``KeyError`` for ``{}``)."""
    bad = tmp_path / "results.json"
    bad.write_text(text)
    args = ["reproduce", "spacl", "--report-only", "--from", str(bad), "--out", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and str(bad) in err and "\n" not in err, err


STUDY_NAMES = ("spacl", "alignment", "hard-negatives")


@pytest.mark.parametrize("name", STUDY_NAMES)
def test_report_only_from_another_studys_results_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """``--from`` another study's committed results.json: one line naming both studies,
    exit 2 (a review found a 28-line ``KeyError`` and a misleading constructor error)."""
    root = Path(__file__).resolve().parents[1] / "docs" / "results"
    other = STUDY_NAMES[(STUDY_NAMES.index(name) + 1) % len(STUDY_NAMES)]
    args = ["reproduce", name, "--report-only", "--from", str(root / other)]
    assert main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"the results of the {other!r} study, not of {name!r}" in err and "\n" not in err


@pytest.mark.parametrize("name", STUDY_NAMES)
def test_report_only_on_a_store_lacking_what_the_report_reads_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A study's results.json with a metrics section gone, or a key gone deeper down:
    one line naming what is missing, exit 2, never a traceback."""
    import json

    root = Path(__file__).resolve().parents[1] / "docs" / "results" / name
    stored = json.loads((root / "results.json").read_text())
    section = sorted(k for k in stored["metrics"] if k not in ("open_intent", "kg_seeds"))[0]
    lacking = json.loads(json.dumps(stored))
    del lacking["metrics"][section]
    (tmp_path / "section.json").write_text(json.dumps(lacking))
    args = ["reproduce", name, "--report-only", "--out", str(tmp_path / "o")]
    assert main([*args, "--from", str(tmp_path / "section.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"lack {section}" in err and "\n" not in err, err
    if name == "spacl":  # below the sections: one setting's tuning record
        deep = json.loads(json.dumps(stored))
        bench = next(iter(deep["metrics"]["benches"].values()))
        del next(iter(bench.values()))["tuning"]
        (tmp_path / "deep.json").write_text(json.dumps(deep))
        assert main([*args, "--from", str(tmp_path / "deep.json")]) == 2
        err = capsys.readouterr().err.strip()
        assert "lack 'tuning'" in err and "\n" not in err, err


def test_report_only_without_from_reads_the_committed_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's command as typed, ``spacl reproduce NAME --report-only`` with no
    ``--from``: from the checkout's root and from another directory alike it reads the
    committed docs/results/NAME (the report's claims equal the committed ones)."""
    import json

    root = Path(__file__).resolve().parents[1]
    committed = json.loads((root / "docs/results/hard-negatives/results.json").read_text())
    for where in (root, tmp_path):
        monkeypatch.chdir(where)
        out = tmp_path / f"out-{where.name}"
        assert main(["reproduce", "hard-negatives", "--report-only", "--out", str(out)]) == 0
        again = json.loads((out / "results.json").read_text())
        assert again["claims"] == committed["claims"]
    capsys.readouterr()


def test_the_date_is_the_stored_start_never_the_regeneration_clock(tmp_path: Path) -> None:
    """A study stores its start in results.json (UTC) and prints it as the Date; its
    report regenerated later prints the same Date; results that predate the record say
    "not recorded" instead of a date made from the regeneration time minus the wall time."""
    from spacl.studies.study import StudyRun, stored_results

    started = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
    study = StudyRun.start("s", "S", tmp_path / "run", "cmd", {}, [0, 1, 2], False, started=started)
    study.report.wall_time_s = 3600.0
    study.report.write()
    stored = stored_results(tmp_path / "run")
    assert stored["started"] == "2023-11-14T22:13:20Z"

    def date(out: Path) -> str:
        return next(
            x for x in (out / "report.md").read_text().splitlines() if x.startswith("- Date")
        )

    first = date(tmp_path / "run")
    assert first.startswith("- Date: 2023-11-14 22:13 UTC")
    StudyRun.restore(stored, tmp_path / "again").report.write()
    assert date(tmp_path / "again") == first
    assert stored_results(tmp_path / "again")["started"] == "2023-11-14T22:13:20Z"
    older = {k: v for k, v in stored.items() if k != "started"}
    StudyRun.restore(older, tmp_path / "older").report.write()
    assert date(tmp_path / "older").startswith("- Date: not recorded")
    assert stored_results(tmp_path / "older")["started"] is None  # still not recorded


def test_spacl_bench_report_only_finds_the_committed_results_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m spacl.studies.spacl_bench --report-only`` with no run store and no
    ``--from``, run from a directory without docs/results/spacl: the committed results of
    the source checkout, as ``spacl reproduce spacl --report-only`` finds them."""
    import json

    from spacl.studies.spacl_bench import main as bench_main
    from spacl.studies.study import committed_results

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    assert committed_results("spacl") == root / "docs" / "results" / "spacl"
    bench_main(["--bench", "all", "--report-only", "--out", str(tmp_path / "out")])
    again = json.loads((tmp_path / "out" / "results.json").read_text())
    committed = json.loads((root / "docs/results/spacl/results.json").read_text())
    assert again["claims"] == committed["claims"]
    # with no checkout either (an installed package), nothing is found
    monkeypatch.setattr("spacl.data.sources.source_checkout", lambda: None)
    assert committed_results("spacl") is None


def test_spacl_provenance_counts_trained_runs_apart_from_untrained_rows() -> None:
    """The raw-input and frozen-encoder rows train nothing: they are not counted among the
    runs with no recorded commit, so that count is the Compute line's imported runs."""
    import json

    from spacl.studies.spacl_bench import provenance, untrained_rows

    rows = [
        {"method": "SimCLR", "commit": "abc"},
        {"method": "SimCLR", "commit": "abc+dirty"},
        {"method": "SupCon", "commit": None},
        {"method": "raw inputs", "commit": None},
        {"method": "frozen encoder"},
    ]
    assert provenance(rows) == {"runs": 3, "clean": 1, "modified_tree": 1, "no_commit": 1}
    assert untrained_rows(rows) == 2
    root = Path(__file__).resolve().parents[1]
    stored = json.loads((root / "docs/results/spacl/results.json").read_text())
    p = provenance(stored["runs"])
    assert p["no_commit"] == stored["metrics"]["compute"]["untimed_runs"] == 236
    assert p["runs"] + untrained_rows(stored["runs"]) == len(stored["runs"])
    report = (root / "docs/results/spacl/report.md").read_text()
    assert "10 untrained baseline" in report and "plus 236 run(s) imported" in report
    # the header counts every trained run the report reads: the run store's, and the
    # diagnostics' encoders (no commit), the FB15k-237 and open-intent seed runs
    from spacl.studies.spacl_bench.claim_runs import read_provenance

    whole, parts = read_provenance(stored["metrics"], stored["runs"])
    diagnostics = 2 * len(stored["metrics"]["diagnostics"]["seeds"])
    kg = sum(len(v) for v in stored["metrics"]["kg_seeds"]["run_commits"].values())
    oi = sum(len(v) for v in stored["metrics"]["open_intent"]["commits"].values())
    assert [n for _, n in parts] == [p["runs"], diagnostics, kg, oi]
    assert whole["runs"] == p["runs"] + diagnostics + kg + oi == 685
    assert whole["no_commit"] == p["no_commit"] + diagnostics == 246
    header = next(x for x in report.splitlines() if x.startswith("- Runs' own commits:"))
    assert f"of the {whole['runs']} trained runs this report reads" in header
    assert f"{whole['no_commit']} with no recorded commit" in header
    assert f"{p['runs']} in the run store" in header and f"{kg} FB15k-237 seed runs" in header
    assert f"Provenance of the {whole['runs']} trained runs this report reads" in report
    # the resumed FB15k-237 runs counted clean by their final process say so (a review)
    resumed = len(stored["metrics"]["kg_seeds"]["resumed_unrecorded"])
    assert resumed == 3
    assert (
        f"{whole['clean']} at a clean commit ({resumed} of them resumed from a checkpoint" in header
    )


def test_alignment_points_are_counted_once_by_content() -> None:
    """A shared sweep point is one object in a live run and several equal copies after a
    JSON round trip: both count it once."""
    import json

    from spacl.studies.alignment_study.report import _points

    shared = {"bound": {"x": {"values": [1.0, 2.0]}}, "cka": 0.5}
    other = {"bound": {"x": {"values": [3.0, 4.0]}}, "cka": 0.6}
    live = {
        "classes": {"2": other, "10": shared},
        "tau": {"0.5": shared},
        "batch": {"sqrt": {"100": shared}},
        "batch_steps": {"sqrt": {"100": shared}},
    }
    assert len(_points(live)) == 2
    assert len(_points(json.loads(json.dumps(live)))) == 2


def test_the_tracked_files_check_names_an_untracked_read(tmp_path: Path) -> None:
    """Counter-example of the regeneration test's guard: in a git checkout, a read of a
    file git does not track is named; tracked files, sources and directories are not."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "results.json").write_text("{}")
    (tmp_path / "store.jsonl").write_text("")
    (tmp_path / "code.py").write_text("")
    subprocess.run(["git", "-C", str(tmp_path), "add", "results.json"], check=True)
    opened = [str(tmp_path / n) for n in ("results.json", "store.jsonl", "code.py", ".")]
    assert _untracked_reads(opened, tmp_path.resolve()) == ["store.jsonl"]
