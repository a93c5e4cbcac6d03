"""The recipe schema: one loader, one override syntax and one validator for every task.

A recipe is a YAML file (or a built-in name, :mod:`spacl.recipes`) with an optional
top-level ``task:`` (``image``, the default; ``kg``; ``text``) and an optional
``base:`` (a path or list of paths relative to the recipe, merged first).  Every task
is a tree of dataclasses given to ``OmegaConf.structured``, and the three share their
common sections, defined here:

=========  ================================================  =============================
section    shared keys (:class:`DataSection`...)             task-specific keys, e.g.
=========  ================================================  =============================
data       ``name``, ``root``                                views (image), ``unseen`` (kg)
optim      ``name``, ``lr``, ``weight_decay``                LARS (image), ``n3`` (kg)
train      ``epochs``, ``batch_size``, ``seed``, ``device``,  ``precision`` (image),
           ``progress``                                      ``minutes`` (kg)
eval       ``batch_size``                                    kNN (image), ``ties`` (kg)
=========  ================================================  =============================

The task schemas are :class:`spacl.engine.config.Config` (image),
:class:`spacl.tasks.kg_config.KGConfig` and :class:`spacl.tasks.text_config.OODConfig`; each
registers its loader with :func:`register_task` (this module imports no task).
:func:`load_recipe` reads any recipe, applies dot-list overrides (``train.epochs=5``,
:func:`parse_overrides`) and validates it; :func:`validate_shared` checks the shared
sections identically for every task, then the task's own checks run.  Every error is
a ``ValueError`` naming the key, the value and the allowed values
(``config key 'optim.name' must be one of ['adagrad', 'adam'], got 'sgd'``); an unknown
key names the closest valid one (``unknown config key 'data.nmae' (did you mean
'data.name'?)``).
"""

from __future__ import annotations

import difflib
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from spacl._validation import check_choice

__all__ = [
    "RENAMED_KEYS",
    "DataSection",
    "EvalSection",
    "LoadedRecipe",
    "OptimSection",
    "TaskEntry",
    "TrainSection",
    "check_device",
    "choice",
    "fail",
    "find_recipe_file",
    "flat_recipe",
    "format_error",
    "in_range",
    "int_at_least",
    "load_recipe",
    "load_structured",
    "merge_structured",
    "parse_overrides",
    "positive",
    "read_recipe",
    "read_run_config",
    "recipe_layer",
    "recipe_task",
    "register_task",
    "resolve_device",
    "task_entry",
    "task_loader",
    "task_names",
    "upgrade_renamed_keys",
    "validate_shared",
]

#: a task's recipe loader: ``(recipe layer, dot-list overrides) -> validated DictConfig``
TaskLoader = Callable[[DictConfig, Sequence[str]], DictConfig]

_Loader = TypeVar("_Loader", bound=TaskLoader)

#: the task registry, the one list of tasks: name -> :class:`TaskEntry`, filled by
#: :func:`register_task` where each task's schema lives (``image``:
#: :mod:`spacl.engine.config`; ``kg`` / ``text``: :mod:`spacl.tasks.kg_config`,
#: :mod:`spacl.tasks.text_config`)
_TASKS: dict[str, TaskEntry] = {}

#: the package whose import registers every built-in task (never imported by this module
#: at its top: the schema sits below the tasks)
BUILTIN_TASKS = "spacl.tasks"


# --------------------------------------------------------------- shared sections


@dataclass
class DataSection:
    """Keys every task's ``data`` section has."""

    name: str = ""
    root: str | None = None  # data root (default: the search of spacl.data.sources)


@dataclass
class OptimSection:
    """Keys every task's ``optim`` section has."""

    name: str = ""
    lr: float = 0.1
    weight_decay: float = 0.0


@dataclass
class TrainSection:
    """Keys every task's ``train`` section has."""

    epochs: int = 10
    batch_size: int = 256
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | cuda:N (auto: cuda when available)
    progress: bool | None = None  # tqdm bars; None: only when stderr is a terminal
    threads: int | None = None  # torch.set_num_threads for the run (None: leave as is)


