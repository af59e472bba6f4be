"""``@dn.batchable``: function-level recording for :func:`dynnets.autobatch`.

::

    @dn.batchable
    def node(h_l, c_l, h_r, c_r):                  # plain ops, one tree node
        z = dn.cat([h_l, h_r], 1) @ U + b
        i, f_l, f_r, o, u = (z[:, k * H:(k + 1) * H] for k in range(5))
        c = i.sigmoid() * u.tanh() + f_l.sigmoid() * c_l + f_r.sigmoid() * c_r
        return o.sigmoid() * c.tanh(), c

    with dn.autobatch():
        h, c = node(h_l, c_l, h_r, c_r)            # one lazy record, not ~15

Outside :func:`~dynnets.autobatch` (and on symbolic values: a static graph, a
trace) a call runs the function as written. Inside, a call records *one*
application of the primitive ``batchable_call`` (defined here, beside the
decorator, as ``custom_function`` is beside ``Function``): the autobatch
scheduler sees one record per call and runs every ready call of one
signature as one call.

The per-signature plan
----------------------
A *signature* is the function, grad mode, and for each argument its shape and
dtype (a Tensor, lazy or not, or an ndarray: a *per-instance* argument) or
its value (any other hashable argument: static, as ``static.trace`` takes
them; a Module argument by identity, its Parameters read live). On the first
call of a signature the body is traced once (:mod:`dynnets.static.graph`)
on placeholders whose leading dimension is unknown: every per-instance
argument is one instance's rows, and the plan runs on the rows of many
instances stacked along axis 0. It is compiled by
:class:`~dynnets.static.session.Session` (``passes.optimize``: the
elementwise chains of a plain-op cell fuse into generated Numba kernels).
Parameters are captured as :func:`dynnets.static.trace` captures them (graph
inputs bound to the live arrays): an optimizer step, or replacing a
Parameter's array by one of the same shape, is seen without re-tracing.

That one plan equals the per-instance computations only when every op of the
body treats the rows independently. The trace is checked op by op with the
ops' own batching rules (``defprim(batch=...)``): a row-wise product, an
elementwise op of rows with broadcast weights, a column slice, a concat
along axis 1, a reduction that keeps axis 0 qualify; a sum over the rows, a
reshape, a concat along axis 0 do not. All per-instance arguments must have
the same number of rows (usually one).

The primitive ``batchable_call(*per_instance, *params, plan=)``: impl runs
the plan on the stacked rows; its shape rule gives the outputs' avals (the
rows of the inputs, the plan's trailing shapes); its joint VJP runs the
plan's symbolic gradient (:func:`~dynnets.static.backward.sparse_gradients`,
compiled once, on its first backward; it recomputes the forward from the
inputs, as a ``while_loop``'s gradient does); its batching rule stacks the
per-instance inputs and shares the Parameters (``batch_rows`` with the
per-instance positions taken from the plan).

When a call cannot be one record
--------------------------------
Data-dependent Python control flow in the body (``if x.sum() > 0``,
``.item()``, ``float(x)``: a symbolic value has no value), an op that mixes
rows, a per-instance argument without rows, or a random op (dropout) in a
body that needs gradients (a recomputing gradient would draw another mask)
make the signature fall back to per-op recording: the body runs as written
under the autobatch context (every op recorded lazily, each dropout drawing
its own mask per instance), with a one-time :class:`BatchableFallback`
warning per function and reason. With ``@dn.batchable(strict=True)`` such a
call raises :class:`BatchableError` naming the function, the file and line,
and the reason. ``fn.traces`` counts traces, ``fn.fallbacks`` the calls that
fell back, ``fn.records`` the one-record calls.
"""
from __future__ import annotations

import contextlib
import functools
import os
import traceback
import warnings

import numpy as np

from . import engine as _engine
from .engine import STATE as _Mode
from .primitives.core import Aval, BatchRule, ShapeError, defprim, dtype_of, fmt_shape
from .tensor import Tensor

__all__ = ["batchable", "Batchable", "BatchableError", "BatchableFallback", "batchable_call_p"]


class BatchableError(RuntimeError):
    """A ``@dn.batchable(strict=True)`` call that cannot be recorded as one call."""


class BatchableFallback(UserWarning):
    """A ``@dn.batchable`` call recorded per op (see :mod:`dynnets.autograd.batchable`)."""


