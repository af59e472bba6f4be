"""``Session``: compiles a plan per (fetches, fed placeholders, fed shapes and
dtypes) and runs it.

The first ``run`` with a new key validates the feeds, runs the passes of
:mod:`dynnets.static.passes` and lowers the result to a flat list of
instructions over slots. Execution is tiered, as in a JIT: the first runs use
a loop over one small closure per instruction (cheap to build, so adding an
op to a graph and running it once costs well under a millisecond); from the
``jit_after``-th run on (default 2) the plan is one generated straight-line
Python function: one line per equation, functions, constants and buffers bound
as globals, the table's VJPs called directly. A run with a known key then
costs a tuple build, one dict lookup and that function call.

Because the graph is append-only SSA, adding nodes never invalidates a plan:
old keys keep their plans and a new fetch gets a new one.

Semantics of a run: effects (variable updates, initialisers) run after every
pure computation that does not depend on an effect, so everything a run
computes or fetches sees the variables as they were when the run started;
fetched arrays are the caller's (never a variable's storage or a reused
buffer).
"""
from __future__ import annotations

import contextlib
import gc
import time

import numpy as np

from ..autograd import gradtypes
from ..autograd.primitives import Aval, ShapeError, fmt_shape, make_rng
from . import passes as _passes
from .graph import (_SESSIONS, FeedError, GraphError, Operation, UninitializedVariableError, Value, _site_str,
                    constant_p,
                    effect_variables, get_default_graph, op_error, param_p, placeholder_p, variable_p,
                    variables_initializer)

__all__ = ["Session", "InteractiveSession"]

_ndarray = np.ndarray
_asarray = np.asarray
_perf = time.perf_counter


_dense = gradtypes.densify
_dense_all = gradtypes.densify_all


def _cp(x):
    return x.copy() if type(x) is _ndarray else x


def _bad_param(p, shape, dtype):
    d = p.data
    raise ShapeError(f"Session.run: live parameter '{p.name or 'param'}' has shape {fmt_shape(d.shape)} and dtype "
                     f"{d.dtype}; the graph was traced for shape {fmt_shape(shape)} and dtype {dtype} (trace again "
                     f"after changing a parameter's shape)")


_cast = gradtypes.cast


def _cast_all(r, dts):
    return tuple(_cast(x, dt) for x, dt in zip(r, dts))


def _grad_casts(g, e):
    """Declared dtypes to cast a VJP equation's results to, or None where its
    float inputs and results all have one dtype and no Python scalar takes
    part (nothing can promote; integer and boolean inputs are indices and
    masks, None constants stand for absent output gradients)."""
    dts = [g.avals[o].dtype for o in e.outs]
    ins = [g.avals[i].dtype for i in e.ins]
    floats = [d for d in dts + ins if not (isinstance(d, np.dtype) and d.kind in "biuO")]
    if floats and all(isinstance(d, np.dtype) and d == floats[0] for d in floats):
        return None
    out = tuple(d if isinstance(d, np.dtype) else None for d in dts)
    return out if len(e.outs) > 1 or e.prim.multiple_results else out[0]


def _struct_key(f):
    if isinstance(f, (Value, str)):
        return f
    tp = type(f)
    if tp is list or tp is tuple:
        return (tp,) + tuple(_struct_key(x) for x in f)
    if isinstance(f, dict):
        return (dict,) + tuple((k, _struct_key(v)) for k, v in f.items())
    raise TypeError(f"Session.run: cannot fetch {type(f).__name__} {f!r}: fetches must be graph values "
                    f"(or lists, tuples and dicts of them)")


class Plan:
    """A compiled plan and its statistics."""

    __slots__ = ("fn", "key", "runs", "total", "compile_time", "nodes_graph", "nodes_pruned", "nodes_after",
                 "fetch_names", "feed_names", "filename", "line_ins", "variables", "source", "n_fused",
                 "n_buffers", "pass_times", "instrs", "consts", "arg_slots", "n_slots", "ret", "tier",
                 "codegen_time", "releases")

    def stats(self):
        return {
            "fetches": self.fetch_names,
            "feeds": self.feed_names,
            "compile_ms": self.compile_time * 1e3,
            "codegen_ms": self.codegen_time * 1e3,
            "tier": self.tier,
            "pass_ms": {k: v * 1e3 for k, v in self.pass_times.items()},
            "nodes_graph": self.nodes_graph,
            "nodes_before": self.nodes_pruned,
            "nodes_after": self.nodes_after,
            "fused_kernels": self.n_fused,
            "buffers": self.n_buffers,
            "runs": self.runs,
            "mean_run_us": (self.total / self.runs * 1e6) if self.runs else None,
        }


