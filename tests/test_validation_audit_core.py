"""Regression tests from an audit of the public API's edge cases (session of 2026-12-05):
the kNN weights that overflowed, the gradient through a zero embedding, ``reduction="none"``
that dropped anchors, empty batches, the kernel on an anchor with no positive, and the
link and Barlow losses on mixed dtypes or non-finite inputs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from spacl.data.sampling import BatchPlan
from spacl.data.views import NoiseViews, SameClassViews
from spacl.evaluate import knn_accuracy
from spacl.losses import (
    BarlowTwinsLoss,
    DebiasedContrastiveLoss,
    DecoupledContrastiveLoss,
    HardNegativeLoss,
    NTXentLoss,
    SupConLoss,
    contrastive_kernel,
    normalize,
)
from spacl.losses.kg import LinkInfoNCELoss, LinkSPACLLoss
from spacl.models.backbones import ResNetEncoder
from spacl.models.kg import LinkPredictor


def knn_reference(
    bank: torch.Tensor, y: torch.Tensor, query: torch.Tensor, k: int, t: float
) -> int:
    """The weighted vote of one query, literally ``sum exp(s_j / t)`` in Python floats (no
    overflow at these ``t``)."""
    b = torch.nn.functional.normalize(bank.double(), dim=1)
    q = torch.nn.functional.normalize(query.double(), dim=0)
    sims, idx = (b @ q).topk(min(k, b.shape[0]))
    scores: dict[int, float] = {}
    for s, j in zip(sims.tolist(), idx.tolist(), strict=True):
        scores[int(y[j])] = scores.get(int(y[j]), 0.0) + math.exp(s / t)
    return max(sorted(scores), key=lambda c: scores[c])


def test_knn_weights_do_not_overflow_at_a_small_temperature_or_in_half_precision() -> None:
    """``exp(s / t)`` overflowed to inf for two classes at once, and argmax then took the
    lowest index: wrong at t = 0.01 in float32 and at the defaults in float16."""
    bank = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.8, 0.3]])
    labels, query = torch.tensor([1, 0, 0]), torch.tensor([[1.0, 0.0]])
    assert knn_reference(bank, labels, query[0], 3, 0.01) == 1
    for dtype in (torch.float32, torch.float64):
        acc = knn_accuracy(bank.to(dtype), labels, query.to(dtype), torch.tensor([1]), k=3, t=0.01)
        assert acc == 1.0
    bank = torch.tensor([[1.0, 0.0]] * 4 + [[1.0, 0.01]] * 10)
    labels = torch.tensor([0] * 4 + [1] * 10)
    assert knn_reference(bank, labels, query[0], 200, 0.1) == 1
    for dtype in (torch.float16, torch.float32, torch.float64):
        assert knn_accuracy(bank.to(dtype), labels, query.to(dtype), torch.tensor([1])) == 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_zero_embedding_gets_a_zero_gradient_and_the_others_are_unchanged(
    dtype: torch.dtype,
) -> None:
    """1 / clamp(||z||, tiny) sent ~1e38 (float32) or ~1e306 (float64) back through a zero
    row, so the batch's gradient norm was inf and gradient clipping zeroed every row."""
    torch.manual_seed(0)
    z0, z1 = torch.randn(8, 16, dtype=dtype), torch.randn(8, 16, dtype=dtype)
    z0[3] = 0.0
    z0.requires_grad_()
    NTXentLoss()(z0, z1).backward()
    assert z0.grad is not None and bool(torch.isfinite(z0.grad).all())
    assert float(z0.grad[3].abs().max()) == 0.0
    # every other row's gradient is the one through an exact z / ||z||
    ref = z0.detach().clone().requires_grad_()
    unit = torch.cat((ref[:3] / ref[:3].norm(dim=1, keepdim=True), ref[3:4].detach() * 0.0,
                      ref[4:] / ref[4:].norm(dim=1, keepdim=True)))  # fmt: skip
    NTXentLoss(normalize="none")(unit, normalize(z1)).backward()
    assert ref.grad is not None
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(z0.grad, ref.grad, rtol=tol, atol=tol)
    assert normalize(torch.zeros(2, 3, dtype=dtype)).abs().max() == 0.0


LOSSES_THAT_DROP_ANCHORS = [SupConLoss, HardNegativeLoss, DebiasedContrastiveLoss]


@pytest.mark.parametrize("loss_cls", LOSSES_THAT_DROP_ANCHORS)
def test_reduction_none_gives_one_value_per_anchor_and_zero_where_one_is_left_out(
    loss_cls: type,
) -> None:
    """``reduction="none"`` returned only the usable anchors (2 rows for 6 anchors), with
    nothing saying which; now one row per anchor, 0 where left out, summing to the mean."""
    torch.manual_seed(1)
    labels = torch.tensor([0, 0, 1, 2, 3, 4])  # one view: only the class-0 rows have a positive
    feats = torch.randn(6, 1, 8, dtype=torch.float64)
    per_anchor = loss_cls(reduction="none")(feats, labels)
    assert per_anchor.shape == (6,)
    assert bool((per_anchor[:2] > 0).all()) and per_anchor[2:].abs().max() == 0.0
    mean = loss_cls()(feats, labels)
    torch.testing.assert_close(per_anchor.sum() / 2, mean, rtol=1e-12, atol=1e-12)
    total = loss_cls(reduction="sum")(feats, labels)
    torch.testing.assert_close(per_anchor.sum(), total, rtol=1e-12, atol=1e-12)
    # two views: every anchor has its other view, so none is left out and none is zero
    two = loss_cls(reduction="none")(torch.randn(6, 2, 8, dtype=torch.float64), labels)
    assert two.shape == (12,) and bool((two > 0).all())


