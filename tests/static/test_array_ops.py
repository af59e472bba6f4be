"""shape, range, fill, sequence_mask: sizes read when the graph runs."""
import numpy as np
import pytest

import dynnets.static as tf


def test_run_time_sizes_follow_the_fed_shapes():
    with tf.Graph().as_default() as g:
        x = tf.placeholder((None, 3), name="x")
        lengths = tf.placeholder((None,), tf.int64, name="lengths")
        n = tf.shape(x)[0]
        outs = [tf.shape(x), tf.range(n), tf.range(1, n, 2), tf.fill([n, 2], 0.5), tf.sequence_mask(lengths),
                tf.sequence_mask(lengths, 4, np.float32)]
        assert outs[3].shape == (None, 2) and outs[3].dtype == np.float32 and outs[4].shape == (None, None)
        sess = tf.Session(g)
    for rows, lens in ((5, [1, 3, 0]), (2, [2])):
        shp, r, r2, f, m, mf = sess.run(outs, {x: np.zeros((rows, 3), np.float32), lengths: lens})
        np.testing.assert_array_equal(shp, [rows, 3])
        np.testing.assert_array_equal(r, np.arange(rows))
        np.testing.assert_array_equal(r2, np.arange(1, rows, 2))
        np.testing.assert_array_equal(f, np.full((rows, 2), 0.5, np.float32))
        np.testing.assert_array_equal(m, np.arange(max(lens))[None, :] < np.asarray(lens)[:, None])
        np.testing.assert_array_equal(mf, (np.arange(4)[None, :] < np.asarray(lens)[:, None]).astype(np.float32))


def test_range_inside_a_loop_body_reads_outer_and_loop_values():
    with tf.Graph().as_default() as g:
        off = tf.placeholder((None,), tf.int64, name="offsets")
        data = tf.placeholder((None,), name="data")
        base = tf.take(off, 0)                                  # an outer value the body captures

        def body(i, total):
            seg = tf.take(data, tf.range(tf.take(off, i) - base, tf.take(off, i + 1) - base))
            return [i + 1, total + tf.reduce_sum(seg) * tf.cast(i + 1, np.float32)]
        _, total = tf.while_loop(lambda i, t: tf.less(i, tf.shape(off)[0] - 1), body,
                                 [tf.constant(np.asarray(0, np.int64)), tf.constant(np.float32(0))])
        grad = tf.gradients(total, [data])[0]
        sess = tf.Session(g)
    d = np.arange(6, dtype=np.float32)
    t, gd = sess.run([total, grad], {off: [2, 3, 5, 8], data: d})
    assert t == pytest.approx(1 * d[0] + 2 * (d[1] + d[2]) + 3 * (d[3] + d[4] + d[5]))
    np.testing.assert_array_equal(gd, [1, 2, 2, 3, 3, 3])


def test_errors_name_the_op_and_argument():
    with tf.Graph().as_default():
        x = tf.placeholder((None, 3))
        with pytest.raises(tf.ShapeError, match="range: limit must be a real scalar, got 'Placeholder' with shape"):
            tf.range(x)
        with pytest.raises(TypeError, match="range: the bounds must be numbers or scalar Values, got str"):
            tf.range("3")
        with pytest.raises(ValueError, match=r"fill: dims\[1\] must be a non-negative int"):
            tf.fill([2, -1], 0.0)
        with pytest.raises(TypeError, match=r"fill: a shape Value must be a 1-D integer vector of known length, "
                                            r"got 'Placeholder' with shape \(\?, 3\)"):
            tf.fill(x, 0.0)
        with pytest.raises(TypeError, match="fill: shape must be a list of ints"):
            tf.fill("2", 0.0)
        with pytest.raises(tf.ShapeError, match="sequence_mask: lengths must be a 1-D integer vector"):
            tf.sequence_mask(x)
        r = tf.range(0, 3, tf.constant(np.asarray(0, np.int64)))
        with pytest.raises(ValueError, match="delta must not be 0"):
            tf.Session().run(r)
