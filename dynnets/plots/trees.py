"""Sentiment trees as pictures: a tidy layout, SVG written directly, PNG through matplotlib.

Every node is drawn as a box (a leaf: its word in a rounded box; an internal
node: a dot, or a box with its class and probability when ``text=True``),
filled by its predicted class on a 5-step diverging palette (red: negative,
grey: neutral, blue: positive; ColorBrewer's RdBu, whose ends stay apart
for the common colour-vision deficiencies, with its near-white middle
replaced by a grey that shows on white). A node's ``<title>`` (shown on
hover) gives its words, the predicted class and probability, every class
probability and the gold label when known; nodes where prediction and gold
disagree get a dashed ring.

Layout: :func:`tree_layout` is the Reingold-Tilford tidy drawing in
Buchheim, Jünger and Leipert's linear-time form (2002), with the distance
between two neighbouring nodes of a level computed from *their* widths, so
boxes of one level never overlap however long their words. Levels are bands
of equal height, and an edge leaves its nodes' own columns only in the space
between two bands, so no box overlaps another box or an edge; an ordered
tidy layout has no crossing edges. Parents are centred over their first and
last child. Both walks are loops, so a tree of any depth can be drawn.

Text widths come from DejaVu Sans' advance widths (the table below, read
from the font's ``hmtx``; characters outside it count as 1.1 em, more than
any glyph of the font), the font named first in the SVG and the one
matplotlib draws PNGs with. Other sans-serif fonts a browser may fall back
to (Verdana, Arial, Helvetica) are as wide or narrower, so a label never
needs more room than the layout gave it.
"""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

import numpy as np

from ..data.sst import class_names

__all__ = ["PALETTE", "palette", "class_names", "text_width", "TreeLayout", "tree_layout", "layout_violations", "scene",
           "tree_svg", "write_tree_svg", "tree_png", "write_tree_png", "SIBLING_GAP", "COUSIN_GAP"]

#: Very negative, negative, neutral, positive, very positive.
PALETTE = ("#ca0020", "#f4a582", "#cccccc", "#92c5de", "#0571b0")

#: DejaVu Sans advance widths in 1/2048 em: U+0020..U+007E, then U+00A0..U+017F.
DEJAVU_SANS_WIDTHS = (
    651, 821, 942, 1716, 1303, 1946, 1597, 563, 799, 799, 1024, 1716, 651, 739, 651, 690, 1303, 1303, 1303, 1303,
    1303, 1303, 1303, 1303, 1303, 1303, 690, 690, 1716, 1716, 1716, 1087, 2048, 1401, 1405, 1430, 1577, 1294, 1178,
    1587, 1540, 604, 604, 1343, 1141, 1767, 1532, 1612, 1235, 1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403, 1251,
    1403, 799, 690, 799, 1716, 1024, 1024, 1255, 1300, 1126, 1300, 1260, 721, 1300, 1298, 569, 569, 1186, 569, 1995,
    1298, 1253, 1300, 1300, 842, 1067, 803, 1298, 1212, 1675, 1212, 1212, 1075, 1303, 690, 1303, 1716,
    651, 821, 1303, 1303, 1303, 1303, 690, 1024, 1024, 2048, 965, 1253, 1716, 739, 2048, 1024, 1024, 1716, 821, 821,
    1024, 1303, 1303, 651, 1024, 821, 965, 1253, 1985, 1985, 1985, 1087, 1401, 1401, 1401, 1401, 1401, 1401, 1995,
    1430, 1294, 1294, 1294, 1294, 604, 604, 604, 604, 1587, 1532, 1612, 1612, 1612, 1612, 1612, 1716, 1612, 1499,
    1499, 1499, 1499, 1251, 1239, 1290, 1255, 1255, 1255, 1255, 1255, 1255, 2011, 1126, 1260, 1260, 1260, 1260, 569,
    569, 569, 569, 1253, 1298, 1253, 1253, 1253, 1253, 1253, 1716, 1253, 1298, 1298, 1298, 1298, 1212, 1300, 1212,
    1401, 1255, 1401, 1255, 1401, 1255, 1430, 1126, 1430, 1126, 1430, 1126, 1430, 1126, 1577, 1300, 1587, 1300, 1294,
    1260, 1294, 1260, 1294, 1260, 1294, 1260, 1294, 1260, 1587, 1300, 1587, 1300, 1587, 1300, 1587, 1300, 1540, 1298,
    1876, 1423, 604, 569, 604, 569, 604, 569, 604, 569, 604, 569, 1208, 1138, 604, 569, 1343, 1186, 1186, 1141, 569,
    1141, 569, 1141, 768, 1141, 700, 1151, 582, 1532, 1298, 1532, 1298, 1532, 1298, 1666, 1532, 1298, 1612, 1253,
    1612, 1253, 1612, 1253, 2191, 2095, 1423, 842, 1423, 842, 1423, 842, 1300, 1067, 1300, 1067, 1300, 1067, 1300,
    1067, 1251, 803, 1251, 803, 1251, 803, 1499, 1298, 1499, 1298, 1499, 1298, 1499, 1298, 1499, 1298, 1499, 1298,
    2025, 1675, 1251, 1212, 1251, 1403, 1075, 1403, 1075, 1403, 1075, 721)
