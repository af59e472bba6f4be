"""TF1's ``tf.train`` additions (MomentumOptimizer, RMSPropOptimizer, the
global step, exponential_decay, piecewise_constant, TF1's argument orders),
``tf.nn`` additions (losses, activations, top_k, in_top_k, moments,
bidirectional_dynamic_rnn) and dynamic_rnn's sequence_length check (issue 21).

Optimizers are checked against TF1's update rules written out in numpy,
step by step, on every executor tier a Session uses (the interpreter, the
generated function and, where it applies, the native tier); nn names against
numpy, torch where cheap, and finite differences in float64."""
import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf

RNG = np.random.default_rng(1521)

X = RNG.standard_normal((8, 3))
Y = RNG.standard_normal((8, 2))
W0 = RNG.standard_normal((3, 2)) * 0.5
B0 = RNG.standard_normal(2) * 0.1


def _grads(w, b):
    """d/dw, d/db of mean((X w + b - Y)^2) over all 16 entries."""
    d = 2 * (X @ w + b - Y) / Y.size
    return X.T @ d, d.sum(0)


def _regression(opt_fn, global_step=False):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), np.float64, name="x")
        y = tf.placeholder((None, 2), np.float64, name="y")
        w = tf.Variable(W0, name="w")
        b = tf.Variable(B0, name="b")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        step = tf.train.get_or_create_global_step() if global_step else None
        opt = opt_fn(step)
        train = opt.minimize(loss, global_step=step)
        init = tf.global_variables_initializer()
    return g, x, y, w, b, train, init, step


def _train(g, x, y, w, b, train, init, steps, **session_kw):
    with tf.Session(g, **session_kw) as s:
        s.run(init)
        for _ in range(steps):
            s.run(train, {x: X, y: Y})
        tiers = {p["tier"] for p in s.stats if p["runs"] >= steps}
        return s.run([w, b]), tiers, s


def _momentum_ref(steps, lr, m, nesterov):
    params, accs = [W0.copy(), B0.copy()], [np.zeros_like(W0), np.zeros_like(B0)]
    for _ in range(steps):
        for p, a, gr in zip(params, accs, _grads(*params)):
            a[...] = a * m + gr
            p -= (gr * lr + a * m * lr) if nesterov else a * lr
    return params


def _rmsprop_ref(steps, lr, decay, momentum, eps, centered):
    params = [W0.copy(), B0.copy()]
    ms = [np.ones_like(p) for p in params]            # TF1 starts the mean square at one
    mom = [np.zeros_like(p) for p in params]
    mg = [np.zeros_like(p) for p in params]
    for _ in range(steps):
        for k, gr in enumerate(_grads(*params)):
            ms[k] = decay * ms[k] + (1 - decay) * gr * gr
            if centered:
                mg[k] = decay * mg[k] + (1 - decay) * gr
                denom = ms[k] - mg[k] ** 2 + eps
            else:
                denom = ms[k] + eps
            mom[k] = momentum * mom[k] + lr * gr / np.sqrt(denom)
            params[k] = params[k] - mom[k]
    return params


OPTS = {
    "momentum": (lambda s: tf.train.MomentumOptimizer(0.05, 0.9), lambda n: _momentum_ref(n, 0.05, 0.9, False)),
    "nesterov": (lambda s: tf.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
                 lambda n: _momentum_ref(n, 0.05, 0.9, True)),
    "rmsprop": (lambda s: tf.train.RMSPropOptimizer(0.01), lambda n: _rmsprop_ref(n, 0.01, 0.9, 0.0, 1e-10, False)),
    "rmsprop-centered-momentum": (lambda s: tf.train.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-6,
                                                                      centered=True),
                                  lambda n: _rmsprop_ref(n, 0.01, 0.8, 0.5, 1e-6, True)),
}


@pytest.mark.parametrize("kind", sorted(OPTS))
def test_new_optimizers_follow_tf1_rules_on_every_tier(kind):
    make, ref = OPTS[kind]
    steps = 12
    want = ref(steps)
    parts = _regression(make)
    # the interpreter only, then all tiers: the generated plan from run 2, the native tier asked for from run 4
    (w1, b1), tiers1, _ = _train(*parts[:-1], steps, jit_after=10 ** 9, native_after=None)
    (w3, b3), tiers3, sess = _train(*parts[:-1], steps, jit_after=2, native_after=4)
    assert tiers1 == {1}
    # the native tier translates only SGD, Adagrad and Adam: it leaves this plan on tier 2, saying why
    assert tiers3 == {2}
    assert any("optimizer" in (p["native"] or "") for p in sess.stats), [p["native"] for p in sess.stats]
    for got in ((w1, b1), (w3, b3)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)


