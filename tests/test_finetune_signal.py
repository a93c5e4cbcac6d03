"""benchmarks/ood_finetune_signal.py: its numerator share and cosines against loops."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from bench_modules import benchmark_module
from spacl.losses import SPACLLoss


@pytest.fixture(scope="module")
def signal():
    return benchmark_module("ood_finetune_signal")


def _views(b: int = 6, v: int = 4, d: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z = F.normalize(
        torch.randn(b, 1, d, generator=g) + 0.4 * torch.randn(b, v, d, generator=g), dim=-1
    )
    labels = torch.tensor([0, 0, 1, 1, 1, 2])[:b]
    return z.double(), labels


def share_loop(z, labels, anchor, positives, tau):
    b, v, _ = z.shape
    rows = anchor.shape[0]
    shares = []
    for r in range(rows):
        i = r // (rows // b)
        a = z[i, int(anchor[r])]
        own = sum(math.exp(float(a @ z[i, int(p)]) / tau) for p in positives[r])
        cls = sum(
            math.exp(float(a @ z[j, u]) / tau)
            for j in range(b)
            if j != i and labels[j] == labels[i]
            for u in range(v)
        )
        shares.append(own / (own + cls))
    return sum(shares) / len(shares)


@pytest.mark.parametrize("anchor_set", ["dynamic", "every_view"])
def test_numerator_share_matches_a_loop_on_spacl_choices(signal, anchor_set: str) -> None:
    z, labels = _views()
    loss = SPACLLoss(
        0.1,
        embedding_dim=z.shape[-1],
        positive_pool="instance_class",
        anchor_set=anchor_set,
        num_adversarial=0,
    ).double()
    loss(None, z, labels)
    want = share_loop(z, labels, loss.last.anchor, loss.last.positives.tolist(), 0.1)
    got = signal.numerator_share(z, labels, loss, 0.1)
    assert got == pytest.approx(want, rel=1e-12)
    assert 0.0 < got < 1.0


def test_numerator_share_of_a_hand_case(signal) -> None:
    # two instances of one class, two views each; anchor view 0, positive view 1 of its
    # own instance; the other instance's two views are the class positives
    e0, e1 = torch.eye(2, dtype=torch.float64)
    z = torch.stack([torch.stack([e0, e0]), torch.stack([e0, e1])])  # [2, 2, 2]
    labels = torch.tensor([0, 0])

    class Last:
        anchor = torch.tensor([0, 0])
        positives = torch.tensor([[1], [1]])

    class Loss:
        last = Last()

    # instance 0: own = e^{1/t}; class = e^{1/t} + e^{0} -> 1 / (2 + e^{-1/t})
    # instance 1: own = <e0, e1> = 0 -> e^0; class = 2 e^{1/t}
    tau = 0.5
    want = 0.5 * (1 / (2 + math.exp(-1 / tau)) + 1 / (1 + 2 * math.exp(1 / tau)))
    assert signal.numerator_share(z, labels, Loss(), tau) == pytest.approx(want, rel=1e-12)


def test_cosines_match_a_loop(signal) -> None:
    z, labels = _views()
    b, v, _ = z.shape
    same_text, same_class, other = [], [], []
    for i in range(b):
        for u in range(v):
            for j in range(b):
                for w in range(v):
                    if (i, u) == (j, w):
                        continue
                    c = float(z[i, u] @ z[j, w])
                    if i == j:
                        same_text.append(c)
                    elif labels[i] == labels[j]:
                        same_class.append(c)
                    else:
                        other.append(c)
    got = signal.cosines(z, labels)
    want = [sum(x) / len(x) for x in (same_text, same_class, other)]
    assert got == pytest.approx(want, rel=1e-12)
