"""The generator/discriminator game of SPACL (SPEC §1.3)."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F

from spacl.mining import AdversarialNegatives


@pytest.fixture
def one_thread():
    """Tiny matmuls: one thread avoids OpenMP spin-waits on a shared, loaded CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def toy_batch(g: torch.Generator, centre: torch.Tensor, b: int = 32, p: int = 2):
    """Anchors in a cap around ``centre`` and their hard positives close to them."""
    d = centre.shape[0]
    anchors = F.normalize(centre + 0.1 * torch.randn(b, d, generator=g), dim=1)
    positives = F.normalize(anchors.unsqueeze(1) + 0.2 * torch.randn(b, p, d, generator=g), dim=2)
    return anchors, positives


def test_shapes_unit_norm_and_no_gradient() -> None:
    adv = AdversarialNegatives(6, num_negatives=3)
    a = torch.randn(5, 6, requires_grad=True)
    out = adv.sample(a)
    assert out.shape == (5, 3, 6)
    torch.testing.assert_close(out.norm(dim=2), torch.ones(5, 3))
    assert not out.requires_grad
    assert out.dtype == a.dtype
    out64 = adv.sample(a.double())
    assert out64.dtype == torch.float64


def test_deterministic_under_a_generator() -> None:
    def run(seed: int) -> list[torch.Tensor]:
        adv = AdversarialNegatives(8, 2, generator=torch.Generator().manual_seed(seed))
        g = torch.Generator().manual_seed(0)
        a, p = toy_batch(g, F.normalize(torch.ones(8), dim=0), b=6)
        neg, d_loss, g_loss = adv.play(a, p)
        return [
            *(t.detach().clone() for t in adv.state_dict().values() if isinstance(t, torch.Tensor)),
            neg,
            d_loss,
            g_loss,
            adv.sample(a),
        ]

    first, second, other = run(3), run(3), run(4)
    for x, y in zip(first, second, strict=True):
        assert torch.equal(x, y)
    assert not torch.equal(first[0], other[0])


