"""The TF1-style API: graphs, Variables, Session.run, fetch structures, the
linear-regression example against eager mode, optimizers against the eager
ones, every error path, plan caching and invalidation, and stats."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as ds
from dynnets.nn import optim

X = np.array([1, 2, 3, 4], np.float32)
Y = np.array([2, 4, 6, 8], np.float32)


def _linreg(opt_factory=lambda: ds.train.GradientDescentOptimizer(0.01)):
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None,), name="x")
        y_target = ds.placeholder((None,), name="y_target")
        w = ds.Variable(0.1, name="w")
        b = ds.Variable(0.3, name="b")
        loss = ds.reduce_mean((w * x + b - y_target) ** 2)
        train_op = opt_factory().minimize(loss)
        init = ds.global_variables_initializer()
    return g, x, y_target, w, b, loss, train_op, init


def test_linear_regression_matches_eager():
    """The users' example, TF1 style, takes exactly the eager steps."""
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    ew = dn.Parameter(np.float32(0.1))
    eb = dn.Parameter(np.float32(0.3))
    opt = optim.SGD([ew, eb], lr=0.01)
    with ds.Session(g) as sess:
        sess.run(init)
        for step in range(6):
            _, lval = sess.run([train_op, loss], {x: X, y_target: Y})
            opt.zero_grad()
            eloss = ((ew * dn.tensor(X) + eb - dn.tensor(Y)) ** 2).mean()
            eloss.backward()
            opt.step()
            assert lval == pytest.approx(float(eloss.data), rel=1e-6)
            wv, bv = sess.run([w, b])
            np.testing.assert_allclose(wv, ew.data, rtol=1e-6)
            np.testing.assert_allclose(bv, eb.data, rtol=1e-6)
        assert lval < 24.315       # it learns
    assert float(np.float32(0.1)) != float(wv)


def test_first_step_values_by_hand():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    with ds.Session(g) as sess:
        sess.run(init)
        _, l0 = sess.run([train_op, loss], {x: X, y_target: Y})
        # loss = mean((0.3 - 1.9 x)^2) = 24.315; dL/dw = mean(2 (0.3 - 1.9x) x) = -27, dL/db = -8.9
        assert l0 == pytest.approx(24.315, rel=1e-6)
        wv, bv = sess.run([w, b])
        assert wv == pytest.approx(0.1 + 0.01 * 27.0, rel=1e-5)
        assert bv == pytest.approx(0.3 + 0.01 * 8.9, rel=1e-5)


def test_fetch_structures_and_operations():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((2,), name="a")
        s = ds.reduce_sum(a)
        d = a * 2.0
        op = ds.group(s, d)
    with ds.Session(g) as sess:
        fd = {a: np.array([1.0, 2.0], np.float32)}
        assert sess.run(s, fd) == 3.0
        r = sess.run({"sum": s, "pair": (d, [s, op])}, fd)
        assert set(r) == {"sum", "pair"}
        assert r["sum"] == 3.0
        assert isinstance(r["pair"], tuple) and isinstance(r["pair"][1], list)
        np.testing.assert_array_equal(r["pair"][0], [2.0, 4.0])
        assert r["pair"][1][1] is None
        assert sess.run(op, fd) is None
        assert sess.run([], fd) == []


def test_fetched_arrays_are_the_callers():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    with ds.Session(g) as sess:
        sess.run(init)
        w0 = sess.run(w)
        w0 += 100.0                          # does not touch the variable
        assert sess.run(w) == pytest.approx(0.1)
        # a value computed from a variable in a run with the train op is the value the step started from;
        # the variable itself, fetched with the op that writes it, is its value when the run ends (TF1's
        # ref variables: sess.run([train_op, global_step]) gives the new step)
        before, fetched, _ = sess.run([w * 1.0, w, train_op], {x: X, y_target: Y})
        after = sess.run(w)
        assert before == pytest.approx(0.1) and after != pytest.approx(0.1) and fetched == after
        assert sess.variable_value(w) == after
        fetched[...] = 7.0                   # still the caller's copy
        assert sess.run(w) == after


def test_sessions_hold_separate_variable_values():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    s1, s2 = ds.Session(g), ds.Session(g)
    s1.run(init)
    s2.global_variables_initializer()
    s1.run(train_op, {x: X, y_target: Y})
    assert s1.run(w) != s2.run(w)
    w.load(5.0, s2)
    assert s2.run(w) == 5.0
    s1.close()
    with pytest.raises(RuntimeError, match="closed"):
        s1.run(w)


