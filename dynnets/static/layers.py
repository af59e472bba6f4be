"""TF1's ``tf.layers`` functions over :func:`get_variable`."""
from __future__ import annotations

from ..autograd import ops as _ops
from .random import zeros_initializer
from .variable_scope import get_variable, variable_scope

__all__ = ["dense"]


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
