"""Building the subgraphs of control flow (a loop's condition and body, a
``cond``'s branches): the user's function called into a graph of its own,
its results as values of that graph, the checks that it is pure, and the
graph around a construct. Shared by :mod:`.control_flow` (``while_loop``)
and :mod:`.cond`.
"""
from __future__ import annotations

import numpy as np

from . import passes
from .graph import GraphError, Value, constant, get_default_graph, site_str
from .tensor_array import TensorArray

__all__ = ["DEFAULT_OPTIONS", "leaf_value", "call_in", "check_pure", "own_program", "refuse_random",
           "enclosing_graph"]

# the options of a loop or cond run outside a session (passes.evaluate, a constant folded): a default session's
DEFAULT_OPTIONS = passes.CompileOptions()


def leaf_value(x, graph, what):
    """Leaf ``x`` of a loop variable or a result as a Value (its TensorArray's
    flow for a TensorArray) in ``graph``."""
    if isinstance(x, TensorArray):
        x = x.flow
    if isinstance(x, Value):
        return graph.capture(x) if x.graph is not graph else x
    try:
        arr = np.asarray(x)
    except Exception:
        raise TypeError(f"{what}: {x!r} is not a graph value, a TensorArray or an array") from None
    if arr.dtype == object:
        raise TypeError(f"{what}: {x!r} is not a graph value, a TensorArray or an array")
    if not isinstance(x, np.ndarray):
        # TF1 makes Python numbers int32 / float32 tensors
        arr = arr.astype(np.int32 if arr.dtype.kind in "iu" else np.float32 if arr.dtype.kind == "f" else arr.dtype)
    with graph.as_default():
        return constant(arr)


def call_in(graph, fn, args, what):
    """``fn(*args)`` with ``graph`` as the default graph; an effect the call
    adds to an enclosing graph (``v.assign(...)`` goes to its variable's
    graph) would not run per iteration or branch, so it is an error."""
    outer = []
    p = graph.parent
    while p is not None:
        outer.append((p, len(p.eqns)))
        p = p.parent
    with graph.as_default():
        r = fn(*args)
    for p, n in outer:
        for e in p.eqns[n:]:
            if getattr(e.prim, "effect", False):
                raise GraphError(f"{what}: op '{e.name}' ({e.prim.name}) has an effect (a variable update, an "
                                 f"initialiser or a group); effects cannot run inside control flow")
    return r


def check_pure(graph, what):
    for e in graph.eqns:
        if getattr(e.prim, "effect", False):
            raise GraphError(f"{what}: op '{e.name}' ({e.prim.name}) has an effect (a variable update, an "
                             f"initialiser or a group); effects cannot run inside control flow")
    if graph.variables:
        raise GraphError(f"{what}: Variable '{graph.variables[0].name}' is created inside it; create variables "
                         f"outside control flow and use them inside")


def own_program(g):
    """Subgraph ``g``'s own program (what its outputs need): gradient programs
    append equations to the subgraph that its shape rule must not run."""
    return passes.prune(g.with_outputs(g.outputs))


def refuse_random(graph, what):
    """A gradient that recomputes the subgraph would draw other random values
    than the forward did: such a gradient is refused (a loop whose forward
    kept the values its gradient reads recomputes nothing, and is not)."""
    for e in graph.eqns:
        if e.prim.random:
            raise ValueError(f"gradients through a {what} whose subgraph draws random values ({e.prim.name} "
                             f"'{e.name}'{site_str(e.site)}) are not supported: the gradient recomputes the "
                             f"subgraph and would draw other values; draw them outside (a mask per step as a "
                             f"TensorArray or a loop input) and pass them in")


def enclosing_graph(xs):
    """The innermost graph among the values in ``xs`` and the default graph."""
    g = get_default_graph()
    stack = list(xs)
    while stack:
        x = stack.pop()
        if isinstance(x, TensorArray):
            x = x.flow
        if isinstance(x, Value):
            if x.graph is not g and not x.graph.encloses(g):
                if g.encloses(x.graph):
                    g = x.graph
                else:
                    raise GraphError(f"'{x.name}' belongs to another graph than the default graph")
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return g