_OTHER_EM = 1.1
FONT_FAMILY = "'DejaVu Sans', Verdana, 'Bitstream Vera Sans', Arial, Helvetica, sans-serif"

def palette(C):
    """``C`` colours from very negative to very positive: :data:`PALETTE` for 5
    classes, its ends for 2, its ends and middle for 3, else interpolated."""
    if C == 5:
        return PALETTE
    if C == 2:
        return (PALETTE[0], PALETTE[4])
    if C == 3:
        return (PALETTE[0], PALETTE[2], PALETTE[4])
    if C < 1:
        raise ValueError(f"palette: expected at least one class, got {C}")
    rgb = np.array([[int(c[k:k + 2], 16) for k in (1, 3, 5)] for c in PALETTE], float)
    out = []
    for i in range(C):
        t = 4.0 * i / max(C - 1, 1)
        k = min(int(t), 3)
        v = rgb[k] + (t - k) * (rgb[k + 1] - rgb[k])
        out.append("#" + "".join(f"{int(round(c)):02x}" for c in v))
    return tuple(out)


def _text_colour(fill):
    r, g, b = (int(fill[k:k + 2], 16) / 255 for k in (1, 3, 5))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#ffffff" if lum < 0.45 else "#111111"


def text_width(s, size):
    """Width in pixels of ``s`` set in DejaVu Sans at ``size`` pixels (no kerning: an upper bound)."""
    units = 0
    other = 0
    for ch in s:
        c = ord(ch)
        if 32 <= c <= 126:
            units += DEJAVU_SANS_WIDTHS[c - 32]
        elif 160 <= c <= 383:
            units += DEJAVU_SANS_WIDTHS[c - 160 + 95]
        else:
            other += 1
    return size * (units / 2048.0 + other * _OTHER_EM)


# --------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------


#: Smallest gaps (pixels) between neighbouring boxes of a level: with the same parent, with different parents.
SIBLING_GAP = 4.0
COUSIN_GAP = 8.0


class TreeLayout:
    """Positions of a tree's nodes, in preorder.

    Attributes
    ----------
    x : ndarray (n,)
        Centre of each node's box (pixels, the leftmost box edge at 0).
    depth : ndarray (n,) of int
        Level of each node (the root 0); its box's centre is at ``depth * level_height``.
    width : ndarray (n,)
        The box widths the layout was made for.
    parent : ndarray (n,) of int
        Preorder index of each node's parent (-1 for the root).
    extent : float
        Width of the whole drawing (rightmost box edge).
    """

    __slots__ = ("x", "depth", "width", "parent", "extent")

    def __init__(self, x, depth, width, parent):
        self.x = x
        self.depth = depth
        self.width = width
        self.parent = parent
        self.extent = float(np.max(x + width / 2)) if len(x) else 0.0


def _structure(tree):
    """Preorder arrays of ``tree``: nodes, parent index, children index lists (iterative, any depth)."""
    nodes, parent, children = [], [], []
    stack = [(tree, -1)]
    while stack:
        n, p = stack.pop()
        i = len(nodes)
        nodes.append(n)
        parent.append(p)
        children.append([])
        if p >= 0:
            children[p].append(i)
        for c in reversed(n.children):
            stack.append((c, i))
    return nodes, parent, children


