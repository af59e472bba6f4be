"""Lowering: an optimised program (a derived :class:`Graph` with outputs) to
a :class:`Plan`, a flat list of instructions over numbered slots that the
executors of :mod:`.execute` run.

Instruction kinds: ``cast`` (a fed value to its placeholder's dtype),
``var`` (a variable's storage, or a snapshot of it when an effect of the same
run writes it and something reads it after the effect), ``param`` (a live
parameter's array, ``numpy()``, checked against the traced shape and dtype), ``copy``
(a fetched value out of shared memory), ``call`` (``prim.impl``, with an
``out=`` buffer from the memory plan), ``vjp`` (a table VJP called directly),
``effect`` (``impl(storage, ...)``) and ``own`` (the last one: fetched
values that may be a feed, a view of one, a read-only view or another fetch
become copies; see :func:`~.execute.own`).
"""
from __future__ import annotations

import numpy as np

from ...autograd.primitives import make_rng
from .ir import RunForEffect, constant_p, effect_variables, param_p, placeholder_p, variable_p
from .passes import CompileOptions

__all__ = ["Plan", "Instr", "lower"]


class Plan:
    """A compiled plan and its statistics."""

    __slots__ = ("fn", "key", "runs", "total", "compile_time", "nodes_graph", "nodes_pruned", "nodes_after",
                 "fetch_names", "feed_names", "filename", "line_ins", "variables", "source", "n_fused",
                 "n_buffers", "pass_times", "instrs", "consts", "arg_slots", "n_slots", "ret", "tier",
                 "codegen_time", "releases", "program", "slot_of", "native", "next_tier")

    def stats(self):
        return {
            "fetches": self.fetch_names,
            "feeds": self.feed_names,
            "compile_ms": self.compile_time * 1e3,
            "codegen_ms": self.codegen_time * 1e3,
            "tier": self.tier,
            "native": self.native.reason if self.native is not None and self.tier < 3 else None,
            "native_ms": self.native.compile_time * 1e3 if self.native is not None else None,
            "pass_ms": {k: v * 1e3 for k, v in self.pass_times.items()},
            "nodes_graph": self.nodes_graph,
            "nodes_before": self.nodes_pruned,
            "nodes_after": self.nodes_after,
            "fused_kernels": self.n_fused,
            "buffers": self.n_buffers,
            "runs": self.runs,
            "mean_run_us": (self.total / self.runs * 1e6) if self.runs else None,
        }



class Instr:
    """One instruction of a plan: ``outs = fn(args...)`` over slots."""

    __slots__ = ("kind", "outs", "fn", "args", "kw", "eqn", "extra")

    def __init__(self, kind, outs, fn, args, kw, eqn, extra):
        self.kind = kind
        self.outs = outs
        self.fn = fn
        self.args = args
        self.kw = kw
        self.eqn = eqn
        self.extra = extra



def _unread(g):
    """The values of program ``g`` that no equation reads and no output is."""
    read = set(g.outputs)
    made = set()
    for e in g.eqns:
        read.update(e.ins)
        made.update(e.outs)
    return made - read


def _instr_of(g, e, rng_of, options):
    """What lowering makes of a computing equation ``e``, apart from slots:
    (kind, fn, kw, extra, fresh), ``fresh`` when its result never shares
    memory with an input. It depends on ``e``, the avals (``_grad_casts``),
    ``rng_of`` and ``options`` (given to control flow, which compiles
    programs of its own) only, so a compile context can keep it."""
    p = e.prim
    info = getattr(p, "vjp_call", None)
    if getattr(p, "effect", False):
        return ("effect", p.impl, e.attrs or None, None, False)
    if info is not None:
        fn, fwd_multi, joint, densify = info
        n_in = e.attrs["_n_in"]
        rest = {a: b for a, b in e.attrs.items() if a != "_n_in"}
        if p.options_arg:
            rest["options"] = options
        n_args = len(e.ins)
        n_out = (n_args - n_in) // 2 if fwd_multi else 1
        return ("vjp", fn, rest or None, (fwd_multi, n_out, n_in, densify, _grad_casts(g, e)), _fresh(p))
    kw = e.attrs or None
    if p.random:
        kw = {**e.attrs, "rng": rng_of(e) if rng_of is not None else make_rng(e.attrs["seed"])}
    elif getattr(p, "options_arg", False):
        kw = {**e.attrs, "options": options}
    return ("call", p.impl, kw, None, _fresh(p))


