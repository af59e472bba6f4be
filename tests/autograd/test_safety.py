"""Memory safety and input checks of every primitive, property-based.

For every primitive in ``PRIMITIVES`` (``STRATEGIES`` must cover the table, so
a new primitive cannot land without one), hypothesis draws inputs around a
valid configuration and then spoils some of them: random ranks and shapes,
batch sizes that disagree, empty dimensions, other dtypes (float16, integers,
booleans, complex), non-contiguous views, Python scalars, negative and
out-of-range indices, broken tree schedules and packed batch sizes. Each
example is applied eagerly and, for a part of them, in a static graph whose
placeholders have unknown (None) dimensions. The property:

* a rejection is a ShapeError / TypeError / ValueError / IndexError whose
  message names the op; any other exception fails;
* an accepted input gives outputs of exactly the shapes and dtypes the shape
  rule predicts, and its VJPs give gradients of the inputs' shapes;
* the static graph accepts and rejects what eager mode does and computes the
  same values, and its symbolic gradients have the inputs' shapes and
  declared dtypes;
* nothing crashes: the examples run in a child process, so a segfault (a
  kernel reading or writing out of bounds) fails this test and prints the
  input that caused it, instead of killing the test run;
* afterwards, every Numba kernel has only ever been called with C-contiguous
  float32/float64 arrays of one dtype (and int64 index arrays): the callers
  validated and converted their arguments before the kernel ran.

``python tests/autograd/test_safety.py --child [--examples N] [names...]`` runs
the child directly (``DYNNETS_SAFETY_EXAMPLES`` sets N for the test run).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
import warnings

import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dynnets as dn
from dynnets.autograd.engine import bind
from dynnets.autograd.primitives import PRIMITIVES, MatmulT, OuterSum, RowSparse, ShapeError, check_shapes

# examples per primitive in the test run (the whole table in about 10 s on the 2-core machine)
EXAMPLES = int(os.environ.get("DYNNETS_SAFETY_EXAMPLES", "60"))
# the op names rejections of a primitive may use (a public op's name where it differs)
OP_NAMES = {"softmax_cross_entropy": ("cross_entropy", "softmax_cross_entropy"), "div_rounded": ("div", "floor_divide")}
# (an integer division or remainder by zero raises ZeroDivisionError, as torch's error)
ALLOWED = (ShapeError, TypeError, ValueError, IndexError, ZeroDivisionError)

# derandomized, so CI is reproducible; DYNNETS_SAFETY_RANDOM=1 explores other examples on each run
settings.register_profile("dynnets-safety", derandomize=not os.environ.get("DYNNETS_SAFETY_RANDOM"),
                          deadline=None, database=None, print_blob=False, suppress_health_check=list(HealthCheck))


# --------------------------------------------------------------------------
# drawing inputs
# --------------------------------------------------------------------------

FLOATS = [np.float64, np.float32]
OTHER = [np.float16, np.int64, np.int32, np.bool_, np.complex128, np.uint8]


class Gen:
    """Draws through hypothesis' ``data``; values come from a drawn seed (drawing
    each element through hypothesis would be slow and is not what is tested)."""

    def __init__(self, data):
        self.data = data
        self.rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))

    def draw(self, strategy, label=None):
        return self.data.draw(strategy, label=label)

    def flag(self, p):
        """True with probability about ``p`` (a drawn choice, so hypothesis can shrink it)."""
        return self.draw(st.integers(0, 99)) < p * 100

    def dim(self, lo=0, hi=4):
        # mostly 1-3, empty (0) one time in five: hypothesis' integers favour the bounds
        return self.draw(st.sampled_from([d for d in (2, 1, 3, 0, 4) if lo <= d <= hi]))

    def fdt(self):
        return np.dtype(self.draw(st.sampled_from(FLOATS)))

    def arr(self, shape, dtype):
        dtype = np.dtype(dtype)
        if dtype.kind == "b":
            return self.rng.random(shape) > 0.5
        if dtype.kind in "iu":
            return self.rng.integers(0 if dtype.kind == "u" else -3, 6, shape).astype(dtype)
        a = self.rng.standard_normal(shape)
        if dtype.kind == "c":
            a = a + 1j * self.rng.standard_normal(shape)
        return a.astype(dtype)

    def index(self, shape, lo, hi):
        """An integer index array with values in [lo, hi)."""
        return self.rng.integers(lo, max(hi, lo + 1), shape).astype(np.int64)

    def shape_near(self, shape):
        """``shape`` with one dimension changed, dropped or added."""
        shape = list(shape)
        k = self.draw(st.integers(0, 2))
        if k == 0 and shape:
            i = self.draw(st.integers(0, len(shape) - 1))
            shape[i] = self.draw(st.sampled_from([0, 1, 2, 3, 5, 7]))
        elif k == 1 and shape:
            del shape[self.draw(st.integers(0, len(shape) - 1))]
        else:
            shape.insert(self.draw(st.integers(0, len(shape))), self.draw(st.integers(0, 3)))
        return tuple(shape)

    def strided(self, a):
        """``a`` (same shape, dtype and values) as a non-contiguous view."""
        if a.ndim >= 2:
            return np.asfortranarray(a)
        if a.ndim == 1:
            return np.repeat(a, 2)[::2]
        return a

    def spoil(self, args, p=0.35, index_args=()):
        """Valid variations first: one argument as a non-contiguous view, one
        float argument in the other float dtype. Then, with probability ``p``,
        spoil one argument: another shape, another dtype, a strided view, an
        empty array or a Python scalar (an index argument may instead get
        values far out of range)."""
        args = list(args)
        arrays = [k for k, a in enumerate(args) if isinstance(a, np.ndarray)]
        if arrays and self.flag(0.3):
            k = self.draw(st.sampled_from(arrays))
            args[k] = self.strided(args[k])
        floats = [k for k in arrays if args[k].dtype.kind == "f"]
        if floats and self.flag(0.2):
            k = self.draw(st.sampled_from(floats))
            args[k] = args[k].astype(np.float32 if args[k].dtype == np.float64 else np.float64)
        if not args or not self.flag(p):
            return args
        i = self.draw(st.integers(0, len(args) - 1))
        a = args[i]
        how = self.draw(st.sampled_from(["shape", "dtype", "strided", "empty", "scalar"]))
        if not isinstance(a, np.ndarray):
            how = "shape"
            a = np.asarray(a, dtype=np.float64)
        if how == "shape":
            args[i] = self.arr(self.shape_near(a.shape), a.dtype)
        elif how == "dtype":
            args[i] = self.arr(a.shape, self.draw(st.sampled_from(FLOATS + OTHER)))
        elif how == "strided":
            big = self.arr(a.shape[:-1] + (2 * a.shape[-1],) if a.ndim else (2,), a.dtype)
            args[i] = big[..., ::2] if a.ndim else big[0]
        elif how == "empty":
            args[i] = self.arr(tuple(0 if k == 0 else d for k, d in enumerate(a.shape)) if a.ndim else (0,),
                               a.dtype)
        else:
            args[i] = self.draw(st.sampled_from([0, 1, 2.5, -1.0, True]))
        if i in index_args and self.flag(0.5):
            # an index argument's values out of range rather than its shape
            args[i] = np.asarray(a).astype(np.int64) + self.draw(st.sampled_from([-100, -7, 7, 10 ** 6, 2 ** 40]))
        return args


def _binary(g):
    nd = g.dim(0, 3)
    out = tuple(g.dim(1, 3) for _ in range(nd))

    def side():
        keep = g.draw(st.integers(0, nd))
        return tuple(1 if g.flag(0.3) else d for d in out[nd - keep:])
    dt = g.fdt()
    x, y = g.arr(side(), dt), g.arr(side(), g.fdt() if g.flag(0.2) else dt)
    if g.flag(0.2):
        y = g.draw(st.sampled_from([2, 0.5, -1.5, 0, True]))
    return g.spoil([x, y]), {}


def _unary(g):
    return g.spoil([g.arr(tuple(g.dim(0, 3) for _ in range(g.dim(0, 3))), g.fdt())]), {}


def _clip(g):
    (x,), _ = _unary(g)
    lo = g.draw(st.sampled_from([None, -0.5, 0, 1, "a"]))
    hi = g.draw(st.sampled_from([None, 0.5, 2, -1.0]))
    return [x], {"lo": lo, "hi": hi}


def _where(g):
    (x, y), _ = _binary(g)
    try:
        cshape = np.broadcast_shapes(np.shape(x), np.shape(y)) if g.flag(0.7) else g.shape_near(np.shape(x))
    except ValueError:
        cshape = np.shape(x)
    cond = g.arr(cshape, np.bool_) if g.flag(0.85) else g.arr(cshape, np.float64)
    return g.spoil([cond, x, y], p=0.2), {}


def _astype(g):
    (x,), _ = _unary(g)
    return [x], {"dtype": np.dtype(g.draw(st.sampled_from(FLOATS + OTHER)))}


def _axis(g, nd):
    return g.draw(st.sampled_from([None, 0, -1, nd - 1, nd, -nd - 1, (0, -1), (0, 0), 1.0, [0]]))


def _reduce(g):
    (x,), _ = _unary(g)
    return [x], {"axis": _axis(g, x.ndim if isinstance(x, np.ndarray) else 0), "keepdims": g.flag(0.3)}


def _argmax(g):
    (x,), _ = _unary(g)
    nd = x.ndim if isinstance(x, np.ndarray) else 0
    return [x], {"axis": g.draw(st.sampled_from([None, 0, -1, nd - 1, nd, -nd - 1, 1.0]))}


def _reshape(g):
    (x,), _ = _unary(g)
    n = int(np.prod(np.shape(x)))
    shape = g.draw(st.sampled_from([(n,), (-1,), (1, n), (n, -1), (-1, -1), (n + 1,), (2, -1), (-2, 3), (n, None),
                                    ()]))
    return [x], {"shape": shape}


def _transpose(g):
    (x,), _ = _unary(g)
    nd = np.ndim(x)
    perm = list(range(nd))
    g.rng.shuffle(perm)
    axes = g.draw(st.sampled_from([None, tuple(perm), tuple(perm[:-1]), (0, 0), (nd,), tuple(-1 - a for a in perm)]))
    return [x], {"axes": axes}


def _broadcast_to(g):
    (x,), _ = _unary(g)
    shp = np.shape(x)
    target = g.draw(st.sampled_from([(2,) + shp, shp, tuple(d if d != 1 else 3 for d in shp), g.shape_near(shp),
                                     (-1,) + shp]))
    return [x], {"shape": target}


def _index_item(g, d):
    r = g.draw(st.integers(0, 9))
    if r == 0:
        return None
    if r == 1:
        return Ellipsis
    if r <= 3:
        return g.draw(st.integers(-d - 2, d + 2))
    if r <= 6:
        opts = [None, -5, -1, 0, 1, 2, 7]
        return slice(g.draw(st.sampled_from(opts)), g.draw(st.sampled_from(opts)),
                     g.draw(st.sampled_from([None, -2, -1, 1, 2, 3])))
    if r <= 8:
        return g.index(tuple(g.dim(0, 2) for _ in range(g.dim(0, 2))), -d - 1, d + 2)
    return g.arr((max(d, 0),) if g.flag(0.8) else (g.dim(0, 3),), np.bool_)


def _getitem(g):
    (x,), _ = _unary(g)
    shp = np.shape(x)
    items = tuple(_index_item(g, shp[k] if k < len(shp) else 2) for k in range(g.dim(0, 3)))
    index = items[0] if len(items) == 1 and g.flag(0.5) else items
    if g.flag(0.05):
        index = "a"
    return [x], {"index": index}


def _setitem(g):
    [x], attrs = _getitem(g)
    index = attrs["index"]
    try:
        region = np.shape(np.zeros(np.shape(x))[index])
    except (IndexError, TypeError, ValueError):
        region = g.shape_near(np.shape(x))
    shp = g.draw(st.sampled_from([region, region[1:], (1,) + tuple(region), g.shape_near(region), ()]))
    v = g.arr(tuple(shp), g.fdt()) if g.flag(0.9) else g.draw(st.sampled_from([1.5, 2, True]))
    return g.spoil([x, v]), {"index": index}


def _take(g):
    n = g.dim(0, 4)
    x = g.arr((n,) + tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))), g.fdt())
    idx = g.index(tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))), -n - 1, n + 2)
    return g.spoil([x, idx], index_args=(1,)), {}


def _concat_like(stack):
    def gen(g):
        nd = g.dim(0 if stack else 1, 3)
        base = [g.dim(0, 3) for _ in range(nd)]
        ax = g.draw(st.integers(-nd - 1, nd)) if nd else 0
        xs = []
        for _ in range(g.dim(1, 3)):
            shp = list(base)
            if not stack and nd and -nd <= ax < nd:
                shp[ax] = g.dim(0, 3)
            xs.append(g.arr(tuple(shp), g.fdt() if g.flag(0.2) else np.float64))
        attrs = {} if g.flag(0.3) else {"axis": ax}
        return g.spoil(xs, p=0.3), attrs
    return gen


def _matmul(g):
    k = g.dim(0, 3)
    xs = tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))) + (k,)
    ws = (k,) + tuple(g.dim(0, 3) for _ in range(g.dim(0, 1)))
    if len(ws) == 2 and g.flag(0.3):
        ws = (g.dim(1, 2),) + ws
    dt = g.fdt()
    return g.spoil([g.arr(xs, dt), g.arr(ws, dt)]), {}


def _linear(g):
    i, o = g.dim(0, 3), g.dim(0, 3)
    x = g.arr(tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))) + (i,), g.fdt())
    bshape = g.draw(st.sampled_from([(o,), (1, o), (), (o + 1,), (2, o)]))
    return g.spoil([x, g.arr((o, i), np.float64), g.arr(bshape, np.float64)]), {}


def _softmax(g):
    (x,), _ = _unary(g)
    return [x], ({} if g.flag(0.3) else {"axis": _axis(g, np.ndim(x))})


def _xent(g):
    n, c = g.dim(0, 4), g.dim(0, 4)
    logits = g.arr((n, c), g.fdt())
    t = g.index((n if g.flag(0.8) else g.dim(0, 5),), -1 if g.flag(0.2) else 0, c + (1 if g.flag(0.2) else 0))
    if g.flag(0.1):
        t = t.reshape(-1, 1)
    args = [logits, t]
    if g.flag(0.4):
        args.append(g.arr((n if g.flag(0.8) else g.dim(0, 5),), np.float64))
    red = g.draw(st.sampled_from(["mean", "sum", "none", "bogus"]))
    return g.spoil(args, p=0.3, index_args=(1,)), {"reduction": red}


def _sigmoid_xent(g):
    shape = tuple(g.dim(0, 3) for _ in range(g.dim(0, 3)))
    dt = g.fdt()
    args = [g.arr(shape, dt), g.arr(shape if g.flag(0.85) else g.shape_near(shape), dt)]
    if g.flag(0.4):
        args.append(g.arr(shape[-1:] if g.flag(0.8) else g.shape_near(shape[-1:]), dt))
    return g.spoil(args, p=0.3), {}


def _bce(g):
    shape = tuple(g.dim(0, 3) for _ in range(g.dim(0, 3)))
    dt = g.fdt()
    # probabilities, with 0 and 1 among them (the clamped logs); spoiled ones may leave [0, 1]
    x = np.clip(g.arr(shape, dt), -0.5, 1.5).clip(0, 1).astype(dt)
    return g.spoil([x, g.arr(shape if g.flag(0.85) else g.shape_near(shape), dt)], p=0.3), {}


def _embedding(g):
    V, D = g.dim(0, 4), g.dim(0, 3)
    ids = g.index(tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))), -1 if g.flag(0.2) else 0,
                  V + (2 if g.flag(0.2) else 0))
    if g.flag(0.1):
        ids = ids.astype(np.uint64) + np.uint64(2 ** 63)
    return g.spoil([g.arr((V, D), g.fdt()), ids], p=0.3, index_args=(1,)), {}


def _cell(gates, with_c):
    def gen(g):
        B, I, H = g.dim(0, 3), g.dim(0, 3), g.dim(0, 3)
        dt = g.fdt()
        B2 = B if g.flag(0.85) else g.dim(0, 3)          # a batch mismatch between x and the state
        args = [g.arr((B, I), dt), g.arr((B2, H), dt)]
        if with_c:
            args.append(g.arr((B2 if g.flag(0.85) else g.dim(0, 3), H), dt))
        args += [g.arr((gates * H, I), dt), g.arr((gates * H, H), dt), g.arr((gates * H,), dt),
                 g.arr((gates * H,), g.fdt() if g.flag(0.2) else dt)]
        return g.spoil(args), {}
    return gen


def _tree_cell(g):
    N, H = g.dim(0, 3), g.dim(0, 3)
    dt = g.fdt()
    args = [g.arr((N if g.flag(0.9) else g.dim(0, 3), H), dt) for _ in range(4)]
    args += [g.arr((2 * H, 5 * H), dt), g.arr((5 * H,), dt)]
    return g.spoil(args), {}


def _leaf(g):
    N, E, H = g.dim(0, 3), g.dim(0, 3), g.dim(0, 3)
    dt = g.fdt()
    return g.spoil([g.arr((N, E), dt), g.arr((E, 3 * H), dt), g.arr((3 * H,), dt)]), {}


def _tree_node(g):
    N, H = g.dim(0, 3), g.dim(0, 3)
    dt = g.fdt()
    args = [g.arr((N, 2 * H), dt), g.arr((N if g.flag(0.9) else g.dim(0, 3), 2 * H), dt),
            g.arr((2 * H, 5 * H), dt), g.arr((5 * H,), dt)]
    return g.spoil(args), {}


def _schedule(g, nary):
    """A level schedule (children of earlier levels only), then maybe broken."""
    n0 = g.dim(0, 4)
    off = [0, n0]
    kids, ptr = [], [0]
    for _ in range(g.dim(0, 3)):
        start = off[-1]
        m = g.dim(0, 3) if start else 0
        for _ in range(m):
            for _ in range(g.dim(1, 3) if nary else 2):
                kids.append(int(g.rng.integers(0, start)))
            ptr.append(len(kids))
        off.append(start + m)
    kids = np.array(kids, dtype=np.int64)
    off = np.array(off, dtype=np.int64)
    ptr = np.array(ptr, dtype=np.int64)
    how = g.draw(st.sampled_from(["ok"] * 5 + ["child", "offsets", "ptr", "dtype", "huge"]))
    if how == "child" and kids.size:
        kids[g.draw(st.integers(0, kids.size - 1))] = g.draw(st.sampled_from([-1, n0 + 100, int(off[-1]), -10 ** 6]))
    elif how == "offsets":
        k = g.draw(st.integers(0, len(off) - 1))
        off[k] += g.draw(st.sampled_from([-2, -1, 1, 3]))
    elif how == "ptr":
        ptr[g.draw(st.integers(0, len(ptr) - 1))] += g.draw(st.sampled_from([-2, -1, 1, 5]))
    elif how == "dtype":
        kids, off = kids.astype(np.float64), off.astype(np.int32)
    elif how == "huge" and kids.size:
        kids = kids.astype(np.uint64)
        kids[0] = np.uint64(2 ** 63 + 1)
    return n0, kids, off, ptr


def _binary_levels(lstm):
    def gen(g):
        n0, kids, off, _ = _schedule(g, nary=False)
        left, right = kids[0::2], kids[1::2]
        H, dt = g.dim(0, 3), g.fdt()
        state = [g.arr((n0, H), dt)] + ([g.arr((n0, H), dt)] if lstm else [])
        w = g.arr((2 * H, 5 * H if lstm else H), dt)
        b = g.arr((5 * H if lstm else H,), dt)
        k = len(state) + 2
        return g.spoil(state + [w, b, left, right, off], p=0.25, index_args=(k, k + 1, k + 2)), {}
    return gen


def _binary_levels_packed(g):
    n0, kids, off, _ = _schedule(g, nary=False)
    left, right = kids[0::2], kids[1::2]
    H, dt = g.dim(0, 3), g.fdt()
    ns = g.dim(1, 4)
    rows = g.rng.integers(0, ns, n0).astype(np.int64)
    args = [g.arr((ns, 2 * H), dt), rows, g.arr((2 * H, 5 * H), dt), g.arr((5 * H,), dt), left, right, off]
    return g.spoil(args, p=0.25, index_args=(1, 4, 5, 6)), {}


def _childsum(g):
    n0, kids, off, ptr = _schedule(g, nary=True)
    H, dt = g.dim(0, 3), g.fdt()
    args = [g.arr((n0, H), dt), g.arr((n0, H), dt), g.arr((H, 3 * H), dt), g.arr((H, H), dt), g.arr((3 * H,), dt),
            g.arr((H,), dt), ptr, kids, off]
    return g.spoil(args, p=0.25, index_args=(6, 7, 8)), {}


def _seq(gates):
    def gen(g):
        lengths = sorted((g.dim(1, 4) for _ in range(g.dim(0, 3))), reverse=True)
        T = lengths[0] if lengths else 0
        bs = np.array([sum(1 for n in lengths if n > t) for t in range(T)], dtype=np.int64)
        how = g.draw(st.sampled_from(["ok"] * 5 + ["zero", "rising", "sum", "negative", "float"]))
        if how == "zero":
            bs = np.append(bs, 0)
        elif how == "rising" and bs.size:
            bs = bs[::-1].copy()
            bs[-1] += 1
        elif how == "sum" and bs.size:
            bs[0] += 1
        elif how == "negative":
            bs = np.append(bs, -1)
        elif how == "float":
            bs = bs.astype(np.float64)
        total = int(sum(lengths))
        H, dt = g.dim(0, 3), g.fdt()
        args = [g.arr((total, gates * H), dt), g.arr((gates * H, H), dt), g.arr((gates * H,), dt), bs]
        return g.spoil(args, p=0.25, index_args=(3,)), {}
    return gen


def _split_rows(g):
    return g.spoil([g.arr((g.dim(0, 4),) + tuple(g.dim(0, 2) for _ in range(g.dim(0, 2))), g.fdt())]), {}


def _segment_sum(g):
    n = g.dim(0, 4)
    x = g.arr((n,) + tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))), g.fdt())
    starts = np.unique(g.index((g.dim(1, 3),), 0, n + 1))
    if g.flag(0.7):
        starts[0] = 0
    return g.spoil([x, starts], index_args=(1,)), {}


def _gather_rows(g):
    trail = tuple(g.dim(0, 3) for _ in range(g.dim(0, 2)))
    dt = g.fdt()
    srcs = [g.arr((g.dim(1, 4),) + trail, dt) for _ in range(g.dim(1, 3))]
    R = g.dim(0, 4)
    which = g.index((R,), 0 if g.flag(0.8) else -1, len(srcs) + (0 if g.flag(0.8) else 2))
    rows = g.index((R,), -1 if g.flag(0.1) else 0, min(s.shape[0] for s in srcs) + (1 if g.flag(0.1) else 0))
    return g.spoil([which, rows] + srcs, index_args=(0, 1)), {}


def _arena_gather(g):
    trail = tuple(g.dim(0, 3) for _ in range(g.dim(0, 2)))
    dt = g.fdt()
    lens = [g.dim(1, 4) for _ in range(g.dim(1, 3))]
    arena = g.arr((sum(lens) + g.dim(0, 2),) + trail, dt)
    offs = np.cumsum([0] + lens[:-1]).astype(np.int64)
    # the sources as the arena's views (its fast path) or as arrays of their own
    srcs = [arena[o:o + n] for o, n in zip(offs, lens)] if g.flag(0.5) else [g.arr((n,) + trail, dt) for n in lens]
    R = g.dim(0, 4)
    which = g.index((R,), 0 if g.flag(0.8) else -1, len(srcs) + (0 if g.flag(0.8) else 2))
    rows = g.index((R,), -1 if g.flag(0.1) else 0, min(lens) + (1 if g.flag(0.1) else 0))
    return g.spoil([arena, offs, which, rows] + srcs, index_args=(1, 2, 3)), {}


def _random(g):
    dist = g.draw(st.sampled_from(["normal", "truncated_normal", "uniform", "gamma"]))
    shape = tuple(g.dim(0, 3) for _ in range(g.dim(0, 3)))
    if g.flag(0.15):
        shape = shape + (g.draw(st.sampled_from([None, -1, 1.5])),)
    dtype = np.dtype(g.draw(st.sampled_from(FLOATS + OTHER))) if g.flag(0.3) else g.fdt()
    a, b = g.draw(st.sampled_from([(0.0, 1.0), (-1.0, 2.0), (1.0, 1.0), (0.0, -1.0), (0, 5)]))
    seed = g.draw(st.sampled_from([(1, 2), (0, 0), (1, -2), 7, (1, 2, 3)]))
    return [], {"dist": dist, "shape": shape, "dtype": dtype, "a": a, "b": b, "seed": seed}


def _dropout_mask(g):
    (x,), _ = _unary(g)
    rate = g.draw(st.sampled_from([0.0, 0.5, 0.9, 1.0, -0.1, True, "a"]))
    seed = g.draw(st.sampled_from([(1, 2), (0, 0), (1, -2), 7]))
    return [x], {"rate": rate, "seed": seed}


def _gelu(g):
    (x,), _ = _unary(g)
    return [x], ({} if g.flag(0.4) else {"approximate": g.draw(st.sampled_from(["none", "tanh", "erf", None]))})


def _leaky_relu(g):
    (x,), _ = _unary(g)
    return [x], {"negative_slope": g.draw(st.sampled_from([0.01, 0.2, -1.0, 0, "a", True, None]))}


def _gather(g):
    nd = g.dim(0, 3)
    xs = tuple(g.dim(0, 3) for _ in range(nd))
    dim = g.draw(st.integers(-nd - 1, nd)) if nd else 0
    ks = tuple(g.dim(0, 3) if k == dim % max(nd, 1) else (d if g.flag(0.7) else g.dim(0, 3))
               for k, d in enumerate(xs))
    n = xs[dim % nd] if nd and -nd <= dim < nd else 1
    idx = g.index(ks, -1 if g.flag(0.2) else 0, n + (1 if g.flag(0.2) else 0))
    return g.spoil([g.arr(xs, g.fdt()), idx], p=0.3, index_args=(1,)), {"dim": g.draw(
        st.sampled_from([dim, dim, 1.0, None])) if g.flag(0.2) else dim}


def _split(g):
    (x,), _ = _unary(g)
    nd = np.ndim(x)
    ax = g.draw(st.integers(-nd - 1, nd)) if nd else 0
    n = np.shape(x)[ax] if nd and -nd <= ax < nd else 2
    cut = sorted(g.draw(st.lists(st.integers(0, max(n, 0)), max_size=3)))
    sizes = tuple(b - a for a, b in zip([0] + cut, cut + [n]))
    if g.flag(0.2):
        sizes = g.draw(st.sampled_from([sizes + (1,), (n + 1,), (-1, n + 1), [n], (1.0,)]))
    return [x], {"sizes": sizes, "axis": ax}


def _pad(g):
    (x,), _ = _unary(g)
    nd = np.ndim(x)
    pads = tuple((g.draw(st.integers(-2, 3)), g.draw(st.integers(-2, 3))) for _ in range(nd))
    if g.flag(0.15):
        pads = g.draw(st.sampled_from([pads[:-1], pads + ((0, 0),), ((1, 1.5),) * nd, [(1, 1)] * nd]))
    mode = g.draw(st.sampled_from(["constant", "reflect", "replicate", "circular", "symmetric", "edge"]))
    return [x], {"pads": pads, "mode": mode, "value": g.draw(st.sampled_from([0.0, 1.5, -2, "a"]))}


def _norm(g):
    (x,), _ = _unary(g)
    attrs = {"ord": g.draw(st.sampled_from([2.0, 1.0, 0.0, 3.0, 0.5, 1.5, np.inf, -np.inf, "fro", True]))}
    if g.flag(0.6):
        attrs["axis"] = _axis(g, np.ndim(x))
    if g.flag(0.3):
        attrs["keepdims"] = True
    return [x], attrs


_EQUATIONS = [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 1)]), ("ii->i", [(3, 3)]),
              ("ii->", [(2, 2)]), ("ij->", [(2, 3)]), ("i,j->ij", [(2,), (3,)]), ("ij,k->ik", [(2, 3), (4,)]),
              ("ij,ij->", [(3, 2), (3, 2)]), ("ij,jk,kl->il", [(1, 2), (2, 3), (3, 2)]), ("i->ii", [(2,)]),
              ("ij", [(2, 3)]), ("ij,jk->iz", [(2, 3), (3, 4)])]


def _einsum(g):
    eq, shapes = g.draw(st.sampled_from(_EQUATIONS))
    dt = g.fdt()
    return g.spoil([g.arr(tuple(d if g.flag(0.9) else g.dim(0, 3) for d in shp), dt) for shp in shapes],
                   p=0.3), {"equation": eq}


STRATEGIES = {
    "gelu": _gelu, "leaky_relu": _leaky_relu, "gather": _gather, "split": _split, "pad": _pad, "norm": _norm,
    "einsum": _einsum,
    "segment_sum": _segment_sum, "gather_rows": _gather_rows, "arena_gather": _arena_gather,
    "add": _binary, "sub": _binary, "mul": _binary, "div": _binary, "pow": _binary, "maximum": _binary,
    "minimum": _binary, "neg": _unary, "exp": _unary, "log": _unary, "tanh": _unary, "sigmoid": _unary,
    "relu": _unary, "sqrt": _unary, "abs": _unary, "clip": _clip, "where": _where, "astype": _astype,
    "sum": _reduce, "mean": _reduce, "max": _reduce, "reshape": _reshape, "transpose": _transpose,
    "broadcast_to": _broadcast_to, "getitem": _getitem, "setitem": _setitem, "take": _take,
    "concat": _concat_like(False),
    "stack": _concat_like(True), "matmul": _matmul, "linear": _linear, "softmax": _softmax,
    "log_softmax": _softmax, "softmax_cross_entropy": _xent, "embedding": _embedding,
    "sigmoid_cross_entropy": _sigmoid_xent, "binary_cross_entropy": _bce,
    "lstm_cell": _cell(4, True), "gru_cell": _cell(3, False), "tree_lstm_cell": _tree_cell,
    "tree_lstm_leaf": _leaf, "tree_lstm_leaf_node": _leaf, "tree_lstm_node": _tree_node,
    "tree_lstm_levels": _binary_levels(True), "tree_lstm_levels_packed": _binary_levels_packed,
    "tree_rnn_levels": _binary_levels(False),
    "childsum_levels": _childsum, "lstm_seq": _seq(4), "gru_seq": _seq(3), "rnn_seq": _seq(1),
    "split_rows": _split_rows, "argmax": _argmax, "less": _binary, "less_equal": _binary, "greater": _binary,
    "greater_equal": _binary, "equal": _binary, "not_equal": _binary, "random": _random,
    "dropout_mask": _dropout_mask, "copy": _unary, "sin": _unary, "cos": _unary, "sign": _unary,
}


# the selection and layout primitives (primitives/select.py)
def _gather_nd(g):
    ps = tuple(g.dim(1, 3) for _ in range(g.dim(1, 3)))
    k = g.draw(st.integers(1, len(ps)))
    lead = tuple(g.dim(0, 3) for _ in range(g.dim(0, 2)))
    idx = np.stack([g.index(lead, -1 if g.flag(0.1) else 0, ps[j] + (1 if g.flag(0.1) else 0)) for j in range(k)],
                   axis=-1)
    return g.spoil([g.arr(ps, g.fdt()), idx], p=0.25, index_args=(1,)), {}


def _boolean_mask(g):
    ts = tuple(g.dim(0, 3) for _ in range(g.dim(1, 3)))
    axis = g.draw(st.integers(0, len(ts) - 1))
    m = g.draw(st.integers(1, len(ts) - axis))
    mask = g.arr(ts[axis:axis + m], np.bool_)
    attrs = {} if axis == 0 and g.flag(0.5) else {"axis": g.draw(st.sampled_from([axis, axis, -1, len(ts)]))}
    return g.spoil([g.arr(ts, g.fdt()), mask], p=0.3), attrs


def _argwhere(g):
    shape = tuple(g.dim(0, 3) for _ in range(g.dim(0, 3)))
    return g.spoil([g.arr(shape, np.bool_)], p=0.2), {}


def _top_k(g):
    (x,), _ = _unary(g)
    n = np.shape(x)[-1] if np.ndim(x) else 0
    return [x], {"k": g.draw(st.sampled_from([0, 1, n, n + 1, -1, 1.5]))}


def _tile(g):
    (x,), _ = _unary(g)
    mult = tuple(g.draw(st.integers(0, 3)) for _ in range(np.ndim(x)))
    if g.flag(0.15):
        mult = g.draw(st.sampled_from([mult + (2,), (-1,) * np.ndim(x), [1] * np.ndim(x)]))
    return [x], {"multiples": mult}


def _ensure_shape(g):
    (x,), _ = _unary(g)
    shp = np.shape(x)
    if g.flag(0.7):
        shape = tuple(None if g.flag(0.5) else d for d in shp)
    else:
        shape = g.draw(st.sampled_from([tuple(g.shape_near(shp)), (-1,) + shp, list(shp)]))
    return [x], {"shape": shape}


STRATEGIES.update({"gather_nd": _gather_nd, "boolean_mask": _boolean_mask, "argwhere": _argwhere, "top_k": _top_k,
                   "tile": _tile, "stop_gradient": _unary, "ensure_shape": _ensure_shape})


# torch's rounding, remainders, sort and cumsum (issue 22)
def _round(g):
    (x,), _ = _unary(g)
    return [x], ({} if g.flag(0.4) else {"decimals": g.draw(st.sampled_from([1, -1, 3, 1.5, True]))})


def _div_rounded(g):
    args, _ = _binary(g)
    return args, ({} if g.flag(0.4) else {"mode": g.draw(st.sampled_from(["floor", "trunc", "round", None]))})


def _axis_attr(g, x):
    nd = max(np.ndim(x), 1)
    return g.draw(st.sampled_from([0, -1, nd - 1, nd, -nd - 1, 1.0]))


def _cumsum(g):
    (x,), _ = _unary(g)
    return [x], {"axis": _axis_attr(g, x)}


def _sort(g):
    (x,), _ = _unary(g)
    attrs = {"axis": _axis_attr(g, x)}
    if g.flag(0.5):
        attrs["descending"] = g.draw(st.sampled_from([True, False, 1]))
    if g.flag(0.3):
        attrs["stable"] = g.draw(st.sampled_from([True, False, None]))
    return [x], attrs


STRATEGIES.update({"round": _round, "remainder": _binary, "fmod": _binary, "div_rounded": _div_rounded,
                   "cumsum": _cumsum, "sort": _sort})


# branch i22-torch-b: log1p, expm1, prod (one int axis or None; _reduce's tuples are rejected)
def _prod(g):
    (x,), attrs = _reduce(g)
    if g.flag(0.5):
        attrs["axis"] = _axis_attr(g, x)
    return [x], attrs


STRATEGIES.update({"log1p": _unary, "expm1": _unary, "prod": _prod})


# i22-torch-a: scatter / scatter_add (index int64 of self's rank, src at least index's size), unique, bincount
def _scatter(g):
    nd = g.dim(1, 3)
    xs = tuple(g.dim(0, 3) for _ in range(nd))
    dim = g.draw(st.integers(-nd - 1, nd))
    d = dim % nd
    ks = tuple(g.dim(0, 3) if k == d else (x if g.flag(0.7) else g.dim(0, 3)) for k, x in enumerate(xs))
    ss = tuple(k + (1 if g.flag(0.2) else 0) if g.flag(0.8) else g.dim(0, 3) for k in ks)
    n = xs[d] if -nd <= dim < nd else 1
    idx = g.index(ks, -1 if g.flag(0.2) else 0, n + (1 if g.flag(0.2) else 0))
    dt = g.fdt()
    return g.spoil([g.arr(xs, dt), idx, g.arr(ss, dt if g.flag(0.9) else g.fdt())], p=0.3,
                   index_args=(1,)), {"dim": g.draw(st.sampled_from([dim, dim, 1.0])) if g.flag(0.2) else dim}


def _unique(g):
    shape = tuple(g.dim(0, 3) for _ in range(g.dim(0, 3)))
    return g.spoil([g.arr(shape, g.draw(st.sampled_from([np.float64, np.int64, np.bool_])))], p=0.2), {}


def _bincount(g):
    n = g.dim(0, 4)
    x = g.index((n,), -1 if g.flag(0.2) else 0, 5)
    w = g.arr((n if g.flag(0.8) else g.dim(0, 4),), g.fdt()) if g.flag(0.5) else np.zeros((), np.int64)
    return g.spoil([x, w], p=0.2, index_args=(0,)), {"minlength": g.draw(st.sampled_from([0, 0, 3, -1]))}


STRATEGIES.update({"scatter": _scatter, "scatter_add": _scatter, "unique": _unique, "bincount": _bincount})


# --------------------------------------------------------------------------
# the property
# --------------------------------------------------------------------------

def _describe(args, attrs):
    parts = []
    for a in args:
        if isinstance(a, np.ndarray):
            d = f"array{a.shape} {a.dtype}" + ("" if a.flags.c_contiguous else " strided")
            if a.dtype.kind in "iub" and a.size <= 12:
                d += f" {a.tolist()}"
            parts.append(d)
        else:
            parts.append(repr(a))
    return " ".join(f"({', '.join(parts)}) {attrs!r}".split())


def _names_op(prim, exc):
    return any(f"{n}:" in str(exc) for n in OP_NAMES.get(prim.name, (prim.name,)))


def _check_rejection(prim, exc, where):
    tb = "".join(traceback.format_exception(exc)[-8:])
    assert isinstance(exc, ALLOWED), f"{where}: {prim.name} raised {type(exc).__name__}: {exc}\n{tb}"
    assert _names_op(prim, exc), f"{where}: the message of {type(exc).__name__} does not name {prim.name}: {exc}\n{tb}"


def _dense(x):
    return x.to_dense() if type(x) in (RowSparse, OuterSum, MatmulT) else x


def _eager(prim, args, attrs, g):
    """Apply eagerly; returns the outputs (arrays) or the exception."""
    grad = [isinstance(a, np.ndarray) and a.dtype.kind == "f" and k not in prim.nondiff_args and g.flag(0.7)
            for k, a in enumerate(args)]
    targs = [dn.tensor(a, requires_grad=r) if r else a for a, r in zip(args, grad)]
    try:
        out = bind(prim, *targs, **attrs)
    except Exception as exc:  # noqa: BLE001 - the type is what is checked
        _check_rejection(prim, exc, "eager")
        return exc
    outs = tuple(o.numpy() for o in out) if prim.multiple_results else (out.numpy(),)
    rule = check_shapes(prim, args, attrs)
    rule = rule if prim.multiple_results else (rule,)
    assert len(rule) == len(outs), f"{prim.name}: the rule gives {len(rule)} results, the forward {len(outs)}"
    for k, (a, o) in enumerate(zip(rule, outs)):
        o = np.asarray(o)
        assert tuple(a.shape) == o.shape and np.dtype(a.dtype) == o.dtype, (
            f"{prim.name}: result {k} is {o.shape} {o.dtype}, the shape rule says {a.shape} {a.dtype}")
    if prim.differentiable and any(grad):
        _vjps(prim, args, attrs, outs if prim.multiple_results else outs[0], grad, g)
    return outs


def _vjps(prim, args, attrs, out, grad, g):
    if prim.multiple_results:
        cot = tuple(g.arr(o.shape, o.dtype) if o.dtype.kind == "f" and g.flag(0.7) else None for o in out)
    else:
        cot = g.arr(np.shape(out), np.asarray(out).dtype)
    need = [k for k, r in enumerate(grad) if r]
    if prim.joint_vjp is not None:
        res = prim.joint_vjp(cot, tuple(args), out, **attrs)
        grads = {k: res[k] for k in need}
    else:
        grads = {k: prim.vjps[k](cot, tuple(args), out, **attrs) for k in need if prim.vjps[k] is not None}
    for k, gk in grads.items():
        if gk is None:
            continue
        gk = _dense(gk)
        assert np.shape(gk) == args[k].shape, (
            f"{prim.name}: gradient of input {k} has shape {np.shape(gk)}, the input {args[k].shape}")


def _static(prim, args, attrs, eager, g):
    """The same application in a static graph with unknown dimensions."""
    import dynnets as dn
    import dynnets.static as ds
    if not any(isinstance(a, np.ndarray) and a.dtype.kind != "c" for a in args):
        return                      # nothing to feed: no graph
    graph = ds.Graph()
    feed = {}
    try:
        with graph.as_default():
            sym = []
            for k, a in enumerate(args):
                if isinstance(a, np.ndarray) and a.dtype.kind != "c":
                    decl = tuple(None if g.flag(0.4) else d for d in a.shape)
                    ph = ds.placeholder(decl, a.dtype, name=f"in{k}")
                    feed[ph] = a
                    sym.append(ph)
                else:
                    sym.append(a)
            out = bind(prim, *sym, **attrs)
            out = out if prim.multiple_results else (out,)
            wrt = [ph for k, ph in enumerate(sym) if isinstance(ph, ds.Value) and ph.dtype.kind == "f"
                   and k not in prim.nondiff_args]
            grads = []
            if prim.differentiable and wrt and g.flag(0.5):
                loss = None
                for o in out:
                    if o.dtype.kind == "f":
                        term = dn.sum(o)
                        loss = term if loss is None else loss + term
                if loss is not None:
                    grads = [(ph, gr) for ph, gr in zip(wrt, ds.gradients(loss, wrt)) if gr is not None]
        with ds.Session(graph, jit_after=1) as sess:
            fetches = list(out) + [gr for _, gr in grads]
            res = sess.run(fetches, feed)
            res = sess.run(fetches, feed)         # the generated (tier-2) plan
    except Exception as exc:  # noqa: BLE001
        if isinstance(exc, ds.FeedError):
            raise AssertionError(f"static: a feed of the declared shape was refused: {exc}") from None
        _check_rejection(prim, exc, "static")
        if isinstance(eager, Exception):
            return
        # a rule that cannot decide with unknown dimensions may refuse at build time (split_rows)
        assert not feed or "must be known" in str(exc), f"static rejected what eager accepted: {exc}"
        return
    assert not isinstance(eager, Exception), f"static accepted what eager rejected ({eager!r})"
    for k, (r, e) in enumerate(zip(res, eager)):
        if prim.random:         # the second run draws anew: its results have the first draw's shape and dtype
            assert np.shape(r) == np.shape(e) and np.asarray(r).dtype == np.asarray(e).dtype, prim.name
            continue
        np.testing.assert_array_equal(np.asarray(r), np.asarray(e), err_msg=f"{prim.name}: static result {k}")
    for (ph, gr), r in zip(grads, res[len(out):]):
        r = np.asarray(r)
        assert r.shape == feed[ph].shape and r.dtype == ph.dtype == gr.dtype, (
            f"{prim.name}: static gradient of {ph.name} is {r.shape} {r.dtype} (declared {gr.dtype}), the "
            f"input {feed[ph].shape} {ph.dtype}")


class _Copy(dn.autograd.Function):
    """custom_function's example: any array through, the gradient back."""

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g


