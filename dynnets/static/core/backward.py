"""Symbolic gradients: the gradient subgraph is built from the table's VJPs.

For every equation between ``xs`` and ``ys`` (in reverse order), the VJP of
its primitive is bound as a node through :func:`vjp_primitive`, whose
forward *is* the table's VJP function; eager ``backward`` calls the very
same functions, so eager and static gradients are one implementation.
Contributions to a value used several times are summed as they are produced:
the second starts a sum (``add_n``, which the memory plan can give a reused
buffer) and each further one is added into it in place right after its VJP
(``accumulate``), while it is still in cache; row-sparse embedding gradients
are kept apart and concatenated by one final ``add_n`` instead of densified.

A static gradient differs in form from the table's in two ways, both declared
by the primitive: a plan densifies every gradient at once, so where a VJP
returns factors it binds the primitive's ``dense_vjp`` twin; and the inputs
in its ``sparse_grads`` keep their :class:`RowSparse` gradient (the value is
marked ``sparse`` and is densified automatically when an ordinary op consumes
it; optimizers apply it sparsely).
"""
from __future__ import annotations

import numpy as np

from ...autograd import gradtypes
from ...autograd.engine import bind
from ...autograd.primitives import Aval, ShapeError, dtype_of, fits, fmt_shape, result_type, same_shape
from .graph import Value, densified
from .ir import SOURCES, GraphError, StaticPrimitive, gc_paused

__all__ = ["gradients", "sparse_gradients", "vjp_primitive", "VjpPrimitive", "add_n_p", "accumulate_p",
           "ones_like_p", "on_gradient"]


_OuterSum = gradtypes.OuterSum


def _ones_like(y):
    return np.ones(np.shape(y), dtype=np.result_type(y))


def _ones_like_native(gen, ins, attrs):
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    gen.ew(o, gen.shape[o], [(gen.lit(1, dt), ())], gen.same, dt)


ones_like_p = StaticPrimitive("ones_like", _ones_like, lambda y: Aval(tuple(y.shape), dtype_of(y)),
                              native=_ones_like_native)


def _add_n(*xs, out=None):
    """Sum of gradients (a fresh array, or ``out``); RowSparse terms are
    concatenated (all sparse) or scattered into the dense sum."""
    if gradtypes.any_row_sparse(xs):
        return gradtypes.add_n(xs)
    if type(xs[0]) is _OuterSum or type(xs[1]) is _OuterSum or any(type(x) is _OuterSum for x in xs[2:]):
        # a loop body's weight gradient left factored (gradients(lazy=)) that another contribution joins
        xs = [x.to_dense() if type(x) is _OuterSum else x for x in xs]
    if out is not None and all(np.shape(x) == out.shape for x in xs[:2]):
        acc = np.add(xs[0], xs[1], out=out)
    else:
        acc = np.add(xs[0], xs[1])
    for x in xs[2:]:
        acc = _accumulate(acc, x)
    return acc


def _accumulate(acc, x):
    """``acc + x``, in place when ``acc`` is a writable array of the sum's
    shape and dtype. ``acc`` is always a sum this plan created (``add_n``'s
    result or an earlier ``_accumulate``'s), read by nothing else, so writing
    over it is safe; a read-only array (a folded constant) gets a fresh sum."""
    if type(x) is _OuterSum or type(acc) is _OuterSum:
        acc = acc.to_dense() if type(acc) is _OuterSum else acc
        x = x.to_dense() if type(x) is _OuterSum else x
    if (type(acc) is np.ndarray and acc.flags.writeable and np.shape(x) == acc.shape
            and np.result_type(acc, x) == acc.dtype):
        acc += x
        return acc
    return acc + x


def _add_n_shape(*xs):
    # the terms of a sum are gradients of one value, so their shapes are equal at run time; one may
    # know a dimension another does not (a loop body's gradient: from the fed loop state and from a
    # captured value), and the sum knows every dimension some term knows
    s = list(xs[0].shape)
    for i, x in enumerate(xs[1:], 1):
        shp = tuple(x.shape)
        if len(shp) != len(s) or any(a is not None and b is not None and a != b for a, b in zip(s, shp)):
            raise ShapeError(f"add_n: input {i}.shape={fmt_shape(shp)} does not match input 0.shape="
                             f"{fmt_shape(xs[0].shape)}")
        s = [a if a is not None else b for a, b in zip(s, shp)]
    return Aval(tuple(s), result_type(*[x.dtype for x in xs]))


