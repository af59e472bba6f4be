"""Compiler passes. Each pass is a function ``Graph -> Graph`` that never
modifies its input: it returns a derived graph (or the same graph when there
was nothing to do).

:func:`optimize` is the one pipeline, run by the session for one plan
(fetches, fed placeholders, fed shapes)::

    prune -> infer_shapes -> fold_constants -> cse -> eliminate_dead_code
          -> schedule -> fuse_elementwise -> plan_memory

then :mod:`.lower` turns the result into instructions and :mod:`.execute`
runs them.

Compiling is incremental: the graph is append-only SSA and an equation never
changes, so what a pass computes for one equation (its inferred aval, its
folded constant, its CSE class, whether it depends on an effect) depends only
on the equation, its ancestors and the compile context (the fed shapes and
the session's options), never on the rest of the program. A
:class:`PassCache` (one per context: the session keeps one per set of fed
shapes) holds those per-equation results, and every pass given one computes
only the equations no earlier program of the context covered; what depends
on the whole program (which equation represents a CSE class, what is dead,
the order of effects, fusion groups, buffers) is still decided per program,
from the cached per-equation facts, so a cached compile gives exactly the
graphs a compile from scratch gives (``tests/static/test_incremental.py``
compares them pass by pass). Every pass runs for every program either way:
a pass that keeps no cache simply does its whole work.

``evaluate`` is the reference interpreter (unoptimised execution, one
``prim.impl`` call per equation) that the tests compare compiled plans with.

Measured thresholds (shared 2-core machine, float32, numpy 2.4, numba 0.68;
``python benchmarks/bench_static.py --only fusion`` prints the table again;
times are whole plan runs, so they include the Python around the kernels):

* a fused Numba kernel beats numpy on chains of *cheap* arithmetic (add, sub,
  mul, div, neg, abs, maximum, minimum, relu, sqrt): the masked-state update
  ``m*h + (1-m)*hp`` ran 1.15x faster at 16 elements, 1.3x at 1024, 1.45x
  at 4096, 1.8x at 16384 and 2.2-2.5x from 65536 on (6-8x in one run where
  numpy's large temporaries were fresh pages every time);
* a kernel is *slower* for transcendental ops: Numba calls scalar libm where
  numpy uses SIMD; ``exp(a)*b`` was 0.5x numpy's speed at 1024 elements and
  0.25x from 4096 on (``tanh`` 12-30x slower from 4096 on in a microbenchmark) - so exp,
  log, tanh, sigmoid and pow have no ``scalar=`` template in the table and end a
  fused group instead of joining it (the pass fuses exactly the primitives
  that declare a template);
* the first use of a new expression costs a Numba compilation (0.1-0.5 s;
  later plans with the same expression reuse it from ``_KERNELS``, and later
  processes from the disk cache below), so fusion only runs on arrays of at
  least ``FUSE_MIN_SIZE`` = 2048 elements: never for the small graphs whose
  compile time matters (a plan without such arrays skips the pass entirely);
  the kernels' source is written to ``$DYNNETS_CACHE_DIR/fused`` (default
  ``~/.cache/dynnets/fused``, off with ``DYNNETS_NO_DISK_CACHE=1``) and
  compiled with Numba's ``cache=True``, so a later process loads them instead
  of compiling;
* ``out=`` buffers (a chain of four ``tanh(x)*0.5``) changed little at small
  sizes (0.97x at 16, 1.05x at 1024, 1.02-1.17x from 4096 to 16384 elements)
  and more from 65536 on (1.1-1.3x; 12x in the run where a fresh array that
  large was fresh pages, page faults included, every time), so
  ``plan_memory`` plans buffers for arrays of at least ``MEMORY_MIN_SIZE`` =
  4096 elements.
"""
from __future__ import annotations

import math
import struct
import time
from collections import defaultdict
from typing import NamedTuple

import numpy as np

from ..autograd import gradtypes
from ..autograd import primitives as P
from ..numba_cache import generated_kernel
from ..autograd.primitives import ShapeError, dtype_of
from .graph import (SOURCES, Eqn, StaticPrimitive, site_str, constant_p, param_p, placeholder_p,
                    variable_p)

__all__ = ["prune", "infer_shapes", "fold_constants", "cse", "eliminate_dead_code", "schedule",
           "fuse_elementwise", "plan_memory", "evaluate", "optimize", "PassCache", "CompileOptions", "FUSE_MIN_SIZE",
           "MEMORY_MIN_SIZE", "NATIVE_AFTER"]

FUSE_MIN_SIZE = 2048
MEMORY_MIN_SIZE = 4096
NATIVE_AFTER = 100


class CompileOptions(NamedTuple):
    """How a session compiles and tiers its programs: the passes' switches
    (``optimize``: folding, CSE and the late passes; the size thresholds of
    fusion and the memory plan, None for off) and the runs after which a
    plan moves to tier 2 (``jit_after``) and to the native tier
    (``native_after``, None for never). A session's plans, and the loop
    bodies, loop conditions and ``cond`` branches they run, are all compiled
    with its options (see :class:`~dynnets.static.session.Session`); the
    defaults are a default session's."""

    optimize: bool = True
    fuse_min_size: int | None = FUSE_MIN_SIZE
    memory_min_size: int | None = MEMORY_MIN_SIZE
    jit_after: int = 2
    native_after: int | None = NATIVE_AFTER

_perf = time.perf_counter


