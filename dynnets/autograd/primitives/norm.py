"""Layer normalisation as one primitive (Ba et al. 2016, eq. 4), with its
optional elementwise affine transform fused in; forward and VJP are the
Numba row kernels ``layer_norm_fwd`` / ``layer_norm_bwd`` (one pass per row:
4-5x faster than the numpy passes, ``benchmarks/bench_layers.py``)."""
from __future__ import annotations

import numpy as np

from .. import kernels as K
from .core import (Aval, DTypeError, ShapeError, batch_rows, defprim, dims_match, dtype_of, fmt_shape, is_int,
                   is_kernel_float)

__all__ = ["layer_norm_p"]


def _rows(x, weight, bias, ndim):
    """x as C-contiguous (rows, D) and weight, bias as (D,) arrays of the
    kernels' dtype (float16 computes in float32): what the kernels take."""
    kd = x.dtype if is_kernel_float(x.dtype) else np.dtype(np.float32)
    d = int(np.prod(x.shape[x.ndim - ndim:]))
    x2 = np.ascontiguousarray(x, dtype=kd).reshape(-1, d)
    w = np.ones(d, kd) if weight is None else np.ascontiguousarray(weight, dtype=kd).reshape(d)
    b = np.zeros(d, kd) if bias is None else np.ascontiguousarray(bias, dtype=kd).reshape(d)
    return x2, w, b


def _layer_norm(x, weight=None, bias=None, ndim=1, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing
    ``ndim`` axes of ``x`` (..., *S); ``weight`` and ``bias`` of shape S, each
    optional (``bias`` only after ``weight``)."""
    if x.size == 0:
        return np.empty_like(x)
    x2, w, b = _rows(x, weight, bias, ndim)
    return K.layer_norm_fwd(x2, w, b, float(eps)).reshape(x.shape).astype(x.dtype, copy=False)


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
    x = ins[0]
    weight = ins[1] if len(ins) > 1 else None
    tail = x.shape[x.ndim - ndim:]
    if x.size == 0:
        return (np.zeros_like(x),) + tuple(np.zeros(tail, x.dtype) for _ in ins[1:])
    x2, w, _ = _rows(x, weight, None, ndim)
    g2 = np.ascontiguousarray(np.broadcast_to(g, x.shape), dtype=x2.dtype).reshape(x2.shape)
    dx, dw, db = K.layer_norm_bwd(x2, w, g2, float(eps))
    res = [dx.reshape(x.shape).astype(x.dtype, copy=False)]
    if weight is not None:
        res.append(dw.reshape(tail).astype(x.dtype, copy=False))
    if len(ins) > 2:
        res.append(None if ins[2] is None else db.reshape(tail).astype(x.dtype, copy=False))
    return tuple(res)


def _row_wise(x, *params, ndim=1, eps=1e-5):
    """Normalising axes other than 0 keeps the rows of axis 0 apart."""
    return is_int(ndim) and len(x.shape) > ndim


layer_norm_p = defprim("layer_norm", _layer_norm, _layer_norm_shape, joint_vjp=_layer_norm_vjp,
                       batch=batch_rows(0, when=_row_wise))
