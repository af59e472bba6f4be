"""Subgraphs (loop bodies and conditions, ``cond`` branches, their
gradients) compiled per input signature and per the compile options of the
session that runs them, and tiered as a session's plans are, counting
iterations as runs: the first-tier executor, generated code from
``jit_after`` runs on, the native tier from ``native_after`` on where the
program qualifies (:mod:`.native`).
"""
from __future__ import annotations

import numpy as np

from ...autograd.primitives import Aval, dtype_of
from . import execute, passes
from .graph import GraphIR
from .program import CompiledProgram
from .tensor_array_value import TensorArrayValue

__all__ = ["subprogram_stats", "Program", "StashedProgram", "program", "run", "signature", "zeros_like", "is_float"]

def zeros_like(x):
    if type(x) is TensorArrayValue:
        return x.zeros()
    return np.zeros(np.shape(x), dtype=np.result_type(x))


def is_float(x):
    dt = x.dtype if type(x) is TensorArrayValue else np.result_type(x)
    return dt.kind in "fc"


def signature(a, free):
    """(shape, dtype) of run-time value ``a``, with the dimensions in ``free``
    (those a loop may change) left unknown, and a TensorArray's length."""
    if type(a) is TensorArrayValue:
        # no plan depends on an array's length: one plan serves every trip count
        return (None,), a.dtype
    if type(a) is not np.ndarray and hasattr(a, "plan_signature"):
        # a run-time object a program takes (an inner loop's trace, kept by the outer loop for its gradient)
        return a.plan_signature
    shape, dt = np.shape(a), np.result_type(a)
    if free:
        shape = tuple(None if d in free else s for d, s in enumerate(shape))
    return shape, dt


# --------------------------------------------------------------------------
# subgraphs compiled per input signature
# --------------------------------------------------------------------------


class _Entry:
    """One compiled plan of a subprogram, as a loop runs it: ``fn(*args)``
    returns a tuple (``plan.fn``, read once per tier change rather than per
    iteration). ``verify`` lists the results (index, shape) whose shape the
    compiler could not prove (a loop variable computed from a TensorArray
    element of unknown shape): the loop checks them after each iteration."""

    __slots__ = ("plan", "fn", "options", "verify", "owner")

    @property
    def runs(self):
        return self.plan.runs

    def ran(self, n):
        """Count ``n`` calls (iterations, branch runs): the plan moves up
        the tiers as a session's plans do (:func:`.program.tier_up`)."""
        plan = self.plan
        self.owner.ran(plan, n, {}, self.options)
        self.fn = plan.fn


class Program(CompiledProgram):
    """A subgraph as a function of its input placeholders ``inputs`` (ids),
    returning ``outputs`` (ids): a :class:`~.program.CompiledProgram` whose
    key is the compile options (a session's: each session's loops run with
    its passes and tiers) and the inputs' signature. ``free[k]`` are the
    dimensions of input ``k`` left unknown in the signature;
    ``check(opt, key)`` validates a compiled program and returns the results
    whose shape it must verify at run time."""

    def __init__(self, graph, inputs, outputs, free, check=None, program=None, buffers=True):
        super().__init__(graph)
        self.program = program
        self.buffers = buffers
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.free = tuple(free)
        self.check = check

    def entry(self, args, options):
        key = (options,) + tuple([signature(a, f) for a, f in zip(args, self.free)])
        e = self.plans.get(key)
        if e is None:
            e = self.plans[key] = self._compile(key)
        return e

    def _compile(self, key):
        options, sig = key[0], key[1:]
        g = self.graph
        prog = self.program if self.program is not None else g.with_outputs(self.outputs)
        input_avals = {i: Aval(shape, dt) for i, (shape, dt) in zip(self.inputs, sig)}
        verify = []
        check = self.check
        if check is not None:
            def check_then(opt):
                verify.extend(check(opt, sig) or ())
        flat = [g.values[o] for o in self.outputs]
        # a body's results need no copies for the caller: its inputs are the loop's own values, which
        # nothing writes. The key is a session's (fetches, then id, shape, dtype per input): the native
        # tier reads the fed shapes and dtypes from it
        plan = self.build(prog, flat, (tuple, list(range(len(flat)))), list(self.inputs), input_avals, options, {},
                          key=(self.outputs,) + tuple(x for i, (shape, dt) in zip(self.inputs, sig)
                                                      for x in (i, shape, dt)),
                          buffers=self.buffers, own_fetches=False, many_runs=True,
                          checked=check_then if check is not None else None)
        e = _Entry()
        e.plan = plan
        e.fn = plan.fn
        e.options = options
        e.owner = self
        e.verify = verify or None
        return e


