"""Table-driven checks of every primitive in ``PRIMITIVES``.

``SAMPLES`` maps each primitive's name to a generator of sample cases; a test
asserts that its keys equal the table's, so a new primitive cannot land
without samples. On every sample, in float64:

* the VJPs agree with central finite differences (``gradcheck``);
* each VJP returns a gradient of its input's shape and dtype (eager
  accumulation would broadcast a wrong shape away, so it is checked directly);
* the shape rule predicts the forward output's shape and dtype, also for
  float32 inputs and with unknown (``None``) leading dimensions, as the static
  graph uses it.

``BAD`` gives inputs each shape rule must reject with a ``ShapeError`` that
names the op.
"""
from __future__ import annotations

import numpy as np

import dynnets as dn
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynnets.autograd import ops
from dynnets.autograd.engine import bind
from dynnets.autograd.gradcheck import gradcheck
from dynnets.autograd.primitives import PRIMITIVES, Aval, RowSparse, ShapeError, check_shapes, run_rule
from dynnets.autograd.creation import tensor
from dynnets.autograd.tensor import Tensor


class Case:
    """One sample application of a primitive.

    ``args`` are arrays or Python scalars; float arrays whose position is not
    in ``const`` (nor in the primitive's ``nondiff_args``) are differentiated.
    ``outputs`` selects the results that carry gradients for
    multiple-result primitives (the rest are saved residuals such as gate
    activations, which the VJPs by design ignore).
    """

    def __init__(self, id, *args, const=(), outputs=None, tol=None, **attrs):
        self.id = id
        self.args = args
        self.attrs = attrs
        self.const = set(const)
        self.outputs = outputs
        self.tol = tol or {}

    def diff_positions(self, prim):
        if not prim.differentiable:
            return []
        return [i for i, a in enumerate(self.args)
                if i not in self.const and i not in prim.nondiff_args
                and isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def _r(rng):
    """Normal samples in float64."""
    return lambda *shape: np.asarray(rng.standard_normal(shape))


def _pos(rng):
    """Positive samples, away from 0 (log, sqrt, pow bases, divisors)."""
    return lambda *shape: np.asarray(rng.uniform(0.5, 2.0, shape))


def _away(rng, gap=0.1):
    """Samples with |x| >= gap, for kinks at 0 (abs, relu)."""
    def draw(*shape):
        x = rng.uniform(gap, 2.0, shape)
        return np.asarray(x * rng.choice([-1.0, 1.0], size=shape))
    return draw


def _binary(name, pos_y=False):
    def gen(rng):
        r = _r(rng)
        y = _pos(rng) if pos_y else r
        return [
            Case("same", r(3, 4), y(3, 4)),
            Case("row-broadcast", r(3, 4), y(4)),
            Case("both-broadcast", r(2, 1, 3), y(4, 1)),
            Case("scalar-array", r(), y(2, 3)),
            Case("keepdim-1", r(3, 1), y(1, 5)),
            Case("python-scalar", r(2, 3), 1.5 if pos_y else -0.7, const=(1,)),
        ]
    return gen


def _unary(draw_kind):
    def gen(rng):
        draw = {"normal": _r(rng), "pos": _pos(rng), "away": _away(rng)}[draw_kind]
        return [Case("2d", draw(3, 4)), Case("0d", draw()), Case("3d", draw(2, 1, 3))]
    return gen


def _pow(rng):
    r, p = _r(rng), _pos(rng)
    return [
        Case("tensor-exponent", p(3, 4), r(3, 4)),
        Case("tensor-exponent-broadcast", p(3, 4), r(4)),
        Case("scalar-base-tensor-exponent", np.asarray(1.7), r(2, 3)),
        Case("const-int-exponent-negative-base", r(3, 4), 3.0, const=(1,)),
        Case("const-fractional-exponent", p(5), 0.5, const=(1,)),
    ]


def _maxmin(rng):
    # no ties here: ties are a documented convention (test_max_ties_split_gradient)
    r = _r(rng)
    return [Case("same", r(3, 4), r(3, 4)), Case("broadcast", r(2, 3), r(3)),
            Case("python-scalar", r(4), 0.1, const=(1,))]


def _comparison(rng):
    # ties included: equal and the non-strict comparisons must see them
    r = _r(rng)
    x = r(3, 4)
    y = x.copy()
    y[0] = r(4)
    return [Case("same-with-ties", x, y), Case("row-broadcast", x, x[1]), Case("python-scalar", x, 0.0),
            Case("int", np.array([1, 2, 3]), np.array([3, 2, 1]))]


def _argmax(rng):
    r = _r(rng)
    x = r(3, 4)
    return [Case("all", x), Case("axis1", x, axis=1), Case("axis-neg", r(2, 3, 4), axis=-2)]


def _clip(rng):
    x = np.array([[-2.0, -0.5, 0.3], [0.9, 1.7, -1.2]])
    return [Case("both", x, lo=-1.0, hi=1.0), Case("lo-only", x, lo=0.0), Case("hi-only", x, hi=0.5)]


def _where(rng):
    r = _r(rng)
    c = rng.random((3, 4)) > 0.5
    return [Case("same", c, r(3, 4), r(3, 4)), Case("broadcast", c, r(4), r(3, 1)),
            Case("scalar-branch", c[0], r(4), np.asarray(0.5))]


def _astype(rng):
    r = _r(rng)
    return [Case("f64->f64", r(3, 2), dtype=np.dtype(np.float64)),
            Case("f64->f32", r(3, 2), dtype=np.dtype(np.float32), tol=dict(eps=1e-3, atol=1e-3, rtol=1e-3))]


def _reduce(name):
    def gen(rng):
        r = _r(rng)
        x = r(2, 3, 4)
        return [Case("all", x), Case("axis0", x, axis=0), Case("axis-neg", x, axis=-1),
                Case("axes", x, axis=(0, 2)), Case("keepdims", x, axis=1, keepdims=True),
                Case("all-keepdims", x, axis=None, keepdims=True), Case("1d", r(5), axis=0)]
    return gen


def _reshape(rng):
    r = _r(rng)
    return [Case("flat", r(2, 3), shape=(6,)), Case("minus-one", r(2, 3, 2), shape=(3, -1)),
            Case("to-scalar", r(1, 1), shape=())]


def _transpose(rng):
    r = _r(rng)
    return [Case("reverse", r(2, 3)), Case("perm", r(2, 3, 4), axes=(1, 2, 0)),
            Case("neg-axes", r(2, 3, 4), axes=(-1, 0, 1))]


def _broadcast_to(rng):
    r = _r(rng)
    return [Case("lead", r(3), shape=(2, 3)), Case("inner", r(3, 1), shape=(3, 4)),
            Case("scalar", r(), shape=(2, 2))]


def _getitem(rng):
    r = _r(rng)
    x = r(5, 3)
    return [
        Case("int", x, index=2),
        Case("slice", x, index=(slice(1, 4), slice(None, None, 2))),
        Case("newaxis-ellipsis", r(2, 3, 4), index=(Ellipsis, None, 1)),
        Case("negative-int", x, index=-1),
        Case("int-array-repeats", x, index=np.array([0, 2, 2, 4, 0])),
        Case("2d-int-array", x, index=np.array([[1, 1], [3, 0]])),
        Case("pair-of-arrays-repeats", x, index=(np.array([0, 0, 4]), np.array([1, 1, 2]))),
        Case("bool-mask", x, index=np.array([True, False, True, True, False])),
    ]


def _setitem(rng):
    r = _r(rng)
    x = r(5, 3)
    # no repeated advanced indices: the last write wins there, which no
    # derivative describes (the VJP gives each written value its position's
    # gradient, as torch's index_put)
    return [
        Case("int-row", x, r(3), index=2),
        Case("slice-broadcast", x, r(1), index=(slice(1, 4), slice(None, None, 2))),
        Case("element", x, r(), index=(4, -1)),
        Case("ellipsis", x, r(3), index=Ellipsis),
        Case("leading-one", x, r(1, 3), index=0),
        Case("int-array", x, r(2, 3), index=np.array([3, 0])),
        Case("bool-mask", x, r(3), index=np.array([True, False, True, True, False])),
        Case("newaxis", r(2, 3), r(1, 3), index=(1, None)),
    ]


def _take(rng):
    r = _r(rng)
    return [Case("repeats", r(5, 3), np.array([1, 1, 4, 0, 1])),
            Case("2d-indices", r(4, 2), np.array([[0, 3], [3, 3]])),
            Case("1d-x", r(6), np.array([5, 0, 5]))]


def _concat(rng):
    r = _r(rng)
    return [Case("axis0", r(2, 3), r(1, 3), r(4, 3)), Case("axis1", r(2, 1), r(2, 3), axis=1),
            Case("axis-neg", r(2, 2, 1), r(2, 2, 2), axis=-1), Case("single", r(3))]


def _stack(rng):
    r = _r(rng)
    return [Case("axis0", r(2, 3), r(2, 3), r(2, 3)), Case("axis1", r(2, 3), r(2, 3), axis=1),
            Case("axis-neg", r(3), r(3), axis=-1), Case("scalars", r(), r())]


def _matmul(rng):
    r = _r(rng)
    return [
        Case("2d@2d", r(3, 4), r(4, 2)),
        Case("1d@2d", r(4), r(4, 2)),
        Case("2d@1d", r(3, 4), r(4)),
        Case("1d@1d", r(4), r(4)),
        Case("batched-3d@2d", r(2, 3, 4), r(4, 2)),
        Case("batched-3d@3d", r(2, 3, 4), r(2, 4, 5)),
        Case("broadcast-batch", r(2, 1, 3, 4), r(5, 4, 2)),
        Case("1d@3d", r(4), r(2, 4, 3)),
        Case("3d@1d", r(2, 3, 4), r(4)),
        Case("row-vector", r(1, 5), r(5, 5)),
    ]


def _linear(rng):
    r = _r(rng)
    return [Case("2d", r(3, 4), r(2, 4), r(2)), Case("3d-x", r(2, 3, 4), r(5, 4), r(5)),
            Case("1d-x", r(4), r(3, 4), r(3)), Case("scalar-bias", r(3, 4), r(2, 4), r())]


def _softmaxes(rng):
    r = _r(rng)
    return [Case("rows", r(3, 5)), Case("axis0", r(3, 5), axis=0), Case("3d", r(2, 3, 4), axis=1),
            Case("1d", r(4)), Case("non-contiguous", r(5, 3).T)]


def _xent(rng):
    r = _r(rng)
    n, c = 5, 4
    t = rng.integers(0, c, n)
    t[1] = t[0]                                     # a repeated class
    mask = np.array([1.0, 0.0, 1.0, 0.5, 1.0])
    out = []
    for red in ("mean", "sum", "none"):
        out.append(Case(f"{red}", r(n, c), t, reduction=red, outputs=(0,)))
        out.append(Case(f"{red}-mask", r(n, c), t, mask, reduction=red, outputs=(0,)))
    # every row masked: the sum is 0 (the mean is nan, torch's 0/0: test_cross_entropy_all_masked_mean_is_nan)
    out.append(Case("sum-all-masked", r(2, 3), np.array([0, 2]), np.zeros(2), reduction="sum", outputs=(0,)))
    return out


def _sigmoid_xent(rng):
    r = _r(rng)

    def unit(*shape):
        return np.asarray(rng.uniform(0.05, 0.95, shape))
    return [Case("plain", 3 * r(4, 3), unit(4, 3)),
            Case("pos_weight", 3 * r(4, 3), unit(4, 3), np.asarray(rng.uniform(0.5, 2.0, 3))),
            Case("0d", np.asarray(1.5), np.asarray(0.3)),
            Case("large", np.array([-40.0, -3.0, 0.5, 35.0]), unit(4), tol=dict(atol=1e-9))]


def _bce(rng):
    def unit(*shape):
        return np.asarray(rng.uniform(0.1, 0.9, shape))
    return [Case("2d", unit(4, 3), unit(4, 3)), Case("1d", unit(5), unit(5))]


def _embedding(rng):
    r = _r(rng)
    return [Case("repeats", r(6, 3), np.array([1, 4, 1, 1, 0])),
            Case("2d-ids", r(5, 2), np.array([[0, 4], [4, 4], [2, 0]])),
            Case("int32-ids", r(4, 3), np.array([3, 3, 1], dtype=np.int32))]


def _lstm(rng):
    r = _r(rng)
    B, I, H = 3, 4, 2
    k = 0.7
    return [Case("b3", r(B, I), r(B, H), r(B, H), k * r(4 * H, I), k * r(4 * H, H), r(4 * H), r(4 * H),
                 outputs=(0, 1)),
            Case("b1", r(1, I), r(1, H), r(1, H), k * r(4 * H, I), k * r(4 * H, H), r(4 * H), r(4 * H),
                 outputs=(0, 1))]


def _gru(rng):
    r = _r(rng)
    B, I, H = 3, 4, 2
    k = 0.7
    return [Case("b3", r(B, I), r(B, H), k * r(3 * H, I), k * r(3 * H, H), r(3 * H), r(3 * H), outputs=(0,)),
            Case("b1", r(1, I), r(1, H), k * r(3 * H, I), k * r(3 * H, H), r(3 * H), r(3 * H), outputs=(0,))]


def _tree(rng):
    r = _r(rng)
    N, H = 3, 2
    return [Case("n3", r(N, H), r(N, H), r(N, H), r(N, H), 0.7 * r(2 * H, 5 * H), r(5 * H), outputs=(0, 1)),
            Case("n1", r(1, H), r(1, H), r(1, H), r(1, H), 0.7 * r(2 * H, 5 * H), r(5 * H), outputs=(0, 1))]


def _leaf(rng):
    r = _r(rng)
    N, E, H = 3, 4, 2
    return [Case("n3", r(N, E), 0.7 * r(E, 3 * H), r(3 * H), outputs=(0, 1)),
            Case("n1", r(1, E), 0.7 * r(E, 3 * H), r(3 * H), outputs=(0, 1))]


# a forest of two binary trees, ((a b) c) and (d e): leaves 0-4, level 1 = {5: (0, 1), 6: (3, 4)}, level 2 = {7: (5, 2)}
_LEFT, _RIGHT, _OFFSETS = np.array([0, 3, 5]), np.array([1, 4, 2]), np.array([0, 5, 7, 8])
# n-ary: node 5 has children (0, 1, 2), node 6 the single child 3, node 7 children (5, 4, 6)
_PTR, _IDX = np.array([0, 3, 4, 7]), np.array([0, 1, 2, 3, 5, 4, 6])
_BATCH_SIZES = np.array([3, 2, 2, 1])     # packed lengths 4, 3, 1
_NONE = np.zeros(0, dtype=np.int64)


def _tree_levels(rng):
    r = _r(rng)
    H = 2
    return [Case("forest", r(5, H), r(5, H), 0.7 * r(2 * H, 5 * H), r(5 * H), _LEFT, _RIGHT, _OFFSETS,
                 outputs=(0, 1)),
            Case("leaves-only", r(3, H), r(3, H), 0.7 * r(2 * H, 5 * H), r(5 * H), _NONE, _NONE, np.array([0, 3]),
                 outputs=(0, 1))]


def _tree_levels_packed(rng):
    r = _r(rng)
    H = 2
    # 3 distinct leaf states read by the 5 leaves (rows repeat, as words do)
    return [Case("forest", r(3, 2 * H), np.array([2, 0, 2, 1, 0]), 0.7 * r(2 * H, 5 * H), r(5 * H), _LEFT, _RIGHT,
                 _OFFSETS, outputs=(0, 1)),
            Case("leaves-only", r(3, 2 * H), np.array([1, 1, 0]), 0.7 * r(2 * H, 5 * H), r(5 * H), _NONE, _NONE,
                 np.array([0, 3]), outputs=(0, 1))]


def _tree_rnn_levels(rng):
    r = _r(rng)
    H = 3
    return [Case("forest", r(5, H), 0.7 * r(2 * H, H), r(H), _LEFT, _RIGHT, _OFFSETS, outputs=(0,))]


def _childsum_levels(rng):
    r = _r(rng)
    H = 2
    return [Case("nary", r(5, H), r(5, H), 0.7 * r(H, 3 * H), 0.7 * r(H, H), r(3 * H), r(H), _PTR, _IDX, _OFFSETS,
                 outputs=(0, 1))]


def _seqs(gates, outputs):
    def gen(rng):
        r = _r(rng)
        H = 2
        return [Case("packed", r(8, gates * H), 0.7 * r(gates * H, H), r(gates * H), _BATCH_SIZES, outputs=outputs),
                Case("one-step", r(2, gates * H), 0.7 * r(gates * H, H), r(gates * H), np.array([2]),
                     outputs=outputs)]
    return gen


def _tree_node(rng):
    r = _r(rng)
    H = 2
    return [Case("n3", r(3, 2 * H), r(3, 2 * H), 0.7 * r(2 * H, 5 * H), r(5 * H), outputs=(0,)),
            Case("n1", r(1, 2 * H), r(1, 2 * H), 0.7 * r(2 * H, 5 * H), r(5 * H), outputs=(0,))]


def _leaf_node(rng):
    r = _r(rng)
    return [Case("n3", r(3, 4), 0.7 * r(4, 6), r(6), outputs=(0,)), Case("n1", r(1, 4), 0.7 * r(4, 6), r(6), outputs=(0,))]


def _split_rows(rng):
    r = _r(rng)
    return [Case("rows", r(3, 4)), Case("3d", r(2, 1, 3))]


def _segment_sum(rng):
    r = _r(rng)
    return [Case("segments", r(5, 3), np.array([0, 2, 3])), Case("1d", r(4), np.array([0, 1])),
            Case("one", r(2, 2), np.array([0]))]


def _gather_rows(rng):
    r = _r(rng)
    return [Case("two-sources", np.array([1, 0, 1, 0, 0]), np.array([2, 0, 0, 0, 1]), r(2, 3), r(3, 3)),
            Case("repeats-3d", np.array([0, 0, 0]), np.array([1, 1, 0]), r(2, 2, 2))]


def _arena_gather(rng):
    r = _r(rng)
    arena = r(7, 3)
    a, b = arena[0:2], arena[2:5]
    return [Case("arena-views", arena, np.array([0, 2]), np.array([1, 0, 1, 0, 0]), np.array([2, 0, 0, 0, 1]),
                 a, b, const=(0,)),
            Case("not-views", r(5, 3), np.array([0, 2]), np.array([1, 0, 1]), np.array([2, 0, 1]), r(2, 3), r(3, 3),
                 const=(0,))]


def _random(rng):
    f64, f32 = np.dtype(np.float64), np.dtype(np.float32)
    return [Case("normal", dist="normal", shape=(3, 2), dtype=f64, a=0.5, b=2.0, seed=(1, 2)),
            Case("truncated", dist="truncated_normal", shape=(40,), dtype=f32, a=0.0, b=1.0, seed=(0, 3)),
            Case("uniform", dist="uniform", shape=(2, 3), dtype=f64, a=-1.0, b=1.0, seed=(5, 5)),
            Case("uniform-int", dist="uniform", shape=(5,), dtype=np.dtype(np.int64), a=0, b=7, seed=(1, 1)),
            Case("empty", dist="normal", shape=(0, 2), dtype=f64, a=0.0, b=1.0, seed=(1, 1))]


def _dropout_mask(rng):
    r = _r(rng)
    return [Case("rate0.3", r(4, 3), rate=0.3, seed=(1, 2)), Case("rate0", r(5), rate=0.0, seed=(0, 0))]


def _gelu(rng):
    r = _r(rng)
    return [Case("exact", r(3, 4)), Case("tanh", r(2, 3), approximate="tanh"), Case("0d", r()),
            Case("wide", 4 * r(7))]


def _leaky_relu(rng):
    a = _away(rng)
    return [Case("default", a(3, 4)), Case("slope", a(5), negative_slope=0.2), Case("0d", a(), negative_slope=-0.5)]


def _gather(rng):
    r = _r(rng)
    return [Case("dim1", r(3, 4), np.array([[0, 3, 3], [2, 2, 1], [1, 0, 0]]), dim=1),
            Case("dim0-smaller", r(3, 4), np.array([[2, 0], [2, 2]]), dim=0),
            Case("neg-dim-3d", r(2, 3, 2), np.array([[[1], [0], [1]]]), dim=-1)]


def _split(rng):
    r = _r(rng)
    return [Case("axis0", r(5, 2), sizes=(2, 3), axis=0), Case("axis1-empty-part", r(2, 4), sizes=(1, 0, 3), axis=1),
            Case("one", r(3), sizes=(3,), axis=-1)]


def _pad(rng):
    r = _r(rng)
    return [Case("constant", r(2, 3), pads=((1, 0), (2, 1)), mode="constant", value=0.5),
            Case("crop", r(3, 4), pads=((-1, 1), (0, -2)), mode="constant", value=0.0),
            Case("reflect", r(2, 4), pads=((0, 0), (2, 3)), mode="reflect", value=0.0),
            Case("replicate", r(3, 2), pads=((2, 1), (1, 1)), mode="replicate", value=0.0),
            Case("circular", r(2, 3), pads=((0, 0), (-1, 2)), mode="circular", value=0.0),
            Case("symmetric", r(3, 3), pads=((3, 1), (0, 2)), mode="symmetric", value=0.0)]


def _norm(rng):
    r = _away(rng)
    return [Case("2-all", r(3, 4)), Case("2-axis", r(3, 4), ord=2.0, axis=(1,)),
            Case("1-keep", r(3, 4), ord=1.0, axis=(0,), keepdims=True), Case("3", r(2, 3), ord=3.0, axis=(0, 1)),
            Case("half", r(4), ord=0.5), Case("1.5", r(2, 2), ord=1.5, axis=(1,)),
            Case("inf", r(3, 4), ord=np.inf, axis=(1,)), Case("-inf", r(5), ord=-np.inf),
            Case("0", r(3, 2), ord=0.0, axis=(0,))]


def _einsum(rng):
    r = _r(rng)
    return [Case("matmul", r(3, 4), r(4, 2), equation="ij,jk->ik"),
            Case("batch", r(2, 3, 4), r(2, 4, 2), equation="bij,bjk->bik"),
            Case("trace", r(3, 3), equation="ii->"), Case("diag-times", r(3, 3), r(3), equation="ii,i->i"),
            Case("own-sum", r(3, 4), r(2), equation="ij,k->ik"), Case("outer-three", r(2), r(3), r(2),
                                                                     equation="i,j,k->ijk")]


SAMPLES = {
    "gelu": _gelu, "leaky_relu": _leaky_relu, "gather": _gather, "split": _split, "pad": _pad, "norm": _norm,
    "einsum": _einsum,
    "segment_sum": _segment_sum, "gather_rows": _gather_rows, "arena_gather": _arena_gather,
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"), "div": _binary("div", pos_y=True),
    "pow": _pow, "maximum": _maxmin, "minimum": _maxmin,
    "neg": _unary("normal"), "exp": _unary("normal"), "log": _unary("pos"), "tanh": _unary("normal"),
    "sigmoid": _unary("normal"), "relu": _unary("away"), "sqrt": _unary("pos"), "abs": _unary("away"),
    "clip": _clip, "where": _where, "astype": _astype,
    "sum": _reduce("sum"), "mean": _reduce("mean"), "max": _reduce("max"),
    "reshape": _reshape, "transpose": _transpose, "broadcast_to": _broadcast_to,
    "getitem": _getitem, "setitem": _setitem, "take": _take, "concat": _concat, "stack": _stack,
    "matmul": _matmul, "linear": _linear, "softmax": _softmaxes, "log_softmax": _softmaxes,
    "softmax_cross_entropy": _xent, "embedding": _embedding, "sigmoid_cross_entropy": _sigmoid_xent,
    "binary_cross_entropy": _bce,
    "lstm_cell": _lstm, "gru_cell": _gru, "tree_lstm_cell": _tree, "tree_lstm_leaf": _leaf,
    "tree_lstm_levels": _tree_levels, "tree_lstm_levels_packed": _tree_levels_packed,
    "tree_rnn_levels": _tree_rnn_levels,
    "childsum_levels": _childsum_levels, "lstm_seq": _seqs(4, (0, 1)), "gru_seq": _seqs(3, (0,)),
    "rnn_seq": _seqs(1, None), "split_rows": _split_rows,
    "tree_lstm_node": _tree_node, "tree_lstm_leaf_node": _leaf_node,
    "random": _random, "dropout_mask": _dropout_mask, "copy": _unary("normal"),
    "less": _comparison, "less_equal": _comparison, "greater": _comparison, "greater_equal": _comparison,
    "equal": _comparison, "not_equal": _comparison, "argmax": _argmax,
    "sin": _unary("normal"), "cos": _unary("normal"), "sign": _unary("normal"),
}


# the selection and layout primitives (primitives/select.py)
def _gather_nd(rng):
    r = _r(rng)
    return [Case("pairs-repeats", r(3, 4, 2), np.array([[0, 1], [2, 3], [0, 1]])),
            Case("depth1-rows", r(4, 3), np.array([[3], [0], [3]])),
            Case("full-depth-2d-batch", r(2, 3), np.array([[[0, 2], [1, 1]], [[1, 0], [0, 0]]]))]


def _boolean_mask(rng):
    r = _r(rng)
    return [Case("rows", r(4, 3), np.array([True, False, True, True])),
            Case("2d-mask", r(2, 3, 2), np.array([[True, False, True], [False, False, True]])),
            Case("axis1", r(2, 3, 2), np.array([False, True, True]), axis=1)]


def _argwhere(rng):
    return [Case("2d", rng.random((3, 4)) > 0.5), Case("1d", np.array([False, True, True]))]


def _top_k(rng):
    # distinct values (a tie moves the kink of the gradient onto the sample)
    return [Case("rows", rng.permutation(12).reshape(3, 4) + rng.uniform(0, 0.5, (3, 4)), k=2, outputs=(0,)),
            Case("1d-all", rng.permutation(5) + 0.25, k=5, outputs=(0,)),
            Case("k0", _r(rng)(2, 3), k=0, outputs=(0,))]


def _tile(rng):
    r = _r(rng)
    return [Case("2d", r(2, 3), multiples=(2, 3)), Case("keep-rows", r(3, 2), multiples=(1, 2)),
            Case("0d", r(), multiples=())]


def _ensure_shape(rng):
    r = _r(rng)
    return [Case("2d-partial", r(2, 3), shape=(None, 3)), Case("0d", r(), shape=()), Case("exact", r(4,), shape=(4,))]


SAMPLES.update({"gather_nd": _gather_nd, "boolean_mask": _boolean_mask, "argwhere": _argwhere, "top_k": _top_k,
                "tile": _tile, "stop_gradient": _unary("normal"), "ensure_shape": _ensure_shape})


class _ScaledCube(dn.autograd.Function):
    """A custom Function with two outputs and a constant argument: the
    custom_function primitive's sample (its backward is the hand-written one
    the gradient check checks)."""

    @staticmethod
    def forward(ctx, x, y, alpha):
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha
        return x ** 3 * y * alpha, x + y

    @staticmethod
    def backward(ctx, g0, g1):
        x, y = ctx.saved_tensors
        return 3 * x ** 2 * y * ctx.alpha * g0 + g1, (x ** 3 * ctx.alpha * g0 + g1).sum(0), None


def _custom_function(rng):
    r = _r(rng)
    ctx = dn.autograd.function.FunctionCtx()
    ctx.needs_input_grad = (True, True, False)
    return [Case("two-outputs", r(3, 2), r(2), fn=_ScaledCube, ctx=ctx, spec=(3, ((2, 0.5),), (0, 1)))]


SAMPLES["custom_function"] = _custom_function


def _batchable_call(rng):
    """A plain-op cell decorated with dn.batchable: its per-signature plan
    applied to the stacked rows of three instances and a weight."""
    r = _r(rng)
    w = dn.Parameter(r(3, 4))

    @dn.batchable
    def cell(x, y):
        z = x @ w
        return dn.tanh(z) * y + dn.sigmoid(z[:, :2]).sum(1, keepdim=True), x * 2.0

    plan = cell.plan(r(1, 3), r(1, 4))
    return [Case("cell", r(3, 3), r(3, 4), r(3, 4), plan=plan)]


SAMPLES["batchable_call"] = _batchable_call
# a plan is traced for one dtype (its signature): the float32 conversion of the
# float64 sample is another signature (float32 plans: tests/autograd/test_batchable.py)
ONE_DTYPE = {"batchable_call"}
# runs its Python forward on concrete inputs only: no rule for unknown dimensions, no static graph
EAGER_ONLY = {"custom_function"}


# torch's rounding, remainders, sort and cumsum (issue 22): piecewise functions
# sampled away from their jumps and kinks, sorts of distinct values
def _fractional_quotients(rng, shape_x, shape_y):
    """``(x, y)`` with ``x / y`` at least 0.2 away from every integer (``y``
    broadcasts against ``x``)."""
    y = rng.uniform(0.5, 2.0, shape_y) * rng.choice([-1.0, 1.0], size=shape_y)
    q = rng.integers(-3, 4, shape_x) + rng.uniform(0.2, 0.8, shape_x)
    return np.asarray(q * y), np.asarray(y)


def _rounded_binary(**attrs):
    def gen(rng):
        a, b = _fractional_quotients(rng, (3, 4), (3, 4))
        c, d = _fractional_quotients(rng, (2, 3), (3,))
        return [Case("same", a, b, **attrs), Case("y-broadcast", c, d, **attrs),
                Case("python-scalar", np.array([[0.3, 2.9, -1.2], [4.1, -3.3, 0.6]]), 1.5, const=(1,), **attrs),
                Case("0d", np.asarray(2.7), np.asarray(-1.1), **attrs)]
    return gen


def _round(rng):
    base = rng.integers(-5, 6, (3, 4)) + rng.uniform(0.1, 0.4, (3, 4)) * rng.choice([-1.0, 1.0], (3, 4))
    return [Case("2d", base), Case("0d", np.asarray(-2.3)), Case("decimals", base / 10 + 0.0012, decimals=1),
            Case("negative-decimals", base * 10, decimals=-1)]


def _cumsum(rng):
    r = _r(rng)
    return [Case("axis0", r(3, 4), axis=0), Case("axis1", r(3, 4), axis=1), Case("neg-3d", r(2, 3, 2), axis=-2),
            Case("0d", r(), axis=0), Case("1d", r(5), axis=-1)]


def _sort(rng):
    def distinct(*shape):
        return rng.permutation(int(np.prod(shape))).reshape(shape) + rng.uniform(0, 0.5, shape)
    return [Case("rows", distinct(3, 4), outputs=(0,)), Case("axis0-desc", distinct(3, 4), axis=0, descending=True,
                                                               outputs=(0,)),
            Case("1d-stable", distinct(5), stable=True, outputs=(0,)), Case("0d", np.asarray(1.5), outputs=(0,)),
            Case("3d-mid", distinct(2, 3, 2), axis=1, descending=True, outputs=(0,))]


SAMPLES.update({"round": _round, "remainder": _rounded_binary(), "fmod": _rounded_binary(),
                "div_rounded": _rounded_binary(), "cumsum": _cumsum, "sort": _sort})


# log1p, expm1 and prod (branch i22-torch-b): prod's samples include zeros, where
# the gradient is the product of the other entries (one zero: only its entry;
# two: none), which finite differences see as well
def _log1p(rng):
    x = rng.uniform(-0.5, 2.0, (3, 4))
    return [Case("2d", x), Case("0d", np.asarray(0.3)), Case("tiny", np.asarray([1e-12, -1e-9]))]


def _prod(rng):
    r = _r(rng)
    one_zero = r(3, 4)
    one_zero[1, 2] = 0.0
    two_zeros = r(3, 4)
    two_zeros[0, 1] = two_zeros[0, 3] = 0.0
    return [Case("all", r(2, 3)), Case("axis0", r(3, 4), axis=0), Case("axis-neg-keep", r(2, 3, 2), axis=-1,
                                                                       keepdims=True),
            Case("one-zero", one_zero, axis=1), Case("two-zeros", two_zeros, axis=1),
            Case("all-zero", one_zero), Case("all-keepdims", r(2, 2), keepdims=True), Case("0d", r())]


SAMPLES.update({"log1p": _log1p, "expm1": _unary("normal"), "prod": _prod})


# i22-torch-a: scatter, scatter_add (index int64, src at least index's size), unique, bincount
def _scatter(rng):
    r = _r(rng)
    # distinct positions per column / row: a repeated index keeps one value, whose gradient is not smooth
    return [Case("dim0", r(3, 4), np.array([[2, 0, 1, 1], [0, 1, 2, 0]]), r(2, 4), dim=0),
            Case("dim1-src-larger", r(2, 5), np.array([[4, 0], [3, 1]]), r(2, 3), dim=1),
            Case("neg-dim-3d", r(2, 3, 2), np.array([[[1, 0]], [[0, 1]]]), r(2, 1, 2), dim=-1)]


def _scatter_add(rng):
    r = _r(rng)
    return [Case("dim0-repeats", r(3, 4), np.array([[2, 0, 2, 2], [2, 1, 2, 0]]), r(2, 4), dim=0),
            Case("dim1-src-larger", r(2, 5), np.array([[4, 4], [3, 1]]), r(2, 3), dim=1),
            Case("1d", r(3), np.array([0, 0, 2, 1]), r(4), dim=0)]


def _unique(rng):
    return [Case("ints", np.array([[3, 1], [2, 1]]), outputs=(0, 1, 2)),
            Case("floats", np.array([0.5, -1.0, 0.5]), outputs=(0, 1, 2))]


def _bincount(rng):
    return [Case("counts", np.array([1, 1, 3]), np.zeros((), np.int64), minlength=0),
            Case("weights-min", np.array([0, 2, 2]), rng.random(3), minlength=5)]


SAMPLES.update({"scatter": _scatter, "scatter_add": _scatter_add, "unique": _unique, "bincount": _bincount})

def _random_shuffle(rng):
    r = _r(rng)
    return [Case("rows", r(5, 2), seed=(1, 2)), Case("1d", r(4), seed=(0, 3)), Case("0d", r(), seed=(2, 2))]


SAMPLES["random_shuffle"] = _random_shuffle       # i22-tf1-gaps


# issue 25: layer norm, 1-D convolution and pooling
def _layer_norm(rng):
    r = _r(rng)
    return [Case("plain", r(3, 5), ndim=1, eps=1e-5), Case("affine", r(2, 3, 4), r(4), r(4), ndim=1, eps=1e-5),
            Case("weight-only-2d", r(2, 3, 4), r(3, 4), ndim=2, eps=1e-3),
            Case("1d-all", r(6), r(6), r(6), ndim=1, eps=0.1)]


def _conv1d(rng):
    r = _r(rng)
    return [Case("plain", r(2, 3, 7), r(4, 3, 3), stride=1, padding=(0, 0), dilation=1),
            Case("bias-pad-stride", r(2, 2, 8), r(3, 2, 3), r(3), stride=2, padding=(1, 2), dilation=1),
            Case("dilated", r(1, 2, 9), r(2, 2, 2), r(2), stride=1, padding=(1, 1), dilation=3),
            Case("k1", r(3, 2, 4), r(5, 2, 1), stride=3, padding=(0, 0), dilation=1)]


def _pool1d(rng):
    def distinct(*shape):
        # distinct values: a tie moves the kink of max's gradient onto the sample
        return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 + rng.uniform(0, 0.01, shape)
    r = _r(rng)
    return [Case("max", distinct(2, 3, 7), kernel_size=3, stride=2, padding=(1, 1), dilation=1, ceil_mode=False,
                 mode="max"),
            Case("max-ceil-dilated", distinct(1, 2, 8), kernel_size=2, stride=2, padding=(0, 0), dilation=2,
                 ceil_mode=True, mode="max"),
            Case("avg", r(2, 2, 6), kernel_size=3, stride=1, padding=(1, 1), dilation=1, ceil_mode=False, mode="avg"),
            Case("avg-exclude-ceil", r(2, 2, 7), kernel_size=4, stride=3, padding=(2, 2), dilation=1, ceil_mode=True,
                 mode="avg_exclude_pad")]


def _attention_probs(rng):
    r = _r(rng)
    mask = np.where(rng.random((2, 1, 3, 4)) < 0.3, -np.inf, 0.0)
    mask[..., 0] = 0.0                      # no fully masked row: its NaNs have no finite difference
    return [Case("2-heads", r(2, 3, 4), r(2, 4, 4), num_heads=2, scale=0.5),
            Case("masked", r(2, 3, 6), r(2, 4, 6), mask, num_heads=3, scale=0.7),
            Case("float-mask", r(3, 2), r(4, 2), r(1, 3, 4), num_heads=1, scale=1.0),
            Case("4d", r(2, 2, 3, 2), r(2, 2, 1, 2), num_heads=2, scale=1.3),
            Case("safe-masked", r(2, 3, 4), r(2, 2, 4), np.where([[[[False, True]]], [[[True, True]]]], -np.inf, 0.0),
                 num_heads=1, scale=0.5, safe=True)]


def _attention_apply(rng):
    r = _r(rng)
    p = rng.dirichlet(np.ones(4), (2, 2, 3))
    return [Case("2-heads", p, r(2, 4, 6)), Case("unbatched", rng.dirichlet(np.ones(3), (1, 2)), r(3, 5)),
            Case("4d", rng.dirichlet(np.ones(2), (2, 3, 1, 4)), r(2, 3, 2, 2))]


def _conv2d(rng):
    r = _r(rng)
    return [Case("plain", r(2, 2, 4, 5), r(3, 2, 2, 3), stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1)),
            Case("bias-pad-stride-dilated", r(1, 2, 6, 5), r(2, 2, 3, 2), r(2), stride=(2, 1),
                 padding=((1, 2), (0, 1)), dilation=(1, 2))]


