"""The fixed open-intent decision rule (issue 18): the quantile of the score ``predict``
thresholds, its split-conformal guarantee, FPR at 95% TPR and the spread over seeds."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction

import pytest
import torch

from spacl.evaluate.ood import (
    MIN_CLASS_COUNT,
    class_centres,
    conformal_quantile,
    fit_open_classifier,
    fpr_at_tpr,
    open_intent_metrics,
    reject_all_metrics,
)
from spacl.evaluate.spread import seed_spread, seeds_to_settle, std_interval


def conformal_rank(n: int, q: float) -> int:
    """``min(n, ceil(q (n + 1)))`` in exact rational arithmetic (``q`` as written)."""
    return max(1, min(n, math.ceil(Fraction(str(q)) * (n + 1))))


def clusters(
    counts: list[int], d: int, spread: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters around orthonormal directions, ``counts[k]`` points of class k."""
    gen = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))[0]
    ys = torch.cat([torch.full((n,), k) for k, n in enumerate(counts)])
    z = basis[ys] + spread * torch.randn(len(ys), d, generator=gen, dtype=torch.float64)
    return z, ys


def test_quantile_thresholds_the_nearest_centre_distance_not_the_own_class_one() -> None:
    # the counter-example of issue 18: 8 of class 0's 40 dev examples (20% > 1 - q) lie on
    # class 1's centre.  Their own-class distance is ~1 (the distance between centres),
    # so the old own-class quantile accepted everything; the nearest-centre one does not.
    gen = torch.Generator().manual_seed(0)
    e = torch.eye(3, dtype=torch.float64)
    train_z = torch.cat((e[0].repeat(5, 1), e[1].repeat(5, 1)))
    train_y = torch.tensor([0] * 5 + [1] * 5)

    def near(v: torch.Tensor, n: int) -> torch.Tensor:
        return v + 0.05 * torch.randn(n, 3, generator=gen, dtype=torch.float64)

    dev_z = torch.cat((near(e[0], 32), near(e[1], 8), near(e[1], 40)))
    dev_y = torch.tensor([0] * 40 + [1] * 40)
    angles = torch.linspace(0.7, 1.4, 30, dtype=torch.float64)  # 40 to 80 degrees off c_0
    ood_z = torch.cos(angles)[:, None] * e[0] + torch.sin(angles)[:, None] * e[2]
    k = 2
    centres = class_centres(train_z, train_y, k)
    dist = 1.0 - (dev_z / dev_z.norm(dim=1, keepdim=True)) @ centres.T
    nearest = dist.min(1).values
    own = dist.gather(1, dev_y[:, None]).squeeze(1)
    ood_dist = 1.0 - (ood_z @ centres.T).min(1).values
    # the old rule: q-quantile of the own-class distances, above every OOD distance
    assert float(torch.quantile(own, 0.95)) > float(ood_dist.max())
    for scope, min_count in (("global", MIN_CLASS_COUNT), ("class", 1)):
        clf = fit_open_classifier(
            train_z, train_y, dev_z, dev_y, k, scope=scope, min_class_count=min_count
        )
        if scope == "global":  # closed form: s_(j), j = ceil(0.95 * 81) = 77
            want = nearest.sort().values[conformal_rank(80, 0.95) - 1]
            assert conformal_rank(80, 0.95) == 77
            assert torch.equal(clf.thresholds, want.expand(k))
        assert float(clf.thresholds.max()) < float(ood_dist.min())
        assert bool((clf.predict(ood_z) == k).all())  # every OOD input rejected
    # the default rule is the quantile at 0.95 (few dev examples: one pooled threshold)
    default = fit_open_classifier(train_z, train_y, dev_z, dev_y, k)
    assert torch.equal(default.thresholds, conformal_quantile(nearest, 0.95).expand(k))


