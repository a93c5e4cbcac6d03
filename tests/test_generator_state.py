"""Every random choice of a module travels in its ``state_dict()`` (docs/architecture.md,
"Randomness and state"): for every public loss and miner holding a ``torch.Generator``,
a fresh instance loaded with the state of an advanced one draws what that one draws next."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

import spacl.losses
import spacl.losses.kg
import spacl.mining

#: constructors for the public modules that need arguments
NEEDS_ARGUMENTS: dict[str, Callable[[], nn.Module]] = {
    "PairwiseContrastiveLoss": lambda: spacl.losses.PairwiseContrastiveLoss(temperature=0.1),
    "AdversarialNegatives": lambda: spacl.mining.AdversarialNegatives(dim=8),
    "NegativeQueue": lambda: spacl.mining.NegativeQueue(size=8, dim=4),
}

#: modules known to draw at random: the walk below must find a generator in each
RANDOM_MODULES = {
    "SPACLLoss",
    "TiltedNegativeSampler",
    "SampledHardNegativeLoss",
    "AdversarialNegatives",
    "LinkInfoNCELoss",
    "LinkSPACLLoss",
}


def public_modules() -> dict[str, Callable[[], nn.Module]]:
    found: dict[str, Callable[[], nn.Module]] = {}
    for package in (spacl.losses, spacl.losses.kg, spacl.mining):
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.isclass(obj) and issubclass(obj, nn.Module):
                found[name] = NEEDS_ARGUMENTS.get(name, obj)
    return found


def generators(module: nn.Module) -> Iterator[tuple[str, torch.Generator]]:
    for prefix, sub in module.named_modules():
        for key, value in vars(sub).items():
            if isinstance(value, torch.Generator):
                yield f"{prefix}.{key}".lstrip("."), value


def test_the_walk_finds_every_module_known_to_draw() -> None:
    with_generator = {name for name, make in public_modules().items() if any(generators(make()))}
    assert RANDOM_MODULES <= with_generator, RANDOM_MODULES - with_generator


@pytest.mark.parametrize("name", sorted(public_modules()))
def test_a_loaded_module_draws_what_the_saved_one_draws_next(name: str) -> None:
    make = public_modules()[name]
    saved = make()
    for _, gen in generators(saved):
        torch.rand(3, generator=gen)  # advance past the seed
    fresh = make()
    fresh.load_state_dict(saved.state_dict())
    pairs = list(zip(generators(saved), generators(fresh), strict=True))
    for (where, a), (_, b) in pairs:
        assert torch.equal(torch.rand(5, generator=a), torch.rand(5, generator=b)), where


def test_a_module_without_saved_state_fails_the_check() -> None:
    """The counter-example: a generator outside ``state_dict()`` is caught."""

    class Unsaved(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rng = torch.Generator().manual_seed(0)

    saved = Unsaved()
    torch.rand(3, generator=saved.rng)
    fresh = Unsaved()
    fresh.load_state_dict(saved.state_dict())
    assert not torch.equal(torch.rand(5, generator=saved.rng), torch.rand(5, generator=fresh.rng))