def _max_pool2d(rng):
    def distinct(*shape):
        return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 + rng.uniform(0, 0.01, shape)
    return [Case("2x2", distinct(2, 2, 4, 5), kernel_size=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)),
                 dilation=(1, 1), ceil_mode=False),
            Case("pad-ceil-dilated", distinct(1, 2, 7, 6), kernel_size=(3, 2), stride=(2, 1), padding=((1, 1), (1, 1)),
                 dilation=(1, 2), ceil_mode=True)]


SAMPLES.update({"conv2d": _conv2d, "max_pool2d": _max_pool2d})
SAMPLES.update({"layer_norm": _layer_norm, "conv1d": _conv1d, "pool1d": _pool1d,
                "attention_probs": _attention_probs, "attention_apply": _attention_apply,
                "rows_like": lambda rng: [Case("seq-first", _r(rng)(6, 1, 4), np.zeros((3, 2, 4)), axis=0),
                                          Case("batch-first", _r(rng)(5, 3), np.zeros((2, 4, 3)), axis=1),
                                          Case("all", _r(rng)(2), np.zeros(2, bool), axis=-1)]})
def _ragged_attention(rng):
    # lengths 1 (a row attending to itself only), 0 (an empty sentence) and the
    # maximum; the log-sum-exp output is differentiated too
    r = _r(rng)
    return [Case("heads", r(7, 6), r(7, 6), r(7, 6), np.array([0, 1, 1, 4, 7]), num_heads=2),
            Case("one-head-scale", r(5, 4), r(5, 4), r(5, 4), np.array([0, 5]), num_heads=1, scale=0.3),
            Case("twin", r(4, 6), r(4, 6), r(4, 6), np.array([0, 3, 4]), num_heads=3, method="twin"),
            Case("grouped", r(9, 4), r(9, 4), r(9, 4), np.array([0, 3, 3, 6, 7, 9]), num_heads=2, method="grouped"),
            Case("kernel", r(6, 4), r(6, 4), r(6, 4), np.array([0, 2, 6]), num_heads=2, method="kernel")]