def test_reduction_none_keeps_the_dropped_anchors_gradient_at_zero() -> None:
    feats = torch.randn(6, 1, 8, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 2, 3, 4])
    SupConLoss(reduction="none")(feats, labels).sum().backward()
    assert feats.grad is not None and bool(torch.isfinite(feats.grad).all())
    # the singleton rows are still negatives of the class-0 anchors: they get a gradient
    assert float(feats.grad[2:].abs().sum()) > 0.0


@pytest.mark.parametrize(
    "loss_cls", [SupConLoss, NTXentLoss, HardNegativeLoss, DecoupledContrastiveLoss]
)
def test_an_empty_batch_is_a_value_error_naming_the_features(loss_cls: type) -> None:
    """SupCon returned NaN on an empty batch, or a raw aminmax() RuntimeError with labels."""
    with pytest.raises(ValueError, match=r"features is an empty batch.*\(0, 2, 8\)"):
        loss_cls()(torch.randn(0, 2, 8))
    if loss_cls in (SupConLoss, HardNegativeLoss):
        with pytest.raises(ValueError, match="features is an empty batch"):
            loss_cls()(torch.randn(0, 2, 8), torch.zeros(0, dtype=torch.long))


def test_the_kernel_refuses_an_anchor_with_no_positive() -> None:
    """The exported kernel returned NaN for such a row (its docstring asked callers to
    drop them; nothing enforced it)."""
    logits = torch.randn(3, 3)
    mask = torch.eye(3, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match=r"positives.*1 of 3 rows empty"):
        contrastive_kernel(logits, mask)
    with pytest.raises(ValueError, match=r"positives.*index of shape \(3, 0\)"):
        contrastive_kernel(logits, torch.zeros(3, 0, dtype=torch.long))
    assert bool(torch.isfinite(contrastive_kernel(logits, torch.eye(3, dtype=torch.bool))).all())


def test_the_link_loss_refuses_empty_and_non_finite_inputs_and_promotes_dtypes() -> None:
    loss = LinkInfoNCELoss()
    mask = torch.eye(2, 10, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"query is empty, of shape \(0, 8\)"):
        loss(torch.randn(0, 8), torch.randn(10, 8), torch.zeros(0, 10, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"entities is empty"):
        loss(torch.randn(2, 8), torch.randn(0, 8), torch.zeros(2, 0, dtype=torch.bool))
    bad = torch.randn(10, 8)
    bad[4, 2] = float("nan")
    with pytest.raises(ValueError, match="entities contains 1 non-finite"):
        loss(torch.randn(2, 8), bad, mask)
    with pytest.raises(TypeError, match="query must be a floating-point tensor"):
        loss(torch.ones(2, 8, dtype=torch.long), torch.randn(10, 8), mask)
    torch.manual_seed(2)
    q, e = torch.randn(2, 8, dtype=torch.float64), torch.randn(10, 8, dtype=torch.float64)
    mixed = loss(q, e.float(), mask)
    assert mixed.dtype == torch.float64
    torch.testing.assert_close(mixed, loss(q, e.float().double(), mask), rtol=0, atol=0)


def test_barlow_twins_promotes_two_views_of_different_dtypes() -> None:
    """Mixed float32/float64 views raised a raw matmul dtype error; the pairwise losses
    promote, and so does Barlow Twins now."""
    torch.manual_seed(3)
    z0, z1 = torch.randn(8, 4, dtype=torch.float64), torch.randn(8, 4)
    mixed = BarlowTwinsLoss()(z0, z1)
    assert mixed.dtype == torch.float64
    torch.testing.assert_close(mixed, BarlowTwinsLoss()(z0, z1.double()), rtol=0, atol=0)


def test_knn_predict_checks_its_inputs_as_knn_accuracy_does() -> None:
    """Called directly it gave raw torch errors (width, label length) and a raw scatter
    error for a label at or above ``num_classes``; mixed dtypes are promoted."""
    from spacl.evaluate import knn_predict

    bank, labels = torch.randn(5, 3), torch.tensor([0, 1, 0, 1, 2])
    with pytest.raises(ValueError, match="same width, got 3 and 4"):
        knn_predict(bank, labels, torch.randn(2, 4), num_classes=3)
    with pytest.raises(ValueError, match="train_labels has length 4"):
        knn_predict(bank, labels[:4], torch.randn(2, 3), num_classes=3)
    with pytest.raises(ValueError, match="num_classes must exceed every train label, got 2"):
        knn_predict(bank, labels, torch.randn(2, 3), num_classes=2)
    query = torch.randn(4, 3, dtype=torch.float64)
    mixed = knn_predict(bank, labels, query, num_classes=3, k=3)
    assert torch.equal(mixed, knn_predict(bank.double(), labels, query, num_classes=3, k=3))


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (
            lambda v: BarlowTwinsLoss(gather_distributed=v),
            "gather_distributed",
        ),
        (
            lambda v: LinkSPACLLoss(compiled_cut=v),
            "compiled_cut",
        ),
        (
            lambda v: LinkPredictor(5, 2, 4, normalize=v),
            "normalize",
        ),
        (
            lambda v: ResNetEncoder(cifar_stem=v),
            "cifar_stem",
        ),
        (
            lambda v: BatchPlan(8, 4, balanced=v),
            "balanced",
        ),
        (
            lambda v: BatchPlan(8, 4, drop_last=v),
            "drop_last",
        ),
        (
            lambda v: NoiseViews(keep_original=v),
            "keep_original",
        ),
        (
            lambda v: SameClassViews(keep_original=v),
            "keep_original",
        ),
    ],
)
def test_a_switch_outside_the_losses_takes_a_bool_only(build: Any, name: str) -> None:
    """``bool("no")`` is True: these switches silently flipped on a string before."""
    for bad in ("no", "False", 0, None):
        with pytest.raises(TypeError, match=f"{name} must be a bool"):
            build(bad)


