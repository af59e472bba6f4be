"""``Tensor``: a numpy array with an optional place in the autograd graph.

What a tensor can do is :class:`TensorOps`, the operators and op methods
(``x + y``, ``x @ w``, ``x.sum()``, ``x[idx]``...) declared once and shared
with the static graph's symbolic ``Value`` (as tinygrad's op mixin): each is
an op of :mod:`dynnets.autograd.ops`, so every one goes through the primitive
table. Tensor creation (``tensor``, ``zeros``, ``randn``...) lives here too.

Imports flow one way: ``primitives`` <- ``engine`` <- ``ops`` <- ``tensor``.
The engine creates and recognises tensors without importing this module:
:func:`~dynnets.autograd.engine.register_tensor_types` hands it the classes
(the documented hook at the bottom of this file).
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from . import ops
from .ops import shape_tuple
from . import primitives as P
from .backprop import backward as _backward
from .backprop import memory_base, write_inplace
from .backprop import retain_grad as _retain_grad
from .backprop import retains_grad as _retains_grad
from .engine import alias, bind, bind1, bind2, is_grad_enabled, register_tensor_types
from .gradtypes import LAZY_TYPES, densify
from .values import is_interpreted
from .primitives.core import DTypeError, PromotionNeeded, ShapeError
from ..devices import CPU, DeviceUnavailableError, check_device
from ..random import generator as _generator
from ..random import generator as default_generator_for

__all__ = ["TensorOps", "Tensor", "Parameter", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full",
           "zeros_like", "ones_like", "randn", "uniform", "arange"]


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
        return zeros(*_known_size("new_zeros", size), dtype=self.dtype if dtype is None else dtype, device=device,
                     requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return ones(*_known_size("new_ones", size), dtype=self.dtype if dtype is None else dtype, device=device,
                    requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        return full(_known_size("new_full", (size,)), fill_value, dtype=self.dtype if dtype is None else dtype,
                    device=device, requires_grad=requires_grad)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        """A new tensor of ``data`` in this tensor's dtype (or ``dtype``), as ``torch.Tensor.new_tensor``."""
        return tensor(data, dtype=self.dtype if dtype is None else dtype, device=device,
                      requires_grad=requires_grad)

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


_NDARRAY = np.ndarray
_object_new = object.__new__
_UNSET = object()           # Tensor() without data
_F32, _F64, _F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
_I64, _I32, _B = np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)


#: torch's legacy tensor type names, by dtype (``x.type()``, ``dynnets.FloatTensor``)
LEGACY_TYPES = {np.dtype(np.float32): "FloatTensor", np.dtype(np.float64): "DoubleTensor",
                np.dtype(np.float16): "HalfTensor", np.dtype(np.int64): "LongTensor", np.dtype(np.int32): "IntTensor",
                np.dtype(np.int16): "ShortTensor", np.dtype(np.int8): "CharTensor", np.dtype(np.uint8): "ByteTensor",
                np.dtype(np.bool_): "BoolTensor"}
_LEGACY_DTYPES = {name: dt for dt, name in LEGACY_TYPES.items()}


def legacy_type_name(dt):
    """torch's type string of dtype ``dt`` (``'torch.FloatTensor'``): the
    string torch code compares ``x.type()`` with."""
    name = LEGACY_TYPES.get(dt)
    if name is None:
        raise TypeError(f"type: dtype {dt} has no legacy tensor type name")
    return f"torch.{name}"


def legacy_dtype(where, t):
    """The dtype that ``t`` names: a dtype, a legacy type class
    (``dynnets.LongTensor``: its ``legacy_dtype``) or a type string
    (``'torch.LongTensor'``); a CUDA type string raises
    :class:`~dynnets.devices.DeviceUnavailableError`."""
    if isinstance(t, str):
        mod, _, name = t.rpartition(".")
        if mod.endswith("cuda"):
            raise DeviceUnavailableError(f"{where}: {t!r} is a CUDA type: dynnets computes on the CPU only")
        if name not in _LEGACY_DTYPES or mod not in ("torch", "dynnets", ""):
            raise ValueError(f"{where}: invalid type {t!r} (expected one of "
                             f"{', '.join('torch.' + n for n in _LEGACY_DTYPES)})")
        return _LEGACY_DTYPES[name]
    legacy = getattr(t, "legacy_dtype", None)
    if legacy is not None:
        return legacy
    try:
        return np.dtype(t)
    except TypeError:
        raise TypeError(f"{where}: expected a dtype, a legacy tensor type or a type string, got {t!r}") from None


def legacy_new(where, dt, args, device=None):
    """torch's legacy constructors (``torch.FloatTensor(...)``,
    ``x.new(...)``) in dtype ``dt``: integers are a size (the tensor holds
    zeros, where torch leaves memory unset), one sequence or array is data
    (cast as numpy casts: ``LongTensor([1.5])`` holds 1, as torch), no
    argument an empty tensor, a tensor of dtype ``dt`` is shared; a tensor
    of another dtype or a lone number is a TypeError, as torch's."""
    if device is not None:
        check_device(device, where)
    if not args:
        return wrap_array(np.zeros((0,), dtype=dt))
    if where == "Tensor" and len(args) == 1 and type(args[0]) is tuple and args[0] and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in args[0]):
        # torch reads a torch.Size (x.size(), x.shape) as a shape and any other
        # tuple as data; dynnets' x.shape is numpy's plain tuple, so for
        # torch.Tensor, which scripts call with shapes, a tuple of integers could
        # mean either: an error rather than a silent guess (the typed legacy
        # constructors, FloatTensor((2, 3)), keep torch's reading: data)
        raise TypeError(f"{where}: a tuple of integers {args[0]!r} is ambiguous here: torch reads x.shape and "
                        f"x.size() (a torch.Size) as a shape, any other tuple as data, and dynnets' x.shape is a "
                        f"plain tuple. Pass a shape as sizes ({where}(*x.shape)) or x.size(), data as a list")
    if len(args) == 1 and isinstance(args[0], ops.Size):
        args = tuple(args[0])
        if not args:
            return wrap_array(np.zeros((), dtype=dt))
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in args):
        if any(a < 0 for a in args):
            raise ShapeError(f"{where}: trying to create a tensor with a negative dimension: {list(args)}")
        return wrap_array(np.zeros(tuple(int(a) for a in args), dtype=dt))
    if len(args) > 1:
        raise TypeError(f"{where}: expected sizes (integers) or one sequence of data, got {args!r}")
    data = args[0]
    if isinstance(data, Tensor):
        if np.dtype(data.dtype) != dt:
            raise TypeError(f"{where}: expected a tensor of dtype {dt}, got one of dtype {data.dtype} (convert it "
                            f"with .to() or .type())")
        return data.detach()
    if isinstance(data, (numbers.Number, np.generic)) or is_interpreted(data):
        raise TypeError(f"{where}: data must be a sequence (got {type(data).__name__}); for a 0-d tensor use "
                        f"tensor(value, dtype=...)")
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(f"{where}: could not convert {type(data).__name__} to a tensor: {e}") from None
    if arr.dtype.kind in "OUSV":
        raise TypeError(f"{where}: could not convert {type(data).__name__} to a tensor (ragged nested lists, or "
                        f"objects that are not numbers)")
    return wrap_array(arr.astype(dt, copy=False))


