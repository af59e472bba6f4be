"""Packed variable-length sequences (the layout of PyTorch's
``pack_padded_sequence``): LSTM, GRU and Elman RNN over all time steps of a
minibatch, one fused kernel call per step."""
from __future__ import annotations

import itertools
import operator

import numpy as np

from .. import kernels_tree as KT
from .core import (col_sums, Aval, ShapeError, as_float, check_index, check_param, defprim, dims_match, fmt_shape,
                   grad_buffer, kernel_floats, mul_dim, transposed_float)

__all__ = ["lstm_seq_p", "gru_seq_p", "rnn_seq_p"]

def _seq_steps(op, batch_sizes, total):
    """Validate packed batch sizes; return (sizes, offsets) as lists of ints."""
    bs = np.asarray(batch_sizes)
    if bs.ndim != 1 or bs.dtype.kind not in "iu":
        raise ShapeError(f"{op}: batch_sizes must be a 1-D integer array, got shape {bs.shape} and dtype {bs.dtype}")
    sizes = bs.tolist()
    # C-level loops (min, map, accumulate): the generator expressions cost
    # ~8 us per call on SST minibatches, forward and VJP (measured)
    if sizes and (min(sizes) < 1 or any(map(operator.lt, sizes, sizes[1:]))):
        raise ShapeError(f"{op}: batch_sizes must be positive and non-increasing (sequences sorted by "
                         f"decreasing length), got {sizes[:8]}{'...' if len(sizes) > 8 else ''}")
    if sum(sizes) != total:
        raise ShapeError(f"{op}: batch_sizes add up to {sum(sizes)} but the packed input has {total} rows")
    return sizes, list(itertools.accumulate(sizes[:-1], initial=0)) if sizes else []


def _prev_rows(sizes, offs):
    """Packed row of each row's previous time step, for rows of steps >= 1 (in order)."""
    if len(sizes) < 2:
        return np.zeros(0, dtype=np.int64)
    later = np.asarray(sizes[1:], dtype=np.int64)
    first = np.zeros(len(later), dtype=np.int64)          # position of each step's first row among them
    np.cumsum(later[:-1], out=first[1:])
    return np.repeat(np.asarray(offs[:-1], dtype=np.int64) - first, later) + np.arange(int(later.sum()))


def _seq_shape(op, gates, gx, w_hh, b_hh, batch_sizes):
    dt = kernel_floats(op, gx=gx, w_hh=w_hh, b_hh=b_hh)
    if len(gx.shape) != 2:
        raise ShapeError(f"{op}: gx must be 2-D (total_steps, {gates}*hidden), got gx.shape={fmt_shape(gx.shape)}")
    if len(w_hh.shape) != 2 or not dims_match(w_hh.shape[0], mul_dim(gates, w_hh.shape[1])):
        raise ShapeError(f"{op}: w_hh.shape={fmt_shape(w_hh.shape)} should be ({gates}*hidden, hidden)")
    H = w_hh.shape[1]
    if not dims_match(gx.shape[1], mul_dim(gates, H)):
        raise ShapeError(f"{op}: gx.shape[1]={gx.shape[1]} does not match {gates}*hidden={mul_dim(gates, H)} "
                         f"(w_hh.shape={fmt_shape(w_hh.shape)})")
    check_param(op, "b_hh", b_hh, (mul_dim(gates, H),))
    check_index(op, "batch_sizes", batch_sizes)
    return H, dt


