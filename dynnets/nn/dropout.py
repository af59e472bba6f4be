"""Dropout (``torch.nn.modules.dropout``)."""
from __future__ import annotations

import numpy as np

from . import functional as F
from .module import Module, as_generator

__all__ = ["Dropout"]


class Dropout(Module):
    """Inverted dropout (as ``torch.nn.Dropout``): in training mode each element
    is zeroed with probability ``p`` and the rest scaled by 1/(1-p); in eval
    mode it is the identity.

    Parameters
    ----------
    p : float in [0, 1]
    inplace : bool
        As torch: in training mode the mask is applied to the input itself,
        which is returned (see :func:`dynnets.nn.functional.dropout`).
    rng : int, Generator or None (keyword-only)
        Draws the masks. A Generator is used as is (shared with the caller), a
        seed makes a private one, so a run with the same seed repeats. None
        (the default): each training-mode call draws its mask from the default
        generator at that moment (as PyTorch), so ``dynnets.manual_seed``
        fixes the masks even when called after the module was built.
    """

    def __init__(self, p=0.5, inplace=False, *, rng=None):
        super().__init__()
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.floating)) \
                or not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)
        self.inplace = bool(inplace)
        self.rng = None if rng is None else as_generator(rng)

    def forward(self, x):
        """x (any shape) -> same shape."""
        return F.dropout(x, self.p, self.training, self.inplace, generator=self.rng)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