SAMPLES["ragged_attention"] = _ragged_attention        # i25-models


def _linear_act(rng):                                # i25-fuse
    r = _r(rng)
    # ReLU's kink at 0 has no finite difference: small products plus a bias of +-1 stay away from it
    return [Case("relu", 0.1 * r(4, 3), r(5, 3), np.array([1.0, -1.0, 1.0, 1.0, -1.0]), activation="relu"),
            Case("gelu-3d", r(2, 3, 4), r(5, 4), r(5), activation="gelu"),
            Case("relu-1d", 0.1 * r(3), r(2, 3), np.array([1.0, -1.0]), activation="relu")]


def _linear_split(rng):                              # i25-fuse
    r = _r(rng)
    return [Case("qkv", r(5, 4), r(6, 4), r(6), chunks=3), Case("3d", r(2, 3, 4), r(4, 4), r(4), chunks=2),
            Case("one", r(3, 2), r(3, 2), r(3), chunks=1), Case("1d", r(4), r(6, 4), r(6), chunks=3)]


def _add_layer_norm(rng):                            # i25-fuse
    r = _r(rng)
    return [Case("rows", r(4, 5), r(4, 5), r(5), r(5), eps=1e-5), Case("3d", r(2, 3, 4), r(2, 3, 4), r(4), r(4),
                                                                        eps=1e-3),
            Case("1d", r(6), r(6), r(6), r(6), eps=0.1)]


