"""Execution strategies for one Tree-LSTM on SST: how much of the batched
speed does the natural per-node code keep?

    python experiments/execution_strategies.py --data ../shared/data/sst --out results/execution_strategies

The same binary Tree-LSTM (dynnets' ``TreeLSTM``: embedding 300, hidden 150,
every node classified, Adagrad lr 0.05, minibatches of 25, the first
``--trees`` SST training trees), from the same initial weights, run as

* ``dynnets recursive`` -- the per-node define-by-run code, node by node;
* ``dynnets level`` -- level-batched (one fused call per tree level of a minibatch);
* ``dynnets autobatch agenda`` / ``depth`` -- the per-node code under
  ``dynnets.autobatch(strategy=...)`` (when this checkout has it);
* ``torch recursive`` / ``torch level`` -- PyTorch, the models of
  ``benchmarks/bench_treelstm.py``;
* ``dynet autobatch 1`` / ``0`` -- DyNet 2.2 written per node
  (``benchmarks/dynet_treelstm.py``, a worker process per setting; when
  ``dynet38`` is installed).

For each it reports the first minibatch's loss (the same function, so the
same number up to float32 rounding), training and evaluation sentences/s
(medians over ``--repeats`` interleaved rounds, after one untimed round; the
contenders of ``benchmarks/bench_treelstm.py``, timed the same way), and the
lines of model code each strategy needs (the functions named in the table,
counted without blank lines, comments, docstrings and the tree models'
``if ab is not None:`` tagging blocks; the fused per-node and per-level
primitives they call are library code and not counted).

Writes ``results.json``, ``results.md`` and ``execution_strategies.svg`` (a
bar chart written directly, no plotting library needed) into ``--out``, and,
where ``dynnets.autobatch`` exists, ``autobatch_schedule_agenda.svg`` and
``autobatch_schedule_depth.svg``: the first ``--picture-trees`` trees run as
one minibatch under each scheduler, every node coloured by the batched call
that computed it (:mod:`dynnets.plots.schedule`).
"""
from __future__ import annotations

import argparse
import ast
import gc
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _util import ROOT, report_files, seed_type, setup

setup()
sys.path.insert(0, str(ROOT / "benchmarks"))

ALL = ("dynnets recursive", "dynnets level", "dynnets static", "dynnets autobatch agenda", "dynnets autobatch depth",
       "torch recursive", "torch level", "dynet autobatch 1", "dynet autobatch 0")

# the tree models' one recursive loop and the Tree-LSTM's two cells
_RECURSIVE = [("dynnets/models/tree.py", "TreeModel._recursive"), ("dynnets/models/tree.py", "TreeLSTM._leaf_cell"),
              ("dynnets/models/tree.py", "TreeLSTM._node_cell")]
# (file, function path) of the model code each strategy needs, and lines outside any function
CODE = {
    "dynnets recursive": (_RECURSIVE, 0),
    "dynnets level": ([("dynnets/models/tree.py", "TreeLSTM._level"),
                       ("dynnets/models/tree.py", "TreeModel._leaf_level")], 0),
    "dynnets static": ([("dynnets/models/static_tree.py", "StaticTreeLSTM.forward")], 0),
    "dynnets autobatch agenda": (_RECURSIVE, 1),
    "dynnets autobatch depth": (_RECURSIVE, 1),
    "torch recursive": ([("benchmarks/bench_treelstm.py", "torch_models.TorchTreeLSTM.tree_loss"),
                         ("benchmarks/bench_treelstm.py", "torch_models.TorchTreeLSTM.recursive_loss")], 0),
    "torch level": ([("benchmarks/bench_treelstm.py", "torch_models.TorchTreeLSTM.level_states"),
                     ("benchmarks/bench_treelstm.py", "torch_models.TorchTreeLSTM.level_loss")], 0),
    "dynet autobatch 1": ([("benchmarks/dynet_treelstm.py", "_model_class.DyTreeLSTM.node_states"),
                           ("benchmarks/dynet_treelstm.py", "_model_class.DyTreeLSTM.loss")], 1),
    "dynet autobatch 0": ([("benchmarks/dynet_treelstm.py", "_model_class.DyTreeLSTM.node_states"),
                           ("benchmarks/dynet_treelstm.py", "_model_class.DyTreeLSTM.loss")], 0),
}
NOTES = {
    "dynnets autobatch agenda": "+1: the `with dn.autobatch():` line",
    "dynnets autobatch depth": "+1: the `with dn.autobatch():` line",
    "dynet autobatch 1": "+1: `dynet_config.set(autobatch=1)`",
    "dynnets level": "plus the level schedule (TreeBatch, library) and the fused level primitive",
    "torch level": "plus the level schedule (built from dynnets' TreeBatch here)",
    "dynnets static": "one graph, a while_loop over levels; plus the level schedule fed through placeholders",
}


