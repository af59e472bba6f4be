"""Eager (define-by-run) execution: ``bind``, graph recording and ``backward``.

Every op on tensors goes through :func:`bind`, which checks the inputs (the
primitive's shape rule, run once per input signature: see "input checks"
below), runs the primitive's forward implementation and, when any input
requires a gradient and grad mode is on, records one :class:`Node`.
:func:`backward` walks the recorded nodes in reverse topological order with an
explicit stack (no Python recursion, so a chain of any length works) and calls
each primitive's VJP from the table in :mod:`dynnets.autograd.primitives`.

Per-op overhead is the enemy of dynamic networks (DESIGN.md rule 10), so the hot
path here avoids isinstance chains, keyword plumbing and copies: a node stores
the input arrays it already had, and tensors are created without ``__init__``.

The modes are per thread, as torch's grad mode: grad mode is one flag, and
every other mode (anomaly detection, autobatch, a trace's captured
Parameters) is an interpreter on the thread's interpreter stack, to which
bind hands the op (see "interpreters" and :class:`_ModeState`, ``STATE``);
static-graph values name their interpreter themselves.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import threading
import weakref
from bisect import bisect_right as _bisect_right
from heapq import heappop as _heappop
from heapq import heappush as _heappush

import numpy as np

from . import gradtypes as _gt
from .primitives.core import (PRIMITIVES, DTypeError, IndexRangeError, PromotionNeeded, ShapeError, check_shapes,
                              fmt_shape)

__all__ = [
    "Node", "bind", "bind1", "bind2", "bind_first", "backward", "no_grad", "enable_grad",
    "is_grad_enabled", "detect_anomaly", "is_anomaly_enabled", "register_symbolic_interpreter",
    "register_tensor_types", "capture_parameters", "push_interpreter", "pop_interpreter", "interpreter",
    "current_interpreter", "interpreter_stack", "bind_below",
    "accumulate_grad", "write_inplace", "memory_base", "set_grad_enabled", "inference_mode",
    "is_inference_mode_enabled", "alias",
]


class _ModeState(threading.local):
    """The explicit contexts of eager mode (DESIGN.md rule 7), one set per
    thread, as torch's grad mode: ``no_grad()`` or ``autobatch()`` in one
    thread leaves the ops of every other thread as they were. The class
    attributes are the values a thread starts with (grad on, no
    interpreter); an assignment sets the value for the assigning thread only.

    ``stack`` is this thread's interpreter stack (a tuple, bottom first; see
    :func:`push_interpreter`) and ``top`` its last entry (None when empty).

    ``path`` is derived, for bind's hot path: 0 grad on and no interpreter,
    1 grad off (no_grad) and no interpreter, 2 an interpreter on the stack
    (``top.bind`` takes every op). Every assignment to a field it depends on
    recomputes it (``__setattr__``), so code that writes
    ``STATE.grad_enabled`` directly keeps it right; and the module global
    ``_MODES`` holds one entry per thread whose ``path`` is not 0. That set
    holds no mode, only which threads left the fast path: bind reads it
    first and this thread's ``path`` only when some thread is in a mode (a
    thread-local attribute read costs 30-70 ns on the shared machine, a
    module global a few ns).
    """

    grad_enabled = True
    inference = False        # inside inference_mode() (grad_enabled is then False too)
    stack = ()               # this thread's interpreters, bottom first
    top = None               # stack[-1], or None when eager
    path = 0
    _token = None            # this thread's _InMode, made when its path first leaves 0

    def __setattr__(self, name, value):
        _local_setattr(self, name, value)
        if name == "grad_enabled":
            path = self.path
            if path != 2:       # at 2 an interpreter holds the path, and the stack did not change
                new = 0 if value else 1
                if new != path:
                    _set_path(self, new)
        elif name == "stack":
            _local_setattr(self, "top", value[-1] if value else None)
            path = 2 if value else 0 if self.grad_enabled else 1
            if path != self.path:
                _set_path(self, path)


def _set_path(m, path):
    """Set thread state ``m``'s path, entering or leaving ``_MODES``."""
    _local_setattr(m, "path", path)
    t = m._token
    if t is None:
        t = _InMode()
        _local_setattr(m, "_token", t)
    # a set's add and discard are atomic: no lock
    if path:
        _MODES.add(id(t))
    else:
        _MODES.discard(id(t))


def _grad_to(on):
    """Set this thread's grad mode and return the previous one: what the
    grad contexts do on entry and exit, without ``__setattr__``'s dispatch
    (``with no_grad():`` costs what it did with the process-wide state)."""
    m = _Mode
    prev = m.grad_enabled
    _local_setattr(m, "grad_enabled", on)
    path = m.path
    if path != 2:
        new = 0 if on else 1
        if new != path:
            t = m._token
            if t is None:
                _set_path(m, new)
            else:
                # _set_path inline: once per no_grad() entry and exit
                _local_setattr(m, "path", new)
                if new:
                    _MODES.add(id(t))
                else:
                    _MODES.discard(id(t))
    return prev


class _InMode:
    """One thread's entry in ``_MODES`` (its id); a thread that ends inside a
    mode (``set_grad_enabled(False)`` never undone) leaves ``_MODES`` when
    its thread-local state, which holds this object, is freed."""

    __slots__ = ()

    def __del__(self):
        try:
            _MODES.discard(id(self))
        except Exception:       # at interpreter shutdown the set may already be gone: nothing left to count
            pass


_local_setattr = threading.local.__setattr__
_MODES = set()               # one entry per thread whose path is not 0 (see _ModeState)
_Mode = _ModeState()


