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
        assert str(s) == "(?, 3, 4)" and repr(s) == "TensorShape([None, 3, 4])" and str(s[1:2]) == "(3,)"
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


# --- 5. names ----------------------------------------------------------------------

def test_dtype_names_and_casts():
    assert tf.bool is np.bool_ and tf.double is np.float64 and tf.half is np.float16
    assert (tf.int8, tf.int16, tf.uint8, tf.uint16) == (np.int8, np.int16, np.uint8, np.uint16)
    x = np.array([1.7, -2.2, 3.0])
    got = _run(lambda: [tf.to_float(x), tf.to_double(tf.constant(x, tf.float32)), tf.to_int32(x), tf.to_int64(x),
                        tf.cast(tf.constant([0, 2]), tf.bool)])
    assert [g.dtype for g in got] == [np.float32, np.float64, np.int32, np.int64, np.bool_]
    assert got[2].tolist() == [1, -2, 3] == x.astype(np.int32).tolist() and got[4].tolist() == [False, True]


@pytest.mark.parametrize("axes", [1, 2, 0, [[1], [0]], [[0, 2], [2, 0]], ([2], [1])])
def test_tensordot_equals_numpy_and_eager(axes):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 4))
    b = rng.standard_normal((4, 3, 2)) if axes != 1 else rng.standard_normal((4, 5))
    if axes in (2,):
        b = rng.standard_normal((3, 4, 5))
    if axes == [[1], [0]]:
        b = rng.standard_normal((3, 5))
    if axes == ([2], [1]):
        b = rng.standard_normal((5, 4))
    want = np.tensordot(a, b, axes)
    got = _run(lambda: tf.tensordot(tf.constant(a), tf.constant(b), axes))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, dn.tensordot(dn.tensor(a), dn.tensor(b), dims=axes).numpy()
                               if hasattr(dn, "tensordot") else want, rtol=1e-12)


