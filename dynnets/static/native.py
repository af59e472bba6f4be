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
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..autograd.primitives import NativeUnsupported
from ..numba_cache import generated_kernel

__all__ = ["Unsupported", "translate", "compile_plan", "MAX_SIZE", "MAX_INSTRS", "KERNEL_STATS"]

MAX_SIZE = 2048
MAX_INSTRS = 120

KERNEL_STATS = {"compiled": 0, "reused": 0}
_KERNELS: dict = {}            # (kernel source, argument types) -> compiled dispatcher (shared by plans and sessions)

_perf = time.perf_counter

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_FLOATS = (_F32, _F64)
_DT_NAME = {_F32: "np.float32", _F64: "np.float64", np.dtype(bool): "np.bool_", np.dtype(np.int64): "np.int64",
            np.dtype(np.int32): "np.int32"}


# the plan has something this tier cannot translate (the message says what); the table's
# translations raise it too, so it lives beside defprim
Unsupported = NativeUnsupported


# --------------------------------------------------------------------------
# code generation
# --------------------------------------------------------------------------

def _lit(value, dt):
    """A literal of ``value`` in dtype ``dt``."""
    name = _DT_NAME[dt]
    if dt.kind == "b":
        return "True" if value else "False"
    if dt.kind in "iu":
        return f"{name}({int(value)})"
    v = float(value)
    if math.isnan(v):
        return f"{name}(np.nan)"
    if math.isinf(v):
        return f"{name}({'-' if v < 0 else ''}np.inf)"
    return f"{name}({v!r})"


def _same(e):
    return e


def _strides(shape):
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * shape[d + 1]
    return st


def _bidx(shape, loop_shape, ivars):
    """The flat index into an array of ``shape`` broadcast against
    ``loop_shape``, at the multi-index ``ivars`` of ``loop_shape``."""
    nd = len(loop_shape)
    pad = (1,) * (nd - len(shape)) + tuple(shape)
    st = _strides(pad)
    terms = [ivars[d] if st[d] == 1 else f"{ivars[d]} * {st[d]}" for d in range(nd) if pad[d] != 1]
    return " + ".join(terms) if terms else "0"


class _Lazy:
    """An elementwise result not computed yet: ``fmt`` over ``operands``
    (each a flat array of ``shape``, a scalar, or another _Lazy)."""

    __slots__ = ("shape", "operands", "fmt", "dt")

    def __init__(self, shape, operands, fmt, dt):
        self.shape = shape
        self.operands = operands
        self.fmt = fmt
        self.dt = dt

    def at(self, idx):
        """The element expression at flat index ``idx``."""
        return self.fmt(*[e.at(idx) if isinstance(e, _Lazy) else e if shp == () else f"{e}[{idx}]"
                          for e, shp in self.operands])


# --------------------------------------------------------------------------
# the generator's building blocks, which the table's native= and native_vjp=
# translations call (dynnets.autograd.primitives: the one table)
# --------------------------------------------------------------------------

def _axes(axis, nd):
    if axis is None:
        return tuple(range(nd))
    ax = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted(int(a) % nd for a in ax))


def _kept(shape, axis):
    """The keepdims shape of a reduction (same flat layout as without keepdims)."""
    ax = _axes(axis, len(shape))
    return tuple(1 if i in ax else d for i, d in enumerate(shape))


def _count(shp, axis):
    return math.prod(shp[a] for a in _axes(axis, len(shp)))


def _consts(dt):
    """The names a scalar-form template may use besides its operands."""
    return {"D": _DT_NAME[dt], "zero": _lit(0, dt), "one": _lit(1, dt), "two": _lit(2, dt), "half": _lit(0.5, dt)}


