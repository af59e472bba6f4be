"""TF1's semantics where a new-user trial found dynnets.static silently
different (issue 22, branch i22-tf1-gaps): integer division, operand
conversion, TensorShape, tf.losses and the missing names. Each is checked
against TF1's documented semantics written in numpy and against the eager
dynnets equivalent."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf


def _run(fetch_fn, feed_fn=None):
    with tf.Graph().as_default():
        out = fetch_fn()
        with tf.Session() as sess:
            return sess.run(out)


A = np.array([-7, 7, -7, 7, 0, -1, 6], np.int64)
B = np.array([2, 2, -2, -2, 3, 4, -4], np.int64)


# --- 1. division -----------------------------------------------------------

@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_div_of_integers_floor_divides_to_an_integer(dt):
    a, b = (A, B) if dt != np.uint8 else (np.abs(A), np.abs(B) + 1)
    a, b = a.astype(dt), b.astype(dt)
    for fn in (tf.div, tf.floordiv, tf.floor_div, lambda x, y: x // y):
        r = _run(lambda: fn(tf.constant(a), tf.constant(b)))
        assert r.dtype == dt and r.tolist() == np.floor_divide(a, b).tolist()
    assert _run(lambda: tf.div(-7, 2)).tolist() == -4     # Python 2's -7 / 2
    eager = dn.floor_divide(dn.tensor(a), dn.tensor(b)).numpy()
    assert eager.tolist() == _run(lambda: tf.div(tf.constant(a), tf.constant(b))).tolist()


def test_div_of_floats_is_true_division():
    a, b = A.astype(np.float32), B.astype(np.float32)
    r = _run(lambda: tf.div(tf.constant(a), tf.constant(b)))
    assert r.dtype == np.float32 and np.array_equal(r, a / b)


@pytest.mark.parametrize("dt,want", [(np.int8, np.float32), (np.int16, np.float32), (np.uint8, np.float32),
                                     (np.int32, np.float64), (np.int64, np.float64), (np.float32, np.float32),
                                     (np.float64, np.float64)])
def test_truediv_dtype_is_tf1s(dt, want):
    a, b = np.abs(A).astype(dt), (np.abs(B) + 1).astype(dt)
    for fn in (tf.truediv, tf.divide, lambda x, y: x / y):
        r = _run(lambda: fn(tf.constant(a), tf.constant(b)))
        assert r.dtype == want
        np.testing.assert_array_equal(r, a.astype(want) / b.astype(want))


def test_truncatediv_and_the_remainders():
    a, b = A.astype(np.int32), B.astype(np.int32)
    ca, cb = (lambda: tf.constant(a)), (lambda: tf.constant(b))
    trunc = _run(lambda: tf.truncatediv(ca(), cb()))
    assert trunc.dtype == np.int32 and trunc.tolist() == np.fix(a / b).astype(int).tolist()
    assert trunc.tolist() == dn.div(dn.tensor(a), dn.tensor(b), rounding_mode="trunc").tolist()
    for fn in (tf.mod, tf.floormod, lambda x, y: x % y):
        r = _run(lambda: fn(ca(), cb()))
        assert r.dtype == np.int32 and r.tolist() == np.mod(a, b).tolist()       # the divisor's sign
    assert _run(lambda: tf.truncatemod(ca(), cb())).tolist() == np.fmod(a, b).tolist()
    assert np.mod(a, b).tolist() == dn.remainder(dn.tensor(a), dn.tensor(b)).tolist()
    f = np.array([-7.5, 7.5], np.float32)
    r = _run(lambda: tf.floordiv(tf.constant(f), 2.0))
    assert r.dtype == np.float32 and r.tolist() == [-4.0, 3.0]


def test_division_gradients_equal_eager():
    x0, y0 = np.array([1.5, -2.0, 3.0]), np.array([2.0, 0.5, -4.0])
    with tf.Graph().as_default():
        x, y = tf.placeholder(tf.float64, [3]), tf.placeholder(tf.float64, [3])
        loss = tf.reduce_sum(tf.div(x, y) * 3.0 + tf.mod(x, y))
        g = tf.gradients(loss, [x, y])
        with tf.Session() as s:
            gx, gy = s.run(g, {x: x0, y: y0})
    ex, ey = dn.tensor(x0, requires_grad=True), dn.tensor(y0, requires_grad=True)
    ((ex / ey) * 3.0 + dn.remainder(ex, ey)).sum().backward()
    np.testing.assert_allclose(gx, ex.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy, ey.grad.numpy(), rtol=1e-12)


# --- 2. operand conversion ---------------------------------------------------

_OPS = [lambda x, y: x + y, lambda x, y: y + x, lambda x, y: x - y, lambda x, y: y - x, lambda x, y: x * y,
        lambda x, y: y / x, lambda x, y: x ** y, lambda x, y: y // x]
_TF_OPS = [(tf.add, np.add), (tf.subtract, np.subtract), (tf.multiply, np.multiply), (tf.maximum, np.maximum),
           (tf.minimum, np.minimum), (tf.divide, np.divide), (tf.pow, np.power)]


@pytest.mark.parametrize("op,np_op", [(f, f) for f in _OPS] + _TF_OPS)
def test_a_numpy_operand_takes_the_values_dtype(op, np_op):
    x0, y0 = np.array([2.0, 3.0], np.float32), np.array([3.0, 0.5])
    r = _run(lambda: op(tf.constant(x0), y0))
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, np_op(x0, y0.astype(np.float32)), rtol=1e-6)


def test_an_operand_that_does_not_fit_raises():
    with tf.Graph().as_default():
        i = tf.constant([1, 2])
        with pytest.raises(TypeError, match=r"add: expected int32 for y .*got 2.5 of type float"):
            i + 2.5
        with pytest.raises(TypeError, match=r"multiply: expected int32 for y"):
            tf.multiply(i, [1.0, 2.0])
        with pytest.raises(TypeError, match=r"sub: y=array\(\[2.7\]\) does not fit .*int32"):
            i - np.array([2.7])
        with pytest.raises(TypeError, match=r"add: y=.* does not fit .*int32"):
            i + 2 ** 40
        with pytest.raises(TypeError, match=r"less: expected int32 for y"):
            i < 0.5
        # what fits is converted: an int64 array of small values, a Python int into a float value
        assert _run(lambda: tf.constant([1, 2]) + np.array([3, 4])).dtype == np.int32
        assert _run(lambda: tf.constant([1.0]) * 3).dtype == np.float32


def test_traced_code_keeps_eager_semantics():
    """dynnets.static.trace runs eager (PyTorch) code on graph values: TF1's rules stay out of it."""
    f = tf.trace(lambda x: (x * np.array([3.0]), x / 2))
    x = np.array([2.0], np.float32)
    got = f(x)
    want = (dn.tensor(x) * np.array([3.0]), dn.tensor(x) / 2)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g.numpy(), w.numpy())
    ints = tf.trace(lambda x: x / x)(np.array([7, 3], np.int32))
    assert ints.dtype == (dn.tensor(np.array([7], np.int32)) / 2).dtype