def is_grad_enabled() -> bool:
    """Whether ops record for backward in this thread (as ``torch.is_grad_enabled``)."""
    return bool(_Mode.grad_enabled)


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside ``inference_mode()`` (as ``torch.is_inference_mode_enabled``)."""
    return _Mode.inference


class _GradSwitch:
    """A grad-mode context that is also a decorator, as torch's: entering
    sets this thread's grad mode to ``_on``, leaving restores it. A
    decorated function runs in the mode on every call; a decorated generator
    function runs in it each time it resumes (the caller's mode in between),
    as in torch."""

    __slots__ = ("_on", "_prev")

    def _clone(self):
        c = object.__new__(type(self))
        c._on = self._on
        return c

    def __enter__(self):
        self._prev = _grad_to(self._on)

    def __exit__(self, tp, exc, tb):
        _grad_to(self._prev)
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{self._name()}: used as a decorator, expected a function, got {type(fn).__name__}")
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen(*args, **kwargs):
                g = fn(*args, **kwargs)
                try:
                    with self._clone():
                        item = g.send(None)
                    while True:
                        try:
                            sent = yield item
                        except GeneratorExit:
                            with self._clone():
                                g.close()
                            raise
                        except BaseException as exc:
                            with self._clone():
                                item = g.throw(exc)
                        else:
                            with self._clone():
                                item = g.send(sent)
                except StopIteration as stop:
                    return stop.value
            return gen

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._clone():
                return fn(*args, **kwargs)
        return wrapper

    def _name(self):
        return type(self).__name__

    def __repr__(self):
        return f"{self._name()}()"


class _NoGrad(_GradSwitch):
    __slots__ = ()

    def _name(self):
        return "no_grad"


class _EnableGrad(_GradSwitch):
    __slots__ = ()

    def _name(self):
        return "enable_grad"


def no_grad(func=None):
    """Context (and decorator) in which this thread's ops record nothing, as
    ``torch.no_grad``: ``with dn.no_grad():``, ``@dn.no_grad()`` or
    ``@dn.no_grad``; other threads keep their own mode."""
    c = object.__new__(_NoGrad)       # without __init__: entered once per eval step
    c._on = False
    return c if func is None else c(func)


def enable_grad(func=None):
    """Context (and decorator) in which this thread's ops record again, as
    ``torch.enable_grad`` (inside ``no_grad()``)."""
    c = object.__new__(_EnableGrad)
    c._on = True
    return c if func is None else c(func)


class set_grad_enabled(_GradSwitch):
    """Turn recording on or off in this thread, as ``torch.set_grad_enabled``:
    called, it sets the mode at once (``dn.set_grad_enabled(False)``); as a
    context (``with dn.set_grad_enabled(is_train):``) or a decorator it
    restores the previous mode after.

    Parameters
    ----------
    mode : bool
    """

    __slots__ = ()

    def __init__(self, mode):
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(f"set_grad_enabled: mode must be a bool, got {type(mode).__name__} {mode!r}")
        self._on = bool(mode)
        self._prev = _grad_to(self._on)

    def _clone(self):
        # a decorated function's calls: made without setting the mode at decoration time
        c = super()._clone()
        c._prev = None
        return c

    def __call__(self, fn):
        # as torch: decorating undoes the immediate effect of the constructor
        _grad_to(self._prev)
        return super().__call__(fn)

    def __enter__(self):
        # the mode before the constructor set it is the one restored on exit
        prev = _grad_to(self._on)
        if self._prev is None:
            self._prev = prev

    def __repr__(self):
        return f"set_grad_enabled(mode={self._on})"


class inference_mode(_GradSwitch):
    """Context (and decorator) for code that computes without gradients, as
    ``torch.inference_mode``: here the same as ``no_grad()`` (dynnets has no
    inference-only tensors: a result made inside can later be used in code
    that records, as a constant), and ``is_inference_mode_enabled()`` is True
    inside. ``inference_mode(False)`` turns inference mode off and grad mode
    on, as in torch. ``@inference_mode`` and ``@inference_mode()`` decorate.

    Parameters
    ----------
    mode : bool, default True
    """

    __slots__ = ()

    def __new__(cls, mode=True):
        if callable(mode):              # @inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(f"inference_mode: mode must be a bool, got {type(mode).__name__} {mode!r}")
        self._on = bool(mode)       # here: whether inference mode is on

    def _clone(self):
        return type(self)(self._on)

    def __enter__(self):
        m = _Mode
        self._prev = (_grad_to(not self._on), m.inference)
        m.inference = self._on

    def __exit__(self, tp, exc, tb):
        _grad_to(self._prev[0])
        _Mode.inference = self._prev[1]
        return False

    def __repr__(self):
        return f"inference_mode(mode={self._on})"


class AnomalyError(FloatingPointError):
    """Raised inside :func:`detect_anomaly` by the first op producing NaN/inf."""


# ---------------------------------------------------------------------------
# interpreters
#
# An execution mode other than plain eager is an interpreter: any object with
# a method ``bind(prim, args, attrs)`` that returns what :func:`bind` returns
# (a tensor, or a tuple for multiple-result primitives, or whatever values
# the mode works with: lazy tensors, static-graph values). Each thread has a
# stack of them; bind hands every op of the thread to the top one. An
# interpreter that handles only some ops passes the others on with
# :func:`bind_below` (the next interpreter down, eager at the bottom), so
# modes compose: anomaly detection under autobatch checks the batched ops
# when the batch runs; a trace's captured Parameters under anomaly detection
# are checked too.
#
# The stack holds the modes a thread enters (autobatch, anomaly detection, a
# trace's captured Parameters). Symbolic (static-graph) building is found
# from the arguments instead, as JAX finds the interpreter from its tracers:
# a static value names its interpreter in the class attribute
# ``__dynnets_interpreter__``, which bind's general path reads for any
# argument that is not an array, a tensor or a number. A graph is built by
# applying ops to its values, whatever the thread's stack, and an eager op
# never pays for a symbolic check (its arguments take the typed fast paths
# first). Grad mode is not an interpreter: it is one flag that every
# interpreter and the eager path read (``STATE.grad_enabled``).
#
# An interpreter whose results read their inputs later (autobatch's lazy
# tensors) sets the attribute ``deferred = True``: in-place writes and custom
# autograd Functions, which such recording cannot order, raise under it.
# ---------------------------------------------------------------------------

def push_interpreter(obj):
    """Make ``obj`` (anything with ``bind(prim, args, attrs)``) the
    interpreter of this thread's ops until :func:`pop_interpreter` removes
    it; prefer the context :func:`interpreter`."""
    if not callable(getattr(obj, "bind", None)):
        raise TypeError(f"push_interpreter: expected an object with a method bind(prim, args, attrs), got "
                        f"{type(obj).__name__}")
    m = _Mode
    m.stack = m.stack + (obj,)


def pop_interpreter(obj):
    """Remove ``obj``, which must be the top of this thread's interpreter
    stack (contexts leave in the reverse order they entered)."""
    m = _Mode
    st = m.stack
    if not st or st[-1] is not obj:
        top = type(st[-1]).__name__ if st else "nothing (eager mode)"
        raise RuntimeError(f"pop_interpreter: expected {type(obj).__name__} at the top of this thread's "
                           f"interpreter stack, got {top}: contexts must exit in the reverse order they entered")
    m.stack = st[:-1]


@contextlib.contextmanager
def interpreter(obj):
    """Context in which ``obj`` interprets this thread's ops (see
    :func:`push_interpreter`)."""
    push_interpreter(obj)
    try:
        yield obj
    finally:
        pop_interpreter(obj)


def current_interpreter():
    """The interpreter of this thread's ops: the top of its stack, None in
    eager mode."""
    return _Mode.top


def interpreter_stack():
    """This thread's interpreters, bottom first (a tuple)."""
    return _Mode.stack


def bind_below(obj, prim, args, attrs):
    """Apply ``prim`` as the interpreters below ``obj`` on this thread's stack
    would: the next one down binds it, eager mode (grad mode as set) when
    ``obj`` is the bottom one or is not on the stack."""
    st = _Mode.stack
    i = len(st) - 1
    while i >= 0 and st[i] is not obj:
        i -= 1
    if i > 0:
        return st[i - 1].bind(prim, args, attrs)
    return _bind_general(prim, args, attrs, bool(_Mode.grad_enabled))


class AnomalyInterpreter:
    """The interpreter of :func:`detect_anomaly`: each op runs as below it and
    its eager results are checked for NaN/inf (backward checks the gradients
    while one is on the stack)."""

    __slots__ = ()

    def bind(self, prim, args, attrs):
        st = _Mode.stack
        if st[0] is self:               # eager below: the forward's results checked as they are made
            return _bind_general(prim, args, attrs, bool(_Mode.grad_enabled), True)
        return bind_below(self, prim, args, attrs)


class CaptureInterpreter:
    """The interpreter of :func:`capture_parameters`: an op that reads one of
    the captured Parameters goes to the symbolic interpreter (which adds the
    Parameter to the trace's graph as a live input); the others run as below
    it."""

    __slots__ = ("ids", "symbolic")

    def __init__(self, ids, symbolic):
        self.ids = ids
        self.symbolic = symbolic

    def bind(self, prim, args, attrs):
        ids = self.ids
        for a in args:
            if id(a) in ids:
                return self.symbolic.bind(prim, args, attrs)
        return bind_below(self, prim, args, attrs)


def is_anomaly_enabled() -> bool:
    """Whether this thread is inside :func:`detect_anomaly` (as ``torch.is_anomaly_enabled``)."""
    return any(type(i) is AnomalyInterpreter for i in _Mode.stack)


@contextlib.contextmanager
def detect_anomaly():
    """Context in which the first op of this thread that produces NaN or inf,
    in the forward pass or in backward, raises :class:`AnomalyError` naming
    the op."""
    with interpreter(AnomalyInterpreter()):
        yield


# the static graph's interpreter, registered by dynnets.static when it is
# imported (register_symbolic_interpreter): a trace sends the ops that read
# its captured Parameters to it
_SYMBOLIC = [None]


def register_symbolic_interpreter(obj):
    """The hook by which :mod:`dynnets.static` hands the engine the
    interpreter that builds graph equations (the one its values name in
    ``__dynnets_interpreter__``); called once, when that module is imported."""
    _SYMBOLIC[0] = obj


class Node:
    """One recorded primitive application.

    ``args`` are the input arrays (or Python scalars) the forward saw,
    ``parents`` the input tensors aligned with ``args`` (``None`` for constants
    and for inputs that need no gradient), ``out`` the forward result (a tuple
    for multiple-result primitives), ``g`` the output gradient accumulated
    during backward, ``seq`` the creation order: a node is always created after
    the nodes of its inputs, so decreasing ``seq`` is a reverse topological
    order. A node recorded by an in-place op (:func:`write_inplace`) also
    has ``inplace``: ``(ghost, absorbed)``, the tensor holding the target's
    history before the write and the write numbers the node accounts for
    (the slot is left unset on every other node, so recording pays nothing).
    """

    __slots__ = ("prim", "args", "parents", "attrs", "out", "g", "seq", "inplace")

    def __init__(self, prim, args, parents, attrs, out, seq):
        self.prim = prim
        self.args = args
        self.parents = parents
        self.attrs = attrs
        self.out = out
        self.g = None
        self.seq = seq

    @property
    def freed(self):
        """Whether a backward without ``retain_graph`` released this node's
        saved arrays (it then holds ``args = None``; a recorded node always
        has a tuple): one slot fewer to set per recorded op."""
        return self.args is None

    def __repr__(self):
        return f"<Node {self.prim.name}>"


