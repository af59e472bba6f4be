"""``dynnets.nn.init``: values written in place (same array, nothing
recorded), the default generator and ``generator=``, the distributions'
bounds and moments from torch's fan and gain formulas (Linear, LSTM and
Conv-shaped weights), truncation, orthogonality, the fills and the errors.
torch's own samples are compared in ``tests/parity/test_torch_init.py``."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.nn import init

# (shape, fan_in, fan_out): a Linear weight, an LSTM's stacked weight_ih, a Conv2d weight, a Conv1d weight
SHAPES = [((400, 300), 300, 400), ((4 * 64, 100), 100, 256), ((32, 16, 3, 3), 144, 288), ((20, 10, 5), 50, 100)]


def _w(shape, dtype=np.float32):
    return nn.Parameter(np.zeros(shape, dtype=dtype))


def test_values_are_written_in_place_without_recording():
    lin = nn.Linear(30, 20)
    arr = lin.weight.numpy()
    opt = dn.optim.SGD(lin.parameters(), lr=0.1)
    out = init.xavier_uniform_(lin.weight)
    assert out is lin.weight and lin.weight.numpy() is arr and lin.weight.is_leaf and lin.weight.grad_fn is None
    assert opt.param_groups[0]["params"][0].numpy() is arr
    init.zeros_(lin.bias)
    x = dn.tensor(np.ones((2, 30), np.float32))
    np.testing.assert_allclose(lin(x).data, np.ones((2, 30), np.float32) @ arr.T, rtol=1e-6)
    with dn.no_grad():
        init.normal_(lin.weight)
    assert lin.weight.numpy() is arr


def test_default_generator_and_generator_argument():
    dn.manual_seed(7)
    w = init.xavier_uniform_(_w((5, 3)))
    b = math.sqrt(6.0 / 8)
    np.testing.assert_array_equal(w.data, np.random.default_rng(7).uniform(-b, b, (5, 3)).astype(np.float32))
    g1, g2 = dn.Generator().manual_seed(2), dn.Generator().manual_seed(2)
    state = dn.default_generator.bit_generator.state
    a = init.kaiming_normal_(_w((6, 4)), generator=g1)
    assert dn.default_generator.bit_generator.state == state
    np.testing.assert_array_equal(a.data, init.kaiming_normal_(_w((6, 4)), generator=g2).data)
    np.testing.assert_array_equal(init.normal_(_w((3,)), 1.0, 2.0, generator=np.random.default_rng(0)).data,
                                  np.random.default_rng(0).normal(1.0, 2.0, 3).astype(np.float32))


@pytest.mark.parametrize("shape,fan_in,fan_out", SHAPES)
def test_xavier_and_kaiming_bounds_and_moments(shape, fan_in, fan_out):
    g = dn.Generator().manual_seed(0)
    cases = [
        (lambda w: init.xavier_uniform_(w, gain=2.0, generator=g), "u", 2.0 * math.sqrt(6.0 / (fan_in + fan_out))),
        (lambda w: init.xavier_normal_(w, generator=g), "n", math.sqrt(2.0 / (fan_in + fan_out))),
        (lambda w: init.kaiming_uniform_(w, a=math.sqrt(5), generator=g), "u", math.sqrt(6.0 / (1 + 5) / fan_in)),
        (lambda w: init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu", generator=g), "u",
         math.sqrt(6.0 / fan_out)),
        (lambda w: init.kaiming_normal_(w, nonlinearity="relu", generator=g), "n", math.sqrt(2.0 / fan_in)),
        (lambda w: init.kaiming_normal_(w, mode="fan_out", nonlinearity="tanh", generator=g), "n",
         5.0 / 3 / math.sqrt(fan_out)),
        (lambda w: init.uniform_(w, -0.3, 0.1, generator=g), "u01", None),
    ]
    for fill, kind, scale in cases:
        a = fill(_w(shape, np.float64)).numpy()
        n = a.size
        if kind == "u":
            # uniform on (-scale, scale): std scale / sqrt(3), the extremes within 1e-3 of the bound
            assert np.abs(a).max() <= scale and np.abs(a).max() > scale * (1 - 50.0 / n)
            assert abs(a.std() / (scale / math.sqrt(3)) - 1) < 6 / math.sqrt(n)
        elif kind == "n":
            assert abs(a.mean()) < 6 * scale / math.sqrt(n)
            assert abs(a.std() / scale - 1) < 6 / math.sqrt(n)
        else:
            assert a.min() >= -0.3 and a.max() < 0.1 and abs(a.mean() + 0.1) < 0.01


def _truncated_moments(mean, std, a, b):
    al, be = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    z = cdf(be) - cdf(al)
    m = (pdf(al) - pdf(be)) / z
    var = 1 + (al * pdf(al) - be * pdf(be)) / z - m * m
    return mean + std * m, std * math.sqrt(var)


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (1.0, 2.0, 0.0, 5.0),
                                          (0.0, 1.0, 1.5, 3.0)])
def test_trunc_normal_moments(mean, std, a, b):
    w = init.trunc_normal_(_w((300, 300), np.float64), mean, std, a, b, generator=dn.Generator().manual_seed(1)).numpy()
    assert w.min() >= a and w.max() <= b
    want_mean, want_std = _truncated_moments(mean, std, a, b)
    n = w.size
    assert abs(w.mean() - want_mean) < 6 * want_std / math.sqrt(n)
    assert abs(w.std() / want_std - 1) < 6 / math.sqrt(n)
    with pytest.warns(UserWarning, match="more than 2 std"):
        init.trunc_normal_(_w((3,)), mean=10.0, std=1.0, a=-2.0, b=2.0)


@pytest.mark.parametrize("shape", [(6, 6), (4, 9), (9, 4), (8, 2, 3, 3), (3, 20)])
def test_orthogonal(shape):
    w = init.orthogonal_(_w(shape, np.float64), gain=2.0, generator=dn.Generator().manual_seed(3)).numpy()
    m = w.reshape(shape[0], -1) / 2.0
    small = min(m.shape)
    gram = m @ m.T if m.shape[0] == small else m.T @ m
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)
    w32 = init.orthogonal_(_w(shape)).numpy().reshape(shape[0], -1)
    gram32 = w32 @ w32.T if w32.shape[0] == small else w32.T @ w32
    np.testing.assert_allclose(gram32, np.eye(small), atol=1e-5)


def test_fills():
    w = nn.Parameter(np.full((2, 3), 5.0))
    assert init.constant_(w, 0.25) is w and np.all(w.data == 0.25)
    assert np.all(init.ones_(w).data == 1) and np.all(init.zeros_(w).data == 0)
    np.testing.assert_array_equal(init.eye_(w).data, [[1, 0, 0], [0, 1, 0]])
    ints = dn.tensor(np.arange(4), dtype=np.int64)
    assert init.constant_(ints, 3).tolist() == [3, 3, 3, 3] and ints.dtype == np.int64
    arr = np.zeros((2, 2))
    assert init.eye_(arr) is arr and arr.tolist() == [[1, 0], [0, 1]]


def test_gains():
    assert init.calculate_gain("linear") == init.calculate_gain("conv2d") == init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == 5.0 / 3 and init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04) and init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(_w((5,)))
    with pytest.raises(ValueError, match="mode fan_avg not supported"):
        init.kaiming_uniform_(_w((2, 2)), mode="fan_avg")
    with pytest.raises(TypeError, match="floating-point tensor, got dtype int64"):
        init.normal_(dn.tensor(np.arange(3), dtype=np.int64))
    with pytest.raises(RuntimeError, match="read-only"):
        init.uniform_(dn.from_numpy(np.broadcast_to(np.zeros(3), (2, 3))))
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(_w((2, 2, 2)))
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(_w((4,)))
    with pytest.raises(ValueError, match="from=1 > to=0"):
        init.uniform_(_w((2,)), 1, 0)
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(_w((0, 3)))


def test_deprecated_aliases():
    with pytest.warns(FutureWarning, match="`nn.init.xavier_uniform` is now deprecated in favor of"):
        w = init.xavier_uniform(_w((3, 3)))
    assert np.abs(w.data).max() > 0 and init.xavier_uniform.__name__ == "xavier_uniform"


def test_initialising_a_model_through_its_modules():
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
    cell = nn.LSTM(4, 6)
    dn.manual_seed(0)
    for m in list(model.modules()) + [cell]:
        if isinstance(m, nn.Linear):
            init.xavier_normal_(m.weight, gain=init.calculate_gain("tanh"))
            init.constant_(m.bias, 0.1)
        for name, p in m.named_parameters(recurse=False):
            if name.startswith("weight_hh"):
                init.orthogonal_(p)
    assert np.all(model[0].bias.data == np.float32(0.1)) and np.all(model[2].bias.data == np.float32(0.1))
    hh = cell.weight_hh_l0.numpy()                                         # (4 * 6, 6): orthonormal columns
    np.testing.assert_allclose(hh.T @ hh, np.eye(6), atol=1e-5)