def tree_layout(tree, widths, sibling_gap=SIBLING_GAP, cousin_gap=COUSIN_GAP):
    """Tidy layout (Reingold-Tilford, Buchheim et al.'s linear-time algorithm) of boxes of ``widths``.

    Parameters
    ----------
    tree : Tree
    widths : sequence of float, (n_nodes,)
        Box width of each node, in preorder.
    sibling_gap, cousin_gap : float
        Smallest horizontal gap between two neighbouring boxes of one level
        with the same parent / with different parents.

    Returns
    -------
    TreeLayout
    """
    nodes, parent, children = _structure(tree)
    n = len(nodes)
    w = np.asarray(widths, float)
    if w.shape != (n,):
        raise ValueError(f"tree_layout: expected {n} widths (one per node, preorder), got shape {w.shape}")
    number = [0] * n               # index among its siblings
    for kids in children:
        for k, c in enumerate(kids):
            number[c] = k
    prelim = [0.0] * n
    mod = [0.0] * n
    shift = [0.0] * n
    change = [0.0] * n
    thread = [-1] * n
    ancestor = list(range(n))
    # position of each node's first-walk midpoint over its children (internal nodes)
    midpoint = [0.0] * n

    def distance(a, b):
        gap = sibling_gap if parent[a] == parent[b] else cousin_gap
        return 0.5 * (w[a] + w[b]) + gap

    def next_left(v):
        return children[v][0] if children[v] else thread[v]

    def next_right(v):
        return children[v][-1] if children[v] else thread[v]

    def move_subtree(wm, wp, s):
        k = number[wp] - number[wm]
        change[wp] -= s / k
        shift[wp] += s
        change[wm] += s / k
        prelim[wp] += s
        mod[wp] += s

    def apportion(v, default_ancestor):
        p = parent[v]
        left = children[p][number[v] - 1]
        vip = vop = v
        vim = left
        vom = children[p][0]
        sip, sop, sim, som = mod[vip], mod[vop], mod[vim], mod[vom]
        while next_right(vim) >= 0 and next_left(vip) >= 0:
            vim = next_right(vim)
            vip = next_left(vip)
            vom = next_left(vom)
            vop = next_right(vop)
            ancestor[vop] = v
            s = (prelim[vim] + sim) - (prelim[vip] + sip) + distance(vim, vip)
            if s > 0:
                a = ancestor[vim]
                move_subtree(a if parent[a] == p else default_ancestor, v, s)
                sip += s
                sop += s
            sim += mod[vim]
            sip += mod[vip]
            som += mod[vom]
            sop += mod[vop]
        if next_right(vim) >= 0 and next_right(vop) < 0:
            thread[vop] = next_right(vim)
            mod[vop] += sim - sop
        if next_left(vip) >= 0 and next_left(vom) < 0:
            thread[vom] = next_left(vip)
            mod[vom] += sip - som
            default_ancestor = v
        return default_ancestor

    # first walk, in postorder (reversed root-right-left preorder): each node, once
    # its subtrees are laid out, places its children side by side
    order = []
    stack = [0]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(children[v])
    for v in reversed(order):
        kids = children[v]
        if not kids:
            continue
        default_ancestor = kids[0]
        for k, c in enumerate(kids):
            if k == 0:
                prelim[c] = midpoint[c] if children[c] else 0.0
                continue
            left = kids[k - 1]
            prelim[c] = prelim[left] + distance(left, c)
            if children[c]:
                mod[c] = prelim[c] - midpoint[c]
            default_ancestor = apportion(c, default_ancestor)
        s = ch = 0.0
        for c in reversed(kids):              # execute the shifts apportion recorded
            prelim[c] += s
            mod[c] += s
            ch += change[c]
            s += shift[c] + ch
        midpoint[v] = 0.5 * (prelim[kids[0]] + prelim[kids[-1]])
    prelim[0] = midpoint[0] if children[0] else 0.0

    # second walk, preorder: absolute positions
    x = np.empty(n)
    depth = np.zeros(n, np.int64)
    acc = [0.0] * n                  # sum of the ancestors' mod
    for v in range(n):               # preorder: parents before children
        p = parent[v]
        if p >= 0:
            acc[v] = acc[p] + mod[p]
            depth[v] = depth[p] + 1
        x[v] = prelim[v] + acc[v]
    x -= np.min(x - w / 2)
    return TreeLayout(x, depth, w, np.asarray(parent, np.int64))


