"""NegativeQueue (FIFO ring buffer, state round trip) and ``extra_negatives`` in the losses."""

from __future__ import annotations

import pytest
import torch

from loss_references import queue_ref
from spacl.losses import (
    DebiasedContrastiveLoss,
    DecoupledContrastiveLoss,
    HardNegativeLoss,
    NSCLLoss,
    NTXentLoss,
    SupConLoss,
)
from spacl.losses._cross import cross_logsumexp
from spacl.mining import NegativeQueue

F64 = torch.float64


def _data(seed: int = 0, b: int = 5, v: int = 2, d: int = 6, q: int = 7):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(b, v, d, dtype=F64, generator=g)
    queue = torch.randn(q, d, dtype=F64, generator=g)
    labels = torch.randint(0, 3, (b,), generator=g)
    queue_labels = torch.randint(0, 4, (q,), generator=g)
    return z, queue, labels, queue_labels


# ----------------------------------------------------------------------------- queue
def test_queue_is_fifo_and_keeps_the_last_size_rows():
    q = NegativeQueue(5, 2)
    assert len(q) == 0 and q.embeddings.shape == (0, 2) and q.labels is None
    pushed = []
    for step in range(4):
        rows = torch.full((2, 2), float(step)) + torch.arange(2.0).unsqueeze(1) / 10
        q.push(rows, torch.tensor([step, step]))
        pushed.append(rows)
    every = torch.cat(pushed)
    assert len(q) == 5
    assert torch.equal(q.embeddings, every[-5:])  # oldest first
    assert torch.equal(q.labels, torch.tensor([1, 2, 2, 3, 3]))
    q.push(torch.ones(7, 2) * 9, torch.arange(7))  # larger than the queue: its last 5 rows
    assert torch.equal(q.labels, torch.arange(2, 7))


def test_queue_state_dict_round_trip_is_exact():
    q = NegativeQueue(6, 3, dtype=F64)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        q.push(torch.randn(4, 3, dtype=F64, generator=g), torch.randint(0, 5, (4,), generator=g))
    other = NegativeQueue(6, 3, dtype=F64)
    other.load_state_dict(q.state_dict())
    assert torch.equal(other.embeddings, q.embeddings)
    assert torch.equal(other.labels, q.labels)
    rows = torch.randn(2, 3, dtype=F64, generator=g)
    q.push(rows, torch.tensor([0, 1]))
    other.push(rows, torch.tensor([0, 1]))
    assert torch.equal(other.embeddings, q.embeddings)


def test_queue_rejects_bad_input():
    with pytest.raises(ValueError, match="size"):
        NegativeQueue(0, 3)
    with pytest.raises(ValueError, match="dim"):
        NegativeQueue(3, -1)
    q = NegativeQueue(4, 3)
    with pytest.raises(ValueError, match=r"\[n, 3\]"):
        q.push(torch.zeros(2, 4))
    q.push(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="unlabelled"):
        q.push(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="finite"):
        q.push(torch.full((1, 3), float("nan")))


def test_queue_push_is_detached():
    q = NegativeQueue(4, 2)
    x = torch.randn(2, 2, requires_grad=True)
    q.push(x * 2)
    assert not q.embeddings.requires_grad


# -------------------------------------------------------------------- extra negatives
@pytest.mark.parametrize("views", [2, 3])
def test_ntxent_with_queue_equals_loop_reference(views):
    z, queue, _, _ = _data(v=views)
    loss = NTXentLoss(0.5)
    ref = queue_ref(z, 0.5, queue, "ntxent")
    assert abs(float(loss(z, extra_negatives=queue) - ref)) < 1e-10
    if views == 2:
        two = loss(z[:, 0], z[:, 1], extra_negatives=queue)
        assert abs(float(two - ref)) < 1e-10


def test_ntxent_with_queue_and_targets_and_one_anchor_mode():
    z, queue, _, _ = _data()
    t = torch.randn_like(z)
    got = NTXentLoss(0.3)(z, targets=t, extra_negatives=queue)
    # candidates from the targets: same formula with targets' rows as candidates
    from loss_references import flat, unit

    za, inst, _ = flat(unit(z))
    zc = torch.cat((flat(unit(t))[0], unit(queue)))
    terms = []
    for a in range(za.shape[0]):
        den = sum(torch.exp(za[a] @ zc[k] / 0.3) for k in range(zc.shape[0]) if k != a)
        poss = [p for p in range(za.shape[0]) if p != a and inst[p] == inst[a]]
        terms.append(sum(-torch.log(torch.exp(za[a] @ zc[p] / 0.3) / den) for p in poss))
    assert abs(float(got - sum(terms) / len(terms))) < 1e-10
    one = NTXentLoss(0.3, anchor_mode="one")(z, extra_negatives=queue)
    assert torch.isfinite(one)


