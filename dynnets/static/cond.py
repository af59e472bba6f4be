"""TF1's ``tf.cond``: :func:`cond` and its primitive. Each branch is a
subgraph of its own (:mod:`.subgraphs`), compiled per input signature and
per session options like a loop body (:mod:`.subprogram`); only the taken
branch runs, and its gradient is the taken branch's (zeros for the inputs
of the other).
"""
from __future__ import annotations

import numpy as np

from ..autograd.primitives import Aval, ShapeError, dtype_of, fmt_shape
from .backward import gradients
from .graph import StaticPrimitive, Value, add_op, placeholder_p
from ..pytree import tree_flatten
from . import passes
from .subgraphs import DEFAULT_OPTIONS, call_in, check_pure, enclosing_graph, leaf_value, own_program, refuse_random
from .subprogram import Program, is_float, program, run, zeros_like
from .tensor_array import TensorArray

__all__ = ["cond", "cond_p"]


def _branch_program(g, role):
    return program(g, role, lambda: Program(g, g.inputs, g.outputs, ((),) * len(g.inputs)))


def _cond_split(args, a):
    nt = a["n_true"]
    return args[0], args[1:1 + nt], args[1 + nt:]


def _cond_impl(pred, *caps, options=DEFAULT_OPTIONS, **a):
    _, tc, fc = _cond_split((pred,) + caps, a)
    g, c = (a["true_graph"], tc) if pred else (a["false_graph"], fc)
    e = _branch_program(g, "fwd").entry(c, options)
    r = run(e, c)
    e.ran(1)
    return r


def _cond_shape(pred, *caps, **a):
    if tuple(pred.shape) != () or dtype_of(pred) != np.bool_:
        raise TypeError(f"cond: pred must be a boolean scalar, got shape {fmt_shape(pred.shape)} dtype "
                        f"{dtype_of(pred)}")
    _, tc, fc = _cond_split((pred,) + caps, a)
    outs = []
    for g, c in ((a["true_graph"], tc), (a["false_graph"], fc)):
        got = passes.infer_shapes(own_program(g), dict(zip(g.inputs, c)))
        outs.append([got.avals[o] for o in g.outputs])
    return tuple(_merge(x, y, k) for k, (x, y) in enumerate(zip(*outs)))


def _merge(x, y, k):
    if dtype_of(x) != dtype_of(y):
        raise TypeError(f"cond: output {k} has dtype {dtype_of(x)} in true_fn and {dtype_of(y)} in false_fn")
    if len(x.shape) != len(y.shape):
        raise ShapeError(f"cond: output {k} has shape {fmt_shape(x.shape)} in true_fn and {fmt_shape(y.shape)} in "
                         f"false_fn")
    return Aval(tuple(a if a == b else None for a, b in zip(x.shape, y.shape)), dtype_of(x))


def _cond_vjp(g, ins, out, options=DEFAULT_OPTIONS, **a):
    pred, tc, fc = _cond_split(ins, a)
    # every float input gets a gradient (zeros from the branch not taken): the sums it joins expect arrays
    result = [None] + [zeros_like(x) if is_float(x) else None for x in ins[1:]]
    role = "true" if pred else "false"
    graph = a[f"{role}_graph"]
    caps = tc if pred else fc
    base = 1 if pred else 1 + a["n_true"]
    fo = tuple(k for k, o in enumerate(graph.outputs) if graph.values[o].dtype.kind in "fc")
    fi = tuple(k for k, i in enumerate(graph.inputs) if graph.values[i].dtype.kind in "fc")
    if not fo or not fi:
        return tuple(result)

    def make():
        refuse_random(graph, "cond")
        vals = graph.values
        outs = [vals[o] for o in graph.outputs]
        merged = [a["out_avals"][k] for k in fo]
        gys = [graph.append_equation(placeholder_p, (), {}, Aval(tuple(m.shape), m.dtype),
                                     name=f"gradients/{outs[k].name}/grad_y") for k, m in zip(fo, merged)]
        grads = gradients([outs[k] for k in fo], [vals[graph.inputs[k]] for k in fi], grad_ys=gys)
        slots, real = [], []
        for gr in grads:
            slots.append(None if gr is None else len(real))
            if gr is not None:
                real.append(gr.id)
        prog = Program(graph, tuple(graph.inputs) + tuple(x.id for x in gys), real,
                        ((),) * (len(graph.inputs) + len(gys)))
        prog.slots = slots
        return prog
    prog = program(graph, "vjp", make)
    gs = tuple(g[k] if g[k] is not None else zeros_like(out[k]) for k in fo)
    args = tuple(caps) + gs
    e = prog.entry(args, options)
    r = run(e, args)
    e.ran(1)
    for j, k in enumerate(fi):
        s = prog.slots[j]
        result[base + k] = r[s] if s is not None else zeros_like(caps[k])
    return tuple(result)


