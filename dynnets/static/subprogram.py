"""Subgraphs (loop bodies and conditions, ``cond`` branches, their
gradients) compiled per input signature and per the compile options of the
session that runs them, and tiered as a session's plans are, counting
iterations as runs: the first-tier executor, generated code from
``jit_after`` runs on, the native tier from ``native_after`` on where the
program qualifies (:mod:`.native`).
"""
from __future__ import annotations

import numpy as np

from ..autograd.primitives import Aval, dtype_of
from . import execute, passes
from .graph import Graph
from .lower import lower
from .tensor_array import TensorArrayValue

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
    """One compiled plan of a subprogram; ``fn(*args)`` returns a tuple.
    ``verify`` lists the results (index, shape) whose shape the compiler
    could not prove (a loop variable computed from a TensorArray element of
    unknown shape): the loop checks them after each iteration."""

    __slots__ = ("plan", "fn", "runs", "options", "verify")

    def ran(self, n):
        """Count ``n`` calls (iterations, branch runs); the plan moves to
        tier 2 after ``options.jit_after`` of them and to the native tier
        after ``options.native_after``, as a session's plans do."""
        self.runs += n
        plan = self.plan
        plan.runs = self.runs
        if plan.tier == 1 and self.runs >= self.options.jit_after:
            execute.tier2(plan, {})
            self.fn = plan.fn
        na = self.options.native_after
        if plan.tier == 2 and na is not None and self.runs >= na and plan.native is None:
            if execute.tier3(plan, {}):
                self.fn = plan.fn


class Program:
    """A subgraph as a function of its input placeholders ``inputs`` (ids),
    returning ``outputs`` (ids): optimised and lowered once per input
    signature and compile options (a session's: each session's loops run
    with its passes and tiers). ``free[k]`` are the dimensions of input
    ``k`` left unknown in the signature; ``check(opt, key)`` validates a
    compiled program and returns the results whose shape it must verify at
    run time."""

    def __init__(self, graph, inputs, outputs, free, check=None, program=None, buffers=True):
        self.graph = graph
        self.program = program
        self.buffers = buffers
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.free = tuple(free)
        self.check = check
        self.plans = {}

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
        opt = passes.optimize(prog, input_avals, fold=options.optimize, fuse_min_size=options.fuse_min_size,
                              memory_min_size=options.memory_min_size if self.buffers else None)
        verify = self.check(opt, sig) if self.check is not None else None
        flat = [g.values[o] for o in self.outputs]
        # a body's results need no copies for the caller: its inputs are the loop's own values,
        # which nothing writes
        plan = lower(opt, flat, (tuple, list(range(len(flat)))), list(self.inputs), {}, False, options=options,
                     own_fetches=False)
        # the key a session gives its plans (fetches, then id, shape, dtype per input): the native tier
        # reads the fed shapes and dtypes from it
        plan.key = (self.outputs,) + tuple(x for i, (shape, dt) in zip(self.inputs, sig) for x in (i, shape, dt))
        execute.tier1(plan, {})
        plan.nodes_graph = len(g.eqns)
        plan.nodes_pruned = len(prog.eqns)
        plan.nodes_after = len(opt.eqns)
        plan.compile_time = plan.codegen_time = 0.0
        plan.pass_times = {}
        plan.fetch_names = [v.name for v in flat]
        plan.feed_names = [g.values[i].name for i in self.inputs]
        e = _Entry()
        e.plan = plan
        e.fn = plan.fn
        e.runs = 0
        e.options = options
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
            if not isinstance(sub, Graph) or id(sub) in seen:
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
