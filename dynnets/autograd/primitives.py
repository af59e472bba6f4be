"""The table of primitives: the only home of forward rules, shape rules and gradients.

Every primitive is declared once with :func:`defprim`:

``impl(*arrays, **attrs)``
    the forward computation on numpy arrays (or a Numba kernel from
    :mod:`dynnets.autograd.kernels`);
``shape(*avals, **attrs)``
    the shape/dtype rule, which is also the input check: it raises
    :class:`ShapeError` (:class:`DTypeError`, :class:`IndexRangeError`) naming
    the op, the argument, what was expected and what was received. Static
    graphs run it at construction time (again with the fed shapes); eager
    ``bind`` runs it once per input signature (see :mod:`.engine`). ``avals``
    have ``.shape`` (dimensions may be ``None`` = unknown) and ``.dtype``.
    What depends on values (class targets, ids, tree schedules) the
    implementation checks on every call, before any kernel sees it: the
    kernels index unchecked;
``vjps``
    one vector-Jacobian product per input, each a plain function
    ``vjp(g, inputs, out, **attrs) -> gradient of that input`` (``None`` for a
    non-differentiable input), in the manner of HIPS autograd's ``defvjp``. Or
    ``joint_vjp(g, inputs, out, **attrs) -> tuple`` for fused primitives whose
    input gradients share work. Because a VJP is a function of arrays only, the
    static graph binds it as a node (:func:`vjp_primitive`), so eager and static
    gradients are the same code.

``grep "vjp" primitives.py`` lists every gradient in the project.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import kernels as K
from . import kernels_tree as KT
from . import reference as _twin

__all__ = ["Primitive", "PRIMITIVES", "defprim", "ShapeError", "DTypeError", "IndexRangeError", "RowSparse",
           "OuterSum", "Aval", "unbroadcast", "check_shapes", "run_rule", "vjp_primitive"]


class ShapeError(ValueError):
    """Bad input to an op: names the op, the argument, expected and received."""


class DTypeError(ShapeError, TypeError):
    """An input of a dtype the op does not take (integer logits, a float index...).
    A TypeError, as PyTorch's, and a ShapeError, as every bad input to an op."""


class IndexRangeError(ShapeError, IndexError):
    """An index value out of range (a class target, an embedding id, a tree
    node): an IndexError, as PyTorch's, and a ShapeError."""


class Aval(NamedTuple):
    """Abstract value: what a shape rule sees of an input."""
    shape: tuple
    dtype: object


class Primitive:
    __slots__ = ("name", "impl", "shape", "vjps", "joint_vjp", "multiple_results",
                 "differentiable", "scalar", "doc", "nondiff_args", "lazy_grads", "checked", "attr_key")

    def __init__(self, name, impl, shape, vjps=None, joint_vjp=None, multiple_results=False,
                 differentiable=True, scalar=None, nondiff_args=(), attr_key=None):
        self.name = name
        self.impl = impl
        self.shape = shape
        self.vjps = tuple(vjps) if vjps is not None else None
        self.joint_vjp = joint_vjp
        self.multiple_results = multiple_results
        self.differentiable = differentiable
        self.scalar = scalar          # scalar expression template, for elementwise fusion
        self.nondiff_args = tuple(nondiff_args)
        self.doc = impl.__doc__
        # the joint VJP accepts MatmulT output gradients (eager backward
        # densifies every other primitive's output gradients first)
        self.lazy_grads = False
        # input signatures (shapes, dtypes, attributes) whose shape rule eager
        # bind has already run and passed: see engine.bind. ``attr_key``
        # (attributes -> a hashable stand-in) serves attributes that Python
        # cannot hash (slices, before Python 3.12)
        self.checked = {}
        self.attr_key = attr_key

    def __repr__(self):
        return f"<primitive {self.name}>"

    def bind(self, *args, **attrs):
        from .engine import bind
        return bind(self, *args, **attrs)


PRIMITIVES: dict[str, Primitive] = {}


def defprim(name, impl, shape, vjp=None, joint_vjp=None, multiple_results=False,
            differentiable=True, scalar=None, nondiff_args=(), attr_key=None):
    """Declare a primitive: forward, shape rule and VJP(s) together.

    ``vjp`` is a tuple with one function (or ``None``) per input.
    ``scalar`` is an optional template such as ``"math.tanh({0})"`` that lets
    the static compiler fuse chains of elementwise ops into one Numba kernel.
    ``attr_key(**attrs)`` gives a hashable stand-in for attributes Python
    cannot hash, so eager bind can cache their input check (see engine).
    """
    if name in PRIMITIVES:
        raise ValueError(f"defprim: primitive {name!r} is already defined")
    if differentiable and vjp is None and joint_vjp is None:
        raise ValueError(f"defprim: differentiable primitive {name!r} needs vjp= or joint_vjp=")
    p = Primitive(name, impl, shape, vjp, joint_vjp, multiple_results, differentiable, scalar, nondiff_args,
                  attr_key)
    PRIMITIVES[name] = p
    return p


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
        np.add.at(out, self.rows, self.values)
        return out

    def coalesce(self):
        """Unique sorted rows with summed values."""
        rows, inv = np.unique(self.rows, return_inverse=True)
        if len(rows) == len(self.rows):
            order = np.argsort(self.rows, kind="stable")
            return RowSparse(self.rows[order], self.values[order], self.shape)
        vals = self.values
        if _kernel_float(vals.dtype) and vals.ndim == 2:
            vals = K.embedding_bwd(inv.astype(np.int64).reshape(-1), np.ascontiguousarray(vals), len(rows))
        else:
            out = np.zeros((len(rows),) + vals.shape[1:], dtype=vals.dtype)
            np.add.at(out, inv.reshape(-1), vals)
            vals = out
        return RowSparse(rows, vals, self.shape)

    def to_dense(self):
        out = np.zeros(self.shape, dtype=self.values.dtype)
        np.add.at(out, self.rows, self.values)
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
    ``matmul``/``linear`` on at most ``_FACTOR_ROWS`` rows return their
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
                if (a.shape[0] <= _OUTER_MAX and a.dtype == b.dtype and _kernel_float(a.dtype) and a.ndim == 2
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


# --------------------------------------------------------------------------
# shape-rule helpers
# --------------------------------------------------------------------------

def _fmt(shape):
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(op, *shapes, names=None):
    """numpy broadcasting with unknown (None) dimensions; raises ShapeError."""
    ndim = max(len(s) for s in shapes)
    out = []
    for k in range(1, ndim + 1):
        dim = 1
        for s in shapes:
            if k > len(s):
                continue
            d = s[-k]
            if d == 1:
                continue
            if dim == 1:
                dim = d
            elif d is None:
                continue
            elif dim is None:
                dim = d
            elif d != dim:
                names = names or [f"input {i}" for i in range(len(shapes))]
                desc = ", ".join(f"{n}.shape={_fmt(s)}" for n, s in zip(names, shapes))
                raise ShapeError(f"{op}: shapes cannot be broadcast together: {desc}")
        out.append(dim)
    return tuple(reversed(out))


def _rtype(*dts):
    try:
        return np.result_type(*dts)
    except TypeError:
        return np.result_type(*[np.asarray(d).dtype if not isinstance(d, np.dtype) else d for d in dts])


def _aval_of(x):
    if type(x) is np.ndarray:
        return x                     # has .shape and .dtype, all a rule reads (an Aval costs ~0.4 us)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return Aval(tuple(x.shape), x.dtype)
    if isinstance(x, (bool, int, float)):
        return Aval((), x)           # a weak Python scalar: numpy promotion keeps the other dtype
    a = np.asarray(x)
    return Aval(a.shape, a.dtype)


# exceptions a shape rule may raise on input it was not written for (an index
# into a shape of too few dimensions, None in arithmetic, a bad attribute type)
RULE_ERRORS = (TypeError, ValueError, IndexError, ArithmeticError, KeyError, AttributeError)


def run_rule(prim, avals, attrs):
    """``prim.shape(*avals, **attrs)``; any failure comes out as a ShapeError
    (DTypeError, IndexRangeError) naming the op, also where the rule itself
    tripped over an input it did not foresee."""
    try:
        return prim.shape(*avals, **attrs)
    except ShapeError:
        raise
    except RULE_ERRORS as e:
        desc = ", ".join(f"{_fmt(a.shape)} {_dt(a)}" for a in avals)
        kind = DTypeError if isinstance(e, TypeError) else IndexRangeError if isinstance(e, IndexError) \
            else ShapeError
        at = f", attributes {attrs}" if attrs else ""
        raise kind(f"{prim.name}: invalid inputs ({desc}{at}): {type(e).__name__}: {e}") from None


def check_shapes(prim, args, attrs):
    """Run ``prim``'s shape rule on concrete arguments (raises ShapeError)."""
    nd = np.ndarray
    return run_rule(prim, [a if type(a) is nd else _aval_of(a) for a in args], attrs)


def _dt(a):
    d = a.dtype
    return d if isinstance(d, np.dtype) else np.asarray(d).dtype


_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _kernel_float(dt):
    """The float dtypes the Numba kernels are compiled for."""
    return dt == _F32 or dt == _F64


def _is_int(a):
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def _norm_axis(op, axis, ndim):
    if axis is None:
        return None
    if _is_int(axis):
        axes = (axis,)
    elif isinstance(axis, (tuple, list)) and all(_is_int(a) for a in axis):
        axes = tuple(axis)
    else:
        raise DTypeError(f"{op}: axis must be an integer or a tuple of integers, got {axis!r}")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"{op}: axis {a} is out of range for an input with {ndim} dimensions")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: axis {axis!r} names a dimension twice")
    return tuple(out)


def unbroadcast(g, shape):
    """Sum ``g`` down to ``shape`` (the adjoint of numpy broadcasting)."""
    if g.shape == shape:
        return g
    # np.add.reduce rather than g.sum: the ufunc method skips ~0.4 us of Python
    nd = g.ndim - len(shape)
    if nd > 0:
        g = np.add.reduce(g, axis=tuple(range(nd)))
        if g.shape == shape:
            return g
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    if axes:
        g = np.add.reduce(g, axis=axes, keepdims=True)
    return g


# --------------------------------------------------------------------------
# elementwise primitives
# --------------------------------------------------------------------------

_WEAK = {bool: np.dtype(bool), int: int, float: float, complex: complex}


def _ufunc_dtype(name, ufunc, *avals):
    """The result dtype of numpy ufunc ``ufunc`` on inputs ``avals``, Python
    scalars kept weak (NEP 50), as the forward computes it; DTypeError where
    the ufunc has no loop for these dtypes (boolean subtract, negative...)."""
    dts = []
    for a in avals:
        d = a.dtype
        if not isinstance(d, np.dtype):
            d = _WEAK.get(type(d), None)
            if d is None:
                d = _dt(a)
        dts.append(d)
    try:
        return ufunc.resolve_dtypes((*dts, None))[-1]
    except (TypeError, ValueError) as e:
        names = ["x", "y"][:len(avals)]
        desc = ", ".join(f"{n}.dtype={_dt(a)}" for n, a in zip(names, avals))
        raise DTypeError(f"{name}: unsupported dtypes ({desc}): {e}") from None


def _unary_shape(name, ufunc=None, float_only=True):
    def rule(x):
        if float_only and _dt(x).kind != "f":
            raise DTypeError(f"{name}: expected a floating-point input, got dtype {_dt(x)}")
        return Aval(tuple(x.shape), _dt(x) if ufunc is None else _ufunc_dtype(name, ufunc, x))
    rule.__name__ = f"{name}_shape"
    return rule


def _binary_shape(name, ufunc):
    def rule(x, y):
        return Aval(broadcast_shapes(name, x.shape, y.shape, names=["x", "y"]), _ufunc_dtype(name, ufunc, x, y))
    rule.__name__ = f"{name}_shape"
    return rule


def _shp(a):
    # the attribute, not np.shape (a dispatched Python function, ~0.1 us per call)
    try:
        return a.shape
    except AttributeError:
        return np.shape(a)


add_p = defprim(
    "add", np.add, _binary_shape("add", np.add),
    vjp=(lambda g, ins, out: unbroadcast(g, _shp(ins[0])),
         lambda g, ins, out: unbroadcast(g, _shp(ins[1]))),
    scalar="({0} + {1})")

sub_p = defprim(
    "sub", np.subtract, _binary_shape("sub", np.subtract),
    vjp=(lambda g, ins, out: unbroadcast(g, _shp(ins[0])),
         lambda g, ins, out: unbroadcast(-g, _shp(ins[1]))),
    scalar="({0} - {1})")

mul_p = defprim(
    "mul", np.multiply, _binary_shape("mul", np.multiply),
    vjp=(lambda g, ins, out: unbroadcast(g * ins[1], _shp(ins[0])),
         lambda g, ins, out: unbroadcast(g * ins[0], _shp(ins[1]))),
    scalar="({0} * {1})")

div_p = defprim(
    "div", np.true_divide, _binary_shape("div", np.true_divide),
    vjp=(lambda g, ins, out: unbroadcast(g / ins[1], _shp(ins[0])),
         lambda g, ins, out: unbroadcast(-g * out / ins[1], _shp(ins[1]))),
    scalar="({0} / {1})")


def _pow_vjp_x(g, ins, out):
    x, y = ins
    # d/dx x**y = y x**(y-1), and 0 wherever y == 0, also at x == 0 where the
    # product is 0 * inf (PyTorch's pow_backward)
    if type(y) is float or type(y) is int:
        if y == 0:
            return np.zeros(_shp(x), dtype=g.dtype)
        return unbroadcast(g * y * np.power(x, y - 1), _shp(x))
    with np.errstate(divide="ignore", invalid="ignore"):
        gx = g * y * np.power(x, y - 1)
    return unbroadcast(np.where(y == 0, 0, gx), _shp(x))