SAMPLES.update({"linear_act": _linear_act, "linear_split": _linear_split, "add_layer_norm": _add_layer_norm})


def _cases():
    out = []
    for name in sorted(PRIMITIVES):
        gen = SAMPLES.get(name)
        if gen is None:
            continue            # test_every_primitive_has_samples fails, naming it
        seed = sum(map(ord, name))
        for case in gen(np.random.default_rng(seed)):
            out.append(pytest.param(name, case, id=f"{name}-{case.id}"))
    return out


CASES = _cases()


def test_every_primitive_has_samples():
    missing = sorted(set(PRIMITIVES) - set(SAMPLES))
    stale = sorted(set(SAMPLES) - set(PRIMITIVES))
    assert not missing, f"primitives without gradient samples in tests/autograd/test_primitives.py SAMPLES: {missing}"
    assert not stale, f"SAMPLES has entries for primitives that are not in the table: {stale}"


def _fn(prim, case, diff):
    """A function of the differentiated inputs only; the rest are constants."""
    def fn(*ts):
        args = list(case.args)
        for k, t in zip(diff, ts):
            args[k] = t
        out = bind(prim, *args, **case.attrs)
        if case.outputs is not None:
            return tuple(out[k] for k in case.outputs)
        return out
    return fn


@pytest.mark.parametrize("name,case", CASES)
def test_gradcheck(name, case):
    prim = PRIMITIVES[name]
    if not prim.differentiable:
        pytest.skip(f"{name} is not differentiable")
    diff = case.diff_positions(prim)
    assert diff, f"sample {name}-{case.id} has no differentiable input"
    gradcheck(_fn(prim, case, diff), [case.args[k] for k in diff], **case.tol)


def _vjp_outputs(prim, case, args, out, rng):
    """Random cotangent for the outputs, zeros... rather None for residual outputs."""
    if prim.multiple_results:
        return tuple(rng.standard_normal(np.shape(o)).astype(np.asarray(o).dtype)
                     if case.outputs is None or k in case.outputs else None
                     for k, o in enumerate(out))
    return rng.standard_normal(np.shape(out)).astype(np.asarray(out).dtype)


def _run_vjps(prim, case, args):
    rng = np.random.default_rng(1)
    out = prim.impl(*args, **case.attrs)
    g = _vjp_outputs(prim, case, args, out, rng)
    diff = case.diff_positions(prim)
    if prim.joint_vjp is not None:
        grads = prim.joint_vjp(g, tuple(args), out, **case.attrs)
        assert len(grads) == len(args), f"{prim.name}: joint_vjp returned {len(grads)} gradients for {len(args)} inputs"
        return {k: grads[k] for k in diff}
    return {k: prim.vjps[k](g, tuple(args), out, **case.attrs) for k in diff}


def _as32(a):
    return a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,case", CASES)
def test_vjp_shape_and_dtype(name, case, dtype):
    if name in ONE_DTYPE and dtype == np.float32:
        pytest.skip(f"{name}: a plan is traced for one dtype")
    prim = PRIMITIVES[name]
    args = [(_as32(a) if dtype == np.float32 else a) for a in case.args]
    for k, gk in _run_vjps(prim, case, args).items():
        a = args[k]
        if gk is None:
            continue
        gshape = gk.shape if type(gk) is RowSparse else np.shape(gk)
        gdtype = gk.dtype if type(gk) is RowSparse else np.asarray(gk).dtype
        assert tuple(gshape) == a.shape, f"{name}-{case.id}: gradient of input {k} has shape {gshape}, input {a.shape}"
        assert gdtype == a.dtype, f"{name}-{case.id}: gradient of input {k} has dtype {gdtype}, input {a.dtype}"


def _check_aval(name, case, aval, out, what):
    avals = aval if isinstance(aval, tuple) and not isinstance(aval, Aval) else (aval,)
    outs = out if isinstance(out, tuple) else (out,)
    assert len(avals) == len(outs), f"{name}-{case.id}: shape rule gives {len(avals)} results, forward {len(outs)}"
    for k, (a, o) in enumerate(zip(avals, outs)):
        o = np.asarray(o)
        assert tuple(a.shape) == o.shape, f"{name}-{case.id} ({what}) result {k}: rule {a.shape}, forward {o.shape}"
        assert np.dtype(a.dtype) == o.dtype, f"{name}-{case.id} ({what}) result {k}: rule {a.dtype}, forward {o.dtype}"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,case", CASES)
def test_shape_rule_matches_forward(name, case, dtype):
    if name in ONE_DTYPE and dtype == np.float32:
        pytest.skip(f"{name}: a plan is traced for one dtype")
    prim = PRIMITIVES[name]
    args = [(_as32(a) if dtype == np.float32 else a) for a in case.args]
    out = prim.impl(*args, **case.attrs)
    _check_aval(name, case, check_shapes(prim, args, case.attrs), out, np.dtype(dtype).name)


# Inputs that are weights (known shapes in a static graph) rather than data.
WEIGHT_ARGS = {"linear": (1, 2), "embedding": (0,), "lstm_cell": (3, 4, 5, 6), "gru_cell": (2, 3, 4, 5),
               "tree_lstm_cell": (4, 5), "tree_lstm_leaf": (1, 2),
               "tree_lstm_levels": (2, 3), "tree_lstm_levels_packed": (2, 3), "tree_rnn_levels": (1, 2), "childsum_levels": (2, 3, 4, 5),
               "lstm_seq": (1, 2), "gru_seq": (1, 2), "rnn_seq": (1, 2),
               "tree_lstm_node": (2, 3), "tree_lstm_leaf_node": (1, 2), "batchable_call": (2,)}
# The output shape depends on the values of a boolean mask, which must match
# the dimension it masks, so an unknown dimension cannot be checked.
# split_rows returns one result per row: its rule needs the number of rows.
DATA_DEPENDENT = {"getitem-bool-mask", "split_rows-rows", "split_rows-3d"}


@pytest.mark.parametrize("name,case", CASES)
def test_shape_rule_with_unknown_batch(name, case):
    """The static graph feeds rules unknown (None) dimensions: with the leading
    dimension of every data input unknown, the rule must still accept the
    input, and every dimension it does report must be the true one."""
    if f"{name}-{case.id}" in DATA_DEPENDENT:
        pytest.skip("output shape depends on index values")
    if name in EAGER_ONLY:
        pytest.skip("an eager-only primitive (a custom Function's Python forward)")
    prim = PRIMITIVES[name]
    avals = []
    for k, a in enumerate(case.args):
        if k in WEIGHT_ARGS.get(name, ()):
            avals.append(Aval(a.shape, a.dtype))
        elif isinstance(a, np.ndarray) and a.ndim >= 1:
            avals.append(Aval((None,) + a.shape[1:], a.dtype))
        elif isinstance(a, np.ndarray):
            avals.append(Aval((), a.dtype))
        else:
            avals.append(Aval((), a))
    try:
        res = prim.shape(*avals, **case.attrs)
    except ShapeError as e:
        pytest.fail(f"{name}-{case.id}: rule rejects unknown leading dims: {e}")
    out = prim.impl(*case.args, **case.attrs)
    res = res if isinstance(res, tuple) and not isinstance(res, Aval) else (res,)
    outs = out if isinstance(out, tuple) else (out,)
    for a, o in zip(res, outs):
        o = np.asarray(o)
        assert len(a.shape) == o.ndim, f"{name}-{case.id}: rule rank {a.shape} vs forward {o.shape}"
        for d, od in zip(a.shape, o.shape):
            assert d is None or d == od, f"{name}-{case.id}: rule {a.shape} vs forward {o.shape}"


