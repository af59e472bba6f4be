"""Packed variable-length sequences, as ``torch.nn.utils.rnn``.

A :class:`PackedSequence` holds the steps of a batch of sequences time-major
with no padding, the sequences sorted by decreasing length: step ``t`` holds
step ``t`` of the ``batch_sizes[t]`` sequences that are that long, so
``data`` has ``sum(lengths)`` rows. ``nn.RNN`` / ``GRU`` / ``LSTM`` run a
packed batch with one primitive per layer and direction that computes only
the sequences still running at each step.

Packing and unpacking are gathers (``take``), so gradients flow through them
to the padded input and from the padded output.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...autograd import ops
from ...autograd.tensor import Tensor, wrap_array
from ...autograd.values import concrete, is_interpreted

__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence", "pad_sequence",
           "PackedLayout", "packed_layout"]


class PackedSequence(NamedTuple):
    """A packed batch (as ``torch.nn.utils.rnn.PackedSequence``).

    Attributes
    ----------
    data : Tensor, ``(sum(lengths), *)``
        Row ``offsets[t] + j`` is step ``t`` of the ``j``-th longest sequence.
    batch_sizes : (T,) int64 ndarray
        Sequences running at step ``t`` (non-increasing, every entry >= 1).
    sorted_indices : (B,) int64 ndarray or None
        ``sorted_indices[j]`` is the caller's index of the ``j``-th longest
        sequence; None when the caller's order is already sorted.
    unsorted_indices : (B,) int64 ndarray or None
        The inverse permutation: caller's sequence ``i`` is the
        ``unsorted_indices[i]``-th longest.
    """

    data: Tensor
    batch_sizes: np.ndarray
    sorted_indices: np.ndarray | None = None
    unsorted_indices: np.ndarray | None = None


class PackedLayout(NamedTuple):
    """Index arrays of a packed batch, from its ``batch_sizes`` alone.

    Attributes
    ----------
    lengths : (B,) int64
        Length of each sequence in sorted order (non-increasing).
    offsets : (T,) int64
        First packed row of each step.
    last : (B,) int64
        Packed row of each sorted sequence's last step.
    reverse : (total,) int64
        Row (t, j) of the time-reversed batch reads row (L_j - 1 - t, j) of
        this one. Reversed sequences have the same lengths, so the reversed
        batch has this same layout, and ``reverse`` is its own inverse.
    """

    lengths: np.ndarray
    offsets: np.ndarray
    last: np.ndarray
    reverse: np.ndarray


def packed_layout(batch_sizes):
    """The :class:`PackedLayout` of a packed batch with these ``batch_sizes``."""
    bs = np.asarray(batch_sizes, dtype=np.int64)
    T = len(bs)
    offsets = np.zeros(T, dtype=np.int64)
    np.cumsum(bs[:-1], out=offsets[1:])
    B = int(bs[0]) if T else 0
    # sequence j runs for the steps whose batch size exceeds j
    lengths = (bs[None, :] > np.arange(B)[:, None]).sum(1)
    t_idx = np.repeat(np.arange(T, dtype=np.int64), bs)
    j_idx = np.arange(int(bs.sum())) - np.repeat(offsets, bs)
    reverse = offsets[lengths[j_idx] - 1 - t_idx] + j_idx
    last = offsets[lengths - 1] + np.arange(B) if B else np.zeros(0, dtype=np.int64)
    return PackedLayout(lengths, offsets, last, reverse)


def _data(x, who, what="input"):
    if isinstance(x, Tensor) or is_interpreted(x):
        return x
    arr = np.asarray(x)
    if arr.dtype.kind not in "fc":
        raise TypeError(f"{who}: {what} must be floating-point, got dtype {arr.dtype}")
    return wrap_array(arr)


def _lengths(lengths, B, T, who):
    """``lengths`` as an int64 array of B values in [1, T], checked."""
    if is_interpreted(lengths):
        raise TypeError(f"{who}: lengths must be known when the graph is built (they fix the packed layout: the "
                        f"batch size of every step), got the symbolic value {lengths!r}; pass them as an array "
                        f"constant, or to ds.trace as a tuple (a static argument: one trace per distinct lengths)")
    L = concrete(lengths)
    if L.ndim != 1 or L.dtype.kind not in "iu" or len(L) != B:
        raise ValueError(f"{who}: lengths must be {B} integers (one per sequence of the batch), "
                         f"got shape {L.shape} and dtype {L.dtype}")
    L = L.astype(np.int64)
    if B and (L.min() < 1 or L.max() > T):
        bad = int(np.flatnonzero((L < 1) | (L > T))[0])
        raise ValueError(f"{who}: lengths[{bad}]={int(L[bad])} is out of range: every sequence needs 1 to {T} "
                         f"steps (the padded length)")
    return L


def _sort(L, enforce_sorted, who):
    """(sorted_indices or None, unsorted_indices or None, lengths in sorted order)."""
    if enforce_sorted:
        if np.any(L[1:] > L[:-1]):
            raise ValueError(f"{who}: lengths must be sorted in decreasing order when enforce_sorted=True, got "
                             f"{L.tolist()[:8]}{'...' if len(L) > 8 else ''}; pass enforce_sorted=False to pack "
                             f"sequences in any order")
        return None, None, L
    order = np.argsort(-L, kind="stable")
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    return order, inv, L[order]


def _batch_sizes(sorted_lengths):
    T = int(sorted_lengths[0])
    return (sorted_lengths[None, :] > np.arange(T)[:, None]).sum(1).astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (as ``torch.nn.utils.rnn.pack_padded_sequence``).

    Parameters
    ----------
    input : Tensor or array, ``(T, B, *)`` or, with ``batch_first``, ``(B, T, *)``
    lengths : (B,) ints in [1, T]
    batch_first : bool
    enforce_sorted : bool
        True: ``lengths`` must be non-increasing (the caller's order is the
        packed order); False: any order, sorted here.

    Returns
    -------
    PackedSequence
    """
    who = "pack_padded_sequence"
    x = _data(input, who)
    if len(x.shape) < 2:
        raise ValueError(f"{who}: input must be (T, B, *) or (B, T, *) with batch_first=True, "
                         f"got shape {tuple(x.shape)}")
    B, T = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    L = _lengths(lengths, B, T, who)
    if B == 0:
        raise ValueError(f"{who}: the batch is empty")
    order, inv, Ls = _sort(L, enforce_sorted, who)
    bs = _batch_sizes(Ls)
    lay = packed_layout(bs)
    src = np.arange(B) if order is None else order
    t_idx = np.repeat(np.arange(len(bs)), bs)
    j_idx = np.arange(len(t_idx)) - np.repeat(lay.offsets, bs)
    caller = src[j_idx]
    rows = caller * T + t_idx if batch_first else t_idx * B + caller
    flat = ops.reshape(x, B * T, *x.shape[2:])
    return PackedSequence(ops.take(flat, rows), bs, order, inv)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences of shapes ``(L_i, *)`` (as ``torch.nn.utils.rnn.pack_sequence``).

    ``enforce_sorted=True`` requires non-increasing lengths; False packs any order.
    """
    who = "pack_sequence"
    seqs = _sequences(sequences, who)
    L = np.fromiter((s.shape[0] for s in seqs), dtype=np.int64, count=len(seqs))
    order, inv, Ls = _sort(L, enforce_sorted, who)
    bs = _batch_sizes(Ls)
    lay = packed_layout(bs)
    starts = np.zeros(len(seqs), dtype=np.int64)
    np.cumsum(L[:-1], out=starts[1:])
    src = np.arange(len(seqs)) if order is None else order
    t_idx = np.repeat(np.arange(len(bs)), bs)
    j_idx = np.arange(len(t_idx)) - np.repeat(lay.offsets, bs)
    rows = starts[src[j_idx]] + t_idx
    cat = seqs[0] if len(seqs) == 1 else ops.concat(seqs, axis=0)
    return PackedSequence(ops.take(cat, rows), bs, order, inv)


def _sequences(sequences, who):
    if isinstance(sequences, (Tensor, np.ndarray)) or not isinstance(sequences, (list, tuple)):
        raise TypeError(f"{who}: sequences must be a list of (L_i, *) tensors, got {type(sequences).__name__}")
    if not sequences:
        raise ValueError(f"{who}: expected at least one sequence, got an empty list")
    seqs = [_data(s, who, f"sequences[{i}]") for i, s in enumerate(sequences)]
    tail = tuple(seqs[0].shape[1:])
    for i, s in enumerate(seqs):
        if len(s.shape) < 1 or s.shape[0] < 1:
            raise ValueError(f"{who}: sequences[{i}] has shape {tuple(s.shape)}; every sequence needs at least "
                             f"one step")
        if tuple(s.shape[1:]) != tail:
            raise ValueError(f"{who}: sequences[{i}] has shape {tuple(s.shape)}, but sequences[0] has "
                             f"{tuple(seqs[0].shape)}: the trailing dimensions must agree")
    return seqs


def _padded_rows(bs, order_inv, B, T, batch_first, pad_row):
    """Packed row (or ``pad_row``) of each padded position, in padded order."""
    lay = packed_layout(bs)
    j = np.arange(B) if order_inv is None else order_inv         # sorted position of caller's i
    t = np.arange(T)
    valid = t[None, :] < lay.lengths[j][:, None]                 # (B, T)
    offs = np.zeros(T, dtype=np.int64)
    offs[:len(lay.offsets)] = lay.offsets
    rows = np.where(valid, offs[None, :] + j[:, None], pad_row)
    return (rows if batch_first else rows.T).reshape(-1), lay.lengths[j]


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Unpack to a padded batch (as ``torch.nn.utils.rnn.pad_packed_sequence``).

    Returns
    -------
    padded : Tensor, ``(T, B, *)`` or ``(B, T, *)``
        In the caller's order (``unsorted_indices`` applied); positions past a
        sequence's length hold ``padding_value`` (a constant: no gradient).
        ``T`` is the longest length, or ``total_length`` if given.
    lengths : (B,) int64 ndarray
    """
    who = "pad_packed_sequence"
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{who}: expected a PackedSequence, got {type(sequence).__name__}")
    data, bs = sequence.data, np.asarray(sequence.batch_sizes, dtype=np.int64)
    B, T = int(bs[0]), len(bs)
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"{who}: total_length={total_length} is shorter than the longest sequence ({T} steps)")
        T = int(total_length)
    total = data.shape[0]
    rows, lengths = _padded_rows(bs, sequence.unsorted_indices, B, T, batch_first, total)
    pad = np.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype)
    out = ops.take(ops.concat([data, pad], axis=0), rows)
    shape = (B, T) if batch_first else (T, B)
    return ops.reshape(out, *shape, *data.shape[1:]), lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """Pad a list of ``(L_i, *)`` sequences to ``(T, B, *)`` or ``(B, T, *)`` (as
    ``torch.nn.utils.rnn.pad_sequence``); T is the longest length."""
    seqs = _sequences(sequences, "pad_sequence")
    L = np.fromiter((s.shape[0] for s in seqs), dtype=np.int64, count=len(seqs))
    B, T = len(seqs), int(L.max())
    starts = np.zeros(B, dtype=np.int64)
    np.cumsum(L[:-1], out=starts[1:])
    total = int(L.sum())
    t = np.arange(T)
    rows = np.where(t[None, :] < L[:, None], starts[:, None] + t[None, :], total)   # (B, T)
    cat = seqs[0] if B == 1 else ops.concat(seqs, axis=0)
    pad = np.full((1,) + tuple(seqs[0].shape[1:]), padding_value, dtype=seqs[0].dtype)
    out = ops.take(ops.concat([cat, pad], axis=0), (rows if batch_first else rows.T).reshape(-1))
    shape = (B, T) if batch_first else (T, B)
    return ops.reshape(out, *shape, *seqs[0].shape[1:])
