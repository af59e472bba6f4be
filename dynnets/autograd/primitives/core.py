"""The core of the primitive table: :class:`Primitive`, :func:`defprim`,
:data:`PRIMITIVES`, :class:`Aval`, the error classes, and the shape and dtype
helpers the domain modules (``elementwise``, ``array``, ``linalg``, ``nn``,
``cells``, ``tree``, ``seq``) build their shape rules and implementations from.

Every primitive is declared once with :func:`defprim`:

``impl(*arrays, **attrs)``
    the forward computation on numpy arrays (or a Numba kernel from
    :mod:`dynnets.autograd.kernels`);
``shape(*avals, **attrs)``
    the shape/dtype rule, which is also the input check: it raises
    :class:`ShapeError` (:class:`DTypeError`, :class:`IndexRangeError`) naming
    the op, the argument, what was expected and what was received. Static
    graphs run it at construction time (again with the fed shapes); eager
    ``bind`` runs it once per input signature (see :mod:`..engine`). ``avals``
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
    static graph binds it as a node (:mod:`dynnets.static.backward`), so eager
    and static gradients are the same code.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, NamedTuple

import numpy as np

from ..dtypes import F32, F64, is_kernel_float, same_float
__all__ = ["BatchRule", "LevelsRule", "batch_rows", "batch_ragged", "BATCH_ELEMENTWISE", "BATCH_REDUCE", "BATCH_VIEW", "ShapeError", "DTypeError", "PromotionNeeded", "IndexRangeError", "Aval", "Primitive", "PRIMITIVES", "defprim", "fmt_shape", "broadcast_shapes", "result_type", "aval_of", "RULE_ERRORS", "run_rule", "check_shapes", "dtype_of", "F32", "F64", "is_kernel_float", "is_int", "norm_axis", "unbroadcast", "ufunc_dtype", "same_shape", "shape_of", "dims_match", "contiguous", "fits", "mul_dim", "kernel_floats", "kernel_args", "grad_or_zeros", "check_index", "check_param", "as_float", "transposed_float", "fixed_arrays", "fixed_transpose", "col_sums", "grad_buffer", "same_float",
           "DEFAULT_FLOAT", "torch_promote", "torch_result_type", "check_promotion", "NativeUnsupported"]

class ShapeError(ValueError):
    """Bad input to an op: names the op, the argument, expected and received."""


class DTypeError(ShapeError, TypeError):
    """An input of a dtype the op does not take (integer logits, a float index...).
    A TypeError, as PyTorch's, and a ShapeError, as every bad input to an op."""


class PromotionNeeded(DTypeError):
    """Operands whose result dtype under PyTorch's type promotion differs
    from numpy's (int64 * 1.5: torch float32, numpy float64). A shape rule
    raises it; the public ops catch it and bind again on operands cast to
    PyTorch's dtype (:func:`dynnets.autograd.ops.promoted`)."""


class IndexRangeError(ShapeError, IndexError):
    """An index value out of range (a class target, an embedding id, a tree
    node): an IndexError, as PyTorch's, and a ShapeError."""


class NativeUnsupported(Exception):
    """A plan the native tier (:mod:`dynnets.static.native`) cannot translate;
    the message says what. A primitive's ``native=`` translation raises it
    for a case it does not cover, and the plan stays on tier 2."""


class Aval(NamedTuple):
    """Abstract value: what a shape rule sees of an input."""
    shape: tuple
    dtype: object


