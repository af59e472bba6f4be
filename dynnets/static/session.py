"""``Session``: compiles a plan per (fetches, fed placeholders, fed shapes and
dtypes) and runs it.

The first ``run`` with a new key validates the feeds, runs the passes of
:mod:`dynnets.static.passes` and lowers the result to a flat list of
instructions over slots. Execution is tiered, as in a JIT: the first runs
interpret the instruction list (nothing to build, so adding an op to a graph
and running it once costs about 0.1 ms); from the
``jit_after``-th run on (default 2) the plan is one generated straight-line
Python function: one line per equation, functions, constants and buffers bound
as globals, the table's VJPs called directly. A run with a known key then
costs a tuple build, one dict lookup and that function call. From the
``native_after``-th run on (default :data:`NATIVE_AFTER` = 100) a small plan
is compiled whole into one Numba function (:mod:`dynnets.static.native`;
plans it cannot translate stay on tier 2). That compile costs 0.3-1.5 s the
first time a plan is seen on a machine (its machine code is cached on disk
for later processes: ~10 ms then) and saves ~10 us per run of a linear
regression step, so it waits until a plan has run often enough to look like
a training loop; no plan of the test suite runs that often. The threshold
counts runs, never time, so the same program switches tiers at the same
step every time (float32 results of the tiers may differ in the last bits).

Because the graph is append-only SSA, adding nodes never invalidates a plan:
old keys keep their plans and a new fetch gets a new one. Nor does it
invalidate what the passes and the lowering found for the equations already
compiled: the session keeps it per set of fed shapes
(:class:`~dynnets.static.passes.PassCache`), so a new plan runs shape rules,
folding, CSE keys and lowering only for its new equations and gets exactly
the plan a compile from scratch would give (``incremental=False``).

Semantics of a run: effects (variable updates, initialisers) run after every
pure computation that does not depend on an effect, so everything a run
computes sees the variables as they were when the run started, except a
fetched Variable itself, which another fetch of the run writes (a train op,
an assign): it is read after that write, as TF1 returns a ref variable's
buffer when the run ends (``_, step = sess.run([train_op, global_step])``
gives 1 after the first step, tensorflow/tensorflow#4663); fetched arrays are
the caller's: writable, and sharing memory with no variable's storage, reused
buffer, feed or other fetched array (a fetch that is a feed or a view of one,
read-only, or fetched twice is copied; an array the run made is returned as
it is).
"""
from __future__ import annotations

import contextlib
import gc as _gc
import time

import numpy as np

from ..autograd.primitives import Aval, fmt_shape, make_rng
from . import control_flow, execute, passes
from .graph import (FeedError, GraphError, OpInfo, Value, Variable, get_default_graph, placeholder_p,
                    variables_initializer, UninitializedVariableError, default_sessions)
from .core.program import CompiledProgram, tier_up

__all__ = ["Session", "InteractiveSession", "NATIVE_AFTER"]

NATIVE_AFTER = passes.NATIVE_AFTER

_ndarray = np.ndarray
_asarray = np.asarray
_OPTION_NAMES = frozenset(passes.CompileOptions._fields)
_perf = time.perf_counter


def _struct_key(f):
    if isinstance(f, (Value, str, OpInfo)):
        return f
    tp = type(f)
    if tp is list or isinstance(f, tuple):      # tuples include namedtuples (LSTMStateTuple), fetched as such
        return (tp,) + tuple(_struct_key(x) for x in f)
    if isinstance(f, dict):
        return (dict,) + tuple((k, _struct_key(v)) for k, v in f.items())
    raise TypeError(f"Session.run: cannot fetch {type(f).__name__} {f!r}: fetches must be graph values "
                    f"(or lists, tuples, namedtuples and dicts of them)")