def _adam_tf1_ref(steps, lr, b1, b2, eps, grads=_grads, params=None):
    """TF1's Adam (training_ops.cc ApplyAdam): lr_t = lr sqrt(1 - b2^t) / (1 - b1^t),
    w -= lr_t m / (sqrt(v) + eps): epsilon "hat", before the bias correction."""
    params = [W0.copy(), B0.copy()] if params is None else [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for k, gr in enumerate(grads(*params)):
            m[k] = b1 * m[k] + (1 - b1) * gr
            v[k] = b2 * v[k] + (1 - b2) * gr * gr
            params[k] = params[k] - lr_t * m[k] / (np.sqrt(v[k]) + eps)
    return params


@pytest.mark.parametrize("torch_epsilon", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adam_is_tf1s_epsilon_hat_on_every_tier(dtype, torch_epsilon):
    """A large epsilon (against gradients of ~1e-2) makes the two placements
    of epsilon differ by percents, so PyTorch's rule fails this test (and
    ``torch_epsilon=True``, dynnets' own, is PyTorch's rule on every tier)."""
    lr, b1, b2, eps, steps = 0.05, 0.9, 0.999, 0.1, 12
    want = (_adam_torch_ref if torch_epsilon else _adam_tf1_ref)(steps, lr, b1, b2, eps)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), dtype, name="x")
        y = tf.placeholder((None, 2), dtype, name="y")
        w = tf.Variable(W0.astype(dtype), name="w")
        b = tf.Variable(B0.astype(dtype), name="b")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        train = tf.train.AdamOptimizer(lr, b1, b2, eps, torch_epsilon=torch_epsilon).minimize(loss)
        init = tf.global_variables_initializer()
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=2e-5, atol=1e-6)
    fd = {x: X.astype(dtype), y: Y.astype(dtype)}
    for kw, tier in (({"jit_after": 10 ** 9, "native_after": None}, 1), ({"jit_after": 1, "native_after": None}, 2),
                     ({"jit_after": 1, "native_after": 1}, 3)):
        with tf.Session(g, **kw) as s:
            s.run(init)
            for _ in range(steps):
                s.run(train, fd)
            assert {p["tier"] for p in s.stats if p["runs"] >= steps} == {tier}, s.stats
            got = s.run([w, b])
        np.testing.assert_allclose(got[0], want[0], **tol)
        np.testing.assert_allclose(got[1], want[1], **tol)
    # PyTorch's placement is measurably different here: the test tells the two apart
    assert not np.allclose(_adam_torch_ref(steps, lr, b1, b2, eps)[0], _adam_tf1_ref(steps, lr, b1, b2, eps)[0],
                           rtol=1e-3)


def _adam_torch_ref(steps, lr, b1, b2, eps):
    params = [W0.copy(), B0.copy()]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        for k, gr in enumerate(_grads(*params)):
            m[k] = b1 * m[k] + (1 - b1) * gr
            v[k] = b2 * v[k] + (1 - b2) * gr * gr
            params[k] = params[k] - lr / (1 - b1 ** t) * m[k] / (np.sqrt(v[k]) / np.sqrt(1 - b2 ** t) + eps)
    return params


def test_adam_sparse_gradients_dense_and_lazy_are_tf1s():
    """An embedding's row-sparse gradient: densified (TF1's AdamOptimizer:
    every row's moments decay) or, with lazy=True, the looked-up rows only
    (TF1's LazyAdamOptimizer), both with TF1's epsilon hat."""
    E0 = RNG.standard_normal((4, 2))
    batches = [np.array([0, 1, 1]), np.array([1]), np.array([2, 1])]
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 0.05
    for lazy in (False, True):
        g = tf.Graph()
        with g.as_default():
            ids = tf.placeholder((None,), np.int64)
            E = tf.Variable(E0, name="E")
            loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(E, ids) - 1.0))
            train = tf.train.AdamOptimizer(lr, b1, b2, eps, lazy=lazy).minimize(loss)
        e, m, v = E0.copy(), np.zeros_like(E0), np.zeros_like(E0)
        with tf.Session(g) as s:
            s.run(tf.global_variables_initializer(g))
            for t, rows in enumerate(batches, 1):
                s.run(train, {ids: rows})
                gr = np.zeros_like(e)
                np.add.at(gr, rows, 2 * (e[rows] - 1.0))
                u = np.unique(rows) if lazy else np.arange(len(e))
                lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                m[u] = b1 * m[u] + (1 - b1) * gr[u]
                v[u] = b2 * v[u] + (1 - b2) * gr[u] ** 2
                e[u] -= lr_t * m[u] / (np.sqrt(v[u]) + eps)
                np.testing.assert_allclose(s.run(E), e, rtol=1e-12)


