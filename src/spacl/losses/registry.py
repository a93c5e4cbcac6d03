"""The one objective registry: name -> loss constructor, for every task and study.

Each row (:class:`ObjectiveSpec`) names a loss class (imported when first used), the
tasks that offer it under that name, how it takes labels, which step feeds it, and the
constructor arguments the name sets (``fixed``: the name means them; ``defaults``: the
name's form, a recipe's ``objective.params`` override them).  A name means one loss per
task; two rows share a name only for different tasks (``spacl`` is
:class:`~spacl.losses.SPACLLoss` for images and text heads, SPACLLoss with
``instance_class`` positives for fine-tuning, :class:`~spacl.losses.kg.LinkSPACLLoss`
for link prediction).

=================  ====================================  ========  ==========  ==================
name               class                                 labels    step        tasks
=================  ====================================  ========  ==========  ==================
``ntxent``         ``NTXentLoss``                        never     views       image (``simclr``)
``dcl``            ``DecoupledContrastiveLoss``          never     views       image
``debiased``       ``DebiasedContrastiveLoss``           never     views       image
``hcl``            ``HardNegativeLoss``                  never     views       image
``hscl``           ``HardNegativeLoss``                  always    views       image
``supcon``         ``SupConLoss`` (``variant="out"``)    always    views       image, text, ft
``supcon_in``      ``SupConLoss`` (``variant="in"``)     always    views       image
``nscl``           ``NSCLLoss``                          always    views       image
``sampled_hard``   ``SampledHardNegativeLoss``           default   views       image
``spacl``          ``SPACLLoss``                         optional  spacl       image, text
``spacl``          ``SPACLLoss`` (instance_class)        always    spacl       ft
``spacl_selected`` ``SPACLLoss`` (every view, mean)      always    spacl       ft
``cross_entropy``  ``CrossEntropyObjective``             always    views (*)   image, text, ft
``barlow_twins``   ``BarlowTwinsLoss``                   never     views       image
``varcon``         ``VarConLoss``                        always    views       image
``maskcon``        ``MaskConLoss``                       always    views       image
``frozen``         (no loss: the encoder as is)          never     none        text
``infonce``        ``kg.LinkInfoNCELoss``                never     link        kg
``spacl``          ``kg.LinkSPACLLoss``                  never     link        kg
=================  ====================================  ========  ==========  ==================

(``ft``: ``text_finetune``, the fine-tuned text recipes; (*) with ``classifier_head``:
the task puts a linear classifier before the loss, which receives logits.)

:meth:`ObjectiveSpec.build` is the one constructor call (the tasks reach it through
:func:`build_objective`): the arguments the caller
gives (``temperature``...), the name's ``defaults`` and ``fixed`` values and the
recipe's ``params``, with errors that name the config key
(``objective.params.beta``).  The engine adds how a step feeds the loss
(:mod:`spacl.tasks.image.objectives`); the studies' method lists are rows over this registry
(:class:`spacl.studies.spacl_bench.methods.Method`).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from spacl._validation import check_choice

__all__ = [
    "OBJECTIVE_TASKS",
    "REGISTRY",
    "ObjectiveSpec",
    "accepted_arguments",
    "build_objective",
    "objective_names",
    "objective_spec",
    "objectives_for",
]

#: the tasks an objective name can belong to
OBJECTIVE_TASKS = ("image", "text", "text_finetune", "kg")


def accepted_arguments(cls: Callable[..., Any]) -> tuple[set[str], bool]:
    """The keyword names ``cls`` takes, and whether it takes ``**kwargs``."""
    params = inspect.signature(cls).parameters
    names = {n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return names, any(p.kind == p.VAR_KEYWORD for p in params.values())


@dataclass(frozen=True)
class ObjectiveSpec:
    """One row of the registry (module docstring)."""

    name: str
    target: str  # "module:Class" (imported lazily); "" for no loss module
    labels: str  # never | always | default | optional
    step: str = "views"  # views | spacl | link | none
    fixed: Mapping[str, Any] = field(default_factory=dict)  # arguments the name means
    defaults: Mapping[str, Any] = field(default_factory=dict)  # the name's form; params win
    classifier_head: bool = False
    tasks: tuple[str, ...] = ("image",)
    description: str = ""

    def load(self) -> Callable[..., nn.Module]:
        """The loss class (``ValueError`` if its module is not part of this build)."""
        module_name, _, attr = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            raise ValueError(
                f"objective {self.name!r} needs {module_name}, which is not part of this build"
            ) from err
        cls: Callable[..., nn.Module] = getattr(module, attr)
        return cls

    def default_use_labels(self) -> bool:
        """Whether the objective sees labels unless told otherwise."""
        return self.labels in ("always", "default")

    def arguments(
        self, params: Mapping[str, Any], given: Mapping[str, Any], key: str
    ) -> dict[str, Any]:
        """``defaults``, then ``params``, then ``given`` and ``fixed`` (params may not change them).

        ``given`` values of ``None`` are left out (a recipe that does not set the key).
        """
        kwargs: dict[str, Any] = {**self.defaults, **params}
        for name, value in given.items():
            if value is None:
                continue
            if name in params:
                raise ValueError(
                    f"config key '{key}.params.{name}': set it as {key}.{name} instead"
                )
            kwargs[name] = value
        for name, value in self.fixed.items():
            if name in params and params[name] != value:
                raise ValueError(
                    f"config key '{key}.params.{name}' is fixed to {value!r} by objective "
                    f"{self.name!r}"
                )
            kwargs[name] = value
        return kwargs

    def build(
        self,
        params: Mapping[str, Any] | None = None,
        *,
        key: str = "objective",
        given: Mapping[str, Any] | None = None,
        optional: Mapping[str, Any] | None = None,
    ) -> nn.Module | None:
        """The loss module (``None`` for a row without one, such as ``frozen``).

        ``params``: the recipe's ``objective.params``; ``given``: arguments the caller
        sets (``temperature``...); ``optional``: arguments passed only where the class
        takes them and nothing else set them (``generator``, ``embedding_dim``).  An
        unknown parameter or a constructor error is a ``ValueError`` naming ``key``.
        """
        params = dict(params or {})
        if not self.target:
            if params:
                raise ValueError(
                    f"config key '{key}.params.{sorted(params)[0]}': objective {self.name!r} "
                    "takes no parameters"
                )
            return None
        cls = self.load()
        kwargs = self.arguments(params, given or {}, key)
        accepted, var_kw = accepted_arguments(cls)
        unknown = sorted(set(kwargs) - accepted)
        if unknown and not var_kw:
            allowed = sorted(accepted - set(self.fixed) - {"generator", "reduction"})
            raise ValueError(
                f"config key '{key}.params.{unknown[0]}' is not a parameter of objective "
                f"{self.name!r} (accepted: {', '.join(allowed)})"
            )
        for name, value in (optional or {}).items():
            if value is not None and (name in accepted or var_kw):
                kwargs.setdefault(name, value)
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as err:
            raise ValueError(f"config key '{key}' ({self.name}): {err}") from err


_L = "spacl.losses"
_SPACL = f"{_L}.spacl:SPACLLoss"
_CE = f"{_L}.classifier:CrossEntropyObjective"
_TEXT = ("image", "text", "text_finetune")
#: the fine-tuned SPACL forms (docs in :mod:`spacl.tasks.text.finetune`)
_FT_SPACL = {"positive_pool": "instance_class", "detach_candidates": False}
_FT_SELECTED = {**_FT_SPACL, "positive_mode": "mean", "anchor_set": "every_view"}

REGISTRY: tuple[ObjectiveSpec, ...] = (
    ObjectiveSpec("ntxent", f"{_L}:NTXentLoss", "never", description="NT-Xent / SimCLR"),
    ObjectiveSpec("simclr", f"{_L}:NTXentLoss", "never", description="alias of ntxent"),
    ObjectiveSpec("dcl", f"{_L}:DecoupledContrastiveLoss", "never", description="decoupled CL"),
    ObjectiveSpec("debiased", f"{_L}:DebiasedContrastiveLoss", "never", description="debiased"),
    ObjectiveSpec("hcl", f"{_L}:HardNegativeLoss", "never", description="HCL / HUCL"),
    ObjectiveSpec("hscl", f"{_L}:HardNegativeLoss", "always", description="hard-negative SupCon"),
    ObjectiveSpec("supcon", f"{_L}:SupConLoss", "always", fixed={"variant": "out"}, tasks=_TEXT),
    ObjectiveSpec("supcon_in", f"{_L}:SupConLoss", "always", fixed={"variant": "in"}),
    ObjectiveSpec("nscl", f"{_L}:NSCLLoss", "always", description="negatives-only SupCon"),
    ObjectiveSpec(
        "sampled_hard", f"{_L}:SampledHardNegativeLoss", "default", description="HSCL/HUCL"
    ),
    ObjectiveSpec("spacl", _SPACL, "optional", step="spacl", tasks=("image", "text")),
    ObjectiveSpec(
        "spacl", _SPACL, "always", step="spacl", defaults=_FT_SPACL, tasks=("text_finetune",)
    ),
    ObjectiveSpec(
        "spacl_selected",
        _SPACL,
        "always",
        step="spacl",
        defaults=_FT_SELECTED,
        tasks=("text_finetune",),
        description="the supervised form spacl reproduce spacl chose on validation",
    ),
    ObjectiveSpec(
        "cross_entropy",
        _CE,
        "always",
        classifier_head=True,
        tasks=_TEXT,
        description="linear classifier on the features",
    ),
    ObjectiveSpec("barlow_twins", f"{_L}:BarlowTwinsLoss", "never", description="Barlow Twins"),
    ObjectiveSpec("varcon", f"{_L}:VarConLoss", "always", description="VarCon"),
    ObjectiveSpec("maskcon", f"{_L}:MaskConLoss", "always", description="MaskCon"),
    ObjectiveSpec("frozen", "", "never", step="none", tasks=("text",), description="no training"),
    ObjectiveSpec("infonce", f"{_L}.kg:LinkInfoNCELoss", "never", step="link", tasks=("kg",)),
    ObjectiveSpec("spacl", f"{_L}.kg:LinkSPACLLoss", "never", step="link", tasks=("kg",)),
)


def _index() -> dict[str, dict[str, ObjectiveSpec]]:
    table: dict[str, dict[str, ObjectiveSpec]] = {task: {} for task in OBJECTIVE_TASKS}
    for spec in REGISTRY:
        for task in spec.tasks:
            if spec.name in table[task]:
                raise RuntimeError(f"objective {spec.name!r} registered twice for task {task!r}")
            table[task][spec.name] = spec
    return table


_BY_TASK = _index()


def objectives_for(task: str = "image") -> dict[str, ObjectiveSpec]:
    """``name -> row`` of every objective ``task`` offers (in registry order)."""
    check_choice(task, "task", OBJECTIVE_TASKS)
    return dict(_BY_TASK[task])


def objective_names(task: str = "image") -> tuple[str, ...]:
    """The objective names of ``task``, in registry order."""
    return tuple(objectives_for(task))


def objective_spec(name: str, task: str = "image", key: str = "objective.name") -> ObjectiveSpec:
    """The row of ``name`` for ``task`` (``ValueError`` naming ``key`` and the names)."""
    table = objectives_for(task)
    try:
        check_choice(name, f"config key {key!r}", sorted(table))
    except TypeError as err:  # a config error is a ValueError naming the key
        raise ValueError(str(err)) from err
    return table[name]


def build_objective(
    name: str,
    task: str,
    params: Mapping[str, Any] | None,
    *,
    temperature: Any,
    seed: int,
    key: str = "objective",
) -> nn.Module | None:
    """The loss of objective ``name`` of ``task`` as a task builds it.

    The row's ``defaults`` and ``fixed`` values, the recipe's ``params``, the
    ``temperature`` (not passed to a classifier's loss, which takes logits), and a
    ``torch.Generator`` seeded with ``seed`` for losses that draw random numbers (the
    SPACL game).  ``None`` for a row without a loss (``frozen``).  Errors are
    ``ValueError`` naming ``key`` (``objective.name`` / ``objective.params.<arg>``).
    """
    spec = objective_spec(name, task, key=f"{key}.name")
    given = {}
    if not spec.classifier_head:
        if temperature is None:
            raise ValueError(f"config key '{key}.temperature' must be set for objective {name!r}")
        given = {"temperature": float(temperature)}
    return spec.build(
        params,
        key=key,
        given=given,
        optional={"generator": torch.Generator().manual_seed(seed)},
    )
