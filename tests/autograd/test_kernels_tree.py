"""Kernels of ``kernels_tree`` against their numpy twins in ``reference_tree``.

The kernels write into output buffers, so every array argument is compared
after the call, as well as the returned values. Runs the same with
``NUMBA_DISABLE_JIT=1`` (the kernels are then plain Python). Gradients of the
primitives built on these kernels are checked against finite differences in
``test_primitives.py``.
"""

import copy

import numpy as np
import pytest

from dynnets.autograd import kernels_tree as K
from dynnets.autograd import reference_tree as R

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

NAMES = sorted(n for n, f in vars(K).items()
               if not n.startswith("_") and callable(f) and getattr(f, "__module__", None) == K.__name__)
TOL = {np.float64: dict(rtol=1e-12, atol=1e-13), np.float32: dict(rtol=2e-5, atol=2e-6)}
H = 3

# a level of two binary nodes (5 = (0, 1), 6 = (3, 0)): index 0 appears twice
LEFT, RIGHT, LO = np.array([0, 3]), np.array([1, 0]), 5
# a level of two n-ary nodes whose edges are numbered from 3: node 0 has children 0, 1, 2; node 1 has child 4
PTR, IDX = np.array([3, 6, 7]), np.array([0, 1, 2, 4])


def make_args(name, rng, dtype):
    def r(*shape):
        return rng.standard_normal(shape).astype(dtype)

    def p(*shape):          # gate activations in (0, 1)
        return rng.uniform(0.05, 0.95, shape).astype(dtype)

    N = 8
    if name == "gather_pairs":
        return r(N, H), LEFT, RIGHT, np.zeros((2, 2 * H), dtype)
    if name == "scatter_pairs_add":
        return r(2, 2 * H), LEFT, RIGHT, r(N, H)
    if name == "scatter_rows_add":
        return r(4, H), np.array([3, 0, 3, -2]), N - 1, r(N, H)
    if name == "tree_lstm_levels_fwd":
        return r(2, 5 * H), r(5 * H), r(N, H), LEFT, RIGHT, LO, r(N, H), np.zeros((2, 5 * H), dtype)
    if name == "tree_lstm_levels_bwd":
        return r(N, H), r(N, H), p(2, 5 * H), r(N, H), LEFT, RIGHT, LO, np.zeros((2, 5 * H), dtype)
    if name == "tanh_rows_fwd":
        return r(2, H), r(H), LO, r(N, H)
    if name == "tanh_rows_bwd":
        return r(N, H), r(N, H), LO, np.zeros((2, H), dtype)
    if name == "childsum_gather":
        return r(N, H), PTR, IDX, np.zeros((2, H), dtype), np.zeros((4, H), dtype)
    if name == "childsum_levels_fwd":
        return (r(2, 3 * H), r(4, H), r(3 * H), r(H), r(N, H), PTR, IDX, LO, r(N, H), np.zeros((2, 3 * H), dtype),
                np.zeros((4, H), dtype))
    if name == "childsum_levels_bwd":
        return (r(N, H), r(N, H), p(2, 3 * H), p(4, H), r(N, H), PTR, IDX, LO, np.zeros((2, 3 * H), dtype),
                np.zeros((4, H), dtype))
    if name == "childsum_scatter_add":
        return r(2, H), r(4, H), PTR, IDX, r(N, H)
    if name == "lstm_seq_fwd":
        return r(2, 4 * H), r(4 * H), r(N, H), 1, 4, r(N, H), r(N, 4 * H)
    if name == "lstm_seq_bwd":
        return r(N, H), r(N, H), p(N, 4 * H), r(N, H), 1, 4, 2, r(N, 4 * H)
    if name == "gru_seq_fwd":
        return r(2, 3 * H), r(2, 3 * H), r(N, H), 1, 4, r(N, 3 * H)
    if name == "gru_seq_bwd":
        return r(N, H), p(N, 3 * H), r(N, 3 * H), r(N, H), 1, 4, 2, r(N, 3 * H), r(N, 3 * H)
    if name == "tree_lstm_node_fwd":
        return r(2, 5 * H), r(5 * H), r(2, 2 * H), r(2, 2 * H), np.zeros((2, 2 * H), dtype), np.zeros((2, 5 * H), dtype)
    if name == "tree_lstm_node_bwd":
        return (r(2, 2 * H), p(2, 5 * H), r(2, 2 * H), r(2, 2 * H), r(2, 2 * H), np.zeros((2, 5 * H), dtype),
                np.zeros((2, 2 * H), dtype), np.zeros((2, 2 * H), dtype))
    if name == "tree_lstm_leaf_node_fwd":
        return r(2, 3 * H), r(3 * H), np.zeros((2, 2 * H), dtype), np.zeros((2, 3 * H), dtype)
    if name == "tree_lstm_leaf_node_bwd":
        return r(2, 2 * H), p(2, 3 * H), r(2, 2 * H), np.zeros((2, 3 * H), dtype)
    if name == "tree_lstm_node_fwd_mv":
        return (r(2, 2 * H), r(2, 2 * H), r(2 * H, 5 * H), r(5 * H), np.zeros((2, 2 * H), dtype),
                np.zeros((2, 5 * H), dtype), np.zeros((2, 2 * H), dtype))
    if name == "tree_lstm_leaf_node_fwd_mv":
        return r(2, 4), r(4, 3 * H), r(3 * H), np.zeros((2, 2 * H), dtype), np.zeros((2, 3 * H), dtype)
    if name == "tree_lstm_cell_fwd":
        return (r(2, 5 * H), r(5 * H), r(2, H), r(2, H), np.zeros((2, H), dtype), np.zeros((2, H), dtype),
                np.zeros((2, 5 * H), dtype))
    if name == "tree_lstm_cell_bwd":
        return (r(2, H), r(2, H), p(2, 5 * H), r(2, H), r(2, H), r(2, H), np.zeros((2, 5 * H), dtype),
                np.zeros((2, H), dtype), np.zeros((2, H), dtype))
    if name == "tree_lstm_leaf_fwd":
        return r(2, 3 * H), r(3 * H), np.zeros((2, H), dtype), np.zeros((2, H), dtype), np.zeros((2, 3 * H), dtype)
    if name == "tree_lstm_leaf_bwd":
        return r(2, H), r(2, H), p(2, 3 * H), r(2, H), np.zeros((2, 3 * H), dtype)
    if name in CELL_KERNELS:
        return cell_args(name, rng, 2, H, dtype)
    raise KeyError(name)


