"""Adversarial hard negatives for SPACL (SPEC §1.3): a generator against a discriminator.

A generator ``G`` maps an anchor embedding ``z_i`` and Gaussian noise ``xi`` to a point
on the unit sphere; a discriminator ``D`` tells the real hard positives ``P^h`` from the
generated points.  The two play

    min_G max_D  E_{z+ in P^h}[log D(z+)] + E_{z- ~ G(z_i, xi)}[log(1 - D(z-))]

so that ``G`` learns to emit points that look like hard positives — negatives that are
hard to tell apart from positives.  They enter the contrastive loss as constants.

**Decisions** (SPEC §1.3):

- ``G`` and ``D`` are two-layer MLPs in embedding space with hidden width ``2 d``
  (``G``: ``[z_i, xi] -> 2d -> d -> normalise``, ReLU; ``D``: ``z -> 2d -> 1``,
  LeakyReLU(0.2)); the noise has dimension ``d`` unless told otherwise.
- They have their own Adam optimiser (``lr=1e-3``, ``betas=(0.5, 0.999)``, the usual GAN
  setting; PyTorch's fused implementation where the device has one: the same update
  rule, one kernel per step instead of a loop over parameters), and
  :meth:`AdversarialNegatives.step` plays one ``D`` step then one ``G`` step per
  training step on *detached* embeddings, so no gradient of the game ever reaches the
  encoders.
- The generator loss is the non-saturating one, ``-E log D(G(z_i, xi))``; the
  discriminator loss is the binary cross-entropy ``-E log D(z+) - E log(1 - D(z-))``.
  At the start of the game both are near ``2 log 2`` and ``log 2``.
- ``D`` is unconditional, as in SPEC's objective; ``conditional=True`` feeds it
  ``[z, z_i]`` instead (a spacl option, not in the paper).
- Everything random — the initial weights and every noise draw — comes from one
  explicit ``torch.Generator`` whose state, with both optimisers' states, travels in
  ``state_dict()`` (``get_extra_state``), so a resumed run continues exactly.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.profiler import record_function

from spacl._validation import check_all_finite, check_flag, check_positive, check_tensor


def saved_players_shape(state_dict: dict[str, Any], prefix: str) -> tuple[int, int, int] | None:
    """``(dim, hidden, noise_dim)`` of the :class:`AdversarialNegatives` saved under
    ``prefix`` (e.g. ``"adversarial."``) in ``state_dict``, or ``None`` if none is.

    A loss that builds its players at the first call reads this when loading a
    checkpoint, to build them before their weights load.
    """
    out_key, in_key = prefix + "generator.2.weight", prefix + "generator.0.weight"
    if out_key not in state_dict or in_key not in state_dict:
        return None
    dim, hidden = state_dict[out_key].shape
    return int(dim), int(hidden), int(state_dict[in_key].shape[1] - dim)


@dataclass(frozen=True)
class PlayerOptions:
    """How a loss's :class:`AdversarialNegatives` are built: ``K_adv`` generated
    negatives per anchor (0: no game), the hidden width (``None``: ``2 d``), Adam's
    learning rate and whether the discriminator sees the anchor."""

    num_negatives: int
    hidden: int | None
    lr: float
    conditional: bool = False


def build_players(
    dim: int,
    options: PlayerOptions,
    rng: torch.Generator,
    *,
    hidden: int | None = None,
    noise_dim: int | None = None,
) -> AdversarialNegatives:
    """New players for embeddings of width ``dim`` as ``options`` says (``hidden`` and
    ``noise_dim``: a checkpoint's, else the options' and the default), their weights
    and noise seeded by one draw from ``rng``.

    Takes data only (the frozen ``options`` record and the loss's generator), never
    the loss object.
    """
    seed = int(torch.randint(0, 2**62, (1,), generator=rng, device=rng.device))
    return AdversarialNegatives(
        dim,
        options.num_negatives,
        hidden=options.hidden if hidden is None else hidden,
        noise_dim=noise_dim,
        lr=options.lr,
        conditional=options.conditional,
        generator=torch.Generator().manual_seed(seed),
    )


def game_players(
    players: AdversarialNegatives | None,
    dim: int,
    options: PlayerOptions,
    rng: torch.Generator,
) -> AdversarialNegatives | None:
    """The players of a game built at its first use: ``None`` where ``options`` generate
    no negatives, else ``players`` (checked against ``dim``) or, where none are built
    yet, new ones (:func:`build_players`, one draw from ``rng``).  The caller keeps the
    new players (``self.adversarial``)."""
    if options.num_negatives == 0:
        return None
    if players is None:
        return build_players(dim, options, rng)
    if players.dim != dim:
        raise ValueError(
            f"pool has embedding dimension d={dim} but the generator was built for "
            f"embedding_dim={players.dim}"
        )
    return players


def _init_linear(layer: nn.Linear, generator: torch.Generator) -> None:
    """PyTorch's default ``nn.Linear`` initialisation, drawn from ``generator``."""
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
    bound = 1.0 / math.sqrt(layer.in_features)
    nn.init.uniform_(layer.bias, -bound, bound, generator=generator)


@functools.cache
def _has_fused_adam(device_type: str) -> bool:
    """Whether this PyTorch has a fused Adam kernel for ``device_type`` (CUDA; CPU from
    2.4 on), asked of the public constructor, which refuses a device without one."""
    probe = torch.zeros(1, device=device_type, requires_grad=True)
    try:
        torch.optim.Adam([probe], fused=True)
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


def _adam(params: Any, lr: float, betas: tuple[float, float]) -> torch.optim.Adam:
    """Adam on ``params`` (all on one device), fused where that device has the kernel."""
    params = list(params)
    fused = bool(params) and _has_fused_adam(params[0].device.type)
    return torch.optim.Adam(params, lr=lr, betas=betas, fused=True if fused else None)


def _move_optimizer_state(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Move every tensor of an optimiser's state (but Adam's CPU ``step``) to ``device``."""
    fused = _has_fused_adam(device.type)
    for group in optimizer.param_groups:
        if group.get("fused"):
            group["fused"] = fused  # a device without the fused kernel: the loop
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, Tensor) and (key != "step" or fused):
                state[key] = value.to(device)


class AdversarialNegatives(nn.Module):
    """Generator ``G`` and discriminator ``D`` that make hard negatives (SPEC §1.3).

    Args:
        dim: embedding dimension ``d``.
        num_negatives: ``K_adv``, generated negatives per anchor.
        hidden: hidden width of both MLPs (default ``2 d``).
        noise_dim: dimension of the Gaussian noise fed to ``G`` (default ``d``).
        lr: Adam learning rate of both players.
        betas: Adam betas of both players.
        conditional: feed ``D`` the anchor too (``[z, z_i]``); ``False`` follows SPEC.
        generator: source of all randomness (weights and noise); a fresh generator
            seeded with 0 if ``None``.

    Use: ``d_loss, g_loss = adv.step(anchors, positives)`` once per training step, then
    ``adv.sample(anchors) -> [B, K_adv, d]`` unit-norm negatives (no gradient).

    The game (SPACL, ICLR 2026, OpenReview 4cZvjp8Iwk, SPEC §1.3; the GAN objective of
    Goodfellow et al., NeurIPS 2014, non-saturating for ``G``)::

        min_G max_D  E_{z+ in P^h}[log D(z+)] + E_{xi ~ N(0, I)}[log(1 - D(G(z_i, xi)))]

    Example (one round on 4 anchors with 2 hard positives each, then 2 negatives each):
        >>> import torch
        >>> from spacl.mining import AdversarialNegatives
        >>> draws = torch.Generator().manual_seed(0)
        >>> adv = AdversarialNegatives(8, num_negatives=2, generator=draws)
        >>> anchors = torch.nn.functional.normalize(torch.randn(4, 8), dim=-1)
        >>> positives = torch.nn.functional.normalize(torch.randn(4, 2, 8), dim=-1)
        >>> d_loss, g_loss = adv.step(anchors, positives)  # one D step, then one G step
        >>> bool(abs(d_loss - 2 * torch.log(torch.tensor(2.0))) < 0.5)  # near 2 log 2
        True
        >>> negatives = adv.sample(anchors)
        >>> negatives.shape, torch.allclose(negatives.norm(dim=-1), torch.ones(4, 2))
        (torch.Size([4, 2, 8]), True)
    """

    def __init__(
        self,
        dim: int,
        num_negatives: int = 1,
        *,
        hidden: int | None = None,
        noise_dim: int | None = None,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.5, 0.999),
        conditional: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("dim", dim), ("num_negatives", num_negatives)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        hidden = 2 * dim if hidden is None else hidden
        noise_dim = dim if noise_dim is None else noise_dim
        for name, value in (("hidden", hidden), ("noise_dim", noise_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.dim = dim
        self.num_negatives = num_negatives
        self.hidden = hidden
        self.noise_dim = noise_dim
        self.conditional = check_flag(conditional, "conditional")
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)
        self.generator = nn.Sequential(
            nn.Linear(dim + noise_dim, hidden), nn.ReLU(), nn.Linear(hidden, dim)
        )
        d_in = 2 * dim if self.conditional else dim
        self.discriminator = nn.Sequential(
            nn.Linear(d_in, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 1)
        )
        for module in (*self.generator, *self.discriminator):
            if isinstance(module, nn.Linear):
                _init_linear(module, self.rng)
        lr = check_positive(lr, "lr")
        self.opt_g = _adam(self.generator.parameters(), lr, betas)
        self.opt_d = _adam(self.discriminator.parameters(), lr, betas)

    # -- players ---------------------------------------------------------------------------
    def _noise(self, rows: int, device: torch.device, dtype: torch.dtype) -> Tensor:
        xi = torch.randn(rows, self.noise_dim, generator=self.rng, device=self.rng.device)
        if xi.device != device and device.type == "cuda":
            # the CPU generator's draw (the same noise on every device) crosses in pinned
            # memory: the copy does not wait on the host
            return xi.pin_memory().to(device=device, dtype=dtype, non_blocking=True)
        return xi.to(device=device, dtype=dtype)

    def generate(self, anchors: Tensor) -> Tensor:
        """``[B * K_adv, d]`` unit-norm points ``G(z_i, xi)`` (anchor-major), with gradient to G."""
        a = anchors.repeat_interleave(self.num_negatives, dim=0)
        xi = self._noise(a.shape[0], a.device, a.dtype)
        out = self.generator(torch.cat((a, xi), dim=1))
        return F.normalize(out, dim=1, eps=torch.finfo(out.dtype).tiny)

    def discriminate(self, z: Tensor, anchors: Tensor | None = None) -> Tensor:
        """Logits of ``D`` (``log D / (1 - D)``), one per row of ``z``."""
        if self.conditional:
            if anchors is None:
                raise ValueError("a conditional discriminator needs the anchors")
            z = torch.cat((z, anchors), dim=1)
        return self.discriminator(z).squeeze(1)

    # -- the game --------------------------------------------------------------------------
    def _prepare(self, anchors: Tensor, name: str = "anchors", *, finite: bool = True) -> Tensor:
        check_tensor(anchors, name, ndim=2, finite=finite)
        if anchors.shape[1] != self.dim:
            raise ValueError(
                f"{name} must be [B, {self.dim}] (the generator's dim), got {tuple(anchors.shape)}"
            )
        self._follow(anchors.device)
        weight = self.generator[0].weight
        assert isinstance(weight, Tensor)
        return anchors.detach().to(dtype=weight.dtype)

    def _follow(self, device: torch.device) -> None:
        """Move the players (and their optimiser states) to ``device`` if needed."""
        if self.generator[0].weight.device != device:
            self.to(device)
            _move_optimizer_state(self.opt_g, device)
            _move_optimizer_state(self.opt_d, device)

    def step(
        self, anchors: Tensor, positives: Tensor, *, assume_finite: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Play one round: one ``D`` step, then one ``G`` step; return ``(d_loss, g_loss)``.

        Args:
            anchors: ``[B, d]`` anchor embeddings (detached here).
            positives: ``[B, P, d]`` hard positives, the "real" samples (detached here).
            assume_finite: skip the finiteness check (its host wait on a GPU), for a
                caller that checked the tensors these come from (SPACL's pool).

        Returns:
            the discriminator's loss before its update and the generator's loss against
            the updated discriminator (before the generator's update), detached scalars.
        """
        _, d_loss, g_loss = self.play(anchors, positives, assume_finite=assume_finite)
        return d_loss, g_loss

    def play(
        self, anchors: Tensor, positives: Tensor, *, assume_finite: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`step` that also returns the round's generated points ``[B, K_adv, d]``.

        The same draw ``z- = G(z_i, xi)`` serves the ``D`` step, the ``G`` step and the
        caller (as constants): one generator forward per round.
        """
        a = self._prepare(anchors, finite=False)
        check_tensor(positives, "positives", ndim=3, finite=False)
        if positives.shape[0] != a.shape[0] or positives.shape[2] != self.dim:
            raise ValueError(
                f"positives must be [{a.shape[0]}, P, {self.dim}], got {tuple(positives.shape)}"
            )
        if not assume_finite:
            check_all_finite({"anchors": anchors, "positives": positives})
        real = positives.detach().to(a.dtype).reshape(-1, self.dim)
        real_cond = fake_cond = None
        if self.conditional:
            real_cond = a.repeat_interleave(positives.shape[1], dim=0)
            fake_cond = a.repeat_interleave(self.num_negatives, dim=0)
        return self._round(anchors, a, real, None, real_cond, fake_cond)

    def play_weighted(
        self, anchors: Tensor, real: Tensor, weights: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`play` with each distinct real sample once, with its multiplicity.

        ``real[N, d]`` with ``weights[N] >= 0``: the ``D`` loss's real term is the
        weighted mean ``sum_j w_j softplus(-D(z_j)) / sum_j w_j`` — :meth:`play`'s mean
        when ``[B, P]`` real rows repeat some samples (``w_j`` = how often), the same
        round up to rounding at a fraction of the discriminator's cost.  Unconditional
        ``D`` only (a conditional one needs each row's anchor).
        """
        if self.conditional:
            raise ValueError("play_weighted needs an unconditional discriminator")
        a = self._prepare(anchors, finite=False)
        check_tensor(real, "real", ndim=2, finite=False)
        if real.shape[1] != self.dim or weights.shape != (real.shape[0],):
            raise ValueError(
                f"real must be [N, {self.dim}] and weights [N], got {tuple(real.shape)} "
                f"and {tuple(weights.shape)}"
            )
        check_all_finite({"anchors": anchors, "real": real})
        return self._round(anchors, a, real.detach().to(a.dtype), weights, None, None)

    def _round(
        self,
        anchors: Tensor,
        a: Tensor,
        real: Tensor,
        weights: Tensor | None,
        real_cond: Tensor | None,
        fake_cond: Tensor | None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One ``D`` step then one ``G`` step (:meth:`play`); ``weights`` of the real rows."""
        n_real = real.shape[0]
        with torch.enable_grad(), record_function("spacl/game"):
            fake = self.generate(a)
            fake_const = fake.detach()
            # D: maximise log D(z+) + log(1 - D(z-)), i.e. minimise the BCE
            both_cond = None
            if real_cond is not None and fake_cond is not None:
                both_cond = torch.cat((real_cond, fake_cond))
            logits = self.discriminate(torch.cat((real, fake_const)), both_cond)
            if weights is None:
                real_term = F.softplus(-logits[:n_real]).mean()
            else:
                w = weights.detach().to(logits.dtype)
                real_term = (F.softplus(-logits[:n_real]) * w).sum() / w.sum()
            d_loss = real_term + F.softplus(logits[n_real:]).mean()
            self.opt_d.zero_grad(set_to_none=True)
            d_loss.backward()
            self.opt_d.step()
            # G: non-saturating, minimise -log D(z-) against the updated D; G's weights only
            g_loss = F.softplus(-self.discriminate(fake, fake_cond)).mean()
            g_params = list(self.generator.parameters())
            grads = torch.autograd.grad(g_loss, g_params)
            for p, grad in zip(g_params, grads, strict=True):
                p.grad = grad
            self.opt_g.step()
            self.opt_g.zero_grad(set_to_none=True)
        negatives = fake_const.reshape(a.shape[0], self.num_negatives, self.dim)
        return negatives.to(anchors.dtype), d_loss.detach(), g_loss.detach()

    @torch.no_grad()
    def sample(self, anchors: Tensor, *, assume_finite: bool = False) -> Tensor:
        """``[B, K_adv, d]`` unit-norm generated negatives of each anchor (no gradient);
        ``assume_finite`` as in :meth:`step`."""
        a = self._prepare(anchors, finite=not assume_finite)
        out = self.generate(a).reshape(a.shape[0], self.num_negatives, self.dim)
        return out.to(anchors.dtype)

    def forward(self, anchors: Tensor) -> Tensor:
        """Same as :meth:`sample`."""
        return self.sample(anchors)

    # -- checkpoints -----------------------------------------------------------------------
    def get_extra_state(self) -> dict[str, Any]:
        return {
            "rng_state": self.rng.get_state(),
            "opt_g": self.opt_g.state_dict(),
            "opt_d": self.opt_d.state_dict(),
        }

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.rng.set_state(state["rng_state"])
        self.opt_g.load_state_dict(state["opt_g"])
        self.opt_d.load_state_dict(state["opt_d"])

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, num_negatives={self.num_negatives}, hidden={self.hidden}, "
            f"noise_dim={self.noise_dim}, conditional={self.conditional}"
        )