class Primitive:
    """One entry of the table; every fact about it is an attribute set from
    :func:`defprim`'s arguments (see there), so the engine, the static graph,
    its gradients and the compile passes read one object.

    ``checked`` is the eager input-check cache: input signatures (shapes,
    dtypes, attributes) whose shape rule ``bind`` has already run and passed
    (see :mod:`dynnets.autograd.engine`)."""

    __slots__ = ("name", "impl", "shape", "vjps", "joint_vjp", "multiple_results", "differentiable",
                 "nondiff_args", "doc", "scalar", "lazy_grads", "dense_vjp", "sparse_grads", "twin_min",
                 "attr_key", "batch", "random", "vjp_reads", "native", "native_vjp", "levels", "checked")

    def __init__(self, name, impl, shape, vjps=None, joint_vjp=None, multiple_results=False,
                 differentiable=True, nondiff_args=(), scalar=None, lazy_grads=False, dense_vjp=None,
                 sparse_grads=(), twin_min=None, attr_key=None, batch=None, random=False, vjp_reads=None,
                 native=None, native_vjp=None, levels=None):
        self.name = name
        self.impl = impl
        self.shape = shape
        self.vjps = tuple(vjps) if vjps is not None else None
        self.joint_vjp = joint_vjp
        self.multiple_results = multiple_results
        self.differentiable = differentiable
        self.nondiff_args = tuple(nondiff_args)
        self.doc = impl.__doc__
        self.scalar = scalar
        self.lazy_grads = bool(lazy_grads)
        self.dense_vjp = dense_vjp
        self.sparse_grads = frozenset(sparse_grads)
        self.twin_min = twin_min
        self.attr_key = attr_key
        self.batch = batch
        self.random = bool(random)
        self.vjp_reads = vjp_reads
        self.native = native
        self.native_vjp = native_vjp
        self.levels = levels
        self.checked = {}

    def vjp_fn(self, i=None, dense=False):
        """The VJP of input ``i`` (the joint VJP for ``None``); with ``dense``
        its ``dense_vjp`` twin where it has one."""
        if dense and self.dense_vjp is not None:
            d = self.dense_vjp if i is None else self.dense_vjp[i]
            if d is not None:
                return d
        return self.joint_vjp if i is None else self.vjps[i]

    def __repr__(self):
        return f"<primitive {self.name}>"


PRIMITIVES: dict[str, Primitive] = {}


class LevelsRule(NamedTuple):
    """A primitive's levels lowering (read by :mod:`dynnets.autograd.autobatch`).

    A tree-node primitive applied once per node (each application one row)
    is batched per depth: one call per (depth, signature) group. When the
    groups of one signature form a chain (each node's children are earlier
    nodes of the chain or values computed before it, and nothing outside the
    chain reads a chain node's output before the last group), the chain runs
    as one call of the primitive's per-level kernel, as level-batched models
    call it: buffers allocated once, weight gradients formed once.

    ``children``: the input positions of the per-instance child states
    (each one row of trailing shape ``S``); ``shared``: the positions of the
    shared inputs (weights), identical in every application;
    ``run(bind, s0, rows, shared, left, right, offsets) -> (outs, first)``
    makes the call with ``bind(prim, *args, **attrs)``: ``s0`` (n0, *S) the
    chain's inputs from outside, ``rows`` (n0,) the row of ``s0`` each level-0
    state reads, ``shared`` the shared inputs in ``shared``'s order, ``left``,
    ``right`` (or one child array per position) and ``offsets`` a level
    schedule over the states (the ``n0`` inputs first, then the chain's nodes
    level by level); ``outs`` holds one tensor per output of the primitive and
    ``first[k]`` the row of ``outs[k]`` holding the chain's first node, the
    others following in the schedule's order.
    """
    children: tuple
    shared: tuple
    run: Callable


