"""Array ops of static graphs under TF1's names and signatures.

Shape-dependent ops (``shape``, ``range``, ``fill``, ``zeros``, ``ones``,
``sequence_mask``, ``reshape`` with run-time dimensions) read sizes that are
known only when the graph runs (a fed batch size, a sentence length, the
number of levels of a tree batch), so one graph serves every size; none but
``reshape`` carries a gradient. The selections and layouts (``gather``,
``gather_nd``, ``boolean_mask``, ``where``, ``tile``, ``pad``, ``slice``,
``split``, ``unstack``, ``one_hot``, ``reverse_sequence``...) are the table's
primitives (:mod:`dynnets.autograd.primitives.select`) or composites of
them, with TF1's argument order, defaults and semantics where they differ
from numpy's or torch's (``where`` with a vector condition picks rows,
``squeeze`` of a dimension that is not 1 is an error, ``split`` by an int
makes that many parts). They work on eager tensors too, except where they
need a run-time shape.
"""
from __future__ import annotations

import numpy as np

import builtins

from ..autograd import ops
from ..autograd.engine import bind
from ..autograd.tensor import Tensor
from ..autograd.primitives import (Aval, DTypeError, ShapeError, argwhere_p, boolean_mask_p, dtype_of, ensure_shape_p,
                                   fmt_shape, gather_nd_p, pad_p, stop_gradient_p, tile_p)
from .graph import StaticPrimitive, Value, add_op, constant, constant_p, named, placeholder_p

__all__ = ["shape", "size", "rank", "range", "fill", "sequence_mask", "zeros", "ones", "unstack", "expand_dims", "tile", "one_hot",
           "pad", "slice", "gather", "gather_nd", "boolean_mask", "where", "where_v2", "stop_gradient", "split",
           "squeeze", "reshape", "reverse_sequence", "check_same_size", "ensure_shape",
           "scalar_probability"]

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


_I32 = np.dtype(np.int32)


def _out_type(op, out_type):
    dt = np.dtype(out_type)
    if dt not in (_I32, _I64):
        raise TypeError(f"{op}: out_type must be int32 or int64, got {dt}")
    return dt


def _shape(x, dtype=_I64):
    return np.asarray(np.shape(x), dtype=dtype)


def _shape_rule(x, dtype=_I64):
    # the length is the rank, unknown for an input of unknown rank
    return Aval((None if x.shape is None else len(x.shape),), dtype)


shape_p = StaticPrimitive("shape", _shape, _shape_rule)


def shape(input, name=None, out_type=np.int32):
    """The run-time shape of ``input`` as an ``out_type`` vector (int32 by
    default, as TF1's ``tf.shape``); ``shape(x)[0]`` is the fed batch size."""
    return add_op(shape_p, input, name=name, dtype=_out_type("shape", out_type))


def _size(x, dtype):
    return np.asarray(np.size(x), dtype=dtype)


size_p = StaticPrimitive("size", _size, lambda x, dtype: Aval((), dtype))


def size(input, name=None, out_type=np.int32):
    """The number of elements of ``input`` as an ``out_type`` scalar (int32
    by default, as TF1's ``tf.size``), read when the graph runs; a constant
    when the shape is fully known."""
    dt = _out_type("size", out_type)
    if isinstance(input, Value) and input.ndim is not None and None not in input.shape:
        # a fully known shape: a constant, as TF1 folds it
        return constant(np.asarray(int(np.prod(input.shape, dtype=np.int64)), dtype=dt), name=name or "Size")
    if not isinstance(input, Value):
        return constant(np.asarray(np.size(input.numpy() if isinstance(input, Tensor) else input), dtype=dt),
                        name=name or "Size")
    return add_op(size_p, input, name=name, dtype=dt)


def rank(input, name=None):
    """The number of dimensions of ``input`` as an int32 scalar (``tf.rank``):
    a constant when the rank is known, else read when the graph runs (a
    placeholder made without a shape)."""
    if isinstance(input, Value) and input.ndim is None:
        return named(ops.getitem(add_op(shape_p, add_op(shape_p, input, dtype=_I32), dtype=_I32), 0), name)
    nd = input.ndim if isinstance(input, Value) else np.ndim(input.numpy() if isinstance(input, Tensor) else input)
    return constant(np.asarray(nd, dtype=_I32), name=name or "Rank")


# TF1's tf.range dtypes, from the narrowest: the widest of its arguments' (Python ints are int32, floats float32)
_RANGE_DTYPES = (_I32, _I64, np.dtype(np.float32), np.dtype(np.float64))


