"""Immutable parse trees in PTB bracket format, as used by the Stanford Sentiment Treebank.

One tree is written ``(label word)`` for a leaf and ``(label child child ...)``
for an internal node, e.g. ``(3 (2 It) (4 (2 's) (3 great)))``. A word is any
run of characters other than ASCII whitespace and parentheses (PTB escapes
parentheses as ``-LRB-`` / ``-RRB-``; SST has words with a no-break space
inside, such as ``8\xa01\\/2``).

Nothing in this module recurses in Python: parsing, printing, traversal,
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
"""

from __future__ import annotations

import gc
import io
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..io import atomic_write
from .encoding import describe_decode_error

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


class TreeParseError(ValueError):
    """A malformed tree. ``str(err)`` reads ``path:line:column: reason``.

    Attributes
    ----------
    path : str
        File name, or ``"<string>"`` for :func:`parse_tree` without ``path``.
    line, column : int
        1-based position of the offending token (or of the end of input).
    kind : str
        One of ``"unbalanced"``, ``"missing_label"``, ``"bad_label"``,
        ``"label_range"``, ``"empty_node"``, ``"trailing_text"``,
        ``"unexpected_token"``, ``"empty_input"``, ``"encoding"`` (bytes
        that are not UTF-8; raised by :func:`read_trees` whatever ``on_error``
        says, as the rest of the file cannot be trusted to be text).
    reason : str
        What was expected and what was found.
    """

    def __init__(self, path: str, line: int, column: int, kind: str, reason: str):
        super().__init__(f"{path}:{line}:{column}: {reason}")
        self.path = path
        self.line = line
        self.column = column
        self.kind = kind
        self.reason = reason

    def __reduce__(self):
        return (TreeParseError, (self.path, self.line, self.column, self.kind, self.reason))


class TreeParseWarning(UserWarning):
    """Emitted by :func:`read_trees` with ``on_error="skip"`` when lines were skipped."""


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
# Parsing


class _Labels(dict):
    """Token -> label, or None when the token is not an acceptable label.

    Valid tokens are cached, so the parser's hot path is one dict lookup.
    """

    def __init__(self, num_classes: int | None, int_labels: bool):
        super().__init__()
        if num_classes is not None and (not isinstance(num_classes, int) or num_classes < 1):
            raise ValueError(f"num_classes: expected a positive int or None, got {num_classes!r}")
        self.num_classes = num_classes
        self.int_labels = int_labels
        if int_labels and num_classes is not None:
            for i in range(num_classes):
                self[str(i)] = i

    def __missing__(self, tok: str) -> Any:
        if tok == "(" or tok == ")":
            return None
        if not self.int_labels:
            self[tok] = tok
            return tok
        if _INT.fullmatch(tok) is None:
            return None
        v = int(tok)
        if self.num_classes is not None and not 0 <= v < self.num_classes:
            return None
        self[tok] = v
        return v

    def describe(self) -> str:
        if not self.int_labels:
            return "a label"
        if self.num_classes is None:
            return "an integer label"
        return f"an integer label in 0..{self.num_classes - 1}"


_INT = re.compile(r"[+-]?[0-9]+")
# Only ASCII whitespace separates tokens: SST has words such as "8\xa01\\/2"
# with a no-break space inside.
_TOKENS = re.compile(r"\(|\)|[^ \t\n\r\f\v()]+")
_ASCII_SPACE = " \t\n\r\f\v"


def _parse_fast(text: str, labels: _Labels) -> Tree | None:
    """Parse one tree, or return None on any irregularity (then the careful
    parser locates the error). Tokens come from one C-level ``findall``; a leaf
    ``( label word )`` is consumed in one step."""
    toks = _TOKENS.findall(text)
    n = len(toks)
    stack: list[tuple[Any, list[Tree]]] = []
    kids: list[Tree] = []
    i = 0
    try:
        while i < n:
            t = toks[i]
            if t == "(":
                lab = labels[toks[i + 1]]
                if lab is None:
                    return None
                w = toks[i + 2]
                if w == "(":
                    stack.append((lab, kids))
                    kids = []
                    i += 2
                elif w == ")" or toks[i + 3] != ")":
                    return None
                else:
                    node = _new(Tree)
                    _set_label(node, lab)
                    _set_word(node, w)
                    _set_children(node, ())
                    kids.append(node)
                    i += 4
            elif t == ")":
                if not stack or not kids:
                    return None
                lab, parent = stack.pop()
                node = _new(Tree)
                _set_label(node, lab)
                _set_word(node, None)
                _set_children(node, tuple(kids))
                parent.append(node)
                kids = parent
                i += 1
            else:
                return None
    except IndexError:
        return None
    if stack or len(kids) != 1:
        return None
    return kids[0]


