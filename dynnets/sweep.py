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
version of dynnets importable. The run function lives in this module, so
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

import contextlib
import dataclasses
import difflib
import hashlib
import itertools
import json
import math
import os
import platform
import re
import shlex
import socket
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import io as dio
from .options import add_engine_arguments, nonneg_int

__all__ = ["SweepError", "Grid", "ModelSpec", "Run", "SweepData", "parse_seeds", "parse_setting", "read_grid_file",
           "build_grid", "load_data", "plan", "train_run", "execute", "dask_client", "run_all", "aggregate",
           "markdown", "write_results", "sweep", "add_arguments", "check_engine_arguments",
           "run_command", "SWEEP_FORMAT", "WORKER_ENV"]

SWEEP_FORMAT = "dynnets.sweep/1"
#: environment of a local cluster's worker processes (set before each starts)
WORKER_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
VOCAB_SETTINGS = {"lowercase": True, "min_freq": 1}
#: TrainConfig fields a grid does not set: the seed comes from the grid's seeds; runs write no files, show no bars
_NOT_SETTINGS = {"seed": "the grid's seeds set it (--seeds)", "out_dir": "sweep runs write no run folders",
                 "progress": "the sweep shows one progress bar"}
_METRICS = (("root_fine", "fine"), ("root_binary", "binary"), ("all_nodes", "all nodes"))


class SweepError(ValueError):
    """A bad grid, flag, file or cluster address: one line naming it."""


# --------------------------------------------------------------------------
# values, seeds and --set
# --------------------------------------------------------------------------


def _value(s):
    """A --set value: an int, a float, true/false, none, or the string itself."""
    t = s.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(t)
        except ValueError:
            pass
    return t


def parse_seeds(spec, where="--seeds"):
    """Seeds from ``"0-4"``, ``"0,2,5"``, ``"0-2,7"``, an int or a list of those."""
    items = spec if isinstance(spec, (list, tuple)) else [spec]
    seeds = []
    for item in items:
        if isinstance(item, bool):
            raise SweepError(f"{where}: expected seeds (integers >= 0, or ranges like 0-4), got {item!r}")
        if isinstance(item, int):
            parts = [str(item)]
        elif isinstance(item, str):
            parts = [p for p in item.replace(" ", "").split(",") if p]
        else:
            raise SweepError(f"{where}: expected seeds (integers >= 0, or ranges like 0-4), got {item!r}")
        for p in parts:
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", p)
            if m is None:
                raise SweepError(f"{where}: expected seeds (integers >= 0, or ranges like 0-4), got {p!r}")
            lo, hi = int(m[1]), int(m[2] if m[2] is not None else m[1])
            if hi < lo:
                raise SweepError(f"{where}: the range {p!r} is empty (write it low-high)")
            seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise SweepError(f"{where}: expected at least one seed")
    dupes = sorted({s for s in seeds if seeds.count(s) > 1})
    if dupes:
        raise SweepError(f"{where}: seed{'s' if len(dupes) > 1 else ''} {', '.join(map(str, dupes))} given twice")
    return seeds


def parse_setting(text):
    """``"NAME=V1,V2"`` -> (name, [values]) (the ``--set`` flag)."""
    name, eq, values = text.partition("=")
    name = name.strip()
    if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or not values.strip():
        raise SweepError(f"--set {text}: expected NAME=VALUE or NAME=VALUE1,VALUE2,... (e.g. --set hidden=64,150)")
    return name, [_value(v) for v in values.split(",")]


# --------------------------------------------------------------------------
# the grid
# --------------------------------------------------------------------------


@dataclass
class ModelSpec:
    """One model of a grid: ``name`` (in keys' records and tables), ``kind``
    (a :func:`dynnets.models.build_model` kind), ``label`` and its own
    ``settings`` (name -> list of values)."""

    name: str
    kind: str
    label: str
    settings: dict = field(default_factory=dict)


@dataclass
class Grid:
    """Models x seeds x settings (see the module docstring).

    ``settings``: shared settings, name -> list of values (one value: fixed;
    several: an axis). ``where`` says, per setting or model name, where it
    came from (a flag, or ``file:line``) for error messages.
    """

    models: list
    seeds: list
    settings: dict = field(default_factory=dict)
    data: Path | None = None
    max_sentences: int | None = None
    where: dict = field(default_factory=dict)

    def to_dict(self):
        return {"models": [dataclasses.asdict(m) for m in self.models], "seeds": list(self.seeds),
                "settings": dict(self.settings), "data": None if self.data is None else str(self.data),
                "max_sentences": self.max_sentences}


def _line_of(text, *tokens):
    """1-based number of the first line holding every token (for error
    messages about a key of a parsed file; 0 when none does)."""
    for i, line in enumerate(text.splitlines(), 1):
        if all(t in line for t in tokens):
            return i
    return 0


def _at(path, line):
    return f"{path}:{line}" if line else str(path)


_FILE_KEYS = ("data", "max_sentences", "seeds", "models", "set")


