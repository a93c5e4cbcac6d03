"""The recipe schema's files: reading a recipe and its ``base:`` chain, finding a
built-in recipe, and reading a saved run's config across key renames.

Beside :mod:`spacl.schema` (callers import these names from here).  A recipe's ``base:``
entries are paths relative to the recipe, else built-in recipe names
(:func:`read_recipe`); a key in :data:`RENAMED_KEYS` is an error in a user's recipe, but a
config this package saved is upgraded (:func:`upgrade_renamed_keys`,
:func:`read_run_config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

__all__ = [
    "RENAMED_KEYS",
    "find_recipe_file",
    "flat_recipe",
    "named_field",
    "read_recipe",
    "read_run_config",
    "upgrade_renamed_keys",
]


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


def load_run_yaml(path: str | Path) -> DictConfig:
    """A run directory's ``config.yaml`` as written (no upgrade): a ``ValueError`` of one
    line naming the file when it is not valid YAML or not a mapping (a damaged file)."""
    path = Path(path)
    try:
        raw = OmegaConf.load(path)
    except Exception as err:  # yaml's and OmegaConf's own errors: one line, the file named
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"{path} is damaged, not valid YAML ({first}); the run's config cannot be read"
        ) from None
    if not isinstance(raw, DictConfig):
        raise ValueError(f"{path} is damaged: it must hold a mapping, got {type(raw).__name__}")
    return raw


def read_run_config(path: str | Path) -> DictConfig:
    """A run directory's saved ``config.yaml``, upgraded by :func:`upgrade_renamed_keys`
    (logged when a key moved)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent} is not a run directory: {path} is missing")
    cfg, moved = upgrade_renamed_keys(load_run_yaml(path))
    if moved:
        import logging

        logging.getLogger("spacl.schema").warning(
            "%s was written before a key rename; read with %s", path, ", ".join(moved)
        )
    return cfg


def named_field(cfg: Any) -> str:
    """``"name='...', "`` for a loaded run's one-line repr when its config sets a ``name``,
    else ``""`` (the shipped recipes set none: a repr then shows no ``name=None``).

    Example:
        >>> named_field({"name": "digits-simclr"}), named_field({"name": None})
        ("name='digits-simclr', ", '')
    """
    name = cfg.get("name") if hasattr(cfg, "get") else None
    return f"name={name!r}, " if name else ""


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


def find_recipe_file(name_or_path: str | Path) -> Path:
    """The one recipe lookup: an existing file wins, else a built-in recipe name
    (``mnist5k/spacl``); ``FileNotFoundError`` naming the argument and close names."""
    from spacl.recipes import resolve_recipe

    return resolve_recipe(name_or_path)


def flat_recipe(name_or_path: str | Path) -> str:
    """The YAML of a recipe with its ``base:`` chain merged in: a self-contained copy
    (``spacl recipes NAME --flat``)."""
    return OmegaConf.to_yaml(read_recipe(find_recipe_file(name_or_path)))
