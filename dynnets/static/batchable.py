"""The compiler side of :func:`dynnets.batchable`: a decorated function's
body traced once per signature into a plan over the stacked rows of many
instances (see :mod:`dynnets.autograd.batchable` for the rules), checked
row-wise op by op with the ops' batching rules, compiled by :class:`Session`
(the passes fuse a plain-op cell's elementwise chains into Numba kernels).

Installed into :mod:`dynnets.autograd.batchable` (``set_plan_builder``) when
:mod:`dynnets.static` is imported: the autograd layer does not import the
static one (DESIGN.md's layers), as ``engine.register_symbolic_interpreter``.
"""
from __future__ import annotations

import contextlib
import os
import traceback
import weakref

import numpy as np

from ..autograd import engine as _engine
from ..autograd.batchable import DIRECT, Fallback, NotRowwise, set_plan_builder
from ..autograd.engine import STATE as _Mode
from ..autograd.primitives import ShapeError
from ..autograd.tensor import Tensor
from .core.backward import gradients
from .graph import SOURCES, Graph, Value, constant_p, param_p, placeholder, tracing
from .session import Session

__all__ = ["BatchPlan", "build_plan"]

# fuse the elementwise chains at any size: a batch of ready calls is often a
# few rows (the top levels of a minibatch's trees)
FUSE_MIN_ROWS_SIZE = 1


class BatchPlan:
    """One traced signature: the graph, its input placeholders (the
    per-instance inputs, then one per Parameter the body reads), the
    Parameters, the output template, and the compiled sessions. The plan is
    a pure function of its inputs: a Parameter's array comes in as an input
    of the call, as autobatch recorded it.

    Gradients: the first run with gradients on builds the plan's symbolic
    gradient (:func:`~dynnets.static.backward.gradients`, the table's VJPs)
    and splits it at the forward values it reads (the *residuals*): from
    then on a forward with gradients on also fetches the residuals, kept
    beside its outputs until they are freed, and the VJP runs only the
    backward equations on them (no second forward, and the same dropout
    masks). A VJP whose forward left no residuals (a call from a static
    graph, a forward run with gradients off) runs the gradient with the
    forward recomputed from the inputs."""

    __slots__ = ("fn", "name", "graph", "phs", "params", "param_avals", "outs", "template", "out_avals",
                 "in_avals", "session", "n_inst", "cots", "grad_ids", "grad_pos", "full_session", "res_ids",
                 "res_session", "bwd_session", "bwd_feeds", "saved")

    def run(self, arrays):
        feed = dict(zip(self.phs, arrays))
        if not _Mode.grad_enabled:
            res = self.session.run(self.outs, feed)
            return tuple(np.asarray(r) for r in res)
        if self.cots is None:
            self._build_gradients()
        n = len(self.outs)
        res = self.res_session.run(self.outs + [self.graph.values[i] for i in self.res_ids], feed)
        outs = tuple(np.asarray(r) for r in res[:n])
        key = id(outs[0])
        # the residuals live as long as the first output (the tape's reference to this call)
        self.saved[key] = (weakref.ref(outs[0], lambda _, k=key, d=self.saved: d.pop(k, None)), res[n:])
        return outs

    def gradients(self, g, arrays, out):
        if self.cots is None:
            self._build_gradients()
        cots = []
        for gk, o in zip(g, out):
            cots.append(np.zeros(np.shape(o), np.asarray(o).dtype) if gk is None else
                        np.ascontiguousarray(gk, dtype=np.asarray(o).dtype))
        entry = self.saved.get(id(out[0]))
        if entry is not None and entry[0]() is out[0]:
            vals = list(arrays) + list(entry[1]) + cots
            res = self.bwd_session.run(self.bwd_feeds[1], dict(zip(self.bwd_feeds[0], vals))) \
                if self.bwd_feeds[1] else []
        else:
            if any(e.prim.random for e in self.graph.eqns):
                raise RuntimeError(f"batchable_call: {self.name}: the gradient of a plan that draws random values "
                                   f"(dropout) needs the residuals of its forward run with gradients on; this "
                                   f"forward left none (a recomputed forward would draw other values)")
            feed = dict(zip(self.phs, arrays))
            feed.update(zip(self.cots, cots))
            res = self.full_session.run([self.graph.values[i] for i in self.grad_ids], feed) \
                if self.grad_ids else []
        grads = [None] * len(arrays)
        for k, pos in self.grad_pos:
            grads[k] = res[pos]
        return tuple(grads)

    def _build_gradients(self):
        g = self.graph
        n_fwd = len(g.eqns)
        with g.as_default():
            cots = [placeholder(dtype=o.dtype, shape=tuple(o.shape), name=f"grad_out{k}")
                    for k, o in enumerate(self.outs)]
            xs = list(self.phs)
            diff = [k for k, x in enumerate(xs) if np.dtype(x.dtype).kind == "f"]
            grads = gradients(list(self.outs), [xs[k] for k in diff], grad_ys=cots)
        grad_ids, pos = [], []
        for k, gr in zip(diff, grads):
            if gr is not None:
                pos.append((k, len(grad_ids)))
                grad_ids.append(gr.id)
        # the residuals: every result of a forward equation (not an input) that a gradient equation reads
        inputs = {p.id for p in self.phs}
        made = {}
        for e in g.eqns[:n_fwd]:
            for o in e.outs:
                made[o] = e
        res = {}
        for e in g.eqns[n_fwd:]:
            for i in e.ins:
                fe = made.get(i)
                if fe is not None and fe.prim not in SOURCES:
                    for o in fe.outs:
                        res[o] = None
        for i in grad_ids:          # a gradient that is a forward value (an identity's)
            fe = made.get(i)
            if fe is not None and fe.prim not in SOURCES:
                res[i] = None
        res_ids = [i for i in res if i not in inputs]
        cot_ids = [c.id for c in cots]
        gb, phs_b, outs_b = _replay(g, [p.id for p in self.phs] + res_ids + cot_ids, grad_ids)
        opts = dict(optimize=True, fuse_min_size=FUSE_MIN_ROWS_SIZE)
        self.bwd_session = Session(gb, **opts)
        self.bwd_feeds = (phs_b, outs_b)
        self.res_ids = res_ids
        self.res_session = Session(g, **opts)
        self.full_session = Session(g, **opts)
        self.grad_ids = grad_ids
        self.grad_pos = pos
        self.saved = {}
        self.cots = cots


