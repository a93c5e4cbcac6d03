"""TEXTOIR's class draw (issue 37): the known classes a seed gives, as data.

The lists below were produced by TEXTOIR's own procedure, transcribed literally
(``np.random.seed(s)``, then ``np.random.choice(np.array(labels), round(n * r),
replace=False)`` over its ``benchmark_labels``), not by spacl.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from spacl.data.text import IntentExamples, open_intent_split
from spacl.data.textoir import TEXTOIR_LABELS, textoir_known_classes

DRAWN = {
    ("stackoverflow", 0.25, 0): ["visual-studio", "apache", "wordpress", "linq", "matlab"],
    ("stackoverflow", 0.75, 3): [
        "scala", "bash", "apache", "svn", "drupal", "spring", "haskell", "hibernate",
        "sharepoint", "osx", "magento", "oracle", "wordpress", "visual-studio", "qt",
    ],
    ("banking", 0.25, 1): [
        "edit_personal_details", "lost_or_stolen_phone", "declined_card_payment",
        "why_verify_identity", "top_up_by_cash_or_cheque", "top_up_failed", "top_up_reverted",
        "receiving_money", "failed_transfer", "top_up_by_card_charge", "card_about_to_expire",
        "reverted_card_payment?", "exchange_via_app", "age_limit", "verify_top_up",
        "declined_cash_withdrawal", "pending_card_payment", "card_not_working",
        "passcode_forgotten",
    ],
    ("oos", 0.25, 2): [
        "balance", "application_status", "smart_home", "calendar", "change_user_name",
        "transactions", "change_volume", "schedule_maintenance", "traffic", "freeze_account",
        "gas_type", "flight_status", "direct_deposit", "are_you_a_bot", "pin_change", "income",
        "find_phone", "repeat", "what_song", "pto_request", "nutrition_info", "next_holiday",
        "spending_history", "reminder", "plug_type", "credit_limit_change", "alarm",
        "todo_list_update", "food_last", "tire_pressure", "todo_list", "change_speed",
        "lost_luggage", "taxes", "payday", "calories", "travel_alert", "pto_used",
    ],
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(DRAWN))
def test_textoir_draw_matches_the_stored_lists(key: tuple[str, float, int]) -> None:
    assert textoir_known_classes(*key) == DRAWN[key]


def test_class_counts_use_pythons_rounding() -> None:
    # oos: 150 * 0.25 = 37.5 -> 38 and 150 * 0.75 = 112.5 -> 112 (half to even)
    sizes = {r: len(textoir_known_classes("oos", r, 0)) for r in (0.25, 0.5, 0.75)}
    assert sizes == {0.25: 38, 0.5: 75, 0.75: 112}
    assert len(textoir_known_classes("banking", 0.75, 0)) == 58  # 57.75
    assert len(TEXTOIR_LABELS["stackoverflow"]) == 20 and len(TEXTOIR_LABELS["banking"]) == 77


def test_draw_leaves_numpys_global_state_alone() -> None:
    np.random.seed(123)  # noqa: NPY002 (the legacy global state under test)
    expected = np.random.rand()  # noqa: NPY002
    np.random.seed(123)  # noqa: NPY002 (the legacy global state under test)
    textoir_known_classes("banking", 0.5, 7)
    assert np.random.rand() == expected  # noqa: NPY002


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("imdb", 0.25, 0), ValueError),
        (("banking", 0.0, 0), ValueError),
        (("banking", 1.5, 0), ValueError),
        (("banking", "0.5", 0), TypeError),
        (("banking", 0.5, -1), ValueError),
        (("banking", 0.5, 1.0), TypeError),
    ],
)
def test_bad_arguments_are_named(args: tuple, error: type) -> None:
    with pytest.raises(error):
        textoir_known_classes(*args)


def _examples(labels: list[str], name: str) -> IntentExamples:
    texts = [f"{name} {i} {y}" for i, y in enumerate(labels)]
    return IntentExamples(texts, labels, Path(name), list(range(2, 2 + len(labels))))


def test_split_with_named_known_classes_keeps_their_order_and_opens_the_rest() -> None:
    classes = ["a", "b", "c", "d"]
    data = {
        "train": _examples(classes * 2, "train.tsv"),
        "dev": _examples(classes, "dev.tsv"),
        "test": _examples([*classes, "oos"], "test.tsv"),
    }
    split = open_intent_split(data, 0.5, 0, known_classes=["c", "a"])
    assert split.known_classes == ["c", "a"]
    assert split.unknown_classes == ["b", "d"]
    assert split.train_texts == ["train.tsv 0 a", "train.tsv 2 c", "train.tsv 4 a", "train.tsv 6 c"]
    assert split.train_labels.tolist() == [1, 0, 1, 0]
    assert split.dev_labels.tolist() == [1, 0]
    # test: b, d and the declared out-of-scope label are all open (label K = 2)
    assert torch.equal(split.test_labels, torch.tensor([1, 2, 0, 2, 2]))
    with pytest.raises(ValueError, match="not a class"):
        open_intent_split(data, 0.5, 0, known_classes=["a", "z"])
    with pytest.raises(ValueError, match="twice"):
        open_intent_split(data, 0.5, 0, known_classes=["a", "a"])
    with pytest.raises(TypeError, match="known_classes"):
        open_intent_split(data, 0.5, 0, known_classes="a")
