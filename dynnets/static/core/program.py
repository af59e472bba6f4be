"""The compiled-program object every static path runs through: a program
(graph, inputs, outputs) compiled per key (the inputs' signature and the
:class:`~dynnets.static.passes.CompileOptions`) into a :class:`~.lower.Plan`
that moves up the tiers by its runs.

One object for every user: ``Session.run`` (one per session, keyed by
fetches and fed shapes and dtypes), loop bodies and conditions, loop
gradients and ``cond`` branches (:mod:`.subprogram`, counting iterations as
runs) and ``trace`` (through the session of each traced signature). They
share the pipeline (``optimize`` -> ``lower`` -> first tier, with the same
statistics) and the tiering rule (:func:`tier_up`), so a loop body reaches
generated code and the native tier exactly when a session's plan with the
same options and runs would.
"""
from __future__ import annotations

import gc
import time

from . import execute, passes
from .lower import lower

__all__ = ["CompiledProgram", "tier_up", "NEVER"]

#: ``plan.next_tier`` of a plan that has reached its last tier.
NEVER = float("inf")

_perf = time.perf_counter


def tier_up(plan, storage, options):
    """Move ``plan`` to the tiers its ``runs`` have earned under ``options``:
    generated code from ``options.jit_after`` runs on, the native tier from
    ``options.native_after`` on where :mod:`.native` can translate it; then
    set ``plan.next_tier`` to the run count of its next change (:data:`NEVER`
    if none), so callers test one integer per run."""
    was = gc.isenabled()
    gc.disable()        # code generation allocates many objects that all stay alive
    try:
        if plan.tier == 1 and plan.runs >= options.jit_after:
            execute.tier2(plan, storage)
        na = options.native_after
        if plan.tier == 2 and na is not None and plan.runs >= na and plan.native is None:
            execute.tier3(plan, storage)
    finally:
        if was:
            gc.enable()
    if plan.tier == 1:
        plan.next_tier = options.jit_after
    elif plan.tier == 2 and na is not None and plan.native is None:
        plan.next_tier = na
    else:
        plan.next_tier = NEVER


class CompiledProgram:
    """The plans of programs over ``graph``, each compiled once per key and
    kept in :attr:`plans` (key -> what the owner runs) and :attr:`order`
    (the plans in compile order, for statistics).

    Owners compute their keys (a session: fetches, fed placeholders and fed
    shapes and dtypes; a subgraph: its inputs' signatures with the options
    first) and call :meth:`build` on a miss, :meth:`ran` after runs.
    """

    __slots__ = ("graph", "plans", "order")

    def __init__(self, graph):
        self.graph = graph
        self.plans = {}
        self.order = []

    def build(self, prog, flat, template, feed_ids, input_avals, options, storage, *, key, casts=None,
              raw_sparse=False, rng_of=None, cache=None, buffers=True, own_fetches=True, pruned=None,
              timings=None, many_runs=False, t0=None, checked=None):
        """Compile program ``prog`` (a derived graph) to a plan on its first
        tier and record it in :attr:`order`.

        Parameters
        ----------
        prog : Graph
            The program: pruned already when ``pruned`` is given (the graph
            before pruning, for the statistics), else pruned here.
        flat : list of Value
            The outputs, in the order ``template`` indexes them.
        template
            The result structure (see :func:`~.lower.lower`).
        feed_ids : list of int
            The input placeholders' ids, in argument order.
        input_avals : dict
            Input id -> its :class:`~dynnets.autograd.primitives.Aval`.
        options : CompileOptions
        storage : dict
            The variables' values the plan reads and writes.
        key
            What the plan is cached under (``plan.key``; the native tier reads
            the fed shapes and dtypes from it).
        casts, raw_sparse, rng_of, own_fetches
            As :func:`~.lower.lower`.
        cache : passes.PassCache, optional
            The incremental compiler's state for these input avals.
        buffers : bool
            Allow the memory plan (``out=`` buffers).
        many_runs : bool
            Start on the closure tier (:func:`~.execute.tier1`: a loop body
            runs many times before it tiers up) rather than the interpreter.

        Returns
        -------
        Plan
        """
        t0 = _perf() if t0 is None else t0
        timings = {} if timings is None else timings
        g = self.graph
        if pruned is None:
            t = _perf()
            pruned = passes.prune(prog)
            timings["prune"] = _perf() - t
        opt = passes.optimize(pruned, input_avals, fold=options.optimize, fuse_min_size=options.fuse_min_size,
                              memory_min_size=options.memory_min_size if buffers else None, timings=timings,
                              pruned=True, cache=cache)
        if checked is not None:
            checked(opt)
        plan = lower(opt, flat, template, feed_ids, casts or {}, raw_sparse, rng_of=rng_of,
                     memo=None if cache is None else cache.memo("lower"),
                     checkpoints=None if cache is None else cache.memo("lower_checkpoints"), options=options,
                     own_fetches=own_fetches)
        if many_runs:
            execute.tier1(plan, storage)
        else:
            execute.interpret(plan, storage)
        plan.next_tier = options.jit_after
        plan.key = key
        plan.compile_time = _perf() - t0
        plan.pass_times = timings
        plan.nodes_graph = len(g.eqns)
        plan.nodes_pruned = len(pruned.eqns)
        plan.nodes_after = len(opt.eqns)
        plan.fetch_names = [v.name for v in flat]
        plan.feed_names = [g.values[i].name for i in feed_ids]
        self.order.append(plan)
        return plan

    def ran(self, plan, n, storage, options):
        """Count ``n`` runs of ``plan`` (iterations, branch runs) and move it
        up the tiers they have earned."""
        plan.runs += n
        if plan.runs >= plan.next_tier:
            tier_up(plan, storage, options)
