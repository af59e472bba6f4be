"""Selections and layouts: gather_nd, boolean_mask, argwhere, top_k, tile,
pad and stop_gradient (TF1's ``tf.gather_nd``, ``tf.boolean_mask``,
``tf.where(cond)``, ``tf.nn.top_k``, ``tf.tile``, ``tf.pad``,
``tf.stop_gradient``; their public functions live in
:mod:`dynnets.static.array_ops` and :mod:`dynnets.static.nn`).

Index and mask values are checked by the implementations before numpy sees
them (TF1 rejects a negative or too large index where numpy would wrap or
raise its own error). The outputs of ``boolean_mask`` and ``argwhere`` have a
first dimension that depends on the mask's values: their shape rules count
the mask when it is a concrete array (eager mode) and report it unknown
(``None``) otherwise (a static graph).
"""
from __future__ import annotations

import numpy as np

from .core import (BATCH_ELEMENTWISE, Aval, DTypeError, IndexRangeError, ShapeError, batch_rows, defprim, dtype_of,
                   fits, fmt_shape, is_int)

__all__ = ["gather_nd_p", "boolean_mask_p", "argwhere_p", "top_k_p", "tile_p", "stop_gradient_p", "ensure_shape_p"]


# --------------------------------------------------------------------------
# gather_nd
# --------------------------------------------------------------------------

def _nd_index(params, indices):
    """``indices`` (..., K) as a tuple of K index arrays into ``params``,
    after checking every entry lies in ``[0, params.shape[k])``."""
    idx = np.asarray(indices)
    k = idx.shape[-1]
    for j in range(k):
        col = idx[..., j]
        n = params.shape[j]
        if col.size and (col.min() < 0 or col.max() >= n):
            bad = col[(col < 0) | (col >= n)].flat[0]
            raise IndexRangeError(f"gather_nd: indices[..., {j}] = {bad} is out of range for params.shape[{j}]={n} "
                                  f"(params.shape={fmt_shape(params.shape)})")
    return tuple(idx[..., j] for j in range(k))


def _gather_nd(params, indices):
    """``out[i...] = params[indices[i..., 0], ..., indices[i..., K-1]]``."""
    return np.asarray(params[_nd_index(params, indices)])


def _gather_nd_shape(params, indices):
    if dtype_of(indices).kind not in "iu":
        raise DTypeError(f"gather_nd: indices must be integers, got dtype {dtype_of(indices)}")
    if len(indices.shape) < 1:
        raise ShapeError("gather_nd: indices must have at least one dimension (..., K), got a 0-d input")
    k = indices.shape[-1]
    if k is None:
        raise ShapeError(f"gather_nd: the last dimension of indices (the index depth K) must be known, got "
                         f"indices.shape={fmt_shape(indices.shape)}")
    if not 1 <= k <= len(params.shape):
        raise ShapeError(f"gather_nd: indices.shape[-1]={k} must be between 1 and the rank of params "
                         f"(params.shape={fmt_shape(params.shape)})")
    return Aval(tuple(indices.shape[:-1]) + tuple(params.shape[k:]), dtype_of(params))


def _gather_nd_vjp(g, ins, out):
    params, indices = ins
    gp = np.zeros(np.shape(params), dtype=g.dtype)
    np.add.at(gp, _nd_index(gp, indices), g)      # repeated indices accumulate
    return gp


gather_nd_p = defprim("gather_nd", _gather_nd, _gather_nd_shape, vjp=(_gather_nd_vjp, None), nondiff_args=(1,))


# --------------------------------------------------------------------------
# boolean_mask, argwhere: outputs sized by a mask's values
# --------------------------------------------------------------------------

def _mask_index(axis, mask):
    return (slice(None),) * axis + (np.asarray(mask, dtype=bool),)


