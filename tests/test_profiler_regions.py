"""SPACL's named regions under torch.profiler: the loss, its mining, its game and the
cut appear in a trace (the GPU check reads them to say where a step's time goes)."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from spacl.losses import SPACLLoss
from spacl.losses.kg import LinkSPACLLoss


@pytest.mark.parametrize("anchor_set", ["dynamic", "every_view"])
def test_spacl_loss_regions_nest_in_a_trace(anchor_set: str) -> None:
    g = torch.Generator().manual_seed(0)
    pool = torch.randn(16, 4, 8, generator=g, requires_grad=True)
    loss_fn = SPACLLoss(0.1, anchor_set=anchor_set)  # type: ignore[arg-type]
    loss_fn(None, pool)  # the game's players are built on the first call
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss_fn(None, pool).backward()
    events = {e.key: e for e in prof.key_averages()}
    for region in ("spacl/loss", "spacl/mine", "spacl/game", "spacl/cut"):
        assert region in events and events[region].count == 1, region
    # nested: the loss region holds the others' host time
    inner = sum(events[r].cpu_time_total for r in ("spacl/mine", "spacl/game", "spacl/cut"))
    assert events["spacl/loss"].cpu_time_total >= inner


def test_no_game_region_without_adversarial_negatives() -> None:
    pool = torch.randn(16, 4, 8, generator=torch.Generator().manual_seed(1))
    loss_fn = SPACLLoss(0.1, variant="ib")  # no game (and the cut keeps every candidate)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss_fn(None, pool)
    names = {e.key for e in prof.key_averages()}
    assert {"spacl/loss", "spacl/mine"} <= names
    assert "spacl/game" not in names


def test_the_link_objective_cut_is_a_region() -> None:
    g = torch.Generator().manual_seed(2)
    query, entities = torch.randn(8, 6, generator=g), torch.randn(40, 6, generator=g)
    positives = torch.zeros(8, 40, dtype=torch.bool)
    positives[torch.arange(8), torch.arange(8)] = True
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        LinkSPACLLoss(1.0)(query, entities, positives)
    names = {e.key for e in prof.key_averages()}
    assert {"spacl/cut", "spacl/game"} <= names
