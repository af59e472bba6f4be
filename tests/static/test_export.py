"""Graph export: GraphDef / graph files round-trip (values equal), meta
graphs train on, freezing, the errors for bad files, and a frozen padded LSTM
run in a fresh process to the original's predictions."""
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import dynnets
import dynnets.static as tf
from dynnets.models.padded import PaddedLSTMClassifier, pad_sentences
from dynnets.static.export import ExportError, GraphFormatError, read_graph_def
from dynnets.static.graph import add_op, tracing

ROOT = Path(__file__).resolve().parents[2]


def _many_attrs_graph():
    """A graph with every kind of attribute the format stores, and gradients."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 4), name="x")
        idx = tf.placeholder((None,), np.int64, name="idx")
        w = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w")
        h = dynnets.tanh(tf.matmul(x, w))
        parts = [
            h[1:, ::2], h[..., None][:, 0], h[np.array([0, 0, 1])], dynnets.clip(h, -0.5, np.inf),
            tf.reduce_sum(h, axis=(0, 1), keepdims=True) * 2, tf.transpose(h, [1, 0]),
            tf.reshape(h, [-1, 1]), tf.cast(tf.cast(h * 10, np.int32), np.float32),
            dynnets.where(tf.greater(h, 0.0), h, tf.zeros_like(h)), tf.gather(w, idx),
            dynnets.softmax(h, axis=0), tf.concat([h, h], axis=1), tf.stack([h, h], axis=2),
            tf.cast(tf.argmax(h, axis=1), np.float32) + np.float32(0.5), h ** 2 + 1,
        ]
        total = tf.identity(sum(tf.reduce_sum(p) for p in parts), name="total")
        gw, gx = tf.gradients(total, [w, x])
        gw = tf.identity(gw, name="gw")
        gx = tf.identity(gx, name="gx")
    return g, x, idx, total, gw, gx


FEED_X = np.arange(20, dtype=np.float32).reshape(5, 4) / 20 - 0.4
FEED_IDX = np.array([0, 3, 3, 1])


def test_graph_def_round_trip_through_a_file(tmp_path):
    g, x, idx, total, gw, gx = _many_attrs_graph()
    sess = tf.Session(g)
    sess.run(tf.global_variables_initializer(g))
    want = sess.run([total, gw, gx], {x: FEED_X, idx: FEED_IDX})
    path = tf.train.write_graph(g, tmp_path, "g.graph")
    g2 = tf.Graph()
    with g2.as_default():
        t2, gw2, gx2 = tf.import_graph_def(path, return_elements=["total", "gw:0", "gx"], name="")
    assert [e.prim.name for e in g2.eqns] == [e.prim.name for e in g.eqns]
    assert [v.name for v in g2.values] == [v.name for v in g.values]
    s2 = tf.Session(g2)
    s2.run(tf.global_variables_initializer(g2))
    got = s2.run([t2, gw2, gx2], {g2.get_value_by_name("x"): FEED_X, g2.get_value_by_name("idx"): FEED_IDX})
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_import_names_and_scopes():
    g, *_ = _many_attrs_graph()
    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        a = tf.import_graph_def(gd, return_elements=["x"])
        b = tf.import_graph_def(gd, return_elements=["x"])
    assert (a[0].name, b[0].name) == ("import/x", "import_1/x")
    with pytest.raises(KeyError, match="no value or node named 'nope'"):
        tf.import_graph_def(gd, return_elements=["nope"], graph=tf.Graph())


def test_meta_graph_trains_on_like_the_original(tmp_path):
    """A padded LSTM's training graph (sparse embedding gradients, two
    optimizers and their slots) rebuilt from its meta graph takes the same steps."""
    for opt in ("adam", "adagrad"):
        m = PaddedLSTMClassifier(vocab_size=20, embed_dim=6, hidden_size=5, batch_size=3, max_len=5,
                                 optimizer=opt, seed=2)
        rng = np.random.default_rng(0)
        batch = pad_sentences([rng.integers(1, 20, rng.integers(1, 8)) for _ in range(3)],
                              rng.integers(0, 5, 3), 3, 5)
        m.train_step(batch)
        ckpt = tf.train.Saver().save(m.session, tmp_path / opt / "model.ckpt")
        g2 = tf.Graph()
        with g2.as_default():
            saver = tf.train.import_meta_graph(ckpt + ".meta")
        s2 = tf.Session(g2)
        saver.restore(s2, ckpt)
        feed = {g2.get_value_by_name(k.name): v for k, v in m._feed(batch, 0).items()}
        train2, loss2 = g2.get_value_by_name("train"), g2.get_value_by_name(m._loss.name)
        for _ in range(2):
            a = m.session.run([m._train_op, m._loss], m._feed(batch, 0))[1]
            b = s2.run([train2, loss2], feed)[1]
            assert a == b
        for v in m.graph.variables:
            np.testing.assert_array_equal(s2.variable_value(g2.get_value_by_name(v.name)),
                                          m.session.variable_value(v))


def test_collections_travel_with_the_meta_graph(tmp_path):
    g, x, idx, total, *_ = _many_attrs_graph()
    g.add_to_collection("outputs", total)
    tf.train.export_meta_graph(tmp_path / "m.meta", graph=g)
    g2 = tf.Graph()
    with g2.as_default():
        tf.train.import_meta_graph(tmp_path / "m.meta", import_scope="net")
    assert [v.name for v in g2.get_collection("outputs")] == ["net/total"]
    g.add_to_collection("junk", "a string")
    with pytest.raises(ExportError, match="collection 'junk' holds 'a string'"):
        tf.train.export_meta_graph(graph=g)
    tf.train.export_meta_graph(graph=g, collection_list=["outputs"])


def test_freeze_replaces_variables_by_their_values():
    g, x, idx, total, gw, gx = _many_attrs_graph()
    sess = tf.Session(g)
    sess.run(tf.global_variables_initializer(g))
    w = g.get_value_by_name("w")
    w.load(np.full((4, 3), 0.25, np.float32), sess)
    frozen = tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["total"])
    ops = [n["op"] for n in frozen.node]
    assert "variable" not in ops and "init_variables" not in ops and not any(o.startswith("vjp") for o in ops)
    g2 = tf.Graph()
    with g2.as_default():
        [t2] = tf.import_graph_def(frozen, return_elements=["total"], name="")
    assert g2.variables == []
    s2 = tf.Session(g2)
    got = s2.run(t2, {g2.get_value_by_name("x"): FEED_X, g2.get_value_by_name("idx"): FEED_IDX})
    assert got == sess.run(total, {x: FEED_X, idx: FEED_IDX})
    with pytest.raises(tf.GraphError, match="depend on the effect op 'init'"):
        tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["init"])
    with pytest.raises(TypeError, match="list of names"):
        tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), "total")


def test_what_the_format_cannot_hold_is_an_export_error():
    g = tf.Graph()
    p = dynnets.Parameter(np.ones(3, np.float32))
    with g.as_default(), tracing(g):          # how trace() captures a live eager parameter
        x = tf.placeholder((3,), name="x")
        y = x * p
    with pytest.raises(ExportError, match="op 'param' \\(param\\) is a live parameter of a traced function"):
        g.as_graph_def()
    with pytest.raises(ExportError, match="derived"):
        tf.train.write_graph(g.with_outputs([y]), "unused", "g.graph")
    g2 = tf.Graph()
    with g2.as_default():
        tf.constant(np.array(["a", "b"]))
    with pytest.raises(ExportError, match="dtype <U1; the graph format stores only boolean and numeric arrays"):
        g2.as_graph_def()


def test_a_primitive_defined_outside_dynnets_static_cannot_be_named_by_a_file():
    mine = tf.StaticPrimitive("my_double", lambda x: 2 * x, lambda x: x)
    g = tf.Graph()
    with g.as_default():
        add_op(mine, tf.placeholder((2,), name="x"))
    with pytest.raises(ExportError, match="primitive 'my_double' is neither in the primitive table nor"):
        g.as_graph_def()


def test_a_loop_without_back_prop_comes_back_without():
    g = tf.Graph()
    with g.as_default():
        n = tf.placeholder((), np.int32, name="n")
        tf.identity(tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 2.0), [0, 1.0],
                                  back_prop=False)[1], name="s")
    gd = g.as_graph_def()
    assert [nd.get("nograd") for nd in gd.node if nd["op"] == "while"] == [True]
    g2 = tf.Graph()
    with g2.as_default():
        [s] = tf.import_graph_def(gd, return_elements=["s"], name="")
    loop = next(e for e in g2.eqns if e.prim.name == "while")
    assert not loop.prim.differentiable
    assert tf.Session(g2).run(s, {g2.get_value_by_name("n"): 5}) == 32.0


# --------------------------------------------------------------------------
# bad files
# --------------------------------------------------------------------------


def _small_graph_file(path):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 2), name="x")
        w = tf.Variable(np.ones((2, 2), np.float32), name="w")
        y = tf.identity(tf.matmul(x, w) + 1.0, name="y")
        tf.gradients(tf.reduce_sum(y), [w])
    return tf.train.write_graph(g, path.parent, path.name)


def _rewire_vjp(doc):
    """Point the gradient of matmul's w at another (?, 2) value than x."""
    nd = next(n for n in doc["nodes"] if n["op"] == "vjp_matmul_1")
    nd["inputs"][1] = 2