# --------------------------------------------------------------------------
# the primitive: one application per decorated call
# --------------------------------------------------------------------------

class _Plan:
    """One traced signature: the graph, its input placeholders, the
    Parameters it reads (graph inputs bound to the live arrays), the output
    template, and the compiled forward and (on first use) gradient sessions."""

    __slots__ = ("fn", "name", "graph", "phs", "params", "param_values", "outs", "template", "out_avals",
                 "in_avals", "session", "grad_session", "grad_fetch", "grad_pos", "cots", "n_inst")

    def run(self, arrays):
        feed = dict(zip(self.phs, arrays[:self.n_inst]))
        _check_live(self, arrays)
        res = self.session.run(self.outs, feed)
        return tuple(np.asarray(r) for r in res)

    def gradients(self, g, arrays, out):
        if self.grad_session is None:
            self._build_gradients()
        _check_live(self, arrays)
        feed = dict(zip(self.phs, arrays[:self.n_inst]))
        for c, gk, o in zip(self.cots, g, out):
            feed[c] = np.zeros(np.shape(o), np.asarray(o).dtype) if gk is None else \
                np.ascontiguousarray(gk, dtype=np.asarray(o).dtype)
        res = self.session_grad_run(feed)
        grads = [None] * len(arrays)
        for k, pos in self.grad_pos:
            grads[k] = res[pos]
        return tuple(grads)

    def session_grad_run(self, feed):
        if not self.grad_fetch:
            return []
        return self.grad_session.run(self.grad_fetch, feed)

    def _build_gradients(self):
        from ..static.backward import gradients
        from ..static.graph import placeholder
        from ..static.session import Session
        g = self.graph
        with g.as_default():
            self.cots = [placeholder(dtype=o.dtype, shape=tuple(o.shape), name=f"grad_out{k}")
                         for k, o in enumerate(self.outs)]
            xs = list(self.phs) + list(self.param_values)
            diff = [k for k, x in enumerate(xs) if np.dtype(x.dtype).kind == "f"]
            grads = gradients(list(self.outs), [xs[k] for k in diff], grad_ys=self.cots)
        fetch, pos = [], []
        for k, gr in zip(diff, grads):
            if gr is not None:
                pos.append((k, len(fetch)))
                fetch.append(gr)
        self.grad_fetch = fetch
        self.grad_pos = pos
        self.grad_session = Session(g, optimize=True)


def _check_live(plan, arrays):
    # the plan reads each Parameter's live array; autobatch passes the array
    # the Parameter held when the call was recorded (it forces pending calls
    # before a Parameter's array is replaced), so the two are one object
    for p, a in zip(plan.params, arrays[plan.n_inst:]):
        if p.numpy() is not a:
            raise RuntimeError(f"batchable_call: {plan.name}: Parameter {p.name or ''} of shape "
                               f"{fmt_shape(p.shape)} holds another array than the one this call was recorded "
                               f"with (it was replaced between the forward and this run)")


def _impl(*arrays, plan):
    return plan.run(arrays)


def _shape(*avals, plan):
    n = plan.n_inst
    if len(avals) != n + len(plan.params):
        raise ShapeError(f"batchable_call: {plan.name} takes {n} per-instance inputs and {len(plan.params)} "
                         f"Parameters, got {len(avals)} inputs")
    rows = None
    for k in range(n):
        a = avals[k]
        shp = a.shape
        want_trail, want_dt = plan.in_avals[k]
        if shp is None or len(shp) != len(want_trail) + 1 or tuple(shp[1:]) != want_trail:
            raise ShapeError(f"batchable_call: {plan.name}: input {k} should be of shape "
                             f"{fmt_shape((None,) + want_trail)} (rows of instances), got "
                             f"{fmt_shape(shp)}")
        if dtype_of(a) != want_dt:
            raise ShapeError(f"batchable_call: {plan.name}: input {k} should be of dtype {want_dt}, got "
                             f"{dtype_of(a)}")
        r = shp[0]
        if r is not None:
            if rows is not None and r != rows:
                raise ShapeError(f"batchable_call: {plan.name}: input {k} has {r} rows, input 0 {rows}: every "
                                 f"per-instance input has the instances' rows")
            rows = r
    for p, a in zip(plan.params, avals[n:]):
        if a.shape is not None and tuple(a.shape) != tuple(p.shape):
            raise ShapeError(f"batchable_call: {plan.name}: Parameter of shape {fmt_shape(p.shape)} was given "
                             f"an array of shape {fmt_shape(a.shape)}")
    return tuple(Aval((rows,) + trail, dt) for trail, dt in plan.out_avals)