def _add_n_native(gen, ins, attrs):
    """The native tier's dense gradient sum: one loop over every term."""
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    for i in ins.args:
        if gen.shape.get(i) != gen.shape[o] and i not in gen.weak:
            raise gen.Unsupported("a gradient sum of terms of different shapes")
    gen.ew(o, gen.shape[o], [gen.op(s, dt, inline=True) for s in ins.args], lambda *e: "(" + " + ".join(e) + ")", dt)


add_n_p = StaticPrimitive("add_n", _add_n, _add_n_shape, out_arg=True, native=_add_n_native)
# each further gradient contribution is added as soon as it is computed, while it is still in
# cache, into the sum add_n started (a single add_n at the end reads every term cold)
accumulate_p = StaticPrimitive("accumulate", _accumulate, lambda acc, x: _add_n_shape(acc, x), native=_add_n_native)

class VjpPrimitive(StaticPrimitive):
    """A primitive whose forward *is* a table primitive's VJP (see
    :func:`vjp_primitive`). ``vjp_call`` is ``(fn, forward has multiple results,
    joint, densify the result)``, so a plan calls the table's function
    directly; ``forward`` is that table primitive."""

    __slots__ = ("vjp_call", "forward")


_VJP_PRIMS: dict = {}     # (primitive, input index or None, sparse) -> VjpPrimitive


def vjp_primitive(prim, i=None, sparse=False, lazy=frozenset()):
    """A primitive whose forward *is* ``prim``'s VJP for input ``i`` (or the
    joint VJP when ``i`` is None). Inputs: (g, *prim_inputs, out) where ``g``
    and ``out`` are tuples packed as separate arguments for multiple-result
    primitives: (g_0..g_k, x_0..x_n, out_0..out_k). Its result is dense, in
    each input's dtype (where a VJP returns factors, the primitive's
    ``dense_vjp`` twin is bound), except with ``sparse`` (an input in
    ``prim.sparse_grads``): the table VJP's RowSparse result as it is. Not
    itself differentiable (no second-order gradients). ``lazy`` (joint VJPs
    only): the input positions whose gradient stays as the VJP returns it
    (an :class:`~dynnets.autograd.gradtypes.OuterSum` of a weight), for a
    caller that adds many of them and densifies once (a loop's gradient)."""
    key = (prim, i, sparse, lazy)
    p = _VJP_PRIMS.get(key)
    if p is not None:
        return p
    fn = prim.vjp_fn(i, dense=not (sparse or lazy))
    dense_like = gradtypes.dense_like
    if lazy:
        raw = fn

        def fn(g, ins, out, **attrs):
            r = raw(g, ins, out, **attrs)
            return tuple(a if k in lazy else dense_like(a, x) for k, (a, x) in enumerate(zip(r, ins)))

    def impl(*args, _n_in, **attrs):
        if prim.multiple_results:
            nout = (len(args) - _n_in) // 2
            g = tuple(args[:nout])
            ins = args[nout:nout + _n_in]
            out = tuple(args[nout + _n_in:])
        else:
            g, ins, out = args[0], args[1:1 + _n_in], args[1 + _n_in]
        r = fn(g, ins, out, **attrs)
        if sparse or lazy:
            return r
        # dense, in each input's dtype (the static graph declares that)
        if i is None:
            return tuple(dense_like(a, x) for a, x in zip(r, ins))
        return dense_like(r, ins[i])

    def shape(*avals, _n_in, **attrs):
        if prim.multiple_results:
            nout = (len(avals) - _n_in) // 2
            gs, ins, outs = avals[:nout], avals[nout:nout + _n_in], avals[nout + _n_in:]
        else:
            gs, ins, outs = avals[:1], avals[1:1 + _n_in], avals[1 + _n_in:]
        # each output gradient (a None constant where an output has none) must
        # have its output's shape: the VJPs' kernels index them unchecked
        for k, (ga, oa) in enumerate(zip(gs, outs)):
            if ga.shape is None or oa.shape is None:        # an unknown rank (a placeholder without a shape)
                continue
            if not (ga.shape == () and dtype_of(ga) == object) and not fits(tuple(ga.shape), tuple(oa.shape)):
                raise ShapeError(f"{name}: gradient of output {k} has shape {fmt_shape(ga.shape)}, the output "
                                 f"{fmt_shape(oa.shape)}")
        if i is None:
            return tuple(Aval(same_shape(a.shape), dtype_of(a)) for a in ins)
        return Aval(same_shape(ins[i].shape), dtype_of(ins[i]))

    name = ("sparse_vjp_" if sparse else "lazy_vjp_" if lazy else "vjp_") + prim.name + ("" if i is None else f"_{i}")
    # a static primitive's gradient (control flow, TensorArrays) is a TensorArray or a loop's
    # gradient holding the output gradients it was given, and a loop's or cond's gradient
    # compiles the body's gradient with the session's options, as the forward did
    static = isinstance(prim, StaticPrimitive)
    p = VjpPrimitive(name, impl, shape, multiple_results=(i is None), retains_inputs=static,
                     options_arg=static and prim.options_arg)
    # a joint VJP may return factored (OuterSum) or row-sparse parts: the plan densifies them
    p.vjp_call = (fn, prim.multiple_results, i is None, i is None and not lazy)
    p.forward = prim
    _VJP_PRIMS[key] = p
    return p


