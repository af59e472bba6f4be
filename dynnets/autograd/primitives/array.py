"""Reductions, shapes and indexing: sum, mean, max, reshape, transpose,
broadcast_to, getitem, take, concat, stack, split_rows; and PyTorch's
gather, split (by sizes), pad and vector norm."""
from __future__ import annotations

import math

import numpy as np

from .. import kernels as K
from ..gradtypes import RowSparse, join_rows
from .core import (BATCH_REDUCE, BATCH_VIEW, batch_rows, Aval, DTypeError, IndexRangeError, PromotionNeeded,
                   ShapeError, defprim, dims_match, dtype_of, fits, fmt_shape, is_int, is_kernel_float, norm_axis,
                   shape_of, torch_promote, unbroadcast)

__all__ = ["sum_p", "mean_p", "max_p", "reshape_p", "transpose_p", "broadcast_to_p", "getitem_p", "setitem_p", "take_p", "concat_p", "stack_p", "split_rows_p", "segment_sum_p", "gather_rows_p", "arena_gather_p", "argmax_p",
           "gather_p", "split_p", "pad_p", "norm_p"]

# --------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------


def _reduce_shape(name):
    def rule(x, axis=None, keepdims=False):
        if x.shape is None and axis is None:
            # all axes of an input of unknown rank: a scalar (of that unknown rank with keepdims)
            ax, shp = None, (None if keepdims else ())
        else:
            ax = norm_axis(name, axis, len(x.shape))
        if x.shape is None:
            pass
        elif ax is None:
            shp = (1,) * len(x.shape) if keepdims else ()
        elif keepdims:
            shp = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
        else:
            shp = tuple(d for i, d in enumerate(x.shape) if i not in ax)
        dt = dtype_of(x)
        if name == "mean" and dt.kind not in "fc":
            # as torch.mean: the mean of integers has no dtype to be computed in (numpy's float64
            # would be a silent difference)
            raise DTypeError(f"mean: expected a floating-point input, got dtype {dt} (as torch.mean: cast "
                             f"first, x.float().mean())")
        elif name == "sum" and dt.kind in "biu":
            dt = _sum_dtype(dt)
        return Aval(shp, dt)
    rule.__name__ = f"{name}_shape"
    return rule


def _sum_dtype(dt):
    """torch's sum of booleans and integers of any width or sign is int64
    (numpy's of unsigned ones is uint64, where ``x.sum() - 500`` wraps)."""
    return np.dtype(np.int64)


def _expand_to(g, shape, axis, keepdims):
    """Adjoint of a reduction: ``g`` repeated along the reduced axes."""
    # A fresh array rather than np.broadcast_to's read-only view: broadcast_to
    # costs ~1.8 us of Python per call, empty+copyto ~0.5 us, and the result is
    # writeable, so a leaf can keep it without another copy.
    out = np.empty(shape, dtype=g.dtype)
    if axis is None and not keepdims:
        out.fill(g)           # a whole-tensor reduction's scalar: fill costs less than copyto
        return out
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    np.copyto(out, g)
    return out


def _sum(x, axis=None, keepdims=False):
    # the ufunc method directly: np.sum adds ~0.8 us of Python dispatch (and
    # positional arguments parse faster than keywords)
    if x.dtype.kind == "u":
        return np.add.reduce(x, axis, np.int64, keepdims=keepdims)
    if keepdims:
        return np.add.reduce(x, axis, keepdims=True)
    return np.add.reduce(x, axis)


def _mean(x, axis=None, keepdims=False):
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "f":
        return np.add.reduce(x, axis=axis, keepdims=keepdims) / _count(x.shape, axis)
    return np.mean(x, axis=axis, keepdims=keepdims)


def _count(shape, axis):
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else axis
    return math.prod(shape[a] for a in axes)


def _sum_vjp(g, ins, out, axis=None, keepdims=False):
    x = ins[0]
    try:
        shape = x.shape
    except AttributeError:
        shape = np.shape(x)
    if axis is None and not keepdims:
        # a whole-tensor sum (the usual loss): _expand_to's first case inline
        gx = np.empty(shape, dtype=g.dtype)
        gx.fill(g)
        return gx
    return _expand_to(g, shape, axis, keepdims)


sum_p = defprim("sum", _sum, _reduce_shape("sum"), vjp=(_sum_vjp,), vjp_reads=((),),
                native=lambda gen, ins, attrs: gen.reduce(ins, attrs, mean=False),
                native_vjp=(lambda gen, ins, attrs: gen.reduce_vjp(ins, attrs, mean=False),),
    batch=BATCH_REDUCE)

mean_p = defprim("mean", _mean, _reduce_shape("mean"),
                 vjp=(lambda g, ins, out, axis=None, keepdims=False:
                      _expand_to(g / _count(shape_of(ins[0]), axis), shape_of(ins[0]), axis, keepdims),),
                 vjp_reads=((),), native=lambda gen, ins, attrs: gen.reduce(ins, attrs, mean=True),
                 native_vjp=(lambda gen, ins, attrs: gen.reduce_vjp(ins, attrs, mean=True),),
    batch=BATCH_REDUCE)


def _max(x, axis=None, keepdims=False):
    return np.max(x, axis=axis, keepdims=keepdims)


def _max_vjp(g, ins, out, axis=None, keepdims=False):
    x = ins[0]
    o = out if (keepdims or axis is None and np.ndim(out) == x.ndim) else (
        np.expand_dims(out, axis) if axis is not None else out)
    mask = (x == o)
    # ties share the gradient evenly (the subgradient PyTorch's amax uses)
    count = mask.sum(axis=axis, keepdims=True)
    gg = g if (keepdims or axis is None) else np.expand_dims(g, axis)
    return (mask * (gg / count)).astype(x.dtype, copy=False)


def _max_shape(x, axis=None, keepdims=False):
    ax = norm_axis("max", axis, len(x.shape))
    for a in (ax or range(len(x.shape))):
        if x.shape[a] == 0:
            raise ShapeError(f"max: cannot reduce over axis {a} of size 0 (x.shape={fmt_shape(x.shape)})")
    return _reduce_shape("max")(x, axis, keepdims)


max_p = defprim("max", _max, _max_shape, vjp=(_max_vjp,), vjp_reads=((0, "out"),),
    batch=BATCH_REDUCE)

# --------------------------------------------------------------------------
# shapes and indexing
# --------------------------------------------------------------------------


def _reshape(x, shape):
    return np.reshape(x, shape)


def _shape_attr(op, shape):
    """A target shape attribute as a tuple of Python ints (DTypeError otherwise)."""
    if not isinstance(shape, (tuple, list)) or not all(is_int(d) for d in shape):
        raise DTypeError(f"{op}: shape must be a tuple of integers, got {shape!r}")
    return tuple(int(d) for d in shape)