class PassCache:
    """Per-equation results of the passes for the programs of one compile
    context, reused by later programs of the same context (see the module
    docstring). ``context`` is what the results depend on besides the graph
    (the session passes its fed avals and options); ``memo(name)`` is the
    dict a pass (or the lowering) keeps its results in. A memo is keyed by
    an equation's first result and holds that equation, so an entry is used
    only for the very equation it was computed for."""

    __slots__ = ("context", "memos")

    def __init__(self, context=None):
        self.context = context
        self.memos = {}

    def memo(self, name):
        m = self.memos.get(name)
        if m is None:
            m = self.memos[name] = {}
        return m

# --------------------------------------------------------------------------
# pruning and dead code
# --------------------------------------------------------------------------

def _live(g):
    live = set(g.outputs)
    keep = []
    for e in reversed(g.eqns):
        for o in e.outs:
            if o in live:
                keep.append(e)
                live.update(e.ins)
                break
    keep.reverse()
    return keep


def prune(g):
    """The subgraph ``g.outputs`` need: equations not on a path to an output
    are dropped (effects included: as in TF1, a run executes only what its
    fetches need). Walks back from the outputs, so its cost is the size of
    the result, not of the graph."""
    prod = g.producers()
    keep = {}
    stack = list(g.outputs)
    for o in stack:
        try:
            ok = prod[o] is not None
        except (KeyError, IndexError):
            ok = False
        if not ok:
            raise ValueError(f"prune: output v{o} is not produced by the graph")
    while stack:
        v = stack.pop()
        e = prod[v]
        k = e.outs[0]
        if k in keep:
            continue
        keep[k] = e
        for i in e.ins:
            if prod[i].outs[0] not in keep:
                stack.append(i)
    # value ids grow with creation order, so sorting by them is a topological order
    out = g.derive([keep[k] for k in sorted(keep)])
    out.meta["pruned"] = True
    return out


def eliminate_dead_code(g):
    """Drop equations whose results nothing uses (left behind by folding and
    CSE). Returns ``g`` itself when nothing is dead, at once for a pruned
    program no pass changed (``meta['pruned']``)."""
    if g.meta.get("pruned"):
        return g
    keep = _live(g)
    return g if len(keep) == len(g.eqns) else g.derive(keep)


# --------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------

def infer_shapes(g, input_avals=None, memo=None):
    """Re-run the shape rules where fed shapes refine the declared ones.

    ``input_avals`` maps placeholder ids to the fed :class:`Aval`. Rules only
    run for equations downstream of a changed aval, so a graph fed with its
    declared shapes costs one dictionary pass. Raises :class:`ShapeError`
    naming the op and the line that created it. ``memo`` (a
    :meth:`PassCache.memo`, always used with the same ``input_avals``) keeps
    every inferred aval, so a later program runs the rules of its new
    equations only; the derived graph's ``avals`` is then the memo's dict
    (it has every value of the program, and those of earlier programs).
    """
    changed = {}
    if input_avals:
        for pid, a in input_avals.items():
            old = g.avals[pid]
            # (a placeholder of unknown rank has shape None)
            if old.shape is None or tuple(old.shape) != tuple(a.shape) or dtype_of(old) != dtype_of(a):
                changed[pid] = a
    if not changed:
        return g
    if memo is None:
        avals = {o: g.avals[o] for e in g.eqns for o in e.outs}
        avals.update(changed)
        dirty = set(changed)
        done = None
        rules = None
    else:
        if not memo:
            memo["fed"] = changed
            memo["avals"] = {}
            memo["dirty"] = set()
            memo["done"] = {}
        elif memo["fed"] != changed:
            raise AssertionError("infer_shapes: a memo is used with other fed shapes than it was made for")
        avals, dirty, done = memo["avals"], memo["dirty"], memo["done"]
        rules = memo.get("rules")
        if rules is None:
            rules = memo["rules"] = {}
    root = g.avals
    for e in g.eqns:
        if done is not None:
            o0 = e.outs[0]
            if done.get(o0) is e:
                continue
            if e.prim in SOURCES:
                a = changed.get(o0)
                if a is None:
                    avals[o0] = root[o0]
                else:
                    avals[o0] = a
                    dirty.add(o0)
                done[o0] = e
                continue
            for o in e.outs:
                avals[o] = root[o]
        elif e.prim in SOURCES:
            continue
        if any(i in dirty for i in e.ins):
            ins = [avals[i] for i in e.ins]
            rk = None
            if rules is not None:
                rk = _rule_key(e, ins)
                out = rules.get(rk) if rk is not None else None
                if out is not None:
                    ins = None
            if ins is not None:
                try:
                    out = P.run_rule(e.prim, ins, e.attrs)
                except ShapeError as err:
                    raise type(err)(f"{err} [op '{e.name}'{site_str(e.site)}, with the fed shapes]") from None
                if rk is not None:
                    rules[rk] = out
            outs = out if e.prim.multiple_results else (out,)
            for o, a in zip(e.outs, outs):
                was = avals[o].shape
                if was is None or tuple(was) != tuple(a.shape) or dtype_of(avals[o]) != dtype_of(a):
                    avals[o] = a
                    dirty.add(o)
        if done is not None:
            for o in e.outs:
                done[o] = e
    out = g.derive(list(g.eqns), avals=avals)
    if g.meta.get("pruned"):
        out.meta["pruned"] = True       # the same equations
    return out


def _rule_key(e, ins):
    """What equation ``e``'s shape rule result depends on (its primitive, its
    input avals, its attributes and their types: 1, 1.0 and True are equal
    keys), or None when that is not hashable. A shape rule is a pure function
    of these, so one result serves every equation with the same key: a new
    ``loss * 2.0`` is inferred as the last one was (an elementwise rule costs
    ~5 us, most of it broadcasting the shapes). Only the table's primitives:
    a graph-level one (control flow, effects) may do more in its rule."""
    if type(e.prim) is not P.Primitive:
        return None
    attrs = e.attrs
    try:
        if not attrs:
            k = (e.prim, tuple(ins))
        else:
            items = tuple(attrs.items())
            k = (e.prim, tuple(ins), items, tuple([type(v) for _, v in items]))
        hash(k)
    except TypeError:
        return None
    return k