def _boolean_mask(tensor, mask, axis=0):
    """The entries of ``tensor`` where ``mask`` (which covers dimensions
    ``axis .. axis + mask.ndim - 1``) is true, those dimensions flattened into one."""
    tensor, mask = np.asarray(tensor), np.asarray(mask)
    covered = tensor.shape[axis:axis + mask.ndim]
    if mask.shape != covered:      # dimensions a static graph knew only when it ran
        raise ShapeError(f"boolean_mask: mask.shape={fmt_shape(mask.shape)} does not match tensor.shape[{axis}:"
                         f"{axis + mask.ndim}]={fmt_shape(covered)} (tensor.shape={fmt_shape(tensor.shape)})")
    return np.asarray(tensor[_mask_index(axis, mask)])


def _count(mask):
    """The number of true entries when the mask is a concrete array (eager mode), else unknown."""
    return int(np.count_nonzero(mask)) if isinstance(mask, np.ndarray) else None


def _boolean_mask_shape(tensor, mask, axis=0):
    if dtype_of(mask).kind != "b":
        raise DTypeError(f"boolean_mask: mask must be boolean, got dtype {dtype_of(mask)}")
    m, nd = len(mask.shape), len(tensor.shape)
    if m == 0:
        raise ShapeError("boolean_mask: mask cannot be a scalar (0-d)")
    if not is_int(axis) or axis < 0:
        raise ShapeError(f"boolean_mask: axis must be a non-negative integer, got {axis!r}")
    if axis + m > nd:
        raise ShapeError(f"boolean_mask: a mask of {m} dimensions from axis {axis} does not fit tensor.shape="
                         f"{fmt_shape(tensor.shape)}")
    covered = tuple(tensor.shape[axis:axis + m])
    if not fits(tuple(mask.shape), covered):
        raise ShapeError(f"boolean_mask: mask.shape={fmt_shape(mask.shape)} does not match tensor.shape[{axis}:"
                         f"{axis + m}]={fmt_shape(covered)} (tensor.shape={fmt_shape(tensor.shape)})")
    return Aval(tuple(tensor.shape[:axis]) + (_count(mask),) + tuple(tensor.shape[axis + m:]), dtype_of(tensor))


def _boolean_mask_vjp(g, ins, out, axis=0):
    tensor, mask = ins
    gt = np.zeros(np.shape(tensor), dtype=g.dtype)
    gt[_mask_index(axis, mask)] = g             # a mask selects each entry at most once
    return gt


boolean_mask_p = defprim("boolean_mask", _boolean_mask, _boolean_mask_shape, vjp=(_boolean_mask_vjp, None),
                         nondiff_args=(1,))


def _argwhere(condition):
    """The coordinates (n, ndim) int64 of the true entries of ``condition``, in row-major order."""
    return np.argwhere(np.asarray(condition)).astype(np.int64, copy=False)


def _argwhere_shape(condition):
    if dtype_of(condition).kind != "b":
        raise DTypeError(f"argwhere: condition must be boolean, got dtype {dtype_of(condition)}")
    if len(condition.shape) == 0:
        # a scalar's value may be lost in its aval (a numpy bool), and its coordinates are empty anyway
        raise ShapeError("argwhere: condition must have at least one dimension, got a 0-d input")
    return Aval((_count(condition), len(condition.shape)), np.dtype(np.int64))


argwhere_p = defprim("argwhere", _argwhere, _argwhere_shape, differentiable=False)


# --------------------------------------------------------------------------
# top_k
# --------------------------------------------------------------------------

def _top_k(x, k):
    """The ``k`` largest entries along the last axis, largest first (equal
    values: the lower index first, as TF1), and their int32 indices."""
    x = np.asarray(x)
    if k > x.shape[-1]:            # a last dimension a static graph knew only when it ran
        raise ShapeError(f"top_k: input must have at least k={k} columns, got input.shape={fmt_shape(x.shape)}")
    # a stable sort of the negated values keeps equal entries in index order;
    # NaN sorts last in numpy, so -x puts NaN last too (TF1 leaves NaN order unspecified)
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32)


def _top_k_shape(x, k):
    if not is_int(k) or k < 0:
        raise ShapeError(f"top_k: k must be a non-negative integer, got {k!r}")
    if len(x.shape) < 1:
        raise ShapeError("top_k: input must have at least one dimension, got a 0-d input")
    if dtype_of(x).kind not in "iuf":
        raise DTypeError(f"top_k: input must be real numbers, got dtype {dtype_of(x)}")
    n = x.shape[-1]
    if n is not None and k > n:
        raise ShapeError(f"top_k: input must have at least k={k} columns, got input.shape={fmt_shape(x.shape)}")
    lead = tuple(x.shape[:-1]) + (k,)
    return Aval(lead, dtype_of(x)), Aval(lead, np.dtype(np.int32))


