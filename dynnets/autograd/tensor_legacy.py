"""torch's legacy tensor types, as names of dtypes and as constructors:
``x.type()`` (``'torch.FloatTensor'``), ``x.type(dynnets.LongTensor)``,
``torch.Tensor(2, 3)``, ``x.new(...)`` and ``dynnets.FloatTensor(...)`` all
read them here. A new tensor is made with
:func:`~dynnets.autograd.engine.wrap_array`, so the module sits below
:mod:`~dynnets.autograd.tensor` (whose constructor is one of them)."""
from __future__ import annotations

import numbers

import numpy as np

from . import ops
from .engine import wrap_array
from .primitives.core import ShapeError
from .values import is_interpreted
from ..devices import DeviceUnavailableError, check_device

__all__ = ["LEGACY_TYPES", "legacy_type_name", "legacy_dtype", "legacy_new"]


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
    if getattr(type(data), "_is_tensor", False):
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
