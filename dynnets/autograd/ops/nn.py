"""Neural-network ops: softmaxes, the fused losses (softmax and sigmoid
cross-entropy), ``embedding``, ``dropout``, the ``gelu`` / ``leaky_relu``
activations and ``normalize`` (:mod:`dynnets.nn.functional` builds on these)."""
from __future__ import annotations

import numpy as np

from .. import primitives as P
from ..engine import bind, bind1, bind2
from ..values import as_operand, is_interpreted
from .arguments import dim_or_axis, dtype_of
from .elementwise import astype, clamp
from .reductions import norm

__all__ = ["softmax", "log_softmax", "cross_entropy", "sigmoid_cross_entropy", "binary_cross_entropy", "embedding",
           "dropout", "gelu", "leaky_relu", "normalize"]


def _softmax_cast(op, x, dtype):
    if dtype is None:
        return x
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise P.DTypeError(f"{op}: dtype must be a floating-point type, got {dt}")
    return x if dtype_of(x) == dt else astype(x, dt)


def softmax(input, dim=None, dtype=None, *, axis=None):
    """Softmax along ``dim`` (numpy's ``axis=``; default the last), as
    ``torch.softmax``; ``dtype`` casts the input first."""
    x = input if dtype is None else _softmax_cast("softmax", input, dtype)
    if dim is not None:
        axis = dim_or_axis("softmax", axis, dim)
    if axis is None or (axis == -1 and type(axis) is int):
        return bind(P.softmax_p, x)          # the default, without attributes (see sum)
    return bind(P.softmax_p, x, axis=axis)


def log_softmax(input, dim=None, dtype=None, *, axis=None):
    """Log-softmax along ``dim`` (numpy's ``axis=``; default the last), as
    ``torch.log_softmax``; ``dtype`` casts the input first."""
    x = input if dtype is None else _softmax_cast("log_softmax", input, dtype)
    if dim is not None:
        axis = dim_or_axis("log_softmax", axis, dim)
    if axis is None or (axis == -1 and type(axis) is int):
        return bind1(P.log_softmax_p, x)
    return bind(P.log_softmax_p, x, axis=axis)


def cross_entropy(logits, targets, *, mask=None, reduction="mean"):
    """Softmax cross-entropy of ``logits`` (N, C) against integer class
    ``targets`` (N,), fused in one Numba kernel.

    ``mask`` (N,) weights each row (0 drops it); ``reduction`` is 'mean' (over
    the mask's total weight; nan when it is 0, as PyTorch's mean over no
    rows), 'sum' or 'none' (per-row losses). Both are keyword-only: PyTorch's
    third positional argument is a per-class ``weight``.

    This is the fused op of the static graph and the models. PyTorch's
    ``F.cross_entropy`` (class weights, ``ignore_index``, label smoothing,
    (C,) or (N, C, d1, ...) scores, class-probability targets) is
    :func:`dynnets.nn.functional.cross_entropy`; other inputs here raise an
    error that names it.
    """
    targets = as_operand(targets)
    if mask is None:
        loss, _ = bind(P.softmax_cross_entropy_p, logits, targets, reduction=reduction)
    else:
        mask = as_operand(mask, logits.dtype)
        loss, _ = bind(P.softmax_cross_entropy_p, logits, targets, mask, reduction=reduction)
    return loss


def sigmoid_cross_entropy(logits, targets, pos_weight=None):
    """Per-element binary cross-entropy of ``logits`` against ``targets`` in
    [0, 1] (same shape), ``-(pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x)))``,
    computed without overflow or loss of tiny values for any |x| (one
    primitive). ``pos_weight`` broadcasts against the logits (one weight per
    class, the last axis). Unreduced: :func:`dynnets.nn.functional.binary_cross_entropy_with_logits`
    adds PyTorch's weights and reductions."""
    if pos_weight is None:
        return bind2(P.sigmoid_cross_entropy_p, logits, targets)
    return bind(P.sigmoid_cross_entropy_p, logits, targets, pos_weight)


def binary_cross_entropy(probs, targets):
    """Per-element binary cross-entropy ``-(t log(x) + (1 - t) log(1 - x))`` of
    probabilities in [0, 1], each log clamped at -100 (PyTorch's); unreduced
    (:func:`dynnets.nn.functional.binary_cross_entropy` adds weights and
    reductions)."""
    return bind2(P.binary_cross_entropy_p, probs, targets)


def embedding(weight, ids):
    """Rows of ``weight`` for integer ``ids``; the gradient is row-sparse."""
    return bind2(P.embedding_p, weight, as_operand(ids))


def dropout(x, p, rng, training=True):
    """Inverted dropout: zero each element with probability ``p`` and scale the
    rest by 1/(1-p). ``rng`` (a ``numpy.random.Generator`` or seed) draws the
    mask, so runs are reproducible.

    On a symbolic value (a static graph, a trace) the mask is a
    ``dropout_mask`` node whose seed ``rng`` draws now: each run of the plan
    draws a new mask (and its gradient uses that run's mask).

    PyTorch's ``torch.dropout(input, p, train)`` takes the flag third: a bool
    ``rng`` is that habit and raises (``training=`` is the flag here;
    :func:`dynnets.nn.functional.dropout` has torch's signature)."""
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"dropout: the third argument is rng (a numpy Generator or a seed), got the bool {rng}; "
                        f"pass the flag as training={rng}, or use dynnets.nn.functional.dropout(input, p, "
                        f"training) with torch's signature")
    if not training or p == 0:
        return x
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if is_interpreted(x):
        # a graph's value: a mask op drawn anew each run, from a seed fixed now
        seed = tuple(int(s) for s in np.random.default_rng(rng).integers(0, 2 ** 63, 2))
        return bind(P.mul_p, x, bind(P.dropout_mask_p, x, rate=float(p), seed=seed))
    return bind(P.mul_p, x, P.draw_dropout_mask(np.random.default_rng(rng), x.shape, x.dtype, p))


# --- activations with PyTorch's names -------------------------------------------

def gelu(input, approximate="none"):
    """GELU, ``input * Phi(input)`` (``approximate='tanh'``: torch's tanh
    approximation), as ``torch.nn.functional.gelu``."""
    if approximate == "none":
        return bind1(P.gelu_p, input)
    return bind(P.gelu_p, input, approximate=approximate)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, else ``negative_slope * input``, as
    ``torch.nn.functional.leaky_relu`` (whose default slope is 0.01; TF1's
    ``tf.nn.leaky_relu`` defaults to 0.2). The result is a new tensor: for
    torch's ``inplace=True`` use :func:`dynnets.nn.functional.leaky_relu`
    (here it raises, rather than leave the input silently unchanged)."""
    if inplace:
        raise ValueError("leaky_relu: inplace=True writes into the input, which dynnets.leaky_relu never does; use "
                         "dynnets.nn.functional.leaky_relu(input, negative_slope, inplace=True), as torch's F")
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float, np.integer, np.floating)):
        raise TypeError(f"leaky_relu: negative_slope must be a number, got {negative_slope!r}")
    return bind(P.leaky_relu_p, input, negative_slope=float(negative_slope))


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """``input / max(norm(input, p, dim, keepdim=True), eps)``, as
    ``torch.nn.functional.normalize``."""
    return input / clamp(norm(input, p, dim, keepdim=True), min=eps)
