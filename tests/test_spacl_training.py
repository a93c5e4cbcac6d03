"""A short SPACL training run on synthetic latent-class data (CPU, a few seconds).

The engine's protocol: an EMA target embeds every view without gradient, the loss picks
the anchor view on the target embeddings, the online encoder embeds that view only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

from spacl.losses import SPACLLoss

CLASSES, LATENT, INPUT, VIEWS, NUISANCE = 4, 4, 16, 4, 1.5


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Small matmuls: one thread avoids OpenMP spin-waits on a shared, loaded CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class LatentClasses:
    """Class centres in a low-dimensional latent space, mixed into the input space; each
    view adds fresh high-variance nuisance noise that the encoder must learn to ignore."""

    def __init__(self, seed: int) -> None:
        self.g = torch.Generator().manual_seed(seed)
        self.centres = torch.randn(CLASSES, LATENT, generator=self.g)
        self.mix = torch.randn(LATENT, INPUT, generator=self.g) / LATENT**0.5

    def instances(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.randint(0, CLASSES, (n,), generator=self.g)
        return self.centres[labels] + 0.3 * torch.randn(n, LATENT, generator=self.g), labels

    def views(self, latent: torch.Tensor, v: int) -> torch.Tensor:
        clean = (latent @ self.mix).unsqueeze(1)
        return clean + NUISANCE * torch.randn(latent.shape[0], v, INPUT, generator=self.g)


def nearest_centre_accuracy(encoder: torch.nn.Module, train, test) -> float:
    (x_tr, y_tr), (x_te, y_te) = train, test
    with torch.no_grad():
        e_tr = F.normalize(encoder(x_tr), dim=1)
        e_te = F.normalize(encoder(x_te), dim=1)
        centres = F.normalize(torch.stack([e_tr[y_tr == c].mean(0) for c in range(CLASSES)]), dim=1)
        return float(((e_te @ centres.T).argmax(1) == y_te).double().mean())


def test_spacl_training_lowers_loss_and_raises_ncc_accuracy(one_thread: None) -> None:
    torch.manual_seed(0)
    data = LatentClasses(seed=0)
    lat_tr, y_tr = data.instances(512)
    lat_te, y_te = data.instances(512)
    train = (data.views(lat_tr, 1)[:, 0], y_tr)
    test = (data.views(lat_te, 1)[:, 0], y_te)

    online = torch.nn.Sequential(
        torch.nn.Linear(INPUT, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)
    )
    target = copy.deepcopy(online).requires_grad_(False)
    optimizer = torch.optim.Adam(online.parameters(), lr=3e-3)
    loss_fn = SPACLLoss(0.2, embedding_dim=16)
    before = nearest_centre_accuracy(online, train, test)

    losses = []
    for _ in range(200):
        latent, _ = data.instances(64)
        x = data.views(latent, VIEWS)
        with torch.no_grad():
            pool = target(x)
        anchor = loss_fn.choose_anchor(pool)
        loss = loss_fn(online(x[torch.arange(64), anchor]), pool, anchor_index=anchor)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for t, o in zip(target.parameters(), online.parameters(), strict=True):
                t.lerp_(o, 0.1)
        losses.append(float(loss.detach()))

    after = nearest_centre_accuracy(online, train, test)
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < first - 0.2, (first, last)
    assert after > before + 0.07, (before, after)
    assert loss_fn.last is not None
    logs = loss_fn.last.log_dict()
    assert 0 < logs["spacl/kept_fraction"] < 1 and "spacl/d_loss" in logs
