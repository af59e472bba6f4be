"""``dynnets.nn`` (layers, cells, functional) and the optimizers against
PyTorch: cross-entropy (reductions, masks against torch's ``weight`` and
``ignore_index``), embedding, the fused LSTM/GRU cells against
``torch.nn.LSTMCell``/``GRUCell`` with the same weights, the Tree-LSTM
cells against a torch composition of Tai et al. (2015), eqs. 9-14, the
modules through ``functional_call`` (so their parameters are inputs of the
comparison, in eager and in static mode), gradient clipping, dropout's
semantics, and SGD/Adagrad/Adam against ``torch.optim`` over several steps.
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.static as ds  # noqa: E402
from dynnets import nn  # noqa: E402
from dynnets.nn.utils import clip_grad_norm_, functional_call  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

F = torch.nn.functional
MODES = ("eager", "static", "static-unknown")
ALL = [(dt, mode) for dt in C.FLOATS for mode in MODES]
ALL_IDS = [f"{np.dtype(dt).name}-{mode}" for dt, mode in ALL]
# memory layouts are an eager matter (static feeds of every layout are covered by the op table)
CELL_CASES = [(dt, mode, lay) for dt, mode in ALL
              for lay in (("contiguous", "transposed", "strided") if mode == "eager" else ("contiguous",))]
CELL_IDS = [f"{np.dtype(dt).name}-{mode}-{lay}" for dt, mode, lay in CELL_CASES]


# --------------------------------------------------------------------------
# cross-entropy
# --------------------------------------------------------------------------

_N, _K = 6, 4
_Y = np.array([0, 3, 1, 1, 2, 3])


def _logits(dtype, lay="contiguous", scale=1.0):
    return C.layout(C.draw(np.random.default_rng(20), (_N, _K), dtype) * scale, lay)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_cross_entropy(reduction, dtype, mode):
    # targets are a graph input (an int64 placeholder in static mode)
    C.check(lambda x, y: dn.cross_entropy(x, y, reduction=reduction),
            lambda x, y: F.cross_entropy(x, y, reduction=reduction), [_logits(dtype), _Y], [0], mode=mode)


@pytest.mark.parametrize("lay", ["transposed", "strided", "reversed", "broadcast"])
@pytest.mark.parametrize("dtype", C.FLOATS)
def test_cross_entropy_layouts(lay, dtype):
    C.check(lambda x: dn.cross_entropy(x, _Y), lambda x: F.cross_entropy(x, torch.tensor(_Y)),
            [_logits(dtype, lay)], [0])


@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_cross_entropy_large_logits(dtype, mode):
    # losses of 1e4 (the target's logit far below the others): no overflow, exact gradients
    x = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4], [0.0, 0.0, 0.0], [3e3, 3e3 + 1.0, -3e3]], dtype=dtype)
    y = np.array([1, 0, 2, 1])
    for red in ("mean", "none"):
        C.check(lambda t: dn.cross_entropy(t, y, reduction=red),
                lambda t: F.cross_entropy(t, torch.tensor(y), reduction=red), [x], [0], mode=mode)


_KEEP = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_cross_entropy_mask_as_ignore_index(reduction, dtype, mode):
    # a 0/1 mask drops rows as torch's ignore_index does (the mean is over the rows kept)
    ignored = torch.tensor(np.where(_KEEP > 0, _Y, -100))
    C.check(lambda x: dn.cross_entropy(x, _Y, mask=_KEEP.astype(dtype), reduction=reduction),
            lambda x: F.cross_entropy(x, ignored, ignore_index=-100, reduction=reduction),
            [_logits(dtype)], [0], mode=mode)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_cross_entropy_mask_as_class_weight(reduction, dtype, mode):
    # torch's weight[c] per class is the mask weight[target_i] per row; the
    # weighted mean divides by the sum of the rows' weights in both
    cw = np.array([0.5, 2.0, 1.0, 0.25])
    C.check(lambda x: dn.cross_entropy(x, _Y, mask=cw[_Y].astype(dtype), reduction=reduction),
            lambda x: F.cross_entropy(x, torch.tensor(_Y), weight=torch.tensor(cw, dtype=C.torch_dtype(dtype)),
                                      reduction=reduction),
            [_logits(dtype)], [0], mode=mode)


@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_cross_entropy_mask_as_fed_input(dtype, mode):
    # per-row weights fed with the batch (a placeholder in static mode); torch's equivalent is the weighted sum
    m = np.array([1.0, 0.5, 0.0, 2.0, 1.0, 0.25], dtype=dtype)
    C.check(lambda x, y, w: dn.cross_entropy(x, y, mask=w),
            lambda x, y, w: (F.cross_entropy(x, y, reduction="none") * w).sum() / w.sum(),
            [_logits(dtype), _Y, m], [0], mode=mode)


@pytest.mark.parametrize("mode", ["eager", "static", "autobatch"])
def test_cross_entropy_all_rows_masked(mode):
    # the mean over no rows is torch's 0/0: nan, with a zero gradient
    x = _logits(np.float64)
    if mode == "autobatch":
        xt = dn.tensor(x, requires_grad=True)
        with dn.autobatch():
            loss = dn.cross_entropy(xt, _Y, mask=np.zeros(_N))
            other = dn.cross_entropy(xt, _Y, mask=_KEEP)
            (loss * 0.0 + other).backward()
        assert np.isnan(loss.item()) and np.isfinite(other.item())
        return
    C.check(lambda t: dn.cross_entropy(t, _Y, mask=np.zeros(_N)),
            lambda t: F.cross_entropy(t, torch.full((_N,), -100), ignore_index=-100), [x], [0], mode=mode)


# The fused dn.cross_entropy takes (N, C) scores and class indices; torch's F.cross_entropy (every form) is
# dynnets.nn.functional.cross_entropy, which the fused op's errors name.

@pytest.mark.parametrize("mode", MODES)
def test_cross_entropy_unbatched(mode):
    x = _logits(np.float64)[0]
    C.check(lambda t: dn.nn.functional.cross_entropy(t, np.array(2)), lambda t: F.cross_entropy(t, torch.tensor(2)),
            [x], [0], mode=mode, unknown=[(False,)])        # the number of classes is known in a graph
    with pytest.raises(ValueError, match=r"cross_entropy: logits must be 2-D .*dynnets.nn.functional.cross_entropy"):
        dn.cross_entropy(dn.tensor(x), np.array(2))


@pytest.mark.parametrize("mode", MODES)
def test_cross_entropy_spatial(mode):
    x = C.draw(np.random.default_rng(21), (2, _K, 3), np.float64)
    y = np.array([[0, 1, 3], [2, 2, 0]])
    C.check(lambda t: dn.nn.functional.cross_entropy(t, y), lambda t: F.cross_entropy(t, torch.tensor(y)), [x], [0],
            mode=mode, unknown=[(False, False, False)])
    with pytest.raises(ValueError, match=r"cross_entropy: logits must be 2-D .*dynnets.nn.functional.cross_entropy"):
        dn.cross_entropy(dn.tensor(x), y)


@pytest.mark.parametrize("smoothing", [0.0, 0.25])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets(smoothing, reduction):
    x = _logits(np.float64)
    p = np.random.default_rng(22).dirichlet(np.ones(_K), _N)
    cw = np.array([0.5, 2.0, 1.0, 0.25])
    for w in (None, cw):
        C.check(lambda t, q: dn.nn.functional.cross_entropy(t, q, w, reduction=reduction, label_smoothing=smoothing),
                lambda t, q: F.cross_entropy(t, q, None if w is None else torch.tensor(w), reduction=reduction,
                                             label_smoothing=smoothing), [x, p], [0, 1])
    with pytest.raises(TypeError, match=r"cross_entropy: targets must be integer class indices.*"
                                        r"dynnets.nn.functional.cross_entropy"):
        dn.cross_entropy(dn.tensor(x), p)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_functional_cross_entropy_positional_arguments(reduction, dtype, mode):
    # F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    cw = np.array([0.5, 2.0, 1.0, 0.25], dtype)
    y = np.array([0, 3, 1, 1, 2, 3])
    C.check(lambda x: dn.nn.functional.cross_entropy(x, y, cw, None, 1, None, reduction, 0.1),
            lambda x: F.cross_entropy(x, torch.tensor(y), torch.tensor(cw), None, 1, None, reduction, 0.1),
            [_logits(dtype)], [0], mode=mode, unknown=[(True, False)])


def test_fused_cross_entropy_takes_mask_by_keyword_only():
    # torch's third positional argument is a per-class weight; the fused op's per-row mask must be named
    with pytest.raises(TypeError):
        dn.cross_entropy(dn.tensor(_logits(np.float64)), _Y, np.ones(_N))


def test_cross_entropy_rejections_match_torch():
    x = _logits(np.float64)
    for bad in (np.array([0, 3, 1, 1, 2, 4]), np.array([0, 3, 1, 1, 2, -1]), np.array([0, 1])):
        with pytest.raises((IndexError, RuntimeError, ValueError)):
            F.cross_entropy(torch.tensor(x), torch.tensor(bad))
        with pytest.raises((IndexError, ValueError), match="cross_entropy"):
            dn.cross_entropy(dn.tensor(x), bad)
    with pytest.raises(ValueError):
        F.cross_entropy(torch.tensor(x), torch.tensor(_Y), reduction="bogus")
    with pytest.raises(ValueError, match="reduction"):
        dn.cross_entropy(dn.tensor(x), _Y, reduction="bogus")


# --------------------------------------------------------------------------
# embedding
# --------------------------------------------------------------------------

_IDS = {"1d": np.array([3, 0, 3, 1]), "2d": np.array([[1, 2], [2, 2], [0, 4]]), "0d": np.array(2),
        "empty": np.zeros(0, np.int64)}


@pytest.mark.parametrize("ids", sorted(_IDS))
@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_embedding(ids, dtype, mode):
    w = C.draw(np.random.default_rng(23), (5, 3), dtype)
    # dn.embedding(weight, ids) is torch.embedding's order; nn.functional.embedding(input, weight) is F's
    C.check(dn.embedding, lambda t, i: torch.embedding(t, i), [w, _IDS[ids]], [0], mode=mode)
    C.check(lambda t, i: dn.nn.functional.embedding(i, t), lambda t, i: F.embedding(i, t), [w, _IDS[ids]], [0],
            mode=mode)


@pytest.mark.parametrize("lay", ["transposed", "strided", "reversed"])
def test_embedding_layouts(lay):
    w = C.layout(C.draw(np.random.default_rng(24), (5, 3), np.float32), lay)
    C.check(lambda t: dn.embedding(t, _IDS["2d"]), lambda t: F.embedding(torch.tensor(_IDS["2d"]), t), [w], [0])


def test_embedding_out_of_range_is_rejected_as_in_torch():
    w = np.zeros((5, 3))
    for bad in ([5], [-1]):
        with pytest.raises(IndexError):
            F.embedding(torch.tensor(bad), torch.tensor(w))
        with pytest.raises(IndexError, match="embedding"):
            dn.embedding(dn.tensor(w), np.array(bad))


def test_functional_embedding_argument_order():
    w = C.draw(np.random.default_rng(25), (5, 3), np.float64)
    C.check(lambda i, t: dn.nn.functional.embedding(i, t), lambda i, t: F.embedding(i, t), [_IDS["1d"], w], [1])
    # the old order (weight, ids) is a clear error, not a silent lookup
    with pytest.raises(TypeError, match=r"embedding: input must hold integer ids \(torch's order is "
                                        r"embedding\(input, weight\)\)"):
        dn.nn.functional.embedding(dn.tensor(w), _IDS["1d"])


@pytest.mark.parametrize("pad", [None, 2, -1])
@pytest.mark.parametrize("max_norm", [None, 1.0])
def test_functional_embedding_padding_idx_and_max_norm(pad, max_norm):
    # padding_idx: no gradient to that row; max_norm: the looked-up rows renormalised in place, as torch
    w = C.draw(np.random.default_rng(26), (6, 3), np.float64) * 2
    ids = np.array([[0, 2, 2], [5, 0, 1]])
    dw, tw = dn.tensor(w.copy(), requires_grad=True), torch.tensor(w.copy(), requires_grad=True)
    cot = C.draw(np.random.default_rng(27), (2, 3, 3))
    d = dn.nn.functional.embedding(ids, dw, pad, max_norm)
    t = F.embedding(torch.tensor(ids), tw, pad, max_norm)
    C.assert_close(d.data, t.detach().numpy(), np.float64, "values")
    C.assert_close(dw.data, tw.detach().numpy(), np.float64, "the renormalised table")
    (d * cot).sum().backward()
    (t * torch.tensor(cot)).sum().backward()
    C.assert_close(dw.grad.data, tw.grad.numpy(), np.float64, "gradient")


@pytest.mark.parametrize("x_shape", [(3, 4), (4,), (2, 3, 4)], ids=["2d", "1d", "3d"])
@pytest.mark.parametrize("dtype,mode", ALL, ids=ALL_IDS)
def test_linear_without_bias(x_shape, dtype, mode):
    # linear(x, w) and linear(x, w, None) are x @ w.T, as torch's F.linear without a bias
    rng = np.random.default_rng(26)
    x, w = C.draw(rng, x_shape, dtype), C.draw(rng, (2, 4), dtype)
    C.check(lambda a, b: dn.linear(a, b, None), lambda a, b: F.linear(a, b, None), [x, w], [0, 1], mode=mode)
    C.check(dn.nn.functional.linear, F.linear, [x, w], [0, 1], mode=mode)


# --------------------------------------------------------------------------
# fused cells, functional form (weights are inputs: their gradients are compared)
# --------------------------------------------------------------------------

_B, _I, _H = 3, 4, 5


def _cell_inputs(kind, dtype, rng, batch=_B):
    G = {"lstm": 4, "gru": 3, "rnn": 1}[kind]
    s = 1.0 / math.sqrt(_H)
    x = C.draw(rng, (batch, _I), dtype)
    h = C.draw(rng, (batch, _H), dtype) * 0.5
    ws = [np.asarray(rng.uniform(-s, s, shape), dtype) for shape in ((G * _H, _I), (G * _H, _H), (G * _H,), (G * _H,))]
    if kind == "lstm":
        return [x, h, C.draw(rng, (batch, _H), dtype)] + ws
    return [x, h] + ws


_PNAMES = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]


def _torch_cell(kind, dtype):
    cls = {"lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell, "rnn": torch.nn.RNNCell}[kind]
    return cls(_I, _H, dtype=C.torch_dtype(dtype))


def _torch_lstm(dtype):
    cell = _torch_cell("lstm", dtype)
    return lambda x, h, c, *ws: torch.func.functional_call(cell, dict(zip(_PNAMES, ws)), (x, (h, c)))


def _torch_gru(dtype):
    cell = _torch_cell("gru", dtype)
    return lambda x, h, *ws: torch.func.functional_call(cell, dict(zip(_PNAMES, ws)), (x, h))


@pytest.mark.parametrize("dtype,mode,lay", CELL_CASES, ids=CELL_IDS)
def test_lstm_cell(dtype, mode, lay):
    xs = [C.layout(a, lay) for a in _cell_inputs("lstm", dtype, np.random.default_rng(30))]
    C.check(dn.lstm_cell, _torch_lstm(dtype), xs, range(7), mode=mode)


@pytest.mark.parametrize("dtype,mode,lay", CELL_CASES, ids=CELL_IDS)
def test_gru_cell(dtype, mode, lay):
    xs = [C.layout(a, lay) for a in _cell_inputs("gru", dtype, np.random.default_rng(31))]
    C.check(dn.gru_cell, _torch_gru(dtype), xs, range(6), mode=mode)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("mode", ["eager", "static"])
def test_cells_saturated_and_batch_one(kind, mode):
    # pre-activations of +-40 (gates saturated at 0/1, tanh at +-1) and a batch of one
    rng = np.random.default_rng(32)
    xs = _cell_inputs(kind, np.float64, rng, batch=1)
    xs[0] = xs[0] * 40.0
    xs[-4] = xs[-4] * 40.0
    f, tf = (dn.lstm_cell, _torch_lstm(np.float64)) if kind == "lstm" else (dn.gru_cell, _torch_gru(np.float64))
    C.check(f, tf, xs, range(len(xs)), mode=mode)


# --------------------------------------------------------------------------
# Tree-LSTM cells against a torch composition of Tai et al. (2015)
# --------------------------------------------------------------------------

def _torch_tree_cell(h_l, h_r, c_l, c_r, w, b):
    """Binary (N = 2) Tree-LSTM node without input, eqs. 9-14: one affine map
    of [h_l; h_r] gives the input gate i, a forget gate per child f_l, f_r,
    the output gate o and the update u (in that order along the columns)."""
    z = torch.cat([h_l, h_r], 1) @ w + b
    i, f_l, f_r, o, u = z.chunk(5, 1)
    c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_l) * c_l + torch.sigmoid(f_r) * c_r
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


def _torch_tree_leaf(x, w, b):
    """A leaf: no children, so no forget gates (eq. 12 without its sum)."""
    i, o, u = (x @ w + b).chunk(3, 1)
    c = torch.sigmoid(i) * torch.tanh(u)
    return torch.sigmoid(o) * torch.tanh(c), c


def _tree_inputs(dtype, rng, n=4):
    s = 1.0 / math.sqrt(_H)
    states = [C.draw(rng, (n, _H), dtype) * 0.5 for _ in range(4)]
    return states + [np.asarray(rng.uniform(-s, s, (2 * _H, 5 * _H)), dtype),
                     np.asarray(rng.uniform(-s, s, (5 * _H,)), dtype)]


@pytest.mark.parametrize("dtype,mode,lay", CELL_CASES, ids=CELL_IDS)
def test_tree_lstm_cell(dtype, mode, lay):
    xs = [C.layout(a, lay) for a in _tree_inputs(dtype, np.random.default_rng(33))]
    C.check(dn.tree_lstm_cell, _torch_tree_cell, xs, range(6), mode=mode)
    C.check(dn.nn.functional.tree_lstm_cell, _torch_tree_cell, xs, range(6), mode=mode)


@pytest.mark.parametrize("dtype,mode,lay", CELL_CASES, ids=CELL_IDS)
def test_tree_lstm_leaf(dtype, mode, lay):
    rng = np.random.default_rng(34)
    xs = [C.layout(a, lay) for a in (C.draw(rng, (4, _I), dtype),
                                     np.asarray(rng.uniform(-0.4, 0.4, (_I, 3 * _H)), dtype),
                                     np.asarray(rng.uniform(-0.4, 0.4, (3 * _H,)), dtype))]
    C.check(dn.tree_lstm_leaf, _torch_tree_leaf, xs, range(3), mode=mode)
    C.check(dn.nn.functional.tree_lstm_leaf, _torch_tree_leaf, xs, range(3), mode=mode)


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_tree_lstm_small_tree(mode):
    # a tree ((a b) c): leaves, then an internal node whose left child is internal
    rng = np.random.default_rng(35)
    s = 0.4
    x = C.draw(rng, (3, _I))
    wl, bl = rng.uniform(-s, s, (_I, 3 * _H)), rng.uniform(-s, s, (3 * _H,))
    w, b = rng.uniform(-s, s, (2 * _H, 5 * _H)), rng.uniform(-s, s, (5 * _H,))

    def model(m, cell, leaf, cat):
        def f(x, wl, bl, w, b):
            h, c = leaf(x, wl, bl)
            h_ab, c_ab = cell(h[0:1], h[1:2], c[0:1], c[1:2], w, b)
            return cell(h_ab, h[2:3], c_ab, c[2:3], w, b)
        return f

    C.check(model(dn, dn.tree_lstm_cell, dn.tree_lstm_leaf, dn.concat),
            model(torch, _torch_tree_cell, _torch_tree_leaf, torch.cat), [x, wl, bl, w, b], range(5), mode=mode)


# --------------------------------------------------------------------------
# modules through functional_call (parameters are inputs of the comparison)
# --------------------------------------------------------------------------

def _module_pair(name, dtype):
    tdt = C.torch_dtype(dtype)
    if name == "linear":
        return nn.Linear(4, 3, dtype=dtype), torch.nn.Linear(4, 3, dtype=tdt)
    if name == "linear-nobias":
        return nn.Linear(4, 3, bias=False, dtype=dtype), torch.nn.Linear(4, 3, bias=False, dtype=tdt)
    if name == "sequential":
        return (nn.Sequential(nn.Linear(4, 6, dtype=dtype), nn.Tanh(), nn.Linear(6, 5, dtype=dtype), nn.ReLU(),
                              nn.Identity(), nn.Linear(5, 2, dtype=dtype), nn.Sigmoid()),
                torch.nn.Sequential(torch.nn.Linear(4, 6, dtype=tdt), torch.nn.Tanh(), torch.nn.Linear(6, 5, dtype=tdt),
                                    torch.nn.ReLU(), torch.nn.Identity(), torch.nn.Linear(5, 2, dtype=tdt),
                                    torch.nn.Sigmoid()))
    if name.startswith("rnn"):
        nl = "relu" if name == "rnn-relu" else "tanh"
        return nn.RNNCell(4, 3, nonlinearity=nl, dtype=dtype), torch.nn.RNNCell(4, 3, nonlinearity=nl, dtype=tdt)
    if name == "gru":
        return nn.GRUCell(4, 3, dtype=dtype), torch.nn.GRUCell(4, 3, dtype=tdt)
    if name == "gru-nobias":
        return nn.GRUCell(4, 3, bias=False, dtype=dtype), torch.nn.GRUCell(4, 3, bias=False, dtype=tdt)
    if name == "lstm":
        return nn.LSTMCell(4, 3, dtype=dtype), torch.nn.LSTMCell(4, 3, dtype=tdt)
    if name == "lstm-nobias":
        return nn.LSTMCell(4, 3, bias=False, dtype=dtype), torch.nn.LSTMCell(4, 3, bias=False, dtype=tdt)
    raise ValueError(name)


# (name, input shapes after the parameters, how the module is called)
MODULES = [
    ("linear", [(5, 4)], None), ("linear", [(4,)], None), ("linear", [(2, 5, 4)], None),
    ("linear-nobias", [(5, 4)], None), ("sequential", [(5, 4)], None),
    ("rnn", [(5, 4), (5, 3)], None), ("rnn-relu", [(5, 4), (5, 3)], None), ("rnn", [(5, 4)], None),
    ("rnn", [(4,), (3,)], None),
    ("gru", [(5, 4), (5, 3)], None), ("gru", [(5, 4)], None), ("gru", [(4,), (3,)], None),
    ("gru-nobias", [(5, 4), (5, 3)], None),
    ("lstm", [(5, 4), (5, 3), (5, 3)], "pair"), ("lstm", [(5, 4)], None), ("lstm", [(4,), (3,), (3,)], "pair"),
    ("lstm-nobias", [(5, 4), (5, 3), (5, 3)], "pair"),
]


def _module_cases():
    out = []
    for name, shapes, how in MODULES:
        cell = name not in ("linear", "linear-nobias", "sequential")
        for dt in C.FLOATS:
            for mode in MODES:
                # the zero initial state of a cell needs the batch size when the graph is built
                if mode == "static-unknown" and cell and len(shapes) == 1:
                    continue
                sid = "x".join(map(str, shapes[0])) + ("-state" if len(shapes) > 1 else "")
                out.append(pytest.param(name, shapes, how, dt, mode, id=f"{name}-{sid}-{np.dtype(dt).name}-{mode}"))
    return out


@pytest.mark.parametrize("name,shapes,how,dtype,mode", _module_cases())
def test_module(name, shapes, how, dtype, mode):
    dmod, tmod = _module_pair(name, dtype)
    # the torch module's initial weights, loaded into dynnets' (PyTorch's names and shapes)
    dmod.load_state_dict({k: v.detach().numpy() for k, v in tmod.state_dict().items()})
    names = [n for n, _ in dmod.named_parameters()]
    assert names == [n for n, _ in tmod.named_parameters()]
    params = [p.numpy().copy() for p in dmod.parameters()]
    rng = np.random.default_rng(40)
    xs = [C.draw(rng, s, dtype) for s in shapes]
    np_ = len(params)

    def call(mod, fc, ps, args):
        if how == "pair":
            return fc(mod, dict(zip(names, ps)), args[0], (args[1], args[2]))
        return fc(mod, dict(zip(names, ps)), *args)

    def torch_fc(mod, p, *args):
        return torch.func.functional_call(mod, p, args)

    C.check(lambda *a: call(dmod, functional_call, a[:np_], a[np_:]),
            lambda *a: call(tmod, torch_fc, a[:np_], a[np_:]),
            params + xs, range(np_ + len(xs)), mode=mode)


@pytest.mark.parametrize("name,shapes,how", [m for m in MODULES if m[0] in ("sequential", "rnn", "gru", "lstm")],
                         ids=lambda v: "x".join(map(str, v[0])) if isinstance(v, list) else str(v))
@pytest.mark.parametrize("mode", ["eager", "traced"])
def test_module_called_on_inputs(name, shapes, how, mode):
    # the module called as a user does, its own Parameters in the graph: eagerly, or traced into a static
    # plan (a static graph captures eager Parameters only while tracing) with the parameters' gradients
    dmod, tmod = _module_pair(name, np.float64)
    dmod.load_state_dict({k: v.detach().numpy() for k, v in tmod.state_dict().items()})
    xs = [C.draw(np.random.default_rng(47), s) for s in shapes]

    def call(mod, args):
        return mod(args[0], (args[1], args[2])) if how == "pair" else mod(*args)

    if mode == "eager":
        C.check(lambda *a: call(dmod, a), lambda *a: call(tmod, a), xs, range(len(xs)))
        return
    want, _, cots = C.run_torch(lambda *a: call(tmod, a), xs, ())
    tloss = sum((o * torch.tensor(c)).sum() for o, c in zip(C._tuple(call(tmod, [torch.tensor(x) for x in xs])),
                                                             cots))
    tloss.backward()

    def fn(*a):
        outs = C._tuple(call(dmod, a))
        return (C._loss(outs, cots),) + outs

    step = ds.trace(fn, grads_of=dmod)
    for _ in range(3):                     # the first call traces, later ones run the compiled plan
        out, grads = step(*xs)
        C.assert_close(out[0].data, tloss.detach().numpy(), np.float64, "traced loss")
        for o, w in zip(out[1:], want):
            C.assert_close(o.data, w, np.float64, "traced output")
        for g, (pn, tp) in zip(grads, tmod.named_parameters()):
            C.assert_close(g, tp.grad.numpy(), np.float64, f"traced gradient of {pn}")
    assert step.traces == 1


@pytest.mark.parametrize("kind", ["linear", "gru", "lstm"])
def test_module_backward_fills_parameter_grads(kind):
    # the ordinary eager path: module(x).backward() and each Parameter's .grad
    dmod, tmod = _module_pair(kind, np.float64)
    dmod.load_state_dict({k: v.detach().numpy() for k, v in tmod.state_dict().items()})
    x = C.draw(np.random.default_rng(41), (5, 4))
    d_out, t_out = dmod(dn.tensor(x)), tmod(torch.tensor(x))
    d_out = d_out[0] if isinstance(d_out, tuple) else d_out
    t_out = t_out[0] if isinstance(t_out, tuple) else t_out
    (d_out * d_out).sum().backward()
    (t_out * t_out).sum().backward()
    for (n, p), (tn, tp) in zip(dmod.named_parameters(), tmod.named_parameters()):
        C.assert_close(p.grad.data, tp.grad.numpy(), np.float64, n)


@pytest.mark.parametrize("kind", ["linear", "embedding", "rnn", "gru", "lstm"])
def test_initialisation_as_torch(kind):
    # different generators, the same distributions: U(-1/sqrt(fan), 1/sqrt(fan)), fan = in_features for
    # Linear and hidden_size for the cells, and N(0, 1) for Embedding; checked on both sides
    dmod, tmod, bound = {"linear": (nn.Linear(400, 300, rng=0), torch.nn.Linear(400, 300), 1 / math.sqrt(400)),
                         "embedding": (nn.Embedding(400, 300, rng=0), torch.nn.Embedding(400, 300), None),
                         "rnn": (nn.RNNCell(50, 400, rng=0), torch.nn.RNNCell(50, 400), 1 / math.sqrt(400)),
                         "gru": (nn.GRUCell(50, 400, rng=0), torch.nn.GRUCell(50, 400), 1 / math.sqrt(400)),
                         "lstm": (nn.LSTMCell(50, 400, rng=0), torch.nn.LSTMCell(50, 400), 1 / math.sqrt(400))}[kind]
    for (n, p), (tn, tp) in zip(dmod.named_parameters(), tmod.named_parameters()):
        for a in (p.numpy(), tp.detach().numpy()):
            assert n == tn and a.shape == p.numpy().shape and a.dtype == np.float32
            if bound is None:
                assert abs(a.mean()) < 0.01 and abs(a.std() - 1) < 0.01
            else:
                assert np.abs(a).max() <= bound and np.abs(a).max() > 0.95 * bound
                assert abs(a.std() - bound / math.sqrt(3)) < 0.1 * bound


def test_embedding_module_padding_idx_and_from_pretrained():
    w = C.draw(np.random.default_rng(42), (6, 3))
    ids = np.array([[0, 2, 2], [5, 0, 1]])
    for pad in (None, 2, -1):
        d = nn.Embedding.from_pretrained(w, freeze=False, padding_idx=pad)
        t = torch.nn.Embedding.from_pretrained(torch.tensor(w), freeze=False, padding_idx=pad)
        cot = C.draw(np.random.default_rng(43), (2, 3, 3))
        (d(ids) * cot).sum().backward()
        (t(torch.tensor(ids)) * torch.tensor(cot)).sum().backward()
        C.assert_close(d(ids).data, t(torch.tensor(ids)).detach().numpy(), np.float64, f"padding_idx={pad}")
        C.assert_close(d.weight.grad.data, t.weight.grad.numpy(), np.float64, f"gradient, padding_idx={pad}")
    # a fresh padded table starts with the padding row zeroed, as torch's
    assert not nn.Embedding(6, 3, padding_idx=4, rng=0).weight.numpy()[4].any()
    assert not torch.nn.Embedding(6, 3, padding_idx=4).weight.detach().numpy()[4].any()
    assert nn.Embedding.from_pretrained(w).weight.requires_grad == \
        torch.nn.Embedding.from_pretrained(torch.tensor(w)).weight.requires_grad


# --------------------------------------------------------------------------
# dropout: torch's semantics (the masks come from different generators)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.0, 0.3, 0.75])
@pytest.mark.parametrize("dtype", C.FLOATS)
def test_dropout_semantics_as_torch(p, dtype):
    x = C.draw(np.random.default_rng(44), (200, 50), dtype, "nonzero")
    for out, grad_of in (_dn_dropout(x, p), _torch_dropout(x, p)):
        out = np.asarray(out)
        kept = out != 0
        assert out.dtype == dtype
        # kept elements scaled by 1/(1-p), dropped ones zero; the gradient is the same mask and scale
        np.testing.assert_allclose(out[kept], x[kept] / (1 - p), rtol=1e-6)
        np.testing.assert_allclose(grad_of, kept / (1 - p), rtol=1e-6)
        assert abs((1 - kept.mean()) - p) < 0.02
    for mod, tmod in ((nn.Dropout(p, rng=0), torch.nn.Dropout(p)),):
        mod.eval()
        tmod.eval()
        np.testing.assert_array_equal(mod(dn.tensor(x)).data, tmod(torch.tensor(x)).numpy())


def _dn_dropout(x, p):
    t = dn.tensor(x, requires_grad=True)
    out = dn.dropout(t, p, rng=0)
    out.sum().backward()
    return out.data, t.grad.data


def _torch_dropout(x, p):
    t = torch.tensor(x, requires_grad=True)
    out = F.dropout(t, p)
    out.sum().backward()
    return out.detach().numpy(), t.grad.numpy()


def test_dropout_p_one_and_eval_as_torch():
    x = C.draw(np.random.default_rng(45), (4, 3))
    np.testing.assert_array_equal(nn.Dropout(1.0, rng=0)(dn.tensor(x)).data, torch.nn.Dropout(1.0)(torch.tensor(x)))
    np.testing.assert_array_equal(dn.dropout(dn.tensor(x), 0.5, rng=0, training=False).data,
                                  F.dropout(torch.tensor(x), 0.5, training=False).numpy())


# --------------------------------------------------------------------------
# gradient clipping
# --------------------------------------------------------------------------

@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
@pytest.mark.parametrize("dtype", C.FLOATS)
def test_clip_grad_norm(norm_type, max_norm, dtype):
    rng = np.random.default_rng(46)
    grads = [C.draw(rng, s, dtype) for s in ((3, 4), (5,), ())]
    dps = [dn.Parameter(np.zeros_like(g)) for g in grads]
    tps = [torch.nn.Parameter(torch.zeros(g.shape, dtype=C.torch_dtype(dtype))) for g in grads]
    for p, t, g in zip(dps, tps, grads):
        p.grad = g.copy()
        t.grad = torch.tensor(g)
    got = clip_grad_norm_(dps, max_norm, norm_type)
    want = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type)
    C.assert_close(got, want.numpy(), dtype, "total norm")
    for p, t in zip(dps, tps):
        C.assert_close(p.grad.data, t.grad.numpy(), dtype, "clipped gradient")


# --------------------------------------------------------------------------
# optimizers: the same steps as torch.optim
# --------------------------------------------------------------------------

_A = np.random.default_rng(50).standard_normal((4, 3))


def _loss_dn(ws):
    w, v = ws
    return dn.sum(dn.tanh(dn.matmul(dn.tensor(_A), w)) ** 2) + dn.sum(v * v * v) * 0.1 + dn.sum(w * v[0])


def _loss_torch(ws):
    w, v = ws
    return (torch.tanh(torch.tensor(_A) @ w) ** 2).sum() + (v * v * v).sum() * 0.1 + (w * v[0]).sum()


def _w0():
    rng = np.random.default_rng(51)
    return [rng.standard_normal((3, 2)), rng.standard_normal((2,))]


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.5)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("SGD", dict(lr=0.1, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.1, nesterov=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, eps=1e-3)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.9))),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, eps=1e-3)),
]


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                                                     for n, kw in OPTIMIZERS])
def test_optimizer_steps(name, kw):
    dws = [dn.Parameter(w.copy()) for w in _w0()]
    tws = [torch.nn.Parameter(torch.tensor(w.copy())) for w in _w0()]
    dopt = getattr(dn.optim, name)(dws, **kw)
    topt = getattr(torch.optim, name)(tws, **kw)
    for step in range(6):
        dopt.zero_grad()
        topt.zero_grad()
        _loss_dn(dws).backward()
        _loss_torch(tws).backward()
        dopt.step()
        topt.step()
        for d, t in zip(dws, tws):
            C.assert_close(d.data, t.detach().numpy(), np.float64, f"{name} step {step + 1}", rtol=1e-9)


@pytest.mark.parametrize("name", ["SGD", "Adagrad", "Adam"])
def test_optimizer_param_groups(name):
    w0 = _w0()
    dws = [dn.Parameter(w.copy()) for w in w0]
    tws = [torch.nn.Parameter(torch.tensor(w.copy())) for w in w0]
    groups = lambda ps: [{"params": [ps[0]], "lr": 0.02}, {"params": [ps[1]]}]  # noqa: E731
    dopt = getattr(dn.optim, name)(groups(dws), lr=0.1)
    topt = getattr(torch.optim, name)(groups(tws), lr=0.1)
    for _ in range(4):
        dopt.zero_grad()
        topt.zero_grad()
        _loss_dn(dws).backward()
        _loss_torch(tws).backward()
        dopt.step()
        topt.step()
    for d, t in zip(dws, tws):
        C.assert_close(d.data, t.detach().numpy(), np.float64, name, rtol=1e-9)


def _sparse_run(dn_opt, torch_opt, steps=4, torch_sparse=True):
    """An embedding table trained on a few rows per step: dynnets' row-sparse
    gradient against torch's (sparse=True or dense)."""
    w0 = C.draw(np.random.default_rng(52), (7, 3))
    batches = [np.array([1, 3, 3]), np.array([0, 1]), np.array([6, 6, 6, 2]), np.array([3])]
    d = nn.Embedding.from_pretrained(w0, freeze=False)
    t = torch.nn.Embedding.from_pretrained(torch.tensor(w0), freeze=False, sparse=torch_sparse)
    dopt, topt = dn_opt(d.parameters()), torch_opt(t.parameters())
    cot = C.draw(np.random.default_rng(53), (4, 3))
    for ids in batches[:steps]:
        dopt.zero_grad()
        topt.zero_grad()
        (d(ids) * cot[:len(ids)]).sum().backward()
        (t(torch.tensor(ids)) * torch.tensor(cot[:len(ids)])).sum().backward()
        dopt.step()
        topt.step()
        C.assert_close(d.weight.data, t.weight.detach().numpy(), np.float64, "embedding table", rtol=1e-9)