class BatchRule(NamedTuple):
    """A primitive's batching rule (read by :mod:`dynnets.autograd.autobatch`),
    as JAX's vmap rules sit beside its other rules.

    ``kind``:

    ``"rows"``
        the inputs at ``batched`` are per-instance and stacked along axis 0,
        the others are shared (identical in every application: a weight);
        every output's rows are the instances' rows in order (matmul, the
        cells, tree nodes, row-wise softmax, embedding, a getitem keeping
        axis 0 whole). ``when(*avals, **attrs)``, if given, says whether an
        application is row-wise (e.g. softmax not over axis 0). ``batched``
        may be a callable ``batched(**attrs) -> tuple`` where the positions
        depend on the attributes (``batchable_call``: its plan's inputs).
    ``"elementwise"``
        inputs of the output's shape are per-instance (stacked along axis 0,
        0-d ones as one row each); broadcast operands and scalars are shared.
    ``"reduce"``
        sum/mean/max: row-wise when axis 0 is kept, else a segment reduction
        over the stacked rows (``segment_sum``).
    ``"xent"``
        softmax cross-entropy: rows, with the per-instance reduction done as
        a segment sum on the tape.
    ``"view"``
        no computation: concat/stack along axis 0, reshape, split_rows, a
        getitem/take selecting rows. The result is a list of row ranges of
        already computed batch outputs.

    ``"ragged"``
        packed variable-length rows: the inputs at ``batched`` are
        per-instance rows stacked along axis 0 (any number per instance), the
        input at ``offsets`` a concrete 1-D integer array of each instance's
        segment boundaries over its own rows (``[0, ..., rows]``), shifted by
        the rows stacked before it and joined into one offsets array (the
        ``cu_seqlens`` of variable-length attention); the others are shared.
        Every output's rows are the instances' rows in order
        (``ragged_attention``: sentences of any lengths in one call).

    ``by_id`` (``"rows"`` only): the batched inputs are integer ids, one per
    output row, and each output row a function of its id alone (an
    embedding lookup): the batched call looks up each distinct id once and
    every instance reads its ids' rows, so a later deterministic call on those
    rows also runs once per distinct id (see :mod:`dynnets.autograd.autobatch.execute`).
    """
    kind: str
    batched: tuple = ()
    when: object = None
    by_id: bool = False
    offsets: object = None


def batch_rows(*batched, when=None, by_id=False):
    return BatchRule("rows", tuple(batched), when, by_id)


def batch_ragged(*batched, offsets, when=None):
    """A ``"ragged"`` rule: rows at ``batched``, the segment offsets at position ``offsets``."""
    return BatchRule("ragged", tuple(batched), when, False, int(offsets))


BATCH_ELEMENTWISE = BatchRule("elementwise")
BATCH_REDUCE = BatchRule("reduce")
BATCH_VIEW = BatchRule("view")


