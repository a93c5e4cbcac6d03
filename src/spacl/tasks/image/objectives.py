"""The image task's objectives: how its runs build and feed each registry row.

The names, classes and label policies are rows of the one objective registry
(:mod:`spacl.losses.registry`, shared by every task and study); this module adds the
image task's side: the label rule of ``objective.use_labels``, the dry run that checks a
section before training, and what each step passes to the loss.

=================  ====================================  ========  ==========================
name               module                                labels    step
=================  ====================================  ========  ==========================
``ntxent``         :class:`~spacl.losses.NTXentLoss`     never     views (alias ``simclr``)
``dcl``            ``DecoupledContrastiveLoss``          never     views
``debiased``       ``DebiasedContrastiveLoss``           never     views
``hcl``            ``HardNegativeLoss``                  never     views (HCL / HUCL)
``hscl``           ``HardNegativeLoss`` with labels      always    views
``supcon``         ``SupConLoss(variant="out")``         always    views
``supcon_in``      ``SupConLoss(variant="in")``          always    views
``nscl``           ``NSCLLoss``                          always    views
``sampled_hard``   ``SampledHardNegativeLoss``           default   views (HSCL; no labels: HUCL)
``spacl``          ``spacl.losses.spacl.SPACLLoss``      optional  spacl (anchor + pool)
``cross_entropy``  ``CrossEntropyObjective``             always    views, classifier head
``barlow_twins``   ``BarlowTwinsLoss``                   never     views (no EMA target)
``varcon``         ``VarConLoss``                        always    views
``maskcon``        ``MaskConLoss``                       always    views (coarse labels, keys)
=================  ====================================  ========  ==========================

"views" objectives get every view's projection ``[B, V, d]`` (and ``targets=`` from the
EMA target when ``model.momentum > 0`` and the loss accepts it); "spacl" gets the
online anchor ``[B, d]`` and the target pool ``[B, V, d]`` (see
:mod:`spacl.tasks.image.arm`).  Labels are the fine or coarse labels
(``data.label_kind``).  Constructor arguments come from ``objective.temperature``,
``objective.normalize`` and ``objective.params``; unknown parameters are rejected by
name before training.  A ``generator`` argument, when the loss takes one, is seeded
from the run seed so resumed and distributed runs draw the same numbers.

``objective.queue_size > 0`` gives the arm a :class:`~spacl.mining.NegativeQueue` of
that many past target embeddings (every view of every instance, pushed after each
optimiser step; labels too when the objective uses them), passed to the loss as
``extra_negatives`` / ``extra_negative_labels``; the objective must accept them.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from spacl.losses.registry import ObjectiveSpec, objectives_for
from spacl.losses.registry import objective_spec as _registry_spec

__all__ = [
    "OBJECTIVES",
    "build_objective",
    "check_objective",
    "objective_spec",
]

#: the image task's rows of the one objective registry (:mod:`spacl.losses.registry`)
OBJECTIVES: dict[str, ObjectiveSpec] = objectives_for("image")


def objective_spec(name: str, key: str = "objective.name") -> ObjectiveSpec:
    """The image task's registry row of ``name`` (``ValueError`` naming ``key`` if unknown)."""
    return _registry_spec(name, "image", key)


def _use_labels(ocfg: Any, spec: ObjectiveSpec, key: str) -> bool:
    use = ocfg.use_labels
    if use is None:
        class_pool = (ocfg.params or {}).get("positive_pool") in ("class", "instance_class")
        return spec.default_use_labels() or class_pool
    if use and spec.labels == "never":
        raise ValueError(f"config key '{key}.use_labels': objective {spec.name!r} takes no labels")
    if not use and spec.labels == "always":
        raise ValueError(f"config key '{key}.use_labels': objective {spec.name!r} needs labels")
    return bool(use)


