"""``dynnets.backends.mps``: Apple's GPU backend, as torch names it, for the
``"mps" if torch.backends.mps.is_available() else "cpu"`` idiom."""
from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available():
    """False: dynnets computes on the CPU only."""
    return False


def is_built():
    """False: dynnets has no MPS backend."""
    return False
