"""Tree primitives. Level-batched: each ``*_levels`` primitive runs a whole
minibatch schedule (:class:`dynnets.data.batching.TreeBatch`): one fused
kernel call and one matrix product per level, children read from the state
rows of earlier levels; its VJP walks the levels in reverse and forms each
weight gradient with one matrix product over all nodes. Per node: the
Tree-LSTM node and leaf on packed states ``[h | c]`` for recursive execution.
Kernels: :mod:`..kernels_tree` (numpy twins in :mod:`..reference_tree`)."""
from __future__ import annotations

import numpy as np

from .. import kernels as K
from .. import kernels_tree as KT
from ..gradtypes import OuterSum, factored_matmul_t
from .array import concat_p
from .index import getitem_p
from .core import (LevelsRule, col_sums, batch_rows, F32, F64, Aval, IndexRangeError, ShapeError, as_float, check_index, check_param, defprim, dims_match,
                   fits, fixed_transpose, fmt_shape, grad_buffer, grad_or_zeros, kernel_args, kernel_floats,
                   mul_dim, transposed_float)

__all__ = ["tree_lstm_levels_p", "tree_lstm_levels_packed_p", "tree_rnn_levels_p", "childsum_levels_p", "tree_lstm_node_p", "tree_lstm_leaf_node_p"]

def _level_bounds(op, offsets, n_leaves, n_nodes):
    """Validate level offsets; return them as a list of Python ints."""
    off = np.asarray(offsets)
    if off.ndim != 1 or len(off) < 2:
        raise ShapeError(f"{op}: offsets must be 1-D with at least 2 entries (0, n_leaves, ...), "
                         f"got shape {off.shape}")
    o = off.tolist()
    if o[0] != 0 or o[1] != n_leaves or o[-1] != n_nodes or any(b < a for a, b in zip(o, o[1:])):
        raise ShapeError(f"{op}: offsets must rise from 0 through n_leaves={n_leaves} (offsets[1]) to "
                         f"n_nodes={n_nodes} (offsets[-1]); got {o[:4]}{'...' if len(o) > 4 else ''} "
                         f"ending in {o[-1]}")
    return o


def _check_children(op, name, children, offsets, n_leaves, parent_of=None):
    """Every child index must be a node of an earlier level than its parent."""
    if children.size == 0:
        return
    off = np.asarray(offsets)
    # level start of each internal node (rows of left/right, or of edges via parent_of)
    starts = np.repeat(off[1:-1], np.diff(off[1:]))
    if parent_of is not None:
        starts = starts[parent_of]
    bad = (children < 0) | (children >= starts)
    if bad.any():
        k = int(np.argmax(bad))
        raise IndexRangeError(f"{op}: {name}[{k}]={int(children[k])} is not a node of an earlier level than "
                              f"its parent (whose level starts at node {int(starts[k])})")


def _pairs_ok(left, right, off):
    """Whether every child of a binary level schedule (rows ordered by level,
    ``off`` from :func:`_level_bounds`) is a node of an earlier level: the
    larger child of each row, its largest per level (one ``reduceat``), against
    the level's start: seven numpy calls for both arrays where the per-row
    bounds took ten per array (a binary schedule's checks, offsets included:
    10 vs 17 us for a minibatch of 25 SST trees, measured);
    :func:`_check_children` names a bad entry."""
    n0 = off[1]
    starts, first = [], []
    for k in range(1, len(off) - 1):
        if off[k + 1] > off[k]:
            starts.append(off[k])
            first.append(off[k] - n0)
    hi = np.maximum(left, right)
    return (int(np.minimum(left, right).min()) >= 0
            and bool((np.maximum.reduceat(hi, first) < np.array(starts, dtype=np.int64)).all()))


