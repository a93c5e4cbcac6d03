"""``spacl train`` / ``spacl eval``: recipes, overrides, validation before training, resume."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
import torch

from spacl.cli import main
from spacl.engine import load_checkpoint
from spacl.tasks.image import load_config

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
FAST = [
    "data.synthetic.samples_per_class=10",
    "data.synthetic.dim=8",
    "model.hidden_dims=[16]",
    "train.epochs=2",
    "train.batch_size=20",
    "train.progress=false",
    "eval.knn_k=5",
    "log.tensorboard=false",
]


pytestmark = pytest.mark.usefixtures("one_thread")


#: recipe folders for `spacl train` (configs/kg and configs/text belong to other commands)
TRAIN_RECIPE_DIRS = (
    "digits",
    "mnist5k",
    "synthetic",
    "cifar10",
    "cifar100",
    "imagenet100",
    "imagefolder",
    "alignment",
)


def recipes() -> list[Path]:
    return sorted(
        p
        for d in TRAIN_RECIPE_DIRS
        for p in (CONFIGS / d).glob("*.yaml")
        if not p.name.startswith("_")
    )


def test_recipes_exist_for_every_objective_on_the_small_datasets():
    from spacl.tasks.image import OBJECTIVES

    for dataset in ("digits", "mnist5k", "synthetic"):
        names = {p.stem for p in (CONFIGS / dataset).glob("*.yaml")}
        assert set(OBJECTIVES) - {"ntxent"} <= names, dataset
    for full in ("cifar10", "cifar100", "imagenet100"):
        assert {"simclr", "supcon", "spacl_supervised", "spacl_selfsup"} <= {
            p.stem for p in (CONFIGS / full).glob("*.yaml")
        }


@pytest.mark.parametrize("recipe", recipes(), ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_recipe_validates(recipe, tmp_path):
    overrides = []
    if recipe.parts[-2] in ("cifar10", "cifar100", "imagenet100", "imagefolder") or (
        "cifar" in recipe.name
    ):
        (tmp_path / "train").mkdir()
        overrides.append(f"data.root={tmp_path}")
    cfg = load_config(recipe, overrides)
    if recipe.parts[-2] in ("cifar10", "cifar100"):
        assert cfg.model.backbone == "resnet50" and cfg.train.epochs == 200
        assert cfg.train.batch_size == 256


def test_full_scale_recipes_name_the_missing_data_path(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ValueError, match=r"config key 'data\.root'.*does not exist") as err:
        load_config(CONFIGS / "cifar10" / "supcon.yaml", [f"data.root={missing}"])
    assert "SPACL_DATA_DIR" in str(err.value)  # a built-in dataset may live in the data dir
    # the user's own image folder (moved since training, say) is not looked for there
    with pytest.raises(ValueError, match=r"image folder .*nowhere'? does not exist") as err:
        load_config(CONFIGS / "imagefolder" / "supcon.yaml", [f"data.root={missing}"])
    assert "SPACL_DATA_DIR" not in str(err.value) and "data.root=DIR" in str(err.value)


def test_train_eval_resume_round_trip(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        ["train", str(CONFIGS / "synthetic" / "supcon.yaml"), *FAST, "--out", str(out), "--quiet"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "| main |" in printed and f"run directory: {out}" in printed
    for name in ("config.yaml", "metrics.jsonl", "eval.json", "summary.md", "checkpoints/last.pt"):
        assert (out / name).is_file(), name
    # summary.md: the command as given, from where (its relative paths are from there)
    recorded = f"cd {Path.cwd()} && spacl train {CONFIGS / 'synthetic' / 'supcon.yaml'}"
    assert recorded in (out / "summary.md").read_text()
    assert load_config(out / "config.yaml").objective.name == "supcon"
    trained = json.loads((out / "eval.json").read_text())

    # eval re-computes the same numbers from the checkpoint, with eval.* overrides
    assert main(["eval", str(out), "--json", "--no-write"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["main"]["knn_accuracy"] == trained["main"]["knn_accuracy"]
    assert again["main"]["linear_accuracy"] == trained["main"]["linear_accuracy"]
    assert main(["eval", str(out), "eval.knn_k=1", "eval.linear_probe=false"]) == 0
    assert "| main |" in capsys.readouterr().out
    assert main(["eval", str(out), "optim.lr=1"]) == 2
    assert "only eval.* overrides" in capsys.readouterr().err

    # the directory is protected; --resume on a finished run trains nothing more
    before = load_checkpoint(out / "checkpoints" / "last.pt")
    assert main(["train", str(out)]) == 2
    assert "pass --resume" in capsys.readouterr().err
    assert main(["train", str(out), "--resume", "--quiet"]) == 0
    after = load_checkpoint(out / "checkpoints" / "last.pt")
    assert after["progress"]["global_step"] == before["progress"]["global_step"]
    for k, v in before["arms"]["main"]["model"].items():
        assert torch.equal(v, after["arms"]["main"]["model"][k])
    # resuming with a changed training key is refused, naming it
    assert main(["train", str(out), "optim.lr=0.5", "--resume"]) == 2
    assert "optim.lr: 0.001 -> 0.5" in capsys.readouterr().err


def _write(tmp_path: Path, text: str, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BAD_CASES = [
    # (yaml, overrides, key named in the error)
    ("trian: {epochs: 2}\n", [], "unknown config key 'trian' (did you mean 'train'?)"),
    ("", ["data.nmae=digits"], "unknown config key 'data.nmae' (did you mean 'data.name'?)"),
    ("", ["train.epochs=abc"], "config key 'train.epochs': Value 'abc'"),
    ("optim: {lr: fast}\n", [], "config key 'optim.lr': Value 'fast'"),
    ("", ["train.epochs=2.5"], "config key 'train.epochs'"),
    ("", ["optim.lr=-1"], "config key 'optim.lr' must be a finite number > 0, got -1.0"),
    ("", ["optim.lr=.nan"], "config key 'optim.lr' must be a finite number > 0"),
    ("", ["train.batch_size=1"], "config key 'train.batch_size' must be an integer >= 2"),
    ("", ["model.momentum=1.0"], "config key 'model.momentum' must be in [0.0, 1.0)"),
    ("", ["data.test_fraction=1.5"], "config key 'data.test_fraction'"),
    ("", ["eval.knn_t=0"], "config key 'eval.knn_t' must be a finite number > 0"),
    ("", ["optim.name=rmsprop"], "config key 'optim.name' must be one of"),
    ("", ["objective.name=simclrr"], "config key 'objective.name' must be one of"),
    (
        "",
        ["objective.params.lambda_q=0.9"],
        "config key 'objective.params.lambda_q' is not a parameter",
    ),
    (
        "",
        ["data.name=cifar10", "data.root=/no/such/dir"],
        "config key 'data.root': directory '/no/such/dir'",
    ),
    ("", ["data.label_kind=coarse"], "config key 'data.label_kind' needs coarse labels"),
    ("", ["train.precision=fp16", "train.device=cpu"], "config key 'train.precision'"),
    ("", ["objective.name=spacl", "views.num_views=2"], "config key 'objective' (spacl)"),
    ("", ["views.num_views=1"], "config key 'objective' (simclr)"),
    (
        "arms:\n  - {name: a, objective: {nme: dcl}}\n",
        [],
        "unknown config key 'arms[0].objective.nme'",
    ),
    ("arms:\n  - {name: a}\n  - {name: a}\n", [], "config key 'arms[1].name' must be unique"),
    (
        "arms:\n  - {name: a, optim: {lr: -2}}\n",
        [],
        "config key 'arms[0].optim.lr' must be a finite",
    ),
    ("", ["train.epochs"], "override 'train.epochs' must look like key=value"),
]


@pytest.mark.parametrize(("text", "overrides", "message"), BAD_CASES)
def test_bad_configs_fail_before_training_naming_the_key(
    tmp_path, capsys, text, overrides, message
):
    cfg = _write(tmp_path, text)
    out = tmp_path / "run"
    code = main(["train", str(cfg), *overrides, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err, err
    assert err.startswith("spacl train: error:")
    assert not out.exists()  # nothing was trained or written


def test_base_inheritance_cycles_and_missing_files(tmp_path):
    _write(tmp_path, "train: {epochs: 7, batch_size: 32}\noptim: {lr: 0.2}\n", "a.yaml")
    child = _write(tmp_path, "base: a.yaml\ntrain: {epochs: 3}\n", "b.yaml")
    cfg = load_config(child, ["optim.lr=0.3"])
    assert (cfg.train.epochs, cfg.train.batch_size, cfg.optim.lr) == (3, 32, 0.3)
    _write(tmp_path, "base: d.yaml\n", "c.yaml")
    _write(tmp_path, "base: c.yaml\n", "d.yaml")
    with pytest.raises(ValueError, match="'base' cycle"):
        load_config(tmp_path / "c.yaml")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    assert main(["train", str(tmp_path / "missing.yaml")]) == 2


def test_predict_takes_inputs_before_and_after_its_flags() -> None:
    from spacl.cli import build_parser, parse_args

    parser = build_parser()
    args = parse_args(parser, ["predict", "runs/x", "a.png", "--json", "b.png", "c d"])
    assert args.inputs == ["a.png", "b.png", "c d"] and args.json
    args = parse_args(parser, ["predict", "runs/x", "--json", "how do I sort a list"])
    assert args.inputs == ["how do I sort a list"]
    with pytest.raises(SystemExit):  # an unknown flag is still an error
        parse_args(parser, ["predict", "runs/x", "--jsn", "a.png"])
    # train keeps its key=value overrides after flags, and refuses other words
    args = parse_args(parser, ["train", "r.yaml", "--out", "o", "train.epochs=1"])
    assert args.overrides == ["train.epochs=1"]
    with pytest.raises(SystemExit):
        parse_args(parser, ["train", "r.yaml", "--out", "o", "stray"])


def test_command_help_is_plain_text() -> None:
    from spacl.cli import build_parser, plain_text

    assert (
        plain_text("``spacl eval`` and :func:`~spacl.load` **now**")
        == "spacl eval and spacl.load now"
    )
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        text = command.format_help()
        assert "``" not in text and ":func:" not in text and "**" not in text, name
        assert not rst_layout_lines(text), (name, rst_layout_lines(text))
    # counter-examples: the table `spacl reproduce --help` printed, and a section title
    table = "=====  =========\n``a``  the first\n=====  =========\n"
    assert rst_layout_lines(table) == ["=====  =========", "=====  ========="]
    assert rst_layout_lines("Intro.\n\nStudies\n-------\n\ntext\n") == ["-------"]
    assert rst_layout_lines("  name  meaning\n  a ==  b\n\n-----\n") == []


def rst_layout_lines(text: str) -> list[str]:
    """The lines of ``text`` that only reStructuredText reads: table rules (``=`` and
    spaces, at least two runs of ``===``) and section underlines (one punctuation mark
    repeated, at least three, under a line of text no longer than it)."""
    found, previous = [], ""
    for line in text.splitlines():
        bare = line.strip()
        if set(bare) <= {"=", " "} and len(re.findall("={3,}", bare)) >= 2:
            found.append(bare)
        elif (
            len(bare) >= 3
            and len(set(bare)) == 1
            and bare[0] in "=-~^*#+_`'\":.<>"
            and previous
            and len(previous) <= len(bare)
        ):
            found.append(bare)
        previous = bare
    return found
