"""Open-intent detection (``task: text``): one package, one module per concept.

=============  ================================================================
``config``     the recipe schema (:class:`OODConfig`, :func:`ood_config`) and the
               loss builder (:func:`~spacl.tasks.text.config.build_text_loss`);
               registers the task
``task``       :func:`train_ood`: a text run, frozen encoder + head or fine-tuned
               top layers (:func:`train_finetuned`), or the ADB detector
``frozen``     the head trained on cached frozen embeddings
``finetune``   top-layer fine-tuning on cached bottom states
``decision``   the open-intent decision rules and their choice on dev
``detector``   what the text runs share: split, decision, run opening, detector run
``states``     frozen encoder outputs kept for training; the backbone
``adb``        ADB / DA-ADB as TEXTOIR runs them; ``adb_run``: as a run
``run``        a finished run used: the detector, re-evaluation
``export``     ``spacl export`` of a text run
=============  ================================================================

The names below are the package's public ones (``from spacl.tasks.text import
train_ood``); each is imported from its module on first use, so importing the package
(as the task registry does, for the schema) loads no training code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spacl._lazy import lazy_attributes

if TYPE_CHECKING:
    from spacl.tasks.text.config import OOD_OBJECTIVES, OODConfig, ood_config
    from spacl.tasks.text.task import embed_split, train_finetuned, train_ood

#: public name -> the module that defines it
_PUBLIC = {
    "OOD_OBJECTIVES": "config",
    "OODConfig": "config",
    "ood_config": "config",
    "embed_split": "task",
    "train_finetuned": "task",
    "train_ood": "task",
}

__all__ = [
    "OOD_OBJECTIVES",
    "OODConfig",
    "embed_split",
    "ood_config",
    "train_finetuned",
    "train_ood",
]

#: the public names, imported from their module on first use (module docstring)
__getattr__ = lazy_attributes(__name__, _PUBLIC)
