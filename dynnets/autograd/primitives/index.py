"""Indexing: getitem and setitem (numpy's basic and advanced indexing), take
(rows by index), and PyTorch's gather along a dimension."""
from __future__ import annotations

import numpy as np

from .. import kernels as K
from .core import (BATCH_VIEW, batch_rows, Aval, DTypeError, IndexRangeError, ShapeError, defprim, dtype_of,
                   fmt_shape, is_int, is_kernel_float, norm_axis, shape_of, unbroadcast)

__all__ = ["getitem_p", "setitem_p", "take_p", "gather_p"]


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
