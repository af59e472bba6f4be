"""TF1's array, reduction, control and functional names on static graphs
(issue 21): values against numpy, gradients (``tf.gradients``) against
central finite differences in float64, and TF1's argument orders and
semantics where numpy's or torch's differ."""
import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf

RNG = np.random.default_rng(21)


def _run(g, fetches, feed=None, **kw):
    with tf.Session(g, **kw) as s:
        if g.variables:
            s.run(tf.global_variables_initializer(g))
        return s.run(fetches, feed)


def check_grad(build, *xs, shapes=None, eps=1e-6, rtol=1e-6, atol=1e-8):
    """``tf.gradients`` of ``sum(build(*phs) * W)`` (fixed random W) against
    central finite differences of the same graph, float64; placeholders of
    unknown leading dimension unless ``shapes`` says otherwise. Returns the
    forward value."""
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(shapes[k] if shapes else (None,) + x.shape[1:], np.float64, name=f"x{k}")
               for k, x in enumerate(xs)]
        out = build(*phs)
        w = tf.placeholder((None,) * len(out.shape), np.float64, name="w")
        loss = tf.reduce_sum(out * w)
        grads = tf.gradients(loss, phs)
    with tf.Session(g) as s:
        val = s.run(out, {p: x for p, x in zip(phs, xs)})
        wv = np.random.default_rng(0).standard_normal(np.shape(val))
        feed = {p: x for p, x in zip(phs, xs)}
        feed[w] = wv
        got = s.run(grads, feed)
        for k, x in enumerate(xs):
            want = np.zeros_like(x)
            for i in np.ndindex(x.shape):
                up, dn_ = x.copy(), x.copy()
                up[i] += eps
                dn_[i] -= eps
                fu = s.run(loss, {**feed, phs[k]: up})
                fd = s.run(loss, {**feed, phs[k]: dn_})
                want[i] = (fu - fd) / (2 * eps)
            np.testing.assert_allclose(got[k], want, rtol=rtol, atol=atol, err_msg=f"gradient of input {k}")
    return val


# --------------------------------------------------------------------------
# creation and shapes
# --------------------------------------------------------------------------

def test_zeros_ones_fill_take_tf1_shapes_and_dtypes():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3), name="x")
        z = tf.zeros([2, 3])
        zs = tf.zeros(tf.shape(x), np.int32)                 # a shape Value, as TF1's tf.zeros(tf.shape(x))
        o = tf.ones([tf.shape(x)[0], 2], np.float64, "ones_named")
        f = tf.fill([2], 7, "filled")                        # TF1's third positional argument is the name
        f2 = tf.fill(tf.shape(x), 0.5)
        zl = tf.zeros_like(x, np.int64)                      # TF1's second positional argument is the dtype
        ol = tf.ones_like(x, None, "ol")
        r = tf.range(1, 7, 2, np.float64)                    # TF1's fourth: dtype
    assert (o.name, f.name, ol.name) == ("ones_named", "filled", "ol")
    xv = np.ones((4, 3), np.float32)
    vz, vzs, vo, vf, vf2, vzl, vol, vr = _run(g, [z, zs, o, f, f2, zl, ol, r], {x: xv})
    assert vz.dtype == np.float32 and vz.shape == (2, 3) and not vz.any()
    assert vzs.dtype == np.int32 and vzs.shape == (4, 3) and not vzs.any()
    assert vo.dtype == np.float64 and vo.shape == (4, 2) and (vo == 1).all()
    np.testing.assert_array_equal(vf, [7, 7])
    assert vf2.dtype == np.float32 and vf2.shape == (4, 3) and (vf2 == 0.5).all()
    assert vzl.dtype == np.int64 and vzl.shape == (4, 3) and vol.dtype == np.float32 and (vol == 1).all()
    assert vr.dtype == np.float64 and vr.tolist() == [1, 3, 5]
    with g.as_default():
        with pytest.raises(TypeError, match="zeros: a shape Value must be a 1-D integer vector"):
            tf.zeros(x)
        with pytest.raises(ValueError, match=r"zeros: dimensions must be >= 0, got shape \(2, -1\)"):
            tf.zeros([2, -1])


