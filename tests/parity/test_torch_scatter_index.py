"""Indexing and in-place names against PyTorch in float64: ``scatter`` /
``scatter_`` (tensor and value), ``scatter_add`` / ``scatter_add_``,
``index_add`` / ``index_add_`` (``alpha``), ``masked_fill_``, ``flip``,
``tril`` / ``triu`` (``diagonal``), ``nonzero`` (``as_tuple``), ``unique``
(``return_inverse``, ``return_counts``) and ``bincount`` (``weights``,
``minlength``): values, dtypes, gradients, the in-place rules (leaf checks,
gradients through the new history) and the errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402

RNG = np.random.default_rng(3)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert str(got.dtype).replace("torch.", "") == str(want.dtype).replace("torch.", ""), (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-14)


def _grads(fn, arrays, diff):
    """fn's value and the gradients of sum(out * cot) with respect to ``diff``, on dynnets and on torch."""
    res = []
    for lib in (dn, torch):
        ts = [lib.tensor(a.copy(), requires_grad=(k in diff)) if k in diff or a.dtype.kind == "f"
              else lib.tensor(a.copy()) for k, a in enumerate(arrays)]
        out = fn(lib, *ts)
        cot = np.random.default_rng(0).standard_normal(tuple(out.shape))
        (out * lib.tensor(cot)).sum().backward()
        res.append((out, [ts[k].grad for k in diff]))
    return res


# --- scatter, scatter_add, index_add ---------------------------------------------------------------------

SCATTER_CASES = [  # (x shape, dim, index, src shape)
    ((3, 4), 0, [[2, 0, 1, 1], [0, 1, 2, 0]], (2, 4)),
    ((2, 5), 1, [[4, 0], [3, 1]], (2, 3)),
    ((2, 3, 2), -1, [[[1, 0]], [[0, 1]]], (2, 1, 2)),
    ((4,), 0, [3, 0], (3,)),
]


@pytest.mark.parametrize("xs,dim,index,ss", SCATTER_CASES)
def test_scatter_values_and_gradients(xs, dim, index, ss):
    x, src, idx = RNG.standard_normal(xs), RNG.standard_normal(ss), np.array(index)
    # torch's backward fails when src is larger than index (its src gradient has index's shape): no src gradient
    diff = (0, 2) if idx.shape == ss else (0,)
    (dout, dg), (tout, tg) = _grads(lambda lib, a, i, s: lib.scatter(a, dim, i, s), [x, idx, src], diff)
    _same(dout, tout)
    _same(dg, tg)
    # the method and the number form
    _same(dn.tensor(x).scatter(dim, dn.tensor(idx), 2.5), torch.tensor(x).scatter(dim, torch.tensor(idx), 2.5))
    _same(dn.tensor(x).scatter(dim, dn.tensor(idx), value=-1.0),
          torch.tensor(x).scatter(dim, torch.tensor(idx), value=-1.0))


@pytest.mark.parametrize("xs,dim,index,ss", SCATTER_CASES + [((3,), 0, [0, 0, 2, 0], (5,))])
def test_scatter_add_values_and_gradients(xs, dim, index, ss):
    x, src, idx = RNG.standard_normal(xs), RNG.standard_normal(ss), np.array(index)
    diff = (0, 2) if idx.shape == ss else (0,)
    (dout, dg), (tout, tg) = _grads(lambda lib, a, i, s: lib.scatter_add(a, dim, i, s), [x, idx, src], diff)
    _same(dout, tout)
    _same(dg, tg)
    with warnings.catch_warnings():           # torch warns (once) that reduce= with a tensor src is deprecated
        warnings.simplefilter("ignore", UserWarning)
        want = torch.tensor(x).scatter(dim, torch.tensor(idx), torch.tensor(src), reduce="add")
    _same(dn.tensor(x).scatter(dim, dn.tensor(idx), dn.tensor(src), reduce="add"), want)


def test_scatter_integer_tensors_and_errors():
    x, idx = np.arange(6).reshape(2, 3), np.array([[1, 0, 1]])
    _same(dn.tensor(x).scatter_add(0, dn.tensor(idx), dn.tensor(x[:1] * 10)),
          torch.tensor(x).scatter_add(0, torch.tensor(idx), torch.tensor(x[:1] * 10)))
    for lib in (dn, torch):
        z = lib.zeros(3)
        with pytest.raises((TypeError, RuntimeError), match="dtype"):
            z.scatter_add(0, lib.tensor([0]), lib.ones(1, dtype=lib.float64))
        with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
            z.scatter_add(0, lib.tensor([5]), lib.ones(1))
        _same(z.scatter(0, lib.tensor([1], dtype=lib.int32), lib.ones(1)), torch.tensor([0.0, 1.0, 0.0]))
        with pytest.raises((TypeError, RuntimeError), match="int64|Long"):
            z.scatter(0, lib.tensor([0.0]), lib.ones(1))
        with pytest.raises((ValueError, RuntimeError)):
            z.scatter(0, lib.tensor([[0]]), lib.ones(1))                  # index of another rank


