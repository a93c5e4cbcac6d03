"""Training engine of every task (images, link prediction, text): one loop, exact resume,
DDP, shared randomness.

Each task supplies the body of the loop and its own schema (:mod:`spacl.tasks.image`,
:mod:`spacl.tasks.kg`, :mod:`spacl.tasks.text`); nothing here knows a task.

=====================================  ======================================================
``all_gather_with_grad``                differentiable all-gather (sums gradients)
``init_from_env``                       torchrun process group (gloo on CPU, nccl on GPU)
``save_checkpoint`` / ``load_checkpoint``  atomic write, ``weights_only=True`` read
``LARS`` / ``WarmupCosine``             optimiser and learning-rate schedule
``build_optimizer`` / ``build_scheduler`` every task's optimiser and schedule
``TrainLoop`` / ``LoopBody``            the one loop of every task and what a task supplies
``evaluating(*modules)``                every task's evaluation: eval mode, no autograd, RNG kept
``Evaluator``                           a task's scoring function as data, called by the loop
``Checkpointer``                        every task's checkpoints, resume and signal stop
``resolve_device``                      ``train.device`` as a ``torch.device``
``prepare_run`` / ``precision_dtypes``  a run's threads, determinism, cuDNN; its precision
``RunDirectory``                        a run's directory (image, KG, text)
=====================================  ======================================================

The run-directory layout and the config keys are documented in ``docs/training.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spacl._lazy import lazy_attributes

if TYPE_CHECKING:
    from spacl.engine.checkpoint import (
        capture_rng_state,
        load_checkpoint,
        remove_stale_temporaries,
        restore_rng_state,
        save_checkpoint,
    )
    from spacl.engine.device import device_of, precision_dtypes, prepare_run, resolve_device
    from spacl.engine.distributed import (
        DistributedContext,
        all_gather_nograd,
        all_gather_with_grad,
        init_from_env,
        is_distributed,
    )
    from spacl.engine.evaluation import Evaluator, evaluating
    from spacl.engine.loop import Best, LoopBody, LoopPlan, Progress, StopRequested, TrainLoop
    from spacl.engine.optim import (
        LARS,
        WarmupCosine,
        WarmupLinear,
        build_optimizer,
        build_scheduler,
        scaled_lr,
    )
    from spacl.engine.rundir import MetricsLogger, RunDirectory, read_metrics
    from spacl.engine.stages import Checkpointer, StageBody

#: each public name and the module it lives in: imported on first use (PEP 562), so
#: ``import spacl.engine.rundir`` (the CLI's run-directory checks) loads no training code
_PUBLIC = {
    "capture_rng_state": "checkpoint",
    "load_checkpoint": "checkpoint",
    "remove_stale_temporaries": "checkpoint",
    "restore_rng_state": "checkpoint",
    "save_checkpoint": "checkpoint",
    "device_of": "device",
    "precision_dtypes": "device",
    "prepare_run": "device",
    "resolve_device": "device",
    "DistributedContext": "distributed",
    "all_gather_nograd": "distributed",
    "all_gather_with_grad": "distributed",
    "init_from_env": "distributed",
    "is_distributed": "distributed",
    "evaluating": "evaluation",
    "Evaluator": "evaluation",
    "Best": "loop",
    "LoopBody": "loop",
    "LoopPlan": "loop",
    "Progress": "loop",
    "StopRequested": "loop",
    "TrainLoop": "loop",
    "LARS": "optim",
    "WarmupCosine": "optim",
    "WarmupLinear": "optim",
    "build_optimizer": "optim",
    "build_scheduler": "optim",
    "scaled_lr": "optim",
    "MetricsLogger": "rundir",
    "RunDirectory": "rundir",
    "read_metrics": "rundir",
    "Checkpointer": "stages",
    "StageBody": "stages",
}


#: the public names, imported from their module on first use
__getattr__ = lazy_attributes(__name__, _PUBLIC)


def __dir__() -> list[str]:
    return sorted(set(__all__) | {k for k in globals() if not k.startswith("_")})


__all__ = [
    "LARS",
    "Best",
    "Checkpointer",
    "DistributedContext",
    "Evaluator",
    "LoopBody",
    "LoopPlan",
    "MetricsLogger",
    "Progress",
    "RunDirectory",
    "StageBody",
    "StopRequested",
    "TrainLoop",
    "WarmupCosine",
    "WarmupLinear",
    "all_gather_nograd",
    "all_gather_with_grad",
    "build_optimizer",
    "build_scheduler",
    "capture_rng_state",
    "device_of",
    "evaluating",
    "init_from_env",
    "is_distributed",
    "load_checkpoint",
    "precision_dtypes",
    "prepare_run",
    "read_metrics",
    "remove_stale_temporaries",
    "resolve_device",
    "restore_rng_state",
    "save_checkpoint",
    "scaled_lr",
]