# --------------------------------------------------------------------------
# the PyTorch-style LSTM and GRU cells: fresh outputs, so also checked at
# several sizes, at extreme inputs, and their backward against finite differences
# --------------------------------------------------------------------------

CELL_KERNELS = ("lstm_cell_fwd", "lstm_cell_bwd", "gru_cell_fwd", "gru_cell_bwd")
CELL_EDGE = np.array([-1000.0, -100.0, -88.8, -30.0, -1.0, 0.0, 1.0, 30.0, 88.8, 100.0, 1000.0])
CELL_SIZES = [(1, 1), (1, 4), (2, 3), (7, 5), (33, 16), (3, 150), (0, 3)]
CELL_RTOL = {np.float64: 1e-10, np.float32: 1e-5}


def cell_args(name, rng, B, Hc, dtype, edge=False):
    """Arguments for cell kernel ``name`` with B rows and hidden size Hc; the
    saved activations come from the twin's forward, as a caller's would."""
    def draw(*shape):
        if edge:
            return rng.choice(CELL_EDGE, size=shape).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)

    def cot(*shape):
        return rng.standard_normal(shape).astype(dtype)

    if name == "lstm_cell_fwd":
        return draw(4 * Hc, B), draw(4 * Hc, B), draw(4 * Hc), draw(4 * Hc), draw(B, Hc)
    if name == "lstm_cell_bwd":
        c_prev = draw(B, Hc)
        _, _, acts = R.lstm_cell_fwd(draw(4 * Hc, B), draw(4 * Hc, B), draw(4 * Hc), draw(4 * Hc), c_prev)
        return cot(B, Hc), cot(B, Hc), acts, c_prev
    if name == "gru_cell_fwd":
        return draw(B, 3 * Hc), draw(B, 3 * Hc), draw(B, Hc)
    if name == "gru_cell_bwd":
        gh, h_prev = draw(B, 3 * Hc), draw(B, Hc)
        _, acts = R.gru_cell_fwd(draw(B, 3 * Hc), gh, h_prev)
        return cot(B, Hc), acts, gh, h_prev
    raise KeyError(name)


def _absmax(a):
    return float(np.max(np.abs(a))) if a.size else 0.0


