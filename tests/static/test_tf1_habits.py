"""TF1 habits of real scripts (issue 22, part 4): names given with ``name=``
inside ``name_scope``, placeholders in TF1's argument order and without a
shape, ``sign`` / ``size`` / ``rank`` / ``shape`` with TF1's dtypes,
``nn.dropout`` with a fed keep probability, random ops of a run-time shape,
``tf.contrib``, graph collections, and a fetched Variable read as TF1's ref
variables are. Values are checked against numpy, gradients through
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
