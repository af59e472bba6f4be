"""TF1's streaming metrics (``tf.metrics``): each returns ``(value, update_op)``.

The running sums live in *local* variables (``GraphKeys.LOCAL_VARIABLES`` and
``METRIC_VARIABLES``, not global: initialise them with
``tf.local_variables_initializer()``, as in TF1). Each run of ``update_op``
adds a batch to them and gives the metric including that batch; ``value``
reads the metric as it was when the run started (fetch it in a later run).
A metric over no element yet is 0.
"""
from __future__ import annotations

import numpy as np

from ..autograd import ops as _ops
from .graph import GraphKeys, Value, Variable, constant
from .variable_scope import variable_scope

__all__ = ["mean", "accuracy"]

_COLLECTIONS = [GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES]


def _float(x):
    if isinstance(x, Value):
        return x if x.dtype == np.float32 else _ops.astype(x, np.float32)
    return constant(np.asarray(x, np.float32))


def _safe_div(num, den):
    return _ops.where(_ops.greater(den, 0.0), _ops.div(num, _ops.maximum(den, 1e-30)), _ops.mul(num, 0.0))


def _add_to(collections, value):
    for c in collections or ():
        value.graph.add_to_collection(c, value)


def _mean(values, weights, metrics_collections, updates_collections):
    values = _float(values)
    total = Variable(np.zeros((), np.float32), trainable=False, collections=_COLLECTIONS, name="total")
    count = Variable(np.zeros((), np.float32), trainable=False, collections=_COLLECTIONS, name="count")
    if weights is None:
        n = _ops.astype(_ops.sum(_ops.mul(values, 0.0) + 1.0), np.float32)
        s = _ops.sum(values)
    else:
        w = _float(weights)
        weighted = _ops.mul(values, w)
        s = _ops.sum(weighted)
        n = _ops.sum(_ops.add(_ops.mul(values, 0.0), w))       # the weights broadcast to the values' shape
    value = _safe_div(total, count)
    update_op = _safe_div(total.assign_add(s), count.assign_add(n))
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The running (weighted) mean of ``values`` (``tf.metrics.mean``).

    Returns
    -------
    value : Value, shape ()
        ``total / count`` as the run starts (0 before any update).
    update_op : Value, shape ()
        Adds this batch's ``sum(values * weights)`` and ``sum(weights)`` and
        gives the mean so far.
    """
    with variable_scope(name, default_name="mean"):
        return _mean(values, weights, metrics_collections, updates_collections)


def accuracy(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The running fraction of ``predictions == labels`` (weighted), as
    ``tf.metrics.accuracy``; ``labels`` and ``predictions`` of one shape.

    Returns
    -------
    (accuracy, update_op) : see :func:`mean`.
    """
    ls = tuple(labels.shape) if hasattr(labels, "shape") else np.shape(labels)
    ps = tuple(predictions.shape) if hasattr(predictions, "shape") else np.shape(predictions)
    if len(ls) != len(ps) or any(a is not None and b is not None and a != b for a, b in zip(ls, ps)):
        raise ValueError(f"accuracy: labels shape {list(ls)} and predictions shape {list(ps)} must be equal "
                         f"(argmax the logits first)")
    with variable_scope(name, default_name="accuracy"):
        if isinstance(predictions, Value) and isinstance(labels, Value) and predictions.dtype != labels.dtype:
            predictions = _ops.astype(predictions, labels.dtype)       # TF1 casts predictions to labels' dtype
        correct = _ops.astype(_ops.eq(predictions, labels), np.float32)
        return _mean(correct, weights, metrics_collections, updates_collections)
