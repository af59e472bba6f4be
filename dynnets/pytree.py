"""Nested structures (lists, tuples, namedtuples, dicts) as a flat list of
leaves and a :class:`TreeDef`, the one place the package flattens and
rebuilds them (as JAX's ``tree_util`` and TF1's ``nest``).

>>> leaves, td = tree_flatten({"h": 1, "c": (2, [3])})
>>> leaves, td
([2, 3, 1], TreeDef({'c': (x, [x]), 'h': x}))
>>> tree_unflatten(td, [x * 10 for x in leaves])
{'h': 10, 'c': (20, [30])}

A dict's leaves come in the order of its sorted keys (TF1's ``nest`` and
JAX's order, so two dicts with the same keys flatten alike whatever order
they were built in); it is rebuilt with its keys in their original order.
Anything that is not a list, tuple or dict is a leaf (``None`` included);
``is_leaf`` makes more things leaves. Pure Python, no dynnets imports: any
layer (static loops, traces, sessions, the autobatch decorator) may use it.
"""
from __future__ import annotations

__all__ = ["TreeDef", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_map", "tree_structure"]

_LEAF = None        # a leaf's node in a TreeDef


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _sorted_keys(d):
    keys = list(d)
    try:
        return sorted(keys), keys
    except TypeError:          # keys of mixed types: their own order
        return keys, keys


def _build(x, leaves, is_leaf):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    tp = type(x)
    if tp is list or tp is tuple:
        return (tp, tuple(_build(v, leaves, is_leaf) for v in x))
    if isinstance(x, tuple):
        if _is_namedtuple(x):
            return (tp, tuple(_build(v, leaves, is_leaf) for v in x))
        return (tuple, tuple(_build(v, leaves, is_leaf) for v in x))
    if isinstance(x, list):
        return (list, tuple(_build(v, leaves, is_leaf) for v in x))
    if isinstance(x, dict):
        keys, order = _sorted_keys(x)
        return (dict, tuple(keys), tuple(_build(x[k], leaves, is_leaf) for k in keys),
                None if keys == order else tuple(order))
    leaves.append(x)
    return _LEAF


def _count(node):
    if node is _LEAF:
        return 1
    return sum(_count(c) for c in node[2 if node[0] is dict else 1])


def _rebuild(node, it):
    if node is _LEAF:
        return next(it)
    tp = node[0]
    if tp is dict:
        vals = {k: _rebuild(c, it) for k, c in zip(node[1], node[2])}
        return vals if node[3] is None else {k: vals[k] for k in node[3]}
    vals = [_rebuild(c, it) for c in node[1]]
    if tp is list:
        return vals
    if tp is tuple:
        return tuple(vals)
    return tp(*vals)                # a namedtuple


def _describe(node):
    # TF1's error-message form: x for a leaf, a namedtuple as a tuple
    if node is _LEAF:
        return "x"
    tp = node[0]
    if tp is dict:
        return "{" + ", ".join(f"{k!r}: {_describe(c)}" for k, c in zip(node[1], node[2])) + "}"
    inner = ", ".join(_describe(c) for c in node[1])
    if tp is list:
        return f"[{inner}]"
    return f"({inner},)" if len(node[1]) == 1 else f"({inner})"


def _key(node):
    if node is _LEAF:
        return None
    if node[0] is dict:
        return (dict, node[1], tuple(_key(c) for c in node[2]))
    return (node[0], tuple(_key(c) for c in node[1]))


def _same(a, b, seq):
    if a is _LEAF or b is _LEAF:
        return a is b
    ta, tb = a[0], b[0]
    if ta is dict or tb is dict:
        return ta is tb and a[1] == b[1] and all(_same(x, y, seq) for x, y in zip(a[2], b[2]))
    if not (ta is tb or (seq and ta in (list, tuple) and tb in (list, tuple))):
        return False
    return len(a[1]) == len(b[1]) and all(_same(x, y, seq) for x, y in zip(a[1], b[1]))


def _up_to(node, x, out, td):
    if node is _LEAF:
        out.append(x)
        return
    tp = node[0]
    if tp is dict:
        if not isinstance(x, dict) or set(x) != set(node[1]):
            raise ValueError(f"expected the structure {td}, got {x!r}")
        for k, c in zip(node[1], node[2]):
            _up_to(c, x[k], out, td)
        return
    if not isinstance(x, (list, tuple)) or len(x) != len(node[1]):
        raise ValueError(f"expected the structure {td}, got {x!r}")
    for c, v in zip(node[1], x):
        _up_to(c, v, out, td)


class TreeDef:
    """The structure of a nested value without its leaves: hashable, equal
    to another of the same structure (container types, lengths, dict keys).

    Attributes
    ----------
    num_leaves : int
    """

    __slots__ = ("_node", "num_leaves", "_hash")

    def __init__(self, node):
        self._node = node
        self.num_leaves = _count(node)
        self._hash = None

    def unflatten(self, leaves):
        """The structure with ``leaves`` (an iterable of ``num_leaves``
        values, in flattening order) in place of its leaves."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"tree_unflatten: {self} has {self.num_leaves} leaves, got {len(leaves)} values")
        return _rebuild(self._node, iter(leaves))

    def flatten_up_to(self, x):
        """The values of ``x`` at this structure's leaves, ``x`` having this
        structure down to them (below a leaf it may have any: TF1's shape
        invariants are tuples at a loop variable's place). A list and a
        tuple count as the same here; a ValueError names the expected
        structure."""
        out = []
        _up_to(self._node, x, out, self)
        return out

    def same_structure(self, other, lists_as_tuples=False):
        """Whether ``other`` has this structure; with ``lists_as_tuples`` a
        list and a tuple of the same length count as the same (TF1's loops)."""
        return _same(self._node, other._node, lists_as_tuples)

    @property
    def is_leaf(self):
        """Whether the whole structure is one leaf."""
        return self._node is _LEAF

    def children(self):
        """The TreeDefs of the top container's items (dict: in sorted key order)."""
        node = self._node
        if node is _LEAF:
            return []
        return [TreeDef(c) for c in (node[2] if node[0] is dict else node[1])]

    @property
    def kind(self):
        """The top container's type (``list``, ``tuple``, ``dict``, a
        namedtuple class), None for a leaf."""
        return None if self._node is _LEAF else self._node[0]

    def __eq__(self, other):
        return isinstance(other, TreeDef) and _same(self._node, other._node, False)

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash(_key(self._node))
        return h

    def __repr__(self):
        return f"TreeDef({_describe(self._node)})"

    def __str__(self):
        return _describe(self._node)


def tree_flatten(x, is_leaf=None):
    """``(leaves, treedef)`` of nested value ``x``.

    Parameters
    ----------
    x : any
        Lists, tuples, namedtuples and dicts are containers; anything else
        is a leaf.
    is_leaf : callable, optional
        ``is_leaf(v)`` True makes ``v`` a leaf even when it is a container.
    """
    leaves = []
    node = _build(x, leaves, is_leaf)
    return leaves, TreeDef(node)


def tree_unflatten(treedef, leaves):
    """The value of structure ``treedef`` with ``leaves`` at its leaves."""
    return treedef.unflatten(leaves)


def tree_leaves(x, is_leaf=None):
    """The leaves of ``x``, in flattening order."""
    leaves = []
    _build(x, leaves, is_leaf)
    return leaves


def tree_structure(x, is_leaf=None):
    """The :class:`TreeDef` of ``x``."""
    return tree_flatten(x, is_leaf)[1]


def tree_map(f, x, is_leaf=None):
    """``x`` with ``f(leaf)`` in place of each leaf."""
    leaves, td = tree_flatten(x, is_leaf)
    return td.unflatten(f(v) for v in leaves)
