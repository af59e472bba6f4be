"""Shapes, views, joins and splits, basic indexing and ``where``: torch's
"indexing, slicing, joining" ops that the rest build on (``reshape``,
``getitem``, ``concat``, ``split``, ``expand``...). ``where`` lives here
because its one-argument form is :func:`nonzero_tuple`, a getitem of the
coordinates, and ``expand`` of a boolean value of unknown shape is a
``where``."""
from __future__ import annotations

import builtins

import numpy as np

from .. import primitives as P
from ..engine import bind
from ..values import as_operand
from .arguments import array_of, dim_or_axis, int_arg, known_dim, normalized_axis, python_number, shape_tuple, truth
from .elementwise import clone, promoted

__all__ = ["where", "Size", "size", "numel", "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute",
           "t", "broadcast_to", "index_arg", "getitem", "take", "concat", "cat", "stack", "split", "array_split",
           "chunk", "pad", "expand", "expand_as", "repeat", "narrow", "unbind", "nonzero_tuple", "flip"]


def where(condition, input=None, other=None):
    """``input`` where ``condition`` else ``other``, as ``torch.where``;
    gradients flow to ``input`` and ``other`` only. ``where(condition)``
    alone is ``nonzero(condition, as_tuple=True)``: a tuple of int64 index
    tensors, one per dimension."""
    if input is None and other is None:
        return nonzero_tuple(condition)
    if input is None or other is None:
        raise TypeError("where: takes (condition) or (condition, input, other), got only one of input and other")
    c = as_operand(condition, bool)
    input, other = python_number(input), python_number(other)    # a numpy scalar is weak in torch, as a Python number
    try:
        return bind(P.where_p, c, input, other)
    except P.PromotionNeeded:
        return promoted(P.where_p, c, input, other)


class Size(tuple):
    """A shape, as ``torch.Size``: a tuple (equal to the plain tuple of the
    same sizes, printed as one) that ``x.size()`` returns, so that
    ``Tensor(x.size())`` and ``x.new(x.size())`` read it as a shape, as
    torch's legacy constructors do (a plain tuple there is data).
    ``x.shape`` stays numpy's plain tuple: it is read on hot paths."""

    __slots__ = ()

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if type(i) is builtins.slice else r

    def __add__(self, other):
        return Size(tuple.__add__(self, other))

    def numel(self):
        """The number of elements of a tensor of this shape."""
        n = 1
        for d in self:
            n *= d
        return n


def size(x, dim=None):
    """``x.shape`` as a :class:`Size`, or the size of dimension ``dim`` (as ``torch.Tensor.size``)."""
    shp = Size(x.shape)
    if dim is None:
        return shp
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"size: dim must be an integer, got {dim!r}")
    nd = len(shp)
    if not -builtins.max(nd, 1) <= dim < builtins.max(nd, 1):
        raise IndexError(f"size: dimension out of range (expected to be in range of [{-builtins.max(nd, 1)}, "
                         f"{builtins.max(nd, 1) - 1}], but got {dim})")
    return shp[dim] if nd else 1


def numel(input):
    """The number of elements (as ``torch.numel``)."""
    shp = tuple(input.shape)
    return int(np.prod(shp, dtype=np.int64)) if None not in shp else None


def reshape(input, *sizes, shape=None):
    """``input`` with the given shape (``reshape(x, 2, 3)``, ``reshape(x, (2,
    3))`` or torch's keyword ``reshape(x, shape=(2, 3))``); one dimension
    may be -1 (inferred), and an unknown dimension of a static value
    (``None``, as in ``x.shape``) is inferred the same way."""
    x = input
    if shape is not None:
        if sizes:
            raise TypeError(f"reshape: got the shape twice ({sizes!r} and shape={shape!r})")
        sizes = (shape,)
    shape = shape_tuple(sizes)
    if None in shape:
        if shape.count(None) + shape.count(-1) > 1:
            raise P.ShapeError(f"reshape: at most one dimension of shape={shape} can be inferred (None or -1); "
                               f"x.shape={x.shape}")
        shape = tuple(-1 if d is None else d for d in shape)
    return bind(P.reshape_p, x, shape=shape)