def _unknown_rank_cases():
    out = []
    for p in CASES:
        name, case = p.values
        for k, a in enumerate(case.args):
            if isinstance(a, np.ndarray) and k not in WEIGHT_ARGS.get(name, ()):
                out.append(pytest.param(name, case, k, id=f"{p.id}-input{k}"))
    return out


@pytest.mark.parametrize("name,case,k", _unknown_rank_cases())
def test_shape_rule_with_unknown_rank(name, case, k):
    """A static placeholder made without a shape has an unknown rank (an
    aval of shape None): every rule either copes (its result, where known,
    is the forward's) or raises a ShapeError that names the op and says the
    input's rank is unknown, never an unrelated exception."""
    prim = PRIMITIVES[name]
    avals = [Aval(a.shape, a.dtype) if isinstance(a, np.ndarray) else Aval((), a) for a in case.args]
    avals[k] = Aval(None, case.args[k].dtype)
    try:
        res = run_rule(prim, avals, case.attrs)
    except ShapeError as e:
        assert str(e).startswith(f"{name}: ") and ("unknown rank" in str(e) or "<unknown>" in str(e)), str(e)
        return
    out = prim.impl(*case.args, **case.attrs)
    res = res if isinstance(res, tuple) and not isinstance(res, Aval) else (res,)
    outs = out if isinstance(out, tuple) else (out,)
    for a, o in zip(res, outs):
        o = np.asarray(o)
        if a.shape is not None:
            assert len(a.shape) == o.ndim and all(d is None or d == od for d, od in zip(a.shape, o.shape)), \
                f"{name}-{case.id}: with input {k} of unknown rank the rule says {a.shape}, the forward gives {o.shape}"
        assert np.dtype(a.dtype) == o.dtype or isinstance(o.dtype, type(a.dtype)), (a.dtype, o.dtype)


# --------------------------------------------------------------------------
# bad inputs: the shape rule is the input check and names the op
# --------------------------------------------------------------------------

def _z(*shape, dtype=np.float64):
    return np.zeros(shape, dtype=dtype)


_I = np.array([0, 1])
# name -> list of (args, attrs, message fragment); checked through the rule and through eager bind
_RND = dict(dist="normal", shape=(2, 3), dtype=np.dtype(np.float64), a=0.0, b=1.0, seed=(1, 2))

