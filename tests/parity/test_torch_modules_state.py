"""state_dict, containers and optimizer groups as real PyTorch code uses them
(issue 22, part 3), against torch: a state_dict's keys, order and memory,
load_state_dict's strictness and its result, ModuleDict / ParameterList /
ParameterDict, RNNBase.flatten_parameters, Optimizer.add_param_group and
zero_grad's default."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.nn as dnn  # noqa: E402

torch.set_num_threads(1)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def _copy_weights(src, dst):
    """``dst``'s (dynnets) parameters and buffers set to ``src``'s (torch), by name."""
    dst.load_state_dict({k: v.detach().numpy() for k, v in src.state_dict().items()})


def _build(nn):
    """A model with every container and a submodule shared by two parents
    (ttpro1995's output module), written once for both libraries."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.ModuleDict({"a": nn.Linear(3, 4), "b": nn.Sequential(nn.Linear(4, 4), nn.Tanh())})
            self.scales = nn.ParameterList([nn.Parameter(torch_or_dn(nn).ones(4)) for _ in range(2)])
            self.extra = nn.ParameterDict({"shift": nn.Parameter(torch_or_dn(nn).zeros(4))})
            self.head = nn.Linear(4, 2)
            self.inner = nn.Module()
            self.inner.head = self.head
            self.lstm = nn.LSTM(4, 3)

        def forward(self, x):
            h = self.enc["b"](self.enc.a(x)) * self.scales[0] * self.scales[1] + self.extra["shift"]
            out, _ = self.lstm(h.unsqueeze(1))
            return self.head(h) + self.inner.head(h), out
    return Model()


def torch_or_dn(nn):
    return torch if nn is torch.nn else dn


def test_state_dict_keys_order_and_values_as_torchs():
    tm, dm = _build(torch.nn), _build(dnn)
    assert list(dm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in dm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    _copy_weights(tm, dm)                       # the torch state_dict loads unchanged (strict)
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(_np(dm.state_dict()[k]), _np(v), err_msg=k)
    x = np.random.default_rng(0).standard_normal((5, 3))
    tm.double()
    dm.double()
    (ty, tseq), (dy, dseq) = tm(torch.tensor(x)), dm(dn.tensor(x))
    np.testing.assert_allclose(_np(dy), _np(ty), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(dseq), _np(tseq), rtol=1e-12, atol=1e-12)
    (ty.sum() + tseq.sum()).backward()
    (dy.sum() + dseq.sum()).backward()
    for (n, tp), (_, dp) in zip(tm.named_parameters(), dm.named_parameters()):
        np.testing.assert_allclose(_np(dp.grad), _np(tp.grad), rtol=1e-10, atol=1e-12, err_msg=n)


def test_state_dict_values_share_memory_detached():
    for lib, nn in ((torch, torch.nn), (dn, dnn)):
        m = nn.Embedding(3, 2)
        sd = m.state_dict()
        w = sd["weight"]
        assert not w.requires_grad and w.grad_fn is None and w.is_leaf
        w.copy_(lib.zeros(3, 2))                # no error: detached, not recorded
        assert not np.any(_np(m.weight))
        assert m.state_dict(keep_vars=True)["weight"] is m.weight
        assert list(m.state_dict(prefix="emb.")) == ["emb.weight"]


def test_load_state_dict_strictness_and_result_as_torchs():
    for lib, nn in ((torch, torch.nn), (dn, dnn)):
        m = nn.Linear(2, 2)
        good = {k: v.clone() for k, v in m.state_dict().items()}
        res = m.load_state_dict(good)
        assert res.missing_keys == [] and res.unexpected_keys == [] and repr(res) == "<All keys matched successfully>"
        partial = {"weight": lib.zeros(2, 2), "x": lib.zeros(1)}
        with pytest.raises(RuntimeError, match=r'Error\(s\) in loading state_dict for Linear:\n\tMissing key\(s\) '
                                               r'in state_dict: "bias". \n\tUnexpected key\(s\) in state_dict: "x". '):
            m.load_state_dict(partial)
        res = m.load_state_dict(partial, strict=False)
        assert (res.missing_keys, res.unexpected_keys) == (["bias"], ["x"])
        assert repr(res) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['x'])"
        assert not np.any(_np(m.weight))
        with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape .*3, 2.* from "
                                               r"checkpoint, the shape in current model is .*2, 2"):
            m.load_state_dict({"weight": lib.zeros(3, 2), "bias": lib.zeros(2)}, strict=False)
    # arrays load here (torch wants tensors)
    m = dnn.Linear(2, 2)
    m.load_state_dict({"weight": np.ones((2, 2)), "bias": np.ones(2)})
    assert m.weight.dtype == np.float32 and np.all(m.weight.numpy() == 1)