def _reshape_shape(x, shape):
    shape = _shape_attr("reshape", shape)
    if any(d < -1 for d in shape):
        raise ShapeError(f"reshape: invalid dimension in shape={shape} (dimensions are >= 0, or -1 for one "
                         f"inferred from the others)")
    if sum(1 for d in shape if d == -1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got shape={shape}")
    rest = math.prod(d for d in shape if d != -1)
    if any(d is None for d in x.shape):
        # the known part of x must fit: its element count divides the result's
        known = math.prod(d for d in x.shape if d is not None)
        if -1 not in shape and (rest % known if known else rest):
            raise ShapeError(f"reshape: cannot reshape x.shape={fmt_shape(x.shape)} into shape={shape}")
        return Aval(tuple(None if d == -1 else d for d in shape), dtype_of(x))
    n = math.prod(x.shape)
    if -1 in shape:
        if rest == 0 or n % rest:
            raise ShapeError(f"reshape: cannot reshape x.shape={fmt_shape(x.shape)} ({n} elements) into shape={shape}")
        shape = tuple(n // rest if d == -1 else d for d in shape)
    elif rest != n:
        raise ShapeError(f"reshape: cannot reshape x.shape={fmt_shape(x.shape)} ({n} elements) into shape={shape}")
    return Aval(shape, dtype_of(x))


reshape_p = defprim("reshape", _reshape, _reshape_shape,
                    vjp=(lambda g, ins, out, shape: g.reshape(np.shape(ins[0])),), vjp_reads=((),),
                    native=lambda gen, ins, attrs: gen.reshape_to(ins.outs[0], ins.args[0]),
                    native_vjp=(lambda gen, ins, attrs: gen.reshape_to(ins.outs[0], ins.args[0]),),
    batch=BATCH_VIEW)


def _transpose(x, axes=None):
    return np.transpose(x, axes)


def _transpose_shape(x, axes=None):
    nd = len(x.shape)
    if axes is None:
        return Aval(tuple(reversed(x.shape)), dtype_of(x))
    if not isinstance(axes, (tuple, list)) or not all(is_int(a) for a in axes):
        raise DTypeError(f"transpose: axes must be a tuple of integers, got {axes!r}")
    axes = tuple(axes)
    if sorted(a % nd if -nd <= a < nd else a for a in axes) != list(range(nd)):
        raise ShapeError(f"transpose: axes={axes} is not a permutation of the {nd} dimensions of x.shape={fmt_shape(x.shape)}")
    return Aval(tuple(x.shape[a] for a in axes), dtype_of(x))


def _transpose_vjp(g, ins, out, axes=None):
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, np.argsort([a % g.ndim for a in axes]))



def _keeps_rows(x, axes=None):
    """A transpose that leaves axis 0 first is row-wise (batches by rows)."""
    return axes is not None and len(x.shape) >= 1 and len(axes) == len(x.shape) and axes[0] % len(x.shape) == 0


def _transpose_native_vjp(gen, ins, attrs):
    g = ins.args[0]
    nd = len(gen.shape[g])
    axes = (attrs or {}).get("axes")
    inv = None if axes is None else tuple(int(i) for i in np.argsort([int(a) % nd for a in axes]))
    gen.transpose_to(ins.outs[0], g, inv)


transpose_p = defprim("transpose", _transpose, _transpose_shape, vjp=(_transpose_vjp,), vjp_reads=((),),
                      native=lambda gen, ins, attrs: gen.transpose_to(ins.outs[0], ins.args[0],
                                                                      (attrs or {}).get("axes")),
                      native_vjp=(_transpose_native_vjp,),
    batch=batch_rows(0, when=_keeps_rows))


def _broadcast_to(x, shape):
    return np.broadcast_to(x, shape)


def _broadcast_to_shape(x, shape):
    shape = _shape_attr("broadcast_to", shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"broadcast_to: shape={shape} has a negative dimension")
    xs = tuple(x.shape)
    if len(xs) > len(shape) or any(d is not None and d != 1 and d != t for d, t in zip(reversed(xs), reversed(shape))):
        raise ShapeError(f"broadcast_to: x.shape={fmt_shape(xs)} cannot be broadcast to shape={shape}")
    return Aval(shape, dtype_of(x))


broadcast_to_p = defprim("broadcast_to", _broadcast_to, _broadcast_to_shape,
                         vjp=(lambda g, ins, out, shape: unbroadcast(g, np.shape(ins[0])),), vjp_reads=((),),
                         native="{0}", native_vjp=("{g}",))


def _is_basic(index):
    idx = index if isinstance(index, tuple) else (index,)
    for i in idx:
        if not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice))):
            return False
    return True


def _getitem(x, index):
    r = x[index]
    if type(r) is np.ndarray:
        return r
    # an element: a 0-d view of it rather than numpy's scalar copy, as torch's
    # x[i, j] (so that t = x[0]; t += 1 changes x, as in torch)
    return x[(index if type(index) is tuple else (index,)) + (Ellipsis,)]


def _index_error(index, x, msg):
    return IndexRangeError(f"getitem: index {index!r} is invalid for x.shape={fmt_shape(x.shape)}: {msg}")


