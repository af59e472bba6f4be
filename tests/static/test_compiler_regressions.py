"""One focused test per static-compiler bug of issue 22 section 1 (the
differential test, ``test_differential.py``, finds each of them among random
graphs; these pin them down by name): TensorArray writes and gradients
keeping a buffer the next iteration overwrites, fused maximum/minimum/relu
dropping NaN or the sign of zero, -0.0 merged with 0.0, fetches sharing the
caller's memory or read-only, crashes on valid graphs, and plans kept off the
native tier by a swallowed error or by loop bodies ignoring the session's
options."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf
from dynnets.autograd import primitives as P
from dynnets.static import passes


def _steps_written(n, **session):
    """A while_loop writing h * 2.0 into a TensorArray at each of 3 steps, h of shape (n, n)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((n, n), np.float64)
        ta = tf.TensorArray(np.float64, size=3)
        _, _, ta = tf.while_loop(lambda t, h, ta: t < 3,
                                 lambda t, h, ta: (t + 1, h + 1.0, ta.write(t, (h + 1.0) * 2.0)), [0, x, ta])
        stacked = ta.stack()
        with tf.Session(**session) as s:
            return [s.run(stacked, {x: np.zeros((n, n))})[:, 0, 0] for _ in range(2)]


@pytest.mark.parametrize("n", [8, 64])
def test_tensor_array_writes_in_a_loop_keep_every_step(n):
    # at 64 x 64 = MEMORY_MIN_SIZE every step held the last one's values ([6, 6, 6])
    for got in _steps_written(n) + _steps_written(n, jit_after=1):
        np.testing.assert_array_equal(got, [2.0, 4.0, 6.0])