BAD = {
    "segment_sum": [((_z(), np.array([0])), {}, "segment_sum: x must have at least one dimension"),
                    ((_z(3), _z(2)), {}, "segment_sum: starts must be a 1-D integer array")],
    "gather_rows": [((np.array([0]), np.array([0]), _z(2, 3), _z(2, 4)), {},
                     "gather_rows: source 1.shape=(2, 4) does not have the trailing shape (3,) of source 0")],
    "arena_gather": [((_z(4, 2), np.array([0]), np.array([0]), np.array([0]), _z(2, 3)), {},
                      "arena_gather: arena.shape=(4, 2) does not have the sources' trailing shape (3,)"),
                     ((_z(4, 3), np.array([0, 1]), np.array([0]), np.array([0]), _z(2, 3)), {},
                      "arena_gather: offs must be a 1-D integer array of one offset per source (1)")],
    "random": [((), dict(_RND, shape=(None, 3)), "random: shape must be a tuple of non-negative integers"),
               ((), dict(_RND, dtype=np.dtype(np.int64)), "random: normal draws float32 or float64"),
               ((), dict(_RND, dist="gamma"), "random: dist must be one of"),
               ((), dict(_RND, seed=(1, -2)), "random: seed must be a pair of non-negative integers"),
               ((), dict(_RND, dist="uniform", a=1.0, b=1.0), "random: uniform needs minval < maxval")],
    "dropout_mask": [((_z(2, dtype=np.int64),), dict(rate=0.5, seed=(1, 1)), "dropout_mask: x must be a floating"),
                     ((_z(2),), dict(rate=1.0, seed=(1, 1)), "dropout_mask: rate must be a probability in [0, 1)"),
                     ((_z(2),), dict(rate=0.5, seed=3), "dropout_mask: seed must be a pair")],
    **{n: [((_z(2, 3), _z(4, 3)), {}, f"{n}: shapes cannot be broadcast together: x.shape=(2, 3), y.shape=(4, 3)")]
       for n in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal")},
    "argmax": [((_z(2, 3),), {"axis": 2}, "argmax: axis 2 is out of range for an input with 2 dimensions")],
    "add": [((_z(2, 3), _z(4, 3)), {}, "add: shapes cannot be broadcast together: x.shape=(2, 3), y.shape=(4, 3)")],
    "sub": [((_z(2), _z(3)), {}, "sub: shapes cannot be broadcast")],
    "mul": [((_z(2, 3), _z(2)), {}, "mul: shapes cannot be broadcast")],
    "div": [((_z(5), _z(4, 3)), {}, "div: shapes cannot be broadcast")],
    "pow": [((_z(2), _z(3)), {}, "pow: shapes cannot be broadcast")],
    "maximum": [((_z(2), _z(3)), {}, "maximum: shapes cannot be broadcast")],
    "minimum": [((_z(2), _z(3)), {}, "minimum: shapes cannot be broadcast")],
    "exp": [((_I,), {}, "exp: expected a floating-point input, got dtype int64")],
    "log": [((_I,), {}, "log: expected a floating-point input")],
    "tanh": [((_I,), {}, "tanh: expected a floating-point input")],
    "sin": [((_I,), {}, "sin: expected a floating-point input, got dtype int64"),
            ((_z(2) > 0,), {}, "sin: expected a floating-point input, got dtype bool")],
    "cos": [((_I,), {}, "cos: expected a floating-point input, got dtype int64")],
    "sign": [((_z(2) > 0,), {}, "sign: unsupported dtypes")],
    "ensure_shape": [((_z(2),), dict(shape=(3,)), "ensure_shape: shape of tensor (2,) is not compatible with expected "
                                                  "shape (3,)"),
                     ((_z(2),), dict(shape=()), "ensure_shape: shape of tensor"),
                     ((_z(2),), dict(shape=(-1,)), "ensure_shape: shape must be a tuple of non-negative ints")],
    "sigmoid": [((_I,), {}, "sigmoid: expected a floating-point input")],
    "relu": [((_I > 0,), {}, "relu: expected a real numeric input, got dtype bool")],
    "sqrt": [((_I,), {}, "sqrt: expected a floating-point input")],
    "clip": [((_z(3),), {"lo": 1.0, "hi": 0.0}, "clip: lo=1.0 is greater than hi=0.0")],
    "where": [((_z(3), _z(3), _z(3)), {}, "where: condition must be boolean"),
              ((np.ones(2, bool), _z(3), _z(3)), {}, "where: shapes cannot be broadcast")],
    "sum": [((_z(2, 3),), {"axis": 2}, "sum: axis 2 is out of range for an input with 2 dimensions")],
    "mean": [((_z(2, 3),), {"axis": -3}, "mean: axis -3 is out of range"),
             ((_I,), {}, "mean: expected a floating-point input, got dtype int64")],
    "max": [((_z(2, 0),), {"axis": 1}, "max: cannot reduce over axis 1 of size 0"),
            ((_z(2),), {"axis": 1}, "max: axis 1 is out of range")],
    "reshape": [((_z(2, 3),), {"shape": (4, 2)}, "reshape: cannot reshape x.shape=(2, 3) (6 elements) into shape=(4, 2)"),
                ((_z(2, 3),), {"shape": (-1, -1)}, "reshape: only one dimension can be -1")],
    "transpose": [((_z(2, 3),), {"axes": (0, 0)}, "transpose: axes=(0, 0) is not a permutation")],
    "broadcast_to": [((_z(3),), {"shape": (3, 2)}, "broadcast_to:")],
    "getitem": [((_z(2, 3),), {"index": 5}, "getitem: index 5 is invalid for x.shape=(2, 3)"),
                ((_z(2, 3),), {"index": (0, 0, 0)}, "getitem:")],
    "setitem": [((_z(2, 3), _z(2)), {"index": 0}, "setitem: value.shape=(2,) cannot be broadcast to the "
                                                   "indexed region x[0] of shape (3,)"),
                ((_z(2, 3), _z(3)), {"index": 5}, "setitem: index 5 is invalid for x.shape=(2, 3)")],
    "take": [((_z(3, 2), _z(2)), {}, "take: indices must be integers, got dtype float64")],
    "concat": [((_z(2, 3), _z(2, 4)), {}, "concat: input 1.shape=(2, 4) does not match input 0.shape=(2, 3)"),
               ((_z(2, 3), _z(3)), {}, "concat: input 1 has 1 dimensions")],
    "stack": [((_z(2, 3), _z(3, 2)), {}, "stack: input 1.shape=(3, 2) does not match input 0.shape=(2, 3)")],
    "matmul": [((_z(2, 3), _z(4, 5)), {}, "matmul: x.shape[-1]=3 does not match w.shape[0]=4"),
               ((_z(2, 2, 3), _z(3, 4, 5)), {}, "matmul: x.shape[-1]=3 does not match w.shape[-2]=4"),
               ((_z(2, 2, 3), _z(3, 3, 5)), {}, "matmul: shapes cannot be broadcast"),
               ((_z(), _z(3)), {}, "matmul: inputs must have at least one dimension")],
    "linear": [((_z(2, 3), _z(4, 5), _z(4)), {}, "linear: x.shape[-1]=3 does not match weight.shape[1]=5"),
               ((_z(2, 3), _z(4, 3), _z(5)), {}, "linear: bias.shape=(5,) does not match weight.shape[0]=4")],
    "softmax": [((_z(2, 3),), {"axis": 2}, "softmax: axis 2 is out of range"),
                ((_I,), {}, "softmax: expected a floating-point input")],
    "log_softmax": [((_z(2, 3),), {"axis": -3}, "log_softmax: axis -3 is out of range")],
    "softmax_cross_entropy": [
        ((_z(2, 3), _I.astype(float)), {}, "cross_entropy: targets must be integer class indices"),
        ((_z(2, 3), np.array([0, 1, 2])), {}, "cross_entropy: targets.shape=(3,) does not match logits.shape[0]=2"),
        ((_z(3), _I), {}, "cross_entropy: logits must be 2-D (N, C)"),
        ((_z(2, 3), _I, _z(3)), {}, "cross_entropy: mask.shape=(3,) does not match targets.shape=(2,)"),
        ((_z(2, 3), _I), {"reduction": "avg"}, "cross_entropy: reduction must be 'mean', 'sum' or 'none'")],
    "sigmoid_cross_entropy": [
        ((_z(2, 3), _z(2, 2)), {}, "sigmoid_cross_entropy: targets.shape=(2, 2) does not match logits.shape=(2, 3)"),
        ((_I, _z(2)), {}, "sigmoid_cross_entropy: logits must be floating-point"),
        ((_z(2, 3), _z(2, 3), _z(2)), {}, "sigmoid_cross_entropy: shapes")],
    "binary_cross_entropy": [
        ((_z(2, 3), _z(3)), {}, "binary_cross_entropy: target.shape=(3,) does not match input.shape=(2, 3)"),
        ((_z(2), _I), {}, "binary_cross_entropy: target must be floating-point")],
    "embedding": [((_z(4), _I), {}, "embedding: weight must be 2-D"),
                  ((_z(4, 2), _z(2)), {}, "embedding: ids must be integers")],
    "lstm_cell": [((_z(1, 3), _z(1, 2), _z(1, 2), _z(8, 4), _z(8, 2), _z(8), _z(8)), {},
                   "lstm_cell: x.shape[1]=3 does not match weight_ih.shape[1]=4"),
                  ((_z(1, 3), _z(1, 2), _z(1, 2), _z(8, 3), _z(8, 2), _z(7), _z(8)), {},
                   "lstm_cell: bias_ih.shape=(7,) should be (8,)")],
    "gru_cell": [((_z(1, 3), _z(1, 2), _z(6, 3), _z(7, 2), _z(6), _z(6)), {},
                  "gru_cell: weight_hh.shape=(7, 2) should be (6, 2)")],
    "tree_lstm_cell": [((_z(1, 2), _z(1, 2), _z(1, 2), _z(1, 2), _z(4, 8), _z(10)), {},
                        "tree_lstm_cell: w.shape=(4, 8) should be (4, 10)"),
                       ((_z(1, 2), _z(1, 3), _z(1, 2), _z(1, 2), _z(4, 10), _z(10)), {},
                        "tree_lstm_cell: h_r.shape=(1, 3) does not match h_l.shape=(1, 2)")],
    "tree_lstm_leaf": [((_z(1, 3), _z(4, 6), _z(6)), {}, "tree_lstm_leaf: w.shape=(4, 6) should be (3, 3*hidden)")],
    "tree_lstm_levels": [((_z(5, 2), _z(5, 2), _z(4, 8), _z(10), _LEFT, _RIGHT, _OFFSETS), {},
                          "tree_lstm_levels: w.shape=(4, 8) should be (4, 10)"),
                         ((_z(5, 2), _z(4, 2), _z(4, 10), _z(10), _LEFT, _RIGHT, _OFFSETS), {},
                          "tree_lstm_levels: c0.shape=(4, 2) does not match h0.shape=(5, 2)")],
    "tree_lstm_levels_packed": [((_z(3, 4), np.array([0, 1, 2, 1, 0]), _z(4, 8), _z(10), _LEFT, _RIGHT, _OFFSETS), {},
                                 "tree_lstm_levels_packed: w.shape=(4, 8) should be (4, 10)"),
                                ((_z(3, 3), np.array([0, 1, 2, 1, 0]), _z(2, 5), _z(5), _LEFT, _RIGHT, _OFFSETS), {},
                                 "tree_lstm_levels_packed: s0 must be 2-D (states, 2*hidden)"),
                                ((_z(3, 4), np.array([0.0, 1, 2, 1, 0]), _z(4, 10), _z(10), _LEFT, _RIGHT, _OFFSETS),
                                 {}, "tree_lstm_levels_packed: rows must be a 1-D integer array")],
    "tree_rnn_levels": [((_z(5, 2), _z(4, 3), _z(2), _LEFT, _RIGHT, _OFFSETS), {},
                         "tree_rnn_levels: w.shape=(4, 3) should be (4, 2)")],
    "childsum_levels": [((_z(5, 2), _z(5, 2), _z(2, 6), _z(2, 2), _z(6), _z(3), _PTR, _IDX, _OFFSETS), {},
                         "childsum_levels: b_f.shape=(3,) should be (2,)")],
    "lstm_seq": [((_z(8, 8), _z(8, 2), _z(6), _BATCH_SIZES), {}, "lstm_seq: b_hh.shape=(6,) should be (8,)"),
                 ((_z(8, 8), _z(8, 2), _z(8), _z(4)), {}, "lstm_seq: batch_sizes must be a 1-D integer array")],
    "gru_seq": [((_z(8, 6), _z(6, 3), _z(6), _BATCH_SIZES), {}, "gru_seq: w_hh.shape=(6, 3) should be (3*hidden, hidden)")],
    "rnn_seq": [((_z(8, 3), _z(2, 2), _z(2), _BATCH_SIZES), {}, "rnn_seq: gx.shape[1]=3 does not match 1*hidden=2")],
    "split_rows": [((_z(),), {}, "split_rows: x must have at least one dimension")],
    "tree_lstm_node": [((_z(1, 4), _z(1, 4), _z(4, 8), _z(10)), {}, "tree_lstm_node: w.shape=(4, 8) should be (4, 10)"),
                       ((_z(1, 3), _z(1, 3), _z(2, 5), _z(5)), {}, "tree_lstm_node: s_l must be 2-D (nodes, 2*hidden)")],
    "tree_lstm_leaf_node": [((_z(1, 3), _z(4, 6), _z(6)), {}, "tree_lstm_leaf_node: w.shape=(4, 6) should be (3, 3*hidden)")],
    "astype": [],
    "gelu": [((_I,), {}, "gelu: expected a floating-point input, got dtype int64"),
             ((_z(2),), {"approximate": "erf"}, "gelu: approximate must be 'none' or 'tanh'")],
    "leaky_relu": [((_I,), {}, "leaky_relu: expected a floating-point input"),
                   ((_z(2),), {"negative_slope": "0.1"}, "leaky_relu: negative_slope must be a number")],
    "gather": [((_z(3, 4), _z(3, 4)), {"dim": 1}, "gather: index must be an integer tensor, got dtype float64"),
               ((_z(3, 4), _I), {"dim": 1}, "gather: index must have as many dimensions as x"),
               ((_z(3, 4), np.zeros((4, 1), np.int64)), {"dim": 1}, "gather: index.shape[0]=4 is larger than "
                                                                    "x.shape[0]=3"),
               ((_z(3, 4), np.zeros((1, 1), np.int64)), {"dim": 2}, "gather: axis 2 is out of range")],
    "split": [((_z(5, 2),), {"sizes": (2, 2), "axis": 0}, "split: sizes [2, 2] do not add up to x.shape[0]=5"),
              ((_z(5, 2),), {"sizes": (2, -3), "axis": 0}, "split: sizes must be a tuple of non-negative integers"),
              ((_z(),), {"sizes": (1,), "axis": 0}, "split: x must have at least one dimension")],
    "pad": [((_z(2, 3),), {"pads": ((1, 1),), "mode": "constant", "value": 0.0},
             "pad: pads must be one (before, after) pair of integers per dimension"),
            ((_z(2, 3),), {"pads": ((0, 0), (3, 0)), "mode": "reflect", "value": 0.0},
             "pad: reflect padding must be less than the dimension padded"),
            ((_z(2, 3),), {"pads": ((0, 0), (0, -4)), "mode": "constant", "value": 0.0}, "pad: pads (0, -4) leave -1"),
            ((_z(2, 3),), {"pads": ((0, 0), (4, 0)), "mode": "circular", "value": 0.0},
             "pad: circular padding (4, 0) would wrap around"),
            ((_z(2, 3),), {"pads": ((0, 0), (4, 0)), "mode": "symmetric", "value": 0.0},
             "pad: symmetric padding must be at most the dimension padded"),
            ((_z(2,),), {"pads": ((1, 0),), "mode": "edge", "value": 0.0}, "pad: mode must be one of"),
            ((_z(2, 3),), {"pads": ((0, 0), (1, 0)), "mode": "edge", "value": 0.0}, "pad: mode must be one of")],
    "norm": [((_I,), {}, "norm: expected a floating-point input, got dtype int64"),
             ((_z(2, 0),), {"ord": np.inf, "axis": (1,)}, "norm: the inf norm of an empty dimension"),
             ((_z(2, 3),), {"ord": "nuc"}, "norm: ord must be a number")],
    "einsum": [((_z(2, 3), _z(4, 5)), {"equation": "ij,jk->ik"}, "einsum: subscript 'j' has size 4 in operand 1"),
               ((_z(2, 3),), {"equation": "ijk->i"}, "einsum: operand 0 has shape (2, 3) but its subscripts 'ijk'"),
               ((_z(2, 3), _I), {"equation": "ij,j->i"}, "einsum: expected operands of one kind"),
               ((_z(2, 3),), {"equation": "ij"}, "einsum: equation must be explicit")],
}
# Primitives that accept every input their numpy implementation accepts.
NO_BAD_INPUT = {"neg": "any numeric dtype", "abs": "any numeric dtype",
                "astype": "any array can be cast to any dtype numpy knows", "copy": "any array can be copied"}
BAD.update({
    "gather_nd": [((_z(3, 2), np.array([[0.0, 1.0]])), {}, "gather_nd: indices must be integers, got dtype float64"),
                  ((_z(3, 2), np.array([[0, 1, 0]])), {}, "gather_nd: indices.shape[-1]=3 must be between 1 and the "
                                                          "rank of params")],
    "boolean_mask": [((_z(3, 2), np.ones(2, bool)), {}, "boolean_mask: mask.shape=(2,) does not match "
                                                        "tensor.shape[0:1]=(3,)"),
                     ((_z(3, 2), np.ones(3)), {}, "boolean_mask: mask must be boolean, got dtype float64"),
                     ((_z(3), np.ones((3, 1), bool)), {}, "boolean_mask: a mask of 2 dimensions from axis 0 does not "
                                                          "fit")],
    "argwhere": [((_z(3),), {}, "argwhere: condition must be boolean, got dtype float64")],
    "top_k": [((_z(2, 3),), {"k": 4}, "top_k: input must have at least k=4 columns, got input.shape=(2, 3)"),
              ((_z(),), {"k": 1}, "top_k: input must have at least one dimension"),
              ((_z(3),), {"k": -1}, "top_k: k must be a non-negative integer, got -1")],
    "tile": [((_z(2, 3),), {"multiples": (2,)}, "tile: multiples has 1 entries, the input 2 dimensions"),
             ((_z(2),), {"multiples": (-1,)}, "tile: multiples must be a tuple of non-negative integers")],
})
NO_BAD_INPUT["stop_gradient"] = "any array passes through"
NO_BAD_INPUT["batchable_call"] = ("its inputs are checked against its plan's signature "
                                  "(tests/autograd/test_batchable.py::test_shape_rule_names_the_function)")
NO_BAD_INPUT["custom_function"] = ("its inputs are whatever the user's forward accepts "
                                   "(tests/parity/test_torch_autograd_function.py)")

BAD.update({
    "round": [((np.array([1, 2]),), {"decimals": 1}, "round: decimals=1 needs a floating-point input"),
              ((np.array([True]),), {}, "round: expected a real numeric input, got dtype bool"),
              ((_z(2),), {"decimals": 0.5}, "round: decimals must be an integer")],
    "remainder": [((np.array([True]), np.array([True])), {}, "remainder: input must be a real number"),
                  ((_z(2), _z(3)), {}, "remainder:")],
    "fmod": [((_z(2), np.array([1j])), {}, "fmod: other must be a real number")],
    "div_rounded": [((_z(2), _z(2)), {"mode": "round"}, "div: rounding_mode must be 'floor', 'trunc' or None"),
                    ((np.array(["a"]), _z(1)), {}, "div: input must be a real number")],
    "cumsum": [((_z(2, 3),), {"axis": 2}, "cumsum: dimension out of range (expected to be in range of [-2, 1], but "
                                          "got 2)"),
               ((np.array(["a"]),), {"axis": 0}, "cumsum: expected a numeric input")],
    "sort": [((_z(2, 3),), {"axis": -3}, "sort: dimension out of range"),
             ((_z(2, 3),), {"descending": 1}, "sort: descending must be a bool"),
             ((np.array([1j]),), {}, "sort: input must be real numbers or booleans")],
})
_I = np.array([[0, 1]])
BAD.update({                 # i22-torch-a
    "scatter": [((_z(2, 3), _I, _z(1, 2).astype(np.float32)), {"dim": 0}, "scatter: expected src.dtype"),
                ((_z(2, 3), _I.astype(np.int32), _z(1, 2)), {"dim": 0}, "scatter: index must be an int64 tensor"),
                ((_z(2, 3), _I, _z(1, 1)), {"dim": 0}, "scatter: index.shape[1]=2 is larger than src.shape[1]=1")],
    "scatter_add": [((_z(2, 3), np.array([0, 1]), _z(2)), {"dim": 0}, "scatter_add: index and src must have as "
                                                                       "many dimensions as self"),
                    ((_z(1, 1), _I, _z(1, 2)), {"dim": 0}, "scatter_add: index.shape[1]=2 is larger than self")],
    "unique": [((np.array(["a"]),), {}, "unique: expected a bool, integer or floating-point tensor")],
    "bincount": [((_z(3), np.zeros((), np.int64)), {"minlength": 0}, "bincount: input must be a 1-d non-negative "
                                                                      "integer tensor"),
                 ((np.array([1, 2]), _z(3)), {"minlength": 0}, "bincount: weights should be 1-d"),
                 ((np.array([1, 2]), _z(2)), {"minlength": -1}, "bincount: minlength must be a non-negative")],
})

# branch i22-torch-b
BAD.update({
    "log1p": [((np.array(["a"]),), {}, "log1p: expected a floating-point input")],
    "expm1": [((np.array([True]),), {}, "expm1: expected a floating-point input")],
    "prod": [((_z(2, 3),), {"axis": 2}, "prod: axis 2 is out of range"),
             ((_z(2, 3),), {"axis": (0, 1)}, "prod: dim must be an integer or None"),
             ((np.array(["a"]),), {}, "prod: expected a numeric input")],
})

BAD.update({                                                                                   # i25-fuse
    "linear_act": [((_z(3, 4), _z(2, 5), _z(2)), {}, "linear_act: x.shape[-1]=4 does not match weight.shape[1]=5"),
                   ((_z(3, 4), _z(2, 4), _z(3)), {}, "linear_act: bias.shape=(3,) does not match weight.shape[0]=2"),
                   ((_z(3, 4), _z(2, 4), _z(2)), {"activation": "tanh"},
                    "linear_act: activation must be 'relu' or 'gelu', got 'tanh'"),
                   ((_z(3, 4), _z(2, 4, dtype=np.float32), _z(2)), {}, "linear_act: expected inputs of one dtype")],
    "linear_split": [((_z(3, 4), _z(5, 4), _z(5)), {"chunks": 3},
                      "linear_split: weight.shape[0]=5 (out_features) is not divisible by chunks=3"),
                     ((_z(3, 4), _z(6, 4), _z(6)), {"chunks": 0}, "linear_split: chunks must be a positive integer"),
                     ((_z(3, 4), _z(6), _z(6)), {"chunks": 3}, "linear_split: weight must be 2-D")],
    "add_layer_norm": [((_z(3, 4), _z(1, 4), _z(4), _z(4)), {}, "add_layer_norm: r.shape=(1, 4) does not match "
                                                                 "x.shape=(3, 4)"),
                       ((_z(3, 4), _z(3, 4), _z(5), _z(4)), {}, "add_layer_norm: weight.shape=(5,) does not match "
                                                                 "the normalised shape (4,)"),
                       ((_z(3, 4), _z(3, 4), _z(4), _z(4)), {"eps": -1.0}, "add_layer_norm: eps must be a "
                                                                             "non-negative number"),
                       ((_z(3, 4).astype(np.int64), _z(3, 4), _z(4), _z(4)), {},
                        "add_layer_norm: x must be float32 or float64")],
})

BAD["random_shuffle"] = [((_z(3),), {"seed": (1, -1)}, "random_shuffle: seed must be a pair")]   # i22-tf1-gaps
BAD["ragged_attention"] = [                                                                  # i25-models
    ((_z(4, 6), _z(3, 6), _z(4, 6), np.array([0, 4])), {"num_heads": 2},
     "ragged_attention: k.shape=(3, 6) does not match q.shape=(4, 6)"),
    ((_z(4, 6), _z(4, 6), _z(4, 6), np.array([0, 4])), {"num_heads": 4},
     "ragged_attention: embed_dim=6 (q.shape[1]) is not divisible by num_heads=4"),
    ((_z(4, 6), _z(4, 6), _z(4, 6), _z(2)), {"num_heads": 1}, "ragged_attention: offsets must be a 1-D integer"),
    ((_z(4, 6), _z(4, 6), _z(4, 6, dtype=np.float32), np.array([0, 4])), {"num_heads": 1},
     "ragged_attention: expected inputs of one dtype"),
    ((_z(2, 4, 6), _z(2, 4, 6), _z(2, 4, 6), np.array([0, 4])), {"num_heads": 1},
     "ragged_attention: q must be 2-D (total_tokens, embed_dim)")]

BAD.update({
    "layer_norm": [((_z(2, 3), _z(4)), {"ndim": 1}, "layer_norm: weight.shape=(4,) does not match"),
                   ((_z(2, 3).astype(np.int64),), {"ndim": 1}, "layer_norm: expected a floating-point input"),
                   ((_z(3),), {"ndim": 2}, "layer_norm: input.shape=(3,) has fewer than ndim=2")],
    "conv1d": [((_z(2, 3, 5), _z(4, 2, 3)), {}, "conv1d: input.shape[1]=3 (channels) does not match weight.shape[1]=2"),
               ((_z(3, 5), _z(4, 3, 3)), {}, "conv1d: input must be 3-D (N, C_in, L)"),
               ((_z(1, 3, 2), _z(4, 3, 3)), {}, "conv1d: the padded input length 2 + 0 + 0 is shorter than the "
                                                "kernel span 3"),
               ((_z(1, 3, 5), _z(4, 3, 3), _z(3)), {}, "conv1d: bias.shape=(3,) does not match weight.shape[0]=4"),
               ((_z(1, 3, 5), _z(4, 3, 3)), {"stride": 0}, "conv1d: stride must be a positive integer")],
    "pool1d": [((_z(2, 3),), {"kernel_size": 2}, "max_pool1d: input must be 3-D (N, C, L)"),
               ((_z(1, 1, 2),), {"kernel_size": 3}, "max_pool1d: input.shape=(1, 1, 2) is too short"),
               ((_z(1, 1, 5),), {"kernel_size": 2, "padding": (2, 2), "mode": "avg"},
                "avg_pool1d: pad should be at most half of effective kernel size")],
    "attention_probs": [((_z(2, 3, 4), _z(2, 5, 3)), {"num_heads": 1}, "attention_probs: query.shape=(2, 3, 4) and "
                                                                        "key.shape=(2, 5, 3) must agree"),
                        ((_z(2, 3, 4), _z(2, 5, 4)), {"num_heads": 3}, "attention_probs: query.shape[-1]=4 is not "
                                                                        "divisible by num_heads=3"),
                        ((_z(2, 3, 4), _z(2, 5, 4), _z(2, 1, 3, 4)), {"num_heads": 2},
                         "attention_probs: shapes cannot be broadcast together: scores.shape=(2, 2, 3, 5), mask.shape"),
                        ((_z(2, 3, 4), _z(2, 5, 4), _z(2, 1, 1, 5).astype(bool)), {"num_heads": 2},
                         "attention_probs: mask.dtype=bool does not match")],
    "attention_apply": [((_z(2, 2, 3, 4), _z(2, 5, 4)), {}, "attention_apply: probs.shape=(2, 2, 3, 4) does not match "
                                                            "value.shape=(2, 5, 4)"),
                        ((_z(2, 2, 3, 4), _z(2, 4, 3)), {}, "attention_apply: value.shape[-1]=3 is not divisible")],
    "conv2d": [((_z(1, 3, 4, 4), _z(2, 2, 2, 2)), {}, "conv2d: input.shape[1]=3 (channels) does not match"),
               ((_z(3, 4, 4), _z(2, 3, 2, 2)), {}, "conv2d: input must be 4-D (N, C_in, H, W)"),
               ((_z(1, 3, 1, 4), _z(2, 3, 2, 2)), {}, "conv2d: the padded input size 1 + 0 + 0 along dimension 2")],
    "max_pool2d": [((_z(2, 3, 4),), {"kernel_size": (2, 2)}, "max_pool2d: input must be 4-D (N, C, H, W)"),
                   ((_z(1, 1, 4, 4),), {"kernel_size": (2, 2), "padding": ((2, 2), (0, 0))},
                    "max_pool2d: pad should be at most half of effective kernel size")],
    "rows_like": [((_z(4, 3), _z(2, 5)), {"axis": 1}, "rows_like: the sequence length ref.shape[1]=5 exceeds the "
                                                       "table's table.shape[0]=4 positions"),
                  ((_z(4, 3), _z(2, 5)), {"axis": 2}, "rows_like: axis 2 is out of range")],
})  # issue 25

BAD_CASES = [pytest.param(name, args, attrs, msg, id=f"{name}-{k}")
             for name, lst in BAD.items() for k, (args, attrs, msg) in enumerate(lst)]


def test_every_primitive_has_bad_inputs():
    missing = sorted(n for n in PRIMITIVES if not BAD.get(n) and n not in NO_BAD_INPUT)
    assert not missing, f"primitives without a bad-input case in BAD (or a reason in NO_BAD_INPUT): {missing}"


@pytest.mark.parametrize("name,args,attrs,msg", BAD_CASES)
def test_shape_rule_rejects_bad_input(name, args, attrs, msg):
    prim = PRIMITIVES[name]
    with pytest.raises(ShapeError) as info:
        check_shapes(prim, args, attrs)
    assert msg in str(info.value), f"{name}: message {str(info.value)!r} lacks {msg!r}"


@pytest.mark.parametrize("name,args,attrs,msg", BAD_CASES)
def test_eager_bad_input_raises_named_shape_error(name, args, attrs, msg):
    """Eager mode runs the forward directly; if numpy accepts the input (e.g.
    exp of integers) the op simply computes, otherwise the error must be the
    shape rule's."""
    prim = PRIMITIVES[name]
    ts = [tensor(a) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args]
    try:
        with np.errstate(all="ignore"):
            bind(prim, *ts, **attrs)
    except ShapeError as e:
        assert msg in str(e), f"{name}: message {str(e)!r} lacks {msg!r}"
    except Exception as e:  # noqa: BLE001 - the point is to show what leaked
        pytest.fail(f"{name}: eager bad input raised {type(e).__name__}: {e} instead of ShapeError")


def test_eager_matmul_message_exact():
    with pytest.raises(ShapeError, match=r"^matmul: x.shape\[-1\]=3 does not match w.shape\[0\]=4"):
        ops.matmul(dn.zeros(2, 3), dn.zeros(4, 5))


# --------------------------------------------------------------------------
# conventions that finite differences cannot see
# --------------------------------------------------------------------------

def test_max_ties_split_gradient_evenly():
    """At a tie, ``max`` passes the gradient in equal shares to every maximal
    element (PyTorch's ``amax`` convention): a valid subgradient that keeps
    the total."""
    x = dn.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    ops.max(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0.5, 0.5, 0])
    y = dn.tensor([[2.0, 2.0], [1.0, 5.0]], requires_grad=True)
    (ops.max(y, axis=1) * dn.tensor([1.0, 10.0])).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [[0.5, 0.5], [0, 10.0]])


