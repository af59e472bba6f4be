"""Linear, Embedding, Dropout, activations: maths, initialisation as documented,
reproducibility, gradients."""

import math

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd import RowSparse, gradcheck
from dynnets.nn.utils import functional_call


def _uniform_stats_ok(a, bound):
    """Values inside [-bound, bound], spread over it, with U's mean and variance."""
    n = a.size
    assert np.all(np.abs(a) <= bound)
    assert np.abs(a).max() > 0.98 * bound
    # mean of U(-b, b) is 0 with standard error b/sqrt(3n); variance b^2/3
    assert abs(a.mean()) < 5 * bound / math.sqrt(3 * n)
    assert abs(a.var() / (bound ** 2 / 3) - 1) < 0.05


def test_linear_init_and_forward():
    lin = nn.Linear(400, 300, rng=0)
    assert lin.weight.shape == (300, 400) and lin.bias.shape == (300,)
    assert lin.weight.dtype == np.float32 and lin.weight.requires_grad
    _uniform_stats_ok(lin.weight.numpy(), 1 / math.sqrt(400))
    assert np.all(np.abs(lin.bias.numpy()) <= 1 / math.sqrt(400))
    big_bias = nn.Linear(16, 20000, rng=0).bias.numpy()
    _uniform_stats_ok(big_bias, 1 / math.sqrt(16))

    x = np.random.default_rng(1).standard_normal((5, 400)).astype(np.float32)
    np.testing.assert_allclose(lin(x).data, x @ lin.weight.data.T + lin.bias.data, rtol=1e-5, atol=1e-5)
    x3 = x.reshape(5, 1, 400)
    assert lin(x3).shape == (5, 1, 300)


def test_init_is_reproducible_and_dtype_follows():
    a, b, c = nn.Linear(7, 3, rng=5), nn.Linear(7, 3, rng=5), nn.Linear(7, 3, rng=6)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert not np.array_equal(a.weight.data, c.weight.data)
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(nn.Embedding(4, 2, rng=g1).weight.data, nn.Embedding(4, 2, rng=g2).weight.data)
    d = nn.Linear(7, 3, rng=5, dtype=np.float64)
    assert d.weight.dtype == np.float64
    np.testing.assert_allclose(d.weight.data, a.weight.data, rtol=1e-6)
    with pytest.raises(TypeError, match="Linear: dtype must be a floating-point type, got int32"):
        nn.Linear(2, 2, dtype=np.int32)
    with pytest.raises(ValueError, match="Linear: in_features must be a non-negative integer, got -1"):
        nn.Linear(-1, 2)


def test_linear_without_bias_and_gradcheck():
    lin = nn.Linear(4, 3, bias=False, rng=0, dtype=np.float64)
    assert [n for n, _ in lin.named_parameters()] == ["weight"]
    x = np.random.default_rng(0).standard_normal((2, 4))
    np.testing.assert_allclose(lin(x).data, x @ lin.weight.data.T)
    lin2 = nn.Linear(4, 3, rng=0, dtype=np.float64)
    names = [n for n, _ in lin2.named_parameters()]
    assert gradcheck(lambda x, *ps: functional_call(lin2, dict(zip(names, ps)), x),
                     [x] + [p.data for p in lin2.parameters()])


def test_embedding_init_lookup_sparse_grad():
    emb = nn.Embedding(20000, 50, rng=0)
    w = emb.weight.numpy()
    assert w.shape == (20000, 50) and w.dtype == np.float32
    # N(0, 1): mean within 5 standard errors, std within 1%
    assert abs(w.mean()) < 5 / math.sqrt(w.size)
    assert abs(w.std() - 1) < 0.01
    ids = np.array([[3, 7, 3], [0, 19999, 7]])
    out = emb(ids)
    assert out.shape == (2, 3, 50)
    np.testing.assert_array_equal(out.data, w[ids])
    gout = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    out.backward(gout)
    g = emb.weight._grad
    assert type(g) is RowSparse
    assert g.values.shape[0] <= ids.size                 # never a dense (20000, 50) array
    dense = np.zeros_like(w)
    np.add.at(dense, ids.reshape(-1), gout.reshape(-1, 50))
    np.testing.assert_allclose(g.coalesce().to_dense(), dense, rtol=1e-6)


