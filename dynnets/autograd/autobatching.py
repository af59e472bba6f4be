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
:class:`~.primitives.core.BatchRule`). Code that reads a value midway
(data-dependent control flow) works: it forces what was recorded so far, and
the rest batches separately (smaller batches).

Execution: a batched call is an ordinary eager ``bind`` (the context is off
while it runs) on arguments gathered from the outputs of earlier calls, so the
batched calls and their gathers are nodes of the ordinary tape and
``backward()``, factored weight gradients, row-sparse embedding gradients and
the optimizers work unchanged. Every output of a call is one array; a node's
value is a row range of it (a view). An argument whose rows already lie in
order in one array is passed as that array or a slice of it (no copy);
otherwise one ``take``/``gather_rows`` copies the rows.

A node's value is kept as *pieces*: row ranges ``(source, start, stop)`` of
computed arrays (sources), its value the pieces' rows concatenated and
reshaped to the node's shape (0-d values are one row). View primitives
(reshape, concat/stack along axis 0, split_rows, row selection) only combine
pieces and never run.

Schedulers (``strategy=``): ``"agenda"`` (DyNet's default): among the ready
signatures run the one whose nodes have the lowest average depth, products
deferred on ties, once one of its (depth, signature) levels is complete (see
``_run_agenda``); ``"depth"``: by depth, then signature.
"""
from __future__ import annotations

import gc
import itertools
import os
import sys
import threading
import time
from typing import NamedTuple

import numpy as np

from . import engine as _engine
from . import primitives as P
from .engine import STATE as _Mode
from .primitives.core import Aval, ShapeError, run_rule
from .tensor import Parameter, Tensor, wrap_array

__all__ = ["autobatch", "AutoBatch", "LazyTensor", "ScheduledNode", "BatchedCall"]

_DATA = Tensor.__dict__["_data"]          # the array slot behind LazyTensor._data
_get_data = _DATA.__get__
_set_data = _DATA.__set__
_get_grad = Tensor.__dict__["_grad"].__get__
_set_grad = Tensor.__dict__["_grad"].__set__
_get_name = Tensor.__dict__["name"].__get__
_set_name = Tensor.__dict__["name"].__set__
_object_new = object.__new__
_NDARRAY = np.ndarray
_WEAK = (float, int, bool)
_KEYED_ARGS = 16
_VIEW = -1               # signature id of view nodes (no computation)
_SINGLE = -2             # of nodes that run one at a time (no rule applies)
# a (depth, signature) level of the agenda as one int: depth * _LEVEL_KEY + signature
# (a tuple key would cost an allocation per node; signature ids stay far below it)
_LEVEL_KEY = 1 << 32


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


class _Node:
    """A pending application: its context, plan (primitive, output avals,
    batching kind), inputs, attributes, signature id, depth, producers not yet
    run (``left``), consumers (``succ``); ``call`` is None until it ran."""

    __slots__ = ("ab", "plan", "args", "attrs", "sid", "depth", "left", "succ", "tag", "call", "pos", "index",
                 "locs", "concs", "where", "wait")


class _Plan:
    """What every application of one primitive with one input signature
    (shapes, dtypes, input types, attributes, grad mode) shares: the output
    avals from the shape rule, which inputs are per-instance (``kinds``), which
    shared inputs enter the signature by identity (``shared``), the kind of
    batching (``sid``: -1 view, -2 one at a time, else batched)."""

    __slots__ = ("prim", "out", "multi", "kinds", "shared", "sid", "gm", "descs", "diff", "bkey", "last")


_PLANS = {}
_PLANS_MAX = 20000
# (shape, dtype, type) of an input, and signatures, interned as small ints: the
# plan and signature keys are then tuples of ints, cheap to hash (a dtype's
# hash costs ~75 ns, and a tuple recomputes its items' hashes on every lookup)
_DESC_IDS = {}
_DESCS = []
_BKEY_IDS = {}
_SERIALS = itertools.count()


# the interning tables are shared by the contexts of all threads: a new entry
# is made under a lock (two threads interning at once would give two
# descriptions one id); a lookup needs none
_INTERN = threading.Lock()


def _desc_id(shape, dtype, tp):
    d = (shape, dtype, tp)
    i = _DESC_IDS.get(d)
    if i is None:
        with _INTERN:
            i = _DESC_IDS.get(d)
            if i is None:
                i = len(_DESCS)
                _DESCS.append(d)
                _DESC_IDS[d] = i
    return i


def _bkey_id(bk):
    i = _BKEY_IDS.get(bk)
    if i is None:
        with _INTERN:
            i = _BKEY_IDS.get(bk)
            if i is None:
                i = _BKEY_IDS[bk] = len(_BKEY_IDS)
    return i


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


class _Call:
    """A batched call's outputs: per output, its source index and the rows of
    each node (``None``: one row per node, in order)."""

    __slots__ = ("srcs", "rows")


class LazyTensor(Tensor):
    """A tensor recorded inside :func:`autobatch`: shape and dtype are known,
    the value is computed (batched) when first needed. After it is computed it
    behaves as an ordinary tensor, also after its context has ended."""

    __slots__ = ("_pn", "_k", "_desc", "_conc")

    # Tensor's _grad and name slots, read as None until set: recording sets
    # only what it must (requires_grad, _pn, _k, _desc)
    @property
    def _grad(self):
        try:
            return _get_grad(self)
        except AttributeError:
            return None

    @_grad.setter
    def _grad(self, value):
        _set_grad(self, value)

    @property
    def name(self):
        try:
            return _get_name(self)
        except AttributeError:
            return None

    @name.setter
    def name(self, value):
        _set_name(self, value)

    # the array slot, computed on first read (Tensor.data, numpy(), item()... read it)
    @property
    def _data(self):
        try:
            return _get_data(self)
        except AttributeError:
            return self._value()

    @_data.setter
    def _data(self, value):
        _set_data(self, value)

    @property
    def shape(self):
        return _DESCS[self._desc][0]

    @property
    def dtype(self):
        return _DESCS[self._desc][1]

    @property
    def ndim(self):
        return len(_DESCS[self._desc][0])

    def __len__(self):
        shape = _DESCS[self._desc][0]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    @property
    def _node(self):
        return self._eager()._node

    @property
    def _idx(self):
        return self._eager()._idx

    @property
    def is_leaf(self):
        return self._eager()._node is None

    @property
    def grad_fn(self):
        return self._eager()._node

    def backward(self, gradient=None, retain_graph=False):
        _engine.backward(self._eager(), gradient, retain_graph)

    def detach(self):
        return self._eager().detach()

    def _value(self):
        """The value as a numpy array (forces the context if pending)."""
        pn = self._pn
        if pn.call is None:
            pn.ab._force_for(self)
        d = pn.ab._read(self)
        _set_data(self, d)
        return d

    def _eager(self):
        """The value as an ordinary tensor on the tape (a view of its batch
        output), made once."""
        try:
            return self._conc
        except AttributeError:
            pass
        pn = self._pn
        if pn.call is None:
            pn.ab._force_for(self)
        c = self._conc = pn.ab._materialize(self)
        return c


_engine.register_lazy_type(LazyTensor)


def _ident(a):
    """How a shared input enters a signature: arrays and tensors by identity,
    Python and numpy scalars by value (their type is in the plan's key)."""
    tp = type(a)
    if tp in _WEAK or isinstance(a, np.generic) or a is None:
        return a
    return id(a)


def _trail(shape):
    return shape[1:] if shape else ()


def _rows(shape):
    return shape[0] if shape else 1


def _aval(a):
    tp = type(a)
    if tp is LazyTensor:
        d = _DESCS[a._desc]
        return Aval(d[0], d[1])
    if isinstance(a, Tensor):
        return a._data
    if tp is _NDARRAY:
        return a
    if tp in _WEAK:
        return Aval((), a)
    if a is None:
        return None
    return Aval(np.shape(a), np.asarray(a).dtype)


class AutoBatch:
    """The context object of :func:`autobatch`.

    Attributes
    ----------
    strategy : {"agenda", "depth"}
    tag : object
        Stored with every node recorded while it is set (e.g. ``(tree, node)``),
        shown in :attr:`schedule`.
    """

    def __init__(self, strategy="agenda", profile=False, debug=False):
        if strategy not in ("agenda", "depth"):
            raise ValueError(f"autobatch: strategy must be 'agenda' or 'depth', got {strategy!r}")
        self.strategy = strategy
        self.profile = bool(profile)
        self.debug = bool(debug)
        self.tag = None
        self._nodes = []            # pending nodes
        self._sigs = {}
        self._sources = []          # tensors that pieces index
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
                        views_passed=0, bytes_gathered=0, bytes_constants=0, forces=0, record_s=0.0,
                        schedule_s=0.0, gather_s=0.0, compute_s=0.0)
        self._prev = None
        self._serial = next(_SERIALS)

    # --- the context ----------------------------------------------------------------
    def __enter__(self):
        self._prev = _Mode.batch
        _Mode.batch = self
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
        _Mode.batch = self._prev
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
    def record(self, prim, args, attrs, first=False):
        """Record one application (called by bind); returns its lazy result(s),
        with ``first`` (:func:`~.engine.bind_first`) only the first result."""
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
                        return self.record(prim, args, attrs, first)
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
                plan = _PLANS.get(key)
            except TypeError:
                return self._record_other(prim, args, attrs, first)
        else:
            key = tuple(key)
            plan = _PLANS.get(key)
        if plan is None:
            # the shape rule (a shape error is raised here, at the user's line)
            plan = _make_plan(prim, args, attrs, gm, key)
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
                # not for Python scalars: they are keyed by value, and a freed
                # one's id may come back as another value
                if len(sh) == 2 and type(args[sh[0]]) not in _WEAK and type(args[sh[1]]) not in _WEAK:
                    plan.last = (self._serial, id(args[sh[0]]), id(args[sh[1]]), sid)
        pn = _object_new(_Node)
        pn.ab = self
        pn.plan = plan
        pn.args = args
        pn.attrs = attrs
        pn.sid = sid
        pn.tag = self.tag
        pn.where = _caller() if self.debug else None
        pn.call = None
        pn.succ = None
        # a computing node runs a step after its inputs; a view in the step
        # of its last input, after that step's calls (see _run_depth)
        if deps is None:
            pn.left = 0
            pn.depth = 0
        else:
            pn.left = len(deps)
            pn.depth = dmax + 1 if sid != _VIEW else dmax
            for d in deps:
                if d.succ is None:
                    d.succ = [pn]
                else:
                    d.succ.append(pn)
        self._nodes.append(pn)
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
            elif getattr(a, "_is_symbolic", False):
                out = _Mode.symbolic(prim, args, attrs)
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
                return self.record(prim, targs, attrs, first)
            except TypeError:
                pass
        # one at a time, with a plan of its own (not cached)
        plan = _make_plan(prim, targs, attrs, _Mode.grad_enabled, None)
        plan.sid = _SINGLE
        deps = [a._pn for a in targs if type(a) is LazyTensor and a._pn.call is None]
        pn = _object_new(_Node)
        pn.ab = self
        pn.plan = plan
        pn.args = targs
        pn.attrs = attrs
        pn.sid = _SINGLE
        pn.tag = self.tag
        pn.where = _caller() if self.debug else None
        pn.call = None
        pn.succ = None
        pn.left = len(deps)
        pn.depth = 1 + max((d.depth for d in deps), default=-1)
        for d in deps:
            if d.succ is None:
                d.succ = [pn]
            else:
                d.succ.append(pn)
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

    def _protect(self, arr, tp):
        """Make ``arr`` (read by a pending node) read-only until it ran;
        returns its interned (shape, dtype, type)."""
        dk = self._protected[id(arr)] = _desc_id(arr.shape, arr.dtype, tp)
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
        e = self._protected[id(t)] = (d, _desc_id(d.shape, d.dtype, tp), t)
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
        concatenated), ``forces``, ``pending``, and seconds: ``record_s``
        (with ``profile=True``), ``schedule_s``, ``gather_s`` (building
        batched arguments), ``compute_s`` (the batched calls themselves)."""
        d = dict(self._st)
        d["fallbacks"] = dict(d["fallbacks"])
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
    def _force_for(self, t):
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
        self._nodes = []
        base = self._st["nodes"]
        for pn in nodes:
            pn.index = base
            base += 1
        self._forcing = True
        prev = _Mode.batch
        _Mode.batch = None
        prev_gm = _Mode.grad_enabled
        st = self._st
        t0 = time.perf_counter()
        try:
            self._rebound(nodes)
            self._unprotect()
            if self.strategy == "depth":
                self._run_depth(nodes)
            else:
                self._run_agenda(nodes)
        except BaseException as exc:
            self._broken = (f"autobatch: running the pending nodes failed ({type(exc).__name__}: {exc}); the "
                            f"context's lazy tensors have no values")
            raise
        finally:
            _Mode.batch = prev
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
            pn.args = pn.succ = None        # no reference cycles left for the paused collector
        self._nodes = []

    def _unprotect(self):
        for a in self._readonly:
            a.flags.writeable = True
        self._readonly = []
        self._protected = {}
        self._tensors = []

    # --- schedulers -------------------------------------------------------------------
    def _run_depth(self, nodes):
        t0 = time.perf_counter()
        self._t_gather = 0.0
        self._t_compute = 0.0
        by_depth = {}
        for pn in nodes:
            lv = by_depth.get(pn.depth)
            if lv is None:
                lv = by_depth[pn.depth] = ({}, [])
            if pn.sid == _VIEW:
                lv[1].append(pn)
            elif pn.sid == _SINGLE:
                lv[0][(_SINGLE, pn.index)] = [pn]
            else:
                g = lv[0].get(pn.sid)
                if g is None:
                    lv[0][pn.sid] = [pn]
                else:
                    g.append(pn)
        for d in sorted(by_depth):
            groups, views = by_depth[d]
            for g in groups.values():
                self._run_group(g)
            for pn in views:
                self._run_view(pn)

    def _run_agenda(self, nodes):
        """DyNet's agenda (``exec.cc``): among the signatures with nodes
        ready to run, the one whose pending nodes have the lowest average
        depth runs next (all of its ready nodes, in one call), products
        deferred on ties; with one condition, in the spirit of DyNet's
        strategy 3: a signature runs only once some (depth, signature) level
        of it is complete, every pending node of that signature at that
        depth ready.

        Without the condition a signature whose average depth is low ran
        whenever a few of its nodes were ready, while the rest of the same
        level still waited behind a signature of higher average depth (in
        deep parts of the graph every signature's average is below the
        current depth): it ran again and again in small groups. A child-sum
        Tree-LSTM written from plain ops, where a per-node constant operand
        makes one op a signature of its own per node, ran its 20 sample trees
        in 2,927 calls against 746 for ``strategy="depth"``; with it, 746.
        Ready nodes of incomplete levels still join the call (the agenda's
        merging across depths, which the depth schedule cannot do).

        It never stalls: the pending computing nodes of the lowest depth have
        all their inputs computed (views and single nodes run as soon as they
        are ready), so their levels are complete."""
        self._t_gather = 0.0
        self._t_compute = 0.0
        K = _LEVEL_KEY
        # average depth per signature over all pending nodes (DyNet's heuristic),
        # and per level (depth * K + signature) the count of nodes not ready yet
        tot = {}
        cnt = {}
        wait = {}
        ready = {}
        now = []                    # views and single nodes: run as soon as ready
        for pn in nodes:
            s = pn.sid
            if s >= 0:
                d = pn.depth
                tot[s] = tot.get(s, 0) + d
                cnt[s] = cnt.get(s, 0) + 1
                if pn.left:
                    # the count of its level's nodes not ready yet, shared by them
                    k = d * K + s
                    c = wait.get(k)
                    if c is None:
                        c = wait[k] = [1]
                    else:
                        c[0] += 1
                    pn.wait = c
                else:
                    r = ready.get(s)
                    if r is None:
                        ready[s] = [pn]
                    else:
                        r.append(pn)
            elif pn.left == 0:
                now.append(pn)
        # signatures with a complete level among their ready nodes: at first
        # every ready one (a node without pending inputs has depth 0, and a
        # waiting node has depth >= 1)
        full = set(ready)
        prio = {}
        while True:
            while now:
                batch = now
                now = []
                for pn in batch:
                    if pn.sid == _VIEW:
                        self._run_view(pn)
                    else:
                        self._run_group([pn])
                    self._release(pn, ready, full, now)
            if not full:
                if ready:
                    raise AssertionError(f"autobatch: the agenda stalled with {len(ready)} signature(s) ready")
                break
            best = None
            bkey = None
            for s in full:
                p = prio.get(s)
                if p is None:
                    pr = ready[s][0].plan.prim.batch
                    p = prio[s] = (tot[s] / cnt[s], pr is not None and pr.kind == "rows")
                if bkey is None or p < bkey:
                    best, bkey = s, p
            full.discard(best)
            group = ready.pop(best)
            self._run_group(group)
            for pn in group:
                # _release inline (once per node)
                succ = pn.succ
                if succ is None:
                    continue
                pn.succ = None
                for q in succ:
                    q.left -= 1
                    if q.left == 0:
                        s = q.sid
                        if s >= 0:
                            r = ready.get(s)
                            if r is None:
                                ready[s] = [q]
                            else:
                                r.append(q)
                            c = q.wait
                            c[0] -= 1
                            if not c[0]:
                                full.add(s)
                        else:
                            now.append(q)

    @staticmethod
    def _release(pn, ready, full, now):
        succ = pn.succ
        if succ is None:
            return
        pn.succ = None
        for q in succ:
            q.left -= 1
            if q.left == 0:
                s = q.sid
                if s >= 0:
                    r = ready.get(s)
                    if r is None:
                        ready[s] = [q]
                    else:
                        r.append(q)
                    c = q.wait
                    c[0] -= 1
                    if not c[0]:
                        full.add(s)
                else:
                    now.append(q)

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
            if pn0.sid == _SINGLE:
                self._run_single(pn0)
            else:
                _RUN[pn0.plan.prim.batch.kind](self, group)
        except (ValueError, IndexError, TypeError, FloatingPointError) as exc:
            self._blame(group, exc)
            raise

    def _blame(self, group, exc):
        """A batched call failed (a value the shape rule cannot see: an id or
        a class out of range): run its nodes one at a time and raise the first
        node's own error, naming where it was recorded."""
        for pn in group:
            try:
                if len(group) > 1:
                    self._run_single(pn)
            except (ValueError, IndexError, TypeError, FloatingPointError) as e:
                err = e
            else:
                if len(group) > 1:
                    continue
                err = exc
            where = f"{pn.where}" if pn.where else "(dn.autobatch(debug=True) names the file and line)"
            msg = (f"{err} [autobatch: in node {pn.index} ({pn.plan.prim.name}"
                   f"{', tag ' + repr(pn.tag) if pn.tag is not None else ''}), recorded at {where}]")
            try:
                new = type(err)(msg)
            except TypeError:
                return
            raise new from err

    def _source(self, t):
        """Register tensor ``t`` (at least 1-D) as a source; its index."""
        i = len(self._sources)
        self._sources.append(t)
        return i

    def _source_of(self, t):
        """The source index of a concrete tensor used as per-instance rows."""
        i = self._src_of.get(id(t))
        if i is None:
            src = t if t._data.ndim else _engine.bind(P.reshape_p, t, shape=(1,))
            i = self._src_of[id(t)] = self._source(src)
            self._src_of[id(src)] = i
            self._keep.append(t)        # ids stay valid while the context lives
        return i

    def _pieces(self, t):
        """The pieces of lazy tensor ``t`` (computed): a list of (source, start, stop)."""
        pn = t._pn
        c = pn.call
        k = t._k
        if type(c) is not _Call:
            return pn.locs[k]
        rows = c.rows[k]
        if rows is None:
            p = pn.pos
            return [(c.srcs[k], p, p + 1)]
        a, b = rows[pn.pos]
        return [(c.srcs[k], a, b)]

    def _read(self, t):
        """Numpy value of a computed lazy tensor (a view of its source when it is one piece)."""
        ps = self._pieces(t)
        srcs = self._sources
        if len(ps) == 1:
            s, a, b = ps[0]
            d = srcs[s]._data[a:b]
        else:
            d = np.concatenate([srcs[s]._data[a:b].reshape(-1) for s, a, b in ps])
        shape = _DESCS[t._desc][0]
        if d.shape != shape:
            d = d.reshape(shape)
        return d

    def _materialize(self, t):
        """An ordinary tensor of a computed lazy tensor's value, on the tape."""
        pn = t._pn
        if type(pn.call) is not _Call and pn.concs is not None:
            return pn.concs[t._k]
        prev = _Mode.batch
        _Mode.batch = None
        prev_gm = _Mode.grad_enabled
        _Mode.grad_enabled = t.requires_grad or prev_gm
        try:
            ps = self._pieces(t)
            srcs = self._sources
            if len({tuple(srcs[s].shape[1:]) for s, _, _ in ps}) > 1:
                # pieces of different row shapes (a stack of differently made values)
                x = _engine.bind(P.concat_p, *[_engine.bind(P.reshape_p, self._gather_pieces([p], None), shape=(-1,))
                                               for p in ps])
            else:
                x = self._gather_pieces(ps, None)
            shape = _DESCS[t._desc][0]
            if tuple(x.shape) != shape:
                x = _engine.bind(P.reshape_p, x, shape=shape)
        finally:
            _Mode.batch = prev
            _Mode.grad_enabled = prev_gm
        return x

    def _shared(self, a):
        if type(a) is LazyTensor:
            return a._eager()
        return a

    def _gather_pieces(self, ps, trail):
        """One tensor holding the rows of pieces ``ps`` in order: a source
        itself, a slice of it (a view), or one gather (a copy)."""
        srcs = self._sources
        if len(ps) == 1:
            s, a, b = ps[0]
            src = srcs[s]
            if a == 0 and b == src.shape[0]:
                x = src
            else:
                x = _engine.bind(P.getitem_p, src, index=slice(a, b))
                self._st["views_passed"] += 1
            return x
        # coalesce adjacent pieces of one source
        which = []
        starts = []
        lens = []
        ls, lb = -1, -1
        for s, a, b in ps:
            if s == ls and a == lb:
                lens[-1] += b - a
            else:
                which.append(s)
                starts.append(a)
                lens.append(b - a)
            ls, lb = s, b
        if len(which) == 1:
            return self._gather_pieces([(which[0], starts[0], starts[0] + lens[0])], trail)
        # one gather (also from one source: its gradient stays row-sparse, so
        # the several gathers reading a batch output add up cheaply)
        uniq = sorted(set(which))
        local = {s: i for i, s in enumerate(uniq)}
        w = np.repeat(np.array([local[s] for s in which], dtype=np.int64), lens)
        rows = _expand(starts, lens)
        x = _engine.bind(P.gather_rows_p, w, rows, *[srcs[s] for s in uniq])
        st = self._st
        st["gathers"] += 1
        st["bytes_gathered"] += x._data.nbytes
        return x

    def _gather(self, items, trail):
        """The batched argument of per-instance ``items`` (lazy tensors,
        tensors, arrays), rows stacked along axis 0, trailing shape ``trail``."""
        t0 = time.perf_counter()
        if type(items[0]) is _NDARRAY and all(type(a) is _NDARRAY for a in items):
            x = items[0] if len(items) == 1 else np.concatenate([a.reshape((-1,) + trail) for a in items])
            self._st["bytes_constants"] += x.nbytes if len(items) > 1 else 0
            self._t_gather += time.perf_counter() - t0
            return x
        # the usual case first: every item one row of a batched call's output
        srcl = []
        rowl = []
        spush = srcl.append
        rpush = rowl.append
        for a in items:
            if type(a) is not LazyTensor:
                break
            pn = a._pn
            c = pn.call
            k = a._k
            if type(c) is _Call:
                if c.rows[k] is not None:
                    break
                spush(c.srcs[k])
                rpush(pn.pos)
            else:
                brk = False
                for s, r0, r1 in pn.locs[k]:
                    if r1 - r0 != 1:
                        brk = True
                        break
                    spush(s)
                    rpush(r0)
                if brk:
                    srcl = None
                    break
        else:
            x = self._gather_rows(srcl, rowl, trail) if srcl else None
            if x is not None:
                self._t_gather += time.perf_counter() - t0
                return x
        ps = []
        srcs = self._sources
        for a in items:
            if type(a) is LazyTensor:
                pn = a._pn
                c = pn.call
                if type(c) is _Call:
                    rows = c.rows[a._k]
                    if rows is None:
                        p = pn.pos
                        ps.append((c.srcs[a._k], p, p + 1))
                    else:
                        r = rows[pn.pos]
                        ps.append((c.srcs[a._k], r[0], r[1]))
                    continue
                loc = pn.locs[a._k]
                # a view's pieces: their rows must have the trailing shape wanted
                if all(tuple(srcs[s].shape[1:]) == trail for s, _, _ in loc):
                    ps.extend(loc)
                    continue
                a = a._eager()
                a = _engine.bind(P.reshape_p, a, shape=(-1,) + trail)
                i = self._source(a)
                ps.append((i, 0, a.shape[0]))
                continue
            if type(a) is _NDARRAY:
                a = wrap_array(a)
            i = self._source_of(a)
            src = srcs[i]
            if tuple(src.shape[1:]) != trail:
                src = _engine.bind(P.reshape_p, src, shape=(-1,) + trail)
                i = self._source(src)
            ps.append((i, 0, src.shape[0]))
        x = self._gather_pieces(ps, trail)
        self._t_gather += time.perf_counter() - t0
        return x

    def _gather_rows(self, srcl, rowl, trail):
        """Rows ``rowl[i]`` of sources ``srcl[i]``, in order: a source itself,
        a slice (a view), or one gather; None if a source's rows are not of
        shape ``trail`` (a view made of reshaped pieces)."""
        srcs = self._sources
        for s in set(srcl):
            if tuple(srcs[s].shape[1:]) != trail:
                return None
        s0 = srcl[0]
        r0 = rowl[0]
        n = len(rowl)
        if srcl.count(s0) == n and rowl[-1] - r0 == n - 1:
            rows = np.array(rowl)
            if n == 1 or (np.diff(rows) == 1).all():
                src = srcs[s0]
                if r0 == 0 and n == src.shape[0]:
                    return src
                self._st["views_passed"] += 1
                return _engine.bind(P.getitem_p, src, index=slice(r0, r0 + n))
        # source ids renumbered 0..k-1 through a lookup table (np.unique sorts: ~4x slower here)
        uniq = sorted(set(srcl))
        lut = np.empty(uniq[-1] + 1, dtype=np.int64)
        lut[uniq] = np.arange(len(uniq))
        x = _engine.bind(P.gather_rows_p, lut[np.array(srcl)], np.array(rowl, dtype=np.int64),
                         *[srcs[s] for s in uniq])
        st = self._st
        st["gathers"] += 1
        st["bytes_gathered"] += x._data.nbytes
        return x

    def _bind(self, pn0, prim, args, attrs):
        _Mode.grad_enabled = pn0.plan.gm
        t0 = time.perf_counter()
        try:
            return _engine.bind(prim, *args, **attrs)
        finally:
            self._t_compute += time.perf_counter() - t0

    def _assign(self, group, outs, rows_of):
        """Record where each node's outputs are: ``outs`` the call's output
        tensors, ``rows_of[k]`` None (one row per node) or (start, stop) per node."""
        c = _object_new(_Call)
        c.srcs = [self._source(o) for o in outs]
        c.rows = rows_of
        cid = self._new_call(group)
        i = 0
        for pn in group:
            pn.call = c
            pn.pos = i
            i += 1
        return c

    def _run_single(self, pn):
        """A node without a batching rule: run on its own (a fallback)."""
        self._new_call([pn], fallback=True)
        args = [a._eager() if type(a) is LazyTensor else a for a in pn.args]
        prim = pn.plan.prim
        outs = self._bind(pn, prim, args, pn.attrs)
        outs = outs if prim.multiple_results else (outs,)
        locs = []
        for o in outs:
            src = o if o._data.ndim else _engine.bind(P.reshape_p, o, shape=(1,))
            locs.append([(self._source(src), 0, src.shape[0])])
        pn.locs = locs
        pn.concs = outs
        pn.call = True

    def _run_view(self, pn):
        """A view node: its outputs' pieces from its inputs' (no computation)."""
        self._st["views"] += 1
        name = pn.plan.prim.name
        self._schedule.append((-1, name, (pn,)))
        args = pn.args
        if name == "reshape":
            locs = [self._pieces_of(args[0])]
        elif name in ("concat", "stack"):
            ps = []
            push = ps.append
            for a in args:
                if type(a) is LazyTensor:
                    q = a._pn
                    c = q.call
                    if type(c) is _Call and c.rows[a._k] is None:
                        push((c.srcs[a._k], q.pos, q.pos + 1))     # one row of a batched call (inline: ~1000 inputs)
                        continue
                ps.extend(self._pieces_of(a))
            locs = [ps]
        else:
            x = args[0]
            rows = self._row_pieces(x)
            if name == "split_rows":
                locs = [[r] for r in rows]
            elif name == "getitem":
                idx = pn.attrs["index"]
                if type(idx) is tuple:
                    idx = idx[0]
                sel = rows[idx]
                locs = [[sel] if type(sel) is tuple else sel]
            else:        # take
                idx = args[1]
                n = len(rows)
                if idx.size and (idx.min() < -n or idx.max() >= n):
                    raise P.IndexRangeError(f"take: an index is out of range for x.shape[0]={n}")
                locs = [[rows[int(i)] for i in idx]]
        pn.locs = locs
        pn.concs = None
        pn.call = True

    def _pieces_of(self, a):
        if type(a) is LazyTensor:
            return self._pieces(a)
        if type(a) is _NDARRAY:
            a = wrap_array(a)
        i = self._source_of(a)
        return [(i, 0, self._sources[i].shape[0])]

    def _row_pieces(self, x):
        """``x``'s pieces split into one piece per row of x (whose trailing
        shape is x.shape[1:])."""
        trail = tuple(_shape_of(x)[1:])
        ps = self._pieces_of(x)
        srcs = self._sources
        if not all(tuple(srcs[s].shape[1:]) == trail for s, _, _ in ps):
            e = x._eager() if type(x) is LazyTensor else x
            i = self._source(e)
            ps = [(i, 0, e.shape[0])]
        out = []
        for s, a, b in ps:
            for r in range(a, b):
                out.append((s, r, r + 1))
        return out


