"""torch's names that real PyTorch code used and dynnets missed (issue 22,
part 3): the legacy constructor ``torch.Tensor(...)``, ``torch.range``,
``F.torch``, ``round``, ``all`` / ``any``, ``narrow``, ``%`` / ``//`` /
``fmod`` / ``remainder`` / ``floor_divide`` / ``div(rounding_mode=)``,
``sort`` / ``argsort`` / ``topk``, ``cumsum``, ``unbind``, ``index_select``,
``F.one_hot``, ``is_tensor``, ``where(cond)``: values, dtypes, shapes and
float64 gradients against torch, and the errors torch raises."""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.nn.functional as dF  # noqa: E402
import torch.nn.functional as tF  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)
check, numpy_dtype = C.check, C.numpy_dtype

RNG = np.random.default_rng(22)


def _same(got, want):
    """Equal values, dtype and shape (a tensor or a tuple of them)."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert isinstance(got, dn.Tensor), type(got)
    w = want.detach().numpy()
    g = got.numpy()
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    assert g.shape == w.shape, (g.shape, w.shape)
    np.testing.assert_array_equal(g, w)


# --------------------------------------------------------------------------
# the legacy constructor torch.Tensor(...)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("data", [[0, 2, 2], [[1, 2], [3, 4]], [True, False], [1.5, -2], [np.float64(1.5)], [],
                                  (), [[]]], ids=repr)
def test_tensor_constructor_data_is_float32(data):
    _same(dn.Tensor(data), torch.Tensor(data))


@pytest.mark.parametrize("sizes", [(3,), (3, 2), (0, 4), (2, 1, 3)], ids=repr)
def test_tensor_constructor_sizes(sizes):
    got = dn.Tensor(*sizes)
    want = torch.Tensor(*sizes)
    assert got.dtype == dn.float32 and tuple(got.shape) == tuple(want.shape)
    assert not got.numpy().any()               # torch's memory is unset: zeros are one valid content
    x = dn.zeros(*sizes)
    assert tuple(dn.Tensor(x.size()).shape) == tuple(torch.Tensor(torch.zeros(*sizes).size()).shape)
    assert tuple(dn.Tensor(np.int64(3)).shape) == tuple(torch.Tensor(np.int64(3)).shape) == (3,)


def test_tensor_constructor_size_objects():
    x, tx = dn.zeros(4, 3), torch.zeros(4, 3)
    assert x.size() == (4, 3) and isinstance(x.size(), dn.Size)
    assert tuple(dn.Tensor(x[1].size()).shape) == tuple(torch.Tensor(tx[1].size()).shape) == (3,)
    assert tuple(dn.Tensor(x.size()[1:]).shape) == tuple(torch.Tensor(tx.size()[1:]).shape) == (3,)
    got, want = dn.Tensor(dn.zeros(()).size()), torch.Tensor(torch.Size([]))  # a 0-d tensor (torch's value unset)
    assert got.dtype == dn.float32 and tuple(got.shape) == tuple(want.shape) == ()
    _same(dn.Tensor(), torch.Tensor())
    assert x.size().numel() == tx.size().numel() == 12
    t = dn.Tensor(x[1].size()).normal_(-0.05, 0.05)        # ttpro1995's unknown-word vectors
    assert t.dtype == dn.float32 and tuple(t.shape) == (3,) and 0 < float(np.abs(t.numpy()).max()) < 0.5
    assert tuple(x.new(x.size()).shape) == (4, 3) and dn.LongTensor(x.size()).dtype == dn.int64


def test_tensor_constructor_of_a_tensor_is_an_alias():
    for data in ([1.0, 2.0], [1, 2]):
        t, tt = dn.tensor(data), torch.tensor(data)
        u, tu = dn.Tensor(t), torch.Tensor(tt)
        _same(u, tu)
        u[0] = 7
        tu[0] = 7
        _same(t, tt)                           # the same memory
    x = dn.tensor([1.0, -2.0], requires_grad=True)
    tx = torch.tensor([1.0, -2.0], requires_grad=True)
    (dn.Tensor(x) * dn.tensor([3.0, 4.0])).sum().backward()
    (torch.Tensor(tx) * torch.tensor([3.0, 4.0])).sum().backward()
    _same(x.grad, tx.grad)


def test_tensor_constructor_errors_as_torch():
    for bad in ((3.0,), (True,), (2, 3.0), (-1,), (["a"],), ([[1, 2], [3]],)):
        with pytest.raises((TypeError, ValueError, RuntimeError)):
            torch.Tensor(*bad)
        with pytest.raises((TypeError, ValueError)):
            dn.Tensor(*bad)
    with pytest.raises(TypeError, match="data must be a sequence"):
        dn.Tensor(3.0)
    with pytest.raises(ValueError, match="negative dimension"):
        dn.Tensor(2, -1)
    # a plain tuple of ints: torch's data, but x.shape here is one too (torch: a Size), so an error, not a guess
    with pytest.raises(TypeError, match="ambiguous"):
        dn.Tensor((3, 2))
    assert tuple(dn.Tensor([3, 2]).shape) == (2,) and tuple(dn.Tensor(*dn.zeros(3, 2).shape).shape) == (3, 2)
    assert dn.Tensor([1, 2], device="cpu").dtype == dn.float32
    with pytest.raises(dn.cuda.DeviceUnavailableError if hasattr(dn.cuda, "DeviceUnavailableError") else Exception):
        dn.Tensor(2, device="cuda")


def test_tensor_class_stays_the_class():
    x = dn.zeros(2)
    assert type(x) is dn.Tensor and isinstance(x, dn.Tensor) and isinstance(dn.nn.Parameter(x), dn.Tensor)
    assert not isinstance(np.zeros(2), dn.Tensor) and issubclass(dn.nn.Parameter, dn.Tensor)
    # dynnets' keywords with a numpy array: requires_grad= and name= keep torch's float32, dtype= says another
    a = np.arange(3.0)
    t = dn.Tensor(a, requires_grad=True)
    assert t.requires_grad and t.dtype == dn.float32
    assert dn.Tensor(np.arange(2), dtype=np.int32).dtype == np.int32
    with pytest.raises(TypeError, match="take a numpy array"):    # torch's constructor takes no dtype=
        dn.Tensor([1, 2], dtype=np.int32)
    with pytest.raises(TypeError):
        torch.Tensor([1, 2], dtype=torch.int32)
    assert dn.Tensor.normal_ is not None                   # torchtext's unk_init=torch.Tensor.normal_


def test_is_tensor():
    for obj in ([1], np.zeros(2), 3.0):
        assert dn.is_tensor(obj) is torch.is_tensor(obj) is False
    assert dn.is_tensor(dn.zeros(1)) and dn.is_tensor(dn.nn.Parameter(dn.zeros(1)))


# --------------------------------------------------------------------------
# torch.range, F.torch
# --------------------------------------------------------------------------

@pytest.mark.parametrize("args,kw", [((1, 5), {}), ((1, 4, 0.5), {}), ((0, 1, 0.3), {}), ((5, 1, -1), {}),
                                     ((1, 5), {"dtype": "int64"}), ((-1.5, 2.5), {}), ((0, 0), {})], ids=repr)
def test_range(args, kw):
    tkw = {"dtype": torch.int64} if kw else {}
    dkw = {"dtype": dn.int64} if kw else {}
    with warnings.catch_warnings(record=True) as want_w:
        warnings.simplefilter("always")
        want = torch.range(*args, **tkw)
    with pytest.warns(UserWarning, match="range is deprecated") as got_w:
        got = dn.range(*args, **dkw)
    assert len(got_w) == len(want_w) == 1
    _same(got, want)


def test_range_errors():
    with pytest.raises(ValueError, match="step must be nonzero"), pytest.warns(UserWarning):
        dn.range(1, 5, 0)
    with pytest.raises(ValueError, match="inconsistent with step sign"), pytest.warns(UserWarning):
        dn.range(5, 1)
    with pytest.raises(TypeError):
        dn.range(5)
    assert range(3) == __builtins__["range"](3) if isinstance(__builtins__, dict) else True
    assert "range" not in dn.__all__ and "all" not in dn.__all__ and "round" not in dn.__all__


def test_functional_torch():
    assert dF.torch is dn and tF.torch is torch
    _same(dF.torch.unsqueeze(dn.tensor([1.0, 2.0]), 1), tF.torch.unsqueeze(torch.tensor([1.0, 2.0]), 1))


# --------------------------------------------------------------------------
# round
# --------------------------------------------------------------------------

def test_round_half_to_even_and_decimals():
    v = [0.4, 0.5, 1.5, 2.5, -0.5, -0.6, -1.5, 1.2345, 12345.678, np.nan, np.inf]
    for dt in (np.float32, np.float64):
        x = np.array(v, dt)
        _same(dn.round(dn.tensor(x)), torch.round(torch.tensor(x)))
        _same(dn.tensor(x).round(), torch.tensor(x).round())
        for d in (1, 2, 3, -1, -2):
            _same(dn.round(dn.tensor(x), decimals=d), torch.round(torch.tensor(x), decimals=d))
    _same(dn.round(dn.tensor([1, -2, 3])), torch.round(torch.tensor([1, -2, 3])))


def test_round_gradient_is_zero_as_torch():
    x = RNG.uniform(-3, 3, (3, 4))
    check(lambda a: dn.round(a) * a, lambda a: torch.round(a) * a, [x], diff=[0])
    check(lambda a: a.round(decimals=1), lambda a: a.round(decimals=1), [x], diff=[0])


def test_round_errors():
    with pytest.raises(NotImplementedError):
        torch.round(torch.tensor([15, 25]), decimals=-1)
    with pytest.raises(TypeError, match="round: decimals=-1 needs a floating-point input"):
        dn.round(dn.tensor([15, 25]), decimals=-1)
    with pytest.raises(TypeError, match="round: decimals must be an integer"):
        dn.round(dn.tensor([1.5]), decimals=0.5)
    with pytest.raises(TypeError):
        dn.round(dn.tensor([True]))


# --------------------------------------------------------------------------
# %, //, remainder, fmod, floor_divide, div(rounding_mode=)
# --------------------------------------------------------------------------

_X = np.array([[5.5, -3.2, 2.0, -7.0], [0.3, 9.1, -0.7, 4.0]])
_Y = np.array([[2.0, 2.0, -1.5, 3.0], [-0.4, 2.5, 0.3, -4.0]])
_IX = np.array([[7, -7, 6, -6], [0, 13, -1, 5]])
_IY = np.array([[2, 2, -4, -4], [3, -5, 3, 1]])

_BINARY = {
    "%": (lambda a, b: a % b, lambda a, b: a % b),
    "//": (lambda a, b: a // b, lambda a, b: a // b),
    "remainder": (lambda a, b: dn.remainder(a, b), lambda a, b: torch.remainder(a, b)),
    "fmod": (lambda a, b: dn.fmod(a, b), lambda a, b: torch.fmod(a, b)),
    "floor_divide": (lambda a, b: dn.floor_divide(a, b), lambda a, b: torch.floor_divide(a, b)),
    "div-floor": (lambda a, b: dn.div(a, b, rounding_mode="floor"), lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "div-trunc": (lambda a, b: a.div(b, rounding_mode="trunc"), lambda a, b: a.div(b, rounding_mode="trunc")),
    "Tensor.remainder": (lambda a, b: a.remainder(b), lambda a, b: a.remainder(b)),
    "Tensor.fmod": (lambda a, b: a.fmod(b), lambda a, b: a.fmod(b)),
    "Tensor.floor_divide": (lambda a, b: a.floor_divide(b), lambda a, b: a.floor_divide(b)),
}


@pytest.mark.parametrize("name", list(_BINARY))
@pytest.mark.parametrize("dtypes", ["float64", "float32", "int64", "int32", "int64-float32", "int64-by-py-float",
                                    "float32-by-py-int", "py-number-by-tensor", "broadcast"])
def test_remainders_and_quotients_values_and_dtypes(name, dtypes):
    dnf, tf = _BINARY[name]
    x, y = {"float64": (_X, _Y), "float32": (_X.astype(np.float32), _Y.astype(np.float32)),
            "int64": (_IX, _IY), "int32": (_IX.astype(np.int32), _IY.astype(np.int32)),
            "int64-float32": (_IX, _Y.astype(np.float32)), "int64-by-py-float": (_IX, 2.5),
            "float32-by-py-int": (_X.astype(np.float32), 3), "py-number-by-tensor": (7, _IY),
            "broadcast": (_X, _Y[0])}[dtypes]

    def lift(lib, v):
        return v if isinstance(v, (int, float)) else (dn.tensor(v) if lib is dn else torch.tensor(v))
    if not isinstance(x, np.ndarray):
        if name.startswith("Tensor.") or name == "div-trunc":
            pytest.skip("a method needs a tensor on the left")
        if name == "fmod":
            with pytest.raises(TypeError):          # torch's fmod takes no number on the left; dynnets' does
                tf(x, torch.tensor(y))
            _same(dnf(x, dn.tensor(y)), torch.fmod(torch.tensor(x), torch.tensor(y)))
            return
    _same(dnf(lift(dn, x), lift(dn, y)), tf(lift(torch, x), lift(torch, y)))


@pytest.mark.parametrize("name", ["remainder", "fmod", "%", "div-floor", "div-trunc", "broadcast-remainder"])
def test_remainder_gradients_as_torch(name):
    # quotients away from integers: the gradients are those of the smooth pieces
    q = RNG.integers(-3, 4, (3, 4)) + RNG.uniform(0.2, 0.8, (3, 4))
    y = RNG.uniform(0.5, 2, (3, 4)) * RNG.choice([-1.0, 1.0], (3, 4))
    x = q * y
    if name == "broadcast-remainder":
        y = y[0]
        x = (RNG.integers(-3, 4, (3, 4)) + RNG.uniform(0.2, 0.8, (3, 4))) * y
        name = "remainder"
    dnf, tf = _BINARY[name]
    check(dnf, tf, [x, y], diff=[0, 1])
    check(lambda a: dnf(a, 1.5), lambda a: tf(a, 1.5), [x], diff=[0])


def test_floor_divide_gradient_is_zero():
    """torch's floor_divide raises "derivative not implemented"; here it is
    the zero gradient of torch's div(rounding_mode='floor')."""
    x = dn.tensor([5.5, -3.2], requires_grad=True)
    (x // 2.0 + x).sum().backward()
    _same(x.grad, torch.tensor([1.0, 1.0]))


def test_remainder_nan_and_zero_divisor():
    for f, tfn in ((dn.remainder, torch.remainder), (dn.fmod, torch.fmod), (dn.floor_divide, torch.floor_divide)):
        x = np.array([5.0, -3.0, 0.0, np.inf, np.nan])
        _same(f(dn.tensor(x), 0.0), tfn(torch.tensor(x), 0.0))
        _same(f(dn.tensor(x), dn.tensor(np.array([2.0, 0.0, np.inf, 2.0, 1.0]))),
              tfn(torch.tensor(x), torch.tensor([2.0, 0.0, np.inf, 2.0, 1.0])))
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            tfn(torch.tensor([5, -3]), torch.tensor([0, 2]))
        with pytest.raises(ZeroDivisionError, match="integer division by zero"):
            f(dn.tensor([5, -3]), dn.tensor([0, 2]))
        with pytest.raises(RuntimeError):              # also a RuntimeError, as torch's
            f(dn.tensor([5, -3]), 0)


def test_remainder_errors():
    with pytest.raises(NotImplementedError):
        torch.tensor([True]) % torch.tensor([True])
    with pytest.raises(TypeError, match="remainder: input must be a real number"):
        dn.tensor([True]) % dn.tensor([True])
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(torch.tensor([1.0]), 2.0, rounding_mode="round")
    with pytest.raises(ValueError, match="div: expected rounding_mode to be one of None, 'trunc', or 'floor'"):
        dn.div(dn.tensor([1.0]), 2.0, rounding_mode="round")


# --------------------------------------------------------------------------
# all, any
# --------------------------------------------------------------------------

@pytest.mark.parametrize("data", [[[1, 2], [0, 4]], [[True, False], [True, True]], [[1.0, np.nan], [0.0, 4.0]],
                                  [[0, 0], [0, 0]], [], [[3]]], ids=repr)
def test_all_any(data):
    d, t = dn.tensor(data), torch.tensor(data)
    for op in ("all", "any"):
        _same(getattr(d, op)(), getattr(t, op)())
        _same(getattr(dn, op)(d), getattr(torch, op)(t))
        if d.dim() == 2:
            for kw in ({"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": -1, "keepdim": False}, {"dim": (0, 1)}):
                _same(getattr(d, op)(**kw), getattr(t, op)(**kw))
            _same(getattr(d, op)(0, True), getattr(t, op)(0, True))
    _same(dn.tensor([1, 2], dtype=dn.uint8).all(), torch.tensor([1, 2], dtype=torch.uint8).all())
    assert np.all(dn.tensor([True, True])) and not np.any(dn.tensor([0, 0]))      # numpy calls the method


def test_all_any_truth_value():
    t = dn.tensor([True, False])
    assert not bool(t.all()) and bool(t.any())
    a, b = dn.tensor([1.0, 2.0]), dn.tensor([1.0, 2.0])
    assert bool((a == b).all()) is True


# --------------------------------------------------------------------------
# narrow, unbind, index_select
# --------------------------------------------------------------------------

@pytest.mark.parametrize("args", [(0, 1, 3), (0, -3, 2), (1, 1, 2), (-1, 0, 3), (0, 4, 0), (1, 3, 0)], ids=repr)
def test_narrow(args):
    x = RNG.standard_normal((4, 3))
    _same(dn.tensor(x).narrow(*args), torch.tensor(x).narrow(*args))
    _same(dn.narrow(dn.tensor(x), *args), torch.narrow(torch.tensor(x), *args))
    check(lambda a: a.narrow(*args) * 2, lambda a: a.narrow(*args) * 2, [x], diff=[0])
    _same(dn.arange(10).narrow(0, dn.tensor(2), 3), torch.arange(10).narrow(0, torch.tensor(2), 3))


def test_narrow_errors():
    x, tx = dn.arange(10), torch.arange(10)
    for args, match in (((0, 9, 2), r"start \(9\) \+ length \(2\) exceeds dimension size \(10\)"),
                        ((0, 2, -1), "length must be non-negative"),
                        ((0, 11, 0), r"start out of range \(expected to be in range of \[-10, 10\], but got 11\)"),
                        ((1, 0, 1), "dimension out of range")):
        with pytest.raises((RuntimeError, IndexError)):
            tx.narrow(*args)
        with pytest.raises((ValueError, IndexError), match=match):
            x.narrow(*args)
    with pytest.raises(ValueError, match="0-dim"):
        dn.tensor(1.0).narrow(0, 0, 1)


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_unbind(dim):
    x = RNG.standard_normal((2, 3, 4))
    _same(dn.tensor(x).unbind(dim), torch.tensor(x).unbind(dim))
    _same(dn.unbind(dn.tensor(x), dim=dim), torch.unbind(torch.tensor(x), dim=dim))
    check(lambda a: a.unbind(dim), lambda a: a.unbind(dim), [x], diff=[0])
    assert dn.unbind(dn.zeros(0, 2)) == () == torch.unbind(torch.zeros(0, 2))
    with pytest.raises(IndexError):
        dn.tensor(x).unbind(3)


@pytest.mark.parametrize("dim,index", [(0, [2, 0, 2]), (1, [1]), (-1, [3, 3, 0, 1]), (1, []), (0, 1)], ids=repr)
def test_index_select(dim, index):
    x = RNG.standard_normal((3, 4))
    for dt in (np.int64, np.int32):
        idx = np.array(index, dtype=dt)
        _same(dn.index_select(dn.tensor(x), dim, dn.tensor(idx)),
              torch.index_select(torch.tensor(x), dim, torch.tensor(idx)))
        _same(dn.tensor(x).index_select(dim, dn.tensor(idx)), torch.tensor(x).index_select(dim, torch.tensor(idx)))
    idx = np.array(index, dtype=np.int64)
    # repeated indices add their gradients
    check(lambda a: a.index_select(dim, dn.tensor(idx)), lambda a: a.index_select(dim, torch.tensor(idx)), [x],
          diff=[0])


def test_index_select_errors():
    x, tx = dn.arange(6.0).reshape(2, 3), torch.arange(6.0).view(2, 3)
    for idx, err, match in (([[2]], ValueError, "index is supposed to be a vector"),
                            ([3], IndexError, "index 3 is out of range for dimension 1 of size 3"),
                            ([-1], IndexError, "index -1 is out of range"),
                            ([1.0], TypeError, "expected dtype int32 or int64 for index")):
        with pytest.raises((RuntimeError, IndexError)):
            tx.index_select(1, torch.tensor(idx))
        with pytest.raises(err, match=match):
            x.index_select(1, dn.tensor(idx))
    with pytest.raises(TypeError):
        dn.index_select(x, 1, [1])


# --------------------------------------------------------------------------
# sort, argsort, topk, cumsum
# --------------------------------------------------------------------------

def _distinct(*shape):
    return RNG.permutation(int(np.prod(shape))).reshape(shape) + RNG.uniform(0, 0.5, shape)


@pytest.mark.parametrize("kw", [{}, {"dim": 0}, {"descending": True}, {"dim": 1, "descending": True},
                                {"stable": True}, {"dim": -2, "stable": True, "descending": True}], ids=repr)
def test_sort_argsort(kw):
    x = _distinct(3, 4)
    _same(tuple(dn.sort(dn.tensor(x), **kw)), tuple(torch.sort(torch.tensor(x), **kw)))
    _same(dn.tensor(x).argsort(**kw), torch.tensor(x).argsort(**kw))
    r = dn.tensor(x).sort(**kw)
    _same(r.values, torch.tensor(x).sort(**kw).values)
    _same(r.indices, torch.tensor(x).sort(**kw).indices)
    check(lambda a: dn.sort(a, **kw)[0], lambda a: torch.sort(a, **kw)[0], [x], diff=[0])


def test_sort_ties_nan_and_dtypes_as_torch_stable():
    for data in ([3, 1, 2, 1, 3, 3], [True, False, True], [2.0, np.nan, -1.0, np.nan, 2.0, -np.inf], [[1, 1], [0, 1]]):
        for dt in ((None,) if not isinstance(data[0], int) else (None, torch.int32, torch.uint8)):
            t = torch.tensor(data, dtype=dt)
            d = dn.tensor(t.numpy())
            for desc in (False, True):
                _same(tuple(d.sort(descending=desc, stable=True)), tuple(t.sort(descending=desc, stable=True)))
                _same(d.argsort(descending=desc, stable=True), t.argsort(descending=desc, stable=True))
    _same(tuple(dn.tensor(3.0).sort()), tuple(torch.tensor(3.0).sort()))
    _same(tuple(dn.tensor([3.0, 1.0]).sort(0, True)), tuple(torch.tensor([3.0, 1.0]).sort(0, True)))


@pytest.mark.parametrize("k,kw", [(2, {}), (1, {"dim": 0}), (3, {"largest": False}), (4, {"dim": 1}),
                                  (0, {}), (2, {"dim": 0, "largest": False, "sorted": True})], ids=repr)
def test_topk(k, kw):
    x = _distinct(3, 4)
    _same(tuple(dn.topk(dn.tensor(x), k, **kw)), tuple(torch.topk(torch.tensor(x), k, **kw)))
    _same(tuple(dn.tensor(x).topk(k, **kw)), tuple(torch.tensor(x).topk(k, **kw)))
    check(lambda a: a.topk(k, **kw).values, lambda a: a.topk(k, **kw).values, [x], diff=[0])


def test_topk_and_sort_errors():
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(torch.tensor([1.0, 3.0, 2.0]), 4)
    with pytest.raises(ValueError, match="topk: selected index k out of range"):
        dn.topk(dn.tensor([1.0, 3.0, 2.0]), 4)
    with pytest.raises(ValueError, match="k out of range"):
        dn.topk(dn.tensor([1.0, 3.0, 2.0]), -1)
    with pytest.raises(IndexError, match="dimension out of range"):
        dn.sort(dn.zeros(2, 3), dim=2)
    with pytest.raises(TypeError, match="descending must be a bool"):
        dn.sort(dn.zeros(2, 3), descending=1)
    _same(tuple(dn.topk(dn.tensor(3.0), 1)), tuple(torch.topk(torch.tensor(3.0), 1)))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim):
    x = RNG.standard_normal((3, 4))
    _same(dn.cumsum(dn.tensor(x), dim), torch.cumsum(torch.tensor(x), dim))
    check(lambda a: a.cumsum(dim), lambda a: a.cumsum(dim), [x], diff=[0])
    check(lambda a: dn.cumsum(a, dim=dim) ** 2, lambda a: torch.cumsum(a, dim=dim) ** 2, [x], diff=[0])
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(dn.tensor(x32).cumsum(dim).numpy(), torch.tensor(x32).cumsum(dim).numpy(), rtol=1e-6)
    for data, dt in (([1, 2, 3], torch.int32), ([True, True, False], None), ([1, 2], torch.uint8), ([5], None)):
        t = torch.tensor(data, dtype=dt)
        _same(dn.tensor(t.numpy()).cumsum(0), t.cumsum(0))
    _same(dn.tensor([1.0, 2.0]).cumsum(0, dtype=dn.float64), torch.tensor([1.0, 2.0]).cumsum(0, dtype=torch.float64))
    _same(dn.tensor(3.0).cumsum(0), torch.tensor(3.0).cumsum(0))
    with pytest.raises(TypeError):
        dn.tensor([1.0]).cumsum()
    with pytest.raises(IndexError, match="cumsum: dimension out of range"):
        dn.zeros(2, 3).cumsum(2)