def test_nn_names():
    x = np.array([[1.0, -2.0, 7.0], [0.5, 3.0, -1.0]], np.float32)
    got = _run(lambda: [tf.nn.softmax(tf.constant(x), dim=0), tf.nn.softmax(tf.constant(x), axis=0),
                        tf.nn.log_softmax(tf.constant(x), dim=-1), tf.nn.l2_normalize(x, axis=1),
                        tf.nn.l2_normalize(x, dim=0), tf.nn.l2_normalize(x), tf.nn.relu6(x * 1.0),
                        tf.math.l2_normalize(x, 1)])
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(got[0], e / e.sum(0), rtol=1e-6)
    np.testing.assert_allclose(got[1], got[0])
    np.testing.assert_allclose(got[2], dn.log_softmax(dn.tensor(x), dim=-1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[3], x / np.sqrt((x ** 2).sum(1, keepdims=True)), rtol=1e-6)
    np.testing.assert_allclose(got[3], dn.nn.functional.normalize(dn.tensor(x), dim=1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[4], x / np.sqrt((x ** 2).sum(0, keepdims=True)), rtol=1e-6)
    np.testing.assert_allclose(got[5], x / np.sqrt((x ** 2).sum()), rtol=1e-6)
    np.testing.assert_array_equal(got[6], np.clip(x, 0, 6))
    np.testing.assert_allclose(got[7], got[3])
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="softmax: cannot specify both 'axis' and 'dim'"):
            tf.nn.softmax(tf.constant(x), axis=0, dim=0)


def test_count_nonzero_and_clip_by_norm():
    x = np.array([[0.0, 3.0, 0.0], [4.0, 0.0, 0.0]], np.float32)
    got = _run(lambda: [tf.count_nonzero(x), tf.count_nonzero(x, axis=1), tf.count_nonzero(x, 0, keepdims=True,
                                                                                          dtype=tf.int32),
                        tf.clip_by_norm(x, 2.5), tf.clip_by_norm(x, 10.0), tf.clip_by_norm(x, 1.0, axes=[1]),
                        tf.clip_by_norm(np.zeros(3, np.float32), 1.0)])
    assert got[0].dtype == np.int64 and got[0] == 2 and got[1].tolist() == [1, 1]
    assert got[2].dtype == np.int32 and got[2].tolist() == [[1, 1, 0]]
    np.testing.assert_allclose(got[3], x * 2.5 / 5.0, rtol=1e-6)
    np.testing.assert_array_equal(got[4], x)
    np.testing.assert_allclose(got[5], x / np.array([[3.0], [4.0]]), rtol=1e-6)
    np.testing.assert_array_equal(got[6], np.zeros(3))
    # the gradient at zero is finite (TF1's guard), and elsewhere equals eager's
    with tf.Graph().as_default():
        t = tf.placeholder(tf.float32, [3])
        g0, = tf.gradients(tf.reduce_sum(tf.clip_by_norm(t, 1.0) * np.array([1., 2., 3.], np.float32)), [t])
        with tf.Session() as s:
            assert np.all(np.isfinite(s.run(g0, {t: np.zeros(3)})))
            gx = s.run(g0, {t: np.array([3., 4., 0.])})
    et = dn.tensor(np.array([3., 4., 0.], np.float32), requires_grad=True)
    (et * (1.0 / et.norm()) * dn.tensor(np.array([1., 2., 3.], np.float32))).sum().backward()
    np.testing.assert_allclose(gx, et.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_random_shuffle_is_a_seeded_permutation_drawn_at_every_run():
    x = np.arange(20).reshape(10, 2)

    def draws(seed):
        with tf.Graph().as_default():
            tf.set_random_seed(seed)
            p = tf.placeholder(tf.int64, [None, 2])
            out = tf.random_shuffle(p)
            with tf.Session() as s:
                return [s.run(out, {p: x}) for _ in range(3)]
    a, b = draws(5), draws(5)
    for r in a:
        assert sorted(map(tuple, r.tolist())) == sorted(map(tuple, x.tolist()))     # rows permuted, kept whole
    assert all(np.array_equal(u, v) for u, v in zip(a, b))                         # same seed, same sequence
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[0], draws(6)[0])


def test_print_and_asserts(capsys):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [3])
        y = tf.Print(x, [x, tf.reduce_sum(x)], message="x: ", first_n=2)
        loss = tf.reduce_sum(y * y)
        g, = tf.gradients(loss, [x])
        ok = tf.assert_equal(x, x * 1.0)
        bad = tf.assert_less(x, 2.0, message="too big")
        with tf.control_dependencies([tf.assert_positive(x)]):
            checked = tf.identity(x * 2.0)
        with tf.Session() as s:
            r, gr = s.run([y, g], {x: [1.0, 2.0, 3.0]})
            s.run(y, {x: [1.0, 2.0, 3.0]})
            s.run(y, {x: [1.0, 2.0, 3.0]})
            assert s.run(ok, {x: [1.0, 2.0, 3.0]}) is None
            with pytest.raises(tf.errors.InvalidArgumentError, match=r"too big: assertion failed: x < y.*x = \[1"):
                s.run(bad, {x: [1.0, 2.0, 3.0]})
            assert s.run(checked, {x: [1.0, 2.0, 3.0]}).tolist() == [2.0, 4.0, 6.0]
            with pytest.raises(tf.errors.InvalidArgumentError, match="assert_positive"):
                s.run(checked, {x: [1.0, -2.0, 3.0]})
    np.testing.assert_array_equal(r, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(gr, [2.0, 4.0, 6.0])                 # the gradient flows through Print
    err = capsys.readouterr().err
    assert err.count("x: [1.0 2.0 3.0][6.0]") == 2                     # first_n=2 of three runs
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="must have rank 2, got rank 1"):
            tf.assert_rank(tf.constant([1, 2]), 2)


