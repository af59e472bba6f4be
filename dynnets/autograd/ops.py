"""Every public op, once. Each is a thin call of :func:`bind` on a primitive
from the table; composites (``square``, ``split``, ``dropout``, ``min``...) are
written in primitives. The functions work on eager tensors and on symbolic
static-graph values alike, because both go through ``bind``; the methods and
operators of both (``x + y``, ``x.sum()``) are these functions, declared in
:class:`dynnets.autograd.tensor.TensorOps`.

This module sits below :mod:`~dynnets.autograd.tensor` (whose class body
refers to it), so it never names the Tensor class: a non-differentiable
argument (an index, a mask, a condition) given as a tensor is read through
:func:`_array_of`. Tensor creation (``tensor``, ``zeros``...) lives with the
class in :mod:`~dynnets.autograd.tensor`.
"""
from __future__ import annotations

import builtins

import numpy as np

from . import primitives as P
from .engine import bind, bind_first

__all__ = [
    "add", "sub", "mul", "div", "pow", "neg", "matmul", "linear", "exp", "log", "tanh", "sigmoid", "relu",
    "sqrt", "abs", "clip", "maximum", "minimum", "where", "square", "sum", "mean", "max", "min", "argmax",
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "reshape",
    "transpose", "broadcast_to", "getitem", "take", "concat", "cat", "stack", "split", "split_rows", "softmax",
    "log_softmax", "cross_entropy", "embedding", "dropout", "lstm_cell", "gru_cell", "tree_lstm_cell",
    "tree_lstm_leaf", "lstm_seq", "gru_seq", "rnn_seq", "tree_lstm_levels", "tree_rnn_levels", "childsum_levels",
    "tree_lstm_node", "tree_lstm_leaf_node", "astype", "flatten", "squeeze", "unsqueeze",
]


