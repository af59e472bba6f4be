"""TF1's arithmetic on graph values: operand conversion and division.

Two TF1 rules that eager dynnets (PyTorch's) does not share:

* **Operand conversion.** A binary op converts its non-tensor operand (a
  number, a list, a numpy array) to the *tensor* operand's dtype, as TF1's
  ``convert_to_tensor(y, dtype_hint=x.dtype)``: ``tf.constant([2.]) +
  np.array([3.])`` is float32, not float64. What does not fit raises, as TF1
  (``tf.constant([1]) + 2.5``: TypeError). TF1 casts a numpy operand with
  ``astype`` even where that changes its values (2.7 into int32 is 2); here
  that is an error instead of a silent truncation.
* **Division.** ``tf.div`` (and ``/`` in Python 2) floor-divides integers to
  an integer; ``tf.truediv`` / ``tf.divide`` / ``/`` divide integers in
  float32 (8 and 16 bits) or float64 (32 and 64 bits); ``tf.floordiv`` /
  ``//`` round down; ``tf.truncatediv`` rounds toward zero; ``tf.mod`` /
  ``tf.floormod`` / ``%`` take the divisor's sign, ``tf.truncatemod`` the
  dividend's.

Inside :func:`dynnets.static.trace` the operators keep eager (PyTorch)
semantics: traced code is eager code.
"""
from __future__ import annotations

import numpy as np

from ..autograd import ops as _ops
from ..autograd.primitives import DTypeError, dtype_of
from .graph import constant, named

__all__ = ["convert_operand", "as_graph_value", "binary", "div", "truediv", "divide", "floordiv", "floor_div", "truncatediv", "mod",
           "floormod", "truncatemod"]


def _is_tensor(x):
    return hasattr(x, "_is_symbolic") or hasattr(x, "requires_grad")


def convert_operand(op, arg, y, dtype):
    """``y`` (a number, list or numpy array) as a numpy array of ``dtype``,
    as TF1's ``convert_to_tensor(y, dtype)`` inside a binary op; tensors and
    values are returned unchanged.

    Raises ``TypeError`` when ``y`` does not fit ``dtype`` (a float into an
    integer dtype, a number into bool, an integer out of range, a numpy value
    that the cast would change)."""
    if _is_tensor(y):
        return y
    dtype = np.dtype(dtype)
    if isinstance(y, (np.ndarray, np.generic)):
        a = np.asarray(y)
        if a.dtype == dtype:
            return y
    else:
        a = np.asarray(y)
        if a.dtype.kind not in "biufc":
            raise TypeError(f"{op}: {arg} must be a number, a list of numbers or an array, got {y!r}")
        # Python floats never go into an integer or bool tensor (TF1: "Expected int32, got 2.5 of type 'float'")
        if dtype.kind in "iu" and a.dtype.kind not in "iub" or dtype.kind == "b" and a.dtype.kind != "b":
            raise TypeError(f"{op}: expected {dtype.name} for {arg} (the other operand's dtype), got {y!r} of type "
                            f"{type(y).__name__}; cast one operand first (tf.cast)")
    if dtype.kind in "iub" and a.dtype.kind in "fc" or dtype.kind in "iu" and a.dtype.kind in "iu" \
            or dtype.kind in "iu" and a.dtype.kind == "b" or dtype.kind == "f" and a.dtype.kind == "c":
        with np.errstate(all="ignore"):
            out = a.astype(dtype)
        if not np.array_equal(out, a):
            raise TypeError(f"{op}: {arg}={y!r} does not fit the other operand's dtype {dtype.name} (TF1 converts "
                            f"the operand to that dtype); cast one operand first (tf.cast)")
    else:
        out = a.astype(dtype)
    # a Python number stays one once it fits: the ops treat it as a weak scalar of the tensor's dtype (and the
    # native tier compiles a constant exponent only from a number)
    if out.ndim == 0:
        return y if isinstance(y, (int, float, bool)) else out[()]
    return out