def _known_size(op, size):
    size = shape_tuple(size)
    if any(d is None for d in size):
        raise ShapeError(f"{op}: size {size} has an unknown dimension (a static value's shape); a constant needs "
                         f"every size")
    return size


def wrap_array(arr, requires_grad=False, name=None):
    """A :class:`Tensor` over the numpy array ``arr`` as it is: its dtype
    kept, its memory shared (no copy, no cast). The package's own way to make
    a tensor of an array it computed; the public ``Tensor(arr)`` is torch's
    legacy constructor, which casts to float32.

    Parameters
    ----------
    arr : np.ndarray, any shape
    requires_grad : bool
        Only for a floating-point ``arr`` (TypeError otherwise, as torch's).
    name : str or None
    """
    rg = bool(requires_grad)
    if rg and arr.dtype.kind != "f":
        raise TypeError(f"tensor: only floating-point tensors can require grad, got dtype {arr.dtype}")
    t = _object_new(Tensor)
    t._data = arr
    t._grad = None
    t.requires_grad = rg
    t._node = None
    t._idx = 0
    t.name = name
    return t


class Tensor(TensorOps):
    """A numpy array with an optional place in the autograd graph.

    Create tensors with :func:`dynnets.tensor`, :func:`dynnets.zeros` and
    friends. Calling the class is torch's legacy constructor (see
    :func:`_construct`): ``Tensor([0, 2, 2])`` is float32 data,
    ``Tensor(2, 3)`` and ``Tensor(x.size())`` a float32 tensor of that shape
    (zeros: torch leaves the memory unset), ``Tensor()`` empty, ``Tensor(t)``
    an alias of tensor ``t``; ``Tensor(array)`` is float32 as torch's (a
    float32 array shared, any other cast: ``Tensor(np.array([1, 2]))`` holds
    1.0 and 2.0), also with dynnets' keywords ``requires_grad=`` and
    ``name=`` (torch's constructor refuses them; ``dtype=`` makes that dtype).
    To keep an array's dtype, use :func:`dynnets.tensor` (a copy) or
    :func:`dynnets.from_numpy` (shared). :meth:`numpy` is the numpy array (the same memory); ``.data``
    is, as torch's, a tensor on that memory cut from the graph; ``.grad`` is
    filled by :meth:`backward` for leaves with ``requires_grad=True``.

    The array lives in the slot ``_data``, which the modules that create and
    implement tensors read and write directly: this one, the engine (handed
    the classes by :func:`~dynnets.autograd.engine.register_tensor_types`:
    its ops read the slot on every application, where a property call
    would cost ~25 ns per argument) and autobatching (whose
    :class:`~dynnets.autograd.autobatching.LazyTensor`, registered with
    ``register_lazy_type``, computes the slot on first read). Any other code
    reads the array with :meth:`numpy` and replaces it with ``.data = ...``.
    """

    __slots__ = ("_data", "_grad", "requires_grad", "_node", "_idx", "name", "__weakref__")
    __array_priority__ = 1000      # ndarray (op) Tensor defers to Tensor's reflected dunder
    _is_tensor = True

    def __new__(cls, data=_UNSET, *more, requires_grad=False, dtype=None, name=None, device=None):
        # Calling the class is torch's legacy constructor torch.Tensor(...):
        # float32, a float32 numpy array shared and any other cast, as torch's
        # (see _construct). dynnets' keywords requires_grad=, dtype= and
        # name= are accepted with an array. The package wraps an array of
        # any dtype with wrap_array. Done here, with no __init__, rather than
        # in a metaclass __call__: a custom metaclass costs every
        # isinstance(x, Tensor) of a non-Tensor x ~30 ns (CPython's fast path
        # needs the class's type to be exactly type): measured 45 -> 61-107
        # ns. Subclasses (Parameter) initialise in their __init__.
        if cls is not Tensor:
            return _object_new(cls)
        if isinstance(data, _NDARRAY) and not more:
            if device is not None:
                check_device(device, "Tensor")
            if dtype is not None:
                arr = np.asarray(data, dtype=dtype)
            elif data.dtype is _F32 or data.dtype == _F32:
                arr = data
            elif data.dtype.kind in "biuf":
                arr = data.astype(_F32)
            else:
                raise TypeError(f"Tensor: can't convert a numpy array of dtype {data.dtype} to float32 (torch's "
                                f"legacy constructor takes bool, integer and floating-point arrays)")
            return wrap_array(arr, requires_grad, name)
        if dtype is not None or name is not None or requires_grad:
            raise TypeError(f"Tensor: requires_grad=, dtype= and name= take a numpy array as data (torch's legacy "
                            f"constructor takes none of them), got {type(data).__name__}; use "
                            f"dynnets.tensor(data, dtype=..., requires_grad=...)")
        args = more if data is _UNSET else (data,) + more
        return _construct(args, device)

    def _wrap(self, data, requires_grad=False, dtype=None, name=None):
        """Hold the array of ``data`` (shared when it is one of ``dtype``)."""
        arr = np.asarray(data, dtype=dtype)
        if requires_grad and arr.dtype.kind != "f":
            raise TypeError(f"tensor: only floating-point tensors can require grad, got dtype {arr.dtype}")
        self._data = arr
        self._grad = None
        self.requires_grad = bool(requires_grad)
        self._node = None
        self._idx = 0
        self.name = name

    # --- basic attributes -------------------------------------------------
    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def device(self):
        """``device(type='cpu')``: every tensor lives on the CPU."""
        return CPU

    is_cuda = False

    def cuda(self, device=None, non_blocking=False):
        """Raises :class:`~dynnets.devices.DeviceUnavailableError` (an
        AssertionError too, as torch built without CUDA raises): there is no
        GPU, and a silent CPU copy would hide that."""
        raise DeviceUnavailableError("Tensor.cuda: no CUDA device: dynnets computes on the CPU only "
                                     "(dynnets.cuda.is_available() is False); guard the call with "
                                     "`if dynnets.cuda.is_available():` or use .to(device) with device='cpu'")

    def get_device(self):
        """-1, torch's answer for a CPU tensor."""
        return -1

    def __len__(self):
        return len(self._data)

    @property
    def is_leaf(self):
        return self._node is None

    @property
    def grad_fn(self):
        """The recorded :class:`~dynnets.autograd.engine.Node` that produced this tensor
        (``None`` for a leaf), as PyTorch's ``grad_fn``: its ``parents`` lead to the
        inputs' tensors, so the recording can be walked (and drawn) before backward."""
        return self._node

    @property
    def grad(self):
        """The accumulated gradient as a Tensor (``None`` before backward),
        on the gradient's memory: ``p.grad.data.mul_(s)`` or
        ``p.grad.clamp_(-c, c)`` change the gradient the optimizer reads, as
        torch's.

        A row-sparse gradient (from :func:`embedding`) is given as a dense
        copy, read-only: the optimizers read the sparse form, so a change of
        the copy would be lost; an in-place op on it raises instead (assign
        ``p.grad = new`` to replace the gradient).
        """
        g = self._grad
        if g is None:
            return None
        tg = type(g)
        if tg is not _NDARRAY:
            if tg in LAZY_TYPES:
                g = densify(g)
                g.flags.writeable = False
            else:
                # a numpy scalar (a 0-d leaf's gradient) is immutable: an array
                # in its place, so that writes through p.grad stay
                g = self._grad = np.array(g)
        return wrap_array(g)

    @grad.setter
    def grad(self, value):
        if value is None:
            self._grad = None
        else:
            v = value._data if isinstance(value, Tensor) else np.asarray(value)
            if v.shape != self._data.shape:
                raise ShapeError(f"grad: shape {v.shape} does not match tensor shape {self._data.shape}")
            self._grad = v

    @property
    def raw_grad(self):
        """The accumulated gradient in the form backward stored it (not in
        torch): None, a numpy array, or a lazy gradient of
        :mod:`dynnets.autograd.gradtypes` (a :class:`RowSparse` from an
        embedding lookup). What the optimizers, ``zero_grad`` and
        ``clip_grad_norm_`` read and write: :attr:`grad` densifies a
        row-sparse gradient (a dense read-only copy), which would make a
        sparse step dense. Setting it stores the value as it is (None, or an
        array or RowSparse of this tensor's shape)."""
        return self._grad

    @raw_grad.setter
    def raw_grad(self, value):
        if value is not None and tuple(value.shape) != self._data.shape:
            raise ShapeError(f"raw_grad: shape {tuple(value.shape)} does not match tensor shape {self._data.shape}")
        self._grad = value

    # --- the array: numpy(), .data, detach() ------------------------------
    def _own_array(self):
        """The array, made one first when the slot holds a numpy scalar (a
        whole-tensor reduction's result, which is immutable): handing out
        that scalar would give a copy, and torch's ``.data``, ``.numpy()``
        and ``detach()`` share this tensor's memory."""
        d = self._data
        if not isinstance(d, np.ndarray):
            d = self._data = np.array(d)
        return d

    def numpy(self, *, force=False):
        """This tensor's numpy array itself: memory shared, writes to either
        show in both (as ``torch.Tensor.numpy``).

        Unlike torch, a tensor that requires grad gives its array too (torch
        raises and asks for ``detach().numpy()``, which works here as well).
        Changing the array in place is not seen by autograd's version check:
        write through the tensor (``t.data.add_(...)``, ``t[i] = v``) where a
        recorded op saved it. ``force`` is accepted for torch's signature (on
        the CPU the array is always shared).
        """
        d = self._data
        return d if type(d) is _NDARRAY else self._own_array()

    @property
    def data(self):
        """A new tensor on this tensor's memory, cut from the graph, as
        torch's ``.data``: ``requires_grad`` False, no ``grad_fn``, and ops on
        it are not recorded; changes through it (``p.data.add_(g, alpha=-lr)``,
        ``w.data.normal_()``, ``x.data[0] = 5``) change this tensor.

        Differences from torch: where torch's ``.data`` writes are invisible
        to the version counter (so a backward through an op that saved the
        old values silently uses the new ones, torch's documented danger),
        here they are in-place writes like any other, logged per block of
        memory, and that backward raises. Prefer ``with dn.no_grad():`` on the
        tensor itself, or :meth:`detach`, as torch's documentation does.

        Setting it (``w.data = t``, ``t`` a Tensor, whose memory is then
        shared, or a numpy array) replaces the array, of any shape and dtype
        (a tensor that requires grad needs a floating-point one), as torch.
        An optimizer holding state for this tensor raises at its next step
        if the state no longer fits, as torch's.
        """
        d = self._data
        if type(d) is not _NDARRAY:
            d = self._own_array()
        t = _object_new(Tensor)
        t._data = d
        t._grad = None
        t.requires_grad = False
        t._node = None
        t._idx = 0
        t.name = None
        return t

    @data.setter
    def data(self, value):
        if isinstance(value, Tensor):
            arr = value._data
            if type(arr) is not _NDARRAY:
                arr = value._own_array()
        elif isinstance(value, np.ndarray):
            arr = value
        else:
            raise TypeError(f"Tensor.data: a tensor's data must be set to a Tensor (or a numpy array), got "
                            f"{type(value).__name__}")
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"Tensor.data: a tensor holds numbers, got an array of dtype {arr.dtype}")
        if self.requires_grad and arr.dtype.kind != "f":
            raise RuntimeError(f"Tensor.data: data set to a tensor that requires gradients must be floating point, "
                               f"got dtype {arr.dtype}")
        self._data = arr

    def contiguous(self):
        """``self`` when its array is C-contiguous, else a contiguous copy
        (differentiable), as ``torch.Tensor.contiguous``. A lazy tensor
        (autobatch) is returned as it is: its layout is decided when it runs."""
        if type(self) is not Tensor and type(self) is not Parameter:
            return self
        d = self._data
        return self if type(d) is not np.ndarray or d.flags.c_contiguous else ops.clone(self)

    def is_contiguous(self):
        d = self._data
        return type(d) is not np.ndarray or bool(d.flags.c_contiguous)

    def __array__(self, dtype=None, copy=None):
        d = self._data
        if type(d) is not np.ndarray:
            d = np.asarray(d)            # a whole-tensor reduction's result is a numpy scalar: numpy wants an array
        if dtype is not None and d.dtype != dtype:
            return d.astype(dtype)
        # numpy 2 leaves the copy to __array__ when it takes copy=: np.array(t) (copy=True) must not
        # hand out the tensor's own memory (a snapshot of state_dict() values would change with the model)
        return d.copy() if copy else d

    def item(self):
        if self._data.size != 1:
            raise ValueError(f"item: only a one-element tensor can be converted to a Python scalar, got shape {self._data.shape}")
        return self._data.item()

    def tolist(self):
        return self._data.tolist()

    def detach(self):
        """A new leaf sharing this tensor's memory, cut from the graph (as
        torch's; unlike ``.data``, torch counts writes through it in the
        version counter, and here writes through either are checked)."""
        d = self._data
        if type(d) is not _NDARRAY:
            d = self._own_array()
        t = _object_new(Tensor)
        t._data = d
        t._grad = None
        t.requires_grad = False
        t._node = None
        t._idx = 0
        t.name = None
        return t

    def requires_grad_(self, requires_grad=True):
        if not self.is_leaf:
            raise RuntimeError("requires_grad_: can only change requires_grad of a leaf tensor")
        if requires_grad and self._data.dtype.kind != "f":
            raise TypeError(f"requires_grad_: only floating-point tensors can require grad, got dtype {self._data.dtype}")
        self.requires_grad = bool(requires_grad)
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        ``gradient`` is required for a non-scalar tensor (the vector of the
        vector-Jacobian product). The graph is freed afterwards unless
        ``retain_graph=True``. ``inputs`` (tensors, as torch's): accumulate
        into those tensors' ``.grad`` only, leaves or not. Non-leaf tensors
        marked by :meth:`retain_grad` get their ``.grad`` too.
        ``create_graph=True`` (double backward) raises NotImplementedError:
        gradients are computed on numpy arrays, outside the graph.
        """
        if create_graph:
            raise NotImplementedError(_NO_DOUBLE_BACKWARD.format(op="backward"))
        if inputs is not None and isinstance(inputs, Tensor):
            inputs = (inputs,)
        _backward(self, gradient, retain_graph, inputs)

    def __repr__(self):
        body = np.array2string(self._data, precision=4, separator=", ", threshold=20,
                               prefix="tensor(")
        extra = ""
        if self._data.dtype != np.float32:
            extra += f", dtype={self._data.dtype}"
        if self._node is not None:
            extra += f", grad_fn=<{self._node.prim.name}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __bool__(self):
        if self._data.size != 1:
            raise ValueError("The truth value of a tensor with more than one element is ambiguous")
        return bool(self._data)

    def __hash__(self):
        return id(self)

    def __format__(self, spec):
        # a 0-d tensor formats as its number (f"{acc:.3f}"), as torch's
        if self._data.ndim == 0:
            return self._data.item().__format__(spec)
        return object.__format__(self, spec)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        # torch: a one-element integer tensor indexes a Python list (items[perm[i]])
        d = self._data
        if d.size != 1 or d.dtype.kind not in "iub":
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(d.item() if type(d) is np.ndarray else d)

    def __iter__(self):
        for i in range(len(self._data)):
            yield self[i]

    # --- in-place ops, as torch's: the same array object changes (whoever
    # holds the tensor, its .data or its numpy() sees it); see backprop.write_inplace for
    # when they raise and how they are recorded for gradients

    def add_(self, other, *legacy, alpha=1):
        """``self += alpha * other`` in place (``torch.Tensor.add_``).

        torch's deprecated overload ``add_(alpha, other)`` (a number, then a
        tensor: the old SGD step ``p.data.add_(-lr, p.grad.data)``) works as
        torch's, with its warning."""
        if legacy:
            other, alpha = _legacy_alpha("add_", other, legacy, alpha)
        if alpha != 1:
            other = other * alpha
        return write_inplace("add_", self, P.add_p, (other,), _NO_ATTRS, _write_add)

    def sub_(self, other, *legacy, alpha=1):
        """``self -= alpha * other`` in place (also torch's deprecated ``sub_(alpha, other)``)."""
        if legacy:
            other, alpha = _legacy_alpha("sub_", other, legacy, alpha)
        if alpha != 1:
            other = other * alpha
        return write_inplace("sub_", self, P.sub_p, (other,), _NO_ATTRS, _write_sub)

    def mul_(self, other):
        """``self *= other`` in place."""
        return write_inplace("mul_", self, P.mul_p, (other,), _NO_ATTRS, _write_mul)

    def div_(self, other):
        """``self /= other`` in place (true division: an integer tensor raises, as torch)."""
        return write_inplace("div_", self, P.div_p, (other,), _NO_ATTRS, _write_div)

    def pow_(self, exponent):
        """``self **= exponent`` in place."""
        return write_inplace("pow_", self, P.pow_p, (exponent,), _NO_ATTRS, _write_pow)

    def clamp_(self, min=None, max=None):
        """Clamp to ``[min, max]`` in place (either may be None); numbers only."""
        for nm, v in (("min", min), ("max", max)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real)):
                raise TypeError(f"clamp_: {nm} must be a real number or None, got {type(v).__name__}")
        if min is None and max is None:
            raise ValueError("clamp_: at least one of min and max must be given")
        return write_inplace("clamp_", self, P.clip_p, (), {"lo": min, "hi": max}, _write_clip)

    clip_ = clamp_

    def relu_(self):
        """``max(self, 0)`` in place (``torch.Tensor.relu_``, what
        ``nn.ReLU(inplace=True)`` calls); NaN stays NaN, as torch's."""
        return write_inplace("relu_", self, P.relu_p, (), _NO_ATTRS, _write_relu)

    def fill_(self, value):
        """Every element set to ``value`` (a number or a 0-d tensor), cast to this tensor's dtype."""
        if isinstance(value, Tensor) and value._data.ndim != 0:
            raise ShapeError(f"fill_: only supports a 0-dimension value tensor, got one with shape "
                             f"{value._data.shape}")
        return write_inplace("fill_", self, P.setitem_p, (value,), _ALL, _write_set, casting="unsafe")

    def zero_(self):
        """Every element set to 0."""
        return self.fill_(0)

    def copy_(self, other):
        """The values of ``other`` (broadcast to this tensor's shape, cast to its
        dtype); torch's binding names the argument ``other`` (its documentation ``src``)."""
        src = tuple(np.shape(other)) if not hasattr(other, "shape") else tuple(other.shape)
        dst = self._data.shape
        if src != dst and (len(src) > len(dst) or any(s not in (1, d) for s, d in zip(src[::-1], dst[::-1]))):
            # numpy would also drop leading size-1 dimensions of other; torch does not
            raise RuntimeError(f"copy_: other of shape {src} does not broadcast to this tensor's shape {dst}")
        return write_inplace("copy_", self, P.setitem_p, (other,), _ALL, _write_set, casting="unsafe")

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fill in place with draws from N(mean, std^2), as ``torch.Tensor.normal_``.

        Parameters
        ----------
        mean, std : float
        generator : numpy.random.Generator, optional
            A :class:`dynnets.Generator` or any numpy generator; by default
            :data:`dynnets.default_generator` (seeded by
            :func:`dynnets.manual_seed`). The numbers are numpy's (drawn in
            float64, rounded to this tensor's dtype once), the same that
            ``dynnets.nn.init.normal_`` draws from the same generator state.
        """
        if std < 0:
            raise ValueError(f"normal_: expects std >= 0.0, but found std {std}")
        shape = self._random_fill_shape("normal_")
        return write_inplace("normal_", self, P.setitem_p, (_generator(generator).normal(mean, std, shape),),
                             _ALL, _write_set, casting="unsafe")

    def uniform_(self, *bounds, generator=None, **names):
        """``uniform_(from=0, to=1, *, generator=None)``: fill in place with
        draws from U(from, to), as ``torch.Tensor.uniform_`` (``from`` is a
        Python keyword: pass the bounds by position, ``x.uniform_(-0.1,
        0.1)``, or as ``**{"from": a, "to": b}``, as in torch). The generator
        and the numbers are as :meth:`normal_`'s (and ``nn.init.uniform_``'s).
        """
        if len(bounds) > 2:
            raise TypeError(f"uniform_: takes at most 2 positional bounds (from, to), got {len(bounds)}")
        for k in names:
            if k not in ("from", "to"):
                raise TypeError(f"uniform_: got an unexpected keyword argument {k!r} (torch's are 'from' and 'to')")
        lo, hi = (tuple(bounds) + (0.0, 1.0)[len(bounds):])
        if "from" in names:
            if len(bounds) >= 1:
                raise TypeError("uniform_: got multiple values for argument 'from'")
            lo = names["from"]
        if "to" in names:
            if len(bounds) == 2:
                raise TypeError("uniform_: got multiple values for argument 'to'")
            hi = names["to"]
        if lo > hi:
            raise ValueError(f"uniform_: expects to return a [from, to) range, but found from={lo} > to={hi}")
        shape = self._random_fill_shape("uniform_")
        return write_inplace("uniform_", self, P.setitem_p, (_generator(generator).uniform(lo, hi, shape),),
                             _ALL, _write_set, casting="unsafe")

    def _random_fill_shape(self, op):
        d = self._data
        if d.dtype.kind != "f":
            raise DTypeError(f"{op}: expects a floating-point tensor, got dtype {d.dtype}")
        return d.shape

    def __setitem__(self, index, value):
        """``self[index] = value``: any index ``x[index]`` takes; ``value``
        broadcast to the indexed region and cast to this tensor's dtype."""
        index = ops.index_arg(index)
        absorb = None
        if isinstance(value, Tensor) and value._node is not None and type(value._data) is np.ndarray:
            absorb = _same_region(value._data, self._data, index)
        write_inplace("setitem", self, P.setitem_p, (value,), {"index": index}, _write_set,
                      casting="unsafe", absorb=value if absorb else None)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def __ipow__(self, other):
        return self.pow_(other)

    def __reduce_ex__(self, protocol):
        # pickled (save() of a whole Module, copy.deepcopy) as its values, requires_grad and name, as
        # torch's: the graph node (whose rules are local functions, not picklable) and .grad stay behind
        return (_rebuild_tensor, (isinstance(self, Parameter), self.numpy(), bool(self.requires_grad), self.name))


