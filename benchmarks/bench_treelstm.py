"""Tree-LSTM training and evaluation throughput (sentences/s): dynnets vs PyTorch.

Five contenders train the same binary Tree-LSTM (embedding 300, hidden 150,
softmax on every node, Adagrad lr 0.05, minibatch 25) on the first ``--trees``
SST training trees, starting from the same weights:

* ``dynnets level``     -- level-batched (one fused kernel call per tree level);
* ``dynnets recursive`` -- define-by-run, one graph node per tree node;
* ``dynnets static``    -- the Fold-style static graph (``static-treelstm``):
  built once, a ``while_loop`` over the levels, each minibatch's schedule fed;
* ``torch level``       -- PyTorch written level-batched: one sparse embedding
  lookup per batch, per level one gather of the children, one ``Linear``, the
  gate maths, and a slice assignment into the state buffers;
* ``torch recursive``   -- PyTorch written the way most Tree-LSTM code is: one
  embedding lookup per sentence, then per node a ``Linear`` and the gates;
* ``dynnets autobatch agenda`` / ``depth`` -- the recursive per-node code
  (``mode="recursive"``) run over each minibatch under
  ``dynnets.autobatch(strategy=...)``; the context's statistics (nodes,
  batched calls, fallbacks, copy volume, overhead per recorded op) are
  printed for one training and one evaluation minibatch;
* ``dynet autobatch 1`` / ``0`` -- DyNet 2.2 (``pip install dynet38``), the
  same model written per node as DyNet users write it, one graph per
  minibatch (``dynet_treelstm.py``), in a worker process per setting (DyNet
  reads its autobatch switch once per process) that runs one pass per
  request, so it is timed in the same interleaved rounds. The worker gets
  ``--blas-threads`` as its thread environment; this DyNet build runs on one
  thread either way (the script prints the workers' CPU / wall time). One
  Adagrad step is compared with dynnets' before the timing.

Contenders whose library is missing are skipped with a message.

Training time covers forward, backward and the optimizer step of every
minibatch; evaluation is a forward pass (no graph) over the same trees in
batches of ``--eval-batch``. Minibatch schedules (dynnets'
:class:`~dynnets.data.batching.TreeBatch`, the PyTorch index tensors) are
built once before the timing, for both libraries. Contenders run interleaved (round-robin, order
rotated) in one process, after one untimed warm-up pass each, with the
objects that exist before the timing frozen out of the garbage collector
(``gc.freeze``, as ``dynnets.train`` does) for all contenders; the figures are
medians over ``--repeats`` passes. The first minibatch's loss of every
contender is printed to show that they compute the same function. Every row
is given as a fraction of the products floor, of ``dynnets level`` and of
``dynet autobatch 1``.

Floors and reference passes (unless ``--no-floor``; see ``_floors.py``), in
the same interleaved rounds:

* ``level floor: products only`` -- the level-batched floor: the same
  minibatches' matrix products alone, on the same level schedule, each one
  ``numpy.matmul`` into a preallocated output (forward: the embedding gather
  of each batch's distinct words, their leaf product, one ``U`` product per
  level, the classifier; backward, in training: the classifier's two, one
  ``U^T`` product per level, ``U``'s and the leaf weights' gradients, the
  words' gradient). Every contender is printed as a fraction of it, for
  training and for evaluation (where the classifier reads the roots only).
* ``level ref +gathers``, ``+gates``, ``+loss``, ``+optimizer`` -- the same
  model written by hand on those buffers, adding one piece at a time: the
  gathers and scatters (per-leaf states, the children's pairs and their
  adjoint, the scatter of leaf gradients to words), dynnets' fused gate
  kernels, the softmax cross-entropy and bias gradients (in evaluation: the
  softmax), the Adagrad kernels; in evaluation, ``level ref, all but the
  products`` is the last one with the products left out, to show that the
  pieces add up. Its loss and ``U``/``w_leaf`` gradients on
  the first minibatch are checked against dynnets' before the timing. The
  last one is dynnets level-batched without the framework.
* ``recursive floor: per-node products`` (evaluation) -- the floor under any
  per-node evaluation: one ``numpy.matmul`` per node into a preallocated
  output (a leaf's word vector times the (300, 450) leaf weights, an
  internal node's [h_l; h_r] times the (300, 750) ``U``), on the same trees;
  the script prints the largest "recursive / torch recursive" evaluation
  ratio it allows. ``recursive ref: node kernels only`` calls dynnets' fused
  per-node kernels (products and gate maths) on preallocated buffers, with no
  graph and no primitive.

Run from the repository root::

    python benchmarks/bench_treelstm.py --data ../shared/data/sst --seed 0 --repeats 3

The script re-executes itself once without ``OPENBLAS_CORETYPE`` /
``OPENBLAS_L2_SIZE`` and with ``OPENBLAS_NUM_THREADS=--blas-threads`` (see
``_common.setup``) and ``OPENBLAS_THREAD_TIMEOUT=20`` (idle OpenBLAS threads
sleep instead of spinning into the next contender's time); PyTorch runs on
``--torch-threads`` threads. Both default to 2 threads, the machine's cores;
``--blas-threads 1`` is the robust choice on a loaded machine.
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
    ap.add_argument("--data", default="../shared/data/sst", help="folder with train.txt (SST PTB format)")
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=25)
    ap.add_argument("--eval-batch", type=int, default=25)
    ap.add_argument("--embed", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=150)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--blas-threads", type=int, default=2,
                    help="numpy's OpenBLAS threads, as many as PyTorch's by default (0: OpenBLAS default)")
    ap.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS),
                    help="comma-separated; contenders whose library is missing (dynet, dynnets.autobatch) are "
                         "skipped with a message")
    ap.add_argument("--dynet-mem", type=int, default=1024, help="DyNet's memory pool (MB) in its worker processes")
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the floors and reference passes (see the module docstring)")
    ap.add_argument("--no-reference", action="store_true",
                    help="time the floors but not the level reference passes between them and dynnets")
    return ap.parse_args()


# --------------------------------------------------------------------------
# PyTorch implementations (written here, as a user would)
# --------------------------------------------------------------------------


def torch_models(torch, V, E, H, C, weights):
    nn = torch.nn
    F = torch.nn.functional

    class TorchTreeLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, sparse=True)
            self.leaf = nn.Linear(E, 3 * H)
            self.U = nn.Linear(2 * H, 5 * H)
            self.out = nn.Linear(H, C)
            with torch.no_grad():
                self.emb.weight.copy_(torch.from_numpy(weights["embedding.weight"]))
                self.leaf.weight.copy_(torch.from_numpy(weights["w_leaf"].T.copy()))
                self.leaf.bias.copy_(torch.from_numpy(weights["b_leaf"]))
                self.U.weight.copy_(torch.from_numpy(weights["U"].T.copy()))
                self.U.bias.copy_(torch.from_numpy(weights["b"]))
                self.out.weight.copy_(torch.from_numpy(weights["out.weight"]))
                self.out.bias.copy_(torch.from_numpy(weights["out.bias"]))

        # -- recursive: one embedding lookup per sentence, then per node --------
        def tree_loss(self, tree):
            ids, children, labels = tree
            x = self.emb(ids)
            hs, cs = [], []
            k = 0
            for kids in children:
                if kids:
                    z = self.U(torch.cat([hs[kids[0]], hs[kids[1]]]))
                    i, fl, fr, o, u = z.chunk(5)
                    c = (torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cs[kids[0]]
                         + torch.sigmoid(fr) * cs[kids[1]])
                else:
                    i, o, u = self.leaf(x[k]).chunk(3)
                    c = torch.sigmoid(i) * torch.tanh(u)
                    k += 1
                hs.append(torch.sigmoid(o) * torch.tanh(c))
                cs.append(c)
            logits = self.out(torch.stack(hs))
            return logits, labels

        def recursive_loss(self, trees):
            total = 0
            for t in trees:
                logits, labels = self.tree_loss(t)
                total = total + F.cross_entropy(logits, labels, reduction="sum")
            return total / len(trees)

        def recursive_roots(self, trees):
            return torch.stack([F.softmax(self.tree_loss(t)[0][-1], dim=0) for t in trees])

        # -- level-batched ---------------------------------------------------------
        def level_states(self, b):
            leaf_ids, offsets, left, right, n_nodes = b["leaf_ids"], b["offsets"], b["left"], b["right"], b["n"]
            n0 = offsets[1]
            i, o, u = self.leaf(self.emb(leaf_ids)).chunk(3, dim=1)
            c0 = torch.sigmoid(i) * torch.tanh(u)
            h0 = torch.sigmoid(o) * torch.tanh(c0)
            h_all = torch.zeros(n_nodes, H)
            c_all = torch.zeros(n_nodes, H)
            h_all[:n0] = h0
            c_all[:n0] = c0
            for k in range(1, len(offsets) - 1):
                lo, hi = offsets[k], offsets[k + 1]
                lk, rk = left[lo - n0:hi - n0], right[lo - n0:hi - n0]
                z = self.U(torch.cat([h_all[lk], h_all[rk]], dim=1))
                g = torch.sigmoid(z[:, :4 * H])
                i, fl, fr, o = g.chunk(4, dim=1)
                c = i * torch.tanh(z[:, 4 * H:]) + fl * c_all[lk] + fr * c_all[rk]
                h_all[lo:hi] = o * torch.tanh(c)
                c_all[lo:hi] = c
            return h_all

        def level_loss(self, b):
            logits = self.out(self.level_states(b))
            return F.cross_entropy(logits, b["labels"], reduction="sum") / b["n_trees"]

        def level_roots(self, b):
            return F.softmax(self.out(self.level_states(b)[b["roots"]]), dim=1)

    return TorchTreeLSTM()


# --------------------------------------------------------------------------


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

    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import TreeLSTM
    from dynnets.train import TrainConfig, make_optimizer

    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads; numpy BLAS threads "
          f"{env['blas_threads'] or 'default'}")
    trees = load_sst(args.data, splits=["train"])["train"][:args.trees]
    vocab = Vocabulary.from_trees(trees)
    V, E, H, C, B = len(vocab), args.embed, args.hidden, 5, args.batch_size
    n_nodes = sum(t.size for t in trees)
    print(f"# {len(trees)} SST training trees, {n_nodes} nodes ({n_nodes / len(trees):.1f} per tree), vocabulary "
          f"{V}, embedding {E}, hidden {H}, batch {B}, Adagrad lr {args.lr}, seed {args.seed}")

    def dyn_model(mode):
        return TreeLSTM(V, E, H, C, mode=mode, classify="all", seed=args.seed)

    cfg = TrainConfig(optimizer="adagrad", lr=args.lr, embedding_lr=args.lr, weight_decay=0.0)
    dyn = {}
    for mode in ("level", "recursive"):
        m = dyn_model(mode)
        ex = m.prepare(trees, vocab)
        dyn[mode] = (m, make_optimizer(m, cfg), [ex[i:i + B] for i in range(0, len(ex), B)],
                     [ex[i:i + args.eval_batch] for i in range(0, len(ex), args.eval_batch)])
    weights = {k: np.array(v) for k, v in dyn["level"][0].state_dict().items()}

    # torch data: per-tree (ids, children, labels) and per-batch level schedules, precomputed once
    ex = dyn["level"][2]
    flat = [e for b in ex for e in b]
    t_trees = [(torch.from_numpy(e.leaf_ids), e.children, torch.from_numpy(e.arrays.labels)) for e in flat]

    def t_sched(batch):
        s = dyn["level"][0].collate(batch).schedule
        return {"leaf_ids": torch.from_numpy(s.leaf_word_ids), "offsets": s.level_offsets.tolist(),
                "left": torch.from_numpy(np.ascontiguousarray(s.left)),
                "right": torch.from_numpy(np.ascontiguousarray(s.right)), "n": s.n_nodes,
                "labels": torch.from_numpy(s.labels), "n_trees": s.n_trees,
                "roots": torch.from_numpy(s.root_index)}

    t_train_sched = [t_sched(b) for b in dyn["level"][2]]
    t_eval_sched = [t_sched(b) for b in dyn["level"][3]]
    t_train_trees = [t_trees[i:i + B] for i in range(0, len(t_trees), B)]
    t_eval_trees = [t_trees[i:i + args.eval_batch] for i in range(0, len(t_trees), args.eval_batch)]
    tm = {}
    for name in ("level", "recursive"):
        m = torch_models(torch, V, E, H, C, weights)
        tm[name] = (m, torch.optim.Adagrad(m.parameters(), lr=args.lr))

    # ---- contenders ---------------------------------------------------------------
    # batches are collated once, outside the timing, as the PyTorch schedules are
    collated = {mode: ([dyn[mode][0].collate(b) for b in dyn[mode][2]], [dyn[mode][0].collate(b) for b in dyn[mode][3]])
                for mode in dyn}

    def dyn_train(mode):
        m, opt = dyn[mode][0], dyn[mode][1]
        batches = collated[mode][0]

        def run():
            m.train()
            for batch in batches:
                opt.zero_grad()
                loss = m.loss(batch)
                loss.backward()
                opt.step()
        return run

    def dyn_eval(mode):
        m = dyn[mode][0]
        batches = collated[mode][1]

        def run():
            for batch in batches:
                m.predict_proba(batch)
        return run

    def torch_train(name):
        m, opt = tm[name]
        data = t_train_sched if name == "level" else t_train_trees
        lossf = m.level_loss if name == "level" else m.recursive_loss

        def run():
            m.train()
            for b in data:
                opt.zero_grad()
                loss = lossf(b)
                loss.backward()
                opt.step()
        return run

    def torch_eval(name):
        m, _ = tm[name]
        data = t_eval_sched if name == "level" else t_eval_trees
        f = m.level_roots if name == "level" else m.recursive_roots

        def run():
            m.eval()
            with torch.no_grad():
                for b in data:
                    f(b)
        return run

    # same weights, same first minibatch: the four losses agree (float32)
    first = {"dynnets level": dyn["level"][0].loss(dyn["level"][0].collate(dyn["level"][2][0])).item(),
             "dynnets recursive": dyn["recursive"][0].loss(dyn["recursive"][0].collate(dyn["recursive"][2][0])).item(),
             "torch level": tm["level"][0].level_loss(t_train_sched[0]).item(),
             "torch recursive": tm["recursive"][0].recursive_loss(t_train_trees[0]).item()}
    for m in (dyn["level"][0], dyn["recursive"][0]):
        m.zero_grad()
    print("# first-minibatch loss: " + ", ".join(f"{k} {v:.6f}" for k, v in first.items()))

    wanted = [c.strip() for c in args.contenders.split(",") if c.strip()]
    makers = {}
    if "dynnets static" in wanted:
        st_train, st_eval, st_first, st_compile = static_treelstm(
            args, weights, [b.schedule for b in collated["level"][0]], [b.schedule for b in collated["level"][1]])
        print(f"# dynnets static: first-minibatch loss {st_first:.6f}; a first evaluation pass, compiling a plan per "
              f"new feed signature, took {st_compile:.2f} s")
        first["dynnets static"] = st_first
        makers["dynnets static"] = (st_train, st_eval)
    makers.update({"dynnets level": (dyn_train("level"), dyn_eval("level")),
                   "dynnets recursive": (dyn_train("recursive"), dyn_eval("recursive")),
                   "torch level": (torch_train("level"), torch_eval("level")),
                   "torch recursive": (torch_train("recursive"), torch_eval("recursive"))})
    known = {*makers, "dynnets static", *AUTOBATCH_STRATEGIES, *DYNET_SETTINGS}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        sys.exit(f"bench_treelstm: unknown contenders {unknown}; choose from "
                 f"{sorted(known)}")
    ab_names = [w for w in wanted if w in AUTOBATCH_STRATEGIES]
    if ab_names:
        ab_makers, ab_first, note = autobatch_contenders(ab_names, dyn_model, lambda m: make_optimizer(m, cfg),
                                                          dyn["recursive"][2], dyn["recursive"][3])
        makers.update(ab_makers)
        first.update(ab_first)
        if note:
            print(f"# {note}")
    dy_names = [w for w in wanted if w in DYNET_SETTINGS]
    workers = []
    if dy_names:
        import tempfile

        tmp = tempfile.mkdtemp(prefix="bench_treelstm_dynet_")
        dy_makers, dy_first, workers, note = dynet_contenders(
            dy_names, weights, flat, B, args.eval_batch, args.lr, args.seed, env["blas_threads"], args.dynet_mem,
            tmp)
        makers.update(dy_makers)
        first.update(dy_first)
        if note:
            print(f"# {note}")
        if workers:
            print("# " + dynet_adagrad_check(np, dyn_model, lambda m: make_optimizer(m, cfg), dyn["level"][2][0],
                                             workers[0], tmp))
    skipped = [w for w in wanted if w not in makers]
    wanted = [w for w in wanted if w in makers]
    if skipped:
        print(f"# skipped (library missing): {', '.join(skipped)}")
    if len(first) > 4:
        ref = first["dynnets level"]
        print("# first-minibatch loss, all contenders: " + ", ".join(
            f"{k} {v:.6f} ({(v - ref) / ref:+.1e})" for k, v in first.items()))
    # data and models exist now: keep them out of the garbage collector's full
    # collections during the timing, for every contender alike (dynnets.train
    # does the same while training)
    gc.freeze()
    extra = {"train": {}, "eval": {}}
    if not args.no_floor:
        from _floors import TREE_PIECES, TreeLevelReference

        level_ref = TreeLevelReference(weights, [b.schedule for b in collated["level"][0]], lr=args.lr,
                                       seed=args.seed)
        # the reference must compute what dynnets computes: same first-minibatch loss and gradients
        m0 = dyn["level"][0]
        m0.zero_grad()
        loss0 = m0.loss(collated["level"][0][0])
        loss0.backward()
        ref_loss = level_ref.check(loss0.item(), np.asarray(m0.U.grad), np.asarray(m0.w_leaf.grad))
        m0.zero_grad()
        print(f"# level reference, first-minibatch loss {ref_loss:.6f} (dynnets level {loss0.item():.6f}); "
              f"its U and w_leaf gradients match dynnets'")
        level_eval = TreeLevelReference(weights, [b.schedule for b in collated["level"][1]], seed=args.seed)
        extra["train"][LEVEL_FLOOR] = level_ref.products("train")
        extra["eval"][LEVEL_FLOOR] = level_eval.products("eval")
        if not args.no_reference:
            for k in range(2, len(TREE_PIECES) + 1):
                extra["train"][f"level ref +{TREE_PIECES[k - 1]}"] = level_ref.make("train", TREE_PIECES[:k])
            for k in range(2, len(TREE_PIECES)):
                extra["eval"][f"level ref +{TREE_PIECES[k - 1]}"] = level_eval.make("eval", TREE_PIECES[:k])
            # evaluation only, on buffers of its own (see TreeLevelReference.make)
            own = TreeLevelReference(weights, [b.schedule for b in collated["level"][1]], seed=args.seed)
            extra["eval"][NO_PRODUCTS] = own.make("eval", TREE_PIECES[:-1], products=False)
        extra["eval"][REC_FLOOR], extra["eval"][REC_KERNELS] = recursive_floors(np, weights, flat, E, H, args.seed)
    n = len(trees)
    results = {}
    for phase, k in (("train", 0), ("eval", 1)):
        if phase == "eval" and args.no_eval:
            continue
        runs = {c: makers[c][k] for c in wanted}
        runs.update(extra[phase])
        times = interleaved(runs, repeats=args.repeats, number=1, warmup=1)
        for c in runs:
            results[(c, phase)] = [n / t for t in times[c]]
            print(f"# {phase:5s} {c:36s} sent/s per pass: " + ", ".join(f"{n / t:.0f}" for t in times[c]))

    def med(c, phase):
        v = results.get((c, phase))
        return statistics.median(v) if v else None

    def frac(x, y):
        return "-" if x is None or y is None else f"{x / y:.2f}"

    lf_tr, lf_ev, rf_ev = med(LEVEL_FLOOR, "train"), med(LEVEL_FLOOR, "eval"), med(REC_FLOOR, "eval")
    rows = []
    lv_tr, lv_ev = med("dynnets level", "train"), med("dynnets level", "eval")
    dy_tr, dy_ev = med("dynet autobatch 1", "train"), med("dynet autobatch 1", "eval")

    def row(c, recursive_floor):
        tr, ev = med(c, "train"), med(c, "eval")
        return [c, "-" if tr is None else f"{tr:.0f}", frac(tr, lf_tr), frac(tr, lv_tr), frac(tr, dy_tr),
                "-" if ev is None else f"{ev:.0f}", frac(ev, lf_ev), frac(ev, rf_ev) if recursive_floor else "-",
                frac(ev, lv_ev), frac(ev, dy_ev)]
    for c in wanted:
        rows.append(row(c, "recursive" in c))
    for c in [LEVEL_FLOOR, *extra["train"], *extra["eval"]]:
        if any(r[0] == c for r in rows):
            continue
        rows.append(row(c, c in (REC_FLOOR, REC_KERNELS)))
    print()
    print(markdown_table(["contender", "train sent/s", "/ level floor", "/ dynnets level", "/ dynet ab 1",
                          "eval sent/s", "/ level floor", "/ recursive floor", "/ dynnets level", "/ dynet ab 1"],
                         rows))
    print()
    for c in AUTOBATCH_STRATEGIES:
        for phase, lv, dy in (("train", lv_tr, dy_tr), ("eval", lv_ev, dy_ev)):
            x = med(c, phase)
            if x and lv:
                print(f"{c} / dynnets level ({phase}): {x / lv:.2f}x (target >= 0.8x): "
                      f"{'met' if x >= 0.8 * lv else 'NOT met'}")
            if x and dy:
                print(f"{c} / dynet autobatch 1 ({phase}): {x / dy:.2f}x (target >= 3x): "
                      f"{'met' if x >= 3 * dy else 'NOT met'}")
    for phase in ("train", "eval"):
        x, y = med("dynet autobatch 1", phase), med("dynet autobatch 0", phase)
        if x and y:
            print(f"dynet autobatch 1 / dynet autobatch 0 ({phase}): {x / y:.2f}x")
    for a, b_, target in (("dynnets level", "torch level", 1.5), ("dynnets recursive", "torch recursive", 5.0)):
        for phase in ("train", "eval"):
            x, y = med(a, phase), med(b_, phase)
            if x and y:
                print(f"{a} / {b_} ({phase}): {x / y:.2f}x (target >= {target}x)")
    for phase, fl in (("train", lf_tr), ("eval", lf_ev)):
        x = med("dynnets level", phase)
        if x and fl:
            print(f"dynnets level / {LEVEL_FLOOR} ({phase}): {x / fl:.2f} (target >= 0.8): "
                  f"{'met' if x >= 0.8 * fl else 'NOT met'}; the floor is {1e6 / fl:.0f} us per sentence, "
                  f"dynnets level {1e6 / x:.0f}")
    tr_ev = med("torch recursive", "eval")
    kf = med(REC_KERNELS, "eval")
    if rf_ev and tr_ev:
        print(f"{REC_FLOOR}: {1e6 / rf_ev:.0f} us per sentence; no recursive evaluation can exceed "
              f"{rf_ev / tr_ev:.2f}x torch recursive here")
    if kf and tr_ev:
        print(f"{REC_KERNELS}: {1e6 / kf:.0f} us per sentence, {kf / tr_ev:.2f}x torch recursive")
    if workers:
        print(dynet_cpu_note(workers))
    for w in workers:
        w.close()


def static_treelstm(args, weights, schedules, eval_schedules):
    """``dynnets static``: the Fold-style static Tree-LSTM (``static-treelstm``,
    one graph built once; a ``while_loop`` over levels with each minibatch's
    schedule fed), with the same weights, minibatches and Adagrad.
    Returns (train pass, eval pass, first-minibatch loss, seconds of a first
    pass, which compiles a plan for each new feed signature)."""
    import time

    import numpy as np

    from dynnets.models import StaticTreeLSTM
    from dynnets.models.static_tree import StaticTreeBatch, schedule_feed

    V, E = weights["embedding.weight"].shape
    m = StaticTreeLSTM(V, E, args.hidden, weights["out.bias"].shape[0], classify="all", batch_size=args.batch_size,
                       optimizer="adagrad", lr=args.lr, seed=args.seed)
    m.load_state_dict({k: np.asarray(v) for k, v in weights.items()})
    train_b = [StaticTreeBatch([schedule_feed(s)], s.n_trees) for s in schedules]
    eval_b = [StaticTreeBatch([schedule_feed(s)], s.n_trees) for s in eval_schedules]
    first = m.loss_and_grads(train_b[0])[0]

    def train():
        for b in train_b:
            m.train_step(b)

    def evaluate():
        for b in eval_b:
            m.predict_proba(b)
    t0 = time.perf_counter()
    evaluate()
    return train, evaluate, first, time.perf_counter() - t0


DEFAULT_CONTENDERS = ("dynnets level", "dynnets recursive", "dynnets static", "dynnets autobatch agenda", "dynnets autobatch depth",
                      "torch level", "torch recursive", "dynet autobatch 1", "dynet autobatch 0")
STATS_BATCHES = 8
AUTOBATCH_STRATEGIES = {"dynnets autobatch agenda": "agenda", "dynnets autobatch depth": "depth"}
DYNET_SETTINGS = {"dynet autobatch 1": 1, "dynet autobatch 0": 0}
LEVEL_FLOOR = "level floor: products only"
NO_PRODUCTS = "level ref, all but the products"
REC_FLOOR = "recursive floor: per-node products"
REC_KERNELS = "recursive ref: node kernels only"


def recursive_floors(np, weights, flat, E, H, seed):
    """The per-node evaluation floor (every node's matrix-vector product, one
    ``numpy.matmul`` into a preallocated output) and dynnets' fused per-node
    kernels on preallocated buffers, on the evaluation trees."""
    from dynnets.autograd import kernels_tree as KT

    w_leaf = np.ascontiguousarray(weights["w_leaf"])
    U = np.ascontiguousarray(weights["U"])
    x1 = np.random.default_rng(seed).standard_normal((1, E)).astype(w_leaf.dtype)
    h1 = np.random.default_rng(seed + 1).standard_normal((1, 2 * H)).astype(U.dtype)
    zl = np.empty((1, w_leaf.shape[1]), w_leaf.dtype)
    zi = np.empty((1, U.shape[1]), U.dtype)
    counts = [(len(e.leaves), len(e.internal)) for e in flat]
    mm = np.matmul

    def floor():
        for n_leaf, n_int in counts:
            for _ in range(n_leaf):
                mm(x1, w_leaf, out=zl)
            for _ in range(n_int):
                mm(h1, U, out=zi)

    b_leaf, b_int = np.ascontiguousarray(weights["b_leaf"]), np.ascontiguousarray(weights["b"])
    s_buf = np.empty((1, 2 * H), U.dtype)
    acts3, acts5, hcat = np.empty((1, 3 * H), U.dtype), np.empty((1, 5 * H), U.dtype), np.empty((1, 2 * H), U.dtype)
    s_l = np.random.default_rng(seed + 2).standard_normal((1, 2 * H)).astype(U.dtype)
    s_r = s_l.copy()
    leaf_k, node_k = KT.tree_lstm_leaf_node_fwd_mv, KT.tree_lstm_node_fwd_mv

    def kernels_floor():
        for n_leaf, n_int in counts:
            for _ in range(n_leaf):
                leaf_k(x1, w_leaf, b_leaf, s_buf, acts3)
            for _ in range(n_int):
                node_k(s_l, s_r, U, b_int, s_buf, acts5, hcat)
    return floor, kernels_floor

# --------------------------------------------------------------------------
# dynnets autobatch and DyNet contenders (self-contained: each returns its
# contenders' (train, eval) callables and first-minibatch losses)
# --------------------------------------------------------------------------


def autobatch_contenders(names, make_model, optimizer_for, train_examples, eval_examples):
    """dynnets autobatch rows: the recursive per-node model code
    (``TreeLSTM(mode="recursive")``) run over each minibatch under
    ``dynnets.autobatch(strategy=...)``, one model and optimizer per scheduler
    from the same initial weights. Prints the context's statistics for one
    training and one evaluation minibatch.

    Returns (makers, first-minibatch losses, a note or None)."""
    import dynnets as dn

    if not hasattr(dn, "autobatch"):
        return {}, {}, "dynnets.autobatch is not on this branch: autobatch rows skipped"
    makers, first = {}, {}
    for name in names:
        strategy = AUTOBATCH_STRATEGIES[name]
        m = make_model("recursive")
        opt = optimizer_for(m)
        train_b = [m.collate(b) for b in train_examples]
        eval_b = [m.collate(b) for b in eval_examples]
        with dn.autobatch(strategy=strategy) as ab:
            loss = m.loss(train_b[0])
            first[name] = loss.item()
            loss.backward()
        m.zero_grad()
        # statistics with the recording timed too (profile=True), caches warm, summed over STATS_BATCHES minibatches
        tr, ev = [], []
        for batch in train_b[:STATS_BATCHES]:
            with dn.autobatch(strategy=strategy, profile=True) as ab:
                m.loss(batch).backward()
            tr.append(ab.stats)
            m.zero_grad()
        for batch in eval_b[:STATS_BATCHES]:
            with dn.autobatch(strategy=strategy, profile=True) as ab:
                m.predict_proba(batch)
            ev.append(ab.stats)
        print(f"# {name}, training (forward + backward), per minibatch, mean of {len(tr)}: "
              f"{autobatch_stats_line(tr)}")
        print(f"# {name}, evaluation, per minibatch, mean of {len(ev)}: {autobatch_stats_line(ev)}")
        makers[name] = _autobatch_runs(dn, m, opt, train_b, eval_b, strategy)
    return makers, first, None


def _autobatch_runs(dn, m, opt, train_b, eval_b, strategy):
    def train():
        m.train()
        for batch in train_b:
            opt.zero_grad()
            with dn.autobatch(strategy=strategy):
                loss = m.loss(batch)
                loss.backward()
            opt.step()

    def evaluate():
        for batch in eval_b:
            with dn.autobatch(strategy=strategy):
                m.predict_proba(batch)
    return train, evaluate


def dynet_contenders(names, weights, examples, batch_size, eval_batch, lr, seed, threads, mem, tmp):
    """DyNet 2.2 rows: one worker process per autobatch setting
    (``dynet_treelstm.py``), the same weights and trees.

    Returns (makers, first-minibatch losses, the workers, a note or None)."""
    import importlib.util

    if importlib.util.find_spec("dynet") is None:
        return {}, {}, [], "dynet is not installed (pip install dynet38): DyNet rows skipped"
    from dynet_treelstm import DynetWorker, export

    npz = Path(tmp) / "dynet_treelstm.npz"
    export(npz, weights, examples, batch_size, eval_batch, lr)
    makers, first, workers = {}, {}, []
    for name in names:
        w = DynetWorker(npz, DYNET_SETTINGS[name], threads=threads, seed=seed, mem=mem)
        workers.append(w)
        first[name] = w.info["loss0"]
        makers[name] = (w.runner("train"), w.runner("eval"))
        print(f"# {name}: DyNet {w.info['version']}, worker threads env {w.info['threads_env']}, gradient "
              f"clipping {w.info['clip_threshold'] or 'off'}")
    return makers, first, workers, None


def dynet_cpu_note(workers):
    """Each DyNet worker's CPU time / wall time over its timed passes (1.0 = one busy thread)."""
    parts = []
    for w in workers:
        for cmd in ("train", "eval"):
            h = [r for c, r in w.history if c == cmd]
            if h:
                parts.append(f"autobatch {w.autobatch} {cmd} "
                             f"{sum(r['cpu_seconds'] for r in h) / sum(r['seconds'] for r in h):.2f}")
    return "DyNet worker CPU time / wall time: " + ", ".join(parts)