_ON_GRADIENT: dict = {}    # primitive -> fn(attrs), called when a gradient through its equation is built


def on_gradient(prim, fn):
    """Call ``fn(eqn.attrs)`` whenever :func:`gradients` builds the gradient
    of an equation of ``prim`` (a loop makes its body's gradient then, so its
    forward knows from its first run which values the gradient reads)."""
    _ON_GRADIENT[prim] = fn


class _Cot:
    """The gradient contributions to one value: a dense running sum (``owned``
    once an add_n created it) and row-sparse terms kept for one final add_n."""

    __slots__ = ("dense", "owned", "sparse", "total")

    def __init__(self):
        self.dense = None
        self.owned = False
        self.sparse = []
        self.total = None


def _contribute(g, c, r, name):
    if r.sparse:
        c.sparse.append(r)
        return
    if c.dense is None:
        c.dense = r
    elif not c.owned:
        aval = Aval(tuple(r.shape), result_type(c.dense.dtype, r.dtype))
        c.dense = g.append_equation(add_n_p, (c.dense.id, r.id), {}, aval, name=name)
        c.owned = True
    else:
        c.dense = g.append_equation(accumulate_p, (c.dense.id, r.id), {}, Aval(tuple(c.dense.shape), c.dense.dtype),
                                    name=name)


