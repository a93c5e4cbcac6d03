"""Two processes (gloo, CPU) with all_reduce give the single-process answer exactly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from spacl.alignment import CKAAccumulator, debiased_cka, linear_cka
from spacl.geometry import GeometryAccumulator, neural_collapse

F64 = torch.float64


def shared_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(5).repeat(16)
    x = 3.0 * torch.randn(5, 7, generator=g, dtype=F64)[y] + torch.randn(
        80, 7, generator=g, dtype=F64
    )
    z = x[:, :4] @ torch.randn(4, 6, generator=g, dtype=F64) + torch.randn(
        80, 6, generator=g, dtype=F64
    )
    return x + 50.0, z, y


def worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)  # a forked child must not reuse the parent's OpenMP pool
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        x, z, y = shared_data()
        rows = slice(0, 30) if rank == 0 else slice(30, 80)  # unequal shares
        cka = CKAAccumulator()
        geo = GeometryAccumulator(num_classes=5)
        for part in torch.arange(80)[rows].split(11):
            cka.update(x[part], z[part])
            geo.update(x[part], y[part])
        result = {"cka": cka.all_reduce().compute(), "geo": geo.all_reduce().compute()}
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_all_reduce_across_two_processes(tmp_path: Path) -> None:
    args = (2, str(tmp_path / "init"), str(tmp_path))
    mp.start_processes(worker, args=args, nprocs=2, join=True, start_method="fork")
    x, z, y = shared_data()
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    nc = neural_collapse(x, y)
    for res in results:
        assert res["cka"]["n"] == 80
        assert res["cka"]["linear_cka"] == pytest.approx(linear_cka(x, z), abs=1e-12)
        assert res["cka"]["debiased_cka"] == pytest.approx(debiased_cka(x, z), abs=1e-11)
        for key in ("nc1", "nc2_etf_deviation", "cdnv", "nc_within_class_distance"):
            assert res["geo"][key] == pytest.approx(nc[key], rel=1e-10), key
    assert results[0]["cka"] == results[1]["cka"]  # every rank ends with the same statistics