@pytest.mark.parametrize("edge", [False, True], ids=["normal", "edge"])
@pytest.mark.parametrize("B,Hc", CELL_SIZES, ids=[f"B{b}H{h}" for b, h in CELL_SIZES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", CELL_KERNELS)
def test_cell_kernel_matches_twin(name, dtype, B, Hc, edge):
    rng = np.random.default_rng([CELL_KERNELS.index(name), B, Hc, int(edge)])
    args = cell_args(name, rng, B, Hc, dtype, edge)
    saved = [a.copy() for a in args]
    got = getattr(K, name)(*args)
    want = getattr(R, name)(*args)
    for a, sv in zip(args, saved):
        np.testing.assert_array_equal(a, sv, err_msg=f"{name} wrote to an input")
    assert len(got) == len(want)
    # absolute tolerance relative to the largest input or output: one rounding
    # of an input (r in gh_n = 1000, n = tanh(gi_n + r * gh_n)) moves a
    # cancelling output by about rtol * that input, whichever way is right
    rtol = CELL_RTOL[dtype]
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == dtype and g.shape == w.shape and g.flags.c_contiguous, f"{name} output {k}"
        assert not any(np.shares_memory(g, a) for a in args)
        assert np.all(np.isfinite(g)), f"{name} output {k} not finite"
        scale = max([1.0, _absmax(w)] + [_absmax(a) for a in args])
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=f"{name} output {k}")


def _cell_vjp_case(bwd_name, rng):
    """(f, xs, cots, grads) in float64, B=2, H=3: f(*xs) -> outputs; cots maps
    output index to its cotangent; grads(cots) maps input index to the
    backward kernel's gradient."""
    def n(*s):
        return rng.standard_normal(s)

    B, Hc = 2, 3
    if bwd_name == "lstm_cell_bwd":
        # gx, gh, b_ih, b_hh, c_prev: both products get dgates.T, both biases db
        xs = [n(4 * Hc, B), n(4 * Hc, B), n(4 * Hc), n(4 * Hc), n(B, Hc)]

        def grads(cots):
            _, _, acts = K.lstm_cell_fwd(*xs)
            dgates, dc_prev, db = K.lstm_cell_bwd(cots[0], cots[1], acts, xs[4])
            return {0: dgates.T, 1: dgates.T, 2: db, 3: db, 4: dc_prev}

        return K.lstm_cell_fwd, xs, {0: n(B, Hc), 1: n(B, Hc)}, grads
    xs = [n(B, 3 * Hc), n(B, 3 * Hc), n(B, Hc)]

    def grads(cots):
        _, acts = K.gru_cell_fwd(*xs)
        return dict(enumerate(K.gru_cell_bwd(cots[0], acts, xs[1], xs[2])))

    return K.gru_cell_fwd, xs, {0: n(B, Hc)}, grads


@pytest.mark.parametrize("bwd_name,zero", [("lstm_cell_bwd", None), ("lstm_cell_bwd", 0), ("lstm_cell_bwd", 1),
                                           ("gru_cell_bwd", None)])
def test_cell_bwd_is_vjp_of_fwd(bwd_name, zero):
    """Central differences over every input coordinate, also with the h or c
    cotangent all zeros (the last step, the root)."""
    f, xs, cots, grads = _cell_vjp_case(bwd_name, np.random.default_rng(7))
    if zero is not None:
        cots = {k: (np.zeros_like(v) if k == zero else v) for k, v in cots.items()}

    def loss(xs):
        outs = f(*xs)
        return sum(float(np.sum(cots[k] * outs[k])) for k in cots)

    eps = 1e-6
    for idx, g in grads(cots).items():
        fd = np.zeros_like(xs[idx])
        for pos in np.ndindex(xs[idx].shape):
            plus = [x.copy() for x in xs]
            minus = [x.copy() for x in xs]
            plus[idx][pos] += eps
            minus[idx][pos] -= eps
            fd[pos] = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8, err_msg=f"{bwd_name} input {idx}")


def _compare(name, got, want, tol):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{name}: result arity"
        for k, (g, w) in enumerate(zip(got, want)):
            _compare(f"{name}[{k}]", g, w, tol)
    elif isinstance(want, np.ndarray):
        assert got.shape == want.shape and got.dtype == want.dtype, \
            f"{name}: got {got.shape} {got.dtype}, twin {want.shape} {want.dtype}"
        np.testing.assert_allclose(got, want, err_msg=name, **tol)
    else:
        assert got == want, f"{name}: {got!r} vs {want!r}"