def _getitem_shape(x, index):
    """numpy's indexing rules computed on the shape alone: a slice of a known
    dimension has ``len(range(*slice.indices(d)))`` elements, of an unknown one
    an unknown number; integer and boolean arrays (advanced indices) give the
    broadcast shape of the index arrays, in place of the indexed dimensions
    when those are adjacent, else in front (numpy's rule). Index values are
    not range-checked against unknown dimensions (the run checks them)."""
    shape = tuple(x.shape)
    nd = len(shape)
    items = index if type(index) is tuple else (index,)
    kinds = []                 # (kind, value): new, ell, int, slice, iarr, barr
    used = 0
    for i in items:
        if i is None:
            kinds.append(("new", None))
        elif i is Ellipsis:
            kinds.append(("ell", None))
        elif isinstance(i, (bool, np.bool_)):
            kinds.append(("barr", np.asarray(i)))
        elif is_int(i):
            kinds.append(("int", int(i)))
            used += 1
        elif type(i) is slice:
            for part in (i.start, i.stop, i.step):
                if part is not None and not hasattr(part, "__index__"):
                    raise _index_error(index, x, "slice bounds must be integers or None")
            if i.step is not None and i.step.__index__() == 0:
                raise _index_error(index, x, "slice step cannot be zero")
            kinds.append(("slice", i))
            used += 1
        else:
            a = i if type(i) is np.ndarray else np.asarray(i) if isinstance(i, (list, tuple)) else None
            if a is None or a.dtype.kind not in "biu":
                raise _index_error(index, x, "only integers, slices, None, Ellipsis and integer or boolean "
                                             "arrays are valid indices")
            if a.dtype.kind == "b":
                kinds.append(("barr", a))
                used += a.ndim
            else:
                kinds.append(("iarr", a))
                used += 1
    n_ell = sum(1 for k, _ in kinds if k == "ell")
    if n_ell > 1:
        raise _index_error(index, x, "an index can only have a single ellipsis")
    if used > nd:
        raise _index_error(index, x, f"too many indices ({used}) for {nd} dimensions")
    full = ("slice", slice(None))
    if n_ell:
        k = next(j for j, (kind, _) in enumerate(kinds) if kind == "ell")
        # the ellipsis stays as a separator: numpy never counts advanced
        # indices on both sides of one as adjacent, even when it stands for no dimension
        kinds[k:k + 1] = [("ell", None)] + [full] * (nd - used)
    else:
        kinds += [full] * (nd - used)
    advanced = any(k in ("iarr", "barr") for k, _ in kinds)
    out = []
    adv_shapes = []
    adv_at = []                # positions in `kinds` of advanced indices
    p = 0
    for j, (kind, v) in enumerate(kinds):
        if kind == "ell":
            continue
        if kind == "new":
            out.append(1)
            continue
        if kind == "slice":
            d = shape[p]
            out.append(None if d is None else len(range(*v.indices(d))))
            p += 1
            continue
        if kind == "int":
            d = shape[p]
            if d is not None and not -d <= v < d:
                raise _index_error(index, x, f"{v} is out of range for dimension {p} of size {d}")
            p += 1
            if not advanced:
                continue
            adv_shapes.append(())
        elif kind == "iarr":
            adv_shapes.append(v.shape)
            p += 1
        else:
            dims = shape[p:p + v.ndim]
            # (numpy skips the match for an empty mask)
            if v.size and any(d is not None and d != m for d, m in zip(dims, v.shape)):
                raise _index_error(index, x, f"boolean index of shape {v.shape} does not match the indexed "
                                             f"dimensions {fmt_shape(dims)}")
            adv_shapes.append((int(np.count_nonzero(v)),))
            p += v.ndim
        adv_at.append(j)
        out.append("adv")
    if not advanced:
        return Aval(tuple(out), dtype_of(x))
    try:
        bshape = np.broadcast_shapes(*adv_shapes)
    except ValueError:
        raise _index_error(index, x, f"index arrays of shapes {adv_shapes} cannot be broadcast together") from None
    basic = [d for d in out if d != "adv"]
    if adv_at == list(range(adv_at[0], adv_at[-1] + 1)):
        at = out.index("adv")
        return Aval(tuple(basic[:at]) + bshape + tuple(basic[at:]), dtype_of(x))
    return Aval(bshape + tuple(basic), dtype_of(x))


def _getitem_vjp(g, ins, out, index):
    x = ins[0]
    gx = np.zeros(np.shape(x), dtype=g.dtype)
    if _is_basic(index):
        gx[index] = g
    else:
        np.add.at(gx, index, g)     # repeated indices accumulate
    return gx


_SLICE = object()      # marks a slice in getitem's attribute key


def _getitem_key(index):
    """A hashable stand-in for a basic index (slices are unhashable before
    Python 3.12); an index holding arrays stays unhashable (TypeError)."""
    tp = type(index)
    if tp is tuple:
        key = []            # a plain loop: a comprehension's frame costs ~0.1 us here
        for i in index:
            key.append((_SLICE, i.start, i.stop, i.step) if type(i) is slice else i)
        return tuple(key)
    if tp is slice:
        return (_SLICE, index.start, index.stop, index.step)
    return index


getitem_p = defprim("getitem", _getitem, _getitem_shape, vjp=(_getitem_vjp,), attr_key=_getitem_key, vjp_reads=((),),
    batch=BATCH_VIEW)


def _setitem(x, v, index):
    """``x`` with ``x[index] = v`` (``v`` broadcast, cast to ``x``'s dtype),
    out of place. Eager ``x[index] = v`` writes into ``x`` itself and records
    this primitive for the gradient (:func:`dynnets.autograd.backprop.write_inplace`)."""
    out = np.array(x, copy=True)
    out[index] = v
    return out


def _setitem_shape(x, v, index):
    """The index as getitem checks it; ``v`` must broadcast to the indexed
    region (numpy's assignment rule, which also drops leading dimensions of
    size 1 from ``v``); the result has ``x``'s shape and dtype."""
    try:
        region = tuple(_getitem_shape(x, index).shape)
    except ShapeError as e:
        raise type(e)("setitem" + str(e)[len("getitem"):]) from None
    vs = tuple(v.shape)
    extra = len(vs) - len(region)
    if extra > 0 and all(d is None or d == 1 for d in vs[:extra]):
        vs = vs[extra:]
    ok = len(vs) <= len(region) and all(a is None or b is None or a == 1 or a == b
                                        for a, b in zip(reversed(vs), reversed(region)))
    if not ok:
        raise ShapeError(f"setitem: value.shape={fmt_shape(tuple(v.shape))} cannot be broadcast to the indexed "
                         f"region x[{index!r}] of shape {fmt_shape(region)} (x.shape={fmt_shape(x.shape)})")
    if dtype_of(v).kind not in "biuf":
        raise DTypeError(f"setitem: value must be numeric, got dtype {dtype_of(v)}")
    return Aval(tuple(x.shape), dtype_of(x))


def _setitem_vjp_x(g, ins, out, index):
    # the old values at the index were overwritten: no gradient reaches them
    gx = np.array(g, copy=True)
    gx[index] = 0
    return gx


def _setitem_vjp_v(g, ins, out, index):
    # each element of the value gets the gradient of the positions it was
    # written to (as torch's index_put backward, also for repeated indices)
    gv = np.asarray(g[index])
    vs = shape_of(ins[1])
    extra = len(vs) - gv.ndim
    if extra > 0:
        return unbroadcast(gv, vs[extra:]).reshape(vs)
    return unbroadcast(gv, vs)


setitem_p = defprim("setitem", _setitem, _setitem_shape, vjp=(_setitem_vjp_x, _setitem_vjp_v),
                    attr_key=_getitem_key, vjp_reads=((), ()))


def _take(x, idx):
    """Rows of ``x`` at integer indices ``idx`` (a gather along axis 0)."""
    return x[idx]


def _take_shape(x, idx):
    if dtype_of(idx).kind not in "iu":
        raise ShapeError(f"take: indices must be integers, got dtype {dtype_of(idx)}")
    if len(x.shape) < 1:
        raise ShapeError("take: x must have at least one dimension")
    return Aval(tuple(idx.shape) + tuple(x.shape[1:]), dtype_of(x))


