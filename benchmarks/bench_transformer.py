"""Transformer and CNN sentence classifiers on SST minibatches: dynnets
packed (ragged attention, no padding) against padding, a TF1-style static
graph, autobatch and PyTorch 2.13 -- training and evaluation tokens/s.

Transformer contenders (all from the same weights: 2 layers, d_model 128, 4
heads, feed-forward 256, ReLU, post-norm, mean pooling, dropout 0, plain SGD
lr 0.01 with sparse word-vector gradients; the same length-bucketed
minibatches of ``--batch-size`` unless named otherwise):

* ``dynnets packed``        -- :class:`dynnets.models.TransformerClassifier`,
  ``execution="packed"``: projections, feed-forward and layer norms on the
  real tokens, the ``ragged_attention`` primitive;
* ``dynnets padded-bucketed`` -- ``execution="padded"`` (batch maximum, key-padding mask);
* ``dynnets padded-to-max`` -- ``execution="padded", max_len=`` the longest
  training sentence (the TF1 habit of one fixed length), bucketed batches;
* ``dynnets static graph``  -- the padded encoder as a
  :class:`dynnets.models.transformer.StaticEncoderGraph` inside a TF1-style
  classifier graph (placeholders of unknown batch and length), one
  ``Session.run`` per minibatch, bucketed batches padded to their maximum;
* ``dynnets autobatch``     -- ``execution="autobatch"``: the per-sentence
  code under ``dn.autobatch()`` (on the first ``--autobatch-batches``
  minibatches only: it is slow, and tokens/s over them is printed);
* ``torch padded``          -- ``nn.TransformerEncoder`` (``batch_first``,
  ``enable_nested_tensor=False``) with ``src_key_padding_mask``;
* ``torch nested`` (evaluation) -- the same encoder with
  ``enable_nested_tensor=True`` in ``eval()`` under ``inference_mode``: its
  fast path converts the padded batch to a nested tensor and runs the fused
  native encoder layer on the real tokens;
* ``floor: products on real tokens`` -- the encoder's and classifier's matrix
  products alone (numpy ``matmul`` into preallocated outputs) on the packed
  tokens: forward only for evaluation, forward plus the two backward
  products of each for training. No attention, no elementwise work.

CNN contenders (Kim 2014: widths 3, 4, 5 x ``--cnn-maps`` maps, embedding
``--cnn-embed``, dropout 0): ``dynnets cnn packed`` / ``padded`` /
``autobatch`` and ``torch Conv1d padded`` (the batch padded to its maximum
plus ``w - 1`` zeros each side, ``conv1d``, ReLU, max over time, masked as
dynnets' so both compute the same function), and a floor (the tap products
on real tokens).

Contenders run interleaved, one pass over the minibatches each per round,
after one untimed pass; figures are medians over ``--repeats`` rounds.
``--blas-threads`` sets numpy's OpenBLAS threads, dynnets' own threads
(``dn.set_num_threads``: the ragged attention's length groups) and torch's
intra-op threads alike.

Run from the repository root::

    python benchmarks/bench_transformer.py --data ../shared/data/sst --blas-threads 1
    python benchmarks/bench_transformer.py --data ../shared/data/sst --blas-threads 2
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved, markdown_table, setup  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/sst")
    ap.add_argument("--limit", type=int, default=1000, help="the first N training sentences (0: all)")
    ap.add_argument("--batch-size", type=int, default=25)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--nhead", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--ff", type=int, default=256)
    ap.add_argument("--cnn-embed", type=int, default=300)
    ap.add_argument("--cnn-maps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--autobatch-batches", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blas-threads", type=int, default=1, choices=(1, 2))
    ap.add_argument("--only", choices=("transformer", "cnn", "attention", "profile"), default=None,
                    help="one part; 'profile' (never part of the default run): where dynnets packed spends its "
                         "time, per primitive, training and evaluation, on both batch sets")
    ap.add_argument("--contenders", default=None, metavar="NAME,NAME",
                    help="transformer contenders to run, comma-separated (e.g. 'dynnets packed,torch nested'; each "
                         "name picks its shuffled and bucketed rows); torch padded always runs (the ratios' base)")
    ap.add_argument("--plot", default=None, metavar="OUT.svg",
                    help="also write a bar chart of train and eval tokens/s of the packed and padded contenders, "
                         "each labelled with its padding fraction (SVG, written directly, replaced atomically)")
    return ap.parse_args()


def main():
    args = parse()
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")
    setup(__file__, blas_threads=args.blas_threads)
    import numpy as np
    import torch

    import dynnets as dn
    from dynnets.data.batching import BucketSampler
    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import build_model

    torch.set_num_threads(args.blas_threads)
    dn.set_num_threads(args.blas_threads)        # numpy's BLAS and dynnets' own threads (ragged attention)
    torch.manual_seed(args.seed)
    trees = load_sst(args.data, splits=["train"])["train"]
    if args.limit:
        trees = trees[:args.limit]
    vocab = Vocabulary.from_trees(trees)
    V = len(vocab)
    probe = build_model("bow", V)
    examples = probe.prepare(trees, vocab)
    lengths = [e.n_tokens for e in examples]
    n_tokens = sum(lengths)
    B = args.batch_size
    bucketed = BucketSampler(lengths, B, seed=args.seed, bucket_batches=1).batches(0)
    perm = np.random.default_rng(args.seed).permutation(len(examples)).tolist()
    shuffled = [perm[i:i + B] for i in range(0, len(perm), B)]
    batches = {"shuffled": shuffled, "bucketed": bucketed}
    max_len = max(lengths)
    pad_b = sum(max(lengths[i] for i in b) * len(b) for b in bucketed)
    pad_s = sum(max(lengths[i] for i in b) * len(b) for b in shuffled)
    pad_m = max_len * len(lengths)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads; {len(examples)} SST training sentences, "
          f"{n_tokens} tokens, {len(bucketed)} batches of {B}; padding fraction (padded tokens / tokens computed): "
          f"shuffled batches {1 - n_tokens / pad_s:.3f}, bucketed {1 - n_tokens / pad_b:.3f}, to the global max "
          f"{max_len}: {1 - n_tokens / pad_m:.3f}")
    results = []
    if args.only in (None, "transformer"):
        results += bench_transformer(args, np, torch, dn, build_model, examples, batches, lengths, n_tokens, V,
                                     max_len)
    if args.only in (None, "cnn"):
        results += bench_cnn(args, np, torch, dn, build_model, examples, batches, lengths, n_tokens, V)
    if args.only in (None, "attention"):
        bench_attention(args, np, batches, lengths)
    if args.only == "profile":
        profile_packed(args, np, dn, build_model, examples, batches, V)
    if results:
        print()
        print(markdown_table(["model", "contender", "batches", "train tok/s", "eval tok/s", "train vs torch padded",
                              "eval vs torch padded", "eval vs torch nested"], results))
    if results and args.plot:
        padding = {"shuffled": 1 - n_tokens / pad_s, "bucketed": 1 - n_tokens / pad_b, "max": 1 - n_tokens / pad_m}
        write_plot(args.plot, results, padding, n_tokens, B)
        print(f"# plot: {args.plot}")


def bench_attention(args, np, batches, lengths):
    """The ragged attention primitive's methods alone (forward + backward,
    float32, d_model heads as the transformer rows) on each batch set."""
    import statistics

    from dynnets.autograd import kernels_ragged as KR
    from dynnets.autograd import reference_ragged as RR
    from dynnets.autograd.primitives import ragged as R
    nt = args.blas_threads
    methods = {f"grouped (BLAS stacks, default), {nt} thread{'s' if nt > 1 else ''}":
               (lambda *a: R._grouped_fwd(*a, threads=nt), lambda *a: R._grouped_bwd(*a, threads=nt)),
               "kernel (Numba, one pass)": (KR.ragged_attention_fwd, KR.ragged_attention_bwd),
               "twin (numpy, per sentence)": (RR.ragged_attention_fwd, RR.ragged_attention_bwd)}
    if nt > 1:
        methods["grouped (BLAS stacks), 1 thread"] = (lambda *a: R._grouped_fwd(*a, threads=1),
                                                      lambda *a: R._grouped_bwd(*a, threads=1))
    rng = np.random.default_rng(args.seed)
    E, H = args.d_model, args.nhead
    rows = []
    for name, bl in batches.items():
        offs = [np.concatenate([[0], np.cumsum([lengths[i] for i in b])]).astype(np.int64) for b in bl]
        data = [[rng.standard_normal((int(o[-1]), E)).astype(np.float32) for _ in range(4)] for o in offs]

        def make(fwd, bwd):
            def run():
                for o, (q, k, v, g) in zip(offs, data):
                    out, lse = fwd(q, k, v, o, H, 1.0 / np.sqrt(E // H))
                    bwd(q, k, v, o, H, 1.0 / np.sqrt(E // H), out, lse, g, np.zeros_like(lse))
            return run
        t = interleaved({m: make(*f) for m, f in methods.items()}, args.repeats, 1)
        for m in methods:
            rows.append([name, m, f"{statistics.median(t[m]) * 1e3:.0f}"])
    print()
    print(markdown_table(["batches", "ragged_attention method", "forward + backward ms per pass"], rows))


def profile_packed(args, np, dn, build_model, examples, batches, V):
    """A reference pass: ``dynnets packed``'s wall time per pass split by
    primitive (forward implementations and VJPs, each timed around its call;
    exclusive of the primitives it binds in turn; what is left is Python:
    dispatch, the tape, the optimizer's loop), the
    medians of ``--repeats`` passes after one untimed pass."""
    import statistics
    import time as _t

    from dynnets.autograd.primitives import PRIMITIVES
    from dynnets.train import TrainConfig, make_optimizer

    spent = {}
    inner = [0.0]          # time of the calls nested in the current one (an impl that binds another primitive)

    def timed(key, fn):
        def run(*a, **k):
            outer, inner[0] = inner[0], 0.0
            t0 = _t.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dt = _t.perf_counter() - t0
                spent[key] = spent.get(key, 0.0) + dt - inner[0]          # exclusive time
                inner[0] = outer + dt
        return run

    saved = []
    for name, prim in PRIMITIVES.items():
        saved.append((prim, prim.impl, prim.joint_vjp, prim.vjps))
        prim.impl = timed(name, prim.impl)
        if prim.joint_vjp is not None:
            prim.joint_vjp = timed(name + " (vjp)", prim.joint_vjp)
        if prim.vjps is not None:
            prim.vjps = tuple(None if v is None else timed(name + " (vjp)", v) for v in prim.vjps)
    cfg = dict(embed_dim=args.d_model, hidden=args.ff, num_layers=args.layers, nhead=args.nhead, dropout=0.0,
               seed=args.seed)
    tcfg = TrainConfig(optimizer="sgd", lr=args.lr, embedding_lr=args.lr, weight_decay=0.0)
    try:
        for which, bl in batches.items():
            m = build_model("transformer", V, execution="packed", **cfg)
            opt = make_optimizer(m, tcfg)
            train, evaluate = _passes(dn, m, opt, [m.collate([examples[i] for i in b]) for b in bl])
            for mode, fn in (("train", train), ("eval", evaluate)):
                fn()
                walls, per = [], []
                for _ in range(args.repeats):
                    spent.clear()
                    t0 = _t.perf_counter()
                    fn()
                    walls.append(_t.perf_counter() - t0)
                    per.append(dict(spent))
                wall = statistics.median(walls)
                keys = sorted({k for d in per for k in d}, key=lambda k: -statistics.median(d.get(k, 0) for d in per))
                rows = [[k, f"{statistics.median(d.get(k, 0) for d in per) * 1e3:.1f}",
                         f"{100 * statistics.median(d.get(k, 0) for d in per) / wall:.0f}%"] for k in keys]
                ops = sum(statistics.median(d.get(k, 0) for d in per) for k in keys)
                rows = [r for r in rows if float(r[1]) >= 0.05 * wall * 1e3 / 5]
                rows.append(["(Python: dispatch, tape, optimizer loop)", f"{(wall - ops) * 1e3:.1f}",
                             f"{100 * (wall - ops) / wall:.0f}%"])
                print(f"\n# dynnets packed, {mode}, {which} batches: {wall * 1e3:.1f} ms per pass "
                      f"({args.blas_threads} thread{'s' if args.blas_threads > 1 else ''}); ops under 1% not listed")
                print(markdown_table(["primitive", "ms per pass", "share"], rows))
    finally:
        for prim, impl, jv, vj in saved:
            prim.impl, prim.joint_vjp, prim.vjps = impl, jv, vj


def _passes(dn, m, opt, data):
    """A training pass (SGD steps) and an evaluation pass over the collated
    minibatches ``data`` of model ``m``: two functions of no argument."""
    def train():
        m.train()
        for b in data:
            opt.zero_grad()
            m.loss(b).backward()
            opt.step()

    def evaluate():
        m.eval()
        with dn.no_grad():
            for b in data:
                m.logits_and_labels(b)
    return train, evaluate


def _rate(tokens, samples):
    import statistics
    return tokens / statistics.median(samples)


def bench_transformer(args, np, torch, dn, build_model, examples, batches, lengths, n_tokens, V, max_len):
    from dynnets.models.transformer import StaticEncoderGraph, sinusoidal_positions
    from dynnets.train import TrainConfig, make_optimizer
    import dynnets.static as tf

    E, H, L, FF, lr = args.d_model, args.nhead, args.layers, args.ff, args.lr
    cfg = dict(embed_dim=E, hidden=FF, num_layers=L, nhead=H, dropout=0.0, seed=args.seed)
    ref = build_model("transformer", V, **cfg)
    weights = {k: np.array(v) for k, v in ref.state_dict().items()}
    tcfg = TrainConfig(optimizer="sgd", lr=lr, embedding_lr=lr, weight_decay=0.0)
    ab_batches = batches["shuffled"][:args.autobatch_batches]
    ab_tokens = sum(lengths[i] for b in ab_batches for i in b)
    print(f"# transformer: d_model {E}, {H} heads, {L} layers, ff {FF}; autobatch on {len(ab_batches)} batches "
          f"({ab_tokens} tokens)")

    def dyn(execution, bl, max_len=None):
        m = build_model("transformer", V, execution=execution, max_len=max_len, **cfg)
        m.load_state_dict({k: v.copy() for k, v in weights.items()})
        opt = make_optimizer(m, tcfg)
        return _passes(dn, m, opt, [m.collate([examples[i] for i in b]) for b in bl])

    # --- torch ---------------------------------------------------------------------
    class TorchModel(torch.nn.Module):
        def __init__(self, nested):
            super().__init__()
            self.emb = torch.nn.Embedding(V, E, sparse=True)
            layer = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True)
            self.enc = torch.nn.TransformerEncoder(layer, L, enable_nested_tensor=nested)
            self.out = torch.nn.Linear(E, 5)
            sd = {"emb.weight": weights["embedding.weight"], "out.weight": weights["out.weight"],
                  "out.bias": weights["out.bias"]}
            sd.update({"enc." + k[len("encoder."):]: v for k, v in weights.items() if k.startswith("encoder.")})
            self.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()})
            self.register_buffer("pe", torch.from_numpy(sinusoidal_positions(max_len, E)))

        def forward(self, ids, mask, lens):
            x = self.emb(ids) + self.pe[:ids.shape[1]]
            y = self.enc(x, src_key_padding_mask=mask)
            if y.is_nested:
                y = y.to_padded_tensor(0.0, (ids.shape[0], ids.shape[1], E))
            y = y.masked_fill(mask[:, :, None], 0.0)
            return self.out(y.sum(1) / lens[:, None])

    def torch_batches(bl):
        out = []
        for b in bl:
            Ls = [lengths[i] for i in b]
            T = max(Ls)
            ids = np.zeros((len(b), T), dtype=np.int64)
            for r, i in enumerate(b):
                ids[r, :Ls[r]] = examples[i].ids
            mask = np.arange(T)[None] >= np.array(Ls)[:, None]
            out.append((torch.from_numpy(ids), torch.from_numpy(mask), torch.tensor(Ls, dtype=torch.float32),
                        torch.tensor([examples[i].label for i in b])))
        return out

    tbs = {k: torch_batches(v) for k, v in batches.items()}

    def torch_contender(nested, which):
        m = TorchModel(nested)
        tb = tbs[which]
        opt = torch.optim.SGD(m.parameters(), lr=lr)

        def train():
            m.train()
            for ids, mask, lens, y in tb:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(ids, mask, lens), y).backward()
                opt.step()

        def evaluate():
            m.eval()
            with torch.inference_mode():
                for ids, mask, lens, y in tb:
                    m(ids, mask, lens)
        return train, evaluate, m

    # --- static graph ----------------------------------------------------------------
    def static_contender():
        m = build_model("transformer", V, **cfg)
        m.load_state_dict({k: v.copy() for k, v in weights.items()})
        g = tf.Graph()
        with g.as_default():
            ids = tf.placeholder(np.int64, [None, None], name="ids")
            lens = tf.placeholder(np.int32, [None], name="lengths")
            labels = tf.placeholder(np.int64, [None], name="labels")
            emb = tf.Variable(weights["embedding.weight"], name="embedding")
            pe = tf.constant(sinusoidal_positions(max_len, E))
            T = tf.shape(ids)[1]
            x = tf.nn.embedding_lookup(emb, ids) + tf.gather(pe, tf.range(T))
            enc = StaticEncoderGraph(m.encoder, graph=g, x=x, lengths=lens)
            real = tf.cast(tf.sequence_mask(lens, T), np.float32)
            pooled = tf.reduce_sum(enc.out * real[:, :, None], 1) / tf.cast(lens, np.float32)[:, None]
            w = tf.Variable(weights["out.weight"].T.copy(), name="out_w")
            bias = tf.Variable(weights["out.bias"], name="out_b")
            logits = tf.matmul(pooled, w) + bias
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            step = tf.train.GradientDescentOptimizer(lr).minimize(loss)
            init = tf.global_variables_initializer()
        sess = tf.Session(graph=g)
        sess.run(init)
        feeds = [{ids: i.numpy(), lens: lz.numpy().astype(np.int32), labels: y.numpy()}
                 for i, _, lz, y in tbs["bucketed"]]

        def train():
            for f in feeds:
                sess.run(step, f)

        def evaluate():
            for f in feeds:
                sess.run(logits, f)
        return train, evaluate

    # --- floor --------------------------------------------------------------------
    def floor_contender():
        shapes = [(E, 3 * E), (E, E), (E, FF), (FF, E)] * L
        Ws = [np.ones(s, dtype=np.float32) * 0.01 for s in shapes]
        Wc = np.ones((E, 5), dtype=np.float32)
        bufs = []
        for b in batches["shuffled"]:
            n = sum(lengths[i] for i in b)
            xs = [np.ones((n, s[0]), dtype=np.float32) for s in shapes]
            ys = [np.empty((n, s[1]), dtype=np.float32) for s in shapes]
            dx = [np.empty((n, s[0]), dtype=np.float32) for s in shapes]
            dw = [np.empty(s, dtype=np.float32) for s in shapes]
            pooled = np.ones((len(b), E), dtype=np.float32)
            bufs.append((xs, ys, dx, dw, pooled, np.empty((len(b), 5), dtype=np.float32)))

        def fwd():
            for xs, ys, _, _, p, lo in bufs:
                for x, w, y in zip(xs, Ws, ys):
                    np.matmul(x, w, out=y)
                np.matmul(p, Wc, out=lo)

        def train():
            for xs, ys, dx, dw, p, lo in bufs:
                for x, w, y in zip(xs, Ws, ys):
                    np.matmul(x, w, out=y)
                np.matmul(p, Wc, out=lo)
                for x, w, y, gx, gw in zip(xs, Ws, ys, dx, dw):
                    np.matmul(y, w.T, out=gx)
                    np.matmul(x.T, y, out=gw)
        return train, fwd

    S, K = "shuffled", "bucketed"
    makers = {            # name -> (batch set, () -> (train, evaluate))
        "dynnets packed": (S, lambda: dyn("packed", batches[S])),
        "dynnets packed ": (K, lambda: dyn("packed", batches[K])),
        "dynnets padded-bucketed": (K, lambda: dyn("padded", batches[K])),
        "dynnets padded-to-max": (S, lambda: dyn("padded", batches[S], max_len=max_len)),
        "dynnets static graph": (K, static_contender),
        "dynnets autobatch": (S, lambda: dyn("autobatch", ab_batches)),
        "torch padded": (S, lambda: torch_contender(False, S)[:2]),
        "torch padded ": (K, lambda: torch_contender(False, K)[:2]),
        "torch nested (eval)": (S, lambda: (None, torch_contender(True, S)[1])),
        "torch nested (eval) ": (K, lambda: (None, torch_contender(True, K)[1])),
        "floor: products on real tokens": (S, floor_contender),
    }
    wanted = None if args.contenders is None else {w.strip() for w in args.contenders.split(",")} | {"torch padded"}
    contenders = {k: (which, *make()) for k, (which, make) in makers.items()
                  if wanted is None or any(k.strip().startswith(w) for w in wanted)}

    # same weights, same function: the first batch's logits agree
    check = build_model("transformer", V, **cfg)
    check.load_state_dict({k: v.copy() for k, v in weights.items()})
    ids, mask, lz, _ = tbs[S][0]
    with torch.inference_mode():
        lt = TorchModel(False).eval()(ids, mask, lz).numpy()
        ln = TorchModel(True).eval()(ids, mask, lz).numpy()
    ld = check._eval(check.logits_and_labels, check.collate([examples[i] for i in batches[S][0]]))[0].numpy()
    print(f"# first batch's logits: |dynnets - torch padded| {np.abs(ld - lt).max():.2e}, |dynnets - torch "
          f"nested| {np.abs(ld - ln).max():.2e}")

    tok = {k: (ab_tokens if k == "dynnets autobatch" else n_tokens) for k in contenders}
    train_t = interleaved({k: v[1] for k, v in contenders.items() if v[1] is not None}, args.repeats, 1)
    eval_t = interleaved({k: v[2] for k, v in contenders.items()}, args.repeats, 1)
    tr = {k: _rate(tok[k], s) for k, s in train_t.items()}
    ev = {k: _rate(tok[k], s) for k, s in eval_t.items()}
    rows = []
    for k, (which, _, _) in contenders.items():
        t, e = tr.get(k), ev.get(k)
        tp = "torch padded" + ("" if which == S else " ")
        tn = "torch nested (eval)" + ("" if which == S else " ")
        rows.append(["transformer", k.strip(), which, f"{t:,.0f}" if t else "-", f"{e:,.0f}",
                     f"{t / tr[tp]:.2f}x" if t else "-", f"{e / ev[tp]:.2f}x",
                     f"{e / ev[tn]:.2f}x" if tn in ev else "-"])
    return rows


def bench_cnn(args, np, torch, dn, build_model, examples, batches, lengths, n_tokens, V):
    from dynnets.train import TrainConfig, make_optimizer

    Ec, maps, lr = args.cnn_embed, args.cnn_maps, args.lr
    widths = (3, 4, 5)
    cfg = dict(embed_dim=Ec, hidden=maps, dropout=0.0, seed=args.seed)
    ref = build_model("cnn", V, **cfg)
    weights = {k: np.array(v) for k, v in ref.state_dict().items()}
    tcfg = TrainConfig(optimizer="sgd", lr=lr, embedding_lr=lr, weight_decay=0.0)
    ab_batches = batches["shuffled"][:args.autobatch_batches]
    ab_tokens = sum(lengths[i] for b in ab_batches for i in b)
    M = max(widths) - 1
    print(f"# cnn: embedding {Ec}, widths {widths} x {maps} maps")

    def dyn(execution, bl):
        m = build_model("cnn", V, execution=execution, **cfg)
        m.load_state_dict({k: v.copy() for k, v in weights.items()})
        opt = make_optimizer(m, tcfg)
        return _passes(dn, m, opt, [m.collate([examples[i] for i in b]) for b in bl])

    class TorchCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, Ec, sparse=True, padding_idx=None)
            self.convs = torch.nn.ModuleList([torch.nn.Conv1d(Ec, maps, w) for w in widths])
            self.out = torch.nn.Linear(len(widths) * maps, 5)
            sd = {"emb.weight": weights["embedding.weight"]}
            sd.update({k: v for k, v in weights.items() if k.startswith(("convs.", "out."))})
            self.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()})

        def forward(self, x, valid):
            x = self.emb(x).masked_fill(valid[0][:, :, None], 0.0).transpose(1, 2)       # (B, E, T + 2M)
            feats = []
            for c, v in zip(self.convs, valid[1:]):
                h = torch.relu(c(x))[:, :, :v.shape[1]] * v[:, None, :]
                feats.append(h.amax(-1))
            return self.out(torch.cat(feats, 1))

    def torch_batches(bl):
        tb = []
        for b in bl:
            Ls = np.array([lengths[i] for i in b])
            T = int(Ls.max())
            ids = np.zeros((len(b), T + 2 * M), dtype=np.int64)
            pad = np.ones((len(b), T + 2 * M), dtype=bool)
            for r, i in enumerate(b):
                ids[r, M:M + Ls[r]] = examples[i].ids
                pad[r, M:M + Ls[r]] = False
            s = np.arange(T + M)[None]
            valid = [torch.from_numpy(pad)] + [torch.from_numpy(((s >= M - (w - 1)) & (s <= M - 1 + Ls[:, None]))
                                                                .astype(np.float32)) for w in widths]
            tb.append((torch.from_numpy(ids), valid, torch.tensor([examples[i].label for i in b])))
        return tb

    def torch_contender(tb):
        m = TorchCNN()
        opt = torch.optim.SGD(m.parameters(), lr=lr)

        def train():
            m.train()
            for ids, valid, y in tb:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(ids, valid), y).backward()
                opt.step()

        def evaluate():
            m.eval()
            with torch.inference_mode():
                for ids, valid, y in tb:
                    m(ids, valid)
        return train, evaluate, m

    def floor_contender(bl):
        C = sum(widths) * maps
        W = np.ones((Ec, C), dtype=np.float32) * 0.01
        bufs = []
        for b in bl:
            n = sum(lengths[i] for i in b)
            bufs.append((np.ones((n, Ec), dtype=np.float32), np.empty((n, C), dtype=np.float32),
                         np.empty((n, Ec), dtype=np.float32), np.empty((Ec, C), dtype=np.float32)))

        def fwd():
            for x, y, _, _ in bufs:
                np.matmul(x, W, out=y)

        def train():
            for x, y, gx, gw in bufs:
                np.matmul(x, W, out=y)
                np.matmul(y, W.T, out=gx)
                np.matmul(x.T, y, out=gw)
        return train, fwd

    S, K = "shuffled", "bucketed"
    tbs = {k: torch_batches(v) for k, v in batches.items()}
    ts_train, ts_eval, tm = torch_contender(tbs[S])
    tk_train, tk_eval, _ = torch_contender(tbs[K])
    check = build_model("cnn", V, **cfg)
    check.load_state_dict({k: v.copy() for k, v in weights.items()})
    ids, valid, _ = tbs[S][0]
    with torch.inference_mode():
        lt = tm.eval()(ids, valid).numpy()
    ld = check._eval(check.logits_and_labels, check.collate([examples[i] for i in batches[S][0]]))[0].numpy()
    print(f"# cnn first batch's logits: |dynnets - torch| {np.abs(ld - lt).max():.2e}")
    contenders = {"dynnets cnn packed": (S, *dyn("packed", batches[S])),
                  "dynnets cnn padded": (S, *dyn("padded", batches[S])),
                  "dynnets cnn padded ": (K, *dyn("padded", batches[K])),
                  "dynnets cnn autobatch": (S, *dyn("autobatch", ab_batches)),
                  "torch Conv1d padded": (S, ts_train, ts_eval),
                  "torch Conv1d padded ": (K, tk_train, tk_eval),
                  "floor: tap products on real tokens": (S, *floor_contender(batches[S]))}
    tok = {k: (ab_tokens if "autobatch" in k else n_tokens) for k in contenders}
    train_t = interleaved({k: v[1] for k, v in contenders.items()}, args.repeats, 1)
    eval_t = interleaved({k: v[2] for k, v in contenders.items()}, args.repeats, 1)
    tr = {k: _rate(tok[k], s) for k, s in train_t.items()}
    ev = {k: _rate(tok[k], s) for k, s in eval_t.items()}
    rows = []
    for k, (which, _, _) in contenders.items():
        tp = "torch Conv1d padded" + ("" if which == S else " ")
        rows.append(["cnn", k.strip(), which, f"{tr[k]:,.0f}", f"{ev[k]:,.0f}", f"{tr[k] / tr[tp]:.2f}x",
                     f"{ev[k] / ev[tp]:.2f}x", "-"])
    return rows


#: the contenders the plot shows: packed against padded, for both models
_PLOTTED = ("dynnets packed", "dynnets padded-bucketed", "dynnets padded-to-max", "dynnets static graph",
            "torch padded", "dynnets cnn packed", "dynnets cnn padded", "torch Conv1d padded")


def plot_rows(results, padding):
    """``(labels, train tok/s, eval tok/s)`` of the plotted rows of
    ``results`` (the printed table's rows), each label with the fraction of
    the computed tokens that are padding to a common length (``padding``:
    ``shuffled``, ``bucketed`` and ``max`` -> fraction; packed runs pad 0)."""
    labels, train, evals = [], [], []
    for model, name, batches, t, e, *_ in results:
        if name not in _PLOTTED:
            continue
        pad = 0.0 if "packed" in name else padding["max" if name.endswith("to-max") else batches]
        kind = "Transformer" if model == "transformer" else "CNN"
        labels.append(f"{kind}: {name.replace('dynnets cnn ', 'dynnets ')}, {batches} batches, "
                      f"{100 * pad:.0f}% padding")
        train.append(None if t == "-" else float(t.replace(",", "")))
        evals.append(None if e == "-" else float(e.replace(",", "")))
    return labels, train, evals


def write_plot(path, results, padding, n_tokens, batch_size):
    """Write :func:`plot_rows` as a grouped bar chart (train and eval tokens/s)
    to ``path``: an SVG written directly (:func:`dynnets.plots.bars.bars_svg`,
    no plotting library), to a temporary file then renamed over ``path``, so a
    reader never sees half a file."""
    from dynnets.plots.bars import bars_svg
    labels, train, evals = plot_rows(results, padding)
    svg = bars_svg(labels, {"train": train, "eval": evals}, unit="tok/s",
                   title=f"Real tokens per second, packed vs padded ({n_tokens:,} SST tokens, batches of "
                         f"{batch_size}; one thread)")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(svg)
    os.replace(tmp, path)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"# {time.perf_counter() - t0:.0f} s")
