"""Fused recurrent cells: PyTorch's ``LSTMCell``/``GRUCell`` layouts and the
Tree-LSTM cell and leaf (kernels in :mod:`..kernels_tree`, beside the
vectorised gate activations they share with the tree models' primitives)."""
from __future__ import annotations

import numpy as np

from .. import kernels_tree as KT
from ..gradtypes import factored_wgrad
from .tree import leaf_shape
from .core import (batch_rows, F32, F64, Aval, ShapeError, as_float, contiguous, defprim, dims_match, fits, fmt_shape,
                   grad_or_zeros, kernel_args, kernel_floats, mul_dim)

__all__ = ["lstm_cell_p", "gru_cell_p", "tree_lstm_cell_p", "tree_lstm_leaf_p"]

# --------------------------------------------------------------------------
# fused recurrent cells (Numba kernels)
#
# The kernels run at every batch size: with their activations vectorised they
# beat the numpy twins everywhere measured (float32, H=150, kernel vs twin,
# us: lstm fwd B=1 2.5/44, B=25 22/119, B=100 70/404; gru fwd B=1 1.5/57,
# B=25 9/86, B=100 32/275; the backward kernels 1.9-45 vs 25-158).
# --------------------------------------------------------------------------


def _check_cell(name, x, h, gates, w_ih, w_hh, extra=()):
    """Shapes of a PyTorch-style cell's inputs; ``extra`` lists further
    (name, aval, want) with ``want`` in the tokens "B" (batch), "H" (hidden
    size) and "G" (gates * H). Returns (B, H)."""
    def bad(msg):
        raise ShapeError(f"{name}: {msg}")
    if len(w_hh.shape) != 2 or not dims_match(w_hh.shape[0], mul_dim(gates, w_hh.shape[1])):
        want = f"({gates * w_hh.shape[1]}, {w_hh.shape[1]})" if len(w_hh.shape) == 2 and w_hh.shape[1] is not None \
            else f"({gates}*hidden_size, hidden_size)"
        bad(f"weight_hh.shape={fmt_shape(w_hh.shape)} should be {want}")
    H = w_hh.shape[1]
    G = mul_dim(gates, H)
    if len(x.shape) != 2:
        bad(f"x must be 2-D (batch, input_size), got x.shape={fmt_shape(x.shape)}")
    if len(w_ih.shape) != 2 or not dims_match(w_ih.shape[0], G):
        bad(f"weight_ih.shape={fmt_shape(w_ih.shape)} should be ({G}, input_size) ({gates}*hidden_size with "
            f"hidden_size={H} from weight_hh.shape={fmt_shape(w_hh.shape)})")
    if not dims_match(x.shape[1], w_ih.shape[1]):
        bad(f"x.shape[1]={x.shape[1]} does not match weight_ih.shape[1]={w_ih.shape[1]}")
    B = x.shape[0] if x.shape[0] is not None else (h.shape[0] if len(h.shape) == 2 else None)
    if not fits(tuple(h.shape), (B, H)):
        bad(f"h.shape={fmt_shape(h.shape)} should be {fmt_shape((B, H))} (x.shape={fmt_shape(x.shape)}, hidden_size={H})")
    for nm, a, want in extra:
        want = tuple({"B": B, "H": H, "G": G}[d] for d in want)
        if not fits(tuple(a.shape), want):
            bad(f"{nm}.shape={fmt_shape(a.shape)} should be {fmt_shape(want)} (x.shape={fmt_shape(x.shape)}, "
                f"h.shape={fmt_shape(h.shape)})")
    return B, H


def _lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """PyTorch ``LSTMCell``: gates = x W_ih^T + b_ih + h W_hh^T + b_hh (i, f, g, o).
    Returns (h', c', acts) where acts (B, 5H) are the saved gate activations and tanh(c')."""
    dt = c.dtype
    # (equality, not identity: arrays Numba allocates carry their own dtype objects)
    if not ((dt == F32 or dt == F64) and x.dtype == dt and h.dtype == dt and w_ih.dtype == dt
            and w_hh.dtype == dt and b_ih.dtype == dt and b_hh.dtype == dt and c.flags.c_contiguous
            and b_ih.flags.c_contiguous and b_hh.flags.c_contiguous):
        # one check of the usual case, inline: this cell runs once per time step
        x, h, c, w_ih, w_hh, b_ih, b_hh = kernel_args(x, h, c, w_ih, w_hh, b_ih, b_hh)
    # W_ih x.T, not x W_ih.T: single-threaded OpenBLAS runs this
    # weight-on-the-left product 10-30% faster (measured, float32, B=25:
    # 300->600 72 vs 105 us, 150->600 37 vs 52 us), and with x.T made
    # contiguous up to 3x faster at B=3-4 (300->600 B=3 40 vs 15 us; at B=1 the
    # copy is a no-op). The kernel reads the two (4H, B) products as they are
    # and adds the biases itself: no transposing copy, no four broadcast
    # additions (~6 us at B=1).
    return KT.lstm_cell_fwd(np.dot(w_ih, contiguous(x.T)), np.dot(w_hh, contiguous(h.T)), b_ih, b_hh, c)


