"""Execution: one batched call per group of same-signature nodes, by the
kind of the primitive's batching rule (rows, elementwise, reduce, xent);
the arguments are gathered, the call bound on the ordinary tape, and the
nodes' outputs assigned their rows (see :class:`.storage.Storage`)."""
from __future__ import annotations

import numpy as np

_NDARRAY = np.ndarray

from .. import primitives as P
from ..primitives.ragged import ragged_offsets
from ..tensor import Tensor
from .lazy import nrows, shape_of, trail_of
from .record import reduce_axes


def _run_rows(ab, group):
    pn0 = group[0]
    kinds = pn0.plan.kinds
    prim = pn0.plan.prim
    # not a random draw, nor a traced plan (batchable_call: its body may draw)
    if len(group) > 1 and not prim.random and kinds.count(1) == 1 and not callable(prim.batch.batched):
        if prim.batch.by_id:
            if _run_by_id(ab, group, kinds.index(1)):
                return
        elif _run_distinct(ab, group, kinds.index(1)):
            return
    bargs = []
    for i, k in enumerate(kinds):
        if k == 0:
            bargs.append(ab.shared_arg(pn0.args[i]))
        else:
            bargs.append(ab.gather_arg([pn.args[i] for pn in group], trail_of(tuple(shape_of(pn0.args[i])))))
    outs = ab.run_call(pn0, pn0.plan.prim, bargs, pn0.attrs)
    if not pn0.plan.multi:
        outs = (outs,)
    p0 = pn0.plan
    same = True
    for pn in group:
        if pn.plan is not p0:
            same = False
            break
    rows_of = []
    for k, o in enumerate(outs):
        rows_of.append(_rows_per_node(group, k, o, same))
    ab.assign_outputs(group, outs, rows_of)


def _run_by_id(ab, group, bi):
    """A lookup by ids (``BatchRule.by_id``: an embedding) run once per
    distinct id; each node's rows are its ids' rows of the result (one piece
    per row), so a later call on them can see which rows are the same word.
    False (nothing ran) when the ids are not 1-D integer arrays or all distinct."""
    if group[0].plan.multi:
        return False
    ids = []
    for pn in group:
        a = pn.args[bi]
        if type(a) is not _NDARRAY or a.ndim != 1 or a.dtype.kind not in "iu":
            return False
        ids.append(a)
    allids = np.concatenate(ids)
    uniq, inv = np.unique(allids, return_inverse=True)
    if len(uniq) == len(allids):
        return False
    pn0 = group[0]
    args = [ab.shared_arg(a) if k == 0 else uniq for a, k in zip(pn0.args, pn0.plan.kinds)]
    out = ab.run_call(pn0, pn0.plan.prim, args, pn0.attrs)
    ab.assign_row_pieces(group, out, inv, [len(a) for a in ids])
    ab.count_shared(pn0.plan.prim.name, len(allids) - len(uniq))
    return True


def _run_distinct(ab, group, bi):
    """A deterministic call whose one per-instance input is one row per node,
    run once per distinct row when several nodes read the same row of the
    same source (the leaves of one word, after :func:`_run_by_id`): the same
    numbers, as level-batched models compute a leaf once per word. False
    (nothing ran) when the rows are all distinct or not single rows."""
    pn0 = group[0]
    av = pn0.plan.out[0] if pn0.plan.multi else pn0.plan.out
    if not av.shape or av.shape[0] != 1:
        return False
    refs = ab.row_refs([pn.args[bi] for pn in group])
    if refs is None:
        return False
    srcl, rowl = refs
    key = np.array(srcl, dtype=np.int64) * (1 << 32) + np.array(rowl, dtype=np.int64)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    if len(first) == len(group):
        return False
    x = ab.gather_refs([srcl[j] for j in first.tolist()], [rowl[j] for j in first.tolist()],
                       trail_of(tuple(shape_of(pn0.args[bi]))))
    if x is None:
        return False
    args = [ab.shared_arg(a) if k == 0 else x for a, k in zip(pn0.args, pn0.plan.kinds)]
    outs = ab.run_call(pn0, pn0.plan.prim, args, pn0.attrs)
    if not pn0.plan.multi:
        outs = (outs,)
    rows = [(u, u + 1) for u in inv.tolist()]
    ab.assign_outputs(group, outs, [rows] * len(outs))
    ab.count_shared(pn0.plan.prim.name, len(group) - len(first))
    return True


def _rows_per_node(group, k, o, same):
    """None when every node has one row of output ``k``, else (start, stop)
    per node; ``same``: every node has the group's first node's plan."""
    multi = group[0].plan.multi
    one = True
    for pn in (group[:1] if same else group):
        av = pn.plan.out[k] if multi else pn.plan.out
        if av.shape and av.shape[0] != 1:
            one = False
            break
    if one:
        if o.shape[0] != len(group):
            raise AssertionError(f"autobatch: {group[0].plan.prim.name} returned {o.shape[0]} rows for {len(group)} "
                                 f"nodes")
        return None
    res = []
    pos = 0
    for pn in group:
        av = pn.plan.out[k] if multi else pn.plan.out
        r = nrows(av.shape)
        res.append((pos, pos + r))
        pos += r
    if pos != o.shape[0]:
        raise AssertionError(f"autobatch: {group[0].plan.prim.name} returned {o.shape[0]} rows for {pos}")
    return res


