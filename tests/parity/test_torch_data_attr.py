"""``Tensor.data`` against PyTorch: a tensor on the same memory, cut from the graph.

Each scenario is written once against a small adapter (``Lib``) and run on
torch and on dynnets in float64; it returns arrays that must agree, or
raises, which the other library must do too. Covered: what ``.data`` is
(``size()``, ``requires_grad``, ``grad_fn``, ops on it not recorded), memory
shared both ways (item assignment and every in-place op through it, of a
leaf and of a non-leaf), ``p.grad.data``, hand-written SGD steps through
``.data`` (both spellings of ``add_``), ``weight.data = t`` followed by
training with an optimizer, and the optimizer's state after a change of
shape; ``numpy()`` / ``detach()`` / ``clone()`` / ``Parameter(t)`` and memory;
the in-place random fills ``normal_`` / ``uniform_`` that torch init code
calls through ``.data``. Where dynnets deliberately differs (a write through
``.data`` to a value a pending backward reads raises instead of giving a
silently different gradient), the test says so.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402

torch.set_num_threads(1)


class Lib:
    """The calls the scenarios make, on torch or on dynnets."""

    def __init__(self, name):
        self.name = name
        self.is_torch = name == "torch"
        self.lib = torch if self.is_torch else dn
        self.Tensor = torch.Tensor if self.is_torch else dn.Tensor

    def t(self, data, requires_grad=False):
        a = np.array(data, dtype=np.float64)
        if self.is_torch:
            return torch.tensor(a, requires_grad=requires_grad)
        return dn.tensor(a, requires_grad=requires_grad)

    def no_grad(self):
        return torch.no_grad() if self.is_torch else dn.no_grad()

    def linear(self, w, b):
        """A Linear(in, out) in float64 whose weight and bias are set through ``.data``."""
        w, b = np.asarray(w), np.asarray(b)
        lin = self.lib.nn.Linear(w.shape[1], w.shape[0], dtype=self.lib.float64)
        lin.weight.data = self.t(w)
        lin.bias.data = self.t(b)
        return lin

    def optimizer(self, kind, params):
        o = self.lib.optim
        if kind == "sgd":
            return o.SGD(params, lr=0.1)
        if kind == "momentum":
            return o.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
        if kind == "adam":
            return o.Adam(params, lr=0.05)
        if kind == "adagrad":
            return o.Adagrad(params, lr=0.1)
        if kind == "rmsprop":
            return o.RMSprop(params, lr=0.01, momentum=0.5)
        raise ValueError(kind)

    def np(self, t):
        if t is None:
            return None
        if self.is_torch:
            return t.detach().numpy().copy()
        return np.array(t.numpy())


def _pair(fn):
    out = {}
    for name in ("torch", "dynnets"):
        m = Lib(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = fn(m)
        except Exception as exc:  # noqa: BLE001 - compared below
            out[name] = ("raise", exc)
        else:
            res = res if isinstance(res, tuple) else (res,)
            out[name] = ("ok", [r if isinstance(r, (np.ndarray, tuple, int, float, bool, str)) or r is None
                                else m.np(r) for r in res])
    return out["torch"], out["dynnets"]


def _agree(fn, raises=(RuntimeError,)):
    """Both libraries give the same values, or both raise (dynnets one of ``raises``)."""
    (tk, tv), (dk, dv) = _pair(fn)
    if tk == "raise":
        assert dk == "raise", f"torch raised {type(tv).__name__}: {tv}; dynnets gave {dv}"
        assert isinstance(dv, raises), f"dynnets raised {type(dv).__name__}: {dv}"
        return dv
    assert dk == "ok", f"dynnets raised {type(dv).__name__}: {dv}; torch gave {tv}"
    assert len(tv) == len(dv)
    for a, b in zip(tv, dv):
        if a is None or b is None:
            assert a is None and b is None, (a, b)
        elif isinstance(a, (tuple, int, float, bool, str)):
            assert a == b, (a, b)
        else:
            assert np.asarray(b).dtype == np.asarray(a).dtype, (np.asarray(b).dtype, np.asarray(a).dtype)
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    return None


_X0 = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
_G0 = [[0.1, 0.2, -0.3], [-0.4, 0.5, 0.6]]


# --------------------------------------------------------------------------
# what .data is
# --------------------------------------------------------------------------

@pytest.mark.parametrize("requires_grad", [False, True])
def test_data_is_a_tensor_that_requires_no_grad_and_is_not_recorded(requires_grad):
    def f(m):
        x = m.t(_X0, requires_grad=requires_grad)
        d = x.data
        assert type(d) is m.Tensor and d is not x
        assert not d.requires_grad and d.grad_fn is None and d.is_leaf
        assert x.requires_grad == requires_grad and x.is_leaf     # x unchanged
        y = d * 2
        assert not y.requires_grad and y.grad_fn is None
        z = (x * d).sum()
        assert z.requires_grad == requires_grad
        if requires_grad:
            z.backward()
        return tuple(d.size()), d.size(1), tuple(d.shape), d.ndim, d, y, x.grad
    _agree(f)


def test_data_of_a_non_leaf_shares_its_memory_and_is_cut_from_the_graph():
    def f(m):
        x = m.t(_X0, requires_grad=True)
        y = x * 2.0 + 1.0
        yd = y.data
        assert not yd.requires_grad and yd.grad_fn is None and y.grad_fn is not None
        yd[0, 1] = 100.0                     # changes y (the same memory), not x
        (y * m.t(_G0)).sum().backward()      # mul by a constant and add: y's values are not read
        return y, yd, x, x.grad
    _agree(f)


def test_repr_of_data_shows_no_grad():
    for m in (Lib("torch"), Lib("dynnets")):
        r = repr(m.t(_X0, requires_grad=True).data)
        assert "requires_grad" not in r and "grad_fn" not in r, (m.name, r)


# --------------------------------------------------------------------------
# memory shared both ways
# --------------------------------------------------------------------------

def _writes(m):
    # (name, a write through d = x.data, given an operand g)
    return [
        ("setitem_int", lambda d, g: d.__setitem__(0, 5.0)),
        ("setitem_slice", lambda d, g: d.__setitem__((slice(None), 1), g[:, 0])),
        ("copy_", lambda d, g: d.copy_(g)),
        ("copy_broadcast", lambda d, g: d.copy_(m.t([7.0, 8.0, 9.0]))),
        ("zero_", lambda d, g: d.zero_()),
        ("fill_", lambda d, g: d.fill_(3.5)),
        ("mul_", lambda d, g: d.mul_(2.0)),
        ("div_", lambda d, g: d.div_(g + 1.0)),
        ("clamp_", lambda d, g: d.clamp_(-0.5, 0.5)),
        ("add_alpha", lambda d, g: d.add_(g, alpha=-0.1)),
        ("add_legacy", lambda d, g: d.add_(-0.1, g)),
        ("sub_", lambda d, g: d.sub_(g, alpha=2.0)),
        ("sub_legacy", lambda d, g: d.sub_(2.0, g)),
        ("iadd", lambda d, g: d.__iadd__(g)),
    ]


_WRITES = [name for name, _ in _writes(Lib("dynnets"))]


@pytest.mark.parametrize("name", _WRITES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_write_through_data_changes_the_tensor(name, requires_grad):
    """Allowed on a leaf that requires grad, outside no_grad (the point of
    ``.data``); the leaf stays a leaf that requires grad, and its next
    forward and backward see the new values."""
    def f(m):
        write = dict(_writes(m))[name]
        x = m.t(_X0, requires_grad=requires_grad)
        out = write(x.data, m.t(_G0))
        if not name.startswith(("setitem", "iadd")):
            assert type(out) is m.Tensor and not out.requires_grad
        assert x.requires_grad == requires_grad and x.is_leaf and x.grad_fn is None
        if requires_grad:
            (x * x).sum().backward()
        return x, x.grad
    _agree(f)


def test_legacy_add_warns_as_torch():
    # torch warns once per process (its TORCH_WARN_ONCE), so only its value is checked here
    tx = torch.tensor([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tx.data.add_(-0.5, torch.tensor([2.0, 2.0]))
    x = dn.tensor([1.0, 2.0])
    with pytest.warns(UserWarning, match="deprecated"):
        x.data.add_(-0.5, dn.tensor([2.0, 2.0]))
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


def test_legacy_add_with_a_tensor_first_raises():
    # torch's overload is (Number alpha, Tensor other): two tensors is neither spelling
    with pytest.raises(TypeError):
        torch.ones(2).add_(torch.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match="add_"):
        dn.ones(2).add_(dn.ones(2), dn.ones(2))


def test_numpy_detach_clone_cpu_and_indexing_of_data():
    def f(m):
        x = m.t(_X0)
        a = x.data.numpy()
        b = x.data.cpu().numpy()
        a[0, 0] = 7.0                        # numpy() shares memory
        x.detach()[1, 1] = 8.0               # and detach()
        c = x.data.clone()
        c[0, 2] = -9.0                       # a clone does not
        row = x.data[1]
        assert type(row) is m.Tensor and not row.requires_grad
        return x, b, c, row, float(x.data[0, 0]), x.data[0].sum().item()
    _agree(f)


def test_grad_data_shares_the_gradient():
    def f(m):
        x = m.t(_X0, requires_grad=True)
        (x * x).sum().backward()
        g = x.grad.data
        assert not g.requires_grad
        g.mul_(0.5)
        x.grad.data[0] = 1.0
        before = m.np(x.grad)
        x.grad.data.zero_()
        return before, x.grad
    _agree(f)


def test_grad_data_of_a_0d_leaf_shares_the_gradient():
    def f(m):
        x = m.t(2.0, requires_grad=True)
        (x * x * 3.0).backward()
        x.grad.data.mul_(2.0)
        x.grad[()] = x.grad + 1.0
        return x.grad
    _agree(f)


@pytest.mark.parametrize("second", ["vector", "reshaped", "twice"])
def test_an_in_place_change_of_one_grad_leaves_the_others(second):
    """add's gradient passes one array to both operands (a reshape a view
    of it): each leaf's .grad is its own memory, as torch's."""
    def f(m):
        a = m.t([1.0, 2.0], requires_grad=True)
        b = m.t([[3.0, 4.0]] if second == "reshaped" else [3.0, 4.0], requires_grad=True)
        y = a + b.reshape(2)
        if second == "twice":
            y = y + a
        y.sum().backward()
        a.grad.data.mul_(3.0)
        b.grad.clamp_(max=0.5)
        return a.grad, b.grad
    _agree(f)


def test_backward_with_a_gradient_does_not_give_it_to_a_leaf():
    def f(m):
        v = m.t([1.0, 2.0])
        z = m.t([5.0, 6.0], requires_grad=True)
        z.backward(v)
        z.grad.data.zero_()
        return v, z.grad
    _agree(f)


def test_backward_with_a_gradient_through_a_view_does_not_give_it_to_a_leaf():
    """torch hands the leaf a view of the caller's gradient here (so
    ``w.grad.data.mul_(2)`` changes ``v``: an artefact of its gradient
    stealing); dynnets copies it, as torch does without the reshape."""
    tv = torch.tensor([1.0, 2.0])
    tw = torch.tensor([5.0, 6.0], requires_grad=True)
    tw.reshape(2, 1).backward(tv.reshape(2, 1))
    tw.grad.data.mul_(2.0)
    np.testing.assert_array_equal(tv.numpy(), [2.0, 4.0])
    v = dn.tensor([1.0, 2.0], dtype=np.float64)
    w = dn.tensor([5.0, 6.0], requires_grad=True, dtype=np.float64)
    w.reshape(2, 1).backward(v.reshape(2, 1))
    w.grad.data.mul_(2.0)
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_parameter_of_a_tensor_shares_its_memory():
    def f(m):
        t = m.t(_X0)
        p = m.lib.nn.Parameter(t)
        t.fill_(1.5)
        with m.no_grad():
            p.mul_(2.0)
        return p, t, p.requires_grad
    _agree(f)


# --------------------------------------------------------------------------
# training steps through .data
# --------------------------------------------------------------------------

def _problem():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((8, 3)), rng.standard_normal((8, 2)), rng.standard_normal((2, 3)) * 0.5,
            rng.standard_normal(2) * 0.1)


@pytest.mark.parametrize("spelling", ["alpha", "legacy"])
def test_hand_written_sgd_through_data_equals_torch(spelling):
    X, Y, W0, b0 = _problem()
    lr = 0.1

    def f(m):
        x, y = m.t(X), m.t(Y)
        w, b = m.t(W0, requires_grad=True), m.t(b0, requires_grad=True)
        losses = []
        for _ in range(6):
            loss = ((x @ w.t() + b - y) ** 2).mean()
            w.grad = None
            b.grad = None
            loss.backward()
            losses.append(loss.item())
            for p in (w, b):
                if spelling == "alpha":
                    p.data.add_(p.grad.data, alpha=-lr)
                else:
                    p.data.add_(-lr, p.grad.data)
        assert w.is_leaf and w.requires_grad
        return np.array(losses), w, b
    _agree(f)


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam", "adagrad", "rmsprop"])
def test_weight_data_assigned_then_training_with_an_optimizer(kind):
    X, Y, W0, b0 = _problem()

    def f(m):
        lin = m.linear(W0, b0)
        opt = m.optimizer(kind, lin.parameters())
        x, y = m.t(X), m.t(Y)
        losses = []
        for _ in range(6):
            opt.zero_grad()
            loss = ((lin(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses), lin.weight, lin.bias
    _agree(f)


def test_weight_data_of_another_shape_before_the_optimizer_trains():
    X, _, _, _ = _problem()
    rng = np.random.default_rng(1)
    W5, b5, Y5 = rng.standard_normal((5, 3)), rng.standard_normal(5), rng.standard_normal((8, 5))

    def f(m):
        lin = m.linear(np.zeros((2, 3)), np.zeros(2))
        lin.weight.data = m.t(W5)            # torch allows a new shape
        lin.bias.data = m.t(b5)
        opt = m.optimizer("adam", lin.parameters())
        losses = []
        for _ in range(4):
            opt.zero_grad()
            loss = ((lin(m.t(X)) - m.t(Y5)) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses), lin.weight
    _agree(f)


@pytest.mark.parametrize("kind", ["momentum", "adam", "adagrad", "rmsprop"])
def test_a_new_shape_after_a_step_raises_at_the_next_step_as_torch(kind):
    """The optimizer's state, kept per parameter object, no longer fits."""
    def f(m):
        w = m.lib.nn.Parameter(m.t([1.0, 2.0, 3.0]))
        opt = m.optimizer(kind, [w])
        (w * w).sum().backward()
        opt.step()
        opt.zero_grad()
        w.data = m.t([1.0, 2.0, 3.0, 4.0, 5.0])
        (w * w).sum().backward()
        opt.step()
        return w
    err = _agree(f)
    assert "state" in str(err) and "(5,)" in str(err)


