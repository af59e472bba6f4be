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
from dynnets.autograd import primitives as P  # noqa: E402
from dynnets.autograd.engine import bind  # noqa: E402

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


# --------------------------------------------------------------------------
# TransformerEncoderLayer / TransformerEncoder
# --------------------------------------------------------------------------

def _randomise(tm):
    """Non-trivial layer-norm weights and biases (torch's ones and zeros would hide a misplaced one)."""
    with torch.no_grad():
        for name, p in tm.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn(p.shape, dtype=p.dtype) * 0.5 + (1.0 if "norm" in name and "weight" in name
                                                                     else 0.0))
    return tm


TEL = [  # (id, constructor kwargs, forward kwargs spec)
    ("post-norm-relu", {}, {}),
    ("pre-norm-gelu", {"norm_first": True, "activation": "gelu"}, {}),
    ("batch-first-padding", {"batch_first": True}, {"src_key_padding_mask": "pad"}),
    ("padding-seq-first", {}, {"src_key_padding_mask": "pad"}),
    ("causal", {"batch_first": True}, {"src_mask": "causal-bool", "is_causal": True}),
    ("float-mask-and-padding", {"norm_first": True}, {"src_mask": "float", "src_key_padding_mask": "pad"}),
    ("no-bias-eps", {"bias": False, "layer_norm_eps": 1e-3}, {}),
    ("callable-activation", {"activation": "tanh-callable", "batch_first": True}, {"src_key_padding_mask": "pad"}),
]


def _tel_kwargs(ckw, lib):
    kw = dict(ckw)
    if kw.get("activation") == "tanh-callable":
        kw["activation"] = torch.tanh if lib == "torch" else dn.tanh
    return kw


@pytest.mark.parametrize("tid,ckw,fspec", TEL, ids=[t[0] for t in TEL])
def test_transformer_encoder_layer(tid, ckw, fspec):
    n, t, e, h = 3, 5, 8, 2
    torch.manual_seed(1)
    tm = _randomise(torch.nn.TransformerEncoderLayer(e, h, 16, dropout=0.0, dtype=torch.float64,
                                                     **_tel_kwargs(ckw, "torch")))
    dm = dnn.TransformerEncoderLayer(e, h, 16, dropout=0.0, dtype=np.float64, **_tel_kwargs(ckw, "dn"))
    assert list(dm.state_dict()) == list(tm.state_dict())
    spec = {k: ("pad" if v == "pad" else v) for k, v in fspec.items()}
    fkw = _mha_kwargs(spec, n, t, h)
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in fkw.items()}
    x = _x(*((n, t, e) if ckw.get("batch_first") else (t, n, e)))
    module_check(dm, tm, [x], call=lambda m, x: m(x, **fkw), tcall=lambda m, x: m(x, **tkw))


@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder(batch_first, norm):
    n, t, e, h = 3, 5, 8, 4
    torch.manual_seed(2)
    tl = _randomise(torch.nn.TransformerEncoderLayer(e, h, 12, dropout=0.0, batch_first=batch_first,
                                                     dtype=torch.float64))
    tm = torch.nn.TransformerEncoder(tl, 2, norm=torch.nn.LayerNorm(e, dtype=torch.float64) if norm else None,
                                     enable_nested_tensor=False)
    with torch.no_grad():                       # the two layers differ (deep copies start equal)
        for p in tm.layers[1].parameters():
            p.add_(torch.randn(p.shape, dtype=p.dtype) * 0.1)
    dl = dnn.TransformerEncoderLayer(e, h, 12, dropout=0.0, batch_first=batch_first, dtype=np.float64)
    dm = dnn.TransformerEncoder(dl, 2, norm=dnn.LayerNorm(e, dtype=np.float64) if norm else None,
                                enable_nested_tensor=False)
    assert list(dm.state_dict()) == list(tm.state_dict())
    pad = _padding_mask(LENGTHS)
    x = _x(*((n, t, e) if batch_first else (t, n, e)))
    module_check(dm, tm, [x], call=lambda m, x: m(x, src_key_padding_mask=pad),
                 tcall=lambda m, x: m(x, src_key_padding_mask=torch.tensor(pad)))


def test_transformer_encoder_layers_are_deep_copies_as_torch():
    layer = dnn.TransformerEncoderLayer(4, 2, 8, dtype=np.float64)
    enc = dnn.TransformerEncoder(layer, 3)
    w = [np.asarray(m.linear1.weight) for m in enc.layers]
    assert all(np.array_equal(w[0], x) for x in w[1:])
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    assert enc.layers[0].linear1.weight is not layer.linear1.weight


@pytest.mark.parametrize("norm", [False, True])
def test_transformer_encoder_eval_fast_path_as_torch(norm):
    """torch's evaluation fast path (nested tensors) returns zeros at padded positions (before the final norm):
    the same here; with gradients recorded torch computes them, as here."""
    torch.manual_seed(3)
    tl = _randomise(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True, dtype=torch.float64))
    tnorm = torch.nn.LayerNorm(8, dtype=torch.float64) if norm else None
    tm = torch.nn.TransformerEncoder(tl, 2, norm=tnorm, enable_nested_tensor=True).eval()
    dm = dnn.TransformerEncoder(dnn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dtype=np.float64), 2,
                                norm=dnn.LayerNorm(8, dtype=np.float64) if norm else None).eval()
    dm.load_state_dict(tm.state_dict())
    x, pad = _x(3, 5, 8), _padding_mask(LENGTHS)
    with torch.no_grad():
        want = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).numpy()
    with dn.no_grad():
        got = np.asarray(dm(dn.tensor(x), src_key_padding_mask=pad))
    C.assert_close(got, want, np.float64, "fast path")
    if not norm:
        assert not got[pad].any()
    want_g = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).detach().numpy()   # gradients on: no fast path
    got_g = np.asarray(dm(dn.tensor(x), src_key_padding_mask=pad))
    C.assert_close(got_g, want_g, np.float64, "with gradients")
    assert np.abs(got_g[pad]).min() > 0


