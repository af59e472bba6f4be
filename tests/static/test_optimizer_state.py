"""Optimizer state through the optimizers' public API: TF1's ``get_slot``,
``get_slot_names`` and ``variables``, and dynnets' ``get_step_counter``,
``set_slots`` and ``set_step_counter`` (which the graph importer uses); and
that state carried by graph files: an imported optimizer updates the
imported slot variables, and a file whose slots do not fit is refused."""
import json
import zipfile

import numpy as np
import pytest

import dynnets.static as tf
from dynnets.static.export import GraphFormatError

X = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])
W0 = np.array([[1.0, -2.0], [0.5, 3.0]])


def _graph(make_opt=lambda: tf.train.AdamOptimizer(0.1), step=False):
    """loss = sum((x @ w + b)^2) in float64, minimized by ``make_opt()``."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(np.float64, (None, 2), name="x")
        w = tf.Variable(W0, name="w")
        b = tf.Variable(np.zeros(2), name="b")
        other = tf.Variable(np.ones(3), name="other", trainable=False)
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w) + b), name="loss")
        opt = make_opt()
        before = opt.get_slot_names()
        gs = tf.train.get_or_create_global_step() if step else None
        train = opt.minimize(loss, global_step=gs, var_list=[w, b], name="train")
    return g, x, w, b, other, opt, train, before


def _grad_w(w, b):
    r = X @ w + b
    return 2 * X.T @ r


def test_get_slot_and_get_slot_names_as_tf1():
    g, x, w, b, other, opt, train, before = _graph()
    assert before == [] and opt.get_slot_names() == ["m", "v"]
    m, v = opt.get_slot(w, "m"), opt.get_slot(w, "v")
    assert isinstance(m, tf.Variable) and not m.trainable
    assert tuple(m.shape) == (2, 2) and m.dtype == np.float64
    # TF1 returns None for a variable the optimizer does not update and for a name it has no slot of
    assert opt.get_slot(other, "m") is None and opt.get_slot(w, "accumulator") is None
    sess = tf.Session(g)
    sess.run(tf.global_variables_initializer(g))
    sess.run(train, {x: X})
    gw = _grad_w(W0, np.zeros(2))
    np.testing.assert_allclose(sess.run(m), 0.1 * gw, rtol=1e-12)
    np.testing.assert_allclose(sess.run(v), 0.001 * gw * gw, rtol=1e-12)


def test_variables_are_the_optimizers_state_in_the_default_graph():
    g, x, w, b, other, opt, train, _ = _graph()
    with g.as_default():
        names = [v.name for v in opt.variables()]
        reset = tf.variables_initializer(opt.variables())
    assert names == sorted(["w/Adam/m", "w/Adam/v", "b/Adam/m", "b/Adam/v", "Adam/step"])
    with tf.Graph().as_default():
        assert opt.variables() == []
    step = opt.get_step_counter(g)
    assert step.name == "Adam/step" and opt.get_step_counter(tf.Graph()) is None
    sess = tf.Session(g)
    sess.run(tf.global_variables_initializer(g))
    sess.run(train, {x: X})
    sess.run(train, {x: X})
    assert sess.run(step) == 2
    w_trained = sess.run(w)
    # TF1's habit: resetting the optimizer's variables resets its moments and step, not the model
    sess.run(reset)
    assert sess.run(step) == 0 and not sess.run(opt.get_slot(w, "m")).any()
    np.testing.assert_array_equal(sess.run(w), w_trained)

    g2, *_, sgd, _, _ = _graph(lambda: tf.train.GradientDescentOptimizer(0.1))
    with g2.as_default():
        assert sgd.variables() == [] and sgd.get_slot_names() == []
    assert sgd.get_step_counter(g2) is None


def test_set_slots_and_set_step_counter_check_what_they_adopt():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(np.zeros((2, 3), np.float32), name="w")
        m = tf.Variable(np.zeros((2, 3), np.float32), name="m", trainable=False)
        v = tf.Variable(np.zeros((2, 3), np.float32), name="v", trainable=False)
        short = tf.Variable(np.zeros(3, np.float32), name="short")
        step = tf.Variable(np.int64(0), name="step", trainable=False)
    opt = tf.train.AdamOptimizer(0.01)
    with pytest.raises(ValueError, match=r"Adam.set_slots: the slots of 'w' must be named \['m', 'v'\], got \['m'\]"):
        opt.set_slots(w, {"m": m})
    with pytest.raises(ValueError, match=r"slot 'v' 'short' \(3,\) float32 does not match its variable 'w' \(2, 3\)"):
        opt.set_slots(w, {"m": m, "v": short})
    with pytest.raises(ValueError, match="step counter must be an integer scalar Variable, got 'short'"):
        opt.set_step_counter(short)
    opt.set_slots(w, {"m": m, "v": v})
    opt.set_step_counter(step)
    assert opt.get_slot(w, "m") is m and opt.get_step_counter(g) is step and opt.get_slot_names() == ["m", "v"]
    with pytest.raises(ValueError, match="'w' already has slot variables"):
        opt.set_slots(w, {"m": m, "v": v})
    with pytest.raises(ValueError, match="has a step counter already, 'step'"):
        opt.set_step_counter(step)
    with pytest.raises(ValueError, match="GradientDescent.set_step_counter: GradientDescentOptimizer keeps no step "
                                         "counter, got 'step'"):
        tf.train.GradientDescentOptimizer(0.1).set_step_counter(step)
    # the adopted slots are the ones the train op updates
    with g.as_default():
        x = tf.placeholder(np.float32, (2, 3), name="x")
        train = opt.minimize(tf.reduce_sum(w * x))
    sess = tf.Session(g)
    sess.run(tf.global_variables_initializer(g))
    sess.run(train, {x: np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(sess.run(m), np.full((2, 3), 0.1, np.float32), rtol=1e-6)
    assert sess.run(step) == 1


@pytest.mark.parametrize("make_opt", [
    lambda: tf.train.AdamOptimizer(0.1),
    lambda: tf.train.RMSPropOptimizer(0.05, momentum=0.5, centered=True),
    lambda: tf.train.AdagradOptimizer(0.2),
], ids=["adam", "rmsprop-centered", "adagrad"])
def test_an_imported_optimizer_updates_the_imported_slots(tmp_path, make_opt):
    g, x, w, b, other, opt, train, _ = _graph(make_opt, step=True)
    path = tmp_path / "g.meta"
    tf.train.export_meta_graph(path, graph=g)
    g2 = tf.Graph()
    with g2.as_default():
        tf.train.import_meta_graph(path, import_scope="net")
    opt2 = next(e for e in g2.eqns if e.prim.name == "apply_gradients").attrs["opt"]
    assert opt2 is not opt and type(opt2) is type(opt)
    w2 = g2.get_value_by_name("net/w")
    assert opt2.get_slot_names() == opt.get_slot_names()
    for s in opt.get_slot_names():
        assert opt2.get_slot(w2, s) is g2.get_value_by_name(f"net/{opt.get_slot(w, s).name}")
    with g.as_default():
        want = [f"net/{v.name}" for v in opt.variables()]
    with g2.as_default():
        assert [v.name for v in opt2.variables()] == want
    s1, s2 = tf.Session(g), tf.Session(g2)
    s1.run(tf.global_variables_initializer(g))
    s2.run(tf.global_variables_initializer(g2))
    x2, train2 = g2.get_value_by_name("net/x"), g2.get_value_by_name("net/train")
    for _ in range(3):
        s1.run(train, {x: X})
        s2.run(train2, {x2: X})
    np.testing.assert_array_equal(s2.run(w2), s1.run(w))
    for s in opt.get_slot_names():
        np.testing.assert_array_equal(s2.run(opt2.get_slot(w2, s)), s1.run(opt.get_slot(w, s)))


def _edited(src, dst, edit):
    with zipfile.ZipFile(src) as z:
        files = {n: z.read(n) for n in z.namelist()}
    doc = json.loads(files["graph.json"])
    edit(doc)
    files["graph.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(dst, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    return dst


def _ids(doc, *names):
    by_name = {v["name"]: i for i, v in enumerate(doc["values"])}
    return [by_name[n] for n in names]


def _swap_w_m_for_b_m(doc):
    slots = doc["optimizers"][0]["slots"]
    w_m, b_m = _ids(doc, "w/Adam/m", "b/Adam/m")
    for _, d in slots:
        d["m"] = b_m if d["m"] == w_m else w_m


def _twice(doc):
    slots = doc["optimizers"][0]["slots"]
    slots.append(json.loads(json.dumps(slots[0])))


def _rename(doc):
    for _, d in doc["optimizers"][0]["slots"]:
        d["q"] = d.pop("m")


def _float_step(doc):
    doc["optimizers"][0]["step"] = _ids(doc, "w")[0]


@pytest.mark.parametrize("edit, message", [
    (_swap_w_m_for_b_m, r"optimizer 0: Adam.set_slots: slot 'm' 'b/Adam/m' \(2,\) float64 does not match its "
                        r"variable 'w' \(2, 2\) float64"),
    (_twice, "optimizer 0: Adam.set_slots: '.' already has slot variables"),
    (_rename, r"optimizer 0: Adam.set_slots: the slots of '.' must be named \['m', 'v'\], got \['q', 'v'\]"),
    (_float_step, r"optimizer 0: Adam.set_step_counter: the step counter must be an integer scalar Variable, "
                  r"got 'w' \(2, 2\) float64"),
], ids=["slot-of-another-shape", "slots-twice", "slot-names", "float-step"])
def test_a_file_whose_optimizer_state_does_not_fit_is_refused(tmp_path, edit, message):
    g, *_ = _graph()
    good = tmp_path / "good.meta"
    tf.train.export_meta_graph(good, graph=g)
    bad = _edited(good, tmp_path / "bad.meta", edit)
    with pytest.raises(GraphFormatError, match=message) as ei:
        tf.import_graph_def(bad, graph=tf.Graph(), name="")
    assert str(ei.value).startswith(f"{bad}: ")


def test_a_step_counter_for_an_optimizer_without_one_is_refused(tmp_path):
    g, *_ = _graph(lambda: tf.train.GradientDescentOptimizer(0.1), step=True)
    good = tmp_path / "good.meta"
    tf.train.export_meta_graph(good, graph=g)

    def edit(doc):
        doc["optimizers"][0]["step"] = _ids(doc, "global_step")[0]
    bad = _edited(good, tmp_path / "bad.meta", edit)
    with pytest.raises(GraphFormatError, match="optimizer 0: GradientDescent.set_step_counter: "
                                               "GradientDescentOptimizer keeps no step counter, got 'global_step'"):
        tf.import_graph_def(bad, graph=tf.Graph(), name="")
