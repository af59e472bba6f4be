"""1-D convolution and pooling against PyTorch (issue 25): ``F.conv1d``,
``F.max_pool1d``, ``F.avg_pool1d``, ``F.adaptive_max_pool1d`` /
``adaptive_avg_pool1d`` and their modules, in float64: values and the
gradients of the input and of every parameter, eagerly and in static graphs
(known and unknown placeholder dimensions); a torch ``state_dict`` loads into
each module unchanged; ``layer_norm`` (now one primitive) as torch's.
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

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

TF = torch.nn.functional
MODES = ("eager", "static", "static-unknown")


def _x(*shape, seed=0):
    return C.draw(np.random.default_rng(seed), shape, np.float64)


def module_check(dmod, tmod, inputs, diff=(0,), rtol=1e-10, atol=1e-12, call=None, tcall=None):
    """Load ``tmod``'s state_dict into ``dmod`` unchanged, run both on the same
    inputs (float64), compare outputs, the gradients of the inputs in ``diff``
    and of every parameter (by name) for a random cotangent."""
    missing, unexpected = dmod.load_state_dict(tmod.state_dict())
    assert not missing and not unexpected
    call = call or (lambda m, *a: m(*a))
    tcall = tcall or call
    tin = [C.to_torch(a, requires_grad=(k in diff)) for k, a in enumerate(inputs)]
    din = [dn.tensor(a, requires_grad=(k in diff)) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
           for k, a in enumerate(inputs)]
    tout = tcall(tmod, *tin)
    dout = call(dmod, *din)
    touts = tout if isinstance(tout, tuple) else (tout,)
    douts = dout if isinstance(dout, tuple) else (dout,)
    rng = np.random.default_rng(7)
    loss_t, loss_d = 0, 0
    for k, (t, d) in enumerate(zip(touts, douts)):
        if t is None:
            assert d is None, f"output {k}: torch None, dynnets {d}"
            continue
        C.assert_close(d.data if hasattr(d, "data") else d, t.detach().numpy(), np.float64, f"output {k}", rtol, atol)
        cot = rng.standard_normal(tuple(t.shape))
        loss_t = loss_t + (t * torch.tensor(cot)).sum()
        loss_d = loss_d + (d * cot).sum()
    loss_t.backward()
    loss_d.backward()
    for k in diff:
        C.assert_close(din[k].grad.data, tin[k].grad.numpy(), np.float64, f"gradient of input {k}", rtol, atol)
    tparams = dict(tmod.named_parameters())
    dparams = dict(dmod.named_parameters())
    assert sorted(tparams) == sorted(dparams)
    for name, tp in tparams.items():
        tg = tp.grad.numpy() if tp.grad is not None else np.zeros(tuple(tp.shape))
        dg = dparams[name].grad.data if dparams[name].grad is not None else np.zeros(tuple(tp.shape))
        C.assert_close(dg, tg, np.float64, f"gradient of parameter {name}", rtol, atol)
    return douts


# --------------------------------------------------------------------------
# F.conv1d
# --------------------------------------------------------------------------

CONV = [  # (id, x shape, w shape, bias, kwargs)
    ("plain", (2, 3, 9), (4, 3, 3), True, {}),
    ("no-bias", (2, 3, 9), (4, 3, 3), False, {}),
    ("stride-pad", (2, 3, 10), (5, 3, 4), True, {"stride": 2, "padding": 2}),
    ("dilation", (1, 2, 11), (3, 2, 3), True, {"dilation": 2, "padding": 1}),
    ("same-odd", (3, 4, 7), (2, 4, 3), True, {"padding": "same"}),
    ("same-even-dilated", (3, 4, 7), (2, 4, 4), True, {"padding": "same", "dilation": 2}),
    ("valid", (2, 2, 5), (3, 2, 5), True, {"padding": "valid"}),
    ("tuples", (2, 2, 8), (3, 2, 2), True, {"stride": (3,), "padding": (1,), "dilation": (1,)}),
    ("length-1", (2, 3, 1), (4, 3, 1), True, {}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cid,xs,ws,bias,kw", CONV, ids=[c[0] for c in CONV])
def test_conv1d(cid, xs, ws, bias, kw, mode):
    ins = [_x(*xs), _x(*ws, seed=1)] + ([_x(ws[0], seed=2)] if bias else [])
    C.check(lambda x, w, *b: DF.conv1d(x, w, *b, **kw), lambda x, w, *b: TF.conv1d(x, w, *b, **kw), ins,
            diff=tuple(range(len(ins))), mode=mode, unknown=[(True, False, True)] + [None] * (len(ins) - 1))


def test_conv1d_unbatched_and_float32():
    x, w, b = _x(3, 8), _x(4, 3, 2, seed=1), _x(4, seed=2)
    C.check(lambda x, w, b: DF.conv1d(x, w, b, padding=1), lambda x, w, b: TF.conv1d(x, w, b, padding=1),
            [x, w, b], diff=(0, 1, 2))
    f = [a.astype(np.float32) for a in (_x(2, 3, 8), w, b)]
    C.check(lambda x, w, b: DF.conv1d(x, w, b, stride=2), lambda x, w, b: TF.conv1d(x, w, b, stride=2), f,
            diff=(0, 1, 2))


def test_conv1d_errors_name_op_and_arguments():
    x, w = dn.tensor(_x(2, 3, 9)), dn.tensor(_x(4, 2, 3))
    with pytest.raises(ValueError, match=r"conv1d: input.shape\[1\]=3 \(channels\) does not match weight.shape\[1\]=2"):
        DF.conv1d(x, w)
    with pytest.raises(ValueError, match="conv1d: padding='same' is not supported for strided"):
        DF.conv1d(x, dn.tensor(_x(4, 3, 3)), padding="same", stride=2)
    with pytest.raises(NotImplementedError, match="conv1d: groups=2"):
        DF.conv1d(x, dn.tensor(_x(4, 3, 3)), groups=2)
    with pytest.raises(ValueError, match="conv1d: the padded input length 2"):
        DF.conv1d(dn.tensor(_x(1, 3, 2)), dn.tensor(_x(4, 3, 3)))
    with pytest.raises(TypeError, match="Conv1d"):
        dnn.Conv1d(3, 4, 3)(dn.tensor(_x(1, 3, 5)))           # float64 input into a float32 layer, as torch raises


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1, "bias": False}, {"padding": "same", "dilation": 2}],
                         ids=["default", "stride-pad-nobias", "same-dilated"])
def test_conv1d_module_state_dict_values_and_parameter_gradients(kw):
    torch.manual_seed(0)
    tm = torch.nn.Conv1d(3, 5, 3, dtype=torch.float64, **kw)
    dm = dnn.Conv1d(3, 5, 3, dtype=np.float64, **kw)
    assert [n for n, _ in dm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert {k: tuple(v.shape) for k, v in dm.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    module_check(dm, tm, [_x(2, 3, 9)])


def test_conv1d_module_init_bounds_as_torch():
    m = dnn.Conv1d(6, 8, 5, rng=0)
    bound = 1 / np.sqrt(6 * 5)
    w, b = m.weight.data, m.bias.data
    assert w.dtype == np.float32 and w.shape == (8, 6, 5) and b.shape == (8,)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound and np.abs(b).max() <= bound


# --------------------------------------------------------------------------
# pooling
# --------------------------------------------------------------------------

def _distinct(*shape, seed=0):
    # distinct values: a tie would let torch and dynnets pick different argmaxes legitimately
    rng = np.random.default_rng(seed)
    return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 + rng.uniform(0, 0.01, shape)


MAXPOOL = [
    ("k2", (2, 3, 8), dict(kernel_size=2)),
    ("k3-s1-p1", (2, 3, 8), dict(kernel_size=3, stride=1, padding=1)),
    ("k3-s2-ceil", (2, 2, 8), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ("dilated", (1, 2, 9), dict(kernel_size=2, stride=1, dilation=3)),
    ("ceil-pad", (2, 2, 7), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    ("whole", (2, 3, 5), dict(kernel_size=5)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pid,xs,kw", MAXPOOL, ids=[p[0] for p in MAXPOOL])
def test_max_pool1d(pid, xs, kw, mode):
    C.check(lambda x: DF.max_pool1d(x, **kw), lambda x: TF.max_pool1d(x, **kw), [_distinct(*xs)], diff=(0,),
            mode=mode, unknown=[(True, False, False)])
    if mode == "eager":
        C.check(dnn.MaxPool1d(**kw), torch.nn.MaxPool1d(**kw), [_distinct(*xs)], diff=(0,))


def test_max_pool1d_ties_send_the_gradient_to_the_first_maximum_as_torch():
    x = np.array([[[1.0, 3.0, 3.0, 2.0, 2.0, 0.0]]])
    C.check(lambda x: DF.max_pool1d(x, 3, 1), lambda x: TF.max_pool1d(x, 3, 1), [x], diff=(0,))
    C.check(lambda x: DF.adaptive_max_pool1d(x, 1), lambda x: TF.adaptive_max_pool1d(x, 1), [x], diff=(0,))


AVGPOOL = [
    ("k2", (2, 3, 8), dict(kernel_size=2)),
    ("k3-s1-p1", (2, 3, 8), dict(kernel_size=3, stride=1, padding=1)),
    ("k3-p1-exclude", (2, 3, 8), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("ceil", (2, 2, 8), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ("ceil-pad-include", (2, 2, 7), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    ("ceil-pad-exclude", (2, 2, 7), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True,
                                         count_include_pad=False)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pid,xs,kw", AVGPOOL, ids=[p[0] for p in AVGPOOL])
def test_avg_pool1d(pid, xs, kw, mode):
    C.check(lambda x: DF.avg_pool1d(x, **kw), lambda x: TF.avg_pool1d(x, **kw), [_x(*xs)], diff=(0,),
            mode=mode, unknown=[(True, False, False)])
    if mode == "eager":
        C.check(dnn.AvgPool1d(**kw), torch.nn.AvgPool1d(**kw), [_x(*xs)], diff=(0,))


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_adaptive_pool1d(kind, size):
    x = _distinct(2, 3, 7)
    dfn, tfn = getattr(DF, f"adaptive_{kind}_pool1d"), getattr(TF, f"adaptive_{kind}_pool1d")
    for mode in MODES:
        C.check(lambda x: dfn(x, size), lambda x: tfn(x, size), [x], diff=(0,), mode=mode,
                unknown=[(True, False, False)])
    dmod = getattr(dnn, f"Adaptive{kind.capitalize()}Pool1d")(size)
    tmod = getattr(torch.nn, f"Adaptive{kind.capitalize()}Pool1d")(size)
    C.check(dmod, tmod, [x], diff=(0,))
    C.check(dmod, tmod, [x[0]], diff=(0,))          # unbatched (C, L)


def test_max_over_time_with_unknown_length_in_a_static_graph():
    x = _distinct(2, 3, 7)
    C.check(lambda x: DF.adaptive_max_pool1d(x, 1), lambda x: TF.adaptive_max_pool1d(x, 1), [x], diff=(0,),
            mode="static-unknown")


def test_pool_errors_name_op_and_arguments():
    x = dn.tensor(_x(1, 2, 5))
    with pytest.raises(ValueError, match="max_pool1d: pad should be at most half of effective kernel size"):
        DF.max_pool1d(x, 2, padding=2)
    with pytest.raises(ValueError, match="max_pool1d: input.shape=\\(1, 2, 5\\) is too short for kernel_size=6"):
        DF.max_pool1d(x, 6)
    with pytest.raises(NotImplementedError, match="return_indices"):
        DF.max_pool1d(x, 2, return_indices=True)


def test_kim_cnn_block_against_torch():
    """Conv1d -> ReLU -> max over time -> concat over three widths, as Kim 2014's classifier runs it."""
    torch.manual_seed(1)
    widths = (3, 4, 5)
    tconvs = torch.nn.ModuleList([torch.nn.Conv1d(6, 4, k, dtype=torch.float64) for k in widths])
    dconvs = dnn.ModuleList([dnn.Conv1d(6, 4, k, dtype=np.float64) for k in widths])

    def run(convs, x, F, cat):
        return cat([F.adaptive_max_pool1d(F.relu(c(x)), 1).squeeze(2) for c in convs], 1)
    module_check(dconvs, tconvs, [_x(3, 6, 9)],
                 call=lambda m, x: run(m, x, DF, lambda xs, d: dn.cat(xs, d)),
                 tcall=lambda m, x: run(m, x, TF, torch.cat))


