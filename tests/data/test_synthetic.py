"""dynnets.data.synthetic: the documented labelling rules, the generator, the shipped samples."""

import numpy as np
import pytest

from dynnets.data import load_samples, samples_dir
from dynnets.data.synthetic import (HANDWRITTEN, LEXICON, SyntheticConfig, bag_of_words_label, constructions,
                                    from_brackets, generate_trees, generate_treebank, handwritten_trees,
                                    label_tree, main, random_tree, sentiment, treebank_stats)
from dynnets.data.trees import parse_tree


def label(brackets):
    return from_brackets(brackets).label


# Rule by rule, on hand-picked phrases; labels are 0..4 (value + 2).
@pytest.mark.parametrize("brackets, expected", [
    # leaves
    ("good", 3), ("great", 4), ("boring", 1), ("awful", 0), ("film", 2), ("not", 2), ("but", 2),
    # rule 1: negation flips polarity, result is mild
    ("(not good)", 1), ("(not great)", 1), ("(not bad)", 3), ("(not awful)", 3), ("(not long)", 2),
    ("(never boring)", 3), ("(hardly engaging)", 1),
    # rule 2: intensifiers strengthen
    ("(very good)", 4), ("(really bad)", 0), ("(very great)", 4), ("(very french)", 2),
    ("(not (very good))", 1), ("(very (not good))", 0),
    # rules 3-4: contrast, the clause after "but" decides unless neutral
    ("(good (but boring))", 1), ("(boring (but good))", 3), ("(great (but dull))", 1),
    ("(good (but long))", 3), ("(but boring)", 1),
    ("((((the acting) (is great)) ,) (but ((the script) (is terrible))))", 0),
    ("((((the script) (is terrible)) ,) (but ((the acting) (is great))))", 4),
    # rule 5: sums, clipped
    ("(the film)", 2), ("(good film)", 3), ("(good (and charming))", 4), ("(good (and boring))", 2),
    ("((very good) (and great))", 4), ("(awful (and terrible))", 0),
    ("((the film) (is (not good)))", 1), ("(((the film) (is (not bad))) .)", 3),
    # nesting: a relative clause inside a noun phrase inside a but-clause
    ("(good (but ((a cast) (that (is (not great))))))", 1),
])
def test_rules_on_hand_picked_phrases(brackets, expected):
    assert label(brackets) == expected


def test_labels_at_every_node():
    t = from_brackets("((the film) (is (good (but boring))))")
    assert str(t) == ("(1 (2 (2 the) (2 film)) (1 (2 is) (1 (3 good) (1 (2 but) (1 boring)))))")


def test_label_tree_ignores_existing_labels_and_sentiment():
    t = parse_tree("(4 (4 (4 not) (4 good)) (4 .))")
    assert str(label_tree(t)) == "(1 (1 (2 not) (3 good)) (2 .))"
    assert sentiment(t) == 1
    assert label_tree(parse_tree("(0 (0 x) (0 (0 y)))")).labels() == [2, 2, 2, 2]  # unary copies its child
    with pytest.raises(ValueError, match="binary trees"):
        label_tree(parse_tree("(2 (2 a) (2 b) (2 c))"))


def test_bag_of_words_cannot_tell():
    a, b = from_brackets("(good (but boring))"), from_brackets("(boring (but good))")
    assert sorted(a.words()) == sorted(b.words()) and a.label != b.label
    assert bag_of_words_label(["not", "good"]) == 3 and label("(not good)") == 1
    assert constructions(from_brackets("((the film) (is (not good)))")) == {"negation"}
    assert constructions(from_brackets("(good (but boring))")) == {"contrast"}
    assert constructions(from_brackets("(very good)")) == {"intensifier"}
    assert constructions(from_brackets("(very french)")) == set()


def test_handwritten_sentences():
    trees = handwritten_trees()
    assert len(trees) == len(HANDWRITTEN) >= 30
    assert all(len(n.children) in (0, 2) for t in trees for n in t.postorder())
    by_text = {" ".join(t.words()): t.label for t in trees}
    assert by_text["it is not good ."] == 1
    assert by_text["it is not bad ."] == 3
    assert by_text["it is very good ."] == 4
    assert by_text["the film is good but boring ."] == 1
    assert by_text["the script is terrible , but the acting is great ."] == 4