def test_momentum_and_rmsprop_sparse_gradients_update_only_their_rows():
    E0 = RNG.standard_normal((4, 2))
    batches = [np.array([0, 1, 1]), np.array([1]), np.array([2, 1])]
    for kind in ("momentum", "rmsprop"):
        g = tf.Graph()
        with g.as_default():
            ids = tf.placeholder((None,), np.int64)
            E = tf.Variable(E0, name="E")
            loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(E, ids) - 1.0))
            opt = (tf.train.MomentumOptimizer(0.1, 0.9) if kind == "momentum"
                   else tf.train.RMSPropOptimizer(0.1, momentum=0.5))
            train = opt.minimize(loss)
        e, acc, ms, mom = E0.copy(), np.zeros_like(E0), np.ones_like(E0), np.zeros_like(E0)
        with tf.Session(g) as s:
            s.run(tf.global_variables_initializer(g))
            for rows in batches:
                s.run(train, {ids: rows})
                gr = np.zeros_like(e)
                np.add.at(gr, rows, 2 * (e[rows] - 1.0))
                u = np.unique(rows)                       # TF1's sparse_apply_*: only these rows change
                if kind == "momentum":
                    acc[u] = acc[u] * 0.9 + gr[u]
                    e[u] -= 0.1 * acc[u]
                else:
                    ms[u] = 0.9 * ms[u] + 0.1 * gr[u] ** 2
                    mom[u] = 0.5 * mom[u] + 0.1 * gr[u] / np.sqrt(ms[u] + 1e-10)
                    e[u] -= mom[u]
                np.testing.assert_allclose(s.run(E), e, rtol=1e-12)
        assert not np.array_equal(e[3], E0[3] - 1) and np.array_equal(e[3], E0[3])


