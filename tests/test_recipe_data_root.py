"""A relative ``data.root`` written in a recipe file is taken from the working directory,
not the recipe file's folder, and stored absolute (docs/using.md, own image folder; the
command-line case: tests/test_own_images.py::test_a_relative_data_root_is_stored_absolute)."""

from __future__ import annotations

from pathlib import Path

import pytest

import spacl


def test_a_relative_data_root_in_a_recipe_file_is_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipes, work = tmp_path / "recipes", tmp_path / "work"
    for folder in (recipes, work):  # the same relative name under both: only one is read
        (folder / "myimgs" / "cat").mkdir(parents=True)
    recipe = recipes / "mine.yaml"
    recipe.write_text("base: imagefolder/supcon\ndata:\n  root: myimgs\n")
    monkeypatch.chdir(work)
    loaded = spacl.load_recipe("../recipes/mine.yaml")
    assert loaded.config.data.root == str(work / "myimgs")
    # the same on the command line's side: an override is read from the same directory
    loaded = spacl.load_recipe(str(recipe), ["data.root=myimgs"])
    assert loaded.config.data.root == str(work / "myimgs")
