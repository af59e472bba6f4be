"""The executors of a lowered :class:`~.lower.Plan`, tiered as in a JIT.

:func:`interpret` runs the instruction list as it is (a session's plan
starts there: nothing to build, so adding an op to a graph and running it
once costs about 0.1 ms); :func:`tier1` builds a loop over one small closure
per instruction (for a plan that runs many times on it, a loop body);
:func:`tier2` generates one straight-line Python function, one
line per instruction (about 0.1 ms to compile; a run with a known key then
costs a tuple build, one dict lookup and that call). All three call the same
functions with the same arguments, so they agree exactly. :func:`tier3`
compiles a small plan whole into one Numba function (:mod:`.native`: 0.3-1.5 s
to compile, ~10 ms to load from the disk cache; a run is then one call),
which agrees with the others to rounding; a plan it cannot translate stays
on tier 2.
"""
from __future__ import annotations

import time

import numpy as np

from ...autograd import gradtypes
from ...autograd.primitives import ShapeError, fmt_shape
from .ir import UninitializedVariableError, op_error, site_str

__all__ = ["interpret", "tier1", "tier2", "tier3", "explain", "own"]

_ndarray = np.ndarray
_perf = time.perf_counter

_dense = gradtypes.densify
_dense_all = gradtypes.densify_all




def _cp(x):
    return x.copy() if type(x) is _ndarray else x


def own(vals, refs):
    """``vals`` (fetched values) made the caller's: an array that is one of
    ``refs`` (the feeds and the fetched arrays this run made), a view of
    one, shares its memory with an earlier value, or is read-only comes
    back as a copy; any other array (a fresh result, or a view of an
    intermediate nothing else returns) as it is. Two arrays share memory
    when they have the same owner: the end of their ``base`` chain (an
    array that owns its data, or the object that does: the native tier's
    arrays are views of a Numba MemInfo)."""
    for x in vals:
        if type(x) is _ndarray:
            break
    else:
        return vals
    seen = set()
    for r in refs:
        if type(r) is _ndarray:
            seen.add(id(_owner(r)))
    out = []
    for x in vals:
        if type(x) is _ndarray:
            o = id(_owner(x))
            if o in seen or not x.flags.writeable:
                x = x.copy()
                o = id(x)
            seen.add(o)
        out.append(x)
    return out


def _owner(x):
    b = x.base
    while type(b) is _ndarray:
        x = b
        b = x.base
    return x if b is None else b


def _bad_param(p, shape, dtype):
    d = p.numpy()
    raise ShapeError(f"Session.run: live parameter '{p.name or 'param'}' has shape {fmt_shape(d.shape)} and dtype "
                     f"{d.dtype}; the graph was traced for shape {fmt_shape(shape)} and dtype {dtype} (trace again "
                     f"after changing a parameter's shape)")


_cast = gradtypes.cast


def _cast_all(r, dts):
    return tuple(_cast(x, dt) for x, dt in zip(r, dts))



def _ret_source(t, ns, consts):
    if t[0] == "none":
        return "None"
    if t[0] == "v":
        v = f"C{t[1]}" if t[1] in consts else f"v{t[1]}"
        return f"_dense({v})" if t[2] else v
    tp, items = t
    if tp is dict:
        parts = []
        for k, sub in items:
            kn = f"K{len(ns)}"
            ns[kn] = k
            parts.append(f"{kn}: {_ret_source(sub, ns, consts)}")
        return "{" + ", ".join(parts) + "}"
    inner = "".join(_ret_source(s, ns, consts) + ", " for s in items)
    if tp is list:
        return f"[{inner}]"
    if tp is tuple:
        return f"({inner})"
    tn = f"T{len(ns)}"          # a namedtuple type
    ns[tn] = tp
    return f"{tn}({inner})"