# --------------------------------------------------------------------------
# F.one_hot, where(cond), masked_fill
# --------------------------------------------------------------------------

@pytest.mark.parametrize("data,n", [([0, 2], -1), ([0, 2], 5), ([[1, 0], [2, 2]], 3), (1, 3), ([], 2)], ids=repr)
def test_one_hot(data, n):
    t = torch.tensor(data, dtype=torch.int64)
    _same(dF.one_hot(dn.tensor(t.numpy()), n), tF.one_hot(t, n))
    _same(dF.one_hot(dn.tensor(t.numpy()), num_classes=n), tF.one_hot(t, num_classes=n))


def test_one_hot_errors():
    for data, dt, n, err, match in (([0, 2], dn.int32, 3, TypeError, "only applicable to index tensor of type "
                                                                      "LongTensor"),
                                    ([0.0, 1.0], dn.float32, 3, TypeError, "LongTensor"),
                                    ([0, -1], dn.int64, 3, IndexError, "must be non-negative"),
                                    ([0, 3], dn.int64, 3, IndexError, "smaller than num_classes"),
                                    ([], dn.int64, -1, ValueError, "can not infer total number of classes")):
        with pytest.raises(RuntimeError):
            tF.one_hot(torch.tensor(data, dtype=numpy_dtype_to_torch(dt)), n)
        with pytest.raises(err, match=match):
            dF.one_hot(dn.tensor(data, dtype=dt), n)