def test_unstack_expand_dims_tile_against_numpy_with_gradients():
    x = RNG.standard_normal((3, 2))
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((None, 2), np.float64)
        cols = tf.unstack(p, axis=1)
        rows = tf.unstack(p, num=3)
        with pytest.raises(ValueError, match="unstack: cannot infer num from shape"):
            tf.unstack(p)
        e = tf.expand_dims(p, -1)
        e0 = tf.expand_dims(p, axis=0)
    vc, vr, ve, ve0 = _run(g, [cols, rows, e, e0], {p: x})
    assert len(vc) == 2 and len(vr) == 3
    np.testing.assert_array_equal(vc[1], x[:, 1])
    np.testing.assert_array_equal(vr[2], x[2])
    assert ve.shape == (3, 2, 1) and ve0.shape == (1, 3, 2)
    out = check_grad(lambda a: tf.tile(a, [2, 3]), x)
    np.testing.assert_array_equal(out, np.tile(x, (2, 3)))
    check_grad(lambda a: tf.expand_dims(a, 1) * 2.0, x)


def test_one_hot_as_tf1():
    g = tf.Graph()
    with g.as_default():
        idx = tf.placeholder((None,), np.int64)
        a = tf.one_hot(idx, 3)
        b = tf.one_hot(idx, 3, on_value=5, off_value=-1)
        c = tf.one_hot(idx, 3, axis=0, dtype=np.float64)
        d = tf.one_hot([[0, 2]], 3)                          # a list becomes a graph value, as in TF1
        with pytest.raises(tf.ShapeError, match="one_hot: indices must be integers"):
            tf.one_hot(tf.placeholder((2,)), 3)
    iv = np.array([0, 2, 5, -1])                             # out of range: a row of off_value
    va, vb, vc, vd = _run(g, [a, b, c, d], {idx: iv})
    want = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    assert va.dtype == np.float32 and vb.dtype == np.int64 and vc.dtype == np.float64
    np.testing.assert_array_equal(va, want)
    np.testing.assert_array_equal(vb, np.where(want == 1, 5, -1))
    np.testing.assert_array_equal(vc, want.T)
    np.testing.assert_array_equal(vd, [[[1, 0, 0], [0, 0, 1]]])


@pytest.mark.parametrize("mode", ["CONSTANT", "reflect", "Symmetric"])
def test_pad_modes_against_numpy_with_gradients(mode):
    x = RNG.standard_normal((3, 4))
    p = [[1, 2], [2, 1]]
    kw = {"constant_values": 1.5} if mode == "CONSTANT" else {}
    out = check_grad(lambda a: tf.pad(a, p, mode, **kw), x)
    want = np.pad(x, p, mode=mode.lower(), **kw)
    np.testing.assert_array_equal(out, want)


def test_pad_reflect_limit_is_checked_when_fed():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 3))
        y = tf.pad(x, [[2, 0], [0, 0]], mode="REFLECT")      # needs at least 3 rows: known only when fed
    assert _run(g, y, {x: np.ones((3, 3), np.float32)}).shape == (5, 3)
    with pytest.raises(tf.ShapeError, match=r"pad: reflect padding must be less than the dimension padded, got "
                                            r"\(2, 0\) for dimension 0 of size 2"):
        _run(g, y, {x: np.ones((2, 3), np.float32)})