def _rewrite(src, dst, edit_doc=None, members=None):
    """Copy graph file ``src`` to ``dst`` with its JSON edited and members added/replaced."""
    with zipfile.ZipFile(src) as z:
        files = {n: z.read(n) for n in z.namelist()}
    if edit_doc is not None:
        doc = json.loads(files["graph.json"])
        edit_doc(doc)
        files["graph.json"] = json.dumps(doc).encode()
    files.update(members or {})
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in files.items():
            z.writestr(n, b)
    return dst


def _set(path, value):
    def edit(doc):
        d = doc
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return edit


def _object_npy():
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize("case, message", [
    ("text", "not a dynnets graph file \\(not a zip archive"),
    ("truncated", "not a zip archive: another format, or a truncated file"),
    ("npz", "a zip archive without graph.json; members: w.npy"),
    ("bad_json", "graph.json is not valid JSON"),
    ("foreign", "not a dynnets graph file \\(format 'onnx', expected 'dynnets.graph'\\)"),
    ("future", "written in graph format version 2 .*reads versions up to 1: upgrade dynnets"),
    ("unknown_op", "nodes\\[2\\] 'matmul' \\(os.system\\): unknown primitive 'os.system'"),
    ("lying_shape", "value 2 'matmul' is declared \\(None, 5\\) float32 but its op gives \\(None, 2\\) float32"),
    ("bad_shape_rule", "nodes\\[2\\] 'matmul' \\(matmul\\): ShapeError: matmul"),
    ("later_input", "nodes\\[2\\] \\('matmul', matmul\\): input 9 is not the id of a value produced by an earlier"),
    ("pickle", "member arrays/a0.npy: it holds an object array \\(pickled Python objects\\)"),
    ("missing_array", "array 'a0' is not in the file"),
    ("bad_attr", "attribute value \\{'eval': 'print\\(1\\)'\\} is not one the format defines"),
    ("crc", "member arrays/a0.npy is damaged \\(its checksum does not match\\)"),
    ("rewired_vjp", "vjp_matmul_1.*a gradient node must take the inputs, outputs and attributes of an earlier "
                    "'matmul' node"),
])
def test_bad_graph_files_are_named_and_refused(tmp_path, case, message):
    good = _small_graph_file(tmp_path / "good.graph")
    bad = tmp_path / "bad.graph"
    if case == "text":
        bad.write_text("node { name: 'x' }")
    elif case == "truncated":
        bad.write_bytes(Path(good).read_bytes()[:-40])
    elif case == "npz":
        np.savez(bad, w=np.ones(2))
        bad = tmp_path / "bad.graph.npz"
    elif case == "bad_json":
        _rewrite(good, bad, members={"graph.json": b"{\"format\": "})
    elif case == "foreign":
        _rewrite(good, bad, _set(["format"], "onnx"))
    elif case == "future":
        _rewrite(good, bad, _set(["version"], 2))
    elif case == "unknown_op":
        _rewrite(good, bad, _set(["nodes", 2, "op"], "os.system"))
    elif case == "lying_shape":
        _rewrite(good, bad, _set(["values", 2, "shape"], [None, 5]))
    elif case == "bad_shape_rule":
        _rewrite(good, bad, _set(["values", 0, "shape"], [None, 3]))     # x (?, 3) @ w (2, 2)
    elif case == "later_input":
        _rewrite(good, bad, _set(["nodes", 2, "inputs"], [0, 9]))
    elif case == "pickle":
        _rewrite(good, bad, members={"arrays/a0.npy": _object_npy()})
    elif case == "missing_array":
        _rewrite(good, bad, _set(["nodes", 1, "attrs", "initial_value"], {"array": "a0"}))
        with zipfile.ZipFile(bad) as z:
            files = {n: z.read(n) for n in z.namelist() if n != "arrays/a0.npy"}
        with zipfile.ZipFile(bad, "w") as z:
            for n, b in files.items():
                z.writestr(n, b)
    elif case == "bad_attr":
        _rewrite(good, bad, _set(["nodes", 1, "attrs", "initial_value"], {"eval": "print(1)"}))
    elif case == "rewired_vjp":
        _rewrite(good, bad, _rewire_vjp)
    elif case == "crc":
        data = bytearray(Path(good).read_bytes())
        k = data.index(b"\x93NUMPY")           # the array member's bytes, stored uncompressed
        data[k + 130] ^= 0xFF
        bad.write_bytes(bytes(data))
    with pytest.raises(GraphFormatError, match=message) as ei:
        tf.import_graph_def(bad, graph=tf.Graph())
    assert str(bad) in str(ei.value)