class Session:
    """Runs a :class:`Graph` (as TF1's ``tf.Session``).

    Parameters
    ----------
    graph : Graph, optional
        Defaults to the default graph.
    optimize : bool
        Run constant folding, CSE, fusion and the memory plan (``False``
        runs the pruned graph as written: the baseline the tests compare with).
    fuse_min_size, memory_min_size : int or None
        Array sizes from which elementwise fusion and ``out=`` buffers are
        used (see :mod:`dynnets.static.passes` for the measurements); None
        turns the pass off.
    jit_after : int
        Runs of a plan on the tier-1 executor before it is replaced by
        generated code.
    keep_sparse : bool
        Fetch row-sparse gradients as :class:`RowSparse` (as eager ``._grad``
        holds them) instead of dense arrays.
    """

    def __init__(self, graph=None, optimize=True, fuse_min_size=_passes.FUSE_MIN_SIZE,
                 memory_min_size=_passes.MEMORY_MIN_SIZE, jit_after=2, keep_sparse=False):
        self.graph = graph if graph is not None else get_default_graph()
        self.optimize = optimize
        self.fuse_min_size = fuse_min_size
        self.memory_min_size = memory_min_size
        self._storage = {}
        self._plans = {}
        self._plan_list = []
        self._closed = False
        self._init_op = None
        self._init_count = -1
        self._raw_sparse = bool(keep_sparse)
        self.jit_after = jit_after
        self._rngs = {}

    # --- running ------------------------------------------------------------------
    def run(self, fetches, feed_dict=None):
        """Evaluate ``fetches`` (a Value, an Operation, or a nested list,
        tuple or dict of them), feeding ``feed_dict`` {placeholder: array}.
        Returns numpy arrays in the structure of ``fetches`` (``None`` for an
        Operation; a 0-d result may be a numpy scalar, as in TF1)."""
        if self._closed:
            raise RuntimeError("Session.run: the session is closed")
        tp = type(fetches)
        if tp is list or tp is tuple:
            fkey = (tp, *fetches)
        elif tp is dict:
            fkey = _struct_key(fetches)
        else:
            fkey = fetches
        if feed_dict:
            vals = []
            key = [fkey]
            for k, v in feed_dict.items():
                if type(v) is not _ndarray:
                    v = _asarray(v)
                vals.append(v)
                key += (k, v.shape, v.dtype)
            key = tuple(key)
        else:
            key = fkey
            vals = ()
        try:
            plan = self._plans.get(key)
        except TypeError:
            fkey = _struct_key(fetches)
            key = (fkey,) + key[1:] if feed_dict else fkey
            plan = self._plans.get(key)
        if plan is None:
            plan = self._compile(key, fetches, feed_dict, vals)
        t0 = _perf()
        try:
            out = plan.fn(*vals)
        except Exception as exc:
            raise self._explain(plan, exc) from exc
        plan.total += _perf() - t0
        plan.runs += 1
        if plan.tier == 1 and plan.runs >= self.jit_after:
            self._tier2(plan)
        return out

    def close(self):
        """Free the variables' values and the compiled plans."""
        self._closed = True
        self._plans.clear()
        self._storage.clear()
        self._rngs.clear()

    @contextlib.contextmanager
    def as_default(self):
        """Make this the default session inside the ``with`` block, for
        ``Value.eval()`` and ``Operation.run()`` (it stays open after it)."""
        _SESSIONS.append(self)
        try:
            yield self
        finally:
            _SESSIONS.remove(self)

    def __enter__(self):
        # as TF1: inside ``with Session() as sess`` the session is the default
        # session and its graph the default graph
        self._entered = (self.graph.as_default(), self.as_default())
        for c in self._entered:
            c.__enter__()
        return self

    def __exit__(self, *exc):
        for c in reversed(getattr(self, "_entered", ())):
            c.__exit__(None, None, None)
        self._entered = ()
        self.close()
        return False

    def global_variables_initializer(self):
        """Initialise every variable of the graph in this session (the same as
        ``run(global_variables_initializer())``)."""
        n = len(self.graph.variables)
        if self._init_op is None or self._init_count != n:
            with self.graph.as_default():
                self._init_op = variables_initializer(self.graph.variables)
            self._init_count = n
        self.run(self._init_op)

    def _rng(self, e):
        """The generator of random equation ``e`` in this session: one stream
        per op (keyed by its value id, the same in every plan), seeded by its
        ``seed`` attribute, so a new session repeats the same draws (as TF1)."""
        r = self._rngs.get(e.outs[0])
        if r is None:
            r = self._rngs[e.outs[0]] = make_rng(e.attrs["seed"])
        return r

    def _load_variable(self, var, value):
        if var.graph is not self.graph:
            raise GraphError(f"load: variable '{var.name}' belongs to another graph than this session's")
        arr = np.asarray(value.data if hasattr(value, "data") and not isinstance(value, np.ndarray) else value)
        want = var.initial_value
        if arr.shape != want.shape:
            raise ValueError(f"load: variable '{var.name}' has shape {want.shape}, given {arr.shape}")
        cur = self._storage.get(var.index)
        if cur is None:
            self._storage[var.index] = np.array(arr, dtype=want.dtype, copy=True)
        else:
            cur[...] = arr

    def variable_value(self, var):
        """A copy of ``var``'s value in this session."""
        cur = self._storage.get(var.index) if var.graph is self.graph else None
        if cur is None:
            raise UninitializedVariableError(f"variable '{var.name}' is not initialised in this session")
        return cur.copy()

    @property
    def stats(self):
        """One dict per compiled plan: fetches, feeds, compile_ms (and per
        pass), nodes in the graph / needed by the fetches (before the passes) /
        after the passes, fused kernels, buffers, runs, mean_run_us."""
        return [p.stats() for p in self._plan_list]

    # --- compiling ---------------------------------------------------------------
    def _compile(self, key, fetches, feed_dict, vals):
        with _no_gc():
            return self._compile_nogc(key, fetches, feed_dict, vals)

    def _compile_nogc(self, key, fetches, feed_dict, vals):
        t0 = _perf()
        g = self.graph
        flat = []
        template = self._template(fetches, flat)
        feed_ids = []
        input_avals = {}
        casts = {}
        if feed_dict:
            for (k, _), v in zip(feed_dict.items(), vals):
                if isinstance(k, str):
                    k = g._element(k, "feed")
                if not isinstance(k, Value):
                    raise GraphError(f"Session.run: feed_dict key {k!r} is not a graph value; only placeholders "
                                     f"can be fed")
                if k.graph is not g:
                    raise GraphError(f"Session.run: cannot feed '{k.name}': it belongs to another graph than "
                                     f"this session's")
                e = g.producer[k.id]
                if e.prim is not placeholder_p:
                    raise GraphError(f"Session.run: cannot feed '{k.name}': it is a {e.prim.name} op, not a "
                                     f"placeholder (only placeholders can be fed)")
                decl = g.avals[k.id]
                shp = tuple(decl.shape)
                if len(v.shape) != len(shp) or any(d is not None and d != s for d, s in zip(shp, v.shape)):
                    raise FeedError(f"Session.run: placeholder '{k.name}' expects shape {fmt_shape(shp)}, given a "
                                    f"value of shape {fmt_shape(v.shape)}")
                dt = decl.dtype
                if v.dtype != dt:
                    if v.dtype.kind in "biuf" and np.can_cast(v.dtype, dt, "same_kind"):
                        casts[k.id] = dt
                    else:
                        raise FeedError(f"Session.run: placeholder '{k.name}' expects dtype {dt}, given a value "
                                        f"of dtype {v.dtype}")
                if k.id in input_avals:
                    raise FeedError(f"Session.run: placeholder '{k.name}' is fed twice (by the value and by its name)")
                feed_ids.append(k.id)
                input_avals[k.id] = Aval(tuple(v.shape), dt)
        prog = g.with_outputs([v.id for v in flat])
        timings = {}
        t = _perf()
        pruned = _passes.prune(prog)
        timings["prune"] = _perf() - t
        fed = set(feed_ids)
        missing = [g.values[e.outs[0]] for e in pruned.eqns if e.prim is placeholder_p and e.outs[0] not in fed]
        if missing:
            m = missing[0]
            raise FeedError(f"Session.run: placeholder '{m.name}' (shape {fmt_shape(m.shape)}, dtype {m.dtype}) must "
                            f"be fed: the fetches need it" + (f" (also unfed: {[x.name for x in missing[1:]]})"
                                                              if len(missing) > 1 else ""))
        opt = self._optimize(pruned, input_avals, timings)
        plan = self._codegen(opt, flat, template, feed_dict, feed_ids, casts, vals)
        plan.key = key
        plan.compile_time = _perf() - t0
        plan.pass_times = timings
        plan.nodes_graph = len(g.eqns)
        plan.nodes_pruned = len(pruned.eqns)
        plan.nodes_after = len(opt.eqns)
        plan.fetch_names = [v.name for v in flat]
        plan.feed_names = [g.values[i].name for i in feed_ids]
        self._plans[key] = plan
        self._plan_list.append(plan)
        return plan

    def _template(self, f, flat):
        if isinstance(f, str):
            f = self.graph._element(f, "fetch")
        if isinstance(f, Value):
            if f.graph is not self.graph:
                raise GraphError(f"Session.run: cannot fetch '{f.name}': it belongs to another graph than this "
                                 f"session's")
            flat.append(f)
            return len(flat) - 1
        tp = type(f)
        if tp is list or tp is tuple:
            return (tp, [self._template(x, flat) for x in f])
        if isinstance(f, dict):
            return (dict, [(k, self._template(v, flat)) for k, v in f.items()])
        raise TypeError(f"Session.run: cannot fetch {type(f).__name__} {f!r}: fetches must be graph values "
                        f"(or lists, tuples and dicts of them)")

    def _optimize(self, g, input_avals, timings):
        P = _passes
        t = _perf()
        g = P.infer_shapes(g, input_avals)
        timings["infer_shapes"] = _perf() - t
        steps = []
        if self.optimize:
            steps += [("fold_constants", P.fold_constants), ("cse", P.cse),
                      ("eliminate_dead_code", P.eliminate_dead_code)]
        steps.append(("schedule", P.schedule))
        if self.optimize and self._has_big(g):
            if self.fuse_min_size is not None:
                steps.append(("fuse_elementwise", lambda x: P.fuse_elementwise(x, self.fuse_min_size)))
            if self.memory_min_size is not None:
                steps.append(("plan_memory", lambda x: P.plan_memory(x, self.memory_min_size)))
        for name, fn in steps:
            t = _perf()
            g = fn(g)
            timings[name] = _perf() - t
        if not hasattr(g, "meta"):
            g.meta = {"buffers": {}, "copy_outputs": set()}
        return g

    def _has_big(self, g):
        """Whether any array is large enough for fusion or buffers to pay
        (skipping both passes keeps compiling a small graph cheap)."""
        lim = min(x for x in (self.fuse_min_size, self.memory_min_size) if x is not None) \
            if (self.fuse_min_size is not None or self.memory_min_size is not None) else None
        if lim is None:
            return False
        av = g.avals
        for e in g.eqns:
            a = av[e.outs[0]]
            n = 1
            for d in a.shape:
                if d is None:
                    n = lim
                    break
                n *= d
            if n >= lim:
                return True
        return False

    # --- code generation ----------------------------------------------------------
    def _codegen(self, g, flat, template, feed_dict, feed_ids, casts, vals):
        """Lower the optimised graph to a list of instructions over slots, and
        the tier-1 executor over them (a loop of small closures: cheap to
        build). After ``jit_after`` runs :meth:`_tier2` replaces it with
        generated straight-line code (fast to run, ~0.1 ms to compile)."""
        slot = {}
        consts = {}
        instrs = []
        buffers = {}
        counter = [0]

        def new_slot(o):
            slot[o] = counter[0]
            counter[0] += 1
            return slot[o]

        # every fed placeholder takes an argument position, used or not
        arg_slots = [new_slot(pid) for pid in feed_ids]

        for pid in feed_ids:
            if pid in casts:
                instrs.append(_Ins("cast", (slot[pid],), casts[pid], (slot[pid],), None, None, None))

        # which variables an effect of this plan writes, and which values run after an effect
        written = set()
        tainted = set()
        for e in g.eqns:
            if getattr(e.prim, "effect", False):
                written.update(v.index for v in effect_variables(e))
                written.update(v.index for v in e.attrs.get("vars", ()))
                tainted.update(e.outs)
            elif any(i in tainted for i in e.ins):
                tainted.update(e.outs)
        read_late = set()
        for e in g.eqns:
            if e.outs[0] in tainted:
                read_late.update(e.ins)
        shared = set()            # may share memory with a variable, a live parameter or a buffer
        out_set = set(g.outputs)
        copy_outputs = g.meta.get("copy_outputs", set())
        variables = []
        root_vals = g.values
        for e in g.eqns:
            p = e.prim
            o = e.outs[0]
            if p is placeholder_p:
                continue
            if p is constant_p:
                cs = new_slot(o)
                consts[cs] = e.attrs["value"]
                # constants are read-only, so only a constant fetched as it is gets copied (to be writable)
                if o in out_set:
                    instrs.append(_Ins("copy", (new_slot(o),), None, (cs,), None, e, None))
                continue
            elif p is variable_p:
                var = e.attrs["var"]
                variables.append(var)
                snap = var.index in written and o in read_late
                instrs.append(_Ins("var", (new_slot(o),), None, (), None, e, (var.index, snap)))
                if not snap:
                    shared.add(o)
            elif p is param_p:
                decl = g.avals[o]
                instrs.append(_Ins("param", (new_slot(o),), None, (), None, e,
                                   (e.attrs["param"], tuple(decl.shape), np.dtype(decl.dtype))))
                shared.add(o)
            else:
                args = tuple(slot[i] for i in e.ins)
                outs = tuple(new_slot(x) for x in e.outs)
                info = getattr(p, "vjp_call", None)
                if getattr(p, "effect", False):
                    variables.extend(effect_variables(e))
                    instrs.append(_Ins("effect", outs, p.impl, args, e.attrs or None, e, None))
                    shared.update(e.outs)
                elif info is not None:
                    fn, fwd_multi, joint, densify = info
                    n_in = e.attrs["_n_in"]
                    rest = {a: b for a, b in e.attrs.items() if a != "_n_in"}
                    n_out = (len(args) - n_in) // 2 if fwd_multi else 1
                    instrs.append(_Ins("vjp", outs, fn, args, rest or None, e,
                                       (fwd_multi, n_out, n_in, densify, _grad_casts(g, e))))
                else:
                    buf = None
                    if e.buf is not None:
                        buf = buffers.get(e.buf)
                        if buf is None:
                            shp, dt = g.meta["buffers"][e.buf]
                            buf = buffers[e.buf] = np.empty(shp, dt)
                    kw = e.attrs or None
                    if p.random:
                        kw = {**e.attrs, "rng": self._rng(e)}
                    instrs.append(_Ins("call", outs, p.impl, args, kw, e, buf))
                if not getattr(p, "effect", False) and not _fresh(p) and any(i in shared for i in e.ins):
                    shared.update(e.outs)
            # fetched values are the caller's: copy them out of shared storage right away, so
            # a later update in this run (or a later run) cannot change them
            for x in e.outs:
                if x in out_set and (x in shared or x in copy_outputs) and not isinstance(root_vals[x], Operation):
                    instrs.append(_Ins("copy", (slot[x],), None, (slot[x],), None, e, None))
        ret = _ret_template(template, g, slot, flat, self._raw_sparse)
        releases = _releases(instrs, ret, set(consts), set(arg_slots))
        plan = Plan()
        plan.instrs = instrs
        plan.releases = releases
        plan.consts = consts
        plan.arg_slots = arg_slots
        plan.n_slots = counter[0]
        plan.ret = ret
        plan.fn = _tier1(instrs, releases, consts, arg_slots, counter[0], ret, self._storage)
        plan.tier = 1
        plan.runs = 0
        plan.total = 0.0
        plan.filename = None
        plan.line_ins = None
        plan.variables = tuple({id(v): v for v in variables}.values())
        plan.source = None
        plan.codegen_time = 0.0
        plan.n_fused = sum(1 for e in g.eqns if e.prim.name == "fused")
        plan.n_buffers = len(g.meta.get("buffers", {}))
        return plan

    def _tier2(self, plan):
        with _no_gc():
            self._tier2_nogc(plan)

    def _tier2_nogc(self, plan):
        """Replace ``plan.fn`` by generated straight-line Python."""
        t0 = _perf()
        ns = {"S": self._storage, "_dense": _dense, "_dense_all": _dense_all, "_cp": _cp, "_cast": _cast,
              "_cast_all": _cast_all, "_bad_param": _bad_param}
        consts = plan.consts
        for s, c in consts.items():
            ns[f"C{s}"] = c

        def nm(s):
            return f"C{s}" if s in consts else f"v{s}"
        lines = []
        line_ins = {}
        for k, ins in enumerate(plan.instrs):
            kind = ins.kind
            multi = len(ins.outs) > 1 or (kind in ("call", "vjp", "effect") and ins.eqn.prim.multiple_results)
            outs = ", ".join(f"v{o}" for o in ins.outs) + ("," if multi else "")
            a = [nm(i) for i in ins.args]
            if kind == "cast":
                ns[f"D{k}"] = ins.fn
                ln = f"{outs} = {a[0]}.astype(D{k})"
            elif kind == "var":
                idx, snap = ins.extra
                ln = f"{outs} = S[{idx}]" + (".copy()" if snap else "")
            elif kind == "param":
                prm, shp, dt = ins.extra
                ns[f"P{k}"], ns[f"Q{k}"], ns[f"D{k}"] = prm, shp, dt
                ln = (f"{outs} = P{k}.data if P{k}.data.shape == Q{k} and P{k}.data.dtype == D{k} "
                      f"else _bad_param(P{k}, Q{k}, D{k})")
            elif kind == "copy":
                ln = f"{outs} = _cp({a[0]})"
            else:
                ns[f"F{k}"] = ins.fn
                kw = ""
                if ins.kw:
                    ns[f"A{k}"] = ins.kw
                    kw = f", **A{k}"
                if kind == "effect":
                    call = f"F{k}(S{''.join(', ' + x for x in a)}{kw})"
                elif kind == "vjp":
                    fwd_multi, n_out, n_in, densify, dts = ins.extra
                    if fwd_multi:
                        gs = "(" + "".join(x + ", " for x in a[:n_out]) + ")"
                        xs = "(" + "".join(x + ", " for x in a[n_out:n_out + n_in]) + ")"
                        os_ = "(" + "".join(x + ", " for x in a[n_out + n_in:]) + ")"
                    else:
                        gs, xs, os_ = a[0], "(" + "".join(x + ", " for x in a[1:1 + n_in]) + ")", a[1 + n_in]
                    call = f"F{k}({gs}, {xs}, {os_}{kw})"
                    if densify:
                        call = f"_dense_all({call})" if multi else f"_dense({call})"
                    if dts is not None:
                        ns[f"T{k}"] = dts
                        call = f"_cast_all({call}, T{k})" if multi else f"_cast({call}, T{k})"
                else:
                    extra = ""
                    if ins.extra is not None:
                        ns[f"B{k}"] = ins.extra
                        extra = f", out=B{k}"
                    call = f"F{k}({', '.join(a)}{kw}{extra})".replace("(, ", "(")   # a source has no args
                ln = f"{outs} = {call}"
            line_ins[len(lines) + 2] = k
            lines.append(ln)
            rel = plan.releases[k]
            if rel:
                line_ins[len(lines) + 2] = k
                lines.append("del " + ", ".join(f"v{r}" for r in rel))
        args = ", ".join(f"v{s}" for s in plan.arg_slots)
        ret = _ret_source(plan.ret, ns, consts)
        fname = f"<dynnets plan {id(plan):x}>"
        src = f"def _plan({args}):\n" + "".join(f"    {ln}\n" for ln in lines) + f"    return {ret}\n"
        exec(compile(src, fname, "exec"), ns)
        plan.fn = ns["_plan"]
        plan.source = src
        plan.filename = fname
        plan.line_ins = line_ins
        plan.tier = 2
        plan.codegen_time = _perf() - t0

    def _explain(self, plan, exc):
        missing = [v for v in plan.variables if v.index not in self._storage]
        if missing:
            names = ", ".join(f"'{v.name}'" for v in missing)
            return UninitializedVariableError(
                f"Session.run: variable {names} used before it was initialised in this session; run "
                f"global_variables_initializer() (or the variable's initializer) first")
        k = getattr(exc, "_dynnets_step", None)
        if plan.filename is not None:
            tb = exc.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == plan.filename:
                    k = plan.line_ins.get(tb.tb_lineno)
                tb = tb.tb_next
        eqn = plan.instrs[k].eqn if k is not None and k < len(plan.instrs) else None
        if isinstance(exc, ShapeError):
            where = f" in op '{eqn.name}'{_site_str(eqn.site)}" if eqn is not None else ""
            return type(exc)(f"{exc}{where}")
        if eqn is None:
            return op_error(exc, f"Session.run: {type(exc).__name__}: {exc}")
        return op_error(exc, f"{eqn.prim.name}: Session.run: op '{eqn.name}'{_site_str(eqn.site)} failed: "
                             f"{type(exc).__name__}: {exc}")