def _lstm_cell_shape(x, h, c, w_ih, w_hh, b_ih, b_hh):
    dt = kernel_floats("lstm_cell", x=x, h=h, c=c, weight_ih=w_ih, weight_hh=w_hh, bias_ih=b_ih, bias_hh=b_hh)
    B, H = _check_cell("lstm_cell", x, h, 4, w_ih, w_hh,
                       [("c", c, ("B", "H")), ("bias_ih", b_ih, ("G",)), ("bias_hh", b_hh, ("G",))])
    return Aval((B, H), dt), Aval((B, H), dt), Aval((B, mul_dim(5, H)), dt)



def _lstm_cell_vjp(g, ins, out):
    x, h, c, w_ih, w_hh, b_ih, b_hh = ins
    hn, cn, acts = out
    dgates, dc, db = KT.lstm_cell_bwd(
        grad_or_zeros(g[0], hn), grad_or_zeros(g[1], cn), acts, as_float(c, cn.dtype))
    # both biases receive the same array: safe, clip_grad_norm_ reassigns and never scales in place
    return (np.dot(dgates, w_ih), np.dot(dgates, w_hh), dc, factored_wgrad(dgates, x, w_ih.shape),
            factored_wgrad(dgates, h, w_hh.shape), db, db)


lstm_cell_p = defprim("lstm_cell", _lstm_cell, _lstm_cell_shape, joint_vjp=_lstm_cell_vjp,
                      multiple_results=True,
    batch=batch_rows(0, 1, 2))


def _gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """PyTorch ``GRUCell`` (r, z, n chunks). Returns (h', acts, gh)."""
    x, h, w_ih, w_hh, b_ih, b_hh = kernel_args(x, h, w_ih, w_hh, b_ih, b_hh)
    gi = x @ w_ih.T
    gi += b_ih
    gh = h @ w_hh.T
    gh += b_hh
    hn, acts = KT.gru_cell_fwd(gi, gh, h)
    return hn, acts, gh


def _gru_cell_shape(x, h, w_ih, w_hh, b_ih, b_hh):
    dt = kernel_floats("gru_cell", x=x, h=h, weight_ih=w_ih, weight_hh=w_hh, bias_ih=b_ih, bias_hh=b_hh)
    B, H = _check_cell("gru_cell", x, h, 3, w_ih, w_hh, [("bias_ih", b_ih, ("G",)), ("bias_hh", b_hh, ("G",))])
    return Aval((B, H), dt), Aval((B, mul_dim(3, H)), dt), Aval((B, mul_dim(3, H)), dt)


def _gru_cell_vjp(g, ins, out):
    x, h, w_ih, w_hh, b_ih, b_hh = ins
    hn, acts, gh = out
    dgi, dgh, dh = KT.gru_cell_bwd(grad_or_zeros(g[0], hn), acts, gh, as_float(h, hn.dtype))
    dh = dh + dgh @ w_hh
    return (dgi @ w_ih, dh, factored_wgrad(dgi, x, w_ih.shape), factored_wgrad(dgh, h, w_hh.shape), dgi.sum(0), dgh.sum(0))


gru_cell_p = defprim("gru_cell", _gru_cell, _gru_cell_shape, joint_vjp=_gru_cell_vjp, multiple_results=True,
    batch=batch_rows(0, 1))


def _tree_lstm_cell(h_l, h_r, c_l, c_r, w, b):
    """Binary constituency Tree-LSTM node (Tai et al. 2015, eqs. 9-14, N = 2, no
    input at internal nodes), for a batch of nodes:

    z = [h_l; h_r] W + b, split into i, f_l, f_r, o, u;
    c = i*u + f_l*c_l + f_r*c_r;  h = o*tanh(c).

    ``w`` has shape (2H, 5H). Returns (h, c, acts). The cell maths is the
    kernel the tree models' per-node and per-level primitives share.
    """
    h_l, h_r, c_l, c_r, w, b = kernel_args(h_l, h_r, c_l, c_r, w, b)
    z = np.concatenate((h_l, h_r), axis=1) @ w
    h, c = np.empty_like(c_l), np.empty_like(c_l)
    KT.tree_lstm_cell_fwd(z, b, c_l, c_r, h, c, z)
    return h, c, z