# --- 3. TensorShape ----------------------------------------------------------

def test_tensor_shape_as_tf1s():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        s = x.get_shape()
        assert s.as_list() == [None, 3, 4] and s.ndims == 3 and s.rank == 3 and not s.is_fully_defined()
        assert s[-1].value == 4 and int(s[1]) == 3 and s[1] * 2 == 6 and s[0].value is None
        assert s.num_elements() is None and s[1:].num_elements() == 12 and s[1:].is_fully_defined()
        assert [d.value for d in s] == [None, 3, 4] and [d.value for d in s.dims] == [None, 3, 4]
        with pytest.raises(TypeError, match=r"int\(\) of Dimension\(None\)"):
            int(s[0])
        assert tf.dimension_value(s[0]) is None and tf.dimension_value(s[2]) == 4
        # x.shape is the same TensorShape; an unknown dimension indexes as None there, so `is None` tests hold
        assert x.shape.as_list() == [None, 3, 4] and x.shape[2].value == 4 and x.shape[0] is None
        # it stays a tuple: equal to tuples and lists, hashable, usable where a tuple was
        assert x.shape == (None, 3, 4) and x.shape == [None, 3, 4] and s == (None, 3, 4) and x.shape != (1, 3, 4)
        assert hash(x.shape) == hash((None, 3, 4)) and None in x.shape and x.shape[1:] == (3, 4)
        assert np.zeros(tf.ones([2, 3]).shape).shape == (2, 3)
        assert s.merge_with([5, None, 4]).as_list() == [5, 3, 4] and s.is_compatible_with([7, 3, None])
        with pytest.raises(ValueError, match="incompatible"):
            s.merge_with([1, 2, 4])
        assert tf.TensorShape([None, 2]).concatenate([3]).as_list() == [None, 2, 3]
        u = tf.placeholder(tf.float32)
        assert u.get_shape().ndims is None and u.get_shape().num_elements() is None
        with pytest.raises(ValueError, match="unknown rank"):
            u.get_shape().as_list()