def _take_vjp(g, ins, out):
    x, idx = ins
    shape = np.shape(x)
    idx = np.asarray(idx)
    if (idx.ndim == 1 and len(shape) == 2 and idx.size and is_kernel_float(g.dtype)
            and idx.dtype.kind in "iu" and g.shape == (idx.shape[0], shape[1])):
        # rows scatter-added by the Numba kernel: np.add.at took 1.8 ms for
        # 480 rows of 600 (measured), the kernel a few microseconds
        n = shape[0]
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        lo, hi = idx.min(), idx.max()
        # the forward accepted these indices; checked again because the
        # kernel does not bounds-check (the array may have changed since)
        if lo < -n or hi >= n:
            raise IndexRangeError(f"take: index {lo if lo < -n else hi} is out of range for x.shape[0]={n}")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
        return K.embedding_bwd(idx, np.ascontiguousarray(g), n)
    gx = np.zeros(shape, dtype=g.dtype)
    np.add.at(gx, idx, g)
    return gx


take_p = defprim("take", _take, _take_shape, vjp=(_take_vjp, None), nondiff_args=(1,), vjp_reads=((1,), ()),
    batch=BATCH_VIEW)


def _concat(*xs, axis=0):
    return np.concatenate(xs, axis=axis)


def _many_dtype(xs, op="concat"):
    """The result dtype of concatenating or stacking ``xs``: numpy makes Python
    scalars arrays there (no weak promotion). One result_type over the distinct
    dtypes: a recursive model concatenates thousands of node states. Where
    PyTorch's promotion differs (int64 with float32: torch.cat gives float32,
    numpy float64), ``PromotionNeeded``: the public ops cast the inputs."""
    dts = {x.dtype for x in xs}
    if len(dts) == 1:
        d = next(iter(dts))
        return d if isinstance(d, np.dtype) else dtype_of(Aval((), d))
    dts = [d if isinstance(d, np.dtype) else dtype_of(Aval((), d)) for d in dts]
    dt = np.result_type(*dts)
    want = dts[0]
    for d in dts[1:]:
        want = torch_promote(want, d)
    if want != dt:
        raise PromotionNeeded(f"{op}: PyTorch joins inputs of dtypes {sorted(map(str, dts))} as {want}, numpy as "
                              f"{dt}; the dynnets ops cast them to {want} first (bound directly: cast them with "
                              f"astype)")
    return dt


def _concat_shape(*xs, axis=0):
    if not xs:
        raise ShapeError("concat: expected at least one input")
    shapes = [x.shape for x in xs]
    s0 = tuple(shapes[0])
    nd = len(s0)
    ax = norm_axis("concat", axis, nd)[0]
    # the set of shapes outside the axis: one element (and no unknown dimension)
    # in the usual case, checked without a Python loop per input (a recursive
    # model concatenates a minibatch's thousands of node states)
    if ax == 0:
        rest = {tuple(s[1:]) if len(s) == nd else None for s in shapes}
    else:
        rest = {tuple(s[:ax]) + tuple(s[ax + 1:]) if len(s) == nd else None for s in shapes}
    if len(rest) != 1 or None in rest or None in next(iter(rest)):
        for i, x in enumerate(xs):
            if len(x.shape) != nd:
                raise ShapeError(f"concat: input {i} has {len(x.shape)} dimensions, input 0 has {nd} "
                                 f"(input {i}.shape={fmt_shape(x.shape)}, input 0.shape={fmt_shape(s0)})")
            for d in range(nd):
                if d != ax and not dims_match(x.shape[d], s0[d]):
                    raise ShapeError(f"concat: input {i}.shape={fmt_shape(x.shape)} does not match input 0.shape="
                                     f"{fmt_shape(s0)} outside axis {axis}")
    sizes = [s[ax] for s in shapes]
    shp = list(s0)
    shp[ax] = None if None in sizes else sum(sizes)
    # known dimensions outside the axis may come from any input
    for d in range(nd):
        if d != ax and shp[d] is None:
            shp[d] = next((s[d] for s in shapes if s[d] is not None), None)
    return Aval(tuple(shp), _many_dtype(xs, "concat"))


def _concat_vjp(g, ins, out, axis=0):
    if axis == 0 or axis == -g.ndim:
        # plain slices: np.split costs ~1.5 us per piece in Python, which
        # dominates when a recursive model concatenates ~1000 node states
        out, start = [], 0
        for x in ins:
            stop = start + np.shape(x)[0]
            out.append(g[start:stop])
            start = stop
        return tuple(out)
    sizes = np.cumsum([np.shape(x)[axis] for x in ins])[:-1]
    return tuple(np.split(g, sizes, axis=axis))


concat_p = defprim("concat", _concat, _concat_shape, joint_vjp=_concat_vjp, vjp_reads=(),
    batch=BATCH_VIEW)


def _stack(*xs, axis=0):
    return np.stack(xs, axis=axis)


def _stack_shape(*xs, axis=0):
    if not xs:
        raise ShapeError("stack: expected at least one input")
    s0 = tuple(xs[0].shape)
    shapes = {tuple(x.shape) for x in xs}
    if len(shapes) != 1 or None in s0:
        for i, x in enumerate(xs):
            if not fits(tuple(x.shape), s0):
                raise ShapeError(f"stack: input {i}.shape={fmt_shape(x.shape)} does not match input 0.shape={fmt_shape(s0)}")
    nd = len(s0) + 1
    ax = norm_axis("stack", axis, nd)[0]
    shp = [next((x.shape[d] for x in xs if x.shape[d] is not None), None) for d in range(len(s0))]
    shp.insert(ax, len(xs))
    return Aval(tuple(shp), _many_dtype(xs, "stack"))


def _stack_vjp(g, ins, out, axis=0):
    return tuple(np.moveaxis(g, axis, 0))


stack_p = defprim("stack", _stack, _stack_shape, joint_vjp=_stack_vjp, vjp_reads=(),
    batch=BATCH_VIEW)

def _split_rows(x):
    """The rows of ``x`` (n, ...) as n arrays of shape (1, ...): a recursive
    model reads its per-word inputs with one node instead of n ``getitem``s
    (whose VJPs would each allocate an (n, ...) gradient)."""
    return tuple(x[i:i + 1] for i in range(x.shape[0]))


def _split_rows_shape(x):
    if len(x.shape) < 1:
        raise ShapeError("split_rows: x must have at least one dimension, got a 0-d input")
    if x.shape[0] is None:
        raise ShapeError(f"split_rows: x.shape[0] (the number of results) must be known, got x.shape={fmt_shape(x.shape)}")
    return tuple(Aval((1,) + tuple(x.shape[1:]), dtype_of(x)) for _ in range(x.shape[0]))


