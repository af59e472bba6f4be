"""TF1's higher-order functions over a leading axis, ``map_fn`` and ``scan``,
built on :func:`~dynnets.static.while_loop` and
:class:`~dynnets.static.TensorArray` (so they run in the graph, for a length
known only when it is fed, and their gradients are the loop's).

``elems``, ``initializer`` and the results may be nested lists, tuples
(namedtuples included) and dicts of values, as in TF1.
"""
from __future__ import annotations

import numpy as np

from ..autograd import ops
from ..autograd.primitives import fmt_shape
from .array_ops import check_same_size, shape
from .control_flow import TensorArray, while_loop
from .graph import Value, constant, get_default_graph
from ..pytree import tree_flatten, tree_leaves

__all__ = ["map_fn", "scan"]


def _as_value(x, op, what, graph):
    """``x`` as a Value of ``graph``: Python numbers and lists become float32 /
    int32 tensors, as TF1 converts them (numpy arrays and scalars keep their dtype)."""
    if isinstance(x, Value):
        return x
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"{op}: {what} must hold graph values or arrays, got {type(x).__name__}")
    if not isinstance(x, (np.ndarray, np.generic)):
        arr = arr.astype(np.int32 if arr.dtype.kind in "iu" else np.float32 if arr.dtype.kind == "f" else arr.dtype)
    with graph.as_default():
        return constant(arr)


def _graph_of(leaves):
    for x in leaves:
        if isinstance(x, Value):
            return x.graph
    return get_default_graph()


def _sequences(op, elems, graph):
    """The leaves of ``elems`` as Values of rank >= 1, the first's run-time
    length, and the leaves checked to share it."""
    leaves, struct = tree_flatten(elems)
    if not leaves:
        raise ValueError(f"{op}: elems is empty")
    vals = [_as_value(x, op, "elems", graph) for x in leaves]
    for k, v in enumerate(vals):
        if len(v.shape) < 1:
            raise ValueError(f"{op}: every element of elems must have at least one dimension (the one it maps over), "
                             f"elems leaf {k} '{v.name}' has shape {fmt_shape(v.shape)}")
    with graph.as_default():
        n = shape(vals[0])[0]
        vals = [vals[0]] + [check_same_size(v, 0, vals[0], 0, op, f"elems leaf {k + 1}", "elems leaf 0")
                            for k, v in enumerate(vals[1:])]
    return struct, vals, n