def test_dynamic_rnn_with_sequence_length_keeps_every_step_from_4096_units():
    rng = np.random.default_rng(0)
    batch, units, steps = 64, 64, 4
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, None, 3), np.float64)
        seq = tf.placeholder((None,), np.int64)
        cell = tf.nn.rnn_cell.GRUCell(units, dtype=np.float64, rng=1)
        outputs, _ = tf.nn.dynamic_rnn(cell, x, sequence_length=seq, dtype=np.float64)
        outputs_all, _ = tf.nn.dynamic_rnn(cell, x, dtype=np.float64)
        xs = rng.normal(size=(batch, steps, 3))
        lengths = np.full(batch, steps)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got, want = s.run([outputs, outputs_all], {x: xs, seq: lengths})
    assert not np.allclose(got[:, 0], got[:, -1])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_gradient_through_a_tensor_array_read_used_twice_in_a_loop():
    # x = ta.read(t); h = tanh(x * 2 + x * h) over (3, 64, 64): every step's gradient but the first was wrong
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(3, 64, 64)) * 0.3

    def static(x_val, h_val):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder((3, 64, 64), np.float64)
            h0 = tf.placeholder((64, 64), np.float64)
            ta = tf.TensorArray(np.float64, size=3).unstack(x)

            def body(t, h):
                r = ta.read(t)
                return t + 1, dn.tanh(r * 2.0 + r * h)
            _, h = tf.while_loop(lambda t, h: t < 3, body, [0, h0])
            gx = tf.gradients(dn.sum(h), [x])[0]
            with tf.Session() as s:
                return [s.run(gx, {x: x_val, h0: h_val}) for _ in range(2)]

    xt = dn.Parameter(xs.copy())
    h = dn.tensor(np.full((64, 64), 0.5))
    for t in range(3):
        r = xt[t]
        h = dn.tanh(r * 2.0 + r * h)
    dn.sum(h).backward()
    for got in static(xs, np.full((64, 64), 0.5)):
        np.testing.assert_allclose(got, xt.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("op", ["maximum", "minimum", "relu"])
@pytest.mark.parametrize("n", [2047, 2048])
def test_fused_maximum_minimum_relu_keep_nan_and_the_sign_of_zero(op, n):
    # from 2048 elements (FUSE_MIN_SIZE) the fused kernel used Python's max: NaN in y was dropped,
    # and maximum(-0.0, 0.0) gave -0.0 where numpy gives 0.0
    y_val = np.resize(np.array([np.nan, 0.0, -0.0, 1.0, -1.0]), n)
    x_val = np.resize(np.array([1.0, -0.0, 0.0, np.nan, -2.0]), n)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((n,), np.float64)
        y = tf.placeholder((n,), np.float64)
        if op == "relu":
            out = dn.relu(x * 1.0 + y) + 1.0
            want = np.maximum(x_val * 1.0 + y_val, 0) + 1.0
        else:
            out = getattr(dn, op)(x * 1.0, y) + 1.0
            want = getattr(np, op)(x_val * 1.0, y_val) + 1.0
        with tf.Session() as s, np.errstate(all="ignore"):
            got = s.run(1.0 / (out - 1.0), {x: x_val, y: y_val})
            want = 1.0 / (want - 1.0)
    assert s.stats[-1]["fused_kernels"] == (1 if n >= passes.FUSE_MIN_SIZE else 0)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("zero", [0.0, np.float64(0.0)])
@pytest.mark.parametrize("optimize", [True, False])
def test_negative_zero_is_not_merged_with_zero(zero, optimize):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((), np.float64)
        pos = 1.0 / (x * zero)
        neg = 1.0 / (x * -zero)
        with tf.Session(optimize=optimize) as s, np.errstate(divide="ignore"):
            assert s.run([pos, neg], {x: 1.0}) == [np.inf, -np.inf]
            # created in the other order too
            neg2 = 1.0 / (x * -zero)
            pos2 = 1.0 / (x * zero)
            assert s.run([neg2, pos2], {x: 1.0}) == [-np.inf, np.inf]
    # a NaN constant is a constant of its own (and two NaNs are never merged with a number)
    assert passes._freeze(-0.0) != passes._freeze(0.0)
    assert passes._freeze(np.float32(-0.0)) != passes._freeze(np.float32(0.0))


@pytest.mark.parametrize("session", [{}, {"jit_after": 1}, {"jit_after": 1, "native_after": 1}])
def test_fetches_are_the_callers_arrays(session):
    # fetches that were views of a feed changed with it; broadcast_to's came back read-only
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((2, 3), np.float64)
        row = tf.placeholder((3,), np.float64)
        y = x * 2.0
        fetches = [x, x[:, 1], tf.reshape(x, (6,)), tf.transpose(x), tf.identity(x, name="same"),
                   dn.broadcast_to(row, (2, 3)), y, tf.reshape(y, (3, 2)), y]
        x0, r0 = np.arange(6.0).reshape(2, 3), np.ones(3)
        want = [x0, x0[:, 1], x0.reshape(6), x0.T, x0, np.broadcast_to(r0, (2, 3)), x0 * 2, (x0 * 2).reshape(3, 2),
                x0 * 2]
        with tf.Session(**session) as s:
            for _ in range(3):
                xv, rv = x0.copy(), r0.copy()
                got = s.run(fetches, {x: xv, row: rv})
                xv[...] = -7.0
                rv[...] = -7.0
                for i, (v, w) in enumerate(zip(got, want)):
                    np.testing.assert_array_equal(v, w)
                    assert v.flags.writeable, i
                    assert not any(np.shares_memory(v, got[j]) for j in range(i)), i
                    v[...] = 99.0


def test_constants_fetched_unoptimised_are_writable():
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(np.ones(3), dtype=np.float64)
        fetches = [c, tf.reshape(c, (3, 1)), dn.broadcast_to(c, (2, 3))]
        for optimize in (False, True):
            with tf.Session(optimize=optimize) as s:
                for v in s.run(fetches):
                    assert v.flags.writeable
                    v[...] = 5.0
                np.testing.assert_array_equal(s.run(c), np.ones(3))


@pytest.mark.parametrize("invariants", [False, True])
def test_while_gradient_with_a_carried_value_used_twice_at_two_batch_sizes(invariants):
    # ShapeError: while_loop body: add_n: input 1.shape=(6, 3) does not match input 0.shape=(?, 3)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), np.float64)
        inv = [(), (None, 3), (None, 3)] if invariants else None
        _, h, acc = tf.while_loop(lambda t, h, acc: t < 3, lambda t, h, acc: (t + 1, h, acc + h * 2.0),
                                  [0, x, x * 0.0], shape_invariants=inv)
        gx = tf.gradients(dn.sum(acc * acc), [x])[0]
        with tf.Session() as s:
            for n in (4, 6, 4):
                xv = np.linspace(-1, 1, 3 * n).reshape(n, 3)
                np.testing.assert_allclose(s.run(gx, {x: xv}), 72.0 * xv, rtol=1e-12)


def test_tensor_array_of_4096_elements_used_twice_has_a_gradient():
    # OpTypeError: add_n ... TensorArrayValue: the sum of the two gradient TensorArrays got an out= buffer
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((4096,), np.float64)
        ta = tf.TensorArray(np.float64, size=4096).unstack(x)
        y = ta.stack() * ta.stack() + ta.read(7)
        gx = tf.gradients(dn.sum(y), [x])[0]
        xv = np.linspace(-1, 1, 4096)
        with tf.Session() as s:
            got = s.run(gx, {x: xv})
    want = 2 * xv
    want[7] += 4096
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("batch", [2, 1])
def test_while_over_a_tensor_array_read_plus_the_state_at_batch_size_1(batch):
    # at batch 1: loop variable ... enters the loop with shape (1, 5) but has shape (?, 5)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((3, None, 5), np.float64)
        h0 = tf.placeholder((None, 5), np.float64)
        ta = tf.TensorArray(np.float64, size=3).unstack(x)
        _, h = tf.while_loop(lambda t, h: t < 3, lambda t, h: (t + 1, ta.read(t) + h), [0, h0])
        with tf.Session() as s:
            got = s.run(h, {x: np.ones((3, batch, 5)), h0: np.zeros((batch, 5))})
    np.testing.assert_array_equal(got, np.full((batch, 5), 3.0))


def test_a_loop_whose_state_changes_shape_at_run_time_is_an_error_naming_it():
    # what the shape rules cannot prove through a TensorArray element is checked at each iteration
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((3, None, 5), np.float64)
        h0 = tf.placeholder((None, 5), np.float64, name="h0")
        ta = tf.TensorArray(np.float64, size=3, dynamic_size=False, element_shape=(None, 5)).unstack(x)
        _, h = tf.while_loop(lambda t, h: t < 3, lambda t, h: (t + 1, ta.read(t) + h), [0, h0])
        with tf.Session() as s:
            with pytest.raises(tf.ShapeError, match="loop variable 'h0' enters the loop with shape \\(1, 5\\) but has "
                                                 "shape \\(2, 5\\) after one iteration \\(iteration 1\\)"):
                s.run(h, {x: np.ones((3, 2, 5)), h0: np.zeros((1, 5))})


@pytest.mark.parametrize("batch", [1, 2])
def test_dynamic_rnn_with_an_unfused_lstm_cell_at_batch_size_1(batch):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, None, 3), np.float64)
        cell = tf.nn.rnn_cell.LSTMCell(4, use_peepholes=True, cell_clip=0.5, num_proj=2, dtype=np.float64, rng=0)
        outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=np.float64)
        loss = dn.sum(outputs * outputs)
        grads = tf.gradients(loss, tf.trainable_variables())
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            out, *gs = s.run([outputs] + grads, {x: np.ones((batch, 4, 3))})
    assert out.shape == (batch, 4, 2) and np.all(np.isfinite(out))
    assert all(np.all(np.isfinite(gr)) for gr in gs)


