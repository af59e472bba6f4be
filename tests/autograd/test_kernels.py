"""Numba kernels against their numpy twins, and backward kernels against
finite differences of their forward kernels.

Runs the same with ``NUMBA_DISABLE_JIT=1`` (the kernels are then plain Python).
"""

import ast
import builtins
import inspect

import numpy as np
import pytest

from dynnets.autograd import kernels, reference

# Overflow in exp or an invalid operation must never happen, even at extreme
# inputs: every softmax subtracts the row max.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _public_kernels():
    out = {}
    for name, obj in vars(kernels).items():
        if name.startswith("_") or not callable(obj):
            continue
        if getattr(obj, "__module__", None) == kernels.__name__:
            out[name] = obj
    return out


KERNELS = _public_kernels()
NAMES = sorted(KERNELS)

# Values that break naive formulas: exp(88.8) overflows float32, exp(1000)
# overflows float64.
EDGE = np.array([-1000.0, -100.0, -88.8, -30.0, -1.0, 0.0, 1.0, 30.0, 88.8, 100.0, 1000.0])

SIZES = [(1, 1), (1, 4), (2, 3), (7, 5), (33, 16), (0, 3)]
DTYPES = {np.float64: 1e-10, np.float32: 1e-5}


# --------------------------------------------------------------------------
# inputs for every kernel; "free" arrays come from draw(), the rest are made
# consistent with them through the reference forward, as a caller would.
# --------------------------------------------------------------------------


def _drawer(rng, dtype, edge):
    def draw(*shape):
        if edge:
            return rng.choice(EDGE, size=shape).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)

    return draw


def _normal(rng, dtype):
    return lambda *shape: rng.standard_normal(shape).astype(dtype)


def make_args(name, rng, B, H, dtype, edge=False):
    """Arguments for kernel ``name`` with B rows and width H."""
    draw = _drawer(rng, dtype, edge)
    cot = _normal(rng, dtype)
    R = reference
    if name == "embedding_bwd":
        V = 5
        return rng.integers(0, V, size=B).astype(np.int64), cot(B, H), V
    if name == "softmax_cross_entropy_fwd":
        weights = rng.uniform(0, 2, size=B).astype(dtype)
        weights[::3] = 0  # masked rows
        return draw(B, H), rng.integers(0, H, size=B).astype(np.int64), weights
    if name == "softmax_cross_entropy_bwd":
        logits, targets, weights = make_args("softmax_cross_entropy_fwd", rng, B, H, dtype, edge)
        _, probs = R.softmax_cross_entropy_fwd(logits, targets, weights)
        return probs, targets, weights, cot(B)
    if name in ("softmax_fwd", "log_softmax_fwd"):
        return (draw(B, H),)
    if name == "outer_sum_fwd":
        return draw(B, H), draw(B, H + 2)
    if name == "gelu_fwd":
        return (draw(B * H),)
    if name == "gelu_bwd":
        return draw(B * H), cot(B * H)
    if name == "layer_norm_fwd":
        return draw(B, H), cot(H), cot(H), 1e-5
    if name == "layer_norm_bwd":
        return draw(B, H), cot(H), cot(B, H), 1e-5
    raise KeyError(f"make_args: no inputs for kernel {name!r}; add a case")


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _absmax(a):
    return float(np.max(np.abs(a))) if a.size else 0.0


def _assert_close(got, want, rtol, what, inputs=()):
    # Absolute tolerance relative to the largest input or output: a rounding
    # of one input (e.g. r in gh_n = 1000, n = tanh(gi_n + r * gh_n)) moves a
    # cancelling output by about rtol * that input, whichever way is right.
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    scale = max([1.0, _absmax(want)] + [_absmax(a) for a in inputs])
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


# --------------------------------------------------------------------------
# structure: every kernel has a twin, inputs, a VJP check, and obeys rule 3
# --------------------------------------------------------------------------


def test_all_lists_every_kernel():
    assert sorted(kernels.__all__) == NAMES
    assert sorted(reference.__all__) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_twin_exists_with_same_signature(name):
    twin = getattr(reference, name, None)
    assert twin is not None, f"kernel {name} has no twin in reference.py"
    py_func = getattr(KERNELS[name], "py_func", KERNELS[name])
    assert inspect.signature(twin) == inspect.signature(py_func)


@pytest.mark.parametrize("name", NAMES)
def test_every_kernel_has_inputs(name):
    make_args(name, np.random.default_rng(0), 2, 3, np.float64)


def _kernel_defs():
    tree = ast.parse(inspect.getsource(kernels))
    return tree, [n for n in tree.body if isinstance(n, ast.FunctionDef)]


def test_kernels_imports_only_numpy_and_numba():
    tree, _ = _kernel_defs()
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            roots.add(node.module.split(".")[0])
    assert roots <= {"numpy", "numba", "math"}, roots      # math: libm's erf, which numpy lacks