def test_maximum_minimum_ties_split_gradient():
    x = dn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = dn.tensor([1.0, 5.0, 0.0], requires_grad=True)
    (ops.maximum(x, y) + 2 * ops.minimum(x, y)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.5, 2.0, 1.0])
    np.testing.assert_allclose(y.grad.numpy(), [1.5, 1.0, 2.0])


def test_pow_exponent_gradient_at_zero_base_is_zero():
    x = dn.tensor([0.0, 2.0], dtype=np.float64, requires_grad=True)
    y = dn.tensor([2.0, 3.0], dtype=np.float64, requires_grad=True)
    (x ** y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 8 * np.log(2)])
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 12.0])


def test_embedding_gradient_is_row_sparse_and_sums_repeats():
    w = dn.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    out = ops.embedding(w, np.array([2, 0, 2, 2]))
    (out * dn.tensor(np.arange(12.0).reshape(4, 3))).sum().backward()
    assert type(w._grad) is RowSparse
    dense = w.grad.numpy()
    np.testing.assert_allclose(dense[2], [0 + 6 + 9, 1 + 7 + 10, 2 + 8 + 11])
    np.testing.assert_allclose(dense[0], [3, 4, 5])
    np.testing.assert_allclose(dense[[1, 3]], 0)
    assert set(w._grad.rows.tolist()) <= {0, 2}