def numpy_dtype_to_torch(dt):
    return {dn.int32: torch.int32, dn.float32: torch.float32, dn.int64: torch.int64}[dt]


@pytest.mark.parametrize("data", [[[0, 1], [2, 0]], [[True, False, True]], [0.0, 1.5, -2.0], 1, 0, [[]]], ids=repr)
def test_where_condition_only(data):
    _same(dn.where(dn.tensor(data)), torch.where(torch.tensor(data)))


def test_masked_fill_and_where_three_arguments_unchanged():
    x = RNG.standard_normal((2, 3))
    m = np.array([[True, False, True], [False, False, True]])
    check(lambda a: a.masked_fill(dn.tensor(m), 5.0), lambda a: a.masked_fill(torch.tensor(m), 5.0), [x], diff=[0])
    check(lambda a: dn.where(dn.tensor(m), a, -a), lambda a: torch.where(torch.tensor(m), a, -a), [x], diff=[0])
    with pytest.raises(TypeError, match="where: takes"):
        dn.where(dn.tensor(m), dn.tensor(x))


def test_new_ops_dtypes_follow_torch_for_int64_results():
    x = _distinct(2, 3)
    assert dn.tensor(x).argsort().dtype == dn.int64 == numpy_dtype(torch.tensor(x).argsort().dtype)
    assert dn.tensor(x).topk(1).indices.dtype == dn.int64
    assert all(t.dtype == dn.int64 for t in dn.where(dn.tensor(x) > 1))


