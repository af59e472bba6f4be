"""TF1 names of the static API: random ops and dropout that draw anew at every
run, layers.dense, default sessions, lookups and feeds by name, get_variable
with variable_scope."""
import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf
from dynnets.autograd.primitives import PRIMITIVES
from dynnets.static import passes

# --------------------------------------------------------------------------
# random ops
# --------------------------------------------------------------------------


def _graph(seed=None):
    g = tf.Graph()
    with g.as_default():
        if seed is not None:
            tf.set_random_seed(seed)
        r = tf.random_normal([3, 4], mean=1.0, stddev=2.0)
        u = tf.random_uniform([5], minval=-1.0, maxval=3.0)
        t = tf.truncated_normal([2000], stddev=0.5)
    return g, r, u, t


@pytest.mark.parametrize("optimize", [True, False])
def test_random_ops_draw_new_values_every_run(optimize):
    g, r, u, t = _graph(seed=1)
    with tf.Session(g, optimize=optimize, jit_after=2) as sess:
        runs = [sess.run([r, u]) for _ in range(4)]          # tier 1 twice, then the generated plan
    for k in range(1, 4):
        assert not np.allclose(runs[k][0], runs[k - 1][0])
        assert not np.allclose(runs[k][1], runs[k - 1][1])
    assert runs[0][0].shape == (3, 4) and runs[0][0].dtype == np.float32
    assert runs[0][1].shape == (5,) and (runs[0][1] >= -1).all() and (runs[0][1] < 3).all()


def test_random_ops_are_reproducible_as_tf1():
    g1, r1, u1, _ = _graph(seed=7)
    g2, r2, u2, _ = _graph(seed=7)
    with tf.Session(g1) as a, tf.Session(g2) as b, tf.Session(g1) as c:
        sa = [a.run(r1) for _ in range(3)]
        sb = [b.run(r2) for _ in range(3)]
        sc = [c.run(r1) for _ in range(3)]      # a new session on the same graph restarts the sequence
    for x, y, z in zip(sa, sb, sc):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)
    g3, r3, _, _ = _graph(seed=8)
    with tf.Session(g3) as s:
        assert not np.allclose(s.run(r3), sa[0])
    # the op's stream is default_rng([graph seed, op seed]); r is op 0 of its graph
    want = np.random.default_rng([7, 0]).standard_normal((3, 4), dtype=np.float32) * np.float32(2) + np.float32(1)
    np.testing.assert_array_equal(sa[0], want)


def test_op_seed_without_graph_seed_and_fetch_order():
    g = tf.Graph()
    with g.as_default():
        a = tf.random_uniform([4], seed=3)
        b = tf.random_uniform([4], seed=3)      # same seeds: the same sequence (TF1), but two ops
        c = tf.random_uniform([4], seed=4)
    with tf.Session(g) as s:
        va, vb, vc = s.run([a, b, c])
        va2 = s.run(a)
    np.testing.assert_array_equal(va, vb)
    assert not np.allclose(va, vc) and not np.allclose(va, va2)
    np.testing.assert_array_equal(va, np.random.default_rng([tf.DEFAULT_GRAPH_SEED, 3]).random(4, dtype=np.float32))
    # one op fetched twice in one run is one draw
    with tf.Session(g) as s:
        x, y = s.run([a, a * 1.0])
    np.testing.assert_array_equal(x, y)


def test_random_op_statistics_and_dtypes():
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        n = tf.random_normal([20000], mean=3.0, stddev=2.0, dtype=np.float64)
        t = tf.truncated_normal([20000], mean=-1.0, stddev=0.5)
        u = tf.random_uniform([20000], minval=2, maxval=5, dtype=np.int64)
    with tf.Session(g) as s:
        vn, vt, vu = s.run([n, t, u])
    assert vn.dtype == np.float64 and abs(vn.mean() - 3) < 0.1 and abs(vn.std() - 2) < 0.1
    assert vt.dtype == np.float32 and (np.abs(vt + 1) <= 1.0 + 1e-6).all() and abs(vt.mean() + 1) < 0.02
    assert abs(vt.std() - 0.5 * 0.8796) < 0.02           # the std of N(0, 1) truncated at +-2 is 0.8796
    assert vu.dtype == np.int64 and set(np.unique(vu)) == {2, 3, 4}


