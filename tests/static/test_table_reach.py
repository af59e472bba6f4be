"""One table for real: a primitive declared in this file by the README's
"How to add a primitive" recipe (``softplus``: forward, shape rule, VJP,
batching rule, and its native scalar form and scalar VJP) runs eagerly, in a
static graph with its symbolic gradient, under autobatch, and on the native
plan tier, with nothing of it in ``dynnets/static/native.py``. The native tier
reads only the table (``defprim(native=, native_vjp=)``), and ``defprim``
rejects a scalar form that is not a template of the names the tier provides."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as ds
from dynnets.autograd.engine import bind
from dynnets.autograd.primitives import BATCH_ELEMENTWISE, PRIMITIVES, Aval, ShapeError, defprim


def _softplus(x):
    """log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _softplus_shape(x):
    if np.dtype(x.dtype).kind != "f":
        raise ShapeError(f"softplus: expected a floating-point input x, got dtype {x.dtype}")
    return Aval(tuple(x.shape), np.dtype(x.dtype))


@pytest.fixture
def softplus():
    """The test's primitive, taken out of the table again afterwards (the
    table-driven tests require samples of every primitive in it)."""
    p = defprim("test_softplus", _softplus, _softplus_shape,
                vjp=(lambda g, ins, out: g * (1 - np.exp(-out)),),
                batch=BATCH_ELEMENTWISE,
                native="({0} if {0} > {zero} else {zero}) + {D}(math.log1p({D}(math.exp(-abs({0})))))",
                native_vjp=("({g} * ({one} - {D}(math.exp(-{out}))))",))
    try:
        yield lambda x: bind(p, x)
    finally:
        del PRIMITIVES["test_softplus"]


def _want(x):
    return _softplus(x), 1 / (1 + np.exp(-x))


def test_a_primitive_defined_outside_the_package_reaches_eager_static_autobatch_and_native(softplus):
    xs = np.array([[-4.0, -1.5, 0.0], [0.25, 2.0, 6.0]])
    y_want, g_want = _want(xs)
    # eager, with its gradient
    x = dn.tensor(xs, requires_grad=True)
    softplus(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), g_want, rtol=1e-12)
    # autobatch: three calls of one signature run as one batched call
    rows = [dn.tensor(xs[i:i + 1], requires_grad=True) for i in range(2)]
    with dn.autobatch() as ab:
        loss = sum(softplus(r).sum() for r in rows)
    loss.backward()
    assert ab.stats["fallbacks"] == {}
    np.testing.assert_allclose(loss.item(), y_want.sum(), rtol=1e-12)
    for i, r in enumerate(rows):
        np.testing.assert_allclose(r.grad.numpy(), g_want[i:i + 1], rtol=1e-12)
    # static, on tier 2 and on the native tier: value, symbolic gradient and an SGD step through it
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder(np.float64, (2, 3), name="p")
        w = ds.Variable(np.ones((2, 3)), name="w")
        y = softplus(p * w)
        loss = ds.reduce_sum(y)
        dp = ds.gradients(loss, [p])[0]
        train = ds.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = ds.global_variables_initializer()
    ref = ds.Session(g, native_after=None)
    nat = ds.Session(g, jit_after=1, native_after=1)
    for s in (ref, nat):
        s.run(init)
    for _ in range(3):
        got = nat.run([y, dp, train], {p: xs})
        want = ref.run([y, dp, train], {p: xs})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    plan = next(pl for pl in nat._plan_list if pl.fetch_names and pl.fetch_names[-1] == "GradientDescent")
    assert plan.tier == 3, plan.native.reason
    assert "math.log1p" in plan.native.source
    np.testing.assert_allclose(nat.variable_value(w), ref.variable_value(w), rtol=1e-12)
    # the first run's values are the primitive's own (w was ones then)
    fresh = ds.Session(g, jit_after=1, native_after=1)
    fresh.run(init)
    y0, dp0 = fresh.run([y, dp], {p: xs})
    np.testing.assert_allclose(y0, y_want, rtol=1e-12)
    np.testing.assert_allclose(dp0, g_want, rtol=1e-12)