def _range(start, limit, delta, dtype=_I64):
    dt = np.dtype(dtype)
    start, limit, delta = dt.type(start), dt.type(limit), dt.type(delta)
    if delta == 0:
        raise ValueError("range: delta must not be 0")
    if delta > 0 and start > limit or delta < 0 and start < limit:
        raise ValueError(f"range: requires start <= limit when delta > 0 (start >= limit when delta < 0), got "
                         f"start={start}, limit={limit}, delta={delta}")
    if dt.kind in "iu":
        return np.arange(start, limit, delta, dtype=dt)
    # TF1's RangeOp for floats: ceil(|(limit - start) / delta|) values, accumulated (val += delta) in the
    # dtype, so a float32 range has TF1's roundings
    n = int(np.ceil(np.abs((limit - start) / delta)))
    if n == 0:
        return np.zeros(0, dt)
    steps = np.full(n, delta, dtype=dt)
    steps[0] = start
    return np.cumsum(steps, dtype=dt)


def _range_shape(start, limit, delta, dtype=_I64):
    for arg, a in (("start", start), ("limit", limit), ("delta", delta)):
        if tuple(a.shape) != () or dtype_of(a).kind not in "iuf":
            raise ShapeError(f"range: {arg} must be a real scalar, got shape {fmt_shape(a.shape)} and dtype "
                             f"{dtype_of(a)}")
    return Aval((None,), np.dtype(dtype))


range_p = StaticPrimitive("range", _range, _range_shape)


def _range_dtype(a):
    if isinstance(a, Value) or isinstance(a, (np.ndarray, np.generic)):
        return np.dtype(a.dtype)
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, float)):
        raise TypeError(f"range: the bounds must be numbers or scalar Values, got {type(a).__name__} {a!r}")
    return _I32 if isinstance(a, int) else np.dtype(np.float32)


def range(start, limit=None, delta=1, dtype=None, name="range"):
    """``[start, start + delta, ...)`` up to ``limit`` (``tf.range``);
    ``range(n)`` is ``0..n-1``. The bounds may be scalar Values. The dtype
    is TF1's: ``dtype`` if given, else the widest of the arguments' (int32 <
    int64 < float32 < float64; a Python int counts as int32, a float as
    float32), so ``range(5)`` and ``range(tf.shape(x)[0])`` are int32."""
    if limit is None:
        start, limit = 0, start
    bounds = ((start, "start"), (limit, "limit"), (delta, "delta"))
    if dtype is None:
        dts = [_range_dtype(a) for a, _ in bounds]
        bad = [d for d in dts if d not in _RANGE_DTYPES]
        if bad:
            raise TypeError(f"range: the bounds must be int32, int64, float32 or float64, got {bad[0]}")
        dt = builtins.max(dts, key=_RANGE_DTYPES.index)
    else:
        dt = np.dtype(dtype)
        if dt not in _RANGE_DTYPES:
            raise TypeError(f"range: dtype must be int32, int64, float32 or float64, got {dt}")
    args = []
    for a, n in bounds:
        if isinstance(a, Value):
            if tuple(a.shape) != () or a.dtype.kind not in "iuf":
                raise ShapeError(f"range: {n} must be a real scalar, got '{a.name}' with shape {fmt_shape(a.shape)} "
                                 f"and dtype {a.dtype}")
            args.append(a if a.dtype == dt else ops.astype(a, dt))
        else:
            _range_dtype(a)
            args.append(np.asarray(a, dtype=dt))
    return add_op(range_p, *args, name=name, dtype=dt)


def _fill(*dims, template, value, dtype):
    it = iter(dims)
    return np.full(tuple(int(next(it)) if d is None else d for d in template), value, dtype=dtype)


def _fill_shape(*dims, template, value, dtype):
    for k, d in enumerate(dims):
        _int_scalar("fill", f"dims (run-time entry {k})", d)
    return Aval(template, dtype)


fill_p = StaticPrimitive("fill", _fill, _fill_shape)


def fill(dims, value, name=None, *, dtype=None):
    """An array of shape ``dims`` filled with ``value`` (``tf.fill``).

    ``dims`` is a sequence whose entries are ints or integer scalar Values
    (``fill([shape(x)[0], 64], 0.0)``), or a 1-D integer Value
    (``fill(shape(x), 1.0)``): the Values are read when the graph runs, so
    the result has unknown dimensions there. The dtype is ``value``'s:
    float32 for a Python float, int64 for an int (``dtype=``, keyword-only,
    overrides it; TF1's third argument is ``name``).
    """
    dims = dims_list("fill", dims)
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


