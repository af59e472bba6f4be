"""The static graph's loops on SST, in process CPU time: the Fold-style
static Tree-LSTM (``static-treelstm``) against level-batched eager dynnets
(the same weights, minibatches of 25 and Adagrad as
``experiments/execution_strategies.py``), and ``padded-bucketed``
(``dynamic_rnn``), training and evaluation passes over the first
``--trees`` SST training trees.

    python benchmarks/bench_static_loops.py --data ../shared/data/sst --repeats 4

Process CPU time, minimum over ``--repeats`` interleaved rounds after one
untimed round: on a machine shared with other work, wall-clock medians
measure the load as much as the code, while the CPU time a process spends
is nearly independent of it. To compare two checkouts, run this script with
each on ``PYTHONPATH`` in turn. Like the other benchmarks it runs without the
machine's ``OPENBLAS_CORETYPE`` (faster BLAS products, which helps the
level-batched model most); ``--keep-env`` keeps it, as the experiments do.
"""
from __future__ import annotations

import argparse
import sys
import time
from types import SimpleNamespace

from _common import ROOT, setup


def main():
    # --keep-env: the machine's OpenBLAS settings, as experiments/execution_strategies.py runs with
    setup(__file__, keep_env="--keep-env" in sys.argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "sst"))
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (the benchmarks scrub them; the experiments do not)")
    a = ap.parse_args()
    import numpy as np
    from bench_treelstm import static_treelstm

    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import TreeLSTM
    from dynnets.models.padded import DynamicRNNClassifier
    from dynnets.train import TrainConfig, make_optimizer

    trees = load_sst(a.data, splits=["train"])["train"][:a.trees]
    vocab = Vocabulary.from_trees(trees)
    V, n = len(vocab), len(trees)
    cfg = TrainConfig(optimizer="adagrad", lr=0.05, embedding_lr=0.05, weight_decay=0.0)
    level = TreeLSTM(V, 300, 150, 5, mode="level", classify="all", seed=a.seed)
    ex = level.prepare(trees, vocab)
    weights = {k: np.asarray(v).copy() for k, v in level.state_dict().items()}
    batches = [level.collate(ex[i:i + 25]) for i in range(0, len(ex), 25)]
    opt = make_optimizer(level, cfg)

    def lt():
        level.train()
        for b in batches:
            opt.zero_grad()
            level.loss(b).backward()
            opt.step()

    def le():
        for b in batches:
            level.predict_proba(b)
    args = SimpleNamespace(hidden=150, batch_size=25, lr=0.05, seed=a.seed)
    scheds = [b.schedule for b in batches]
    st, se, _, _ = static_treelstm(args, weights, scheds, scheds)
    rnn = DynamicRNNClassifier(V, 300, 150, 5, batch_size=25, seed=a.seed)
    rb = rnn.make_batch(trees, vocab)
    runs = {"level train": lt, "static train": st, "level eval": le, "static eval": se,
            "padded-bucketed train": lambda: rnn.train_step(rb), "padded-bucketed eval": lambda: rnn.predict_proba(rb)}
    for f in runs.values():
        f()
    best = {k: float("inf") for k in runs}
    for _ in range(a.repeats):
        for k, f in runs.items():
            t = time.process_time()
            f()
            best[k] = min(best[k], time.process_time() - t)
    print(f"sentences/s (CPU time, min of {a.repeats} interleaved rounds, {n} trees)")
    print("| pass | level | static-treelstm | static / level | padded-bucketed |")
    print("| --- | --- | --- | --- | --- |")
    for p in ("train", "eval"):
        lv, sv, pv = n / best[f"level {p}"], n / best[f"static {p}"], n / best[f"padded-bucketed {p}"]
        print(f"| {p} | {lv:.0f} | {sv:.0f} | {sv / lv:.2f} | {pv:.0f} |")


if __name__ == "__main__":
    main()