def test_fusion_at_size_1_of_a_0d_chain():
    # SyntaxError: the 0-d kernel indexed a[] and out[]
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((), np.float64)
        y = dn.maximum(x * 2.0 + 1.0, x) * x
        e = dn.exp(x)                   # numpy gives a 0-d result as a scalar, not an array
        z = (e * 2.0 + 1.0) * e
        with tf.Session(fuse_min_size=1, memory_min_size=1) as s:
            assert s.run(y, {x: 3.0}) == 21.0
            assert s.stats[-1]["fused_kernels"] == 1
            assert s.run(z, {x: 0.0}) == 3.0


@pytest.mark.parametrize("opt", ["GradientDescent", "Adagrad", "Adam"])
def test_a_fed_learning_rate_reaches_the_native_tier(opt):
    # native._apply raised UnboundLocalError('lr_val'), swallowed: the step stayed on tier 2
    def run(native_after):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder((None, 2), np.float64)
            lr = tf.placeholder((), np.float64)
            w = tf.Variable(np.array([[0.5], [-0.3]]))
            loss = dn.mean((dn.matmul(x, w) - 1.0) ** 2)
            train = getattr(tf.train, opt + "Optimizer")(lr).minimize(loss)
            with tf.Session(jit_after=1, native_after=native_after) as s:
                s.run(tf.global_variables_initializer())
                for k in range(4):
                    s.run([train, loss], {x: np.ones((3, 2)) * (k + 1), lr: 0.01 * (k + 1)})
                return s.variable_value(w), s.stats[-1]
    got, st = run(1)
    want, _ = run(None)
    assert st["tier"] == 3, st["native"]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_bug_in_the_native_translation_is_raised_not_swallowed(monkeypatch):
    def broken(gen, ins, kw):
        raise KeyError("a translation bug")
    monkeypatch.setattr(P.add_p, "native", broken)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((2,), np.float64)
        y = x + 1.0
        with tf.Session(jit_after=1, native_after=2) as s:
            s.run(y, {x: np.ones(2)})
            with pytest.raises(KeyError, match="a translation bug"):
                s.run(y, {x: np.ones(2)})