def test_assign_ops_and_initializer():
    g = ds.Graph()
    with g.as_default():
        v = ds.Variable(np.zeros(3, np.float32), name="v")
        add1 = v.assign_add(np.ones(3, np.float32))
        set7 = v.assign(ds.constant([7.0, 7.0, 7.0]))
    with ds.Session(g) as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(add1), [1, 1, 1])
        np.testing.assert_array_equal(sess.run(add1), [2, 2, 2])
        np.testing.assert_array_equal(sess.run(set7), [7, 7, 7])
        np.testing.assert_array_equal(sess.run(v), [7, 7, 7])
        with pytest.raises(ds.ShapeError, match="assign"):
            with g.as_default():
                v.assign(np.zeros(4, np.float32))


def test_learning_rate_placeholder():
    g = ds.Graph()
    with g.as_default():
        lr = ds.placeholder((), name="lr")
        w = ds.Variable(np.float32(1.0), name="w")
        loss = w * w
        step = ds.train.GradientDescentOptimizer(lr).minimize(loss)
    with ds.Session(g) as sess:
        sess.global_variables_initializer()
        sess.run(step, {lr: 0.25})          # w -= 0.25 * 2w
        assert sess.run(w) == pytest.approx(0.5)
        sess.run(step, {lr: 0.0})
        assert sess.run(w) == pytest.approx(0.5)