def test_random_op_errors():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match=r"random_normal: shape must be fully known, got \(\?, 3\)"):
            tf.random_normal([None, 3])
        with pytest.raises(ValueError, match="random_uniform: must specify maxval for integer dtype int32"):
            tf.random_uniform([2], dtype=np.int32)
        with pytest.raises(ValueError, match="seed must be a non-negative integer"):
            tf.random_normal([2], seed=-1)
        with pytest.raises(ValueError, match="set_random_seed: seed must be"):
            tf.set_random_seed("x")


def test_passes_never_fold_or_merge_random_ops():
    assert PRIMITIVES["random"].random and PRIMITIVES["dropout_mask"].random and not PRIMITIVES["add"].random
    g = tf.Graph()
    with g.as_default():
        a = tf.random_normal([3], seed=1)
        b = tf.random_normal([3], seed=1)           # equal attributes
        m = tf.nn.dropout(tf.constant(np.ones(8, np.float32)), rate=0.5, seed=2)   # all inputs constant
        out = [a + 0.0, b + 0.0, m]
    prog = passes.prune(g.with_outputs(out))
    folded = passes.fold_constants(prog)
    assert sum(e.prim.name == "dropout_mask" for e in folded.eqns) == 1
    merged = passes.cse(folded)
    assert sum(e.prim.name == "random" for e in merged.eqns) == 2
    with tf.Session(g) as s:
        runs = [s.run(m) for _ in range(4)]
    assert any(not np.array_equal(runs[0], r) for r in runs[1:])


def test_variable_from_a_random_op():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(tf.random_normal([2, 3], seed=5), name="w")
        x = tf.placeholder((2,), name="x")
        with pytest.raises(TypeError, match="initial_value '.*' depends on placeholder 'x'"):
            tf.Variable(x * 2.0)
    want = np.random.default_rng([tf.DEFAULT_GRAPH_SEED, 5]).standard_normal((2, 3), dtype=np.float32)
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        np.testing.assert_array_equal(s.run(w), want)


# --------------------------------------------------------------------------
# dropout
# --------------------------------------------------------------------------

def test_dropout_new_mask_every_run_and_gradient_uses_it():
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        x = tf.placeholder((None, 50), name="x")
        y = tf.nn.dropout(x, keep_prob=0.8)
        gx, = tf.gradients(tf.reduce_sum(y * 3.0), [x])
    xv = np.random.default_rng(1).uniform(1, 2, (40, 50)).astype(np.float32)
    masks = []
    with tf.Session(g) as s:
        for _ in range(4):
            yv, gv = s.run([y, gx], {x: xv})
            mask = yv / xv
            np.testing.assert_allclose(np.unique(np.round(mask, 5)), [0, 1.25], rtol=1e-6)
            np.testing.assert_allclose(gv, 3.0 * mask, rtol=1e-5)     # the same run's mask
            masks.append(mask)
    for k in range(1, 4):
        assert not np.array_equal(masks[k], masks[k - 1])
    kept = np.mean([m > 0 for m in masks])
    assert abs(kept - 0.8) < 0.02


def test_dropout_rate_keep_prob_and_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((1000,), name="x")
        assert tf.nn.dropout(x, keep_prob=1.0) is x
        assert tf.nn.dropout(x, rate=0.0) is x
        y = tf.nn.dropout(x, rate=0.75, seed=1, name="drop")
        with pytest.raises(ValueError, match="exactly one of keep_prob= and rate="):
            tf.nn.dropout(x, keep_prob=0.5, rate=0.5)
        with pytest.raises(ValueError, match=r"keep_prob must be a scalar in \(0, 1\], got 0"):
            tf.nn.dropout(x, keep_prob=0)
        with pytest.raises(ValueError, match=r"rate must be a scalar in \[0, 1\), got 1"):
            tf.nn.dropout(x, rate=1)
    assert y.name == "drop/mul"
    with tf.Session(g) as s:
        v = s.run(y, {x: np.ones(1000, np.float32)})
    assert set(np.unique(v)) == {0.0, 4.0} and abs((v > 0).mean() - 0.25) < 0.05


