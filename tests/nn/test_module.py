"""Module: registration, dotted names, shared parameters, modes, state_dict."""

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn


class Block(nn.Module):
    def __init__(self, rng):
        super().__init__()
        self.fc = nn.Linear(3, 4, rng=rng)
        self.drop = nn.Dropout(0.5, rng=rng)
        self.scale = nn.Parameter(np.ones(4, dtype=np.float32))
        self.register_buffer("count", np.zeros(2, dtype=np.int64))
        self.not_a_param = dn.tensor([1.0, 2.0])     # a plain Tensor is not registered

    def forward(self, x):
        return self.drop(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self, rng=0):
        super().__init__()
        self.block = Block(rng)
        self.layers = nn.ModuleList([nn.Linear(4, 4, rng=rng), nn.Linear(4, 2, rng=rng)])
        self.head = self.layers[1]                   # the same module reached twice

    def forward(self, x):
        h = self.block(x)
        for m in self.layers:
            h = m(h)
        return h


def test_registration_and_dotted_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["block.scale", "block.fc.weight", "block.fc.bias", "layers.0.weight", "layers.0.bias",
                     "layers.1.weight", "layers.1.bias"]
    assert [n for n, _ in net.named_children()] == ["block", "layers", "head"]
    assert "not_a_param" not in dict(net.block.named_parameters())
    assert [n for n, _ in net.named_buffers()] == ["block.count"]
    assert net.num_parameters() == 4 + 12 + 4 + 16 + 4 + 8 + 2


def test_shared_parameters_listed_once():
    a = nn.Linear(3, 3, rng=0)
    seq = nn.Sequential(a, nn.Tanh(), a)
    assert len(list(seq.parameters())) == 2

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3, rng=0)
            self.out = nn.Linear(3, 5, rng=1)
            self.out.weight = self.emb.weight        # weight tying

    t = Tied()
    params = list(t.parameters())
    assert len(params) == 2                          # tied weight once, plus out.bias
    assert [n for n, _ in t.named_parameters()] == ["emb.weight", "out.bias"]


def test_reassigning_attribute_unregisters():
    net = Net()
    net.block.scale = None
    assert "block.scale" not in dict(net.named_parameters())
    net.block.fc = nn.Identity()
    assert "block.fc.weight" not in dict(net.named_parameters())
    del net.layers
    assert [n for n, _ in net.named_children()] == ["block", "head"]


def test_assign_before_init_is_a_clear_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(2))

    with pytest.raises(AttributeError, match="Module.__init__"):
        Bad()


def test_train_eval_propagate():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    x = np.ones((2, 3), dtype=np.float32)
    np.testing.assert_array_equal(net(x).data, net(x).data)   # dropout is the identity in eval mode
    net.train()
    assert all(m.training for m in net.modules())
    net.block.train(False)
    assert not net.block.drop.training and net.layers.training


def test_zero_grad():
    net = Net()
    x = np.ones((2, 3), dtype=np.float32)
    net(x).sum().backward()
    assert all(p._grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p._grad == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p._grad is None for p in net.parameters())


def test_state_dict_round_trip():
    a, b = Net(rng=1), Net(rng=2)
    sd = a.state_dict()
    # as torch: a module's own parameters, then its buffers, then its children; a submodule reached
    # twice (layers.1 is head too) under every path
    assert list(sd) == ["block.scale", "block.count", "block.fc.weight", "block.fc.bias", "layers.0.weight",
                        "layers.0.bias", "layers.1.weight", "layers.1.bias", "head.weight", "head.bias"]
    assert all(type(v) is dn.Tensor and not v.requires_grad and v.is_leaf for v in sd.values())
    sd = {k: v.clone() for k, v in sd.items()}
    sd["block.count"] = np.array([3, 4])                # arrays load too
    sd["head.weight"] = sd["layers.1.weight"]
    w_before = b.block.fc.weight.numpy()                # the array object optimizers hold
    assert b.load_state_dict(sd) == ([], [])
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v, sd[k])
    assert b.block.fc.weight.numpy() is w_before        # loaded in place
    x = np.ones((2, 3), dtype=np.float32)
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).data, b(x).data)


def test_state_dict_shares_memory_with_the_module():
    """torch: the values are detached tensors on the parameters' memory, so
    ``state_dict()['w'].copy_(x)`` writes the model; keep_vars gives the
    Parameters."""
    net = Net()
    sd = net.state_dict()
    sd["block.fc.weight"].copy_(dn.zeros(4, 3))         # not recorded: no error, no graph
    sd["block.count"].fill_(5)
    assert not np.any(net.block.fc.weight.numpy()) and net.block.count.tolist() == [5, 5]
    assert sd["block.fc.weight"].grad_fn is None and net.block.fc.weight.requires_grad
    kv = net.state_dict(keep_vars=True)
    assert kv["block.fc.weight"] is net.block.fc.weight and kv["head.bias"] is net.layers[1].bias
    assert list(net.state_dict(prefix="m.")) == ["m." + k for k in sd]
    dest = {}
    assert net.block.state_dict(dest, "b.") is dest and list(dest)[0] == "b.scale"   # torch's old positional form


