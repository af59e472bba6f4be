"""Stateless ops under PyTorch's ``torch.nn.functional`` names, each with
torch's positional order and keyword names (checked against torch's
signatures in ``tests/parity/test_torch_nn_signatures.py``): a positional
argument in torch's position means torch's thing, and a torch argument not
supported here raises an error that names it. Every one goes through the
primitive table (via :mod:`dynnets.autograd.ops`); the losses come from
:mod:`dynnets.nn.loss`; the packed recurrences ``nn.RNN`` / ``GRU`` / ``LSTM``
run on (``lstm_seq``, ``gru_seq``, ``rnn_seq``) and the fused cells are
dynnets' own.

Randomness: :func:`dropout` draws from ``generator=`` (a
``numpy.random.Generator`` or a seed; keyword-only, as torch's generators are
not positional) or, by default, from the default generator that
:func:`dynnets.manual_seed` seeds.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..autograd import ops
from ..autograd.ops import gru_cell, gru_seq, lstm_cell, lstm_seq, rnn_seq, tree_lstm_cell, tree_lstm_leaf
from ..autograd.ops import gelu, normalize, pad
from ..autograd import primitives as P
from ..autograd.backprop import write_inplace
from ..autograd.tensor import Tensor, wrap_array
from ..autograd.tensor import tensor_like
from ..autograd.values import as_operand, concrete, is_interpreted
from ..random import generator as _generator
from .loss import binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, kl_div, mse_loss, nll_loss
from .module import check_float_input

__all__ = ["linear", "embedding", "dropout", "relu", "tanh", "sigmoid", "softmax", "log_softmax",
           "cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "lstm_cell", "gru_cell", "tree_lstm_cell", "tree_lstm_leaf", "lstm_seq", "gru_seq", "rnn_seq",
           "gelu", "leaky_relu", "pad", "normalize", "relu_", "leaky_relu_", "kl_div"]


def _inplace_target(who, input):
    """``input`` when an in-place op can write into it (an eager Tensor, as
    torch's ``inplace=True``), else a TypeError: a static-graph value is
    immutable, and returning a new value would leave the input unchanged,
    which torch code that reads it afterwards would not expect. (A tensor
    recorded under ``dynnets.autobatch()`` raises in the write itself.)"""
    if isinstance(input, Tensor):
        return input
    if is_interpreted(input):
        raise TypeError(f"{who}: inplace=True on a static-graph value, which is immutable (TF1's tensors are): pass "
                        f"inplace=False (nn modules: inplace=False) and use the result")
    raise TypeError(f"{who}: inplace=True writes into the input, which must be a dynnets Tensor, got "
                    f"{type(input).__name__}")


def _write_mul(dst, o):
    np.multiply(dst, o, out=dst, casting="unsafe")


def _write_leaky(dst, negative_slope=0.01):
    np.copyto(dst, np.where(dst > 0, dst, dst * negative_slope), casting="unsafe")


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (as ``torch.nn.functional.linear``).

    Parameters
    ----------
    input : (..., in_features)
    weight : (out_features, in_features)
    bias : (out_features,) or None

    Notes
    -----
    Returns (..., out_features). The input's (and bias's) dtype must be the
    weight's (:class:`~dynnets.autograd.primitives.DTypeError` otherwise, as
    torch raises; :func:`dynnets.linear` promotes as numpy does).
    """
    input = check_float_input("linear", input, weight, "input", "weight has")
    if bias is not None:
        check_float_input("linear", bias, weight, "bias", "weight has")
    return ops.linear(input, weight, bias)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` for the integer ids ``input`` (as
    ``torch.nn.functional.embedding``, arguments in its order: ids first).

    Parameters
    ----------
    input : integer array (...)
        Ids in ``[0, num_embeddings)``.
    weight : (num_embeddings, embedding_dim)
    padding_idx : int or None
        Lookups of this row give its value but pass it no gradient (eager ids;
        negative values count from the end).
    max_norm : float or None
        Before the lookup, each looked-up row whose ``norm_type``-norm exceeds
        ``max_norm`` is rescaled in place to norm ``max_norm`` (torch's
        ``embedding_renorm_``; eager only).
    norm_type : float, default 2
    scale_grad_by_freq : bool
        Not supported (True raises).
    sparse : bool
        Accepted for torch's sake: the gradient is always row-sparse inside
        (optimizers update only the rows looked up) and ``weight.grad`` is
        the dense array, so both values give the same numbers.

    Returns (..., embedding_dim).
    """
    who = "embedding"
    if scale_grad_by_freq:
        raise ValueError(f"{who}: scale_grad_by_freq=True is not supported")
    if not isinstance(sparse, (bool, np.bool_)):
        raise TypeError(f"{who}: sparse must be a bool, got {sparse!r} (the arguments are torch's: "
                        f"embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse))")
    ids = as_operand(input)
    if np.dtype(ids.dtype).kind not in "iu":
        raise TypeError(f"{who}: input must hold integer ids (torch's order is embedding(input, weight)), "
                        f"got dtype {ids.dtype}")
    n = weight.shape[0]
    if padding_idx is not None:
        if isinstance(padding_idx, (bool, np.bool_)) or not isinstance(padding_idx, (int, np.integer)) \
                or not -n <= padding_idx < n:
            raise ValueError(f"{who}: padding_idx must be an integer in [-{n}, {n}), got {padding_idx!r}")
        padding_idx = int(padding_idx) % n
    if max_norm is not None:
        _renorm(who, weight, ids, float(max_norm), float(norm_type))
    out = ops.embedding(weight, ids)
    if padding_idx is None or (isinstance(out, Tensor) and not out.requires_grad):
        return out
    iv = concrete(ids)
    if iv is not None and not (iv == padding_idx).any():
        return out              # no padding id among ids known now: nothing to mask
    # where() passes the gradient only to non-padding positions; the padding
    # row's value enters as a constant, so forward values are unchanged
    is_pad = ops.unsqueeze(ops.eq(ids, np.asarray(padding_idx, dtype=np.int64)), -1)
    return ops.where(is_pad, _constant(ops.getitem(weight, padding_idx)), out)


def _renorm(who, weight, ids, max_norm, norm_type):
    """torch's ``embedding_renorm_``: rows looked up with a norm above
    ``max_norm`` scaled to ``max_norm / (norm + 1e-7)`` of themselves, in place."""
    w = weight.numpy() if isinstance(weight, Tensor) else weight
    ids = concrete(ids)
    if ids is None or type(w) is not np.ndarray:
        raise ValueError(f"{who}: max_norm rescales the weight's rows in place, which needs eager ids and an eager "
                         f"weight array")
    rows = np.unique(ids.reshape(-1))
    if not rows.size:
        return
    if rows[0] < 0 or rows[-1] >= w.shape[0]:
        bad = rows[0] if rows[0] < 0 else rows[-1]
        raise IndexError(f"{who}: id {bad} is out of range for {w.shape[0]} embeddings")
    block = w[rows]
    norms = np.linalg.norm(block, ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        w[rows[big]] = block[big] * (max_norm / (norms[big] + 1e-7))[:, None].astype(w.dtype)


def dropout(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Inverted dropout (as ``torch.nn.functional.dropout``): in training mode
    each element is zeroed with probability ``p`` and the rest scaled by
    1/(1-p); otherwise the input is returned.

    Parameters
    ----------
    input : Tensor (any shape)
    p : float in [0, 1], default 0.5
    training : bool, default True
        Pass the module's ``self.training`` (as in torch; a non-bool raises).
    inplace : bool
        As torch: the mask is applied to ``input`` itself, which is returned
        (an eager Tensor; a leaf that requires grad raises outside ``no_grad``).
    generator : numpy Generator, seed or None (keyword-only)
        Draws the mask; None: the default generator (:func:`dynnets.manual_seed`),
        so every call draws a new mask.
    """
    who = "dropout"
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)) \
            or not 0.0 <= p <= 1.0:
        raise ValueError(f"{who}: dropout probability has to be between 0 and 1, but got {p!r}")
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"{who}: training must be a bool (torch's order is dropout(input, p, training, "
                        f"inplace)), got {type(training).__name__} {training!r}; pass a generator or seed as "
                        f"generator=")
    if inplace:
        _inplace_target(who, input)
    if not training or p == 0:
        return input
    if inplace:
        dt = np.dtype(input.dtype)
        mask = np.zeros((), dtype=dt) if p == 1 else \
            P.draw_dropout_mask(_generator(generator), tuple(input.shape), dt, float(p))
        return write_inplace("dropout_", input, P.mul_p, (mask,), {}, _write_mul)
    if p == 1:
        dt = input.dtype
        return ops.mul(input, np.zeros((), dtype=dt))
    return ops.dropout(input, float(p), _generator(generator), training=True)


def relu(input, inplace=False):
    """max(input, 0) elementwise (as ``torch.nn.functional.relu``). With
    ``inplace=True`` the result is written into ``input``, which is returned
    (:meth:`Tensor.relu_ <dynnets.Tensor.relu_>`): as torch, a leaf that
    requires grad raises outside ``no_grad``, and a value that a recorded op
    still needs for its gradient raises at ``backward()``."""
    if inplace:
        return _inplace_target("relu", input).relu_()
    return ops.relu(input)


def relu_(input):
    """``relu(input, inplace=True)``, as ``torch.nn.functional.relu_``."""
    return _inplace_target("relu_", input).relu_()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, else ``negative_slope * input``, as
    ``torch.nn.functional.leaky_relu`` (default slope 0.01); ``inplace=True``
    writes into ``input`` and returns it, as :func:`relu`."""
    if inplace:
        return leaky_relu_(input, negative_slope)
    return ops.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    """:func:`leaky_relu` in place, as ``torch.nn.functional.leaky_relu_``."""
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float, np.integer, np.floating)):
        raise TypeError(f"leaky_relu_: negative_slope must be a number, got {negative_slope!r}")
    attrs = {"negative_slope": float(negative_slope)}
    return write_inplace("leaky_relu_", _inplace_target("leaky_relu_", input), P.leaky_relu_p, (), attrs,
                         _write_leaky)


def tanh(input):
    """tanh elementwise (as ``torch.nn.functional.tanh``)."""
    return ops.tanh(input)


def sigmoid(input):
    """1 / (1 + exp(-input)) elementwise (as ``torch.nn.functional.sigmoid``)."""
    return ops.sigmoid(input)


def _cast(who, input, dtype):
    if dtype is None:
        return input
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{who}: dtype must be a floating-point type, got {dt}")
    return input if input.dtype == dt else ops.astype(input, dt)


def _softmax_dim(who, input, dim, axis):
    """``dim`` (or ``axis``); without either, torch's implicit choice (0 for
    0-, 1- and 3-d inputs, else 1) with torch's warning, so a habit carried
    over gives torch's result."""
    if dim is not None or axis is not None:
        return dim, axis
    nd = len(input.shape)
    implicit = 0 if nd in (0, 1, 3) else 1
    warnings.warn(f"{who}: implicit dimension choice has been deprecated (as in torch); pass dim= "
                  f"(dim={implicit} was chosen for a {nd}-d input)", UserWarning, stacklevel=3)
    return implicit, None


def softmax(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    """Softmax along ``dim`` (as ``torch.nn.functional.softmax``; ``axis=`` is
    the numpy spelling). ``dtype`` casts the input first. Without ``dim``,
    torch's deprecated implicit choice and warning (dim 0 for a 3-d input:
    :func:`dynnets.softmax` takes the last axis instead)."""
    dim, axis = _softmax_dim("softmax", input, dim, axis)
    return ops.softmax(_cast("softmax", input, dtype), dim, axis=axis)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    """Log-softmax along ``dim`` (as ``torch.nn.functional.log_softmax``;
    ``axis=`` is the numpy spelling). ``dtype`` casts the input first; no
    ``dim`` as :func:`softmax`."""
    dim, axis = _softmax_dim("log_softmax", input, dim, axis)
    return ops.log_softmax(_cast("log_softmax", input, dtype), dim, axis=axis)


def one_hot(tensor, num_classes=-1):
    """``tensor`` (int64 class indices, any shape) as one-hot rows: shape
    ``tensor.shape + (num_classes,)``, int64, as ``torch.nn.functional.one_hot``;
    ``num_classes=-1`` takes ``tensor.max() + 1``. Values must lie in
    ``[0, num_classes)``. No gradient (an integer result)."""
    arr = tensor.numpy() if isinstance(tensor, Tensor) else None
    if arr is None:
        raise TypeError(f"one_hot: tensor must be a Tensor of int64 class indices, got {type(tensor).__name__}")
    if arr.dtype != np.int64:
        raise P.DTypeError(f"one_hot: one_hot is only applicable to index tensor of type LongTensor (int64), got "
                           f"dtype {arr.dtype}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise TypeError(f"one_hot: num_classes must be an integer, got {num_classes!r}")
    if num_classes == -1:
        if arr.size == 0:
            raise P.ShapeError("one_hot: can not infer total number of classes from empty tensor (pass num_classes)")
        num_classes = int(arr.max()) + 1
    elif num_classes < -1:
        raise P.ShapeError(f"one_hot: num_classes must be -1 or non-negative, got {num_classes}")
    if arr.size:
        if arr.min() < 0:
            raise P.IndexRangeError(f"one_hot: class values must be non-negative, got {int(arr.min())}")
        if arr.max() >= num_classes:
            raise P.IndexRangeError(f"one_hot: class values must be smaller than num_classes={num_classes}, got "
                                    f"{int(arr.max())}")
    return ops.astype(ops.eq(ops.unsqueeze(tensor, -1), np.arange(num_classes, dtype=np.int64)), np.int64)


__all__ += ["one_hot"]

# torch.nn.functional imports torch, and scripts call through it (``F.torch.cat``):
# the same here, dynnets itself (not in __all__)
import dynnets as torch  # noqa: E402


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the trailing ``normalized_shape`` dimensions,
    as ``torch.nn.functional.layer_norm`` (Ba et al. 2016, eq. 4):
    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased
    variance.

    One primitive (``layer_norm_p``, the affine transform fused in): its
    VJP forms the three gradients in one pass instead of a chain of eight
    recorded ops (see ``benchmarks/bench_layers.py``).

    Parameters
    ----------
    input : Tensor or static Value, shape ``(..., *normalized_shape)``
    normalized_shape : int or sequence of int
    weight, bias : shape normalized_shape, or None
    eps : float

    Returns
    -------
    shape of ``input``
    """
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(int(d) for d in normalized_shape)
    shape = tuple(input.shape)
    if len(ns) == 0 or len(shape) < len(ns) or (None not in shape and shape[len(shape) - len(ns):] != ns):
        raise ValueError(f"layer_norm: normalized_shape={ns} must be the trailing dimensions of input.shape="
                         f"{shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != ns:
            raise ValueError(f"layer_norm: {name}.shape={tuple(p.shape)} does not match normalized_shape={ns}")
    args = (input,)
    if weight is not None or bias is not None:
        # a bias without a weight scales by a constant 1 (its gradient is formed and dropped)
        args += (weight if weight is not None else np.ones(ns, dtype=np.dtype(input.dtype)),)
    if bias is not None:
        args += (bias,)
    return ops.bind(P.layer_norm_p, *args, ndim=len(ns), eps=float(eps))


__all__ += ["layer_norm"]


# --- activations, similarities (branch i22-torch-b) --------------------------------

from ..autograd.engine import bind  # noqa: E402

def _inplace_result(who, input, out, inplace):
    """``out``, or with ``inplace`` ``out`` written into ``input`` (returned),
    as torch's ``inplace=True``. The write is recorded as ``copy_``: where
    ``out``'s gradient needs ``input``'s old values, backward raises naming
    it, as torch does for an in-place write over a saved tensor."""
    if not inplace:
        return out
    return _inplace_target(who, input).copy_(out)


def _float_arg(who, x, what="input"):
    """``x`` as a tensor (an array-like becomes one) after checking it is
    floating-point: torch's activations refuse integers ("not implemented
    for 'Long'")."""
    x = tensor_like(x)
    if x.dtype.kind != "f":
        raise TypeError(f"{who}: expected a floating-point {what}, got dtype {x.dtype}")
    return x


def _number_arg(who, name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{who}: {name} must be a number, got {v!r}")
    return float(v)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * input)) / beta``, and ``input`` itself where
    ``beta * input > threshold``, as ``torch.nn.functional.softplus``.

    Shapes: any -> the same.
    """
    beta = _number_arg("softplus", "beta", beta)
    threshold = _number_arg("softplus", "threshold", threshold)
    x = _float_arg("softplus", input)
    z = ops.mul(x, beta) if beta != 1 else x
    # the log1p branch sees z clamped to the threshold, so neither exp
    # overflows nor the untaken branch's gradient is inf * 0 = nan
    soft = ops.log1p(ops.exp(ops.clamp(z, max=threshold)))
    if beta != 1:
        soft = ops.div(soft, beta)
    return ops.where(ops.gt(z, threshold), x, soft)


def logsigmoid(input):
    """``log(sigmoid(input))`` = ``-softplus(-input)``, stable for large ``|input|``
    (as ``torch.nn.functional.logsigmoid``; its gradient is ``sigmoid(-input)``,
    also at 0, where a ``min(x, 0)`` formulation would give a one-sided 1)."""
    x = _float_arg("logsigmoid", input)
    return ops.neg(softplus(ops.neg(x)))


def _elu(x, alpha, scale=1.0):
    neg = ops.mul(ops.expm1(ops.clamp(x, max=0.0)), alpha)
    out = ops.where(ops.gt(x, 0), x, neg)
    return out if scale == 1.0 else ops.mul(out, scale)


def elu(input, alpha=1.0, inplace=False):
    """``input`` where positive, else ``alpha * (exp(input) - 1)``, as
    ``torch.nn.functional.elu`` (Clevert et al. 2016)."""
    alpha = _number_arg("elu", "alpha", alpha)
    x = _float_arg("elu", input)
    return _inplace_result("elu", input, _elu(x, alpha), inplace)


#: SELU's constants (Klambauer et al. 2017, eq. 14), to torch's digits
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * elu(input, alpha)`` with SELU's constants, as ``torch.nn.functional.selu``."""
    x = _float_arg("selu", input)
    return _inplace_result("selu", input, _elu(x, SELU_ALPHA, SELU_SCALE), inplace)


def silu(input, inplace=False):
    """``input * sigmoid(input)`` (swish), as ``torch.nn.functional.silu``."""
    x = _float_arg("silu", input)
    return _inplace_result("silu", input, ops.mul(x, ops.sigmoid(x)), inplace)


def mish(input, inplace=False):
    """``input * tanh(softplus(input))``, as ``torch.nn.functional.mish``."""
    x = _float_arg("mish", input)
    return _inplace_result("mish", input, ops.mul(x, ops.tanh(softplus(x))), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``input`` clamped to ``[min_val, max_val]``, as
    ``torch.nn.functional.hardtanh``: the gradient is 1 strictly inside and
    0 at the bounds and beyond (``clamp``'s is 1 at the bounds)."""
    lo = _number_arg("hardtanh", "min_val", min_val)
    hi = _number_arg("hardtanh", "max_val", max_val)
    if lo > hi:
        raise ValueError(f"hardtanh: min_val={lo} cannot be greater than max_val={hi}")
    x = tensor_like(input)
    if x.dtype.kind not in "fiu":
        raise TypeError(f"hardtanh: expected a real numeric input, got dtype {x.dtype}")
    inside = ops.logical_and(ops.gt(x, lo), ops.lt(x, hi))
    out = ops.where(inside, x, _constant(ops.clamp(x, lo, hi)))
    return _inplace_result("hardtanh", input, out, inplace)


def _constant(x):
    """``x`` as a constant of the graph (no gradient flows through it)."""
    return bind(P.stop_gradient_p, x)


def relu6(input, inplace=False):
    """``min(max(input, 0), 6)``, as ``torch.nn.functional.relu6`` (``hardtanh(input, 0, 6)``)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def softsign(input):
    """``input / (1 + |input|)``, as ``torch.nn.functional.softsign``."""
    x = _float_arg("softsign", input)
    return ops.div(x, ops.add(ops.abs(x), 1.0))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between ``x1`` and ``x2`` along ``dim``, as
    ``torch.nn.functional.cosine_similarity`` (torch 2's formula): each
    input divided by its norm clamped below at ``eps``, then the dot
    product. As torch's, the clamp is outside autograd: the gradient
    differentiates the unclamped norm.

    Shapes: ``x1``, ``x2`` broadcastable -> their broadcast shape without ``dim``.
    """
    eps = _number_arg("cosine_similarity", "eps", eps)
    a, b = _float_arg("cosine_similarity", x1, "x1"), _float_arg("cosine_similarity", x2, "x2")
    nd = max(len(a.shape), len(b.shape))
    if not -nd <= dim < max(nd, 1):
        raise IndexError(f"cosine_similarity: dim={dim} is out of range for inputs of {nd} dimensions")

    def unit(x):
        n = ops.norm(x, 2, dim, keepdim=True)
        # the clamped value with the unclamped norm's gradient
        clamped = ops.add(n, _constant(ops.sub(ops.clamp(n, min=eps), n)))
        return ops.div(x, clamped)
    return ops.sum(ops.mul(unit(a), unit(b)), dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``norm(x1 - x2 + eps, p)`` over the last dimension, as
    ``torch.nn.functional.pairwise_distance``.

    Shapes: (N, D) or (D,), broadcastable -> (N,) or () (``keepdim``: a trailing 1).
    """
    eps = _number_arg("pairwise_distance", "eps", eps)
    a, b = _float_arg("pairwise_distance", x1, "x1"), _float_arg("pairwise_distance", x2, "x2")
    return ops.norm(ops.add(ops.sub(a, b), eps), p, -1, keepdim=keepdim)


__all__ += ["softplus", "logsigmoid", "elu", "selu", "silu", "mish", "hardtanh", "relu6", "softsign",
            "cosine_similarity", "pairwise_distance"]


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch normalisation over every dimension but the channels' (dimension
    1), as ``torch.nn.functional.batch_norm`` (Ioffe and Szegedy 2015, alg. 1).

    With ``training`` (or no running statistics) the batch's mean and biased
    variance normalise the input, and the running statistics, when given
    (float arrays or tensors of shape (C,)), are updated in place:
    ``running = (1 - momentum) * running + momentum * batch``, the variance
    unbiased (``n / (n - 1)``), as torch. Otherwise the running statistics
    normalise it (constants: no gradient reaches them).

    Shapes: ``input`` (N, C) or (N, C, L) (any rank >= 2); the others (C,).
    """
    who = "batch_norm"
    x = _float_arg(who, input)
    shape = tuple(x.shape)
    if len(shape) < 2:
        raise ValueError(f"{who}: expected an input of at least 2 dimensions (N, C, ...), got shape {shape}")
    c = shape[1]
    stats = []
    for name, r in (("running_mean", running_mean), ("running_var", running_var)):
        if r is None:
            stats.append(None)
            continue
        a = r.numpy() if isinstance(r, Tensor) else r
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f" or a.shape != (c,):
            raise ValueError(f"{who}: {name} must be a float array of shape ({c},) (the input's channels), got "
                             f"{getattr(a, 'shape', type(a).__name__)}")
        stats.append(a)
    if (stats[0] is None) != (stats[1] is None):
        raise ValueError(f"{who}: running_mean and running_var must both be given or both be None")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != (c,):
            raise ValueError(f"{who}: {name}.shape={tuple(p.shape)} does not match the input's {c} channels")
    axes = (0,) + tuple(range(2, len(shape)))
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if training or stats[0] is None:
        count = int(np.prod([shape[a] for a in axes])) if None not in shape else None
        if training and count == 1:
            raise ValueError(f"{who}: expected more than 1 value per channel when training, got input size {shape}")
        mean = ops.mean(x, axes, keepdim=True)
        centred = ops.sub(x, mean)
        var = ops.mean(ops.mul(centred, centred), axes, keepdim=True)
        if training and stats[0] is not None:
            if not isinstance(x, Tensor):
                raise TypeError(f"{who}: training with running statistics updates them in place, which needs "
                                f"eager tensors (a static graph value has no values): call .eval() or pass "
                                f"running_mean=None, running_var=None")
            if momentum is None:
                raise ValueError(f"{who}: momentum=None (a cumulative average) needs the count of batches: "
                                 f"use nn.BatchNorm1d, or pass the factor 1/count as momentum")
            m = float(momentum)
            bm = mean.numpy().reshape(c)
            bv = var.numpy().reshape(c) * (count / (count - 1))
            rm, rv = stats
            rm *= 1 - m
            rm += (m * bm).astype(rm.dtype)
            rv *= 1 - m
            rv += (m * bv).astype(rv.dtype)
        out = ops.div(centred, ops.sqrt(ops.add(var, eps)))
    else:
        rm, rv = (s.reshape(bshape).astype(x.dtype, copy=False) for s in stats)
        out = ops.div(ops.sub(x, rm), np.sqrt(rv + np.asarray(eps, rv.dtype)))
    if weight is not None:
        out = ops.mul(out, ops.reshape(weight, *bshape))
    if bias is not None:
        out = ops.add(out, ops.reshape(bias, *bshape))
    return out


__all__ += ["batch_norm"]

from .loss import huber_loss, l1_loss, smooth_l1_loss  # noqa: E402  (branch i22-torch-b)

__all__ += ["l1_loss", "smooth_l1_loss", "huber_loss"]

# 1-D convolution and pooling (issue 25): their home is dynnets.nn.functional_conv
from .functional_conv import adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d, conv1d, max_pool1d  # noqa: E402

__all__ += ["conv1d", "max_pool1d", "avg_pool1d", "adaptive_max_pool1d", "adaptive_avg_pool1d"]
from .functional_conv import conv2d, max_pool2d  # noqa: E402

__all__ += ["conv2d", "max_pool2d"]

# attention (issue 25): its home is dynnets.nn.functional_attention
from .functional_attention import multi_head_attention_forward, scaled_dot_product_attention  # noqa: E402

__all__ += ["scaled_dot_product_attention", "multi_head_attention_forward"]
