"""Graphs as pictures: a static graph before and after the compile passes, and
the eager recording of one tree's forward and backward.

A thin script over :mod:`dynnets.plots` (DOT text, rendered to SVG by
Graphviz's ``dot`` where it is installed; without it the ``.dot`` files are
written and the script says how to render them)::

    python experiments/graph_pictures.py --out docs/figures

Writes ``static_before.svg`` / ``static_after.svg``: a small graph (a
dense layer, ReLU, a scale written as a product of two constants, the
masked state update ``m*a + (1-m)*h`` of a padded RNN, a repeated
subexpression, and a summary nobody fetches) with 64 x 64 feeds, big enough
for elementwise fusion; and ``eager_tree.svg``: a Tree-LSTM's loss on
"the film is not good", as eager mode recorded it, with the VJPs backward runs.
"""
import argparse
import sys
from pathlib import Path

from _util import report_files, seed_type, setup

setup()

import numpy as np  # noqa: E402

import dynnets.static as tf  # noqa: E402
from dynnets.data import Vocabulary, parse_tree  # noqa: E402
from dynnets.models import build_model  # noqa: E402
from dynnets.plots import GraphvizMissing, compile_stages, eager_dot, write_dot_picture  # noqa: E402

TREE = "(1 (2 (2 the) (2 film)) (1 (2 is) (1 (2 not) (3 good))))"


def static_example(rng, n=64):
    """The example graph, its fetch and a feed of ``n`` x 64."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((None, 64), name="x")
        h = tf.placeholder((None, 64), name="h_prev")
        m = tf.placeholder((None, 1), name="mask")
        W = tf.Variable(rng.standard_normal((64, 64)).astype(np.float32) / 8, name="W")
        b = tf.Variable(np.zeros(64, np.float32), name="b")
        scale = tf.constant(0.5) * tf.constant(3.0)            # folded into one constant
        z = tf.matmul(x, W) + b
        a = tf.relu(z) * scale
        again = tf.relu(z) * scale                             # the same again: merged by CSE
        out = m * a + (1 - m) * h + again * 0.0
        tf.reduce_mean(tf.tanh(x))                             # not fetched: pruned
    feed = {x: rng.standard_normal((n, 64)).astype(np.float32), h: np.zeros((n, 64), np.float32),
            m: (rng.random((n, 1)) < 0.8).astype(np.float32)}
    return out, feed


def main(argv=None):
    p = argparse.ArgumentParser(prog="graph_pictures.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("results/graph_pictures"), help="output folder")
    p.add_argument("--seed", type=seed_type, default=0, help="weights and feeds (default 0)")
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    out, feed = static_example(rng)
    stages = compile_stages(out, feed)
    counts = stages.counts()
    print("equations after each pass: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"fused kernels: {len(stages.fused)} ("
          + "; ".join("+".join(e.prim.name for e in ms) for ms in stages.fused.values()) + ")")
    files, note = stages.write(a.out, "static")
    tree = parse_tree(TREE)
    vocab = Vocabulary.from_trees([tree])
    model = build_model("treelstm", len(vocab), embed_dim=8, hidden=4, seed=a.seed, mode="recursive")
    loss = model.loss(model.make_batch([tree], vocab))
    try:
        files += write_dot_picture(a.out / "eager_tree.svg", eager_dot(loss, names=model))
    except GraphvizMissing as exc:
        files.append(a.out / "eager_tree.dot")
        note = str(exc)
    report_files(files)
    if note:
        print(note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
