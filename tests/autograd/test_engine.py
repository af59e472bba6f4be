"""The eager engine: graph recording, backward, contexts and error messages."""
from __future__ import annotations

import sys
import weakref

import numpy as np

import dynnets as dn
import pytest

from dynnets.autograd import ops
from dynnets.autograd.backprop import backward
from dynnets.autograd.engine import (AnomalyError, bind, detect_anomaly, enable_grad, is_anomaly_enabled,
                                     is_grad_enabled, no_grad)
from dynnets.autograd.primitives import PRIMITIVES, ShapeError
from dynnets.autograd.tensor import Tensor


def t64(data, rg=True):
    return dn.tensor(data, dtype=np.float64, requires_grad=rg)


# --------------------------------------------------------------------------
# backward: depth, freeing, seeds
# --------------------------------------------------------------------------

def test_backward_through_20000_op_chain_without_recursion():
    limit = sys.getrecursionlimit()
    x = t64(0.5)
    y = x
    for _ in range(10000):
        y = y * 1.0001
        y = y + 0.001
    assert sys.getrecursionlimit() == limit
    y.backward()
    np.testing.assert_allclose(x.grad.item(), 1.0001 ** 10000, rtol=1e-9)


def test_deep_chain_of_nonscalar_ops_frees_graph():
    x = t64(np.ones(3))
    y = x
    for _ in range(20000):
        y = ops.tanh(y) if _ % 2 else y * 0.5
    y.sum().backward()
    assert x.grad.shape == (3,)
    assert y._node.args is None, "backward must release the arrays a node saved"


def test_graph_is_freed_second_backward_raises():
    x = t64([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time.*retain_graph=True"):
        y.backward()


def test_retain_graph_allows_second_backward_and_accumulates():
    x = t64([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


def test_backward_over_freed_shared_subgraph_raises():
    x = t64([1.0, 2.0])
    h = x * 3.0
    a = h.sum()
    b = (h * h).sum()
    a.backward()
    with pytest.raises(RuntimeError, match="already freed"):
        b.backward()


def test_nonscalar_backward_needs_gradient():
    x = t64([1.0, 2.0, 3.0])
    y = x * 2.0
    with pytest.raises(RuntimeError, match=r"only for scalar outputs; got shape \(3,\), pass gradient="):
        y.backward()
    y.backward(gradient=np.array([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, 4.0])


def test_backward_gradient_shape_mismatch_is_shape_error():
    y = t64([1.0, 2.0]) * 2.0
    with pytest.raises(ShapeError, match=r"backward: gradient shape \(3,\) does not match tensor shape \(2,\)"):
        y.backward(gradient=np.ones(3))


def test_backward_on_tensor_without_grad_is_clear_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        (dn.tensor([1.0]) * 2.0).sum().backward()


def test_backward_on_leaf_accumulates_seed():
    x = t64([1.0, 2.0])
    x.backward(gradient=np.array([3.0, 4.0]))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])


def test_gradient_accumulates_across_backward_calls():
    x = t64([1.0, -2.0])
    (x * 3.0).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0 + 2.0, 3.0 - 4.0])
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_diamond_graph_sums_paths():
    x = t64(2.0)
    h = x * x
    y = h * h + h + x      # x^4 + x^2 + x
    y.backward()
    assert x.grad.item() == pytest.approx(4 * 8 + 2 * 2 + 1)


def test_intermediate_tensors_have_no_grad_and_are_released():
    x = t64(np.ones(4))
    h = ops.exp(x)
    ref = weakref.ref(h)
    y = (h * 2.0).sum()
    del h
    assert ref() is not None, "the graph keeps what backward needs"
    y.backward()
    assert ref() is None, "after backward the graph must not keep intermediate tensors alive"
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.e)


# --------------------------------------------------------------------------
# contexts
# --------------------------------------------------------------------------

def test_no_grad_records_nothing():
    x = t64([1.0, 2.0])
    with no_grad():
        assert not is_grad_enabled()
        y = (x * 2.0).sum()
        with enable_grad():
            z = (x * 2.0).sum()
    assert is_grad_enabled()
    assert y._node is None and not y.requires_grad
    assert z.requires_grad and z._node is not None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_no_grad_restores_on_exception():
    with pytest.raises(KeyError):
        with no_grad():
            raise KeyError("x")
    assert is_grad_enabled()


