"""The gradient value types that stand for an array without being one, and
the only code that adds or densifies them (the role of JAX's ``ad_util``):

* :class:`RowSparse` -- ``dense[rows] = values`` (embedding gradients);
* :class:`OuterSum` -- a weight gradient kept as factors ``Σ lhs.T @ rhs``;
* :class:`MatmulT` -- an input gradient kept as the product ``a @ w.T``.

The engine, the static session and symbolic gradients call the functions
below instead of branching on these types.
"""
from __future__ import annotations

import numpy as np

from . import kernels as K
from .dtypes import F32, F64, is_kernel_float, same_float

class RowSparse:
    """A row-sparse gradient: ``dense[rows] = values`` (rows may repeat until
    :meth:`coalesce`). Embedding gradients use it so a step touches only the
    rows a batch used."""

    __slots__ = ("_rows", "_values", "_parts", "shape")

    def __init__(self, rows, values, shape):
        self._rows = rows
        self._values = values
        self._parts = None
        self.shape = tuple(shape)

    # A sum of many RowSparse terms (one embedding lookup per tree, added up
    # during backward) keeps its terms in a list and concatenates them once,
    # when rows or values are first read: concatenating at every addition
    # copied O(k^2) rows (190 us per tree in a minibatch of 25, measured).
    def _pieces(self):
        return self._parts if self._parts is not None else [(self._rows, self._values)]

    def _join(self):
        parts = self._parts
        self._rows = np.concatenate([r for r, _ in parts])
        vals = [v for _, v in parts]
        w = vals[0].w if type(vals[0]) is MatmulT else None
        if w is not None and all(type(v) is MatmulT and v.w is w for v in vals):
            # values that are all products with one matrix (per-sentence
            # embedding gradients of per-node leaves): one product for all
            self._values = MatmulT(np.concatenate([v.a for v in vals]), w)
        else:
            self._values = np.concatenate([v.to_dense() if type(v) is MatmulT else v for v in vals])
        self._parts = None

    @property
    def rows(self):
        if self._parts is not None:
            self._join()
        return self._rows

    @property
    def values(self):
        """The values, dense (a factored sum is formed here, once)."""
        if self._parts is not None:
            self._join()
        if type(self._values) is MatmulT:
            self._values = self._values.to_dense()
        return self._values

    @property
    def dtype(self):
        if self._parts is None:
            return self._values.dtype
        return np.result_type(*[v.dtype for _, v in self._parts])

    def add(self, other):
        """``self + other`` (another RowSparse) as a new object; neither input changes."""
        out = RowSparse(None, None, self.shape)
        out._parts = self._pieces() + other._pieces()
        return out

    def add_to_dense(self, dense):
        out = np.array(dense, dtype=np.result_type(dense, self.values), copy=True)
        if out.shape == self.shape and out.ndim >= 2 and is_kernel_float(self.values.dtype):
            out += self.to_dense()          # the scatter kernel, then one pass (np.add.at: ~1 us per row)
            return out
        np.add.at(out, self.rows, self.values)
        return out

    def coalesce(self):
        """Unique sorted rows with summed values."""
        rows, inv = np.unique(self.rows, return_inverse=True)
        if len(rows) == len(self.rows):
            order = np.argsort(self.rows, kind="stable")
            return RowSparse(self.rows[order], self.values[order], self.shape)
        vals = self.values
        return RowSparse(rows, sum_rows(inv.astype(np.int64).reshape(-1), vals, len(rows), vals.shape[1:]),
                         self.shape)

    def to_dense(self):
        vals = self.values
        rows = self.rows
        n = self.shape[0] if self.shape else 0
        if (vals.ndim >= 2 and vals.ndim == len(self.shape) and is_kernel_float(vals.dtype) and rows.size
                and rows.dtype.kind in "iu" and 0 <= rows.min() and rows.max() < n):
            # the scatter-add kernel (np.add.at costs ~1 us per row): the rows
            # a gather of autobatch read, or an embedding's
            flat = np.ascontiguousarray(vals.reshape(len(rows), -1))
            return K.embedding_bwd(np.ascontiguousarray(rows, dtype=np.int64), flat, n).reshape(self.shape)
        out = np.zeros(self.shape, dtype=vals.dtype)
        np.add.at(out, rows, vals)
        return out

    def __mul__(self, c):
        return RowSparse(self.rows, self.values * c, self.shape)

    def __repr__(self):
        return f"RowSparse(rows={len(self.rows)}, shape={self.shape})"