# The tensor classes, registered by dynnets.autograd.tensor when it defines
# them (register_tensor_types): Tensor's methods bind primitives, so
# tensor.py sits above this module, which cannot import it.
Tensor = Parameter = _TENSOR = _PARAM = None
_TP = frozenset()
_NODE = Node
_NDARRAY = np.ndarray
_object_new = object.__new__
_next_seq = itertools.count().__next__
# Argument types that are plain constants: bind takes its fast path for them
# without looking for an interpreter (a getattr with default costs ~0.1 us).
# The class attribute by which a value names the interpreter of the ops
# applied to it (see "interpreters"): a static graph's values carry it.
_INTERP = "__dynnets_interpreter__"
_CONST = frozenset({float, int, bool, np.ndarray, np.float64, np.float32, np.int64, np.int32, np.bool_})


# ---------------------------------------------------------------------------
# input checks
#
# Every application runs its primitive's shape rule, the input check. A rule
# depends only on the inputs' shapes and dtypes (a Python scalar counts by its
# type: numpy keeps it weak) and on the attributes, so bind keys that
# signature and runs the rule once per distinct key: a repeated signature costs
# building the key and one dict lookup. Checks that depend on values (class
# targets, ids, tree schedules) run on every call, inside the implementations.
# ---------------------------------------------------------------------------

_CHECKED_MAX = 4096      # signatures kept per primitive; the cache is emptied when full
# Applications with more inputs (a concat of a minibatch's node states) are
# checked without a key: their signatures rarely repeat, a key would cost as
# much as the rule, and thousands of them would fill the cache's memory.
_KEYED_ARGS = 16


def _check_miss(prim, key, arrays, attrs):
    """Run the shape rule for a signature not seen yet and remember its result
    (the output avals, which lazy recording under autobatch reads); ``key``
    None: the signature is not hashable, check without caching."""
    res = check_shapes(prim, arrays, attrs)
    if key is not None:
        checked = prim.checked
        if len(checked) >= _CHECKED_MAX:
            checked.clear()
        checked[key] = res
    return res


def _check(prim, sig, arrays, attrs):
    """The check of an application with attributes: ``sig`` (the inputs'
    shapes and dtypes) joined to the attributes, in the primitive's own
    hashable form where it has one (``attr_key``: getitem's slices)."""
    ak = prim.attr_key
    try:
        # the values' types too: axis=1.0 equals axis=1, but only one is valid
        key = (sig, *attrs.items(), *map(type, attrs.values())) if ak is None else (sig, ak(**attrs))
        if key in prim.checked:
            return
    except TypeError:
        key = None          # an attribute holds an array: checked on every call
    _check_miss(prim, key, arrays, attrs)


def _explain(prim, args, attrs, exc):
    """A failure inside a forward implementation, as an error naming the op:
    the shape rule's message when the rule rejects the inputs (DESIGN.md rule
    6), else the failure's own (a value-dependent one: an index out of range)."""
    try:
        check_shapes(prim, args, attrs)
    except ShapeError as err:
        raise err.with_traceback(None) from None
    if isinstance(exc, ShapeError):
        raise exc
    kind = IndexRangeError if isinstance(exc, IndexError) else \
        DTypeError if isinstance(exc, (TypeError, AttributeError)) else ShapeError
    raise kind(f"{prim.name}: {exc}") from exc


_WEAK = frozenset({float, int, bool})


def register_tensor_types(tensor, parameter):
    """The hook by which :mod:`dynnets.autograd.tensor` hands the engine the
    classes it creates (``tensor``) and recognises on bind's fast path (both):
    called once, when that module defines them."""
    global Tensor, Parameter, _TENSOR, _PARAM, _TP
    Tensor = _TENSOR = tensor
    Parameter = _PARAM = parameter
    _TP = frozenset({tensor, parameter})
# the lazy tensor class of dynnets.autograd.autobatching (register_lazy_type):
# eager ops on a forced lazy tensor use its view on the tape
_LAZY = [None]


def register_lazy_type(cls):
    """The hook by which :mod:`dynnets.autograd.autobatching` hands the engine
    its lazy tensor class (a Tensor subclass): an eager op on a lazy tensor
    after its context ran reads the tensor's view on the tape."""
    _LAZY[0] = cls


# The explicit contexts' state of the calling thread (grad mode, the
# interpreter stack): read as attributes (``STATE.grad_enabled``), each
# thread seeing its own; change the stack through push_interpreter and
# pop_interpreter.
STATE = _Mode


@contextlib.contextmanager
def capture_parameters(params):
    """The tracing hook (:mod:`dynnets.static.trace`): inside, every op of
    this thread that reads one of the Parameters ``params`` goes to the
    symbolic interpreter, which adds the Parameter to the trace's graph as a
    live input, instead of running eagerly (a :class:`CaptureInterpreter`
    on this thread's stack). Other threads, which may run eager ops on the
    same Parameters while a trace runs, keep their fast paths and their
    results."""
    sym = _SYMBOLIC[0]
    if sym is None:
        raise RuntimeError("capture_parameters: no symbolic interpreter is registered; import dynnets.static first")
    with interpreter(CaptureInterpreter(frozenset(map(id, params)), sym)):
        yield


def bind_first(prim, *args):
    """``bind(prim, *args)[0]`` for a multiple-result primitive whose other
    results (saved residuals) the caller never reads: an interpreter with a
    ``bind_first(prim, args, attrs)`` method (autobatch: it then makes only
    the first result's lazy tensor, two objects fewer per Tree-LSTM node)
    takes it whole."""
    if _MODES and _Mode.path > 1:
        top = _Mode.top
        f = getattr(top, "bind_first", None)
        return f(prim, args, {}) if f is not None else top.bind(prim, args, {})[0]
    return bind(prim, *args)[0]


