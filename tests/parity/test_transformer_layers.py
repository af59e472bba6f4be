"""Attention and Transformer layers against PyTorch 2.13 (issue 25), in
float64: ``F.softmax`` under torch's mask habits, ``F.gelu``,
``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer`` / ``nn.TransformerEncoder`` and the
positional encodings: values and the gradients of the inputs and of every
parameter, masks included (padding, a sentence of length 1 and one of the
batch maximum), a torch ``state_dict`` loaded unchanged; eagerly, in static
graphs with unknown batch and length, and traced.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.nn as dnn  # noqa: E402
import dynnets.nn.functional as DF  # noqa: E402
import dynnets.static as ds  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

_conv = importlib.util.spec_from_file_location("_parity_conv", os.path.join(os.path.dirname(__file__),
                                                                             "test_conv_layers.py"))
_CONV = importlib.util.module_from_spec(_conv)
_conv.loader.exec_module(_CONV)
module_check = _CONV.module_check

TF = torch.nn.functional
MODES = ("eager", "static", "static-unknown")


def _x(*shape, seed=0):
    return C.draw(np.random.default_rng(seed), shape, np.float64)


# lengths of a padded batch: one sentence of length 1, one of the batch maximum, one between
LENGTHS = [1, 5, 3]


def _padding_mask(lengths, t=None):
    t = t or max(lengths)
    return np.arange(t)[None, :] >= np.asarray(lengths)[:, None]        # True = padding, as torch


# --------------------------------------------------------------------------
# softmax with torch's mask habits, gelu
# --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_softmax_with_additive_minus_inf_mask(mode):
    x = _x(3, 5)
    mask = np.where(_padding_mask(LENGTHS), -np.inf, 0.0)
    C.check(lambda x: DF.softmax(x + mask, dim=-1), lambda x: TF.softmax(x + torch.tensor(mask), dim=-1), [x],
            diff=(0,), mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_softmax_with_masked_fill(mode):
    x = _x(3, 5)
    pad = _padding_mask(LENGTHS)
    C.check(lambda x: DF.softmax(x.masked_fill(pad, float("-inf")), dim=-1),
            lambda x: TF.softmax(x.masked_fill(torch.tensor(pad), float("-inf")), dim=-1), [x], diff=(0,),
            mode=mode)


def test_softmax_of_a_fully_masked_row_is_nan_as_torch():
    x = _x(2, 4)
    mask = np.array([[0.0, -np.inf, 0.0, 0.0], [-np.inf] * 4])
    got = np.asarray(DF.softmax(dn.tensor(x) + mask, dim=-1))
    want = TF.softmax(torch.tensor(x) + torch.tensor(mask), dim=-1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[1]).all()
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("mode", MODES)
def test_gelu(approximate, mode):
    C.check(lambda x: DF.gelu(x, approximate=approximate), lambda x: TF.gelu(x, approximate=approximate),
            [_x(3, 4) * 3], diff=(0,), mode=mode)
    if mode == "eager":
        C.check(dnn.GELU(approximate), torch.nn.GELU(approximate), [_x(2, 5)], diff=(0,))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_primitive(affine, mode):
    x, w, b = _x(2, 3, 6), _x(6, seed=1), _x(6, seed=2)
    ins = [x] + ([w] if affine in ("both", "weight") else []) + ([b] if affine in ("both", "bias") else [])

    def split(args, F):
        wt = args[1] if affine in ("both", "weight") else None
        bt = args[-1] if affine in ("both", "bias") else None
        return wt, bt
    C.check(lambda *a: DF.layer_norm(a[0], (6,), *split(a, DF), eps=1e-4),
            lambda *a: TF.layer_norm(a[0], (6,), *split(a, TF), eps=1e-4), ins, diff=tuple(range(len(ins))),
            mode=mode, unknown=[(True, True, False)] + [None] * (len(ins) - 1))


def test_layer_norm_module_state_dict_and_gradients():
    tm = torch.nn.LayerNorm((3, 4), eps=1e-6, dtype=torch.float64)
    with torch.no_grad():
        tm.weight.normal_()
        tm.bias.normal_()
    module_check(dnn.LayerNorm((3, 4), eps=1e-6, dtype=np.float64), tm, [_x(2, 3, 4)])


# --------------------------------------------------------------------------
# scaled_dot_product_attention
# --------------------------------------------------------------------------

SDPA = [
    ("plain", {}),
    ("scale", {"scale": 0.3}),
    ("causal", {"is_causal": True}),
    ("bool-mask", {"attn_mask": "bool"}),
    ("float-mask", {"attn_mask": "float"}),
    ("fully-masked-row", {"attn_mask": "empty-row"}),
]


def _sdpa_mask(kind, lq, lk):
    if kind == "bool":
        m = np.random.default_rng(3).random((lq, lk)) > 0.3
        m[:, 0] = True
        return m
    if kind == "float":
        return _x(lq, lk, seed=4)
    m = np.ones((lq, lk), dtype=bool)
    m[1] = False                       # query 1 sees nothing: torch's safe softmax gives 0
    return m


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sid,kw", SDPA, ids=[s[0] for s in SDPA])
def test_scaled_dot_product_attention(sid, kw, mode):
    q, k, v = _x(2, 3, 4, 6), _x(2, 3, 4 if kw.get("is_causal") else 5, 6, seed=1), _x(2, 3, 5, 2, seed=2)
    if kw.get("is_causal"):
        v = v[:, :, :4]
    kw = dict(kw)
    if "attn_mask" in kw:
        m = _sdpa_mask(kw["attn_mask"], 4, 5)
        kw["attn_mask"] = m
        tkw = dict(kw, attn_mask=torch.tensor(m))
    else:
        tkw = kw
    known_len = kw.get("is_causal", False)
    C.check(lambda q, k, v: DF.scaled_dot_product_attention(q, k, v, **kw),
            lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **tkw), [q, k, v], diff=(0, 1, 2), mode=mode,
            unknown=[(True, True, not known_len, False)] * 3)


def test_scaled_dot_product_attention_errors():
    q = dn.tensor(_x(1, 3, 4))
    with pytest.raises(ValueError, match="scaled_dot_product_attention: .*attn_mask should not be set when "
                                         "is_causal=True"):
        DF.scaled_dot_product_attention(q, q, q, attn_mask=np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(ValueError, match="attention_probs: query.shape=\\(1, 3, 4\\) and key.shape=\\(1, 3, 5\\)"):
        DF.scaled_dot_product_attention(q, dn.tensor(_x(1, 3, 5)), q)


# --------------------------------------------------------------------------
# MultiheadAttention
# --------------------------------------------------------------------------

def _mha_pair(e=8, h=2, seed=0, **kw):
    torch.manual_seed(seed)
    tm = torch.nn.MultiheadAttention(e, h, dtype=torch.float64, **kw)
    with torch.no_grad():                  # non-zero biases, so their gradients and placement are tested
        for p in tm.parameters():
            if p.ndim == 1:
                p.normal_()
    dm = dnn.MultiheadAttention(e, h, dtype=np.float64, **kw)
    assert list(dm.state_dict()) == list(tm.state_dict())
    assert {k: tuple(v.shape) for k, v in dm.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    return dm, tm


MHA = [  # (id, constructor kwargs, forward kwargs builder, self-attention)
    ("self", {}, {}, True),
    ("batch_first", {"batch_first": True}, {}, True),
    ("no-bias", {"bias": False}, {}, True),
    ("cross", {}, {}, False),
    ("key-padding", {}, {"key_padding_mask": "pad"}, True),
    ("key-padding-float", {"batch_first": True}, {"key_padding_mask": "pad-float"}, True),
    ("attn-mask-bool", {}, {"attn_mask": "causal-bool"}, True),
    ("attn-mask-float", {}, {"attn_mask": "float"}, True),
    ("attn-mask-3d", {"batch_first": True}, {"attn_mask": "3d"}, True),
    ("both-masks", {"batch_first": True}, {"attn_mask": "causal-bool", "key_padding_mask": "pad"}, True),
    ("per-head-weights", {}, {"average_attn_weights": False, "key_padding_mask": "pad"}, True),
    ("no-weights", {}, {"need_weights": False, "key_padding_mask": "pad"}, True),
    ("causal-hint", {}, {"attn_mask": "causal-bool", "is_causal": True, "need_weights": False}, True),
]


def _mha_kwargs(spec, n, t, h):
    out = {}
    for k, v in spec.items():
        if v == "pad":
            out[k] = _padding_mask(LENGTHS[:n], t)
        elif v == "pad-float":
            out[k] = np.where(_padding_mask(LENGTHS[:n], t), -np.inf, _x(n, t, seed=9))
        elif v == "causal-bool":
            out[k] = np.triu(np.ones((t, t), dtype=bool), 1)
        elif v == "float":
            out[k] = _x(t, t, seed=8)
        elif v == "3d":
            out[k] = _x(n * h, t, t, seed=7)
        else:
            out[k] = v
    return out


@pytest.mark.parametrize("mid,ckw,fspec,self_attn", MHA, ids=[m[0] for m in MHA])
def test_multihead_attention(mid, ckw, fspec, self_attn):
    n, t, e, h = 3, 5, 8, 2
    dm, tm = _mha_pair(e, h, **ckw)
    fkw = _mha_kwargs(fspec, n, t, h)
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in fkw.items()}
    shape = (n, t, e) if ckw.get("batch_first") else (t, n, e)
    x = _x(*shape)
    if self_attn:
        call = lambda m, x: m(x, x, x, **fkw)                                  # noqa: E731
        tcall = lambda m, x: m(x, x, x, **tkw)                                 # noqa: E731
        ins = [x]
    else:
        kv = (n, 4, e) if ckw.get("batch_first") else (4, n, e)
        call = lambda m, q, k, v: m(q, k, v, **fkw)                            # noqa: E731
        tcall = lambda m, q, k, v: m(q, k, v, **tkw)                           # noqa: E731
        ins = [x, _x(*kv, seed=1), _x(*kv, seed=2)]
    out = module_check(dm, tm, ins, diff=tuple(range(len(ins))), call=call, tcall=tcall)
    if fkw.get("need_weights") is False:
        assert out[1] is None


def test_multihead_attention_unbatched_and_eval_fast_path():
    dm, tm = _mha_pair(8, 4)
    x = _x(5, 8)
    kpm = np.array([False, False, False, True, True])
    module_check(dm, tm, [x], call=lambda m, x: m(x, x, x, key_padding_mask=kpm),
                 tcall=lambda m, x: m(x, x, x, key_padding_mask=torch.tensor(kpm)))
    # evaluation mode (torch's fast path) gives the same values
    dm.eval()
    tm.eval()
    xb = _x(2, 5, 8, seed=3)
    with torch.no_grad():
        want = tm(*(torch.tensor(xb),) * 3)[0].numpy()
    C.assert_close(np.asarray(dm(*(dn.tensor(xb),) * 3)[0]), want, np.float64, "eval")


def test_multihead_attention_fully_masked_query_as_torch():
    """need_weights=True: NaN (softmax of -inf); need_weights=False: torch's SDPA path, 0 attention."""
    dm, tm = _mha_pair(4, 2)
    dm.load_state_dict(tm.state_dict())
    x = _x(3, 1, 4)
    am = np.zeros((3, 3), dtype=bool)
    am[1] = True
    for nw in (True, False):
        got = np.asarray(dm(*(dn.tensor(x),) * 3, attn_mask=am, need_weights=nw)[0])
        with torch.no_grad():
            want = tm(*(torch.tensor(x),) * 3, attn_mask=torch.tensor(am), need_weights=nw)[0].numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-10, atol=1e-12)


