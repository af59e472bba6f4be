"""The loss modules (``nn.CrossEntropyLoss``, ``nn.NLLLoss``, ``nn.MSELoss``
and ``nn.functional.nll_loss`` / ``mse_loss``) and the multi-layer recurrent
layers (``nn.RNN``, ``nn.GRU``, ``nn.LSTM``) against PyTorch: values and the
gradients of inputs, targets, initial states and every parameter (the layers
run through ``functional_call`` so their parameters are inputs of the
comparison), in float64 and float32, on contiguous and non-contiguous inputs.

Both also run on static Values and under ``ds.trace`` (the tests at the end
of each part); ``tests/nn`` compares them with torch in float64 too.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.static as ds  # noqa: E402
from dynnets import nn  # noqa: E402
from dynnets.nn.utils import functional_call  # noqa: E402
from dynnets.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

F = torch.nn.functional
EAGER_LAYOUTS = ("contiguous", "transposed", "strided")


def _dtype_layout_cases():
    return [pytest.param(dt, lay, id=f"{np.dtype(dt).name}-{lay}") for dt in C.FLOATS for lay in EAGER_LAYOUTS]


# --------------------------------------------------------------------------
# losses
# --------------------------------------------------------------------------

_K = 4
_CW = np.array([0.5, 2.0, 1.0, 0.25])
# scores shape -> class-index targets (the class axis is the second, or the only one)
_TARGETS = {
    "NC": ((6, _K), np.array([0, 3, 1, 1, 2, 3])),
    "C": ((_K,), np.array(2)),
    "NCd": ((2, _K, 3), np.array([[0, 1, 3], [2, 2, 0]])),
}
# the same with some rows ignored (torch's default ignore_index, and a real class index)
_IGNORED = {
    "NC": np.array([0, -100, 1, 1, -100, 3]),
    "NCd": np.array([[0, -100, 3], [2, -100, 0]]),
}

# (id, keyword arguments for both modules, shape, ignored rows)
CE_CASES = [
    ("plain", {}, "NC", False), ("plain", {}, "C", False), ("plain", {}, "NCd", False),
    ("weight", {"weight": _CW}, "NC", False), ("weight", {"weight": _CW}, "NCd", False),
    ("weight", {"weight": _CW}, "C", False),
    ("ignore", {}, "NC", True), ("ignore", {}, "NCd", True),
    ("ignore-class", {"ignore_index": 1}, "NC", False),
    ("weight-ignore", {"weight": _CW}, "NC", True), ("weight-ignore", {"weight": _CW}, "NCd", True),
    ("smoothing", {"label_smoothing": 0.2}, "NC", False), ("smoothing", {"label_smoothing": 0.2}, "NCd", False),
    ("smoothing-weight-ignore", {"label_smoothing": 0.1, "weight": _CW}, "NC", True),
    ("smoothing-weight-ignore", {"label_smoothing": 0.1, "weight": _CW}, "NCd", True),
]


def _torch_kw(kw, dtype):
    return {k: (torch.tensor(v, dtype=C.torch_dtype(dtype)) if k == "weight" else v) for k, v in kw.items()}


def _loss_cases(cases, with_layouts=True):
    out = []
    for cid, kw, shape, ignored in cases:
        for red in ("mean", "sum", "none"):
            for dt in C.FLOATS:
                for lay in EAGER_LAYOUTS if with_layouts else ("contiguous",):
                    out.append(pytest.param(kw, shape, ignored, red, dt, lay,
                                            id=f"{cid}-{shape}-{red}-{np.dtype(dt).name}-{lay}"))
    return out


@pytest.mark.parametrize("kw,shape,ignored,reduction,dtype,lay", _loss_cases(CE_CASES, with_layouts=False)
                         + [p for p in _loss_cases([CE_CASES[0], CE_CASES[2], CE_CASES[-1]])
                            if "-contiguous" not in p.id])
def test_cross_entropy_loss(kw, shape, ignored, reduction, dtype, lay):
    s, y = _TARGETS[shape]
    y = _IGNORED[shape] if ignored else y
    x = C.layout(C.draw(np.random.default_rng(60), s, dtype), lay)
    dmod = nn.CrossEntropyLoss(reduction=reduction, **kw)
    tmod = torch.nn.CrossEntropyLoss(reduction=reduction, **_torch_kw(kw, dtype))
    # the targets are an input of both (an int64 Tensor in dynnets)
    C.check(dmod, tmod, [x, y], [0])


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", ["NC", "C", "NCd"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", C.FLOATS)
def test_cross_entropy_loss_probability_targets(smoothing, weighted, shape, reduction, dtype):
    # class probabilities along the class axis: both the scores and the targets get gradients
    s = _TARGETS[shape][0]
    rng = np.random.default_rng(61)
    x = C.draw(rng, s, dtype)
    p = np.moveaxis(rng.dirichlet(np.ones(_K), s[:1] + s[2:] if len(s) > 1 else ()), -1, min(1, len(s) - 1))
    p = np.asarray(p, dtype)
    kw = {"label_smoothing": smoothing, **({"weight": _CW} if weighted else {})}
    C.check(nn.CrossEntropyLoss(reduction=reduction, **kw),
            torch.nn.CrossEntropyLoss(reduction=reduction, **_torch_kw(kw, dtype)), [x, p], [0, 1])


NLL_CASES = [c for c in CE_CASES if "label_smoothing" not in c[1]]


@pytest.mark.parametrize("kw,shape,ignored,reduction,dtype,lay", _loss_cases(NLL_CASES, with_layouts=False)
                         + [p for p in _loss_cases([NLL_CASES[0], NLL_CASES[-1]]) if "-contiguous" not in p.id])
def test_nll_loss(kw, shape, ignored, reduction, dtype, lay):
    s, y = _TARGETS[shape]
    y = _IGNORED[shape] if ignored else y
    x = C.layout(C.draw(np.random.default_rng(62), s, dtype), lay)
    tkw = _torch_kw(kw, dtype)
    C.check(nn.NLLLoss(reduction=reduction, **kw), torch.nn.NLLLoss(reduction=reduction, **tkw), [x, y], [0])
    C.check(lambda a, b: nn.functional.nll_loss(a, b, reduction=reduction, **kw),
            lambda a, b: F.nll_loss(a, b, reduction=reduction, **tkw), [x, y], [0])


def test_nll_of_log_softmax_is_cross_entropy():
    x = C.draw(np.random.default_rng(63), (6, _K))
    y = _TARGETS["NC"][1]
    C.check(lambda a: nn.NLLLoss(weight=_CW)(dn.log_softmax(a, axis=1), y),
            lambda a: torch.nn.CrossEntropyLoss(weight=torch.tensor(_CW))(a, torch.tensor(y)), [x], [0])


@pytest.mark.parametrize("shape", [(3, 4), (), (2, 3, 2)], ids=["2d", "0d", "3d"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype,lay", _dtype_layout_cases())
def test_mse_loss(shape, reduction, dtype, lay):
    rng = np.random.default_rng(64)
    x, y = (C.layout(C.draw(rng, shape, dtype), lay) for _ in range(2))
    C.check(nn.MSELoss(reduction=reduction), torch.nn.MSELoss(reduction=reduction), [x, y], [0, 1])
    C.check(lambda a, b: nn.functional.mse_loss(a, b, reduction=reduction),
            lambda a, b: F.mse_loss(a, b, reduction=reduction), [x, y], [0, 1])


@pytest.mark.parametrize("kw", [{}, {"weight": _CW}, {"label_smoothing": 0.2}])
@pytest.mark.parametrize("loss", ["CrossEntropyLoss", "NLLLoss"])
def test_loss_all_rows_ignored(loss, kw):
    # torch's mean over no rows: nan (0/0), with a zero gradient
    if loss == "NLLLoss" and "label_smoothing" in kw:
        pytest.skip("NLLLoss has no label_smoothing")
    x = C.draw(np.random.default_rng(65), (3, _K))
    C.check(getattr(nn, loss)(**kw), getattr(torch.nn, loss)(**_torch_kw(kw, np.float64)), [x, np.full(3, -100)],
            [0])
    C.check(getattr(nn, loss)(**kw), getattr(torch.nn, loss)(**_torch_kw(kw, np.float64)),
            [np.zeros((0, _K)), np.zeros(0, np.int64)], [0])


def test_loss_rejections_match_torch():
    x = np.zeros((3, _K))
    for bad in (np.array([0, 4, 1]), np.array([0, -1, 1]), np.array([0, 1])):
        for loss in ("CrossEntropyLoss", "NLLLoss"):
            with pytest.raises((IndexError, RuntimeError, ValueError)):
                getattr(torch.nn, loss)()(torch.tensor(x), torch.tensor(bad))
            with pytest.raises(ValueError, match=loss):
                getattr(nn, loss)()(dn.tensor(x), bad)
    for loss in ("CrossEntropyLoss", "NLLLoss", "MSELoss"):
        with pytest.raises(ValueError):
            getattr(torch.nn, loss)(reduction="bogus")(torch.tensor(x), torch.tensor(x))
        with pytest.raises(ValueError, match="reduction"):
            getattr(nn, loss)(reduction="bogus")


_LOSS_FNS = {
    "CrossEntropyLoss": (lambda x: nn.CrossEntropyLoss()(x, _TARGETS["NC"][1]),
                         lambda x: torch.nn.CrossEntropyLoss()(x, torch.tensor(_TARGETS["NC"][1]))),
    "NLLLoss": (lambda x: nn.NLLLoss()(x, _TARGETS["NC"][1]),
                lambda x: torch.nn.NLLLoss()(x, torch.tensor(_TARGETS["NC"][1]))),
    "MSELoss": (lambda x: nn.MSELoss()(x, np.ones((6, _K))), lambda x: torch.nn.MSELoss()(x, torch.ones(6, _K,
                                                                                              dtype=x.dtype))),
}


@pytest.mark.parametrize("mode", ["static", "traced"])
@pytest.mark.parametrize("loss", sorted(_LOSS_FNS))
def test_loss_static_and_traced(loss, mode):
    f, tf = _LOSS_FNS[loss]
    x = C.draw(np.random.default_rng(66), (6, _K))
    if mode == "static":
        C.check(f, tf, [x], [0], mode="static")
        return
    want, _, _ = C.run_torch(tf, [x], ())
    C.assert_close(ds.trace(f)(x).data, want[0], np.float64, f"traced {loss}")


# --------------------------------------------------------------------------
# RNN / GRU / LSTM layers
# --------------------------------------------------------------------------

_E, _H, _T, _B = 4, 3, 5, 3
_LENGTHS = np.array([2, 5, 3])          # unsorted: the layer sorts and restores the batch's order

# (id, layer keyword arguments, input form, with an initial state)
LAYER_CASES = [
    ("seq", dict(num_layers=1), "full", False),
    ("deep-bi", dict(num_layers=2, bidirectional=True), "full", False),
    ("deep-bi-state", dict(num_layers=2, bidirectional=True), "full", True),
    ("batch_first", dict(batch_first=True), "full", False),
    ("batch_first-bi-state", dict(batch_first=True, bidirectional=True), "full", True),
    ("unbatched-bi", dict(bidirectional=True), "unbatched", False),
    ("unbatched-state", dict(num_layers=2), "unbatched", True),
    ("lengths-bi", dict(num_layers=2, bidirectional=True), "lengths", False),
    ("lengths-state", dict(bidirectional=True), "lengths", True),
    ("lengths-batch_first", dict(batch_first=True), "lengths", False),
    ("packed-bi", dict(num_layers=2, bidirectional=True), "packed", False),
    ("nobias", dict(bias=False, num_layers=2), "full", False),
]
RNN_ONLY = [
    ("relu", dict(nonlinearity="relu", num_layers=2), "full", False),
    ("relu-lengths-state", dict(nonlinearity="relu", bidirectional=True), "lengths", True),
]


def _layer_pair(kind, kw, dtype):
    tl = getattr(torch.nn, kind)(_E, _H, dtype=C.torch_dtype(dtype), **kw)
    dl = getattr(nn, kind)(_E, _H, dtype=dtype, **kw)
    dl.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    assert [n for n, _ in dl.named_parameters()] == [n for n, _ in tl.named_parameters()]
    return dl, tl


def _layer_inputs(kind, kw, form, state, dtype, lay):
    rng = np.random.default_rng(70)
    bf = kw.get("batch_first", False)
    shape = (_T, _E) if form == "unbatched" else ((_B, _T, _E) if bf else (_T, _B, _E))
    xs = [C.draw(rng, shape, dtype)]
    if state:
        LD = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        sshape = (LD, _H) if form == "unbatched" else (LD, _B, _H)
        xs += [C.draw(rng, sshape, dtype) * 0.5 for _ in range(2 if kind == "LSTM" else 1)]
    return [C.layout(a, lay) for a in xs]


def _flat(kind, out, st):
    return (out,) + (tuple(st) if kind == "LSTM" else (st,))


def _hx(kind, h):
    return None if not h else (tuple(h) if kind == "LSTM" else h[0])


def _dn_layer(kind, dl, form, bf):
    def run(params, x, *h):
        if form == "packed":
            packed = pack_padded_sequence(x, _LENGTHS, batch_first=bf, enforce_sorted=False)
            out, st = functional_call(dl, params, packed, _hx(kind, h))
            out = pad_packed_sequence(out, batch_first=bf, total_length=_T)[0]
        elif form == "lengths":
            out, st = functional_call(dl, params, x, _hx(kind, h), lengths=_LENGTHS)
        else:
            out, st = functional_call(dl, params, x, _hx(kind, h))
        return _flat(kind, out, st)
    return run


def _torch_layer(kind, tl, form, bf):
    # torch's padded batches with lengths go through pack_padded_sequence / pad_packed_sequence
    rnn = torch.nn.utils.rnn
    packed = form in ("packed", "lengths")

    def run(params, x, *h):
        if packed:
            x = rnn.pack_padded_sequence(x, torch.tensor(_LENGTHS), batch_first=bf, enforce_sorted=False)
        out, st = torch.func.functional_call(tl, params, (x, _hx(kind, h)))
        if packed:
            out = rnn.pad_packed_sequence(out, batch_first=bf, total_length=_T)[0]
        return _flat(kind, out, st)
    return run


def _layer_cases():
    out = []
    for kind in ("RNN", "GRU", "LSTM"):
        for cid, kw, form, state in LAYER_CASES + (RNN_ONLY if kind == "RNN" else []):
            for dt in C.FLOATS:
                for lay in ("contiguous", "transposed") if cid in ("deep-bi-state", "lengths-state") \
                        else ("contiguous",):
                    out.append(pytest.param(kind, kw, form, state, dt, lay,
                                            id=f"{kind}-{cid}-{np.dtype(dt).name}-{lay}"))
    return out


@pytest.mark.parametrize("kind,kw,form,state,dtype,lay", _layer_cases())
def test_rnn_layer(kind, kw, form, state, dtype, lay):
    dl, tl = _layer_pair(kind, kw, dtype)
    names = [n for n, _ in dl.named_parameters()]
    params = [p.numpy().copy() for p in dl.parameters()]
    xs = _layer_inputs(kind, kw, form, state, dtype, lay)
    n = len(params)
    bf = kw.get("batch_first", False)
    d_run, t_run = _dn_layer(kind, dl, form, bf), _torch_layer(kind, tl, form, bf)
    # outputs, h_n (and c_n); gradients of every parameter, the input and the initial states
    C.check(lambda *a: d_run(dict(zip(names, a[:n])), *a[n:]),
            lambda *a: t_run(dict(zip(names, a[:n])), *a[n:]),
            params + xs, range(n + len(xs)))


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_rnn_layer_called_with_its_parameters(kind):
    # the ordinary path: layer(x) and backward() fill each Parameter's .grad as torch's
    dl, tl = _layer_pair(kind, dict(num_layers=2, bidirectional=True), np.float32)
    x = C.layout(C.draw(np.random.default_rng(71), (_T, _B, _E), np.float32), "strided")
    cot = C.draw(np.random.default_rng(72), (_T, _B, 2 * _H), np.float32)
    (dl(dn.tensor(x))[0] * cot).sum().backward()
    (tl(torch.tensor(np.ascontiguousarray(x)))[0] * torch.tensor(cot)).sum().backward()
    for (name, p), (_, tp) in zip(dl.named_parameters(), tl.named_parameters()):
        C.assert_close(p.grad.data, tp.grad.numpy(), np.float32, f"{kind}: gradient of {name}")


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_rnn_layer_dropout_in_eval_mode_as_torch(kind):
    # dropout between layers draws masks from different generators; in eval mode both skip it
    dl, tl = _layer_pair(kind, dict(num_layers=3, dropout=0.5), np.float64)
    dl.eval()
    tl.eval()
    x = C.draw(np.random.default_rng(73), (_T, _B, _E))
    for d, t in zip(_flat(kind, *dl(x)), _flat(kind, *tl(torch.tensor(x)))):
        C.assert_close(d.data, t.detach().numpy(), np.float64, f"{kind} eval with dropout")


@pytest.mark.parametrize("mode", ["static", "traced"])
@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_rnn_layer_static_and_traced(kind, mode):
    dl, tl = _layer_pair(kind, dict(num_layers=1), np.float64)
    x = C.draw(np.random.default_rng(74), (_T, _B, _E))
    if mode == "static":
        names = [n for n, _ in dl.named_parameters()]
        params = [p.numpy().copy() for p in dl.parameters()]
        n = len(params)
        C.check(lambda *a: _flat(kind, *functional_call(dl, dict(zip(names, a[:n])), a[n])),
                lambda *a: _flat(kind, *torch.func.functional_call(tl, dict(zip(names, a[:n])), (a[n],))),
                params + [x], range(n + 1), mode="static")
        return
    out = ds.trace(lambda a: dl(a)[0])(x)
    C.assert_close(out.data, tl(torch.tensor(x))[0].detach().numpy(), np.float64, f"traced {kind}")