# --------------------------------------------------------------------------
# TF1's array names
# --------------------------------------------------------------------------

def dims_list(op, dims):
    """A shape argument as a list of ints and integer scalar Values: TF1
    takes a list (of ints and scalar tensors), a 1-D integer tensor
    (``tf.shape(x)``) or one int."""
    if isinstance(dims, Value):
        if len(dims.shape) != 1 or dims.shape[0] is None or dims.dtype.kind not in "iu":
            raise TypeError(f"{op}: a shape Value must be a 1-D integer vector of known length, got '{dims.name}' "
                            f"with shape {fmt_shape(dims.shape)} and dtype {dims.dtype}")
        # the dimensions of tf.shape(x) that x's static shape knows are ints (TF1's constant_value_as_shape)
        e = dims.op
        known = dims.graph.avals[e.ins[0]].shape if e.prim is shape_p else None
        return [known[i] if known is not None and known[i] is not None else dims[i]
                for i in builtins.range(dims.shape[0])]
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        return [int(dims)]
    if isinstance(dims, np.ndarray) and dims.ndim == 1 and dims.dtype.kind in "iu":
        return [int(d) for d in dims]
    if not isinstance(dims, (list, tuple)):
        raise TypeError(f"{op}: shape must be a list of ints and integer scalar Values, a 1-D integer Value or an "
                        f"int, got {type(dims).__name__}")
    return list(dims)


def _known(dims):
    return all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims)


def _filled(op, shape, value, dtype, name):
    dims = dims_list(op, shape)
    dt = np.dtype(dtype)
    if _known(dims):
        if any(d < 0 for d in dims):
            raise ValueError(f"{op}: dimensions must be >= 0, got shape {tuple(dims)}")
        # a fully known shape is a constant, as in TF1
        return constant(np.full(tuple(int(d) for d in dims), value, dtype=dt), name=name or op)
    return fill(dims, value, name=name or op, dtype=dt)


def zeros(shape, dtype=np.float32, name=None):
    """Zeros of ``shape`` (a list of ints and integer scalar Values, or a 1-D
    integer Value such as ``tf.shape(x)``) and ``dtype`` (``tf.zeros``)."""
    return _filled("zeros", shape, 0, dtype, name)


def ones(shape, dtype=np.float32, name=None):
    """Ones of ``shape`` and ``dtype`` (``tf.ones``; ``shape`` as :func:`zeros`')."""
    return _filled("ones", shape, 1, dtype, name)


_named = named


def _axis_in(op, axis, nd, arg="axis"):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: {arg} must be an int, got {axis!r}")
    if not -nd <= axis < nd:
        raise ValueError(f"{op}: {arg}={axis} is out of range for an input of rank {nd}")
    return int(axis) % nd


def _ints(op, arg, values):
    if isinstance(values, Value):
        raise TypeError(f"{op}: {arg} must be known when the graph is built (a list of ints), got the Value "
                        f"'{values.name}'")
    try:
        out = np.asarray(values)
    except (TypeError, ValueError):
        out = None
    if out is None or out.dtype.kind not in "iu":
        raise TypeError(f"{op}: {arg} must be ints, got {values!r}")
    return out


def unstack(value, num=None, axis=0, name="unstack"):
    """The slices of ``value`` along ``axis``, as a list (``tf.unstack``);
    ``num`` is needed when that dimension is unknown."""
    nd = len(value.shape)
    ax = _axis_in("unstack", axis, nd)
    n = value.shape[ax] if num is None else num
    if n is None:
        raise ValueError(f"unstack: cannot infer num from shape {fmt_shape(value.shape)} (dimension {ax} is unknown): "
                         f"pass num=")
    if value.shape[ax] is not None and n != value.shape[ax]:
        raise ValueError(f"unstack: num={n} does not match dimension {ax} of shape {fmt_shape(value.shape)}")
    return [ops.getitem(value, (builtins.slice(None),) * ax + (i,)) for i in builtins.range(n)]


