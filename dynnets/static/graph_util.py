"""Graph surgery on :class:`~dynnets.static.export.GraphDef` s, with TF1's
names (``tf.graph_util``): :func:`extract_sub_graph` keeps what some outputs
need; :func:`convert_variables_to_constants` also *freezes* it, every
variable replaced by a constant holding its value in a session, so the
graph deploys as one file with no checkpoint beside it::

    frozen = tf.graph_util.convert_variables_to_constants(sess, sess.graph.as_graph_def(), ["probs"])
    tf.train.write_graph(frozen, "deploy", "model.graph", as_text=False)
"""
from __future__ import annotations

from .export import GraphDef, GraphFormatError, to_graph_def, value_ids
from .graph import GraphError, Variable

__all__ = ["extract_sub_graph", "convert_variables_to_constants"]

_EFFECTS = ("init_variables", "group", "assign", "apply_gradients")


def _needed(gd, dest_nodes, who):
    """Indices of the nodes that the values named in ``dest_nodes`` depend on."""
    if isinstance(dest_nodes, str):
        raise TypeError(f"{who}: output node names must be a list of names, got the string {dest_nodes!r}")
    producer = {}
    for k, nd in enumerate(gd.doc["nodes"]):
        for o in nd["outputs"]:
            producer[o] = k
    stack = [producer[i] for name in dest_nodes for i in value_ids(gd, name, who)]
    need = set()
    while stack:
        k = stack.pop()
        if k in need:
            continue
        need.add(k)
        stack.extend(producer[i] for i in gd.doc["nodes"][k]["inputs"])
    return sorted(need)


def _subset(gd, keep, replace=None, kind="graph_def"):
    """A new GraphDef of the nodes ``keep`` (in order), renumbered; ``replace``
    maps a node index to a node record standing in for it. The subgraphs and
    arrays the kept nodes name come along (a subgraph's captures renumbered
    with the graph around it)."""
    doc = gd.doc
    ids = {}
    values, nodes = [], []
    arrays, subs = {}, {}
    for k in keep:
        nd = (replace or {}).get(k, doc["nodes"][k])
        for o in nd["outputs"]:
            ids[o] = len(values)
            values.append(dict(doc["values"][o]))
        rec = dict(nd, inputs=[ids[i] for i in nd["inputs"]], outputs=[ids[o] for o in nd["outputs"]])
        rec["attrs"] = {a: _remap(v, ids, arrays, subs, gd) for a, v in rec["attrs"].items()}
        nodes.append(rec)
    new = {key: doc[key] for key in ("format", "version", "producer")}
    new.update(kind=kind, values=values, nodes=nodes, placeholders=[ids[i] for i in doc["placeholders"] if i in ids],
               optimizers=[], subgraphs=subs)
    return GraphDef(new, arrays)


def _remap(x, ids, arrays, subs, gd):
    """An attribute of a kept node with its value ids renumbered by ``ids``;
    the arrays and subgraphs it names are copied into ``arrays``/``subs``."""
    if isinstance(x, list):
        return [_remap(v, ids, arrays, subs, gd) for v in x]
    if isinstance(x, dict):
        if "array" in x and isinstance(x["array"], str):
            arrays[x["array"]] = gd.arrays[x["array"]]
            return dict(x)
        if "value" in x and type(x["value"]) is int:
            return {"value": ids[x["value"]]}
        if "subgraph" in x:
            _copy_subgraph(x["subgraph"], ids, arrays, subs, gd)
            return dict(x)
        return {k: _remap(v, ids, arrays, subs, gd) for k, v in x.items()}
    return x


def _copy_subgraph(key, outer_ids, arrays, subs, gd):
    if key in subs:
        return
    sd = dict(gd.doc["subgraphs"][key])
    if sd["parent"] is None:
        sd["captures"] = [[outer_ids[a], b] for a, b in sd["captures"]]
    subs[key] = sd
    inner = {i: i for i in range(len(sd["values"]))}
    for nd in sd["nodes"]:
        for v in nd["attrs"].values():
            _remap(v, inner, arrays, subs, gd)


def extract_sub_graph(graph_def, dest_nodes):
    """The part of ``graph_def`` that the values named in ``dest_nodes`` need
    (as ``tf.graph_util.extract_sub_graph``); names as in
    :func:`~dynnets.static.export.import_graph_def`'s ``return_elements``."""
    gd = to_graph_def(graph_def, "extract_sub_graph")
    keep = _needed(gd, dest_nodes, "extract_sub_graph")
    for k in keep:
        nd = gd.doc["nodes"][k]
        if nd["op"] in _EFFECTS:
            raise GraphError(f"extract_sub_graph: the outputs {list(dest_nodes)} depend on the effect op "
                             f"'{nd['name']}' ({nd['op']}); extract values, not train or assign ops")
    return _subset(gd, keep)


def convert_variables_to_constants(sess, input_graph_def, output_node_names, variable_names_whitelist=None,
                                   variable_names_blacklist=None):
    """A frozen GraphDef: the part of ``input_graph_def`` that
    ``output_node_names`` need, each variable in it replaced by a constant of
    its value in ``sess`` (looked up by name in ``sess.graph``), as
    ``tf.graph_util.convert_variables_to_constants``. ``variable_names_whitelist``
    / ``_blacklist`` restrict which variables are frozen (the others stay
    variables, with their initial values)."""
    gd = extract_sub_graph(input_graph_def, output_node_names)
    replace = {}
    for k, nd in enumerate(gd.doc["nodes"]):
        if nd["op"] != "variable":
            continue
        name = nd["name"]
        if variable_names_whitelist is not None and name not in variable_names_whitelist:
            continue
        if variable_names_blacklist is not None and name in variable_names_blacklist:
            continue
        try:
            var = sess.graph.get_value_by_name(name)
        except KeyError:
            var = None
        if not isinstance(var, Variable):
            raise GraphError(f"convert_variables_to_constants: the session's graph has no variable {name!r}")
        value = sess.variable_value(var)
        want = gd.doc["values"][nd["outputs"][0]]
        if list(value.shape) != want["shape"] or value.dtype.name != want["dtype"]:
            raise GraphFormatError(f"convert_variables_to_constants: variable {name!r} is {value.shape} "
                                   f"{value.dtype} in the session, {tuple(want['shape'])} {want['dtype']} in "
                                   f"the graph def")
        key = f"frozen{len(replace)}"
        while key in gd.arrays:
            key += "_"
        gd.arrays[key] = value
        replace[k] = {"op": "constant", "name": name, "inputs": [], "outputs": nd["outputs"],
                      "attrs": {"value": {"array": key}}}
    return _subset(gd, range(len(gd.doc["nodes"])), replace)
