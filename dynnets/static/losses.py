"""TF1's ``tf.losses``: weighted, reduced losses that add themselves to the
``LOSSES`` collection (``tf.losses.get_total_loss`` sums them).

Every loss goes through :func:`compute_weighted_loss`, as TF1 1.x: the
per-element losses and the weights are cast to float32, multiplied, reduced
by ``reduction`` (default ``Reduction.SUM_BY_NONZERO_WEIGHTS``: the weighted
sum divided by the number of non-zero weights, 0 when there is none), cast
back to the losses' dtype and added to ``loss_collection``. The regression
losses (``mean_squared_error``, ``absolute_difference``, ``huber_loss``,
``log_loss``, ``hinge_loss``) cast ``labels`` and ``predictions`` to float32
first, as TF1 (a float64 input gives a float32 loss there too).
"""
from __future__ import annotations

import numpy as np

from ..autograd import ops as _ops
from . import nn as _nn
from .array_ops import fill, shape, squeeze, stop_gradient
from .graph import GraphKeys, Value, constant, get_default_graph, named

__all__ = ["Reduction", "compute_weighted_loss", "absolute_difference", "mean_squared_error", "huber_loss",
           "log_loss", "hinge_loss", "sigmoid_cross_entropy", "softmax_cross_entropy", "sparse_softmax_cross_entropy",
           "add_loss", "get_losses", "get_regularization_losses", "get_regularization_loss", "get_total_loss"]


class Reduction:
    """How :func:`compute_weighted_loss` reduces the weighted losses (TF1's ``tf.losses.Reduction``)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key!r}: expected one of {sorted(set(cls.all()))}")


def cast(x, dtype):
    return _ops.astype(x, dtype)


def reduce_sum(x):
    return _ops.sum(x)


def ones_like(x):
    """Ones of ``x``'s shape and dtype (a constant where the shape is known)."""
    if None not in x.shape:
        return constant(np.ones(tuple(x.shape), x.dtype))
    return fill(shape(x), x.dtype.type(1), dtype=x.dtype)


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def add_n(xs, name=None):
    # one loss gets an op of its own (adding 0), so the name goes to it and not to the caller's value
    out = xs[0] if len(xs) > 1 else _ops.add(xs[0], 0.0)
    for x in xs[1:]:
        out = _ops.add(out, x)
    return named(out, name)


def _tensor(x, dtype=None):
    if isinstance(x, Value):
        return x if dtype is None or x.dtype == np.dtype(dtype) else cast(x, dtype)
    return constant(np.asarray(x, dtype=dtype) if dtype is not None else x)


def _float32(x):
    return _tensor(x, np.float32)


def _safe_div(num, den):
    """``num / den``, 0 where ``den`` is 0 (TF1's ``div_no_nan``)."""
    return _ops.where(_ops.greater(den, 0.0), _ops.div(num, _ops.maximum(den, 1e-30)), _ops.mul(num, 0.0))


