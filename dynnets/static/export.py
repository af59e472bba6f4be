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
"""
from __future__ import annotations

import json
import math
import sys
import zipfile
from pathlib import Path

import numpy as np

from .. import __version__
from ..autograd.primitives import PRIMITIVES, Aval, run_rule
from ..io import atomic_write
from .backward import VjpPrimitive, vjp_primitive
from .graph import (Graph, Operation, StaticPrimitive, Value, Variable, constant_p, get_default_graph, param_p,
                    placeholder_p, variable_p)

__all__ = ["GraphDef", "GraphFormatError", "ExportError", "FORMAT", "VERSION", "as_graph_def", "write_graph",
           "read_graph_def", "import_graph_def", "export_meta_graph", "to_graph_def", "value_ids", "build_graph_def",
           "register_optimizer"]

FORMAT = "dynnets.graph"
VERSION = 1
_JSON_MEMBER = "graph.json"
_ARRAY_DIR = "arrays/"


class GraphFormatError(ValueError):
    """A graph file or :class:`GraphDef` that is damaged, foreign, of a newer
    format version, or inconsistent (names the file and what is wrong)."""


class ExportError(ValueError):
    """A graph holding something the format cannot store (a live parameter,
    a primitive outside the tables, an attribute of another type)."""


_OPTIMIZERS: dict = {}      # class name -> (class, the constructor arguments that rebuild it)
_DTYPE_KINDS = "biufc"
_WEAK = {bool: "weak bool", int: "weak int", float: "weak float"}
_TABLE: dict = {}


def _scan():
    """name -> {differentiable: primitive} of the static graph's own
    primitives: every StaticPrimitive at module level (or in a module-level
    dict) of the loaded ``dynnets.static`` modules, so a primitive is
    exportable where it is defined. A name may stand for two primitives that
    differ only in having a gradient (``while`` with and without
    ``back_prop``); a name shared otherwise, or with the table, is unusable
    (``None``)."""
    found = {}
    for modname, mod in list(sys.modules.items()):
        if mod is None or not (modname == __package__ or modname.startswith(__package__ + ".")):
            continue
        for v in list(vars(mod).values()):
            for x in (v.values() if type(v) is dict else (v,)):
                if isinstance(x, StaticPrimitive) and not isinstance(x, VjpPrimitive):
                    found[id(x)] = x
    table = {}
    for p in found.values():
        slot = table.setdefault(p.name, {})
        if slot is None:
            continue
        if p.name in PRIMITIVES or bool(p.differentiable) in slot:
            table[p.name] = None
        else:
            slot[bool(p.differentiable)] = p
    _TABLE.clear()
    _TABLE.update(table)


def _slot(name):
    """``{differentiable: primitive}`` for a static primitive's name (None:
    no such name, or an unusable one); a name not seen yet scans the loaded
    modules once more."""
    if name not in _TABLE:
        _scan()
    return _TABLE.get(name)


def _exportable(p):
    """How a file names primitive ``p``: ``(name, nograd)``, or None when it cannot."""
    if PRIMITIVES.get(p.name) is p:
        return p.name, False
    slot = _TABLE.get(p.name)
    if not slot or slot.get(bool(p.differentiable)) is not p:
        _scan()
        slot = _TABLE.get(p.name)
    if not slot or slot.get(bool(p.differentiable)) is not p:
        return None
    return p.name, (not p.differentiable and True in slot)


def _resolve(name, nograd=False):
    """The primitive a file's op name stands for (the one without a gradient
    of a pair when ``nograd``), or None."""
    if not isinstance(name, str):
        return None
    p = PRIMITIVES.get(name)
    if p is not None:
        return p
    slot = _slot(name)
    if not slot:
        return None
    return slot.get(False) if nograd else slot.get(True, slot.get(False))


def register_optimizer(cls, fields):
    """Let files hold optimizers of class ``cls`` (exactly; not subclasses):
    ``fields`` are its constructor's arguments, read back as attributes of
    an instance; its slot variables are its ``_slots`` (and Adam's
    ``_step``). :mod:`.train` registers its optimizers."""
    _OPTIMIZERS[cls.__name__] = (cls, tuple(fields))


def _vjp_source(p):
    """``(primitive name, input or None, sparse)`` of a gradient primitive,
    read from its name and confirmed by building it again."""
    sparse = p.name.startswith("sparse_vjp_")
    rest = p.name[len("sparse_vjp_" if sparse else "vjp_"):]
    cands = [(rest, None)]
    head, _, tail = rest.rpartition("_")
    if tail.isdigit():
        cands.append((head, int(tail)))
    for of, i in cands:
        q = _resolve(of)
        if q is not None and q.differentiable and vjp_primitive(q, i, sparse) is p:
            return of, i, sparse
    return None


def _dtype_json(d):
    if d is None:
        return None
    if isinstance(d, np.dtype):
        return d.name
    return _WEAK.get(type(d), "weak")


def _aval_json(a):
    # an unknown rank (a placeholder made without a shape) is a null shape, as TF's unknown_rank
    shape = None if a.shape is None else [None if d is None else int(d) for d in a.shape]
    return shape, _dtype_json(a.dtype)


class GraphDef:
    """A graph as data, self-contained: ``doc`` (the JSON structure described
    in :mod:`dynnets.static.export`) and ``arrays`` (key -> ndarray).

    Made by ``graph.as_graph_def()`` (:func:`as_graph_def`),
    :func:`export_meta_graph`, :func:`read_graph_def` and
    :func:`~dynnets.static.graph_util.convert_variables_to_constants`; read
    back into a graph by :func:`import_graph_def`."""

    def __init__(self, doc, arrays, source="<GraphDef>"):
        self.doc = doc
        self.arrays = arrays
        self.source = source

    @property
    def kind(self):
        return self.doc["kind"]

    @property
    def node(self):
        """The nodes in order (TF1's ``graph_def.node``): dicts with ``op``,
        ``name``, ``inputs``, ``outputs`` (value ids) and ``attrs``."""
        return self.doc["nodes"]

    def value_names(self):
        return [v["name"] for v in self.doc["values"]]

    def write(self, path, as_text=False):
        """Write this GraphDef to ``path`` (atomically); ``as_text`` indents the JSON."""
        _write(Path(path), self, as_text)
        return str(path)

    def __repr__(self):
        ops = {}
        for n in self.doc["nodes"]:
            ops[n["op"]] = ops.get(n["op"], 0) + 1
        top = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:6])
        return f"<GraphDef {self.kind} from {self.source}: {len(self.doc['nodes'])} nodes ({top})>"


# --------------------------------------------------------------------------
# Graph -> GraphDef
# --------------------------------------------------------------------------


class _Encoder:
    """Encodes a graph and, through its attributes, its subgraphs (loop
    bodies, branches: one entry of ``subgraphs`` each, however many nodes
    name them), arrays and optimizers."""

    def __init__(self, root):
        self.root = root
        self.arrays = {}
        self._array_keys = {}
        self.optimizers = []
        self._opt_ids = {}
        self.subgraphs = {}
        self._sub_keys = {}
        self._ids = {}              # id(subgraph) -> {its value id: the file's}

    def array(self, a, where):
        hit = self._array_keys.get(id(a))
        if hit is not None:
            return hit[0]
        arr = np.asarray(a)
        if arr.dtype.kind not in _DTYPE_KINDS:
            raise ExportError(f"export: {where} is an array of dtype {arr.dtype}; the graph format stores only "
                              f"boolean and numeric arrays")
        k = f"a{len(self.arrays)}"
        self.arrays[k] = arr
        self._array_keys[id(a)] = (k, a)      # a kept alive, so its id is not reused
        return k

    def attr(self, x, where, g):
        tp = type(x)
        if x is None or tp is bool or tp is str or tp is int:
            return x
        if tp is float:
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(x, int) and tp is not bool:
            return int(x)        # an int subclass: a TF1 Dimension read from get_shape() into an attribute
        if tp is list:
            return [self.attr(v, where, g) for v in x]
        if tp is tuple:
            return {"tuple": [self.attr(v, where, g) for v in x]}
        if tp is Aval:
            shape, dt = _aval_json(x)
            return {"aval": [shape, dt]}
        if tp is slice:
            return {"slice": [self.attr(x.start, where, g), self.attr(x.stop, where, g), self.attr(x.step, where, g)]}
        if x is Ellipsis:
            return {"ellipsis": True}
        if isinstance(x, np.ndarray):
            return {"array": self.array(x, where)}
        if isinstance(x, np.generic):
            return {"array": self.array(np.asarray(x), where), "item": True}
        if isinstance(x, np.dtype):
            if x.kind not in _DTYPE_KINDS:
                raise ExportError(f"export: {where} is the dtype {x}; the graph format stores only boolean and "
                                  f"numeric dtypes")
            return {"dtype": x.name}
        if isinstance(x, Variable):
            if x.graph is not g:
                raise ExportError(f"export: {where} is the variable '{x.name}' of another graph")
            return {"value": self.vid(g, x.id)}
        if _OPTIMIZERS.get(tp.__name__, (None,))[0] is tp:
            return {"optimizer": self.optimizer(x, where, g)}
        if isinstance(x, Graph):
            return {"subgraph": self.subgraph(x, where, g)}
        raise ExportError(f"export: {where} holds a {tp.__name__} ({x!r:.60}), which the graph format cannot store "
                          f"(JSON values, tuples, slices, dtypes, avals, arrays, Variables, optimizers and "
                          f"subgraphs only)")

    def subgraph(self, sub, where, g):
        k = self._sub_keys.get(id(sub))
        if k is not None:
            return k[0]
        if sub.parent is not g:
            raise ExportError(f"export: {where} is a subgraph nested in another graph than the op's")
        k = f"g{len(self._sub_keys)}"
        self._sub_keys[id(sub)] = (k, sub)
        doc = self.graph(sub)
        doc["parent"] = None if g is self.root else self._sub_keys[id(g)][0]
        doc["inputs"] = [self.vid(sub, i) for i in sub.inputs]
        doc["outputs"] = [self.vid(sub, o) for o in sub.outputs]
        doc["captures"] = [[self.vid(g, outer.id), self.vid(sub, ph.id)] for outer, ph in sub.captures]
        self.subgraphs[k] = doc
        return k

    def optimizer(self, opt, where, g):
        k = self._opt_ids.get(id(opt))
        if k is not None:
            return k
        cname = type(opt).__name__
        cfg = {}
        for f in _OPTIMIZERS[cname][1]:
            v = getattr(opt, f)
            if isinstance(v, Value):
                if v.graph is not g:
                    raise ExportError(f"export: {where}: the optimizer's learning rate '{v.name}' is a value of "
                                      f"another graph")
                cfg[f] = {"value": self.vid(g, v.id)}
            else:
                cfg[f] = self.attr(v, f"{where}: optimizer {f}", g)
        slots = [[self.vid(g, var.id), {s: self.vid(g, sv.id) for s, sv in d.items()}]
                 for var, d in opt._slots.items() if var.graph is g]
        step = getattr(opt, "_step", {}).get(g)
        k = len(self.optimizers)
        self.optimizers.append({"class": cname, "config": cfg, "slots": slots,
                                "step": None if step is None else self.vid(g, step.id)})
        self._opt_ids[id(opt)] = k
        return k

    def node(self, e, g):
        p = e.prim
        where = f"op '{e.name}' ({p.name})"
        rec = {"op": p.name, "name": e.name, "inputs": [self.vid(g, i) for i in e.ins],
               "outputs": [self.vid(g, o) for o in e.outs]}
        if p is param_p:
            raise ExportError(f"export: {where} is a live parameter of a traced function (an eager tensor read "
                              f"at every run), which a file cannot hold; build the graph from Variables")
        if isinstance(p, VjpPrimitive):
            src = _vjp_source(p)
            if src is None:
                raise ExportError(f"export: {where}: a gradient primitive whose forward primitive is not in the table")
            rec["vjp"] = {"of": src[0], "input": src[1], "sparse": src[2]}
        else:
            named = _exportable(p)
            if named is None:
                raise ExportError(f"export: {where}: primitive '{p.name}' is neither in the primitive table nor one "
                                  f"module-level primitive of dynnets.static with that name, so a file could not "
                                  f"name it")
            if named[1]:
                rec["nograd"] = True
        if p is variable_p:
            var = e.attrs["var"]
            attrs = {"initial_value": {"array": self.array(var.initial_value, f"{where} initial_value")},
                     "trainable": var.trainable}
        else:
            attrs = {k: self.attr(v, f"{where} attribute {k!r}", g) for k, v in e.attrs.items()}
        rec["attrs"] = attrs
        if isinstance(g.values[e.outs[0]], Operation):
            rec["operation"] = True
        return rec

    def vid(self, g, i):
        """Value ``i`` of graph ``g`` as numbered in the file."""
        m = self._ids.get(id(g))
        return i if m is None else m[i]

    def graph(self, g):
        eqns = g.eqns
        if g.parent is not None:
            # a subgraph is the function inputs -> outputs: the nodes gradients
            # appended to it at run time are left out, so its entry does not
            # depend on what ran before the export
            eqns = _needed_eqns(g)
            m = {}
            for e in eqns:
                for o in e.outs:
                    m[o] = len(m)
            self._ids[id(g)] = m
        nodes = [self.node(e, g) for e in eqns]
        values = []
        for e in eqns:
            for o in e.outs:
                shape, dt = _aval_json(g.avals[o])
                v = g.values[o]
                values.append({"name": v.name, "shape": shape, "dtype": dt, "sparse": bool(v.sparse)})
        kept = {o for e in eqns for o in e.outs}
        return {"values": values, "nodes": nodes,
                "placeholders": [self.vid(g, v.id) for v in g.placeholders if v.id in kept]}


def _graph_as_graph_def(self):
    """This graph as a self-contained :class:`GraphDef` (see :mod:`dynnets.static.export`)."""
    return as_graph_def(self)


# installed from here because graph.py cannot import this module (it imports graph.py)
Graph.as_graph_def = _graph_as_graph_def


def _needed_eqns(g):
    """The equations of subgraph ``g`` its outputs need, and its inputs, in order."""
    prod = g.producers()
    need = set(g.inputs)
    stack = list(g.outputs)
    while stack:
        o = stack.pop()
        if o in need:
            continue
        need.add(o)
        stack.extend(prod[o].ins)
    need.update(ph.id for _, ph in g.captures)
    return [e for e in g.eqns if any(o in need for o in e.outs)]


def as_graph_def(graph=None, meta=False, collection_list=None):
    """``graph`` (default: the default graph) as a :class:`GraphDef`: every
    node, with variables' initial values, the optimizers of its train ops and
    its loops' and conds' subgraphs; with ``meta``, its collections too (all,
    or those in ``collection_list``)."""
    g = graph if graph is not None else get_default_graph()
    if g is not g.root:
        raise ExportError("export: a derived (compiled) graph cannot be exported; export the graph you built")
    if g.parent is not None:
        raise ExportError("export: a loop body or branch is exported with the graph around it")
    enc = _Encoder(g)
    body = enc.graph(g)
    doc = {"format": FORMAT, "version": VERSION, "kind": "meta_graph" if meta else "graph_def",
           "producer": f"dynnets {__version__}", **body, "optimizers": enc.optimizers, "subgraphs": enc.subgraphs}
    if meta:
        cols = {}
        keys = g.get_all_collection_keys() if collection_list is None else list(collection_list)
        for name in keys:
            items = g.get_collection(name)
            for x in items:
                if not isinstance(x, Value) or x.graph is not g:
                    raise ExportError(f"export_meta_graph: collection {name!r} holds {x!r:.60}, not a value of this "
                                      f"graph (pass collection_list= without it)")
            cols[str(name)] = [x.id for x in items]
        doc["collections"] = cols
    return GraphDef(doc, enc.arrays)


# --------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------


def _write(path, gd, as_text):
    text = _dumps(gd.doc) if as_text else json.dumps(gd.doc, allow_nan=False, separators=(",", ":"))

    def write(f):
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            z.writestr(_JSON_MEMBER, text)
            for k, a in gd.arrays.items():
                with z.open(f"{_ARRAY_DIR}{k}.npy", "w", force_zip64=True) as m:
                    np.lib.format.write_array(m, np.asarray(a), allow_pickle=False)
    atomic_write(path, write)


def _dumps(doc):
    """JSON with one value, node or optimizer per line (diffable, greppable)."""
    parts = []
    for k, v in doc.items():
        if isinstance(v, list) and v:
            items = ",\n  ".join(json.dumps(x, allow_nan=False) for x in v)
            parts.append(f"{json.dumps(k)}: [\n  {items}\n ]")
        else:
            parts.append(f"{json.dumps(k)}: {json.dumps(v, allow_nan=False)}")
    return "{\n " + ",\n ".join(parts) + "\n}\n"


def write_graph(graph_or_graph_def, logdir, name, as_text=True):
    """Write a graph (or :class:`GraphDef`) to ``logdir/name`` in the graph
    format (as ``tf.train.write_graph``); ``as_text`` indents the JSON
    member. Returns the path."""
    gd = graph_or_graph_def if isinstance(graph_or_graph_def, GraphDef) else as_graph_def(graph_or_graph_def)
    path = Path(logdir) / name
    _write(path, gd, as_text)
    return str(path)


def read_graph_def(path):
    """The :class:`GraphDef` in file ``path`` (checked: format, version,
    structure, arrays); :class:`GraphFormatError` names what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"read_graph_def: no graph file at {path}")
    if not zipfile.is_zipfile(path):
        raise GraphFormatError(f"{path}: not a dynnets graph file (not a zip archive: another format, or a "
                               f"truncated file)")
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if _JSON_MEMBER not in names:
                raise GraphFormatError(f"{path}: not a dynnets graph file (a zip archive without {_JSON_MEMBER}; "
                                       f"members: {', '.join(names[:5]) or 'none'})")
            bad = z.testzip()
            if bad is not None:
                raise GraphFormatError(f"{path}: member {bad} is damaged (its checksum does not match)")
            try:
                doc = json.loads(z.read(_JSON_MEMBER).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                raise GraphFormatError(f"{path}: {_JSON_MEMBER} is not valid JSON ({e})") from None
            _check_header(doc, path)
            arrays = {}
            for n in names:
                if n.startswith(_ARRAY_DIR) and n.endswith(".npy"):
                    with z.open(n) as m:
                        try:
                            arrays[n[len(_ARRAY_DIR):-4]] = np.lib.format.read_array(m, allow_pickle=False)
                        except ValueError as e:
                            why = ("it holds an object array (pickled Python objects), which dynnets never writes"
                                   if "pickle" in str(e) else f"{e}")
                            raise GraphFormatError(f"{path}: member {n}: {why}") from None
    except GraphFormatError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as e:
        raise GraphFormatError(f"{path}: damaged graph file ({type(e).__name__}: {e})") from None
    gd = GraphDef(doc, arrays, str(path))
    _check_structure(gd)
    return gd


def _check_header(doc, src):
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        fmt = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise GraphFormatError(f"{src}: not a dynnets graph file (format {fmt!r}, expected {FORMAT!r})")
    v = doc.get("version")
    if type(v) is not int or v < 1:
        raise GraphFormatError(f"{src}: format version {v!r} is not a positive integer")
    if v > VERSION:
        raise GraphFormatError(f"{src}: written in graph format version {v} (by {doc.get('producer', '?')}); this "
                               f"dynnets reads versions up to {VERSION}: upgrade dynnets to read it")
    if doc.get("kind") not in ("graph_def", "meta_graph"):
        raise GraphFormatError(f"{src}: kind {doc.get('kind')!r} is neither 'graph_def' nor 'meta_graph'")


def _is_id(x, n):
    return type(x) is int and 0 <= x < n


def _check_graph(d, src, at):
    """The structural rules of one graph's ``values`` and ``nodes``
    (``at``: where it sits in the file, for messages)."""
    def bad(msg):
        raise GraphFormatError(f"{src}: {at}{msg}")
    if not isinstance(d, dict):
        bad("a graph must be an object")
    values, nodes = d.get("values"), d.get("nodes")
    if not isinstance(values, list) or not isinstance(nodes, list):
        bad("'values' and 'nodes' must be lists")
    n = len(values)
    for i, v in enumerate(values):
        if not (isinstance(v, dict) and isinstance(v.get("name"), str)
                and (v.get("shape") is None or isinstance(v.get("shape"), list)
                     and all(x is None or (type(x) is int and x >= 0) for x in v["shape"]))
                and (v.get("dtype") is None or isinstance(v.get("dtype"), str)) and type(v.get("sparse")) is bool):
            bad(f"values[{i}] must be {{'name': str, 'shape': [int >= 0 or null] or null, 'dtype': str or null, "
                f"'sparse': bool}}, got {v!r:.100}")
    nxt = 0
    for k, nd in enumerate(nodes):
        if not (isinstance(nd, dict) and isinstance(nd.get("op"), str) and isinstance(nd.get("name"), str)
                and isinstance(nd.get("inputs"), list) and isinstance(nd.get("outputs"), list)
                and isinstance(nd.get("attrs"), dict)):
            bad(f"nodes[{k}] must be {{'op': str, 'name': str, 'inputs': [id], 'outputs': [id], 'attrs': {{}}}}, "
                f"got {nd!r:.100}")
        where = f"nodes[{k}] ('{nd['name']}', {nd['op']})"
        for i in nd["inputs"]:
            if not _is_id(i, nxt):
                bad(f"{where}: input {i!r} is not the id of a value produced by an earlier node")
        outs = nd["outputs"]
        if not outs or outs != list(range(nxt, nxt + len(outs))) or nxt + len(outs) > n:
            bad(f"{where}: outputs {outs!r:.60} must be the next value ids ({nxt}, ...) of the {n} values")
        nxt += len(outs)
    if nxt != n:
        bad(f"{n} values but the nodes produce {nxt}")
    phs = d.get("placeholders")
    if not isinstance(phs, list) or not all(_is_id(i, n) for i in phs):
        bad("'placeholders' must be a list of value ids")
    return n


def _check_structure(gd):
    """The structural rules of the format (module docstring), so that
    building reads only ids, names and lists that exist."""
    doc, src = gd.doc, gd.source
    _check_header(doc, src)

    def bad(msg):
        raise GraphFormatError(f"{src}: {msg}")
    n = _check_graph(doc, src, "")
    opts = doc.get("optimizers", [])
    if not isinstance(opts, list) or not all(isinstance(o, dict) for o in opts):
        bad("'optimizers' must be a list of objects")
    cols = doc.get("collections", {})
    if not isinstance(cols, dict) or not all(isinstance(c, list) and all(_is_id(i, n) for i in c)
                                             for c in cols.values()):
        bad("'collections' must map names to lists of value ids")
    subs = doc.get("subgraphs", {})
    if not isinstance(subs, dict):
        bad("'subgraphs' must map keys to graphs")
    sizes = {}
    for k, sd in subs.items():
        sizes[k] = _check_graph(sd, src, f"subgraphs[{k!r}]: ")
    for k, sd in subs.items():
        at = f"subgraphs[{k!r}]: "
        parent = sd.get("parent")
        if parent is not None and (parent not in subs or parent == k):
            bad(f"{at}parent {parent!r} is neither null (the graph itself) nor another subgraph")
        m, pn = sizes[k], (n if parent is None else sizes[parent])
        ins, outs, caps = sd.get("inputs"), sd.get("outputs"), sd.get("captures")
        if not (isinstance(ins, list) and all(_is_id(i, m) for i in ins)
                and isinstance(outs, list) and all(_is_id(i, m) for i in outs)):
            bad(f"{at}'inputs' and 'outputs' must be lists of its value ids")
        if not (isinstance(caps, list) and all(isinstance(c, list) and len(c) == 2 and _is_id(c[0], pn)
                                               and _is_id(c[1], m) for c in caps)):
            bad(f"{at}'captures' must be [enclosing graph's value id, own value id] pairs")


# --------------------------------------------------------------------------
# GraphDef -> nodes of a graph
# --------------------------------------------------------------------------


class _Builder:
    """Adds the nodes of one graph of a GraphDef (the file's own, or a
    subgraph ``key`` of it, built into a subgraph of ``parent``'s graph) to
    graph ``g``; ``new[i]`` becomes the Value for the file's value ``i``."""

    def __init__(self, gd, g, prefix, parent=None, key=None):
        self.gd, self.g, self.prefix = gd, g, prefix
        self.doc = gd.doc
        self.d = self.doc if key is None else self.doc["subgraphs"][key]
        self.key = key
        self.parent = parent
        self.shared = {"opts": {}, "subs": {}} if parent is None else parent.shared
        self.new = [None] * len(self.d["values"])
        self.at = "" if key is None else f"{parent.at}subgraphs[{key!r}]: "
        self.where = ""

    def fail(self, msg):
        raise GraphFormatError(f"{self.gd.source}: {self.at}{self.where}{msg}")

    def dtype(self, s):
        try:
            d = np.dtype(s)
        except TypeError:
            d = None
        if d is None or d.kind not in _DTYPE_KINDS or not isinstance(s, str):
            self.fail(f"{s!r} is not a boolean or numeric dtype name")
        return d

    def array(self, k):
        a = self.gd.arrays.get(k) if isinstance(k, str) else None
        if not isinstance(a, np.ndarray):
            self.fail(f"array {k!r} is not in the file")
        if a.dtype.kind not in _DTYPE_KINDS:
            self.fail(f"array {k!r} has dtype {a.dtype}; only boolean and numeric arrays are allowed")
        return a

    def variable(self, i):
        v = self.new[i] if _is_id(i, len(self.new)) else None
        if not isinstance(v, Variable):
            self.fail(f"{{'value': {i!r}}} is not a variable defined before this node")
        return v

    def attr(self, x):
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if type(x) is float:
            return x
        if isinstance(x, list):
            return [self.attr(v) for v in x]
        if isinstance(x, dict) and len(x) in (1, 2):
            if "tuple" in x and isinstance(x["tuple"], list):
                return tuple(self.attr(v) for v in x["tuple"])
            if "slice" in x and isinstance(x["slice"], list) and len(x["slice"]) == 3:
                return slice(*(self.attr(v) for v in x["slice"]))
            if x.get("ellipsis") is True:
                return Ellipsis
            if "float" in x and x["float"] in ("nan", "inf", "-inf"):
                return float(x["float"])
            if "dtype" in x:
                return self.dtype(x["dtype"])
            if "array" in x:
                a = self.array(x["array"])
                if x.get("item") is True:
                    if a.ndim != 0:
                        self.fail(f"array {x['array']!r} is marked as a scalar but has shape {a.shape}")
                    return a[()]
                a = a.copy() if not a.flags.writeable else a
                a.setflags(write=False)
                return a
            if "value" in x:
                return self.variable(x["value"])
            if "optimizer" in x:
                return self.optimizer(x["optimizer"])
            if "subgraph" in x:
                return self.subgraph(x["subgraph"])
            if "aval" in x and isinstance(x["aval"], list) and len(x["aval"]) == 2:
                shape, dt = x["aval"]
                if not (isinstance(shape, list) and all(d is None or (type(d) is int and d >= 0) for d in shape)):
                    self.fail(f"aval shape {shape!r:.60} is not a list of sizes")
                return Aval(tuple(shape), self.dtype(dt))
        self.fail(f"attribute value {x!r:.80} is not one the format defines")

    def subgraph(self, k):
        subs = self.doc.get("subgraphs", {})
        if not isinstance(k, str) or k not in subs:
            self.fail(f"subgraph {k!r} is not in 'subgraphs'")
        sub = self.shared["subs"].get(k)
        if sub is not None:
            if sub.parent is not self.g:
                self.fail(f"subgraph {k!r} is nested in another graph than this node's")
            return sub
        sd = subs[k]
        if sd.get("parent") != self.key:
            self.fail(f"subgraph {k!r} is nested in {sd.get('parent')!r}, not in this node's graph")
        sub = self.g.subgraph()
        child = _Builder(self.gd, sub, "", self, k)
        child.build()
        for role in ("inputs", "outputs"):
            setattr(sub, role, tuple(child.new[i].id for i in sd[role]))
        caps = []
        for a, b in sd["captures"]:
            if self.new[a] is None or sub.producers()[child.new[b].id].prim is not placeholder_p:
                self.fail(f"subgraph {k!r}: capture [{a}, {b}] must pair a value defined before this node with a "
                          f"placeholder of the subgraph")
            caps.append((self.new[a], child.new[b]))
        sub.captures = caps
        if any(sub.producers()[i].prim is not placeholder_p for i in sub.inputs):
            self.fail(f"subgraph {k!r}: its inputs must be placeholders")
        self.shared["subs"][k] = sub
        return sub

    def optimizer(self, k):
        if self.key is not None:
            self.fail("an optimizer inside a subgraph")
        opts_built = self.shared["opts"]
        opt = opts_built.get(k) if type(k) is int else None
        if opt is not None:
            return opt
        opts = self.doc.get("optimizers", [])
        if not _is_id(k, len(opts)):
            self.fail(f"optimizer {k!r} is not in 'optimizers'")
        rec = opts[k]
        cls, fields = _OPTIMIZERS.get(rec.get("class"), (None, ()))
        cfg = rec.get("config")
        if cls is None or not isinstance(cfg, dict) or set(cfg) != set(fields):
            self.fail(f"optimizer {k} must be one of {', '.join(_OPTIMIZERS)} with config keys "
                      f"{list(fields)}; got class {rec.get('class')!r}, config {cfg!r:.80}")
        kw = {}
        for f in fields:
            v = cfg[f]
            if f == "learning_rate" and isinstance(v, dict) and "value" in v:
                lr = self.new[v["value"]] if _is_id(v["value"], len(self.new)) else None
                if lr is None:
                    self.fail(f"optimizer {k}: learning_rate {v!r} is not a value defined before this node")
                kw[f] = lr
            else:
                kw[f] = self.attr(v)
        if isinstance(kw["name"], str):
            kw["name"] = self.prefix + kw["name"]
        try:
            opt = cls(**kw)
        except (TypeError, ValueError) as e:
            self.fail(f"optimizer {k} ({rec['class']}): {e}")
        slots = rec.get("slots", [])
        if not isinstance(slots, list):
            self.fail(f"optimizer {k}: 'slots' must be a list")
        for item in slots:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict)
                    and set(item[1]) == set(opt._slot_names)):
                self.fail(f"optimizer {k}: a slot entry must be [variable id, {{{', '.join(opt._slot_names)}: "
                          f"variable id}}], got {item!r:.80}")
            var = self.variable(item[0])
            d = {}
            for s, sid in item[1].items():
                sv = self.variable(sid)
                # the update kernels write a slot as if it had its variable's layout
                if tuple(sv.shape) != tuple(var.shape) or sv.dtype != var.dtype:
                    self.fail(f"optimizer {k}: slot {s!r} '{sv.name}' {sv.shape} {sv.dtype} does not match its "
                              f"variable '{var.name}' {var.shape} {var.dtype}")
                d[s] = sv
            opt._slots[var] = d
        step = rec.get("step")
        if step is not None:
            if not hasattr(opt, "_step"):
                self.fail(f"optimizer {k} ({rec['class']}) has no step variable")
            sv = self.variable(step)
            if tuple(sv.shape) != () or sv.dtype.kind not in "iu":
                self.fail(f"optimizer {k}: step variable '{sv.name}' must be an integer scalar")
            opt._step[self.g] = sv
        opts_built[k] = opt
        return opt

    def primitive(self, nd):
        vjp = nd.get("vjp")
        if vjp is not None:
            of = _resolve(vjp.get("of")) if isinstance(vjp, dict) else None
            i, sparse = (vjp.get("input"), vjp.get("sparse")) if isinstance(vjp, dict) else (None, None)
            if of is None or not (i is None or type(i) is int) or type(sparse) is not bool:
                self.fail(f"gradient {vjp!r:.80} does not name a primitive of the table, an input and 'sparse'")
            if not of.differentiable or (i is None and of.joint_vjp is None) or (
                    i is not None and (of.vjps is None or not 0 <= i < len(of.vjps) or of.vjps[i] is None)) or (
                    sparse and i not in of.sparse_grads):
                self.fail(f"primitive '{of.name}' has no {'sparse ' if sparse else ''}gradient for input {i}")
            p = vjp_primitive(of, i, sparse)
            if p.name != nd["op"]:
                self.fail(f"the gradient of {of.name} input {i} is named {p.name!r}, not {nd['op']!r}")
            self.check_forward(nd, of)
            return p
        p = _resolve(nd["op"], nd.get("nograd") is True)
        if p is None:
            self.fail(f"unknown primitive {nd['op']!r} (not in this dynnets' primitive table)")
        return p

    def check_forward(self, nd, of):
        """A gradient node must read the inputs, outputs and attributes of a
        forward node before it (as :mod:`.backward` binds it): a VJP's kernels
        trust what the forward's shape rule and value checks let through."""
        n_in = nd["attrs"].get("_n_in")
        ins = nd["inputs"]
        n_out = (len(ins) - n_in) // 2 if of.multiple_results and type(n_in) is int else 1
        rest = {a: v for a, v in nd["attrs"].items() if a != "_n_in"}
        key = (of.name, tuple(ins[n_out:n_out + n_in]), json.dumps(rest, sort_keys=True), tuple(ins[n_out + n_in:]))
        if type(n_in) is not int or key not in self.forward:
            self.fail(f"a gradient node must take the inputs, outputs and attributes of an earlier '{of.name}' node")

    def check_avals(self, outs, avals):
        vals = self.d["values"]
        for o, a in zip(outs, avals):
            got = _aval_json(a)
            want = (vals[o]["shape"], vals[o]["dtype"])
            if list(got) != list(want):
                def show(shape):
                    return "<unknown>" if shape is None else tuple(shape)
                self.fail(f"value {o} '{vals[o]['name']}' is declared {show(want[0])} {want[1]} but its op gives "
                          f"{show(got[0])} {got[1]}")

    def build(self):
        try:
            return self._build()
        except RecursionError:
            self.fail("attributes nested too deeply")

    def _build(self):
        g, pre, vals = self.g, self.prefix, self.d["values"]
        self.forward = set()        # (op, input ids, attributes, output ids) of forward nodes, for check_forward
        for k, nd in enumerate(self.d["nodes"]):
            self.where = f"nodes[{k}] '{nd['name']}' ({nd['op']}): "
            p = self.primitive(nd)
            outs = nd["outputs"]
            ins = [self.new[i] for i in nd["inputs"]]
            attrs = nd["attrs"]
            name = pre + nd["name"]
            if p in (placeholder_p, variable_p, constant_p) and (ins or len(outs) != 1):
                self.fail("a source node has no inputs and one output")
            if p is placeholder_p:
                rec = vals[outs[0]]
                if attrs or rec["sparse"]:
                    self.fail("a placeholder has no attributes and is not sparse")
                shape = None if rec["shape"] is None else tuple(rec["shape"])
                res = g.append_equation(placeholder_p, (), {}, Aval(shape, self.dtype(rec["dtype"])), name=name)
            elif p is variable_p:
                if set(attrs) != {"initial_value", "trainable"} or type(attrs["trainable"]) is not bool:
                    self.fail("a variable has the attributes 'initial_value' (an array) and 'trainable' (a bool)")
                init = self.attr(attrs["initial_value"])
                if not isinstance(init, np.ndarray):
                    self.fail("a variable's initial_value must be an array")
                res = Variable(init, name=name, trainable=attrs["trainable"], dtype=init.dtype, graph=g)
            elif p is constant_p:
                if set(attrs) != {"value"}:
                    self.fail("a constant has the one attribute 'value'")
                val = self.attr(attrs["value"])
                if val is None:
                    aval = Aval((), np.dtype(object))
                elif type(val) in (bool, int, float):
                    aval = Aval((), val)
                elif isinstance(val, (np.ndarray, np.generic)):
                    aval = Aval(tuple(np.shape(val)), val.dtype)
                else:
                    self.fail(f"a constant's value must be a number, a boolean, null or an array, got {val!r:.60}")
                res = g.append_equation(constant_p, (), {"value": val}, aval, name=name)
            else:
                if any(v is None for v in ins):
                    self.fail("an input is not a value")
                dec = {a: self.attr(v) for a, v in attrs.items()}
                try:
                    aval = run_rule(p, [g.avals[v.id] for v in ins], dec)
                except Exception as e:     # a rule tripping over a foreign attribute is a bad file too
                    self.fail(f"{type(e).__name__}: {e}")
                avals = tuple(aval) if p.multiple_results else (aval,)
                if len(avals) != len(outs) or not all(isinstance(a, Aval) for a in avals):
                    self.fail(f"the op gives {len(avals)} results, the file lists {len(outs)} outputs")
                self.check_avals(outs, avals)
                res = g.append_equation(p, tuple(v.id for v in ins), dec, aval, name=name,
                                        cls=Operation if nd.get("operation") is True else Value)
                if p.differentiable and "vjp" not in nd:
                    # a single-result primitive's VJP reads its one output; a multiple-result one's all
                    self.forward.add((p.name, tuple(nd["inputs"]), json.dumps(attrs, sort_keys=True),
                                      tuple(outs if p.multiple_results else outs[:1])))
            res = res if isinstance(res, tuple) else (res,)
            if p in (variable_p, constant_p):
                self.check_avals(outs, [g.avals[res[0].id]])
            for o, v in zip(outs, res):
                rec = vals[o]
                want = pre + rec["name"]
                if v.name != want:
                    v.name = g._unique_name(want) if len(res) == 1 else want
                v.sparse = rec["sparse"]
                self.new[o] = v
        self.where = ""
        for i in self.d["placeholders"]:
            if g.producers()[self.new[i].id].prim is not placeholder_p:
                self.fail(f"'placeholders' lists value {i}, which is not a placeholder")
            g.placeholders.append(self.new[i])
        if self.key is None:
            for cname, ids in self.doc.get("collections", {}).items():
                for i in ids:
                    g.add_to_collection(cname, self.new[i])
        return self.new