def _ret_builder(t):
    if t[0] == "none":
        return lambda env: None
    if t[0] == "v":
        s = t[1]
        if t[2]:
            return lambda env: _dense(env[s])
        return lambda env: env[s]
    tp, items = t
    if tp is dict:
        subs = [(k, _ret_builder(x)) for k, x in items]
        return lambda env: {k: f(env) for k, f in subs}
    subs = [_ret_builder(x) for x in items]
    if tp is list:
        return lambda env: [f(env) for f in subs]
    if tp is tuple:
        return lambda env: tuple(f(env) for f in subs)
    return lambda env: tp(*(f(env) for f in subs))



def _step(ins, S):
    """A closure executing one instruction on the slot list ``env``."""
    kind, outs, fn, a, kw = ins.kind, ins.outs, ins.fn, ins.args, ins.kw
    o = outs[0]
    if kind == "cast":
        def step(env):
            env[o] = env[o].astype(fn)
    elif kind == "var":
        idx, snap = ins.extra
        if snap:
            def step(env):
                env[o] = S[idx].copy()
        else:
            def step(env):
                env[o] = S[idx]
    elif kind == "param":
        prm, shp, dt = ins.extra

        def step(env):
            d = prm.numpy()
            env[o] = d if d.shape == shp and d.dtype == dt else _bad_param(prm, shp, dt)
    elif kind == "copy":
        src = a[0]

        def step(env):
            env[o] = _cp(env[src])
    elif kind == "own":
        n = ins.extra
        checked, refs = a[:n], a[n:]

        def step(env):
            r = own([env[i] for i in checked], [env[i] for i in refs])
            for j, x in enumerate(outs):
                env[x] = r[j]
    else:
        kw = dict(kw) if kw else {}
        if kind == "call" and ins.extra is not None:
            kw["out"] = ins.extra
        if kind == "vjp":
            fwd_multi, n_out, n_in, densify, dts = ins.extra
            multi = ins.eqn.prim.multiple_results
            post = (_dense_all if multi else _dense) if densify else None
            if dts is not None:
                dense = post

                def post(r):
                    if dense is not None:
                        r = dense(r)
                    return _cast_all(r, dts) if multi else _cast(r, dts)
            if fwd_multi:
                def call(env):
                    return fn(tuple(env[i] for i in a[:n_out]), tuple(env[i] for i in a[n_out:n_out + n_in]),
                              tuple(env[i] for i in a[n_out + n_in:]), **kw)
            else:
                g0, xs, y = a[0], a[1:1 + n_in], a[1 + n_in]

                def call(env):
                    return fn(env[g0], tuple([env[i] for i in xs]), env[y], **kw)
            if post is not None:
                inner = call

                def call(env):
                    return post(inner(env))
        elif kind == "effect":
            def call(env):
                return fn(S, *[env[i] for i in a], **kw)
        elif not kw and len(a) == 1:
            a0 = a[0]

            def call(env):
                return fn(env[a0])
        elif not kw and len(a) == 2:
            a0, a1 = a

            def call(env):
                return fn(env[a0], env[a1])
        else:
            def call(env):
                return fn(*[env[i] for i in a], **kw)
        if len(outs) == 1 and not (ins.eqn is not None and ins.eqn.prim.multiple_results):
            def step(env):
                env[o] = call(env)
        else:
            def step(env):
                r = call(env)
                for j, x in enumerate(outs):
                    env[x] = r[j]
    return step



def _with_release(step, rel):
    if len(rel) == 1:
        r0 = rel[0]

        def s(env):
            step(env)
            env[r0] = None
        return s

    def s(env):
        step(env)
        for r in rel:
            env[r] = None
    return s



def tier1(plan, S):
    """Set ``plan.fn`` to the loop over one closure per instruction, reading
    and writing variables in storage ``S``."""
    plan.fn = _tier1(plan.instrs, plan.releases, plan.consts, plan.arg_slots, plan.n_slots, plan.ret, S)
    plan.tier = 1


def _env_template(consts, arg_slots, n_slots):
    """What a run's slot list starts from (the constants in place), the
    number of arguments, and whether they fill the first slots in order."""
    template = [None] * n_slots
    for s, c in consts.items():
        template[s] = c
    n_args = len(arg_slots)
    return template, n_args, arg_slots == list(range(n_args))


