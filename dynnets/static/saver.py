"""``train.Saver``: checkpoints of a session's variables, with TF1's names.

    saver = tf.train.Saver(max_to_keep=3)
    path = saver.save(sess, "run/model.ckpt", global_step=step)   # "run/model.ckpt-<step>"
    saver.restore(sess, tf.train.latest_checkpoint("run"))

A checkpoint ``<prefix>`` is the file ``<prefix>.npz`` (written by
:func:`dynnets.io.save`, so atomically: a crash leaves the old file or the
new one), holding ``{"format": "dynnets.checkpoint", "version": 1,
"global_step": int or None, "variables": {name: array}}``, and, unless
``write_meta_graph=False``, ``<prefix>.meta``: the graph in the format of
:mod:`dynnets.static.export`, which :func:`import_meta_graph`
rebuilds without the code that made it (a graph the format cannot hold,
such as a traced function's, saves with ``write_meta_graph=False``).

The folder's index, the file ``checkpoint`` (TF1's name), is JSON
(``{"format": "dynnets.checkpoint_index", "version": 1,
"model_checkpoint_path": "model.ckpt-300", "all_model_checkpoint_paths":
[... oldest first]}``, paths relative to the folder), written atomically
after the checkpoint; checkpoints beyond ``max_to_keep`` are deleted after
the index no longer lists them, so at every moment the index names files
that exist. Unlike TF1, whose Saver starts an empty list in every process
(earlier runs' checkpoints then stay forever), a Saver continues the index it
finds in the folder.

``restore`` checks every variable before it changes any: a variable that the
checkpoint lacks or holds with another shape or dtype raises
:class:`CheckpointMismatchError` listing all differences (and the
checkpoint's names the graph lacks, which are otherwise ignored as in TF1,
where a checkpoint may hold more than an inference graph needs;
``strict=True`` refuses them too).
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np

from ..io import NotACheckpointError, atomic_write_text
from ..io import load as _load_state
from ..io import save as _save_state
from .export import build_graph_def, export_meta_graph, to_graph_def
from .graph import GraphError, Value, Variable, get_default_graph

__all__ = ["Saver", "latest_checkpoint", "get_checkpoint_state", "CheckpointState", "CheckpointMismatchError",
           "checkpoint_exists", "import_meta_graph", "list_variables", "load_variable"]

CKPT_FORMAT = "dynnets.checkpoint"
INDEX_FORMAT = "dynnets.checkpoint_index"
VERSION = 1
INDEX_NAME = "checkpoint"


class CheckpointMismatchError(ValueError):
    """The checkpoint's variables differ from the graph's: ``missing`` (names
    the checkpoint lacks), ``unexpected`` (names only the checkpoint has),
    ``mismatched`` ((name, checkpoint (shape, dtype), graph (shape, dtype)))."""

    def __init__(self, msg, missing=(), unexpected=(), mismatched=()):
        super().__init__(msg)
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)


class CheckpointState:
    """The folder's index (as TF1's ``CheckpointState``): paths joined with the folder."""

    def __init__(self, model_checkpoint_path, all_model_checkpoint_paths):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)

    def __repr__(self):
        return (f"CheckpointState(model_checkpoint_path={self.model_checkpoint_path!r}, "
                f"all_model_checkpoint_paths={self.all_model_checkpoint_paths!r})")


def _data_file(prefix):
    return f"{prefix}.npz"


def _meta_file(prefix):
    return f"{prefix}.meta"


def checkpoint_exists(prefix):
    """Whether a checkpoint ``prefix`` (or the file ``prefix.npz``) exists."""
    p = str(prefix)
    return os.path.isfile(_data_file(p)) or (p.endswith(".npz") and os.path.isfile(p))


def _read_index(folder, latest_filename=None):
    """The index's relative paths (oldest first), or None when there is none."""
    path = Path(folder) / (latest_filename or INDEX_NAME)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NotACheckpointError(f"{path}: not a dynnets checkpoint index (not JSON: {e}); remove it or write "
                                  f"checkpoints elsewhere") from None
    if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT:
        fmt = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise NotACheckpointError(f"{path}: not a dynnets checkpoint index (format {fmt!r}, expected "
                                  f"{INDEX_FORMAT!r}; TF1's text index is another format)")
    v = doc.get("version")
    if type(v) is not int or not 1 <= v <= VERSION:
        raise NotACheckpointError(f"{path}: checkpoint index version {v!r}; this dynnets reads versions 1 to "
                                  f"{VERSION}")
    paths, latest = doc.get("all_model_checkpoint_paths"), doc.get("model_checkpoint_path")
    if not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)
            and (latest is None or isinstance(latest, str))):
        raise NotACheckpointError(f"{path}: 'all_model_checkpoint_paths' must be a list of paths and "
                                  f"'model_checkpoint_path' a path")
    if latest is not None and latest not in paths:
        paths = paths + [latest]
    return paths, latest


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
    """The :class:`CheckpointState` of the folder's index, or None without one."""
    r = _read_index(checkpoint_dir, latest_filename)
    if r is None:
        return None
    paths, latest = r
    j = lambda p: os.path.join(str(checkpoint_dir), p)      # noqa: E731  absolute paths stay as they are
    return CheckpointState(j(latest) if latest is not None else None, [j(p) for p in paths])


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The newest checkpoint prefix the folder's index lists, or None (no
    index, or its file is gone), as ``tf.train.latest_checkpoint``."""
    st = get_checkpoint_state(checkpoint_dir, latest_filename)
    if st is None or st.model_checkpoint_path is None or not checkpoint_exists(st.model_checkpoint_path):
        return None
    return st.model_checkpoint_path


class Saver:
    """Saves and restores variables (as ``tf.train.Saver``).

    Parameters
    ----------
    var_list : list of Variable, dict {name: Variable}, or None
        What to save, under the variables' names (or the dict's keys). None:
        every variable of the session's graph at the time of each
        ``save``/``restore`` (so a Saver may be made before the graph is done).
    max_to_keep : int or None
        Checkpoints kept in the index; older ones are deleted. None or 0 keeps all.

    The arguments are TF1's, in TF1's order; ``reshape=True`` and
    ``keep_checkpoint_every_n_hours`` (checkpoints kept besides the last
    ``max_to_keep``) are not supported (an error), the others are accepted and
    change nothing.
    """

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name="save", restore_sequentially=False, saver_def=None,
                 builder=None, defer_build=False, allow_empty=False, write_version=None, pad_step_number=False,
                 save_relative_paths=False, filename=None):
        if reshape:
            raise ValueError("Saver: reshape=True (restoring into variables of another shape) is not supported")
        if keep_checkpoint_every_n_hours != 10000.0:
            raise ValueError("Saver: keep_checkpoint_every_n_hours is not supported (only the last max_to_keep "
                             "checkpoints are kept)")
        if saver_def is not None:
            raise ValueError("Saver: saver_def= is not supported")
        if var_list is not None:
            items = var_list.items() if isinstance(var_list, dict) else [(getattr(v, "name", None), v)
                                                                         for v in var_list]
            d = {}
            for k, v in items:
                if not isinstance(v, Variable):
                    raise TypeError(f"Saver: var_list holds {v!r:.60}, not a Variable")
                if not isinstance(k, str) or not k:
                    raise TypeError(f"Saver: checkpoint names must be non-empty strings, got {k!r}")
                if k in d:
                    raise ValueError(f"Saver: two variables are named {k!r} in var_list")
                d[k] = v
            if not d:
                raise ValueError("Saver: var_list is empty")
            var_list = d
        if max_to_keep is not None and (type(max_to_keep) is not int or max_to_keep < 0):
            raise ValueError(f"Saver: max_to_keep must be a non-negative int or None, got {max_to_keep!r}")
        self._var_list = var_list
        self.max_to_keep = max_to_keep or None
        self.name = name
        self._last = None           # (folder, [prefixes oldest first]) of the index this Saver continues

    @property
    def last_checkpoints(self):
        """The prefixes this Saver keeps (oldest first)."""
        return list(self._last[1]) if self._last is not None else []

    def _variables(self, sess, who):
        if self._var_list is None:
            return {v.name: v for v in sess.graph.variables if not v.local}   # TF1: global variables only
        for k, v in self._var_list.items():
            if v.graph is not sess.graph:
                raise GraphError(f"Saver.{who}: variable '{v.name}' belongs to another graph than the session's")
        return self._var_list

    def save(self, sess, save_path, global_step=None, latest_filename=None, meta_graph_suffix="meta",
             write_meta_graph=True, write_state=True, strip_default_attrs=False, save_debug_info=False):
        """Write a checkpoint of the variables' values in ``sess``; returns its
        prefix, ``save_path`` or ``save_path-<global_step>`` (an int, or a
        Variable/Value evaluated in ``sess``). TF1's arguments in TF1's order;
        another ``latest_filename`` or ``meta_graph_suffix``, and
        ``write_state=False``, are not supported (an error)."""
        if latest_filename is not None or meta_graph_suffix != "meta" or not write_state:
            raise ValueError("Saver.save: latest_filename, meta_graph_suffix and write_state=False are not supported "
                             "(the index is the folder's 'checkpoint' file, the meta graph '<prefix>.meta')")
        vars = self._variables(sess, "save")
        step = None
        if global_step is not None:
            raw = sess.run(global_step) if isinstance(global_step, Value) else global_step
            if np.ndim(raw) != 0 or not float(raw).is_integer():
                raise ValueError(f"Saver.save: global_step must be an integer, got {raw!r}")
            step = int(raw)
        prefix = f"{os.fspath(save_path)}-{step}" if step is not None else os.fspath(save_path)
        if prefix.endswith(os.sep) or not os.path.basename(prefix):
            raise ValueError(f"Saver.save: save_path {str(save_path)!r} names a folder; give a file prefix, "
                             f"e.g. {os.path.join(str(save_path), 'model.ckpt')!r}")
        values = {k: sess.variable_value(v) for k, v in vars.items()}
        _save_state({"format": CKPT_FORMAT, "version": VERSION, "global_step": step, "variables": values},
                    _data_file(prefix))
        if write_meta_graph:
            export_meta_graph(_meta_file(prefix), graph=sess.graph)
        self._update_index(prefix)
        return prefix

    def _update_index(self, prefix):
        folder = os.path.dirname(prefix) or "."
        if self._last is None or self._last[0] != os.path.abspath(folder):
            found = _read_index(folder)
            kept = [] if found is None else [os.path.join(folder, p) if not os.path.isabs(p) else p
                                             for p in found[0]]
            self._last = (os.path.abspath(folder), [p for p in kept if checkpoint_exists(p)])
        last = [p for p in self._last[1] if os.path.abspath(p) != os.path.abspath(prefix)] + [prefix]
        drop = []
        if self.max_to_keep is not None and len(last) > self.max_to_keep:
            drop, last = last[:-self.max_to_keep], last[-self.max_to_keep:]
        here = os.path.abspath(folder)
        rel = [os.path.relpath(p, folder) if os.path.dirname(os.path.abspath(p)) == here else os.path.abspath(p)
               for p in last]
        atomic_write_text(os.path.join(folder, INDEX_NAME), json.dumps(
            {"format": INDEX_FORMAT, "version": VERSION, "model_checkpoint_path": rel[-1],
             "all_model_checkpoint_paths": rel}, indent=1) + "\n")
        # deleted only once the index no longer names them
        for p in drop:
            for f in (_data_file(p), _meta_file(p)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f)
        self._last = (self._last[0], last)

    def restore(self, sess, save_path, strict=False):
        """Set the variables in ``sess`` to the checkpoint ``save_path`` (a
        prefix from :meth:`save` or :func:`latest_checkpoint`, or its ``.npz``
        file). Checks everything first (see the module docstring); ``strict``
        also refuses checkpoint names the graph lacks."""
        if save_path is None:
            raise ValueError("Saver.restore: save_path is None (latest_checkpoint found no checkpoint?)")
        path, stored = _read_checkpoint(save_path, "Saver.restore")
        vars = self._variables(sess, "restore")
        missing = [k for k in vars if k not in stored]
        unexpected = [k for k in stored if k not in vars]
        mismatched = []
        for k, var in vars.items():
            a = stored.get(k)
            if a is not None and (tuple(a.shape) != tuple(var.shape) or a.dtype != var.dtype):
                mismatched.append((k, (tuple(a.shape), a.dtype), (tuple(var.shape), var.dtype)))
        if missing or mismatched or (strict and unexpected):
            parts = []
            if missing:
                parts.append("not in the checkpoint: " + ", ".join(repr(k) for k in missing))
            for k, (cs, cd), (gs, gd) in mismatched:
                what = "shape" if cs != gs else "dtype"
                parts.append(f"{what} mismatch for {k!r}: the checkpoint has {cs} {cd}, the graph {gs} {gd}")
            if unexpected:
                parts.append("in the checkpoint only: " + ", ".join(repr(k) for k in unexpected))
            raise CheckpointMismatchError(f"Saver.restore: {path} does not match the graph's variables: "
                                          + "; ".join(parts), missing, unexpected, mismatched)
        for k, var in vars.items():
            var.load(stored[k], sess)

    def export_meta_graph(self, filename=None, graph=None, collection_list=None, as_text=False):
        """:func:`dynnets.static.export.export_meta_graph` of ``graph`` (default: the default graph)."""
        return export_meta_graph(filename, graph if graph is not None else get_default_graph(), collection_list,
                                 as_text)


def _read_checkpoint(save_path, who):
    """(file, {name: array}) of checkpoint ``save_path`` (a prefix or its ``.npz`` file), checked."""
    p = os.fspath(save_path)
    path = p if p.endswith(".npz") and os.path.isfile(p) else _data_file(p)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{who}: no checkpoint {p!r} (no file {path})")
    state = _load_state(path)
    if not isinstance(state, dict) or state.get("format") != CKPT_FORMAT:
        raise NotACheckpointError(f"{who}: {path} is a dynnets file but not a Saver checkpoint "
                                  f"(dynnets.io.load reads it)")
    v = state.get("version")
    if type(v) is not int or not 1 <= v <= VERSION:
        raise NotACheckpointError(f"{who}: {path} has checkpoint version {v!r}; this dynnets reads "
                                  f"versions 1 to {VERSION}")
    stored = state.get("variables")
    if not isinstance(stored, dict) or not all(isinstance(a, np.ndarray) for a in stored.values()):
        raise NotACheckpointError(f"{who}: {path} has no variables table of arrays")
    return path, stored


def _checkpoint_of(ckpt_dir_or_file, who):
    if os.path.isdir(ckpt_dir_or_file):
        found = latest_checkpoint(ckpt_dir_or_file)
        if found is None:
            raise FileNotFoundError(f"{who}: no checkpoint in the folder {ckpt_dir_or_file!r}")
        return found
    return ckpt_dir_or_file


def list_variables(ckpt_dir_or_file):
    """``[(name, shape)]`` of a checkpoint's variables, sorted by name (as
    ``tf.train.list_variables``; a folder means its latest checkpoint)."""
    _, stored = _read_checkpoint(_checkpoint_of(ckpt_dir_or_file, "list_variables"), "list_variables")
    return [(k, list(stored[k].shape)) for k in sorted(stored)]


def load_variable(ckpt_dir_or_file, name):
    """The value of variable ``name`` in a checkpoint (``tf.train.load_variable``)."""
    _, stored = _read_checkpoint(_checkpoint_of(ckpt_dir_or_file, "load_variable"), "load_variable")
    if name not in stored:
        raise KeyError(f"load_variable: the checkpoint has no variable {name!r} (it has {sorted(stored)})")
    return stored[name].copy()


def import_meta_graph(meta_graph_or_file, import_scope=None, graph=None):
    """Rebuild a meta graph's nodes in ``graph`` (default: the default graph),
    its names under ``import_scope + "/"`` when given, and return a
    :class:`Saver` over its variables (as ``tf.train.import_meta_graph``):
    ``saver.restore(sess, path)`` next; None when the graph has no
    variables, as TF1."""
    gd = to_graph_def(meta_graph_or_file, "import_meta_graph")
    g = graph if graph is not None else get_default_graph()
    new = build_graph_def(gd, g, f"{import_scope}/" if import_scope else "")
    # keyed by the names in the file, which the checkpoints saved with it use
    found = {gd.doc["values"][i]["name"]: v for i, v in enumerate(new) if isinstance(v, Variable)}
    return Saver(found) if found else None
