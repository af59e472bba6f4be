"""The bag-of-words baseline: mean pooling, order invariance, gradients."""
import numpy as np
import pytest

from dynnets.data import Vocabulary, parse_tree
from dynnets.models import build_model
from dynnets.models.bow import BagOfWords
from dynnets.train import load_checkpoint, save_checkpoint

TREES = [parse_tree(s) for s in ("(3 (2 it) (3 (2 is) (3 good)))", "(1 (2 it) (1 (2 is) (1 (2 not) (3 good))))",
                                 "(1 (3 good) (1 (2 but) (1 boring)))", "(2 film)")]


def _vocab():
    return Vocabulary.from_trees(TREES)


def test_sentence_vector_is_the_mean_of_word_vectors():
    v = _vocab()
    m = BagOfWords(len(v), embed_dim=4, hidden=3, seed=1, dtype="float64")
    b = m.make_batch(TREES, v)
    got = m.sentence_vectors(b).numpy()
    W = m.embedding.weight.numpy()
    for r, t in enumerate(TREES):
        np.testing.assert_allclose(got[r], W[v.ids(t.words())].mean(0), rtol=1e-12)


def test_word_order_does_not_matter():
    v = _vocab()
    m = build_model("bow", len(v), embed_dim=5, hidden=4, seed=0)
    a = parse_tree("(1 (3 good) (1 (2 but) (1 boring)))")
    b = parse_tree("(3 (1 boring) (3 (2 but) (3 good)))")
    pa, pb = m.predict_proba(m.make_batch([a], v)), m.predict_proba(m.make_batch([b], v))
    np.testing.assert_allclose(pa, pb, rtol=1e-6)


@pytest.mark.parametrize("hidden", [0, 3])
def test_loss_gradients_match_finite_differences(hidden):
    v = _vocab()
    m = BagOfWords(len(v), embed_dim=4, hidden=hidden, seed=2, dtype="float64")
    batch = m.make_batch(TREES, v)
    for p in m.parameters():
        p._grad = None
    m.loss(batch).backward()
    rng = np.random.default_rng(0)
    for name, p in m.named_parameters():
        g = p.grad
        g = g.to_dense() if hasattr(g, "to_dense") else np.asarray(g)
        for _ in range(3):
            idx = tuple(int(rng.integers(s)) for s in p.numpy().shape)
            old = p.numpy()[idx]
            p.numpy()[idx] = old + 1e-6
            lp = float(m.loss(batch).item())
            p.numpy()[idx] = old - 1e-6
            lm = float(m.loss(batch).item())
            p.numpy()[idx] = old
            assert np.isclose((lp - lm) / 2e-6, g[idx], rtol=1e-5, atol=1e-9), (name, idx)


def test_checkpoint_round_trip(tmp_path):
    v = _vocab()
    m = build_model("bow", len(v), embed_dim=4, hidden=3, seed=3)
    save_checkpoint(tmp_path / "m.npz", m, v)
    back = load_checkpoint(tmp_path / "m.npz")
    assert back.kind == "bow"
    b = m.make_batch(TREES, v)
    np.testing.assert_allclose(back.predict_proba(back.make_batch(TREES, back.vocab)), m.predict_proba(b))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="hidden"):
        BagOfWords(10, hidden=-1)
    m = BagOfWords(10, embed_dim=2, hidden=2)
    with pytest.raises(ValueError, match="empty batch"):
        m.collate([])
