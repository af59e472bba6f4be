"""nn.dynamic_rnn with the PyTorch-layout cells (TorchLSTMCell,
TorchGRUCell): one graph of unknown batch and length against eager per-step
cell loops on the same weights and against the eager nn.LSTM on packed
sequences (values and gradients, float64). TF1's cells: test_tf1_cells.py."""
import numpy as np
import pytest

import dynnets
import dynnets.static as tf
from dynnets import nn
from dynnets.nn.utils.rnn import pack_sequence
from dynnets.static.nn import dynamic_rnn, rnn_cell

D, H = 3, 4
SHAPES = [(3, 5, [5, 2, 4]), (1, 2, [2]), (4, 6, [1, 6, 3, 6]), (2, 3, [0, 3])]


def _graph(cell_fn, time_major=False, with_lengths=True, initial=False):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, None, D), np.float64, name="x")
        lengths = tf.placeholder((None,), np.int64, name="lengths") if with_lengths else None
        cell = cell_fn()
        init = None
        if initial:
            init = rnn_cell.LSTMStateTuple(tf.placeholder((None, H), np.float64, name="c0"),
                                           tf.placeholder((None, H), np.float64, name="h0"))
        outputs, state = dynamic_rnn(cell, x, sequence_length=lengths, initial_state=init,
                                     dtype=None if initial else np.float64, time_major=time_major)
        h = state.h if isinstance(state, tuple) else state
        loss = tf.reduce_sum(outputs * outputs) + tf.reduce_sum(h * 0.5)
        if isinstance(state, tuple):
            loss = loss + tf.reduce_sum(state.c * 0.25)
        wrt = [x] + cell.variables + (list(init) if initial else [])
        grads = tf.gradients(loss, wrt)
        sess = tf.Session(g)
        sess.run(tf.global_variables_initializer())
    return dict(x=x, lengths=lengths, cell=cell, outputs=outputs, state=state, loss=loss, grads=grads, sess=sess,
                init=init)


def _eager_loop(step, x, lengths, weights, state0):
    """Per-step eager loop with TF1's semantics: outputs zero and state carried past a sequence's length."""
    B, T, _ = x.shape
    xt = dynnets.tensor(x, dtype=np.float64, requires_grad=True)
    params = {k: dynnets.tensor(v, dtype=np.float64, requires_grad=True) for k, v in weights.items()}
    state = [dynnets.tensor(s, dtype=np.float64, requires_grad=True) for s in state0]
    init = list(state)
    outs = []
    for t in range(T):
        new_out, new_state = step(xt[:, t], state, params)
        m = (t < np.asarray(lengths))[:, None].astype(np.float64)
        outs.append(new_out * m)
        state = [n * m + s * (1.0 - m) for n, s in zip(new_state, state)]
    out = dynnets.stack(outs, axis=1)
    return xt, params, init, out, state


