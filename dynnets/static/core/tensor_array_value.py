"""The run-time value of a TensorArray (:class:`TensorArrayValue`): what
the executors, loop programs and gradients pass around for one, so the
compiler core handles it without the TF1 facade's
:mod:`dynnets.static.tensor_array` (its API and primitives).
"""
from __future__ import annotations

import numpy as np

__all__ = ["TensorArrayValue"]


class TensorArrayValue:
    """The run-time value of a :class:`TensorArray` (or of its gradient):
    ``items`` is a list of arrays, ``None`` for an element not written (in a
    gradient: zero). Never changed once made: every write makes a new one."""

    __slots__ = ("items", "dtype", "element_shape")

    def __init__(self, items, dtype, element_shape=None):
        self.items = items
        self.dtype = np.dtype(dtype)
        self.element_shape = element_shape     # of the elements written so far (None: none yet)

    @property
    def shape(self):
        return (len(self.items),)

    def __len__(self):
        return len(self.items)

    def __add__(self, other):
        if other is None:
            return self
        a, b = self.items, other.items
        n = max(len(a), len(b))
        out = []
        for k in range(n):
            x = a[k] if k < len(a) else None
            y = b[k] if k < len(b) else None
            out.append(y if x is None else x if y is None else x + y)
        return TensorArrayValue(out, self.dtype, self.element_shape or other.element_shape)

    __radd__ = __add__

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # gradient sums (add_n) call np.add on their terms
        if ufunc is np.add and method == "__call__" and len(inputs) == 2 and not kwargs.get("out"):
            return inputs[0] + inputs[1] if isinstance(inputs[0], TensorArrayValue) else inputs[1] + inputs[0]
        return NotImplemented

    def zeros(self):
        """The zero gradient of this value."""
        return TensorArrayValue([None] * len(self.items), self.dtype, self.element_shape)

    def __repr__(self):
        return f"TensorArrayValue(size={len(self.items)}, dtype={self.dtype}, element_shape={self.element_shape})"
