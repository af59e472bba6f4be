"""Static graphs: gradients in their declared dtypes, shape rules with unknown
dimensions, and the checks between a plan and what it is fed."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as ds
from dynnets import nn


def _run(fetches, feed, graph, runs=3):
    with ds.Session(graph) as sess:
        for _ in range(runs):               # tier-1 and tier-2 executors
            out = sess.run(fetches, feed)
    return out


# --------------------------------------------------------------------------
# gradient dtypes
# --------------------------------------------------------------------------

def test_gradient_of_python_base_power_is_float32():
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder((3,), np.float32, name="p")
        (dp,) = ds.gradients(2 ** p, [p])
    assert dp.dtype == np.float32
    r = _run(dp, {p: np.array([0.0, 1.0, 2.0], np.float32)}, g)
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, np.log(2) * 2 ** np.arange(3.0), rtol=1e-6)


@pytest.mark.parametrize("op", ["add", "mul", "concat", "where", "pow"])
def test_mixed_float32_float64_gradients_have_declared_dtypes(op):
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)     # noqa: E731
    f64 = lambda *s: rng.standard_normal(s)                          # noqa: E731
    vals = {
        "add": [f32(2, 3), f64(3)], "mul": [f32(2, 3), f64(2, 3)], "matmul": [f32(2, 3), f64(3, 4)],
        "linear": [f32(2, 3), f64(4, 3), f32(4)], "concat": [f32(2, 3), f64(1, 3)],
        "where": [f32(2, 3), f64(2, 3)], "pow": [np.abs(f32(2, 3)) + 0.5, f64(2, 3)],
        "lstm_cell": [f32(2, 3), f64(2, 2), f32(2, 2), f64(8, 3), f32(8, 2), f64(8), f32(8)],
        "tree_lstm_cell": [f32(2, 2), f64(2, 2), f64(2, 2), f32(2, 2), f64(4, 10), f32(10)],
    }[op]
    cond = rng.random((2, 3)) > 0.5
    g = ds.Graph()
    with g.as_default():
        phs = [ds.placeholder(v.shape, v.dtype, name=f"x{k}") for k, v in enumerate(vals)]
        if op == "concat":
            y = dn.concat(phs, axis=0)
        elif op == "where":
            y = dn.where(cond, *phs)
        elif op in ("lstm_cell", "tree_lstm_cell"):
            y = sum(dn.sum(o) for o in getattr(dn, op)(*phs))
        else:
            y = getattr(dn, op)(*phs)
        grads = ds.gradients(dn.sum(y * 1.5), phs)
    res = _run(grads, dict(zip(phs, vals)), g)
    for v, gv, r in zip(vals, grads, res):
        assert gv.dtype == v.dtype and r.dtype == v.dtype and r.shape == v.shape, (op, v.dtype, gv.dtype, r.dtype)
    # the same values as eager mode, which casts a gradient to its input's dtype on every edge
    ts = [dn.tensor(v, requires_grad=True) for v in vals]
    if op == "concat":
        ey = dn.concat(ts, axis=0)
    elif op == "where":
        ey = dn.where(cond, *ts)
    elif op in ("lstm_cell", "tree_lstm_cell"):
        ey = sum(dn.sum(o) for o in getattr(dn, op)(*ts))
    else:
        ey = getattr(dn, op)(*ts)
    dn.sum(ey * 1.5).backward()
    for t, r in zip(ts, res):
        np.testing.assert_allclose(r, t.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["matmul", "linear", "einsum", "lstm_cell", "tree_lstm_cell"])
def test_products_refuse_mixed_float_dtypes_as_eager_mode(op):
    # torch's (and TF1's tf.matmul) products take operands of one dtype: numpy's
    # promotion to float64 would silently change a float32 model's precision
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)     # noqa: E731
    f64 = lambda *s: rng.standard_normal(s)                          # noqa: E731
    vals = {
        "matmul": [f32(2, 3), f64(3, 4)], "linear": [f32(2, 3), f64(4, 3), f32(4)], "einsum": [f32(2, 3), f64(3, 4)],
        "lstm_cell": [f32(2, 3), f64(2, 2), f32(2, 2), f64(8, 3), f32(8, 2), f64(8), f32(8)],
        "tree_lstm_cell": [f32(2, 2), f64(2, 2), f64(2, 2), f32(2, 2), f64(4, 10), f32(10)],
    }[op]
    call = (lambda *a: dn.einsum("ij,jk->ik", *a)) if op == "einsum" else getattr(dn, op)
    g = ds.Graph()
    with g.as_default():
        phs = [ds.placeholder(v.shape, v.dtype, name=f"x{k}") for k, v in enumerate(vals)]
        with pytest.raises(dn.autograd.primitives.DTypeError, match=f"{op}: expected (operands|inputs) of one dtype"):
            call(*phs)
    with pytest.raises(dn.autograd.primitives.DTypeError, match=f"{op}: expected (operands|inputs) of one dtype"):
        call(*[dn.tensor(v) for v in vals])
    same = [v.astype(np.float32) for v in vals]
    call(*[dn.tensor(v) for v in same])


# --------------------------------------------------------------------------
# unknown dimensions
# --------------------------------------------------------------------------

@pytest.mark.parametrize("make,shape", [
    (lambda q: dn.reshape(q, q.shape[0], 3), (None, 3)),
    (lambda q: dn.unsqueeze(q, 0), (1, None, 3)),
    (lambda q: dn.unsqueeze(q, -1), (None, 3, 1)),
    (lambda q: dn.squeeze(dn.unsqueeze(q, 1), 1), (None, 3)),
    (lambda q: ds.identity(q, name="same"), (None, 3)),
    (lambda q: q.astype(np.float64), (None, 3)),
    (lambda q: ds.identity(dn.unsqueeze(q[None], 0), name="two_unknown"), (1, 1, None, 3)),
])
def test_shape_ops_on_unknown_dims_run(make, shape):
    g = ds.Graph()
    with g.as_default():
        q = ds.placeholder((None, 3), np.float32, name="q")
        y = make(q)
    assert y.shape == shape
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = _run(y, {q: x}, g)
    assert out.shape == tuple(4 if d is None else d for d in shape)
    np.testing.assert_array_equal(out.reshape(4, 3), x)


def test_squeeze_and_unsqueeze_with_several_unknown_dims():
    g = ds.Graph()
    with g.as_default():
        q = ds.placeholder((None, None), np.float32, name="q")
        u = dn.unsqueeze(q, 1)
        s = dn.squeeze(u, 1)
        with pytest.raises(ds.ShapeError, match="squeeze: dimension 0 .* is unknown"):
            dn.squeeze(q, 0)                # (a reshape to (-1,) would merge it with the other one)
        with pytest.raises(ds.ShapeError, match="reshape: at most one dimension"):
            dn.reshape(q, q.shape[0], q.shape[1])
    assert u.shape == (None, 1, None) and s.shape == (None, None)
    out = _run([u, s], {q: np.ones((2, 5), np.float32)}, g)
    assert out[0].shape == (2, 1, 5) and out[1].shape == (2, 5)


@pytest.mark.parametrize("index,shape,run", [
    (slice(1, None), (None, 3), (3, 3)),
    (slice(None, None, 2), (None, 3), (2, 3)),
    (slice(10, 20), (None, 3), (0, 3)),
    ((slice(None), slice(1, None)), (None, 2), (4, 2)),
    ((Ellipsis, 0), (None,), (4,)),
    (np.array([0, 2, 2]), (3, 3), (3, 3)),
    ((slice(None), np.array([[0, 1]])), (None, 1, 2), (4, 1, 2)),
])
def test_getitem_keeps_unknown_dims_unknown(index, shape, run):
    """The rule once computed numpy on a stand-in of size 7919 for each unknown
    dimension: [1:] came out as (7918, 3)."""
    g = ds.Graph()
    with g.as_default():
        q = ds.placeholder((None, 3), np.float32, name="q")
        y = q[index]
    assert y.shape == shape
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = _run(y, {q: x}, g)
    assert out.shape == run
    np.testing.assert_array_equal(out, x[index])


def test_getitem_rule_allocates_nothing_proportional_to_unknown_dims():
    with ds.Graph().as_default():
        q = ds.placeholder((None, None, None), np.float32, name="q")
        tracemalloc.start()
        y = q[np.array([0])]
        z = q[:, np.array([1, 2]), 0]
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert y.shape == (1, None, None) and z.shape == (None, 2)
    assert peak < 1 << 20, f"the shape rule allocated {peak} bytes"      # a stand-in array took ~500 MB


def test_linear_row_bias_rule_and_run_agree():
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((3,), np.float64, name="x")
        y = dn.linear(x, ds.constant(np.ones((2, 3))), ds.constant(np.ones((1, 2))))
    assert y.shape == (1, 2)
    assert _run(y, {x: np.ones(3)}, g).shape == (1, 2)


def test_value_astype_is_cast():
    g = ds.Graph()
    with g.as_default():
        q = ds.placeholder((2,), np.float32, name="q")
        y = q.astype(np.int64)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(_run(y, {q: np.array([1.7, -2.2], np.float32)}, g), [1, -2])


# --------------------------------------------------------------------------
# what a plan is fed
# --------------------------------------------------------------------------

def test_feeds_that_disagree_with_each_other_are_rejected_before_any_kernel():
    """Both placeholders accept any length, but 20000 logits rows and one target
    must not reach the cross-entropy kernel (it read 20000 targets)."""
    g = ds.Graph()
    with g.as_default():
        logits = ds.placeholder((None, 5), np.float64, name="logits")
        targets = ds.placeholder((None,), np.int64, name="targets")
        loss = ds.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    with ds.Session(g) as sess:
        with pytest.raises(ds.ShapeError, match=r"cross_entropy: targets.shape=\(1,\) does not match "
                                                r"logits.shape\[0\]=20000.*with the fed shapes"):
            sess.run(loss, {logits: np.zeros((20000, 5)), targets: np.array([3])})
        with pytest.raises(IndexError, match="cross_entropy: target 7 is out of range for 5 classes"):
            sess.run(loss, {logits: np.zeros((2, 5)), targets: np.array([3, 7])})


def test_feed_of_the_wrong_shape_names_the_placeholder():
    g = ds.Graph()
    with g.as_default():
        h = ds.placeholder((None, 4), np.float32, name="state")
        y = dn.tanh(h)
    with ds.Session(g) as sess:
        with pytest.raises(ds.FeedError, match=r"placeholder 'state' expects shape \(\?, 4\), given a value "
                                               r"of shape \(2, 5\)"):
            sess.run(y, {h: np.zeros((2, 5), np.float32)})


def test_gradient_seed_of_the_wrong_shape_is_rejected():
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((3, 2), np.float64, name="x")
        y, _ = dn.tree_lstm_leaf(x, ds.constant(np.ones((2, 6))), ds.constant(np.ones(6)))
        with pytest.raises(ds.ShapeError, match=r"gradients: grad_ys\[0\].shape=\(5, 2\) does not match "
                                                r"y.shape=\(3, 2\)"):
            ds.gradients(y, [x], grad_ys=[np.ones((5, 2))])


def test_live_parameter_of_another_shape_is_rejected():
    """A traced plan reads Parameters live; one given an array of another shape
    would reach kernels generated for the old one."""
    lin = nn.Linear(3, 2, rng=np.random.default_rng(0))
    step = ds.trace(lambda x: lin(x) * 2.0, params=lin)
    x = np.ones((4, 3), np.float32)
    for _ in range(3):
        step(x)
    lin.weight.data = np.ones((5, 3), np.float32)
    with pytest.raises(ds.ShapeError, match=r"live parameter .* has shape \(5, 3\).*traced for shape \(2, 3\)"):
        step(x)


def test_fused_kernel_checks_its_inputs():
    from dynnets.static import passes
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((64, 64), np.float32, name="a")
        b = ds.placeholder((64, 64), np.float32, name="b")
        y = (a + b) * 2.0 - a
    prog = passes.optimize(g.with_outputs([y]), fuse_min_size=16)
    fused = [e for e in prog.eqns if e.prim.name == "fused"]
    assert fused
    impl = fused[0].prim.impl
    with pytest.raises(ds.ShapeError, match="fused: an input has shape"):
        impl(np.zeros((64, 63), np.float32), np.zeros((64, 64), np.float32), 2.0)