def _split_rows_vjp(g, ins, out):
    x = ins[0]
    return (join_rows(g, np.shape(x), np.asarray(x).dtype),)


split_rows_p = defprim("split_rows", _split_rows, _split_rows_shape, joint_vjp=_split_rows_vjp,
                       multiple_results=True, lazy_grads=True, vjp_reads=(),
    batch=BATCH_VIEW)



# --------------------------------------------------------------------------
# batching support: segment sums and multi-source row gathers (the gathers and
# reductions that connect the batched calls of dynnets.autobatch on the tape)
# --------------------------------------------------------------------------


def _segment_bounds(op, starts, n):
    """``starts`` checked as segment starts over ``n`` rows: 1-D integers,
    first 0, strictly increasing, below ``n`` (no empty segment, which
    ``reduceat`` would not sum to zero)."""
    starts = np.asarray(starts)
    if starts.ndim != 1 or starts.dtype.kind not in "iu" or not starts.size:
        raise ShapeError(f"{op}: starts must be a non-empty 1-D integer array, got shape "
                         f"{fmt_shape(starts.shape)} and dtype {starts.dtype}")
    if starts[0] != 0 or starts[-1] >= n or (starts.size > 1 and np.diff(starts).min() <= 0):
        raise IndexRangeError(f"{op}: starts must begin at 0, increase strictly and stay below x.shape[0]={n}, "
                              f"got {starts.tolist()[:8]}")
    return starts


def _segment_sum(x, starts):
    """Sums of consecutive row segments of ``x`` (R, ...): row k of the result
    is ``x[starts[k]:starts[k+1]].sum(0)`` (the last segment runs to R)."""
    return np.add.reduceat(x, _segment_bounds("segment_sum", starts, x.shape[0]), axis=0)


def _segment_sum_shape(x, starts):
    if len(x.shape) < 1:
        raise ShapeError("segment_sum: x must have at least one dimension, got a 0-d input")
    if len(starts.shape) != 1 or dtype_of(starts).kind not in "iu":
        raise ShapeError(f"segment_sum: starts must be a 1-D integer array, got shape {fmt_shape(starts.shape)} "
                         f"and dtype {dtype_of(starts)}")
    if dtype_of(x).kind != "f":
        raise DTypeError(f"segment_sum: x must be floating-point, got dtype {dtype_of(x)}")
    return Aval((starts.shape[0],) + tuple(x.shape[1:]), dtype_of(x))


def _segment_sum_vjp(g, ins, out):
    x, starts = ins
    n = np.shape(x)[0]
    lengths = np.diff(np.append(np.asarray(starts), n))
    return np.repeat(g, lengths, axis=0)


segment_sum_p = defprim("segment_sum", _segment_sum, _segment_sum_shape, vjp=(_segment_sum_vjp, None),
                        nondiff_args=(1,))


def _gather_plan(which, rows, srcs):
    """Per source ``k``: the output positions and source rows it provides,
    after checking the indices (numpy's indexing checks the upper bound of
    each row; negative rows, which it would wrap, are rejected here)."""
    which = np.asarray(which)
    rows = np.asarray(rows)
    S = len(srcs)
    if rows.size:
        if which.min() < 0 or which.max() >= S:
            raise IndexRangeError(f"gather_rows: source index out of range for {S} sources")
        if rows.min() < 0:
            raise IndexRangeError(f"gather_rows: row index {rows.min()} is negative")
    rows = rows.astype(np.int64, copy=False)
    if S == 1:
        return [(slice(None), rows)]
    # one stable sort by source, then a slice per source (a mask per source
    # cost ~35% more with ten sources, measured)
    order = np.argsort(which, kind="stable")
    b = np.searchsorted(which[order], np.arange(S + 1)).tolist()
    plan = []
    for k in range(S):
        dst = order[b[k]:b[k + 1]]
        plan.append((dst, rows[dst]))
    return plan


def _gather_rows(which, rows, *srcs):
    """Rows from several sources: row i of the result is
    ``srcs[which[i]][rows[i]]``. Sources share their trailing shape."""
    s0 = srcs[0]
    out = np.empty((len(rows),) + s0.shape[1:], dtype=np.result_type(*srcs))
    for (dst, r), s in zip(_gather_plan(which, rows, srcs), srcs):
        if r.size:
            if r.max() >= s.shape[0]:
                raise IndexRangeError(f"gather_rows: row index {r.max()} is out of range for a source of "
                                      f"{s.shape[0]} rows")
            out[dst] = s[r]
    return out


def _gather_rows_shape(which, rows, *srcs):
    if not srcs:
        raise ShapeError("gather_rows: expected at least one source")
    for nm, a in (("which", which), ("rows", rows)):
        if len(a.shape) != 1 or dtype_of(a).kind not in "iu":
            raise ShapeError(f"gather_rows: {nm} must be a 1-D integer array, got shape {fmt_shape(a.shape)} "
                             f"and dtype {dtype_of(a)}")
    if not dims_match(which.shape[0], rows.shape[0]):
        raise ShapeError(f"gather_rows: which.shape={fmt_shape(which.shape)} does not match rows.shape="
                         f"{fmt_shape(rows.shape)}")
    t0 = tuple(srcs[0].shape[1:])
    for i, s in enumerate(srcs):
        if dtype_of(s).kind != "f":
            raise DTypeError(f"gather_rows: source {i} must be floating-point, got dtype {dtype_of(s)}")
        if len(s.shape) < 1 or not fits(tuple(s.shape[1:]), t0):
            raise ShapeError(f"gather_rows: source {i}.shape={fmt_shape(s.shape)} does not have the trailing "
                             f"shape {fmt_shape(t0)} of source 0")
    return Aval((rows.shape[0],) + t0, _many_dtype(srcs, "gather_rows"))


def _gather_rows_vjp(g, ins, out):
    """Each source's gradient as the rows it gave (:class:`RowSparse`): a
    source read by many gathers (a batch output of autobatch) adds them up
    cheaply and is densified once, by its producer's VJP."""
    which, rows = ins[0], ins[1]
    srcs = ins[2:]
    grads = [None, None]
    for (dst, r), s in zip(_gather_plan(which, rows, srcs), srcs):
        dt = np.asarray(s).dtype
        grads.append(RowSparse(r, g[dst].astype(dt, copy=False), np.shape(s)))
    return tuple(grads)


gather_rows_p = defprim("gather_rows", _gather_rows, _gather_rows_shape, joint_vjp=_gather_rows_vjp,
                        nondiff_args=(0, 1))