def flatten(input, start_dim=0, end_dim=-1):
    """``input`` with dimensions ``start_dim..end_dim`` merged into one (all of
    them by default), as ``torch.flatten``."""
    x = input
    shp = list(x.shape)
    if not shp:
        return reshape(x, 1)
    s, e = normalized_axis("flatten", start_dim, len(shp)), normalized_axis("flatten", end_dim, len(shp))
    if s > e:
        raise P.ShapeError(f"flatten: start_dim={start_dim} comes after end_dim={end_dim}")
    if s == 0 and e == len(shp) - 1:
        return reshape(x, -1)
    return reshape(x, *shp[:s], -1, *shp[e + 1:])


def squeeze(input, dim=None, *, axis=None):
    """``input`` without dimension ``dim`` (numpy's ``axis=``) if it has size
    1, else unchanged; a tuple of dimensions removes each of them that has
    size 1; without one, every dimension of size 1 goes (as ``torch.squeeze``)."""
    x = input
    axis = dim_or_axis("squeeze", axis, dim)
    if isinstance(axis, (tuple, list)):
        nd = len(x.shape)
        for ax in sorted({normalized_axis("squeeze", int(a), builtins.max(nd, 1)) for a in axis}, reverse=True):
            x = squeeze(x, ax)
        return x
    shp = list(x.shape)
    if axis is None:
        if None in shp:
            raise P.ShapeError(f"squeeze: x.shape={tuple(shp)} has unknown dimensions; name the one to remove")
        return reshape(x, *[d for d in shp if d != 1])
    ax = normalized_axis("squeeze", axis, len(shp))
    if shp[ax] is None:
        raise P.ShapeError(f"squeeze: dimension {axis} of x.shape={tuple(shp)} is unknown, so whether it is "
                           f"removed (size 1) cannot be decided when the graph is built: reshape instead")
    if shp[ax] == 1:
        del shp[ax]
    if shp.count(None) <= 1:
        return reshape(x, *shp)
    return getitem(x, (slice(None),) * ax + (0,))


def unsqueeze(input, dim=None, *, axis=None):
    """``input`` with a new dimension of size 1 at ``dim`` (numpy's ``axis=``), as ``torch.unsqueeze``."""
    x = input
    axis = dim_or_axis("unsqueeze", axis, dim)
    if axis is None:
        raise TypeError("unsqueeze: missing the dimension (axis= or dim=)")
    shp = list(x.shape)
    ax = normalized_axis("unsqueeze", axis, len(shp) + 1)
    shp.insert(ax, 1)
    if shp.count(None) <= 1:
        return reshape(x, *shp)
    return getitem(x, (slice(None),) * ax + (None,))


def transpose(input, *axes, dim0=None, dim1=None):
    """``transpose(x, dim0, dim1)`` swaps two dimensions (PyTorch's meaning,
    so ``x.transpose(0, 1)`` of a matrix is its transpose; also by keyword,
    ``transpose(x, dim0=0, dim1=1)``); ``transpose(x)`` reverses the
    dimensions and a whole permutation, ``transpose(x, (2, 0, 1))`` or
    ``transpose(x, 2, 0, 1)``, reorders them (numpy's meaning)."""
    x = input
    if dim0 is not None or dim1 is not None:
        if axes or dim0 is None or dim1 is None:
            raise TypeError(f"transpose: expected transpose(input, dim0, dim1), got {axes!r}, dim0={dim0!r}, "
                            f"dim1={dim1!r}")
        axes = (dim0, dim1)
    if len(axes) == 2 and (type(axes[0]) is not int or type(axes[1]) is not int) \
            and isinstance(axes[0], np.integer) and isinstance(axes[1], np.integer):
        axes = (int(axes[0]), int(axes[1]))                     # x.transpose(*np.array([0, 1]))
    if len(axes) == 2 and type(axes[0]) is int and type(axes[1]) is int:
        nd = len(x.shape)
        d0, d1 = (normalized_axis("transpose", a, nd) for a in axes)
        perm = list(range(nd))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return bind(P.transpose_p, x, axes=tuple(perm))
    axes = shape_tuple(axes) if axes else None
    return bind(P.transpose_p, x, axes=axes)


