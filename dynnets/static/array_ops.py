"""Shape-dependent ops of static graphs, TF1's names: ``shape``, ``range``,
``fill``, ``sequence_mask``.

They read sizes that are known only when the graph runs (a fed batch size,
a sentence length, the number of levels of a tree batch), so one graph
serves every size. None carries a gradient: their outputs are integers,
masks or fills, constants as far as :func:`~dynnets.static.gradients` is
concerned.
"""
from __future__ import annotations

import numpy as np

from ..autograd.primitives import Aval, ShapeError, dtype_of, fmt_shape
from ..autograd import ops
from .graph import StaticPrimitive, Value, add_op

__all__ = ["shape", "range", "fill", "sequence_mask"]

_I64 = np.dtype(np.int64)


def _int_scalar(op, arg, a):
    if tuple(a.shape) != () or dtype_of(a).kind not in "iu":
        raise ShapeError(f"{op}: {arg} must be an integer scalar, got shape {fmt_shape(a.shape)} and dtype "
                         f"{dtype_of(a)}")


def _check_int(op, arg, a):
    if isinstance(a, Value):
        return a
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
        raise TypeError(f"{op}: {arg} must be an int or an integer scalar Value, got {type(a).__name__}")
    return np.asarray(a, dtype=np.int64)


def _shape(x):
    return np.asarray(np.shape(x), dtype=np.int64)


shape_p = StaticPrimitive("shape", _shape, lambda x: Aval((len(x.shape),), _I64))


def shape(input, name=None, out_type=np.int64):
    """The run-time shape of ``input`` as an int64 vector (``tf.shape``);
    ``shape(x)[0]`` is the fed batch size."""
    out = add_op(shape_p, input, name=name)
    return out if np.dtype(out_type) == _I64 else ops.astype(out, out_type)


def _range(start, limit, delta):
    if delta == 0:
        raise ValueError("range: delta must not be 0")
    return np.arange(int(start), int(limit), int(delta), dtype=np.int64)


def _range_shape(start, limit, delta):
    for arg, a in (("start", start), ("limit", limit), ("delta", delta)):
        _int_scalar("range", arg, a)
    return Aval((None,), _I64)


range_p = StaticPrimitive("range", _range, _range_shape)


def range(start, limit=None, delta=1, name=None):
    """``[start, start + delta, ...)`` up to ``limit`` (``tf.range``), int64;
    ``range(n)`` is ``0..n-1``. The bounds may be integer scalar Values."""
    if limit is None:
        start, limit = 0, start
    args = [_check_int("range", n, a) for a, n in ((start, "start"), (limit, "limit"), (delta, "delta"))]
    return add_op(range_p, *args, name=name)


def _fill(*dims, template, value, dtype):
    it = iter(dims)
    return np.full(tuple(int(next(it)) if d is None else d for d in template), value, dtype=dtype)


def _fill_shape(*dims, template, value, dtype):
    for k, d in enumerate(dims):
        _int_scalar("fill", f"dims (run-time entry {k})", d)
    return Aval(template, dtype)


fill_p = StaticPrimitive("fill", _fill, _fill_shape)


def fill(dims, value, dtype=None, name=None):
    """An array of shape ``dims`` filled with ``value`` (``tf.fill``).

    ``dims`` is a sequence whose entries are ints or integer scalar Values
    (``fill([shape(x)[0], 64], 0.0)``): the Values are read when the graph
    runs, so the result has an unknown dimension there. ``dtype`` defaults to
    float32 for a float ``value``, int64 for an int.
    """
    if isinstance(dims, Value) or not isinstance(dims, (list, tuple)):
        raise TypeError(f"fill: dims must be a list of ints and integer scalar Values, got {type(dims).__name__}")
    if dtype is None:
        dtype = (np.float32 if isinstance(value, float) else np.int64 if isinstance(value, int)
                 else np.result_type(value))
    template, ins = [], []
    for k, d in enumerate(dims):
        if isinstance(d, Value):
            ins.append(d)
            template.append(None)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
            template.append(int(d))
        else:
            raise ValueError(f"fill: dims[{k}] must be a non-negative int or an integer scalar Value, got {d!r}")
    dt = np.dtype(dtype)
    return add_op(fill_p, *ins, template=tuple(template), value=dt.type(value), dtype=dt, name=name)


def _sequence_mask(lengths, maxlen, dtype):
    return (np.arange(int(maxlen))[None, :] < np.asarray(lengths)[:, None]).astype(dtype)


def _sequence_mask_shape(lengths, maxlen, dtype):
    if len(lengths.shape) != 1 or dtype_of(lengths).kind not in "iu":
        raise ShapeError(f"sequence_mask: lengths must be a 1-D integer vector, got shape {fmt_shape(lengths.shape)} "
                         f"and dtype {dtype_of(lengths)}")
    _int_scalar("sequence_mask", "maxlen", maxlen)
    return Aval((lengths.shape[0], None), dtype)


sequence_mask_p = StaticPrimitive("sequence_mask", _sequence_mask, _sequence_mask_shape)


def sequence_mask(lengths, maxlen=None, dtype=np.bool_, name=None):
    """``mask[i, j] = j < lengths[i]``, shape (len(lengths), maxlen)
    (``tf.sequence_mask``); ``maxlen`` defaults to the largest length."""
    if not isinstance(lengths, Value):
        lengths = np.asarray(lengths, dtype=np.int64)
    if maxlen is None:
        maxlen = ops.max(lengths) if isinstance(lengths, Value) else int(lengths.max(initial=0))
    return add_op(sequence_mask_p, lengths, _check_int("sequence_mask", "maxlen", maxlen), dtype=np.dtype(dtype),
                  name=name)
