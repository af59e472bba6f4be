"""Runs of models: what ``dynnets demo``, ``dynnets compare``, ``dynnets
train``/``eval``/``predict`` and the scripts in ``experiments/`` train and
measure::

    run_model(kind, splits, vocab, train_config)   one training run with speed,
                                                    padding and accuracy figures
    split_report(model, trees, vocab)               dynnets.train.evaluate's report +
                                                    the negation/contrast subset
    demo(...), demo_table(res)                      the four-model demo
    compare_padded_vs_dynamic(...), compare_markdown(res)
                                                    padded static LSTM vs dynamic models
    node_predictions(model, tree, vocab)            every node's prediction of a tree model
    train_tree_rnn(...)                             train a tree model, then list node predictions

One module rather than a package of runs: they share run_model, load_data,
split_report and the result files, and each is a screenful. The command line
(:mod:`dynnets.cli`) and the scripts are thin wrappers.
Results are plain JSON-ready dicts, written atomically
(:func:`dynnets.io.write_json`); their figures are drawn by
:mod:`dynnets.plots.figures` (the optional ``plot`` extra, matplotlib; skipped
with a note without it). Sentences given as text are read by
:func:`dynnets.data.text.read_tree`.

The compositional subset
------------------------
A sentence is *compositional* when its words include a negator
(:data:`NEGATION_WORDS`: ``not``, ``n't``, ``never``, ``hardly``, ``no``) or
the contrast word ``but`` (:data:`CONTRAST_WORDS`), compared in lower case.
On the shipped sample treebank these are exactly the words whose rules make
a bag of words fail (:mod:`dynnets.data.synthetic`), so accuracy on this
subset separates models that read structure from those that count words.
The rule looks only at words, so it applies unchanged to SST.
"""
from __future__ import annotations

import math
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from . import io as dio
from .data.sst import class_names
from .data.text import read_tree
from .options import COMPARE_EXTRA, COMPARE_TRANSFORMER_LR, COMPARE_VARIANTS
from .metrics import classification_report, root_binary_accuracy, root_fine_accuracy
from .plots.figures import compare_figures
# the one data loader, shared with sweeps (unpacks as (splits, name))
from .sweep.dataset import load_data

__all__ = ["NEGATION_WORDS", "CONTRAST_WORDS", "is_compositional", "compositional_mask",
           "load_data", "length_percentile", "padding_waste", "batch_padding_waste", "model_config", "run_model",
           "DEMO_MODELS",
           "demo", "demo_table", "compare_padded_vs_dynamic", "compare_markdown", "run_compare",
           "node_predictions", "node_text", "iter_node_lines", "format_node_predictions",
           "SHOWCASE", "train_tree_rnn",
           "machine_description", "split_report"]

NEGATION_WORDS = frozenset({"not", "n't", "never", "hardly", "no"})
CONTRAST_WORDS = frozenset({"but"})
_COMPOSITIONAL = NEGATION_WORDS | CONTRAST_WORDS


def _log(msg, enabled=True):
    if enabled:
        print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# environment
# --------------------------------------------------------------------------