def defprim(name, impl, shape, vjp=None, joint_vjp=None, *, multiple_results=False, differentiable=True,
            nondiff_args=(), scalar=None, lazy_grads=False, dense_vjp=None, sparse_grads=(), twin_min=None,
            attr_key=None, batch=None, random=False, vjp_reads=None, native=None, native_vjp=None,
            levels=None):
    """Declare a primitive: every fact about it, in one call.

    Parameters
    ----------
    name : str
        The table key; the public op drops the ``_p`` of the Python name.
    impl : callable
        ``impl(*arrays, **attrs)``: the forward on numpy arrays (a tuple for
        ``multiple_results``).
    shape : callable
        ``shape(*avals, **attrs) -> Aval`` (a tuple of them): the shape/dtype
        rule and input check.
    vjp : tuple of callables or None
        One ``vjp(g, inputs, out, **attrs)`` per input (``None`` for an input
        without gradient). ``grep -rn "vjp=" dynnets`` lists every gradient.
    joint_vjp : callable
        Instead of ``vjp``: ``joint_vjp(g, inputs, out, **attrs) -> tuple``
        for primitives whose input gradients share work.
    multiple_results : bool
    differentiable : bool
        ``False`` for a primitive without gradients (comparisons, argmax):
        bind records nothing for it.
    nondiff_args : tuple of int
        Inputs that never get a gradient (indices, masks, schedules).
    scalar : str
        A scalar expression template (``"({0} * {1})"``) for an elementwise
        primitive: the static compiler fuses chains of primitives that have one
        into a generated Numba kernel (:func:`dynnets.static.passes.fuse_elementwise`).
    lazy_grads : bool
        The VJP accepts :class:`~dynnets.autograd.gradtypes.MatmulT` output
        gradients (eager backward densifies them for every other primitive).
    dense_vjp : callable, or tuple of callables/None aligned with ``vjp``
        Twins of VJPs that return factored gradients
        (:class:`~dynnets.autograd.gradtypes.OuterSum`) for callers that
        densify every gradient at once (static plans), where forming the
        factors costs more than the dense gradient.
    sparse_grads : tuple of int
        Inputs whose VJP returns a :class:`~dynnets.autograd.gradtypes.RowSparse`
        gradient; symbolic gradients keep it sparse (optimizers update rows).
    twin_min : int
        The work size (rows times hidden size) from which the implementation
        runs its kernel's numpy twin instead of the kernel (the twin's SIMD
        ufuncs win on large arrays; measured per primitive). The implementation
        reads it from the primitive, so a test can move it.
    attr_key : callable
        ``attr_key(**attrs)``: a hashable stand-in for attributes Python cannot
        hash (slices), so eager bind can cache their input check.
    batch : BatchRule or None
        How N applications with one signature become one call under
        :func:`dynnets.autobatch` (see :class:`BatchRule`); ``None`` runs them
        one at a time (counted as fallbacks in ``ab.stats``).
    random : bool
        The result is a random draw: ``impl`` takes ``rng=`` (a
        ``numpy.random.Generator``; without it, a fresh one seeded from the
        ``seed`` attribute) and a static plan passes each such equation the
        generator its session keeps for it, so every run draws new values. The
        compile passes never fold, merge (CSE) or cache such an equation.
    vjp_reads : tuple or None
        The values the VJPs read from the recorded application (the rest they
        use for shapes and dtypes only): with ``vjp=``, one entry per input,
        the tuple of what that input's VJP reads (input positions, and
        ``"out"`` for the result); with ``joint_vjp=``, one such tuple for all.
        Eager backward raises when a value read this way was changed in place
        after the application was recorded (torch's version counter); ``None``
        (the default) counts every input and the result as read.
    native : str, callable or None
        The forward as the native plan tier (:mod:`dynnets.static.native`)
        compiles it. A string is an elementwise scalar form: a Python
        expression over the operands' elements ``{0}``, ``{1}``... that Numba
        compiles, with ``{D}`` the dtype's constructor (``np.float32``) and
        ``{zero}``, ``{one}``, ``{two}``, ``{half}`` literals of the dtype, e.g.
        ``"{D}(math.exp({0}))"``; write it in numpy's order and dtype (a
        float32 result is cast to float32 where ``math`` returns float64) so
        the tier agrees with the implementation to rounding. A callable
        ``native(gen, ins, attrs)`` translates other primitives with the
        generator's loops (:class:`dynnets.static.native.Gen`: reductions,
        products, transposes) and raises :class:`NativeUnsupported` for what
        it does not cover. ``None``: plans using the primitive stay on tier 2.
    native_vjp : tuple or callable or None
        The VJPs for the native tier: with ``vjp=``, one entry per input, a
        string formula of the gradient's element over ``{g}``, ``{x0}``,
        ``{x1}``..., ``{out}`` and the constants above (summed to the input's
        shape where it was broadcast), a callable ``(gen, ins, attrs)``, or
        ``None``; with ``joint_vjp=``, one callable.
    levels : LevelsRule or None
        How a chain of same-signature groups across depths (every group of a
        tree-node primitive in a forced region, depth by depth) runs under
        :func:`dynnets.autobatch` as one call of the primitive's per-level
        kernel (see :class:`LevelsRule`); ``None``: one batched call per group.
    """
    if name in PRIMITIVES:
        raise ValueError(f"defprim: primitive {name!r} is already defined")
    if differentiable and vjp is None and joint_vjp is None:
        raise ValueError(f"defprim: differentiable primitive {name!r} needs vjp= or joint_vjp=")
    if dense_vjp is not None and (joint_vjp is not None) != callable(dense_vjp):
        raise ValueError(f"defprim: {name!r}: dense_vjp= is a function for a joint_vjp=, a tuple aligned with "
                         f"vjp= otherwise")
    if vjp_reads is not None:
        per_input = vjp_reads if joint_vjp is None else (vjp_reads,)
        if joint_vjp is None and (vjp is None or len(vjp_reads) != len(vjp)):
            raise ValueError(f"defprim: {name!r}: vjp_reads= needs one entry per vjp= input")
        for entry in per_input:
            if not all(r == "out" or is_int(r) for r in entry):
                raise ValueError(f"defprim: {name!r}: vjp_reads= entries hold input positions and 'out', "
                                 f"got {entry!r}")
    _check_native(name, native, native_vjp, vjp, joint_vjp)
    p = Primitive(name, impl, shape, vjp, joint_vjp, multiple_results=multiple_results,
                  differentiable=differentiable, nondiff_args=nondiff_args, scalar=scalar, lazy_grads=lazy_grads,
                  dense_vjp=dense_vjp, sparse_grads=sparse_grads, twin_min=twin_min, attr_key=attr_key,
                  batch=batch, random=random, vjp_reads=vjp_reads, native=native, native_vjp=native_vjp,
                  levels=levels)
    PRIMITIVES[name] = p
    return p


