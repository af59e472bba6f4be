"""The grid of a sweep: values, seeds and ``--set`` settings, grid files (TOML or
JSON) and :func:`build_grid` (see :mod:`dynnets.sweep`)."""
from __future__ import annotations

import dataclasses
import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path


SWEEP_FORMAT = "dynnets.sweep/1"
#: environment of a local cluster's worker processes (set before each starts)
WORKER_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
VOCAB_SETTINGS = {"lowercase": True, "min_freq": 1}
#: TrainConfig fields a grid does not set: the seed comes from the grid's seeds; runs write no files, show no bars


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
