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

from ..autograd.primitives import dtype_of
from . import operands as _core
from .graph import constant, named
from .operands import convert_operand, is_tensor

__all__ = ["convert_operand", "as_graph_value", "binary", "div", "truediv", "divide", "floordiv", "floor_div",
           "truncatediv", "mod", "floormod", "truncatemod"]


def as_graph_value(x):
    """``x`` as a graph value: a number, list or array becomes a constant
    (TF1 makes one of every argument); tensors and values are kept."""
    return x if is_tensor(x) else constant(x)


def binary(op, fn, x, y):
    """``fn(x, y)`` with the non-tensor operand converted to the tensor's dtype (TF1's rule)."""
    if is_tensor(x):
        if not is_tensor(y):
            y = convert_operand(op, "y", y, dtype_of(x))
    elif is_tensor(y):
        x = convert_operand(op, "x", x, dtype_of(y))
    return fn(x, y)


def _tensors(x, y):
    # TF1 makes both operands tensors: of two plain ones, the first a constant (ints int32, floats float32)
    return (constant(x), y) if not is_tensor(x) and not is_tensor(y) else (x, y)


def truediv(x, y, name=None):
    """``x / y`` in floating point (``tf.truediv``): integers are cast first,
    8 and 16 bits to float32, 32 and 64 bits to float64, as TF1."""
    return named(_core.truediv(*_tensors(x, y)), name)


def divide(x, y, name=None):
    """``x / y`` (``tf.divide``: :func:`truediv`)."""
    return truediv(x, y, name=name)


def floordiv(x, y, name=None):
    """``x / y`` rounded down (``tf.floordiv``, the ``//`` operator):
    integers stay integers, floats give ``floor(x / y)``."""
    return named(_core.floordiv(*_tensors(x, y)), name)


floor_div = floordiv


def div(x, y, name=None):
    """TF1's ``tf.div``, Python 2's division: integers floor-divide to an
    integer (``tf.div(-7, 2) == -4``), floats divide (:func:`floordiv` /
    :func:`truediv`)."""
    return named(_core.floordiv_ints(*_tensors(x, y)), name)


def truncatediv(x, y, name=None):
    """``x / y`` rounded toward zero (``tf.truncatediv``, C's integer division)."""
    return named(_core.truncatediv(*_tensors(x, y)), name)


def floormod(x, y, name=None):
    """``x - floor(x / y) * y``: the remainder with the divisor's sign
    (``tf.floormod`` / ``tf.mod``, Python's ``%``)."""
    return named(_core.floormod(*_tensors(x, y)), name)


mod = floormod


def truncatemod(x, y, name=None):
    """The remainder with the dividend's sign (``tf.truncatemod``, C's ``fmod``)."""
    return named(_core.truncatemod(*_tensors(x, y)), name)
