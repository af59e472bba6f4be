"""The fused encoder-layer kernels (:mod:`dynnets.autograd.kernels_fused`)
against their numpy twins (:mod:`dynnets.autograd.reference_fused`), and the
backward kernel as the VJP of the forward one (issue 25 §3)."""
import numpy as np
import pytest

from dynnets.autograd import kernels_fused as KF
from dynnets.autograd import reference_fused as RF

SHAPES = [(5, 8), (3, 7), (1, 1), (4, 130), (0, 6)]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _args(rng, n, d, dtype, scale=1.0):
    x = (rng.standard_normal((n, d)) * scale + 3.0).astype(dtype)
    r = rng.standard_normal((n, d)).astype(dtype)
    w = rng.standard_normal(d).astype(dtype)
    b = rng.standard_normal(d).astype(dtype)
    g = rng.standard_normal((n, d)).astype(dtype)
    return x, r, w, b, g


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("n,d", SHAPES)
def test_add_layer_norm_kernels_match_twins(n, d, dtype):
    rng = np.random.default_rng([n, d])
    x, r, w, b, g = _args(rng, n, d, dtype)
    saved = [a.copy() for a in (x, r, w, b, g)]
    got = KF.add_layer_norm_fwd(x, r, w, b, 1e-5)
    want = RF.add_layer_norm_fwd(x, r, w, b, 1e-5)
    assert got.dtype == dtype and got.shape == (n, d) and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    for k, (a, c) in enumerate(zip(KF.add_layer_norm_bwd(x, r, w, g, 1e-5), RF.add_layer_norm_bwd(x, r, w, g, 1e-5))):
        assert a.dtype == dtype and a.shape == c.shape, k
        np.testing.assert_allclose(a, c, rtol=TOL[dtype], atol=TOL[dtype] * max(n, 1), err_msg=f"output {k}")
    for a, s in zip((x, r, w, b, g), saved):
        np.testing.assert_array_equal(a, s)           # no input written


def test_add_layer_norm_matches_layer_norm_of_the_sum():
    # the specification: torch's layer_norm of x + r (biased variance, eps inside the root)
    rng = np.random.default_rng(0)
    x, r, w, b, _ = _args(rng, 4, 6, np.float64)
    s = x + r
    ref = (s - s.mean(1, keepdims=True)) / np.sqrt(s.var(1, keepdims=True) + 0.1) * w + b
    np.testing.assert_allclose(KF.add_layer_norm_fwd(x, r, w, b, 0.1), ref, rtol=1e-12, atol=1e-12)


def test_add_layer_norm_bwd_is_the_vjp_of_fwd():
    rng = np.random.default_rng(1)
    x, r, w, b, g = _args(rng, 3, 5, np.float64)
    ds, dw, db = KF.add_layer_norm_bwd(x, r, w, g, 1e-5)
    h = 1e-6

    def loss(x_, r_, w_, b_):
        return float((KF.add_layer_norm_fwd(x_, r_, w_, b_, 1e-5) * g).sum())

    for k, (arr, grad) in enumerate(((x, ds), (r, ds), (w, dw), (b, db))):
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            args = [a.copy() for a in (x, r, w, b)]
            args[k][idx] += h
            up = loss(*args)
            args[k][idx] -= 2 * h
            num[idx] = (up - loss(*args)) / (2 * h)
        np.testing.assert_allclose(grad, num, rtol=1e-6, atol=1e-7, err_msg=f"input {k}")


def test_constant_row_with_eps_zero_is_nan_not_an_error():
    x = np.ones((2, 4))
    with np.errstate(divide="ignore", invalid="ignore"):        # NUMBA_DISABLE_JIT=1 computes with numpy scalars
        out = KF.add_layer_norm_fwd(x, np.zeros_like(x), np.ones(4), np.zeros(4), 0.0)
    assert np.isnan(out).all()


def test_fused_kernels_reassociate_sums_only():
    """kernels_fused is the one kernel module compiled with fastmath flags,
    and only with reassociation and contraction (the row sums vectorise):
    never nnan/ninf/arcp/afn, which would change what NaN, inf and division
    give; everything else as :mod:`dynnets.autograd.kernels` (cached njit)."""
    import ast
    import inspect
    tree = ast.parse(inspect.getsource(KF))
    defs = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
    assert {f.name for f in defs if not f.name.startswith("_")} == set(KF.__all__) == {"add_layer_norm_fwd",
                                                                                      "add_layer_norm_bwd"}
    for fn in defs:
        (deco,) = fn.decorator_list
        kw = {k.arg: ast.literal_eval(k.value) for k in deco.keywords}
        assert deco.func.id == "njit" and kw.get("cache") is True, fn.name
        assert set(kw.get("fastmath")) == {"reassoc", "contract"}, fn.name
