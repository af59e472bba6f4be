"""``trace``: from an eager function to a compiled static graph (in the spirit
of ``tf.function``, ``torch.jit.trace`` and ``jax.jit``).

    step = dynnets.static.trace(loss_fn, grads_of=model)      # a Module or a list of Parameters
    loss, grads = step(x, y)                                  # grads aligned with the parameters

    step = dynnets.static.trace(loss_fn, grads_of=model, accumulate=True)
    opt.zero_grad(); loss = step(x, y); opt.step()            # train with the eager optimizers

How it works
------------
On a call with a new *signature* (the shapes and dtypes of the array
arguments, and the values of the other arguments), ``fn`` runs once on
placeholders of those shapes; every dynnets op it calls appends to a fresh
graph instead of computing. The graph is compiled to one plan (see
:class:`Session`) and cached under the signature; a call with a known
signature only runs the plan. What is cached per signature is the trace
(static arguments change the graph itself, not only its input shapes); its
compiled plans are the session's, in the compiled-program object every
static path shares (:class:`~dynnets.static.core.program.CompiledProgram`). ``traces`` counts the traces and ``retraces``
the ones after the first (each new signature costs one).

Rules (the same as ``jax.jit``'s):

* Python control flow may depend on shapes (``x.shape[0]``), on Python
  arguments and on the structure of the inputs, not on the values of arrays:
  a symbolic value has no truth value (``if x.sum() > 0`` raises a TypeError
  that says so). Such code is unrolled for the traced signature.
* Array arguments (numpy arrays, dynnets Tensors, lists) become placeholders;
  other arguments (numbers, strings, tuples, and any hashable object such as a
  prepared minibatch) are static: they are part of the signature (objects
  without their own ``__eq__`` by identity) and baked into the graph, so a
  tree's structure passed this way gives one trace per structure.
* Dropout (``dynnets.dropout``, ``nn.Dropout``, the dropout between the
  layers of ``nn.LSTM``...) becomes a ``dropout_mask`` node seeded from the
  module's generator while tracing: every call draws a new mask. Other
  randomness drawn in Python while tracing (``numpy`` calls) is drawn once
  and frozen into the graph: pass it as an argument.
* Parameters: the Parameters in ``grads_of`` and ``params`` (a Module gives
  all of its parameters; when ``fn`` is a Module or a bound method of one its
  parameters are used) become graph inputs bound to the *live* arrays: each
  call reads ``p.numpy()``, so updates by an eager optimizer are seen without
  retracing. A Parameter that is not declared but meets a traced value in an
  op is captured the same way; an eager computation on undeclared Parameters
  alone raises an error naming the problem instead of being frozen.
* Outputs are returned as dynnets Tensors (not requiring grad), in the
  structure ``fn`` returned. Gradients of the first output (which must be a
  scalar) with respect to ``grads_of`` come from the static graph's symbolic
  backward (the same table VJPs as eager ``backward``): each is an ndarray, a
  :class:`RowSparse` (embedding tables) or ``None`` (not used by ``fn``),
  exactly what ``p._grad`` would hold after an eager ``backward``.
"""
from __future__ import annotations

import numpy as np

from ..autograd.engine import accumulate_grad, capture_parameters
from ..autograd.primitives import fmt_shape
from ..autograd.tensor import Parameter, Tensor, wrap_array
from .core.backward import sparse_gradients
from .graph import Graph, Value, placeholder, tracing
from .session import Session
from ..pytree import tree_flatten

__all__ = ["trace", "TracedFunction"]


def _param_list(x):
    if x is None:
        return []
    if hasattr(x, "parameters") and callable(x.parameters):
        return list(x.parameters())
    if isinstance(x, Tensor):
        return [x]
    out = list(x)
    for p in out:
        if not isinstance(p, Tensor):
            raise TypeError(f"trace: expected Parameters, got {type(p).__name__}")
    return out


_STATIC = (int, float, bool, str, bytes, type(None), tuple, frozenset)


def _hashable(x):
    try:
        hash(x)
    except TypeError:
        return False
    return True


class _Entry:
    __slots__ = ("session", "fetches", "placeholders", "template", "n_out", "grad_pos")