def test_slice_as_tf1():
    x = RNG.standard_normal((4, 5))
    out = check_grad(lambda a: tf.slice(a, [1, 2], [-1, 2]), x)
    np.testing.assert_array_equal(out, x[1:, 2:4])
    g = tf.Graph()
    with g.as_default():
        k = tf.placeholder((4, 5))
        with pytest.raises(ValueError, match=r"slice: begin\[1\]=4, size\[1\]=2 is out of bounds for dimension 1 "
                                             r"of size 5"):
            tf.slice(k, [0, 4], [1, 2])
        u = tf.placeholder((None, 5))
        s = tf.slice(u, [1, 0], [2, -1])
    assert s.shape == (2, 5)
    np.testing.assert_array_equal(_run(g, s, {u: np.ones((3, 5), np.float32)}), np.ones((2, 5)))
    # numpy would shorten a slice past the end of the fed dimension: TF1 refuses it
    with pytest.raises(tf.ShapeError, match="slice: size asks for 2 entries along dimension 0, the fed input has "
                                            "only 1 there"):
        _run(g, s, {u: np.ones((2, 5), np.float32)})


# --------------------------------------------------------------------------
# gathers, masks, where
# --------------------------------------------------------------------------

def test_gather_nd_and_gather_axis_against_numpy_with_gradients():
    x = RNG.standard_normal((3, 4, 2))
    idx = np.array([[0, 1], [2, 3], [0, 1]])                   # a repeated pair: gradients add up
    out = check_grad(lambda a: tf.gather_nd(a, idx), x)
    np.testing.assert_array_equal(out, x[idx[:, 0], idx[:, 1]])
    out = check_grad(lambda a: tf.gather(a, np.array([[2, 0], [1, 1]]), axis=1), x)
    np.testing.assert_array_equal(out, np.take(x, [[2, 0], [1, 1]], axis=1))
    out = check_grad(lambda a: tf.gather(a, [2, 0, 2]), x)
    np.testing.assert_array_equal(out, x[[2, 0, 2]])
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((3, 2))
        i = tf.placeholder((None, 2), np.int64)
        y = tf.gather_nd(p, i)
    with pytest.raises(IndexError, match=r"gather_nd: indices\[..., 1\] = -1 is out of range for params.shape\[1\]=2"):
        _run(g, y, {p: np.zeros((3, 2), np.float32), i: [[0, -1]]})


def test_boolean_mask_against_numpy_with_gradients():
    x = RNG.standard_normal((3, 4, 2))
    m2 = RNG.random((3, 4)) > 0.5
    m1 = np.array([True, False, True, True])
    out = check_grad(lambda a: tf.boolean_mask(a, m2), x)
    np.testing.assert_array_equal(out, x[m2])
    out = check_grad(lambda a: tf.boolean_mask(a, m1, axis=1), x)
    np.testing.assert_array_equal(out, x[:, m1])
    g = tf.Graph()
    with g.as_default():
        t = tf.placeholder((None, 2))
        y = tf.boolean_mask(t, tf.greater(tf.reduce_sum(t, 1), 0.0))
    assert y.shape == (None, 2)
    np.testing.assert_array_equal(_run(g, y, {t: [[1, 1], [-1, -1], [2, 0]]}), [[1, 1], [2, 0]])


def test_where_follows_tf1_row_rule_and_lists_coordinates():
    # a square x: numpy would broadcast the vector condition along the last axis (columns),
    # TF1's tf.where picks whole rows
    x = np.arange(9.0).reshape(3, 3)
    c = np.array([True, False, True])
    g = tf.Graph()
    with g.as_default():
        px, py = tf.placeholder((3, 3)), tf.placeholder((3, 3))
        pc = tf.placeholder((3,), np.bool_)
        rows = tf.where(pc, px, py)
        cols = tf.where_v2(pc, px, py)                        # where_v2 broadcasts, as numpy
        coords = tf.where(tf.greater(px, 4.0))
        with pytest.raises(ValueError, match="where: x and y must both be non-None or both be None"):
            tf.where(pc, px)
    vr, vc, vk = _run(g, [rows, cols, coords], {px: x, py: -x, pc: c})
    np.testing.assert_array_equal(vr, np.where(c[:, None], x, -x))
    np.testing.assert_array_equal(vc, np.where(c, x, -x))
    assert not np.array_equal(vr, vc)
    np.testing.assert_array_equal(vk, np.argwhere(x > 4))
    assert vk.dtype == np.int64
    out = check_grad(lambda a, b: tf.where(c, a, b), x, -x, shapes=[(3, 3), (3, 3)])
    np.testing.assert_array_equal(out, np.where(c[:, None], x, -x))


