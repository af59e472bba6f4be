"""Data-layer speed on the real SST training split (8,544 trees).

    python benchmarks/bench_data.py                      # --data ../shared/data/sst
    python benchmarks/bench_data.py --data /work/shared/data/sst --repeats 9 --seed 0

Times, as medians over ``--repeats`` interleaved rounds:

- ``read_trees``: file -> list of Tree, the figure to keep under 0.5 s;
- the same followed by ``gc.collect()`` (the parser defers the cyclic GC's
  work; this row shows what the deferred collection costs when forced);
- parsing in-memory lines with ``parse_tree``, with the fast path's GC pause
  removed, and with the position-tracking reference parser alone (why the
  fast path exists);
- printing every tree (``str``);
- one-off per-tree arrays (``tree_arrays``) and one epoch of level schedules
  (``merge`` of bucketed minibatches of 25), the per-epoch cost a tree model pays.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, interleaved, markdown_table, setup  # noqa: E402


def main(argv=None) -> int:
    setup(__file__)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data" / "sst",
                   help="directory with train.txt (default: ../shared/data/sst from the repository root)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--seed", type=int, default=0, help="seed of the bucketing sampler for the merge timing")
    p.add_argument("--batch-size", type=int, default=25)
    a = p.parse_args(argv)

    from dynnets.data import BucketSampler, Vocabulary, merge, parse_tree, read_trees, tree_arrays
    from dynnets.data.ptb import _Labels, _parse_careful, _parse_fast

    train = a.data / "train.txt"
    if not train.is_file():
        print(f"bench_data: no {train}; pass --data DIR (e.g. --data dynnets/data/samples for the shipped samples)",
              file=sys.stderr)
        return 2
    lines = train.read_text(encoding="utf-8").splitlines()
    labels = _Labels(5, True)

    def read():
        return list(read_trees(train))

    def read_collect():
        out = list(read_trees(train))
        gc.collect()
        return out

    def parse_lines():
        return [parse_tree(line) for line in lines]

    def fast_gc_on():
        return [_parse_fast(line, labels) for line in lines]

    def careful():
        return [_parse_careful(line, labels, "x", 1) for line in lines]

    # Phase 1, parsing: nothing else is alive, so a forced collection costs
    # what the parsed trees cost and not the benchmark's own data.
    parsing = interleaved({
        "read_trees(train.txt)": read,
        "read_trees + gc.collect()": read_collect,
        "parse_tree per line (in memory)": parse_lines,
        "fast path, GC not paused": fast_gc_on,
        "reference parser only": careful,
    }, repeats=a.repeats, number=1, warmup=1)

    # Phase 2, what a model does with the trees.
    trees = read()
    n_trees = len(trees)
    n_nodes = sum(t.size for t in trees)
    vocab = Vocabulary.from_trees(trees)
    arrays = tree_arrays(trees, vocab)
    sampler = BucketSampler([x.n_leaves for x in arrays], a.batch_size, seed=a.seed)
    epoch = [0]

    def merge_epoch():
        epoch[0] += 1
        return [merge([arrays[i] for i in b]) for b in sampler.batches(epoch[0])]

    using = interleaved({
        "str(tree) for every tree": lambda: [str(t) for t in trees],
        "tree_arrays (once per dataset)": lambda: tree_arrays(trees, vocab),
        "merge: one epoch of schedules": merge_epoch,
    }, repeats=a.repeats, number=1, warmup=1)

    print(f"# {train}: {n_trees} trees, {n_nodes} nodes, {sum(len(t.words()) for t in trees)} tokens; "
          f"{len(sampler)} minibatches of {a.batch_size}; {a.repeats} rounds")
    times = {**parsing, **using}
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append([name, f"{med * 1e3:.0f}", f"{min(ts) * 1e3:.0f}", f"{max(ts) * 1e3:.0f}",
                     f"{med / n_trees * 1e6:.1f}", f"{med / n_nodes * 1e9:.0f}"])
    print(markdown_table(["step", "median ms", "min ms", "max ms", "µs / tree", "ns / node"], rows))
    med = statistics.median(times["read_trees(train.txt)"])
    print(f"\nparse all {n_trees} SST training trees: {med:.3f} s median of {a.repeats} "
          f"({'under' if med < 0.5 else 'OVER'} the 0.5 s target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
