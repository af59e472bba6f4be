"""The graph file format (version 1, described in :mod:`dynnets.static.export`):
:class:`GraphDef`, the format's errors and version, the zip file it is
written to and read from, and the structural checks that run on every file
before anything is built from it (ids, lists and names that exist, a header
this reader understands).

Nothing here knows a primitive or a graph: turning a graph into a GraphDef is
:mod:`.encode`, building one back into a graph :mod:`.build`.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ...io import atomic_write

__all__ = ["FORMAT", "VERSION", "DTYPE_KINDS", "GraphDef", "GraphFormatError", "ExportError", "dtype_json",
           "aval_json", "is_id", "write_file", "read_graph_def", "check_structure"]

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


#: the numpy dtype kinds a file holds: boolean and numeric, never objects or strings
DTYPE_KINDS = "biufc"
_WEAK = {bool: "weak bool", int: "weak int", float: "weak float"}


def dtype_json(d):
    """How a file names dtype ``d``: a numpy dtype's name, ``"weak int"``
    (``float``, ``bool``) for the type of a Python scalar constant, None for an
    effect's result."""
    if d is None:
        return None
    if isinstance(d, np.dtype):
        return d.name
    return _WEAK.get(type(d), "weak")


def aval_json(a):
    """``(shape, dtype)`` of aval ``a`` as a file writes them (:func:`dtype_json`)."""
    # an unknown rank (a placeholder made without a shape) is a null shape, as TF's unknown_rank
    shape = None if a.shape is None else [None if d is None else int(d) for d in a.shape]
    return shape, dtype_json(a.dtype)


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
        """``"graph_def"`` or ``"meta_graph"`` (with collections)."""
        return self.doc["kind"]

    @property
    def node(self):
        """The nodes in order (TF1's ``graph_def.node``): dicts with ``op``,
        ``name``, ``inputs``, ``outputs`` (value ids) and ``attrs``."""
        return self.doc["nodes"]

    def value_names(self):
        """The values' names, in id order."""
        return [v["name"] for v in self.doc["values"]]

    def write(self, path, as_text=False):
        """Write this GraphDef to ``path`` (atomically); ``as_text`` indents the JSON."""
        write_file(Path(path), self, as_text)
        return str(path)

    def __repr__(self):
        ops = {}
        for n in self.doc["nodes"]:
            ops[n["op"]] = ops.get(n["op"], 0) + 1
        top = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:6])
        return f"<GraphDef {self.kind} from {self.source}: {len(self.doc['nodes'])} nodes ({top})>"


# --------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------


def write_file(path, gd, as_text):
    """Write GraphDef ``gd`` to ``path`` (atomically) as a graph file; ``as_text``
    puts one value, node or optimizer per line of the JSON member."""
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
    check_structure(gd)
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


def is_id(x, n):
    """Whether ``x`` is an id of a list of ``n`` entries (an int, not a bool)."""
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
            if not is_id(i, nxt):
                bad(f"{where}: input {i!r} is not the id of a value produced by an earlier node")
        outs = nd["outputs"]
        if not outs or outs != list(range(nxt, nxt + len(outs))) or nxt + len(outs) > n:
            bad(f"{where}: outputs {outs!r:.60} must be the next value ids ({nxt}, ...) of the {n} values")
        nxt += len(outs)
    if nxt != n:
        bad(f"{n} values but the nodes produce {nxt}")
    phs = d.get("placeholders")
    if not isinstance(phs, list) or not all(is_id(i, n) for i in phs):
        bad("'placeholders' must be a list of value ids")
    return n


def check_structure(gd):
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
    if not isinstance(cols, dict) or not all(isinstance(c, list) and all(is_id(i, n) for i in c)
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
        if not (isinstance(ins, list) and all(is_id(i, m) for i in ins)
                and isinstance(outs, list) and all(is_id(i, m) for i in outs)):
            bad(f"{at}'inputs' and 'outputs' must be lists of its value ids")
        if not (isinstance(caps, list) and all(isinstance(c, list) and len(c) == 2 and is_id(c[0], pn)
                                               and is_id(c[1], m) for c in caps)):
            bad(f"{at}'captures' must be [enclosing graph's value id, own value id] pairs")