@pytest.mark.parametrize(
    ("counts", "min_count"),
    [
        ([150, 120, 60, 50], MIN_CLASS_COUNT),  # two own, two pooled (110 >= 100)
        ([150, 120, 30], MIN_CLASS_COUNT),  # the small pool (30) falls back to all of dev
        ([40, 25, 35], 30),
        ([20, 30], 1),
    ],
)
@pytest.mark.parametrize("q", [0.95, 0.8, 0.5])
def test_class_scope_matches_the_mondrian_loop(counts: list[int], min_count: int, q: float) -> None:
    d = 6
    train_z, train_y = clusters([30] * len(counts), d, 0.5, seed=1)
    dev_z, dev_y = clusters(counts, d, 0.5, seed=2)  # spread 0.5: some dev misassigned
    k = len(counts)
    clf = fit_open_classifier(
        train_z, train_y, dev_z, dev_y, k, scope="class", quantile=q, min_class_count=min_count
    )
    centres = class_centres(train_z, train_y, k)
    groups: dict[int, list[float]] = {c: [] for c in range(k)}
    for i in range(dev_z.shape[0]):
        u = dev_z[i] / dev_z[i].norm()
        dists = [1.0 - float(u @ centres[c]) for c in range(k)]
        best = min(range(k), key=lambda c: dists[c])
        groups[best].append(dists[best])

    def quantile_of(values: list[float]) -> float:
        return sorted(values)[conformal_rank(len(values), q) - 1]

    small = [v for c in range(k) if len(groups[c]) < min_count for v in groups[c]]
    pooled = small if len(small) >= min_count else [v for c in range(k) for v in groups[c]]
    for c in range(k):
        want = quantile_of(groups[c]) if len(groups[c]) >= min_count else quantile_of(pooled)
        assert float(clf.thresholds[c]) == pytest.approx(want, abs=1e-12)
    # on dev, each own class accepts exactly its rank j (no ties in continuous data)
    assigned = clf.distances(dev_z).argmin(1)
    accepted = clf.predict(dev_z) != k
    for c in range(k):
        n_c = len(groups[c])
        if n_c >= min_count:
            assert int(accepted[assigned == c].sum()) == conformal_rank(n_c, q)


