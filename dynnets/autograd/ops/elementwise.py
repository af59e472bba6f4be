"""Elementwise ops: arithmetic, maths, comparisons, clamps, rounding and
remainders, logical ops, dtype conversions (``astype``, ``to``, ``type_as``),
with PyTorch's type promotion (:func:`promoted`), which the other domains'
ops and :class:`~dynnets.autograd.tensor.TensorOps`' operators call too.

Every op takes tensors, symbolic static values and lazy values alike and
broadcasts as numpy (and torch) do; the shapes of the result are the
broadcast of the operands'."""
from __future__ import annotations

import builtins

import numpy as np

from .. import primitives as P
from ...devices import check_device
from ..engine import bind, bind1, bind2
from ..values import require_concrete
from .arguments import dtype_of, int_arg, python_number

__all__ = ["promoted", "add", "sub", "mul", "div", "pow", "neg", "exp", "log", "tanh", "sigmoid", "relu", "sqrt",
           "sin", "cos", "sign", "abs", "clip", "maximum", "minimum", "square", "astype", "clone", "less",
           "less_equal", "greater", "greater_equal", "eq", "not_equal", "ne", "lt", "le", "gt", "ge", "equal",
           "allclose", "clamp", "clamp_min", "clamp_max", "type_as", "to", "cpu", "round", "remainder", "fmod",
           "floor_divide", "logical_not", "logical_and", "logical_or", "logical_xor", "log1p", "expm1", "isnan",
           "isinf", "isfinite"]


# --- PyTorch's type promotion ---------------------------------------------------
#
# The elementwise, where, clip and concat primitives compute in numpy's result
# dtype, and their shape rules raise PromotionNeeded where PyTorch's type
# promotion gives another (int64 * 1.5 is float32 in torch, float64 in numpy;
# int / int is float32; exp of an integer is float32). The ops below catch it
# and bind again on operands cast to torch's dtype: operands of one dtype, the
# usual case, pay nothing (a try block is free in Python 3.11), and a static
# graph gets explicit casts.

_PY_NUMBERS = (bool, int, float, complex)
_TO_FLOAT = frozenset({"div", "exp", "log", "tanh", "sigmoid", "sqrt", "sin", "cos"})


def _cast(a, dt):
    """Operand ``a`` in dtype ``dt``: Python numbers stay (numpy keeps them
    weak), arrays are converted, tensors and static values get an ``astype``
    (through which the gradient flows back in their own dtype)."""
    if type(a) in _PY_NUMBERS:
        return a
    if isinstance(a, (np.ndarray, np.generic, list, tuple)):
        a = np.asarray(a)
        return a if a.dtype == dt else a.astype(dt)
    return a if dtype_of(a) == dt else astype(a, dt)


def promoted(prim, *args, **attrs):
    """``bind(prim, *args, **attrs)`` on operands cast to the dtype PyTorch's
    type promotion gives them (the answer to a shape rule's PromotionNeeded).
    For ``where`` the condition, for ``clip`` the bounds are not operands."""
    name = prim.name
    if name in ("concat", "stack"):
        dts = [dtype_of(a) for a in args]
        dt = dts[0]
        for d in dts[1:]:
            dt = P.torch_promote(dt, d)
        return bind(prim, *[_cast(a, dt) for a in args], **attrs)
    if name == "where":
        c, *ops_ = args
    else:
        c, ops_ = None, args
    if builtins.any(getattr(type(a), "_is_tensor", False) for a in ops_):
        # beside an eager tensor torch takes a numpy scalar for its Python number (weak)
        ops_ = [python_number(a) for a in ops_]
    avals = [P.aval_of(a) for a in ops_]
    if name == "clip":
        avals += [P.Aval((), v) for v in (attrs.get("lo"), attrs.get("hi")) if v is not None]
    dt = P.torch_result_type(*avals)
    if name in _TO_FLOAT and dt.kind in "biu":
        dt = P.DEFAULT_FLOAT
    cast = [_cast(a, dt) for a in ops_]
    return bind(prim, *cast, **attrs) if c is None else bind(prim, c, *cast, **attrs)


# --- elementwise ---------------------------------------------------------------

