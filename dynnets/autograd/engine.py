"""Eager (define-by-run) execution: ``bind`` and graph recording.

Every op on tensors goes through :func:`bind`, which checks the inputs (the
primitive's shape rule, run once per input signature: see "input checks"
below), runs the primitive's forward implementation and, when any input
requires a gradient and grad mode is on, records one :class:`Node`;
:mod:`dynnets.autograd.backprop` walks the recorded nodes backward (and
holds the in-place writes, whose version checks it reads).

Per-op overhead is the enemy of dynamic networks (DESIGN.md rule 10), so the hot
path here avoids isinstance chains, keyword plumbing and copies: a node stores
the input arrays it already had, and tensors are created without ``__init__``.

The modes are per thread (:mod:`dynnets.autograd.modes`): grad mode is one
flag, and every other mode (anomaly detection, autobatch, a trace's
captured Parameters) is an interpreter on the thread's interpreter stack, to
which bind hands the op (see "interpreters" in the modes module); static-graph
values name their interpreter themselves. This module re-exports the modes' API.
"""
from __future__ import annotations

import contextlib
import itertools

import numpy as np

from . import gradtypes as _gt
from .modes import MODES as _MODES
from .modes import STATE, current_interpreter, enable_grad, inference_mode, interpreter, interpreter_stack
from .modes import is_grad_enabled, is_inference_mode_enabled, no_grad, pop_interpreter, push_interpreter
from .modes import set_grad_enabled
from .primitives.core import DTypeError, IndexRangeError, ShapeError, check_shapes

__all__ = [
    "Node", "bind", "bind1", "bind2", "bind_first", "no_grad", "enable_grad",
    "is_grad_enabled", "detect_anomaly", "is_anomaly_enabled", "register_symbolic_interpreter",
    "register_tensor_types", "capture_parameters", "push_interpreter", "pop_interpreter", "interpreter",
    "current_interpreter", "interpreter_stack", "bind_below", "accumulate_grad", "set_grad_enabled",
    "inference_mode", "is_inference_mode_enabled", "alias", "check_finite", "check_signature",
    "next_seq", "lazy_type", "STATE", "wrap_array",
]

_Mode = STATE


class AnomalyError(FloatingPointError):
    """Raised inside :func:`detect_anomaly` by the first op producing NaN/inf."""


def bind_below(obj, prim, args, attrs):
    """Apply ``prim`` as the interpreters below ``obj`` on this thread's stack
    would: the next one down binds it; eager mode (grad mode as set) when
    ``obj`` is the bottom one or is not on the stack, its results checked
    for NaN/inf when anomaly detection is anywhere on the stack (so it holds
    whatever was pushed after it)."""
    st = _Mode.stack
    i = len(st) - 1
    while i >= 0 and st[i] is not obj:
        i -= 1
    if i > 0:
        return st[i - 1].bind(prim, args, attrs)
    return _bind_general(prim, args, attrs, bool(_Mode.grad_enabled), is_anomaly_enabled())


class AnomalyInterpreter:
    """The interpreter of :func:`detect_anomaly`: each op runs as below it;
    the eager results at the bottom of the stack are checked for NaN/inf
    while one is on the stack (see :func:`bind_below`), and backward checks
    the gradients."""

    __slots__ = ()

    def bind(self, prim, args, attrs):
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


# The public names of the pieces dynnets.autograd.backprop builds on (the
# same objects: one sequence counter orders every recorded node).
check_finite = _check_finite
check_signature = _check_miss
next_seq = _next_seq


def lazy_type():
    """The lazy tensor class autobatch registered (:func:`register_lazy_type`), or None."""
    return _LAZY[0]


def wrap_array(arr, requires_grad=False, name=None):
    """A :class:`Tensor` over the numpy array ``arr`` as it is: its dtype
    kept, its memory shared (no copy, no cast). The package's own way to make
    a tensor of an array it computed, as the engine makes every op's result
    (of the class :func:`register_tensor_types` registered); the public
    ``Tensor(arr)`` is torch's legacy constructor, which casts to float32.

    Parameters
    ----------
    arr : np.ndarray, any shape
    requires_grad : bool
        Only for a floating-point ``arr`` (TypeError otherwise, as torch's).
    name : str or None
    """
    rg = bool(requires_grad)
    if rg and arr.dtype.kind != "f":
        raise TypeError(f"tensor: only floating-point tensors can require grad, got dtype {arr.dtype}")
    t = _object_new(_TENSOR)
    t._data = arr
    t._grad = None
    t.requires_grad = rg
    t._node = None
    t._idx = 0
    t.name = name
    return t
