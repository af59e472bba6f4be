"""TF1's ``tf.layers`` functions over :func:`get_variable`."""
from __future__ import annotations

import numpy as np

from ..autograd import ops as _ops
from . import nn as _nn
from .array_ops import size as _array_size
from .array_ops import stop_gradient as _stop_gradient
from .graph import GraphKeys, Value, get_default_graph
from .math_ops import as_graph_value as _as_graph_value
from .random import ones_initializer, zeros_initializer
from .variable_scope import get_variable, name_scope, variable_scope

__all__ = ["dense", "dropout", "batch_normalization"]


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
          kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
          bias_constraint=None, trainable=True, name=None, reuse=None):
    """``activation(inputs @ kernel + bias)`` (as ``tf.layers.dense``).

    The variables are ``<scope>/kernel`` (in, units) and ``<scope>/bias``
    (units,) of the variable scope ``name`` (default ``"dense"``, made
    unique: ``"dense_1"``...); ``reuse=True`` (or the same ``name`` under a
    reusing scope) shares them. The kernel defaults to Glorot-uniform (the
    variable scope's initializer if it has one), the bias to zeros.
    ``inputs`` of rank above 2 are multiplied on their last axis. The
    arguments are in TF1's order; the kernel and bias regularizers add their
    losses to ``GraphKeys.REGULARIZATION_LOSSES`` (as ``get_variable``'s);
    ``activity_regularizer`` and constraints are not supported (an error
    unless None).
    """
    for arg, v in (("activity_regularizer", activity_regularizer), ("kernel_constraint", kernel_constraint),
                   ("bias_constraint", bias_constraint)):
        if v is not None:
            raise ValueError(f"dense: {arg}= is not supported, got {v!r}")
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ValueError(f"dense: units must be a positive integer, got {units!r}")
    shape = tuple(inputs.shape)
    if not shape or shape[-1] is None:
        raise ValueError(f"dense: the last dimension of the inputs should be defined, got shape {shape}")
    with variable_scope(name, default_name="dense", reuse=reuse):
        kernel = get_variable("kernel", (shape[-1], units), dtype=inputs.dtype, initializer=kernel_initializer,
                              regularizer=kernel_regularizer, trainable=trainable)
        if len(shape) == 2:
            out = _ops.matmul(inputs, kernel)
        else:
            flat = _ops.reshape(inputs, -1, shape[-1])
            out = _ops.reshape(_ops.matmul(flat, kernel), *[-1 if d is None else d for d in shape[:-1]], units)
        if use_bias:
            bias = get_variable("bias", (units,), dtype=inputs.dtype,
                                initializer=bias_initializer if bias_initializer is not None else zeros_initializer(),
                                regularizer=bias_regularizer, trainable=trainable)
            out = _ops.add(out, bias)
        if activation is not None:
            out = activation(out)
    return out


# --- i22-tf1-gaps: layers.dropout, layers.batch_normalization ------------------------------------------