class TracedFunction:
    """A function traced into one compiled static plan per input signature.
    See :mod:`dynnets.static.trace`."""

    def __init__(self, fn, grads_of=None, params=None, accumulate=False, optimize=True):
        self.fn = fn
        self.grads_of = _param_list(grads_of) if grads_of is not None else None
        owner = fn if hasattr(fn, "parameters") else getattr(fn, "__self__", None)
        auto = _param_list(owner) if (params is None and owner is not None and hasattr(owner, "parameters")) else []
        seen = {}
        for p in (self.grads_of or []) + _param_list(params) + auto:
            seen[id(p)] = p
        self.params = list(seen.values())
        if accumulate and self.grads_of is None:
            raise ValueError("trace: accumulate=True needs grads_of=")
        self.accumulate = accumulate
        self.optimize = optimize
        self._cache = {}
        self.traces = 0
        self.signatures = []

    @property
    def retraces(self):
        """Traces after the first, each caused by a new input signature."""
        return max(0, self.traces - 1)

    def __call__(self, *args):
        sig = []
        arrays = []
        for a in args:
            tp = type(a)
            if tp is np.ndarray:
                arrays.append(a)
                sig.append((a.shape, a.dtype))
            elif isinstance(a, Tensor):
                d = a.numpy()
                arrays.append(d)
                sig.append((d.shape, d.dtype))
            elif isinstance(a, _STATIC) or (not isinstance(a, (list, np.generic)) and _hashable(a)):
                sig.append(("static", a))
            else:
                arr = np.asarray(a)
                arrays.append(arr)
                sig.append((arr.shape, arr.dtype))
        key = tuple(sig)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._trace(args, key)
        res = entry.session.run(entry.fetches, dict(zip(entry.placeholders, arrays)))
        outs = self._rebuild(entry.template, res)
        if self.grads_of is None:
            return outs
        grads = [None] * len(self.grads_of)
        for k, pos in entry.grad_pos:
            grads[k] = res[pos]
        if self.accumulate:
            for p, gr in zip(self.grads_of, grads):
                if gr is not None:
                    accumulate_grad(p, gr)
            return outs
        return outs, grads

    def _rebuild(self, t, res):
        td, slots = t
        return td.unflatten([s[1] if type(s) is tuple else _as_tensor(res[s]) for s in slots])

    def _template(self, out, flat):
        """fn's result as (its TreeDef, per leaf the position of the Value in
        ``flat`` (appended) or ``("const", leaf)`` for any other leaf)."""
        leaves, td = tree_flatten(out)
        slots = []
        for x in leaves:
            if isinstance(x, Value):
                flat.append(x)
                slots.append(len(flat) - 1)
            elif isinstance(x, Tensor):
                raise TypeError("trace: fn returned an eager Tensor; traced functions must compute their outputs "
                                "from their inputs or Parameters with dynnets ops")
            else:
                slots.append(("const", x))
        return td, slots

    def _trace(self, args, key):
        g = Graph()
        phs = []
        sym = []
        with g.as_default():
            for i, (a, s) in enumerate(zip(args, key)):
                if s[0] == "static":
                    sym.append(a)
                else:
                    ph = placeholder(s[0], s[1], name=f"arg{i}")
                    phs.append(ph)
                    sym.append(ph)
            # ops on the Parameters go to the graph, which reads them live
            with tracing(g), capture_parameters(self.params):
                out = self.fn(*sym)
            flat = []
            template = self._template(out, flat)
            fetches = list(flat)
            grad_pos = []
            if self.grads_of is not None:
                if not flat:
                    raise ValueError("trace: grads_of needs fn to return a scalar loss (first output)")
                loss = _first_value(out)          # fn's first output as written (a dict's first key)
                if tuple(loss.shape) not in ((), (1,)):
                    raise ValueError(f"trace: the gradient is of fn's first output, which must be a scalar; "
                                     f"got shape {fmt_shape(loss.shape)}")
                xs = [g.param_value(p) for p in self.grads_of]
                used = [(k, x) for k, x in enumerate(xs) if x is not None]
                grads = sparse_gradients(loss, [x for _, x in used]) if used else []
                for (k, _), gr in zip(used, grads):
                    if gr is not None:
                        grad_pos.append((k, len(fetches)))
                        fetches.append(gr)
        sess = Session(g, optimize=self.optimize, keep_sparse=True)
        entry = _Entry()
        entry.session = sess
        entry.fetches = fetches
        entry.placeholders = phs
        entry.template = template
        entry.grad_pos = grad_pos
        self._cache[key] = entry
        self.traces += 1
        self.signatures.append(key)
        return entry

    def stats(self):
        """Per signature: the plan statistics of its session."""
        return {k: e.session.stats for k, e in self._cache.items()}


def trace(fn=None, *, grads_of=None, params=None, accumulate=False, optimize=True):
    """Trace ``fn`` into a static graph compiled once per input signature.

    Parameters
    ----------
    fn : callable
        A function of arrays/Tensors (and static Python values) built from
        dynnets ops; usable as a decorator (``@trace`` or ``@trace(grads_of=...)``).
    grads_of : Module or iterable of Parameters, optional
        Also return the gradients of ``fn``'s first output (a scalar) with
        respect to these: calls return ``(outputs, grads)``.
    params : Module or iterable of Parameters, optional
        Further Parameters to read live (no gradients).
    accumulate : bool
        With ``grads_of``: add the gradients into each Parameter's ``.grad``
        (as ``loss.backward()`` would) and return only the outputs, so the
        eager optimizers can step.
    optimize : bool
        Run the optimisation passes (see :class:`Session`).
    """
    if fn is None:
        return lambda f: TracedFunction(f, grads_of, params, accumulate, optimize)
    return TracedFunction(fn, grads_of, params, accumulate, optimize)


def _as_tensor(r):
    return wrap_array(r if isinstance(r, np.ndarray) else np.asarray(r))


def _first_value(out):
    """The first graph value of ``out`` in the order it was written (a
    dict's keys in insertion order: the flattening order sorts them)."""
    if isinstance(out, Value):
        return out
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else ()
    for x in items:
        v = _first_value(x)
        if v is not None:
            return v
    return None