def test_every_kernel_has_a_twin():
    missing = [n for n in NAMES if not callable(getattr(R, n, None))]
    assert not missing, f"kernels without a numpy twin in reference_tree.py: {missing}"
    assert sorted(K.__all__) == NAMES and sorted(R.__all__) == NAMES


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", NAMES)
def test_kernel_matches_twin(name, dtype):
    args = make_args(name, np.random.default_rng(sum(map(ord, name))), dtype)
    a_k, a_r = copy.deepcopy(args), copy.deepcopy(args)
    got = getattr(K, name)(*a_k)
    want = getattr(R, name)(*a_r)
    _compare(name, got, want, TOL[dtype])
    for k, (x, y) in enumerate(zip(a_k, a_r)):      # output buffers and in-place accumulations
        if isinstance(x, np.ndarray):
            _compare(f"{name} argument {k}", x, y, TOL[dtype])


EDGE = np.array([-1000.0, -745.0, -100.0, -88.8, -30.0, -1.0, -1e-9, -1e-300, 0.0, 1e-300, 1e-12, 0.5, 1.0,
                 20.0, 30.0, 88.8, 100.0, 1000.0])


def _sigmoid_tanh(x, path="tree"):
    """sigmoid(x) and tanh(x) of a row ``x`` (1, m) from kernels that use
    them. ``path`` "tree": a Tree-LSTM leaf's input gate (pre-activations
    [x | x | x], no bias) and a tanh row (zero bias); "lstm_cell": the LSTM
    cell's input gate and g gate, read through its transposing pass
    (gx = x in every chunk for B rows, gh and the biases zero); "gru_cell": the
    GRU cell's reset gate and candidate (gh_n = 0, so n = tanh(gi_n))."""
    m = x.shape[1]
    if path == "lstm_cell":
        # 4 rows of m, one gate column each: exercises B > 1 (strided reads)
        xs = np.ascontiguousarray(x.reshape(4, -1)) if m % 4 == 0 else x
        B, Hc = xs.shape
        gx = np.ascontiguousarray(np.tile(xs, (1, 4)).T)
        z = np.zeros_like(gx)
        _, _, acts = K.lstm_cell_fwd(gx, z, np.zeros(4 * Hc, x.dtype), np.zeros(4 * Hc, x.dtype),
                                     np.zeros((B, Hc), x.dtype))
        return acts[:, :Hc].reshape(1, -1), acts[:, 2 * Hc:3 * Hc].reshape(1, -1)
    if path == "gru_cell":
        gi = np.concatenate([x, x, x], axis=1)
        _, acts = K.gru_cell_fwd(gi, np.zeros_like(gi), np.zeros_like(x))
        return acts[:, :m], acts[:, 2 * m:]
    s, acts = np.zeros((1, 2 * m), x.dtype), np.zeros((1, 3 * m), x.dtype)
    K.tree_lstm_leaf_node_fwd(np.concatenate([x, x, x], axis=1), np.zeros(3 * m, x.dtype), s, acts)
    h = np.zeros((1, m), x.dtype)
    K.tanh_rows_fwd(np.ascontiguousarray(x), np.zeros(m, x.dtype), 0, h)
    return acts[:, :m], h