def _scaled(op, other, alpha):
    """``alpha * other`` for torch's ``add(input, other, alpha=)``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: alpha must be a number, got {alpha!r}")
    return other if alpha == 1 else mul(other, python_number(alpha))


def add(input, other, *, alpha=1):
    """``input + alpha * other``, as ``torch.add``."""
    if alpha != 1:
        other = _scaled("add", other, alpha)
    try:
        return bind2(P.add_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.add_p, input, other)


def sub(input, other, *, alpha=1):
    """``input - alpha * other``, as ``torch.sub``."""
    if alpha != 1:
        other = _scaled("sub", other, alpha)
    try:
        return bind2(P.sub_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.sub_p, input, other)


def mul(input, other):
    """``input * other`` elementwise, broadcast, in torch's result dtype (as ``torch.mul``)."""
    try:
        return bind2(P.mul_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.mul_p, input, other)


def div(input, other, *, rounding_mode=None):
    """``input / other`` (true division; integers divide in float32, as
    torch's); with torch's ``rounding_mode='floor'`` / ``'trunc'`` the
    quotient rounded down / toward zero in the operands' dtype (integers
    stay integers), with a zero gradient, as torch's."""
    if rounding_mode is not None:
        return _rounded_div(input, other, rounding_mode)
    try:
        return bind2(P.div_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.div_p, input, other)


def pow(input, exponent):
    """``input ** exponent`` elementwise, broadcast (as ``torch.pow``); the gradient of the base at 0
    with exponent 0 is 0, as torch's."""
    try:
        return bind2(P.pow_p, input, exponent)
    except P.PromotionNeeded:
        return promoted(P.pow_p, input, exponent)


def neg(input):
    """``-input`` elementwise (as ``torch.neg``)."""
    return bind1(P.neg_p, input)


def exp(input):
    """``e ** input`` (an integer input in float32, as torch's)."""
    try:
        return bind1(P.exp_p, input)
    except P.PromotionNeeded:
        return promoted(P.exp_p, input)


def log(input):
    """Natural logarithm elementwise (an integer input in float32, as torch's)."""
    try:
        return bind1(P.log_p, input)
    except P.PromotionNeeded:
        return promoted(P.log_p, input)


def tanh(input):
    """Hyperbolic tangent elementwise (an integer input in float32, as torch's)."""
    try:
        return bind1(P.tanh_p, input)
    except P.PromotionNeeded:
        return promoted(P.tanh_p, input)


def sigmoid(input):
    """``1 / (1 + exp(-input))`` elementwise, computed without overflow (an integer
    input in float32, as torch's)."""
    try:
        return bind1(P.sigmoid_p, input)
    except P.PromotionNeeded:
        return promoted(P.sigmoid_p, input)


def relu(input):
    """``max(input, 0)`` elementwise, in ``input``'s dtype; the gradient at 0 is 0, as torch's."""
    return bind1(P.relu_p, input)


def sqrt(input):
    """Square root elementwise (an integer input in float32, as torch's)."""
    try:
        return bind1(P.sqrt_p, input)
    except P.PromotionNeeded:
        return promoted(P.sqrt_p, input)


def sin(input):
    """``sin(input)`` elementwise (an integer input in float32, as torch's)."""
    try:
        return bind1(P.sin_p, input)
    except P.PromotionNeeded:
        return promoted(P.sin_p, input)


def cos(input):
    """``cos(input)`` elementwise (an integer input in float32, as torch's)."""
    try:
        return bind1(P.cos_p, input)
    except P.PromotionNeeded:
        return promoted(P.cos_p, input)


def sign(input):
    """-1, 0 or 1 by the sign of each element, in ``input``'s dtype (NaN stays
    NaN), as ``torch.sign`` and TF1's ``tf.sign``; its gradient is zero."""
    return bind1(P.sign_p, input)


def abs(input):
    """``|input|`` elementwise, in ``input``'s dtype; the gradient at 0 is 0, as torch's."""
    return bind1(P.abs_p, input)