def _expand(starts, lens):
    """Row indices of consecutive ranges ``start[i] : start[i] + lens[i]``."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    if lens.max() == 1:
        return starts
    total = int(lens.sum())
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return offs + np.arange(total, dtype=np.int64)


# --- classification: the signature parts of one application, per rule kind -----------
# Each returns (parts, kinds) -- kinds[i] 1 for a per-instance input, 0 shared --,
# _VIEW for a view, or None when this application cannot batch (it runs alone).

def _cls_rows(rule, prim, args, avals, out, attrs):
    if rule.when is not None and not rule.when(*avals, **attrs):
        return None
    b = rule.batched
    if callable(b):
        b = b(**attrs)          # positions that depend on the attributes (a batchable_call's plan)
    parts = []
    kinds = []
    for i, a in enumerate(args):
        if i in b:
            av = avals[i]
            shp = av.shape
            if not shp:
                return None
            parts.append(shp[1:])
            parts.append(av.dtype)
            kinds.append(1)
        else:
            parts.append(_ident(a))
            kinds.append(0)
    return tuple(parts), kinds


def _cls_elementwise(rule, prim, args, avals, out, attrs):
    S = tuple(out.shape)
    nd = len(S)
    parts = []
    kinds = []
    for a, av in zip(args, avals):
        tp = type(a)
        if tp in _WEAK or av is None or isinstance(a, np.generic):
            parts.append(_ident(a))
            kinds.append(0)
            continue
        shp = tuple(av.shape)
        full = shp == S
        # per-instance unless a parameter that broadcasts as it is (a (1, H) weight)
        if full and (tp is not Parameter or (nd and S[0] != 1)):
            parts.append(shp[1:])
            parts.append(av.dtype)
            kinds.append(1)
            continue
        # a shared operand: it must broadcast the same way against stacked rows
        if nd == 0:
            if shp:
                return None
        elif len(shp) == nd and shp[0] != 1:
            return None
        parts.append(_ident(a))
        kinds.append(0)
    if 1 not in kinds:
        return None
    return tuple(parts), kinds


def _reduce_axes(attrs, nd):
    ax = attrs.get("axis")
    if ax is None:
        return tuple(range(nd))
    if isinstance(ax, (tuple, list)):
        return tuple(int(a) % nd for a in ax)
    return (int(ax) % nd,)


def _cls_reduce(rule, prim, args, avals, out, attrs):
    av = avals[0]
    nd = len(av.shape)
    if nd == 0:
        return None
    ax = _reduce_axes(attrs, nd)
    if 0 in ax:
        if prim.name == "max":
            return None
        return (("segment",), av.shape[1:], av.dtype), [1]
    return (av.shape[1:], av.dtype), [1]


def _cls_xent(rule, prim, args, avals, out, attrs):
    parts = []
    for av in avals:
        if av is None or not av.shape:
            return None
        parts.append(av.shape[1:])
        parts.append(av.dtype)
    return tuple(parts), [1] * len(args)


def _cls_view(rule, prim, args, avals, out, attrs):
    name = prim.name
    if name == "concat":
        if attrs.get("axis", 0) != 0 or any(not av.shape for av in avals):
            return _cls_rows_all(rule, prim, args, avals, out, attrs)
        return _VIEW
    if name == "stack":
        ax = attrs.get("axis", 0)
        if ax == 0:
            return _VIEW
        return _cls_rows_all(rule, prim, args, avals, out, attrs)
    if name in ("reshape", "split_rows"):
        return _VIEW
    if name == "take":
        if len(avals[1].shape) == 1 and type(args[1]) is _NDARRAY:
            return _VIEW
        return None
    if name == "getitem":
        idx = attrs["index"]
        first = idx[0] if type(idx) is tuple and len(idx) == 1 else idx
        if type(idx) is not tuple or len(idx) == 1:
            if type(first) is int or (type(first) is slice and first.step in (None, 1)):
                return _VIEW
        if type(idx) is tuple and len(idx) >= 2 and idx[0] == slice(None):
            for i in idx[1:]:
                if not (type(i) in (int, slice) or i is None or i is Ellipsis):
                    return None
            if Ellipsis in idx[1:] and len(avals[0].shape) < 1:
                return None
            av = avals[0]
            if not av.shape:
                return None
            return (av.shape[1:], av.dtype), [1]
        return None
    return None


def _cls_rows_all(rule, prim, args, avals, out, attrs):
    """Every input per-instance, stacked along axis 0 (concat/stack along another axis)."""
    parts = []
    for av in avals:
        if not av.shape:
            return None
        parts.append(av.shape[1:])
        parts.append(av.dtype)
    if len(set(av.shape[0] for av in avals)) != 1:
        return None
    return tuple(parts), [1] * len(args)


def _make_plan(prim, args, attrs, gm, key):
    """The plan of a new input signature: the shape rule's output avals (it
    raises ShapeError for bad inputs) and the batching rule's classification."""
    avals = [_aval(a) for a in args]
    out = run_rule(prim, avals, attrs)
    plan = _object_new(_Plan)
    plan.prim = prim
    plan.out = out
    plan.multi = prim.multiple_results
    plan.gm = gm
    plan.diff = gm and prim.differentiable
    plan.descs = tuple(_desc_id(tuple(o.shape), np.dtype(o.dtype), LazyTensor)
                       for o in (out if plan.multi else (out,)))
    plan.kinds = None
    plan.shared = ()
    plan.bkey = None
    plan.last = None
    rule = prim.batch
    cls = None if rule is None else _CLASSIFY[rule.kind](rule, prim, args, avals, out, attrs)
    if cls is None:
        plan.sid = _SINGLE
    elif cls is _VIEW:
        plan.sid = _VIEW
    else:
        kinds = cls[1]
        plan.kinds = kinds
        plan.shared = tuple(i for i, k in enumerate(kinds) if k == 0)
        # the signature without the shared inputs' identities (added per
        # application): per-instance inputs by trailing shape and dtype, so
        # applications with different row counts batch together
        parts = [prim, gm]
        for a, av, k in zip(args, avals, kinds):
            parts.append((av.shape[1:], np.dtype(av.dtype)) if k else type(a))
        try:
            if attrs:
                ak = prim.attr_key
                parts.append(ak(**attrs) if ak is not None else tuple(attrs.items()))
                parts.append(tuple(map(type, attrs.values())))
            plan.bkey = _bkey_id(tuple(parts))
            plan.sid = 0
        except TypeError:
            plan.sid = _SINGLE
    if key is not None:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