@pytest.mark.parametrize("variant", ["out", "in"])
def test_supcon_with_labelled_queue_equals_loop_reference(variant):
    z, queue, labels, queue_labels = _data()
    got = SupConLoss(0.2, variant)(
        z, labels, extra_negatives=queue, extra_negative_labels=queue_labels
    )
    ref = queue_ref(z, 0.2, queue, f"supcon_{variant}", labels, queue_labels)
    assert abs(float(got - ref)) < 1e-10


def test_hard_negative_family_with_queue_equals_loop_reference():
    z, queue, labels, queue_labels = _data(3)
    cases = [
        (DecoupledContrastiveLoss(0.5)(z, extra_negatives=queue), queue_ref(z, 0.5, queue, "dcl")),
        (
            DebiasedContrastiveLoss(0.1, 0.5)(z, extra_negatives=queue),
            queue_ref(z, 0.5, queue, "hcl", tau_plus=0.1),
        ),
        (
            HardNegativeLoss(1.5, 0.05, 0.5)(z, extra_negatives=queue),
            queue_ref(z, 0.5, queue, "hcl", beta=1.5, tau_plus=0.05),
        ),
        (
            HardNegativeLoss(1.0, 0.0, 0.5)(
                z, labels, extra_negatives=queue, extra_negative_labels=queue_labels
            ),
            queue_ref(z, 0.5, queue, "hcl", labels, queue_labels, beta=1.0),
        ),
    ]
    for got, ref in cases:
        assert abs(float(got - ref)) < 1e-10


def test_zero_row_queue_equals_no_queue():
    z, queue, labels, queue_labels = _data()
    empty = queue[:0]
    for loss in (NTXentLoss(0.5), DecoupledContrastiveLoss(0.5), HardNegativeLoss(1.0)):
        assert torch.equal(loss(z, extra_negatives=empty), loss(z))
    sup = SupConLoss(0.1)
    got = sup(z, labels, extra_negatives=empty, extra_negative_labels=queue_labels[:0])
    assert torch.equal(got, sup(z, labels))


def test_queue_gradients_match_the_loop_reference_float64():
    z, queue, labels, queue_labels = _data(5)
    for fn, ref_fn in (
        (
            lambda x: NTXentLoss(0.4)(x, extra_negatives=queue),
            lambda x: queue_ref(x, 0.4, queue, "ntxent"),
        ),
        (
            lambda x: SupConLoss(0.4)(
                x, labels, extra_negatives=queue, extra_negative_labels=queue_labels
            ),
            lambda x: queue_ref(x, 0.4, queue, "supcon_out", labels, queue_labels),
        ),
    ):
        a = z.clone().requires_grad_(True)
        b = z.clone().requires_grad_(True)
        fn(a).backward()
        ref_fn(b).backward()
        assert float((a.grad - b.grad).abs().max()) < 1e-10


def test_queue_float32_matches_float64_reference():
    z, queue, labels, queue_labels = _data(7, b=16, d=32, q=64)
    got = SupConLoss(0.1)(
        z.float(), labels, extra_negatives=queue.float(), extra_negative_labels=queue_labels
    )
    ref = SupConLoss(0.1)(z, labels, extra_negatives=queue, extra_negative_labels=queue_labels)
    assert abs(float(got) - float(ref)) < 1e-5 * max(1.0, abs(float(ref)))


def test_cross_logsumexp_gradcheck_and_double_backward():
    g = torch.Generator().manual_seed(0)
    a = torch.nn.functional.normalize(torch.randn(4, 3, dtype=F64, generator=g), dim=1)
    q = torch.nn.functional.normalize(torch.randn(5, 3, dtype=F64, generator=g), dim=1)
    a.requires_grad_(True)
    q.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x, y: cross_logsumexp(x, y, 2.0, 2.0), (a, q))
    assert torch.autograd.gradgradcheck(lambda x, y: cross_logsumexp(x, y, 2.0, 2.0), (a, q))


