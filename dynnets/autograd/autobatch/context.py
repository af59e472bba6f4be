"""Automatic operation batching (Neubig, Goldberg and Dyer 2017, DyNet's
``autobatch``) over the primitive table.

Inside ``with dynnets.autobatch() as ab:`` every :func:`~.engine.bind` records
a *pending node* and returns a :class:`LazyTensor` whose shape and dtype come
from the primitive's shape rule (so shape errors are raised at once, at the
line that wrote the op). Nothing runs until a value is needed: ``.data``,
``.numpy()``, ``.item()``, ``float()``, ``bool()``, comparisons, ``repr``,
``backward()``, an eager op on it after the context, or leaving the context.
Forcing runs every pending node, batched: nodes with the same *signature*
(primitive, every attribute, grad mode, the per-instance inputs' trailing
shapes and dtypes, the identity of shared inputs) run as one call of the
primitive, built by its batching rule (``defprim(batch=...)``, see
:class:`~dynnets.autograd.primitives.core.BatchRule`). Code that reads a value midway
(data-dependent control flow) works: it forces what was recorded so far, and
the rest batches separately (smaller batches).

Execution: a batched call is an ordinary eager ``bind`` (the context is off
while it runs) on arguments gathered from the outputs of earlier calls, so the
batched calls and their gathers are nodes of the ordinary tape and
``backward()``, factored weight gradients, row-sparse embedding gradients and
the optimizers work unchanged. Every output of a call is one array; a node's
value is a row range of it (a view). An argument whose rows already lie in
order in one array is passed as that array or a slice of it (no copy);
otherwise one ``arena_gather`` (a take from the force's arena, into which
every batched output is copied) or ``gather_rows`` copies the rows.

Recording writes each node's signature id, depth and its edges from pending
producers into flat lists; a force turns them into arrays and hands them to
the scheduler (:mod:`.schedule`, a pure function from records to groups),
then runs the groups in order.

A node's value is kept as *pieces*: row ranges ``(source, start, stop)`` of
computed arrays (sources), its value the pieces' rows concatenated and
reshaped to the node's shape (0-d values are one row). View primitives
(reshape, concat/stack along axis 0, split_rows, row selection) only combine
pieces and never run.

Schedulers (``strategy=``): ``"agenda"`` (DyNet's default): among the ready
signatures run the one whose nodes have the lowest average depth, products
deferred on ties, once one of its (depth, signature) levels is complete (see
:func:`.schedule.agenda_schedule`); ``"depth"``: by depth, then signature.
"""
from __future__ import annotations

import gc
import itertools
import threading
import time
from typing import NamedTuple

import numpy as np

from .. import engine as _engine
from .. import primitives as P  # noqa: F401
from ..engine import STATE as _Mode
from ..tensor import Parameter, Tensor, wrap_array
from . import schedule as _schedule
from .blame import blame, caller
from .execute import RUN
from .lazy import WEAK, LazyTensor, Node, desc_id
from .levels import find_chains, run_chain
from .record import PLANS, make_plan
from .schedule import SINGLE, VIEW
from .storage import Storage

__all__ = ["autobatch", "AutoBatch", "LazyTensor", "ScheduledNode", "BatchedCall"]

_NDARRAY = np.ndarray
_WEAK = WEAK
_object_new = object.__new__
_SERIALS = itertools.count()


class ScheduledNode(NamedTuple):
    """One recorded node in ``ab.schedule``: ``node`` its record index,
    ``call`` the batched call that ran it (-1: a view, nothing ran), ``op``
    the primitive's name, ``tag`` what ``ab.tag`` held when it was recorded."""
    node: int
    call: int
    op: str
    tag: object


class BatchedCall(NamedTuple):
    """One call in ``ab.calls``: its id, primitive, number of nodes it ran,
    whether it was a fallback (one node, no batching rule applied), depth."""
    call: int
    op: str
    size: int
    fallback: bool
    depth: int