# --------------------------------------------------------------------------
# constant folding and CSE
# --------------------------------------------------------------------------

def _foldable(e):
    p = e.prim
    # a random draw is new at every run: folding would freeze one draw into the plan
    return not (p in SOURCES or getattr(p, "effect", False) or p.random)


def _fold_eqn(e, const, values, max_size):
    """Equation ``e`` folded: a tuple of constant equations, one per result
    (their values entered in ``const``), or None when it stays computed."""
    if e.prim is constant_p:
        const[e.outs[0]] = e.attrs["value"]
        return None
    if not e.ins or not _foldable(e) or not all(i in const for i in e.ins):
        return None
    if any(values[o].sparse for o in e.outs):
        return None
    try:
        res = e.prim.impl(*[const[i] for i in e.ins], **e.attrs)
    except Exception:
        # leave it to run time, where the error is reported with the op's name
        return None
    outs = res if e.prim.multiple_results else (res,)
    if any(gradtypes.is_lazy(r) or np.size(r) > max_size for r in outs if r is not None):
        return None
    folded = []
    for o, r in zip(e.outs, outs):
        if isinstance(r, np.ndarray):
            r.setflags(write=False)
        const[o] = r
        folded.append(Eqn(constant_p, (), (o,), {"value": r}, e.name + "/folded", e.site))
    return tuple(folded)


def fold_constants(g, max_size=1 << 16, memo=None):
    """Evaluate equations whose inputs are all constants now, replacing them
    by constant sources (results larger than ``max_size`` elements stay
    computed, so a plan does not hold big arrays twice). With ``memo`` (a
    :meth:`PassCache.memo`, always used with the same ``max_size``) an
    equation is folded once for all the programs that contain it, and its
    folded constants are the same (read-only) arrays in each."""
    if memo is None:
        const = {}
        done = None
    else:
        if not memo:
            memo["max_size"] = max_size
            memo["const"] = {}
            memo["done"] = {}
        elif memo["max_size"] != max_size:
            raise AssertionError("fold_constants: a memo is used with another max_size than it was made for")
        const, done = memo["const"], memo["done"]
    values = g.values
    new = None
    for k, e in enumerate(g.eqns):
        if done is None:
            f = _fold_eqn(e, const, values, max_size)
        else:
            r = done.get(e.outs[0])
            if r is not None and r[0] is e:
                f = r[1]
            else:
                f = _fold_eqn(e, const, values, max_size)
                done[e.outs[0]] = (e, f)
        if f is None:
            if new is not None:
                new.append(e)
            continue
        if new is None:
            new = list(g.eqns[:k])
        new.extend(f)
    return g if new is None else g.derive(new)


def _freeze(x):
    """A hashable key for an attribute value, equal for two values exactly
    when they are the same value: floats are keyed by their bits, since
    ``-0.0 == 0.0`` and NaN equals nothing (``1 / (x * -0.0)`` is ``-inf``
    where ``1 / (x * 0.0)`` is ``inf``), and numbers of different types
    differ (``1``, ``1.0`` and ``True``)."""
    if isinstance(x, np.ndarray):
        if x.size > 256:
            return ("nd-id", id(x))
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return ("np", x.dtype.str, x.tobytes())
    if type(x) is float:
        return ("float", struct.pack("<d", x))
    if type(x) is complex:
        return ("complex", struct.pack("<dd", x.real, x.imag))
    if isinstance(x, slice):
        return ("slice", _freeze(x.start), _freeze(x.stop), _freeze(x.step))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__,) + tuple(_freeze(i) for i in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _freeze(v)) for k, v in sorted(x.items()))
    if isinstance(x, (int, bool, str, type(None), np.dtype, type)) or x is Ellipsis:
        return (type(x).__name__, x)
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))
    return ("obj", x)


def _cse_key(e, ins):
    p = e.prim
    if p is constant_p:
        v = e.attrs["value"]
        if isinstance(v, np.ndarray) and v.size > 64:
            return None
        return (p, _freeze(v))
    if (p in SOURCES or p.random or getattr(p, "effect", False) or getattr(p, "out_arg", False)
            or p.name == "accumulate"):
        # two random draws are two draws, however alike their attributes;
        # add_n's fresh sum is later added into in place (accumulate): two merged sums would
        # share one array that two accumulation chains write over
        return None
    attrs = e.attrs
    if not attrs:
        return (p, ins)
    items = tuple(attrs.items())
    types = tuple([type(v) for _, v in items])
    for t in types:
        r = _EXACT_KEYS.get(t)
        if r is None:
            r = _exact_key(t)
        if not r:
            # a float attribute (-0.0 == 0.0), an array, a structure: keyed by what it is
            return (p, ins, _freeze(attrs))
    # equal attrs of different types (1 vs 1.0 vs True) must not merge
    return (p, ins, items, types)


# attribute types whose == and hash tell every two values apart (not float: -0.0 == 0.0, NaN != NaN)
_EXACT_KEYS = {int: True, bool: True, str: True, type(None): True, type: True}


def _exact_key(t):
    r = _EXACT_KEYS.get(t)
    if r is None:
        r = _EXACT_KEYS[t] = issubclass(t, np.dtype)
    return r


