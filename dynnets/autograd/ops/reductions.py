"""Reductions, scans and sorts along dimensions: ``sum``, ``mean``, ``var``
/ ``std``, ``max`` / ``min`` (with indices, as torch's named tuple
:class:`MaxMin`), ``argmax``, ``all`` / ``any``, ``logsumexp``, ``prod``,
``norm``, ``cumsum``, ``sort`` / ``argsort`` / ``topk`` (:class:`SortResult`).
Each takes torch's ``dim=`` / ``keepdim=`` and numpy's ``axis=`` /
``keepdims=`` (one of each pair), as ``np.sum(t)`` calls the method."""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from .. import primitives as P
from ..engine import bind, bind1, bind2
from ..values import is_interpreted
from .arguments import array_of, dim_or_axis, dtype_of, int_arg, known_dim, normalized_axis, python_number, truth
from .elementwise import abs, add, astype, div, eq, exp, log, maximum, minimum, mul, neg, sqrt, sub
from .array import getitem, reshape, squeeze, unsqueeze, where

__all__ = ["sum", "mean", "var", "std", "MaxMin", "max", "min", "argmax", "argmin", "norm", "all", "any",
           "SortResult", "sort", "argsort", "topk", "cumsum", "logsumexp", "prod"]


def _axis(axis, op):
    if isinstance(axis, list):
        axis = tuple(axis)
    if axis == ():
        # torch's dim=() reduces every dimension, numpy's axis=() none: either reading would
        # silently surprise the other's users
        raise P.ShapeError(f"{op}: an empty tuple of dimensions reduces every dimension in PyTorch and none in "
                           f"numpy; pass dim=None to reduce all (or skip the {op})")
    return axis


def _keep(op, keepdims, keepdim):
    """PyTorch's ``keepdim=`` (default False) beside numpy's ``keepdims=``
    (default None: not given); one of them."""
    if keepdims is None:
        return bool(keepdim)
    if keepdim:
        raise TypeError(f"{op}: got both keepdims={keepdims!r} and keepdim={keepdim!r}; they name the same "
                        f"argument, pass one")
    return bool(keepdims)


# The defaults are not passed: an application without attributes is checked
# and recorded with less work (a whole-tensor sum is the usual loss).

def _numpy_call(op, x, dtype, out):
    """``x`` cast to ``dtype`` (torch's ``sum(dtype=)``), for the keywords
    numpy passes when ``np.sum(t)`` / ``np.mean(t)`` defer to the method."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (dynnets ops return new tensors), got {type(out).__name__}")
    return x if dtype is None else astype(x, dtype)


def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None, out=None):
    """Sum over ``dim`` (an int or a tuple; all dimensions by default), as
    ``torch.sum``; ``dtype=`` casts the input first; numpy's ``axis=`` /
    ``keepdims=`` are accepted too (so ``np.sum(t, axis=0)`` works)."""
    x = input
    if dtype is not None or out is not None:
        x = _numpy_call("sum", x, dtype, out)
    if dim is not None or axis is not None:
        axis = dim_or_axis("sum", axis, dim)
    keepdims = _keep("sum", keepdims, keepdim) if keepdim or keepdims is not None else False
    if axis is None and not keepdims:
        return bind1(P.sum_p, x)
    return bind(P.sum_p, x, axis=_axis(axis, "sum"), keepdims=True if keepdims else False)


# numpy's np.mean(t) calls t.mean(axis=, dtype=, out=None), passing out= explicitly; torch code never
# passes it: the default tells the two callers apart
_NO_OUT = object()


def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None, out=_NO_OUT):
    """Mean over ``dim`` (all dimensions by default), as :func:`sum`. The mean of
    integers or booleans raises, as ``torch.mean`` (cast first:
    ``(pred == labels).float().mean()``), except when numpy asks:
    ``np.mean(pred == labels)`` is numpy's float64 mean, the accuracy."""
    x = input
    if out is not _NO_OUT:
        if dtype is None and out is None and dtype_of(x).kind in "biu":
            dtype = np.float64          # numpy's meaning of np.mean over integers and booleans
        x = _numpy_call("mean", x, dtype, out)
    elif dtype is not None:
        x = _numpy_call("mean", x, dtype, None)
    if dim is not None or axis is not None:
        axis = dim_or_axis("mean", axis, dim)
    keepdims = _keep("mean", keepdims, keepdim) if keepdim or keepdims is not None else False
    if axis is None and not keepdims:
        return bind1(P.mean_p, x)
    return bind(P.mean_p, x, axis=_axis(axis, "mean"), keepdims=True if keepdims else False)