# --- i22-torch-a: Tensor(ndarray) is torch's float32 constructor --------------------------------------

@pytest.mark.parametrize("a", [np.array([1, 2]), np.array([1.5, -2.0]), np.array([True, False]),
                               np.arange(6, dtype=np.int32).reshape(2, 3), np.array(3.0), np.zeros((0, 2), np.uint8)],
                         ids=["int64", "float64", "bool", "int32-2d", "0d", "empty-uint8"])
def test_tensor_constructor_of_a_numpy_array_is_float32(a):
    """Silent before: dn.Tensor(np.array([1, 2])) kept int64 (and float64 stayed float64), torch casts to
    float32; the values are torch's, and a float32 array is shared as torch shares it."""
    got, want = dn.Tensor(a), torch.Tensor(a)
    assert got.dtype == dn.float32 and want.dtype == torch.float32
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert not np.shares_memory(got.numpy(), a)
    f = np.asarray(a, np.float32)
    t, tt = dn.Tensor(f), torch.Tensor(f)
    f[...] = 7
    np.testing.assert_array_equal(t.numpy(), tt.numpy())
    assert t.numpy() is f


def test_tensor_constructor_of_a_numpy_array_gradient_and_errors():
    x = dn.Tensor(np.array([1.0, 2.0]), requires_grad=True)         # dynnets' keyword: a float32 leaf
    (x * x).sum().backward()
    assert x.grad.dtype == dn.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    with pytest.raises(TypeError, match="float32"):
        dn.Tensor(np.array(["a"]))
    with pytest.raises(TypeError):
        torch.Tensor(np.array(["a"]))
    # what keeps the dtype: tensor (a copy) and from_numpy (shared)
    a = np.array([1, 2])
    assert dn.tensor(a).dtype == dn.int64 and dn.from_numpy(a).dtype == dn.int64
