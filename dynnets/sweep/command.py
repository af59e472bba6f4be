"""The ``dynnets sweep`` command line (also ``experiments/sweep.py``)."""
from __future__ import annotations

import math
import shlex
import sys
from dataclasses import field
from pathlib import Path

from ..options import add_engine_arguments, nonneg_int
from .grid import SweepError, build_grid, parse_seeds, parse_setting
from .report import markdown, sweep


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


def _seeds_arg(s):
    import argparse
    try:
        return parse_seeds(s)
    except SweepError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None


def _set_arg(s):
    import argparse
    try:
        return parse_setting(s)
    except SweepError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None


def add_arguments(p):
    """The options of ``dynnets sweep`` (also ``experiments/sweep.py``)."""
    p.add_argument("grid", nargs="?", type=Path, default=None, metavar="GRID",
                   help="a TOML or JSON grid file (see the sweeps tutorial of the docs); flags replace or extend it")
    p.add_argument("--models", nargs="+", default=None, metavar="NAME",
                   help="model kinds (treelstm, lstm, padded-lstm, ...) or names the grid file defines")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", nargs="+", type=_seeds_arg, default=None, metavar="SEEDS",
                       help="seeds: 0-4, 0,2,5 or 0 1 2 (default: the grid file's, else 0)")
    seeds.add_argument("--seed", type=_seeds_arg, default=None, metavar="N", help="one seed (= --seeds N)")
    p.add_argument("--set", dest="sets", action="append", type=_set_arg, default=[], metavar="NAME=V[,V...]",
                   help="a setting for every model that accepts it (a model argument, a TrainConfig field, "
                        "lowercase or min_freq); several values make an axis; repeatable")
    p.add_argument("--data", type=Path, default=None, metavar="DIR",
                   help="SST-format folder (train.txt, dev.txt, optional test.txt; default: the shipped samples)")
    p.add_argument("--max-sentences", type=nonneg_int, default=None, metavar="N",
                   help="the first N trees of each split (quick runs)")
    p.add_argument("--out", type=Path, default=Path("results/sweep"), metavar="DIR",
                   help="sweep folder: runs/<key>.json, results.json, results.md (default results/sweep)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="skip accuracy.png")
    add_engine_arguments(p)
    return p


def check_engine_arguments(a):
    """One-line errors for engine flags that contradict each other."""
    if not (math.isfinite(a.connect_timeout) and a.connect_timeout > 0):
        raise SweepError(f"--connect-timeout: expected a number of seconds > 0, got {a.connect_timeout}")
    if a.scheduler is not None and a.workers is not None:
        raise SweepError("--workers sizes the local cluster; with --scheduler the cluster has its own workers")


def run_command(a, argv=None):
    """``dynnets sweep`` for parsed options ``a``; prints the table and where the files went."""
    check_engine_arguments(a)
    if a.max_sentences == 0:
        raise SweepError("--max-sentences: expected a positive integer, got 0")
    groups = a.seeds if a.seeds is not None else ([a.seed] if a.seed is not None else None)
    seeds = None if groups is None else [s for group in groups for s in group]
    if seeds is not None:
        seeds = parse_seeds(seeds)
    grid = build_grid(a.grid, models=a.models, seeds=seeds, sets=a.sets, data=a.data,
                      max_sentences=a.max_sentences)
    if argv is None:
        argv = sys.argv[2:] if sys.argv[1:2] == ["sweep"] else sys.argv[1:]
    command = "dynnets sweep " + " ".join(shlex.quote(x) for x in argv)
    res = sweep(grid, a.out, workers=a.workers, scheduler=a.scheduler, progress=not a.no_progress,
                skip_failed=a.skip_failed, retries=a.retries, connect_timeout=a.connect_timeout,
                plots=not a.no_plots, command=command.strip())
    st = res["stats"]
    failed = sum(1 for r in res["runs"] if r["status"] != "ok")
    print()
    print(markdown(res["groups"]), end="")
    print(f"\n{st['runs']} runs: {st['reused']} finished earlier, {st['ran']} ran now ({st['failed']} failed) in "
          f"{st['seconds']:.1f} s; {failed} failed in all" + ("" if not failed else
                                                             " (see 'error' in their runs/<key>.json)"))
    print(f"Results written to {', '.join(res['files'])}")
    return 0 if failed == 0 else 1