_MIN_CHECKPOINT = 4         # equations: a shorter common prefix saves less than keeping its state costs
_MAX_CHECKPOINTS = 8        # per compile context


class _Checkpoint:
    """The lowering's state after the equations ``eqns`` (a program's
    prefix without effects, outputs or buffers): what lowering any program
    that starts with the same equations, for the same feeds, has after them,
    and the releases of its instructions as if nothing after them read a slot."""

    __slots__ = ("eqns", "m", "slot", "consts", "instrs", "counter", "arg_slots", "shared", "variables",
                 "n_fused", "feed_key", "pre_rel", "rel_at")

    def __init__(self, eqns, slot, consts, instrs, counter, arg_slots, shared, variables, n_fused, feed_key):
        self.eqns = eqns
        self.m = len(eqns)
        self.slot = dict(slot)
        self.consts = dict(consts)
        self.instrs = list(instrs)
        self.counter = counter
        self.arg_slots = list(arg_slots)
        self.shared = set(shared)
        self.variables = list(variables)
        self.n_fused = n_fused
        self.feed_key = feed_key
        self.pre_rel = _releases(self.instrs, ("none",), self.consts, self.arg_slots)
        self.rel_at = {a: k for k, r in enumerate(self.pre_rel) for a in r}


def _checkpoint_for(checkpoints, eqns, feed_key, outputs):
    """The longest kept checkpoint that ``eqns`` extends and no output of the program lies in."""
    for c in checkpoints.get("kept", ()):
        m = c.m
        if (m < len(eqns) and c.feed_key == feed_key and eqns[:m] == c.eqns
                and not any(o in c.slot for o in outputs)):
            return c
    return None


def _common_prefix(a, b):
    k = 0
    for x, y in zip(a, b):
        if x is not y:
            break
        k += 1
    return k


