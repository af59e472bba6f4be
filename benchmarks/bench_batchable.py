"""Decorated cells under autobatch (``@dn.batchable``) against level batching
and packed sequences: sentences/s, training and evaluation.

Tree rows (the binary Tree-LSTM of Tai et al. 2015, SST, embedding 300,
hidden 150, softmax on every node, Adagrad, minibatch 25), all from the same
initial weights, on the first ``--trees`` SST training trees:

* ``level``                   -- ``TreeLSTM(mode="level")``: the baseline;
* ``plain decorated``        -- the recursive model code with a cell the user
  wrote from plain ops (matmul, slicing, sigmoid, tanh, mul, add; see
  :class:`PlainTreeLSTM`) decorated with ``dn.batchable`` under ``dn.autobatch()``;
* ``plain per-op``           -- the same cell recorded op by op;
* ``library decorated``     -- ``TreeLSTM(mode="autobatch")``: the library's
  fused per-node primitives, decorated;
* ``library per-op``         -- the same with ``autobatch_decorated = False``.

Sequence rows (``--lstm``): a one-layer LSTM over the SST sentences (leaf
words in order), last state to the classifier, minibatch 25:

* ``packed``                  -- ``SequenceClassifier(cell="lstm")``: one packed
  sequence per minibatch (the fused sequence kernel);
* ``LSTMCell loop decorated`` -- ``SequenceClassifier(cell="lstm",
  mode="autobatch")``: the same weights run one sentence at a time, one
  ``LSTMCell`` step call per token, the step decorated, under ``dn.autobatch()``.

Contenders run interleaved in rounds (order rotated) after three untimed
warm-up passes each (the warm-up traces and compiles every plan, and the
plans move to their generated tier); the figures
are medians over ``--repeats`` rounds, and every row is also given as a
fraction of its baseline measured in the same rounds. The first minibatch's
loss of each contender is printed (they compute the same function), and for
the decorated rows the traces, records per decorated call and batched calls
per minibatch.

Run from the repository root (one BLAS thread, as the issue's figures)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_batchable.py --data ../shared/data/sst --repeats 3
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_batchable.py --data ../shared/data/sst --repeats 3 --lstm
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import dynnets as dn  # noqa: E402
from dynnets.autograd import ops  # noqa: E402
from dynnets.data.sst import load_sst  # noqa: E402
from dynnets.data.vocab import Vocabulary  # noqa: E402
from dynnets.models import SequenceClassifier, TreeLSTM  # noqa: E402
from dynnets.train import TrainConfig, make_optimizer  # noqa: E402


class PlainTreeLSTM(TreeLSTM):
    """The library's TreeLSTM with its cells rewritten from plain ops, as a
    user would write them (same parameters, same packed [h | c] states, so
    the same function): Tai et al. 2015, eqs. 9-14."""

    def _leaf_cell(self, x):
        H = self.hidden
        z = x @ self.w_leaf + self.b_leaf                       # i, o, u
        c = ops.sigmoid(z[:, :H]) * ops.tanh(z[:, 2 * H:])
        return ops.concat([ops.sigmoid(z[:, H:2 * H]) * ops.tanh(c), c], axis=1)

    def _node_cell(self, left, right):
        H = self.hidden
        z = ops.concat([left[:, :H], right[:, :H]], axis=1) @ self.U + self.b     # i, f_l, f_r, o, u
        c = (ops.sigmoid(z[:, :H]) * ops.tanh(z[:, 4 * H:]) + ops.sigmoid(z[:, H:2 * H]) * left[:, H:]
             + ops.sigmoid(z[:, 2 * H:3 * H]) * right[:, H:])
        return ops.concat([ops.sigmoid(z[:, 3 * H:4 * H]) * ops.tanh(c), c], axis=1)


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


WARMUP = 3


def run_rounds(contenders, repeats):
    """{name: (train seconds, eval seconds)} medians over interleaved rounds."""
    names = list(contenders)
    # warm-up: traces, compiles, and the plans' tier-ups (after 2 runs: generated code) for every
    # batch size the passes meet
    for _ in range(WARMUP):
        for name in names:
            for fn in contenders[name]:
                fn()
    gc.collect()
    gc.freeze()
    times = {n: ([], []) for n in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            tr, ev = contenders[name]
            times[name][0].append(_timed(tr))
            times[name][1].append(_timed(ev))
    gc.unfreeze()
    return {n: (statistics.median(a), statistics.median(b)) for n, (a, b) in times.items()}


def print_table(med, n_sent, base):
    print(f"| contender | train sent/s | eval sent/s | train vs {base} | eval vs {base} |")
    print("| --- | --- | --- | --- | --- |")
    bt, be = med[base]
    for name, (t, e) in med.items():
        print(f"| {name} | {n_sent / t:,.0f} | {n_sent / e:,.0f} | {bt / t:.2f} | {be / e:.2f} |")


def tree_bench(args, trees, vocab):
    V, E, H, B = len(vocab), args.embed, args.hidden, args.batch_size
    cfg = TrainConfig(optimizer="adagrad", lr=args.lr, embedding_lr=args.lr, weight_decay=0.0)
    specs = {"level": (TreeLSTM, "level", True), "plain decorated": (PlainTreeLSTM, "autobatch", True),
             "plain per-op": (PlainTreeLSTM, "autobatch", False),
             "library decorated": (TreeLSTM, "autobatch", True),
             "library per-op": (TreeLSTM, "autobatch", False)}
    specs = {k: v for k, v in specs.items() if k in args.only or not args.only}
    contenders, models = {}, {}
    for name, (cls, mode, decorated) in specs.items():
        m = cls(V, E, H, 5, mode=mode, classify="all", seed=args.seed)
        m.autobatch_decorated = decorated
        opt = make_optimizer(m, cfg)
        ex = m.prepare(trees, vocab)
        train_b = [m.collate(ex[i:i + B]) for i in range(0, len(ex), B)]
        eval_b = [m.collate(ex[i:i + B]) for i in range(0, len(ex), B)]
        first = m.loss(train_b[0]).item()
        print(f"# {name}: first minibatch loss {first:.6f}")
        models[name] = (m, train_b, eval_b)

        def train(m=m, opt=opt, train_b=train_b):
            m.train()
            for batch in train_b:
                opt.zero_grad()
                m.loss(batch).backward()
                opt.step()

        def evaluate(m=m, eval_b=eval_b):
            m.eval()
            for batch in eval_b:
                m.predict_all(batch)
        contenders[name] = (train, evaluate)
    med = run_rounds(contenders, args.repeats)
    print_table(med, len(trees), "level")
    nb = len(models["level"][1]) if "level" in models else None
    if nb:
        print(f"# level per minibatch: train {med['level'][0] / nb * 1e3:.1f} ms, eval {med['level'][1] / nb * 1e3:.1f} ms")
    for name, (m, train_b, eval_b) in models.items():
        if m.mode != "autobatch":
            continue
        breakdown(name, m, train_b, eval_b)
        leaf, node = m.batchable_cells()
        m.train()
        m.loss(train_b[0]).backward()
        st_t = m.last_autobatch.stats
        m.zero_grad()
        m.predict_all(eval_b[0])
        st_e = m.last_autobatch.stats
        n_nodes = sum(len(e.children) for e in eval_b[0].examples)
        print(f"# {name}: {leaf.traces + node.traces} traces in all ({len(leaf.signatures)} leaf + "
              f"{len(node.signatures)} node signatures), {leaf.fallbacks + node.fallbacks} calls per op; first "
              f"minibatch ({n_nodes} tree nodes): {st_t['nodes']} records / {st_t['batched_calls']} batched calls "
              f"(train forward), {st_e['nodes']} records / {st_e['batched_calls']} batched calls (eval)")


def breakdown(name, m, train_b, eval_b):
    """Where an autobatched minibatch's time goes (the context's profile:
    recording, scheduling, gathers, batched calls, each ms per minibatch,
    means over the minibatches), training forward and evaluation."""
    m.autobatch_profile = True
    def evaluate(b):
        if hasattr(m, "predict_all"):
            return m.predict_all(b)
        with dn.no_grad():
            return m.logits_and_labels(b)[0].numpy()
    for phase, run in (("train forward", lambda b: m.loss(b)), ("eval", evaluate)):
        m.train() if phase.startswith("train") else m.eval()
        tot, wall = {}, 0.0
        for b in (train_b if phase.startswith("train") else eval_b):
            t0 = time.perf_counter()
            run(b)
            wall += time.perf_counter() - t0
            for k, v in m.last_autobatch.stats.items():
                if k.endswith("_s"):
                    tot[k] = tot.get(k, 0.0) + v
        n = len(train_b)
        parts = ", ".join(f"{k[:-2]} {v / n * 1e3:.1f}" for k, v in tot.items())
        print(f"# {name}, {phase}, ms per minibatch: total {wall / n * 1e3:.1f} ({parts})")
    m.autobatch_profile = False
    m.zero_grad()


def lstm_bench(args, trees, vocab):
    V, E, H, B = len(vocab), args.embed, args.hidden, args.batch_size
    cfg = TrainConfig(optimizer="adagrad", lr=args.lr, embedding_lr=args.lr, weight_decay=0.0)
    contenders, models = {}, {}
    for name, mode in (("packed", "packed"), ("LSTMCell loop decorated", "autobatch")):
        m = SequenceClassifier(V, E, H, 5, cell="lstm", seed=args.seed, mode=mode)
        opt = make_optimizer(m, cfg)
        ex = m.prepare(trees, vocab)
        batches = [m.collate(ex[i:i + B]) for i in range(0, len(ex), B)]
        print(f"# {name}: first minibatch loss {m.loss(batches[0]).item():.6f}")
        models[name] = (m, batches)

        def train(m=m, opt=opt, batches=batches):
            m.train()
            for b in batches:
                opt.zero_grad()
                m.loss(b).backward()
                opt.step()

        def evaluate(m=m, batches=batches):
            m.eval()
            with dn.no_grad():
                for b in batches:
                    m.logits_and_labels(b)[0].numpy()
        contenders[name] = (train, evaluate)
    med = run_rounds(contenders, args.repeats)
    print_table(med, len(trees), "packed")
    print(f"# packed per minibatch: train {med['packed'][0] / len(batches) * 1e3:.1f} ms, eval "
          f"{med['packed'][1] / len(batches) * 1e3:.1f} ms")
    m, batches = models["LSTMCell loop decorated"]
    breakdown("LSTMCell loop decorated", m, batches, batches)
    step = m.batchable_step()
    m.loss(batches[0])
    st = m.last_autobatch.stats
    print(f"# LSTMCell loop decorated: {step.traces} traces, {step.fallbacks} calls per op; first minibatch: "
          f"{int(batches[0].lengths.sum())} steps, {st['nodes']} records, {st['batched_calls']} batched calls")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/sst")
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=25)
    ap.add_argument("--embed", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=150)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lstm", action="store_true", help="the sequence rows instead of the tree rows")
    ap.add_argument("--only", default="", help="comma-separated tree contenders (default: all)")
    args = ap.parse_args()
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    trees = load_sst(args.data, splits=["train"])["train"][:args.trees]
    vocab = Vocabulary.from_trees(trees)
    print(f"# {len(trees)} SST training trees, vocabulary {len(vocab)}, embedding {args.embed}, hidden "
          f"{args.hidden}, batch {args.batch_size}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    if args.lstm:
        lstm_bench(args, trees, vocab)
    else:
        tree_bench(args, trees, vocab)


if __name__ == "__main__":
    main()
