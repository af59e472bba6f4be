"""Ops over whole structures in one primitive: packed sequences (the
recurrences ``nn.RNN`` / ``GRU`` / ``LSTM`` run on), tree levels (the
level-batched Tree-LSTM and its relatives) and ragged batches (packed
variable-length sequences, ragged attention)."""
from __future__ import annotations

import numpy as np

from .. import primitives as P
from ..engine import bind, bind1, bind_first
from .array import concat

__all__ = ["lstm_seq", "gru_seq", "rnn_seq", "split_rows", "tree_lstm_levels", "tree_lstm_levels_packed",
           "tree_rnn_levels", "childsum_levels", "ragged_offsets", "pack_sequences", "unpack_sequences",
           "ragged_attention"]


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
    return bind1(P.split_rows_p, x)


def tree_lstm_levels(h0, c0, w, b, left, right, offsets):
    """Binary Tree-LSTM over a level schedule; returns (h, c), each (n_nodes, H)."""
    h, c, _, _ = bind(P.tree_lstm_levels_p, h0, c0, w, b, left, right, offsets)
    return h, c


def tree_lstm_levels_packed(s0, rows, w, b, left, right, offsets):
    """Binary Tree-LSTM over a level schedule whose leaf ``j`` starts from the
    packed state ``s0[rows[j]]`` (``[h | c]``, (n_states, 2H)); returns (h, c),
    each (n_nodes, H)."""
    h, c, _, _ = bind(P.tree_lstm_levels_packed_p, s0, rows, w, b, left, right, offsets)
    return h, c


def tree_rnn_levels(h0, w, b, left, right, offsets):
    """Tree-RNN ``tanh([h_l; h_r] @ w + b)`` over a level schedule; returns h (n_nodes, H)."""
    return bind_first(P.tree_rnn_levels_p, h0, w, b, left, right, offsets)


def childsum_levels(h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets):
    """Child-sum Tree-LSTM over a level schedule; returns (h, c), each (n_nodes, H)."""
    out = bind(P.childsum_levels_p, h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets)
    return out[0], out[1]


# --- ragged (packed, variable-length) attention (issue 25, branch i25-models) --------

def ragged_offsets(lengths):
    """Offsets ``(B + 1,)`` int64 of sentences of the given ``lengths``
    packed one after another (FlashAttention's ``cu_seqlens``): sentence
    ``b`` is rows ``offsets[b]:offsets[b+1]``."""
    lens = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if lens.size and lens.min() < 0:
        raise P.ShapeError(f"ragged_offsets: lengths must be non-negative, got {int(lens.min())} at position "
                           f"{int(np.argmin(lens))}")
    out = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def pack_sequences(sequences):
    """Sentences ``(T_b, ...)`` (tensors or arrays of one trailing shape)
    concatenated into the packed layout: ``(packed, offsets)`` with
    ``packed`` ``(sum T_b, ...)`` and ``offsets`` ``(B + 1,)`` int64 (see
    :func:`ragged_offsets`). Gradients flow back to each sentence."""
    seqs = list(sequences)
    if not seqs:
        raise ValueError("pack_sequences: expected at least one sequence, got none")
    offsets = ragged_offsets([len(s) for s in seqs])
    return concat(seqs, 0), offsets


def unpack_sequences(packed, offsets):
    """The inverse of :func:`pack_sequences`: the list of ``packed``'s row
    ranges ``packed[offsets[b]:offsets[b+1]]``."""
    o = np.asarray(offsets, dtype=np.int64)
    return [packed[int(a):int(b)] for a, b in zip(o[:-1], o[1:])]


def ragged_attention(query, key, value, offsets, num_heads=1, scale=None, return_lse=False, method=None):
    """Multi-head softmax attention of packed sentences, each over itself
    only (the ``ragged_attention`` primitive: one kernel pass that reads the
    offsets, no padding, no mask, no ``(B, T, T)`` score tensor).

    Parameters
    ----------
    query, key, value : (N, E)
        Packed token rows of all sentences (see :func:`pack_sequences`);
        head ``h`` is columns ``h*E/num_heads:(h+1)*E/num_heads``, as in
        ``torch.nn.MultiheadAttention``.
    offsets : (B + 1,) int
        Sentence boundaries (``cu_seqlens``).
    num_heads : int
    scale : float or None
        Default ``1 / sqrt(E / num_heads)``.
    return_lse : bool
        Also return each row's log-sum-exp of its scores, (N, num_heads).
    method : None, 'grouped', 'kernel' or 'twin'
        How the primitive computes (the same values): BLAS products on
        stacks of equal-length sentences (None, the fastest measured), the
        Numba kernel's one pass over the offsets, or its numpy twin.

    Returns
    -------
    (N, E), and the log-sum-exp with ``return_lse``.
    """
    attrs = {"num_heads": num_heads}
    if scale is not None:
        attrs["scale"] = scale
    if method is not None:
        attrs["method"] = method
    out, lse = bind(P.ragged_attention_p, query, key, value, offsets, **attrs)
    return (out, lse) if return_lse else out