def test_split_and_squeeze_as_tf1():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((4, 6))
        three = tf.split(p, 3, axis=1)                        # an int: that many parts (torch: parts of that size)
        sized = tf.split(p, [1, -1, 2], 1)
        u = tf.placeholder((None, 6))
        rows = tf.split(u, [1, 2], 0)                          # the unknown dimension is checked when fed
        with pytest.raises(ValueError, match="split: dimension 1 of size 6 is not divisible by "
                                             "num_or_size_splits=4"):
            tf.split(p, 4, 1)
        with pytest.raises(ValueError, match=r"split: dimension 0 of shape \(\?, 6\) must be known to split it"):
            tf.split(u, 2)
        s = tf.squeeze(tf.reshape(p, [4, 1, 6, 1]), [1, 3])
        s_all = tf.squeeze(tf.reshape(p, [1, 4, 1, 6]))
        with pytest.raises(ValueError, match=r"squeeze: can not squeeze dim\[1\], expected a dimension of 1, got 6"):
            tf.squeeze(p, 1)                                    # torch would return p unchanged
        su = tf.squeeze(tf.expand_dims(u, 1), axis=0)
    v3, vs, vrows, vsq, vsa = _run(g, [three, sized, rows, s, s_all], {p: x, u: x[:3]})
    assert [a.shape for a in v3] == [(4, 2)] * 3 and [a.shape for a in vs] == [(4, 1), (4, 3), (4, 2)]
    np.testing.assert_array_equal(np.concatenate(vs, 1), x)
    assert vsq.shape == (4, 6) and vsa.shape == (4, 6)
    with pytest.raises(tf.ShapeError, match="split: num_or_size_splits needs dimension 0 of the input to be 3, the "
                                            "fed input has 4"):
        _run(g, rows, {u: x})
    assert _run(g, su, {u: x[:1]}).shape == (1, 6)
    with pytest.raises(tf.ShapeError, match="squeeze: axis needs dimension 0 of the input to be 1, the fed input has "
                                            "3"):
        _run(g, su, {u: x[:3]})


def test_reshape_with_run_time_dimensions_and_gradient():
    x = RNG.standard_normal((3, 4))
    out = check_grad(lambda a: tf.reshape(a, [tf.shape(a)[0], -1, 2]), x)
    np.testing.assert_array_equal(out, x.reshape(3, -1, 2))
    out = check_grad(lambda a: tf.reshape(a * 1.0, tf.shape(a)), x)
    np.testing.assert_array_equal(out, x)


def test_stop_gradient():
    x = RNG.standard_normal((2, 3))
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((2, 3), np.float64)
        y = tf.reduce_sum(p * tf.stop_gradient(p * 3.0))
        gp, = tf.gradients(y, [p])
    np.testing.assert_allclose(_run(g, gp, {p: x}), 3 * x)
    e = dn.tensor(x, requires_grad=True)
    (e * tf.stop_gradient(e * 3.0)).sum().backward()          # eager tensors too
    np.testing.assert_allclose(e.grad.data, 3 * x)


# --------------------------------------------------------------------------
# reductions and TF1's dtype rules
# --------------------------------------------------------------------------

def test_reduce_any_all_against_numpy():
    b = RNG.random((3, 4)) > 0.6
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((None, 4), np.bool_)
        outs = [tf.reduce_any(p), tf.reduce_all(p), tf.reduce_any(p, 1), tf.reduce_all(p, axis=0, keepdims=True),
                tf.reduce_all(p, [0, 1])]
        with pytest.raises(tf.ShapeError, match="reduce_any: input_tensor must be boolean, got dtype float32"):
            tf.reduce_any(tf.placeholder((2,)))
    got = _run(g, outs, {p: b})
    want = [b.any(), b.all(), b.any(1), b.all(0, keepdims=True), b.all()]
    for a, w in zip(got, want):
        np.testing.assert_array_equal(a, w)
        assert np.asarray(a).dtype == np.bool_
    empty = _run(g, outs[:2], {p: np.zeros((0, 4), bool)})    # TF1: any of nothing is False, all is True
    assert empty == [False, True]


