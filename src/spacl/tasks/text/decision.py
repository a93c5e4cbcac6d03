"""Open-intent decision rules, and the choice of one from train/dev data only.

A *decision rule* turns a head's features into ``K + 1``-way predictions: nearest class
centre (centres from train) with a rejection threshold fitted without any OOD example.
The candidate rules, fixed in advance (:data:`DECISION_RULES`):

- ``pseudo_ood/global``, ``pseudo_ood/class``: leave-own-class-out thresholds
  (:func:`spacl.evaluate.ood.fit_open_classifier`, ``method="pseudo_ood"``);
- ``quantile/global``, ``quantile/class``: the split-conformal ``ood.quantile`` (0.95)
  quantile of the known-class dev examples' distance to their *nearest* centre (the
  score ``predict`` thresholds), pooled or per assigned class with at least 100 dev
  examples; ``quantile/class`` is :data:`DEFAULT_RULE`, the task's fixed rule (issue 18,
  ``docs/kg_and_text.md``);
- ``held_out_classes``: a share of the known classes is hidden from an auxiliary head
  trained by the same recipe; the threshold maximises the balanced accuracy between
  the dev distances of its trained classes and of the hidden ones, and is used with
  the head trained on every known class.

**Per-run selection** (``ood.method=select``, an option since issue 18: its argmax over
rules on a small simulated split was unstable from seed to seed).  **Selection
criterion** (:data:`SELECTION_CRITERION`, stated before any run, and the only use of
data in the choice): a *simulated open split of dev*.  The auxiliary
head of ``held_out_classes`` (``H`` = ``held_out_fraction`` of the ``K`` known classes
hidden, ``2 <= |H| <= K - 2``) is reused; ``H`` is cut into ``H_fit`` (first half)
and ``H_eval`` (the rest), and every kept class's dev examples into two seeded halves
``A`` / ``B``.  Each rule is fitted on the auxiliary features with kept-class dev
half ``A`` (``held_out_classes`` also sees ``H_fit`` as its hidden classes) and scored
by the macro-F1 over the kept classes + OOD on dev half ``B`` plus every dev example
of ``H_eval`` as OOD: classes no rule has seen, as the test's unknown classes.  The
highest score wins; ties go to the earlier rule of :data:`DECISION_RULES`.  With fewer
than ``MIN_KNOWN_FOR_HIDDEN`` (4) known classes there is no such split and ``pseudo_ood/global``
(:data:`SELECT_FALLBACK`) is used.  The test set is never read by the choice; every rule is still
evaluated on test for transparency (reported as "not used for selection").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from spacl._validation import check_choice
from spacl.data.text import OpenIntentSplit
from spacl.evaluate.ood import (
    OpenClassifier,
    balanced_threshold,
    class_centres,
    fit_open_classifier,
    ood_auroc,
    open_intent_metrics,
)

__all__ = [
    "DECISION_RULES",
    "DEFAULT_RULE",
    "SELECTION_CRITERION",
    "SELECT_FALLBACK",
    "HeldOutHead",
    "RuleChoice",
    "choose_rule",
    "fit_rule",
    "held_out_head",
    "held_out_threshold",
    "hidden_classes",
    "nearest_auroc",
    "rules_on_test",
    "run_metrics",
    "select_rule",
]

DECISION_RULES = (
    "pseudo_ood/global",
    "pseudo_ood/class",
    "quantile/global",
    "quantile/class",
    "held_out_classes",
)
#: the task's fixed rule (``ood.method=quantile``, ``ood.scope=class``, q = 0.95)
DEFAULT_RULE = "quantile/class"
#: the fewest hidden classes, for both uses: the selection cuts them into ``H_fit`` and
#: ``H_eval`` (both non-empty), and a threshold set on a single hidden class would measure
#: that one class's distance, not unseen data's; with two classes always kept trained,
#: both uses need at least ``MIN_HIDDEN + 2`` known classes
MIN_HIDDEN = 2
#: the fewest known classes the held-out-class split (and so ``select``) works with
MIN_KNOWN_FOR_HIDDEN = MIN_HIDDEN + 2
#: the rule ``select`` falls back on below ``MIN_KNOWN_FOR_HIDDEN`` known classes (its
#: stated criterion)
SELECT_FALLBACK = "pseudo_ood/global"

SELECTION_CRITERION = (
    "macro-F1 (kept classes + OOD) on a simulated open split of dev: an auxiliary head "
    "trained without a held-out share H of the known classes; rules fitted on half A of "
    "the kept classes' dev examples (held_out_classes also sees the first half of H), "
    "scored on half B plus the dev examples of the other half of H as OOD; highest wins, "
    f"ties to the earlier rule; fewer than {MIN_KNOWN_FOR_HIDDEN} known classes: "
    "pseudo_ood/global. "
    "No test example is used."
)

#: ``(x, y, num_classes) -> head`` and ``(head, x) -> features``, from the experiment
TrainHead = Callable[[Tensor, Tensor, int], nn.Module]
Project = Callable[[nn.Module, Tensor], Tensor]


@dataclass(frozen=True)
class HeldOutHead:
    """An auxiliary head trained without the hidden known classes, and its dev features.

    ``remap[k]`` is class ``k``'s index among the kept classes (``-1`` if hidden);
    ``hidden_fit`` / ``hidden_eval`` split the hidden classes for the selection.
    """

    train_z: Tensor  # [N_kept_train, d] auxiliary features of kept-class train examples
    train_y: Tensor  # their kept-class labels
    dev_z: Tensor  # [N_dev, d] auxiliary features of every known-class dev example
    remap: Tensor
    hidden_fit: Tensor
    hidden_eval: Tensor

    @property
    def num_kept(self) -> int:
        return int((self.remap >= 0).sum())


#: the seed offsets of the two seeded draws here (added to the run's seed): which known
#: classes are hidden, and the halves of every class's dev examples
HIDDEN_CLASSES_SEED = 7919
DEV_HALVES_SEED = 104729


def hidden_classes(num_known: int, fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """``(hidden, kept)`` known classes: the one seeded split of both uses.

    ``|H| = round(fraction * K)`` clipped to ``[MIN_HIDDEN, K - 2]`` (two classes always
    stay trained); the classes come first in one seeded permutation of ``0..K-1``
    (seed ``seed + HIDDEN_CLASSES_SEED``).  ``kept`` is sorted.

    Raises:
        ValueError: fewer than ``MIN_KNOWN_FOR_HIDDEN`` (4) known classes, or ``fraction`` outside
            ``(0, 1)`` (both callers' checks).
    """
    if num_known < MIN_KNOWN_FOR_HIDDEN:
        raise ValueError(
            f"the held-out-class split needs >= {MIN_KNOWN_FOR_HIDDEN} known classes, "
            f"got {num_known}"
        )
    if isinstance(fraction, bool) or not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    gen = torch.Generator().manual_seed(int(seed) + HIDDEN_CLASSES_SEED)
    order = torch.randperm(num_known, generator=gen)
    n_out = max(MIN_HIDDEN, min(num_known - 2, round(float(fraction) * num_known)))
    return order[:n_out], order[n_out:].sort().values


def _train_without(
    hidden_kept: tuple[Tensor, Tensor],
    train_x: Tensor,
    train_y: Tensor,
    num_known: int,
    train_head: TrainHead,
) -> tuple[nn.Module, Tensor, Tensor]:
    """The auxiliary head trained on the kept classes: ``(head, remap, kept rows)``;
    ``remap[k]`` is class ``k``'s index among the kept (``-1`` if hidden)."""
    _, kept = hidden_kept
    remap = torch.full((num_known,), -1, dtype=torch.long)
    remap[kept] = torch.arange(len(kept))
    rows = remap[train_y] >= 0
    return train_head(train_x[rows], remap[train_y[rows]], len(kept)), remap, rows


def held_out_head(
    train_x: Tensor,
    train_y: Tensor,
    dev_x: Tensor,
    num_known: int,
    *,
    fraction: float,
    seed: int,
    train_head: TrainHead,
    project: Project,
) -> HeldOutHead:
    """Train the auxiliary head of ``held_out_classes`` (module docstring).

    ``H`` is :func:`hidden_classes` (at least ``MIN_HIDDEN``, 2, classes).

    Raises:
        ValueError: fewer than ``MIN_KNOWN_FOR_HIDDEN`` (4) known classes, or
            ``fraction`` outside ``(0, 1)``.
    """
    split = hidden_classes(num_known, fraction, seed)
    head, remap, rows = _train_without(split, train_x, train_y, num_known, train_head)
    hidden, half = split[0], len(split[0]) // 2
    return HeldOutHead(
        train_z=project(head, train_x[rows]),
        train_y=remap[train_y[rows]],
        dev_z=project(head, dev_x),
        remap=remap,
        hidden_fit=hidden[:half].sort().values,
        hidden_eval=hidden[half:].sort().values,
    )


def held_out_threshold(
    train_x: Tensor,
    train_y: Tensor,
    dev_x: Tensor,
    dev_y: Tensor,
    num_known: int,
    *,
    fraction: float,
    seed: int,
    train_head: TrainHead,
    project: Project,
) -> Tensor:
    """The threshold of ``ood.method=held_out_classes`` used alone (no rule choice).

    :func:`hidden_classes` (at least ``MIN_HIDDEN``, 2) are hidden; an
    auxiliary head is trained by the same recipe on the other classes; on its
    features, dev examples of the trained classes give in-domain nearest-centre
    distances and dev examples of the hidden classes out-of-domain ones (never seen in
    training, as test OOD inputs).  The threshold maximises the balanced accuracy
    between the two (:func:`spacl.evaluate.ood.balanced_threshold`) and is then used
    with the head trained on every known class.

    Raises:
        ValueError: fewer than ``MIN_KNOWN_FOR_HIDDEN`` (4) known classes, or
            ``fraction`` outside ``(0, 1)``.
    """
    # hidden_classes refuses the same counts; checked here first so that the error names
    # the option the user set (ood.method), not the split
    if num_known < MIN_KNOWN_FOR_HIDDEN:
        raise ValueError(
            f"ood.method='held_out_classes' needs at least {MIN_KNOWN_FOR_HIDDEN} known classes, "
            f"got {num_known}"
        )
    split = hidden_classes(num_known, fraction, seed)
    head, remap, rows = _train_without(split, train_x, train_y, num_known, train_head)
    kept_y = remap[train_y[rows]]
    centres = class_centres(project(head, train_x[rows]), kept_y, len(split[1]))
    nearest = _nearest(project(head, dev_x), centres)
    inside = remap[dev_y] >= 0
    return balanced_threshold(nearest[inside], nearest[~inside])


def _nearest(z: Tensor, centres: Tensor) -> Tensor:
    return (1.0 - F.normalize(z, dim=1) @ centres.T).min(1).values


def fit_rule(
    rule: str,
    train_z: Tensor,
    train_y: Tensor,
    dev_z: Tensor,
    dev_y: Tensor,
    num_known: int,
    *,
    quantile: float = 0.95,
    held_out: tuple[Tensor, Tensor] | None = None,
) -> OpenClassifier:
    """Fit decision rule ``rule`` (:data:`DECISION_RULES`) with known-class data only.

    ``held_out_classes`` takes ``held_out = (inside, outside)``: the nearest-centre
    distances, on the auxiliary head, of dev examples of its trained and of its hidden
    classes; the threshold they give is used with ``train_z``'s centres.
    """
    check_choice(rule, "rule", DECISION_RULES)
    if rule == "held_out_classes":
        if held_out is None:
            raise ValueError("rule 'held_out_classes' needs held_out=(inside, outside) distances")
        centres = class_centres(train_z, train_y, num_known)
        threshold = balanced_threshold(*held_out).to(centres.dtype)
        return OpenClassifier(centres, threshold.expand(num_known).clone())
    method, scope = rule.split("/")
    return fit_open_classifier(
        train_z, train_y, dev_z, dev_y, num_known, method=method, scope=scope, quantile=quantile
    )


def _dev_halves(labels: Tensor, seed: int) -> Tensor:
    """Seeded mask of half ``A`` of every class's examples (the first of each class)."""
    gen = torch.Generator().manual_seed(int(seed) + DEV_HALVES_SEED)
    perm = torch.randperm(labels.numel(), generator=gen)
    in_a = torch.zeros(labels.numel(), dtype=torch.bool)
    for k in labels.unique().tolist():
        members = perm[labels[perm] == k]
        in_a[members[0::2]] = True
    return in_a


def _held_out_distances(
    aux: HeldOutHead, dev_y: Tensor, inside: Tensor, hidden: Tensor
) -> tuple[Tensor, Tensor]:
    centres = class_centres(aux.train_z, aux.train_y, aux.num_kept)
    d = _nearest(aux.dev_z, centres)
    return d[inside], d[torch.isin(dev_y, hidden)]


def selection_scores(
    aux: HeldOutHead, dev_y: Tensor, *, quantile: float, seed: int
) -> dict[str, float]:
    """Every rule's selection score (module docstring), macro-F1 in percent."""
    kept = aux.remap[dev_y] >= 0
    in_a = _dev_halves(dev_y, seed)
    fit_rows, eval_rows = kept & in_a, kept & ~in_a
    eval_ood = torch.isin(dev_y, aux.hidden_eval)
    k = aux.num_kept
    eval_z = torch.cat((aux.dev_z[eval_rows], aux.dev_z[eval_ood]))
    eval_y = torch.cat(
        (aux.remap[dev_y[eval_rows]], torch.full((int(eval_ood.sum()),), k, dtype=torch.long))
    )
    held = _held_out_distances(aux, dev_y, fit_rows, aux.hidden_fit)
    scores: dict[str, float] = {}
    for rule in DECISION_RULES:
        clf = fit_rule(
            rule,
            aux.train_z,
            aux.train_y,
            aux.dev_z[fit_rows],
            aux.remap[dev_y[fit_rows]],
            k,
            quantile=quantile,
            held_out=held,
        )
        scores[rule] = open_intent_metrics(eval_y, clf.predict(eval_z), k)["macro_f1"]
    return scores


@dataclass(frozen=True)
class RuleChoice:
    """The chosen rule, its classifier on the main head, and every rule's classifier."""

    rule: str
    classifier: OpenClassifier
    classifiers: dict[str, OpenClassifier]
    selection: dict[str, float]  # dev selection score of every rule (empty: too few classes)


def choose_rule(
    train_z: Tensor,
    train_y: Tensor,
    dev_z: Tensor,
    dev_y: Tensor,
    num_known: int,
    aux: HeldOutHead | None,
    *,
    quantile: float,
    seed: int,
) -> RuleChoice:
    """Fit every rule on the main head's features and choose one by the dev criterion.

    ``aux`` is the :func:`held_out_head` (``None`` with fewer than
    ``MIN_KNOWN_FOR_HIDDEN`` known classes: ``held_out_classes`` is then not fitted and
    :data:`SELECT_FALLBACK` is chosen).
    """
    held = None
    if aux is not None:
        kept = aux.remap[dev_y] >= 0
        hidden = torch.cat((aux.hidden_fit, aux.hidden_eval))
        held = _held_out_distances(aux, dev_y, kept, hidden)
    classifiers = {
        rule: fit_rule(
            rule, train_z, train_y, dev_z, dev_y, num_known, quantile=quantile, held_out=held
        )
        for rule in DECISION_RULES
        if held is not None or rule != "held_out_classes"
    }
    if aux is None:
        return RuleChoice(SELECT_FALLBACK, classifiers[SELECT_FALLBACK], classifiers, {})
    scores = selection_scores(aux, dev_y, quantile=quantile, seed=seed)
    best = max(DECISION_RULES, key=lambda r: (scores[r], -DECISION_RULES.index(r)))
    return RuleChoice(best, classifiers[best], classifiers, scores)


def nearest_auroc(clf: OpenClassifier, z: Tensor, labels: Tensor, k: int) -> float | None:
    """Threshold-free AUROC of the nearest-centre distance (``None``: one group is empty)."""
    is_ood = labels == k
    if bool(is_ood.all()) or not bool(is_ood.any()):
        return None
    return ood_auroc(clf.distances(z).min(1).values, is_ood)


def run_metrics(clf: OpenClassifier, z: Tensor, labels: Tensor, k: int) -> dict[str, Any]:
    """:func:`~spacl.evaluate.ood.open_intent_metrics` of ``clf`` with the threshold-free
    ``auroc`` and ``fpr_at_95_tpr`` of its nearest-centre distance (``None`` when
    ``labels`` lack OOD or known examples): a run's ``test`` entry."""
    nearest = clf.distances(z).min(1).values
    out: dict[str, Any] = {"auroc": None, "fpr_at_95_tpr": None}
    out.update(open_intent_metrics(labels, clf.predict(z), k, ood_scores=nearest))
    return out


def adb_on_test(
    train_z: Tensor,
    train_y: Tensor,
    dev_z: Tensor,
    dev_y: Tensor,
    test_z: Tensor,
    test_y: Tensor,
    k: int,
    *,
    quantile: float = 0.95,
) -> dict[str, Any]:
    """ADB's adaptive boundaries (:func:`spacl.evaluate.adb.fit_adb`) as one more rule.

    Centroids from the training features, radii from known-class dev
    (``solver="quantile"``: the conformal ``quantile`` of the nearest-centroid
    distances, as the default rule; a median of clean training distances rejects half
    of the known training examples by construction), on unit-normalised features (the
    space of every other rule here); never a candidate of the dev selection, reported
    on test beside the rules with the AUROC of its open score (distance to the nearest
    centroid minus its radius).
    """
    from spacl.evaluate.adb import fit_adb

    model = fit_adb(
        train_z,
        train_y,
        open_label=k,
        normalize=True,
        solver="quantile",
        dev=(dev_z, dev_y),
        quantile=quantile,
    )
    metrics: dict[str, Any] = dict(open_intent_metrics(test_y, model.predict(test_z), k))
    is_ood = test_y == k
    both = bool(is_ood.any()) and not bool(is_ood.all())
    metrics["auroc"] = ood_auroc(model.open_score(test_z), is_ood) if both else None
    metrics["used_for_selection"] = False
    return metrics


def select_rule(
    split: OpenIntentSplit,
    inputs: tuple[Tensor, Tensor],
    features: tuple[Tensor, Tensor, Tensor],
    *,
    fraction: float,
    quantile: float,
    seed: int,
    train_head: TrainHead,
    project: Project,
) -> tuple[OpenClassifier, dict[str, Any]]:
    """The rule of one run, chosen on train/dev; every rule also evaluated on test.

    ``inputs`` are the encoder's ``(train, dev)`` embeddings (for the auxiliary head),
    ``features`` the main head's ``(train, dev, test)`` features.  Returns the chosen
    classifier and the summary entries ``rule``, ``selection`` (dev score of every
    rule), ``selection_criterion`` and ``rules_test`` (every rule on test, marked
    ``used_for_selection: False``; ``"adb"`` is :func:`adb_on_test`).
    """
    k = split.num_known
    train_z, dev_z, _ = features
    aux = None
    if k >= MIN_KNOWN_FOR_HIDDEN:
        aux = held_out_head(
            inputs[0],
            split.train_labels,
            inputs[1],
            k,
            fraction=fraction,
            seed=seed,
            train_head=train_head,
            project=project,
        )
    choice = choose_rule(
        train_z,
        split.train_labels,
        dev_z,
        split.dev_labels,
        k,
        aux,
        quantile=quantile,
        seed=seed,
    )
    rules_test = _on_test(choice.classifiers, split, features, quantile)
    return choice.classifier, {
        "rule": choice.rule,
        "selection": choice.selection,
        "selection_criterion": SELECTION_CRITERION,
        "rules_test": rules_test,
    }


def _on_test(
    classifiers: dict[str, OpenClassifier],
    split: OpenIntentSplit,
    features: tuple[Tensor, Tensor, Tensor],
    quantile: float,
) -> dict[str, dict[str, Any]]:
    """Every classifier and ADB on test, each marked ``used_for_selection: False``."""
    k = split.num_known
    train_z, dev_z, test_z = features
    out: dict[str, dict[str, Any]] = {
        rule: {
            **open_intent_metrics(split.test_labels, clf.predict(test_z), k),
            "used_for_selection": False,
        }
        for rule, clf in classifiers.items()
    }
    out["adb"] = adb_on_test(
        train_z,
        split.train_labels,
        dev_z,
        split.dev_labels,
        test_z,
        split.test_labels,
        k,
        quantile=quantile,
    )
    return out


def rules_on_test(
    split: OpenIntentSplit, features: tuple[Tensor, Tensor, Tensor], *, quantile: float
) -> dict[str, dict[str, Any]]:
    """With a fixed rule: the other rules (all but ``held_out_classes``, which needs an
    auxiliary head) and ADB on test, for transparency, ``used_for_selection: False``."""
    train_z, dev_z, _ = features
    classifiers = {
        rule: fit_rule(
            rule,
            train_z,
            split.train_labels,
            dev_z,
            split.dev_labels,
            split.num_known,
            quantile=quantile,
        )
        for rule in DECISION_RULES
        if rule != "held_out_classes"
    }
    return _on_test(classifiers, split, features, quantile)
