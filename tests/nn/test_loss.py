"""CrossEntropyLoss, NLLLoss, MSELoss: PyTorch's formulas written out in numpy
(weights, ignore_index, label smoothing, class probabilities, K-dimensional
inputs, every reduction), finite-difference gradients in float64, and, when
torch is installed, values and gradients against torch."""
import itertools

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd import gradcheck

C = 4


def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    s = x - m
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _rows(x, t):
    """(rows, C) scores and (rows,) or (rows, C) targets, as PyTorch reads them."""
    if x.ndim == 1:
        return x[None], t.reshape(1, *t.shape)
    if x.ndim == 2:
        return x, t
    perm = (0, *range(2, x.ndim), 1)
    t2 = t.transpose(perm).reshape(-1, C) if t.dtype.kind == "f" else t.reshape(-1)
    return x.transpose(perm).reshape(-1, C), t2


def _out_shape(x):
    return () if x.ndim == 1 else (x.shape[0], *x.shape[2:])


def ref_cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", eps=0.0):
    """torch.nn.functional.cross_entropy written out (LossNLL.cpp's label smoothing)."""
    x2, t2 = _rows(x, t)
    logp = _log_softmax(x2, 1)
    w = np.ones(C) if weight is None else weight
    if t2.dtype.kind == "f":
        p = t2 * (1 - eps) + eps / C
        rows = -(logp * p * w).sum(1)
        total = len(rows)
    else:
        keep = t2 != ignore_index
        t0 = np.where(keep, t2, 0)
        wy = np.where(keep, w[t0], 0.0)
        nll = -logp[np.arange(len(t0)), t0] * wy
        smooth = -(logp * w).sum(1) * keep
        rows = (1 - eps) * nll + eps / C * smooth
        total = wy.sum()
    if reduction == "none":
        return rows.reshape(_out_shape(x))
    # every row ignored: nan, PyTorch's 0/0
    return rows.sum() if reduction == "sum" else (rows.sum() / total if total > 0 else np.nan)


def ref_nll(x, t, weight=None, ignore_index=-100, reduction="mean"):
    x2, t2 = _rows(x, t)
    keep = t2 != ignore_index
    t0 = np.where(keep, t2, 0)
    wy = np.where(keep, (np.ones(C) if weight is None else weight)[t0], 0.0)
    rows = -x2[np.arange(len(t0)), t0] * wy
    if reduction == "none":
        return rows.reshape(_out_shape(x))
    return rows.sum() if reduction == "sum" else (rows.sum() / wy.sum() if wy.sum() > 0 else np.nan)


def _case(shape, rng, ignore=None, probabilities=False):
    if shape == "2d":
        x, tshape = rng.standard_normal((6, C)), (6,)
    elif shape == "1d":
        x, tshape = rng.standard_normal(C), ()
    else:
        x, tshape = rng.standard_normal((2, C, 3, 2)), (2, 3, 2)
    if probabilities:
        p = rng.dirichlet(np.ones(C), size=tshape)                 # (..., C)
        t = p if x.ndim < 3 else np.moveaxis(p, -1, 1).copy()
        return x, t
    t = rng.integers(0, C, tshape)
    if ignore is not None and t.ndim:
        t.flat[0] = t.flat[2] = ignore
    return x, np.asarray(t)


SHAPES = ["2d", "1d", "kd"]
OPTIONS = list(itertools.product(["mean", "sum", "none"], [False, True], [None, 2], [0.0, 0.1]))