def test_load_state_dict_errors():
    net = Net()
    sd = net.state_dict()
    missing = dict(sd)
    del missing["layers.0.bias"]
    for exc in (RuntimeError, KeyError):
        with pytest.raises(exc, match=r'Error\(s\) in loading state_dict for Net:\n\tMissing key\(s\) in '
                                      r'state_dict: "layers.0.bias". $'):
            net.load_state_dict(missing)
    extra = dict(sd, **{"layers.9.weight": np.zeros(2)})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "layers.9.weight". $'):
        net.load_state_dict(extra)
    both = dict(missing, **{"zzz": np.zeros(1)})
    with pytest.raises(KeyError, match=r'Missing key\(s\) in state_dict: "layers.0.bias". \n\tUnexpected key'
                                       r'\(s\) in state_dict: "zzz". '):
        net.load_state_dict(both)
    res = net.load_state_dict(both, strict=False)
    assert res == (["layers.0.bias"], ["zzz"]) and res.missing_keys == ["layers.0.bias"]
    assert res.unexpected_keys == ["zzz"] and repr(net.load_state_dict(sd)) == "<All keys matched successfully>"

    bad = dict(sd)
    bad["layers.1.weight"] = np.zeros((3, 4), dtype=np.float32)
    bad["block.fc.weight"] = np.full((4, 3), 7.0, dtype=np.float32)
    for exc in (RuntimeError, ValueError):
        with pytest.raises(exc, match=r"size mismatch for layers.1.weight: copying a param with shape \(3, 4\) "
                                      r"from checkpoint, the shape in current model is \(2, 4\)."):
            net.load_state_dict(bad, strict=False)
    # nothing was copied by the failed load
    assert not np.any(net.block.fc.weight.data == 7.0)


def test_sequential_and_modulelist():
    rng = np.random.default_rng(0)
    seq = nn.Sequential(nn.Linear(3, 5, rng=rng), nn.ReLU(), nn.Linear(5, 2, rng=rng), nn.Sigmoid())
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w0, b0 = seq[0].weight.numpy(), seq[0].bias.numpy()
    w2, b2 = seq[2].weight.numpy(), seq[2].bias.numpy()
    expected = 1 / (1 + np.exp(-(np.maximum(x @ w0.T + b0, 0) @ w2.T + b2)))
    np.testing.assert_allclose(seq(x).data, expected, rtol=1e-5, atol=1e-6)
    assert len(seq) == 4 and isinstance(seq[-1], nn.Sigmoid)
    assert isinstance(seq[:2], nn.Sequential) and seq[:2][0] is seq[0]
    with pytest.raises(IndexError, match="out of range for 4 modules"):
        seq[4]
    with pytest.raises(TypeError, match="must be a Module"):
        nn.Sequential(nn.Tanh(), lambda z: z)
    from collections import OrderedDict
    named = nn.Sequential(OrderedDict(enc=nn.Linear(3, 3, rng=0), act=nn.Tanh()))
    assert [n for n, _ in named.named_parameters()] == ["enc.weight", "enc.bias"]

    ml = nn.ModuleList([nn.Linear(2, 2, rng=i) for i in range(3)])
    ml.append(nn.Linear(2, 1, rng=9))
    ml.insert(0, nn.Tanh())
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3", "4"]
    del ml[0]
    assert [n for n, _ in ml.named_parameters()][:2] == ["0.weight", "0.bias"]
    assert len(ml) == 4 and ml[-1].out_features == 1
    with pytest.raises(TypeError, match="must be Modules"):
        ml.append(3)
    with pytest.raises(NotImplementedError):
        ml(1)


# --- dtype conversion, apply, traversal with torch's arguments -------------------------------------