def test_a_new_shape_keeps_working_without_state_as_torch():
    def f(m):
        w = m.lib.nn.Parameter(m.t([1.0, 2.0, 3.0]))
        opt = m.optimizer("sgd", [w])
        (w * w).sum().backward()
        opt.step()
        opt.zero_grad()
        w.data = m.t([1.0, 2.0, 3.0, 4.0, 5.0])
        (w * w).sum().backward()
        opt.step()
        return w
    _agree(f)


# --------------------------------------------------------------------------
# assigning .data
# --------------------------------------------------------------------------

def test_assigning_data_shares_the_new_tensors_memory_and_may_change_shape_and_dtype():
    def f(m):
        x = m.t(_X0, requires_grad=True)
        t = m.t([1.0, 2.0, 3.0, 4.0]).float()
        x.data = t
        t[0] = 7.0
        assert x.requires_grad and x.is_leaf
        return x, tuple(x.shape), str(x.dtype).split(".")[-1]
    _agree(f)


@pytest.mark.parametrize("value", ["int", "long_tensor"])
def test_assigning_data_raises_as_torch(value):
    def f(m):
        x = m.t(_X0, requires_grad=True)
        x.data = 5 if value == "int" else m.lib.tensor([1, 2])
        return x
    _agree(f, raises=(TypeError, RuntimeError))


