"""The third plan tier (dynnets.static.native): a small plan compiled whole
into one Numba function gives the tier-2 executor's results (float64 to
1e-12, float32 to a few ulps), updates each variable in place once per run,
still rejects a bad feed naming the placeholder, and leaves every plan it
cannot translate on tier 2. Three kernels are compiled here (the linear
regression step and two graphs covering the translated ops), each cached on
disk for later runs of the suite."""
from __future__ import annotations

import os

import numpy as np
import pytest

import dynnets.static as ds
from dynnets.static import native
from dynnets.numba_cache import generated_dir

X = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
Y = np.array([2.0, 4.0, 6.0, 8.0], np.float32)


def _linreg():
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None,), name="x")
        y = ds.placeholder((None,), name="y_target")
        w = ds.Variable(0.1, name="w")
        b = ds.Variable(0.3, name="b")
        loss = ds.reduce_mean((w * x + b - y) ** 2)
        train = ds.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = ds.global_variables_initializer()
    return g, x, y, w, b, loss, train, init


def _sessions(g, init):
    """A tier-2 reference session and one that compiles every plan to tier 3 after its first run."""
    ref = ds.Session(g, native_after=None)
    nat = ds.Session(g, jit_after=1, native_after=1)
    ref.run(init)
    nat.run(init)
    return ref, nat


def _plan_of(sess, fetch_name):
    return next(p for p in sess._plan_list if p.fetch_names and p.fetch_names[0] == fetch_name)


def test_linreg_step_matches_tier2_and_updates_in_place_once():
    g, x, y, w, b, loss, train, init = _linreg()
    ref, nat = _sessions(g, init)
    fd = {x: X, y: Y}
    for _ in range(5):
        got = nat.run([train, loss], fd)[1]
        want = ref.run([train, loss], fd)[1]
        assert type(got) is type(want) and np.asarray(got).dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)
    plan = _plan_of(nat, "GradientDescent")
    assert plan.tier == 3 and nat.stats[-1]["tier"] == 3 and _plan_of(ref, "GradientDescent").tier == 2
    np.testing.assert_allclose(nat.variable_value(w), ref.variable_value(w), rtol=1e-6)
    # one more run: the storage arrays are updated in place, by exactly one SGD step
    w_arr, b_arr = nat._storage[w.index], nat._storage[b.index]
    w0, b0 = float(w_arr), float(b_arr)
    r = w0 * X.astype(np.float64) + b0 - Y
    nat.run(train, fd)
    assert nat._storage[w.index] is w_arr and nat._storage[b.index] is b_arr
    np.testing.assert_allclose(float(w_arr), w0 - 0.01 * np.mean(2 * r * X), rtol=1e-6)
    np.testing.assert_allclose(float(b_arr), b0 - 0.01 * np.mean(2 * r), rtol=1e-6)
    # the kernel's source is on disk, so a later process loads its machine code
    if not os.environ.get("DYNNETS_NO_DISK_CACHE"):
        files = os.listdir(generated_dir("plans"))
        assert any(f.endswith(".py") and open(os.path.join(generated_dir("plans"), f)).read().endswith(plan.native.source)
                   for f in files)


def test_feeds_at_tier3_are_still_checked_and_odd_layouts_fall_back():
    g, x, y, w, b, loss, train, init = _linreg()
    ref, nat = _sessions(g, init)
    fd = {x: X, y: Y}
    for _ in range(3):
        nat.run([train, loss], fd)
        ref.run([train, loss], fd)
    assert _plan_of(nat, "GradientDescent").tier == 3
    with pytest.raises(ds.FeedError, match="placeholder 'x' expects shape"):
        nat.run([train, loss], {x: np.ones((4, 2), np.float32), y: Y})
    with pytest.raises(ds.FeedError, match="placeholder 'y_target' expects dtype"):
        nat.run([train, loss], {x: X, y: np.array(["a"] * 4)})
    # a strided feed of the plan's shape and dtype: the kernel's dispatcher takes only
    # C-contiguous arrays, so the run goes to the tier-2 function, with the same result
    strided = np.repeat(X, 2)[::2]
    assert not strided.flags.c_contiguous
    got = nat.run([train, loss], {x: strided, y: Y})[1]
    want = ref.run([train, loss], {x: X, y: Y})[1]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(nat.variable_value(w), ref.variable_value(w), rtol=1e-6)
    # a variable missing from the storage is still named
    nat._storage.pop(b.index)
    with pytest.raises(ds.UninitializedVariableError, match="'b'"):
        nat.run([train, loss], fd)


