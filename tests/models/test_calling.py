"""The eager models take trees, prepared examples, a collated minibatch and (tree
models) the TreeBatch of dynnets.data.tree_batch, with the same numbers;
the vocabulary comes from vocab= or model.vocab, and without one the error
says what to do."""
from pathlib import Path

import numpy as np
import pytest

from dynnets.data import Vocabulary, parse_tree, read_trees, tree_batch
from dynnets.models import build_model
from dynnets.models.common import examples_from_schedule, prepare_trees
from dynnets.train import load_checkpoint, save_checkpoint

SAMPLES = Path(__file__).resolve().parents[2] / "dynnets" / "data" / "samples"


def _trees(n=7):
    out = []
    for t in read_trees(SAMPLES / "train.txt"):
        out.append(t)
        if len(out) == n:
            return out


def _nary():
    return [parse_tree("(2 (3 a) (1 b) (0 c))"), parse_tree("(1 (2 (2 a) (3 b)) (0 c))"), parse_tree("(4 d)")]


def _loss_grads(model, x, **kw):
    model.zero_grad()
    loss = model(x, **kw)
    loss.backward()
    return loss.item(), {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p._grad is not None}


def test_examples_rebuilt_from_a_tree_batch_equal_prepared_ones():
    trees = _trees() + _nary()
    vocab = Vocabulary.from_trees(trees)
    for got, want in zip(examples_from_schedule(tree_batch(trees, vocab)), prepare_trees(trees, vocab)):
        assert (got.children, got.leaves, got.internal) == (want.children, want.leaves, want.internal)
        np.testing.assert_array_equal(got.leaf_ids, want.leaf_ids)
        for field in ("labels", "heights", "word_ids", "n_children", "child_ptr", "child_idx"):
            np.testing.assert_array_equal(getattr(got.arrays, field), getattr(want.arrays, field), err_msg=field)
        assert got.arrays.n_leaves == want.arrays.n_leaves


@pytest.mark.parametrize("mode", ["level", "recursive"])
@pytest.mark.parametrize("kind", ["treelstm", "treernn", "childsum"])
def test_tree_models_take_trees_a_tree_batch_or_examples(kind, mode):
    trees = _trees() + (_nary() if kind == "childsum" else [])
    vocab = Vocabulary.from_trees(trees)
    m = build_model(kind, len(vocab), embed_dim=5, hidden=4, seed=0, mode=mode, dtype="float64")
    examples = m.prepare(trees, vocab)
    want_loss, want_g = _loss_grads(m, m.collate(examples))
    for x, kw in ((trees, {"vocab": vocab}), (tree_batch(trees, vocab), {}), (examples, {})):
        loss, g = _loss_grads(m, x, **kw)
        assert loss == want_loss
        assert g.keys() == want_g.keys()
        for k in g:
            np.testing.assert_array_equal(g[k], want_g[k], err_msg=k)
    roots, nodes, labels = m.predict_all(m.collate(examples))
    for x in (trees, tree_batch(trees, vocab)):
        r, p, y = m.predict_all(x, vocab=vocab)
        np.testing.assert_array_equal(r, roots)
        np.testing.assert_array_equal(p, nodes)
        np.testing.assert_array_equal(y, labels)
    np.testing.assert_array_equal(m.predict_proba(trees, vocab=vocab), roots)
    single = m.predict_proba(trees[0], vocab=vocab)
    np.testing.assert_allclose(single, roots[:1], rtol=1e-12)


def test_the_vocabulary_comes_from_vocab_or_model_vocab():
    trees = _trees(4)
    vocab = Vocabulary.from_trees(trees)
    m = build_model("treelstm", len(vocab), embed_dim=5, hidden=4, seed=0)
    with pytest.raises(ValueError, match=r"TreeLSTM: got 4 tree\(s\) but no vocabulary .* pass vocab= .* "
                                         r"model\.collate\(model\.prepare\(trees, vocab\)\)"):
        m(trees)
    want = m(m.make_batch(trees, vocab)).item()
    m.vocab = vocab
    assert m(trees).item() == want
    # vocab= wins over model.vocab: every word unknown gives another loss
    other = Vocabulary(["the"])
    assert m(trees, vocab=other).item() != want and m(trees).item() == want


def test_a_loaded_checkpoint_is_callable_on_trees(tmp_path):
    trees = _trees(3)
    vocab = Vocabulary.from_trees(trees)
    m = build_model("treelstm", len(vocab), embed_dim=5, hidden=4, seed=0)
    save_checkpoint(tmp_path / "m.npz", m, vocab)
    loaded = load_checkpoint(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict_proba(trees), m.predict_proba(m.make_batch(trees, vocab)))


@pytest.mark.parametrize("kind", ["bilstm", "gru", "bow"])
def test_sentence_models_take_trees_and_examples(kind):
    trees = _trees()
    vocab = Vocabulary.from_trees(trees)
    m = build_model(kind, len(vocab), embed_dim=5, hidden=4, seed=0, dtype="float64")
    want = m(m.make_batch(trees, vocab)).item()
    assert m(trees, vocab=vocab).item() == want
    assert m(m.prepare(trees, vocab)).item() == want
    np.testing.assert_array_equal(m.predict_proba(trees, vocab=vocab), m.predict_proba(m.make_batch(trees, vocab)))
    with pytest.raises(TypeError, match=r"expected a minibatch \(\w+ from collate\), a list of Trees or a list of "
                                        r"SentenceExample \(from prepare\), got TreeBatch"):
        m(tree_batch(trees, vocab))


def test_wrong_things_are_clear_errors():
    trees = _trees(3)
    vocab = Vocabulary.from_trees(trees + _nary())
    m = build_model("treelstm", len(vocab), embed_dim=5, hidden=4, seed=0)
    with pytest.raises(ValueError, match="TreeLSTM: tree 1 of the batch has a node with other than two children"):
        m(tree_batch([trees[0], _nary()[0]], vocab))
    with pytest.raises(TypeError, match="TreeLSTM: item 1 of the list is a str, not a Tree"):
        m([trees[0], "(2 a)"], vocab=vocab)
    with pytest.raises(TypeError, match="TreeLSTM: expected a list of Trees or of TreeExample .* item 0 is a int"):
        m([1, 2])
    with pytest.raises(ValueError, match="TreeLSTM: expected trees or prepared examples, got an empty list"):
        m([])
    with pytest.raises(TypeError, match="TreeLSTM: expected a minibatch \\(TreeMiniBatch from collate\\)"):
        m(np.zeros(3))
