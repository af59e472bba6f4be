"""Helpers shared by the experiment scripts (never imported by the library).

``setup()`` puts the repository root on ``sys.path`` (the scripts run from a
checkout without installing); ``seed_type`` is the argparse type of
``--seed`` (an integer >= 0, as numpy's seeds), the ``dynnets`` command's
(:func:`dynnets.options.seed_type`).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup():
    """Make ``import dynnets`` find this checkout."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def seed_type(s):
    setup()
    from dynnets.options import seed_type as parse
    return parse(s)


def report_files(files):
    """Print where the results went."""
    print("Results written to:")
    for f in files:
        print(f"  {f}")