def test_argmax_argmin_default_to_axis_0():
    x = RNG.standard_normal((3, 4))
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((3, 4))
        outs = [tf.argmax(p), tf.argmin(p), tf.argmax(p, 1), tf.argmin(p, 1, "am", None, np.int32),
                tf.argmax(p, dimension=1)]
    got = _run(g, outs, {p: x})
    np.testing.assert_array_equal(got[0], x.argmax(0))        # numpy and torch would flatten
    np.testing.assert_array_equal(got[1], x.argmin(0))
    np.testing.assert_array_equal(got[2], x.argmax(1))
    np.testing.assert_array_equal(got[3], x.argmin(1))
    np.testing.assert_array_equal(got[4], x.argmax(1))
    assert got[0].dtype == np.int64 and got[3].dtype == np.int32 and outs[3].name == "am"


def test_reduce_sum_and_mean_of_integers_keep_the_dtype():
    v = np.array([[1, 2], [4, -7]], np.int32)
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((2, 2), np.int32)
        s, m, m1 = tf.reduce_sum(p), tf.reduce_mean(p), tf.reduce_mean(p, 0)
        with pytest.raises(tf.ShapeError, match="reduce_sum: input_tensor has dtype bool"):
            tf.reduce_sum(tf.placeholder((2,), np.bool_))
    vs, vm, vm1 = _run(g, [s, m, m1], {p: v})
    assert vs == 0 and vs.dtype == np.int32
    assert vm == 0 and vm.dtype == np.int32                   # 0 / 4: TF1 divides integers
    np.testing.assert_array_equal(vm1, [2, -2])               # 5 / 2 and -5 / 2, truncated toward zero


def test_matmul_flags_swap_the_last_two_dimensions():
    a = RNG.standard_normal((2, 4, 3))
    b = RNG.standard_normal((2, 5, 3))
    out = check_grad(lambda x, y: tf.matmul(x, y, transpose_b=True), a, b, shapes=[(2, 4, 3), (2, 5, 3)])
    np.testing.assert_allclose(out, a @ b.transpose(0, 2, 1))
    out = check_grad(lambda x, y: tf.matmul(x, y, adjoint_a=True), a, a, shapes=[(2, 4, 3), (2, 4, 3)])
    np.testing.assert_allclose(out, a.transpose(0, 2, 1) @ a)


def test_math_names_take_name():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((2,))
        e = tf.exp(p, name="e")
        m = tf.maximum(p, 0.5, name="m")
        n = tf.add_n([p, p, e], name="n")
        land = tf.logical_and(tf.greater(p, 0.0), tf.less(p, 2.0))
        lnot = tf.logical_not(land)
        lor = tf.logical_or(lnot, tf.equal(p, 1.0))
    assert (e.name, m.name, n.name) == ("e", "m", "n")
    v = np.array([1.0, 3.0], np.float32)
    ve, vm, vn, va, vno, vo = _run(g, [e, m, n, land, lnot, lor], {p: v})
    np.testing.assert_allclose(vn, 2 * v + np.exp(v), rtol=1e-6)
    assert va.tolist() == [True, False] and vno.tolist() == [False, True] and vo.tolist() == [True, True]


# --------------------------------------------------------------------------
# gradient clipping
# --------------------------------------------------------------------------

