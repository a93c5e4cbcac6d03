"""Paper cuts a new user met (audit of README.md and docs/): CLI messages that mislead,
doc examples that fail when copied, a docstring example that fails under doctest."""

from __future__ import annotations

import doctest
import re
import shlex
from pathlib import Path

import pytest

import spacl
from spacl.cli import main
from spacl.commands import close_names, did_you_mean

ROOT = Path(__file__).resolve().parents[1]
USING = ROOT / "docs" / "using.md"


def _usage_and_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """stderr of ``spacl ARGV``, which must end in argparse's exit status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


# --------------------------------------------------------------- spacl's docstrings


def test_the_docstring_examples_of_spacl_pass_doctest() -> None:
    """``spacl.load``'s example skipped only its first line: ``NameError: model``."""
    result = doctest.testmod(spacl, verbose=False, report=False)
    assert result.failed == 0, result


# --------------------------------------------------------------- argparse messages


@pytest.mark.parametrize(
    ("argv", "required"),
    [(["train"], "config"), (["eval"], "run_dir"), (["predict"], "run_dir")],
)
def test_a_missing_argument_names_only_what_is_required(
    capsys: pytest.CaptureFixture[str], argv: list[str], required: str
) -> None:
    """``spacl train`` alone said ``required: config, overrides``; overrides are optional."""
    err = _usage_and_error(capsys, argv)
    assert err.rstrip().endswith(f"the following arguments are required: {required}"), err


def test_an_unknown_flag_shows_the_commands_usage_and_the_config_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``spacl train mnist5k/simclr --epochs 1`` printed ``usage: spacl [-h] ...``."""
    err = _usage_and_error(capsys, ["train", "mnist5k/simclr", "--epochs", "1"])
    assert err.startswith("usage: spacl train "), err
    assert "usage: spacl [-h]" not in err
    assert "unrecognized arguments: --epochs 1" in err and "train.epochs=1" in err
    # --name=value, dashes for underscores, a near name; keys the recipe itself sets
    err = _usage_and_error(capsys, ["train", "digits/supcon", "--batch-size=32", "--lr", "0.1"])
    assert "train.batch_size=32" in err and "optim.lr=0.1" in err
    err = _usage_and_error(capsys, ["train", "mnist5k/simclr", "--temperature", "0.2"])
    assert "objective.temperature=0.2" in err
    err = _usage_and_error(capsys, ["train", "mnist5k/simclr", "--epoch"])
    assert "train.epochs=VALUE" in err
    # no such key: how overrides are written, still with train's usage
    err = _usage_and_error(capsys, ["train", "mnist5k/simclr", "--zzz"])
    assert err.startswith("usage: spacl train ") and "key=value" in err
    # a command without overrides: its own usage, no config hint
    err = _usage_and_error(capsys, ["export", "runs/x", "--out", "e.pt2", "--split", "test"])
    assert err.startswith("usage: spacl export ") and "key=value" not in err
    err = _usage_and_error(capsys, ["predict", "runs/x", "--jsn"])
    assert err.startswith("usage: spacl predict ")


def test_export_help_describes_export_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """``spacl export --help`` printed embed's text too (``--split``, ``--features``)."""
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = capsys.readouterr().out
    for flag in ("--split", "--features", "--data", "--batch-size"):
        assert flag not in text, flag
    assert ".pt2" in text and "Text runs" in text and "KG runs" in text
    with pytest.raises(SystemExit):
        main(["embed", "--help"])
    text = capsys.readouterr().out
    assert "--split" in text and "--features" in text
    assert "spacl export RUN_DIR" not in text


# --------------------------------------------------------------- name suggestions


FB_RELATIONS = [
    "/people/person/places_lived./people/place_lived/location",
    "/people/person/nationality",
    "/film/film/genre",
    "/location/location/contains",
]


def test_close_names_match_whole_names_and_their_words() -> None:
    assert close_names("lives_inn", ["lives_in", "works_in", "friend_of"]) == ["lives_in"]
    assert close_names("lives", FB_RELATIONS) == [FB_RELATIONS[0]]
    assert close_names("genre", FB_RELATIONS) == ["/film/film/genre"]
    assert close_names("zzz", FB_RELATIONS) == []
    assert did_you_mean("lives", ["lives_in", "works_in"]) == "; did you mean 'lives_in'?"
    many = [f"r{i}" for i in range(10)]
    assert did_you_mean("zzz", many) == "; the names are 'r0', 'r1', 'r2', ... (10 in all)"
    assert did_you_mean("zzz", []) == ""


