"""``tf.summary``: summaries are graph ops whose run value is a serialized
``Summary``; a small training loop writes scalars and histograms with
``FileWriter``, and the event file is read back twice: by hand (TFRecord
framing with its CRC32C checks, ``Event`` protocol buffers) and by
TensorBoard's own ``EventAccumulator``, with the tags, steps and values the
run computed. Histograms against a line-by-line port of TF1's
``histogram.cc``; tags as TF1 names them; the errors."""
from __future__ import annotations

import glob
import os
import struct
import sys

import numpy as np
import pytest

pytest.importorskip("tensorboard")

import dynnets.static as tf  # noqa: E402
from dynnets.static import summary as S  # noqa: E402
from tensorboard.compat.proto import event_pb2, graph_pb2, summary_pb2  # noqa: E402


def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data):
    c = _crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(logdir):
    """Every Event of the one event file in ``logdir``, checking the TFRecord framing."""
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    raw = open(files[0], "rb").read()
    events, pos = [], 0
    while pos < len(raw):
        header = raw[pos:pos + 8]
        (n,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", raw[pos + 8:pos + 12])[0] == _masked(header)
        body = raw[pos + 12:pos + 12 + n]
        assert struct.unpack("<I", raw[pos + 12 + n:pos + 16 + n])[0] == _masked(body)
        events.append(event_pb2.Event.FromString(body))
        pos += 16 + n
    return events


def _model():
    x = tf.placeholder(tf.float32, (None, 3), name="x")
    y = tf.placeholder(tf.float32, (None,), name="y")
    w = tf.Variable(np.array([0.5, -0.25, 0.0], np.float32), name="w")
    loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) - y))
    return x, y, w, loss


def _data(k):
    xs = np.random.default_rng(k).standard_normal((8, 3)).astype(np.float32)
    return xs, xs @ np.array([1.0, 2.0, 3.0], np.float32)


def test_a_training_loop_writes_what_tensorboard_reads(tmp_path):
    g = tf.Graph()
    with g.as_default():
        x, y, w, loss = _model()
        with tf.name_scope("train"):
            tf.summary.scalar("loss", loss)
            tf.summary.histogram("w", w)
        merged = tf.summary.merge_all()
        step = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
        runs = []
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            writer = tf.summary.FileWriter(tmp_path, sess.graph)
            for k in range(6):
                xs, ys = _data(k)
                wv = sess.run(w)                    # (fetched with step, w would be its value after the step)
                s, lv, _ = sess.run([merged, loss, step], {x: xs, y: ys})
                assert isinstance(s, bytes)
                writer.add_summary(s, global_step=np.int64(10 * k))
                runs.append((lv, wv))
            writer.close()
    events = read_events(tmp_path)
    assert events[0].file_version == "brain.Event:2"
    graphs = [e for e in events if e.graph_def]
    assert len(graphs) == 1
    nodes = {n.name: n for n in graph_pb2.GraphDef.FromString(graphs[0].graph_def).node}
    assert nodes["x"].op == "placeholder" and nodes["train/loss"].op == "scalar_summary"
    assert all(i.split(":")[0] in nodes for n in nodes.values() for i in n.input)
    summaries = [e for e in events if e.HasField("summary")]
    assert [e.step for e in summaries] == [0, 10, 20, 30, 40, 50]
    for e, (lv, wv) in zip(summaries, runs):
        vals = {v.tag: v for v in e.summary.value}
        assert set(vals) == {"train/loss", "train/w"}
        assert vals["train/loss"].simple_value == np.float32(lv)
        h = vals["train/w"].histo
        assert (h.num, h.min, h.max) == (3, float(wv.min()), float(wv.max()))
        assert h.sum == pytest.approx(float(wv.astype(np.float64).sum()), rel=1e-12)
        assert sum(h.bucket) == 3
    assert runs[-1][0] < runs[0][0]

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    assert acc.Tags()["scalars"] == ["train/loss"] and acc.Tags()["histograms"] == ["train/w"]
    assert acc.Tags()["graph"] is True
    assert [(s.step, s.value) for s in acc.Scalars("train/loss")] == \
        [(10 * k, float(np.float32(lv))) for k, (lv, _) in enumerate(runs)]
    assert [h.histogram_value.num for h in acc.Histograms("train/w")] == [3.0] * 6