class OuterSum:
    """A weight gradient kept in factors: ``base + Σ_k lhs[k].T @ rhs[k]``,
    reshaped to ``shape``. A ``None`` factor in ``lhs`` stands for a column
    of ones, so a bias gradient ``ones.T @ rhs`` is ``OuterSum([None], [rhs])``.

    A cell applied to one tree node or one time step at a time has, per
    call, a rank-1 weight gradient. Formed one by one, each is a full
    (in, out) outer product plus a full-size addition -- for a (300, 750)
    Tree-LSTM weight more work than the node's forward and backward together.
    The VJPs of the per-node Tree-LSTM primitives, of the fused cells and of
    ``matmul``/``linear`` on at most ``FACTOR_ROWS`` rows return their
    factors instead; eager ``backward`` concatenates them and forms the sum
    with one matrix product when the sweep ends, so a parameter's ``_grad`` is
    never an ``OuterSum`` after ``backward`` returns (a 20-step
    ``nn.LSTMCell`` loop: 11.9 -> 1.0 ms per forward and backward, measured).
    ``np.asarray`` (and :meth:`to_dense`) give the dense gradient; static
    plans densify them where the VJP is called.

    Only the engine accumulates these objects; :meth:`add` extends ``self`` in place.
    """

    __slots__ = ("lhs", "rhs", "shape", "base")

    def __init__(self, lhs, rhs, shape, base=None):
        self.lhs = list(lhs)          # (k_i, in) arrays
        self.rhs = list(rhs)          # (k_i, out) arrays
        self.shape = tuple(shape)
        self.base = base              # dense (in, out) array or None

    @property
    def dtype(self):
        if not self.rhs:
            return self.base.dtype
        return self.rhs[0].dtype if self.lhs[0] is None else np.result_type(self.lhs[0], self.rhs[0])

    def add(self, other):
        """``self + other`` for another OuterSum or a dense array (in place)."""
        if type(other) is OuterSum:
            self.lhs.extend(other.lhs)
            self.rhs.extend(other.rhs)
            other = other.base
            if other is None:
                return self
        self.base = other if self.base is None else self.base + other
        return self

    def to_dense(self, dtype=None):
        lhs = self.lhs
        if len(lhs) == 1 and self.base is None:
            # one factor pair (a product over one step's rows): the usual weight
            # gradient of a define-by-run step, without the general path's tests
            a = lhs[0]
            b = self.rhs[0]
            if a is not None and a.ndim == 2 and b.ndim == 2 and a.shape[0] <= OUTER_MAX and a.shape[0] == b.shape[0]:
                dt = a.dtype
                if b.dtype == dt and (dt == F32 or dt == F64):
                    out = K.outer_sum_fwd(np.ascontiguousarray(a), np.ascontiguousarray(b))
                    if out.shape != self.shape:
                        out = out.reshape(self.shape)
                    return out if dtype is None or out.dtype == dtype else out.astype(dtype)
        if not lhs:
            out = np.zeros(self.shape, dtype=dtype or self.dtype)
        else:
            one = len(lhs) == 1
            b = self.rhs[0] if one else np.concatenate(self.rhs)
            if (lhs[0] is None) if one else all(a is None for a in lhs):
                out = np.add.reduce(b, axis=0)            # ones.T @ b
            else:
                if one:
                    a = lhs[0]
                else:
                    a = np.concatenate([np.ones((r.shape[0], 1), dtype=r.dtype) if a is None else a
                                        for a, r in zip(lhs, self.rhs)])
                if (a.shape[0] <= OUTER_MAX and a.dtype == b.dtype and is_kernel_float(a.dtype) and a.ndim == 2
                        and b.ndim == 2 and a.shape[0] == b.shape[0]):
                    # one row: the streaming kernel (as fast as np.dot at 32 x 32,
                    # 3x faster at 150 x 600, measured)
                    out = K.outer_sum_fwd(np.ascontiguousarray(a), np.ascontiguousarray(b))
                else:
                    out = np.dot(a.T, b)      # np.dot: matmul is ~10x slower when a has one row
            if out.shape != self.shape:
                out = out.reshape(self.shape)
        if self.base is not None:
            out += self.base
        return out if dtype is None else out.astype(dtype, copy=False)

    def __array__(self, dtype=None, copy=None):
        return self.to_dense(dtype)

    def __repr__(self):
        return f"OuterSum(factors={len(self.lhs)}, shape={self.shape})"


