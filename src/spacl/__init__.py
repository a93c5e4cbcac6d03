"""Contrastive learning with hard samples, and the geometry of what it learns.

Subpackages:
    spacl.losses     every objective on one masked-logsumexp kernel (SPACLLoss,
                     NTXentLoss, SupConLoss, HardNegativeLoss...)
    spacl.mining     SPACL's miners (dynamic anchor, farthest point, relative
                     threshold, adversarial negatives)
    spacl.geometry   neural / dimensional collapse, uniformity, SPACL optimality checks
    spacl.alignment  CKA, RSA and the CL-vs-NSCL bound
    spacl.data, spacl.models, spacl.engine, spacl.evaluate   the training system
    spacl.tasks      the tasks a recipe runs: image (the default), kg, text

Functions (listed below):
    load(run_dir)                         a trained run's model
    load_recipe(name_or_path, overrides)  read and validate any recipe
    run_recipe(name_or_path, overrides, out=...)
                                          run it, the way `spacl train` does

They import torch on first use, so `import spacl` stays light (`spacl --version`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load", "load_recipe", "run_recipe"]


def __dir__() -> list[str]:
    """The public names (``__all__``), not the helpers this module imports."""
    return sorted(__all__)


def load(
    run_dir: str | Path,
    arm: str | None = None,
    *,
    checkpoint: str | Path | None = None,
    device: Any = "cpu",
) -> Any:
    """The trained model of a run directory (spacl.trained.load).

    Image runs give a spacl.trained.TrainedModel (.embed(images)), text runs the
    open-intent detector (.predict(texts)), KG runs the link predictor.

    Example (a two-step run on the built-in digits, then its model; model.embed also takes
    image files):
        >>> import tempfile, torch, spacl
        >>> quick = ["train.max_steps=2", "eval.every_epochs=0", "eval.linear_probe=false",
        ...          "eval.geometry=false"]
        >>> with tempfile.TemporaryDirectory() as out:
        ...     run = spacl.run_recipe("digits/simclr", quick, out=out, quiet=True)
        ...     model = spacl.load(run.run_dir)
        >>> model.embed(torch.rand(3, 1, 8, 8)).shape  # three 8x8 images in [0, 1]
        torch.Size([3, 128])
    """
    from spacl.trained import load as load_run

    return load_run(run_dir, arm, checkpoint=checkpoint, device=device)


def load_recipe(source: Any, overrides: Sequence[str] = ()) -> Any:
    """Read, override and validate any recipe (spacl.tasks.load_recipe): its task
    (image, kg or text) and its typed config.

    Example:
        >>> import spacl
        >>> recipe = spacl.load_recipe("mnist5k/spacl", ["train.epochs=1"])
        >>> recipe.task, recipe.config.train.epochs
        ('image', 1)
    """
    from spacl.tasks import registry

    return registry.load_recipe(source, overrides)


def run_recipe(
    source: Any,
    overrides: Sequence[str] = (),
    *,
    out: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
) -> Any:
    """Run any recipe as `spacl train` does (spacl.tasks.run_recipe).

    Example (two steps of SimCLR on the built-in digits; the final kNN and NCC accuracies
    come back in metrics, the run directory holds the checkpoint and eval.json):
        >>> import tempfile, spacl
        >>> quick = ["train.max_steps=2", "eval.every_epochs=0", "eval.linear_probe=false",
        ...          "eval.geometry=false"]
        >>> with tempfile.TemporaryDirectory() as out:
        ...     result = spacl.run_recipe("digits/simclr", quick, out=out, quiet=True)
        >>> result.global_step, sorted(result.metrics["main"])
        (2, ['knn_accuracy', 'ncc_accuracy'])
    """
    from spacl.tasks import run_recipe as run_any

    return run_any(source, overrides, out=out, resume=resume, quiet=quiet)
