"""The Transformer encoder four ways on the same weights (packed/ragged,
padded eager and static, per sentence eager and under autobatch), against
torch, and the ``transformer`` model kind."""
import numpy as np
import pytest
import torch

import dynnets as dn
from dynnets.models.transformer import StaticEncoderGraph, TransformerEncoder, pad_batch

E, H, FF = 8, 2, 12
LENS = [3, 1, 5, 2, 5]                     # a sentence of length 1 and two of the batch maximum


def _encoder(activation="relu"):
    return TransformerEncoder(E, H, 2, FF, activation=activation, seed=3, dtype=np.float64)


def _data():
    rng = np.random.default_rng(0)
    off = dn.ragged_offsets(LENS)
    return off, rng.standard_normal((off[-1], E)), rng.standard_normal((off[-1], E))


def _grads(enc, x):
    out = {"x": np.array(x.grad.numpy())}
    for name, p in enc.named_parameters():
        out[name] = np.array(p.grad.numpy())
        p.grad = None
    return out


def _packed(enc, X, G, off):
    x = dn.tensor(X, requires_grad=True)
    y = enc.forward_packed(x, off)
    (y * dn.tensor(G)).sum().backward()
    return y.numpy(), _grads(enc, x)


def _padded(enc, X, G, off, max_len=None):
    xp, mask = pad_batch(X, off, max_len)
    gp, _ = pad_batch(G, off, max_len)          # zero at padding: padded outputs do not enter the loss
    x = dn.tensor(xp, requires_grad=True)
    y = enc.forward_padded(x, mask)
    (y * dn.tensor(gp)).sum().backward()
    g = _grads(enc, x)
    assert np.all(g["x"][mask] == 0)            # nothing real depends on a padded input
    g["x"] = g["x"][~mask]
    return y.numpy()[~mask], g


def _sentences(enc, X, G, off, autobatch=False):
    x = dn.tensor(X, requires_grad=True)
    parts = dn.unpack_sequences(x, off)
    if autobatch:
        with dn.autobatch():
            ys = [enc.forward_sentence(p) for p in parts]
            loss = dn.stack([(y * dn.tensor(g)).sum() for y, g in zip(ys, np.split(G, off[1:-1]))]).sum()
            loss.backward()
    else:
        ys = [enc.forward_sentence(p) for p in parts]
        dn.stack([(y * dn.tensor(g)).sum() for y, g in zip(ys, np.split(G, off[1:-1]))]).sum().backward()
    return np.concatenate([y.numpy() for y in ys]), _grads(enc, x)


def _static(enc, X, G, off, max_len=None):
    g = StaticEncoderGraph(enc)
    tf = g.tf
    xp, mask = pad_batch(X, off, max_len)
    gp, _ = pad_batch(G, off, max_len)
    with g.graph.as_default():
        gph = tf.placeholder(np.float64, [None, None, E])
        names = list(g.variables)
        grads = tf.gradients(tf.reduce_sum(g.out * gph), [g.x] + [g.variables[n] for n in names])
    with g.session() as sess:
        y, *gs = sess.run([g.out] + grads, {g.x: xp, g.lengths: np.diff(off).astype(np.int32), gph: gp})
    out = dict(zip(names, gs[1:]))
    out["x"] = gs[0][~mask]
    return y[~mask], out


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_four_ways_give_the_same_outputs_and_gradients(activation):
    enc = _encoder(activation)
    off, X, G = _data()
    y0, g0 = _packed(enc, X, G, off)
    ways = {"padded-batch-max": _padded(enc, X, G, off), "padded-global-max": _padded(enc, X, G, off, max_len=9),
            "sentence": _sentences(enc, X, G, off), "autobatch": _sentences(enc, X, G, off, autobatch=True)}
    ways["static-batch-max"] = _static(enc, X, G, off)
    ways["static-global-max"] = _static(enc, X, G, off, max_len=9)
    for way, (y, g) in ways.items():
        np.testing.assert_allclose(y, y0, rtol=1e-10, atol=1e-12, err_msg=way)
        assert set(g) == set(g0), way
        for name in g0:
            np.testing.assert_allclose(g[name], g0[name], rtol=1e-9, atol=1e-11, err_msg=f"{way}: {name}")