def layout_violations(tree, layout, sibling_gap=SIBLING_GAP, cousin_gap=COUSIN_GAP, tol=1e-6):
    """Where ``layout`` breaks the rules of a tidy drawing, as a list of messages (empty: none).

    Checks, level by level: neighbouring boxes at least ``sibling_gap``
    apart when they share a parent, ``cousin_gap`` otherwise (so no two
    boxes overlap); nodes in the tree's left-to-right order (so no two edges
    cross); every parent centred over its first and last child.
    """
    nodes, parent, children = _structure(tree)
    x, w, depth = layout.x, layout.width, layout.depth
    bad = []
    levels = {}
    for v in range(len(nodes)):             # preorder visits each level left to right
        levels.setdefault(int(depth[v]), []).append(v)
    for d, row in levels.items():
        for a, b in zip(row, row[1:]):
            need = sibling_gap if parent[a] == parent[b] else cousin_gap
            room = x[b] - x[a] - 0.5 * (w[a] + w[b])
            if room < need - tol * max(1.0, abs(x[b])):
                bad.append(f"level {d}: nodes {a} and {b} are {room:.3f} px apart (need {need})")
    for v, kids in enumerate(children):
        if kids:
            mid = 0.5 * (x[kids[0]] + x[kids[-1]])
            if abs(x[v] - mid) > tol * max(1.0, abs(mid)):
                bad.append(f"node {v} is at {x[v]:.3f}, not centred over its children ({mid:.3f})")
    return bad


# --------------------------------------------------------------------------
# what is drawn
# --------------------------------------------------------------------------


def _node_data(tree, nodes, predictions, gold):
    """(pred, proba rows or None, gold list or None) per preorder node."""
    n = len(nodes)
    record_gold = None
    if predictions is None:
        labels = [nd.label for nd in nodes]
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in labels):
            raise ValueError("tree_svg: without predictions the tree's labels are drawn, and they must be "
                             "integer classes")
        pred, proba = [int(v) for v in labels], None
        if gold is None:
            gold = False
    else:
        if isinstance(predictions, dict):
            items = predictions.get("nodes")
            if items is None:
                raise ValueError("tree_svg: the prediction has no per-node predictions ('nodes' is None): it needs "
                                 "a tree model's node_predictions (dynnets predict --nodes)")
            proba = np.asarray([it["proba"] for it in items], float)
            record_gold = [it.get("gold") for it in items]
        else:
            proba = np.asarray(predictions, float)
        if proba.ndim != 2 or proba.shape[0] != n:
            raise ValueError(f"tree_svg: expected probabilities of shape ({n}, C), one row per node in preorder, "
                             f"got {proba.shape}")
        if proba.shape[1] < 1 or not np.all(np.isfinite(proba)):
            raise ValueError("tree_svg: the probabilities must be finite, with at least one class")
        pred = [int(k) for k in np.argmax(proba, axis=1)]
    if gold is True:
        gold = [nd.label for nd in nodes]
    elif gold is None:
        gold = record_gold if record_gold is not None and any(g is not None for g in record_gold) else False
    if gold is False:
        gold = None
    else:
        gold = list(gold)
        if len(gold) != n:
            raise ValueError(f"tree_svg: expected {n} gold labels (one per node, preorder), got {len(gold)}")
    return pred, proba, gold


def _span_text(words, start, end, limit=12):
    """The words of a span, at most ``limit`` of them shown (titles stay linear in a deep tree's size)."""
    k = end - start
    if k <= limit:
        return " ".join(words[start:end])
    return " ".join(words[start:start + limit - 3]) + " … " + " ".join(words[end - 2:end]) + f" ({k} words)"


def _spans(children):
    """(start, end) word offsets of every node's span (preorder arrays)."""
    n = len(children)
    start = [0] * n
    end = [0] * n
    w = 0
    for v in range(n):                      # the leaves in preorder are the words in order
        if not children[v]:
            start[v], end[v] = w, w + 1
            w += 1
    for v in reversed(range(n)):            # reverse preorder: children before parents
        if children[v]:
            start[v], end[v] = start[children[v][0]], end[children[v][-1]]
    return start, end


_XML_BAD = {c: "\ufffd" for c in list(range(0, 9)) + [11, 12] + list(range(14, 32)) + [0xFFFE, 0xFFFF]}