def read_grid_file(path):
    """A :class:`Grid` from a TOML (``.toml``) or JSON file (see the module docstring)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SweepError(f"grid file '{path}': {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise SweepError(f"{path}:{line}: not UTF-8 text (byte {exc.start})") from None
    if path.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SweepError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    elif path.suffix.lower() == ".toml":
        import tomllib
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            msg = str(exc)
            m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
            pos = f"{m[1]}:{m[2]}" if m else str(max(1, len(text.splitlines())))     # "(at end of document)"
            raise SweepError(f"{path}:{pos}: not valid TOML: {re.sub(r' *[(]at (line|end).*', '', msg)}") from None
    else:
        raise SweepError(f"grid file '{path}': expected a .toml or .json file")
    if not isinstance(doc, dict):
        raise SweepError(f"{path}:1: a grid is a table (TOML) or an object (JSON), got {type(doc).__name__}")
    for k in doc:
        if k not in _FILE_KEYS:
            near = difflib.get_close_matches(k, _FILE_KEYS, 1)
            raise SweepError(f"{_at(path, _line_of(text, k))}: unknown key {k!r} (expected {', '.join(_FILE_KEYS)}"
                             + (f"; did you mean {near[0]!r}?" if near else ")"))
    where = {}
    models = []
    spec = doc.get("models", [])
    if isinstance(spec, list):
        for name in spec:
            if not isinstance(name, str):
                raise SweepError(f"{_at(path, _line_of(text, 'models'))}: models: expected model names, got {name!r}")
            models.append(ModelSpec(name, name, name))
            where[("model", name)] = _at(path, _line_of(text, f'"{name}"'))
    elif isinstance(spec, dict):
        for name, table in spec.items():
            line = _at(path, _line_of(text, "models", name))
            if not isinstance(table, dict):
                raise SweepError(f"{line}: models.{name}: expected a table of settings, got {table!r}")
            table = dict(table)
            kind, label = table.pop("kind", name), table.pop("label", name)
            if not isinstance(kind, str) or not isinstance(label, str):
                raise SweepError(f"{line}: models.{name}: kind and label must be strings")
            settings = {}
            for k, v in table.items():
                settings[k] = v if isinstance(v, list) else [v]
                where[("model setting", name, k)] = _at(path, _line_of(text, k))
            models.append(ModelSpec(name, kind, label, settings))
            where[("model", name)] = line
    else:
        raise SweepError(f"{_at(path, _line_of(text, 'models'))}: models: expected a list of names or a table per "
                         f"model, got {spec!r}")
    shared = doc.get("set", {})
    if not isinstance(shared, dict):
        raise SweepError(f"{_at(path, _line_of(text, 'set'))}: set: expected a table of settings, got {shared!r}")
    settings = {}
    for k, v in shared.items():
        settings[k] = v if isinstance(v, list) else [v]
        where[("setting", k)] = _at(path, _line_of(text, k))
    seeds = None
    if "seeds" in doc:
        seeds = parse_seeds(doc["seeds"], where=f"{_at(path, _line_of(text, 'seeds'))}: seeds")
    data = doc.get("data")
    if data is not None:
        if not isinstance(data, str):
            raise SweepError(f"{_at(path, _line_of(text, 'data'))}: data: expected a folder name, got {data!r}")
        data = (path.parent / data) if not Path(data).is_absolute() else Path(data)
        where["data"] = _at(path, _line_of(text, "data"))
    ms = doc.get("max_sentences")
    if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int) or ms < 1):
        raise SweepError(f"{_at(path, _line_of(text, 'max_sentences'))}: max_sentences: expected a positive integer, "
                         f"got {ms!r}")
    where["seeds"] = _at(path, _line_of(text, "seeds"))
    return Grid(models=models, seeds=seeds, settings=settings, data=data, max_sentences=ms, where=where)


def build_grid(file=None, models=None, seeds=None, sets=(), data=None, max_sentences=None):
    """A :class:`Grid` from a grid file and/or flag values.

    Parameters
    ----------
    file : path, optional
        A TOML or JSON grid file (:func:`read_grid_file`).
    models : list of str, optional
        Model names (``--models``): a model the file defines by that name,
        else a model kind. Replaces the file's list.
    seeds : str, int or list, optional
        ``--seeds`` (:func:`parse_seeds`); default: the file's, else ``[0]``.
    sets : list of str or (name, values) pairs
        ``--set NAME=V1,V2``: added to (or replacing) the shared settings.
    data, max_sentences
        Replace the file's.
    """
    grid = read_grid_file(file) if file is not None else Grid(models=[], seeds=None)
    if models is not None:
        known = {m.name: m for m in grid.models}
        grid.models = []
        for name in models:
            grid.models.append(known.get(name) or ModelSpec(name, name, name))
            grid.where.setdefault(("model", name), "--models")
        names = [m.name for m in grid.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SweepError(f"--models: {', '.join(dupes)} given twice")
    if seeds is not None:
        grid.seeds = parse_seeds(seeds)
        grid.where["seeds"] = "--seeds"
    if grid.seeds is None:
        grid.seeds = [0]
    for s in sets:
        name, values = parse_setting(s) if isinstance(s, str) else s
        grid.settings[name] = list(values)
        grid.where[("setting", name)] = f"--set {name}=" + ",".join(str(v) for v in values)
    if data is not None:
        grid.data = Path(data)
        grid.where["data"] = "--data"
    if max_sentences is not None:
        grid.max_sentences = int(max_sentences)
    if not grid.models:
        raise SweepError("no models: pass --models NAME ... or list them in the grid file")
    return grid


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


_SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class SweepData:
    """The data of a sweep as workers receive it: the split files' bytes.

    ``key`` hashes the bytes (and ``max_sentences``); ``name`` describes the
    source. :meth:`splits` parses them (once per process).
    """

    files: tuple           # ((split, bytes), ...) in the order train, dev, test
    max_sentences: int | None
    key: str
    name: str

    def splits(self):
        """Split name -> list of trees (parsed by :func:`dynnets.data.load_sst`, cached per process)."""
        got = _PARSED.get(self.key)
        if got is None:
            from .data import load_sst
            with tempfile.TemporaryDirectory(prefix="dynnets-sweep-data-") as tmp:
                for split, raw in self.files:
                    Path(tmp, f"{split}.txt").write_bytes(raw)
                got = load_sst(tmp)
            if self.max_sentences is not None:
                got = {k: v[:self.max_sentences] for k, v in got.items()}
            _PARSED.clear()         # one data set per process: a sweep's
            _PARSED[self.key] = got
        return got


# Parsed splits by data key, so a worker parses its sweep's data once, not
# once per run; the trees are immutable, so sharing them changes no result.
_PARSED: dict = {}


def load_data(folder=None, max_sentences=None):
    """Read an SST-format folder (default: the shipped samples) for a sweep.

    The files are parsed here, so a file that does not parse is an error
    (naming file, line and column) before any run starts.

    Returns
    -------
    SweepData
    """
    from .data import samples_dir
    if max_sentences is not None and (isinstance(max_sentences, bool) or not isinstance(max_sentences, int)
                                      or max_sentences < 1):
        raise SweepError(f"max_sentences: expected a positive integer, got {max_sentences!r}")
    d = samples_dir() if folder is None else Path(folder)
    name = "the shipped sample treebank, dynnets/data/samples" if folder is None else str(folder)
    if not d.is_dir():
        raise SweepError(f"--data '{folder}': no such folder (expected a folder with train.txt, dev.txt and "
                         f"optionally test.txt)")
    files = []
    for split in _SPLITS:
        p = d / f"{split}.txt"
        if p.is_file():
            files.append((split, p.read_bytes()))
        elif split != "test":
            raise SweepError(f"--data '{folder}': no {split}.txt (train.txt and dev.txt are needed; test.txt is "
                             f"optional)")
    h = hashlib.sha256()
    for split, raw in files:
        h.update(f"{split}\0{len(raw)}\0".encode())
        h.update(raw)
    h.update(f"max_sentences={max_sentences}".encode())
    data = SweepData(tuple(files), max_sentences, h.hexdigest(), name)
    from .data import load_sst
    try:
        # errors name the real file (and line and column); a file with no trees is one too
        splits = load_sst(d, splits=[s for s, _ in files])
    except ValueError as exc:
        raise SweepError(" ".join(str(exc).split())) from None
    if max_sentences is not None:
        splits = {k: v[:max_sentences] for k, v in splits.items()}
    _PARSED.clear()
    _PARSED[data.key] = splits
    return data


# --------------------------------------------------------------------------
# planning: validation, resolution, keys
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One point of the grid.

    ``model``: every constructor argument of ``kind`` (defaults filled in,
    without ``vocab_size``); ``train``: every ``TrainConfig`` field; ``vocab``:
    ``lowercase`` and ``min_freq``; ``axes``: the values of the grid's axes
    for this run (what tells its group from the others); ``key``: see the
    module docstring.
    """

    key: str
    name: str
    kind: str
    label: str
    seed: int
    model: dict
    train: dict
    vocab: dict
    axes: dict

    def to_dict(self):
        return dataclasses.asdict(self)


