"""nn.RNN / GRU / LSTM: PyTorch's names and layout; every input form (padded
with lengths, full-length, unbatched, a list, a packed sequence) against the
equations run sequence by sequence in numpy, for every combination of
batch_first, bidirectional and 1 or 2 layers, with and without an initial
state; finite-difference gradients; dropout between layers; packing
utilities; errors; and, with torch installed, values, final states and every
gradient against torch.nn.RNN/GRU/LSTM with copied weights."""
import itertools
import math

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd import gradcheck, ops
from dynnets.nn.utils import functional_call
from dynnets.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence, packed_layout,
                                  pad_packed_sequence, pad_sequence)

E, H = 3, 4
LENGTHS = [3, 5, 1, 5]          # unsorted, with a tie and a one-step sequence
KINDS = {"RNN": 1, "GRU": 3, "LSTM": 4}


def sig(a):
    return 1 / (1 + np.exp(-a))


def step(kind, x, h, c, w_ih, w_hh, b_ih, b_hh, act=np.tanh):
    gi, gh = w_ih @ x + b_ih, w_hh @ h + b_hh
    if kind == "RNN":
        return act(gi + gh), None
    if kind == "GRU":
        r, z = sig(gi[:H] + gh[:H]), sig(gi[H:2 * H] + gh[H:2 * H])
        n = np.tanh(gi[2 * H:] + r * gh[2 * H:])
        return (1 - z) * n + z * h, None
    a = gi + gh
    i, f, g, o = sig(a[:H]), sig(a[H:2 * H]), np.tanh(a[2 * H:3 * H]), sig(a[3 * H:])
    c2 = f * c + i * g
    return o * np.tanh(c2), c2