def _top_k_vjp(g, ins, out, k):
    x = ins[0]
    gv = g[0]
    gx = np.zeros(np.shape(x), dtype=np.asarray(x).dtype)
    if gv is not None:
        np.put_along_axis(gx, np.asarray(out[1], dtype=np.int64), gv, axis=-1)   # indices are distinct per row
    return (gx,)


def _top_k_rows(x, k):
    return len(x.shape) >= 2


top_k_p = defprim("top_k", _top_k, _top_k_shape, joint_vjp=_top_k_vjp, multiple_results=True,
                  batch=batch_rows(0, when=_top_k_rows))


# --------------------------------------------------------------------------
# tile (pad: primitives.shape's pad_p serves tf.pad too)
# --------------------------------------------------------------------------

def _tile(x, multiples):
    return np.tile(x, multiples)


def _multiples(op, attr, value, nd):
    if not isinstance(value, tuple) or not all(is_int(m) and m >= 0 for m in value):
        raise ShapeError(f"{op}: {attr} must be a tuple of non-negative integers, got {value!r}")
    if len(value) != nd:
        raise ShapeError(f"{op}: {attr} has {len(value)} entries, the input {nd} dimensions")


def _tile_shape(x, multiples):
    _multiples("tile", "multiples", multiples, len(x.shape))
    return Aval(tuple(None if d is None else d * m for d, m in zip(x.shape, multiples)), dtype_of(x))


def _tile_vjp(g, ins, out, multiples):
    shape = np.shape(ins[0])
    # out[m0*d0 + i0, ...] = x[i0, ...]: split each axis into (multiple, size) and sum the multiples
    split = [n for m, d in zip(multiples, shape) for n in (m, d)]
    return g.reshape(split).sum(axis=tuple(range(0, 2 * len(shape), 2))).astype(g.dtype, copy=False)


def _keeps_first_axis(x, multiples=None, **_):
    if len(x.shape) < 1:
        return False
    return multiples[0] == 1


tile_p = defprim("tile", _tile, _tile_shape, vjp=(_tile_vjp,), batch=batch_rows(0, when=_keeps_first_axis))

# --------------------------------------------------------------------------
# stop_gradient
# --------------------------------------------------------------------------

def _identity(x):
    return np.asarray(x)


# not differentiable: eager bind records nothing for it and symbolic gradients
# stop at it, which is the whole point (TF1's tf.stop_gradient, torch's detach)
stop_gradient_p = defprim("stop_gradient", _identity, lambda x: Aval(tuple(x.shape), dtype_of(x)),
                          differentiable=False, batch=BATCH_ELEMENTWISE)


# --------------------------------------------------------------------------
# ensure_shape
# --------------------------------------------------------------------------

def _ensure_shape(x, shape):
    """``x`` itself once its shape is checked to be ``shape`` (None: any size)."""
    x = np.asarray(x)
    if not fits(x.shape, shape):
        raise ValueError(f"ensure_shape: shape of tensor {fmt_shape(x.shape)} is not compatible with expected "
                         f"shape {fmt_shape(shape)}")
    return x


def _ensure_shape_rule(x, shape):
    if not (isinstance(shape, tuple) and all(d is None or is_int(d) and d >= 0 for d in shape)):
        raise ShapeError(f"ensure_shape: shape must be a tuple of non-negative ints or None, got {shape!r}")
    if x.shape is None:
        # the one rule that gives an input of unknown rank (a placeholder without a shape) its rank
        return Aval(shape, dtype_of(x))
    if not fits(tuple(x.shape), shape):
        raise ShapeError(f"ensure_shape: shape of tensor {fmt_shape(x.shape)} is not compatible with expected "
                         f"shape {fmt_shape(shape)}")
    return Aval(tuple(a if a is not None else b for a, b in zip(x.shape, shape)), dtype_of(x))


