"""Check the tree pictures' layout on a whole treebank: no overlapping boxes,
nodes in order, parents centred, in every tree; the widest and deepest pictures.

A thin script over :func:`dynnets.plots.layout_violations` (the test suite
checks the same on generated 60-word trees, as it cannot read the SST copy)::

    python experiments/check_tree_layout.py                 # SST train beside the repository
    python experiments/check_tree_layout.py --data DIR --split dev

Each tree is laid out as :func:`dynnets.plots.tree_svg` lays it out (the
boxes its words need at ``--font-size``, the dots of internal nodes, the
rings), with and without the probabilities written in the boxes; exits with
status 1 if any tree breaks a rule. The probabilities are random (``--seed``),
so the boxes carry every class name and a gold label where it differs, as
real predictions do.
"""
import argparse
import sys
import time
from pathlib import Path

from _util import ROOT, seed_type, setup

setup()

from dynnets.data import read_trees  # noqa: E402
from dynnets.plots import layout_violations, tree_svg  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(prog="check_tree_layout.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "sst",
                   help="SST-format folder (default ../shared/data/sst beside the repository)")
    p.add_argument("--split", default="train", help="file to read: SPLIT.txt (default train)")
    p.add_argument("--font-size", type=float, default=12.0, help="pixels (default 12)")
    p.add_argument("--seed", type=seed_type, default=0,
                   help="the random per-node probabilities written in the boxes (default 0)")
    a = p.parse_args(argv)
    path = a.data / f"{a.split}.txt"
    if not path.is_file():
        p.error(f"no treebank file at '{path}'")
    import numpy as np
    from dynnets.plots import scene
    t0 = time.perf_counter()
    trees = list(read_trees(path))
    rng = np.random.default_rng(a.seed)
    bad, widths, rows = 0, [], []
    for k, t in enumerate(trees):
        proba = rng.dirichlet(np.ones(5), size=t.size)
        for text in (False, True):
            s = scene(t, proba, gold=True, text=text, font_size=a.font_size)
            v = layout_violations(t, s.layout)
            if v:
                bad += 1
                print(f"{path}:{k + 1}: {v[0]}", file=sys.stderr)
            if not text:
                widths.append(s.width)
                rows.append((s.width, s.height, len(t.leaves()), t.height, k + 1))
        if k == 0:
            tree_svg(t)                     # the writer itself runs too
    secs = time.perf_counter() - t0
    w = np.array(widths)
    print(f"{len(trees)} trees of {path}, each laid out with and without text in the boxes: {bad} layouts "
          f"break a rule ({secs:.1f} s)")
    print(f"picture width (px, at {a.font_size:g} px text): median {np.median(w):.0f}, 99th percentile "
          f"{np.percentile(w, 99):.0f}, max {w.max():.0f}; wider than 1000 px: {(w > 1000).sum()}")
    for label, key in (("widest", 0), ("longest sentence", 2), ("deepest", 3)):
        r = max(rows, key=lambda r: r[key])
        print(f"{label}: line {r[4]}, {r[2]} words, height {r[3]}: {r[0]:.0f} x {r[1]:.0f} px")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