def permute(input, *args, dims=None):
    """The dimensions of ``input`` in the order ``dims`` (as ``torch.permute``;
    ``x.permute(1, 0, 2)``, ``x.permute((1, 0, 2))`` or ``permute(x, dims=(1, 0, 2))``)."""
    x = input
    if dims is not None:
        if args:
            raise TypeError(f"permute: got the dims twice ({args!r} and dims={dims!r})")
        args = (dims,)
    dims = shape_tuple(args)
    if len(dims) != len(x.shape):
        raise P.ShapeError(f"permute: {len(dims)} dims {dims} for an input with {len(x.shape)} dimensions")
    return bind(P.transpose_p, x, axes=dims)


def t(input):
    """``input.T`` of a tensor with at most 2 dimensions (as ``torch.t``)."""
    x = input
    nd = len(x.shape)
    if nd > 2:
        raise P.ShapeError(f"t: expects a tensor with <= 2 dimensions, but x has {nd} (x.shape={tuple(x.shape)}); "
                           f"use permute")
    return transpose(x) if nd == 2 else x


def broadcast_to(input, size):
    """``input`` broadcast to ``size`` (a view), as ``torch.broadcast_to``."""
    return bind(P.broadcast_to_p, input, shape=tuple(size))


def _index_arg(index):
    tp = type(index)
    if tp is int or tp is slice:
        return index
    if tp is tuple:
        return tuple(array_of(i) for i in index)
    if tp is list:
        return np.asarray(index)
    return array_of(index)


def index_arg(index):
    """``index`` as getitem (and ``Tensor.__setitem__``) takes it: tensors in it
    as their arrays, a list as an integer or boolean array."""
    return _index_arg(index)


def getitem(x, index):
    """``x[index]`` with ints, slices, None, Ellipsis and integer arrays (gather)."""
    tp = type(index)
    return bind(P.getitem_p, x, index=index if tp is int or tp is slice else _index_arg(index))


def take(x, indices):
    """Rows of ``x`` at integer ``indices`` (gather along axis 0)."""
    return bind(P.take_p, x, as_operand(indices))


def _no_out(op, out):
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (dynnets ops return new tensors: use the result), got "
                        f"{type(out).__name__}")


def _dim0(op, dim, axis):
    """``dim`` (default 0) or numpy's ``axis=``."""
    if axis is None:
        return dim
    if dim != 0:
        raise TypeError(f"{op}: got both axis={axis!r} and dim={dim!r}; they name the same argument, pass one")
    return axis


def concat(tensors, dim=0, *, axis=None, out=None):
    """``tensors`` joined along ``dim`` (numpy's ``axis=``; default 0), as ``torch.cat``."""
    xs = tensors
    if out is not None:
        _no_out("cat", out)
    if axis is not None:
        axis = _dim0("cat", dim, axis)
    else:
        axis = dim
    attrs = {} if axis is None or (axis == 0 and type(axis) is int) else {"axis": axis}   # see sum
    try:
        return bind(P.concat_p, *xs, **attrs)
    except P.PromotionNeeded:
        return promoted(P.concat_p, *xs, **attrs)


cat = concat


def stack(tensors, dim=0, *, axis=None, out=None):
    """``tensors`` stacked along a new dimension ``dim`` (numpy's ``axis=``; default 0), as ``torch.stack``."""
    xs = tensors
    if out is not None:
        _no_out("stack", out)
    if axis is not None:
        axis = _dim0("stack", dim, axis)
    else:
        axis = dim
    attrs = {} if axis is None or (axis == 0 and type(axis) is int) else {"axis": axis}
    try:
        return bind(P.stack_p, *xs, **attrs)
    except P.PromotionNeeded:
        return promoted(P.stack_p, *xs, **attrs)


def _split_axis(op, x, axis, dim):
    axis = dim_or_axis(op, axis, dim)
    axis = 0 if axis is None else axis
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an integer, got {axis!r}")
    return normalized_axis(op, int(axis), builtins.max(len(x.shape), 1))