def to_graph_def(x, who="import_graph_def"):
    """``x`` itself when a :class:`GraphDef` (checked), else the GraphDef of the graph file at path ``x``."""
    if isinstance(x, GraphDef):
        _check_structure(x)
        return x
    if isinstance(x, (str, Path)):
        return read_graph_def(x)
    raise TypeError(f"{who}: expected a GraphDef or a path, got {type(x).__name__}")


def value_ids(gd, name, who="lookup"):
    """The value ids a name of the file stands for: a value name, ``node:k``
    (TF1's tensor names) or a node name (all its outputs)."""
    for i, v in enumerate(gd.doc["values"]):
        if v["name"] == name:
            return [i]
    base, _, k = str(name).rpartition(":")
    if k == "0":
        for i, v in enumerate(gd.doc["values"]):
            if v["name"] == base:
                return [i]
    for nd in gd.doc["nodes"]:
        if nd["name"] == name:
            return list(nd["outputs"])
        if k.isdigit() and nd["name"] == base and int(k) < len(nd["outputs"]):
            return [nd["outputs"][int(k)]]
    raise KeyError(f"{who}: {gd.source} has no value or node named {name!r}")


def _lookup(gd, new, name, who):
    ids = value_ids(gd, name, who)
    if len(ids) != 1:
        raise KeyError(f"{who}: node {name!r} of {gd.source} has {len(ids)} outputs; name one as '{name}:k'")
    return new[ids[0]]


