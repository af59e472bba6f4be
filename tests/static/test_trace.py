"""trace: eager functions compiled per input signature, retrace counting,
live Parameters, gradients, and traced model steps equal to eager ones."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd import ops
from dynnets.autograd.primitives import RowSparse
from dynnets.nn import optim
from dynnets.static import trace


def test_trace_matches_eager_and_counts_retraces():
    calls = []

    def f(x, y, scale):
        calls.append(1)
        return ops.tanh(x @ y) * scale, ops.sum(x)

    tf = trace(f)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    out, s = tf(x, y, 2.0)
    eo, es = f(dn.tensor(x), dn.tensor(y), 2.0)
    np.testing.assert_allclose(out.data, eo.data, rtol=1e-6)
    assert isinstance(out, dn.Tensor) and float(s.data) == pytest.approx(float(es.data), rel=1e-6)
    n = len(calls)
    tf(x * 2, y, 2.0)                          # same signature: no trace
    tf(dn.tensor(x), y, 2.0)                   # a Tensor has the array's signature
    assert len(calls) == n and tf.traces == 1 and tf.retraces == 0
    tf(x[:2], y, 2.0)                          # new shape
    tf(x.astype(np.float64), y.astype(np.float64), 2.0)           # new dtypes
    tf(x, y, 3.0)                              # new static argument
    assert tf.traces == 4 and tf.retraces == 3
    np.testing.assert_allclose(tf(x, y, 3.0)[0].data, np.tanh(x @ y) * 3.0, rtol=1e-6)
    assert tf.traces == 4


def test_shape_dependent_control_flow_is_unrolled_value_dependent_raises():
    def cumulative(x):
        acc = x[0]
        for i in range(1, x.shape[0]):        # depends on the shape: fine
            acc = acc * 0.5 + x[i]
        return acc

    tf = trace(cumulative)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(tf(x).data, cumulative(dn.tensor(x)).data, rtol=1e-6)
    np.testing.assert_allclose(tf(x[:2]).data, cumulative(dn.tensor(x[:2])).data, rtol=1e-6)
    assert tf.retraces == 1

    def branchy(x):
        if ops.sum(x) > 0:                    # depends on a value: not traceable
            return x
        return -x

    with pytest.raises(TypeError, match="depend on shapes"):
        trace(branchy)(x)


def test_parameters_are_read_live():
    lin = nn.Linear(3, 2, rng=0)
    tf = trace(lambda x: lin(x), params=lin)
    x = np.ones((1, 3), np.float32)
    before = tf(x).numpy().copy()
    lin.weight.data += 1.0                     # in place, as the eager optimizers do
    np.testing.assert_allclose(tf(x).data, before + 3.0, rtol=1e-6)
    lin.bias.data = lin.bias.data + 10.0       # a new array
    np.testing.assert_allclose(tf(x).data, before + 13.0, rtol=1e-6)
    assert tf.traces == 1
    assert type(lin.weight) is nn.Parameter     # the trace restored the class


def test_undeclared_parameters_alone_are_an_error():
    w = nn.Parameter(np.ones((2, 2), np.float32))

    def f(x):
        return x @ (w * 2.0)                   # w * 2.0 alone runs eagerly, then meets x

    with pytest.raises(Exception, match="Parameters that the trace was not told about"):
        trace(f)(np.ones((1, 2), np.float32))
    np.testing.assert_allclose(trace(f, params=[w])(np.ones((1, 2), np.float32)).data, [[4.0, 4.0]])

    def g(x):
        return x @ w                           # a leaf Parameter meeting a traced value is captured live

    tg = trace(g)
    assert tg(np.ones((1, 2), np.float32)).data.tolist() == [[2.0, 2.0]]
    w.data[...] = 3.0
    assert tg(np.ones((1, 2), np.float32)).data.tolist() == [[6.0, 6.0]]


def _lstm_setup():
    cell = nn.LSTMCell(5, 4, rng=1)
    head = nn.Linear(4, 3, rng=2)
    emb = nn.Embedding(10, 5, rng=3)
    params = list(emb.parameters()) + list(cell.parameters()) + list(head.parameters())

    def loss_fn(ids, h, c, y):
        for t in range(ids.shape[0]):
            h, c = cell(emb(ids[t]), (h, c))
        return ops.cross_entropy(head(h), y)

    return params, loss_fn


def test_traced_lstm_step_gradients_equal_eager():
    params, loss_fn = _lstm_setup()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 10, (6, 2))
    h0 = np.zeros((2, 4), np.float32)
    y = np.array([0, 2])
    tf = trace(loss_fn, grads_of=params)
    loss, grads = tf(ids, h0, h0, y)
    el = loss_fn(ids, h0, h0, y)
    el.backward()
    assert float(loss.data) == pytest.approx(float(el.data), rel=1e-6)
    for p, gr in zip(params, grads):
        if type(gr) is RowSparse:
            assert type(p._grad) is RowSparse          # the embedding gradient stays row-sparse
            gr = gr.to_dense()
        np.testing.assert_allclose(gr, p.grad.data, rtol=1e-5, atol=1e-7)


def test_traced_training_with_eager_optimizer_equals_eager_training():
    params, loss_fn = _lstm_setup()
    start = [p.numpy().copy() for p in params]
    rng = np.random.default_rng(1)
    batches = [(rng.integers(0, 10, (4, 3)), rng.integers(0, 3, 3)) for _ in range(4)]
    h0 = np.zeros((3, 4), np.float32)

    def run(traced):
        for p, s in zip(params, start):
            p.data[...] = s
        opt = optim.Adagrad(params, lr=0.1)
        step = trace(loss_fn, grads_of=params, accumulate=True) if traced else None
        losses = []
        for ids, y in batches:
            opt.zero_grad()
            if traced:
                losses.append(float(step(ids, h0, h0, y).data))
            else:
                loss = loss_fn(ids, h0, h0, y)
                loss.backward()
                losses.append(float(loss.data))
            opt.step()
        return losses, [p.numpy().copy() for p in params], step

    le, we, _ = run(False)
    lt, wt, step = run(True)
    np.testing.assert_allclose(lt, le, rtol=1e-5)
    for a, b in zip(wt, we):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert step.traces == 1 and le[-1] != le[0]


def test_traced_tree_lstm_loss_and_grads_equal_eager():
    from dynnets.data import Vocabulary, load_samples
    from dynnets.models import TreeLSTM
    trees = load_samples()["train"][:3]
    vocab = Vocabulary.from_trees(trees)
    for mode in ("level", "recursive"):
        model = TreeLSTM(len(vocab), embed_dim=6, hidden=5, mode=mode, seed=0)
        batch = model.make_batch(trees, vocab)
        tf = trace(model.loss, grads_of=model)       # a bound method of a Module: its parameters are live
        loss, grads = tf(batch)                      # the batch (structure) is a static argument
        model.zero_grad()
        el = model.loss(batch)
        el.backward()
        assert float(loss.data) == pytest.approx(float(el.data), rel=1e-5)
        for p, gr in zip(model.parameters(), grads):
            gd = gr.to_dense() if type(gr) is RowSparse else gr
            np.testing.assert_allclose(gd, p.grad.data, rtol=1e-4, atol=1e-6)
        tf(batch)
        assert tf.traces == 1
