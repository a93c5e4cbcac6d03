"""Equal-step budgets of the batch-size claims (hard-negatives and alignment studies)."""

from __future__ import annotations

import pytest
import torch

from spacl.data import make_synthetic, stratified_split
from spacl.studies.alignment_study import QUICK as ALIGN_QUICK
from spacl.studies.alignment_study import load_split
from spacl.studies.alignment_study.runs import equal_step_budget as align_budget
from spacl.studies.hard_negatives import QUICK, StudyData
from spacl.studies.hard_negatives import training as hn_training
from spacl.studies.hard_negatives.runs import equal_step_budget


def _tiny_data() -> StudyData:
    data = make_synthetic(6, 16, 30, within_std=0.2, seed=0)
    train, test = stratified_split(data, 0.2, seed=0)
    return StudyData(train, test, torch.arange(len(train)), "synthetic", "")


class _CountingAdam(torch.optim.Adam):
    steps = 0

    def step(self, closure=None):  # type: ignore[no-untyped-def, override]
        type(self).steps += 1
        return super().step(closure)


def test_hard_negatives_max_steps_stops_training(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _tiny_data()  # 144 training samples
    monkeypatch.setattr(hn_training.torch.optim, "Adam", _CountingAdam)
    _CountingAdam.steps = 0
    hn_training.train_encoder(data, QUICK, beta=5.0, seed=0, batch_size=16, max_steps=7)
    assert _CountingAdam.steps == 7
    _CountingAdam.steps = 0
    hn_training.train_encoder(data, QUICK, beta=5.0, seed=0, batch_size=16, epochs=1)
    assert _CountingAdam.steps == 9  # one epoch of 144 / 16 batches
    with pytest.raises(ValueError, match="max_steps"):
        hn_training.train_encoder(data, QUICK, beta=5.0, seed=0, max_steps=0)


def test_equal_step_budget_is_the_largest_batch_epochs() -> None:
    data = _tiny_data()
    cfg = QUICK  # batch sizes (32, 128), 2 epochs
    assert equal_step_budget(cfg, data) == 2 * 2  # ceil(144 / 128) batches per epoch
    train, _ = load_split(ALIGN_QUICK, 10)
    budget = align_budget(ALIGN_QUICK, train)
    assert budget == ALIGN_QUICK.sweep_epochs * (len(train) // max(ALIGN_QUICK.batch_sweep))
