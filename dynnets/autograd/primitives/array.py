"""Joining and splitting arrays: concat, stack, split_rows and PyTorch's split
(by sizes); and the row gathers and segment sums that connect the batched calls
of automatic batching on the tape (segment_sum, gather_rows, arena_gather).

Reductions live in :mod:`.reduce`, shapes and pad in :mod:`.shape`, indexing
and gathers along a dimension in :mod:`.index` (split from this module in
issue 24)."""
from __future__ import annotations

import numpy as np

from ..gradtypes import RowSparse, join_rows
from .core import (BATCH_VIEW, batch_rows, Aval, DTypeError, IndexRangeError, PromotionNeeded, ShapeError, defprim,
                   dims_match, dtype_of, fits, fmt_shape, is_int, norm_axis, torch_promote)

__all__ = ["concat_p", "stack_p", "split_rows_p", "split_p", "segment_sum_p", "gather_rows_p", "arena_gather_p"]


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