def _rowwise_reason(g, batched_ids, outs):
    """None when every op of graph ``g`` that reads a batched value (a value
    computed from the per-instance inputs, leading dimension = the rows)
    treats rows independently, by its batching rule; else why not."""
    batched = set(batched_ids)
    avals = g.avals
    for e in g.eqns:
        if e.prim in SOURCES:
            continue
        bin_ = [i for i, v in enumerate(e.ins) if v in batched]
        if not bin_:
            continue
        why = _eqn_reason(e, bin_, [avals[v] for v in e.ins], [avals[v] for v in e.outs])
        if why is not None:
            where = f" at {e.site[0]}:{e.site[1]}" if e.site else ""
            return f"{e.prim.name}{where} {why}"
        batched.update(e.outs)
    for o in outs:
        if o.id not in batched:
            return f"output {o.name} does not depend on the per-instance inputs"
    return None


def _lead_none(a):
    return a.shape is not None and len(a.shape) >= 1 and a.shape[0] is None


def _eqn_reason(e, bin_, ins, outs):
    prim = e.prim
    attrs = e.attrs if isinstance(e.attrs, dict) else {}
    if not all(_lead_none(a) for a in outs):
        return "gives a result that is not rows of instances"
    if prim.name == "dropout_mask":
        return None             # a mask of its input's shape: each row (instance) its own draw
    rule = prim.batch
    if rule is None:
        return "has no batching rule"
    kind = rule.kind
    if kind == "rows":
        b = rule.batched
        if callable(b):
            b = b(**attrs)
        if rule.when is not None:
            try:
                if not rule.when(*ins, **attrs):
                    return "is not row-wise here"
            except Exception:
                return "is not row-wise here"
        for i in range(len(ins)):
            if (i in b) != (i in bin_):
                return ("reads rows of instances as a shared input" if i in bin_ else
                        "has a per-instance input that does not depend on the instances")
        return None
    if kind == "elementwise":
        nd = len(outs[0].shape)
        for i, a in enumerate(ins):
            if a is None or a.shape is None:
                return "has an input of unknown rank"
            if i in bin_:
                if len(a.shape) != nd:
                    return "broadcasts rows of instances"
            elif len(a.shape) == nd and a.shape[0] != 1:
                return "has a shared operand with rows of its own"
            elif len(a.shape) > nd:
                return "broadcasts rows of instances"
        return None
    if kind == "reduce":
        nd = len(ins[0].shape)
        ax = attrs.get("axis")
        if ax is None:
            return "reduces over the rows"
        axes = ax if isinstance(ax, (tuple, list)) else (ax,)
        if any(int(a) % nd == 0 for a in axes):
            return "reduces over the rows"
        return None
    if kind == "view":
        name = prim.name
        if name == "getitem":
            idx = attrs.get("index")
            if type(idx) is tuple and len(idx) >= 2 and idx[0] == slice(None) and \
                    all(type(i) in (int, slice) or i is None for i in idx[1:]):
                return None
            return "selects rows"
        if name in ("concat", "stack"):
            ax = attrs.get("axis", 0)
            if len(bin_) == len(ins) and ax not in (0, None) and int(ax) % (len(outs[0].shape)) != 0:
                return None
            return "mixes rows of instances" if ax in (0, None) else "joins rows with shared values"
        return "mixes rows of instances"
    return "mixes rows of instances"