def test_a_missing_graph_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no graph file at .*none.graph"):
        tf.import_graph_def(tmp_path / "none.graph")


# --------------------------------------------------------------------------
# deployment: a frozen padded LSTM in a fresh process
# --------------------------------------------------------------------------

DEPLOY = r"""
import sys
import numpy as np
import dynnets.static as tf

graph_file, ckpt, output, batch_file, out_file = sys.argv[1:]
batch = np.load(batch_file, allow_pickle=False)


def predict(g, sess, probs):
    ids, mask = g.get_value_by_name("ids"), g.get_value_by_name("mask")
    return np.concatenate([sess.run(probs, {ids: batch["ids"][k], mask: batch["mask"][k]})
                           for k in range(batch["ids"].shape[0])])


with tf.Graph().as_default() as g:                   # the frozen graph alone
    [probs] = tf.import_graph_def(graph_file, return_elements=[output], name="")
with tf.Session(g) as sess:
    frozen = predict(g, sess, probs)
with tf.Graph().as_default() as g:                   # the training graph and its checkpoint
    saver = tf.train.import_meta_graph(ckpt + ".meta")
with tf.Session(g) as sess:
    saver.restore(sess, ckpt)
    restored = predict(g, sess, g.get_value_by_name(output))
np.savez(out_file, frozen=frozen, restored=restored)
"""


