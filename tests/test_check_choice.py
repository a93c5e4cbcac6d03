"""The one "must be one of" check (:func:`spacl._validation.check_choice`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from spacl._validation import check_choice
from spacl.schema_checks import choice

SRC = Path(__file__).resolve().parents[1] / "src" / "spacl"


def test_returns_a_known_value() -> None:
    assert check_choice("exp", "mass", ("exp", "similarity")) == "exp"
    assert check_choice(2, "k", (1, 2)) == 2


def test_value_error_names_argument_value_and_options() -> None:
    with pytest.raises(ValueError, match=r"^mass must be one of \['exp', 'linear'\], got 'cubic'$"):
        check_choice("cubic", "mass", ("exp", "linear"))


def test_type_error_for_a_non_string_among_string_options() -> None:
    with pytest.raises(TypeError, match=r"mass must be a string, one of \['exp'\], got int 3"):
        check_choice(3, "mass", ("exp",))
    with pytest.raises(TypeError, match="got NoneType None"):
        check_choice(None, "mass", ["exp"])


def test_where_qualifies_the_options() -> None:
    with pytest.raises(ValueError, match=r"one of \['a'\] for a folder, got 'b'"):
        check_choice("b", "x", ["a"], where=" for a folder")


def test_config_choice_is_always_a_value_error_naming_the_key() -> None:
    want = r"config key 'optim.name' must be one of \['adam'\], got 's'"
    with pytest.raises(ValueError, match=want):
        choice("optim.name", "s", ("adam",))
    with pytest.raises(ValueError, match=r"config key 'optim.name' must be a string"):
        choice("optim.name", 3, ("adam",))


def test_losses_raise_through_the_helper() -> None:
    from spacl.losses import SupConLoss

    with pytest.raises(ValueError, match=r"variant must be one of \['out', 'in'\], got 'x'"):
        SupConLoss(variant="x")


def test_no_hand_written_choice_check_is_left() -> None:
    """Every "must be one of" message comes from the helper (grep over src/spacl)."""
    out = subprocess.run(
        ["grep", "-rn", "--include=*.py", "must be one of", str(SRC)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    hand = [
        line
        for line in out.splitlines()
        if re.search(r"must be one of \{", line) and "_validation.py" not in line
    ]
    assert not hand, "\n".join(hand)
