"""The ``dynnets`` command (also ``python -m dynnets``).

Subcommands::

    dynnets demo                      train Tree-LSTM, dynamic LSTM, padded static LSTM and a
                                      bag of words on the shipped samples; print a comparison
    dynnets train --model treelstm    train one model (on the samples unless --data DIR)
    dynnets eval --checkpoint PATH    metrics of a checkpoint on a split
    dynnets predict --checkpoint PATH "a sentence"   class probabilities (--nodes: every node)
    dynnets compare                   padded static LSTM vs dynamic LSTM vs Tree-LSTM over seeds
    dynnets serve --checkpoint PATH   a local page to try sentences in, and POST /predict (JSON)
    dynnets sweep [GRID] --models ... models x seeds x settings on Dask (dynnets.sweep)

Bad arguments and missing or unreadable files end the command with one line
on stderr (``dynnets <command>: error: ...``) and exit status 2 (usage) or 1
(everything else); set ``DYNNETS_DEBUG=1`` for the traceback. A closed
output pipe (``dynnets eval ... | head``) ends the command quietly with
status 141 (128 + SIGPIPE), as the shell reports for Unix tools. No numpy
warning reaches the user (:func:`quiet_numpy`): a diverging run ends with the
trainer's one-line error, and a checkpoint with NaN or inf weights is
refused by eval, predict and serve. Every command takes ``--seed``.

Each command runs numpy's BLAS on ``--blas-threads`` threads (default 1)
while it runs (:mod:`dynnets.blas`): the models multiply small matrices, and
on a loaded machine more BLAS threads make every product wait for a busy core.

``dynnets train`` writes a run folder that is always consistent: it trains
into a temporary folder beside ``--out`` and renames it into place once the
run has its checkpoint, config, log and metrics; a failed or interrupted run
leaves ``--out`` as it was. It refuses an ``--out`` that already holds files,
unless ``--overwrite`` is given and the folder holds only a run's files.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np

from . import io as dio
from .options import COMPARE_DESCRIPTION, add_compare_arguments
from .options import add_binarize_option as _binarize_option
from .options import add_common_options as _common
from .options import checkpoint as _checkpoint
from .options import data_dir as _data_dir
from .options import max_len as _max_len
from .options import nonneg_float as _nonneg_float
from .options import nonneg_int as _nonneg_int
from .options import port as _port
from .options import positive_float as _positive_float
from .options import positive_int as _positive_int
from .options import probability as _probability

__all__ = ["main", "build_parser", "quiet_numpy"]

_PROG = "dynnets"


class _Exit(Exception):
    """Ends a command with one line on stderr and an exit status."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (usage is in ``--help``)."""

    def error(self, message):
        raise _Exit(f"{self.prog}: error: {message} (see '{self.prog} --help')", 2)


def _model_kinds(tree=None):
    from .models import model_kinds
    return model_kinds(tree=tree)


def _is_static(kind):
    from .models import model_class
    return bool(getattr(model_class(kind), "is_static", False))


