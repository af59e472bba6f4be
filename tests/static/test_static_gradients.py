"""Static gradients equal eager gradients, for every primitive of the table.

The sample inputs are the eager table test's (``tests/autograd/test_primitives.py``
``SAMPLES``), so a primitive added there is checked here too. For each case a
static graph computes ``sum_k sum(out_k * W_k)`` (fixed random weights) of the
selected outputs and its symbolic gradients with respect to the differentiated
inputs (placeholders); eager mode computes the same with ``backward``. Both run
the table's forward implementations and VJPs; they must agree to rounding.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import dynnets.static as ds
from dynnets.autograd.engine import bind
from dynnets.autograd.primitives import PRIMITIVES
from dynnets.autograd.creation import tensor

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "_eager_primitive_samples", os.path.join(_HERE, "..", "autograd", "test_primitives.py"))
_samples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_samples)
SAMPLES = _samples.SAMPLES


def _cases():
    out = []
    for name in sorted(PRIMITIVES):
        gen = SAMPLES.get(name)
        if gen is None or not PRIMITIVES[name].differentiable:
            continue
        seed = sum(map(ord, name))
        for case in gen(np.random.default_rng(seed)):
            out.append(pytest.param(name, case, id=f"{name}-{case.id}"))
    return out


def test_every_primitive_is_covered():
    missing = sorted(n for n, p in PRIMITIVES.items() if p.differentiable and n not in SAMPLES)
    assert not missing, f"no samples (so no static-vs-eager gradient check) for {missing}"


def _select(prim, case, out):
    if prim.multiple_results:
        keep = case.outputs if case.outputs is not None else range(len(out))
        return [out[k] for k in keep]
    return [out]


@pytest.mark.parametrize("name,case", _cases())
def test_static_gradients_equal_eager(name, case):
    if name in _samples.EAGER_ONLY:
        pytest.skip(f"{name} runs in eager mode only")
    prim = PRIMITIVES[name]
    diff = case.diff_positions(prim)
    rng = np.random.default_rng(7)

    # eager
    targs = list(case.args)
    leaves = {}
    for k in diff:
        leaves[k] = tensor(np.array(case.args[k]), requires_grad=True)
        targs[k] = leaves[k]
    eouts = _select(prim, case, bind(prim, *targs, **case.attrs))
    weights = [rng.standard_normal(np.shape(o.data)) for o in eouts]
    eloss = None
    for o, w in zip(eouts, weights):
        term = (o * w).sum()
        eloss = term if eloss is None else eloss + term
    eloss.backward()

    # static: the same function of placeholders
    g = ds.Graph()
    with g.as_default():
        sargs = list(case.args)
        phs = {}
        for k in diff:
            a = np.asarray(case.args[k])
            phs[k] = ds.placeholder(a.shape, a.dtype, name=f"in{k}")
            sargs[k] = phs[k]
        souts = _select(prim, case, bind(prim, *sargs, **case.attrs))
        sloss = None
        for o, w in zip(souts, weights):
            # a constant, not the array: TF1 converts an array operand to o's dtype, eager promotes
            term = ds.reduce_sum(o * ds.constant(w))
            sloss = term if sloss is None else sloss + term
        grads = ds.gradients(sloss, [phs[k] for k in diff])
    feed = {phs[k]: np.asarray(case.args[k]) for k in diff}
    for optimize in (False, True):
        with ds.Session(g, optimize=optimize) as sess:
            for _ in range(3):          # tier-1 and tier-2 executors
                res = sess.run([sloss, grads, souts], feed)
        lval, gvals, ovals = res
        np.testing.assert_allclose(lval, eloss.data, rtol=1e-10, atol=1e-10)
        for o, eo in zip(ovals, eouts):
            np.testing.assert_allclose(o, eo.data, rtol=1e-12, atol=1e-12)
        for k, gv in zip(diff, gvals):
            eg = leaves[k].grad
            if eg is None:
                assert gv is None or np.allclose(gv, 0), f"{name}: input {k} has a static gradient but no eager one"
                continue
            assert gv is not None, f"{name}: input {k} has an eager gradient but no static one"
            assert isinstance(gv, (np.ndarray, np.generic)), f"{name}: fetched gradient is a {type(gv).__name__}"
            np.testing.assert_allclose(gv, eg.data, rtol=1e-10, atol=1e-10,
                                       err_msg=f"{name}-{case.id}: gradient of input {k} (optimize={optimize})")
