"""Autobatch against level-batched and recursive execution of the same Tree-LSTM,
with the floor of the naive per-node Python and the autobatch overhead per op.

The bench_treelstm setup: the first ``--trees`` SST training trees, embedding
300, hidden 150, every node classified, Adagrad lr 0.05, minibatches of 25,
the same initial weights for every contender. Contenders run interleaved
(round-robin, after a warm-up pass) in one process; figures are medians over
``--repeats`` passes, in sentences/s, with ratios to level and recursive.

* ``level`` / ``recursive`` / ``autobatch agenda`` / ``autobatch depth``:
  ``TreeLSTM(mode=...)``, training (forward, backward, Adagrad step) and
  evaluation (``predict_proba``, no graph);
* ``floor: per-node Python`` -- the recursive code's own Python with every op
  a no-op returning a preallocated object (the loops over trees and nodes,
  the list stores, the calls): no execution of any kind can run that code
  faster;
* ``floor: recording`` -- the same code under ``dn.autobatch``, recorded but
  never run (the pending nodes are dropped): Python loop plus recording.

Then one profiled pass per strategy (``profile=True``) gives per minibatch:
nodes (records per tree node), batched calls, fallbacks, bytes gathered,
arena bytes and the gathers read from it, and the microseconds per recorded
op (and per tree node) spent recording, scheduling and building batched
arguments; last, each mode's peak traced memory per minibatch.

    flock -x /tmp/dynnets-cpu.lock python benchmarks/profile_autobatch.py --data ../shared/data/sst

On a loaded machine ``--clock cpu`` times with the thread's CPU time.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import interleaved, setup  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/sst")
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=25)
    ap.add_argument("--embed", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=150)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blas-threads", type=int, default=1)
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--modes", default="level,recursive,autobatch agenda,autobatch depth,autobatch agenda nolevels")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: time with this thread's CPU time (time.thread_time stands in for "
                         "time.perf_counter everywhere in the process, the library's stats included): on a "
                         "loaded shared machine the time spent waiting for a core is left out")
    return ap.parse_args()


def main():
    args = parse()
    env = setup(__file__, blas_threads=args.blas_threads)
    if args.clock == "cpu":
        time.perf_counter = time.thread_time
    import numpy as np

    import dynnets as dn
    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import TreeLSTM
    from dynnets.train import TrainConfig, make_optimizer

    trees = load_sst(args.data, splits=["train"])["train"][:args.trees]
    vocab = Vocabulary.from_trees(trees)
    V, E, H, C, B = len(vocab), args.embed, args.hidden, 5, args.batch_size
    n_nodes = sum(t.size for t in trees)
    print(f"# {len(trees)} SST training trees, {n_nodes} nodes, vocabulary {V}, embedding {E}, hidden {H}, "
          f"batch {B}, Adagrad lr {args.lr}, numpy BLAS threads {env['blas_threads']}")
    cfg = TrainConfig(optimizer="adagrad", lr=args.lr, embedding_lr=args.lr, weight_decay=0.0)
    modes = [m.strip() for m in args.modes.split(",")]
    models = {}
    for name in modes:
        # "autobatch agenda nolevels": the strategy, then "nolevels" to run
        # without the levels lowering (one batched call per depth)
        mode, *opts = name.split()
        m = TreeLSTM(V, E, H, C, mode=mode, classify="all", seed=args.seed)
        if opts and opts[0] != "nolevels":
            m.autobatch_strategy = opts[0]
        m.autobatch_levels = "nolevels" not in opts
        ex = m.prepare(trees, vocab)
        batches = [m.collate(ex[i:i + B]) for i in range(0, len(ex), B)]
        models[name] = (m, make_optimizer(m, cfg), batches)
    first = {n: models[n][0].loss(models[n][2][0]).item() for n in modes}
    for m, _, _ in models.values():
        m.zero_grad()
    print("# first-minibatch loss: " + ", ".join(f"{k} {v:.6f}" for k, v in first.items()))

    def train(name):
        m, opt, batches = models[name]

        def run():
            m.train()
            for b in batches:
                opt.zero_grad()
                m.loss(b).backward()
                opt.step()
        return run

    def evaluate(name):
        m, _, batches = models[name]

        def run():
            for b in batches:
                m.predict_proba(b)
        return run

    # the floor: the recursive code's Python, every op a no-op
    ref = models[modes[0]][2]
    examples = [b.examples for b in ref]
    token = object()
    rows_of = {id(e): (token,) * len(e.leaves) for ex in examples for e in ex}

    def floor():
        def embed(ids):
            return token

        def split_rows(x, e):
            return rows_of[id(e)]

        def leaf(x, w, b):
            return token

        def node(l, r, U, b):
            return token

        def concat(xs, axis=0):
            return token
        U = b = w = bl = token
        for ex in examples:
            states = []
            for e in ex:
                xs = split_rows(embed(e.leaf_ids), e)
                mine = [None] * len(e.children)
                for i, x in zip(e.leaves, xs):
                    mine[i] = leaf(x, w, bl)
                for i, (l, r) in e.internal:
                    mine[i] = node(mine[l], mine[r], U, b)
                states.extend(mine)
            concat(states, axis=0)

    # recording only: the recursive code under the context, never run
    rec_model = models[next(n for n in modes if n.startswith("autobatch"))][0] if any(
        n.startswith("autobatch") for n in modes) else None

    def recording():
        for b in ref:
            ab = dn.autobatch()
            with dn.no_grad():
                ab.__enter__()
                rec_model._recursive(b.examples, ab)
                ab.__exit__(RuntimeError, None, None)        # drop the pending nodes unrun

    gc.freeze()
    nb = len(ref)
    for phase in (("train",) if not args.no_train else ()) + (("eval",) if not args.no_eval else ()):
        fns = {n: (train(n) if phase == "train" else evaluate(n)) for n in modes}
        if phase == "eval":
            fns["floor: per-node Python"] = floor
            if rec_model is not None:
                fns["floor: recording"] = recording
        times = interleaved(fns, args.repeats, 1)
        med = {n: statistics.median(t) for n, t in times.items()}
        print(f"\n## {phase} ({len(trees)} trees, medians of {args.repeats})")
        print("| contender | sentences/s | ms per minibatch | vs level | vs recursive |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for n, t in med.items():
            lv = med.get("level")
            rc = med.get("recursive")
            print(f"| {n} | {len(trees) / t:,.0f} | {1e3 * t / nb:.2f} | "
                  f"{(lv / t) if lv else float('nan'):.2f}x | {(rc / t) if rc else float('nan'):.2f}x |")

    # one profiled pass per autobatch mode: counts and overhead per recorded op
    for name in modes:
        if not name.startswith("autobatch"):
            continue
        m, opt, batches = models[name]
        m.autobatch_profile = True
        for phase in ("train", "eval"):
            tot = {}
            for b in batches:
                if phase == "train":
                    m.train()
                    opt.zero_grad()
                    m.loss(b).backward()
                    opt.step()
                else:
                    m.predict_proba(b)
                for k, v in m.last_autobatch.stats.items():
                    if isinstance(v, dict):
                        d = tot.setdefault(k, {})
                        for kk, vv in v.items():
                            d[kk] = d.get(kk, 0) + vv
                    else:
                        tot[k] = tot.get(k, 0) + v
            n = tot["nodes"]
            nodes = sum(len(e.children) for b in batches for e in b.examples)
            over = tot["record_s"] + tot["schedule_s"] + tot["gather_s"]
            print(f"\n## {name}, {phase}: per minibatch {n / nb:.0f} ops ({tot['views'] / nb:.0f} views), "
                  f"{tot['batched_calls'] / nb:.1f} batched calls ({tot.get('chains', 0) / nb:.1f} levels chains), fallbacks {tot['fallbacks']}, "
                  f"{tot['gathers'] / nb:.1f} gathers of {tot['bytes_gathered'] / nb / 1e3:.1f} kB, "
                  f"{tot['views_passed'] / nb:.1f} arguments passed as slices, {n / nodes:.2f} records per tree "
                  f"node, arena {tot.get('arena_bytes', 0) / nb / 1e3:.1f} kB with "
                  f"{tot.get('arena_gathers', 0) / nb:.1f} gathers from it")
            print(f"   per recorded op: record {1e6 * tot['record_s'] / n:.2f} us, schedule "
                  f"{1e6 * tot['schedule_s'] / n:.2f} us, gather {1e6 * tot['gather_s'] / n:.2f} us -> overhead "
                  f"{1e6 * over / n:.2f} us/op ({1e6 * over / nodes:.2f} us per tree node); the batched calls "
                  f"{1e6 * tot['compute_s'] / n:.2f} us/op")
        m.autobatch_profile = False

    # peak memory: tracemalloc's peak over one minibatch (median over the minibatches), per mode
    import tracemalloc
    for phase in ("train", "eval"):
        peak = {}
        for name in modes:
            m, _, batches = models[name]
            ps = []
            for b in batches:
                tracemalloc.start()
                if phase == "train":
                    m.train()
                    m.loss(b).backward()
                    m.zero_grad()
                else:
                    m.predict_proba(b)
                ps.append(tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
            peak[name] = statistics.median(ps)
        lv = peak.get("level")
        print(f"\n## peak memory, {phase} (tracemalloc peak per minibatch, median): " + ", ".join(
            f"{n} {v / 1e6:.2f} MB" + (f" ({v / lv:.2f}x level)" if lv else "") for n, v in peak.items()))


if __name__ == "__main__":
    main()