def _loop_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 64), np.float64)
        w = tf.constant(np.eye(64) * 0.5)
        _, h = tf.while_loop(lambda t, h: t < 3, lambda t, h: (t + 1, dn.tanh(dn.matmul(h, w)) * 2.0 + h), [0, x])
        y = tf.cond(dn.sum(h) > 0.0, lambda: h * 3.0 + 1.0, lambda: h - 1.0)
        gx = tf.gradients(dn.sum(y), [x])[0]
    return g, x, [h, y, gx]


def test_loop_bodies_and_branches_are_compiled_with_the_session_options():
    g, x, fetches = _loop_graph()
    feed = {x: np.full((64, 64), 0.1)}
    ref = tf.Session(g, optimize=False, fuse_min_size=None, memory_min_size=None)
    want = ref.run(fetches, feed)
    for st in ref.stats[-1]["subprograms"]:
        assert st["fused_kernels"] == 0 and st["buffers"] == 0, st["role"]
    opt = tf.Session(g, fuse_min_size=1)
    got = opt.run(fetches, feed)
    subs = opt.stats[-1]["subprograms"]
    assert {s["role"] for s in subs} >= {"cond", "body", "body/vjp", "true_graph", "true_graph/vjp"}
    assert any(s["fused_kernels"] for s in subs if s["role"] == "body")
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_loop_bodies_and_branches_reach_tier_2_and_the_native_tier():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), np.float64)
        w = tf.Variable(np.eye(3) * 0.5)
        _, h = tf.while_loop(lambda t, h: t < 4, lambda t, h: (t + 1, dn.tanh(dn.matmul(h, w)) + x), [0, x])
        y = tf.cond(dn.sum(h) > 0.0, lambda: h * 2.0, lambda: h - 1.0)
        grads = tf.gradients(dn.sum(y), [x, w])
        init = tf.global_variables_initializer()
    feed = {x: np.ones((2, 3))}
    nat = tf.Session(g, jit_after=1, native_after=2)
    ref = tf.Session(g, native_after=None)
    for s in (nat, ref):
        s.run(init)
    for _ in range(3):
        got = nat.run([h, y] + grads, feed)
        want = ref.run([h, y] + grads, feed)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    tiers = {s["role"]: s["tier"] for s in nat.stats[-1]["subprograms"]}
    assert tiers["body"] == tiers["cond"] == tiers["body/vjp"] == tiers["true_graph"] == 3, nat.stats[-1]
    assert {s["role"]: s["tier"] for s in ref.stats[-1]["subprograms"]}["body"] == 2

    # and their kernels run: no iteration falls back to tier 2 (a loop counter comes back from an
    # iteration as a numpy scalar, which the kernel takes)
    def fallback(*args):
        raise AssertionError("a native subprogram fell back to tier 2")
    for e in g.eqns:
        for name in ("body", "cond", "true_graph", "false_graph"):
            for prog in (e.attrs[name].programs.values() if name in e.attrs else ()):
                for key, entry in prog.plans.items():
                    if key[0] == nat.options and entry.plan.tier == 3:
                        entry.fn.__globals__["FB"] = fallback
    for a, b in zip(nat.run([h, y] + grads, feed), want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_native_kernels_of_one_source_for_other_argument_types():
    # a reshape of a feed translates to the same source for float32 and float64: the kernel compiled
    # for one took no other, and the plan fell back to tier 2 at every run (the TypeError swallowed)
    got = []
    for dt in (np.float32, np.float64):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder((2, 2), dt)
            y = tf.reshape(x, (4,))
            with tf.Session(jit_after=1, native_after=1) as s:
                for _ in range(3):
                    got.append(s.run(y, {x: np.arange(4, dtype=dt).reshape(2, 2)}))
                assert s.stats[-1]["tier"] == 3
                plan = s._plan_list[-1]
                plan.fn.__globals__["FB"] = None         # a fallback would fail: the kernel runs
                got.append(s.run(y, {x: np.arange(4, dtype=dt).reshape(2, 2)}))
    for v, dt in zip(got, [np.float32] * 4 + [np.float64] * 4):
        assert v.dtype == dt
        np.testing.assert_array_equal(v, np.arange(4))


@pytest.mark.parametrize("passes_on", ["fusion", "buffers"])
def test_results_of_transposed_inputs_keep_numpys_memory_order(passes_on):
    # numpy's ufuncs give a transposed input a transposed result, and a sum over it adds in that
    # order: a fused kernel or an out= buffer in C order made the sum differ in the last bit
    rng = np.random.default_rng(3)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((64, 64), np.float64)
        y = tf.transpose(x) * 3.0 + 1.0
        z = (tf.transpose(x) + 0.5) * y
        c = (x * 2.0 + 1.0) * x             # in C order: buffered as before
        fetches = [dn.sum(y), dn.sum(z), dn.sum(y, axis=0), dn.matmul(z, x), dn.sum(c * c)]
    kw = {"fusion": dict(fuse_min_size=1, memory_min_size=None), "buffers": dict(fuse_min_size=None,
                                                                                memory_min_size=1)}[passes_on]
    ref = tf.Session(g, optimize=False, fuse_min_size=None, memory_min_size=None)
    opt = tf.Session(g, **kw)
    xv = rng.normal(size=(64, 64))
    for _ in range(2):
        got, want = opt.run(fetches, {x: xv}), ref.run(fetches, {x: xv})
        for a, b in zip(got, want):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert opt.stats[-1]["fused_kernels" if passes_on == "fusion" else "buffers"] >= 1


def test_fetches_of_a_native_subprogram_and_a_view_of_it_do_not_share_memory():
    # the native tier's arrays are views of a Numba MemInfo: a transpose of one is a view of the
    # array, not of the MemInfo, and comparing bases alone missed that they share memory
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), np.float64)
        y = tf.cond(dn.sum(x) > 0.0, lambda: x + x, lambda: x * 3.0)
        fetches = [y, tf.transpose(y)]
        with tf.Session(jit_after=1, native_after=1) as s:
            for _ in range(4):
                a, b = s.run(fetches, {x: np.ones((2, 3))})
                assert not np.shares_memory(a, b)
                np.testing.assert_array_equal(b, np.full((3, 2), 2.0))
            assert {st["role"]: st["tier"] for st in s.stats[-1]["subprograms"]}["true_graph"] == 3


def test_an_integer_scalar_compared_with_a_python_float_is_not_truncated_on_the_native_tier():
    # the native tier wrote the weak 2.5 as an int64 literal (2): 2 < 2.5 came out False
    from dynnets.autograd.engine import bind
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((), np.int64)
        y = bind(P.less_p, x, 2.5)
        z = bind(P.greater_equal_p, x, 2.5)
    with tf.Session(g, jit_after=1, native_after=1) as s:
        for _ in range(3):
            got = s.run([y, z], {x: np.int64(2)})
            assert bool(got[0]) is True and bool(got[1]) is False, (got, s.stats[-1])
        got = s.run([y, z], {x: np.int64(3)})
        assert bool(got[0]) is False and bool(got[1]) is True
