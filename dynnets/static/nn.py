"""TF1's ``tf.nn`` names over dynnets ops (they work on symbolic and eager
values alike, through the shared primitive table), with ``rnn_cell``,
``dynamic_rnn`` and ``bidirectional_dynamic_rnn``.

The loss functions that TF1 makes keyword-only (``labels=``, ``logits=``)
are keyword-only here too: a positional call is an error, as in TF1, rather
than a silent swap of labels and logits.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..autograd import ops as _ops
from ..autograd.engine import bind as _bind
from ..autograd.primitives import conv1d_p as _conv1d_p
from ..autograd.primitives import conv2d_p as _conv2d_p
from ..autograd.primitives import dropout_mask_p as _dropout_mask_p
from ..autograd.primitives import make_rng as _make_rng
from ..autograd.primitives import top_k_p as _top_k_p
from . import rnn_cell
from .array_ops import scalar_probability as _scalar_probability
from .array_ops import one_hot as _one_hot
from .array_ops import reshape as _reshape
from .array_ops import shape as _shape
from .array_ops import stop_gradient as _stop_gradient
from .graph import Value as _Value
from .graph import is_symbolic as _is_symbolic
from .graph import named as _named
from .math_ops import as_graph_value as _as_graph_value
from .operands import convert_operand as _convert_operand
from .operands import is_tensor as _is_tensor
from .random import get_seed as _get_seed
from .random import random_uniform as _random_uniform
from .rnn import bidirectional_dynamic_rnn, dynamic_rnn
from .variable_scope import name_scope as _name_scope

__all__ = ["dropout", "softmax", "log_softmax", "sparse_softmax_cross_entropy_with_logits",
           "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
           "sigmoid_cross_entropy_with_logits", "tanh", "sigmoid", "relu", "leaky_relu", "elu", "top_k", "in_top_k",
           "moments", "embedding_lookup", "l2_loss", "bias_add", "xw_plus_b", "lstm_cell", "gru_cell", "rnn_cell",
           "dynamic_rnn", "bidirectional_dynamic_rnn"]

TopKV2 = namedtuple("TopKV2", ("values", "indices"))


def _named_only(op, sentinel):
    # TF1's _sentinel: the first positional parameter, so that a positional call fails
    if sentinel is not None:
        raise ValueError(f"Only call `{op}` with named arguments (labels=..., logits=..., ...)")


def _softmax_axis(op, axis, dim):
    # TF1's deprecated dim= is axis under its old name
    if dim is not None:
        if axis is not None:
            raise ValueError(f"{op}: cannot specify both 'axis' and 'dim'")
        axis = dim
    return -1 if axis is None else axis


def softmax(logits, axis=None, name=None, dim=None):
    """Softmax along ``axis`` (default the last; ``dim`` is TF1's deprecated name of it)."""
    return _named(_ops.softmax(_as_graph_value(logits), axis=_softmax_axis("softmax", axis, dim)), name)


def log_softmax(logits, axis=None, name=None, dim=None):
    """Log-softmax along ``axis`` (default the last; ``dim`` is TF1's deprecated name of it)."""
    return _named(_ops.log_softmax(_as_graph_value(logits), axis=_softmax_axis("log_softmax", axis, dim)), name)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Losses of ``logits`` (..., C) against integer ``labels`` (...), one
    per label, as TF1 (reduce them yourself); keyword arguments only. A label
    outside ``[0, C)`` is an error."""
    _named_only("sparse_softmax_cross_entropy_with_logits", _sentinel)
    if labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits: pass labels= and logits=")
    logits, labels = _as_graph_value(logits), _as_graph_value(labels)     # lists and arrays, as TF1
    nd = len(logits.shape)
    if len(labels.shape) != nd - 1:
        raise ValueError(f"sparse_softmax_cross_entropy_with_logits: labels must have rank {nd - 1} (the rank of "
                         f"logits minus 1), got labels shape {tuple(labels.shape)} and logits shape "
                         f"{tuple(logits.shape)}")
    if nd == 2:
        return _named(_ops.cross_entropy(logits, labels, reduction="none"), name)
    c = logits.shape[-1]
    flat = _ops.cross_entropy(_ops.reshape(logits, -1, c), _ops.reshape(labels, -1), reduction="none")
    return _named(_reshape(flat, _shape(labels)) if isinstance(labels, _Value) else _ops.reshape(flat, *labels.shape),
                  name)


def _dense_pair(op, labels, logits):
    """``labels`` and ``logits`` as graph values (lists and arrays become
    constants, as TF1's convert_to_tensor): labels in the logits' dtype."""
    logits = _as_graph_value(logits)
    if not _is_tensor(labels):
        labels = _convert_operand(op, "labels", labels, logits.dtype)
    return labels, logits


def _dense_xent(labels, logits, axis):
    return _ops.neg(_ops.sum(_ops.mul(labels, _ops.log_softmax(logits, axis=axis)), axis=axis))


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1, name=None, axis=None):
    """Losses against dense label distributions, ``-sum(labels *
    log_softmax(logits), axis)`` (TF1's deprecated v1): no gradient flows
    into ``labels`` (use ``softmax_cross_entropy_with_logits_v2`` for one);
    keyword arguments only."""
    _named_only("softmax_cross_entropy_with_logits", _sentinel)
    if labels is None or logits is None:
        raise ValueError("softmax_cross_entropy_with_logits: pass labels= and logits=")
    labels, logits = _dense_pair("softmax_cross_entropy_with_logits", labels, logits)
    return _named(_dense_xent(_stop_gradient(labels), logits, dim if axis is None else axis), name)


def softmax_cross_entropy_with_logits_v2(labels, logits, axis=None, name=None, dim=None):
    """Losses against dense label distributions, ``-sum(labels *
    log_softmax(logits), axis)`` (``axis`` default -1); the gradient flows into
    ``labels`` too, unlike v1."""
    if axis is not None and dim is not None:
        raise ValueError("softmax_cross_entropy_with_logits_v2: cannot specify both 'axis' and 'dim'")
    ax = axis if axis is not None else dim if dim is not None else -1
    labels, logits = _dense_pair("softmax_cross_entropy_with_logits_v2", labels, logits)
    return _named(_dense_xent(labels, logits, ax), name)


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Elementwise logistic losses ``max(x, 0) - x * z + log(1 + exp(-|x|))``
    of logits ``x`` against labels ``z`` of the same shape (TF1's stable
    form); keyword arguments only."""
    _named_only("sigmoid_cross_entropy_with_logits", _sentinel)
    if labels is None or logits is None:
        raise ValueError("sigmoid_cross_entropy_with_logits: pass labels= and logits=")
    ls = tuple(np.shape(labels)) if not hasattr(labels, "shape") else tuple(labels.shape)
    if len(ls) != len(logits.shape) or any(a is not None and b is not None and a != b
                                           for a, b in zip(ls, logits.shape)):
        raise ValueError(f"sigmoid_cross_entropy_with_logits: logits and labels must have the same shape "
                         f"({tuple(logits.shape)} vs {ls})")
    x = logits
    return _named(_ops.add(_ops.sub(_ops.relu(x), _ops.mul(x, labels)),
                           _ops.log(_ops.add(_ops.exp(_ops.neg(_ops.abs(x))), 1.0))), name)


def _float_features(op, x):
    if not hasattr(x, "dtype"):
        x = np.asarray(x)
    if x.dtype.kind in "iu":
        return _ops.astype(x, np.float32)          # TF1 casts integer features to float32
    return x


def leaky_relu(features, alpha=0.2, name=None):
    """``features`` where positive, ``alpha * features`` elsewhere
    (``tf.nn.leaky_relu``; the gradient at 0 is ``alpha``, as TF1's)."""
    x = _float_features("leaky_relu", features)
    return _named(_ops.where(_ops.greater(x, 0), x, _ops.mul(x, float(alpha))), name)


def elu(features, name=None):
    """``features`` where positive, ``exp(features) - 1`` elsewhere (``tf.nn.elu``)."""
    x = features
    pos = _ops.greater(x, 0)
    # exp of the non-positive part only: exp(large x) would overflow and its
    # zero-weighted gradient would still be inf * 0 = NaN
    neg = _ops.sub(_ops.exp(_ops.where(pos, 0.0, x)), 1.0)
    return _named(_ops.where(pos, x, neg), name)


def top_k(input, k=1, sorted=True, name=None):
    """The ``k`` largest entries along the last axis and their int32 indices,
    largest first (``tf.nn.top_k``; equal entries: the lower index first).
    The gradient flows to the selected entries."""
    if isinstance(k, _Value):
        raise TypeError(f"top_k: k must be an int known when the graph is built, got the Value '{k.name}'")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"top_k: k must be an int, got {k!r}")
    values, indices = _bind(_top_k_p, input, k=int(k))
    return TopKV2(values, indices)


def in_top_k(predictions, targets, k, name=None):
    """Whether ``predictions[i, targets[i]]`` is among the ``k`` largest of
    row ``i`` (``tf.nn.in_top_k``): entries equal to it all count as in the
    top k, a target out of range or a non-finite prediction gives False."""
    if len(predictions.shape) != 2:
        raise ValueError(f"in_top_k: predictions must be 2-D (batch, classes), got shape {tuple(predictions.shape)}")
    if not hasattr(targets, "dtype"):
        targets = np.asarray(targets)
    if len(targets.shape) != 1 or targets.dtype.kind not in "iu":
        raise ValueError(f"in_top_k: targets must be a 1-D integer vector, got shape {tuple(targets.shape)}")
    n_classes = predictions.shape[1]
    if n_classes is None:
        raise ValueError("in_top_k: the number of classes (predictions.shape[1]) must be known")
    hot = _one_hot(targets, n_classes, on_value=True, off_value=False, dtype=np.bool_)
    # the target's prediction (0 for a target out of range, which is then refused below)
    target = _ops.sum(_ops.where(hot, predictions, 0.0), axis=1, keepdims=True)
    above = _ops.sum(_ops.astype(_ops.greater(predictions, target), np.int64), axis=1)
    valid = _ops.greater(_ops.sum(_ops.astype(hot, np.int64), axis=1), 0)
    # numpy's product of booleans is their conjunction
    return _named(_ops.mul(_ops.mul(_ops.less(above, int(k)), valid), _all_finite(predictions)), name)


def _all_finite(x):
    # x - x is 0 for finite x and NaN for inf or NaN; NaN != NaN
    d = _ops.sub(x, x)
    bad = _ops.sum(_ops.astype(_ops.not_equal(d, d), np.int64), axis=1)
    return _ops.eq(bad, 0)


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """``(mean, variance)`` of ``x`` over ``axes`` (``tf.nn.moments``): the
    variance is ``mean((x - stop_gradient(mean))^2)``, as TF1 computes it
    (``shift`` is accepted and unused, as in TF1)."""
    if keep_dims is not None:
        keepdims = keep_dims
    axes = tuple(axes) if isinstance(axes, (list, tuple)) else (axes,)
    mean = _ops.mean(x, axis=axes, keepdims=True)
    d = _ops.sub(x, _stop_gradient(mean))
    var = _ops.mean(_ops.mul(d, d), axis=axes, keepdims=True)
    if not keepdims:
        reduced = {a % len(x.shape) for a in axes}
        drop = tuple(0 if k in reduced else slice(None) for k in range(len(x.shape)))
        mean, var = _ops.getitem(mean, drop), _ops.getitem(var, drop)
    return mean, var


def tanh(x, name=None):
    return _named(_ops.tanh(x), name)


def sigmoid(x, name=None):
    return _named(_ops.sigmoid(x), name)


def relu(x, name=None):
    return _named(_ops.relu(x), name)


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None):
    """Rows of ``params`` (V, D) for integer ``ids`` of any shape (result
    ``ids.shape + (D,)``); its gradient is row-sparse. ``params`` may be a
    list of one table (partitioned tables are not supported)."""
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise ValueError(f"embedding_lookup: only one table is supported (no partitioning), got {len(params)}")
        params = params[0]
    if max_norm is not None:
        raise ValueError("embedding_lookup: max_norm is not supported")
    return _named(_ops.embedding(params, ids), name)


def l2_loss(t, name=None):
    """``sum(t**2) / 2``."""
    return _named(_ops.mul(_ops.sum(_ops.mul(t, t)), 0.5), name)


def bias_add(value, bias, data_format=None, name=None):
    """``value + bias`` with ``bias`` (C,) added along the last dimension, or
    along dimension 1 with ``data_format="NCHW"`` (``tf.nn.bias_add``)."""
    if len(bias.shape) != 1:
        raise ValueError(f"bias_add: bias must be 1-D, got shape {tuple(bias.shape)}")
    nd = len(value.shape)
    if nd < 2:
        raise ValueError(f"bias_add: value must have at least 2 dimensions, got shape {tuple(value.shape)}")
    if data_format is not None and data_format.startswith("NC"):
        axis = 1
        bias = _ops.reshape(bias, *((-1,) + (1,) * (nd - 2)))
    elif data_format in (None, "NHWC", "NWC", "NDHWC", "N...C"):
        axis = nd - 1
    else:
        raise ValueError(f"bias_add: data_format must be NHWC-like or NCHW-like, got {data_format!r}")
    c, b = value.shape[axis], bias.shape[0]
    if c is not None and b is not None and c != b:
        raise ValueError(f"bias_add: bias has {b} entries, value's dimension {axis} has {c} "
                         f"(value shape {tuple(value.shape)})")
    return _named(_ops.add(value, bias), name)


def xw_plus_b(x, weights, biases, name=None):
    """``x @ weights + biases`` (TF's layout: weights is (in, out))."""
    return _named(_ops.add(_ops.matmul(x, weights), biases), name)


lstm_cell = _ops.lstm_cell
gru_cell = _ops.gru_cell


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Inverted dropout (as ``tf.nn.dropout``): each element is zeroed with
    probability ``rate = 1 - keep_prob`` and the others scaled by
    ``1 / keep_prob``, with **a new mask at every** ``Session.run``
    (gradients use that run's mask). ``seed`` as
    :func:`dynnets.static.random_normal`'s.

    ``keep_prob`` (or ``rate``) may be a scalar Value, usually a placeholder
    fed 0.5 while training and 1.0 to evaluate (TF1's idiom; a placeholder
    made without a shape is checked to be fed a scalar): the mask is then
    TF1's ``random_uniform(shape(x)) >= rate`` and the result
    ``x * (1 / (1 - rate)) * mask``, so a fed 1.0 gives ``x`` exactly. A fed
    value outside (0, 1] is not checked (as TF1)."""
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout: pass exactly one of keep_prob= and rate=")
    if noise_shape is not None:
        raise ValueError("dropout: noise_shape is not supported (the mask has the shape of x)")
    if isinstance(keep_prob, _Value) or isinstance(rate, _Value):
        return _fed_dropout(x, keep_prob, rate, seed, name)
    if rate is None:
        if isinstance(keep_prob, bool) or not isinstance(keep_prob, (int, float, np.floating)) \
                or not 0 < keep_prob <= 1:
            raise ValueError(f"dropout: keep_prob must be a scalar in (0, 1], got {keep_prob!r}")
        rate = 1.0 - float(keep_prob)
    elif isinstance(rate, bool) or not isinstance(rate, (int, float, np.floating)) or not 0 <= rate < 1:
        raise ValueError(f"dropout: rate must be a scalar in [0, 1), got {rate!r}")
    if rate == 0:
        return x if name is None else _named(_ops.mul(x, 1.0), name)
    if not _is_symbolic(x):
        return _ops.dropout(x, float(rate), _make_rng(_get_seed(seed)))
    with x.graph.as_default(), _name_scope(name or "dropout"):
        mask = _bind(_dropout_mask_p, x, rate=float(rate), seed=_get_seed(seed, x.graph))
        return _ops.mul(x, mask)


def _fed_dropout(x, keep_prob, rate, seed, name):
    if not _is_symbolic(x):
        raise TypeError(f"dropout: a {'keep_prob' if rate is None else 'rate'} Value needs x of a static graph, got "
                        f"{type(x).__name__}")
    dt = x.dtype
    with x.graph.as_default(), _name_scope(name or "dropout"):
        if rate is None:
            rate = _ops.sub(1.0, _scalar_probability("dropout", "keep_prob", keep_prob, dt))
        elif isinstance(rate, _Value):
            rate = _scalar_probability("dropout", "rate", rate, dt)
        else:
            rate = np.asarray(rate, dt)
        # TF1's dropout_v2: keep where a uniform draw >= rate, scale by 1 / (1 - rate)
        u = _random_uniform(_shape(x), dtype=dt, seed=seed)
        keep = _ops.astype(_ops.greater_equal(u, rate), dt)
        return _ops.mul(_ops.mul(x, _ops.div(1.0, _ops.sub(1.0, rate))), keep)


# --- i22-tf1-gaps: l2_normalize, relu6 --------------------------------------------------------------

def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """``x / sqrt(max(sum(x**2, axis), epsilon))`` (``tf.nn.l2_normalize``;
    ``axis=None`` normalises over every element; ``dim`` is TF1's old name of
    ``axis``)."""
    if dim is not None:
        if axis is not None:
            raise ValueError("l2_normalize: cannot specify both 'axis' and 'dim'")
        axis = dim
    axis = tuple(axis) if isinstance(axis, list) else axis
    x = _as_graph_value(x)
    sq = _ops.sum(_ops.square(x), axis=axis, keepdims=True)
    return _named(_ops.div(x, _ops.sqrt(_ops.maximum(sq, float(epsilon)))), name)


def relu6(features, name=None):
    """``min(max(features, 0), 6)`` (``tf.nn.relu6``)."""
    return _named(_ops.minimum(_ops.relu(_as_graph_value(features)), 6.0), name)


__all__ += ["l2_normalize", "relu6"]


# --- issue 25: conv1d (TF1's NWC layout and SAME / VALID padding) ----------------------------------------

def tf_same_padding(op, length, k, stride, dilation):
    """(left, right) of TF's 'SAME' padding: output ceil(length / stride),
    the extra element on the right. Needs the length unless stride is 1."""
    span = dilation * (k - 1) + 1
    if stride == 1:
        total = span - 1
    elif length is None:
        raise ValueError(f"{op}: padding='SAME' with stride {stride} needs a known input width (the padding "
                         f"depends on it), got an unknown one")
    else:
        out = -(-length // stride)
        total = max((out - 1) * stride + span - length, 0)
    return total // 2, total - total // 2


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None, data_format=None, name=None,
           input=None, dilations=None):
    """1-D convolution, as ``tf.nn.conv1d``: ``value`` (N, W, C_in) ('NWC',
    the default; 'NCW': (N, C_in, W)), ``filters`` (K, C_in, C_out), an
    integer ``stride``, ``padding`` 'SAME' or 'VALID', ``dilations`` an
    integer (default 1). Returns (N, W_out, C_out) ('NCW': (N, C_out, W_out)).
    The ``conv1d`` primitive of ``torch.nn.functional.conv1d``."""
    op = "conv1d"
    if value is not None and input is not None:
        raise ValueError(f"{op}: pass value= or input=, not both")
    x = _as_graph_value(value if value is not None else input)
    if filters is None or stride is None or padding is None:
        raise TypeError(f"{op}: filters, stride and padding are required (TF1's signature conv1d(value, filters, "
                        f"stride, padding))")
    fmt = data_format or "NWC"
    if fmt not in ("NWC", "NCW"):
        raise ValueError(f"{op}: data_format must be 'NWC' or 'NCW', got {data_format!r}")

    def one(what, v):
        if isinstance(v, (list, tuple)):
            vals = [int(s) for s in v]
            if len(vals) != 3 or vals[0] != 1 or vals[-1] != 1:
                if len(vals) != 1:
                    raise ValueError(f"{op}: {what} must be an int, or [1, s, 1], got {v!r}")
                return vals[0]
            return vals[1]
        return int(v)
    stride = one("stride", stride)
    dil = 1 if dilations is None else one("dilations", dilations)
    if stride < 1 or dil < 1:
        raise ValueError(f"{op}: stride and dilations must be positive, got stride={stride}, dilations={dil}")
    fshape = tuple(filters.shape)
    if len(fshape) != 3 or fshape[0] is None:
        raise ValueError(f"{op}: filters must be 3-D (width, in_channels, out_channels) of known width, got shape "
                         f"{fshape}")
    xs = tuple(x.shape)
    if len(xs) != 3:
        raise ValueError(f"{op}: value must be 3-D ({'N, W, C' if fmt == 'NWC' else 'N, C, W'}), got shape {xs}")
    c = xs[2] if fmt == "NWC" else xs[1]
    if c is not None and fshape[1] is not None and c != fshape[1]:
        raise ValueError(f"{op}: the input's channels {c} (value shape {xs}, {fmt}) do not match filters.shape[1]="
                         f"{fshape[1]} (filters shape {fshape}, (width, in_channels, out_channels))")
    pad_name = padding.upper() if isinstance(padding, str) else padding
    if pad_name == "VALID":
        pads = (0, 0)
    elif pad_name == "SAME":
        pads = tf_same_padding(op, xs[1] if fmt == "NWC" else xs[2], fshape[0], stride, dil)
    else:
        raise ValueError(f"{op}: padding must be 'SAME' or 'VALID', got {padding!r}")
    with _name_scope(name or "conv1d"):
        xt = _ops.transpose(x, 0, 2, 1) if fmt == "NWC" else x
        w = _ops.transpose(filters, 2, 1, 0)
        out = _bind(_conv1d_p, xt, w, stride=stride, padding=pads, dilation=dil)
        return _ops.transpose(out, 0, 2, 1) if fmt == "NWC" else out


__all__ += ["conv1d"]


def conv2d(input=None, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True, data_format="NHWC",
           dilations=None, name=None, filters=None):
    """2-D convolution, as ``tf.nn.conv2d``: ``input`` (N, H, W, C_in)
    ('NHWC'; 'NCHW': (N, C_in, H, W)), ``filter`` (KH, KW, C_in, C_out),
    ``strides`` an int or [1, sh, sw, 1], ``padding`` 'SAME' (output
    ceil(size / stride), the extra row/column at the end) or 'VALID',
    ``dilations`` an int or [1, dh, dw, 1]. The ``conv2d`` primitive of
    ``torch.nn.functional.conv2d``."""
    op = "conv2d"
    if filter is not None and filters is not None:
        raise ValueError(f"{op}: pass filter= or filters=, not both")
    w = filter if filter is not None else filters
    x = _as_graph_value(input)
    if w is None or strides is None or padding is None:
        raise TypeError(f"{op}: input, filter, strides and padding are required")
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"{op}: data_format must be 'NHWC' or 'NCHW', got {data_format!r}")

    def hw(what, v):
        if v is None:
            return 1, 1
        vals = [int(a) for a in v] if isinstance(v, (list, tuple)) else [int(v)]
        if len(vals) == 1:
            return vals[0], vals[0]
        if len(vals) == 2:
            return tuple(vals)
        if len(vals) == 4:
            return (vals[1], vals[2]) if data_format == "NHWC" else (vals[2], vals[3])
        raise ValueError(f"{op}: {what} must be an int or a list of 1, 2 or 4 ints, got {v!r}")
    st, dil = hw("strides", strides), hw("dilations", dilations)
    if min(st + dil) < 1:
        raise ValueError(f"{op}: strides and dilations must be positive, got {strides!r}, {dilations!r}")
    fshape, xs = tuple(w.shape), tuple(x.shape)
    if len(fshape) != 4 or None in fshape[:2]:
        raise ValueError(f"{op}: filter must be 4-D (height, width, in_channels, out_channels) of known height and "
                         f"width, got shape {fshape}")
    if len(xs) != 4:
        raise ValueError(f"{op}: input must be 4-D ({'N, H, W, C' if data_format == 'NHWC' else 'N, C, H, W'}), got "
                         f"shape {xs}")
    spatial = xs[1:3] if data_format == "NHWC" else xs[2:4]
    c = xs[3] if data_format == "NHWC" else xs[1]
    if c is not None and fshape[2] is not None and c != fshape[2]:
        raise ValueError(f"{op}: the input's channels {c} (input shape {xs}, {data_format}) do not match "
                         f"filter.shape[2]={fshape[2]} (filter shape {fshape})")
    pad_name = padding.upper() if isinstance(padding, str) else padding
    if pad_name == "VALID":
        pads = ((0, 0), (0, 0))
    elif pad_name == "SAME":
        pads = tuple(tf_same_padding(op, spatial[a], fshape[a], st[a], dil[a]) for a in (0, 1))
    else:
        raise ValueError(f"{op}: padding must be 'SAME' or 'VALID', got {padding!r}")
    with _name_scope(name or "Conv2D"):
        xt = _ops.transpose(x, 0, 3, 1, 2) if data_format == "NHWC" else x
        out = _bind(_conv2d_p, xt, _ops.transpose(w, 3, 2, 0, 1), stride=st, padding=pads, dilation=dil)
        return _ops.transpose(out, 0, 2, 3, 1) if data_format == "NHWC" else out


__all__ += ["conv2d"]