def bind(prim, *args, **attrs):
    """Apply primitive ``prim`` to ``args`` (tensors or constants).

    Returns a Tensor (a tuple of Tensors for multiple-result primitives). When
    an argument is a symbolic static-graph value, the static handler builds a
    graph node instead. The inputs are checked first (see above). Inside
    :func:`dynnets.autobatch` the application is recorded lazily instead.
    """
    # this thread's mode (0 record, 1 no_grad, 2 another), read only when
    # some thread is in a mode
    path = _Mode.path if _MODES else 0
    if path > 1:
        return _Mode.top.bind(prim, args, attrs)
    # Fast paths for one and two arguments (most ops): unrolled, without the
    # per-argument list building of the general path (measured ~0.5 us/op).
    n = len(args)
    if n == 2:
        x, y = args
        tp = type(x)
        if tp is _TENSOR or tp is _PARAM:
            xd = x._data
            xs = xd.shape
            xt = xd.dtype
            if not x.requires_grad:
                x = None
        elif tp is _NDARRAY:
            xd = x
            xs = x.shape
            xt = x.dtype
            x = None
        elif tp in _WEAK:
            xd = x
            xs = tp
            xt = None
            x = None
        else:
            return _bind_general(prim, args, attrs, not path)
        tp = type(y)
        if tp is _TENSOR or tp is _PARAM:
            yd = y._data
            ys = yd.shape
            yt = yd.dtype
            if not y.requires_grad:
                y = None
        elif tp is _NDARRAY:
            yd = y
            ys = y.shape
            yt = y.dtype
            y = None
        elif tp in _WEAK:
            yd = y
            ys = tp
            yt = None
            y = None
        else:
            return _bind_general(prim, args, attrs, not path)
        key = (xs, xt, ys, yt)
        if attrs:
            _check(prim, key, (xd, yd), attrs)
        elif key not in prim.checked:
            _check_miss(prim, key, (xd, yd), attrs)
        return _apply(prim, (xd, yd), None if path or (x is None and y is None) else (x, y), attrs)
    if n == 1:
        x = args[0]
        tp = type(x)
        if tp is _TENSOR or tp is _PARAM:
            xd = x._data
            if not attrs:
                return bind1(prim, x)
            # one tensor with attributes (x[i], x.sum(axis), reshape): _check and
            # the single-result recording inline, as in bind1
            ak = prim.attr_key
            try:
                key = ((xd.shape, xd.dtype), *attrs.items(), *map(type, attrs.values())) if ak is None else \
                    ((xd.shape, xd.dtype), ak(**attrs))
                hit = key in prim.checked
            except TypeError:
                key = None
                hit = False
            if not hit:
                _check_miss(prim, key, (xd,), attrs)
            try:
                out = prim.impl(xd, **attrs)
            except _IMPL_ERRORS as exc:
                _explain(prim, (xd,), attrs, exc)
            if path or not x.requires_grad or prim.multiple_results or not prim.differentiable:
                return _finish(prim, (xd,), (x,) if x.requires_grad and not path else None, attrs, out)
            node = _object_new(_NODE)
            node.prim = prim
            node.args = (xd,)
            node.parents = (x,)
            node.attrs = attrs
            node.out = out
            node.g = None
            node.seq = _next_seq()
            t = _object_new(_TENSOR)
            t._data = out
            t._grad = None
            t.requires_grad = True
            t._node = node
            t._idx = 0
            t.name = None
            return t
    elif n == 3 or n == 4:
        # three or four tensors (a tree node, a leaf, linear): unrolled too,
        # which costs less with the key than the loop did without it (measured)
        x, y, z = args[0], args[1], args[2]
        tp = _TP
        if type(x) in tp and type(y) in tp and type(z) in tp:
            xd, yd, zd = x._data, y._data, z._data
            if n == 3:
                key = (xd.shape, xd.dtype, yd.shape, yd.dtype, zd.shape, zd.dtype)
                arrays = (xd, yd, zd)
                rg = x.requires_grad or y.requires_grad or z.requires_grad
                parents = (x if x.requires_grad else None, y if y.requires_grad else None,
                           z if z.requires_grad else None) if rg else None
            else:
                w = args[3]
                if type(w) not in tp:
                    return _bind_general(prim, args, attrs, not path)
                wd = w._data
                key = (xd.shape, xd.dtype, yd.shape, yd.dtype, zd.shape, zd.dtype, wd.shape, wd.dtype)
                arrays = (xd, yd, zd, wd)
                rg = x.requires_grad or y.requires_grad or z.requires_grad or w.requires_grad
                parents = (x if x.requires_grad else None, y if y.requires_grad else None,
                           z if z.requires_grad else None, w if w.requires_grad else None) if rg else None
            if attrs:
                _check(prim, key, arrays, attrs)
            elif key not in prim.checked:
                _check_miss(prim, key, arrays, attrs)
            return _apply(prim, arrays, None if path else parents, attrs)
    return _bind_general(prim, args, attrs, not path)


def _bind_general(prim, args, attrs, rec, anomaly=False):
    """bind's path for any arguments: ``rec`` whether grad mode is on (record
    a node when an input needs a gradient), ``anomaly`` whether to check the
    results for NaN/inf; symbolic arguments go to the static handler."""
    if len(args) > _KEYED_ARGS:
        return _bind_many(prim, args, attrs, rec, anomaly)
    arrays = []
    parents = []
    key = []
    # bound methods: ~20 appends per cell application, ~15 ns saved each
    push, ppush, kpush = arrays.append, parents.append, key.append
    keyed = True
    rg = False
    for a in args:
        tp = type(a)
        if tp is _TENSOR or tp is _PARAM:
            d = a._data
            push(d)
            kpush(d.shape)
            kpush(d.dtype)
            if a.requires_grad:
                rg = True
                ppush(a)
            else:
                ppush(None)
        elif tp is _NDARRAY:
            push(a)
            kpush(a.shape)
            kpush(a.dtype)
            ppush(None)
        elif tp in _WEAK:
            push(a)
            kpush(tp)
            kpush(None)
            ppush(None)
        elif tp in _CONST:
            push(a)
            kpush(a.shape)
            kpush(a.dtype)
            ppush(None)
        elif getattr(tp, _INTERP, None) is not None:
            return getattr(tp, _INTERP).bind(prim, args, attrs)
        elif isinstance(a, Tensor):        # other Tensor subclasses
            if tp is _LAZY[0]:
                a = a._eager()             # a forced lazy tensor, on the tape
            d = a._data
            push(d)
            kpush(d.shape)
            kpush(d.dtype)
            if a.requires_grad:
                rg = True
                ppush(a)
            else:
                ppush(None)
        else:
            # a list, None or another object: no cheap signature, checked on every call
            push(a)
            keyed = False
            ppush(None)
    arrays = tuple(arrays)
    if keyed:
        key = tuple(key)
        if attrs:
            _check(prim, key, arrays, attrs)
        elif key not in prim.checked:
            _check_miss(prim, key, arrays, attrs)
    else:
        _check_miss(prim, None, arrays, attrs)
    return _apply(prim, arrays, tuple(parents) if rg and rec else None, attrs, anomaly)


def _bind_many(prim, args, attrs, rec, anomaly):
    """:func:`_bind_general` for many inputs: the rule runs without a key."""
    arrays = []
    parents = []
    push, ppush = arrays.append, parents.append
    rg = False
    for a in args:
        tp = type(a)
        if tp is _TENSOR or tp is _PARAM or (tp is not _NDARRAY and isinstance(a, Tensor)
                                             and getattr(tp, _INTERP, None) is None):
            if tp is _LAZY[0]:
                a = a._eager()
            push(a._data)
            if a.requires_grad:
                rg = True
                ppush(a)
            else:
                ppush(None)
        elif getattr(tp, _INTERP, None) is not None:
            return getattr(tp, _INTERP).bind(prim, args, attrs)
        else:
            push(a)
            ppush(None)
    arrays = tuple(arrays)
    check_shapes(prim, arrays, attrs)
    return _apply(prim, arrays, tuple(parents) if rg and rec else None, attrs, anomaly)


_IMPL_ERRORS = (ValueError, IndexError, TypeError, OverflowError, AttributeError)
# the attributes of an application without any: one shared dict, which nothing
# writes to (bind1/bind2 would otherwise build an empty one per op)
_NO_ATTRS = {}


def bind1(prim, x):
    """``bind(prim, x)`` without attributes: the path of unary ops and
    methods (``tanh(x)``, ``x.sum()``). The same checks and recording as
    :func:`bind`, without its argument packing and dispatch (measured: the
    call, the packing and the separate recording call cost ~0.25 us per op)."""
    path = _Mode.path if _MODES else 0
    if path > 1:
        # the interpreter at once (not through bind: one call less per op)
        return _Mode.top.bind(prim, (x,), _NO_ATTRS)
    tp = type(x)
    if tp is not _TENSOR and tp is not _PARAM:
        return bind(prim, x)
    xd = x._data
    key = (xd.shape, xd.dtype)
    if key not in prim.checked:
        _check_miss(prim, key, (xd,), _NO_ATTRS)
    try:
        out = prim.impl(xd)
    except _IMPL_ERRORS as exc:
        _explain(prim, (xd,), _NO_ATTRS, exc)
    if path or not x.requires_grad or prim.multiple_results or not prim.differentiable:
        return _finish(prim, (xd,), (x,) if x.requires_grad and not path else None, _NO_ATTRS, out)
    node = _object_new(_NODE)
    node.prim = prim
    node.args = (xd,)
    node.parents = (x,)
    node.attrs = _NO_ATTRS
    node.out = out
    node.g = None
    node.seq = _next_seq()
    t = _object_new(_TENSOR)
    t._data = out
    t._grad = None
    t.requires_grad = True
    t._node = node
    t._idx = 0
    t.name = None
    return t