def reference(kind, seqs, params, layers, bi, h0=None, c0=None, act=np.tanh):
    """Each sequence alone, step by step: outputs (list of (L_i, D*H)), h_n, c_n (L*D, B, H)."""
    D, B = 2 if bi else 1, len(seqs)
    hn, cn = np.zeros((layers * D, B, H)), np.zeros((layers * D, B, H))
    outs = []
    for b, x in enumerate(seqs):
        for layer in range(layers):
            per_dir = []
            for d in range(D):
                k, sfx = layer * D + d, f"l{layer}" + ("_reverse" if d else "")
                w = [params[f"{n}_{sfx}"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
                h = np.zeros(H) if h0 is None else h0[k, b]
                c = np.zeros(H) if c0 is None else c0[k, b]
                hs = []
                for xt in (x if d == 0 else x[::-1]):
                    h, c = step(kind, xt, h, c, *w, act=act)
                    hs.append(h)
                hn[k, b] = h
                if kind == "LSTM":
                    cn[k, b] = c
                per_dir.append(np.array(hs if d == 0 else hs[::-1]))
            x = np.concatenate(per_dir, axis=1)
        outs.append(x)
    return outs, hn, (cn if kind == "LSTM" else None)


def _seqs(rng, lengths=LENGTHS):
    return [rng.standard_normal((n, E)) for n in lengths]


def _run_forms(layer, seqs, hx):
    """The same batch as a padded Tensor with lengths, a list and a packed
    sequence; the outputs as lists of per-sequence arrays."""
    bf = layer.batch_first
    padded = pad_sequence(seqs, batch_first=bf).data
    out_p, st_p = layer(padded, hx, lengths=[len(s) for s in seqs])
    out_l, st_l = layer(seqs, hx)
    out_k, st_k = layer(pack_sequence(seqs, enforce_sorted=False), hx)
    unpacked, lens = pad_packed_sequence(out_k, batch_first=bf)
    np.testing.assert_array_equal(lens, [len(s) for s in seqs])
    res = []
    for out, st in ((out_p, st_p), (None, st_l), (unpacked, st_k)):
        if out is None:
            per = [o.data for o in out_l]
        else:
            arr = out.data if bf else out.numpy().transpose(1, 0, 2)
            per = [arr[i, :len(s)] for i, s in enumerate(seqs)]
            assert all(np.all(arr[i, len(s):] == 0) for i, s in enumerate(seqs))     # padding stays zero
        res.append((per, st))
    return res


def _states(kind, st):
    return list(st) if kind == "LSTM" else [st]


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["tb", "bt"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_input_form_matches_the_equations(kind, batch_first, bi, layers):
    rng = np.random.default_rng(0)
    layer = getattr(nn, kind)(E, H, num_layers=layers, bidirectional=bi, batch_first=batch_first, rng=1,
                              dtype=np.float64)
    params = {n: p.data for n, p in layer.named_parameters()}
    seqs = _seqs(rng)
    LD = layers * (2 if bi else 1)
    for with_state in (False, True):
        h0 = rng.standard_normal((LD, len(seqs), H)) if with_state else None
        c0 = rng.standard_normal((LD, len(seqs), H)) if with_state and kind == "LSTM" else None
        hx = None if h0 is None else ((h0, c0) if kind == "LSTM" else h0)
        ref_out, ref_h, ref_c = reference(kind, seqs, params, layers, bi, h0, c0)
        for per, st in _run_forms(layer, seqs, hx):
            for got, want in zip(per, ref_out):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
            states = _states(kind, st)
            np.testing.assert_allclose(states[0].data, ref_h, rtol=1e-12, atol=1e-13)
            if kind == "LSTM":
                np.testing.assert_allclose(states[1].data, ref_c, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_full_length_unbatched_relu_and_no_bias(kind):
    rng = np.random.default_rng(1)
    for extra in ({}, {"bias": False}, {"nonlinearity": "relu"}):
        if "nonlinearity" in extra and kind != "RNN":
            continue
        for bf in (False, True):
            layer = getattr(nn, kind)(E, H, num_layers=2, bidirectional=True, batch_first=bf, rng=2,
                                      dtype=np.float64, **extra)
            params = {n: p.data for n, p in layer.named_parameters()}
            if not layer.bias:
                params.update({n.replace("weight", "bias"): np.zeros(len(p)) for n, p in params.items()})
                assert len(list(layer.parameters())) == 8
            act = np.tanh if extra.get("nonlinearity", "tanh") == "tanh" else (lambda a: np.maximum(a, 0))
            x = rng.standard_normal((2, 5, E) if bf else (5, 2, E))
            seqs = list(x) if bf else list(x.transpose(1, 0, 2))
            ref_out, ref_h, _ = reference(kind, seqs, params, 2, True, act=act)
            out, st = layer(x)
            got = out.data if bf else out.numpy().transpose(1, 0, 2)
            np.testing.assert_allclose(got, np.stack(ref_out), rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(_states(kind, st)[0].data, ref_h, rtol=1e-12, atol=1e-13)
            # one sequence, unbatched: (T, E) in, (T, 2H) and (L*D, H) out
            out1, st1 = layer(seqs[0])
            assert out1.shape == (5, 2 * H) and _states(kind, st1)[0].shape == (4, H)
            np.testing.assert_allclose(out1.data, ref_out[0], rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(_states(kind, st1)[0].data, ref_h[:, 0], rtol=1e-12, atol=1e-13)
            # with initial states, batched and unbatched
            h0, c0 = rng.standard_normal((4, 2, H)), rng.standard_normal((4, 2, H))
            ref_out, ref_h, ref_c = reference(kind, seqs, params, 2, True, h0, c0 if kind == "LSTM" else None,
                                              act=act)
            for x_in, hx, want_out, sl in ((x, (h0, c0), np.stack(ref_out), slice(None)),
                                           (seqs[1], (h0[:, 1], c0[:, 1]), ref_out[1], 1)):
                out, st = layer(x_in, hx if kind == "LSTM" else hx[0])
                got = out.data if bf or x_in.ndim == 2 else out.numpy().transpose(1, 0, 2)
                np.testing.assert_allclose(got, want_out, rtol=1e-12, atol=1e-13)
                np.testing.assert_allclose(_states(kind, st)[0].data, ref_h[:, sl], rtol=1e-12, atol=1e-13)
                if kind == "LSTM":
                    np.testing.assert_allclose(st[1].data, ref_c[:, sl], rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "h0"])
def test_gradients_match_finite_differences(kind, with_state):
    rng = np.random.default_rng(2)
    layer = getattr(nn, kind)(2, 2, num_layers=2, bidirectional=True, rng=3, dtype=np.float64)
    names = [n for n, _ in layer.named_parameters()]
    lengths = [2, 3, 1]
    x = rng.standard_normal((3, 3, 2))
    states = [rng.standard_normal((4, 3, 2)) for _ in range(2 if kind == "LSTM" else 1)] if with_state else []

    def f(x, *rest):
        ps, hs = rest[:len(names)], rest[len(names):]
        hx = None if not hs else (tuple(hs) if kind == "LSTM" else hs[0])
        out, st = functional_call(layer, dict(zip(names, ps)), x, hx, lengths=lengths)
        return (out, *_states(kind, st))
    assert gradcheck(f, [x] + [p.data for p in layer.parameters()] + states)


def test_packing_layout_and_round_trip():
    x = np.arange(3 * 4, dtype=np.float64).reshape(3, 4, 1)          # (T=3, B=4): value 4t + b
    p = pack_padded_sequence(x, [2, 3, 1, 3], enforce_sorted=False)
    # sorted by length (stable): sequences 1, 3, 0, 2
    np.testing.assert_array_equal(p.sorted_indices, [1, 3, 0, 2])
    np.testing.assert_array_equal(p.unsorted_indices, [2, 0, 3, 1])
    np.testing.assert_array_equal(p.batch_sizes, [4, 3, 2])
    np.testing.assert_array_equal(p.data.data[:, 0], [1, 3, 0, 2, 5, 7, 4, 9, 11])
    lay = packed_layout(p.batch_sizes)
    np.testing.assert_array_equal(lay.lengths, [3, 3, 2, 1])
    np.testing.assert_array_equal(lay.last, [7, 8, 6, 3])
    np.testing.assert_array_equal(lay.reverse[lay.reverse], np.arange(9))      # an involution
    np.testing.assert_array_equal(p.data.data[lay.reverse, 0], [9, 11, 4, 2, 5, 7, 0, 1, 3])
    back, lens = pad_packed_sequence(p, total_length=4)
    np.testing.assert_array_equal(lens, [2, 3, 1, 3])
    want = np.where(np.arange(4)[:, None] < np.array([2, 3, 1, 3])[None, :], np.arange(16).reshape(4, 4), 0)
    np.testing.assert_array_equal(back.data[..., 0], want)
    sorted_pack = pack_padded_sequence(x[:, [1, 3, 0, 2]], [3, 3, 2, 1])
    assert sorted_pack.sorted_indices is None
    np.testing.assert_array_equal(sorted_pack.data.data, p.data.data)
    bf, _ = pad_packed_sequence(p, batch_first=True)
    np.testing.assert_array_equal(bf.data, back.data[:3].transpose(1, 0, 2))
    seqs = [x[:n, b] for b, n in enumerate([2, 3, 1, 3])]
    np.testing.assert_array_equal(pack_sequence(seqs, enforce_sorted=False).data.data, p.data.data)
    np.testing.assert_array_equal(pad_sequence(seqs).data, back.data[:3])
    np.testing.assert_array_equal(pad_sequence(seqs, batch_first=True, padding_value=-1).data[2], [[2], [-1], [-1]])


def test_gradients_flow_through_packing():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 2))
    assert gradcheck(lambda a: pad_packed_sequence(pack_padded_sequence(a, [1, 3], enforce_sorted=False))[0], [x])
    assert gradcheck(lambda a, b: pack_sequence([a, b], enforce_sorted=False).data,
                     [rng.standard_normal((2, 2)), rng.standard_normal((3, 2))])


def test_dropout_between_layers_only_in_training():
    rng = np.random.default_rng(4)
    seqs = _seqs(rng)
    lstm = nn.LSTM(E, H, num_layers=2, dropout=0.4, bidirectional=True, rng=5, dtype=np.float64)
    # the same two layers run one at a time, with a generator in the same state
    first = nn.LSTM(E, H, bidirectional=True, dtype=np.float64, rng=0)
    second = nn.LSTM(2 * H, H, bidirectional=True, dtype=np.float64, rng=0)
    sd = lstm.state_dict()
    first.load_state_dict({k: v for k, v in sd.items() if "_l0" in k})
    second.load_state_dict({k.replace("_l1", "_l0"): v for k, v in sd.items() if "_l1" in k})
    gen = np.random.default_rng()
    gen.bit_generator.state = lstm.rng.bit_generator.state
    out, (h, c) = lstm(pack_sequence(seqs, enforce_sorted=False))
    mid, (h1, _) = first(pack_sequence(seqs, enforce_sorted=False))
    dropped = PackedSequence(ops.dropout(mid.data, 0.4, gen), *mid[1:])
    want, (h2, _) = second(dropped)
    np.testing.assert_allclose(out.data.data, want.data.data, rtol=1e-13)
    np.testing.assert_allclose(h.data, np.concatenate([h1.data, h2.data]), rtol=1e-13)
    lstm.eval()
    out_eval, _ = lstm(pack_sequence(seqs, enforce_sorted=False))
    want_eval, _ = second(first(pack_sequence(seqs, enforce_sorted=False))[0])
    np.testing.assert_allclose(out_eval.data.data, want_eval.data.data, rtol=1e-13)
    with pytest.warns(UserWarning, match="has no effect with num_layers=1"):
        nn.GRU(E, H, dropout=0.5)
    # dropout=1: layer 1 reads zeros
    zeroed = nn.LSTM(E, H, num_layers=2, dropout=1.0, rng=5, dtype=np.float64)
    second_uni = nn.LSTM(H, H, dtype=np.float64, rng=0)
    second_uni.load_state_dict({k.replace("_l1", "_l0"): v for k, v in zeroed.state_dict().items() if "_l1" in k})
    got = zeroed(seqs)[0]
    want = second_uni([np.zeros((len(q), H)) for q in seqs])[0]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-13)


def test_pytorch_names_shapes_init_and_all_weights():
    lstm = nn.LSTM(E, H, num_layers=2, bidirectional=True, rng=0)
    shapes = {n: p.shape for n, p in lstm.named_parameters()}
    # the keys and shapes of torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).state_dict()
    want = {}
    for layer, sfx in itertools.product((0, 1), ("", "_reverse")):
        fan_in = E if layer == 0 else 2 * H
        want.update({f"weight_ih_l{layer}{sfx}": (4 * H, fan_in), f"weight_hh_l{layer}{sfx}": (4 * H, H),
                     f"bias_ih_l{layer}{sfx}": (4 * H,), f"bias_hh_l{layer}{sfx}": (4 * H,)})
    assert shapes == want and list(shapes) == list(want)
    allw = np.concatenate([p.numpy().ravel() for p in lstm.parameters()])
    assert allw.dtype == np.float32 and np.abs(allw).max() <= 1 / math.sqrt(H)
    assert [len(w) for w in lstm.all_weights] == [4] * 4 and lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse
    gru = nn.GRU(E, H, bias=False)
    assert [n for n, _ in gru.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    assert repr(nn.RNN(E, H, 2, "relu", batch_first=True)) == "RNN(3, 4, num_layers=2, nonlinearity='relu', " \
                                                             "batch_first=True)"


def test_bad_input_is_a_clear_error():
    lstm = nn.LSTM(E, H, num_layers=2)
    x = np.zeros((5, 2, E), np.float32)
    with pytest.raises(ValueError, match="LSTM: input has 2 features per step, but input_size=3"):
        lstm(np.zeros((5, 2, 2), np.float32))
    with pytest.raises(ValueError, match=r"lengths\[1\]=6 is out of range: every sequence needs 1 to 5 steps"):
        lstm(x, lengths=[5, 6])
    with pytest.raises(ValueError, match="lengths must be 2 integers"):
        lstm(x, lengths=[5])
    with pytest.raises(ValueError, match=r"LSTM: h_0 must have shape .* = \(2, 2, 4\), got \(1, 2, 4\)"):
        lstm(x, (np.zeros((1, 2, H)), np.zeros((2, 2, H))))
    with pytest.raises(TypeError, match=r"LSTM: hx must be a pair \(h_0, c_0\)"):
        lstm(x, np.zeros((2, 2, H)))
    with pytest.raises(TypeError, match="GRU: hx must be one Tensor h_0"):
        nn.GRU(E, H)(x, (np.zeros((1, 2, H)),))
    with pytest.raises(ValueError, match="lengths= applies to a padded Tensor batch"):
        lstm([np.zeros((2, E))], lengths=[2])
    with pytest.raises(ValueError, match=r"input must be \(T, B, 3\)"):
        lstm(np.zeros((1, 5, 2, E)))
    with pytest.raises(ValueError, match="pack_padded_sequence: lengths must be sorted in decreasing order"):
        pack_padded_sequence(x, [2, 5])
    with pytest.raises(ValueError, match="sequences\\[1\\] has shape \\(0, 3\\)"):
        pack_sequence([np.zeros((2, E)), np.zeros((0, E))], enforce_sorted=False)
    with pytest.raises(ValueError, match="total_length=1 is shorter than the longest sequence"):
        pad_packed_sequence(pack_sequence([np.zeros((2, E))]), total_length=1)
    with pytest.raises(ValueError, match="RNN: nonlinearity must be 'tanh' or 'relu'"):
        nn.RNN(E, H, nonlinearity="sigmoid")


# --- against torch, when it is installed (the benchmarks' extra) ---------------------------------


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["tb", "bt"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_matches_torch_values_states_and_gradients(torch, kind, batch_first, bi, layers):
    rng = np.random.default_rng(5)
    tl = getattr(torch.nn, kind)(E, H, num_layers=layers, bidirectional=bi, batch_first=batch_first).double()
    dl = getattr(nn, kind)(E, H, num_layers=layers, bidirectional=bi, batch_first=batch_first, dtype=np.float64)
    dl.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    LD, B = layers * (2 if bi else 1), len(LENGTHS)
    for form, with_state in itertools.product(("padded", "list", "packed"), (False, True)):
        seqs = _seqs(rng)
        h0 = [rng.standard_normal((LD, B, H)) for _ in range(2 if kind == "LSTM" else 1)] if with_state else []
        ts = [torch.tensor(s, requires_grad=True) for s in seqs]
        th = [torch.tensor(h, requires_grad=True) for h in h0]
        t_out, t_st = tl(torch.nn.utils.rnn.pack_sequence(ts, enforce_sorted=False),
                         (tuple(th) if kind == "LSTM" else th[0]) if th else None)
        t_pad, _ = torch.nn.utils.rnn.pad_packed_sequence(t_out, batch_first=True)
        ds = [dn.tensor(s, requires_grad=True, dtype=np.float64) for s in seqs]
        dh = [dn.tensor(h, requires_grad=True, dtype=np.float64) for h in h0]
        hx = (tuple(dh) if kind == "LSTM" else dh[0]) if dh else None
        if form == "padded":
            out, d_st = dl(pad_sequence(ds, batch_first=batch_first), hx, lengths=LENGTHS)
            d_pad = out if batch_first else ops.transpose(out, 1, 0, 2)
        elif form == "list":
            out, d_st = dl(ds, hx)
            d_pad = pad_sequence(out, batch_first=True)
        else:
            out, d_st = dl(pack_sequence(ds, enforce_sorted=False), hx)
            d_pad = pad_packed_sequence(out, batch_first=True)[0]
        np.testing.assert_allclose(d_pad.data, t_pad.detach().numpy(), rtol=1e-11, atol=1e-13)
        t_states, d_states = _states(kind, t_st), _states(kind, d_st)
        for t, d in zip(t_states, d_states):
            np.testing.assert_allclose(d.data, t.detach().numpy(), rtol=1e-11, atol=1e-13)
        tl.zero_grad()
        dl.zero_grad()
        ws = [rng.standard_normal(t.shape) for t in [t_pad] + t_states]
        sum((t * torch.tensor(w)).sum() for t, w in zip([t_pad] + t_states, ws)).backward()
        total = None
        for d, w in zip([d_pad] + d_states, ws):
            term = (d * w).sum()
            total = term if total is None else total + term
        total.backward()
        for (name, p), (t_name, tp) in zip(dl.named_parameters(), tl.named_parameters()):
            assert name == t_name
            np.testing.assert_allclose(p.grad.data, tp.grad.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=f"{kind} {form}: gradient of {name}")
        for d, t in zip(ds + dh, ts + th):
            np.testing.assert_allclose(d.grad.data, t.grad.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=f"{kind} {form}: input gradient")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_full_length_and_unbatched_match_torch(torch, kind):
    rng = np.random.default_rng(6)
    for extra, bf in itertools.product(({}, {"bias": False}, {"nonlinearity": "relu"}), (False, True)):
        if "nonlinearity" in extra and kind != "RNN":
            continue
        tl = getattr(torch.nn, kind)(E, H, num_layers=2, bidirectional=True, batch_first=bf, **extra).double()
        dl = getattr(nn, kind)(E, H, num_layers=2, bidirectional=True, batch_first=bf, dtype=np.float64, **extra)
        dl.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
        for x in (rng.standard_normal((2, 5, E) if bf else (5, 2, E)), rng.standard_normal((5, E))):
            t_out, t_st = tl(torch.tensor(x))
            d_out, d_st = dl(x)
            np.testing.assert_allclose(d_out.data, t_out.detach().numpy(), rtol=1e-11, atol=1e-13)
            for t, d in zip(_states(kind, t_st), _states(kind, d_st)):
                np.testing.assert_allclose(d.data, t.detach().numpy(), rtol=1e-11, atol=1e-13)