# --------------------------------------------------------------------------
# autograd and writes through .data: where dynnets is stricter
# --------------------------------------------------------------------------

def test_a_write_through_data_to_a_saved_value_raises_at_backward():
    """torch does not count writes through ``.data`` in its version counter,
    so its backward silently uses the new values (its documented danger);
    dynnets raises, naming the op."""
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    tb = torch.tensor([3.0, 4.0])
    ty = (tx * tb).sum()
    tb.data.add_(1.0)
    ty.backward()
    np.testing.assert_array_equal(tx.grad.numpy(), [4.0, 5.0])    # not d(x*b)/dx at the recorded b

    x = dn.tensor([1.0, 2.0], requires_grad=True)
    b = dn.tensor([3.0, 4.0])
    y = (x * b).sum()
    b.data.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*'add_'"):
        y.backward()


def test_a_write_through_detach_to_a_saved_value_raises_as_torch():
    def f(m):
        x = m.t([1.0, 2.0], requires_grad=True)
        b = m.t([3.0, 4.0])
        y = (x * b).sum()
        b.detach().add_(1.0)
        y.backward()
        return x.grad
    _agree(f)


def test_a_write_through_data_after_backward_is_what_an_update_does():
    def f(m):
        x = m.t([1.0, 2.0], requires_grad=True)
        b = m.t([3.0, 4.0])
        (x * b).sum().backward()
        b.data.add_(1.0)
        x.data.mul_(2.0)
        (x * b).sum().backward()
        return x.grad, x
    _agree(f)


