"""torch's activations, similarities, L1-type losses and BatchNorm1d that a
new-user trial missed (issue 22, part B): values, dtypes and float64
gradients against torch (eager and static graphs where the name is a pure
function), module forms and their reprs, torch's errors; BatchNorm1d's
running statistics, eval mode and state_dict against torch's step by step."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.nn as dnn  # noqa: E402
import dynnets.nn.functional as dF  # noqa: E402
import torch.nn.functional as tF  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)
check = C.check

RNG = np.random.default_rng(2223)

# values on both sides of every kink and threshold (none exactly on one: the
# one-sided gradients there are checked separately)
X = np.array([[-40.0, -25.0, -3.0, -1.0, -0.3, -1e-3], [1e-3, 0.4, 0.99, 1.5, 5.5, 6.5], [19.0, 21.0, 30.0,
                                                                                         -6.5, 2.5, -0.999]])

ACTS = [("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 5.0}), ("softplus", {"beta": 0.5}),
        ("logsigmoid", {}), ("elu", {}), ("elu", {"alpha": 0.3}), ("selu", {}), ("silu", {}), ("mish", {}),
        ("hardtanh", {}), ("hardtanh", {"min_val": -2.0, "max_val": 0.5}), ("relu6", {}), ("softsign", {})]


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("name,kw", ACTS, ids=[f"{n}-{k}" for n, k in ACTS])
def test_activation(name, kw, mode):
    check(lambda a: getattr(dF, name)(a, **kw), lambda a: getattr(tF, name)(a, **kw), [X], diff=[0], mode=mode)


@pytest.mark.parametrize("name,kw", ACTS, ids=[f"{n}-{k}" for n, k in ACTS])
def test_activation_float32_and_kinks(name, kw):
    x32 = X.astype(np.float32)
    got, want = getattr(dF, name)(dn.tensor(x32), **kw), getattr(tF, name)(torch.tensor(x32), **kw)
    assert got.dtype == dn.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=1e-6)
    # at the kinks, torch's one-sided choices
    k = np.array([0.0, -1.0, 1.0, 6.0, -2.0, 0.5, 20.0, 5.0, 2.5])
    check(lambda a: getattr(dF, name)(a, **kw), lambda a: getattr(tF, name)(a, **kw), [k], diff=[0])


def test_softplus_is_accurate_far_from_zero():
    x = np.array([-50.0, -700.0, 800.0])
    check(lambda a: dF.softplus(a), lambda a: tF.softplus(a), [x], diff=[0])
    check(lambda a: dF.logsigmoid(a), lambda a: tF.logsigmoid(a), [-x], diff=[0])


def test_activation_errors():
    with pytest.raises(RuntimeError):
        tF.elu(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="elu: expected a floating-point input, got dtype int64"):
        dF.elu(dn.tensor([1, 2]))
    with pytest.raises(TypeError, match="softplus: beta must be a number"):
        dF.softplus(dn.ones(2), beta="2")
    with pytest.raises(ValueError, match="hardtanh: min_val=2.0 cannot be greater than max_val=1.0"):
        dF.hardtanh(dn.ones(2), 2.0, 1.0)
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        tF.hardtanh(torch.ones(2), 2.0, 1.0)
    with pytest.raises(AssertionError, match="must be greater than"):
        torch.nn.Hardtanh(1.0, 1.0)
    with pytest.raises(ValueError, match="Hardtanh: max_val \\(1.0\\) must be greater than min_val \\(1.0\\)"):
        dnn.Hardtanh(1.0, 1.0)


@pytest.mark.parametrize("name", ["elu", "selu", "silu", "mish", "hardtanh", "relu6"])
def test_activation_inplace(name):
    x = RNG.standard_normal((2, 3)) * 4
    d, t = dn.tensor(x), torch.tensor(x)
    rd, rt = getattr(dF, name)(d, inplace=True), getattr(tF, name)(t, inplace=True)
    assert rd is d
    np.testing.assert_allclose(d.numpy(), t.numpy(), rtol=1e-12)
    # after a layer, with gradients: hardtanh / relu6's gradient does not read the input
    if name in ("hardtanh", "relu6"):
        a, b = dn.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = a * 1.5, b * 1.5
        getattr(dF, name)(ya, inplace=True).sum().backward()
        getattr(tF, name)(yb, inplace=True).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())


MODULES = [("Softplus", (), {"beta": 2.0}), ("ELU", (0.5,), {}), ("SELU", (), {}), ("SiLU", (), {}), ("Mish", (), {}),
           ("Hardtanh", (-0.5, 2.0), {}), ("ReLU6", (), {}), ("Softsign", (), {}), ("LogSigmoid", (), {}),
           ("GELU", (), {"approximate": "tanh"})]


@pytest.mark.parametrize("name,args,kw", MODULES, ids=[m[0] for m in MODULES])
def test_activation_modules(name, args, kw):
    m, tm = getattr(dnn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    check(lambda a: m(a), lambda a: tm(a), [X], diff=[0])
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict()) == []


def test_hardtanh_deprecated_names():
    with pytest.warns(FutureWarning):
        m = dnn.Hardtanh(min_value=-3.0)
    assert m.min_val == -3.0


# --------------------------------------------------------------------------
# cosine_similarity, pairwise_distance
# --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("s1,s2,dim", [((4, 5), (4, 5), 1), ((4, 5), (5,), -1), ((2, 3, 4), (2, 1, 4), 2),
                                       ((3, 4), (3, 4), 0), ((6,), (6,), 0)], ids=str)
def test_cosine_similarity(s1, s2, dim, mode):
    a, b = RNG.standard_normal(s1), RNG.standard_normal(s2)
    check(lambda x, y: dF.cosine_similarity(x, y, dim), lambda x, y: tF.cosine_similarity(x, y, dim), [a, b],
          diff=[0, 1], mode=mode)


def test_cosine_similarity_eps_as_torch_2():
    # each norm is clamped at eps on its own (torch 2), not their product; the
    # clamp is outside autograd, so the gradient differentiates the raw norm
    a = np.array([[1e-3, 0.0], [3.0, 4.0], [0.0, 0.0]])
    b = np.array([[2.0, 1.0], [1e-4, 1e-4], [1.0, 1.0]])
    check(lambda x, y: dF.cosine_similarity(x, y, eps=0.01), lambda x, y: tF.cosine_similarity(x, y, eps=0.01),
          [a[:2], b[:2]], diff=[0, 1])
    got = dF.cosine_similarity(dn.tensor(a), dn.tensor(b), eps=0.01)
    np.testing.assert_allclose(got.numpy(), tF.cosine_similarity(torch.tensor(a), torch.tensor(b), eps=0.01).numpy())
    m, tm = dnn.CosineSimilarity(dim=0, eps=1e-6), torch.nn.CosineSimilarity(dim=0, eps=1e-6)
    check(lambda x, y: m(x, y), lambda x, y: tm(x, y), [a[1:2].T, b[:1].T], diff=[0, 1])
    with pytest.raises(IndexError, match="cosine_similarity: dim=2 is out of range"):
        dF.cosine_similarity(dn.ones(2, 3), dn.ones(2, 3), dim=2)
    with pytest.raises(TypeError, match="cosine_similarity: expected a floating-point x1"):
        dF.cosine_similarity(dn.tensor([1, 2]), dn.ones(2), dim=0)


@pytest.mark.parametrize("kw", [{}, {"p": 1.0}, {"p": 3.0, "keepdim": True}, {"eps": 0.1}], ids=str)
def test_pairwise_distance(kw):
    a, b = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    check(lambda x, y: dF.pairwise_distance(x, y, **kw), lambda x, y: tF.pairwise_distance(x, y, **kw), [a, b],
          diff=[0, 1])
    check(lambda x, y: dF.pairwise_distance(x, y, **kw), lambda x, y: tF.pairwise_distance(x, y, **kw),
          [a[0], b[0]], diff=[0, 1], mode="static")
    m, tm = dnn.PairwiseDistance(**kw), torch.nn.PairwiseDistance(**kw)
    check(lambda x, y: m(x, y), lambda x, y: tm(x, y), [a, b], diff=[0, 1])


# --------------------------------------------------------------------------
# L1, smooth L1, Huber
# --------------------------------------------------------------------------

LOSSES = [("l1_loss", "L1Loss", {}, {}), ("smooth_l1_loss", "SmoothL1Loss", {"beta": 0.5}, {"beta": 0.5}),
          ("smooth_l1_loss", "SmoothL1Loss", {}, {}), ("smooth_l1_loss", "SmoothL1Loss", {"beta": 0.0}, {"beta": 0.0}),
          ("huber_loss", "HuberLoss", {"delta": 0.7}, {"delta": 0.7}), ("huber_loss", "HuberLoss", {}, {})]


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("fn,mod,fkw,mkw", LOSSES, ids=[f"{f}-{k}" for f, _, k, _ in LOSSES])
def test_l1_losses(fn, mod, fkw, mkw, reduction, mode):
    # differences on both sides of beta / delta, none on it
    d = np.array([[-2.0, -0.6, -0.3, 0.1], [0.45, 0.69, 0.71, 3.0]])
    y = RNG.standard_normal(d.shape)
    x = y + d
    check(lambda a, b: getattr(dF, fn)(a, b, reduction=reduction, **fkw),
          lambda a, b: getattr(tF, fn)(a, b, reduction=reduction, **fkw), [x, y], diff=[0, 1], mode=mode)
    m, tm = getattr(dnn, mod)(reduction=reduction, **mkw), getattr(torch.nn, mod)(reduction=reduction, **mkw)
    check(lambda a, b: m(a, b), lambda a, b: tm(a, b), [x, y], diff=[0, 1], mode=mode)


def test_l1_losses_weight_float32_and_zero_difference():
    x, y, w = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4)), RNG.uniform(0.5, 2, (3, 4))
    for red in ("mean", "sum", "none"):
        check(lambda a, b: dF.l1_loss(a, b, reduction=red, weight=dn.tensor(w)),
              lambda a, b: tF.l1_loss(a, b, reduction=red, weight=torch.tensor(w)), [x, y], diff=[0, 1])
        check(lambda a, b: dF.huber_loss(a, b, red, 0.5, weight=dn.tensor(w)),
              lambda a, b: tF.huber_loss(a, b, red, 0.5, weight=torch.tensor(w)), [x, y], diff=[0, 1])
    same = np.array([1.0, 2.0, 3.0])       # |d| = 0: the gradient is 0, as torch's sign(0)
    check(lambda a, b: dF.l1_loss(a, b), lambda a, b: tF.l1_loss(a, b), [same, same.copy()], diff=[0, 1])
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    for fn in ("l1_loss", "smooth_l1_loss", "huber_loss"):
        got = getattr(dF, fn)(dn.tensor(x32), dn.tensor(y32))
        assert got.dtype == dn.float32
        np.testing.assert_allclose(got.numpy(), getattr(tF, fn)(torch.tensor(x32), torch.tensor(y32)).numpy(), rtol=1e-6)


def test_l1_losses_errors():
    a, b = dn.ones(2, 3), dn.ones(3)
    for fn in ("l1_loss", "smooth_l1_loss", "huber_loss"):
        with pytest.raises(ValueError, match=f"{fn}: target.shape=\\(3,\\) does not match input.shape=\\(2, 3\\)"):
            getattr(dF, fn)(a, b)
        with pytest.raises(ValueError, match=f"{fn}: reduction must be 'mean', 'sum' or 'none'"):
            getattr(dF, fn)(a, a, reduction="avg")
    with pytest.raises(RuntimeError):
        tF.smooth_l1_loss(torch.ones(2), torch.ones(2), beta=-1.0)
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be >= 0, got -1.0"):
        dF.smooth_l1_loss(dn.ones(2), dn.ones(2), beta=-1.0)
    with pytest.raises(RuntimeError):
        tF.huber_loss(torch.ones(2), torch.ones(2), delta=0.0)
    with pytest.raises(ValueError, match="HuberLoss: delta must be > 0, got 0.0"):
        dnn.HuberLoss(delta=0.0)
    with pytest.raises(TypeError, match="L1Loss: input must be floating-point"):
        dnn.L1Loss()(dn.tensor([1, 2]), dn.tensor([1, 2]))


# --------------------------------------------------------------------------
# BatchNorm1d
# --------------------------------------------------------------------------

def _pair(*args, **kw):
    torch.manual_seed(0)
    return dnn.BatchNorm1d(*args, dtype=dn.float64, **kw), torch.nn.BatchNorm1d(*args, dtype=torch.float64, **kw)


def _compare_state(m, tm):
    sd, tsd = m.state_dict(), tm.state_dict()
    assert list(sd) == list(tsd)
    for k in tsd:
        assert sd[k].dtype == tsd[k].numpy().dtype, k
        np.testing.assert_allclose(sd[k].numpy(), tsd[k].numpy(), rtol=1e-12, atol=1e-14, err_msg=k)


@pytest.mark.parametrize("shape", [(8, 3), (5, 3, 4)], ids=str)
@pytest.mark.parametrize("kw", [{}, {"momentum": 0.3}, {"momentum": None}, {"affine": False}, {"eps": 1e-2}],
                         ids=str)
def test_batchnorm1d_training_and_eval(shape, kw):
    m, tm = _pair(3, **kw)
    for step in range(3):
        x = RNG.standard_normal(shape) * (step + 1) + step
        # the batch statistics, with gradients through them to the input and the affine parameters
        check(lambda a: m(a), lambda a: tm(a), [x], diff=[0])
    _compare_state(m, tm)        # running_mean, running_var (unbiased), num_batches_tracked
    assert int(m.num_batches_tracked) == 3
    m.eval()
    tm.eval()
    x = RNG.standard_normal(shape)
    check(lambda a: m(a) * 2, lambda a: tm(a) * 2, [x], diff=[0])
    _compare_state(m, tm)        # eval mode leaves them alone
    if m.affine:
        m.zero_grad()
        tm.zero_grad()
        a = dn.tensor(x, requires_grad=True)
        m(a).sum().backward()
        b = torch.tensor(x, requires_grad=True)
        tm(b).sum().backward()
        np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-10)
        np.testing.assert_allclose(m.bias.grad.numpy(), tm.bias.grad.numpy(), rtol=1e-10)


def test_batchnorm1d_without_running_stats_and_load():
    m, tm = _pair(4, track_running_stats=False)
    assert list(m.state_dict()) == list(tm.state_dict()) == ["weight", "bias"]
    assert m.running_mean is None and tm.running_mean is None
    m.eval()
    tm.eval()
    x = RNG.standard_normal((6, 4))
    check(lambda a: m(a), lambda a: tm(a), [x], diff=[0])       # the batch's statistics in eval mode too
    a, ta = _pair(2)
    ta.train()
    ta(torch.tensor(RNG.standard_normal((5, 2))))
    a.load_state_dict({k: dn.tensor(v.numpy()) for k, v in ta.state_dict().items()})
    _compare_state(a, ta)
    a.eval()
    ta.eval()
    x = RNG.standard_normal((3, 2))
    check(lambda v: a(v), lambda v: ta(v), [x], diff=[0])
    assert repr(a) == repr(ta)
    f32 = dnn.BatchNorm1d(3)
    assert f32.running_mean.dtype == np.float32 and f32.num_batches_tracked.dtype == np.int64
    assert f32(dn.ones(4, 3)).dtype == dn.float32


def test_batchnorm1d_errors():
    m = dnn.BatchNorm1d(3)
    with pytest.raises(ValueError):
        torch.nn.BatchNorm1d(3)(torch.ones(2, 3, 4, 5))
    with pytest.raises(ValueError, match="BatchNorm1d: expected 2D or 3D input \\(got 4D input\\)"):
        m(dn.ones(2, 3, 4, 5))
    with pytest.raises(ValueError, match="BatchNorm1d: input.shape\\[1\\]=4 does not match num_features=3"):
        m(dn.ones(2, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        torch.nn.BatchNorm1d(3)(torch.ones(1, 3))
    with pytest.raises(ValueError, match="batch_norm: expected more than 1 value per channel when training"):
        m(dn.ones(1, 3))
    with pytest.raises(dn.ShapeError, match="BatchNorm1d: input has dtype float64"):
        m(dn.ones(2, 3, dtype=dn.float64))


def test_functional_batch_norm():
    x = RNG.standard_normal((6, 3, 2))
    rm, rv = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3)
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    check(lambda a: dF.batch_norm(a, rm, rv, dn.tensor(w), dn.tensor(b)),
          lambda a: tF.batch_norm(a, torch.tensor(rm), torch.tensor(rv), torch.tensor(w), torch.tensor(b)),
          [x], diff=[0])
    drm, drv, trm, trv = rm.copy(), rv.copy(), torch.tensor(rm), torch.tensor(rv)
    got = dF.batch_norm(dn.tensor(x), drm, drv, training=True, momentum=0.2)
    want = tF.batch_norm(torch.tensor(x), trm, trv, training=True, momentum=0.2)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)
    np.testing.assert_allclose(drm, trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(drv, trv.numpy(), rtol=1e-12)
    check(lambda a: dF.batch_norm(a, None, None, training=True), lambda a: tF.batch_norm(a, None, None, training=True),
          [x], diff=[0], mode="static")
