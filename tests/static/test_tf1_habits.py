"""TF1 habits of real scripts (issue 22, part 4): names given with ``name=``
inside ``name_scope``, placeholders in TF1's argument order and without a
shape, ``sign`` / ``size`` / ``rank`` / ``shape`` with TF1's dtypes,
``nn.dropout`` with a fed keep probability, random ops of a run-time shape,
``tf.contrib``, graph collections, a fetched Variable read as TF1's ref
variables are, and ``TensorArray`` in TF1's argument order. Values are checked against numpy, gradients through
``tf.gradients`` against finite differences or their closed form."""
import numpy as np
import pytest

import dynnets.static as tf


# --------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------

def test_name_inside_name_scope_survives_a_meta_graph(tmp_path):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        with tf.name_scope("output"):
            w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="W")
            logits = tf.nn.xw_plus_b(x, w, tf.zeros([2]), name="logits")
            pred = tf.argmax(logits, 1, name="predictions")
            mean = tf.reduce_mean(logits, name="mean")
            same = tf.add_n([x], name="sum")                  # one input: an identity of that name
            ident = tf.identity(w, name="w_read")              # a source's name stays; the identity takes this one
        with tf.name_scope("output"):                          # a second scope of that name is output_1
            again = tf.nn.relu(x, name="predictions")
    assert (pred.name, mean.name, same.name, ident.name, again.name) == (
        "output/predictions", "output/mean", "output/sum", "output/w_read", "output_1/predictions")
    assert w.name == "output/W" and x.name == "x"
    assert g.get_operation_by_name("output/predictions").outputs[0] is pred
    assert g.get_tensor_by_name("output/logits:0") is logits
    feed = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], np.float32)
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        want = s.run(pred, {x: feed})
        path = tf.train.Saver().save(s, str(tmp_path / "m"))
    g2 = tf.Graph()
    with g2.as_default(), tf.Session(g2) as s:
        tf.train.import_meta_graph(path + ".meta").restore(s, path)
        got = s.run(g2.get_operation_by_name("output/predictions").outputs[0], {"x:0": feed})
    np.testing.assert_array_equal(got, want)
    assert want.tolist() == [1, 1]


# --------------------------------------------------------------------------
# placeholders: TF1's argument order, and no shape (an unknown rank)
# --------------------------------------------------------------------------

def test_placeholder_in_tf1s_order_and_dynnets_older_one():
    with tf.Graph().as_default():
        a = tf.placeholder(tf.int32, shape=[None, 5], name="a")
        b = tf.placeholder(tf.float64, [None, 2])
        c = tf.placeholder(dtype=tf.int64, shape=(3,))
        d = tf.placeholder(shape=[2])                       # dtype defaults to float32
        e = tf.placeholder((None, 4), np.int64, name="e")   # dynnets' older order still works
        f = tf.placeholder(tf.float32, shape=[])
    assert (a.dtype, tuple(a.shape), a.name) == (np.int32, (None, 5), "a")
    assert (b.dtype, tuple(b.shape)) == (np.float64, (None, 2))
    assert (c.dtype, tuple(c.shape)) == (np.int64, (3,))
    assert (d.dtype, tuple(d.shape)) == (np.float32, (2,))
    assert (e.dtype, tuple(e.shape)) == (np.int64, (None, 4))
    assert tuple(f.shape) == () and f.ndim == 0