def _tree_lstm_cell_shape(h_l, h_r, c_l, c_r, w, b):
    op = "tree_lstm_cell"
    dt = kernel_floats(op, h_l=h_l, h_r=h_r, c_l=c_l, c_r=c_r, w=w, b=b)
    if len(h_l.shape) != 2:
        raise ShapeError(f"{op}: h_l must be 2-D (nodes, hidden), got h_l.shape={fmt_shape(h_l.shape)}")
    n, H = h_l.shape
    for nm, a in (("h_r", h_r), ("c_l", c_l), ("c_r", c_r)):
        if not fits(tuple(a.shape), (n, H)):
            raise ShapeError(f"{op}: {nm}.shape={fmt_shape(a.shape)} does not match h_l.shape={fmt_shape(h_l.shape)}")
        n = n if n is not None else a.shape[0]
    if not fits(tuple(w.shape), (mul_dim(2, H), mul_dim(5, H))):
        raise ShapeError(f"{op}: w.shape={fmt_shape(w.shape)} should be {fmt_shape((mul_dim(2, H), mul_dim(5, H)))} for hidden "
                         f"size {H}")
    if not fits(tuple(b.shape), (mul_dim(5, H),)):
        raise ShapeError(f"{op}: b.shape={fmt_shape(b.shape)} should be {fmt_shape((mul_dim(5, H),))}")
    return Aval((n, H), dt), Aval((n, H), dt), Aval((n, mul_dim(5, H)), dt)


def _tree_lstm_cell_vjp(g, ins, out):
    h_l, h_r, c_l, c_r, w, b = ins
    h, c, acts = out
    dt = c.dtype
    c_l, c_r = np.ascontiguousarray(c_l, dtype=dt), np.ascontiguousarray(c_r, dtype=dt)
    dz, dcl, dcr = np.empty_like(acts), np.empty_like(c), np.empty_like(c)
    KT.tree_lstm_cell_bwd(np.ascontiguousarray(grad_or_zeros(g[0], h), dtype=dt),
                          np.ascontiguousarray(grad_or_zeros(g[1], c), dtype=dt), acts, c_l, c_r, c, dz, dcl, dcr)
    H = h.shape[1]
    dhcat = dz @ w.T
    hcat = np.concatenate((h_l, h_r), axis=1)
    return (dhcat[:, :H], dhcat[:, H:], dcl, dcr, factored_wgrad(hcat, dz, w.shape), dz.sum(0))


tree_lstm_cell_p = defprim("tree_lstm_cell", _tree_lstm_cell, _tree_lstm_cell_shape,
                           joint_vjp=_tree_lstm_cell_vjp, multiple_results=True,
    batch=batch_rows(0, 1, 2, 3))


def _tree_lstm_leaf(x, w, b):
    """Tree-LSTM leaf (input only, no children): z = x W + b split into i, o, u;
    c = i*u; h = o*tanh(c). ``w`` has shape (E, 3H). Returns (h, c, acts)."""
    x, w, b = kernel_args(x, w, b)
    z = x @ w
    H = z.shape[1] // 3
    h, c = np.empty((z.shape[0], H), z.dtype), np.empty((z.shape[0], H), z.dtype)
    KT.tree_lstm_leaf_fwd(z, b, h, c, z)
    return h, c, z


def _tree_lstm_leaf_shape(x, w, b):
    dt = kernel_floats("tree_lstm_leaf", x=x, w=w, b=b)
    n, H = leaf_shape("tree_lstm_leaf", x, w, b)
    return Aval((n, H), dt), Aval((n, H), dt), Aval((n, mul_dim(3, H)), dt)


def _tree_lstm_leaf_vjp(g, ins, out):
    x, w, b = ins
    h, c, acts = out
    dt = c.dtype
    dz = np.empty_like(acts)
    KT.tree_lstm_leaf_bwd(np.ascontiguousarray(grad_or_zeros(g[0], h), dtype=dt),
                          np.ascontiguousarray(grad_or_zeros(g[1], c), dtype=dt), acts, c, dz)
    return (dz @ w.T, factored_wgrad(x, dz, w.shape), dz.sum(0))


tree_lstm_leaf_p = defprim("tree_lstm_leaf", _tree_lstm_leaf, _tree_lstm_leaf_shape,
                           joint_vjp=_tree_lstm_leaf_vjp, multiple_results=True,
    batch=batch_rows(0))