# --------------------------------------------------------------------------
# in-place random fills, as torch init code calls them through .data
# --------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda d: d.normal_(), lambda d: d.normal_(2.0, 0.5), lambda d: d.normal_(mean=-1.0, std=3.0),
    lambda d: d.uniform_(), lambda d: d.uniform_(-0.1, 0.1), lambda d: d.uniform_(to=5.0),
    lambda d: d.uniform_(**{"from": 2.0, "to": 3.0})])
def test_random_fills_through_data_return_it_and_change_the_tensor(call):
    for m in (Lib("torch"), Lib("dynnets")):
        x = m.t(np.zeros((50, 40)), requires_grad=True)
        d = x.data
        assert call(d) is d
        assert x.is_leaf and x.requires_grad
        v = m.np(x)
        assert len(np.unique(v)) > 1000, m.name


@pytest.mark.parametrize("call", [
    lambda m, x: x.normal_(std=-1.0),
    lambda m, x: x.uniform_(1.0, 0.0),
    lambda m, x: m.lib.zeros(3, dtype=m.lib.int64).normal_(),
    lambda m, x: m.lib.zeros(3, dtype=m.lib.int64).uniform_(),
    lambda m, x: m.t([1.0, 2.0], requires_grad=True).normal_(),     # a leaf that requires grad
    lambda m, x: x.uniform_(0.0, 1.0, 2.0),
    lambda m, x: x.uniform_(a=0.0),
])
def test_random_fills_raise_as_torch(call):
    def f(m):
        call(m, m.t(np.zeros(3)))
    _agree(f, raises=(RuntimeError, ValueError, TypeError))