def _split_sizes(x, sizes, axis):
    """``bind`` of the split primitive: one node whose results are the parts."""
    if not sizes:
        return []
    return list(bind(P.split_p, x, sizes=tuple(int(s) for s in sizes), axis=axis))


def split(tensor, split_size_or_sections, dim=0, *, axis=None):
    """Parts of ``tensor`` along ``dim`` (numpy's ``axis=``; default 0), as ``torch.split``:
    an int is the size of each part (the last may be smaller), a list the
    size of each; one node (the ``split`` primitive), returned as a list.

    This is PyTorch's meaning; numpy's (an int is the number of parts) is
    :func:`array_split`, and the static facade's ``dynnets.static.split``
    keeps TF1's ``split(value, num_or_size_splits, axis)`` (an int is the
    number of equal parts). Sizes in a list need not know the dimension when
    a static graph is built (they are checked at run time); an int needs it.
    """
    x = tensor
    if not len(x.shape):
        raise P.ShapeError("split: x must have at least one dimension, got a 0-d input")
    ax = _split_axis("split", x, _dim0("split", dim, axis), None)
    n = x.shape[ax]
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        size = int(split_size_or_sections)
        if size <= 0 and not (size == 0 and n == 0):
            raise P.ShapeError(f"split: split_size must be a positive integer, got {size}")
        if n is None:
            raise P.ShapeError(f"split: dimension {ax} of x.shape={tuple(x.shape)} is unknown, so the number of "
                               f"parts of size {size} is too; pass a list of sizes")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if n else [0]
        return _split_sizes(x, sizes, ax)
    if not isinstance(split_size_or_sections, (list, tuple)):
        raise TypeError(f"split: split_size_or_sections must be an int or a list of ints, got "
                        f"{split_size_or_sections!r}")
    sizes = [int(s) for s in split_size_or_sections]
    if n is not None and builtins.sum(sizes) != n:
        raise P.ShapeError(f"split: sizes {sizes} do not add up to x.shape[{ax}]={n}")
    return _split_sizes(x, sizes, ax)


def array_split(x, indices_or_sections, axis=0):
    """numpy's ``array_split``: an int is the number of parts (sizes differ by
    at most one, the larger first), a list the indices to split at."""
    ax = _split_axis("array_split", x, axis, None)
    n = x.shape[ax]
    if n is None:
        raise P.ShapeError(f"array_split: dimension {ax} of x.shape={tuple(x.shape)} must be known")
    if isinstance(indices_or_sections, (int, np.integer)) and not isinstance(indices_or_sections, bool):
        k = int(indices_or_sections)
        if k <= 0:
            raise P.ShapeError(f"array_split: the number of sections must be larger than 0, got {k}")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
    else:
        bounds = [builtins.min(builtins.max(int(i) if i >= 0 else n + int(i), 0), n) for i in indices_or_sections]
        edges = [0] + bounds + [n]
        sizes = [builtins.max(b - a, 0) for a, b in zip(edges[:-1], edges[1:])]
        starts = edges[:-1]
        # numpy's parts for decreasing indices are empty: slice as numpy does
        return [getitem(x, (slice(None),) * ax + (slice(a, a + sz),)) for a, sz in zip(starts, sizes)]
    return _split_sizes(x, sizes, ax)


