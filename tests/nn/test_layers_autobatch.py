"""The issue 25 layers under ``dynnets.autobatch()``: per-sentence code (a
Kim CNN block, a Transformer encoder layer, each sentence its own batch of
one) batched automatically gives eager's loss and gradients, and the new
primitives run through their batching rules (no fallbacks)."""
from __future__ import annotations

import numpy as np

import dynnets as dn
from dynnets import nn
from dynnets.nn import functional as F

LENGTHS = [1, 5, 3, 5, 1, 3]          # repeated lengths: same-signature sentences batch together


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)) if a.size else 0.0


def _same(run, params):
    l0 = run()
    l0.backward()
    g0 = [np.asarray(p.grad).copy() for p in params]
    for p in params:
        p.grad = None
    with dn.autobatch() as ab:
        l1 = run()
        assert isinstance(l1, dn.LazyTensor)
    l1.backward()
    assert _rel(l1.item(), l0.item()) <= 1e-10
    for (name, p), g in zip(params.items() if isinstance(params, dict) else enumerate(params), g0):
        assert _rel(np.asarray(p.grad), g) <= 1e-10, name
    return ab.stats


def test_kim_cnn_block_per_sentence_under_autobatch():
    rng = np.random.default_rng(0)
    convs = nn.ModuleList([nn.Conv1d(6, 4, k, padding=k // 2, dtype=np.float64, rng=k) for k in (2, 3)])
    xs = [rng.standard_normal((1, 6, n)) for n in LENGTHS]
    w = rng.standard_normal(8)

    def run():
        total = 0
        for x in xs:
            feats = dn.cat([F.adaptive_max_pool1d(F.relu(c(dn.tensor(x))), 1).squeeze(2) for c in convs], 1)
            total = total + (feats * w).sum()
        return total
    stats = _same(run, list(convs.parameters()))
    assert not {k: v for k, v in stats["fallbacks"].items() if k in ("conv1d", "pool1d")}, stats["fallbacks"]
    assert stats["batched_calls"] < stats["nodes"]


def test_transformer_encoder_layer_per_sentence_under_autobatch():
    rng = np.random.default_rng(1)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=np.float64, rng=0)
    pos = nn.PositionalEncoding(8, dropout=0.0, max_len=16, batch_first=True, dtype=np.float64)
    xs = [rng.standard_normal((1, n, 8)) for n in LENGTHS]
    cots = [rng.standard_normal((1, n, 8)) for n in LENGTHS]

    def run():
        total = 0
        for x, c in zip(xs, cots):
            total = total + (layer(pos(dn.tensor(x))) * c).sum()
        return total
    stats = _same(run, list(layer.parameters()))
    bad = {k: v for k, v in stats["fallbacks"].items() if k in ("attention_probs", "attention_apply", "layer_norm")}
    assert not bad, stats["fallbacks"]


def test_multihead_attention_padded_batch_matches_per_sentence():
    """A padded batch with key_padding_mask gives each sentence's own (unpadded) result on its real tokens."""
    rng = np.random.default_rng(2)
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=np.float64, rng=1)
    t = max(LENGTHS)
    x = rng.standard_normal((len(LENGTHS), t, 8))
    pad = np.arange(t)[None, :] >= np.asarray(LENGTHS)[:, None]
    batched = np.asarray(mha(*(dn.tensor(x),) * 3, key_padding_mask=pad)[0])
    for i, n in enumerate(LENGTHS):
        xi = dn.tensor(x[i:i + 1, :n])
        np.testing.assert_allclose(batched[i, :n], np.asarray(mha(xi, xi, xi)[0])[0], rtol=1e-10, atol=1e-12)