def test_nscl_with_labelled_queue_uses_its_negative_rule():
    z, queue, labels, queue_labels = _data(2)
    from loss_references import flat, unit

    got = NSCLLoss(0.5)(z, labels, extra_negatives=queue, extra_negative_labels=queue_labels)
    za, inst, _ = flat(unit(z))
    q = unit(queue)
    lab = [int(labels[r // 2]) for r in range(za.shape[0])]
    terms = []
    for a in range(za.shape[0]):
        den = sum(torch.exp(za[a] @ za[k] / 0.5) for k in range(za.shape[0]) if lab[k] != lab[a])
        den = den + sum(
            torch.exp(za[a] @ q[j] / 0.5)
            for j in range(q.shape[0])
            if int(queue_labels[j]) != lab[a]
        )
        poss = [p for p in range(za.shape[0]) if p != a and inst[p] == inst[a]]
        terms.append(sum(-(za[a] @ za[p]) / 0.5 + torch.log(den) for p in poss) / len(poss))
    assert abs(float(got - sum(terms) / len(terms))) < 1e-10


def test_extra_negatives_bad_input_names_the_argument():
    z, queue, labels, queue_labels = _data()
    with pytest.raises(ValueError, match="extra_negatives"):
        NTXentLoss()(z, extra_negatives=queue[:, :3])
    with pytest.raises(TypeError, match="extra_negatives dtype"):
        NTXentLoss()(z, extra_negatives=queue.float())
    with pytest.raises(ValueError, match="extra_negative_labels"):
        SupConLoss()(z, labels, extra_negatives=queue)
    with pytest.raises(ValueError, match="without labels"):
        NTXentLoss()(z, extra_negatives=queue, extra_negative_labels=queue_labels)
    with pytest.raises(ValueError, match="without extra_negatives"):
        SupConLoss()(z, labels, extra_negative_labels=queue_labels)
    with pytest.raises(ValueError, match="extra_negative_labels has length"):
        SupConLoss()(z, labels, extra_negatives=queue, extra_negative_labels=queue_labels[:2])


def test_queue_feeds_a_loss():
    z, queue, labels, queue_labels = _data()
    q = NegativeQueue(10, 6, dtype=F64)
    q.push(queue, queue_labels)
    got = SupConLoss(0.2)(z, labels, **q.loss_kwargs(with_labels=True))
    ref = queue_ref(z, 0.2, queue, "supcon_out", labels, queue_labels)
    assert abs(float(got - ref)) < 1e-10


def _gather_worker(rank: int, world: int, init_file: str, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        q = NegativeQueue(5, 2, gather_distributed=True)
        for step in range(2):
            rows = torch.full((2, 2), float(10 * step + rank))
            q.push(rows, torch.tensor([rank, rank]))
        torch.save({"rows": q.embeddings, "labels": q.labels}, f"{out}/q{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_gather_distributed_push_gives_every_rank_the_same_queue(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_gather_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    ref = NegativeQueue(5, 2)
    for step in range(2):
        for rank in range(2):  # rank order
            ref.push(torch.full((2, 2), float(10 * step + rank)), torch.tensor([rank, rank]))
    for rank in range(2):
        got = torch.load(tmp_path / f"q{rank}.pt", weights_only=True)
        assert torch.equal(got["rows"], ref.embeddings)
        assert torch.equal(got["labels"], ref.labels)


def test_queue_rows_can_be_the_only_positives():
    # one view, every label unique in the batch: without the queue SupCon has no positive
    # pair (pytorch-metric-learning silently returns 0 there; spacl raises), with a
    # labelled queue the same-class queue rows are the positives
    z, queue, _, _ = _data(4, b=4, v=1)
    labels = torch.arange(4)
    queue_labels = torch.tensor([0, 1, 2, 3, 0, 1, 9])
    with pytest.raises(ValueError, match="positive"):
        SupConLoss(0.2)(z, labels)
    got = SupConLoss(0.2)(z, labels, extra_negatives=queue, extra_negative_labels=queue_labels)
    ref = queue_ref(z, 0.2, queue, "supcon_out", labels, queue_labels)
    assert abs(float(got - ref)) < 1e-10
