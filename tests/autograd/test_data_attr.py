"""``Tensor.data``, ``numpy()`` and ``detach()`` where dynnets has more to say
than torch (torch's behaviour itself is compared in
``tests/parity/test_torch_data_attr.py``): tensors whose value is a numpy
scalar, numpy arrays assigned to ``.data``, lazy tensors of ``autobatch``,
traced Parameters, optimizers whose parameters' arrays change, checkpoints
and state dicts."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn


def test_numpy_is_the_array_itself():
    x = dn.tensor([1.0, 2.0], requires_grad=True)      # torch raises here; the array is given
    a = x.numpy()
    assert type(a) is np.ndarray and a is x.numpy() and a is x.numpy(force=True)
    a[0] = 5.0
    assert x.tolist() == [5.0, 2.0]


def test_data_and_detach_are_new_tensors_on_the_same_array():
    x = dn.tensor([1.0, 2.0], requires_grad=True)
    for d in (x.data, x.detach()):
        assert type(d) is dn.Tensor and d is not x and d.numpy() is x.numpy()
    assert x.data is not x.data                         # a new tensor each time, as torch's
    p = nn.Parameter(np.ones(3, np.float32))
    assert type(p.data) is dn.Tensor and repr(p.data) == "tensor([1., 1., 1.])"


def test_a_reduction_result_shares_its_memory_too():
    """A whole-tensor reduction holds a numpy scalar (immutable); ``.data``,
    ``numpy()`` and ``detach()`` make it an array first, so writes through
    them change the tensor, as torch's."""
    x = dn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = (x * x).sum()
    d = loss.data
    d.fill_(5.0)
    assert loss.item() == 5.0
    a = loss.numpy()
    assert type(a) is np.ndarray and a.shape == ()
    a[()] = 7.0
    assert loss.item() == 7.0 and d.item() == 7.0 and loss.detach().item() == 7.0
    loss.backward()                                     # sum's gradient reads no value
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_an_index_from_a_reduction():
    x = dn.tensor([3.0, 1.0, 5.0, 2.0])
    assert x[x.argmax()].item() == 5.0


def test_assigning_a_numpy_array_shares_it():
    x = dn.zeros(2, 3, requires_grad=True)
    a = np.arange(4.0)
    x.data = a                                          # torch takes tensors only; an array is taken too
    assert x.numpy() is a and x.shape == (4,) and x.requires_grad


@pytest.mark.parametrize("value, match", [
    ([1.0, 2.0], "Tensor .*got list"),
    (np.array(["a", "b"]), "numbers"),
    (np.array([1, 2], dtype=object), "numbers"),
])
def test_assigning_something_else_raises(value, match):
    x = dn.zeros(2)
    with pytest.raises(TypeError, match=match):
        x.data = value


def test_data_of_a_lazy_tensor_runs_it():
    x = dn.tensor([[1.0, 2.0]], dtype=np.float64)
    w = nn.Parameter(np.ones((2, 2)))
    with dn.autobatch() as ab:
        y = x @ w
        d = y.data                                      # forces the pending op
        assert type(d) is dn.Tensor and not d.requires_grad and ab.stats["forces"] == 1
        np.testing.assert_array_equal(d, [[3.0, 3.0]])
        assert d.numpy() is y.numpy()


def test_a_write_through_data_inside_autobatch_raises_naming_it():
    w = nn.Parameter(np.ones((2, 2)))
    x = dn.tensor(np.ones((1, 2)), dtype=np.float64)
    with pytest.raises(RuntimeError, match="not supported inside dn.autobatch"):
        with dn.autobatch():
            x @ w
            w.data[0, 0] = 5.0
    w.data[0, 0] = 5.0
    assert w.numpy()[0, 0] == 5.0


def test_a_trace_reads_the_parameters_current_array():
    import dynnets.static as ds
    lin = nn.Linear(3, 2, dtype=np.float64)
    f = ds.trace(lambda x: lin(x), params=lin)
    x = np.ones((1, 3))
    f(x)
    lin.weight.data = dn.tensor(np.full((2, 3), 2.0))
    lin.bias.data.zero_()
    np.testing.assert_array_equal(np.asarray(f(x)), [[6.0, 6.0]])
    lin.weight.data = dn.tensor(np.ones((4, 3)))
    with pytest.raises(dn.ShapeError, match="shape \\(4, 3\\).*traced for shape \\(2, 3\\)"):
        f(x)