def _rebuild_tensor(is_parameter, arr, requires_grad, name):
    if is_parameter:
        # through a Tensor, which Parameter shares: copy.copy keeps sharing the memory, as torch's
        return Parameter(wrap_array(arr), requires_grad=requires_grad, name=name)
    return wrap_array(arr, requires_grad=requires_grad and arr.dtype.kind == "f", name=name)


class Parameter(Tensor):
    """A leaf tensor that a :class:`dynnets.nn.Module` registers as a parameter.
    ``requires_grad`` defaults to True (as ``torch.nn.Parameter``).

    Made from a floating-point Tensor it shares that tensor's memory, as
    torch's (``Parameter(t)`` then ``t.fill_(1)`` changes both); from a numpy
    array or other data it holds a copy. Integer or boolean data becomes
    float32 (torch raises: only floating-point tensors can require grad).
    """

    __slots__ = ()

    def __init__(self, data, requires_grad=True, name=None):
        arr = data._own_array() if isinstance(data, Tensor) else np.array(data)
        if arr.dtype.kind != "f":
            arr = arr.astype(np.float32)
        self._wrap(arr, requires_grad=requires_grad, name=name)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()




register_tensor_types(Tensor, Parameter)



def _construct(args, device=None):
    """torch's legacy constructor ``Tensor(*args, device=None)`` in float32,
    for arguments other than a numpy array (which :class:`Tensor` shares when
    it is float32 and casts to float32 otherwise, as torch's).

    * One tensor: an alias of it (its dtype, its memory, and in the graph:
      the gradient flows back), as torch's.
    * Sizes (``Tensor(2, 3)``, ``Tensor(x.size())``, a
      :class:`~dynnets.autograd.ops.Size`): zeros of that shape (torch:
      uninitialised memory). Data (``Tensor([0, 2, 2])``, nested lists of
      numbers or 0-d tensors): cast to float32. ``Tensor()``: empty. A lone
      number and a plain tuple of integers raise TypeError (see
      :func:`legacy_new`).
    """
    if len(args) == 1 and isinstance(args[0], Tensor):
        a = args[0]
        if device is not None:
            check_device(device, "Tensor")
        if a.requires_grad and is_grad_enabled():
            return alias(a, a._own_array() if type(a._data) is not _NDARRAY else a._data)
        return a.detach()
    return legacy_new("Tensor", _F32, args, device)