def _tf_histogram(values):
    """TF1's histogram.cc, line by line (Add, then EncodeToProto without preserve_zero_buckets)."""
    limits = list(S._bucket_limits())
    buckets = [0.0] * len(limits)
    lo, hi, num, total, sq = limits[-1], -limits[-1], 0.0, 0.0, 0.0
    for v in np.asarray(values, np.float64).reshape(-1).tolist():
        b = next(k for k, edge in enumerate(limits) if edge > v)
        buckets[b] += 1
        lo, hi, num, total, sq = min(lo, v), max(hi, v), num + 1, total + v, sq + v * v
    out_limits, out_counts = [], []
    i = 0
    while i < len(buckets):
        end, count = limits[i], buckets[i]
        i += 1
        if count <= 0:
            while i < len(buckets) and buckets[i] <= 0:
                end, count = limits[i], buckets[i]
                i += 1
        out_limits.append(end)
        out_counts.append(count)
    return lo, hi, num, total, sq, out_limits, out_counts


@pytest.mark.parametrize("values", [
    np.random.default_rng(0).standard_normal(500),
    np.array([0.0, 0.0, -0.0, 1e-13, -1e-13, 1e-12, 1.1e-12, 3.0, 3.0, -7.5e5, 2e21]),
    np.arange(12, dtype=np.int32).reshape(3, 4),
    np.array([]),
])
def test_histograms_are_tf1s(values):
    h = S.histogram_proto(values)
    lo, hi, num, total, sq, limits, counts = _tf_histogram(values)
    assert (h.min, h.max, h.num) == (lo, hi, num)
    assert h.sum == pytest.approx(total, rel=1e-12, abs=1e-300) and h.sum_squares == pytest.approx(sq, rel=1e-12)
    assert list(h.bucket_limit) == limits and list(h.bucket) == counts


def test_tags_are_tf1s():
    g = tf.Graph()
    with g.as_default():
        v = tf.constant(1.0)
        a = tf.summary.scalar("loss", v)
        b = tf.summary.scalar("loss", v)
        with tf.name_scope("eval"):
            c = tf.summary.scalar("acc", v, family="metrics")
        d = tf.summary.scalar("my loss (avg)", v)
        e = tf.summary.scalar("hidden", v, collections=[])
        f = tf.summary.scalar("other", v, collections=["extra"])
        with tf.Session(graph=g) as sess:
            tags = [summary_pb2.Summary.FromString(s).value[0].tag for s in sess.run([a, b, c, d, e, f])]
            assert tags == ["loss", "loss_1", "metrics/eval/metrics/acc", "my_loss__avg_", "hidden", "other"]
            merged = tf.summary.merge_all()
            assert [x.tag for x in summary_pb2.Summary.FromString(sess.run(merged)).value] == \
                ["loss", "loss_1", "metrics/eval/metrics/acc", "my_loss__avg_"]
            assert len(summary_pb2.Summary.FromString(sess.run(tf.summary.merge_all(scope="loss"))).value) == 2
            assert len(summary_pb2.Summary.FromString(sess.run(tf.summary.merge_all("extra"))).value) == 1
            both = tf.summary.merge([tf.summary.merge([a]), f])
            assert [x.tag for x in summary_pb2.Summary.FromString(sess.run(both)).value] == ["loss", "other"]
    with tf.Graph().as_default():
        assert tf.summary.merge_all() is None


