"""train.Saver: round-trips, the checkpoint index and max_to_keep,
latest_checkpoint, restores that do not match, and files that are not checkpoints."""
import json
import os

import numpy as np
import pytest

import dynnets
import dynnets.static as tf
from dynnets.io import NotACheckpointError
from dynnets.static.saver import CheckpointMismatchError


def _model(shape_w=(3, 2), name_b="b", dtype=np.float32, seed=0):
    g = tf.Graph()
    rng = np.random.default_rng(seed)
    with g.as_default():
        x = tf.placeholder((None, 3), dtype, name="x")
        w = tf.Variable(rng.standard_normal(shape_w).astype(dtype), name="w")
        b = tf.Variable(np.zeros(shape_w[1], dtype), name=name_b)
        y = tf.identity(tf.matmul(x, w) + b, name="y")
        loss = tf.reduce_mean(tf.square(y))
        step = tf.Variable(np.int64(0), name="global_step", trainable=False)
        train = tf.group(tf.train.AdagradOptimizer(0.1).minimize(loss), step.assign_add(1))
    sess = tf.Session(g)
    sess.run(tf.global_variables_initializer(g))
    return g, sess, x, y, train, step


X = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def test_save_restore_round_trip_into_a_fresh_session(tmp_path):
    g, sess, x, y, train, _ = _model()
    for _ in range(3):
        sess.run(train, {x: X})
    saver = tf.train.Saver()
    path = saver.save(sess, tmp_path / "model.ckpt")
    assert path == str(tmp_path / "model.ckpt")
    assert os.path.isfile(path + ".npz") and os.path.isfile(path + ".meta")
    want = {v.name: sess.variable_value(v) for v in g.variables}
    fresh = tf.Session(g)       # no initialiser run: restore sets every variable
    saver.restore(fresh, path)
    for v in g.variables:
        np.testing.assert_array_equal(fresh.variable_value(v), want[v.name])
    np.testing.assert_array_equal(fresh.run(y, {x: X}), sess.run(y, {x: X}))
    # training continues identically (the Adagrad accumulators were saved too)
    a = [sess.run([train, y], {x: X})[1] for _ in range(2)]
    b = [fresh.run([train, y], {x: X})[1] for _ in range(2)]
    np.testing.assert_array_equal(a[-1], b[-1])


def test_keep_n_index_and_latest_checkpoint(tmp_path):
    g, sess, x, y, train, step = _model()
    saver = tf.train.Saver(max_to_keep=2)
    paths = []
    for _ in range(4):
        sess.run(train, {x: X})
        paths.append(saver.save(sess, tmp_path / "model.ckpt", global_step=step))
    assert [os.path.basename(p) for p in paths] == [f"model.ckpt-{k}" for k in (1, 2, 3, 4)]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model.ckpt-3.meta", "model.ckpt-3.npz",
                                            "model.ckpt-4.meta", "model.ckpt-4.npz"]
    index = json.loads((tmp_path / "checkpoint").read_text())
    assert index == {"format": "dynnets.checkpoint_index", "version": 1, "model_checkpoint_path": "model.ckpt-4",
                     "all_model_checkpoint_paths": ["model.ckpt-3", "model.ckpt-4"]}
    assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-4")
    st = tf.train.get_checkpoint_state(tmp_path)
    assert st.all_model_checkpoint_paths == [str(tmp_path / "model.ckpt-3"), str(tmp_path / "model.ckpt-4")]
    assert saver.last_checkpoints == paths[-2:]

    # a Saver of a later process continues the index it finds (and deletes the oldest)
    later = tf.train.Saver(max_to_keep=2)
    later.save(sess, tmp_path / "model.ckpt", global_step=7)
    assert sorted(f for f in os.listdir(tmp_path) if f.endswith(".npz")) == ["model.ckpt-4.npz", "model.ckpt-7.npz"]
    assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-7")


def test_saving_a_step_again_moves_it_last_and_max_to_keep_none_keeps_all(tmp_path):
    g, sess, *_ = _model()
    saver = tf.train.Saver(max_to_keep=None, var_list=g.variables)
    for s in (1, 2, 1):
        saver.save(sess, tmp_path / "m", global_step=s, write_meta_graph=False)
    index = json.loads((tmp_path / "checkpoint").read_text())
    assert index["all_model_checkpoint_paths"] == ["m-2", "m-1"]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "m-1.npz", "m-2.npz"]


def test_latest_checkpoint_without_an_index_is_none(tmp_path):
    assert tf.train.latest_checkpoint(tmp_path) is None
    assert tf.train.get_checkpoint_state(tmp_path) is None


def test_var_list_dict_names_the_checkpoint_entries(tmp_path):
    g, sess, *_ = _model()
    w = g.get_value_by_name("w")
    path = tf.train.Saver({"layer/kernel": w}).save(sess, tmp_path / "k", write_meta_graph=False)
    state = dynnets.load(path + ".npz")
    assert list(state["variables"]) == ["layer/kernel"]
    np.testing.assert_array_equal(state["variables"]["layer/kernel"], sess.variable_value(w))


