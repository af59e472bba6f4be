"""TF1's rnn_cell (issue 22): BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell,
MultiRNNCell and DropoutWrapper with TF1's variables (names, shapes, initial
values) and maths, checked one step at a time and through dynamic_rnn
against TF1's equations written out in torch float64 (values and
gradients), plus the masks of DropoutWrapper."""
import math

import numpy as np
import pytest

import dynnets.static as tf
from dynnets.static.nn import rnn_cell

torch = pytest.importorskip("torch")

B, D, H = 3, 4, 5


def _t(a):
    return torch.tensor(np.asarray(a, np.float64), requires_grad=True)


# TF 1.15's cells (rnn_cell_impl.py), in torch
def _tf_lstm(x, c, h, w, forget_bias=1.0, peep=False, cell_clip=None, proj=False, act=torch.tanh):
    z = torch.cat([x, h], 1) @ w["kernel"] + w["bias"]
    i, j, f, o = torch.chunk(z, 4, 1)
    if peep:
        c2 = torch.sigmoid(f + forget_bias + w["w_f_diag"] * c) * c + torch.sigmoid(i + w["w_i_diag"] * c) * act(j)
    else:
        c2 = torch.sigmoid(f + forget_bias) * c + torch.sigmoid(i) * act(j)
    if cell_clip is not None:
        c2 = torch.clamp(c2, -cell_clip, cell_clip)
    m = torch.sigmoid(o + w["w_o_diag"] * c2) * act(c2) if peep else torch.sigmoid(o) * act(c2)
    if proj:
        m = m @ w["projection/kernel"]
    return m, (c2, m)


