"""The autobatch schedule as a picture: a minibatch of trees, each node coloured by the batched call it ran in.

Under ``dynnets.autobatch`` the per-node code of a whole minibatch is
recorded first and then run as a few batched calls, one per group of nodes
with the same signature (the primitive, its attributes, the shapes of the
per-instance inputs, the identity of the shared weights). This picture shows
that grouping: every tree of the minibatch is drawn with the tidy layout of
:mod:`dynnets.plots.trees`, and each node is a disc filled with the colour
of the call that computed its state, its number written inside, so the
leaves of all trees (one call when their signature is shared) and each
level-like wave of internal nodes can be seen across the trees.

Colours: call ``k`` gets the hue ``k * 137.5°`` (the golden angle, so calls
close in execution order get far-apart hues) at fixed saturation and
lightness; the number inside tells calls of similar hue apart.

:func:`tree_node_calls` runs a tree model's per-node code for a minibatch
under the context (``mode="autobatch"``, which tags each tree node's ops
``(tree, node)``) and reads the call of every node's state from
``ab.schedule``; :func:`schedule_svg` draws any such assignment,
:func:`write_schedule_svg` writes it.
"""
from __future__ import annotations

import colorsys
from xml.sax.saxutils import escape, quoteattr

from .trees import FONT_FAMILY, text_width, tree_layout

__all__ = ["call_colour", "preorder_from_postorder", "schedule_svg", "write_schedule_svg", "tree_node_calls"]

_RADIUS = 9.0
_LEVEL = 30.0
_GAP = 4.0


def _f(v):
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _preorder(tree):
    """Nodes, parent index and children lists in preorder (iterative, any depth)."""
    nodes, parent, children = [], [], []
    stack = [(tree, -1)]
    while stack:
        n, p = stack.pop()
        nodes.append(n)
        parent.append(p)
        children.append([])
        if p >= 0:
            children[p].append(len(nodes) - 1)
        stack.extend((c, len(nodes) - 1) for c in reversed(n.children))
    return nodes, parent, children


def call_colour(k):
    """The fill of batched call ``k`` (``#rrggbb``)."""
    h = (k * 137.508) % 360.0 / 360.0
    r, g, b = colorsys.hls_to_rgb(h, 0.62, 0.65)
    return "#{:02x}{:02x}{:02x}".format(round(r * 255), round(g * 255), round(b * 255))


def preorder_from_postorder(tree, values):
    """``values`` given per node in postorder (children first, left to right,
    as :func:`dynnets.models.common.prepare_trees` numbers nodes) reordered to
    preorder (as :func:`~dynnets.plots.trees.tree_layout` numbers them)."""
    _, _, children = _preorder(tree)
    values = list(values)
    if len(values) != len(children):
        raise ValueError(f"preorder_from_postorder: the tree has {len(children)} nodes, got {len(values)} values")
    post = [0] * len(children)
    k = 0
    stack = [(0, False)]
    while stack:
        v, done = stack.pop()
        if done:
            post[v] = k
            k += 1
            continue
        stack.append((v, True))
        for c in reversed(children[v]):
            stack.append((c, False))
    return [values[post[v]] for v in range(len(children))]