def _custom_function(g):
    (x,), _ = _unary(g)
    ctx = dn.autograd.function.FunctionCtx()
    ctx.needs_input_grad = (True,)
    return [x], {"fn": _Copy, "ctx": ctx, "spec": (1, (), (0,))}


STRATEGIES["custom_function"] = _custom_function


def _batchable_plan():
    w = dn.Parameter(np.linspace(-1, 1, 6).reshape(3, 2))

    @dn.batchable
    def cell(x, y):
        return dn.tanh(x @ w) * y, x[:, 1:]
    return cell.plan(np.zeros((1, 3)), np.zeros((1, 2))), w


_BATCHABLE = []


def _batchable_call(g):
    if not _BATCHABLE:
        _BATCHABLE.append(_batchable_plan())
    plan, w = _BATCHABLE[0]
    n = g.dim(0, 4)
    return g.spoil([g.arr((n, 3), np.float64), g.arr((n, 2), np.float64), w.numpy().copy()]), {"plan": plan}


STRATEGIES["batchable_call"] = _batchable_call


def _random_shuffle(g):      # i22-tf1-gaps
    dt = np.dtype(g.draw(st.sampled_from(FLOATS + OTHER))) if g.flag(0.3) else g.fdt()
    x = g.arr(tuple(g.dim(0, 3) for _ in range(g.dim(0, 3))), dt)
    seed = g.draw(st.sampled_from([(1, 2), (0, 0), (1, -2), 7]))
    return g.spoil([x]), {"seed": seed}