_NO_ATTRS = {}
_ALL = {"index": Ellipsis}


def _legacy_alpha(op, first, rest, alpha):
    """``(other, alpha)`` of torch's deprecated ``op(alpha, other)`` call."""
    if len(rest) != 1 or alpha != 1 or isinstance(first, bool) or not isinstance(first, numbers.Number):
        raise TypeError(f"{op}: takes (other, *, alpha=1), or torch's deprecated (alpha, other) with alpha a "
                        f"number; got {1 + len(rest)} positional arguments starting with {type(first).__name__}")
    warnings.warn(f"This overload of {op} is deprecated: {op}(Number alpha, Tensor other); use "
                  f"{op}(Tensor other, *, Number alpha = 1) instead (as torch)", UserWarning, stacklevel=3)
    return rest[0], first


def _write_add(dst, o):
    np.add(dst, o, out=dst, casting="unsafe")


def _write_sub(dst, o):
    np.subtract(dst, o, out=dst, casting="unsafe")


def _write_mul(dst, o):
    np.multiply(dst, o, out=dst, casting="unsafe")


def _write_div(dst, o):
    np.true_divide(dst, o, out=dst, casting="unsafe")


def _write_pow(dst, o):
    np.power(dst, o, out=dst, casting="unsafe")


def _write_relu(dst):
    np.maximum(dst, 0, out=dst, casting="unsafe")


