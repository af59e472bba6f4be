"""Flatten and Unflatten (``torch.nn.modules.flatten``)."""
from __future__ import annotations

import numpy as np

from ..autograd import ops
from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Dimensions ``start_dim..end_dim`` merged into one (as ``torch.nn.Flatten``;
    by default every dimension but the batch's first)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        for name, v in (("start_dim", start_dim), ("end_dim", end_dim)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"Flatten: {name} must be an integer, got {v!r}")
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, input):
        return ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dimension ``dim`` split into ``unflattened_size`` (as ``torch.nn.Unflatten``;
    one size may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"Unflatten: dim must be an integer (named dimensions are not supported), got {dim!r}")
        if not isinstance(unflattened_size, (tuple, list)) or not unflattened_size or not all(
                isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a non-empty tuple of integers, got "
                            f"{unflattened_size!r}")
        self.dim, self.unflattened_size = int(dim), tuple(int(s) for s in unflattened_size)

    def forward(self, input):
        shp = tuple(input.shape)
        nd = len(shp)
        if not -nd <= self.dim < nd:
            raise ValueError(f"Unflatten: dim={self.dim} is out of range for an input with {nd} dimensions")
        d = self.dim % nd
        sizes = self.unflattened_size
        if -1 not in sizes and shp[d] is not None and int(np.prod(sizes)) != shp[d]:
            raise ValueError(f"Unflatten: unflattened_size {sizes} does not multiply to input.shape[{d}]={shp[d]} "
                             f"(input.shape={shp})")
        return ops.reshape(input, *shp[:d], *sizes, *shp[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
