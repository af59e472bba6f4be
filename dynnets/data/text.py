"""Sentences as trees: a PTB-style tokenizer, a fixed binarisation of plain
sentences, and the reader of user input (an SST tree, an unlabelled bracketed
tree or plain text)."""
from __future__ import annotations

import re

from .trees import Tree, TreeParseError, binary_tree, first_nonbinary, node_position, parse_tree

__all__ = ["tokenize", "sentence_tree", "read_tree"]

_CLITIC = re.compile(r"^(.+?)(n't|'s|'re|'ve|'ll|'d|'m)$", re.IGNORECASE)
_EDGE_PUNCT = "\"'`.,;:!?()[]{}"
_FINAL = frozenset({".", "!", "?"})


def tokenize(text):
    """Split a plain sentence into PTB-style tokens: whitespace, then leading
    and trailing punctuation, then clitics (``isn't`` -> ``is n't``,
    ``film's`` -> ``film 's``)."""
    out = []
    for raw in text.split():
        lead, trail = [], []
        while raw and raw[0] in _EDGE_PUNCT and len(raw) > 1:
            lead.append(raw[0])
            raw = raw[1:]
        while raw and raw[-1] in _EDGE_PUNCT and len(raw) > 1:
            trail.append(raw[-1])
            raw = raw[:-1]
        body = [raw]
        m = _CLITIC.match(raw)
        if m:
            body = [m.group(1), m.group(2)]
        out += lead + [b for b in body if b] + trail[::-1]
    return out


def _right_branching(words):
    """Right-branching tree over ``words``; a trailing comma joins at the top: ``((a (b c)) ,)``."""
    tail = None
    if len(words) > 1 and words[-1] == ",":
        words, tail = words[:-1], words[-1]
    t = Tree.leaf(2, words[-1])
    for w in reversed(words[:-1]):
        t = Tree.node(2, (Tree.leaf(2, w), t))
    return t if tail is None else Tree.node(2, (t, Tree.leaf(2, tail)))


def sentence_tree(text):
    """A binary tree over a plain sentence (the fallback when no parse is given).

    Rule: tokenize (:func:`tokenize`); split the sentence at every "but" into
    a left-branching chain ``((c1 (but c2)) (but c3))``, a comma just before
    "but" staying with the clause on its left; each clause is right-branching
    (``(the (film (is good)))``), a trailing comma joined at its top;
    sentence-final ``.``, ``!`` or ``?`` joins at the root. This mirrors how
    English phrases nest to the right and how "but" joins clauses (the shape
    of the sample treebank's trees); every node gets the neutral label 2.
    """
    words = tokenize(text)
    if not words:
        raise ValueError("sentence_tree: the sentence has no words")
    final = None
    if len(words) > 1 and words[-1] in _FINAL:
        final = words.pop()
    parts, cur = [], []
    for w in words:
        if w.lower() == "but" and cur:
            parts.append(cur)
            cur = [w]
        else:
            cur.append(w)
    parts.append(cur)
    tree = None
    for p in parts:
        if tree is None:
            tree = _right_branching(p)
        elif len(p) == 1:          # a trailing "but": just another word
            tree = Tree.node(2, (tree, Tree.leaf(2, p[0])))
        else:
            tree = Tree.node(2, (tree, Tree.node(2, (Tree.leaf(2, p[0]), _right_branching(p[1:])))))
    if final is not None:
        tree = Tree.node(2, (tree, Tree.leaf(2, final)))
    return tree


_BRACKET_TOKENS = re.compile(r"\(|\)|[^ \t\n\r\f\v()]+")
_FIRST_TOKEN = re.compile(r"[ \t\n\r\f\v]*\([ \t\n\r\f\v]*([^ \t\n\r\f\v()]+)")
_INT_TOKEN = re.compile(r"[+-]?[0-9]+")


def _line_col(text, pos):
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _fail(text, pos, where, kind, reason):
    return TreeParseError(where, *_line_col(text, pos), kind, reason)


