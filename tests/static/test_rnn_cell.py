"""rnn_cell's PyTorch-layout cells (TorchLSTMCell, TorchGRUCell): one step
of each cell against the eager cells (same weights, the same fused kernels)
or the numpy equations, values and gradients, in float64. TF1's cells:
test_tf1_cells.py."""
import numpy as np
import pytest

import dynnets
import dynnets.static as tf
from dynnets import nn
from dynnets.static.nn import rnn_cell

B, D, H = 3, 4, 5


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _graph_step(cell, x, state):
    """Build one step on placeholders; returns graph, placeholders, outputs, session."""
    g = tf.Graph()
    with g.as_default():
        px = tf.placeholder((None, D), np.float64, name="x")
        if isinstance(state, tuple):
            ps = rnn_cell.LSTMStateTuple(tf.placeholder((None, H), np.float64, name="c"),
                                         tf.placeholder((None, H), np.float64, name="h"))
        else:
            ps = tf.placeholder((None, H), np.float64, name="h")
        out, new = cell(px, ps)
        sess = tf.Session(g)
        sess.run(tf.global_variables_initializer())
    feed = {px: x}
    if isinstance(state, tuple):
        feed.update({ps.c: state[0], ps.h: state[1]})
    else:
        feed[ps] = state
    return g, px, ps, out, new, sess, feed


def _weights(cell, sess):
    return {v.name.split("/")[-1]: sess.variable_value(v) for v in cell.variables}