def _leaves_of(op, result, struct, dtypes, what):
    leaves, got = tree_flatten(result)
    if not got.same_structure(struct, lists_as_tuples=True):
        raise ValueError(f"{op}: fn returned the structure {got}, which does not match {what} {struct}")
    return leaves


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False, infer_shape=True,
           name=None):
    """``stack([fn(elems[i]) for i in range(n)])`` computed in the graph
    (TF1's ``tf.map_fn``).

    Parameters
    ----------
    fn : callable
        Called once, on the structure of ``elems`` with each leaf's slice
        ``i`` (shape ``leaf.shape[1:]``); returns a structure of values.
    elems : Value, array or a nested structure of them
        Every leaf has the same length ``n`` along its first axis (checked,
        also when it is known only when the graph runs).
    dtype : dtype or a nested structure of dtypes, optional
        The structure and dtypes of ``fn``'s result, needed (as in TF1) when
        they are not those of ``elems``.
    back_prop : bool
        ``False``: no gradient flows through (the loop keeps no per-step state).
    parallel_iterations, swap_memory, infer_shape
        Accepted for TF1 code; iterations run one after another.

    Returns
    -------
    The results stacked along a new first axis, in ``fn``'s structure:
    a leaf of shape ``s`` becomes ``(n,) + s``.
    """
    if not callable(fn):
        raise TypeError(f"map_fn: fn must be callable, got {type(fn).__name__}")
    g = _graph_of(tree_leaves(elems))
    struct, vals, n = _sequences("map_fn", elems, g)
    if dtype is None:
        out_struct, out_dtypes = struct, [v.dtype for v in vals]
    else:
        dleaves, out_struct = tree_flatten(dtype)
        out_dtypes = [np.dtype(d) for d in dleaves]
    with g.as_default():
        ins = [TensorArray(v.dtype, size=n, element_shape=v.shape[1:], name="map_fn/elems").unstack(v) for v in vals]
        outs = [TensorArray(dt, size=n, name="map_fn/results") for dt in out_dtypes]

        def body(i, *tas):
            x = struct.unflatten([ta.read(i) for ta in ins])
            ys = _leaves_of("map_fn", fn(x), out_struct, out_dtypes,
                            "dtype" if dtype is not None else "elems (pass dtype= when fn's result differs from elems)")
            new = []
            for k, (ta, y, dt) in enumerate(zip(tas, ys, out_dtypes)):
                y = _as_value(y, "map_fn", "fn's result", get_default_graph())
                if y.dtype != dt:
                    raise TypeError(f"map_fn: fn's result {k} has dtype {y.dtype}, expected {dt} (the "
                                    f"{'dtype= given' if dtype is not None else 'dtype of elems; pass dtype='})")
                new.append(ta.write(i, y))
            return [i + 1, *new]

        res = while_loop(lambda i, *tas: ops.less(i, n), body, [constant(np.asarray(0, np.int64)), *outs],
                         back_prop=back_prop, name=name or "map_fn", return_same_structure=True)
        stacked = [ta.stack() for ta in res[1:]]
    return out_struct.unflatten(stacked)


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False, infer_shape=True,
         reverse=False, name=None):
    """The running results of ``acc = fn(acc, elems[i])`` for every ``i``,
    stacked (TF1's ``tf.scan``).

    Parameters
    ----------
    fn : callable
        ``fn(acc, x) -> acc``: ``acc`` has the structure of ``initializer``
        (its shapes and dtypes stay the same), ``x`` that of ``elems``.
    elems : as :func:`map_fn`'s
    initializer : a value or a structure of values, optional
        The first ``acc``. Without it, ``elems[0]`` is (and ``fn`` must return
        the structure of ``elems``), and the results start with it.
    reverse : bool
        Scan from the last element to the first; result ``i`` is still the
        accumulator after element ``i``.
    back_prop, parallel_iterations, swap_memory, infer_shape : as :func:`map_fn`'s

    Returns
    -------
    The accumulators after each element, stacked along a new first axis, in
    the structure of ``initializer`` (of ``elems`` without one).
    """
    if not callable(fn):
        raise TypeError(f"scan: fn must be callable, got {type(fn).__name__}")
    g = _graph_of(tree_leaves(elems) + tree_leaves(initializer))
    struct, vals, n = _sequences("scan", elems, g)
    with g.as_default():
        if initializer is None:
            acc_struct = struct
            acc = [v[-1] if reverse else v[0] for v in vals]
            start = n - 2 if reverse else constant(np.asarray(1, np.int64))
        else:
            aleaves, acc_struct = tree_flatten(initializer)
            acc = [_as_value(a, "scan", "initializer", g) for a in aleaves]
            start = n - 1 if reverse else constant(np.asarray(0, np.int64))
        ins = [TensorArray(v.dtype, size=n, element_shape=v.shape[1:], name="scan/elems").unstack(v) for v in vals]
        outs = [TensorArray(a.dtype, size=n, element_shape=a.shape, name="scan/results") for a in acc]
        if initializer is None:
            first = n - 1 if reverse else constant(np.asarray(0, np.int64))
            outs = [ta.write(first, a) for ta, a in zip(outs, acc)]
        m = len(acc)

        def body(i, *state):
            a = acc_struct.unflatten(state[:m])
            x = struct.unflatten([ta.read(i) for ta in ins])
            new = _leaves_of("scan", fn(a, x), acc_struct, None,
                             "initializer" if initializer is not None else "elems (the accumulator without an "
                                                                           "initializer)")
            new = [_as_value(y, "scan", "fn's result", get_default_graph()) for y in new]
            tas = [ta.write(i, y) for ta, y in zip(state[m:], new)]
            return [i - 1 if reverse else i + 1, *new, *tas]

        def cond(i, *state):
            return ops.greater_equal(i, 0) if reverse else ops.less(i, n)

        res = while_loop(cond, body, [start, *acc, *outs], back_prop=back_prop, name=name or "scan",
                         return_same_structure=True)
        stacked = [ta.stack() for ta in res[1 + m:]]
    return acc_struct.unflatten(stacked)
