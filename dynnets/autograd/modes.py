"""Execution modes, per thread: grad mode (``no_grad``, ``enable_grad``,
``set_grad_enabled``, ``inference_mode``) and the interpreter stack that
:func:`dynnets.autograd.engine.bind` dispatches to.

Every mode is per thread, as torch's grad mode: ``no_grad()`` or
``autobatch()`` in one thread leaves the ops of every other thread as they
were. Grad mode is one flag; every other mode (anomaly detection,
autobatch, a trace's captured Parameters) is an interpreter pushed on the
thread's stack (see "interpreters" below); the engine's bind reads
:data:`STATE` and :data:`MODES` on its hot path.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading

import numpy as np

__all__ = [
    "STATE", "MODES", "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled", "inference_mode",
    "is_inference_mode_enabled", "push_interpreter", "pop_interpreter", "interpreter", "current_interpreter",
    "interpreter_stack",
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

# the public names of the two above, read by the engine's bind
MODES = _MODES
STATE = _Mode


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


# ---------------------------------------------------------------------------
# interpreters
#
# An execution mode other than plain eager is an interpreter: any object with
# a method ``bind(prim, args, attrs)`` that returns what the engine's ``bind`` returns
# (a tensor, or a tuple for multiple-result primitives, or whatever values
# the mode works with: lazy tensors, static-graph values). Each thread has a
# stack of them; bind hands every op of the thread to the top one. An
# interpreter that handles only some ops passes the others on with
# the engine's ``bind_below`` (the next interpreter down, eager at the bottom), so
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
# applying ops to its values whatever the thread's stack (an interpreter on
# it sees the op first and passes what it does not handle down to eager
# mode, where the values' interpreter takes it), and an eager op never pays
# for a symbolic check (its arguments take the typed fast paths first). Grad mode is not an interpreter: it is one flag that every
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
