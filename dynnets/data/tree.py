"""The immutable parse tree: :class:`Tree`, its conversion to and from
networkx, the rewrites that make a treebank binary (``binarize``,
``collapse_unary``, ``binary_tree``) and the check they answer
(``first_nonbinary``).

Nothing in this module recurses in Python: traversal, printing, equality,
pickling and the rewrites use explicit stacks, so a tree thousands of levels
deep is handled like any other. Reading and writing the bracket format is
:mod:`dynnets.data.ptb`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["Tree", "to_networkx", "from_networkx", "binarize", "collapse_unary", "binary_tree", "first_nonbinary"]


# ---------------------------------------------------------------------------
# Tree


class Tree:
    """An immutable node of a parse tree.

    A leaf has a ``word`` (str) and no children; an internal node has
    ``word is None`` and a non-empty tuple of ``children``. ``label`` is an int
    for sentiment treebanks (any hashable value is accepted).

    Parameters
    ----------
    label : int or str
    children : iterable of Tree, optional
        Ordered children of an internal node.
    word : str, optional
        The token of a leaf.

    Notes
    -----
    ``height`` (leaf 0, internal ``1 + max`` child height) and ``size`` (number
    of nodes) are computed once on first use and cached; they are derived
    values, so the tree stays immutable. Equality and hashing are structural.
    """

    __slots__ = ("label", "word", "children", "_height", "_size")

    def __init__(self, label: Any, children: Iterable[Tree] = (), word: str | None = None):
        children = tuple(children)
        if word is None:
            if not children:
                raise ValueError("Tree: expected a word (leaf) or at least one child (internal node), got neither")
            for i, c in enumerate(children):
                if not isinstance(c, Tree):
                    raise TypeError(f"Tree: children[{i}] must be a Tree, got {type(c).__name__}")
        else:
            if children:
                raise ValueError(f"Tree: a leaf (word={word!r}) cannot have children, got {len(children)}")
            if not isinstance(word, str) or not word:
                raise ValueError(f"Tree: word must be a non-empty str, got {word!r}")
        _set_label(self, label)
        _set_word(self, word)
        _set_children(self, children)

    @classmethod
    def leaf(cls, label: Any, word: str) -> Tree:
        """A leaf ``(label word)``."""
        return cls(label, word=word)

    @classmethod
    def node(cls, label: Any, children: Iterable[Tree]) -> Tree:
        """An internal node ``(label child ...)``."""
        return cls(label, children)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Tree is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Tree is immutable: cannot delete {name!r}")

    # -- structure ---------------------------------------------------------

    @property
    def is_leaf(self) -> bool:
        return self.word is not None

    @property
    def height(self) -> int:
        """Leaf 0; internal node ``1 + max(child heights)``."""
        try:
            return self._height
        except AttributeError:
            _fill_cache(self)
            return self._height

    @property
    def size(self) -> int:
        """Number of nodes (leaves included)."""
        try:
            return self._size
        except AttributeError:
            _fill_cache(self)
            return self._size

    def postorder(self) -> list[Tree]:
        """All nodes, children (left to right) before their parent; the root is last."""
        out = []
        stack = [self]
        push = stack.extend
        pop = stack.pop
        add = out.append
        # Root-right-left preorder, reversed, is left-right-root postorder.
        while stack:
            n = pop()
            add(n)
            push(n.children)
        out.reverse()
        return out

    def preorder(self) -> list[Tree]:
        """All nodes, each before its children (left to right); the root is first."""
        out = []
        stack = [self]
        while stack:
            n = stack.pop()
            out.append(n)
            if n.children:
                stack.extend(reversed(n.children))
        return out

    def levels(self) -> list[list[Tree]]:
        """Nodes grouped by height: ``levels()[0]`` are the leaves (left to right),
        ``levels()[h]`` the nodes of height ``h`` in postorder. Every child is
        in an earlier level than its parent."""
        po = self.postorder()
        _fill_cache(self)
        out: list[list[Tree]] = [[] for _ in range(self._height + 1)]
        for n in po:
            out[n._height].append(n)
        return out

    def leaves(self) -> list[Tree]:
        """Leaf nodes, left to right."""
        out = []
        stack = [self]
        while stack:
            n = stack.pop()
            if n.word is not None:
                out.append(n)
            else:
                stack.extend(reversed(n.children))
        return out

    def words(self) -> list[str]:
        """The sentence: leaf words, left to right."""
        return [n.word for n in self.leaves()]

    def labels(self) -> list[Any]:
        """Node labels in postorder."""
        return [n.label for n in self.postorder()]

    # -- rewriting ---------------------------------------------------------

    def map_labels(self, fn: Callable[[Any], Any]) -> Tree:
        """A copy with every label replaced by ``fn(label)``."""
        return _rebuild(self, lambda n, kids: _leaf(fn(n.label), n.word) if kids is None else _node(fn(n.label), kids))

    def map_words(self, fn: Callable[[str], str]) -> Tree:
        """A copy with every leaf word replaced by ``fn(word)``."""
        return _rebuild(self, lambda n, kids: _leaf(n.label, fn(n.word)) if kids is None else _node(n.label, kids))

    def with_labels(self, labels: Sequence[Any]) -> Tree:
        """A copy whose labels are ``labels``, given in postorder (``len == size``)."""
        labels = list(labels)
        if len(labels) != self.size:
            raise ValueError(f"Tree.with_labels: expected {self.size} labels (one per node), got {len(labels)}")
        it = iter(labels)
        return _rebuild(self, lambda n, kids: _leaf(next(it), n.word) if kids is None else _node(next(it), kids))

    # -- printing, comparison, pickling ------------------------------------

    def __str__(self) -> str:
        """Canonical bracket form: ``(label word)`` / ``(label child child)``, single spaces.

        For canonically formatted input, such as every SST line,
        ``str(parse_tree(line)) == line``.
        """
        out: list[str] = []
        add = out.append
        stack: list[Any] = [self]
        while stack:
            item = stack.pop()
            if item.__class__ is str:
                add(item)
            elif item.word is not None:
                add(f"({item.label} {item.word})")
            else:
                add(f"({item.label} ")
                stack.append(")")
                ch = item.children
                for i in range(len(ch) - 1, 0, -1):
                    stack.append(ch[i])
                    stack.append(" ")
                stack.append(ch[0])
        return "".join(out)

    def __repr__(self) -> str:
        s = str(self)
        if len(s) > 120:
            s = s[:100] + " ... " + s[-15:]
        return f"Tree({s!r})"

    def _signature(self) -> list[tuple[Any, Any, int]]:
        return [(n.label, n.word, len(n.children)) for n in self.postorder()]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Tree):
            return NotImplemented
        # Postorder with arities determines a tree uniquely.
        return self._signature() == other._signature()

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(tuple(self._signature()))

    def __reduce__(self):
        # The default reduction pickles nested objects recursively and fails on
        # deep trees; a flat postorder encoding does not.
        sig = self._signature()
        return (_from_signature, ([s[0] for s in sig], [s[1] for s in sig], [s[2] for s in sig]))

    def __copy__(self) -> Tree:
        return self

    def __deepcopy__(self, memo: dict) -> Tree:
        return self


_set_label = Tree.label.__set__  # type: ignore[attr-defined]
_set_word = Tree.word.__set__  # type: ignore[attr-defined]
_set_children = Tree.children.__set__  # type: ignore[attr-defined]
_set_height = Tree._height.__set__  # type: ignore[attr-defined]
_set_size = Tree._size.__set__  # type: ignore[attr-defined]
_new = object.__new__


def _leaf(label: Any, word: str) -> Tree:
    t = _new(Tree)
    _set_label(t, label)
    _set_word(t, word)
    _set_children(t, ())
    return t


def _node(label: Any, children: tuple[Tree, ...]) -> Tree:
    t = _new(Tree)
    _set_label(t, label)
    _set_word(t, None)
    _set_children(t, children)
    return t


def _fill_cache(root: Tree) -> None:
    """Compute and cache ``_height`` and ``_size`` for every uncached node under ``root``."""
    stack = [(root, False)]
    while stack:
        n, expanded = stack.pop()
        if hasattr(n, "_height"):
            continue
        kids = n.children
        if not kids:
            _set_height(n, 0)
            _set_size(n, 1)
        elif expanded:
            _set_height(n, 1 + max(c._height for c in kids))
            _set_size(n, 1 + sum(c._size for c in kids))
        else:
            stack.append((n, True))
            stack.extend((c, False) for c in kids)


def _rebuild(root: Tree, make: Callable[[Tree, tuple[Tree, ...] | None], Tree]) -> Tree:
    """Rebuild bottom-up: ``make(node, None)`` for leaves, ``make(node, new_children)`` otherwise.
    ``make`` is called in postorder."""
    results: list[Tree] = []
    for n in root.postorder():
        k = len(n.children)
        if k == 0:
            results.append(make(n, None))
        else:
            kids = tuple(results[-k:])
            del results[-k:]
            results.append(make(n, kids))
    return results[0]


def _from_signature(labels: list, words: list, arities: list[int]) -> Tree:
    stack: list[Tree] = []
    for label, word, k in zip(labels, words, arities):
        if k == 0:
            stack.append(_leaf(label, word))
        else:
            kids = tuple(stack[-k:])
            del stack[-k:]
            stack.append(_node(label, kids))
    return stack[0]


# ---------------------------------------------------------------------------
# networkx


def to_networkx(tree: Tree):
    """A ``networkx.DiGraph`` with edges parent -> child.

    Nodes are numbered ``0..size-1`` in preorder (root 0) and carry ``label``
    and ``word`` (``None`` for internal nodes); each edge carries ``order``,
    the child's position among its siblings, and successors are inserted in
    that order. ``graph.graph["root"]`` is 0.
    """
    import networkx as nx

    g = nx.DiGraph(root=0)
    stack: list[tuple[Tree, int, int]] = [(tree, -1, 0)]
    nid = 0
    while stack:
        n, parent, order = stack.pop()
        me = nid
        nid += 1
        g.add_node(me, label=n.label, word=n.word)
        if parent >= 0:
            g.add_edge(parent, me, order=order)
        kids = n.children
        for i in range(len(kids) - 1, -1, -1):
            stack.append((kids[i], me, i))
    return g


def from_networkx(graph, root: Any = None) -> Tree:
    """Build a :class:`Tree` from a directed graph with edges parent -> child.

    Every node needs a ``label`` attribute; leaves (no successors) need a
    ``word``. Children are ordered by the edge attribute ``order`` when every
    out-edge of the node has one, else by successor insertion order. The root
    is ``root``, else ``graph.graph["root"]``, else the only node without a
    parent.
    """
    if graph.number_of_nodes() == 0:
        raise ValueError("from_networkx: expected a tree, got an empty graph")
    if not graph.is_directed():
        raise ValueError("from_networkx: expected a directed graph (edges parent -> child), got an undirected one")
    if root is None:
        root = graph.graph.get("root")
    if root is None:
        roots = [v for v, d in graph.in_degree() if d == 0]
        if len(roots) != 1:
            raise ValueError(f"from_networkx: expected exactly one node without a parent, got {len(roots)}"
                             f"{': ' + repr(roots[:5]) if roots else ''}")
        root = roots[0]
    if root not in graph:
        raise ValueError(f"from_networkx: root {root!r} is not a node of the graph")
    for v, d in graph.in_degree():
        if d > 1:
            raise ValueError(f"from_networkx: node {v!r} has {d} parents; a tree node has one")
    if graph.in_degree(root) != 0:
        raise ValueError(f"from_networkx: root {root!r} has a parent")

    def ordered_children(v: Any) -> list:
        edges = list(graph.out_edges(v, data="order"))
        if edges and all(o is not None for _, _, o in edges):
            edges.sort(key=lambda e: e[2])
        return [c for _, c, _ in edges]

    def make(v: Any, kids: list[Tree]) -> Tree:
        data = graph.nodes[v]
        if "label" not in data:
            raise ValueError(f"from_networkx: node {v!r} has no 'label' attribute")
        word = data.get("word")
        if kids:
            if word is not None:
                raise ValueError(f"from_networkx: internal node {v!r} has word {word!r}; only leaves have words")
            return _node(data["label"], tuple(kids))
        if not isinstance(word, str) or not word:
            raise ValueError(f"from_networkx: leaf {v!r} needs a non-empty str 'word' attribute, got {word!r}")
        return _leaf(data["label"], word)

    # Iterative postorder over the graph.
    seen = 0
    results: list[Tree] = []
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        v, expanded = stack.pop()
        if expanded:
            k = graph.out_degree(v)
            kids = results[len(results) - k:] if k else []
            if k:
                del results[-k:]
            results.append(make(v, kids))
        else:
            seen += 1
            stack.append((v, True))
            stack.extend((c, False) for c in reversed(ordered_children(v)))
    if seen != graph.number_of_nodes():
        raise ValueError(f"from_networkx: {graph.number_of_nodes() - seen} node(s) are not reachable "
                         f"from root {root!r}")
    return results[0]


# ---------------------------------------------------------------------------
# Rewrites for treebanks that are not binary


def binarize(tree: Tree, factor: str = "right", intermediate_label: Any = None) -> Tree:
    """Binarize nodes with more than two children.

    ``factor="right"``: ``(A b c d)`` -> ``(A b (A' c d))``;
    ``factor="left"``:  ``(A b c d)`` -> ``(A (A' b c) d)``.
    The new nodes ``A'`` get ``intermediate_label(A)`` when it is callable,
    ``intermediate_label`` when it is given, else ``A``. Unary nodes are kept
    (see :func:`collapse_unary`).
    """
    if factor not in ("left", "right"):
        raise ValueError(f"binarize: factor must be 'left' or 'right', got {factor!r}")

    def inter(label: Any) -> Any:
        if intermediate_label is None:
            return label
        if callable(intermediate_label):
            return intermediate_label(label)
        return intermediate_label

    def make(n: Tree, kids: tuple[Tree, ...] | None) -> Tree:
        if kids is None:
            return n
        if len(kids) <= 2:
            return n if all(a is b for a, b in zip(kids, n.children)) else _node(n.label, kids)
        lab = inter(n.label)
        if factor == "right":
            acc = _node(lab, (kids[-2], kids[-1]))
            for c in kids[-3:0:-1]:
                acc = _node(lab, (c, acc))
            return _node(n.label, (kids[0], acc))
        acc = _node(lab, (kids[0], kids[1]))
        for c in kids[2:-1]:
            acc = _node(lab, (acc, c))
        return _node(n.label, (acc, kids[-1]))

    return _rebuild(tree, make)


def collapse_unary(tree: Tree, keep: str | Callable[[Any, Any], Any] = "top") -> Tree:
    """Collapse chains of single-child nodes into one node.

    ``(A (B (C w)))`` becomes the leaf ``(A w)`` with ``keep="top"``, ``(C w)``
    with ``keep="bottom"``, or ``(f(f(A, B), C) w)`` when ``keep`` is a
    function ``f(upper_label, lower_label)``.
    """
    if keep == "top":
        join = lambda upper, lower: upper  # noqa: E731
    elif keep == "bottom":
        join = lambda upper, lower: lower  # noqa: E731
    elif callable(keep):
        join = keep
    else:
        raise ValueError(f"collapse_unary: keep must be 'top', 'bottom' or a function, got {keep!r}")

    def make(n: Tree, kids: tuple[Tree, ...] | None) -> Tree:
        if kids is None:
            return n
        if len(kids) == 1:
            c = kids[0]
            lab = join(n.label, c.label)
            return _leaf(lab, c.word) if c.word is not None else _node(lab, c.children)
        return _node(n.label, kids)

    return _rebuild(tree, make)


# ---------------------------------------------------------------------------
# Binary trees


def binary_tree(tree, factor="right"):
    """``tree`` with every internal node binary: nodes with more than two
    children split (:func:`dynnets.data.binarize` with ``factor``), then unary
    chains collapsed into their top node (:func:`dynnets.data.collapse_unary`,
    which keeps the top label)."""
    return collapse_unary(binarize(tree, factor))


def first_nonbinary(tree: Tree) -> tuple[int, int] | None:
    """``(preorder index, number of children)`` of the first internal node
    (in preorder) that does not have exactly two children, or None when the
    tree is binary."""
    stack = [tree]
    i = 0
    while stack:
        n = stack.pop()
        k = len(n.children)
        if k and k != 2:
            return i, k
        if k:
            stack.append(n.children[1])
            stack.append(n.children[0])
        i += 1
    return None