def _xml_text(s):
    """``s`` safe as XML character data (characters XML 1.0 forbids replaced by U+FFFD)."""
    s = s.translate(_XML_BAD)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        s = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)
    return s


class _Scene:
    """Everything both renderers draw: boxes, edges, legend, caption, in pixels."""

    def __init__(self, tree, predictions, gold, text, title, names, font_size, colours):
        nodes, parent, children = _structure(tree)
        pred, proba, gold = _node_data(tree, nodes, predictions, gold)
        if proba is not None:
            C = proba.shape[1]
        elif names is not None:
            C = len(names)
        else:
            C = max(5, max(pred) + 1)
        if min(pred) < 0 or max(pred) >= C:
            raise ValueError(f"tree_svg: the tree's labels must be classes 0..{C - 1}, got {min(pred)}..{max(pred)}")
        self.C = C
        self.names = tuple(names) if names is not None else class_names(C)
        if len(self.names) < C:
            raise ValueError(f"tree_svg: {C} classes but {len(self.names)} class names")
        self.colours = tuple(colours) if colours is not None else palette(C)
        if len(self.colours) < C:
            raise ValueError(f"tree_svg: {C} classes but {len(self.colours)} colours")
        for g in gold or ():
            if g is not None and not (isinstance(g, (int, np.integer)) and 0 <= g < C):
                raise ValueError(f"tree_svg: gold labels must be classes 0..{C - 1} or None, got {g!r}")
        self.nodes, self.parent, self.children = nodes, parent, children
        self.pred, self.proba, self.gold = pred, proba, gold
        self.font = float(font_size)
        f = self.font
        self.pad = 0.4 * f                      # text padding inside a box
        self.ring = 3.0                         # the mismatch ring's distance from its box
        self.box_h = 1.5 * f if not text else 2.7 * f
        self.dot = 0.9 * f                      # an internal node's dot diameter
        self.text = bool(text)
        self.level_h = self.box_h + 2.0 * self.ring + 1.6 * f
        words = tree.words()
        self.words = words
        start, end = _spans(children)
        labels, second, vis_w = [], [], []
        for v, nd in enumerate(nodes):
            lab = _xml_text(nd.word) if nd.word is not None else ""
            sub = ""
            if text:
                sub = f"{pred[v]}" + (f" {proba[v, pred[v]]:.2f}" if proba is not None else "")
                if gold is not None and gold[v] is not None and gold[v] != pred[v]:
                    sub += f" (gold {gold[v]})"
            labels.append(lab)
            second.append(sub)
            if nd.word is None and not text:
                vis_w.append(self.dot)
            else:
                vis_w.append(max(text_width(lab, f), text_width(sub, 0.85 * f)) + 2 * self.pad)
        self.labels, self.second = labels, second
        self.vis_w = np.asarray(vis_w)
        self.layout = tree_layout(tree, self.vis_w + 2 * self.ring)
        self.titles = [self._title(v, start[v], end[v]) for v in range(len(nodes))]
        root = 0
        self.caption = title
        if title is None:
            p = f" {proba[root, pred[root]]:.2f}" if proba is not None else ""
            g = ""
            if gold is not None and gold[root] is not None:
                g = f", gold {gold[root]} {self.names[gold[root]]}"
            what = "predicted" if proba is not None else "label"
            self.caption = f"{what}: {pred[root]} {self.names[pred[root]]}{p}{g}"
        self.caption = _xml_text(self.caption)
        self.mismatch = [gold is not None and gold[v] is not None and gold[v] != pred[v] for v in range(len(nodes))]
        # legend entries: (colour or None for the ring, text, width)
        sw = 1.0 * f
        entries = [(self.colours[k], f"{k} {self.names[k]}") for k in range(C)]
        if gold is not None:
            entries.append((None, "prediction ≠ gold"))
        self.legend = [(c, t, sw + 0.4 * f + text_width(t, 0.9 * f)) for c, t in entries]
        self.margin = 8.0
        self.head = 2.2 * f + 1.5 * f          # caption line and legend line
        leg_w = sum(e[2] for e in self.legend) + 1.2 * f * (len(self.legend) - 1)
        cap_w = text_width(self.caption, f)
        self.width = max(self.layout.extent, leg_w, cap_w) + 2 * self.margin
        self.height = self.head + self.margin + (float(self.layout.depth.max()) + 1) * self.level_h + self.margin

    def _title(self, v, start, end):
        lines = [_xml_text(_span_text(self.words, start, end))]
        k = self.pred[v]
        if self.proba is not None:
            lines.append(f"predicted {k} {self.names[k]} ({self.proba[v, k]:.3f})")
            lines.append("probabilities: " + " ".join(f"{p:.3f}" for p in self.proba[v]))
        else:
            lines.append(f"label {k} {self.names[k]}")
        if self.gold is not None and self.gold[v] is not None:
            g = self.gold[v]
            lines.append(f"gold {g} {self.names[g]}" + (" (differs)" if g != k else ""))
        return "\n".join(lines)

    def centre(self, v):
        """(x, y) of node ``v``'s box centre."""
        lay = self.layout
        x = self.margin + float(lay.x[v])
        y = self.head + self.margin + self.ring + 0.5 * self.box_h + float(lay.depth[v]) * self.level_h
        return x, y

    def edge(self, v):
        """The points of the edge into node ``v`` from its parent: down from the
        parent's box to the bottom of its level's band (the tallest box and its
        ring), across to the top of the child's band, down to the child's box.
        Only the slanted middle part leaves a node's own column, and it runs
        between two bands, where there are no boxes."""
        p = self.parent[v]
        px, py = self.centre(p)
        cx, cy = self.centre(v)
        _, pt, _, ph = self.box(p)
        _, ct, _, _ = self.box(v)
        half = 0.5 * self.box_h + self.ring
        return [(px, pt + ph), (px, py + half), (cx, cy - half), (cx, ct)]

    def box(self, v):
        """(left, top, width, height) of node ``v``'s drawn box (a dot's square for a bare internal node)."""
        x, y = self.centre(v)
        w = float(self.vis_w[v])
        h = self.box_h if (self.nodes[v].word is not None or self.text) else self.dot
        return x - w / 2, y - h / 2, w, h