# --------------------------------------------------------------------------
# 2-D: conv2d, max_pool2d
# --------------------------------------------------------------------------

CONV2D = [
    ("plain", (2, 3, 6, 7), (4, 3, 3, 2), True, {}),
    ("stride-pad", (2, 2, 7, 6), (3, 2, 3, 3), True, {"stride": 2, "padding": 1}),
    ("pairs-dilated", (1, 2, 8, 7), (2, 2, 2, 3), False, {"stride": (1, 2), "padding": (2, 1), "dilation": (2, 1)}),
    ("same", (2, 3, 5, 6), (2, 3, 4, 3), True, {"padding": "same"}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cid,xs,ws,bias,kw", CONV2D, ids=[c[0] for c in CONV2D])
def test_conv2d(cid, xs, ws, bias, kw, mode):
    ins = [_x(*xs), _x(*ws, seed=1)] + ([_x(ws[0], seed=2)] if bias else [])
    C.check(lambda x, w, *b: DF.conv2d(x, w, *b, **kw), lambda x, w, *b: TF.conv2d(x, w, *b, **kw), ins,
            diff=tuple(range(len(ins))), mode=mode, unknown=[(True, False, True, True)] + [None] * (len(ins) - 1))


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": (1, 0), "bias": False}], ids=["default", "stride-pad"])
def test_conv2d_module_state_dict_values_and_parameter_gradients(kw):
    torch.manual_seed(3)
    tm = torch.nn.Conv2d(3, 4, (3, 2), dtype=torch.float64, **kw)
    dm = dnn.Conv2d(3, 4, (3, 2), dtype=np.float64, **kw)
    assert {k: tuple(v.shape) for k, v in dm.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    module_check(dm, tm, [_x(2, 3, 7, 6)])
    module_check(dm, tm, [_x(3, 7, 6)])                  # unbatched (C, H, W)


MAXPOOL2D = [
    ("2x2", (2, 3, 6, 8), dict(kernel_size=2)),
    ("k3-s1-p1", (2, 2, 6, 5), dict(kernel_size=3, stride=1, padding=1)),
    ("pairs-ceil", (1, 2, 7, 8), dict(kernel_size=(3, 2), stride=(2, 3), ceil_mode=True)),
    ("dilated", (1, 2, 8, 8), dict(kernel_size=2, stride=1, dilation=(2, 3))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pid,xs,kw", MAXPOOL2D, ids=[p[0] for p in MAXPOOL2D])
def test_max_pool2d(pid, xs, kw, mode):
    C.check(lambda x: DF.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), [_distinct(*xs)], diff=(0,),
            mode=mode, unknown=[(True, False, False, False)])
    if mode == "eager":
        C.check(dnn.MaxPool2d(**kw), torch.nn.MaxPool2d(**kw), [_distinct(*xs)], diff=(0,))


def test_lenet_block_against_torch():
    """Conv2d -> ReLU -> MaxPool2d -> flatten -> Linear, as the everyday torch CNN."""
    torch.manual_seed(4)
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                             torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 5)).double()
    dm = dnn.Sequential(dnn.Conv2d(1, 3, 3, padding=1), dnn.ReLU(), dnn.MaxPool2d(2), dnn.Flatten(),
                        dnn.Linear(3 * 4 * 4, 5)).double()
    module_check(dm, tm, [_x(2, 1, 8, 8)])