def _train_fields():
    from .train import TrainConfig
    return {f.name for f in dataclasses.fields(TrainConfig)} - set(_NOT_SETTINGS)


class _Models:
    """What each model kind accepts, found by building tiny models (vocabulary
    of 2): a constructor's own check is the authority on its arguments."""

    def __init__(self):
        self._accepts = {}
        self._defaults = {}
        self._configs = {}

    def defaults(self, kind):
        if kind not in self._defaults:
            from .models import build_model
            self._defaults[kind] = dict(build_model(kind, 2).config)
        return self._defaults[kind]

    def accepts(self, kind, name):
        if (kind, name) not in self._accepts:
            from .models import build_model
            ok = True
            if name not in self.defaults(kind):
                try:
                    build_model(kind, 2, **{name: self.defaults(kind).get(name)})
                except TypeError as exc:
                    ok = "unexpected keyword argument" not in str(exc)
                except (ValueError, LookupError):
                    ok = True
            self._accepts[(kind, name)] = ok
        return self._accepts[(kind, name)]

    def config(self, kind, kwargs):
        """Every constructor argument of ``kind`` built with ``kwargs`` (the
        constructor checks the values); models that differ only in the seed
        are built once."""
        from .models import build_model
        seedless = {k: v for k, v in kwargs.items() if k != "seed"}
        memo = json.dumps([kind, seedless], sort_keys=True, default=repr)
        if memo not in self._configs:
            cfg = dict(build_model(kind, 2, **seedless).config)
            cfg.pop("vocab_size", None)
            for k, v in seedless.items():
                # a sequence kind's name fixes its cell and direction
                if k in cfg and cfg[k] != v:
                    raise ValueError(f"{kind} fixes {k}={cfg[k]!r} (its kind name says so); it cannot be {v!r}")
            self._configs[memo] = cfg
        cfg = dict(self._configs[memo])
        if "seed" in kwargs:
            cfg["seed"] = kwargs["seed"]
        return cfg


