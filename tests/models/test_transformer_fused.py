"""The packed encoder layer's fused primitives (issue 25 §3): fewer
dispatches per layer, the same function eagerly, in a static graph and
traced."""
import collections

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as ds
from dynnets.autograd.primitives import PRIMITIVES
from dynnets.models.transformer import TransformerEncoder

E, H, FF = 8, 2, 12
LENS = [3, 1, 5, 2]


@pytest.fixture
def calls(monkeypatch):
    """Counts each primitive's forward calls."""
    seen = collections.Counter()
    for prim in PRIMITIVES.values():
        def impl(*a, _f=prim.impl, _n=prim.name, **k):
            seen[_n] += 1
            return _f(*a, **k)
        monkeypatch.setattr(prim, "impl", impl)
    return seen


def _data():
    rng = np.random.default_rng(0)
    off = dn.ragged_offsets(LENS)
    return off, rng.standard_normal((off[-1], E))


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_packed_layer_is_seven_primitives(calls, mode):
    # was 13: linear and three slices for q/k/v, ragged_attention, out_proj, add and
    # layer_norm twice, linear1 and relu, linear2 (and dropout calls at p = 0)
    enc = TransformerEncoder(E, H, 1, FF, dropout=0.1, seed=0, dtype=np.float64)
    off, X = _data()
    x = dn.tensor(X, requires_grad=True)
    if mode == "eval":
        enc.eval()
        with dn.no_grad():
            enc.forward_packed(x, off)
    else:
        enc.layers[0].dropout.p = 0.0            # p = 0 in training: no dropout op at all
        y = enc.forward_packed(x, off)
    assert dict(calls) == {"linear_split": 1, "ragged_attention": 1, "linear": 2, "add_layer_norm": 2,
                           "linear_act": 1}
    if mode == "train":
        y.sum().backward()
        assert np.isfinite(x.grad.numpy()).all()


def test_dropout_still_applies_in_training(calls):
    enc = TransformerEncoder(E, H, 1, FF, dropout=0.5, seed=0, dtype=np.float64)
    off, X = _data()
    enc.train()
    y = enc.forward_packed(dn.tensor(X), off).numpy()
    assert calls["mul"] == 3              # dropout masks in torch's three places: attention, feed-forward inner and out
    enc.eval()
    with dn.no_grad():
        assert not np.allclose(enc.forward_packed(dn.tensor(X), off).numpy(), y)


def _fused(x, w3, b3, w1, b1, g, bt, act):
    q, k, v = dn.linear_split(x, w3, b3, chunks=3)
    h = dn.linear_act(q * k + v, w1, b1, activation=act)
    return dn.add_layer_norm(x, h, g, bt, eps=1e-5)


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_fused_ops_agree_eager_static_and_traced(act):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4))
    params = [rng.standard_normal(s) for s in ((12, 4), (12,), (4, 4), (4,), (4,), (4,))]
    ts = [dn.tensor(p, requires_grad=True) for p in params]
    xt = dn.tensor(x, requires_grad=True)
    y = _fused(xt, *ts, act)
    (y * y).sum().backward()
    want = [xt.grad.numpy()] + [t.grad.numpy() for t in ts]
    # the plain-op composition it replaces
    q, k, v = (dn.linear(x, params[0], params[1])[:, i * 4:(i + 1) * 4] for i in range(3))
    h = dn.linear(q * k + v, params[2], params[3])
    h = dn.relu(h) if act == "relu" else dn.gelu(h)
    ref = dn.nn.functional.layer_norm(x + h, (4,), params[4], params[5]).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)

    g = ds.Graph()
    with g.as_default():
        phs = [ds.placeholder(np.float64, [None, 4])] + [ds.placeholder(np.float64, p.shape) for p in params]
        out = _fused(*phs, act)
        grads = ds.gradients(dn.sum(out * out), phs)
    with ds.Session(graph=g) as sess:
        got = sess.run([out] + grads, dict(zip(phs, [x] + params)))
    np.testing.assert_allclose(got[0], y.numpy(), rtol=1e-12, atol=1e-12)
    for a, b in zip(got[1:], want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

    traced = ds.trace(lambda *a: _fused(*a, act))
    np.testing.assert_allclose(traced(x, *params).numpy(), y.numpy(), rtol=1e-12, atol=1e-12)


def test_fused_ops_batch_under_autobatch():
    rng = np.random.default_rng(2)
    w2, b2 = rng.standard_normal((6, 3)), rng.standard_normal(6)
    w1, b1 = rng.standard_normal((3, 3)), rng.standard_normal(3)
    gam, bet = rng.standard_normal(3), rng.standard_normal(3)
    xs = [rng.standard_normal((n, 3)) for n in (1, 4, 2)]

    def one(x):
        a, b = dn.linear_split(x, w2, b2, chunks=2)
        h = dn.linear_act(a * b, w1, b1, activation="relu")
        return dn.add_layer_norm(a, h, gam, bet)

    eager = [one(dn.tensor(x)).numpy() for x in xs]
    with dn.autobatch():
        got = [t.numpy() for t in [one(dn.tensor(x)) for x in xs]]
    for a, b in zip(got, eager):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
