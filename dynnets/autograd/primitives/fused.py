"""Fused primitives of the Transformer encoder layer (issue 25 §3): fewer
dispatches per layer where each eager op costs ~10 us of Python and the
minibatches are small (~475 tokens of width 128).

``linear_act``
    ``act(x @ w.T + b)``, ReLU or GELU: one product, the bias and the
    activation applied in place on its result; the VJP masks the incoming
    gradient (ReLU: from the output) and reuses ``linear``'s.
``linear_split``
    ``linear`` whose output columns are cut into ``chunks`` equal parts, each
    a C-contiguous array of its own (the q, k, v of a packed in-projection,
    torch's ``in_proj_weight`` (3E, E)): one primitive instead of a product
    and three slices, and the attention primitives receive contiguous rows
    (a slice of the (N, 3E) product is strided and was copied there).
``add_layer_norm``
    ``layer_norm(x + r)`` over the last axis with its affine transform (the
    residual connection and the post-norm of torch's
    ``nn.TransformerEncoderLayer``); its VJP returns the one gradient of the
    sum for both ``x`` and ``r``.

The products are BLAS calls; ``add_layer_norm`` has Numba row kernels of its
own (:mod:`dynnets.autograd.kernels_fused`, numpy twins in
:mod:`dynnets.autograd.reference_fused`), 4-5x faster than ``x + r`` followed
by the ``layer_norm`` kernels (measured there). Besides the per-op dispatch,
fusing saves one temporary and one pass per op.
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels_fused as KF
from .core import Aval, ShapeError, batch_rows, defprim, dims_match, fmt_shape, is_int, kernel_floats
from .linalg import linear_p
from .nn import gelu_p

__all__ = ["linear_act_p", "linear_split_p", "add_layer_norm_p"]

_ACTIVATIONS = ("relu", "gelu")


def _check_linear(op, x, w, b, **floats):
    """The checks of a ``(..., in) @ (out, in).T + (out,)`` product: one
    float dtype (float32 or float64), 2-D weight, matching widths."""
    dt = kernel_floats(op, x=x, weight=w, bias=b, **floats)
    if len(w.shape) != 2:
        raise ShapeError(f"{op}: weight must be 2-D (out_features, in_features), got weight.shape={fmt_shape(w.shape)}")
    if len(x.shape) == 0:
        raise ShapeError(f"{op}: x must have at least one dimension (..., in_features), got x.shape=()")
    if not dims_match(x.shape[-1], w.shape[1]):
        raise ShapeError(f"{op}: x.shape[-1]={x.shape[-1]} does not match weight.shape[1]={w.shape[1]} "
                         f"(x.shape={fmt_shape(x.shape)}, weight.shape={fmt_shape(w.shape)})")
    if len(b.shape) != 1 or not dims_match(b.shape[0], w.shape[0]):
        raise ShapeError(f"{op}: bias.shape={fmt_shape(b.shape)} does not match weight.shape[0]={w.shape[0]} "
                         f"(expected ({w.shape[0]},))")
    return dt


def _product(x, w, b):
    """``x @ w.T + b`` with the bias added in place (one temporary, not two)."""
    y = np.matmul(x, w.T)
    y += b
    return y


# --------------------------------------------------------------------------
# linear + activation
# --------------------------------------------------------------------------


def _linear_act(x, w, b, activation="relu"):
    """``act(x @ w.T + b)``.

    Parameters
    ----------
    x : (..., in_features)
    w : (out_features, in_features)
    b : (out_features,)
    activation : 'relu' or 'gelu'
        GELU is the exact one (erf), as ``torch.nn.functional.gelu``'s default.

    Returns
    -------
    (..., out_features)
    """
    y = _product(x, w, b)
    if activation == "relu":
        return np.maximum(y, 0, out=y)
    return gelu_p.impl(y)


def _linear_act_shape(x, w, b, activation="relu"):
    op = "linear_act"
    if activation not in _ACTIVATIONS:
        raise ShapeError(f"{op}: activation must be 'relu' or 'gelu', got {activation!r}")
    dt = _check_linear(op, x, w, b)
    return Aval(tuple(x.shape[:-1]) + (w.shape[0],), dt)


def _linear_act_grad(g, ins, out, activation):
    """The gradient at the product, before the activation."""
    if activation == "relu":
        # ReLU's derivative from its output: out > 0 exactly where the product was
        return g * (out > 0)
    x, w, b = ins
    return gelu_p.vjps[0](g, (_product(x, w, b),), out)


def _linear_act_vjp(g, ins, out, activation="relu"):
    return linear_p.joint_vjp(_linear_act_grad(g, ins, out, activation), ins, None)


def _linear_act_vjp_dense(g, ins, out, activation="relu"):
    return linear_p.dense_vjp(_linear_act_grad(g, ins, out, activation), ins, None)


linear_act_p = defprim("linear_act", _linear_act, _linear_act_shape, joint_vjp=_linear_act_vjp,
                       dense_vjp=_linear_act_vjp_dense,
                       batch=batch_rows(0, when=lambda x, w, b, activation="relu": len(x.shape) >= 2))


# --------------------------------------------------------------------------
# linear, output split into equal chunks
# --------------------------------------------------------------------------


def _linear_split(x, w, b, chunks=3):
    """``linear(x, w, b)`` cut along its last axis into ``chunks`` equal
    parts, each C-contiguous.

    Parameters
    ----------
    x : (..., in_features)
    w : (chunks * out, in_features)
    b : (chunks * out,)
    chunks : int

    Returns
    -------
    tuple of ``chunks`` arrays (..., out)
    """
    c = int(chunks)
    lead = x.shape[:-1]
    rows = math.prod(lead)
    o = w.shape[0] // c
    x2 = x.reshape(rows, x.shape[-1])
    # (chunks, rows, out): numpy runs one BLAS product per chunk, each into its own contiguous block
    y = np.matmul(x2, w.reshape(c, o, w.shape[1]).transpose(0, 2, 1))
    y += b.reshape(c, 1, o)
    return tuple(y[i].reshape(lead + (o,)) for i in range(c))


def _linear_split_shape(x, w, b, chunks=3):
    op = "linear_split"
    if not is_int(chunks) or isinstance(chunks, bool) or chunks < 1:
        raise ShapeError(f"{op}: chunks must be a positive integer, got {chunks!r}")
    dt = _check_linear(op, x, w, b)
    if w.shape[0] is not None and w.shape[0] % chunks:
        raise ShapeError(f"{op}: weight.shape[0]={w.shape[0]} (out_features) is not divisible by chunks={chunks}")
    o = None if w.shape[0] is None else w.shape[0] // chunks
    return tuple(Aval(tuple(x.shape[:-1]) + (o,), dt) for _ in range(chunks))


def _joined(g, ins, out):
    """The chunks' gradients side by side, (..., chunks * out); a chunk
    without one (None) contributes zeros."""
    x = ins[0]
    parts = [np.zeros_like(o) if gi is None else np.broadcast_to(gi, o.shape) for gi, o in zip(g, out)]
    return np.concatenate(parts, axis=-1).astype(x.dtype, copy=False)


def _linear_split_vjp(g, ins, out, chunks=3):
    return linear_p.joint_vjp(_joined(g, ins, out), ins, None)


def _linear_split_vjp_dense(g, ins, out, chunks=3):
    return linear_p.dense_vjp(_joined(g, ins, out), ins, None)


linear_split_p = defprim("linear_split", _linear_split, _linear_split_shape, joint_vjp=_linear_split_vjp,
                         dense_vjp=_linear_split_vjp_dense, multiple_results=True,
                         batch=batch_rows(0, when=lambda x, w, b, chunks=3: len(x.shape) >= 2))


# --------------------------------------------------------------------------
# residual add + layer norm
# --------------------------------------------------------------------------


def _rows(*arrays):
    """Arrays (..., D) as C-contiguous (rows, D), what the kernels take."""
    d = arrays[0].shape[-1]
    return [np.ascontiguousarray(a).reshape(-1, d) for a in arrays]


def _add_layer_norm(x, r, weight, bias, eps=1e-5):
    """``layer_norm(x + r)`` over the last axis, ``* weight + bias`` (Ba et
    al. 2016, eq. 4), for a residual connection followed by a post-norm:
    one pass per row of the Numba kernel
    :func:`~dynnets.autograd.kernels_fused.add_layer_norm_fwd`.

    Parameters
    ----------
    x, r : (..., D)
    weight, bias : (D,)
    eps : float

    Returns
    -------
    (..., D)
    """
    if x.size == 0:
        return np.empty_like(x)
    x2, r2 = _rows(x, r)
    return KF.add_layer_norm_fwd(x2, r2, np.ascontiguousarray(weight), np.ascontiguousarray(bias),
                                 float(eps)).reshape(x.shape)


def _add_layer_norm_shape(x, r, weight, bias, eps=1e-5):
    op = "add_layer_norm"
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) or not eps >= 0:
        raise ShapeError(f"{op}: eps must be a non-negative number, got {eps!r}")
    dt = kernel_floats(op, x=x, r=r, weight=weight, bias=bias)
    if len(x.shape) < 1:
        raise ShapeError(f"{op}: x must have at least one dimension (..., D), got x.shape=()")
    if len(r.shape) != len(x.shape) or not all(dims_match(a, c) for a, c in zip(r.shape, x.shape)):
        raise ShapeError(f"{op}: r.shape={fmt_shape(r.shape)} does not match x.shape={fmt_shape(x.shape)} "
                         f"(the residual sum x + r does not broadcast here)")
    for name, p in (("weight", weight), ("bias", bias)):
        if len(p.shape) != 1 or not dims_match(p.shape[0], x.shape[-1]):
            raise ShapeError(f"{op}: {name}.shape={fmt_shape(p.shape)} does not match the normalised shape "
                             f"({x.shape[-1]},) of x.shape={fmt_shape(x.shape)}")
    shape = tuple(a if a is not None else c for a, c in zip(x.shape, r.shape))
    return Aval(shape, dt)


def _add_layer_norm_vjp(g, ins, out, eps=1e-5):
    x, r, weight, bias = ins
    d = x.shape[-1]
    if x.size == 0:
        z = np.zeros_like(x)
        return z, z, np.zeros(d, x.dtype), np.zeros(d, x.dtype)
    x2, r2, g2 = _rows(x, r, np.broadcast_to(g, x.shape).astype(x.dtype, copy=False))
    ds, dw, db = KF.add_layer_norm_bwd(x2, r2, np.ascontiguousarray(weight), g2, float(eps))
    ds = ds.reshape(x.shape)
    # d(x + r)/dx = d(x + r)/dr = identity: both inputs receive the sum's gradient (as add's VJP)
    return ds, ds, dw, db


add_layer_norm_p = defprim("add_layer_norm", _add_layer_norm, _add_layer_norm_shape, joint_vjp=_add_layer_norm_vjp,
                           batch=batch_rows(0, 1, when=lambda x, r, w, b, eps=1e-5: len(x.shape) >= 2))