def build_parser():
    """The argument parser of the ``dynnets`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    top = _Parser(prog=_PROG, formatter_class=fmt,
                  description="dynnets: dynamic (define-by-run) and static (define-then-run) neural networks on "
                              "numpy and Numba, for tree and sequence models.",
                  epilog="Run 'dynnets <command> --help' for a command's options. Start with 'dynnets demo'.")
    from . import __version__
    top.add_argument("--version", action="version", version=f"dynnets {__version__}")
    sub = top.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)

    # demo ------------------------------------------------------------------------------
    d = sub.add_parser("demo", formatter_class=fmt, help="train 4 models briefly on the samples and compare them",
                       description="Train a Tree-LSTM, a dynamic (packed) LSTM, a padded static LSTM (unrolled to "
                                   "the 95th percentile of training lengths) and a bag-of-words baseline on the "
                                   "sample treebank shipped in the package (no download), then print a table: "
                                   "test accuracy (root fine-grained and binary), accuracy on the test sentences "
                                   "with a negation or contrast, training speed (sentences/s) and the padded "
                                   "model's wasted timesteps. Seconds with a warm Numba cache, under 30 s the "
                                   "first time (measured on a loaded two-core machine).",
                       epilog="The negation/contrast subset: sentences whose words include not, n't, never, hardly, "
                              "no or but (dynnets.runs.is_compositional). Sentences/s: median over epochs. "
                              "Wasted steps: share of LSTM steps that read padding in a training epoch.")
    _common(d)
    d.add_argument("--epochs", type=_positive_int, default=10, help="epochs per model (default 10)")
    d.add_argument("--hidden", type=_positive_int, default=64, help="hidden state width (default 64)")
    d.add_argument("--embed-dim", type=_positive_int, default=64, help="word vector width (default 64)")
    d.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="also write results.json and results.md into DIR")

    # train -----------------------------------------------------------------------------
    t = sub.add_parser("train", formatter_class=fmt, help="train one model and save its best checkpoint",
                       description="Train a model on an SST-format treebank (train.txt, dev.txt, optional "
                                   "test.txt; the shipped samples when --data is omitted), keep the epoch with the "
                                   "best dev accuracy, and evaluate it on test. Writes DIR/best.npz (the "
                                   "checkpoint), DIR/log.jsonl (one line per epoch), DIR/config.json and "
                                   "DIR/metrics.json. Unset options take the library defaults "
                                   "(dynnets.train.TrainConfig, the model's constructor).",
                       epilog="Model options apply where the model has them: --mode and --classify for tree models "
                              f"({', '.join(_model_kinds(tree=True))}); --max-len for padded-lstm (an integer, or max, "
                              "p95, median of the training lengths); --dropout/--embed-dropout for the eager models "
                              "and padded-lstm (a new mask at every graph run). "
                              "padded-lstm trains with its own graph optimizer built from --optimizer, --lr and "
                              "--weight-decay.")
    t.add_argument("--model", required=True, choices=_model_kinds(), metavar="KIND",
                   help="one of: " + ", ".join(_model_kinds()))
    t.add_argument("--data", type=_data_dir, default=None, metavar="DIR",
                   help="SST-format folder (default: the shipped samples)")
    t.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="run folder (default runs/<model>); must be new or empty unless --overwrite")
    t.add_argument("--overwrite", action="store_true",
                   help="replace a run folder that --out already holds, whole, once the new run has its checkpoint "
                        "(a failed run leaves it as it was)")
    _binarize_option(t)
    _common(t)
    g = t.add_argument_group("training (dynnets.train.TrainConfig)")
    g.add_argument("--epochs", type=_positive_int, help="maximum epochs (default 10)")
    g.add_argument("--batch-size", type=_positive_int, help="sentences per minibatch (default 25)")
    g.add_argument("--optimizer", choices=("adagrad", "adam", "sgd"), help="default adagrad")
    g.add_argument("--lr", type=_positive_float, help="learning rate (default 0.05)")
    g.add_argument("--embedding-lr", type=_positive_float, help="learning rate of the word vectors (default 0.1)")
    g.add_argument("--weight-decay", type=_nonneg_float, help="L2 penalty, embeddings excluded (default 1e-4)")
    g.add_argument("--momentum", type=_nonneg_float, help="SGD momentum (default 0)")
    g.add_argument("--clip-norm", type=_positive_float, help="clip the global gradient norm (default: no clipping)")
    g.add_argument("--patience", type=_nonneg_int,
                   help="stop after this many epochs without dev improvement; 0 never stops early (default 3)")
    g.add_argument("--select", choices=("root_fine", "root_binary", "all_nodes"),
                   help="dev metric that picks the best epoch (default root_fine)")
    g.add_argument("--bucket-batches", type=_nonneg_int,
                   help="batch sentences of similar length, buckets of N batches; 0 shuffles (default 0)")
    g.add_argument("--max-seconds", type=_positive_float, help="stop after the epoch that ends past this budget")
    g = t.add_argument_group("model")
    g.add_argument("--embed-dim", type=_positive_int, help="word vector width (default 300)")
    g.add_argument("--hidden", type=_positive_int, help="hidden state width (default 150)")
    g.add_argument("--dropout", type=_probability, help="dropout before the classifier (default 0)")
    g.add_argument("--embed-dropout", type=_probability, help="dropout on word vectors (default 0)")
    g.add_argument("--mode", choices=("level", "recursive", "autobatch", "packed"),
                   help="tree models: execution (default level; autobatch: the recursive code with its cells "
                        "decorated, under dn.autobatch); sequence models: packed (default) or autobatch")
    g.add_argument("--classify", choices=("all", "root"), help="tree models: nodes in the loss (default all)")
    g.add_argument("--max-len", type=_max_len, help="padded-lstm: unrolled steps (default 50)")
    g.add_argument("--dtype", choices=("float32", "float64"), help="eager models: parameter dtype (default float32)")
    g.add_argument("--phrases", action="store_true", default=None,
                   help="cnn: train on every labelled phrase of the training trees (each subtree with its own label, "
                        "as Kim 2014 and Tai et al. 2015 train on SST); dev and test stay sentences")
    g.add_argument("--max-norm", type=_positive_float, metavar="F",
                   help="cnn: Kim's max-norm, each row of the output layer's weight rescaled to l2 norm <= F after "
                        "every step (Kim 2014 used 3; default none)")
    g = t.add_argument_group("vocabulary")
    g.add_argument("--min-freq", type=_positive_int, default=1, help="keep words seen this often (default 1)")
    g.add_argument("--cased", action="store_true", help="keep case (default: lower-case every word)")

    # eval ------------------------------------------------------------------------------
    e = sub.add_parser("eval", formatter_class=fmt, help="metrics of a checkpoint on a split",
                       description="Evaluate a checkpoint written by 'dynnets train': root fine-grained and binary "
                                   "accuracy, all-node accuracy (tree models), the negation/contrast subset, "
                                   "accuracy by sentence length and the confusion matrix.")
    e.add_argument("--checkpoint", type=_checkpoint, required=True, metavar="PATH", help="a best.npz file")
    e.add_argument("--data", type=_data_dir, default=None, metavar="DIR",
                   help="SST-format folder (default: the shipped samples)")
    e.add_argument("--split", choices=("train", "dev", "test", "all"), default=None,
                   help="split to evaluate (default: test if present, else dev); all: every split found")
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.add_argument("--batch-size", type=_positive_int, default=250, help="sentences per forward (default 250)")
    _binarize_option(e)
    _common(e, trains=False)

    # predict ---------------------------------------------------------------------------
    p = sub.add_parser("predict", formatter_class=fmt, help="classify sentences with a checkpoint",
                       description="Print the predicted class and the class probabilities of each sentence. A "
                                   "sentence may be plain text, an unlabelled bracketed tree "
                                   "'((it (is (not good))) .)' or an SST tree '(1 (2 it) ...)'. Input that opens "
                                   "with '(' and an integer is read as an SST tree (a label 0-4 after every '('), "
                                   "other bracketed input as an unlabelled tree.",
                       epilog="Plain text is tokenized PTB-style (isn't -> is n't) and, for tree models, "
                              "binarised by a fixed rule: split at every 'but' into a left-branching chain of "
                              "clauses (a comma before 'but' stays on the left), each clause right-branching, "
                              "sentence-final punctuation joined at the root "
                              "(dynnets.data.text.sentence_tree).")
    p.add_argument("--checkpoint", type=_checkpoint, required=True, metavar="PATH", help="a best.npz file")
    p.add_argument("sentences", nargs="+", metavar="SENTENCE", help="sentence(s) or bracketed tree(s)")
    p.add_argument("--nodes", action="store_true",
                   help="tree models: the prediction at every node, with its words (output that grows with "
                        "depth x length; without --nodes it is linear in the sentence's length)")
    p.add_argument("--json", action="store_true",
                   help="print JSON, one record per sentence: the root's 'pred', 'pred_name', 'gold' (null for "
                        "unlabelled input) and probabilities 'root'; per-node predictions in 'nodes' with --nodes")
    p.add_argument("--svg", type=Path, default=None, metavar="FILE",
                   help="tree models: draw the tree coloured by each node's prediction (probabilities and gold "
                        "labels on hover) into FILE; with several sentences FILE-1.svg, FILE-2.svg, ...")
    p.add_argument("--png", type=Path, default=None, metavar="FILE",
                   help="the same picture as PNG (needs matplotlib: pip install 'dynnets[plot]')")
    p.add_argument("--picture-text", action="store_true",
                   help="--svg/--png: also write each node's class and probability in its box")
    _binarize_option(p)
    _common(p, trains=False)

    # serve -----------------------------------------------------------------------------
    v = sub.add_parser("serve", formatter_class=fmt, help="a local page to try sentences in (and a JSON endpoint)",
                       description="Serve a page where you type a sentence and see its tree, each node coloured "
                                   "by the checkpoint's prediction, with the root's probabilities; and POST "
                                   "/predict, which answers JSON {\"text\": ...} with what 'dynnets predict "
                                   "--json' prints (see dynnets.serve for the fields). The model is loaded once; "
                                   "Ctrl-C stops the server.",
                       epilog="Bad requests get a status (400, 404, 405, 408, 411, 413, 415) and a one-line reason "
                              "as JSON {\"error\": ...}; the server goes on serving.")
    v.add_argument("--checkpoint", type=_checkpoint, required=True, metavar="PATH", help="a best.npz file")
    v.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    v.add_argument("--port", type=_port, default=8000,
                   help="port (default 8000; 0 picks a free one)")
    v.add_argument("--max-words", type=_positive_int, default=None, metavar="N",
                   help="longest sentence accepted, in words (default 400)")
    v.add_argument("--quiet", action="store_true", help="do not log each request on stderr")
    _common(v, trains=False)

    # compare ---------------------------------------------------------------------------
    c = sub.add_parser("compare", formatter_class=fmt, help="padded static LSTM vs dynamic LSTM vs Tree-LSTM",
                       description=COMPARE_DESCRIPTION)
    add_compare_arguments(c)

    # sweep -----------------------------------------------------------------------------
    from .sweep import add_arguments as add_sweep_arguments
    w = sub.add_parser("sweep", formatter_class=fmt, help="a grid of models x seeds x settings, on Dask",
                       description=SWEEP_DESCRIPTION,
                       epilog="Example: dynnets sweep --models treelstm lstm padded-lstm --seeds 0-4 "
                              "--set max_len=12,35,52 --set hidden=150 --data ../shared/data/sst --out sweeps/a")
    add_sweep_arguments(w)
    _common(w, trains=False, seed=False)      # its --seed/--seeds are the grid's
    return top


SWEEP_DESCRIPTION = ("Train every point of a grid (models x seeds x settings; a TOML or JSON file and/or flags), on "
                     "a local Dask cluster (one worker process per core) or an existing one (--scheduler), or in "
                     "this process (--workers 0). Each finished run is written to OUT/runs/<key>.json at once; "
                     "running the same sweep again skips finished runs. Writes OUT/results.json (every run; mean "
                     "and sample std over seeds per setting) and OUT/results.md. Errors in the grid stop it before "
                     "any run starts. 'dynnets sweep' and experiments/sweep.py run the same code.")


# --------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------


def _cmd_demo(a):
    from .runs import demo, demo_table
    t0 = time.perf_counter()
    res = demo(seed=a.seed, epochs=a.epochs, out=a.out, progress=not a.no_progress, embed_dim=a.embed_dim,
               hidden=a.hidden, blas_threads=a.blas_threads)
    n = res["sizes"]
    print(f"dynnets demo: {len(res['runs'])} models trained on {res['data']}: {n['train']} train / {n['dev']} dev / "
          f"{n.get('test', 0)} test sentences; seed {a.seed}, {a.epochs} epochs each, embed {a.embed_dim}, "
          f"hidden {a.hidden}, Adam lr 0.01, batch 25.")
    print()
    print(demo_table(res))
    print()
    runs = {r["kind"]: r for r in res["runs"]}
    split = "test" if "test" in res["runs"][0] else "dev"
    tl, bow = runs.get("treelstm"), runs.get("bow")
    C = len(res["runs"][0][split]["confusion"])
    print(f"Chance is {100 / C:.0f}% fine-grained ({C} classes), 50% binary. The negation/contrast subset holds the "
          f"{split} sentences with not, n't, never, hardly, no or but.")
    if tl and bow:
        a_t, a_b = tl[split]["compositional"]["root_fine"], bow[split]["compositional"]["root_fine"]
        if a_t is not None and a_b is not None:
            print(f"On it the Tree-LSTM scores {100 * a_t:.1f}% against {100 * a_b:.1f}% for the bag of words: "
                  f"word counts cannot tell 'good but boring' from 'boring but good', the tree can.")
    print("Sentences/s: median over training epochs (this machine, now); wasted steps: LSTM steps spent on padding "
          "by the padded static graph.")
    print(f"Total {time.perf_counter() - t0:.0f} s.")
    if res["files"]:
        print(f"Results written to {', '.join(res['files'])}")
    return 0


_EAGER_ONLY = {"embedding_lr": "--embedding-lr", "momentum": "--momentum", "clip_norm": "--clip-norm"}


def _train_config(a, out):
    from .train import TrainConfig
    if _is_static(a.model):
        for key, flag in _EAGER_ONLY.items():
            if getattr(a, key) is not None:
                raise _Exit(f"dynnets train: error: {flag} does not apply to --model {a.model} (its optimizer is a "
                            f"train op in its graph, built from --optimizer, --lr and --weight-decay)", 2)
    keys = ("epochs", "batch_size", "optimizer", "lr", "embedding_lr", "weight_decay", "momentum", "clip_norm",
            "select", "bucket_batches", "max_seconds")
    kw = {k: getattr(a, k) for k in keys if getattr(a, k) is not None}
    if a.patience is not None:
        kw["patience"] = a.patience or None
    return TrainConfig(seed=a.seed, progress=not a.no_progress, out_dir=str(out), blas_threads=a.blas_threads, **kw)


_MODEL_FLAGS = {"embed_dim": "--embed-dim", "hidden": "--hidden", "dropout": "--dropout",
                "embed_dropout": "--embed-dropout", "mode": "--mode", "classify": "--classify",
                "max_len": "--max-len", "dtype": "--dtype", "phrases": "--phrases", "max_norm": "--max-norm"}


def _model_options(a, kind, train_trees):
    from .models import model_parameters
    from .runs import length_percentile
    accepted = model_parameters(kind)
    cfg = {}
    for key, flag in _MODEL_FLAGS.items():
        v = getattr(a, key)
        if v is None:
            continue
        if key not in accepted:
            takers = [k for k in _model_kinds() if key in model_parameters(k)]
            raise _Exit(f"dynnets train: error: {flag} does not apply to --model {kind}"
                        + (f" (it applies to --model {', '.join(takers)})" if takers else ""), 2)
        if key == "mode":
            from .models import model_class
            modes = getattr(model_class(kind), "modes", (v,))
            if v not in modes:
                raise _Exit(f"dynnets train: error: --mode {v} does not apply to --model {kind} (its modes: "
                            f"{', '.join(modes)})", 2)
        cfg[key] = v
    ml = cfg.get("max_len")
    if isinstance(ml, str):
        lengths = [len(t.leaves()) for t in train_trees]
        cfg["max_len"] = max(lengths) if ml == "max" else length_percentile(train_trees, 95 if ml == "p95" else 50)
    return cfg


#: the files of a run folder (``dynnets train``); --overwrite replaces only folders holding nothing else
_RUN_FILES = frozenset({"best.npz", "log.jsonl", "config.json", "metrics.json"})


def _check_out(out, overwrite):
    """Refuse an ``--out`` that holds files, unless ``--overwrite`` and they are a run's."""
    if out.exists() and not out.is_dir():
        raise _Exit(f"--out '{out}' is a file, not a folder", 2)
    if not out.exists():
        return
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    if not overwrite:
        raise _Exit(f"--out '{out}' already holds a run or other files ({shown}); pass --overwrite to replace it "
                    f"once the new run has its checkpoint, or choose another --out", 2)
    others = [n for n in names if n not in _RUN_FILES and not (n.startswith(".") and n.endswith(".tmp"))]
    if others:
        raise _Exit(f"--out '{out}' holds files that are not a dynnets run ({', '.join(others[:6])}); "
                    f"--overwrite replaces run folders only: choose another --out", 2)


