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
    assert c.numpy() is not x.numpy() and not np.shares_memory(c.data, x.data) and c.grad_fn.prim.name == "copy"
    with pytest.raises(ShapeError, match="t: expects a tensor with <= 2 dimensions, but x has 3"):
        dn.tensor(np.zeros((2, 3, 4))).t()
    with pytest.raises(ShapeError, match=r"permute: 2 dims \(1, 0\) for an input with 3 dimensions"):
        dn.tensor(np.zeros((2, 3, 4))).permute(1, 0)


@pytest.mark.parametrize("call", [
    lambda x: x.sum(axis=0, dim=0), lambda x: x.mean(keepdims=True, keepdim=True), lambda x: dn.max(x, 0, axis=0),
    lambda x: x.min(0, keepdims=True, keepdim=True), lambda x: x.softmax(axis=0, dim=0),
    lambda x: dn.log_softmax(x, 0, axis=0), lambda x: dn.cat([x, x], 1, axis=0), lambda x: dn.stack([x, x], 1, axis=0),
    lambda x: x.argmax(0, axis=0), lambda x: x.squeeze(0, axis=0), lambda x: x.unsqueeze(0, axis=0),
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


# --------------------------------------------------------------------------
# issue 21 / 22: the names PyTorch users reached for (values and gradients
# against torch in tests/parity/test_torch_ops.py; here identities, dtypes,
# errors, static graphs and autobatch)
# --------------------------------------------------------------------------

def _t(a, rg=False):
    return dn.tensor(np.asarray(a), requires_grad=rg)


@pytest.mark.parametrize("name,dt", [("float", np.float32), ("double", np.float64), ("half", np.float16),
                                     ("long", np.int64), ("int", np.int32), ("bool", np.bool_)])
def test_dtype_conversion_methods_as_torch(name, dt):
    a = np.array([[1.7, -2.2, 0.0], [3.5, 0.4, -0.6]])
    got, want = getattr(_t(a), name)(), getattr(torch.tensor(a), name)()
    assert got.dtype == dt and got.dtype == np.dtype(str(want.dtype).replace("torch.", ""))
    np.testing.assert_array_equal(got.data, want.numpy())
    x = dn.tensor(a.astype(dt))
    assert getattr(x, name)() is x, "the same dtype is the tensor itself, as torch"
    assert getattr(torch.tensor(a.astype(dt)), name)() is not None


def test_integer_conversions_do_not_require_grad_as_torch():
    x, xt = dn.tensor([1.5, -2.5], requires_grad=True), torch.tensor([1.5, -2.5], requires_grad=True)
    for name in ("long", "int", "bool"):
        assert getattr(x, name)().requires_grad is getattr(xt, name)().requires_grad is False
    assert x.to(dn.long).grad_fn is None and x.float().requires_grad


def test_float_double_carry_gradients():
    a = np.array([1.0, -2.0, 3.0])
    x, xt = dn.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (x.float() * 2.0).sum().backward()
    (xt.float() * 2.0).sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad.data, xt.grad.numpy())


def test_to_cpu_and_devices():
    x = dn.tensor([1.0, 2.0])
    assert x.to("cpu") is x and x.cpu() is x and x.to(device="cpu") is x and x.to(dn.float32) is x
    assert x.to("cpu", dn.float64).dtype == np.float64 and x.to(device="cpu", dtype=dn.long).dtype == np.int64
    assert x.to(dn.tensor([1])).dtype == np.int64, "to(other) takes other's dtype"
    y = x.to(copy=True)
    assert y is not x and not np.shares_memory(y.data, x.data)

    class Device:                        # torch.device('cpu') has .type
        type, index = "cpu", None
    assert x.to(Device()) is x
    for dev in ("cuda", "cuda:0", "mps"):
        with pytest.raises(RuntimeError, match=f"Tensor.to: device '{dev}' is not available"):
            x.to(dev)
    with pytest.raises(TypeError, match="to: got the dtype twice"):
        x.to(dn.float32, dn.float64)


def test_contiguous_copies_only_what_is_not():
    x = dn.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x.contiguous() is x and x.is_contiguous()
    t = x.t()
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c is not t and c.numpy().flags.c_contiguous and not np.shares_memory(c.data, x.data)
    np.testing.assert_array_equal(c.data, x.data.T)
    (c * dn.tensor(np.arange(6.0).reshape(3, 2))).sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.arange(6.0).reshape(3, 2).T)