# how subprogram_stats names a subgraph's programs ({}: "body", "cond", "true_graph", ...): one forward and one
# gradient run per loop, whether the forward keeps the values the gradient reads or not
_ROLES = {"fwd": "{}", "fwd+stash": "{}", "vjp/stashed": "{}/vjp"}


class StashedProgram(Program):
    """A loop body's gradient fed the forward values in ``stash`` (which
    follow ``inputs[:n_body]``, the body's inputs): keyed, like the forward,
    by the signature of the other inputs; the stashed values' shapes are
    inferred from it, so one plan serves every iteration (a value whose
    size changes from one iteration to the next has that dimension unknown)
    and the others keep their dimensions (which the native tier needs)."""

    def __init__(self, graph, inputs, outputs, free, n_body, stash, program, buffers=True):
        super().__init__(graph, inputs, outputs, free, program=program, buffers=buffers)
        self.n_body = n_body
        self.stash = stash

    def entry(self, args, options):
        nb, m = self.n_body, self.n_body + len(self.stash)
        free = self.free
        key = (options,) + tuple([signature(a, f) for a, f in zip(args[:nb], free[:nb])]) \
            + tuple([signature(a, f) for a, f in zip(args[m:], free[m:])])
        e = self.plans.get(key)
        if e is None:
            e = self.plans[key] = self._compile(key)
        return e

    def _compile(self, key):
        nb = self.n_body
        options, sig = key[0], key[1:]
        fwd = passes.prune(self.graph.with_outputs(self.stash))
        got = passes.infer_shapes(fwd, {i: Aval(shape, dt) for i, (shape, dt) in zip(self.inputs[:nb], sig[:nb])})
        stashed = tuple((tuple(got.avals[i].shape), dtype_of(got.avals[i])) for i in self.stash)
        return super()._compile((options,) + sig[:nb] + stashed + sig[nb:])


def subprogram_stats(program, options, seen=None):
    """Statistics (:meth:`~.lower.Plan.stats` with ``role``) of the compiled
    plans of the loops and conds in ``program`` (a derived graph: a plan's
    program) for ``options``, nested ones included, each once."""
    seen = set() if seen is None else seen
    out = []
    for e in program.eqns:
        a = e.attrs if isinstance(e.attrs, dict) else {}
        for name in ("cond", "body", "true_graph", "false_graph"):
            sub = a.get(name)
            if not isinstance(sub, GraphIR) or id(sub) in seen:
                continue
            seen.add(id(sub))
            for role, prog in sub.programs.items():
                for key, entry in prog.plans.items():
                    if key[0] != options:
                        continue
                    st = entry.plan.stats()
                    label = "vjp-recompute" if role == "vjp" and hasattr(prog, "stashed") else role
                    st["role"] = _ROLES.get(label, "{}/" + label).format(name)
                    if role == "vjp/stashed":
                        st["stashed"] = [sub.values[i].name for i in sub.programs["vjp"].stash]
                    st["mean_run_us"] = None        # iterations are not timed
                    out.append(st)
                    out += subprogram_stats(entry.plan.program, options, seen)
    return out


def program(graph, role, make):
    """The subgraph's program for ``role`` ("fwd", "vjp"), made on first use."""
    p = graph.programs.get(role)
    if p is None:
        p = graph.programs[role] = make()
    return p


def run(entry, args):
    try:
        return entry.fn(*args)
    except Exception as exc:
        raise execute.explain(entry.plan, exc, {}) from exc