def _pow_vjp_y(g, ins, out):
    x, y = ins
    # d/dy x**y = x**y log(x) in g's dtype (np.log of a Python base would be a
    # float64 scalar, which promotes); at x == 0 it is 0 for y >= 0 and
    # -inf * g for y < 0, NaN for x < 0, as PyTorch's pow_backward_exponent
    xa = np.asarray(x, dtype=g.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        gy = g * out * np.log(xa)
    return unbroadcast(np.where((xa == 0) & (np.asarray(y) >= 0), 0, gy), _shp(y))


pow_p = defprim(
    "pow", np.power, _binary_shape("pow", np.power),
    vjp=(_pow_vjp_x, _pow_vjp_y),
    scalar="({0} ** {1})")


def _select_vjp(g, win, tie, shape):
    # Ties split the gradient evenly (the average of both one-sided derivatives).
    # Multiplying by the bool masks, not by 0.5*mask, keeps g's dtype (float32).
    return unbroadcast(g * win + (g * 0.5) * tie, shape)


# An input "wins" unless it loses or ties: ~(x <= y), not x > y, so that where
# either input is NaN both get the whole gradient, as in PyTorch
maximum_p = defprim(
    "maximum", np.maximum, _binary_shape("maximum", np.maximum),
    vjp=(lambda g, ins, out: _select_vjp(g, ~(ins[0] <= ins[1]), ins[0] == ins[1], _shp(ins[0])),
         lambda g, ins, out: _select_vjp(g, ~(ins[1] <= ins[0]), ins[0] == ins[1], _shp(ins[1]))),
    scalar="max({0}, {1})")

minimum_p = defprim(
    "minimum", np.minimum, _binary_shape("minimum", np.minimum),
    vjp=(lambda g, ins, out: _select_vjp(g, ~(ins[0] >= ins[1]), ins[0] == ins[1], _shp(ins[0])),
         lambda g, ins, out: _select_vjp(g, ~(ins[1] >= ins[0]), ins[0] == ins[1], _shp(ins[1]))),
    scalar="min({0}, {1})")

neg_p = defprim("neg", np.negative, _unary_shape("neg", np.negative, float_only=False),
                vjp=(lambda g, ins, out: -g,), scalar="(-{0})")

exp_p = defprim("exp", np.exp, _unary_shape("exp", np.exp),
                vjp=(lambda g, ins, out: g * out,), scalar="math.exp({0})")

log_p = defprim("log", np.log, _unary_shape("log", np.log),
                vjp=(lambda g, ins, out: g / ins[0],), scalar="math.log({0})")

tanh_p = defprim("tanh", np.tanh, _unary_shape("tanh", np.tanh),
                 vjp=(lambda g, ins, out: g * (1 - out * out),), scalar="math.tanh({0})")


def _sigmoid(x):
    """Numerically stable logistic function."""
    # exp of a non-positive argument never overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(np.result_type(x), copy=False)


sigmoid_p = defprim("sigmoid", _sigmoid, _unary_shape("sigmoid"),
                    vjp=(lambda g, ins, out: g * out * (1 - out),),
                    scalar="(1.0 / (1.0 + math.exp(-{0})) if {0} >= 0 else math.exp({0}) / (1.0 + math.exp({0})))")


def _relu(x):
    return np.maximum(x, 0)


# ~(x <= 0), not x > 0: the gradient passes at NaN, as PyTorch's threshold_backward
relu_p = defprim("relu", _relu, _unary_shape("relu"),
                 vjp=(lambda g, ins, out: g * ~(ins[0] <= 0),), scalar="max({0}, 0.0)")

sqrt_p = defprim("sqrt", np.sqrt, _unary_shape("sqrt", np.sqrt),
                 vjp=(lambda g, ins, out: g / (2 * out),), scalar="math.sqrt({0})")

abs_p = defprim("abs", np.abs, _unary_shape("abs", np.abs, float_only=False),
                vjp=(lambda g, ins, out: g * np.sign(ins[0]),), scalar="abs({0})")


def _clip(x, lo=None, hi=None):
    return np.clip(x, lo, hi)


def _clip_shape(x, lo=None, hi=None):
    if _dt(x).kind not in "iuf":
        raise DTypeError(f"clip: expected a real numeric input, got dtype {_dt(x)}")
    for nm, v in (("lo", lo), ("hi", hi)):
        if v is not None and (not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool)):
            raise DTypeError(f"clip: {nm} must be a real number or None, got {v!r}")
    if lo is not None and hi is not None and lo > hi:
        raise ShapeError(f"clip: lo={lo} is greater than hi={hi}")
    dt = _dt(x)
    if lo is not None:
        dt = _ufunc_dtype("clip", np.maximum, Aval((), dt), Aval((), lo))
    if hi is not None:
        dt = _ufunc_dtype("clip", np.minimum, Aval((), dt), Aval((), hi))
    return Aval(tuple(x.shape), dt)


def _clip_vjp(g, ins, out, lo=None, hi=None):
    x = ins[0]
    m = np.ones(x.shape, dtype=bool)
    if lo is not None:
        m &= x >= lo
    if hi is not None:
        m &= x <= hi
    return g * m


clip_p = defprim("clip", _clip, _clip_shape, vjp=(_clip_vjp,))


def _where_shape(c, x, y):
    if _dt(c).kind != "b":
        raise ShapeError(f"where: condition must be boolean, got dtype {_dt(c)}")
    return Aval(broadcast_shapes("where", c.shape, x.shape, y.shape, names=["condition", "x", "y"]),
                _rtype(x.dtype, y.dtype))


where_p = defprim(
    "where", np.where, _where_shape,
    vjp=(None,
         lambda g, ins, out: unbroadcast(np.where(ins[0], g, 0).astype(g.dtype, copy=False), _shp(ins[1])),
         lambda g, ins, out: unbroadcast(np.where(ins[0], 0, g).astype(g.dtype, copy=False), _shp(ins[2]))),
    nondiff_args=(0,))


def _astype(x, dtype):
    return np.asarray(x).astype(dtype, copy=False)


astype_p = defprim("astype", _astype, lambda x, dtype: Aval(tuple(x.shape), np.dtype(dtype)),
                   vjp=(lambda g, ins, out, dtype: g.astype(np.asarray(ins[0]).dtype),))

# --------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------


def _reduce_shape(name):
    def rule(x, axis=None, keepdims=False):
        ax = _norm_axis(name, axis, len(x.shape))
        if ax is None:
            shp = (1,) * len(x.shape) if keepdims else ()
        elif keepdims:
            shp = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
        else:
            shp = tuple(d for i, d in enumerate(x.shape) if i not in ax)
        dt = _dt(x)
        if name == "mean" and dt.kind not in "fc":
            dt = np.dtype(np.float64)
        elif name == "sum" and dt.kind in "biu":
            dt = _sum_dtype(dt)
        return Aval(shp, dt)
    rule.__name__ = f"{name}_shape"
    return rule


def _sum_dtype(dt):
    """numpy's sum of booleans and small integers is a platform integer."""
    return np.add.reduce(np.zeros(1, dtype=dt)).dtype


def _expand_to(g, shape, axis, keepdims):
    """Adjoint of a reduction: ``g`` repeated along the reduced axes."""
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    # A fresh array rather than np.broadcast_to's read-only view: broadcast_to
    # costs ~1.8 us of Python per call, empty+copyto ~0.5 us, and the result is
    # writeable, so a leaf can keep it without another copy.
    out = np.empty(shape, dtype=g.dtype)
    np.copyto(out, g)
    return out


def _sum(x, axis=None, keepdims=False):
    # the ufunc method directly: np.sum adds ~0.8 us of Python dispatch
    return np.add.reduce(x, axis=axis, keepdims=keepdims)


def _mean(x, axis=None, keepdims=False):
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "f":
        return np.add.reduce(x, axis=axis, keepdims=keepdims) / _count(x.shape, axis)
    return np.mean(x, axis=axis, keepdims=keepdims)


def _count(shape, axis):
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else axis
    return math.prod(shape[a] for a in axes)


sum_p = defprim("sum", _sum, _reduce_shape("sum"),
                vjp=(lambda g, ins, out, axis=None, keepdims=False:
                     _expand_to(g, _shp(ins[0]), axis, keepdims),))

mean_p = defprim("mean", _mean, _reduce_shape("mean"),
                 vjp=(lambda g, ins, out, axis=None, keepdims=False:
                      _expand_to(g / _count(_shp(ins[0]), axis), _shp(ins[0]), axis, keepdims),))


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
    ax = _norm_axis("max", axis, len(x.shape))
    for a in (ax or range(len(x.shape))):
        if x.shape[a] == 0:
            raise ShapeError(f"max: cannot reduce over axis {a} of size 0 (x.shape={_fmt(x.shape)})")
    return _reduce_shape("max")(x, axis, keepdims)


max_p = defprim("max", _max, _max_shape, vjp=(_max_vjp,))

# --------------------------------------------------------------------------
# shapes and indexing
# --------------------------------------------------------------------------


def _reshape(x, shape):
    return np.reshape(x, shape)


def _shape_attr(op, shape):
    """A target shape attribute as a tuple of Python ints (DTypeError otherwise)."""
    if not isinstance(shape, (tuple, list)) or not all(_is_int(d) for d in shape):
        raise DTypeError(f"{op}: shape must be a tuple of integers, got {shape!r}")
    return tuple(int(d) for d in shape)


def _reshape_shape(x, shape):
    shape = _shape_attr("reshape", shape)
    if any(d < -1 for d in shape):
        raise ShapeError(f"reshape: invalid dimension in shape={shape} (dimensions are >= 0, or -1 for one "
                         f"inferred from the others)")
    if sum(1 for d in shape if d == -1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got shape={shape}")
    rest = math.prod(d for d in shape if d != -1)
    if any(d is None for d in x.shape):
        # the known part of x must fit: its element count divides the result's
        known = math.prod(d for d in x.shape if d is not None)
        if -1 not in shape and (rest % known if known else rest):
            raise ShapeError(f"reshape: cannot reshape x.shape={_fmt(x.shape)} into shape={shape}")
        return Aval(tuple(None if d == -1 else d for d in shape), _dt(x))
    n = math.prod(x.shape)
    if -1 in shape:
        if rest == 0 or n % rest:
            raise ShapeError(f"reshape: cannot reshape x.shape={_fmt(x.shape)} ({n} elements) into shape={shape}")
        shape = tuple(n // rest if d == -1 else d for d in shape)
    elif rest != n:
        raise ShapeError(f"reshape: cannot reshape x.shape={_fmt(x.shape)} ({n} elements) into shape={shape}")
    return Aval(shape, _dt(x))


reshape_p = defprim("reshape", _reshape, _reshape_shape,
                    vjp=(lambda g, ins, out, shape: g.reshape(np.shape(ins[0])),))


def _transpose(x, axes=None):
    return np.transpose(x, axes)


def _transpose_shape(x, axes=None):
    nd = len(x.shape)
    if axes is None:
        return Aval(tuple(reversed(x.shape)), _dt(x))
    if not isinstance(axes, (tuple, list)) or not all(_is_int(a) for a in axes):
        raise DTypeError(f"transpose: axes must be a tuple of integers, got {axes!r}")
    axes = tuple(axes)
    if sorted(a % nd if -nd <= a < nd else a for a in axes) != list(range(nd)):
        raise ShapeError(f"transpose: axes={axes} is not a permutation of the {nd} dimensions of x.shape={_fmt(x.shape)}")
    return Aval(tuple(x.shape[a] for a in axes), _dt(x))


def _transpose_vjp(g, ins, out, axes=None):
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, np.argsort([a % g.ndim for a in axes]))


transpose_p = defprim("transpose", _transpose, _transpose_shape, vjp=(_transpose_vjp,))


def _broadcast_to(x, shape):
    return np.broadcast_to(x, shape)


def _broadcast_to_shape(x, shape):
    shape = _shape_attr("broadcast_to", shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"broadcast_to: shape={shape} has a negative dimension")
    xs = tuple(x.shape)
    if len(xs) > len(shape) or any(d is not None and d != 1 and d != t for d, t in zip(reversed(xs), reversed(shape))):
        raise ShapeError(f"broadcast_to: x.shape={_fmt(xs)} cannot be broadcast to shape={shape}")
    return Aval(shape, _dt(x))


broadcast_to_p = defprim("broadcast_to", _broadcast_to, _broadcast_to_shape,
                         vjp=(lambda g, ins, out, shape: unbroadcast(g, np.shape(ins[0])),))


def _is_basic(index):
    idx = index if isinstance(index, tuple) else (index,)
    for i in idx:
        if not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice))):
            return False
    return True


def _getitem(x, index):
    return x[index]


def _index_error(index, x, msg):
    return IndexRangeError(f"getitem: index {index!r} is invalid for x.shape={_fmt(x.shape)}: {msg}")