_NATIVE_CONSTS = {"D": "np.float64", "zero": "0.0", "one": "1.0", "two": "2.0", "half": "0.5"}


def _check_native(name, native, native_vjp, vjp, joint_vjp):
    """Reject a ``native=``/``native_vjp=`` that does not fit the primitive
    when it is defined, not when a plan first reaches the native tier."""
    def template(t, what, **names):
        try:
            t.format(*["x"] * 8, **_NATIVE_CONSTS, **names)
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"defprim: {name!r}: {what} {t!r} is not a template of the names "
                             f"{sorted({**_NATIVE_CONSTS, **names})} and {{0}}, {{1}}...: {e!r}") from None

    if native is not None and not callable(native):
        if not isinstance(native, str):
            raise ValueError(f"defprim: {name!r}: native= is a scalar-form string or a translation function, "
                             f"got {type(native).__name__}")
        template(native, "native=")
    if native_vjp is None:
        return
    if joint_vjp is not None:
        if not callable(native_vjp):
            raise ValueError(f"defprim: {name!r}: native_vjp= is one translation function for a joint_vjp=, "
                             f"got {type(native_vjp).__name__}")
        return
    if vjp is None or callable(native_vjp) or len(native_vjp) != len(vjp):
        raise ValueError(f"defprim: {name!r}: native_vjp= needs one entry per vjp= input "
                         f"({0 if vjp is None else len(vjp)}), got {native_vjp!r}")
    names = {"g": "g", "out": "y", **{f"x{k}": "x" for k in range(len(vjp))}}
    for t in native_vjp:
        if isinstance(t, str):
            template(t, "native_vjp= entry", **names)
        elif t is not None and not callable(t):
            raise ValueError(f"defprim: {name!r}: a native_vjp= entry is a formula string, a translation "
                             f"function or None, got {type(t).__name__}")


# --------------------------------------------------------------------------
# shape-rule helpers
# --------------------------------------------------------------------------

def fmt_shape(shape):
    if shape is None or getattr(shape, "ndims", 0) is None:
        return "<unknown>"          # an unknown rank (a static placeholder made without a shape), as TF1 prints it
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(op, *shapes, names=None):
    """numpy broadcasting with unknown (None) dimensions; raises ShapeError.
    A shape of unknown rank (None) makes the result's rank unknown (None)."""
    if None in shapes:
        return None
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
                desc = ", ".join(f"{n}.shape={fmt_shape(s)}" for n, s in zip(names, shapes))
                raise ShapeError(f"{op}: shapes cannot be broadcast together: {desc}")
        out.append(dim)
    return tuple(reversed(out))


def result_type(*dts):
    try:
        return np.result_type(*dts)
    except TypeError:
        return np.result_type(*[np.asarray(d).dtype if not isinstance(d, np.dtype) else d for d in dts])


def aval_of(x):
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
        unknown = [k for k, a in enumerate(avals) if a.shape is None]
        if unknown:
            # a rule that needs the rank of an input of unknown rank trips over its shape None
            raise ShapeError(f"{prim.name}: input {unknown[0]} has an unknown rank (shape <unknown>), which "
                             f"{prim.name} needs to know") from None
        desc = ", ".join(f"{fmt_shape(a.shape)} {dtype_of(a)}" for a in avals)
        kind = DTypeError if isinstance(e, TypeError) else IndexRangeError if isinstance(e, IndexError) \
            else ShapeError
        at = f", attributes {attrs}" if attrs else ""
        raise kind(f"{prim.name}: invalid inputs ({desc}{at}): {type(e).__name__}: {e}") from None


