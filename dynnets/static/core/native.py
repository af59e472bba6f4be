"""The third plan tier: a whole small plan as one generated Numba function.

A tier-2 plan (:func:`.execute.tier2`) is one Python line per instruction,
each a numpy call costing ~0.5-1 us of interpreter and dispatch on arrays of a
few elements. For the linear-regression train step of
``benchmarks/bench_static.py --only linreg`` (18 instructions) that is
~17.5 us, where ``jax.jit`` of the same step takes ~8.9 us and the same
arithmetic as numpy by hand ~9.3 us: a plan of numpy calls can at best tie
jax. The whole step as one compiled function takes ~0.4 us. So this tier
translates every instruction of a plan into plain loops over flat arrays of
static shapes (a loop per reduction, broadcast adjoint, transpose or
product; a chain of elementwise ops, forward or VJP, whose intermediate
results are read once is one loop; 0-d values are scalars) that Numba
compiles in nopython mode, as one function: a run is then the feed check of
:meth:`Session.run` (the plan key: every fed shape and dtype), one call of a
small Python wrapper that reads the variables' storage and calls the kernel,
and the fetched values boxed into their structure (linreg: ~2 us, of which
~0.75 us is the kernel call and ~1 us Session.run's own key and bookkeeping).
Loops, not numpy calls, inside the kernel: Numba types every ``np.*`` call
through its overload templates, and the same linreg step written with array
expressions took 0.9 s to compile against 0.35 s (0.27 s with the chains
fused), a 213-instruction plan 55 s against 11 s (4.9 s fused); compile time
grows with the number of loops, ~20 ms per instruction once fused.

Which plans qualify (:func:`translate` decides it by explicit checks and
raises :class:`Unsupported` otherwise, and the plan stays on tier 2,
transparently; any other error is a bug here and propagates): every
instruction's primitive has a translation in the table, ``defprim(native=,
native_vjp=)`` (:mod:`dynnets.autograd.primitives`: an elementwise scalar form
and scalar VJP formulas as strings, or a function building loops from
:class:`Gen`'s blocks; today elementwise arithmetic and the transcendental
functions, sum and mean, reshape / transpose / broadcast_to, 2-D matmul and
linear, astype and copy, each one's VJP, integer scalar arithmetic and scalar
comparisons, a loop's counter and condition), and so has every static
primitive a plan runs (the gradient sums, ``assign*``, ``group``, and the
optimizers' updates on dense gradients, their learning rate constant or fed:
:mod:`.train`); shapes are concrete (they are, after
``infer_shapes`` with the fed shapes; a loop body whose state may change
shape does not qualify); floating-point values are float32 or float64, and
an operation's array inputs share its dtype (Python scalars are kept weak,
as numpy does); no value has more than :data:`MAX_SIZE` elements and the
plan has at most :data:`MAX_INSTRS` instructions. A session's plans qualify
so, and so do the loop bodies, loop conditions and ``cond`` branches they
run (:mod:`.control_flow` compiles them with the session's options). Large arrays are
numpy's (its SIMD transcendental functions beat Numba's scalar libm calls
from ~1000 elements on, see :mod:`.passes`; and its BLAS beats the loops'
products), and a long plan would take seconds to compile.

The translations mirror the table's implementations and VJPs operation for
operation (same formulas, same order, constants cast to the dtype numpy
would use), so results agree with the plan executor to rounding: float64 to
~1e-14 relative (numpy sums pairwise and has its own SIMD exp/log/tanh, the
loops sum in sequence and call libm), float32 to a few ulps. Run as Python
(``NUMBA_DISABLE_JIT=1``), the same source is the kernel's twin. After
compiling, the kernel's inferred return type is checked against the declared
dtypes of the fetches (a translation that promoted somewhere is a bug: an
AssertionError). Fetched arrays are the caller's: a fetched feed, constant
or view of one, or an array fetched twice, is copied in the kernel
(:func:`_own`); an array the kernel allocated is returned as it is.

The kernel is compiled for one signature (C-contiguous, writable arrays of the
fed dtypes and the variables' dtypes) and its dispatcher may not compile
others: a run whose feed is, say, a strided view raises Numba's dispatch
TypeError before any code runs, and the wrapper, having checked that an
argument's layout is indeed not the signature's, runs the tier-2 function
instead. The generated code raises nothing itself after dispatch (no checks
are needed: every shape is static and was checked when the plan was made), so
an unset variable (a KeyError reading the storage) still reaches
:func:`.execute.explain`.

Compiled code is cached across processes: the kernel's source is written
(atomically, once) to ``$DYNNETS_CACHE_DIR/plans/p_<sha1 of the source>.py``
(default ``~/.cache/dynnets/plans``) and compiled from that module with
Numba's ``cache=True``, so a later process with the same plan loads the
machine code (5-10 ms) instead of compiling it (0.27 s for linreg, ~2.3 s for
a 115-instruction plan, measured on this shared machine). ``DYNNETS_NO_DISK_CACHE=1`` compiles in memory only. Within a
process, kernels are shared by source across plans and sessions.

The generator (:class:`~.native_gen.Gen` and the blocks the table's
translations build from) is :mod:`.native_gen`; this module translates a
plan instruction by instruction and compiles the kernel.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ...numba_cache import generated_kernel
from .native_gen import DT_NAME, FLOATS, MAX_SIZE, Gen, Unsupported, flat_slots, translator, vjp_translator

__all__ = ["Unsupported", "translate", "compile_plan", "MAX_SIZE", "MAX_INSTRS", "KERNEL_STATS"]

MAX_INSTRS = 120

KERNEL_STATS = {"compiled": 0, "reused": 0}
_KERNELS: dict = {}            # (kernel source, argument types) -> compiled dispatcher (shared by plans and sessions)

_perf = time.perf_counter


# --------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------

class Translation:
    """A plan translated: the kernel's source, its arguments (name, what the
    wrapper passes: ('feed', i) / ('var', index) / ('param', k) / ('const',
    slot); and the Numba type), and the flat fetched slots with their shape
    and dtype."""

    __slots__ = ("source", "args", "fetches", "uses")


def translate(plan):
    """The kernel translation of ``plan``; raises :class:`Unsupported`."""
    if len(plan.instrs) > MAX_INSTRS:
        raise Unsupported(f"{len(plan.instrs)} instructions (more than {MAX_INSTRS})")
    if plan.program is None:
        raise Unsupported("the plan keeps no program")
    # the first pass counts how often each value is read, the second inlines the values read once
    return _translate(plan, _translate(plan, None).uses)


def _translate(plan, uses):
    gen = Gen(plan, uses)
    key = plan.key
    casts = {ins.args[0]: ins.fn for ins in plan.instrs if ins.kind == "cast"}
    if plan.arg_slots and (not isinstance(key, tuple) or len(key) < 1 + 3 * len(plan.arg_slots)):
        raise Unsupported("no feed signature in the plan key")
    for i, s in enumerate(plan.arg_slots):
        shp, fdt = tuple(key[2 + 3 * i]), np.dtype(key[3 + 3 * i])
        if any(d is None for d in shp):
            raise Unsupported(f"a feed of unknown shape {shp} (a loop variable whose shape may change)")
        if fdt not in FLOATS and not (shp == () and fdt in DT_NAME):
            raise Unsupported(f"a feed of dtype {fdt}")
        gen.check_size(shp)
        name = f"a{i}"
        # a 0-d feed is passed as a scalar (ndim None): a loop's counter comes back from the last
        # iteration as a numpy scalar, which a 0-d array argument would not take
        gen.args.append((name, ("feed", i), (fdt, len(shp) if shp else None, True)))
        dt = np.dtype(casts.get(s, fdt))
        if dt not in FLOATS and not (shp == () and dt == fdt):
            raise Unsupported(f"a placeholder of dtype {dt}")
        gen.shape[s] = shp
        if shp == ():
            gen.scalar(s, name, dt)
        elif s in casts:
            D = DT_NAME[dt]
            gen.ew(s, shp, [(gen.flat(name, shp), shp)], lambda e: f"{D}({e})", dt)
        else:
            gen.bind(s, gen.flat(name, shp))
        gen.dtype[s] = dt
    for k, ins in enumerate(plan.instrs):
        kind = ins.kind
        if kind == "cast":
            continue
        if kind == "var":
            idx, snap = ins.extra
            name, dt, shape = gen.storage(ins.eqn.attrs["var"])
            o = ins.outs[0]
            if shape == ():
                gen.scalar(o, f"{name}[()]", dt)
            elif snap:
                t = gen.tmp()
                gen.emit(f"{t} = {name}.copy()")
                gen.fresh.add(t)
                gen.bind(o, t)
            else:
                gen.bind(o, name)
        elif kind == "param":
            prm, shp, dt = ins.extra
            if dt not in FLOATS:
                raise Unsupported(f"a parameter of dtype {dt}")
            gen.check_size(shp)
            o = ins.outs[0]
            name = f"p{k}"
            gen.args.append((name, ("param", k), (dt, len(shp), True)))
            if shp == ():
                gen.scalar(o, f"{name}[()]", dt)
            else:
                gen.bind(o, gen.flat(name, shp))
        elif kind == "copy":
            a, o = ins.args[0], ins.outs[0]
            if a in gen.lazy:
                gen.materialize(a)
            if a in gen.weak or a not in gen.expr:
                raise Unsupported("a fetched Python scalar constant")
            e = gen.expr[a]
            gen.shape[o], gen.dtype[o] = gen.shape[a], gen.dtype[a]
            if gen.is_scalar(a):
                gen.bind(o, e)
            else:
                t = gen.tmp()
                gen.emit(f"{t} = {e}.copy()")
                gen.fresh.add(t)
                gen.bind(o, t)
        elif kind == "own":
            _own(gen, ins)
        elif kind == "call":
            prim = ins.eqn.prim
            if prim.random:
                raise Unsupported(f"random op {prim.name}")
            tr = translator(prim, "native")
            if tr is None:
                raise Unsupported(f"op {prim.name}")
            tr(gen, ins, ins.kw)
        elif kind == "vjp":
            fwd_multi, n_out, n_in, densify, dts = ins.extra
            # (densify: a joint VJP's results may be factored; the translations compute them dense)
            if fwd_multi:
                raise Unsupported(f"{ins.eqn.prim.name}: the gradient of a multiple-result op")
            tr = vjp_translator(ins.eqn.prim, ins.fn)
            if tr is None:
                raise Unsupported(f"op {ins.eqn.prim.name}")
            tr(gen, ins, ins.kw)
        elif kind == "effect":
            tr = translator(ins.eqn.prim, "native")
            if tr is None:
                raise Unsupported(f"effect {ins.eqn.prim.name}")
            gen.flush()
            tr(gen, ins, ins.kw or {})
        else:
            raise Unsupported(f"instruction kind {kind}")
    fetches = []
    flat_slots(plan.ret, fetches)
    rets = []
    for s in fetches:
        if s in gen.lazy:
            gen.materialize(s)
        dt = gen.dtype.get(s)
        if s not in gen.expr or s in gen.weak or not (dt in FLOATS or (gen.shape.get(s) == () and dt in DT_NAME)):
            raise Unsupported(f"fetched slot {s} has no kernel value")
        shp = gen.shape[s]
        rets.append(gen.expr[s] if len(shp) <= 1 else f"{gen.expr[s]}.reshape({shp})")
    t = Translation()
    t.args = list(gen.args)
    t.fetches = [(s, gen.shape[s], gen.dtype[s]) for s in fetches]
    body = "".join(f"    {ln}\n" for ln in gen.lines)
    if rets:
        body += "    return (" + "".join(r + ", " for r in rets) + ")\n"
    elif not gen.lines:
        body += "    return None\n"
    t.source = f"def kernel({', '.join(a[0] for a in t.args)}):\n{body}"
    t.uses = gen.uses
    return t


def _own(gen, ins):
    """The ``own`` instruction (:func:`.execute.own`), decided here: a
    fetched array the kernel allocated is the caller's unless another fetch
    returns the same array; any other (a feed, a constant, a view of one)
    is copied."""
    n = ins.extra
    claimed = set()
    fetched = ins.args[n:] + ins.args[:n]
    n_args = len(ins.args) - n
    for j, s in enumerate(fetched):
        if s in gen.lazy:
            gen.materialize(s)
        if s not in gen.expr or s in gen.weak or gen.is_scalar(s):
            continue
        e = gen.expr[s]
        if j < n_args:
            # the feeds and the arrays this run made: they stay as they are
            if e in gen.fresh:
                claimed.add(e)
            continue
        if e in gen.fresh and e not in claimed:
            claimed.add(e)
            continue
        t = gen.tmp()
        gen.emit(f"{t} = {e}.copy()")
        gen.fresh.add(t)
        claimed.add(t)
        gen.bind(s, t)


# --------------------------------------------------------------------------
# compiling
# --------------------------------------------------------------------------

_HEADER = ("import math\nimport numpy as np\nfrom numba import njit\n\n\n"
           "@njit(cache=True, nogil=True, error_model=\"numpy\")\n")


def _numba_type(dt, ndim, writable):
    from numba import types
    from numba.np.numpy_support import from_dtype
    if ndim is None:
        return from_dtype(dt)
    return types.Array(from_dtype(dt), ndim, "C", readonly=not writable)


def _kernel(t):
    """The compiled dispatcher of translation ``t``, for its one signature.
    Kept per source *and* argument types: one source can serve plans whose
    arguments differ (``return (a0,)`` for a float32 and a float64 feed), and
    a dispatcher compiled for one of them takes no other."""
    key = (t.source, tuple(a[2] for a in t.args))
    k = _KERNELS.get(key)
    if k is not None:
        KERNEL_STATS["reused"] += 1
        return k
    from numba import config, njit
    k = generated_kernel("plans", "p", _HEADER + t.source)
    if k is None:
        ns = {"math": math, "np": np}
        exec(compile(t.source, f"<dynnets native plan {len(_KERNELS)}>", "exec"), ns)
        k = njit(cache=False, nogil=True, error_model="numpy")(ns["kernel"])
    if not config.DISABLE_JIT:
        sig = tuple(_numba_type(*a[2]) for a in t.args)
        k.compile(sig)
        # one signature only: any other argument type raises TypeError at dispatch, before
        # the kernel runs, and the wrapper runs the tier-2 plan instead
        k.disable_compile()
        _check_return(k, t)
    _KERNELS[key] = k
    KERNEL_STATS["compiled"] += 1
    return k


def _check_return(k, t):
    from numba import types
    from numba.np.numpy_support import from_dtype
    sig = k.nopython_signatures[0]
    rt = sig.return_type
    if not t.fetches:
        return
    items = list(rt.types) if isinstance(rt, types.BaseTuple) else [rt]
    if len(items) != len(t.fetches):
        raise AssertionError(f"native: the kernel returns {rt} for {len(t.fetches)} fetches:\n{t.source}")
    for it, (s, shape, dt) in zip(items, t.fetches):
        want = from_dtype(dt)
        if shape == ():
            ok = it == want
        else:
            ok = isinstance(it, types.Array) and it.dtype == want and it.ndim == len(shape)
        if not ok:
            raise AssertionError(f"native: the kernel computes {it} for a fetch declared {dt}{list(shape)}:\n"
                                 f"{t.source}")


def _wrapper_source(t, plan):
    """The Python function a tier-3 run calls: storage and parameters read,
    the kernel called (the tier-2 function on a dispatch TypeError), the
    fetches boxed into their structure."""
    ns = {"K": None, "FB": plan.fn, "S": None}
    feeds = [f"v{s}" for s in plan.arg_slots]
    call = []
    pre = []
    for name, (what, ref), kind in t.args:
        if what == "feed":
            call.append(feeds[ref] + ("[()]" if kind[1] is None else ""))
        elif what == "var":
            call.append(f"S[{ref}]")
        elif what == "const":
            ns[f"C{ref}"] = plan.consts[ref]
            call.append(f"C{ref}")
        else:
            prm, shp, dt = plan.instrs[ref].extra
            ns[f"P{ref}"], ns[f"Q{ref}"], ns[f"D{ref}"] = prm, shp, dt
            pre.append(f"p{ref} = P{ref}.numpy()")
            pre.append(f"if p{ref}.shape != Q{ref} or p{ref}.dtype != D{ref}: _bad_param(P{ref}, Q{ref}, D{ref})")
            call.append(f"p{ref}")
    names = {}
    for j, (s, shape, dt) in enumerate(t.fetches):
        names.setdefault(s, [])
        if shape == ():
            ns[f"B{j}"] = dt.type
            names[s].append(f"B{j}(r[{j}])")
        else:
            names[s].append(f"r[{j}]")
    used = {s: 0 for s in names}

    def ret(x):
        if x[0] == "none":
            return "None"
        if x[0] == "v":
            e = names[x[1]][used[x[1]]]
            used[x[1]] += 1
            return e
        tp, items = x
        if tp is dict:
            parts = []
            for kk, sub in items:
                kn = f"K{len(ns)}"
                ns[kn] = kk
                parts.append(f"{kn}: {ret(sub)}")
            return "{" + ", ".join(parts) + "}"
        inner = "".join(ret(s) + ", " for s in items)
        if tp is list:
            return f"[{inner}]"
        if tp is tuple:
            return f"({inner})"
        tn = f"T{len(ns)}"
        ns[tn] = tp
        return f"{tn}({inner})"
    r = ret(plan.ret)
    lines = [f"def _plan({', '.join(feeds)}):"]
    lines += [f"    {ln}" for ln in pre]
    ns["KINDS"] = tuple(a[2] for a in t.args)
    ns["_layout_differs"] = _layout_differs
    lines.append("    try:")
    lines.append(f"        r = K({', '.join(call)})")
    lines.append("    except TypeError:")
    lines.append(f"        if not _layout_differs(({''.join(c + ', ' for c in call)}), KINDS):")
    lines.append("            raise")
    lines.append(f"        return FB({', '.join(feeds)})")
    lines.append(f"    return {r}")
    return "\n".join(lines) + "\n", ns


def _layout_differs(args, kinds):
    """Whether an argument differs from the kernel's one signature (dtype,
    dimensions, C order, writable): the TypeError the kernel's dispatcher
    raises for it sends the run to the tier-2 function; any other is a bug."""
    for x, (dt, nd, writable) in zip(args, kinds):
        if nd is None:
            if getattr(x, "dtype", None) != dt:
                return True
        elif (type(x) is not np.ndarray or x.dtype != dt or x.ndim != nd or not x.flags.c_contiguous
                or (writable and not x.flags.writeable)):
            return True
    return False


class Native:
    """What a plan's third tier holds: the translation, the kernel, the
    time it took, or why the plan did not qualify."""

    __slots__ = ("source", "wrapper_source", "kernel", "reason", "compile_time")

    def __init__(self):
        self.source = self.wrapper_source = self.kernel = self.reason = None
        self.compile_time = 0.0


def compile_plan(plan, storage, bad_param):
    """Compile ``plan`` (at tier 2) to tier 3: set ``plan.fn`` to the
    wrapper over the kernel and return True; or record in ``plan.native``
    why it does not qualify (:class:`Unsupported`: the translation's
    explicit checks) and return False. Any other error (Numba failing to
    type or compile a translation, a translation that computes another
    dtype than the plan declares) is a bug of this module and propagates."""
    nat = Native()
    plan.native = nat
    t0 = _perf()
    try:
        t = translate(plan)
        nat.source = t.source
        k = _kernel(t)
    except Unsupported as e:
        nat.reason = str(e)
        return False
    finally:
        nat.compile_time = _perf() - t0
    src, ns = _wrapper_source(t, plan)
    ns["K"] = k
    ns["S"] = storage
    ns["_bad_param"] = bad_param
    exec(compile(src, f"<dynnets native wrapper {id(plan):x}>", "exec"), ns)
    nat.kernel = k
    nat.wrapper_source = src
    plan.fn = ns["_plan"]
    plan.tier = 3
    return True