def chunk(input, chunks, dim=0):
    """``chunks`` parts along ``dim``, as ``torch.chunk``: each of size
    ``ceil(n / chunks)`` but the last, so there may be fewer parts."""
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise P.ShapeError(f"chunk: chunks must be a positive integer, got {chunks!r}")
    if not len(input.shape):
        raise P.ShapeError("chunk: input must have at least one dimension, got a 0-d input")
    ax = _split_axis("chunk", input, dim, None)
    n = input.shape[ax]
    if n is None:
        raise P.ShapeError(f"chunk: dimension {ax} of input.shape={tuple(input.shape)} is unknown, so the parts "
                           f"are too")
    if n == 0:
        return _split_sizes(input, [0] * int(chunks), ax)
    size = -(-n // int(chunks))
    return split(input, size, dim=ax)


def pad(input, pad, mode="constant", value=None):
    """``input`` padded as ``torch.nn.functional.pad``: ``pad`` is a flat
    sequence of (before, after) counts, the last dimension first
    (``(left, right, top, bottom)``); negative counts remove elements. Modes
    ``'constant'`` (``value``, default 0, in the input's dtype),
    ``'reflect'``, ``'replicate'``, ``'circular'`` (these take no value)."""
    if not isinstance(pad, (list, tuple)) or not builtins.all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                      for v in pad):
        raise TypeError(f"pad: pad must be a flat sequence of integers, (before, after) per dimension from the last "
                        f"(torch's order), got {pad!r}")
    nd = len(input.shape)
    if len(pad) % 2:
        raise P.ShapeError(f"pad: the padding length must be even, got {len(pad)} ({tuple(pad)})")
    if len(pad) // 2 > nd:
        raise P.ShapeError(f"pad: {len(pad)} padding values pad {len(pad) // 2} dimensions, the input has {nd} "
                           f"(input.shape={tuple(input.shape)})")
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"pad: mode={mode!r} takes no value argument, got value={value!r}")
    pairs = [(0, 0)] * nd
    for k in range(len(pad) // 2):
        pairs[nd - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    v = 0 if value is None else python_number(value)
    return bind(P.pad_p, input, pads=tuple(pairs), mode=mode, value=v)


def _sizes(op, sizes):
    sizes = shape_tuple(sizes)
    if not builtins.all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in sizes):
        raise TypeError(f"{op}: sizes must be integers, got {sizes!r}")
    return tuple(int(s) for s in sizes)


def expand(x, *sizes):
    """``x`` broadcast to ``sizes`` (-1 keeps a dimension; new dimensions go
    in front), as ``torch.Tensor.expand``; a view, no copy."""
    sizes = _sizes("expand", sizes)
    shp = tuple(x.shape)
    lead = len(sizes) - len(shp)
    if lead < 0:
        raise P.ShapeError(f"expand: the number of sizes ({len(sizes)}) must be at least x's dimensions "
                           f"({len(shp)}), x.shape={shp}")
    target = []
    for k, s in enumerate(sizes):
        if s == -1:
            if k < lead:
                raise P.ShapeError(f"expand: -1 is not allowed for a new leading dimension ({k}), sizes={sizes}")
            target.append(shp[k - lead])
        elif s < 0:
            raise P.ShapeError(f"expand: invalid size {s} in sizes={sizes}")
        else:
            d = shp[k - lead] if k >= lead else 1
            if d is not None and d != 1 and d != s:
                raise P.ShapeError(f"expand: the size of dimension {k - lead} ({d}) must match sizes[{k}]={s} "
                                   f"unless it is 1 (x.shape={shp}, sizes={sizes})")
            target.append(s)
    if None in target:
        # an unknown dimension kept as it is (a static value): broadcast by a product with ones
        ones = np.ones(tuple(1 if t is None else t for t in target), dtype=np.dtype(x.dtype))
        return x * ones if np.dtype(x.dtype) != np.bool_ else where(ones, x, x)
    target = tuple(target)
    return x if target == shp else broadcast_to(x, target)


def expand_as(x, other):
    """:func:`expand` to ``other``'s shape. An unknown dimension of ``other``
    (a static value) keeps ``x``'s, which must then not be 1 (it could not be
    known whether it broadcasts)."""
    oshp, shp = tuple(other.shape), tuple(x.shape)
    lead = len(oshp) - len(shp)
    sizes = []
    for k, o in enumerate(oshp):
        if o is None:
            if k < lead or shp[k - lead] == 1:
                raise P.ShapeError(f"expand_as: dimension {k} of other.shape={oshp} is unknown, so whether x.shape="
                                   f"{shp} broadcasts to it cannot be decided when the graph is built")
            o = -1
        sizes.append(o)
    return expand(x, *sizes)


def repeat(x, *sizes):
    """``x`` tiled ``sizes[k]`` times along each dimension (new dimensions in
    front), as ``torch.Tensor.repeat`` (numpy's ``tile``)."""
    sizes = _sizes("repeat", sizes)
    shp = tuple(x.shape)
    if len(sizes) < len(shp):
        raise P.ShapeError(f"repeat: the number of repeats ({len(sizes)}) can not be smaller than x's dimensions "
                           f"({len(shp)}), x.shape={shp}")
    if builtins.any(s < 0 for s in sizes):
        raise P.ShapeError(f"repeat: repeats must be non-negative, got {sizes}")
    new = len(sizes) - len(shp)
    shp = (1,) * new + shp
    if None in shp:
        # unknown dimensions (a static value): copies joined along each repeated dimension
        y = x
        for _ in range(new):
            y = unsqueeze(y, 0)
        for k, r in enumerate(sizes):
            if r != 1:
                y = concat([y] * r, axis=k) if r else getitem(y, (slice(None),) * k + (slice(0, 0),))
        return y
    # (1, d0, 1, d1...) broadcast to (r0, d0, r1, d1...) and merged: one copy
    inter = []
    for r, d in zip(sizes, shp):
        inter += [1, d]
    full = []
    for r, d in zip(sizes, shp):
        full += [r, d]
    y = broadcast_to(reshape(x, *inter), tuple(full))
    return reshape(y, *[r * d for r, d in zip(sizes, shp)])


def narrow(input, dim, start, length):
    """``length`` elements of ``input`` along ``dim`` from ``start`` (which
    may be negative: from the end), as ``torch.narrow`` /
    ``Tensor.narrow``; differentiable (a slice)."""
    if not len(input.shape):
        raise P.ShapeError("narrow: narrow() cannot be applied to a 0-dim tensor")
    d, n = known_dim("narrow", input, dim)
    start = int_arg("narrow", "start", start)
    length = int_arg("narrow", "length", length)
    if length < 0:
        raise P.ShapeError(f"narrow: length must be non-negative, got {length}")
    if not -n <= start <= n:
        raise P.IndexRangeError(f"narrow: start out of range (expected to be in range of [{-n}, {n}], but got "
                                f"{start})")
    if start < 0:
        start += n
    if start + length > n:
        raise P.ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}) of "
                           f"dimension {d}")
    return getitem(input, (builtins.slice(None),) * d + (builtins.slice(start, start + length),))


