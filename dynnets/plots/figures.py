"""Matplotlib figures of the runs (:mod:`dynnets.runs`) and the experiments,
drawn with the object-oriented API (no pyplot: no global figure state, no GUI
backend) and written atomically as PNG.

matplotlib is the optional ``plot`` extra: without it every figure function
prints a note on stderr and returns no files. The figures::

    compare_figures(res, out)   accuracy by length, throughput and learning curves
                                of a :func:`dynnets.runs.compare_padded_vs_dynamic` result
    overhead_figure(res, out)   one-time and per-op costs of experiments/graph_overhead.py
    sweep_figure(groups, ...)   dev/test accuracy per group of a sweep (:mod:`dynnets.sweep`)
    save_figure(fig, path)      PNG, atomically
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

from .. import io as dio

__all__ = ["have_matplotlib", "save_figure", "compare_figures", "overhead_figure", "sweep_figure"]


def have_matplotlib():
    """True when the optional ``plot`` extra (matplotlib) is importable."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(w=6.4, h=4.0):
    # the object-oriented API: no pyplot, so no global figure state and no GUI backend
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, path):
    """Render ``fig`` to PNG in memory and write it atomically to ``path``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    dio.atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def _plots_unavailable():
    print("note: matplotlib is not installed (pip install 'dynnets[plot]'); plots skipped", file=sys.stderr,
          flush=True)
    return []


def _style(k):
    # distinct line styles and markers: identical curves (the masked padded LSTM
    # at the training maximum computes what the dynamic LSTM computes) stay visible
    return {"linestyle": ("-", "--", "-.", ":")[k % 4], "marker": "osD^v"[k % 5], "markersize": 4}


def compare_figures(res, out):
    """``accuracy_by_length.png``, ``throughput.png`` and ``learning_curves.png``
    of a :func:`dynnets.runs.compare_padded_vs_dynamic` result, in folder
    ``out``; returns their paths."""
    if not have_matplotlib():
        return _plots_unavailable()
    summ = res["summary"]
    files = []
    fig = _figure()
    ax = fig.add_subplot()
    buckets = [b["bucket"] for b in summ[0]["by_length"]]
    x = np.arange(len(buckets))
    for k, s in enumerate(summ):
        m = [np.nan if b["mean"] is None else 100 * b["mean"] for b in s["by_length"]]
        e = [0 if b["std"] is None else 100 * b["std"] for b in s["by_length"]]
        ax.errorbar(x + 0.04 * (k - len(summ) / 2), m, yerr=e, capsize=3, label=s["label"], **_style(k))
    ax.set_xticks(x, [f"{b}\n(n={n['sentences']})" for b, n in zip(buckets, summ[0]["by_length"])])
    ax.set_xlabel("sentence length (tokens)")
    ax.set_ylabel(f"{res['eval_split']} fine-grained accuracy %")
    ax.set_title("Accuracy by sentence length")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    files.append(save_figure(fig, out / "accuracy_by_length.png"))

    fig = _figure()
    ax = fig.add_subplot()
    y = [s["sent_per_s"]["mean"] or 0 for s in summ]
    e = [s["sent_per_s"]["std"] or 0 for s in summ]
    ax.barh(np.arange(len(summ)), y, xerr=e, capsize=3, color="tab:blue")
    ax.set_yticks(np.arange(len(summ)), [s["label"] for s in summ], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("training sentences / s (median epoch, mean over seeds)")
    ax.set_title("Training throughput")
    ax.grid(alpha=0.3, axis="x")
    files.append(save_figure(fig, out / "throughput.png"))

    fig = _figure()
    ax = fig.add_subplot()
    for k, s in enumerate(summ):
        m = [100 * c["mean"] for c in s["learning_curve"]]
        ax.plot(np.arange(1, len(m) + 1), m, label=s["label"], **_style(k))
    ax.set_xlabel("epoch")
    ax.set_ylabel("dev fine-grained accuracy %")
    ax.set_title("Learning curves (mean over seeds)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    files.append(save_figure(fig, out / "learning_curves.png"))
    return files


def overhead_figure(res, out):
    """``graph_overhead.png`` of an ``experiments/graph_overhead.py`` result, in
    folder ``out``; returns its path in a list."""
    if not have_matplotlib():
        return _plots_unavailable()
    rows = res["rows"]
    ops_ = [r["forward_ops"] for r in rows]
    fig = _figure(10, 4)
    ax = fig.add_subplot(1, 2, 1)
    ax.loglog(ops_, [r["compile_ms"] for r in rows], "o-", label="compile (first run)")
    ax.loglog(ops_, [r["codegen_ms"] for r in rows], "s-", label="codegen (second run)")
    ax.loglog(ops_, [r["modify_and_run_ms"] for r in rows], "^-", label="add a layer + run")
    ax.loglog(ops_, [r["eager_ms"] for r in rows], "k--", label="eager forward+backward")
    ax.set_xlabel("forward ops in the graph")
    ax.set_ylabel("ms")
    ax.set_title("One-time costs of a static graph")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    ax = fig.add_subplot(1, 2, 2)
    ax.semilogx(ops_, [r["eager_us_per_op"] for r in rows], "o-", label="eager")
    ax.semilogx(ops_, [r["static_us_per_op"] for r in rows], "s-", label="static (steady state)")
    ax.set_xlabel("forward ops in the graph")
    ax.set_ylabel("us per forward op (forward + backward)")
    ax.set_title("Per-op cost")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    return [save_figure(fig, out / "graph_overhead.png")]


def sweep_figure(groups, names, metrics, path):
    """Bars of dev (and test) accuracy per group of a sweep, with the standard
    deviation over seeds, one panel per metric; written to ``path``.

    Parameters
    ----------
    groups : list of dict
        :func:`dynnets.sweep.aggregate`'s groups (``split -> metric -> {mean, std}``).
    names : list of str
        The label of each group's bars.
    metrics : sequence of (key, label)
        The panels, e.g. ``(("root_fine", "fine"), ("root_binary", "binary"))``.
    """
    splits = [s for s in ("dev", "test") if any(s in g for g in groups)]
    fig = _figure(10, 0.45 * len(groups) + 1.5)
    axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
    for ax, (metric, lab) in zip(axes, metrics):
        h = 0.8 / len(splits)
        for i, s in enumerate(splits):
            ys = [k + i * h for k in range(len(groups))]
            means = [100 * (g[s][metric]["mean"] or 0) if s in g else 0 for g in groups]
            errs = [100 * (g[s][metric]["std"] or 0) if s in g else 0 for g in groups]
            ax.barh(ys, means, height=h, xerr=errs, label=s, capsize=2)
        ax.set_yticks([k + 0.4 - h / 2 for k in range(len(groups))], names)
        ax.set_xlabel(f"root {lab} accuracy % (mean ± std over seeds)")
        ax.legend(loc="lower right")
    axes[0].invert_yaxis()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    dio.atomic_write_bytes(path, buf.getvalue())
    return Path(path)
