"""Static vs dynamic graph overhead: eager per-op cost, static compile time
against graph size, the cost of modifying a graph and re-running it, and the
steady-state run cost per op, with a plot::

    python experiments/graph_overhead.py --out results/graph_overhead

A measurement of the static compiler rather than a run of a model, so its code
lives here beside its command line, not in the library; it writes
``results.json``, ``results.md`` and ``graph_overhead.png``
(:func:`dynnets.plots.figures.overhead_figure`) into ``--out``. It stays an
experiment, not a benchmark, because it writes results files and its tests run
it in a tiny configuration (``benchmarks/`` are never part of the test run).

It also draws the graph it measures (``--picture-layers`` layers, 3 by
default, with its loss and gradients) before and after the compile passes:
``graph_overhead_before.svg`` and ``graph_overhead_after.svg`` (DOT files
beside them; the SVGs where Graphviz's ``dot`` is installed).
"""
import argparse
import math
import statistics
import sys
import time
from pathlib import Path

from _util import report_files, seed_type, setup

setup()

import numpy as np  # noqa: E402

from dynnets.blas import blas_threads  # noqa: E402
from dynnets.io import atomic_write_text, write_json  # noqa: E402
from dynnets.plots.figures import overhead_figure  # noqa: E402
from dynnets.runs import machine_description  # noqa: E402


def _layers(h, w, b, n, ops):
    for _ in range(n):
        h = ops.tanh(ops.matmul(h, w) + b)
    return h


def _time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _static_once(ds, ops, W0, b0, x0, n, width):
    """One fresh static graph of ``n`` layers: (build s, first run s, second
    run s, append a layer + run it s, session, fetch, feed, plan stats)."""
    t0 = time.perf_counter()
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((1, width), np.float32, name="x")
        wv, bv = ds.Variable(W0.copy(), name="W"), ds.Variable(b0.copy(), name="b")
        h = _layers(x, wv, bv, n, ops)
        loss = ops.sum(h)
        grads = ds.gradients(loss, [wv, bv])
        init = ds.global_variables_initializer()
    build_s = time.perf_counter() - t0
    sess = ds.Session(g)
    sess.run(init)
    fetch = [loss, grads]
    feed = {x: x0}
    t0 = time.perf_counter()
    sess.run(fetch, feed)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sess.run(fetch, feed)
    second_s = time.perf_counter() - t0
    st = [p for p in sess.stats if p["nodes_graph"]][-1]
    with g.as_default():
        t0 = time.perf_counter()
        loss2 = ops.sum(_layers(h, wv, bv, 1, ops))
        sess.run([loss2, ds.gradients(loss2, [wv, bv])], feed)
        modify_s = time.perf_counter() - t0
    return build_s, first_s, second_s, modify_s, sess, fetch, feed, st


