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
application of the primitive ``batchable_call``
(:mod:`dynnets.autograd.primitives.call`, whose ``plan=`` attribute is the
call's traced signature, made here): the autobatch
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
plan's symbolic gradient (:func:`~dynnets.static.backward.gradients`, split
at the forward values it reads: a forward with gradients on keeps them, so
the VJP runs the backward equations only, with the forward's dropout
masks; see :class:`dynnets.static.batchable.BatchPlan`); its batching rule
stacks the per-instance inputs and shares the Parameters (``batch_rows``
with the per-instance positions taken from the plan).

Dropout inside a body (``dynnets.dropout``, ``nn.Dropout``...) is a
``dropout_mask`` node of the plan: each run draws a mask of the stacked
rows, so every instance (row) gets its own mask.

A body that is one primitive application (a library cell such as
``tree_lstm_node`` or ``lstm_cell``) needs no plan: the call runs the body,
which records that one application, batched by the primitive's own rule
(the same single record, without a session run around it).

When a call cannot be one record
--------------------------------
Data-dependent Python control flow in the body (``if x.sum() > 0``,
``.item()``, ``float(x)``: a symbolic value has no value), an op that mixes
rows, or a per-instance argument without rows make the signature fall back
to per-op recording: the body runs as written under the autobatch context
(every op recorded lazily), with a one-time :class:`BatchableFallback`
warning per function and reason. With ``@dn.batchable(strict=True)`` such a
call raises :class:`BatchableError` naming the function, the file and line,
and the reason. ``fn.traces`` counts traces, ``fn.fallbacks`` the calls that
fell back, ``fn.records`` the one-record calls.
"""
from __future__ import annotations

import functools
import importlib
import warnings

import numpy as np

from . import engine as _engine
from .autobatching import AutoBatch as _AutoBatch
from .autobatching import LazyTensor as _LAZY
from .engine import STATE as _Mode
from .primitives.call import batchable_call_p
from .tensor import Tensor

__all__ = ["batchable", "Batchable", "BatchableError", "BatchableFallback", "Fallback", "NotRowwise", "DIRECT",
           "set_plan_builder"]


class BatchableError(RuntimeError):
    """A ``@dn.batchable(strict=True)`` call that cannot be recorded as one call."""


class BatchableFallback(UserWarning):
    """A ``@dn.batchable`` call recorded per op (see :mod:`dynnets.autograd.batchable`)."""


class NotRowwise(Exception):
    """Raised inside a plan builder for a body that cannot be one record."""


class Fallback:
    """A signature recorded per op, and why (``site``: (file, line) or None)."""
    __slots__ = ("reason", "site")

    def __init__(self, reason, site):
        self.reason = reason
        self.site = site


class _Direct:
    """A signature whose body is one primitive application: the call runs the
    body, which records that one application (batched by its own rule)."""
    __slots__ = ()

    def __repr__(self):
        return "DIRECT"


DIRECT = _Direct()

_BUILDER = []


def set_plan_builder(fn):
    """Install the function that traces a signature into a plan (called once,
    by :mod:`dynnets.static.batchable`, which the autograd layer does not
    import): ``fn(fn, name, args, key, declared, grad_enabled)`` returns a
    plan (what :mod:`dynnets.autograd.primitives.call` reads) or a
    :class:`Fallback`."""
    _BUILDER[:] = [fn]


def _builder():
    if not _BUILDER:
        # the compiler is the static layer's, loaded on the first decorated call inside autobatch
        # (as dynnets.static loads on first use): importing it installs the builder
        importlib.import_module("dynnets.static.batchable")
    return _BUILDER[0]


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

    def _key(self, args):
        """(signature, per-instance arguments), or (None, why not) for
        arguments that cannot be one record. The signature is grad mode,
        then per argument (shape, dtype) or ("static", value); the
        decorated function is the plan table's own (``self._plans``)."""
        key = [_Mode.grad_enabled]
        inst = []
        for a in args:
            tp = type(a)
            # (this runs once per recorded call: the common types first, without conversions)
            if tp is _LAZY or tp is Tensor or isinstance(a, Tensor):
                inst.append(a)
                key.append((a.shape, a.dtype))
            elif tp is np.ndarray:
                inst.append(a)
                key.append((a.shape, a.dtype))
            elif isinstance(a, _STATIC_OK) or (not isinstance(a, (list, dict, set)) and _hashable(a)):
                key.append(("static", a))
            else:
                return None, f"an argument is neither a tensor nor hashable ({type(a).__name__})"
        return tuple(key), inst

    def __call__(self, *args, **kwargs):
        if type(_engine.current_interpreter()) is not _AutoBatch:
            return self.fn(*args, **kwargs)
        if kwargs:
            return self._fallback(args, "it was called with keyword arguments (pass them positionally)", None,
                                  kwargs)
        for a in args:
            if getattr(type(a), "__dynnets_interpreter__", None) is not None:
                return self.fn(*args)
        key, inst = self._key(args)
        if key is None:
            return self._fallback(args, inst, None)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._trace(args, key)
        if type(plan) is Fallback:
            return self._fallback(args, plan.reason, plan.site)
        self.records += 1
        if plan is DIRECT:
            return self.fn(*args)
        res = _engine.bind(batchable_call_p, *inst, *plan.params, plan=plan)
        return _rebuild(plan.template, res)

    def plan(self, *args):
        """The plan of ``args``' signature (one instance's arguments), traced
        now if new: what ``batchable_call``'s ``plan=`` attribute holds.
        ``plan.params`` are the Parameters it takes after the per-instance
        inputs. Raises :class:`BatchableError` when such a call is recorded
        per op, saying why."""
        key, inst = self._key(args)
        if key is None:
            raise BatchableError(f"batchable: {self.__qualname__}: {inst}")
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._trace(args, key)
        if type(plan) is Fallback:
            where = f" ({plan.site[0]}:{plan.site[1]})" if plan.site else ""
            raise BatchableError(f"batchable: {self.__qualname__}{where} is recorded per op: {plan.reason}")
        if plan is DIRECT:
            raise BatchableError(f"batchable: {self.__qualname__}: its body is one primitive application, "
                                 f"recorded as it is (no plan)")
        return plan

    def _fallback(self, args, reason, site, kwargs=None):
        where = f" ({site[0]}:{site[1]})" if site else ""
        if self.strict:
            raise BatchableError(f"batchable: {self.__qualname__}{where} cannot be recorded as one call: {reason}")
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"batchable: {self.__qualname__}{where} is recorded op by op: {reason}",
                          BatchableFallback, stacklevel=3)
        self.fallbacks += 1
        return self.fn(*args, **(kwargs or {}))

    def _declared(self, args):
        ps = list(self.extra_params)
        owner = self.fn if hasattr(self.fn, "parameters") else getattr(self.fn, "__self__", None)
        if owner is not None and callable(getattr(owner, "parameters", None)):
            ps.extend(owner.parameters())        # a Module or a bound method of one, as static.trace
        for a in args:
            if not isinstance(a, Tensor) and hasattr(a, "parameters") and callable(a.parameters):
                ps.extend(a.parameters())
        return ps

    def _trace(self, args, key):
        self.traces += 1
        return _builder()(self.fn, self.__qualname__, args, key, self._declared(args), _Mode.grad_enabled)


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