def clip(input, min=None, max=None):
    """``input`` limited to ``[min, max]`` (either may be None); numbers as
    bounds, in PyTorch's result dtype (``clip(int64, -0.5, 2.5)`` is
    float32), as ``torch.clip`` (:func:`clamp` checks ``min <= max``)."""
    lo, hi = python_number(min), python_number(max)
    try:
        return bind(P.clip_p, input, lo=lo, hi=hi)
    except P.PromotionNeeded:
        return promoted(P.clip_p, input, lo=lo, hi=hi)


def maximum(input, other):
    """The larger of ``input`` and ``other`` elementwise, broadcast (as ``torch.maximum``;
    NaN propagates); ties split the gradient evenly."""
    try:
        return bind2(P.maximum_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.maximum_p, input, other)


def minimum(input, other):
    """The smaller of ``input`` and ``other`` elementwise, broadcast (as ``torch.minimum``;
    NaN propagates); ties split the gradient evenly."""
    try:
        return bind2(P.minimum_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.minimum_p, input, other)


_BOOL_DTYPE = np.dtype(np.bool_)         # numpy's one bool dtype object


def square(input):
    """``input * input`` elementwise (as ``torch.square``: a bool input gives int64)."""
    if getattr(input, "dtype", None) is _BOOL_DTYPE:      # (an identity test: dtype == costs ~0.15 us per call)
        # torch squares as pow(x, 2), which takes a bool tensor to int64 (True * True stays bool)
        input = astype(input, np.int64)
    return bind2(P.mul_p, input, input)


def astype(x, dtype):
    """``x`` in ``dtype``; the gradient flows back through a float result
    only: an integer or boolean result does not require grad (as torch's
    ``x.long()``)."""
    dt = np.dtype(dtype)
    if dt.kind not in "fc" and getattr(x, "requires_grad", False):
        x = x.detach()
    return bind(P.astype_p, x, dtype=dt)


def clone(input):
    """A copy of ``input`` (a new array) through which gradients flow, as ``torch.clone``."""
    return bind1(P.copy_p, input)


# --- comparisons (boolean results, no gradient) -------------------------------------

def less(input, other):
    """``input < other`` elementwise, broadcast (boolean, no gradient); ``lt`` is the same function."""
    return bind2(P.less_p, input, other)


def less_equal(input, other):
    """``input <= other`` elementwise, broadcast (boolean, no gradient); ``le`` is the same function."""
    return bind2(P.less_equal_p, input, other)


def greater(input, other):
    """``input > other`` elementwise, broadcast (boolean, no gradient); ``gt`` is the same function."""
    return bind2(P.greater_p, input, other)


def greater_equal(input, other):
    """``input >= other`` elementwise, broadcast (boolean, no gradient); ``ge`` is the same function."""
    return bind2(P.greater_equal_p, input, other)


def eq(input, other):
    """``input == other`` elementwise, as ``torch.eq`` (boolean, no gradient)."""
    return bind2(P.equal_p, input, other)


def not_equal(input, other):
    """``input != other`` elementwise, broadcast (boolean, no gradient); ``ne`` is the same function."""
    return bind2(P.not_equal_p, input, other)


# torch's short names of the comparisons (torch.not_equal, torch.greater... are its aliases too)
ne = not_equal
lt = less
le = less_equal
gt = greater
ge = greater_equal


def equal(input, other):
    """True when ``input`` and ``other`` have the same shape and elements, as
    ``torch.equal`` (a Python bool; NaN equals nothing). The elementwise
    comparison is :func:`eq` (``==``). Eager values only: a static-graph
    value has no elements yet (``dynnets.static.equal`` is TF1's elementwise
    one)."""
    hint = "; torch.equal gives a Python bool: compare elementwise with eq (==) and reduce"
    a, b = require_concrete("equal", "input", input, hint), require_concrete("equal", "other", other, hint)
    return a.shape == b.shape and bool(np.all(a == b))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``|input - other| <= atol + rtol * |other|`` everywhere (the two
    broadcast), as ``torch.allclose`` (a Python bool); tensors of different
    dtypes raise, as torch's."""
    hint = " (allclose gives a Python bool)"
    a, b = require_concrete("allclose", "input", input, hint), require_concrete("allclose", "other", other, hint)
    if a.dtype != b.dtype:
        raise P.DTypeError(f"allclose: input.dtype={a.dtype} does not match other.dtype={b.dtype} (as torch; "
                           f"convert one with .to())")
    return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _bound(op, name, v):
    if v is None:
        return None
    if hasattr(v, "shape") and not isinstance(v, np.generic):     # (a numpy scalar is a number, as in torch)
        raise TypeError(f"{op}: {name} must be a number or None, got a tensor (elementwise bounds: "
                        f"dynnets.maximum / dynnets.minimum)")
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: {name} must be a number or None, got {v!r}")
    return python_number(v)