def test_generated_trees_follow_the_rules():
    trees = generate_trees(300, np.random.default_rng(11))
    for t in trees:
        assert label_tree(t) == t
        assert all(len(n.children) in (0, 2) for n in t.postorder())
        assert all(0 <= n.label <= 4 for n in t.postorder())


def test_generator_determinism():
    a = generate_trees(50, np.random.default_rng(3))
    b = generate_trees(50, np.random.default_rng(3))
    c = generate_trees(50, np.random.default_rng(4))
    assert a == b and a != c
    assert [str(t) for t in a] == [str(t) for t in b]
    with pytest.raises(TypeError, match="Generator"):
        generate_trees(3, 0)


def test_long_tail_and_length_control():
    trees = generate_trees(1000, np.random.default_rng(0))
    lengths = np.array([len(t.words()) for t in trees])
    assert 8 <= np.median(lengths) <= 16
    assert (lengths >= 100).sum() >= 10
    short = generate_trees(300, np.random.default_rng(0), SyntheticConfig(max_clauses=1, p_relative=0, p_pp=0))
    assert max(len(t.words()) for t in short) < 30
    heavy = generate_trees(300, np.random.default_rng(0), SyntheticConfig(clause_zipf=1.2, max_clauses=40))
    assert np.mean([len(t.words()) for t in heavy]) > 1.5 * lengths.mean()


def test_neutral_words_dominate_and_labels_spread():
    trees = generate_trees(500, np.random.default_rng(1))
    words = [w for t in trees for w in t.words()]
    assert sum(w not in LEXICON for w in words) / len(words) > 0.8
    roots = np.bincount([t.label for t in trees], minlength=5) / len(trees)
    assert roots.min() > 0.08 and roots.max() < 0.45
    stats = treebank_stats(trees)
    assert stats["bag_of_words_wrong"] > 0.25
    assert set(stats["constructions"]) == {"negation", "intensifier", "contrast"}


def test_decisive_clause_often_at_the_end():
    """In long sentences the final label often comes from the last clause: cutting the end changes it."""
    trees = [t for t in generate_trees(2000, np.random.default_rng(2)) if len(t.words()) >= 60]
    assert len(trees) >= 20
    changed = 0
    for t in trees:
        # the root is ((chain) .); its left child is a left-branching chain whose last
        # step is (rest , (but clause)) or (rest (and clause))
        chain = t.children[0] if t.children[1].is_leaf else t
        rest = chain.children[0]
        rest = rest.children[0] if rest.children and rest.children[-1].word == "," else rest
        changed += rest.label != t.label
    assert changed / len(trees) > 0.4


def test_random_tree_shapes():
    rng = np.random.default_rng(0)
    t = random_tree(rng, 20)
    assert len(t.words()) == 20 and all(len(n.children) in (0, 2) for n in t.postorder())
    u = random_tree(rng, 50, max_children=4)
    assert len(u.words()) == 50 and max(len(n.children) for n in u.postorder()) <= 4
    with pytest.raises(ValueError):
        random_tree(rng, 0)


def test_shipped_samples():
    data = load_samples()
    sizes = {k: len(v) for k, v in data.items()}
    assert sizes == {"train": 600, "dev": 150, "test": 150 + len(HANDWRITTEN)}
    assert sum((samples_dir() / f"{k}.txt").stat().st_size for k in sizes) < 1 << 20
    for trees in data.values():
        for t in trees:
            assert label_tree(t) == t
    assert data["test"][-len(HANDWRITTEN):] == handwritten_trees()
    assert (samples_dir() / "README.md").is_file()
    lengths = [len(t.words()) for t in data["train"]]
    assert max(lengths) >= 100 and 10 <= np.median(lengths) <= 15


def test_samples_regenerate_exactly(tmp_path):
    """``python -m dynnets.data.synthetic --out DIR --seed 0`` reproduces the shipped files byte for byte."""
    assert main(["--out", str(tmp_path), "--seed", "0"]) == 0
    for name in ("train", "dev", "test"):
        assert (tmp_path / f"{name}.txt").read_bytes() == (samples_dir() / f"{name}.txt").read_bytes(), name
    assert generate_treebank(0)["dev"] == load_samples()["dev"]