def check_objective(
    ocfg: Any, cfg: Any, key: str = "objective", momentum: float | None = None
) -> None:
    """Validate an objective section before training.

    Builds the loss once on the CPU (known name, accepted parameters, label policy,
    compatibility with ``model.momentum``) and runs it on a tiny random batch with the
    configured number of views, so that e.g. NT-Xent with one view or SPACL with a pool
    smaller than ``num_positives + 1`` fail here, naming the key.
    """
    b, d = 8, 6
    spec, module, use_labels = build_objective(
        ocfg, cfg, key=key, seed=0, momentum=momentum, embedding_dim=d
    )
    if "embedding_dim" in (ocfg.params or {}):
        d = int(ocfg.params["embedding_dim"])
    views = int(cfg.views.num_views)
    gen = torch.Generator().manual_seed(0)
    labels = torch.arange(4).repeat_interleave(2) if use_labels else None
    queue = _check_queue_size(ocfg, spec, module, key)
    extra: dict[str, Any] = {}
    if queue:
        extra["extra_negatives"] = torch.randn(3, d, generator=gen)
        if use_labels:
            extra["extra_negative_labels"] = torch.arange(3)
    with torch.random.fork_rng(devices=[]):
        try:
            if spec.step == "spacl":
                pool = torch.randn(b, views, d, generator=gen)
                idx = module.choose_anchor(pool)  # type: ignore[operator]
                module(pool[torch.arange(b), idx], pool, labels=labels, anchor_index=idx, **extra)
            elif spec.classifier_head:
                module(torch.randn(b, views, 4, generator=gen), labels=labels)
            else:
                z = torch.randn(b, views, d, generator=gen)
                kwargs: dict[str, Any] = {"labels": labels}
                if float(cfg.model.momentum if momentum is None else momentum) > 0:
                    kwargs["targets"] = torch.randn(b, views, d, generator=gen)
                module(z, **kwargs, **extra)
        except ValueError as err:
            raise ValueError(
                f"config key '{key}' ({spec.name}): {err} (found on a dry run with "
                f"views.num_views={views})"
            ) from err


def _check_queue_size(ocfg: Any, spec: ObjectiveSpec, module: nn.Module, key: str) -> int:
    """``objective.queue_size`` as an int ``>= 0``; a queue needs a loss that takes one."""
    size = getattr(ocfg, "queue_size", 0)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"config key '{key}.queue_size' must be an integer >= 0, got {size!r}")
    if size > 0 and (spec.classifier_head or not accepts_extra_negatives(module)):
        raise ValueError(
            f"config key '{key}.queue_size'={size}: objective {spec.name!r} takes no "
            "extra_negatives (set it to 0)"
        )
    return size


def build_objective(
    ocfg: Any,
    cfg: Any,
    *,
    key: str = "objective",
    seed: int = 0,
    momentum: float | None = None,
    embedding_dim: int | None = None,
) -> tuple[ObjectiveSpec, nn.Module, bool]:
    """Build the loss module of ``ocfg``; return ``(spec, module, use_labels)``.

    ``momentum`` is the arm's EMA momentum (default ``cfg.model.momentum``);
    ``embedding_dim`` is passed to losses that build sub-networks (SPACL's generator
    and discriminator) unless ``params`` sets it.  Errors name the config key
    (``objective.params.beta``, ``arms[1].objective.name``...).
    """
    spec = objective_spec(ocfg.name, f"{key}.name")
    use_labels = _use_labels(ocfg, spec, key)
    from spacl.data import generator_for

    module = spec.build(
        ocfg.params,
        key=key,
        given={"temperature": ocfg.temperature, "normalize": ocfg.normalize},
        optional={
            "generator": generator_for(seed, "objective", spec.name),
            "embedding_dim": embedding_dim,
            "supervised": True if spec.labels == "optional" and use_labels else None,
        },
    )
    assert module is not None  # every image objective has a loss module
    m = float(cfg.model.momentum if momentum is None else momentum)
    if m > 0 and spec.step == "views" and not accepts_targets(module):
        where = "model.momentum" if momentum is None else key.rsplit(".", 1)[0] + ".momentum"
        raise ValueError(
            f"config key '{where}'={m}: objective {spec.name!r} cannot use an EMA target "
            "(set it to 0)"
        )
    if spec.step == "spacl" and int(cfg.views.num_views) < 2:
        raise ValueError(
            f"config key 'views.num_views' must be >= 2 for spacl (1 original + M views), "
            f"got {cfg.views.num_views}"
        )
    return spec, module, use_labels


def accepts_targets(module: nn.Module) -> bool:
    """Whether ``module.forward`` takes ``targets=`` (candidates from a target encoder)."""
    try:
        return "targets" in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


def accepts_extra_negatives(module: nn.Module) -> bool:
    """Whether ``module.forward`` takes ``extra_negatives=`` (a negative queue)."""
    try:
        return "extra_negatives" in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False
