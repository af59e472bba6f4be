"""Tensor creation with torch's names, signatures and dtypes: ``tensor``,
``as_tensor``, ``from_numpy``, ``zeros``, ``ones``, ``full``, the ``*_like``
ones, ``arange``, ``empty``, ``eye``, ``linspace``, ``logspace``, the random
``randn``, ``rand``, ``randint``, ``randperm``, ``rand_like``, ``randn_like``
(and dynnets' ``uniform``), the default dtype and the legacy constructors
``FloatTensor``, ``LongTensor``...

Every one takes torch's ``device=``: the CPU (None, ``'cpu'``,
``dynnets.device('cpu')``) or a
:class:`~dynnets.devices.DeviceUnavailableError`. The random ones draw from
``generator=`` (a :class:`dynnets.Generator` or any ``numpy.random.Generator``)
or, by default, from the default generator that :func:`dynnets.manual_seed`
seeds: the same seed repeats the same numbers, which are numpy's, not
torch's.
"""
from __future__ import annotations

import numpy as np

from . import ops
from ..devices import check_device
from ..random import generator as _generator
from .ops import shape_tuple
from .primitives import DEFAULT_FLOAT, ShapeError
from .tensor import Tensor, wrap_array
from .tensor_legacy import LEGACY_TYPES, legacy_new

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "zeros_like", "ones_like", "randn",
           "uniform", "arange", "empty", "empty_like", "full_like", "eye", "linspace", "logspace", "rand", "rand_like",
           "randn_like", "randint", "randperm", "get_default_dtype", "set_default_dtype", "is_tensor",
           "is_floating_point",
           "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
           "ByteTensor", "BoolTensor"]


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
        return np.array(data.numpy())
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
    arr = _inferred(data) if dtype is None else np.array(data.numpy() if isinstance(data, Tensor) else data,
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
    return _generator(rng if generator is None else generator)


def get_default_dtype():
    """float32, the dtype of Python floats in :func:`~dynnets.tensor` and of
    ``zeros``, ``randn``, the layers' parameters... (as ``torch.get_default_dtype``)."""
    return DEFAULT_FLOAT


def set_default_dtype(d):
    """Accepts float32 (the default, so nothing changes); any other dtype
    raises. The default is fixed: a process-wide switch would change what
    every later ``tensor()``, ``zeros()`` and layer creates, and the
    input checks the ops cache per signature (design rule 7: no hidden
    global state). Pass ``dtype=dynnets.float64`` where tensors are created
    and convert modules with ``model.double()``."""
    try:
        dt = np.dtype(d)
    except TypeError:
        raise TypeError(f"set_default_dtype: expected a dtype, got {d!r}") from None
    if dt.kind != "f":
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the default type, got {dt}")
    if dt != DEFAULT_FLOAT:
        raise NotImplementedError(
            f"set_default_dtype: dynnets' default dtype is float32 and cannot be changed (got {dt}); pass "
            f"dtype=dynnets.{dt.name} to the functions that create tensors and call model.double() / "
            f"model.to(dynnets.{dt.name}) on modules")


def is_tensor(obj):
    """Whether ``obj`` is a dynnets Tensor (``torch.is_tensor``)."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """Whether ``input``'s dtype is a floating-point one (``torch.is_floating_point``)."""
    return np.dtype(input.dtype).kind == "f"


def _dtype(dtype, default=DEFAULT_FLOAT):
    return default if dtype is None else np.dtype(dtype)


def _grad_ok(op, dt, requires_grad):
    if requires_grad and dt.kind != "f":
        raise TypeError(f"{op}: only floating-point tensors can require grad, got dtype {dt}")


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of ``size`` (float32 by default), as ``torch.empty``. Its
    values are zeros: torch leaves them unset, so any value is right, and
    zeros make a forgotten initialisation reproducible."""
    check_device(device, "empty")
    return wrap_array(np.zeros(shape_tuple(size), dtype=_dtype(dtype)), requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    """A tensor of ``input``'s shape and (unless ``dtype``) dtype, zeros (see :func:`empty`)."""
    check_device(device, "empty_like")
    return wrap_array(np.zeros(tuple(input.shape), dtype=_dtype(dtype, np.dtype(input.dtype))),
                  requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    """``input``'s shape filled with ``fill_value`` in ``input``'s dtype (or
    ``dtype``), as ``torch.full_like`` (the value is cast: an integer tensor
    filled with 2.7 holds 2)."""
    check_device(device, "full_like")
    dt = _dtype(dtype, np.dtype(input.dtype))
    _grad_ok("full_like", dt, requires_grad)
    return wrap_array(np.full(tuple(input.shape), np.asarray(fill_value).item(), dtype=dt), requires_grad=requires_grad)


def _count(op, name, n):
    if isinstance(n, Tensor):
        n = n.item()
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, got {n!r}")
    if n < 0:
        raise ShapeError(f"{op}: {name} must be greater or equal to 0, got {n}")
    return int(n)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The (n, m) identity matrix (``m`` defaults to ``n``), float32 by default,
    as ``torch.eye``."""
    check_device(device, "eye")
    n = _count("eye", "n", n)
    m = n if m is None else _count("eye", "m", m)
    dt = _dtype(dtype)
    _grad_ok("eye", dt, requires_grad)
    return wrap_array(np.eye(n, m, dtype=dt), requires_grad=requires_grad)


def _endpoint(op, name, v):
    if isinstance(v, Tensor) or isinstance(v, np.ndarray):
        if np.ndim(v):
            raise ShapeError(f"{op}: {name} must be a number or a 0-d tensor, got shape {np.shape(v)}")
        v = np.asarray(v).item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: {name} must be a real number, got {v!r}")
    return float(v)


def _linspace(op, start, end, steps):
    start, end = _endpoint(op, "start", start), _endpoint(op, "end", end)
    steps = _count(op, "steps", steps)
    # torch's formula (start + i * step up to the middle, end - (steps - 1 - i) * step
    # after it): both endpoints exact, and float64 within an ulp of torch's (whose
    # vectorised loop rounds some middle values the other way)
    out = np.empty(steps, dtype=np.float64)
    if steps == 1:
        out[0] = start
    elif steps > 1:
        step = (end - start) / (steps - 1)
        half = steps // 2
        i = np.arange(steps, dtype=np.float64)
        out[:half] = start + step * i[:half]
        out[half:] = end - step * (steps - 1 - i[half:])
    return out


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` (both
    included), float32 by default (also for integer ends), as
    ``torch.linspace``. An integer ``dtype`` truncates the float values, as
    torch's."""
    check_device(device, "linspace")
    dt = _dtype(dtype)
    _grad_ok("linspace", dt, requires_grad)
    return wrap_array(_linspace("linspace", start, end, steps).astype(dt), requires_grad=requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``base ** linspace(start, end, steps)``, float32 by default, as ``torch.logspace``."""
    check_device(device, "logspace")
    dt = _dtype(dtype)
    _grad_ok("logspace", dt, requires_grad)
    b = _endpoint("logspace", "base", base)
    return wrap_array(np.power(b, _linspace("logspace", start, end, steps)).astype(dt), requires_grad=requires_grad)


def _size(op, size):
    size = shape_tuple(size)
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in size):
        raise TypeError(f"{op}: size must be integers, got {size!r}")
    if any(s < 0 for s in size):
        raise ShapeError(f"{op}: trying to create a tensor with a negative dimension: {size}")
    return tuple(int(s) for s in size)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples on [0, 1) of ``size`` (float32 by default), as
    ``torch.rand``, from ``generator`` or the default generator."""
    return _rand("rand", _size("rand", size), generator, _dtype(dtype), device, requires_grad)


def _rand(op, size, generator, dt, device, requires_grad):
    check_device(device, op)
    if dt.kind != "f":
        raise TypeError(f"{op}: dtype must be a floating-point type, got {dt}")
    return wrap_array(_generator(generator).random(size).astype(dt), requires_grad=requires_grad)


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    """:func:`rand` of ``input``'s shape and (unless ``dtype``) dtype."""
    return _rand("rand_like", tuple(input.shape), generator, _dtype(dtype, np.dtype(input.dtype)), device,
                 requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples of ``input``'s shape and (unless ``dtype``) dtype, as ``torch.randn_like``."""
    check_device(device, "randn_like")
    dt = _dtype(dtype, np.dtype(input.dtype))
    if dt.kind != "f":
        raise TypeError(f"randn_like: dtype must be a floating-point type, got {dt}")
    return wrap_array(_generator(generator).standard_normal(tuple(input.shape)).astype(dt), requires_grad=requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers drawn uniformly from ``[low, high)``, of ``size``, as
    ``torch.randint``: ``randint(high, size)`` or ``randint(low, high,
    size)`` (also by keyword); int64 by default (a float ``dtype`` holds the
    integers as floats)."""
    check_device(device, "randint")
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high          # randint(high, size)
    if high is None or size is None:
        raise TypeError("randint: expected randint(high, size) or randint(low, high, size), got "
                        f"low={low!r}, high={high!r}, size={size!r}")
    low, high = _count_any("randint", "low", low), _count_any("randint", "high", high)
    if not low < high:
        raise ShapeError(f"randint: expected low < high, got low={low}, high={high}")
    dt = _dtype(dtype, np.dtype(np.int64))
    _grad_ok("randint", dt, requires_grad)
    arr = _generator(generator).integers(low, high, _size("randint", size), dtype=np.int64)
    return wrap_array(arr.astype(dt, copy=False), requires_grad=requires_grad)


def _count_any(op, name, v):
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, got {v!r}")
    return int(v)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1`` (int64 by default), as
    ``torch.randperm``, from ``generator`` or the default generator."""
    check_device(device, "randperm")
    n = _count("randperm", "n", n)
    dt = _dtype(dtype, np.dtype(np.int64))
    _grad_ok("randperm", dt, requires_grad)
    return wrap_array(_generator(generator).permutation(n).astype(dt, copy=False), requires_grad=requires_grad)


# --- torch's legacy tensor types -------------------------------------------------------

class _LegacyMeta(type):
    """``isinstance(x, dynnets.LongTensor)`` is True for an int64 tensor and
    False for any other, as torch's (the class is not the tensor's type:
    ``type(LongTensor([1]))`` is :class:`~dynnets.Tensor`)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and np.dtype(obj.dtype) == cls.legacy_dtype

    def __subclasscheck__(cls, sub):
        return sub is cls

    def __repr__(cls):
        return f"<class 'dynnets.{cls.__name__}'>"


class _LegacyTensor(metaclass=_LegacyMeta):
    legacy_dtype = None

    def __new__(cls, *args, device=None):
        return legacy_new(cls.__name__, cls.legacy_dtype, args, device)


def _legacy(name):
    dt = next(d for d, n in LEGACY_TYPES.items() if n == name)
    doc = (f"torch's legacy ``{name}``: ``{name}(2, 3)`` (a tensor of that size, here zeros), ``{name}([1, 2])`` "
           f"(data cast to {dt}), ``{name}()`` (empty); ``isinstance(x, {name})`` is whether ``x`` is a tensor of "
           f"dtype {dt}. Returns a :class:`~dynnets.Tensor`.")
    return _LegacyMeta(name, (_LegacyTensor,), {"legacy_dtype": dt, "__doc__": doc, "__module__": "dynnets"})


FloatTensor = _legacy("FloatTensor")
DoubleTensor = _legacy("DoubleTensor")
HalfTensor = _legacy("HalfTensor")
LongTensor = _legacy("LongTensor")
IntTensor = _legacy("IntTensor")
ShortTensor = _legacy("ShortTensor")
CharTensor = _legacy("CharTensor")
ByteTensor = _legacy("ByteTensor")
BoolTensor = _legacy("BoolTensor")


def range(start, end, step=1, *, dtype=None, device=None, requires_grad=False):
    """torch's deprecated ``torch.range``: ``start`` to ``end`` *inclusive*
    by ``step``, float32 by default (also for integer arguments), with
    torch's deprecation warning; prefer :func:`arange` (``end``
    exclusive). Not in ``__all__``: a star import would shadow the builtin.

    The number of values is ``floor((end - start) / step) + 1`` and value
    ``i`` is ``start + i * step``, both computed in float64, as torch's."""
    import warnings
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    check_device(device, "range")
    start, end, step = (_endpoint("range", n, v) for n, v in (("start", start), ("end", end), ("step", step)))
    if step == 0:
        raise ValueError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"range: upper bound and lower bound inconsistent with step sign (start={start}, "
                         f"end={end}, step={step})")
    dt = _dtype(dtype)
    _grad_ok("range", dt, requires_grad)
    n = int((end - start) / step + 1)
    return wrap_array((start + np.arange(n, dtype=np.float64) * step).astype(dt), requires_grad=requires_grad)