def as_graph_value(x):
    """``x`` as a graph value: a number, list or array becomes a constant
    (TF1 makes one of every argument); tensors and values are kept."""
    return x if _is_tensor(x) else constant(x)


def binary(op, fn, x, y):
    """``fn(x, y)`` with the non-tensor operand converted to the tensor's dtype (TF1's rule)."""
    if _is_tensor(x):
        if not _is_tensor(y):
            y = convert_operand(op, "y", y, dtype_of(x))
    elif _is_tensor(y):
        x = convert_operand(op, "x", x, dtype_of(y))
    return fn(x, y)


def _pair(op, x, y):
    if not _is_tensor(x) and not _is_tensor(y):
        x = constant(x)         # TF1 makes both operands tensors: Python ints int32, floats float32
    if _is_tensor(x):
        return x, convert_operand(op, "y", y, dtype_of(x))
    return convert_operand(op, "x", x, dtype_of(y)), y


def _same(op, x, y):
    """``x, y`` with a non-tensor operand converted, and their common dtype:
    integers of two widths promote to the wider (TF1 would raise); two values
    of other different dtypes give ``None`` and the eager op's promotion."""
    x, y = _pair(op, x, y)
    dx = np.dtype(dtype_of(x) if _is_tensor(x) else dtype_of(y))
    dy = np.dtype(dtype_of(y) if _is_tensor(y) else dx)
    if dx == dy:
        return x, y, dx
    if dx.kind in "iu" and dy.kind in "iu":
        return x, y, np.promote_types(dx, dy)
    return x, y, None


def _named(out, name):
    return named(out, name)


def truediv(x, y, name=None):
    """``x / y`` in floating point (``tf.truediv``): integers are cast first,
    8 and 16 bits to float32, 32 and 64 bits to float64, as TF1."""
    x, y, dt = _same("truediv", x, y)
    if dt is not None and dt.kind in "iu":
        ft = np.float32 if dt.itemsize <= 2 else np.float64
        x, y = _ops.astype(x, ft), _ops.astype(y, ft)
    elif dt is not None and dt.kind == "b":
        raise DTypeError("truediv: x and y have dtype bool, which truediv does not take")
    return _named(_ops.div(x, y), name)


def divide(x, y, name=None):
    """``x / y`` (``tf.divide``: :func:`truediv`)."""
    return truediv(x, y, name=name)


def floordiv(x, y, name=None):
    """``x / y`` rounded down (``tf.floordiv``, the ``//`` operator):
    integers stay integers, floats give ``floor(x / y)``."""
    x, y, dt = _same("floordiv", x, y)
    return _named(_ops.floor_divide(x, y), name)


floor_div = floordiv


def div(x, y, name=None):
    """TF1's ``tf.div``, Python 2's division: integers floor-divide to an
    integer (``tf.div(-7, 2) == -4``), floats divide (:func:`floordiv` /
    :func:`truediv`)."""
    x, y, dt = _same("div", x, y)
    if dt is not None and dt.kind in "iu":
        return _named(_ops.floor_divide(x, y), name)
    return _named(_ops.div(x, y), name)


def truncatediv(x, y, name=None):
    """``x / y`` rounded toward zero (``tf.truncatediv``, C's integer division)."""
    x, y, dt = _same("truncatediv", x, y)
    return _named(_ops.div(x, y, rounding_mode="trunc"), name)


def floormod(x, y, name=None):
    """``x - floor(x / y) * y``: the remainder with the divisor's sign
    (``tf.floormod`` / ``tf.mod``, Python's ``%``)."""
    x, y, dt = _same("floormod", x, y)
    return _named(_ops.remainder(x, y), name)


mod = floormod


def truncatemod(x, y, name=None):
    """The remainder with the dividend's sign (``tf.truncatemod``, C's ``fmod``)."""
    x, y, dt = _same("truncatemod", x, y)
    return _named(_ops.fmod(x, y), name)