def test_to_converts_parameters_gradients_and_float_buffers_in_place():
    net = Net()
    net.block.register_buffer("scale_buf", np.ones(3, np.float32))
    p0 = net.block.fc.weight
    p0.grad = np.ones(p0.shape, np.float32)
    assert net.to(np.float64) is net
    assert net.block.fc.weight is p0 and p0.dtype == np.float64 and p0.grad.dtype == np.float64
    assert all(p.dtype == np.float64 for p in net.parameters())
    assert net.block.scale_buf.dtype == np.float64 and net.state_dict()["block.scale_buf"].dtype == np.float64
    assert net.block.count.dtype == np.int64                       # integer buffers stay
    out = net(np.ones((2, 3)))
    assert out.dtype == np.float64
    net.float()
    assert all(p.dtype == np.float32 for p in net.parameters()) and net(np.ones((2, 3), np.float32)).dtype == np.float32
    # a row-sparse gradient is converted too
    emb = nn.Embedding(5, 2, rng=0)
    emb(np.array([1, 3, 1])).sum().backward()
    emb.double()
    assert emb.weight.grad.dtype == np.float64 and emb.weight.dtype == np.float64


def test_to_bias_free_layers_keep_the_layer_dtype():
    # the zero bias of a layer without one follows the conversion (no float64 result from a float32 layer)
    for m, x in ((nn.Linear(3, 2, bias=False, rng=0), np.ones((2, 3))),
                 (nn.GRUCell(3, 2, bias=False, rng=0), np.ones((2, 3))),
                 (nn.LSTM(3, 2, bias=False, rng=0), np.ones((4, 2, 3)))):
        m.double()
        out = m(x)
        out = out[0] if isinstance(out, tuple) else out
        assert out.dtype == np.float64
        m.float()
        out = m(x.astype(np.float32))
        out = out[0] if isinstance(out, tuple) else out
        assert out.dtype == np.float32


def test_to_arguments_and_errors():
    net = Net()
    assert net.to("cpu") is net and net.to(device="cpu") is net and net.to("cpu", non_blocking=True) is net
    assert net.to(dn.zeros(1, dtype=np.float64)) is net and net.block.fc.weight.dtype == np.float64
    assert net.to(None, np.float32) is net and net.block.fc.weight.dtype == np.float32
    with pytest.raises(ValueError, match=r"Net.to: device='cuda' is not available: dynnets computes on the CPU only"):
        net.to("cuda")
    with pytest.raises(TypeError, match=r"Net.to: only floating-point dtypes are accepted \(as torch\), got int32"):
        net.to(np.int32)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        net.to(copy=True)
    with pytest.raises(TypeError, match=r"_CellNet.half: LSTMCell \(submodule 'cell'\) computes in float32 or "
                                        r"float64 only"):
        _CellNet().half()
    lin = nn.Linear(3, 2, rng=0).half()
    assert lin(np.ones((1, 3), np.float16)).dtype == np.float16


class _CellNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(2, 2, rng=0)


def test_apply_children_first_then_self():
    net = Net()
    seen = []
    assert net.apply(lambda m: seen.append(m)) is net
    # torch's order: each child's subtree (children first), then the module; a module registered twice
    # under one parent is visited once there
    names = [type(m).__name__ for m in seen]
    assert names == ["Linear", "Dropout", "Block", "Linear", "Linear", "ModuleList", "Linear", "Net"]
    assert seen[-1] is net


def test_named_modules_memo_and_remove_duplicate():
    net = Net()
    once = [n for n, _ in net.named_modules()]
    assert once == ["", "block", "block.fc", "block.drop", "layers", "layers.0", "layers.1"]
    twice = [n for n, _ in net.named_modules(remove_duplicate=False)]
    assert twice == once + ["head"]
    memo = {net.block}
    assert [n for n, _ in net.named_modules(memo)] == ["", "layers", "layers.0", "layers.1"]
    assert len(list(net.named_parameters(remove_duplicate=False))) == len(list(net.named_parameters())) + 2
    assert [b.dtype for b in net.buffers()] == [np.int64]
    with pytest.raises(ValueError, match="persistent=False"):
        net.register_buffer("x", np.zeros(1), persistent=False)


def test_raw_grad_is_the_stored_gradient():
    """Optimizers, zero_grad and clip_grad_norm_ use the public raw_grad:
    the gradient as backward stored it (row-sparse for an embedding), where
    .grad is a dense copy."""
    emb = nn.Embedding(5, 2, rng=0)
    emb(np.array([1, 1, 3])).sum().backward()
    g = emb.weight.raw_grad
    assert isinstance(g, dn.autograd.RowSparse) and sorted(set(g.rows.tolist())) == [1, 3]
    np.testing.assert_array_equal(emb.weight.grad.numpy(), g.to_dense())
    with pytest.raises(dn.autograd.ShapeError, match=r"raw_grad: shape \(2,\) does not match tensor shape \(5, 2\)"):
        emb.weight.raw_grad = np.zeros(2)
    emb.zero_grad(set_to_none=False)
    assert type(emb.weight.raw_grad) is np.ndarray and not emb.weight.raw_grad.any()
    emb.zero_grad()
    assert emb.weight.raw_grad is None and emb.weight.grad is None