def bind2(prim, x, y):
    """``bind(prim, x, y)`` without attributes: the path of binary ops and
    operators (``x @ w``, ``x + b``); see :func:`bind1`."""
    path = _Mode.path if _MODES else 0
    if path > 1:
        return _Mode.top.bind(prim, (x, y), _NO_ATTRS)
    a = x
    tp = type(x)
    if tp is _TENSOR or tp is _PARAM:
        xd = x._data
        xs = xd.shape
        xt = xd.dtype
        if not x.requires_grad:
            x = None
    elif tp is _NDARRAY:
        xd = x
        xs = x.shape
        xt = x.dtype
        x = None
    elif tp in _WEAK:
        xd = x
        xs = tp
        xt = None
        x = None
    else:
        if isinstance(x, np.generic) and type(y) in (_TENSOR, _PARAM):
            # torch takes a numpy scalar beside a tensor for the Python number it holds
            # (weak: the tensor's dtype wins), numpy for a typed 0-d array
            return bind2(prim, x.item(), y)
        return bind(prim, a, y)
    tp = type(y)
    if tp is _TENSOR or tp is _PARAM:
        yd = y._data
        ys = yd.shape
        yt = yd.dtype
        if not y.requires_grad:
            y = None
    elif tp is _NDARRAY:
        yd = y
        ys = y.shape
        yt = y.dtype
        y = None
    elif tp in _WEAK:
        yd = y
        ys = tp
        yt = None
        y = None
    else:
        if isinstance(y, np.generic) and type(a) in (_TENSOR, _PARAM):
            return bind2(prim, a, y.item())      # (a numpy scalar: see above)
        return bind(prim, a, y)
    key = (xs, xt, ys, yt)
    if key not in prim.checked:
        _check_miss(prim, key, (xd, yd), _NO_ATTRS)
    try:
        out = prim.impl(xd, yd)
    except _IMPL_ERRORS as exc:
        _explain(prim, (xd, yd), _NO_ATTRS, exc)
    if path or (x is None and y is None) or prim.multiple_results or not prim.differentiable:
        return _finish(prim, (xd, yd), None if path or (x is None and y is None) else (x, y), _NO_ATTRS, out)
    node = _object_new(_NODE)
    node.prim = prim
    node.args = (xd, yd)
    node.parents = (x, y)
    node.attrs = _NO_ATTRS
    node.out = out
    node.g = None
    node.seq = _next_seq()
    t = _object_new(_TENSOR)
    t._data = out
    t._grad = None
    t.requires_grad = True
    t._node = node
    t._idx = 0
    t.name = None
    return t


def _apply(prim, arrays, parents, attrs, anomaly=False):
    """Run the forward of checked inputs; record a node when ``parents``
    (inputs needing grad, None in no_grad) is given; ``anomaly``: check the
    result for NaN/inf first."""
    try:
        # without **{}: unpacking an empty dict costs ~0.05 us per op
        out = prim.impl(*arrays, **attrs) if attrs else prim.impl(*arrays)
    except _IMPL_ERRORS as exc:
        _explain(prim, arrays, attrs, exc)
    if anomaly:
        _check_finite(prim, out, "forward")
    return _finish(prim, arrays, parents, attrs, out)


def _finish(prim, arrays, parents, attrs, out):
    """The result tensor(s) of a forward's result ``out``, recorded when
    ``parents`` is given (the callers pass None in no_grad: this reads no
    mode)."""
    if parents is None or not prim.differentiable:
        if prim.multiple_results:
            # inline, as below: a comprehension of helper calls cost ~1 us more per op
            res = []
            i = 0
            for o in out:
                t = _object_new(_TENSOR)
                t._data = o
                t._grad = None
                t.requires_grad = False
                t._node = None
                t._idx = i
                t.name = None
                res.append(t)
                i += 1
            return tuple(res)
        t = _object_new(_TENSOR)
        t._data = out
        t._grad = None
        t.requires_grad = False
        t._node = None
        t._idx = 0
        t.name = None
        return t
    # the slots directly: Node.__init__'s call costs ~0.15 us per recorded op
    node = _object_new(_NODE)
    node.prim = prim
    node.args = arrays
    node.parents = parents
    node.attrs = attrs
    node.out = out
    node.g = None
    node.seq = _next_seq()
    if prim.multiple_results:
        res = []
        i = 0
        for o in out:
            t = _object_new(_TENSOR)
            t._data = o
            t._grad = None
            t.requires_grad = True
            t._node = node
            t._idx = i
            t.name = None
            res.append(t)
            i += 1
        return tuple(res)
    t = _object_new(_TENSOR)
    t._data = out
    t._grad = None
    t.requires_grad = True
    t._node = node
    t._idx = 0
    t.name = None
    return t


def _check_finite(prim, out, where, which=None):
    outs = out if isinstance(out, tuple) else (out,)
    for o in outs:
        if o is not None:
            o = _gt.values(o)
        if o is not None and np.asarray(o).dtype.kind in "fc" and not np.all(np.isfinite(o)):
            what = f" (gradient of input {which})" if which is not None else ""
            raise AnomalyError(f"detect_anomaly: op '{prim.name}' produced NaN or inf in {where}{what}")


_add = _gt.add
_add_inner = _gt.add_inner
_dense = _gt.densify
_is_lazy = _gt.is_lazy
_is_outer_sum = _gt.is_outer_sum
_form = _gt.form
_OUTER = _gt.OuterSum
# the gradient types that are not arrays yet: a set lookup inline, not a call
_LAZY_T = _gt.LAZY_TYPES


def alias(t, value):
    """A tensor holding array ``value`` whose gradient flows unchanged into
    tensor ``t``, whatever array ``t`` holds now (an identity node on the tape
    when ``t`` requires grad, in any grad mode). How autobatch runs a pending
    op with the array a tensor held when the op was recorded, after the
    tensor's array was replaced (``t.data = new``): as in eager mode, the op's value and the
    gradients it passes back use the recorded array, and ``t`` receives its
    gradient."""
    from .primitives.elementwise import copy_p
    return _finish(copy_p, (value,), (t,) if t.requires_grad else None, _NO_ATTRS, value)


def accumulate_grad(t, g):
    """Add gradient ``g`` into leaf ``t``'s ``.grad`` (as backward does)."""
    t._grad = _add(t._grad, _gt.leaf_grad(g, t._data))


_SEEDS = {}
_FREED_MSG = ("backward: part of this graph was already freed by an earlier backward; "
              "pass retain_graph=True to the first call")


