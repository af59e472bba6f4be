"""``tf.contrib``: the few names of TF1's contrib that TF1 scripts commonly
use, as a thin namespace over dynnets' own (``layers.xavier_initializer``,
``layers.l2_regularizer``, ``layers.l1_regularizer``, and ``rnn``'s cells).
Any other name is an AttributeError that names it: contrib was never part of
TF1's stable API, and dynnets provides only these."""
from __future__ import annotations

import numpy as np

from ..autograd import ops as _ops
from ..autograd.engine import bind as _bind
from ..autograd.primitives import layer_norm_p as _layer_norm_p
from . import rnn_cell as _rnn_cell
from .graph import named
from .random import ones_initializer, xavier_initializer, zeros_initializer
from .variable_scope import get_variable, variable_scope

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


def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None, variables_collections=None,
               outputs_collections=None, trainable=True, begin_norm_axis=1, begin_params_axis=-1, scope=None):
    """Layer normalisation, as ``tf.contrib.layers.layer_norm``: normalise
    over the axes ``begin_norm_axis..rank-1`` (TF1's default 1: every axis but
    the batch), with variance epsilon 1e-12 as TF1, then ``* gamma + beta``
    with parameters of shape ``inputs.shape[begin_params_axis:]`` (variables
    ``<scope>/gamma`` of ones and ``<scope>/beta`` of zeros, scope default
    ``"LayerNorm"``). The ``layer_norm`` primitive of
    ``torch.nn.functional.layer_norm``."""
    if variables_collections is not None or outputs_collections is not None:
        raise ValueError("layer_norm: variables_collections and outputs_collections are not supported")
    shape = tuple(inputs.shape)
    rank = len(shape)
    if rank == 0:
        raise ValueError(f"layer_norm: inputs must have a known rank of at least 1, got shape {shape}")
    norm_axis = begin_norm_axis % rank if -rank <= begin_norm_axis < rank else None
    params_axis = begin_params_axis % rank if -rank <= begin_params_axis < rank else None
    if norm_axis is None or params_axis is None:
        raise ValueError(f"layer_norm: begin_norm_axis={begin_norm_axis} and begin_params_axis={begin_params_axis} "
                         f"must be in [-{rank}, {rank}) for inputs of rank {rank}")
    pshape = shape[params_axis:]
    if None in pshape:
        raise ValueError(f"layer_norm: inputs {shape} has undefined dimensions in the parameters' shape {pshape}")
    with variable_scope(scope, default_name="LayerNorm", reuse=reuse):
        beta = get_variable("beta", pshape, dtype=inputs.dtype, initializer=zeros_initializer(),
                            trainable=trainable) if center else None
        gamma = get_variable("gamma", pshape, dtype=inputs.dtype, initializer=ones_initializer(),
                             trainable=trainable) if scale else None
        nd = rank - norm_axis
        if params_axis == norm_axis and (gamma is not None or beta is None):
            # the parameters cover exactly the normalised axes: the affine transform fused in the primitive
            args = (inputs,) + ((gamma,) if gamma is not None else ()) + ((beta,) if beta is not None else ())
            out = _bind(_layer_norm_p, *args, ndim=nd, eps=1e-12)
        else:
            out = _bind(_layer_norm_p, inputs, ndim=nd, eps=1e-12)
            if gamma is not None:
                out = _ops.mul(out, gamma)
            if beta is not None:
                out = _ops.add(out, beta)
        if activation_fn is not None:
            out = activation_fn(out)
    return out


layers = _Namespace("tf.contrib.layers", xavier_initializer=xavier_initializer,
                    xavier_initializer_conv2d=xavier_initializer, l2_regularizer=l2_regularizer,
                    l1_regularizer=l1_regularizer, layer_norm=layer_norm)
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