def _write_clip(dst, lo=None, hi=None):
    np.clip(dst, lo, hi, out=dst, casting="unsafe")


def _write_set(dst, v, index=Ellipsis):
    dst[index] = v


def _same_region(a, dst, index):
    """Whether array ``a`` is exactly the memory of ``dst[index]`` (``t =
    x[i]; t += v; x[i] = t``, Python's ``x[i] += v``)."""
    if a.base is None or memory_base(a) is not memory_base(dst):
        return False
    try:
        r = dst[index]
        if type(r) is not np.ndarray:
            r = dst[(index if type(index) is tuple else (index,)) + (Ellipsis,)]   # as getitem's element view
    except (IndexError, TypeError, ValueError):
        return False
    return (type(r) is np.ndarray and r.shape == a.shape and r.strides == a.strides
            and r.__array_interface__["data"][0] == a.__array_interface__["data"][0])


# --- creation ----------------------------------------------------------------

_f32 = np.float32


def _has_float64(data):
    """Whether a nested list holds a float64 array, tensor or numpy scalar,
    which keeps float64 in PyTorch's inference (Python floats alone give the
    default float32)."""
    for v in data:
        tp = type(v)
        if tp is float or tp is int or tp is bool:
            continue
        if tp is list or tp is tuple:
            if _has_float64(v):
                return True
        elif getattr(v, "dtype", None) == np.float64:
            return True
    return False