def test_placeholder_without_a_shape_takes_any_rank():
    g = tf.Graph()
    with g.as_default():
        keep = tf.placeholder(tf.float32, name="keep")
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = keep * x + 1.0
        total = tf.reduce_sum(y)
        gx, gk = tf.gradients(total, [x, keep])
    assert keep.shape.ndims is None and y.shape.ndims is None and y.ndim is None
    assert repr(y.get_shape()) == "<unknown>" and y.shape[0] is None and tuple(total.shape) == ()
    assert "shape=<unknown>" in repr(keep)
    with pytest.raises(ValueError, match="'keep' has an unknown rank.*as_list"):
        keep.shape.as_list()
    with pytest.raises(ValueError, match="'add' has an unknown rank.*length"):
        len(y.shape)
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    for session_kw in ({}, {"optimize": False}):
        with tf.Session(g, **session_kw) as s:
            for k in (0.5, [1.0, 2.0, 3.0], np.ones((2, 3), np.float32) * 2):
                got, tot, dx, dk = s.run([y, total, gx, gk], {keep: k, x: xs})
                kk = np.asarray(k, np.float32)
                np.testing.assert_allclose(got, kk * xs + 1)
                assert tot == pytest.approx(float(np.sum(kk * xs + 1)))
                np.testing.assert_allclose(dx, np.broadcast_to(kk, xs.shape))
                # d total / d keep: x summed down to keep's own shape
                want = xs.sum() if kk.ndim == 0 else xs.sum(0) if kk.ndim == 1 else xs
                assert np.shape(dk) == kk.shape
                np.testing.assert_allclose(dk, want)
            with pytest.raises(tf.ShapeError, match="mul: shapes cannot be broadcast together"):
                s.run(y, {keep: np.ones((2, 2), np.float32), x: xs})


@pytest.mark.parametrize("make", [lambda k, x: tf.matmul(k, x), lambda k, x: tf.reshape(k, [-1]),
                                  lambda k, x: tf.concat([k, x], 0), lambda k, x: k[0],
                                  lambda k, x: tf.reduce_sum(k * 2.0, axis=0), lambda k, x: tf.nn.softmax(k)],
                         ids=["matmul", "reshape", "concat", "getitem", "reduce-axis", "softmax"])
def test_an_op_that_needs_the_rank_names_the_placeholder(make):
    with tf.Graph().as_default():
        keep = tf.placeholder(tf.float32, name="dropout_keep_prob")
        x = tf.placeholder(tf.float32, [2, 2], name="x")
        with pytest.raises(tf.ShapeError, match=r"unknown rank.*placeholder 'dropout_keep_prob'|"
                                                r"'dropout_keep_prob' has an unknown rank") as ei:
            make(keep, x)
    assert "shape=[]" in str(ei.value)


def test_an_unknown_rank_cannot_enter_a_loop_body():
    with tf.Graph().as_default():
        keep = tf.placeholder(tf.float32, name="keep")
        with pytest.raises(tf.ShapeError, match="'keep' has an unknown rank: a while_loop body or cond branch"):
            tf.while_loop(lambda i: i < 3.0, lambda i: i + keep, [tf.constant(0.0)])


def test_placeholder_without_a_shape_survives_a_meta_graph():
    g = tf.Graph()
    with g.as_default():
        keep = tf.placeholder(tf.float32, name="keep")
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        tf.identity(keep * x, name="y")
        meta = tf.train.export_meta_graph(graph=g)
    g2 = tf.Graph()
    assert tf.train.import_meta_graph(meta, graph=g2) is None          # no variables: TF1 returns None
    assert g2.get_tensor_by_name("keep:0").shape.ndims is None
    with tf.Session(g2) as s:
        np.testing.assert_array_equal(s.run("y:0", {"keep:0": 2.0, "x:0": np.ones((1, 3))}), [[2.0, 2.0, 2.0]])


# --------------------------------------------------------------------------
# sign, size, rank, shape and range with TF1's dtypes
# --------------------------------------------------------------------------

def test_sign_values_dtypes_and_zero_gradient():
    g = tf.Graph()
    with g.as_default():
        i = tf.constant(np.array([[-3, 0, 2]], np.int32))
        x = tf.placeholder(tf.float64, [4], name="x")
        s = tf.sign(x, name="s")
        loss = tf.reduce_sum(s * x)                 # d/dx sign(x) x = sign(x) (sign's own gradient is 0)
        gx, = tf.gradients(loss, [x])
        gs, = tf.gradients(tf.reduce_sum(tf.sign(x)), [x])
    assert s.name == "s" and tf.sign(i).dtype == np.int32
    xv = np.array([-2.0, 0.0, 3.5, np.nan])
    with tf.Session(g) as sess:
        ri, rs, rg, rgs = sess.run([tf.sign(tf.abs(i)), s, gx, gs], {x: xv})
    assert ri.tolist() == [[1, 0, 1]] and ri.dtype == np.int32
    np.testing.assert_array_equal(rs, [-1.0, 0.0, 1.0, np.nan])
    np.testing.assert_array_equal(rg, [-1.0, 0.0, 1.0, np.nan])
    np.testing.assert_array_equal(rgs, np.zeros(4))


