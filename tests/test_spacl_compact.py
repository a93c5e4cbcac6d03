"""Unit tests of the compact path's pieces on flat entry lists (spacl.losses.spacl.compact).

The whole compact loss is checked against the view loop in tests/test_spacl_loss.py;
here its two building blocks are checked against direct formulas: the segment
log-sum-exp of the kept negatives (with empty rows and the generated negatives) and the
flat sparse-gradient product.
"""

from __future__ import annotations

import math

import pytest
import torch

from spacl.losses.kernel import segment_logsumexp
from spacl.losses.spacl.compact import _KeptLogits

DTYPES = [torch.float32, torch.float64]


def _reference_lse(
    neg: torch.Tensor, anchor: torch.Tensor, gen: torch.Tensor | None, a: int
) -> torch.Tensor:
    """Row by row: ``log(sum_{e: anchor_e = r} e^{neg_e} + sum_j e^{gen_rj})``, ``-inf`` if none."""
    out = []
    for r in range(a):
        terms = [neg[anchor == r]]
        if gen is not None:
            terms.append(gen[r][torch.isfinite(gen[r])])
        values = torch.cat(terms)
        out.append(torch.logsumexp(values, 0) if values.numel() else neg.new_tensor(-math.inf))
    return torch.stack(out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_gen", [False, True])
def test_segment_logsumexp_matches_the_row_loop_with_empty_rows(dtype, with_gen):
    g = torch.Generator().manual_seed(3)
    a = 6
    # rows 2 and 4 keep no in-batch negative; row 4 keeps no generated one either
    anchor = torch.tensor([0, 0, 0, 1, 3, 3, 5, 5, 5, 5])
    # logits near 95: exp overflows float32 without the per-row shift
    neg = (torch.randn(anchor.shape[0], generator=g, dtype=dtype) * 10 + 95).requires_grad_(True)
    gen = None
    if with_gen:
        gen_values = torch.randn(a, 2, generator=g, dtype=dtype) * 10 + 95
        kept = torch.tensor([[1, 0], [1, 1], [0, 1], [0, 0], [0, 0], [1, 0]], dtype=torch.bool)
        gen_leaf = gen_values.requires_grad_(True)
        gen = gen_leaf.masked_fill(~kept, -math.inf)
    got = segment_logsumexp(neg, anchor, a, gen)
    want = _reference_lse(neg.detach(), anchor, None if gen is None else gen.detach(), a)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got.detach(), want, rtol=tol, atol=tol)
    empty = [2, 4] if not with_gen else [4]
    assert torch.isneginf(got[empty]).all()
    # gradient: the softmax weights of each row's terms, zero (never NaN) for empty rows
    weights = torch.randn(a, generator=g, dtype=dtype)
    finite = torch.isfinite(got)
    (got[finite] * weights[finite]).sum().backward()
    assert neg.grad is not None and torch.isfinite(neg.grad).all()
    expected = torch.exp(neg.detach() - want[anchor]) * weights[anchor]
    torch.testing.assert_close(neg.grad, expected, rtol=tol, atol=tol)
    if with_gen:
        assert gen_leaf.grad is not None and torch.isfinite(gen_leaf.grad).all()
        expected_gen = torch.where(kept, torch.exp(gen_values.detach() - want[:, None]), 0.0)
        expected_gen = expected_gen * torch.where(finite, weights, 0.0)[:, None]
        torch.testing.assert_close(gen_leaf.grad, expected_gen, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kept_logits_gradient_is_the_dense_product_at_the_entries(dtype):
    g = torch.Generator().manual_seed(5)
    a, n, d = 5, 7, 4
    online = torch.randn(a, d, generator=g, dtype=dtype, requires_grad=True)
    table = torch.randn(n, d, generator=g, dtype=dtype, requires_grad=True)
    anchor = torch.tensor([0, 0, 1, 3, 3, 3, 4])  # row 2 has no entry
    rows = torch.tensor([6, 1, 1, 0, 5, 6, 2])
    values = (online.detach()[anchor] * table.detach()[rows]).sum(1)
    out = _KeptLogits.apply(online, table, anchor, rows, values)
    torch.testing.assert_close(out, values)
    weights = torch.randn(anchor.shape[0], generator=g, dtype=dtype)
    (out * weights).sum().backward()
    # reference: the same entries through a differentiable dense product
    online_ref = online.detach().clone().requires_grad_(True)
    table_ref = table.detach().clone().requires_grad_(True)
    ((online_ref @ table_ref.T)[anchor, rows] * weights).sum().backward()
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(online.grad, online_ref.grad, rtol=tol, atol=tol)
    torch.testing.assert_close(table.grad, table_ref.grad, rtol=tol, atol=tol)
