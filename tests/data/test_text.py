"""Sentences as trees (dynnets.data.text): the tokenizer, the fallback
binarisation of plain text, and read_tree's kinds of input and its errors."""
import pytest

from dynnets.data import text as dtext


def test_tokenize_ptb_style():
    assert dtext.tokenize("The film isn't good, but (really) \"fun\".") == [
        "The", "film", "is", "n't", "good", ",", "but", "(", "really", ")", '"', "fun", '"', "."]
    assert dtext.tokenize("  ") == []


def _bare(t):
    return t.word if t.is_leaf else "(" + " ".join(_bare(c) for c in t.children) + ")"


@pytest.mark.parametrize("text, tree", [
    ("good", "good"),
    ("it is good .", "((it (is good)) .)"),
    ("good but boring", "(good (but boring))"),
    ("the acting is great, but the script is terrible!",
     "((((the (acting (is great))) ,) (but (the (script (is terrible))))) !)"),
    ("a but b but c", "((a (but b)) (but c))"),
    ("but", "but"),
])
def test_sentence_tree_fallback(text, tree):
    t = dtext.sentence_tree(text)
    assert _bare(t) == tree
    assert all(len(n.children) in (0, 2) for n in t.postorder())


def test_read_tree_kinds():
    t, how = dtext.read_tree("(3 (2 it) (3 good))")
    assert how == "labelled tree" and t.label == 3
    t, how = dtext.read_tree("((it (is good)) .)")
    assert how == "bracketed tree" and _bare(t) == "((it (is good)) .)"
    t, how = dtext.read_tree("it is good")
    assert how == "fallback binarisation"
    for bad in ("", "((it is", "(a) (b)"):
        with pytest.raises(ValueError):
            dtext.read_tree(bad)


@pytest.mark.parametrize("text, kind, column, fragment", [
    ("(3 (2 it) (9 good))", "label_range", 12, "'9'"),        # a bad label, not an unlabelled tree
    ("(3)", "empty_node", 3, "(3)"),                         # an error, not the word "3"
    ("  (3 (2 it) (3 good)) x", "trailing_text", 23, "'x'"),  # columns count the input as given
    ("((it is", "unbalanced", 2, "not closed"),
    ("(it ())", "empty_node", 5, "empty brackets"),
])
def test_read_tree_errors_name_the_column(text, kind, column, fragment):
    from dynnets.data import TreeParseError
    with pytest.raises(TreeParseError) as e:
        dtext.read_tree(text, where="sentence 1")
    assert (e.value.kind, e.value.column, e.value.path) == (kind, column, "sentence 1")
    assert fragment in e.value.reason


def test_read_tree_binary_check_and_binarize():
    from dynnets.data import TreeParseError
    with pytest.raises(TreeParseError) as e:
        dtext.read_tree("(3 (2 a) (3 (2 b) (2 c) (2 d)))", binary=True)
    assert (e.value.kind, e.value.column) == ("not_binary", 10) and "3 children" in e.value.reason
    with pytest.raises(TreeParseError) as e:
        dtext.read_tree("(it (is very good))", binary=True)          # unlabelled: the bracket's column
    assert (e.value.kind, e.value.column) == ("not_binary", 5)
    with pytest.raises(TreeParseError) as e:
        dtext.read_tree("(3 (3 (2 a)) (2 b))", binary=True)          # a unary node
    assert e.value.column == 4 and "1 child;" in e.value.reason
    t, _ = dtext.read_tree("(3 (2 a) (3 (2 b) (2 c) (2 d)))", binarize="left")
    assert _bare(t) == "(a ((b c) d))"
    t, _ = dtext.read_tree("(3 (3 (2 a)) (2 (2 b) (2 c) (2 d)))", binarize="right", binary=True)
    assert _bare(t) == "(a (b (c d)))" and t.children[0].label == 3    # unary chain kept its top label
    assert dtext.read_tree("(3 (2 a) (2 b) (2 c))")[0].children[2].word == "c"   # no check unless asked