def test_embedding_padding_idx():
    emb = nn.Embedding(6, 3, padding_idx=-1, rng=0)
    assert emb.padding_idx == 5
    np.testing.assert_array_equal(emb.weight.data[5], 0)
    emb.weight.data[5] = 2.0                           # its value is still looked up...
    ids = np.array([5, 1, 5, 2])
    out = emb(ids)
    np.testing.assert_array_equal(out.data[0], 2.0)
    (out * out).sum().backward()
    dense = emb.weight.grad.numpy()
    np.testing.assert_array_equal(dense[5], 0)         # ... but gets no gradient
    np.testing.assert_allclose(dense[1], 2 * emb.weight.data[1])
    with pytest.raises(ValueError, match=r"padding_idx must be an integer in \[-6, 6\)"):
        nn.Embedding(6, 3, padding_idx=6)


def test_embedding_from_pretrained():
    vecs = np.arange(12, dtype=np.float64).reshape(4, 3)
    frozen = nn.Embedding.from_pretrained(vecs)
    assert not frozen.weight.requires_grad and frozen.weight.dtype == np.float64
    np.testing.assert_array_equal(frozen(np.array([2])).data, vecs[[2]])
    assert not frozen(np.array([2])).requires_grad
    vecs[0, 0] = 99                                    # a copy was taken
    assert frozen.weight.numpy()[0, 0] == 0
    trainable = nn.Embedding.from_pretrained(vecs, freeze=False, padding_idx=0, dtype=np.float32)
    assert trainable.weight.requires_grad and trainable.weight.dtype == np.float32
    assert trainable.weight.numpy()[0, 0] == 99           # the padding row keeps its pretrained value
    with pytest.raises(ValueError, match=r"must be 2-D .* got shape \(3,\)"):
        nn.Embedding.from_pretrained(np.zeros(3))


def test_dropout():
    x = dn.tensor(np.ones((200, 100)), requires_grad=True)
    d = nn.Dropout(0.25, rng=0)
    y = d(x)
    kept = y.numpy() != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y.data[kept], 1 / 0.75, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, y.data)   # gradient = mask / (1 - p)
    # same seed, same masks; a shared Generator advances
    np.testing.assert_array_equal(nn.Dropout(0.25, rng=0)(x).data, y.data)
    gen = np.random.default_rng(7)
    d1, d2 = nn.Dropout(0.5, rng=gen), nn.Dropout(0.5, rng=gen)
    assert d1.rng is gen and not np.array_equal(d1(x).data, d2(x).data)
    d.eval()
    assert d(x) is x
    assert np.all(nn.Dropout(1.0, rng=0)(x).numpy() == 0)
    assert nn.Dropout(0.0)(x) is x
    with pytest.raises(ValueError, match=r"Dropout: p must be a probability in \[0, 1\], got 1.5"):
        nn.Dropout(1.5)


def test_activations():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    np.testing.assert_allclose(nn.Tanh()(x).data, np.tanh(x), rtol=1e-6)
    np.testing.assert_array_equal(nn.ReLU()(x).data, np.maximum(x, 0))
    np.testing.assert_allclose(nn.Sigmoid()(x).data, 1 / (1 + np.exp(-x)), rtol=1e-6)
    assert nn.Identity()(x) is x


def test_functional_call_restores_on_error():
    lin = nn.Linear(2, 2, rng=0)
    w = lin.weight
    with pytest.raises(KeyError, match="has no parameter 'nope'"):
        functional_call(lin, {"weight": dn.zeros(2, 2), "nope": dn.zeros(1)}, np.ones((1, 2), np.float32))
    assert lin.weight is w and list(lin.parameters())[0] is w
    out = functional_call(lin, {"bias": dn.zeros(2)}, np.zeros((1, 2), np.float32))
    np.testing.assert_array_equal(out.data, 0)


