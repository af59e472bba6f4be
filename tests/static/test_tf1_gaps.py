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
