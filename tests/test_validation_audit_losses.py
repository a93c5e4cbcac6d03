"""Regression tests of the input-validation audit (losses and miners): a bad argument is
a ``ValueError`` / ``TypeError`` naming it (at construction for a constructor argument),
never a silent misconfiguration or a raw internal torch error.

The tests named ``..._still_...`` / ``..._unchanged`` / ``..._keep_...`` guard the valid
inputs around each fix (they pass before and after it); every other test fails on the
code before the fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from spacl._validation import check_flag, check_int, check_labels, check_positive, check_real
from spacl.losses import (
    DebiasedContrastiveLoss,
    HardNegativeLoss,
    MaskConLoss,
    NSCLLoss,
    SampledHardNegativeLoss,
    SPACLLoss,
    SupConLoss,
    TiltedNegativeSampler,
    VarConLoss,
)
from spacl.losses.spacl.options import SPACLOptions
from spacl.mining import AdversarialNegatives, NegativeQueue, RelativeThresholdNegatives

# -- (3) SPACL: a labelled batch with a queue needs the queue's labels, whatever the pool ---


@pytest.mark.parametrize("pool_mode", ["instance", "instance_class", "class"])
def test_spacl_labelled_batch_with_unlabelled_queue_raises(pool_mode: str) -> None:
    pool = torch.randn(6, 5, 8)
    labels = torch.tensor([0, 1, 0, 2, 1, 2])
    loss = SPACLLoss(positive_pool=pool_mode)
    with pytest.raises(ValueError, match=r"needs extra_negative_labels") as err:
        loss(None, pool, labels, extra_negatives=torch.randn(4, 8))
    assert "(4, 8)" in str(err.value) and f"positive_pool={pool_mode!r}" in str(err.value)
    # the baselines say the same in the same situation
    with pytest.raises(ValueError, match="extra_negative_labels"):
        SupConLoss()(pool[:, :2], labels, extra_negatives=torch.randn(4, 8))


def test_spacl_queue_labels_without_batch_labels_raise_as_for_the_baselines() -> None:
    pool = torch.randn(6, 5, 8)
    queue, queue_labels = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
    with pytest.raises(ValueError, match="extra_negative_labels given, but the loss is computed"):
        SPACLLoss()(None, pool, extra_negatives=queue, extra_negative_labels=queue_labels)


def test_spacl_instance_pool_with_labelled_queue_still_runs() -> None:
    pool = torch.randn(6, 5, 8, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 2])
    queue, queue_labels = torch.randn(4, 8, dtype=torch.float64), torch.tensor([0, 1, 2, 3])
    loss = SPACLLoss(variant="no_adversarial")
    value = loss(None, pool, labels, extra_negatives=queue, extra_negative_labels=queue_labels)
    assert torch.isfinite(value)
    # an empty labelled queue is no queue
    empty = loss(
        None, pool, labels, extra_negatives=queue[:0], extra_negative_labels=queue_labels[:0]
    )
    assert torch.equal(empty, loss(None, pool, labels))


# -- (9) integer labels of any dtype are cast to int64; bool and float are refused ---------


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_check_labels_casts_integer_dtypes_to_int64(dtype: torch.dtype) -> None:
    raw = torch.tensor([0, 1, 0, 2], dtype=dtype)
    out = check_labels(raw, 4)
    assert out.dtype == torch.int64
    assert torch.equal(out, torch.tensor([0, 1, 0, 2]))
    same = torch.tensor([0, 1, 0, 2])
    assert check_labels(same, 4) is same  # int64: no copy
    for bad in (torch.tensor([True, False, True, True]), torch.tensor([0.0, 1.0, 0.0, 2.0])):
        with pytest.raises(TypeError, match=r"^labels must be an integer tensor, got dtype"):
            check_labels(bad, 4)


LABELLED_LOSSES: list[Callable[[], nn.Module]] = [
    lambda: SupConLoss(0.2),
    lambda: SupConLoss(0.2, "in"),
    lambda: HardNegativeLoss(1.0, 0.0, 0.5),
    lambda: HardNegativeLoss(1.0, 0.1, 0.5),
    lambda: DebiasedContrastiveLoss(0.1, 0.5),
]


@pytest.mark.parametrize("make", LABELLED_LOSSES)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_small_integer_labels_give_the_int64_loss(
    make: Callable[[], nn.Module], dtype: torch.dtype
) -> None:
    torch.manual_seed(0)
    features = torch.randn(6, 2, 8, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 2])
    want = make()(features, labels)
    got = make()(features, labels.to(dtype))
    assert torch.equal(got, want)


def test_spacl_and_the_sampled_loss_still_accept_uint8_labels() -> None:
    pool = torch.randn(6, 5, 8, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 2])
    for mode in ("instance", "instance_class", "class"):
        loss = SPACLLoss(variant="no_adversarial", positive_pool=mode)
        assert torch.equal(loss(None, pool, labels.to(torch.uint8)), loss(None, pool, labels))

    def sampled(y: torch.Tensor) -> torch.Tensor:
        gen = torch.Generator().manual_seed(0)
        return SampledHardNegativeLoss(1.0, 3, generator=gen)(pool[:, :2], labels=y)

    assert torch.equal(sampled(labels.to(torch.uint8)), sampled(labels))


# -- (10) empty inputs: a ValueError naming the argument and its shape ---------------------


def test_sampled_hard_negative_loss_empty_batch() -> None:
    loss = SampledHardNegativeLoss()
    for labels in (torch.zeros(0, dtype=torch.long), None):
        with pytest.raises(ValueError, match=r"features is an empty batch, of shape \(0, 2, 8\)"):
            loss(torch.randn(0, 2, 8), labels=labels)
    with pytest.raises(ValueError, match=r"features is an empty batch, of shape \(0, 8\)"):
        loss(torch.randn(0, 8), torch.randn(0, 8))
    # one view without labels is still refused for what it is
    with pytest.raises(ValueError, match=r"V >= 2 views .* got features of shape \(4, 1, 8\)"):
        loss(torch.randn(4, 1, 8))


def test_maskcon_empty_batch() -> None:
    with pytest.raises(ValueError, match=r"features is an empty batch, of shape \(0, 2, 8\)"):
        MaskConLoss()(torch.randn(0, 2, 8), torch.zeros(0, dtype=torch.long))


def test_relative_threshold_no_candidate_column() -> None:
    with pytest.raises(ValueError, match=r"scores must hold at least one .* got shape \(4, 0\)"):
        RelativeThresholdNegatives(0.9)(torch.randn(4, 0))
    # no row is fine: an empty keep mask
    assert RelativeThresholdNegatives(0.9)(torch.randn(0, 5)).shape == (0, 5)


# -- (12) the sampled loss and its sampler check their arguments at construction ----------


@pytest.mark.parametrize(
    ("make", "error", "pattern"),
    [
        (lambda: SampledHardNegativeLoss(temperature="0.5"), TypeError, "temperature .*'0.5'"),
        (lambda: SampledHardNegativeLoss(temperature=torch.tensor(0.5)), TypeError, "temperature"),
        (lambda: SampledHardNegativeLoss(temperature=True), TypeError, "temperature"),
        (lambda: SampledHardNegativeLoss(beta="1"), TypeError, "beta .*'1'"),
        (lambda: SampledHardNegativeLoss(beta=torch.tensor(1.0)), TypeError, "beta"),
        (lambda: SampledHardNegativeLoss(reduction="avg"), ValueError, "reduction .*'avg'"),
        (lambda: SampledHardNegativeLoss(1.0, True), TypeError, "num_negatives .*True"),
        (lambda: SampledHardNegativeLoss(1.0, 2.0), TypeError, "num_negatives .*2.0"),
        (lambda: SampledHardNegativeLoss(generator=0), TypeError, "generator"),
        (lambda: TiltedNegativeSampler(num_negatives=True), TypeError, "num_negatives .*True"),
        (lambda: TiltedNegativeSampler(num_negatives="3"), TypeError, "num_negatives .*'3'"),
        (lambda: TiltedNegativeSampler(beta="1"), TypeError, "beta .*'1'"),
        (lambda: TiltedNegativeSampler(beta=torch.tensor(1.0)), TypeError, "beta"),
    ],
)
def test_sampled_loss_constructor_checks(
    make: Callable[[], Any], error: type, pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        make()


def test_sampled_loss_valid_arguments_unchanged() -> None:
    with pytest.raises(ValueError, match=r"beta must be a finite number >= 0, got -1.0"):
        TiltedNegativeSampler(beta=-1.0)
    with pytest.raises(ValueError, match="beta must be a finite number >= 0, got nan"):
        SampledHardNegativeLoss(beta=float("nan"))
    loss = SampledHardNegativeLoss(np.float64(2.0), 3, temperature=0.5)
    assert (loss.beta, loss.num_negatives, loss.temperature) == (2.0, 3, 0.5)
    assert loss.reduction == "mean" and loss.sampler_all.num_negatives == 3


def test_shared_number_checks() -> None:
    assert check_real(np.float32(0.5), "x") == 0.5
    assert check_int(np.int64(4), "k", low=1) == 4
    assert check_positive(np.float32(0.5), "t") == 0.5
    for bad in ("0.5", torch.tensor(0.5), True, np.bool_(True), None):
        with pytest.raises(TypeError, match=r"^x must be a number, got "):
            check_real(bad, "x")
        with pytest.raises(TypeError, match=r"^t must be a number, got "):
            check_positive(bad, "t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"x must be a finite number, got nan"):
        check_real(float("nan"), "x")
    for bad in (True, 2.0, "2", torch.tensor(2)):
        with pytest.raises(TypeError, match=r"^k must be an integer, got "):
            check_int(bad, "k")
    with pytest.raises(ValueError, match=r"^k must be an integer >= 1, got 0$"):
        check_int(0, "k", low=1)


# -- (13) boolean switches take True / False only ----------------------------------------

SWITCHES: list[tuple[Callable[[Any], Any], str]] = [
    (lambda v: NSCLLoss(positive_in_denominator=v), "positive_in_denominator"),
    (lambda v: HardNegativeLoss(detach_weights=v), "detach_weights"),
    (lambda v: SPACLLoss(detach_candidates=v), "detach_candidates"),
    (lambda v: SPACLLoss(conditional_discriminator=v), "conditional_discriminator"),
    (lambda v: MaskConLoss(in_batch_keys=v), "in_batch_keys"),
    (lambda v: VarConLoss(detach_centroids=v), "detach_centroids"),
    (lambda v: VarConLoss(detach_confidence=v), "detach_confidence"),
    (lambda v: AdversarialNegatives(4, conditional=v), "conditional"),
    (lambda v: NegativeQueue(4, 2, gather_distributed=v), "gather_distributed"),
]


@pytest.mark.parametrize(("make", "name"), SWITCHES, ids=[n for _, n in SWITCHES])
@pytest.mark.parametrize("value", ["no", "False", 1, 0, None])
def test_boolean_switches_refuse_non_bools(
    make: Callable[[Any], Any], name: str, value: Any
) -> None:
    with pytest.raises(TypeError, match=rf"^{name} must be a bool \(True or False\), got "):
        make(value)


@pytest.mark.parametrize(
    ("make", "name"),
    [*SWITCHES, (lambda v: RelativeThresholdNegatives(0.9, compiled=v), "compiled")],
    ids=[*(n for _, n in SWITCHES), "compiled"],
)
@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.bool_(False)])
def test_boolean_switches_keep_bools(make: Callable[[Any], Any], name: str, value: Any) -> None:
    obj = make(value)
    stored = getattr(obj.options if isinstance(obj, SPACLLoss) else obj, name)
    assert type(stored) is bool and stored == bool(value)


def test_spacl_switch_set_as_attribute_is_checked() -> None:
    loss = SPACLLoss()
    with pytest.raises(TypeError, match="detach_candidates must be a bool"):
        loss.detach_candidates = "no"  # type: ignore[assignment]
    assert loss.detach_candidates is True


def test_check_flag_message_names_the_value() -> None:
    msg = "detach_weights must be a bool (True or False), got str 'no'"
    with pytest.raises(TypeError, match=f"^{re.escape(msg)}$"):
        check_flag("no", "detach_weights")


# -- (14) SPACL's adversarial width is checked at construction, under its own name ---------


@pytest.mark.parametrize(
    ("value", "error"), [(-3, ValueError), (0, ValueError), (True, TypeError), (2.5, TypeError)]
)
def test_spacl_adversarial_hidden_checked_at_construction(value: Any, error: type) -> None:
    with pytest.raises(error, match=r"^adversarial_hidden must be an integer"):
        SPACLLoss(adversarial_hidden=value)
    with pytest.raises(error, match=r"^adversarial_hidden must be an integer"):
        SPACLOptions(adversarial_hidden=value)


def test_spacl_adversarial_hidden_and_embedding_dim_valid() -> None:
    loss = SPACLLoss(adversarial_hidden=6, embedding_dim=4)
    assert loss.adversarial is not None and loss.adversarial.hidden == 6
    assert SPACLLoss(adversarial_hidden=None).options.adversarial_hidden is None
    with pytest.raises(ValueError, match=r"^embedding_dim must be an integer >= 1, got 0$"):
        SPACLLoss(embedding_dim=0)
    with pytest.raises(TypeError, match=r"^generator must be a torch.Generator"):
        SPACLLoss(generator=0)  # type: ignore[arg-type]