def _arena_gather(arena, offs, which, rows, *srcs):
    """``gather_rows(which, rows, *srcs)`` where the sources are row slices of
    one array, ``srcs[k] is a view of arena[offs[k]:offs[k] + len(srcs[k])]``
    (autobatch's arena: the outputs of a forced region in one block): one
    ``take`` from the arena instead of two fancy-index copies per source
    (measured ~4 us per source, ~25 sources per Tree-LSTM gather). Sources
    that are not views of ``arena`` take gather_rows' path."""
    which = np.asarray(which)
    rows = np.asarray(rows)
    S = len(srcs)
    if rows.size:
        if which.min() < 0 or which.max() >= S:
            raise IndexRangeError(f"arena_gather: source index out of range for {S} sources")
        if rows.min() < 0:
            raise IndexRangeError(f"arena_gather: row index {rows.min()} is negative")
        lens = np.array([s.shape[0] for s in srcs], dtype=np.int64)
        bad = rows >= lens[which]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise IndexRangeError(f"arena_gather: row index {int(rows[i])} is out of range for a source of "
                                  f"{int(lens[which[i]])} rows")
    # a row slice of the arena has its base, its strides and its trailing
    # shape (and so its dtype); anything else takes gather_rows' path
    st = arena.strides
    tr = arena.shape[1:]
    for s in srcs:
        if s.base is not arena or s.strides != st or s.shape[1:] != tr:
            return _gather_rows(which, rows, *srcs)
    idx = np.asarray(offs, dtype=np.int64)[which] + rows
    if idx.size and (idx.min() < 0 or idx.max() >= arena.shape[0]):
        raise IndexRangeError(f"arena_gather: an offset puts a row outside the arena of {arena.shape[0]} rows")
    return np.take(arena, idx, axis=0)


def _arena_gather_shape(arena, offs, which, rows, *srcs):
    try:
        out = _gather_rows_shape(which, rows, *srcs)
    except (ShapeError, DTypeError) as e:
        raise type(e)("arena_gather" + str(e)[len("gather_rows"):]) from None
    if len(arena.shape) < 1 or not fits(tuple(arena.shape[1:]), tuple(out.shape[1:])):
        raise ShapeError(f"arena_gather: arena.shape={fmt_shape(arena.shape)} does not have the sources' trailing "
                         f"shape {fmt_shape(out.shape[1:])}")
    if len(offs.shape) != 1 or dtype_of(offs).kind not in "iu" or not dims_match(offs.shape[0], len(srcs)):
        raise ShapeError(f"arena_gather: offs must be a 1-D integer array of one offset per source ({len(srcs)}), "
                         f"got shape {fmt_shape(offs.shape)} and dtype {dtype_of(offs)}")
    return out


def _arena_gather_vjp(g, ins, out):
    return (None, None) + _gather_rows_vjp(g, ins[2:], out)


arena_gather_p = defprim("arena_gather", _arena_gather, _arena_gather_shape, joint_vjp=_arena_gather_vjp,
                         nondiff_args=(0, 1, 2, 3))


def _argmax(x, axis=None):
    return np.asarray(np.argmax(x, axis=axis))


def _argmax_shape(x, axis=None):
    if axis is None:
        return Aval((), np.dtype(np.int64))
    nd = len(x.shape)
    if not -nd <= axis < nd:
        raise ShapeError(f"argmax: axis {axis} is out of range for an input with {nd} dimensions")
    return Aval(tuple(d for i, d in enumerate(x.shape) if i != axis % nd), np.dtype(np.int64))


def _argmax_rows(x, axis=None):
    """An argmax over an axis other than 0 is row-wise."""
    return axis is not None and len(x.shape) >= 2 and is_int(axis) and axis % len(x.shape) != 0


argmax_p = defprim("argmax", _argmax, _argmax_shape, differentiable=False, batch=batch_rows(0, when=_argmax_rows))


# --------------------------------------------------------------------------
# PyTorch's gather, split, pad and vector norms
# --------------------------------------------------------------------------


def _gather_index(x, index, dim):
    """The index tuple that reads ``x[..., index[...], ...]`` at every position
    of ``index`` (``index`` along ``dim``, the position itself elsewhere)."""
    nd = index.ndim
    return tuple(index if d == dim else np.arange(s).reshape((1,) * d + (s,) + (1,) * (nd - d - 1))
                 for d, s in enumerate(index.shape))


def _check_gather_values(x, index, dim):
    n = np.shape(x)[dim] if np.ndim(x) else 1
    if index.size:
        lo, hi = index.min(), index.max()
        if lo < 0 or hi >= n:
            raise IndexRangeError(f"gather: index {lo if lo < 0 else hi} is out of bounds for dimension {dim} with "
                                  f"size {n}")


def _gather(x, index, dim):
    """``out[i][j][k] = x[index[i][j][k]][j][k]`` for ``dim`` 0 (and so on),
    as ``torch.gather``: ``index`` has ``x``'s number of dimensions and is no
    larger than ``x`` outside ``dim``; negative indices are out of range."""
    index = np.asarray(index)
    _check_gather_values(x, index, dim)
    if index.ndim == 0:
        return np.array(x, copy=True)
    return np.asarray(x)[_gather_index(x, index, dim % index.ndim)]


def _gather_shape(x, index, dim):
    if not is_int(dim):
        raise DTypeError(f"gather: dim must be an integer, got {dim!r}")
    if dtype_of(index).kind not in "iu":
        raise DTypeError(f"gather: index must be an integer tensor, got dtype {dtype_of(index)}")
    xs, ks = tuple(x.shape), tuple(index.shape)
    if len(ks) != len(xs):
        raise ShapeError(f"gather: index must have as many dimensions as x, got index.shape={fmt_shape(ks)} and "
                         f"x.shape={fmt_shape(xs)}")
    d = norm_axis("gather", dim, max(len(xs), 1))[0]
    for k, (a, b) in enumerate(zip(ks, xs)):
        if k != d and a is not None and b is not None and a > b:
            raise ShapeError(f"gather: index.shape[{k}]={a} is larger than x.shape[{k}]={b} (index.shape="
                             f"{fmt_shape(ks)}, x.shape={fmt_shape(xs)}; only dimension {d} may differ)")
    return Aval(ks, dtype_of(x))


def _gather_vjp(g, ins, out, dim):
    # scatter-add: an index repeated along dim collects every gradient it gave
    x, index = ins
    index = np.asarray(index)
    gx = np.zeros(np.shape(x), dtype=g.dtype)
    if index.ndim == 0:
        gx[()] = g
        return gx
    np.add.at(gx, _gather_index(x, index, dim % index.ndim), g)
    return gx


def _gather_rows_wise(x, index, dim):
    """A gather along another dimension than 0, whose index has x's rows, is
    row-wise (batches by rows)."""
    nd = len(x.shape)
    return nd >= 2 and is_int(dim) and dim % nd != 0 and x.shape[0] == index.shape[0]


