"""Every public op, once. Each is a thin call of :func:`bind` on a primitive
from the table; composites (``square``, ``split``, ``dropout``, ``min``...) are
written in primitives. The functions work on eager tensors and on symbolic
static-graph values alike, because both go through ``bind``; the methods and
operators of both (``x + y``, ``x.sum()``) are these functions, declared in
:class:`dynnets.autograd.tensor.TensorOps`.

This module sits below :mod:`~dynnets.autograd.tensor` (whose class body
refers to it), so it never names the Tensor class: a non-differentiable
argument (an index, a mask, a condition) given as a tensor is read through
:func:`_array_of`. Tensor creation (``tensor``, ``zeros``...) lives with the
class in :mod:`~dynnets.autograd.tensor`.
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from . import primitives as P
from ..devices import check_device
from .engine import bind, bind1, bind2, bind_first
from .values import as_operand, is_interpreted, require_concrete

__all__ = [
    "add", "sub", "mul", "div", "pow", "neg", "matmul", "linear", "exp", "log", "tanh", "sigmoid", "relu",
    "sqrt", "abs", "clip", "maximum", "minimum", "where", "square", "sum", "mean", "max", "min", "argmax",
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "reshape",
    "transpose", "broadcast_to", "getitem", "take", "concat", "cat", "stack", "split", "split_rows", "softmax",
    "log_softmax", "cross_entropy", "embedding", "dropout", "lstm_cell", "gru_cell", "tree_lstm_cell",
    "tree_lstm_leaf", "lstm_seq", "gru_seq", "rnn_seq", "tree_lstm_levels", "tree_lstm_levels_packed", "tree_rnn_levels", "childsum_levels",
    "tree_lstm_node", "tree_lstm_leaf_node", "astype", "flatten", "squeeze", "unsqueeze",
    "permute", "clone", "argmin", "MaxMin",
    "gelu", "leaky_relu", "gather", "masked_fill", "clamp", "clamp_min", "clamp_max", "chunk", "array_split", "norm",
    "einsum", "bmm",
    # torch's names (issue 22)
    "sin", "cos", "sign", "dot", "mm", "std", "var", "eq", "ne", "lt", "le", "gt", "ge", "allclose", "numel", "t",
]


def shape_tuple(shape):
    """The shape of ``f(*shape)``, as ``zeros(2, 3)`` and ``zeros((2, 3))`` both take it."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _array_of(x):
    """A tensor's array (its ``numpy()``); anything else (an array, a
    symbolic value, an int) unchanged."""
    return x.numpy() if getattr(type(x), "_is_tensor", False) else x


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


def _dtype(a):
    d = getattr(a, "dtype", None)
    return np.asarray(a).dtype if d is None else np.dtype(d)


def _cast(a, dt):
    """Operand ``a`` in dtype ``dt``: Python numbers stay (numpy keeps them
    weak), arrays are converted, tensors and static values get an ``astype``
    (through which the gradient flows back in their own dtype)."""
    if type(a) in _PY_NUMBERS:
        return a
    if isinstance(a, (np.ndarray, np.generic, list, tuple)):
        a = np.asarray(a)
        return a if a.dtype == dt else a.astype(dt)
    return a if _dtype(a) == dt else astype(a, dt)


def promoted(prim, *args, **attrs):
    """``bind(prim, *args, **attrs)`` on operands cast to the dtype PyTorch's
    type promotion gives them (the answer to a shape rule's PromotionNeeded).
    For ``where`` the condition, for ``clip`` the bounds are not operands."""
    name = prim.name
    if name in ("concat", "stack"):
        dts = [_dtype(a) for a in args]
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
        ops_ = [_number(a) for a in ops_]
    avals = [P.aval_of(a) for a in ops_]
    if name == "clip":
        avals += [P.Aval((), v) for v in (attrs.get("lo"), attrs.get("hi")) if v is not None]
    dt = P.torch_result_type(*avals)
    if name in _TO_FLOAT and dt.kind in "biu":
        dt = P.DEFAULT_FLOAT
    cast = [_cast(a, dt) for a in ops_]
    return bind(prim, *cast, **attrs) if c is None else bind(prim, c, *cast, **attrs)


def _number(v):
    """A numpy scalar bound as the Python number torch takes it for."""
    return v.item() if isinstance(v, np.generic) else v


# --- elementwise ---------------------------------------------------------------

def _scaled(op, other, alpha):
    """``alpha * other`` for torch's ``add(input, other, alpha=)``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: alpha must be a number, got {alpha!r}")
    return other if alpha == 1 else mul(other, _number(alpha))


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
    lo, hi = _number(min), _number(max)
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


def where(condition, input=None, other=None):
    """``input`` where ``condition`` else ``other``, as ``torch.where``;
    gradients flow to ``input`` and ``other`` only. ``where(condition)``
    alone is ``nonzero(condition, as_tuple=True)``: a tuple of int64 index
    tensors, one per dimension."""
    if input is None and other is None:
        return nonzero_tuple(condition)
    if input is None or other is None:
        raise TypeError("where: takes (condition) or (condition, input, other), got only one of input and other")
    c = as_operand(condition, bool)
    input, other = _number(input), _number(other)    # a numpy scalar is weak in torch, as a Python number
    try:
        return bind(P.where_p, c, input, other)
    except P.PromotionNeeded:
        return promoted(P.where_p, c, input, other)


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


# --- reductions ------------------------------------------------------------------

def _axis(axis, op):
    if isinstance(axis, list):
        axis = tuple(axis)
    if axis == ():
        # torch's dim=() reduces every dimension, numpy's axis=() none: either reading would
        # silently surprise the other's users
        raise P.ShapeError(f"{op}: an empty tuple of dimensions reduces every dimension in PyTorch and none in "
                           f"numpy; pass dim=None to reduce all (or skip the {op})")
    return axis


def _dim(op, axis, dim):
    """PyTorch's ``dim=`` beside numpy's ``axis=`` (one of them)."""
    if dim is None:
        return axis
    if axis is not None:
        raise TypeError(f"{op}: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
    return dim


def _keep(op, keepdims, keepdim):
    """PyTorch's ``keepdim=`` (default False) beside numpy's ``keepdims=``
    (default None: not given); one of them."""
    if keepdims is None:
        return bool(keepdim)
    if keepdim:
        raise TypeError(f"{op}: got both keepdims={keepdims!r} and keepdim={keepdim!r}; they name the same "
                        f"argument, pass one")
    return bool(keepdims)


# The defaults are not passed: an application without attributes is checked
# and recorded with less work (a whole-tensor sum is the usual loss).

def _numpy_call(op, x, dtype, out):
    """``x`` cast to ``dtype`` (torch's ``sum(dtype=)``), for the keywords
    numpy passes when ``np.sum(t)`` / ``np.mean(t)`` defer to the method."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (dynnets ops return new tensors), got {type(out).__name__}")
    return x if dtype is None else astype(x, dtype)


def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None, out=None):
    """Sum over ``dim`` (an int or a tuple; all dimensions by default), as
    ``torch.sum``; ``dtype=`` casts the input first; numpy's ``axis=`` /
    ``keepdims=`` are accepted too (so ``np.sum(t, axis=0)`` works)."""
    x = input
    if dtype is not None or out is not None:
        x = _numpy_call("sum", x, dtype, out)
    if dim is not None or axis is not None:
        axis = _dim("sum", axis, dim)
    keepdims = _keep("sum", keepdims, keepdim) if keepdim or keepdims is not None else False
    if axis is None and not keepdims:
        return bind1(P.sum_p, x)
    return bind(P.sum_p, x, axis=_axis(axis, "sum"), keepdims=True if keepdims else False)


# numpy's np.mean(t) calls t.mean(axis=, dtype=, out=None), passing out= explicitly; torch code never
# passes it: the default tells the two callers apart
_NO_OUT = object()


def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None, out=_NO_OUT):
    """Mean over ``dim`` (all dimensions by default), as :func:`sum`. The mean of
    integers or booleans raises, as ``torch.mean`` (cast first:
    ``(pred == labels).float().mean()``), except when numpy asks:
    ``np.mean(pred == labels)`` is numpy's float64 mean, the accuracy."""
    x = input
    if out is not _NO_OUT:
        if dtype is None and out is None and _dtype(x).kind in "biu":
            dtype = np.float64          # numpy's meaning of np.mean over integers and booleans
        x = _numpy_call("mean", x, dtype, out)
    elif dtype is not None:
        x = _numpy_call("mean", x, dtype, None)
    if dim is not None or axis is not None:
        axis = _dim("mean", axis, dim)
    keepdims = _keep("mean", keepdims, keepdim) if keepdim or keepdims is not None else False
    if axis is None and not keepdims:
        return bind1(P.mean_p, x)
    return bind(P.mean_p, x, axis=_axis(axis, "mean"), keepdims=True if keepdims else False)


def _correction(op, unbiased, correction):
    """torch's ``correction`` (default 1, Bessel's) or its legacy ``unbiased``
    (a bool, default True: the same 1); ``unbiased=False`` with a
    ``correction`` is a contradiction torch refuses too."""
    if not isinstance(unbiased, (bool, np.bool_)):
        raise TypeError(f"{op}: unbiased must be a bool, got {unbiased!r}")
    if correction is None:
        return 1 if unbiased else 0
    if not unbiased:
        raise TypeError(f"{op}: got both unbiased=False and correction={correction!r}; pass one (unbiased=False "
                        f"is correction=0)")
    if isinstance(correction, bool) or not isinstance(correction, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: correction must be a number, got {correction!r}")
    return _number(correction)


def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """The variance over ``dim`` (all dimensions by default), as ``torch.var``:
    ``sum((x - mean)^2) / (N - correction)`` with ``correction=1`` (Bessel's)
    by default; the legacy ``unbiased`` (``var(x, False)``, ``var(x, dim,
    False)``) is ``correction=1`` or ``0``. Where ``N - correction <= 0``
    the result is inf (nan for a zero sum), as torch's. A composite of
    mean, sub, mul, sum and div: gradients come from their VJPs."""
    x = input
    if isinstance(dim, (bool, np.bool_)):          # torch.var(x, unbiased)
        dim, unbiased = None, dim
    dim = _dim("var", axis, dim)
    keep = _keep("var", keepdims, keepdim)
    corr = _correction("var", unbiased, correction)
    if _dtype(x).kind not in "fc":
        raise P.DTypeError(f"var: std and var only support floating point and complex dtypes, got {_dtype(x)} "
                           f"(as torch: cast first, x.float())")
    shp = tuple(x.shape)
    if isinstance(dim, list):
        dim = tuple(dim)
    if dim == ():
        dim = None
    axes = P.norm_axis("var", dim, len(shp))
    axes = tuple(range(len(shp))) if axes is None else axes
    d = sub(x, mean(x, dim, keepdim=True))
    s = sum(mul(d, d), dim, keepdim=keep)
    sizes = [shp[a] for a in axes]
    if None in sizes:
        # an unknown dimension of a static value: N counted in the graph
        n = sum(add(mul(x, 0), 1), dim, keepdim=keep)
        return div(s, sub(n, corr))
    n = 1
    for k in sizes:
        n *= k
    dof = n - corr
    if dof <= 0:
        warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel).", UserWarning, stacklevel=2)
        with np.errstate(invalid="ignore"):          # 0 * inf: torch's nan, warned about above
            return mul(s, float("inf"))
    return div(s, float(dof))


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """The standard deviation, ``sqrt(var(...))``, as ``torch.std`` (see
    :func:`var`); its gradient is 0 where it is 0 (torch's std_backward),
    where sqrt's alone would give 0 * inf = nan."""
    v = var(input, dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims)
    zero = eq(v, 0)
    # sqrt of 1 where v is 0 keeps its gradient finite; the outer where sends none there
    return where(zero, 0.0, sqrt(where(zero, 1.0, v)))