def _tier1(instrs, releases, consts, arg_slots, n_slots, ret, S):
    steps = [_step(i, S) if not r else _with_release(_step(i, S), r) for i, r in zip(instrs, releases)]
    template, n_args, contiguous = _env_template(consts, arg_slots, n_slots)
    build = _ret_builder(ret)

    def run(*vals):
        env = template[:]
        if contiguous:
            env[:n_args] = vals
        else:
            for s, v in zip(arg_slots, vals):
                env[s] = v
        k = 0
        try:
            for st in steps:
                st(env)
                k += 1
        except Exception as exc:
            try:
                exc._dynnets_step = k
            except AttributeError:
                pass
            raise
        return build(env)

    return run



def interpret(plan, S):
    """Set ``plan.fn`` to an interpreter of the instruction list (a plan's
    first runs: a session's plan runs on it until it is replaced by
    :func:`tier2`, by default after its second run). It builds nothing per
    instruction, so a plan that runs once or twice costs less than with the
    closures of :func:`tier1` (adding an op to a graph that has run and
    running it once: building the closures cost ~18 us of ~110 us; the
    interpreter runs a 9-instruction plan in about the time the closures
    do); a plan run many times without a tier change (a loop body) wants
    :func:`tier1`. Same functions, same arguments, same results."""
    plan.fn = _interpreter(plan.instrs, plan.releases, plan.consts, plan.arg_slots, plan.n_slots, plan.ret, S)
    plan.tier = 1


def _interpreter(instrs, releases, consts, arg_slots, n_slots, ret, S):
    template, n_args, contiguous = _env_template(consts, arg_slots, n_slots)

    def run(*vals):
        env = template[:]
        if contiguous:
            env[:n_args] = vals
        else:
            for s, v in zip(arg_slots, vals):
                env[s] = v
        k = 0
        try:
            for ins in instrs:
                kind = ins.kind
                a = ins.args
                if kind == "call":
                    fn = ins.fn
                    kw = ins.kw
                    if ins.extra is not None:
                        kw = dict(kw, out=ins.extra) if kw else {"out": ins.extra}
                    if kw:
                        r = fn(*[env[i] for i in a], **kw)
                    elif len(a) == 2:
                        r = fn(env[a[0]], env[a[1]])
                    elif len(a) == 1:
                        r = fn(env[a[0]])
                    else:
                        r = fn(*[env[i] for i in a])
                    outs = ins.outs
                    if len(outs) == 1 and not ins.eqn.prim.multiple_results:
                        env[outs[0]] = r
                    else:
                        for j, x in enumerate(outs):
                            env[x] = r[j]
                elif kind == "var":
                    idx, snap = ins.extra
                    env[ins.outs[0]] = S[idx].copy() if snap else S[idx]
                elif kind == "vjp":
                    fwd_multi, n_out, n_in, densify, dts = ins.extra
                    fn = ins.fn
                    kw = ins.kw or {}
                    if fwd_multi:
                        r = fn(tuple([env[i] for i in a[:n_out]]), tuple([env[i] for i in a[n_out:n_out + n_in]]),
                               tuple([env[i] for i in a[n_out + n_in:]]), **kw)
                    else:
                        r = fn(env[a[0]], tuple([env[i] for i in a[1:1 + n_in]]), env[a[1 + n_in]], **kw)
                    multi = ins.eqn.prim.multiple_results
                    if densify:
                        r = _dense_all(r) if multi else _dense(r)
                    if dts is not None:
                        r = _cast_all(r, dts) if multi else _cast(r, dts)
                    outs = ins.outs
                    if len(outs) == 1 and not multi:
                        env[outs[0]] = r
                    else:
                        for j, x in enumerate(outs):
                            env[x] = r[j]
                elif kind == "copy":
                    env[ins.outs[0]] = _cp(env[a[0]])
                elif kind == "own":
                    n = ins.extra
                    # one fetch that is not an array (a loss: a numpy scalar) is the caller's already
                    if n > 1 or type(env[a[0]]) is _ndarray:
                        r = own([env[i] for i in a[:n]], [env[i] for i in a[n:]])
                        for j, x in enumerate(ins.outs):
                            env[x] = r[j]
                elif kind == "effect":
                    kw = ins.kw
                    r = ins.fn(S, *[env[i] for i in a], **kw) if kw else ins.fn(S, *[env[i] for i in a])
                    outs = ins.outs
                    if len(outs) == 1 and not ins.eqn.prim.multiple_results:
                        env[outs[0]] = r
                    else:
                        for j, x in enumerate(outs):
                            env[x] = r[j]
                elif kind == "param":
                    prm, shp, dt = ins.extra
                    d = prm.numpy()
                    env[ins.outs[0]] = d if d.shape == shp and d.dtype == dt else _bad_param(prm, shp, dt)
                else:
                    env[ins.outs[0]] = env[a[0]].astype(ins.fn)
                rel = releases[k]
                if rel:
                    for x in rel:
                        env[x] = None
                k += 1
        except Exception as exc:
            try:
                exc._dynnets_step = k
            except AttributeError:
                pass
            raise
        return _ret_value(ret, env)

    return run