def _getitem_shape(x, index):
    """numpy's indexing rules computed on the shape alone: a slice of a known
    dimension has ``len(range(*slice.indices(d)))`` elements, of an unknown one
    an unknown number; integer and boolean arrays (advanced indices) give the
    broadcast shape of the index arrays, in place of the indexed dimensions
    when those are adjacent, else in front (numpy's rule). Index values are
    not range-checked against unknown dimensions (the run checks them)."""
    shape = tuple(x.shape)
    nd = len(shape)
    items = index if type(index) is tuple else (index,)
    kinds = []                 # (kind, value): new, ell, int, slice, iarr, barr
    used = 0
    for i in items:
        if i is None:
            kinds.append(("new", None))
        elif i is Ellipsis:
            kinds.append(("ell", None))
        elif isinstance(i, (bool, np.bool_)):
            kinds.append(("barr", np.asarray(i)))
        elif _is_int(i):
            kinds.append(("int", int(i)))
            used += 1
        elif type(i) is slice:
            for part in (i.start, i.stop, i.step):
                if part is not None and not hasattr(part, "__index__"):
                    raise _index_error(index, x, "slice bounds must be integers or None")
            if i.step is not None and i.step.__index__() == 0:
                raise _index_error(index, x, "slice step cannot be zero")
            kinds.append(("slice", i))
            used += 1
        else:
            a = i if type(i) is np.ndarray else np.asarray(i) if isinstance(i, (list, tuple)) else None
            if a is None or a.dtype.kind not in "biu":
                raise _index_error(index, x, "only integers, slices, None, Ellipsis and integer or boolean "
                                             "arrays are valid indices")
            if a.dtype.kind == "b":
                kinds.append(("barr", a))
                used += a.ndim
            else:
                kinds.append(("iarr", a))
                used += 1
    n_ell = sum(1 for k, _ in kinds if k == "ell")
    if n_ell > 1:
        raise _index_error(index, x, "an index can only have a single ellipsis")
    if used > nd:
        raise _index_error(index, x, f"too many indices ({used}) for {nd} dimensions")
    full = ("slice", slice(None))
    if n_ell:
        k = next(j for j, (kind, _) in enumerate(kinds) if kind == "ell")
        # the ellipsis stays as a separator: numpy never counts advanced
        # indices on both sides of one as adjacent, even when it stands for no dimension
        kinds[k:k + 1] = [("ell", None)] + [full] * (nd - used)
    else:
        kinds += [full] * (nd - used)
    advanced = any(k in ("iarr", "barr") for k, _ in kinds)
    out = []
    adv_shapes = []
    adv_at = []                # positions in `kinds` of advanced indices
    p = 0
    for j, (kind, v) in enumerate(kinds):
        if kind == "ell":
            continue
        if kind == "new":
            out.append(1)
            continue
        if kind == "slice":
            d = shape[p]
            out.append(None if d is None else len(range(*v.indices(d))))
            p += 1
            continue
        if kind == "int":
            d = shape[p]
            if d is not None and not -d <= v < d:
                raise _index_error(index, x, f"{v} is out of range for dimension {p} of size {d}")
            p += 1
            if not advanced:
                continue
            adv_shapes.append(())
        elif kind == "iarr":
            adv_shapes.append(v.shape)
            p += 1
        else:
            dims = shape[p:p + v.ndim]
            # (numpy skips the match for an empty mask)
            if v.size and any(d is not None and d != m for d, m in zip(dims, v.shape)):
                raise _index_error(index, x, f"boolean index of shape {v.shape} does not match the indexed "
                                             f"dimensions {_fmt(dims)}")
            adv_shapes.append((int(np.count_nonzero(v)),))
            p += v.ndim
        adv_at.append(j)
        out.append("adv")
    if not advanced:
        return Aval(tuple(out), _dt(x))
    try:
        bshape = np.broadcast_shapes(*adv_shapes)
    except ValueError:
        raise _index_error(index, x, f"index arrays of shapes {adv_shapes} cannot be broadcast together") from None
    basic = [d for d in out if d != "adv"]
    if adv_at == list(range(adv_at[0], adv_at[-1] + 1)):
        at = out.index("adv")
        return Aval(tuple(basic[:at]) + bshape + tuple(basic[at:]), _dt(x))
    return Aval(bshape + tuple(basic), _dt(x))


def _getitem_vjp(g, ins, out, index):
    x = ins[0]
    gx = np.zeros(np.shape(x), dtype=g.dtype)
    if _is_basic(index):
        gx[index] = g
    else:
        np.add.at(gx, index, g)     # repeated indices accumulate
    return gx


_SLICE = object()      # marks a slice in getitem's attribute key


def _getitem_key(index):
    """A hashable stand-in for a basic index (slices are unhashable before
    Python 3.12); an index holding arrays stays unhashable (TypeError)."""
    tp = type(index)
    if tp is tuple:
        key = []            # a plain loop: a comprehension's frame costs ~0.1 us here
        for i in index:
            key.append((_SLICE, i.start, i.stop, i.step) if type(i) is slice else i)
        return tuple(key)
    if tp is slice:
        return (_SLICE, index.start, index.stop, index.step)
    return index


getitem_p = defprim("getitem", _getitem, _getitem_shape, vjp=(_getitem_vjp,), attr_key=_getitem_key)


def _take(x, idx):
    """Rows of ``x`` at integer indices ``idx`` (a gather along axis 0)."""
    return x[idx]


def _take_shape(x, idx):
    if _dt(idx).kind not in "iu":
        raise ShapeError(f"take: indices must be integers, got dtype {_dt(idx)}")
    if len(x.shape) < 1:
        raise ShapeError("take: x must have at least one dimension")
    return Aval(tuple(idx.shape) + tuple(x.shape[1:]), _dt(x))


def _take_vjp(g, ins, out):
    x, idx = ins
    shape = np.shape(x)
    idx = np.asarray(idx)
    if (idx.ndim == 1 and len(shape) == 2 and idx.size and _kernel_float(g.dtype)
            and idx.dtype.kind in "iu" and g.shape == (idx.shape[0], shape[1])):
        # rows scatter-added by the Numba kernel: np.add.at took 1.8 ms for
        # 480 rows of 600 (measured), the kernel a few microseconds
        n = shape[0]
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        lo, hi = idx.min(), idx.max()
        # the forward accepted these indices; checked again because the
        # kernel does not bounds-check (the array may have changed since)
        if lo < -n or hi >= n:
            raise IndexRangeError(f"take: index {lo if lo < -n else hi} is out of range for x.shape[0]={n}")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
        return K.embedding_bwd(idx, np.ascontiguousarray(g), n)
    gx = np.zeros(shape, dtype=g.dtype)
    np.add.at(gx, idx, g)
    return gx


take_p = defprim("take", _take, _take_shape, vjp=(_take_vjp, None), nondiff_args=(1,))


def _concat(*xs, axis=0):
    return np.concatenate(xs, axis=axis)


def _many_dtype(xs):
    """The result dtype of concatenating or stacking ``xs``: numpy makes Python
    scalars arrays there (no weak promotion). One result_type over the distinct
    dtypes: a recursive model concatenates thousands of node states."""
    dts = {x.dtype for x in xs}
    return np.result_type(*[d if isinstance(d, np.dtype) else _dt(Aval((), d)) for d in dts])


def _concat_shape(*xs, axis=0):
    if not xs:
        raise ShapeError("concat: expected at least one input")
    shapes = [x.shape for x in xs]
    s0 = tuple(shapes[0])
    nd = len(s0)
    ax = _norm_axis("concat", axis, nd)[0]
    # the set of shapes outside the axis: one element (and no unknown dimension)
    # in the usual case, checked without a Python loop per input (a recursive
    # model concatenates a minibatch's thousands of node states)
    if ax == 0:
        rest = {tuple(s[1:]) if len(s) == nd else None for s in shapes}
    else:
        rest = {tuple(s[:ax]) + tuple(s[ax + 1:]) if len(s) == nd else None for s in shapes}
    if len(rest) != 1 or None in rest or None in next(iter(rest)):
        for i, x in enumerate(xs):
            if len(x.shape) != nd:
                raise ShapeError(f"concat: input {i} has {len(x.shape)} dimensions, input 0 has {nd} "
                                 f"(input {i}.shape={_fmt(x.shape)}, input 0.shape={_fmt(s0)})")
            for d in range(nd):
                if d != ax and not _dims_match(x.shape[d], s0[d]):
                    raise ShapeError(f"concat: input {i}.shape={_fmt(x.shape)} does not match input 0.shape="
                                     f"{_fmt(s0)} outside axis {axis}")
    sizes = [s[ax] for s in shapes]
    shp = list(s0)
    shp[ax] = None if None in sizes else sum(sizes)
    # known dimensions outside the axis may come from any input
    for d in range(nd):
        if d != ax and shp[d] is None:
            shp[d] = next((s[d] for s in shapes if s[d] is not None), None)
    return Aval(tuple(shp), _many_dtype(xs))


def _concat_vjp(g, ins, out, axis=0):
    if axis == 0 or axis == -g.ndim:
        # plain slices: np.split costs ~1.5 us per piece in Python, which
        # dominates when a recursive model concatenates ~1000 node states
        out, start = [], 0
        for x in ins:
            stop = start + np.shape(x)[0]
            out.append(g[start:stop])
            start = stop
        return tuple(out)
    sizes = np.cumsum([np.shape(x)[axis] for x in ins])[:-1]
    return tuple(np.split(g, sizes, axis=axis))


concat_p = defprim("concat", _concat, _concat_shape, joint_vjp=_concat_vjp)


def _stack(*xs, axis=0):
    return np.stack(xs, axis=axis)


def _stack_shape(*xs, axis=0):
    if not xs:
        raise ShapeError("stack: expected at least one input")
    s0 = tuple(xs[0].shape)
    shapes = {tuple(x.shape) for x in xs}
    if len(shapes) != 1 or None in s0:
        for i, x in enumerate(xs):
            if not _fits(tuple(x.shape), s0):
                raise ShapeError(f"stack: input {i}.shape={_fmt(x.shape)} does not match input 0.shape={_fmt(s0)}")
    nd = len(s0) + 1
    ax = _norm_axis("stack", axis, nd)[0]
    shp = [next((x.shape[d] for x in xs if x.shape[d] is not None), None) for d in range(len(s0))]
    shp.insert(ax, len(xs))
    return Aval(tuple(shp), _many_dtype(xs))


def _stack_vjp(g, ins, out, axis=0):
    return tuple(np.moveaxis(g, axis, 0))


stack_p = defprim("stack", _stack, _stack_shape, joint_vjp=_stack_vjp)

# --------------------------------------------------------------------------
# linear algebra
# --------------------------------------------------------------------------


# Weight gradients of products with at most this many rows are returned as
# OuterSum factors (see OuterSum): a node applied to one tree node or one time
# step at a time then costs one matrix product per parameter per backward
# instead of one full-size outer product and addition per node.
_FACTOR_ROWS = 4

# Up to this many rows, weight gradients are formed by the outer_sum kernel
# rather than BLAS: numpy/OpenBLAS is slow exactly at one row (float32,
# (600, 300) gradient, kernel vs BLAS us: K=1 6.6 vs 16.8, K=2 12.9 vs 8.1).
_OUTER_MAX = 1


def _tdot(a, b):
    """``a.T @ b`` for 2-D ``a`` (k, m) and ``b`` (k, n): the weight gradient of
    a product over a batch of k rows."""
    if a.shape[0] == 1:
        # With a contracted dimension of 1, np.matmul leaves BLAS for a slow
        # loop: (600,1)@(1,300) float32 takes 177 us, np.dot 17 us (measured).
        return np.dot(a.T, b)
    return a.T @ b


def _wgrad(d, a):
    """Weight gradient ``d.T @ a`` of a product over the rows of ``a``."""
    if d.shape[0] <= _OUTER_MAX and _same_float(d, a):
        return K.outer_sum_fwd(d, a)
    return _tdot(d, a)


def _wgrad_f(d, a, shape):
    """:func:`_wgrad` (``d.T @ a``), kept factored (OuterSum) for at most
    ``_FACTOR_ROWS`` rows: a product or cell run one step or one node at a
    time then forms each weight gradient once per backward."""
    if d.shape[0] <= _FACTOR_ROWS:
        return OuterSum((d,), (a,), shape)
    return _wgrad(d, a)


def _matmul(x, w):
    if type(x) is np.ndarray and type(w) is np.ndarray and x.ndim == 2 and w.ndim == 2:
        # np.dot: the same product for 2-D operands, without matmul's slow
        # path at k == 1 (see _tdot), and ~0.3 us less call overhead
        return np.dot(x, w)
    return np.matmul(x, w)


def _matmul_shape(x, w):
    xs, ws = tuple(x.shape), tuple(w.shape)
    if len(xs) == 0 or len(ws) == 0:
        raise ShapeError(f"matmul: inputs must have at least one dimension, got x.shape={_fmt(xs)}, w.shape={_fmt(ws)}")
    xk = xs[-1]
    wk = ws[0] if len(ws) == 1 else ws[-2]
    if xk is not None and wk is not None and xk != wk:
        wname = "w.shape[0]" if len(ws) == 1 else ("w.shape[0]" if len(ws) == 2 else "w.shape[-2]")
        raise ShapeError(f"matmul: x.shape[-1]={xk} does not match {wname}={wk} "
                         f"(x.shape={_fmt(xs)}, w.shape={_fmt(ws)})")
    xb = xs[:-2] if len(xs) > 1 else ()
    wb = ws[:-2] if len(ws) > 1 else ()
    batch = broadcast_shapes("matmul", xb, wb, names=["x batch", "w batch"])
    shp = batch + (xs[-2:-1] if len(xs) > 1 else ()) + (ws[-1:] if len(ws) > 1 else ())
    return Aval(shp, _rtype(x.dtype, w.dtype))


def _matmul_vjp_x(g, ins, out):
    x, w = ins
    if w.ndim == 1:
        gx = np.multiply.outer(g, w) if x.ndim > 1 else g * w
    elif x.ndim == 1:
        gx = np.matmul(g[..., None, :], np.swapaxes(w, -1, -2))[..., 0, :]
    else:
        gx = np.matmul(g, np.swapaxes(w, -1, -2))
    return unbroadcast(gx, x.shape)


def _matmul_vjp_w(g, ins, out):
    x, w = ins
    if x.ndim == 2 and w.ndim == 2:
        return _wgrad_f(x, g, w.shape)
    return _matmul_vjp_w_dense(g, ins, out)


def _matmul_vjp_w_dense(g, ins, out):
    x, w = ins
    if x.ndim == 1:
        gw = np.multiply.outer(x, g) if w.ndim > 1 else g * x
        if w.ndim > 2:
            gw = np.matmul(x[:, None], g[..., None, :])
    elif w.ndim == 1:
        gw = np.matmul(np.swapaxes(x, -1, -2), g[..., None])[..., 0]
    elif x.ndim == 2 and w.ndim == 2:
        gw = _tdot(x, g)
    else:
        gw = np.matmul(np.swapaxes(x, -1, -2), g)
    return unbroadcast(gw, w.shape)


matmul_p = defprim("matmul", _matmul, _matmul_shape, vjp=(_matmul_vjp_x, _matmul_vjp_w))


