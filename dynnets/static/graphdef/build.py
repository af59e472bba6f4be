"""GraphDef -> nodes of a graph: :func:`import_graph_def` (TF1's) and
:func:`build_graph_def` (the meta graph importer's). A file is checked
before a kernel sees it: its structure (:func:`~.format.check_structure`),
then, node by node, that each op names a primitive of the tables
(:mod:`.names`), that each node's shape rule (which is also its input check)
gives the shapes and dtypes the file declares, and that a gradient node reads
the inputs and outputs of a forward node before it. A file that fails a check
raises :class:`~.format.GraphFormatError` naming the file, the node and what
is wrong.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...autograd.primitives import Aval, run_rule
from ..backward import vjp_primitive
from ..graph import Operation, Value, Variable, constant_p, get_default_graph, placeholder_p, variable_p
from .format import DTYPE_KINDS, GraphDef, GraphFormatError, aval_json, check_structure, is_id, read_graph_def
from .names import resolve
from .optimizers import build_optimizer

__all__ = ["import_graph_def", "build_graph_def", "to_graph_def", "value_ids"]


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
        if d is None or d.kind not in DTYPE_KINDS or not isinstance(s, str):
            self.fail(f"{s!r} is not a boolean or numeric dtype name")
        return d

    def array(self, k):
        a = self.gd.arrays.get(k) if isinstance(k, str) else None
        if not isinstance(a, np.ndarray):
            self.fail(f"array {k!r} is not in the file")
        if a.dtype.kind not in DTYPE_KINDS:
            self.fail(f"array {k!r} has dtype {a.dtype}; only boolean and numeric arrays are allowed")
        return a

    def variable(self, i):
        v = self.new[i] if is_id(i, len(self.new)) else None
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
        if not is_id(k, len(opts)):
            self.fail(f"optimizer {k!r} is not in 'optimizers'")
        opt = build_optimizer(opts[k], k, lambda i: self.new[i] if is_id(i, len(self.new)) else None,
                              self.variable, self.attr, self.prefix, self.fail)
        opts_built[k] = opt
        return opt

    def primitive(self, nd):
        vjp = nd.get("vjp")
        if vjp is not None:
            of = resolve(vjp.get("of")) if isinstance(vjp, dict) else None
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
        p = resolve(nd["op"], nd.get("nograd") is True)
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
            got = aval_json(a)
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
                    v.name = g.fresh_name(want) if len(res) == 1 else want
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
        check_structure(x)
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
    prefix = f"{g.fresh_name(name)}/" if name else ""
    new = _Builder(gd, g, prefix).build()
    if return_elements is None:
        return None
    return [_lookup(gd, new, r, "import_graph_def") for r in return_elements]