def _tf_gru(x, h, w, act=torch.tanh):
    value = torch.sigmoid(torch.cat([x, h], 1) @ w["gates/kernel"] + w["gates/bias"])
    r, u = torch.chunk(value, 2, 1)
    c = act(torch.cat([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"])
    h2 = u * h + (1 - u) * c
    return h2, h2


def _tf_rnn(x, h, w):
    h2 = torch.tanh(torch.cat([x, h], 1) @ w["kernel"] + w["bias"])
    return h2, h2


def _local(name, scope):
    return name[len(scope) + 1:]


CELLS = {
    "basic_rnn": (lambda: rnn_cell.BasicRNNCell(H, dtype=np.float64, rng=1), "basic_rnn_cell",
                  ["kernel", "bias"], lambda x, s, w: _tf_rnn(x, s, w)),
    "basic_lstm": (lambda: rnn_cell.BasicLSTMCell(H, dtype=np.float64, rng=2), "basic_lstm_cell",
                   ["kernel", "bias"], lambda x, s, w: _tf_lstm(x, s[0], s[1], w)),
    "lstm-forget0": (lambda: rnn_cell.LSTMCell(H, forget_bias=0.0, dtype=np.float64, rng=3), "lstm_cell",
                     ["kernel", "bias"], lambda x, s, w: _tf_lstm(x, s[0], s[1], w, forget_bias=0.0)),
    "lstm-peep-clip-proj": (lambda: rnn_cell.LSTMCell(H, use_peepholes=True, cell_clip=0.4, num_proj=3,
                                                      dtype=np.float64, rng=4), "lstm_cell",
                            ["kernel", "bias", "w_f_diag", "w_i_diag", "w_o_diag", "projection/kernel"],
                            lambda x, s, w: _tf_lstm(x, s[0], s[1], w, peep=True, cell_clip=0.4, proj=True)),
    "lstm-relu": (lambda: rnn_cell.LSTMCell(H, activation=tf.nn.relu, dtype=np.float64, rng=5), "lstm_cell",
                  ["kernel", "bias"], lambda x, s, w: _tf_lstm(x, s[0], s[1], w, act=torch.relu)),
    "gru": (lambda: rnn_cell.GRUCell(H, dtype=np.float64, rng=6), "gru_cell",
            ["gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias"], lambda x, s, w: _tf_gru(x, s, w)),
    "gru-sigmoid": (lambda: rnn_cell.GRUCell(H, activation=tf.sigmoid, dtype=np.float64, rng=7), "gru_cell",
                    ["gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias"],
                    lambda x, s, w: _tf_gru(x, s, w, act=torch.sigmoid)),
}


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_one_step_is_tf1s_values_and_gradients(kind):
    make, base, names, ref = CELLS[kind]
    cell = make()
    rng = np.random.default_rng(sum(map(ord, kind)))
    P = cell.output_size
    lstm = isinstance(cell.state_size, rnn_cell.LSTMStateTuple)
    x = rng.standard_normal((B, D))
    s0 = (rng.standard_normal((B, H)), rng.standard_normal((B, P))) if lstm else rng.standard_normal((B, H))
    g = tf.Graph()
    with g.as_default():
        px = tf.placeholder(tf.float64, [None, D])
        ps = rnn_cell.LSTMStateTuple(tf.placeholder(tf.float64, [None, H]), tf.placeholder(tf.float64, [None, P])) \
            if lstm else tf.placeholder(tf.float64, [None, H])
        out, new = cell(px, ps)
        newc = new.c if lstm else new
        loss = tf.reduce_sum(out * out) + tf.reduce_sum(newc * 0.5)
        wrt = [px, *(ps if lstm else [ps]), *cell.variables]
        grads = tf.gradients(loss, wrt)
    assert [_local(v.name, base) for v in cell.variables] == names
    assert all(v.name.startswith(base + "/") for v in cell.variables)
    feed = {px: x, **({ps.c: s0[0], ps.h: s0[1]} if lstm else {ps: s0})}
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        w = {_local(v.name, base): s.run(v) for v in cell.variables}
        o, nc, gs = s.run([out, newc, grads], feed)
    tw = {k: _t(v) for k, v in w.items()}
    tx = _t(x)
    ts = tuple(_t(a) for a in s0) if lstm else _t(s0)
    m, st = ref(tx, ts, tw)
    tc = st[0] if lstm else st
    ((m * m).sum() + (tc * 0.5).sum()).backward()
    np.testing.assert_allclose(o, m.detach().numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(nc, tc.detach().numpy(), rtol=1e-12, atol=1e-13)
    want = [tx.grad, *(ts if lstm else [ts])] + [tw[n] for n in names]
    want = [a.grad if isinstance(a, torch.Tensor) and a.grad is not None and a is not tx else a for a in want]
    for k, (got, wt) in enumerate(zip(gs, want)):
        wt = wt.grad if wt.grad is not None else wt if not wt.requires_grad else torch.zeros_like(wt)
        np.testing.assert_allclose(got, wt.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=str(k))


def test_variables_shapes_and_initial_values_are_tf1s():
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(5)
        x = tf.placeholder(tf.float32, [None, 7, D])
        lstm = rnn_cell.BasicLSTMCell(H)
        tf.nn.dynamic_rnn(lstm, x, dtype=tf.float32)
        gru = rnn_cell.GRUCell(H)
        tf.nn.dynamic_rnn(gru, x, dtype=tf.float32)               # the second dynamic_rnn: scope 'rnn' again
        lstm2 = rnn_cell.BasicLSTMCell(2, name="mine")
        tf.nn.dynamic_rnn(lstm2, x, dtype=tf.float32, scope="enc")
        rnn = rnn_cell.BasicRNNCell(3)
        tf.nn.dynamic_rnn(rnn, x, dtype=tf.float32)
    got = {v.name: (tuple(v.shape), v.dtype) for v in tf.global_variables(g)}
    assert got == {"rnn/basic_lstm_cell/kernel": ((D + H, 4 * H), np.float32),
                   "rnn/basic_lstm_cell/bias": ((4 * H,), np.float32),
                   "rnn/gru_cell/gates/kernel": ((D + H, 2 * H), np.float32),
                   "rnn/gru_cell/gates/bias": ((2 * H,), np.float32),
                   "rnn/gru_cell/candidate/kernel": ((D + H, H), np.float32),
                   "rnn/gru_cell/candidate/bias": ((H,), np.float32),
                   "enc/mine/kernel": ((D + 2, 8), np.float32), "enc/mine/bias": ((8,), np.float32),
                   "rnn/basic_rnn_cell/kernel": ((D + 3, 3), np.float32),
                   "rnn/basic_rnn_cell/bias": ((3,), np.float32)}
    assert tf.trainable_variables(g) == tf.global_variables(g)
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        v = {k.name: s.run(k) for k in tf.global_variables(g)}
    # Glorot-uniform kernels (TF1's get_variable default), TF1's biases
    for name, (fi, fo) in {"rnn/basic_lstm_cell/kernel": (D + H, 4 * H), "rnn/gru_cell/gates/kernel": (D + H, 2 * H),
                           "rnn/gru_cell/candidate/kernel": (D + H, H)}.items():
        lim = math.sqrt(6 / (fi + fo))
        assert np.abs(v[name]).max() <= lim and np.abs(v[name]).max() > 0.8 * lim and v[name].std() > 0.4 * lim
    assert not v["rnn/basic_lstm_cell/bias"].any() and not v["rnn/gru_cell/candidate/bias"].any()
    assert (v["rnn/gru_cell/gates/bias"] == 1).all()
    # TF1's seed rules: the same graph seed gives the same kernels
    g2 = tf.Graph()
    with g2.as_default():
        tf.set_random_seed(5)
        tf.nn.dynamic_rnn(rnn_cell.BasicLSTMCell(H), tf.placeholder(tf.float32, [None, 7, D]), dtype=tf.float32)
        with tf.Session(g2) as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(s.run(tf.global_variables()[0]), v["rnn/basic_lstm_cell/kernel"])


def test_a_second_cell_in_one_scope_gets_a_unique_name_and_reuse_shares():
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None, D])
        a, b = rnn_cell.BasicLSTMCell(H), rnn_cell.BasicLSTMCell(H)
        s0 = a.zero_state(2, np.float32)
        a(x, s0)
        b(x, s0)
        with tf.variable_scope("shared"):
            rnn_cell.GRUCell(H, name="g")(x, np.zeros((2, H), np.float32))
        with tf.variable_scope("shared", reuse=True):
            again = rnn_cell.GRUCell(H, name="g")
            again(x, np.zeros((2, H), np.float32))
    names = [v.name for v in tf.global_variables(g)]
    assert names == ["basic_lstm_cell/kernel", "basic_lstm_cell/bias", "basic_lstm_cell_1/kernel",
                     "basic_lstm_cell_1/bias", "shared/g/gates/kernel", "shared/g/gates/bias",
                     "shared/g/candidate/kernel", "shared/g/candidate/bias"]
    assert again.variables == tf.global_variables(g)[4:]


def test_dynamic_rnn_with_tf1_cells_matches_tf1s_loop_and_keeps_static_shapes():
    T = 6
    lengths = np.array([6, 2, 4])
    rng = np.random.default_rng(11)
    xv = rng.standard_normal((B, T, D))
    for kind in ("basic_lstm", "gru", "basic_rnn"):
        make, base, names, ref = CELLS[kind]
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float64, [None, T, D])
            L = tf.placeholder(tf.int32, [None])
            cell = make()
            out, state = tf.nn.dynamic_rnn(cell, x, sequence_length=L, dtype=tf.float64)
            h = state.h if kind == "basic_lstm" else state
            loss = tf.reduce_sum(out * out) + tf.reduce_sum(h)
            grads = tf.gradients(loss, [x] + cell.variables)
        assert tuple(out.shape) == (None, T, H) and int(out.get_shape()[1]) == T
        with tf.Session(g) as s:
            s.run(tf.global_variables_initializer(g))
            w = {_local(v.name, "rnn/" + base): s.run(v) for v in cell.variables}
            o, hv, gs = s.run([out, h, grads], {x: xv, L: lengths})
        tw = {k: _t(v) for k, v in w.items()}
        tx = _t(xv)
        st = (torch.zeros(B, H, dtype=torch.float64),) * 2 if kind == "basic_lstm" else torch.zeros(B, H,
                                                                                                     dtype=torch.float64)
        outs = []
        for t in range(T):
            m_t, new = ref(tx[:, t], st, tw)
            alive = torch.tensor((t < lengths).astype(np.float64))[:, None]
            outs.append(m_t * alive)
            st = tuple(alive * n + (1 - alive) * p for n, p in zip(new, st)) if kind == "basic_lstm" else \
                alive * new + (1 - alive) * st
        tout = torch.stack(outs, 1)
        th = st[1] if kind == "basic_lstm" else st
        ((tout * tout).sum() + th.sum()).backward()
        np.testing.assert_allclose(o, tout.detach().numpy(), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(hv, th.detach().numpy(), rtol=1e-11, atol=1e-12)
        for got, want in zip(gs, [tx] + [tw[n] for n in names]):
            np.testing.assert_allclose(got, want.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_multi_rnn_cell_stacks_names_and_state_tuples():
    T = 4
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [None, T, D])
        cells = [rnn_cell.BasicLSTMCell(H, dtype=np.float64, rng=1), rnn_cell.GRUCell(3, dtype=np.float64, rng=2)]
        multi = rnn_cell.MultiRNNCell(cells)
        out, state = tf.nn.dynamic_rnn(multi, x, dtype=tf.float64)
    assert multi.state_size == (rnn_cell.LSTMStateTuple(H, H), 3) and multi.output_size == 3
    assert isinstance(state, tuple) and isinstance(state[0], rnn_cell.LSTMStateTuple)
    assert [v.name for v in multi.variables] == [
        "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel", "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias",
        "rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel", "rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias",
        "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel", "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/bias"]
    assert tuple(multi.variables[0].shape) == (D + H, 4 * H) and tuple(multi.variables[2].shape) == (H + 3, 6)
    xv = np.random.default_rng(3).standard_normal((2, T, D))
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        w = [{_local(v.name, p): s.run(v) for v in c.variables}
             for c, p in zip(cells, ["rnn/multi_rnn_cell/cell_0/basic_lstm_cell",
                                     "rnn/multi_rnn_cell/cell_1/gru_cell"])]
        o, st = s.run([out, state], {x: xv})
    s0, s1 = (torch.zeros(2, H, dtype=torch.float64),) * 2, torch.zeros(2, 3, dtype=torch.float64)
    tw = [{k: torch.tensor(v) for k, v in d.items()} for d in w]
    for t in range(T):
        m0, s0 = _tf_lstm(torch.tensor(xv[:, t]), s0[0], s0[1], tw[0])
        m1, s1 = _tf_gru(m0, s1, tw[1])
        np.testing.assert_allclose(o[:, t], m1.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(st[0].c, s0[0].numpy(), rtol=1e-12)
    np.testing.assert_allclose(st[1], s1.numpy(), rtol=1e-12)


@pytest.mark.parametrize("site", ["input", "output", "state"])
def test_dropout_wrapper_fed_keep_prob_masks_and_gradient(site):
    T = 5
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float64, [None, T, D])
        keep = tf.placeholder(tf.float64, name="keep")          # no shape: TF1's common spelling
        inner = rnn_cell.BasicLSTMCell(H, dtype=np.float64, rng=0)
        cell = rnn_cell.DropoutWrapper(inner, **{f"{site}_keep_prob": keep})
        out, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
        loss = tf.reduce_sum(out * out)
        gk, = tf.gradients(loss, [inner.kernel])
        train = tf.train.GradientDescentOptimizer(0.0).minimize(loss)       # a gradient through the loop works
    assert cell.variables == inner.variables and cell.output_size == H
    xv = np.random.default_rng(2).standard_normal((64, T, D))
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        full, full_state = s.run([out, state], {x: xv, keep: 1.0})
        again = s.run(out, {x: xv, keep: 1.0})
        np.testing.assert_array_equal(full, again)                 # keep 1.0: no dropout at all, exactly
        d1, g1, _ = s.run([out, gk, train], {x: xv, keep: 0.5})
        d3 = s.run(out, {x: xv, keep: 0.5})
    assert np.isfinite(g1).all() and g1.any()
    assert not np.array_equal(d1, d3)                              # a new mask at every run
    if site == "output":
        # each output is dropped (0) or the undropped one scaled by 1/keep, about half of each
        kept = d1 != 0
        np.testing.assert_allclose(d1[kept], 2 * full[kept], rtol=1e-12)
        assert 0.4 < kept.mean() < 0.6
        # a new mask at every step: the per-step kept fractions are not one mask repeated
        assert len({tuple(kept[:, t].ravel()) for t in range(T)}) == T
    else:
        assert not np.allclose(d1, full)


def test_dropout_wrapper_constant_keep_and_errors():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3, D])
        same = rnn_cell.DropoutWrapper(rnn_cell.GRUCell(H), input_keep_prob=1.0, output_keep_prob=1.0)
        assert same.dropout_sites() == []
        out, _ = tf.nn.dynamic_rnn(rnn_cell.DropoutWrapper(rnn_cell.GRUCell(H), output_keep_prob=0.25, seed=3), x,
                                   dtype=tf.float32)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            o = s.run(out, {x: np.ones((200, 3, D), np.float32)})
        assert 0.18 < (o != 0).mean() < 0.32
        with pytest.raises(ValueError, match="variational_recurrent=True .* is not supported"):
            rnn_cell.DropoutWrapper(rnn_cell.GRUCell(H), output_keep_prob=0.5, variational_recurrent=True)
        with pytest.raises(ValueError, match="output_keep_prob must be a float in \\(0, 1\\]"):
            rnn_cell.DropoutWrapper(rnn_cell.GRUCell(H), output_keep_prob=0.0)
        with pytest.raises(ValueError, match="must be a scalar, got 'v'"):
            rnn_cell.DropoutWrapper(rnn_cell.GRUCell(H), output_keep_prob=tf.placeholder(tf.float32, [2], name="v"))


