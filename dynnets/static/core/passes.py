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

import struct
import time
from typing import NamedTuple

import numpy as np

from ...autograd import gradtypes
from ...autograd import primitives as P
from ...autograd.primitives import ShapeError, dtype_of
from .ir import (SOURCES, Eqn, site_str, constant_p, param_p, placeholder_p,
                    variable_p)
# the late passes (fusion, the memory plan) live beside, in .fusion
from .fusion import FUSE_MIN_SIZE, KERNEL_STATS, MEMORY_MIN_SIZE, fuse_elementwise, plan_memory  # noqa: F401

__all__ = ["prune", "infer_shapes", "fold_constants", "cse", "eliminate_dead_code", "schedule",
           "fuse_elementwise", "plan_memory", "evaluate", "optimize", "PassCache", "CompileOptions", "FUSE_MIN_SIZE",
           "MEMORY_MIN_SIZE", "NATIVE_AFTER"]

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
