"""Helpers shared by the experiment scripts (never imported by the library).

``setup()`` puts the repository root on ``sys.path`` (the scripts run from a
checkout without installing), and ``blas_threads(n)`` sets numpy's OpenBLAS
to ``n`` threads the way the ``dynnets`` command does.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup():
    """Make ``import dynnets`` find this checkout."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def blas_threads(n):
    """Set OpenBLAS to ``n`` threads (0: leave it) and say so."""
    if not n:
        return
    from dynnets.experiments import set_blas_threads
    old = set_blas_threads(n)
    if old is not None and old != n:
        print(f"# numpy OpenBLAS threads: {old} -> {n} (--blas-threads)", file=sys.stderr)


def report_files(files):
    """Print where the results went."""
    print("Results written to:")
    for f in files:
        print(f"  {f}")