class _ValuesIndices(tuple):
    """``(values, indices)``, a named tuple as PyTorch's ``torch.return_types``."""

    __slots__ = ()

    def __new__(cls, values, indices):
        return tuple.__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]

    def __repr__(self):
        return f"{type(self).__name__}(values={self[0]!r}, indices={self[1]!r})"


class MaxMin(_ValuesIndices):
    """``(values, indices)`` of ``max(x, dim)`` / ``min(x, dim)`` (``torch.return_types.max``)."""

    __slots__ = ()


def _max_along(op, x, d, keep, largest):
    """PyTorch's ``max(x, dim)``: the values (the gradient goes to the selected
    element only, as PyTorch's) and their int64 indices along ``d``."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an integer, got {d!r}")
    nd = len(x.shape)
    ax = _axis_of(op, int(d), builtins.max(nd, 1))
    src = x if largest else neg(x)
    if nd and x.shape[ax] == 0:
        raise P.ShapeError(f"{op}: cannot reduce dimension {ax} of size 0 (x.shape={tuple(x.shape)})")
    idx = bind(P.argmax_p, src, axis=ax) if nd else bind(P.argmax_p, src)
    if is_interpreted(x):
        # a graph's value: its maximum (the values at idx are not known yet to index with)
        values = bind(P.max_p, src, axis=ax, keepdims=keep)
        values = values if largest else neg(values)
    elif nd == 0:
        values = getitem(x, ())
    else:
        at = _array_of(idx)
        grid = list(np.ogrid[tuple(builtins.slice(n) for n in at.shape)])
        grid.insert(ax, at)
        values = getitem(x, tuple(grid))
        if keep:
            values = unsqueeze(values, ax)
    if keep and nd:
        idx = unsqueeze(idx, ax)
    return MaxMin(values, idx)


def _is_array_like(y):
    return isinstance(y, (float, np.ndarray)) or hasattr(y, "shape")


def max(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """The maximum, as ``torch.max``: of all elements by default; with ``dim``
    (``x.max(dim)``) a :class:`MaxMin` ``(values, indices)``; with a tensor
    as the second argument (or ``other=``) the elementwise :func:`maximum`
    (``torch.max(x, y)``). numpy's ``axis=`` (an int or a tuple) gives the
    values only."""
    x = input
    if other is not None:
        if dim is not None:
            raise TypeError("max: got both dim and other; max(input, other) is the elementwise maximum")
        return maximum(x, other)
    if dim is not None:
        if not isinstance(dim, (int, np.integer)) and _is_array_like(dim):
            return maximum(x, dim)
        if axis is not None:
            raise TypeError(f"max: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
        return _max_along("max", x, dim, _keep("max", keepdims, keepdim), True)
    keepdims = _keep("max", keepdims, keepdim)
    if axis is None and not keepdims:
        return bind1(P.max_p, x)
    return bind(P.max_p, x, axis=_axis(axis, "max"), keepdims=True if keepdims else False)


def min(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """As :func:`max`, for the minimum."""
    x = input
    if other is not None:
        if dim is not None:
            raise TypeError("min: got both dim and other; min(input, other) is the elementwise minimum")
        return minimum(x, other)
    if dim is not None:
        if not isinstance(dim, (int, np.integer)) and _is_array_like(dim):
            return minimum(x, dim)
        if axis is not None:
            raise TypeError(f"min: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
        return _max_along("min", x, dim, _keep("min", keepdims, keepdim), False)
    if axis is not None:
        axis = _axis(axis, "min")
    return neg(max(neg(x), axis=axis, keepdims=_keep("min", keepdims, keepdim)))


def argmax(input, dim=None, keepdim=False, *, axis=None):
    """Indices (int64) of the maxima along ``dim`` (numpy's ``axis=``; of the
    flattened input by default), as ``torch.argmax``; no gradient."""
    x = input
    axis = _dim("argmax", axis, dim)
    out = bind(P.argmax_p, x) if axis is None else bind(P.argmax_p, x, axis=axis)
    if keepdim:
        out = unsqueeze(out, axis) if axis is not None else reshape(out, *([1] * len(x.shape)))
    return out


def argmin(input, dim=None, keepdim=False, *, axis=None):
    """Indices (int64) of the minima, as :func:`argmax`."""
    return argmax(neg(input), _dim("argmin", axis, dim), keepdim)


class Size(tuple):
    """A shape, as ``torch.Size``: a tuple (equal to the plain tuple of the
    same sizes, printed as one) that ``x.size()`` returns, so that
    ``Tensor(x.size())`` and ``x.new(x.size())`` read it as a shape, as
    torch's legacy constructors do (a plain tuple there is data).
    ``x.shape`` stays numpy's plain tuple: it is read on hot paths."""

    __slots__ = ()

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if type(i) is builtins.slice else r

    def __add__(self, other):
        return Size(tuple.__add__(self, other))

    def numel(self):
        """The number of elements of a tensor of this shape."""
        n = 1
        for d in self:
            n *= d
        return n


def size(x, dim=None):
    """``x.shape`` as a :class:`Size`, or the size of dimension ``dim`` (as ``torch.Tensor.size``)."""
    shp = Size(x.shape)
    if dim is None:
        return shp
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"size: dim must be an integer, got {dim!r}")
    nd = len(shp)
    if not -builtins.max(nd, 1) <= dim < builtins.max(nd, 1):
        raise IndexError(f"size: dimension out of range (expected to be in range of [{-builtins.max(nd, 1)}, "
                         f"{builtins.max(nd, 1) - 1}], but got {dim})")
    return shp[dim] if nd else 1


def numel(input):
    """The number of elements (as ``torch.numel``)."""
    shp = tuple(input.shape)
    return int(np.prod(shp, dtype=np.int64)) if None not in shp else None


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


# --- shapes and indexing --------------------------------------------------------

def reshape(input, *sizes, shape=None):
    """``input`` with the given shape (``reshape(x, 2, 3)``, ``reshape(x, (2,
    3))`` or torch's keyword ``reshape(x, shape=(2, 3))``); one dimension
    may be -1 (inferred), and an unknown dimension of a static value
    (``None``, as in ``x.shape``) is inferred the same way."""
    x = input
    if shape is not None:
        if sizes:
            raise TypeError(f"reshape: got the shape twice ({sizes!r} and shape={shape!r})")
        sizes = (shape,)
    shape = shape_tuple(sizes)
    if None in shape:
        if shape.count(None) + shape.count(-1) > 1:
            raise P.ShapeError(f"reshape: at most one dimension of shape={shape} can be inferred (None or -1); "
                               f"x.shape={x.shape}")
        shape = tuple(-1 if d is None else d for d in shape)
    return bind(P.reshape_p, x, shape=shape)


def flatten(input, start_dim=0, end_dim=-1):
    """``input`` with dimensions ``start_dim..end_dim`` merged into one (all of
    them by default), as ``torch.flatten``."""
    x = input
    shp = list(x.shape)
    if not shp:
        return reshape(x, 1)
    s, e = _axis_of("flatten", start_dim, len(shp)), _axis_of("flatten", end_dim, len(shp))
    if s > e:
        raise P.ShapeError(f"flatten: start_dim={start_dim} comes after end_dim={end_dim}")
    if s == 0 and e == len(shp) - 1:
        return reshape(x, -1)
    return reshape(x, *shp[:s], -1, *shp[e + 1:])


def _axis_of(op, axis, ndim):
    if not -ndim <= axis < ndim:
        raise P.ShapeError(f"{op}: axis {axis} is out of range for an input with {ndim} dimensions")
    return axis % ndim


def squeeze(input, dim=None, *, axis=None):
    """``input`` without dimension ``dim`` (numpy's ``axis=``) if it has size
    1, else unchanged; a tuple of dimensions removes each of them that has
    size 1; without one, every dimension of size 1 goes (as ``torch.squeeze``)."""
    x = input
    axis = _dim("squeeze", axis, dim)
    if isinstance(axis, (tuple, list)):
        nd = len(x.shape)
        for ax in sorted({_axis_of("squeeze", int(a), builtins.max(nd, 1)) for a in axis}, reverse=True):
            x = squeeze(x, ax)
        return x
    shp = list(x.shape)
    if axis is None:
        if None in shp:
            raise P.ShapeError(f"squeeze: x.shape={tuple(shp)} has unknown dimensions; name the one to remove")
        return reshape(x, *[d for d in shp if d != 1])
    ax = _axis_of("squeeze", axis, len(shp))
    if shp[ax] is None:
        raise P.ShapeError(f"squeeze: dimension {axis} of x.shape={tuple(shp)} is unknown, so whether it is "
                           f"removed (size 1) cannot be decided when the graph is built: reshape instead")
    if shp[ax] == 1:
        del shp[ax]
    if shp.count(None) <= 1:
        return reshape(x, *shp)
    return getitem(x, (slice(None),) * ax + (0,))