class _Blocks:
    """The loops a primitive's ``native=`` translation builds from (mixed
    into :class:`Gen`): each method mirrors one numpy computation of the
    table's implementations, in numpy's order and dtype."""

    Unsupported = NativeUnsupported
    # the identity element format: ew() makes an identity of a whole operand an alias, not a loop
    same = staticmethod(_same)
    FLOATS = _FLOATS

    @staticmethod
    def lit(value, dt):
        """A literal of ``value`` in dtype ``dt``."""
        return _lit(value, dt)

    @staticmethod
    def dtname(dt):
        """The Numba source name of dtype ``dt`` (``np.float32``)."""
        return _DT_NAME[dt]

    def elementwise(self, ins, template):
        """Forward of an elementwise primitive from its scalar form (see
        ``defprim(native=)``): over float arrays a loop (inlined into its
        consumer where read once), over 0-d integers and comparisons of
        scalars (a loop's counter and condition) a scalar."""
        o = ins.outs[0]
        odt = self.dtype.get(o)
        if self.shape.get(o) == () and odt not in _FLOATS and all(self.shape.get(s) == () for s in ins.args):
            dts = {self.dtype.get(s) for s in ins.args if s not in self.weak}
            if len(dts) != 1 or not dts <= set(_DT_NAME) or odt not in _DT_NAME:
                raise Unsupported(f"{ins.eqn.prim.name} of {sorted(map(str, dts))}")
            dt = dts.pop()
            if odt != dt and odt.kind != "b":
                raise Unsupported(f"{ins.eqn.prim.name}: a result of dtype {odt} from {dt}")
            c = _consts(dt)
            self.scalar(o, template.format(*[self.op(s, dt)[0] for s in ins.args], **c), odt)
            return
        dt = self.out_dtype(o)
        c = _consts(dt)
        fmt = _same if template == "{0}" else (lambda *e: template.format(*e, **c))
        self.ew(o, self.shape[o], [self.op(s, dt, inline=True) for s in ins.args], fmt, dt)

    def elementwise_vjp(self, ins, template):
        """An elementwise VJP from its formula (see ``defprim(native_vjp=)``),
        summed to its input's shape (``unbroadcast``)."""
        g, xs, y = ins.args[0], ins.args[1:-1], ins.args[-1]
        o = ins.outs[0]
        dt = self.out_dtype(o)
        if template == "{g}":
            self.ew(o, self.shape[g], [self.op(g, dt, inline=True)], _same, dt, acc=self.shape[o])
            return
        c = _consts(dt)
        names = ["g", *[f"x{k}" for k in range(len(xs))], "out"]
        slots = [g, *xs, y]
        marks = [f"\x00{j}\x00" for j in range(len(slots))]
        probe = template.format(**dict(zip(names, marks)), **c)
        # read only the operands the formula uses (a VJP gets every forward input)
        ops = [self.op(sl, dt, inline=True) if m in probe else ("None", ()) for sl, m in zip(slots, marks)]
        self.ew(o, self.shape[g], ops, lambda *e: template.format(**dict(zip(names, e)), **c), dt,
                acc=self.shape[o])

    def reduce(self, ins, attrs, mean):
        """``sum``/``mean`` over ``attrs["axis"]``: a loop accumulating into
        the kept shape (the flat layout of the result)."""
        o = ins.outs[0]
        dt = self.out_dtype(o)
        a = ins.args[0]
        attrs = attrs or {}
        x = self.op(a, dt, inline=True)
        shp = self.shape[a]
        acc = () if self.shape[o] == () else _kept(shp, attrs.get("axis"))
        post = None
        if mean:
            cnt = _lit(_count(shp, attrs.get("axis")), dt)
            post = lambda e: f"{e} / {cnt}"      # noqa: E731
        if shp == ():
            self.ew(o, (), [x], _same, dt, post=post)
        else:
            self.ew(o, shp, [x], _same, dt, acc=acc, post=post)

    def _expand(self, o, g, in_shape, axis, dt, post=None):
        """``_expand_to``: ``g`` repeated along the reduced axes, a fresh array."""
        ge, gshape = self.op(g, dt)
        if in_shape == ():
            self.scalar(o, post(ge) if post else ge, dt)
            return
        if gshape != ():
            gshape = _kept(in_shape, axis)         # the same flat layout, reduced axes kept as 1s
        self.ew(o, in_shape, [(ge, gshape)], post if post else _same, dt)

    def reduce_vjp(self, ins, attrs, mean):
        """The VJP of :meth:`reduce`: ``g`` (over the count for a mean)
        repeated along the reduced axes."""
        g, x = ins.args[0], ins.args[1]
        o = ins.outs[0]
        dt = self.out_dtype(o)
        axis = (attrs or {}).get("axis")
        if not mean:
            self._expand(o, g, self.shape[x], axis, dt)
            return
        cnt = _lit(_count(self.shape[x], axis), dt)
        ge, gshape = self.op(g, dt)
        if gshape == ():
            # (g / count) once, then repeated, as _expand_to(g / count, ...)
            q = self.tmp()
            self.emit(f"{q} = {_DT_NAME[dt]}({ge} / {cnt})")
            self.expr[("q", o)] = q
            self.dtype[("q", o)] = dt
            self.shape[("q", o)] = ()
            self._expand(o, ("q", o), self.shape[x], axis, dt)
        else:
            self._expand(o, g, self.shape[x], axis, dt, post=lambda e: f"({e} / {cnt})")

    def reshape_to(self, o, s):
        """``o`` = ``s`` reshaped: the same flat array (or scalar)."""
        dt = self.out_dtype(o)
        x, shp = self.op(s, dt)
        if self.shape[o] == () and shp != ():
            self.scalar(o, f"{x}[0]", dt)
        elif shp == () and self.shape[o] != ():
            self.ew(o, self.shape[o], [(x, ())], _same, dt)
        else:
            self.bind(o, x)

    def transpose_to(self, o, s, axes):
        """``o`` = ``s`` with its axes permuted (reversed for ``None``): a fresh array."""
        dt = self.out_dtype(o)
        x, shp = self.op(s, dt)
        nd = len(shp)
        if nd < 2:
            self.bind(o, x)
            return
        axes = tuple(reversed(range(nd))) if axes is None else tuple(int(a) % nd for a in axes)
        out_shape = tuple(shp[a] for a in axes)
        xst = _strides(shp)
        t = self.tmp()
        ivars = [f"i{d}{t}" for d in range(nd)]
        self.emit(f"{t} = np.empty({math.prod(shp)}, {_DT_NAME[dt]})")
        self.fresh.add(t)
        ind = ""
        for d, size in enumerate(out_shape):
            self.emit(f"{ind}for {ivars[d]} in range({size}):")
            ind += "    "
        src = " + ".join(f"{ivars[d]} * {xst[axes[d]]}" for d in range(nd))
        self.emit(f"{ind}{t}[{_bidx(out_shape, out_shape, ivars)}] = {x}[{src}]")
        self.bind(o, t)

    def astype_to(self, o, s):
        """``o`` = ``s`` cast to ``o``'s float dtype."""
        dt = self.out_dtype(o)
        src = self.dtype.get(s)
        if src not in _FLOATS:
            raise Unsupported(f"astype from {src} to {dt}")
        x = self.op(s, src, inline=True)
        D = _DT_NAME[dt]
        self.ew(o, self.shape[o], [x], lambda e: f"{D}({e})", dt)

    def dot(self, m, k, n, a, a_t, b, b_t, dt, bias=None):
        """A fresh flat (m, n) array: ``A @ B`` with A (m, k) the flat array
        ``a`` (stored transposed, (k, m), if ``a_t``) and B (k, n) the flat ``b``
        (stored (n, k) if ``b_t``); ``bias`` (a flat (n,) array, or a scalar) added
        after the product, as ``x @ w.T + b``."""
        t = self.tmp()
        D = _DT_NAME[dt]
        ai = (lambda i, kk: f"{a}[{kk} * {m} + {i}]") if a_t else (lambda i, kk: f"{a}[{i} * {k} + {kk}]")
        bi = (lambda kk, j: f"{b}[{j} * {k} + {kk}]") if b_t else (lambda kk, j: f"{b}[{kk} * {n} + {j}]")
        i, j, kk, s = f"i{t}", f"j{t}", f"k{t}", f"s{t}"
        self.emit(f"{t} = np.empty({m * n}, {D})")
        self.fresh.add(t)
        self.emit(f"for {i} in range({m}):")
        self.emit(f"    for {j} in range({n}):")
        self.emit(f"        {s} = {_lit(0, dt)}")
        self.emit(f"        for {kk} in range({k}):")
        self.emit(f"            {s} += {ai(i, kk)} * {bi(kk, j)}")
        if bias is None:
            self.emit(f"        {t}[{i} * {n} + {j}] = {s}")
        else:
            be, bshape = bias
            self.emit(f"        {t}[{i} * {n} + {j}] = {s} + {be}{'' if bshape == () else f'[{j}]'}")
        return t

    def matrix_shapes(self, x, w):
        """The shapes of two 2-D operands (anything else is not translated)."""
        xs, ws = self.shape[x], self.shape[w]
        if len(xs) != 2 or len(ws) != 2:
            raise Unsupported("matmul/linear of operands that are not 2-D")
        return xs, ws

    def storage(self, var):
        """The kernel argument holding ``var``'s storage (its flat view for an
        array), its dtype and shape."""
        name = f"s{var.index}"
        dt = np.dtype(var.initial_value.dtype)
        shape = tuple(var.initial_value.shape)
        if name not in self.var_args:
            if dt not in _DT_NAME:
                raise Unsupported(f"a variable of dtype {dt}")
            self._check_size(shape)
            self.args.append((name, ("var", var.index), (dt, len(shape), True)))
            self.var_args[name] = self.flat(name, shape) if shape != () else name
        return self.var_args[name], dt, shape

    def update(self, var, operands, fmt):
        """``var[...] = fmt(var's element, *elements)`` in place (``operands``
        broadcast against the variable's shape)."""
        name, dt, shape = self.storage(var)
        if shape == ():
            self.emit(f"{name}[()] = {fmt(f'{name}[()]', *[e for e, _ in operands])}")
            return
        self.ew(None, shape, [(name, shape)] + list(operands), fmt, dt, into=name)