def _inferred(data):
    """``data`` as a new array of the dtype ``torch.tensor`` infers: a
    tensor's or array's (or numpy scalar's) own dtype; for Python data bool,
    int64, the default float32 (a Python float anywhere) or complex64, where a
    float64 array or numpy scalar in a list keeps float64."""
    if isinstance(data, Tensor):
        return np.array(data._data)
    if isinstance(data, (np.ndarray, np.generic)):
        return np.array(data)
    arr = np.array(data)
    if arr.dtype == np.float64:
        if not ((type(data) is list or type(data) is tuple) and _has_float64(data)):
            arr = arr.astype(_f32)
    elif arr.dtype == np.complex128:
        arr = arr.astype(np.complex64)
    elif arr.dtype.kind == "O":
        raise TypeError(f"tensor: could not infer a dtype for data of type {type(data).__name__} (ragged nested "
                        f"lists, or objects that are not numbers)")
    return arr


def tensor(data, *, dtype=None, device=None, requires_grad=False, name=None):
    """A new leaf tensor holding a copy of ``data``, as ``torch.tensor``.

    Without ``dtype`` the dtype is inferred as PyTorch's: Python ints give
    int64, bools bool, Python floats the default float32; a numpy array or
    numpy scalar keeps its dtype (float64 stays float64), and so does a
    tensor. Class labels ``tensor([1, 0])`` are therefore integers.
    ``device``: the CPU (None, ``'cpu'``, ``device('cpu')``); any other
    raises :class:`~dynnets.devices.DeviceUnavailableError`, as every
    creation function's.
    """
    if device is not None:
        check_device(device, "tensor")
    arr = _inferred(data) if dtype is None else np.array(data._data if isinstance(data, Tensor) else data,
                                                              dtype=dtype)
    return wrap_array(arr, requires_grad=requires_grad, name=name)


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor without copying where possible, as ``torch.as_tensor``:
    a tensor of the requested dtype (or with ``dtype=None``) is ``data`` itself, a
    numpy array of that dtype is shared, not copied; other data is converted
    with :func:`tensor`'s dtype inference."""
    if device is not None:
        check_device(device, "as_tensor")
    x = data
    if isinstance(x, Tensor):
        return x if dtype is None or x.dtype == np.dtype(dtype) else ops.astype(x, dtype)
    if isinstance(x, np.ndarray):
        return wrap_array(x if dtype is None else np.asarray(x, dtype=dtype))
    return wrap_array(_inferred(x) if dtype is None else np.asarray(x, dtype=dtype))