def test_traced_dropout_draws_a_new_mask_per_call():
    drop = dn.nn.Dropout(0.5, rng=np.random.default_rng(3))
    step = tf.trace(lambda x: drop(x))
    x = np.ones((8, 8), np.float32)
    outs = [step(x).data for _ in range(3)]
    assert step.traces == 1
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[1], outs[2])
    assert set(np.unique(outs[0])) == {0.0, 2.0}
    drop2 = dn.nn.Dropout(0.5, rng=np.random.default_rng(3))
    again = tf.trace(lambda x: drop2(x))
    np.testing.assert_array_equal(again(x).data, outs[0])       # same module seed, same masks


# --------------------------------------------------------------------------
# layers.dense, get_variable, variable_scope
# --------------------------------------------------------------------------

def test_dense_values_names_and_reuse():
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(2)
        x = tf.placeholder((None, 3), name="x")
        h = tf.layers.dense(x, 4, activation=tf.nn.relu)
        y = tf.layers.dense(h, 2, use_bias=False, kernel_initializer=tf.constant_initializer(0.5))
        h2 = tf.layers.dense(x, 4, activation=tf.nn.relu, name="dense", reuse=True)
        names = [v.name for v in tf.global_variables()]
        init = tf.global_variables_initializer()
    assert names == ["dense/kernel", "dense/bias", "dense_1/kernel"]
    k = g.get_tensor_by_name("dense/kernel:0")
    limit = np.sqrt(6 / (3 + 4))
    xv = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    with tf.Session(g) as s:
        s.run(init)
        kv, hv, yv, h2v = s.run([k, h, y, h2], {x: xv})
    assert kv.shape == (3, 4) and (np.abs(kv) <= limit).all() and kv.std() > 0.1
    np.testing.assert_allclose(hv, np.maximum(xv @ kv, 0), rtol=1e-6)
    np.testing.assert_allclose(yv, hv @ np.full((4, 2), 0.5, np.float32), rtol=1e-6)
    np.testing.assert_array_equal(h2v, hv)                      # shared variables


def test_dense_rank3_and_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((2, 3, 4), name="x")
        y = tf.layers.dense(x, 5, kernel_initializer=tf.ones_initializer(), bias_initializer=tf.constant_initializer(1.0))
        with pytest.raises(ValueError, match="dense: the last dimension of the inputs should be defined"):
            tf.layers.dense(tf.placeholder((2, None)), 3)
        with pytest.raises(ValueError, match="dense: units must be a positive integer, got 0"):
            tf.layers.dense(x, 0)
    xv = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        v = s.run(y, {x: xv})
    np.testing.assert_allclose(v, np.repeat(xv.sum(-1, keepdims=True), 5, -1) + 1)


def test_get_variable_and_variable_scope_reuse():
    g = tf.Graph()
    with g.as_default():
        with tf.variable_scope("foo"):
            v = tf.get_variable("v", [1], initializer=tf.zeros_initializer())
            op = v + 1.0
            with tf.variable_scope("bar"):
                w = tf.get_variable("w", (2, 2))
        with tf.variable_scope("foo", reuse=True):
            assert tf.get_variable("v", [1]) is v
            with tf.variable_scope("bar"):               # reuse is inherited
                assert tf.get_variable("w") is w
            with pytest.raises(ValueError, match="Variable foo/u does not exist, or was not created with "
                                                 r"tf.get_variable\(\). Did you mean to set reuse=tf.AUTO_REUSE"):
                tf.get_variable("u", [1])
            with pytest.raises(ValueError, match=r"Trying to share variable foo/v, but specified shape \(2,\) and "
                                                 r"found shape \(1,\)"):
                tf.get_variable("v", [2])
        with tf.variable_scope("foo"):
            with pytest.raises(ValueError, match="(?s)Variable foo/v already exists, disallowed. Did you mean to set "
                                                 "reuse=True or reuse=tf.AUTO_REUSE in VarScope\\? Originally "
                                                 "defined at:.*test_tf1_names.py"):
                tf.get_variable("v", [1])
        with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
            a1 = tf.get_variable("a", [3], initializer=tf.ones_initializer())
            a2 = tf.get_variable("a", [3])
        with pytest.raises(ValueError, match=r"Shape of a new variable \(nos\) must be fully defined, but instead "
                                             r"was <unknown>"):
            tf.get_variable("nos")
        with tf.variable_scope("init", initializer=tf.constant_initializer(7.0)):
            c = tf.get_variable("c", [2])
        with tf.name_scope("ns"):
            n = tf.constant(1.0, name="one")
    assert a1 is a2
    assert (v.name, w.name, a1.name, c.name) == ("foo/v", "foo/bar/w", "auto/a", "init/c")
    assert op.name.startswith("foo/") and n.name == "ns/one"
    assert g.get_tensor_by_name("foo/bar/w:0") is w
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        assert s.run(op)[0] == 1.0 and (s.run(c) == 7).all() and (s.run(a1) == 1).all()