def _correction(op, unbiased, correction):
    """torch's ``correction`` (default 1, Bessel's) or its legacy ``unbiased``
    (a bool, default True: the same 1); ``unbiased=False`` with a
    ``correction`` is a contradiction torch refuses too."""
    if not isinstance(unbiased, (bool, np.bool_)):
        raise TypeError(f"{op}: unbiased must be a bool, got {unbiased!r}")
    if correction is None:
        return 1 if unbiased else 0
    if not unbiased:
        raise TypeError(f"{op}: got both unbiased=False and correction={correction!r}; pass one (unbiased=False "
                        f"is correction=0)")
    if isinstance(correction, bool) or not isinstance(correction, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: correction must be a number, got {correction!r}")
    return python_number(correction)


def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """The variance over ``dim`` (all dimensions by default), as ``torch.var``:
    ``sum((x - mean)^2) / (N - correction)`` with ``correction=1`` (Bessel's)
    by default; the legacy ``unbiased`` (``var(x, False)``, ``var(x, dim,
    False)``) is ``correction=1`` or ``0``. Where ``N - correction <= 0``
    the result is inf (nan for a zero sum), as torch's. A composite of
    mean, sub, mul, sum and div: gradients come from their VJPs."""
    x = input
    if isinstance(dim, (bool, np.bool_)):          # torch.var(x, unbiased)
        dim, unbiased = None, dim
    dim = dim_or_axis("var", axis, dim)
    keep = _keep("var", keepdims, keepdim)
    corr = _correction("var", unbiased, correction)
    if dtype_of(x).kind not in "fc":
        raise P.DTypeError(f"var: std and var only support floating point and complex dtypes, got {dtype_of(x)} "
                           f"(as torch: cast first, x.float())")
    shp = tuple(x.shape)
    if isinstance(dim, list):
        dim = tuple(dim)
    if dim == ():
        dim = None
    axes = P.norm_axis("var", dim, len(shp))
    axes = tuple(range(len(shp))) if axes is None else axes
    d = sub(x, mean(x, dim, keepdim=True))
    s = sum(mul(d, d), dim, keepdim=keep)
    sizes = [shp[a] for a in axes]
    if None in sizes:
        # an unknown dimension of a static value: N counted in the graph
        n = sum(add(mul(x, 0), 1), dim, keepdim=keep)
        return div(s, sub(n, corr))
    n = 1
    for k in sizes:
        n *= k
    dof = n - corr
    if dof <= 0:
        warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel).", UserWarning, stacklevel=2)
        with np.errstate(invalid="ignore"):          # 0 * inf: torch's nan, warned about above
            return mul(s, float("inf"))
    return div(s, float(dof))


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """The standard deviation, ``sqrt(var(...))``, as ``torch.std`` (see
    :func:`var`); its gradient is 0 where it is 0 (torch's std_backward),
    where sqrt's alone would give 0 * inf = nan."""
    v = var(input, dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims)
    zero = eq(v, 0)
    # sqrt of 1 where v is 0 keeps its gradient finite; the outer where sends none there
    return where(zero, 0.0, sqrt(where(zero, 1.0, v)))


class _ValuesIndices(tuple):
    """``(values, indices)``, a named tuple as PyTorch's ``torch.return_types``."""

    __slots__ = ()

    def __new__(cls, values, indices):
        return tuple.__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]

    def __repr__(self):
        return f"{type(self).__name__}(values={self[0]!r}, indices={self[1]!r})"


class MaxMin(_ValuesIndices):
    """``(values, indices)`` of ``max(x, dim)`` / ``min(x, dim)`` (``torch.return_types.max``)."""

    __slots__ = ()