def _hash(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _runner_name(runner):
    return f"{runner.__module__}.{runner.__qualname__}"


def _resolve_max_len(v, lengths, where):
    if isinstance(v, str):
        if v == "max":
            return max(lengths)
        if v in ("p95", "median"):
            import numpy as np
            return int(math.ceil(np.percentile(lengths, 95 if v == "p95" else 50)))
        raise SweepError(f"{where}: max_len must be a positive integer, max, p95 or median, got {v!r}")
    return v


def plan(grid, data, runner=None):
    """The runs of ``grid`` on ``data`` (a :class:`SweepData`), validated,
    in order (model, then setting combination, then seed).

    Raises :class:`SweepError` (naming the flag or file and line) for an
    unknown model or setting, a bad value or duplicate runs.
    """
    from .models import MODEL_KINDS
    from .train import TrainConfig
    runner = runner or train_run
    train_fields = _train_fields()
    probe = _Models()
    where = grid.where
    for m in grid.models:
        if m.kind not in MODEL_KINDS:
            near = difflib.get_close_matches(m.kind, MODEL_KINDS, 1)
            raise SweepError(f"{where.get(('model', m.name), '--models')}: unknown model {m.kind!r} (expected one "
                             f"of {', '.join(MODEL_KINDS)}" + (f"; did you mean {near[0]!r}?)" if near else ")"))

    def check_name(name, kinds, at):
        if name in _NOT_SETTINGS:
            raise SweepError(f"{at}: {name} is not a setting: {_NOT_SETTINGS[name]}")
        if name in train_fields or name in VOCAB_SETTINGS:
            return
        if any(probe.accepts(k, name) for k in kinds):
            return
        known = sorted(train_fields | set(VOCAB_SETTINGS) | {n for k in kinds for n in probe.defaults(k)}
                       - {"vocab_size", "seed"})
        near = difflib.get_close_matches(name, known, 1)
        raise SweepError(f"{at}: unknown setting {name!r}: not an argument of {', '.join(sorted(set(kinds)))}, a "
                         f"TrainConfig field nor a vocabulary option" + (f" (did you mean {near[0]!r}?)" if near
                                                                         else ""))

    kinds = [m.kind for m in grid.models]
    for name in grid.settings:
        check_name(name, kinds, where.get(("setting", name), f"--set {name}"))
    for m in grid.models:
        for name in m.settings:
            check_name(name, [m.kind], where.get(("model setting", m.name, name), f"models.{m.name}.{name}"))

    lengths = [len(t.leaves()) for t in data.splits()["train"]]
    runs = []
    for m in grid.models:
        axes = {k: v for k, v in grid.settings.items()
                if k in train_fields or k in VOCAB_SETTINGS or probe.accepts(m.kind, k)}
        axes.update(m.settings)
        names = list(axes)
        for combo in itertools.product(*(axes[n] for n in names)):
            values = dict(zip(names, combo))

            def blame(msg, m=m, values=values, names=names):
                """Where the setting that ``msg`` names came from (else the model's entry)."""
                for n in sorted(names, key=len, reverse=True):
                    if re.search(rf"\b{re.escape(n)}\b", msg):
                        w = where.get(("model setting", m.name, n)) or where.get(("setting", n)) or f"setting {n}"
                        return f"{w} ({m.name}, {n}={values[n]!r})"
                return f"{where.get(('model', m.name), m.name)} ({m.name})"
            train_kw = {n: v for n, v in values.items() if n in train_fields}
            vocab = dict(VOCAB_SETTINGS)
            vocab.update({n: v for n, v in values.items() if n in VOCAB_SETTINGS})
            if not isinstance(vocab["lowercase"], bool):
                raise SweepError(f"{blame('lowercase')}: lowercase must be true or false")
            if isinstance(vocab["min_freq"], bool) or not isinstance(vocab["min_freq"], int) or vocab["min_freq"] < 1:
                raise SweepError(f"{blame('min_freq')}: min_freq must be a positive integer")
            model_kw = {n: v for n, v in values.items() if n not in train_fields and n not in VOCAB_SETTINGS}
            if "max_len" in model_kw:
                model_kw["max_len"] = _resolve_max_len(model_kw["max_len"], lengths, blame("max_len"))
            for seed in grid.seeds:
                try:
                    tc = TrainConfig(seed=seed, progress=False, **train_kw)
                except (ValueError, TypeError) as exc:
                    raise SweepError(f"{blame(str(exc))}: {exc}") from None
                kw = dict(model_kw, seed=seed)
                for n in train_fields:           # e.g. the padded LSTM's graph optimizer
                    if n not in kw and probe.accepts(m.kind, n):
                        kw[n] = getattr(tc, n)
                try:
                    cfg = probe.config(m.kind, kw)
                except (ValueError, TypeError) as exc:
                    msg = " ".join(str(exc).split())
                    raise SweepError(f"{blame(msg)}: {msg}") from None
                train = tc.to_dict()
                for n in _NOT_SETTINGS:
                    train.pop(n, None)
                full = {"format": SWEEP_FORMAT, "kind": m.kind, "model": cfg, "train": train, "vocab": vocab,
                        "seed": seed, "data": data.key, "runner": _runner_name(runner)}
                runs.append(Run(key=_hash(full)[:20], name=m.name, kind=m.kind, label=m.label, seed=seed, model=cfg,
                                train=train, vocab=vocab, axes={n: values[n] for n in names if len(axes[n]) > 1}))
    seen = {}
    for r in runs:
        if r.key in seen:
            a = seen[r.key]
            raise SweepError(f"the grid holds the same run twice: {a.name} {a.axes} and {r.name} {r.axes} (seed "
                             f"{r.seed}) have one configuration")
        seen[r.key] = r
    return runs


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
    from .models import build_model
    from .train import evaluate, train
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


def _plain(o):
    """JSON-ready copy (numpy scalars and arrays to Python; private keys dropped)."""
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items() if not str(k).startswith("_")}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
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
    from .data.vocab import Vocabulary
    from .train import TrainConfig
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
            rec.update(status="ok", result=_plain(result))
        except Exception as exc:
            rec.update(status="failed", error=f"{type(exc).__name__}: {' '.join(str(exc).split())}",
                       traceback=traceback.format_exc(limit=-8))
    if caught.lines:
        rec["warnings"] = caught.lines
    c1, l1 = _numba_counts()
    from .blas import blas_thread_counts
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