@pytest.mark.parametrize("schedule", [False, True])
def test_minimize_increments_the_global_step_on_every_tier(schedule):
    def make(step):
        lr = tf.train.exponential_decay(0.1, step, 2, 0.5, staircase=True) if schedule else 0.1
        return tf.train.GradientDescentOptimizer(lr)

    steps = 7
    w, b = W0.copy(), B0.copy()
    for k in range(steps):
        # the step count from before the update; a scheduled rate is float32 (of a Python number, as in TF1)
        lr = float(np.float32(0.1) * np.float32(0.5) ** np.float32(k // 2)) if schedule else 0.1
        gw, gb = _grads(w, b)
        w, b = w - lr * gw, b - lr * gb
    g, x, y, wv, bv, train, init, step = _regression(make, global_step=True)
    assert tf.train.get_global_step(g) is step and tf.train.get_or_create_global_step(g) is step
    assert step.name == "global_step" and step.dtype == np.int64 and not step.trainable
    for kw in ({"jit_after": 10 ** 9, "native_after": None}, {"jit_after": 2, "native_after": 4}):
        with tf.Session(g, **kw) as s:
            s.run(init)
            for _ in range(steps):
                s.run(train, {x: X, y: Y})
            got_w, got_b, n = s.run([wv, bv, step])
            tiers = {p["tier"] for p in s.stats if p["runs"] >= steps}
        np.testing.assert_allclose(got_w, w, rtol=1e-12)
        np.testing.assert_allclose(got_b, b, rtol=1e-12)
        assert n == steps
    # SGD and the step's increment are translated to one native kernel; the schedule's int64 -> float32 cast is not
    assert tiers == ({2} if schedule else {3})
    with tf.Session(g) as s:
        s.run(init)
        for _ in range(3):
            s.run(train, {x: X, y: Y})
        assert tf.train.global_step(s, step) == 3


def test_exponential_decay_and_piecewise_constant_values():
    g = tf.Graph()
    with g.as_default():
        step = tf.train.get_or_create_global_step()
        smooth = tf.train.exponential_decay(0.5, step, 4, 0.1)
        stairs = tf.train.exponential_decay(np.float64(0.5), step, 4, 0.1, staircase=True)
        pw = tf.train.piecewise_constant(step, [2, 5], [1.0, 0.5, 0.1])
        inc = step.assign_add(1)
        with pytest.raises(ValueError, match="piecewise_constant: the length of values"):
            tf.train.piecewise_constant(step, [2], [1.0])
        with pytest.raises(ValueError, match="exponential_decay: global_step is required"):
            tf.train.exponential_decay(0.5, None, 4, 0.1)
        with pytest.raises(ValueError, match="create_global_step: the graph already has a global step"):
            tf.train.create_global_step()
    assert smooth.dtype == np.float32 and stairs.dtype == np.float64 and pw.dtype == np.float32
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        for k in range(8):
            a, b_, c = s.run([smooth, stairs, pw])
            np.testing.assert_allclose(a, 0.5 * 0.1 ** (k / 4), rtol=1e-6)
            np.testing.assert_allclose(b_, 0.5 * 0.1 ** (k // 4), rtol=1e-12)
            assert c == np.float32(1.0 if k <= 2 else 0.5 if k <= 5 else 0.1)
            s.run(inc)


def test_optimizers_take_tf1_positional_arguments():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(1.0, name="w")
        loss = w * w
        sgd = tf.train.GradientDescentOptimizer(0.1, True, "sgd")        # (learning_rate, use_locking, name)
        ada = tf.train.AdagradOptimizer(0.1, 0.2, False, "ada")          # (..., initial_accumulator_value, ...)
        adam = tf.train.AdamOptimizer(0.1, 0.8, 0.9, 1e-7, False, "adam")
        mom = tf.train.MomentumOptimizer(0.1, 0.5, False, "mom", True)
        rms = tf.train.RMSPropOptimizer(0.1, 0.8, 0.3, 1e-6, False, True, "rms")
        step = tf.train.get_or_create_global_step()
        train = sgd.minimize(loss, step)                                # the second positional is global_step
        with pytest.raises(TypeError, match="global_step must be an integer scalar Variable"):
            sgd.minimize(loss, [w])
    assert sgd.weight_decay == 0.0 and sgd.name == "sgd"
    assert (ada.initial_accumulator_value, ada.epsilon, ada.name) == (0.2, 0.0, "ada")
    assert (adam.beta1, adam.beta2, adam.epsilon, adam.weight_decay, adam.name) == (0.8, 0.9, 1e-7, 0.0, "adam")
    assert (mom.momentum, mom.use_nesterov, mom.name) == (0.5, True, "mom")
    assert (rms.decay, rms.momentum, rms.epsilon, rms.centered, rms.name) == (0.8, 0.3, 1e-6, True, "rms")
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        s.run(train)
        assert s.run(step) == 1 and s.run(w) == pytest.approx(0.8)


@pytest.mark.parametrize("kind", ["momentum", "rmsprop-centered-momentum"])
def test_new_optimizers_survive_a_meta_graph(kind):
    make, ref = OPTS[kind]
    g, x, y, w, b, train, init, _ = _regression(make)
    meta = tf.train.export_meta_graph(graph=g)
    g2 = tf.Graph()
    tf.train.import_meta_graph(meta, graph=g2)
    with tf.Session(g2) as s:
        s.run(tf.global_variables_initializer(g2))
        t2 = g2.get_operation_by_name(train.name)
        for _ in range(5):
            s.run(t2, {"x:0": X, "y:0": Y})
        got = s.run(["w:0", "b:0"])
    want = ref(5)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


# --------------------------------------------------------------------------
# tf.nn
# --------------------------------------------------------------------------

def check_grad(build, *xs, eps=1e-6, rtol=1e-6, atol=1e-8):
    """``tf.gradients`` of ``sum(build(*phs) * W)`` against central finite differences, float64."""
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(x.shape, np.float64) for x in xs]
        out = build(*phs)
        wv = np.random.default_rng(0).standard_normal(tuple(out.shape))
        loss = tf.reduce_sum(out * wv)
        grads = tf.gradients(loss, phs)
    feed = {p: x for p, x in zip(phs, xs)}
    with tf.Session(g) as s:
        got = s.run(grads, feed)
        for k, x in enumerate(xs):
            want = np.zeros_like(x)
            for i in np.ndindex(x.shape):
                up, lo = x.copy(), x.copy()
                up[i] += eps
                lo[i] -= eps
                want[i] = (s.run(loss, {**feed, phs[k]: up}) - s.run(loss, {**feed, phs[k]: lo})) / (2 * eps)
            np.testing.assert_allclose(got[k], want, rtol=rtol, atol=atol, err_msg=f"gradient of input {k}")
        return s.run(out, feed)


def test_sigmoid_cross_entropy_matches_tf1_formula_and_torch():
    x = RNG.standard_normal((3, 4)) * 3
    z = RNG.random((3, 4))
    out = check_grad(lambda a, c: tf.nn.sigmoid_cross_entropy_with_logits(labels=c, logits=a), x, z)
    np.testing.assert_allclose(out, np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x))), rtol=1e-12)
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(x), torch.tensor(z), reduction="none")
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-12)
    with tf.Graph().as_default():
        a = tf.placeholder((3, 4))
        with pytest.raises(ValueError, match=r"Only call `sigmoid_cross_entropy_with_logits` with named arguments"):
            tf.nn.sigmoid_cross_entropy_with_logits(a, a)
        with pytest.raises(ValueError, match="logits and labels must have the same shape"):
            tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.placeholder((3,)), logits=a)


