"""Eager (define-by-run) execution: ``bind``, graph recording and ``backward``.

Every op on tensors goes through :func:`bind`, which runs the primitive's
forward implementation and, when any input requires a gradient and grad mode is
on, records one :class:`Node`. :func:`backward` walks the recorded nodes in
reverse topological order with an explicit stack (no Python recursion, so a
chain of any length works) and calls each primitive's VJP from the table in
:mod:`dynnets.autograd.primitives`.

Per-op overhead is the enemy of dynamic networks (DESIGN.md rule 10), so the hot
path here avoids isinstance chains, keyword plumbing and copies: a node stores
the input arrays it already had, and tensors are created without ``__init__``.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .primitives import RowSparse, ShapeError, check_shapes
from .tensor import Parameter, Tensor

__all__ = [
    "Tensor", "Parameter", "Node", "bind", "backward", "no_grad", "enable_grad",
    "is_grad_enabled", "detect_anomaly", "set_symbolic_handler",
]


class _Mode:
    """The explicit contexts of eager mode (DESIGN.md rule 7)."""

    grad_enabled = True
    anomaly = False
    symbolic = None          # set by dynnets.static: handles symbolic arguments


def is_grad_enabled() -> bool:
    return _Mode.grad_enabled


@contextlib.contextmanager
def no_grad():
    """Context in which ops record nothing (as ``torch.no_grad``)."""
    prev = _Mode.grad_enabled
    _Mode.grad_enabled = False
    try:
        yield
    finally:
        _Mode.grad_enabled = prev


@contextlib.contextmanager
def enable_grad():
    prev = _Mode.grad_enabled
    _Mode.grad_enabled = True
    try:
        yield
    finally:
        _Mode.grad_enabled = prev


class AnomalyError(FloatingPointError):
    """Raised inside :func:`detect_anomaly` by the first op producing NaN/inf."""


@contextlib.contextmanager
def detect_anomaly():
    """Context in which the first op that produces NaN or inf, in the forward
    pass or in backward, raises :class:`AnomalyError` naming the op."""
    prev = _Mode.anomaly
    _Mode.anomaly = True
    try:
        yield
    finally:
        _Mode.anomaly = prev


def set_symbolic_handler(fn):
    """Install the function that binds a primitive when an argument is symbolic
    (a static-graph value). Called once by :mod:`dynnets.static`."""
    _Mode.symbolic = fn


class Node:
    """One recorded primitive application.

    ``args`` are the input arrays (or Python scalars) the forward saw,
    ``parents`` the input tensors aligned with ``args`` (``None`` for constants
    and for inputs that need no gradient), ``out`` the forward result (a tuple
    for multiple-result primitives), ``g`` the output gradient accumulated
    during backward.
    """

    __slots__ = ("prim", "args", "parents", "attrs", "out", "g", "freed")

    def __repr__(self):
        return f"<Node {self.prim.name}>"


_TENSOR = Tensor
_PARAM = Parameter


def _new(data, node, idx, rg):
    t = Tensor.__new__(Tensor)
    t.data = data
    t._grad = None
    t.requires_grad = rg
    t._node = node
    t._idx = idx
    t.name = None
    return t


def _explain(prim, args, attrs, exc):
    """Turn a failure inside a forward implementation into the shape rule's
    clear message (the shape rule is the input check: DESIGN.md rule 6)."""
    try:
        check_shapes(prim, args, attrs)
    except ShapeError as err:
        raise err.with_traceback(None) from None
    raise exc


def bind(prim, *args, **attrs):
    """Apply primitive ``prim`` to ``args`` (tensors or constants).

    Returns a Tensor (a tuple of Tensors for multiple-result primitives). When
    an argument is a symbolic static-graph value, the static handler builds a
    graph node instead.
    """
    arrays = []
    parents = []
    rg = False
    for a in args:
        tp = type(a)
        if tp is _TENSOR or tp is _PARAM:
            arrays.append(a.data)
            if a.requires_grad:
                rg = True
                parents.append(a)
            else:
                parents.append(None)
        elif getattr(a, "_is_symbolic", False):
            return _Mode.symbolic(prim, args, attrs)
        else:
            if isinstance(a, Tensor):      # other Tensor subclasses
                arrays.append(a.data)
                parents.append(a if a.requires_grad else None)
                rg = rg or a.requires_grad
            else:
                arrays.append(a)
                parents.append(None)
    try:
        out = prim.impl(*arrays, **attrs)
    except ShapeError:
        raise
    except (ValueError, IndexError, TypeError) as exc:
        _explain(prim, arrays, attrs, exc)
    if _Mode.anomaly:
        _check_finite(prim, out, "forward")
    rg = rg and _Mode.grad_enabled and prim.differentiable
    node = None
    if rg:
        node = Node()
        node.prim = prim
        node.args = arrays
        node.parents = parents
        node.attrs = attrs
        node.out = out
        node.g = None
        node.freed = False
    if prim.multiple_results:
        return tuple(_new(o, node, i, rg) for i, o in enumerate(out))
    return _new(out, node, 0, rg)


def _check_finite(prim, out, where, which=None):
    outs = out if isinstance(out, tuple) else (out,)
    for o in outs:
        if o is None or type(o) is RowSparse:
            o = None if o is None else o.values
        if o is not None and np.asarray(o).dtype.kind in "fc" and not np.all(np.isfinite(o)):
            what = f" (gradient of input {which})" if which is not None else ""
            raise AnomalyError(f"detect_anomaly: op '{prim.name}' produced NaN or inf in {where}{what}")


def _toposort(root_node):
    """Nodes reachable from ``root_node``, parents before children, iteratively."""
    order = []
    seen = {id(root_node)}
    stack = [(root_node, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        stack.append((node, True))
        for p in node.parents:
            if p is not None:
                pn = p._node
                if pn is not None and id(pn) not in seen:
                    seen.add(id(pn))
                    stack.append((pn, False))
    return order


def _add(old, new):
    if old is None:
        return new
    if type(old) is RowSparse:
        return old.add(new) if type(new) is RowSparse else old.add_to_dense(new)
    if type(new) is RowSparse:
        return new.add_to_dense(old)
    return old + new


def _accumulate_leaf(t, g):
    if type(g) is not RowSparse:
        if g.dtype != t.data.dtype:
            g = g.astype(t.data.dtype)
        if g.shape != t.data.shape:
            g = np.broadcast_to(g, t.data.shape)
        if not g.flags.writeable:
            g = g.copy()
    elif g.values.dtype != t.data.dtype:
        g = RowSparse(g.rows, g.values.astype(t.data.dtype), g.shape)
    t._grad = _add(t._grad, g)


def backward(root, gradient=None, retain_graph=False):
    """Reverse-mode sweep from ``root``; see :meth:`Tensor.backward`."""
    if not root.requires_grad:
        raise RuntimeError("backward: tensor does not require grad and has no grad_fn")
    if gradient is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"backward: grad can be implicitly created only for scalar outputs; "
                f"got shape {root.data.shape}, pass gradient= explicitly")
        g = np.ones_like(root.data)
    else:
        g = np.asarray(gradient.data if isinstance(gradient, Tensor) else gradient, dtype=root.data.dtype)
        if g.shape != root.data.shape:
            raise ShapeError(f"backward: gradient shape {g.shape} does not match tensor shape {root.data.shape}")
    node = root._node
    if node is None:
        _accumulate_leaf(root, g)
        return
    if node.freed:
        raise RuntimeError(
            "backward: trying to backward through the graph a second time (the graph was freed "
            "after the first backward); pass retain_graph=True to the first call")
    order = _toposort(node)
    for n in order:
        if n.freed:
            raise RuntimeError(
                "backward: part of this graph was already freed by an earlier backward; "
                "pass retain_graph=True to the first call")
        n.g = None
    _seed(node, root._idx, g)
    anomaly = _Mode.anomaly
    for n in reversed(order):
        gn = n.g
        n.g = None
        if gn is None:
            continue
        prim = n.prim
        if prim.multiple_results:
            if all(x is None for x in gn):
                continue
            gn = tuple(x.to_dense() if type(x) is RowSparse else x for x in gn)
        elif type(gn) is RowSparse:
            gn = gn.to_dense()
        parents = n.parents
        if prim.joint_vjp is not None:
            grads = prim.joint_vjp(gn, n.args, n.out, **n.attrs)
        else:
            vjps = prim.vjps
            grads = [None] * len(parents)
            for i, p in enumerate(parents):
                if p is not None:
                    f = vjps[i]
                    if f is not None:
                        grads[i] = f(gn, n.args, n.out, **n.attrs)
        for i, p in enumerate(parents):
            if p is None:
                continue
            gi = grads[i]
            if gi is None:
                continue
            if anomaly:
                _check_finite(prim, gi, "backward", i)
            pn = p._node
            if pn is None:
                _accumulate_leaf(p, gi)
            else:
                _seed(pn, p._idx, gi)
        if not retain_graph:
            n.args = None
            n.out = None
            n.parents = ()
            n.freed = True


def _seed(node, idx, g):
    if node.prim.multiple_results:
        if node.g is None:
            node.g = [None] * len(node.out)
        node.g[idx] = _add(node.g[idx], g)
    else:
        node.g = _add(node.g, g)
