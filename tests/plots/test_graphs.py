"""Graph pictures: Graph.to_dot, the compile stages (pruned nodes gone, fused kernels outlined), the eager
recording's forward and backward, rendering through Graphviz (skipped without it) and its absence."""
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import dynnets.static as tf
from dynnets.data import Vocabulary, parse_tree
from dynnets.models import build_model
from dynnets.plots import GraphvizMissing, compile_stages, eager_dot, render_dot, write_dot_picture
from dynnets.static import passes

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (apt-get install graphviz)")


def example(n=64):
    """A graph with something for every pass: an unfetched summary, a constant product, a repeated
    subexpression, fusible elementwise chains on n x 64 arrays."""
    rng = np.random.default_rng(0)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 64), name="x")
        h = tf.placeholder((None, 64), name="h_prev")
        m = tf.placeholder((None, 1), name="mask")
        W = tf.Variable(rng.standard_normal((64, 64)).astype(np.float32) / 8, name="W")
        b = tf.Variable(np.zeros(64, np.float32), name="b")
        scale = tf.constant(0.5) * tf.constant(3.0)
        z = tf.matmul(x, W) + b
        a = tf.relu(z) * scale
        again = tf.relu(z) * scale
        out = m * a + (1 - m) * h + again * 0.0
        unused = tf.reduce_mean(tf.tanh(x))
    feed = {x: rng.standard_normal((n, 64)).astype(np.float32), h: np.ones((n, 64), np.float32),
            m: (rng.random((n, 1)) < 0.5).astype(np.float32)}
    return g, out, unused, feed


def _nodes(dot):
    """DOT node ids with a label, and the edges."""
    nodes = set(re.findall(r"^\s+(\w+) \[label=", dot, re.M))
    edges = re.findall(r"^\s+(\w+) -> (\w+)", dot, re.M)
    return nodes, edges


def test_to_dot_draws_every_equation_and_edge():
    g, out, unused, _ = example()
    dot = g.to_dot()
    nodes, edges = _nodes(dot)
    scalar = {e.outs[0] for e in g.eqns if e.prim.name == "constant" and np.ndim(e.attrs["value"]) == 0}
    assert {f"v{e.outs[0]}" for e in g.eqns if e.outs[0] not in scalar} <= nodes
    # one edge per input of every equation (a scalar constant drawn once per use)
    assert len(edges) == sum(len(e.ins) for e in g.eqns)
    for e in g.eqns:
        for i in e.ins:
            if i not in scalar:
                assert (f"v{i}", f"v{e.outs[0]}") in edges
    assert "placeholder x" in dot and "Variable W" in dot and dot.startswith("digraph")


def test_compile_stages_match_the_pipeline_and_the_session():
    g, out, unused, feed = example()
    st = compile_stages(out, feed)
    ref = passes.optimize(g.with_outputs([out]), {k.id: tf.graph.Aval(v.shape, np.dtype(np.float32))
                                                  for k, v in feed.items()})
    assert [(e.prim.name, e.outs) for e in st.after.eqns] == [(e.prim.name, e.outs) for e in ref.eqns]
    counts = st.counts()
    assert counts["program"] == len(g.eqns) and counts["cse"] < counts["fold_constants"]
    with tf.Session(g) as sess:
        sess.run(tf.global_variables_initializer(graph=g))
        got = sess.run(out, feed)
        stats = [s for s in sess.stats if s["fetches"] == [out.name]][0]
    assert stats["nodes_before"] == len(st.stage("prune").eqns)
    assert stats["nodes_after"] == len(st.after.eqns)
    assert stats["fused_kernels"] == len(st.fused) == 2
    storage = {v.index: v.initial_value for v in g.variables}
    np.testing.assert_allclose(passes.evaluate(st.after, {k.id: v for k, v in feed.items()}, storage)[0], got,
                               rtol=1e-6)


def test_after_picture_outlines_fused_kernels_and_drops_pruned_nodes():
    g, out, unused, feed = example()
    st = compile_stages(out, feed)
    assert {unused.id, unused.op.ins[0]} <= st.unneeded
    after = st.after_dot()
    nodes, edges = _nodes(after)
    assert f"v{unused.id}" not in nodes and "tanh" not in after          # pruned: gone
    clusters = re.findall(r"subgraph (cluster_fused_\d+) \{(.*?)\n  \}", after, re.S)
    assert len(clusters) == len(st.fused) == 2
    for (name, body), (vid, members) in zip(clusters, st.fused.items()):
        assert name == f"cluster_fused_{vid}"
        inside = set(re.findall(r"^\s+(\w+) \[label=", body, re.M))
        assert inside == {f"v{m.outs[0]}" for m in members}
        assert "+".join(m.prim.name for m in members) in body
    assert [m.prim.name for m in list(st.fused.values())[0]] == ["add", "relu", "mul"]
    before = st.before_dot()
    dashed = re.findall(r"^\s+(\w+) \[label=.*dashed", before, re.M)
    assert set(dashed) == {f"v{v}" for v in st.unneeded}