def test_summary_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, (None,), name="x")
        with pytest.raises(tf.ShapeError, match=r"summary.scalar: tensor must be a scalar \(shape \(\)\), got shape "
                                                r"\(\?,\) \(tag 's'\)"):
            tf.summary.scalar("s", x)
        with pytest.raises(tf.ShapeError, match="real number tensor, got dtype bool"):
            tf.summary.histogram("h", tf.greater(x, 0.0))
        with pytest.raises(TypeError, match="not a summary op's value"):
            tf.summary.merge([b"abc"])
        with pytest.raises(tf.ShapeError, match="input 0 must be a summary"):
            tf.summary.merge([x])
        h = tf.summary.histogram("h", x)
        s = tf.summary.scalar("dup", tf.reduce_sum(x))
        dup = tf.summary.merge([s, s])
        with tf.Session(graph=g) as sess:
            with pytest.raises(ValueError, match="Nan in summary histogram for: h"):
                sess.run(h, {x: np.array([1.0, np.nan], np.float32)})
            with pytest.raises(ValueError, match="Duplicate tag dup found in summary inputs"):
                sess.run(dup, {x: np.ones(2, np.float32)})


def test_writer_by_hand_close_and_reopen(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path / "a"), filename_suffix=".v1")
    w.add_summary(tf.Summary(value=[tf.Summary.Value(tag="acc", simple_value=0.75)]), 3)
    w.add_summary(tf.summary.Summary(value=[tf.summary.Summary.Value(tag="acc", simple_value=0.5)]).SerializeToString())
    w.flush()
    ev = [e for e in read_events(tmp_path / "a") if e.HasField("summary")]
    assert [(e.step, e.summary.value[0].simple_value) for e in ev] == [(3, 0.75), (0, 0.5)]
    w.close()
    w.close()
    with pytest.raises(RuntimeError, match="is closed"):
        w.add_summary(tf.Summary(), 1)
    with pytest.raises(TypeError, match="expected the bytes of a summary op's run or a Summary"):
        tf.summary.FileWriter(str(tmp_path / "b")).add_summary(0.5, 1)
    w.reopen()
    w.add_summary(tf.Summary(value=[tf.Summary.Value(tag="acc", simple_value=1.0)]), 4)
    w.close()
    assert len(glob.glob(str(tmp_path / "a" / "events.out.tfevents.*.v1"))) == 2
    with tf.summary.FileWriter(tmp_path / "c") as w2:
        assert w2.get_logdir() == str(tmp_path / "c")
    with pytest.raises(TypeError, match="graph_def= is TF1's deprecated argument"):
        tf.summary.FileWriter(tmp_path / "d", graph_def=object())


def test_summaries_survive_saver_and_import_meta_graph(tmp_path):
    g = tf.Graph()
    with g.as_default():
        x, y, w, loss = _model()
        tf.summary.scalar("loss", loss)
        merged = tf.summary.merge_all()
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            want = sess.run(merged, {x: _data(0)[0], y: _data(0)[1]})
            prefix = tf.train.Saver().save(sess, str(tmp_path / "model"))
    g2 = tf.Graph()
    with g2.as_default():
        saver = tf.train.import_meta_graph(prefix + ".meta")
        with tf.Session(graph=g2) as sess:
            saver.restore(sess, prefix)
            got = sess.run(g2.get_tensor_by_name(merged.name + ":0"),
                           {g2.get_tensor_by_name("x:0"): _data(0)[0], g2.get_tensor_by_name("y:0"): _data(0)[1]})
    assert got == want


def test_a_missing_tensorboard_names_the_extra(monkeypatch):
    monkeypatch.setattr(S, "_TB", {})
    for mod in ("tensorboard", "tensorboard.compat", "tensorboard.compat.proto",
                "tensorboard.summary.writer.event_file_writer"):
        monkeypatch.setitem(sys.modules, mod, None)
    with tf.Graph().as_default():
        with pytest.raises(ImportError, match=r"pip install 'dynnets\[tensorboard\]'"):
            tf.summary.scalar("s", tf.constant(1.0))
    with pytest.raises(ImportError, match="tensorboard"):
        tf.Summary()