def test_frozen_and_saved_padded_lstm_run_in_a_fresh_process_to_the_same_predictions(tmp_path):
    m = PaddedLSTMClassifier(vocab_size=40, embed_dim=8, hidden_size=6, batch_size=4, max_len=9, seed=3)
    rng = np.random.default_rng(1)
    sents = [rng.integers(1, 40, rng.integers(1, 12)) for _ in range(10)]
    batch = pad_sentences(sents, rng.integers(0, 5, 10), 4, 9)
    for _ in range(2):
        m.train_step(batch)
    want = m.predict_proba(batch)
    ckpt = tf.train.Saver().save(m.session, tmp_path / "ckpt" / "model.ckpt", global_step=2)
    frozen = tf.graph_util.convert_variables_to_constants(m.session, m.graph.as_graph_def(), [m._probs.name])
    path = tf.train.write_graph(frozen, tmp_path, "padded_lstm.graph", as_text=False)
    np.savez(tmp_path / "batch.npz", ids=batch.ids, mask=batch.mask)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [path, ckpt, m._probs.name, str(tmp_path / "batch.npz"), str(tmp_path / "out.npz")]
    r = subprocess.run([sys.executable, "-c", DEPLOY, *args], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    np.testing.assert_array_equal(out["frozen"][:batch.n_sentences], want)
    np.testing.assert_array_equal(out["restored"][:batch.n_sentences], want)


# --------------------------------------------------------------------------
# control flow: loop bodies and branches are nested graphs of the file
# --------------------------------------------------------------------------


def _loop_graph():
    """An RNN over a fed number of steps (TensorArrays in and out, a cond in the
    body, a nested loop, a Variable captured by the body) trained by minimize."""
    g = tf.Graph()
    with g.as_default():
        xs = tf.placeholder((None, 3), np.float64, name="xs")
        n = tf.placeholder((), np.int32, name="n")
        w = tf.Variable(np.linspace(-0.5, 0.5, 9).reshape(3, 3), name="w")
        inputs = tf.TensorArray(np.float64, size=n).unstack(xs)
        out = tf.TensorArray(np.float64, size=n)

        def body(t, h, out):
            def inner(j, a):
                return j + 1, a * 0.5 + tf.cast(j, np.float64)
            _, h2 = tf.while_loop(lambda j, a: j < 2, inner, [0, h])
            h = tf.cond(t < 2, lambda: dynnets.tanh(dynnets.matmul(w, h2) + inputs.read(t)), lambda: h * 0.9)
            return t + 1, h, out.write(t, h)

        _, h, out = tf.while_loop(lambda t, h, out: t < n, body, [0, tf.constant(np.ones(3)), out])
        states = tf.identity(out.stack(), name="states")
        loss = tf.identity(tf.reduce_sum(states * states) + tf.reduce_sum(h), name="loss")
        gxs, gw = tf.gradients(loss, [xs, w])
        tf.identity(gxs, name="gxs")
        tf.identity(gw, name="gw")
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, name="train")
        init = tf.global_variables_initializer()
    return g, init, train