def _lstm_seq(gx, w_hh, b_hh, batch_sizes):
    """LSTM over packed variable-length sequences (time-major, sequences
    sorted by decreasing length, as ``torch.nn.utils.rnn.pack_padded_sequence``):
    step t runs only the ``batch_sizes[t]`` sequences still running. Zero
    initial state; PyTorch ``LSTMCell`` maths.

    Parameters
    ----------
    gx : (total, 4H)
        Input projections ``x W_ih^T + b_ih`` of every packed step (one matrix
        product for the whole batch, outside).
    w_hh : (4H, H);  b_hh : (4H,)
    batch_sizes : (T,) int

    Returns
    -------
    h, c : (total, H)
        States of every packed step.
    acts : (total, 4H)
        Saved gate activations.
    """
    sizes, offs = _seq_steps("lstm_seq", batch_sizes, gx.shape[0])
    H = w_hh.shape[1]
    dt = np.result_type(gx, w_hh, b_hh)
    gx = as_float(gx, dt)
    wt = transposed_float(w_hh, dt)
    b = as_float(b_hh, dt)
    total = gx.shape[0]
    h = np.empty((total, H), dtype=dt)
    c = np.empty((total, H), dtype=dt)
    acts = np.empty((total, 4 * H), dtype=dt)
    buf = np.empty((sizes[0] if sizes else 0, 4 * H), dtype=dt)     # one product buffer for every step
    prev = -1
    for n, o in zip(sizes, offs):
        if prev < 0:
            pre = gx[o:o + n]
        else:
            pre = np.matmul(h[prev:prev + n], wt, out=buf[:n])
            pre += gx[o:o + n]
        KT.lstm_seq_fwd(pre, b, c, prev, o, h, acts)
        prev = o
    return h, c, acts


def _lstm_seq_shape(gx, w_hh, b_hh, batch_sizes):
    H, dt = _seq_shape("lstm_seq", 4, gx, w_hh, b_hh, batch_sizes)
    n = gx.shape[0]
    return Aval((n, H), dt), Aval((n, H), dt), Aval((n, mul_dim(4, H)), dt)


def _lstm_seq_vjp(g, ins, out):
    gx, w_hh, b_hh, batch_sizes = ins
    h, c, acts = out
    sizes, offs = _seq_steps("lstm_seq", batch_sizes, h.shape[0])
    dh = grad_buffer(g[0], h)
    dc = grad_buffer(g[1], c)
    dg = np.empty_like(acts)
    w = as_float(w_hh, h.dtype)
    buf = np.empty((sizes[0] if sizes else 0, h.shape[1]), dtype=h.dtype)
    for t in range(len(sizes) - 1, -1, -1):
        n, o = sizes[t], offs[t]
        prev = offs[t - 1] if t else -1
        KT.lstm_seq_bwd(dh, dc, acts, c, prev, o, n, dg)
        if prev >= 0:
            dh[prev:prev + n] += np.matmul(dg[o:o + n], w, out=buf[:n])
    b0 = sizes[0] if sizes else 0
    gw = dg[b0:].T @ h[_prev_rows(sizes, offs)]
    return (dg.astype(np.asarray(gx).dtype, copy=False), gw.astype(np.asarray(w_hh).dtype, copy=False),
            col_sums(dg).astype(np.asarray(b_hh).dtype, copy=False), None)


lstm_seq_p = defprim("lstm_seq", _lstm_seq, _lstm_seq_shape, joint_vjp=_lstm_seq_vjp, multiple_results=True,
                     nondiff_args=(3,))


def _gru_seq(gx, w_hh, b_hh, batch_sizes):
    """GRU over packed variable-length sequences (see :func:`_lstm_seq`),
    PyTorch ``GRUCell`` maths (chunks r, z, n; reset gate applied after the
    recurrent product).

    Parameters
    ----------
    gx : (total, 3H)
        ``x W_ih^T + b_ih`` of every packed step.
    w_hh : (3H, H);  b_hh : (3H,)
    batch_sizes : (T,) int

    Returns
    -------
    h : (total, H)
    acts : (total, 3H), gh : (total, 3H)
        Saved for the backward pass.
    """
    sizes, offs = _seq_steps("gru_seq", batch_sizes, gx.shape[0])
    H = w_hh.shape[1]
    dt = np.result_type(gx, w_hh, b_hh)
    gx = as_float(gx, dt)
    wt = transposed_float(w_hh, dt)
    b = as_float(b_hh, dt)
    total = gx.shape[0]
    h = np.empty((total, H), dtype=dt)
    acts = np.empty((total, 3 * H), dtype=dt)
    gh = np.empty((total, 3 * H), dtype=dt)
    prev = -1
    for n, o in zip(sizes, offs):
        if prev < 0:
            gh[o:o + n] = b
        else:
            np.matmul(h[prev:prev + n], wt, out=gh[o:o + n])
            gh[o:o + n] += b
        KT.gru_seq_fwd(gx[o:o + n], gh[o:o + n], h, prev, o, acts)
        prev = o
    return h, acts, gh