def _lstm_step(x, state, p):
    c, h = state
    h2, c2 = dynnets.lstm_cell(x, h, c, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"] + p["forget"])
    return h2, [c2, h2]


def _gru_step(x, state, p):
    h2 = dynnets.gru_cell(x, state[0], p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    return h2, [h2]


def _weights(cell, sess):
    return {v.name.split("/")[-1]: sess.variable_value(v) for v in cell.variables}


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_one_graph_for_every_batch_and_length_matches_eager_step_loops(kind):
    cell_fn = (lambda: rnn_cell.TorchLSTMCell(H, dtype=np.float64, rng=0)) if kind == "lstm" else \
        (lambda: rnn_cell.TorchGRUCell(H, dtype=np.float64, rng=0))
    m = _graph(cell_fn)
    n_eqns = len(m["x"].graph.eqns)
    rng = np.random.default_rng(1)
    for B, T, lengths in SHAPES:
        x = rng.standard_normal((B, T, D))
        feed = {m["x"]: x, m["lengths"]: np.asarray(lengths)}
        out, state, gs = m["sess"].run([m["outputs"], m["state"], m["grads"]], feed)
        w = _weights(m["cell"], m["sess"])
        if kind == "lstm":
            w["forget"] = np.r_[np.zeros(H), np.ones(H), np.zeros(2 * H)]
            step, state0 = _lstm_step, [np.zeros((B, H)), np.zeros((B, H))]
        else:
            step, state0 = _gru_step, [np.zeros((B, H))]
        xt, params, _, eo, es = _eager_loop(step, x, lengths, w, state0)
        loss = dynnets.sum(eo * eo) + dynnets.sum(es[-1] * 0.5)
        if kind == "lstm":
            loss = loss + dynnets.sum(es[0] * 0.25)
        loss.backward()
        assert out.shape == (B, T, H)
        np.testing.assert_allclose(out, eo.data, rtol=1e-12, atol=1e-13)
        assert not out[np.arange(T)[None, :] >= np.asarray(lengths)[:, None]].any()      # zero past each length
        if kind == "lstm":
            np.testing.assert_allclose(state.c, es[0].data, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(state.h, es[1].data, rtol=1e-12, atol=1e-13)
        else:
            np.testing.assert_allclose(state, es[0].data, rtol=1e-12, atol=1e-13)
        want = [xt.grad.data] + [params[v.name.split("/")[-1]].grad.data for v in m["cell"].variables]
        for a, b in zip(gs, want):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert len(m["x"].graph.eqns) == n_eqns          # the graph was built once: running added nothing


def test_matches_eager_nn_lstm_on_packed_sequences():
    m = _graph(lambda: rnn_cell.TorchLSTMCell(H, forget_bias=0.0, dtype=np.float64, rng=2))
    rng = np.random.default_rng(3)
    lengths = [4, 1, 3]
    x = rng.standard_normal((3, 4, D))
    out, state, gs = m["sess"].run([m["outputs"], m["state"], m["grads"]], {m["x"]: x, m["lengths"]: lengths})
    w = _weights(m["cell"], m["sess"])
    lstm = nn.LSTM(D, H, dtype=np.float64)
    lstm.load_state_dict({f"{k}_l0": v for k, v in w.items()})
    seqs = [dynnets.tensor(x[i, :n], dtype=np.float64, requires_grad=True) for i, n in enumerate(lengths)]
    packed_out, (h_n, c_n) = lstm(pack_sequence(seqs, enforce_sorted=False))
    from dynnets.nn.utils.rnn import pad_packed_sequence
    padded, _ = pad_packed_sequence(packed_out, batch_first=True)
    np.testing.assert_allclose(out, padded.data, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(state.h, h_n.data[0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(state.c, c_n.data[0], rtol=1e-12, atol=1e-13)
    (dynnets.sum(padded * padded) + dynnets.sum(h_n * 0.5) + dynnets.sum(c_n * 0.25)).backward()
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(gs[0][i, :n], seqs[i].grad.data, rtol=1e-9, atol=1e-12)
        assert not gs[0][i, n:].any()
    for v, g in zip(m["cell"].variables, gs[1:]):
        want = getattr(lstm, v.name.split("/")[-1] + "_l0").grad.data
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-12)


def test_time_major_initial_state_and_no_lengths():
    m = _graph(lambda: rnn_cell.TorchLSTMCell(H, dtype=np.float64, rng=4), time_major=True, with_lengths=False,
               initial=True)
    rng = np.random.default_rng(5)
    T, B = 3, 2
    x = rng.standard_normal((T, B, D))
    c0, h0 = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    out, state, gs = m["sess"].run([m["outputs"], m["state"], m["grads"]],
                                   {m["x"]: x, m["init"].c: c0, m["init"].h: h0})
    w = _weights(m["cell"], m["sess"])
    w["forget"] = np.r_[np.zeros(H), np.ones(H), np.zeros(2 * H)]
    xt, params, init, eo, es = _eager_loop(_lstm_step, x.transpose(1, 0, 2), [T] * B, w, [c0, h0])
    (dynnets.sum(eo * eo) + dynnets.sum(es[1] * 0.5) + dynnets.sum(es[0] * 0.25)).backward()
    np.testing.assert_allclose(out, eo.numpy().transpose(1, 0, 2), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gs[0], xt.grad.numpy().transpose(1, 0, 2), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gs[-2], init[0].grad.data, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gs[-1], init[1].grad.data, rtol=1e-9, atol=1e-12)


def test_errors_name_the_argument():
    with tf.Graph().as_default():
        x = tf.placeholder((None, None, D))
        with pytest.raises(ValueError, match="must give a dtype"):
            dynamic_rnn(rnn_cell.GRUCell(H), x)
        with pytest.raises(ValueError, match="must be 3-D"):
            dynamic_rnn(rnn_cell.GRUCell(H), tf.placeholder((None, D)), dtype=np.float32)
        with pytest.raises(ValueError, match="sequence_length must be 1-D"):
            dynamic_rnn(rnn_cell.GRUCell(H), x, sequence_length=tf.placeholder((None, 2), np.int64),
                        dtype=np.float32)
        with pytest.raises(TypeError, match="inputs must be a Value"):
            dynamic_rnn(rnn_cell.GRUCell(H), np.zeros((2, 3, D)), dtype=np.float32)


def test_a_state_tuple_is_fetched_as_one_on_both_plan_tiers():
    m = _graph(lambda: rnn_cell.LSTMCell(H, dtype=np.float64, rng=6))
    feed = {m["x"]: np.ones((2, 3, D)), m["lengths"]: [3, 1]}
    first = m["sess"].run(m["state"], feed)
    for _ in range(3):                       # the third run is the generated straight-line plan
        again = m["sess"].run({"s": m["state"]}, feed)["s"]
        assert type(again) is rnn_cell.LSTMStateTuple
        np.testing.assert_array_equal(again.h, first.h)
        np.testing.assert_array_equal(again.c, first.c)
