"""A sweep: models x seeds x settings, each point one training run, on a
local Dask cluster (one worker per core), an existing one (--scheduler) or in
this process (--workers 0). The same code as ``dynnets sweep``::

    python experiments/sweep.py --models treelstm lstm padded-lstm --seeds 0-4 \\
        --set max_len=12,35,52 --set hidden=150 --data ../shared/data/sst --out results/sweep
    python experiments/sweep.py grid.toml --out results/grid       # a TOML or JSON grid file

See :mod:`dynnets.sweep` and the sweeps tutorial (docs/tutorials/sweeps.md) for the grid
file, run keys, resuming and where the results go.
"""
import argparse
import os
import sys

from _util import setup

setup()

from dynnets.blas import blas_threads  # noqa: E402
from dynnets.sweep import add_arguments, run_command  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(prog="sweep.py", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--blas-threads", type=int, default=1, metavar="N",
                   help="BLAS threads of this process (each run uses TrainConfig.blas_threads, default 1)")
    a = p.parse_args(argv)
    try:
        with blas_threads(a.blas_threads or None):
            return run_command(a, argv=sys.argv[1:] if argv is None else argv)
    except (ValueError, OSError) as exc:
        if os.environ.get("DYNNETS_DEBUG"):
            raise
        print(f"sweep.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