def test_lstm_cell_fused_matches_eager_lstm_cell_values_and_gradients():
    rng = np.random.default_rng(0)
    x, c, h = rng.standard_normal((B, D)), rng.standard_normal((B, H)), rng.standard_normal((B, H))
    cell = rnn_cell.TorchLSTMCell(H, forget_bias=0.0, dtype=np.float64, rng=1)
    g, px, ps, out, new, sess, feed = _graph_step(cell, x, (c, h))
    assert cell.fused and cell.state_size == (H, H) and cell.output_size == H
    with g.as_default():
        loss = tf.reduce_sum(out * out) + tf.reduce_sum(new.c * 0.5)
        grads = tf.gradients(loss, [px, ps.c, ps.h] + cell.variables)
    o, nc, gs = sess.run([out, new.c, grads], feed)

    eager = nn.LSTMCell(D, H, dtype=np.float64)
    eager.load_state_dict(_weights(cell, sess))
    xt, ct, ht = (dynnets.tensor(a, dtype=np.float64, requires_grad=True) for a in (x, c, h))
    h2, c2 = eager(xt, (ht, ct))
    (dynnets.sum(h2 * h2) + dynnets.sum(c2 * 0.5)).backward()
    np.testing.assert_allclose(o, h2.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(nc, c2.data, rtol=1e-12, atol=1e-12)
    want = [xt.grad.data, ct.grad.data, ht.grad.data] + [p.grad.data for p in
                                                         (eager.weight_ih, eager.weight_hh, eager.bias_ih,
                                                          eager.bias_hh)]
    for a, b in zip(gs, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _lstm_numpy(x, c, h, w, forget_bias=0.0, peep=None, cell_clip=None, proj=None, act=np.tanh):
    z = x @ w["weight_ih"].T + w["bias_ih"] + h @ w["weight_hh"].T + w["bias_hh"]
    i, f, gg, o = np.split(z, 4, axis=1)
    f = f + forget_bias
    if peep:
        i, f = i + w["w_i_diag"] * c, f + w["w_f_diag"] * c
    c2 = _sig(f) * c + _sig(i) * act(gg)
    if cell_clip is not None:
        c2 = np.clip(c2, -cell_clip, cell_clip)
    if peep:
        o = o + w["w_o_diag"] * c2
    m = _sig(o) * act(c2)
    if proj:
        m = m @ w["projection"]
    return m, c2


@pytest.mark.parametrize("kw", [dict(forget_bias=1.0), dict(use_peepholes=True, cell_clip=0.3, num_proj=3),
                                dict(activation=dynnets.relu, forget_bias=0.5)])
def test_lstm_cell_options_match_the_equations(kw):
    rng = np.random.default_rng(2)
    P = kw.get("num_proj", H)
    x, c, h = rng.standard_normal((B, D)), rng.standard_normal((B, H)), rng.standard_normal((B, P))
    cell = rnn_cell.TorchLSTMCell(H, dtype=np.float64, rng=3, **kw)
    g = tf.Graph()
    with g.as_default():
        px = tf.placeholder((None, D), np.float64)
        pc, ph = tf.placeholder((None, H), np.float64), tf.placeholder((None, P), np.float64)
        out, new = cell(px, rnn_cell.LSTMStateTuple(pc, ph))
        loss = tf.reduce_sum(out * out) + tf.reduce_sum(new.c)
        grads = tf.gradients(loss, [px] + cell.variables)
        sess = tf.Session(g)
        sess.run(tf.global_variables_initializer())
    feed = {px: x, pc: c, ph: h}
    o, nc, gs = sess.run([out, new.c, grads], feed)
    w = _weights(cell, sess)
    act = np.tanh if "activation" not in kw else (lambda a: np.maximum(a, 0))
    m, c2 = _lstm_numpy(x, c, h, w, kw.get("forget_bias", 1.0), kw.get("use_peepholes"), kw.get("cell_clip"),
                        kw.get("num_proj"), act)
    assert cell.fused == (kw == dict(forget_bias=1.0))
    assert cell.output_size == P and new.h is out
    np.testing.assert_allclose(o, m, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(nc, c2, rtol=1e-12, atol=1e-12)

    def f(xv, wv):
        mm, cc = _lstm_numpy(xv, c, h, wv, kw.get("forget_bias", 1.0), kw.get("use_peepholes"), kw.get("cell_clip"),
                             kw.get("num_proj"), act)
        return float((mm * mm).sum() + cc.sum())
    eps = 1e-6
    names = [v.name.split("/")[-1] for v in cell.variables]
    for k, (name, gv) in enumerate(zip(["x"] + names, gs)):
        base = x if name == "x" else w[name]
        num = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            for sgn in (1, -1):
                pert = base.copy()
                pert[idx] += sgn * eps
                num[idx] += sgn * (f(pert, w) if name == "x" else f(x, {**w, name: pert})) / (2 * eps)
        np.testing.assert_allclose(gv, num, rtol=1e-5, atol=1e-6, err_msg=name)


def test_torch_lstm_cell_names_its_four_variables():
    cell = rnn_cell.TorchLSTMCell(H, dtype=np.float64, rng=0)
    assert cell.fused and cell.forget_bias == 1.0 and cell.name == "lstm_cell"
    rng = np.random.default_rng(4)
    x, c, h = rng.standard_normal((B, D)), rng.standard_normal((B, H)), rng.standard_normal((B, H))
    g, px, ps, out, new, sess, feed = _graph_step(cell, x, (c, h))
    o = sess.run(out, feed)
    m, _ = _lstm_numpy(x, c, h, _weights(cell, sess), forget_bias=1.0)
    np.testing.assert_allclose(o, m, rtol=1e-12)
    assert [v.name for v in cell.variables] == ["lstm_cell/weight_ih", "lstm_cell/weight_hh",
                                                "lstm_cell/bias_ih", "lstm_cell/bias_hh"]


def test_torch_gru_cell_matches_eager_gru_cell():
    rng = np.random.default_rng(5)
    x, h = rng.standard_normal((B, D)), rng.standard_normal((B, H))
    cell = rnn_cell.TorchGRUCell(H, dtype=np.float64, rng=6)
    g, px, ps, out, new, sess, feed = _graph_step(cell, x, h)
    assert out is new
    with g.as_default():
        grads = tf.gradients(tf.reduce_sum(out * out), [px, ps] + cell.variables)
    o, gs = sess.run([out, grads], feed)
    w = _weights(cell, sess)
    np.testing.assert_array_equal(w["bias_ih"], np.r_[np.ones(2 * H), np.zeros(H)])
    np.testing.assert_array_equal(w["bias_hh"], np.zeros(3 * H))
    eager = nn.GRUCell(D, H, dtype=np.float64)
    eager.load_state_dict(w)
    xt, ht = (dynnets.tensor(a, dtype=np.float64, requires_grad=True) for a in (x, h))
    h2 = eager(xt, ht)
    dynnets.sum(h2 * h2).backward()
    np.testing.assert_allclose(o, h2.data, rtol=1e-12, atol=1e-12)
    for a, b in zip(gs, [xt.grad, ht.grad, eager.weight_ih.grad, eager.weight_hh.grad, eager.bias_ih.grad,
                         eager.bias_hh.grad]):
        np.testing.assert_allclose(a, b.data, rtol=1e-10, atol=1e-12)


def test_gru_cell_other_activation_runs_the_equations():
    rng = np.random.default_rng(7)
    x, h = rng.standard_normal((B, D)), rng.standard_normal((B, H))
    cell = rnn_cell.TorchGRUCell(H, activation=dynnets.sigmoid, dtype=np.float64, rng=8)
    _, _, _, out, _, sess, feed = _graph_step(cell, x, h)
    w = _weights(cell, sess)
    gi, gh = x @ w["weight_ih"].T + w["bias_ih"], h @ w["weight_hh"].T + w["bias_hh"]
    r, z = _sig(gi[:, :H] + gh[:, :H]), _sig(gi[:, H:2 * H] + gh[:, H:2 * H])
    n = _sig(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    np.testing.assert_allclose(sess.run(out, feed), (1 - z) * n + z * h, rtol=1e-12)


@pytest.mark.parametrize("make", [lambda: rnn_cell.TorchLSTMCell(H, rng=0), lambda: rnn_cell.LSTMCell(H, rng=0)],
                         ids=["torch", "tf1"])
def test_zero_state_for_a_run_time_batch_size_and_variables_built_once(make):
    cell = make()
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, D), name="x")
        state = cell.zero_state(tf.shape(x)[0], np.float32)
        out, new = cell(x, state)
        out2, _ = cell(out[:, :D], new)
        n = 4 if isinstance(cell, rnn_cell.TorchLSTMCell) else 2
        assert len(cell.variables) == n and len(tf.global_variables()) == n
        sess = tf.Session(g)
        sess.run(tf.global_variables_initializer())
    for n in (1, 6):
        c, o2 = sess.run([state.c, out2], {x: np.ones((n, D), np.float32)})
        assert c.shape == (n, H) and not c.any() and o2.shape == (n, H) and c.dtype == np.float32
    fixed = cell.zero_state(2, np.float64)
    assert fixed.h.shape == (2, H) and fixed.h.dtype == np.float64


def test_cell_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="num_units must be a positive integer"):
        rnn_cell.GRUCell(0)
    with pytest.raises(ValueError, match="state_is_tuple=True"):
        rnn_cell.BasicLSTMCell(3, state_is_tuple=False)
    cell = rnn_cell.LSTMCell(3)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="last dimension of the inputs must be known"):
            cell(tf.placeholder((2, None)), cell.zero_state(2, np.float32))
        with pytest.raises(TypeError, match="LSTMStateTuple"):
            cell(tf.placeholder((2, 4)), np.zeros((2, 3), np.float32))
