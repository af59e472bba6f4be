"""``dynnets.nn.init`` against ``torch.nn.init``: the same gains; for each
initialiser on Linear, LSTM and Conv-shaped weights, the same bound (the
largest |value| of a large draw, from both libraries, below the same
formula's bound and close to it) and the same standard deviation within
sampling error; truncation and orthogonality alike; the same errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
from dynnets.nn import init  # noqa: E402

tinit = torch.nn.init
SHAPES = [(400, 300), (4 * 64, 100), (32, 16, 3, 3), (20, 10, 5)]

CASES = {
    "xavier_uniform_": (dict(gain=1.5), "uniform"),
    "xavier_normal_": (dict(gain=0.5), "normal"),
    "kaiming_uniform_": (dict(a=math.sqrt(5)), "uniform"),
    "kaiming_uniform_/fan_out-relu": (dict(mode="fan_out", nonlinearity="relu"), "uniform"),
    "kaiming_normal_": (dict(), "normal"),
    "kaiming_normal_/fan_out-tanh": (dict(mode="fan_out", nonlinearity="tanh"), "normal"),
    "uniform_": (dict(a=-0.2, b=0.5), "uniform"),
    "normal_": (dict(mean=0.5, std=0.1), "normal"),
    "trunc_normal_": (dict(mean=0.1, std=0.3, a=-0.2, b=0.3), "bounded"),
}


def test_gains():
    for nl, param in [("linear", None), ("conv1d", None), ("conv_transpose3d", None), ("sigmoid", None),
                      ("tanh", None), ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3),
                      ("selu", None)]:
        assert init.calculate_gain(nl, param) == pytest.approx(tinit.calculate_gain(nl, param), rel=1e-15), nl


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("case", list(CASES))
def test_same_distribution_as_torch(case, shape):
    kw, kind = CASES[case]
    name = case.split("/")[0]
    torch.manual_seed(0)
    want = getattr(tinit, name)(torch.empty(shape, dtype=torch.float64), **kw).numpy()
    got = getattr(init, name)(dn.nn.Parameter(np.zeros(shape)), generator=dn.Generator().manual_seed(0), **kw).numpy()
    n = want.size
    assert abs(got.std() / want.std() - 1) < 10 / math.sqrt(n), (got.std(), want.std())
    assert abs(got.mean() - want.mean()) < 10 * want.std() / math.sqrt(n)
    if kind in ("uniform", "bounded"):
        lo, hi = min(got.min(), want.min()), max(got.max(), want.max())
        spread = hi - lo
        for a in (got, want):
            assert a.min() - lo < 0.01 * spread and hi - a.max() < 0.01 * spread
        if kind == "bounded":
            assert got.min() >= kw["a"] and got.max() <= kw["b"]


@pytest.mark.parametrize("shape", [(6, 6), (4, 9), (9, 4), (8, 2, 3, 3)])
def test_orthogonal_like_torch(shape):
    want = tinit.orthogonal_(torch.empty(shape, dtype=torch.float64), gain=3.0).numpy().reshape(shape[0], -1)
    got = init.orthogonal_(dn.nn.Parameter(np.zeros(shape)), gain=3.0).numpy().reshape(shape[0], -1)
    for m in (got, want):
        gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
        np.testing.assert_allclose(gram, 9.0 * np.eye(min(m.shape)), atol=1e-10)


@pytest.mark.parametrize("call", [
    lambda M, t: M.xavier_uniform_(t((5,))),
    lambda M, t: M.kaiming_normal_(t((3, 3)), mode="fan_avg"),
    lambda M, t: M.kaiming_normal_(t((3, 3)), nonlinearity="gelu"),
    lambda M, t: M.eye_(t((2, 2, 2))),
    lambda M, t: M.orthogonal_(t((4,))),
    lambda M, t: M.calculate_gain("leaky_relu", "0.2"),
])
def test_same_errors(call):
    with pytest.raises(ValueError):
        call(tinit, lambda s: torch.empty(s))
    with pytest.raises(ValueError):
        call(init, lambda s: dn.nn.Parameter(np.zeros(s, np.float32)))


def test_fills_like_torch():
    for name, args in [("constant_", (0.3,)), ("ones_", ()), ("zeros_", ()), ("eye_", ())]:
        want = getattr(tinit, name)(torch.empty(3, 5), *args).numpy()
        got = getattr(init, name)(dn.nn.Parameter(np.full((3, 5), 7.0, np.float32)), *args).numpy()
        np.testing.assert_array_equal(got, want)


INIT_CALLS = [("zeros_", ()), ("ones_", ()), ("constant_", (0.3,)), ("eye_", ()), ("uniform_", ()), ("normal_", ()),
              ("xavier_uniform_", ()), ("xavier_normal_", ()), ("kaiming_uniform_", ()), ("kaiming_normal_", ()),
              ("orthogonal_", ()), ("trunc_normal_", ())]


@pytest.mark.parametrize("name,args", INIT_CALLS, ids=[n for n, _ in INIT_CALLS])
def test_an_initialiser_overwriting_a_saved_value_makes_backward_raise(name, args):
    """torch's initialisers run under no_grad and bump the version counter:
    a backward that needs the old weight raises instead of using the new
    values (a silently wrong gradient)."""
    for lib, lib_init in ((torch, tinit), (dn, init)):
        w = lib.nn.Parameter(lib.ones(3, 3, dtype=lib.float64) * 0.5)
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        y = (x @ w).sum()                       # the matmul saves w for x's gradient
        getattr(lib_init, name)(w, *args)
        assert not w.grad_fn and w.requires_grad and w.is_leaf
        with pytest.raises(RuntimeError, match="modified by an inplace operation|in-place|inplace"):
            y.backward()
        # without a pending backward the fill is just a fill: nothing recorded
        (x @ w).sum().backward()
        assert x.grad is not None and w.grad is not None