def schedule_svg(trees, calls, *, title=None, call_names=None, max_width=1100.0):
    """An SVG picture of a minibatch's autobatch schedule.

    Parameters
    ----------
    trees : sequence of Tree
    calls : sequence of sequences of int
        For each tree, the batched-call id of each node's state, in preorder
        (:func:`preorder_from_postorder` converts from postorder).
    title : str, optional
        Caption (default: the counts of trees, nodes and calls).
    call_names : dict int -> str, optional
        A description of each call (e.g. its primitive), shown on hover and
        in the legend.
    max_width : float
        Trees are placed left to right, a new row started before one would
        pass this width (pixels); a wider tree gets a row of its own.

    Returns
    -------
    str
        A standalone SVG document. Each node is a ``<circle class="node">``
        with ``data-tree``, ``data-index`` (preorder), ``data-call`` and the
        ``fill`` of :func:`call_colour` of its call; the legend has one
        ``<circle data-legend-call=k>`` per call.
    """
    trees = list(trees)
    calls = [list(c) for c in calls]
    if len(calls) != len(trees):
        raise ValueError(f"schedule_svg: {len(trees)} trees but {len(calls)} call lists")
    call_names = call_names or {}
    layouts, structures = [], []
    for t, (tree, c) in enumerate(zip(trees, calls)):
        nodes, parent, _ = _preorder(tree)
        if len(c) != len(nodes):
            raise ValueError(f"schedule_svg: tree {t} has {len(nodes)} nodes, got {len(c)} call ids")
        layouts.append(tree_layout(tree, [2 * _RADIUS] * len(nodes), sibling_gap=_GAP, cousin_gap=_GAP))
        structures.append((nodes, parent))
    font = 12.0
    margin = 10.0
    used = sorted({k for c in calls for k in c})
    n_nodes = sum(len(c) for c in calls)
    caption = title or (f"autobatch schedule: {len(trees)} trees, {n_nodes} nodes, {len(used)} batched calls "
                        f"(colour and number: the call that computed each node's state)")
    # trees side by side, left to right, a new row when the next would pass max_width
    boxes, x, y, row_h = [], margin, margin + 1.1 * font + 12.0, 0.0
    for lay in layouts:
        w = max(lay.extent, text_width("tree 00", 0.9 * font))
        h = 1.2 * font + (max(lay.depth, default=0) + 1) * _LEVEL
        if x > margin and x + w > max_width - margin:
            x, y, row_h = margin, y + row_h + 14.0, 0.0
        boxes.append((x, y))
        x += w + 24.0
        row_h = max(row_h, h)
    width = max([margin * 2 + text_width(caption, font)]
                + [bx + lay.extent + margin for (bx, _), lay in zip(boxes, layouts)])
    body = []
    for t, (lay, (nodes, parent), c, (bx, by)) in enumerate(zip(layouts, structures, calls, boxes)):
        top = by + 1.2 * font + _RADIUS
        body.append(f'<g class="tree" data-tree="{t}">')
        body.append(f'<text x="{_f(bx)}" y="{_f(by + 0.9 * font)}" font-size="{_f(0.9 * font)}" fill="#444444">'
                    f'tree {t}</text>')
        for v in range(1, len(nodes)):
            p = parent[v]
            body.append(f'<line x1="{_f(bx + lay.x[p])}" y1="{_f(top + lay.depth[p] * _LEVEL)}" '
                        f'x2="{_f(bx + lay.x[v])}" y2="{_f(top + lay.depth[v] * _LEVEL)}" stroke="#999999" '
                        f'stroke-width="1"/>')
        for v, nd in enumerate(nodes):
            k = int(c[v])
            cx, cy = bx + lay.x[v], top + lay.depth[v] * _LEVEL
            what = f"leaf {nd.word!r}" if nd.word is not None else f"internal node, {len(nd.children)} children"
            tip = f"tree {t}, node {v} ({what}): batched call {k}"
            if k in call_names:
                tip += f" ({call_names[k]})"
            body.append(f'<g><title>{escape(tip)}</title><circle class="node" data-tree="{t}" data-index="{v}" '
                        f'data-call="{k}" cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(_RADIUS)}" fill="{call_colour(k)}" '
                        f'stroke="#444444" stroke-width="0.75"/>'
                        f'<text x="{_f(cx)}" y="{_f(cy + 3.5)}" text-anchor="middle" font-size="9">{k}</text></g>')
        body.append("</g>")
    y = max((by + 1.2 * font + (max(lay.depth, default=0) + 1) * _LEVEL for (_, by), lay in zip(boxes, layouts)),
            default=margin + 2 * font) + 10.0
    # legend: every call, in execution order, with its description when given
    body.append('<g class="legend">')
    x = margin
    for k in used:
        label = f"{k}: {call_names[k]}" if k in call_names else f"call {k}"
        w = 2 * _RADIUS + 6 + text_width(label, 0.85 * font) + 14.0
        if x > margin and x + w > width - margin:
            x, y = margin, y + 2 * _RADIUS + 6
        body.append(f'<circle data-legend-call="{k}" cx="{_f(x + _RADIUS)}" cy="{_f(y + _RADIUS)}" '
                    f'r="{_f(_RADIUS)}" fill="{call_colour(k)}" stroke="#444444" stroke-width="0.75"/>'
                    f'<text x="{_f(x + 2 * _RADIUS + 6)}" y="{_f(y + _RADIUS + 4)}" font-size="{_f(0.85 * font)}">'
                    f'{escape(label)}</text>')
        x += w
    body.append("</g>")
    height = y + 2 * _RADIUS + margin
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(height)}" '
           f'viewBox="0 0 {_f(width)} {_f(height)}" font-family="{FONT_FAMILY}" font-size="{_f(font)}" '
           f'role="img" aria-label={quoteattr(caption)}>',
           f"<title>{escape(caption)}</title>",
           '<rect width="100%" height="100%" fill="#ffffff"/>',
           f'<text class="caption" x="{_f(margin)}" y="{_f(margin + 1.1 * font)}">{escape(caption)}</text>',
           *body, "</svg>"]
    return "\n".join(out) + "\n"