def test_metrics_accuracy_uses_local_variables():
    with tf.Graph().as_default():
        labels, preds = tf.placeholder(tf.int64, [None]), tf.placeholder(tf.int64, [None])
        acc, update = tf.metrics.accuracy(labels, preds)
        wacc, wupdate = tf.metrics.accuracy(labels, preds, weights=tf.constant([1.0, 0.0, 1.0, 1.0]), name="w")
        w = tf.Variable(1.0)
        assert [v.name for v in tf.local_variables()] == ["accuracy/total", "accuracy/count", "w/total", "w/count"]
        assert tf.global_variables() == [w] and tf.trainable_variables() == [w]
        assert len(tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)) == 4
        with tf.Session() as s:
            s.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            assert s.run(acc) == 0.0                                        # nothing counted yet: 0, not NaN
            f = {labels: [1, 2, 3, 4], preds: [1, 2, 0, 0]}
            assert s.run(update, f) == 0.5 and s.run(wupdate, f) == pytest.approx(1 / 3)   # 1 of weight 3
            assert s.run(update, {labels: [1], preds: [1]}) == pytest.approx(0.6)
            assert s.run(acc) == pytest.approx(0.6)
            s.run(tf.local_variables_initializer())
            assert s.run(acc) == 0.0
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            with pytest.raises(Exception, match="accuracy/total"):           # local: not initialised by global
                s.run(acc)


def test_layers_dropout_training_flag():
    x = np.ones((200, 50), np.float32)
    with tf.Graph().as_default():
        tf.set_random_seed(1)
        tr = tf.placeholder(tf.bool, [])
        off = tf.layers.dropout(x, 0.4)                                     # TF1's default: training=False
        on = tf.layers.dropout(x, 0.4, training=True)
        fed = tf.layers.dropout(x, 0.4, training=tr)
        with tf.Session() as s:
            o, n, f_on, f_off = s.run([off, on, fed, fed], {tr: True})[:2] + [s.run(fed, {tr: True}),
                                                                              s.run(fed, {tr: False})]
    np.testing.assert_array_equal(o, x)
    np.testing.assert_array_equal(f_off, x)
    for r in (n, f_on):
        assert set(np.unique(r).tolist()) <= {0.0, np.float32(1 / 0.6)} and abs((r == 0).mean() - 0.4) < 0.03
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="dropout: training must be a Python bool or a boolean scalar Value"):
            tf.layers.dropout(x, training=tf.constant(1.0))


