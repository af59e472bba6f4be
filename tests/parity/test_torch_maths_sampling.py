"""torch's maths and sampling names a new-user trial missed (issue 22, part B):
``logsumexp``, ``prod``, ``isnan`` / ``isinf`` / ``isfinite``, ``log1p`` /
``expm1``, ``outer``, ``addmm`` / ``baddbmm`` / ``addbmm``: values, dtypes and
float64 gradients against torch (eager and static graphs), and torch's errors;
``multinomial``, ``bernoulli``, ``normal``, ``Tensor.bernoulli_`` /
``exponential_``: numpy's streams, not torch's, so their distributions
(moments with fixed seeds), shapes, dtypes, reproducibility and errors."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)
check = C.check

RNG = np.random.default_rng(2222)


def _same(got, want, exact=True):
    assert isinstance(got, dn.Tensor), type(got)
    w = want.detach().numpy()
    g = got.numpy()
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    assert g.shape == w.shape, (g.shape, w.shape)
    if exact:
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------
# logsumexp
# --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("shape,dim,keepdim", [((3, 4), 1, False), ((3, 4), 0, True), ((2, 3, 4), (0, 2), False),
                                               ((2, 3, 4), -1, True), ((5,), 0, False)], ids=str)
def test_logsumexp(shape, dim, keepdim, mode):
    x = RNG.standard_normal(shape)
    check(lambda a: dn.logsumexp(a, dim, keepdim) * 2, lambda a: torch.logsumexp(a, dim, keepdim) * 2, [x],
          diff=[0], mode=mode)
    check(lambda a: a.logsumexp(dim=dim, keepdim=keepdim), lambda a: a.logsumexp(dim=dim, keepdim=keepdim), [x],
          diff=[0], mode=mode)


def test_logsumexp_is_stable_and_handles_infinities():
    big = np.array([[1000.0, 1000.0, -1000.0], [-1e4, -1e4 + 1, -1e4 + 2]])
    check(lambda a: dn.logsumexp(a, 1), lambda a: torch.logsumexp(a, 1), [big], diff=[0])
    inf = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 2.0]])
    _same(dn.logsumexp(dn.tensor(inf), 1), torch.logsumexp(torch.tensor(inf), 1))
    x32 = RNG.standard_normal((4, 5)).astype(np.float32)
    _same(dn.logsumexp(dn.tensor(x32), 1), torch.logsumexp(torch.tensor(x32), 1), exact=False)
    ints = np.array([[1, 2, 3], [0, 0, 9]])
    _same(dn.logsumexp(dn.tensor(ints), 1), torch.logsumexp(torch.tensor(ints), 1), exact=False)


def test_logsumexp_needs_dim():
    with pytest.raises(TypeError):
        torch.logsumexp(torch.ones(2))
    with pytest.raises(TypeError, match="logsumexp"):
        dn.logsumexp(dn.ones(2))
    with pytest.raises(TypeError, match="logsumexp: dim"):
        dn.logsumexp(dn.ones(2), None)


# --------------------------------------------------------------------------
# prod
# --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": -1}], ids=str)
def test_prod(kw, mode):
    x = RNG.uniform(0.5, 1.5, (3, 4)) * RNG.choice([-1.0, 1.0], (3, 4))
    check(lambda a: dn.prod(a, **kw) * 3, lambda a: torch.prod(a, **kw) * 3, [x], diff=[0], mode=mode)
    check(lambda a: a.prod(**kw), lambda a: a.prod(**kw), [x], diff=[0], mode=mode)


def test_prod_gradient_with_zeros_is_torch_s():
    # one zero in a row: only that entry has a gradient (the product of the
    # others); two zeros: no entry has one; a whole-tensor product with a zero
    x = np.array([[2.0, 0.0, 3.0, -1.5], [0.0, 4.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0]])
    check(lambda a: dn.prod(a, 1), lambda a: torch.prod(a, 1), [x], diff=[0])
    check(lambda a: dn.prod(a, 0, keepdim=True), lambda a: torch.prod(a, 0, keepdim=True), [x], diff=[0])
    check(lambda a: dn.prod(a[2:] * 1.0) + dn.prod(a[:1]), lambda a: torch.prod(a[2:] * 1.0) + torch.prod(a[:1]),
          [x], diff=[0])
    t = dn.tensor(x, requires_grad=True)
    t.prod(1).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy()[0], [0.0, -9.0, 0.0, 0.0])
    np.testing.assert_array_equal(t.grad.numpy()[1], [0.0, 0.0, 0.0, 0.0])


def test_prod_dtypes():
    for data, dt in (([1, 2, 3], torch.int32), ([True, False], None), ([3, 4], torch.uint8), ([2.0, 3.5], None)):
        t = torch.tensor(data, dtype=dt)
        _same(dn.tensor(t.numpy()).prod(), t.prod())
        _same(dn.prod(dn.tensor(t.numpy()), 0), torch.prod(t, 0))
    _same(dn.tensor([1.5, 2.0]).prod(dtype=dn.float64), torch.tensor([1.5, 2.0]).prod(dtype=torch.float64))
    _same(dn.tensor([[1, 2], [3, 4]]).prod(1, dtype=dn.float32), torch.tensor([[1, 2], [3, 4]]).prod(1, dtype=torch.float32))
    _same(dn.tensor(2.5).prod(), torch.tensor(2.5).prod())


def test_prod_errors():
    with pytest.raises(TypeError):
        torch.ones(2, 3).prod((0, 1))
    with pytest.raises(TypeError, match="prod: dim must be an int"):
        dn.ones(2, 3).prod((0, 1))
    with pytest.raises(IndexError):
        torch.ones(2, 3).prod(2)
    with pytest.raises(dn.ShapeError, match="prod: axis 2 is out of range"):
        dn.ones(2, 3).prod(2)


# --------------------------------------------------------------------------
# isnan / isinf / isfinite, log1p / expm1
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
def test_isnan_isinf_isfinite(name):
    x = np.array([[1.0, np.nan, np.inf], [-np.inf, 0.0, -2.0]])
    for a in (x, x.astype(np.float32), np.array([1, -2, 3]), np.array([True, False]), np.array(np.nan)):
        _same(getattr(dn, name)(dn.tensor(a)), getattr(torch, name)(torch.tensor(a)))
        _same(getattr(dn.tensor(a), name)(), getattr(torch.tensor(a), name)())


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_isnan_in_a_graph_masks_values(mode):
    x = np.array([1.0, 2.0, -3.0, 0.5])
    check(lambda a: dn.where(dn.isfinite(dn.log(a)), a, 0.0), lambda a: torch.where(torch.isfinite(torch.log(a)), a, 0.0),
          [x], diff=[0], mode=mode)


@pytest.mark.parametrize("name", ["log1p", "expm1"])
def test_log1p_expm1(name):
    x = np.array([[1e-12, -1e-9, 0.3], [2.0, -0.5, 1e-20]])
    check(lambda a: getattr(dn, name)(a), lambda a: getattr(torch, name)(a), [x], diff=[0])
    check(lambda a: getattr(a, name)() * a, lambda a: getattr(a, name)() * a, [x], diff=[0], mode="static")
    _same(getattr(dn, name)(dn.tensor([1, 2])), getattr(torch, name)(torch.tensor([1, 2])), exact=False)


# --------------------------------------------------------------------------
# outer, addmm, baddbmm, addbmm
# --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "static"])
def test_outer(mode):
    a, b = RNG.standard_normal(3), RNG.standard_normal(4)
    check(lambda x, y: dn.outer(x, y), lambda x, y: torch.outer(x, y), [a, b], diff=[0, 1], mode=mode)
    check(lambda x, y: x.outer(y) ** 2, lambda x, y: x.outer(y) ** 2, [a, b], diff=[0, 1], mode=mode)
    _same(dn.outer(dn.tensor([1, 2]), dn.tensor([3, 4, 5])), torch.outer(torch.tensor([1, 2]), torch.tensor([3, 4, 5])))
    with pytest.raises(RuntimeError):
        torch.outer(torch.ones(2, 2), torch.ones(2))
    with pytest.raises(dn.ShapeError, match="outer: expected input to be a 1-D tensor, got 2-D"):
        dn.outer(dn.ones(2, 2), dn.ones(2))


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("kw", [{}, {"beta": 0.5, "alpha": 2.0}, {"beta": 0, "alpha": -1}], ids=str)
def test_addmm(kw, mode):
    inp, m1, m2 = RNG.standard_normal((2, 4)), RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
    check(lambda i, a, b: dn.addmm(i, a, b, **kw), lambda i, a, b: torch.addmm(i, a, b, **kw), [inp, m1, m2],
          diff=[0, 1, 2], mode=mode)
    bias = RNG.standard_normal(4)       # broadcast, as a linear layer's
    check(lambda i, a, b: i.addmm(a, b, **kw), lambda i, a, b: i.addmm(a, b, **kw), [bias, m1, m2],
          diff=[0, 1, 2], mode=mode)


def test_addmm_beta_zero_ignores_nan_input_and_errors():
    nan = np.full((2, 2), np.nan)
    m = np.eye(2)
    _same(dn.addmm(dn.tensor(nan), dn.tensor(m), dn.tensor(m), beta=0),
          torch.addmm(torch.tensor(nan), torch.tensor(m), torch.tensor(m), beta=0))
    with pytest.raises(RuntimeError):
        torch.addmm(torch.ones(2), torch.ones(2), torch.ones(2, 2))
    with pytest.raises(dn.ShapeError, match="addmm: expected mat1 to be a 2-D tensor, got 1-D"):
        dn.addmm(dn.ones(2), dn.ones(2), dn.ones(2, 2))
    with pytest.raises(dn.ShapeError, match="matmul"):
        dn.addmm(dn.ones(2), dn.ones(2, 3), dn.ones(2, 2))
    with pytest.raises(TypeError, match="addmm: beta must be a number"):
        dn.addmm(dn.ones(2), dn.ones(2, 2), dn.ones(2, 2), beta="1")


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("kw", [{}, {"beta": 2.0, "alpha": 0.5}], ids=str)
def test_baddbmm_addbmm(kw, mode):
    b1, b2 = RNG.standard_normal((3, 2, 4)), RNG.standard_normal((3, 4, 5))
    inp3, inp2 = RNG.standard_normal((3, 2, 5)), RNG.standard_normal((2, 5))
    check(lambda i, a, b: dn.baddbmm(i, a, b, **kw), lambda i, a, b: torch.baddbmm(i, a, b, **kw), [inp3, b1, b2],
          diff=[0, 1, 2], mode=mode)
    check(lambda i, a, b: i.addbmm(a, b, **kw), lambda i, a, b: i.addbmm(a, b, **kw), [inp2, b1, b2],
          diff=[0, 1, 2], mode=mode)
    check(lambda i, a, b: dn.baddbmm(i, a, b, **kw), lambda i, a, b: torch.baddbmm(i, a, b, **kw),
          [inp2[:1], b1, b2], diff=[0, 1, 2], mode=mode)
    with pytest.raises(dn.ShapeError, match="baddbmm: expected batch1 to be a 3-D tensor, got 2-D"):
        dn.baddbmm(dn.ones(2, 2), dn.ones(2, 2), dn.ones(1, 2, 2))
    with pytest.raises(dn.ShapeError, match="addbmm: expected batch2 to be a 3-D tensor, got 2-D"):
        dn.addbmm(dn.ones(2, 2), dn.ones(1, 2, 2), dn.ones(2, 2))


# --------------------------------------------------------------------------
# sampling: numpy's streams, torch's distributions
# --------------------------------------------------------------------------

def test_multinomial_with_replacement_frequencies():
    p = np.array([0.1, 0.2, 0.0, 0.7])
    dn.manual_seed(5)
    s = dn.multinomial(dn.tensor(p * 3), 20000, replacement=True)     # weights need not sum to 1
    t = torch.multinomial(torch.tensor(p * 3), 5, replacement=True)
    assert s.dtype == dn.int64 and t.dtype == torch.int64 and s.shape == (20000,)
    freq = np.bincount(s.numpy(), minlength=4) / 20000
    np.testing.assert_allclose(freq, p, atol=0.012)
    assert freq[2] == 0.0
    dn.manual_seed(5)
    np.testing.assert_array_equal(dn.multinomial(dn.tensor(p * 3), 20000, True).numpy(), s.numpy())


def test_multinomial_without_replacement_rows():
    w = np.array([[1.0, 1.0, 1.0, 1.0, 0.0], [0.0, 5.0, 1.0, 0.0, 1.0]], dtype=np.float32)
    g = dn.Generator().manual_seed(3)
    s = dn.tensor(w).multinomial(3, generator=g)
    assert s.shape == (2, 3) and s.dtype == dn.int64
    for row, wr in zip(s.numpy(), w):
        assert len(set(row)) == 3 and np.all(wr[row] > 0)
    firsts = dn.multinomial(dn.tensor(w[1]), 1, generator=dn.Generator().manual_seed(0))
    assert firsts.shape == (1,)
    # the first draw of row 1 picks category 1 with probability 5/7
    dn.manual_seed(1)
    draws = np.array([dn.multinomial(dn.tensor(w[1]), 2).numpy()[0] for _ in range(3000)])
    assert abs(np.mean(draws == 1) - 5 / 7) < 0.03


@pytest.mark.parametrize("args,kw,err,msg", [
    ((np.ones((2, 2, 2)), 1), {}, RuntimeError, "prob_dist must be 1 or 2 dim"),
    ((np.ones(3), 4), {}, RuntimeError, "cannot sample n_sample"),
    ((np.array([1.0, -1.0]), 1), {}, RuntimeError, "probability tensor contains either"),
    ((np.array([0.0, 0.0]), 1), {}, RuntimeError, "invalid multinomial distribution"),
], ids=["3d", "too-many", "negative", "zero-sum"])
def test_multinomial_errors(args, kw, err, msg):
    with pytest.raises(err, match=msg):
        torch.multinomial(torch.tensor(args[0]), *args[1:], **kw)
    with pytest.raises((ValueError, dn.ShapeError), match=f"multinomial: .*{msg}"):
        dn.multinomial(dn.tensor(args[0]), *args[1:], **kw)
    with pytest.raises(TypeError, match="multinomial: expected a floating-point input"):
        dn.multinomial(dn.tensor([1, 2]), 1)


def test_multinomial_without_replacement_needs_enough_categories():
    # torch returns a category of weight 0 once the others are drawn; that
    # draw is never what the caller meant, so here it is an error
    w = [1.0, 0.0, 0.0]
    assert torch.multinomial(torch.tensor(w), 2).shape == (2,)
    with pytest.raises(ValueError, match="multinomial: invalid multinomial distribution \\(with replacement=False, "
                                         "not enough non-negative category to sample\\): num_samples=2"):
        dn.multinomial(dn.tensor(w), 2)


def test_bernoulli():
    p = np.array([[0.0, 0.25, 0.5], [0.9, 1.0, 0.1]])
    dn.manual_seed(0)
    draws = np.stack([dn.bernoulli(dn.tensor(p)).numpy() for _ in range(4000)])
    assert draws.dtype == np.float64 and set(np.unique(draws)) <= {0.0, 1.0}
    np.testing.assert_allclose(draws.mean(0), p, atol=0.03)
    assert dn.bernoulli(dn.tensor(p.astype(np.float32))).dtype == torch.bernoulli(torch.tensor(p.astype(np.float32))).numpy().dtype
    a = dn.bernoulli(dn.tensor(p), generator=dn.Generator().manual_seed(9))
    b = dn.tensor(p).bernoulli(generator=dn.Generator().manual_seed(9))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert abs(dn.bernoulli(dn.zeros(20000), 0.3).mean().item() - 0.3) < 0.02
    with pytest.raises(RuntimeError, match="p_in >= 0 && p_in <= 1"):
        torch.bernoulli(torch.tensor([1.5]))
    with pytest.raises(ValueError, match="bernoulli: all elements of input should be between 0 and 1"):
        dn.bernoulli(dn.tensor([1.5]))
    with pytest.raises(ValueError, match="bernoulli: p must be a number in \\[0, 1\\]"):
        dn.bernoulli(dn.zeros(2), 2.0)


def test_bernoulli_and_exponential_in_place():
    x = dn.zeros(20000, dtype=dn.float64)
    dn.manual_seed(4)
    assert x.bernoulli_(0.2) is x
    assert abs(x.mean().item() - 0.2) < 0.01 and set(np.unique(x.numpy())) == {0.0, 1.0}
    y = dn.zeros(3, 4)
    y.bernoulli_(dn.tensor([0.0, 1.0, 0.0, 1.0]))           # a tensor of probabilities, broadcast
    np.testing.assert_array_equal(y.numpy(), np.tile([0.0, 1.0, 0.0, 1.0], (3, 1)))
    assert y.dtype == dn.float32
    e = dn.empty(50000).exponential_(2.0) if hasattr(dn, "empty") else dn.zeros(50000).exponential_(2.0)
    v = e.numpy()
    assert v.dtype == np.float32 and v.min() >= 0
    assert abs(v.mean() - 0.5) < 0.01 and abs(v.std() - 0.5) < 0.015
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        torch.zeros(2).exponential_(0.0)
    with pytest.raises(ValueError, match="exponential_: expects lambda > 0.0"):
        dn.zeros(2).exponential_(0.0)
    with pytest.raises(TypeError, match="bernoulli_: expects a floating-point tensor"):
        dn.zeros(2, dtype=dn.int64).bernoulli_(0.5)
    w = dn.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.bernoulli_(0.5)


def test_normal_forms():
    mean = np.array([0.0, 10.0, -5.0], dtype=np.float32)
    std = np.array([1.0, 0.5, 2.0], dtype=np.float32)
    dn.manual_seed(2)
    s = np.stack([dn.normal(dn.tensor(mean), dn.tensor(std)).numpy() for _ in range(5000)])
    assert s.dtype == np.float32 and torch.normal(torch.tensor(mean), torch.tensor(std)).dtype == torch.float32
    np.testing.assert_allclose(s.mean(0), mean, atol=0.08)
    np.testing.assert_allclose(s.std(0), std, rtol=0.05)
    m = np.stack([dn.normal(dn.tensor(mean), 2.0).numpy() for _ in range(3000)])
    np.testing.assert_allclose(m.std(0), 2.0, rtol=0.06)
    st = np.stack([dn.normal(3.0, dn.tensor(std.astype(np.float64))).numpy() for _ in range(3000)])
    assert st.dtype == np.float64
    np.testing.assert_allclose(st.mean(0), 3.0, atol=0.1)
    z = dn.normal(1.0, 2.0, (4, 5))
    assert z.shape == (4, 5) and z.dtype == dn.float32 == torch.normal(1.0, 2.0, (4, 5)).numpy().dtype
    assert dn.normal(0.0, 1.0, size=(2,), dtype=dn.float64).dtype == dn.float64
    a = dn.normal(dn.zeros(3), 1.0, generator=dn.Generator().manual_seed(1))
    b = dn.normal(dn.zeros(3), 1.0, generator=dn.Generator().manual_seed(1))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match="std >= 0"):
        torch.normal(torch.zeros(2), torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="normal: expects all elements of std >= 0.0"):
        dn.normal(dn.zeros(2), dn.tensor([1.0, -1.0]))
    with pytest.raises(TypeError, match="normal: with a number mean and a number std, size is required"):
        dn.normal(0.0, 1.0)


def test_sampling_is_reproducible_with_manual_seed():
    def draw():
        dn.manual_seed(123)
        return (dn.multinomial(dn.ones(5), 3).numpy(), dn.bernoulli(dn.full((4,), 0.5)).numpy(),
                dn.normal(dn.zeros(3), 1.0).numpy(), dn.zeros(3).exponential_().numpy())
    for a, b in zip(draw(), draw()):
        np.testing.assert_array_equal(a, b)