def _run_reduce(ab, group):
    pn0 = group[0]
    nd = len(shape_of(pn0.args[0]))
    ax = reduce_axes(pn0.attrs, nd)
    if 0 not in ax:
        _run_rows(ab, group)
        return
    trail = tuple(shape_of(pn0.args[0]))[1:]
    lens = [shape_of(pn.args[0])[0] for pn in group]
    if min(lens) == 0:
        for pn in group:
            ab.run_single(pn)
        return
    x = ab.gather_arg([pn.args[0] for pn in group], trail)
    rest = tuple(a for a in ax if a != 0)
    name = pn0.plan.prim.name
    if rest:
        x = ab.run_call(pn0, P.sum_p, (x,), dict(axis=rest, keepdims=True))
    if max(lens) > 1:
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        x = ab.run_call(pn0, P.segment_sum_p, (x, starts), {})
    if name == "mean":
        per = np.prod([trail[a - 1] for a in rest], dtype=np.int64) if rest else 1
        cnt = np.asarray(lens, dtype=np.float64) * per
        dt = pn0.plan.out.dtype
        cnt = cnt.astype(dt).reshape((-1,) + (1,) * (x.ndim - 1))
        x = ab.run_call(pn0, P.div_p, (x, cnt), {})
    elif name == "sum" and x.dtype != pn0.plan.out.dtype:
        x = ab.run_call(pn0, P.astype_p, (x,), dict(dtype=pn0.plan.out.dtype))
    ab.assign_outputs(group, (x,), [None])


def _run_xent(ab, group):
    pn0 = group[0]
    red = pn0.attrs.get("reduction", "mean")
    n = len(pn0.args)
    logits = ab.gather_arg([pn.args[0] for pn in group], trail_of(tuple(shape_of(pn0.args[0]))))
    rest = [ab.gather_arg([pn.args[i] for pn in group], ()) for i in range(1, n)]
    rest = [r._data if isinstance(r, Tensor) else r for r in rest]
    losses, probs = ab.run_call(pn0, pn0.plan.prim, (logits, *rest), dict(reduction="none"))
    lens = [shape_of(pn.args[0])[0] for pn in group]
    rows_p = None if max(lens) == 1 else _ranges(lens)
    if red == "none":
        ab.assign_outputs(group, (losses, probs), [rows_p, rows_p])
        return
    if min(lens) == 0:
        for pn in group:
            ab.run_single(pn)
        return
    x = losses
    starts = None
    if max(lens) > 1:
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        x = ab.run_call(pn0, P.segment_sum_p, (x, starts), {})
    if red == "mean":
        w = rest[1] if n > 2 else None
        empty = None
        if w is None:
            tot = np.asarray(lens, dtype=x.dtype)
        else:
            w = np.asarray(w, dtype=x.dtype)
            tot = np.add.reduceat(w, starts) if starts is not None else w
            empty = tot == 0
            tot = np.where(empty, 1, tot).astype(x.dtype)
        if w is not None or max(lens) > 1:
            x = ab.run_call(pn0, P.div_p, (x, tot), {})
        if empty is not None and empty.any():
            # an instance with every row masked: nan, as the unbatched primitive (its gradient stays 0)
            x = ab.run_call(pn0, P.add_p, (x, np.where(empty, np.nan, 0).astype(x.dtype)), {})
    ab.assign_outputs(group, (x, probs), [None, rows_p])


def _ranges(lens):
    res = []
    pos = 0
    for r in lens:
        res.append((pos, pos + r))
        pos += r
    return res


def _run_ragged(ab, group):
    """Packed variable-length rows (``BatchRule`` kind ``"ragged"``): every
    instance's rows stacked, its offsets shifted by the rows before it and
    joined, one call; each node's outputs are its rows, as :func:`_run_rows`."""
    pn0 = group[0]
    prim = pn0.plan.prim
    oi = prim.batch.offsets
    ri = prim.batch.batched[0]
    kinds = pn0.plan.kinds
    parts = []
    base = 0
    for j, pn in enumerate(group):
        n = shape_of(pn.args[ri])[0]
        # each instance's offsets checked against its own rows (an error names them, not the joined array)
        o = ragged_offsets(prim.name, pn.args[oi], n)
        parts.append(o + base if j == 0 else o[1:] + base)
        base += n
    bargs = []
    for i, k in enumerate(kinds):
        if i == oi:
            bargs.append(parts[0] if len(parts) == 1 else np.concatenate(parts))
        elif k == 0:
            bargs.append(ab.shared_arg(pn0.args[i]))
        else:
            bargs.append(ab.gather_arg([pn.args[i] for pn in group], trail_of(tuple(shape_of(pn0.args[i])))))
    outs = ab.run_call(pn0, prim, bargs, pn0.attrs)
    if not pn0.plan.multi:
        outs = (outs,)
    same = all(pn.plan is pn0.plan for pn in group)
    ab.assign_outputs(group, outs, [_rows_per_node(group, k, o, same) for k, o in enumerate(outs)])


RUN = {"rows": _run_rows, "elementwise": _run_rows, "reduce": _run_reduce, "xent": _run_xent,
       "view": _run_rows, "ragged": _run_ragged}