def _max_along(op, x, d, keep, largest):
    """PyTorch's ``max(x, dim)``: the values (the gradient goes to the selected
    element only, as PyTorch's) and their int64 indices along ``d``."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an integer, got {d!r}")
    nd = len(x.shape)
    ax = normalized_axis(op, int(d), builtins.max(nd, 1))
    src = x if largest else neg(x)
    if nd and x.shape[ax] == 0:
        raise P.ShapeError(f"{op}: cannot reduce dimension {ax} of size 0 (x.shape={tuple(x.shape)})")
    idx = bind(P.argmax_p, src, axis=ax) if nd else bind(P.argmax_p, src)
    if is_interpreted(x):
        # a graph's value: its maximum (the values at idx are not known yet to index with)
        values = bind(P.max_p, src, axis=ax, keepdims=keep)
        values = values if largest else neg(values)
    elif nd == 0:
        values = getitem(x, ())
    else:
        at = array_of(idx)
        grid = list(np.ogrid[tuple(builtins.slice(n) for n in at.shape)])
        grid.insert(ax, at)
        values = getitem(x, tuple(grid))
        if keep:
            values = unsqueeze(values, ax)
    if keep and nd:
        idx = unsqueeze(idx, ax)
    return MaxMin(values, idx)


def _is_array_like(y):
    return isinstance(y, (float, np.ndarray)) or hasattr(y, "shape")


def max(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """The maximum, as ``torch.max``: of all elements by default; with ``dim``
    (``x.max(dim)``) a :class:`MaxMin` ``(values, indices)``; with a tensor
    as the second argument (or ``other=``) the elementwise :func:`maximum`
    (``torch.max(x, y)``). numpy's ``axis=`` (an int or a tuple) gives the
    values only."""
    x = input
    if other is not None:
        if dim is not None:
            raise TypeError("max: got both dim and other; max(input, other) is the elementwise maximum")
        return maximum(x, other)
    if dim is not None:
        if not isinstance(dim, (int, np.integer)) and _is_array_like(dim):
            return maximum(x, dim)
        if axis is not None:
            raise TypeError(f"max: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
        return _max_along("max", x, dim, _keep("max", keepdims, keepdim), True)
    keepdims = _keep("max", keepdims, keepdim)
    if axis is None and not keepdims:
        return bind1(P.max_p, x)
    return bind(P.max_p, x, axis=_axis(axis, "max"), keepdims=True if keepdims else False)


def min(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """As :func:`max`, for the minimum."""
    x = input
    if other is not None:
        if dim is not None:
            raise TypeError("min: got both dim and other; min(input, other) is the elementwise minimum")
        return minimum(x, other)
    if dim is not None:
        if not isinstance(dim, (int, np.integer)) and _is_array_like(dim):
            return minimum(x, dim)
        if axis is not None:
            raise TypeError(f"min: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
        return _max_along("min", x, dim, _keep("min", keepdims, keepdim), False)
    if axis is not None:
        axis = _axis(axis, "min")
    return neg(max(neg(x), axis=axis, keepdims=_keep("min", keepdims, keepdim)))


def argmax(input, dim=None, keepdim=False, *, axis=None):
    """Indices (int64) of the maxima along ``dim`` (numpy's ``axis=``; of the
    flattened input by default), as ``torch.argmax``; no gradient."""
    x = input
    axis = dim_or_axis("argmax", axis, dim)
    out = bind(P.argmax_p, x) if axis is None else bind(P.argmax_p, x, axis=axis)
    if keepdim:
        out = unsqueeze(out, axis) if axis is not None else reshape(out, *([1] * len(x.shape)))
    return out


def argmin(input, dim=None, keepdim=False, *, axis=None):
    """Indices (int64) of the minima, as :func:`argmax`."""
    return argmax(neg(input), dim_or_axis("argmin", axis, dim), keepdim)


_NORM_ALIASES = {"fro": 2.0, "euclidean": 2.0}


def norm(input, p="fro", dim=None, keepdim=False, *, axis=None, keepdims=None):
    """The vector ``p``-norm over ``dim`` (all dimensions by default), as
    ``torch.norm``: ``'fro'`` (the default) is the 2-norm of the elements
    (also over a pair of dimensions: the Frobenius norm); a number ``p`` is
    ``(sum |x|^p)^(1/p)`` over ``dim`` (one or several dimensions, as
    torch's), ``inf``/``-inf`` the largest/smallest ``|x|``, 0 the count of
    non-zeros. The nuclear norm ``'nuc'`` is not computed (an error). The
    gradient is 0 where the norm is 0, as torch's. ``axis=``/``keepdims=``
    are numpy's spellings."""
    if axis is not None:
        dim = dim_or_axis("norm", axis, dim)
    if keepdims is not None:
        keepdim = _keep("norm", keepdims, keepdim)
    if isinstance(p, str):
        if p not in _NORM_ALIASES:
            raise ValueError(f"norm: p={p!r} is not supported (vector norms: 'fro', or a number; the nuclear norm "
                             f"'nuc' needs an SVD, which dynnets does not compute)")
        if dim is not None and not isinstance(dim, (int, np.integer)) and len(dim) > 2:
            raise P.ShapeError(f"norm: p='fro' takes at most 2 dimensions, got dim={dim!r}")
        p = _NORM_ALIASES[p]
    elif p is None:
        p = 2.0
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"norm: p must be 'fro' or a number, got {p!r}")
    if isinstance(dim, list):
        dim = tuple(dim)
    if dim == ():
        dim = None          # torch reduces every dimension for an empty tuple
    attrs = {"ord": float(p)}
    if dim is not None:
        attrs["axis"] = dim
    if keepdim:
        attrs["keepdims"] = True
    return bind(P.norm_p, input, **attrs)