@pytest.fixture(scope="module")
def people_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A KG run of a tiny graph whose relations and entities have names."""
    import torch

    from spacl.tasks.kg import train_kg

    base = tmp_path_factory.mktemp("people")
    people, cities = [f"person{i}" for i in range(12)], [f"city{i}" for i in range(3)]
    triples = []
    for i, person in enumerate(people):
        triples += [(person, "lives_in", cities[i % 3]), (person, "works_in", cities[(i + 1) % 3])]
    held = {"valid": set(range(1, len(triples), 8)), "test": set(range(5, len(triples), 8))}
    parts = {name: [triples[i] for i in sorted(idx)] for name, idx in held.items()}
    parts["train"] = [t for i, t in enumerate(triples) if i not in held["valid"] | held["test"]]
    graph = base / "people"
    graph.mkdir()
    for split, rows in parts.items():
        (graph / f"{split}.txt").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))
    recipe = {
        "data": {"name": "people", "root": str(graph), "unseen": "error"},
        "model": {"dim": 8},
        "objective": {"name": "infonce"},
        "train": {"epochs": 1, "batch_size": 16, "progress": False, "threads": 1},
    }
    threads = torch.get_num_threads()
    try:
        train_kg(recipe, log=None, run_dir=base / "run")
    finally:
        torch.set_num_threads(threads)
    return base / "run"


def test_kg_predict_suggests_close_relation_and_entity_names(
    people_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--relation lives`` said ``unknown relation 'lives'`` and nothing more."""
    run = str(people_run)
    capsys.readouterr()
    assert main(["predict", run, "--head", "person3", "--relation", "lives"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("spacl predict: error: unknown relation 'lives'"), err
    assert err.endswith("did you mean 'lives_in'?") and "\n" not in err
    assert main(["predict", run, "--head", "persn3", "--relation", "lives_in"]) == 2
    err = capsys.readouterr().err
    assert "unknown entity 'persn3'" in err and "'person3'" in err
    assert main(["predict", run, "--tail", "zzz", "--relation", "lives_in"]) == 2
    assert "unknown entity 'zzz'" in capsys.readouterr().err
    # names and ids still answer
    assert main(["predict", run, "--head", "person3", "--relation", "lives_in", "--top", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["predict", run, "--head", "0", "--relation", "0", "--top", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


# --------------------------------------------------------------- the docs, copied


def _first_bash_block(text: str) -> list[str]:
    block = re.search(r"```bash\n(.*?)```", text, flags=re.S)
    assert block is not None
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]


def test_using_md_first_block_uses_only_what_it_made() -> None:
    """Its export and predict lines used runs/stackoverflow-spacl, runs/fb15k237 and
    runs/supcon, which no line of the block creates, and a digit.png nobody wrote."""
    made: set[str] = set()
    used: list[str] = []
    for line in _first_bash_block(USING.read_text()):
        if line.startswith("python -c"):
            made.update(re.findall(r"save\('([^']+)'\)", line))
            continue
        if not line.startswith("spacl "):
            continue
        words = shlex.split(line)[1:]
        outputs = [words[i + 1] for i, w in enumerate(words) if w == "--out"]
        if words[0] in ("eval", "embed", "export", "predict", "geometry"):
            values = {i + 1 for i, w in enumerate(words) if w.startswith("--")}  # --split test
            inputs = [
                w
                for i, w in enumerate(words[1:], 1)
                if i not in values and not w.startswith("-") and "=" not in w
            ]
            used += inputs
            assert all(w.rstrip("/") in made for w in inputs), (line, sorted(made))
        made.update(w.rstrip("/") for w in outputs)
    assert {"runs/mnist", "digit.png", "test.npz", "runs/so", "runs/fb15k237"} <= set(used)


def test_using_md_shows_the_image_predict_line_as_printed() -> None:
    """The doc showed ``cat.png<TAB>cat<TAB>0.4128``; predict prints ``{distance:.6g}``."""
    section = USING.read_text().split("## `spacl predict RUN_DIR INPUT ...`", 1)[1]
    example = re.search(r"```\n(.*?)\n```", section, flags=re.S)
    assert example is not None
    path, name, distance = example.group(1).split("\t")
    assert path.endswith(".png") and name
    assert format(float(distance), ".6g") == distance
    assert len(distance.replace(".", "").lstrip("0")) == 6  # 6 significant digits
    prose = " ".join(section.split())
    assert "Euclidean distance to that centre" in prose and "smaller is closer" in prose
    source = (ROOT / "src" / "spacl" / "commands" / "predict.py").read_text()
    assert 'print(f"{path}\\t{name}\\t{d:.6g}")' in source


def test_the_fb15k237_examples_say_how_long_they_train() -> None:
    """README and docs/kg_and_text.md showed the hour-long recipes with no time, and the
    snippet loaded the graph without passing it to ``train_kg``."""
    from spacl.schema import recipe_layer

    for name in ("kg/fb15k237_infonce", "kg/fb15k237_spacl"):
        assert recipe_layer([name]).train.minutes == 60, name
    readme = (ROOT / "README.md").read_text()
    (line,) = [x for x in readme.splitlines() if x.startswith("spacl train kg/fb15k237")]
    assert "60 min" in line and "train.minutes=1" in line
    doc = (ROOT / "docs" / "kg_and_text.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", doc, flags=re.S)
    assert snippet is not None
    code = snippet.group(1)
    assert "kg=kg" in code and "60 min" in code and 'overrides=["train.minutes=1"]' in code
    using = _first_bash_block(USING.read_text())
    (kg_line,) = [x for x in using if x.startswith("spacl train kg/")]
    assert "train.minutes=1" in kg_line
