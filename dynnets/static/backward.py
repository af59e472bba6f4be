"""Symbolic gradients: the gradient subgraph is built from the table's VJPs.

For every equation between ``xs`` and ``ys`` (in reverse order), the VJP of
its primitive is bound as a node through :func:`primitives.vjp_primitive`,
whose forward *is* the table's VJP function; eager ``backward`` calls the very
same functions, so eager and static gradients are one implementation.
Contributions to a value used several times are summed by one ``add_n`` node
(as TF's ``AddN``), which also concatenates row-sparse embedding gradients
instead of densifying them.

The only place a static gradient differs in form from the table's is sparsity:
``vjp_primitive`` densifies a :class:`RowSparse` result, so for the VJPs that
return one (``SPARSE_VJPS``) the graph binds a twin that keeps it sparse; the
value is marked ``sparse`` and is densified automatically when an ordinary op
consumes it (optimizers apply it sparsely).
"""
from __future__ import annotations

import numpy as np

from ..autograd import primitives as P
from ..autograd.engine import bind
from ..autograd.primitives import Aval, RowSparse, _dt, _fmt, vjp_primitive
from .graph import SOURCES, GraphError, StaticPrimitive, Value, _densified

__all__ = ["gradients", "SPARSE_VJPS", "vjp_call_info", "add_n_p", "ones_like_p"]

# (primitive name, input index) of table VJPs that return a RowSparse gradient
SPARSE_VJPS = frozenset({("embedding", 0)})


def _ones_like(y):
    return np.ones(np.shape(y), dtype=np.result_type(y))


ones_like_p = StaticPrimitive("ones_like", _ones_like, lambda y: Aval(tuple(y.shape), _dt(y)))


def _add_n(*xs):
    """Sum of gradients; RowSparse terms are concatenated (all sparse) or
    scattered into the dense sum."""
    sparse = [x for x in xs if type(x) is RowSparse]
    if not sparse:
        out = np.add(xs[0], xs[1])
        for x in xs[2:]:
            if np.shape(x) == np.shape(out):
                np.add(out, x, out=out)
            else:
                out = out + x
        return out
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


def _add_n_shape(*xs):
    s = tuple(xs[0].shape)
    for i, x in enumerate(xs[1:], 1):
        if tuple(x.shape) != s:
            raise P.ShapeError(f"add_n: input {i}.shape={_fmt(x.shape)} does not match input 0.shape={_fmt(s)}")
    return Aval(s, P._rtype(*[x.dtype for x in xs]))


add_n_p = StaticPrimitive("add_n", _add_n, _add_n_shape)

_SPARSE_PRIMS: dict = {}
_INFO: dict = {}


def _sparse_vjp_primitive(prim, i):
    """Twin of ``vjp_primitive(prim, i)`` that returns the table VJP's
    RowSparse result as it is."""
    key = (prim.name, i)
    p = _SPARSE_PRIMS.get(key)
    if p is not None:
        return p
    fn = prim.vjps[i]

    def impl(*args, _n_in, **attrs):
        return fn(args[0], args[1:1 + _n_in], args[1 + _n_in], **attrs)

    p = StaticPrimitive(f"sparse_vjp_{prim.name}_{i}", impl, vjp_primitive(prim, i).shape)
    _SPARSE_PRIMS[key] = p
    _INFO[p] = (fn, prim.multiple_results, False, False)
    return p


def vjp_call_info(prim):
    """For a VJP node's primitive: (table function, forward has multiple
    results, joint, densify result) so a plan can call the table's VJP
    directly; None for any other primitive."""
    info = _INFO.get(prim)
    if info is not None:
        return info
    for (name, i), p in P.VJP_PRIMITIVES.items():
        if p is prim:
            fwd = P.PRIMITIVES[name]
            fn = fwd.joint_vjp if i is None else fwd.vjps[i]
            # a joint VJP may return factored (OuterSum) or row-sparse parts: densify them as vjp_primitive does
            info = (fn, fwd.multiple_results, i is None, i is None or (name, i) in SPARSE_VJPS)
            _INFO[prim] = info
            return info
    return None


def _sum(g, terms, name):
    if len(terms) == 1:
        return terms[0]
    sparse = all(t.sparse for t in terms)
    aval = Aval(tuple(terms[0].shape), terms[0].dtype)
    return g._append(add_n_p, tuple(t.id for t in terms), {}, aval, name=name, sparse=sparse)


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _gradients(ys, xs, grad_ys=None):
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
    summed: dict = {}
    with g.as_default():
        for y, gy in zip(ys, grad_ys):
            if y.id not in dep:
                continue
            if _dt(avals[y.id]).kind not in "fc":
                raise TypeError(f"gradients: y '{y.name}' has dtype {y.dtype}; only floating-point values have gradients")
            if gy is None:
                gy = g._append(ones_like_p, (y.id,), {}, Aval(tuple(y.shape), y.dtype), name=f"gradients/{y.name}/ones")
            elif not isinstance(gy, Value):
                gy = g._const(np.asarray(gy, dtype=y.dtype))
            cot.setdefault(y.id, []).append(gy)

        def total(o):
            t = summed.get(o)
            if t is None and o in cot:
                t = _sum(g, cot[o], f"gradients/{g.values[o].name}/add_n")
                summed[o] = t
            return t

        for e in reversed(g.eqns[:len(g.eqns)]):
            if e.outs[0] > maxy:
                continue
            p = e.prim
            if p in SOURCES or not p.differentiable:
                continue
            if not any(o in cot for o in e.outs):
                continue
            need = [k for k, i in enumerate(e.ins)
                    if i in dep and k not in p.nondiff_args and _dt(avals[i]).kind in "fc"
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
            if p.joint_vjp is not None:
                res = bind(vjp_primitive(p, None), *head, *ins, *tail, _n_in=n_in, **e.attrs)
                vjp_call_info(vjp_primitive(p, None))
                for k in need:
                    cot.setdefault(e.ins[k], []).append(res[k])
            else:
                for k in need:
                    if (p.name, k) in SPARSE_VJPS:
                        vp = _sparse_vjp_primitive(p, k)
                        r = bind(vp, *head, *ins, *tail, _n_in=n_in, **e.attrs)
                        r.sparse = True
                    else:
                        vp = vjp_primitive(p, k)
                        vjp_call_info(vp)
                        r = bind(vp, *head, *ins, *tail, _n_in=n_in, **e.attrs)
                    cot.setdefault(e.ins[k], []).append(r)
        return [total(x.id) for x in xs]


def gradients(ys, xs, grad_ys=None):
    """Symbolic gradients of ``sum(ys)`` with respect to each of ``xs``
    (as ``tf.gradients``): a list of Values, ``None`` for an x that ``ys`` do
    not depend on. Row-sparse gradients are returned densified; optimizers use
    the sparse form."""
    return [None if r is None else (_densified(r) if r.sparse else r) for r in _gradients(ys, xs, grad_ys)]