@dataclass
class EvalSection:
    """Keys every task's ``eval`` section has."""

    batch_size: int = 512


# -------------------------------------------------------------------- validators


def fail(key: str, value: Any, need: str) -> ValueError:
    """``ValueError("config key 'key' <need>, got <value>")``."""
    return ValueError(f"config key {key!r} {need}, got {value!r}")


def load_structured(
    schema: type, validate: Callable[[DictConfig], None], cfg: Any, overrides: Sequence[str]
) -> DictConfig:
    """A task's recipe loader in one call: merge ``cfg`` (a mapping, ``DictConfig`` or
    YAML path) and dot-list ``overrides`` onto the dataclass ``schema`` (unknown keys
    raise ``ValueError`` naming them), then ``validate`` the result."""
    merged = merge_structured(schema, [cfg, parse_overrides(overrides)])
    validate(merged)
    return merged


def choice(key: str, value: Any, options: Sequence[Any], *, where: str = "") -> None:
    """``value`` must be one of ``options`` (:func:`spacl._validation.check_choice`).

    A config error is always a ``ValueError`` naming the key: a value of the wrong
    type (``optim.name: 3``) too.
    """
    try:
        check_choice(value, f"config key {key!r}", options, where=where)
    except TypeError as err:
        raise ValueError(str(err)) from err


def int_at_least(key: str, value: Any, low: int) -> None:
    """``value`` must be an integer (not a bool) ``>= low``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise fail(key, value, f"must be an integer >= {low}")


def positive(key: str, value: Any) -> None:
    """``value`` must be a finite number ``> 0``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not value > 0:
        raise fail(key, value, "must be a finite number > 0")


def in_range(key: str, value: Any, low: float, high: float, *, high_open: bool = False) -> None:
    """``low <= value <= high`` (``< high`` when ``high_open``)."""
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and low <= value
        and (value < high if high_open else value <= high)
    )
    if not ok:
        bracket = ")" if high_open else "]"
        raise fail(key, value, f"must be in [{low}, {high}{bracket}")


def check_device(key: str, value: Any) -> None:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    ok = isinstance(value, str) and (
        value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    )
    if not ok:
        raise fail(key, value, "must be auto, cpu, cuda or cuda:N")