@pytest.mark.parametrize("src", [np.array([1, 2]), np.array([1.5, 2.0], np.float32), np.array([True, False])])
def test_new_creation_methods_as_torch(src):
    x, xt = dn.tensor(src), torch.tensor(src)
    for got, want in ((x.new_zeros(2, 3), xt.new_zeros(2, 3)), (x.new_ones((3,)), xt.new_ones((3,))),
                      (x.new_full((2,), 1), xt.new_full((2,), 1)), (x.new_tensor([0, 1]), xt.new_tensor([0, 1])),
                      (x.new_zeros(2, dtype=dn.float64), xt.new_zeros(2, dtype=torch.float64))):
        assert got.dtype == want.numpy().dtype and got.shape == tuple(want.shape)
        np.testing.assert_array_equal(got.data, want.numpy())
    assert x.new_ones(2, requires_grad=src.dtype.kind == "f").requires_grad == (src.dtype.kind == "f")


def test_expand_repeat_errors_as_torch():
    x, xt = dn.tensor(np.zeros((3, 1))), torch.zeros(3, 1)
    for sizes, msg in (((4, 4), r"expand: the size of dimension 0 \(3\) must match sizes\[0\]=4"),
                       ((4,), r"expand: the number of sizes \(1\) must be at least x's dimensions \(2\)"),
                       ((-1, 3, 4), r"expand: -1 is not allowed for a new leading dimension")):
        with pytest.raises(dn.ShapeError, match=msg):
            x.expand(*sizes)
        with pytest.raises(RuntimeError):
            xt.expand(*sizes)
    assert np.shares_memory(x.expand(3, 5).data, x.data), "expand is a view, as torch's"
    with pytest.raises(dn.ShapeError, match=r"repeat: the number of repeats \(1\) can not be smaller"):
        x.repeat(2)
    with pytest.raises(RuntimeError):
        xt.repeat(2)


def test_clamp_masked_fill_gather_errors():
    x = dn.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match="clamp: at least one of 'min' or 'max' must not be None"):
        x.clamp()
    with pytest.raises(TypeError, match="clamp: min must be a number or None, got a tensor"):
        dn.clamp(x, min=dn.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(dn.ShapeError, match=r"clamp: min=2 is greater than max=1 \(torch would set every element "
                                            r"to max\)"):
        x.clamp(2, 1)
    with pytest.raises(TypeError, match="masked_fill: mask must be boolean, got dtype int64"):
        x.masked_fill(np.array([1, 0, 1]), 0.0)
    with pytest.raises(IndexError, match="gather: index -1 is out of bounds for dimension 1 with size 3"):
        x.gather(1, np.array([[0, -1]]))
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).gather(1, torch.tensor([[0, -1]]))
    with pytest.raises(TypeError, match=r"gather: dim must be an integer, got array.*torch's order is gather\(input, "
                                        r"dim, index\)"):
        dn.gather(x, np.array([[0]]), 1)


def test_masked_fill_casts_value_to_the_tensors_dtype_as_torch():
    a, m = np.array([1, 2, 3]), np.array([True, False, True])
    got, want = dn.tensor(a).masked_fill(m, 1.5), torch.tensor(a).masked_fill(torch.tensor(m), 1.5)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.data, want.numpy())