def _joint_vjp(g, inputs, out, plan):
    return plan.gradients(g, inputs, out)


def _attr_key(plan):
    return plan


def _per_instance(plan):
    return tuple(range(plan.n_inst))


batchable_call_p = defprim("batchable_call", _impl, _shape, joint_vjp=_joint_vjp, multiple_results=True,
                           attr_key=_attr_key, batch=BatchRule("rows", _per_instance))


# --------------------------------------------------------------------------
# tracing and the row-wise check
# --------------------------------------------------------------------------

class _NotRowwise(Exception):
    pass


def _rowwise_reason(g, batched_ids, outs):
    """None when every op of graph ``g`` that reads a batched value (a value
    computed from the per-instance inputs, leading dimension = the rows)
    treats rows independently, by its batching rule; else why not."""
    from ..static.graph import SOURCES
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
    prev = _Mode.batch
    _Mode.batch = None
    try:
        yield
    finally:
        _Mode.batch = prev


class _Fallback:
    """A signature recorded per op, and why."""
    __slots__ = ("reason", "site")

    def __init__(self, reason, site):
        self.reason = reason
        self.site = site


def _flatten(out, flat):
    from ..static.graph import Value
    if isinstance(out, Value):
        flat.append(out)
        return ("v", len(flat) - 1)
    if isinstance(out, (list, tuple)):
        return ("list" if isinstance(out, list) else "tuple", [_flatten(o, flat) for o in out])
    raise _NotRowwise(f"returned a {type(out).__name__}; a batchable function returns tensors computed from its "
                      f"inputs (a tensor, or a tuple or list of them)")


def _rebuild(t, res):
    if t[0] == "v":
        return res[t[1]]
    items = [_rebuild(s, res) for s in t[1]]
    return items if t[0] == "list" else tuple(items)


_STATIC_OK = (int, float, bool, str, bytes, type(None), tuple, frozenset)