def test_quantile_accepts_the_stated_share_of_fresh_known_inputs() -> None:
    # split-conformal guarantee: E[share of fresh known inputs accepted] = j / (n + 1)
    reps, n_dev, n_test, q = 300, 50, 100, 0.95
    train_z, train_y = clusters([40, 40, 40], 5, 0.6, seed=3)
    shares = []
    for r in range(reps):
        dev_z, dev_y = clusters([n_dev // 3, n_dev // 3, n_dev - 2 * (n_dev // 3)], 5, 0.6, 10 + r)
        test_z, _ = clusters([n_test // 2, n_test // 2], 5, 0.6, 10_000 + r)  # classes 0, 1
        clf = fit_open_classifier(train_z, train_y, dev_z, dev_y, 3, scope="global", quantile=q)
        shares.append(float((clf.predict(test_z) != 3).double().mean()))
    expected = conformal_rank(n_dev, q) / (n_dev + 1)  # 49 / 51 = 0.961
    assert statistics.fmean(shares) == pytest.approx(expected, abs=0.01)


def test_conformal_quantile_small_samples_and_errors() -> None:
    s = torch.tensor([0.3, 0.1, 0.2], dtype=torch.float64)
    assert float(conformal_quantile(s, 0.95)) == 0.3  # n < q / (1 - q): the maximum
    assert float(conformal_quantile(s, 0.5)) == 0.2  # ceil(0.5 * 4) = 2
    assert float(conformal_quantile(s, 0.0)) == 0.1
    with pytest.raises(ValueError, match="scores is empty"):
        conformal_quantile(torch.zeros(0), 0.5)
    with pytest.raises(ValueError, match="q must be in"):
        conformal_quantile(s, 1.5)
    z, y = clusters([4, 4], 3, 0.1, seed=0)
    with pytest.raises(ValueError, match="min_class_count must be an integer >= 1, got 0"):
        fit_open_classifier(z, y, z, y, 2, min_class_count=0)
    with pytest.raises(ValueError, match="scope must be one of"):
        fit_open_classifier(z, y, z, y, 2, scope="row")


def fpr_loop(scores: list[float], is_ood: list[bool], tpr: float) -> float:
    """Smallest FPR over every threshold ``t`` (accept ``s <= t``) reaching the TPR."""
    known = [s for s, o in zip(scores, is_ood, strict=True) if not o]
    ood = [s for s, o in zip(scores, is_ood, strict=True) if o]
    best = math.inf
    for t in sorted(set(scores)):
        if Fraction(sum(s <= t for s in known), len(known)) >= Fraction(str(tpr)):
            best = min(best, sum(s <= t for s in ood) / len(ood))
    return 100.0 * best


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tpr", [0.95, 0.9, 0.5])
def test_fpr_at_tpr_matches_loop_and_sklearn(seed: int, tpr: float) -> None:
    from sklearn.metrics import roc_curve

    gen = torch.Generator().manual_seed(seed)
    n = [100, 137, 60, 200][seed]
    is_ood = torch.rand(n, generator=gen) < 0.4
    scores = torch.randint(0, 25, (n,), generator=gen).double() + 6.0 * is_ood  # ties
    got = fpr_at_tpr(scores, is_ood, tpr)
    assert got == pytest.approx(fpr_loop(scores.tolist(), is_ood.tolist(), tpr), abs=1e-12)
    # scikit-learn: known = positive class, score = -distance
    fpr, tpr_curve, _ = roc_curve((~is_ood).numpy(), (-scores).numpy(), drop_intermediate=False)
    first = int((tpr_curve >= tpr - 1e-12).argmax())
    assert got == pytest.approx(100.0 * float(fpr[first]), abs=1e-10)


def test_fpr_at_tpr_edges_and_errors() -> None:
    separated = torch.tensor([0.1, 0.2, 0.3, 0.9, 1.0])
    is_ood = torch.tensor([False, False, False, True, True])
    assert fpr_at_tpr(separated, is_ood) == 0.0
    assert fpr_at_tpr(-separated, is_ood) == 100.0
    with pytest.raises(ValueError, match="needs OOD and known"):
        fpr_at_tpr(separated, torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="tpr must be in"):
        fpr_at_tpr(separated, is_ood, 0.0)
    with pytest.raises(ValueError, match="is_ood must be a tensor of shape"):
        fpr_at_tpr(separated, is_ood[:2])


def test_open_intent_metrics_with_scores_report_auroc_and_fpr95() -> None:
    y_true = torch.tensor([0, 1, 0, 2, 2, 1, 2])
    scores = torch.tensor([0.1, 0.2, 0.5, 0.4, 0.9, 0.3, 0.8])
    y_pred = torch.tensor([0, 1, 2, 0, 2, 1, 2])
    m = open_intent_metrics(y_true, y_pred, 2, ood_scores=scores)
    # known 0.1 0.2 0.5 0.3: 95% TPR needs t = 0.5, which accepts OOD 0.4 (1 of 3)
    assert m["fpr_at_95_tpr"] == pytest.approx(100 / 3)
    assert m["auroc"] == pytest.approx(100 * 11 / 12)
    assert "auroc" not in open_intent_metrics(y_true[:3], y_pred[:3], 2, ood_scores=scores[:3])
    with pytest.raises(ValueError, match="ood_scores must have shape"):
        open_intent_metrics(y_true, y_pred, 2, ood_scores=scores[:3])
    floor = reject_all_metrics(y_true, 2)
    assert floor["fpr_at_95_tpr"] == 100.0 and floor["auroc"] == 50.0


def test_seed_spread_is_the_sample_std_over_seeds() -> None:
    runs = [
        {"macro_f1": 70.0, "f1_ood": 80.0, "accuracy": 1.0, "f1_ind": 2.0},
        {"macro_f1": 74.0, "f1_ood": 88.0, "accuracy": 3.0, "f1_ind": 2.0},
        {"macro_f1": 79.0, "f1_ood": None, "accuracy": 5.0, "f1_ind": 2.0},
    ]
    spread = seed_spread(runs)
    assert spread["macro_f1"]["std"] == pytest.approx(statistics.stdev([70.0, 74.0, 79.0]))
    assert spread["macro_f1"]["mean"] == pytest.approx(223.0 / 3)
    assert spread["f1_ood"] == {"mean": 84.0, "std": pytest.approx(math.sqrt(32.0)), "n": 2.0}
    assert spread["f1_ind"]["std"] == 0.0
    assert math.isnan(seed_spread(runs[:1], ["macro_f1"])["macro_f1"]["std"])
    with pytest.raises(ValueError, match="no run holds the metric 'auroc'"):
        seed_spread(runs, ["auroc"])


def test_std_interval_closed_form_and_coverage() -> None:
    """With 3 values the chi-square law has 2 degrees of freedom, an exponential of mean 2
    (``ppf(p) = -2 log(1 - p)``): the 90% interval is ``s [1 / sqrt(log 20), 1 / sqrt(-log
    0.95)]``; on normal samples it covers the true std 90% of the time."""
    low, high = std_interval(2.0, 3, 0.90)
    assert low == pytest.approx(2.0 / math.sqrt(math.log(20.0)), rel=1e-9)
    assert high == pytest.approx(2.0 / math.sqrt(-math.log(0.95)), rel=1e-9)
    assert std_interval(0.0, 5) == (0.0, 0.0)
    gen = torch.Generator().manual_seed(0)
    for n in (3, 5):
        sigma, reps = 2.5, 20000
        draws = torch.randn(reps, n, generator=gen, dtype=torch.float64) * sigma
        stds = draws.std(1, correction=1)
        low_f, high_f = std_interval(1.0, n, 0.90)  # the interval scales with s
        covered = ((stds * low_f <= sigma) & (sigma <= stds * high_f)).double().mean()
        # binomial sd of the coverage: sqrt(0.9 * 0.1 / 20000) = 0.0021
        assert abs(float(covered) - 0.90) < 0.01
        # each tail misses 5%
        assert abs(float((stds * low_f > sigma).double().mean()) - 0.05) < 0.008


@pytest.mark.parametrize(
    ("std", "n", "level", "error"),
    [
        (1.0, 1, 0.9, ValueError),
        (float("nan"), 3, 0.9, ValueError),
        (-1.0, 3, 0.9, ValueError),
        (1.0, 3, 1.0, ValueError),
        (1.0, 3, 0.0, ValueError),
        ("1.0", 3, 0.9, TypeError),
    ],
)
def test_std_interval_rejects_bad_input(std, n, level, error) -> None:
    with pytest.raises(error):
        std_interval(std, n, level)


def test_seeds_to_settle_is_the_first_n_whose_interval_leaves_the_bound() -> None:
    """Closed forms at n = 2 and 3 (1 and 2 degrees of freedom) and the first-n property.

    90% intervals: n = 3 gives ``s [0.5815, 4.4153]`` (see the closed-form test above),
    n = 2 gives ``s [1 / 1.9600, 1 / 0.06271]`` (``chi2_1`` quantiles = squared normal
    ones).  So ``s = 1.8`` is over a bound of 1 from 3 seeds on (``1.8 / 1.96 = 0.918``
    is not), ``s = 1.7`` is not over it at 3 (``0.989``), ``s = 1 / 4.5`` is under it from
    3 seeds on; ``s`` at the bound is never settled."""
    assert seeds_to_settle(1.8, 1.0) == 3
    assert seeds_to_settle(1.7, 1.0) == 4
    assert seeds_to_settle(1.0 / 4.5, 1.0) == 3
    assert seeds_to_settle(2.5, 1.0) == 2  # 2.5 / 1.96 = 1.28 > 1
    assert seeds_to_settle(1.0, 1.0) is None
    assert seeds_to_settle(1.01, 1.0) is None  # needs more than 1000 seeds
    assert seeds_to_settle(1.01, 1.0, max_n=100000) is not None
    for std, bound in ((4.47, 3.0), (2.83, 3.0), (12.51, 5.0), (3.61, 5.0), (0.1, 3.0)):
        n = seeds_to_settle(std, bound, max_n=5000)
        assert n is not None
        low, high = std_interval(std, n)
        assert low > bound or high <= bound
        if n > 2:
            low, high = std_interval(std, n - 1)
            assert not (low > bound or high <= bound)


@pytest.mark.parametrize(
    ("std", "bound", "max_n", "error"),
    [
        (-1.0, 3.0, 100, ValueError),
        (1.0, float("inf"), 100, ValueError),
        (1.0, 3.0, 1, ValueError),
        ("1", 3.0, 100, TypeError),
    ],
)
def test_seeds_to_settle_rejects_bad_input(std, bound, max_n, error) -> None:
    with pytest.raises(error):
        seeds_to_settle(std, bound, max_n=max_n)