def test_norm_and_normalize_gradient_at_zero_as_torch():
    z = np.zeros((2, 3))
    x, xt = dn.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    (dn.norm(x, dim=1).sum() + dn.nn.functional.normalize(x).sum()).backward()
    (torch.norm(xt, dim=1).sum() + torch.nn.functional.normalize(xt).sum()).backward()
    np.testing.assert_array_equal(x.grad.data, xt.grad.numpy())
    assert not np.isnan(x.grad.data).any()
    with pytest.raises(ValueError, match="norm: p='nuc' is not supported"):
        dn.norm(x, "nuc")
    with pytest.raises(TypeError, match="norm: expected a floating-point input, got dtype int64"):
        dn.norm(dn.tensor([3, 4]))
    with pytest.raises(RuntimeError):
        torch.norm(torch.tensor([3, 4]))


def test_pad_and_einsum_errors():
    x = dn.tensor(np.zeros((2, 3)))
    with pytest.raises(dn.ShapeError, match=r"pad: the padding length must be even, got 3"):
        dn.nn.functional.pad(x, (1, 1, 1))
    with pytest.raises(TypeError, match=r"pad: pad must be a flat sequence of integers.*torch's order"):
        dn.nn.functional.pad(x, [[1, 1], [2, 2]])          # TF1's paddings
    with pytest.raises(ValueError, match="pad: mode='reflect' takes no value argument, got value=1.0"):
        dn.nn.functional.pad(x, (1, 1), mode="reflect", value=1.0)
    with pytest.raises(dn.ShapeError, match=r"einsum: the equation 'ij,jk->ik' names 2 operands, got 1"):
        dn.einsum("ij,jk->ik", x)
    with pytest.raises(dn.ShapeError, match=r"einsum: subscript 'j' has size 2 in operand 1"):
        dn.einsum("ij,jk->ik", x, x)
    with pytest.raises(dn.ShapeError, match="bmm: expected 3-D tensors"):
        dn.bmm(x, x)


def test_split_array_split_chunk_meanings():
    x = dn.tensor(np.arange(10.0).reshape(5, 2))
    assert [p.shape for p in dn.split(x, 2)] == [tuple(p.shape) for p in torch.split(torch.zeros(5, 2), 2)]
    assert [p.shape for p in x.split([1, 4])] == [(1, 2), (4, 2)]
    assert [p.shape for p in dn.array_split(x, 2)] == [a.shape for a in np.array_split(np.zeros((5, 2)), 2)]
    assert [p.shape for p in dn.array_split(x, [1, 3])] == [a.shape for a in np.array_split(np.zeros((5, 2)), [1, 3])]
    assert [p.shape for p in x.chunk(3)] == [tuple(p.shape) for p in torch.zeros(5, 2).chunk(3)]
    with pytest.raises(dn.ShapeError, match="split: split_size must be a positive integer, got 0"):
        dn.split(x, 0)
    # the static facade keeps TF1's split: an int is the number of equal parts
    import dynnets.static as ds
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder(np.float64, (4, 6))
        tf1 = ds.split(p, 3, axis=1)
        torch_style = dn.split(p, 3, dim=1)
        infer = ds.split(p, [1, -1], 0)
    assert [tuple(v.shape) for v in tf1] == [(4, 2)] * 3
    assert [tuple(v.shape) for v in torch_style] == [(4, 3)] * 2
    assert [tuple(v.shape) for v in infer] == [(1, 6), (3, 6)]
    with pytest.raises(ValueError, match="split: dimension 1 of size 6 is not divisible by num_or_size_splits=4"):
        with g.as_default():
            ds.split(p, 4, axis=1)