def test_row_sparse_sums_join_their_terms_once_and_leave_inputs_alone():
    rng = np.random.default_rng(8)
    terms = [RowSparse(rng.integers(0, 6, k), rng.standard_normal((k, 2)), (6, 2)) for k in (3, 1, 4, 2)]
    before = [(t.rows.copy(), t.values.copy()) for t in terms]
    total = terms[0]
    for t in terms[1:]:
        total = total.add(t)
    partial = terms[0].add(terms[1])
    assert total.dtype == np.float64 and total.shape == (6, 2)
    np.testing.assert_array_equal(total.rows, np.concatenate([r for r, _ in before]))
    np.testing.assert_array_equal(total.values, np.concatenate([v for _, v in before]))
    want = np.zeros((6, 2))
    for r, v in before:
        np.add.at(want, r, v)
    np.testing.assert_allclose(total.to_dense(), want, rtol=1e-12)
    np.testing.assert_allclose(total.coalesce().to_dense(), want, rtol=1e-12)
    assert len(partial.rows) == 4                      # an intermediate sum is unaffected by later additions
    for t, (r, v) in zip(terms, before):
        np.testing.assert_array_equal(t.rows, r)
        np.testing.assert_array_equal(t.values, v)
    mixed = RowSparse(np.array([0]), np.ones((1, 2), np.float32), (6, 2)).add(terms[1])
    assert mixed.dtype == np.float64 == mixed.values.dtype


@pytest.mark.parametrize("kind", ["lstm_cell", "gru_cell", "matmul", "linear", "tree_lstm_cell"])
def test_factored_weight_gradients_equal_dense_ones_over_a_loop(kind, monkeypatch):
    """A cell or product applied row by row (a define-by-run loop) returns its
    weight gradients as OuterSum factors; the accumulated result equals the
    dense per-step gradients (factoring disabled), in float64."""
    import dynnets.autograd.gradtypes as G
    from dynnets import nn

    def grads(factor_rows):
        monkeypatch.setattr(G, "FACTOR_ROWS", factor_rows)
        rng = np.random.default_rng(11)
        xs = [dn.tensor(rng.standard_normal((1, 4)), dtype=np.float64) for _ in range(5)]
        if kind in ("lstm_cell", "gru_cell"):
            cell = (nn.LSTMCell if kind == "lstm_cell" else nn.GRUCell)(4, 3, rng=np.random.default_rng(1),
                                                                         dtype=np.float64)
            h = c = dn.zeros(1, 3, dtype=np.float64)
            for x in xs:
                if kind == "lstm_cell":
                    h, c = cell(x, (h, c))
                else:
                    h = cell(x, h)
            params = list(cell.parameters())
        elif kind == "tree_lstm_cell":
            w = dn.tensor(rng.standard_normal((6, 15)), requires_grad=True, dtype=np.float64)
            b = dn.tensor(rng.standard_normal(15), requires_grad=True, dtype=np.float64)
            h = c = dn.tensor(rng.standard_normal((1, 3)), dtype=np.float64)
            for x in xs:
                h, c = ops.tree_lstm_cell(h, x[:, :3], c, x[:, 1:], w, b)
            params = [w, b]
        else:
            w = dn.tensor(0.5 * rng.standard_normal((4, 4)), requires_grad=True, dtype=np.float64)
            h = xs[0]
            for x in xs[1:]:
                h = ops.tanh(h @ w + x) if kind == "matmul" else ops.tanh(ops.linear(h, w, x[0]))
            params = [w]
        (h * h).sum().backward()
        assert all(type(p._grad) is not G.OuterSum for p in params)
        return [p.grad.numpy() for p in params]

    dense = grads(0)
    for a, b in zip(grads(4), dense):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("mix", ["leaves only", "shared row", "other weight", "dense row"])
def test_split_rows_forms_leaf_input_gradients_in_one_product(mix, monkeypatch):
    """Per-node leaves return their input gradient as MatmulT, which split_rows'
    VJP forms with one product; a row also used with another weight, twice, or
    by an ordinary op falls back to dense sums. All equal the dense path."""
    import dynnets.autograd.gradtypes as G
    from dynnets.autograd.ops import split_rows, tree_lstm_leaf_node

    def grads(factor_rows):
        monkeypatch.setattr(G, "FACTOR_ROWS", factor_rows)
        rng = np.random.default_rng(12)
        x = dn.tensor(rng.standard_normal((4, 5)), requires_grad=True, dtype=np.float64)
        w, w2 = (dn.tensor(rng.standard_normal((5, 6)), requires_grad=True, dtype=np.float64) for _ in range(2))
        b = dn.tensor(rng.standard_normal(6), requires_grad=True, dtype=np.float64)
        rows = split_rows(x * 1.5)
        outs = [tree_lstm_leaf_node(r, w, b) for r in rows[:3]]
        if mix == "shared row":
            outs.append(tree_lstm_leaf_node(rows[0], w, b))
        elif mix == "other weight":
            outs.append(tree_lstm_leaf_node(rows[1], w2, b))
        elif mix == "dense row":
            outs.append(rows[2] * 3.0)
        loss = sum(((o * o).sum() for o in outs), dn.tensor(0.0, dtype=np.float64))
        loss.backward()
        return [t.grad.numpy() for t in (x, w, b)]

    dense = grads(0)
    for a, b in zip(grads(4), dense):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_row_sparse_with_factored_values_forms_them_once():
    from dynnets.autograd.primitives import MatmulT

    rng = np.random.default_rng(13)
    w, w2 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    parts = [RowSparse(np.array([0, 2]), MatmulT(rng.standard_normal((2, 4)), w), (5, 3)),
             RowSparse(np.array([2, 4, 1]), MatmulT(rng.standard_normal((3, 4)), w), (5, 3))]
    want = np.zeros((5, 3))
    for p in parts:
        np.add.at(want, p._rows, p._values.a @ p._values.w.T)
    same = parts[0].add(parts[1])
    assert same.dtype == np.float64
    np.testing.assert_allclose(same.to_dense(), want, rtol=1e-12)
    assert type(same.values) is np.ndarray and same.values.shape == (5, 3)
    dense = RowSparse(np.array([3]), np.ones((1, 3)), (5, 3))
    other = RowSparse(np.array([1]), MatmulT(np.ones((1, 4)), w2), (5, 3))
    mixed = parts[0].add(dense).add(other)
    want2 = np.zeros((5, 3))
    np.add.at(want2, parts[0]._rows, parts[0]._values.a @ w.T)
    want2[3] += 1
    want2[1] += (np.ones((1, 4)) @ w2.T)[0]
    np.testing.assert_allclose(mixed.to_dense(), want2, rtol=1e-12)


def test_cross_entropy_all_masked_mean_is_nan():
    # torch's mean over no rows: 0/0 = nan, with a zero gradient
    x = dn.tensor(np.ones((2, 3)), requires_grad=True, dtype=np.float64)
    loss = ops.cross_entropy(x, np.array([0, 2]), mask=np.zeros(2))
    loss.backward()
    assert np.isnan(loss.item()) and np.all(x.grad.data == 0)


def test_sigmoid_cross_entropy_extreme_logits_and_dtypes():
    # no overflow and no loss of tiny values: for x = +-800 the loss is 800 or exp(-800) ~ 0 (not inf, not nan)
    x = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    for t in (np.zeros(5), np.ones(5), np.full(5, 0.3)):
        got = ops.sigmoid_cross_entropy(dn.tensor(x, requires_grad=True, dtype=np.float64), t)
        want = (1 - t) * np.logaddexp(0, x) + t * np.logaddexp(0, -x)
        np.testing.assert_allclose(got.data, want, rtol=1e-15, atol=0)
    np.testing.assert_allclose(ops.sigmoid_cross_entropy(np.array([40.0]), np.ones(1)).data, [np.exp(-40.0)],
                               rtol=1e-15)
    assert ops.sigmoid_cross_entropy(np.zeros(3, np.float32), np.zeros(3, np.float32)).dtype == np.float32


def test_cross_entropy_reductions_and_mask_agree_with_numpy():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((4, 3))
    t = np.array([0, 2, 2, 1])
    mask = np.array([1.0, 0.0, 1.0, 1.0])
    lp = logits - logits.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    per = -lp[np.arange(4), t]
    L = dn.tensor(logits, dtype=np.float64)
    np.testing.assert_allclose(ops.cross_entropy(L, t, reduction="none").numpy(), per, rtol=1e-12)
    np.testing.assert_allclose(ops.cross_entropy(L, t, reduction="sum").item(), per.sum(), rtol=1e-12)
    np.testing.assert_allclose(ops.cross_entropy(L, t).item(), per.mean(), rtol=1e-12)
    np.testing.assert_allclose(ops.cross_entropy(L, t, mask=mask).item(), (per * mask).sum() / 3, rtol=1e-12)
    np.testing.assert_allclose(ops.cross_entropy(L, t, mask=mask, reduction="none").numpy(), per * mask,
                               rtol=1e-12)


# --------------------------------------------------------------------------
# composites from ops (split is getitem; min is neg/max/neg; square is mul)
# --------------------------------------------------------------------------

def test_split_concat_roundtrip_gradients():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4))

    def f(t):
        a, b, c = ops.split(t, [1, 3, 1], axis=0)
        p, q = ops.split(t, 2, axis=1)
        return ops.concat([c * 2.0, a, b ** 2], axis=0).sum() + (p * q).sum()

    gradcheck(f, [x])
    parts = ops.split(dn.tensor(x), [2, 3])
    assert [p.shape for p in parts] == [(2, 4), (3, 4)]
    with pytest.raises(ShapeError, match="split: sizes"):
        ops.split(dn.tensor(x), [2, 2])
    # an int is the size of each part, as torch.split (the last part smaller); array_split is numpy's
    assert [p.shape for p in ops.split(dn.tensor(x), 2)] == [(2, 4), (2, 4), (1, 4)]
    assert [p.shape for p in ops.array_split(dn.tensor(x), 2)] == [(3, 4), (2, 4)]
    assert [p.shape for p in ops.chunk(dn.tensor(x), 2)] == [(3, 4), (2, 4)]


def test_composite_ops_gradcheck():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4))
    gradcheck(lambda t: ops.min(t, axis=1), [x])
    gradcheck(lambda t: ops.square(t), [x])
    gradcheck(lambda t: ops.unsqueeze(ops.squeeze(t[None], 0), -1), [x])
    gradcheck(lambda t: t.T @ t, [x])
    gradcheck(lambda t: ops.stack(list(t), axis=1), [x])
    gradcheck(lambda t: t[np.array([0, 0, 2])][:, np.array([3, 3])], [x])


# --------------------------------------------------------------------------
# a few hypothesis examples: random broadcastable shapes for the binary ops
# --------------------------------------------------------------------------

@st.composite
def _broadcast_pair(draw):
    nd = draw(st.integers(0, 3))
    out = [draw(st.integers(1, 3)) for _ in range(nd)]
    def side():
        keep = draw(st.integers(0, nd))
        return tuple(1 if draw(st.booleans()) else d for d in out[nd - keep:])
    return side(), side()


@settings(max_examples=12, deadline=None, derandomize=True)
@given(_broadcast_pair(), st.sampled_from(["add", "sub", "mul", "div", "pow", "maximum", "where"]),
       st.integers(0, 2 ** 31 - 1))
def test_binary_broadcasting_hypothesis(shapes, name, seed):
    rng = np.random.default_rng(seed)
    sx, sy = shapes
    x = rng.uniform(0.5, 2.0, sx) if name in ("pow", "div") else rng.standard_normal(sx)
    y = rng.uniform(0.5, 2.0, sy) if name == "div" else rng.standard_normal(sy)
    if name == "where":
        cond = rng.random(sy) > 0.5
        gradcheck(lambda a, b: ops.where(cond, a, b), [x, y])
    else:
        prim = PRIMITIVES[name]
        gradcheck(lambda a, b: bind(prim, a, b), [x, y])


def test_python_scalar_matmul_is_shape_error():
    with pytest.raises(ShapeError, match="matmul: inputs must have at least one dimension"):
        bind(PRIMITIVES["matmul"], 2.0, np.ones(3))