def test_clip_by_global_norm_as_tf1():
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal(4)
    g = tf.Graph()
    with g.as_default():
        pa, pb = tf.placeholder((2, 3), np.float64), tf.placeholder((4,), np.float64)
        (ca, none, cb), norm = tf.clip_by_global_norm([pa, None, pb], 1.5)
        (ua, ub), unorm = tf.clip_by_global_norm([pa, pb], 100.0)
        gn = tf.global_norm([pa, pb])
        ga, = tf.gradients(tf.reduce_sum(ca), [pa])
    assert none is None
    vca, vcb, vn, vua, vgn = _run(g, [ca, cb, norm, ua, gn], {pa: a, pb: b})
    n = np.sqrt((a ** 2).sum() + (b ** 2).sum())
    np.testing.assert_allclose([vn, vgn], [n, n])
    np.testing.assert_allclose(vca, a * 1.5 / n)
    np.testing.assert_allclose(vcb, b * 1.5 / n)
    np.testing.assert_array_equal(vua, a)                     # under the limit: unchanged
    with np.errstate(invalid="ignore"):                       # inf - inf, on purpose
        vca_inf = _run(g, ca, {pa: np.full((2, 3), np.inf), pb: b})
    assert np.isnan(vca_inf).all()                             # TF1: an infinite norm gives NaN
    # the gradient through the clipping (the norm depends on pa too) against finite differences
    check_grad(lambda x: tf.clip_by_global_norm([x, x * 2.0], 1.0)[0][1], a)
    assert _run(g, ga, {pa: a, pb: b}).shape == (2, 3)


# --------------------------------------------------------------------------
# assign, control_dependencies, no_op
# --------------------------------------------------------------------------

def test_module_level_assign_ops():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        a = tf.assign(v, [5.0, 6.0], name="set")
        b = tf.assign_add(v, [1.0, 1.0])
        c = tf.assign_sub(v, [2.0, 0.0])
        with pytest.raises(TypeError, match="assign_add: ref must be a Variable"):
            tf.assign_add(tf.constant(1.0), 1.0)
        with pytest.raises(ValueError, match="assign: validate_shape=False"):
            tf.assign(v, [1.0], validate_shape=False)
    assert a.name == "set"
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        np.testing.assert_array_equal(s.run(a), [5, 6])
        np.testing.assert_array_equal(s.run(b), [6, 7])
        np.testing.assert_array_equal(s.run(c), [4, 7])
        np.testing.assert_array_equal(s.run(v), [4, 7])


def test_control_dependencies_run_the_controls_first_as_tf1():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0, name="v")
        x = tf.placeholder((), name="x")
        inc = tf.assign_add(v, 1.0)
        before = v * 10.0                                      # made outside: reads v as the run started
        with tf.control_dependencies([inc]):
            after = v * 10.0                                   # made inside: reads v after inc
            read = v.read_value()
            same = tf.identity(x)                              # a node, so fetching it runs inc
            nothing = tf.no_op()
        w = tf.Variable(3.0, name="w")
        with tf.control_dependencies([inc]):
            loss = w * w * x                                   # w is not written by inc: its value as at the start
        gw, = tf.gradients(loss, [w])
        with pytest.raises(TypeError, match="control_dependencies: 1.0 is not a graph value"):
            with tf.control_dependencies([1.0]):
                pass
        with tf.control_dependencies([inc]):
            with tf.control_dependencies(None):
                free = v * 1.0                                 # None clears the controls
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        assert s.run(before) == 10.0 and s.run(v) == 1.0      # fetching `before` does not run inc
        assert s.run(after) == 20.0 and s.run(v) == 2.0       # fetching `after` runs inc first
        assert s.run([before, after]) == [20.0, 30.0]
        assert s.run(read) == 4.0
        assert s.run(same, {x: 7.0}) == 7.0 and s.run(v) == 5.0
        assert s.run(nothing) is None and s.run(v) == 6.0
        assert s.run(free) == 6.0 and s.run(v) == 6.0
        assert s.run(gw, {x: 2.0}) == 12.0 and s.run(v) == 7.0
    # the same on every tier: the interpreter, the generated plan, and the native tier, which leaves these
    # plans on tier 2 (it translates no control_dependencies node)
    with tf.Session(g, jit_after=2, native_after=3) as s:
        s.run(tf.global_variables_initializer(g))
        got = [s.run([before, after, read]) for _ in range(5)]
        assert {p["tier"] for p in s.stats if p["runs"] == 5} == {2}
    assert got == [[10.0 * k + 10.0, 10.0 * k + 20.0, k + 2.0] for k in range(5)]      # inc runs once per run


