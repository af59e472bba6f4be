"""A static graph as Graphviz DOT text (:meth:`Graph.to_dot`).

One DOT node per equation, labelled with its name, its primitive and the
shape and dtype of what it produces; edges follow the data, from producer to
consumer. Placeholders are yellow boxes, Variables green, live parameters
(traced eager Parameters) light green, constants small grey text, effects
(assignments, initialisers, ``group``) octagons, fused elementwise kernels
orange boxes; the program's outputs have a double border. A scalar constant
is drawn once per use, next to its consumer, so that a ``0.5`` shared by
twenty ops does not pull twenty edges across the picture.

``fused`` (from :func:`dynnets.plots.compile_stages`) maps the output
value id of a fused equation to the equations it replaced: the kernel is then drawn as a cluster
holding them, outlined and labelled, instead of a single box.
"""
from __future__ import annotations

import numpy as np


__all__ = ["to_dot", "dot_quote", "MAX_NODES"]

#: Graphs with more equations than this are refused (Graphviz takes minutes on such pictures).
MAX_NODES = 3000

# styles of the graph's source equations, by their kind (StaticPrimitive.source):
# this module reads equations only, so graph.py can import it for Graph.to_dot
_STYLE = {
    "placeholder": 'shape=box, style="rounded,filled", fillcolor="#fff2a8"',
    "variable": 'shape=box, style="rounded,filled", fillcolor="#b7e1a1"',
    "param": 'shape=box, style="rounded,filled", fillcolor="#dff2d0"',
}
_OP = 'shape=box, style="rounded", color="#555555"'
_EFFECT = 'shape=octagon, style="filled", fillcolor="#f0f0f0"'
_FUSED = 'shape=box, style="rounded,filled", fillcolor="#fdd49e"'
_CONST = 'shape=plaintext, fontcolor="#666666", fontsize=9'