gather_p = defprim("gather", _gather, _gather_shape, vjp=(_gather_vjp, None), nondiff_args=(1,),
                   batch=batch_rows(0, 1, when=_gather_rows_wise))


def _split(x, sizes, axis):
    """Consecutive parts of ``sizes[k]`` elements along ``axis`` (views); the
    sizes must add up to ``x.shape[axis]``, checked here as well (a static
    graph may not know that dimension when it is built)."""
    n = x.shape[axis]
    if sum(sizes) != n:
        raise ShapeError(f"split: sizes {list(sizes)} do not add up to x.shape[{axis}]={n}")
    out = []
    start = 0
    lead = (slice(None),) * (axis % x.ndim)
    for s in sizes:
        out.append(x[lead + (slice(start, start + s),)])
        start += s
    return tuple(out)


def _split_shape(x, sizes, axis):
    if not isinstance(sizes, tuple) or not all(is_int(s) and s >= 0 for s in sizes):
        raise DTypeError(f"split: sizes must be a tuple of non-negative integers, got {sizes!r}")
    xs = tuple(x.shape)
    if not is_int(axis):
        raise DTypeError(f"split: axis must be an integer, got {axis!r}")
    if not xs:
        raise ShapeError("split: x must have at least one dimension, got a 0-d input")
    ax = norm_axis("split", axis, len(xs))[0]
    if xs[ax] is not None and sum(sizes) != xs[ax]:
        raise ShapeError(f"split: sizes {list(sizes)} do not add up to x.shape[{axis}]={xs[ax]}")
    return tuple(Aval(xs[:ax] + (int(s),) + xs[ax + 1:], dtype_of(x)) for s in sizes)


def _split_vjp(g, ins, out, sizes, axis):
    x = ins[0]
    parts = [np.zeros(np.shape(o), dtype=np.asarray(x).dtype) if gi is None else gi for gi, o in zip(g, out)]
    return (np.concatenate(parts, axis=axis) if parts else np.zeros(np.shape(x), np.asarray(x).dtype),)


split_p = defprim("split", _split, _split_shape, joint_vjp=_split_vjp, multiple_results=True,
                  batch=batch_rows(0, when=lambda x, sizes, axis: len(x.shape) >= 2 and is_int(axis)
                                   and axis % len(x.shape) != 0))


# torch's modes, and TF1's SYMMETRIC (tf.pad; numpy's 'symmetric'); one primitive serves
# torch.nn.functional.pad and tf.pad
_PAD_MODES = ("constant", "reflect", "replicate", "circular", "symmetric")


def _pad_source(mode, n, lo, hi):
    """For a dimension of size ``n`` padded by ``lo``/``hi`` (>= 0), the
    source position of each output position (reflect: mirrored without the
    edge; symmetric: mirrored with it; replicate: the edge repeated; circular:
    wraps)."""
    p = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(p, 0, n - 1)
    if mode == "circular":
        return p % n
    if mode == "symmetric":
        m = p % (2 * n)
        return np.where(m < n, m, 2 * n - 1 - m)
    period = 2 * (n - 1)
    m = p % period if period else p * 0
    return np.where(m < n, m, period - m)


def _crop(pads, shape):
    """Slices keeping what negative pads remove (torch crops first, then pads)."""
    return tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(pads, shape))


def _pad(x, pads, mode="constant", value=0.0):
    """``x`` padded by ``pads`` ((before, after) per dimension) as
    ``torch.nn.functional.pad``: constant ``value``, or the edge values
    (reflect, replicate, circular); a negative pad removes elements."""
    x = np.asarray(x)
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        x = x[_crop(pads, x.shape)]
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if mode == "constant":
        out = np.full(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pos)), value, dtype=x.dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, pos))] = x
        return out
    for k, (lo, hi) in enumerate(pos):
        if lo or hi:
            x = np.take(x, _pad_source(mode, x.shape[k], lo, hi), axis=k)
    return x