STRATEGIES["random_shuffle"] = _random_shuffle

# issue 25: layer norm, 1-D convolution and pooling
def _layer_norm(g):
    nd = g.dim(1, 3)
    shape = tuple(g.dim(0, 3) for _ in range(nd))
    k = g.draw(st.integers(1, nd + 1)) if g.flag(0.9) else g.draw(st.sampled_from([0, 1.0, True]))
    dt = g.fdt()
    tail = shape[len(shape) - k:] if is_intlike(k) and 1 <= k <= nd else shape[-1:]
    args = [g.arr(shape, dt)]
    if g.flag(0.6):
        args.append(g.arr(tail if g.flag(0.85) else g.shape_near(tail), dt))
        if g.flag(0.6):
            args.append(g.arr(tail, dt))
    return g.spoil(args, p=0.3), {"ndim": k, "eps": g.draw(st.sampled_from([1e-5, 0.0, 0.1, -1.0]))}


def is_intlike(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _conv1d(g):
    n, c, o, k = g.dim(0, 3), g.dim(0, 3), g.dim(0, 3), g.dim(0, 4)
    length = g.dim(0, 4) + g.dim(0, 4)
    dt = g.fdt()
    args = [g.arr((n, c, length), dt), g.arr((o, c if g.flag(0.85) else g.dim(0, 3), k), dt)]
    if g.flag(0.5):
        args.append(g.arr((o if g.flag(0.85) else g.dim(0, 4),), dt))
    pads = g.draw(st.sampled_from([(0, 0), (1, 1), (0, 2), (2, 1), (-1, 0), 1]))
    return g.spoil(args, p=0.3), {"stride": g.draw(st.sampled_from([1, 2, 3, 0])), "padding": pads,
                                  "dilation": g.draw(st.sampled_from([1, 2, 0]))}


def _pool1d(g):
    shape = (g.dim(0, 3), g.dim(0, 3), g.dim(0, 4) + g.dim(0, 4))
    if g.flag(0.1):
        shape = g.shape_near(shape)
    k = g.draw(st.sampled_from([1, 2, 3, 0]))
    return g.spoil([g.arr(shape, g.fdt())], p=0.2), {
        "kernel_size": k, "stride": g.draw(st.sampled_from([1, 2, 3, -1])),
        "padding": g.draw(st.sampled_from([(0, 0), (1, 1), (1, 0), (2, 2), 1])),
        "dilation": g.draw(st.sampled_from([1, 2])), "ceil_mode": g.draw(st.sampled_from([False, True, 1])),
        "mode": g.draw(st.sampled_from(["max", "avg", "avg_exclude_pad", "min"]))}


def _attention_probs(g):
    h = g.draw(st.sampled_from([1, 2, 3, 0]))
    lead = tuple(g.dim(0, 3) for _ in range(g.dim(0, 2)))
    e = g.dim(0, 3) * max(h, 1)
    dt = g.fdt()
    lq, lk = g.dim(0, 3), g.dim(0, 3)
    args = [g.arr(lead + (lq, e), dt), g.arr(lead + (lk, e if g.flag(0.9) else g.dim(0, 4)), dt)]
    if g.flag(0.4):
        args.append(np.where(g.arr((1, 1, lq, lk) if g.flag(0.8) else (lk,), np.bool_), -np.inf, 0.0).astype(dt))
    return g.spoil(args, p=0.3), {"num_heads": h, "scale": g.draw(st.sampled_from([0.5, 1, "a"]))}


def _conv2d(g):
    n, c, o = g.dim(0, 3), g.dim(0, 3), g.dim(0, 3)
    kh, kw = g.dim(0, 3), g.dim(1, 3)
    dt = g.fdt()
    args = [g.arr((n, c, g.dim(0, 4) + g.dim(0, 3), g.dim(1, 4) + 1), dt),
            g.arr((o, c if g.flag(0.85) else g.dim(0, 3), kh, kw), dt)]
    if g.flag(0.5):
        args.append(g.arr((o if g.flag(0.85) else g.dim(0, 4),), dt))
    pads = g.draw(st.sampled_from([((0, 0), (0, 0)), ((1, 1), (0, 2)), ((2, 0), (1, 1)), ((-1, 0), (0, 0)), (1, 1)]))
    return g.spoil(args, p=0.3), {"stride": g.draw(st.sampled_from([(1, 1), (2, 1), (1, 3), (0, 1), 1])),
                                  "padding": pads, "dilation": g.draw(st.sampled_from([(1, 1), (2, 1), (1, 0)]))}


def _max_pool2d(g):
    shape = (g.dim(0, 3), g.dim(0, 3), g.dim(0, 4) + g.dim(0, 3), g.dim(0, 4) + g.dim(0, 3))
    if g.flag(0.1):
        shape = g.shape_near(shape)
    return g.spoil([g.arr(shape, g.fdt())], p=0.2), {
        "kernel_size": g.draw(st.sampled_from([(1, 1), (2, 2), (3, 2), (0, 2)])),
        "stride": g.draw(st.sampled_from([(1, 1), (2, 2), (1, 3), (-1, 1)])),
        "padding": g.draw(st.sampled_from([((0, 0), (0, 0)), ((1, 1), (1, 0)), ((2, 2), (0, 0)), (1, 1)])),
        "dilation": g.draw(st.sampled_from([(1, 1), (2, 1)])), "ceil_mode": g.draw(st.sampled_from([False, True, 1]))}


def _rows_like(g):
    table = g.arr((g.dim(0, 4) + g.dim(0, 4),) + tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))), g.fdt())
    ref = g.arr(tuple(g.dim(0, 4) for _ in range(g.dim(0, 3))), g.draw(st.sampled_from(FLOATS + OTHER)))
    return g.spoil([table, ref], p=0.2), {"axis": g.draw(st.sampled_from([0, 1, -1, 2, 1.0]))}


