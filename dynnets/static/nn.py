"""TF1's ``tf.nn`` names over dynnets ops (they work on symbolic and eager
values alike, through the shared primitive table), with ``rnn_cell`` and
``dynamic_rnn``."""
from __future__ import annotations

from ..autograd import ops as _ops
from . import rnn_cell
from .rnn import dynamic_rnn

__all__ = ["softmax", "log_softmax", "sparse_softmax_cross_entropy_with_logits",
           "softmax_cross_entropy_with_logits", "tanh", "sigmoid", "relu", "embedding_lookup", "l2_loss",
           "bias_add", "xw_plus_b", "lstm_cell", "gru_cell", "rnn_cell", "dynamic_rnn"]


def softmax(logits, axis=-1, name=None):
    return _ops.softmax(logits, axis=axis)


def log_softmax(logits, axis=-1, name=None):
    return _ops.log_softmax(logits, axis=axis)


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Per-row losses (N,) of ``logits`` (N, C) against integer ``labels``
    (N,), as TF1 (reduce them yourself)."""
    if labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits: pass labels= and logits=")
    return _ops.cross_entropy(logits, labels, reduction="none")


def softmax_cross_entropy_with_logits(labels=None, logits=None, axis=-1, name=None):
    """Per-row losses against dense label distributions: ``-sum(labels * log_softmax(logits))``."""
    if labels is None or logits is None:
        raise ValueError("softmax_cross_entropy_with_logits: pass labels= and logits=")
    return _ops.neg(_ops.sum(_ops.mul(labels, _ops.log_softmax(logits, axis=axis)), axis=axis))


def tanh(x, name=None):
    return _ops.tanh(x)


def sigmoid(x, name=None):
    return _ops.sigmoid(x)


def relu(x, name=None):
    return _ops.relu(x)


def embedding_lookup(params, ids, name=None):
    """Rows of ``params`` (V, D) for integer ``ids``; its gradient is row-sparse."""
    return _ops.embedding(params, ids)


def l2_loss(t, name=None):
    """``sum(t**2) / 2``."""
    return _ops.mul(_ops.sum(_ops.mul(t, t)), 0.5)


def bias_add(value, bias, name=None):
    return _ops.add(value, bias)


def xw_plus_b(x, weights, biases, name=None):
    """``x @ weights + biases`` (TF's layout: weights is (in, out))."""
    return _ops.add(_ops.matmul(x, weights), biases)


lstm_cell = _ops.lstm_cell
gru_cell = _ops.gru_cell