# --------------------------------------------------------------------------
# optimizers against the eager ones (dense and row-sparse gradients)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["sgd", "adagrad", "adam", "adam-lazy", "sgd-wd", "adagrad-wd"])
def test_optimizers_match_eager(kind):
    rng = np.random.default_rng(0)
    E0 = rng.standard_normal((6, 3)).astype(np.float32)
    W0 = rng.standard_normal((2, 3)).astype(np.float32)
    ids_batches = [np.array([0, 2, 2]), np.array([5, 1, 0]), np.array([3, 3, 3])]
    tgt = np.array([0, 1, 1])
    wd = 0.01 if kind.endswith("-wd") else 0.0

    def static_opt():
        if kind.startswith("sgd"):
            return ds.train.GradientDescentOptimizer(0.1, weight_decay=wd)
        if kind.startswith("adagrad"):
            return ds.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0, epsilon=1e-10, weight_decay=wd)
        return ds.train.AdamOptimizer(0.05, lazy=(kind == "adam-lazy"), torch_epsilon=True)   # eager Adam's rule

    def eager_opt(ps):
        if kind.startswith("sgd"):
            return optim.SGD(ps, lr=0.1, weight_decay=wd)
        if kind.startswith("adagrad"):
            return optim.Adagrad(ps, lr=0.1, weight_decay=wd)
        return optim.Adam(ps, lr=0.05, lazy=(kind == "adam-lazy"))

    g = ds.Graph()
    with g.as_default():
        ids = ds.placeholder((3,), np.int64, name="ids")
        t = ds.placeholder((3,), np.int64, name="t")
        E = ds.Variable(E0, name="E")
        W = ds.Variable(W0, name="W")
        logits = ds.matmul(ds.nn.embedding_lookup(E, ids), W, transpose_b=True)
        loss = ds.reduce_mean(ds.nn.sparse_softmax_cross_entropy_with_logits(labels=t, logits=logits))
        opt = static_opt()
        gv = opt.compute_gradients(loss)
        assert gv[0][0].sparse        # the embedding gradient stays row-sparse
        train = opt.apply_gradients(gv)
    eE, eW = dn.Parameter(E0), dn.Parameter(W0)
    eopt = eager_opt([eE, eW])
    with ds.Session(g) as sess:
        sess.global_variables_initializer()
        for b in ids_batches:
            _, lval = sess.run([train, loss], {ids: b, t: tgt})
            eopt.zero_grad()
            eloss = dn.cross_entropy(dn.embedding(eE, b) @ eW.T, tgt)
            eloss.backward()
            eopt.step()
            assert lval == pytest.approx(float(eloss.data), rel=1e-5)
            np.testing.assert_allclose(sess.run(E), eE.data, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(sess.run(W), eW.data, rtol=1e-5, atol=1e-6)
        if kind in ("sgd", "adagrad", "adam-lazy"):
            # rows never looked up keep their values (sparse application)
            np.testing.assert_array_equal(sess.run(E)[4], E0[4])


def test_tf1_adagrad_defaults():
    g = ds.Graph()
    with g.as_default():
        w = ds.Variable(np.array([1.0, -2.0], np.float32))
        loss = ds.reduce_sum(w * w)
        opt = ds.train.AdagradOptimizer(0.5)
        step = opt.minimize(loss)
    with ds.Session(g) as sess:
        sess.global_variables_initializer()
        sess.run(step)
        grad = np.array([2.0, -4.0])
        acc = 0.1 + grad ** 2
        np.testing.assert_allclose(sess.run(w), np.array([1.0, -2.0]) - 0.5 * grad / np.sqrt(acc), rtol=1e-6)
        np.testing.assert_allclose(sess.run(opt.get_slot(w, "accumulator")), acc, rtol=1e-6)


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------

def test_error_placeholder_not_fed():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    with ds.Session(g) as sess:
        sess.run(init)
        with pytest.raises(ds.FeedError, match="placeholder 'y_target'.*must be fed"):
            sess.run(loss, {x: X})


def test_error_wrong_shape_and_dtype():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((None, 3), name="a")
        i = ds.placeholder((2,), np.int64, name="i")
        s = ds.reduce_sum(a) + ds.reduce_sum(ds.cast(i, np.float32))
    with ds.Session(g) as sess:
        with pytest.raises(ds.FeedError, match=r"placeholder 'a' expects shape \(\?, 3\), given a value of shape \(2, 4\)"):
            sess.run(s, {a: np.zeros((2, 4), np.float32), i: np.zeros(2, np.int64)})
        with pytest.raises(ds.FeedError, match=r"placeholder 'a' expects shape \(\?, 3\).*shape \(3,\)"):
            sess.run(s, {a: np.zeros(3, np.float32), i: np.zeros(2, np.int64)})
        with pytest.raises(ds.FeedError, match="placeholder 'i' expects dtype int64, given a value of dtype float"):
            sess.run(s, {a: np.zeros((2, 3), np.float32), i: np.zeros(2, np.float32)})
        # a safe cast is accepted: float64 data into a float32 placeholder, Python lists
        assert sess.run(s, {a: np.ones((2, 3)), i: [1, 2]}) == pytest.approx(9.0)


def test_error_uninitialised_variable_names_it():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    with ds.Session(g) as sess:
        with pytest.raises(ds.UninitializedVariableError, match="'w'"):
            sess.run(loss, {x: X, y_target: Y})
        with pytest.raises(ds.UninitializedVariableError, match="initialised"):
            sess.run(train_op, {x: X, y_target: Y})
        sess.run(w.initializer)
        with pytest.raises(ds.UninitializedVariableError, match="'b'"):
            sess.run(loss, {x: X, y_target: Y})
        sess.run(init)
        assert sess.run(loss, {x: X, y_target: Y}) == pytest.approx(24.315)


def test_error_optimizer_slots_created_after_initializer():
    g = ds.Graph()
    with g.as_default():
        w = ds.Variable(np.ones(2, np.float32), name="w")
        init = ds.global_variables_initializer()
        step = ds.train.AdamOptimizer(0.1).minimize(ds.reduce_sum(w * w))
    with ds.Session(g) as sess:
        sess.run(init)
        with pytest.raises(ds.UninitializedVariableError, match="Adam"):
            sess.run(step)


def test_error_fetch_from_another_graph():
    g1, g2 = ds.Graph(), ds.Graph()
    with g1.as_default():
        a = ds.constant(1.0)
    with g2.as_default():
        b = ds.constant(2.0)
    with ds.Session(g1) as sess:
        with pytest.raises(ds.GraphError, match="cannot fetch 'Const'.*another graph"):
            sess.run([a, b])
        with pytest.raises(TypeError, match="cannot fetch int"):
            sess.run(3)
        assert sess.run("Const") is None            # running an op by name gives None, as TF1
        assert sess.run("Const:0") == 1.0
    with pytest.raises(ds.GraphError, match="another graph"):
        _ = a + b


def test_error_feeding_a_non_placeholder():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    other = ds.Graph()
    with other.as_default():
        foreign = ds.placeholder((4,), name="foreign")
    with ds.Session(g) as sess:
        sess.run(init)
        with pytest.raises(ds.GraphError, match="cannot feed 'w': it is a variable op, not a placeholder"):
            sess.run(loss, {x: X, y_target: Y, w: 1.0})
        with pytest.raises(ds.GraphError, match="cannot feed 'mean'"):
            sess.run(loss, {x: X, y_target: Y, loss: 1.0})
        with pytest.raises(ds.GraphError, match="'foreign'.*another graph"):
            sess.run(loss, {x: X, y_target: Y, foreign: X})
        with pytest.raises(ds.GraphError, match="not a graph value"):
            sess.run(loss, {3: X, y_target: Y})
        with pytest.raises(ValueError, match="cannot feed 'x': The name 'x' looks like an \\(invalid\\) Operation "
                                             "name, not a Tensor"):
            sess.run(loss, {"x": X, y_target: Y})
        with pytest.raises(KeyError, match="cannot feed 'nope:0': The name 'nope:0' refers to a Tensor which does "
                                           "not exist. The operation, 'nope', does not exist in the graph."):
            sess.run(loss, {"nope:0": X, y_target: Y})
        with pytest.raises(ds.FeedError, match="placeholder 'x' is fed twice"):
            sess.run(loss, {"x:0": X, x: X, y_target: Y})
        assert sess.run(loss, {"x:0": X, "y_target:0": Y}) == sess.run(loss, {x: X, y_target: Y})


def test_shape_error_at_construction_names_op_and_line():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((None, 3), name="a")
        w = ds.Variable(np.zeros((4, 2), np.float32))
        with pytest.raises(ds.ShapeError, match=r"matmul: x.shape\[-1\]=3 does not match w.shape\[0\]=4.*"
                                                r"created at test_session.py:\d+"):
            ds.matmul(a, w)
        n_before = len(g)
        with pytest.raises(ds.ShapeError, match="add"):
            a + np.zeros(4)
        assert len(g) == n_before + 1      # only the constant; no half-built op


def test_shape_error_from_fed_shapes_names_op():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((None,), name="a")
        b = ds.placeholder((None,), name="b")
        c = a + b
    with ds.Session(g) as sess:
        with pytest.raises(ds.ShapeError, match="add: shapes cannot be broadcast.*op 'add'"):
            sess.run(c, {a: np.zeros(3, np.float32), b: np.zeros(4, np.float32)})


def test_runtime_error_names_op():
    g = ds.Graph()
    with g.as_default():
        ids = ds.placeholder((2,), np.int64, name="ids")
        E = ds.Variable(np.zeros((3, 2), np.float32), name="E")
        out = ds.nn.embedding_lookup(E, ids)
        taken = ds.take(E, ids)
        gathered = ds.gather(E, ids)
    with ds.Session(g) as sess:
        sess.global_variables_initializer()
        for _ in range(3):      # both executor tiers
            with pytest.raises(ds.OpError, match=r"op 'take'.*created at test_session.py:\d+.*failed"):
                sess.run(taken, {ids: np.array([0, 7])})
            # TF1's gather checks its indices (negative ones too, which numpy would wrap)
            for bad in (7, -1):
                with pytest.raises(IndexError, match=rf"gather_nd: indices\[..., 0\] = {bad} is out of range for "
                                                     rf"params.shape\[0\]=3.*op 'gather_nd'.*created at "
                                                     rf"test_session.py:\d+"):
                    sess.run(gathered, {ids: np.array([0, bad])})
            # an out-of-range id is a bad input: an IndexError naming the op and where it was created
            with pytest.raises(IndexError, match=r"embedding: id 7 is out of range.*op 'embedding'.*created at "
                                                 r"test_session.py:\d+"):
                sess.run(out, {ids: np.array([0, 7])})


def test_symbolic_value_has_no_truth_value():
    with ds.Graph().as_default():
        a = ds.placeholder((2,))
        with pytest.raises(TypeError, match="depend on shapes"):
            if ds.reduce_sum(a):
                pass


# --------------------------------------------------------------------------
# plan caching and invalidation, stats
# --------------------------------------------------------------------------

def test_plan_cache_keys_and_invalidation():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    with ds.Session(g) as sess:
        sess.run(init)
        fd = {x: X, y_target: Y}
        for _ in range(5):
            sess.run([train_op, loss], fd)
        assert len(sess.stats) == 2          # init, train
        assert sess.stats[1]["runs"] == 5
        first = sess._plans[next(k for k in sess._plans if k != init)]
        # adding nodes after a run does not invalidate existing plans
        with g.as_default():
            doubled = loss * 2.0
            extra = ds.reduce_sum(x * x)
        sess.run([train_op, loss], fd)
        assert len(sess.stats) == 2 and sess.stats[1]["runs"] == 6
        assert sess._plans[first.key] is first
        # a new fetch gets a new plan; old and new give consistent values
        l1, d1 = sess.run([loss, doubled], fd)
        assert d1 == pytest.approx(2 * l1)
        assert len(sess.stats) == 3
        # the same fetches in another container, or another feed shape or dtype, are other keys
        sess.run((loss, doubled), fd)
        sess.run([loss, doubled], {x: X[:3], y_target: Y[:3]})
        sess.run([loss, doubled], {x: X.astype(np.float64), y_target: Y})
        assert len(sess.stats) == 6
        sess.run([loss, doubled], {x: X[:3], y_target: Y[:3]})
        assert len(sess.stats) == 6
        assert sess.run(extra, fd) == pytest.approx(30.0)
        assert len(sess.stats) == 7


def test_stats_fields():
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    with ds.Session(g) as sess:
        sess.run(init)
        for _ in range(4):
            sess.run(train_op, {x: X, y_target: Y})
        st = sess.stats[1]
        assert st["runs"] == 4 and st["mean_run_us"] > 0
        assert st["compile_ms"] > 0 and st["tier"] == 2
        assert st["nodes_graph"] >= st["nodes_before"] >= st["nodes_after"] > 0
        assert st["fetches"] == ["GradientDescent"] and st["feeds"] == ["x", "y_target"]


@pytest.mark.parametrize("jit_after", [1, 10 ** 9])
def test_both_tiers_agree(jit_after):
    g, x, y_target, w, b, loss, train_op, init = _linreg()
    with ds.Session(g, jit_after=jit_after) as sess:
        sess.run(init)
        losses = [sess.run([train_op, loss], {x: X, y_target: Y})[1] for _ in range(5)]
        assert sess.stats[1]["tier"] == (2 if jit_after == 1 else 1)
    with ds.Session(g) as ref:
        ref.run(init)
        want = [ref.run([train_op, loss], {x: X, y_target: Y})[1] for _ in range(5)]
    np.testing.assert_array_equal(losses, want)


def test_default_graph_and_tf1_names():
    ds.reset_default_graph()
    a = ds.placeholder(np.float32, [None, 2])          # TF1 argument order
    assert a.graph is ds.get_default_graph() and a.shape == (None, 2)
    w = ds.Variable(np.ones((2, 3), np.float32))
    y = ds.nn.softmax(ds.matmul(a, w))
    m = ds.reduce_max(y, axis=1, keep_dims=True)
    with ds.Session() as sess:
        sess.run(ds.global_variables_initializer())
        out, mx = sess.run([y, m], {a: np.ones((4, 2))})
    np.testing.assert_allclose(out, np.full((4, 3), 1 / 3), rtol=1e-6)
    assert mx.shape == (4, 1)
    assert ds.trainable_variables() == [w]
    ds.reset_default_graph()


def test_comparisons_argmax_and_accuracy():
    g = ds.Graph()
    with g.as_default():
        logits = ds.placeholder((None, 3), name="logits")
        labels = ds.placeholder((None,), np.int64, name="labels")
        pred = ds.argmax(logits, axis=1)
        acc = ds.reduce_mean(ds.cast(ds.equal(pred, labels), np.float32))
        pos = ds.where(logits > 0.0, logits, ds.zeros_like(logits))
    with ds.Session(g) as sess:
        lg = np.array([[1, 2, 0], [3, -1, 0], [0, 0, 5]], np.float32)
        a, p, r = sess.run([acc, pred, pos], {logits: lg, labels: np.array([1, 0, 0])})
    assert a == pytest.approx(2 / 3) and p.tolist() == [1, 0, 2]
    np.testing.assert_array_equal(r, np.maximum(lg, 0))


def test_symbolic_index_is_a_clear_error_and_gather_works():
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((4, 2), name="x")
        i = ds.placeholder((2,), np.int64, name="i")
        with pytest.raises(TypeError, match="getitem: attribute 'index' holds a symbolic value.*gather"):
            x[i]
        rows = ds.gather(x, i)
    with ds.Session(g) as sess:
        xv = np.arange(8, dtype=np.float32).reshape(4, 2)
        np.testing.assert_array_equal(sess.run(rows, {x: xv, i: [3, 0]}), xv[[3, 0]])
