"""The Tensor API: creation, attributes, conversion, repr, and a worked example."""
from __future__ import annotations

import numpy as np

import dynnets as dn
import pytest

from dynnets.autograd.primitives import DTypeError

import dynnets
from dynnets.autograd import ops
from dynnets.autograd.primitives import ShapeError
from dynnets.autograd.tensor import Parameter, Tensor


def test_tensor_infers_dtype_as_torch_and_copies():
    src = np.array([1.0, 2.0])
    t = dn.tensor(src)
    assert t.dtype == np.float64 and t.shape == (2,) and not t.requires_grad, "an array keeps its dtype"
    src[0] = 99.0
    assert t.data[0] == 1.0
    assert dn.tensor([1.0, 2.0]).dtype == np.float32, "Python floats give the default float32"
    assert dn.tensor([1, 2]).dtype == np.int64, "Python ints give int64 (class labels), as torch.tensor([1, 2])"
    assert dn.tensor(np.int64(5)).dtype == np.int64
    assert dn.tensor(3.5).shape == () and dn.tensor(3.5).dtype == np.float32
    assert dn.tensor(np.array([1, 2])).dtype == np.int64, "integer arrays stay integers (indices)"
    assert dn.tensor(np.array([True])).dtype == bool and dn.tensor([True]).dtype == bool


def test_tensor_dtype_and_requires_grad():
    t = dn.tensor([1, 2], dtype=np.float64, requires_grad=True)
    assert t.dtype == np.float64 and t.requires_grad and t.is_leaf and t.grad is None
    with pytest.raises(TypeError, match="only floating-point tensors can require grad, got dtype int64"):
        dn.tensor(np.array([1, 2]), requires_grad=True)
    assert dn.tensor(dn.tensor([1.0, 2.0])).dtype == np.float32


def test_zeros_ones_full_shapes():
    for f, v in ((dn.zeros, 0.0), (dn.ones, 1.0)):
        a, b = f(2, 3), f((2, 3))
        assert a.shape == b.shape == (2, 3) and a.dtype == np.float32
        assert np.all(a.data == v)
        assert f(3, dtype=np.float64, requires_grad=True).requires_grad
    assert dn.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert dn.zeros_like(dn.ones(2, 2)).shape == (2, 2)


@pytest.mark.parametrize("make", [
    lambda rng: dn.randn(3, 4, rng=rng),
    lambda rng: dn.uniform(3, 4, low=-2.0, high=1.0, rng=rng),
])
def test_random_tensors_are_reproducible(make):
    a, b = make(7), make(7)
    assert a.dtype == np.float32 and a.shape == (3, 4)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(make(8).numpy(), a.numpy())
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    x1, y1 = make(g1), make(g1)
    x2, y2 = make(g2), make(g2)
    np.testing.assert_array_equal(x1.numpy(), x2.numpy())
    np.testing.assert_array_equal(y1.numpy(), y2.numpy())
    assert not np.array_equal(x1.numpy(), y1.numpy()), "a Generator advances between calls"


def test_uniform_range():
    u = dn.uniform(1000, low=-2.0, high=1.0, rng=0)
    assert u.data.min() >= -2.0 and u.data.max() < 1.0


def test_attributes_and_conversions():
    t = dn.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert t.numpy() is t.numpy()
    assert np.asarray(t) is t.numpy()
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert t.shape == (2, 2) and t.ndim == 2 and t.size() == (2, 2) and t.numel() == 4 and len(t) == 2
    assert dn.tensor([2.5]).item() == 2.5
    assert isinstance(dn.tensor(2.5).item(), float)
    assert float(dn.tensor(1.5)) == 1.5
    with pytest.raises(ValueError, match=r"item: only a one-element tensor .* got shape \(2, 2\)"):
        t.item()
    d = t.detach()
    assert not d.requires_grad and d.numpy() is t.numpy()


def test_grad_property():
    x = dn.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert isinstance(x.grad, Tensor) and x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    x.grad = None
    assert x.grad is None
    x.grad = np.array([1.0, 1.0], dtype=np.float32)
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])
    with pytest.raises(ShapeError, match=r"grad: shape \(3,\) does not match tensor shape \(2,\)"):
        x.grad = np.zeros(3)


def test_requires_grad_on_non_leaf_cannot_change():
    x = dn.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2.0).requires_grad_(False)
    y = dn.tensor([1.0]).requires_grad_()
    assert y.requires_grad


def test_repr_is_readable():
    assert repr(dn.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(dn.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert repr(dn.tensor([1.5], dtype=np.float64)) == "tensor([1.5], dtype=float64)"
    x = dn.tensor([1.0], requires_grad=True)
    assert repr(x * 2.0) == "tensor([2.], grad_fn=<mul>)"
    big = repr(dn.zeros(100))
    assert "..." in big and len(big) < 200
    assert repr(Parameter(np.zeros(2))).startswith("Parameter containing:\ntensor([0., 0.]")


def test_parameter_defaults():
    p = Parameter(np.array([1, 2]))
    assert p.requires_grad and p.dtype == np.float32
    p2 = Parameter(dn.tensor([1.0, 2.0], dtype=np.float64))
    assert p2.dtype == np.float64 and p2.numpy() is not None
    (p * 2.0).sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), [2.0, 2.0])