def check_shapes(prim, args, attrs):
    """Run ``prim``'s shape rule on concrete arguments (raises ShapeError)."""
    nd = np.ndarray
    return run_rule(prim, [a if type(a) is nd else aval_of(a) for a in args], attrs)


def dtype_of(a):
    d = a.dtype
    return d if isinstance(d, np.dtype) else np.asarray(d).dtype


def is_int(a):
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def norm_axis(op, axis, ndim):
    if axis is None:
        return None
    if is_int(axis):
        axes = (axis,)
    elif isinstance(axis, (tuple, list)) and all(is_int(a) for a in axis):
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
    gs = g.shape
    if gs == shape:
        return g
    # np.add.reduce rather than g.sum: the ufunc method skips ~0.4 us of Python
    nd = len(gs) - len(shape)
    if nd == 1 and gs[1:] == shape:
        return np.add.reduce(g, 0)       # a bias of a batch of rows: the usual case, one call
    if nd > 0:
        g = np.add.reduce(g, axis=tuple(range(nd)))
        if g.shape == shape:
            return g
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    if axes:
        g = np.add.reduce(g, axis=axes, keepdims=True)
    return g

_WEAK = {bool: np.dtype(bool), int: int, float: float, complex: complex}


def ufunc_dtype(name, ufunc, *avals):
    """The result dtype of numpy ufunc ``ufunc`` on inputs ``avals``, Python
    scalars kept weak (NEP 50), as the forward computes it; DTypeError where
    the ufunc has no loop for these dtypes (boolean subtract, negative...)."""
    dts = []
    for a in avals:
        d = a.dtype
        if not isinstance(d, np.dtype):
            d = _WEAK.get(type(d), None)
            if d is None:
                d = dtype_of(a)
        dts.append(d)
    try:
        return ufunc.resolve_dtypes((*dts, None))[-1]
    except (TypeError, ValueError) as e:
        names = ["x", "y"][:len(avals)]
        desc = ", ".join(f"{n}.dtype={dtype_of(a)}" for n, a in zip(names, avals))
        raise DTypeError(f"{name}: unsupported dtypes ({desc}): {e}") from None
def same_shape(shape):
    """``shape`` as a tuple, or None for an unknown rank: the result shape of
    an elementwise rule."""
    return None if shape is None else tuple(shape)


def shape_of(a):
    # the attribute, not np.shape (a dispatched Python function, ~0.1 us per call)
    try:
        return a.shape
    except AttributeError:
        return np.shape(a)
def dims_match(a, b):
    return a is None or b is None or a == b

def contiguous(a):
    return np.ascontiguousarray(a)


def fits(got, want):
    """Shape ``got`` can be ``want``: same rank, and each dimension equal or unknown (None) in either."""
    return len(got) == len(want) and all(a is None or b is None or a == b for a, b in zip(got, want))


def mul_dim(k, d):
    return None if d is None else k * d


def kernel_floats(op, **avals):
    """The one dtype of a kernel primitive's float inputs, which must be
    float32 or float64 (the dtypes the Numba kernels are compiled for) and
    all the same: PyTorch's cells refuse float32 with float64 ("expected m1
    and m2 to have the same dtype") where numpy would promote silently."""
    first = None
    for name, a in avals.items():
        dt = dtype_of(a)
        if not is_kernel_float(dt):
            raise DTypeError(f"{op}: {name} must be float32 or float64, got dtype {dt}")
        if first is None:
            first = dt
        elif dt != first:
            desc = ", ".join(f"{n}.dtype={dtype_of(b)}" for n, b in avals.items())
            raise DTypeError(f"{op}: expected inputs of one dtype, got {desc} (as torch, which refuses mixed "
                             f"float dtypes here): cast {name} with .to(dynnets.{first.name})")
    return first