@pytest.mark.parametrize("xs,dim,index,alpha", [((4, 3), 0, [0, 2, 0], 1), ((2, 5), 1, [4, 4, 0], 2.5),
                                                ((3,), 0, [1, 1], -1), ((2, 2, 3), -1, [2, 0], 1)])
def test_index_add_values_and_gradients(xs, dim, index, alpha):
    x, idx = RNG.standard_normal(xs), np.array(index)
    ss = list(xs)
    ss[dim] = len(index)
    src = RNG.standard_normal(ss)
    (dout, dg), (tout, tg) = _grads(lambda lib, a, i, s: lib.index_add(a, dim, i, s, alpha=alpha), [x, idx, src],
                                    (0, 2))
    _same(dout, tout)
    _same(dg, tg)


def test_index_add_errors():
    for lib in (dn, torch):
        with pytest.raises((TypeError, RuntimeError), match="same"):
            lib.zeros(3).index_add(0, lib.tensor([0]), lib.ones(1, dtype=lib.float64))
        with pytest.raises((IndexError, RuntimeError)):
            lib.zeros(3).index_add(0, lib.tensor([3]), lib.ones(1))
        with pytest.raises((ValueError, RuntimeError)):
            lib.zeros(3, 2).index_add(0, lib.tensor([0, 1]), lib.ones(2, 3))
    with pytest.raises(TypeError, match="index_add: expected dtype int32 or int64 for index"):
        dn.zeros(3).index_add(0, dn.tensor([0.0]), dn.ones(1))


# --- in place: scatter_, scatter_add_, index_add_, masked_fill_ -----------------------------------------

