"""Image representation learning (``task: image``, the default): one package, one module
per concept, on the engine's loop (:mod:`spacl.engine`).

==============  ==============================================================
``config``      the recipe schema (:class:`Config`, :func:`load_config`); registers
                the task
``data``        the training stream and evaluation sets of a run (built-in data sets,
                CIFAR, an image folder and its held-out split)
``objectives``  how each objective of the registry is built and fed for images
``arm``         one trained model: encoder, target, objective, optimiser, precision
``build``       the arms of a run from its config
``evaluation``  the probe suite: online kNN / NCC / geometry, the final linear probe
``trainer``     :class:`Trainer`: data, arms and run directory around the engine's
                loop, with the image loop body (``ImageSteps``); :func:`train`
``summary``     ``summary.md`` and the results table
==============  ==============================================================

The names below are the package's public ones (``from spacl.tasks.image import
Trainer``); each is imported from its module on first use, so importing the package (as
the task registry does, for the schema) loads no training code.

Example::

    from spacl.tasks.image import Trainer, load_config
    cfg = load_config("digits/spacl", ["train.epochs=5"])
    result = Trainer(cfg, "runs/try").fit()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spacl._lazy import lazy_attributes

if TYPE_CHECKING:
    from spacl.tasks.image.arm import Arm, NonFiniteLossError, Precision
    from spacl.tasks.image.config import Config, config_to_dict, load_config, validate_config
    from spacl.tasks.image.evaluation import ProbeSuite
    from spacl.tasks.image.objectives import OBJECTIVES, build_objective
    from spacl.tasks.image.trainer import Trainer, TrainResult, train

#: public name -> the module that defines it
_PUBLIC = {
    "Arm": "arm",
    "NonFiniteLossError": "arm",
    "Precision": "arm",
    "Config": "config",
    "config_to_dict": "config",
    "load_config": "config",
    "validate_config": "config",
    "ProbeSuite": "evaluation",
    "OBJECTIVES": "objectives",
    "build_objective": "objectives",
    "TrainResult": "trainer",
    "Trainer": "trainer",
    "train": "trainer",
}

__all__ = [
    "OBJECTIVES",
    "Arm",
    "Config",
    "NonFiniteLossError",
    "Precision",
    "ProbeSuite",
    "TrainResult",
    "Trainer",
    "build_objective",
    "config_to_dict",
    "load_config",
    "train",
    "validate_config",
]

#: the public names, imported from their module on first use (module docstring)
__getattr__ = lazy_attributes(__name__, _PUBLIC)