def _leaf_rows(op, rows, n_states):
    """Leaf rows as C-contiguous int64 after checking each indexes one of the
    ``n_states`` leaf states (the gathers read them unchecked)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.size:
        lo, hi = int(rows.min()), int(rows.max())
        if lo < 0 or hi >= n_states:
            k = int(np.argmax((rows < 0) | (rows >= n_states)))
            raise IndexRangeError(f"{op}: rows[{k}]={int(rows[k])} is out of range for s0.shape[0]={n_states}")
    return rows



def _check_state(op, h0, c0=None):
    if len(h0.shape) != 2:
        raise ShapeError(f"{op}: h0 must be 2-D (n_leaves, hidden), got h0.shape={fmt_shape(h0.shape)}")
    if c0 is not None and not fits(tuple(c0.shape), tuple(h0.shape)):
        raise ShapeError(f"{op}: c0.shape={fmt_shape(c0.shape)} does not match h0.shape={fmt_shape(h0.shape)}")
    return h0.shape[1]



def _sum_dims(a, b):
    return None if a is None or b is None else a + b




def _tree_lstm_levels(h0, c0, w, b, left, right, offsets):
    """Binary Tree-LSTM (Tai et al. 2015, eqs. 9-14) over a whole level
    schedule: level 0 (the leaves) is given as ``h0, c0``; each later level
    computes ``z = [h_l; h_r] @ w + b`` for all its nodes in one product and
    one fused kernel call.

    Parameters
    ----------
    h0, c0 : (n_leaves, H)
    w : (2H, 5H), chunks i, f_l, f_r, o, u;  b : (5H,)
    left, right : (n_internal,) int
        Global indices of the children of node ``n_leaves + j``.
    offsets : (n_levels + 1,) int
        Level ``k`` is nodes ``offsets[k]:offsets[k+1]``; ``offsets[1] == n_leaves``.

    Returns
    -------
    h, c : (n_nodes, H)
        States of every node, in the schedule's order.
    hcat : (n_internal, 2H), acts : (n_internal, 5H)
        Saved for the backward pass.
    """
    n0, H = h0.shape
    off, left, right = _binary_schedule("tree_lstm_levels", n0, left, right, offsets)
    dt = np.result_type(h0, c0, w, b)
    h = np.empty((off[-1], H), dtype=dt)
    c = np.empty((off[-1], H), dtype=dt)
    h[:n0] = h0
    c[:n0] = c0
    return _lstm_levels_run(h, c, as_float(w, dt), as_float(b, dt), left, right, off)


def _binary_schedule(op, n0, left, right, offsets):
    """Validated (offsets as ints, left, right) of a binary level schedule,
    the children as C-contiguous int64 (the kernels read them unchecked)."""
    off = _level_bounds(op, offsets, n0, n0 + left.shape[0])
    left = np.ascontiguousarray(left, dtype=np.int64)
    right = np.ascontiguousarray(right, dtype=np.int64)
    if right.shape != left.shape:
        raise ShapeError(f"{op}: left.shape={fmt_shape(left.shape)} does not match right.shape={fmt_shape(right.shape)}")
    if left.size and not _pairs_ok(left, right, off):
        _check_children(op, "left", left, off, n0)
        _check_children(op, "right", right, off, n0)
    return off, left, right


def _lstm_levels_run(h, c, w, b, left, right, off):
    """The levels >= 1 of a binary Tree-LSTM on state buffers whose leaf rows
    are filled; returns ``(h, c, hcat, acts)``."""
    n0 = off[1]
    H = h.shape[1]
    ni = left.shape[0]
    dt = h.dtype
    hcat = np.empty((ni, 2 * H), dtype=dt)
    acts = np.empty((ni, 5 * H), dtype=dt)
    # one product buffer for every level (the kernel only reads it)
    widest = max([hi - lo for lo, hi in zip(off[1:-1], off[2:])], default=0)
    zbuf = np.empty((widest, 5 * H), dtype=dt)
    for k in range(1, len(off) - 1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        lk, rk = left[r0:r1], right[r0:r1]
        KT.gather_pairs(h, lk, rk, hcat[r0:r1])
        KT.tree_lstm_levels_fwd(np.matmul(hcat[r0:r1], w, out=zbuf[:r1 - r0]), b, c, lk, rk, lo, h, acts[r0:r1])
    return h, c, hcat, acts


def _lstm_levels_back(g, w, out, left, right, off):
    """The adjoint sweep of :func:`_lstm_levels_run`: ``(dh, dc, dz)``, the
    state gradients of every node (the leaves' included) and the gate
    pre-activations' gradients."""
    h, c, hcat, acts = out
    n0 = off[1]
    dh = grad_buffer(g[0], h)
    dc = grad_buffer(g[1], c)
    dz = np.empty_like(acts)
    wt = transposed_float(w, h.dtype)
    widest = max([hi - lo for lo, hi in zip(off[1:-1], off[2:])], default=0)
    dbuf = np.empty((widest, hcat.shape[1]), dtype=h.dtype)
    for k in range(len(off) - 2, 0, -1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        lk, rk = left[r0:r1], right[r0:r1]
        KT.tree_lstm_levels_bwd(dh, dc, acts[r0:r1], c, lk, rk, lo, dz[r0:r1])
        KT.scatter_pairs_add(np.matmul(dz[r0:r1], wt, out=dbuf[:r1 - r0]), lk, rk, dh)
    return dh, dc, dz


def _tree_lstm_levels_shape(h0, c0, w, b, left, right, offsets):
    op = "tree_lstm_levels"
    dt = kernel_floats(op, h0=h0, c0=c0, w=w, b=b)
    H = _check_state(op, h0, c0)
    check_param(op, "w", w, (mul_dim(2, H), mul_dim(5, H)))
    check_param(op, "b", b, (mul_dim(5, H),))
    for nm, a in (("left", left), ("right", right), ("offsets", offsets)):
        check_index(op, nm, a)
    if None not in (left.shape[0], right.shape[0]) and left.shape[0] != right.shape[0]:
        raise ShapeError(f"{op}: left.shape={fmt_shape(left.shape)} does not match right.shape={fmt_shape(right.shape)}")
    n, ni = _sum_dims(h0.shape[0], left.shape[0]), left.shape[0]
    return Aval((n, H), dt), Aval((n, H), dt), Aval((ni, mul_dim(2, H)), dt), Aval((ni, mul_dim(5, H)), dt)



def _tree_lstm_levels_vjp(g, ins, out):
    h0, c0, w, b, left, right, offsets = ins
    n0 = h0.shape[0]
    # the forward's checks again: the kernels index with these unchecked
    off, left, right = _binary_schedule("tree_lstm_levels", n0, left, right, offsets)
    dh, dc, dz = _lstm_levels_back(g, w, out, left, right, off)
    hcat = out[2]
    return (dh[:n0].astype(np.asarray(h0).dtype, copy=False), dc[:n0].astype(np.asarray(c0).dtype, copy=False),
            (hcat.T @ dz).astype(np.asarray(w).dtype, copy=False), col_sums(dz).astype(np.asarray(b).dtype, copy=False),
            None, None, None)


tree_lstm_levels_p = defprim("tree_lstm_levels", _tree_lstm_levels, _tree_lstm_levels_shape,
                             joint_vjp=_tree_lstm_levels_vjp, multiple_results=True, nondiff_args=(4, 5, 6))


def _tree_lstm_levels_packed(s0, rows, w, b, left, right, offsets):
    """:func:`_tree_lstm_levels` with the leaves' states gathered inside:
    leaf ``j`` starts from the packed state ``s0[rows[j]] = [h | c]``.

    A level-batched model computes each distinct word's leaf once (``s0``,
    from ``tree_lstm_leaf_node``) and reads it for every leaf with that word
    (``rows``); gathering here writes the leaf rows of the state buffers
    directly, and the VJP sums the leaves' state gradients per row of ``s0``
    in one scatter, where a gather, two column slices and the levels'
    copies of them cost four (n_leaves, 2H) arrays forward and backward
    (5 us per sentence on SST minibatches of 25, measured).

    Parameters
    ----------
    s0 : (n_states, 2H)
        Packed leaf states ``[h | c]``.
    rows : (n_leaves,) int
        The row of ``s0`` each leaf starts from, each in ``[0, n_states)``.
    w, b, left, right, offsets : as :func:`_tree_lstm_levels` (``offsets[1] == n_leaves``)

    Returns
    -------
    h, c, hcat, acts : as :func:`_tree_lstm_levels`
    """
    op = "tree_lstm_levels_packed"
    n0 = rows.shape[0]
    H = s0.shape[1] // 2
    off, left, right = _binary_schedule(op, n0, left, right, offsets)
    rows = _leaf_rows(op, rows, s0.shape[0])
    dt = np.result_type(s0, w, b)
    h = np.empty((off[-1], H), dtype=dt)
    c = np.empty((off[-1], H), dtype=dt)
    # rows are checked: "clip" only spares numpy's buffered "raise" mode
    np.take(s0[:, :H], rows, axis=0, out=h[:n0], mode="clip")
    np.take(s0[:, H:], rows, axis=0, out=c[:n0], mode="clip")
    return _lstm_levels_run(h, c, as_float(w, dt), as_float(b, dt), left, right, off)


def _tree_lstm_levels_packed_shape(s0, rows, w, b, left, right, offsets):
    op = "tree_lstm_levels_packed"
    dt = kernel_floats(op, s0=s0, w=w, b=b)
    if len(s0.shape) != 2 or (s0.shape[1] is not None and s0.shape[1] % 2):
        raise ShapeError(f"{op}: s0 must be 2-D (states, 2*hidden) holding [h | c], got s0.shape={fmt_shape(s0.shape)}")
    H = None if s0.shape[1] is None else s0.shape[1] // 2
    check_param(op, "w", w, (mul_dim(2, H), mul_dim(5, H)))
    check_param(op, "b", b, (mul_dim(5, H),))
    for nm, a in (("rows", rows), ("left", left), ("right", right), ("offsets", offsets)):
        check_index(op, nm, a)
    if None not in (left.shape[0], right.shape[0]) and left.shape[0] != right.shape[0]:
        raise ShapeError(f"{op}: left.shape={fmt_shape(left.shape)} does not match right.shape={fmt_shape(right.shape)}")
    n, ni = _sum_dims(rows.shape[0], left.shape[0]), left.shape[0]
    return Aval((n, H), dt), Aval((n, H), dt), Aval((ni, mul_dim(2, H)), dt), Aval((ni, mul_dim(5, H)), dt)


def _tree_lstm_levels_packed_vjp(g, ins, out):
    s0, rows, w, b, left, right, offsets = ins
    op = "tree_lstm_levels_packed"
    n0 = rows.shape[0]
    # the forward's checks again: the kernels index with these unchecked
    off, left, right = _binary_schedule(op, n0, left, right, offsets)
    rows = _leaf_rows(op, rows, s0.shape[0])
    dh, dc, dz = _lstm_levels_back(g, w, out, left, right, off)
    H = dh.shape[1]
    ds = np.empty((n0, 2 * H), dtype=dh.dtype)
    ds[:, :H] = dh[:n0]
    ds[:, H:] = dc[:n0]
    hcat = out[2]
    return (K.embedding_bwd(rows, ds, s0.shape[0]).astype(np.asarray(s0).dtype, copy=False), None,
            (hcat.T @ dz).astype(np.asarray(w).dtype, copy=False), col_sums(dz).astype(np.asarray(b).dtype, copy=False),
            None, None, None)


tree_lstm_levels_packed_p = defprim("tree_lstm_levels_packed", _tree_lstm_levels_packed,
                                    _tree_lstm_levels_packed_shape, joint_vjp=_tree_lstm_levels_packed_vjp,
                                    multiple_results=True, nondiff_args=(1, 4, 5, 6))


def _tree_rnn_levels(h0, w, b, left, right, offsets):
    """Recursive neural network (Socher et al. 2011) over a level schedule:
    ``h = tanh([h_l; h_r] @ w + b)`` for all nodes of a level in one product
    and one kernel call.

    Parameters
    ----------
    h0 : (n_leaves, H)
    w : (2H, H);  b : (H,)
    left, right, offsets : as in :func:`_tree_lstm_levels`

    Returns
    -------
    h : (n_nodes, H)
    hcat : (n_internal, 2H)
        Saved for the backward pass.
    """
    n0, H = h0.shape
    ni = left.shape[0]
    N = n0 + ni
    off, left, right = _binary_schedule("tree_rnn_levels", n0, left, right, offsets)
    dt = np.result_type(h0, w, b)
    h = np.empty((N, H), dtype=dt)
    h[:n0] = h0
    hcat = np.empty((ni, 2 * H), dtype=dt)
    w = as_float(w, dt)
    b = as_float(b, dt)
    for k in range(1, len(off) - 1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        KT.gather_pairs(h, left[r0:r1], right[r0:r1], hcat[r0:r1])
        KT.tanh_rows_fwd(hcat[r0:r1] @ w, b, lo, h)
    return h, hcat


def _tree_rnn_levels_shape(h0, w, b, left, right, offsets):
    op = "tree_rnn_levels"
    dt = kernel_floats(op, h0=h0, w=w, b=b)
    H = _check_state(op, h0)
    check_param(op, "w", w, (mul_dim(2, H), H))
    check_param(op, "b", b, (H,))
    for nm, a in (("left", left), ("right", right), ("offsets", offsets)):
        check_index(op, nm, a)
    if None not in (left.shape[0], right.shape[0]) and left.shape[0] != right.shape[0]:
        raise ShapeError(f"{op}: left.shape={fmt_shape(left.shape)} does not match right.shape={fmt_shape(right.shape)}")
    return Aval((_sum_dims(h0.shape[0], left.shape[0]), H), dt), Aval((left.shape[0], mul_dim(2, H)), dt)


def _tree_rnn_levels_vjp(g, ins, out):
    h0, w, b, left, right, offsets = ins
    h, hcat = out
    n0 = h0.shape[0]
    off, left, right = _binary_schedule("tree_rnn_levels", n0, left, right, offsets)
    dh = grad_buffer(g[0], h)
    dz = np.empty((hcat.shape[0], h.shape[1]), dtype=h.dtype)
    wt = transposed_float(w, h.dtype)
    for k in range(len(off) - 2, 0, -1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        KT.tanh_rows_bwd(dh, h, lo, dz[r0:r1])
        KT.scatter_pairs_add(dz[r0:r1] @ wt, left[r0:r1], right[r0:r1], dh)
    return (dh[:n0].astype(np.asarray(h0).dtype, copy=False), (hcat.T @ dz).astype(np.asarray(w).dtype, copy=False),
            col_sums(dz).astype(np.asarray(b).dtype, copy=False), None, None, None)


tree_rnn_levels_p = defprim("tree_rnn_levels", _tree_rnn_levels, _tree_rnn_levels_shape,
                            joint_vjp=_tree_rnn_levels_vjp, multiple_results=True, nondiff_args=(3, 4, 5))


def _childsum_levels(h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets):
    """Child-sum Tree-LSTM (Tai et al. 2015, eqs. 2-8; no input at internal
    nodes) over a level schedule with any number of children per node.

    Per level: h̃ = Σ_k h_k; [i, o, u] from ``h̃ @ u_iou + b_iou``; one forget
    gate per child from ``h_k @ u_f + b_f``; c = i*u + Σ_k f_k*c_k; h = o*tanh(c).

    Parameters
    ----------
    h0, c0 : (n_leaves, H)
    u_iou : (H, 3H);  u_f : (H, H);  b_iou : (3H,);  b_f : (H,)
    child_ptr : (n_internal + 1,) int
        CSR: the children of node ``n_leaves + j`` are
        ``child_idx[child_ptr[j]:child_ptr[j+1]]`` (a level's edges are contiguous).
    child_idx : (n_edges,) int
    offsets : (n_levels + 1,) int

    Returns
    -------
    h, c : (n_nodes, H)
    hsum : (n_internal, H), hch : (n_edges, H), acts : (n_internal, 3H), facts : (n_edges, H)
        Saved for the backward pass.
    """
    n0, H = h0.shape
    off, ptr, idx = _csr_schedule(h0, child_ptr, child_idx, offsets)
    ni = ptr.shape[0] - 1
    N = n0 + ni
    E = idx.shape[0]
    dt = np.result_type(h0, c0, u_iou, u_f, b_iou, b_f)
    h = np.empty((N, H), dtype=dt)
    c = np.empty((N, H), dtype=dt)
    h[:n0] = h0
    c[:n0] = c0
    hsum = np.empty((ni, H), dtype=dt)
    hch = np.empty((E, H), dtype=dt)
    acts = np.empty((ni, 3 * H), dtype=dt)
    facts = np.empty((E, H), dtype=dt)
    u_iou, u_f, b_iou, b_f = as_float(u_iou, dt), as_float(u_f, dt), as_float(b_iou, dt), as_float(b_f, dt)
    for k in range(1, len(off) - 1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        p = ptr[r0:r1 + 1]
        e0, e1 = int(p[0]), int(p[-1])
        ix = idx[e0:e1]
        KT.childsum_gather(h, p, ix, hsum[r0:r1], hch[e0:e1])
        KT.childsum_levels_fwd(hsum[r0:r1] @ u_iou, hch[e0:e1] @ u_f, b_iou, b_f, c, p, ix, lo, h,
                              acts[r0:r1], facts[e0:e1])
    return h, c, hsum, hch, acts, facts


def _csr_schedule(h0, child_ptr, child_idx, offsets):
    """Validated (offsets, child_ptr, child_idx) of a child-sum schedule, the
    index arrays as C-contiguous int64 (the kernels read them unchecked)."""
    op = "childsum_levels"
    n0 = h0.shape[0]
    if child_ptr.shape[0] < 1:
        raise ShapeError(f"{op}: child_ptr must have n_internal + 1 >= 1 entries, got child_ptr.shape="
                         f"{fmt_shape(child_ptr.shape)}")
    ptr = np.ascontiguousarray(child_ptr, dtype=np.int64)
    idx = np.ascontiguousarray(child_idx, dtype=np.int64)
    ni = ptr.shape[0] - 1
    off = _level_bounds(op, offsets, n0, n0 + ni)
    E = idx.shape[0]
    if ptr[0] != 0 or ptr[-1] != E or np.any(np.diff(ptr) < 1):
        raise ShapeError(f"{op}: child_ptr must rise from 0 to len(child_idx)={E} with at least one "
                         f"child per internal node; got child_ptr[0]={int(ptr[0])}, child_ptr[-1]={int(ptr[-1])}")
    _check_children(op, "child_idx", idx, off, n0, parent_of=np.repeat(np.arange(ni), np.diff(ptr)))
    return off, ptr, idx


def _childsum_levels_shape(h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets):
    op = "childsum_levels"
    dt = kernel_floats(op, h0=h0, c0=c0, u_iou=u_iou, u_f=u_f, b_iou=b_iou, b_f=b_f)
    H = _check_state(op, h0, c0)
    check_param(op, "u_iou", u_iou, (H, mul_dim(3, H)))
    check_param(op, "u_f", u_f, (H, H))
    check_param(op, "b_iou", b_iou, (mul_dim(3, H),))
    check_param(op, "b_f", b_f, (H,))
    for nm, a in (("child_ptr", child_ptr), ("child_idx", child_idx), ("offsets", offsets)):
        check_index(op, nm, a)
    if child_ptr.shape[0] == 0:
        raise ShapeError(f"{op}: child_ptr must have n_internal + 1 >= 1 entries, got child_ptr.shape=(0,)")
    ni = None if child_ptr.shape[0] is None else child_ptr.shape[0] - 1
    n = _sum_dims(h0.shape[0], ni)
    E = child_idx.shape[0]
    return (Aval((n, H), dt), Aval((n, H), dt), Aval((ni, H), dt), Aval((E, H), dt), Aval((ni, mul_dim(3, H)), dt),
            Aval((E, H), dt))


def _childsum_levels_vjp(g, ins, out):
    h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets = ins
    h, c, hsum, hch, acts, facts = out
    n0 = h0.shape[0]
    off, ptr, idx = _csr_schedule(h0, child_ptr, child_idx, offsets)
    dh = grad_buffer(g[0], h)
    dc = grad_buffer(g[1], c)
    dziou = np.empty_like(acts)
    dzf = np.empty_like(facts)
    ut_iou = transposed_float(u_iou, h.dtype)
    ut_f = transposed_float(u_f, h.dtype)
    for k in range(len(off) - 2, 0, -1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        p = ptr[r0:r1 + 1]
        e0, e1 = int(p[0]), int(p[-1])
        ix = idx[e0:e1]
        KT.childsum_levels_bwd(dh, dc, acts[r0:r1], facts[e0:e1], c, p, ix, lo, dziou[r0:r1], dzf[e0:e1])
        KT.childsum_scatter_add(dziou[r0:r1] @ ut_iou, dzf[e0:e1] @ ut_f, p, ix, dh)

    def cast(a, like):
        return a.astype(np.asarray(like).dtype, copy=False)
    return (cast(dh[:n0], h0), cast(dc[:n0], c0), cast(hsum.T @ dziou, u_iou), cast(hch.T @ dzf, u_f),
            cast(col_sums(dziou), b_iou), cast(col_sums(dzf), b_f), None, None, None)


childsum_levels_p = defprim("childsum_levels", _childsum_levels, _childsum_levels_shape,
                            joint_vjp=_childsum_levels_vjp, multiple_results=True, nondiff_args=(6, 7, 8))



# Per-node Tree-LSTM primitives use the kernels with the product inside for
# up to this many rows; beyond it a BLAS matrix product reads the weights once
# for all rows (the loop reads them once per row).
_MV_ROWS = 2



def _tree_lstm_node(s_l, s_r, w, b):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14) on packed states
    ``s = [h | c]``, for per-node (recursive) execution: the maths of
    :func:`_tree_lstm_levels` and ``tree_lstm_cell`` with one state tensor per
    node. Its VJP returns the weight gradient as :class:`OuterSum` factors,
    formed once per backward instead of once per node.

    Parameters
    ----------
    s_l, s_r : (n, 2H)
    w : (2H, 5H), chunks i, f_l, f_r, o, u;  b : (5H,)

    Returns
    -------
    s : (n, 2H)
    acts : (n, 5H), hcat : (n, 2H)
        Saved gate activations and children's hidden states.
    """
    n, H2 = s_l.shape
    H = H2 // 2
    dt = w.dtype
    # same_float inline: this runs once per tree node
    if ((dt == F32 or dt == F64) and s_l.dtype == dt and s_r.dtype == dt and b.dtype == dt
            and s_l.flags.c_contiguous and s_r.flags.c_contiguous and w.flags.c_contiguous and b.flags.c_contiguous):
        if n <= _MV_ROWS:
            # one node (recursive execution): the fused kernel with the
            # matrix-vector product inside (12.6 -> 10.5 us per node, measured)
            s = np.empty((n, H2), dtype=dt)
            acts = np.empty((n, 5 * H), dtype=dt)
            hcat = np.empty((n, H2), dtype=dt)
            KT.tree_lstm_node_fwd_mv(s_l, s_r, w, b, s, acts, hcat)
            return s, acts, hcat
    else:
        s_l, s_r, w, b = kernel_args(s_l, s_r, w, b)
    hcat = np.concatenate((s_l[:, :H], s_r[:, :H]), axis=1)
    z = hcat @ w
    s = np.empty((n, H2), dtype=z.dtype)
    acts = np.empty((n, 5 * H), dtype=z.dtype)
    KT.tree_lstm_node_fwd(z, b, s_l, s_r, s, acts)
    return s, acts, hcat


def _tree_lstm_node_shape(s_l, s_r, w, b):
    op = "tree_lstm_node"
    dt = kernel_floats(op, s_l=s_l, s_r=s_r, w=w, b=b)
    if len(s_l.shape) != 2 or (s_l.shape[1] is not None and s_l.shape[1] % 2):
        raise ShapeError(f"{op}: s_l must be 2-D (nodes, 2*hidden) holding [h | c], got s_l.shape={fmt_shape(s_l.shape)}")
    if not fits(tuple(s_r.shape), tuple(s_l.shape)):
        raise ShapeError(f"{op}: s_r.shape={fmt_shape(s_r.shape)} does not match s_l.shape={fmt_shape(s_l.shape)}")
    H = None if s_l.shape[1] is None else s_l.shape[1] // 2
    check_param(op, "w", w, (mul_dim(2, H), mul_dim(5, H)))
    check_param(op, "b", b, (mul_dim(5, H),))
    n = s_l.shape[0] if s_l.shape[0] is not None else s_r.shape[0]
    return Aval((n, mul_dim(2, H)), dt), Aval((n, mul_dim(5, H)), dt), Aval((n, mul_dim(2, H)), dt)


def _tree_lstm_node_vjp(g, ins, out):
    s_l, s_r, w, b = ins
    s, acts, hcat = out
    n, H2 = s.shape
    H = H2 // 2
    dt = s.dtype
    dz = np.empty_like(acts)
    ds_l = np.empty((n, H2), dtype=dt)
    ds_r = np.empty((n, H2), dtype=dt)
    KT.tree_lstm_node_bwd(grad_or_zeros(g[0], s), acts, as_float(s_l, dt), as_float(s_r, dt), s, dz, ds_l, ds_r)
    # a loop gradient's captured weight transposed once (fixed_arrays); one or two rows (a node run
    # recursively) multiply the view as fast, without the lookup
    wt = fixed_transpose(w, dt) if n > _MV_ROWS else None
    dhcat = dz @ w.T if wt is None else dz @ wt
    ds_l[:, :H] = dhcat[:, :H]
    ds_r[:, :H] = dhcat[:, H:]
    return ds_l, ds_r, OuterSum((hcat,), (dz,), w.shape), OuterSum((None,), (dz,), b.shape)


def _tree_lstm_node_levels(bind, s0, rows, shared, left, right, offsets):
    """The levels lowering of ``tree_lstm_node`` (see :class:`.core.LevelsRule`):
    a chain of node groups as one ``tree_lstm_levels_packed`` call, whose
    weight gradient is one product over every node; the packed states
    ``[h | c]`` the nodes output are its ``h`` and ``c`` side by side.

    Returns ``((s, acts, hcat), first)``: ``s`` (n, 2H), ``acts`` (n, 5H)
    and ``hcat`` (n, 2H) as :func:`_tree_lstm_node`'s (the same chunk
    order), the chain's nodes from row 0."""
    w, b = shared
    h, c, hcat, acts = bind(tree_lstm_levels_packed_p, s0, rows, w, b, left, right, offsets)
    # the nodes' rows only: outputs the size of the nodes' own fit the arena
    # the force planned for them (so later reads stay one take)
    n0 = int(offsets[1])
    s = bind(concat_p, bind(getitem_p, h, index=slice(n0, None)), bind(getitem_p, c, index=slice(n0, None)), axis=1)
    return (s, acts, hcat), (0, 0, 0)


tree_lstm_node_p = defprim("tree_lstm_node", _tree_lstm_node, _tree_lstm_node_shape,
                           joint_vjp=_tree_lstm_node_vjp, multiple_results=True,
    batch=batch_rows(0, 1), levels=LevelsRule((0, 1), (2, 3), _tree_lstm_node_levels))


def _tree_lstm_leaf_node(x, w, b):
    """Tree-LSTM leaf(s) from input rows ``x`` on packed states ``[h | c]``
    (``tree_lstm_leaf`` maths; the weight gradient as :class:`OuterSum`).

    Parameters
    ----------
    x : (n, E)
    w : (E, 3H), chunks i, o, u;  b : (3H,)

    Returns
    -------
    s : (n, 2H)
    acts : (n, 3H)
    """
    n, G = x.shape[0], w.shape[1]
    dt = w.dtype
    # same_float inline: this runs once per leaf
    if ((dt == F32 or dt == F64) and x.dtype == dt and b.dtype == dt and x.flags.c_contiguous
            and w.flags.c_contiguous and b.flags.c_contiguous):
        if n <= _MV_ROWS:
            s = np.empty((n, 2 * (G // 3)), dtype=dt)
            acts = np.empty((n, G), dtype=dt)
            KT.tree_lstm_leaf_node_fwd_mv(x, w, b, s, acts)
            return s, acts
    else:
        x, w, b = kernel_args(x, w, b)
    z = x @ w
    s = np.empty((n, 2 * (G // 3)), dtype=z.dtype)
    acts = np.empty((n, G), dtype=z.dtype)
    KT.tree_lstm_leaf_node_fwd(z, b, s, acts)
    return s, acts


def leaf_shape(op, x, w, b):
    """Shapes of a Tree-LSTM leaf's inputs x (n, E), w (E, 3H), b (3H,); returns (n, H)."""
    if len(x.shape) != 2:
        raise ShapeError(f"{op}: x must be 2-D (nodes, input_size), got x.shape={fmt_shape(x.shape)}")
    if len(w.shape) != 2 or not dims_match(w.shape[0], x.shape[1]) or (w.shape[1] is not None and w.shape[1] % 3):
        raise ShapeError(f"{op}: w.shape={fmt_shape(w.shape)} should be ({x.shape[1]}, 3*hidden)")
    H = None if w.shape[1] is None else w.shape[1] // 3
    if not fits(tuple(b.shape), (mul_dim(3, H),)):
        raise ShapeError(f"{op}: b.shape={fmt_shape(b.shape)} should be {fmt_shape((mul_dim(3, H),))}")
    return x.shape[0], H


def _tree_lstm_leaf_node_shape(x, w, b):
    op = "tree_lstm_leaf_node"
    dt = kernel_floats(op, x=x, w=w, b=b)
    n, H = leaf_shape(op, x, w, b)
    return Aval((n, mul_dim(2, H)), dt), Aval((n, mul_dim(3, H)), dt)


def _tree_lstm_leaf_node_vjp(g, ins, out):
    x, w, b = ins
    s, acts = out
    dz = np.empty_like(acts)
    KT.tree_lstm_leaf_node_bwd(grad_or_zeros(g[0], s), acts, s, dz)
    # one leaf (per-node execution): its input gradient stays a product for
    # split_rows' VJP to form with the other leaves' in one matrix product
    dx = factored_matmul_t(dz, w)
    return dx, OuterSum((x,), (dz,), w.shape), OuterSum((None,), (dz,), b.shape)


tree_lstm_leaf_node_p = defprim("tree_lstm_leaf_node", _tree_lstm_leaf_node, _tree_lstm_leaf_node_shape,
                                joint_vjp=_tree_lstm_leaf_node_vjp, multiple_results=True,
    batch=batch_rows(0))