def _attention_apply(g):
    h = g.dim(1, 3)
    lead = tuple(g.dim(0, 3) for _ in range(g.dim(0, 2)))
    lq, lk = g.dim(0, 3), g.dim(0, 3)
    dt = g.fdt()
    p = g.arr(lead + (h, lq, lk), dt)
    v = g.arr(lead + (lk if g.flag(0.9) else g.dim(0, 4), g.dim(0, 3) * h), dt)
    return g.spoil([p, v], p=0.3), {}


STRATEGIES.update({"layer_norm": _layer_norm, "conv1d": _conv1d, "pool1d": _pool1d,
                   "attention_probs": _attention_probs, "attention_apply": _attention_apply,
                   "rows_like": _rows_like, "conv2d": _conv2d, "max_pool2d": _max_pool2d})


def _ragged_attention(g):                      # i25-models
    lengths = [g.dim(0, 4) for _ in range(g.dim(0, 4))]
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    how = g.draw(st.sampled_from(["ok"] * 5 + ["short", "long", "start", "falling", "float", "2d"]))
    if how == "short" and len(off) > 1:
        off[-1] -= 1
    elif how == "long":
        off[-1] += 1
    elif how == "start":
        off[0] = 1
    elif how == "falling" and len(off) > 2:
        off[1] = off[-1] + 1
    elif how == "float":
        off = off.astype(np.float64)
    elif how == "2d":
        off = off[None]
    heads, D = g.dim(1, 3), g.dim(0, 3)
    dt = g.fdt()
    N = int(sum(lengths))
    args = [g.arr((N, heads * D), dt) for _ in range(3)] + [off]
    attrs = {"num_heads": heads}
    if g.flag(0.3):
        attrs["method"] = g.draw(st.sampled_from(["kernel", "grouped", "twin"]))
    return g.spoil(args, p=0.25, index_args=(3,)), attrs


