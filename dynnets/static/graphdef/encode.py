"""Graph -> :class:`~.format.GraphDef`: :func:`as_graph_def` (also
``graph.as_graph_def()``), which encodes every node of a graph, its
variables' initial values, the optimizers of its train ops and its loops'
and conds' subgraphs, and with ``meta=True`` its collections. What the
format cannot hold raises :class:`~.format.ExportError` naming the op.
"""
from __future__ import annotations

import math

import numpy as np

from ... import __version__
from ...autograd.primitives import Aval
from ..backward import VjpPrimitive
from ..graph import Graph, Operation, Value, Variable, get_default_graph, param_p, variable_p
from .format import DTYPE_KINDS, FORMAT, VERSION, ExportError, GraphDef, aval_json
from .names import exportable_name, vjp_source
from .optimizers import is_registered, optimizer_record

__all__ = ["as_graph_def"]


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
        if arr.dtype.kind not in DTYPE_KINDS:
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
            shape, dt = aval_json(x)
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
            if x.kind not in DTYPE_KINDS:
                raise ExportError(f"export: {where} is the dtype {x}; the graph format stores only boolean and "
                                  f"numeric dtypes")
            return {"dtype": x.name}
        if isinstance(x, Variable):
            if x.graph is not g:
                raise ExportError(f"export: {where} is the variable '{x.name}' of another graph")
            return {"value": self.vid(g, x.id)}
        if is_registered(x):
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
        rec = optimizer_record(opt, g, lambda v: self.vid(g, v.id), lambda x, at: self.attr(x, at, g), where)
        k = len(self.optimizers)
        self.optimizers.append(rec)
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
            src = vjp_source(p)
            if src is None:
                raise ExportError(f"export: {where}: a gradient primitive whose forward primitive is not in the table")
            rec["vjp"] = {"of": src[0], "input": src[1], "sparse": src[2]}
        else:
            named = exportable_name(p)
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
                shape, dt = aval_json(g.avals[o])
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