def test_bidirectional_with_tf1_cells_and_dropout():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 6, D])
        L = tf.placeholder(tf.int32, [None])
        keep = tf.placeholder(tf.float32)
        fw = rnn_cell.DropoutWrapper(rnn_cell.GRUCell(H), output_keep_prob=keep)
        bw = rnn_cell.MultiRNNCell([rnn_cell.BasicLSTMCell(H), rnn_cell.BasicRNNCell(2)])
        (of, ob), (sf, sb) = tf.nn.bidirectional_dynamic_rnn(fw, bw, x, sequence_length=L, dtype=tf.float32)
        loss = tf.reduce_sum(of) + tf.reduce_sum(ob)
        train = tf.train.AdamOptimizer().minimize(loss)
    assert tuple(of.shape) == (None, 6, H) and tuple(ob.shape) == (None, 6, 2)
    assert [v.name for v in tf.global_variables(g)][:2] == ["bidirectional_rnn/fw/gru_cell/gates/kernel",
                                                            "bidirectional_rnn/fw/gru_cell/gates/bias"]
    assert "bidirectional_rnn/bw/multi_rnn_cell/cell_1/basic_rnn_cell/kernel" in [v.name for v in
                                                                                  tf.global_variables(g)]
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        a, b, _ = s.run([of, ob, train], {x: np.ones((2, 6, D), np.float32), L: [6, 3], keep: 1.0})
    assert not a[1, 3:].any() and not b[1, 3:].any() and a[0].all()


def test_a_saver_checkpoint_holds_tf1s_names(tmp_path):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3, D])
        tf.nn.dynamic_rnn(rnn_cell.BasicLSTMCell(H), x, dtype=tf.float32)
        saver = tf.train.Saver()
        with tf.Session(g) as s:
            s.run(tf.global_variables_initializer())
            path = saver.save(s, str(tmp_path / "ckpt"))
    assert tf.train.list_variables(path) == [("rnn/basic_lstm_cell/bias", [4 * H]),
                                             ("rnn/basic_lstm_cell/kernel", [D + H, 4 * H])]
    assert tf.train.list_variables(str(tmp_path)) == tf.train.list_variables(path)
    assert tf.train.load_variable(path, "rnn/basic_lstm_cell/kernel").shape == (D + H, 4 * H)