def test_kernels_are_cached_njit_without_fastmath():
    _, defs = _kernel_defs()
    for fn in defs:
        (deco,) = fn.decorator_list
        assert isinstance(deco, ast.Call) and deco.func.id == "njit", fn.name
        kw = {k.arg: ast.literal_eval(k.value) for k in deco.keywords}
        assert kw.get("cache") is True and kw.get("fastmath") is False, fn.name


def test_kernels_read_no_module_globals():
    # Numba's cache freezes globals as constants: only numpy and this file's
    # own jitted functions may be referenced inside a kernel.
    _, defs = _kernel_defs()
    allowed = {"np", "math"} | {fn.name for fn in defs} | set(dir(builtins))
    for fn in defs:
        names = [n for stmt in fn.body for n in ast.walk(stmt) if isinstance(n, ast.Name)]
        bound = {a.arg for a in fn.args.args}
        bound |= {n.id for n in names if isinstance(n.ctx, ast.Store)}
        loads = {n.id for n in names if isinstance(n.ctx, ast.Load)}
        assert loads - bound <= allowed, (fn.name, loads - bound - allowed)


# --------------------------------------------------------------------------
# kernel == twin
# --------------------------------------------------------------------------


@pytest.mark.parametrize("edge", [False, True], ids=["normal", "edge"])
@pytest.mark.parametrize("B,H", SIZES, ids=[f"B{b}H{h}" for b, h in SIZES])
@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", NAMES)
def test_kernel_matches_twin(name, dtype, B, H, edge):
    rng = np.random.default_rng([NAMES.index(name), B, H, int(edge)])
    args = make_args(name, rng, B, H, dtype, edge)
    saved = [a.copy() if isinstance(a, np.ndarray) else a for a in args]

    got = _as_tuple(KERNELS[name](*args))
    want = _as_tuple(getattr(reference, name)(*args))

    for a, s in zip(args, saved):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, s, err_msg=f"{name} wrote to an input")
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == dtype, f"{name} output {k}: dtype {g.dtype}, expected {dtype}"
        assert g.flags.c_contiguous
        assert not any(np.shares_memory(g, a) for a in args if isinstance(a, np.ndarray))
        assert np.all(np.isfinite(g)), f"{name} output {k} not finite"
        floats = [a for a in args if isinstance(a, np.ndarray) and a.dtype == dtype]
        _assert_close(g, w, DTYPES[dtype], f"{name} output {k}", floats)