def test_softmax_cross_entropy_v1_stops_the_label_gradient_v2_does_not():
    lg = RNG.standard_normal((3, 4))
    lb = RNG.random((3, 4))
    lb /= lb.sum(1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        a, c = tf.placeholder((3, 4), np.float64), tf.placeholder((3, 4), np.float64)
        v1 = tf.nn.softmax_cross_entropy_with_logits(labels=c, logits=a)
        v2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=c, logits=a)
        g1 = tf.gradients(tf.reduce_sum(v1), [a, c])
        g2 = tf.gradients(tf.reduce_sum(v2), [a, c])
        with pytest.raises(ValueError, match=r"Only call `softmax_cross_entropy_with_logits` with named"):
            tf.nn.softmax_cross_entropy_with_logits(c, a)
        with pytest.raises(ValueError, match=r"Only call `sparse_softmax_cross_entropy_with_logits` with named"):
            tf.nn.sparse_softmax_cross_entropy_with_logits(c, a)
    assert g1[1] is None                                  # no gradient into the labels, as TF1's v1
    logp = lg - np.log(np.exp(lg).sum(1, keepdims=True))
    with tf.Session(g) as s:
        r1, r2, ga1, ga2, gc2 = s.run([v1, v2, g1[0], g2[0], g2[1]], {a: lg, c: lb})
    np.testing.assert_allclose(r1, -(lb * logp).sum(1), rtol=1e-12)
    np.testing.assert_allclose(r2, r1, rtol=1e-12)
    np.testing.assert_allclose(ga1, np.exp(logp) - lb, rtol=1e-10)
    np.testing.assert_allclose(ga2, ga1, rtol=1e-12)
    np.testing.assert_allclose(gc2, -logp, rtol=1e-12)
    check_grad(lambda p, q: tf.nn.softmax_cross_entropy_with_logits_v2(q, p, axis=0), lg, lb)


def test_sparse_softmax_cross_entropy_of_any_rank():
    lg = RNG.standard_normal((2, 3, 4))
    lb = np.array([[0, 3, 1], [2, 2, 0]])
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder((None, None, 4), np.float64)
        c = tf.placeholder((None, None), np.int64)
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=c, logits=a)
    logp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
    got = tf.Session(g).run(loss, {a: lg, c: lb})
    np.testing.assert_allclose(got, -np.take_along_axis(logp, lb[..., None], -1)[..., 0], rtol=1e-12)


def test_leaky_relu_and_elu_with_tf1_gradients_at_zero():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 800.0])
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((5,), np.float64)
        lr, el = tf.nn.leaky_relu(p), tf.nn.elu(p)
        glr, gel = tf.gradients(tf.reduce_sum(lr), [p])[0], tf.gradients(tf.reduce_sum(el), [p])[0]
        li = tf.nn.leaky_relu(tf.constant(np.array([-2, 3])), alpha=0.5)        # integers become float32
    vl, ve, vgl, vge, vli = tf.Session(g).run([lr, el, glr, gel, li], {p: x})
    np.testing.assert_array_equal(vl, np.where(x > 0, x, 0.2 * x))
    np.testing.assert_allclose(ve, np.where(x > 0, x, np.expm1(np.minimum(x, 0))), rtol=1e-12)
    np.testing.assert_array_equal(vgl, [0.2, 0.2, 0.2, 1, 1])       # at 0: alpha, as TF1's LeakyReluGrad
    np.testing.assert_allclose(vge, [np.exp(-2), np.exp(-0.5), 1, 1, 1], rtol=1e-12)   # no NaN from exp(800)
    assert vli.dtype == np.float32 and vli.tolist() == [-1.0, 3.0]
    check_grad(lambda a: tf.nn.elu(a) + tf.nn.leaky_relu(a, 0.3), RNG.standard_normal(6))


def test_top_k_and_in_top_k():
    x = np.array([[1.0, 3.0, 3.0, 2.0], [0.5, -1.0, 4.0, 4.0]])
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((None, 4), np.float64)
        res = tf.nn.top_k(p, 2)
        first = tf.nn.top_k(p)
        t = tf.placeholder((None,), np.int64)
        inside = [tf.nn.in_top_k(p, t, k) for k in (1, 2)]
    assert res.values is res[0] and res.indices.dtype == np.int32
    vv, vi, f, i1, i2 = tf.Session(g).run([res.values, res.indices, first.indices] + inside,
                                          {p: x, t: [2, 3]})
    np.testing.assert_array_equal(vv, [[3, 3], [4, 4]])
    np.testing.assert_array_equal(vi, [[1, 2], [2, 3]])            # equal values: the lower index first
    np.testing.assert_array_equal(f, [[1], [2]])
    # class 2 ties with class 1 in row 0: both count as in the top 1, as in TF1
    assert i1.tolist() == [True, True] and i2.tolist() == [True, True]
    y = np.array([[0.1, 0.5, 0.2], [0.3, np.nan, 0.1], [0.9, 0.2, 0.3]])
    with tf.Graph().as_default() as g2:
        p2, t2 = tf.placeholder((3, 3), np.float64), tf.placeholder((3,), np.int64)
        r = [tf.nn.in_top_k(p2, t2, k) for k in (1, 2)]
    got = tf.Session(g2).run(r, {p2: y, t2: [2, 0, 5]})
    assert got[0].tolist() == [False, False, False]                # row 2: target out of range; row 1: a NaN
    assert got[1].tolist() == [True, False, False]
    out = check_grad(lambda a: tf.nn.top_k(a, 3).values, RNG.permutation(10).reshape(2, 5) + 0.5)
    assert out.shape == (2, 3)


