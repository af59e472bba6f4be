"""TF1's ``tf.nn`` names over dynnets ops (they work on symbolic and eager
values alike, through the shared primitive table), with ``rnn_cell`` and
``dynamic_rnn``."""
from __future__ import annotations

import numpy as np

from ..autograd import ops as _ops
from ..autograd.engine import bind as _bind
from ..autograd.primitives import dropout_mask_p as _dropout_mask_p
from ..autograd.primitives import make_rng as _make_rng
from . import rnn_cell
from .graph import is_symbolic as _is_symbolic
from .random import get_seed as _get_seed
from .rnn import dynamic_rnn
from .variable_scope import name_scope as _name_scope

__all__ = ["dropout", "softmax", "log_softmax", "sparse_softmax_cross_entropy_with_logits",
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


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Inverted dropout (as ``tf.nn.dropout``): each element is zeroed with
    probability ``rate = 1 - keep_prob`` and the others scaled by
    ``1 / keep_prob``, with **a new mask at every** ``Session.run`` (drawn by
    a ``dropout_mask`` node; gradients use that run's mask). ``seed`` as
    :func:`dynnets.static.random_normal`'s."""
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout: pass exactly one of keep_prob= and rate=")
    if noise_shape is not None:
        raise ValueError("dropout: noise_shape is not supported (the mask has the shape of x)")
    if rate is None:
        if isinstance(keep_prob, bool) or not isinstance(keep_prob, (int, float, np.floating)) \
                or not 0 < keep_prob <= 1:
            raise ValueError(f"dropout: keep_prob must be a scalar in (0, 1], got {keep_prob!r}")
        rate = 1.0 - float(keep_prob)
    elif isinstance(rate, bool) or not isinstance(rate, (int, float, np.floating)) or not 0 <= rate < 1:
        raise ValueError(f"dropout: rate must be a scalar in [0, 1), got {rate!r}")
    if rate == 0:
        return x
    if not _is_symbolic(x):
        return _ops.dropout(x, float(rate), _make_rng(_get_seed(seed)))
    with x.graph.as_default(), _name_scope(name or "dropout"):
        mask = _bind(_dropout_mask_p, x, rate=float(rate), seed=_get_seed(seed, x.graph))
        return _ops.mul(x, mask)