def test_static_norm_is_tf1s():
    import dynnets.static as ds
    a = np.array([[3.0, -4.0], [1.0, 2.0]])
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder(np.float64, (2, 2))
        outs = [ds.norm(p), ds.norm(p, axis=1), ds.norm(p, ord=1, axis=0, keepdims=True), ds.norm(p, "fro", (0, 1))]
    with ds.Session(g) as sess:
        got = sess.run(outs, {p: a})
    want = [np.linalg.norm(a), np.linalg.norm(a, axis=1), np.abs(a).sum(0, keepdims=True), np.linalg.norm(a)]
    for gv, w in zip(got, want):
        np.testing.assert_allclose(gv, w, rtol=1e-12)
    with pytest.raises(ValueError, match=r"norm: the matrix norm ord=2 over axis=\(0, 1\) is not computed"):
        with g.as_default():
            ds.norm(p, ord=2, axis=(0, 1))


def test_type_promotion_as_torch_in_eager_and_static():
    import dynnets.static as ds
    i = np.array([[1, -2, 3]])
    f = np.array([[0.5, 1.5, -1.0]], np.float32)
    cases = [lambda a, b: a * 1.5, lambda a, b: a / 2, lambda a, b: a / a, lambda a, b: a + b,
             lambda a, b: (a * b) ** 2, lambda a, b: 2.5 - a, lambda a, b: a.exp() if hasattr(a, "exp") else None]
    for k, fn in enumerate(cases):
        want = fn(torch.tensor(i), torch.tensor(f))
        got = fn(dn.tensor(i), dn.tensor(f))
        assert got.dtype == want.numpy().dtype, (k, got.dtype, want.dtype)
        np.testing.assert_allclose(got.data, want.numpy(), rtol=1e-6)
        g = ds.Graph()
        # static values follow TF1 where it differs (i22-tf1-gaps): a float number does not go into an integer
        # tensor (TypeError), and int64 / int64 is float64
        tf1 = {0: TypeError, 1: np.float64, 2: np.float64, 5: TypeError}.get(k, want.numpy().dtype)
        with g.as_default():
            pi, pf = ds.placeholder((1, 3), np.int64), ds.placeholder((1, 3), np.float32)
            if tf1 is TypeError:
                with pytest.raises(TypeError, match="expected int64 for"):
                    fn(pi, pf)
                continue
            v = fn(pi, pf)
        assert v.dtype == tf1
        with ds.Session(g) as sess:
            r = sess.run(v, {pi: i, pf: f})
        assert r.dtype == tf1
        np.testing.assert_allclose(r, want.numpy(), rtol=1e-6)
    # the gradient of the float operand keeps its dtype
    x = dn.tensor(f, requires_grad=True)
    (x * dn.tensor(i)).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.data, i.astype(np.float32))


def test_int_inputs_that_torch_refuses_are_errors():
    li = dn.tensor([[1, 2], [3, 4]])
    with pytest.raises(TypeError, match=r"mean: expected a floating-point input, got dtype int64"):
        li.mean()
    with pytest.raises(RuntimeError):
        torch.tensor([[1, 2], [3, 4]]).mean()
    with pytest.raises(TypeError, match=r"matmul: expected operands of one kind, got x.dtype=int64, "
                                        r"w.dtype=float32"):
        li @ dn.tensor(np.eye(2, dtype=np.float32))
    with pytest.raises(RuntimeError):
        torch.tensor([[1, 2], [3, 4]]) @ torch.eye(2)
    with pytest.raises(TypeError, match=r"linear: expected operands of one kind"):
        dn.linear(li, dn.tensor(np.eye(2, dtype=np.float32)))
    with pytest.raises(TypeError, match=r"Linear: input has dtype int64, but the layer's parameters have dtype "
                                        r"float32"):
        dn.nn.Linear(2, 3)(li)