# --------------------------------------------------------------------------
# default sessions, names
# --------------------------------------------------------------------------

def test_eval_and_run_in_default_sessions():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((2,), name="x")
        w = tf.Variable([1.0, 2.0], name="w")
        y = x * w
        inc = w.assign_add([1.0, 1.0])
        init = tf.global_variables_initializer()
    with pytest.raises(ValueError, match="Cannot evaluate tensor 'mul' using `eval\\(\\)`: No default session is "
                                         "registered. Use `with sess.as_default\\(\\)` or pass an explicit session"):
        y.eval({x: [1.0, 1.0]})
    with pytest.raises(ValueError, match="Cannot execute operation 'init' using `run\\(\\)`: No default session"):
        init.run()
    with tf.Session(g) as sess:
        assert tf.get_default_session() is sess and tf.get_default_graph() is g
        init.run()
        np.testing.assert_array_equal(y.eval({x: [1.0, 1.0]}), [1, 2])
        np.testing.assert_array_equal(inc.eval(), [2, 3])      # an assign is a value, as in TF1
        np.testing.assert_array_equal(y.eval(feed_dict={"x:0": [2.0, 2.0]}), [4, 6])
        other = tf.Session(g)
        other.run(init)
        with other.as_default():
            np.testing.assert_array_equal(w.eval(), [1, 2])
        np.testing.assert_array_equal(w.eval(), [2, 3])
        np.testing.assert_array_equal(w.eval(session=other), [1, 2])
    assert tf.get_default_session() is None
    with pytest.raises(ValueError, match="Cannot use the given session to evaluate tensor 'w': its graph is different"):
        w.eval(session=tf.Session(tf.Graph()))


def test_interactive_session():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0, 2.0])
        b = a * 3.0
    sess = tf.InteractiveSession(g)
    try:
        assert tf.get_default_session() is sess
        np.testing.assert_array_equal(b.eval(), [3, 6])
    finally:
        sess.close()
    assert tf.get_default_session() is None
    with pytest.raises(ValueError, match="No default session"):
        b.eval()


def test_get_tensor_and_operation_by_name():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 2), name="x")
        h, c = dn.lstm_cell(x, np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32),
                            np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), np.zeros(4, np.float32),
                            np.zeros(4, np.float32))
        w = tf.Variable(1.0, name="w")
        train = tf.group(w.assign_add(1.0), name="train")
    assert g.get_tensor_by_name("x:0") is x
    assert g.get_tensor_by_name(h.name) is h and h.name.endswith(":0") and c.name.endswith(":1")
    op = g.get_operation_by_name("x")
    assert op.type == "placeholder" and op.outputs == [x] and op.inputs == []
    assert g.get_operation_by_name("train") is train
    with pytest.raises(KeyError, match="The name 'y:0' refers to a Tensor which does not exist. The operation, 'y', "
                                       "does not exist in the graph."):
        g.get_tensor_by_name("y:0")
    with pytest.raises(KeyError, match="The name 'x:1' refers to a Tensor which does not exist. The operation, 'x', "
                                       "exists but has no output 1."):
        g.get_tensor_by_name("x:1")
    with pytest.raises(ValueError, match="The name 'x' looks like an \\(invalid\\) Operation name, not a Tensor"):
        g.get_tensor_by_name("x")
    with pytest.raises(ValueError, match="looks like a Tensor name, not an Operation name"):
        g.get_operation_by_name("x:0")
    with pytest.raises(KeyError, match="The name 'nope' refers to an Operation not in the graph"):
        g.get_operation_by_name("nope")
    with tf.Session(g) as s:
        s.run(w.initializer)
        assert s.run("train") is None and s.run("w:0") == 2.0


