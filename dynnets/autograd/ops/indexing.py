"""Gathers, scatters, masks and index sets: ``gather``, ``index_select``,
``masked_fill``, ``scatter`` / ``scatter_add`` / ``index_add``, ``nonzero``,
``unique``, ``bincount``, ``tril`` / ``triu``. Index arguments carry no
gradient; the gradient flows to the values gathered or scattered."""
from __future__ import annotations

import builtins

import numpy as np

from .. import primitives as P
from ..engine import bind
from ..values import as_operand, is_interpreted, require_concrete
from .arguments import array_of, int_arg, known_dim, truth
from .elementwise import astype
from .array import getitem, nonzero_tuple, reshape, where

__all__ = ["gather", "masked_fill", "index_select", "scatter", "scatter_add", "index_add", "tril", "triu",
           "nonzero", "unique", "bincount"]


def gather(input, dim, index):
    """``out[i][j] = input[index[i][j]][j]`` (``dim`` 0; and so on), as
    ``torch.gather(input, dim, index)``; the gradient is scattered back
    (repeated indices add up). ``index`` has the input's number of
    dimensions and is no larger than it outside ``dim``.
    (``dynnets.static.gather`` is TF1's: rows at indices, :func:`take`.)"""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"gather: dim must be an integer, got {dim!r} (torch's order is gather(input, dim, index))")
    return bind(P.gather_p, input, as_operand(index), dim=int(dim))


def masked_fill(input, mask, value):
    """``input`` with ``value`` where the boolean ``mask`` is true (the two
    broadcast together), as ``torch.masked_fill``; the value takes the
    input's dtype (an integer tensor filled with 1.5 holds 1, as torch's). A
    0-d tensor ``value`` gets the gradient of the filled positions."""
    m = as_operand(mask)
    if np.dtype(m.dtype) != np.bool_:
        raise P.DTypeError(f"masked_fill: mask must be boolean, got dtype {m.dtype} (as torch: compare first, "
                           f"mask != 0)")
    dt = np.dtype(input.dtype)
    if hasattr(value, "shape") and not isinstance(value, (np.ndarray, np.generic)):
        if len(tuple(value.shape)):
            raise P.ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got shape "
                               f"{tuple(value.shape)}")
        v = value if np.dtype(value.dtype) == dt else astype(value, dt)
    else:
        v = np.asarray(value)
        if v.ndim:
            raise P.ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got shape {v.shape}")
        v = v.astype(dt)
    return where(m, v, input)


def index_select(input, dim, index):
    """The entries of ``input`` at ``index`` (a 1-D or 0-D int64/int32
    tensor) along ``dim``, as ``torch.index_select``; repeated indices add
    their gradients. An index outside ``[0, size)`` raises (numpy would wrap
    a negative one)."""
    if not len(input.shape):
        raise P.ShapeError("index_select: input must have at least one dimension, got a 0-d input")
    d, n = known_dim("index_select", input, dim)
    idx = array_of(index)
    if is_interpreted(idx):
        require_concrete("index_select", "index", idx, " (use dynnets.static.gather)")
    if not hasattr(idx, "dtype"):
        raise TypeError(f"index_select: index must be a tensor, got {type(index).__name__}")
    idx = np.asarray(idx)
    if idx.dtype not in (np.int64, np.int32):
        raise P.DTypeError(f"index_select: expected dtype int32 or int64 for index, got {idx.dtype}")
    if idx.ndim > 1:
        raise P.ShapeError(f"index_select: index is supposed to be a vector, got shape {idx.shape}")
    idx = idx.reshape(-1).astype(np.int64, copy=False)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise P.IndexRangeError(f"index_select: index {bad} is out of range for dimension {d} of size {n}")
    return getitem(input, (builtins.slice(None),) * d + (idx,))


def _concrete_index(op, index, name="index"):
    """``index`` (int64 or int32, as torch takes) as an int64 numpy array;
    a static value has no values to check and is refused."""
    idx = require_concrete(op, name, index)
    if idx.dtype not in (np.int64, np.int32):
        raise P.DTypeError(f"{op}: expected dtype int64 (or int32) for {name}, got {idx.dtype}")
    return idx.astype(np.int64, copy=False)


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """``input`` with ``out[index[i][j]][j] = src[i][j]`` (``dim`` 0; and so on),
    as ``torch.scatter(input, dim, index, src)``; ``src`` may be a number
    (``scatter(input, dim, index, value)``, torch's overload). ``index`` is
    int64 with ``input``'s number of dimensions, no larger than ``src``, and
    no larger than ``input`` outside ``dim``. Gradients: ``input`` gets
    ``g`` outside the written positions, ``src`` ``g.gather(dim, index)``.
    ``reduce="add"`` is :func:`scatter_add`; torch's other (deprecated)
    reductions raise.

    Shapes: input (*), index (*) int64, src (*) -> (*) as input.
    """
    if src is None and value is None:
        raise TypeError("scatter: missing src (a tensor) or value (a number)")
    if src is not None and value is not None:
        raise TypeError("scatter: takes src or value, not both")
    if value is not None:
        src = value
    idx = _concrete_index("scatter", index)
    if not hasattr(src, "shape") or isinstance(src, np.generic):
        if isinstance(src, bool) or not isinstance(src, (int, float, np.integer, np.floating, np.bool_)):
            raise TypeError(f"scatter: src must be a tensor or a number, got {type(src).__name__}")
        src = np.full(idx.shape, src, dtype=np.dtype(input.dtype))
    if reduce is not None:
        if reduce == "add":
            return scatter_add(input, dim, idx, src)
        raise ValueError(f"scatter: reduce={reduce!r} is not supported (torch deprecates it): use "
                         f"scatter_add for 'add' or scatter_reduce")
    return bind(P.scatter_p, input, idx, src, dim=int_arg("scatter", "dim", dim))


