"""Layer normalisation as one primitive (Ba et al. 2016, eq. 4), with its
optional elementwise affine transform fused in."""
from __future__ import annotations

import numpy as np

from .core import Aval, DTypeError, ShapeError, batch_rows, defprim, dims_match, dtype_of, fmt_shape, is_int

__all__ = ["layer_norm_p"]


def _stats(x, ndim, eps):
    """(xhat, rstd): the normalised input and ``1 / sqrt(var + eps)`` (biased
    variance over the trailing ``ndim`` axes, kept as size-1 axes)."""
    axes = tuple(range(x.ndim - ndim, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    return xc * rstd, rstd


def _layer_norm(x, weight=None, bias=None, ndim=1, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing
    ``ndim`` axes of ``x`` (..., *S); ``weight`` and ``bias`` of shape S, each
    optional (``bias`` only after ``weight``)."""
    if x.size == 0:
        return np.empty_like(x)
    out, _ = _stats(x, ndim, eps)
    if weight is not None:
        out *= weight
    if bias is not None:
        out += bias
    return out.astype(x.dtype, copy=False)


def _layer_norm_shape(x, weight=None, bias=None, ndim=1, eps=1e-5):
    name = "layer_norm"
    if not is_int(ndim) or isinstance(ndim, bool) or ndim < 1:
        raise ShapeError(f"{name}: ndim (the number of normalised trailing axes) must be a positive integer, "
                         f"got {ndim!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) or not eps >= 0:
        raise ShapeError(f"{name}: eps must be a non-negative number, got {eps!r}")
    dt = dtype_of(x)
    if dt.kind != "f":
        raise DTypeError(f"{name}: expected a floating-point input, got dtype {dt}")
    if len(x.shape) < ndim:
        raise ShapeError(f"{name}: input.shape={fmt_shape(x.shape)} has fewer than ndim={ndim} dimensions")
    tail = tuple(x.shape[len(x.shape) - ndim:])
    for what, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        if dtype_of(p) != dt:
            raise DTypeError(f"{name}: {what}.dtype={dtype_of(p)} does not match input.dtype={dt}")
        if len(p.shape) != ndim or not all(dims_match(a, b) for a, b in zip(p.shape, tail)):
            raise ShapeError(f"{name}: {what}.shape={fmt_shape(p.shape)} does not match the normalised shape "
                             f"{fmt_shape(tail)} of input.shape={fmt_shape(x.shape)}")
    return Aval(tuple(x.shape), dt)


def _layer_norm_vjp(g, ins, out, ndim=1, eps=1e-5):
    # dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g * weight: the
    # mean and the variance each take their share of the gradient back
    x = ins[0]
    weight = ins[1] if len(ins) > 1 else None
    has_bias = len(ins) > 2 and ins[2] is not None
    lead = tuple(range(x.ndim - ndim))
    if x.size == 0:
        z = np.zeros_like(x)
        tail = x.shape[x.ndim - ndim:]
        rest = tuple(np.zeros(tail, x.dtype) for _ in ins[1:])
        return (z,) + rest
    g = np.broadcast_to(g, x.shape)
    axes = tuple(range(x.ndim - ndim, x.ndim))
    xhat, rstd = _stats(x, ndim, eps)
    gh = g * weight if weight is not None else g
    dx = rstd * (gh - gh.mean(axis=axes, keepdims=True) - xhat * np.mean(gh * xhat, axis=axes, keepdims=True))
    res = [dx.astype(x.dtype, copy=False)]
    if weight is not None:
        res.append(np.asarray((g * xhat).sum(axis=lead), dtype=x.dtype))
    if len(ins) > 2:
        res.append(np.asarray(g.sum(axis=lead), dtype=x.dtype) if has_bias else None)
    return tuple(res)


def _row_wise(x, *params, ndim=1, eps=1e-5):
    """Normalising axes other than 0 keeps the rows of axis 0 apart."""
    return is_int(ndim) and len(x.shape) > ndim


layer_norm_p = defprim("layer_norm", _layer_norm, _layer_norm_shape, joint_vjp=_layer_norm_vjp,
                       batch=batch_rows(0, when=_row_wise))
