"""``dn.autograd.Function`` against ``torch.autograd.Function`` (issue 22):
the same class body, written once for both libraries, gives the same values
and gradients (float64), and the gradients equal finite differences; the
ctx API; the errors; autobatch and tracing refuse a custom Function by name."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.static as ds  # noqa: E402

torch.set_num_threads(1)


def _make(lib):
    """The test Functions, defined over ``lib`` (torch or dynnets)."""
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            (y,) = ctx.saved_tensors
            return grad_output * y

    class StraightThroughClamp(lib.autograd.Function):
        """Clamp forward, identity backward (a straight-through estimator):
        its gradient is NOT the clamp's, so only the custom backward gives it."""

        @staticmethod
        def forward(ctx, x, lo, hi):
            ctx.needs = ctx.needs_input_grad
            return x.clamp(lo, hi)

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    class MulAdd(lib.autograd.Function):
        """Two tensor inputs (one may not need grad), two outputs, one of them
        marked non-differentiable."""

        @staticmethod
        def forward(ctx, a, b, scale):
            ctx.save_for_backward(a, b)
            ctx.scale = scale
            prod = a * b * scale
            flag = (prod > 0).to(a.dtype) if lib is torch else (prod > 0).astype(a.dtype)
            ctx.mark_non_differentiable(flag)
            return prod, flag

        @staticmethod
        def backward(ctx, g, g_flag):
            a, b = ctx.saved_tensors
            assert float(g_flag.abs().sum()) == 0.0          # materialized zeros for the marked output
            ga = g * b * ctx.scale if ctx.needs_input_grad[0] else None
            gb = g * a * ctx.scale if ctx.needs_input_grad[1] else None
            return ga, gb, None

    class Square(lib.autograd.Function):
        """torch 2's style: forward without ctx, setup_context apart."""

        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    return Exp, StraightThroughClamp, MulAdd, Square


def _run(lib, case, arrays, grad_mask):
    Exp, Clamp, MulAdd, Square = _make(lib)
    xs = [lib.tensor(a, requires_grad=m) for a, m in zip(arrays, grad_mask)]
    if case == "exp":
        outs = (Exp.apply(xs[0]) * 3.0,)
    elif case == "clamp":
        outs = (Clamp.apply(xs[0], -0.5, 0.5) ** 2,)
    elif case == "muladd":
        prod, flag = MulAdd.apply(xs[0], xs[1], 2.0)
        assert not flag.requires_grad and prod.requires_grad
        outs = (prod, flag)
    else:
        outs = (Square.apply(Exp.apply(xs[0])),)
    w = np.random.default_rng(3).standard_normal(np.shape(outs[0]))
    (outs[0] * lib.tensor(w)).sum().backward()
    vals = [o.detach().numpy() for o in outs]
    grads = [None if x.grad is None else x.grad.numpy() for x in xs]
    return vals, grads


CASES = [("exp", [(3, 2)], [True]), ("clamp", [(7,)], [True]), ("muladd", [(2, 3), (2, 3)], [True, True]),
         ("muladd", [(2, 3), (2, 3)], [True, False]), ("setup_context", [(4,)], [True])]


@pytest.mark.parametrize("case,shapes,grad_mask", CASES, ids=[f"{c}-{m}" for c, _, m in CASES])
def test_custom_functions_match_torch(case, shapes, grad_mask):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    dv, dg = _run(dn, case, arrays, grad_mask)
    tv, tg = _run(torch, case, arrays, grad_mask)
    for a, b in zip(dv, tv):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    for a, b in zip(dg, tg):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    if case == "clamp":
        x = arrays[0]
        # straight through: d/dx clamp(x)^2 with clamp's derivative replaced by 1 is 2 * clamp(x), also outside
        w = np.random.default_rng(3).standard_normal(x.shape)
        np.testing.assert_allclose(dg[0], 2 * np.clip(x, -0.5, 0.5) * w, rtol=1e-12)


def test_gradients_equal_finite_differences():
    Exp, _, MulAdd, Square = _make(dn)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    assert dn.autograd.gradcheck(lambda x: Exp.apply(x), [a])
    assert dn.autograd.gradcheck(lambda x, y: MulAdd.apply(x, y, 0.7)[0], [a, b])
    assert dn.autograd.gradcheck(lambda x: Square.apply(Exp.apply(x)).sum(), [a])


def test_ctx_and_modes():
    _, Clamp, _, _ = _make(dn)
    x = dn.tensor([0.2, 2.0], requires_grad=True)
    y = Clamp.apply(x, 0.0, 1.0)
    assert y.requires_grad and y.grad_fn is not None
    with dn.no_grad():
        z = Clamp.apply(x, 0.0, 1.0)
    assert not z.requires_grad and z.tolist() == [pytest.approx(0.2), 1.0]
    c = Clamp.apply(dn.tensor([3.0]), 0.0, 1.0)                      # no input needs grad: nothing recorded
    assert not c.requires_grad and c.tolist() == [1.0]
    # the version check: an input changed in place after the call makes backward raise, as torch's
    Exp = _make(dn)[0]
    w = dn.tensor([1.0, 2.0], requires_grad=True)
    h = w * 1.0
    out = Exp.apply(h)
    with dn.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match="in-place|inplace"):
        out.sum().backward()


def test_errors_name_the_function():
    class WrongCount(dn.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(dn.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return dn.ones(5)

    x = dn.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"function WrongCountBackward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        WrongCount.apply(x, x).sum().backward()
    with pytest.raises(dn.autograd.ShapeError, match=r"WrongShapeBackward returned an invalid gradient at index 0"):
        WrongShape.apply(dn.ones(3, requires_grad=True)).backward()
    with pytest.raises(TypeError, match="positional arguments only"):
        WrongCount.apply(x, y=x)


def test_autobatch_and_trace_refuse_a_custom_function():
    Exp = _make(dn)[0]
    x = dn.tensor([0.5, 1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="Exp.apply: a custom autograd.Function is not supported inside "
                                           "dn.autobatch"):
        with dn.autobatch():
            Exp.apply(x)
    step = ds.trace(lambda t: Exp.apply(t).sum())
    with pytest.raises(RuntimeError, match="Exp.apply: a custom autograd.Function cannot be traced"):
        step(np.ones(2))