def test_random_ops_in_a_while_loop_draw_per_iteration_and_their_gradient_uses_the_forward_draws():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((64,), name="x")

        def body(t, h):
            return t + 1, tf.nn.dropout(h, rate=0.5, seed=1) * 0.5 + x

        _, h = tf.while_loop(lambda t, h: t < 3, body, [0, tf.constant(np.ones(64, np.float32))])
        gx, = tf.gradients(tf.reduce_sum(h), [x])
    xv = np.zeros(64, np.float32)
    with tf.Session(g) as s:
        a, b = s.run(h, {x: xv}), s.run(h, {x: xv})
        assert not np.array_equal(a, b)
        # three iterations, each a fresh mask: the survivors of all three keep 1, the others are 0
        assert set(np.unique(a)) <= {0.0, 1.0} and 0 < a.mean() < 0.5
        # the forward keeps what the gradient reads (the masks among it), so the gradient uses the masks the
        # forward drew, as TF1's does: h3 = m3 h2 + x, h2 = m2 h1 + x, h1 = m1 + x (dropout scales by 2), so
        # d sum(h3) / dx = 1 + m3 + m3 m2, and 3 exactly where h3 = m3 m2 m1 = 1
        hv, gv = s.run([h, gx], {x: xv})
        assert set(np.unique(gv)) <= {1.0, 2.0, 3.0}
        np.testing.assert_array_equal(gv[hv == 1.0], 3.0)


# --------------------------------------------------------------------------
# equality
# --------------------------------------------------------------------------


def test_value_equality_is_elementwise_and_operations_compare_by_identity():
    """``==`` / ``!=`` on values build equal / not_equal nodes (TF2's tensor
    equality, where TF1 compared identities); values hash by identity, and an
    Operation (no value) compares by identity."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None,), name="x")
        v = tf.Variable(np.array([1.0, 2.0, 3.0], np.float32), name="v")
        e, ne, ev = x == 2.0, np.array([1.0, 2.0, 0.0], np.float32) != x, v == x
        init = tf.global_variables_initializer()
        init2 = tf.group(v)
    assert all(isinstance(t, tf.Value) and t.dtype == np.bool_ for t in (e, ne, ev))
    assert (x == None) is False and (x != None) is True     # noqa: E711
    assert {x: 1, v: 2}[v] == 2 and x in {x} and len({x, e, ne}) == 3
    assert init == init and init != init2 and (init == init2) is False
    with tf.Session(graph=g) as sess:
        sess.run(init)
        got = sess.run([e, ne, ev], {x: np.array([2.0, 2.0, 3.0], np.float32)})
    np.testing.assert_array_equal(got[0], [True, True, False])
    np.testing.assert_array_equal(got[1], [True, False, True])
    np.testing.assert_array_equal(got[2], [False, True, True])


def test_static_values_are_immutable_and_augmented_assignment_rebinds():
    with tf.Graph().as_default():
        x = tf.placeholder((3,), name="x")
        v = tf.Variable(np.zeros(3, np.float32), name="v")
        for call in (lambda: x.add_(1.0), lambda: v.zero_(), lambda: x.mul_(2), lambda: x.copy_(x),
                     lambda: x.clamp_(0, 1), lambda: x.fill_(1)):
            with pytest.raises(TypeError, match=r"is a static-graph value, which is immutable .* v.assign"):
                call()
        with pytest.raises(TypeError, match="setitem: Value 'x' is a static-graph value"):
            x[0] = 1.0
        y = x
        y += 1.0                         # TF1: a new value, x unchanged
        assert y is not x and isinstance(y, tf.Value) and y.op.prim.name == "add"
        assert not hasattr(tf.Value, "__iadd__")
    with tf.Session(graph=x.graph) as sess:
        np.testing.assert_allclose(sess.run(y, {x: np.zeros(3, np.float32)}), [1.0, 1.0, 1.0])
