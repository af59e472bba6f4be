"""Eager input checks: every application runs its primitive's shape rule (once
per input signature), value checks run on every call, and the faults these
checks close stay closed. The property-based sweep over the whole table is
``test_safety.py``; these are the named cases."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd import engine, ops
from dynnets.autograd.primitives import PRIMITIVES, DTypeError, IndexRangeError, ShapeError


def t64(a, rg=False):
    return dn.tensor(np.asarray(a, dtype=np.float64), dtype=np.float64, requires_grad=rg)


class _Counting:
    """Counts the calls of a primitive's shape rule (the cache is emptied)."""

    def __init__(self, prim):
        self.prim, self.n, self.rule = prim, 0, prim.shape

    def __enter__(self):
        def rule(*a, **k):
            self.n += 1
            return self.rule(*a, **k)
        self.prim.shape = rule
        self.prim.checked.clear()
        return self

    def __exit__(self, *exc):
        self.prim.shape = self.rule
        self.prim.checked.clear()


# --------------------------------------------------------------------------
# the cached check
# --------------------------------------------------------------------------

def test_rule_runs_once_per_signature():
    x, y = t64(np.ones((2, 3))), t64(np.ones(3))
    with _Counting(PRIMITIVES["add"]) as c:
        for _ in range(5):
            x + y
        assert c.n == 1
        x + t64(np.ones((2, 3)))                 # another shape: checked
        x + x.numpy().astype(np.float32)            # another dtype: checked
        assert c.n == 3
        for v in (1.0, 2.5, -3.0, 7.0):          # Python scalars count by type, not value
            x + v
        x + 2
        assert c.n == 5 and len(PRIMITIVES["add"].checked) == 5


def test_attributes_are_part_of_the_signature():
    x = t64(np.ones((2, 3)))
    with _Counting(PRIMITIVES["sum"]) as c:
        ops.sum(x, axis=0)
        ops.sum(x, axis=0)
        ops.sum(x, axis=1)
        assert c.n == 2
        with pytest.raises(ShapeError, match="sum: axis 2 is out of range"):
            ops.sum(x, axis=2)
        with pytest.raises(ShapeError, match="sum: axis 2 is out of range"):
            ops.sum(x, axis=2)               # a failed check is not cached as passed
    with _Counting(PRIMITIVES["getitem"]) as c:
        for _ in range(3):
            x[:, 1:]                          # slices: hashed through getitem's attr_key
        assert c.n == 1
        x[np.array([0, 1])]
        x[np.array([0, 1])]                   # an array index cannot be hashed: checked every time
        assert c.n == 3
        with pytest.raises(IndexError, match="getitem: index 5 is out of bounds"):
            x[np.array([5])]                  # and its values are numpy's to check, naming the op


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(engine, "_CHECKED_MAX", 8)
    prim = PRIMITIVES["tanh"]
    prim.checked.clear()
    for n in range(1, 30):
        ops.tanh(t64(np.ones(n)))
        assert len(prim.checked) <= 8
    prim.checked.clear()


def test_value_checks_run_on_every_call():
    w = t64(np.ones((4, 3)), rg=True)
    dn.embedding(w, np.array([3]))
    for bad in ([-1], [4]):
        with pytest.raises(IndexError, match=r"embedding: id -?\d is out of range for 4 embeddings"):
            dn.embedding(w, np.array(bad))       # same signature as the good call
    logits = t64(np.zeros((2, 3)))
    dn.cross_entropy(logits, np.array([0, 2]))
    with pytest.raises(IndexRangeError, match="cross_entropy: target 3 is out of range for 3 classes"):
        dn.cross_entropy(logits, np.array([0, 3]))


def test_rule_failing_on_unforeseen_input_names_the_op():
    # the linear rule indexes x.shape[-1]; a 0-d x is rejected by name, not with an IndexError
    with pytest.raises(ShapeError, match="linear: x must have at least one dimension"):
        ops.linear(t64(1.0), t64(np.ones((2, 1))), t64(np.ones(2)))
    with pytest.raises(DTypeError, match="sum: axis must be an integer"):
        ops.sum(t64(np.ones(3)), axis=1.0)


# --------------------------------------------------------------------------
# the faults (issue: eager mode skipped the checks, kernels read out of bounds)
# --------------------------------------------------------------------------

