"""LSTM sentence classifier, one training epoch on SST train: dynnets'
dynamic (packed, no padding) path vs PyTorch ``nn.LSTM``.

Contenders, all starting from the same weights and seeing the same
length-bucketed minibatches (embedding 300, hidden 150, minibatch 25,
Adagrad lr 0.05, softmax on the final state):

* ``dynnets dynamic``  -- :class:`dynnets.models.SequenceClassifier`: each
  step computes only the sentences still running (packed rows, no padding);
* ``torch bucketed``   -- ``nn.LSTM(batch_first=True)`` on the padded batch,
  the output read at each sentence's last token;
* ``torch packed``     -- the same with ``pack_padded_sequence``
  (``enforce_sorted=False``) and ``h_n``;
* ``dynnets dynamic (shuffled)`` -- dynnets on plain shuffled batches (no
  bucketing), to show what packing costs without it;
* ``dynnets LSTMCell loop (autobatch)`` -- the natural per-instance code: for
  each sentence of the (bucketed) minibatch, a loop over its words calling
  ``nn.LSTMCell`` on one word vector at a time, the last states classified
  together, all under ``dynnets.autobatch(strategy=--cell-loop-strategy)``,
  the same weights as ``dynnets dynamic`` (skipped where ``dynnets.autobatch``
  does not exist); its ratio to ``dynnets dynamic`` is printed (target >= 0.7x).

Floors and reference passes (unless ``--no-floor``; see ``_floors.py``):

* ``floor: products only (bucketed)`` -- the same bucketed minibatches'
  matrix products alone, each one ``numpy.matmul`` into a preallocated
  output: the embedding gather and input projection of each batch's distinct
  words, the recurrent product of every step after the first (whose previous
  state is zero), the classifier, and in backward the classifier's two, one
  recurrent product per step, the recurrent and input weights' gradients and
  the words' gradient. Every contender is printed as a fraction of it.
* ``floor: products only (shuffled)`` -- the same on the shuffled batches:
  the same rows in twice the steps (the step and row counts of both are
  printed first).
* ``packed ref +gathers``, ``+gates``, ``+loss``, ``+optimizer`` -- the model
  by hand on those buffers, one piece more each (the gathers and scatters of
  projections, last states and previous states; dynnets' step kernels; the
  cross-entropy and bias gradients; the Adagrad kernels), checked against
  dynnets' first-minibatch loss and weight gradients.

Word embeddings are sparse in PyTorch (``sparse=True``) and row-sparse in
dynnets, so no contender pays for a dense update of the whole table. Batches
(padded tensors, packed index arrays) are built once, outside the timing.
Contenders run interleaved, one epoch each per round, after one untimed
epoch; figures are medians over ``--repeats`` rounds.

numpy's BLAS and PyTorch both run on 2 threads by default (``--blas-threads``,
``--torch-threads``), idle OpenBLAS threads sleeping at once
(``OPENBLAS_THREAD_TIMEOUT=20``) so they do not spin into PyTorch's turn.

Run from the repository root::

    python benchmarks/bench_sequence.py --data ../shared/data/sst --seed 0 --repeats 3
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import autobatch_stats_line, interleaved, markdown_table, setup  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/sst")
    ap.add_argument("--limit", type=int, default=None, help="use the first N training sentences")
    ap.add_argument("--batch-size", type=int, default=25)
    ap.add_argument("--embed", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=150)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--bucket-batches", type=int, default=1,
                    help="BucketSampler buckets of this many batches (1: tightest, least padding for torch)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-floor", action="store_true", help="skip the floors and reference passes")
    ap.add_argument("--no-reference", action="store_true",
                    help="time the floors but not the reference passes between them and dynnets")
    ap.add_argument("--cell-loop-strategy", default="agenda", help="autobatch scheduler of the LSTMCell loop row")
    ap.add_argument("--no-cell-loop", action="store_true", help="skip the LSTMCell loop (autobatch) row")
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--blas-threads", type=int, default=2,
                    help="numpy's OpenBLAS threads, as many as PyTorch's by default (0: OpenBLAS default)")
    return ap.parse_args()


def main():
    args = parse()
    # OpenBLAS worker threads otherwise spin for a long while after each
    # product, taking a core from the PyTorch contender that runs next (with 2
    # BLAS threads its training figures dropped ~25%, measured): 2^20 cycles
    # (~0.3 ms) keeps them awake between one minibatch's products only
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")
    env = setup(__file__, blas_threads=args.blas_threads)
    print(f"# OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}")
    import numpy as np
    import torch

    from dynnets.data.batching import BucketSampler
    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import SequenceClassifier
    from dynnets.train import TrainConfig, make_optimizer

    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    trees = load_sst(args.data, splits=["train"])["train"]
    if args.limit:
        trees = trees[:args.limit]
    vocab = Vocabulary.from_trees(trees)
    V, E, H, C, B = len(vocab), args.embed, args.hidden, 5, args.batch_size
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads; numpy BLAS threads "
          f"{env['blas_threads'] or 'default'}")
    model = SequenceClassifier(V, E, H, C, cell="lstm", seed=args.seed)
    examples = model.prepare(trees, vocab)
    lengths = [e.n_tokens for e in examples]
    bucketed = BucketSampler(lengths, B, seed=args.seed, bucket_batches=args.bucket_batches).batches(0)
    rng = np.random.default_rng(args.seed)
    perm = rng.permutation(len(examples)).tolist()
    shuffled = [perm[i:i + B] for i in range(0, len(perm), B)]
    pad = sum(max(lengths[i] for i in b) * len(b) for b in bucketed) / sum(lengths) - 1
    pad_s = sum(max(lengths[i] for i in b) * len(b) for b in shuffled) / sum(lengths) - 1
    print(f"# {len(examples)} SST training sentences, {sum(lengths)} tokens, vocabulary {V}, embedding {E}, "
          f"hidden {H}, batch {B}, Adagrad lr {args.lr}, seed {args.seed}; padding a bucketed batch would add "
          f"{100 * pad:.1f}% tokens ({100 * pad_s:.1f}% for shuffled batches)")

    weights = {k: np.array(v) for k, v in model.state_dict().items()}
    cfg = TrainConfig(optimizer="adagrad", lr=args.lr, embedding_lr=args.lr, weight_decay=0.0)

    def dynnets_contender(batches, m):
        opt = make_optimizer(m, cfg)
        packed = [m.collate([examples[i] for i in b]) for b in batches]

        def run():
            m.train()
            for batch in packed:
                opt.zero_grad()
                loss = m.loss(batch)
                loss.backward()
                opt.step()
        return run, packed

    dyn_run, dyn_packed = dynnets_contender(bucketed, model)
    dyn_shuf_run, _ = dynnets_contender(shuffled, SequenceClassifier(V, E, H, C, cell="lstm", seed=args.seed))

    nn = torch.nn
    F = torch.nn.functional

    class TorchLSTMClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, sparse=True)
            self.lstm = nn.LSTM(E, H, batch_first=True)
            self.out = nn.Linear(H, C)
            with torch.no_grad():
                self.emb.weight.copy_(torch.from_numpy(weights["embedding.weight"]))
                for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                    getattr(self.lstm, k).copy_(torch.from_numpy(weights[k]))
                self.out.weight.copy_(torch.from_numpy(weights["out.weight"]))
                self.out.bias.copy_(torch.from_numpy(weights["out.bias"]))

        def bucketed(self, ids, lens, labels):
            out, _ = self.lstm(self.emb(ids))
            last = out[torch.arange(len(lens)), lens - 1]
            return F.cross_entropy(self.out(last), labels)

        def packed(self, ids, lens, labels):
            seq = nn.utils.rnn.pack_padded_sequence(self.emb(ids), lens, batch_first=True, enforce_sorted=False)
            _, (h, _) = self.lstm(seq)
            return F.cross_entropy(self.out(h[-1]), labels)

    def torch_batches(batches):
        out = []
        for b in batches:
            L = [lengths[i] for i in b]
            ids = np.zeros((len(b), max(L)), dtype=np.int64)
            for r, i in enumerate(b):
                ids[r, :L[r]] = examples[i].ids
            out.append((torch.from_numpy(ids), torch.tensor(L), torch.tensor([examples[i].label for i in b])))
        return out

    t_batches = torch_batches(bucketed)

    def torch_contender(kind):
        m = TorchLSTMClassifier()
        opt = torch.optim.Adagrad(m.parameters(), lr=args.lr)
        f = m.bucketed if kind == "bucketed" else m.packed

        def run():
            m.train()
            for ids, lens, labels in t_batches:
                opt.zero_grad()
                loss = f(ids, lens, labels)
                loss.backward()
                opt.step()
        return run, m, f

    t_buck, tm_b, f_b = torch_contender("bucketed")
    t_pack, tm_p, f_p = torch_contender("packed")
    first = {"dynnets dynamic": model.loss(dyn_packed[0]).item(), "torch bucketed": f_b(*t_batches[0]).item(),
             "torch packed": f_p(*t_batches[0]).item()}
    model.zero_grad()
    tm_b.zero_grad()
    tm_p.zero_grad()
    print("# first-minibatch loss: " + ", ".join(f"{k} {v:.6f}" for k, v in first.items()))

    def batch_stats(packed):
        steps = sum(len(b.batch_sizes) for b in packed)
        distinct = sum(len(np.unique(b.ids)) for b in packed)
        rows = sum(int(np.sum(b.batch_sizes)) for b in packed)
        return steps, distinct, rows

    shuf_packed = [model.collate([examples[i] for i in b]) for b in shuffled]
    for tag, pk in (("bucketed", dyn_packed), ("shuffled", shuf_packed)):
        st, di, ro = batch_stats(pk)
        print(f"# {tag}: {len(pk)} batches, {ro} packed rows, {st} recurrent steps ({st / len(pk):.1f} per batch, "
              f"{ro / st:.1f} rows per step), {di} distinct-word projections ({100 * di / ro:.0f}% of the tokens)")

    extra = {}
    if not args.no_cell_loop:
        run, loss0, note = cell_loop_contender(V, E, H, C, weights, examples, bucketed, cfg,
                                               args.cell_loop_strategy)
        if run is None:
            print(f"# {note}")
        else:
            extra[CELL_LOOP] = run
            print(f"# first-minibatch loss: {CELL_LOOP} {loss0:.6f} (dynnets dynamic {first['dynnets dynamic']:.6f}); "
                  f"{note}")
    if not args.no_floor:
        from _floors import LSTM_PIECES, PackedLSTMReference

        ref = PackedLSTMReference(weights, dyn_packed, lr=args.lr, seed=args.seed)
        model.zero_grad()
        loss0 = model.loss(dyn_packed[0])
        loss0.backward()
        ref_loss = ref.check(loss0.item(), np.asarray(model.weight_hh_l0.grad), np.asarray(model.weight_ih_l0.grad))
        model.zero_grad()
        print(f"# packed reference, first-minibatch loss {ref_loss:.6f} (dynnets {loss0.item():.6f}); its W_hh and "
              f"W_ih gradients match dynnets'")
        extra[FLOOR] = ref.products()
        extra[FLOOR_SHUF] = PackedLSTMReference(weights, shuf_packed, lr=args.lr, seed=args.seed).products()
        if not args.no_reference:
            for k in range(2, len(LSTM_PIECES) + 1):
                extra[f"packed ref +{LSTM_PIECES[k - 1]}"] = ref.make(LSTM_PIECES[:k])

    # data and models exist now: keep them out of the garbage collector's full
    # collections during the timing, for every contender alike (dynnets.train
    # does the same while training)
    gc.freeze()
    contenders = {"dynnets dynamic": dyn_run, "torch bucketed": t_buck, "torch packed": t_pack,
                  "dynnets dynamic (shuffled)": dyn_shuf_run, **extra}
    times = interleaved(contenders, repeats=args.repeats, number=1, warmup=1)
    n = len(examples)
    med = {}
    for c, ts in times.items():
        med[c] = statistics.median(n / t for t in ts)
        print(f"# {c:34s} sent/s per epoch: " + ", ".join(f"{n / t:.0f}" for t in ts))
    fl = med.get(FLOOR)
    print()
    print(markdown_table(["contender", "train sent/s (median)", "epoch seconds", "/ floor"],
                         [[c, f"{med[c]:.0f}", f"{n / med[c]:.2f}", f"{med[c] / fl:.2f}" if fl else "-"]
                          for c in contenders]))
    print()
    r = med["dynnets dynamic"] / med["torch bucketed"]
    print(f"dynnets dynamic / torch bucketed: {r:.2f}x (target >= 1.5x: {'met' if r >= 1.5 else 'NOT met'})")
    print(f"dynnets dynamic / torch packed: {med['dynnets dynamic'] / med['torch packed']:.2f}x")
    print(f"dynnets dynamic (shuffled) / dynnets dynamic: "
          f"{med['dynnets dynamic (shuffled)'] / med['dynnets dynamic']:.2f}x")
    if CELL_LOOP in med:
        r = med[CELL_LOOP] / med["dynnets dynamic"]
        print(f"{CELL_LOOP} / dynnets dynamic: {r:.2f}x (target >= 0.7x: {'met' if r >= 0.7 else 'NOT met'})")
    if fl:
        f = med["dynnets dynamic"] / fl
        print(f"dynnets dynamic / {FLOOR}: {f:.2f} (target >= 0.8: {'met' if f >= 0.8 else 'NOT met'}); the floor "
              f"is {1e6 / fl:.0f} us per sentence, dynnets {1e6 / med['dynnets dynamic']:.0f}, torch bucketed "
              f"{1e6 / med['torch bucketed']:.0f}")
        print(f"{FLOOR_SHUF} / {FLOOR}: {med[FLOOR_SHUF] / fl:.2f}")


CELL_LOOP = "dynnets LSTMCell loop (autobatch)"


def cell_loop_contender(V, E, H, C, weights, examples, batches, cfg, strategy):
    """The per-step ``nn.LSTMCell`` loop over each sentence of a minibatch,
    under ``dynnets.autobatch``, from ``SequenceClassifier``'s weights.

    Returns (the training pass, its first-minibatch loss, a note), or
    (None, None, the reason) where ``dynnets.autobatch`` does not exist."""
    import numpy as np

    import dynnets as dn
    from dynnets import nn
    from dynnets.autograd import ops
    from dynnets.autograd.ops import split_rows
    from dynnets.train import make_optimizer

    if not hasattr(dn, "autobatch"):
        return None, None, f"dynnets.autobatch is not on this branch: {CELL_LOOP} skipped"

    class CellLoopClassifier(nn.Module):
        """Embedding -> LSTMCell, one word at a time -> the last state -> softmax."""

        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E)
            self.cell = nn.LSTMCell(E, H)
            self.out = nn.Linear(H, C)

        def embedding_parameters(self):
            return [self.embedding.weight]

        def loss(self, sentences, labels):
            last = []
            for ids in sentences:
                state = None
                for x in split_rows(self.embedding(ids)):
                    state = self.cell(x, state)
                last.append(state[0])
            return ops.cross_entropy(self.out(ops.concat(last, axis=0)), labels)

    m = CellLoopClassifier()
    for ours, theirs in (("embedding.weight", "embedding.weight"), ("cell.weight_ih", "weight_ih_l0"),
                         ("cell.weight_hh", "weight_hh_l0"), ("cell.bias_ih", "bias_ih_l0"),
                         ("cell.bias_hh", "bias_hh_l0"), ("out.weight", "out.weight"), ("out.bias", "out.bias")):
        dict(m.named_parameters())[ours].numpy()[...] = weights[theirs]
    data = [([np.asarray(examples[i].ids) for i in b], np.array([examples[i].label for i in b])) for b in batches]
    opt = make_optimizer(m, cfg)
    with dn.autobatch(strategy=strategy) as ab:
        loss = m.loss(*data[0])
        loss0 = loss.item()
        loss.backward()
    m.zero_grad()
    stats = []
    for sentences, labels in data[:8]:
        with dn.autobatch(strategy=strategy, profile=True) as ab:
            m.loss(sentences, labels).backward()
        stats.append(ab.stats)
        m.zero_grad()
    stats = f"per minibatch, mean of {len(stats)}: {autobatch_stats_line(stats)}"

    def run():
        m.train()
        for sentences, labels in data:
            opt.zero_grad()
            with dn.autobatch(strategy=strategy):
                loss = m.loss(sentences, labels)
                loss.backward()
            opt.step()
    return run, loss0, f"strategy {strategy}; {stats}"


FLOOR = "floor: products only (bucketed)"
FLOOR_SHUF = "floor: products only (shuffled)"

if __name__ == "__main__":
    main()
