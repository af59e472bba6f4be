"""``Variable``: torch's pre-0.4 wrapper, which torch 0.4 merged into ``Tensor``.

Old scripts write ``Variable(x)`` and ``Variable(x, requires_grad=True)``.
As in torch since 0.4 the call returns a Tensor: a new leaf sharing ``x``'s
memory (cut from any graph ``x`` is part of), with ``requires_grad`` as
given, and ``isinstance(t, Variable)`` is True for every tensor.
``volatile=True`` warns that it has no effect (use ``no_grad()``), as torch's.
"""
from __future__ import annotations

import warnings

from .tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False, volatile=False)`` -> Tensor (see the module docstring)."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__module__}.{type(data).__name__}"
                            if type(data).__module__ != "builtins" else
                            f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with dynnets.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        t = data.detach()
        if requires_grad:
            t.requires_grad_(True)
        return t