STRATEGIES["ragged_attention"] = _ragged_attention


def _linear_act(g):                             # i25-fuse
    i, o = g.dim(0, 3), g.dim(0, 3)
    dt = g.fdt()
    x = g.arr(tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))) + (i if g.flag(0.9) else g.dim(0, 4),), dt)
    args = [x, g.arr((o, i), dt), g.arr((o,) if g.flag(0.9) else g.shape_near((o,)), dt)]
    return g.spoil(args, p=0.3), {"activation": g.draw(st.sampled_from(["relu", "gelu", "tanh"]))}


def _linear_split(g):                           # i25-fuse
    c = g.draw(st.sampled_from([1, 2, 3, 0]))
    i, o = g.dim(0, 3), g.dim(0, 3) * max(c, 1) + (0 if g.flag(0.9) else 1)
    dt = g.fdt()
    x = g.arr(tuple(g.dim(0, 3) for _ in range(g.dim(0, 2))) + (i,), dt)
    return g.spoil([x, g.arr((o, i), dt), g.arr((o,), dt)], p=0.3), {"chunks": c}


def _add_layer_norm(g):                         # i25-fuse
    shape = tuple(g.dim(0, 3) for _ in range(g.dim(1, 3)))
    dt = g.fdt()
    d = shape[-1:]
    args = [g.arr(shape, dt), g.arr(shape if g.flag(0.9) else g.shape_near(shape), dt),
            g.arr(d if g.flag(0.9) else g.shape_near(d), dt), g.arr(d, dt)]
    return g.spoil(args, p=0.3), {"eps": g.draw(st.sampled_from([1e-5, 0.0, 0.1, -1.0]))}