def test_detach_cuts_graph():
    x = t64([1.0, 2.0])
    d = x.detach()
    assert d.numpy() is x.numpy() and not d.requires_grad and d._node is None
    (x * 2.0 + (x * x).detach() * 5.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_requires_grad_propagates_only_from_inputs_that_need_it():
    a = dn.tensor([1.0, 2.0])
    b = dn.tensor([3.0, 4.0], requires_grad=True)
    assert not (a * 2.0).requires_grad and (a * 2.0)._node is None
    c = a * b
    assert c.requires_grad
    c.sum().backward()
    assert a.grad is None
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 2.0])


def test_detect_anomaly_forward_names_op():
    x = t64([1.0, -1.0])
    with np.errstate(invalid="ignore"):
        y = ops.log(x)                           # NaN, silently, outside the context
        assert np.isnan(y.data[1])
        with detect_anomaly():
            with pytest.raises(AnomalyError, match="op 'log' produced NaN or inf in forward"):
                ops.log(x)
    assert not is_anomaly_enabled()


def test_detect_anomaly_backward_names_op():
    x = t64([0.0, 4.0])
    with np.errstate(divide="ignore"):
        y = ops.sqrt(x).sum()
        with detect_anomaly():
            with pytest.raises(AnomalyError, match="op 'sqrt' produced NaN or inf in backward"):
                y.backward()
        z = ops.sqrt(x).sum()
        z.backward()                              # without the context: inf, no error
    assert np.isinf(x.grad.data[0])


# --------------------------------------------------------------------------
# broadcasting, indexing, dtypes
# --------------------------------------------------------------------------

def test_broadcasting_gradients_sum_back_to_input_shapes():
    x = t64(np.ones((3, 1)))
    y = t64(np.ones(4))
    s = t64(2.0)
    (x * y * s).sum().backward()
    assert x.grad.shape == (3, 1) and y.grad.shape == (4,) and s.grad.shape == ()
    np.testing.assert_allclose(x.grad.numpy(), 8.0)
    np.testing.assert_allclose(y.grad.numpy(), 6.0)
    assert s.grad.item() == 12.0


def test_integer_array_gather_with_repeats():
    x = t64([10.0, 20.0, 30.0])
    x[np.array([0, 0, 2, 0])].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 0.0, 1.0])
    w = t64(np.arange(6.0).reshape(3, 2))
    out = ops.take(w, [2, 2, 1])
    np.testing.assert_allclose(out.numpy(), [[4, 5], [4, 5], [2, 3]])
    (out * dn.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], dtype=np.float64)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[0, 0], [3, 3], [3, 3]])
    y = t64([1.0, 2.0])
    y[[1, 1]].sum().backward()                   # a Python list is an integer-array index
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 2.0])


@pytest.mark.parametrize("expr", [
    lambda x: x * 2.0, lambda x: 2.0 * x, lambda x: x + 1, lambda x: 1 - x, lambda x: x / 3.0,
    lambda x: 3.0 / (x + 5.0), lambda x: x ** 2, lambda x: 2.0 ** x, lambda x: -x, lambda x: ops.maximum(x, 0.0),
    lambda x: ops.where(np.array([True, False]), x, 0.0), lambda x: ops.clip(x, -0.5, 0.5) * 1.5,
])
def test_float32_preserved_with_python_scalars(expr):
    x = dn.tensor([0.5, -0.25], requires_grad=True)
    assert x.dtype == np.float32
    y = expr(x)
    assert y.dtype == np.float32, f"forward promoted to {y.dtype}"
    y.sum().backward()
    assert x.grad.dtype == np.float32, f"gradient promoted to {x.grad.dtype}"


def test_float32_preserved_through_network_ops():
    rng = np.random.default_rng(0)
    x = dn.randn(2, 3, rng=rng)
    w = dn.randn(4, 3, rng=rng, requires_grad=True)
    b = dn.zeros(4, requires_grad=True)
    h = ops.tanh(ops.linear(x, w, b)) * 0.5
    loss = ops.cross_entropy(ops.log_softmax(h), np.array([0, 3])) + ops.mean(h ** 2) * 0.1
    assert loss.dtype == np.float32
    loss.backward()
    assert w.grad.dtype == np.float32 and b.grad.dtype == np.float32


