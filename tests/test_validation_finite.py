"""The finiteness checks of :mod:`spacl._validation`: one reduction for several
tensors (one host wait on a GPU), the one-by-one check only to name the culprit."""

from __future__ import annotations

import math

import pytest
import torch

from spacl._validation import check_all_finite


def test_check_all_finite_one_reduction_names_the_culprit() -> None:
    big = torch.full((4,), 3e38)  # finite float32 values whose sums overflow
    check_all_finite({"a": big, "b": big.double(), "none": None, "empty": torch.empty(0)})
    bad = torch.zeros(5, dtype=torch.float64)
    bad[3] = math.nan
    with pytest.raises(ValueError, match="b contains 1 non-finite"):
        check_all_finite({"a": big, "b": bad})
    with pytest.raises(ValueError, match="a contains 2 non-finite"):
        check_all_finite({"a": torch.tensor([math.inf, -math.inf]), "b": bad})
