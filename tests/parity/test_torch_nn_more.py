"""Issue 22's modules, functions and calling habits against torch: ``nn.Flatten``,
``nn.Unflatten``, ``nn.Softmax``, ``nn.LogSoftmax``, ``nn.KLDivLoss`` /
``F.kl_div`` (values and gradients in float64, eager and static), and the
keyword and positional spellings real torch code uses (``F.cross_entropy(
input=, target=)``, ``torch.cat(tensors=, dim=)``, ``x.max(dim)``,
``x.sum(dim=(0, 1))``, ``x.view(-1, n)``...)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.nn as dnn  # noqa: E402
import dynnets.nn.functional as DF  # noqa: E402

from . import _common as C  # noqa: E402

TF = torch.nn.functional
MODES = ("eager", "static", "static-unknown")


def _log_probs(rng, shape):
    z = rng.standard_normal(shape)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _probs(rng, shape, zeros=True):
    p = rng.uniform(0.0, 1.0, shape)
    if zeros:
        p[..., 0] = 0.0                     # target zeros: 0 * log 0 counts 0
    return p / p.sum(-1, keepdims=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(mode, reduction, log_target):
    rng = np.random.default_rng(0)
    x = _log_probs(rng, (4, 5))
    t = _probs(rng, (4, 5), zeros=False)
    t0 = _probs(rng, (4, 5), zeros=True)
    if log_target:
        t = np.log(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # 'mean' warns in both libraries
        C.check(lambda a, b: DF.kl_div(a, b, reduction=reduction, log_target=log_target),
                lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target), [x, t], diff=(0, 1),
                mode=mode)
        if not log_target:                          # targets with zeros: 0 log 0 counts 0
            C.check(lambda a, b: DF.kl_div(a, b, reduction=reduction),
                    lambda a, b: TF.kl_div(a, b, reduction=reduction), [x, t0], diff=(0,), mode=mode)
        C.check(lambda a, b: dnn.KLDivLoss(reduction=reduction, log_target=log_target)(a, b),
                lambda a, b: torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)(a, b), [x, t],
                diff=(0,), mode=mode)


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4)])
def test_kl_div_batchmean_other_ranks(shape):
    rng = np.random.default_rng(1)
    x, t = _log_probs(rng, shape), _probs(rng, shape, zeros=False)
    for mode in MODES:
        C.check(lambda a, b: DF.kl_div(a, b, reduction="batchmean"),
                lambda a, b: TF.kl_div(a, b, reduction="batchmean"), [x, t], diff=(0, 1), mode=mode)


def test_kl_div_gradient_of_a_zero_target_is_zero_where_torchs_is_nan():
    # documented difference: d(t log t)/dt is unbounded at t = 0; torch gives nan
    x, t = np.log([[0.5, 0.5]]), np.array([[0.0, 1.0]])
    tt = torch.tensor(t, requires_grad=True)
    TF.kl_div(torch.tensor(x), tt, reduction="sum").backward()
    dt = dn.tensor(t, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # and no numpy warning on the way
        DF.kl_div(dn.tensor(x), dt, reduction="sum").backward()
    assert np.isnan(tt.grad[0, 0].item()) and dt.grad.numpy()[0, 0] == 0.0
    np.testing.assert_allclose(dt.grad.numpy()[0, 1], tt.grad[0, 1].item(), rtol=1e-12)


def test_kl_div_mean_warns_as_torch():
    x, t = dn.tensor(np.log([[0.5, 0.5]])), dn.tensor([[0.25, 0.75]])
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        DF.kl_div(x, t)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        dnn.KLDivLoss()(x, t)
    with pytest.raises(ValueError, match="kl_div: reduction must be"):
        DF.kl_div(x, t, reduction="avg")
    assert repr(dnn.KLDivLoss(reduction="batchmean")) == "KLDivLoss()" or "batchmean" in repr(
        dnn.KLDivLoss(reduction="batchmean"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("args,shape", [((), (2, 3, 4)), ((0, -1), (2, 3, 4)), ((1, 2), (2, 3, 4, 5)),
                                        ((2,), (2, 3, 4, 5)), ((0, 0), (3, 2))])
def test_flatten(mode, args, shape):
    x = C.draw(np.random.default_rng(2), shape)
    C.check(lambda a: dnn.Flatten(*args)(a), lambda a: torch.nn.Flatten(*args)(a), [x], diff=(0,), mode=mode,
            unknown=[[False] * len(shape)])
    assert repr(dnn.Flatten(*args)) == repr(torch.nn.Flatten(*args))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim,sizes,shape", [(1, (2, 3), (4, 6)), (-1, (2, -1), (3, 8)), (0, (1, 3), (3, 2))])
def test_unflatten(mode, dim, sizes, shape):
    x = C.draw(np.random.default_rng(3), shape)
    C.check(lambda a: dnn.Unflatten(dim, sizes)(a), lambda a: torch.nn.Unflatten(dim, sizes)(a), [x], diff=(0,),
            mode=mode, unknown=[[False] * len(shape)])
    assert repr(dnn.Unflatten(dim, sizes)) == repr(torch.nn.Unflatten(dim, sizes))


def test_unflatten_bad_sizes():
    with pytest.raises(RuntimeError):
        torch.nn.Unflatten(1, (4, 2))(torch.zeros(2, 6))
    with pytest.raises(ValueError, match=r"Unflatten: unflattened_size \(4, 2\) does not multiply to input.shape"):
        dnn.Unflatten(1, (4, 2))(dn.zeros(2, 6))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cls", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_modules(mode, cls, dim):
    x = C.draw(np.random.default_rng(4), (3, 5))
    C.check(lambda a: getattr(dnn, cls)(dim)(a), lambda a: getattr(torch.nn, cls)(dim)(a), [x], diff=(0,),
            mode=mode)
    C.check(lambda a: getattr(dnn, cls)(dim=dim)(a), lambda a: getattr(torch.nn, cls)(dim=dim)(a), [x], diff=(0,),
            mode=mode)
    assert repr(getattr(dnn, cls)(dim)) == repr(getattr(torch.nn, cls)(dim))


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4)])
def test_softmax_module_without_dim_warns_and_chooses_as_torch(shape):
    x = C.draw(np.random.default_rng(5), shape)
    with pytest.warns(UserWarning):
        want = torch.nn.Softmax()(torch.tensor(x)).numpy()
    with pytest.warns(UserWarning, match="implicit dimension choice"):
        got = dnn.Softmax()(dn.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_embedding_sparse_is_accepted_and_gives_the_dense_gradient():
    w = np.random.default_rng(6).standard_normal((5, 3))
    ids = np.array([[0, 2], [2, 4]])
    for sparse in (False, True):
        te = torch.nn.Embedding.from_pretrained(torch.tensor(w), freeze=False, sparse=sparse)
        de = dnn.Embedding.from_pretrained(dn.tensor(w), freeze=False, sparse=sparse)
        assert de.sparse is sparse and de.weight.requires_grad
        te(torch.tensor(ids)).sum().backward()
        de(dn.tensor(ids)).sum().backward()
        tg = te.weight.grad.to_dense() if sparse else te.weight.grad
        np.testing.assert_array_equal(de.weight.grad.numpy(), tg.numpy())
        m = dnn.Embedding(5, 3, sparse=sparse)
        assert m.sparse is sparse
        dn.optim.SGD(m.parameters(), lr=0.1).zero_grad()
    with pytest.raises(TypeError, match="embedding: sparse must be a bool"):
        DF.embedding(dn.tensor(ids), dn.tensor(w), sparse="yes")


# --------------------------------------------------------------------------
# calling habits: keyword names and positional forms torch code uses
# --------------------------------------------------------------------------

def _x(lib, shape=(2, 3, 4), seed=7):
    return lib.tensor(C.draw(np.random.default_rng(seed), shape))


HABITS = {
    "F.cross_entropy(input=, target=)": lambda lib, F: F.cross_entropy(input=_x(lib, (4, 3)),
                                                                         target=lib.tensor([0, 2, 1, 1])),
    "F.nll_loss(input=, target=)": lambda lib, F: F.nll_loss(input=F.log_softmax(_x(lib, (4, 3)), dim=1),
                                                             target=lib.tensor([0, 2, 1, 1])),
    "F.dropout(x, p=, training=False)": lambda lib, F: F.dropout(_x(lib), p=0.3, training=False),
    "F.softmax(input, dim=)": lambda lib, F: F.softmax(_x(lib), dim=1),
    "F.log_softmax(input=, dim=)": lambda lib, F: F.log_softmax(input=_x(lib), dim=-1),
    "F.relu(input=)": lambda lib, F: F.relu(input=_x(lib)),
    "F.linear(input=, weight=, bias=)": lambda lib, F: F.linear(input=_x(lib), weight=_x(lib, (5, 4), 1),
                                                                 bias=_x(lib, (5,), 2)),
    "torch.cat(tensors=, dim=)": lambda lib, F: lib.cat(tensors=[_x(lib), _x(lib, seed=1)], dim=1),
    "torch.cat(list, dim=-1)": lambda lib, F: lib.cat([_x(lib), _x(lib, seed=1)], dim=-1),
    "torch.stack(tensors, dim=)": lambda lib, F: lib.stack([_x(lib), _x(lib, seed=1)], dim=2),
    "torch.matmul(input=, other=)": lambda lib, F: lib.matmul(input=_x(lib), other=_x(lib, (4, 2), 1)),
    "torch.max(a, b)": lambda lib, F: lib.max(_x(lib), _x(lib, seed=1)),
    "torch.min(a, other=b)": lambda lib, F: lib.min(_x(lib), other=_x(lib, seed=1)),
    "x.max(1)": lambda lib, F: tuple(_x(lib).max(1)),
    "x.max(dim=1).values": lambda lib, F: _x(lib).max(dim=1).values,
    "x.min(-1, keepdim=True).indices": lambda lib, F: _x(lib).min(-1, keepdim=True).indices,
    "torch.max(x, 0)[1]": lambda lib, F: lib.max(_x(lib), 0)[1],
    "x.sum(dim=(0, 1))": lambda lib, F: _x(lib).sum(dim=(0, 1)),
    "x.sum(dim=[0, 2], keepdim=True)": lambda lib, F: _x(lib).sum(dim=[0, 2], keepdim=True),
    "torch.sum(input=, dim=)": lambda lib, F: lib.sum(input=_x(lib), dim=1),
    "x.mean(dim=-1)": lambda lib, F: _x(lib).mean(dim=-1),
    "x.mean(1, True)": lambda lib, F: _x(lib).mean(1, True),
    "x.view(-1, 4)": lambda lib, F: _x(lib).view(-1, 4),
    "x.view(6, -1)": lambda lib, F: _x(lib).view(6, -1),
    "x.view_as(y)": lambda lib, F: _x(lib).view_as(_x(lib, (4, 6))),
    "x.reshape_as(y)": lambda lib, F: _x(lib).reshape_as(_x(lib, (24,))),
    "torch.reshape(x, shape=)": lambda lib, F: lib.reshape(_x(lib), shape=(4, 6)),
    "x.transpose(dim0=, dim1=)": lambda lib, F: _x(lib).transpose(dim0=0, dim1=2),
    "torch.transpose(input, 0, 1)": lambda lib, F: lib.transpose(_x(lib), 0, 1),
    "x.permute(2, 0, 1)": lambda lib, F: _x(lib).permute(2, 0, 1),
    "x.permute((2, 0, 1))": lambda lib, F: _x(lib).permute((2, 0, 1)),
    "torch.permute(x, dims=)": lambda lib, F: lib.permute(_x(lib), dims=(1, 2, 0)),
    "x.squeeze(dim=)": lambda lib, F: _x(lib, (2, 1, 3)).squeeze(dim=1),
    "x.squeeze((0, 2))": lambda lib, F: _x(lib, (1, 3, 1, 2)).squeeze((0, 2)),
    "x.unsqueeze(dim=)": lambda lib, F: _x(lib).unsqueeze(dim=-1),
    "x.expand(*sizes)": lambda lib, F: _x(lib, (3, 1)).expand(2, 3, 4),
    "x.expand((sizes))": lambda lib, F: _x(lib, (3, 1)).expand((3, 5)),
    "x.repeat(*sizes)": lambda lib, F: _x(lib, (2, 3)).repeat(2, 1, 2),
    "x.size(dim)": lambda lib, F: lib.tensor([_x(lib).size(1), _x(lib).size(-1), _x(lib).dim(), _x(lib).numel()]),
    "x.tolist()": lambda lib, F: lib.tensor(_x(lib).tolist()),
    "torch.split(tensor, 2, dim=)": lambda lib, F: tuple(lib.split(_x(lib), 2, dim=2)),
    "x.chunk(2, dim=)": lambda lib, F: tuple(_x(lib).chunk(2, dim=1)),
    "torch.clamp(x, min=)": lambda lib, F: lib.clamp(_x(lib), min=-0.5),
    "x.clip(max=)": lambda lib, F: _x(lib).clip(max=0.5),
    "torch.add(x, y, alpha=)": lambda lib, F: lib.add(_x(lib), _x(lib, seed=1), alpha=0.5),
    "torch.where(cond, input=, other=)": lambda lib, F: lib.where(_x(lib) > 0, input=_x(lib), other=_x(lib, seed=1)),
    "torch.argmax(x, dim=, keepdim=)": lambda lib, F: lib.argmax(_x(lib), dim=1, keepdim=True),
    "torch.softmax(x, dim=)": lambda lib, F: lib.softmax(_x(lib), dim=0),
    "torch.flatten(x, start_dim=)": lambda lib, F: lib.flatten(_x(lib), start_dim=1),
    "torch.gather(input, dim, index=)": lambda lib, F: lib.gather(_x(lib, (2, 3)), 1,
                                                               index=lib.tensor([[0, 0], [2, 1]])),
    "torch.std(x, dim=, unbiased=)": lambda lib, F: lib.std(_x(lib), dim=1, unbiased=False),
    "x.var(1, keepdim=True)": lambda lib, F: _x(lib).var(1, keepdim=True),
    "torch.dot(x, y)": lambda lib, F: lib.dot(_x(lib, (5,)), _x(lib, (5,), 1)),
    "torch.mm(input=, mat2=)": lambda lib, F: lib.mm(input=_x(lib, (2, 3)), mat2=_x(lib, (3, 2))),
    "torch.sin(input=)": lambda lib, F: lib.sin(input=_x(lib)),
    "x.cos()": lambda lib, F: _x(lib).cos(),
    "x.new_zeros(sizes)": lambda lib, F: _x(lib).new_zeros(2, 3),
    "x.new(list)": lambda lib, F: _x(lib).new([1, 2, 3]),
    "x.type(torch.LongTensor)": lambda lib, F: _x(lib).type(lib.LongTensor),
    "torch.linspace(start=, end=, steps=)": lambda lib, F: lib.linspace(start=-1, end=2, steps=7),
    "torch.eye(n=, m=)": lambda lib, F: lib.eye(n=2, m=3),
    "torch.arange(start, end, step=)": lambda lib, F: lib.arange(1, 10, step=3),
    "torch.full(size=, fill_value=)": lambda lib, F: lib.full(size=(2, 2), fill_value=1.5),
    "torch.zeros_like(input=, dtype=)": lambda lib, F: lib.zeros_like(input=_x(lib), dtype=lib.int64),
    "torch.tensor(data=)": lambda lib, F: lib.tensor(data=[1.5, 2.0]),
    "torch.as_tensor(data, dtype=)": lambda lib, F: lib.as_tensor([1, 2], dtype=lib.float64),
}


@pytest.mark.parametrize("name", sorted(HABITS))
def test_torch_calling_habits_work_the_same(name):
    want = HABITS[name](torch, TF)
    got = HABITS[name](dn, DF)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.detach().numpy()
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_out_is_a_clear_error():
    x = dn.ones(2)
    for call in (lambda: dn.cat([x, x], out=dn.zeros(4)), lambda: dn.stack([x, x], 0, out=dn.zeros(2, 2)),
                 lambda: dn.sum(x, out=dn.zeros(()))):
        with pytest.raises(TypeError, match="out= is not supported"):
            call()
    with pytest.raises(TypeError, match="cat: got both axis=1 and dim=2"):
        dn.cat([x, x], 2, axis=1)


def test_maxmin_named_tuples():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    for fn in ("max", "min"):
        t, d = getattr(torch.tensor(x), fn)(1), getattr(dn.tensor(x), fn)(1)
        np.testing.assert_array_equal(d.values.numpy(), t.values.numpy())
        np.testing.assert_array_equal(d.indices.numpy(), t.indices.numpy())
        v, i = d
        np.testing.assert_array_equal(i.numpy(), t[1].numpy())