def _position(text: str, pos: int, first_line: int) -> tuple[int, int]:
    line = first_line + text.count("\n", 0, pos)
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _show(tok: str) -> str:
    return f"'{tok}'" if len(tok) <= 30 else f"'{tok[:27]}...'"


def _parse_careful(text: str, labels: _Labels, path: str, first_line: int) -> Tree:
    """Reference parser: slower, tracks positions, raises a precise TreeParseError."""

    def fail(pos: int, kind: str, reason: str) -> TreeParseError:
        line, col = _position(text, pos, first_line)
        return TreeParseError(path, line, col, kind, reason)

    # frame: [open_pos, has_label, label, word, children]
    stack: list[list[Any]] = []
    root: Tree | None = None
    root_end = 0
    for m in _TOKENS.finditer(text):
        tok = m.group()
        pos = m.start()
        if root is not None:
            rl, rc = _position(text, root_end - 1, first_line)
            if tok == ")":
                raise fail(pos, "unbalanced", f"unbalanced parentheses: ')' has no matching '(' "
                           f"(the tree already closed at line {rl} column {rc})")
            raise fail(pos, "trailing_text", f"expected end of line after the tree closed at line {rl} "
                       f"column {rc}, got {_show(tok)}")
        if tok == "(":
            if stack:
                f = stack[-1]
                if not f[1]:
                    raise fail(pos, "missing_label", f"expected {labels.describe()} after '(', got '('")
                if f[3] is not None:
                    raise fail(pos, "unexpected_token", f"expected ')' after the word {_show(f[3])} of a leaf "
                               f"(a node has one word or subtrees, not both), got '('")
            stack.append([pos, False, None, None, []])
        elif tok == ")":
            if not stack:
                raise fail(pos, "unbalanced", "unbalanced parentheses: ')' has no matching '('")
            f = stack.pop()
            if not f[1]:
                raise fail(f[0], "empty_node", f"empty node '()': expected {labels.describe()} "
                           "followed by a word or subtrees")
            if f[3] is None and not f[4]:
                raise fail(pos, "empty_node", f"empty node '({f[2]})': expected a word or '(' after "
                           f"the label, got ')'")
            node = _leaf(f[2], f[3]) if f[3] is not None else _node(f[2], tuple(f[4]))
            if stack:
                stack[-1][4].append(node)
            else:
                root = node
                root_end = m.end()
        else:
            if not stack:
                raise fail(pos, "unexpected_token", f"expected '(' to start a tree, got {_show(tok)}")
            f = stack[-1]
            if not f[1]:
                lab = labels[tok]
                if lab is None:
                    if labels.int_labels and _INT.fullmatch(tok) is not None:
                        raise fail(pos, "label_range", f"expected {labels.describe()}, got {_show(tok)} "
                                   f"(outside 0..{labels.num_classes - 1})")
                    raise fail(pos, "bad_label", f"expected {labels.describe()} after '(', got {_show(tok)}")
                f[1] = True
                f[2] = lab
            elif f[4]:
                raise fail(pos, "unexpected_token", f"expected '(' or ')' after a subtree, got the word "
                           f"{_show(tok)} (a node has one word or subtrees, not both)")
            elif f[3] is not None:
                raise fail(pos, "unexpected_token", f"expected ')' after the word {_show(f[3])}, "
                           f"got a second word {_show(tok)}")
            else:
                f[3] = tok
    if stack:
        ol, oc = _position(text, stack[-1][0], first_line)
        raise fail(len(text.rstrip("\r\n")), "unbalanced",
                   f"unbalanced parentheses: expected ')' to close the '(' at line {ol} column {oc}, "
                   f"got end of input ({len(stack)} unclosed)")
    if root is None:
        raise fail(0, "empty_input", "expected a tree, got empty input")
    return root