def backward(root, gradient=None, retain_graph=False, inputs=None):
    """Reverse-mode sweep from ``root``; see :meth:`Tensor.backward`.

    ``inputs`` (a sequence of tensors, torch's ``backward(inputs=)``):
    gradients are accumulated into those tensors' ``.grad`` only (leaves or
    not) and into no other leaf. Non-leaf tensors marked with
    :func:`retain_grad` get their ``.grad`` too.

    Nodes are processed from a max-heap on creation order, so discovery and
    processing are one pass (no separate topological sort) and no Python
    recursion is involved. A node enters the heap when it first receives a
    gradient; when it is popped, every node created after it that could add
    to its gradient has already been processed. Leaf gradients are applied
    only after the sweep succeeds, so an error (a freed subgraph, an
    anomaly) leaves no leaf half-updated.
    """
    if _ORPHANS:
        _check_orphans()
    if not root.requires_grad:
        raise RuntimeError("backward: tensor does not require grad and has no grad_fn")
    data = root._data
    if gradient is None:
        if data.size != 1:
            raise RuntimeError(
                f"backward: grad can be implicitly created only for scalar outputs; "
                f"got shape {data.shape}, pass gradient= explicitly")
        if data.shape == ():
            # one read-only 1 per dtype (VJPs never write to their g; a leaf
            # given it copies it, see leaf_grad)
            g = _SEEDS.get(data.dtype)
            if g is None:
                g = _SEEDS[data.dtype] = np.array(1, data.dtype)
                g.flags.writeable = False
        else:
            g = np.ones(data.shape, data.dtype)
    else:
        # a copy: the caller's array must not become (or be viewed by) a leaf's .grad
        g = np.array(gradient._data if isinstance(gradient, Tensor) else gradient, dtype=data.dtype)
        if g.shape != data.shape:
            raise ShapeError(f"backward: gradient shape {g.shape} does not match tensor shape {data.shape}")
    node = root._node
    only = capture = None
    if inputs is not None or _RETAINED:
        only, capture = _targets(inputs)
    if node is None:
        if only is None or id(root) in only:
            accumulate_grad(root, g)
        return
    if node.args is None:
        raise RuntimeError(
            "backward: trying to backward through the graph a second time (the graph was freed "
            "after the first backward); pass retain_graph=True to the first call")
    if node.g is not None:
        raise RuntimeError("backward: a backward pass through this graph is already running")
    if node.prim.multiple_results:
        _seed(node, root._idx, g)
    else:
        node.g = g
    heap = [(-node.seq, node)]
    leaves = []
    factored = {}
    anomaly = _MODES and _Mode.path > 1 and is_anomaly_enabled()
    # the version checks (see "in-place writes"): read once; -1 while no
    # in-place op ever wrote, when each check costs one comparison
    last_write = _last_write
    last_swap = _last_swap
    try:
        while heap:
            n = _heappop(heap)[1]
            gn = n.g
            n.g = None
            prim = n.prim
            if prim.multiple_results:
                # (a list from _seed, only read by the VJP) densified only if needed
                for x in gn:
                    if type(x) in _LAZY_T:
                        gn = [_dense(y, prim.lazy_grads) for y in gn]
                        break
            elif type(gn) in _LAZY_T:
                gn = _dense(gn, prim.lazy_grads)
            if capture is not None and n in capture:
                for t in capture[n]:
                    gt = gn[t._idx] if prim.multiple_results else gn
                    if gt is not None:
                        leaves.append((t, gt))
            parents = n.parents
            attrs = n.attrs
            args = n.args
            out = n.out
            if last_write >= 0 and last_write > n.seq:
                _check_saved(n, args, out, parents, attrs)
            if not retain_graph:
                # free as we go: saved arrays are released while the sweep runs
                # (args None marks the node freed)
                n.args = None
                n.out = None
                n.parents = ()
            joint = prim.joint_vjp
            if joint is not None:
                grads = joint(gn, args, out, **attrs) if attrs else joint(gn, args, out)
            else:
                vjps = prim.vjps
            i = -1
            for p in parents:
                i += 1
                if p is None:
                    continue
                if joint is None:
                    f = vjps[i]
                    if f is None:
                        continue
                    gi = f(gn, args, out, **attrs) if attrs else f(gn, args, out)
                else:
                    gi = grads[i]
                if gi is None:
                    continue
                if anomaly:
                    _check_finite(prim, gi, "backward", i)
                pn = p._node
                if last_swap >= 0 and pn is not None:
                    ps = pn.seq
                    if ps > n.seq or ps < last_swap:
                        p, pn = _history_at(p, pn, n, i)
                tg = type(gi)
                if pn is None:
                    if tg is _OUTER:
                        # factored weight gradients of one leaf are gathered
                        # here and formed with one product after the sweep
                        # (a VJP returns a fresh OuterSum per input, so the
                        # first one can be extended in place)
                        acc = factored.get(id(p))
                        if acc is None:
                            factored[id(p)] = (p, gi)
                        else:
                            acc[1].add(gi)
                    else:
                        leaves.append((p, gi))
                    continue
                if pn.args is None:
                    raise RuntimeError(_FREED_MSG)
                if tg is _NDARRAY:
                    # a gradient takes its input's dtype on every edge, as in
                    # PyTorch (a VJP of a mixed float32/float64 op computes in
                    # float64) and as static gradients are declared
                    dt = p._data.dtype
                    if gi.dtype is not dt and gi.dtype != dt:
                        gi = gi.astype(dt)
                # _seed inline (an edge into every tree node in recursive models)
                pg = pn.g
                if pg is None:
                    _heappush(heap, (-pn.seq, pn))
                    if pn.prim.multiple_results:
                        pn.g = pg = [None] * len(pn.out)
                        pg[p._idx] = gi
                    else:
                        pn.g = gi
                elif pn.prim.multiple_results:
                    k = p._idx
                    old = pg[k]
                    pg[k] = gi if old is None else _add_inner(old, gi)
                else:
                    pn.g = _add_inner(pg, gi)
    except BaseException:
        # no stale gradients left on pending nodes (a retained graph stays usable)
        for _, n in heap:
            n.g = None
        raise
    if only is not None:
        leaves = [(p, gi) for p, gi in leaves if id(p) in only]
        factored = {k: v for k, v in factored.items() if k in only}
    given = None
    many = len(leaves) > 1
    for p, gi in leaves:
        if p._grad is None and type(gi) is _NDARRAY:
            # a fresh array of the leaf's dtype and shape becomes its .grad as
            # it is (accumulate_grad's general case, inline); but one array can
            # reach several leaves (add's VJP passes its g to both operands, a
            # reshape's a view of it), and each .grad gets memory of its own, so
            # that changing one in place (p.grad.data.mul_(s), clamp_) leaves
            # the others as they are, as in torch
            d = p._data
            if gi.dtype == d.dtype and gi.shape == d.shape and gi.flags.writeable:
                if many:
                    key = id(gi) if gi.base is None else id(memory_base(gi))
                    if given is None:
                        given = {key}
                    elif key in given:
                        gi = gi.copy()
                    else:
                        given.add(key)
                p._grad = gi
                continue
        accumulate_grad(p, gi)
    for p, gi in factored.values():
        if p._grad is None:
            # all factors of this parameter in one matrix product
            p._grad = _form(gi, p._data.dtype)
            continue
        accumulate_grad(p, gi)
        p._grad = _form(p._grad, p._data.dtype)



def _seed(node, idx, g):
    if node.prim.multiple_results:
        if node.g is None:
            node.g = [None] * len(node.out)
        node.g[idx] = _add(node.g[idx], g)
    else:
        node.g = _add(node.g, g)


# ---------------------------------------------------------------------------
# in-place writes: torch's in-place ops and version counter
#
# An in-place op (``x += y``, ``x.add_(y)``, ``x[i] = v``...) writes into the
# tensor's array. When it is recorded for gradients, the tensor gets a new
# history: a node of the out-of-place primitive whose first parent is a
# "ghost", a tensor object holding the target's previous history (the nodes
# that read the target before keep pointing at the same Python object, so
# backward walks back from the new node to the ghost for them, see
# _history_at).
#
# Recording pays nothing for this: no node keeps versions. Instead every
# in-place write is logged per block of memory (the numpy base array, which
# views share, as torch counts per storage) with a number from the nodes'
# counter, and backward checks, only where a write came after a node:
#
# * saved values: what a node's VJPs read (its primitive's ``vjp_reads``)
#   must not have been written after the node was recorded (torch's "one of
#   the variables needed for gradient computation has been modified by an
#   inplace operation");
# * histories: a write that gave a tensor a new history changed, without
#   their histories knowing, every other tensor sharing that memory (a view,
#   the tensor a view was taken from, a detach()). A node that read such a
#   tensor after that write would get a wrong gradient, so backward raises,
#   except for the writes the node accounts for: an in-place op through a
#   view from getitem gives the viewed tensor the new history as well
#   (``y[0:2] += x``, torch's CopySlices), and ``x[i] = t`` accounts for
#   what was written through ``t`` when ``t`` is that very region (how
#   Python runs ``x[i] += v`` on a tensor x without history);
# * orphans: a tensor without history whose array is a view, given a
#   history by an in-place op, leaves the tensor it views without it (that
#   one records nothing, so no node can tell): every backward raises until
#   the write is accounted for (``x[i] = t``) or the memory is freed.
# ---------------------------------------------------------------------------

_last_write = -1          # number of the latest in-place write
_last_swap = -1           # ... of the latest one that gave a tensor a new history
_WRITES = {}              # id(base array) -> _Log
_ORPHANS = {}             # id(base array) -> (weakref, {write number: op})


class _Log:
    """The in-place writes to one block of memory: the latest (number and
    op), and those that gave a tensor a new history (increasing numbers)."""

    __slots__ = ("ref", "last", "op", "swaps", "swap_ops")

    def __init__(self, ref):
        self.ref = ref
        self.last = -1
        self.op = None
        self.swaps = []
        self.swap_ops = []


def memory_base(a):
    """The array that owns ``a``'s memory (``a`` itself if it owns it): the
    unit of the in-place version counter, as torch's storage."""
    b = a.base
    while type(b) is np.ndarray or isinstance(b, np.ndarray):
        a = b
        b = a.base
    return a


def _forget(key):
    def gone(ref):
        log = _WRITES.get(key)
        if log is not None and log.ref is ref:
            del _WRITES[key]
        o = _ORPHANS.get(key)
        if o is not None and o[0] is ref:
            del _ORPHANS[key]
    return gone


def _log_of(base, create=False):
    key = id(base)
    log = _WRITES.get(key)
    if log is not None and log.ref() is base:
        return log
    if not create:
        return None
    log = _WRITES[key] = _Log(weakref.ref(base, _forget(key)))
    return log


def _log_write(dst, seq, op, swap):
    global _last_write, _last_swap
    log = _log_of(memory_base(dst), create=True)
    log.last = seq
    log.op = op
    _last_write = seq
    if swap:
        log.swaps.append(seq)
        log.swap_ops.append(op)
        _last_swap = seq
    return log


