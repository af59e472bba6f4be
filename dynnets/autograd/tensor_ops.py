"""What a tensor can do: :class:`TensorOps`, the operators and op methods
(``x + y``, ``x @ w``, ``x.sum()``, ``x[idx]``...) declared once and shared by
the eager :class:`~dynnets.autograd.tensor.Tensor` and the static graph's
symbolic ``Value`` (as tinygrad's op mixin): each is an op of
:mod:`dynnets.autograd.ops`, so every one goes through the primitive table.

The module sits below :mod:`~dynnets.autograd.tensor`, whose class derives
from the mixin; the few methods that make a new eager tensor (``new_zeros``,
``new_tensor``, ``new``...) do it with :func:`~dynnets.autograd.engine.wrap_array`,
as the engine makes op results.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import ops
from . import primitives as P
from .engine import bind1, bind2, wrap_array
from .ops import shape_tuple
from .primitives.core import PromotionNeeded, ShapeError
from .tensor_legacy import legacy_dtype, legacy_new, legacy_type_name
from ..devices import check_device

__all__ = ["TensorOps"]

_F32, _F64, _F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
_I64, _I32, _B = np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)


# the operand types of an elementwise comparison, tested by type first (one set
# lookup) before the isinstance chain of _is_operand
_OPERANDS = frozenset({float, int, bool, np.ndarray, np.float64, np.float32, np.int64, np.int32, np.bool_})


def _is_operand(o):
    """Whether ``o`` can be compared elementwise with a tensor: a tensor or
    symbolic value, a numpy array or scalar, a number, a list or tuple."""
    return isinstance(o, (TensorOps, np.ndarray, np.generic, numbers.Number, list, tuple))


def _operand(op, o):
    if type(o) in _OPERANDS or _is_operand(o):
        return o
    raise TypeError(f"{op}: other must be a tensor, an array or a number, got {type(o).__name__}")


class TensorOps:
    """The operators and op methods of :class:`Tensor` and of the static
    graph's ``Value``: each is a public op of :mod:`dynnets.autograd.ops`
    with the tensor as its first argument (the reflected operators swap the
    operands). ``==`` and ``!=`` compare elementwise (boolean results, no
    gradient), as torch's and TF2's, while hashing stays by identity, so
    tensors and values remain dict keys and set members (look them up with
    ``is`` or ``id()``, never with ``in`` on a list)."""

    __slots__ = ()

    # arithmetic operators (binding the primitive directly: one call per operator; mixed
    # dtypes that PyTorch promotes otherwise than numpy are cast, see ops.promoted)
    def __add__(self, o):
        try:
            return bind2(P.add_p, self, o)
        except PromotionNeeded:
            return ops.promoted(P.add_p, self, o)

    def __radd__(self, o):
        try:
            return bind2(P.add_p, o, self)
        except PromotionNeeded:
            return ops.promoted(P.add_p, o, self)

    def __sub__(self, o):
        try:
            return bind2(P.sub_p, self, o)
        except PromotionNeeded:
            return ops.promoted(P.sub_p, self, o)

    def __rsub__(self, o):
        try:
            return bind2(P.sub_p, o, self)
        except PromotionNeeded:
            return ops.promoted(P.sub_p, o, self)

    def __mul__(self, o):
        try:
            return bind2(P.mul_p, self, o)
        except PromotionNeeded:
            return ops.promoted(P.mul_p, self, o)

    def __rmul__(self, o):
        try:
            return bind2(P.mul_p, o, self)
        except PromotionNeeded:
            return ops.promoted(P.mul_p, o, self)

    def __truediv__(self, o):
        try:
            return bind2(P.div_p, self, o)
        except PromotionNeeded:
            return ops.promoted(P.div_p, self, o)

    def __rtruediv__(self, o):
        try:
            return bind2(P.div_p, o, self)
        except PromotionNeeded:
            return ops.promoted(P.div_p, o, self)

    def __pow__(self, o):
        try:
            return bind2(P.pow_p, self, o)
        except PromotionNeeded:
            return ops.promoted(P.pow_p, self, o)

    def __rpow__(self, o):
        try:
            return bind2(P.pow_p, o, self)
        except PromotionNeeded:
            return ops.promoted(P.pow_p, o, self)

    def __matmul__(self, o):
        return bind2(P.matmul_p, self, o)

    def __rmatmul__(self, o):
        return bind2(P.matmul_p, o, self)

    def __neg__(self):
        return bind1(P.neg_p, self)

    # boolean masks: ~m, a & b, a | b, a ^ b (torch's bitwise forms on integers are refused)
    def __invert__(self):
        return ops.logical_not(self)

    def __and__(self, o):
        return ops.logical_and(self, o)

    def __rand__(self, o):
        return ops.logical_and(o, self)

    def __or__(self, o):
        return ops.logical_or(self, o)

    def __ror__(self, o):
        return ops.logical_or(o, self)

    def __xor__(self, o):
        return ops.logical_xor(self, o)

    def __rxor__(self, o):
        return ops.logical_xor(o, self)

    # comparisons: boolean results, no gradient
    __lt__ = ops.less
    __le__ = ops.less_equal
    __gt__ = ops.greater
    __ge__ = ops.greater_equal

    def __eq__(self, o):
        # NotImplemented for what is not array-like (None, a string, an
        # object): Python then compares identities, so ``t == None`` is
        # False and ``t != None`` True, as torch
        if type(o) in _OPERANDS or _is_operand(o):
            return bind2(P.equal_p, self, o)
        return NotImplemented

    def __ne__(self, o):
        if type(o) in _OPERANDS or _is_operand(o):
            return bind2(P.not_equal_p, self, o)
        return NotImplemented

    # defining __eq__ would make the class unhashable: identity, as torch's
    __hash__ = object.__hash__

    def eq(self, other):
        """``self == other`` elementwise (``torch.Tensor.eq``); ``other`` a
        tensor, an array or a number (anything else is a TypeError)."""
        return bind2(P.equal_p, self, _operand("eq", other))

    def ne(self, other):
        """``self != other`` elementwise (``torch.Tensor.ne``)."""
        return bind2(P.not_equal_p, self, _operand("ne", other))

    def lt(self, other):
        """``self < other`` elementwise (``torch.Tensor.lt``)."""
        return bind2(P.less_p, self, _operand("lt", other))

    def le(self, other):
        """``self <= other`` elementwise (``torch.Tensor.le``)."""
        return bind2(P.less_equal_p, self, _operand("le", other))

    def gt(self, other):
        """``self > other`` elementwise (``torch.Tensor.gt``)."""
        return bind2(P.greater_p, self, _operand("gt", other))

    def ge(self, other):
        """``self >= other`` elementwise (``torch.Tensor.ge``)."""
        return bind2(P.greater_equal_p, self, _operand("ge", other))

    # indexing
    __getitem__ = ops.getitem

    # elementwise
    exp = ops.exp
    log = ops.log
    tanh = ops.tanh
    sigmoid = ops.sigmoid
    relu = ops.relu
    sqrt = ops.sqrt
    abs = ops.abs
    clip = ops.clip
    pow = ops.pow
    square = ops.square
    astype = ops.astype

    # reductions
    sum = ops.sum
    mean = ops.mean
    max = ops.max
    min = ops.min
    argmax = ops.argmax
    argmin = ops.argmin

    # linear algebra and softmaxes
    matmul = ops.matmul
    softmax = ops.softmax
    log_softmax = ops.log_softmax

    # shapes
    reshape = ops.reshape
    view = ops.reshape
    flatten = ops.flatten
    squeeze = ops.squeeze
    unsqueeze = ops.unsqueeze
    transpose = ops.transpose
    T = property(ops.transpose)
    permute = ops.permute
    t = ops.t
    clone = ops.clone
    size = ops.size
    numel = ops.numel
    nelement = ops.numel

    def dim(self):
        """The number of dimensions, as ``torch.Tensor.dim`` (``ndim``)."""
        return len(self.shape)

    ndimension = dim

    # PyTorch's names (each a dynnets op, so eager, static and autobatch alike)
    split = ops.split
    chunk = ops.chunk
    gather = ops.gather
    masked_fill = ops.masked_fill
    clamp = ops.clamp
    clamp_min = ops.clamp_min
    clamp_max = ops.clamp_max
    norm = ops.norm
    bmm = ops.bmm
    expand = ops.expand
    expand_as = ops.expand_as
    repeat = ops.repeat
    type_as = ops.type_as
    to = ops.to
    cpu = ops.cpu
    add = ops.add
    sub = ops.sub
    mul = ops.mul
    div = ops.div
    neg = ops.neg
    sin = ops.sin
    sign = ops.sign
    cos = ops.cos
    std = ops.std
    var = ops.var
    mm = ops.mm
    dot = ops.dot
    broadcast_to = ops.broadcast_to
    # rounding, remainders, logical reductions, sorting, scans, selections (issue 22)
    round = ops.round
    remainder = ops.remainder
    fmod = ops.fmod
    floor_divide = ops.floor_divide
    all = ops.all
    any = ops.any
    narrow = ops.narrow
    sort = ops.sort
    argsort = ops.argsort
    topk = ops.topk
    cumsum = ops.cumsum
    unbind = ops.unbind
    index_select = ops.index_select

    # maths, selections and scatters (issue 22)
    logsumexp = ops.logsumexp
    prod = ops.prod
    isnan = ops.isnan
    isinf = ops.isinf
    isfinite = ops.isfinite
    outer = ops.outer
    addmm = ops.addmm
    baddbmm = ops.baddbmm
    addbmm = ops.addbmm
    log1p = ops.log1p
    expm1 = ops.expm1
    scatter = ops.scatter
    scatter_add = ops.scatter_add
    index_add = ops.index_add
    flip = ops.flip
    tril = ops.tril
    triu = ops.triu
    nonzero = ops.nonzero
    unique = ops.unique
    bincount = ops.bincount

    # Python's % and //, as torch's (and TF1's floormod / floordiv)
    def __mod__(self, o):
        return ops.remainder(self, o)

    def __rmod__(self, o):
        return ops.remainder(o, self)

    def __floordiv__(self, o):
        return ops.floor_divide(self, o)

    def __rfloordiv__(self, o):
        return ops.floor_divide(o, self)

    def contiguous(self):
        """``self``: a static or lazy value has no memory layout to change
        (:class:`Tensor` copies a non-contiguous array, as torch)."""
        return self

    def is_contiguous(self):
        return True

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        """Zeros of ``size`` in this tensor's dtype (or ``dtype``), as ``torch.Tensor.new_zeros``."""
        check_device(device, "new_zeros")
        return wrap_array(np.zeros(_known_size("new_zeros", size), dtype=self.dtype if dtype is None else dtype),
                          requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        check_device(device, "new_ones")
        return wrap_array(np.ones(_known_size("new_ones", size), dtype=self.dtype if dtype is None else dtype),
                          requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        check_device(device, "new_full")
        return wrap_array(np.full(_known_size("new_full", (size,)), fill_value,
                                  dtype=self.dtype if dtype is None else dtype), requires_grad=requires_grad)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        """A new tensor of ``data`` in this tensor's dtype (or ``dtype``), as ``torch.Tensor.new_tensor``."""
        check_device(device, "new_tensor")
        arr = np.array(data.numpy() if getattr(type(data), "_is_tensor", False) else data,
                       dtype=self.dtype if dtype is None else dtype)
        return wrap_array(arr, requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        """A tensor of ``size`` in this tensor's dtype (or ``dtype``), as
        ``torch.Tensor.new_empty``; its values are zeros (torch leaves them
        unset: any value is right)."""
        if device is not None:
            check_device(device, "new_empty")
        return self.new_zeros(*size, dtype=dtype, requires_grad=requires_grad)

    def new(self, *args, device=None):
        """torch's legacy constructor in this tensor's dtype:
        ``x.new(2, 3)`` (a tensor of that size, here zeros), ``x.new([1, 2])``
        (data, cast), ``x.new()`` (empty); prefer ``new_zeros`` /
        ``new_tensor``."""
        return legacy_new("Tensor.new", np.dtype(self.dtype), args, device)

    def is_floating_point(self):
        """Whether the dtype is a floating-point one (``torch.is_floating_point``)."""
        return np.dtype(self.dtype).kind == "f"

    def type(self, dtype=None, non_blocking=False):
        """torch's type string (``'torch.FloatTensor'``) without an argument;
        with a dtype, a legacy type (``dynnets.LongTensor``) or a type string,
        this tensor in that dtype (itself when it already is), as
        ``torch.Tensor.type``."""
        if dtype is None:
            return legacy_type_name(np.dtype(self.dtype))
        return ops.to(self, legacy_dtype("Tensor.type", dtype))

    def view_as(self, other):
        """This tensor with ``other``'s shape, as ``torch.Tensor.view_as``."""
        return ops.reshape(self, *tuple(other.shape))

    def reshape_as(self, other):
        """This tensor with ``other``'s shape, as ``torch.Tensor.reshape_as``."""
        return ops.reshape(self, *tuple(other.shape))

    # dtype conversions, last in the class body: their names are builtins' (self when the dtype is already it)
    def float(self):
        return ops.to(self, _F32)

    def double(self):
        return ops.to(self, _F64)

    def half(self):
        return ops.to(self, _F16)

    def long(self):
        return ops.to(self, _I64)

    def int(self):
        return ops.to(self, _I32)

    def bool(self):
        return ops.to(self, _B)


def _known_size(op, size):
    """``size`` (``f(2, 3)`` or ``f((2, 3))``) as a shape whose every dimension is known."""
    size = shape_tuple(size)
    if any(d is None for d in size):
        raise ShapeError(f"{op}: size {size} has an unknown dimension (a static value's shape); a constant needs "
                         f"every size")
    return size