def _named(g, *names):
    return [g.get_value_by_name(k) for k in names]


def test_loops_conds_and_tensor_arrays_round_trip(tmp_path):
    g, init, train = _loop_graph()
    sess = tf.Session(g)
    sess.run(init)
    feeds = [(np.linspace(-1, 1, 12).reshape(4, 3), 4), (np.ones((1, 3)) * 0.3, 1)]
    path = tf.train.write_graph(g, tmp_path, "loop.graph")
    with zipfile.ZipFile(path) as z:
        doc = json.loads(z.read("graph.json"))
    parents = sorted(str(sd["parent"]) for sd in doc["subgraphs"].values())
    # the outer loop's cond and body in the graph; the inner loop's and the branches in the body
    assert len(parents) == 6 and parents.count("None") == 2
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(path, name="")
    s2 = tf.Session(g2)
    s2.run(g2.get_value_by_name("init"))
    for xv, nv in feeds:
        a = sess.run(_named(g, "states", "loss", "gxs", "gw"), dict(zip(_named(g, "xs", "n"), (xv, nv))))
        b = s2.run(_named(g2, "states", "loss", "gxs", "gw"), dict(zip(_named(g2, "xs", "n"), (xv, nv))))
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    # training through the loop takes the same steps
    for _ in range(2):
        sess.run(train, dict(zip(_named(g, "xs", "n"), feeds[0])))
        s2.run(g2.get_value_by_name("train"), dict(zip(_named(g2, "xs", "n"), feeds[0])))
    np.testing.assert_array_equal(s2.variable_value(g2.get_value_by_name("w")),
                                  sess.variable_value(g.get_value_by_name("w")))
    # the gradient nodes a run adds to a body are not part of the body's entry
    assert g.as_graph_def().doc == read_graph_def(path).doc
    # frozen: the captured variable becomes a constant of the graph around the loop
    frozen = tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["states"])
    g3 = tf.Graph()
    with g3.as_default():
        [st] = tf.import_graph_def(frozen, return_elements=["states"], name="")
    assert g3.variables == []
    xv, nv = feeds[0]
    np.testing.assert_array_equal(tf.Session(g3).run(st, dict(zip(_named(g3, "xs", "n"), (xv, nv)))),
                                  sess.run(g.get_value_by_name("states"), dict(zip(_named(g, "xs", "n"), (xv, nv)))))


def test_a_subgraph_that_lies_is_refused(tmp_path):
    g, *_ = _loop_graph()
    good = tf.train.write_graph(g, tmp_path, "loop.graph")

    def edit(doc):
        top = [k for k, sd in doc["subgraphs"].items() if sd["parent"] is None]
        doc["subgraphs"][top[0]]["parent"] = top[1]
    bad = _rewrite(good, tmp_path / "bad.graph", edit)
    with pytest.raises(GraphFormatError, match="is nested in 'g.*', not in this node's graph"):
        tf.import_graph_def(bad, graph=tf.Graph())


def test_the_public_names_stay_where_they_were():
    """export.py is TF1's API over dynnets.static.graphdef (issue 24): every
    public name is still importable from it and the ``tf.`` paths are the same objects."""
    from dynnets.static import export, graph_util, saver
    for name in export.__all__:
        assert getattr(export, name) is not None, name
    assert tf.import_graph_def is export.import_graph_def and tf.GraphDef is export.GraphDef
    assert tf.train.write_graph is export.write_graph and tf.train.export_meta_graph is export.export_meta_graph
    assert tf.GraphFormatError is export.GraphFormatError and tf.ExportError is export.ExportError
    assert saver.to_graph_def is export.to_graph_def and graph_util.value_ids is export.value_ids
    g, *_ = _many_attrs_graph()
    assert isinstance(g.as_graph_def(), export.GraphDef)


def test_exporting_gradients_does_not_rescan_the_modules(monkeypatch):
    """A gradient node is named by its forward primitive: exporting it looks
    up that name only. Looking up the other reading of its name ("matmul_1"
    for vjp_matmul_1) missed the table and rescanned every loaded module, one
    scan per gradient node (97% of an export's time)."""
    from dynnets.static.graphdef import names
    g, *_ = _many_attrs_graph()
    g.as_graph_def()                     # the first export may scan, to learn the static primitives
    scans = []
    real = names._scan
    monkeypatch.setattr(names, "_scan", lambda: scans.append(1) or real())
    gd = g.as_graph_def()
    assert sum(1 for n in gd.node if "vjp" in n) >= 10
    assert scans == []