def _ghost(t):
    """A stand-in holding ``t``'s current history, before ``t`` gets a new one."""
    g = _object_new(_TENSOR)
    g._data = t._data
    g._grad = None
    g.requires_grad = t.requires_grad
    g._node = t._node
    g._idx = t._idx
    g.name = None
    return g


def _inplace_chain(t):
    """The numbers of the in-place writes in ``t``'s history since its last
    ordinary op (the writes made through ``t``)."""
    seqs = []
    n = t._node
    while n is not None:
        ip = getattr(n, "inplace", None)
        if ip is None:
            break
        seqs.append(n.seq)
        n = ip[0]._node
    return seqs


def _is_basic_index(index):
    for i in (index if type(index) is tuple else (index,)):
        if not (i is None or i is Ellipsis or type(i) in (int, slice) or isinstance(i, np.integer)):
            return False
    return True


def _view_origin(op, t, dst):
    """The tensor ``t`` is a view of by getitem, with the index: ``(p,
    index)``, or None. Raises for a view of a leaf that requires grad (as
    torch). Only getitem views are followed (reshape, transpose... views are
    not: the viewed tensor's later uses then raise in backward)."""
    n = t._node
    while n is not None:
        ip = getattr(n, "inplace", None)
        if ip is None:
            break
        n = ip[0]._node
    if n is None or n.args is None or not n.parents:
        return None
    p, a0 = n.parents[0], n.args[0]
    if p is None or type(a0) is not np.ndarray or memory_base(a0) is not memory_base(dst):
        return None
    if p._node is None:
        raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used in an in-place "
                           f"operation (as torch: wrap it in dn.no_grad(), or change a clone())")
    if n.prim.name == "getitem" and memory_base(p._data) is memory_base(dst) and _is_basic_index(n.attrs["index"]):
        return p, n.attrs["index"]
    return None


def _rebase(op, origin, value, seq):
    """Give the tensor ``value`` is a view of (``origin``: tensor and index)
    the history ``p[index] = value`` after ``value`` was changed in place by
    write ``seq`` (torch's CopySlices), and so on up a chain of views."""
    p, index = origin
    up = _view_origin(op, p, p._data)
    ghost = _ghost(p)
    node = _object_new(_NODE)
    node.prim = PRIMITIVES["setitem"]
    node.args = (p._data, value._data)
    node.parents = (ghost, value)
    node.attrs = {"index": index}
    node.out = p._data
    node.g = None
    node.seq = _next_seq()
    node.inplace = (ghost, frozenset((seq,)))
    p._node = node
    p._idx = 0
    if up is not None:
        _rebase(op, up, p, seq)


def _orphan(dst, seq, op):
    base = memory_base(dst)
    log = _log_of(base, create=True)
    entry = _ORPHANS.get(id(base))
    if entry is None or entry[0] is not log.ref:
        entry = _ORPHANS[id(base)] = (log.ref, {})
    entry[1][seq] = op


def _check_orphans():
    """Raise for an orphan write whose memory is still alive. Memory that is
    only held by unreachable objects (a reference cycle: a test's or a loop's
    leftovers) is collected first, so whether backward raises never depends
    on when the cyclic collector last ran (rare: only after an orphan write)."""
    import gc
    gc.collect()
    if _ORPHANS:
        _raise_orphan()


def _raise_orphan():
    seq, op = next(iter(next(iter(_ORPHANS.values()))[1].items()))
    raise RuntimeError(
        f"backward: an in-place '{op}' gave a value that requires grad to a view of another tensor's memory "
        f"(such as t = out[0] of a tensor out that requires no grad, then t += v or t[1] = v); the tensor "
        f"it views does not record it, so gradients through that tensor would be wrong. Index the tensor "
        f"itself (out[0] += v, out[0, 1] = v), or change a clone() of the view. This error remains until "
        f"that memory is freed.")


def write_inplace(op, target, prim, others, attrs, write, casting="same_kind", absorb=None):
    """Apply in-place op ``op`` (``"add_"``, ``"setitem"``...) to eager tensor
    ``target``: ``target`` takes the value of ``prim(target, *others,
    **attrs)``, which ``write(dst, *arrays, **attrs)`` writes into ``target``'s
    array (the same array object, so whoever holds it, ``target.data`` or
    ``target.numpy()``, sees the change).

    As torch: the result must keep ``target``'s shape and, with ``casting=
    "same_kind"``, its dtype must cast to ``target``'s (an int tensor cannot
    take ``/= 2``); a leaf that requires grad raises outside ``no_grad``;
    under grad mode, when ``target`` or an operand requires grad, the
    application is recorded and ``target`` takes its new place in the graph.
    ``absorb``: for ``x[i] = t`` where ``t`` is the very region ``x[i]``, the
    tensor whose in-place writes this write accounts for.

    Returns ``target``.
    """
    state = STATE
    lazy = _LAZY[0]
    if _MODES and state.path > 1 and any(getattr(i, "deferred", False) for i in state.stack):
        raise RuntimeError(
            f"{op}: in-place operations are not supported inside dn.autobatch(): the pending ops read their "
            f"inputs when the batch runs, so a write would change what they compute. Write it out of place "
            f"(y = y + x; dn.where for an item assignment), or before entering or after leaving the context")
    if lazy is not None and isinstance(target, lazy):
        raise RuntimeError(
            f"{op}: this tensor was computed by dn.autobatch() (its array is a view of a batch's results); "
            f"in-place operations on it are not supported: write it out of place (y = y + x) or change "
            f"y.clone()")
    dst = target._data
    if type(dst) is not np.ndarray:
        # a numpy scalar (a whole-tensor reduction's result): immutable and
        # shared with no other tensor, so it becomes an array of its own
        dst = target._data = np.array(dst)
    had = target.requires_grad
    grad = state.grad_enabled
    if grad and had and target._node is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation "
                           f"(as torch: wrap the update in dn.no_grad(), as an optimizer step does, or change "
                           f"a clone())")
    arrays = [dst]
    parents = [None]
    rg = False
    for a in others:
        if isinstance(a, Tensor):
            if a is target:
                arrays.append(dst)
                parents.append(a if had else None)     # the ghost, once made
                rg = rg or had
                continue
            if lazy is not None and type(a) is lazy:
                a = a._eager()
            arrays.append(a._data)
            parents.append(a if a.requires_grad else None)
            rg = rg or a.requires_grad
        elif getattr(type(a), _INTERP, None) is not None:
            raise TypeError(f"{op}: cannot write a static-graph value into an eager tensor (got {a!r})")
        else:
            # a numpy scalar counts as its Python number (weak), as in torch
            arrays.append(a.item() if isinstance(a, np.generic) else a)
            parents.append(None)
    try:
        try:
            aval = _checked(prim, arrays, attrs)
        except PromotionNeeded:
            # a float tensor updated by an integer or bool operand (x.add_(idx)), an
            # int32 one by an int64 (+, -, *: the low bits are the same): torch computes
            # in x's dtype, numpy would promote float32 to float64, int32 to int64
            rest = arrays[1:]
            if not (dst.dtype.kind == "f" or (dst.dtype.kind in "iu" and prim.name in ("add", "sub", "mul"))) or \
                    not all(a is dst or (isinstance(a, np.ndarray) and a.dtype.kind in "biu") for a in rest):
                raise
            arrays = [dst] + [a if a is dst else a.astype(dst.dtype) for a in rest]
            aval = _checked(prim, arrays, attrs)
    except ShapeError as e:
        raise type(e)(f"{op}: {e}") from None
    if tuple(aval.shape) != dst.shape:
        raise ShapeError(f"{op}: output with shape {fmt_shape(dst.shape)} doesn't match the broadcast shape "
                         f"{fmt_shape(tuple(aval.shape))} (an in-place op keeps the tensor's shape, as torch)")
    if casting == "same_kind" and aval.dtype != dst.dtype and not np.can_cast(aval.dtype, dst.dtype, "same_kind"):
        raise DTypeError(f"{op}: result type {aval.dtype} can't be cast to the desired output type {dst.dtype} "
                         f"(an in-place op keeps the tensor's dtype, as torch)")
    record = grad and prim.differentiable and (had or rg)
    origin = None
    if record:
        if dst.dtype.kind != "f":
            raise DTypeError(f"{op}: a value that requires grad cannot be written into a tensor of dtype "
                             f"{dst.dtype} (only floating-point tensors have gradients)")
        if had:
            origin = _view_origin(op, target, dst)
    if not dst.flags.writeable:
        raise RuntimeError(f"{op}: the tensor's array is read-only (an expanded or broadcast view, whose "
                           f"elements share memory, the dense copy p.grad gives of a row-sparse gradient, or an "
                           f"array made read-only): change a clone() instead")
    saved = arrays
    if record:
        # what the VJPs will read of the inputs must survive the write: a
        # copy of each such input that shares memory with the target
        reads = prim.vjp_reads
        need = set()
        for i, pa in enumerate(parents):
            if pa is not None or (i == 0 and had):
                need.update(range(len(arrays)) if reads is None else reads if prim.joint_vjp is not None
                            else reads[i])
        saved = list(arrays)
        for j in need:
            if j != "out" and type(arrays[j]) is np.ndarray and np.may_share_memory(arrays[j], dst):
                saved[j] = arrays[j].copy()
    try:
        write(*arrays, **attrs)
    except (ValueError, TypeError, OverflowError) as e:
        kind = DTypeError if isinstance(e, TypeError) else ShapeError
        raise kind(f"{op}: {e}") from None
    seq = _next_seq()
    _log_write(dst, seq, op, record)
    if not record:
        return target
    ghost = _ghost(target)
    parents = [ghost if (pa is target or i == 0) and had else pa for i, pa in enumerate(parents)]
    absorbed = ()
    if absorb is not None:
        absorbed = frozenset(_inplace_chain(absorb))
        entry = _ORPHANS.get(id(memory_base(dst)))
        if entry is not None:
            for w in absorbed:
                entry[1].pop(w, None)
            if not entry[1]:
                del _ORPHANS[id(memory_base(dst))]
    node = _object_new(_NODE)
    node.prim = prim
    node.args = tuple(saved)
    node.parents = tuple(parents)
    node.attrs = attrs
    node.out = dst
    node.g = None
    node.seq = seq
    node.inplace = (ghost, absorbed)
    target._node = node
    target._idx = 0
    target.requires_grad = True
    if origin is not None:
        _rebase(op, origin, target, seq)
    elif not had and dst.base is not None:
        _orphan(dst, seq, op)
    return target


