"""TF1's ``tf.nn.conv1d``, ``tf.layers.conv1d`` and
``tf.contrib.layers.layer_norm`` (issue 25) against TF1's documented
semantics written in numpy (NWC layout, filters (K, C_in, C_out), 'SAME'
padding with output ceil(W / stride) and the extra element on the right,
layer norm over ``begin_norm_axis..`` with epsilon 1e-12) and against the
eager torch-named equivalents; gradients against finite differences of the
numpy reference."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
import dynnets.nn.functional as F
import dynnets.static as tf


def _ref_conv1d(x, w, stride, padding, dilation=1):
    """TF1's conv1d in loops: x (N, W, C), w (K, C, O)."""
    n, width, c = x.shape
    k, _, o = w.shape
    span = dilation * (k - 1) + 1
    if padding == "VALID":
        out_w = (width - span) // stride + 1
        left = 0
    else:
        out_w = -(-width // stride)
        total = max((out_w - 1) * stride + span - width, 0)
        left = total // 2
    y = np.zeros((n, out_w, o))
    for t in range(out_w):
        for j in range(k):
            pos = t * stride - left + j * dilation
            if 0 <= pos < width:
                y[:, t] += x[:, pos] @ w[j]
    return y


CASES = [("valid", 1, "VALID", 1), ("same-odd", 1, "SAME", 1), ("same-stride2", 2, "SAME", 1),
         ("same-stride3", 3, "SAME", 1), ("valid-stride2", 2, "VALID", 1), ("same-dilated", 1, "SAME", 2)]


@pytest.mark.parametrize("cid,stride,padding,dil", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("k", [2, 3])
def test_nn_conv1d_against_tf1_semantics(cid, stride, padding, dil, k):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 7, 3)), rng.standard_normal((k, 3, 4))
    cot = None
    with tf.Graph().as_default():
        xp = tf.placeholder(tf.float64, (None, 7, 3))
        wp = tf.placeholder(tf.float64, (k, 3, 4))
        y = tf.nn.conv1d(xp, wp, stride, padding, dilations=dil)
        want = _ref_conv1d(x, w, stride, padding, dil)
        assert tuple(y.shape)[1:] == want.shape[1:]
        cot = rng.standard_normal(want.shape)
        gx, gw = tf.gradients(tf.reduce_sum(y * cot), [xp, wp])
        with tf.Session() as sess:
            got, got_gx, got_gw = sess.run([y, gx, gw], {xp: x, wp: w})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # gradients: finite differences of the reference (it is linear in each argument, so exact up to rounding)
    eps = 1e-6
    for arr, g, which in ((x, got_gx, 0), (w, got_gw, 1)):
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            d = np.zeros_like(arr)
            d[idx] = eps
            a = (x + d, w) if which == 0 else (x, w + d)
            b = (x - d, w) if which == 0 else (x, w - d)
            num[idx] = ((_ref_conv1d(*a, stride, padding, dil) - _ref_conv1d(*b, stride, padding, dil)) * cot
                        ).sum() / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_nn_conv1d_equals_eager_torch_named_conv1d():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 9, 3)), rng.standard_normal((3, 3, 5))
    with tf.Graph().as_default():
        y = tf.nn.conv1d(tf.constant(x), tf.constant(w), 2, "VALID")
        with tf.Session() as sess:
            got = sess.run(y)
    eager = F.conv1d(dn.tensor(x.transpose(0, 2, 1)), dn.tensor(w.transpose(2, 1, 0)), stride=2).numpy()
    np.testing.assert_allclose(got, eager.transpose(0, 2, 1), rtol=1e-13)


def test_nn_conv1d_ncw_and_errors():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 3, 4))
    with tf.Graph().as_default():
        y = tf.nn.conv1d(tf.constant(x), tf.constant(w), 1, "SAME", data_format="NCW")
        with tf.Session() as sess:
            got = sess.run(y)
        np.testing.assert_allclose(got, _ref_conv1d(x.transpose(0, 2, 1), w, 1, "SAME").transpose(0, 2, 1),
                                   rtol=1e-12)
        with pytest.raises(ValueError, match="conv1d: padding must be 'SAME' or 'VALID'"):
            tf.nn.conv1d(tf.constant(x), tf.constant(w), 1, "FULL", data_format="NCW")
        with pytest.raises(ValueError, match="conv1d: padding='SAME' with stride 2 needs a known input width"):
            tf.nn.conv1d(tf.placeholder(tf.float64, (None, None, 3)), tf.constant(w), 2, "SAME")
        with pytest.raises(ValueError, match=r"conv1d: the input's channels 6 \(value shape \(2, 3, 6\), NWC\) do not match filters.shape\[1\]=4"):
            tf.nn.conv1d(tf.constant(x), tf.constant(rng.standard_normal((2, 4, 4))), 1, "VALID")