def lower(g, flat, template, feed_ids, casts, keep_sparse=False, rng_of=None, memo=None, checkpoints=None,
          options=None, own_fetches=True):
    """Lower the optimised program ``g`` to a :class:`Plan`: instructions
    over slots, the slots dead after each instruction, the constants, the
    argument slots (one per fed placeholder, in ``feed_ids`` order; ``casts``
    maps a fed id to the dtype it is cast to) and the fetch structure
    (``template`` over the flat fetch list ``flat``). ``plan.fn`` is set by
    :mod:`.execute`. ``rng_of(eqn)`` gives a random equation its generator
    (the session's, so every run draws anew; default: a fresh one from its seed).
    ``memo`` (a :meth:`~.passes.PassCache.memo` of one compile context, with
    one ``rng_of``) keeps what each equation lowers to, so a later plan only
    numbers the slots of the equations an earlier plan lowered. ``checkpoints``
    (a dict of the same context, used with ``memo``) keeps the whole state
    after a prefix that two successive programs shared, so a later program
    that starts with it lowers only the equations after it (the plan is the
    same: equations never change, and lowering an equation depends on what
    comes before it only). ``options`` (the session's
    :class:`~.passes.CompileOptions`) go to the equations that compile
    programs of their own (loops, ``cond``). ``own_fetches``: make every
    fetched value the caller's (:func:`_own_fetches`; a loop body's results
    go back into the loop and need not be)."""
    if options is None:
        options = CompileOptions()
    eqns = g.eqns
    buffers = {}
    written = set()
    read_late = set()
    ck = None
    snap_at = None
    if checkpoints is not None and (memo is None or g.meta.get("buffers")):
        checkpoints = None
    if checkpoints is not None:
        feed_key = (tuple(feed_ids), tuple(casts.items()))
        ck = _checkpoint_for(checkpoints, eqns, feed_key, g.outputs)
        if ck is not None and any(getattr(e.prim, "effect", False) for e in eqns[ck.m:]):
            ck = None
    if ck is not None:
        slot = dict(ck.slot)
        consts = dict(ck.consts)
        instrs = list(ck.instrs)
        counter = ck.counter
        arg_slots = list(ck.arg_slots)
        shared = set(ck.shared)
        variables = list(ck.variables)
        n_fused = ck.n_fused
        parts = (eqns[ck.m:],)
    else:
        slot = {}
        consts = {}
        instrs = []
        counter = 0
        # every fed placeholder takes an argument position, used or not
        arg_slots = []
        for pid in feed_ids:
            slot[pid] = counter
            arg_slots.append(counter)
            counter += 1
        for pid in feed_ids:
            if pid in casts:
                instrs.append(Instr("cast", (slot[pid],), casts[pid], (slot[pid],), None, None, None))
        shared = set()            # may share memory with a variable, a live parameter or a buffer
        variables = []
        n_fused = 0
        parts = (eqns,)
    unread = None             # values nothing reads (made on first need: a loop's unread trace)
    # which variables an effect of this plan writes, and which values run after an effect
    effects = [e for e in parts[0] if getattr(e.prim, "effect", False)]
    if not effects and checkpoints is not None and ck is None:
        # a prefix this program shares with the context's last one is likely to begin the next
        # one too (a graph growing on top of what has run): keep the lowering's state after it
        last = checkpoints.get("last")
        if last is not None and last[1] == feed_key:
            snap_at = _common_prefix(last[0], eqns)
            if _MIN_CHECKPOINT <= snap_at < len(eqns):
                parts = (eqns[:snap_at], eqns[snap_at:])
    if checkpoints is not None and not effects:
        checkpoints["last"] = (eqns, feed_key)
    if effects:
        tainted = set()
        for e in g.eqns:
            if getattr(e.prim, "effect", False):
                written.update(v.index for v in effect_variables(e))
                written.update(v.index for v in e.attrs.get("vars", ()))
                tainted.update(e.outs)
            elif any(i in tainted for i in e.ins):
                tainted.update(e.outs)
        for e in g.eqns:
            if e.outs[0] in tainted:
                read_late.update(e.ins)
    out_set = set(g.outputs)
    copy_outputs = g.meta.get("copy_outputs", set())
    # fetched slots holding an array this run made and nothing else holds (a ufunc's or a fused
    # kernel's result without a buffer, a copy): they need no copy (a checkpoint's prefix has no
    # output, so this starts empty)
    new_arrays = set()
    root_vals = g.values
    for part in parts:
        if part is not parts[0] and not any(o in slot for o in out_set):
            kept = checkpoints.setdefault("kept", [])
            kept.append(_Checkpoint(eqns[:snap_at], slot, consts, instrs, counter, arg_slots, shared, variables,
                                    n_fused, feed_key))
            kept.sort(key=lambda c: -c.m)
            del kept[_MAX_CHECKPOINTS:]
        for e in part:
            p = e.prim
            o = e.outs[0]
            if p is placeholder_p:
                continue
            if p is constant_p:
                cs = counter
                slot[o] = cs
                counter += 1
                consts[cs] = e.attrs["value"]
                # constants are read-only, so only a constant fetched as it is gets copied (to be writable)
                if o in out_set:
                    slot[o] = counter
                    instrs.append(Instr("copy", (counter,), None, (cs,), None, e, None))
                    new_arrays.add(counter)
                    counter += 1
                continue
            elif p is variable_p:
                var = e.attrs["var"]
                variables.append(var)
                snap = var.index in written and o in read_late
                slot[o] = counter
                instrs.append(Instr("var", (counter,), None, (), None, e, (var.index, snap)))
                counter += 1
                if not snap:
                    shared.add(o)
            elif p is param_p:
                decl = g.avals[o]
                slot[o] = counter
                instrs.append(Instr("param", (counter,), None, (), None, e,
                                   (e.attrs["param"], tuple(decl.shape), np.dtype(decl.dtype))))
                counter += 1
                shared.add(o)
            else:
                args = tuple([slot[i] for i in e.ins])
                if len(e.outs) == 1:
                    slot[o] = counter
                    outs = (counter,)
                    counter += 1
                else:
                    outs = tuple(range(counter, counter + len(e.outs)))
                    for x, sl in zip(e.outs, outs):
                        slot[x] = sl
                    counter += len(e.outs)
                if e.attrs and e.attrs.get("back_prop") and "appends" in e.attrs:
                    # a while loop: it keeps what its gradient reads only where this program reads its
                    # trace (an evaluation run of a trained graph keeps nothing); not memoised, since
                    # that depends on the program
                    kind, fn, kw, extra, fresh = _instr_of(g, e, rng_of, options)
                    if unread is None:
                        unread = _unread(g)
                    if e.outs[-1] in unread:
                        kw = {**kw, "keep": False}
                elif memo is None or e.buf is not None or (p.random and rng_of is None):
                    kind, fn, kw, extra, fresh = _instr_of(g, e, rng_of, options)
                else:
                    r = memo.get(o)
                    if r is None or r[0] is not e:
                        r = memo[o] = (e, _instr_of(g, e, rng_of, options))
                    kind, fn, kw, extra, fresh = r[1]
                if kind == "effect":
                    variables.extend(effect_variables(e))
                    shared.update(e.outs)
                elif kind == "call":
                    if e.buf is not None:
                        extra = buffers.get(e.buf)
                        if extra is None:
                            shp, dt = g.meta["buffers"][e.buf]
                            extra = buffers[e.buf] = np.empty(shp, dt)
                    if p.name == "fused":
                        n_fused += 1
                instrs.append(Instr(kind, outs, fn, args, kw, e, extra))
                if fresh and kind == "call" and e.buf is None and o in out_set:
                    new_arrays.update(outs)
                if not fresh and kind != "effect" and shared:
                    for i in e.ins:
                        if i in shared:
                            shared.update(e.outs)
                            break
            # fetched values are the caller's: copy them out of shared storage right away, so
            # a later update in this run (or a later run) cannot change them
            if o in out_set or len(e.outs) > 1:
                for x in e.outs:
                    if x in out_set and (x in shared or x in copy_outputs) and not isinstance(root_vals[x], RunForEffect):
                        instrs.append(Instr("copy", (slot[x],), None, (slot[x],), None, e, None))
                        new_arrays.add(slot[x])
    twice = None
    if own_fetches:
        counter, twice = _own_fetches(g, flat, slot, arg_slots, new_arrays, instrs, counter)
    ret = _ret_template(template, g, slot, flat, keep_sparse, twice)
    releases = _releases(instrs, ret, consts, arg_slots, ck)
    plan = Plan()
    plan.instrs = instrs
    plan.releases = releases
    plan.consts = consts
    plan.arg_slots = arg_slots
    plan.n_slots = counter
    plan.ret = ret
    plan.fn = None
    plan.tier = 0
    plan.runs = 0
    plan.total = 0.0
    plan.filename = None
    plan.line_ins = None
    plan.variables = tuple({id(v): v for v in variables}.values())
    plan.source = None
    plan.codegen_time = 0.0
    plan.n_fused = n_fused
    plan.n_buffers = len(g.meta.get("buffers", {}))
    # what the third tier (.native) translates from: the values' avals by slot
    plan.program = g
    plan.slot_of = slot
    plan.native = None
    plan.next_tier = 0
    return plan


