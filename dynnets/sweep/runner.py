"""One run of a sweep, on a worker or in this process (:func:`execute`,
:func:`train_run`), and its JSON record."""
from __future__ import annotations

import math
import os
import platform
import socket
import statistics
import sys
import time
import traceback
import warnings
from datetime import datetime, timezone
from pathlib import Path

from .grid import SWEEP_FORMAT


# --------------------------------------------------------------------------
# one run (on a worker or in this process)
# --------------------------------------------------------------------------


def train_run(kind, splits, vocab, train_config, label=None, **config):
    """The default runner: train ``kind`` (constructor arguments ``config``)
    with :func:`dynnets.train.train`, then :func:`~dynnets.train.evaluate` the
    selected weights on dev and, when ``splits`` has one, test.

    Returns a JSON-ready dict: ``dev``, ``test`` (reports), ``best_epoch``,
    ``epochs`` (run), ``stopped``, ``train_seconds``, ``sent_per_s`` (median
    over evaluations), ``history`` (per evaluation: epoch, train loss, dev
    fine and binary accuracy, seconds), ``config`` (the model's).
    """
    from ..models import build_model
    from ..train import evaluate, train
    model = build_model(kind, len(vocab), **config)
    res = train(model, splits["train"], splits["dev"], vocab, train_config)
    rates = [h["train_sent_per_s"] for h in res.history if h["train_sent_per_s"]]
    out = {"label": label or kind, "kind": kind, "config": dict(model.config), "best_epoch": res.best_epoch,
           "epochs": math.ceil(res.history[-1]["epoch"]) if res.history else 0, "stopped": res.stopped,
           "train_seconds": round(sum(h["train_seconds"] for h in res.history), 3),
           "sent_per_s": round(statistics.median(rates), 1) if rates else None,
           "history": [{"epoch": h["epoch"], "train_loss": h["train_loss"], "dev_fine": h["dev"]["root_fine"],
                        "dev_binary": h["dev"]["root_binary"], "train_seconds": h["train_seconds"]}
                       for h in res.history]}
    for split in ("dev", "test"):
        if split in splits:
            out[split] = evaluate(model, splits[split], vocab, blas_threads=train_config.blas_threads)
    return out


def _numba_counts():
    """(kernels compiled, kernels loaded from Numba's cache) by dynnets in this process so far."""
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:
        return 0, 0
    compiled = loaded = 0
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "dynnets" or name.startswith("dynnets.")):
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, Dispatcher):
                compiled += sum(obj.stats.cache_misses.values())
                loaded += sum(obj.stats.cache_hits.values())
    return compiled, loaded


def plain_json(o):
    """JSON-ready copy (numpy scalars and arrays to Python; private keys dropped)."""
    if isinstance(o, dict):
        return {str(k): plain_json(v) for k, v in o.items() if not str(k).startswith("_")}
    if isinstance(o, (list, tuple)):
        return [plain_json(v) for v in o]
    if hasattr(o, "tolist") and type(o).__module__ == "numpy":
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def execute(run, data, runner=None):
    """Run one grid point (a :meth:`Run.to_dict`) on ``data`` (a :class:`SweepData`).

    Never raises for a failing run: an exception becomes a record with
    ``status: "failed"``, its ``error`` and ``traceback``. Warnings the run
    raises (numpy's overflow warnings of a diverging run, say) go into the
    record's ``warnings`` (each distinct one once, with its count and
    source line) instead of a worker's standard error, where they would
    reach the driver's terminal detached from their run.
    """
    from ..data.vocab import Vocabulary
    from ..train import TrainConfig
    runner = runner or train_run
    t0 = time.perf_counter()
    c0, l0 = _numba_counts()
    rec = {"format": SWEEP_FORMAT, **{k: run[k] for k in ("key", "name", "kind", "label", "seed", "axes")}}
    caught = _Warnings()
    with warnings.catch_warnings():
        warnings.showwarning = caught.show      # the filters (once per source line by default) still apply
        try:
            splits = data.splits()
            vocab = Vocabulary.from_trees(splits["train"], lowercase=run["vocab"]["lowercase"],
                                          min_freq=run["vocab"]["min_freq"])
            tc = TrainConfig(seed=run["seed"], progress=False, **run["train"])
            result = runner(run["kind"], splits, vocab, tc, label=run["label"], **run["model"])
            rec.update(status="ok", result=plain_json(result))
        except Exception as exc:
            rec.update(status="failed", error=f"{type(exc).__name__}: {' '.join(str(exc).split())}",
                       traceback=traceback.format_exc(limit=-8))
    if caught.lines:
        rec["warnings"] = caught.lines
    c1, l1 = _numba_counts()
    from ..blas import blas_thread_counts
    try:
        import numba
        numba_threads = int(numba.config.NUMBA_NUM_THREADS)
    except ImportError:
        numba_threads = None
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    rec["worker"] = {"host": socket.gethostname(), "pid": os.getpid(), "numba": {"compiled": c1 - c0,
                                                                                "loaded": l1 - l0},
                     "numba_threads": numba_threads, "blas_threads": blas_thread_counts(),
                     "python": platform.python_version()}
    rec["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return rec


class _Warnings:
    """Collects the distinct warnings shown during a run as lines:
    ``"RuntimeWarning: overflow encountered in multiply (dynnets/nn/optim.py:341)"``;
    the first ``most`` of them, then a count (a record stays small)."""

    def __init__(self, most=20):
        self.most = most
        self.seen = set()
        self.shown = []

    def show(self, message, category, filename, lineno, file=None, line=None):
        parts = Path(filename).parts
        short = "/".join(parts[parts.index("dynnets"):]) if "dynnets" in parts else Path(filename).name
        text = f"{category.__name__}: {' '.join(str(message).split())} ({short}:{lineno})"
        if text not in self.seen:
            self.seen.add(text)
            if len(self.shown) < self.most:
                self.shown.append(text)

    @property
    def lines(self):
        more = len(self.seen) - len(self.shown)
        return self.shown + ([f"and {more} other warnings"] if more else [])