def test_shape_size_rank_are_int32_as_tf1():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        u = tf.placeholder(tf.float32, name="u")                 # unknown rank
        outs = [tf.shape(x), tf.shape(x, out_type=tf.int64), tf.size(x), tf.size(x, out_type=tf.int64), tf.rank(x),
                tf.shape(u), tf.size(u), tf.rank(u), tf.size(tf.zeros([2, 5])), tf.rank(tf.zeros([2, 5]))]
        with pytest.raises(TypeError, match="shape: out_type must be int32 or int64, got float32"):
            tf.shape(x, out_type=tf.float32)
    assert [o.dtype for o in outs] == [np.int32, np.int64, np.int32, np.int64, np.int32, np.int32, np.int32,
                                       np.int32, np.int32, np.int32]
    assert tuple(outs[0].shape) == (2,) and tuple(outs[5].shape) == (None,)
    with tf.Session(g) as s:
        got = s.run(outs, {x: np.zeros((4, 3), np.float32), u: np.zeros((2, 3, 5), np.float32)})
    assert [np.asarray(v).tolist() for v in got] == [[4, 3], [4, 3], 12, 12, 2, [2, 3, 5], 30, 3, 10, 2]


def test_range_dtypes_follow_tf1():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        n = tf.shape(x)[0]
        cases = {"int": tf.range(5), "shape": tf.range(0, n), "int64": tf.range(tf.constant(np.int64(4))),
                 "float": tf.range(0.0, 1.0, 0.25), "mixed": tf.range(1, 2.5), "dtype": tf.range(3, dtype=tf.float64),
                 "neg": tf.range(5, 1, -2), "f32-accumulated": tf.range(0.0, 1.0, 0.1)}
    want_dt = {"int": np.int32, "shape": np.int32, "int64": np.int64, "float": np.float32, "mixed": np.float32,
               "dtype": np.float64, "neg": np.int32, "f32-accumulated": np.float32}
    assert {k: v.dtype for k, v in cases.items()} == {k: np.dtype(v) for k, v in want_dt.items()}
    # the script's idiom: tf.range(0, batch_size) * max_length + (length - 1) stays int32
    with g.as_default():
        idx = tf.range(0, n) * 16 + (tf.cast(tf.reduce_sum(tf.ones_like(x), 1), tf.int32) - 1)
    assert idx.dtype == np.int32
    with tf.Session(g) as s:
        got = s.run({**cases, "idx": idx}, {x: np.zeros((3, 3), np.float32)})
    assert got["int"].tolist() == [0, 1, 2, 3, 4] and got["shape"].tolist() == [0, 1, 2]
    assert got["float"].tolist() == [0.0, 0.25, 0.5, 0.75] and got["mixed"].tolist() == [1.0, 2.0]
    assert got["neg"].tolist() == [5, 3] and got["idx"].tolist() == [2, 18, 34]
    # TF1's float range accumulates in the dtype: val += delta, ten values up to 0.90000004
    acc = np.float32(0.0)
    want = []
    for _ in range(10):
        want.append(acc)
        acc = np.float32(acc + np.float32(0.1))
    np.testing.assert_array_equal(got["f32-accumulated"], np.array(want, np.float32))
    with tf.Graph().as_default(), tf.Session() as s:
        with pytest.raises(ValueError, match="range: requires start <= limit when delta > 0"):
            s.run(tf.range(3, 1))