# --------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------


def _lock(out):
    """Hold ``OUT/.sweep.lock`` while a sweep writes there: two sweeps into one folder would race."""
    import fcntl
    out.mkdir(parents=True, exist_ok=True)
    f = open(out / ".sweep.lock", "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise SweepError(f"--out '{out}': another sweep is writing into this folder") from None
    return f


def _read_finished(out, keys):
    """Records in ``OUT/runs`` for ``keys`` (unreadable files count as missing)."""
    found = {}
    d = out / "runs"
    if not d.is_dir():
        return found
    for key in keys:
        p = d / f"{key}.json"
        if not p.is_file():
            continue
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("key") == key and rec.get("status") in ("ok", "failed"):
            found[key] = rec
    return found


def _lost_record(run, exc):
    """The record of a run that Dask could not finish (e.g. its worker died ``retries`` + 1 times)."""
    return {"format": SWEEP_FORMAT, **{k: run[k] for k in ("key", "name", "kind", "label", "seed", "axes")},
            "status": "failed", "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}",
            "traceback": "", "seconds": None, "worker": None,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _summary_line(rec):
    where = ", ".join(f"{k}={v}" for k, v in rec["axes"].items())
    head = f"{rec['label']}" + (f" [{where}]" if where else "") + f" seed {rec['seed']}"
    if rec["status"] != "ok":
        return f"{head}: FAILED {rec['error']}"
    r = rec["result"]
    parts = []
    for split in ("dev", "test"):
        if split in r:
            parts.append(f"{split} fine {100 * r[split]['root_fine']:.2f} binary {100 * r[split]['root_binary']:.2f}")
    w = rec.get("worker") or {}
    return f"{head}: " + "; ".join(parts) + f" ({rec['seconds']:.1f} s, pid {w.get('pid')})"


@contextlib.contextmanager
def dask_client(workers=None, scheduler=None, retries=2, connect_timeout=10.0, log=None):
    """A Dask ``Client``: of a new ``LocalCluster`` (``workers`` processes,
    default one per core, configured as the module docstring says), or
    connected to the scheduler at ``scheduler``; closed (with its cluster) on exit.

    Raises :class:`SweepError` when Dask is not installed or the scheduler
    cannot be reached within ``connect_timeout`` seconds.
    """
    log = log or (lambda s: print(s, flush=True))
    workers = _default_workers() if workers is None else workers
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise SweepError("Dask is not installed: pip install 'dask[distributed]' (the 'sweep' extra), or pass "
                         "--workers 0 to run in this process") from None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=connect_timeout)
        except Exception as exc:       # OSError, TimeoutError, ValueError for a malformed address
            msg = " ".join(str(exc).split()) or type(exc).__name__
            raise SweepError(f"--scheduler {scheduler}: cannot reach a Dask scheduler ({msg})") from None
        try:
            n = len(client.scheduler_info().get("workers", {}))
            log(f"sweep: Dask scheduler {scheduler}, {n} worker{'s' if n != 1 else ''} now"
                + ("; the runs wait until workers connect" if n == 0 else ""))
            yield client
        finally:
            client.close()
        return
    # Dask's default MALLOC_TRIM_THRESHOLD_=65536 (so workers hand freed memory
    # back to the OS) also pins glibc's mmap threshold at 128 KiB: each array
    # of a 300/150 model is then a fresh mmap, page faults and all. A
    # Tree-LSTM SST epoch trained in 5.33 s with it, 3.74 s without (measured
    # in one process).
    env = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}).items()
           if k != "MALLOC_TRIM_THRESHOLD_"}
    env.update(WORKER_ENV)
    # the nanny sets these in this process's environment before it spawns a
    # worker; they are put back when the cluster closes
    saved = {k: os.environ.get(k) for k in env}
    config = {"distributed.nanny.pre-spawn-environ": env,
              # one run per worker at a time: a run never waits behind another on a busy worker
              "distributed.scheduler.worker-saturation": 1.0,
              "distributed.scheduler.allowed-failures": retries}
    import logging
    with dask.config.set(config):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)
    try:
        client = Client(cluster)
        try:
            import importlib.util
            info = client.scheduler_info()
            dash = (f"dashboard {client.dashboard_link}" if "dashboard" in info.get("services", {})
                    else "no dashboard")
            if importlib.util.find_spec("bokeh") is None:
                dash += " (its pages need bokeh: pip install 'bokeh>=3.1')"
            log(f"sweep: LocalCluster of {workers} worker process{'es' if workers != 1 else ''}, 1 thread each, "
                f"scheduler {cluster.scheduler_address}; {dash}")
            yield client
        finally:
            client.close()
    finally:
        cluster.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _worker_plugin():
    """A Dask ``WorkerPlugin`` that freezes the garbage collector when its worker closes.

    A worker ends with the parsed treebank and the imported modules alive;
    frozen, the collections of interpreter shutdown skip them (closing a
    2-worker cluster after each worker parsed SST: 4.0 s without, 0.16 s
    with, measured).
    """
    from distributed.diagnostics.plugin import WorkerPlugin

    class FreezeAtExit(WorkerPlugin):
        name = "dynnets-freeze-at-exit"

        def teardown(self, worker):
            import gc
            gc.freeze()

    return FreezeAtExit()