def _own_fetches(g, flat, slot, arg_slots, new_arrays, instrs, counter):
    """Make the fetched values the caller's. One last ``own`` instruction
    checks, at run time, every fetched value that is not an array this run
    made: one that is a feed, a view of a feed, of a constant or of another
    fetch, or read-only (``broadcast_to``), becomes a copy
    (:func:`~.execute.own`), so a result never changes when the caller
    changes a feed or another result, and can be written. A check, not a
    copy, because most such values are fresh arrays (a ``matmul``'s, a
    reduction's) that a copy would only slow down. A value fetched twice
    gets a copy for its second place. Returns the new slot count and the
    slots of those second places (fetch index -> slot)."""
    if len(flat) == 1:
        # one fetch (a first run after adding an op: every microsecond of compiling counts)
        if not isinstance(flat[0], RunForEffect):
            s = slot[g.outputs[0]]
            if s not in new_arrays:
                instrs.append(Instr("own", (s,), None, (s, *arg_slots), None, None, 1))
        return counter, None
    check, fresh, seen, twice = [], [], set(), {}
    copies = []
    for t, v in enumerate(flat):
        if isinstance(v, RunForEffect):
            continue
        s = slot[g.outputs[t]]
        if s in seen:
            copies.append(Instr("copy", (counter,), None, (s,), None, None, None))
            twice[t] = counter
            counter += 1
            continue
        seen.add(s)
        (fresh if s in new_arrays else check).append(s)
    if check:
        instrs.append(Instr("own", tuple(check), None, tuple(check) + tuple(arg_slots) + tuple(fresh), None, None,
                            len(check)))
    instrs.extend(copies)
    return counter, twice


