"""Training from Python with numpy's BLAS on one thread or on OpenBLAS's default.

A library user who calls :func:`dynnets.train.train` directly (not the
``dynnets`` command) gets whatever thread count ``TrainConfig.blas_threads``
sets for the duration of the call. Three contenders train the same Tree-LSTM
(embedding ``--embed``, hidden ``--hidden``, Adagrad, every node classified)
on the shipped sample treebank for ``--steps`` optimizer steps (batches of
24: 25 steps per epoch) plus one dev evaluation per epoch:

* ``library default`` -- ``TrainConfig()`` as it comes (on code without a
  ``blas_threads`` setting: whatever OpenBLAS starts with);
* ``blas_threads=1``  -- one BLAS thread (when the setting exists);
* ``blas_threads=0``  -- the thread count left as OpenBLAS starts (one per core).

Contenders run interleaved (round-robin, order rotated) after one untimed
warm-up each; the figures are medians over ``--repeats`` runs. Each
contender's final dev accuracies and training loss are printed: same seed,
same numbers, and a difference between thread counts shows there.

Run from the repository root (no ``OPENBLAS_NUM_THREADS`` in the environment)::

    python benchmarks/bench_blas_threads.py --repeats 5
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import interleaved, markdown_table, setup  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="optimizer steps per run (default 200)")
    ap.add_argument("--embed", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def main():
    args = parse()
    setup(__file__, blas_threads=0)
    from dynnets.data import Vocabulary, load_samples
    from dynnets.models import build_model
    from dynnets.train import TrainConfig, train

    data = load_samples()
    train_trees = data["train"][:600]
    vocab = Vocabulary.from_trees(train_trees)
    batch = 24
    per_epoch = -(-len(train_trees) // batch)
    epochs = max(1, round(args.steps / per_epoch))
    has_setting = "blas_threads" in {f.name for f in dataclasses.fields(TrainConfig)}
    results = {}

    def contender(name, **extra):
        def run():
            model = build_model("treelstm", len(vocab), embed_dim=args.embed, hidden=args.hidden, seed=args.seed)
            res = train(model, train_trees, data["dev"], vocab,
                        TrainConfig(epochs=epochs, batch_size=batch, patience=None, seed=args.seed, progress=False,
                                    **extra))
            last = res.history[-1]
            results[name] = (last["train_loss"], last["dev"]["root_fine"], last["dev"]["root_binary"],
                             last["dev"]["all_nodes"])
        return run

    contenders = {"library default": contender("library default")}
    if has_setting:
        contenders["blas_threads=1"] = contender("blas_threads=1", blas_threads=1)
        contenders["blas_threads=0"] = contender("blas_threads=0", blas_threads=0)
    print(f"# Tree-LSTM {args.embed}/{args.hidden} on the samples: {len(train_trees)} trees, batches of {batch}, "
          f"{epochs} epochs = {epochs * per_epoch} steps, {len(data['dev'])} dev trees evaluated per epoch; "
          f"TrainConfig.blas_threads {'exists' if has_setting else 'does not exist'}")
    times = interleaved(contenders, args.repeats, 1)
    base = statistics.median(times["library default"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        loss, fine, binary, nodes = results[name]
        rows.append([name, f"{med:.2f}", f"{min(ts):.2f}", f"{max(ts):.2f}", f"{med / base:.2f}", f"{loss:.6f}",
                     f"{fine:.4f}", f"{binary:.4f}", f"{nodes:.4f}"])
    print(markdown_table(["contender", "median s", "min s", "max s", "ratio to default", "last train loss",
                          "dev fine", "dev binary", "dev all nodes"], rows))


if __name__ == "__main__":
    main()