def _gru_seq_shape(gx, w_hh, b_hh, batch_sizes):
    H, dt = _seq_shape("gru_seq", 3, gx, w_hh, b_hh, batch_sizes)
    n = gx.shape[0]
    return Aval((n, H), dt), Aval((n, mul_dim(3, H)), dt), Aval((n, mul_dim(3, H)), dt)


def _gru_seq_vjp(g, ins, out):
    gx, w_hh, b_hh, batch_sizes = ins
    h, acts, gh = out
    sizes, offs = _seq_steps("gru_seq", batch_sizes, h.shape[0])
    dh = grad_buffer(g[0], h)
    dgi = np.empty_like(acts)
    dgh = np.empty_like(acts)
    w = as_float(w_hh, h.dtype)
    for t in range(len(sizes) - 1, -1, -1):
        n, o = sizes[t], offs[t]
        prev = offs[t - 1] if t else -1
        KT.gru_seq_bwd(dh, acts, gh, h, prev, o, n, dgi, dgh)
        if prev >= 0:
            dh[prev:prev + n] += dgh[o:o + n] @ w
    b0 = sizes[0] if sizes else 0
    gw = dgh[b0:].T @ h[_prev_rows(sizes, offs)]
    return (dgi.astype(np.asarray(gx).dtype, copy=False), gw.astype(np.asarray(w_hh).dtype, copy=False),
            col_sums(dgh).astype(np.asarray(b_hh).dtype, copy=False), None)


gru_seq_p = defprim("gru_seq", _gru_seq, _gru_seq_shape, joint_vjp=_gru_seq_vjp, multiple_results=True,
                    nondiff_args=(3,))


def _rnn_seq(gx, w_hh, b_hh, batch_sizes):
    """Elman RNN ``h_t = tanh(gx_t + h_{t-1} W_hh^T + b_hh)`` over packed
    variable-length sequences (see :func:`_lstm_seq`); zero initial state.

    Parameters
    ----------
    gx : (total, H)
        ``x W_ih^T + b_ih`` of every packed step.
    w_hh : (H, H);  b_hh : (H,)
    batch_sizes : (T,) int

    Returns
    -------
    h : (total, H)
    """
    sizes, offs = _seq_steps("rnn_seq", batch_sizes, gx.shape[0])
    H = w_hh.shape[1]
    dt = np.result_type(gx, w_hh, b_hh)
    gx = as_float(gx, dt)
    wt = transposed_float(w_hh, dt)
    b = as_float(b_hh, dt)
    h = np.empty((gx.shape[0], H), dtype=dt)
    prev = -1
    for n, o in zip(sizes, offs):
        if prev < 0:
            pre = gx[o:o + n]
        else:
            pre = h[prev:prev + n] @ wt
            pre += gx[o:o + n]
        KT.tanh_rows_fwd(pre, b, o, h)
        prev = o
    return h


def _rnn_seq_shape(gx, w_hh, b_hh, batch_sizes):
    H, dt = _seq_shape("rnn_seq", 1, gx, w_hh, b_hh, batch_sizes)
    return Aval((gx.shape[0], H), dt)


def _rnn_seq_vjp(g, ins, out):
    gx, w_hh, b_hh, batch_sizes = ins
    h = out
    sizes, offs = _seq_steps("rnn_seq", batch_sizes, h.shape[0])
    dh = grad_buffer(g, h)
    dz = np.empty_like(h)
    w = as_float(w_hh, h.dtype)
    for t in range(len(sizes) - 1, -1, -1):
        n, o = sizes[t], offs[t]
        KT.tanh_rows_bwd(dh, h, o, dz[o:o + n])
        if t:
            prev = offs[t - 1]
            dh[prev:prev + n] += dz[o:o + n] @ w
    b0 = sizes[0] if sizes else 0
    gw = dz[b0:].T @ h[_prev_rows(sizes, offs)]
    return (dz.astype(np.asarray(gx).dtype, copy=False), gw.astype(np.asarray(w_hh).dtype, copy=False),
            col_sums(dz).astype(np.asarray(b_hh).dtype, copy=False), None)


rnn_seq_p = defprim("rnn_seq", _rnn_seq, _rnn_seq_shape, joint_vjp=_rnn_seq_vjp, nondiff_args=(3,))

