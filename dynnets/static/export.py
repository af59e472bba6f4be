"""Graphs without the Python code that built them: :class:`GraphDef`, the
graph file format, :func:`write_graph` / :func:`import_graph_def` and
:func:`export_meta_graph` (TF1's names; ``import_meta_graph`` is in :mod:`.saver`).

A :class:`GraphDef` is a graph as data: JSON-able structure (``doc``) and
numpy arrays (``arrays``). It is made from a :class:`Graph` by
:func:`as_graph_def` (``graph.as_graph_def()``), frozen by
:func:`dynnets.static.graph_util.convert_variables_to_constants`, written by
:func:`write_graph` and turned back into nodes of a graph by
:func:`import_graph_def`. A *meta graph* is the same with the optimizers and
collections too, so a training graph can be rebuilt and trained on.

The file format (version 1)
---------------------------
One zip archive (stored, not compressed; written atomically by
:func:`dynnets.io.atomic_write`; ``unzip -p FILE graph.json`` shows it) with
the members

``graph.json``
    the structure, UTF-8 JSON::

        {"format": "dynnets.graph", "version": 1, "kind": "graph_def" | "meta_graph",
         "producer": "dynnets 0.1.0",
         "values": [{"name": "x", "shape": [null, 3], "dtype": "float32", "sparse": false}, ...],
                   (a shape of null: an unknown rank)
         "nodes":  [{"op": "matmul", "name": "matmul", "inputs": [0, 1], "outputs": [2],
                     "attrs": {}}, ...],
         "placeholders": [0],
         "optimizers": [{"class": "AdamOptimizer", "config": {...}, "slots": [[1, {"m": 7, "v": 8}]],
                         "step": 9}],
         "subgraphs": {"g0": {"parent": null, "values": [...], "nodes": [...], "placeholders": [],
                              "inputs": [0, 1], "outputs": [5], "captures": [[1, 1]]}, ...},
         "collections": {"train_op": [17]}}        (meta graphs only)

    Values are numbered ``0..n-1``; each is the output of exactly one node,
    and a node's inputs are outputs of nodes before it (so ``nodes`` is a
    topological order). ``op`` is a primitive's name, looked up in the
    shared primitive table or the static graph's own primitives (sources,
    effects, gradient sums, control flow); a gradient node also has
    ``"vjp": {"of": "lstm_cell", "input": 0 | null, "sparse": false}``.
    ``"operation": true`` marks a node run for its effect; ``"nograd":
    true`` the primitive without a gradient of a pair sharing its name
    (``while`` built with ``back_prop=False``). Sources have
    ``op`` ``placeholder`` (its shape and dtype are its value's), ``variable``
    (attrs ``initial_value``, ``trainable``) and ``constant`` (attr
    ``value``). ``dtype`` is a numpy dtype name, ``null`` for an effect's
    result, ``"weak int"`` (``float``, ``bool``) for a Python scalar
    constant, ``"object"`` for the None constant of a missing gradient.
    A loop body or condition or a ``cond`` branch is an entry of
    ``subgraphs`` with the same ``values``/``nodes``/``placeholders`` in
    ids of its own, its ``inputs`` and ``outputs`` (the function it is),
    ``captures`` (pairs [value id in the enclosing graph, its placeholder
    here]) and ``parent`` (the enclosing subgraph's key, ``null`` for the
    file's graph).
``arrays/<key>.npy``
    every array, in numpy's ``.npy`` format (no object arrays).

An attribute is JSON: ``null``, booleans, numbers (``{"float": "nan"}``,
``"inf"``, ``"-inf"`` where JSON has none), strings, lists, or one of the
tagged objects ``{"tuple": [...]}``, ``{"slice": [start, stop, step]}``,
``{"ellipsis": true}``, ``{"dtype": "int64"}``, ``{"aval": [shape, dtype]}``,
``{"array": key}`` (a ``.npy`` member; ``"item": true`` for a numpy
scalar), ``{"value": id}`` (a Variable of the graph), ``{"optimizer": k}``
(an entry of ``optimizers``: its class, constructor arguments and slot
variables), ``{"subgraph": key}``.

Nothing in a file is executed: arrays are read with ``allow_pickle=False``,
primitives and optimizer classes are looked up by name in fixed tables, and
every node's shape rule (which is also its input check) runs again on
import and must give the shapes and dtypes the file declares, so a file
that lies about shapes is refused before a kernel sees it. A damaged
(checksums are verified), truncated, foreign or newer-version file raises
:class:`GraphFormatError` naming the file and what is wrong; a reader of
version ``v`` refuses versions above ``v`` and a change to the format that
an older reader would misread raises :data:`VERSION`.

What a file cannot hold (:class:`ExportError`): live parameters of traced
functions (freeze a graph built from Variables instead), primitives defined
outside the table, optimizer subclasses, attributes of other types.

The code is in ``dynnets.static.graphdef``, by concern: ``format`` (the
GraphDef, the file, the structural checks), ``names`` (how a file names a
primitive), ``optimizers`` (optimizers and their state in a file),
``encode`` (graph -> GraphDef) and ``build`` (GraphDef -> graph); this
module is TF1's API over them, and every name above is importable from here.
"""
from __future__ import annotations

from pathlib import Path

from .graphdef.build import build_graph_def, import_graph_def, to_graph_def, value_ids
from .graphdef.encode import as_graph_def
from .graphdef.format import FORMAT, VERSION, ExportError, GraphDef, GraphFormatError, read_graph_def, write_file
from .graphdef.optimizers import register_optimizer

__all__ = ["GraphDef", "GraphFormatError", "ExportError", "FORMAT", "VERSION", "as_graph_def", "write_graph",
           "read_graph_def", "import_graph_def", "export_meta_graph", "to_graph_def", "value_ids", "build_graph_def",
           "register_optimizer"]


def write_graph(graph_or_graph_def, logdir, name, as_text=True):
    """Write a graph (or :class:`GraphDef`) to ``logdir/name`` in the graph
    format (as ``tf.train.write_graph``); ``as_text`` indents the JSON
    member. Returns the path."""
    gd = graph_or_graph_def if isinstance(graph_or_graph_def, GraphDef) else as_graph_def(graph_or_graph_def)
    path = Path(logdir) / name
    write_file(path, gd, as_text)
    return str(path)


def export_meta_graph(filename=None, graph=None, collection_list=None, as_text=False):
    """The whole graph as a meta graph (:class:`GraphDef` with its collections
    and optimizers), written to ``filename`` when given (as
    ``tf.train.export_meta_graph``). A graph imported from it trains on."""
    gd = as_graph_def(graph, meta=True, collection_list=collection_list)
    if filename is not None:
        write_file(Path(filename), gd, as_text)
    return gd
