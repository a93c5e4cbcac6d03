"""TEXTOIR's open-intent protocol: which classes a seed makes known (Zhang et al., ACL 2021).

TEXTOIR (github.com/thuiar/TEXTOIR, ``open_intent_detection/dataloaders``), the toolkit
whose ADB / DA-ADB numbers the open-intent literature quotes, draws the known classes of
a run with seed ``s`` as

    np.random.seed(s)
    n_known = round(len(labels) * known_cls_ratio)          # Python's round: half to even
    known = list(np.random.choice(np.array(labels), n_known, replace=False))

over its fixed label list of the dataset (:data:`TEXTOIR_LABELS`, TEXTOIR's order, not
sorted).  :func:`textoir_known_classes` makes the same draw with a private
``np.random.RandomState(s)`` (the legacy generator that ``np.random.seed`` seeds, so
the same stream) without touching numpy's global state.

Then (TEXTOIR's ``BERT_Loader``, ``labeled_ratio = 1``): training and dev keep the
examples of the known classes only; every test example of another class is open
(``<UNK>``; for ``oos``, CLINC150 with its out-of-scope queries, the ``oos`` test queries
and the unknown in-scope classes are open together).  Class ``k`` of a run is
``known[k]`` (the drawn order).  :func:`spacl.data.text.open_intent_split` applies it
with ``known_classes=textoir_known_classes(...)``.

Example:
    >>> textoir_known_classes("stackoverflow", 0.25, 0)
    ['visual-studio', 'apache', 'wordpress', 'linq', 'matlab']
"""

from __future__ import annotations

import numpy as np

from spacl._validation import check_choice

__all__ = ["TEXTOIR_DATASETS", "TEXTOIR_LABELS", "TEXTOIR_RATIOS", "textoir_known_classes"]