def test_load_state_dict_write_is_seen_by_a_pending_backward():
    """torch's load_state_dict copies under no_grad and bumps the version
    counter: a backward through an op that saved the old weight raises."""
    for lib, nn in ((torch, torch.nn), (dn, dnn)):
        m = nn.Linear(2, 2, bias=False)
        x = lib.ones(1, 2, requires_grad=True)
        y = (m(x) ** 2).sum()                   # pow saves m(x); the matmul saves the weight (for x's grad)
        m.load_state_dict({"weight": lib.zeros(2, 2)})
        with pytest.raises(RuntimeError, match="modified by an inplace operation|in-place"):
            y.backward()


def test_module_dict():
    for nn in (torch.nn, dnn):
        md = nn.ModuleDict(OrderedDict([("b", nn.Linear(2, 2)), ("a", nn.Tanh())]))
        md["c"] = nn.Linear(2, 1)
        md.update([("d", nn.ReLU())])
        assert list(md.keys()) == ["b", "a", "c", "d"] and len(md) == 4 and "c" in md
        assert md.c is md["c"] and list(md) == ["b", "a", "c", "d"]
        assert [n for n, _ in md.named_parameters()] == ["b.weight", "b.bias", "c.weight", "c.bias"]
        popped = md.pop("b")
        assert isinstance(popped, nn.Linear) and list(md.keys()) == ["a", "c", "d"]
        with pytest.raises(KeyError):
            md["a.b"] = nn.Tanh()
        with pytest.raises(KeyError):
            md["zzz"]
        md.clear()
        assert len(md) == 0


def test_parameter_list_and_dict():
    for lib, nn in ((torch, torch.nn), (dn, dnn)):
        pl = nn.ParameterList([nn.Parameter(lib.ones(2)), lib.zeros(3)])   # a plain tensor becomes a Parameter
        pl.append(nn.Parameter(lib.ones(1)))
        assert len(pl) == 3 and all(isinstance(p, nn.Parameter) for p in pl) and pl[-1].shape == (1,)
        assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
        assert pl[1].requires_grad
        pd = nn.ParameterDict({"w": nn.Parameter(lib.ones(2, 2))})
        pd["b"] = lib.zeros(2)
        pd.update({"c": nn.Parameter(lib.ones(1))})
        assert list(pd.keys()) == ["w", "b", "c"] and isinstance(pd["b"], nn.Parameter) and pd.w is pd["w"]
        assert [n for n, _ in pd.named_parameters()] == ["w", "b", "c"]
        assert set(pd.state_dict()) == {"w", "b", "c"}
        del pd["w"]
        assert list(pd) == ["b", "c"]


def test_flatten_parameters_is_a_no_op():
    for nn in (torch.nn, dnn):
        for cls in (nn.LSTM, nn.GRU, nn.RNN):
            m = cls(2, 3)
            before = [_np(p).copy() for p in m.parameters()]
            assert m.flatten_parameters() is None
            assert all(np.array_equal(_np(p), b) for p, b in zip(m.parameters(), before))


def test_add_param_group_and_zero_grad_default():
    rng = np.random.default_rng(1)
    w0, w1 = rng.standard_normal((3, 2)), rng.standard_normal(2)
    runs = {}
    for lib, optim in ((torch, torch.optim), (dn, dn.optim)):
        a, b = lib.tensor(w0, requires_grad=True), lib.tensor(w1, requires_grad=True)
        opt = optim.SGD([a], lr=0.1, momentum=0.9)
        opt.add_param_group({"params": b, "lr": 0.5})
        assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5] and opt.param_groups[1]["momentum"] == 0.9
        with pytest.raises(ValueError):
            opt.add_param_group({"params": [a]})        # already in a group
        for _ in range(3):
            opt.zero_grad()
            assert a.grad is None and b.grad is None    # set_to_none=True by default
            ((a.sum(0) * b).sum() ** 2).backward()
            opt.step()
        opt.zero_grad(set_to_none=False)
        assert np.all(_np(a.grad) == 0) and np.all(_np(b.grad) == 0)
        runs[lib] = (_np(a), _np(b))
    for x, y in zip(runs[dn], runs[torch]):
        np.testing.assert_allclose(x, y, rtol=1e-12)
