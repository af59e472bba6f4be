"""Shared helpers for the benchmark scripts (never imported by the library or tests).

- :func:`setup` re-executes the script once with ``OPENBLAS_CORETYPE`` and
  ``OPENBLAS_L2_SIZE`` removed from the environment (this machine sets
  ``OPENBLAS_CORETYPE=Haswell``, which slows small numpy matmuls) and says so,
  puts the repository root on ``sys.path`` and prints the environment.
- :func:`interleaved` times several contenders round-robin in one process, so a
  burst of load from other processes hits them all alike; :func:`median_us`
  summarises.
- :func:`torch_or_none` imports PyTorch with one intra-op thread when available.
- :func:`markdown_table` formats results for the README; :func:`autobatch_stats_line`
  the statistics of a ``dynnets.autobatch`` context.

Typical use::

    from _common import setup
    ENV = setup(__file__)          # first line of main(); may re-exec
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SCRUB = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_MARK = "DYNNETS_BENCH_REEXEC"

__all__ = ["ROOT", "setup", "interleaved", "median_us", "torch_or_none", "markdown_table", "blas_info",
           "fmt_us", "autobatch_stats_line"]


def setup(script, keep_env=False, blas_threads=1):
    """Prepare a benchmark process; returns a dict describing the environment.

    Unless ``keep_env`` is true, re-executes ``script`` (with the same argv)
    without OpenBLAS tuning variables the first time through; the child finds
    the marker variable and carries on. BLAS reads these variables when it is
    loaded, so they cannot be changed from inside a process that has numpy.
    ``blas_threads`` (default 1, like ``torch.set_num_threads(1)`` for the
    PyTorch contenders) sets ``OPENBLAS_NUM_THREADS`` the same way; 0 leaves
    OpenBLAS's default (one thread per core), which on a loaded shared machine
    makes every product wait for a busy core.
    """
    if os.environ.get(_MARK) is None:
        env = dict(os.environ)
        removed = {} if keep_env else {k: env.pop(k) for k in _SCRUB if k in env}
        if blas_threads:
            env["OPENBLAS_NUM_THREADS"] = str(blas_threads)
        if env != dict(os.environ):
            env[_MARK] = ";".join(f"{k}={v}" for k, v in removed.items()) or "-"
            sys.stdout.flush()
            os.execve(sys.executable, [sys.executable, str(Path(script).resolve()), *sys.argv[1:]], env)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    mark = os.environ.get(_MARK)
    info = {"reexec": mark, "kept": {k: os.environ[k] for k in _SCRUB if k in os.environ},
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}
    if mark and mark != "-":
        print(f"# re-executed with {mark} unset from the environment (numpy/OpenBLAS default core detection)")
    if info["kept"]:
        print(f"# running with {info['kept']} as set in the environment")
    print(f"# OPENBLAS_NUM_THREADS={info['blas_threads'] or 'unset (OpenBLAS default)'}")
    print(f"# python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus; {blas_info()}")
    return info


def blas_info():
    """A one-line description of numpy's BLAS (threadpoolctl if installed)."""
    import numpy as np

    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        threadpool_info = None
    if threadpool_info is not None:
        parts = [f"{d.get('internal_api')} {d.get('version')} {d.get('architecture')} threads={d.get('num_threads')}"
                 for d in threadpool_info()]
        return f"numpy {np.__version__}; " + "; ".join(parts)
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"numpy {np.__version__}; BLAS {blas.get('name')} {blas.get('version')} (threadpoolctl not installed)"
    except Exception:      # show_config's layout is not a stable API
        return f"numpy {np.__version__}"


def torch_or_none(threads=1):
    """``torch`` with ``threads`` intra-op threads, or None if not importable."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def interleaved(contenders, repeats, number, warmup=1):
    """Time contenders round-robin.

    Parameters
    ----------
    contenders : dict name -> zero-argument callable
    repeats : int
        Rounds; in each round every contender runs ``number`` calls back to back.
    number : int
        Calls per timed sample.
    warmup : int
        Untimed rounds first (jit compilation, caches, allocator).

    Returns
    -------
    dict name -> list of seconds per call, one entry per round.
    """
    names = list(contenders)
    for _ in range(warmup):
        for n in names:
            for _ in range(number):
                contenders[n]()
    times = {n: [] for n in names}
    clock = time.perf_counter
    for r in range(repeats):
        # rotate the order each round so no contender always runs right after another
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            f = contenders[n]
            t0 = clock()
            for _ in range(number):
                f()
            times[n].append((clock() - t0) / number)
    return times


def median_us(samples):
    return statistics.median(samples) * 1e6


def fmt_us(us):
    return f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def markdown_table(header, rows):
    """A GitHub markdown table; ``rows`` are sequences of already-formatted cells."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(header), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def autobatch_stats_line(stats):
    """The statistics of ``dynnets.autobatch`` contexts (``ab.stats``, or a
    list of them: their mean per context) as one line, with the overhead per
    recorded op: (recording + scheduling + gathering seconds) / nodes (the
    batched calls' own compute excluded)."""
    many = list(stats) if isinstance(stats, (list, tuple)) else [stats]
    mean = {}
    for k, v in many[0].items():
        if isinstance(v, dict):
            keys = sorted({kk for st in many for kk in st[k]})
            mean[k] = {kk: sum(st[k].get(kk, 0) for st in many) / len(many) for kk in keys}
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            mean[k] = sum(st[k] for st in many) / len(many)
    line = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in mean.items())
    n = mean.get("nodes")
    parts = [k for k in ("record_s", "schedule_s", "gather_s") if k in mean]
    if n and parts:
        us = {k: 1e6 * mean[k] / n for k in parts}
        line += (f"; overhead per recorded op {sum(us.values()):.2f} us ("
                 + ", ".join(f"{k[:-2]} {v:.2f}" for k, v in us.items()) + ")")
    return line