# --------------------------------------------------------------------------
# tf.contrib: xavier_initializer, l1/l2 regularizers, rnn cells
# --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(300, 100), (3, 3, 40, 80)], ids=["matrix", "conv"])
def test_contrib_xavier_initializer_is_tf1s_variance_scaling_fan_avg(shape):
    fan_in, fan_out = int(np.prod(shape[:-1])), int(np.prod(shape[:-2])) * shape[-1]
    n = (fan_in + fan_out) / 2.0
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        u = tf.get_variable("u", shape, initializer=tf.contrib.layers.xavier_initializer())
        nrm = tf.get_variable("n", shape, initializer=tf.contrib.layers.xavier_initializer(uniform=False, seed=1))
        again = tf.contrib.layers.xavier_initializer(uniform=False, seed=1)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            uv, nv = s.run([u, nrm])
    assert uv.dtype == np.float32 and uv.shape == shape
    # uniform: U[-sqrt(3 / n), sqrt(3 / n)], n = (fan_in + fan_out) / 2 (variance 1 / n)
    limit = np.sqrt(3.0 / n)
    assert np.abs(uv).max() <= limit and np.abs(uv).max() > 0.98 * limit
    assert uv.var() == pytest.approx(1.0 / n, rel=0.03)
    # normal: truncated at two standard deviations of sqrt(1.3 / n) (contrib's 1.3 undoes most of the truncation)
    sd = np.sqrt(1.3 / n)
    assert np.abs(nv).max() <= 2 * sd and np.abs(nv).max() > 1.9 * sd
    assert nv.std() == pytest.approx(sd * 0.87962566, rel=0.03)
    with tf.Graph().as_default():
        tf.set_random_seed(5)
        np.testing.assert_array_equal(again(shape), tf.contrib.layers.xavier_initializer(False, 1)(shape))
    with pytest.raises(TypeError, match="xavier_initializer: dtype must be a floating-point type, got int32"):
        tf.contrib.layers.xavier_initializer(dtype=tf.int32)


def test_contrib_regularizers_values_and_unknown_names():
    w0 = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    g = tf.Graph()
    with g.as_default():
        with tf.variable_scope("layer", regularizer=tf.contrib.layers.l2_regularizer(0.1)):
            w = tf.get_variable("w", initializer=w0)
            b = tf.get_variable("b", [2], regularizer=tf.contrib.layers.l1_regularizer(0.5),
                                initializer=tf.constant_initializer([1.0, -4.0]))
        assert tf.contrib.layers.l2_regularizer(0.0)(w) is None
        reg = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        total = tf.add_n(reg)
    assert [r.name for r in reg] == ["layer/w/Regularizer/l2_regularizer", "layer/b/Regularizer/l1_regularizer"]
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        l2, l1, t = s.run(reg + [total])
    assert l2 == pytest.approx(0.1 * float((w0 ** 2).sum()) / 2, rel=1e-6)
    assert l1 == pytest.approx(0.5 * 5.0, rel=1e-6) and t == pytest.approx(l2 + l1, rel=1e-6)
    with pytest.raises(ValueError, match="l2_regularizer: setting a scale less than 0 on a regularizer: -1"):
        tf.contrib.layers.l2_regularizer(-1.0)
    with pytest.raises(TypeError, match="l1_regularizer: scale must be a float, got '0.1'"):
        tf.contrib.layers.l1_regularizer("0.1")
    assert tf.contrib.rnn.BasicLSTMCell is tf.nn.rnn_cell.BasicLSTMCell
    assert tf.contrib.rnn.DropoutWrapper is tf.nn.rnn_cell.DropoutWrapper
    with pytest.raises(AttributeError, match="tf.contrib.layers.batch_norm is not provided by dynnets.static"):
        tf.contrib.layers.batch_norm
    with pytest.raises(AttributeError, match="tf.contrib.learn is not provided by dynnets.static"):
        tf.contrib.learn


# --------------------------------------------------------------------------
# collections
# --------------------------------------------------------------------------

def test_collections_hold_what_tf1_puts_there():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        with tf.variable_scope("enc"):
            w = tf.get_variable("w", [2, 2])
        with tf.variable_scope("dec"):
            v = tf.get_variable("v", [2], trainable=False)
        loss = tf.reduce_sum(tf.matmul(x, w))
        step = tf.train.get_or_create_global_step()
        summ = tf.summary.scalar("loss", loss)
        tf.add_to_collection("outputs", loss)
        tf.add_to_collections(["a", "b"], w)
        tf.add_to_collection(tf.GraphKeys.TRAINABLE_VARIABLES, w)       # already there: listed once
    with g.as_default():
        assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES) == [w, v, step] == tf.global_variables()
        assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES) == [w] == tf.trainable_variables()
        assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="dec") == [v]
        assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="dec") == []
        assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="e.c/") == [w]    # a regular expression
        assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [summ]
        assert tf.get_collection(tf.GraphKeys.GLOBAL_STEP) == [step]
        assert tf.get_collection("outputs") == [loss] and tf.get_collection("a") == tf.get_collection("b") == [w]
        assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == [] and tf.get_collection("nothing") == []
        tf.get_collection("outputs").append(w)                            # a copy, as TF1's
        assert tf.get_collection("outputs") == [loss]
    assert tf.GraphKeys.VARIABLES == tf.GraphKeys.GLOBAL_VARIABLES == "variables"