def test_moments_against_numpy_and_eager():
    x = RNG.standard_normal((4, 3, 2))
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((None, 3, 2), np.float64)
        m, v = tf.nn.moments(p, [0, 2])
        mk, vk = tf.nn.moments(p, axes=[1], keepdims=True)
        gm, = tf.gradients(tf.reduce_sum(v * np.arange(3.0)), [p])
    vm, vv, vmk, vvk, vgm = tf.Session(g).run([m, v, mk, vk, gm], {p: x})
    np.testing.assert_allclose(vm, x.mean((0, 2)), rtol=1e-12)
    np.testing.assert_allclose(vv, x.var((0, 2)), rtol=1e-12)
    np.testing.assert_allclose(vmk, x.mean(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(vvk, x.var(1, keepdims=True), rtol=1e-12)
    e = dn.tensor(x, requires_grad=True)
    mean = e.mean(axis=(0, 2), keepdims=True)
    ((((e - mean) ** 2).mean(axis=(0, 2))) * dn.tensor(np.arange(3.0))).sum().backward()
    np.testing.assert_allclose(vgm, e.grad.data, rtol=1e-10)


def test_bias_add_and_embedding_lookup_take_tf1_positional_arguments():
    g = tf.Graph()
    with g.as_default():
        v = tf.placeholder((2, 3, 4))
        bias = tf.constant(np.arange(3, dtype=np.float32))
        nchw = tf.nn.bias_add(v, bias, "NCHW")
        with pytest.raises(ValueError, match="bias_add: bias has 3 entries, value's dimension 2 has 4"):
            tf.nn.bias_add(v, bias)
        E = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
        look = tf.nn.embedding_lookup([E], tf.constant(np.array([[3, 0]])), "div")
    vn, vl = tf.Session(g).run([nchw, look], {v: np.zeros((2, 3, 4), np.float32)})
    np.testing.assert_array_equal(vn[1, :, 0], [0, 1, 2])
    np.testing.assert_array_equal(vl, [[[6, 7], [0, 1]]])


# --------------------------------------------------------------------------
# dynamic_rnn's sequence_length, bidirectional_dynamic_rnn
# --------------------------------------------------------------------------

def test_dynamic_rnn_names_a_sequence_length_of_the_wrong_size():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, None, 3), name="x")
        lengths = tf.placeholder((None,), np.int64, name="lengths")
        out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.LSTMCell(4), x, sequence_length=lengths, dtype=np.float32)
        known = tf.placeholder((4, 5, 3), name="known")
        with pytest.raises(tf.ShapeError, match=r"dynamic_rnn: sequence_length \(a constant\) has 3 entries along "
                                                r"axis 0 but inputs \(placeholder 'known'\) has 4 along axis 0 "
                                                r"\(its batch size\)"):
            tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2), known, sequence_length=[5, 2, 1], dtype=np.float32)
        tm = tf.placeholder((5, 4, 3), name="tm")
        with pytest.raises(tf.ShapeError, match=r"sequence_length \(placeholder 'l3'\) has 3 entries along axis 0 "
                                                r"but inputs \(placeholder 'tm'\) has 4 along axis 1"):
            tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2), tm, sequence_length=tf.placeholder((3,), np.int64, name="l3"),
                              dtype=np.float32, time_major=True)
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        assert s.run(out, {x: np.ones((4, 5, 3), np.float32), lengths: [5, 1, 2, 3]}).shape == (4, 5, 4)
        for _ in range(3):        # both executor tiers
            with pytest.raises(tf.ShapeError, match=r"dynamic_rnn: sequence_length \(placeholder 'lengths'\) has 3 "
                                                    r"entries along axis 0 but inputs \(placeholder 'x'\) has 4 along "
                                                    r"axis 0 \(its batch size\) in op "
                                                    r"'rnn/dynamic_rnn/check_sequence_length'"):
                s.run(out, {x: np.ones((4, 5, 3), np.float32), lengths: [5, 1, 2]})