def cse(g, memo=None):
    """Common-subexpression elimination: equations with the same primitive,
    inputs and attributes are computed once (equal small constants are
    merged too; effects and sources are never merged).

    With ``memo`` (a :meth:`PassCache.memo`) each equation's key is computed
    once, over the *classes* of its inputs (values that CSE would merge in
    any program share a class), and interned as a class number; a program
    then only decides which equation of each class comes first, as the
    pass from scratch does."""
    if memo is not None:
        return _cse_memo(g, memo)
    seen = {}
    sub = {}
    new = []
    for e in g.eqns:
        ins = tuple(sub.get(i, i) for i in e.ins) if sub else e.ins
        key = _cse_key(e, ins)
        if key is not None:
            other = seen.get(key)
            if other is not None and len(other.outs) == len(e.outs):
                for a, b in zip(e.outs, other.outs):
                    sub[a] = b
                continue
            seen[key] = e
        new.append(e if ins is e.ins else e.replace(ins=ins))
    if not sub:
        return g
    return g.derive(new, outputs=[sub.get(o, o) for o in g.outputs])


def _cse_class(e, memo):
    """The class of equation ``e`` (None: never merged), computed once."""
    o0 = e.outs[0]
    r = memo["done"].get(o0)
    if r is not None and r[0] is e:
        return r[1]
    cls = memo["cls"]
    key = _cse_key(e, tuple([cls[i] for i in e.ins]))
    if key is None:
        c = None
        for o in e.outs:
            cls[o] = -1 - o
    else:
        intern = memo["intern"]
        c = intern.get(key)
        if c is None:
            c = intern[key] = len(intern)
        if len(e.outs) == 1 and not e.prim.multiple_results:
            cls[o0] = c
        else:
            for j, o in enumerate(e.outs):
                cls[o] = (c, j)
    memo["done"][o0] = (e, c)
    return c


def _cse_memo(g, memo):
    # a value's class: an int >= 0 (interned key of its equation; (class, k) for result k of several),
    # or -1 - id for a value nothing may be merged with. Two values of one program get the same
    # representative from scratch exactly when their classes are equal (by induction over the
    # inputs: equal keys over representatives <=> equal keys over classes).
    if not memo:
        memo["cls"] = {}
        memo["intern"] = {}
        memo["done"] = {}
        memo["subst"] = {}
    subst = memo["subst"]
    first = {}
    sub = {}
    new = None
    done = memo["done"]
    for k, e in enumerate(g.eqns):
        r = done.get(e.outs[0])
        c = r[1] if r is not None and r[0] is e else _cse_class(e, memo)
        if c is not None:
            other = first.get(c)
            if other is not None and len(other.outs) == len(e.outs):
                for a, b in zip(e.outs, other.outs):
                    sub[a] = b
                if new is None:
                    new = list(g.eqns[:k])
                continue
            first[c] = e
        if sub:
            ins = tuple([sub.get(i, i) for i in e.ins])
            if ins != e.ins:
                o0 = e.outs[0]
                r = subst.get(o0)
                if r is None or r[0] is not e or r[1].ins != ins:
                    r = subst[o0] = (e, e.replace(ins=ins))
                e = r[1]
        if new is not None:
            new.append(e)
    if not sub:
        return g
    return g.derive(new, outputs=[sub.get(o, o) for o in g.outputs])


# --------------------------------------------------------------------------
# scheduling
# --------------------------------------------------------------------------

def schedule(g, memo=None):
    """Order equations so every effect (variable update, initialiser) runs
    after all pure computations that do not depend on an effect: a run reads
    the variables as they were when it started (snapshot semantics). With
    ``memo`` whether an equation depends on an effect (a fact about its
    ancestors) is found once for all programs."""
    first, later = [], []
    if memo is None:
        tainted = set()
        for e in g.eqns:
            if getattr(e.prim, "effect", False) or any(i in tainted for i in e.ins):
                tainted.update(e.outs)
                later.append(e)
            else:
                first.append(e)
    else:
        if not memo:
            memo["tainted"] = set()
            memo["done"] = {}
        tainted, done = memo["tainted"], memo["done"]
        for e in g.eqns:
            t = done.get(e.outs[0])
            if t is None or t[0] is not e:
                t = (e, getattr(e.prim, "effect", False) or any(i in tainted for i in e.ins))
                if t[1]:
                    tainted.update(e.outs)
                done[e.outs[0]] = t
            if t[1]:
                later.append(e)
            else:
                first.append(e)
    if not later or all(getattr(e.prim, "effect", False) for e in later) and g.eqns[-len(later):] == later:
        return g
    return g.derive(first + later)


# --------------------------------------------------------------------------
# fusion of elementwise chains into Numba kernels
# --------------------------------------------------------------------------

_KERNELS: dict = {}      # generated source -> compiled kernel (a cache across plans and sessions)
KERNEL_STATS = {"compiled": 0, "reused": 0}


_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _concrete(shape):
    return all(d is not None for d in shape)


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _bcast_to(shape, out_shape):
    """True when ``shape`` broadcasts to ``out_shape`` without growing it."""
    if len(shape) > len(out_shape):
        return False
    for a, b in zip(reversed(shape), reversed(out_shape)):
        if a != b and a != 1:
            return False
    return True


def _kernel_source(nd, patterns, body, n_scalars):
    """Source of an N-d elementwise kernel; ``patterns[k][d]`` is True where
    array input ``k`` is broadcast along dimension ``d`` (indexed with 0)."""
    idx = [f"i{d}" for d in range(nd)]
    args = ["out"] + [f"a{k}" for k in range(len(patterns))] + [f"s{k}" for k in range(n_scalars)]
    lines = [f"def kernel({', '.join(args)}):"]
    ind = "    "
    for d in range(nd):
        lines.append(f"{ind}for i{d} in range(out.shape[{d}]):")
        ind += "    "
    for k, pat in enumerate(patterns):
        sub = ", ".join("0" if b else idx[d] for d, b in enumerate(pat)) if nd else "()"
        lines.append(f"{ind}x{k} = a{k}[{sub}]")
    for ln in body:
        lines.append(ind + ln)
    lines.append(f"{ind}out[{', '.join(idx) if nd else '()'}] = t{len(body) - 1}")
    return "\n".join(lines) + "\n"