def _default_workers():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_all(runs, data, out, *, workers=None, scheduler=None, client=None, progress=True, skip_failed=False,
            retries=2, connect_timeout=10.0, runner=None, on_result=None, log=None):
    """Run ``runs`` (from :func:`plan`) on ``data``, writing each record to
    ``OUT/runs/<key>.json`` as it finishes; skip runs with a record already.

    Parameters
    ----------
    workers : int or None
        0: in this process, serially; N: a LocalCluster of N worker
        processes; None: one per core (ignored with ``scheduler``/``client``).
    scheduler : str or None
        Address of an existing Dask scheduler.
    client : distributed.Client, optional
        An existing client (its cluster is used as is).
    skip_failed : bool
        Keep recorded failures instead of running them again.
    retries : int
        Reschedules of a run whose worker died (local cluster) and Dask
        ``retries=`` of a task.
    on_result : callable(record, records), optional
        Called in the driver after each new record is written; ``records``
        maps key -> record of every finished run so far.
    log : callable(str), optional
        Status lines (default: print to stdout).

    Returns
    -------
    (records, stats)
        ``records``: key -> record of every run that has one (in ``runs``
        order); ``stats``: counts (``reused``, ``ran``, ``failed``) and seconds.
    """
    runner = runner or train_run
    log = log or (lambda s: print(s, flush=True))
    out = Path(out)
    keys = [r.key for r in runs]
    lock = _lock(out)
    try:
        done = _read_finished(out, keys)
        if not skip_failed:
            done = {k: v for k, v in done.items() if v["status"] == "ok"}
        pending = [r for r in runs if r.key not in done]
        stats = {"runs": len(runs), "reused": len(done), "ran": 0, "failed": 0, "seconds": 0.0,
                 "engine": "in-process" if (workers == 0 and scheduler is None and client is None) else "dask"}
        if done:
            log(f"sweep: {len(done)} of {len(runs)} runs finished earlier (in {out / 'runs'}), {len(pending)} to run")
        t0 = time.perf_counter()
        if pending:
            bar = _bar(len(pending), progress)

            def record(rec):
                dio.atomic_write_text(out / "runs" / f"{rec['key']}.json", json.dumps(rec, indent=1, sort_keys=True))
                done[rec["key"]] = rec
                stats["ran"] += 1
                stats["failed"] += rec["status"] != "ok"
                line = _summary_line(rec)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"done {stats['ran'] - stats['failed']}, failed {stats['failed']}, "
                                        f"remaining {len(pending) - stats['ran']}")
                    bar.write(line, file=sys.stdout)
                else:
                    log(line)
                if on_result is not None:
                    on_result(rec, {k: done[k] for k in keys if k in done})

            try:
                if stats["engine"] == "in-process":
                    for r in pending:
                        record(execute(r.to_dict(), data, runner))
                else:
                    _run_dask(pending, data, runner, record, workers, scheduler, client, retries, connect_timeout,
                              log)
            finally:
                if bar is not None:
                    bar.close()
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        return {k: done[k] for k in keys if k in done}, stats
    finally:
        lock.close()


