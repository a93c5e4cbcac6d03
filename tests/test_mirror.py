"""``mirrored_mm``: a self-similarity matmul from its upper block triangle."""

from __future__ import annotations

import pytest
import torch

from spacl.losses import _mirror
from spacl.losses._mirror import mirrored_mm


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("n", "block_rows"), [(8, 4), (21, 4), (37, 5), (600, 160), (1283, 160)])
def test_mirrored_equals_the_product(
    n: int, block_rows: int, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every entry within the rounding of a length-d dot product of the full matmul."""
    monkeypatch.setattr(_mirror, "_BLOCK_ROWS", block_rows)
    monkeypatch.setattr(_mirror, "_MIN_ROWS", 8)
    monkeypatch.setattr(_mirror, "_MAX_THREADS", 1024)
    g = torch.Generator().manual_seed(n)
    d, tau = 16, 0.07
    table = torch.randn(n, d, generator=g, dtype=torch.float64)
    table = (table / table.norm(dim=1, keepdim=True)).to(dtype)
    anchors = table / tau
    exact = anchors.double() @ table.double().T
    got = mirrored_mm(anchors, table)
    assert got.shape == (n, n) and got.dtype == dtype
    # |sum of d products| error <= d eps sum |a_k b_k| <= d eps / tau for unit rows
    bound = d * torch.finfo(dtype).eps / tau
    assert float((got.double() - exact).abs().max()) <= bound
    # the blocks below the diagonal are the transposes of those above: a symmetric matrix
    # off the diagonal blocks, and the layout matches the product's (not its transpose)
    rows = torch.arange(n)
    lower = rows.unsqueeze(1) >= rows.unsqueeze(0) + block_rows * 2
    assert torch.equal(got[lower], got.T[lower])


def test_mirrored_writes_into_a_wider_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``out``: a view of the first ``N`` columns of an ``[N, N + 3]`` buffer; the rest is
    left alone."""
    monkeypatch.setattr(_mirror, "_BLOCK_ROWS", 5)
    monkeypatch.setattr(_mirror, "_MIN_ROWS", 8)
    monkeypatch.setattr(_mirror, "_MAX_THREADS", 1024)
    table = torch.randn(23, 6, generator=torch.Generator().manual_seed(0))
    buffer = torch.full((23, 26), 7.0)
    mirrored_mm(table * 2.0, table, out=buffer[:, :23])
    torch.testing.assert_close(buffer[:, :23], (table * 2.0) @ table.T, rtol=1e-5, atol=1e-5)
    assert bool((buffer[:, 23:] == 7.0).all())


def test_mirrored_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="anchors must have the candidates' shape"):
        mirrored_mm(torch.zeros(4, 3), torch.zeros(5, 3))


def test_several_threads_take_the_plain_product() -> None:
    """Above one thread the blocks do not pay (module docstring): the plain matmul, to the bit."""
    table = torch.randn(600, 16, generator=torch.Generator().manual_seed(1))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert torch.equal(mirrored_mm(table / 0.1, table), (table / 0.1) @ table.T)
    finally:
        torch.set_num_threads(before)
