"""The frozen-encoder task's model: a projection head trained on cached sentence embeddings.

:func:`train_head` trains the head of ``model.head`` (and, for ``cross_entropy``, a linear
classifier on it) with the recipe's objective on ``views.num_views`` feature views per
example (:class:`~spacl.models.text.FeatureViews`); :func:`project` applies the trained
head.  The run around it (data, encoder, decision, run directory) is
:func:`spacl.tasks.text.task.train_ood`.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from spacl._progress import progress
from spacl.models.heads import ProjectionHead
from spacl.models.text import FeatureViews, ResidualHead
from spacl.tasks.text.config import build_text_loss

__all__ = ["batch_loss", "build_head", "project", "train_head"]


def _optimizer(cfg: DictConfig, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    lr, wd = float(cfg.optim.lr), float(cfg.optim.weight_decay)
    if cfg.optim.name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if cfg.optim.name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    return torch.optim.SGD(params, lr=lr, weight_decay=wd, momentum=0.9)


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


def train_head(
    cfg: DictConfig,
    x: Tensor,
    y: Tensor,
    num_known: int,
    device: torch.device,
) -> tuple[nn.Module, list[float]]:
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
    optimizer = _optimizer(cfg, params)
    views = FeatureViews(int(cfg.views.num_views), float(cfg.views.dropout), float(cfg.views.sigma))
    gen = torch.Generator().manual_seed(seed)
    batch = int(cfg.train.batch_size)
    losses: list[float] = []
    x, y = x.to(device), y.to(device)
    head.train()
    bar = progress(
        total=int(cfg.train.epochs), desc=f"{name} head", mode=cfg.train.progress, unit="epoch"
    )
    for _epoch in range(int(cfg.train.epochs)):
        perm = torch.randperm(x.shape[0], generator=gen).to(device)
        total, steps = 0.0, 0
        for i in range(0, x.shape[0], batch):
            idx = perm[i : i + batch]
            if idx.numel() < 2:
                continue
            v = views(x[idx], gen)  # [b, V, d_in]
            loss = batch_loss(name, head, classifier, loss_fn, v, y[idx])
            if not bool(torch.isfinite(loss)):
                raise ValueError(f"non-finite {name} loss at epoch {_epoch}, step {steps}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            steps += 1
        losses.append(total / max(steps, 1))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    bar.close()
    head.eval()
    return head, losses


@torch.no_grad()
def project(head: nn.Module, x: Tensor, device: torch.device, batch_size: int = 4096) -> Tensor:
    n = batch_size
    out = torch.cat([head(x[i : i + n].to(device)).cpu() for i in range(0, x.shape[0], n)])
    return out.double()
