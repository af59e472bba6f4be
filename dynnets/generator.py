"""``dynnets.Generator``: torch's generator objects, as numpy generators.

A :class:`Generator` *is* a ``numpy.random.Generator`` (PCG64), so it goes
wherever dynnets takes ``rng=`` or ``generator=``, and it has torch's
methods: ``manual_seed`` (returning the generator, so
``random_split(ds, [0.8, 0.2], generator=Generator().manual_seed(42))``
works), ``seed``, ``initial_seed``, ``get_state`` / ``set_state``. As
torch's, a new generator starts from a fixed seed (torch's default,
67280421310721), so it repeats its numbers from run to run until seeded;
the numbers are numpy's, not torch's.
"""
from __future__ import annotations

import numpy as np

from .devices import check_device

__all__ = ["Generator", "DEFAULT_SEED"]

#: The seed of a new generator (torch's ``default_rng_seed_val``).
DEFAULT_SEED = 67280421310721


class Generator(np.random.Generator):
    """A ``numpy.random.Generator`` with torch's ``Generator`` methods.

    Parameters
    ----------
    device : str or device
        ``"cpu"`` (the only device there is; another raises
        :class:`~dynnets.devices.DeviceUnavailableError`).
    """

    def __init__(self, device="cpu"):
        self.device = check_device(device, "Generator")
        self._seed = DEFAULT_SEED
        super().__init__(np.random.PCG64(DEFAULT_SEED))

    def manual_seed(self, seed):
        """Reseed (the stream of ``numpy.random.default_rng(seed)``) and return self."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"Generator.manual_seed: seed must be a non-negative integer, got {seed!r}")
        self.bit_generator.state = np.random.PCG64(int(seed)).state
        self._seed = int(seed)
        return self

    def seed(self):
        """Reseed from fresh OS entropy; returns the seed used."""
        s = int(np.random.SeedSequence().entropy)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        """The seed this generator was last seeded with."""
        return self._seed

    def get_state(self):
        """The generator's state (a dict; restore it with :meth:`set_state`)."""
        return self.bit_generator.state

    def set_state(self, state):
        """Restore a state from :meth:`get_state`; returns self."""
        self.bit_generator.state = state
        return self