def _pad_shape(x, pads, mode="constant", value=0.0):
    xs = tuple(x.shape)
    if mode not in _PAD_MODES:
        raise ShapeError(f"pad: mode must be one of {list(_PAD_MODES)}, got {mode!r}")
    if (not isinstance(pads, tuple) or len(pads) != len(xs)
            or not all(isinstance(p, tuple) and len(p) == 2 and all(is_int(v) for v in p) for p in pads)):
        raise DTypeError(f"pad: pads must be one (before, after) pair of integers per dimension of x "
                         f"(x.shape={fmt_shape(xs)}), got {pads!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DTypeError(f"pad: value must be a number, got {value!r}")
    out = []
    for k, ((lo, hi), n) in enumerate(zip(pads, xs)):
        if n is None:
            out.append(None)
            continue
        kept = n - max(-lo, 0) - max(-hi, 0)
        if kept < 0 or (kept == 0 and (lo > 0 or hi > 0) and mode != "constant"):
            raise ShapeError(f"pad: pads ({lo}, {hi}) leave {kept} elements of dimension {k} (x.shape="
                             f"{fmt_shape(xs)}) to pad")
        if mode == "reflect" and (lo >= kept or hi >= kept) and (lo > 0 or hi > 0):
            raise ShapeError(f"pad: reflect padding must be less than the dimension padded, got ({lo}, {hi}) for "
                             f"dimension {k} of size {kept}")
        if mode == "symmetric" and (lo > kept or hi > kept):
            raise ShapeError(f"pad: symmetric padding must be at most the dimension padded, got ({lo}, {hi}) for "
                             f"dimension {k} of size {kept}")
        if mode == "circular" and (lo > kept or hi > kept):
            raise ShapeError(f"pad: circular padding ({lo}, {hi}) would wrap around dimension {k} of size {kept} "
                             f"more than once")
        out.append(kept + max(lo, 0) + max(hi, 0))
    return Aval(tuple(out), dtype_of(x))


def _pad_vjp(g, ins, out, pads, mode="constant", value=0.0):
    x = ins[0]
    shape = np.shape(x)
    crop = _crop(pads, shape)
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if mode == "constant":
        inner = g[tuple(slice(lo, g.shape[k] - hi) for k, (lo, hi) in enumerate(pos))]
    else:
        inner = g
        for k in reversed(range(len(pos))):
            lo, hi = pos[k]
            if lo or hi:
                n = inner.shape[k] - lo - hi
                acc = np.zeros(inner.shape[:k] + (n,) + inner.shape[k + 1:], dtype=g.dtype)
                np.add.at(acc, (slice(None),) * k + (_pad_source(mode, n, lo, hi),), inner)
                inner = acc
    if all(lo >= 0 and hi >= 0 for lo, hi in pads):
        return np.array(inner)          # (ascontiguousarray would make a 0-d gradient 1-d)
    gx = np.zeros(shape, dtype=g.dtype)
    gx[crop] = inner
    return gx


def _pad_rows(x, pads, mode="constant", value=0.0):
    """A pad that leaves dimension 0 alone is row-wise."""
    return len(x.shape) >= 1 and isinstance(pads, tuple) and len(pads) >= 1 and tuple(pads[0]) == (0, 0)


pad_p = defprim("pad", _pad, _pad_shape, vjp=(_pad_vjp,), batch=batch_rows(0, when=_pad_rows))


def _vector_norm(x, ord=2.0, axis=None, keepdims=False):
    """The ``ord``-norm over ``axis`` (all by default), as
    ``torch.linalg.vector_norm``: ``(sum |x|^ord)^(1/ord)``, inf/-inf the
    max/min of ``|x|``, 0 the number of non-zeros."""
    x = np.asarray(x)
    if ord == 2.0:
        r = np.sqrt(np.add.reduce(x * x, axis=axis, keepdims=keepdims))
    elif ord == 1.0:
        r = np.add.reduce(np.abs(x), axis=axis, keepdims=keepdims)
    elif ord == np.inf:
        r = np.max(np.abs(x), axis=axis, keepdims=keepdims)
    elif ord == -np.inf:
        r = np.min(np.abs(x), axis=axis, keepdims=keepdims)
    elif ord == 0.0:
        r = np.add.reduce((x != 0).astype(x.dtype), axis=axis, keepdims=keepdims)
    else:
        r = np.add.reduce(np.abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    return np.asarray(r, dtype=x.dtype)


def _norm_shape(x, ord=2.0, axis=None, keepdims=False):
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise DTypeError(f"norm: ord must be a number (or inf), got {ord!r}")
    if dtype_of(x).kind != "f":
        raise DTypeError(f"norm: expected a floating-point input, got dtype {dtype_of(x)} (as torch: cast first, "
                         f"x.float())")
    nd = len(x.shape)
    ax = norm_axis("norm", axis, nd)
    if abs(ord) == np.inf:
        for a in (range(nd) if ax is None else ax):
            if x.shape[a] == 0:
                raise ShapeError(f"norm: the {ord} norm of an empty dimension has no value (x.shape="
                                 f"{fmt_shape(x.shape)}, dimension {a})")
    if ax is None:
        shp = (1,) * nd if keepdims else ()
    elif keepdims:
        shp = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
    else:
        shp = tuple(d for i, d in enumerate(x.shape) if i not in ax)
    return Aval(shp, dtype_of(x))


def _sgn(x):
    """sign(x), 0 at NaN (as torch's sgn; np.sign gives NaN)."""
    return np.greater(x, 0).astype(x.dtype) - np.less(x, 0)


def _norm_vjp(g, ins, out, ord=2.0, axis=None, keepdims=False):
    """PyTorch's norm_backward: 0 where the norm is 0 (for ord >= 1), the
    gradient shared among the maxima for inf."""
    x = np.asarray(ins[0])
    nd = x.ndim
    if not keepdims and nd:
        ax = tuple(range(nd)) if axis is None else axis
        g = np.expand_dims(g, ax)
        out = np.expand_dims(out, ax)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ord == 0.0:
            r = np.zeros_like(x)
        elif ord == 1.0:
            r = _sgn(x) * g
        elif ord == 2.0:
            r = g * np.where(out == 0, 0, x / out)
        elif abs(ord) == np.inf:
            a = np.abs(x)
            mask = (a == out) | np.isnan(a)
            r = _sgn(x) * (g / mask.sum(axis=axis, keepdims=True)) * mask
        elif ord < 1.0:
            scaled = _sgn(x) * np.where(x == 0, 0, np.abs(x) ** (ord - 1))
            r = scaled * g * out ** (1 - ord)
        elif ord < 2.0:
            r = _sgn(x) * np.abs(x) ** (ord - 1) * np.where(out == 0, 0, g / out ** (ord - 1))
        else:
            r = x * np.abs(x) ** (ord - 2) * np.where(out == 0, 0, g / out ** (ord - 1))
    return np.broadcast_to(r, x.shape).astype(x.dtype)


def _norm_rows(x, ord=2.0, axis=None, keepdims=False):
    """A norm over axes other than 0 is row-wise."""
    nd = len(x.shape)
    if axis is None or nd < 2:
        return False
    axes = (axis,) if is_int(axis) else tuple(axis)
    return all(is_int(a) and a % nd != 0 for a in axes)


norm_p = defprim("norm", _vector_norm, _norm_shape, vjp=(_norm_vjp,), batch=batch_rows(0, when=_norm_rows))


# --------------------------------------------------------------------------
# prod (torch.prod; branch i22-torch-b)
# --------------------------------------------------------------------------

def _prod(x, axis=None, keepdims=False):
    """The product over ``axis`` (one int, or all dimensions for None), as
    ``torch.prod``: booleans and integers multiply in int64."""
    dt = np.int64 if x.dtype.kind in "biu" else None
    return np.asarray(np.prod(x, axis=axis, dtype=dt, keepdims=keepdims))


def _prod_shape(x, axis=None, keepdims=False):
    if dtype_of(x).kind not in "biuf":
        raise DTypeError(f"prod: expected a numeric input, got dtype {dtype_of(x)}")
    if axis is not None and not is_int(axis):
        raise DTypeError(f"prod: dim must be an integer or None, got {axis!r}")
    out = _reduce_shape("prod")(x, axis, keepdims)
    return Aval(out.shape, np.dtype(np.int64) if dtype_of(x).kind in "biu" else dtype_of(x))


def _prod_vjp(g, ins, out, axis=None, keepdims=False):
    x = ins[0]
    # d prod / d x_i is the product of the others: exclusive cumulative products
    # from the left and from the right give it exactly, also where x has zeros
    # (one zero: only its own entry has a non-zero gradient; two: none has), as
    # torch's prod_backward, with no division by x
    xs = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    if xs.shape[-1] == 0:
        return np.zeros(x.shape, dtype=x.dtype)       # an empty product: no entry to differentiate
    ones = np.ones(xs.shape[:-1] + (1,), dtype=x.dtype)
    left = np.cumprod(np.concatenate([ones, xs[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(xs[..., 1:], -1)], axis=-1), axis=-1), -1)
    if axis is None:
        return (np.asarray(g).reshape(()) * (left * right)).reshape(x.shape).astype(x.dtype, copy=False)
    gg = np.asarray(g) if keepdims else np.expand_dims(g, axis)
    return (np.moveaxis(left * right, -1, axis) * gg).astype(x.dtype, copy=False)


prod_p = defprim("prod", _prod, _prod_shape, vjp=(_prod_vjp,), vjp_reads=((0,),))

__all__ += ["prod_p"]