STRATEGIES.update({"linear_act": _linear_act, "linear_split": _linear_split, "add_layer_norm": _add_layer_norm})
# a custom Function's Python forward runs in eager mode only (its rule refuses symbolic inputs)
EAGER_ONLY = {"custom_function"}


STATS = {name: [0, 0] for name in PRIMITIVES}      # accepted, rejected examples


def _example(prim, data):
    g = Gen(data)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        args, attrs = STRATEGIES[prim.name](g)
        desc = _describe(args, attrs)
        note(f"input: {desc}")
        sys.stderr.write(f"RUN {prim.name} {desc}\n")
        sys.stderr.flush()
        eager = _eager(prim, args, attrs, g)
        STATS[prim.name][isinstance(eager, Exception)] += 1
        if g.flag(0.3) and prim.name not in EAGER_ONLY:
            _static(prim, args, attrs, eager, g)


def _kernel_signatures():
    """Signatures Numba compiled (or loaded) that break the kernels' input convention."""
    from numba import types

    from dynnets.autograd import kernels, kernels_tree
    bad = []
    for mod in (kernels, kernels_tree):
        for name in getattr(mod, "__all__", dir(mod)):
            fn = getattr(mod, name, None)
            for sig in getattr(fn, "signatures", ()):
                floats = set()
                for t in sig:
                    if isinstance(t, types.Array):
                        if t.layout != "C" or str(t.dtype) not in ("float32", "float64", "int64"):
                            bad.append(f"{mod.__name__}.{name}{sig}")
                        if str(t.dtype).startswith("float"):
                            floats.add(str(t.dtype))
                if len(floats) > 1:
                    bad.append(f"{mod.__name__}.{name}{sig} (mixed float dtypes)")
    return bad