def _replay(g, inputs, outputs):
    """A new graph computing ``outputs`` (value ids of ``g``) from
    placeholders standing for ``inputs`` (value ids of ``g``: the
    per-instance placeholders and the Parameters' live sources), built by
    binding ``g``'s equations again: the plan then takes every Parameter's
    array as an input, so it is a pure function of its arguments (what the
    autobatch recorded, what a gradient check perturbs)."""
    g2 = Graph()
    env = {}
    with _outside_batch(), g2.as_default():
        for k, vid in enumerate(inputs):
            a = g.avals[vid]
            env[vid] = placeholder(dtype=a.dtype, shape=a.shape, name=f"in{k}")
        for e in g.eqns:
            if e.outs[0] in env:
                continue
            if e.prim is constant_p:
                env[e.outs[0]] = e.attrs["value"]
                continue
            if not e.ins:
                raise NotRowwise(f"{e.prim.name} has no inputs")
            res = _engine.bind(e.prim, *[env[i] for i in e.ins], **e.attrs)
            outs = res if e.prim.multiple_results else (res,)
            for o, r in zip(e.outs, outs):
                env[o] = r.numpy() if isinstance(r, Tensor) else r
    phs = [env[i] for i in inputs]
    outs = [env[o] for o in outputs]
    return g2, phs, outs


