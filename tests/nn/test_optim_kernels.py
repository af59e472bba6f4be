"""Optimizer kernels (dynnets.nn.optim_kernels) against their numpy twins,
the block update rules of dynnets.nn.optim; also passes with
``NUMBA_DISABLE_JIT=1``."""

import numpy as np
import pytest

from dynnets import nn
from dynnets.autograd import RowSparse
from dynnets.nn import optim
from dynnets.nn import optim_kernels as OK


def _arrays(rng, shape, dt):
    p = rng.standard_normal(shape).astype(dt)
    acc = rng.uniform(0.0, 2.0, shape).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    g.flat[::7] = 0.0      # zero gradients with a zero accumulator exercise eps
    acc.flat[::14] = 0.0
    return p, acc, g


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_adagrad_dense_matches_numpy_twin(dt):
    rng = np.random.default_rng(0)
    p, acc, g = _arrays(rng, (37, 11), dt)
    p2, acc2 = p.copy(), acc.copy()
    clr, eps = 0.05, 1e-10
    optim._adagrad_block(p2, acc2, g, clr, eps)
    OK.adagrad_dense(p.reshape(-1), acc.reshape(-1), g.reshape(-1), np.array((clr, eps), dtype=dt))
    # same operations in the same precision and order: equal to the last ulp
    np.testing.assert_array_max_ulp(acc, acc2, maxulp=0)
    np.testing.assert_array_max_ulp(p, p2, maxulp=1)
    assert p.dtype == dt and acc.dtype == dt


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_adagrad_rows_matches_numpy_twin(dt):
    rng = np.random.default_rng(1)
    p, acc, _ = _arrays(rng, (50, 9), dt)
    rows = np.array([2, 3, 17, 40, 49], dtype=np.int64)
    vals = rng.standard_normal((5, 9)).astype(dt)
    p2, acc2 = p.copy(), acc.copy()
    clr, eps = 0.1, 1e-6
    pt = p2.copy()
    optim._rows_apply(pt, rows, (acc2,), optim._adagrad_block, vals, clr, eps)
    OK.adagrad_rows(p, acc, rows, vals, np.array((clr, eps), dtype=dt))
    np.testing.assert_array_max_ulp(acc, acc2, maxulp=0)
    np.testing.assert_array_max_ulp(p, pt, maxulp=1)
    untouched = np.setdiff1d(np.arange(50), rows)
    assert np.array_equal(p[untouched], p2[untouched]) and np.array_equal(acc[untouched], acc2[untouched])


def test_adagrad_optimizer_fused_and_fallback_paths_agree():
    """The optimizer's fused path (contiguous arrays) and its numpy fallback
    (a non-contiguous gradient) give the same parameters, dense and sparse."""
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((6, 4)).astype(np.float32)
    e0 = rng.standard_normal((10, 4)).astype(np.float32)
    grads = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(3)]
    rows = [np.array([1, 5, 5, 9]), np.array([0, 3]), np.array([9, 1])]
    svals = [rng.standard_normal((len(r), 4)).astype(np.float32) for r in rows]
    out = []
    for contiguous in (True, False):
        w, e = nn.Parameter(w0.copy()), nn.Parameter(e0.copy())
        opt = optim.Adagrad([w, e], lr=0.05, lr_decay=0.01, initial_accumulator_value=0.1)
        for g, r, v in zip(grads, rows, svals):
            w._grad = np.ascontiguousarray(g.T) if contiguous else g.T
            vv = v if contiguous else np.asfortranarray(v)
            e._grad = RowSparse(r, vv, e0.shape)
            opt.step()
        out.append((w.numpy().copy(), e.numpy().copy(), opt.state[w]["sum"].copy(), opt.state[e]["sum"].copy()))
    for a, b in zip(*out):
        np.testing.assert_array_max_ulp(a, b, maxulp=1)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_adam_dense_kernel_from_the_rule_matches_numpy_twin(dt):
    rng = np.random.default_rng(3)
    p, v, g = _arrays(rng, (23, 7), dt)
    m = rng.standard_normal((23, 7)).astype(dt)
    p2, m2, v2 = p.copy(), m.copy(), v.copy()
    b1, b2, eps, step_size, sqrt_bc2 = 0.9, 0.999, 1e-8, 0.01, 0.3
    optim._adam_block(p2, m2, v2, g, b1, b2, step_size, sqrt_bc2, eps)
    OK.adam_dense(p.reshape(-1), m.reshape(-1), v.reshape(-1), g.reshape(-1),
                  np.array((b1, b2, 1.0 - b1, 1.0 - b2, step_size, sqrt_bc2, eps), dtype=dt))
    np.testing.assert_array_max_ulp(m, m2, maxulp=1)
    np.testing.assert_array_max_ulp(v, v2, maxulp=1)
    np.testing.assert_array_max_ulp(p, p2, maxulp=1)
    assert p.dtype == m.dtype == v.dtype == dt


def test_the_rule_kernels_are_generated_from_the_rules_formulas():
    # one definition: the kernel's source is the rule's steps, in order, in the dtype
    src = OK.rule_source(OK.ADAM_RULE, np.float32)
    assert "m[i] = (m[i] * b1 + c1 * gi)" in src and "np.float32(math.sqrt(v[i]))" in src
    assert src.index("m[i] =") < src.index("v[i] =") < src.index("p[i] =")
    rows = OK.rule_source(OK.ADAGRAD_RULE, np.float64, rows=True)
    assert "accr[j] = (accr[j] + gj * gj)" in rows and "def kernel(p, acc, rows, vals, scal)" in rows


def test_adam_optimizer_fused_and_fallback_paths_agree():
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((6, 4)).astype(np.float32)
    grads = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(3)]
    out = []
    for contiguous in (True, False):
        w = nn.Parameter(w0.copy())
        opt = optim.Adam([w], lr=0.05, weight_decay=0.01)
        for g in grads:
            w._grad = np.ascontiguousarray(g.T) if contiguous else g.T
            opt.step()
        out.append((w.numpy().copy(), opt.state[w]["exp_avg"].copy(), opt.state[w]["exp_avg_sq"].copy()))
    for a, b in zip(*out):
        np.testing.assert_array_max_ulp(a, b, maxulp=2)