def _lstm_ref(cell, s, x_seq):
    """TF1's LSTM (one kernel over [x, h], gates i, j, f, o, forget_bias 1.0) in numpy, over one sequence."""
    k, b = s.run(cell.kernel), s.run(cell.bias)
    H = b.shape[0] // 4
    h, c = np.zeros((1, H)), np.zeros((1, H))
    hs = []
    for t in range(len(x_seq)):
        i, j, f, o = np.split(np.concatenate([x_seq[t:t + 1], h], 1) @ k + b, 4, axis=1)
        c = c / (1 + np.exp(-(f + 1.0))) + np.tanh(j) / (1 + np.exp(-i))
        h = np.tanh(c) / (1 + np.exp(-o))
        hs.append(h[0])
    return np.array(hs), h[0], c[0]


@pytest.mark.parametrize("time_major", [False, True])
def test_bidirectional_dynamic_rnn_reverses_each_sequence(time_major):
    B, T, D, H = 3, 5, 2, 4
    xv = RNG.standard_normal((B, T, D))
    lens = np.array([5, 2, 3])
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, None, D) if not time_major else (None, None, D), np.float64, name="x")
        L = tf.placeholder((None,), np.int64, name="L")
        fw = tf.nn.rnn_cell.LSTMCell(H, dtype=np.float64, rng=1)
        bw = tf.nn.rnn_cell.LSTMCell(H, dtype=np.float64, rng=2)
        (of, ob), (sf, sb) = tf.nn.bidirectional_dynamic_rnn(fw, bw, x, sequence_length=L, dtype=np.float64,
                                                             time_major=time_major)
        gx, = tf.gradients(tf.reduce_sum(ob * ob) + tf.reduce_sum(sf.h), [x])
    names = [v.name for v in tf.global_variables(g)]
    assert names == ["bidirectional_rnn/fw/lstm_cell/kernel", "bidirectional_rnn/fw/lstm_cell/bias",
                     "bidirectional_rnn/bw/lstm_cell/kernel", "bidirectional_rnn/bw/lstm_cell/bias"]
    feed_x = xv.transpose(1, 0, 2) if time_major else xv
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        vf, vb, vsf, vsb, vgx = s.run([of, ob, sf, sb, gx], {x: feed_x, L: lens})
        if time_major:
            vf, vb, vgx = vf.transpose(1, 0, 2), vb.transpose(1, 0, 2), vgx.transpose(1, 0, 2)
        for i, n in enumerate(lens):
            hf, hlast, clast = _lstm_ref(fw, s, xv[i, :n])
            hb, blast, bclast = _lstm_ref(bw, s, xv[i, :n][::-1])
            np.testing.assert_allclose(vf[i, :n], hf, rtol=1e-10)
            np.testing.assert_allclose(vb[i, :n], hb[::-1], rtol=1e-10)      # aligned with the inputs
            assert not vf[i, n:].any() and not vb[i, n:].any()                 # zero past the length
            np.testing.assert_allclose(vsf.h[i], hlast, rtol=1e-10)
            np.testing.assert_allclose(vsb.h[i], blast, rtol=1e-10)
            np.testing.assert_allclose(vsb.c[i], bclast, rtol=1e-10)
        # the gradient against finite differences in a few entries (padding entries get none)
        assert not vgx[1, 2:].any()
        loss = tf.reduce_sum(ob * ob) + tf.reduce_sum(sf.h)
        for i, t, d in [(0, 0, 0), (1, 1, 1), (2, 2, 0), (0, 4, 1)]:
            up, lo = xv.copy(), xv.copy()
            up[i, t, d] += 1e-6
            lo[i, t, d] -= 1e-6
            tr = (lambda a: a.transpose(1, 0, 2)) if time_major else (lambda a: a)
            fd = (s.run(loss, {x: tr(up), L: lens}) - s.run(loss, {x: tr(lo), L: lens})) / 2e-6
            np.testing.assert_allclose(vgx[i, t, d], fd, rtol=1e-5, atol=1e-8)


def test_bidirectional_dynamic_rnn_without_lengths_reverses_all_steps():
    xv = RNG.standard_normal((2, 4, 3))
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, None, 3), np.float64)
        fw, bw = tf.nn.rnn_cell.GRUCell(2, dtype=np.float64, rng=3), tf.nn.rnn_cell.GRUCell(2, dtype=np.float64, rng=4)
        (of, ob), _ = tf.nn.bidirectional_dynamic_rnn(fw, bw, x, dtype=np.float64, scope="birnn")
        rev, _ = tf.nn.dynamic_rnn(bw, x[:, ::-1], dtype=np.float64)
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        vb, vr = s.run([ob, rev], {x: xv})
    np.testing.assert_allclose(vb, vr[:, ::-1], rtol=1e-12)
    assert any(v.name.startswith("birnn/fw/") for v in tf.global_variables(g))


