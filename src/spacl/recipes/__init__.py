"""The built-in recipes: YAML files shipped inside the package, addressed by name.

A recipe's name is its path under this package without ``.yaml``: ``mnist5k/spacl``,
``cifar100/spacl_supervised``, ``kg/fb15k237_spacl``, ``text/stackoverflow_frozen_spacl``.
Files whose name starts with ``_`` (``_base.yaml``) are shared bases, not recipes.
``spacl recipes`` lists them; ``spacl train NAME`` accepts a name as well as a path, so
the recipes work from any working directory, in an installed (non-editable) package too.

In a source checkout, ``configs/`` is a symbolic link to this directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["RECIPES_DIR", "Recipe", "find_recipe", "list_recipes", "resolve_recipe"]

#: the directory holding the shipped recipe files
RECIPES_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Recipe:
    """One shipped recipe: ``name`` (``mnist5k/spacl``), ``path``, ``task`` and a summary."""

    name: str
    path: Path
    task: str  # image | kg | text
    summary: str


def _summary_and_task(path: Path, seen: tuple[Path, ...] = ()) -> tuple[str, str]:
    """The first comment line of a recipe (its summary) and its ``task:`` (default image;
    a recipe without ``task:`` takes its first ``base:``'s, e.g. ``text/_finetune_base``).

    Read as text, not as YAML, so that listing stays fast and never fails on a bad file.
    """
    summary, task, base = "", None, None
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not summary and stripped.startswith("#"):
            summary = stripped.lstrip("#").strip()
        value = line.partition(":")[2].split("#")[0].strip()
        if line.startswith("task:"):
            task = value or task
        if line.startswith("base:") and value and base is None:
            base = value.strip("[]").split(",")[0].strip().strip("'\"")
    if task is None and base and path not in seen:
        relative = path.parent / base
        found = relative if relative.is_file() else find_recipe(base)
        if found is not None:
            task = _summary_and_task(found, (*seen, path))[1]
    return summary, task or "image"


def list_recipes() -> list[Recipe]:
    """Every shipped recipe, sorted by name (shared ``_*.yaml`` bases excluded)."""
    out = []
    for path in sorted(RECIPES_DIR.glob("*/*.yaml")):
        if path.name.startswith("_"):
            continue
        summary, task = _summary_and_task(path)
        name = f"{path.parent.name}/{path.stem}"
        out.append(Recipe(name=name, path=path, task=task, summary=summary))
    return out


def find_recipe(name: str) -> Path | None:
    """The file of built-in recipe ``name`` (``mnist5k/spacl``, ``mnist5k/spacl.yaml`` or
    ``configs/mnist5k/spacl.yaml``), or ``None`` when no shipped recipe has that name."""
    if not isinstance(name, str):
        raise TypeError(f"recipe name must be a string, got {type(name).__name__}")
    key = name.strip().replace("\\", "/")
    for prefix in ("configs/", "./configs/"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    if key.endswith(".yaml"):
        key = key[: -len(".yaml")]
    parts = key.split("/")
    if len(parts) != 2 or not all(parts) or any(p in (".", "..") for p in parts):
        return None
    path = RECIPES_DIR / parts[0] / f"{parts[1]}.yaml"
    return path if path.is_file() else None


def resolve_recipe(name_or_path: str | Path) -> Path:
    """A recipe file from a path (an existing file wins) or a built-in recipe name.

    Raises ``FileNotFoundError`` naming the argument, with close built-in names.
    """
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    builtin = find_recipe(str(name_or_path))
    if builtin is not None:
        return builtin
    import difflib

    names = [r.name for r in list_recipes()]
    close = difflib.get_close_matches(str(name_or_path).removesuffix(".yaml"), names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise FileNotFoundError(
        f"recipe {str(name_or_path)!r} does not exist: neither a file nor a built-in recipe name "
        f"(list them with `spacl recipes`){hint}"
    )