def child(names, examples):
    settings.load_profile("dynnets-safety")
    failures = []
    t0 = time.perf_counter()
    for name in names:
        prim = PRIMITIVES[name]

        @settings(max_examples=examples)
        @given(st.data())
        def run(data):
            _example(prim, data)
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - collected and reported
            for e in getattr(exc, "exceptions", [exc]):
                notes = "\n".join(n for n in getattr(e, "__notes__", []) if not n.startswith("Draw "))
                tb = "".join(traceback.format_tb(e.__traceback__)[-4:])
                failures.append(f"{name}: {type(e).__name__}: {e}\n{notes}\n{tb}")
    bad = _kernel_signatures()
    if bad:
        failures.append("kernels called outside their convention: " + "; ".join(sorted(set(bad))))
    sys.stderr.write(f"DONE {len(names)} primitives x {examples} examples in {time.perf_counter() - t0:.1f} s\n")
    sys.stderr.write("accepted/rejected: " + ", ".join(f"{n} {STATS[n][0]}/{STATS[n][1]}" for n in names) + "\n")
    for f in failures:
        print(f"FAIL {f}")
    return 1 if failures else 0


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------

def test_every_primitive_has_a_strategy():
    missing = sorted(set(PRIMITIVES) - set(STRATEGIES))
    stale = sorted(set(STRATEGIES) - set(PRIMITIVES))
    assert not missing, f"primitives without a safety strategy in tests/autograd/test_safety.py: {missing}"
    assert not stale, f"STRATEGIES names primitives that are not in the table: {stale}"


