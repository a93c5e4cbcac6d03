"""Link prediction (``task: kg``): one package, one module per concept.

============  =================================================================
``config``    the recipe schema (:class:`KGConfig`, :func:`kg_config`) and the
              objective builder (:func:`build_kg_objective`); registers the task
``train``     :func:`train_kg`: model, objective, epochs, validation, run directory
``run``       a finished run used: :func:`~spacl.tasks.kg.run.load_link_model`,
              :func:`~spacl.tasks.kg.run.evaluate_kg_run`
``export``    ``spacl export`` of a run: tables, names and scoring code for plain torch
============  =================================================================

The names below are the package's public ones (``from spacl.tasks.kg import train_kg``);
each is imported from its module on first use, so importing the package (as the task
registry does, for the schema) loads no training code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spacl._lazy import lazy_attributes

if TYPE_CHECKING:
    from spacl.tasks.kg.config import KG_OBJECTIVES, KGConfig, build_kg_objective, kg_config
    from spacl.tasks.kg.train import build_link_predictor, train_kg

#: public name -> the module that defines it
_PUBLIC = {
    "KGConfig": "config",
    "build_kg_objective": "config",
    "kg_config": "config",
    "KG_OBJECTIVES": "config",
    "build_link_predictor": "train",
    "train_kg": "train",
}

__all__ = [
    "KG_OBJECTIVES",
    "KGConfig",
    "build_kg_objective",
    "build_link_predictor",
    "kg_config",
    "train_kg",
]

#: the public names, imported from their module on first use (module docstring)
__getattr__ = lazy_attributes(__name__, _PUBLIC)
