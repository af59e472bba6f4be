"""Attention's batching rules under ``dynnets.autobatch()`` (issue 25):
per-sentence ``ragged_attention`` calls of any lengths join into one call
over shifted offsets (the ``"ragged"`` rule kind), and ``attention_probs``
with a per-instance mask stacks same-shape instances."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd import primitives as P
from dynnets.models.transformer import TransformerEncoder

E, H, FF, LAYERS = 8, 2, 12, 2
LENS = [3, 1, 6, 2, 6, 4]                  # a sentence of length 1 and two of the batch maximum


def _grads(enc, x):
    out = {"x": np.array(x.grad.numpy())}
    for name, p in enc.named_parameters():
        out[name] = np.array(p.grad.numpy())
        p.grad = None
    return out


def _run(enc, X, G, off, way):
    x = dn.tensor(X, requires_grad=True)
    if way == "packed":
        y = enc.forward_packed(x, off)
        (y * dn.tensor(G)).sum().backward()
        return y.numpy(), _grads(enc, x), None
    parts = dn.unpack_sequences(x, off)
    gs = np.split(G, off[1:-1])

    def body():
        ys = [enc.forward_sentence(p) for p in parts]
        dn.stack([(y * dn.tensor(g)).sum() for y, g in zip(ys, gs)]).sum().backward()
        return ys
    if way == "autobatch":
        with dn.autobatch() as ab:
            ys = body()
    else:
        ab, ys = None, body()
    return np.concatenate([y.numpy() for y in ys]), _grads(enc, x), ab


def test_autobatched_sentences_equal_eager_sentences_and_packed():
    enc = TransformerEncoder(E, H, LAYERS, FF, seed=5, dtype=np.float64)
    rng = np.random.default_rng(0)
    off = dn.ragged_offsets(LENS)
    X, G = rng.standard_normal((off[-1], E)), rng.standard_normal((off[-1], E))
    y0, g0, _ = _run(enc, X, G, off, "packed")
    for way in ("sentence", "autobatch"):
        y, g, _ = _run(enc, X, G, off, way)
        np.testing.assert_allclose(y, y0, rtol=1e-10, atol=1e-12, err_msg=way)
        assert set(g) == set(g0)
        for name in g0:
            np.testing.assert_allclose(g[name], g0[name], rtol=1e-9, atol=1e-11, err_msg=f"{way}: {name}")


def test_one_ragged_attention_call_per_layer_for_a_minibatch():
    """The count guard: every sentence of a minibatch, of any length, in one
    attention call per layer (main ran one call per sentence: 12 here)."""
    enc = TransformerEncoder(E, H, LAYERS, FF, seed=5, dtype=np.float64)
    rng = np.random.default_rng(1)
    off = dn.ragged_offsets(LENS)
    X, G = rng.standard_normal((off[-1], E)), rng.standard_normal((off[-1], E))
    _, _, ab = _run(enc, X, G, off, "autobatch")
    att = [c for c in ab.calls if c.op == "ragged_attention"]
    assert [(c.size, c.fallback) for c in att] == [(len(LENS), False)] * LAYERS
    assert ab.stats["fallbacks"] == {}


def _attention(q, k, v, off):
    return dn.ragged_attention(q, k, v, off, num_heads=H)


def test_ragged_rule_joins_packed_instances_with_empty_sentences():
    """Instances that are themselves packed (several sentences, an empty one)
    join too: each instance's offsets shifted by the rows before it."""
    rng = np.random.default_rng(2)
    offs = [np.array([0, 2, 2, 5]), np.array([0, 1]), np.array([0, 0, 3, 7])]
    qkv = [[rng.standard_normal((o[-1], E)) for _ in range(3)] for o in offs]
    cot = [rng.standard_normal((o[-1], E)) for o in offs]

    def run():
        ts = [[dn.tensor(a, requires_grad=True) for a in group] for group in qkv]
        outs = [_attention(*t, o)[0] for t, o in zip(ts, offs)]
        dn.stack([(y * dn.tensor(c)).sum() for y, c in zip(outs, cot)]).sum().backward()
        return [y.numpy() for y in outs], [[t.grad.numpy() for t in group] for group in ts]
    y0, g0 = run()
    with dn.autobatch() as ab:
        y1, g1 = run()
    assert [(c.size, c.fallback) for c in ab.calls if c.op == "ragged_attention"] == [(3, False)]
    for a, b in zip(y1, y0):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    for ga, gb in zip(g1, g0):
        for a, b in zip(ga, gb):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_ragged_rule_names_the_bad_offsets_of_one_instance():
    rng = np.random.default_rng(3)
    good = [dn.tensor(rng.standard_normal((4, E))) for _ in range(3)]
    bad = [dn.tensor(rng.standard_normal((3, E))) for _ in range(3)]
    with pytest.raises(P.ShapeError, match=r"ragged_attention: offsets must start at 0 and end at the number of "
                                           r"packed rows 3, got offsets\[0\]=0, offsets\[-1\]=4"):
        with dn.autobatch():
            a = _attention(*good, np.array([0, 4]))[0]
            b = _attention(*bad, np.array([0, 4]))[0]
            (a.sum() + b.sum()).item()


def test_attention_probs_with_a_per_instance_mask_stacks():
    """MultiheadAttention per sentence with its own key_padding_mask (an
    additive (1, 1, 1, S) mask): same-shape sentences in one attention_probs
    call, as eager; main ran one call per sentence when a mask was given."""
    rng = np.random.default_rng(4)
    mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=np.float64, rng=1)
    xs = [rng.standard_normal((1, 5, E)) for _ in range(4)]
    pads = [np.arange(5)[None, :] >= n for n in (5, 3, 4, 1)]
    cots = [rng.standard_normal((1, 5, E)) for _ in range(4)]

    def run():
        total = 0
        for x, m, c in zip(xs, pads, cots):
            t = dn.tensor(x)
            total = total + (mha(t, t, t, key_padding_mask=m, need_weights=False)[0] * c).sum()
        return total
    params = list(mha.parameters())
    l0 = run()
    l0.backward()
    g0 = [np.array(p.grad.numpy()) for p in params]
    for p in params:
        p.grad = None
    with dn.autobatch() as ab:
        l1 = run()
    l1.backward()
    np.testing.assert_allclose(l1.item(), l0.item(), rtol=1e-12)
    for p, g in zip(params, g0):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-10, atol=1e-12)
    calls = [(c.op, c.size, c.fallback) for c in ab.calls if c.op.startswith("attention_")]
    assert calls == [("attention_probs", 4, False), ("attention_apply", 4, False)]


def test_attention_probs_with_a_shared_lower_rank_mask_runs_alone_and_right():
    """A 2-D attn_mask (L, S) is shared by instances: no stacking, eager's numbers."""
    rng = np.random.default_rng(5)
    q = [dn.tensor(rng.standard_normal((1, 3, E))) for _ in range(2)]
    mask = np.triu(np.full((3, 3), -np.inf), 1)
    eager = [P.attention_probs_p.impl(t.numpy(), t.numpy(), mask, num_heads=H, scale=0.5) for t in q]
    with dn.autobatch() as ab:
        out = [dn.autograd.engine.bind(P.attention_probs_p, t, t, mask, num_heads=H, scale=0.5) for t in q]
        vals = [o.numpy() for o in out]
    for a, b in zip(vals, eager):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert [c.fallback for c in ab.calls if c.op == "attention_probs"] == [True, True]