_HEADER = ("import math\nimport numpy as np\nfrom numba import njit\n\n\n"
           "@njit(cache=True, nogil=True, error_model=\"numpy\")\n")


def _compile_kernel(src):
    k = _KERNELS.get(src)
    if k is not None:
        KERNEL_STATS["reused"] += 1
        return k
    k = generated_kernel("fused", "k", _HEADER + src)
    if k is None:
        from numba import njit
        ns = {"math": math, "np": np}
        exec(compile(src, f"<dynnets fused kernel {len(_KERNELS)}>", "exec"), ns)
        k = njit(cache=False, nogil=True, error_model="numpy")(ns["kernel"])
    _KERNELS[src] = k
    KERNEL_STATS["compiled"] += 1
    return k


def _numpy_layout(arrays, steps, dtype):
    """An empty array laid out as numpy's ufuncs would lay out the group's
    result: each ufunc's result follows its inputs' memory order (``order='K'``:
    a transposed input gives a transposed result), and a reduction over it
    sums in that order, so a result in another order would round differently.
    Each step allocates as numpy does (an ``nditer`` over its operands)."""
    made = []
    for step in steps:
        ops = [arrays[k] if kind == "x" else made[k] for kind, k in step]
        it = np.nditer(ops + [None], flags=["refs_ok", "zerosize_ok"],
                       op_flags=[["readonly"]] * len(ops) + [["writeonly", "allocate"]],
                       op_dtypes=[None] * len(ops) + [dtype])
        made.append(it.operands[-1])
    return made[-1]


def _fused_primitive(kernel, src, out_aval, reshapes, in_avals, scalars_dtype, steps):
    shape = tuple(out_aval.shape)
    dtype = np.dtype(out_aval.dtype)
    cast = scalars_dtype.type
    n_arrays = len(in_avals)
    want = [(tuple(a.shape), np.dtype(a.dtype)) for a in in_avals]
    zero_d = not shape
    multi_d = len(shape) > 1

    def impl(*args, out=None):
        if out is None:
            out = None
            if multi_d:
                for a in args[:n_arrays]:
                    if a.ndim > 1 and not a.flags.c_contiguous:
                        # numpy's ufuncs keep a transposed input's memory order: so does the result
                        out = _numpy_layout(args[:n_arrays], steps, dtype)
                        break
            if out is None:
                out = np.empty(shape, dtype)
        elif out.shape != shape:
            raise ShapeError(f"fused: out.shape={out.shape} should be {shape}")
        # the kernel indexes its inputs by the shapes it was generated for, unchecked
        for a, (shp, dt) in zip(args, want):
            if np.shape(a) != shp or a.dtype != dt:
                raise ShapeError(f"fused: an input has shape {np.shape(a)} and dtype {a.dtype}, the kernel was "
                                 f"generated for shape {shp} and dtype {dt}")
        if zero_d:
            # a 0-d kernel indexes its inputs with (): numpy hands 0-d results on as scalars
            arrs = [np.asarray(a) for a in args[:n_arrays]]
        else:
            arrs = [a if r is None else np.reshape(a, r) for a, r in zip(args[:n_arrays], reshapes)]
        kernel(out, *arrs, *[cast(s) for s in args[n_arrays:]])
        # a 0-d result as numpy gives it: a scalar
        return out if shape else out[()]

    def shape_rule(*avals, **attrs):
        return out_aval

    p = StaticPrimitive("fused", impl, shape_rule, out_arg=True)
    p.kernel_source = src
    return p