# --- 4. tf.losses --------------------------------------------------------------

RNG = np.random.default_rng(3)
P = RNG.standard_normal((4, 3)).astype(np.float32)
Y = RNG.standard_normal((4, 3)).astype(np.float32)
W = np.array([[1.0], [0.0], [2.0], [0.5]], np.float32)        # (4, 1): broadcast over columns


def _reduce(elems, w, reduction):
    """TF1's compute_weighted_loss in numpy (float32, as TF1)."""
    weighted = (elems * w).astype(np.float32)
    bw = np.broadcast_to(w, elems.shape)
    return {"none": weighted, "weighted_sum": weighted.sum(),
            "weighted_mean": weighted.sum() / bw.sum(),
            "weighted_sum_over_batch_size": weighted.sum() / elems.size,
            "weighted_sum_by_nonzero_weights": weighted.sum() / np.count_nonzero(bw)}[reduction]


@pytest.mark.parametrize("reduction", ["none", "weighted_sum", "weighted_mean", "weighted_sum_over_batch_size",
                                       "weighted_sum_by_nonzero_weights"])
def test_regression_losses_as_tf1(reduction):
    p01 = 1 / (1 + np.exp(-P))
    y01 = (Y > 0).astype(np.float32)
    err = np.abs(P - Y)
    cases = [(tf.losses.mean_squared_error, Y, P, (P - Y) ** 2),
             (tf.losses.absolute_difference, Y, P, err),
             (tf.losses.huber_loss, Y, P, np.where(err <= 1.0, 0.5 * err ** 2, err - 0.5)),
             (tf.losses.log_loss, y01, p01, -y01 * np.log(p01 + 1e-7) - (1 - y01) * np.log(1 - p01 + 1e-7)),
             (tf.losses.hinge_loss, y01, P, np.maximum(0, 1 - (2 * y01 - 1) * P)),
             (lambda labels, predictions, **k: tf.losses.sigmoid_cross_entropy(labels, predictions, **k), y01, P,
              np.maximum(P, 0) - P * y01 + np.log1p(np.exp(-np.abs(P))))]
    for fn, labels, preds, elems in cases:
        got = _run(lambda: fn(labels, preds, weights=W, reduction=reduction))
        np.testing.assert_allclose(got, _reduce(elems, W, reduction), rtol=2e-6, atol=1e-7)
    assert tf.losses.Reduction.SUM_OVER_NONZERO_WEIGHTS == tf.losses.Reduction.SUM_BY_NONZERO_WEIGHTS


def test_default_reduction_equals_eager_means():
    yb = (Y > 0).astype(np.float32)
    with tf.Graph().as_default():
        mse = tf.losses.mean_squared_error(tf.constant(Y), tf.constant(P))   # weights 1: the plain mean
        bce = tf.losses.sigmoid_cross_entropy(yb, tf.constant(P))
        zero = tf.losses.absolute_difference(Y, P, weights=0.0)             # no non-zero weight: 0, not NaN
        with tf.Session() as s:
            got = s.run([mse, bce, zero])
    np.testing.assert_allclose(got[0], dn.nn.functional.mse_loss(dn.tensor(P), dn.tensor(Y)).item(), rtol=1e-6)
    np.testing.assert_allclose(got[1], dn.nn.functional.binary_cross_entropy_with_logits(
        dn.tensor(P), dn.tensor(yb)).item(), rtol=1e-6)
    assert got[2] == 0.0


