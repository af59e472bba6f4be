"""Static vs dynamic graph overhead: eager per-op cost, static compile time
against graph size, the cost of modifying a graph and re-running it, and the
steady-state run cost per op, with a plot.

A thin script over :func:`dynnets.experiments.graph_overhead`::

    python experiments/graph_overhead.py --out results/graph_overhead

It also draws the graph it measures (``--picture-layers`` layers, 3 by
default, with its loss and gradients) before and after the compile passes:
``graph_overhead_before.svg`` and ``graph_overhead_after.svg`` (DOT files
beside them; the SVGs where Graphviz's ``dot`` is installed).
"""
import argparse
import sys
from pathlib import Path

from _util import report_files, seed_type, setup

setup()

from dynnets.blas import blas_threads  # noqa: E402
from dynnets.experiments import graph_overhead, overhead_markdown  # noqa: E402


def pictures(out, layers, width, seed):
    """The measured chain of ``layers`` layers with its gradients, before and after the passes."""
    import numpy as np

    import dynnets.static as tf
    from dynnets.plots import compile_stages
    rng = np.random.default_rng(seed)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder((1, width), name="x")
        w = tf.Variable((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), name="W")
        b = tf.Variable((0.1 * rng.standard_normal(width)).astype(np.float32), name="b")
        h = x
        for _ in range(layers):
            h = tf.tanh(tf.matmul(h, w) + b)
        loss = tf.reduce_sum(h)
        grads = tf.gradients(loss, [w, b])
        tf.global_variables_initializer()
    stages = compile_stages([loss, *grads], {x: rng.standard_normal((1, width)).astype(np.float32)})
    return stages.write(out, "graph_overhead")


def main(argv=None):
    p = argparse.ArgumentParser(prog="graph_overhead.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=seed_type, default=0, help="random weights and inputs (default 0)")
    p.add_argument("--out", type=Path, default=Path("results/graph_overhead"), help="output folder")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 10, 30, 100, 300],
                   help="layers in the chain (3 forward ops each); default 1 3 10 30 100 300")
    p.add_argument("--width", type=int, default=32, help="layer width (default 32)")
    p.add_argument("--repeats", type=int, default=20, help="timed runs per figure, median reported (default 20)")
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads; 0 leaves the default (default 1)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plot")
    p.add_argument("--picture-layers", type=int, default=3,
                   help="layers of the chain drawn before and after the passes (default 3; 0: no pictures)")
    p.add_argument("--no-progress", action="store_true", help="no per-size lines on stderr")
    a = p.parse_args(argv)
    if min(a.sizes) < 1 or a.width < 1 or a.repeats < 1 or a.blas_threads < 0 or a.picture_layers < 0:
        p.error("--sizes, --width and --repeats must be positive, --blas-threads and --picture-layers >= 0")
    with blas_threads(a.blas_threads):
        res = graph_overhead(sizes=a.sizes, width=a.width, repeats=a.repeats, seed=a.seed, out=a.out,
                             plots=not a.no_plots, progress=not a.no_progress)
    files, note = list(res["files"]), None
    if a.picture_layers:
        drawn, note = pictures(a.out, a.picture_layers, a.width, a.seed)
        files += [str(f) for f in drawn]
    print(overhead_markdown(res))
    report_files(files)
    if note:
        print(note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