class Gen(_Blocks):
    """The kernel's source, built instruction by instruction. Arrays are
    flat (1-D, C order) locals whose shape is static metadata, so a reshape
    costs nothing and every loop indexes with constants; 0-d values are
    scalars of their exact dtype. A weak Python scalar constant has no dtype
    until an operation casts it to its operand's."""

    def __init__(self, plan, uses=None):
        g = plan.program
        self.shape = {}
        self.dtype = {}
        self.weak = {}
        self.expr = {}
        self.lines = []
        self.args = []          # (kernel argument name, what the wrapper passes, (dtype, ndim, writable))
        self.var_args = {}
        self.n = 0
        self.lazy = {}          # slot -> _Lazy: an elementwise result not yet computed
        self.fresh = set()      # names of arrays the kernel allocates (np.empty, np.zeros, copies)
        # slot -> how often the kernel reads it: counted by a first translation (uses=None),
        # which inlines nothing; an instruction's arguments overcount (a VJP gets the
        # forward inputs whether its formula reads them or not)
        self.counting = uses is None
        self.uses = {} if uses is None else uses
        if self.counting:
            fetched = []
            _flat(plan.ret, fetched)
            fetched += [ins.args[0] for ins in plan.instrs if ins.kind == "copy"]
            for a in fetched:
                self.uses[a] = self.uses.get(a, 0) + 1
        consts = plan.consts
        avals = g.avals
        for vid, s in plan.slot_of.items():
            if type(avals) is dict and vid not in avals:
                # a fed input the program does not read (a loop condition's): shaped from the feed below
                continue
            a = avals[vid]
            if s in consts:
                c = consts[s]
                if type(c) in (int, float):
                    self.weak[s] = c
                    self.shape[s] = ()
                    continue
                if c is None or type(c) is bool or not isinstance(c, (np.ndarray, np.generic)):
                    continue
                self.shape[s] = tuple(np.shape(c))
                self.dtype[s] = np.dtype(c.dtype)
                self._need_dtype(s)
                if np.ndim(c) == 0:
                    self.expr[s] = _lit(c[()] if isinstance(c, np.ndarray) else c, self.dtype[s])
                else:
                    self._check_size(self.shape[s])
                    name = f"c{s}"
                    self.args.append((name, ("const", s), (self.dtype[s], len(self.shape[s]), False)))
                    self.expr[s] = self.flat(name, self.shape[s])
                continue
            shp = tuple(a.shape)
            if any(d is None for d in shp):
                raise Unsupported(f"value {vid} has an unknown dimension {shp}")
            self.shape[s] = shp
            if isinstance(a.dtype, np.dtype):
                self.dtype[s] = a.dtype

    def _need_dtype(self, s):
        dt = self.dtype.get(s)
        if dt not in _DT_NAME:
            raise Unsupported(f"dtype {dt}")

    @staticmethod
    def _check_size(shape):
        if math.prod(shape) > MAX_SIZE:
            raise Unsupported(f"an array of shape {shape} (more than {MAX_SIZE} elements)")

    def tmp(self):
        self.n += 1
        return f"t{self.n}"

    def emit(self, line):
        self.lines.append(line)

    def flat(self, name, shape):
        """A flat view of the C-contiguous array argument ``name``."""
        if len(shape) == 1:
            return name
        t = self.tmp()
        self.emit(f"{t} = {name}.reshape({math.prod(shape)})")
        return t

    def is_scalar(self, s):
        return self.shape[s] == ()

    def op(self, s, dt, inline=False):
        """Slot ``s`` as an operand ``(expression, shape)`` of dtype ``dt``: a
        weak scalar is cast to ``dt``, any other operand must have it. An
        elementwise result not yet computed is computed now, unless
        ``inline`` (the caller is an elementwise loop) and this is its only
        use: then the expression is a :class:`_Lazy` the loop evaluates
        element by element, so a chain of elementwise ops is one loop."""
        if s in self.weak:
            return _lit(self.weak[s], dt), ()
        if self.counting:
            self.uses[s] = self.uses.get(s, 0) + 1
        lz = self.lazy.get(s)
        if lz is not None:
            if self.dtype.get(s) != dt:
                raise Unsupported(f"mixed dtypes ({self.dtype.get(s)} where {dt} is needed)")
            if inline and not self.counting and self.uses.get(s, 0) == 1:
                del self.lazy[s]
                return lz, self.shape[s]
            self.materialize(s)
        if s not in self.expr:
            raise Unsupported(f"slot {s} has no value here")
        if self.dtype.get(s) != dt:
            raise Unsupported(f"mixed dtypes ({self.dtype.get(s)} where {dt} is needed)")
        return self.expr[s], self.shape[s]

    def out_dtype(self, o):
        dt = self.dtype.get(o)
        if dt not in _FLOATS:
            raise Unsupported(f"a result of dtype {dt}")
        if o not in self.shape:
            raise Unsupported(f"output slot {o} has no shape")
        self._check_size(self.shape[o])
        return dt

    def bind(self, o, name):
        self.expr[o] = name

    def materialize(self, s):
        lz = self.lazy.pop(s)
        self.expr[s] = self.loop(lz.shape, lz.operands, lz.fmt, lz.dt)

    def flush(self):
        """Compute every pending elementwise result still needed (before an
        effect writes a variable one of them may read)."""
        for s in list(self.lazy):
            if self.counting or self.uses.get(s, 0):
                self.materialize(s)
            else:
                del self.lazy[s]

    def scalar(self, o, expr, dt):
        t = self.tmp()
        self.emit(f"{t} = {_DT_NAME[dt]}({expr})")
        self.expr[o] = t
        return t

    def loop(self, loop_shape, operands, fmt, dt, into=None, acc=None, post=None):
        """Emit ``fmt(*elements)`` over ``loop_shape`` for ``operands``
        ((expression, shape) pairs, each broadcast against it; shape () for
        a scalar). Returns the name of a fresh flat array of ``loop_shape``
        holding the results; with ``acc`` (a shape ``loop_shape`` reduces
        to: broadcasting's adjoint) they are summed into a fresh array of that
        shape instead, or a scalar for (), and ``post(e)`` maps each sum.
        ``into``: write into this existing flat array of ``loop_shape``."""
        loop_shape = tuple(loop_shape)
        n = math.prod(loop_shape)
        D = _DT_NAME[dt]
        if any(isinstance(e, _Lazy) for e, _ in operands):
            # inline a pending result only where the formula reads it once and at this
            # loop's own index (no recomputation of an element, no blow-up of the source)
            probe = fmt(*[f"\x00{j}\x00" for j in range(len(operands))])
            operands = [(self.loop(e.shape, e.operands, e.fmt, e.dt), shp)
                        if isinstance(e, _Lazy) and (probe.count(f"\x00{j}\x00") != 1 or tuple(shp) != loop_shape)
                        else (e, shp) for j, (e, shp) in enumerate(operands)]
        if acc is not None:
            acc = tuple(acc)
            if acc == loop_shape:
                acc = None
        reduce_all = acc is not None and math.prod(acc) == 1
        # each loop has its own index names: Numba's SSA passes cost grows with every
        # redefinition of a shared name across the blocks of the function
        t = self.tmp()
        k = f"k{t}"
        if all(shp == () or tuple(shp) == loop_shape for _, shp in operands) and (acc is None or reduce_all):
            head, ind = [f"for {k} in range({n}):"], "    "
            elements = [e.at(k) if isinstance(e, _Lazy) else e if shp == () else f"{e}[{k}]" for e, shp in operands]
            out_at = f"[{k}]"
        else:
            ivars = [f"i{d}{t}" for d in range(len(loop_shape))]
            head, ind = [], ""
            for d, size in enumerate(loop_shape):
                head.append(f"{ind}for {ivars[d]} in range({size}):")
                ind += "    "
            elements = [e.at(_bidx(shp, loop_shape, ivars)) if isinstance(e, _Lazy) else e if shp == () else
                        f"{e}[{_bidx(shp, loop_shape, ivars)}]" for e, shp in operands]
            out_at = f"[{_bidx(loop_shape, loop_shape, ivars)}]"
        value = fmt(*elements)
        if acc is None:
            if into is None:
                self.emit(f"{t} = np.empty({n}, {D})")
                self.fresh.add(t)
            else:
                t = into
            self.lines += head
            self.emit(f"{ind}{t}{out_at} = {value}")
            if post:
                self.emit(f"for {k} in range({n}):")
                self.emit(f"    {t}[{k}] = {post(f'{t}[{k}]')}")
            return t
        if reduce_all:
            self.emit(f"{t} = {_lit(0, dt)}")
            self.lines += head
            self.emit(f"{ind}{t} += {value}")
            r = self.tmp()
            if acc == ():
                self.emit(f"{r} = {D}({post(t) if post else t})")
            else:
                self.emit(f"{r} = np.empty(1, {D})")
                self.fresh.add(r)
                self.emit(f"{r}[0] = {post(t) if post else t}")
            return r
        m = math.prod(acc)
        self.emit(f"{t} = np.zeros({m}, {D})")
        self.fresh.add(t)
        self.lines += head
        self.emit(f"{ind}{t}[{_bidx(acc, loop_shape, ivars)}] += {value}")
        if post:
            self.emit(f"for {k} in range({m}):")
            self.emit(f"    {t}[{k}] = {post(f'{t}[{k}]')}")
        return t

    def ew(self, o, loop_shape, operands, fmt, dt, acc=None, post=None, into=None):
        """Bind output ``o`` to ``fmt`` over ``operands`` ((expression, shape)
        pairs): a scalar when everything is 0-d, else a loop (see :meth:`loop`)."""
        if all(shp == () for _, shp in operands) and tuple(loop_shape) == () and into is None:
            e = fmt(*[x for x, _ in operands])
            return self.scalar(o, post(e) if post else e, dt)
        if (fmt is _same and post is None and into is None and len(operands) == 1
                and tuple(operands[0][1]) == tuple(loop_shape) and (acc is None or tuple(acc) == tuple(loop_shape))):
            # values are never written in place (only variables are), so an identity is an alias
            e = operands[0][0]
            if isinstance(e, _Lazy):
                self.lazy[o] = e
                return None
            self.expr[o] = e
            return e
        if (o is not None and into is None and post is None and (acc is None or tuple(acc) == tuple(loop_shape))
                and tuple(self.shape.get(o, ())) == tuple(loop_shape)
                and all(shp == () or tuple(shp) == tuple(loop_shape) for _, shp in operands)):
            self.lazy[o] = _Lazy(tuple(loop_shape), operands, fmt, dt)
            return None
        name = self.loop(loop_shape, operands, fmt, dt, into=into, acc=acc, post=post)
        if o is not None:
            self.expr[o] = name
        return name