def test_cross_entropy_losses_with_weights_and_smoothing():
    labels = np.array([0, 2, 1, 2])
    onehot = np.eye(3, dtype=np.float32)[labels]
    w = np.array([1.0, 0.0, 2.0, 3.0], np.float32)
    lsm = P - np.log(np.exp(P).sum(1, keepdims=True))
    per_row = -lsm[np.arange(4), labels]
    want = (per_row * w).sum() / 3
    got = _run(lambda: [tf.losses.sparse_softmax_cross_entropy(labels, P, weights=w),
                        tf.losses.sparse_softmax_cross_entropy(labels[:, None], P, weights=w[:, None]),
                        tf.losses.softmax_cross_entropy(onehot, P, weights=w),
                        tf.losses.softmax_cross_entropy(onehot, P, label_smoothing=0.3),
                        tf.losses.sigmoid_cross_entropy(onehot, P, label_smoothing=0.2)])
    np.testing.assert_allclose(got[:3], [want] * 3, rtol=1e-6)
    smooth = onehot * 0.7 + 0.3 / 3
    np.testing.assert_allclose(got[3], (-(smooth * lsm).sum(1)).mean(), rtol=1e-6)
    z = onehot * 0.8 + 0.1
    np.testing.assert_allclose(got[4], (np.maximum(P, 0) - P * z + np.log1p(np.exp(-np.abs(P)))).mean(), rtol=1e-6)
    eager = dn.cross_entropy(dn.tensor(P), dn.tensor(labels), reduction="none").numpy()
    np.testing.assert_allclose(per_row, eager, rtol=1e-6)
    # the harness's case: logits (1, 2, 2), labels and weights (1, 2)
    r = _run(lambda: tf.losses.sparse_softmax_cross_entropy(
        labels=tf.constant([[0, 1]]), logits=tf.constant([[[1., 2.], [3., 1.]]]), weights=tf.constant([[1., 0.]])))
    np.testing.assert_allclose(r, np.log1p(np.e), rtol=1e-6)


def test_losses_collection_and_total_loss():
    with tf.Graph().as_default():
        a = tf.losses.mean_squared_error(Y, P)
        b = tf.losses.absolute_difference(Y, P, loss_collection=None)       # not collected
        c = tf.losses.huber_loss(Y, P, reduction=tf.losses.Reduction.SUM)
        tf.losses.add_loss(tf.constant(1.5))
        w = tf.get_variable("w", [2], initializer=tf.ones_initializer(),
                            regularizer=lambda v: tf.reduce_sum(v * v) * 0.5)
        got = tf.losses.get_losses()
        assert len(got) == 3 and got[0] is a and got[1] is c and id(b) not in map(id, got)
        total, reg, total_noreg = (tf.losses.get_total_loss(), tf.losses.get_regularization_loss(),
                                   tf.losses.get_total_loss(add_regularization_losses=False))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            va, vc, vt, vr, vn = s.run([a, c, total, reg, total_noreg])
    np.testing.assert_allclose(vr, 1.0)
    np.testing.assert_allclose(vn, va + vc + 1.5, rtol=1e-6)
    np.testing.assert_allclose(vt, va + vc + 1.5 + 1.0, rtol=1e-6)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="get_total_loss: no losses"):
            tf.losses.get_total_loss()
        assert _run(lambda: tf.losses.get_regularization_loss()) == 0.0
        with pytest.raises(ValueError, match=r"mean_squared_error: weights can not be broadcast.*\[2, 2\]"):
            tf.losses.mean_squared_error(Y, P, weights=np.ones((2, 2)))
        with pytest.raises(ValueError, match="Invalid Reduction Key 'mean'"):
            tf.losses.mean_squared_error(Y, P, reduction="mean")


def test_loss_gradient_equals_eager():
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, [4, 3])
        loss = tf.losses.mean_squared_error(Y, p, weights=W)
        g, = tf.gradients(loss, [p])
        with tf.Session() as s:
            got = s.run(g, {p: P})
    ep = dn.tensor(P, requires_grad=True)
    (((ep - dn.tensor(Y)) ** 2 * dn.tensor(W)).sum() / 9.0).backward()       # 9 non-zero weights of 12
    np.testing.assert_allclose(got, ep.grad.numpy(), rtol=1e-6)