def test_an_optimizer_keeps_working_after_a_change_of_dtype():
    """The state keeps its dtype (torch's Adam raises; nothing is wrong in
    taking the step in the parameter's new dtype)."""
    w = nn.Parameter(np.array([1.0, 2.0], np.float32))
    opt = dn.optim.Adam([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    opt.zero_grad()
    w.data = w.data.double()
    (w * w).sum().backward()
    opt.step()
    assert w.dtype == np.float64 and opt.state[w]["exp_avg"].dtype == np.float32
    assert np.all(w.numpy() < [0.9, 1.9])


def test_a_gradient_of_an_old_shape_raises_at_the_step():
    w = nn.Parameter(np.ones(3))
    opt = dn.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    w.data = dn.ones(5, dtype=np.float64)
    with pytest.raises(RuntimeError, match=r"gradient of a parameter has shape \(3,\), the parameter has shape "
                                           r"\(5,\).*zero_grad"):
        opt.step()


@pytest.mark.parametrize("make", [lambda ps: dn.optim.Adam(ps, lr=0.1), lambda ps: dn.optim.Adagrad(ps, lr=0.1),
                                  lambda ps: dn.optim.RMSprop(ps, lr=0.1), lambda ps: dn.optim.AdamW(ps, lr=0.1),
                                  lambda ps: dn.optim.SGD(ps, lr=0.1, momentum=0.5)])
def test_a_step_raises_at_the_parameter_whose_state_no_longer_fits(make):
    """As torch's step: the parameters before it are updated, it and those
    after it are not (a kernel never runs on arrays of different sizes)."""
    a, b, c = nn.Parameter(np.ones(2)), nn.Parameter(np.ones(3)), nn.Parameter(np.ones(2))
    opt = make([a, b, c])
    ((a * a).sum() + (b * b).sum() + (c * c).sum()).backward()
    opt.step()
    opt.zero_grad()
    b.data = dn.ones(4, dtype=np.float64)
    ((a * a).sum() + (b * b).sum() + (c * c).sum()).backward()
    before = [p.numpy().copy() for p in (a, b, c)]
    with pytest.raises(RuntimeError, match="the state '\\w+' of a parameter has shape \\(3,\\), the parameter now has "
                                           "shape \\(4,\\)"):
        opt.step()
    assert not np.array_equal(a.numpy(), before[0])
    np.testing.assert_array_equal(b.numpy(), before[1])
    np.testing.assert_array_equal(c.numpy(), before[2])


def test_state_dict_and_checkpoints_after_assigning_data():
    lin = nn.Linear(2, 2, dtype=np.float64)
    new = dn.tensor(np.arange(4.0).reshape(2, 2))
    lin.weight.data = new
    sd = lin.state_dict()
    np.testing.assert_array_equal(sd["weight"], new)
    other = nn.Linear(2, 2, dtype=np.float64)
    other.load_state_dict(sd)
    np.testing.assert_array_equal(other.weight.numpy(), new.numpy())
    sd["weight"][0, 0] = 9.0                            # the model loaded a copy
    assert other.weight.numpy()[0, 0] == 0.0
    other.load_state_dict({"weight": dn.ones(2, 2).data, "bias": dn.zeros(2)})
    assert other.weight.numpy().sum() == 4.0


def test_save_and_load_of_data(tmp_path):
    p = nn.Parameter(np.arange(3.0))
    dn.save({"w": p.data, "p": p}, tmp_path / "c.dn")
    got = dn.load(tmp_path / "c.dn")
    assert type(got["w"]) is dn.Tensor and not got["w"].requires_grad
    assert type(got["p"]) is dn.Parameter and got["p"].requires_grad
    np.testing.assert_array_equal(got["w"].numpy(), [0.0, 1.0, 2.0])


def test_init_through_data_fills_the_parameter():
    lin = nn.Linear(4, 3)
    nn.init.constant_(lin.weight.data, 0.5)
    lin.bias.data.uniform_(-0.1, 0.1)
    assert np.all(lin.weight.numpy() == 0.5)
    assert np.all(np.abs(lin.bias.numpy()) <= 0.1) and lin.bias.requires_grad


def test_parameter_of_an_array_is_a_copy():
    a = np.ones(3)
    p = nn.Parameter(a)
    a[0] = 5.0
    assert p.numpy()[0] == 1.0
    q = nn.Parameter(dn.tensor([1, 2]))                 # integers: a float32 copy
    assert q.dtype == np.float32


def test_the_dense_copy_of_a_row_sparse_gradient_is_read_only():
    """The optimizers read an embedding's row-sparse gradient, not the dense
    copy ``p.grad`` gives: changing the copy in place would be lost, so it raises."""
    emb = nn.Embedding(5, 2)
    emb(np.array([1, 2, 1])).sum().backward()
    g = emb.weight.grad
    np.testing.assert_array_equal(g.numpy()[1], [2.0, 2.0])
    with pytest.raises(RuntimeError, match="read-only.*row-sparse gradient"):
        g.data.clamp_(-1.0, 1.0)
    with pytest.raises(ValueError, match="read-only"):
        g.numpy()[0] = 1.0
    emb.weight.grad = np.clip(g.numpy(), -1.0, 1.0)       # replacing it works
    np.testing.assert_array_equal(emb.weight.grad.numpy()[1], [1.0, 1.0])