class Session:
    """Runs a :class:`Graph` (as TF1's ``tf.Session``).

    Parameters
    ----------
    target : str or Graph, optional
        TF1's first argument: only ``""`` (in-process) is supported. A Graph
        here is taken as ``graph`` (``Session(g)``).
    graph : Graph, optional
        Defaults to the default graph.
    config : optional
        Accepted for TF1 code (a ConfigProto) and unused.
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
    native_after : int or None
        Runs of a plan (on any tier) after which it is compiled whole into
        one Numba function where it qualifies (see :mod:`.native`); None
        never does. ``native_after=1, jit_after=1`` compiles after the first
        run, as XLA would before it.
    keep_sparse : bool
        Fetch row-sparse gradients as :class:`RowSparse` (as eager ``._grad``
        holds them) instead of dense arrays.
    incremental : bool
        Keep what the passes and the lowering found for each equation (per
        set of fed shapes) and reuse it in later plans (see
        :mod:`dynnets.static.passes`); ``False`` compiles every plan from
        scratch, the reference the tests compare incremental plans with.

    Notes
    -----
    The loop bodies, loop conditions and ``cond`` branches a plan runs are
    compiled with the same options (:attr:`options`) and move through the
    same tiers, counting their iterations (or branch runs) as runs.
    """

    def __init__(self, target=None, graph=None, config=None, *, optimize=True, fuse_min_size=passes.FUSE_MIN_SIZE,
                 memory_min_size=passes.MEMORY_MIN_SIZE, jit_after=2, keep_sparse=False, native_after=NATIVE_AFTER,
                 incremental=True):
        # TF1's order is (target, graph, config); a Graph first is dynnets' own habit, Session(g)
        if target is not None and not isinstance(target, str):
            if graph is not None:
                raise TypeError("Session: got a graph both as the first argument and as graph=")
            graph, target = target, None
        if target:
            raise ValueError(f"Session: target={target!r}: only the in-process target '' is supported")
        if graph is not None and not hasattr(graph, "eqns"):
            raise TypeError(f"Session: graph must be a Graph, got {type(graph).__name__}")
        self.graph = graph if graph is not None else get_default_graph()
        self.config = config        # TF1's ConfigProto: kept, changes nothing (see dynnets.static.config)
        self.optimize = optimize
        self.fuse_min_size = fuse_min_size
        self.memory_min_size = memory_min_size
        self._storage = {}
        # the compiled-program object (.program) keyed by (fetches, fed placeholder, shape, dtype...):
        # its dict read directly, run() being the hot path
        self._program = CompiledProgram(self.graph)
        self._plans = self._program.plans
        self._plan_list = self._program.order
        self._closed = False
        self._init_op = None
        self._init_count = -1
        self._raw_sparse = bool(keep_sparse)
        self.jit_after = jit_after
        self.native_after = native_after
        self._rngs = {}
        self.incremental = bool(incremental)
        self._caches = {}           # fed avals -> passes.PassCache (the incremental compiler's state)
        self._feeds_checked = {}    # (key, shape, dtype) -> what _check_feed found

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
            raise execute.explain(plan, exc, self._storage) from exc
        plan.total += _perf() - t0
        plan.runs += 1
        if plan.runs >= plan.next_tier:
            tier_up(plan, self._storage, self.options)
        return out

    @property
    def options(self):
        """The :class:`~dynnets.static.passes.CompileOptions` this session
        compiles its plans and their loop bodies and branches with."""
        o = self._options
        if o is None:
            o = self._options = passes.CompileOptions(bool(self.optimize), self.fuse_min_size, self.memory_min_size,
                                                      self.jit_after, self.native_after)
        return o

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name in _OPTION_NAMES:
            # made once, not per compile (a first run after adding an op is ~60 us)
            object.__setattr__(self, "_options", None)

    def close(self):
        """Free the variables' values and the compiled plans."""
        self._closed = True
        self._plans.clear()         # their statistics stay (stats after the with block)
        self._storage.clear()
        self._rngs.clear()
        self._caches.clear()
        self._feeds_checked.clear()

    @contextlib.contextmanager
    def as_default(self):
        """Make this the default session inside the ``with`` block, for
        ``Value.eval()`` and ``Operation.run()`` (it stays open after it)."""
        default_sessions.append(self)
        try:
            yield self
        finally:
            default_sessions.remove(self)

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

    def _rng(self, e):
        """The generator of random equation ``e`` in this session: one stream
        per op (keyed by its value id, the same in every plan), seeded by its
        ``seed`` attribute, so a new session repeats the same draws (as TF1)."""
        r = self._rngs.get(e.outs[0])
        if r is None:
            r = self._rngs[e.outs[0]] = make_rng(e.attrs["seed"])
        return r

    def global_variables_initializer(self):
        """Initialise every variable of the graph in this session (the same as
        ``run(global_variables_initializer())``)."""
        n = len(self.graph.variables)
        if self._init_op is None or self._init_count != n:
            with self.graph.as_default():
                self._init_op = variables_initializer(self.graph.variables)
            self._init_count = n
        self.run(self._init_op)

    def load_variable(self, var, value):
        """Set ``var``'s value in this session to ``value`` (an array of its
        shape) without building an op: what TF1's ``Variable.load(value,
        session)`` calls."""
        if var.graph is not self.graph:
            raise GraphError(f"load: variable '{var.name}' belongs to another graph than this session's")
        arr = np.asarray(value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value)
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
        after the passes, fused kernels, buffers, runs, mean_run_us, and
        ``subprograms``: the same for the loop bodies, loop conditions and
        ``cond`` branches it ran with this session's options (with ``role``:
        "body", "cond", "true_graph"... and "/vjp" for their gradients)."""
        opts = self.options
        out = []
        for p in self._plan_list:
            st = p.stats()
            st["subprograms"] = control_flow.subprogram_stats(p.program, opts) if p.program is not None else []
            out.append(st)
        return out

    # --- compiling ---------------------------------------------------------------
    def _compile(self, key, fetches, feed_dict, vals):
        # gc_paused() without the context manager's generator (a first run pays for it)
        was = _gc.isenabled()
        _gc.disable()
        try:
            return self._compile_nogc(key, fetches, feed_dict, vals)
        finally:
            if was:
                _gc.enable()

    def _compile_nogc(self, key, fetches, feed_dict, vals):
        t0 = _perf()
        g = self.graph
        flat = []
        template = self._template(fetches, flat)
        if len(flat) > 1:
            flat = self._late_variables(flat)
        feed_ids = []
        input_avals = {}
        casts = {}
        if feed_dict:
            checked = self._feeds_checked
            for (k, _), v in zip(feed_dict.items(), vals):
                fk = (k, v.shape, v.dtype)
                try:
                    c = checked.get(fk)
                except TypeError:
                    c = None
                if c is None:
                    c = self._check_feed(k, v)
                    try:
                        checked[fk] = c
                    except TypeError:
                        pass
                pid, aval, cast = c
                if pid in input_avals:
                    raise FeedError(f"Session.run: placeholder '{g.values[pid].name}' is fed twice (by the value and "
                                    f"by its name)")
                if cast is not None:
                    casts[pid] = cast
                feed_ids.append(pid)
                input_avals[pid] = aval
        # the program over the graph's own equation list, not a copy (with_outputs): prune reads only
        # its outputs and the graph's producer table, and this view lives only until prune returns
        prog = g.derive(g.eqns, [v.id for v in flat])
        prog.producer = g.producer
        timings = {}
        t = _perf()
        pruned = passes.prune(prog)
        timings["prune"] = _perf() - t
        fed = set(feed_ids)
        missing = [g.values[e.outs[0]] for e in pruned.eqns if e.prim is placeholder_p and e.outs[0] not in fed]
        if missing:
            m = missing[0]
            raise FeedError(f"Session.run: placeholder '{m.name}' (shape {fmt_shape(m.shape)}, dtype {m.dtype}) must "
                            f"be fed: the fetches need it" + (f" (also unfed: {[x.name for x in missing[1:]]})"
                                                              if len(missing) > 1 else ""))
        # what the passes and the lowering found for the equations of earlier plans with these fed
        # shapes is still valid (the graph is append-only), so this plan computes only its new part
        cache = None
        options = self.options
        if self.incremental:
            # the first plan with these fed shapes has nothing to reuse and compiles without the
            # cache's bookkeeping (which costs a first compile of a 1,600-node program 17%); the
            # later ones fill the cache and reuse it
            ckey = (options, frozenset(input_avals.items()))
            cache = self._caches.get(ckey)
            if cache is None:
                self._caches[ckey] = passes.PassCache(ckey)
        plan = self._program.build(prog, flat, template, feed_ids, input_avals, options, self._storage, key=key,
                                   casts=casts, raw_sparse=self._raw_sparse, rng_of=self._rng, cache=cache,
                                   pruned=pruned, timings=timings, t0=t0)
        self._plans[key] = plan
        return plan

    def _late_variables(self, flat):
        """``flat`` with each fetched Variable that another fetch writes (a
        train op, an assign) read after that write: TF1 fetches a (ref)
        Variable as its buffer when the run ends, so ``sess.run([train_op,
        global_step])`` gives the step after the increment (1 after the first
        run). Values computed from a variable still see it as it was when
        the run started."""
        if not any(isinstance(v, Variable) for v in flat):
            return flat
        g = self.graph
        # one ancestor walk per fetch (the walk is linear in the graph)
        written = [g.writes(f) for f in flat]
        out = list(flat)
        for k, v in enumerate(flat):
            if not isinstance(v, Variable):
                continue
            writers = [f for f, w in zip(flat, written) if f is not v and v.id in w]
            if writers:
                # a read_after node (named '<variable>/read'), made once per (variable, writers) and kept by
                # the graph, so a later compile of this fetch reuses it; control_dependencies(None) first, so
                # a run from inside the caller's own control block does not wait for that block's controls
                with g.as_default(), g.control_dependencies(None), g.control_dependencies(writers):
                    out[k] = v.read_value()
        return out

    def _check_feed(self, k, v):
        """(placeholder id, fed aval, dtype to cast to or None) for feeding
        ``v`` to ``k``, or the error that names what is wrong; the answer
        depends on ``k``, ``v.shape`` and ``v.dtype`` only (the session keeps it)."""
        g = self.graph
        if isinstance(k, str):
            k = g.element(k, "feed")
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
        shp = decl.shape
        # a placeholder made without a shape (unknown rank) takes any shape
        if shp is not None and (len(v.shape) != len(shp) or any(d is not None and d != s
                                                                  for d, s in zip(shp, v.shape))):
            raise FeedError(f"Session.run: placeholder '{k.name}' expects shape {fmt_shape(shp)}, given a "
                            f"value of shape {fmt_shape(v.shape)}")
        dt = decl.dtype
        cast = None
        if v.dtype != dt:
            if v.dtype.kind in "biuf" and np.can_cast(v.dtype, dt, "same_kind"):
                cast = dt
            else:
                raise FeedError(f"Session.run: placeholder '{k.name}' expects dtype {dt}, given a value "
                                f"of dtype {v.dtype}")
        return k.id, Aval(tuple(v.shape), dt), cast

    def _template(self, f, flat):
        if isinstance(f, str):
            f = self.graph.element(f, "fetch")
        if isinstance(f, Value):
            if f.graph is not self.graph:
                raise GraphError(f"Session.run: cannot fetch '{f.name}': it belongs to another graph than this "
                                 f"session's")
            flat.append(f)
            return len(flat) - 1
        if isinstance(f, OpInfo):
            # a pure op run for nothing (TF1's sess.run(op) gives None): its outputs are computed
            if f.graph is not self.graph:
                raise GraphError(f"Session.run: cannot run op '{f.name}': it belongs to another graph than this "
                                 f"session's")
            return ("op", [self._template(v, flat) for v in f.outputs])
        tp = type(f)
        if tp is list or isinstance(f, tuple):
            return (tp, [self._template(x, flat) for x in f])
        if isinstance(f, dict):
            return (dict, [(k, self._template(v, flat)) for k, v in f.items()])
        raise TypeError(f"Session.run: cannot fetch {type(f).__name__} {f!r}: fetches must be graph values "
                        f"(or lists, tuples, namedtuples and dicts of them)")


class InteractiveSession(Session):
    """A session that makes itself the default session as it is created,
    until :meth:`close` (as TF1's ``tf.InteractiveSession``, for shells and
    notebooks): ``t.eval()`` and ``op.run()`` need no ``with`` block."""

    def __init__(self, target=None, graph=None, config=None, **kwargs):
        super().__init__(target, graph, config, **kwargs)
        default_sessions.append(self)

    def close(self):
        if self in default_sessions:
            default_sessions.remove(self)
        super().close()
