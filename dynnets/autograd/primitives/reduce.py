"""Reductions: sum, mean, max, argmax and prod, and PyTorch's vector norm
(``torch.linalg.vector_norm``)."""
from __future__ import annotations

import math

import numpy as np

from .core import (BATCH_REDUCE, batch_rows, Aval, DTypeError, ShapeError, defprim, dtype_of, fmt_shape, is_int,
                   norm_axis, shape_of)

__all__ = ["sum_p", "mean_p", "max_p", "argmax_p", "norm_p", "prod_p"]


def _reduce_shape(name):
    def rule(x, axis=None, keepdims=False):
        if x.shape is None and axis is None:
            # all axes of an input of unknown rank: a scalar (of that unknown rank with keepdims)
            ax, shp = None, (None if keepdims else ())
        else:
            ax = norm_axis(name, axis, len(x.shape))
        if x.shape is None:
            pass
        elif ax is None:
            shp = (1,) * len(x.shape) if keepdims else ()
        elif keepdims:
            shp = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
        else:
            shp = tuple(d for i, d in enumerate(x.shape) if i not in ax)
        dt = dtype_of(x)
        if name == "mean" and dt.kind not in "fc":
            # as torch.mean: the mean of integers has no dtype to be computed in (numpy's float64
            # would be a silent difference)
            raise DTypeError(f"mean: expected a floating-point input, got dtype {dt} (as torch.mean: cast "
                             f"first, x.float().mean())")
        elif name == "sum" and dt.kind in "biu":
            dt = _sum_dtype(dt)
        return Aval(shp, dt)
    rule.__name__ = f"{name}_shape"
    return rule


def _sum_dtype(dt):
    """torch's sum of booleans and integers of any width or sign is int64
    (numpy's of unsigned ones is uint64, where ``x.sum() - 500`` wraps)."""
    return np.dtype(np.int64)


def _expand_to(g, shape, axis, keepdims):
    """Adjoint of a reduction: ``g`` repeated along the reduced axes."""
    # A fresh array rather than np.broadcast_to's read-only view: broadcast_to
    # costs ~1.8 us of Python per call, empty+copyto ~0.5 us, and the result is
    # writeable, so a leaf can keep it without another copy.
    out = np.empty(shape, dtype=g.dtype)
    if axis is None and not keepdims:
        out.fill(g)           # a whole-tensor reduction's scalar: fill costs less than copyto
        return out
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    np.copyto(out, g)
    return out


def _sum(x, axis=None, keepdims=False):
    # the ufunc method directly: np.sum adds ~0.8 us of Python dispatch (and
    # positional arguments parse faster than keywords)
    if x.dtype.kind == "u":
        return np.add.reduce(x, axis, np.int64, keepdims=keepdims)
    if keepdims:
        return np.add.reduce(x, axis, keepdims=True)
    return np.add.reduce(x, axis)


def _mean(x, axis=None, keepdims=False):
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "f":
        return np.add.reduce(x, axis=axis, keepdims=keepdims) / _count(x.shape, axis)
    return np.mean(x, axis=axis, keepdims=keepdims)


def _count(shape, axis):
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else axis
    return math.prod(shape[a] for a in axes)


def _sum_vjp(g, ins, out, axis=None, keepdims=False):
    x = ins[0]
    try:
        shape = x.shape
    except AttributeError:
        shape = np.shape(x)
    if axis is None and not keepdims:
        # a whole-tensor sum (the usual loss): _expand_to's first case inline
        gx = np.empty(shape, dtype=g.dtype)
        gx.fill(g)
        return gx
    return _expand_to(g, shape, axis, keepdims)


sum_p = defprim("sum", _sum, _reduce_shape("sum"), vjp=(_sum_vjp,), vjp_reads=((),),
                native=lambda gen, ins, attrs: gen.reduce(ins, attrs, mean=False),
                native_vjp=(lambda gen, ins, attrs: gen.reduce_vjp(ins, attrs, mean=False),),
    batch=BATCH_REDUCE)