def test_link_spacl_checks_its_adversarial_width_at_construction() -> None:
    with pytest.raises(ValueError, match="adversarial_hidden must be an integer >= 1, got -3"):
        LinkSPACLLoss(adversarial_hidden=-3)


def test_the_pool_unit_vectors_give_a_zero_row_a_zero_gradient() -> None:
    from spacl.mining.pool import unit

    z = torch.randn(4, 6, dtype=torch.float64)
    z[1] = 0.0
    z.requires_grad_()
    (unit(z) * torch.randn(4, 6, dtype=torch.float64)).sum().backward()
    assert z.grad is not None and bool(torch.isfinite(z.grad).all())
    assert float(z.grad[1].abs().max()) == 0.0


def test_the_open_intent_functions_take_labels_of_any_integer_dtype() -> None:
    """They ignored the int64 labels ``check_labels`` returns: uint8 or int16 labels gave
    a raw ``index_add_`` dtype error (a review of the audit's changes)."""
    from spacl.evaluate.ood import class_centres, open_intent_metrics

    torch.manual_seed(4)
    z, y = torch.randn(12, 5, dtype=torch.float64), torch.arange(12) % 3
    for dtype in (torch.uint8, torch.int16, torch.int32):
        torch.testing.assert_close(class_centres(z, y.to(dtype), 3), class_centres(z, y, 3))
        pred = (y + 1) % 4
        assert open_intent_metrics(y.to(dtype), pred.to(dtype), 3) == open_intent_metrics(
            y, pred, 3
        )


def test_the_kernel_check_can_be_skipped_by_a_caller_that_built_the_positives() -> None:
    logits = torch.randn(3, 3)
    mask = torch.eye(3, dtype=torch.bool)
    torch.testing.assert_close(
        contrastive_kernel(logits, mask, check_positives=False), contrastive_kernel(logits, mask)
    )


def test_a_non_finite_kg_step_names_its_epoch_and_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link loss's own finiteness check came before the step's, whose message gives
    the epoch and step: the error named only the loss's argument (a review)."""
    from spacl.tasks.kg import train_kg
    from test_kg_model import cycle_graph
    from test_task_runs import kg_recipe

    original = LinkPredictor.query

    def nan_query(self: LinkPredictor, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return original(self, h, r) * float("nan")

    monkeypatch.setattr(LinkPredictor, "query", nan_query)
    recipe = kg_recipe(cycle_graph(tmp_path / "toy"), epochs=1)
    with pytest.raises(ValueError, match=r"at epoch 1, step 0: query contains \d+ non-finite"):
        train_kg(recipe, log=None, run_dir=tmp_path / "run")


def test_a_non_finite_n3_term_names_its_epoch_and_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The N3 regulariser is added after the link loss's own check: the step's one read
    of the summed loss still stops a non-finite value before it reaches the weights."""
    from spacl.tasks.kg import train_kg
    from test_kg_model import cycle_graph
    from test_task_runs import kg_recipe

    def nan_n3(
        self: LinkPredictor, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor
    ) -> torch.Tensor:
        return torch.tensor(float("nan"))

    monkeypatch.setattr(LinkPredictor, "n3", nan_n3)
    recipe = kg_recipe(cycle_graph(tmp_path / "toy"), epochs=1)
    recipe["optim"] = {"name": "adam", "lr": 0.05, "n3": 0.01}
    with pytest.raises(ValueError, match=r"non-finite training loss at epoch 1, step 0"):
        train_kg(recipe, log=None, run_dir=tmp_path / "run")