def from_numpy(a):
    """A tensor sharing ``a``'s memory (writes to either show in both), as
    ``torch.from_numpy``: ``a`` must be a numpy array of numbers."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(a).__name__})")
    if a.dtype.kind not in "biufc":
        raise TypeError(f"from_numpy: can't convert an array of dtype {a.dtype}; it takes bool, integer, float "
                        f"and complex arrays")
    return wrap_array(a)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """Zeros of ``size`` (``zeros(2, 3)`` or ``zeros((2, 3))``), float32 by
    default, as ``torch.zeros``."""
    if device is not None:
        check_device(device, "zeros")
    return wrap_array(np.zeros(shape_tuple(size), dtype=_f32 if dtype is None else dtype), requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """Ones of ``size``, float32 by default, as ``torch.ones``."""
    if device is not None:
        check_device(device, "ones")
    return wrap_array(np.ones(shape_tuple(size), dtype=_f32 if dtype is None else dtype), requires_grad=requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """``size`` filled with ``fill_value``; the dtype, unless given, inferred
    from the value as ``torch.full``: bool, int64 or the default float32."""
    if device is not None:
        check_device(device, "full")
    if dtype is None:
        dtype = _inferred(fill_value).dtype
    return wrap_array(np.full(size, fill_value, dtype=dtype), requires_grad=requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    """Zeros of ``input``'s shape and (unless ``dtype``) dtype, as ``torch.zeros_like``."""
    if device is not None:
        check_device(device, "zeros_like")
    return wrap_array(np.zeros_like(np.asarray(input), dtype=dtype), requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    """Ones of ``input``'s shape and (unless ``dtype``) dtype, as ``torch.ones_like``."""
    if device is not None:
        check_device(device, "ones_like")
    return wrap_array(np.ones_like(np.asarray(input), dtype=dtype), requires_grad=requires_grad)


def _scalar(v):
    """A 0-d tensor or numpy scalar bound (``arange(x.size(0))``, ``arange(t)``) as its Python number."""
    if isinstance(v, (Tensor, np.ndarray, np.generic)):
        return np.asarray(v).item()
    return v


def arange(start=None, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """``[start, end)`` by ``step`` (``arange(end)`` and ``arange(end=n)`` from
    0), as ``torch.arange``: int64 for integer arguments, the default float32
    when any is a float (numpy: float64)."""
    if device is not None:
        check_device(device, "arange")
    start, end, step = _scalar(start), _scalar(end), _scalar(step)
    if end is None:
        if start is None:
            raise TypeError("arange: missing the end (arange(end), arange(start, end[, step]))")
        start, end = 0, start
    elif start is None:
        start = 0
    if dtype is None:
        floats = any(isinstance(a, (float, np.floating)) for a in (start, end, step))
        dtype = _f32 if floats else np.int64
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"arange: upper bound and larger bound inconsistent with step sign (start={start}, "
                         f"end={end}, step={step})")
    return wrap_array(np.arange(start, end, step, dtype=dtype), requires_grad=requires_grad)


def randn(*size, generator=None, rng=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples of ``size`` (float32 by default), as
    ``torch.randn``: drawn from ``generator=`` (torch's name) or ``rng=`` (a
    seed or a ``numpy.random.Generator``), by default from the default
    generator that :func:`dynnets.manual_seed` seeds (numpy's stream, not
    torch's numbers)."""
    if device is not None:
        check_device(device, "randn")
    gen = _random_source("randn", generator, rng)
    arr = gen.standard_normal(shape_tuple(size)).astype(_f32 if dtype is None else dtype)
    return wrap_array(arr, requires_grad=requires_grad)


def uniform(*shape, low=0.0, high=1.0, rng=None, dtype=_f32, requires_grad=False):
    """Uniform samples on [low, high); ``rng`` is a seed or a
    ``numpy.random.Generator`` (None: the default generator, as :func:`randn`)."""
    arr = _random_source("uniform", None, rng).uniform(low, high, shape_tuple(shape)).astype(dtype)
    return wrap_array(arr, requires_grad=requires_grad)


def _random_source(op, generator, rng):
    """The generator a random creation function draws from: ``generator=``
    or ``rng=`` (one of them), else the default generator."""
    if generator is not None and rng is not None:
        raise TypeError(f"{op}: got both generator= and rng=; they name the same thing, pass one")
    return default_generator_for(rng if generator is None else generator)


# --- torch's maths methods and sampling (branch i22-torch-b) -----------------------
#
# The maths methods are the ops (eager, static and lazy values alike). The
# sampling functions draw from ``generator=`` (a numpy generator such as
# dynnets.Generator) or the default generator dynnets.manual_seed seeds:
# numpy's streams, not torch's numbers, so only distributions match torch.

for _name in ("logsumexp", "prod", "isnan", "isinf", "isfinite", "outer", "addmm", "baddbmm", "addbmm",
              "log1p", "expm1"):
    setattr(TensorOps, _name, getattr(ops, _name))
del _name


def _concrete(op, name, x):
    """The float array of a tensor argument of a sampling function."""
    if is_interpreted(x):
        raise TypeError(f"{op}: {name} must be an eager tensor (a static graph draws with dynnets.static.random "
                        f"ops), got a static value")
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    a = x._data
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating-point {name}, got dtype {a.dtype}")
    return np.asarray(a)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Category indices drawn with the weights of each row of ``input`` (as
    ``torch.multinomial``): rows need not sum to 1; without ``replacement``
    each row draws ``num_samples`` distinct categories (at most its number of
    non-zero weights).

    Shapes: ``input`` (C,) or (N, C) -> int64 (num_samples,) or (N, num_samples).
    """
    w = _concrete("multinomial", "input", input)
    if w.ndim not in (1, 2):
        raise ShapeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {w.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive integer, got {num_samples!r}")
    rows = w.reshape(-1, w.shape[-1]).astype(np.float64)
    n = rows.shape[1]
    if not replacement and num_samples > n:
        raise ValueError(f"multinomial: cannot sample n_sample={num_samples} > prob_dist.size(-1)={n} samples "
                         f"without replacement")
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise ValueError("multinomial: probability tensor contains either inf, nan or element < 0")
    totals = rows.sum(axis=1)
    if np.any(totals <= 0):
        raise ValueError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and np.any((rows > 0).sum(axis=1) < num_samples):
        raise ValueError(f"multinomial: invalid multinomial distribution (with replacement=False, not enough "
                         f"non-negative category to sample): num_samples={num_samples}")
    rng = _generator(generator)
    out = np.stack([rng.choice(n, size=int(num_samples), replace=bool(replacement), p=r / t)
                    for r, t in zip(rows, totals)]).astype(np.int64)
    return wrap_array(out.reshape(w.shape[:-1] + (int(num_samples),)))


def _probabilities(op, p):
    if np.any(~((p >= 0) & (p <= 1))):
        raise ValueError(f"{op}: all elements of input should be between 0 and 1")
    return p


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or the number ``p``), else 0, in
    ``input``'s shape and dtype, as ``torch.bernoulli``."""
    x = _concrete("bernoulli", "input", input)
    probs = _probabilities("bernoulli", x if p is None else np.full(x.shape, _prob("bernoulli", p)))
    return wrap_array((_generator(generator).random(x.shape) < probs).astype(x.dtype))


def _prob(op, p):
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) or not 0 <= p <= 1:
        raise ValueError(f"{op}: p must be a number in [0, 1], got {p!r}")
    return float(p)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False):
    """Draws from N(mean, std^2), as ``torch.normal``: ``mean`` and ``std``
    tensors (broadcast together) or numbers, the result in the tensors'
    float dtype; two numbers need ``size`` (float32 by default, or
    ``dtype``). The result is a draw, not differentiable: for a
    reparametrised sample write ``mean + std * randn_like(mean)``."""
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not (tm or ts):
        if size is None:
            raise TypeError("normal: with a number mean and a number std, size is required "
                            "(normal(mean, std, size))")
        dt = np.dtype(np.float32 if dtype is None else dtype)
        if dt.kind != "f":
            raise DTypeError(f"normal: dtype must be a floating-point type, got {dt}")
        if std < 0:
            raise ValueError(f"normal: expects std >= 0.0, but found std {std}")
        arr = _generator(generator).normal(mean, std, shape_tuple((size,)) if isinstance(size, int) else
                                           shape_tuple(size))
        return wrap_array(arr.astype(dt), requires_grad=requires_grad)
    if size is not None:
        raise TypeError("normal: size is only taken with a number mean and a number std")
    m = _concrete("normal", "mean", mean) if tm else np.asarray(mean, dtype=np.float64)
    s = _concrete("normal", "std", std) if ts else np.asarray(std, dtype=np.float64)
    if np.any(s < 0):
        raise ValueError("normal: expects all elements of std >= 0.0")
    dt = np.result_type(*[a.dtype for a, t in ((m, tm), (s, ts)) if t]) if dtype is None else np.dtype(dtype)
    shape = np.broadcast_shapes(m.shape, s.shape)
    arr = _generator(generator).standard_normal(shape) * s + m
    return wrap_array(arr.astype(dt), requires_grad=requires_grad)


def _tensor_bernoulli(self, p=None, *, generator=None):
    """``bernoulli(self)`` (or with the number ``p``), as ``torch.Tensor.bernoulli``."""
    return bernoulli(self, p, generator=generator)


def _bernoulli_(self, p=0.5, *, generator=None):
    """Fill in place with 1 with probability ``p`` (a number, or a tensor
    broadcast to this one's shape), else 0, as ``torch.Tensor.bernoulli_``."""
    shape = self._random_fill_shape("bernoulli_")
    if isinstance(p, Tensor):
        probs = np.broadcast_to(_probabilities("bernoulli_", _concrete("bernoulli_", "p", p)), shape)
    else:
        probs = _prob("bernoulli_", p)
    draws = _generator(generator).random(shape) < probs
    return write_inplace("bernoulli_", self, P.setitem_p, (draws,), _ALL, _write_set, casting="unsafe")


def _exponential_(self, lambd=1.0, *, generator=None):
    """Fill in place with draws from the exponential distribution of rate
    ``lambd`` (mean ``1/lambd``), as ``torch.Tensor.exponential_``."""
    if isinstance(lambd, bool) or not isinstance(lambd, (int, float, np.integer, np.floating)) or not lambd > 0:
        raise ValueError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    shape = self._random_fill_shape("exponential_")
    draws = _generator(generator).exponential(1.0 / lambd, shape)
    return write_inplace("exponential_", self, P.setitem_p, (draws,), _ALL, _write_set, casting="unsafe")


def _tensor_multinomial(self, num_samples, replacement=False, *, generator=None):
    """``multinomial(self, ...)``, as ``torch.Tensor.multinomial``."""
    return multinomial(self, num_samples, replacement, generator=generator)


Tensor.bernoulli = _tensor_bernoulli
Tensor.bernoulli_ = _bernoulli_
Tensor.exponential_ = _exponential_
Tensor.multinomial = _tensor_multinomial


# --- i22-torch-a: retain_grad, autograd.grad ----------------------------------------------------------

_NO_DOUBLE_BACKWARD = ("{op}: create_graph=True (double backward, gradients of gradients) is not supported: "
                       "dynnets computes gradients on numpy arrays outside the graph, so a gradient has no "
                       "history to differentiate again")


def _tensor_retain_grad(self):
    """Fill this non-leaf tensor's ``.grad`` in later backward passes, as
    torch's ``retain_grad`` (a leaf's is filled anyway). RuntimeError when
    it does not require grad."""
    _retain_grad(self)


def _tensor_retains_grad(self):
    """Whether :meth:`retain_grad` was called on this non-leaf tensor."""
    return _retains_grad(self)


Tensor.retain_grad = _tensor_retain_grad
Tensor.retains_grad = property(_tensor_retains_grad)


def _tensors(where, what, x):
    seq = (x,) if isinstance(x, Tensor) else tuple(x)
    for i, t in enumerate(seq):
        if not isinstance(t, Tensor):
            raise TypeError(f"{where}: {what}[{i}] must be a tensor, got {type(t).__name__}")
    return seq


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, as
    ``torch.autograd.grad``: sum over outputs of the vector-Jacobian products
    with ``grad_outputs``, returned as a tuple with one tensor per input;
    no ``.grad`` is changed.

    Parameters
    ----------
    outputs : Tensor or sequence of Tensors
    inputs : Tensor or sequence of Tensors
        Leaves or not; each must require grad.
    grad_outputs : None, Tensor or sequence (Tensor, array or None)
        The vector for each output, of its shape; None for a scalar output
        (ones).
    retain_graph : bool or None
        Keep the graph for another backward (default: ``create_graph``).
    create_graph : bool
        True raises NotImplementedError (no double backward here).
    allow_unused : bool or None
        An input the outputs do not depend on is an error unless True
        (then its gradient is None, or zeros with ``materialize_grads``).
    is_grads_batched : bool
        True raises NotImplementedError.
    materialize_grads : bool
        Zeros, not None, for unused inputs (implies ``allow_unused``).

    Returns
    -------
    tuple of Tensor or None
        ``grads[i]`` has ``inputs[i]``'s shape and dtype.
    """
    if create_graph:
        raise NotImplementedError(_NO_DOUBLE_BACKWARD.format(op="autograd.grad"))
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched=True is not supported; loop over the "
                                  "grad_outputs (or use dynnets' autobatch)")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("autograd.grad: materialize_grads=True needs allow_unused=True (or None)")
    outs = _tensors("autograd.grad", "outputs", outputs)
    ins = _tensors("autograd.grad", "inputs", inputs)
    if grad_outputs is None:
        gos = (None,) * len(outs)
    else:
        gos = (grad_outputs,) if isinstance(grad_outputs, (Tensor, np.ndarray)) else tuple(grad_outputs)
    if len(gos) != len(outs):
        raise ValueError(f"autograd.grad: grad_outputs has {len(gos)} entries, outputs {len(outs)}")
    for i, t in enumerate(ins):
        if not t.requires_grad:
            raise RuntimeError(f"autograd.grad: inputs[{i}] does not require grad")
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"autograd.grad: outputs[{i}] does not require grad and does not have a grad_fn")
    keep = create_graph if retain_graph is None else bool(retain_graph)
    saved = [t._grad for t in ins]
    try:
        for t in ins:
            t._grad = None
        for k, (o, go) in enumerate(zip(outs, gos)):
            _backward(o, go, keep or k < len(outs) - 1, ins)
        res = []
        for i, t in enumerate(ins):
            g = t._grad
            if g is None:
                if not allow_unused:
                    raise RuntimeError(f"autograd.grad: inputs[{i}] was not used in the graph of the outputs; "
                                       f"pass allow_unused=True if this is the desired behavior")
                res.append(wrap_array(np.zeros_like(t._data)) if materialize_grads else None)
                continue
            if type(g) in LAZY_TYPES:
                g = densify(g)
            res.append(wrap_array(np.asarray(g)))
    finally:
        for t, g in zip(ins, saved):
            t._grad = g
    return tuple(res)


# --- i22-torch-a: scatter / index_add / masked_fill (and in place), flip, tril / triu, nonzero, unique,
# bincount as methods (the static Value shares TensorOps, as every op method)

def _inplace_result(op, self, result):
    """``self`` takes the value of ``result`` (an out-of-place op of ``self``)
    through the in-place machinery (version counter, leaf checks, the new
    history), as ``copy_``: the gradient reaches ``self``'s old history
    through ``result``'s node."""
    return write_inplace(op, self, P.setitem_p, (result,), _ALL, _write_set, casting="unsafe")


def _masked_fill_(self, mask, value):
    """:func:`~dynnets.masked_fill` in place (``torch.Tensor.masked_fill_``);
    the mask broadcasts to this tensor's shape."""
    return _inplace_result("masked_fill_", self, ops.masked_fill(self, mask, value))


def _index_add_(self, dim, index, source, *, alpha=1):
    """:func:`~dynnets.index_add` in place (``torch.Tensor.index_add_``)."""
    return _inplace_result("index_add_", self, ops.index_add(self, dim, index, source, alpha=alpha))


def _scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    """:func:`~dynnets.scatter` in place (``torch.Tensor.scatter_``)."""
    return _inplace_result("scatter_", self, ops.scatter(self, dim, index, src, value=value, reduce=reduce))


def _scatter_add_(self, dim, index, src):
    """:func:`~dynnets.scatter_add` in place (``torch.Tensor.scatter_add_``)."""
    return _inplace_result("scatter_add_", self, ops.scatter_add(self, dim, index, src))


for _name in ("scatter", "scatter_add", "index_add", "flip", "tril", "triu", "nonzero", "unique", "bincount"):
    setattr(TensorOps, _name, getattr(ops, _name))
Tensor.masked_fill_ = _masked_fill_
Tensor.index_add_ = _index_add_
Tensor.scatter_ = _scatter_
Tensor.scatter_add_ = _scatter_add_
del _name


def tensor_like(x):
    """``x`` for a layer that takes tensors: a tensor or an interpreted value
    (a static graph's, see :mod:`dynnets.autograd.values`) unchanged, an
    array-like wrapped (no gradient, no copy)."""
    if isinstance(x, Tensor) or is_interpreted(x):
        return x
    return wrap_array(np.asarray(x))