def test_normal_and_uniform_distributions():
    x = dn.zeros(200_000, dtype=np.float64)
    x.normal_(1.5, 2.0)
    assert abs(float(x.mean()) - 1.5) < 0.03 and abs(np.std(x.numpy()) - 2.0) < 0.03
    x.uniform_(-3.0, 1.0)
    v = x.numpy()
    assert v.min() >= -3.0 and v.max() < 1.0 and abs(v.mean() + 1.0) < 0.02


def test_random_fills_draw_from_the_default_generator_or_the_given_one():
    """The numbers are numpy's (not torch's): after ``dn.manual_seed(s)``
    those of ``default_rng(s)``, drawn in float64 and rounded once, the same
    that ``nn.init`` draws."""
    dn.manual_seed(3)
    a = dn.zeros(4, 5).normal_(0.5, 2.0)
    np.testing.assert_array_equal(a.numpy(), np.random.default_rng(3).normal(0.5, 2.0, (4, 5)).astype(np.float32))
    dn.manual_seed(3)
    b = dn.nn.init.normal_(dn.zeros(4, 5), 0.5, 2.0)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    g = dn.Generator().manual_seed(7)
    c = dn.zeros(6, dtype=np.float64).uniform_(-1.0, 1.0, generator=g)
    np.testing.assert_array_equal(c.numpy(), np.random.default_rng(7).uniform(-1.0, 1.0, 6))
    d = dn.zeros(6, dtype=np.float64).uniform_(-1.0, 1.0, generator=dn.Generator().manual_seed(7))
    np.testing.assert_array_equal(c.numpy(), d.numpy())


def test_random_fill_of_a_non_leaf_passes_no_gradient_to_what_it_overwrote():
    def f(m):
        x = m.t([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2.0
        y.normal_()
        (y * 3.0 + x).sum().backward()
        return x.grad
    _agree(f)
