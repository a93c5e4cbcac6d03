"""One recipe schema (spacl.schema) for image, KG and text recipes: every shipped recipe
loads, the shared sections are the same classes, and one bad key per section is named."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from spacl.recipes import list_recipes
from spacl.schema import (
    DataSection,
    EvalSection,
    OptimSection,
    TrainSection,
    parse_overrides,
    register_task,
    registered_task,
    registered_tasks,
)
from spacl.tasks import load_recipe, task_entry, task_loader, task_names
from spacl.tasks.image.config import Config
from spacl.tasks.kg.config import KGConfig, kg_config
from spacl.tasks.text.config import OODConfig, ood_config

RECIPES = list_recipes()
TEXT = "text/stackoverflow_frozen_spacl"
SECTIONS = {"data": DataSection, "optim": OptimSection, "train": TrainSection, "eval": EvalSection}


def _overrides(recipe, tmp_path) -> list[str]:
    """On-disk image recipes validate their data root: give them an empty one."""
    if recipe.name.split("/")[0] in ("cifar10", "cifar100", "imagenet100", "imagefolder") or (
        "cifar" in recipe.name
    ):
        (tmp_path / "train").mkdir(exist_ok=True)
        return [f"data.root={tmp_path}"]
    return []


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_every_shipped_recipe_loads_with_its_task_schema(recipe, tmp_path):
    loaded = load_recipe(recipe.name, _overrides(recipe, tmp_path))
    assert loaded.task == recipe.task
    cfg = loaded.config
    assert cfg.train.epochs >= 1 and cfg.train.batch_size >= 1 and cfg.optim.lr > 0
    assert cfg.eval.batch_size >= 1 and cfg.data.name
    # the same recipe from its path gives the same config
    again = load_recipe(recipe.path, _overrides(recipe, tmp_path)).config
    assert again == cfg


@pytest.mark.parametrize("section", sorted(SECTIONS))
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_one_bad_key_per_section_is_named_with_a_suggestion(recipe, section, tmp_path):
    first = sorted(f.name for f in dataclasses.fields(SECTIONS[section]))[0]
    typo = first[:-1] + first[-1] * 2  # e.g. batch_sizee
    with pytest.raises(ValueError) as err:
        load_recipe(recipe.name, [*_overrides(recipe, tmp_path), f"{section}.{typo}=1"])
    assert str(err.value) == (
        f"unknown config key '{section}.{typo}' (did you mean '{section}.{first}'?)"
    )


LR = "config key 'optim.lr' must be a finite number > 0, got -1.0"
DEVICE = "config key 'train.device' must be auto, cpu, cuda or cuda:N, got 'gpu'"
EPOCHS = "config key 'train.epochs': Value 'abc' of type 'str' could not be converted to Integer"
SHARED_ERRORS = [
    ("mnist5k/spacl", "optim.lr=-1", LR),
    ("kg/fb15k237_spacl", "optim.lr=-1", LR),
    ("text/stackoverflow_frozen_spacl", "optim.lr=-1", LR),
    ("mnist5k/spacl", "train.device=gpu", DEVICE),
    ("kg/fb15k237_spacl", "train.device=gpu", DEVICE),
    ("text/stackoverflow_frozen_ce", "train.device=gpu", DEVICE),
    ("mnist5k/supcon", "train.epochs=abc", EPOCHS),
    ("kg/fb15k237_spacl", "train.epochs=abc", EPOCHS),
    (
        "kg/fb15k237_infonce",
        "optim.name=sgd",
        "config key 'optim.name' must be one of ['adagrad', 'adam'], got 'sgd'",
    ),
    (
        "text/stackoverflow_frozen_supcon",
        "optim.name=lars",
        "config key 'optim.name' must be one of ['adam', 'adamw', 'sgd'], got 'lars'",
    ),
    (
        "kg/fb15k237_spacl",
        "train.epochs=0",
        "config key 'train.epochs' must be an integer >= 1, got 0",
    ),
    (
        "text/stackoverflow_frozen_spacl",
        "eval.batch_size=0",
        "config key 'eval.batch_size' must be an integer >= 1, got 0",
    ),
    (
        "kg/fb15k237_spacl",
        "optim.weight_decay=-0.5",
        "config key 'optim.weight_decay' must be in [0.0, inf), got -0.5",
    ),
]


@pytest.mark.parametrize(("recipe", "override", "message"), SHARED_ERRORS)
def test_shared_sections_give_the_same_errors_for_every_task(recipe, override, message):
    with pytest.raises(ValueError) as err:
        load_recipe(recipe, [override])
    assert str(err.value) == message


def test_task_schemas_share_the_section_classes():
    for schema in (Config, KGConfig, OODConfig):
        fields = {f.name: f for f in dataclasses.fields(schema)}
        for name, base in SECTIONS.items():
            section = fields[name].default_factory()  # type: ignore[misc]
            assert isinstance(section, base), (schema.__name__, name)


def test_one_override_syntax_and_base_chains_for_task_recipes(tmp_path):
    (tmp_path / "_base.yaml").write_text("task: kg\nmodel: {dim: 8}\ntrain: {epochs: 3}\n")
    (tmp_path / "child.yaml").write_text("base: _base.yaml\ntrain: {batch_size: 16}\n")
    loaded = load_recipe(tmp_path / "child.yaml", ["optim.lr=0.5"])
    cfg = loaded.config
    assert loaded.task == "kg"
    assert (cfg.model.dim, cfg.train.epochs, cfg.train.batch_size, cfg.optim.lr) == (8, 3, 16, 0.5)
    assert kg_config(tmp_path / "child.yaml").train.batch_size == 16
    with pytest.raises(ValueError, match=r"override 'optim\.lr' must look like key=value"):
        ood_config({}, ["optim.lr"])
    with pytest.raises(ValueError, match=r"override 'optim\.lr' must look like key=value"):
        kg_config({}, ["optim.lr"])
    with pytest.raises(TypeError, match="overrides must be a list"):
        parse_overrides("train.epochs=2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"config key 'task' must be one of \['image', 'kg'"):
        load_recipe({"task": "audio"})
    with pytest.raises(TypeError, match="a recipe must be a mapping"):
        load_recipe(3)


def test_task_specific_keys_still_validate():
    with pytest.raises(
        ValueError, match=r"unknown config key 'model.dimm' \(did you mean 'model.dim'"
    ):
        kg_config({}, ["model.dimm=8"])
    with pytest.raises(ValueError, match=r"config key 'views.dropout' must be in \[0.0, 1.0\)"):
        ood_config({}, ["views.dropout=1.5"])
    with pytest.raises(ValueError, match=r"config key 'train.unit' must be one of"):
        kg_config({}, ["train.unit=pair"])
    image = load_recipe({"data": {"name": "digits"}}, ["train.epochs=2"])
    assert image.task == "image" and image.config.train.epochs == 2


def test_image_recipes_may_say_task_image(tmp_path):
    from spacl.tasks.image import load_config

    path = tmp_path / "img.yaml"
    path.write_text("task: image\ndata: {name: digits}\ntrain: {epochs: 2}\n")
    assert load_config(path).train.epochs == 2
    assert load_recipe(path).task == "image"
    with pytest.raises(ValueError, match="config key 'task' must be 'image'"):
        load_config(None, ["task=kg"])


def test_task_registry_holds_the_schema_loaders():
    """Each task's schema module registers its loader; the schema imports none of them,
    and reads its registry as it stands (the tasks' lookups are the same entries)."""
    assert task_loader("kg") is kg_config and task_loader("text") is ood_config
    assert task_names() == registered_tasks() == ["image", "kg", "text"]
    assert task_entry("kg") is registered_task("kg")
    assert task_loader("image").__module__ == "spacl.tasks.image.config"
    with pytest.raises(ValueError, match="already registered"):
        register_task("kg")(ood_config)
    register_task("kg")(kg_config)  # the same loader again: a no-op
    assert task_entry("kg").runner == "spacl.tasks.kg:train_kg"
    assert task_entry("image").runner == "spacl.tasks.image.trainer:train"
    with pytest.raises(ValueError, match="config key 'task' must be a name"):
        register_task("not a name")
    with pytest.raises(ValueError, match=r"config key 'task' must be one of \['image', 'kg'"):
        load_recipe({"task": "audio"})


def test_the_schema_imports_no_task_and_the_tasks_register_every_one():
    """A fresh interpreter: the schema imports no task (at its top or in a function: its
    registry is empty, and its lookup names what is registered); importing spacl.tasks
    registers the built-in ones, and ``spacl.load_recipe`` finds them."""
    code = (
        "import sys\n"
        "from spacl import schema\n"
        "assert not any(m.startswith('spacl.tasks') for m in sys.modules), 'schema loaded a task'\n"
        "assert schema.registered_tasks() == []\n"
        "try:\n"
        "    schema.registered_task('kg')\n"
        "except ValueError as err:\n"
        "    assert \"config key 'task' must be one of []\" in str(err), err\n"
        "else:\n"
        "    raise AssertionError('an empty registry found kg')\n"
        "assert not any(m.startswith('spacl.tasks') for m in sys.modules), 'the lookup imported'\n"
        "import spacl\n"
        "assert spacl.load_recipe('kg/fb15k237_spacl').task == 'kg'\n"
        "assert spacl.load_recipe('text/stackoverflow_frozen_spacl').task == 'text'\n"
        "assert schema.registered_tasks() == ['image', 'kg', 'text']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_relative_path_keys_are_stored_absolute(tmp_path, monkeypatch):
    """Every path-valued key (``data.root``, the text task's ``encoder.cache_dir``) is made
    absolute when the recipe is read, so a run's config.yaml names the same directories
    from anywhere; an absolute path is kept as written, ``~`` expanded, unset stays unset.
    (``data.root`` through ``spacl train`` / ``spacl eval``: tests/test_own_images.py.)"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    here = Path.cwd()
    cfg = load_recipe(TEXT, ["encoder.cache_dir=emb", "data.root=texts"]).config
    assert cfg.encoder.cache_dir == str(here / "emb") and cfg.data.root == str(here / "texts")
    # counter-example: an absolute cache_dir is unchanged (not resolved, not moved)
    absolute = tmp_path / "elsewhere" / ".." / "emb"
    cfg = load_recipe(TEXT, [f"encoder.cache_dir={absolute}"]).config
    assert cfg.encoder.cache_dir == str(absolute) and cfg.data.root is None
    assert load_recipe(TEXT).config.encoder.cache_dir is None
    tilde = load_recipe(TEXT, ["encoder.cache_dir=~/emb"]).config.encoder.cache_dir
    assert tilde == str(tmp_path / "home" / "emb")
    # a task without the key (kg, image) reads as before, its data.root made absolute
    assert load_recipe("kg/fb15k237_spacl", ["data.root=kgdata"]).config.data.root == str(
        here / "kgdata"
    )