def resolve_device(name: str) -> Any:
    """The ``torch.device`` of a ``train.device`` value: ``auto`` is ``cuda`` when CUDA is
    available, else ``cpu`` (the same in every task)."""
    import torch

    check_device("train.device", name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


#: keys that were renamed: old dotted key -> the key to use now (an old key is an error
#: that names the new one)
RENAMED_KEYS: dict[str, str] = {
    "train.num_threads": "train.threads",
    # the views are configured in one section, ``views``, in every task (issue 21)
    **{
        f"data.{key}": f"views.{key}"
        for key in (
            "num_views",
            "augment",
            "augment_strength",
            "crop_scale",
            "color_strength",
            "blur",
            "flip",
            "keep_original",
            "noise_sigma",
        )
    },
}


def upgrade_renamed_keys(cfg: Any) -> tuple[DictConfig, list[str]]:
    """A copy of a *saved* config with every :data:`RENAMED_KEYS` key moved to its new name.

    For configs this package wrote itself (a run directory's ``config.yaml``, a
    checkpoint's ``config``), so that runs made before a rename still load, evaluate and
    resume.  A recipe a user writes is not upgraded: its old keys are errors naming the new
    key.  Returns ``(config, ["old -> new", ...])``; ``ValueError`` if both names are set.
    """
    data = OmegaConf.to_container(cfg) if isinstance(cfg, DictConfig) else dict(cfg)
    out = OmegaConf.create(data)
    assert isinstance(out, DictConfig)
    moved: list[str] = []
    for old, new in RENAMED_KEYS.items():
        section, _, leaf = old.partition(".")
        parent = out.get(section)
        if not isinstance(parent, DictConfig) or leaf not in parent:
            continue
        value = parent.pop(leaf)
        if OmegaConf.select(out, new) is not None:
            raise ValueError(f"config sets both {old!r} (renamed) and {new!r}")
        OmegaConf.update(out, new, value, force_add=True)
        moved.append(f"{old} -> {new}")
    return out, moved


def read_run_config(path: str | Path) -> DictConfig:
    """A run directory's saved ``config.yaml``, upgraded by :func:`upgrade_renamed_keys`
    (logged when a key moved)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent} is not a run directory: {path} is missing")
    cfg, moved = upgrade_renamed_keys(OmegaConf.load(path))
    if moved:
        import logging

        logging.getLogger(__name__).warning(
            "%s was written before a key rename; read with %s", path, ", ".join(moved)
        )
    return cfg


def validate_shared(
    cfg: Any,
    *,
    optim_names: Sequence[str],
    data_names: Sequence[str] | None = None,
    min_batch_size: int = 1,
) -> None:
    """Check the shared sections (``data``, ``optim``, ``train``, ``eval``) of any task.

    ``data_names``: the allowed ``data.name`` values (``None``: any non-empty name, e.g.
    a dataset directory); ``min_batch_size``: the smallest ``train.batch_size``.
    """
    d, o, t, e = cfg.data, cfg.optim, cfg.train, cfg.eval
    if data_names is not None:
        choice("data.name", d.name, data_names)
    elif not d.name:
        raise fail("data.name", d.name, "must name a dataset")
    choice("optim.name", o.name, optim_names)
    positive("optim.lr", o.lr)
    in_range("optim.weight_decay", o.weight_decay, 0.0, math.inf, high_open=True)
    int_at_least("train.epochs", t.epochs, 1)
    int_at_least("train.batch_size", t.batch_size, min_batch_size)
    int_at_least("train.seed", t.seed, 0)
    check_device("train.device", t.device)
    if t.threads is not None:
        int_at_least("train.threads", t.threads, 1)
    int_at_least("eval.batch_size", e.batch_size, 1)


# ----------------------------------------------------------------------- loading


def _schema_keys(schema: type, dotted: str, list_items: Mapping[str, type]) -> list[str] | None:
    """The valid keys of the section ``dotted`` of ``schema`` (``None``: not a section).

    ``list_items`` gives the schema of list elements (``arms[0].objective``, ``arms.0``).
    """

    def keys_of(cls: type) -> Any:
        return OmegaConf.to_container(OmegaConf.structured(cls))

    node: Any = keys_of(schema)
    last = ""
    for part in [p for p in dotted.split(".") if p]:
        head = part.split("[")[0]
        if part.isdigit() and last in list_items:
            node = keys_of(list_items[last])
            continue
        if "[" in part and head in list_items:
            node, last = keys_of(list_items[head]), head
            continue
        if not isinstance(node, dict) or head not in node:
            return None
        node, last = node[head], head
    return sorted(node) if isinstance(node, dict) else None


def format_error(
    err: OmegaConfBaseException,
    schema: type | None = None,
    prefix: str = "",
    list_items: Mapping[str, type] | None = None,
) -> ValueError:
    """The ``ValueError`` of an OmegaConf merge error: the full key, and for an unknown
    key the closest valid one of ``schema`` (``list_items``: schemas of list elements,
    e.g. ``{"arms": ArmConfig}``)."""
    key = prefix + (str(err.full_key) if getattr(err, "full_key", None) else "")
    first = str(getattr(err, "msg", None) or err).splitlines()[0]
    if isinstance(err, ConfigKeyError) and key in RENAMED_KEYS:
        return ValueError(f"config key {key!r} was renamed: use {RENAMED_KEYS[key]!r}")
    if isinstance(err, ConfigKeyError) and key:
        parent_key, _, leaf = key.rpartition(".")
        valid = _schema_keys(schema, parent_key, list_items or {}) if schema else None
        hint = ""
        if valid:
            close = difflib.get_close_matches(leaf, valid, n=1)
            if close:
                full = f"{parent_key}.{close[0]}" if parent_key else close[0]
                hint = f" (did you mean {full!r}?)"
            else:
                hint = f" (valid keys: {', '.join(valid)})"
        return ValueError(f"unknown config key {key!r}{hint}")
    return ValueError(f"config key {key!r}: {first}" if key else f"invalid config: {first}")


def _base_path(recipe: Path, base: str) -> Path:
    """The file a ``base:`` entry of ``recipe`` names: a path relative to the recipe when
    that file exists, else a built-in recipe name (``digits/_base``, so that a copy of a
    shipped recipe keeps its base), else the relative path (reported missing)."""
    from spacl.recipes import find_recipe

    relative = recipe.parent / base
    if relative.is_file():
        return relative
    return find_recipe(base) or relative


def read_recipe(path: str | Path, seen: tuple[Path, ...] = ()) -> DictConfig:
    """Read a recipe file and merge its ``base:`` chain (each a path relative to the recipe
    or a built-in recipe name such as ``digits/_base``; :func:`_base_path`).

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for invalid YAML,
    a non-mapping or a ``base`` cycle.
    """
    path = Path(path).expanduser().resolve()
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise ValueError(f"config 'base' cycle: {chain}")
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        raw = OmegaConf.load(path)
    except Exception as err:
        raise ValueError(f"config file {path} is not valid YAML: {err}") from err
    if not isinstance(raw, DictConfig):
        raise ValueError(f"config file {path} must hold a mapping, got a {type(raw).__name__}")
    bases = raw.pop("base", None)
    if bases is None:
        return raw
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, (list, ListConfig)):
        raise ValueError(f"{path}: 'base' must be a path or a list of paths, got {bases!r}")
    merged: Any = OmegaConf.create({})
    for base in bases:
        merged = OmegaConf.merge(merged, read_recipe(_base_path(path, str(base)), (*seen, path)))
    out = OmegaConf.merge(merged, raw)
    assert isinstance(out, DictConfig)
    return out


def parse_overrides(overrides: Sequence[str]) -> DictConfig:
    """Dot-list overrides (``["train.epochs=5", "optim.lr=0.1"]``) as a ``DictConfig``."""
    if isinstance(overrides, str):
        raise TypeError(f"overrides must be a list of key=value strings, got {overrides!r}")
    for item in overrides:
        if not isinstance(item, str) or "=" not in item or item.startswith("="):
            raise ValueError(f"override {item!r} must look like key=value (e.g. train.epochs=5)")
    try:
        return OmegaConf.from_dotlist(list(overrides))
    except OmegaConfBaseException as err:
        raise format_error(err) from err


def find_recipe_file(name_or_path: str | Path) -> Path:
    """The one recipe lookup: an existing file wins, else a built-in recipe name
    (``mnist5k/spacl``); ``FileNotFoundError`` naming the argument and close names."""
    from spacl.recipes import resolve_recipe

    return resolve_recipe(name_or_path)


def flat_recipe(name_or_path: str | Path) -> str:
    """The YAML of a recipe with its ``base:`` chain merged in: a self-contained copy
    (``spacl recipes NAME --flat``)."""
    return OmegaConf.to_yaml(read_recipe(find_recipe_file(name_or_path)))


def _as_layer(cfg: Any) -> DictConfig:
    """A recipe source (mapping, DictConfig, YAML path or built-in name) as a DictConfig."""
    if cfg is None:
        return OmegaConf.create({})
    if isinstance(cfg, DictConfig):
        return cfg
    if isinstance(cfg, Mapping):
        return OmegaConf.create(dict(cfg))
    if isinstance(cfg, (str, Path)):
        return read_recipe(find_recipe_file(cfg))
    raise TypeError(
        f"a recipe must be a mapping, a DictConfig or a YAML path, got {type(cfg).__name__}"
    )


def recipe_layer(sources: Sequence[Any], overrides: Sequence[str] = ()) -> DictConfig:
    """The one layering rule: ``sources`` (mappings, DictConfigs, YAML paths or built-in
    names, each with its ``base:`` chain; ``None`` skipped) merged in order, then the
    dot-list ``overrides`` (:func:`parse_overrides`); later wins."""
    layers = [_as_layer(x) for x in sources if x is not None]
    merged = OmegaConf.merge(OmegaConf.create({}), *layers, parse_overrides(overrides))
    assert isinstance(merged, DictConfig)
    return merged


def merge_structured(
    schema: type,
    layers: Sequence[Any],
    *,
    list_items: Mapping[str, type] | None = None,
) -> DictConfig:
    """Merge recipe ``layers`` (mappings, DictConfigs or YAML paths; later wins) onto the
    structured ``schema``; an unknown key or a wrong type raises ``ValueError`` naming it."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), *[_as_layer(x) for x in layers])
    except OmegaConfBaseException as err:
        raise format_error(err, schema, list_items=list_items) from err
    assert isinstance(merged, DictConfig)
    return merged


def recipe_task(raw: Any) -> str:
    """The ``task:`` of a recipe (a mapping or a YAML path); ``image`` when absent.  A name
    no task registered raises ``ValueError`` naming the registered ones."""
    layer = _as_layer(raw)
    task = layer.get("task", None)
    if task is None:
        return "image"
    task_entry(str(task) if isinstance(task, str) else repr(task))
    return str(task)


@dataclass(frozen=True)
class TaskEntry:
    """One task of the registry: its recipe ``loader`` and its ``runner``.

    ``runner``: ``"module:function"`` of the function that trains a validated config
    (``function(config, overrides=[...])`` returning a summary dict), imported only when a
    run starts (:func:`spacl.tasks.run_recipe`); ``None`` for the image task, whose runner
    is the engine's :class:`~spacl.engine.Trainer` (run directories, resume, DDP).
    """

    name: str
    loader: TaskLoader
    runner: str | None = None


def register_task(name: str, *, runner: str | None = None) -> Callable[[_Loader], _Loader]:
    """Decorator: register ``loader`` as the recipe loader of ``task: name``.

    The module holding a task's schema registers it (``@register_task("kg",
    runner="spacl.tasks.kg:train_kg")`` on :func:`spacl.tasks.kg_config.kg_config`), so this
    module imports no task and the registry is the one list of tasks.  Registering a name
    twice with different loaders raises ``ValueError``.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise fail("task", name, "must be a name of letters, digits and _")

    def decorate(loader: _Loader) -> _Loader:
        known = _TASKS.get(name)
        if known is not None and known.loader is not loader:
            raise ValueError(f"task {name!r} is already registered ({known.loader.__qualname__})")
        if known is None or runner is not None:  # the same loader again: a no-op
            _TASKS[name] = TaskEntry(name, loader, runner)
        return loader

    return decorate


def _builtin_tasks() -> None:
    """Import the built-in tasks once (:data:`BUILTIN_TASKS`; they register themselves), so
    the Python API works without importing a task first.  Run only inside functions: the
    schema sits below the tasks and imports none at its top."""
    importlib.import_module(BUILTIN_TASKS)  # a no-op once imported


def task_names() -> list[str]:
    """Every registered task, sorted (the built-in ones included)."""
    _builtin_tasks()
    return sorted(_TASKS)


def task_entry(name: str) -> TaskEntry:
    """The registry entry of ``task: name`` (``ValueError`` naming the registered tasks)."""
    _builtin_tasks()
    choice("task", name, sorted(_TASKS))
    return _TASKS[name]


def task_loader(name: str) -> TaskLoader:
    """The registered recipe loader of ``task: name`` (:func:`task_entry`)."""
    return task_entry(name).loader


@dataclass(frozen=True)
class LoadedRecipe:
    """A validated recipe: its ``task`` and typed ``config``."""

    task: str
    config: DictConfig


def load_recipe(source: Any, overrides: Sequence[str] = ()) -> LoadedRecipe:
    """Read, override and validate any recipe (image, KG or text).

    ``source``: a built-in recipe name (``mnist5k/spacl``), a YAML path, a mapping or a
    ``DictConfig``.  The ``task:`` key (default ``image``) chooses the schema; the
    shared sections are checked by :func:`validate_shared`, then the task's own rules.
    """
    layer = _as_layer(source)
    task = recipe_task(recipe_layer([layer], overrides))
    return LoadedRecipe(task, task_loader(task)(layer, overrides))
