"""Random number generators (stands for at::CPUGeneratorImpl, ATen/CPUGeneratorImpl.h, and
``torch.manual_seed``/``torch.default_generator``).

The lab draws from numpy's PCG64 instead of torch's mt19937 + Philox, so seeded results are
reproducible within the lab but are NOT the numbers torch would produce.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Generator", "default_generator", "manual_seed", "initial_seed"]

_DEFAULT_SEED = 67280421310721  # torch's default_rng_seed_val


class Generator:
    """A seedable source of random numbers for the sampling kernels (normal_, ...)."""

    __slots__ = ("_seed", "rng")

    def __init__(self, seed: int = _DEFAULT_SEED) -> None:
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed) % 2**64  # torch accepts negative seeds and wraps them the same way
        self._seed = seed
        self.rng = np.random.Generator(np.random.PCG64(seed))
        return self

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        return self.rng.bit_generator.state

    def set_state(self, state: dict) -> Generator:
        self.rng.bit_generator.state = state
        return self

    def __repr__(self) -> str:
        return "<labsupport.aten.generator.Generator>"


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator (``torch.manual_seed``); returns it."""
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    return default_generator.initial_seed()