def dot_quote(s):
    """``s`` as a double-quoted DOT string."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _fmt_shape(aval):
    shape = "(" + ", ".join("?" if d is None else str(d) for d in aval.shape) + ("," if len(aval.shape) == 1 else "") \
        + ")"
    dt = aval.dtype
    return shape if dt is None or not isinstance(dt, np.dtype) else f"{shape} {dt}"


def _const_text(e):
    v = e.attrs.get("value")
    if isinstance(v, (bool, int, float)) or v is None:
        return repr(v)
    a = np.asarray(v)
    if a.size == 1:
        return f"{a.reshape(()).item():.4g}"
    return f"const {_fmt_shape_of(a)}"


def _fmt_shape_of(a):
    return "(" + ", ".join(str(d) for d in a.shape) + ("," if a.ndim == 1 else "") + f") {a.dtype}"


def _source(p):
    """The kind of a source primitive ("placeholder", "constant"...), else None."""
    return getattr(p, "source", None)


def _is_scalar_const(e):
    return _source(e.prim) == "constant" and np.ndim(e.attrs.get("value")) == 0


def _label(g, e):
    p = e.prim
    if _source(p) == "placeholder":
        head = f"placeholder {e.name}"
    elif _source(p) == "variable":
        head = f"Variable {e.name}"
    elif _source(p) == "param":
        head = f"param {e.name}"
    elif p.name == "fused":
        head = f"fused kernel\n{e.name[len('fused('):-1] if e.name.startswith('fused(') else e.name}"
    elif e.name == p.name or e.name.startswith(p.name + "_"):
        head = p.name
    else:
        head = f"{e.name}\n{p.name}"
    outs = [g.avals[o] for o in e.outs]
    shapes = "; ".join(_fmt_shape(a) for a in outs if a.dtype is not None)
    return f"{head}\n{shapes}" if shapes else head


def to_dot(g, *, title=None, fused=None, dim=None, name="G", rankdir="TB"):
    """DOT text of graph ``g`` (a user's graph or a derived one from the passes).

    Parameters
    ----------
    g : Graph
    title : str, optional
        A label above the picture.
    fused : dict, optional
        ``output value id of a fused equation -> the equations it replaced``
        (in order): each fused kernel is drawn as an outlined cluster of them.
    dim : set of int, optional
        Output value ids of equations to draw dashed and grey (those a fetch
        does not need, in a picture of the whole graph).
    name : str
        The DOT graph's name.
    rankdir : {"TB", "LR"}
        Data flows top to bottom, or left to right.
    """
    eqns = list(g.eqns)
    fused = fused or {}
    n_drawn = sum(len(fused.get(e.outs[0], (e,))) for e in eqns)
    if n_drawn > MAX_NODES:
        raise ValueError(f"to_dot: the graph has {n_drawn} equations to draw, more than MAX_NODES={MAX_NODES} "
                         f"(Graphviz would take minutes); draw a smaller graph")
    outputs = set(g.outputs)
    lines = [f"digraph {dot_quote(name)} {{", f"  rankdir={rankdir};",
             '  node [fontname="DejaVu Sans", fontsize=10];', '  edge [color="#777777", arrowsize=0.6];']
    if title:
        lines += [f"  label={dot_quote(title)};", "  labelloc=t;", "  fontsize=14;", '  fontname="DejaVu Sans";']
    producer = {}           # value id -> DOT node id
    consts = {}             # value id -> scalar constant equation (drawn at each use)
    drawn = []              # equations drawn, in order
    prod = g.producers()
    n_kernels = 0

    def node_id(e):
        return f"v{e.outs[0]}"

    for e in eqns:
        if _is_scalar_const(e):
            for o in e.outs:
                consts[o] = e
            continue
        members = fused.get(e.outs[0])
        if members:
            n_kernels += 1
            lines.append(f"  subgraph cluster_fused_{e.outs[0]} {{")
            ops = "+".join(m.prim.name for m in members)
            lines.append(f"    label={dot_quote(f'fused kernel {n_kernels}: {ops}')}; fontsize=10; "
                         f'style="rounded,filled"; fillcolor="#fff5e6"; color="#e6550d"; penwidth=1.5;')
            for m in members:
                attrs = _OP + (", peripheries=2" if any(o in outputs for o in m.outs) else "")
                lines.append(f"    {node_id(m)} [label={dot_quote(_label(g, m))}, {attrs}];")
                for o in m.outs:
                    producer[o] = node_id(m)
            lines.append("  }")
            drawn.extend(members)
            continue
        if _source(e.prim) == "constant":
            style = _CONST
            label = _const_text(e)
        elif _source(e.prim) in _STYLE:
            style = _STYLE[_source(e.prim)]
            label = _label(g, e)
        elif getattr(e.prim, "effect", False):
            style = _EFFECT
            label = _label(g, e)
        elif e.prim.name == "fused":
            style = _FUSED
            label = _label(g, e)
        else:
            style = _OP
            label = _label(g, e)
        if any(o in outputs for o in e.outs):
            style += ", peripheries=2"
        if dim and e.outs[0] in dim:
            style += ', style="rounded,dashed", color="#aaaaaa", fontcolor="#999999"'
        lines.append(f"  {node_id(e)} [label={dot_quote(label)}, {style}];")
        for o in e.outs:
            producer[o] = node_id(e)
        drawn.append(e)

    n_const = 0
    for e in drawn:
        for i in e.ins:
            src = producer.get(i)
            if src is None and i in consts:
                n_const += 1
                src = f"c{n_const}"
                lines.append(f"  {src} [label={dot_quote(_const_text(consts[i]))}, {_CONST}];")
            assert src is not None, f"to_dot: v{i} has no producer in the graph"
            pe = prod[i] if isinstance(prod, list) else prod.get(i)
            port = ""
            if pe is not None and pe.prim.multiple_results:
                port = f' [label="{pe.outs.index(i)}", fontsize=8]'
            lines.append(f"  {src} -> {node_id(e)}{port};")
    lines.append("}")
    return "\n".join(lines) + "\n"