def test_control_dependencies_with_a_train_op():
    # the batch-norm idiom: the update ops run with every train step
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(2.0, name="w")
        count = tf.Variable(0.0, name="count")
        update = tf.assign_add(count, 1.0)
        with tf.control_dependencies([update]):
            train = tf.train.GradientDescentOptimizer(0.1).minimize(w * w)
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        for _ in range(3):
            s.run(train)
        np.testing.assert_allclose(s.run([w, count]), [2.0 * 0.8 ** 3, 3.0], rtol=1e-6)


# --------------------------------------------------------------------------
# map_fn and scan
# --------------------------------------------------------------------------

def test_map_fn_values_structures_and_gradient():
    x = RNG.standard_normal((4, 3))
    out = check_grad(lambda a: tf.map_fn(lambda r: tf.reduce_sum(r * r) * r, a), x)
    np.testing.assert_allclose(out, (x * x).sum(1, keepdims=True) * x)
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((None, 3), np.float64)
        q = tf.placeholder((None,), np.int64)
        pair = tf.map_fn(lambda e: (e[0] * 2.0, e[1] + 1), (p, q))
        sq = tf.map_fn(lambda r: tf.reduce_sum(r), p, dtype=np.float64)
        cast = tf.map_fn(lambda e: tf.cast(e, np.int64), p, dtype=np.int64)
        with pytest.raises(ValueError, match=r"map_fn: fn returned the structure \(x, x\), which does not match "
                                             r"elems"):
            tf.map_fn(lambda r: (r, r), p)
        with pytest.raises(TypeError, match="map_fn: fn's result 0 has dtype int64, expected float64"):
            tf.map_fn(lambda r: tf.cast(r, np.int64), p)
    (a, b), s, c = _run(g, [pair, sq, cast], {p: x, q: [1, 2, 3, 4]})
    np.testing.assert_allclose(a, 2 * x)
    np.testing.assert_array_equal(b, [2, 3, 4, 5])
    np.testing.assert_allclose(s, x.sum(1))
    np.testing.assert_array_equal(c, x.astype(np.int64))
    with pytest.raises(tf.ShapeError, match=r"map_fn: elems leaf 1 \(placeholder 'Placeholder_1'\) has 3 entries "
                                            r"along axis 0 but elems leaf 0 \(placeholder 'Placeholder'\) has 4"):
        _run(g, pair, {p: x, q: [1, 2, 3]})


def test_scan_as_tf1_with_gradient():
    x = RNG.standard_normal((5, 2))
    out = check_grad(lambda a: tf.scan(lambda acc, r: acc * 0.5 + r, a), x)
    want = [x[0]]
    for r in x[1:]:
        want.append(want[-1] * 0.5 + r)
    np.testing.assert_allclose(out, want)
    init = np.array([1.0, -1.0])
    out = check_grad(lambda a: tf.scan(lambda acc, r: acc * r, a, initializer=tf.constant(init), reverse=True), x)
    want, acc = np.zeros_like(x), init
    for i in range(4, -1, -1):
        acc = acc * x[i]
        want[i] = acc
    np.testing.assert_allclose(out, want)
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder((None,), np.float64)
        total, count = tf.scan(lambda a, e: (a[0] + e, a[1] + 1), p, initializer=(np.float64(0), np.int64(0)))
    vt, vc = _run(g, [total, count], {p: [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(vt, [1, 3, 6])
    np.testing.assert_array_equal(vc, [1, 2, 3])