cond_p = StaticPrimitive("cond", _cond_impl, _cond_shape, multiple_results=True, joint_vjp=_cond_vjp,
                         retains_inputs=True, options_arg=True)


def _trace_branch(fn, outer, what):
    g = outer.subgraph()
    r = call_in(g, fn, (), what)
    leaves, struct = tree_flatten(r)
    tas = [x if isinstance(x, TensorArray) else None for x in leaves]
    vals = [leaf_value(x, g, what) for x in leaves]
    g.inputs = tuple(ph.id for _, ph in g.captures)
    g.outputs = tuple(v.id for v in vals)
    check_pure(g, what)
    return g, struct, vals, tas


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None):
    """``true_fn()`` if ``pred`` else ``false_fn()`` (TF1's ``tf.cond``): only
    the taken branch runs.

    Parameters
    ----------
    pred : boolean scalar Value
    true_fn, false_fn : callables
        Return the same structure (nested lists, tuples, dicts), with the same
        dtypes and ranks; a dimension that differs between them is unknown
        in the result.
    strict : bool
        ``False`` (TF1's default): a one-element list or tuple comes back as
        its element.
    """
    if isinstance(pred, (bool, np.bool_)):
        raise TypeError("cond: pred must not be a Python bool")
    if not isinstance(pred, Value):
        raise TypeError(f"cond: pred must be a boolean scalar graph value, got {type(pred).__name__}")
    if pred.dtype != np.bool_ or tuple(pred.shape) != ():
        raise TypeError(f"cond: pred must be a boolean scalar, got '{pred.name}' with shape {fmt_shape(pred.shape)} "
                        f"dtype {pred.dtype}")
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callables")
    outer = enclosing_graph([pred])
    tg, ts, tv, ttas = _trace_branch(true_fn, outer, "cond true_fn")
    fg, fs, fv, ftas = _trace_branch(false_fn, outer, "cond false_fn")
    if not ts.same_structure(fs, lists_as_tuples=True):
        raise ValueError(f"cond: true_fn and false_fn must return the same structure; true_fn returned "
                         f"{ts}, false_fn {fs}")
    if not tv:
        raise ValueError("cond: the branches return nothing")
    for k, (a, b, ta, fa) in enumerate(zip(tv, fv, ttas, ftas)):
        if (ta is None) != (fa is None):
            raise TypeError(f"cond: output {k} is a TensorArray in one branch and not in the other")
    out_avals = tuple(_merge(Aval(tuple(a.shape), a.dtype), Aval(tuple(b.shape), b.dtype), k)
                      for k, (a, b) in enumerate(zip(tv, fv)))
    ins = [pred] + [v for v, _ in tg.captures] + [v for v, _ in fg.captures]
    attrs = {"true_graph": tg, "false_graph": fg, "n_true": len(tg.captures), "out_avals": out_avals}
    with outer.as_default():
        res = add_op(cond_p, *ins, name=name or "cond", **attrs)
    vals = []
    for v, ta, fa in zip(res, ttas, ftas):
        if ta is not None:
            es = ta.element_shape if ta.element_shape == fa.element_shape else None
            vals.append(ta.with_flow(v, es))
        else:
            vals.append(v)
    out = ts.unflatten(vals)
    if not strict and isinstance(out, (list, tuple)) and len(out) == 1 and not hasattr(out, "_fields"):
        return out[0]
    return out