def machine_description():
    """A short description of this machine and run environment (for result files)."""
    threads = os.environ.get("OPENBLAS_NUM_THREADS")
    return {"python": platform.python_version(), "machine": platform.machine(), "system": platform.system(),
            "cpus": os.cpu_count(), "numpy": np.__version__,
            "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
            "openblas_num_threads_env": threads,
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


def is_compositional(tree):
    """True when the sentence has a negator or "but" (see the module docstring)."""
    return any(w.lower() in _COMPOSITIONAL for w in tree.words())


def compositional_mask(trees):
    """:func:`is_compositional` of each tree, a bool array (n,)."""
    return np.fromiter((is_compositional(t) for t in trees), dtype=bool, count=len(trees))


def length_percentile(trees, q):
    """The ``q``-th percentile of sentence lengths (tokens), rounded up to an int."""
    lengths = np.fromiter((len(t.leaves()) for t in trees), dtype=np.int64, count=len(trees))
    return int(math.ceil(np.percentile(lengths, q)))


def padding_waste(trees, max_len, batch_size):
    """Padding of one epoch of the padded static model over ``trees``.

    Every batch is ``batch_size`` rows of exactly ``max_len`` steps (the
    graph's fixed shape); the last batch is filled with empty rows. So, for
    any batch order, the steps are ``ceil(n / batch_size) * batch_size * max_len``
    of which ``sum(min(len, max_len))`` read a word.

    Returns
    -------
    dict
        ``steps``, ``real_steps``, ``pad_steps``, ``pad_fraction``,
        ``truncated`` (sentences longer than ``max_len``), ``n``.
    """
    lengths = np.fromiter((len(t.leaves()) for t in trees), dtype=np.int64, count=len(trees))
    steps = math.ceil(len(lengths) / batch_size) * batch_size * int(max_len)
    real = int(np.minimum(lengths, max_len).sum())
    return {"steps": steps, "real_steps": real, "pad_steps": steps - real,
            "pad_fraction": (steps - real) / steps if steps else 0.0,
            "truncated": int((lengths > max_len).sum()), "n": int(len(lengths))}


def batch_padding_waste(trees, batches):
    """Padding of an epoch of ``batches`` (lists of indices into ``trees``)
    when each batch is padded to its own longest sentence (a graph of
    unknown dimensions, e.g. ``nn.dynamic_rnn``): no truncation, the same
    keys as :func:`padding_waste` (``max_len`` None)."""
    lengths = np.fromiter((len(t.leaves()) for t in trees), dtype=np.int64, count=len(trees))
    steps = sum(len(b) * int(lengths[b].max()) for b in batches if len(b))
    real = int(lengths.sum())
    return {"steps": steps, "real_steps": real, "pad_steps": steps - real,
            "pad_fraction": (steps - real) / steps if steps else 0.0, "truncated": 0, "n": int(len(lengths)),
            "max_len": None}


# --------------------------------------------------------------------------
# one training run
# --------------------------------------------------------------------------


def model_config(kind, train_config, **config):
    """Model keyword arguments for ``build_model(kind, ...)`` from shared settings.

    The padded static model owns its optimizer (a train op in its graph), so
    its ``optimizer``, ``lr``, ``weight_decay`` and graph ``batch_size`` come
    from ``train_config``; ``seed`` defaults to the training seed.
    """
    from .models import model_class
    cfg = {k: v for k, v in config.items() if v is not None}
    cfg.setdefault("seed", train_config.seed)
    if getattr(model_class(kind), "is_static", False):
        cfg.setdefault("optimizer", train_config.optimizer)
        cfg.setdefault("lr", train_config.lr)
        cfg.setdefault("weight_decay", train_config.weight_decay)
        cfg["batch_size"] = train_config.batch_size
    return cfg


def _subset_metrics(proba, trees, mask):
    labels = np.fromiter((t.label for t in trees), dtype=np.int64, count=len(trees))
    n = int(mask.sum())
    if n == 0:
        return {"n": 0, "root_fine": None, "root_binary": None, "n_binary": 0}
    b, nb = root_binary_accuracy(proba[mask], labels[mask])
    return {"n": n, "root_fine": root_fine_accuracy(proba[mask], labels[mask]), "root_binary": b if nb else None,
            "n_binary": nb}


def split_report(model, trees, vocab, batch_size=250, blas_threads=1):
    """:func:`dynnets.train.evaluate`'s report plus the compositional subset, from one prediction pass."""
    from .train import predict
    root_p, node = predict(model, trees, vocab, batch_size=batch_size, nodes=True, blas_threads=blas_threads)
    labels = np.fromiter((t.label for t in trees), dtype=np.int64, count=len(trees))
    lengths = np.fromiter((len(t.leaves()) for t in trees), dtype=np.int64, count=len(trees))
    if node is None:
        rep = classification_report(root_p, labels, lengths)
    else:
        rep = classification_report(root_p, labels, lengths, node[0], node[1])
    rep["compositional"] = _subset_metrics(root_p, trees, compositional_mask(trees))
    return rep


def run_model(kind, splits, vocab, train_config, label=None, **config):
    """Train one model and measure it.

    Parameters
    ----------
    kind : str
        A :func:`dynnets.models.build_model` kind.
    splits : dict
        ``train``, ``dev`` and optionally ``test`` lists of trees.
    vocab : Vocabulary
    train_config : TrainConfig
    label : str, optional
        Name in tables (default ``kind``).
    **config
        Model keyword arguments (see :func:`model_config`).

    Returns
    -------
    dict
        ``label``, ``kind``, ``config``, ``seed``, ``epochs`` (run),
        ``best_epoch``, ``seconds`` (whole call), ``train_seconds`` (sum over
        epochs), ``epoch_seconds`` (list), ``steady_epoch_seconds`` (mean
        without the first epoch, which includes one-time Numba/plan
        compilation, when there are several), ``sent_per_s`` (median over
        epochs of the training throughput), ``padding`` (:func:`padding_waste`
        on the training split for the padded model, plus ``dev_truncated``
        and ``test_truncated``; zero steps wasted for the others, which never
        pad), ``dev`` and ``test`` (reports of
        :func:`dynnets.train.evaluate` plus ``compositional``), ``history``
        (per epoch: train loss, dev fine and binary accuracy, seconds).
    """
    from .models import build_model
    from .train import batch_order, train
    t0 = time.perf_counter()
    cfg = model_config(kind, train_config, **config)
    model = build_model(kind, len(vocab), **cfg)
    result = train(model, splits["train"], splits["dev"], vocab, train_config)
    hist = result.history
    epoch_s = [h["train_seconds"] for h in hist]
    rates = [h["train_sent_per_s"] for h in hist if h["train_sent_per_s"]]
    # a static graph of fixed shape: padding (the cnn and transformer kinds count their own, per execution)
    padded = getattr(model, "max_len", None) is not None and not hasattr(model, "epoch_padding")
    if hasattr(model, "epoch_padding"):
        waste = model.epoch_padding(splits["train"], batch_order(len(splits["train"]), [
            len(t.leaves()) for t in splits["train"]], train_config, 1))
    elif padded:
        waste = padding_waste(splits["train"], model.max_len, model.batch_size)
        waste["max_len"] = model.max_len
    elif hasattr(model, "padding_stats"):                       # padded to each batch's own maximum
        waste = batch_padding_waste(splits["train"], batch_order(len(splits["train"]), [
            len(t.leaves()) for t in splits["train"]], train_config, 1))
    else:
        n_tok = sum(len(t.leaves()) for t in splits["train"])
        waste = {"steps": n_tok, "real_steps": n_tok, "pad_steps": 0, "pad_fraction": 0.0, "truncated": 0,
                 "n": len(splits["train"]), "max_len": None}
    out = {"label": label or kind, "kind": kind, "config": dict(model.config), "seed": train_config.seed,
           "lr": train_config.lr, "epochs": len(hist), "best_epoch": result.best_epoch, "stopped": result.stopped,
           "train_seconds": round(sum(epoch_s), 3), "epoch_seconds": epoch_s,
           "steady_epoch_seconds": round(float(np.mean(epoch_s[1:] if len(epoch_s) > 1 else epoch_s)), 4),
           "sent_per_s": round(float(np.median(rates)), 1) if rates else None, "padding": waste,
           "history": [{"epoch": h["epoch"], "train_loss": h["train_loss"], "dev_fine": h["dev"]["root_fine"],
                        "dev_binary": h["dev"]["root_binary"], "train_seconds": h["train_seconds"]}
                       for h in hist]}
    for split in ("dev", "test"):
        if split in splits:
            out[split] = split_report(model, splits[split], vocab, blas_threads=train_config.blas_threads)
            out["padding"][f"{split}_truncated"] = (padding_waste(splits[split], model.max_len, 1)["truncated"]
                                                    if padded else 0)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    out["_model"] = model
    return out


def _public(run):
    return {k: v for k, v in run.items() if not k.startswith("_")}


# --------------------------------------------------------------------------
# the demo
# --------------------------------------------------------------------------

#: (label, kind, extra model config) of the demo, in table order.
DEMO_MODELS = (("Tree-LSTM (dynamic)", "treelstm", {}),
               ("LSTM (dynamic, packed)", "lstm", {}),
               ("LSTM (static, padded to p95)", "padded-lstm", {"max_len": "p95"}),
               ("bag of words", "bow", {}))


def demo(seed=0, epochs=10, out=None, progress=True, embed_dim=64, hidden=64, data=None, max_sentences=None,
         models=DEMO_MODELS, blas_threads=1):
    """Train the demo models briefly on the samples and measure them.

    Every model: embeddings and states of width ``embed_dim``/``hidden``,
    Adam (lr 0.01), batches of 25, ``epochs`` epochs, selection on dev
    fine-grained accuracy. The padded LSTM is unrolled to the 95th percentile
    of training lengths (longer sentences are cut).

    Returns
    -------
    dict
        ``data``, ``seed``, ``epochs``, ``machine``, ``runs`` (one
        :func:`run_model` result per model, without the model object), and
        ``files`` (written into ``out``: ``results.json``, ``results.md``).
    """
    from .data.vocab import Vocabulary
    from .train import TrainConfig
    splits, name = load_data(data, max_sentences)
    vocab = Vocabulary.from_trees(splits["train"], lowercase=True)
    tc = TrainConfig(epochs=epochs, batch_size=25, optimizer="adam", lr=0.01, embedding_lr=0.01, patience=None,
                     seed=seed, progress=progress, blas_threads=blas_threads)
    res = {"data": name, "sizes": {k: len(v) for k, v in splits.items()}, "seed": seed, "epochs": epochs,
           "machine": machine_description(),
           "command": f"dynnets demo --seed {seed} --epochs {epochs}", "runs": [], "files": []}
    for i, (label, kind, extra) in enumerate(models, 1):
        extra = dict(extra)
        if extra.get("max_len") == "p95":
            extra["max_len"] = length_percentile(splits["train"], 95)
        _log(f"[{i}/{len(models)}] {label}: {kind}, embed {embed_dim}, hidden {hidden}, {epochs} epochs"
             + (f", max_len {extra['max_len']}" if "max_len" in extra else ""), progress)
        run = run_model(kind, splits, vocab, tc, label=label, embed_dim=embed_dim, hidden=hidden, **extra)
        res["runs"].append(_public(run))
        if out is not None:
            _write_demo(res, out)
    if out is not None:
        res["files"] = _write_demo(res, out)
    return res


def _write_demo(res, out):
    out = Path(out)
    files = [out / "results.json", out / "results.md"]
    dio.write_json(files[0], res)
    dio.atomic_write_text(files[1], demo_table(res) + "\n")
    return [str(f) for f in files]


def _pct(x, digits=1):
    return "-" if x is None else f"{100 * x:.{digits}f}"


def demo_table(res):
    """The demo's comparison table (markdown)."""
    split = "test" if res["runs"] and "test" in res["runs"][0] else "dev"
    comp_n = res["runs"][0][split]["compositional"]["n"] if res["runs"] else 0
    lines = [f"| model | {split} fine % | {split} binary % | negation/contrast fine % (n={comp_n}) "
             f"| negation/contrast binary % | train sent/s | wasted steps % | truncated | train s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in res["runs"]:
        s = r[split]
        c = s["compositional"]
        pad = r["padding"]
        trunc = "0" if pad["max_len"] is None else f"{pad['truncated']}/{pad['n']}"
        lines.append(f"| {r['label']} | {_pct(s['root_fine'])} | {_pct(s['root_binary'])} | {_pct(c['root_fine'])} "
                     f"| {_pct(c['root_binary'])} | {r['sent_per_s']:.0f} | {_pct(pad['pad_fraction'])} | {trunc} "
                     f"| {r['train_seconds']:.1f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# padded vs dynamic
# --------------------------------------------------------------------------

#: Batches per length bucket of the ``padded-bucketed`` variant (``TrainConfig.bucket_batches``).
BUCKET_BATCHES = 5


def _variant(name, train_trees):
    """(label, kind, extra config) of a comparison variant."""
    lengths = [len(t.leaves()) for t in train_trees]
    if name == "padded-max":
        return f"padded LSTM, max_len={max(lengths)} (max)", "padded-lstm", {"max_len": max(lengths)}
    if name == "padded-p95":
        m = length_percentile(train_trees, 95)
        return f"padded LSTM, max_len={m} (p95)", "padded-lstm", {"max_len": m}
    if name == "padded-median":
        m = length_percentile(train_trees, 50)
        return f"padded LSTM, max_len={m} (median)", "padded-lstm", {"max_len": m}
    if name == "padded-bucketed":
        return (f"padded LSTM, batch max, buckets of {BUCKET_BATCHES} batches (dynamic_rnn)", "padded-bucketed",
                {"bucket_batches": BUCKET_BATCHES})
    if name == "static-treelstm":
        return "Tree-LSTM (static graph, while_loop over levels)", "static-treelstm", {}
    if name == "lstm":
        return "dynamic LSTM (packed)", "lstm", {}
    if name == "treelstm":
        return "Tree-LSTM (level-batched)", "treelstm", {}
    if name == "bow":
        return "bag of words", "bow", {}
    if name == "cnn-padded":
        return "CNN (Kim 2014), padded to the batch max", "cnn", {"execution": "padded"}
    if name == "cnn":
        return "CNN (Kim 2014), packed (no padding)", "cnn", {"execution": "packed"}
    if name == "transformer-padded-max":
        return (f"Transformer, padded to max_len={max(lengths)} (max)", "transformer",
                {"execution": "padded", "max_len": max(lengths)})
    if name == "transformer-bucketed":
        return (f"Transformer, padded to the batch max, buckets of {BUCKET_BATCHES} batches", "transformer",
                {"execution": "padded", "bucket_batches": BUCKET_BATCHES})
    if name == "transformer":
        return "Transformer, packed (ragged attention)", "transformer", {"execution": "packed"}
    raise ValueError(f"compare: unknown model {name!r}; expected some of "
                     f"{', '.join(COMPARE_VARIANTS + ('bow',) + COMPARE_EXTRA)}")


def _mean_std(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(np.mean(xs)), "std": float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0, "n": len(xs)}


def _summarise(runs, eval_split):
    """Mean and standard deviation over seeds of each variant's figures."""
    out = []
    labels = list(dict.fromkeys(r["label"] for r in runs))
    for lab in labels:
        rs = [r for r in runs if r["label"] == lab]
        s = {"label": lab, "kind": rs[0]["kind"], "seeds": [r["seed"] for r in rs],
             "max_len": rs[0]["padding"].get("max_len"),
             "epoch_seconds": _mean_std([r["steady_epoch_seconds"] for r in rs]),
             "sent_per_s": _mean_std([r["sent_per_s"] for r in rs]),
             "pad_fraction": _mean_std([r["padding"]["pad_fraction"] for r in rs]),
             "truncated_train": rs[0]["padding"]["truncated"],
             "truncated_eval": rs[0]["padding"].get(f"{eval_split}_truncated"),
             "n_train": rs[0]["padding"]["n"]}
        for split in ("dev", "test"):
            if split in rs[0]:
                s[split] = {m: _mean_std([r[split][m] for r in rs]) for m in ("root_fine", "root_binary")}
                s[split]["compositional_fine"] = _mean_std([r[split]["compositional"]["root_fine"] for r in rs])
        buckets = rs[0][eval_split]["by_length"]
        s["by_length"] = [{"bucket": b["bucket"], "sentences": b["n"],
                           **_mean_std([r[eval_split]["by_length"][i]["accuracy"] for r in rs])}
                          for i, b in enumerate(buckets)]
        epochs = max(len(r["history"]) for r in rs)
        s["learning_curve"] = [_mean_std([r["history"][e]["dev_fine"] for r in rs if len(r["history"]) > e])
                               for e in range(epochs)]
        out.append(s)
    return out


def _ms(d, scale=100.0, digits=1):
    if d is None or d["mean"] is None:
        return "-"
    if d["n"] < 2:                   # one seed: no spread to report
        return f"{scale * d['mean']:.{digits}f}"
    return f"{scale * d['mean']:.{digits}f} ± {scale * d['std']:.{digits}f}"


def compare_markdown(res):
    """Tables of a :func:`compare_padded_vs_dynamic` result (markdown)."""
    summ = res["summary"]
    ev = res["eval_split"]
    spread = "Mean ± standard deviation over seeds" if len(res["seeds"]) > 1 else "One seed"
    lines = [f"Data: {res['data']}; seeds {res['seeds']}; {res['epochs']} epochs; embed {res['embed_dim']}, "
             f"hidden {res['hidden']}; batch {res['batch_size']}; {res['optimizer']} lr {res['lr']}"
             + (f" (Transformer lr {res['transformer_lr']})" if res.get("transformer_lr") is not None else "")
             + ". "
             f"{spread}. Machine: {res['machine']['cpus']} cpus, "
             f"{res['machine']['date']} (shared machine: timings are noisy).", ""]
    if not res["has_test"]:
        lines += ["This data has no test split: accuracies are on dev only (the dev set also selects the "
                  "best epoch, so they are optimistic).", ""]
    acc_split = "test" if res["has_test"] else "dev"
    lines += [f"| model | epoch s | train sent/s | padding % | truncated train / {ev} | dev fine % | dev binary % | "
              + ("test fine % | test binary % | " if res["has_test"] else "")
              + f"{acc_split} negation/contrast fine % |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | " + ("---: | ---: | " if res["has_test"] else "")
              + "---: |"]
    for s in summ:
        trunc = ("0 / 0" if s["max_len"] is None
                 else f"{s['truncated_train']}/{s['n_train']} / {s['truncated_eval']}")
        row = (f"| {s['label']} | {_ms(s['epoch_seconds'], 1, 2)} | {_ms(s['sent_per_s'], 1, 0)} | "
               f"{_ms(s['pad_fraction'])} | {trunc} | {_ms(s['dev']['root_fine'])} | {_ms(s['dev']['root_binary'])} | ")
        if res["has_test"]:
            row += f"{_ms(s['test']['root_fine'])} | {_ms(s['test']['root_binary'])} | "
        row += f"{_ms(s[acc_split]['compositional_fine'])} |"
        lines.append(row)
    buckets = [b["bucket"] for b in summ[0]["by_length"]] if summ else []
    counts = [b["sentences"] for b in summ[0]["by_length"]] if summ else []
    lines += ["", f"Fine-grained {ev} accuracy % by sentence length (tokens):", "",
              "| model | " + " | ".join(f"{b} (n={n})" for b, n in zip(buckets, counts)) + " |",
              "| --- | " + " | ".join("---:" for _ in buckets) + " |"]
    for s in summ:
        lines.append(f"| {s['label']} | " + " | ".join(_ms(b) for b in s["by_length"]) + " |")
    lines += ["", "Epoch seconds: mean over epochs after the first (the first includes one-time compilation); "
              "sentences/s: median over epochs of training throughput; padding: share of the padded model's "
              "LSTM steps that read a pad in a training epoch (the dynamic models compute no padding)."]
    return "\n".join(lines)


def compare_padded_vs_dynamic(data=None, out="results/compare", seeds=(0, 1, 2), epochs=10, embed_dim=64, hidden=64,
                              batch_size=25, optimizer="adam", lr=0.01, variants=COMPARE_VARIANTS,
                              max_sentences=None, progress=True, plots=True, blas_threads=1, workers=None,
                              scheduler=None, retries=2, skip_failed=False, connect_timeout=10.0,
                              transformer_lr=COMPARE_TRANSFORMER_LR):
    """The padded static LSTM (unrolled to the training maximum, the 95th
    percentile and the median length) against the dynamic LSTM and the
    Tree-LSTM, over several seeds. ``lr`` is every model's learning rate
    (and its word vectors') but the Transformer rows', which train at
    ``transformer_lr`` (see ``dynnets.options.COMPARE_TRANSFORMER_LR``).

    The grid (variants x seeds) runs on the sweep engine
    (:func:`dynnets.sweep.run_all`, each run :func:`run_model`): ``workers``
    processes of a local Dask cluster (None: one per core; 0: in this
    process) or an existing cluster at ``scheduler``. Each finished run is
    written to ``out/runs/<key>.json``; calling again with the same settings
    skips finished runs.

    Writes into ``out``: ``results.json`` (after every finished run, so an
    interrupted run keeps what finished), ``results.md`` (tables), and with
    matplotlib ``accuracy_by_length.png``, ``throughput.png`` and
    ``learning_curves.png``.

    Returns
    -------
    dict
        Settings, ``runs`` (one :func:`run_model` result per variant and
        seed, seed by seed), ``summary`` (mean/std per variant), ``failed``
        (runs that raised: label, seed, error), ``files``.
    """
    from . import sweep as sw
    d = sw.load_data(data, max_sentences)
    splits, name = d.splits(), d.name
    out = Path(out)
    has_test = "test" in splits
    eval_split = "test" if has_test else "dev"
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("compare: expected at least one seed")
    specs = [_variant(v, splits["train"]) for v in variants]
    kinds = {kind for _, kind, _ in specs}
    own_lr = {"lr": [transformer_lr], "embedding_lr": [transformer_lr]}
    grid = sw.Grid(models=[sw.ModelSpec(v, kind, label, {**{k: [x] for k, x in extra.items()},
                                                         **(own_lr if kind == "transformer" else {})})
                           for v, (label, kind, extra) in zip(variants, specs)], seeds=seeds,
                   settings={"embed_dim": [embed_dim], "hidden": [hidden], "epochs": [epochs],
                             "batch_size": [batch_size], "optimizer": [optimizer], "lr": [lr], "embedding_lr": [lr],
                             "patience": [None], "blas_threads": [blas_threads]})
    runs = sw.plan(grid, d, runner=run_model)
    order = {v: i for i, v in enumerate(variants)}
    runs.sort(key=lambda r: (r.seed, order[r.name]))
    res = {"experiment": "compare_padded_vs_dynamic", "data": name, "has_test": has_test, "eval_split": eval_split,
           "seeds": seeds, "epochs": epochs, "embed_dim": embed_dim, "hidden": hidden, "batch_size": batch_size,
           "optimizer": optimizer, "lr": lr, "transformer_lr": transformer_lr if "transformer" in kinds else None,
           "machine": machine_description(), "runs": [], "summary": [],
           "failed": [], "files": []}

    def collect(records):
        res["runs"] = [records[r.key]["result"] for r in runs
                       if r.key in records and records[r.key]["status"] == "ok"]
        res["failed"] = [{"label": r.label, "seed": r.seed, "error": records[r.key]["error"]} for r in runs
                         if r.key in records and records[r.key]["status"] != "ok"]
        res["summary"] = _summarise(res["runs"], eval_split) if res["runs"] else []

    def update(rec, records):
        collect(records)
        dio.write_json(out / "results.json", res)

    log = (lambda s: _log(s)) if progress else (lambda s: None)
    records, _ = sw.run_all(runs, d, out, workers=workers, scheduler=scheduler, progress=progress,
                            skip_failed=skip_failed, retries=retries, connect_timeout=connect_timeout,
                            runner=run_model, on_result=update, log=log)
    collect(records)
    for f in res["failed"]:
        _log(f"compare: {f['label']}, seed {f['seed']} failed: {f['error']}")
    files = [out / "results.json", out / "results.md"]
    dio.atomic_write_text(files[1], compare_markdown(res) + "\n")
    if plots and res["runs"]:
        files += compare_figures(res, out)
    res["files"] = [str(f) for f in files]
    dio.write_json(out / "results.json", res)
    return res


def run_compare(a):
    """``dynnets compare`` and experiments/compare_padded_vs_dynamic.py: the
    comparison for options parsed by ``dynnets.options.add_compare_arguments``;
    prints the tables and where the files went, returns 0."""
    from .sweep import check_engine_arguments
    check_engine_arguments(a)
    res = compare_padded_vs_dynamic(data=a.data, out=a.out, seeds=range(a.seed, a.seed + a.seeds), epochs=a.epochs,
                                    embed_dim=a.embed_dim, hidden=a.hidden, batch_size=a.batch_size,
                                    optimizer=a.optimizer, lr=a.lr, variants=tuple(a.models),
                                    max_sentences=a.max_sentences, progress=not a.no_progress,
                                    plots=not a.no_plots, blas_threads=a.blas_threads, workers=a.workers,
                                    scheduler=a.scheduler, retries=a.retries, skip_failed=a.skip_failed,
                                    connect_timeout=a.connect_timeout, transformer_lr=a.transformer_lr)
    print(compare_markdown(res))
    print(f"\nResults written to {', '.join(res['files'])}")
    return 0


# --------------------------------------------------------------------------
# sentences and per-node predictions
# --------------------------------------------------------------------------


def node_predictions(model, tree, vocab, gold=True, texts=True, blas_threads=1):
    """Predictions of a model for one tree, from one forward pass.

    Parameters
    ----------
    gold : bool
        The tree's labels are gold labels (an SST tree); False gives ``gold``
        None (unlabelled input, whose labels are placeholders).
    texts : bool
        Give every node its words as ``text``. The texts of all nodes add up
        to (depth x words) characters, quadratic in a deep tree's length;
        without them the result is linear in the tree's size, and
        :func:`node_text` gives a node's words from its span when needed.
    blas_threads : int or None
        As in :func:`dynnets.train.predict`.

    Returns
    -------
    dict
        ``words``, ``root`` (class probabilities (C,)), and for tree models
        ``nodes``: one dict per node in preorder with ``depth``, ``start``
        and ``end`` (its words are ``words[start:end]``), ``text`` (with
        ``texts``), ``gold`` (the tree's label or None), ``pred``, ``proba``,
        ``leaf``.
    """
    from .blas import blas_threads as limit
    from .train import predict
    words = tree.words()
    if not getattr(model, "is_tree", False):
        root = predict(model, [tree], vocab, blas_threads=blas_threads)[0]
        return {"words": words, "root": root.tolist(), "nodes": None}
    old = model.mode
    model.mode = "recursive"     # node rows then follow the tree's postorder
    try:
        with limit(blas_threads):
            root_p, node_p, _ = model.predict_all(model.make_batch([tree], vocab))
    finally:
        model.mode = old
    post = tree.postorder()
    row = {id(n): i for i, n in enumerate(post)}
    start = [0] * len(post)
    end = [0] * len(post)
    w = 0
    for i, n in enumerate(post):        # children before parents: spans bottom-up
        if n.word is not None:
            start[i], end[i] = w, w + 1
            w += 1
        else:
            start[i], end[i] = start[row[id(n.children[0])]], end[row[id(n.children[-1])]]
    nodes = []
    stack = [(tree, 0)]
    while stack:
        n, d = stack.pop()
        i = row[id(n)]
        p = node_p[i]
        item = {"depth": d, "start": start[i], "end": end[i]}
        if texts:
            item["text"] = " ".join(words[start[i]:end[i]])
        item.update(gold=n.label if gold else None, pred=int(np.argmax(p)), proba=p.tolist(), leaf=n.is_leaf)
        nodes.append(item)
        stack.extend((c, d + 1) for c in reversed(n.children))
    return {"words": words, "root": root_p[0].tolist(), "nodes": nodes}


def node_text(pred, node):
    """The words under ``node`` (an item of ``pred["nodes"]``), joined by spaces."""
    text = node.get("text")
    return text if text is not None else " ".join(pred["words"][node["start"]:node["end"]])


def iter_node_lines(pred, show_gold=False, leaves=True):
    """The lines of :func:`format_node_predictions`, one at a time (a deep
    tree's listing is quadratic in its length; this keeps memory linear)."""
    if pred["nodes"] is None:
        yield "(per-node predictions need a tree model)"
        return
    names = class_names(len(pred["root"]))
    for n in pred["nodes"]:
        if n["leaf"] and not leaves:
            continue
        show = show_gold and n["gold"] is not None
        g = f"  gold {n['gold']}" if show else ""
        mark = " !" if show and n["gold"] != n["pred"] else ""
        yield (f"{'  ' * n['depth']}{n['pred']} {names[n['pred']]:<13} {max(n['proba']):.2f}{g}{mark}  "
               f"{node_text(pred, n)}")


def format_node_predictions(pred, show_gold=False, leaves=True):
    """An indented listing of per-node predictions (from :func:`node_predictions`)."""
    return "\n".join(iter_node_lines(pred, show_gold, leaves))


#: Hand-written test sentences (dynnets.data.synthetic.HANDWRITTEN) that show negation and contrast.
SHOWCASE = ("((it (is (not good))) .)", "((it (is (not bad))) .)", "(((the film) (is (good (but boring)))) .)",
            "(((the film) (is (boring (but good)))) .)",
            "(((((the acting) (is great)) ,) (but ((the script) (is terrible)))) .)",
            "(((((the sequel) (is (not bad))) ,) (but (it (is (not (very good)))))) .)")


def train_tree_rnn(kind="treelstm", seed=0, epochs=10, embed_dim=64, hidden=64, sentences=None, data=None,
                   max_sentences=None, out=None, progress=True, binarize=None, blas_threads=1):
    """Train a tree model on the samples and predict every node of a few sentences.

    Parameters
    ----------
    kind : str
        A tree model's kind (``dynnets.models.model_kinds(tree=True)``).
    sentences : list of str, optional
        Trees or plain sentences (:func:`read_tree`); default :data:`SHOWCASE`,
        hand-written test sentences labelled by the sample treebank's rules.
    out : path, optional
        Where ``results.json`` and ``nodes.txt`` go.
    binarize : {None, "left", "right"}
        Binarize the sentences' trees (:func:`read_tree`); without it a
        non-binary tree given to a binary model is an error.
    blas_threads : int or None
        As ``TrainConfig.blas_threads``.

    Returns
    -------
    dict
        ``run`` (the :func:`run_model` figures), ``sentences`` (per-node
        predictions with the gold labels of labelled inputs), ``text`` (the
        listing), ``files``.
    """
    from .data.synthetic import label_tree
    from .data.vocab import Vocabulary
    from .train import TrainConfig
    from .models import model_class, model_kinds
    if kind not in model_kinds(tree=True):
        raise ValueError(f"train_tree_rnn: kind must be one of {model_kinds(tree=True)}, got {kind!r}")
    binary = model_class(kind).needs_binary
    inputs = []          # read before training, so that a bad sentence fails at once
    for i, s in enumerate(sentences if sentences is not None else SHOWCASE, 1):
        tree, how = read_tree(s, binarize=binarize, binary=binary, where=f"sentence {i}")
        gold = how == "labelled tree"
        if how == "bracketed tree" and data is None:
            tree, gold = label_tree(tree), True      # labelled by the samples' rules
        inputs.append((s, tree, how, gold))
    splits, name = load_data(data, max_sentences)
    vocab = Vocabulary.from_trees(splits["train"], lowercase=True)
    tc = TrainConfig(epochs=epochs, batch_size=25, optimizer="adam", lr=0.01, embedding_lr=0.01, patience=None,
                     seed=seed, progress=progress, blas_threads=blas_threads)
    run = run_model(kind, splits, vocab, tc, embed_dim=embed_dim, hidden=hidden)
    model = run.pop("_model")
    items, blocks = [], []
    for s, tree, how, gold in inputs:
        pred = node_predictions(model, tree, vocab, gold=gold, blas_threads=blas_threads)
        pred.update(input=s, tree=how, has_gold=gold)
        items.append(pred)
        names = class_names(len(pred["root"]))
        k = int(np.argmax(pred["root"]))
        head = f"{' '.join(pred['words'])}\n  predicted {k} {names[k]}" + (
            f", gold {tree.label}" if gold else "")
        blocks.append(head + "\n" + "\n".join("  " + ln for ln in format_node_predictions(pred, gold).split("\n")))
    split = "test" if "test" in run else "dev"
    text = (f"{kind} on {name}: {epochs} epochs, {split} fine {100 * run[split]['root_fine']:.1f}%, "
            f"binary {100 * run[split]['root_binary']:.1f}%, all nodes {100 * run[split]['all_nodes']:.1f}%\n"
            "Each line: predicted class, name, probability" + (", gold label ('!' when wrong)" if items and any(
                i["has_gold"] for i in items) else "") + ", the words under the node.\n\n" + "\n\n".join(blocks))
    res = {"experiment": "train_tree_rnn", "kind": kind, "data": name, "seed": seed, "epochs": epochs,
           "machine": machine_description(), "run": _public(run), "sentences": items, "text": text, "files": []}
    if out is not None:
        out = Path(out)
        files = [out / "results.json", out / "nodes.txt"]
        dio.atomic_write_text(files[1], text + "\n")
        res["files"] = [str(f) for f in files]
        dio.write_json(files[0], res)
    return res
