"""The frozen-encoder task's model: a projection head trained on cached sentence embeddings.

:func:`train_head` trains the head of ``model.head`` (and, for ``cross_entropy``, a linear
classifier on it) with the recipe's objective on ``views.num_views`` feature views per
example (:class:`~spacl.models.text.FeatureViews`); :func:`project` applies the trained
head.  The run around it (data, encoder, decision, run directory) is
:func:`spacl.tasks.text.task.train_ood`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from spacl._progress import progress
from spacl.engine.loop import LoopPlan, TrainLoop
from spacl.engine.optim import build_optimizer
from spacl.engine.stages import Checkpointer, StageBody, load_states, run_stage, states_of
from spacl.models.heads import ProjectionHead
from spacl.models.text import FeatureViews, ResidualHead
from spacl.tasks.text.config import build_text_loss

__all__ = ["HeadSteps", "batch_loss", "build_head", "project", "train_head"]


def build_head(
    cfg: DictConfig, in_dim: int, num_known: int, device: torch.device
) -> tuple[nn.Module, nn.Module | None]:
    """The projection head of ``model.head`` and, for cross-entropy, its linear classifier."""
    head: nn.Module
    if cfg.model.head == "residual":
        head = ResidualHead(in_dim, int(cfg.model.hidden_dim)).to(device)
    else:
        head = ProjectionHead(
            in_dim, int(cfg.model.proj_dim), str(cfg.model.head), int(cfg.model.hidden_dim)
        ).to(device)
    name = str(cfg.objective.name)
    classifier = (
        nn.Linear(int(head.out_dim), num_known).to(device) if name == "cross_entropy" else None
    )
    return head, classifier


def batch_loss(
    name: str,
    head: nn.Module,
    classifier: nn.Module | None,
    loss_fn: nn.Module | None,
    v: Tensor,
    yb: Tensor,
) -> Tensor:
    """The objective's loss on one batch of views ``v[b, V, d_in]``."""
    b, nv, d = v.shape
    z = head(v.reshape(b * nv, d)).reshape(b, nv, -1)
    assert loss_fn is not None
    if classifier is not None:
        logits = classifier(z.reshape(b * nv, -1))
        return loss_fn(logits.reshape(b, nv, -1), yb)
    return loss_fn(None, z, yb) if name == "spacl" else loss_fn(z, yb)


class HeadSteps(StageBody):
    """The head's body in the engine's loop: every epoch a seeded permutation of the
    examples, batches of ``train.batch_size`` (a last batch of one is skipped), their
    feature views, the objective's loss, one optimiser step."""

    def __init__(
        self,
        cfg: DictConfig,
        parts: tuple[nn.Module, nn.Module | None, nn.Module | None],
        data: tuple[Tensor, Tensor],
        optimizer: torch.optim.Optimizer,
        gen: torch.Generator,
    ) -> None:
        self.name = str(cfg.objective.name)
        self.head, self.classifier, self.loss_fn = parts
        self.x, self.y = data
        self.optimizer, self.gen = optimizer, gen
        self.batch = int(cfg.train.batch_size)
        self.views = FeatureViews(
            int(cfg.views.num_views), float(cfg.views.dropout), float(cfg.views.sigma)
        )
        self.losses: list[float] = []
        self.perm = torch.empty(0, dtype=torch.long)  # the running epoch's order
        self.bar = progress(
            total=int(cfg.train.epochs),
            desc=f"{self.name} head",
            mode=cfg.train.progress,
            unit="epoch",
        )

    def batches(self, epoch: int, start: int) -> Iterator[Tensor]:
        if start == 0:  # a fresh epoch draws its order; a resumed one has it
            self.perm = torch.randperm(self.x.shape[0], generator=self.gen)
        perm = self.perm.to(self.x.device)
        for i in range(start * self.batch, self.x.shape[0], self.batch):
            idx = perm[i : i + self.batch]
            if idx.numel() >= 2:
                yield idx

    def _parts(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "classifier": self.classifier,
            "loss_fn": self.loss_fn,
            "optimizer": self.optimizer,
            "gen": self.gen,
        }

    def state_dict(self) -> dict[str, Any]:
        return {**states_of(self._parts()), "perm": self.perm, "losses": list(self.losses)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        load_states(self._parts(), state)
        self.perm, self.losses = state["perm"], list(state["losses"])

    def step(self, batch: Tensor, loop: TrainLoop) -> float:
        v = self.views(self.x[batch], self.gen)  # [b, V, d_in]
        loss = batch_loss(self.name, self.head, self.classifier, self.loss_fn, v, self.y[batch])
        if not bool(torch.isfinite(loss)):
            p = loop.progress
            raise ValueError(
                f"non-finite {self.name} loss at epoch {p.epoch}, step {p.step_in_epoch}"
            )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        self.losses.append(loop.progress.mean_losses().get("loss", 0.0))
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{self.losses[-1]:.4f}")
        return {"epoch": epoch, "loss": self.losses[-1]}


def train_head(
    cfg: DictConfig,
    x: Tensor,
    y: Tensor,
    num_known: int,
    device: torch.device,
    stages: Checkpointer | None = None,
) -> tuple[nn.Module, list[float]]:
    """Train the head of ``cfg`` on embeddings ``x`` with labels ``y`` (``train.epochs``
    in the engine's loop); the head (eval mode) and every epoch's mean loss.
    ``objective.name=frozen``: no training, the identity.  ``stages``: the run's
    checkpointed loops (the head is its next stage)."""
    seed = int(cfg.train.seed)
    torch.manual_seed(seed)
    name = str(cfg.objective.name)
    if name == "frozen":
        return nn.Identity(), []
    head, classifier = build_head(cfg, int(x.shape[1]), num_known, device)
    loss_fn = build_text_loss(cfg, seed)
    if loss_fn is not None:
        loss_fn.to(device)
    params = list(head.parameters()) + (list(classifier.parameters()) if classifier else [])
    if not params:
        raise ValueError("config key 'model.head'='identity' leaves nothing to train")
    optimizer = build_optimizer(
        params,
        str(cfg.optim.name),
        float(cfg.optim.lr),
        weight_decay=float(cfg.optim.weight_decay),
        momentum=0.9,
    )
    gen = torch.Generator().manual_seed(seed)
    head.train()
    body = HeadSteps(cfg, (head, classifier, loss_fn), (x.to(device), y.to(device)), optimizer, gen)
    run_stage(body, LoopPlan(epochs=int(cfg.train.epochs)), stages)
    body.bar.close()
    head.eval()
    return head, body.losses


@torch.no_grad()
def project(head: nn.Module, x: Tensor, device: torch.device, batch_size: int = 4096) -> Tensor:
    n = batch_size
    out = torch.cat([head(x[i : i + n].to(device)).cpu() for i in range(0, x.shape[0], n)])
    return out.double()