_CLASSIFY = {"rows": _cls_rows, "elementwise": _cls_elementwise, "reduce": _cls_reduce, "xent": _cls_xent,
             "view": _cls_view}


# --- runs: one batched call per group of same-signature nodes -----------------------

def _run_rows(ab, group):
    pn0 = group[0]
    kinds = pn0.plan.kinds
    bargs = []
    for i, k in enumerate(kinds):
        if k == 0:
            bargs.append(ab._shared(pn0.args[i]))
        else:
            bargs.append(ab._gather([pn.args[i] for pn in group], _trail(tuple(_shape_of(pn0.args[i])))))
    outs = ab._bind(pn0, pn0.plan.prim, bargs, pn0.attrs)
    if not pn0.plan.multi:
        outs = (outs,)
    p0 = pn0.plan
    same = True
    for pn in group:
        if pn.plan is not p0:
            same = False
            break
    rows_of = []
    for k, o in enumerate(outs):
        rows_of.append(_rows_per_node(group, k, o, same))
    ab._assign(group, outs, rows_of)


def _shape_of(a):
    if type(a) is LazyTensor:
        return _DESCS[a._desc][0]
    return np.shape(a._data if isinstance(a, Tensor) else a)


def _rows_per_node(group, k, o, same):
    """None when every node has one row of output ``k``, else (start, stop)
    per node; ``same``: every node has the group's first node's plan."""
    multi = group[0].plan.multi
    one = True
    for pn in (group[:1] if same else group):
        av = pn.plan.out[k] if multi else pn.plan.out
        if av.shape and av.shape[0] != 1:
            one = False
            break
    if one:
        if o.shape[0] != len(group):
            raise AssertionError(f"autobatch: {group[0].plan.prim.name} returned {o.shape[0]} rows for {len(group)} "
                                 f"nodes")
        return None
    res = []
    pos = 0
    for pn in group:
        av = pn.plan.out[k] if multi else pn.plan.out
        r = _rows(av.shape)
        res.append((pos, pos + r))
        pos += r
    if pos != o.shape[0]:
        raise AssertionError(f"autobatch: {group[0].plan.prim.name} returned {o.shape[0]} rows for {pos}")
    return res