def write_schedule_svg(path, trees, calls, **kwargs):
    """Write :func:`schedule_svg` to ``path`` atomically; returns the path."""
    from .. import io as dio
    dio.atomic_write_text(path, schedule_svg(trees, calls, **kwargs))
    return path


def tree_node_calls(model, trees, vocab, strategy="agenda", levels=False):
    """The batched call that computed each tree node's state, for a minibatch
    of trees run through a tree model's per-node code under ``dynnets.autobatch``.

    Parameters
    ----------
    model : a tree model (``TreeLSTM``, ``TreeRNN``, ``ChildSumTreeLSTM``)
        Run in ``mode="autobatch"`` with ``strategy`` for this call (its
        mode and scheduler are restored after), without recording gradients.
    trees : sequence of Tree
        The minibatch.
    vocab : Vocabulary
    strategy : {"agenda", "depth"}
    levels : bool
        Let the levels lowering run a chain of node groups as one call (the
        model's ``autobatch_levels``); the default draws the per-depth
        schedule, one call per group of nodes.

    Returns
    -------
    calls : list of lists of int
        For each tree, the call id of each node in preorder (as
        :func:`schedule_svg` takes them): the last call among the ops the
        model recorded for that node (tagged ``(tree, node)`` in ``ab.schedule``).
    names : dict int -> str
        Each call's primitive and size (``"tree_lstm_node x 24"``).
    ab : AutoBatch
        The context, for its ``schedule``, ``calls`` and ``stats``.
    """
    from ..autograd import no_grad

    trees = list(trees)
    was = model.mode, model.autobatch_strategy, model.autobatch_levels
    model.mode, model.autobatch_strategy, model.autobatch_levels = "autobatch", strategy, levels
    try:
        with no_grad():
            model.node_states(trees, vocab)
    finally:
        model.mode, model.autobatch_strategy, model.autobatch_levels = was
    ab = model.last_autobatch
    post = [[None] * t.size for t in trees]
    for s in ab.schedule:
        if s.call >= 0 and isinstance(s.tag, tuple) and s.tag[1] is not None:
            post[s.tag[0]][s.tag[1]] = s.call
    for t, p in enumerate(post):
        if any(k is None for k in p):
            raise RuntimeError(f"tree_node_calls: node {p.index(None)} (postorder) of tree {t} ran in no batched "
                               f"call")
    names = {c.call: f"{c.op} x {c.size}" + (" (fallback)" if c.fallback else "") for c in ab.calls}
    return [preorder_from_postorder(tree, p) for tree, p in zip(trees, post)], names, ab
