"""Softmax, log-softmax, softmax and sigmoid cross-entropy, embedding, and the
activations GELU and leaky ReLU."""
from __future__ import annotations

import numpy as np

from .. import kernels as K
from ..gradtypes import RowSparse, sum_rows
from .core import (BATCH_ELEMENTWISE, BatchRule, batch_rows, Aval, DTypeError, IndexRangeError, ShapeError, broadcast_shapes,
                   defprim, dims_match, dtype_of, fmt_shape, is_int, is_kernel_float, norm_axis, same_float,
                   unbroadcast)

__all__ = ["softmax_p", "log_softmax_p", "softmax_cross_entropy_p", "sigmoid_cross_entropy_p",
           "binary_cross_entropy_p", "embedding_p", "gelu_p", "leaky_relu_p"]

# --------------------------------------------------------------------------
# softmax family, losses, embedding
# --------------------------------------------------------------------------


def _softmax(x, axis=-1):
    if x.ndim == 2 and (axis == -1 or axis == 1) and x.shape[1] and same_float(x):
        return K.softmax_fwd(x)
    if x.shape[axis] == 0:
        return np.empty_like(x)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    if x.ndim == 2 and (axis == -1 or axis == 1) and x.shape[1] and same_float(x):
        return K.log_softmax_fwd(x)
    if x.shape[axis] == 0:
        return np.empty_like(x)
    m = np.max(x, axis=axis, keepdims=True)
    s = x - m
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _softmax_shape(name):
    def rule(x, axis=-1):
        if not is_int(axis):
            raise DTypeError(f"{name}: axis must be an integer, got {axis!r}")
        norm_axis(name, axis, len(x.shape))
        if dtype_of(x).kind != "f":
            raise DTypeError(f"{name}: expected a floating-point input, got dtype {dtype_of(x)}")
        return Aval(tuple(x.shape), dtype_of(x))
    return rule



def _row_wise(x, axis=-1):
    """A softmax over an axis other than 0 of an input of 2+ dimensions is row-wise."""
    return len(x.shape) >= 2 and is_int(axis) and axis % len(x.shape) != 0


softmax_p = defprim(
    "softmax", _softmax, _softmax_shape("softmax"),
    vjp=(lambda g, ins, out, axis=-1: out * (g - (g * out).sum(axis=axis, keepdims=True)),), vjp_reads=(("out",),),
    batch=batch_rows(0, when=_row_wise))

log_softmax_p = defprim(
    "log_softmax", _log_softmax, _softmax_shape("log_softmax"),
    vjp=(lambda g, ins, out, axis=-1: g - np.exp(out) * g.sum(axis=axis, keepdims=True),), vjp_reads=(("out",),),
    batch=batch_rows(0, when=_row_wise))


def _class_indices(op, name, t, n_classes):
    """``t`` as C-contiguous int64 after checking every value is in
    ``[0, n_classes)``: the kernels index with them unchecked. One reduction
    over the unsigned view finds negative and too-large values alike."""
    t = np.ascontiguousarray(t, dtype=np.int64)
    if t.size and t.view(np.uint64).max() >= n_classes:
        bad = t[(t < 0) | (t >= n_classes)][0]
        raise IndexRangeError(f"{op}: {name} {bad} is out of range for {n_classes} classes")
    return t


def _xent(logits, targets, weights=None, reduction="mean"):
    """Softmax cross-entropy over rows; returns (loss, probs). ``weights`` (N,)
    masks rows (0 drops a row); 'mean' divides by the total weight (0 when
    every row is masked out; NaN for no rows at all, as torch's mean)."""
    n, c = logits.shape
    t = _class_indices("cross_entropy", "target", targets, c)
    dt = logits.dtype
    w = np.ones(n, dtype=dt) if weights is None else np.ascontiguousarray(weights, dtype=dt)
    losses, probs = K.softmax_cross_entropy_fwd(np.ascontiguousarray(logits), t, w)
    if reduction == "none":
        loss = losses
    elif reduction == "sum":
        loss = np.asarray(losses.sum(), dtype=dt)
    else:
        # the mean over no rows (an empty batch, or every row masked) is nan, 0/0, as PyTorch's; its gradient is 0 (see the VJP)
        total = w.sum()
        loss = np.asarray(losses.sum() / total if total > 0 else np.nan, dtype=dt)
    return loss, probs