def fuse_elementwise(g, min_size=FUSE_MIN_SIZE):
    """Fuse trees of elementwise equations whose primitive has a ``scalar=``
    template (the cheap ones: see the module docstring) and whose result
    has at least ``min_size`` elements into one generated Numba kernel.

    A group is grown backwards from a root: an input joins when its producer
    is fusible, has the same dtype, broadcasts to the root's shape and is
    used by nothing else (so no intermediate must be materialised). Python
    scalars become kernel arguments (cast to the group's dtype), so ``x*2``
    and ``x*3`` share one compiled kernel. Groups of one equation stay numpy.
    """
    prod = {}
    uses = defaultdict(int)
    for e in g.eqns:
        for o in e.outs:
            prod[o] = e
        for i in e.ins:
            uses[i] += 1
    for o in g.outputs:
        uses[o] += 1
    avals = g.avals

    def fusible(e):
        if e.prim.scalar is None:
            return False
        a = avals[e.outs[0]]
        return _concrete(a.shape) and isinstance(a.dtype, np.dtype) and a.dtype in _FUSED_DTYPES

    absorbed = set()
    groups = {}
    for e in reversed(g.eqns):
        if id(e) in absorbed or not fusible(e):
            continue
        root_aval = avals[e.outs[0]]
        if _size(root_aval.shape) < min_size:
            continue
        dt = root_aval.dtype
        members = []
        stack = [e]
        ok = True
        while stack:
            m = stack.pop()
            members.append(m)
            for i in m.ins:
                pe = prod.get(i)
                if pe is None or pe.prim is constant_p:
                    a = avals[i]
                    if not (pe is not None and isinstance(pe.attrs["value"], (float, int))
                            and not isinstance(pe.attrs["value"], bool)):
                        if not (_concrete(a.shape) and _bcast_to(tuple(a.shape), tuple(root_aval.shape))
                                and dtype_of(a) == dt):
                            ok = False
                    continue
                if (fusible(pe) and uses[i] == 1 and id(pe) not in absorbed and avals[i].dtype == dt
                        and _bcast_to(tuple(avals[i].shape), tuple(root_aval.shape))):
                    stack.append(pe)
                else:
                    a = avals[i]
                    if not (_concrete(a.shape) and _bcast_to(tuple(a.shape), tuple(root_aval.shape))
                            and dtype_of(a) == dt):
                        ok = False
        if not ok or len(members) < 2:
            continue
        for m in members:
            absorbed.add(id(m))
        groups[id(e)] = members
    if not groups:
        return g

    new = []
    nd_cache = {}
    for e in g.eqns:
        if id(e) in absorbed and id(e) not in groups:
            continue
        if id(e) not in groups:
            new.append(e)
            continue
        members = groups[id(e)]
        member_outs = {m.outs[0] for m in members}
        order = [m for m in g.eqns if id(m) in {id(x) for x in members}]
        root_shape = tuple(avals[e.outs[0]].shape)
        nd = len(root_shape)
        dt_name = "np." + np.dtype(avals[e.outs[0]].dtype).name
        arrays, scalars, names = [], [], {}
        body = []
        steps = []              # per member, its array operands: ("x", k) an input, ("t", j) a member
        for m in order:
            terms = []
            step = []
            for i in m.ins:
                if i in member_outs:
                    terms.append(names[i])
                    step.append(("t", int(names[i][1:])))
                    continue
                pe = prod.get(i)
                if pe is not None and pe.prim is constant_p and isinstance(pe.attrs["value"], (float, int)):
                    if i not in names:
                        names[i] = f"s{len(scalars)}"
                        scalars.append(i)
                    terms.append(names[i])
                    continue
                if i not in names:
                    names[i] = f"x{len(arrays)}"
                    arrays.append(i)
                terms.append(names[i])
                step.append(("x", int(names[i][1:])))
            steps.append(step)
            t = f"t{len(body)}"
            # each operation rounds to the group's dtype, as numpy's float32 ufuncs do (a template's
            # float literal, 0.0 in relu's, would otherwise carry the rest of the chain in float64)
            body.append(f"{t} = {dt_name}({m.prim.scalar.format(*terms)})")
            names[m.outs[0]] = t
        patterns, reshapes = [], []
        for i in arrays:
            shp = tuple(avals[i].shape)
            full = (1,) * (nd - len(shp)) + shp
            patterns.append(tuple(a == 1 and b != 1 for a, b in zip(full, root_shape)))
            reshapes.append(None if full == shp else full)
        src = _kernel_source(nd, patterns, body, len(scalars))
        kernel = nd_cache.get(src) or _compile_kernel(src)
        nd_cache[src] = kernel
        prim = _fused_primitive(kernel, src, avals[e.outs[0]], reshapes, [avals[i] for i in arrays],
                                np.dtype(avals[e.outs[0]].dtype), steps)
        new.append(Eqn(prim, tuple(arrays) + tuple(scalars), e.outs,
                       {}, "fused(" + "+".join(m.prim.name for m in order) + ")", e.site))
    return g.derive(new)


# --------------------------------------------------------------------------
# memory plan
# --------------------------------------------------------------------------

def _writes_out(e):
    """Equations whose implementation takes ``out=`` and otherwise returns a fresh array."""
    p = e.prim
    return (isinstance(p.impl, np.ufunc) and not p.multiple_results) or getattr(p, "out_arg", False)


def _containers(g):
    """The values of ``g`` that are containers holding references to arrays
    (TensorArrays, a loop's trace, a loop's or a ``cond``'s results, their
    gradients): what a primitive with ``retains_inputs`` makes, and a sum of
    such values (``add_n`` adds TensorArrays element by element, keeping the
    terms' arrays). None of them is an array an ``out=`` buffer could hold."""
    cont = set()
    for e in g.eqns:
        if getattr(e.prim, "retains_inputs", False) or (cont and _writes_out(e) and any(i in cont for i in e.ins)):
            cont.update(e.outs)
    return cont


def _retained(g, cont):
    """The values whose memory a result of ``g`` may hold inside a container
    (a TensorArray written, a loop's state): a buffer reused in the next run
    would change them under it, and a container cannot be copied out as an
    array can, so such a value gets no buffer. Walks back from the outputs
    through every equation whose result may share memory with its inputs."""
    reach = dict.fromkeys(g.outputs, 1)     # 1: an output may alias it; 2: an output may hold it in a container
    for e in reversed(g.eqns):
        m = 0
        for o in e.outs:
            r = reach.get(o, 0)
            if r > m:
                m = r
        if not m or e.prim in SOURCES or getattr(e.prim, "effect", False):
            continue
        holds = getattr(e.prim, "retains_inputs", False) or (cont and any(o in cont for o in e.outs))
        if not holds and _writes_out(e):
            continue                        # a fresh array
        if holds:
            m = 2
        for i in e.ins:
            if reach.get(i, 0) < m:
                reach[i] = m
    return {v for v, r in reach.items() if r == 2}


# results that may be laid out otherwise than in C order (views); a ufunc's result follows its inputs'
_VIEWS = frozenset(["transpose", "getitem", "broadcast_to", "split_rows", "tensor_array_read", "tensor_array_gather",
                    "while", "cond"])
# results in C order whatever their inputs' order (BLAS products)
_C_RESULTS = frozenset(["matmul", "linear"])