# The cyclic collector is paused while any thread's context records and
# runs (see AutoBatch.__enter__); it is one switch per process, so the
# contexts of all threads count: the last one out turns it back on, if it
# was on when the first came in.
_GC = {"paused": 0, "was_enabled": False}
_GC_LOCK = threading.Lock()


def _gc_pause():
    with _GC_LOCK:
        if _GC["paused"] == 0:
            _GC["was_enabled"] = gc.isenabled()
            gc.disable()
        _GC["paused"] += 1


def _gc_resume():
    with _GC_LOCK:
        _GC["paused"] -= 1
        if _GC["paused"] == 0 and _GC["was_enabled"]:
            gc.enable()


class AutoBatch(Storage):
    """The context object of :func:`autobatch`.

    Attributes
    ----------
    strategy : {"agenda", "depth"}
    tag : object
        Stored with every node recorded while it is set (e.g. ``(tree, node)``),
        shown in :attr:`schedule`.
    """

    def __init__(self, strategy="agenda", profile=False, debug=False, levels=True):
        if strategy not in ("agenda", "depth"):
            raise ValueError(f"autobatch: strategy must be 'agenda' or 'depth', got {strategy!r}")
        self.strategy = strategy
        self.levels = bool(levels)
        self.profile = bool(profile)
        self.debug = bool(debug)
        self.tag = None
        self._nodes = []            # pending nodes
        self._rsid = []             # per pending node: signature id (or VIEW, SINGLE)
        self._rdepth = []           # per pending node: depth
        self._esrc = []             # dependency edges between pending nodes: producer index,
        self._edst = []             # consumer index
        self._sigs = {}
        self._sig_rows = []         # per signature: a "rows" rule (the agenda defers them on ties)
        self._sources = []          # tensors that pieces index
        self._src_arena = []        # per source: (arena array, first row) when its rows lie in an arena, else None
        self._arenas = {}           # this force's arenas: (trailing shape, dtype) -> [array, rows used]
        self._caps = {}             # this force's arena capacities in rows, per (trailing shape, dtype)
        self._arena_first = 0       # the first source of this force (earlier ones are not copied)
        self._src_of = {}           # id(concrete tensor) -> source index
        self._keep = []
        self._protected = {}        # id(array) -> its desc id, id(tensor) -> (array, desc id, tensor): read by pending nodes
        self._tensors = []          # the (array, desc id, tensor) entries of _protected
        self._readonly = []         # the arrays made read-only until the pending nodes ran
        self._active = False
        self._forcing = False
        self._broken = None
        self._ncalls = 0
        self._schedule = []
        self._calls = []
        self._t_gather = self._t_compute = 0.0
        self._st = dict(nodes=0, views=0, batched_calls=0, batched_nodes=0, fallbacks={}, gathers=0,
                        views_passed=0, bytes_gathered=0, bytes_constants=0, forces=0, arena_bytes=0,
                        arena_gathers=0, chains=0, rows_shared={}, record_s=0.0, schedule_s=0.0, gather_s=0.0, compute_s=0.0)
        self._prev = None
        self._serial = next(_SERIALS)

    # --- the context ----------------------------------------------------------------
    def __enter__(self):
        _engine.push_interpreter(self)
        self._active = True
        # The cyclic garbage collector is paused while the context records
        # and runs: the pending graph is thousands of small objects per
        # minibatch, and the collector's passes over them cost ~12% of a
        # Tree-LSTM training step (measured, SST minibatches of 25). Nothing
        # leaks: forcing breaks the node <-> tensor references, so the graph
        # is freed by reference counting; the collector resumes on exit.
        _gc_pause()
        return self

    def __exit__(self, tp, exc, tb):
        _engine.pop_interpreter(self)
        self._active = False
        # numpy's bare "... is read-only" from a write into an array that
        # pending nodes made read-only: raised again below naming autobatch
        # (numpy's message cannot name it; nothing costs on the hot path)
        pending = len(self._nodes) if self._readonly else 0
        try:
            if tp is None:
                self.force()
            else:
                self._abandon("the autobatch context was left by an exception before they ran")
        finally:
            _gc_resume()
        if pending and tp is not None and issubclass(tp, ValueError) and str(exc).endswith("is read-only") \
                and not str(exc).startswith("autobatch:"):
            raise ValueError(
                f"autobatch: numpy refused an in-place write into a read-only array ({exc}). Inside "
                f"dn.autobatch(), the arrays that pending ops read (here {pending} op(s) had not run) are "
                f"read-only until those ops run, so that they compute with the values they were recorded "
                f"with. Run them before writing (read a result: loss.item(), or call ab.force()), write after "
                f"the with block, or replace the array instead (p.data = new_array)") from exc
        return False

    # --- recording (the hot path) ---------------------------------------------------
    def bind(self, prim, args, attrs, first=False):
        """Record one application (the interpreter interface: ``engine.bind``
        hands every application to the current interpreter's ``bind``);
        returns its lazy result(s), with ``first``
        (:func:`~dynnets.autograd.engine.bind_first`) only the first result."""
        if self.profile:
            t0 = time.perf_counter()
        key = [prim]
        kpush = key.append
        dmax = -1
        deps = None
        rg = False
        prot = self._protected
        for a in args:
            tp = type(a)
            if tp is LazyTensor:
                pn = a._pn
                if pn.ab is not self:
                    return self._record_other(prim, args, attrs, first)
                kpush(a._desc)
                if a.requires_grad:
                    rg = True
                if pn.call is None:
                    if deps is None:
                        deps = [pn]
                    else:
                        deps.append(pn)
                    if pn.depth > dmax:
                        dmax = pn.depth
            elif tp is Parameter or tp is Tensor:
                # a tensor by identity, with the array it held when first read
                # here: a pending op computes with that array (see _rebound)
                e = prot.get(id(a))
                if e is None or e[0] is not a._data:
                    if e is not None:
                        # a's array was replaced while pending ops read the old
                        # array: they run now, with it; this op reads the new one
                        if self._nodes:
                            self.force()
                        else:
                            self._unprotect()   # protected by a record that raised: nothing pending
                        return self.bind(prim, args, attrs, first)
                    e = self._protect_tensor(a, tp)
                kpush(e[1])
                if a.requires_grad:
                    rg = True
            elif tp is _NDARRAY:
                dk = prot.get(id(a))
                if dk is None:
                    dk = self._protect(a, tp)
                kpush(dk)
            elif tp is float or tp is int or tp is bool:
                kpush(tp)
            else:
                return self._record_other(prim, args, attrs, first)
        gm = _Mode.grad_enabled
        kpush(gm)
        if attrs:
            akf = prim.attr_key
            try:
                # the values' types too: axis=1.0 equals axis=1, but only one is valid
                kpush(akf(**attrs) if akf is not None else tuple(attrs.items()))
                kpush(tuple(map(type, attrs.values())))
                key = tuple(key)
                plan = PLANS.get(key)
            except TypeError:
                return self._record_other(prim, args, attrs, first)
        else:
            key = tuple(key)
            plan = PLANS.get(key)
        if plan is None:
            # the shape rule (a shape error is raised here, at the user's line)
            plan = make_plan(prim, args, attrs, gm, key)
        sid = plan.sid
        if sid >= 0:
            sh = plan.shared
            last = plan.last
            # the signature of this plan's previous application in this
            # context, when its shared inputs are the same objects (a model's
            # parameters, the usual case): no key to build
            if (last is not None and last[0] == self._serial and len(sh) == 2
                    and id(args[sh[0]]) == last[1] and id(args[sh[1]]) == last[2]):
                sid = last[3]
            else:
                if sh:
                    sk = [plan.bkey]
                    for i in sh:
                        a = args[i]
                        tp = type(a)
                        sk.append(a if tp is float or tp is int or tp is bool else id(a))
                    sk = tuple(sk)
                else:
                    sk = plan.bkey
                sid = self._sigs.get(sk)
                if sid is None:
                    sid = self._sigs[sk] = len(self._sigs)
                    self._sig_rows.append(plan.prim.batch.kind == "rows")
                # not for Python scalars: they are keyed by value, and a freed
                # one's id may come back as another value
                if len(sh) == 2 and type(args[sh[0]]) not in _WEAK and type(args[sh[1]]) not in _WEAK:
                    plan.last = (self._serial, id(args[sh[0]]), id(args[sh[1]]), sid)
        pn = _object_new(Node)
        pn.ab = self
        pn.plan = plan
        pn.args = args
        pn.attrs = attrs
        pn.sid = sid
        pn.tag = self.tag
        pn.where = caller() if self.debug else None
        pn.call = None
        # the record, in flat arrays: signature, depth, edges from pending
        # producers. A computing node runs a step after its inputs; a view in
        # the step of its last input, after that step's calls
        nodes = self._nodes
        i = len(nodes)
        pn.index = i
        if deps is None:
            pn.depth = 0
        else:
            pn.depth = dmax + 1 if sid != VIEW else dmax
            esrc = self._esrc
            edst = self._edst
            for d in deps:
                esrc.append(d.index)
                edst.append(i)
        self._rsid.append(sid)
        self._rdepth.append(pn.depth)
        nodes.append(pn)
        rg = rg and plan.diff
        if plan.multi and not first:
            res = []
            k = 0
            for desc in plan.descs:
                t = _object_new(LazyTensor)
                t.requires_grad = rg
                t._pn = pn
                t._k = k
                t._desc = desc
                res.append(t)
                k += 1
            res = tuple(res)
        else:
            res = _object_new(LazyTensor)
            res.requires_grad = rg
            res._pn = pn
            res._k = 0
            res._desc = plan.descs[0]
        if self.profile:
            self._st["record_s"] += time.perf_counter() - t0
        return res

    def _record_other(self, prim, args, attrs, first=False):
        """Arguments the fast path does not take: lazy tensors of other contexts
        (their values, if those ran), static-graph values, numpy scalars,
        None, lists; such applications run on their own when not batchable."""
        targs = []
        plain = True
        for a in args:
            tp = type(a)
            if tp is LazyTensor and a._pn.ab is not self:
                a = self._foreign(a)
            elif getattr(tp, "__dynnets_interpreter__", None) is not None:
                out = tp.__dynnets_interpreter__.bind(prim, args, attrs)
                return out[0] if first and prim.multiple_results else out
            elif tp is not LazyTensor and isinstance(a, Tensor) and tp is not Tensor and tp is not Parameter:
                a = wrap_array(a._data, requires_grad=False) if not a.requires_grad else a
                plain = plain and type(a) in (Tensor, Parameter)
            elif not (tp is LazyTensor or tp in (Tensor, Parameter, _NDARRAY) or tp in _WEAK):
                plain = False
            targs.append(a)
        targs = tuple(targs)
        if plain:
            try:
                if attrs:
                    ak = prim.attr_key
                    hash(ak(**attrs) if ak is not None else tuple(attrs.items()))
                return self.bind(prim, targs, attrs, first)
            except TypeError:
                pass
        # one at a time, with a plan of its own (not cached)
        plan = make_plan(prim, targs, attrs, _Mode.grad_enabled, None)
        plan.sid = SINGLE
        deps = [a._pn for a in targs if type(a) is LazyTensor and a._pn.call is None]
        pn = _object_new(Node)
        pn.ab = self
        pn.plan = plan
        pn.args = targs
        pn.attrs = attrs
        pn.sid = SINGLE
        pn.tag = self.tag
        pn.where = caller() if self.debug else None
        pn.call = None
        i = len(self._nodes)
        pn.index = i
        pn.depth = 1 + max((d.depth for d in deps), default=-1)
        for d in deps:
            self._esrc.append(d.index)
            self._edst.append(i)
        self._rsid.append(SINGLE)
        self._rdepth.append(pn.depth)
        self._nodes.append(pn)
        rg = plan.diff and any(isinstance(a, Tensor) and a.requires_grad for a in targs)
        res = []
        for k, desc in enumerate(plan.descs):
            t = _object_new(LazyTensor)
            t.requires_grad = rg
            t._pn = pn
            t._k = k
            t._desc = desc
            res.append(t)
        return tuple(res) if plan.multi and not first else res[0]

    record = bind
    # the engine's interpreter protocol: bind hands this context every op of
    # its thread; lazy results read their inputs later, so no in-place writes
    deferred = True

    def bind_first(self, prim, args, attrs):
        """:func:`~..engine.bind_first`: only the first result's lazy tensor."""
        return self.bind(prim, args, attrs, True)

    def _protect(self, arr, tp):
        """Make ``arr`` (read by a pending node) read-only until it ran;
        returns its interned (shape, dtype, type)."""
        dk = self._protected[id(arr)] = desc_id(arr.shape, arr.dtype, tp)
        if arr.flags.writeable:
            arr.flags.writeable = False
            self._readonly.append(arr)
        else:
            self._keep.append(arr)      # its id stays valid while the context lives
        return dk

    def _protect_tensor(self, t, tp):
        """Register tensor ``t`` (read by a pending node) with the array it
        holds now, made read-only until the pending nodes ran; returns the
        entry ``(array, desc id, tensor)`` (the tensor kept: its id stays
        valid while the entry lives)."""
        d = t._data
        if d.flags.writeable:
            d.flags.writeable = False
            self._readonly.append(d)
        e = self._protected[id(t)] = (d, desc_id(d.shape, d.dtype, tp), t)
        self._tensors.append(e)
        return e

    def _rebound(self, nodes):
        """Pending nodes compute with the values they were recorded with, as
        eager ops would have: where a tensor's ``.data`` was replaced after
        it was recorded (``W.data = W.data * 10``; an in-place write is
        refused, its array being read-only), every pending node reading it
        gets a stand-in holding the recorded array, whose gradient flows into
        the tensor (an identity node on the tape). Costs a look at each
        distinct tensor per force; the stand-ins only when something was
        replaced."""
        sub = None
        for e in self._tensors:
            if e[2]._data is not e[0]:
                if sub is None:
                    sub = {}
                sub[id(e[2])] = _engine.alias(e[2], e[0])
        if sub is None:
            return
        for pn in nodes:
            args = pn.args
            for a in args:
                if id(a) in sub:
                    pn.args = tuple(sub.get(id(b), b) for b in args)
                    break

    def _foreign(self, a):
        """A lazy tensor of another context: its value if that context ran it."""
        other = a._pn.ab
        if a._pn.call is None:
            if other._broken is not None:
                raise RuntimeError(other._broken)
            raise RuntimeError(
                "autobatch: a lazy tensor recorded in another autobatch context is used before that context "
                "ran it; force it first (.data, .item(), backward()) or leave its context")
        return a._eager()

    # --- what the benchmark reads ------------------------------------------------------
    @property
    def stats(self):
        """Totals: ``nodes`` recorded and run, ``views`` (no computation),
        ``batched_calls`` and ``batched_nodes`` (nodes they ran), ``fallbacks``
        per primitive (nodes run alone), ``gathers`` and ``bytes_gathered``
        (rows copied into batched arguments), ``views_passed`` (arguments
        passed as slices, no copy), ``bytes_constants`` (constant arrays
        concatenated), ``forces``, ``pending``, ``arena_bytes`` (batched
        outputs copied into the arenas, one block per trailing shape and dtype,
        when a gather first reads them),
        ``arena_gathers`` (gathers read as one take from an arena), ``chains``
        (chains of groups run as one levels call, each counted once in
        ``batched_calls``), ``rows_shared`` per primitive (output rows
        computed once and read by several nodes: an embedding's repeated ids
        and the calls on their rows, e.g. a Tree-LSTM leaf per distinct word),
        and seconds: ``record_s``
        (with ``profile=True``), ``schedule_s``, ``gather_s`` (building
        batched arguments), ``compute_s`` (the batched calls themselves)."""
        d = dict(self._st)
        d["fallbacks"] = dict(d["fallbacks"])
        d["rows_shared"] = dict(d["rows_shared"])
        d["pending"] = len(self._nodes)
        return d

    @property
    def schedule(self):
        """For every node run so far, a :class:`ScheduledNode` (record index,
        batched call id or -1 for a view, op, tag), in execution order."""
        out = []
        for cid, name, group in self._schedule:
            for pn in group:
                out.append(ScheduledNode(pn.index, cid, name, pn.tag))
        return out

    @property
    def calls(self):
        """Every call made so far, a :class:`BatchedCall`, in order."""
        return list(self._calls)

    # --- forcing ----------------------------------------------------------------------
    def force_for(self, t):
        if self._broken is not None:
            raise RuntimeError(self._broken)
        self.force()

    def force(self):
        """Run every pending node (batched). Called by any read of a value."""
        if not self._nodes:
            return
        if self._broken is not None:
            raise RuntimeError(self._broken)
        if self._forcing:
            raise RuntimeError("autobatch: a value was read while the batched calls ran")
        nodes = self._nodes
        rec = self._take_records()
        self._nodes = []
        base = self._st["nodes"]
        if base:
            for pn in nodes:
                pn.index += base        # the record index across the context's forces
        self._forcing = True
        prev = _engine.interpreter_stack()
        _Mode.stack = tuple(i for i in prev if type(i) is not AutoBatch)
        prev_gm = _Mode.grad_enabled
        st = self._st
        t0 = time.perf_counter()
        try:
            self._rebound(nodes)
            self._unprotect()
            self._plan_arenas(nodes)
            self._run(nodes, rec)
        except BaseException as exc:
            self._broken = (f"autobatch: running the pending nodes failed ({type(exc).__name__}: {exc}); the "
                            f"context's lazy tensors have no values")
            raise
        finally:
            _Mode.stack = prev
            _Mode.grad_enabled = prev_gm
            self._forcing = False
        st["nodes"] += len(nodes)
        st["forces"] += 1
        total = time.perf_counter() - t0
        st["schedule_s"] += total - self._t_gather - self._t_compute
        st["gather_s"] += self._t_gather
        st["compute_s"] += self._t_compute
        for pn in nodes:
            pn.args = None          # inputs are on the tape; drop the references

    def _abandon(self, why):
        self._unprotect()
        if self._nodes:
            self._broken = f"autobatch: {len(self._nodes)} pending node(s) never ran: {why}"
        for pn in self._nodes:
            pn.args = None        # no reference cycles left for the paused collector
        self._nodes = []
        self._take_records()

    def _unprotect(self):
        for a in self._readonly:
            a.flags.writeable = True
        self._readonly = []
        self._protected = {}
        self._tensors = []

    # --- scheduling -----------------------------------------------------------------
    def _take_records(self):
        """The pending records as arrays (sid, depth, edge sources, edge
        destinations), the lists emptied for the next region."""
        rec = (np.array(self._rsid, dtype=np.int64), np.array(self._rdepth, dtype=np.int64),
               np.array(self._esrc, dtype=np.int64), np.array(self._edst, dtype=np.int64))
        self._rsid = []
        self._rdepth = []
        self._esrc = []
        self._edst = []
        return rec

    def _run(self, nodes, rec):
        """Schedule the records (a pure function of the arrays, see
        :mod:`.autobatch.schedule`), then run the groups in order."""
        self._t_gather = 0.0
        self._t_compute = 0.0
        sid, depth, src, dst = rec
        if self.strategy == "depth":
            order, starts = _schedule.depth_schedule(sid, depth)
        else:
            order, starts = _schedule.agenda_schedule(sid, depth, src, dst, self._sig_rows)
        order = order.tolist()
        starts = starts.tolist()
        chains = find_chains(nodes, order, starts, src, dst) if self.levels else {}
        for g in range(len(starts) - 1):
            if chains and g in chains:
                chain = chains[g]
                if chain is not None:
                    self._run_chain([[nodes[j] for j in grp] for grp in chain[0]], chain[1])
                continue
            a = starts[g]
            b = starts[g + 1]
            i = order[a]
            if b - a == 1:
                pn = nodes[i]
                if pn.sid == VIEW:
                    self._run_view(pn)
                else:
                    self._run_group([pn])
            else:
                self._run_group([nodes[j] for j in order[a:b]])

    # --- execution ----------------------------------------------------------------------
    def _new_call(self, group, fallback=False):
        cid = self._ncalls
        self._ncalls += 1
        pn0 = group[0]
        name = pn0.plan.prim.name
        self._calls.append(BatchedCall(cid, name, len(group), fallback, pn0.depth))
        self._schedule.append((cid, name, group))
        st = self._st
        if fallback:
            fb = st["fallbacks"]
            fb[name] = fb.get(name, 0) + 1
        else:
            st["batched_calls"] += 1
            st["batched_nodes"] += len(group)
        return cid

    def _run_group(self, group):
        pn0 = group[0]
        try:
            if pn0.sid == SINGLE:
                self.run_single(pn0)
            else:
                RUN[pn0.plan.prim.batch.kind](self, group)
        except (ValueError, IndexError, TypeError, FloatingPointError) as exc:
            blame(self, group, exc)
            raise

    def _run_chain(self, chain, inner):
        try:
            done = run_chain(self, chain, inner)
        except (ValueError, IndexError, TypeError, FloatingPointError) as exc:
            blame(self, [pn for grp in chain for pn in grp], exc)
            raise
        if done:
            self._st["chains"] += 1
            return
        for grp in chain:
            self._run_group(grp)

    def run_call(self, pn0, prim, args, attrs):
        _Mode.grad_enabled = pn0.plan.gm
        t0 = time.perf_counter()
        try:
            return _engine.bind(prim, *args, **attrs)
        finally:
            self._t_compute += time.perf_counter() - t0

    def run_single(self, pn):
        """A node without a batching rule: run on its own (a fallback)."""
        self._new_call([pn], fallback=True)
        args = [a._eager() if type(a) is LazyTensor else a for a in pn.args]
        prim = pn.plan.prim
        outs = self.run_call(pn, prim, args, pn.attrs)
        outs = outs if prim.multiple_results else (outs,)
        locs = []
        for o in outs:
            src = o if o._data.ndim else _engine.bind(P.reshape_p, o, shape=(1,))
            locs.append([(self._source(src), 0, src.shape[0])])
        pn.locs = locs
        pn.concs = outs
        pn.call = True



def autobatch(strategy="agenda", profile=False, debug=False, levels=True):
    """Context in which ops record lazily and run batched (see the module docstring).

    The context is the calling thread's: other threads' ops run eagerly
    meanwhile (each thread may have a context of its own); one context is
    used by one thread at a time.

    ``with dn.autobatch() as ab:`` -- ``ab.stats`` (node and call counts,
    fallbacks per primitive, bytes gathered, times), ``ab.schedule`` (for
    every node the batched call that ran it) and ``ab.calls``. ``profile``
    also times the recording itself (``stats["record_s"]``; costs ~0.1 us per
    op). Shape errors are raised when an op is recorded, at its line; an error
    only the values show (an embedding id, a class out of range) is raised
    when the batch runs, naming the op, the node and its tag, and with
    ``debug`` the file and line that recorded it (~1 us more per op).
    ``levels`` runs a chain of same-signature groups of a primitive with a
    levels rule (``tree_lstm_node``, depth by depth) as one call of its
    per-level kernel where the schedule allows it (``stats["chains"]``
    counts them; see :mod:`.autobatch.levels`); ``False``: one call per group.
    """
    return AutoBatch(strategy, profile, debug, levels)