def shape_tuple(shape):
    """The shape of ``f(*shape)``, as ``zeros(2, 3)`` and ``zeros((2, 3))`` both take it."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _array_of(x):
    """A tensor's array; anything else (an array, a symbolic value, an int)
    unchanged. (An ndarray's own ``.data`` is a memoryview, not an array.)"""
    d = getattr(x, "data", None)
    return d if type(d) is np.ndarray else x


# --- elementwise ---------------------------------------------------------------

def add(x, y):
    return bind(P.add_p, x, y)


def sub(x, y):
    return bind(P.sub_p, x, y)


def mul(x, y):
    return bind(P.mul_p, x, y)


def div(x, y):
    return bind(P.div_p, x, y)


def pow(x, y):
    return bind(P.pow_p, x, y)


def neg(x):
    return bind(P.neg_p, x)


def exp(x):
    return bind(P.exp_p, x)


def log(x):
    return bind(P.log_p, x)


def tanh(x):
    return bind(P.tanh_p, x)


def sigmoid(x):
    return bind(P.sigmoid_p, x)


def relu(x):
    return bind(P.relu_p, x)


def sqrt(x):
    return bind(P.sqrt_p, x)


def abs(x):
    return bind(P.abs_p, x)


def clip(x, lo=None, hi=None):
    return bind(P.clip_p, x, lo=lo, hi=hi)


def maximum(x, y):
    return bind(P.maximum_p, x, y)


def minimum(x, y):
    return bind(P.minimum_p, x, y)


def where(condition, x, y):
    """``x`` where ``condition`` else ``y``; gradients flow to ``x`` and ``y`` only."""
    condition = _array_of(condition)
    return bind(P.where_p, np.asarray(condition, dtype=bool) if not getattr(condition, "_is_symbolic", False)
                else condition, x, y)


def square(x):
    return bind(P.mul_p, x, x)


def astype(x, dtype):
    return bind(P.astype_p, x, dtype=np.dtype(dtype))


# --- reductions ------------------------------------------------------------------

def _axis(axis):
    if isinstance(axis, list):
        return tuple(axis)
    return axis


# The defaults are not passed: an application without attributes is checked
# and recorded with less work (a whole-tensor sum is the usual loss).

def sum(x, axis=None, keepdims=False):
    if axis is None and not keepdims:
        return bind(P.sum_p, x)
    return bind(P.sum_p, x, axis=_axis(axis), keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    if axis is None and not keepdims:
        return bind(P.mean_p, x)
    return bind(P.mean_p, x, axis=_axis(axis), keepdims=keepdims)


def max(x, axis=None, keepdims=False):
    if axis is None and not keepdims:
        return bind(P.max_p, x)
    return bind(P.max_p, x, axis=_axis(axis), keepdims=keepdims)


def min(x, axis=None, keepdims=False):
    return neg(max(neg(x), axis=axis, keepdims=keepdims))


def argmax(x, axis=None):
    """Index of the maximum (along ``axis``), int64; no gradient."""
    if axis is None:
        return bind(P.argmax_p, x)
    return bind(P.argmax_p, x, axis=axis)


# --- comparisons (boolean results, no gradient) -------------------------------------

def less(x, y):
    return bind(P.less_p, x, y)


def less_equal(x, y):
    return bind(P.less_equal_p, x, y)


def greater(x, y):
    return bind(P.greater_p, x, y)


def greater_equal(x, y):
    return bind(P.greater_equal_p, x, y)


def equal(x, y):
    return bind(P.equal_p, x, y)


def not_equal(x, y):
    return bind(P.not_equal_p, x, y)


# --- shapes and indexing --------------------------------------------------------

def reshape(x, *shape):
    """``x`` with the given shape; one dimension may be -1 (inferred), and an
    unknown dimension of a static value (``None``, as in ``x.shape``) is
    inferred the same way."""
    shape = shape_tuple(shape)
    if None in shape:
        if shape.count(None) + shape.count(-1) > 1:
            raise P.ShapeError(f"reshape: at most one dimension of shape={shape} can be inferred (None or -1); "
                               f"x.shape={x.shape}")
        shape = tuple(-1 if d is None else d for d in shape)
    return bind(P.reshape_p, x, shape=shape)


def flatten(x):
    return reshape(x, -1)


def _axis_of(op, axis, ndim):
    if not -ndim <= axis < ndim:
        raise P.ShapeError(f"{op}: axis {axis} is out of range for an input with {ndim} dimensions")
    return axis % ndim


def squeeze(x, axis):
    """``x`` without dimension ``axis`` if it has size 1, else ``x`` unchanged
    (as ``torch.squeeze(x, dim)``)."""
    shp = list(x.shape)
    ax = _axis_of("squeeze", axis, len(shp))
    if shp[ax] is None:
        raise P.ShapeError(f"squeeze: dimension {axis} of x.shape={tuple(shp)} is unknown, so whether it is "
                           f"removed (size 1) cannot be decided when the graph is built: reshape instead")
    if shp[ax] == 1:
        del shp[ax]
    if shp.count(None) <= 1:
        return reshape(x, *shp)
    return getitem(x, (slice(None),) * ax + (0,))


def unsqueeze(x, axis):
    """``x`` with a new dimension of size 1 at ``axis``."""
    shp = list(x.shape)
    ax = _axis_of("unsqueeze", axis, len(shp) + 1)
    shp.insert(ax, 1)
    if shp.count(None) <= 1:
        return reshape(x, *shp)
    return getitem(x, (slice(None),) * ax + (None,))


def transpose(x, *axes):
    axes = shape_tuple(axes) if axes else None
    return bind(P.transpose_p, x, axes=axes)


def broadcast_to(x, shape):
    return bind(P.broadcast_to_p, x, shape=tuple(shape))


def _index_arg(index):
    tp = type(index)
    if tp is int or tp is slice:
        return index
    if tp is tuple:
        return tuple(_array_of(i) for i in index)
    if tp is list:
        return np.asarray(index)
    return _array_of(index)


def getitem(x, index):
    """``x[index]`` with ints, slices, None, Ellipsis and integer arrays (gather)."""
    return bind(P.getitem_p, x, index=_index_arg(index))


def take(x, indices):
    """Rows of ``x`` at integer ``indices`` (gather along axis 0)."""
    indices = _array_of(indices)
    return bind(P.take_p, x, np.asarray(indices) if not getattr(indices, "_is_symbolic", False) else indices)


def concat(xs, axis=0):
    if axis == 0 and type(axis) is int:
        return bind(P.concat_p, *xs)         # the default, without attributes (see sum)
    return bind(P.concat_p, *xs, axis=axis)


cat = concat


def stack(xs, axis=0):
    if axis == 0 and type(axis) is int:
        return bind(P.stack_p, *xs)
    return bind(P.stack_p, *xs, axis=axis)


def split(x, sections, axis=0):
    """Split into ``sections`` equal parts (an int) or at the given sizes (a list),
    as ``torch.split``'s list form; returns a list of tensors."""
    n = x.shape[axis]
    if isinstance(sections, int):
        if n % sections:
            raise P.ShapeError(f"split: axis {axis} of size {n} cannot be split into {sections} equal parts")
        sizes = [n // sections] * sections
    else:
        sizes = list(sections)
        if builtins.sum(sizes) != n:
            raise P.ShapeError(f"split: sizes {sizes} do not add up to x.shape[{axis}]={n}")
    out = []
    start = 0
    nd = len(x.shape)
    ax = axis % nd
    for s in sizes:
        idx = (slice(None),) * ax + (slice(start, start + s),)
        out.append(getitem(x, idx))
        start += s
    return out


# --- linear algebra --------------------------------------------------------------

def matmul(x, w):
    return bind(P.matmul_p, x, w)


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` (weight is (out_features, in_features), as PyTorch);
    ``bias=None`` is ``x @ weight.T``."""
    # a Python 0 for no bias: the one fused primitive, and (a weak scalar) it promotes nothing
    return bind(P.linear_p, x, weight, 0 if bias is None else bias)


# --- softmax, losses, embedding, dropout ----------------------------------------

def softmax(x, axis=-1):
    if axis == -1 and type(axis) is int:
        return bind(P.softmax_p, x)          # the default, without attributes (see sum)
    return bind(P.softmax_p, x, axis=axis)


def log_softmax(x, axis=-1):
    if axis == -1 and type(axis) is int:
        return bind(P.log_softmax_p, x)
    return bind(P.log_softmax_p, x, axis=axis)


def cross_entropy(logits, targets, mask=None, reduction="mean"):
    """Softmax cross-entropy of ``logits`` (N, C) against integer class
    ``targets`` (N,), fused in one Numba kernel.

    ``mask`` (N,) weights each row (0 drops it); ``reduction`` is 'mean' (over
    the mask's total weight), 'sum' or 'none' (per-row losses).
    """
    targets = _array_of(targets)
    if not getattr(targets, "_is_symbolic", False):
        targets = np.asarray(targets)
    if mask is None:
        loss, _ = bind(P.softmax_cross_entropy_p, logits, targets, reduction=reduction)
    else:
        mask = _array_of(mask)
        if not getattr(mask, "_is_symbolic", False):
            mask = np.asarray(mask, dtype=logits.dtype)
        loss, _ = bind(P.softmax_cross_entropy_p, logits, targets, mask, reduction=reduction)
    return loss


def embedding(weight, ids):
    """Rows of ``weight`` for integer ``ids``; the gradient is row-sparse."""
    ids = _array_of(ids)
    if not getattr(ids, "_is_symbolic", False):
        ids = np.asarray(ids)
    return bind(P.embedding_p, weight, ids)


def dropout(x, p, rng, training=True):
    """Inverted dropout: zero each element with probability ``p`` and scale the
    rest by 1/(1-p). ``rng`` (a ``numpy.random.Generator`` or seed) draws the
    mask, so runs are reproducible."""
    if not training or p == 0:
        return x
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    keep = np.random.default_rng(rng).random(x.shape) >= p
    mask = keep.astype(x.dtype) * np.asarray(1.0 / (1.0 - p), dtype=x.dtype)
    return bind(P.mul_p, x, mask)


# --- fused cells -------------------------------------------------------------------

def lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One fused LSTM step (PyTorch ``LSTMCell`` maths); returns (h', c')."""
    h2, c2, _ = bind(P.lstm_cell_p, x, h, c, w_ih, w_hh, b_ih, b_hh)
    return h2, c2


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """One fused GRU step (PyTorch ``GRUCell`` maths); returns h'."""
    return bind_first(P.gru_cell_p, x, h, w_ih, w_hh, b_ih, b_hh)


def tree_lstm_cell(h_l, h_r, c_l, c_r, w, b):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14); returns (h, c)."""
    h, c, _ = bind(P.tree_lstm_cell_p, h_l, h_r, c_l, c_r, w, b)
    return h, c


def tree_lstm_leaf(x, w, b):
    """Tree-LSTM leaf node(s) from input ``x``; returns (h, c)."""
    h, c, _ = bind(P.tree_lstm_leaf_p, x, w, b)
    return h, c


# --- packed sequences (the recurrences nn.RNN / GRU / LSTM run on) -------------------

def lstm_seq(gx, w_hh, b_hh, batch_sizes):
    """LSTM over a packed batch from a zero state (the ``lstm_seq`` primitive).

    ``gx`` (total, 4H) holds the input projections ``x W_ih^T + b_ih`` of every
    packed row, ``w_hh`` (4H, H), ``b_hh`` (4H,), ``batch_sizes`` (T,) as a
    :class:`~dynnets.nn.utils.rnn.PackedSequence`'s. Returns ``(h, c)``, the
    states of every packed row, each (total, H).
    """
    h, c, _ = bind(P.lstm_seq_p, gx, w_hh, b_hh, batch_sizes)
    return h, c


def gru_seq(gx, w_hh, b_hh, batch_sizes):
    """GRU over a packed batch from a zero state; ``gx`` (total, 3H) -> h (total, H)."""
    return bind_first(P.gru_seq_p, gx, w_hh, b_hh, batch_sizes)


def rnn_seq(gx, w_hh, b_hh, batch_sizes):
    """Elman RNN (tanh) over a packed batch from a zero state; ``gx`` (total, H) -> h (total, H)."""
    return bind(P.rnn_seq_p, gx, w_hh, b_hh, batch_sizes)


# --- tree models (index arrays are constants: they carry no gradient) ----------------

def split_rows(x):
    """Rows of ``x`` (n, D) as n tensors of shape (1, D), one graph node."""
    return bind(P.split_rows_p, x)


def tree_lstm_levels(h0, c0, w, b, left, right, offsets):
    """Binary Tree-LSTM over a level schedule; returns (h, c), each (n_nodes, H)."""
    h, c, _, _ = bind(P.tree_lstm_levels_p, h0, c0, w, b, left, right, offsets)
    return h, c


def tree_rnn_levels(h0, w, b, left, right, offsets):
    """Tree-RNN ``tanh([h_l; h_r] @ w + b)`` over a level schedule; returns h (n_nodes, H)."""
    return bind_first(P.tree_rnn_levels_p, h0, w, b, left, right, offsets)


def childsum_levels(h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets):
    """Child-sum Tree-LSTM over a level schedule; returns (h, c), each (n_nodes, H)."""
    out = bind(P.childsum_levels_p, h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets)
    return out[0], out[1]


def tree_lstm_node(s_l, s_r, w, b):
    """Binary Tree-LSTM node on packed states ``[h | c]`` (n, 2H) -> (n, 2H)."""
    return bind_first(P.tree_lstm_node_p, s_l, s_r, w, b)


def tree_lstm_leaf_node(x, w, b):
    """Tree-LSTM leaf from input rows ``x`` (n, E) -> packed states (n, 2H)."""
    return bind_first(P.tree_lstm_leaf_node_p, x, w, b)
