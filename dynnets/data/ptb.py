"""The PTB bracket format, as the Stanford Sentiment Treebank uses it: parsing
(:func:`parse_tree`, :class:`TreeReader` / :func:`read_trees`) with errors
that name file, line and column (:class:`TreeParseError`), writing
(:func:`write_trees`), and locating a node in the text it was parsed from
(:func:`node_position`, :func:`tree_line`).

One tree is written ``(label word)`` for a leaf and ``(label child child ...)``
for an internal node, e.g. ``(3 (2 It) (4 (2 's) (3 great)))``. A word is any
run of characters other than ASCII whitespace and parentheses (PTB escapes
parentheses as ``-LRB-`` / ``-RRB-``; SST has words with a no-break space
inside, such as ``8\xa01\\/2``). The parsers use explicit stacks: a tree
thousands of levels deep parses like any other.
"""
from __future__ import annotations

import gc
import io
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..io import atomic_write
from .encoding import describe_decode_error
from .tree import Tree

__all__ = ["TreeParseError", "TreeParseWarning", "TreeReader", "parse_tree", "read_trees", "write_trees",
           "node_position", "tree_line"]


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


# The fast parser builds trees without Tree.__init__'s checks (its tokens are valid by construction),
# writing the public slots itself: a builder function per node costs 10% of parsing (measured when
# this module was split from trees.py, issue 24).
_new = object.__new__
_set_label = Tree.label.__set__  # type: ignore[attr-defined]
_set_word = Tree.word.__set__  # type: ignore[attr-defined]
_set_children = Tree.children.__set__  # type: ignore[attr-defined]


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
            node = Tree(f[2], word=f[3]) if f[3] is not None else Tree(f[2], f[4])
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
# Locating a node in the text it was parsed from


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