mean_p = defprim("mean", _mean, _reduce_shape("mean"),
                 vjp=(lambda g, ins, out, axis=None, keepdims=False:
                      _expand_to(g / _count(shape_of(ins[0]), axis), shape_of(ins[0]), axis, keepdims),),
                 vjp_reads=((),), native=lambda gen, ins, attrs: gen.reduce(ins, attrs, mean=True),
                 native_vjp=(lambda gen, ins, attrs: gen.reduce_vjp(ins, attrs, mean=True),),
    batch=BATCH_REDUCE)


def _max(x, axis=None, keepdims=False):
    return np.max(x, axis=axis, keepdims=keepdims)


def _max_vjp(g, ins, out, axis=None, keepdims=False):
    x = ins[0]
    o = out if (keepdims or axis is None and np.ndim(out) == x.ndim) else (
        np.expand_dims(out, axis) if axis is not None else out)
    mask = (x == o)
    # ties share the gradient evenly (the subgradient PyTorch's amax uses)
    count = mask.sum(axis=axis, keepdims=True)
    gg = g if (keepdims or axis is None) else np.expand_dims(g, axis)
    return (mask * (gg / count)).astype(x.dtype, copy=False)


def _max_shape(x, axis=None, keepdims=False):
    ax = norm_axis("max", axis, len(x.shape))
    for a in (ax or range(len(x.shape))):
        if x.shape[a] == 0:
            raise ShapeError(f"max: cannot reduce over axis {a} of size 0 (x.shape={fmt_shape(x.shape)})")
    return _reduce_shape("max")(x, axis, keepdims)


max_p = defprim("max", _max, _max_shape, vjp=(_max_vjp,), vjp_reads=((0, "out"),),
    batch=BATCH_REDUCE)


def _argmax(x, axis=None):
    return np.asarray(np.argmax(x, axis=axis))


def _argmax_shape(x, axis=None):
    if axis is None:
        return Aval((), np.dtype(np.int64))
    nd = len(x.shape)
    if not -nd <= axis < nd:
        raise ShapeError(f"argmax: axis {axis} is out of range for an input with {nd} dimensions")
    return Aval(tuple(d for i, d in enumerate(x.shape) if i != axis % nd), np.dtype(np.int64))


def _argmax_rows(x, axis=None):
    """An argmax over an axis other than 0 is row-wise."""
    return axis is not None and len(x.shape) >= 2 and is_int(axis) and axis % len(x.shape) != 0


argmax_p = defprim("argmax", _argmax, _argmax_shape, differentiable=False, batch=batch_rows(0, when=_argmax_rows))