def test_a_primitive_without_a_native_form_stays_on_tier_2():
    p = defprim("test_softplus_plain", _softplus, _softplus_shape, vjp=(lambda g, ins, out: g * (1 - np.exp(-out)),))
    try:
        g = ds.Graph()
        with g.as_default():
            x = ds.placeholder(np.float64, (3,), name="x")
            y = bind(p, x) * 2.0
        with ds.Session(g, jit_after=1, native_after=1) as s:
            for _ in range(3):
                np.testing.assert_allclose(s.run(y, {x: np.zeros(3)}), 2 * np.log(2.0) * np.ones(3), rtol=1e-12)
            assert s.stats[-1]["tier"] == 2 and "test_softplus_plain" in s.stats[-1]["native"]
    finally:
        del PRIMITIVES["test_softplus_plain"]


@pytest.mark.parametrize("kw, match", [
    ({"native": "math.exp({x})"}, "not a template"),
    ({"native": 3}, "scalar-form string"),
    ({"native_vjp": ("{g} * {y}",)}, "not a template"),
    ({"native_vjp": ("{g}", "{g}")}, "one entry per vjp= input"),
])
def test_defprim_rejects_a_native_form_that_does_not_fit(kw, match):
    with pytest.raises(ValueError, match=match):
        defprim("test_bad_native", _softplus, _softplus_shape, vjp=(lambda g, ins, out: g,), **kw)
    assert "test_bad_native" not in PRIMITIVES


def _sgd_graph(opt):
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder(np.float64, (4, 2), name="x")
        w = ds.Variable(np.array([[0.5], [-0.3]]), name="w")
        loss = ds.reduce_mean((ds.matmul(x, w) - 1.0) ** 2)
        train = opt.minimize(loss)
        init = ds.global_variables_initializer()
    return g, x, w, train, init


def _run(g, x, w, train, init, native_after):
    with ds.Session(g, jit_after=1, native_after=native_after) as s:
        s.run(init)
        for k in range(4):
            s.run(train, {x: np.arange(8.0).reshape(4, 2) / (k + 1)})
        return s.variable_value(w), s.stats[-1]


def test_an_optimizer_with_its_own_update_rule_reaches_the_native_tier():
    from dynnets.nn.optim_kernels import UpdateRule

    class SquaredStepSGD(ds.train.Optimizer):
        """w -= lr * g * |g| (a test rule): _apply and _rule are its two readers."""
        _rule = UpdateRule("squared_step", (), ("lr",), (("p", "({p} - {lr} * ({g} * abs({g})))"),))

        def _apply(self, S, grads, vars, lr):
            for v, g in zip(vars, grads):
                S[v.index] -= lr * (g * np.abs(g))

        def _native_scalars(self, gen, lr, vars):
            return lambda dt: {"lr": self._lr_in(gen, lr, dt)}

    got, st = _run(*_sgd_graph(SquaredStepSGD(0.01, name="SquaredStep")), native_after=1)
    want, st2 = _run(*_sgd_graph(SquaredStepSGD(0.01, name="SquaredStep")), native_after=None)
    assert st["tier"] == 3, st["native"]
    assert st2["tier"] == 2
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_a_subclass_changing_an_optimizers_update_does_not_inherit_its_native_rule():
    class HalfStepSGD(ds.train.GradientDescentOptimizer):
        def _apply(self, S, grads, vars, lr):
            super()._apply(S, grads, vars, lr / 2)

    got, st = _run(*_sgd_graph(HalfStepSGD(0.02)), native_after=1)
    want, _ = _run(*_sgd_graph(ds.train.GradientDescentOptimizer(0.01)), native_after=None)
    assert st["tier"] == 2 and "HalfStepSGD" in st["native"]
    np.testing.assert_allclose(got, want, rtol=1e-13)