def test_batch_normalization_as_tf1():
    rng = np.random.default_rng(2)
    x0 = (rng.standard_normal((8, 3)) * 2 + 1).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        tr = tf.placeholder(tf.bool, [])
        y_train = tf.layers.batch_normalization(x, training=True, momentum=0.9)
        y_eval = tf.layers.batch_normalization(x, name="batch_normalization", reuse=True)
        y_fed = tf.layers.batch_normalization(x, training=tr, name="fed")
        names = [v.name for v in tf.global_variables()]
        assert names[:4] == ["batch_normalization/gamma", "batch_normalization/beta",
                             "batch_normalization/moving_mean", "batch_normalization/moving_variance"]
        assert [v.name for v in tf.trainable_variables()] == ["batch_normalization/gamma", "batch_normalization/beta",
                                                              "fed/gamma", "fed/beta"]
        updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        assert len(updates) == 4                       # the eval-only layer adds none (training=False)
        mm, mv = tf.global_variables()[2:4]
        loss = tf.reduce_sum(y_train * np.arange(3, dtype=np.float32))
        gx, = tf.gradients(loss, [x])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            yt, ye, g = s.run([y_train, y_eval, gx], {x: x0})
            np.testing.assert_array_equal(s.run(mm), np.zeros(3))          # nothing updates by itself (TF1)
            s.run(updates[:2], {x: x0})
            m_after, v_after = s.run([mm, mv])
            yf_train, yf_eval = s.run(y_fed, {x: x0, tr: True}), s.run(y_fed, {x: x0, tr: False})
    mean, var = x0.mean(0), x0.var(0)
    np.testing.assert_allclose(yt, (x0 - mean) / np.sqrt(var + 1e-3), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ye, x0 / np.sqrt(1 + 1e-3), rtol=1e-6)     # moving statistics 0 and 1
    np.testing.assert_allclose(m_after, 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(v_after, 0.9 + 0.1 * var, rtol=1e-5)
    np.testing.assert_allclose(yf_train, yt, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(yf_eval, ye, rtol=1e-6)
    # the training-mode output and its gradient equal eager's batch norm (functional form: biased variance)
    ex = dn.tensor(x0, requires_grad=True)
    ey = (ex - ex.mean(0, keepdim=True)) / ((ex - ex.mean(0, keepdim=True)) ** 2).mean(0, keepdim=True).add(1e-3).sqrt()
    (ey * dn.tensor(np.arange(3, dtype=np.float32))).sum().backward()
    np.testing.assert_allclose(yt, ey.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g, ex.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_batch_normalization_channels_first_uses_the_unbiased_variance_for_the_moving_one():
    x0 = np.random.default_rng(3).standard_normal((2, 3, 2, 2)).astype(np.float32)
    with tf.Graph().as_default():
        y = tf.layers.batch_normalization(tf.constant(x0), axis=1, training=True, momentum=0.0)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            out, _ = s.run([y, tf.get_collection(tf.GraphKeys.UPDATE_OPS)])
            mv = s.run(tf.global_variables()[3])
    np.testing.assert_allclose(mv, x0.var(axis=(0, 2, 3), ddof=1), rtol=1e-5)
    m, v = x0.mean(axis=(0, 2, 3), keepdims=True), x0.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(out, (x0 - m) / np.sqrt(v + 1e-3), rtol=1e-5, atol=1e-5)


def test_math_and_compat_namespaces_and_concat_order():
    assert tf.math.log is tf.log and tf.math.reduce_sum is tf.reduce_sum and tf.math.floordiv is tf.floordiv
    assert tf.compat.v1 is tf and tf.compat.v1.placeholder is tf.placeholder and tf.compat.dimension_value(3) == 3
    tf.compat.v1.disable_eager_execution()
    tf.compat.v1.disable_v2_behavior()
    with tf.Graph().as_default():
        a = tf.ones([2, 3])
        with pytest.raises(TypeError, match=r"concat: the arguments are \(values, axis\) since TF 1.0.*TF 0.x's "
                                            r"concat\(concat_dim, values\) order"):
            tf.concat(1, [a, a])
        assert _run(lambda: tf.concat([tf.ones([2, 3]), tf.zeros([2, 1])], 1)).shape == (2, 4)


def test_a_graph_built_from_tensor_shape_dimensions_exports(tmp_path):
    """Dimensions read from shapes (``x.shape[1]``; tf.losses reshaping a
    tagger's 3-D logits) end up in op attributes and VJPs: the meta graph a
    Saver writes stores them as ints, and the graph imported from it runs
    (export refused a Dimension before)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3, 4], name="x")
        w = tf.Variable(np.ones((4, 2), np.float32), name="w")
        flat = tf.reshape(x, [-1, x.shape[2]])
        assert type(x.shape[2]).__name__ == "Dimension"
        y = tf.reshape(tf.matmul(flat, w), [-1, x.shape[1], 2], name="y")
        # over (batch, time, classes) logits: the loss reshapes them by their shape's last Dimension
        loss = tf.losses.sparse_softmax_cross_entropy(labels=tf.zeros_like(y[:, :, 0], dtype=tf.int32), logits=y)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        saver = tf.train.Saver()
        feed = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {x: feed})
            want = sess.run(y, {x: feed})
            path = saver.save(sess, str(tmp_path / "m"))
    with tf.Graph().as_default() as g2:
        restorer = tf.train.import_meta_graph(path + ".meta")
        with tf.Session() as sess:
            restorer.restore(sess, path)
            got = sess.run(g2.get_tensor_by_name("y:0"), {g2.get_tensor_by_name("x:0"): feed})
    np.testing.assert_array_equal(got, want)


def test_squared_difference_and_losses_of_lists():
    """tf.squared_difference (TF1's MSE idiom) and the tf.nn cross-entropies
    given Python lists, which TF1 converts to tensors (they failed with an
    unclear "'list' object has no attribute 'ndim'")."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2])
        sq = tf.squared_difference(x, [1.0, 3.0])
        assert sq.dtype == np.float32 and tf.math.squared_difference is tf.squared_difference
        dense = tf.nn.softmax_cross_entropy_with_logits(labels=[[0.0, 1.0]], logits=[[1.0, 2.0]])
        dense2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=[[0.0, 1.0]], logits=[[1.0, 2.0]])
        sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[1], logits=[[1.0, 2.0]])
        with tf.Session() as sess:
            got = sess.run([sq, dense, dense2, sparse], {x: [[2.0, 1.0]]})
    np.testing.assert_array_equal(got[0], [[1.0, 4.0]])
    want = np.log1p(np.exp(-1.0))          # -log softmax([1, 2])[1]
    for g in got[1:]:
        np.testing.assert_allclose(g, [want], rtol=1e-6)
        assert g.dtype == np.float32


@pytest.mark.parametrize("options", [{}, {"optimize": False}, {"native_after": 1}])
def test_running_a_pure_op_gives_none_as_tf1(options):
    """sess.run(op) of an op found by name (get_operation_by_name, or the bare
    name) runs it, with its control dependencies, and gives None, as TF1
    (it raised before); its plan is cached like any fetch."""
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.identity(x * 2, name="y")
        v = tf.Variable(1.0, name="v")
        with tf.control_dependencies([tf.assign_add(v, 1.0)]):
            tf.identity(x, name="z")
        feed = {x: np.ones((1, 2), np.float32)}
        with tf.Session(**options) as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(g.get_operation_by_name("y"), feed) is None and sess.run("y", feed) is None
            none, val = sess.run([g.get_operation_by_name("y"), y], feed)
            assert none is None and val.tolist() == [[2.0, 2.0]]
            assert g.get_operation_by_name("y") == g.get_operation_by_name("y")
            plans = len(sess._plans)
            for _ in range(5):
                assert sess.run(g.get_operation_by_name("z"), feed) is None
            assert len(sess._plans) == plans + 1 and sess.run(v) == 6.0
            g.get_operation_by_name("z").run(feed, session=sess)
            assert sess.run(v) == 7.0


def test_variable_lists_take_tf1s_scope_argument():
    """tf.global_variables / trainable_variables / local_variables take TF1's
    scope= first (a regular expression matched from the start of the name):
    ``tf.trainable_variables("fc1")`` raised before; a Graph passed
    positionally (dynnets' older habit) still works."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        tf.layers.dense(tf.layers.dense(x, 4, name="fc1"), 2, name="fc2")
        tf.Variable(0, trainable=False, name="fc1_steps")
        assert [v.name for v in tf.trainable_variables("fc1")] == ["fc1/kernel", "fc1/bias"]
        assert [v.name for v in tf.global_variables("fc1")] == ["fc1/kernel", "fc1/bias", "fc1_steps"]
        assert [v.name for v in tf.trainable_variables(scope="fc2/k")] == ["fc2/kernel"]
        assert tf.local_variables("fc") == []
    assert len(tf.global_variables(g)) == 5 and len(tf.trainable_variables(graph=g)) == 4
    with pytest.raises(TypeError, match="scope must be a string"):
        tf.global_variables(3)