def _vector_norm(x, ord=2.0, axis=None, keepdims=False):
    """The ``ord``-norm over ``axis`` (all by default), as
    ``torch.linalg.vector_norm``: ``(sum |x|^ord)^(1/ord)``, inf/-inf the
    max/min of ``|x|``, 0 the number of non-zeros."""
    x = np.asarray(x)
    if ord == 2.0:
        r = np.sqrt(np.add.reduce(x * x, axis=axis, keepdims=keepdims))
    elif ord == 1.0:
        r = np.add.reduce(np.abs(x), axis=axis, keepdims=keepdims)
    elif ord == np.inf:
        r = np.max(np.abs(x), axis=axis, keepdims=keepdims)
    elif ord == -np.inf:
        r = np.min(np.abs(x), axis=axis, keepdims=keepdims)
    elif ord == 0.0:
        r = np.add.reduce((x != 0).astype(x.dtype), axis=axis, keepdims=keepdims)
    else:
        r = np.add.reduce(np.abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    return np.asarray(r, dtype=x.dtype)


def _norm_shape(x, ord=2.0, axis=None, keepdims=False):
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise DTypeError(f"norm: ord must be a number (or inf), got {ord!r}")
    if dtype_of(x).kind != "f":
        raise DTypeError(f"norm: expected a floating-point input, got dtype {dtype_of(x)} (as torch: cast first, "
                         f"x.float())")
    nd = len(x.shape)
    ax = norm_axis("norm", axis, nd)
    if abs(ord) == np.inf:
        for a in (range(nd) if ax is None else ax):
            if x.shape[a] == 0:
                raise ShapeError(f"norm: the {ord} norm of an empty dimension has no value (x.shape="
                                 f"{fmt_shape(x.shape)}, dimension {a})")
    if ax is None:
        shp = (1,) * nd if keepdims else ()
    elif keepdims:
        shp = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
    else:
        shp = tuple(d for i, d in enumerate(x.shape) if i not in ax)
    return Aval(shp, dtype_of(x))


def _sgn(x):
    """sign(x), 0 at NaN (as torch's sgn; np.sign gives NaN)."""
    return np.greater(x, 0).astype(x.dtype) - np.less(x, 0)


def _norm_vjp(g, ins, out, ord=2.0, axis=None, keepdims=False):
    """PyTorch's norm_backward: 0 where the norm is 0 (for ord >= 1), the
    gradient shared among the maxima for inf."""
    x = np.asarray(ins[0])
    nd = x.ndim
    if not keepdims and nd:
        ax = tuple(range(nd)) if axis is None else axis
        g = np.expand_dims(g, ax)
        out = np.expand_dims(out, ax)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ord == 0.0:
            r = np.zeros_like(x)
        elif ord == 1.0:
            r = _sgn(x) * g
        elif ord == 2.0:
            r = g * np.where(out == 0, 0, x / out)
        elif abs(ord) == np.inf:
            a = np.abs(x)
            mask = (a == out) | np.isnan(a)
            r = _sgn(x) * (g / mask.sum(axis=axis, keepdims=True)) * mask
        elif ord < 1.0:
            scaled = _sgn(x) * np.where(x == 0, 0, np.abs(x) ** (ord - 1))
            r = scaled * g * out ** (1 - ord)
        elif ord < 2.0:
            r = _sgn(x) * np.abs(x) ** (ord - 1) * np.where(out == 0, 0, g / out ** (ord - 1))
        else:
            r = x * np.abs(x) ** (ord - 2) * np.where(out == 0, 0, g / out ** (ord - 1))
    return np.broadcast_to(r, x.shape).astype(x.dtype)


def _norm_rows(x, ord=2.0, axis=None, keepdims=False):
    """A norm over axes other than 0 is row-wise."""
    nd = len(x.shape)
    if axis is None or nd < 2:
        return False
    axes = (axis,) if is_int(axis) else tuple(axis)
    return all(is_int(a) and a % nd != 0 for a in axes)


norm_p = defprim("norm", _vector_norm, _norm_shape, vjp=(_norm_vjp,), batch=batch_rows(0, when=_norm_rows))


def _prod(x, axis=None, keepdims=False):
    """The product over ``axis`` (one int, or all dimensions for None), as
    ``torch.prod``: booleans and integers multiply in int64."""
    dt = np.int64 if x.dtype.kind in "biu" else None
    return np.asarray(np.prod(x, axis=axis, dtype=dt, keepdims=keepdims))


def _prod_shape(x, axis=None, keepdims=False):
    if dtype_of(x).kind not in "biuf":
        raise DTypeError(f"prod: expected a numeric input, got dtype {dtype_of(x)}")
    if axis is not None and not is_int(axis):
        raise DTypeError(f"prod: dim must be an integer or None, got {axis!r}")
    out = _reduce_shape("prod")(x, axis, keepdims)
    return Aval(out.shape, np.dtype(np.int64) if dtype_of(x).kind in "biu" else dtype_of(x))


def _prod_vjp(g, ins, out, axis=None, keepdims=False):
    x = ins[0]
    # d prod / d x_i is the product of the others: exclusive cumulative products
    # from the left and from the right give it exactly, also where x has zeros
    # (one zero: only its own entry has a non-zero gradient; two: none has), as
    # torch's prod_backward, with no division by x
    xs = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    if xs.shape[-1] == 0:
        return np.zeros(x.shape, dtype=x.dtype)       # an empty product: no entry to differentiate
    ones = np.ones(xs.shape[:-1] + (1,), dtype=x.dtype)
    left = np.cumprod(np.concatenate([ones, xs[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(xs[..., 1:], -1)], axis=-1), axis=-1), -1)
    if axis is None:
        return (np.asarray(g).reshape(()) * (left * right)).reshape(x.shape).astype(x.dtype, copy=False)
    gg = np.asarray(g) if keepdims else np.expand_dims(g, axis)
    return (np.moveaxis(left * right, -1, axis) * gg).astype(x.dtype, copy=False)


prod_p = defprim("prod", _prod, _prod_shape, vjp=(_prod_vjp,), vjp_reads=((0,),))