def test_comparisons_and_argmax_are_constants():
    x = dn.tensor([1.0, 3.0, 2.0], requires_grad=True)
    m = x > 1.5
    assert m.dtype == bool and not m.requires_grad
    assert x.argmax().item() == 1


def test_equality_is_elementwise_and_hashing_by_identity():
    x = dn.tensor([1.0, 3.0, 2.0], requires_grad=True)
    e, ne = x == 3.0, x != np.array([1.0, 0.0, 2.0])
    assert e.dtype == bool and not e.requires_grad and e.is_leaf
    np.testing.assert_array_equal(e.data, [False, True, False])
    np.testing.assert_array_equal(ne.data, [False, True, False])
    np.testing.assert_array_equal((np.array([1.0, 0.0, 2.0]) == x).data, [True, False, True])
    assert (x == None) is False and (x != None) is True     # noqa: E711 (torch's answer)
    y = dn.tensor([1.0, 3.0, 2.0])
    assert {x: "x", y: "y"}[y] == "y" and x in {x} and y not in {x}
    p = Parameter(np.zeros(2))
    assert hash(p) == id(p) and (p == 0.0).numpy().all()
    # a one-element result has a truth value, as torch's
    assert bool(dn.tensor([2.0]) == 2.0) and not bool(dn.tensor([2.0]) != 2.0)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x == y)


def test_equality_under_autobatch_is_lazy_and_elementwise():
    x = dn.tensor([[1.0, 2.0], [3.0, 4.0]])
    with dn.autobatch():
        rows = [x[i] * 1.0 for i in range(2)]
        eqs = [r == np.array([1.0, 4.0]) for r in rows]
        assert all(isinstance(e, dn.LazyTensor) and e.dtype == bool for e in eqs)
        assert hash(rows[0]) == id(rows[0])
    np.testing.assert_array_equal(eqs[0].data, [True, False])
    np.testing.assert_array_equal(eqs[1].data, [False, True])


def test_numpy_reductions_of_a_tensor():
    """``np.mean(t)`` / ``np.sum(t)`` call the tensor's method with numpy's
    ``dtype=`` and ``out=`` keywords."""
    t = dn.tensor(np.array([True, False, True, True]))
    assert float(np.mean(t)) == 0.75 and int(np.sum(t)) == 3
    assert np.mean(t).dtype == np.float64                  # numpy's mean of booleans
    with pytest.raises(DTypeError, match=r"mean: expected a floating-point input, got dtype bool"):
        t.mean()                                           # torch's: cast first, t.float().mean()
    assert float(t.float().mean()) == 0.75
    assert dn.tensor([1.0, 2.0]).sum(dtype=np.float64).dtype == np.float64
    with pytest.raises(TypeError, match="mean: out= is not supported"):
        np.mean(t, out=np.zeros(()))
    assert f"{dn.tensor(0.25):.2f}" == "0.25"
    with pytest.raises(TypeError):
        f"{dn.tensor([0.25]):.2f}"


def test_top_level_package_exports_tensor_api():
    for name in ("tensor", "zeros", "ones", "randn", "uniform", "no_grad", "detect_anomaly", "Tensor"):
        assert hasattr(dynnets, name), f"dynnets.{name} is missing"
    t = dynnets.tensor([1.0, 2.0], requires_grad=True)
    assert isinstance(t, dynnets.Tensor) and t.requires_grad


def test_linear_regression_worked_example():
    """loss = mean((w x + b - y)^2) at w = 0.1, b = 0.3 on y = 2x."""
    w = dn.tensor(0.1, requires_grad=True)
    b = dn.tensor(0.3, requires_grad=True)
    x = dn.tensor([1.0, 2.0, 3.0, 4.0])
    y = dn.tensor([2.0, 4.0, 6.0, 8.0])
    loss = ops.mean((w * x + b - y) ** 2)
    assert loss.dtype == np.float32
    assert loss.item() == pytest.approx(24.315, rel=1e-6)
    loss.backward()
    assert w.grad.item() == pytest.approx(-27.0, rel=1e-6)
    assert b.grad.item() == pytest.approx(-8.9, rel=1e-6)


def test_np_asarray_of_a_reduction_result():
    # a whole-tensor reduction holds a numpy scalar: np.asarray(loss) raised
    # "object __array__ method not producing an array"
    loss = dn.tensor([1.0, 2.0]).sum()
    a = np.asarray(loss)
    assert type(a) is np.ndarray and a.shape == () and a.dtype == np.float32 and a == 3.0
    assert np.asarray(dn.dot(dn.ones(3), dn.ones(3)), dtype=np.float64).dtype == np.float64
    assert float(np.mean([loss, loss])) == 3.0
