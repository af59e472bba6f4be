"""RNN/GRU/LSTM cells: PyTorch names and shapes, initialisation, the equations
written out in numpy, and finite-difference gradient checks in float64."""

import math

import numpy as np
import pytest

from dynnets import nn
from dynnets.autograd import gradcheck
from dynnets.nn.utils import functional_call


def sig(a):
    return 1 / (1 + np.exp(-a))


def rnn_ref(x, h, w_ih, w_hh, b_ih, b_hh, act=np.tanh):
    return act(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh)


def gru_ref(x, h, w_ih, w_hh, b_ih, b_hh):
    H = h.shape[1]
    gi = x @ w_ih.T + b_ih
    gh = h @ w_hh.T + b_hh
    r = sig(gi[:, :H] + gh[:, :H])
    z = sig(gi[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    return (1 - z) * n + z * h


def lstm_ref(x, h, c, w_ih, w_hh, b_ih, b_hh):
    H = h.shape[1]
    a = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, g, o = sig(a[:, :H]), sig(a[:, H:2 * H]), np.tanh(a[:, 2 * H:3 * H]), sig(a[:, 3 * H:])
    c2 = f * c + i * g
    return o * np.tanh(c2), c2


CELLS = {"rnn_tanh": (lambda **k: nn.RNNCell(5, 4, **k), 1),
         "rnn_relu": (lambda **k: nn.RNNCell(5, 4, nonlinearity="relu", **k), 1),
         "gru": (lambda **k: nn.GRUCell(5, 4, **k), 3),
         "lstm": (lambda **k: nn.LSTMCell(5, 4, **k), 4)}


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_pytorch_names_shapes_and_init(kind):
    make, G = CELLS[kind]
    cell = make(rng=0)
    shapes = {n: p.shape for n, p in cell.named_parameters()}
    # the keys and shapes of torch.nn.{RNN,GRU,LSTM}Cell(5, 4).state_dict()
    assert shapes == {"weight_ih": (G * 4, 5), "weight_hh": (G * 4, 4), "bias_ih": (G * 4,), "bias_hh": (G * 4,)}
    assert all(p.dtype == np.float32 for p in cell.parameters())
    allw = np.concatenate([p.numpy().ravel() for p in cell.parameters()])
    assert np.all(np.abs(allw) <= 1 / math.sqrt(4))
    np.testing.assert_array_equal(make(rng=0).weight_hh.data, cell.weight_hh.data)
    no_bias = make(bias=False, rng=0)
    assert [n for n, _ in no_bias.named_parameters()] == ["weight_ih", "weight_hh"]


def test_init_statistics_uniform():
    cell = nn.LSTMCell(64, 100, rng=1)
    w = np.concatenate([p.numpy().ravel() for p in cell.parameters()])
    b = 1 / math.sqrt(100)
    assert np.abs(w).max() <= b and np.abs(w).max() > 0.99 * b
    assert abs(w.mean()) < 5 * b / math.sqrt(3 * w.size)
    assert abs(w.var() / (b * b / 3) - 1) < 0.03


def _inputs(rng, B=3, dtype=np.float64):
    return (rng.standard_normal((B, 5)).astype(dtype), rng.standard_normal((B, 4)).astype(dtype),
            rng.standard_normal((B, 4)).astype(dtype))


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_cells_match_numpy_equations(dtype, tol):
    rng = np.random.default_rng(0)
    x, h, c = _inputs(rng, dtype=dtype)
    for kind, (make, _) in CELLS.items():
        cell = make(rng=1, dtype=dtype)
        ps = [p.data for p in cell.parameters()]
        if kind == "lstm":
            hn, cn = cell(x, (h, c))
            rh, rc = lstm_ref(x, h, c, *ps)
            np.testing.assert_allclose(hn.data, rh, rtol=tol, atol=tol)
            np.testing.assert_allclose(cn.data, rc, rtol=tol, atol=tol)
            assert hn.dtype == dtype
        else:
            want = (gru_ref(x, h, *ps) if kind == "gru" else
                    rnn_ref(x, h, *ps, act=np.tanh if kind == "rnn_tanh" else lambda a: np.maximum(a, 0)))
            np.testing.assert_allclose(cell(x, h).data, want, rtol=tol, atol=tol)


def test_default_state_is_zeros_and_unbatched_input():
    rng = np.random.default_rng(2)
    x, _, _ = _inputs(rng, B=2, dtype=np.float32)
    z = np.zeros((2, 4), np.float32)
    lstm = nn.LSTMCell(5, 4, rng=0)
    h0, c0 = lstm(x)
    h1, c1 = lstm(x, (z, z))
    np.testing.assert_array_equal(h0.data, h1.data)
    np.testing.assert_array_equal(c0.data, c1.data)
    hu, cu = lstm(x[0])
    assert hu.shape == (4,) and cu.shape == (4,)
    np.testing.assert_allclose(hu.data, h0.data[0], rtol=1e-6)
    hu2, _ = lstm(x[0], (hu, cu))
    np.testing.assert_allclose(hu2.data, lstm(x[:1], (h0[:1], c0[:1]))[0].data[0], rtol=1e-6)
    gru = nn.GRUCell(5, 4, rng=0)
    np.testing.assert_array_equal(gru(x).data, gru(x, z).data)
    assert gru(x[1]).shape == (4,)
    rnn = nn.RNNCell(5, 4, bias=False, rng=0)
    np.testing.assert_allclose(rnn(x).data, np.tanh(x @ rnn.weight_ih.data.T), rtol=1e-6)


def test_cell_input_errors():
    lstm = nn.LSTMCell(5, 4, rng=0)
    with pytest.raises(ValueError, match=r"LSTMCell: input must be \(batch, 5\) or \(5,\), got shape \(1, 2, 5\)"):
        lstm(np.zeros((1, 2, 5), np.float32))
    with pytest.raises(TypeError, match="hx must be a pair"):
        lstm(np.zeros((2, 5), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"lstm_cell: x.shape\[1\]=3 does not match weight_ih.shape\[1\]=5"):
        lstm(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="nonlinearity must be 'tanh' or 'relu'"):
        nn.RNNCell(2, 2, nonlinearity="gelu")


@pytest.mark.parametrize("kind", sorted(CELLS))
@pytest.mark.parametrize("bias", [True, False])
def test_cell_gradcheck_float64(kind, bias):
    make, _ = CELLS[kind]
    cell = make(bias=bias, rng=3, dtype=np.float64)
    names = [n for n, _ in cell.named_parameters()]
    x, h, c = _inputs(np.random.default_rng(4), B=2)
    if kind == "rnn_relu":
        h = np.abs(h) + 0.5       # keep pre-activations away from relu's kink, where differences are one-sided

    if kind == "lstm":
        def fn(x, h, c, *ps):
            return functional_call(cell, dict(zip(names, ps)), x, (h, c))
        inputs = [x, h, c]
    else:
        def fn(x, h, *ps):
            return functional_call(cell, dict(zip(names, ps)), x, h)
        inputs = [x, h]
    params = [p.data for p in cell.parameters()]
    assert gradcheck(fn, inputs + params)
    # the substituted parameters are the ones used (else their gradients would be trivially 0 = 0)
    first = lambda o: (o[0] if isinstance(o, tuple) else o).data  # noqa: E731
    assert not np.allclose(first(fn(*inputs, *params)), first(fn(*inputs, *[1.5 * p for p in params])))


def test_lstm_sequence_gradcheck():
    """Gradients through several steps (the state feeds back) and into h0/c0."""
    cell = nn.LSTMCell(3, 2, rng=0, dtype=np.float64)
    names = [n for n, _ in cell.named_parameters()]
    xs = np.random.default_rng(5).standard_normal((4, 2, 3))

    def fn(xs, h, c, *ps):
        out = []
        for t in range(xs.shape[0]):
            h, c = functional_call(cell, dict(zip(names, ps)), xs[t], (h, c))
            out.append(h)
        return out[-1], c

    rng = np.random.default_rng(6)
    assert gradcheck(fn, [xs, rng.standard_normal((2, 2)), rng.standard_normal((2, 2))]
                     + [p.data for p in cell.parameters()])