def expand_dims(input, axis=None, name=None, dim=None):
    """``input`` with a new dimension of size 1 at ``axis`` (``tf.expand_dims``;
    ``-1`` appends one)."""
    if dim is not None:
        if axis is not None:
            raise ValueError("expand_dims: cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("expand_dims: must specify an 'axis'")
    _axis_in("expand_dims", axis, len(input.shape) + 1)
    return _named(ops.unsqueeze(input, int(axis)), name)


def tile(input, multiples, name=None):
    """``input`` repeated ``multiples[k]`` times along each dimension ``k``
    (``tf.tile``); one multiple per dimension."""
    m = _ints("tile", "multiples", multiples)
    return _named(bind(tile_p, input, multiples=tuple(int(x) for x in m.reshape(-1))), name)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """``on_value`` where the new axis' position equals ``indices``, else
    ``off_value`` (``tf.one_hot``): an index outside ``[0, depth)`` gives a row
    of ``off_value``. The new axis is last (``axis=-1``) or at ``axis``; the
    dtype is ``dtype``, else ``on_value``'s or ``off_value``'s, else float32."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
        raise TypeError(f"one_hot: depth must be a non-negative int known when the graph is built, got {depth!r}")
    if isinstance(indices, Value) or hasattr(indices, "requires_grad"):
        idx = indices
    else:
        idx = constant(np.asarray(indices))      # a graph value, as TF1 makes one of a list
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: indices must be integers, got dtype {idx.dtype}")
    if dtype is None:
        given = on_value if on_value is not None else off_value
        dtype = (np.float32 if given is None or isinstance(given, float) else np.int64 if isinstance(given, int)
                 else np.asarray(given).dtype)
    dt = np.dtype(dtype)
    on = np.asarray(1 if on_value is None else on_value, dtype=dt)
    off = np.asarray(0 if off_value is None else off_value, dtype=dt)
    nd = len(idx.shape)
    hit = ops.eq(ops.unsqueeze(idx, nd), np.arange(depth, dtype=np.int64))
    out = ops.where(hit, on, off)
    if axis is not None and axis != -1:
        ax = _axis_in("one_hot", axis, nd + 1)
        perm = list(builtins.range(nd))
        perm.insert(ax, nd)
        out = ops.transpose(out, tuple(perm))
    return _named(out, name)


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """``tensor`` padded by ``paddings[k] = [before, after]`` entries along
    each dimension ``k`` (``tf.pad``): with ``constant_values`` (CONSTANT), or
    mirrored without the edge (REFLECT) or with it (SYMMETRIC); case-insensitive."""
    p = _ints("pad", "paddings", paddings)
    if p.ndim != 2 or p.shape[1:] != (2,):
        raise ValueError(f"pad: paddings must be a list of [before, after] pairs, got {paddings!r}")
    if not isinstance(mode, str):
        raise TypeError(f"pad: mode must be 'CONSTANT', 'REFLECT' or 'SYMMETRIC', got {mode!r}")
    m = mode.lower()
    if m not in ("constant", "reflect", "symmetric"):
        raise ValueError(f"pad: mode must be 'CONSTANT', 'REFLECT' or 'SYMMETRIC', got {mode!r}")
    if np.any(p < 0):
        raise ValueError(f"pad: paddings must be non-negative, got {p.tolist()}")
    attrs = {"pads": tuple((int(a), int(b)) for a, b in p), "mode": m}
    if m == "constant" and constant_values != 0:
        attrs["value"] = constant_values
    return _named(bind(pad_p, tensor, **attrs), name)


def slice(input_, begin, size, name=None):
    """``input_[begin[k] : begin[k] + size[k]]`` along every dimension
    (``tf.slice``); ``size[k] = -1`` takes the rest. A slice beyond a known
    dimension is an error (numpy would shorten it)."""
    b, n = _ints("slice", "begin", begin).reshape(-1), _ints("slice", "size", size).reshape(-1)
    shp = tuple(input_.shape)
    if len(b) != len(shp) or len(n) != len(shp):
        raise ValueError(f"slice: begin ({len(b)} entries) and size ({len(n)} entries) must have one entry per "
                         f"dimension of input shape {fmt_shape(shp)}")
    index = []
    for k, (lo, m, d) in enumerate(zip(b, n, shp)):
        lo, m = int(lo), int(m)
        if lo < 0 or m < -1 or (d is not None and (lo > d or (m != -1 and lo + m > d))):
            raise ValueError(f"slice: begin[{k}]={lo}, size[{k}]={m} is out of bounds for dimension {k} of size "
                             f"{'?' if d is None else d} (input shape {fmt_shape(shp)})")
        index.append(builtins.slice(lo, None if m == -1 else lo + m))
    out = ops.getitem(input_, tuple(index))
    if any(d is None and m != -1 for d, m in zip(shp, n)):
        out = check_size(out, [None if m == -1 else int(m) for m in n], "slice", "size")
    return _named(out, name)


def gather_nd(params, indices, name=None, batch_dims=0):
    """``params[indices[i..., 0], ..., indices[i..., K-1]]`` (``tf.gather_nd``);
    an index out of range is an error (numpy would wrap a negative one)."""
    if batch_dims != 0:
        raise ValueError(f"gather_nd: only batch_dims=0 is supported, got {batch_dims}")
    if not isinstance(indices, Value) and not hasattr(indices, "requires_grad"):
        indices = np.asarray(indices)
    return _named(bind(gather_nd_p, params, indices), name)


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Slices of ``params`` along ``axis`` (default 0) at integer ``indices``
    (``tf.gather``): the result has shape ``params.shape[:axis] + indices.shape
    + params.shape[axis + 1:]``. An index out of range is an error, a negative
    one included (TF1's CPU kernel; numpy would wrap it)."""
    if batch_dims != 0:
        raise ValueError(f"gather: only batch_dims=0 is supported, got {batch_dims}")
    nd = len(params.shape)
    ax = 0 if axis is None else _axis_in("gather", axis, nd)
    if not isinstance(indices, Value) and not hasattr(indices, "requires_grad"):
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise DTypeError(f"gather: indices must be integers, got dtype {indices.dtype}")
    r = len(indices.shape)
    if ax == 0:
        return _named(bind(gather_nd_p, params, ops.unsqueeze(indices, r)), name)
    front = (ax,) + tuple(k for k in builtins.range(nd) if k != ax)
    out = bind(gather_nd_p, ops.transpose(params, front), ops.unsqueeze(indices, r))
    # out is indices.shape + params.shape without axis: put params.shape[:axis] first
    perm = tuple(builtins.range(r, r + ax)) + tuple(builtins.range(r)) + tuple(builtins.range(r + ax, r + nd - 1))
    return _named(ops.transpose(out, perm), name)


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The entries of ``tensor`` where ``mask`` is true (``tf.boolean_mask``):
    ``mask`` covers dimensions ``axis .. axis + mask.ndim - 1`` (``axis``
    default 0), which become one dimension of unknown size."""
    if not isinstance(mask, Value) and not hasattr(mask, "requires_grad"):
        mask = np.asarray(mask)
    ax = 0 if axis is None else _axis_in("boolean_mask", axis, len(tensor.shape))
    out = bind(boolean_mask_p, tensor, mask, axis=ax) if ax else bind(boolean_mask_p, tensor, mask)
    return _named(out, None if name == "boolean_mask" else name)


def _is_tensor(x):
    return isinstance(x, Value) or hasattr(x, "requires_grad") or isinstance(x, np.ndarray)


def where(condition, x=None, y=None, name=None):
    """TF1's ``tf.where``. With ``x`` and ``y``: ``x`` where ``condition``,
    else ``y``; a vector ``condition`` with ``x`` of higher rank selects whole
    rows (TF1's rule, where numpy's broadcasting would align it with the last
    axis instead). Without them: the coordinates of the true entries of
    ``condition``, an int64 (n, rank) matrix."""
    if (x is None) != (y is None):
        raise ValueError("where: x and y must both be non-None or both be None")
    if x is None:
        c = condition if isinstance(condition, Value) or hasattr(condition, "requires_grad") else np.asarray(condition)
        return _named(bind(argwhere_p, c), name)
    rank = builtins.max(len(np.shape(x)) if not _is_tensor(x) else len(x.shape),
                        len(np.shape(y)) if not _is_tensor(y) else len(y.shape))
    c_shape = condition.shape if _is_tensor(condition) else np.shape(condition)
    if len(c_shape) == 1 and rank > 1:
        condition = ops.reshape(condition, *((-1,) + (1,) * (rank - 1)))
    return _named(ops.where(condition, x, y), name)


def where_v2(condition, x=None, y=None, name=None):
    """``tf.where_v2``: numpy's broadcasting of the three arguments (no row rule)."""
    if (x is None) != (y is None):
        raise ValueError("where_v2: x and y must both be non-None or both be None")
    if x is None:
        return where(condition, name=name)
    return _named(ops.where(condition, x, y), name)


def ensure_shape(x, shape, message=None, name=None):
    """``x`` with the static shape ``shape`` (None entries: any size), checked
    when the graph runs (``tf.ensure_shape``): how a value of unknown rank (a
    placeholder made without a shape) gets one; a shape that does not fit is
    a ShapeError."""
    if hasattr(shape, "as_list"):
        shape = shape.as_list()
    if isinstance(shape, (int, np.integer)):
        shape = [shape]
    out = bind(ensure_shape_p, x, shape=tuple(None if d is None else int(d) for d in shape))
    return named(out, name)


def scalar_probability(op, arg, p, dtype):
    """``p`` (a Value) as a scalar of ``dtype``: a value of unknown rank (a
    placeholder made without a shape) is given rank 0, checked when the
    graph runs (``ensure_shape``)."""
    if p.ndim is None:
        p = ensure_shape(p, [])
    elif tuple(p.shape) != ():
        raise ValueError(f"{op}: {arg} must be a scalar, got '{p.name}' with shape {tuple(p.shape)}")
    if p.dtype.kind != "f":
        raise TypeError(f"{op}: {arg} must be a floating-point scalar, got '{p.name}' of dtype {p.dtype}")
    return p if p.dtype == np.dtype(dtype) else ops.astype(p, dtype)


def stop_gradient(input, name=None):
    """``input`` itself, through which no gradient flows (``tf.stop_gradient``)."""
    return _named(bind(stop_gradient_p, input), name)


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """``value`` cut along ``axis`` (``tf.split``): an int ``n`` makes ``n``
    equal parts (that dimension must be known and divisible by ``n``); a
    list gives the parts' sizes, one of which may be -1 (the rest)."""
    nd = len(value.shape)
    ax = _axis_in("split", axis, nd)
    d = value.shape[ax]
    if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(num_or_size_splits, bool):
        n = int(num_or_size_splits)
        if n <= 0:
            raise ValueError(f"split: num_or_size_splits must be positive, got {n}")
        if d is None:
            raise ValueError(f"split: dimension {ax} of shape {fmt_shape(value.shape)} must be known to split it "
                             f"into {n} equal parts")
        if d % n:
            raise ValueError(f"split: dimension {ax} of size {d} is not divisible by num_or_size_splits={n}")
        sizes = [d // n] * n
    else:
        sizes = [int(s) for s in _ints("split", "num_or_size_splits", num_or_size_splits).reshape(-1)]
        if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
            raise ValueError(f"split: size_splits {sizes} may hold at most one -1 and no other negative size")
        known = builtins.sum(s for s in sizes if s != -1)
        if -1 in sizes:
            if d is None:
                raise ValueError(f"split: dimension {ax} of shape {fmt_shape(value.shape)} must be known to infer "
                                 f"the -1 in size_splits {sizes}")
            if known > d:
                raise ValueError(f"split: size_splits {sizes} add up to more than dimension {ax} of size {d}")
            sizes[sizes.index(-1)] = d - known
        elif d is not None and known != d:
            raise ValueError(f"split: size_splits {sizes} add up to {known}, not to dimension {ax} of size {d}")
        if num is not None and num != len(sizes):
            raise ValueError(f"split: num={num} does not match the {len(sizes)} size_splits")
    if d is None:
        # numpy would ignore the rest of a longer dimension (or shorten the last part): check it when fed
        value = _check_dims(value, value, [(ax, builtins.sum(sizes))], "split", "num_or_size_splits")
    out, start = [], 0
    for s in sizes:
        out.append(ops.getitem(value, (builtins.slice(None),) * ax + (builtins.slice(start, start + s),)))
        start += s
    return out


def squeeze(input, axis=None, name=None, squeeze_dims=None):
    """``input`` without the dimensions of size 1 listed in ``axis`` (an int
    or a list), or without every dimension of size 1 (``tf.squeeze``).
    Squeezing a dimension that is not 1 is an error, as in TF1 (torch would
    return the input unchanged)."""
    if squeeze_dims is not None:
        if axis is not None:
            raise ValueError("squeeze: cannot specify both 'axis' and 'squeeze_dims'")
        axis = squeeze_dims
    shp = list(input.shape)
    if axis is None:
        if None in shp:
            raise ValueError(f"squeeze: input shape {fmt_shape(shp)} has unknown dimensions: name the ones to "
                             f"remove with axis=")
        axes = [k for k, d in enumerate(shp) if d == 1]
    else:
        raw = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
        axes = sorted({_axis_in("squeeze", a, len(shp)) for a in raw})
        for a in axes:
            if shp[a] is not None and shp[a] != 1:
                raise ValueError(f"squeeze: can not squeeze dim[{a}], expected a dimension of 1, got {shp[a]} "
                                 f"(input shape {fmt_shape(shp)})")
    unknown = [a for a in axes if shp[a] is None]
    if unknown:
        # [0] of an unknown dimension would silently drop the rest of it: check it is 1 when fed
        input = _check_dims(input, input, [(a, 1) for a in unknown], "squeeze", "axis")
    index = tuple(0 if k in axes else builtins.slice(None) for k in builtins.range(len(shp)))
    out = ops.getitem(input, index) if axes else input
    return _named(out, name)


def _reshape_dynamic(x, *dims, template):
    it = iter(dims)
    return np.reshape(x, tuple(int(next(it)) if d is None else d for d in template))


def _reshape_dynamic_shape(x, *dims, template):
    for k, d in enumerate(dims):
        _int_scalar("reshape", f"shape (run-time entry {k})", d)
    return Aval(tuple(None if d is None or d == -1 else d for d in template), dtype_of(x))


def _reshape_dynamic_vjp(g, ins, out, template):
    return (np.reshape(g, np.shape(ins[0])),) + (None,) * (len(ins) - 1)


reshape_dynamic_p = StaticPrimitive("reshape_dynamic", _reshape_dynamic, _reshape_dynamic_shape,
                                    joint_vjp=_reshape_dynamic_vjp)


def reshape(tensor, shape, name=None):
    """``tensor`` with shape ``shape`` (``tf.reshape``): ints (one may be -1)
    and integer scalar Values read when the graph runs
    (``reshape(x, [tf.shape(x)[0], -1, 4])``), or a 1-D integer Value."""
    dims = dims_list("reshape", shape)
    if _known(dims):
        return _named(ops.reshape(tensor, *[int(d) for d in dims]), name)
    template, ins = [], []
    for k, d in enumerate(dims):
        if isinstance(d, Value):
            ins.append(d)
            template.append(None)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= -1:
            template.append(int(d))
        else:
            raise ValueError(f"reshape: shape[{k}] must be an int >= -1 or an integer scalar Value, got {d!r}")
    if template.count(-1) > 1:
        raise ValueError(f"reshape: only one dimension can be -1, got shape {template}")
    return add_op(reshape_dynamic_p, tensor, *ins, template=tuple(template), name=name)


def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None, seq_dim=None, batch_dim=None):
    """Each batch entry ``b`` of ``input`` with its first ``seq_lengths[b]``
    steps along ``seq_axis`` reversed and the rest unchanged
    (``tf.reverse_sequence``); ``batch_axis`` defaults to 0."""
    if not isinstance(input, Value):
        raise TypeError(f"reverse_sequence: input must be a Value of a static graph, got {type(input).__name__}")
    seq_axis = seq_dim if seq_axis is None else seq_axis
    batch_axis = batch_dim if batch_axis is None else batch_axis
    if seq_axis is None:
        raise ValueError("reverse_sequence: seq_axis is required")
    batch_axis = 0 if batch_axis is None else batch_axis
    nd = len(input.shape)
    sa, ba = _axis_in("reverse_sequence", seq_axis, nd, "seq_axis"), _axis_in("reverse_sequence", batch_axis, nd,
                                                                             "batch_axis")
    if sa == ba:
        raise ValueError(f"reverse_sequence: seq_axis and batch_axis must differ, both are {sa}")
    if not isinstance(seq_lengths, Value):
        seq_lengths = np.asarray(seq_lengths, dtype=np.int64)
    if len(seq_lengths.shape) != 1 or seq_lengths.dtype.kind not in "iu":
        raise ValueError(f"reverse_sequence: seq_lengths must be a 1-D integer vector, got shape "
                         f"{fmt_shape(seq_lengths.shape)} and dtype {seq_lengths.dtype}")
    # with batch and time first, row b reads time index len[b]-1-t while t < len[b], else t itself
    rest = tuple(k for k in builtins.range(nd) if k not in (ba, sa))
    x = ops.transpose(input, (ba, sa) + rest) if (ba, sa) != (0, 1) else input
    seq_lengths = check_same_size(seq_lengths, 0, x, 0, "reverse_sequence", "seq_lengths", "input")
    lengths = ops.astype(seq_lengths, np.int64)
    steps = range(shape(x)[1])
    t = ops.unsqueeze(steps, 0)                                            # (1, T)
    n = ops.unsqueeze(lengths, 1)                                          # (B, 1)
    src = ops.where(ops.less(t, n), n - 1 - t, t + ops.mul(n, 0))        # (B, T)
    rows = ops.unsqueeze(range(shape(x)[0]), 1) + ops.mul(t, 0)            # (B, T)
    out = bind(gather_nd_p, x, ops.stack([rows, src], axis=-1))
    if (ba, sa) != (0, 1):
        out = ops.transpose(out, tuple(int(i) for i in np.argsort((ba, sa) + rest)))
    if tuple(out.shape) != tuple(input.shape):
        out = ensure_shape(out, input.shape)          # input's static shape, as TF1's (the gather lost the sizes)
    return _named(out, name)


# --------------------------------------------------------------------------
# run-time checks of sizes a graph learns only when it is fed
# --------------------------------------------------------------------------

def _what(v):
    """How an error names value ``v``: its placeholder when it is one, else
    the one placeholder it is computed from, when there is exactly one."""
    g = v.graph
    p = g.producer[v.id].prim
    if p is placeholder_p:
        return f"placeholder '{v.name}'"
    if p is constant_p:
        return "a constant"
    found, seen, stack = set(), set(), [v.id]
    while stack and len(seen) < 10000:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        e = g.producer[i]
        if e.prim is placeholder_p:
            found.add(g.values[i].name)
        stack.extend(e.ins)
    return f"'{v.name}', computed from placeholder '{found.pop()}'" if len(found) == 1 else f"'{v.name}'"


def _same_size(x, ref, x_axis, ref_axis, op, x_arg, ref_arg, what=None):
    n, m = np.shape(x)[x_axis], np.shape(ref)[ref_axis]
    if n != m:
        raise ShapeError(f"{op}: {x_arg} has {n} entries along axis {x_axis} but {ref_arg} has {m} along axis "
                         f"{ref_axis}" + (f" ({what})" if what else ""))
    return x


def _pass_vjp(g, ins, out, **attrs):
    # a check passes its first input through: so does the gradient
    return (g,) + (None,) * (len(ins) - 1)


same_size_p = StaticPrimitive("check_same_size", _same_size,
                              lambda x, ref, **a: Aval(tuple(x.shape), dtype_of(x)), joint_vjp=_pass_vjp)


def check_same_size(x, x_axis, ref, ref_axis, op, x_arg, ref_arg, what=None):
    """``x`` itself, once ``x.shape[x_axis] == ref.shape[ref_axis]`` has been
    checked: at once when both are known, else when the graph runs (a check
    node naming ``op``, both arguments, the placeholders they are and
    ``what`` the reference dimension is). A ShapeError either way."""
    n, m = x.shape[x_axis], ref.shape[ref_axis]
    xa = f"{x_arg} ({_what(x)})" if isinstance(x, Value) else x_arg
    ra = f"{ref_arg} ({_what(ref)})" if isinstance(ref, Value) else ref_arg
    if n is not None and m is not None:
        if n != m:
            _same_size(np.empty((n,) * (x_axis + 1)), np.empty((m,) * (ref_axis + 1)), x_axis, ref_axis, op, xa, ra,
                       what)
        return x
    return add_op(same_size_p, x, ref, x_axis=x_axis, ref_axis=ref_axis, op=op, x_arg=xa, ref_arg=ra, what=what,
                  name=f"{op}/check_{x_arg}")


def _dims_are(x, ref, dims, op, arg):
    for axis, want in dims:
        got = np.shape(ref)[axis]
        if got != want:
            raise ShapeError(f"{op}: {arg} needs dimension {axis} of the input to be {want}, the fed input has "
                             f"{got} (input shape {np.shape(ref)})")
    return x


dims_are_p = StaticPrimitive("check_dims", _dims_are, lambda x, ref, **a: Aval(tuple(x.shape), dtype_of(x)),
                             joint_vjp=_pass_vjp)


def _check_dims(x, ref, dims, op, arg):
    return add_op(dims_are_p, x, ref, dims=tuple(dims), op=op, arg=arg, name=f"{op}/check_{arg}")


def _size_is(x, sizes, op, arg):
    got = np.shape(x)
    for k, want in enumerate(sizes):
        if want is not None and got[k] != want:
            raise ShapeError(f"{op}: {arg} asks for {want} entries along dimension {k}, the fed input has only "
                             f"{got[k]} there")
    return x


def _size_is_shape(x, sizes, op, arg):
    return Aval(tuple(d if s is None else s for d, s in zip(x.shape, sizes)), dtype_of(x))


size_is_p = StaticPrimitive("check_size", _size_is, _size_is_shape, joint_vjp=_pass_vjp)


def check_size(x, sizes, op, arg):
    """``x`` itself, after checking at run time that its dimensions are
    ``sizes`` (None: any), e.g. that a slice of an unknown dimension was not
    shortened by numpy."""
    return add_op(size_is_p, x, sizes=tuple(sizes), op=op, arg=arg, name=f"{op}/check_{arg}")
