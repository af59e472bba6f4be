"""Padded static LSTM vs dynamic LSTM vs Tree-LSTM (accuracy, speed, padding).

A thin script over :func:`dynnets.runs.compare_padded_vs_dynamic`
(the same code and options as ``dynnets compare``)::

    python experiments/compare_padded_vs_dynamic.py --seeds 3 --out results/compare
    python experiments/compare_padded_vs_dynamic.py --data ../shared/data/sst --out results/compare_sst

SST here has no test split: the script then reports dev accuracy only and says so.
"""
import argparse
import sys

from _util import setup

setup()

from dynnets.options import COMPARE_DESCRIPTION, add_compare_arguments  # noqa: E402
from dynnets.runs import run_compare  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(prog="compare_padded_vs_dynamic.py", description=COMPARE_DESCRIPTION)
    add_compare_arguments(p)
    a = p.parse_args(argv)
    return run_compare(a)


if __name__ == "__main__":
    sys.exit(main())