def _ret_value(t, env):
    """The fetch structure ``t`` (see :func:`~.lower._ret_template`) filled from ``env``."""
    k = t[0]
    if k == "v":
        return _dense(env[t[1]]) if t[2] else env[t[1]]
    if k == "none":
        return None
    tp, items = t
    if tp is dict:
        return {key: _ret_value(sub, env) for key, sub in items}
    if tp is list:
        return [_ret_value(sub, env) for sub in items]
    if tp is tuple:
        return tuple([_ret_value(sub, env) for sub in items])
    return tp(*[_ret_value(sub, env) for sub in items])


def tier2(plan, storage):
    """Replace ``plan.fn`` by generated straight-line Python: one line per
    instruction, functions, constants and buffers bound as globals, a
    ``del`` where slots die."""
    t0 = _perf()
    ns = {"S": storage, "_dense": _dense, "_dense_all": _dense_all, "_cp": _cp, "_own": own, "_nd": _ndarray,
          "_cast": _cast,
          "_cast_all": _cast_all, "_bad_param": _bad_param}
    consts = plan.consts
    for s, c in consts.items():
        ns[f"C{s}"] = c

    def nm(s):
        return f"C{s}" if s in consts else f"v{s}"
    lines = []
    line_ins = {}
    for k, ins in enumerate(plan.instrs):
        kind = ins.kind
        multi = len(ins.outs) > 1 or (kind in ("call", "vjp", "effect") and ins.eqn.prim.multiple_results)
        outs = ", ".join(f"v{o}" for o in ins.outs) + ("," if multi else "")
        a = [nm(i) for i in ins.args]
        if kind == "cast":
            ns[f"D{k}"] = ins.fn
            ln = f"{outs} = {a[0]}.astype(D{k})"
        elif kind == "var":
            idx, snap = ins.extra
            ln = f"{outs} = S[{idx}]" + (".copy()" if snap else "")
        elif kind == "param":
            prm, shp, dt = ins.extra
            ns[f"P{k}"], ns[f"Q{k}"], ns[f"D{k}"] = prm, shp, dt
            ln = (f"{outs} = _a{k} if (_a{k} := P{k}.numpy()).shape == Q{k} and _a{k}.dtype == D{k} "
                  f"else _bad_param(P{k}, Q{k}, D{k})")
        elif kind == "copy":
            ln = f"{outs} = _cp({a[0]})"
        elif kind == "own":
            n = ins.extra
            outs = ", ".join(f"v{o}" for o in ins.outs) + ","
            ln = f"{outs} = _own(({''.join(x + ', ' for x in a[:n])}), ({''.join(x + ', ' for x in a[n:])}))"
            if n == 1:
                # one fetch that is not an array (a loss: a numpy scalar) is the caller's already
                ln = f"if type({a[0]}) is _nd: {ln}"
        else:
            ns[f"F{k}"] = ins.fn
            kw = ""
            if ins.kw:
                ns[f"A{k}"] = ins.kw
                kw = f", **A{k}"
            if kind == "effect":
                call = f"F{k}(S{''.join(', ' + x for x in a)}{kw})"
            elif kind == "vjp":
                fwd_multi, n_out, n_in, densify, dts = ins.extra
                if fwd_multi:
                    gs = "(" + "".join(x + ", " for x in a[:n_out]) + ")"
                    xs = "(" + "".join(x + ", " for x in a[n_out:n_out + n_in]) + ")"
                    os_ = "(" + "".join(x + ", " for x in a[n_out + n_in:]) + ")"
                else:
                    gs, xs, os_ = a[0], "(" + "".join(x + ", " for x in a[1:1 + n_in]) + ")", a[1 + n_in]
                call = f"F{k}({gs}, {xs}, {os_}{kw})"
                if densify:
                    call = f"_dense_all({call})" if multi else f"_dense({call})"
                if dts is not None:
                    ns[f"T{k}"] = dts
                    call = f"_cast_all({call}, T{k})" if multi else f"_cast({call}, T{k})"
            else:
                parts = list(a)
                if ins.kw:
                    parts.append(f"**A{k}")
                if ins.extra is not None:
                    ns[f"B{k}"] = ins.extra
                    parts.append(f"out=B{k}")
                call = f"F{k}({', '.join(parts)})"
            ln = f"{outs} = {call}"
        line_ins[len(lines) + 2] = k
        lines.append(ln)
        rel = plan.releases[k]
        if rel:
            line_ins[len(lines) + 2] = k
            lines.append("del " + ", ".join(f"v{r}" for r in rel))
    args = ", ".join(f"v{s}" for s in plan.arg_slots)
    ret = _ret_source(plan.ret, ns, consts)
    fname = f"<dynnets plan {id(plan):x}>"
    src = f"def _plan({args}):\n" + "".join(f"    {ln}\n" for ln in lines) + f"    return {ret}\n"
    exec(compile(src, fname, "exec"), ns)
    plan.fn = ns["_plan"]
    plan.source = src
    plan.filename = fname
    plan.line_ins = line_ins
    plan.tier = 2
    plan.codegen_time = _perf() - t0