def _checked(prim, arrays, attrs):
    """The output aval of ``prim`` on ``arrays``: the shape rule's result,
    looked up in the primitive's input-check cache under bind's key for the
    same signature (a miss runs the rule and fills the cache)."""
    sig = []
    for a in arrays:
        tp = type(a)
        if tp is _NDARRAY:
            sig.append(a.shape)
            sig.append(a.dtype)
        elif tp in _WEAK:
            sig.append(tp)
            sig.append(None)
        else:
            return check_shapes(prim, arrays, attrs)      # a list...: no cheap signature
    sig = tuple(sig)
    ak = prim.attr_key
    try:
        key = sig if not attrs else (sig, *attrs.items(), *map(type, attrs.values())) if ak is None \
            else (sig, ak(**attrs))
        aval = prim.checked.get(key)
    except TypeError:
        return check_shapes(prim, arrays, attrs)          # an attribute holds an array
    return aval if aval is not None else _check_miss(prim, key, arrays, attrs)


def _written_after(a, seq):
    """The op of an in-place write to ``a``'s memory after ``seq``, or None."""
    log = _log_of(memory_base(a))
    if log is not None and log.last > seq:
        return log.op
    return None


def _check_saved(n, args, out, parents, attrs):
    """Raise if a value the VJPs of node ``n`` read was written in place after
    ``n`` was recorded (torch's version-counter check)."""
    prim = n.prim
    reads = prim.vjp_reads
    if args is None:
        return                       # freed: backward reports that itself
    if reads is None:
        need = list(range(len(args))) + ["out"]
    elif prim.joint_vjp is not None:
        need = reads
    else:
        need = []
        for i, p in enumerate(parents):
            if p is not None:
                need.extend(reads[i])
    seq = n.seq
    for j in need:
        if j == "out":
            for o in (out if prim.multiple_results else (out,)):
                if type(o) is np.ndarray:
                    op = _written_after(o, seq)
                    if op is not None:
                        _raise_saved(prim, "its output", o, op)
        else:
            a = args[j]
            if type(a) is np.ndarray:
                op = _written_after(a, seq)
                if op is not None:
                    _raise_saved(prim, f"its input {j}", a, op)
    # index arrays among the attributes (getitem's) are read by the VJPs too
    for v in attrs.values():
        for a in (v if type(v) is tuple else (v,)):
            if type(a) is np.ndarray:
                op = _written_after(a, seq)
                if op is not None:
                    _raise_saved(prim, "an index array", a, op)


def _raise_saved(prim, what, a, op):
    raise RuntimeError(
        f"backward: one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: {what} (shape {fmt_shape(a.shape)}, {a.dtype}), saved by '{prim.name}' for its "
        f"gradient, was changed by '{op}' after '{prim.name}' was recorded. Compute out of place "
        f"(y = y + x rather than y += x), or change a clone()")


def _history_at(p, pn, n, k):
    """The history of parent ``k`` of node ``n`` (tensor ``p``, its node
    ``pn``) as ``n`` read it: older than ``n`` (an in-place op since gave
    ``p`` a new one: back through the ghosts), and raising when an in-place
    op through other tensors sharing ``p``'s memory changed its value
    between that history and ``n``."""
    seq = n.seq
    while pn is not None and pn.seq > seq:
        p = pn.inplace[0]
        pn = p._node
    if pn is None:
        return p, pn
    log = _log_of(memory_base(p._data))
    if log is None or not log.swaps or log.swaps[-1] <= pn.seq:
        return p, pn
    swaps = log.swaps
    ip = getattr(n, "inplace", None)
    absorbed = ip[1] if ip is not None and k == 0 and ip[0] is p else ()
    j = _bisect_right(swaps, pn.seq)
    while j < len(swaps) and swaps[j] < seq:
        if swaps[j] not in absorbed:
            raise RuntimeError(
                f"backward: input {k} of '{n.prim.name}' was changed in place by '{log.swap_ops[j]}' through "
                f"another tensor sharing its memory (a view of it, or the tensor it is a view of) after "
                f"'{pn.prim.name}' computed it and before '{n.prim.name}' read it, so its recorded history no "
                f"longer gives its value and the gradient would be wrong. Change a clone(), or index the "
                f"tensor itself (y[0:2] += x rather than changing a reshape or transpose of y)")
        j += 1
    return p, pn


# --- i22-torch-a: retain_grad and backward(inputs=) ---------------------------------------------------

# the non-leaf tensors whose .grad backward fills (Tensor.retain_grad), by
# id: weak references, so that marking a tensor does not keep it (or its
# graph) alive (not a WeakSet: its lookups compare tensors with ==, which is
# elementwise)
_RETAINED = {}


def retain_grad(t):
    """Mark non-leaf tensor ``t`` so that backward fills its ``.grad`` (torch's
    ``Tensor.retain_grad``); a leaf is unchanged (its ``.grad`` is filled
    anyway)."""
    if not t.requires_grad:
        raise RuntimeError("retain_grad: can't retain_grad on a tensor that has requires_grad=False")
    if t._node is not None and id(t) not in _RETAINED:
        k = id(t)
        _RETAINED[k] = weakref.ref(t, lambda _, k=k: _RETAINED.pop(k, None))


def retains_grad(t):
    """Whether :func:`retain_grad` marked ``t`` and ``t`` is not a leaf."""
    r = _RETAINED.get(id(t))
    return t._node is not None and r is not None and r() is t


def _targets(inputs):
    """``(only, capture)`` of one backward: the ids of the tensors to fill
    (None: every leaf) and, by node, the non-leaf tensors that receive the
    gradient of their output of that node (each tensor's node read now: an
    in-place op since the mark moved it to a new one, as torch's)."""
    capture = {}
    seen = set()
    only = None
    if inputs is not None:
        only = set()
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"backward: inputs must be tensors, got {type(t).__name__}")
            if id(t) in only:
                continue
            only.add(id(t))
            if t._node is not None:
                capture.setdefault(t._node, []).append(t)
                seen.add(id(t))
    for r in list(_RETAINED.values()):
        t = r()
        if t is not None and t._node is not None and id(t) not in seen and (only is None or id(t) in only):
            capture.setdefault(t._node, []).append(t)
    return only, (capture or None)
