"""torch's autograd API beyond ``backward``, against PyTorch in float64:
``Tensor.retain_grad`` / ``retains_grad``, ``backward(inputs=)``,
``torch.autograd.grad`` (and its refusal of ``create_graph``), and the
gradient clipping utilities ``clip_grad_norm_`` (a 0-d tensor) and
``clip_grad_value_``."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.nn as dnn  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
W = RNG.standard_normal((4, 2))


def _pair(a, requires_grad=True):
    return (dn.tensor(a.copy(), requires_grad=requires_grad),
            torch.tensor(a.copy(), requires_grad=requires_grad))


def _np(t):
    return None if t is None else (t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy())


def _graph(lib, x, w):
    h = lib.tanh(x @ w)
    y = h * h
    return h, y, (y * 3.0).sum()


# --- retain_grad --------------------------------------------------------------------------------------

def test_retain_grad_fills_non_leaf_grads_as_torch():
    (dx, tx), (dw, tw) = _pair(X), _pair(W)
    got, want = _graph(dn, dx, dw), _graph(torch, tx, tw)
    for g, t in zip(got, want):
        g.retain_grad()
        t.retain_grad()
        assert g.retains_grad and t.retains_grad
    got[2].backward(retain_graph=True)
    want[2].backward(retain_graph=True)
    for g, t in zip(got + (dx, dw), want + (tx, tw)):
        np.testing.assert_allclose(_np(g.grad), _np(t.grad), rtol=1e-12)
        assert g.grad.dtype == dn.float64
    # a second backward accumulates into the retained gradients too, as torch's
    got[2].backward()
    want[2].backward()
    for g, t in zip(got, want):
        np.testing.assert_allclose(_np(g.grad), _np(t.grad), rtol=1e-12)


def test_retain_grad_of_a_multiple_result_op_and_a_leaf():
    (dx, tx) = _pair(X)
    da, db = dn.split(dx, [1, 2], dim=0)
    ta, tb = torch.split(tx, [1, 2], dim=0)
    for t in (da, db, ta, tb, dx, tx):
        t.retain_grad()                      # a leaf: a no-op, its grad is filled anyway
    assert not dx.retains_grad and not tx.retains_grad
    (da.sum() * 2 + (db * db).sum()).backward()
    (ta.sum() * 2 + (tb * tb).sum()).backward()
    for g, t in ((da, ta), (db, tb), (dx, tx)):
        np.testing.assert_allclose(_np(g.grad), _np(t.grad), rtol=1e-12)


def test_without_retain_grad_a_non_leaf_has_no_grad_and_errors_match():
    (dx, tx) = _pair(X)
    dy, ty = dx * 2, tx * 2
    dy.sum().backward()
    with pytest.warns(UserWarning):
        assert ty.grad is None           # torch warns; dynnets gives None quietly
    ty.sum().backward()
    assert dy.grad is None and not dy.retains_grad
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        dn.ones(2).retain_grad()
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        torch.ones(2).retain_grad()


def test_backward_inputs_fills_only_those():
    (dx, tx), (dw, tw) = _pair(X), _pair(W)
    dh, _, dl = _graph(dn, dx, dw)
    th, _, tl = _graph(torch, tx, tw)
    dl.backward(inputs=[dw, dh])
    tl.backward(inputs=[tw, th])
    assert dx.grad is None and tx.grad is None
    np.testing.assert_allclose(_np(dw.grad), _np(tw.grad), rtol=1e-12)
    np.testing.assert_allclose(_np(dh.grad), _np(th.grad), rtol=1e-12)


# --- autograd.grad ------------------------------------------------------------------------------------

def test_autograd_grad_values_and_no_grad_side_effects():
    (dx, tx), (dw, tw) = _pair(X), _pair(W)
    dx.grad = dn.tensor(np.ones_like(X))
    tx.grad = torch.ones(3, 4, dtype=torch.float64)
    dh, dy, dl = _graph(dn, dx, dw)
    th, ty, tl = _graph(torch, tx, tw)
    got = dn.autograd.grad(dl, [dx, dw, dh], retain_graph=True)
    want = torch.autograd.grad(tl, [tx, tw, th], retain_graph=True)
    assert isinstance(got, tuple) and len(got) == 3
    for g, t in zip(got, want):
        np.testing.assert_allclose(_np(g), _np(t), rtol=1e-12)
        assert g.dtype == dn.float64 and not g.requires_grad
    np.testing.assert_array_equal(_np(dx.grad), np.ones_like(X))       # .grad untouched, as torch's
    assert dw.grad is None and tw.grad is None and dh.grad is None
    # several outputs with grad_outputs: the sum of their vector-Jacobian products
    v = RNG.standard_normal((3, 2))
    got = dn.autograd.grad([dy, dl], dw, grad_outputs=[dn.tensor(v), None])
    want = torch.autograd.grad([ty, tl], tw, grad_outputs=[torch.tensor(v), None])
    np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-12)
    # the graph is freed by default (retain_graph=None follows create_graph=False)
    with pytest.raises(RuntimeError):
        dn.autograd.grad(dl, dw)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(tl, tw)


def test_autograd_grad_unused_inputs_and_errors():
    (dx, tx), (dw, tw) = _pair(X), _pair(W)
    du, tu = _pair(np.ones(2))
    for lib, x, w, u in ((dn, dx, dw, du), (torch, tx, tw, tu)):
        with pytest.raises(RuntimeError, match="allow_unused"):
            lib.autograd.grad((x @ w).sum(), [w, u])
        gw, gu = lib.autograd.grad((x @ w).sum(), [w, u], allow_unused=True)
        assert gu is None
        gw, gu = lib.autograd.grad((x @ w).sum(), [w, u], materialize_grads=True)
        np.testing.assert_array_equal(_np(gu), np.zeros(2))
        with pytest.raises(RuntimeError, match="does not require grad"):
            lib.autograd.grad((x @ w).sum(), [lib.ones(2)])
        with pytest.raises(RuntimeError):
            lib.autograd.grad((x @ w), [w])                           # a non-scalar output needs grad_outputs


def test_autograd_grad_create_graph_is_refused_clearly():
    """torch computes a differentiable gradient; dynnets' VJPs run on arrays, so
    create_graph=True raises rather than return a gradient without history."""
    dx, _ = _pair(X)
    with pytest.raises(NotImplementedError, match="create_graph=True .*double backward"):
        dn.autograd.grad((dx * dx).sum(), dx, create_graph=True)
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        (dx * dx).sum().backward(create_graph=True)


# --- clip_grad_norm_ / clip_grad_value_ -----------------------------------------------------------------

def _params(grads, dtype=np.float64):
    dps = [dnn.Parameter(np.zeros(g.shape, dtype)) for g in grads]
    tps = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64 if dtype == np.float64 else torch.float32))
           for g in grads]
    for dp, tp, g in zip(dps, tps, grads):
        dp.grad = dn.tensor(g.astype(dtype))
        tp.grad = torch.tensor(g.astype(dtype))
    return dps, tps


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_returns_the_total_norm_tensor(norm_type, max_norm):
    grads = [RNG.standard_normal((3, 2)), RNG.standard_normal(4)]
    dps, tps = _params(grads)
    got = dnn.utils.clip_grad_norm_(dps, max_norm, norm_type=norm_type)
    want = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type=norm_type)
    assert isinstance(got, dn.Tensor) and tuple(got.shape) == () and got.dtype == dn.float64
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    for dp, tp in zip(dps, tps):
        np.testing.assert_allclose(dp.grad.numpy(), tp.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_dtype_empty_and_nonfinite():
    dps, tps = _params([np.array([3.0, 4.0])], np.float32)
    got, want = dnn.utils.clip_grad_norm_(dps, 1.0), torch.nn.utils.clip_grad_norm_(tps, 1.0)
    assert got.dtype == dn.float32 and want.dtype == torch.float32 and got.item() == want.item() == 5.0
    p, tp = dnn.Parameter(np.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    got, want = dnn.utils.clip_grad_norm_([p], 1.0), torch.nn.utils.clip_grad_norm_([tp], 1.0)
    assert got.item() == want.item() == 0.0 and tuple(got.shape) == tuple(want.shape) == ()
    dps, tps = _params([np.array([np.nan, 1.0])])
    with pytest.raises(RuntimeError, match="non-finite|nan"):
        dnn.utils.clip_grad_norm_(dps, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(tps, 1.0, error_if_nonfinite=True)
    # without the check, a NaN norm spreads to every gradient, as torch's
    got, want = dnn.utils.clip_grad_norm_(dps, 1.0), torch.nn.utils.clip_grad_norm_(tps, 1.0)
    assert math.isnan(got.item()) and math.isnan(want.item())
    np.testing.assert_array_equal(dps[0].grad.numpy(), tps[0].grad.numpy())


@pytest.mark.parametrize("clip", [0.0, 0.5, 10])
def test_clip_grad_value_(clip):
    grads = [RNG.standard_normal((3, 2)) * 2, np.array([np.nan, -np.inf, 0.3])]
    dps, tps = _params(grads)
    before = dps[0].raw_grad
    assert dnn.utils.clip_grad_value_(dps, clip) is None
    assert torch.nn.utils.clip_grad_value_(tps, clip) is None
    for dp, tp in zip(dps, tps):
        np.testing.assert_array_equal(dp.grad.numpy(), tp.grad.numpy())
    np.testing.assert_array_equal(before, grads[0])          # reassigned, the old array unchanged
    p = dnn.Parameter(np.zeros(1))                           # no gradient: skipped
    dnn.utils.clip_grad_value_(p, 1.0)
    assert p.grad is None


def test_clip_grad_value_row_sparse_and_errors():
    emb = dnn.Embedding(5, 2)
    temb = torch.nn.Embedding(5, 2)
    with torch.no_grad():
        temb.weight.copy_(torch.tensor(emb.weight.numpy()))
    idx = np.array([1, 1, 3])
    (emb(dn.tensor(idx)) * 3.0).sum().backward()
    (temb(torch.tensor(idx)) * 3.0).sum().backward()
    dnn.utils.clip_grad_value_(emb.parameters(), 4.0)
    torch.nn.utils.clip_grad_value_(temb.parameters(), 4.0)
    assert type(emb.weight.raw_grad).__name__ == "RowSparse"
    np.testing.assert_allclose(emb.weight.grad.numpy(), temb.weight.grad.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="non-negative"):
        dnn.utils.clip_grad_value_(emb.parameters(), -1.0)
    with pytest.raises(TypeError, match="clip_value must be a number"):
        dnn.utils.clip_grad_value_(emb.parameters(), "1")