def build_graph_def(gd, graph, prefix=""):
    """Add the nodes of (checked) GraphDef ``gd`` to ``graph``, names
    prefixed by ``prefix``; returns the new Value of each of the file's values."""
    return _Builder(gd, graph, prefix).build()


def import_graph_def(graph_def, return_elements=None, name="import", graph=None):
    """Add the nodes of ``graph_def`` (a :class:`GraphDef` or a graph file's
    path) to ``graph`` (default: the default graph), as ``tf.import_graph_def``.

    Every name gets the prefix ``name + "/"`` (made unique, as TF1's
    ``import``, ``import_1``...); ``name=""`` keeps the file's names.
    Returns the Values named in ``return_elements`` (value names, ``"x:0"``
    or node names, as written in the file), or None.
    """
    gd = to_graph_def(graph_def, "import_graph_def")
    g = graph if graph is not None else get_default_graph()
    prefix = f"{g._unique_name(name)}/" if name else ""
    new = _Builder(gd, g, prefix).build()
    if return_elements is None:
        return None
    return [_lookup(gd, new, r, "import_graph_def") for r in return_elements]


def export_meta_graph(filename=None, graph=None, collection_list=None, as_text=False):
    """The whole graph as a meta graph (:class:`GraphDef` with its collections
    and optimizers), written to ``filename`` when given (as
    ``tf.train.export_meta_graph``). A graph imported from it trains on."""
    gd = as_graph_def(graph, meta=True, collection_list=collection_list)
    if filename is not None:
        _write(Path(filename), gd, as_text)
    return gd
