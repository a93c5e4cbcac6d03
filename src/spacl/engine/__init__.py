"""Training engine: one loop for every objective, exact resume, DDP, shared randomness.

=====================================  ======================================================
``load_config(path, overrides)``        OmegaConf structured config, validated (``config``)
``Trainer(cfg, run_dir).fit()``         the loop, checkpoints, evaluation, run directory
``train(cfg, run_dir, resume=...)``     the same in one call
``Arm``                                 one model: encoder, target, objective, optimiser
``OBJECTIVES`` / ``build_objective``    objective registry (name -> loss and how to feed it)
``all_gather_with_grad``                differentiable all-gather (sums gradients)
``init_from_env``                       torchrun process group (gloo on CPU, nccl on GPU)
``save_checkpoint`` / ``load_checkpoint``  atomic write, ``weights_only=True`` read
``LARS`` / ``WarmupCosine``             optimiser and learning-rate schedule
``build_optimizer`` / ``build_scheduler`` every task's optimiser and schedule
``TrainLoop`` / ``LoopBody``            the one loop of every task and what a task supplies
``evaluating(*modules)``                every task's evaluation: eval mode, no autograd, RNG kept
``resolve_device``                      ``train.device`` as a ``torch.device``
``RunDirectory``                        a run's directory (image, KG, text)
=====================================  ======================================================

The run-directory layout and the config keys are documented in ``docs/training.md``.
"""

from spacl.engine.arm import Arm, NonFiniteLossError, Precision
from spacl.engine.checkpoint import (
    capture_rng_state,
    load_checkpoint,
    remove_stale_temporaries,
    restore_rng_state,
    save_checkpoint,
)
from spacl.engine.config import Config, config_to_dict, load_config, validate_config
from spacl.engine.device import device_of, resolve_device
from spacl.engine.distributed import (
    DistributedContext,
    all_gather_nograd,
    all_gather_with_grad,
    init_from_env,
    is_distributed,
)
from spacl.engine.evaluation import evaluating
from spacl.engine.loop import Best, LoopBody, LoopPlan, Progress, StopRequested, TrainLoop
from spacl.engine.objectives import OBJECTIVES, build_objective
from spacl.engine.optim import (
    LARS,
    WarmupCosine,
    WarmupLinear,
    build_optimizer,
    build_scheduler,
    scaled_lr,
)
from spacl.engine.rundir import MetricsLogger, RunDirectory, read_metrics
from spacl.engine.stages import RunStages, StageBody
from spacl.engine.trainer import Trainer, TrainResult, train
from spacl.losses.classifier import CrossEntropyObjective

__all__ = [
    "LARS",
    "OBJECTIVES",
    "Arm",
    "Best",
    "Config",
    "CrossEntropyObjective",
    "DistributedContext",
    "LoopBody",
    "LoopPlan",
    "MetricsLogger",
    "NonFiniteLossError",
    "Precision",
    "Progress",
    "RunDirectory",
    "RunStages",
    "StageBody",
    "StopRequested",
    "TrainLoop",
    "TrainResult",
    "Trainer",
    "WarmupCosine",
    "WarmupLinear",
    "all_gather_nograd",
    "all_gather_with_grad",
    "build_objective",
    "build_optimizer",
    "build_scheduler",
    "capture_rng_state",
    "config_to_dict",
    "device_of",
    "evaluating",
    "init_from_env",
    "is_distributed",
    "load_checkpoint",
    "load_config",
    "read_metrics",
    "remove_stale_temporaries",
    "resolve_device",
    "restore_rng_state",
    "save_checkpoint",
    "scaled_lr",
    "train",
    "validate_config",
]
