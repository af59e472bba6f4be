"""Where the time of each benchmarked hot path goes: cProfile tables (own
time per function, and calls) for the paths whose floors the benchmarks
measure, on the benchmarks' own workloads.

Sections (``--only``, comma-separated):

tree    level-batched Tree-LSTM, training passes and evaluation passes over the
        first ``--trees`` SST training trees (bench_treelstm's workload)
seq     packed LSTM classifier, training on the first ``--sentences`` SST
        sentences in length-bucketed batches (bench_sequence's workload)
ops     ``tanh(x @ W + b).sum()`` forward + backward (bench_ops case 1)
linreg  the linear-regression ``Session.run(train_op)`` step, with the
        generated code of its plan (bench_static's linreg)
addop   adding an op to a graph that has run and the first run using it
        (bench_static's addop)

cProfile adds a fixed cost per Python call, so the per-call figures of tiny
functions are inflated; read the tables for the share and the number of
calls, and the benchmarks for the times. Run::

    python benchmarks/profile_hotpaths.py --data ../shared/data/sst --only tree,seq,ops,linreg,addop
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import setup  # noqa: E402


def _profile(title, fn, calls, top):
    fn()                                    # warm: Numba, caches, plans
    gc.collect()
    gc.freeze()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s)
    print(f"\n## {title} ({calls} calls profiled; total {st.total_tt:.3f} s, {st.total_tt / calls * 1e6:.0f} us "
          f"per call under the profiler)\n")
    st.sort_stats("tottime").print_stats(top)
    text = s.getvalue()
    print(text[text.index("ncalls"):] if "ncalls" in text else text)
    gc.unfreeze()


def tree(args):
    import numpy as np

    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import TreeLSTM
    from dynnets.train import TrainConfig, make_optimizer

    trees = load_sst(args.data, splits=["train"])["train"][:args.trees]
    vocab = Vocabulary.from_trees(trees)
    m = TreeLSTM(len(vocab), 300, 150, 5, mode="level", classify="all", seed=args.seed)
    ex = m.prepare(trees, vocab)
    batches = [m.collate(ex[i:i + 25]) for i in range(0, len(ex), 25)]
    opt = make_optimizer(m, TrainConfig(optimizer="adagrad", lr=0.05, embedding_lr=0.05, weight_decay=0.0))

    def train():
        m.train()
        for b in batches:
            opt.zero_grad()
            m.loss(b).backward()
            opt.step()

    def evaluate():
        for b in batches:
            m.predict_proba(b)
    _profile(f"level Tree-LSTM, training, {len(trees)} trees", train, 2, args.top)
    _profile(f"level Tree-LSTM, evaluation, {len(trees)} trees", evaluate, 3, args.top)
    del np


def seq(args):
    from dynnets.data.batching import BucketSampler
    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import SequenceClassifier
    from dynnets.train import TrainConfig, make_optimizer

    trees = load_sst(args.data, splits=["train"])["train"][:args.sentences]
    vocab = Vocabulary.from_trees(trees)
    m = SequenceClassifier(len(vocab), 300, 150, 5, cell="lstm", seed=args.seed)
    ex = m.prepare(trees, vocab)
    order = BucketSampler([e.n_tokens for e in ex], 25, seed=args.seed, bucket_batches=1).batches(0)
    batches = [m.collate([ex[i] for i in b]) for b in order]
    opt = make_optimizer(m, TrainConfig(optimizer="adagrad", lr=0.05, embedding_lr=0.05, weight_decay=0.0))

    def train():
        m.train()
        for b in batches:
            opt.zero_grad()
            m.loss(b).backward()
            opt.step()
    _profile(f"packed LSTM, training, {len(trees)} sentences", train, 2, args.top)


def ops(args):
    import numpy as np

    from dynnets.autograd import ops as O
    from dynnets.autograd.tensor import Tensor

    rng = np.random.default_rng(args.seed)
    x = Tensor(rng.standard_normal((1, 150)).astype(np.float32))
    W = Tensor((rng.standard_normal((150, 150)) / np.sqrt(150)).astype(np.float32), requires_grad=True)
    b = Tensor(rng.standard_normal(150).astype(np.float32), requires_grad=True)

    def step():
        for _ in range(1000):
            W._grad = None
            b._grad = None
            O.tanh(x @ W + b).sum().backward()
    _profile("tanh(x @ W + b).sum() fwd+bwd, 1000 steps per call", step, 20, args.top)


def _linreg():
    import numpy as np

    import dynnets.static as ds

    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None,), name="x")
        y = ds.placeholder((None,), name="y_target")
        w = ds.Variable(0.1, name="w")
        b = ds.Variable(0.3, name="b")
        loss = ds.reduce_mean((w * x + b - y) ** 2)
        train_op = ds.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = ds.global_variables_initializer()
    sess = ds.Session(g)
    sess.run(init)
    fd = {x: np.array([1.0, 2.0, 3.0, 4.0], np.float32), y: np.array([2.0, 4.0, 6.0, 8.0], np.float32)}
    return ds, g, sess, fd, loss, train_op, w


def linreg(args):
    _, _, sess, fd, _, train_op, _ = _linreg()

    def step():
        for _ in range(2000):
            sess.run(train_op, fd)
    _profile("Session.run(train_op), linear regression, 2000 steps per call", step, 10, args.top)
    plan = max(sess._plans.values(), key=lambda p: p.runs)
    print(f"# the plan that ran ({plan.nodes_after} nodes, tier {plan.tier}); its generated code:\n")
    print(plan.source or "(no generated code: tier 1)")


def addop(args):
    ds, g, sess, fd, loss, train_op, w = _linreg()
    for _ in range(10):
        sess.run(train_op, fd)
    makers = [lambda: loss * 2.0, lambda: ds.tanh(loss), lambda: ds.square(w) + loss,
              lambda: ds.reduce_sum(ds.exp(loss) - 1.0), lambda: loss / 3.0 + 1.0]
    state = [0]

    def first_runs():
        for _ in range(50):
            with g.as_default():
                z = makers[state[0] % len(makers)]()
            state[0] += 1
            sess.run(z, fd)
    _profile("add an op + the first run using it, 50 per call", first_runs, 6, args.top)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/sst")
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=25, help="rows of each table")
    ap.add_argument("--blas-threads", type=int, default=2, help="as bench_treelstm and bench_sequence")
    ap.add_argument("--only", default="tree,seq,ops,linreg,addop")
    args = ap.parse_args()
    setup(__file__, blas_threads=args.blas_threads)
    sections = {"tree": tree, "seq": seq, "ops": ops, "linreg": linreg, "addop": addop}
    for name in args.only.split(","):
        if name.strip() not in sections:
            raise SystemExit(f"profile_hotpaths: unknown section {name!r}; choose from {', '.join(sections)}")
        sections[name.strip()](args)


if __name__ == "__main__":
    main()