def _binary_trees(splits, binarize, needs_binary, where, command, kind):
    """``splits`` binarized, or checked to be binary for a binary model (the
    first offending node named by file, line and column)."""
    from .data.trees import first_nonbinary, node_position, tree_line
    from .data.trees import binary_tree
    if binarize is not None:
        return {k: [binary_tree(t, binarize) for t in v] for k, v in splits.items()}
    if not needs_binary:
        return splits
    for split, trees in splits.items():
        for k, t in enumerate(trees):
            bad = first_nonbinary(t)
            if bad is None:
                continue
            idx, n = bad
            path = where / f"{split}.txt"
            line, text = tree_line(path, k)
            col = node_position(text, idx)[1]
            raise _Exit(f"{path}:{line}:{col}: this node has {n} child{'ren' if n != 1 else ''}; {kind} needs binary "
                        f"trees (two children at every node): pass --binarize left or --binarize right"
                        + (f" (or use --model {' or '.join(_any_tree_kinds())})" if command == "train" else ""), 1)
    return splits


def _any_tree_kinds():
    """The tree models that take trees of any shape."""
    from .models import model_class
    return [k for k in _model_kinds(tree=True) if not model_class(k).needs_binary]


def _data_folder(data):
    from .data import samples_dir
    return samples_dir() if data is None else Path(data)