def clamp(input, min=None, max=None):
    """``input`` limited to ``[min, max]``, as ``torch.clamp`` (at least one
    bound; numbers, in PyTorch's result dtype). ``min > max`` is an error
    here, where torch sets every element to ``max``."""
    lo, hi = _bound("clamp", "min", min), _bound("clamp", "max", max)
    if lo is None and hi is None:
        raise TypeError("clamp: at least one of 'min' or 'max' must not be None")
    if lo is not None and hi is not None and lo > hi:
        raise P.ShapeError(f"clamp: min={lo} is greater than max={hi} (torch would set every element to max)")
    return clip(input, lo, hi)


def clamp_min(input, min):
    """``clamp(input, min=min)``: every element at least ``min`` (as ``torch.clamp_min``)."""
    return clamp(input, min=min)


def clamp_max(input, max):
    """``clamp(input, max=max)``: every element at most ``max`` (as ``torch.clamp_max``)."""
    return clamp(input, max=max)


# --- Tensor methods with PyTorch's names (declared in TensorOps) ---------------------

def type_as(x, other):
    """``x`` in ``other``'s dtype (``x`` itself when it already is)."""
    dt = np.dtype(other.dtype)
    return x if np.dtype(x.dtype) == dt else astype(x, dt)


def _is_dtype(v):
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return True
    if v is None or isinstance(v, str) or hasattr(v, "shape"):
        return False
    try:
        np.dtype(v)
        return True
    except TypeError:
        return False


def to(x, *args, dtype=None, device=None, non_blocking=False, copy=False):
    """``x`` in another dtype, as ``torch.Tensor.to``: ``to(dtype)``,
    ``to('cpu')``, ``to('cpu', dtype)``, ``to(other)`` (its dtype; its device
    is the CPU), ``to(device=, dtype=)``. ``x`` itself when nothing changes
    (a copy with ``copy=True``); a device other than the CPU raises
    :class:`~dynnets.devices.DeviceUnavailableError`."""
    if len(args) > 2:
        raise TypeError(f"to: expected at most a device and a dtype, got {len(args)} arguments")
    for a in args:
        if _is_dtype(a):
            if dtype is not None:
                raise TypeError(f"to: got the dtype twice ({dtype!r} and {a!r})")
            dtype = a
        elif hasattr(a, "shape") and hasattr(a, "dtype"):
            dtype = a.dtype
        else:
            if device is not None:
                raise TypeError(f"to: got the device twice ({device!r} and {a!r})")
            device = a
    if device is not None:
        check_device(device, "Tensor.to")
    out = x if dtype is None or np.dtype(dtype) == np.dtype(x.dtype) else astype(x, np.dtype(dtype))
    return clone(out) if copy and out is x else out


def cpu(x):
    """``x`` itself (dynnets runs on the CPU), as ``torch.Tensor.cpu``."""
    return x


def round(input, *, decimals=0):
    """``input`` rounded to ``decimals`` decimal places, halves to even, as
    ``torch.round`` (``round(2.5) == 2``); integer tensors are returned
    unchanged (with ``decimals=0``). The gradient is zero, as torch's."""
    d = int_arg("round", "decimals", decimals)
    return bind1(P.round_p, input) if d == 0 else bind(P.round_p, input, decimals=d)


def remainder(input, other):
    """Python's ``input % other``: the sign of the divisor, as
    ``torch.remainder`` and the ``%`` operator; integer operands stay
    integers (a zero divisor raises), mixed ones follow torch's promotion.
    Gradients: ``1`` for ``input``, ``-floor(input / other)`` for ``other``."""
    try:
        return bind2(P.remainder_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.remainder_p, input, other)


