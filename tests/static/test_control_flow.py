"""while_loop, cond and TensorArray against eager Python loops computing the
same thing: values, gradients (eager ``backward`` and float64 central
differences), trip counts fed at run time, nesting, the compile passes inside
loop bodies, and the errors for malformed loops."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf
from dynnets.static import control_flow


def _fd(f, x, eps=1e-6):
    """Central differences of scalar ``f`` at float64 array ``x``."""
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[k] = eps
        g[k] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def _rnn_graph():
    """h_{t+1} = tanh(W h_t + x_t) over a fed number of steps, every h written
    to a TensorArray; loss = sum of squares of the stacked states."""
    g = tf.Graph()
    with g.as_default():
        xs = tf.placeholder((None, 3), np.float64, name="xs")
        n = tf.placeholder((), np.int32, name="n")
        w = tf.placeholder((3, 3), np.float64, name="w")
        h0 = tf.placeholder((3,), np.float64, name="h0")
        inputs = tf.TensorArray(np.float64, size=n).unstack(xs)
        out = tf.TensorArray(np.float64, size=n)

        def body(t, h, out):
            h = dn.tanh(dn.matmul(w, h) + inputs.read(t))
            return t + 1, h, out.write(t, h)

        _, h, out = tf.while_loop(lambda t, h, out: t < n, body, [0, h0, out])
        states = out.stack()
        loss = tf.reduce_sum(states * states) + tf.reduce_sum(h)
        grads = tf.gradients(loss, [xs, w, h0])
    return g, (xs, n, w, h0), states, loss, grads


def _rnn_numpy(xs, w, h0):
    h = h0
    states = []
    for x in xs:
        h = np.tanh(w @ h + x)
        states.append(h)
    states = np.array(states).reshape(len(xs), 3)
    return states, float((states * states).sum() + h.sum())


def _rnn_eager(xs, w, h0):
    xs_t, w_t, h_t = (dn.tensor(a, requires_grad=True, dtype=np.float64) for a in (xs, w, h0))
    h = h_t
    total = None
    for t in range(len(xs)):
        h = dn.tanh(dn.matmul(w_t, h) + xs_t[t])
        s = dn.sum(h * h)
        total = s if total is None else total + s
    loss = dn.sum(h) if total is None else total + dn.sum(h)
    loss.backward()
    return [None if a.grad is None else np.asarray(a.grad) for a in (xs_t, w_t, h_t)]


@pytest.mark.parametrize("optimize", [True, False])
def test_rnn_loop_matches_eager_values_and_gradients_with_fed_trip_counts(optimize):
    g, (xs, n, w, h0), states, loss, grads = _rnn_graph()
    rng = np.random.default_rng(0)
    wv = rng.normal(size=(3, 3)) * 0.5
    hv = rng.normal(size=3)
    with tf.Session(g, optimize=optimize) as sess:
        for steps in (4, 1, 6, 4, 4):
            xv = rng.normal(size=(steps, 3))
            feed = {xs: xv, n: steps, w: wv, h0: hv}
            got_states, got_loss, gx, gw, gh = sess.run([states, loss] + grads, feed)
            want_states, want_loss = _rnn_numpy(xv, wv, hv)
            np.testing.assert_allclose(got_states, want_states, rtol=1e-12)
            np.testing.assert_allclose(got_loss, want_loss, rtol=1e-12)
            ex, ew, eh = _rnn_eager(xv, wv, hv)
            np.testing.assert_allclose(gx, ex, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(gw, ew, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(gh, eh, rtol=1e-10, atol=1e-12)
        # one plan per fed signature (three shapes of xs), and one body plan for every trip count
        assert len(sess.stats) == 3
    loop = [e for e in g.eqns if e.prim is control_flow.while_p][0]
    body = loop.attrs["body"].programs
    # the gradient was built with the graph: the forward keeps the values the gradient reads (fwd+stash)
    # and the gradient reads them (vjp/stashed) instead of running the body again (vjp)
    assert "fwd" not in body and not body["vjp"].plans
    assert len(body["fwd+stash"].plans) == 1
    assert len(body["vjp/stashed"].plans) == 1


def test_rnn_loop_gradient_matches_finite_differences():
    g, (xs, n, w, h0), states, loss, grads = _rnn_graph()
    rng = np.random.default_rng(1)
    xv, wv, hv = rng.normal(size=(5, 3)), rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3)
    with tf.Session(g) as sess:
        gx, gw, gh = sess.run(grads, {xs: xv, n: 5, w: wv, h0: hv})
        np.testing.assert_allclose(gx, _fd(lambda a: _rnn_numpy(a, wv, hv)[1], xv), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gw, _fd(lambda a: _rnn_numpy(xv, a, hv)[1], wv), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gh, _fd(lambda a: _rnn_numpy(xv, wv, a)[1], hv), rtol=1e-6, atol=1e-8)


def test_zero_iterations_pass_the_gradient_through():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((2,), np.float64)
        n = tf.placeholder((), np.int32)
        _, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * x), [0, x])
        gx, = tf.gradients(tf.reduce_sum(y), [x])
    with tf.Session(g) as sess:
        xv = np.array([2.0, 3.0])
        for steps in (0, 1, 3):
            yv, gv = sess.run([y, gx], {x: xv, n: steps})
            np.testing.assert_allclose(yv, xv ** (steps + 1))
            np.testing.assert_allclose(gv, (steps + 1) * xv ** steps)


def test_nested_loops_match_python_and_finite_differences():
    def build():
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder((2,), np.float64, name="x")
            n = tf.placeholder((), np.int32, name="n")
            m = tf.placeholder((), np.int32, name="m")

            def outer(i, acc):
                def inner(j, a):
                    return j + 1, a * 0.5 + x * tf.cast(i + j, np.float64)
                _, a = tf.while_loop(lambda j, a: j < m, inner, [0, acc])
                return i + 1, dn.tanh(a)

            _, y = tf.while_loop(lambda i, acc: i < n, outer, [0, x])
            loss = tf.reduce_sum(y * y)
            gx, = tf.gradients(loss, [x])
        return g, x, n, m, y, loss, gx

    def python(xv, nv, mv):
        acc = xv
        for i in range(nv):
            a = acc
            for j in range(mv):
                a = a * 0.5 + xv * (i + j)
            acc = np.tanh(a)
        return acc, float((acc * acc).sum())

    g, x, n, m, y, loss, gx = build()
    xv = np.array([0.3, -0.7])
    with tf.Session(g) as sess:
        for nv, mv in ((3, 2), (2, 4), (0, 3), (3, 0)):
            yv, lv, gv = sess.run([y, loss, gx], {x: xv, n: nv, m: mv})
            want_y, want_l = python(xv, nv, mv)
            np.testing.assert_allclose(yv, want_y, rtol=1e-12)
            np.testing.assert_allclose(gv, _fd(lambda a: python(a, nv, mv)[1], xv), rtol=1e-6, atol=1e-8)


def test_cond_inside_while_matches_python_and_finite_differences():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((3,), np.float64, name="x")
        n = tf.placeholder((), np.int32, name="n")
        k = tf.placeholder((), np.int32, name="k")

        def body(t, h):
            h = tf.cond(t < k, lambda: h * x, lambda: dn.tanh(h + x))
            return t + 1, h

        _, h = tf.while_loop(lambda t, h: t < n, body, [0, tf.constant(np.ones(3))])
        loss = tf.reduce_sum(h * h)
        gx, = tf.gradients(loss, [x])

    def python(xv, nv, kv):
        h = np.ones(3)
        for t in range(nv):
            h = h * xv if t < kv else np.tanh(h + xv)
        return h, float((h * h).sum())

    xv = np.array([0.5, -1.2, 0.8])
    with tf.Session(g) as sess:
        for nv, kv in ((5, 2), (4, 0), (3, 5)):
            hv, gv = sess.run([h, gx], {x: xv, n: nv, k: kv})
            np.testing.assert_allclose(hv, python(xv, nv, kv)[0], rtol=1e-12)
            np.testing.assert_allclose(gv, _fd(lambda a: python(a, nv, kv)[1], xv), rtol=1e-6, atol=1e-8)


def test_cond_values_and_gradients_of_both_branches():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((), np.bool_, name="p")
        x = tf.placeholder((2, 2), np.float64, name="x")
        y = tf.placeholder((2, 2), np.float64, name="y")
        out = tf.cond(p, lambda: dn.matmul(x, y), lambda: x * y + 1.0)
        gx, gy = tf.gradients(tf.reduce_sum(out * out), [x, y])
    rng = np.random.default_rng(3)
    xv, yv = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    with tf.Session(g) as sess:
        for pv, f in ((True, lambda a, b: a @ b), (False, lambda a, b: a * b + 1.0)):
            ov, gxv, gyv = sess.run([out, gx, gy], {p: pv, x: xv, y: yv})
            np.testing.assert_allclose(ov, f(xv, yv))
            np.testing.assert_allclose(gxv, _fd(lambda a: float((f(a, yv) ** 2).sum()), xv), rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(gyv, _fd(lambda b: float((f(xv, b) ** 2).sum()), yv), rtol=1e-6, atol=1e-8)


def test_cond_runs_only_the_taken_branch():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((), np.bool_)
        i = tf.placeholder((), np.int64)
        table = tf.constant(np.arange(3.0))
        # the false branch would index out of range
        out = tf.cond(p, lambda: tf.gather(table, i), lambda: tf.gather(table, i + 10))
    with tf.Session(g) as sess:
        assert sess.run(out, {p: True, i: 2}) == 2.0
        with pytest.raises(IndexError):
            sess.run(out, {p: False, i: 2})


def test_tensor_array_ops_match_numpy_and_their_gradients_match_finite_differences():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((4, 2), np.float64, name="x")
        ta = tf.TensorArray(np.float64, size=4).unstack(x)
        size = ta.size()
        picked = ta.gather([3, 0, 3])
        r = ta.read(1)
        sc = tf.TensorArray(np.float64, size=3).scatter([2, 0], x[:2] * 2.0)
        stacked = sc.stack()             # index 1 never written: zeros
        loss = tf.reduce_sum(picked * picked) + tf.reduce_sum(r) * 3.0 + tf.reduce_sum(stacked * x[1:])
        gx, = tf.gradients(loss, [x])
    xv = np.random.default_rng(4).normal(size=(4, 2))

    def f(a):
        st = np.stack([a[1] * 2, np.zeros(2), a[0] * 2])
        return float((a[[3, 0, 3]] ** 2).sum() + a[1].sum() * 3 + (st * a[1:]).sum())

    with tf.Session(g) as sess:
        sv, pv, rv, stv, lv, gv = sess.run([size, picked, r, stacked, loss, gx], {x: xv})
    assert sv == 4 and sv.dtype == np.int32
    np.testing.assert_allclose(pv, xv[[3, 0, 3]])
    np.testing.assert_allclose(rv, xv[1])
    np.testing.assert_allclose(stv, [xv[1] * 2, [0, 0], xv[0] * 2])
    np.testing.assert_allclose(lv, f(xv))
    np.testing.assert_allclose(gv, _fd(f, xv), rtol=1e-6, atol=1e-8)


def test_dynamic_size_tensor_array_grows_in_a_loop_and_stacks():
    g = tf.Graph()
    with g.as_default():
        n = tf.placeholder((), np.int32)
        ta = tf.TensorArray(np.float32, size=0, dynamic_size=True)
        _, ta = tf.while_loop(lambda i, ta: i < n, lambda i, ta: (i + 1, ta.write(i, tf.cast(i, np.float32) * 2.0)),
                              [0, ta])
        out = ta.stack()
    with tf.Session(g) as sess:
        for k in (3, 5, 1):
            np.testing.assert_array_equal(sess.run(out, {n: k}), np.arange(k, dtype=np.float32) * 2)


def test_minimize_through_a_loop_matches_eager_sgd():
    rng = np.random.default_rng(5)
    w0 = rng.normal(size=(3, 3)).astype(np.float32) * 0.4
    xs = rng.normal(size=(6, 3)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), np.float32)
        n = tf.placeholder((), np.int32)
        w = tf.Variable(w0, name="w")
        inputs = tf.TensorArray(np.float32, size=n).unstack(x)
        _, h = tf.while_loop(lambda t, h: t < n, lambda t, h: (t + 1, dn.tanh(dn.matmul(w, h) + inputs.read(t))),
                             [0, tf.constant(np.zeros(3, np.float32))])
        loss = tf.reduce_sum(h * h)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    wt = dn.Parameter(w0.copy())
    with tf.Session(g) as sess:
        sess.run(tf.global_variables_initializer(graph=g))
        for step, k in enumerate((6, 4, 5)):
            got, _ = sess.run([loss, train], {x: xs[:k], n: k})
            h = dn.tensor(np.zeros(3, np.float32))
            for t in range(k):
                h = dn.tanh(dn.matmul(wt, h) + dn.tensor(xs[t]))
            want = dn.sum(h * h)
            np.testing.assert_allclose(got, want.data, rtol=1e-5)
            wt.grad = None
            want.backward()
            wt.data -= 0.1 * np.asarray(wt.grad)
        np.testing.assert_allclose(sess.variable_value(w), wt.data, rtol=1e-5, atol=1e-6)


def test_maximum_iterations_and_return_structure():
    g = tf.Graph()
    with g.as_default():
        cap = tf.placeholder((), np.int32)
        i = tf.while_loop(lambda i: i < 100, lambda i: i + 1, [0], maximum_iterations=cap)
        j = tf.while_loop(lambda i: i < 100, lambda i: [i + 2], [0], maximum_iterations=7,
                          return_same_structure=True)
        d = tf.while_loop(lambda s: s["a"] < 10, lambda s: {"a": s["a"] + 3, "b": s["b"] * 2.0},
                          [{"a": 0, "b": 1.0}])
    assert isinstance(j, list) and len(j) == 1
    with tf.Session(g) as sess:
        assert sess.run(i, {cap: 5}) == 5
        assert sess.run(i, {cap: 500}) == 100
        assert sess.run(j[0]) == 14
        out = sess.run(d)
        assert out["a"] == 12 and out["b"] == 16.0


def test_shape_invariants_let_a_dimension_change():
    g = tf.Graph()
    with g.as_default():
        n = tf.placeholder((), np.int32)
        x0 = tf.constant(np.ones((1, 2), np.float32))
        _, x = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, tf.concat([x, x * 2.0], axis=0)), [0, x0],
                             shape_invariants=[(), (None, 2)])
        assert x.shape == (None, 2)
        s = tf.reduce_sum(x)
        gs, = tf.gradients(s, [x0])
    with tf.Session(g) as sess:
        xv, gv = sess.run([x, gs], {n: 3})
    assert xv.shape == (8, 2) and np.isclose(xv.sum(), 2 * 27)
    np.testing.assert_allclose(gv, np.full((1, 2), 27.0))


def test_a_loop_variable_that_changes_shape_is_an_error_naming_it():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((1, 2), np.float32, name="state")
        with pytest.raises(tf.ShapeError, match=r"loop variable 'state'.*\(1, 2\).*\(2, 2\).*shape_invariants"):
            tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, tf.concat([x, x], axis=0)), [0, x])
        # unknown when the graph is built, known once fed: the error comes at run time
        y = tf.placeholder((None, 2), np.float32, name="rows")
        _, out = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.concat([y, y], axis=0)), [0, y])
        with pytest.raises(TypeError, match="dtype"):
            tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, tf.cast(x, np.float64)), [0, x])
    with tf.Session(g) as sess:
        with pytest.raises(tf.ShapeError, match=r"loop variable 'rows'.*\(1, 2\).*\(2, 2\)"):
            sess.run(out, {y: np.ones((1, 2), np.float32)})


def test_non_boolean_predicates_are_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((), np.float32, name="x")
        with pytest.raises(TypeError, match="cond: pred must be a boolean scalar.*'x'.*float32"):
            tf.cond(x, lambda: x, lambda: x)
        with pytest.raises(TypeError, match="Python bool"):
            tf.cond(True, lambda: x, lambda: x)
        with pytest.raises(TypeError, match="while_loop: cond must return a boolean scalar"):
            tf.while_loop(lambda i: i + 1.0, lambda i: i + 1.0, [x])


def test_mismatched_structures_are_errors():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((), np.bool_)
        x = tf.placeholder((2,), np.float32)
        with pytest.raises(ValueError, match=r"same structure.*\(x, x\).*x"):
            tf.cond(p, lambda: (x, x), lambda: x)
        with pytest.raises(TypeError, match="output 0 has dtype float32 in true_fn and float64"):
            tf.cond(p, lambda: x, lambda: tf.cast(x, np.float64))
        with pytest.raises(ValueError, match="body must return the structure of loop_vars"):
            tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1,), [0, x])
        with pytest.raises(ValueError, match="shape_invariants must have the structure"):
            tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, x), [0, x], shape_invariants=[()])


def test_tensor_array_errors():
    g = tf.Graph()
    with g.as_default():
        i = tf.placeholder((), np.int32)
        ta = tf.TensorArray(np.float32, size=2)
        twice = ta.write(0, 1.0).write(i, 2.0).stack()
        unread = tf.TensorArray(np.float32, size=2, element_shape=()).read(i)
        with pytest.raises(TypeError, match="holds float32.*float64"):
            ta.write(0, tf.constant(np.ones(1)))
        with pytest.raises(tf.ShapeError, match="element shape is unknown"):
            tf.TensorArray(np.float32, size=2).read(0)
        with pytest.raises(tf.ShapeError, match=r"value elements have shape \(3,\)"):
            ta.write(0, np.ones(2, np.float32)).write(1, np.ones(3, np.float32))
    with tf.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(twice, {i: 1}), [1.0, 2.0])
        with pytest.raises(ValueError, match="index 0: it has already been written"):
            sess.run(twice, {i: 0})
        with pytest.raises(IndexError, match="write index 5 is out of range for its size 2"):
            sess.run(twice, {i: 5})
        with pytest.raises(ValueError, match="has not yet been written"):
            sess.run(unread, {i: 1})


def test_effects_and_variables_inside_a_body_are_errors():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0, name="v")
        with pytest.raises(tf.GraphError, match="effects cannot run inside control flow"):
            tf.while_loop(lambda i: i < 2, lambda i: (v.assign(2.0), i + 1)[1], [0])


def test_loop_bodies_are_optimised_and_fused_as_graphs_of_their_own():
    g = tf.Graph()
    with g.as_default():
        n = tf.placeholder((), np.int32)
        a = tf.placeholder((64, 64), np.float32)
        _, y = tf.while_loop(lambda i, y: i < n,
                             lambda i, y: (i + 1, (y * (2.0 * 0.25) + a) * (y * (2.0 * 0.25) + a) - a),
                             [0, tf.constant(np.zeros((64, 64), np.float32))])
    av = np.random.default_rng(6).normal(size=(64, 64)).astype(np.float32) * 0.1
    want = np.zeros((64, 64), np.float32)
    for _ in range(3):
        want = (want * 0.5 + av) * (want * 0.5 + av) - av
    loop = [e for e in g.eqns if e.prim is control_flow.while_p][0]
    with tf.Session(g) as sess:
        for _ in range(3):                      # tier 1, then generated code
            np.testing.assert_allclose(sess.run(y, {n: 3, a: av}), want, rtol=1e-5, atol=1e-6)
    body = loop.attrs["body"]
    (plan_entry,) = body.programs["fwd"].plans.values()
    plan = plan_entry.plan
    assert plan.tier == 2
    # CSE merged the two products' operands, folding removed 2.0 * 0.25, fusion made one kernel
    assert plan.n_fused >= 1
    assert plan.nodes_after < plan.nodes_pruned


def test_back_prop_false_stops_the_gradient_and_graphs_with_loops_draw():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((2,), np.float64, name="x")
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * x), [0, x], back_prop=False)
        _, z = tf.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * x), [0, x])
        gy, gz = tf.gradients(tf.reduce_sum(y), [x])[0], tf.gradients(tf.reduce_sum(z), [x])[0]
    assert gy is None
    with tf.Session(g) as sess:
        np.testing.assert_allclose(sess.run(gz, {x: [1.0, 2.0]}), [4.0, 32.0])
    assert "while" in g.to_dot()


# --------------------------------------------------------------------------
# loop variables grown by rows, kept values instead of recomputing the body
# --------------------------------------------------------------------------


def _grow(s, i, w):
    # a Fold-style level: rows read from what came before (row i and row 0: the same row twice at i = 0)
    from dynnets.autograd import ops
    return ops.concat([s, dn.tanh(dn.matmul(ops.take(s, i), w)) + ops.take(s, i * 0)], axis=0)


def _appended_graph(k):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), np.float64, name="x")
        w = tf.placeholder((3, 3), np.float64, name="w")
        _, s = tf.while_loop(lambda t, s: t < k, lambda t, s: (t + 1, _grow(s, dn.reshape(t, (1,)), w)), [0, x],
                             shape_invariants=[(), (None, 3)])
        loss = dn.sum(s * s)
        grads = tf.gradients(loss, [x, w])
    return g, x, w, s, loss, grads


def _appended_eager(xv, wv, k):
    x, w = dn.tensor(xv, requires_grad=True), dn.tensor(wv, requires_grad=True)
    s = x
    for t in range(k):
        s = _grow(s, np.array([t]), w)
    loss = dn.sum(s * s)
    loss.backward()
    return s.numpy(), loss.item(), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("optimize", [True, False])
def test_a_variable_grown_by_rows_is_written_in_place_and_its_gradient_matches_eager(optimize):
    k = 5
    g, x, w, s, loss, grads = _appended_graph(k)
    loop = [e for e in g.eqns if e.prim is control_flow.while_p][0]
    # the states variable (loop variable 1) is appended to, read by two takes
    (var, _, reads), = loop.attrs["appends"]
    assert var == 1 and len(reads) == 2
    rng = np.random.default_rng(0)
    wv = rng.normal(size=(3, 3)) * 0.5
    with tf.Session(g, optimize=optimize) as sess:
        for n in (2, 1, 2):
            xv = rng.normal(size=(n, 3))
            got = sess.run([s, loss] + grads, {x: xv, w: wv})
            want = _appended_eager(xv, wv, k)
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    # every iteration's state is a view of one buffer (no copy of the rows so far per iteration)
    body = loop.attrs["body"]
    ins = [np.full((2, 3), 0.5), None]
    out = control_flow._while_impl(np.int32(0), ins[0], wv, **loop.attrs)
    states = out[-1].states
    assert len(states) == k and all(np.shares_memory(st[1], out[1]) for st in states)
    # the forward kept what the gradient reads: the body's gradient never ran the body again
    assert not body.programs["vjp"].plans and body.programs["vjp/stashed"].plans
    assert out[-1].stash_nbytes > 0


def test_loop_stats_name_the_stashed_values():
    g, x, w, s, loss, grads = _appended_graph(3)
    with tf.Session(g) as sess:
        sess.run(grads, {x: np.ones((2, 3)), w: np.eye(3)})
        subs = {st["role"]: st for st in sess.stats[-1]["subprograms"]}
    assert "body/vjp" in subs and "matmul" in " ".join(subs["body/vjp"]["stashed"])


def test_a_loops_weight_gradient_is_multiplied_out_once_per_run(monkeypatch):
    # a Tree-LSTM level per iteration: its joint VJP gives the weight gradient as factors
    from dynnets.autograd import gradtypes, ops
    k = 6

    def grow(s, i, u, b):
        return ops.concat([s, ops.tree_lstm_node(ops.take(s, i), ops.take(s, i * 0), u, b)], axis=0)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 4), np.float64)
        u = tf.placeholder((4, 10), np.float64)
        b = tf.placeholder((10,), np.float64)
        _, s = tf.while_loop(lambda t, s: t < k, lambda t, s: (t + 1, grow(s, dn.reshape(t, (1,)), u, b)), [0, x],
                             shape_invariants=[(), (None, 4)])
        grads = tf.gradients(dn.sum(s * s), [x, u, b])
    rng = np.random.default_rng(1)
    feed = {x: rng.normal(size=(2, 4)), u: rng.normal(size=(4, 10)) * 0.5, b: rng.normal(size=10) * 0.1}
    calls = []
    real = gradtypes.OuterSum.to_dense

    def counted(self, dtype=None):
        calls.append(len(self.rhs))
        return real(self, dtype)
    with tf.Session(g) as sess:
        sess.run(grads, feed)
        monkeypatch.setattr(gradtypes.OuterSum, "to_dense", counted)
        got = sess.run(grads, feed)
    # one product per weight over the k iterations' factors, not one per iteration
    assert sorted(calls) == [k, k]
    xs, us, bs = (dn.tensor(feed[v], requires_grad=True) for v in (x, u, b))
    st = xs
    for t in range(k):
        st = grow(st, np.array([t]), us, bs)
    dn.sum(st * st).backward()
    for a, want in zip(got, (xs, us, bs)):
        np.testing.assert_allclose(a, want.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_a_loops_captured_weight_is_transposed_once_and_a_weight_the_body_computes_is_not(monkeypatch):
    # the per-level VJP multiplies by a captured weight's transpose, made once per gradient sweep
    # (fixed_arrays); a weight the body computes changes per iteration and must not be reused
    from dynnets.autograd import ops
    from dynnets.autograd.primitives import core
    k = 5

    def grow(s, i, u, b, scaled):
        w = u * dn.astype(i + 1, np.float64) if scaled else u
        rows = dn.concat([i, i, i * 0 - 1])       # a row twice and a negative index in one gather
        s_l, s_r = ops.take(s, rows), ops.take(s, i * 0)
        return ops.concat([s, ops.tree_lstm_node(s_l, ops.concat([s_r, s_r, s_r], axis=0), w, b)], axis=0)
    made = []
    real = core.transposed_float
    monkeypatch.setattr(core, "transposed_float", lambda a, dt: made.append(a.shape) or real(a, dt))
    rng = np.random.default_rng(2)
    xv, uv, bv = rng.normal(size=(2, 4)), rng.normal(size=(4, 10)) * 0.5, rng.normal(size=10) * 0.1
    for scaled in (False, True):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder((None, 4), np.float64)
            u = tf.placeholder((4, 10), np.float64)
            b = tf.placeholder((10,), np.float64)
            _, s = tf.while_loop(lambda t, s: t < k,
                                 lambda t, s: (t + 1, grow(s, dn.reshape(t, (1,)), u, b, scaled)), [0, x],
                                 shape_invariants=[(), (None, 4)])
            grads = tf.gradients(dn.sum(s * s), [x, u, b])
        made.clear()
        with tf.Session(g) as sess:
            got = sess.run(grads, {x: xv, u: uv, b: bv})
        assert made == ([] if scaled else [(4, 10)])
        xs, us, bs = (dn.tensor(v, requires_grad=True) for v in (xv, uv, bv))
        st = xs
        for t in range(k):
            st = grow(st, np.array([t]), us, bs, scaled)
        dn.sum(st * st).backward()
        for a, want in zip(got, (xs, us, bs)):
            np.testing.assert_allclose(a, want.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_fixed_transpose_holds_only_the_sweeps_arrays_for_its_extent():
    from dynnets.autograd.primitives import fixed_arrays, fixed_transpose
    w, other = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    assert fixed_transpose(w, w.dtype) is None
    with fixed_arrays([w]):
        t = fixed_transpose(w, np.dtype(np.float32))
        assert t.flags.c_contiguous and t.dtype == np.float32 and (t == w.T).all()
        assert fixed_transpose(w, np.dtype(np.float32)) is t
        assert fixed_transpose(w.copy(), w.dtype) is None and fixed_transpose(other, w.dtype) is None
        with fixed_arrays([other]):
            assert fixed_transpose(other, other.dtype) is not None and fixed_transpose(w, w.dtype) is not None
        assert fixed_transpose(other, other.dtype) is None
    assert fixed_transpose(w, w.dtype) is None


def test_a_loops_row_gradient_refuses_an_index_outside_the_rows():
    whole = np.zeros((4, 3))
    with pytest.raises(IndexError, match=r"\[-3, 3\)"):
        control_flow._add_rows(whole, np.array([0, 3]), np.ones((2, 3)), 3)
    control_flow._add_rows(whole, np.array([2, -1, 0, 2]), np.arange(12.0).reshape(4, 3), 3)
    want = np.zeros((4, 3))
    np.add.at(want, [2, 2, 0, 2], np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(whole, want)


def test_a_two_dimensional_gather_from_a_grown_variable_has_the_finite_difference_gradient():
    from dynnets.autograd import ops
    k = 3
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), np.float64)
        w = tf.placeholder((3, 3), np.float64)

        def body(t0, s):
            t = dn.reshape(t0, (1,))
            rows = ops.take(s, dn.reshape(dn.concat([t, t * 0, t * 0 - 1]), (1, 3)))     # (1, 3, 3)
            return t0 + 1, ops.concat([s, dn.tanh(dn.matmul(dn.reshape(rows, (3, 3)), w))], axis=0)
        _, s = tf.while_loop(lambda t, s: t < k, body, [0, x], shape_invariants=[(), (None, 3)])
        loss = dn.sum(s * s)
        grads = tf.gradients(loss, [x, w])
    rng = np.random.default_rng(3)
    xv, wv = rng.normal(size=(2, 3)), rng.normal(size=(3, 3)) * 0.5
    with tf.Session(g) as sess:
        gx, gw = sess.run(grads, {x: xv, w: wv})
        np.testing.assert_allclose(gx, _fd(lambda a: sess.run(loss, {x: a, w: wv}), xv), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gw, _fd(lambda a: sess.run(loss, {x: xv, w: a}), wv), rtol=1e-6, atol=1e-8)
