"""What an operand is to the ops: concrete (its values exist now) or
interpreted (a static graph's value, whose values exist only when its graph
runs).

A value says which it is through the engine's interpreter protocol: its class
names the interpreter of the ops applied to it in ``__dynnets_interpreter__``
(see :mod:`dynnets.autograd.engine`, "interpreters"). Ops and layers written
once over both kinds convert their non-differentiable operands (indices,
masks, class targets) with :func:`as_operand`, wrap array-likes with
:func:`dynnets.autograd.tensor.tensor_like`, and read values with
:func:`concrete` only for what needs them at call time (a Python bool
result, a check of the values that can be made early, a shortcut that gives
the same result): the computation itself is one path. This is JAX's
``concrete_or_error``: the question is asked in one place, never by probing
an attribute.

This module sits beside the engine, below :mod:`dynnets.autograd.ops` and
:mod:`dynnets.autograd.tensor`: it reads the tensor class the engine was
handed (``engine.Tensor``) when called.
"""
from __future__ import annotations

import numpy as np

from . import engine as _engine

__all__ = ["interpreter_of", "is_interpreted", "as_operand", "as_value", "concrete", "require_concrete"]

_INTERP = "__dynnets_interpreter__"


def interpreter_of(x):
    """The interpreter that ``x``'s class names (a static graph value's: the
    one that appends ops to its graph), or None for tensors, arrays, numbers
    and anything else."""
    return getattr(type(x), _INTERP, None)


def is_interpreted(x) -> bool:
    """Whether ``x`` is an interpreted value (a static graph's), which has no
    values while its graph is built."""
    return getattr(type(x), _INTERP, None) is not None


def as_operand(x, dtype=None):
    """A non-differentiable operand as bind takes it: a tensor's array, an
    interpreted value unchanged, anything else ``np.asarray(x, dtype)``."""
    if isinstance(x, _engine.Tensor):
        x = x.numpy()
    elif getattr(type(x), _INTERP, None) is not None:
        return x
    return np.asarray(x, dtype=dtype) if dtype is not None or type(x) is not np.ndarray else x


def as_value(x, dtype=None):
    """``x`` for an op that takes tensors: a tensor or an interpreted value
    unchanged, anything else ``np.asarray(x, dtype)`` (a constant)."""
    if isinstance(x, _engine.Tensor) or getattr(type(x), _INTERP, None) is not None:
        return x
    return np.asarray(x, dtype=dtype)


def concrete(x):
    """``x``'s values now, as a numpy array (a tensor's array, an
    array-like converted), or None for an interpreted value."""
    if isinstance(x, _engine.Tensor):
        return x.numpy()
    if getattr(type(x), _INTERP, None) is not None:
        return None
    return np.asarray(x)


def require_concrete(who, name, x, hint=""):
    """:func:`concrete` for an argument whose values the op needs when it is
    called: an interpreted value raises a TypeError naming op ``who`` and
    argument ``name`` (``hint``: what to do instead)."""
    v = concrete(x)
    if v is None:
        raise TypeError(f"{who}: {name} must be a concrete tensor (its values are needed now), got a static graph's "
                        f"value {x!r}{hint}")
    return v
