"""Immutable parse trees in PTB bracket format, as used by the Stanford Sentiment Treebank.

One tree is written ``(label word)`` for a leaf and ``(label child child ...)``
for an internal node, e.g. ``(3 (2 It) (4 (2 's) (3 great)))``. A word is any
run of characters other than ASCII whitespace and parentheses (PTB escapes
parentheses as ``-LRB-`` / ``-RRB-``; SST has words with a no-break space
inside, such as ``8\xa01\\/2``).

Nothing in these modules recurses in Python: parsing, printing, traversal,
equality, pickling and the rewrites use explicit stacks, so a tree thousands of
levels deep is handled like any other.

Main entry points
-----------------
Tree                      immutable node: ``label``, ``word`` (leaves), ``children``
parse_tree(text)          one tree from a string; ``str(tree)`` gives it back
read_trees(path)          streaming reader, one tree per line, ``on_error="raise" | "skip"``
write_trees(path, trees)  atomic writer, one tree per line
to_networkx / from_networkx, binarize, collapse_unary, binary_tree (both)
TreeParseError            names file, line, column and what was expected

Where they live: the tree type, networkx and the binary rewrites in
:mod:`dynnets.data.tree`; the bracket format (parsing, reading, writing,
locating a node in its file) in :mod:`dynnets.data.ptb`. This module imports
them all, so ``dynnets.data.trees.X`` keeps working for every name of its
``__all__`` (the one it had before issue 24 split it).
"""
from __future__ import annotations

from .ptb import (TreeParseError, TreeParseWarning, TreeReader, node_position, parse_tree, read_trees, tree_line,
                  write_trees)
from .tree import Tree, binarize, binary_tree, collapse_unary, first_nonbinary, from_networkx, to_networkx

__all__ = [
    "Tree",
    "TreeParseError",
    "TreeParseWarning",
    "TreeReader",
    "parse_tree",
    "read_trees",
    "write_trees",
    "to_networkx",
    "from_networkx",
    "binarize",
    "collapse_unary",
    "binary_tree",
    "first_nonbinary",
    "node_position",
    "tree_line",
]