def fmod(input, other):
    """C's ``fmod``: the sign of the dividend, as ``torch.fmod``. Gradients:
    ``1`` for ``input``, ``-trunc(input / other)`` for ``other``."""
    try:
        return bind2(P.fmod_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.fmod_p, input, other)


def floor_divide(input, other):
    """``input // other`` rounded down (Python's ``//``), as
    ``torch.floor_divide`` and ``div(rounding_mode='floor')``: integers stay
    integers (a zero divisor raises). The gradient is zero, as torch's
    ``div(rounding_mode='floor')`` (torch's floor_divide raises
    "derivative not implemented" instead)."""
    try:
        return bind2(P.div_rounded_p, input, other)
    except P.PromotionNeeded:
        return promoted(P.div_rounded_p, input, other)


def _rounded_div(input, other, rounding_mode):
    if rounding_mode not in ("floor", "trunc"):
        raise ValueError(f"div: expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"{rounding_mode!r}")
    if rounding_mode == "floor":
        return floor_divide(input, other)
    try:
        return bind(P.div_rounded_p, input, other, mode="trunc")
    except P.PromotionNeeded:
        return promoted(P.div_rounded_p, input, other, mode="trunc")


def _bool_operands(op, *xs):
    """A TypeError unless every operand is boolean: torch's ``~ & | ^`` on
    integers are bitwise, which dynnets does not provide, so an integer
    operand is refused rather than given another meaning."""
    for x in xs:
        if not isinstance(x, (bool, np.bool_)) and dtype_of(x).kind != "b":
            raise TypeError(f"{op}: expected boolean tensors (masks), got dtype {dtype_of(x)}; bitwise operations on "
                            f"integers are not supported (compare first, e.g. x != 0)")


def logical_not(input):
    """Elementwise not of a boolean tensor (``torch.logical_not``, ``~mask``)."""
    _bool_operands("logical_not", input)
    return bind2(P.equal_p, input, False)


def logical_and(input, other):
    """Elementwise and of boolean tensors (``torch.logical_and``, ``a & b``)."""
    _bool_operands("logical_and", input, other)
    return bind2(P.mul_p, input, other)         # numpy's product of booleans is their conjunction


def logical_or(input, other):
    """Elementwise or of boolean tensors (``torch.logical_or``, ``a | b``)."""
    _bool_operands("logical_or", input, other)
    return bind2(P.maximum_p, input, other)


def logical_xor(input, other):
    """Elementwise exclusive or of boolean tensors (``torch.logical_xor``, ``a ^ b``)."""
    _bool_operands("logical_xor", input, other)
    return bind2(P.not_equal_p, input, other)


# --- maths torch users reach for (branch i22-torch-b) ----------------------------

def log1p(input):
    """``log(1 + input)``, accurate for small ``input`` (as ``torch.log1p``;
    an integer input in float32)."""
    try:
        return bind1(P.log1p_p, input)
    except P.PromotionNeeded:
        return bind1(P.log1p_p, astype(input, P.DEFAULT_FLOAT))


def expm1(input):
    """``exp(input) - 1``, accurate for small ``input`` (as ``torch.expm1``;
    an integer input in float32)."""
    try:
        return bind1(P.expm1_p, input)
    except P.PromotionNeeded:
        return bind1(P.expm1_p, astype(input, P.DEFAULT_FLOAT))


def isnan(input):
    """Where ``input`` is NaN, as a boolean tensor (``torch.isnan``)."""
    return not_equal(input, input)


def isinf(input):
    """Where ``input`` is +inf or -inf, as a boolean tensor (``torch.isinf``)."""
    if dtype_of(input).kind != "f":
        return not_equal(input, input)      # all False, in input's shape
    return eq(abs(input), np.inf)


def isfinite(input):
    """Where ``input`` is neither NaN nor infinite, as a boolean tensor (``torch.isfinite``)."""
    if dtype_of(input).kind != "f":
        return eq(input, input)             # all True, in input's shape
    # NaN < inf is False
    return less(abs(input), np.inf)