INPLACE = {
    "scatter_": lambda lib, y, s: y.scatter_(0, lib.tensor([[1, 0, 2]]), s),
    "scatter_value": lambda lib, y, s: y.scatter_(1, lib.tensor([[2], [0], [1]]), 7.0),
    "scatter_add_": lambda lib, y, s: y.scatter_add_(0, lib.tensor([[1, 1, 0]]), s),
    "index_add_": lambda lib, y, s: y.index_add_(0, lib.tensor([2]), s, alpha=3.0),
    "masked_fill_": lambda lib, y, s: y.masked_fill_(lib.tensor([[True, False, True]]), 0.5),
    "masked_fill_tensor": lambda lib, y, s: y.masked_fill_(lib.tensor([True, False, False]), s.sum()),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_values_gradients_and_history(name):
    x, s = RNG.standard_normal((3, 3)), RNG.standard_normal((1, 3))
    out = []
    for lib in (dn, torch):
        xt, st = lib.tensor(x.copy(), requires_grad=True), lib.tensor(s.copy(), requires_grad=True)
        y = xt * 2.0                                    # a non-leaf: in place is allowed and recorded
        r = INPLACE[name](lib, y, st)
        assert r is y
        (y * y).sum().backward()
        out.append((y, xt.grad, st.grad if st.grad is not None else lib.zeros(1, 3, dtype=lib.float64)))
    _same(out[0], out[1])


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_leaf_rules(name):
    for lib in (dn, torch):
        leaf = lib.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf"):
            INPLACE[name](lib, leaf, lib.ones(1, 3, dtype=lib.float64))
        with lib.no_grad():                             # as an optimizer step: allowed, not recorded
            INPLACE[name](lib, leaf, lib.ones(1, 3, dtype=lib.float64))
    a = np.zeros((3, 3))
    t = dn.from_numpy(a)
    INPLACE[name](dn, t, dn.ones(1, 3, dtype=dn.float64))
    np.testing.assert_array_equal(a, t.numpy())         # the same memory changed, as torch's


def test_inplace_version_counter():
    """A value a pending backward reads, changed in place, raises at backward, as torch's."""
    for lib in (dn, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 1.0
        z = (y * y).sum()                     # mul saves y
        y.masked_fill_(lib.tensor([True, False, False]), 0.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation|changed in place|in-place"):
            z.backward()


# --- flip, tril / triu -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dims", [((3,), [0]), ((2, 3), (0, 1)), ((2, 3, 4), [-1, 0]), ((2, 3), 1),
                                        ((2, 3), [])])
def test_flip(shape, dims):
    x = RNG.standard_normal(shape)
    # torch.flip takes a sequence only, its method an int as well
    (d, dg), (t, tg) = _grads(lambda lib, a: lib.flip(a, dims) if not isinstance(dims, int) else a.flip(dims), [x],
                              (0,))
    _same(d, t)
    _same(dg, tg)
    _same(dn.tensor([1, 2, 3]).flip(0), torch.tensor([1, 2, 3]).flip(0))
    for lib in (dn, torch):
        with pytest.raises((IndexError, RuntimeError)):
            lib.flip(lib.ones(2), [1])
        with pytest.raises((ValueError, RuntimeError)):
            lib.flip(lib.ones(2, 2), [0, 0])


@pytest.mark.parametrize("fn", ["tril", "triu"])
@pytest.mark.parametrize("shape,diagonal", [((3, 3), 0), ((3, 4), 1), ((4, 3), -1), ((2, 3, 3), 2), ((3, 3), -5)])
def test_tril_triu(fn, shape, diagonal):
    x = RNG.standard_normal(shape)
    (d, dg), (t, tg) = _grads(lambda lib, a: getattr(lib, fn)(a, diagonal=diagonal), [x], (0,))
    _same(d, t)
    _same(dg, tg)
    i = np.arange(12).reshape(3, 4)
    _same(getattr(dn.tensor(i), fn)(diagonal), getattr(torch.tensor(i), fn)(diagonal))
    for lib in (dn, torch):
        with pytest.raises((ValueError, RuntimeError), match="at least 2"):
            getattr(lib, fn)(lib.ones(3))


# --- nonzero, unique, bincount ---------------------------------------------------------------------------

@pytest.mark.parametrize("x", [np.array([[0, 1.5], [2, 0]]), np.array([0, 3, 0, 4]), np.array([[True, False]]),
                               np.zeros((2, 0)), np.array(5), np.array(0)])
def test_nonzero(x):
    _same(dn.nonzero(dn.tensor(x)), torch.nonzero(torch.tensor(x)))
    _same(dn.tensor(x).nonzero(), torch.tensor(x).nonzero())
    if x.ndim:
        _same(dn.nonzero(dn.tensor(x), as_tuple=True), torch.nonzero(torch.tensor(x), as_tuple=True))


@pytest.mark.parametrize("x", [np.array([3, 1, 2, 1, 3, 3]), np.array([[0.5, -1.0], [0.5, 2.0]]),
                               np.array([True, False, True]), np.zeros((0,)), np.array(7)])
def test_unique(x):
    for inv in (False, True):
        for cnt in (False, True):
            _same(dn.unique(dn.tensor(x), return_inverse=inv, return_counts=cnt),
                  torch.unique(torch.tensor(x), return_inverse=inv, return_counts=cnt))
    _same(dn.tensor(x).unique(), torch.tensor(x).unique())
    # sorted=False: torch leaves the order unspecified; the same values
    np.testing.assert_array_equal(np.sort(dn.unique(dn.tensor(x), sorted=False).numpy()),
                                  np.sort(torch.unique(torch.tensor(x), sorted=False).numpy()))
    y = dn.tensor(np.asarray(x, np.float64), requires_grad=True)
    assert not dn.unique(y).requires_grad                     # no gradient, as torch's
    with pytest.raises(NotImplementedError, match="dim="):
        dn.unique(dn.tensor(x), dim=0)


@pytest.mark.parametrize("weights", [None, np.array([0.5, 1.0, 2.0, 4.0]), np.array([0.5, 1.0, 2.0, 4.0], np.float32),
                                     np.array([1, 2, 3, 4])])
@pytest.mark.parametrize("minlength", [0, 2, 7])
def test_bincount(weights, minlength):
    x = np.array([1, 1, 3, 0])
    w = None if weights is None else (dn.tensor(weights), torch.tensor(weights))
    _same(dn.bincount(dn.tensor(x), None if w is None else w[0], minlength=minlength),
          torch.bincount(torch.tensor(x), None if w is None else w[1], minlength=minlength))
    _same(dn.tensor(x).bincount(minlength=minlength), torch.tensor(x).bincount(minlength=minlength))
    _same(dn.bincount(dn.tensor(np.zeros(0, np.int64))), torch.bincount(torch.tensor(np.zeros(0, np.int64))))


def test_bincount_errors():
    for lib in (dn, torch):
        for bad in ([-1], [[1]]):
            with pytest.raises((ValueError, IndexError, RuntimeError), match="non-negative|1-d"):
                lib.bincount(lib.tensor(bad))
        with pytest.raises((TypeError, RuntimeError)):
            lib.bincount(lib.tensor([1.0]))
        with pytest.raises((ValueError, RuntimeError)):
            lib.bincount(lib.tensor([1, 2]), lib.tensor([1.0, 2.0, 3.0]))