# --------------------------------------------------------------------------
# a Variable fetched in the run that writes it: its value when the run ends
# --------------------------------------------------------------------------

@pytest.mark.parametrize("session_kw", [{"jit_after": 10 ** 9, "native_after": None}, {},
                                        {"jit_after": 1, "native_after": 2}, {"optimize": False}],
                         ids=["interpreter", "default", "native", "unoptimised"])
def test_fetched_global_step_is_the_step_after_the_update(session_kw):
    """TF1's ``_, step = sess.run([train_op, global_step])`` gives 1 after the
    first step (its ref variables are read when the run ends;
    tensorflow/tensorflow#26085: "tf1 prefers to give you the value after");
    a value computed from a variable in that run still sees the value the
    step started from."""
    xs = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        w = tf.Variable(np.array([0.5, -0.25], np.float32), name="w")
        loss = tf.reduce_sum(tf.square(tf.reduce_sum(x * w, 1)))
        global_step = tf.Variable(0, name="global_step", trainable=False)
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=global_step)
        w_times_one = w * 1.0
        bump = w.assign_add(np.ones(2, np.float32))
    with tf.Session(g, **session_kw) as sess:
        sess.run(tf.global_variables_initializer(g))
        assert sess.run(global_step) == 0
        steps, ws = [], []
        for k in range(4):
            w_before = sess.run(w)
            grad = 2 * (xs @ w_before) @ xs
            if k % 2:
                step, _, w_seen, w_fetched, lv = sess.run([global_step, train_op, w_times_one, w, loss], {x: xs})
            else:
                _, step, w_seen, w_fetched, lv = sess.run([train_op, global_step, w_times_one, w, loss], {x: xs})
            steps.append(int(step))
            np.testing.assert_array_equal(w_seen, w_before)                     # computed: before the step
            np.testing.assert_allclose(w_fetched, w_before - 0.01 * grad, rtol=1e-6)   # the Variable: after
            np.testing.assert_array_equal(w_fetched, sess.run(w))
            assert lv == pytest.approx(float(((xs @ w_before) ** 2).sum()), rel=1e-6)
            ws.append(w_fetched)
        assert steps == [1, 2, 3, 4] and sess.run(global_step) == 4
        ws[-1][...] = 100.0                                                  # the caller's copy
        assert sess.run(w)[0] != 100.0
        # an assign fetched with the variable; a fetch without a writer reads the variable as it is
        before = sess.run(w)
        got_bump, got_w = sess.run([bump, w])
        np.testing.assert_array_equal(got_bump, before + 1.0)
        np.testing.assert_array_equal(got_w, before + 1.0)
        got_w, got_step = sess.run([w, global_step])
        np.testing.assert_array_equal(got_w, before + 1.0)
        assert got_step == 4


# --------------------------------------------------------------------------
# TensorArray in TF1's argument order
# --------------------------------------------------------------------------