def _check_weights(op, losses, weights):
    ws, ls = tuple(np.shape(weights)) if not isinstance(weights, Value) else tuple(weights.shape), tuple(losses.shape)
    if len(ws) == 0:
        return
    # TF1: weights must be a scalar or broadcastable to losses: the same rank, each dimension 1 or the same
    ok = len(ws) == len(ls) and all(w is None or w == 1 or d is None or w == d for w, d in zip(ws, ls))
    if not ok:
        raise ValueError(f"{op}: weights can not be broadcast to values: weights shape {list(ws)}, values shape "
                         f"{list(ls)} (weights must be a scalar or of the same rank with dimensions 1 or equal)")


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``losses * weights`` reduced by ``reduction`` (see :class:`Reduction`),
    in ``losses``' dtype, added to ``loss_collection`` (``None``: to none),
    as TF1's ``tf.losses.compute_weighted_loss``.

    Parameters
    ----------
    losses : Value, shape (...)
        Per-element losses.
    weights : number, array or Value
        A scalar, or of ``losses``' rank with each dimension 1 or equal to
        ``losses``'.
    reduction : str
        One of :class:`Reduction`; ``NONE`` keeps the shape of ``losses``.

    Returns
    -------
    Value, shape () (or ``losses``' shape for ``Reduction.NONE``)
    """
    return _compute("compute_weighted_loss", losses, weights, loss_collection, reduction)


def _compute(op, losses, weights, loss_collection, reduction):
    Reduction.validate(reduction)
    losses = _tensor(losses)
    input_dtype = losses.dtype
    _check_weights(op, losses, weights)
    losses32, weights32 = _float32(losses), _float32(weights)
    weighted = _ops.mul(losses32, weights32)
    if reduction == Reduction.NONE:
        loss = weighted
    else:
        total = reduce_sum(weighted)
        if reduction == Reduction.SUM:
            loss = total
        else:
            ones = ones_like(losses32)
            if reduction == Reduction.MEAN:
                den = reduce_sum(_ops.mul(weights32, ones))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                den = reduce_sum(ones)
            else:
                present = cast(_ops.not_equal(_ops.mul(weights32, ones), 0.0), np.float32)
                den = reduce_sum(present)
            loss = _safe_div(total, den)
    loss = loss if input_dtype == np.float32 else cast(loss, input_dtype)
    if loss_collection is not None:
        add_loss(loss, loss_collection)
    return loss


def _pair(op, labels, predictions):
    if labels is None or predictions is None:
        raise ValueError(f"{op}: labels and predictions must not be None")
    labels, predictions = _float32(labels), _float32(predictions)
    lp, ll = tuple(predictions.shape), tuple(labels.shape)
    if len(lp) != len(ll) or any(a is not None and b is not None and a != b for a, b in zip(lp, ll)):
        raise ValueError(f"{op}: predictions shape {list(lp)} and labels shape {list(ll)} are incompatible")
    return labels, predictions


def _weighted(op, losses, weights, loss_collection, reduction, scope):
    # scope (TF1's name scope of the loss ops) is accepted and changes nothing
    return _compute(op, losses, weights, loss_collection, reduction)


def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``|predictions - labels|``, weighted and reduced (``tf.losses.absolute_difference``)."""
    labels, predictions = _pair("absolute_difference", labels, predictions)
    return _weighted("absolute_difference", _ops.abs(_ops.sub(predictions, labels)), weights, loss_collection,
                     reduction, scope)


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``(predictions - labels) ** 2``, weighted and reduced (``tf.losses.mean_squared_error``)."""
    labels, predictions = _pair("mean_squared_error", labels, predictions)
    return _weighted("mean_squared_error", _ops.square(_ops.sub(predictions, labels)), weights, loss_collection,
                     reduction, scope)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``0.5 * e**2`` where ``|e| <= delta``, else ``delta * (|e| - 0.5 * delta)``,
    for ``e = predictions - labels`` (``tf.losses.huber_loss``)."""
    labels, predictions = _pair("huber_loss", labels, predictions)
    err = _ops.abs(_ops.sub(predictions, labels))
    quad = _ops.minimum(err, float(delta))
    losses = _ops.add(_ops.mul(_ops.square(quad), 0.5), _ops.mul(_ops.sub(err, quad), float(delta)))
    return _weighted("huber_loss", losses, weights, loss_collection, reduction, scope)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None, loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``-labels * log(p + eps) - (1 - labels) * log(1 - p + eps)`` for
    probabilities ``p = predictions`` (``tf.losses.log_loss``)."""
    labels, predictions = _pair("log_loss", labels, predictions)
    eps = float(epsilon)
    losses = _ops.sub(_ops.neg(_ops.mul(labels, _ops.log(_ops.add(predictions, eps)))),
                      _ops.mul(_ops.sub(1.0, labels), _ops.log(_ops.add(_ops.sub(1.0, predictions), eps))))
    return _weighted("log_loss", losses, weights, loss_collection, reduction, scope)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``relu(1 - (2 * labels - 1) * logits)`` for labels in {0, 1} (``tf.losses.hinge_loss``)."""
    labels, logits = _pair("hinge_loss", labels, logits)
    signed = _ops.sub(_ops.mul(labels, 2.0), 1.0)
    losses = _ops.relu(_ops.sub(1.0, _ops.mul(signed, logits)))
    return _weighted("hinge_loss", losses, weights, loss_collection, reduction, scope)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Elementwise logistic losses of ``logits`` against labels in [0, 1]
    (``tf.losses.sigmoid_cross_entropy``); ``label_smoothing`` moves the
    labels toward 1/2: ``z * (1 - s) + s / 2``."""
    logits = _tensor(logits)
    labels = _tensor(multi_class_labels, logits.dtype)
    if label_smoothing > 0:
        labels = _ops.add(_ops.mul(labels, 1.0 - label_smoothing), 0.5 * label_smoothing)
    losses = _nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return _weighted("sigmoid_cross_entropy", losses, weights, loss_collection, reduction, scope)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Softmax cross-entropy of ``logits`` (batch, C) against one-hot (or
    dense) labels (batch, C), one loss per row, weighted by ``weights``
    (scalar or (batch,)) and reduced (``tf.losses.softmax_cross_entropy``);
    ``label_smoothing`` ``s``: labels ``* (1 - s) + s / C``. No gradient
    flows into the labels, as TF1's."""
    logits = _tensor(logits)
    labels = _tensor(onehot_labels, logits.dtype)
    if label_smoothing > 0:
        c = logits.shape[-1]
        if c is None:
            raise ValueError("softmax_cross_entropy: label_smoothing needs the number of classes (the last "
                             "dimension of logits) known while the graph is built")
        labels = _ops.add(_ops.mul(labels, 1.0 - label_smoothing), label_smoothing / c)
    losses = _nn.softmax_cross_entropy_with_logits_v2(labels=stop_gradient(labels), logits=logits)
    return _weighted("softmax_cross_entropy", losses, weights, loss_collection, reduction, scope)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Softmax cross-entropy of ``logits`` (..., C) against integer class
    ``labels`` (...), weighted by ``weights`` (a scalar or of ``labels``'
    shape) and reduced (``tf.losses.sparse_softmax_cross_entropy``). Labels
    (and weights) with a trailing dimension of 1 too many are squeezed, as
    TF1's."""
    logits = _tensor(logits)
    labels = _tensor(labels)
    if labels.ndim == logits.ndim and labels.shape[-1] == 1:
        labels = squeeze(labels, [-1])
    if not isinstance(weights, Value):
        weights = np.asarray(weights, np.float32)
    if weights.ndim == labels.ndim + 1 and weights.shape[-1] == 1:
        weights = squeeze(weights, [-1]) if isinstance(weights, Value) else weights[..., 0]
    losses = _nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return _weighted("sparse_softmax_cross_entropy", losses, weights, loss_collection, reduction, scope)


def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    """Add ``loss`` to ``loss_collection`` (``tf.losses.add_loss``; ``None``: nothing)."""
    if loss_collection is not None:
        get_default_graph().add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    """The losses in ``loss_collection`` (names matching ``scope``)."""
    return get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    """The ``REGULARIZATION_LOSSES`` collection (names matching ``scope``)."""
    return get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularization losses, or the constant 0.0 when there is none."""
    losses = get_regularization_losses(scope)
    if losses:
        return add_n(losses, name=name)
    return constant(0.0, name=name)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of :func:`get_losses` (and of the regularization losses),
    as ``tf.losses.get_total_loss``; ValueError when there is no loss."""
    losses = get_losses(scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        raise ValueError("get_total_loss: no losses: the LOSSES collection (and REGULARIZATION_LOSSES) is empty; "
                         "the tf.losses functions and tf.losses.add_loss fill it")
    return add_n(losses, name=name)