def _unlabelled_brackets(text, where):
    """An unlabelled bracketed tree (labels 2); a bracket around one item is
    that item. Returns the tree and the offset of each internal node's '('."""
    stack = [[None, []]]
    opened = {}
    for m in _BRACKET_TOKENS.finditer(text):
        t, pos = m.group(), m.start()
        if t == "(":
            if len(stack) == 1 and stack[0][1]:
                raise _fail(text, pos, where, "trailing_text", "expected end of input after the tree, got '('")
            stack.append([pos, []])
        elif t == ")":
            if len(stack) < 2:
                raise _fail(text, pos, where, "unbalanced", "unbalanced brackets: ')' has no matching '('")
            start, kids = stack.pop()
            if not kids:
                raise _fail(text, start, where, "empty_node", "empty brackets '()': expected words or subtrees")
            if len(kids) == 1:
                node = kids[0]
            else:
                node = Tree.node(2, tuple(kids))
                opened[id(node)] = start
            stack[-1][1].append(node)
        else:
            if len(stack) == 1:
                raise _fail(text, pos, where, "unexpected_token", f"expected '(' to start a tree, got {t!r}")
            stack[-1][1].append(Tree.leaf(2, t))
    if len(stack) != 1:
        raise _fail(text, stack[-1][0], where, "unbalanced",
                    f"unbalanced brackets: this '(' is not closed ({len(stack) - 1} unclosed at the end)")
    if not stack[0][1]:
        raise _fail(text, 0, where, "empty_input", "expected a tree, got no words")
    return stack[0][1][0], opened


def read_tree(text, binarize=None, binary=False, where="<input>"):
    """A tree from user input: an SST tree ``(3 (2 it) (3 good))``, an
    unlabelled bracketed tree ``((it (is good)) .)`` (labels 2), or a plain
    sentence (:func:`sentence_tree`).

    Input that opens with ``(`` followed by an integer is read as an SST
    tree, with a label after every ``(`` in 0..4; other input that opens
    with ``(`` as an unlabelled tree, in which a bracket around one item is
    that item.

    Parameters
    ----------
    text : str
    binarize : {None, "left", "right"}
        Make every node binary: nodes with more than two children are split
        (:func:`dynnets.data.binarize`, ``left``: ``((a b) c)``, ``right``:
        ``(a (b c))``), then unary chains collapsed to their top node
        (:func:`dynnets.data.collapse_unary`).
    binary : bool
        Raise at the first node (after ``binarize``) that has other than two children.
    where : str
        Names the input in errors (``TreeParseError.path``).

    Returns
    -------
    (tree, how) : (Tree, str)
        ``how`` is ``"labelled tree"``, ``"bracketed tree"`` or ``"fallback binarisation"``.

    Raises
    ------
    TreeParseError
        With the line and column of the fault (a bad label, an unbalanced
        bracket, a node that is not binary).
    """
    if not text.strip():
        raise TreeParseError(where, 1, 1, "empty_input", "expected a sentence or a tree, got empty input")
    if not text.lstrip().startswith("("):
        return sentence_tree(text), "fallback binarisation"
    m = _FIRST_TOKEN.match(text)
    if m is not None and _INT_TOKEN.fullmatch(m.group(1)):
        tree, how, opened = parse_tree(text, path=where), "labelled tree", None
    else:
        (tree, opened), how = _unlabelled_brackets(text, where), "bracketed tree"
    if binarize is not None:
        tree = binary_tree(tree, binarize)
    elif binary:
        bad = first_nonbinary(tree)
        if bad is not None:
            idx, k = bad
            if opened is None:
                line, col = node_position(text, idx)
            else:
                line, col = _line_col(text, opened[id(tree.preorder()[idx])])
            raise TreeParseError(where, line, col, "not_binary",
                                 f"this node has {k} child{'ren' if k != 1 else ''}; the model needs binary trees "
                                 f"(two children at every node)")
    return tree, how
