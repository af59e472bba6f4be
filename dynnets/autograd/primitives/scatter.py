"""Scatters and value-dependent counts: scatter, scatter_add (torch's
``Tensor.scatter`` / ``scatter_add``, and through them ``index_add``), unique
and bincount (whose output sizes depend on the input's values: their shape
rules count them when the input is a concrete array, eager mode, and report
the size unknown, ``None``, otherwise).

Index values are checked before numpy sees them: torch rejects a negative or
too large index where numpy would wrap or raise its own error.
"""
from __future__ import annotations

import numpy as np

from .core import (Aval, DTypeError, IndexRangeError, ShapeError, defprim, dims_match, dtype_of, fmt_shape, is_int,
                   norm_axis)

__all__ = ["scatter_p", "scatter_add_p", "unique_p", "bincount_p"]


# --------------------------------------------------------------------------
# scatter, scatter_add
# --------------------------------------------------------------------------

def _positions(index, dim):
    """The index tuple of every position of ``index`` in a target, with
    ``index``'s values along ``dim`` and the position itself elsewhere
    (``out[index[i][j]][j]`` for ``dim`` 0)."""
    nd = index.ndim
    return tuple(index if d == dim else np.arange(s).reshape((1,) * d + (s,) + (1,) * (nd - d - 1))
                 for d, s in enumerate(index.shape))


def _src_part(index):
    """The leading block of ``src`` that ``index`` covers (``src`` may be larger, as torch allows)."""
    return tuple(slice(0, s) for s in index.shape)


def _check_values(op, x, index, dim):
    n = x.shape[dim]
    if index.size:
        lo, hi = index.min(), index.max()
        if lo < 0 or hi >= n:
            raise IndexRangeError(f"{op}: index {lo if lo < 0 else hi} is out of bounds for dimension {dim} with "
                                  f"size {n}")


def _scatter_shape_of(op, x, index, src, dim):
    if not is_int(dim):
        raise DTypeError(f"{op}: dim must be an integer, got {dim!r}")
    if dtype_of(index) != np.int64:
        raise DTypeError(f"{op}: index must be an int64 tensor, got dtype {dtype_of(index)}")
    if dtype_of(src) != dtype_of(x):
        raise DTypeError(f"{op}: expected src.dtype to be equal to self.dtype ({dtype_of(x)}), got {dtype_of(src)}")
    xs, ks, ss = tuple(x.shape), tuple(index.shape), tuple(src.shape)
    if not (len(xs) == len(ks) == len(ss)):
        raise ShapeError(f"{op}: index and src must have as many dimensions as self, got self.shape={fmt_shape(xs)}, "
                         f"index.shape={fmt_shape(ks)}, src.shape={fmt_shape(ss)}")
    if not xs:
        raise ShapeError(f"{op}: self must have at least one dimension, got a 0-d input")
    d = norm_axis(op, dim, len(xs))[0]
    for k, (a, b, c) in enumerate(zip(ks, xs, ss)):
        if a is not None and c is not None and a > c:
            raise ShapeError(f"{op}: index.shape[{k}]={a} is larger than src.shape[{k}]={c} (index.shape="
                             f"{fmt_shape(ks)}, src.shape={fmt_shape(ss)})")
        if k != d and a is not None and b is not None and a > b:
            raise ShapeError(f"{op}: index.shape[{k}]={a} is larger than self.shape[{k}]={b} (index.shape="
                             f"{fmt_shape(ks)}, self.shape={fmt_shape(xs)}; only dimension {d} may differ)")
    return Aval(xs, dtype_of(x))


def _scatter(x, index, src, dim):
    """``out = x`` with ``out[index[i][j]][j] = src[i][j]`` (``dim`` 0; and so on);
    an index repeated along ``dim`` keeps one of its values (torch: unspecified which)."""
    index = np.asarray(index)
    dim = dim % x.ndim
    _check_values("scatter", x, index, dim)
    out = np.array(x, copy=True)
    out[_positions(index, dim)] = np.asarray(src)[_src_part(index)]
    return out


def _scatter_shape(x, index, src, dim):
    return _scatter_shape_of("scatter", x, index, src, dim)


def _scatter_vjp_x(g, ins, out, dim):
    # the overwritten positions take nothing from x
    index = np.asarray(ins[1])
    gx = np.array(g, copy=True)
    gx[_positions(index, dim % gx.ndim)] = 0
    return gx


def _scatter_vjp_src(g, ins, out, dim):
    # torch's rule: grad.gather(dim, index) (with repeated indices each source gets the gradient)
    _, index, src = ins
    index = np.asarray(index)
    gs = np.zeros(np.shape(src), dtype=g.dtype)
    gs[_src_part(index)] = g[_positions(index, dim % g.ndim)]
    return gs