def _not_c_order(g):
    """The values of ``g`` that may not be in C order at run time: views
    (a transpose, a column), what a loop or a TensorArray returns, constants
    stored otherwise, and what an elementwise op or any other computes from
    them (numpy keeps the inputs' memory order). Fed values, variables and
    live parameters are taken to be in C order (numpy's default)."""
    maybe = set()
    for e in g.eqns:
        p = e.prim
        if p is constant_p:
            v = e.attrs["value"]
            if isinstance(v, np.ndarray) and v.ndim > 1 and not v.flags.c_contiguous:
                maybe.add(e.outs[0])
            continue
        if p in SOURCES:
            continue
        # a VJP of a view is a view (the transpose's is g transposed)
        name = getattr(p, "forward", p).name
        if name in _C_RESULTS:
            continue
        if name in _VIEWS or (maybe and any(i in maybe for i in e.ins)):
            maybe.update(e.outs)
    return maybe


def plan_memory(g, min_size=MEMORY_MIN_SIZE):
    """Liveness analysis assigning reusable ``out=`` buffers.

    Equations whose implementation writes into a caller's array (numpy
    ufuncs, fused kernels) and whose result has at least ``min_size`` elements
    get a buffer slot (``eqn.buf``); a slot is reused once every value that
    may alias it is dead. Any other op's result is assumed to alias all its
    inputs (views, ``unbroadcast`` returning its argument...), which keeps a
    buffer alive as long as anything might look at it. The plan runs again
    and writes its buffers again, so nothing that outlives the run may hold
    one: values fetched by the program get no buffer, an output that may
    alias one is listed in ``meta['copy_outputs']`` so the plan copies it
    out, and a value an output may hold inside a container (a TensorArray
    written in a loop body, a loop's state: they cannot be copied out)
    gets none either (:func:`_retained`). ``meta['buffers']`` maps slots to
    (shape, dtype).
    """
    eqns = g.eqns
    last = {}
    for k, e in enumerate(eqns):
        for i in e.ins:
            last[i] = k
    inf = len(eqns) + 1
    outs = set(g.outputs)
    for o in outs:
        last[o] = inf
    cont = _containers(g)
    kept = _retained(g, cont)
    # a buffer is in C order, where numpy would give a ufunc of transposed inputs a transposed result:
    # the values are equal, a reduction over them sums in another order (the last bit differs)
    not_c = _not_c_order(g)
    alias = {}
    holders = defaultdict(int)
    free = defaultdict(list)
    buffers = {}
    new = []
    changed = False

    def release(v):
        for b in alias.get(v, ()):
            holders[b] -= 1
            if holders[b] == 0:
                free[buffers[b]].append(b)

    for k, e in enumerate(eqns):
        buf = None
        o0 = e.outs[0]
        if (e.prim not in SOURCES and not getattr(e.prim, "effect", False) and _writes_out(e)
                and o0 not in outs and o0 not in kept and o0 not in cont and not g.values[o0].sparse):
            a = g.avals[o0]
            if (isinstance(a.dtype, np.dtype) and _concrete(a.shape) and a.dtype.kind in "fiub"
                    and _size(a.shape) >= min_size
                    and not (not_c and len(a.shape) > 1 and any(i in not_c for i in e.ins))):
                # a ufunc may write over an input that dies here (numpy handles the overlap);
                # a fused kernel or add_n reads inputs with other index patterns, so it may not
                inplace = isinstance(e.prim.impl, np.ufunc)
                if inplace:
                    for i in set(e.ins):
                        if last.get(i) == k:
                            release(i)
                            last[i] = -1
                key = (tuple(a.shape), a.dtype.str)
                if free[key]:
                    buf = free[key].pop()
                else:
                    buf = len(buffers)
                    buffers[buf] = key
        if buf is not None:
            alias[o0] = (buf,)
            holders[buf] += 1
            new.append(e.replace(buf=buf))
            changed = True
        else:
            if e.prim in SOURCES or (_writes_out(e) and o0 not in cont):
                al = ()
            else:
                s = set()
                for i in e.ins:
                    s.update(alias.get(i, ()))
                al = tuple(s)
            for o in e.outs:
                alias[o] = al
                for b in al:
                    holders[b] += 1
            new.append(e if e.buf is None else e.replace(buf=None))
        for i in set(e.ins):
            if last.get(i) == k:
                release(i)
        for o in e.outs:
            if o not in last:
                release(o)
    copy_outputs = {o for o in g.outputs if alias.get(o)}
    out = g.derive(new) if changed else g
    if out is g:
        out = g.derive(list(eqns))
    out.meta = {"buffers": {b: (s, np.dtype(d)) for b, (s, d) in buffers.items()},
                "copy_outputs": copy_outputs}
    return out


# --------------------------------------------------------------------------
# reference interpreter and the whole pipeline
# --------------------------------------------------------------------------

def evaluate(g, feeds=None, storage=None):
    """Unoptimised execution of every equation of ``g`` in order; returns the
    values of ``g.outputs`` (a list). ``feeds`` maps placeholder ids (or
    Values) to arrays, ``storage`` maps variable indices to arrays."""
    feeds = {(k.id if hasattr(k, "id") else k): v for k, v in (feeds or {}).items()}
    storage = {} if storage is None else storage
    env = {}
    for e in g.eqns:
        p = e.prim
        if p is placeholder_p:
            if e.outs[0] not in feeds:
                raise KeyError(f"evaluate: placeholder '{e.name}' not fed")
            r = feeds[e.outs[0]]
        elif p is variable_p:
            r = storage[e.attrs["var"].index]
        elif p is constant_p:
            r = e.attrs["value"]
        elif p is param_p:
            r = e.attrs["param"].numpy()
        elif getattr(p, "effect", False):
            r = p.impl(storage, *[env[i] for i in e.ins], **e.attrs)
        else:
            r = p.impl(*[env[i] for i in e.ins], **e.attrs)
        if p.multiple_results:
            for o, x in zip(e.outs, r):
                env[o] = x
        else:
            env[e.outs[0]] = r
    return [env[o] for o in g.outputs]