def scatter_add(input, dim, index, src):
    """``input`` with ``out[index[i][j]][j] += src[i][j]`` (``dim`` 0; and so
    on; repeated indices add up), as ``torch.scatter_add``. Gradients:
    ``input`` gets ``g``, ``src`` ``g.gather(dim, index)``.

    Shapes: input (*), index (*) int64, src (*) -> (*) as input.
    """
    idx = _concrete_index("scatter_add", index)
    return bind(P.scatter_add_p, input, idx, src, dim=int_arg("scatter_add", "dim", dim))


def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` added at the positions ``index`` along
    ``dim`` (``out[index[i]] += alpha * source[i]`` for ``dim`` 0; repeated
    indices add up), as ``torch.index_add``; differentiable in ``input`` and
    ``source`` (a :func:`scatter_add` with the index broadcast along the
    other dimensions).

    Shapes: input (*), index (n,) int64 (or int32), source as input with
    ``n`` along ``dim`` -> input's shape.
    """
    d, n = known_dim("index_add", input, dim)
    idx = require_concrete("index_add", "index", index)
    if idx.dtype not in (np.int64, np.int32):
        raise P.DTypeError(f"index_add: expected dtype int32 or int64 for index, got {idx.dtype}")
    if idx.ndim > 1:
        raise P.ShapeError(f"index_add: index is supposed to be a vector, got shape {idx.shape}")
    idx = idx.reshape(-1).astype(np.int64, copy=False)
    if np.dtype(source.dtype) != np.dtype(input.dtype):
        raise P.DTypeError(f"index_add: self ({np.dtype(input.dtype)}) and source ({np.dtype(source.dtype)}) must "
                           f"have the same dtype")
    xs, ss = tuple(input.shape), tuple(source.shape)
    want = xs[:d] + (idx.size,) + xs[d + 1:] if xs else (idx.size,)
    if (ss or (1,)) != want:
        raise P.ShapeError(f"index_add: source.shape={ss} must be input.shape={xs} with len(index)={idx.size} "
                           f"along dim {d}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise P.IndexRangeError(f"index_add: index {bad} is out of range for dimension {d} of size {n}")
    if not xs:
        input, source = reshape(input, 1), reshape(source, 1)
    full = np.broadcast_to(idx.reshape((1,) * d + (-1,) + (1,) * (len(want) - d - 1)), want).copy()
    if alpha != 1:
        source = source * alpha
    out = bind(P.scatter_add_p, input, full, source, dim=d)
    return reshape(out, ()) if not xs else out


def _triangle(op, input, diagonal, lower):
    if len(input.shape) < 2:
        raise P.ShapeError(f"{op}: input tensor must have at least 2 dimensions, got shape {tuple(input.shape)}")
    k = int_arg(op, "diagonal", diagonal)
    r, c = input.shape[-2:]
    if r is None or c is None:
        raise P.ShapeError(f"{op}: the last two dimensions of input.shape={tuple(input.shape)} must be known")
    keep = np.tri(r, c, k, dtype=bool) if lower else ~np.tri(r, c, k - 1, dtype=bool)
    return masked_fill(input, ~keep, 0)


def tril(input, diagonal=0):
    """The lower triangle of the last two dimensions (``j - i <= diagonal``
    kept, the rest 0), as ``torch.tril``; differentiable."""
    return _triangle("tril", input, diagonal, True)


def triu(input, diagonal=0):
    """The upper triangle of the last two dimensions (``j - i >= diagonal``
    kept, the rest 0), as ``torch.triu``; differentiable."""
    return _triangle("triu", input, diagonal, False)


def nonzero(input, *, as_tuple=False):
    """The coordinates of the nonzero entries, as ``torch.nonzero``: an int64
    tensor (n, ndim) in row-major order, or with ``as_tuple=True`` one int64
    tensor (n,) per dimension (``torch.where(condition)``)."""
    if as_tuple:
        return nonzero_tuple(input)
    t = truth("nonzero", input)
    if not len(input.shape):
        return getitem(bind(P.argwhere_p, reshape(t, 1)), (builtins.slice(None), builtins.slice(0, 0)))
    return bind(P.argwhere_p, t)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of ``input`` (flattened, in ascending order), as
    ``torch.unique``; with ``return_inverse`` also each element's position in
    them (input's shape, int64), with ``return_counts`` how often each occurs
    (int64). ``sorted=False`` gives them sorted as well (torch leaves that
    order unspecified). No gradient, as torch's. ``dim=`` is not supported
    (NotImplementedError).
    """
    if dim is not None:
        raise NotImplementedError("unique: dim= (unique slices) is not supported; flatten the slices to rows of a "
                                  "structured comparison, or call unique without dim")
    values, inverse, counts = bind(P.unique_p, input)
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def bincount(input, weights=None, minlength=0):
    """How often each value ``0..max(input)`` occurs in the 1-D non-negative
    int ``input`` (at least ``minlength`` bins; int64), or the sums of
    ``weights`` (float32 weights: float32, other dtypes: float64), as
    ``torch.bincount``; no gradient, as torch's."""
    if weights is None:
        weights = np.zeros((), np.int64)         # a 0-d array: no weights (the primitive's convention)
    elif not len(weights.shape):
        raise P.ShapeError("bincount: weights should be 1-d and have the same length as input, got a 0-d tensor")
    return bind(P.bincount_p, input, weights, minlength=int_arg("bincount", "minlength", minlength))