@pytest.mark.parametrize("shape", SHAPES)
def test_cross_entropy_and_nll_match_the_written_out_formulas(shape):
    rng = np.random.default_rng(0)
    wt = rng.uniform(0.5, 2.0, C)
    for reduction, weighted, ignore, eps in OPTIONS:
        x, t = _case(shape, rng, ignore)
        kw = dict(weight=wt if weighted else None, reduction=reduction)
        ig = {} if ignore is None else {"ignore_index": ignore}
        got = nn.CrossEntropyLoss(label_smoothing=eps, **kw, **ig)(x, t)
        np.testing.assert_allclose(got.data, ref_cross_entropy(x, t, eps=eps, **kw, **ig), rtol=1e-12, atol=1e-14)
        assert got.shape == (_out_shape(x) if reduction == "none" else ())
        np.testing.assert_allclose(nn.NLLLoss(**kw, **ig)(x, t).data, ref_nll(x, t, **kw, **ig),
                                   rtol=1e-12, atol=1e-14)
        p_x, p = _case(shape, rng, probabilities=True)
        got = nn.CrossEntropyLoss(label_smoothing=eps, **kw)(p_x, p)
        np.testing.assert_allclose(got.data, ref_cross_entropy(p_x, p, eps=eps, **kw), rtol=1e-12, atol=1e-14)


def test_unweighted_cross_entropy_is_the_fused_op():
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((5, C)), rng.integers(0, C, 5)
    for reduction in ("mean", "sum", "none"):
        np.testing.assert_array_equal(nn.CrossEntropyLoss(reduction=reduction)(x, t).data,
                                      dn.cross_entropy(x, t, reduction=reduction).data)
    # log_softmax + NLLLoss is the same cross-entropy
    np.testing.assert_allclose(nn.NLLLoss()(dn.log_softmax(dn.tensor(x, dtype=np.float64)), t).data,
                               nn.CrossEntropyLoss()(x, t).data, rtol=1e-13)


GRAD_CASES = [("2d", dict(reduction="mean")),
              ("2d", dict(weight=True, ignore_index=2, reduction="mean", label_smoothing=0.2)),
              ("kd", dict(weight=True, reduction="sum", label_smoothing=0.1)),
              ("1d", dict(reduction="none"))]


@pytest.mark.parametrize("shape,kw", GRAD_CASES)
def test_gradients_match_finite_differences(shape, kw):
    rng = np.random.default_rng(2)
    kw = dict(kw)
    if kw.pop("weight", False):
        kw["weight"] = rng.uniform(0.5, 2.0, C)
    x, t = _case(shape, rng, kw.get("ignore_index"))
    ce = nn.CrossEntropyLoss(**kw)
    assert gradcheck(lambda a: ce(a, t), [x])
    nll = nn.NLLLoss(**{k: v for k, v in kw.items() if k != "label_smoothing"})
    assert gradcheck(lambda a: nll(a, t), [x])
    p_x, p = _case(shape, rng, probabilities=True)
    ce_p = nn.CrossEntropyLoss(**{k: v for k, v in kw.items() if k != "ignore_index"})
    assert gradcheck(lambda a, b: ce_p(a, b), [p_x, p])       # the target probabilities get gradients too
    y = rng.standard_normal((3, 2))
    for reduction in ("mean", "sum", "none"):
        mse = nn.MSELoss(reduction=reduction)
        assert gradcheck(lambda a, b: mse(a, b), [rng.standard_normal((3, 2)), y])


def test_mse_values():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(nn.MSELoss()(x, y).data, ((x - y) ** 2).mean(), rtol=1e-14)
    np.testing.assert_allclose(nn.MSELoss(reduction="sum")(x, y).data, ((x - y) ** 2).sum(), rtol=1e-14)
    np.testing.assert_allclose(nn.MSELoss(reduction="none")(x, y).data, (x - y) ** 2, rtol=1e-14)
    np.testing.assert_allclose(nn.functional.mse_loss(x, y).data, ((x - y) ** 2).mean(), rtol=1e-14)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_every_row_ignored_gives_nan_with_zero_gradient_as_torch(smoothing):
    for make in (lambda: nn.CrossEntropyLoss(ignore_index=1, label_smoothing=smoothing),
                 lambda: nn.NLLLoss(ignore_index=1)):
        x = dn.tensor(np.ones((2, C)), requires_grad=True, dtype=np.float64)
        loss = make()(x, np.array([1, 1]))
        loss.backward()
        assert np.isnan(loss.item()) and np.all(x.grad.data == 0)
    # also with no rows at all, and through the fused op's mask
    assert np.isnan(nn.CrossEntropyLoss()(np.zeros((0, C)), np.zeros(0, np.int64)).item())
    x = dn.tensor(np.ones((2, C)), requires_grad=True, dtype=np.float64)
    loss = dn.cross_entropy(x, np.array([0, 1]), mask=np.zeros(2))
    loss.backward()
    assert np.isnan(loss.item()) and np.all(x.grad.data == 0)


