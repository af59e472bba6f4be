"""``tf.contrib``: the few names of TF1's contrib that TF1 scripts commonly
use, as a thin namespace over dynnets' own (``layers.xavier_initializer``,
``layers.l2_regularizer``, ``layers.l1_regularizer``, and ``rnn``'s cells).
Any other name is an AttributeError that names it: contrib was never part of
TF1's stable API, and dynnets provides only these."""
from __future__ import annotations

import numpy as np

from ..autograd import ops as _ops
from . import rnn_cell as _rnn_cell
from .graph import named
from .random import xavier_initializer

__all__ = ["layers", "rnn"]


class _Namespace:
    """A module-like namespace whose missing names raise an error naming them."""

    def __init__(self, path, **names):
        self._path = path
        self.__dict__.update(names)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{self._path}.{name} is not provided by dynnets.static (of TF1's contrib only "
                             f"{', '.join(sorted(k for k in self.__dict__ if not k.startswith('_')))} are)")

    def __dir__(self):
        return sorted(k for k in self.__dict__ if not k.startswith("_"))

    def __repr__(self):
        return f"<namespace {self._path}>"


def _scale(op, scale):
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)):
        raise TypeError(f"{op}: scale must be a float, got {scale!r}")
    if scale < 0:
        raise ValueError(f"{op}: setting a scale less than 0 on a regularizer: {scale}")
    return float(scale)


def l2_regularizer(scale, scope=None):
    """``w -> scale * l2_loss(w) = scale * sum(w**2) / 2`` (None for scale 0),
    as ``tf.contrib.layers.l2_regularizer``: pass it to ``get_variable(
    regularizer=)`` or call it."""
    scale = _scale("l2_regularizer", scale)
    if scale == 0:
        return lambda weights: None
    return lambda weights: named(_ops.mul(_ops.mul(_ops.sum(_ops.mul(weights, weights)), 0.5), scale),
                                 scope or "l2_regularizer")


def l1_regularizer(scale, scope=None):
    """``w -> scale * sum(|w|)`` (None for scale 0), as ``tf.contrib.layers.l1_regularizer``."""
    scale = _scale("l1_regularizer", scale)
    if scale == 0:
        return lambda weights: None
    return lambda weights: named(_ops.mul(_ops.sum(_ops.abs(weights)), scale), scope or "l1_regularizer")


layers = _Namespace("tf.contrib.layers", xavier_initializer=xavier_initializer,
                    xavier_initializer_conv2d=xavier_initializer, l2_regularizer=l2_regularizer,
                    l1_regularizer=l1_regularizer)
rnn = _Namespace("tf.contrib.rnn", **{k: getattr(_rnn_cell, k) for k in (
    "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell", "DropoutWrapper", "LSTMStateTuple",
    "RNNCell")})


_PROVIDED = ("layers", "rnn")


def __getattr__(name):
    # a module's missing attribute (PEP 562): say what tf.contrib offers here
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"tf.contrib.{name} is not provided by dynnets.static (of TF1's contrib only "
                         f"{', '.join('tf.contrib.' + p for p in _PROVIDED)} are, and of those a few names)")