class Batchable:
    """A function decorated with :func:`batchable` (see the module docstring).

    Attributes
    ----------
    traces : int
        Signatures traced (one per new signature).
    records : int
        Calls recorded as one ``batchable_call`` application.
    fallbacks : int
        Calls inside ``dn.autobatch()`` recorded per op.
    """

    def __init__(self, fn, strict=False, params=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.strict = bool(strict)
        self.extra_params = list(params.parameters() if hasattr(params, "parameters") else params or ())
        self.traces = 0
        self.records = 0
        self.fallbacks = 0
        self._plans = {}
        self._warned = set()

    def __get__(self, obj, objtype=None):
        # a decorated method: bind it as a plain function would be
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __repr__(self):
        return f"<batchable {self.__name__}: {self.traces} traces, {self.records} records, {self.fallbacks} per op>"

    @property
    def signatures(self):
        """The traced signatures (fallbacks included)."""
        return list(self._plans)

    def __call__(self, *args, **kwargs):
        ab = _Mode.batch
        if ab is None or kwargs:
            return self.fn(*args, **kwargs)
        key = [self.fn, _Mode.grad_enabled]
        inst = []
        for a in args:
            if isinstance(a, Tensor):
                if getattr(a, "_is_symbolic", False):
                    return self.fn(*args)
                inst.append(a)
                key.append((tuple(a.shape), np.dtype(a.dtype)))
            elif type(a) is np.ndarray:
                inst.append(a)
                key.append((a.shape, a.dtype))
            elif isinstance(a, _STATIC_OK) or (not isinstance(a, (list, dict, set)) and _hashable(a)):
                key.append(("static", a))
            else:
                return self._fallback(args, "an argument is neither a tensor nor hashable "
                                            f"({type(a).__name__})", None)
        key = tuple(key)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._trace(args, key)
        if type(plan) is _Fallback:
            return self._fallback(args, plan.reason, plan.site)
        self.records += 1
        res = _engine.bind(batchable_call_p, *inst, *plan.params, plan=plan)
        return _rebuild(plan.template, res)

    def _fallback(self, args, reason, site):
        where = f" ({site[0]}:{site[1]})" if site else ""
        if self.strict:
            raise BatchableError(f"batchable: {self.__qualname__}{where} cannot be recorded as one call: {reason}")
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"batchable: {self.__qualname__}{where} is recorded op by op: {reason}",
                          BatchableFallback, stacklevel=3)
        self.fallbacks += 1
        return self.fn(*args)

    def _declared(self, args):
        ps = list(self.extra_params)
        for a in args:
            if not isinstance(a, Tensor) and hasattr(a, "parameters") and callable(a.parameters):
                ps.extend(a.parameters())
        return ps

    def _trace(self, args, key):
        from ..static.graph import Graph, placeholder, param_p, tracing
        from ..static.session import Session
        rows = None
        for a in args:
            if isinstance(a, (Tensor, np.ndarray)):
                if not a.shape:
                    return _Fallback("a per-instance argument is 0-d (it has no rows to stack)", None)
                if rows is None:
                    rows = a.shape[0]
                elif a.shape[0] != rows:
                    return _Fallback(f"the per-instance arguments have different numbers of rows ({rows} and "
                                     f"{a.shape[0]})", None)
        g = Graph()
        phs, sym, in_avals = [], [], []
        self.traces += 1
        try:
            with _outside_batch(), g.as_default():
                for i, (a, s) in enumerate(zip(args, key[2:])):
                    if s[0] == "static":
                        sym.append(a)
                        continue
                    shape, dt = s
                    ph = placeholder(dtype=dt, shape=(None,) + tuple(shape[1:]), name=f"arg{i}")
                    phs.append(ph)
                    sym.append(ph)
                    in_avals.append((tuple(shape[1:]), np.dtype(dt)))
                with tracing(g), _engine.capture_parameters(self._declared(args)):
                    out = self.fn(*sym)
                flat = []
                template = _flatten(out, flat)
        except _NotRowwise as e:
            return _Fallback(str(e), None)
        except Exception as e:      # data-dependent control flow, an op the trace cannot take...
            reason = f"{type(e).__name__}: {e}"
            if isinstance(e, (TypeError, AttributeError)):
                reason = f"data-dependent Python control flow, or a read of a value, in its body ({reason})"
            return _Fallback(reason, _user_site(e.__traceback__))
        if not flat:
            return _Fallback("it returned no tensor", None)
        why = _rowwise_reason(g, [p.id for p in phs], flat)
        if why is not None:
            return _Fallback(f"an op is not row-wise: {why}", None)
        if _Mode.grad_enabled:
            for e in g.eqns:
                if e.prim.random:
                    site = e.site
                    return _Fallback(f"it draws random values ({e.prim.name}) and its gradient would "
                                     f"recompute them", site)
        plan = _Plan()
        plan.fn = self.fn
        plan.name = self.__qualname__
        plan.graph = g
        plan.phs = phs
        pe = [e for e in g.eqns if e.prim is param_p]
        plan.params = [e.attrs["param"] for e in pe]
        plan.param_values = [g.values[e.outs[0]] for e in pe]
        plan.outs = flat
        plan.template = template
        plan.out_avals = [(tuple(v.shape[1:]), np.dtype(v.dtype)) for v in flat]
        plan.in_avals = in_avals
        plan.n_inst = len(phs)
        plan.session = Session(g, optimize=True)
        plan.grad_session = None
        plan.grad_fetch = None
        plan.grad_pos = None
        plan.cots = None
        return plan


def _hashable(x):
    try:
        hash(x)
    except TypeError:
        return False
    return True


def batchable(fn=None, *, strict=False, params=None):
    """Decorate a per-instance function (a tree node, an RNN step, a cell) so
    that each call inside :func:`dynnets.autobatch` records one lazy call,
    run batched with the other ready calls of its signature by one traced,
    compiled plan (see :mod:`dynnets.autograd.batchable`).

    Parameters
    ----------
    fn : callable
        Takes per-instance tensors, each of shape (rows, ...) with the same
        rows (usually 1), and static Python values (hashable: ints, strings,
        a Module); returns a tensor or a tuple/list of tensors of the same rows.
    strict : bool
        Raise :class:`BatchableError` (naming the function, file and line)
        instead of recording a call per op with a warning.
    params : Module or iterable of Parameters, optional
        Parameters the body reads (closed over) that are not otherwise seen
        by the trace; Module arguments, and Parameters meeting a traced value
        in an op, are captured without this.
    """
    if fn is None:
        return lambda f: Batchable(f, strict, params)
    return Batchable(fn, strict, params)