def parse_tree(text: str, *, num_classes: int | None = 5, int_labels: bool = True,
               path: str = "<string>", line: int = 1) -> Tree:
    """Parse one bracketed tree.

    Parameters
    ----------
    text : str
        The tree; whitespace between tokens (newlines included) is free.
    num_classes : int or None
        Labels must be integers in ``0..num_classes-1``; ``None`` accepts any integer.
    int_labels : bool
        ``False`` keeps labels as strings (e.g. ``NP`` in the Penn Treebank);
        ``num_classes`` is then ignored.
    path, line : str, int
        Where ``text`` came from, for error messages.

    Raises
    ------
    TreeParseError
        Naming path, line and column, what was expected and what was found.
    """
    key = (num_classes, int_labels)
    labels = _LABEL_TABLES.get(key)
    if labels is None:
        labels = _Labels(num_classes, int_labels)
        if int_labels and num_classes is not None:
            _LABEL_TABLES[key] = labels
    return _parse(text, labels, path, line)


# Token -> label tables for bounded integer labels, shared by parse_tree calls.
# Besides saving work, reusing them keeps parse_tree from allocating a
# GC-tracked object per call, which would let the GC run (expensively, over a
# large heap of trees) between the calls of a parsing loop.
_LABEL_TABLES: dict[tuple[int | None, bool], _Labels] = {}


def _parse(text: str, labels: _Labels, path: str, line: int) -> Tree:
    # Every Tree is tracked by the cyclic GC, which would otherwise run many
    # collections, some of them full, while a treebank is parsed: measured
    # 0.65 s versus 0.18 s for the 8,544 SST training lines. Collections are
    # only deferred to the next allocation outside the parser; a GC that the
    # caller disabled stays disabled.
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        tree = _parse_fast(text, labels)
        if tree is None:
            tree = _parse_careful(text, labels, path, line)
    finally:
        if enabled:
            gc.enable()
    return tree


# ---------------------------------------------------------------------------
# Files


class TreeReader:
    """Iterable over the trees of a file, one tree per line (see :func:`read_trees`).

    Each iteration re-reads the file. With ``on_error="skip"``, ``skipped``
    holds the :class:`TreeParseError` of every skipped line of the latest
    iteration, and a :class:`TreeParseWarning` summarising them is emitted
    when the iteration ends.
    """

    def __init__(self, path: str | os.PathLike, *, num_classes: int | None = 5, int_labels: bool = True,
                 on_error: str = "raise"):
        if on_error not in ("raise", "skip"):
            raise ValueError(f"read_trees: on_error must be 'raise' or 'skip', got {on_error!r}")
        self.path = Path(path)
        self.on_error = on_error
        self._labels = _Labels(num_classes, int_labels)
        self.skipped: list[TreeParseError] = []
        self.lines_read = 0

    # Lines are parsed in chunks of about this many bytes with the cyclic GC
    # paused (see _parse): memory stays bounded and collections run between
    # chunks instead of inside the parser.
    chunk_bytes = 1 << 18

    def __iter__(self) -> Iterator[Tree]:
        self.skipped = []
        self.lines_read = 0
        labels = self._labels
        name = str(self.path)
        skip = self.on_error == "skip"
        lineno = 0
        with open(self.path, encoding="utf-8-sig") as f:
            while True:
                error: TreeParseError | None = None
                enabled = gc.isenabled()
                if enabled:
                    gc.disable()
                try:
                    # Every GC-tracked allocation of this loop happens inside
                    # the pause, or each chunk would start with a collection.
                    trees: list[Tree] = []
                    try:
                        lines = f.readlines(self.chunk_bytes)
                    except UnicodeDecodeError as e:
                        line, col, reason = describe_decode_error(self.path, e)
                        raise TreeParseError(name, line, col, "encoding", reason) from None
                    for line in lines:
                        lineno += 1
                        if not line.strip(_ASCII_SPACE):
                            continue
                        tree = _parse_fast(line, labels)
                        if tree is None:
                            try:
                                tree = _parse_careful(line, labels, name, lineno)
                            except TreeParseError as e:
                                if not skip:
                                    error = e
                                    break
                                self.skipped.append(e)
                                continue
                        trees.append(tree)
                    chunk = iter(trees)
                finally:
                    if enabled:
                        gc.enable()
                if not lines:
                    break
                self.lines_read = lineno
                yield from chunk
                if error is not None:
                    raise error
        if self.skipped:
            warnings.warn(self.summary(), TreeParseWarning, stacklevel=2)

    def summary(self) -> str:
        """``"path: skipped N of M lines: 2 bad_label (lines 3, 9), 1 unbalanced (line 4)"``."""
        if not self.skipped:
            return f"{self.path}: no lines skipped"
        by_kind: dict[str, list[int]] = {}
        for e in self.skipped:
            by_kind.setdefault(e.kind, []).append(e.line)
        parts = []
        for kind, lines in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
            parts.append(f"{len(lines)} {kind} (line{'s' if len(lines) > 1 else ''} {shown})")
        first = self.skipped[0]
        return (f"{self.path}: skipped {len(self.skipped)} of {self.lines_read} lines: " + "; ".join(parts)
                + f". First: {first}")

    def reasons(self) -> Counter:
        """Counts of skipped lines by error kind."""
        return Counter(e.kind for e in self.skipped)