def test_multihead_attention_errors():
    with pytest.raises(ValueError, match="MultiheadAttention: embed_dim must be divisible by num_heads"):
        dnn.MultiheadAttention(6, 4)
    m = dnn.MultiheadAttention(4, 2, dtype=np.float64)
    x = dn.tensor(_x(3, 2, 4))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match="MultiheadAttention: was expecting embedding dimension of 4, but got 5"):
        y = dn.tensor(_x(3, 2, 5))
        m(y, y, y)
    with pytest.raises(TypeError, match="MultiheadAttention: key_padding_mask must be bool"):
        m(x, x, x, key_padding_mask=np.zeros((2, 3), np.int64))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_forward_with_a_padding_mask_placeholder(mode, need_weights):
    """torch's functional signature; in static graphs the padded way: placeholders of unknown batch and length
    for the input and the key padding mask, the weights as graph inputs (their gradients checked too)."""
    x, kpm = _x(5, 3, 8), _padding_mask(LENGTHS)
    w, b, ow, ob = _x(24, 8, seed=1) * 0.3, _x(24, seed=2), _x(8, 8, seed=3) * 0.3, _x(8, seed=4)

    def run(F, x, m, w, b, ow, ob):
        out = F.multi_head_attention_forward(x, x, x, 8, 2, w, b, None, None, False, 0.0, ow, ob,
                                             key_padding_mask=m, need_weights=need_weights)
        return out if need_weights else out[0]
    C.check(lambda *a: run(DF, *a), lambda *a: run(TF, *a), [x, kpm, w, b, ow, ob], diff=(0, 2, 3, 4, 5),
            mode=mode, unknown=[(True, True, False), (True, True), None, None, None, None])


def test_multihead_attention_traced_against_eager():
    """A module traced into a static plan (dynnets.static.trace) gives eager's values and parameter gradients."""
    dm = dnn.MultiheadAttention(8, 2, batch_first=True, dtype=np.float64, rng=0)
    x, kpm = _x(3, 5, 8), _padding_mask(LENGTHS)
    cot = _x(3, 5, 8, seed=5)

    def loss(x, m):
        return (dm(x, x, x, key_padding_mask=m)[0] * cot).sum()
    step = ds.trace(loss, grads_of=dm)
    got, grads = step(x, kpm)
    dm.zero_grad()
    want = loss(dn.tensor(x), kpm)
    want.backward()
    C.assert_close(np.asarray(got), np.asarray(want), np.float64, "traced loss")
    for g, (name, p) in zip(grads, dm.named_parameters()):
        C.assert_close(np.asarray(g), np.asarray(p.grad), np.float64, f"traced gradient of {name}")