#: TEXTOIR's label lists (``benchmark_labels``), in its order: the draw depends on it
TEXTOIR_LABELS: dict[str, tuple[str, ...]] = {
    "stackoverflow": (
        "ajax",
        "apache",
        "bash",
        "cocoa",
        "drupal",
        "excel",
        "haskell",
        "hibernate",
        "linq",
        "magento",
        "matlab",
        "oracle",
        "osx",
        "qt",
        "scala",
        "sharepoint",
        "spring",
        "svn",
        "visual-studio",
        "wordpress",
    ),
    "banking": (
        "Refund_not_showing_up",
        "activate_my_card",
        "age_limit",
        "apple_pay_or_google_pay",
        "atm_support",
        "automatic_top_up",
        "balance_not_updated_after_bank_transfer",
        "balance_not_updated_after_cheque_or_cash_deposit",
        "beneficiary_not_allowed",
        "cancel_transfer",
        "card_about_to_expire",
        "card_acceptance",
        "card_arrival",
        "card_delivery_estimate",
        "card_linking",
        "card_not_working",
        "card_payment_fee_charged",
        "card_payment_not_recognised",
        "card_payment_wrong_exchange_rate",
        "card_swallowed",
        "cash_withdrawal_charge",
        "cash_withdrawal_not_recognised",
        "change_pin",
        "compromised_card",
        "contactless_not_working",
        "country_support",
        "declined_card_payment",
        "declined_cash_withdrawal",
        "declined_transfer",
        "direct_debit_payment_not_recognised",
        "disposable_card_limits",
        "edit_personal_details",
        "exchange_charge",
        "exchange_rate",
        "exchange_via_app",
        "extra_charge_on_statement",
        "failed_transfer",
        "fiat_currency_support",
        "get_disposable_virtual_card",
        "get_physical_card",
        "getting_spare_card",
        "getting_virtual_card",
        "lost_or_stolen_card",
        "lost_or_stolen_phone",
        "order_physical_card",
        "passcode_forgotten",
        "pending_card_payment",
        "pending_cash_withdrawal",
        "pending_top_up",
        "pending_transfer",
        "pin_blocked",
        "receiving_money",
        "request_refund",
        "reverted_card_payment?",
        "supported_cards_and_currencies",
        "terminate_account",
        "top_up_by_bank_transfer_charge",
        "top_up_by_card_charge",
        "top_up_by_cash_or_cheque",
        "top_up_failed",
        "top_up_limits",
        "top_up_reverted",
        "topping_up_by_card",
        "transaction_charged_twice",
        "transfer_fee_charged",
        "transfer_into_account",
        "transfer_not_received_by_recipient",
        "transfer_timing",
        "unable_to_verify_identity",
        "verify_my_identity",
        "verify_source_of_funds",
        "verify_top_up",
        "virtual_card_not_working",
        "visa_or_mastercard",
        "why_verify_identity",
        "wrong_amount_of_cash_received",
        "wrong_exchange_rate_for_cash_withdrawal",
    ),
    "oos": (
        "accept_reservations",
        "account_blocked",
        "alarm",
        "application_status",
        "apr",
        "are_you_a_bot",
        "balance",
        "bill_balance",
        "bill_due",
        "book_flight",
        "book_hotel",
        "calculator",
        "calendar",
        "calendar_update",
        "calories",
        "cancel",
        "cancel_reservation",
        "car_rental",
        "card_declined",
        "carry_on",
        "change_accent",
        "change_ai_name",
        "change_language",
        "change_speed",
        "change_user_name",
        "change_volume",
        "confirm_reservation",
        "cook_time",
        "credit_limit",
        "credit_limit_change",
        "credit_score",
        "current_location",
        "damaged_card",
        "date",
        "definition",
        "direct_deposit",
        "directions",
        "distance",
        "do_you_have_pets",
        "exchange_rate",
        "expiration_date",
        "find_phone",
        "flight_status",
        "flip_coin",
        "food_last",
        "freeze_account",
        "fun_fact",
        "gas",
        "gas_type",
        "goodbye",
        "greeting",
        "how_busy",
        "how_old_are_you",
        "improve_credit_score",
        "income",
        "ingredient_substitution",
        "ingredients_list",
        "insurance",
        "insurance_change",
        "interest_rate",
        "international_fees",
        "international_visa",
        "jump_start",
        "last_maintenance",
        "lost_luggage",
        "make_call",
        "maybe",
        "meal_suggestion",
        "meaning_of_life",
        "measurement_conversion",
        "meeting_schedule",
        "min_payment",
        "mpg",
        "new_card",
        "next_holiday",
        "next_song",
        "no",
        "nutrition_info",
        "oil_change_how",
        "oil_change_when",
        "order",
        "order_checks",
        "order_status",
        "pay_bill",
        "payday",
        "pin_change",
        "play_music",
        "plug_type",
        "pto_balance",
        "pto_request",
        "pto_request_status",
        "pto_used",
        "recipe",
        "redeem_rewards",
        "reminder",
        "reminder_update",
        "repeat",
        "replacement_card_duration",
        "report_fraud",
        "report_lost_card",
        "reset_settings",
        "restaurant_reservation",
        "restaurant_reviews",
        "restaurant_suggestion",
        "rewards_balance",
        "roll_dice",
        "rollover_401k",
        "routing",
        "schedule_maintenance",
        "schedule_meeting",
        "share_location",
        "shopping_list",
        "shopping_list_update",
        "smart_home",
        "spelling",
        "spending_history",
        "sync_device",
        "taxes",
        "tell_joke",
        "text",
        "thank_you",
        "time",
        "timer",
        "timezone",
        "tire_change",
        "tire_pressure",
        "todo_list",
        "todo_list_update",
        "traffic",
        "transactions",
        "transfer",
        "translate",
        "travel_alert",
        "travel_notification",
        "travel_suggestion",
        "uber",
        "update_playlist",
        "user_name",
        "vaccines",
        "w2",
        "weather",
        "what_are_your_hobbies",
        "what_can_i_ask_you",
        "what_is_your_name",
        "what_song",
        "where_are_you_from",
        "whisper_mode",
        "who_do_you_work_for",
        "who_made_you",
        "yes",
    ),
}
TEXTOIR_DATASETS = tuple(TEXTOIR_LABELS)
#: the known-class ratios of TEXTOIR's benchmark tables
TEXTOIR_RATIOS = (0.25, 0.5, 0.75)


def textoir_known_classes(dataset: str, known_ratio: float, seed: int) -> list[str]:
    """The known classes TEXTOIR draws for ``dataset`` at ``known_ratio`` with ``seed``.

    ``round(n * known_ratio)`` names (Python's rounding: oos at 25% knows 38 of 150)
    chosen without replacement by numpy's legacy generator seeded with ``seed``, in the
    drawn order (module docstring).

    Args:
        dataset: ``stackoverflow``, ``banking`` or ``oos``.
        known_ratio: share of the classes that are known, in ``(0, 1]``.
        seed: TEXTOIR's ``--seed`` (an integer in ``[0, 2**32)``).

    Raises:
        ValueError: an unknown dataset, a ratio outside ``(0, 1]`` or a seed numpy
            cannot take.
    """
    check_choice(dataset, "dataset", TEXTOIR_DATASETS)
    if isinstance(known_ratio, bool) or not isinstance(known_ratio, (int, float)):
        raise TypeError(f"known_ratio must be a number, got {type(known_ratio).__name__}")
    if not 0.0 < known_ratio <= 1.0:
        raise ValueError(f"known_ratio must be in (0, 1], got {known_ratio!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed!r}")
    labels = TEXTOIR_LABELS[dataset]
    n_known = max(1, round(len(labels) * known_ratio))
    drawn = np.random.RandomState(int(seed)).choice(np.array(labels), n_known, replace=False)
    return [str(name) for name in drawn]