def test_packed_matches_torch_transformer_encoder_with_mask():
    enc = _encoder()
    layer = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True, dtype=torch.float64)
    tenc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    enc.load_torch_state_dict(tenc.state_dict())
    off, X, G = _data()
    y, g = _packed(enc, X, G, off)
    xp, mask = pad_batch(X, off)
    gp, _ = pad_batch(G, off)
    xt = torch.tensor(xp, requires_grad=True)
    yt = tenc(xt, src_key_padding_mask=torch.tensor(mask))
    (yt * torch.tensor(gp)).sum().backward()
    np.testing.assert_allclose(y, yt.detach().numpy()[~mask], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g["x"], xt.grad.numpy()[~mask], rtol=1e-9, atol=1e-11)
    for name, p in tenc.named_parameters():
        np.testing.assert_allclose(g[name], p.grad.numpy(), rtol=1e-9, atol=1e-11, err_msg=name)


def test_a_sentence_does_not_see_its_neighbours():
    enc = _encoder()
    off, X, _ = _data()
    y = enc.forward_packed(dn.tensor(X), off).numpy()
    X2 = X.copy()
    X2[off[2]:off[3]] += 1.0                       # change the third sentence only
    y2 = enc.forward_packed(dn.tensor(X2), off).numpy()
    changed = np.abs(y2 - y).max(1) > 0
    assert changed[off[2]:off[3]].all() and not changed[:off[2]].any() and not changed[off[3]:].any()


# --------------------------------------------------------------------------
# the ``transformer`` model kind
# --------------------------------------------------------------------------

def _examples():
    from dynnets.models.common import SentenceExample
    rng = np.random.default_rng(1)
    return [SentenceExample(rng.integers(0, 30, n), int(rng.integers(5))) for n in (4, 1, 7, 2, 7)]


def _model_run(execution, pooling, max_len=None):
    from dynnets.models import build_model
    m = build_model("transformer", 30, embed_dim=8, hidden=12, nhead=2, dropout=0.0, pooling=pooling,
                    execution=execution, max_len=max_len, dtype="float64", seed=4)
    b = m.collate(_examples())
    v = m.sentence_vectors(b).numpy()
    m.loss(b).backward()
    g = {n: np.array(p.grad.to_dense() if hasattr(p.grad, "to_dense") else p.grad.numpy())
         for n, p in m.named_parameters()}
    return v, g


@pytest.mark.parametrize("pooling", ["mean", "first"])
@pytest.mark.parametrize("execution, max_len", [("padded", None), ("padded", 10), ("sentence", None),
                                                ("autobatch", None)])
def test_model_executions_agree_with_packed(execution, max_len, pooling):
    v0, g0 = _model_run("packed", pooling)
    v, g = _model_run(execution, pooling, max_len)
    np.testing.assert_allclose(v, v0, rtol=1e-10, atol=1e-12)
    for name in g0:
        np.testing.assert_allclose(g[name], g0[name], rtol=1e-9, atol=1e-11, err_msg=name)


def test_model_bad_arguments_are_named():
    from dynnets.models.transformer import TransformerClassifier
    with pytest.raises(ValueError, match="TransformerClassifier: embed_dim=10 .* not divisible by nhead=4"):
        TransformerClassifier(5, embed_dim=10)
    with pytest.raises(ValueError, match="TransformerClassifier: pooling must be 'mean' or 'first'"):
        TransformerClassifier(5, embed_dim=8, pooling="max")
    with pytest.raises(ValueError, match="TransformerClassifier: execution must be one of"):
        TransformerClassifier(5, embed_dim=8, execution="ragged")