def _total(g, c, name):
    if c.total is None:
        terms = ([c.dense] if c.dense is not None else []) + c.sparse
        if len(terms) == 1:
            c.total = terms[0]
        else:
            sparse = c.dense is None
            aval = Aval(tuple(terms[0].shape), result_type(*[t.dtype for t in terms]))
            c.total = g.append_equation(add_n_p, tuple(t.id for t in terms), {}, aval, name=name, sparse=sparse)
    return c.total


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _gradients_nogc(ys, xs, grad_ys=None, lazy=None):
    """Gradients of sum(ys) w.r.t. each of ``xs``, as Values that may be
    row-sparse (``.sparse``); ``None`` where an x does not reach the ys."""
    ys = _as_list(ys)
    xs = _as_list(xs)
    if not ys:
        raise ValueError("gradients: ys is empty")
    g = None
    for v in ys + xs:
        if not isinstance(v, Value):
            raise TypeError(f"gradients: {v!r} is not a graph value")
        if g is None:
            g = v.graph
        elif v.graph is not g:
            raise GraphError(f"gradients: '{v.name}' belongs to another graph than '{ys[0].name}'")
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    grad_ys = _as_list(grad_ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"gradients: {len(grad_ys)} grad_ys for {len(ys)} ys")

    avals = g.avals
    xids = {x.id for x in xs}
    dep = set(xids)
    maxy = max(y.id for y in ys)
    for e in g.eqns:
        if e.outs[0] > maxy:
            break
        p = e.prim
        if p in SOURCES or not p.differentiable:
            continue
        for k, i in enumerate(e.ins):
            if i in dep and k not in p.nondiff_args:
                dep.update(e.outs)
                break

    cot: dict = {}

    def contribute(o, r):
        c = cot.get(o)
        if c is None:
            c = cot[o] = _Cot()
        _contribute(g, c, r, f"gradients/{g.values[o].name}/acc")

    def total(o):
        c = cot.get(o)
        return None if c is None else _total(g, c, f"gradients/{g.values[o].name}/add_n")

    for k, (y, gy) in enumerate(zip(ys, grad_ys)):
        if gy is not None:
            gshape = tuple(gy.shape) if isinstance(gy, Value) else np.shape(gy)
            if len(gshape) != len(y.shape) or any(a is not None and b is not None and a != b
                                                   for a, b in zip(gshape, y.shape)):
                raise ShapeError(f"gradients: grad_ys[{k}].shape={fmt_shape(gshape)} does not match "
                                   f"y.shape={fmt_shape(y.shape)} ('{y.name}')")

    with g.as_default():
        for y, gy in zip(ys, grad_ys):
            if y.id not in dep:
                continue
            if dtype_of(avals[y.id]).kind not in "fc":
                raise TypeError(f"gradients: y '{y.name}' has dtype {y.dtype}; only floating-point values have gradients")
            if gy is None:
                gy = g.append_equation(ones_like_p, (y.id,), {}, Aval(tuple(y.shape), y.dtype),
                                       name=f"gradients/{y.name}/ones")
            elif not isinstance(gy, Value):
                gy = g.constant_value(np.asarray(gy, dtype=y.dtype))
            contribute(y.id, gy)

        for e in reversed(g.eqns[:len(g.eqns)]):
            if e.outs[0] > maxy:
                continue
            p = e.prim
            if p in SOURCES or not p.differentiable:
                continue
            if not any(o in cot for o in e.outs):
                continue
            need = [k for k, i in enumerate(e.ins)
                    if i in dep and k not in p.nondiff_args and dtype_of(avals[i]).kind in "fc"
                    and (p.joint_vjp is not None or p.vjps[k] is not None)]
            if not need:
                continue
            gs = [total(o) for o in e.outs]
            ins = [g.values[i] for i in e.ins]
            outs = [g.values[o] for o in e.outs]
            n_in = len(ins)
            if p.multiple_results:
                head = gs
                tail = outs
            else:
                head = gs[:1]
                tail = outs[:1]
            hook = _ON_GRADIENT.get(p)
            if hook is not None:
                hook(e.attrs)
            if p.joint_vjp is not None:
                keep = frozenset(k for k in need if e.ins[k] in lazy) if lazy else frozenset()
                res = bind(vjp_primitive(p, None, lazy=keep), *head, *ins, *tail, _n_in=n_in, **e.attrs)
                for k in need:
                    contribute(e.ins[k], res[k])
            else:
                for k in need:
                    sparse = k in p.sparse_grads
                    r = bind(vjp_primitive(p, k, sparse), *head, *ins, *tail, _n_in=n_in, **e.attrs)
                    if sparse:
                        r.sparse = True
                    contribute(e.ins[k], r)
        return [total(x.id) for x in xs]


def sparse_gradients(ys, xs, grad_ys=None):
    """:func:`gradients` with row-sparse gradients (embedding tables) left
    sparse (``.sparse``: the run-time value is a :class:`RowSparse`): what the
    optimizers and traced functions update rows from."""
    with gc_paused():
        return _gradients_nogc(ys, xs, grad_ys)


def gradients(ys, xs, grad_ys=None, lazy=None):
    """Symbolic gradients of ``sum(ys)`` with respect to each of ``xs``
    (as ``tf.gradients``): a list of Values, ``None`` for an x that ``ys`` do
    not depend on. Row-sparse gradients are returned densified; optimizers use
    the sparse form. ``lazy`` (ids of some ``xs``): their gradients may stay
    factored at run time (:class:`~dynnets.autograd.gradtypes.OuterSum`,
    where a VJP makes one and it is their only contribution), for a loop that
    adds them over its iterations and densifies the sum once."""
    with gc_paused():
        rs = _gradients_nogc(ys, xs, grad_ys, lazy)
    return [None if r is None else (densified(r) if r.sparse else r) for r in rs]