def test_transformer_encoder_layer_dropout_in_training_and_errors():
    m = dnn.TransformerEncoderLayer(8, 2, 16, dropout=0.5, dtype=np.float64, rng=0)
    x = dn.tensor(_x(4, 2, 8))
    a, b = np.asarray(m(x)), np.asarray(m(x))
    assert not np.allclose(a, b)                      # a new mask per call
    m.eval()
    np.testing.assert_array_equal(np.asarray(m(x)), np.asarray(m(x)))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not swish"):
        dnn.TransformerEncoderLayer(8, 2, activation="swish")


def test_transformer_encoder_layer_traced_against_eager():
    """Traced into a static plan (dynnets.static.trace: the parameters graph inputs, the padding mask an input):
    values and parameter gradients as eager, for two padding patterns through one trace."""
    dm = dnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=np.float64, rng=4)
    cot = _x(3, 5, 8, seed=6)

    def loss(x, m):
        return (dm(x, src_key_padding_mask=m) * cot).sum()
    step = ds.trace(loss, grads_of=dm)
    for lengths in (LENGTHS, [2, 2, 5]):
        x, pad = _x(3, 5, 8, seed=len(lengths)), _padding_mask(lengths)
        got, grads = step(x, pad)
        dm.zero_grad()
        want = loss(dn.tensor(x), pad)
        want.backward()
        C.assert_close(np.asarray(got), np.asarray(want), np.float64, "traced loss")
        for g, (name, p) in zip(grads, dm.named_parameters()):
            C.assert_close(np.asarray(g), np.asarray(p.grad), np.float64, f"traced gradient of {name}")


# --------------------------------------------------------------------------
# positional encodings
# --------------------------------------------------------------------------

class _TutorialPositionalEncoding(torch.nn.Module):
    """The PyTorch tutorial's module, verbatim."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        import math
        self.dropout = torch.nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


def test_positional_encoding_is_the_tutorials():
    tm = _TutorialPositionalEncoding(8, dropout=0.0, max_len=50)
    dm = dnn.PositionalEncoding(8, dropout=0.0, max_len=50)
    assert list(dm.state_dict()) == ["pe"]
    np.testing.assert_allclose(dm.state_dict()["pe"], tm.pe.numpy(), rtol=2e-6, atol=2e-6)
    dm.load_state_dict(tm.state_dict())
    x = _x(7, 3, 8).astype(np.float32)
    C.check(dm, tm, [x], diff=(0,))
    bf = dnn.PositionalEncoding(8, dropout=0.0, max_len=50, batch_first=True)
    bf.load_state_dict(tm.state_dict())
    C.check(bf, lambda x: tm(x.transpose(0, 1)).transpose(0, 1), [x.transpose(1, 0, 2).copy()], diff=(0,))
    with pytest.raises(ValueError, match="rows_like: the sequence length ref.shape\\[0\\]=51 exceeds"):
        dm(dn.tensor(_x(51, 1, 8).astype(np.float32)))


class _TorchLearned(torch.nn.Module):
    def __init__(self, max_len, d, batch_first):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(max_len, d, dtype=torch.float64))
        self.batch_first = batch_first

    def forward(self, x):
        pos = self.weight[:x.size(1 if self.batch_first else 0)]
        return x + (pos[None] if self.batch_first else pos[:, None])


@pytest.mark.parametrize("batch_first", [False, True])
def test_learned_positional_embedding(batch_first):
    torch.manual_seed(5)
    tm = _TorchLearned(10, 4, batch_first)
    dm = dnn.LearnedPositionalEmbedding(10, 4, batch_first=batch_first, dtype=np.float64)
    assert list(dm.state_dict()) == ["weight"]
    module_check(dm, tm, [_x(*((2, 6, 4) if batch_first else (6, 2, 4)))])


def test_positional_embeddings_traced_with_varying_lengths():
    """The table is cut when the plan runs: one trace serves every length (unknown-length placeholders)."""
    dm = dnn.LearnedPositionalEmbedding(10, 4, batch_first=True, dtype=np.float64, rng=0)
    pe = dnn.PositionalEncoding(4, dropout=0.0, max_len=10, batch_first=True, dtype=np.float64)
    g = ds.Graph()
    with g.as_default():
        xp = ds.placeholder(np.float64, (None, None, 4))
        tab = ds.placeholder(np.float64, (10, 4))
        out = pe(xp)
        learned = xp + bind(P.rows_like_p, tab, xp, axis=1)
        for t in (1, 6):
            x = _x(2, t, 4, seed=t)
            with ds.Session(g) as sess:
                got, got2 = sess.run([out, learned], {xp: x, tab: np.asarray(dm.weight)})
            C.assert_close(got, x + pe.pe[:t, 0][None], np.float64, "sinusoidal")
            C.assert_close(got2, x + np.asarray(dm.weight)[:t][None], np.float64, "learned")