def kernel_args(*arrays):
    """``arrays`` as they are when they are C-contiguous numpy arrays of one
    float dtype (the usual case, one fast check), else as C-contiguous copies
    in their common dtype: each kernel is compiled for that one signature."""
    if same_float(*arrays):
        return arrays
    dt = np.result_type(*arrays)
    return tuple(np.ascontiguousarray(a, dtype=dt) for a in arrays)

def grad_or_zeros(g, like):
    """An output gradient as a kernel argument: zeros for None, else C-contiguous
    in ``like``'s dtype, after checking it has ``like``'s shape."""
    if g is None:
        return np.zeros_like(like)
    if g.shape != like.shape:
        raise ShapeError(f"gradient of shape {fmt_shape(g.shape)} for an output of shape {fmt_shape(like.shape)}")
    return np.ascontiguousarray(g, dtype=like.dtype)

def check_index(op, name, a):
    if len(a.shape) != 1 or dtype_of(a).kind not in "iu":
        raise ShapeError(f"{op}: {name} must be a 1-D integer array, got shape {fmt_shape(a.shape)} and dtype {dtype_of(a)}")

def check_param(op, name, a, want):
    if not fits(tuple(a.shape), tuple(want)):
        raise ShapeError(f"{op}: {name}.shape={fmt_shape(a.shape)} should be {fmt_shape(want)}")

def as_float(a, dt):
    """C-contiguous array of dtype ``dt`` (the kernels take one float dtype)."""
    return np.ascontiguousarray(a, dtype=dt)


def transposed_float(a, dt):
    """``a.T`` as a C-contiguous copy of dtype ``dt``: with a transposed right
    operand OpenBLAS packs slowly for few rows ((5, 750) @ (750, 300).T view:
    97 us; with the copy: 46 us, float32, measured), and one copy per call
    serves every level or step."""
    return np.ascontiguousarray(np.asarray(a).T, dtype=dt)


_FIXED = threading.local()


@contextmanager
def fixed_arrays(arrays):
    """Within: ``arrays`` are not written (a loop's gradient sweep, whose
    captured weights are the same arrays in every iteration and which no
    effect may update), so :func:`fixed_transpose` makes the C-contiguous
    transpose of one of them once per dtype and reuses it. Per thread;
    nested sweeps add their arrays to the enclosing one's for their extent."""
    prev = getattr(_FIXED, "state", None)
    ids = {id(a): a for a in arrays if type(a) is np.ndarray and a.ndim == 2}
    _FIXED.state = ({**prev[0], **ids}, dict(prev[1])) if prev is not None else (ids, {})
    try:
        yield
    finally:
        _FIXED.state = prev


def fixed_transpose(a, dt):
    """:func:`transposed_float` of ``a`` made once per :func:`fixed_arrays`
    sweep; ``None`` outside one or for an array it does not hold (the
    caller then multiplies by the transposed view: one copy per call would
    cost more than it saves for a few rows). A per-level (n, 750) @ (750, 300)
    product over a transposed view: 117 us at 15 rows, 67 us over the copy
    (float32, SkylakeX OpenBLAS, measured)."""
    st = getattr(_FIXED, "state", None)
    if st is None or st[0].get(id(a)) is not a:
        return None
    key = (id(a), dt)
    t = st[1].get(key)
    if t is None:
        t = st[1][key] = transposed_float(a, dt)
    return t


def col_sums(a):
    """``a.sum(0)`` of a 2-D float array (a bias gradient) as one
    vector-matrix product: BLAS reads the rows at twice the speed of numpy's
    axis-0 reduction ((485, 750) float32: 23 vs 48 us, measured)."""
    return np.ones(a.shape[0], dtype=a.dtype) @ a


def grad_buffer(g, like):
    """A writable copy of an output gradient (zeros for None) to accumulate into,
    after checking it has the output's shape (the kernels index it unchecked)."""
    if g is None:
        return np.zeros_like(like)
    if np.shape(g) != like.shape:
        raise ShapeError(f"gradient of shape {fmt_shape(np.shape(g))} for an output of shape {fmt_shape(like.shape)}")
    return np.array(g, dtype=like.dtype, copy=True, order="C")