def _has_big(g, sizes, memo=None):
    """Whether any array of ``g`` has at least min(``sizes``) elements (an
    unknown dimension counts as big): skipping fusion and the memory plan on
    a graph of small arrays keeps compiling it cheap. ``memo`` keeps the
    answer per value (for one ``g.avals``: one compile context)."""
    sizes = [x for x in sizes if x is not None]
    if not sizes:
        return False
    lim = min(sizes)
    av = g.avals
    for e in g.eqns:
        o = e.outs[0]
        if memo is not None:
            b = memo.get(o)
            if b is not None:
                if b:
                    return True
                continue
        n = 1
        for d in av[o].shape:
            if d is None:
                n = lim
                break
            n *= d
        if memo is not None:
            memo[o] = n >= lim
        if n >= lim:
            return True
    return False


def optimize(g, input_avals=None, fold=True, fuse_min_size=FUSE_MIN_SIZE, memory_min_size=MEMORY_MIN_SIZE,
             passes=None, timings=None, pruned=False, stages=None, cache=None):
    """The compile pipeline :class:`Session` runs on a program ``g`` (a graph
    with outputs)::

        prune -> infer_shapes -> fold_constants -> cse -> eliminate_dead_code
              -> schedule -> fuse_elementwise -> plan_memory

    ``input_avals`` maps fed placeholder ids to their fed :class:`Aval`.
    ``fold=False`` runs only what execution needs (prune, infer_shapes,
    schedule: the graph as written, the baseline the tests compare with).
    Fusion and the memory plan run only when some array reaches their size
    threshold (None turns a pass off). ``pruned=True`` skips ``prune`` for a
    caller that pruned already (the session prunes first to name unfed
    placeholders). ``passes`` (names) restricts the pipeline, for tests;
    ``timings`` (a dict) receives seconds per pass; ``stages`` (a list)
    receives ``(name, graph)`` after each pass. ``cache`` (a
    :class:`PassCache`, one per ``input_avals`` and options) makes the
    compile incremental: each pass that keeps a memo there reuses what it
    found for the equations of earlier programs; the graphs are the same
    as without it.
    """
    if cache is None:
        memo = _no_memo
    else:
        memo = cache.memo
    if passes is None and stages is None:
        return _optimize(g, input_avals, fold, fuse_min_size, memory_min_size, timings, pruned, memo)
    steps = [] if pruned else [("prune", prune)]
    steps.append(("infer_shapes", lambda x: infer_shapes(x, input_avals, memo("infer_shapes"))))
    g = _run_passes(g, steps, passes, timings, stages)
    big = fold and _has_big(g, (fuse_min_size, memory_min_size), memo("big"))
    steps = []
    if fold:
        steps += [("fold_constants", lambda x: fold_constants(x, memo=memo("fold_constants"))),
                  ("cse", lambda x: cse(x, memo("cse"))), ("eliminate_dead_code", eliminate_dead_code)]
    steps.append(("schedule", lambda x: schedule(x, memo("schedule"))))
    g = _run_passes(g, steps, passes, timings, stages)
    if big:
        late = []
        if fuse_min_size is not None:
            late.append(("fuse_elementwise", lambda x: fuse_elementwise(x, fuse_min_size)))
        if memory_min_size is not None:
            late.append(("plan_memory", lambda x: plan_memory(x, memory_min_size)))
        g = _run_passes(g, late, passes, timings, stages)
    elif stages is not None and fold:
        # no array reaches either threshold: both passes would return the graph unchanged
        stages += [("fuse_elementwise", g), ("plan_memory", g)]
    return g


def _optimize(g, input_avals, fold, fuse_min_size, memory_min_size, timings, pruned, memo):
    """The whole pipeline as straight calls (what a session runs): a list of
    steps over lambdas costs a 12-equation program ~9 us of ~16."""
    t0 = _perf()
    if not pruned:
        g = prune(g)
        t1 = _perf()
        if timings is not None:
            timings["prune"] = timings.get("prune", 0.0) + t1 - t0
        t0 = t1
    g = infer_shapes(g, input_avals, memo("infer_shapes"))
    t1 = _perf()
    times = [("infer_shapes", t1 - t0)]
    big = fold and _has_big(g, (fuse_min_size, memory_min_size), memo("big"))
    t0 = _perf()
    if fold:
        g = fold_constants(g, memo=memo("fold_constants"))
        t1 = _perf()
        times.append(("fold_constants", t1 - t0))
        g = cse(g, memo("cse"))
        t0 = _perf()
        times.append(("cse", t0 - t1))
        g = eliminate_dead_code(g)
        t1 = _perf()
        times.append(("eliminate_dead_code", t1 - t0))
        t0 = t1
    g = schedule(g, memo("schedule"))
    times.append(("schedule", _perf() - t0))
    if big:
        if fuse_min_size is not None:
            t0 = _perf()
            g = fuse_elementwise(g, fuse_min_size)
            times.append(("fuse_elementwise", _perf() - t0))
        if memory_min_size is not None:
            t0 = _perf()
            g = plan_memory(g, memory_min_size)
            times.append(("plan_memory", _perf() - t0))
    if timings is not None:
        for name, dt in times:
            timings[name] = timings.get(name, 0.0) + dt
    return g


def _no_memo(name):
    return None


def _run_passes(g, steps, passes, timings, stages):
    for name, fn in steps:
        if passes is not None and name not in passes and name != "prune":
            continue
        t0 = _perf()
        g = fn(g)
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + _perf() - t0
        if stages is not None:
            stages.append((name, g))
    return g