def unbind(input, dim=0):
    """The slices of ``input`` along ``dim``, that dimension removed, as a
    tuple (``torch.unbind``): one split node, so the gradient is one
    concatenation, not one full-size array per slice."""
    if not len(input.shape):
        raise P.ShapeError("unbind: dimension specified as 0 but tensor has no dimensions")
    d, n = known_dim("unbind", input, dim)
    if n == 0:
        return ()
    rest = tuple(input.shape[:d]) + tuple(input.shape[d + 1:])
    return tuple(reshape(p, rest) for p in split(input, 1, d))


def nonzero_tuple(condition):
    """``torch.where(condition)`` / ``nonzero(as_tuple=True)``: one int64
    tensor of indices per dimension of ``condition`` (a 0-d condition
    counts as one element)."""
    t = truth("where", condition)
    if not len(condition.shape):
        t = reshape(t, 1)
    coords = bind(P.argwhere_p, t)
    return tuple(getitem(coords, (builtins.slice(None), j)) for j in builtins.range(builtins.max(len(condition.shape), 1)))


def flip(input, dims):
    """``input`` reversed along each of ``dims`` (an int or a sequence), as
    ``torch.flip``; differentiable (a reversed view's gradient)."""
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        dims = (dims,)
    nd = len(input.shape)
    seen = set()
    for k in dims:
        d = int_arg("flip", "dims", k)
        if not -builtins.max(nd, 1) <= d < builtins.max(nd, 1):
            raise P.IndexRangeError(f"flip: dimension out of range (expected to be in range of "
                                    f"[{-builtins.max(nd, 1)}, {builtins.max(nd, 1) - 1}], but got {d})")
        d %= builtins.max(nd, 1)
        if d in seen:
            raise ValueError(f"flip: dim {d} appears multiple times in the list of dims")
        seen.add(d)
    # a copy, as torch's flip (a reversed view would see later in-place writes to input)
    if not nd or not seen:
        return clone(input)
    index = tuple(builtins.slice(None, None, -1) if k in seen else builtins.slice(None) for k in builtins.range(nd))
    return clone(getitem(input, index))