def test_weight_is_a_buffer_and_repr():
    w = np.array([1.0, 2.0, 3.0, 4.0])
    ce = nn.CrossEntropyLoss(weight=w, ignore_index=3, label_smoothing=0.1)
    np.testing.assert_array_equal(ce.state_dict()["weight"], w)
    assert list(nn.CrossEntropyLoss().state_dict()) == [] and list(ce.parameters()) == []
    assert repr(ce) == "CrossEntropyLoss(reduction='mean', ignore_index=3, label_smoothing=0.1)"


def test_bad_arguments_are_clear_errors():
    x = np.zeros((3, C))
    with pytest.raises(ValueError, match="CrossEntropyLoss: reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"CrossEntropyLoss: target 4 is out of range for 4 classes"):
        nn.CrossEntropyLoss()(x, np.array([0, 4, 1]))
    with pytest.raises(ValueError, match=r"NLLLoss: target -1 is out of range for 4 classes \(ignore_index=-100\)"):
        nn.NLLLoss()(x, np.array([0, -1, 1]))
    with pytest.raises(ValueError, match=r"target.shape=\(2,\) does not match input.shape=\(3, 4\)"):
        nn.CrossEntropyLoss()(x, np.array([0, 1]))
    with pytest.raises(ValueError, match=r"weight.shape=\(3,\) does not match the 4 classes"):
        nn.CrossEntropyLoss(weight=np.ones(3))(x, np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="NLLLoss: target must hold integer class indices"):
        nn.NLLLoss()(x, np.zeros(3))
    with pytest.raises(ValueError, match=r"MSELoss: target.shape=\(3, 1\) does not match input.shape=\(3, 4\)"):
        nn.MSELoss()(x, np.zeros((3, 1)))


# --- against torch, when it is installed (the benchmarks' extra) ---------------------------------


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _check_against_torch(torch, t_loss, d_loss, x, t, target_grad=False):
    tx = torch.tensor(x, requires_grad=True)
    tt = torch.tensor(t, requires_grad=target_grad)
    dx = dn.tensor(x, requires_grad=True, dtype=np.float64)
    dt = dn.tensor(t, requires_grad=True, dtype=np.float64) if target_grad else t
    tv, dv = t_loss(tx, tt), d_loss(dx, dt)
    np.testing.assert_allclose(dv.data, tv.detach().numpy(), rtol=1e-12, atol=1e-14)
    w = np.random.default_rng(0).standard_normal(tv.shape)
    (tv * torch.tensor(w)).sum().backward()
    (dv * w).sum().backward()
    np.testing.assert_allclose(dx.grad.data, tx.grad.numpy(), rtol=1e-11, atol=1e-14)
    if target_grad:
        np.testing.assert_allclose(dt.grad.data, tt.grad.numpy(), rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("shape", SHAPES)
def test_losses_match_torch(torch, shape):
    rng = np.random.default_rng(4)
    wt = rng.uniform(0.5, 2.0, C)
    for reduction, weighted, ignore, eps in OPTIONS:
        x, t = _case(shape, rng, ignore)
        if shape == "1d" and ignore is not None:
            t = np.asarray(3)              # one row, not ignored: torch's mean of nothing is nan
        tw = torch.tensor(wt) if weighted else None
        ig = {} if ignore is None else {"ignore_index": ignore}
        _check_against_torch(torch,
                             torch.nn.CrossEntropyLoss(weight=tw, reduction=reduction, label_smoothing=eps, **ig),
                             nn.CrossEntropyLoss(weight=wt if weighted else None, reduction=reduction,
                                                 label_smoothing=eps, **ig), x, t)
        _check_against_torch(torch, torch.nn.NLLLoss(weight=tw, reduction=reduction, **ig),
                             nn.NLLLoss(weight=wt if weighted else None, reduction=reduction, **ig), x, t)
        p_x, p = _case(shape, rng, probabilities=True)
        _check_against_torch(torch, torch.nn.CrossEntropyLoss(weight=tw, reduction=reduction, label_smoothing=eps),
                             nn.CrossEntropyLoss(weight=wt if weighted else None, reduction=reduction,
                                                 label_smoothing=eps), p_x, p, target_grad=True)
    for reduction in ("mean", "sum", "none"):
        _check_against_torch(torch, torch.nn.MSELoss(reduction=reduction), nn.MSELoss(reduction=reduction),
                             rng.standard_normal((3, 2)), rng.standard_normal((3, 2)), target_grad=True)


# --- binary cross-entropies (no torch needed) --------------------------------------------------

def _ref_bce_logits(x, t, w=None, pw=None):
    pw = 1.0 if pw is None else pw
    # log(sigmoid(x)) = -logaddexp(0, -x), log(1 - sigmoid(x)) = -logaddexp(0, x)
    out = pw * t * np.logaddexp(0, -x) + (1 - t) * np.logaddexp(0, x)
    return out if w is None else out * w


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_matches_the_written_out_formula(reduction):
    rng = np.random.default_rng(7)
    x, t = rng.standard_normal((4, 3)) * 5, rng.uniform(0, 1, (4, 3))
    w, pw = rng.uniform(0.5, 2, 3), rng.uniform(0.5, 2, 3)
    for kw in ({}, {"weight": w}, {"pos_weight": pw}, {"weight": w, "pos_weight": pw}):
        want = _ref_bce_logits(x, t, kw.get("weight"), kw.get("pos_weight"))
        want = want if reduction == "none" else (want.sum() if reduction == "sum" else want.mean())
        got = nn.functional.binary_cross_entropy_with_logits(x, t, reduction=reduction, **kw)
        np.testing.assert_allclose(got.data, want, rtol=1e-13)
        np.testing.assert_allclose(nn.BCEWithLogitsLoss(reduction=reduction, **kw)(x, t).data, want, rtol=1e-13)
        assert gradcheck(lambda a, b: nn.functional.binary_cross_entropy_with_logits(a, b, reduction=reduction,
                                                                                     **kw), [x, t])
    p = 1 / (1 + np.exp(-x))
    want = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    want = want if reduction == "none" else (want.sum() if reduction == "sum" else want.mean())
    np.testing.assert_allclose(nn.BCELoss(reduction=reduction)(p, t).data, want, rtol=1e-12)
    assert gradcheck(lambda a, b: nn.functional.binary_cross_entropy(a, b, reduction=reduction), [p, t])


def test_bce_with_logits_under_autobatch_equals_eager():
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal((n, 3)) * 4 for n in (2, 3, 2)]
    ts = [rng.uniform(0, 1, x.shape) for x in xs]
    pw = np.array([0.5, 1.0, 2.0])

    def run():
        leaves = [dn.tensor(x, requires_grad=True, dtype=np.float64) for x in xs]
        losses = [nn.functional.binary_cross_entropy_with_logits(a, t, pos_weight=pw) for a, t in zip(leaves, ts)]
        total = losses[0] + losses[1] * 2.0 + losses[2]
        total.backward()
        return [float(loss.data) for loss in losses], [a.grad.data for a in leaves]

    want = run()
    with dn.autobatch():
        got = run()
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_bce_errors_are_clear():
    with pytest.raises(ValueError, match=r"binary_cross_entropy_with_logits: pos_weight.shape=\(2,\) does not "
                                         r"broadcast to input.shape=\(4, 3\)"):
        nn.functional.binary_cross_entropy_with_logits(np.zeros((4, 3)), np.zeros((4, 3)), pos_weight=np.ones(2))
    with pytest.raises(TypeError, match="binary_cross_entropy_with_logits: target must be floating-point"):
        nn.functional.binary_cross_entropy_with_logits(np.zeros(3), np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="BCELoss: every element of input must be in"):
        nn.BCELoss()(np.array([0.5, 2.0]), np.zeros(2))