def test_numpy_array_on_the_left_defers_to_tensor():
    x = t64([1.0, 2.0])
    y = np.array([3.0, 4.0]) * x
    assert isinstance(y, Tensor)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])


def test_multiple_results_with_unused_output():
    rng = np.random.default_rng(0)
    B, I, H = 2, 3, 2
    x = dn.tensor(rng.standard_normal((B, I)), dtype=np.float64, requires_grad=True)
    h = dn.tensor(np.zeros((B, H)), dtype=np.float64)
    c = dn.tensor(np.zeros((B, H)), dtype=np.float64)
    ws = [dn.tensor(rng.standard_normal(s), dtype=np.float64, requires_grad=True)
          for s in [(4 * H, I), (4 * H, H), (4 * H,), (4 * H,)]]
    h2, c2 = ops.lstm_cell(x, h, c, *ws)
    h2.sum().backward()                            # c2 unused: its gradient is zero
    assert x.grad.shape == (B, I) and ws[0].grad.shape == (4 * H, I)
    assert h.grad is None


def test_forward_error_is_explained_by_shape_rule():
    with pytest.raises(ShapeError, match="add: shapes cannot be broadcast together: x.shape=\\(2,\\), y.shape=\\(3,\\)"):
        dn.tensor([1.0, 2.0]) + dn.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ShapeError, match=r"^getitem: index 7 is invalid"):
        dn.tensor([1.0, 2.0])[7]


def test_symbolic_interpreter_found_from_arguments():
    """A value whose class names an interpreter (``__dynnets_interpreter__``,
    as a static graph's values do) sends every op applied to it there, in
    any thread and whatever the thread's interpreter stack."""
    seen = []

    class Rec:
        def bind(self, prim, args, attrs):
            seen.append((prim.name, len(args), attrs))
            return "graph-node"

    class Sym:
        __dynnets_interpreter__ = Rec()

    out = bind(PRIMITIVES["add"], dn.tensor([1.0]), Sym())
    out2 = bind(PRIMITIVES["sum"], Sym(), axis=0)
    assert out == "graph-node" and out2 == "graph-node"
    assert seen == [("add", 2, {}), ("sum", 1, {"axis": 0})]


def test_backward_function_matches_method():
    x = t64([1.0, 2.0])
    backward((x * x).sum())
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_random_dag_with_shared_subexpressions_matches_finite_differences():
    """Backward processes nodes in reverse creation order from a heap; a random
    DAG whose nodes reuse earlier results in any order checks that every node
    has all its gradient before it passes it on."""
    from dynnets.autograd.gradcheck import gradcheck

    rng = np.random.default_rng(11)
    plan = []
    for k in range(25):
        op = rng.choice(["add", "mul", "tanh", "sub", "sum-keep"])
        plan.append((op, int(rng.integers(0, k + 2)), int(rng.integers(0, k + 2))))

    def f(a, b):
        vals = [a, b]
        for op, i, j in plan:
            x, y = vals[i], vals[j]
            if op == "add":
                vals.append(x + y)
            elif op == "mul":
                vals.append(ops.tanh(x * y))
            elif op == "tanh":
                vals.append(ops.tanh(x))
            elif op == "sub":
                vals.append(x - 0.5 * y)
            else:
                vals.append(ops.sum(x, axis=1, keepdims=True) * 0.3 + y)
        return vals[-1] + vals[len(vals) // 2]

    gradcheck(f, [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))])


def test_scalar_backward_gives_each_leaf_its_own_writable_grad():
    # backward seeds a scalar root with one shared read-only 1 per dtype; a
    # leaf whose gradient is that 1 itself (add's VJP passes g through) must
    # get a copy, or updating .grad in place would change every later seed
    x = dn.tensor(2.0, requires_grad=True)
    y = dn.tensor(3.0, requires_grad=True)
    (x + y).backward()
    assert x._grad is not y._grad
    x._grad += 5.0
    y._grad *= 0.0
    x.grad = None
    y.grad = None
    (x + y).backward()
    assert float(x.grad) == 1.0 and float(y.grad) == 1.0
    x.grad = None
    x.backward()                      # a leaf root: its gradient is the seed
    x._grad += 1.0
    x.grad = None
    (x * 1.0).backward()
    assert float(x.grad) == 1.0