def scene(tree, predictions=None, *, gold=None, text=False, title=None, class_names=None, colours=None,
          font_size=12):
    """What :func:`tree_svg` and :func:`tree_png` draw, before drawing: the
    layout (``.layout``), every box (``.box(v)``), edge (``.edge(v)``) and
    the picture's size (``.width``, ``.height``), for the same arguments."""
    return _Scene(tree, predictions, gold, text, title, class_names, font_size, colours)


# --------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------


def _f(v):
    return f"{v:.1f}".rstrip("0").rstrip(".") if abs(v - round(v)) > 1e-9 else str(int(round(v)))


def tree_svg(tree, predictions=None, *, gold=None, text=False, title=None, class_names=None, colours=None,
             font_size=12):
    """An SVG picture of ``tree`` coloured by predicted sentiment.

    Parameters
    ----------
    tree : Tree
    predictions : dict, array_like or None
        Per-node predictions: a record of :func:`dynnets.runs.node_predictions`
        (or one of ``dynnets predict --json --nodes``), whose ``nodes`` list
        the nodes in preorder; or probabilities of shape (n_nodes, C) in
        preorder; or None to draw the tree's own (gold) labels.
    gold : None, True, False or sequence
        Gold labels (preorder): None takes those of a record (its ``gold``
        fields, null for unlabelled input); True the tree's labels; False none.
    text : bool
        Also write each node's predicted class and probability (and the gold
        label where it differs) in its box; otherwise they are in the hover title.
    title : str, optional
        The caption line (default: the root's prediction and gold label).
    class_names, colours : sequences, optional
        Override :func:`class_names` and :func:`palette`.
    font_size : float
        Pixels.

    Returns
    -------
    str
        A standalone SVG document. Each node is a ``<g class="node">`` with
        ``data-index`` (preorder), ``data-pred``, ``data-gold`` (when known),
        ``data-fill`` and a ``<title>``; the root has ``data-root="1"``.
    """
    s = scene(tree, predictions, gold=gold, text=text, title=title, class_names=class_names, colours=colours,
              font_size=font_size)
    f = s.font
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(s.width)}" height="{_f(s.height)}" '
           f'viewBox="0 0 {_f(s.width)} {_f(s.height)}" font-family="{FONT_FAMILY}" font-size="{_f(f)}" '
           f'role="img" aria-label={quoteattr(s.caption)}>',
           f"<title>{escape(_xml_text(' '.join(s.words)))}</title>",
           '<rect width="100%" height="100%" fill="#ffffff"/>']
    # caption and legend
    out.append(f'<text class="caption" x="{_f(s.margin)}" y="{_f(s.margin + 1.1 * f)}">{escape(s.caption)}</text>')
    x = s.margin
    y = s.margin + 2.2 * f
    sw = 1.0 * f
    out.append('<g class="legend">')
    for colour, label, width in s.legend:
        if colour is None:
            out.append(f'<rect x="{_f(x + 1)}" y="{_f(y + 1)}" width="{_f(sw - 2)}" height="{_f(sw - 2)}" rx="2" '
                       f'fill="none" stroke="#222222" stroke-width="1.5" stroke-dasharray="3 2"/>')
        else:
            out.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(sw)}" height="{_f(sw)}" rx="2" fill="{colour}" '
                       f'stroke="#666666" stroke-width="0.5"/>')
        out.append(f'<text x="{_f(x + sw + 0.4 * f)}" y="{_f(y + 0.85 * sw)}" font-size="{_f(0.9 * f)}">'
                   f'{escape(label)}</text>')
        x += width + 1.2 * f
    out.append("</g>")
    out.append('<g class="edges" stroke="#888888" stroke-width="1" fill="none">')
    for v in range(1, len(s.nodes)):
        pts = " ".join(f"{_f(x)},{_f(y)}" for x, y in s.edge(v))
        out.append(f'<polyline points="{pts}"/>')
    out.append("</g>")
    out.append('<g class="nodes">')
    for v, nd in enumerate(s.nodes):
        k = s.pred[v]
        fill = s.colours[k]
        attrs = f'class="node{" leaf" if nd.word is not None else ""}" data-index="{v}" data-pred="{k}" ' \
                f'data-fill="{fill}"'
        if s.gold is not None and s.gold[v] is not None:
            attrs += f' data-gold="{int(s.gold[v])}"'
        if s.mismatch[v]:
            attrs += ' data-mismatch="1"'
        if v == 0:
            attrs += ' data-root="1"'
        out.append(f"<g {attrs}><title>{escape(s.titles[v])}</title>")
        left, top, w, h = s.box(v)
        cx, cy = s.centre(v)
        if s.mismatch[v]:
            r = s.ring
            out.append(f'<rect class="mismatch" x="{_f(left - r)}" y="{_f(top - r)}" width="{_f(w + 2 * r)}" '
                       f'height="{_f(h + 2 * r)}" rx="{_f(min(h / 2 + r, 0.5 * f + r))}" fill="none" '
                       f'stroke="#222222" stroke-width="1.5" stroke-dasharray="3 2"/>')
        if nd.word is None and not s.text:
            out.append(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(w / 2)}" fill="{fill}" stroke="#555555" '
                       f'stroke-width="0.75"/>')
        else:
            out.append(f'<rect x="{_f(left)}" y="{_f(top)}" width="{_f(w)}" height="{_f(h)}" '
                       f'rx="{_f(min(h / 2, 0.5 * f))}" fill="{fill}" stroke="#555555" stroke-width="0.75"/>')
            tc = _text_colour(fill)
            if s.text:
                if s.labels[v]:
                    out.append(f'<text x="{_f(cx)}" y="{_f(top + 1.15 * f)}" text-anchor="middle" fill="{tc}">'
                               f'{escape(s.labels[v])}</text>')
                    out.append(f'<text x="{_f(cx)}" y="{_f(top + 2.3 * f)}" text-anchor="middle" fill="{tc}" '
                               f'font-size="{_f(0.85 * f)}">{escape(s.second[v])}</text>')
                else:
                    out.append(f'<text x="{_f(cx)}" y="{_f(cy + 0.3 * f)}" text-anchor="middle" fill="{tc}" '
                               f'font-size="{_f(0.85 * f)}">{escape(s.second[v])}</text>')
            else:
                out.append(f'<text x="{_f(cx)}" y="{_f(cy + 0.36 * f)}" text-anchor="middle" fill="{tc}">'
                           f'{escape(s.labels[v])}</text>')
        out.append("</g>")
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_tree_svg(path, tree, predictions=None, **kwargs):
    """Write :func:`tree_svg` to ``path`` atomically; returns the path."""
    from .. import io as dio
    dio.atomic_write_text(path, tree_svg(tree, predictions, **kwargs))
    return path


