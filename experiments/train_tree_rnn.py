"""Train a Tree-LSTM (or Tree-RNN) on the sample sentences and print the
predicted sentiment at every node of a few sentences, so a reader sees how
negation ("not good") and contrast ("good but boring") are composed.

A thin script over :func:`dynnets.runs.train_tree_rnn`::

    python experiments/train_tree_rnn.py --model treelstm --out results/tree_rnn
    python experiments/train_tree_rnn.py --model treernn "the plot is not clever" "((it (is (very good))) .)"
"""
import argparse
import sys
from pathlib import Path

from _util import report_files, seed_type, setup

setup()

from dynnets.data import TreeParseError  # noqa: E402
from dynnets.models import model_class, model_kinds  # noqa: E402
from dynnets.options import positive_int  # noqa: E402
from dynnets.runs import train_tree_rnn  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(prog="train_tree_rnn.py", description=__doc__.split("\n\n")[0])
    p.add_argument("sentences", nargs="*", metavar="SENTENCE",
                   help="plain sentences or bracketed trees (default: six hand-written test sentences)")
    p.add_argument("--model", choices=model_kinds(tree=True), default="treelstm")
    p.add_argument("--seed", type=seed_type, default=0, help="weights and batch order (default 0)")
    p.add_argument("--out", type=Path, default=Path("results/tree_rnn"), help="output folder")
    p.add_argument("--epochs", type=int, default=10, help="default 10")
    p.add_argument("--hidden", type=int, default=64, help="default 64")
    p.add_argument("--embed-dim", type=int, default=64, help="default 64")
    p.add_argument("--max-sentences", type=positive_int, default=None,
                   help="first N sentences of each split (quick runs)")
    p.add_argument("--binarize", choices=("left", "right"), default=None,
                   help="binarize the sentences' trees (default: a non-binary tree is an error for "
                        + "/".join(k for k in model_kinds(tree=True) if model_class(k).needs_binary) + ")")
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads; 0 leaves the default (default 1)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if a.epochs < 1 or a.hidden < 1 or a.embed_dim < 1 or a.blas_threads < 0:
        p.error("--epochs, --hidden and --embed-dim must be positive, --blas-threads >= 0")
    try:
        res = train_tree_rnn(a.model, seed=a.seed, epochs=a.epochs, embed_dim=a.embed_dim, hidden=a.hidden,
                             sentences=a.sentences or None, max_sentences=a.max_sentences, out=a.out,
                             progress=not a.no_progress, binarize=a.binarize, blas_threads=a.blas_threads)
    except TreeParseError as exc:
        hint = " (pass --binarize left or --binarize right)" if exc.kind == "not_binary" else ""
        print(f"{p.prog}: error: {exc.path}, column {exc.column}: {exc.reason}{hint}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:         # a diverging run, say: one line, as the dynnets command
        print(f"{p.prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    print(res["text"])
    report_files(res["files"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