class InteractiveSession(Session):
    """A session that makes itself the default session as it is created,
    until :meth:`close` (as TF1's ``tf.InteractiveSession``, for shells and
    notebooks): ``t.eval()`` and ``op.run()`` need no ``with`` block."""

    def __init__(self, graph=None, **kwargs):
        super().__init__(graph, **kwargs)
        _SESSIONS.append(self)

    def close(self):
        if self in _SESSIONS:
            _SESSIONS.remove(self)
        super().close()


@contextlib.contextmanager
def _no_gc():
    """Compiling allocates many small objects that all stay alive; Python's
    cyclic collector would scan the growing heap again and again (measured:
    a 16k-node plan compiles in 82 ms without it, 190-350 ms with it)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Ins:
    """One instruction of a plan: ``outs = fn(args...)`` over slots."""

    __slots__ = ("kind", "outs", "fn", "args", "kw", "eqn", "extra")

    def __init__(self, kind, outs, fn, args, kw, eqn, extra):
        self.kind = kind
        self.outs = outs
        self.fn = fn
        self.args = args
        self.kw = kw
        self.eqn = eqn
        self.extra = extra


def _ret_template(t, g, slot, flat, raw_sparse):
    """The fetch structure over slots: ('v', slot, densify), ('none',),
    (list|tuple|dict, items)."""
    if isinstance(t, int):
        o = g.outputs[t]
        v = flat[t]
        if isinstance(v, Operation):
            return ("none",)
        return ("v", slot[o], (v.sparse or g.values[o].sparse) and not raw_sparse)
    tp, items = t
    if tp is dict:
        return (dict, [(k, _ret_template(s, g, slot, flat, raw_sparse)) for k, s in items])
    return (tp, [_ret_template(s, g, slot, flat, raw_sparse) for s in items])


def _ret_source(t, ns, consts):
    if t[0] == "none":
        return "None"
    if t[0] == "v":
        v = f"C{t[1]}" if t[1] in consts else f"v{t[1]}"
        return f"_dense({v})" if t[2] else v
    tp, items = t
    if tp is dict:
        parts = []
        for k, sub in items:
            kn = f"K{len(ns)}"
            ns[kn] = k
            parts.append(f"{kn}: {_ret_source(sub, ns, consts)}")
        return "{" + ", ".join(parts) + "}"
    inner = "".join(_ret_source(s, ns, consts) + ", " for s in items)
    return f"[{inner}]" if tp is list else f"({inner})"


def _ret_builder(t):
    if t[0] == "none":
        return lambda env: None
    if t[0] == "v":
        s = t[1]
        if t[2]:
            return lambda env: _dense(env[s])
        return lambda env: env[s]
    tp, items = t
    if tp is dict:
        subs = [(k, _ret_builder(x)) for k, x in items]
        return lambda env: {k: f(env) for k, f in subs}
    subs = [_ret_builder(x) for x in items]
    if tp is list:
        return lambda env: [f(env) for f in subs]
    return lambda env: tuple(f(env) for f in subs)


def _step(ins, S):
    """A closure executing one instruction on the slot list ``env``."""
    kind, outs, fn, a, kw = ins.kind, ins.outs, ins.fn, ins.args, ins.kw
    o = outs[0]
    if kind == "cast":
        def step(env):
            env[o] = env[o].astype(fn)
    elif kind == "var":
        idx, snap = ins.extra
        if snap:
            def step(env):
                env[o] = S[idx].copy()
        else:
            def step(env):
                env[o] = S[idx]
    elif kind == "param":
        prm, shp, dt = ins.extra

        def step(env):
            d = prm.data
            env[o] = d if d.shape == shp and d.dtype == dt else _bad_param(prm, shp, dt)
    elif kind == "copy":
        src = a[0]

        def step(env):
            env[o] = _cp(env[src])
    else:
        kw = dict(kw) if kw else {}
        if kind == "call" and ins.extra is not None:
            kw["out"] = ins.extra
        if kind == "vjp":
            fwd_multi, n_out, n_in, densify, dts = ins.extra
            multi = ins.eqn.prim.multiple_results
            post = (_dense_all if multi else _dense) if densify else None
            if dts is not None:
                dense = post

                def post(r):
                    if dense is not None:
                        r = dense(r)
                    return _cast_all(r, dts) if multi else _cast(r, dts)
            if fwd_multi:
                def call(env):
                    return fn(tuple(env[i] for i in a[:n_out]), tuple(env[i] for i in a[n_out:n_out + n_in]),
                              tuple(env[i] for i in a[n_out + n_in:]), **kw)
            else:
                g0, xs, y = a[0], a[1:1 + n_in], a[1 + n_in]

                def call(env):
                    return fn(env[g0], tuple([env[i] for i in xs]), env[y], **kw)
            if post is not None:
                inner = call

                def call(env):
                    return post(inner(env))
        elif kind == "effect":
            def call(env):
                return fn(S, *[env[i] for i in a], **kw)
        elif not kw and len(a) == 1:
            a0 = a[0]

            def call(env):
                return fn(env[a0])
        elif not kw and len(a) == 2:
            a0, a1 = a

            def call(env):
                return fn(env[a0], env[a1])
        else:
            def call(env):
                return fn(*[env[i] for i in a], **kw)
        if len(outs) == 1 and not (ins.eqn is not None and ins.eqn.prim.multiple_results):
            def step(env):
                env[o] = call(env)
        else:
            def step(env):
                r = call(env)
                for j, x in enumerate(outs):
                    env[x] = r[j]
    return step


def _releases(instrs, ret, consts, args):
    """Per instruction, the slots whose value is dead after it (last read, or
    never read), so a run drops its intermediates as it goes, as eager
    backward frees its nodes: a plan that held every activation and gradient
    until it returned would need fresh memory (page faults, cache misses) for
    each new array."""
    keep = set(consts) | set(args)

    def outs_of(t):
        if t[0] == "v":
            keep.add(t[1])
        elif t[0] != "none":
            for sub in t[1]:
                outs_of(sub[1] if t[0] is dict else sub)
    outs_of(ret)
    last = {}
    for k, ins in enumerate(instrs):
        for a in ins.args:
            last[a] = k
        for o in ins.outs:
            last.setdefault(o, k)
            if last[o] < k:
                last[o] = k
    rel = [[] for _ in instrs]
    for slot_, k in last.items():
        if slot_ not in keep:
            rel[k].append(slot_)
    return [tuple(sorted(r)) for r in rel]


def _with_release(step, rel):
    if len(rel) == 1:
        r0 = rel[0]

        def s(env):
            step(env)
            env[r0] = None
        return s

    def s(env):
        step(env)
        for r in rel:
            env[r] = None
    return s


def _tier1(instrs, releases, consts, arg_slots, n_slots, ret, S):
    steps = [_step(i, S) if not r else _with_release(_step(i, S), r) for i, r in zip(instrs, releases)]
    template = [None] * n_slots
    for s, c in consts.items():
        template[s] = c
    build = _ret_builder(ret)
    n_args = len(arg_slots)
    contiguous = arg_slots == list(range(n_args))

    def run(*vals):
        env = template[:]
        if contiguous:
            env[:n_args] = vals
        else:
            for s, v in zip(arg_slots, vals):
                env[s] = v
        k = 0
        try:
            for st in steps:
                st(env)
                k += 1
        except Exception as exc:
            try:
                exc._dynnets_step = k
            except AttributeError:
                pass
            raise
        return build(env)

    return run


def _fresh(p):
    """Primitives whose result never shares memory with an input."""
    return isinstance(p.impl, np.ufunc) or getattr(p, "out_arg", False)