def test_tensor_array_takes_tf1s_positional_arguments():
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3, 2], name="x")
        # (dtype, size, dynamic_size, clear_after_read, tensor_array_name, handle, flow, infer_shape, element_shape)
        ta = tf.TensorArray(tf.float32, 3, False, True, "squares", None, None, True, [None])
        assert ta.element_shape == (None,) and ta.name == "squares"

        def body(i, acc):
            row = tf.gather(x, i)
            return i + 1, acc.write(i, row * row + ta_in.read(i))      # reads ta_in twice: no clearing here

        ta_in = tf.TensorArray(tf.float32, size=3, clear_after_read=True).unstack(x)
        _, out = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), ta])
        twice = ta_in.read(1) + ta_in.read(1)
        rebuilt = tf.TensorArray(tf.float32, flow=out.flow, element_shape=[2])     # an array from its flow
        grown = tf.TensorArray(tf.float32, 0, True, None, None, None, None, True, (2,)).write(4, x[0])
        stacked, again, tw, gs = out.stack(), rebuilt.stack(), twice, grown.size()
        with pytest.raises(TypeError, match=r"TensorArray: clear_after_read \(TF1's argument 4\) must be a bool or "
                                            r"None, got \(2,\) \(element_shape is TF1's ninth"):
            tf.TensorArray(tf.float32, 3, False, (2,))                      # dynnets' older (..., element_shape, ...)
        with pytest.raises(TypeError, match="tensor_array_name .* must be a string, got 3"):
            tf.TensorArray(tf.float32, 3, False, None, 3)
        with pytest.raises(ValueError, match="TensorArray: handle= is not supported"):
            tf.TensorArray(tf.float32, None, None, None, None, x)
    with tf.Session(g) as s:
        got, got_again, got_twice, n = s.run([stacked, again, tw, gs], {x: xs})
    np.testing.assert_array_equal(got, xs * xs + xs)
    np.testing.assert_array_equal(got_again, got)
    np.testing.assert_array_equal(got_twice, 2 * xs[1])
    assert n == 5


# --------------------------------------------------------------------------
# constant(value, dtype, shape) and Variable(value): TF1's dtypes and fills
# --------------------------------------------------------------------------

def test_constant_dtypes_and_shapes_follow_tf1():
    g = tf.Graph()
    with g.as_default():
        c = {"int": tf.constant(5), "ints": tf.constant([[1, 2], [3, 4]]), "big": tf.constant([1, 2 ** 40]),
             "float": tf.constant(0.1), "bool": tf.constant(True), "np_int64": tf.constant(np.int64(5)),
             "np_f64": tf.constant(np.float64(0.1)), "arr_i64": tf.constant(np.arange(3)),
             "dtype": tf.constant(5, tf.float64), "fill": tf.constant(7, shape=[2, 3]),
             "last": tf.constant([1.0, 2.0], tf.float32, [2, 2]), "reshape": tf.constant([1, 2, 3, 4], shape=[2, 2]),
             "empty_value": tf.constant([], tf.float32, [3]), "empty_shape": tf.constant(5, shape=[0, 2])}
        step = tf.Variable(0, name="global_step", trainable=False)     # the TF1 script's: int32 as in TF1
        w = tf.Variable([1.5, 2.0])
        with pytest.raises(ValueError, match=r"constant: a value of 4 elements cannot make a constant of shape "
                                             r"\(3,\) \(3 elements\)"):
            tf.constant([1, 2, 3, 4], shape=[3])
    want = {"int": np.int32, "ints": np.int32, "big": np.int64, "float": np.float32, "bool": np.bool_,
            "np_int64": np.int64, "np_f64": np.float64, "arr_i64": np.int64, "dtype": np.float64, "fill": np.int32,
            "last": np.float32, "reshape": np.int32, "empty_value": np.float32, "empty_shape": np.int32}
    assert {k: v.dtype for k, v in c.items()} == {k: np.dtype(v) for k, v in want.items()}
    assert step.dtype == np.int32 and w.dtype == np.float32
    with tf.Session(g) as s:
        s.run(tf.global_variables_initializer(g))
        got = s.run(c)
        assert s.run(step + 1) == 1 and s.run(step + 1).dtype == np.int32
    assert got["fill"].tolist() == [[7, 7, 7], [7, 7, 7]]
    assert got["last"].tolist() == [[1.0, 2.0], [2.0, 2.0]]                  # TF1 repeats the last value
    assert got["reshape"].tolist() == [[1, 2], [3, 4]] and got["big"].tolist() == [1, 2 ** 40]
    assert got["empty_value"].tolist() == [0.0, 0.0, 0.0] and got["empty_shape"].shape == (0, 2)
    assert got["np_f64"] == 0.1                                              # a numpy float64 keeps its precision
