"""The late compile passes, for large arrays only: :func:`fuse_elementwise`
(chains of cheap elementwise equations into one generated Numba kernel) and
:func:`plan_memory` (``out=`` buffers reused across runs). :func:`.passes.optimize`
runs them after ``schedule`` when a graph has arrays of at least
``FUSE_MIN_SIZE`` / ``MEMORY_MIN_SIZE`` elements; the thresholds and why
are in :mod:`.passes`' docstring."""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from ...autograd.primitives import ShapeError, dtype_of
from ...numba_cache import generated_kernel
from .ir import SOURCES, Eqn, StaticPrimitive, constant_p

__all__ = ["fuse_elementwise", "plan_memory", "FUSE_MIN_SIZE", "MEMORY_MIN_SIZE", "KERNEL_STATS"]

FUSE_MIN_SIZE = 2048
MEMORY_MIN_SIZE = 4096


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