def _grad_casts(g, e):
    """Declared dtypes to cast a VJP equation's results to, or None where its
    float inputs and results all have one dtype and no Python scalar takes
    part (nothing can promote; integer and boolean inputs are indices and
    masks, None constants stand for absent output gradients)."""
    dts = [g.avals[o].dtype for o in e.outs]
    ins = [g.avals[i].dtype for i in e.ins]
    floats = [d for d in dts + ins if not (isinstance(d, np.dtype) and d.kind in "biuO")]
    if floats and all(isinstance(d, np.dtype) and d == floats[0] for d in floats):
        return None
    out = tuple(d if isinstance(d, np.dtype) else None for d in dts)
    return out if len(e.outs) > 1 or e.prim.multiple_results else out[0]



def _ret_template(t, g, slot, flat, raw_sparse, twice=None):
    """The fetch structure over slots: ('v', slot, densify), ('none',),
    (list|tuple|dict, items); ``twice`` maps the second place of a value
    fetched twice to its copy's slot."""
    if isinstance(t, int):
        o = g.outputs[t]
        v = flat[t]
        if isinstance(v, RunForEffect):
            return ("none",)
        s = twice.get(t, slot[o]) if twice else slot[o]
        return ("v", s, (v.sparse or g.values[o].sparse) and not raw_sparse)
    tp, items = t
    if tp == "op":              # a pure op fetched for its effect-free run: None, as TF1
        return ("none",)
    if tp is dict:
        return (dict, [(k, _ret_template(s, g, slot, flat, raw_sparse, twice)) for k, s in items])
    return (tp, [_ret_template(s, g, slot, flat, raw_sparse, twice) for s in items])



def _releases(instrs, ret, consts, args, ck=None):
    """Per instruction, the slots whose value is dead after it (last read, or
    never read), so a run drops its intermediates as it goes, as eager
    backward frees its nodes: a plan that held every activation and gradient
    until it returned would need fresh memory (page faults, cache misses) for
    each new array."""
    keep = set(consts)
    keep.update(args)
    if ret[0] == "v":
        keep.add(ret[1])
    elif ret[0] != "none":
        _ret_slots(ret, keep)
    # walking backwards, the first instruction to touch a slot is its last one
    if ck is None:
        seen = keep
        rel = [()] * len(instrs)
        n0 = 0
    else:
        # the checkpoint's instructions release what no later one touches
        seen = set(keep)
        n0 = len(ck.instrs)
        rel = ck.pre_rel + [()] * (len(instrs) - n0)
    for k in range(len(instrs) - 1, n0 - 1, -1):
        ins = instrs[k]
        r = None
        for vals in (ins.args, ins.outs):
            for a in vals:
                if a not in seen:
                    seen.add(a)
                    if r is None:
                        r = [a]
                    else:
                        r.append(a)
        if r is not None:
            rel[k] = tuple(sorted(r)) if len(r) > 1 else (r[0],)
    if ck is not None:
        rel_at = ck.rel_at
        for a in seen:
            k = rel_at.get(a)
            if k is not None and a not in keep:
                rel[k] = tuple([x for x in rel[k] if x != a])
    return rel



def _ret_slots(t, keep):
    if t[0] == "v":
        keep.add(t[1])
    elif t[0] != "none":
        for sub in t[1]:
            _ret_slots(sub[1] if t[0] is dict else sub, keep)


def _fresh(p):
    """Primitives whose result never shares memory with an input."""
    return isinstance(p.impl, np.ufunc) or getattr(p, "out_arg", False)