def test_functional_dropout_and_embedding_take_torchs_order():
    F = nn.functional
    x = np.ones((100, 100), np.float32)
    dn.manual_seed(1)
    a = F.dropout(x, 0.5, True).numpy()
    b = F.dropout(x, 0.5, True).numpy()
    assert abs((a == 0).mean() - 0.5) < 0.02 and not np.array_equal(a, b)   # the default generator advances
    dn.manual_seed(1)
    np.testing.assert_array_equal(F.dropout(x, 0.5, True).data, a)
    assert F.dropout(x, 0.5, False) is x                                     # the third argument is training
    np.testing.assert_array_equal(F.dropout(x, 0.5, generator=3).data, F.dropout(x, 0.5, generator=3).data)
    with pytest.raises(TypeError, match="dropout: training must be a bool"):
        F.dropout(x, 0.5, np.random.default_rng(0))
    with pytest.raises(TypeError, match="dropout: inplace=True writes into the input, which must be a dynnets Tensor"):
        F.dropout(x, 0.5, True, True)
    w = dn.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    np.testing.assert_array_equal(F.embedding(np.array([3, 0]), w).data, w.data[[3, 0]])
    with pytest.raises(TypeError, match=r"embedding: input must hold integer ids \(torch's order"):
        F.embedding(w, np.array([3, 0]))
    with pytest.raises(ValueError, match="scale_grad_by_freq=True is not supported"):
        F.embedding(np.array([1]), w, scale_grad_by_freq=True)


def test_layer_input_dtype_must_be_the_layers():
    from dynnets.autograd.primitives import DTypeError
    for layer, x in ((nn.Linear(3, 2, rng=0), np.ones((2, 3), np.int64)),
                     (nn.Linear(3, 2, dtype=np.float64, rng=0), np.ones((2, 3), np.float32)),
                     (nn.RNNCell(3, 2, rng=0), np.ones((2, 3))),
                     (nn.GRU(3, 2, rng=0), [np.ones((4, 3), np.float64)])):
        with pytest.raises(DTypeError, match=f"{type(layer).__name__}: input has dtype"):
            layer(x)


def test_the_layers_module_still_offers_every_layer_after_its_split():
    """Issue 24 split nn/layers.py by kind (linear, dropout, flatten,
    activation, container, normalization, distance): ``dynnets.nn.layers``
    keeps every name it defined, as the same objects, with the same
    ``__all__``; and a model pickled under the old path loads."""
    import pickle

    from dynnets.nn import layers
    names = ["Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "Identity", "Tanh", "ReLU", "Sigmoid",
             "GELU", "LeakyReLU", "Flatten", "Unflatten", "Softmax", "LogSoftmax", "LayerNorm", "ModuleDict",
             "ParameterList", "ParameterDict", "Softplus", "ELU", "SELU", "SiLU", "Mish", "Hardtanh", "ReLU6",
             "Softsign", "LogSigmoid", "CosineSimilarity", "PairwiseDistance", "BatchNorm1d"]
    for n in names:
        assert getattr(layers, n) is getattr(nn, n), n
    assert layers.__all__ == ["Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "Identity", "Tanh",
                              "ReLU", "Sigmoid", "as_generator", "GELU", "LeakyReLU", "Flatten", "Unflatten",
                              "Softmax", "LogSoftmax", "LayerNorm"]
    for helper in ("as_generator", "float_dtype", "positive_int", "uniform_", "check_device", "check_float_input"):
        assert callable(getattr(layers, helper)), helper
    assert pickle.loads(b"cdynnets.nn.layers\nSequential\n.") is nn.Sequential
    lin = nn.Linear(3, 2, rng=0)
    old = pickle.dumps(lin, protocol=0).replace(b"dynnets.nn.linear", b"dynnets.nn.layers")
    assert b"dynnets.nn.layers" in old
    back = pickle.loads(old)
    assert type(back) is nn.Linear and np.array_equal(back.weight.numpy(), lin.weight.numpy())