def _training_flag(op, training):
    """``training`` as a Python bool, or a boolean scalar Value (a placeholder fed at run time)."""
    if isinstance(training, Value):
        if training.dtype.kind != "b" or training.ndim not in (0, None):
            raise TypeError(f"{op}: training must be a Python bool or a boolean scalar Value, got dtype "
                            f"{training.dtype} and shape {training.shape}")
        return training
    if isinstance(training, (bool, np.bool_)):
        return bool(training)
    raise TypeError(f"{op}: training must be a Python bool or a boolean scalar Value, got {training!r}")


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Inverted dropout with drop probability ``rate`` while ``training``
    (``tf.layers.dropout``): ``training`` False (TF1's default) gives
    ``inputs`` unchanged; a boolean scalar Value (a placeholder) picks at
    run time."""
    training = _training_flag("dropout", training)
    inputs = _as_graph_value(inputs)
    if training is False or (not isinstance(rate, Value) and rate == 0):
        return inputs
    with name_scope(name or "dropout"):
        dropped = _nn.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed)
        if training is True:
            return dropped
        return _ops.where(training, dropped, inputs)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=None, gamma_initializer=None, moving_mean_initializer=None,
                        moving_variance_initializer=None, beta_regularizer=None, gamma_regularizer=None,
                        beta_constraint=None, gamma_constraint=None, training=False, trainable=True, name=None,
                        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99, fused=None,
                        virtual_batch_size=None, adjustment=None):
    """Batch normalisation over every axis but ``axis`` (``tf.layers.batch_normalization``).

    ``training`` True (or a boolean scalar Value that is True at run time)
    normalises with the batch's mean and (biased) variance; False (TF1's
    default) with the moving statistics. The variables are
    ``<scope>/gamma``, ``beta`` (trainable) and ``moving_mean``,
    ``moving_variance`` (not trainable) of the variable scope ``name``
    (default ``batch_normalization``). As in TF1, the moving statistics are
    updated by two ops added to ``GraphKeys.UPDATE_OPS`` which nothing runs
    by itself: make the train op depend on them
    (``with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):``).
    Each update is ``moving -= (moving - batch) * (1 - momentum)``; the
    batch variance in it is the unbiased one for rank-4 inputs normalised
    over axis 1 or 3 (TF1's fused kernel, ``fused=None``), else the biased one.

    Parameters
    ----------
    inputs : Value, shape (..., C, ...)
        ``C = inputs.shape[axis]`` must be known.

    Returns
    -------
    Value, the shape of ``inputs``
    """
    for arg, v in (("beta_constraint", beta_constraint), ("gamma_constraint", gamma_constraint),
                   ("renorm_clipping", renorm_clipping), ("virtual_batch_size", virtual_batch_size),
                   ("adjustment", adjustment)):
        if v is not None:
            raise ValueError(f"batch_normalization: {arg}= is not supported, got {v!r}")
    if renorm:
        raise ValueError("batch_normalization: renorm=True is not supported")
    if isinstance(axis, (list, tuple)):
        if len(axis) != 1:
            raise ValueError(f"batch_normalization: only one axis is supported, got axis={list(axis)}")
        axis = axis[0]
    training = _training_flag("batch_normalization", training)
    shape = tuple(inputs.shape)
    nd = len(shape)
    if not -nd <= axis < nd:
        raise ValueError(f"batch_normalization: axis={axis} is out of range for inputs of rank {nd}")
    axis %= nd
    c = shape[axis]
    if c is None:
        raise ValueError(f"batch_normalization: the dimension {axis} of the inputs (the channels) must be known, "
                         f"got shape {list(shape)}")
    dt = inputs.dtype
    with variable_scope(name, default_name="batch_normalization", reuse=reuse):
        gamma = get_variable("gamma", (c,), dtype=dt, initializer=gamma_initializer or ones_initializer(),
                             regularizer=gamma_regularizer, trainable=trainable) if scale else None
        beta = get_variable("beta", (c,), dtype=dt, initializer=beta_initializer or zeros_initializer(),
                            regularizer=beta_regularizer, trainable=trainable) if center else None
        moving_mean = get_variable("moving_mean", (c,), dtype=dt,
                                   initializer=moving_mean_initializer or zeros_initializer(), trainable=False)
        moving_var = get_variable("moving_variance", (c,), dtype=dt,
                                  initializer=moving_variance_initializer or ones_initializer(), trainable=False)
        bshape = [1] * nd
        bshape[axis] = c
        as_b = (lambda v: v) if axis == nd - 1 else (lambda v: _ops.reshape(v, *bshape))
        reduce_axes = [k for k in range(nd) if k != axis]

        def normalise(mean, var):
            inv = _ops.div(1.0, _ops.sqrt(_ops.add(var, float(epsilon))))
            if gamma is not None:
                inv = _ops.mul(inv, gamma)
            out = _ops.mul(_ops.sub(inputs, as_b(mean)), as_b(inv))
            return _ops.add(out, as_b(beta)) if beta is not None else out

        if training is False:
            return normalise(moving_mean, moving_var)
        mean, var = _nn.moments(inputs, reduce_axes)
        if nd == 4 and axis in (1, 3) and fused is not False:
            n = 1
            for k in reduce_axes:
                n = n * shape[k] if shape[k] is not None and not isinstance(n, Value) else None
            count = float(n) if n is not None else _ops.astype(_ops.div(_array_size(inputs), c), dt)
            stat_var = _ops.mul(var, _ops.div(count, _ops.maximum(_ops.sub(count, 1.0), 1.0))) \
                if isinstance(count, Value) else _ops.mul(var, count / max(count - 1.0, 1.0))
        else:
            stat_var = var
        if training is True:
            out = normalise(mean, var)
            new_mean, new_var = mean, stat_var
        else:
            out = _ops.where(training, normalise(mean, var), normalise(moving_mean, moving_var))
            new_mean = _ops.where(training, mean, moving_mean)
            new_var = _ops.where(training, stat_var, moving_var)
        decay = 1.0 - float(momentum)
        g = get_default_graph()
        for var_, new in ((moving_mean, new_mean), (moving_var, new_var)):
            g.add_to_collection(GraphKeys.UPDATE_OPS,
                                var_.assign_sub(_ops.mul(_ops.sub(var_, _stop_gradient(new)), decay)))
    return out


# --- issue 25: layers.conv1d -------------------------------------------------------------------------------

def conv1d(inputs, filters, kernel_size, strides=1, padding="valid", data_format="channels_last", dilation_rate=1,
           activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
           trainable=True, name=None, reuse=None):
    """1-D convolution layer, as ``tf.layers.conv1d``: ``inputs`` (N, W, C)
    ('channels_last'; 'channels_first': (N, C, W)), ``filters`` output
    channels, ``padding`` 'valid' or 'same' (TF's: output ceil(W / strides)).

    The variables are ``<scope>/kernel`` (kernel_size, C, filters), Glorot-uniform
    by default (fans include the kernel width, as TF1), and ``<scope>/bias``
    (filters,) of zeros, in the variable scope ``name`` (default ``"conv1d"``,
    made unique); ``reuse`` shares them. Constraints and the activity
    regularizer are not supported (an error unless None).
    """
    for arg, v in (("activity_regularizer", activity_regularizer), ("kernel_constraint", kernel_constraint),
                   ("bias_constraint", bias_constraint)):
        if v is not None:
            raise ValueError(f"conv1d: {arg}= is not supported, got {v!r}")

    def one(what, v):
        if isinstance(v, (list, tuple)):
            if len(v) != 1:
                raise ValueError(f"conv1d: {what} must be an int or a 1-tuple, got {v!r}")
            v = v[0]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"conv1d: {what} must be a positive integer, got {v!r}")
        return int(v)
    filters = one("filters", filters)
    k, s, d = one("kernel_size", kernel_size), one("strides", strides), one("dilation_rate", dilation_rate)
    if s > 1 and d > 1:
        raise ValueError(f"conv1d: strides > 1 not supported in conjunction with dilation_rate > 1 (TF1's rule), got "
                         f"strides={s}, dilation_rate={d}")
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"conv1d: data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"conv1d: padding must be 'valid' or 'same', got {padding!r}")
    shape = tuple(inputs.shape)
    if len(shape) != 3:
        raise ValueError(f"conv1d: Input 0 of layer conv1d is incompatible with the layer: expected ndim=3, found "
                         f"ndim={len(shape)} (shape {shape})")
    c = shape[2] if data_format == "channels_last" else shape[1]
    if c is None:
        raise ValueError(f"conv1d: the channel dimension of the inputs should be defined, got shape {shape}")
    with variable_scope(name, default_name="conv1d", reuse=reuse):
        kernel = get_variable("kernel", (k, c, filters), dtype=inputs.dtype, initializer=kernel_initializer,
                              regularizer=kernel_regularizer, trainable=trainable)
        out = _nn.conv1d(inputs, kernel, s, padding.upper(), data_format="NWC" if data_format == "channels_last"
                         else "NCW", dilations=d)
        if use_bias:
            bias = get_variable("bias", (filters,), dtype=inputs.dtype,
                                initializer=bias_initializer if bias_initializer is not None else zeros_initializer(),
                                regularizer=bias_regularizer, trainable=trainable)
            out = _ops.add(out, bias if data_format == "channels_last" else _ops.reshape(bias, filters, 1))
        if activation is not None:
            out = activation(out)
    return out


__all__ += ["conv1d"]