# TF1's tf.ensure_shape: the static shape refined (an unknown rank made known), the run-time one checked
ensure_shape_p = defprim("ensure_shape", _ensure_shape, _ensure_shape_rule,
                         vjp=(lambda g, ins, out, shape: g,), vjp_reads=((),))


# --------------------------------------------------------------------------
# sort and cumsum (PyTorch's sort / argsort / topk and cumsum; issue 22)
# --------------------------------------------------------------------------

def _axis_in(op, axis, shape):
    """``axis`` as a non-negative axis of ``shape``; a 0-d input takes -1 and 0, as torch's."""
    nd = max(len(shape), 1)
    if not is_int(axis):
        raise DTypeError(f"{op}: dim must be an integer, got {axis!r}")
    if not -nd <= axis < nd:
        raise IndexRangeError(f"{op}: dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but "
                              f"got {axis}); input.shape={fmt_shape(shape)}")
    return int(axis) % nd


def _sort(x, axis=-1, descending=False, stable=False):
    """The values of ``x`` sorted along ``axis`` and their int64 indices.
    Equal values keep their order (stable, whatever ``stable`` says: a stable
    order is one of the orders torch's unstable sort may give); NaN is the
    largest value, as torch's."""
    x = np.asarray(x)
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    if not descending:
        idx = np.argsort(x, axis=axis, kind="stable")
    else:
        # a stable descending order: sort the reversed axis ascending, then
        # reverse the result and map its positions back (negation would not
        # keep equal values in order, nor work for unsigned or bool)
        n = x.shape[axis]
        idx = (n - 1) - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    idx = idx.astype(np.int64, copy=False)
    return np.take_along_axis(x, idx, axis=axis), idx


def _sort_shape(x, axis=-1, descending=False, stable=False):
    if dtype_of(x).kind not in "biuf":
        raise DTypeError(f"sort: input must be real numbers or booleans, got dtype {dtype_of(x)}")
    _axis_in("sort", axis, tuple(x.shape))
    for nm, v in (("descending", descending), ("stable", stable)):
        if not isinstance(v, (bool, np.bool_)):
            raise DTypeError(f"sort: {nm} must be a bool, got {v!r}")
    shape = tuple(x.shape)
    return Aval(shape, dtype_of(x)), Aval(shape, np.dtype(np.int64))


def _sort_vjp(g, ins, out, axis=-1, descending=False, stable=False):
    gv = g[0]
    x = ins[0]
    if gv is None:
        return (np.zeros(np.shape(x), dtype=np.asarray(x).dtype),)
    if np.ndim(x) == 0:
        return (gv,)
    gx = np.zeros(np.shape(x), dtype=gv.dtype)
    np.put_along_axis(gx, out[1], gv, axis=axis)       # a permutation: no index repeats
    return (gx,)


sort_p = defprim("sort", _sort, _sort_shape, joint_vjp=_sort_vjp, multiple_results=True, vjp_reads=("out",))


def _cumsum(x, axis=0):
    x = np.asarray(x)
    if x.ndim == 0:
        return x.astype(np.int64) if x.dtype.kind in "biu" else x.copy()
    # integers and booleans sum in int64, as torch's (numpy: the platform int)
    return np.cumsum(x, axis=axis, dtype=np.int64 if x.dtype.kind in "biu" else None)


def _cumsum_shape(x, axis=0):
    if dtype_of(x).kind not in "biufc":
        raise DTypeError(f"cumsum: expected a numeric input, got dtype {dtype_of(x)}")
    _axis_in("cumsum", axis, tuple(x.shape))
    return Aval(tuple(x.shape), np.dtype(np.int64) if dtype_of(x).kind in "biu" else dtype_of(x))


def _cumsum_vjp(g, ins, out, axis=0):
    if g.ndim == 0:
        return g
    # out[i] = sum_{j <= i} x[j], so dx[j] = sum_{i >= j} g[i]: a reversed cumulative sum
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


cumsum_p = defprim("cumsum", _cumsum, _cumsum_shape, vjp=(_cumsum_vjp,), vjp_reads=((),))

__all__ += ["sort_p", "cumsum_p"]