def test_sparse_sgd():
    _sparse_run(lambda p: dn.optim.SGD(p, lr=0.3), lambda p: torch.optim.SGD(p, lr=0.3))


@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")
def test_sparse_adagrad():
    _sparse_run(lambda p: dn.optim.Adagrad(p, lr=0.3), lambda p: torch.optim.Adagrad(p, lr=0.3))


def test_sparse_gradient_dense_adam():
    # lazy=False densifies: every row's moments decay, exactly dense Adam
    _sparse_run(lambda p: dn.optim.Adam(p, lr=0.1), lambda p: torch.optim.Adam(p, lr=0.1), torch_sparse=False)


def test_sparse_gradient_momentum_sgd():
    _sparse_run(lambda p: dn.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
                lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01), torch_sparse=False)


def test_lazy_adam_as_sparse_adam_with_tiny_eps():
    _sparse_run(lambda p: dn.optim.Adam(p, lr=0.1, eps=1e-30, lazy=True),
                lambda p: torch.optim.SparseAdam(list(p), lr=0.1, eps=1e-30))


def test_lazy_adam_as_sparse_adam_default_eps():
    # eps is added before the bias correction, as SparseAdam does
    _sparse_run(lambda p: dn.optim.Adam(p, lr=0.1, eps=1e-3, lazy=True),
                lambda p: torch.optim.SparseAdam(list(p), lr=0.1, eps=1e-3))


# --------------------------------------------------------------------------
# manual_seed: torch's convention (the numbers come from another generator)
# --------------------------------------------------------------------------

def test_manual_seed_repeats_initialisation_and_dropout_as_torch():
    def draws(lib, mod):
        lib.manual_seed(5)
        assert lib.initial_seed() == 5
        layers = [mod.Linear(4, 3), mod.LSTM(3, 2, num_layers=2, dropout=0.5), mod.Embedding(6, 2)]
        drop = mod.Dropout(0.5)
        x = np.ones((4, 6), np.float32)
        masks = [np.asarray(drop(lib.tensor(x) if lib is torch else dn.tensor(x))) != 0 for _ in range(2)]
        ws = [np.array(p.detach().numpy() if lib is torch else p.numpy()) for m in layers for p in m.parameters()]
        return ws, masks

    for lib, mod in ((dn, nn), (torch, torch.nn)):
        first, again = draws(lib, mod), draws(lib, mod)
        for a, b in zip(first[0] + first[1], again[0] + again[1]):
            np.testing.assert_array_equal(a, b)
        # two calls of one Dropout draw different masks
        assert (first[1][0] != first[1][1]).any()