def _run_reduce(ab, group):
    pn0 = group[0]
    nd = len(_shape_of(pn0.args[0]))
    ax = _reduce_axes(pn0.attrs, nd)
    if 0 not in ax:
        _run_rows(ab, group)
        return
    trail = tuple(_shape_of(pn0.args[0]))[1:]
    lens = [_shape_of(pn.args[0])[0] for pn in group]
    if min(lens) == 0:
        for pn in group:
            ab._run_single(pn)
        return
    x = ab._gather([pn.args[0] for pn in group], trail)
    rest = tuple(a for a in ax if a != 0)
    name = pn0.plan.prim.name
    if rest:
        x = ab._bind(pn0, P.sum_p, (x,), dict(axis=rest, keepdims=True))
    if max(lens) > 1:
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        x = ab._bind(pn0, P.segment_sum_p, (x, starts), {})
    if name == "mean":
        per = np.prod([trail[a - 1] for a in rest], dtype=np.int64) if rest else 1
        cnt = np.asarray(lens, dtype=np.float64) * per
        dt = pn0.plan.out.dtype
        cnt = cnt.astype(dt).reshape((-1,) + (1,) * (x.ndim - 1))
        x = ab._bind(pn0, P.div_p, (x, cnt), {})
    elif name == "sum" and x.dtype != pn0.plan.out.dtype:
        x = ab._bind(pn0, P.astype_p, (x,), dict(dtype=pn0.plan.out.dtype))
    ab._assign(group, (x,), [None])