def _not_runs(text):
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("RUN "))[-3000:]


def test_no_input_crashes_or_escapes_the_checks():
    """The whole table, in a child process (a segfault is a failure here)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--examples", str(EXAMPLES)]
    # the child imports the dynnets this process imported, whatever is installed
    import dynnets
    root = os.path.dirname(os.path.dirname(os.path.abspath(dynnets.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    runs = [ln for ln in proc.stderr.splitlines() if ln.startswith("RUN ")]
    if proc.returncode < 0:
        raise AssertionError(f"the child died of signal {-proc.returncode} on the input\n"
                             f"{runs[-1] if runs else '?'}\n{_not_runs(proc.stderr)}")
    assert proc.returncode == 0, f"{proc.stdout[-8000:]}\n{_not_runs(proc.stderr)}"
    assert "DONE" in proc.stderr and len(runs) >= len(PRIMITIVES) * min(EXAMPLES, 10), proc.stderr[-2000:]


if __name__ == "__main__" and "--child" in sys.argv:
    argv = sys.argv[sys.argv.index("--child") + 1:]
    n = EXAMPLES
    if "--examples" in argv:
        i = argv.index("--examples")
        n = int(argv[i + 1])
        del argv[i:i + 2]
    sys.exit(child(argv or sorted(PRIMITIVES), n))

