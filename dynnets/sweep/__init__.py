"""Experiment sweeps: a grid of models x seeds x settings, each point one
training run, on Dask distributed (a local cluster by default, an existing
one by address) or serially in this process; resumable, nothing lost.

Programmatic API (``dynnets sweep`` and ``experiments/sweep.py`` call these)::

    from dynnets.sweep import build_grid, sweep
    grid = build_grid(models=["treelstm", "lstm"], seeds="0-4", sets=["hidden=64,150", "epochs=2"])
    res = sweep(grid, "results/sweep")                   # res["groups"]: mean ± std per setting

The grid
--------
A grid has models, seeds and settings. A setting is a model constructor
argument (``hidden``, ``max_len``, ``mode``, ...), a :class:`~dynnets.train.TrainConfig`
field (``epochs``, ``lr``, ``select``, ``evals_per_epoch``, ...) or a
vocabulary option (``lowercase``, ``min_freq``); a setting with several
values is an axis of the grid. A shared setting applies to the models that
accept it (``--set max_len=12,35`` multiplies the padded LSTM's runs, not the
Tree-LSTM's); a name that no model and no ``TrainConfig`` accepts is an
error. A setting that is both a ``TrainConfig`` field and a model argument
(the padded LSTM's ``lr``, ``optimizer``, ``weight_decay``, ``batch_size``:
its optimizer is a train op in its graph) goes to both. ``max_len`` may be
``max``, ``p95`` or ``median``: that length of the training sentences.
``seed`` is not a setting: the grid's seeds set it (weights, batch order,
dropout).

A grid file is TOML (Python's ``tomllib``) or JSON (by its suffix)::

    data = "../shared/data/sst"      # optional, relative to the file; default: the shipped samples
    max_sentences = 200              # optional: the first N trees of each split
    seeds = "0-4"                    # or [0, 1, 2, 3, 4]
    models = ["treelstm", "lstm"]    # or one table per model, below

    [set]                            # settings of every model; a list is an axis
    epochs = 2
    hidden = [64, 150]

    [models.padded-p95]              # a model of the sweep, by name
    kind = "padded-lstm"             # default: the name
    label = "padded LSTM (p95)"      # in tables; default: the name
    max_len = "p95"                  # settings of this model only

Command-line flags (``--models``, ``--seeds``, ``--set NAME=V1,V2``,
``--data``, ``--max-sentences``) replace the file's models, seeds and data,
and add to or override its shared settings. Errors in the grid (an unknown
model or setting, a bad value, a file that does not parse) are one line
that names the flag or the file and line, raised before any run starts.

Runs, keys and the sweep folder
-------------------------------
Each run's key is a SHA-256 over its full configuration (model kind and
every constructor argument with its default filled in, every
``TrainConfig`` field, the vocabulary options, the runner function) and the
data's content (the bytes of the split files and ``max_sentences``). The
driver writes each finished run to ``OUT/runs/<key>.json`` atomically as it
arrives, and rewrites ``OUT/results.json`` (every run, and the aggregates:
mean ± sample standard deviation, ddof=1, over seeds for each model and
setting) and ``OUT/results.md`` (the table); ``OUT/accuracy.png`` at the end
when matplotlib is installed. Running the same sweep again skips every
run whose key has a result (a changed setting or changed data gives new
keys; files of runs no longer in the grid stay and are ignored). A run that
raises is recorded with its error and traceback and does not stop the sweep;
the next invocation runs it again (it may have failed for a passing reason:
a killed machine, memory), unless ``skip_failed``. Sweep runs keep no
checkpoints (a worker may have no access to the sweep folder): the record
holds the dev (and test) reports and the per-epoch history; train the model
worth keeping with ``dynnets train``.

Engine
------
``workers=0`` runs every run in this process, one after the other. Otherwise
Dask distributed: by default a ``LocalCluster`` with one worker process per
core, one thread each, and ``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to 1 through Dask's
``distributed.nanny.pre-spawn-environ`` (set before a worker process
starts, as these must be; :mod:`dynnets.blas` also limits BLAS to
``TrainConfig.blas_threads``, 1 by default, during each run), so workers do
not oversubscribe the cores. ``scheduler="tcp://host:8786"`` (or
``DASK_SCHEDULER_ADDRESS``) submits to an existing cluster instead; start
its workers with ``--nthreads 1`` and ``NUMBA_NUM_THREADS=1``, with this
version of dynnets importable. The run function lives in :mod:`.runner`, so
workers import it and Numba loads the kernels from its on-disk cache
(``cache=True``; shared by the processes of one machine): a local worker does
not recompile what the driver compiled (each record counts the kernels a
run compiled and loaded, ``worker.numba``).

Data reaches workers without a shared filesystem: the driver reads the
split files once (their bytes are also what the key hashes), parses them
(so a bad file is an error before anything starts) and scatters the bytes to
every worker; a worker parses them with the same parser once per process
(parsing SST takes 0.6 s; unpickling the parsed trees took 1.7 s).

Worker processes are spawned, so they import the main module of the
process that starts a local cluster: a script that calls :func:`sweep` or
:func:`run_all` with workers keeps its work under ``if __name__ ==
"__main__":``.

A task whose worker process dies is rescheduled by Dask's scheduler, up to
``retries`` times for a local cluster (``distributed.scheduler.allowed-failures``;
an existing cluster's scheduler uses its own setting); ``retries`` is also the
task's ``retries=`` for errors outside the run itself. Every run's result is
written exactly once: one file per key, written by the driver only.
"""
from __future__ import annotations

# a package by concern: grid (values, seeds, grid files), dataset (the one data loader, also
# dynnets.runs'), planning (validation, resolution, keys), runner (one run), engine (Dask client,
# the sweep folder, run_all), report (aggregation, tables, sweep()), command (the command line)
from .command import add_arguments, check_engine_arguments, run_command  # noqa: F401
from .dataset import SweepData, load_data  # noqa: F401
from .engine import dask_client, run_all  # noqa: F401
from .grid import (SWEEP_FORMAT, WORKER_ENV, Grid, ModelSpec, SweepError, build_grid, parse_seeds,  # noqa: F401
                   parse_setting, read_grid_file)
from .planning import Run, plan  # noqa: F401
from .report import aggregate, markdown, sweep, write_results  # noqa: F401
from .runner import execute, train_run  # noqa: F401

__all__ = ["SweepError", "Grid", "ModelSpec", "Run", "SweepData", "parse_seeds", "parse_setting", "read_grid_file",
           "build_grid", "load_data", "plan", "train_run", "execute", "dask_client", "run_all", "aggregate",
           "markdown", "write_results", "sweep", "add_arguments", "check_engine_arguments",
           "run_command", "SWEEP_FORMAT", "WORKER_ENV"]