def _user_site(tb):
    """(file, line) of the innermost frame of ``tb`` outside the dynnets package."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    site = None
    for fr in traceback.extract_tb(tb):
        if not os.path.abspath(fr.filename).startswith(pkg):
            site = (fr.filename, fr.lineno)
    return site


@contextlib.contextmanager
def _outside_batch():
    """The autobatch context off (ops under it build the trace's graph)."""
    prev = _engine.interpreter_stack()
    _Mode.stack = tuple(i for i in prev if not getattr(i, "deferred", False))
    try:
        yield
    finally:
        _Mode.stack = prev


def _flatten(out, flat):
    if isinstance(out, Value):
        flat.append(out)
        return ("v", len(flat) - 1)
    if isinstance(out, (list, tuple)):
        return ("list" if isinstance(out, list) else "tuple", [_flatten(o, flat) for o in out])
    raise NotRowwise(f"returned a {type(out).__name__}; a batchable function returns tensors computed from its "
                      f"inputs (a tensor, or a tuple or list of them)")


def build_plan(fn, name, args, key, declared, grad_enabled):
    """Trace ``fn`` on one instance's arguments ``args`` (``key``: their
    signature, as :class:`~dynnets.autograd.batchable.Batchable` makes it)
    into a :class:`BatchPlan`, or say why such calls are recorded per op
    (a :class:`~dynnets.autograd.batchable.Fallback`). ``declared``: the
    Parameters the trace reads live (others are captured where they meet a
    traced value)."""
    rows = None
    for a in args:
        if isinstance(a, (Tensor, np.ndarray)):
            if not a.shape:
                return Fallback("a per-instance argument is 0-d (it has no rows to stack)", None)
            if rows is None:
                rows = a.shape[0]
            elif a.shape[0] != rows:
                return Fallback(f"the per-instance arguments have different numbers of rows ({rows} and "
                                f"{a.shape[0]})", None)
    g = Graph()
    phs, sym, in_avals = [], [], []
    try:
        with _outside_batch(), g.as_default():
            for i, (a, s) in enumerate(zip(args, key[1:])):
                if s[0] == "static":
                    sym.append(a)
                    continue
                shape, dt = s
                ph = placeholder(dtype=dt, shape=(None,) + tuple(shape[1:]), name=f"arg{i}")
                phs.append(ph)
                sym.append(ph)
                in_avals.append((tuple(shape[1:]), np.dtype(dt)))
            with tracing(g), _engine.capture_parameters(declared):
                out = fn(*sym)
            flat = []
            template = _flatten(out, flat)
    except NotRowwise as e:
        return Fallback(str(e), None)
    except Exception as e:      # data-dependent control flow, an op the trace cannot take...
        reason = f"{type(e).__name__}: {e}"
        if isinstance(e, (TypeError, AttributeError)) and not isinstance(e, ShapeError):
            reason = f"data-dependent Python control flow, or a read of a value, in its body ({reason})"
        return Fallback(reason, _user_site(e.__traceback__))
    if not flat:
        return Fallback("it returned no tensor", None)
    why = _rowwise_reason(g, [p.id for p in phs], flat)
    if why is not None:
        return Fallback(f"an op is not row-wise: {why}", None)
    ops_ = [e for e in g.eqns if e.prim not in SOURCES]
    if len(ops_) == 1 and {v.id for v in flat} <= set(ops_[0].outs):
        # one primitive (a library cell): recorded as it is, one record with its own batching rule,
        # without a plan around it (a plan would add a session run and residual copies per call)
        return DIRECT
    pe = [e for e in g.eqns if e.prim is param_p]
    try:
        g2, phs2, outs2 = _replay(g, [p.id for p in phs] + [e.outs[0] for e in pe], [o.id for o in flat])
    except Exception as e:
        return Fallback(f"its trace could not be rebuilt over Parameter inputs ({type(e).__name__}: {e})",
                        None)
    plan = BatchPlan()
    plan.fn = fn
    plan.name = name
    plan.graph = g2
    plan.phs = phs2
    plan.params = [e.attrs["param"] for e in pe]
    plan.param_avals = [(tuple(p.shape), np.dtype(p.dtype)) for p in plan.params]
    plan.outs = outs2
    plan.template = template
    plan.out_avals = [(tuple(v.shape[1:]), np.dtype(v.dtype)) for v in flat]
    plan.in_avals = in_avals
    plan.n_inst = len(phs)
    plan.session = Session(g2, optimize=True, fuse_min_size=FUSE_MIN_ROWS_SIZE)
    plan.cots = None
    return plan


set_plan_builder(build_plan)