def unsqueeze(input, dim=None, *, axis=None):
    """``input`` with a new dimension of size 1 at ``dim`` (numpy's ``axis=``), as ``torch.unsqueeze``."""
    x = input
    axis = _dim("unsqueeze", axis, dim)
    if axis is None:
        raise TypeError("unsqueeze: missing the dimension (axis= or dim=)")
    shp = list(x.shape)
    ax = _axis_of("unsqueeze", axis, len(shp) + 1)
    shp.insert(ax, 1)
    if shp.count(None) <= 1:
        return reshape(x, *shp)
    return getitem(x, (slice(None),) * ax + (None,))


def transpose(input, *axes, dim0=None, dim1=None):
    """``transpose(x, dim0, dim1)`` swaps two dimensions (PyTorch's meaning,
    so ``x.transpose(0, 1)`` of a matrix is its transpose; also by keyword,
    ``transpose(x, dim0=0, dim1=1)``); ``transpose(x)`` reverses the
    dimensions and a whole permutation, ``transpose(x, (2, 0, 1))`` or
    ``transpose(x, 2, 0, 1)``, reorders them (numpy's meaning)."""
    x = input
    if dim0 is not None or dim1 is not None:
        if axes or dim0 is None or dim1 is None:
            raise TypeError(f"transpose: expected transpose(input, dim0, dim1), got {axes!r}, dim0={dim0!r}, "
                            f"dim1={dim1!r}")
        axes = (dim0, dim1)
    if len(axes) == 2 and (type(axes[0]) is not int or type(axes[1]) is not int) \
            and isinstance(axes[0], np.integer) and isinstance(axes[1], np.integer):
        axes = (int(axes[0]), int(axes[1]))                     # x.transpose(*np.array([0, 1]))
    if len(axes) == 2 and type(axes[0]) is int and type(axes[1]) is int:
        nd = len(x.shape)
        d0, d1 = (_axis_of("transpose", a, nd) for a in axes)
        perm = list(range(nd))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return bind(P.transpose_p, x, axes=tuple(perm))
    axes = shape_tuple(axes) if axes else None
    return bind(P.transpose_p, x, axes=axes)


def permute(input, *args, dims=None):
    """The dimensions of ``input`` in the order ``dims`` (as ``torch.permute``;
    ``x.permute(1, 0, 2)``, ``x.permute((1, 0, 2))`` or ``permute(x, dims=(1, 0, 2))``)."""
    x = input
    if dims is not None:
        if args:
            raise TypeError(f"permute: got the dims twice ({args!r} and dims={dims!r})")
        args = (dims,)
    dims = shape_tuple(args)
    if len(dims) != len(x.shape):
        raise P.ShapeError(f"permute: {len(dims)} dims {dims} for an input with {len(x.shape)} dimensions")
    return bind(P.transpose_p, x, axes=dims)


def t(input):
    """``input.T`` of a tensor with at most 2 dimensions (as ``torch.t``)."""
    x = input
    nd = len(x.shape)
    if nd > 2:
        raise P.ShapeError(f"t: expects a tensor with <= 2 dimensions, but x has {nd} (x.shape={tuple(x.shape)}); "
                           f"use permute")
    return transpose(x) if nd == 2 else x


def broadcast_to(input, size):
    """``input`` broadcast to ``size`` (a view), as ``torch.broadcast_to``."""
    return bind(P.broadcast_to_p, input, shape=tuple(size))


def _index_arg(index):
    tp = type(index)
    if tp is int or tp is slice:
        return index
    if tp is tuple:
        return tuple(_array_of(i) for i in index)
    if tp is list:
        return np.asarray(index)
    return _array_of(index)


def index_arg(index):
    """``index`` as getitem (and ``Tensor.__setitem__``) takes it: tensors in it
    as their arrays, a list as an integer or boolean array."""
    return _index_arg(index)


def getitem(x, index):
    """``x[index]`` with ints, slices, None, Ellipsis and integer arrays (gather)."""
    tp = type(index)
    return bind(P.getitem_p, x, index=index if tp is int or tp is slice else _index_arg(index))


def take(x, indices):
    """Rows of ``x`` at integer ``indices`` (gather along axis 0)."""
    return bind(P.take_p, x, as_operand(indices))


def _no_out(op, out):
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (dynnets ops return new tensors: use the result), got "
                        f"{type(out).__name__}")


