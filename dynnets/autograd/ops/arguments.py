"""The argument conventions the ops share: torch's ``dim=`` beside numpy's
``axis=``, integer arguments given as Python, numpy or one-element tensor
integers, numpy scalars bound as the Python numbers torch takes them for, and
the shapes ``f(2, 3)`` and ``f((2, 3))`` alike. None of these is an op; each
raises with the op's name (DESIGN.md rule 6)."""
from __future__ import annotations

import builtins

import numpy as np

from .. import primitives as P
from ..engine import bind2

__all__ = ["shape_tuple", "array_of", "dtype_of", "python_number", "dim_or_axis", "normalized_axis", "int_arg",
           "truth", "known_dim"]


def shape_tuple(shape):
    """The shape of ``f(*shape)``, as ``zeros(2, 3)`` and ``zeros((2, 3))`` both take it."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def array_of(x):
    """A tensor's array (its ``numpy()``); anything else (an array, a
    symbolic value, an int) unchanged."""
    return x.numpy() if getattr(type(x), "_is_tensor", False) else x


def dtype_of(a):
    """``a``'s dtype: a tensor's, a value's, an array's or a Python number's (as numpy reads it)."""
    d = getattr(a, "dtype", None)
    return np.asarray(a).dtype if d is None else np.dtype(d)


def python_number(v):
    """A numpy scalar bound as the Python number torch takes it for."""
    return v.item() if isinstance(v, np.generic) else v


def dim_or_axis(op, axis, dim):
    """PyTorch's ``dim=`` beside numpy's ``axis=`` (one of them)."""
    if dim is None:
        return axis
    if axis is not None:
        raise TypeError(f"{op}: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
    return dim


def normalized_axis(op, axis, ndim):
    """``axis`` of an input with ``ndim`` dimensions, as a non-negative axis."""
    if not -ndim <= axis < ndim:
        raise P.ShapeError(f"{op}: axis {axis} is out of range for an input with {ndim} dimensions")
    return axis % ndim


def int_arg(op, name, v):
    """An integer argument (a Python or numpy int, or a one-element integer tensor), as a Python int."""
    if getattr(type(v), "_is_tensor", False) or isinstance(v, np.ndarray):
        a = np.asarray(v)
        if a.size == 1 and a.dtype.kind in "iu":
            return int(a.reshape(()))
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, got {v!r}")
    return int(v)


def truth(op, input):
    """``input != 0`` (``input`` itself when boolean)."""
    dt = np.dtype(input.dtype)
    if dt.kind == "b":
        return input
    if dt.kind not in "iufc":
        raise P.DTypeError(f"{op}: expected a numeric or boolean input, got dtype {dt}")
    return bind2(P.not_equal_p, input, 0)


def known_dim(op, input, dim):
    """``dim`` of ``input`` as a non-negative axis with its (known) size; a
    0-d input has dimension 0 of size 1 where torch allows it."""
    shape = tuple(input.shape)
    nd = len(shape)
    d = int_arg(op, "dim", dim)
    if not -builtins.max(nd, 1) <= d < builtins.max(nd, 1):
        raise P.IndexRangeError(f"{op}: dimension out of range (expected to be in range of "
                                f"[{-builtins.max(nd, 1)}, {builtins.max(nd, 1) - 1}], but got {d})")
    d %= builtins.max(nd, 1)
    n = shape[d] if nd else 1
    if n is None:
        raise P.ShapeError(f"{op}: dimension {d} of input.shape={shape} must be known")
    return d, n