def _autobatch_same(fn, inputs):
    """``fn`` on each input eagerly and under autobatch: equal values and gradients."""
    def run():
        ts = [dn.tensor(a, requires_grad=True) for a in inputs]
        outs = [fn(t) for t in ts]
        loss = outs[0].sum()
        for o in outs[1:]:
            loss = loss + o.sum()
        loss.backward()
        return [np.asarray(o.data) for o in outs], [t.grad.data for t in ts]
    want = run()
    with dn.autobatch():
        got = run()
    for a, b in zip(got[0] + got[1], want[0] + want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


W = np.random.default_rng(3).standard_normal((4, 4))


@pytest.mark.parametrize("fn", [
    lambda t: dn.gelu(t), lambda t: dn.gelu(t, approximate="tanh"), lambda t: dn.leaky_relu(t, 0.2),
    lambda t: t.gather(1, np.array([[0, 3], [1, 1], [2, 0]])),
    lambda t: t.masked_fill(np.array([1, 0, 0, 1], bool), 2.0),
    lambda t: t.clamp(-0.3, 0.4), lambda t: t.norm(dim=1), lambda t: dn.nn.functional.normalize(t),
    lambda t: dn.nn.functional.pad(t, (1, 2)), lambda t: dn.nn.functional.pad(t, (1, 1), mode="reflect"),
    lambda t: dn.einsum("ij,jk->ik", t, dn.tensor(W)), lambda t: t.split(3, dim=1)[0] * 2.0,
    lambda t: t.chunk(2, 1)[1], lambda t: t.expand(2, 3, 4), lambda t: t.repeat(1, 2), lambda t: t.float() * 1.0,
    lambda t: t.type_as(dn.tensor(W)) + 1.0, lambda t: dn.bmm(t.unsqueeze(0), dn.tensor(W[None])),
], ids=["gelu", "gelu-tanh", "leaky_relu", "gather", "masked_fill", "clamp", "norm", "normalize", "pad",
        "pad-reflect", "einsum", "split", "chunk", "expand", "repeat", "float", "type_as", "bmm"])
def test_new_names_under_autobatch(fn):
    rng = np.random.default_rng(5)
    _autobatch_same(fn, [rng.standard_normal((3, 4)) for _ in range(3)])


def test_gelu_and_leaky_relu_modules():
    g, lr = dn.nn.GELU("tanh"), dn.nn.LeakyReLU(0.2, inplace=True)
    assert list(g.parameters()) == [] and "approximate='tanh'" in repr(g) and "negative_slope=0.2" in repr(lr)
    a = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(lr(dn.tensor(a)).data, torch.nn.LeakyReLU(0.2)(torch.tensor(a)).numpy())
    with pytest.raises(ValueError, match="GELU: approximate must be 'none' or 'tanh'"):
        dn.nn.GELU("erf")


def test_torch_dtype_names_are_taken_wherever_dtype_is():
    import dynnets.static as ds
    from dynnets import nn
    f64 = np.float64
    assert nn.Linear(2, 3, dtype=dn.float64).weight.dtype == f64
    assert nn.LSTM(2, 3, dtype=dn.double).weight_ih_l0.dtype == f64
    assert nn.Embedding(3, 2, dtype=dn.float64).weight.dtype == f64
    assert nn.GRUCell(2, 2, dtype=dn.float64).weight_hh.dtype == f64
    for t, dt in ((dn.randn(2, dtype=dn.float64), f64), (dn.uniform(2, dtype=dn.half), np.float16),
                  (dn.arange(3, dtype=dn.float), np.float32), (dn.full((2,), 1, dtype=dn.double), f64),
                  (dn.ones(2, dtype=dn.bool), np.bool_), (dn.zeros_like(dn.ones(2), dtype=dn.long), np.int64),
                  (dn.tensor([1.5]).astype(dn.long), np.int64), (dn.as_tensor([1], dtype=dn.int), np.int32)):
        assert t.dtype == dt
    g = ds.Graph()
    with g.as_default():
        vals = [ds.placeholder((2,), dn.float64), ds.random_normal([2], dtype=dn.float64),
                ds.Variable(np.zeros(2), dtype=dn.float64), ds.cast(ds.placeholder((2,)), dn.float64)]
    assert all(v.dtype == f64 for v in vals)
