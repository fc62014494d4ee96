"""One seed, fanned out to explicit generators by key.

Every random draw in the package comes from a generator made here from the run's ``seed`` and a
key naming its place in the run (task, seed index, stage, step ...). Two draws with different keys
are independent, and a draw never depends on what ran before it in the process, so a run that is
killed and resumed, or that skips stages already on disk, draws exactly what an uninterrupted run
draws. Nothing here touches a global generator: :func:`torch_init_seed` forks torch's global
generator for the duration of a block (layer initialisation draws from it) and restores it after.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator

import numpy as np
import torch

Key = int | str


def _entropy(seed: int, key: tuple[Key, ...]) -> list[int]:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    out = [int(seed)]
    for k in key:
        if isinstance(k, str):
            out.append(zlib.crc32(k.encode("utf-8")) + 2**32)  # a string key never equals an int key
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0:
            out.append(int(k))
        else:
            raise ValueError(f"a seed key must be a non-negative int or a str; got {k!r}")
    return out


def derive_seed(seed: int, *key: Key) -> int:
    """A 63-bit integer determined by ``seed`` and ``key`` (``numpy.random.SeedSequence``)."""
    return int(np.random.SeedSequence(_entropy(seed, key)).generate_state(2, np.uint32).astype(np.uint64)
               .dot(np.array([1, 2**32], dtype=np.uint64)) >> np.uint64(1))


def trainer_seed(seed: int, *key: Key) -> int:
    """:func:`derive_seed` cut to the 32 bits that ``transformers.set_seed`` (and so every TRL
    trainer's ``seed`` / ``data_seed``) accepts."""
    return derive_seed(seed, *key) % 2**32


def numpy_rng(seed: int, *key: Key) -> np.random.Generator:
    """A NumPy generator for the draw named ``key`` in the run seeded by ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(_entropy(seed, key)))


def torch_generator(seed: int, *key: Key, device: str | torch.device = "cpu") -> torch.Generator:
    """A torch generator (on ``device``) for the draw named ``key`` in the run seeded by ``seed``."""
    return torch.Generator(device=device).manual_seed(derive_seed(seed, *key))


@contextlib.contextmanager
def torch_init_seed(seed: int, *key: Key) -> Iterator[None]:
    """Within the block, torch's global CPU generator is seeded from ``(seed, key)`` (for layer
    initialisation, which draws from it); its previous state is restored on exit."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, *key))
        yield