def _linear(x, w, b):
    """``x @ w.T + b`` with ``w`` of shape (out, in), as ``torch.nn.functional.linear``."""
    return x @ w.T + b


def _linear_shape(x, w, b):
    if len(w.shape) != 2:
        raise ShapeError(f"linear: weight must be 2-D (out_features, in_features), got w.shape={_fmt(w.shape)}")
    if len(x.shape) == 0:
        raise ShapeError(f"linear: x must have at least one dimension (..., in_features), got x.shape={_fmt(x.shape)}")
    if x.shape[-1] is not None and w.shape[1] is not None and x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: x.shape[-1]={x.shape[-1]} does not match weight.shape[1]={w.shape[1]} "
                         f"(x.shape={_fmt(x.shape)}, weight.shape={_fmt(w.shape)})")
    bs = tuple(b.shape)
    if not (bs == () or (len(bs) in (1, 2) and bs[:-1] in ((), (1,), (None,)) and _dims_match(bs[-1], w.shape[0]))):
        o = _fmt(w.shape[:1])[1:-2]
        raise ShapeError(f"linear: bias.shape={_fmt(bs)} does not match weight.shape[0]={o} "
                         f"(expected ({o},), (1, {o}) or ())")
    # the bias broadcasts against x @ w.T: a (1, out) bias on a 1-D x gives (1, out), as in PyTorch
    out = broadcast_shapes("linear", tuple(x.shape[:-1]) + (w.shape[0],), bs, names=["x @ weight.T", "bias"])
    return Aval(out, _ufunc_dtype("linear", np.add, Aval((), _ufunc_dtype("linear", np.matmul, x, w)), b))


def _dims_match(a, b):
    return a is None or b is None or a == b


def _linear_vjp(g, ins, out, factor=True):
    x, w, b = ins
    rows = math.prod(x.shape[:-1])         # not -1: a reshape cannot infer it when in_features is 0
    x2 = x.reshape(rows, x.shape[-1])
    g2 = g.reshape(rows, w.shape[0])
    gw = _wgrad_f(g2, x2, w.shape) if factor else _tdot(g2, x2)
    gx = (g2 @ w).reshape(x.shape)
    gb = g2.sum(0) if np.ndim(b) else g2.sum()
    return gx, gw, np.reshape(gb, np.shape(b))


def _linear_vjp_dense(g, ins, out):
    return _linear_vjp(g, ins, out, factor=False)


linear_p = defprim("linear", _linear, _linear_shape, joint_vjp=_linear_vjp)

# --------------------------------------------------------------------------
# softmax family, losses, embedding
# --------------------------------------------------------------------------


def _softmax(x, axis=-1):
    if x.ndim == 2 and (axis == -1 or axis == 1) and x.shape[1] and _same_float(x):
        return K.softmax_fwd(x)
    if x.shape[axis] == 0:
        return np.empty_like(x)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    if x.ndim == 2 and (axis == -1 or axis == 1) and x.shape[1] and _same_float(x):
        return K.log_softmax_fwd(x)
    if x.shape[axis] == 0:
        return np.empty_like(x)
    m = np.max(x, axis=axis, keepdims=True)
    s = x - m
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _softmax_shape(name):
    def rule(x, axis=-1):
        if not _is_int(axis):
            raise DTypeError(f"{name}: axis must be an integer, got {axis!r}")
        _norm_axis(name, axis, len(x.shape))
        if _dt(x).kind != "f":
            raise DTypeError(f"{name}: expected a floating-point input, got dtype {_dt(x)}")
        return Aval(tuple(x.shape), _dt(x))
    return rule


softmax_p = defprim(
    "softmax", _softmax, _softmax_shape("softmax"),
    vjp=(lambda g, ins, out, axis=-1: out * (g - (g * out).sum(axis=axis, keepdims=True)),))

log_softmax_p = defprim(
    "log_softmax", _log_softmax, _softmax_shape("log_softmax"),
    vjp=(lambda g, ins, out, axis=-1: g - np.exp(out) * g.sum(axis=axis, keepdims=True),))


def _class_indices(op, name, t, n_classes):
    """``t`` as C-contiguous int64 after checking every value is in
    ``[0, n_classes)``: the kernels index with them unchecked. One reduction
    over the unsigned view finds negative and too-large values alike."""
    t = np.ascontiguousarray(t, dtype=np.int64)
    if t.size and t.view(np.uint64).max() >= n_classes:
        bad = t[(t < 0) | (t >= n_classes)][0]
        raise IndexRangeError(f"{op}: {name} {bad} is out of range for {n_classes} classes")
    return t


def _xent(logits, targets, weights=None, reduction="mean"):
    """Softmax cross-entropy over rows; returns (loss, probs). ``weights`` (N,)
    masks rows (0 drops a row); 'mean' divides by the total weight."""
    n, c = logits.shape
    t = _class_indices("cross_entropy", "target", targets, c)
    dt = logits.dtype
    w = np.ones(n, dtype=dt) if weights is None else np.ascontiguousarray(weights, dtype=dt)
    losses, probs = K.softmax_xent_fwd(np.ascontiguousarray(logits), t, w)
    if reduction == "none":
        loss = losses
    elif reduction == "sum":
        loss = np.asarray(losses.sum(), dtype=dt)
    else:
        total = w.sum()
        loss = np.asarray(losses.sum() / total if total > 0 else 0.0, dtype=dt)
    return loss, probs


def _xent_shape(logits, targets, weights=None, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ShapeError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if len(logits.shape) != 2:
        raise ShapeError(f"cross_entropy: logits must be 2-D (N, C), got logits.shape={_fmt(logits.shape)}")
    if not _kernel_float(_dt(logits)):
        raise DTypeError(f"cross_entropy: logits must be float32 or float64, got dtype {_dt(logits)}")
    if _dt(targets).kind not in "iu":
        raise DTypeError(f"cross_entropy: targets must be integer class indices, got dtype {_dt(targets)}")
    if len(targets.shape) != 1 or not _dims_match(targets.shape[0], logits.shape[0]):
        raise ShapeError(f"cross_entropy: targets.shape={_fmt(targets.shape)} does not match "
                         f"logits.shape[0]={logits.shape[0]} (logits.shape={_fmt(logits.shape)}; expected one "
                         f"class index per row, targets.shape={_fmt(logits.shape[:1])})")
    if weights is not None:
        if len(weights.shape) != 1 or not _dims_match(weights.shape[0], targets.shape[0]):
            raise ShapeError(f"cross_entropy: mask.shape={_fmt(weights.shape)} does not match "
                             f"targets.shape={_fmt(targets.shape)}")
        if _dt(weights).kind not in "biuf":
            raise DTypeError(f"cross_entropy: mask must be real numbers, got dtype {_dt(weights)}")
    n = logits.shape[0] if logits.shape[0] is not None else targets.shape[0]
    shp = (n,) if reduction == "none" else ()
    return Aval(shp, _dt(logits)), Aval((n, logits.shape[1]), _dt(logits))


def _xent_vjp(g, ins, out, reduction="mean"):
    targets = ins[1]
    weights = ins[2] if len(ins) > 2 and ins[2] is not None else None
    gl = g[0]
    probs = out[1]
    n, c = probs.shape
    dt = probs.dtype
    tail = (None,) if len(ins) > 2 else ()
    if gl is None:
        # only the saved softmax received a gradient, which by design carries none
        return (np.zeros((n, c), dtype=dt), None) + tail
    w = np.ones(n, dtype=dt) if weights is None else np.ascontiguousarray(weights, dtype=dt)
    if reduction == "none":
        grow = np.ascontiguousarray(gl, dtype=dt)
        if grow.shape != (n,):
            raise ShapeError(f"cross_entropy: gradient of the per-row losses has shape {_fmt(grow.shape)}, "
                             f"expected ({n},)")
    else:
        scale = gl if reduction == "sum" else (gl / w.sum() if w.sum() > 0 else 0 * gl)
        grow = np.full(n, scale, dtype=dt)
    t = _class_indices("cross_entropy", "target", targets, c)
    if t.shape != (n,) or w.shape != (n,):
        raise ShapeError(f"cross_entropy: targets.shape={_fmt(t.shape)} and mask.shape={_fmt(w.shape)} do not "
                         f"match the {n} rows of the logits")
    dlogits = K.softmax_xent_bwd(probs, t, w, grow)
    return (dlogits, None) + tail


softmax_cross_entropy_p = defprim(
    "softmax_cross_entropy", _xent, _xent_shape, joint_vjp=_xent_vjp,
    multiple_results=True, nondiff_args=(1, 2))


def _embedding(weight, ids):
    """Rows of ``weight`` (V, D) for integer ``ids`` of any shape in ``[0, V)``
    (no negative ids: PyTorch's embedding rejects them rather than wrap)."""
    n = weight.shape[0]
    if type(ids) is not np.ndarray:
        ids = np.asarray(ids)
    # one reduction over the unsigned view finds negative and too-large ids alike
    if ids.size and ids.view(ids.dtype.str.replace("i", "u")).max() >= n:
        flat = ids.reshape(-1)
        bad = flat[(flat < 0) | (flat >= n)][0]
        raise IndexRangeError(f"embedding: id {bad} is out of range for {n} embeddings (ids must be in [0, {n}))")
    return weight[ids]


def _embedding_shape(weight, ids):
    if len(weight.shape) != 2:
        raise ShapeError(f"embedding: weight must be 2-D (num_embeddings, dim), got weight.shape={_fmt(weight.shape)}")
    if _dt(ids).kind not in "iu":
        raise DTypeError(f"embedding: ids must be integers, got dtype {_dt(ids)}")
    return Aval(tuple(ids.shape) + (weight.shape[1],), _dt(weight))


def _embedding_vjp(g, ins, out):
    weight, ids = ins
    V, D = weight.shape
    flat = np.asarray(ids).reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= V):
        raise IndexRangeError(f"embedding: id out of range for {V} embeddings")
    rows, inv = np.unique(flat, return_inverse=True)
    inv = inv.astype(np.int64).reshape(-1)
    if type(g) is MatmulT:
        if g.a.shape[0] == flat.size and _same_float(g.a):
            # g = a @ w.T (per-node leaves, see split_rows): rows of a are
            # summed per id and the values stay a product, formed once for
            # all the sentences of a minibatch (RowSparse._join)
            vals = K.embedding_bwd(inv, g.a, len(rows))
            return RowSparse(rows, MatmulT(vals, g.w), weight.shape)
        g = g.to_dense()
    g2 = np.reshape(g, (flat.size, D))
    if _kernel_float(g2.dtype):
        vals = K.embedding_bwd(inv, np.ascontiguousarray(g2), len(rows))
    else:
        vals = np.zeros((len(rows), D), dtype=g2.dtype)
        np.add.at(vals, inv, g2)
    return RowSparse(rows, vals, weight.shape)


embedding_p = defprim("embedding", _embedding, _embedding_shape, vjp=(_embedding_vjp, None),
                      nondiff_args=(1,))
embedding_p.lazy_grads = True

# --------------------------------------------------------------------------
# fused recurrent cells (Numba kernels)
# --------------------------------------------------------------------------


def _c(a):
    return np.ascontiguousarray(a)


def _fits(got, want):
    """Shape ``got`` can be ``want``: same rank, and each dimension equal or unknown (None) in either."""
    return len(got) == len(want) and all(a is None or b is None or a == b for a, b in zip(got, want))


def _mul(k, d):
    return None if d is None else k * d


def _floats(op, **avals):
    """The common dtype of a kernel primitive's float inputs, each of which
    must be float32 or float64 (the dtypes the Numba kernels are compiled for)."""
    for name, a in avals.items():
        if not _kernel_float(_dt(a)):
            raise DTypeError(f"{op}: {name} must be float32 or float64, got dtype {_dt(a)}")
    return np.result_type(*[_dt(a) for a in avals.values()])


def _kernel_args(*arrays):
    """``arrays`` as they are when they are C-contiguous numpy arrays of one
    float dtype (the usual case, one fast check), else as C-contiguous copies
    in their common dtype: each kernel is compiled for that one signature."""
    if _same_float(*arrays):
        return arrays
    dt = np.result_type(*arrays)
    return tuple(np.ascontiguousarray(a, dtype=dt) for a in arrays)


def _check_cell(name, x, h, gates, w_ih, w_hh, extra=()):
    """Shapes of a PyTorch-style cell's inputs; ``extra`` lists further
    (name, aval, want) with ``want`` in the tokens "B" (batch), "H" (hidden
    size) and "G" (gates * H). Returns (B, H)."""
    def bad(msg):
        raise ShapeError(f"{name}: {msg}")
    if len(w_hh.shape) != 2 or not _dims_match(w_hh.shape[0], _mul(gates, w_hh.shape[1])):
        want = f"({gates * w_hh.shape[1]}, {w_hh.shape[1]})" if len(w_hh.shape) == 2 and w_hh.shape[1] is not None \
            else f"({gates}*hidden_size, hidden_size)"
        bad(f"weight_hh.shape={_fmt(w_hh.shape)} should be {want}")
    H = w_hh.shape[1]
    G = _mul(gates, H)
    if len(x.shape) != 2:
        bad(f"x must be 2-D (batch, input_size), got x.shape={_fmt(x.shape)}")
    if len(w_ih.shape) != 2 or not _dims_match(w_ih.shape[0], G):
        bad(f"weight_ih.shape={_fmt(w_ih.shape)} should be ({G}, input_size) ({gates}*hidden_size with "
            f"hidden_size={H} from weight_hh.shape={_fmt(w_hh.shape)})")
    if not _dims_match(x.shape[1], w_ih.shape[1]):
        bad(f"x.shape[1]={x.shape[1]} does not match weight_ih.shape[1]={w_ih.shape[1]}")
    B = x.shape[0] if x.shape[0] is not None else (h.shape[0] if len(h.shape) == 2 else None)
    if not _fits(tuple(h.shape), (B, H)):
        bad(f"h.shape={_fmt(h.shape)} should be {_fmt((B, H))} (x.shape={_fmt(x.shape)}, hidden_size={H})")
    for nm, a, want in extra:
        want = tuple({"B": B, "H": H, "G": G}[d] for d in want)
        if not _fits(tuple(a.shape), want):
            bad(f"{nm}.shape={_fmt(a.shape)} should be {_fmt(want)} (x.shape={_fmt(x.shape)}, "
                f"h.shape={_fmt(h.shape)})")
    return B, H