# --------------------------------------------------------------------------
# PyTorch's type promotion (c10 result_type), which the elementwise, where,
# clip and concat primitives follow: an integer op with a float gives the
# float's type (int64 + float32 is float32; numpy says float64), a Python
# number or a 0-d array changes the result only when it is of a higher
# category (bool < integer < float < complex), and then a Python float gives
# the default float32 (numpy: float64)
# --------------------------------------------------------------------------

DEFAULT_FLOAT = F32
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_PROMOTED = {}


def torch_promote(a, b):
    """``torch.promote_types`` on numpy dtypes: numpy's, except that an
    integer (or bool) with a float is the float (numpy widens int64 + float32
    to float64)."""
    key = (a, b)
    r = _PROMOTED.get(key)
    if r is None:
        ca, cb = _CATEGORY.get(a.kind, 4), _CATEGORY.get(b.kind, 4)
        if ca in (0, 1) and cb == 2:
            r = b
        elif cb in (0, 1) and ca == 2:
            r = a
        elif ca in (0, 1) and cb == 3 or cb in (0, 1) and ca == 3:
            r = np.promote_types(b if cb == 3 else a, np.complex64)
        else:
            r = np.promote_types(a, b)
        _PROMOTED[key] = r
    return r


_PY_NUMBERS = frozenset({bool, int, float, complex})


def _wrapped_dtype(v):
    """The dtype PyTorch gives a Python number operand: bool, int64, the
    default float32, complex64."""
    if isinstance(v, bool):
        return np.dtype(bool)
    if isinstance(v, int):
        return np.dtype(np.int64)
    if isinstance(v, complex):
        return np.dtype(np.complex64)
    return DEFAULT_FLOAT


def _combine(higher, lower):
    """c10's combine_categories: ``lower`` (a 0-d or Python-number result)
    changes ``higher`` only when its category is higher."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    hc, lc = _CATEGORY.get(higher.kind, 4), _CATEGORY.get(lower.kind, 4)
    if hc >= 2 and hc >= lc:
        return higher
    if hc == 0 or lc > hc:
        return torch_promote(higher, lower)
    return higher


def torch_result_type(*avals):
    """The result dtype of an elementwise op on ``avals`` under PyTorch's
    rules: dimensioned inputs first, then 0-d arrays, then Python numbers
    (an aval whose ``dtype`` is the number itself, as :func:`aval_of` gives
    them)."""
    dim = zero = wrapped = None
    for a in avals:
        d = a.dtype
        if not isinstance(d, np.dtype):
            if type(d) in _PY_NUMBERS:
                w = _wrapped_dtype(d)
                wrapped = w if wrapped is None else torch_promote(wrapped, w)
                continue
            # a numpy scalar is a 0-d array here (a 0-d tensor's data may be one)
            d = np.dtype(d) if isinstance(d, type) else np.asarray(d).dtype
        if a.shape is not None and len(a.shape) == 0:      # (an unknown rank counts as dimensioned)
            zero = d if zero is None else torch_promote(zero, d)
        else:
            dim = d if dim is None else torch_promote(dim, d)
    return _combine(dim, _combine(zero, wrapped))


def check_promotion(op, np_dt, *avals, int_to_float=False, names=("x", "y")):
    """Raise :class:`PromotionNeeded` when numpy's result dtype ``np_dt`` for
    ``avals`` is not PyTorch's (see :func:`torch_result_type`; ``int_to_float``:
    an integer result is the default float32, as torch's true division)."""
    want = torch_result_type(*avals)
    if int_to_float and want.kind in "biu":
        want = DEFAULT_FLOAT
    if want != np_dt:
        desc = ", ".join(f"{n}.dtype={dtype_of(a)}" for n, a in zip(names, avals))
        raise PromotionNeeded(f"{op}: PyTorch computes ({desc}) in {want}, numpy in {np_dt}; the dynnets ops "
                              f"cast the operands to {want} first (bound directly: cast them with astype)")