def graph_overhead(sizes=(1, 3, 10, 30, 100, 300), width=32, repeats=20, seed=0, out=None, progress=True,
                   plots=True):
    """What a static graph costs and saves against eager execution.

    The model is a chain of ``n`` layers ``h = tanh(h @ W + b)`` (3 ops per
    layer, shared ``W`` (width, width) and ``b``, one row), loss ``sum(h)``,
    gradients of ``W`` and ``b``. For each ``n``:

    * eager: forward + backward time (median of ``repeats``) and per forward op;
    * static: graph construction time; compile time (first ``Session.run`` of
      the fetch: passes and the tier-1 plan) and code generation (the second
      run builds the straight-line tier-2 function); steady-state run time
      (median of ``repeats`` later runs) and per op; modifying the graph
      (appending one more layer and its gradients) and running the new fetch
      once (compile + run);
    * the break-even number of runs after which static (build + compile +
      runs) has cost less than eager.

    One-time costs are medians over ``max(3, repeats // 4)`` fresh graphs;
    run times are medians of ``repeats`` runs.

    Returns
    -------
    dict
        ``rows`` (one per size) and ``files`` (``results.json``,
        ``results.md``, ``graph_overhead.png`` in ``out``).
    """
    import dynnets.static as ds
    from dynnets.autograd import ops
    from dynnets.autograd.tensor import Parameter
    rng = np.random.default_rng(seed)
    W0 = (rng.standard_normal((width, width)) / math.sqrt(width)).astype(np.float32)
    b0 = (0.1 * rng.standard_normal(width)).astype(np.float32)
    x0 = rng.standard_normal((1, width)).astype(np.float32)
    rows = []
    res = {"experiment": "graph_overhead", "width": width, "repeats": repeats, "seed": seed,
           "machine": machine_description(), "rows": rows, "files": []}
    for n in sizes:
        n = int(n)
        if n < 1:
            raise ValueError(f"graph_overhead: sizes must be >= 1, got {n}")
        w, b = Parameter(W0.copy()), Parameter(b0.copy())

        def eager():
            w._grad = None
            b._grad = None
            loss = ops.sum(_layers(x0, w, b, n, ops))
            loss.backward()
            return loss
        eager()
        eager_s = _time(eager, repeats)

        once = [_static_once(ds, ops, W0, b0, x0, n, width) for _ in range(max(3, repeats // 4))]
        build_s, first_s, second_s, modify_s = (statistics.median(o[k] for o in once) for k in range(4))
        sess, fetch, feed, st = once[-1][4:]
        for _ in range(3):
            sess.run(fetch, feed)
        steady_s = _time(lambda: sess.run(fetch, feed), repeats)
        n_ops = 3 * n
        setup = build_s + first_s + second_s
        gain = eager_s - steady_s
        rows.append({"layers": n, "forward_ops": n_ops, "graph_equations": st["nodes_graph"],
                     "plan_equations": st["nodes_after"], "fused_kernels": st["fused_kernels"], "eager_ms": 1e3 * eager_s,
                     "eager_us_per_op": 1e6 * eager_s / n_ops, "build_ms": 1e3 * build_s,
                     "compile_ms": 1e3 * first_s, "codegen_ms": 1e3 * second_s, "static_run_ms": 1e3 * steady_s,
                     "static_us_per_op": 1e6 * steady_s / n_ops, "modify_and_run_ms": 1e3 * modify_s,
                     "break_even_runs": (math.ceil(setup / gain) if gain > 0 else None)})
        for o in once:
            o[4].close()
        if progress:
            print(f"  {n:5d} layers: eager {1e3 * eager_s:8.3f} ms  static compile {1e3 * first_s:8.2f} ms, "
                  f"run {1e3 * steady_s:8.3f} ms", file=sys.stderr, flush=True)
        if out is not None:
            write_json(Path(out) / "results.json", res)
    if out is not None:
        out = Path(out)
        files = [out / "results.json", out / "results.md"]
        atomic_write_text(files[1], overhead_markdown(res) + "\n")
        if plots:
            files += overhead_figure(res, out)
        res["files"] = [str(f) for f in files]
        write_json(files[0], res)
    return res


def overhead_markdown(res):
    """The graph-overhead table (markdown)."""
    m = res["machine"]
    lines = [f"Chain of tanh(h @ W + b) layers, width {res['width']}, one row, forward + backward; medians of "
             f"{res['repeats']} runs; {m['cpus']} cpus, {m['date']} (shared machine: timings are noisy).", "",
             "| layers | fwd ops | plan nodes (fused kernels) | eager ms | eager us/op | build ms | compile ms | "
             "codegen ms | static run ms | static us/op | add a layer + run ms | break-even runs |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in res["rows"]:
        be = "never" if r["break_even_runs"] is None else str(r["break_even_runs"])
        lines.append(f"| {r['layers']} | {r['forward_ops']} | {r['plan_equations']} ({r['fused_kernels']}) | "
                     f"{r['eager_ms']:.3f} | {r['eager_us_per_op']:.1f} | "
                     f"{r['build_ms']:.2f} | {r['compile_ms']:.2f} | {r['codegen_ms']:.2f} | "
                     f"{r['static_run_ms']:.3f} | {r['static_us_per_op']:.1f} | {r['modify_and_run_ms']:.2f} | {be} |")
    lines += ["", "compile: the first run of a new fetch (passes, fused Numba kernels compiled or loaded from "
              "their cache, tier-1 plan, that run); codegen: the second run (generates the straight-line tier-2 "
              "function); break-even: runs after which build + compile + codegen + static runs cost less than "
              "eager runs."]
    return "\n".join(lines)


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