class MatmulT:
    """An input gradient kept as the product ``a @ w.T`` (``a`` (n, k), ``w``
    (m, k)), for a per-node VJP whose input is one row of a larger array.

    A Tree-LSTM run node by node reads each leaf's word vector as one row of
    the sentence's embedding (``split_rows``); each leaf's input gradient is
    ``dz @ W.T``, a matrix-vector product. Returned as a ``MatmulT``, the
    gradients of all rows reach ``split_rows``' VJP, which forms them with one
    matrix product (``Primitive.lazy_grads``); every other consumer receives
    it densified by the engine. :meth:`add` keeps a sum of two products with
    the same ``w`` factored (``(a1 + a2) @ w.T``).
    """

    __slots__ = ("a", "w", "shape")

    def __init__(self, a, w):
        self.a = a
        self.w = w
        self.shape = (a.shape[0], w.shape[0])

    @property
    def dtype(self):
        return np.result_type(self.a.dtype, self.w.dtype)

    def add(self, other):
        """``self + other``: factored when ``other`` is a MatmulT of the same ``w``, else dense."""
        if type(other) is MatmulT and other.w is self.w:
            return MatmulT(self.a + other.a, self.w)
        return self.to_dense() + np.asarray(other)

    def to_dense(self, dtype=None):
        out = np.dot(self.a, self.w.T)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __array__(self, dtype=None, copy=None):
        return self.to_dense(dtype)

    def __repr__(self):
        return f"MatmulT(shape={self.shape})"


# Weight gradients of products with at most this many rows are returned as
# OuterSum factors (see OuterSum): a node applied to one tree node or one time
# step at a time then costs one matrix product per parameter per backward
# instead of one full-size outer product and addition per node.
FACTOR_ROWS = 4

# Up to this many rows, weight gradients are formed by the outer_sum kernel
# rather than BLAS: numpy/OpenBLAS is slow exactly at one row (float32,
# (600, 300) gradient, kernel vs BLAS us: K=1 6.6 vs 16.8, K=2 12.9 vs 8.1).
OUTER_MAX = 1


def tdot(a, b):
    """``a.T @ b`` for 2-D ``a`` (k, m) and ``b`` (k, n): the weight gradient of
    a product over a batch of k rows."""
    if a.shape[0] == 1:
        # With a contracted dimension of 1, np.matmul leaves BLAS for a slow
        # loop: (600,1)@(1,300) float32 takes 177 us, np.dot 17 us (measured).
        return np.dot(a.T, b)
    return a.T @ b


def wgrad(d, a):
    """Weight gradient ``d.T @ a`` of a product over the rows of ``a``."""
    if d.shape[0] <= OUTER_MAX and same_float(d, a):
        return K.outer_sum_fwd(d, a)
    return tdot(d, a)


_new = object.__new__


def factored_wgrad(d, a, shape):
    """:func:`wgrad` (``d.T @ a``), kept factored (OuterSum) for at most
    ``FACTOR_ROWS`` rows: a product or cell run one step or one node at a
    time then forms each weight gradient once per backward."""
    if d.shape[0] <= FACTOR_ROWS:
        # the slots directly (this runs once per weight per recorded product)
        o = _new(OuterSum)
        o.lhs = [d]
        o.rhs = [a]
        o.shape = shape if type(shape) is tuple else tuple(shape)
        o.base = None
        return o
    return wgrad(d, a)



