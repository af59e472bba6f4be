"""In-place ops on eager tensors (``+=``, ``add_``, ``x[i] = v``...): the same
array object changes, recorded in-place ops take their place in the graph,
and the version counter raises at backward where a recorded value changed
(the comparisons with torch are in ``tests/parity/test_torch_inplace.py``)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf
from dynnets import nn
from dynnets.autograd import backprop, engine
from dynnets.autograd.primitives import PRIMITIVES, DTypeError, ShapeError, defprim


def test_sgd_by_hand_updates_the_parameter_in_place():
    """The issue's case: ``with no_grad(): p -= lr * p.grad`` changed nothing
    (it rebound p); now the parameter's own array changes, so the module and
    an optimizer holding p see it."""
    layer = nn.Linear(3, 1, rng=np.random.default_rng(0))
    x = dn.tensor(np.random.default_rng(1).standard_normal((8, 3)), dtype=dn.float32)
    y = x @ dn.tensor([[1.0], [-2.0], [0.5]])
    arrays = [p.numpy() for p in layer.parameters()]
    losses = []
    for _ in range(50):
        loss = ((layer(x) - y) ** 2).mean()
        losses.append(loss.item())
        for p in layer.parameters():
            p.grad = None
        loss.backward()
        with dn.no_grad():
            for p in layer.parameters():
                p -= 0.1 * p.grad
    assert losses[-1] < 0.1 * losses[0]
    assert all(p.numpy() is a for p, a in zip(layer.parameters(), arrays))
    assert all(p.is_leaf and p.requires_grad for p in layer.parameters())


def test_each_op_changes_the_same_array_and_returns_the_tensor():
    t = dn.tensor([1.0, -2.0, 3.0])
    a = t.numpy()
    assert t.add_(1.0) is t and t.sub_(dn.tensor([1.0, 1.0, 1.0]), alpha=0.5) is t
    assert t.mul_(2.0) is t and t.div_(4.0) is t and t.pow_(2) is t and t.clamp_(max=1.0) is t
    np.testing.assert_allclose(a, [0.5625, 0.5625, 1.0])
    assert t.fill_(2.5) is t and t.copy_(np.array([1.0, 2.0, 3.0])) is t
    t[1:] = 7.0
    t[t.data < 5] += 1.0
    np.testing.assert_allclose(a, [2.0, 7.0, 7.0])
    assert t.zero_() is t and t.numpy() is a and not a.any()


def test_an_element_is_a_view_as_in_torch():
    x = dn.zeros(2, 3)
    e = x[1, 2]
    assert isinstance(e.numpy(), np.ndarray) and e.shape == () and np.shares_memory(e.data, x.data)
    e += 4.0
    x[0, 0] += 1.0
    np.testing.assert_array_equal(x.data, [[1.0, 0.0, 0.0], [0.0, 0.0, 4.0]])


def test_recorded_in_place_ops_take_a_place_in_the_graph():
    x = dn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y += x
    assert y.grad_fn.prim.name == "add" and not y.is_leaf
    y.sum().backward()
    np.testing.assert_allclose(x.grad.data, [3.0, 3.0, 3.0])
    # the item assignment: gradient to x[1], none to y's old value at 0
    x.grad = None
    y = x * 2
    y[0] = x[1]
    (y * dn.tensor([10.0, 1.0, 1.0])).sum().backward()
    np.testing.assert_allclose(x.grad.data, [0.0, 12.0, 2.0])


def test_a_long_loop_of_item_assignments():
    """Rows written one at a time into a buffer (a few hundred writes, each a
    new history of the buffer) give the gradient of the stacked rows."""
    h = dn.tensor([0.5, -1.0], requires_grad=True)
    out = dn.zeros(300, 2, dtype=np.float64)
    for i in range(300):
        out[i] = h * (i % 7)
    (out * out).sum().backward()
    want = 2 * h.data * sum((i % 7) ** 2 for i in range(300))
    np.testing.assert_allclose(h.grad.data, want)


def test_retained_graph_and_a_second_backward():
    x = dn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    a = y
    y += x
    a.sum().backward(retain_graph=True)
    a.sum().backward()
    np.testing.assert_allclose(x.grad.data, [8.0, 8.0])


def test_version_error_names_the_ops_and_leaves_nothing_half_done():
    x = dn.tensor([1.0, 2.0], requires_grad=True)
    y = x.tanh()
    z = y * 2
    y.mul_(0.5)
    with pytest.raises(RuntimeError, match=r"its output .* saved by 'tanh' .* changed by 'mul_'"):
        z.sum().backward()
    assert x.grad is None
    # a node recorded after the write reads the new values: no error
    w = (y * 3).sum()
    with pytest.raises(RuntimeError, match="saved by 'tanh'"):
        w.backward()       # still reaches tanh, whose output changed


def test_version_check_is_free_of_recording_cost():
    """Ordinary nodes carry no version or in-place slot; only a node recorded
    by an in-place op has one."""
    x = dn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(AttributeError):
        y.grad_fn.inplace
    y += 1
    assert y.grad_fn.inplace[0].grad_fn.prim.name == "mul"


def test_leaf_rules():
    p = dn.Parameter(np.ones(3))
    with pytest.raises(RuntimeError, match=r"add_: a leaf Variable that requires grad is being used in an in-place"):
        p += 1
    with pytest.raises(RuntimeError, match="setitem: a leaf Variable"):
        p[0] = 2.0
    np.testing.assert_array_equal(p.data, [1.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        p[1:].zero_()
    with dn.no_grad():
        p[1:].zero_()
    np.testing.assert_array_equal(p.data, [1.0, 0.0, 0.0])


def test_bad_operands_raise_naming_the_op():
    t = dn.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="add_: the tensor's array is read-only"):
        dn.broadcast_to(t, (3, 2)).add_(1.0)
    with pytest.raises(ShapeError, match=r"add_: output with shape \(2,\) doesn't match the broadcast shape \(3, 2\)"):
        t += np.ones((3, 2))
    with pytest.raises(ShapeError, match="setitem: index 5 is invalid"):
        t[5] = 1.0
    with pytest.raises(TypeError, match="clamp_: min must be a real number"):
        t.clamp_(min=dn.tensor(0.0))
    with pytest.raises(ValueError, match="clamp_: at least one of min and max"):
        t.clamp_()
    with pytest.raises(DTypeError, match="setitem: a value that requires grad cannot be written into a tensor "
                                            "of dtype int64"):
        dn.tensor(np.array([1, 2]))[0] = dn.tensor(1.0, requires_grad=True)
    with tf.Graph().as_default():
        v = tf.placeholder((2,))
        with pytest.raises(TypeError, match="add_: cannot write a static-graph value into an eager tensor"):
            t += v
    np.testing.assert_array_equal(t.data, [1.0, 2.0])


def test_inside_autobatch_in_place_ops_raise_naming_autobatch():
    w = dn.tensor([[1.0, 2.0], [3.0, 4.0]])
    x = dn.tensor([[1.0, 1.0]])
    with dn.autobatch():
        y = x @ w
        for f in (lambda: y.add_(1.0), lambda: y.__setitem__(0, 1.0), lambda: w.mul_(2.0)):
            with pytest.raises(RuntimeError, match=r"in-place operations are not supported inside dn.autobatch\(\)"):
                f()
    np.testing.assert_array_equal(y.data, [[4.0, 6.0]])
    with pytest.raises(RuntimeError, match="computed by dn.autobatch"):
        y += 1
    z = y.clone()
    z += 1
    np.testing.assert_array_equal(z.data, [[5.0, 7.0]])


def test_a_view_given_a_history_without_its_base_is_reported_until_written_back():
    out = dn.zeros(2, 3, dtype=np.float64)
    v = dn.tensor([1.0, 2.0], requires_grad=True)
    row = out[0]
    row[1] = v[0] * 3                   # out records nothing: out[0][1] = ... in torch terms
    with pytest.raises(RuntimeError, match="gave a value that requires grad to a view of another tensor's memory"):
        (v * 2).sum().backward()        # any backward: out's later uses cannot be seen
    out[0] = row                        # written back through out: out takes the history
    (out * 2).sum().backward()
    np.testing.assert_allclose(v.grad.data, [6.0, 0.0])
    # an orphan whose memory is freed is forgotten
    t = dn.zeros(3, dtype=np.float64)[1:]
    t += v
    del t
    gc.collect()
    (v * 1).sum().backward()
    assert not backprop._ORPHANS
    # ... and so is one that only a reference cycle still holds, without waiting for the collector
    # (whether backward raises must not depend on when the cyclic collector last ran)
    gc.disable()
    try:
        cyc = [dn.zeros(3, dtype=np.float64)[1:]]
        cyc.append(cyc)
        cyc[0] += v
        del cyc
        assert backprop._ORPHANS
        (v * 1).sum().backward()
        assert not backprop._ORPHANS
    finally:
        gc.enable()


def test_write_logs_are_freed_with_the_memory():
    t = dn.tensor(np.zeros(4))
    t += 1
    key = id(backprop.memory_base(t.numpy()))
    assert key in backprop._WRITES
    del t
    gc.collect()
    assert key not in backprop._WRITES


def test_defprim_checks_vjp_reads():
    with pytest.raises(ValueError, match="vjp_reads= needs one entry per vjp= input"):
        defprim("bad_reads_a", np.negative, lambda x: x, vjp=(lambda g, ins, out: -g,), vjp_reads=((), ()))
    with pytest.raises(ValueError, match="vjp_reads= entries hold input positions and 'out'"):
        defprim("bad_reads_b", np.negative, lambda x: x, vjp=(lambda g, ins, out: -g,), vjp_reads=(("x",),))
    assert "bad_reads_a" not in PRIMITIVES and "bad_reads_b" not in PRIMITIVES
    assert PRIMITIVES["add"].vjp_reads == ((), ()) and PRIMITIVES["exp"].vjp_reads == (("out",),)
