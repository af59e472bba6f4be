"""The native tier's kernel generator: :class:`Gen`, which builds a plan's
kernel source instruction by instruction, its building blocks (elementwise
loops inlined into their consumers, reductions, products, transposes, in-place
variable updates), and the lookup of a primitive's translation in the table
(``defprim(native=, native_vjp=)``). :mod:`.native` translates plans with it
and compiles them (see there for what qualifies and why)."""
from __future__ import annotations

import math

import numpy as np

from ...autograd.primitives import NativeUnsupported

__all__ = ["Gen", "Unsupported", "MAX_SIZE", "DT_NAME", "FLOATS", "translator", "vjp_translator", "flat_slots"]

# the largest array the tier takes (elements): see native's docstring
MAX_SIZE = 2048

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
FLOATS = (_F32, _F64)
DT_NAME = {_F32: "np.float32", _F64: "np.float64", np.dtype(bool): "np.bool_", np.dtype(np.int64): "np.int64",
           np.dtype(np.int32): "np.int32"}


# the plan has something this tier cannot translate (the message says what); the table's
# translations raise it too, so it lives beside defprim
Unsupported = NativeUnsupported


# --------------------------------------------------------------------------
# code generation
# --------------------------------------------------------------------------

def _lit(value, dt):
    """A literal of ``value`` in dtype ``dt``."""
    name = DT_NAME[dt]
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
    return {"D": DT_NAME[dt], "zero": _lit(0, dt), "one": _lit(1, dt), "two": _lit(2, dt), "half": _lit(0.5, dt)}


class _Blocks:
    """The loops a primitive's ``native=`` translation builds from (mixed
    into :class:`Gen`): each method mirrors one numpy computation of the
    table's implementations, in numpy's order and dtype."""

    Unsupported = NativeUnsupported
    # the identity element format: ew() makes an identity of a whole operand an alias, not a loop
    same = staticmethod(_same)
    FLOATS = FLOATS

    @staticmethod
    def lit(value, dt):
        """A literal of ``value`` in dtype ``dt``."""
        return _lit(value, dt)

    @staticmethod
    def dtname(dt):
        """The Numba source name of dtype ``dt`` (``np.float32``)."""
        return DT_NAME[dt]

    def elementwise(self, ins, template):
        """Forward of an elementwise primitive from its scalar form (see
        ``defprim(native=)``): over float arrays a loop (inlined into its
        consumer where read once), over 0-d integers and comparisons of
        scalars (a loop's counter and condition) a scalar."""
        o = ins.outs[0]
        odt = self.dtype.get(o)
        if self.shape.get(o) == () and odt not in FLOATS and all(self.shape.get(s) == () for s in ins.args):
            dts = {self.dtype.get(s) for s in ins.args if s not in self.weak}
            if len(dts) != 1 or not dts <= set(DT_NAME) or odt not in DT_NAME:
                raise Unsupported(f"{ins.eqn.prim.name} of {sorted(map(str, dts))}")
            dt = dts.pop()
            if dt.kind in "iu" and any(type(self.weak.get(s)) is float for s in ins.args):
                # numpy compares an integer with a Python float as floats (2 < 2.5); a literal cast
                # to the integer dtype would truncate the float (2 < 2)
                raise Unsupported(f"{ins.eqn.prim.name} of an integer and a Python float")
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
            self.emit(f"{q} = {DT_NAME[dt]}({ge} / {cnt})")
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
        self.emit(f"{t} = np.empty({math.prod(shp)}, {DT_NAME[dt]})")
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
        if src not in FLOATS:
            raise Unsupported(f"astype from {src} to {dt}")
        x = self.op(s, src, inline=True)
        D = DT_NAME[dt]
        self.ew(o, self.shape[o], [x], lambda e: f"{D}({e})", dt)

    def dot(self, m, k, n, a, a_t, b, b_t, dt, bias=None):
        """A fresh flat (m, n) array: ``A @ B`` with A (m, k) the flat array
        ``a`` (stored transposed, (k, m), if ``a_t``) and B (k, n) the flat ``b``
        (stored (n, k) if ``b_t``); ``bias`` (a flat (n,) array, or a scalar) added
        after the product, as ``x @ w.T + b``."""
        t = self.tmp()
        D = DT_NAME[dt]
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
            if dt not in DT_NAME:
                raise Unsupported(f"a variable of dtype {dt}")
            self.check_size(shape)
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
    until an operation casts it to its operand's.

    A primitive's ``native=``/``native_vjp=`` translation receives the
    generator, the instruction (``ins.args``/``ins.outs``: slots) and the
    equation's attributes, and builds from what it offers: :meth:`op` (a
    slot as an operand of a dtype), :meth:`out_dtype`, :meth:`ew` (an
    elementwise result, optionally summed to a shape), :meth:`scalar`,
    :meth:`bind`, ``shape``/``dtype``/``weak`` (by slot), and the blocks of
    the base class (reductions, products, transposes, casts, variable
    storage and in-place updates); it raises ``gen.Unsupported`` for a case
    it does not cover."""

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
            flat_slots(plan.ret, fetched)
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
                    self.check_size(self.shape[s])
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
        if dt not in DT_NAME:
            raise Unsupported(f"dtype {dt}")

    @staticmethod
    def check_size(shape):
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
        if dt not in FLOATS:
            raise Unsupported(f"a result of dtype {dt}")
        if o not in self.shape:
            raise Unsupported(f"output slot {o} has no shape")
        self.check_size(self.shape[o])
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
        self.emit(f"{t} = {DT_NAME[dt]}({expr})")
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
        D = DT_NAME[dt]
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


def translator(prim, what, i=None):
    """The table's translation of ``prim`` (its forward, or the VJP of input
    ``i``, or its joint VJP) as a function ``(gen, ins, attrs)``."""
    t = prim.native if what == "native" else prim.native_vjp if i is None else prim.native_vjp[i]
    if t is None or callable(t):
        return t
    if what == "native":
        return lambda gen, ins, attrs: gen.elementwise(ins, t)
    return lambda gen, ins, attrs: gen.elementwise_vjp(ins, t)


def vjp_translator(vprim, fn):
    """The translation of the VJP ``fn`` bound by the VJP primitive ``vprim``
    (:func:`.backward.vjp_primitive`): its forward's ``native_vjp=`` entry."""
    fwd = getattr(vprim, "forward", None)
    if fwd is None or fwd.native_vjp is None:
        return None
    if fwd.joint_vjp is not None:
        return translator(fwd, "vjp")
    for i, f in enumerate(fwd.vjps):
        if fn is f or (fwd.dense_vjp is not None and fn is fwd.dense_vjp[i]):
            return translator(fwd, "vjp", i)
    return None


def flat_slots(t, out):
    if t[0] == "none":
        return
    if t[0] == "v":
        if t[2]:
            raise Unsupported("a densified (row-sparse) fetch")
        out.append(t[1])
        return
    tp, items = t
    for sub in items:
        flat_slots(sub[1] if tp is dict else sub, out)
