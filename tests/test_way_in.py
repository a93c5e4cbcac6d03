"""One way in (issue 21): ``spacl train`` / ``spacl eval`` / the Python API read recipes
with :func:`spacl.tasks.load_recipe`; overrides go anywhere after the recipe; a copy of a
built-in recipe runs from any directory; ``spacl recipes NAME --flat``."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

import spacl
from spacl import schema
from spacl.cli import main
from spacl.recipes import list_recipes
from spacl.schema_files import flat_recipe
from spacl.tasks import LoadedRecipe, registry

#: a tiny digits run (seconds on one CPU thread)
TINY = [
    "model.hidden_dims=[16]",
    "model.proj_dim=8",
    "train.epochs=1",
    "train.batch_size=64",
    "train.max_steps=2",
    "eval.every_epochs=0",
    "eval.linear_probe=false",
    "eval.geometry=false",
    "eval.knn_k=5",
    "log.tensorboard=false",
]


def test_spacl_train_reads_its_recipe_through_load_recipe(monkeypatch, tmp_path):
    calls: list[tuple[Any, list[str]]] = []
    real = registry.load_recipe

    def spy(source: Any, overrides: Any = ()) -> LoadedRecipe:
        calls.append((source, list(overrides)))
        return real(source, overrides)

    monkeypatch.setattr(registry, "load_recipe", spy)
    out = tmp_path / "run"
    code = main(["train", "digits/simclr", *TINY, "--out", str(out), "--quiet"])
    assert code == 0
    assert calls == [("digits/simclr", TINY)]
    assert (out / "config.yaml").is_file()

    # spacl eval reads the run's config.yaml through it too
    calls.clear()
    assert main(["eval", str(out), "eval.knn_k=3", "--no-write"]) == 0
    saved = OmegaConf.load(out / "config.yaml")  # handed over as read (upgraded) from it
    assert len(calls) == 1 and calls[0][1] == ["eval.knn_k=3"]
    assert isinstance(calls[0][0], DictConfig) and calls[0][0] == saved

    # and spacl.load (spacl embed / export / predict) reads it through it as well
    calls.clear()
    spacl.load(out)
    assert len(calls) == 1 and calls[0][1] == [] and calls[0][0] == saved


def test_spacl_reproduce_reads_no_recipe():
    """The studies are data in code (``spacl.studies``): ``spacl reproduce`` loads no
    recipe, so no reader but :func:`spacl.tasks.load_recipe` appears in its path."""
    from pathlib import Path

    src = Path(schema.__file__).parent
    files = [src / "commands" / "reproduce.py", *sorted((src / "studies").rglob("*.py"))]
    readers = ("load_recipe", "load_config", "OmegaConf.load", "find_recipe", "ood_config(")
    found = [f"{p.name}: {r}" for p in files for r in readers if r in p.read_text()]
    assert not found, found


def test_overrides_are_accepted_after_flags(tmp_path):
    out = tmp_path / "run"
    head, tail = TINY[:3], TINY[3:]
    argv = ["train", "digits/simclr", *head, "--out", str(out), "--quiet", *tail, "optim.lr=0.2"]
    assert main(argv) == 0
    cfg = OmegaConf.load(out / "config.yaml")
    assert cfg.optim.lr == 0.2 and cfg.train.max_steps == 2 and cfg.model.proj_dim == 8


def test_a_stray_word_after_the_flags_is_still_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        main(["train", "digits/simclr", "--out", str(tmp_path), "oops"])
    assert err.value.code == 2
    assert "unrecognized arguments: oops" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a command without overrides takes none
        main(["recipes", "digits/simclr", "train.epochs=1"])


@pytest.mark.parametrize("flat", [False, True], ids=["copy", "flat"])
def test_a_copied_builtin_recipe_trains_from_another_directory(flat, tmp_path, capsys, monkeypatch):
    assert main(["recipes", "digits/spacl", *(["--flat"] if flat else [])]) == 0
    text = capsys.readouterr().out
    copy = tmp_path / "elsewhere" / "my.yaml"
    copy.parent.mkdir()
    copy.write_text(text)
    if flat:
        assert "\nbase:" not in text
    else:
        assert "base: digits/_base" in text
    monkeypatch.chdir(copy.parent)
    assert registry.load_recipe("my.yaml").config == registry.load_recipe("digits/spacl").config
    out = tmp_path / "run"
    assert main(["train", "my.yaml", "--out", str(out), "--quiet", *TINY]) == 0
    assert (out / "summary.md").is_file()


def test_base_resolves_relative_first_then_as_a_builtin_name(tmp_path):
    (tmp_path / "_base.yaml").write_text("data: {name: digits}\ntrain: {epochs: 3}\n")
    (tmp_path / "a.yaml").write_text("base: _base.yaml\noptim: {lr: 0.5}\n")
    cfg = registry.load_recipe(tmp_path / "a.yaml").config
    assert cfg.train.epochs == 3 and cfg.optim.lr == 0.5
    (tmp_path / "b.yaml").write_text("base: mnist5k/_base\n")
    assert registry.load_recipe(tmp_path / "b.yaml").config.data.name == "mnist5k"
    (tmp_path / "c.yaml").write_text("base: nowhere/_base\n")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        registry.load_recipe(tmp_path / "c.yaml")


@pytest.mark.parametrize("recipe", list_recipes(), ids=lambda r: r.name)
def test_every_shipped_recipe_flattens_to_the_same_config(recipe, tmp_path):
    flat = tmp_path / "flat.yaml"
    flat.write_text(flat_recipe(recipe.name))
    assert "base" not in OmegaConf.load(flat)
    assert schema.recipe_layer([flat]) == schema.recipe_layer([recipe.name])


def test_the_python_api_goes_through_load_recipe(monkeypatch, tmp_path):
    seen: list[Any] = []
    real = registry.load_recipe

    def spy(source: Any, overrides: Any = ()) -> LoadedRecipe:
        seen.append(source)
        return real(source, overrides)

    monkeypatch.setattr(registry, "load_recipe", spy)
    assert spacl.load_recipe("digits/simclr", TINY).task == "image"  # the registry's
    assert seen == ["digits/simclr"]
    result = spacl.run_recipe("digits/simclr", TINY, out=tmp_path / "run", quiet=True)
    assert seen == ["digits/simclr", "digits/simclr"]
    assert result.global_step == 2
    assert (tmp_path / "run" / "summary.md").is_file()