scatter_p = defprim("scatter", _scatter, _scatter_shape, vjp=(_scatter_vjp_x, None, _scatter_vjp_src),
                    nondiff_args=(1,), vjp_reads=((1,), (), (1,)))


def _scatter_add(x, index, src, dim):
    """``out = x`` with ``out[index[i][j]][j] += src[i][j]`` (``dim`` 0; and so
    on); repeated indices add up."""
    index = np.asarray(index)
    dim = dim % x.ndim
    _check_values("scatter_add", x, index, dim)
    out = np.array(x, copy=True)
    np.add.at(out, _positions(index, dim), np.asarray(src)[_src_part(index)])
    return out


def _scatter_add_shape(x, index, src, dim):
    return _scatter_shape_of("scatter_add", x, index, src, dim)


def _scatter_add_vjp_x(g, ins, out, dim):
    return g


scatter_add_p = defprim("scatter_add", _scatter_add, _scatter_add_shape,
                        vjp=(_scatter_add_vjp_x, None, _scatter_vjp_src), nondiff_args=(1,),
                        vjp_reads=((), (), (1,)))


# --------------------------------------------------------------------------
# unique, bincount (no gradients, as torch's)
# --------------------------------------------------------------------------

def _unique(x):
    """``(values, inverse, counts)``: the sorted distinct values (1-D), for
    each element of ``x`` the position of its value (``x``'s shape, int64), and
    how often each value occurs (int64)."""
    v, inv, cnt = np.unique(np.asarray(x), return_inverse=True, return_counts=True)
    return v, inv.reshape(np.shape(x)).astype(np.int64, copy=False), cnt.astype(np.int64, copy=False)


def _unique_shape(x):
    if dtype_of(x).kind not in "biuf":
        raise DTypeError(f"unique: expected a bool, integer or floating-point tensor, got dtype {dtype_of(x)}")
    n = None if isinstance(x, Aval) else len(np.unique(x))
    if n is None and None not in tuple(x.shape) and int(np.prod(tuple(x.shape))) <= 1:
        n = int(np.prod(tuple(x.shape)))          # one element (or none): whatever its value
    i64 = np.dtype(np.int64)
    return Aval((n,), dtype_of(x)), Aval(tuple(x.shape), i64), Aval((n,), i64)


unique_p = defprim("unique", _unique, _unique_shape, multiple_results=True, differentiable=False)


def _bincount(x, weights, minlength):
    """How often each value ``0..max(x)`` occurs in the 1-D non-negative
    integer ``x`` (at least ``minlength`` bins), or the sum of ``weights`` at
    its positions."""
    x = np.asarray(x)
    if x.size and x.min() < 0:
        raise IndexRangeError(f"bincount: input must be non-negative, got {x.min()}")
    w = np.asarray(weights)
    try:
        if w.ndim == 0:
            return np.bincount(x, minlength=minlength).astype(np.int64, copy=False)
        return np.bincount(x, w, minlength=minlength).astype(_bincount_dtype(w.dtype), copy=False)
    except MemoryError:
        raise ShapeError(f"bincount: {max(int(x.max()) + 1, minlength)} bins (max(input) + 1) do not fit in "
                         f"memory") from None


def _bincount_dtype(wdt):
    # torch: float32 weights sum in float32, any other dtype gives float64
    return np.dtype(np.float32) if wdt == np.float32 else np.dtype(np.float64)


def _bincount_shape(x, weights, minlength):
    if dtype_of(x).kind not in "iu" or len(x.shape) != 1:
        raise DTypeError(f"bincount: input must be a 1-d non-negative integer tensor, got dtype {dtype_of(x)} and "
                         f"shape {fmt_shape(x.shape)}")
    if not is_int(minlength) or minlength < 0:
        raise ShapeError(f"bincount: minlength must be a non-negative integer, got {minlength!r}")
    if len(weights.shape) == 0:
        dt = np.dtype(np.int64)
    else:
        if len(weights.shape) != 1 or not dims_match(weights.shape[0], x.shape[0]):
            raise ShapeError(f"bincount: weights should be 1-d and have the same length as input, got "
                             f"weights.shape={fmt_shape(weights.shape)} and input.shape={fmt_shape(x.shape)}")
        if dtype_of(weights).kind not in "biuf":
            raise DTypeError(f"bincount: weights must be numbers, got dtype {dtype_of(weights)}")
        dt = _bincount_dtype(dtype_of(weights))
    n = None
    if not isinstance(x, Aval):
        n = max(int(x.max()) + 1 if x.size else 0, minlength)
    return Aval((n,), dt)


bincount_p = defprim("bincount", _bincount, _bincount_shape, differentiable=False)
