"""manual_seed: modules built without rng= draw from one default generator, in
construction order and parameter order; rng= wins and leaves it alone; dropout
masks come from it at call time."""
import math

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn


@pytest.fixture(autouse=True)
def _keep_default_generator():
    """Leave the process-wide generator as it was, whatever a test does."""
    state = dn.default_generator.bit_generator.state
    seed = dn.initial_seed()
    yield
    dn.manual_seed(seed)
    dn.default_generator.bit_generator.state = state


def _modules():
    return [nn.Linear(3, 4), nn.Embedding(5, 2), nn.RNNCell(2, 3), nn.GRUCell(2, 3), nn.LSTMCell(2, 3),
            nn.LSTM(2, 3, num_layers=2, bidirectional=True), nn.GRU(2, 3), nn.RNN(2, 3)]


def _params(mods):
    return [p.numpy().copy() for m in mods for p in m.parameters()]


def test_same_seed_same_modules_other_seed_other_numbers():
    dn.manual_seed(11)
    a = _params(_modules())
    dn.manual_seed(11)
    b = _params(_modules())
    dn.manual_seed(12)
    c = _params(_modules())
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not any(np.array_equal(x, y) for x, y in zip(a, c))


def test_the_stream_is_numpys_default_rng_in_parameter_order():
    g = dn.manual_seed(5)
    assert g is dn.default_generator and dn.initial_seed() == 5
    lin = nn.Linear(3, 4, dtype=np.float64)
    emb = nn.Embedding(6, 2, dtype=np.float64)
    ref = np.random.default_rng(5)
    b = 1 / math.sqrt(3)
    np.testing.assert_array_equal(lin.weight.data, ref.uniform(-b, b, (4, 3)))    # weight, then bias
    np.testing.assert_array_equal(lin.bias.data, ref.uniform(-b, b, 4))
    np.testing.assert_array_equal(emb.weight.data, ref.standard_normal((6, 2)))


def test_rng_argument_wins_and_does_not_consume_the_default_generator():
    dn.manual_seed(0)
    first = nn.Linear(3, 4).weight.numpy().copy()
    dn.manual_seed(0)
    private = nn.Linear(3, 4, rng=7)
    again = nn.Linear(3, 4).weight.data
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(private.weight.data, nn.Linear(3, 4, rng=7).weight.data)
    gen = np.random.default_rng(3)
    np.testing.assert_array_equal(nn.LSTM(2, 3, rng=gen).weight_ih_l0.data,
                                  nn.LSTM(2, 3, rng=np.random.default_rng(3)).weight_ih_l0.data)


def test_dropout_masks_come_from_the_default_generator_at_call_time():
    x = dn.tensor(np.ones((4, 50)))
    d = nn.Dropout(0.5)                      # built before the seed is set
    dn.manual_seed(3)
    m1 = d(x).data
    dn.manual_seed(3)
    m2 = d(x).data
    np.testing.assert_array_equal(m1, m2)
    expect = (np.random.default_rng(3).random((4, 50)) >= 0.5) * 2.0
    np.testing.assert_array_equal(m1, expect)
    assert not np.array_equal(d(x).data, m1)            # the generator moved on
    assert nn.Dropout(0.5).rng is None and nn.Dropout(0.5, rng=1).rng is not None


def test_recurrent_layer_dropout_is_reproducible_after_manual_seed():
    x = np.random.default_rng(0).standard_normal((4, 2, 3))
    lstm = nn.LSTM(3, 5, num_layers=2, dropout=0.5, dtype=np.float64)
    dn.manual_seed(8)
    a = lstm(x)[0].data
    dn.manual_seed(8)
    b = lstm(x)[0].data
    c = lstm(x)[0].data
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_seed_and_bad_seeds():
    s = dn.seed()
    assert isinstance(s, int) and dn.initial_seed() == s
    v = dn.default_generator.random()
    assert v == np.random.default_rng(s).random()
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="manual_seed: seed must be a non-negative integer"):
            dn.manual_seed(bad)