def test_layers_conv1d_variables_values_and_training():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8, 3))
    with tf.Graph().as_default():
        xp = tf.placeholder(tf.float64, (None, None, 3))
        y = tf.layers.conv1d(xp, 5, 3, padding="same", activation=tf.nn.relu)
        y2 = tf.layers.conv1d(xp, 2, 2, strides=2, name="second", use_bias=False)
        names = sorted(v.name for v in tf.trainable_variables())
        assert names == ["conv1d/bias", "conv1d/kernel", "second/kernel"]
        kernel = [v for v in tf.trainable_variables() if v.name == "conv1d/kernel"][0]
        bias = [v for v in tf.trainable_variables() if v.name == "conv1d/bias"][0]
        assert tuple(kernel.shape) == (3, 3, 5) and tuple(bias.shape) == (5,)
        loss = tf.reduce_mean(tf.square(y)) + tf.reduce_mean(y2)
        step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            k, b = sess.run([kernel, bias])
            limit = np.sqrt(6.0 / (3 * 3 + 3 * 5))             # Glorot with the kernel width in both fans
            assert np.abs(k).max() <= limit and np.abs(k).max() > 0.5 * limit and not b.any()
            got = sess.run(y, {xp: x})
            np.testing.assert_allclose(got, np.maximum(_ref_conv1d(x, k, 1, "SAME") + b, 0), rtol=1e-12)
            l0 = sess.run(loss, {xp: x})
            for _ in range(5):
                sess.run(step, {xp: x})
            assert sess.run(loss, {xp: x}) < l0


def _ref_layer_norm(x, begin, eps=1e-12):
    axes = tuple(range(begin, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


@pytest.mark.parametrize("begin_norm_axis,begin_params_axis", [(1, -1), (-1, -1), (2, 2), (1, 1)])
def test_contrib_layer_norm_against_tf1_semantics(begin_norm_axis, begin_params_axis):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4))
    with tf.Graph().as_default():
        xp = tf.placeholder(tf.float64, (None, 3, 4))
        y = tf.contrib.layers.layer_norm(xp, begin_norm_axis=begin_norm_axis, begin_params_axis=begin_params_axis)
        gamma = [v for v in tf.trainable_variables() if v.name == "LayerNorm/gamma"][0]
        beta = [v for v in tf.trainable_variables() if v.name == "LayerNorm/beta"][0]
        pshape = x.shape[begin_params_axis % 3:]
        assert tuple(gamma.shape) == pshape and tuple(beta.shape) == pshape
        g, b = rng.standard_normal(pshape), rng.standard_normal(pshape)
        cot = rng.standard_normal(x.shape)
        gx = tf.gradients(tf.reduce_sum(y * cot), xp)[0]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            gamma.load(g, sess)
            beta.load(b, sess)
            got, got_gx = sess.run([y, gx], {xp: x})
    want = _ref_layer_norm(x, begin_norm_axis % 3) * g + b
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    eps = 1e-6
    num = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        num[idx] = (((_ref_layer_norm(x + d, begin_norm_axis % 3) - _ref_layer_norm(x - d, begin_norm_axis % 3))
                     * g * cot).sum() / (2 * eps))
    np.testing.assert_allclose(got_gx, num, rtol=1e-5, atol=1e-7)


def test_contrib_layer_norm_equals_eager_layer_norm_and_options():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6))
    with tf.Graph().as_default():
        y = tf.contrib.layers.layer_norm(tf.constant(x), center=False, scale=False, activation_fn=tf.nn.relu,
                                         scope="ln")
        assert tf.trainable_variables() == []
        with tf.Session() as sess:
            got = sess.run(y)
    eager = F.relu(F.layer_norm(dn.tensor(x), (6,), eps=1e-12)).numpy()
    np.testing.assert_allclose(got, eager, rtol=1e-13)


def _ref_conv2d(x, w, strides, padding):
    """TF1's conv2d in loops: x (N, H, W, C), w (KH, KW, C, O)."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    outs, lefts = [], []
    for size, k, s in ((h, kh, strides[0]), (wd, kw, strides[1])):
        if padding == "VALID":
            outs.append((size - k) // s + 1)
            lefts.append(0)
        else:
            out = -(-size // s)
            outs.append(out)
            lefts.append(max((out - 1) * s + k - size, 0) // 2)
    y = np.zeros((n, outs[0], outs[1], o))
    for i in range(outs[0]):
        for j in range(outs[1]):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * strides[0] - lefts[0] + a, j * strides[1] - lefts[1] + b
                    if 0 <= r < h and 0 <= q < wd:
                        y[:, i, j] += x[:, r, q] @ w[a, b]
    return y


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides", [[1, 1, 1, 1], [1, 2, 3, 1]])
def test_nn_conv2d_against_tf1_semantics(strides, padding):
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 7, 8, 3)), rng.standard_normal((3, 2, 3, 4))
    with tf.Graph().as_default():
        y = tf.nn.conv2d(tf.constant(x), tf.constant(w), strides, padding)
        with tf.Session() as sess:
            got = sess.run(y)
    np.testing.assert_allclose(got, _ref_conv2d(x, w, strides[1:3], padding), rtol=1e-12, atol=1e-12)
    if padding == "VALID":
        eager = F.conv2d(dn.tensor(x.transpose(0, 3, 1, 2)), dn.tensor(w.transpose(3, 2, 0, 1)),
                         stride=strides[1:3]).numpy()
        np.testing.assert_allclose(got, eager.transpose(0, 2, 3, 1), rtol=1e-13)