def factored_matmul_t(a, w):
    """``a @ w.T``, kept as a :class:`MatmulT` for at most ``FACTOR_ROWS``
    rows (a per-node input gradient that a ``lazy_grads`` consumer forms
    together with its siblings' in one product)."""
    if a.shape[0] <= FACTOR_ROWS:
        return MatmulT(a, w)
    return a @ w.T


# --------------------------------------------------------------------------
# adding and densifying: the only code that branches on the types above
# --------------------------------------------------------------------------

_NDARRAY = np.ndarray
# the types above: what is_lazy tests (the engine tests it inline)
LAZY_TYPES = frozenset({RowSparse, OuterSum, MatmulT})
_LAZY = LAZY_TYPES


def is_lazy(x):
    """Whether ``x`` is one of the gradient types above (not an array yet)."""
    return type(x) in _LAZY


def is_row_sparse(x):
    return type(x) is RowSparse


def densify(x, keep_matmul=False):
    """``x`` as an array; with ``keep_matmul`` a :class:`MatmulT` stays
    factored (for a ``lazy_grads`` primitive's VJP)."""
    tx = type(x)
    if tx in _LAZY and not (keep_matmul and tx is MatmulT):
        return x.to_dense()
    return x


def densify_all(r):
    """A joint VJP's gradients with factored or row-sparse parts densified."""
    return tuple(densify(x) for x in r)


def dense_like(a, x):
    """Gradient ``a`` dense, in the dtype of input ``x`` (``None`` stays ``None``)."""
    if a is None:
        return None
    if type(a) in _LAZY:
        a = a.to_dense()
    dt = getattr(x, "dtype", None)
    return a if dt is None or a.dtype == dt else np.asarray(a).astype(dt)


def cast(x, dt):
    """Gradient ``x`` in dtype ``dt`` (a row-sparse one stays row-sparse)."""
    if x is None or dt is None or x.dtype == dt:
        return x
    if type(x) is RowSparse:
        return RowSparse(x.rows, x.values.astype(dt), x.shape)
    return np.asarray(x).astype(dt)


def add(old, new):
    """``old + new`` for gradients of any of the types (``old`` may be None).
    Factored sums stay factored where both sides allow it; an
    :class:`OuterSum` is extended in place (only the engine holds them)."""
    if old is None:
        return new
    to, tn = type(old), type(new)
    if to is _NDARRAY and tn is _NDARRAY:
        return old + new
    if to is MatmulT or tn is MatmulT:
        if to is MatmulT and tn is MatmulT and old.w is new.w:
            return old.add(new)
        return add(old.to_dense() if to is MatmulT else old, new.to_dense() if tn is MatmulT else new)
    if to is OuterSum:
        return old.add(new.to_dense() if tn is RowSparse else new)
    if tn is OuterSum:
        return new.add(old.to_dense() if to is RowSparse else old)
    if to is RowSparse:
        return old.add(new) if tn is RowSparse else old.add_to_dense(new)
    if tn is RowSparse:
        return new.add_to_dense(old)
    return old + new


def add_inner(old, new):
    """:func:`add` for the gradient of an intermediate node, where an array
    plus a :class:`RowSparse` stays row-sparse (the array as all its rows):
    a batch output read by many gathers (autobatch) and by one slice then
    adds its terms without copying the array at every addition; the node's
    VJP densifies the sum once, with the scatter kernel."""
    to, tn = type(old), type(new)
    if to is _NDARRAY and tn is RowSparse:
        if old.ndim >= 2 and old.shape == new.shape and is_kernel_float(old.dtype):
            return RowSparse(np.arange(old.shape[0]), old, old.shape).add(new)
    elif tn is _NDARRAY and to is RowSparse:
        if new.ndim >= 2 and new.shape == old.shape and is_kernel_float(new.dtype):
            return old.add(RowSparse(np.arange(new.shape[0]), new, new.shape))
    return add(old, new)


