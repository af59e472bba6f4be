"""The compiler core's graph IR: equations (:class:`Eqn`) over integer value
ids, the static primitives that are not in the shared table (sources,
effects, compiler helpers: :class:`StaticPrimitive`), the errors a compile or
a run raises, and where the user created an equation (:func:`user_site`).

A :class:`~dynnets.static.core.graph.GraphIR` (which TF1's ``Graph`` subclasses) is a list of
these equations; the passes, the lowering, the executors and the native tier
read only what is defined here and the graph's ``eqns``, ``values``,
``avals`` and ``producer``.
"""
from __future__ import annotations

import contextlib
import gc
import os
import sys

from ...autograd.primitives import Primitive

__all__ = ["GraphError", "FeedError", "UninitializedVariableError", "OpError", "OpIndexError", "OpValueError",
           "OpTypeError", "op_error", "StaticPrimitive", "placeholder_p", "variable_p", "constant_p", "param_p",
           "SOURCES", "Eqn", "user_site", "site_str", "gc_paused", "effect_variables", "RunForEffect"]


class GraphError(ValueError):
    """A node used with the wrong graph, or something fed that is not a placeholder."""


class FeedError(ValueError):
    """A placeholder not fed, or fed a value of the wrong shape or dtype."""


class UninitializedVariableError(RuntimeError):
    """A Variable read before its initialiser ran in this session."""


class OpError(RuntimeError):
    """An op failed while a plan ran; names the op and where it was created.
    A failure on bad input is also the IndexError, ValueError or TypeError it
    was (:func:`op_error`), so ``except IndexError`` catches it as in eager mode."""


class OpIndexError(OpError, IndexError):
    pass


class OpValueError(OpError, ValueError):
    pass


class OpTypeError(OpError, TypeError):
    pass


def op_error(exc, msg):
    """An OpError with message ``msg`` of the category of ``exc``."""
    for base, cls in ((IndexError, OpIndexError), (ValueError, OpValueError), (TypeError, OpTypeError)):
        if isinstance(exc, base):
            return cls(msg)
    return OpError(msg)


class StaticPrimitive(Primitive):
    """A primitive of the static graph that is not in the shared table:
    sources, effects (``effect=True``: ``impl(storage, *args, **attrs)``) and
    compiler helpers. None is differentiable. ``out_arg``: the implementation
    takes ``out=`` (a caller's array, for the memory plan) and returns a
    fresh array otherwise. ``retains_inputs``: the result is a container
    that holds its input arrays (a TensorArray write, a loop and its trace),
    so the memory plan never gives them a buffer a later run overwrites.
    ``options_arg``: the implementation compiles programs of its own (loop
    bodies, branches) and takes the session's
    :class:`~dynnets.static.passes.CompileOptions` as ``options=``.
    ``initializer``: an effect that initialises the variables in its ``vars``
    attribute."""

    __slots__ = ("effect", "source", "out_arg", "kernel_source", "retains_inputs", "options_arg", "initializer")

    def __init__(self, name, impl, shape, effect=False, source=None, multiple_results=False, out_arg=False,
                 joint_vjp=None, retains_inputs=False, options_arg=False, native=None, initializer=False):
        # control flow is the one kind of static primitive with a gradient (its ``joint_vjp``)
        super().__init__(name, impl, shape, multiple_results=multiple_results, joint_vjp=joint_vjp,
                         differentiable=joint_vjp is not None, native=native)
        self.effect = effect
        self.source = source
        self.out_arg = out_arg
        self.kernel_source = None     # a fused kernel's generated source
        self.retains_inputs = retains_inputs
        self.options_arg = options_arg
        # initialises the variables of its ``vars`` attribute: they need no value before it runs
        self.initializer = initializer


def _no_impl(*a, **k):
    raise AssertionError("source equations are executed by the session, not called")


def _no_shape(*a, **k):
    raise AssertionError("source equations carry their aval")


placeholder_p = StaticPrimitive("placeholder", _no_impl, _no_shape, source="placeholder")
variable_p = StaticPrimitive("variable", _no_impl, _no_shape, source="variable")
constant_p = StaticPrimitive("constant", _no_impl, _no_shape, source="constant")
param_p = StaticPrimitive("param", _no_impl, _no_shape, source="param")
SOURCES = (placeholder_p, variable_p, constant_p, param_p)


class Eqn:
    """One equation: ``outs = prim(*ins, **attrs)``. ``site`` is the
    (file, line) of the user code that created it; ``buf`` is a buffer slot
    assigned by the memory plan (``None``: allocate)."""

    __slots__ = ("prim", "ins", "outs", "attrs", "name", "site", "buf")

    def __init__(self, prim, ins, outs, attrs, name, site=None, buf=None):
        self.prim = prim
        self.ins = ins
        self.outs = outs
        self.attrs = attrs
        self.name = name
        self.site = site
        self.buf = buf

    def replace(self, **kw):
        e = Eqn(self.prim, self.ins, self.outs, self.attrs, self.name, self.site, self.buf)
        for k, v in kw.items():
            setattr(e, k, v)
        return e

    def __repr__(self):
        outs = ", ".join(f"v{o}" for o in self.outs)
        ins = ", ".join(f"v{i}" for i in self.ins)
        return f"{outs} = {self.prim.name}({ins})  # {self.name}"


class RunForEffect:
    """What a value run only for its effect is (TF1's ``Operation``, made
    by the facade): a plan returns ``None`` for it."""

    __slots__ = ()


_PKG = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SKIP_DIRS = (os.path.join(_PKG, "static"), os.path.join(_PKG, "autograd"))


def user_site():
    """(file, line) of the innermost frame outside dynnets' static/autograd code."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_SKIP_DIRS):
        f = f.f_back
    if f is None:
        return None
    return (f.f_code.co_filename, f.f_lineno)


def site_str(site):
    if site is None:
        return ""
    return f" (created at {os.path.basename(site[0])}:{site[1]})"


@contextlib.contextmanager
def gc_paused():
    """Building a plan or a gradient graph allocates many small objects that
    all stay alive; Python's cyclic collector would scan the growing heap
    again and again (measured: a 16k-node plan compiles in 82 ms without it,
    190-350 ms with it)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def effect_variables(eqn):
    """Variables an effectful equation reads (they must be initialised)."""
    a = eqn.attrs
    if eqn.prim.initializer:
        return ()
    if "var" in a:
        return (a["var"],) + tuple(a.get("slots", ()))
    return tuple(a.get("vars", ())) + tuple(a.get("slots", ()))