def test_small_arrays_are_not_fused():
    g, out, unused, feed = example(n=4)
    st = compile_stages(out, feed)
    assert st.fused == {} and "cluster_fused" not in st.after_dot()


@needs_dot
def test_render_dot_gives_svg_with_every_node():
    g, out, unused, feed = example()
    st = compile_stages(out, feed)
    for dot in (st.before_dot(), st.after_dot()):
        svg = render_dot(dot).decode()
        root = ET.fromstring(svg)
        ns = {"s": "http://www.w3.org/2000/svg"}
        drawn = root.findall(".//s:g[@class='node']", ns)
        assert len(drawn) == len(_nodes(dot)[0])
    svg = render_dot(st.after_dot()).decode()
    assert svg.count('class="cluster"') == 2


def test_without_graphviz_the_dot_text_is_written_and_the_message_says_how(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizMissing, match="apt-get install graphviz"):
        render_dot("digraph { a -> b }")
    with pytest.raises(GraphvizMissing) as info:
        write_dot_picture(tmp_path / "g.svg", "digraph { a -> b }")
    assert (tmp_path / "g.dot").read_text() == "digraph { a -> b }"
    assert not (tmp_path / "g.svg").exists()
    assert f"dot -Tsvg {tmp_path / 'g.dot'} -o {tmp_path / 'g.svg'}" in str(info.value)


def _tree_loss():
    t = parse_tree("(1 (2 (2 the) (2 film)) (1 (2 is) (1 (2 not) (3 good))))")
    vocab = Vocabulary.from_trees([t])
    model = build_model("treelstm", len(vocab), embed_dim=8, hidden=4, seed=0, mode="recursive")
    return model, model.loss(model.make_batch([t], vocab))


def _recorded(loss):
    nodes, stack = {}, [loss.grad_fn]
    while stack:
        n = stack.pop()
        if id(n) not in nodes:
            nodes[id(n)] = n
            stack.extend(p.grad_fn for p in n.parents if p is not None and p.grad_fn is not None)
    return sorted(nodes.values(), key=lambda n: n.seq)


def test_eager_picture_of_one_tree_forward_and_backward():
    model, loss = _tree_loss()
    recorded = _recorded(loss)
    dot = eager_dot(loss, names=model)
    nodes, edges = _nodes(dot)
    fwd = {n for n in nodes if n.startswith("f")}
    bwd = {n for n in nodes if n.startswith("b")}
    assert fwd == {f"f{n.seq}" for n in recorded} and bwd == {f"b{n.seq}" for n in recorded}
    names = [n.prim.name for n in recorded]
    assert names.count("tree_lstm_leaf_node") == 5 and names.count("tree_lstm_node") == 4
    # backward's steps: decreasing creation order, the loss's node first
    steps = {int(m.group(2)): int(m.group(1)) for m in re.finditer(r"^\s+b(\d+) \[label=\"(\d+)\. vjp", dot, re.M)}
    assert [steps[k] for k in sorted(steps)] == [n.seq for n in reversed(recorded)]
    # every parameter drawn by name with its gradient, which sums one term per use
    for name, p in model.named_parameters():
        assert f'"{name}\\n(' in dot
    grad = re.search(r'\[label="U\.grad\\nsum of (\d+) terms"', dot)
    assert grad and int(grad.group(1)) == 4          # U is used by the 4 internal nodes
    # gradient edges carry the input's shape
    assert re.search(r'-> b\d+ \[color="#cb181d", label="\(1, 8\)"', dot)


def test_eager_picture_leaves_the_recording_usable_and_refuses_a_freed_one():
    model, loss = _tree_loss()
    eager_dot(loss, names=model)
    loss.backward()
    g1 = model.U.grad.numpy().copy()
    with pytest.raises(ValueError, match="freed"):
        eager_dot(loss)
    model2, loss2 = _tree_loss()
    loss2.backward()
    np.testing.assert_array_equal(model2.U.grad.data, g1)
    import dynnets as dn
    with pytest.raises(ValueError, match="no recording"):
        eager_dot(dn.tensor([1.0]))


@needs_dot
def test_eager_picture_renders(tmp_path):
    model, loss = _tree_loss()
    files = write_dot_picture(tmp_path / "eager.svg", eager_dot(loss, names=model))
    assert [f.name for f in files] == ["eager.dot", "eager.svg"]
    root = ET.fromstring((tmp_path / "eager.svg").read_text())
    assert len(root.findall(".//{http://www.w3.org/2000/svg}g[@class='cluster']")) == 2