def code_lines(path, qualname):
    """:func:`count_code_lines` of the function ``qualname`` in the file ``path`` (from the repository root)."""
    return count_code_lines((ROOT / path).read_text(), qualname, path)


def count_code_lines(src, qualname, where="<source>"):
    """Lines of code of the function ``qualname`` (dotted through enclosing
    functions and classes) in the source text ``src``: without blank lines,
    comment lines, docstrings, and the ``if ab is not None:`` blocks with
    which the tree models tag their nodes for the schedule pictures (code a
    user does not need for batching)."""
    tree = ast.parse(src)
    node = tree
    for part in qualname.split("."):
        found = [n for n in ast.iter_child_nodes(node)
                 if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part]
        if not found:
            raise LookupError(f"code_lines: {qualname} not found in {where}")
        node = found[0]
    skip = set()
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skip.update(range(body[0].lineno, body[0].end_lineno + 1))
        if isinstance(n, ast.If) and not n.orelse and isinstance(n.test, ast.Compare) \
                and isinstance(n.test.left, ast.Name) and n.test.left.id == "ab" \
                and isinstance(n.test.ops[0], ast.IsNot):
            skip.update(range(n.lineno, n.end_lineno + 1))
    lines = src.splitlines()
    return sum(1 for i in range(node.lineno, node.end_lineno + 1)
               if i not in skip and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def parse(argv=None):
    p = argparse.ArgumentParser(prog="execution_strategies.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "sst"),
                   help="folder with SST's train.txt (default: ../shared/data/sst beside the repository)")
    p.add_argument("--out", default="results/execution_strategies")
    p.add_argument("--trees", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--eval-batch", type=int, default=25)
    p.add_argument("--embed", type=int, default=300)
    p.add_argument("--hidden", type=int, default=150)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=seed_type, default=0)
    p.add_argument("--blas-threads", type=int, default=1,
                   help="numpy's and DyNet's BLAS threads and PyTorch's threads (default 1)")
    p.add_argument("--strategies", default=",".join(ALL), help=f"comma-separated, from: {', '.join(ALL)}")
    p.add_argument("--picture-trees", type=int, default=6, help="trees in the schedule pictures (0: none)")
    p.add_argument("--no-progress", action="store_true", help="accepted for symmetry; this script prints no bars")
    p.add_argument("--keep-env", action="store_true",
                   help="keep OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE from the environment (by default the script runs "
                        "once more without them, as the benchmarks do, so numpy's BLAS detects the CPU itself)")
    a = p.parse_args(argv)
    a.strategies = [s.strip() for s in a.strategies.split(",") if s.strip()]
    bad = [s for s in a.strategies if s not in ALL]
    if bad:
        p.error(f"argument --strategies: unknown {bad}; choose from {list(ALL)}")
    if min(a.trees, a.batch_size, a.eval_batch, a.embed, a.hidden, a.repeats) < 1 or a.blas_threads < 0 \
            or a.picture_trees < 0:
        p.error("--trees, --batch-size, --eval-batch, --embed, --hidden and --repeats must be positive, "
                "--blas-threads and --picture-trees >= 0")
    if not (Path(a.data) / "train.txt").is_file():
        p.error(f"argument --data: no train.txt in {a.data}")
    return a


def main(argv=None):
    a = parse(argv)
    if a.blas_threads:
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[k] = str(a.blas_threads)
    import numpy as np

    from bench_treelstm import AUTOBATCH_STRATEGIES, DYNET_SETTINGS, autobatch_contenders, dynet_contenders
    from _common import interleaved
    from dynnets.blas import blas_threads
    from dynnets.data.sst import load_sst
    from dynnets.data.vocab import Vocabulary
    from dynnets.io import atomic_write_text, write_json
    from dynnets.models import TreeLSTM
    from dynnets.plots.bars import bars_svg
    from dynnets.runs import machine_description
    from dynnets.train import TrainConfig, make_optimizer

    trees = load_sst(a.data, splits=["train"])["train"][:a.trees]
    vocab = Vocabulary.from_trees(trees)
    V, E, H, C, B = len(vocab), a.embed, a.hidden, 5, a.batch_size
    cfg = TrainConfig(optimizer="adagrad", lr=a.lr, embedding_lr=a.lr, weight_decay=0.0)

    def make_model(mode):
        return TreeLSTM(V, E, H, C, mode=mode, classify="all", seed=a.seed)

    def batches(ex, size):
        return [ex[i:i + size] for i in range(0, len(ex), size)]

    probe = make_model("level")
    ex = probe.prepare(trees, vocab)
    weights = {k: np.asarray(v).copy() for k, v in probe.state_dict().items()}
    train_ex, eval_ex = batches(ex, B), batches(ex, a.eval_batch)
    makers, first, notes, workers = {}, {}, [], []
    with blas_threads(a.blas_threads or None):
        for mode in ("recursive", "level"):
            name = f"dynnets {mode}"
            if name not in a.strategies:
                continue
            m = make_model(mode)
            opt = make_optimizer(m, cfg)
            tb, eb = [m.collate(b) for b in train_ex], [m.collate(b) for b in eval_ex]
            first[name] = m.loss(tb[0]).item()
            m.zero_grad()
            makers[name] = _dynnets_runs(m, opt, tb, eb)
        if "dynnets static" in a.strategies:
            # the Fold-style static graph (benchmarks/bench_treelstm.py's contender), fed the level schedules
            from bench_treelstm import static_treelstm
            lm = make_model("level")
            st_train, st_eval, first["dynnets static"], _ = static_treelstm(
                a, weights, [lm.collate(b).schedule for b in train_ex], [lm.collate(b).schedule for b in eval_ex])
            makers["dynnets static"] = (st_train, st_eval)
        wanted_ab = [s for s in a.strategies if s in AUTOBATCH_STRATEGIES]
        if wanted_ab:
            mk, fl, note = autobatch_contenders(wanted_ab, make_model, lambda m: make_optimizer(m, cfg), train_ex,
                                                eval_ex)
            makers.update(mk)
            first.update(fl)
            if note:
                notes.append(note)
        wanted_torch = [s for s in a.strategies if s.startswith("torch ")]
        if wanted_torch:
            mk, fl = _torch_runs(wanted_torch, probe, weights, train_ex, eval_ex, V, E, H, C, a)
            makers.update(mk)
            first.update(fl)
        wanted_dy = [s for s in a.strategies if s in DYNET_SETTINGS]
        if wanted_dy:
            tmp = tempfile.mkdtemp(prefix="execution_strategies_")
            flat = [e for b in train_ex for e in b]
            mk, fl, workers, note = dynet_contenders(wanted_dy, weights, flat, B, a.eval_batch, a.lr, a.seed,
                                                     a.blas_threads or None, 1024, tmp)
            makers.update(mk)
            first.update(fl)
            if note:
                notes.append(note)
        order = [s for s in a.strategies if s in makers]
        for s in a.strategies:
            if s not in makers:
                notes.append(f"{s}: not run (its library is missing)")
        gc.freeze()
        results = {}
        try:
            for k, phase in enumerate(("train", "eval")):
                times = interleaved({s: makers[s][k] for s in order}, repeats=a.repeats, number=1, warmup=1)
                for s in order:
                    results[(s, phase)] = statistics.median(len(trees) / t for t in times[s])
        finally:
            for w in workers:
                w.close()
    rows = []
    ref = first.get("dynnets level", next(iter(first.values()), None))
    for s in order:
        files, extra = CODE[s]
        lines = sum(code_lines(f, q) for f, q in files) + extra
        rows.append({"strategy": s, "first_loss": first[s],
                     "first_loss_rel_diff": None if ref is None else (first[s] - ref) / ref,
                     "train_sent_per_s": results[(s, "train")], "eval_sent_per_s": results[(s, "eval")],
                     "code_lines": lines, "code": [f"{f}:{q}" for f, q in files], "code_note": NOTES.get(s, "")})
    level = next((r for r in rows if r["strategy"] == "dynnets level"), None)
    md = ["| strategy | first-minibatch loss | train sent/s | eval sent/s | train / level | eval / level | "
          "lines of model code |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        rt = f"{r['train_sent_per_s'] / level['train_sent_per_s']:.2f}" if level else "-"
        re_ = f"{r['eval_sent_per_s'] / level['eval_sent_per_s']:.2f}" if level else "-"
        md.append(f"| {r['strategy']} | {r['first_loss']:.6f} | {r['train_sent_per_s']:.0f} | "
                  f"{r['eval_sent_per_s']:.0f} | {rt} | {re_} | {r['code_lines']} |")
    md.append("")
    md.append("Model code counted: " + "; ".join(
        f"{r['strategy']}: {', '.join(c.split(':')[1] for c in r['code'])}"
        + (f" ({r['code_note']})" if r['code_note'] else "") for r in rows))
    for n in notes:
        md.append(f"\nNote: {n}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    env = machine_description()
    env["blas_threads"] = a.blas_threads
    write_json(out / "results.json", {"config": {k: v for k, v in vars(a).items()}, "machine": env, "rows": rows,
                                      "notes": notes})
    atomic_write_text(out / "results.md", "\n".join(md) + "\n")
    svg = bars_svg([r["strategy"] for r in rows],
                   {"training": [r["train_sent_per_s"] for r in rows],
                    "evaluation": [r["eval_sent_per_s"] for r in rows]},
                   title=f"Tree-LSTM on {len(trees)} SST trees, sentences/s ({a.blas_threads or 'default'} BLAS "
                         f"thread{'s' if a.blas_threads != 1 else ''}; same weights, same first loss)",
                   unit="sent/s")
    atomic_write_text(out / "execution_strategies.svg", svg)
    files = [out / "results.json", out / "results.md", out / "execution_strategies.svg"]
    files += _schedule_pictures(probe, trees[:a.picture_trees], vocab, out) if a.picture_trees else []
    print("\n".join(md))
    report_files(files)
    return 0


def _schedule_pictures(model, trees, vocab, out):
    """The autobatch schedule of ``trees`` as one minibatch, per scheduler."""
    import dynnets as dn
    from dynnets.plots.schedule import tree_node_calls, write_schedule_svg

    if not hasattr(dn, "autobatch"):
        return []
    files = []
    for strategy in ("agenda", "depth"):
        calls, names, ab = tree_node_calls(model, trees, vocab, strategy=strategy)
        st = ab.stats
        used = len({k for c in calls for k in c})
        title = (f"autobatch ({strategy} scheduler): {len(trees)} SST trees, {sum(len(c) for c in calls)} tree "
                 f"nodes in {used} batched calls of the cells ({st['batched_calls']} calls in all, "
                 f"{sum(st['fallbacks'].values())} fallbacks)")
        path = out / f"autobatch_schedule_{strategy}.svg"
        write_schedule_svg(path, trees, calls, call_names=names, title=title)
        files.append(path)
    return files


def _dynnets_runs(m, opt, train_b, eval_b):
    def train():
        m.train()
        for batch in train_b:
            opt.zero_grad()
            m.loss(batch).backward()
            opt.step()

    def evaluate():
        for batch in eval_b:
            m.predict_proba(batch)
    return train, evaluate


def _torch_runs(names, probe, weights, train_ex, eval_ex, V, E, H, C, a):
    import numpy as np
    import torch

    from bench_treelstm import torch_models

    torch.set_num_threads(max(a.blas_threads, 1) if a.blas_threads else torch.get_num_threads())
    torch.manual_seed(a.seed)

    def per_tree(batch):
        return [(torch.from_numpy(e.leaf_ids), e.children, torch.from_numpy(e.arrays.labels)) for e in batch]

    def sched(batch):
        s = probe.collate(batch).schedule
        return {"leaf_ids": torch.from_numpy(s.leaf_word_ids), "offsets": s.level_offsets.tolist(),
                "left": torch.from_numpy(np.ascontiguousarray(s.left)),
                "right": torch.from_numpy(np.ascontiguousarray(s.right)), "n": s.n_nodes,
                "labels": torch.from_numpy(s.labels), "n_trees": s.n_trees, "roots": torch.from_numpy(s.root_index)}

    makers, first = {}, {}
    for name in names:
        m = torch_models(torch, V, E, H, C, weights)
        opt = torch.optim.Adagrad(m.parameters(), lr=a.lr)
        if name == "torch level":
            tr, ev, lossf, rootf = [sched(b) for b in train_ex], [sched(b) for b in eval_ex], m.level_loss, \
                m.level_roots
        else:
            tr, ev, lossf, rootf = [per_tree(b) for b in train_ex], [per_tree(b) for b in eval_ex], \
                m.recursive_loss, m.recursive_roots
        first[name] = lossf(tr[0]).item()
        makers[name] = _torch_pair(torch, m, opt, tr, ev, lossf, rootf)
    return makers, first


def _torch_pair(torch, m, opt, tr, ev, lossf, rootf):
    def train():
        m.train()
        for b in tr:
            opt.zero_grad()
            lossf(b).backward()
            opt.step()

    def evaluate():
        m.eval()
        with torch.no_grad():
            for b in ev:
                rootf(b)
    return train, evaluate


if __name__ == "__main__":
    # the benchmarks' environment: OpenBLAS tuning variables of the shell (e.g. a
    # forced OPENBLAS_CORETYPE) slow small products and would make these figures
    # disagree with bench_treelstm's; argv is parsed first so a bad flag fails here
    _args = parse()
    from _common import setup as _bench_setup
    _bench_setup(__file__, keep_env=_args.keep_env, blas_threads=_args.blas_threads)
    sys.exit(main())
