"""BarlowTwinsLoss: loop reference, lightly, V views, gradients, 2 gloo ranks == 1 process."""

from __future__ import annotations

import sys
from itertools import combinations
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from spacl.losses import BarlowTwinsLoss

F64 = torch.float64


def bt_ref(za: torch.Tensor, zb: torch.Tensor, lam: float, eps: float = 1e-5) -> torch.Tensor:
    """Algorithm 1 of Zbontar et al., written entry by entry."""
    n, d = za.shape

    def standardise(z: torch.Tensor) -> torch.Tensor:
        cols = []
        for j in range(d):
            col = z[:, j]
            mean = sum(col[i] for i in range(n)) / n
            var = sum((col[i] - mean) ** 2 for i in range(n)) / n
            cols.append((col - mean) / torch.sqrt(var + eps))
        return torch.stack(cols, 1)

    a, b = standardise(za), standardise(zb)
    total = torch.zeros((), dtype=za.dtype)
    for i in range(d):
        for j in range(d):
            c = sum(a[k, i] * b[k, j] for k in range(n)) / n
            total = total + ((1 - c) ** 2 if i == j else lam * c**2)
    return total


def _views(seed: int = 0, b: int = 6, v: int = 2, d: int = 4, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, v, d, dtype=dtype, generator=g) * 2 + 0.5


def test_equals_the_loop_reference_float64():
    z = _views()
    for lam in (5e-3, 0.3):
        got = BarlowTwinsLoss(lam)(z[:, 0], z[:, 1])
        assert abs(float(got - bt_ref(z[:, 0], z[:, 1], lam))) < 1e-10
        assert torch.equal(BarlowTwinsLoss(lam)(z), got)  # [B, 2, d] form


def test_v_views_is_the_mean_over_view_pairs():
    z = _views(v=4)
    loss = BarlowTwinsLoss(0.1)
    pairs = list(combinations(range(4), 2))
    want = sum(bt_ref(z[:, i], z[:, j], 0.1) for i, j in pairs) / len(pairs)
    assert abs(float(loss(z) - want)) < 1e-10


def test_gradients_match_the_loop_reference_and_gradcheck():
    z = _views(1, b=5, d=3)
    a = z.clone().requires_grad_(True)
    b = z.clone().requires_grad_(True)
    BarlowTwinsLoss(0.2)(a).backward()
    bt_ref(b[:, 0], b[:, 1], 0.2).backward()
    assert float((a.grad - b.grad).abs().max()) < 1e-10
    x = z[:, 0].clone().requires_grad_(True)
    y = z[:, 1].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p, q: BarlowTwinsLoss(0.2)(p, q), (x, y))


def test_equals_lightly_on_random_inputs():
    lightly_loss = pytest.importorskip("lightly.loss", reason="lightly is not installed")
    g = torch.Generator().manual_seed(3)
    for b, d in ((32, 16), (256, 128)):
        z0 = torch.randn(b, d, generator=g)
        z1 = torch.randn(b, d, generator=g) + z0
        ref = float(lightly_loss.BarlowTwinsLoss(lambda_param=5e-3)(z0, z1))
        got = float(BarlowTwinsLoss(5e-3)(z0, z1))
        assert abs(got - ref) <= 1e-5 * max(1.0, abs(ref))
        ref64 = float(lightly_loss.BarlowTwinsLoss(lambda_param=0.01)(z0.double(), z1.double()))
        assert abs(float(BarlowTwinsLoss(0.01)(z0.double(), z1.double())) - ref64) < 1e-9


def test_bad_input_raises_naming_the_argument():
    with pytest.raises(ValueError, match="lambda_offdiag"):
        BarlowTwinsLoss(-1.0)
    with pytest.raises(TypeError, match="lambda_offdiag"):
        BarlowTwinsLoss("big")  # type: ignore[arg-type]
    loss = BarlowTwinsLoss()
    with pytest.raises(ValueError, match="same shape"):
        loss(torch.randn(4, 3), torch.randn(4, 2))
    with pytest.raises(ValueError, match="at least 2"):
        loss(torch.randn(1, 3), torch.randn(1, 3))
    with pytest.raises(ValueError, match="V >= 2"):
        loss(torch.randn(4, 1, 3))
    with pytest.raises(ValueError, match="finite"):
        loss(torch.full((4, 3), float("nan")), torch.randn(4, 3))
    with pytest.raises(ValueError, match="no labels"):
        loss(torch.randn(4, 2, 3), labels=torch.zeros(4, dtype=torch.long))


# ------------------------------------------------------------------------- distributed
def _worker(rank: int, world: int, init_file: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        z = _views(7, b=8, v=3, d=5)
        local = z[rank * 4 : (rank + 1) * 4].clone().requires_grad_(True)
        loss = BarlowTwinsLoss(0.05, gather_distributed=True)(local)
        loss.backward()
        torch.save({"loss": loss.detach(), "grad": local.grad}, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not dist.is_available() or sys.platform == "win32", reason="needs torch.distributed (gloo)"
)
def test_two_gloo_processes_equal_one_process_on_the_doubled_batch(tmp_path):
    mp.spawn(_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    z = _views(7, b=8, v=3, d=5).requires_grad_(True)
    loss = BarlowTwinsLoss(0.05, gather_distributed=True)(z)  # no process group: local
    loss.backward()
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert abs(float(got["loss"] - loss.detach())) < 1e-10
        # the engine's contract: rank r holds W * dL/dz_r (DDP then averages by 1/W); the
        # peers' bug (PEERS.md): an all_reduce in the loss left gradients off by 1/W
        want = 2 * z.grad[rank * 4 : (rank + 1) * 4]
        assert float((got["grad"] - want).abs().max()) < 1e-10
