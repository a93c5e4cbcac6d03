"""Counter-based seeds: every random draw in the data layer is keyed by its coordinates.

A batch's randomness is a pure function of ``(seed, epoch, step)``: we hash the key
tuple into a 63-bit seed and build a fresh CPU ``torch.Generator`` from it. Nothing
depends on how many draws happened before, so resuming at step ``k`` needs only the
step counter, and every rank of a distributed run derives the same numbers.

The hash is BLAKE2b over the key's ``repr``, so it is stable across processes,
machines and Python versions (unlike the built-in ``hash``, which is salted).
Generators are always on the CPU: CUDA and CPU generators produce different streams,
and drawing on the CPU makes batches identical whatever device trains on them.
"""

from __future__ import annotations

import hashlib

import torch

__all__ = ["derive_seed", "generator_for"]


def derive_seed(seed: int, *key: int | str) -> int:
    """Return a 63-bit seed derived from ``seed`` and the ``key`` coordinates.

    ``derive_seed(s, "batch", e, k)`` differs from ``derive_seed(s, "batch", e, k + 1)``
    and from ``derive_seed(s + 1, "batch", e, k)`` with overwhelming probability.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    for part in key:
        if not isinstance(part, (int, str)) or isinstance(part, bool):
            raise TypeError(f"seed key parts must be int or str, got {part!r}")
    text = repr((int(seed), *key)).encode()
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def generator_for(seed: int, *key: int | str) -> torch.Generator:
    """A fresh CPU ``torch.Generator`` seeded with ``derive_seed(seed, *key)``."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(derive_seed(seed, *key))
    return gen
