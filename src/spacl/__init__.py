"""spacl: contrastive learning with hard samples, and the geometry of what it learns.

Subpackages
-----------
``spacl.losses``     every objective on one masked-logsumexp kernel
``spacl.mining``     SPACL's miners (dynamic anchor, farthest point, relative threshold,
                     adversarial negatives)
``spacl.geometry``   neural / dimensional collapse, uniformity, SPACL optimality checks
``spacl.alignment``  CKA, RSA and the CL-vs-NSCL bound
``spacl.data``, ``spacl.models``, ``spacl.engine``, ``spacl.evaluate``  training system

``spacl.load(run_dir)`` returns a trained run's encoder (:mod:`spacl.trained`);
``spacl.load_recipe(name_or_path, overrides)`` reads and validates any recipe
(:mod:`spacl.schema`) and ``spacl.run_recipe(name_or_path, overrides, out=...)`` runs it
(:mod:`spacl.tasks`), the way ``spacl train`` does.
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["__version__", "load", "load_recipe", "run_recipe"]

if TYPE_CHECKING:
    from spacl.schema import load_recipe
    from spacl.tasks import run_recipe
    from spacl.trained import load


def __getattr__(name: str) -> Any:
    """``spacl.load`` / ``load_recipe`` / ``run_recipe`` without importing torch at
    ``import spacl`` (``spacl --version``)."""
    if name == "load":
        from spacl.trained import load

        return load
    if name == "load_recipe":
        from spacl.schema import load_recipe

        return load_recipe
    if name == "run_recipe":
        from spacl.tasks import run_recipe

        return run_recipe
    raise AttributeError(f"module 'spacl' has no attribute {name!r}")