def tier3(plan, storage):
    """Replace ``plan.fn`` (tier 2) by one call of a generated Numba kernel
    doing the whole plan, where :mod:`.native` can translate it; True if it
    did (``plan.native.reason`` says why not otherwise)."""
    from . import native
    return native.compile_plan(plan, storage, _bad_param)


def explain(plan, exc, storage):
    """The error to raise for ``exc`` raised by ``plan.fn``: an unset
    variable, or ``exc`` naming the op (and the user's line) that failed."""
    missing = [v for v in plan.variables if v.index not in storage]
    if missing:
        names = ", ".join(f"'{v.name}'" for v in missing)
        return UninitializedVariableError(
            f"Session.run: variable {names} used before it was initialised in this session; run "
            f"global_variables_initializer() (or the variable's initializer) first")
    k = getattr(exc, "_dynnets_step", None)
    if plan.filename is not None:
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == plan.filename:
                k = plan.line_ins.get(tb.tb_lineno)
            tb = tb.tb_next
    eqn = plan.instrs[k].eqn if k is not None and k < len(plan.instrs) else None
    if isinstance(exc, ShapeError):
        where = f" in op '{eqn.name}'{site_str(eqn.site)}" if eqn is not None else ""
        return type(exc)(f"{exc}{where}")
    if eqn is None:
        return op_error(exc, f"Session.run: {type(exc).__name__}: {exc}")
    return op_error(exc, f"{eqn.prim.name}: Session.run: op '{eqn.name}'{site_str(eqn.site)} failed: "
                         f"{type(exc).__name__}: {exc}")

