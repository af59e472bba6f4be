"""nn.LSTM / nn.RNN and the loss modules under ds.trace and in a static
graph: the same loss and gradients as eager (float64)."""
import numpy as np
import pytest

import dynnets as dn
import dynnets.static as ds
from dynnets import nn
from dynnets.nn.utils.rnn import pack_padded_sequence


class Tagger(nn.Module):
    def __init__(self, bidirectional):
        super().__init__()
        self.lstm = nn.LSTM(4, 3, num_layers=2, bidirectional=bidirectional, dtype=np.float64, rng=1)
        self.out = nn.Linear(6 if bidirectional else 3, 5, dtype=np.float64, rng=2)
        self.loss = nn.CrossEntropyLoss(weight=np.array([1.0, 0.5, 2.0, 1.0, 0.25]))


def _data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 3, 4))
    y = rng.integers(0, 5, size=(6, 3))
    y[4, 1] = -100                                            # an ignored position
    return x, y


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("lengths", [None, (6, 2, 4)])
def test_traced_lstm_cross_entropy_matches_eager(bidirectional, lengths):
    model = Tagger(bidirectional)
    x, y = _data()
    yb = np.ascontiguousarray(y.T)                            # (B, T) targets of the (B, C, T) scores

    def loss_fn(a, t, lens):
        h, _ = model.lstm(a, lengths=None if lens is None else np.asarray(lens))
        return model.loss(dn.transpose(model.out(h), 1, 2, 0), t)

    model.zero_grad()
    want = loss_fn(dn.tensor(x), yb, lengths)
    want.backward()
    want_g = [p.grad.numpy().copy() for p in model.parameters()]
    step = ds.trace(loss_fn, grads_of=model)
    # the targets are an array argument: a placeholder, so symbolic in the graph
    loss, grads = step(x, yb, lengths)
    np.testing.assert_allclose(loss.data, want.data, rtol=1e-12, atol=1e-12)
    assert len(grads) == len(want_g)
    for (name, _), g, w in zip(model.named_parameters(), grads, want_g):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-10, atol=1e-12, err_msg=name)
    # other targets reuse the trace and still agree
    yb2 = (yb + 1) % 5
    loss2, _ = step(x, yb2, lengths)
    np.testing.assert_allclose(loss2.data, loss_fn(dn.tensor(x), yb2, lengths).data, rtol=1e-12)
    assert step.traces == 1


@pytest.mark.parametrize("loss", ["CrossEntropyLoss", "NLLLoss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kw", [{}, {"weight": np.array([0.5, 2.0, 1.0, 0.25])}, {"ignore_index": 1},
                                {"label_smoothing": 0.2, "weight": np.array([0.5, 2.0, 1.0, 0.25])}])
def test_symbolic_targets_match_eager(loss, reduction, kw):
    if loss == "NLLLoss" and "label_smoothing" in kw:
        pytest.skip("NLLLoss has no label_smoothing")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((6, 4))
    y = np.array([0, 3, 1, -100, 2, 1]) if "ignore_index" not in kw else np.array([0, 3, 1, 1, 2, 1])
    mod = getattr(nn, loss)(reduction=reduction, **kw)
    xt = dn.tensor(x, requires_grad=True)
    want = mod(xt, y)
    want.sum().backward()
    g = ds.Graph()
    with g.as_default():
        xp = ds.placeholder(np.float64, (6, 4), name="x")
        yp = ds.placeholder(np.int64, (6,), name="y")
        out = mod(xp, yp)
        gx, = ds.gradients(dn.sum(out), [xp])
    with ds.Session(graph=g) as s:
        got, got_g = s.run([out, gx], {xp: x, yp: y})
    np.testing.assert_allclose(got, want.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_g, xt.grad.data, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss", ["CrossEntropyLoss", "NLLLoss"])
@pytest.mark.parametrize("bad", [4, -1])
def test_symbolic_target_out_of_range_raises(loss, bad):
    step = ds.trace(lambda a, t: getattr(nn, loss)()(a, t))
    with pytest.raises(IndexError, match="take"):
        step(np.zeros((3, 4)), np.array([0, bad, 1]))


def test_symbolic_lengths_give_a_clear_error():
    lstm = nn.LSTM(4, 3, dtype=np.float64)
    x = np.zeros((5, 3, 4))
    with pytest.raises(TypeError, match="lengths must be known when the graph is built"):
        ds.trace(lambda a, lens: lstm(a, lengths=lens)[0])(x, np.array([2, 5, 3]))
    with pytest.raises(TypeError, match="lengths must be known"):
        ds.trace(lambda a, lens: pack_padded_sequence(a, lens, enforce_sorted=False).data)(x, np.array([2, 5, 3]))


def test_unknown_steps_give_a_clear_error():
    g = ds.Graph()
    with g.as_default():
        xp = ds.placeholder(np.float64, (None, 3, 4))
        with pytest.raises(ValueError, match="LSTM: the number of steps and the batch size must be known"):
            nn.LSTM(4, 3, dtype=np.float64)(xp)


def test_traced_relu_rnn_from_zero_state_needs_no_declared_parameters():
    rnn = nn.RNN(4, 3, nonlinearity="relu", dtype=np.float64, rng=3)
    x = np.random.default_rng(7).standard_normal((5, 2, 4))
    np.testing.assert_allclose(ds.trace(lambda a: rnn(a)[0])(x).data, rnn(dn.tensor(x))[0].data, rtol=1e-12)