# --------------------------------------------------------------------------
# PNG (matplotlib)
# --------------------------------------------------------------------------


_NO_MPL = "PNG pictures need matplotlib: pip install 'dynnets[plot]' (or write SVG, which needs nothing)"


def tree_png(tree, predictions=None, *, scale=2.0, **kwargs):
    """The picture of :func:`tree_svg` as PNG bytes, drawn by matplotlib at
    ``scale`` device pixels per SVG pixel. Raises ImportError with the
    install command when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(_NO_MPL) from None
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle, FancyBboxPatch
    import io
    s = _Scene(tree, predictions, kwargs.pop("gold", None), kwargs.pop("text", False), kwargs.pop("title", None),
               kwargs.pop("class_names", None), kwargs.pop("font_size", 12), kwargs.pop("colours", None))
    if kwargs:
        raise TypeError(f"tree_png: unexpected arguments {sorted(kwargs)}")
    dpi = 72.0 * scale                      # 1 SVG pixel = 1 point: font sizes carry over as they are
    fig = Figure(figsize=(s.width / 72.0, s.height / 72.0), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, s.width)
    ax.set_ylim(s.height, 0)
    ax.set_axis_off()
    f = s.font
    font = dict(family="DejaVu Sans")
    ax.text(s.margin, s.margin + 1.1 * f, s.caption, fontsize=f, va="baseline", **font)
    x, y, sw = s.margin, s.margin + 2.2 * f, 1.0 * f
    for colour, label, width in s.legend:
        if colour is None:
            ax.add_patch(FancyBboxPatch((x + 1, y + 1), sw - 2, sw - 2, boxstyle="round,pad=0,rounding_size=2",
                                        fill=False, edgecolor="#222222", linewidth=1.5, linestyle=(0, (3, 2))))
        else:
            ax.add_patch(FancyBboxPatch((x, y), sw, sw, boxstyle="round,pad=0,rounding_size=2", facecolor=colour,
                                        edgecolor="#666666", linewidth=0.5))
        ax.text(x + sw + 0.4 * f, y + 0.85 * sw, label, fontsize=0.9 * f, va="baseline", **font)
        x += width + 1.2 * f
    for v in range(1, len(s.nodes)):
        xs, ys = zip(*s.edge(v))
        ax.plot(xs, ys, color="#888888", linewidth=1, solid_capstyle="butt")
    for v, nd in enumerate(s.nodes):
        fill = s.colours[s.pred[v]]
        left, top, w, h = s.box(v)
        cx, cy = s.centre(v)
        if s.mismatch[v]:
            r = s.ring
            ax.add_patch(FancyBboxPatch((left - r, top - r), w + 2 * r, h + 2 * r,
                                        boxstyle=f"round,pad=0,rounding_size={min(h / 2 + r, 0.5 * f + r)}",
                                        fill=False, edgecolor="#222222", linewidth=1.5, linestyle=(0, (3, 2))))
        if nd.word is None and not s.text:
            ax.add_patch(Circle((cx, cy), w / 2, facecolor=fill, edgecolor="#555555", linewidth=0.75))
            continue
        ax.add_patch(FancyBboxPatch((left, top), w, h, boxstyle=f"round,pad=0,rounding_size={min(h / 2, 0.5 * f)}",
                                    facecolor=fill, edgecolor="#555555", linewidth=0.75))
        tc = _text_colour(fill)
        if s.text:
            if s.labels[v]:
                ax.text(cx, top + 1.15 * f, s.labels[v], fontsize=f, ha="center", va="baseline", color=tc, **font)
                ax.text(cx, top + 2.3 * f, s.second[v], fontsize=0.85 * f, ha="center", va="baseline", color=tc,
                        **font)
            else:
                ax.text(cx, cy + 0.3 * f, s.second[v], fontsize=0.85 * f, ha="center", va="baseline", color=tc,
                        **font)
        else:
            ax.text(cx, cy + 0.36 * f, s.labels[v], fontsize=f, ha="center", va="baseline", color=tc, **font)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    return buf.getvalue()


def write_tree_png(path, tree, predictions=None, **kwargs):
    """Write :func:`tree_png` to ``path`` atomically; returns the path."""
    from .. import io as dio
    dio.atomic_write_bytes(path, tree_png(tree, predictions, **kwargs))
    return path