def dynet_adagrad_check(np, make_model, optimizer_for, first_batch, worker, tmp):
    """One Adagrad step from the same weights in dynnets and DyNet: the
    parameters agree except where the gradient is float32 noise (Adagrad's
    first step moves every element by lr * sign(g), so a gradient of 1e-9
    steps as far as a large one, in a direction rounding decides)."""
    m = make_model("level")
    opt = optimizer_for(m)
    opt.zero_grad()
    loss = m.loss(m.collate(first_batch))
    loss.backward()
    grads = {n: np.asarray(p.grad) for n, p in m.named_parameters()}
    opt.step()
    path = Path(tmp) / "dynet_step1.npz"
    worker.call(f"steps 1 {path}")
    d = np.load(path)
    n_diff = n_all = 0
    g_max = 0.0
    for k in d.files:
        ours = np.asarray(m.state_dict()[k])
        off = np.abs(d[k] - ours) > 1e-5
        n_diff += int(off.sum())
        n_all += off.size
        if off.any():
            g_max = max(g_max, float(np.abs(grads[k][off]).max()))
    return (f"Adagrad, one step from the same weights: {n_diff} of {n_all} parameters differ between dynnets and "
            f"DyNet by > 1e-5, all with |gradient| <= {g_max:.1e} (float32 noise; Adagrad's first step is "
            f"lr * sign(g)); the rest agree")


if __name__ == "__main__":
    main()
