"""Execution modes as one per-thread interpreter stack (issue 24 section 2):
bind hands every op of a thread to the top interpreter; interpreters compose
through ``bind_below``; static-graph values name their interpreter
themselves; the ops and nn layers ask whether a value is concrete in one
place (:mod:`dynnets.autograd.values`)."""
import threading

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as ds
from dynnets import nn
from dynnets.autograd import engine, ops
from dynnets.autograd.values import as_operand, concrete, is_interpreted, require_concrete

TIMEOUT = 60


class Counting:
    """Counts the ops it sees by name and runs them as below it."""

    def __init__(self):
        self.seen = []

    def bind(self, prim, args, attrs):
        self.seen.append(prim.name)
        return engine.bind_below(self, prim, args, attrs)


def _x():
    return dn.tensor(np.array([[1.0, -2.0], [0.5, 3.0]]), requires_grad=True)


def test_every_bind_path_reaches_the_interpreter_and_eager_resumes_after():
    x = _x()
    w = dn.tensor(np.eye(2), requires_grad=True)
    c = Counting()
    with engine.interpreter(c):
        assert engine.current_interpreter() is c and engine.interpreter_stack() == (c,)
        y = ops.tanh(x @ w + 1.0)                      # bind2 (matmul, add), bind1 (tanh)
        s = y.sum(axis=0)                              # bind with attributes
        h = ops.gru_cell(dn.tensor(np.ones((1, 3))), dn.tensor(np.zeros((1, 2))), dn.tensor(np.ones((6, 3))),
                         dn.tensor(np.ones((6, 2))), dn.tensor(np.zeros(6)), dn.tensor(np.zeros(6)))   # bind_first
        loss = s.sum()
    assert c.seen == ["matmul", "add", "tanh", "sum", "gru_cell", "sum"]
    assert h.shape == (1, 2)
    assert engine.current_interpreter() is None and engine.interpreter_stack() == ()
    # the ops ran eagerly below the interpreter: values and gradients as without it
    loss.backward()
    want = np.tanh(x.numpy() @ np.eye(2) + 1.0)
    np.testing.assert_allclose(y.numpy(), want)
    np.testing.assert_allclose(x.grad.numpy(), (1 - want ** 2) @ np.eye(2).T)
    n = len(c.seen)
    ops.tanh(x)
    assert len(c.seen) == n                            # popped: no longer called


def test_interpreters_compose_through_bind_below():
    outer, inner = Counting(), Counting()
    x = _x()
    with engine.interpreter(outer), engine.interpreter(inner):
        assert engine.interpreter_stack() == (outer, inner)
        ops.exp(x)
    assert inner.seen == ["exp"] and outer.seen == ["exp"]


def test_anomaly_detection_is_an_interpreter_that_composes():
    x = dn.tensor(np.array([1.0, -1.0]))
    c = Counting()
    assert not dn.is_anomaly_enabled()
    with dn.detect_anomaly(), engine.interpreter(c):
        assert dn.is_anomaly_enabled()
        with pytest.raises(dn.AnomalyError, match="op 'log' produced NaN or inf in forward"), \
                np.errstate(invalid="ignore"):
            ops.log(x)                                 # passed down by c, checked by the anomaly interpreter
    assert c.seen == ["log"] and not engine.is_anomaly_enabled()
    # pushed after another interpreter, it still checks what runs eagerly below both
    c2 = Counting()
    with engine.interpreter(c2), dn.detect_anomaly():
        with pytest.raises(dn.AnomalyError, match="op 'log'"), np.errstate(invalid="ignore"):
            ops.log(x)
    assert c2.seen == ["log"]


def test_pop_out_of_order_names_both_interpreters():
    a, b = Counting(), Counting()
    engine.push_interpreter(a)
    engine.push_interpreter(b)
    try:
        with pytest.raises(RuntimeError, match="pop_interpreter: expected Counting at the top .* got Counting"):
            engine.pop_interpreter(a)
    finally:
        engine.pop_interpreter(b)
        engine.pop_interpreter(a)
    assert engine.current_interpreter() is None
    with pytest.raises(RuntimeError, match=r"got nothing \(eager mode\)"):
        engine.pop_interpreter(a)
    with pytest.raises(TypeError, match="push_interpreter: expected an object with a method bind"):
        engine.push_interpreter(object())


def test_the_stack_is_per_thread():
    c = Counting()
    seen = {}

    def other():
        seen["top"] = engine.current_interpreter()
        seen["y"] = ops.tanh(dn.tensor([0.5])).numpy()

    with engine.interpreter(c):
        t = threading.Thread(target=other)
        t.start()
        t.join(TIMEOUT)
        assert engine.current_interpreter() is c
    assert seen["top"] is None and c.seen == []
    np.testing.assert_allclose(seen["y"], np.tanh([0.5]))


def test_static_values_find_their_interpreter_under_any_stack():
    """A graph's value names its interpreter: an op on it builds the graph
    even when another interpreter is on the thread's stack."""
    g = ds.Graph()
    c = Counting()
    with g.as_default(), engine.interpreter(c):
        p = ds.placeholder((None, 2), np.float64)
        y = ops.tanh(p) * 2.0
    assert is_interpreted(y) and not is_interpreted(dn.tensor([1.0]))
    assert engine.current_interpreter() is None
    with ds.Session(g) as sess:
        np.testing.assert_allclose(sess.run(y, {p: np.ones((1, 2))}), 2 * np.tanh(np.ones((1, 2))))


def test_autobatch_is_an_interpreter_on_the_stack():
    x = dn.tensor(np.array([[1.0, 2.0]]), requires_grad=True)
    with dn.autobatch() as ab:
        assert engine.current_interpreter() is ab
        y = ops.tanh(x)
        assert y.numpy().shape == (1, 2)
    assert engine.current_interpreter() is None


def test_values_concrete_or_interpreted():
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder((2,), np.int64)
    t = dn.tensor(np.array([1, 2]))
    assert as_operand(p) is p and concrete(p) is None
    np.testing.assert_array_equal(as_operand(t), [1, 2])
    assert as_operand([1.0, 2.0], np.float32).dtype == np.float32
    np.testing.assert_array_equal(concrete([3, 4]), [3, 4])
    with pytest.raises(TypeError, match="index_add: index must be a concrete tensor"):
        require_concrete("index_add", "index", p)
    with pytest.raises(TypeError, match="equal: input must be a concrete tensor"):
        dn.equal(p, t)


def test_embedding_padding_row_gets_no_gradient_in_a_static_graph():
    """The padding row's gradient is 0 in a static graph as in eager mode
    (before, a graph's embedding skipped the padding mask: the row got the
    gradient of every padding position)."""
    ids = np.array([[0, 2, 0], [1, 0, 4]])
    w0 = np.arange(15.0).reshape(5, 3)
    w = dn.tensor(w0, requires_grad=True)
    out = nn.functional.embedding(dn.tensor(ids), w, padding_idx=0)
    (out * out).sum().backward()
    want = w.grad.numpy()
    assert np.all(want[0] == 0) and np.any(want[1:] != 0)
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder((2, 3), np.int64)
        v = ds.Variable(w0)
        o = nn.functional.embedding(p, v, padding_idx=0)
        (gv,) = ds.gradients(ds.reduce_sum(o * o), [v])
        with ds.Session() as sess:
            sess.run(ds.global_variables_initializer())
            got, val = sess.run([gv, o], {p: ids})
    got = got.to_dense() if hasattr(got, "to_dense") else np.asarray(got)      # a row-sparse gradient
    np.testing.assert_allclose(val, out.numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
