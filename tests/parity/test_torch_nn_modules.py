"""PyTorch habits around modules, against torch: ``F.dropout(x, p,
self.training)``, ``Module.to(dtype)`` / ``.double()`` / ``.float()`` /
``.half()`` / ``.to('cpu')`` / ``.apply(fn)``, an input of another dtype than
the layer's (torch raises, so does dynnets), and the binary cross-entropies
(``F.binary_cross_entropy_with_logits``, ``nn.BCEWithLogitsLoss``,
``F.binary_cross_entropy``, ``nn.BCELoss``) with their gradients, extreme
logits included; also the legacy ``size_average`` / ``reduce`` flags and
``F.softmax`` without ``dim``.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
from dynnets import nn  # noqa: E402
from dynnets.autograd.primitives import DTypeError  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

TF = torch.nn.functional
DF = nn.functional


# --------------------------------------------------------------------------
# F.dropout(x, p, self.training)
# --------------------------------------------------------------------------

class _Net:
    """A module that calls the functional form as torch code does."""

    @staticmethod
    def make(lib):
        mod = torch.nn if lib is torch else nn
        F = TF if lib is torch else DF

        class Net(mod.Module):
            def forward(self, x):
                return F.dropout(x, 0.5, self.training)
        return Net()


def test_functional_dropout_takes_the_training_flag_third():
    x = np.ones((200, 50), np.float32)
    for lib in (dn, torch):
        net = _Net.make(lib)
        wrap = torch.tensor if lib is torch else dn.Tensor
        lib.manual_seed(3)
        a, b = (np.asarray(net(wrap(x))) if lib is torch else net(wrap(x)).numpy() for _ in range(2))
        # training: about half dropped, the rest scaled by 2, and a new mask at every call
        for m in (a, b):
            assert abs((m == 0).mean() - 0.5) < 0.03 and set(np.unique(m)) == {0.0, 2.0}
        assert (a != b).any()
        lib.manual_seed(3)
        again = np.asarray(net(wrap(x))) if lib is torch else net(wrap(x)).numpy()
        np.testing.assert_array_equal(again, a)                 # manual_seed repeats the masks
        net.eval()
        out = net(wrap(x))
        np.testing.assert_array_equal(np.asarray(out) if lib is torch else out.data, x)   # eval: identity


def test_functional_dropout_generator_and_p_as_torch():
    x = C.draw(np.random.default_rng(1), (300, 40), np.float64, "nonzero")
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    a = DF.dropout(dn.tensor(x), 0.25, generator=g1).numpy()
    np.testing.assert_array_equal(a, DF.dropout(dn.tensor(x), 0.25, generator=g2).data)
    np.testing.assert_array_equal(DF.dropout(dn.tensor(x), p=0.25, generator=7).data,
                                  DF.dropout(dn.tensor(x), p=0.25, generator=7).numpy())
    for p in (0.0, 1.0):
        np.testing.assert_array_equal(DF.dropout(dn.tensor(x), p).data, TF.dropout(torch.tensor(x), p).numpy())
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError):
            TF.dropout(torch.tensor(x), bad)
        with pytest.raises(ValueError, match="dropout: dropout probability has to be between 0 and 1"):
            DF.dropout(dn.tensor(x), bad)
    # the old signature's habit on the fused op: a bool where the rng goes is a clear error
    with pytest.raises(TypeError, match="dropout: the third argument is rng .* got the bool False"):
        dn.dropout(dn.tensor(x), 0.5, False)


def test_rnn_dropout_between_layers_draws_new_masks_in_training():
    lstm = nn.LSTM(4, 5, num_layers=3, dropout=0.5, dtype=np.float64, rng=0)
    x = C.draw(np.random.default_rng(2), (6, 3, 4))
    a, b = lstm(x)[0].numpy(), lstm(x)[0].numpy()
    assert not np.allclose(a, b)
    lstm.eval()
    np.testing.assert_array_equal(lstm(x)[0].data, lstm(x)[0].data)


# --------------------------------------------------------------------------
# Module.to / double / float / half / apply
# --------------------------------------------------------------------------

class _Tagger:
    @staticmethod
    def make(lib, dtype=np.float32):
        mod = torch.nn if lib is torch else nn
        kw = {"dtype": C.torch_dtype(dtype)} if lib is torch else {"dtype": dtype}

        class Tagger(mod.Module):
            def __init__(self):
                super().__init__()
                self.emb = mod.Embedding(10, 4, **kw)
                self.lstm = mod.LSTM(4, 3, num_layers=2, bidirectional=True, **kw)
                self.out = mod.Sequential(mod.Linear(6, 5, **kw), mod.Tanh(), mod.Linear(5, 2, bias=False, **kw))
                self.loss = mod.CrossEntropyLoss(weight=(torch.tensor if lib is torch else np.asarray)(
                    np.array([1.0, 2.0], dtype)))
                self.register_buffer("counts", (torch.tensor if lib is torch else np.asarray)(np.arange(3)))

            def forward(self, ids, y):
                h, _ = self.lstm(self.emb(ids))
                return self.loss(self.out(h).reshape(-1, 2), y.reshape(-1))
        return Tagger()


def _pair(dtype=np.float32):
    d, t = _Tagger.make(dn, dtype), _Tagger.make(torch, dtype)
    d.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})
    return d, t


_IDS = np.array([[1, 2, 3], [4, 0, 9], [7, 7, 1], [2, 5, 6]])
_YS = np.array([[0, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 1]])


def _loss_and_grads(mod, lib):
    mod.zero_grad()
    if lib is torch:
        loss = mod(torch.tensor(_IDS), torch.tensor(_YS))
        loss.backward()
        return loss.detach().numpy(), [p.grad.numpy() for p in mod.parameters()]
    loss = mod(_IDS, _YS)
    loss.backward()
    return loss.data, [p.grad.data for p in mod.parameters()]


@pytest.mark.parametrize("how", ["double", "to-dtype", "to-kw", "to-tensor"])
def test_module_to_float64_and_back_as_torch(how):
    d, t = _pair(np.float32)
    params = list(d.parameters())
    convert = {"double": (lambda m, lib: m.double()),
               "to-dtype": (lambda m, lib: m.to(torch.float64 if lib is torch else np.float64)),
               "to-kw": (lambda m, lib: m.to(device="cpu", dtype=torch.float64 if lib is torch else np.float64)),
               "to-tensor": (lambda m, lib: m.to(torch.zeros(1, dtype=torch.float64) if lib is torch
                                                 else dn.zeros(1, dtype=np.float64)))}[how]
    assert convert(d, dn) is d and convert(t, torch) is t
    assert list(d.parameters())[0] is params[0]                # the same Parameter objects, converted in place
    for (k, v), (tk, tv) in zip(d.state_dict().items(), t.state_dict().items()):
        assert k == tk and v.dtype == C.numpy_dtype(tv.dtype), k   # float ones float64, the int buffer unchanged
    assert d.state_dict()["counts"].dtype == np.int64
    (dl, dg), (tl, tg) = _loss_and_grads(d, dn), _loss_and_grads(t, torch)
    C.assert_close(dl, tl, np.float64, "loss after double()")
    for a, b in zip(dg, tg):
        assert a.dtype == np.float64
        C.assert_close(a, b, np.float64, "gradient after double()")
    d.float()
    t.float()
    assert all(p.dtype == np.float32 for p in d.parameters())
    (dl, _), (tl, _) = _loss_and_grads(d, dn), _loss_and_grads(t, torch)
    assert dl.dtype == np.float32
    C.assert_close(dl, tl, np.float32, "loss after float()")


def test_module_to_keeps_the_optimizer_working():
    d, t = _pair(np.float32)
    dopt, topt = dn.optim.Adam(d.parameters(), lr=0.01), torch.optim.Adam(t.parameters(), lr=0.01)
    d.double()
    t.double()
    for _ in range(3):
        _loss_and_grads(d, dn)
        _loss_and_grads(t, torch)
        dopt.step()
        topt.step()
    for (k, v), (_, tv) in zip(d.state_dict().items(), t.state_dict().items()):
        assert v.dtype == C.numpy_dtype(tv.dtype)
        C.assert_close(v, tv.numpy(), np.float64, k, rtol=1e-5)


def test_module_to_cpu_is_a_no_op_and_other_devices_raise():
    d, t = _pair()
    before = {k: v.clone() for k, v in d.state_dict().items()}
    assert d.to("cpu") is d and d.to(device="cpu") is d and d.cpu() is d and d.to("cpu", np.float32) is d
    for k, v in d.state_dict().items():
        assert v.dtype == before[k].dtype
        np.testing.assert_array_equal(v, before[k])
    for dev in ("cuda", "cuda:0"):
        if not torch.cuda.is_available():
            with pytest.raises((AssertionError, RuntimeError)):
                t.to(dev)
        with pytest.raises(ValueError, match=r"Tagger.to: device='cuda(:0)?' is not available: dynnets computes "
                                             r"on the CPU only"):
            d.to(dev)
    with pytest.raises(ValueError, match="CUDA is not available"):
        d.cuda()
    # integer dtypes are refused, as torch refuses them
    with pytest.raises(TypeError):
        t.to(torch.int64)
    with pytest.raises(TypeError, match=r"Tagger.to: only floating-point dtypes are accepted \(as torch\), got int64"):
        d.to(np.int64)
    with pytest.raises(TypeError, match="neither a device"):
        d.to("bogus")


def test_module_half():
    lin, tlin = nn.Linear(4, 3), torch.nn.Linear(4, 3)
    lin.load_state_dict({k: v.numpy() for k, v in tlin.state_dict().items()})
    assert lin.half() is lin and tlin.half() is tlin
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float16)
    out, tout = lin(x), tlin(torch.tensor(x))
    assert out.dtype == np.float16 and tout.dtype == torch.float16
    np.testing.assert_allclose(out.numpy().astype(np.float64), tout.detach().numpy().astype(np.float64), rtol=2e-2,
                               atol=2e-3)
    # the fused recurrent kernels take float32/float64: a clear error, before anything is converted
    d, _ = _pair()
    with pytest.raises(TypeError, match=r"Tagger.half: LSTM \(submodule 'lstm'\) computes in float32 or float64 "
                                        r"only"):
        d.half()
    assert all(p.dtype == np.float32 for p in d.parameters())


def test_apply_visits_children_first_as_torch():
    d, t = _pair()
    dn_order, t_order = [], []
    assert d.apply(lambda m: dn_order.append(type(m).__name__)) is d
    assert t.apply(lambda m: t_order.append(type(m).__name__)) is t
    assert dn_order == t_order and dn_order[-1] == "Tagger"

    # the usual use: re-initialising the weights of every Linear
    def init(m, lib):
        if type(m).__name__ == "Linear":
            if lib is torch:
                with torch.no_grad():
                    m.weight.fill_(0.125)
            else:
                m.weight.data[...] = 0.125
    d.apply(lambda m: init(m, dn))
    t.apply(lambda m: init(m, torch))
    for (k, v), (_, tv) in zip(d.state_dict().items(), t.state_dict().items()):
        np.testing.assert_array_equal(v, tv.numpy(), err_msg=k)


# --------------------------------------------------------------------------
# an input of another dtype than the layer's: torch raises, so does dynnets
# --------------------------------------------------------------------------

def _layers(dtype):
    tdt = C.torch_dtype(dtype)
    return [("Linear", nn.Linear(3, 4, dtype=dtype), torch.nn.Linear(3, 4, dtype=tdt), (2, 3)),
            ("LSTM", nn.LSTM(3, 4, dtype=dtype), torch.nn.LSTM(3, 4, dtype=tdt), (5, 2, 3)),
            ("GRU", nn.GRU(3, 4, dtype=dtype), torch.nn.GRU(3, 4, dtype=tdt), (5, 2, 3)),
            ("RNN", nn.RNN(3, 4, dtype=dtype), torch.nn.RNN(3, 4, dtype=tdt), (5, 2, 3)),
            ("LSTMCell", nn.LSTMCell(3, 4, dtype=dtype), torch.nn.LSTMCell(3, 4, dtype=tdt), (2, 3)),
            ("GRUCell", nn.GRUCell(3, 4, dtype=dtype), torch.nn.GRUCell(3, 4, dtype=tdt), (2, 3)),
            ("RNNCell", nn.RNNCell(3, 4, dtype=dtype), torch.nn.RNNCell(3, 4, dtype=tdt), (2, 3))]


@pytest.mark.parametrize("layer_dtype,input_dtype", [(np.float32, np.int64), (np.float64, np.int64),
                                                     (np.float64, np.float32), (np.float32, np.float64)])
def test_input_of_another_dtype_raises_as_torch(layer_dtype, input_dtype):
    for name, d, t, shape in _layers(layer_dtype):
        x = np.ones(shape, dtype=input_dtype)
        with pytest.raises((RuntimeError, ValueError)):       # torch's RNN layers raise ValueError
            t(torch.tensor(x))
        with pytest.raises(DTypeError, match=f"{name}: input has dtype {np.dtype(input_dtype)}, but the layer's "
                                             f"parameters have dtype {np.dtype(layer_dtype)}"):
            d(x)
        with pytest.raises(TypeError):                      # a DTypeError is a TypeError, as torch's dtype errors
            d(dn.tensor(x))
        # of the layer's dtype it runs, as torch
        d(x.astype(layer_dtype))
        t(torch.tensor(x.astype(layer_dtype)))


def test_initial_state_of_another_dtype_raises_as_torch():
    x = np.ones((5, 2, 3), np.float32)
    for d, t, hx, thx in ((nn.GRU(3, 4), torch.nn.GRU(3, 4), np.zeros((1, 2, 4)), torch.zeros(1, 2, 4,
                                                                                               dtype=torch.float64)),
                          (nn.LSTMCell(3, 4), torch.nn.LSTMCell(3, 4), (np.zeros((2, 4)), np.zeros((2, 4))),
                           (torch.zeros(2, 4, dtype=torch.float64),) * 2)):
        with pytest.raises((RuntimeError, ValueError)):
            t(torch.tensor(x if d.__class__.__name__ == "GRU" else x[0]), thx)
        with pytest.raises(DTypeError, match="has dtype float64, but the layer's parameters have dtype float32"):
            d(x if d.__class__.__name__ == "GRU" else x[0], hx)


def test_functional_linear_dtypes_as_torch():
    w, b = np.ones((4, 3), np.float32), np.ones(4, np.float32)
    for x in (np.ones((2, 3), np.int64), np.ones((2, 3), np.float64)):
        with pytest.raises(RuntimeError):
            TF.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b))
        with pytest.raises(DTypeError, match=f"linear: input has dtype {x.dtype}, but weight has dtype float32"):
            DF.linear(x, dn.tensor(w), dn.tensor(b))
    with pytest.raises(RuntimeError):
        TF.linear(torch.ones(2, 3), torch.tensor(w), torch.ones(4, dtype=torch.float64))
    with pytest.raises(DTypeError, match="linear: bias has dtype float64, but weight has dtype float32"):
        DF.linear(np.ones((2, 3), np.float32), dn.tensor(w), np.ones(4))
    C.check(lambda a, ww, bb: DF.linear(a, ww, bb), lambda a, ww, bb: TF.linear(a, ww, bb),
            [np.ones((2, 3), np.float32), w, b], [0, 1, 2])


# --------------------------------------------------------------------------
# binary cross-entropies
# --------------------------------------------------------------------------

_SHAPE = (5, 3)


def _bce_inputs(dtype, extreme=False):
    rng = np.random.default_rng(90)
    x = C.draw(rng, _SHAPE, dtype) * 3
    if extreme:
        x = np.array([[-1e4, -800.0, -40.0], [-20.0, -1e-8, 0.0], [1e-8, 20.0, 40.0], [800.0, 1e4, 3.0],
                      [-3.0, 50.0, -50.0]], dtype)
    t = np.asarray(rng.uniform(0, 1, _SHAPE), dtype)
    t[0] = [0.0, 1.0, 0.0]
    t[1, 0] = 1.0
    return x, t


_W = np.array([0.5, 2.0, 1.0])


@pytest.mark.parametrize("extreme", [False, True], ids=["normal", "extreme"])
@pytest.mark.parametrize("weighted", ["none", "weight", "pos_weight", "both"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype,mode", [(np.float64, "eager"), (np.float32, "eager"), (np.float64, "static"),
                                        (np.float64, "static-unknown")],
                         ids=["float64-eager", "float32-eager", "float64-static", "float64-static-unknown"])
def test_binary_cross_entropy_with_logits(extreme, weighted, reduction, dtype, mode):
    x, t = _bce_inputs(dtype, extreme)
    w = np.asarray(_W, dtype) if weighted in ("weight", "both") else None
    pw = np.asarray(_W[::-1] * 1.5, dtype) if weighted in ("pos_weight", "both") else None
    # the logits and the targets get gradients (torch's too); the weights are constants
    C.check(lambda a, b: DF.binary_cross_entropy_with_logits(a, b, w, reduction=reduction, pos_weight=pw),
            lambda a, b: TF.binary_cross_entropy_with_logits(
                a, b, None if w is None else torch.tensor(w), reduction=reduction,
                pos_weight=None if pw is None else torch.tensor(pw)),
            [x, t], [0, 1], mode=mode, unknown=[(True, False), (True, False)])
    if mode == "eager":
        C.check(nn.BCEWithLogitsLoss(w, reduction=reduction, pos_weight=pw),
                torch.nn.BCEWithLogitsLoss(None if w is None else torch.tensor(w), reduction=reduction,
                                           pos_weight=None if pw is None else torch.tensor(pw)), [x, t], [0, 1])


def test_binary_cross_entropy_with_logits_is_finite_and_exact_at_extremes():
    # log(1 + exp(1e4)) overflows a naive formula; a confident right answer's loss is exp(-|x|), kept (not 0)
    x = dn.tensor(np.array([-1e4, -40.0, 40.0, 1e4]), requires_grad=True)
    t = np.array([0.0, 0.0, 1.0, 1.0])
    loss = DF.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(loss.data, [0.0, np.exp(-40.0), np.exp(-40.0), 0.0], rtol=1e-15, atol=0)
    wrong = DF.binary_cross_entropy_with_logits(dn.tensor(np.array([-1e4, 1e4])), np.array([1.0, 0.0]),
                                                reduction="none")
    np.testing.assert_array_equal(wrong.data, [1e4, 1e4])
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.data, [0.0, np.exp(-40.0), -np.exp(-40.0), 0.0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype,mode", [(np.float64, "eager"), (np.float32, "eager"), (np.float64, "static")],
                         ids=["float64-eager", "float32-eager", "float64-static"])
def test_binary_cross_entropy(weighted, reduction, dtype, mode):
    rng = np.random.default_rng(91)
    p = np.asarray(rng.uniform(0.02, 0.98, _SHAPE), dtype)
    t = np.asarray(rng.uniform(0, 1, _SHAPE), dtype)
    w = np.asarray(_W, dtype) if weighted else None
    C.check(lambda a, b: DF.binary_cross_entropy(a, b, w, reduction=reduction),
            lambda a, b: TF.binary_cross_entropy(a, b, None if w is None else torch.tensor(w), reduction=reduction),
            [p, t], [0, 1], mode=mode)
    if mode == "eager":
        C.check(nn.BCELoss(w, reduction=reduction),
                torch.nn.BCELoss(None if w is None else torch.tensor(w), reduction=reduction), [p, t], [0, 1])


def test_binary_cross_entropy_at_zero_and_one_as_torch():
    # the logs clamped at -100: finite losses; the input's gradient from torch's formula (denominator >= 1e-12)
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.5])
    d = dn.tensor(p, requires_grad=True)
    tp = torch.tensor(p, requires_grad=True)
    loss, tloss = DF.binary_cross_entropy(d, t, reduction="none"), TF.binary_cross_entropy(tp, torch.tensor(t),
                                                                                          reduction="none")
    np.testing.assert_array_equal(loss.data, tloss.detach().numpy())
    loss.sum().backward()
    tloss.sum().backward()
    np.testing.assert_array_equal(d.grad.data, tp.grad.numpy())
    for bad in (np.array([0.5, 1.5]), np.array([-0.1, 0.5])):
        with pytest.raises(RuntimeError):
            TF.binary_cross_entropy(torch.tensor(bad), torch.zeros(2, dtype=torch.float64))
        with pytest.raises(ValueError, match=r"binary_cross_entropy: every element of input must be in \[0, 1\]"):
            DF.binary_cross_entropy(bad, np.zeros(2))


def test_bce_shape_mismatch_is_an_error_as_torch():
    with pytest.raises(ValueError):
        TF.binary_cross_entropy_with_logits(torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match=r"binary_cross_entropy_with_logits: target.shape=\(3,\) does not match "
                                         r"input.shape=\(3, 2\)"):
        DF.binary_cross_entropy_with_logits(np.zeros((3, 2)), np.zeros(3))


# --------------------------------------------------------------------------
# the legacy flags, mse weights, softmax without dim
# --------------------------------------------------------------------------

@pytest.mark.parametrize("size_average,reduce", [(None, False), (False, None), (True, True), (False, True)])
def test_legacy_size_average_and_reduce_as_torch(size_average, reduce):
    x = C.draw(np.random.default_rng(92), (6, 4))
    y = np.array([0, 3, 1, 1, 2, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        C.check(lambda a: DF.cross_entropy(a, y, None, size_average, -100, reduce),
                lambda a: TF.cross_entropy(a, torch.tensor(y), None, size_average, -100, reduce), [x], [0])
        C.check(lambda a: DF.nll_loss(a, y, None, size_average, -100, reduce),
                lambda a: TF.nll_loss(a, torch.tensor(y), None, size_average, -100, reduce), [x], [0])
        C.check(lambda a: DF.mse_loss(a, np.ones_like(x), size_average, reduce),
                lambda a: TF.mse_loss(a, torch.ones_like(a), size_average, reduce), [x], [0])
        C.check(nn.CrossEntropyLoss(None, size_average, -100, reduce),
                torch.nn.CrossEntropyLoss(None, size_average, -100, reduce), [x, y], [0])
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        DF.mse_loss(x, x, size_average, reduce)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_weight_as_torch(reduction):
    rng = np.random.default_rng(93)
    x, y, w = C.draw(rng, (4, 3)), C.draw(rng, (4, 3)), rng.uniform(0.5, 2.0, (4, 3))
    C.check(lambda a, b: DF.mse_loss(a, b, reduction=reduction, weight=w),
            lambda a, b: TF.mse_loss(a, b, reduction=reduction, weight=torch.tensor(w)), [x, y], [0, 1])


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4), (2, 3, 4, 5)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_without_dim_as_torch(name, shape):
    # torch's deprecated implicit dim (0 for 1-d and 3-d inputs, else 1), with its warning
    x = C.draw(np.random.default_rng(94), shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        C.check(lambda a: getattr(DF, name)(a), lambda a: getattr(TF, name)(a), [x], [0])
    with pytest.warns(UserWarning, match="implicit dimension choice"):
        getattr(DF, name)(dn.tensor(x))
    # dtype= casts first: a float32 result, its gradient computed in float32
    C.check(lambda a: getattr(DF, name)(a, -1, dtype=np.float32),
            lambda a: getattr(TF, name)(a, -1, dtype=torch.float32), [x], [0], rtol=2e-5, atol=2e-6)
