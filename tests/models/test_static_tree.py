"""The Fold-style static Tree-LSTM: one graph, built once, for minibatches of
any tree shapes; the eager Tree-LSTM's parameters, loss and gradients
(float64), its training steps, the training loop."""
from __future__ import annotations

import numpy as np
import pytest

from dynnets.data import Vocabulary, load_samples
from dynnets.data.trees import Tree, binary_tree
from dynnets.models import StaticTreeLSTM, TreeLSTM, build_model
from dynnets.models.common import collate_trees, prepare_trees
from dynnets.models.static_tree import schedule_feed

SMALL = dict(embed_dim=7, hidden=5, num_classes=5)


@pytest.fixture(scope="module")
def data():
    d = load_samples()
    trees = [binary_tree(t) for t in d["train"][:30]]
    return trees, [binary_tree(t) for t in d["dev"][:10]], Vocabulary.from_trees(d["train"])


def _eager(vocab, seed, classify="all", dtype="float64"):
    return TreeLSTM(len(vocab), mode="level", classify=classify, seed=seed, dtype=dtype, **SMALL)


def _grads(model):
    return {k: p.grad.data if p.grad is not None else np.zeros_like(p.data) for k, p in model.named_parameters()}


@pytest.mark.parametrize("classify", ["all", "root"])
def test_loss_and_gradients_equal_the_eager_tree_lstm_for_every_batch_shape(data, classify):
    trees, _, vocab = data
    m = StaticTreeLSTM(len(vocab), classify=classify, batch_size=30, seed=3, dtype="float64", **SMALL)
    eager = _eager(vocab, 3, classify)
    for k, v in eager.state_dict().items():
        np.testing.assert_array_equal(m.state_dict()[k], v, err_msg=k)
    n_eqns = len(m.graph.eqns)
    levels = set()
    for idx in ([0, 1, 2], [5], list(range(6, 20)), [20, 3]):
        chunk = [trees[i] for i in idx]
        b = m.make_batch(chunk, vocab)
        levels.add(len(b.feeds[0].level_offsets))
        ls, gs = m.loss_and_grads(b)
        eager.zero_grad()
        le = eager.loss(chunk, vocab=vocab)
        le.backward()
        assert ls == pytest.approx(float(le.data), rel=1e-12)
        ge = _grads(eager)
        assert sorted(gs) == sorted(ge)
        for k in gs:
            np.testing.assert_allclose(np.asarray(gs[k]), ge[k], rtol=1e-10, atol=1e-12, err_msg=k)
    assert len(levels) > 2 and len(m.graph.eqns) == n_eqns       # several depths, one graph built once


def test_single_leaf_trees_run_no_loop_iteration(data):
    trees, _, vocab = data
    leaves = [Tree.leaf(3, "good"), Tree.leaf(1, "bad")]
    m = StaticTreeLSTM(len(vocab), seed=0, dtype="float64", **SMALL)
    b = m.make_batch(leaves, vocab)
    assert len(b.feeds[0].left) == 0 and len(b.feeds[0].level_offsets) == 2
    eager = _eager(vocab, 0)
    ls, _ = m.loss_and_grads(b)
    assert ls == pytest.approx(float(eager.loss(leaves, vocab=vocab).data), rel=1e-12)


def test_predictions_equal_the_eager_tree_lstm(data):
    trees, dev, vocab = data
    m = build_model("static-treelstm", len(vocab), batch_size=4, seed=2, **SMALL)       # float32, 3 chunks
    eager = TreeLSTM(len(vocab), seed=2, **SMALL)
    b = m.make_batch(dev, vocab)
    assert b.n_chunks == 3
    r, p, y = m.predict_all(b)
    er, ep, ey = eager.predict_all(dev, vocab=vocab)
    np.testing.assert_allclose(m.predict_proba(b), er, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r, er, rtol=1e-5, atol=1e-6)
    assert p.shape == ep.shape and sorted(y.tolist()) == sorted(ey.tolist())


def test_schedule_feed_of_a_tree_batch(data):
    trees, _, vocab = data
    s = collate_trees(prepare_trees(trees[:3], vocab)).schedule
    f = schedule_feed(s)
    np.testing.assert_array_equal(f.leaf_words[f.leaf_rows], s.leaf_word_ids)
    assert len(f.leaf_words) == len(set(s.leaf_word_ids.tolist()))
    np.testing.assert_array_equal(f.left, s.left)
    np.testing.assert_array_equal(f.level_offsets, s.level_offsets)
    assert f.n_trees == 3 and all(a.dtype == np.int64 for a in (f.leaf_words, f.left, f.root_index))


def test_sgd_steps_equal_the_eager_sgd_steps(data):
    from dynnets.nn import optim
    trees, _, vocab = data
    m = StaticTreeLSTM(len(vocab), optimizer="sgd", lr=0.1, batch_size=8, seed=5, dtype="float64", **SMALL)
    eager = _eager(vocab, 5)
    opt = optim.SGD(eager.parameters(), lr=0.1)
    for step in range(3):
        chunk = trees[8 * step:8 * step + 8]
        ls = m.train_step(m.make_batch(chunk, vocab))
        opt.zero_grad()
        le = eager.loss(chunk, vocab=vocab)
        le.backward()
        opt.step()
        assert ls == pytest.approx(float(le.data), rel=1e-10)
    for k, v in eager.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v, rtol=1e-9, atol=1e-12, err_msg=k)


def test_training_loop_and_checkpoint(data, tmp_path):
    from dynnets.train import TrainConfig, load_checkpoint, train
    trees, dev, vocab = data
    m = build_model("static-treelstm", len(vocab), batch_size=5, seed=4, **SMALL)
    assert m.is_static and m.needs_binary and m.kind == "static-treelstm"
    res = train(m, trees[:15], dev, vocab, TrainConfig(epochs=2, batch_size=5, seed=0, out_dir=str(tmp_path),
                                                        progress=False))
    assert len(res.history) == 2 and "all_nodes" in res.history[0]["dev"]
    best = load_checkpoint(tmp_path / "best.npz")
    assert isinstance(best, StaticTreeLSTM) and best.config == m.config
    b = m.make_batch(dev, vocab)
    np.testing.assert_allclose(best.predict_proba(b), m.predict_proba(b), rtol=1e-6)
    with pytest.raises(KeyError, match="missing keys"):
        best.load_state_dict({})
    with pytest.raises(ValueError, match="classify must be"):
        StaticTreeLSTM(len(vocab), classify="leaves")