def _translator(prim, what, i=None):
    """The table's translation of ``prim`` (its forward, or the VJP of input
    ``i``, or its joint VJP) as a function ``(gen, ins, attrs)``."""
    t = prim.native if what == "native" else prim.native_vjp if i is None else prim.native_vjp[i]
    if t is None or callable(t):
        return t
    if what == "native":
        return lambda gen, ins, attrs: gen.elementwise(ins, t)
    return lambda gen, ins, attrs: gen.elementwise_vjp(ins, t)


def _vjp_translator(vprim, fn):
    """The translation of the VJP ``fn`` bound by the VJP primitive ``vprim``
    (:func:`.backward.vjp_primitive`): its forward's ``native_vjp=`` entry."""
    fwd = getattr(vprim, "forward", None)
    if fwd is None or fwd.native_vjp is None:
        return None
    if fwd.joint_vjp is not None:
        return _translator(fwd, "vjp")
    for i, f in enumerate(fwd.vjps):
        if fn is f or (fwd.dense_vjp is not None and fn is fwd.dense_vjp[i]):
            return _translator(fwd, "vjp", i)
    return None


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
        if fdt not in _FLOATS and not (shp == () and fdt in _DT_NAME):
            raise Unsupported(f"a feed of dtype {fdt}")
        gen._check_size(shp)
        name = f"a{i}"
        # a 0-d feed is passed as a scalar (ndim None): a loop's counter comes back from the last
        # iteration as a numpy scalar, which a 0-d array argument would not take
        gen.args.append((name, ("feed", i), (fdt, len(shp) if shp else None, True)))
        dt = np.dtype(casts.get(s, fdt))
        if dt not in _FLOATS and not (shp == () and dt == fdt):
            raise Unsupported(f"a placeholder of dtype {dt}")
        gen.shape[s] = shp
        if shp == ():
            gen.scalar(s, name, dt)
        elif s in casts:
            D = _DT_NAME[dt]
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
            if dt not in _FLOATS:
                raise Unsupported(f"a parameter of dtype {dt}")
            gen._check_size(shp)
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
            tr = _translator(prim, "native")
            if tr is None:
                raise Unsupported(f"op {prim.name}")
            tr(gen, ins, ins.kw)
        elif kind == "vjp":
            fwd_multi, n_out, n_in, densify, dts = ins.extra
            # (densify: a joint VJP's results may be factored; the translations compute them dense)
            if fwd_multi:
                raise Unsupported(f"{ins.eqn.prim.name}: the gradient of a multiple-result op")
            tr = _vjp_translator(ins.eqn.prim, ins.fn)
            if tr is None:
                raise Unsupported(f"op {ins.eqn.prim.name}")
            tr(gen, ins, ins.kw)
        elif kind == "effect":
            tr = _translator(ins.eqn.prim, "native")
            if tr is None:
                raise Unsupported(f"effect {ins.eqn.prim.name}")
            gen.flush()
            tr(gen, ins, ins.kw or {})
        else:
            raise Unsupported(f"instruction kind {kind}")
    fetches = []
    _flat(plan.ret, fetches)
    rets = []
    for s in fetches:
        if s in gen.lazy:
            gen.materialize(s)
        dt = gen.dtype.get(s)
        if s not in gen.expr or s in gen.weak or not (dt in _FLOATS or (gen.shape.get(s) == () and dt in _DT_NAME)):
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


def _flat(t, out):
    if t[0] == "none":
        return
    if t[0] == "v":
        if t[2]:
            raise Unsupported("a densified (row-sparse) fetch")
        out.append(t[1])
        return
    tp, items = t
    for sub in items:
        _flat(sub[1] if tp is dict else sub, out)


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