def test_cross_entropy_target_mismatch_cannot_crash():
    """20000 rows and one target segfaulted the interpreter; run it in a child
    so that a regression fails this test instead of killing the run."""
    code = textwrap.dedent("""
        import numpy as np, dynnets as dn
        rng = np.random.default_rng(0)
        try:
            dn.cross_entropy(dn.tensor(rng.standard_normal((20000, 5))), np.array([3]))
        except dn.ShapeError as e:
            print("REJECTED", e)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "REJECTED cross_entropy: targets.shape=(1,) does not match logits.shape[0]=20000" in proc.stdout


@pytest.mark.parametrize("targets,msg", [
    (np.array([3]), r"targets.shape=\(1,\) does not match logits.shape\[0\]=2"),
    (np.array([3, 1, 2]), r"targets.shape=\(3,\) does not match logits.shape\[0\]=2"),
    (np.array([[3], [1]]), r"targets.shape=\(2, 1\) does not match"),
    (3, r"targets.shape=\(\) does not match"),
])
def test_cross_entropy_target_shape(targets, msg):
    logits = t64(np.zeros((2, 5)), rg=True)
    with pytest.raises(ShapeError, match="cross_entropy: " + msg):
        dn.cross_entropy(logits, targets)


def test_cross_entropy_mask_dtype_and_reduction():
    logits = t64(np.zeros((2, 5)))
    with pytest.raises(ShapeError, match=r"cross_entropy: mask.shape=\(3,\) does not match targets.shape=\(2,\)"):
        dn.cross_entropy(logits, np.array([3, 1]), mask=np.ones(3))
    for t in (np.array([3.7, 0.9]), np.array([True, False])):
        with pytest.raises(TypeError, match="cross_entropy: targets must be integer class indices"):
            dn.cross_entropy(logits, t)             # not truncated to a class
    with pytest.raises(ShapeError, match="cross_entropy: reduction must be 'mean', 'sum' or 'none', got 'bogus'"):
        dn.cross_entropy(logits, np.array([3, 1]), reduction="bogus")


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "cross_entropy"])
def test_integer_logits_are_a_type_error(op):
    # PyTorch refuses integer input to softmax (not implemented for 'Long'); integer
    # arithmetic gave [[0, 0, 0]] and a loss of 0
    x = dn.tensor(np.array([[1, 2, 3]]))
    with pytest.raises(TypeError, match=f"{op}: .*(floating-point|float32 or float64).*int64"):
        if op == "cross_entropy":
            dn.cross_entropy(x, np.array([0]))
        else:
            getattr(dn, op)(x)


def test_embedding_rejects_negative_ids_instead_of_wrapping():
    w = t64(np.arange(12.0).reshape(4, 3))
    with pytest.raises(IndexError, match=r"embedding: id -1 is out of range for 4 embeddings"):
        dn.embedding(w, [-1])
    with pytest.raises(IndexError, match=r"embedding: id 4 is out of range"):
        dn.embedding(w, np.array([[0, 4]], dtype=np.int32))
    np.testing.assert_array_equal(dn.embedding(w, 2).data, [6.0, 7.0, 8.0])      # a scalar id is fine


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bx,bh", [(1, 2), (2, 1)])
def test_cells_reject_batch_mismatch(cell, bx, bh):
    """x of batch 1 with h of batch 2 gave a garbage row; batch 2 with 1 dropped one."""
    rng = np.random.default_rng(0)
    m = (nn.GRUCell if cell == "gru" else nn.LSTMCell)(3, 4, rng=rng)
    x, h = dn.tensor(rng.standard_normal((bx, 3)), dtype=np.float32), dn.tensor(rng.standard_normal((bh, 4)), dtype=np.float32)
    with pytest.raises(ShapeError, match=rf"{cell}_cell: h.shape=\({bh}, 4\) should be \({bx}, 4\)"):
        m(x, h) if cell == "gru" else m(x, (h, dn.tensor(rng.standard_normal((bh, 4)), dtype=np.float32)))


def test_lstm_and_tree_cell_state_mismatch():
    rng = np.random.default_rng(0)
    m = nn.LSTMCell(3, 4, rng=rng)
    x, h = dn.tensor(rng.standard_normal((2, 3)), dtype=np.float32), dn.tensor(rng.standard_normal((2, 4)), dtype=np.float32)
    with pytest.raises(ShapeError, match=r"lstm_cell: c.shape=\(1, 4\) should be \(2, 4\)"):
        m(x, (h, dn.tensor(rng.standard_normal((1, 4)), dtype=np.float32)))
    s = [dn.tensor(rng.standard_normal((2, 2)), dtype=np.float32) for _ in range(4)]
    s[2] = dn.tensor(rng.standard_normal((1, 2)), dtype=np.float32)
    with pytest.raises(ShapeError, match=r"tree_lstm_cell: c_l.shape=\(1, 2\) does not match h_l.shape=\(2, 2\)"):
        dn.tree_lstm_cell(*s, dn.randn(4, 10), dn.randn(10))


def test_pow_zero_exponent_gradient_is_zero_at_zero():
    """PyTorch: d/dx x**0 = 0 everywhere, also at x = 0 (0 * inf gave NaN)."""
    x = t64([0.0, 2.0, -1.0], rg=True)
    (x ** 0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])
    x = t64([0.0, 0.0, 3.0], rg=True)
    y = t64([0.0, 2.0, 0.0], rg=True)
    (x ** y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])
    # exponent gradient: 0 at x == 0 for y >= 0, log(x) * x**y elsewhere
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 0.0, np.log(3.0)])


def test_pow_exponent_gradient_keeps_the_dtype_with_a_python_base():
    """np.log of a Python base is a float64 scalar, which promoted float32
    gradients (static graphs declared float32 and returned float64)."""
    vjp_y = PRIMITIVES["pow"].vjps[1]
    p = np.array([1.0, 2.0], np.float32)
    out = 2 ** p
    g = vjp_y(np.ones(2, np.float32), (2, p), out)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.log(2) * out, rtol=1e-6)


def test_linear_one_dim_x_with_row_bias_agrees_with_its_rule():
    """As PyTorch: x (in,) @ w.T + b (1, out) broadcasts to (1, out)."""
    x, w, b = t64(np.ones(3), rg=True), t64(np.ones((2, 3)), rg=True), t64(np.ones((1, 2)), rg=True)
    out = ops.linear(x, w, b)
    assert out.shape == (1, 2)
    from dynnets.autograd.primitives import check_shapes
    assert check_shapes(PRIMITIVES["linear"], [x.data, w.data, b.data], {}).shape == (1, 2)
    out.sum().backward()
    assert x.grad.shape == (3,) and b.grad.shape == (1, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_without_bias(dtype):
    """As torch.nn.functional.linear(x, w) / bias=None: x @ w.T, in x's dtype,
    eager and static."""
    import dynnets.static as ds
    rng = np.random.default_rng(0)
    x, w, g = (rng.standard_normal(s).astype(dtype) for s in ((5, 3), (2, 3), (5, 2)))
    tx, tw = dn.tensor(x, requires_grad=True), dn.tensor(w, requires_grad=True)
    for out in (ops.linear(tx, tw), ops.linear(tx, tw, None)):
        assert out.dtype == dtype
        np.testing.assert_allclose(out.data, x @ w.T, rtol=1e-6)
    (ops.linear(tx, tw) * g).sum().backward()
    np.testing.assert_allclose(tx.grad.data, g @ w, rtol=1e-6)
    np.testing.assert_allclose(tw.grad.data, g.T @ x, rtol=1e-6)
    graph = ds.Graph()
    with graph.as_default():
        px, pw = ds.placeholder((None, 3), dtype), ds.placeholder((2, 3), dtype)
        y = ops.linear(px, pw)
        assert y.shape == (None, 2) and y.dtype == dtype
        with ds.Session(graph) as sess:
            np.testing.assert_allclose(sess.run(y, {px: x[0:1], pw: w}), x[0:1] @ w.T, rtol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_gradients_at_nan_as_pytorch():
    """PyTorch's conventions where an input is NaN: relu passes the gradient
    (threshold_backward zeroes only x <= 0), and maximum/minimum give the
    whole gradient to both inputs (ties still split it)."""
    nan = np.nan
    x = t64(np.array([nan, 1.0, -1.0, 0.0]), rg=True)
    ops.sum(ops.relu(x)).backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0, 0.0, 0.0])
    for op, a_wins in ((ops.maximum, [1.0, 1.0, 1.0, 0.5, 1.0]), (ops.minimum, [1.0, 1.0, 0.0, 0.5, 1.0])):
        a = t64(np.array([1.0, nan, 2.0, 2.0, nan]), rg=True)
        b = t64(np.array([nan, 2.0, 1.0, 2.0, nan]), rg=True)
        ops.sum(op(a, b)).backward()
        np.testing.assert_array_equal(a.grad.data, a_wins)
        np.testing.assert_array_equal(b.grad.data, [1.0, 1.0, 1.0 - a_wins[2], 0.5, 1.0])


def test_mixed_dtype_gradients_take_each_inputs_dtype():
    """A gradient has its input's dtype on every edge, as in PyTorch: the
    gradient reaching the float32 ``h`` is rounded to float32 before the
    float32 ``mul`` node's VJP, not only at the leaf."""
    a0 = np.array([[1.0, 2.0, 3.0]], np.float32)
    w0 = np.array([[0.1, 1 / 3, 0.9]])
    a = dn.tensor(a0, requires_grad=True)
    w = t64(w0, rg=True)
    h = a * 3.1
    (h * w).sum().backward()                                        # promoted to float64, as torch
    gh = w0                                                         # float64 gradient of h
    per_edge = gh.astype(np.float32) * np.float32(3.1)
    at_leaf = (gh * np.float32(3.1)).astype(np.float32)
    assert not np.array_equal(per_edge, at_leaf)                    # the values tell the two apart
    assert a.grad.dtype == np.float32 and w.grad.dtype == np.float64
    np.testing.assert_array_equal(a.grad.numpy(), per_edge)


def test_mixed_dtype_cells_are_refused_and_kernels_run_in_one_dtype():
    from numba import types

    from dynnets.autograd import kernels_tree as kernels
    from dynnets.autograd.primitives import DTypeError
    rng = np.random.default_rng(0)
    x = dn.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    h = t64(rng.standard_normal((2, 4)))
    c = dn.tensor(rng.standard_normal((2, 4)).astype(np.float32))
    ws = [t64(rng.standard_normal(s), rg=True) for s in [(16, 3), (16, 4), (16,), (16,)]]
    # torch refuses float32 with float64 in its cells; numpy would promote silently
    with pytest.raises(DTypeError, match=r"lstm_cell: expected inputs of one dtype, got x.dtype=float32, "
                                         r"h.dtype=float64"):
        ops.lstm_cell(x, h, c, *ws)
    h2, c2 = ops.lstm_cell(x.double(), h, c.double(), *ws)
    assert h2.dtype == np.float64
    (h2.sum() + c2.sum()).backward()
    assert x.grad.dtype == np.float32 and ws[0].grad.dtype == np.float64
    for k in (kernels.lstm_cell_fwd, kernels.lstm_cell_bwd):
        for sig in k.signatures:                # the kernels were compiled for one float dtype per call
            assert len({str(t.dtype) for t in sig if isinstance(t, types.Array)}) == 1, sig


def test_softmax_of_an_empty_axis():
    for f in (dn.softmax, dn.log_softmax):
        assert f(t64(np.zeros((3, 0)))).shape == (3, 0)     # the kernel read row[0] of an empty row


def test_level_schedules_are_checked_again_in_backward():
    """The kernels index with the schedule unchecked; an index array changed
    in place after the forward is caught before the backward's kernels run
    (in a child: without the check this reads and writes out of bounds)."""
    code = textwrap.dedent("""
        import numpy as np, dynnets as dn
        from dynnets.autograd.ops import tree_lstm_levels
        rng = np.random.default_rng(0)
        t = lambda *s, rg=False: dn.tensor(rng.standard_normal(s), dtype=np.float64, requires_grad=rg)
        h0, c0, w, b = t(3, 2, rg=True), t(3, 2), t(4, 10, rg=True), t(10, rg=True)
        left, right, offsets = np.array([0, 3]), np.array([1, 2]), np.array([0, 3, 4, 5])
        h, _ = tree_lstm_levels(h0, c0, w, b, left, right, offsets)
        left[1] = 10 ** 6
        try:
            h.sum().backward()
        except IndexError as e:
            print("REJECTED", e)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "REJECTED tree_lstm_levels: left[1]=1000000 is not a node of an earlier level" in proc.stdout


def test_squeeze_follows_pytorch():
    x = t64(np.ones((2, 1, 3)), rg=True)
    assert dn.squeeze(x, 1).shape == (2, 3) and dn.squeeze(x, -2).shape == (2, 3)
    assert dn.squeeze(x, 0).shape == (2, 1, 3)          # a dimension of another size stays (torch.squeeze)
    dn.squeeze(x, 0).sum().backward()
    assert x.grad.shape == (2, 1, 3)
    with pytest.raises(ShapeError, match="squeeze: axis 3 is out of range"):
        dn.squeeze(x, 3)


# a forest of two binary trees, ((a b) c) and (d e): leaves 0-4, level 1 = {5: (0, 1), 6: (3, 4)}, level 2 = {7: (5, 2)}
_LEFT, _RIGHT, _OFFSETS = np.array([0, 3, 5]), np.array([1, 4, 2]), np.array([0, 5, 7, 8])


@pytest.mark.parametrize("bad,where,msg", [
    ((1, 5), "left", r"left\[1\]=5 is not a node of an earlier level than its parent \(whose level starts at node 5\)"),
    ((2, 7), "right", r"right\[2\]=7 is not a node of an earlier level than its parent \(whose level starts at node 7\)"),
    ((0, -1), "left", r"left\[0\]=-1 is not a node of an earlier level"),
    ((1, 6), "left", r"left\[1\]=6 is not a node of an earlier level than its parent \(whose level starts at node 5\)"),
])
@pytest.mark.parametrize("packed", [False, True])
def test_level_children_checked_forward_and_backward(bad, where, msg, packed):
    """A child of its own level (or later, or negative) is rejected by name,
    in the forward and, when the schedule changed in between, in the VJP."""
    from dynnets.autograd.primitives.tree import tree_lstm_levels_p, tree_lstm_levels_packed_p
    rng = np.random.default_rng(0)
    H = 2
    w, b = 0.3 * rng.standard_normal((2 * H, 5 * H)), rng.standard_normal(5 * H)
    left, right = _LEFT.copy(), _RIGHT.copy()
    spoiled = left if where == "left" else right
    k, v = bad
    s0, rows = rng.standard_normal((3, 2 * H)), np.array([2, 0, 1, 1, 0])
    first = [s0, rows] if packed else [s0[rows, :H], s0[rows, H:]]
    prim = tree_lstm_levels_packed_p if packed else tree_lstm_levels_p
    op = "tree_lstm_levels_packed" if packed else "tree_lstm_levels"
    old = spoiled[k]
    spoiled[k] = v
    with pytest.raises(IndexRangeError, match=f"{op}: " + msg):
        prim.impl(*first, w, b, left, right, _OFFSETS)
    spoiled[k] = old
    out = prim.impl(*first, w, b, left, right, _OFFSETS)
    spoiled[k] = v
    with pytest.raises(IndexRangeError, match=f"{op}: " + msg):
        prim.joint_vjp((np.ones_like(out[0]), None), (*first, w, b, left, right, _OFFSETS), out)


def test_level_packed_rows_checked():
    from dynnets.autograd.primitives.tree import tree_lstm_levels_packed_p as prim
    rng = np.random.default_rng(1)
    H = 2
    w, b = 0.3 * rng.standard_normal((2 * H, 5 * H)), rng.standard_normal(5 * H)
    s0 = rng.standard_normal((3, 2 * H))
    for rows, bad in ((np.array([2, 0, 3, 1, 0]), "rows[2]=3"), (np.array([2, 0, 1, -1, 0]), "rows[3]=-1")):
        with pytest.raises(IndexRangeError, match=rf"tree_lstm_levels_packed: {re.escape(bad)} is out of range for "
                                                  rf"s0.shape\[0\]=3"):
            prim.impl(s0, rows, w, b, _LEFT, _RIGHT, _OFFSETS)
    rows = np.array([2, 0, 1, 1, 0])
    out = prim.impl(s0, rows, w, b, _LEFT, _RIGHT, _OFFSETS)
    rows[4] = 7
    with pytest.raises(IndexRangeError, match=r"rows\[4\]=7 is out of range"):
        prim.joint_vjp((np.ones_like(out[0]), None), (s0, rows, w, b, _LEFT, _RIGHT, _OFFSETS), out)
