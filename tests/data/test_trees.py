"""dynnets.data.trees: parsing, errors, printing, traversal, networkx, rewrites."""

import copy
import pickle
import warnings

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynnets.data import samples_dir
from dynnets.data.synthetic import random_tree
from dynnets.data.ptb import _Labels, _parse_careful, _parse_fast
from dynnets.data.trees import (Tree, TreeParseError, TreeParseWarning, binarize, collapse_unary, from_networkx,
                                parse_tree, read_trees, to_networkx, write_trees)

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Words: anything but ASCII whitespace and parentheses (unicode spaces such as
# U+00A0 occur inside SST words).
WORD = st.text(alphabet=st.characters(blacklist_characters=" \t\n\r\f\v()", blacklist_categories=("Cs",)),
               min_size=1, max_size=6)
LABEL = st.integers(0, 4)
TREES = st.recursive(
    st.builds(lambda l, w: Tree(l, word=w), LABEL, WORD),
    lambda kids: st.builds(lambda l, cs: Tree(l, cs), LABEL, st.lists(kids, min_size=1, max_size=4)),
    max_leaves=40,
)


def naive_str(t):
    if t.is_leaf:
        return f"({t.label} {t.word})"
    return f"({t.label} " + " ".join(naive_str(c) for c in t.children) + ")"


def naive_height(t):
    return 0 if t.is_leaf else 1 + max(naive_height(c) for c in t.children)


def naive_postorder(t):
    out = []
    for c in t.children:
        out.extend(naive_postorder(c))
    out.append(t)
    return out


# ---------------------------------------------------------------------------
# Tree basics


def test_tree_fields_and_traversals():
    t = parse_tree("(3 (2 It) (4 (2 's) (3 great)))")
    assert t.label == 3 and t.word is None and len(t.children) == 2
    assert t.children[0].is_leaf and t.children[0].word == "It"
    assert t.words() == ["It", "'s", "great"]
    assert [n.word for n in t.leaves()] == ["It", "'s", "great"]
    assert t.height == 2 and t.size == 5
    assert [str(n) for n in t.postorder()] == ["(2 It)", "(2 's)", "(3 great)", "(4 (2 's) (3 great))", str(t)]
    assert [n.label for n in t.preorder()] == [3, 2, 4, 2, 3]
    assert [[str(n) for n in lvl] for lvl in t.levels()] == [
        ["(2 It)", "(2 's)", "(3 great)"], ["(4 (2 's) (3 great))"], [str(t)]]
    assert t.labels() == [2, 2, 3, 4, 3]


def test_tree_is_immutable():
    t = parse_tree("(3 (2 a) (2 b))")
    with pytest.raises(AttributeError, match="immutable"):
        t.label = 4
    with pytest.raises(AttributeError, match="immutable"):
        t.children = ()
    with pytest.raises(AttributeError, match="immutable"):
        del t.word
    assert isinstance(t.children, tuple)
    assert copy.deepcopy(t) is t


def test_tree_constructor_validation():
    with pytest.raises(ValueError, match="word"):
        Tree(1)
    with pytest.raises(ValueError, match="cannot have children"):
        Tree(1, [Tree(1, word="a")], word="b")
    with pytest.raises(TypeError, match="children"):
        Tree(1, ["a"])
    t = Tree.node(1, [Tree.leaf(2, "a"), Tree.leaf(3, "b")])
    assert str(t) == "(1 (2 a) (3 b))"


def test_equality_hash_pickle():
    a = parse_tree("(3 (2 a) (4 (2 b) (3 c)))")
    b = parse_tree("(3 (2 a) (4 (2 b) (3 c)))")
    c = parse_tree("(3 (2 a) (4 (2 b) (3 d)))")
    assert a == b and hash(a) == hash(b) and a != c
    assert a != "(3 (2 a) (4 (2 b) (3 c)))"
    assert pickle.loads(pickle.dumps(a)) == a
    assert len({a, b, c}) == 2


def test_map_and_with_labels():
    t = parse_tree("(3 (2 a) (4 (2 b) (3 c)))")
    assert str(t.map_labels(lambda l: l + 1)) == "(4 (3 a) (5 (3 b) (4 c)))"
    assert str(t.map_words(str.upper)) == "(3 (2 A) (4 (2 B) (3 C)))"
    assert str(t.with_labels([0, 1, 2, 3, 4])) == "(4 (0 a) (3 (1 b) (2 c)))"
    with pytest.raises(ValueError, match="expected 5 labels"):
        t.with_labels([1])


# ---------------------------------------------------------------------------
# Round trips


def test_round_trip_shipped_samples():
    for name in ("train", "dev", "test"):
        path = samples_dir() / f"{name}.txt"
        lines = path.read_text(encoding="utf-8").splitlines()
        trees = list(read_trees(path))
        assert len(trees) == len(lines) > 0
        for line, tree in zip(lines, trees):
            assert str(tree) == line
            assert parse_tree(str(tree)) == tree


@SETTINGS
@given(TREES)
def test_round_trip_random_trees(tree):
    s = str(tree)
    assert s == naive_str(tree)
    back = parse_tree(s)
    assert back == tree and str(back) == s
    assert back.height == naive_height(tree)
    assert back.size == len(naive_postorder(tree))
    assert [n.label for n in back.postorder()] == [n.label for n in naive_postorder(tree)]
    assert back.words() == [n.word for n in naive_postorder(tree) if n.is_leaf]


@SETTINGS
@given(TREES, st.sampled_from([" ", "  ", "\t", "\n ", " \r\n"]))
def test_extra_whitespace_parses_to_same_tree(tree, ws):
    spaced = str(tree).replace("(", "(" + ws).replace(")", ws + ")").replace(" ", ws)
    assert parse_tree(spaced) == tree


@SETTINGS
@given(st.lists(st.sampled_from(["(", ")", "(", ")", "2", "9", "x", "a b", " "]), max_size=14))
def test_fast_and_careful_parsers_agree(pieces):
    """The fast path must never accept what the reference parser rejects, nor build a different tree."""
    text = "".join(pieces)
    labels = _Labels(5, True)
    fast = _parse_fast(text, labels)
    try:
        ref = _parse_careful(text, labels, "<t>", 1)
    except TreeParseError:
        assert fast is None
    else:
        assert fast is not None and fast == ref


def test_words_with_unicode_spaces_and_escapes():
    line = "(2 (2 8\xa01\\/2) (2 -LRB-))"
    t = parse_tree(line)
    assert t.words() == ["8\xa01\\/2", "-LRB-"]
    assert str(t) == line


# ---------------------------------------------------------------------------
# Deep trees: nothing recursive


DEPTH = 5000


def test_deep_tree_parse_print_traverse():
    text = "(1 " * DEPTH + "(2 x)" + ")" * DEPTH
    t = parse_tree(text)
    assert t.height == DEPTH and t.size == DEPTH + 1
    assert str(t) == text
    assert len(t.postorder()) == DEPTH + 1 and t.postorder()[-1] is t
    assert len(t.preorder()) == DEPTH + 1
    assert len(t.levels()) == DEPTH + 1
    assert t.words() == ["x"]
    assert pickle.loads(pickle.dumps(t)) == t
    assert hash(t) == hash(parse_tree(text))
    assert from_networkx(to_networkx(t)) == t
    assert collapse_unary(t) == parse_tree("(1 x)")
    assert "..." in repr(t)


def test_deep_binary_tree():
    # A left-branching binary chain, 5,000 levels.
    text = "(1 " * DEPTH + "(2 x)" + "".join(f" (3 w{i}))" for i in range(DEPTH))
    t = parse_tree(text)
    assert t.height == DEPTH and len(t.words()) == DEPTH + 1
    assert str(t) == text
    assert binarize(t) == t


# ---------------------------------------------------------------------------
# Errors: name file, line, column and what was expected


@pytest.mark.parametrize("text, kind, col, phrase", [
    ("(2 (2 a) (2 b)", "unbalanced", 15, "expected ')' to close the '(' at line 7 column 1"),
    ("(2 a))", "unbalanced", 6, "')' has no matching '('"),
    (")", "unbalanced", 1, "no matching"),
    ("((2 a) (2 b))", "missing_label", 2, "expected an integer label in 0..4 after '(', got '('"),
    ("(x a)", "bad_label", 2, "expected an integer label in 0..4 after '(', got 'x'"),
    ("(2 (1.5 a) (2 b))", "bad_label", 5, "got '1.5'"),
    ("(2 (7 a) (2 b))", "label_range", 5, "got '7' (outside 0..4)"),
    ("(2 (-1 a) (2 b))", "label_range", 5, "outside 0..4"),
    ("()", "empty_node", 1, "empty node '()'"),
    ("(2 (2 a) ())", "empty_node", 10, "empty node '()'"),
    ("(2 (3) (2 b))", "empty_node", 6, "empty node '(3)': expected a word or '('"),
    ("(2 (2 a) (2 b)) (2 c)", "trailing_text", 17, "expected end of line after the tree closed at line 7 column 15"),
    ("(2 a) extra", "trailing_text", 7, "got 'extra'"),
    ("(2 a b)", "unexpected_token", 6, "expected ')' after the word 'a', got a second word 'b'"),
    ("(2 (2 a) b)", "unexpected_token", 10, "expected '(' or ')' after a subtree"),
    ("(2 a (2 b))", "unexpected_token", 6, "expected ')' after the word 'a'"),
    ("word", "unexpected_token", 1, "expected '(' to start a tree"),
    ("", "empty_input", 1, "expected a tree"),
])
def test_parse_errors(text, kind, col, phrase):
    with pytest.raises(TreeParseError) as info:
        parse_tree(text, path="f.txt", line=7)
    e = info.value
    assert (e.kind, e.path, e.line, e.column) == (kind, "f.txt", 7, col)
    assert str(e).startswith(f"f.txt:7:{col}: ")
    assert phrase in str(e)


def test_parse_error_multiline_text_position():
    with pytest.raises(TreeParseError) as info:
        parse_tree("(2 (2 a)\n   (9 b))")
    assert (info.value.line, info.value.column) == (2, 5)
    assert str(info.value).startswith("<string>:2:5:")


def test_num_classes_and_label_kinds():
    assert parse_tree("(1 (0 a) (1 b))", num_classes=2).label == 1
    with pytest.raises(TreeParseError, match="0..1"):
        parse_tree("(1 (0 a) (3 b))", num_classes=2)
    assert parse_tree("(-1 (17 a))", num_classes=None).labels() == [17, -1]
    with pytest.raises(TreeParseError, match="expected an integer label after"):
        parse_tree("(x a)", num_classes=None)
    ptb = parse_tree("(S (NP (DT the) (NN cat)) (VP (VBD sat)))", int_labels=False)
    assert ptb.label == "S" and ptb.words() == ["the", "cat", "sat"]
    assert str(ptb) == "(S (NP (DT the) (NN cat)) (VP (VBD sat)))"
    with pytest.raises(ValueError, match="num_classes"):
        parse_tree("(1 a)", num_classes=0)


def _write(tmp_path, text, name="trees.txt"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_read_trees_raise_names_file_line_column(tmp_path):
    p = _write(tmp_path, "(2 a)\n\n(3 (2 b) (3 c))\n(2 (2 a) (2 b)\n(1 d)\n")
    reader = read_trees(p)
    got = []
    with pytest.raises(TreeParseError) as info:
        for t in reader:
            got.append(t)
    e = info.value
    assert (e.path, e.line, e.column, e.kind) == (str(p), 4, 15, "unbalanced")
    assert str(e).startswith(f"{p}:4:15: unbalanced parentheses: expected ')'")
    assert [str(t) for t in got] == ["(2 a)", "(3 (2 b) (3 c))"]  # trees before the error were delivered


def test_read_trees_skip_reports_count_and_reasons(tmp_path):
    p = _write(tmp_path, "(2 a)\n(7 b)\n   \n(2 (2 c)\n(x d)\n(2 e) f\n(4 g)\n\n")
    reader = read_trees(p, on_error="skip")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        trees = list(reader)
    assert [str(t) for t in trees] == ["(2 a)", "(4 g)"]
    assert [(e.line, e.kind) for e in reader.skipped] == [
        (2, "label_range"), (4, "unbalanced"), (5, "bad_label"), (6, "trailing_text")]
    assert reader.reasons() == {"label_range": 1, "unbalanced": 1, "bad_label": 1, "trailing_text": 1}
    assert len(w) == 1 and issubclass(w[0].category, TreeParseWarning)
    msg = str(w[0].message)
    assert "skipped 4 of 8 lines" in msg and "label_range (line 2)" in msg and "unbalanced (line 4)" in msg
    assert f"{p}:2:2:" in msg  # first error in full


def test_read_trees_is_streaming_and_reiterable(tmp_path):
    n = 3000
    p = _write(tmp_path, "".join(f"(1 (2 w{i}) (3 x))\n" for i in range(n)))
    reader = read_trees(p)
    reader.chunk_bytes = 1000  # several chunks
    it = iter(reader)
    first = next(it)
    assert first.words() == ["w0", "x"]
    assert reader.lines_read < n  # has not read the whole file
    assert sum(1 for _ in it) == n - 1
    assert len(list(reader)) == n


def test_read_trees_bad_on_error(tmp_path):
    with pytest.raises(ValueError, match="on_error"):
        read_trees(_write(tmp_path, "(1 a)\n"), on_error="ignore")


def test_write_trees_atomic(tmp_path):
    trees = [parse_tree("(1 (2 a) (3 b))"), parse_tree("(4 c)")]
    p = tmp_path / "out.txt"
    assert write_trees(p, trees) == 2
    assert p.read_text() == "(1 (2 a) (3 b))\n(4 c)\n"
    assert [f.name for f in tmp_path.iterdir()] == ["out.txt"]


# ---------------------------------------------------------------------------
# networkx


@SETTINGS
@given(TREES)
def test_networkx_round_trip(tree):
    g = to_networkx(tree)
    assert isinstance(g, nx.DiGraph) and nx.is_arborescence(g)
    assert g.number_of_nodes() == tree.size
    assert g.nodes[0]["label"] == tree.label
    leaves = [v for v in g if g.out_degree(v) == 0]
    assert sorted(g.nodes[v]["word"] for v in leaves) == sorted(tree.words())
    assert from_networkx(g) == tree


def test_from_networkx_children_order_and_errors():
    g = nx.DiGraph()
    g.add_node("r", label=3)
    g.add_node("x", label=2, word="second")
    g.add_node("y", label=1, word="first")
    g.add_edge("r", "x", order=1)
    g.add_edge("r", "y", order=0)
    assert str(from_networkx(g)) == "(3 (1 first) (2 second))"
    h = nx.DiGraph()  # no order attribute: insertion order
    h.add_node("r", label=3)
    h.add_node("x", label=2, word="a")
    h.add_node("y", label=1, word="b")
    h.add_edges_from([("r", "x"), ("r", "y")])
    assert str(from_networkx(h)) == "(3 (2 a) (1 b))"
    bad = h.copy()
    del bad.nodes["y"]["word"]
    with pytest.raises(ValueError, match="leaf 'y' needs"):
        from_networkx(bad)
    two_roots = h.copy()
    two_roots.add_node("z", label=1, word="c")
    with pytest.raises(ValueError, match="exactly one node without a parent"):
        from_networkx(two_roots)
    with pytest.raises(ValueError, match="undirected"):
        from_networkx(nx.Graph([(0, 1)]))
    nolabel = h.copy()
    del nolabel.nodes["r"]["label"]
    with pytest.raises(ValueError, match="no 'label'"):
        from_networkx(nolabel)
    shared = h.copy()
    shared.add_node("q", label=1)
    shared.add_edge("q", "x")
    with pytest.raises(ValueError, match="2 parents"):
        from_networkx(shared, root="r")


# ---------------------------------------------------------------------------
# Binarization and unary collapse


def test_binarize_right_and_left():
    t = parse_tree("(1 (2 a) (2 b) (2 c) (2 d))")
    assert str(binarize(t)) == "(1 (2 a) (1 (2 b) (1 (2 c) (2 d))))"
    assert str(binarize(t, "left")) == "(1 (1 (1 (2 a) (2 b)) (2 c)) (2 d))"
    assert str(binarize(t, intermediate_label=0)) == "(1 (2 a) (0 (2 b) (0 (2 c) (2 d))))"
    ptb = parse_tree("(S (NP (DT a) (JJ b) (NN c)) (VP d))".replace("(VP d)", "(VP (V d))"), int_labels=False)
    assert str(binarize(ptb, intermediate_label=lambda l: l + "'")) == \
        "(S (NP (DT a) (NP' (JJ b) (NN c))) (VP (V d)))"
    with pytest.raises(ValueError, match="factor"):
        binarize(t, "middle")


def test_collapse_unary():
    t = parse_tree("(1 (2 (3 (4 a))) (0 (4 b) (3 (1 c))))")
    assert str(collapse_unary(t)) == "(1 (2 a) (0 (4 b) (3 c)))"
    assert str(collapse_unary(t, "bottom")) == "(1 (4 a) (0 (4 b) (1 c)))"
    ptb = parse_tree("(S (NP (NN it)) (VP (VBZ rains)))", int_labels=False)
    assert str(collapse_unary(ptb, lambda a, b: f"{a}+{b}")) == "(S (NP+NN it) (VP+VBZ rains))"
    whole = parse_tree("(1 (2 (3 (4 a) (4 b))))")
    assert str(collapse_unary(whole)) == "(1 (4 a) (4 b))"
    with pytest.raises(ValueError, match="keep"):
        collapse_unary(t, "middle")


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.sampled_from(["left", "right"]))
def test_binarize_collapse_random(seed, n, factor):
    t = random_tree(np.random.default_rng(seed), n, max_children=5)
    b = collapse_unary(binarize(t, factor))
    assert b.words() == t.words()
    assert all(len(x.children) in (0, 2) for x in b.postorder())
    if all(len(x.children) in (0, 2) for x in t.postorder()):
        assert binarize(t, factor) == t


def test_from_networkx_unreachable_component():
    g = to_networkx(parse_tree("(1 (2 a) (3 b))"))
    g.add_node("x", label=1)
    g.add_node("y", label=2, word="w")
    g.add_edge("x", "y")
    g.add_edge("y", "x")  # a cycle away from the root: every node has one parent
    g.graph["root"] = 0
    with pytest.raises(ValueError, match="2 node\\(s\\) are not reachable from root 0"):
        from_networkx(g)


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("bad, line, col, byte", [
    ("(3 (2 caf\u00e9) (3 good))".encode("latin-1"), 3, 10, 0xE9),       # Latin-1 text
    (b"\x89PNG\r\n\x1a\n\x00\x00", 3, 1, 0x89),                            # binary garbage
])
def test_read_trees_undecodable_bytes_name_file_line_column(tmp_path, on_error, bad, line, col, byte):
    good = b"(2 a)\n" + b"(3 (2 b) (3 c))\n"
    p = tmp_path / "trees.txt"
    # far into the file, past the first chunk the decoder reads
    p.write_bytes(b"(2 a)\n" * 40000 + good[6:] + bad + b"\n(1 d)\n")
    with pytest.raises(TreeParseError) as info:
        list(read_trees(p, on_error=on_error))
    e = info.value
    offset = 6 * 40000 + len(good) - 6 + len(bad.split(bytes([byte]))[0])
    assert (e.path, e.line, e.column, e.kind) == (str(p), 40000 + line - 1, col, "encoding")
    assert f"byte 0x{byte:02x} (byte offset {offset} of the file) is not valid UTF-8" in str(e)
    assert str(e).startswith(f"{p}:{40000 + line - 1}:{col}: ")


def test_decode_error_column_ignores_a_byte_order_mark(tmp_path):
    from dynnets.data.encoding import find_decode_error
    p = tmp_path / "t.txt"
    p.write_bytes(b"\xef\xbb\xbf(2 \xe9)\n")
    assert find_decode_error(p) == (1, 4, 6, 0xE9)
    p.write_bytes("(2 \u00e9t\u00e9)\n".encode("utf-8"))
    assert find_decode_error(p) is None


def test_first_nonbinary_and_node_position():
    from dynnets.data.trees import first_nonbinary, node_position
    text = "(3 (2 a) (3 (2 b) (2 c) (2 d)))"
    t = parse_tree(text)
    assert first_nonbinary(t) == (2, 3)
    assert node_position(text, 2) == (1, 10) and node_position(text, 0) == (1, 1)
    assert first_nonbinary(parse_tree("(3 (2 a) (3 b))")) is None
    assert first_nonbinary(parse_tree("(3 (2 (2 a)) (3 b))")) == (1, 1)
    assert node_position("(3 (2 a)\n   (3 b))", 2) == (2, 4)


def test_tree_line_skips_blank_lines(tmp_path):
    from dynnets.data.trees import tree_line
    p = _write(tmp_path, "(2 a)\n\n  \n(3 (2 b) (3 c))\n(1 d)\n")
    assert [str(t) for t in read_trees(p)][1] == "(3 (2 b) (3 c))"
    assert tree_line(p, 1) == (4, "(3 (2 b) (3 c))") and tree_line(p, 2) == (5, "(1 d)")
    with pytest.raises(IndexError):
        tree_line(p, 3)


def test_write_trees_leaves_no_temp_file_and_sweeps_stale_ones(tmp_path):
    import os
    from dynnets.io import atomic_write_bytes
    p = tmp_path / "out.txt"
    stale = tmp_path / ".out.txt.abcd1234.tmp"     # an untagged temp file of the same target
    stale.write_bytes(b"x")
    assert write_trees(p, [parse_tree("(2 a)"), parse_tree("(3 (2 b) (3 c))")]) == 2
    assert p.read_text() == "(2 a)\n(3 (2 b) (3 c))\n"
    assert sorted(os.listdir(tmp_path)) == ["out.txt"]
    atomic_write_bytes(p, b"")
    assert p.read_bytes() == b""


def test_the_trees_module_keeps_its_names_after_its_split():
    """Issue 24 split data/trees.py into the tree type (data/tree.py) and the
    bracket format (data/ptb.py): ``dynnets.data.trees`` keeps every name of
    its ``__all__`` as the same objects, and a pickled tree round-trips
    (deep trees too: the flat postorder reduction)."""
    import dynnets.data.ptb as ptb
    import dynnets.data.tree as tree_mod
    import dynnets.data.trees as trees
    assert trees.__all__ == ["Tree", "TreeParseError", "TreeParseWarning", "TreeReader", "parse_tree", "read_trees",
                             "write_trees", "to_networkx", "from_networkx", "binarize", "collapse_unary",
                             "binary_tree", "first_nonbinary", "node_position", "tree_line"]
    for n in trees.__all__:
        home = ptb if n in ptb.__all__ else tree_mod
        assert getattr(trees, n) is getattr(home, n), n
    assert pickle.loads(b"cdynnets.data.trees\nTree\n.") is Tree
    deep = parse_tree("(1 " * 3000 + "(1 w)" + ")" * 3000)
    assert pickle.loads(pickle.dumps(deep)) == deep