def _xent_shape(logits, targets, weights=None, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ShapeError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if len(logits.shape) != 2:
        raise ShapeError(f"cross_entropy: logits must be 2-D (N, C), got logits.shape={fmt_shape(logits.shape)} "
                         f"(dynnets.nn.functional.cross_entropy takes PyTorch's (C,) and (N, C, d1, ...) scores)")
    if not is_kernel_float(dtype_of(logits)):
        raise DTypeError(f"cross_entropy: logits must be float32 or float64, got dtype {dtype_of(logits)}")
    if dtype_of(targets).kind not in "iu":
        raise DTypeError(f"cross_entropy: targets must be integer class indices, got dtype {dtype_of(targets)} "
                         f"(dynnets.nn.functional.cross_entropy takes PyTorch's class-probability targets)")
    if len(targets.shape) != 1 or not dims_match(targets.shape[0], logits.shape[0]):
        raise ShapeError(f"cross_entropy: targets.shape={fmt_shape(targets.shape)} does not match "
                         f"logits.shape[0]={logits.shape[0]} (logits.shape={fmt_shape(logits.shape)}; expected one "
                         f"class index per row, targets.shape={fmt_shape(logits.shape[:1])})")
    if weights is not None:
        if len(weights.shape) != 1 or not dims_match(weights.shape[0], targets.shape[0]):
            raise ShapeError(f"cross_entropy: mask.shape={fmt_shape(weights.shape)} does not match "
                             f"targets.shape={fmt_shape(targets.shape)}")
        if dtype_of(weights).kind not in "biuf":
            raise DTypeError(f"cross_entropy: mask must be real numbers, got dtype {dtype_of(weights)}")
    n = logits.shape[0] if logits.shape[0] is not None else targets.shape[0]
    shp = (n,) if reduction == "none" else ()
    return Aval(shp, dtype_of(logits)), Aval((n, logits.shape[1]), dtype_of(logits))


def _xent_vjp(g, ins, out, reduction="mean"):
    targets = ins[1]
    weights = ins[2] if len(ins) > 2 and ins[2] is not None else None
    gl = g[0]
    probs = out[1]
    n, c = probs.shape
    dt = probs.dtype
    tail = (None,) if len(ins) > 2 else ()
    if gl is None:
        # only the saved softmax received a gradient, which by design carries none
        return (np.zeros((n, c), dtype=dt), None) + tail
    w = np.ones(n, dtype=dt) if weights is None else np.ascontiguousarray(weights, dtype=dt)
    if reduction == "none":
        grow = np.ascontiguousarray(gl, dtype=dt)
        if grow.shape != (n,):
            raise ShapeError(f"cross_entropy: gradient of the per-row losses has shape {fmt_shape(grow.shape)}, "
                             f"expected ({n},)")
    else:
        scale = gl if reduction == "sum" else (gl / w.sum() if w.sum() > 0 else 0 * gl)
        grow = np.full(n, scale, dtype=dt)
    t = _class_indices("cross_entropy", "target", targets, c)
    if t.shape != (n,) or w.shape != (n,):
        raise ShapeError(f"cross_entropy: targets.shape={fmt_shape(t.shape)} and mask.shape={fmt_shape(w.shape)} do not "
                         f"match the {n} rows of the logits")
    dlogits = K.softmax_cross_entropy_bwd(probs, t, w, grow)
    return (dlogits, None) + tail


softmax_cross_entropy_p = defprim(
    "softmax_cross_entropy", _xent, _xent_shape, joint_vjp=_xent_vjp,
    multiple_results=True, nondiff_args=(1, 2),
    batch=BatchRule("xent"))


def _array_arg(name, what, a):
    """An array (or array value) argument: a Python number has no dtype to promote by."""
    if not isinstance(a.dtype, np.dtype):
        raise DTypeError(f"{name}: {what} must be an array, got a Python {type(a.dtype).__name__}")


def _sigmoid_xent(x, t, pos_weight=None):
    """Per-element ``-(pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x)))``,
    PyTorch's ``binary_cross_entropy_with_logits`` (``reduction='none'``).

    With ``lp = log(1 + exp(-|x|))`` (``log1p``: tiny values kept) this is
    ``(1 - t) max(x, 0) + pw t max(-x, 0) + ((1 - t) + pw t) lp``, without pw
    ``lp + x ([x >= 0] - t)``: sums of non-negative terms, so nothing
    overflows or cancels (PyTorch's ``(1 - t) x + softplus(-x)`` rounds the
    loss of a confident right answer, e.g. x = -40, t = 0, to 0)."""
    lp = np.log1p(np.exp(-np.abs(x)))
    if pos_weight is None:
        out = lp + x * ((x >= 0) - t)
        return np.asarray(out, dtype=np.result_type(x, t))
    q = 1 - t
    pt = pos_weight * t
    out = q * np.maximum(x, 0) + pt * np.maximum(-x, 0) + (q + pt) * lp
    return np.asarray(out, dtype=np.result_type(x, t, pos_weight))


def _sigmoid_xent_shape(x, t, pos_weight=None):
    name = "sigmoid_cross_entropy"
    for what, a in (("logits", x), ("targets", t)) + ((("pos_weight", pos_weight),) if pos_weight is not None else ()):
        _array_arg(name, what, a)
        if dtype_of(a).kind != "f":
            raise DTypeError(f"{name}: {what} must be floating-point, got dtype {dtype_of(a)}")
    if len(t.shape) != len(x.shape) or not all(dims_match(a, b) for a, b in zip(t.shape, x.shape)):
        raise ShapeError(f"{name}: targets.shape={fmt_shape(t.shape)} does not match logits.shape={fmt_shape(x.shape)}")
    dts = [dtype_of(x), dtype_of(t)]
    if pos_weight is not None:
        shape = broadcast_shapes(name, x.shape, pos_weight.shape, names=["logits", "pos_weight"])
        if len(shape) != len(x.shape) or not all(dims_match(a, b) for a, b in zip(shape, x.shape)):
            raise ShapeError(f"{name}: pos_weight.shape={fmt_shape(pos_weight.shape)} does not broadcast to "
                             f"logits.shape={fmt_shape(x.shape)}")
        dts.append(dtype_of(pos_weight))
    return Aval(tuple(x.shape), np.result_type(*dts))


def _sigmoid_xent_vjp(g, ins, out):
    x, t = ins[0], ins[1]
    pw = ins[2] if len(ins) > 2 else None
    # d/dx = (1 - t) sigmoid(x) - pw t sigmoid(-x), both sigmoids e / (1 + e) or
    # 1 / (1 + e) with e = exp(-|x|): no overflow, and the tiny gradient of a
    # confident right answer kept (not sigmoid(x) - t, which rounds it to 0)
    e = np.exp(-np.abs(x))
    pos = x >= 0
    q = 1 - t
    pt = t if pw is None else pw * t
    gx = g * (np.where(pos, q - pt * e, q * e - pt) / (1 + e))
    if pw is None:
        gt = g * -x                                  # softplus(-x) - softplus(x) = -x
        return gx.astype(x.dtype, copy=False), unbroadcast(gt, t.shape).astype(t.dtype, copy=False)
    lp = np.log1p(e)
    sp, sn = np.maximum(x, 0) + lp, np.maximum(-x, 0) + lp
    gt = g * (pw * sn - sp)
    gpw = unbroadcast(g * t * sn, np.shape(pw))
    return (gx.astype(x.dtype, copy=False), unbroadcast(gt, t.shape).astype(t.dtype, copy=False),
            gpw.astype(pw.dtype, copy=False))


sigmoid_cross_entropy_p = defprim(
    "sigmoid_cross_entropy", _sigmoid_xent, _sigmoid_xent_shape, joint_vjp=_sigmoid_xent_vjp,
    batch=BATCH_ELEMENTWISE)


def _bce(x, t):
    """Per-element ``-(t log(x) + (1 - t) log(1 - x))`` of probabilities x,
    each log clamped at -100 as PyTorch's ``binary_cross_entropy`` (so x = 0
    or 1 gives a finite loss)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (t - 1) * np.maximum(np.log1p(-x), -100) - t * np.maximum(np.log(x), -100)
    return np.asarray(out, dtype=np.result_type(x, t))


def _bce_shape(x, t):
    name = "binary_cross_entropy"
    for what, a in (("input", x), ("target", t)):
        _array_arg(name, what, a)
        if dtype_of(a).kind != "f":
            raise DTypeError(f"{name}: {what} must be floating-point, got dtype {dtype_of(a)}")
    if len(t.shape) != len(x.shape) or not all(dims_match(a, b) for a, b in zip(t.shape, x.shape)):
        raise ShapeError(f"{name}: target.shape={fmt_shape(t.shape)} does not match input.shape={fmt_shape(x.shape)}")
    return Aval(tuple(x.shape), np.result_type(dtype_of(x), dtype_of(t)))


# PyTorch's EPSILON of the BCE backward, a float32 1e-12 (9.99999996e-13): at x = 0
# or 1 the gradient is +-1 / EPSILON, which this reproduces to the last digit
_BCE_EPS = float(np.float32(1e-12))


def _bce_vjp(g, ins, out):
    # PyTorch's formulas: the input's denominator is kept from 0 and the
    # target's gradient is unclamped (+-inf where x is 0 or 1)
    x, t = ins
    gx = g * (x - t) / np.maximum((1 - x) * x, _BCE_EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        gt = g * (np.log1p(-x) - np.log(x))
    return gx.astype(x.dtype, copy=False), gt.astype(t.dtype, copy=False)


binary_cross_entropy_p = defprim(
    "binary_cross_entropy", _bce, _bce_shape, joint_vjp=_bce_vjp, batch=BATCH_ELEMENTWISE)


def _embedding(weight, ids):
    """Rows of ``weight`` (V, D) for integer ``ids`` of any shape in ``[0, V)``
    (no negative ids: PyTorch's embedding rejects them rather than wrap)."""
    n = weight.shape[0]
    if type(ids) is not np.ndarray:
        ids = np.asarray(ids)
    # one reduction over the unsigned view finds negative and too-large ids alike
    if ids.size and ids.view(ids.dtype.str.replace("i", "u")).max() >= n:
        flat = ids.reshape(-1)
        bad = flat[(flat < 0) | (flat >= n)][0]
        raise IndexRangeError(f"embedding: id {bad} is out of range for {n} embeddings (ids must be in [0, {n}))")
    return weight[ids]


def _embedding_shape(weight, ids):
    if len(weight.shape) != 2:
        raise ShapeError(f"embedding: weight must be 2-D (num_embeddings, dim), got weight.shape={fmt_shape(weight.shape)}")
    if dtype_of(ids).kind not in "iu":
        raise DTypeError(f"embedding: ids must be integers, got dtype {dtype_of(ids)}")
    return Aval(tuple(ids.shape) + (weight.shape[1],), dtype_of(weight))


def _embedding_vjp(g, ins, out):
    weight, ids = ins
    V, D = weight.shape
    flat = np.asarray(ids).reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= V):
        raise IndexRangeError(f"embedding: id out of range for {V} embeddings")
    rows, inv = np.unique(flat, return_inverse=True)
    inv = inv.astype(np.int64).reshape(-1)
    return RowSparse(rows, sum_rows(inv, g, len(rows), (D,)), weight.shape)


embedding_p = defprim("embedding", _embedding, _embedding_shape, vjp=(_embedding_vjp, None), vjp_reads=((1,), ()),
                      nondiff_args=(1,), lazy_grads=True, sparse_grads=(0,),
    batch=batch_rows(1, when=lambda w, ids: len(ids.shape) >= 1, by_id=True))



# --------------------------------------------------------------------------
# activations with PyTorch's formulas (torch.nn.functional.gelu, leaky_relu)
# --------------------------------------------------------------------------

_GELU_MODES = ("none", "tanh")
_SQRT_2_OVER_PI = 0.7978845608028654
_KAPPA = 0.044715


def _float_input(op, x):
    dt = dtype_of(x)
    if dt.kind != "f":
        raise DTypeError(f"{op}: expected a floating-point input, got dtype {dt} (as torch: cast first, x.float())")
    return dt


def _gelu_shape(x, approximate="none"):
    if approximate not in _GELU_MODES:
        raise ShapeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return Aval(tuple(x.shape), _float_input("gelu", x))


def _flat_kernel_arrays(*arrays):
    """The arrays as C-contiguous 1-D float32/float64 (float16 computes in
    float32, as the kernels are compiled for those two)."""
    dt = arrays[0].dtype
    kd = dt if is_kernel_float(dt) else np.dtype(np.float32)
    return [np.ascontiguousarray(a, dtype=kd).reshape(-1) for a in arrays]


def _gelu(x, approximate="none"):
    """GELU (Hendrycks and Gimpel 2016): ``x * Phi(x)`` exactly (erf, in the
    Numba kernel: numpy has none), or torch's tanh approximation
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    x = np.asarray(x)
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + _KAPPA * (x * x * x))
        return 0.5 * x * (1 + np.tanh(inner))
    (xf,) = _flat_kernel_arrays(x)
    return K.gelu_fwd(xf).reshape(x.shape).astype(x.dtype, copy=False)


def _gelu_vjp(g, ins, out, approximate="none"):
    x = np.asarray(ins[0])
    if approximate == "tanh":
        # PyTorch's GeluBackward formula for the tanh approximation
        x2 = x * x
        t = np.tanh(_SQRT_2_OVER_PI * (x + _KAPPA * x2 * x))
        left = 0.5 * x
        right = 1 + t
        d = 0.5 * right + left * (1 - t * t) * (_SQRT_2_OVER_PI * (1 + 3 * _KAPPA * x2))
        return (g * d).astype(x.dtype, copy=False)
    xf, gf = _flat_kernel_arrays(x, np.broadcast_to(g, x.shape))
    return K.gelu_bwd(xf, gf).reshape(x.shape).astype(x.dtype, copy=False)


gelu_p = defprim("gelu", _gelu, _gelu_shape, vjp=(_gelu_vjp,), batch=BATCH_ELEMENTWISE)


def _leaky_relu_shape(x, negative_slope=0.01):
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float, np.integer, np.floating)):
        raise DTypeError(f"leaky_relu: negative_slope must be a number, got {negative_slope!r}")
    return Aval(tuple(x.shape), _float_input("leaky_relu", x))


def _leaky_relu(x, negative_slope=0.01):
    # x > 0 keeps x, else x * slope: NaN stays NaN (x * slope), as torch's
    return np.where(x > 0, x, x * float(negative_slope))


def _leaky_relu_vjp(g, ins, out, negative_slope=0.01):
    # slope at 0, as torch's leaky_relu_backward (x > 0 ? g : g * slope)
    return np.where(ins[0] > 0, g, g * float(negative_slope))


leaky_relu_p = defprim("leaky_relu", _leaky_relu, _leaky_relu_shape, vjp=(_leaky_relu_vjp,),
                       batch=BATCH_ELEMENTWISE)