# The Numba cell kernels evaluate exp/tanh one scalar at a time (libm, ~9 ns
# each) while numpy's float ufuncs are SIMD-vectorised, so past a few hundred
# elements the numpy twin (reference.py, the kernels' tested specification) is
# faster; below, the kernel's single pass wins. Thresholds are B*H (rows times
# hidden size) at and above which the twin runs, from float32 timings at
# H=150 (kernel vs twin, us): lstm fwd B=1 6.7/19, B=25 166/43; lstm bwd B=1
# 2.4/13, B=25 56/29; gru fwd B=4 12/26, B=25 72/37 (gru bwd: kernel always
# faster); tree fwd B=4 25/48, B=25 197/54; tree bwd B=4 12/26, B=25 67/36;
# leaf fwd B=4 20/20, B=25 138/30; leaf bwd B=4 7.6/17, B=25 43/23.
# Since the LSTM forward also adds the biases and saves tanh(c) (figures above
# are older): lstm fwd B=1 6.9/21, B=4 24/31, B=8 47/35; lstm bwd is arithmetic
# only and always faster (B=1 1.4/14, B=25 12/32).
_TWIN_MIN = {
    "lstm_cell_fwd": 800, "lstm_cell_bwd": None,
    "gru_cell_fwd": 2048, "gru_cell_bwd": None,
    "tree_lstm_fwd": 1024, "tree_lstm_bwd": 2048,
    "tree_lstm_leaf_fwd": 600, "tree_lstm_leaf_bwd": 2048,
}


def _cell_kernel(name, n):
    """Kernel ``name`` from kernels.py, or its numpy twin when ``n`` = B*H is large."""
    lim = _TWIN_MIN[name]
    if lim is not None and n >= lim:
        return getattr(_twin, name)
    return getattr(K, name)


def _lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """PyTorch ``LSTMCell``: gates = x W_ih^T + b_ih + h W_hh^T + b_hh (i, f, g, o).
    Returns (h', c', acts) where acts (B, 5H) are the saved gate activations and tanh(c')."""
    dt = c.dtype
    # (equality, not identity: arrays Numba allocates carry their own dtype objects)
    if not ((dt == _F32 or dt == _F64) and x.dtype == dt and h.dtype == dt and w_ih.dtype == dt
            and w_hh.dtype == dt and b_ih.dtype == dt and b_hh.dtype == dt and c.flags.c_contiguous
            and b_ih.flags.c_contiguous and b_hh.flags.c_contiguous):
        # one check of the usual case, inline: this cell runs once per time step
        x, h, c, w_ih, w_hh, b_ih, b_hh = _kernel_args(x, h, c, w_ih, w_hh, b_ih, b_hh)
    # W_ih x.T, not x W_ih.T: single-threaded OpenBLAS runs this
    # weight-on-the-left product 10-30% faster (measured, float32, B=25:
    # 300->600 72 vs 105 us, 150->600 37 vs 52 us), and with x.T made
    # contiguous up to 3x faster at B=3-4 (300->600 B=3 40 vs 15 us; at B=1 the
    # copy is a no-op). The kernel reads the two (4H, B) products as they are
    # and adds the biases itself: no transposing copy, no four broadcast
    # additions (~6 us at B=1).
    return _cell_kernel("lstm_cell_fwd", c.size)(np.dot(w_ih, _c(x.T)), np.dot(w_hh, _c(h.T)), b_ih, b_hh, c)


def _lstm_cell_shape(x, h, c, w_ih, w_hh, b_ih, b_hh):
    dt = _floats("lstm_cell", x=x, h=h, c=c, weight_ih=w_ih, weight_hh=w_hh, bias_ih=b_ih, bias_hh=b_hh)
    B, H = _check_cell("lstm_cell", x, h, 4, w_ih, w_hh,
                       [("c", c, ("B", "H")), ("bias_ih", b_ih, ("G",)), ("bias_hh", b_hh, ("G",))])
    return Aval((B, H), dt), Aval((B, H), dt), Aval((B, _mul(5, H)), dt)


def _zeros_if_none(g, like):
    """An output gradient as a kernel argument: zeros for None, else C-contiguous
    in ``like``'s dtype, after checking it has ``like``'s shape."""
    if g is None:
        return np.zeros_like(like)
    if g.shape != like.shape:
        raise ShapeError(f"gradient of shape {_fmt(g.shape)} for an output of shape {_fmt(like.shape)}")
    return np.ascontiguousarray(g, dtype=like.dtype)


def _lstm_cell_vjp(g, ins, out):
    x, h, c, w_ih, w_hh, b_ih, b_hh = ins
    hn, cn, acts = out
    dgates, dc, db = _cell_kernel("lstm_cell_bwd", cn.size)(
        _zeros_if_none(g[0], hn), _zeros_if_none(g[1], cn), acts, _f(c, cn.dtype))
    # both biases receive the same array, as before (clip_grad_norm_ reassigns, never scales in place)
    return (np.dot(dgates, w_ih), np.dot(dgates, w_hh), dc, _wgrad_f(dgates, x, w_ih.shape),
            _wgrad_f(dgates, h, w_hh.shape), db, db)


lstm_cell_p = defprim("lstm_cell", _lstm_cell, _lstm_cell_shape, joint_vjp=_lstm_cell_vjp,
                      multiple_results=True)


def _gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """PyTorch ``GRUCell`` (r, z, n chunks). Returns (h', acts, gh)."""
    x, h, w_ih, w_hh, b_ih, b_hh = _kernel_args(x, h, w_ih, w_hh, b_ih, b_hh)
    gi = x @ w_ih.T
    gi += b_ih
    gh = h @ w_hh.T
    gh += b_hh
    hn, acts = _cell_kernel("gru_cell_fwd", h.size)(gi, gh, h)
    return hn, acts, gh


def _gru_cell_shape(x, h, w_ih, w_hh, b_ih, b_hh):
    dt = _floats("gru_cell", x=x, h=h, weight_ih=w_ih, weight_hh=w_hh, bias_ih=b_ih, bias_hh=b_hh)
    B, H = _check_cell("gru_cell", x, h, 3, w_ih, w_hh, [("bias_ih", b_ih, ("G",)), ("bias_hh", b_hh, ("G",))])
    return Aval((B, H), dt), Aval((B, _mul(3, H)), dt), Aval((B, _mul(3, H)), dt)


def _gru_cell_vjp(g, ins, out):
    x, h, w_ih, w_hh, b_ih, b_hh = ins
    hn, acts, gh = out
    dgi, dgh, dh = _cell_kernel("gru_cell_bwd", hn.size)(_zeros_if_none(g[0], hn), acts, gh, _f(h, hn.dtype))
    dh = dh + dgh @ w_hh
    return (dgi @ w_ih, dh, _wgrad_f(dgi, x, w_ih.shape), _wgrad_f(dgh, h, w_hh.shape), dgi.sum(0), dgh.sum(0))


gru_cell_p = defprim("gru_cell", _gru_cell, _gru_cell_shape, joint_vjp=_gru_cell_vjp, multiple_results=True)


def _tree_lstm_cell(h_l, h_r, c_l, c_r, w, b):
    """Binary constituency Tree-LSTM node (Tai et al. 2015, eqs. 9-14, N = 2, no
    input at internal nodes), for a batch of nodes:

    z = [h_l; h_r] W + b, split into i, f_l, f_r, o, u;
    c = i*u + f_l*c_l + f_r*c_r;  h = o*tanh(c).

    ``w`` has shape (2H, 5H). Returns (h, c, acts).
    """
    h_l, h_r, c_l, c_r, w, b = _kernel_args(h_l, h_r, c_l, c_r, w, b)
    hcat = np.concatenate((h_l, h_r), axis=1)
    z = hcat @ w
    z += b
    return _cell_kernel("tree_lstm_fwd", c_l.size)(z, c_l, c_r)


def _tree_lstm_cell_shape(h_l, h_r, c_l, c_r, w, b):
    op = "tree_lstm_cell"
    dt = _floats(op, h_l=h_l, h_r=h_r, c_l=c_l, c_r=c_r, w=w, b=b)
    if len(h_l.shape) != 2:
        raise ShapeError(f"{op}: h_l must be 2-D (nodes, hidden), got h_l.shape={_fmt(h_l.shape)}")
    n, H = h_l.shape
    for nm, a in (("h_r", h_r), ("c_l", c_l), ("c_r", c_r)):
        if not _fits(tuple(a.shape), (n, H)):
            raise ShapeError(f"{op}: {nm}.shape={_fmt(a.shape)} does not match h_l.shape={_fmt(h_l.shape)}")
        n = n if n is not None else a.shape[0]
    if not _fits(tuple(w.shape), (_mul(2, H), _mul(5, H))):
        raise ShapeError(f"{op}: w.shape={_fmt(w.shape)} should be {_fmt((_mul(2, H), _mul(5, H)))} for hidden "
                         f"size {H}")
    if not _fits(tuple(b.shape), (_mul(5, H),)):
        raise ShapeError(f"{op}: b.shape={_fmt(b.shape)} should be {_fmt((_mul(5, H),))}")
    return Aval((n, H), dt), Aval((n, H), dt), Aval((n, _mul(5, H)), dt)


def _tree_lstm_cell_vjp(g, ins, out):
    h_l, h_r, c_l, c_r, w, b = ins
    h, c, acts = out
    dt = c.dtype
    dz, dcl, dcr = _cell_kernel("tree_lstm_bwd", c.size)(_zeros_if_none(g[0], h), _zeros_if_none(g[1], c), acts,
                                                         _f(c_l, dt), _f(c_r, dt), c)
    H = h.shape[1]
    dhcat = dz @ w.T
    hcat = np.concatenate((h_l, h_r), axis=1)
    return (dhcat[:, :H], dhcat[:, H:], dcl, dcr, _wgrad_f(hcat, dz, w.shape), dz.sum(0))


tree_lstm_cell_p = defprim("tree_lstm_cell", _tree_lstm_cell, _tree_lstm_cell_shape,
                           joint_vjp=_tree_lstm_cell_vjp, multiple_results=True)