# --------------------------------------------------------------------------
# TF1's argument orders elsewhere
# --------------------------------------------------------------------------

def test_variable_scope_name_scope_get_variable_and_session_take_tf1_arguments():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((2,))
        with tf.variable_scope("s"):
            a = tf.get_variable("a", [2])
        # TF1's third positional argument is values, not reuse: this scope must not reuse "s/a"
        with tf.variable_scope("s", None, [x]):
            with pytest.raises(ValueError, match="Variable s/a already exists, disallowed"):
                tf.get_variable("a", [2])
        with tf.variable_scope(None, "dflt", [x]) as sc:
            pass
        assert sc.name == "dflt"
        with tf.name_scope(None, "block", [x]) as ns:
            y = x * 2.0
        assert ns == "block/" and y.name.startswith("block/")
        with tf.name_scope("outer"):                                         # (TF1's scope is absolute)
            r = tf.get_variable("r", [2], np.float32, None, lambda w: w * 2.0)   # TF1's fifth positional
        tf.layers.dense(tf.placeholder((None, 2)), 3, None, True, None, None, lambda w: tf.reduce_sum(w))
        reg = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        assert [v.name for v in reg] == ["r/Regularizer/mul", "dense/kernel/Regularizer/sum"]
        with pytest.raises(ValueError, match="dense: activity_regularizer= is not supported"):
            tf.layers.dense(tf.placeholder((None, 2)), 3, activity_regularizer=lambda w: w)
    with tf.Session("", graph=g) as s:                              # TF1's (target, graph)
        s.run(tf.global_variables_initializer(g))
        assert s.run(a).shape == (2,)
        rv, kv, (lr, lk) = s.run([r, g.get_tensor_by_name("dense/kernel:0"), reg])
        np.testing.assert_allclose(lr, rv * 2.0)
        assert lk == pytest.approx(float(kv.sum()), rel=1e-6)
    with pytest.raises(ValueError, match="Session: target='grpc://host:2222': only the in-process target"):
        tf.Session("grpc://host:2222")


def test_constant_variable_gradients_saver_and_cells_take_tf1_arguments(tmp_path):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant([1, 2, 3], np.int64, [2, 3])        # TF1's third positional is shape: filled with the last
        z = tf.constant(0.5, shape=[2])
        with pytest.raises(ValueError, match=r"constant: a value of 4 elements cannot make a constant of shape \(3,\)"):
            tf.constant([1, 2, 3, 4], shape=[3])
        with pytest.raises(TypeError, match=r"constant: expected shape \(3,\), the value has shape \(\)"):
            tf.constant(1.0, shape=[3], verify_shape=True)
        v = tf.Variable(2.0, False, ["extras"], name="v")   # TF1's (initial_value, trainable, collections, ...)
        w = tf.Variable([1.0, 2.0], name="w")
        with pytest.raises(ValueError, match=r"Variable u: shape=\(3,\) does not match the initial value's shape"):
            tf.Variable([1.0, 2.0], name="u", shape=[3])
        x = tf.placeholder((2,))
        gw, gx = tf.gradients(tf.reduce_sum(w * w), [w, x], None, "grads")
        zw, zx = tf.gradients(tf.reduce_sum(w * w), [w, x], unconnected_gradients="zero")
        cell = tf.nn.rnn_cell.LSTMCell(3, False, None, None, None, None, None, None, 0.5)   # forget_bias is 9th
        saver = tf.train.Saver([w], False, False, 2)          # TF1's (var_list, reshape, sharded, max_to_keep)
    assert not v.trainable and g.get_collection("extras") == [v] and tf.trainable_variables(g) == [w]
    assert cell.forget_bias == 0.5 and saver.max_to_keep == 2 and gx is None
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        vc, vz, vgw, vzx = s.run([c, z, gw, zx])
        for k in range(3):
            saver.save(s, str(tmp_path / "m"), k, None, "meta", False)   # 4th: latest_filename, 6th: write_meta_graph
    np.testing.assert_array_equal(vc, [[1, 2, 3], [3, 3, 3]])
    np.testing.assert_array_equal(vz, [0.5, 0.5])
    np.testing.assert_array_equal(vgw, [2, 4])
    np.testing.assert_array_equal(vzx, [0, 0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "m-1.npz", "m-2.npz"]
    with pytest.raises(ValueError, match="Saver: keep_checkpoint_every_n_hours is not supported"):
        tf.train.Saver(None, False, False, 5, 1.0)