def _bar(total, enabled):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc="sweep", unit="run", file=sys.stderr, dynamic_ncols=True, smoothing=0.0)


def _run_dask(pending, data, runner, record, workers, scheduler, client, retries, connect_timeout, log):
    if client is not None:
        ctx = contextlib.nullcontext(client)
    else:
        ctx = dask_client(workers, scheduler, retries, connect_timeout, log)
    with ctx as c:
        from distributed import as_completed
        c.register_plugin(_worker_plugin())
        payload = c.scatter(data, broadcast=True, hash=False)
        by_future = {}
        for r in pending:
            f = c.submit(execute, r.to_dict(), payload, runner, key=f"dynnets-run-{r.key}", pure=False,
                         retries=retries)
            by_future[f] = r
        try:
            for f in as_completed(list(by_future)):
                run = by_future[f]
                if f.status == "finished":
                    rec = f.result()
                else:                      # the scheduler gave up on it (e.g. KilledWorker)
                    rec = _lost_record(run.to_dict(), f.exception())
                record(rec)
                f.release()
        finally:
            c.cancel([f for f in by_future if not f.done()])


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


def _mean_std(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": statistics.mean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else None, "n": len(xs)}


def aggregate(runs, records):
    """Mean and sample standard deviation (ddof=1) over seeds of every
    (model, setting) group, in grid order.

    Each group: ``name``, ``label``, ``kind``, ``axes``, ``seeds`` (of finished
    runs), ``failed`` (seeds), per split present ``dev``/``test`` -> metric ->
    ``{mean, std, n}``, ``best_epoch`` (list), ``seconds`` (mean, max),
    ``sent_per_s``.
    """
    groups = {}
    for r in runs:
        g = groups.setdefault((r.name, json.dumps(r.axes, sort_keys=True)),
                              {"name": r.name, "label": r.label, "kind": r.kind, "axes": r.axes, "runs": []})
        g["runs"].append(records.get(r.key))
    out = []
    for g in groups.values():
        ok = [rec for rec in g["runs"] if rec is not None and rec["status"] == "ok"]
        s = {k: g[k] for k in ("name", "label", "kind", "axes")}
        s["seeds"] = [rec["seed"] for rec in ok]
        s["failed"] = [rec["seed"] for rec in g["runs"] if rec is not None and rec["status"] != "ok"]
        s["missing"] = sum(rec is None for rec in g["runs"])
        for split in ("dev", "test"):
            if ok and all(split in rec["result"] for rec in ok):
                s[split] = {m: _mean_std([rec["result"][split].get(m) for rec in ok]) for m, _ in _METRICS}
        s["best_epoch"] = [rec["result"].get("best_epoch") for rec in ok]
        secs = [rec["seconds"] for rec in ok if rec.get("seconds") is not None]
        s["seconds"] = {"mean": statistics.mean(secs) if secs else None, "max": max(secs) if secs else None}
        s["sent_per_s"] = _mean_std([rec["result"].get("sent_per_s") for rec in ok])
        out.append(s)
    return out


def _pm(d):
    if d is None or d["mean"] is None:
        return "-"
    if d["std"] is None:
        return f"{100 * d['mean']:.2f}"
    return f"{100 * d['mean']:.2f} ± {100 * d['std']:.2f}"


def _fmt_value(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


def markdown(groups, title=None, notes=()):
    """The results table (markdown): one row per group, dev (and test)
    accuracy as mean ± sample std over seeds."""
    splits = [s for s in ("dev", "test") if any(s in g for g in groups)]
    metrics = [(m, lab) for m, lab in _METRICS if any(g.get(s, {}).get(m, {}).get("n") for g in groups for s in splits)]
    with_axes = any(g["axes"] for g in groups)
    head = ["model"] + (["settings"] if with_axes else []) + ["seeds"]
    head += [f"{s} {lab} %" for s in splits for _, lab in metrics] + ["best epochs", "time per run (mean / max)"]
    rows = [head]
    for g in groups:
        n = len(g["seeds"])
        seeds = str(n) + (f" ({len(g['failed'])} failed)" if g["failed"] else "") + \
            (f" ({g['missing']} to run)" if g["missing"] else "")
        row = [g["label"]] + ([", ".join(f"{k}={_fmt_value(v)}" for k, v in g["axes"].items()) or "-"]
                              if with_axes else []) + [seeds]
        row += [_pm(g[s][m]) if s in g else "-" for s in splits for m, _ in metrics]
        row.append(", ".join(_fmt_value(e) for e in g["best_epoch"]) or "-")
        sec = g["seconds"]
        row.append("-" if sec["mean"] is None else
                   (f"{sec['mean']:.1f} / {sec['max']:.1f} s" if sec["max"] < 120 else
                    f"{sec['mean'] / 60:.1f} / {sec['max'] / 60:.1f} min"))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    parts = ([f"# {title}", ""] if title else []) + [*notes, ""] if (title or notes) else []
    return "\n".join(parts + lines) + "\n"


def _machine():
    return {"python": platform.python_version(), "system": platform.system(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def _plot(groups, path):
    """Bars of dev (and test) fine and binary accuracy per group, with the std over seeds."""
    from .plots.figures import sweep_figure
    names = [g["label"] + ("" if not g["axes"] else " " + ",".join(f"{k}={_fmt_value(v)}" for k, v in
                                                                     g["axes"].items())) for g in groups]
    return sweep_figure(groups, names, _METRICS[:2], path)


def write_results(out, runs, records, data, grid=None, command=None, title=None, notes=(), extra=None):
    """Write ``OUT/results.json`` and ``OUT/results.md``; returns the result dict."""
    out = Path(out)
    groups = aggregate(runs, records)
    res = {"format": SWEEP_FORMAT, "command": command, "data": {"name": data.name, "key": data.key,
                                                                "splits": {k: len(v) for k, v in data.splits().items()},
                                                                "max_sentences": data.max_sentences},
           "grid": grid.to_dict() if grid is not None else None, "machine": _machine(),
           "seeds": sorted({r.seed for r in runs}),
           "complete": all(r.key in records for r in runs),
           "runs": [dict(records[r.key], config={"model": r.model, "train": r.train, "vocab": r.vocab})
                    for r in runs if r.key in records],
           "groups": groups, **(extra or {})}
    dio.atomic_write_text(out / "results.json", json.dumps(_plain(res), indent=1, sort_keys=True))
    dio.atomic_write_text(out / "results.md", markdown(groups, title, notes))
    return res


def sweep(grid, out, *, workers=None, scheduler=None, client=None, progress=True, skip_failed=False, retries=2,
          connect_timeout=10.0, plots=True, command=None, title=None, notes=(), log=None):
    """Run a :class:`Grid` into the folder ``out`` (see the module docstring).

    Returns
    -------
    dict
        What ``OUT/results.json`` holds (``runs``, ``groups``, ...), plus
        ``files`` (written) and ``stats`` (see :func:`run_all`).
    """
    log = log or (lambda s: print(s, flush=True))
    data = load_data(grid.data, grid.max_sentences)
    runs = plan(grid, data)
    sizes = ", ".join(f"{len(v)} {k}" for k, v in data.splits().items())
    log(f"sweep: {len(runs)} runs ({len(grid.models)} model{'s' if len(grid.models) != 1 else ''} x settings x "
        f"{len(grid.seeds)} seed{'s' if len(grid.seeds) != 1 else ''}) on {data.name} ({sizes} trees) into {out}")
    title = title or "Sweep results"
    notes = list(notes) or [f"`{command}`" if command else "", "",
                            "Mean ± sample standard deviation over seeds; dev figures are of the checkpoint dev "
                            "selected (optimistic)" + ("; test figures are held out." if "test" in data.splits()
                                                       else "; this data has no test split.")]

    def update(rec, records):
        write_results(out, runs, records, data, grid, command, title, notes)

    records, stats = run_all(runs, data, out, workers=workers, scheduler=scheduler, client=client, progress=progress,
                             skip_failed=skip_failed, retries=retries, connect_timeout=connect_timeout,
                             on_result=update, log=log)
    res = write_results(out, runs, records, data, grid, command, title, notes)
    files = [Path(out) / "results.json", Path(out) / "results.md"]
    if plots and res["groups"]:
        from .plots.figures import have_matplotlib
        if have_matplotlib():
            _plot(res["groups"], Path(out) / "accuracy.png")
            files.append(Path(out) / "accuracy.png")
        else:
            log("sweep: plots skipped: matplotlib is not installed (pip install 'dynnets[plot]')")
    res["files"] = [str(f) for f in files]
    res["stats"] = stats
    return res


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