def test_softmax_cross_entropy_masked_row_is_zero():
    logits = np.array([[1.0, 2.0, 3.0], [1000.0, -1000.0, 0.0]])
    targets = np.array([0, 1], dtype=np.int64)
    weights = np.array([0.0, 1.0])
    losses, probs = kernels.softmax_cross_entropy_fwd(logits, targets, weights)
    assert losses[0] == 0.0
    np.testing.assert_allclose(losses[1], 2000.0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    d = kernels.softmax_cross_entropy_bwd(probs, targets, weights, np.ones(2))
    assert np.all(d[0] == 0.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_softmax_fwd_far_from_zero(dtype):
    # m + log(sum) rounds to the row max m once |m| dwarfs log(sum): the result
    # must be (x - m) - log(sum), exact for equal logits however large
    x = np.array([[1e17, 1e17, 1e17], [-1e17, -1e17, -1e17], [1e6, 1e6, 1e6 - 1.0]], dtype=dtype)
    got = kernels.log_softmax_fwd(x)
    np.testing.assert_array_equal(got[:2], np.full((2, 3), -np.log(3.0), dtype=dtype))
    np.testing.assert_allclose(got, reference.log_softmax_fwd(x), rtol=1e-6 if dtype == np.float32 else 1e-14)


def test_embedding_bwd_over_unique_ids():
    # The caller's contract: scatter over np.unique's inverse, then the rows of
    # the full gradient at the unique ids are the row-sparse result.
    rng = np.random.default_rng(1)
    ids = np.array([4, 1, 4, 4, 0, 1], dtype=np.int64)
    dout = rng.standard_normal((len(ids), 3))
    uniq, inverse = np.unique(ids, return_inverse=True)
    rows = kernels.embedding_bwd(inverse.ravel().astype(np.int64), dout, len(uniq))
    full = kernels.embedding_bwd(ids, dout, 6)
    np.testing.assert_allclose(rows, full[uniq], rtol=1e-12)
    assert np.all(np.delete(full, uniq, axis=0) == 0)


# --------------------------------------------------------------------------
# bwd == VJP of fwd, by central differences over every input coordinate
# --------------------------------------------------------------------------


def _vjp_case(bwd_name, rng):
    """(f, xs, wrt, cots, grads): f(*xs) -> outputs; cots maps output index to
    its cotangent; grads maps input index to the backward kernel's result."""
    K = kernels
    n = lambda *s: rng.standard_normal(s)  # noqa: E731
    H = 3
    if bwd_name == "embedding_bwd":
        ids = np.array([3, 0, 3, 1, 3], dtype=np.int64)
        xs = [n(4, H)]
        cots = {0: n(len(ids), H)}
        return (
            lambda w: w[ids],               # the embedding primitive's forward
            xs,
            cots,
            lambda cots: {0: K.embedding_bwd(ids, cots[0], 4)},
        )
    if bwd_name == "softmax_cross_entropy_bwd":
        targets = np.array([2, 0, 4], dtype=np.int64)
        weights = np.array([1.5, 0.0, 0.7])
        xs = [3 * n(3, 5)]
        cots = {0: n(3)}

        def grads(cots):
            _, probs = K.softmax_cross_entropy_fwd(xs[0], targets, weights)
            return {0: K.softmax_cross_entropy_bwd(probs, targets, weights, cots[0])}

        return lambda x: K.softmax_cross_entropy_fwd(x, targets, weights), xs, cots, grads
    if bwd_name == "gelu_bwd":
        xs = [2 * n(7)]
        cots = {0: n(7)}
        return K.gelu_fwd, xs, cots, lambda cots: {0: K.gelu_bwd(xs[0], cots[0])}
    if bwd_name == "layer_norm_bwd":
        xs = [n(4, 5), n(5), n(5)]
        cots = {0: n(4, 5)}

        def grads(cots):
            dx, dw, db = K.layer_norm_bwd(xs[0], xs[1], cots[0], 1e-5)
            return {0: dx, 1: dw, 2: db}
        return lambda x, w, b: K.layer_norm_fwd(x, w, b, 1e-5), xs, cots, grads
    raise KeyError(f"_vjp_case: no finite-difference case for {bwd_name!r}; add one")


BWD_NAMES = [n for n in NAMES if n.endswith("_bwd")]
# Where the forward has several differentiated outputs (h and c), also check
# with each cotangent all zeros, as happens at the last step or the root.
VJP_PARAMS = [(n, None) for n in BWD_NAMES] + [
    (n, k)
    for n in BWD_NAMES
    for k in sorted(_vjp_case(n, np.random.default_rng(0))[2])
    if len(_vjp_case(n, np.random.default_rng(0))[2]) > 1
]


VJP_IDS = [f"{n}-all" if k is None else f"{n}-zero_d{k}" for n, k in VJP_PARAMS]


@pytest.mark.parametrize("bwd_name,zero", VJP_PARAMS, ids=VJP_IDS)
def test_bwd_is_vjp_of_fwd(bwd_name, zero):
    rng = np.random.default_rng(7)
    f, xs, cots, grads = _vjp_case(bwd_name, rng)
    if zero is not None:
        cots = {k: (np.zeros_like(v) if k == zero else v) for k, v in cots.items()}

    def loss(xs):
        outs = _as_tuple(f(*xs))
        return sum(float(np.sum(cots[k] * outs[k])) for k in cots)

    got = grads(cots)
    eps = 1e-6
    for idx, g in got.items():
        fd = np.zeros_like(xs[idx])
        for pos in np.ndindex(xs[idx].shape):
            plus = [x.copy() for x in xs]
            minus = [x.copy() for x in xs]
            plus[idx][pos] += eps
            minus[idx][pos] -= eps
            fd[pos] = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8, err_msg=f"{bwd_name} input {idx}")


@pytest.mark.parametrize("d", [8, 13, 131])
@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: d.__name__)
def test_layer_norm_lanes_match_twin_and_do_not_depend_on_the_row_count(d, dtype):
    """The row statistics add 8 lanes then a tail (d = 8: lanes only; 13 and
    131: both); a row's result is bitwise the same alone or among others."""
    rng = np.random.default_rng(d)
    x, dy = (rng.standard_normal((6, d)).astype(dtype) * 3 + 1 for _ in range(2))
    w, b = (rng.standard_normal(d).astype(dtype) for _ in range(2))
    got = kernels.layer_norm_fwd(x, w, b, 1e-5)
    np.testing.assert_allclose(got, reference.layer_norm_fwd(x, w, b, 1e-5), rtol=DTYPES[dtype], atol=DTYPES[dtype])
    for g, t in zip(kernels.layer_norm_bwd(x, w, dy, 1e-5), reference.layer_norm_bwd(x, w, dy, 1e-5)):
        np.testing.assert_allclose(g, t, rtol=10 * DTYPES[dtype], atol=10 * DTYPES[dtype])
    np.testing.assert_array_equal(kernels.layer_norm_fwd(x[3:4].copy(), w, b, 1e-5), got[3:4])
    np.testing.assert_array_equal(kernels.layer_norm_bwd(x[3:4].copy(), w, dy[3:4].copy(), 1e-5)[0],
                                  kernels.layer_norm_bwd(x, w, dy, 1e-5)[0][3:4])
