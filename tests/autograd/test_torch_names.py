"""PyTorch's names in eager mode, checked against torch for values and
gradients: size, dim=/keepdim=, permute, t, clone, max/min(dim), argmax."""
import numpy as np
import pytest

import dynnets as dn
from dynnets.autograd import ops
from dynnets.autograd.primitives import ShapeError

torch = pytest.importorskip("torch")


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return dn.tensor(a, dtype=np.float64, requires_grad=True), torch.tensor(a, requires_grad=True)


def _check(fn_dn, fn_torch, shape=(3, 4, 5), seed=0):
    """Same values and the same gradient of sum(out * w) for a random w."""
    x, xt = _pair(shape, seed)
    y, yt = fn_dn(x), fn_torch(xt)
    np.testing.assert_allclose(y.data, yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = np.random.default_rng(seed + 1).standard_normal(yt.shape)
    (y * dn.tensor(w, dtype=np.float64)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_size_and_numel():
    x, xt = _pair((3, 4, 5))
    assert x.size() == tuple(xt.size()) and isinstance(x.size(), tuple)
    for d in (0, 1, 2, -1, -3):
        assert x.size(d) == xt.size(d)
    assert x.numel() == xt.numel() == 60
    with pytest.raises(IndexError, match=r"size: dimension out of range \(expected to be in range of \[-3, 2\], "
                                         r"but got 3\)"):
        x.size(3)
    with pytest.raises(IndexError):
        xt.size(3)


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("dim", [0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_take_dim_and_keepdim(name, dim, keepdim):
    _check(lambda x: getattr(x, name)(dim=dim, keepdim=keepdim),
           lambda x: getattr(x, name)(dim=dim, keepdim=keepdim))
    _check(lambda x: getattr(dn, name)(x, dim=dim, keepdim=keepdim),
           lambda x: getattr(torch, name)(x, dim=dim, keepdim=keepdim))
    # the numpy spelling is the same op
    x, _ = _pair((3, 4, 5))
    np.testing.assert_array_equal(getattr(x, name)(dim=dim, keepdim=keepdim).data,
                                  getattr(x, name)(axis=dim, keepdims=keepdim).data)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_return_values_and_indices(name, dim, keepdim):
    x, xt = _pair((3, 4, 5), seed=dim + 3)
    r, rt = getattr(x, name)(dim, keepdim=keepdim), getattr(xt, name)(dim, keepdim=keepdim)
    assert isinstance(r, ops.MaxMin) and len(r) == 2
    values, indices = r
    assert values is r.values and indices is r.indices
    np.testing.assert_allclose(values.data, rt.values.detach().numpy())
    np.testing.assert_array_equal(indices.data, rt.indices.numpy())
    assert indices.dtype == np.int64
    _check(lambda x: getattr(x, name)(dim, keepdim=keepdim).values,
           lambda x: getattr(x, name)(dim, keepdim=keepdim).values, seed=dim + 3)
    _check(lambda x: getattr(dn, name)(x, dim=dim).values, lambda x: getattr(torch, name)(x, dim=dim).values)


def test_max_gradient_at_ties_goes_to_the_selected_element_as_torch():
    a = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    x = dn.tensor(a, dtype=np.float64, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    x.max(1).values.sum().backward()
    xt.max(1).values.sum().backward()
    np.testing.assert_array_equal(x.grad.data, xt.grad.numpy())
    # the whole-tensor maximum keeps numpy's amax convention (shares at ties), as torch.amax
    y = dn.tensor(a, dtype=np.float64, requires_grad=True)
    yt = torch.tensor(a, requires_grad=True)
    y.max().backward()
    torch.amax(yt, dim=(0, 1)).backward()
    np.testing.assert_array_equal(y.grad.data, yt.grad.numpy())


def test_max_without_dim_and_elementwise_form():
    _check(lambda x: x.max(), lambda x: x.max())
    _check(lambda x: x.min(), lambda x: x.min())
    _check(lambda x: x.max(axis=1), lambda x: torch.amax(x, dim=1))
    other = np.random.default_rng(9).standard_normal((3, 4, 5))
    _check(lambda x: dn.max(x, dn.tensor(other, dtype=np.float64)), lambda x: torch.max(x, torch.tensor(other)))
    _check(lambda x: dn.min(x, dn.tensor(other, dtype=np.float64)), lambda x: torch.min(x, torch.tensor(other)))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmaxes_take_dim(name, dim):
    _check(lambda x: getattr(x, name)(dim=dim), lambda x: getattr(x, name)(dim=dim))
    _check(lambda x: getattr(dn.nn.functional, name)(x, dim=dim),
           lambda x: getattr(torch.nn.functional, name)(x, dim=dim))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_and_stack_take_dim(dim):
    a, at = _pair((2, 3, 4), 1)
    b, bt = _pair((2, 3, 4), 2)
    for f_dn, f_t in ((dn.cat, torch.cat), (dn.stack, torch.stack)):
        if f_dn is dn.cat or dim != 2:
            y, yt = f_dn([a, b], dim=dim), f_t([at, bt], dim=dim)
            np.testing.assert_array_equal(y.data, yt.detach().numpy())
            w = np.random.default_rng(0).standard_normal(yt.shape)
            (y * dn.tensor(w, dtype=np.float64)).sum().backward()
            (yt * torch.tensor(w)).sum().backward()
            np.testing.assert_allclose(a.grad.data, at.grad.numpy())
            np.testing.assert_allclose(b.grad.data, bt.grad.numpy())
            a.grad = b.grad = at.grad = bt.grad = None


def test_argmax_argmin_squeeze_unsqueeze_split_flatten_take_dim():
    x, xt = _pair((3, 1, 5), 4)
    for kd in (False, True):
        np.testing.assert_array_equal(x.argmax(dim=2, keepdim=kd).data, xt.argmax(dim=2, keepdim=kd).numpy())
        np.testing.assert_array_equal(dn.argmin(x, dim=0, keepdim=kd).data, torch.argmin(xt, dim=0, keepdim=kd).numpy())
    np.testing.assert_array_equal(x.argmax().data, xt.argmax().numpy())
    assert x.argmax(dim=2).dtype == np.int64
    _check(lambda x: x.squeeze(dim=1), lambda x: x.squeeze(dim=1), shape=(3, 1, 5))
    _check(lambda x: x.squeeze(), lambda x: x.squeeze(), shape=(3, 1, 5, 1))
    _check(lambda x: x.unsqueeze(dim=1), lambda x: x.unsqueeze(dim=1), shape=(3, 5))
    _check(lambda x: dn.split(x, [2, 3], dim=1)[1], lambda x: torch.split(x, [2, 3], dim=1)[1], shape=(3, 5))
    _check(lambda x: x.flatten(1), lambda x: x.flatten(1), shape=(2, 3, 4, 5))
    _check(lambda x: x.flatten(1, 2), lambda x: x.flatten(1, 2), shape=(2, 3, 4, 5))
    _check(lambda x: x.flatten(), lambda x: x.flatten(), shape=(2, 3, 4))


def test_permute_t_clone():
    _check(lambda x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1))
    _check(lambda x: x.permute((1, 2, 0)), lambda x: x.permute((1, 2, 0)))
    _check(lambda x: x.t(), lambda x: x.t(), shape=(3, 4))
    _check(lambda x: x.t(), lambda x: x.t(), shape=(4,))
    _check(lambda x: x.clone() * 2.0, lambda x: x.clone() * 2.0)
    x, _ = _pair((2, 3))
    c = x.clone()
    assert c.data is not x.data and not np.shares_memory(c.data, x.data) and c.grad_fn.prim.name == "copy"
    with pytest.raises(ShapeError, match="t: expects a tensor with <= 2 dimensions, but x has 3"):
        dn.tensor(np.zeros((2, 3, 4))).t()
    with pytest.raises(ShapeError, match=r"permute: 2 dims \(1, 0\) for an input with 3 dimensions"):
        dn.tensor(np.zeros((2, 3, 4))).permute(1, 0)


@pytest.mark.parametrize("call", [
    lambda x: x.sum(axis=0, dim=0), lambda x: x.mean(keepdims=True, keepdim=True), lambda x: dn.max(x, 0, axis=0),
    lambda x: x.min(0, keepdims=True, keepdim=True), lambda x: x.softmax(axis=0, dim=0),
    lambda x: dn.log_softmax(x, 0, dim=0), lambda x: dn.cat([x, x], 0, dim=0), lambda x: dn.stack([x, x], 0, dim=0),
    lambda x: x.argmax(0, dim=0), lambda x: x.squeeze(0, dim=0), lambda x: x.unsqueeze(0, dim=0),
])
def test_both_spellings_is_a_type_error(call):
    x = dn.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match="got both .* they name the same argument, pass one"):
        call(x)


def test_dim_in_static_graphs():
    import dynnets.static as ds
    g = ds.Graph()
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with g.as_default():
        x = ds.placeholder((None, 4), name="x")
        s = x.sum(dim=1, keepdim=True)
        m = x.max(1)
        sm = x.softmax(dim=0)
        p = x.permute(1, 0)
    with ds.Session(g) as sess:
        sv, mv, iv, smv, pv = sess.run([s, m.values, m.indices, sm, p], {x: a})
    np.testing.assert_allclose(sv, a.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(mv, a.max(1))
    np.testing.assert_array_equal(iv, a.argmax(1))
    np.testing.assert_allclose(smv, torch.softmax(torch.tensor(a), 0).numpy(), rtol=1e-5)
    np.testing.assert_array_equal(pv, a.T)
    assert x.size() == (None, 4) and x.size(1) == 4