def _cmd_train(a):
    from .data.vocab import Vocabulary
    from .runs import load_data, model_config, split_report
    from .models import build_model
    from .train import train
    out = a.out if a.out is not None else Path("runs") / a.model
    _check_out(out, a.overwrite)
    splits, name = load_data(a.data)
    tc = _train_config(a, out)
    cfg = model_config(a.model, tc, **_model_options(a, a.model, splits["train"]))
    vocab = Vocabulary.from_trees(splits["train"], lowercase=not a.cased, min_freq=a.min_freq)
    model = build_model(a.model, len(vocab), **cfg)
    splits = _binary_trees(splits, a.binarize, getattr(model, "needs_binary", False), _data_folder(a.data), "train",
                           f"--model {a.model}")
    print(f"dynnets train: {a.model} on {name}: {len(splits['train'])} train / {len(splits['dev'])} dev sentences, "
          f"vocabulary {len(vocab)}, seed {a.seed}", flush=True)
    work = dio.temp_dir_beside(out)
    try:
        res = train(model, splits["train"], splits["dev"], vocab, _train_config(a, work))
        if res.checkpoint is None or not Path(res.checkpoint).exists():
            raise _Exit("no checkpoint was written (no epoch finished)", 1)
        metrics = {"model": a.model, "config": dict(model.config), "data": name, "binarize": a.binarize,
                   "best_epoch": res.best_epoch, "epochs": len(res.history), "stopped": res.stopped,
                   "seconds": round(res.seconds, 3), "dev_at_selection": res.best}
        metrics["dev"] = split_report(model, splits["dev"], vocab, blas_threads=a.blas_threads)
        reports = [("dev", metrics["dev"])]
        if "test" in splits:
            metrics["test"] = split_report(model, splits["test"], vocab, blas_threads=a.blas_threads)
            reports.append(("test", metrics["test"]))
        dio.write_json(work / "metrics.json", metrics)
        dio.replace_dir(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    print(f"best epoch {res.best_epoch} of {len(res.history)}" + (f" ({res.stopped})" if res.stopped else "")
          + f", {res.seconds:.1f} s")
    print(_metrics_table(reports))
    print(f"checkpoint: {out / 'best.npz'}")
    print(f"log: {out / 'log.jsonl'}; metrics: {out / 'metrics.json'}")
    return 0


def _load(path):
    from .train import load_checkpoint
    try:
        model = load_checkpoint(path)
    except dio.NotACheckpointError as exc:
        msg = " ".join(str(exc).split())
        raise _Exit(msg.split(": ", 1)[1] if msg.startswith(("load: ", "load_checkpoint: ")) else msg, 1) from None
    except (zipfile.BadZipFile, EOFError, ValueError, OSError) as exc:
        msg = " ".join(str(exc).split())
        if str(path) in msg:
            raise _Exit(msg, 1) from None
        raise _Exit(f"cannot read checkpoint '{path}' (is it a best.npz written by dynnets train?): {msg}", 1) \
            from None
    except (KeyError, TypeError) as exc:
        raise _Exit(f"checkpoint '{path}' is incomplete or from another version: {exc}", 1) from None
    if model.vocab is None:
        raise _Exit(f"checkpoint '{path}' has no vocabulary; it cannot read sentences", 1)
    bad = [name for name, w in model.state_dict().items()
           if getattr(w, "dtype", None) is not None and w.dtype.kind in "fc" and not np.isfinite(w).all()]
    if bad:
        # every prediction of such a model is NaN, and argmax of NaN is class 0: scores that look real
        shown = ", ".join(repr(n) for n in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise _Exit(f"checkpoint '{path}' has NaN or inf in its weights ({shown}): the run that wrote it diverged; "
                    f"train again with a lower learning rate or with --clip-norm", 1)
    return model


def _fmt_pct(x):
    return "-" if x is None else f"{100 * x:.1f}"


def _metrics_table(reports):
    lines = ["| split | sentences | root fine % | root binary % | all nodes % | negation/contrast fine % (n) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in reports:
        c = r.get("compositional")
        comp = "-" if c is None else f"{_fmt_pct(c['root_fine'])} ({c['n']})"
        lines.append(f"| {name} | {r['n']} | {_fmt_pct(r['root_fine'])} | {_fmt_pct(r['root_binary'])} | "
                     f"{_fmt_pct(r.get('all_nodes'))} | {comp} |")
    return "\n".join(lines)


def _cmd_eval(a):
    from .data import load_samples, load_sst
    from .runs import split_report
    from .data.sst import SPLITS
    model = _load(a.checkpoint)
    folder = _data_folder(a.data)
    where = "the samples" if a.data is None else f"'{a.data}'"
    present = [s for s in SPLITS if (folder / f"{s}.txt").is_file()]
    if a.split == "all":
        names = present
    elif a.split is not None:
        if a.split not in present:
            raise _Exit(f"dynnets eval: error: {where} has no {a.split}.txt (found: {', '.join(present) or 'none'})",
                        1)
        names = [a.split]
    elif "test" in present or "dev" in present:
        names = ["test" if "test" in present else "dev"]
    elif present:
        # evaluating on the training split by default would look like a held-out score
        raise _Exit(f"dynnets eval: error: {where} has neither test.txt nor dev.txt (found: "
                    f"{', '.join(s + '.txt' for s in present)}); pass --split {present[0]} to evaluate that split", 1)
    else:
        names = []
    # only the splits evaluated are read: an empty or broken file beside them does not matter here
    splits = load_samples(splits=names or None) if a.data is None else load_sst(a.data, splits=names or None)
    chosen = _binary_trees({n: splits[n] for n in names}, a.binarize, getattr(model, "needs_binary", False),
                           _data_folder(a.data), "eval", f"the checkpoint's model ({model.kind})")
    reports = []
    for n in names:
        r = split_report(model, chosen[n], model.vocab, batch_size=a.batch_size, blas_threads=a.blas_threads)
        reports.append((n, r))
    if a.json:
        print(json.dumps({n: r for n, r in reports}, indent=1))
        return 0
    ck = model.checkpoint or {}
    print(f"dynnets eval: {model.kind} from {a.checkpoint}" + (f" (epoch {ck['epoch']})" if "epoch" in ck else "")
          + f" on {'the samples' if a.data is None else a.data}")
    print(_metrics_table(reports))
    from .data.sst import class_names
    for n, r in reports:
        print(f"\n{n}: accuracy % by sentence length (tokens)")
        print("| " + " | ".join(f"{b['bucket']} (n={b['n']})" for b in r["by_length"]) + " |")
        print("|" + " ---: |" * len(r["by_length"]))
        print("| " + " | ".join(_fmt_pct(b["accuracy"]) for b in r["by_length"]) + " |")
        conf = r["confusion"]
        names = class_names(len(conf))
        print(f"\n{n}: confusion matrix (rows: true class, columns: predicted)")
        print("| true \\ predicted | " + " | ".join(f"{i}" for i in range(len(conf))) + " |")
        print("| --- |" + " ---: |" * len(conf))
        for i, row in enumerate(conf):
            print(f"| {i} {names[i]} | " + " | ".join(str(v) for v in row) + " |")
    return 0


def _cmd_predict(a):
    from .data.sst import class_names
    from .runs import iter_node_lines
    from .predictions import InputError, is_tree_model, json_record, predict_sentence
    model = _load(a.checkpoint)
    tree_model = is_tree_model(model)
    pictures = [(flag, path) for flag, path in (("--svg", a.svg), ("--png", a.png)) if path is not None]
    if pictures and not tree_model:
        raise _Exit(f"{pictures[0][0]} draws a tree model's per-node predictions; the checkpoint's model "
                    f"({model.kind}) predicts the sentence only", 2)
    if a.png is not None:
        from .plots import have_matplotlib
        if not have_matplotlib():
            raise _Exit("--png needs matplotlib: pip install 'dynnets[plot]' (or use --svg, which needs nothing)", 1)
    results = []
    for i, s in enumerate(a.sentences, 1):
        try:
            rec, tree = predict_sentence(model, s, binarize=a.binarize, where=f"sentence {i}",
                                         blas_threads=a.blas_threads)
        except InputError as exc:
            raise _Exit(str(exc), 1) from None
        results.append((rec, tree))
    drawn = _draw_predictions(results, pictures, a.picture_text)
    if a.json:
        print(json.dumps([json_record(rec, a.nodes) for rec, _ in results], indent=1))
        return 0
    for i, (pred, _) in enumerate(results):
        p = pred["root"]
        names = class_names(len(p))
        k = pred["pred"]
        if i:
            print()
        print(f"sentence: {' '.join(pred['words'])}")
        if tree_model:
            print(f"tree ({pred['tree']}): {pred['brackets']}")
        if pred["unknown_words"]:
            print(f"unknown words: {', '.join(pred['unknown_words'])}")
        print(f"predicted: {k} {names[k]}")
        if pred["gold"] is not None:
            print(f"gold: {pred['gold']} {names[pred['gold']] if 0 <= pred['gold'] < len(names) else ''}".rstrip())
        print("probabilities: " + "  ".join(f"{j} {names[j]} {q:.3f}" for j, q in enumerate(p)))
        if a.nodes:
            if pred["nodes"] is None:
                print(f"(--nodes: {model.kind} is not a tree model; it predicts the sentence only)")
            else:
                print("nodes (class, name, probability, words):")
                for line in iter_node_lines(pred):
                    print(line)
        for path in drawn[i]:
            print(f"picture: {path}")
    return 0


def _draw_predictions(results, pictures, text):
    """Write each sentence's tree picture for ``--svg``/``--png``: ``out.svg``
    for one sentence, ``out-1.svg``, ``out-2.svg``, ... for several."""
    from .plots import write_tree_png, write_tree_svg
    drawn = [[] for _ in results]
    for flag, path in pictures:
        write = write_tree_svg if flag == "--svg" else write_tree_png
        for i, (rec, tree) in enumerate(results):
            target = path if len(results) == 1 else path.with_name(f"{path.stem}-{i + 1}{path.suffix}")
            write(target, tree, rec, text=text)
            drawn[i].append(target)
    return drawn


def _cmd_serve(a):
    from .serve import MAX_WORDS, serve
    model = _load(a.checkpoint)
    try:
        return serve(model, host=a.host, port=a.port, max_words=a.max_words or MAX_WORDS, quiet=a.quiet,
                     blas_threads=a.blas_threads)
    except OSError as exc:
        raise _Exit(f"cannot listen on {a.host}:{a.port}: {exc.strerror or exc}", 1) from None


def _cmd_compare(a):
    from .runs import run_compare
    return run_compare(a)


def _cmd_sweep(a):
    from .sweep import run_command
    return run_command(a)


_COMMANDS = {"demo": _cmd_demo, "train": _cmd_train, "eval": _cmd_eval, "predict": _cmd_predict,
             "compare": _cmd_compare, "serve": _cmd_serve, "sweep": _cmd_sweep}


def main(argv=None):
    """Run the ``dynnets`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from .blas import blas_threads
    parser = build_parser()
    command = None
    try:
        a = parser.parse_args(argv)
        command = a.command
        if command is None:
            parser.print_help()
            return 2
        if type(getattr(a, "seed", None)) is int:      # sweep's --seed is a list of the grid's seeds
            from .random import manual_seed
            manual_seed(a.seed)
        with blas_threads(a.blas_threads), quiet_numpy():
            status = _COMMANDS[command](a)
        sys.stdout.flush()
        return status
    except _Exit as exc:
        msg = str(exc)
        if not msg.startswith(_PROG):
            msg = f"{_PROG} {command}: error: {msg}" if command else f"{_PROG}: error: {msg}"
        print(msg, file=sys.stderr)
        return exc.status
    except SystemExit as exc:          # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print(f"{_PROG} {command or ''}: interrupted".replace("  ", " "), file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _broken_pipe()
    except (OSError, ValueError, LookupError, zipfile.BadZipFile, FloatingPointError) as exc:
        if os.environ.get("DYNNETS_DEBUG"):
            raise
        where = f"{_PROG} {command}" if command else _PROG
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{where}: error: {text}", file=sys.stderr)
        return 1


@contextlib.contextmanager
def quiet_numpy():
    """Keep numpy's floating-point and empty-input warnings from a command's user.

    They name a numpy source line, not what went wrong: training checks the
    loss and the gradients itself and stops with one line that says where
    it diverged (``dynnets.train``), eval and predict refuse a checkpoint
    with NaN or inf weights, and sweep runs record warnings in their run
    files. ``np.errstate`` silences them at the source in this thread; the
    warnings filter covers threads the command starts (``dynnets serve``
    answers each request in its own), as numpy's error state is per thread.
    Library calls outside a command keep numpy's defaults.
    """
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*encountered in ", category=RuntimeWarning)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"numpy(\.|$)")
        yield


def _broken_pipe():
    """The reader of our output went away (``| head``): stop quietly, as a Unix
    tool killed by SIGPIPE does. Standard output is pointed at /dev/null so
    that the interpreter's flush at exit does not fail again and print."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):     # replaced by an object without a descriptor
        return 141
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