def test_restore_into_a_graph_that_differs_names_every_difference(tmp_path):
    g, sess, *_ = _model()
    path = tf.train.Saver().save(sess, tmp_path / "model.ckpt")
    g2, sess2, *_ = _model(shape_w=(3, 4), name_b="bias", seed=1)
    before = {v.name: sess2.variable_value(v) for v in g2.variables}
    with pytest.raises(CheckpointMismatchError) as ei:
        tf.train.Saver().restore(sess2, path)
    msg = str(ei.value)
    assert "model.ckpt.npz" in msg
    assert "not in the checkpoint: 'bias'" in msg
    assert "shape mismatch for 'w': the checkpoint has (3, 2) float32, the graph (3, 4) float32" in msg
    assert "in the checkpoint only: 'b'" in msg
    assert ei.value.missing[:1] == ["bias"] and "b" in ei.value.unexpected
    # nothing was changed
    for v in g2.variables:
        np.testing.assert_array_equal(sess2.variable_value(v), before[v.name])


def test_restore_dtype_mismatch_and_strict(tmp_path):
    g, sess, *_ = _model()
    path = tf.train.Saver().save(sess, tmp_path / "model.ckpt", write_meta_graph=False)
    g2, sess2, *_ = _model(dtype=np.float64)
    with pytest.raises(CheckpointMismatchError, match="dtype mismatch for 'w': the checkpoint has .3, 2. float32, "
                                                      "the graph .3, 2. float64"):
        tf.train.Saver().restore(sess2, path)
    # a graph with fewer variables (inference without the optimizer) restores, as in TF1; strict refuses
    g3 = tf.Graph()
    with g3.as_default():
        w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
    sess3 = tf.Session(g3)
    tf.train.Saver().restore(sess3, path)
    np.testing.assert_array_equal(sess3.variable_value(w), sess.variable_value(g.get_value_by_name("w")))
    with pytest.raises(CheckpointMismatchError, match="in the checkpoint only: 'b', "):
        tf.train.Saver().restore(sess3, path, strict=True)


def test_a_failed_save_leaves_the_last_checkpoint_and_index(tmp_path):
    g, sess, *_ = _model()
    saver = tf.train.Saver()
    good = saver.save(sess, tmp_path / "m", global_step=1, write_meta_graph=False)
    with g.as_default():
        tf.Variable(np.ones(2, np.float32), name="late")        # never initialised in sess
    with pytest.raises(tf.UninitializedVariableError, match="late"):
        saver.save(sess, tmp_path / "m", global_step=2, write_meta_graph=False)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "m-1.npz"]
    assert tf.train.latest_checkpoint(tmp_path) == good


def test_bad_checkpoint_files(tmp_path):
    g, sess, *_ = _model()
    saver = tf.train.Saver()
    with pytest.raises(FileNotFoundError, match="no checkpoint .*nothing"):
        saver.restore(sess, tmp_path / "nothing")
    (tmp_path / "text.npz").write_text("not an archive")
    with pytest.raises(NotACheckpointError, match="text.npz is not a dynnets checkpoint"):
        saver.restore(sess, tmp_path / "text")
    good = saver.save(sess, tmp_path / "good", write_meta_graph=False) + ".npz"
    (tmp_path / "cut.npz").write_bytes(open(good, "rb").read()[:-30])
    with pytest.raises(NotACheckpointError, match="cut.npz is not a dynnets checkpoint"):
        saver.restore(sess, tmp_path / "cut")
    dynnets.save({"model": {"w": np.zeros(2)}}, tmp_path / "other.npz")     # a dynnets file, not a Saver's
    with pytest.raises(NotACheckpointError, match="other.npz is a dynnets file but not a Saver checkpoint"):
        saver.restore(sess, tmp_path / "other.npz")
    dynnets.save({"format": "dynnets.checkpoint", "version": 9, "variables": {}}, tmp_path / "new.npz")
    with pytest.raises(NotACheckpointError, match="new.npz has checkpoint version 9; this dynnets reads versions 1 "):
        saver.restore(sess, tmp_path / "new")
    with pytest.raises(ValueError, match="save_path is None"):
        saver.restore(sess, tf.train.latest_checkpoint(tmp_path / "empty"))


@pytest.mark.parametrize("text, what", [
    ('model_checkpoint_path: "model.ckpt-1"\n', "not JSON"),
    ('{"format": "tf"}', "format 'tf'"),
    ('{"format": "dynnets.checkpoint_index", "version": 2}', "version 2"),
    ('{"format": "dynnets.checkpoint_index", "version": 1, "all_model_checkpoint_paths": 3}', "must be a list"),
])
def test_a_bad_index_is_named(tmp_path, text, what):
    (tmp_path / "checkpoint").write_text(text)
    with pytest.raises(NotACheckpointError, match=f"checkpoint: .*{what}"):
        tf.train.latest_checkpoint(tmp_path)


def test_saver_arguments_are_checked():
    g, sess, *_ = _model()
    with pytest.raises(TypeError, match="not a Variable"):
        tf.train.Saver([g.get_value_by_name("y")])
    with pytest.raises(ValueError, match="max_to_keep"):
        tf.train.Saver(max_to_keep=-1)
    other, _, *_ = _model()
    with pytest.raises(tf.GraphError, match="another graph"):
        tf.train.Saver(other.variables).save(sess, "unused")