def _run_xent(ab, group):
    pn0 = group[0]
    red = pn0.attrs.get("reduction", "mean")
    n = len(pn0.args)
    logits = ab._gather([pn.args[0] for pn in group], _trail(tuple(_shape_of(pn0.args[0]))))
    rest = [ab._gather([pn.args[i] for pn in group], ()) for i in range(1, n)]
    rest = [r._data if isinstance(r, Tensor) else r for r in rest]
    losses, probs = ab._bind(pn0, pn0.plan.prim, (logits, *rest), dict(reduction="none"))
    lens = [_shape_of(pn.args[0])[0] for pn in group]
    rows_p = None if max(lens) == 1 else _ranges(lens)
    if red == "none":
        ab._assign(group, (losses, probs), [rows_p, rows_p])
        return
    if min(lens) == 0:
        for pn in group:
            ab._run_single(pn)
        return
    x = losses
    starts = None
    if max(lens) > 1:
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        x = ab._bind(pn0, P.segment_sum_p, (x, starts), {})
    if red == "mean":
        w = rest[1] if n > 2 else None
        empty = None
        if w is None:
            tot = np.asarray(lens, dtype=x.dtype)
        else:
            w = np.asarray(w, dtype=x.dtype)
            tot = np.add.reduceat(w, starts) if starts is not None else w
            empty = tot == 0
            tot = np.where(empty, 1, tot).astype(x.dtype)
        if w is not None or max(lens) > 1:
            x = ab._bind(pn0, P.div_p, (x, tot), {})
        if empty is not None and empty.any():
            # an instance with every row masked: nan, as the unbatched primitive (its gradient stays 0)
            x = ab._bind(pn0, P.add_p, (x, np.where(empty, np.nan, 0).astype(x.dtype)), {})
    ab._assign(group, (x, probs), [None, rows_p])


def _ranges(lens):
    res = []
    pos = 0
    for r in lens:
        res.append((pos, pos + r))
        pos += r
    return res


_RUN = {"rows": _run_rows, "elementwise": _run_rows, "reduce": _run_reduce, "xent": _run_xent,
        "view": _run_rows}


def autobatch(strategy="agenda", profile=False, debug=False):
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
    """
    return AutoBatch(strategy, profile, debug)


_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _caller():
    """``file:line`` of the innermost frame outside the dynnets package."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else None