def _dim0(op, dim, axis):
    """``dim`` (default 0) or numpy's ``axis=``."""
    if axis is None:
        return dim
    if dim != 0:
        raise TypeError(f"{op}: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
    return axis


def concat(tensors, dim=0, *, axis=None, out=None):
    """``tensors`` joined along ``dim`` (numpy's ``axis=``; default 0), as ``torch.cat``."""
    xs = tensors
    if out is not None:
        _no_out("cat", out)
    if axis is not None:
        axis = _dim0("cat", dim, axis)
    else:
        axis = dim
    attrs = {} if axis is None or (axis == 0 and type(axis) is int) else {"axis": axis}   # see sum
    try:
        return bind(P.concat_p, *xs, **attrs)
    except P.PromotionNeeded:
        return promoted(P.concat_p, *xs, **attrs)


cat = concat


def stack(tensors, dim=0, *, axis=None, out=None):
    """``tensors`` stacked along a new dimension ``dim`` (numpy's ``axis=``; default 0), as ``torch.stack``."""
    xs = tensors
    if out is not None:
        _no_out("stack", out)
    if axis is not None:
        axis = _dim0("stack", dim, axis)
    else:
        axis = dim
    attrs = {} if axis is None or (axis == 0 and type(axis) is int) else {"axis": axis}
    try:
        return bind(P.stack_p, *xs, **attrs)
    except P.PromotionNeeded:
        return promoted(P.stack_p, *xs, **attrs)


def _split_axis(op, x, axis, dim):
    axis = _dim(op, axis, dim)
    axis = 0 if axis is None else axis
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an integer, got {axis!r}")
    return _axis_of(op, int(axis), builtins.max(len(x.shape), 1))


def _split_sizes(x, sizes, axis):
    """``bind`` of the split primitive: one node whose results are the parts."""
    if not sizes:
        return []
    return list(bind(P.split_p, x, sizes=tuple(int(s) for s in sizes), axis=axis))


def split(tensor, split_size_or_sections, dim=0, *, axis=None):
    """Parts of ``tensor`` along ``dim`` (numpy's ``axis=``; default 0), as ``torch.split``:
    an int is the size of each part (the last may be smaller), a list the
    size of each; one node (the ``split`` primitive), returned as a list.

    This is PyTorch's meaning; numpy's (an int is the number of parts) is
    :func:`array_split`, and the static facade's ``dynnets.static.split``
    keeps TF1's ``split(value, num_or_size_splits, axis)`` (an int is the
    number of equal parts). Sizes in a list need not know the dimension when
    a static graph is built (they are checked at run time); an int needs it.
    """
    x = tensor
    if not len(x.shape):
        raise P.ShapeError("split: x must have at least one dimension, got a 0-d input")
    ax = _split_axis("split", x, _dim0("split", dim, axis), None)
    n = x.shape[ax]
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        size = int(split_size_or_sections)
        if size <= 0 and not (size == 0 and n == 0):
            raise P.ShapeError(f"split: split_size must be a positive integer, got {size}")
        if n is None:
            raise P.ShapeError(f"split: dimension {ax} of x.shape={tuple(x.shape)} is unknown, so the number of "
                               f"parts of size {size} is too; pass a list of sizes")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if n else [0]
        return _split_sizes(x, sizes, ax)
    if not isinstance(split_size_or_sections, (list, tuple)):
        raise TypeError(f"split: split_size_or_sections must be an int or a list of ints, got "
                        f"{split_size_or_sections!r}")
    sizes = [int(s) for s in split_size_or_sections]
    if n is not None and builtins.sum(sizes) != n:
        raise P.ShapeError(f"split: sizes {sizes} do not add up to x.shape[{ax}]={n}")
    return _split_sizes(x, sizes, ax)


def array_split(x, indices_or_sections, axis=0):
    """numpy's ``array_split``: an int is the number of parts (sizes differ by
    at most one, the larger first), a list the indices to split at."""
    ax = _split_axis("array_split", x, axis, None)
    n = x.shape[ax]
    if n is None:
        raise P.ShapeError(f"array_split: dimension {ax} of x.shape={tuple(x.shape)} must be known")
    if isinstance(indices_or_sections, (int, np.integer)) and not isinstance(indices_or_sections, bool):
        k = int(indices_or_sections)
        if k <= 0:
            raise P.ShapeError(f"array_split: the number of sections must be larger than 0, got {k}")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
    else:
        bounds = [builtins.min(builtins.max(int(i) if i >= 0 else n + int(i), 0), n) for i in indices_or_sections]
        edges = [0] + bounds + [n]
        sizes = [builtins.max(b - a, 0) for a, b in zip(edges[:-1], edges[1:])]
        starts = edges[:-1]
        # numpy's parts for decreasing indices are empty: slice as numpy does
        return [getitem(x, (slice(None),) * ax + (slice(a, a + sz),)) for a, sz in zip(starts, sizes)]
    return _split_sizes(x, sizes, ax)


def chunk(input, chunks, dim=0):
    """``chunks`` parts along ``dim``, as ``torch.chunk``: each of size
    ``ceil(n / chunks)`` but the last, so there may be fewer parts."""
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise P.ShapeError(f"chunk: chunks must be a positive integer, got {chunks!r}")
    if not len(input.shape):
        raise P.ShapeError("chunk: input must have at least one dimension, got a 0-d input")
    ax = _split_axis("chunk", input, dim, None)
    n = input.shape[ax]
    if n is None:
        raise P.ShapeError(f"chunk: dimension {ax} of input.shape={tuple(input.shape)} is unknown, so the parts "
                           f"are too")
    if n == 0:
        return _split_sizes(input, [0] * int(chunks), ax)
    size = -(-n // int(chunks))
    return split(input, size, dim=ax)


# --- linear algebra --------------------------------------------------------------

def matmul(input, other):
    """The matrix product, as ``torch.matmul`` (1-D operands are vectors, more
    dimensions are batches that broadcast); both operands of one dtype."""
    return bind2(P.matmul_p, input, other)


def mm(input, mat2):
    """The product of two matrices (both 2-D, no broadcasting), as ``torch.mm``."""
    xs, ys = tuple(input.shape), tuple(mat2.shape)
    if len(xs) != 2 or len(ys) != 2:
        raise P.ShapeError(f"mm: expected 2-D matrices, got input.shape={xs} and mat2.shape={ys}")
    return bind2(P.matmul_p, input, mat2)


def dot(input, tensor):
    """The inner product of two 1-D tensors of one size and dtype, as
    ``torch.dot`` (a 0-d result)."""
    xs, ys = tuple(input.shape), tuple(tensor.shape)
    if len(xs) != 1 or len(ys) != 1:
        raise P.ShapeError(f"dot: expected 1-D tensors, got input.shape={xs} and tensor.shape={ys} (for matrices: "
                           f"mm or matmul)")
    return bind2(P.matmul_p, input, tensor)


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` (weight is (out_features, in_features), as PyTorch);
    ``bias=None`` is ``x @ weight.T``."""
    # a Python 0 for no bias: the one fused primitive, and (a weak scalar) it promotes nothing
    return bind(P.linear_p, x, weight, 0 if bias is None else bias)


# --- softmax, losses, embedding, dropout ----------------------------------------

def _softmax_cast(op, x, dtype):
    if dtype is None:
        return x
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise P.DTypeError(f"{op}: dtype must be a floating-point type, got {dt}")
    return x if _dtype(x) == dt else astype(x, dt)


def softmax(input, dim=None, dtype=None, *, axis=None):
    """Softmax along ``dim`` (numpy's ``axis=``; default the last), as
    ``torch.softmax``; ``dtype`` casts the input first."""
    x = input if dtype is None else _softmax_cast("softmax", input, dtype)
    if dim is not None:
        axis = _dim("softmax", axis, dim)
    if axis is None or (axis == -1 and type(axis) is int):
        return bind(P.softmax_p, x)          # the default, without attributes (see sum)
    return bind(P.softmax_p, x, axis=axis)


def log_softmax(input, dim=None, dtype=None, *, axis=None):
    """Log-softmax along ``dim`` (numpy's ``axis=``; default the last), as
    ``torch.log_softmax``; ``dtype`` casts the input first."""
    x = input if dtype is None else _softmax_cast("log_softmax", input, dtype)
    if dim is not None:
        axis = _dim("log_softmax", axis, dim)
    if axis is None or (axis == -1 and type(axis) is int):
        return bind1(P.log_softmax_p, x)
    return bind(P.log_softmax_p, x, axis=axis)


def cross_entropy(logits, targets, *, mask=None, reduction="mean"):
    """Softmax cross-entropy of ``logits`` (N, C) against integer class
    ``targets`` (N,), fused in one Numba kernel.

    ``mask`` (N,) weights each row (0 drops it); ``reduction`` is 'mean' (over
    the mask's total weight; nan when it is 0, as PyTorch's mean over no
    rows), 'sum' or 'none' (per-row losses). Both are keyword-only: PyTorch's
    third positional argument is a per-class ``weight``.

    This is the fused op of the static graph and the models. PyTorch's
    ``F.cross_entropy`` (class weights, ``ignore_index``, label smoothing,
    (C,) or (N, C, d1, ...) scores, class-probability targets) is
    :func:`dynnets.nn.functional.cross_entropy`; other inputs here raise an
    error that names it.
    """
    targets = as_operand(targets)
    if mask is None:
        loss, _ = bind(P.softmax_cross_entropy_p, logits, targets, reduction=reduction)
    else:
        mask = as_operand(mask, logits.dtype)
        loss, _ = bind(P.softmax_cross_entropy_p, logits, targets, mask, reduction=reduction)
    return loss


def sigmoid_cross_entropy(logits, targets, pos_weight=None):
    """Per-element binary cross-entropy of ``logits`` against ``targets`` in
    [0, 1] (same shape), ``-(pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x)))``,
    computed without overflow or loss of tiny values for any |x| (one
    primitive). ``pos_weight`` broadcasts against the logits (one weight per
    class, the last axis). Unreduced: :func:`dynnets.nn.functional.binary_cross_entropy_with_logits`
    adds PyTorch's weights and reductions."""
    if pos_weight is None:
        return bind2(P.sigmoid_cross_entropy_p, logits, targets)
    return bind(P.sigmoid_cross_entropy_p, logits, targets, pos_weight)


def binary_cross_entropy(probs, targets):
    """Per-element binary cross-entropy ``-(t log(x) + (1 - t) log(1 - x))`` of
    probabilities in [0, 1], each log clamped at -100 (PyTorch's); unreduced
    (:func:`dynnets.nn.functional.binary_cross_entropy` adds weights and
    reductions)."""
    return bind2(P.binary_cross_entropy_p, probs, targets)


def embedding(weight, ids):
    """Rows of ``weight`` for integer ``ids``; the gradient is row-sparse."""
    return bind2(P.embedding_p, weight, as_operand(ids))


def dropout(x, p, rng, training=True):
    """Inverted dropout: zero each element with probability ``p`` and scale the
    rest by 1/(1-p). ``rng`` (a ``numpy.random.Generator`` or seed) draws the
    mask, so runs are reproducible.

    On a symbolic value (a static graph, a trace) the mask is a
    ``dropout_mask`` node whose seed ``rng`` draws now: each run of the plan
    draws a new mask (and its gradient uses that run's mask).

    PyTorch's ``torch.dropout(input, p, train)`` takes the flag third: a bool
    ``rng`` is that habit and raises (``training=`` is the flag here;
    :func:`dynnets.nn.functional.dropout` has torch's signature)."""
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"dropout: the third argument is rng (a numpy Generator or a seed), got the bool {rng}; "
                        f"pass the flag as training={rng}, or use dynnets.nn.functional.dropout(input, p, "
                        f"training) with torch's signature")
    if not training or p == 0:
        return x
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if is_interpreted(x):
        # a graph's value: a mask op drawn anew each run, from a seed fixed now
        seed = tuple(int(s) for s in np.random.default_rng(rng).integers(0, 2 ** 63, 2))
        return bind(P.mul_p, x, bind(P.dropout_mask_p, x, rate=float(p), seed=seed))
    return bind(P.mul_p, x, P.draw_dropout_mask(np.random.default_rng(rng), x.shape, x.dtype, p))


# --- fused cells -------------------------------------------------------------------

def lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One fused LSTM step (PyTorch ``LSTMCell`` maths); returns (h', c')."""
    h2, c2, _ = bind(P.lstm_cell_p, x, h, c, w_ih, w_hh, b_ih, b_hh)
    return h2, c2


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """One fused GRU step (PyTorch ``GRUCell`` maths); returns h'."""
    return bind_first(P.gru_cell_p, x, h, w_ih, w_hh, b_ih, b_hh)


def tree_lstm_cell(h_l, h_r, c_l, c_r, w, b):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14); returns (h, c)."""
    h, c, _ = bind(P.tree_lstm_cell_p, h_l, h_r, c_l, c_r, w, b)
    return h, c


def tree_lstm_leaf(x, w, b):
    """Tree-LSTM leaf node(s) from input ``x``; returns (h, c)."""
    h, c, _ = bind(P.tree_lstm_leaf_p, x, w, b)
    return h, c


# --- packed sequences (the recurrences nn.RNN / GRU / LSTM run on) -------------------

def lstm_seq(gx, w_hh, b_hh, batch_sizes):
    """LSTM over a packed batch from a zero state (the ``lstm_seq`` primitive).

    ``gx`` (total, 4H) holds the input projections ``x W_ih^T + b_ih`` of every
    packed row, ``w_hh`` (4H, H), ``b_hh`` (4H,), ``batch_sizes`` (T,) as a
    :class:`~dynnets.nn.utils.rnn.PackedSequence`'s. Returns ``(h, c)``, the
    states of every packed row, each (total, H).
    """
    h, c, _ = bind(P.lstm_seq_p, gx, w_hh, b_hh, batch_sizes)
    return h, c


def gru_seq(gx, w_hh, b_hh, batch_sizes):
    """GRU over a packed batch from a zero state; ``gx`` (total, 3H) -> h (total, H)."""
    return bind_first(P.gru_seq_p, gx, w_hh, b_hh, batch_sizes)


def rnn_seq(gx, w_hh, b_hh, batch_sizes):
    """Elman RNN (tanh) over a packed batch from a zero state; ``gx`` (total, H) -> h (total, H)."""
    return bind(P.rnn_seq_p, gx, w_hh, b_hh, batch_sizes)


# --- tree models (index arrays are constants: they carry no gradient) ----------------

def split_rows(x):
    """Rows of ``x`` (n, D) as n tensors of shape (1, D), one graph node."""
    return bind1(P.split_rows_p, x)


def tree_lstm_levels(h0, c0, w, b, left, right, offsets):
    """Binary Tree-LSTM over a level schedule; returns (h, c), each (n_nodes, H)."""
    h, c, _, _ = bind(P.tree_lstm_levels_p, h0, c0, w, b, left, right, offsets)
    return h, c


def tree_lstm_levels_packed(s0, rows, w, b, left, right, offsets):
    """Binary Tree-LSTM over a level schedule whose leaf ``j`` starts from the
    packed state ``s0[rows[j]]`` (``[h | c]``, (n_states, 2H)); returns (h, c),
    each (n_nodes, H)."""
    h, c, _, _ = bind(P.tree_lstm_levels_packed_p, s0, rows, w, b, left, right, offsets)
    return h, c


def tree_rnn_levels(h0, w, b, left, right, offsets):
    """Tree-RNN ``tanh([h_l; h_r] @ w + b)`` over a level schedule; returns h (n_nodes, H)."""
    return bind_first(P.tree_rnn_levels_p, h0, w, b, left, right, offsets)


def childsum_levels(h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets):
    """Child-sum Tree-LSTM over a level schedule; returns (h, c), each (n_nodes, H)."""
    out = bind(P.childsum_levels_p, h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets)
    return out[0], out[1]


def tree_lstm_node(s_l, s_r, w, b):
    """Binary Tree-LSTM node on packed states ``[h | c]`` (n, 2H) -> (n, 2H)."""
    return bind_first(P.tree_lstm_node_p, s_l, s_r, w, b)


def tree_lstm_leaf_node(x, w, b):
    """Tree-LSTM leaf from input rows ``x`` (n, E) -> packed states (n, 2H)."""
    return bind_first(P.tree_lstm_leaf_node_p, x, w, b)


# --- PyTorch's names: activations, gather, masked_fill, clamp, norm, einsum, bmm, pad ----

def gelu(input, approximate="none"):
    """GELU, ``input * Phi(input)`` (``approximate='tanh'``: torch's tanh
    approximation), as ``torch.nn.functional.gelu``."""
    if approximate == "none":
        return bind1(P.gelu_p, input)
    return bind(P.gelu_p, input, approximate=approximate)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, else ``negative_slope * input``, as
    ``torch.nn.functional.leaky_relu`` (whose default slope is 0.01; TF1's
    ``tf.nn.leaky_relu`` defaults to 0.2). The result is a new tensor: for
    torch's ``inplace=True`` use :func:`dynnets.nn.functional.leaky_relu`
    (here it raises, rather than leave the input silently unchanged)."""
    if inplace:
        raise ValueError("leaky_relu: inplace=True writes into the input, which dynnets.leaky_relu never does; use "
                         "dynnets.nn.functional.leaky_relu(input, negative_slope, inplace=True), as torch's F")
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float, np.integer, np.floating)):
        raise TypeError(f"leaky_relu: negative_slope must be a number, got {negative_slope!r}")
    return bind(P.leaky_relu_p, input, negative_slope=float(negative_slope))


def gather(input, dim, index):
    """``out[i][j] = input[index[i][j]][j]`` (``dim`` 0; and so on), as
    ``torch.gather(input, dim, index)``; the gradient is scattered back
    (repeated indices add up). ``index`` has the input's number of
    dimensions and is no larger than it outside ``dim``.
    (``dynnets.static.gather`` is TF1's: rows at indices, :func:`take`.)"""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"gather: dim must be an integer, got {dim!r} (torch's order is gather(input, dim, index))")
    return bind(P.gather_p, input, as_operand(index), dim=int(dim))


def masked_fill(input, mask, value):
    """``input`` with ``value`` where the boolean ``mask`` is true (the two
    broadcast together), as ``torch.masked_fill``; the value takes the
    input's dtype (an integer tensor filled with 1.5 holds 1, as torch's). A
    0-d tensor ``value`` gets the gradient of the filled positions."""
    m = as_operand(mask)
    if np.dtype(m.dtype) != np.bool_:
        raise P.DTypeError(f"masked_fill: mask must be boolean, got dtype {m.dtype} (as torch: compare first, "
                           f"mask != 0)")
    dt = np.dtype(input.dtype)
    if hasattr(value, "shape") and not isinstance(value, (np.ndarray, np.generic)):
        if len(tuple(value.shape)):
            raise P.ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got shape "
                               f"{tuple(value.shape)}")
        v = value if np.dtype(value.dtype) == dt else astype(value, dt)
    else:
        v = np.asarray(value)
        if v.ndim:
            raise P.ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got shape {v.shape}")
        v = v.astype(dt)
    return where(m, v, input)


def _bound(op, name, v):
    if v is None:
        return None
    if hasattr(v, "shape") and not isinstance(v, np.generic):     # (a numpy scalar is a number, as in torch)
        raise TypeError(f"{op}: {name} must be a number or None, got a tensor (elementwise bounds: "
                        f"dynnets.maximum / dynnets.minimum)")
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: {name} must be a number or None, got {v!r}")
    return _number(v)


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


_NORM_ALIASES = {"fro": 2.0, "euclidean": 2.0}


def norm(input, p="fro", dim=None, keepdim=False, *, axis=None, keepdims=None):
    """The vector ``p``-norm over ``dim`` (all dimensions by default), as
    ``torch.norm``: ``'fro'`` (the default) is the 2-norm of the elements
    (also over a pair of dimensions: the Frobenius norm); a number ``p`` is
    ``(sum |x|^p)^(1/p)`` over ``dim`` (one or several dimensions, as
    torch's), ``inf``/``-inf`` the largest/smallest ``|x|``, 0 the count of
    non-zeros. The nuclear norm ``'nuc'`` is not computed (an error). The
    gradient is 0 where the norm is 0, as torch's. ``axis=``/``keepdims=``
    are numpy's spellings."""
    if axis is not None:
        dim = _dim("norm", axis, dim)
    if keepdims is not None:
        keepdim = _keep("norm", keepdims, keepdim)
    if isinstance(p, str):
        if p not in _NORM_ALIASES:
            raise ValueError(f"norm: p={p!r} is not supported (vector norms: 'fro', or a number; the nuclear norm "
                             f"'nuc' needs an SVD, which dynnets does not compute)")
        if dim is not None and not isinstance(dim, (int, np.integer)) and len(dim) > 2:
            raise P.ShapeError(f"norm: p='fro' takes at most 2 dimensions, got dim={dim!r}")
        p = _NORM_ALIASES[p]
    elif p is None:
        p = 2.0
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"norm: p must be 'fro' or a number, got {p!r}")
    if isinstance(dim, list):
        dim = tuple(dim)
    if dim == ():
        dim = None          # torch reduces every dimension for an empty tuple
    attrs = {"ord": float(p)}
    if dim is not None:
        attrs["axis"] = dim
    if keepdim:
        attrs["keepdims"] = True
    return bind(P.norm_p, input, **attrs)


def einsum(equation, *operands):
    """Einstein summation, as ``torch.einsum`` / ``numpy.einsum``
    (``einsum('ij,jk->ik', a, b)``; ``...`` for leading dimensions; without
    ``->`` the output is the letters used once, in alphabetical order); the
    operands may also come as one list. One primitive: its gradient
    contracts the output gradient with the other operands."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ins, out = P.parse_einsum(equation, [len(o.shape) if hasattr(o, "shape") else np.ndim(o) for o in operands])
    return bind(P.einsum_p, *operands, equation=",".join(ins) + "->" + out)


def bmm(input, mat2):
    """Batched matrix product of (b, n, m) and (b, m, p), as ``torch.bmm``
    (no broadcasting: both must be 3-D with the same batch size)."""
    xs, ys = tuple(input.shape), tuple(mat2.shape)
    if len(xs) != 3 or len(ys) != 3:
        raise P.ShapeError(f"bmm: expected 3-D tensors, got input.shape={xs} and mat2.shape={ys}")
    if xs[0] is not None and ys[0] is not None and xs[0] != ys[0]:
        raise P.ShapeError(f"bmm: batch sizes differ: input.shape[0]={xs[0]}, mat2.shape[0]={ys[0]}")
    return matmul(input, mat2)


def pad(input, pad, mode="constant", value=None):
    """``input`` padded as ``torch.nn.functional.pad``: ``pad`` is a flat
    sequence of (before, after) counts, the last dimension first
    (``(left, right, top, bottom)``); negative counts remove elements. Modes
    ``'constant'`` (``value``, default 0, in the input's dtype),
    ``'reflect'``, ``'replicate'``, ``'circular'`` (these take no value)."""
    if not isinstance(pad, (list, tuple)) or not builtins.all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                      for v in pad):
        raise TypeError(f"pad: pad must be a flat sequence of integers, (before, after) per dimension from the last "
                        f"(torch's order), got {pad!r}")
    nd = len(input.shape)
    if len(pad) % 2:
        raise P.ShapeError(f"pad: the padding length must be even, got {len(pad)} ({tuple(pad)})")
    if len(pad) // 2 > nd:
        raise P.ShapeError(f"pad: {len(pad)} padding values pad {len(pad) // 2} dimensions, the input has {nd} "
                           f"(input.shape={tuple(input.shape)})")
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"pad: mode={mode!r} takes no value argument, got value={value!r}")
    pairs = [(0, 0)] * nd
    for k in range(len(pad) // 2):
        pairs[nd - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    v = 0 if value is None else _number(value)
    return bind(P.pad_p, input, pads=tuple(pairs), mode=mode, value=v)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """``input / max(norm(input, p, dim, keepdim=True), eps)``, as
    ``torch.nn.functional.normalize``."""
    return input / clamp(norm(input, p, dim, keepdim=True), min=eps)


# --- Tensor methods with PyTorch's names (declared in TensorOps) ---------------------

def type_as(x, other):
    """``x`` in ``other``'s dtype (``x`` itself when it already is)."""
    dt = np.dtype(other.dtype)
    return x if np.dtype(x.dtype) == dt else astype(x, dt)


def _sizes(op, sizes):
    sizes = shape_tuple(sizes)
    if not builtins.all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in sizes):
        raise TypeError(f"{op}: sizes must be integers, got {sizes!r}")
    return tuple(int(s) for s in sizes)


def expand(x, *sizes):
    """``x`` broadcast to ``sizes`` (-1 keeps a dimension; new dimensions go
    in front), as ``torch.Tensor.expand``; a view, no copy."""
    sizes = _sizes("expand", sizes)
    shp = tuple(x.shape)
    lead = len(sizes) - len(shp)
    if lead < 0:
        raise P.ShapeError(f"expand: the number of sizes ({len(sizes)}) must be at least x's dimensions "
                           f"({len(shp)}), x.shape={shp}")
    target = []
    for k, s in enumerate(sizes):
        if s == -1:
            if k < lead:
                raise P.ShapeError(f"expand: -1 is not allowed for a new leading dimension ({k}), sizes={sizes}")
            target.append(shp[k - lead])
        elif s < 0:
            raise P.ShapeError(f"expand: invalid size {s} in sizes={sizes}")
        else:
            d = shp[k - lead] if k >= lead else 1
            if d is not None and d != 1 and d != s:
                raise P.ShapeError(f"expand: the size of dimension {k - lead} ({d}) must match sizes[{k}]={s} "
                                   f"unless it is 1 (x.shape={shp}, sizes={sizes})")
            target.append(s)
    if None in target:
        # an unknown dimension kept as it is (a static value): broadcast by a product with ones
        ones = np.ones(tuple(1 if t is None else t for t in target), dtype=np.dtype(x.dtype))
        return x * ones if np.dtype(x.dtype) != np.bool_ else where(ones, x, x)
    target = tuple(target)
    return x if target == shp else broadcast_to(x, target)


def expand_as(x, other):
    """:func:`expand` to ``other``'s shape. An unknown dimension of ``other``
    (a static value) keeps ``x``'s, which must then not be 1 (it could not be
    known whether it broadcasts)."""
    oshp, shp = tuple(other.shape), tuple(x.shape)
    lead = len(oshp) - len(shp)
    sizes = []
    for k, o in enumerate(oshp):
        if o is None:
            if k < lead or shp[k - lead] == 1:
                raise P.ShapeError(f"expand_as: dimension {k} of other.shape={oshp} is unknown, so whether x.shape="
                                   f"{shp} broadcasts to it cannot be decided when the graph is built")
            o = -1
        sizes.append(o)
    return expand(x, *sizes)


def repeat(x, *sizes):
    """``x`` tiled ``sizes[k]`` times along each dimension (new dimensions in
    front), as ``torch.Tensor.repeat`` (numpy's ``tile``)."""
    sizes = _sizes("repeat", sizes)
    shp = tuple(x.shape)
    if len(sizes) < len(shp):
        raise P.ShapeError(f"repeat: the number of repeats ({len(sizes)}) can not be smaller than x's dimensions "
                           f"({len(shp)}), x.shape={shp}")
    if builtins.any(s < 0 for s in sizes):
        raise P.ShapeError(f"repeat: repeats must be non-negative, got {sizes}")
    new = len(sizes) - len(shp)
    shp = (1,) * new + shp
    if None in shp:
        # unknown dimensions (a static value): copies joined along each repeated dimension
        y = x
        for _ in range(new):
            y = unsqueeze(y, 0)
        for k, r in enumerate(sizes):
            if r != 1:
                y = concat([y] * r, axis=k) if r else getitem(y, (slice(None),) * k + (slice(0, 0),))
        return y
    # (1, d0, 1, d1...) broadcast to (r0, d0, r1, d1...) and merged: one copy
    inter = []
    for r, d in zip(sizes, shp):
        inter += [1, d]
    full = []
    for r, d in zip(sizes, shp):
        full += [r, d]
    y = broadcast_to(reshape(x, *inter), tuple(full))
    return reshape(y, *[r * d for r, d in zip(sizes, shp)])


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


# --- torch's rounding, remainders, logical reductions, sorting, scans and
# selections (issue 22). ``round``, ``all`` and ``any`` stay out of __all__: a
# star import would shadow the builtins (dynnets.round etc. are imported by name)

def _int_arg(op, name, v):
    """An integer argument (a Python or numpy int, or a one-element integer tensor), as a Python int."""
    if getattr(type(v), "_is_tensor", False) or isinstance(v, np.ndarray):
        a = np.asarray(v)
        if a.size == 1 and a.dtype.kind in "iu":
            return int(a.reshape(()))
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, got {v!r}")
    return int(v)


def round(input, *, decimals=0):
    """``input`` rounded to ``decimals`` decimal places, halves to even, as
    ``torch.round`` (``round(2.5) == 2``); integer tensors are returned
    unchanged (with ``decimals=0``). The gradient is zero, as torch's."""
    d = _int_arg("round", "decimals", decimals)
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


def _truth(op, input):
    """``input != 0`` (``input`` itself when boolean)."""
    dt = np.dtype(input.dtype)
    if dt.kind == "b":
        return input
    if dt.kind not in "iufc":
        raise P.DTypeError(f"{op}: expected a numeric or boolean input, got dtype {dt}")
    return bind2(P.not_equal_p, input, 0)


def _logical_reduce(op, input, dim, keepdim, count_false):
    t = _truth(op, input)
    counted = bind2(P.equal_p, t, False) if count_false else t
    if dim is None:
        if keepdim:
            n = bind(P.sum_p, astype(counted, np.int64), axis=tuple(builtins.range(len(input.shape))),
                     keepdims=True)
        else:
            n = bind1(P.sum_p, astype(counted, np.int64))
    else:
        n = sum(astype(counted, np.int64), dim, keepdim)
    r = bind2(P.equal_p, n, 0) if count_false else bind2(P.greater_p, n, 0)
    # torch keeps uint8 for uint8 input (the old mask dtype); every other input gives bool
    return astype(r, np.uint8) if np.dtype(input.dtype) == np.uint8 else r


def _numpy_keywords(op, dim, keepdim, axis, keepdims, out):
    """``(dim, keepdim)`` from torch's and numpy's keywords: ``np.all(t)``
    calls ``t.all(axis=None, out=None)``."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (dynnets ops return new tensors), got {type(out).__name__}")
    return _dim(op, axis, dim), _keep(op, keepdims, keepdim)


def all(input, dim=None, keepdim=False, *, axis=None, keepdims=None, out=None):
    """Whether every element is nonzero (over ``dim``, an int or a tuple;
    all of them by default), as ``torch.all`` / ``Tensor.all``: a boolean
    tensor (uint8 for uint8 input, as torch's). numpy's ``axis=`` /
    ``keepdims=`` are accepted too (``np.all(t)`` calls the method)."""
    dim, keepdim = _numpy_keywords("all", dim, keepdim, axis, keepdims, out)
    return _logical_reduce("all", input, dim, keepdim, True)


def any(input, dim=None, keepdim=False, *, axis=None, keepdims=None, out=None):
    """Whether some element is nonzero (over ``dim``), as ``torch.any``."""
    dim, keepdim = _numpy_keywords("any", dim, keepdim, axis, keepdims, out)
    return _logical_reduce("any", input, dim, keepdim, False)


def _known_dim(op, input, dim):
    """``dim`` of ``input`` as a non-negative axis with its (known) size; a
    0-d input has dimension 0 of size 1 where torch allows it."""
    shape = tuple(input.shape)
    nd = len(shape)
    d = _int_arg(op, "dim", dim)
    if not -builtins.max(nd, 1) <= d < builtins.max(nd, 1):
        raise P.IndexRangeError(f"{op}: dimension out of range (expected to be in range of "
                                f"[{-builtins.max(nd, 1)}, {builtins.max(nd, 1) - 1}], but got {d})")
    d %= builtins.max(nd, 1)
    n = shape[d] if nd else 1
    if n is None:
        raise P.ShapeError(f"{op}: dimension {d} of input.shape={shape} must be known")
    return d, n


def narrow(input, dim, start, length):
    """``length`` elements of ``input`` along ``dim`` from ``start`` (which
    may be negative: from the end), as ``torch.narrow`` /
    ``Tensor.narrow``; differentiable (a slice)."""
    if not len(input.shape):
        raise P.ShapeError("narrow: narrow() cannot be applied to a 0-dim tensor")
    d, n = _known_dim("narrow", input, dim)
    start = _int_arg("narrow", "start", start)
    length = _int_arg("narrow", "length", length)
    if length < 0:
        raise P.ShapeError(f"narrow: length must be non-negative, got {length}")
    if not -n <= start <= n:
        raise P.IndexRangeError(f"narrow: start out of range (expected to be in range of [{-n}, {n}], but got "
                                f"{start})")
    if start < 0:
        start += n
    if start + length > n:
        raise P.ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}) of "
                           f"dimension {d}")
    return getitem(input, (builtins.slice(None),) * d + (builtins.slice(start, start + length),))


class SortResult(_ValuesIndices):
    """``(values, indices)`` of :func:`sort` and :func:`topk` (``torch.return_types.sort`` / ``topk``)."""

    __slots__ = ()


def _flag(op, name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be a bool, got {v!r}")
    return bool(v)


def sort(input, dim=-1, descending=False, stable=False):
    """``input`` sorted along ``dim`` (ascending unless ``descending``),
    with the int64 indices of the sorted elements, as ``torch.sort``: a
    ``(values, indices)`` named tuple. Equal elements keep their order
    (torch guarantees it with ``stable=True``; any order is valid without);
    NaN counts as the largest value. The gradient goes back to the sorted
    positions."""
    d, _ = _known_dim("sort", input, dim)
    v, i = bind(P.sort_p, input, axis=d, descending=_flag("sort", "descending", descending),
                stable=_flag("sort", "stable", stable))
    return SortResult(v, i)


def argsort(input, dim=-1, descending=False, stable=False):
    """The int64 indices that sort ``input`` along ``dim``, as ``torch.argsort``."""
    return sort(input, dim, descending, stable)[1]


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (``largest=False``: smallest) elements along
    ``dim`` and their int64 indices, as ``torch.topk``: a ``(values,
    indices)`` named tuple, largest first (smallest first) also with
    ``sorted=False`` (torch then promises no order). Equal elements come in
    index order."""
    d, n = _known_dim("topk", input, dim)
    k = _int_arg("topk", "k", k)
    _flag("topk", "sorted", sorted)
    if not 0 <= k <= n:
        raise P.ShapeError(f"topk: selected index k out of range: k={k} for dimension {d} of size {n} "
                           f"(input.shape={tuple(input.shape)})")
    v, i = sort(input, d, descending=_flag("topk", "largest", largest), stable=True)
    if k == n or not len(input.shape):
        return SortResult(v, i)
    part = (builtins.slice(None),) * d + (builtins.slice(0, k),)
    return SortResult(getitem(v, part), getitem(i, part))


def cumsum(input, dim, *, dtype=None):
    """Cumulative sums along ``dim``, as ``torch.cumsum``: integer and
    boolean input sums in int64; ``dtype=`` casts the input first. The
    gradient is the reversed cumulative sum of the output's."""
    x = input if dtype is None else astype(input, dtype)
    d, _ = _known_dim("cumsum", x, dim)
    return bind(P.cumsum_p, x, axis=d)


def unbind(input, dim=0):
    """The slices of ``input`` along ``dim``, that dimension removed, as a
    tuple (``torch.unbind``): one split node, so the gradient is one
    concatenation, not one full-size array per slice."""
    if not len(input.shape):
        raise P.ShapeError("unbind: dimension specified as 0 but tensor has no dimensions")
    d, n = _known_dim("unbind", input, dim)
    if n == 0:
        return ()
    rest = tuple(input.shape[:d]) + tuple(input.shape[d + 1:])
    return tuple(reshape(p, rest) for p in split(input, 1, d))


def index_select(input, dim, index):
    """The entries of ``input`` at ``index`` (a 1-D or 0-D int64/int32
    tensor) along ``dim``, as ``torch.index_select``; repeated indices add
    their gradients. An index outside ``[0, size)`` raises (numpy would wrap
    a negative one)."""
    if not len(input.shape):
        raise P.ShapeError("index_select: input must have at least one dimension, got a 0-d input")
    d, n = _known_dim("index_select", input, dim)
    idx = _array_of(index)
    if is_interpreted(idx):
        require_concrete("index_select", "index", idx, " (use dynnets.static.gather)")
    if not hasattr(idx, "dtype"):
        raise TypeError(f"index_select: index must be a tensor, got {type(index).__name__}")
    idx = np.asarray(idx)
    if idx.dtype not in (np.int64, np.int32):
        raise P.DTypeError(f"index_select: expected dtype int32 or int64 for index, got {idx.dtype}")
    if idx.ndim > 1:
        raise P.ShapeError(f"index_select: index is supposed to be a vector, got shape {idx.shape}")
    idx = idx.reshape(-1).astype(np.int64, copy=False)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise P.IndexRangeError(f"index_select: index {bad} is out of range for dimension {d} of size {n}")
    return getitem(input, (builtins.slice(None),) * d + (idx,))


def nonzero_tuple(condition):
    """``torch.where(condition)`` / ``nonzero(as_tuple=True)``: one int64
    tensor of indices per dimension of ``condition`` (a 0-d condition
    counts as one element)."""
    t = _truth("where", condition)
    if not len(condition.shape):
        t = reshape(t, 1)
    coords = bind(P.argwhere_p, t)
    return tuple(getitem(coords, (builtins.slice(None), j)) for j in builtins.range(builtins.max(len(condition.shape), 1)))


__all__ += ["remainder", "fmod", "floor_divide", "narrow", "sort", "argsort", "topk", "cumsum", "unbind",
            "index_select", "SortResult", "Size"]


def _bool_operands(op, *xs):
    """A TypeError unless every operand is boolean: torch's ``~ & | ^`` on
    integers are bitwise, which dynnets does not provide, so an integer
    operand is refused rather than given another meaning."""
    for x in xs:
        if not isinstance(x, (bool, np.bool_)) and _dtype(x).kind != "b":
            raise TypeError(f"{op}: expected boolean tensors (masks), got dtype {_dtype(x)}; bitwise operations on "
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


__all__ += ["logical_not", "logical_and", "logical_or", "logical_xor"]


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


def _float_input(op, x):
    """``x``, or ``x`` in float32 when it holds integers or booleans (torch
    computes those ops in its default float dtype)."""
    return x if _dtype(x).kind == "f" else astype(x, np.float32)


def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(input), dim))``, as ``torch.logsumexp`` (``dim`` an int
    or a tuple; an integer input in float32): the largest entry is taken
    out first, so no exp overflows; rows of -inf give -inf, as torch's.
    The gradient is ``softmax(input)`` along ``dim`` times the output's.

    Shapes: ``input`` (...) -> ``input`` without ``dim`` (kept as 1 with ``keepdim``).
    """
    if dim is None or isinstance(dim, (bool, np.bool_)):
        raise TypeError(f"logsumexp: dim must be an int or a tuple of ints, got {dim!r}")
    x = _float_input("logsumexp", input)
    axis = _axis(dim, "logsumexp")
    m = bind(P.stop_gradient_p, bind(P.max_p, x, axis=axis, keepdims=True))
    # an infinite maximum would give inf - inf = nan: shift by 0 there instead
    m = where(eq(abs(m), np.inf), np.zeros((), _dtype(m)), m)
    out = add(log(bind(P.sum_p, exp(sub(x, m)), axis=axis, keepdims=True)), m)
    return out if keepdim else squeeze(out, axis)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product of all elements, or over ``dim`` (one int), as
    ``torch.prod``; ``dtype=`` casts the input first; integers and booleans
    multiply in int64. The gradient is the product of the other entries,
    exact where the input has zeros (as torch's)."""
    x = input if dtype is None else astype(input, dtype)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"prod: dim must be an int (torch.prod reduces one dimension), got {dim!r}")
    if dim is None:
        return bind(P.prod_p, x, keepdims=True) if keepdim else bind(P.prod_p, x)
    return bind(P.prod_p, x, axis=dim, keepdims=bool(keepdim))


def isnan(input):
    """Where ``input`` is NaN, as a boolean tensor (``torch.isnan``)."""
    return not_equal(input, input)


def isinf(input):
    """Where ``input`` is +inf or -inf, as a boolean tensor (``torch.isinf``)."""
    if _dtype(input).kind != "f":
        return not_equal(input, input)      # all False, in input's shape
    return eq(abs(input), np.inf)


def isfinite(input):
    """Where ``input`` is neither NaN nor infinite, as a boolean tensor (``torch.isfinite``)."""
    if _dtype(input).kind != "f":
        return eq(input, input)             # all True, in input's shape
    # NaN < inf is False
    return less(abs(input), np.inf)


def _ndim_is(op, name, x, n):
    if len(x.shape) != n:
        raise P.ShapeError(f"{op}: expected {name} to be a {n}-D tensor, got {len(x.shape)}-D (shape "
                           f"{tuple(x.shape)})")


def outer(input, vec2):
    """The outer product ``input[i] * vec2[j]`` of two 1-D tensors, as ``torch.outer``.

    Shapes: (n,), (m,) -> (n, m).
    """
    _ndim_is("outer", "input", input, 1)
    _ndim_is("outer", "vec2", vec2, 1)
    return mul(reshape(input, -1, 1), reshape(vec2, 1, -1))


def _scale(v, k):
    return v if k == 1 else mul(v, k)


def _plus_product(op, input, product, beta, alpha):
    """``beta * input + alpha * product``; with ``beta == 0`` ``input`` is
    ignored (its NaN and inf do not propagate), as torch's."""
    for name, v in (("beta", beta), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{op}: {name} must be a number, got {v!r}")
    out = _scale(product, alpha)
    if beta == 0:
        shape = _broadcast_shapes_of(op, input, out)
        return out if tuple(out.shape) == shape else broadcast_to(out, shape)
    return add(_scale(input, beta), out)


def _broadcast_shapes_of(op, a, b):
    return P.broadcast_shapes(op, tuple(a.shape), tuple(b.shape), names=["input", "the product"])


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``, as ``torch.addmm``.

    Shapes: ``mat1`` (n, k), ``mat2`` (k, m), ``input`` broadcastable to (n, m) -> (n, m).
    """
    _ndim_is("addmm", "mat1", mat1, 2)
    _ndim_is("addmm", "mat2", mat2, 2)
    return _plus_product("addmm", input, matmul(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``, as ``torch.baddbmm``.

    Shapes: ``batch1`` (b, n, k), ``batch2`` (b, k, m), ``input`` broadcastable to (b, n, m) -> (b, n, m).
    """
    _ndim_is("baddbmm", "batch1", batch1, 3)
    _ndim_is("baddbmm", "batch2", batch2, 3)
    return _plus_product("baddbmm", input, bmm(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``, as ``torch.addbmm``.

    Shapes: ``batch1`` (b, n, k), ``batch2`` (b, k, m), ``input`` broadcastable to (n, m) -> (n, m).
    """
    _ndim_is("addbmm", "batch1", batch1, 3)
    _ndim_is("addbmm", "batch2", batch2, 3)
    return _plus_product("addbmm", input, sum(bmm(batch1, batch2), 0), beta, alpha)


__all__ += ["log1p", "expm1", "logsumexp", "prod", "isnan", "isinf", "isfinite", "outer", "addmm", "baddbmm",
            "addbmm"]


# --- i22-torch-a: scatter / index_add, flip, tril / triu, nonzero, unique, bincount -----------------------

def _concrete_index(op, index, name="index"):
    """``index`` (int64 or int32, as torch takes) as an int64 numpy array;
    a static value has no values to check and is refused."""
    idx = require_concrete(op, name, index)
    if idx.dtype not in (np.int64, np.int32):
        raise P.DTypeError(f"{op}: expected dtype int64 (or int32) for {name}, got {idx.dtype}")
    return idx.astype(np.int64, copy=False)


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """``input`` with ``out[index[i][j]][j] = src[i][j]`` (``dim`` 0; and so on),
    as ``torch.scatter(input, dim, index, src)``; ``src`` may be a number
    (``scatter(input, dim, index, value)``, torch's overload). ``index`` is
    int64 with ``input``'s number of dimensions, no larger than ``src``, and
    no larger than ``input`` outside ``dim``. Gradients: ``input`` gets
    ``g`` outside the written positions, ``src`` ``g.gather(dim, index)``.
    ``reduce="add"`` is :func:`scatter_add`; torch's other (deprecated)
    reductions raise.

    Shapes: input (*), index (*) int64, src (*) -> (*) as input.
    """
    if src is None and value is None:
        raise TypeError("scatter: missing src (a tensor) or value (a number)")
    if src is not None and value is not None:
        raise TypeError("scatter: takes src or value, not both")
    if value is not None:
        src = value
    idx = _concrete_index("scatter", index)
    if not hasattr(src, "shape") or isinstance(src, np.generic):
        if isinstance(src, bool) or not isinstance(src, (int, float, np.integer, np.floating, np.bool_)):
            raise TypeError(f"scatter: src must be a tensor or a number, got {type(src).__name__}")
        src = np.full(idx.shape, src, dtype=np.dtype(input.dtype))
    if reduce is not None:
        if reduce == "add":
            return scatter_add(input, dim, idx, src)
        raise ValueError(f"scatter: reduce={reduce!r} is not supported (torch deprecates it): use "
                         f"scatter_add for 'add' or scatter_reduce")
    return bind(P.scatter_p, input, idx, src, dim=_int_arg("scatter", "dim", dim))


def scatter_add(input, dim, index, src):
    """``input`` with ``out[index[i][j]][j] += src[i][j]`` (``dim`` 0; and so
    on; repeated indices add up), as ``torch.scatter_add``. Gradients:
    ``input`` gets ``g``, ``src`` ``g.gather(dim, index)``.

    Shapes: input (*), index (*) int64, src (*) -> (*) as input.
    """
    idx = _concrete_index("scatter_add", index)
    return bind(P.scatter_add_p, input, idx, src, dim=_int_arg("scatter_add", "dim", dim))


def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` added at the positions ``index`` along
    ``dim`` (``out[index[i]] += alpha * source[i]`` for ``dim`` 0; repeated
    indices add up), as ``torch.index_add``; differentiable in ``input`` and
    ``source`` (a :func:`scatter_add` with the index broadcast along the
    other dimensions).

    Shapes: input (*), index (n,) int64 (or int32), source as input with
    ``n`` along ``dim`` -> input's shape.
    """
    d, n = _known_dim("index_add", input, dim)
    idx = require_concrete("index_add", "index", index)
    if idx.dtype not in (np.int64, np.int32):
        raise P.DTypeError(f"index_add: expected dtype int32 or int64 for index, got {idx.dtype}")
    if idx.ndim > 1:
        raise P.ShapeError(f"index_add: index is supposed to be a vector, got shape {idx.shape}")
    idx = idx.reshape(-1).astype(np.int64, copy=False)
    if np.dtype(source.dtype) != np.dtype(input.dtype):
        raise P.DTypeError(f"index_add: self ({np.dtype(input.dtype)}) and source ({np.dtype(source.dtype)}) must "
                           f"have the same dtype")
    xs, ss = tuple(input.shape), tuple(source.shape)
    want = xs[:d] + (idx.size,) + xs[d + 1:] if xs else (idx.size,)
    if (ss or (1,)) != want:
        raise P.ShapeError(f"index_add: source.shape={ss} must be input.shape={xs} with len(index)={idx.size} "
                           f"along dim {d}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise P.IndexRangeError(f"index_add: index {bad} is out of range for dimension {d} of size {n}")
    if not xs:
        input, source = reshape(input, 1), reshape(source, 1)
    full = np.broadcast_to(idx.reshape((1,) * d + (-1,) + (1,) * (len(want) - d - 1)), want).copy()
    if alpha != 1:
        source = source * alpha
    out = bind(P.scatter_add_p, input, full, source, dim=d)
    return reshape(out, ()) if not xs else out


def flip(input, dims):
    """``input`` reversed along each of ``dims`` (an int or a sequence), as
    ``torch.flip``; differentiable (a reversed view's gradient)."""
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        dims = (dims,)
    nd = len(input.shape)
    seen = set()
    for k in dims:
        d = _int_arg("flip", "dims", k)
        if not -builtins.max(nd, 1) <= d < builtins.max(nd, 1):
            raise P.IndexRangeError(f"flip: dimension out of range (expected to be in range of "
                                    f"[{-builtins.max(nd, 1)}, {builtins.max(nd, 1) - 1}], but got {d})")
        d %= builtins.max(nd, 1)
        if d in seen:
            raise ValueError(f"flip: dim {d} appears multiple times in the list of dims")
        seen.add(d)
    # a copy, as torch's flip (a reversed view would see later in-place writes to input)
    if not nd or not seen:
        return clone(input)
    index = tuple(builtins.slice(None, None, -1) if k in seen else builtins.slice(None) for k in builtins.range(nd))
    return clone(getitem(input, index))


def _triangle(op, input, diagonal, lower):
    if len(input.shape) < 2:
        raise P.ShapeError(f"{op}: input tensor must have at least 2 dimensions, got shape {tuple(input.shape)}")
    k = _int_arg(op, "diagonal", diagonal)
    r, c = input.shape[-2:]
    if r is None or c is None:
        raise P.ShapeError(f"{op}: the last two dimensions of input.shape={tuple(input.shape)} must be known")
    keep = np.tri(r, c, k, dtype=bool) if lower else ~np.tri(r, c, k - 1, dtype=bool)
    return masked_fill(input, ~keep, 0)


def tril(input, diagonal=0):
    """The lower triangle of the last two dimensions (``j - i <= diagonal``
    kept, the rest 0), as ``torch.tril``; differentiable."""
    return _triangle("tril", input, diagonal, True)


def triu(input, diagonal=0):
    """The upper triangle of the last two dimensions (``j - i >= diagonal``
    kept, the rest 0), as ``torch.triu``; differentiable."""
    return _triangle("triu", input, diagonal, False)


def nonzero(input, *, as_tuple=False):
    """The coordinates of the nonzero entries, as ``torch.nonzero``: an int64
    tensor (n, ndim) in row-major order, or with ``as_tuple=True`` one int64
    tensor (n,) per dimension (``torch.where(condition)``)."""
    if as_tuple:
        return nonzero_tuple(input)
    t = _truth("nonzero", input)
    if not len(input.shape):
        return getitem(bind(P.argwhere_p, reshape(t, 1)), (builtins.slice(None), builtins.slice(0, 0)))
    return bind(P.argwhere_p, t)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of ``input`` (flattened, in ascending order), as
    ``torch.unique``; with ``return_inverse`` also each element's position in
    them (input's shape, int64), with ``return_counts`` how often each occurs
    (int64). ``sorted=False`` gives them sorted as well (torch leaves that
    order unspecified). No gradient, as torch's. ``dim=`` is not supported
    (NotImplementedError).
    """
    if dim is not None:
        raise NotImplementedError("unique: dim= (unique slices) is not supported; flatten the slices to rows of a "
                                  "structured comparison, or call unique without dim")
    values, inverse, counts = bind(P.unique_p, input)
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def bincount(input, weights=None, minlength=0):
    """How often each value ``0..max(input)`` occurs in the 1-D non-negative
    int ``input`` (at least ``minlength`` bins; int64), or the sums of
    ``weights`` (float32 weights: float32, other dtypes: float64), as
    ``torch.bincount``; no gradient, as torch's."""
    if weights is None:
        weights = np.zeros((), np.int64)         # a 0-d array: no weights (the primitive's convention)
    elif not len(weights.shape):
        raise P.ShapeError("bincount: weights should be 1-d and have the same length as input, got a 0-d tensor")
    return bind(P.bincount_p, input, weights, minlength=_int_arg("bincount", "minlength", minlength))


__all__ += ["scatter", "scatter_add", "index_add", "flip", "tril", "triu", "nonzero", "unique", "bincount"]


# --- ragged (packed, variable-length) attention (issue 25, branch i25-models) --------

def ragged_offsets(lengths):
    """Offsets ``(B + 1,)`` int64 of sentences of the given ``lengths``
    packed one after another (FlashAttention's ``cu_seqlens``): sentence
    ``b`` is rows ``offsets[b]:offsets[b+1]``."""
    lens = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if lens.size and lens.min() < 0:
        raise P.ShapeError(f"ragged_offsets: lengths must be non-negative, got {int(lens.min())} at position "
                           f"{int(np.argmin(lens))}")
    out = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def pack_sequences(sequences):
    """Sentences ``(T_b, ...)`` (tensors or arrays of one trailing shape)
    concatenated into the packed layout: ``(packed, offsets)`` with
    ``packed`` ``(sum T_b, ...)`` and ``offsets`` ``(B + 1,)`` int64 (see
    :func:`ragged_offsets`). Gradients flow back to each sentence."""
    seqs = list(sequences)
    if not seqs:
        raise ValueError("pack_sequences: expected at least one sequence, got none")
    offsets = ragged_offsets([len(s) for s in seqs])
    return concat(seqs, 0), offsets


def unpack_sequences(packed, offsets):
    """The inverse of :func:`pack_sequences`: the list of ``packed``'s row
    ranges ``packed[offsets[b]:offsets[b+1]]``."""
    o = np.asarray(offsets, dtype=np.int64)
    return [packed[int(a):int(b)] for a, b in zip(o[:-1], o[1:])]


def ragged_attention(query, key, value, offsets, num_heads=1, scale=None, return_lse=False, method=None):
    """Multi-head softmax attention of packed sentences, each over itself
    only (the ``ragged_attention`` primitive: one kernel pass that reads the
    offsets, no padding, no mask, no ``(B, T, T)`` score tensor).

    Parameters
    ----------
    query, key, value : (N, E)
        Packed token rows of all sentences (see :func:`pack_sequences`);
        head ``h`` is columns ``h*E/num_heads:(h+1)*E/num_heads``, as in
        ``torch.nn.MultiheadAttention``.
    offsets : (B + 1,) int
        Sentence boundaries (``cu_seqlens``).
    num_heads : int
    scale : float or None
        Default ``1 / sqrt(E / num_heads)``.
    return_lse : bool
        Also return each row's log-sum-exp of its scores, (N, num_heads).
    method : None, 'grouped', 'kernel' or 'twin'
        How the primitive computes (the same values): BLAS products on
        stacks of equal-length sentences (None, the fastest measured), the
        Numba kernel's one pass over the offsets, or its numpy twin.

    Returns
    -------
    (N, E), and the log-sum-exp with ``return_lse``.
    """
    attrs = {"num_heads": num_heads}
    if scale is not None:
        attrs["scale"] = scale
    if method is not None:
        attrs["method"] = method
    out, lse = bind(P.ragged_attention_p, query, key, value, offsets, **attrs)
    return (out, lse) if return_lse else out


__all__ += ["ragged_offsets", "pack_sequences", "unpack_sequences", "ragged_attention"]


# --- fused encoder-layer ops (issue 25 §3) ----------------------------------------

def linear_act(x, weight, bias, activation="relu"):
    """``activation(x @ weight.T + bias)`` as one primitive (``linear_act``):
    ``relu(F.linear(x, weight, bias))`` or ``gelu(...)`` (exact, erf) with one
    dispatch and one temporary.

    Parameters
    ----------
    x : (..., in_features)
    weight : (out_features, in_features)
    bias : (out_features,)
    activation : 'relu' or 'gelu'

    Returns
    -------
    (..., out_features)
    """
    return bind(P.linear_act_p, x, weight, bias, activation=activation)


def linear_split(x, weight, bias, chunks=3):
    """``F.linear(x, weight, bias).chunk(chunks, -1)`` as one primitive
    (``linear_split``), each part C-contiguous: the q, k, v of a packed
    in-projection (torch's ``in_proj_weight`` (3E, E)) without three slices.

    Parameters
    ----------
    x : (..., in_features)
    weight : (chunks * out, in_features)
    bias : (chunks * out,)
    chunks : int

    Returns
    -------
    tuple of ``chunks`` tensors (..., out)
    """
    return bind(P.linear_split_p, x, weight, bias, chunks=int(chunks))


def add_layer_norm(x, residual, weight, bias, eps=1e-5):
    """``F.layer_norm(x + residual, (D,), weight, bias, eps)`` as one
    primitive (``add_layer_norm``): a residual connection and its post-norm
    (torch's ``nn.TransformerEncoderLayer`` with ``norm_first=False``).

    Parameters
    ----------
    x, residual : (..., D), the same shape (no broadcasting)
    weight, bias : (D,)
    eps : float

    Returns
    -------
    (..., D)
    """
    return bind(P.add_layer_norm_p, x, residual, weight, bias, eps=float(eps))


__all__ += ["linear_act", "linear_split", "add_layer_norm"]