PATHS = ["tree", "lstm_cell", "gru_cell"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_activations_at_extreme_inputs(dtype, path):
    """The branch-free exponential: full relative accuracy from tiny to huge
    inputs (no overflow, no cancellation near 0)."""
    x = EDGE.astype(dtype)[None, :]
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(-np.abs(EDGE))
        sig = np.where(EDGE >= 0, 1 / (1 + e), e / (1 + e))
    rtol = 1e-14 if dtype == np.float64 else 1e-6
    s, t = _sigmoid_tanh(x, path)
    s, t = s[0].astype(np.float64), t[0].astype(np.float64)
    tiny = 1e-300 if dtype == np.float64 else 1e-37      # below: subnormal or zero, compared absolutely
    finite = sig > tiny
    np.testing.assert_allclose(s[finite], sig.astype(dtype).astype(np.float64)[finite], rtol=rtol)
    assert np.all(s[~finite] <= tiny) and np.all(s >= 0) and np.all(s <= 1)
    np.testing.assert_allclose(t, np.tanh(x[0].astype(np.float64)), rtol=rtol, atol=0)


@pytest.mark.parametrize("path", PATHS)
def test_activations_propagate_nan(path):
    x = np.array([[np.nan, 0.3, -np.inf, np.inf]])
    s, t = _sigmoid_tanh(x, path)
    s, t = s[0], t[0]
    assert np.isnan(s[0]) and np.isnan(t[0])
    np.testing.assert_allclose(s[1:], [1 / (1 + np.exp(-0.3)), 0.0, 1.0], atol=1e-300)
    np.testing.assert_allclose(t[1:], [np.tanh(0.3), -1.0, 1.0])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_per_node_primitives_one_row_equal_many_rows(dtype):
    """The per-node Tree-LSTM primitives take the fused matrix-vector kernels
    for one or two rows and a BLAS product for more: both give the same rows."""
    from dynnets.autograd.primitives import tree as P

    rng = np.random.default_rng(7)
    Hh, E = 5, 7
    s_l, s_r = (rng.standard_normal((4, 2 * Hh)).astype(dtype) for _ in range(2))
    w, b = rng.standard_normal((2 * Hh, 5 * Hh)).astype(dtype), rng.standard_normal(5 * Hh).astype(dtype)
    x, wl, bl = (rng.standard_normal((4, E)).astype(dtype), rng.standard_normal((E, 3 * Hh)).astype(dtype),
                 rng.standard_normal(3 * Hh).astype(dtype))
    assert P._MV_ROWS < 4
    many = P._tree_lstm_node(s_l, s_r, w, b)
    many_leaf = P._tree_lstm_leaf_node(x, wl, bl)
    for r in range(4):
        one = P._tree_lstm_node(s_l[r:r + 1], s_r[r:r + 1], w, b)
        for k in range(3):
            np.testing.assert_allclose(one[k], many[k][r:r + 1], **TOL[dtype])
        one_leaf = P._tree_lstm_leaf_node(x[r:r + 1], wl, bl)
        for k in range(2):
            np.testing.assert_allclose(one_leaf[k], many_leaf[k][r:r + 1], **TOL[dtype])


def _ulp_sweep(dtype, n):
    """n magnitudes log-uniform over the whole finite range (both signs),
    plus uniform draws where the gates live."""
    rng = np.random.default_rng(3)
    fi = np.finfo(dtype)
    mags = np.exp(rng.uniform(np.log(fi.smallest_subnormal), np.log(fi.max), n))
    # and where exp(-|x|) leaves the normal range of float32 and of float64
    edges = np.concatenate([np.linspace(-88.5, -86.5, 400), np.linspace(-709.5, -707.5, 400)])
    x = np.concatenate([mags, -mags, rng.uniform(-30, 30, n), rng.uniform(-1, 1, n), edges, [0.0, -0.0]]).astype(dtype)
    return x[np.isfinite(x)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_activations_within_a_few_ulp_over_the_whole_range(dtype, path):
    """sigmoid and tanh of the kernels within 4 ulp of the exact values
    (long-double reference) wherever the result is a normal number, and
    within the smallest normal absolutely where it is subnormal or zero
    (measured: float32 2.75 / 2.50 ulp, float64 2.32 / 3.04 ulp at most)."""
    x = _ulp_sweep(dtype, 5000)
    x = x[:len(x) // 4 * 4]
    s, t = _sigmoid_tanh(x[None, :], path)
    xe = x.astype(np.longdouble)
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(-np.abs(xe))
        want = {"sigmoid": (s[0], np.where(xe >= 0, 1 / (1 + e), e / (1 + e))), "tanh": (t[0], np.tanh(xe))}
    fi = np.finfo(dtype)
    for name, (got, ref) in want.items():
        normal = np.abs(ref) >= fi.tiny
        ulp = np.spacing(np.abs(ref.astype(dtype))).astype(np.longdouble)
        err = np.abs(got.astype(np.longdouble) - ref)
        worst = np.argmax(np.where(normal, err / ulp, 0))
        assert (err / ulp)[normal].max() <= 4, f"{name}({x[worst]!r}) = {got[worst]!r}, exact {ref[worst]!r}"
        assert err[~normal].max(initial=0) <= fi.tiny, name


@pytest.mark.parametrize("mod", [K, R], ids=["kernel", "twin"])
def test_scatter_rows_add_refuses_bad_indices_and_shapes_writing_nothing(mod):
    g, out = np.ones((2, 3)), np.zeros((5, 3))
    for idx, n, rows in ((np.array([0, 4]), 4, g), (np.array([0, -5]), 4, g), (np.array([0, 1]), 6, g),
                         (np.array([0, 1]), 4, np.ones((3, 3))), (np.array([0, 1]), 4, np.ones((2, 4))),
                         (np.array([0, 0]), 0, g), (np.array([0, 0]), -1, g)):
        assert mod.scatter_rows_add(rows, idx, n, out) is False
        assert not out.any()
    assert mod.scatter_rows_add(g, np.array([-4, 0]), 4, out) is True
    np.testing.assert_array_equal(out, np.array([[2.0] * 3] + [[0.0] * 3] * 4))