def _tree_lstm_leaf(x, w, b):
    """Tree-LSTM leaf (input only, no children): z = x W + b split into i, o, u;
    c = i*u; h = o*tanh(c). ``w`` has shape (E, 3H). Returns (h, c, acts)."""
    x, w, b = _kernel_args(x, w, b)
    z = x @ w
    z += b
    return _cell_kernel("tree_lstm_leaf_fwd", z.size // 3)(z)


def _leaf_shape(op, x, w, b):
    """Shapes of a Tree-LSTM leaf's inputs x (n, E), w (E, 3H), b (3H,); returns (n, H)."""
    if len(x.shape) != 2:
        raise ShapeError(f"{op}: x must be 2-D (nodes, input_size), got x.shape={_fmt(x.shape)}")
    if len(w.shape) != 2 or not _dims_match(w.shape[0], x.shape[1]) or (w.shape[1] is not None and w.shape[1] % 3):
        raise ShapeError(f"{op}: w.shape={_fmt(w.shape)} should be ({x.shape[1]}, 3*hidden)")
    H = None if w.shape[1] is None else w.shape[1] // 3
    if not _fits(tuple(b.shape), (_mul(3, H),)):
        raise ShapeError(f"{op}: b.shape={_fmt(b.shape)} should be {_fmt((_mul(3, H),))}")
    return x.shape[0], H


def _tree_lstm_leaf_shape(x, w, b):
    dt = _floats("tree_lstm_leaf", x=x, w=w, b=b)
    n, H = _leaf_shape("tree_lstm_leaf", x, w, b)
    return Aval((n, H), dt), Aval((n, H), dt), Aval((n, _mul(3, H)), dt)


def _tree_lstm_leaf_vjp(g, ins, out):
    x, w, b = ins
    h, c, acts = out
    dz = _cell_kernel("tree_lstm_leaf_bwd", c.size)(_zeros_if_none(g[0], h), _zeros_if_none(g[1], c), acts, c)
    return (dz @ w.T, _wgrad_f(x, dz, w.shape), dz.sum(0))


tree_lstm_leaf_p = defprim("tree_lstm_leaf", _tree_lstm_leaf, _tree_lstm_leaf_shape,
                           joint_vjp=_tree_lstm_leaf_vjp, multiple_results=True)


# --------------------------------------------------------------------------
# VJPs as primitives (for the static graph's symbolic gradients)
# --------------------------------------------------------------------------

_VJP_PRIMS: dict = {}


_LAZY = (RowSparse, OuterSum, MatmulT)

# VJPs that return a factored (OuterSum) gradient for a few rows, and their
# dense twins for callers that densify at once (static plans): there a factor
# object and its product cost more than forming the gradient directly
DENSE_VJPS = {("matmul", 1): _matmul_vjp_w_dense, ("linear", None): _linear_vjp_dense}


def _dense_like(a, x):
    if a is None:
        return None
    if type(a) in _LAZY:
        a = a.to_dense()
    dt = getattr(x, "dtype", None)
    return a if dt is None or a.dtype == dt else np.asarray(a).astype(dt)


def vjp_primitive(prim, i=None):
    """A primitive whose forward *is* ``prim``'s VJP for input ``i`` (or the
    joint VJP when ``i`` is None). Inputs: (g, *prim_inputs, out) where ``g``
    and ``out`` are tuples packed as separate arguments for multiple-result
    primitives: (g_0..g_k, x_0..x_n, out_0..out_k). Not itself differentiable
    (no second-order gradients)."""
    key = (prim.name, i)
    p = _VJP_PRIMS.get(key)
    if p is not None:
        return p
    fn = DENSE_VJPS.get(key) or (prim.joint_vjp if i is None else prim.vjps[i])

    def impl(*args, _n_in, **attrs):
        if prim.multiple_results:
            nout = (len(args) - _n_in) // 2
            g = tuple(args[:nout])
            ins = args[nout:nout + _n_in]
            out = tuple(args[nout + _n_in:])
        else:
            g, ins, out = args[0], args[1:1 + _n_in], args[1 + _n_in]
        r = fn(g, ins, out, **attrs)
        # dense, in each input's dtype (the static graph declares that)
        if i is None:
            return tuple(_dense_like(a, x) for a, x in zip(r, ins))
        return _dense_like(r, ins[i])

    def shape(*avals, _n_in, **attrs):
        if prim.multiple_results:
            nout = (len(avals) - _n_in) // 2
            gs, ins, outs = avals[:nout], avals[nout:nout + _n_in], avals[nout + _n_in:]
        else:
            gs, ins, outs = avals[:1], avals[1:1 + _n_in], avals[1 + _n_in:]
        # each output gradient (a None constant where an output has none) must
        # have its output's shape: the VJPs' kernels index them unchecked
        for k, (ga, oa) in enumerate(zip(gs, outs)):
            if not (ga.shape == () and _dt(ga) == object) and not _fits(tuple(ga.shape), tuple(oa.shape)):
                raise ShapeError(f"{name}: gradient of output {k} has shape {_fmt(ga.shape)}, the output "
                                 f"{_fmt(oa.shape)}")
        if i is None:
            return tuple(Aval(tuple(a.shape), _dt(a)) for a in ins)
        return Aval(tuple(ins[i].shape), _dt(ins[i]))

    name = f"vjp_{prim.name}" + ("" if i is None else f"_{i}")
    p = Primitive(name, impl, shape, multiple_results=(i is None), differentiable=False)
    _VJP_PRIMS[key] = p
    return p


VJP_PRIMITIVES = _VJP_PRIMS


# --------------------------------------------------------------------------
# level-batched tree models, packed sequences, per-row splitting (issue 4).
# Kernels: kernels_tree.py (numpy twins in reference_tree.py). Each "levels"
# primitive runs a whole minibatch schedule (dynnets.data.batching.TreeBatch):
# one fused kernel call and one matrix product per level, children read from
# the state rows of earlier levels; its VJP walks the levels in reverse and
# forms each weight gradient with one matrix product over all nodes.
# --------------------------------------------------------------------------


def _split_rows(x):
    """The rows of ``x`` (n, ...) as n arrays of shape (1, ...): a recursive
    model reads its per-word inputs with one node instead of n ``getitem``s
    (whose VJPs would each allocate an (n, ...) gradient)."""
    return tuple(x[i:i + 1] for i in range(x.shape[0]))


def _split_rows_shape(x):
    if len(x.shape) < 1:
        raise ShapeError("split_rows: x must have at least one dimension, got a 0-d input")
    if x.shape[0] is None:
        raise ShapeError(f"split_rows: x.shape[0] (the number of results) must be known, got x.shape={_fmt(x.shape)}")
    return tuple(Aval((1,) + tuple(x.shape[1:]), _dt(x)) for _ in range(x.shape[0]))


def _split_rows_vjp(g, ins, out):
    x = ins[0]
    lazy = [gi for gi in g if type(gi) is MatmulT]
    if lazy:
        w = lazy[0].w
        if np.ndim(x) == 2 and all(gi is None or (type(gi) is MatmulT and gi.w is w and gi.a.shape[0] == 1)
                                   for gi in g):
            # every row's gradient is (its a) @ w.T: one product for all rows
            if len(lazy) == len(g):
                a = np.concatenate([gi.a for gi in g])
            else:
                a = np.zeros((len(g), lazy[0].a.shape[1]), dtype=lazy[0].a.dtype)
                for i, gi in enumerate(g):
                    if gi is not None:
                        a[i] = gi.a[0]
            # still a product: an embedding consumer keeps it so (lazy_grads),
            # any other is given it dense by the engine
            return (MatmulT(a, w),)
        g = [gi.to_dense() if type(gi) is MatmulT else gi for gi in g]
    dt = next((gi.dtype for gi in g if gi is not None), np.asarray(x).dtype)
    gx = np.zeros(np.shape(x), dtype=dt)
    for i, gi in enumerate(g):
        if gi is not None:
            gx[i] = gi[0]
    return (gx,)


split_rows_p = defprim("split_rows", _split_rows, _split_rows_shape, joint_vjp=_split_rows_vjp,
                       multiple_results=True)
split_rows_p.lazy_grads = True


def _level_bounds(op, offsets, n_leaves, n_nodes):
    """Validate level offsets; return them as a list of Python ints."""
    off = np.asarray(offsets)
    if off.ndim != 1 or len(off) < 2:
        raise ShapeError(f"{op}: offsets must be 1-D with at least 2 entries (0, n_leaves, ...), "
                         f"got shape {off.shape}")
    o = off.tolist()
    if o[0] != 0 or o[1] != n_leaves or o[-1] != n_nodes or any(b < a for a, b in zip(o, o[1:])):
        raise ShapeError(f"{op}: offsets must rise from 0 through n_leaves={n_leaves} (offsets[1]) to "
                         f"n_nodes={n_nodes} (offsets[-1]); got {o[:4]}{'...' if len(o) > 4 else ''} "
                         f"ending in {o[-1]}")
    return o


def _children(op, name, children, offsets, n_leaves, parent_of=None):
    """Child indices as C-contiguous int64, after checking that each is a node
    of an earlier level than its parent (the kernels read them unchecked)."""
    children = np.ascontiguousarray(children, dtype=np.int64)
    _check_children(op, name, children, offsets, n_leaves, parent_of)
    return children


def _check_children(op, name, children, offsets, n_leaves, parent_of=None):
    """Every child index must be a node of an earlier level than its parent."""
    if children.size == 0:
        return
    off = np.asarray(offsets)
    # level start of each internal node (rows of left/right, or of edges via parent_of)
    starts = np.repeat(off[1:-1], np.diff(off[1:]))
    if parent_of is not None:
        starts = starts[parent_of]
    bad = (children < 0) | (children >= starts)
    if bad.any():
        k = int(np.argmax(bad))
        raise IndexRangeError(f"{op}: {name}[{k}]={int(children[k])} is not a node of an earlier level than "
                              f"its parent (whose level starts at node {int(starts[k])})")


def _check_index(op, name, a):
    if len(a.shape) != 1 or _dt(a).kind not in "iu":
        raise ShapeError(f"{op}: {name} must be a 1-D integer array, got shape {_fmt(a.shape)} and dtype {_dt(a)}")


def _check_state(op, h0, c0=None):
    if len(h0.shape) != 2:
        raise ShapeError(f"{op}: h0 must be 2-D (n_leaves, hidden), got h0.shape={_fmt(h0.shape)}")
    if c0 is not None and not _fits(tuple(c0.shape), tuple(h0.shape)):
        raise ShapeError(f"{op}: c0.shape={_fmt(c0.shape)} does not match h0.shape={_fmt(h0.shape)}")
    return h0.shape[1]


def _check_param(op, name, a, want):
    if not _fits(tuple(a.shape), tuple(want)):
        raise ShapeError(f"{op}: {name}.shape={_fmt(a.shape)} should be {_fmt(want)}")


def _sum_dims(a, b):
    return None if a is None or b is None else a + b


def _f(a, dt):
    """C-contiguous array of dtype ``dt`` (the kernels take one float dtype)."""
    return np.ascontiguousarray(a, dtype=dt)


def _ft(a, dt):
    """``a.T`` as a C-contiguous copy of dtype ``dt``: with a transposed right
    operand OpenBLAS packs slowly for few rows ((5, 750) @ (750, 300).T view:
    97 us; with the copy: 46 us, float32, measured), and one copy per call
    serves every level or step."""
    return np.ascontiguousarray(np.asarray(a).T, dtype=dt)


def _tree_lstm_levels(h0, c0, w, b, left, right, offsets):
    """Binary Tree-LSTM (Tai et al. 2015, eqs. 9-14) over a whole level
    schedule: level 0 (the leaves) is given as ``h0, c0``; each later level
    computes ``z = [h_l; h_r] @ w + b`` for all its nodes in one product and
    one fused kernel call.

    Parameters
    ----------
    h0, c0 : (n_leaves, H)
    w : (2H, 5H), chunks i, f_l, f_r, o, u;  b : (5H,)
    left, right : (n_internal,) int
        Global indices of the children of node ``n_leaves + j``.
    offsets : (n_levels + 1,) int
        Level ``k`` is nodes ``offsets[k]:offsets[k+1]``; ``offsets[1] == n_leaves``.

    Returns
    -------
    h, c : (n_nodes, H)
        States of every node, in the schedule's order.
    hcat : (n_internal, 2H), acts : (n_internal, 5H)
        Saved for the backward pass.
    """
    n0, H = h0.shape
    ni = left.shape[0]
    N = n0 + ni
    off = _level_bounds("tree_lstm_levels", offsets, n0, N)
    left = _children("tree_lstm_levels", "left", left, off, n0)
    right = _children("tree_lstm_levels", "right", right, off, n0)
    dt = np.result_type(h0, c0, w, b)
    h = np.empty((N, H), dtype=dt)
    c = np.empty((N, H), dtype=dt)
    h[:n0] = h0
    c[:n0] = c0
    hcat = np.empty((ni, 2 * H), dtype=dt)
    acts = np.empty((ni, 5 * H), dtype=dt)
    w = _f(w, dt)
    b = _f(b, dt)
    for k in range(1, len(off) - 1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        lk, rk = left[r0:r1], right[r0:r1]
        KT.gather_pairs(h, lk, rk, hcat[r0:r1])
        KT.tree_lstm_level_fwd(hcat[r0:r1] @ w, b, c, lk, rk, lo, h, acts[r0:r1])
    return h, c, hcat, acts


def _tree_lstm_levels_shape(h0, c0, w, b, left, right, offsets):
    op = "tree_lstm_levels"
    dt = _floats(op, h0=h0, c0=c0, w=w, b=b)
    H = _check_state(op, h0, c0)
    _check_param(op, "w", w, (_mul(2, H), _mul(5, H)))
    _check_param(op, "b", b, (_mul(5, H),))
    for nm, a in (("left", left), ("right", right), ("offsets", offsets)):
        _check_index(op, nm, a)
    if None not in (left.shape[0], right.shape[0]) and left.shape[0] != right.shape[0]:
        raise ShapeError(f"{op}: left.shape={_fmt(left.shape)} does not match right.shape={_fmt(right.shape)}")
    n, ni = _sum_dims(h0.shape[0], left.shape[0]), left.shape[0]
    return Aval((n, H), dt), Aval((n, H), dt), Aval((ni, _mul(2, H)), dt), Aval((ni, _mul(5, H)), dt)


def _grad_buffer(g, like):
    """A writable copy of an output gradient (zeros for None) to accumulate into,
    after checking it has the output's shape (the kernels index it unchecked)."""
    if g is None:
        return np.zeros_like(like)
    if np.shape(g) != like.shape:
        raise ShapeError(f"gradient of shape {_fmt(np.shape(g))} for an output of shape {_fmt(like.shape)}")
    return np.array(g, dtype=like.dtype, copy=True, order="C")


def _tree_lstm_levels_vjp(g, ins, out):
    h0, c0, w, b, left, right, offsets = ins
    h, c, hcat, acts = out
    n0 = h0.shape[0]
    # the forward's checks again: the kernels index with these unchecked
    off = _level_bounds("tree_lstm_levels", offsets, n0, h.shape[0])
    left = _children("tree_lstm_levels", "left", left, off, n0)
    right = _children("tree_lstm_levels", "right", right, off, n0)
    dh = _grad_buffer(g[0], h)
    dc = _grad_buffer(g[1], c)
    dz = np.empty_like(acts)
    wt = _ft(w, h.dtype)
    for k in range(len(off) - 2, 0, -1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        lk, rk = left[r0:r1], right[r0:r1]
        KT.tree_lstm_level_bwd(dh, dc, acts[r0:r1], c, lk, rk, lo, dz[r0:r1])
        KT.scatter_pairs_add(dz[r0:r1] @ wt, lk, rk, dh)
    return (dh[:n0].astype(np.asarray(h0).dtype, copy=False), dc[:n0].astype(np.asarray(c0).dtype, copy=False),
            (hcat.T @ dz).astype(np.asarray(w).dtype, copy=False), dz.sum(0).astype(np.asarray(b).dtype, copy=False),
            None, None, None)


tree_lstm_levels_p = defprim("tree_lstm_levels", _tree_lstm_levels, _tree_lstm_levels_shape,
                             joint_vjp=_tree_lstm_levels_vjp, multiple_results=True, nondiff_args=(4, 5, 6))


def _tree_rnn_levels(h0, w, b, left, right, offsets):
    """Recursive neural network (Socher et al. 2011) over a level schedule:
    ``h = tanh([h_l; h_r] @ w + b)`` for all nodes of a level in one product
    and one kernel call.

    Parameters
    ----------
    h0 : (n_leaves, H)
    w : (2H, H);  b : (H,)
    left, right, offsets : as in :func:`_tree_lstm_levels`

    Returns
    -------
    h : (n_nodes, H)
    hcat : (n_internal, 2H)
        Saved for the backward pass.
    """
    n0, H = h0.shape
    ni = left.shape[0]
    N = n0 + ni
    off = _level_bounds("tree_rnn_levels", offsets, n0, N)
    left = _children("tree_rnn_levels", "left", left, off, n0)
    right = _children("tree_rnn_levels", "right", right, off, n0)
    dt = np.result_type(h0, w, b)
    h = np.empty((N, H), dtype=dt)
    h[:n0] = h0
    hcat = np.empty((ni, 2 * H), dtype=dt)
    w = _f(w, dt)
    b = _f(b, dt)
    for k in range(1, len(off) - 1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        KT.gather_pairs(h, left[r0:r1], right[r0:r1], hcat[r0:r1])
        KT.tanh_rows_fwd(hcat[r0:r1] @ w, b, lo, h)
    return h, hcat


def _tree_rnn_levels_shape(h0, w, b, left, right, offsets):
    op = "tree_rnn_levels"
    dt = _floats(op, h0=h0, w=w, b=b)
    H = _check_state(op, h0)
    _check_param(op, "w", w, (_mul(2, H), H))
    _check_param(op, "b", b, (H,))
    for nm, a in (("left", left), ("right", right), ("offsets", offsets)):
        _check_index(op, nm, a)
    if None not in (left.shape[0], right.shape[0]) and left.shape[0] != right.shape[0]:
        raise ShapeError(f"{op}: left.shape={_fmt(left.shape)} does not match right.shape={_fmt(right.shape)}")
    return Aval((_sum_dims(h0.shape[0], left.shape[0]), H), dt), Aval((left.shape[0], _mul(2, H)), dt)


def _tree_rnn_levels_vjp(g, ins, out):
    h0, w, b, left, right, offsets = ins
    h, hcat = out
    n0 = h0.shape[0]
    off = _level_bounds("tree_rnn_levels", offsets, n0, h.shape[0])
    left = _children("tree_rnn_levels", "left", left, off, n0)
    right = _children("tree_rnn_levels", "right", right, off, n0)
    dh = _grad_buffer(g[0], h)
    dz = np.empty((hcat.shape[0], h.shape[1]), dtype=h.dtype)
    wt = _ft(w, h.dtype)
    for k in range(len(off) - 2, 0, -1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        KT.tanh_rows_bwd(dh, h, lo, dz[r0:r1])
        KT.scatter_pairs_add(dz[r0:r1] @ wt, left[r0:r1], right[r0:r1], dh)
    return (dh[:n0].astype(np.asarray(h0).dtype, copy=False), (hcat.T @ dz).astype(np.asarray(w).dtype, copy=False),
            dz.sum(0).astype(np.asarray(b).dtype, copy=False), None, None, None)


tree_rnn_levels_p = defprim("tree_rnn_levels", _tree_rnn_levels, _tree_rnn_levels_shape,
                            joint_vjp=_tree_rnn_levels_vjp, multiple_results=True, nondiff_args=(3, 4, 5))


def _childsum_levels(h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets):
    """Child-sum Tree-LSTM (Tai et al. 2015, eqs. 2-8; no input at internal
    nodes) over a level schedule with any number of children per node.

    Per level: h̃ = Σ_k h_k; [i, o, u] from ``h̃ @ u_iou + b_iou``; one forget
    gate per child from ``h_k @ u_f + b_f``; c = i*u + Σ_k f_k*c_k; h = o*tanh(c).

    Parameters
    ----------
    h0, c0 : (n_leaves, H)
    u_iou : (H, 3H);  u_f : (H, H);  b_iou : (3H,);  b_f : (H,)
    child_ptr : (n_internal + 1,) int
        CSR: the children of node ``n_leaves + j`` are
        ``child_idx[child_ptr[j]:child_ptr[j+1]]`` (a level's edges are contiguous).
    child_idx : (n_edges,) int
    offsets : (n_levels + 1,) int

    Returns
    -------
    h, c : (n_nodes, H)
    hsum : (n_internal, H), hch : (n_edges, H), acts : (n_internal, 3H), facts : (n_edges, H)
        Saved for the backward pass.
    """
    n0, H = h0.shape
    off, ptr, idx = _csr_schedule(h0, child_ptr, child_idx, offsets)
    ni = ptr.shape[0] - 1
    N = n0 + ni
    E = idx.shape[0]
    dt = np.result_type(h0, c0, u_iou, u_f, b_iou, b_f)
    h = np.empty((N, H), dtype=dt)
    c = np.empty((N, H), dtype=dt)
    h[:n0] = h0
    c[:n0] = c0
    hsum = np.empty((ni, H), dtype=dt)
    hch = np.empty((E, H), dtype=dt)
    acts = np.empty((ni, 3 * H), dtype=dt)
    facts = np.empty((E, H), dtype=dt)
    u_iou, u_f, b_iou, b_f = _f(u_iou, dt), _f(u_f, dt), _f(b_iou, dt), _f(b_f, dt)
    for k in range(1, len(off) - 1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        p = ptr[r0:r1 + 1]
        e0, e1 = int(p[0]), int(p[-1])
        ix = idx[e0:e1]
        KT.childsum_gather(h, p, ix, hsum[r0:r1], hch[e0:e1])
        KT.childsum_level_fwd(hsum[r0:r1] @ u_iou, hch[e0:e1] @ u_f, b_iou, b_f, c, p, ix, lo, h,
                              acts[r0:r1], facts[e0:e1])
    return h, c, hsum, hch, acts, facts


def _csr_schedule(h0, child_ptr, child_idx, offsets):
    """Validated (offsets, child_ptr, child_idx) of a child-sum schedule, the
    index arrays as C-contiguous int64 (the kernels read them unchecked)."""
    op = "childsum_levels"
    n0 = h0.shape[0]
    if child_ptr.shape[0] < 1:
        raise ShapeError(f"{op}: child_ptr must have n_internal + 1 >= 1 entries, got child_ptr.shape="
                         f"{_fmt(child_ptr.shape)}")
    ptr = np.ascontiguousarray(child_ptr, dtype=np.int64)
    idx = np.ascontiguousarray(child_idx, dtype=np.int64)
    ni = ptr.shape[0] - 1
    off = _level_bounds(op, offsets, n0, n0 + ni)
    E = idx.shape[0]
    if ptr[0] != 0 or ptr[-1] != E or np.any(np.diff(ptr) < 1):
        raise ShapeError(f"{op}: child_ptr must rise from 0 to len(child_idx)={E} with at least one "
                         f"child per internal node; got child_ptr[0]={int(ptr[0])}, child_ptr[-1]={int(ptr[-1])}")
    _check_children(op, "child_idx", idx, off, n0, parent_of=np.repeat(np.arange(ni), np.diff(ptr)))
    return off, ptr, idx


def _childsum_levels_shape(h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets):
    op = "childsum_levels"
    dt = _floats(op, h0=h0, c0=c0, u_iou=u_iou, u_f=u_f, b_iou=b_iou, b_f=b_f)
    H = _check_state(op, h0, c0)
    _check_param(op, "u_iou", u_iou, (H, _mul(3, H)))
    _check_param(op, "u_f", u_f, (H, H))
    _check_param(op, "b_iou", b_iou, (_mul(3, H),))
    _check_param(op, "b_f", b_f, (H,))
    for nm, a in (("child_ptr", child_ptr), ("child_idx", child_idx), ("offsets", offsets)):
        _check_index(op, nm, a)
    if child_ptr.shape[0] == 0:
        raise ShapeError(f"{op}: child_ptr must have n_internal + 1 >= 1 entries, got child_ptr.shape=(0,)")
    ni = None if child_ptr.shape[0] is None else child_ptr.shape[0] - 1
    n = _sum_dims(h0.shape[0], ni)
    E = child_idx.shape[0]
    return (Aval((n, H), dt), Aval((n, H), dt), Aval((ni, H), dt), Aval((E, H), dt), Aval((ni, _mul(3, H)), dt),
            Aval((E, H), dt))


def _childsum_levels_vjp(g, ins, out):
    h0, c0, u_iou, u_f, b_iou, b_f, child_ptr, child_idx, offsets = ins
    h, c, hsum, hch, acts, facts = out
    n0 = h0.shape[0]
    off, ptr, idx = _csr_schedule(h0, child_ptr, child_idx, offsets)
    dh = _grad_buffer(g[0], h)
    dc = _grad_buffer(g[1], c)
    dziou = np.empty_like(acts)
    dzf = np.empty_like(facts)
    ut_iou = _ft(u_iou, h.dtype)
    ut_f = _ft(u_f, h.dtype)
    for k in range(len(off) - 2, 0, -1):
        lo, hi = off[k], off[k + 1]
        if hi == lo:
            continue
        r0, r1 = lo - n0, hi - n0
        p = ptr[r0:r1 + 1]
        e0, e1 = int(p[0]), int(p[-1])
        ix = idx[e0:e1]
        KT.childsum_level_bwd(dh, dc, acts[r0:r1], facts[e0:e1], c, p, ix, lo, dziou[r0:r1], dzf[e0:e1])
        KT.childsum_scatter_add(dziou[r0:r1] @ ut_iou, dzf[e0:e1] @ ut_f, p, ix, dh)

    def cast(a, like):
        return a.astype(np.asarray(like).dtype, copy=False)
    return (cast(dh[:n0], h0), cast(dc[:n0], c0), cast(hsum.T @ dziou, u_iou), cast(hch.T @ dzf, u_f),
            cast(dziou.sum(0), b_iou), cast(dzf.sum(0), b_f), None, None, None)


childsum_levels_p = defprim("childsum_levels", _childsum_levels, _childsum_levels_shape,
                            joint_vjp=_childsum_levels_vjp, multiple_results=True, nondiff_args=(6, 7, 8))


def _seq_steps(op, batch_sizes, total):
    """Validate packed batch sizes; return (sizes, offsets) as lists of ints."""
    bs = np.asarray(batch_sizes)
    if bs.ndim != 1 or bs.dtype.kind not in "iu":
        raise ShapeError(f"{op}: batch_sizes must be a 1-D integer array, got shape {bs.shape} and dtype {bs.dtype}")
    sizes = bs.tolist()
    if any(s < 1 for s in sizes) or any(b > a for a, b in zip(sizes, sizes[1:])):
        raise ShapeError(f"{op}: batch_sizes must be positive and non-increasing (sequences sorted by "
                         f"decreasing length), got {sizes[:8]}{'...' if len(sizes) > 8 else ''}")
    if sum(sizes) != total:
        raise ShapeError(f"{op}: batch_sizes add up to {sum(sizes)} but the packed input has {total} rows")
    offs = [0] * len(sizes)
    for t in range(1, len(sizes)):
        offs[t] = offs[t - 1] + sizes[t - 1]
    return sizes, offs


def _prev_rows(sizes, offs):
    """Packed row of each row's previous time step, for rows of steps >= 1 (in order)."""
    if len(sizes) < 2:
        return np.zeros(0, dtype=np.int64)
    later = np.asarray(sizes[1:], dtype=np.int64)
    first = np.zeros(len(later), dtype=np.int64)          # position of each step's first row among them
    np.cumsum(later[:-1], out=first[1:])
    return np.repeat(np.asarray(offs[:-1], dtype=np.int64) - first, later) + np.arange(int(later.sum()))


def _seq_shape(op, gates, gx, w_hh, b_hh, batch_sizes):
    dt = _floats(op, gx=gx, w_hh=w_hh, b_hh=b_hh)
    if len(gx.shape) != 2:
        raise ShapeError(f"{op}: gx must be 2-D (total_steps, {gates}*hidden), got gx.shape={_fmt(gx.shape)}")
    if len(w_hh.shape) != 2 or not _dims_match(w_hh.shape[0], _mul(gates, w_hh.shape[1])):
        raise ShapeError(f"{op}: w_hh.shape={_fmt(w_hh.shape)} should be ({gates}*hidden, hidden)")
    H = w_hh.shape[1]
    if not _dims_match(gx.shape[1], _mul(gates, H)):
        raise ShapeError(f"{op}: gx.shape[1]={gx.shape[1]} does not match {gates}*hidden={_mul(gates, H)} "
                         f"(w_hh.shape={_fmt(w_hh.shape)})")
    _check_param(op, "b_hh", b_hh, (_mul(gates, H),))
    _check_index(op, "batch_sizes", batch_sizes)
    return H, dt


def _lstm_seq(gx, w_hh, b_hh, batch_sizes):
    """LSTM over packed variable-length sequences (time-major, sequences
    sorted by decreasing length, as ``torch.nn.utils.rnn.pack_padded_sequence``):
    step t runs only the ``batch_sizes[t]`` sequences still running. Zero
    initial state; PyTorch ``LSTMCell`` maths.

    Parameters
    ----------
    gx : (total, 4H)
        Input projections ``x W_ih^T + b_ih`` of every packed step (one matrix
        product for the whole batch, outside).
    w_hh : (4H, H);  b_hh : (4H,)
    batch_sizes : (T,) int

    Returns
    -------
    h, c : (total, H)
        States of every packed step.
    acts : (total, 4H)
        Saved gate activations.
    """
    sizes, offs = _seq_steps("lstm_seq", batch_sizes, gx.shape[0])
    H = w_hh.shape[1]
    dt = np.result_type(gx, w_hh, b_hh)
    gx = _f(gx, dt)
    wt = _ft(w_hh, dt)
    b = _f(b_hh, dt)
    total = gx.shape[0]
    h = np.empty((total, H), dtype=dt)
    c = np.empty((total, H), dtype=dt)
    acts = np.empty((total, 4 * H), dtype=dt)
    buf = np.empty((sizes[0] if sizes else 0, 4 * H), dtype=dt)     # one product buffer for every step
    prev = -1
    for n, o in zip(sizes, offs):
        if prev < 0:
            pre = gx[o:o + n]
        else:
            pre = np.matmul(h[prev:prev + n], wt, out=buf[:n])
            pre += gx[o:o + n]
        KT.lstm_step_fwd(pre, b, c, prev, o, h, acts)
        prev = o
    return h, c, acts


def _lstm_seq_shape(gx, w_hh, b_hh, batch_sizes):
    H, dt = _seq_shape("lstm_seq", 4, gx, w_hh, b_hh, batch_sizes)
    n = gx.shape[0]
    return Aval((n, H), dt), Aval((n, H), dt), Aval((n, _mul(4, H)), dt)


def _lstm_seq_vjp(g, ins, out):
    gx, w_hh, b_hh, batch_sizes = ins
    h, c, acts = out
    sizes, offs = _seq_steps("lstm_seq", batch_sizes, h.shape[0])
    dh = _grad_buffer(g[0], h)
    dc = _grad_buffer(g[1], c)
    dg = np.empty_like(acts)
    w = _f(w_hh, h.dtype)
    buf = np.empty((sizes[0] if sizes else 0, h.shape[1]), dtype=h.dtype)
    for t in range(len(sizes) - 1, -1, -1):
        n, o = sizes[t], offs[t]
        prev = offs[t - 1] if t else -1
        KT.lstm_step_bwd(dh, dc, acts, c, prev, o, n, dg)
        if prev >= 0:
            dh[prev:prev + n] += np.matmul(dg[o:o + n], w, out=buf[:n])
    b0 = sizes[0] if sizes else 0
    gw = dg[b0:].T @ h[_prev_rows(sizes, offs)]
    return (dg.astype(np.asarray(gx).dtype, copy=False), gw.astype(np.asarray(w_hh).dtype, copy=False),
            dg.sum(0).astype(np.asarray(b_hh).dtype, copy=False), None)


lstm_seq_p = defprim("lstm_seq", _lstm_seq, _lstm_seq_shape, joint_vjp=_lstm_seq_vjp, multiple_results=True,
                     nondiff_args=(3,))


def _gru_seq(gx, w_hh, b_hh, batch_sizes):
    """GRU over packed variable-length sequences (see :func:`_lstm_seq`),
    PyTorch ``GRUCell`` maths (chunks r, z, n; reset gate applied after the
    recurrent product).

    Parameters
    ----------
    gx : (total, 3H)
        ``x W_ih^T + b_ih`` of every packed step.
    w_hh : (3H, H);  b_hh : (3H,)
    batch_sizes : (T,) int

    Returns
    -------
    h : (total, H)
    acts : (total, 3H), gh : (total, 3H)
        Saved for the backward pass.
    """
    sizes, offs = _seq_steps("gru_seq", batch_sizes, gx.shape[0])
    H = w_hh.shape[1]
    dt = np.result_type(gx, w_hh, b_hh)
    gx = _f(gx, dt)
    wt = _ft(w_hh, dt)
    b = _f(b_hh, dt)
    total = gx.shape[0]
    h = np.empty((total, H), dtype=dt)
    acts = np.empty((total, 3 * H), dtype=dt)
    gh = np.empty((total, 3 * H), dtype=dt)
    prev = -1
    for n, o in zip(sizes, offs):
        if prev < 0:
            gh[o:o + n] = b
        else:
            np.matmul(h[prev:prev + n], wt, out=gh[o:o + n])
            gh[o:o + n] += b
        KT.gru_step_fwd(gx[o:o + n], gh[o:o + n], h, prev, o, acts)
        prev = o
    return h, acts, gh


def _gru_seq_shape(gx, w_hh, b_hh, batch_sizes):
    H, dt = _seq_shape("gru_seq", 3, gx, w_hh, b_hh, batch_sizes)
    n = gx.shape[0]
    return Aval((n, H), dt), Aval((n, _mul(3, H)), dt), Aval((n, _mul(3, H)), dt)


def _gru_seq_vjp(g, ins, out):
    gx, w_hh, b_hh, batch_sizes = ins
    h, acts, gh = out
    sizes, offs = _seq_steps("gru_seq", batch_sizes, h.shape[0])
    dh = _grad_buffer(g[0], h)
    dgi = np.empty_like(acts)
    dgh = np.empty_like(acts)
    w = _f(w_hh, h.dtype)
    for t in range(len(sizes) - 1, -1, -1):
        n, o = sizes[t], offs[t]
        prev = offs[t - 1] if t else -1
        KT.gru_step_bwd(dh, acts, gh, h, prev, o, n, dgi, dgh)
        if prev >= 0:
            dh[prev:prev + n] += dgh[o:o + n] @ w
    b0 = sizes[0] if sizes else 0
    gw = dgh[b0:].T @ h[_prev_rows(sizes, offs)]
    return (dgi.astype(np.asarray(gx).dtype, copy=False), gw.astype(np.asarray(w_hh).dtype, copy=False),
            dgh.sum(0).astype(np.asarray(b_hh).dtype, copy=False), None)


gru_seq_p = defprim("gru_seq", _gru_seq, _gru_seq_shape, joint_vjp=_gru_seq_vjp, multiple_results=True,
                    nondiff_args=(3,))


def _rnn_seq(gx, w_hh, b_hh, batch_sizes):
    """Elman RNN ``h_t = tanh(gx_t + h_{t-1} W_hh^T + b_hh)`` over packed
    variable-length sequences (see :func:`_lstm_seq`); zero initial state.

    Parameters
    ----------
    gx : (total, H)
        ``x W_ih^T + b_ih`` of every packed step.
    w_hh : (H, H);  b_hh : (H,)
    batch_sizes : (T,) int

    Returns
    -------
    h : (total, H)
    """
    sizes, offs = _seq_steps("rnn_seq", batch_sizes, gx.shape[0])
    H = w_hh.shape[1]
    dt = np.result_type(gx, w_hh, b_hh)
    gx = _f(gx, dt)
    wt = _ft(w_hh, dt)
    b = _f(b_hh, dt)
    h = np.empty((gx.shape[0], H), dtype=dt)
    prev = -1
    for n, o in zip(sizes, offs):
        if prev < 0:
            pre = gx[o:o + n]
        else:
            pre = h[prev:prev + n] @ wt
            pre += gx[o:o + n]
        KT.tanh_rows_fwd(pre, b, o, h)
        prev = o
    return h


def _rnn_seq_shape(gx, w_hh, b_hh, batch_sizes):
    H, dt = _seq_shape("rnn_seq", 1, gx, w_hh, b_hh, batch_sizes)
    return Aval((gx.shape[0], H), dt)


def _rnn_seq_vjp(g, ins, out):
    gx, w_hh, b_hh, batch_sizes = ins
    h = out
    sizes, offs = _seq_steps("rnn_seq", batch_sizes, h.shape[0])
    dh = _grad_buffer(g, h)
    dz = np.empty_like(h)
    w = _f(w_hh, h.dtype)
    for t in range(len(sizes) - 1, -1, -1):
        n, o = sizes[t], offs[t]
        KT.tanh_rows_bwd(dh, h, o, dz[o:o + n])
        if t:
            prev = offs[t - 1]
            dh[prev:prev + n] += dz[o:o + n] @ w
    b0 = sizes[0] if sizes else 0
    gw = dz[b0:].T @ h[_prev_rows(sizes, offs)]
    return (dz.astype(np.asarray(gx).dtype, copy=False), gw.astype(np.asarray(w_hh).dtype, copy=False),
            dz.sum(0).astype(np.asarray(b_hh).dtype, copy=False), None)


rnn_seq_p = defprim("rnn_seq", _rnn_seq, _rnn_seq_shape, joint_vjp=_rnn_seq_vjp, nondiff_args=(3,))


# Per-node Tree-LSTM primitives use the kernels with the product inside for
# up to this many rows; beyond it a BLAS matrix product reads the weights once
# for all rows (the loop reads them once per row).
_MV_ROWS = 2


def _same_float(*arrays):
    """True when all arrays are C-contiguous numpy arrays of one float dtype
    (float32 or float64), the kernels' input convention."""
    dt = arrays[0].dtype
    if dt != _F32 and dt != _F64:           # dtype objects: comparing with np.float32 converts it each time
        return False
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous:
            return False
    return True


def _tree_lstm_node(s_l, s_r, w, b):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14) on packed states
    ``s = [h | c]``, for per-node (recursive) execution: the maths of
    :func:`_tree_lstm_levels` and ``tree_lstm_cell`` with one state tensor per
    node. Its VJP returns the weight gradient as :class:`OuterSum` factors,
    formed once per backward instead of once per node.

    Parameters
    ----------
    s_l, s_r : (n, 2H)
    w : (2H, 5H), chunks i, f_l, f_r, o, u;  b : (5H,)

    Returns
    -------
    s : (n, 2H)
    acts : (n, 5H), hcat : (n, 2H)
        Saved gate activations and children's hidden states.
    """
    n, H2 = s_l.shape
    H = H2 // 2
    dt = w.dtype
    # _same_float inline: this runs once per tree node
    if ((dt == _F32 or dt == _F64) and s_l.dtype == dt and s_r.dtype == dt and b.dtype == dt
            and s_l.flags.c_contiguous and s_r.flags.c_contiguous and w.flags.c_contiguous and b.flags.c_contiguous):
        if n <= _MV_ROWS:
            # one node (recursive execution): the fused kernel with the
            # matrix-vector product inside (12.6 -> 10.5 us per node, measured)
            s = np.empty((n, H2), dtype=dt)
            acts = np.empty((n, 5 * H), dtype=dt)
            hcat = np.empty((n, H2), dtype=dt)
            KT.tree_lstm_node_fwd_mv(s_l, s_r, w, b, s, acts, hcat)
            return s, acts, hcat
    else:
        s_l, s_r, w, b = _kernel_args(s_l, s_r, w, b)
    hcat = np.concatenate((s_l[:, :H], s_r[:, :H]), axis=1)
    z = hcat @ w
    s = np.empty((n, H2), dtype=z.dtype)
    acts = np.empty((n, 5 * H), dtype=z.dtype)
    KT.tree_lstm_node_fwd(z, b, s_l, s_r, s, acts)
    return s, acts, hcat


def _tree_lstm_node_shape(s_l, s_r, w, b):
    op = "tree_lstm_node"
    dt = _floats(op, s_l=s_l, s_r=s_r, w=w, b=b)
    if len(s_l.shape) != 2 or (s_l.shape[1] is not None and s_l.shape[1] % 2):
        raise ShapeError(f"{op}: s_l must be 2-D (nodes, 2*hidden) holding [h | c], got s_l.shape={_fmt(s_l.shape)}")
    if not _fits(tuple(s_r.shape), tuple(s_l.shape)):
        raise ShapeError(f"{op}: s_r.shape={_fmt(s_r.shape)} does not match s_l.shape={_fmt(s_l.shape)}")
    H = None if s_l.shape[1] is None else s_l.shape[1] // 2
    _check_param(op, "w", w, (_mul(2, H), _mul(5, H)))
    _check_param(op, "b", b, (_mul(5, H),))
    n = s_l.shape[0] if s_l.shape[0] is not None else s_r.shape[0]
    return Aval((n, _mul(2, H)), dt), Aval((n, _mul(5, H)), dt), Aval((n, _mul(2, H)), dt)


def _tree_lstm_node_vjp(g, ins, out):
    s_l, s_r, w, b = ins
    s, acts, hcat = out
    n, H2 = s.shape
    H = H2 // 2
    dt = s.dtype
    dz = np.empty_like(acts)
    ds_l = np.empty((n, H2), dtype=dt)
    ds_r = np.empty((n, H2), dtype=dt)
    KT.tree_lstm_node_bwd(_zeros_if_none(g[0], s), acts, _f(s_l, dt), _f(s_r, dt), s, dz, ds_l, ds_r)
    dhcat = dz @ w.T
    ds_l[:, :H] = dhcat[:, :H]
    ds_r[:, :H] = dhcat[:, H:]
    return ds_l, ds_r, OuterSum((hcat,), (dz,), w.shape), OuterSum((None,), (dz,), b.shape)


tree_lstm_node_p = defprim("tree_lstm_node", _tree_lstm_node, _tree_lstm_node_shape,
                           joint_vjp=_tree_lstm_node_vjp, multiple_results=True)


def _tree_lstm_leaf_node(x, w, b):
    """Tree-LSTM leaf(s) from input rows ``x`` on packed states ``[h | c]``
    (``tree_lstm_leaf`` maths; the weight gradient as :class:`OuterSum`).

    Parameters
    ----------
    x : (n, E)
    w : (E, 3H), chunks i, o, u;  b : (3H,)

    Returns
    -------
    s : (n, 2H)
    acts : (n, 3H)
    """
    n, G = x.shape[0], w.shape[1]
    dt = w.dtype
    # _same_float inline: this runs once per leaf
    if ((dt == _F32 or dt == _F64) and x.dtype == dt and b.dtype == dt and x.flags.c_contiguous
            and w.flags.c_contiguous and b.flags.c_contiguous):
        if n <= _MV_ROWS:
            s = np.empty((n, 2 * (G // 3)), dtype=dt)
            acts = np.empty((n, G), dtype=dt)
            KT.tree_lstm_leaf_node_fwd_mv(x, w, b, s, acts)
            return s, acts
    else:
        x, w, b = _kernel_args(x, w, b)
    z = x @ w
    s = np.empty((n, 2 * (G // 3)), dtype=z.dtype)
    acts = np.empty((n, G), dtype=z.dtype)
    KT.tree_lstm_leaf_node_fwd(z, b, s, acts)
    return s, acts


def _tree_lstm_leaf_node_shape(x, w, b):
    op = "tree_lstm_leaf_node"
    dt = _floats(op, x=x, w=w, b=b)
    n, H = _leaf_shape(op, x, w, b)
    return Aval((n, _mul(2, H)), dt), Aval((n, _mul(3, H)), dt)


def _tree_lstm_leaf_node_vjp(g, ins, out):
    x, w, b = ins
    s, acts = out
    dz = np.empty_like(acts)
    KT.tree_lstm_leaf_node_bwd(_zeros_if_none(g[0], s), acts, s, dz)
    # one leaf (per-node execution): its input gradient stays a product for
    # split_rows' VJP to form with the other leaves' in one matrix product
    dx = MatmulT(dz, w) if dz.shape[0] <= _FACTOR_ROWS else dz @ w.T
    return dx, OuterSum((x,), (dz,), w.shape), OuterSum((None,), (dz,), b.shape)


tree_lstm_leaf_node_p = defprim("tree_lstm_leaf_node", _tree_lstm_leaf_node, _tree_lstm_leaf_node_shape,
                                joint_vjp=_tree_lstm_leaf_node_vjp, multiple_results=True)