def _compare(ref, nat, fetches, fd, steps, rtol, atol):
    for _ in range(steps):
        got = nat.run(fetches, fd)
        want = ref.run(fetches, fd)
        for a, e in zip(_leaves(got), _leaves(want)):
            assert np.shape(a) == np.shape(e) and np.asarray(a).dtype == np.asarray(e).dtype
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def _leaves(t):
    if isinstance(t, (list, tuple)):
        return [x for s in t for x in _leaves(s)]
    return [] if t is None else [t]


def test_elementwise_ops_and_their_gradients_match_in_float64():
    rng = np.random.default_rng(0)
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder(np.float64, (None, 3), name="x")
        W = ds.Variable(rng.normal(size=(3,)), name="W")
        c = ds.Variable(np.array(0.7), name="c")
        h = x * W + c
        u = (ds.tanh(h) + ds.sigmoid(h) * ds.relu(h - 0.1) + ds.exp(-ds.abs(h)) + ds.log(1.0 + h * h)
             + ds.sqrt(h * h + 1.0) - ds.maximum(h, 0.2) + ds.minimum(h, c) / (2.0 + ds.square(h)) - h ** 3
             + ds.neg(h) / 3.0)
        loss = ds.reduce_mean(u)
        grads = ds.gradients(loss, [W, c])
        train = ds.train.GradientDescentOptimizer(0.05, weight_decay=0.01).minimize(loss)
        init = ds.global_variables_initializer()
    ref, nat = _sessions(g, init)
    fd = {x: rng.normal(size=(5, 3))}
    _compare(ref, nat, [train, loss, grads, u], fd, 3, 1e-12, 1e-14)
    assert _plan_of(nat, "GradientDescent").tier == 3, _plan_of(nat, "GradientDescent").native.reason
    np.testing.assert_allclose(nat.variable_value(W), ref.variable_value(W), rtol=1e-12)


def test_products_reductions_shapes_and_optimizers_match_in_float32():
    rng = np.random.default_rng(1)
    f32 = np.float32
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None, 3), name="x")
        y = ds.placeholder((None,), name="y")
        W = ds.Variable(rng.normal(size=(3, 4)).astype(f32), name="W")
        V = ds.Variable(rng.normal(size=(2, 4)).astype(f32), name="V")
        b = ds.Variable(rng.normal(size=(2,)).astype(f32), name="b")
        steps = ds.Variable(np.zeros((), f32), name="steps", trainable=False)
        h = ds.matmul(x, W)                                         # (n, 4)
        z = ds.linear(ds.transpose(ds.reshape(h, (4, -1))), V, b)  # (n, 2)
        m = ds.reduce_sum(z, axis=0, keepdims=True) + ds.broadcast_to(b, (1, 2))
        q = ds.astype(ds.reduce_mean(h, axis=1), np.float64)
        loss = (ds.reduce_mean((ds.reduce_sum(z * m, axis=1) - y) ** 2)
                + ds.astype(ds.reduce_sum(q * q), f32) * 0.1)
        train = ds.group(ds.train.AdamOptimizer(0.01).minimize(loss, var_list=[W]),
                         ds.train.AdagradOptimizer(0.1).minimize(loss, var_list=[V]),
                         ds.train.GradientDescentOptimizer(0.02).minimize(loss, var_list=[b]),
                         steps.assign_add(1.0))
        init = ds.global_variables_initializer()
    ref, nat = _sessions(g, init)
    fd = {x: rng.normal(size=(4, 3)).astype(f32), y: rng.normal(size=(4,)).astype(f32)}
    _compare(ref, nat, [train, loss, z], fd, 4, 2e-5, 1e-6)
    plan = _plan_of(nat, "group")
    assert plan.tier == 3, plan.native.reason
    for v in (W, V, b, steps):
        np.testing.assert_allclose(nat.variable_value(v), ref.variable_value(v), rtol=2e-5, atol=1e-6)
    assert nat.variable_value(steps) == 4


@pytest.mark.parametrize("case", ["op", "size", "random"])
def test_plans_it_cannot_translate_stay_on_tier2(case):
    g = ds.Graph()
    with g.as_default():
        n = 4 if case != "size" else native.MAX_SIZE + 1
        x = ds.placeholder((None, 2), name="x")
        if case == "op":
            y = ds.softmax(x)
        elif case == "size":
            y = ds.tanh(x) * 2.0
        else:
            y = x + ds.random_normal((n, 2), seed=3)
        loss = ds.reduce_sum(y)
    sess = ds.Session(g, jit_after=1, native_after=1)
    ref = ds.Session(g, native_after=None)
    fd = {x: np.ones((n, 2), np.float32)}
    for _ in range(3):
        out = sess.run(loss, fd)
        want = ref.run(loss, fd)
        if case != "random":
            np.testing.assert_allclose(out, want, rtol=1e-6)
    st = sess.stats[-1]
    assert st["tier"] == 2
    assert {"op": "softmax", "size": "elements", "random": "random"}[case] in st["native"]