def read_trees(path: str | os.PathLike, *, num_classes: int | None = 5, int_labels: bool = True,
               on_error: str = "raise") -> TreeReader:
    """Stream the trees of a file, one tree per line; blank lines are ignored.

    Parameters
    ----------
    path : path-like
    num_classes, int_labels
        As in :func:`parse_tree`.
    on_error : {"raise", "skip"}
        ``"raise"`` stops at the first bad line with a :class:`TreeParseError`;
        ``"skip"`` drops bad lines, records them in ``reader.skipped`` and
        warns with a summary (count and reasons) at the end.

    Returns
    -------
    TreeReader
        Iterable of :class:`Tree`; lines are read and parsed in chunks of
        about 256 KiB, so memory use does not grow with the file.

    Notes
    -----
    The parser pauses Python's cyclic GC while it builds a chunk of trees
    (collections run between chunks, in the caller's code). A program that
    keeps a large treebank alive for a long time can call ``gc.freeze()``
    after loading to keep later full collections from revisiting it.
    """
    return TreeReader(path, num_classes=num_classes, int_labels=int_labels, on_error=on_error)


def write_trees(path: str | os.PathLike, trees: Iterable[Tree]) -> int:
    """Write one tree per line, atomically (:func:`dynnets.io.atomic_write`).

    Returns the number of trees written.
    """
    n = 0

    def write(f):
        nonlocal n
        text = io.TextIOWrapper(f, encoding="utf-8", newline="\n")
        for t in trees:
            text.write(str(t))
            text.write("\n")
            n += 1
        text.flush()
        text.detach()       # leave the binary file open for the writer's fsync

    atomic_write(path, write)
    return n


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
# Locating a node in the text it was parsed from


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


def node_position(text: str, index: int, first_line: int = 1) -> tuple[int, int]:
    """1-based ``(line, column)`` of the ``(`` that opens node ``index``
    (preorder, root 0) of the bracketed tree in ``text``.

    Every node of a tree in this format, leaf or not, opens with ``(`` and
    words never contain one, so node ``i`` opens at the ``i``-th ``(``.
    """
    pos = -1
    for _ in range(index + 1):
        pos = text.find("(", pos + 1)
        if pos < 0:
            raise ValueError(f"node_position: the text has fewer than {index + 1} nodes")
    return _position(text, pos, first_line)


def tree_line(path: str | os.PathLike, index: int) -> tuple[int, str]:
    """``(line number, line)`` of tree ``index`` (0-based) of a file read by
    :func:`read_trees` with ``on_error="raise"``: its ``index``-th non-blank line."""
    seen = 0
    with open(path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip(_ASCII_SPACE):
                if seen == index:
                    return lineno, line.rstrip("\r\n")
                seen += 1
    raise IndexError(f"tree_line: {path} has {seen} trees, no tree {index}")
