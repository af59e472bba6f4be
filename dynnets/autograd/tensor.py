"""``Tensor``: a numpy array with an optional place in the autograd graph.

What a tensor can do is :class:`~dynnets.autograd.tensor_ops.TensorOps`,
the operators and op methods (``x + y``, ``x @ w``, ``x.sum()``,
``x[idx]``...) shared with the static graph's symbolic ``Value``; this
module adds what only an eager tensor has: its array, its gradient, its
place in the graph and the in-place ops. Tensor creation (``tensor``,
``zeros``, ``randn``...) is in :mod:`~dynnets.autograd.creation`.

Imports flow one way: ``primitives`` <- ``engine`` <- ``ops`` <-
``tensor_ops`` <- ``tensor`` <- ``creation``. The engine creates and
recognises tensors without importing this module:
:func:`~dynnets.autograd.engine.register_tensor_types` hands it the classes
(the documented hook below the classes), and
:func:`~dynnets.autograd.engine.wrap_array` makes a tensor of an array.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from . import ops
from . import primitives as P
from .backprop import backward as _backward
from .backprop import memory_base, write_inplace
from .backprop import retain_grad as _retain_grad
from .backprop import retains_grad as _retains_grad
from .engine import alias, is_grad_enabled, register_tensor_types, wrap_array
from .gradtypes import LAZY_TYPES, densify
from .primitives.core import ShapeError
from .tensor_legacy import legacy_new
from .tensor_ops import TensorOps
from .values import is_interpreted
from ..devices import CPU, DeviceUnavailableError, check_device

__all__ = ["TensorOps", "Tensor", "Parameter", "wrap_array", "tensor_like", "NO_DOUBLE_BACKWARD"]

_NDARRAY = np.ndarray
_object_new = object.__new__
_UNSET = object()           # Tensor() without data
_F32 = np.dtype(np.float32)

#: The message of ``backward(create_graph=True)`` and ``autograd.grad(create_graph=True)``.
NO_DOUBLE_BACKWARD = ("{op}: create_graph=True (double backward, gradients of gradients) is not supported: "
                      "dynnets computes gradients on numpy arrays outside the graph, so a gradient has no "
                      "history to differentiate again")


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
            raise NotImplementedError(NO_DOUBLE_BACKWARD.format(op="backward"))
        if inputs is not None and isinstance(inputs, Tensor):
            inputs = (inputs,)
        _backward(self, gradient, retain_graph, inputs)

    def retain_grad(self):
        """Fill this non-leaf tensor's ``.grad`` in later backward passes, as
        torch's ``retain_grad`` (a leaf's is filled anyway). RuntimeError when
        it does not require grad."""
        _retain_grad(self)

    @property
    def retains_grad(self):
        """Whether :meth:`retain_grad` was called on this non-leaf tensor."""
        return _retains_grad(self)

    # draws from this tensor's weights (torch's sampling methods)
    bernoulli = ops.bernoulli
    multinomial = ops.multinomial

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

    # sampling in place, as torch's (dynnets.autograd.ops.random)
    normal_ = ops.normal_
    uniform_ = ops.uniform_
    bernoulli_ = ops.bernoulli_
    exponential_ = ops.exponential_

    def __setitem__(self, index, value):
        """``self[index] = value``: any index ``x[index]`` takes; ``value``
        broadcast to the indexed region and cast to this tensor's dtype."""
        index = ops.index_arg(index)
        absorb = None
        if isinstance(value, Tensor) and value._node is not None and type(value._data) is np.ndarray:
            absorb = _same_region(value._data, self._data, index)
        write_inplace("setitem", self, P.setitem_p, (value,), {"index": index}, _write_set,
                      casting="unsafe", absorb=value if absorb else None)

    def masked_fill_(self, mask, value):
        """:func:`~dynnets.masked_fill` in place (``torch.Tensor.masked_fill_``);
        the mask broadcasts to this tensor's shape."""
        return _inplace_result("masked_fill_", self, ops.masked_fill(self, mask, value))

    def index_add_(self, dim, index, source, *, alpha=1):
        """:func:`~dynnets.index_add` in place (``torch.Tensor.index_add_``)."""
        return _inplace_result("index_add_", self, ops.index_add(self, dim, index, source, alpha=alpha))

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        """:func:`~dynnets.scatter` in place (``torch.Tensor.scatter_``)."""
        return _inplace_result("scatter_", self, ops.scatter(self, dim, index, src, value=value, reduce=reduce))

    def scatter_add_(self, dim, index, src):
        """:func:`~dynnets.scatter_add` in place (``torch.Tensor.scatter_add_``)."""
        return _inplace_result("scatter_add_", self, ops.scatter_add(self, dim, index, src))

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


def _inplace_result(op, self, result):
    """``self`` takes the value of ``result`` (an out-of-place op of ``self``)
    through the in-place machinery (version counter, leaf checks, the new
    history), as ``copy_``: the gradient reaches ``self``'s old history
    through ``result``'s node."""
    return write_inplace(op, self, P.setitem_p, (result,), _ALL, _write_set, casting="unsafe")


def tensor_like(x):
    """``x`` for a layer that takes tensors: a tensor or an interpreted value
    (a static graph's, see :mod:`dynnets.autograd.values`) unchanged, an
    array-like wrapped (no gradient, no copy)."""
    if isinstance(x, Tensor) or is_interpreted(x):
        return x
    return wrap_array(np.asarray(x))