def leaf_grad(g, data):
    """Gradient ``g`` made fit to accumulate into a leaf holding ``data``: a
    product formed, an array in the leaf's dtype and shape (writable), a
    row-sparse one in its dtype; an :class:`OuterSum` stays factored until
    backward's last step."""
    tg = type(g)
    if tg is MatmulT:
        g = g.to_dense()
        tg = _NDARRAY
    if tg is OuterSum:
        return g
    if tg is RowSparse:
        if g.dtype != data.dtype:
            g = RowSparse(g.rows, g.values.astype(data.dtype), g.shape)
        return g
    if g.dtype != data.dtype:
        g = g.astype(data.dtype)
    if g.shape != data.shape:
        g = np.broadcast_to(g, data.shape)
    if not g.flags.writeable:
        g = g.copy()
    return g


def values(x):
    """The array a gradient's numbers are in (a row-sparse one's values), for
    checks such as anomaly detection."""
    return x.values if type(x) is RowSparse else x


def add_n(xs):
    """The sum of gradients of which some are row-sparse: all sparse, they
    are concatenated (still row-sparse); else scattered into the dense sum."""
    sparse = [x for x in xs if type(x) is RowSparse]
    if len(sparse) == len(xs):
        return RowSparse(np.concatenate([s.rows for s in sparse]),
                         np.concatenate([s.values for s in sparse]), sparse[0].shape)
    dense = None
    for x in xs:
        if type(x) is not RowSparse:
            dense = np.array(x, copy=True) if dense is None else dense + x
    for s in sparse:
        np.add.at(dense, s.rows, s.values.astype(dense.dtype, copy=False))
    return dense


def any_row_sparse(xs):
    for x in xs:
        if type(x) is RowSparse:
            return True
    return False


def is_outer_sum(x):
    return type(x) is OuterSum


def form(x, dtype):
    """An :class:`OuterSum` formed in ``dtype`` (any other gradient as it is):
    backward forms a parameter's gathered factors once, at its end."""
    return x.to_dense(dtype) if type(x) is OuterSum else x


def sum_rows(inv, g, n_rows, row_shape):
    """The ``inv.size`` rows (of shape ``row_shape``) of gradient ``g`` summed
    into ``n_rows`` by index ``inv`` (int64): the values of a row-sparse
    gradient. A :class:`MatmulT` ``g = a @ w.T`` (per-node leaves, see
    :func:`join_rows`) keeps its product: the rows of ``a`` are summed, and
    the product is formed once for all the sentences of a minibatch
    (``RowSparse`` joins such values)."""
    if type(g) is MatmulT:
        if g.a.shape[0] == inv.size and same_float(g.a):
            return MatmulT(K.embedding_bwd(inv, g.a, n_rows), g.w)
        g = g.to_dense()
    g2 = np.reshape(g, (inv.size,) + tuple(row_shape))
    if is_kernel_float(g2.dtype) and g2.ndim == 2:
        return K.embedding_bwd(inv, np.ascontiguousarray(g2), n_rows)
    out = np.zeros((n_rows,) + tuple(row_shape), dtype=g2.dtype)
    np.add.at(out, inv, g2)
    return out


def join_rows(gs, shape, dtype):
    """The gradient of an input of ``shape`` (n, ...) from the gradients of
    its n rows (each of shape (1, ...), or None). When every given row's
    gradient is a one-row product with the same ``w`` (per-node leaves read
    as rows of a sentence's embeddings), the result is one :class:`MatmulT`
    for all rows: a ``lazy_grads`` consumer forms it with one matrix product,
    any other is given it dense by the engine."""
    lazy = [gi for gi in gs if type(gi) is MatmulT]
    if lazy:
        w = lazy[0].w
        if len(shape) == 2 and all(gi is None or (type(gi) is MatmulT and gi.w is w and gi.a.shape[0] == 1)
                                   for gi in gs):
            if len(lazy) == len(gs):
                a = np.concatenate([gi.a for gi in gs])
            else:
                a = np.zeros((len(gs), lazy[0].a.shape[1]), dtype=lazy[0].a.dtype)
                for i, gi in enumerate(gs):
                    if gi is not None:
                        a[i] = gi.a[0]
            return MatmulT(a, w)
        gs = [gi.to_dense() if type(gi) is MatmulT else gi for gi in gs]
    dt = next((gi.dtype for gi in gs if gi is not None), dtype)
    gx = np.zeros(shape, dtype=dt)
    for i, gi in enumerate(gs):
        if gi is not None:
            gx[i] = gi[0]
    return gx