def _logical_reduce(op, input, dim, keepdim, count_false):
    t = truth(op, input)
    counted = bind2(P.equal_p, t, False) if count_false else t
    if dim is None:
        if keepdim:
            n = bind(P.sum_p, astype(counted, np.int64), axis=tuple(builtins.range(len(input.shape))),
                     keepdims=True)
        else:
            n = bind1(P.sum_p, astype(counted, np.int64))
    else:
        n = sum(astype(counted, np.int64), dim, keepdim)
    r = bind2(P.equal_p, n, 0) if count_false else bind2(P.greater_p, n, 0)
    # torch keeps uint8 for uint8 input (the old mask dtype); every other input gives bool
    return astype(r, np.uint8) if np.dtype(input.dtype) == np.uint8 else r


def _numpy_keywords(op, dim, keepdim, axis, keepdims, out):
    """``(dim, keepdim)`` from torch's and numpy's keywords: ``np.all(t)``
    calls ``t.all(axis=None, out=None)``."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (dynnets ops return new tensors), got {type(out).__name__}")
    return dim_or_axis(op, axis, dim), _keep(op, keepdims, keepdim)


def all(input, dim=None, keepdim=False, *, axis=None, keepdims=None, out=None):
    """Whether every element is nonzero (over ``dim``, an int or a tuple;
    all of them by default), as ``torch.all`` / ``Tensor.all``: a boolean
    tensor (uint8 for uint8 input, as torch's). numpy's ``axis=`` /
    ``keepdims=`` are accepted too (``np.all(t)`` calls the method)."""
    dim, keepdim = _numpy_keywords("all", dim, keepdim, axis, keepdims, out)
    return _logical_reduce("all", input, dim, keepdim, True)


def any(input, dim=None, keepdim=False, *, axis=None, keepdims=None, out=None):
    """Whether some element is nonzero (over ``dim``), as ``torch.any``."""
    dim, keepdim = _numpy_keywords("any", dim, keepdim, axis, keepdims, out)
    return _logical_reduce("any", input, dim, keepdim, False)


class SortResult(_ValuesIndices):
    """``(values, indices)`` of :func:`sort` and :func:`topk` (``torch.return_types.sort`` / ``topk``)."""

    __slots__ = ()


def _flag(op, name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be a bool, got {v!r}")
    return bool(v)


def sort(input, dim=-1, descending=False, stable=False):
    """``input`` sorted along ``dim`` (ascending unless ``descending``),
    with the int64 indices of the sorted elements, as ``torch.sort``: a
    ``(values, indices)`` named tuple. Equal elements keep their order
    (torch guarantees it with ``stable=True``; any order is valid without);
    NaN counts as the largest value. The gradient goes back to the sorted
    positions."""
    d, _ = known_dim("sort", input, dim)
    v, i = bind(P.sort_p, input, axis=d, descending=_flag("sort", "descending", descending),
                stable=_flag("sort", "stable", stable))
    return SortResult(v, i)


def argsort(input, dim=-1, descending=False, stable=False):
    """The int64 indices that sort ``input`` along ``dim``, as ``torch.argsort``."""
    return sort(input, dim, descending, stable)[1]


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (``largest=False``: smallest) elements along
    ``dim`` and their int64 indices, as ``torch.topk``: a ``(values,
    indices)`` named tuple, largest first (smallest first) also with
    ``sorted=False`` (torch then promises no order). Equal elements come in
    index order."""
    d, n = known_dim("topk", input, dim)
    k = int_arg("topk", "k", k)
    _flag("topk", "sorted", sorted)
    if not 0 <= k <= n:
        raise P.ShapeError(f"topk: selected index k out of range: k={k} for dimension {d} of size {n} "
                           f"(input.shape={tuple(input.shape)})")
    v, i = sort(input, d, descending=_flag("topk", "largest", largest), stable=True)
    if k == n or not len(input.shape):
        return SortResult(v, i)
    part = (builtins.slice(None),) * d + (builtins.slice(0, k),)
    return SortResult(getitem(v, part), getitem(i, part))


def cumsum(input, dim, *, dtype=None):
    """Cumulative sums along ``dim``, as ``torch.cumsum``: integer and
    boolean input sums in int64; ``dtype=`` casts the input first. The
    gradient is the reversed cumulative sum of the output's."""
    x = input if dtype is None else astype(input, dtype)
    d, _ = known_dim("cumsum", x, dim)
    return bind(P.cumsum_p, x, axis=d)


def _float_input(op, x):
    """``x``, or ``x`` in float32 when it holds integers or booleans (torch
    computes those ops in its default float dtype)."""
    return x if dtype_of(x).kind == "f" else astype(x, np.float32)


def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(input), dim))``, as ``torch.logsumexp`` (``dim`` an int
    or a tuple; an integer input in float32): the largest entry is taken
    out first, so no exp overflows; rows of -inf give -inf, as torch's.
    The gradient is ``softmax(input)`` along ``dim`` times the output's.

    Shapes: ``input`` (...) -> ``input`` without ``dim`` (kept as 1 with ``keepdim``).
    """
    if dim is None or isinstance(dim, (bool, np.bool_)):
        raise TypeError(f"logsumexp: dim must be an int or a tuple of ints, got {dim!r}")
    x = _float_input("logsumexp", input)
    axis = _axis(dim, "logsumexp")
    m = bind(P.stop_gradient_p, bind(P.max_p, x, axis=axis, keepdims=True))
    # an infinite maximum would give inf - inf = nan: shift by 0 there instead
    m = where(eq(abs(m), np.inf), np.zeros((), dtype_of(m)), m)
    out = add(log(bind(P.sum_p, exp(sub(x, m)), axis=axis, keepdims=True)), m)
    return out if keepdim else squeeze(out, axis)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product of all elements, or over ``dim`` (one int), as
    ``torch.prod``; ``dtype=`` casts the input first; integers and booleans
    multiply in int64. The gradient is the product of the other entries,
    exact where the input has zeros (as torch's)."""
    x = input if dtype is None else astype(input, dtype)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"prod: dim must be an int (torch.prod reduces one dimension), got {dim!r}")
    if dim is None:
        return bind(P.prod_p, x, keepdims=True) if keepdim else bind(P.prod_p, x)
    return bind(P.prod_p, x, axis=dim, keepdims=bool(keepdim))