def test_losses_are_the_bce_of_the_game() -> None:
    """``d_loss = -mean log D(z+) - mean log(1 - D(z-))``, ``g_loss = -mean log D(z-)`` (new D)."""
    adv = AdversarialNegatives(4, 2, generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(2)
    a, p = toy_batch(g, F.normalize(torch.ones(4), dim=0), b=5)
    twin = AdversarialNegatives(4, 2, generator=torch.Generator().manual_seed(1))
    fake = twin.sample(a).reshape(-1, 4)  # the same noise draw as play() will use
    with torch.no_grad():
        sig_real = torch.sigmoid(adv.discriminate(p.reshape(-1, 4)))
        sig_fake = torch.sigmoid(adv.discriminate(fake))
    want_d = -(sig_real.log().mean() + (1 - sig_fake).log().mean())
    neg, d_loss, g_loss = adv.play(a, p)
    torch.testing.assert_close(neg.reshape(-1, 4), fake)
    torch.testing.assert_close(d_loss, want_d, rtol=1e-5, atol=1e-6)
    with torch.no_grad():  # D has been updated once; G not yet at the time g_loss was taken
        want_g = -torch.sigmoid(adv.discriminate(fake)).log().mean()
    torch.testing.assert_close(g_loss, want_g, rtol=1e-5, atol=1e-6)


def test_step_touches_only_its_own_players() -> None:
    adv = AdversarialNegatives(4, 1)
    encoder = torch.nn.Linear(4, 4)
    x = torch.randn(6, 3, 4)
    z = F.normalize(encoder(x), dim=2)
    g_before = [p.detach().clone() for p in adv.generator.parameters()]
    d_before = [p.detach().clone() for p in adv.discriminator.parameters()]
    adv.step(z[:, 0], z[:, 1:])
    assert all(p.grad is None for p in encoder.parameters())
    assert all(
        not torch.equal(p, q) for p, q in zip(adv.generator.parameters(), g_before, strict=True)
    )
    assert all(
        not torch.equal(p, q) for p, q in zip(adv.discriminator.parameters(), d_before, strict=True)
    )


def test_the_game_moves_like_a_gan_and_generated_negatives_get_hard(one_thread: None) -> None:
    """On a fixed toy: D starts ahead, G catches up, the two then pull against each other
    around the equilibrium (2 log 2, log 2), and the generated negatives move from random
    directions to the hard positives' region."""
    torch.manual_seed(0)
    d, steps = 16, 300
    g = torch.Generator().manual_seed(0)
    centre = F.normalize(torch.randn(d, generator=g), dim=0)
    adv = AdversarialNegatives(d, 2, lr=2e-3, generator=torch.Generator().manual_seed(1))
    d_hist, g_hist, sim_hist = [], [], []
    for _ in range(steps):
        a, p = toy_batch(g, centre)
        neg, d_loss, g_loss = adv.play(a, p)
        d_hist.append(float(d_loss))
        g_hist.append(float(g_loss))
        sim_hist.append(float(torch.einsum("bkd,bpd->bkp", neg, p).mean()))
    dl, gl, sim = torch.tensor(d_hist), torch.tensor(g_hist), torch.tensor(sim_hist)
    # start: both near the values of an untrained game
    assert abs(dl[0] - 2 * math.log(2)) < 0.1 and abs(gl[0] - math.log(2)) < 0.1
    # early phase: D is ahead (G's loss above log 2), then G learns to fool it
    assert gl[:5].mean() > gl[25:75].mean() + 0.02
    assert dl[:5].mean() < dl[25:75].mean() - 0.01
    # later: a tug of war around the equilibrium; when one player gains the other loses
    assert abs(dl[100:].mean() - 2 * math.log(2)) < 0.15
    assert abs(gl[100:].mean() - math.log(2)) < 0.15
    assert torch.corrcoef(torch.stack([dl[100:], gl[100:]]))[0, 1] < -0.5
    # generated negatives: from unrelated directions to the hard positives' region
    _, p = toy_batch(g, centre)
    _, p2 = toy_batch(g, centre)
    real_to_real = float(torch.einsum("bkd,bpd->bkp", p2, p).mean())
    assert sim[:3].mean() < 0.1
    assert sim[-50:].mean() > 0.7 * real_to_real > 0.3


def test_state_dict_round_trip_continues_exactly() -> None:
    g = torch.Generator().manual_seed(0)
    centre = F.normalize(torch.ones(6), dim=0)
    batches = [toy_batch(g, centre, b=4) for _ in range(5)]
    a = AdversarialNegatives(6, 2, conditional=True, generator=torch.Generator().manual_seed(7))
    for x, p in batches[:3]:
        a.play(x, p)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    b = AdversarialNegatives(6, 2, conditional=True, generator=torch.Generator().manual_seed(99))
    b.load_state_dict(torch.load(buffer, weights_only=True))
    for x, p in batches[3:]:
        for got, want in zip(b.play(x, p), a.play(x, p), strict=True):
            assert torch.equal(got, want)


def test_bad_inputs() -> None:
    adv = AdversarialNegatives(4)
    with pytest.raises(ValueError, match=r"\[B, 4\]"):
        adv.sample(torch.randn(3, 5))
    with pytest.raises(ValueError, match="non-finite"):
        adv.sample(torch.full((3, 4), math.nan))
    with pytest.raises(ValueError, match="positives"):
        adv.step(torch.randn(3, 4), torch.randn(2, 2, 4))
    with pytest.raises(ValueError, match="num_negatives"):
        AdversarialNegatives(4, 0)
    with pytest.raises(ValueError, match="dim"):
        AdversarialNegatives(0)
    with pytest.raises(ValueError, match="lr"):
        AdversarialNegatives(4, lr=-1.0)


def test_play_weighted_is_play_on_the_repeated_rows() -> None:
    """Distinct real samples with multiplicities play the same round as the repeated rows."""
    g = torch.Generator().manual_seed(3)
    b, p, d = 6, 4, 8
    anchors = F.normalize(torch.randn(b, d, generator=g), dim=1)
    distinct = F.normalize(torch.randn(b, 2, d, generator=g), dim=2)
    # each row: its first sample three times, its second once
    repeated = torch.stack((distinct[:, 0], distinct[:, 0], distinct[:, 1], distinct[:, 0]), 1)
    assert repeated.shape == (b, p, d)
    one = AdversarialNegatives(d, 2, generator=torch.Generator().manual_seed(9))
    two = AdversarialNegatives(d, 2, generator=torch.Generator().manual_seed(9))
    for _ in range(3):
        gen_a, dl_a, gl_a = one.play(anchors, repeated)
        weights = torch.tensor([3.0, 1.0]).repeat(b)
        gen_b, dl_b, gl_b = two.play_weighted(anchors, distinct.reshape(-1, d), weights)
        torch.testing.assert_close(gen_a, gen_b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(dl_a, dl_b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(gl_a, gl_b, rtol=1e-5, atol=1e-6)
    for pa, pb in zip(one.parameters(), two.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="weights"):
        two.play_weighted(anchors, distinct.reshape(-1, d), torch.ones(3))


def test_one_finiteness_check_names_the_bad_input() -> None:
    """play checks its anchors and positives with one reduction (one host wait on a
    GPU); a non-finite entry in either is still named."""
    adv = AdversarialNegatives(4)
    good_a, good_p = torch.randn(3, 4), torch.randn(3, 2, 4)
    bad_p = good_p.clone()
    bad_p[2, 1, 3] = math.inf
    with pytest.raises(ValueError, match="positives contains 1 non-finite"):
        adv.step(good_a, bad_p)
    bad_a = good_a.clone()
    bad_a[0, 0] = math.nan
    with pytest.raises(ValueError, match="anchors contains 1 non-finite"):
        adv.step(bad_a, good_p)
