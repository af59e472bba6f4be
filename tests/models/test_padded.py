"""The padded static LSTM baseline: padding, static == eager loss and
gradients, masked == the dynamic LSTM, training steps == the eager optimizer,
the training-loop protocol and checkpoints; the bucketed dynamic_rnn variant
against the eager masked loop and the dynamic LSTM."""
from __future__ import annotations

import numpy as np
import pytest

from dynnets.data import Vocabulary, load_samples
from dynnets.models import SequenceClassifier, build_model
from dynnets.models.padded import DynamicRNNClassifier, PaddedLSTMClassifier, bucket_sentences, pad_sentences
from dynnets.nn import optim
from dynnets.nn.module import Parameter

SMALL = dict(embed_dim=8, hidden_size=6, num_classes=5, batch_size=4, max_len=7)


@pytest.fixture(scope="module")
def data():
    d = load_samples()
    trees = d["train"][:40]
    return trees, d["dev"][:12], Vocabulary.from_trees(d["train"])


def test_pad_sentences_pads_truncates_and_fills_dummy_rows():
    b = pad_sentences([[5, 6, 7], [8] * 9, [9]], [1, 2, 3], batch_size=2, max_len=4)
    assert b.ids.shape == (2, 4, 2) and b.mask.shape == (2, 4, 2, 1)
    np.testing.assert_array_equal(b.ids[0][:, 0], [5, 6, 7, 0])          # time-major, <pad> = 0 after
    np.testing.assert_array_equal(b.ids[0][:, 1], [8, 8, 8, 8])          # truncated to the first 4
    np.testing.assert_array_equal(b.ids[1][:, 1], [0, 0, 0, 0])          # dummy row
    np.testing.assert_array_equal(b.mask[0][:, 0, 0], [1, 1, 1, 0])
    np.testing.assert_array_equal(b.weights, [[1, 1], [1, 0]])
    np.testing.assert_array_equal(b.labels, [[1, 2], [3, 0]])
    assert (b.n_sentences, b.n_real_steps, b.n_truncated) == (3, 8, 1)
    assert b.n_pad_steps == 2 * 2 * 4 - 8


@pytest.mark.parametrize("masked", [True, False])
def test_static_loss_and_grads_equal_eager(data, masked):
    trees, _, vocab = data
    m = PaddedLSTMClassifier(len(vocab), masked=masked, seed=3, **SMALL)
    b = m.make_batch(trees[:7], vocab)            # a full chunk and a partial one
    for chunk in range(b.n_chunks):
        ls, gs = m.loss_and_grads(b, chunk)
        le, ge = m.eager_loss_and_grads(b, chunk)
        assert ls == pytest.approx(le, rel=1e-6)
        for k in gs:
            np.testing.assert_allclose(gs[k], ge[k], rtol=1e-5, atol=1e-7, err_msg=k)


def test_dropout_draws_a_new_mask_every_step_and_not_in_predictions(data):
    trees, dev, vocab = data
    m = PaddedLSTMClassifier(len(vocab), seed=3, dropout=0.5, embed_dropout=0.3, **SMALL)
    plain = PaddedLSTMClassifier(len(vocab), seed=3, **SMALL)
    b = m.make_batch(trees[:4], vocab)
    losses = [m.loss_and_grads(b)[0] for _ in range(3)]
    assert len(set(losses)) == 3                                  # a new mask at every run
    assert plain.loss_and_grads(b)[0] not in losses
    # predictions run the forward without dropout: deterministic, and the plain model's
    bd = m.make_batch(dev, vocab)
    np.testing.assert_array_equal(m.predict_proba(bd), m.predict_proba(bd))
    np.testing.assert_allclose(m.predict_proba(bd), plain.predict_proba(bd), rtol=1e-6)
    again = PaddedLSTMClassifier(len(vocab), seed=3, dropout=0.5, embed_dropout=0.3, **SMALL)
    assert [again.loss_and_grads(b)[0] for _ in range(3)] == losses  # same seed, same masks
    assert m.train_step(b) > 0
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        PaddedLSTMClassifier(len(vocab), dropout=1.0, **SMALL)


def test_initial_weights_and_names_match_the_dynamic_lstm(data):
    _, _, vocab = data
    m = PaddedLSTMClassifier(len(vocab), seed=5, **SMALL)
    dyn = SequenceClassifier(len(vocab), embed_dim=8, hidden=6, num_classes=5, cell="lstm", seed=5)
    sd, dd = m.state_dict(), dyn.state_dict()
    assert sorted(sd) == sorted(dd)
    for k in sd:
        np.testing.assert_array_equal(sd[k], dd[k], err_msg=k)


def test_masked_padding_equals_the_dynamic_lstm(data):
    """With masking, padding changes nothing: the padded model predicts what
    the unpadded dynamic LSTM predicts (sentences no longer than max_len)."""
    trees, _, vocab = data
    short = [t for t in trees if len(t.words()) <= 12][:9]
    m = PaddedLSTMClassifier(len(vocab), **dict(SMALL, max_len=12), masked=True, seed=1)
    dyn = SequenceClassifier(len(vocab), embed_dim=8, hidden=6, num_classes=5, cell="lstm", seed=1)
    p_static = m.predict_proba(m.make_batch(short, vocab))
    p_dyn = dyn.predict_proba(dyn.make_batch(short, vocab))
    np.testing.assert_allclose(p_static, p_dyn, rtol=1e-4, atol=1e-6)
    # the unmasked model reads the pads: other probabilities, depending on max_len
    u12 = PaddedLSTMClassifier(len(vocab), **dict(SMALL, max_len=12), masked=False, seed=1)
    u20 = PaddedLSTMClassifier(len(vocab), **dict(SMALL, max_len=20), masked=False, seed=1)
    pu12 = u12.predict_proba(u12.make_batch(short, vocab))
    pu20 = u20.predict_proba(u20.make_batch(short, vocab))
    assert not np.allclose(pu12, p_dyn, atol=1e-4) and not np.allclose(pu12, pu20, atol=1e-4)


@pytest.mark.parametrize("optimizer", ["adagrad", "adam", "sgd"])
def test_train_steps_equal_eager_optimizer(data, optimizer):
    trees, _, vocab = data
    lr, wd = 0.05, 0.01
    m = PaddedLSTMClassifier(len(vocab), optimizer=optimizer, lr=lr, weight_decay=wd, seed=2, **SMALL)
    params = {k: Parameter(v) for k, v in m.state_dict().items()}
    emb = params["embedding.weight"]
    rest = [p for k, p in params.items() if k != "embedding.weight"]
    groups = [{"params": rest, "weight_decay": wd}, {"params": [emb], "weight_decay": 0.0}]
    if optimizer == "adagrad":
        eopt = optim.Adagrad(groups, lr=lr)
    elif optimizer == "adam":
        groups[1]["lazy"] = True
        eopt = optim.Adam(groups, lr=lr)
    else:
        eopt = optim.SGD(groups, lr=lr)
    from dynnets.models.padded import forward
    for step in range(3):
        b = m.make_batch(trees[4 * step:4 * step + 4], vocab)
        loss_static = m.train_step(b)
        eopt.zero_grad()
        le, _ = forward(list(params.values()), b.ids[0], b.mask[0], b.labels[0], b.weights[0], 6, True)
        le.backward()
        eopt.step()
        assert loss_static == pytest.approx(float(le.data), rel=1e-5)
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(v, params[k].data, rtol=1e-4, atol=1e-6, err_msg=k)


def test_large_batches_run_in_chunks_and_stats_accumulate(data):
    trees, _, vocab = data
    m = PaddedLSTMClassifier(len(vocab), **SMALL)
    b = m.make_batch(trees[:10], vocab)
    assert b.n_chunks == 3
    p = m.predict_proba(b)
    assert p.shape == (10, 5)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-5)
    st = m.padding_stats()
    assert st["sentences"] == 10 and st["real_steps"] == b.n_real_steps
    assert st["pad_steps"] == b.n_pad_steps == 3 * 4 * 7 - b.n_real_steps
    assert st["truncated_sentences"] == sum(len(t.words()) > 7 for t in trees[:10])
    losses = [m.train_step(b) for _ in range(15)]
    assert losses[-1] < losses[0]
    assert m.padding_stats()["sentences"] == 10 + 15 * 10
    m.reset_padding_stats()
    assert m.padding_stats() == {"pad_steps": 0, "real_steps": 0, "truncated_sentences": 0, "sentences": 0}
    with pytest.raises(ValueError, match="max_len"):
        PaddedLSTMClassifier(len(vocab), **dict(SMALL, max_len=9)).predict_proba(b)


def test_state_dict_round_trip_and_errors(data):
    trees, _, vocab = data
    a = PaddedLSTMClassifier(len(vocab), seed=0, **SMALL)
    b = PaddedLSTMClassifier(len(vocab), seed=9, **SMALL)
    batch = a.make_batch(trees[:4], vocab)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.predict_proba(batch), b.predict_proba(batch))
    sd = a.state_dict()
    sd["embedding.weight"] += 1.0                       # a copy: the model is unchanged
    assert not np.array_equal(sd["embedding.weight"], a.state_dict()["embedding.weight"])
    with pytest.raises(KeyError, match="missing keys: \\['out.bias'\\]"):
        b.load_state_dict({k: v for k, v in sd.items() if k != "out.bias"})
    bad = dict(sd)
    bad["out.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(ValueError, match="size mismatch for out.weight"):
        b.load_state_dict(bad)


def test_training_loop_and_checkpoint(data, tmp_path):
    from dynnets.train import TrainConfig, load_checkpoint, train
    trees, dev, vocab = data
    m = build_model("padded-lstm", len(vocab), **SMALL, seed=4)
    assert m.is_static and m.kind == "padded-lstm"
    res = train(m, trees[:16], dev, vocab, TrainConfig(epochs=2, batch_size=4, seed=0, out_dir=str(tmp_path),
                                                        progress=False))
    assert len(res.history) == 2
    pad = res.history[0]["padding"]
    assert pad["sentences"] == 16 + len(dev)             # training batches and dev predictions
    best = load_checkpoint(tmp_path / "best.npz")
    assert isinstance(best, PaddedLSTMClassifier) and best.config == m.config
    batch = m.make_batch(dev, vocab)
    np.testing.assert_allclose(best.predict_proba(batch), m.predict_proba(batch), rtol=1e-6)


# --------------------------------------------------------------------------
# padded-bucketed: dynamic_rnn, each batch padded to its own maximum
# --------------------------------------------------------------------------

BUCKETED = dict(embed_dim=8, hidden_size=6, num_classes=5, batch_size=4)


def test_bucket_sentences_pads_each_chunk_to_its_own_maximum():
    b = bucket_sentences([[5, 6, 7], [8] * 9, [9]], [1, 2, 3], batch_size=4)
    assert b.n_chunks == 1 and b.chunks[0][0].shape == (9, 3)            # time-major, padded to 9, no truncation
    np.testing.assert_array_equal(b.chunks[0][1], [3, 9, 1])
    np.testing.assert_array_equal(b.order, [0, 1, 2])
    assert (b.n_real_steps, b.n_pad_steps) == (13, 27 - 13)
    b = bucket_sentences([[5, 6, 7], [8] * 9, [9], [4, 4]], [1, 2, 3, 4], batch_size=2)   # sorted, then cut
    assert [c[0].shape for c in b.chunks] == [(2, 2), (9, 2)]
    np.testing.assert_array_equal(b.order, [2, 3, 0, 1])
    np.testing.assert_array_equal(b.chunks[0][2], [3, 4])
    assert b.n_pad_steps == 4 + 18 - 15


def test_bucketed_loss_and_grads_equal_the_eager_masked_loop_for_every_shape(data):
    trees, _, vocab = data
    m = DynamicRNNClassifier(len(vocab), seed=3, **BUCKETED)
    n_eqns = len(m.graph.eqns)
    shapes = set()
    for lo, hi in ((0, 4), (4, 6), (6, 7), (10, 14)):
        b = m.make_batch(trees[lo:hi], vocab)
        shapes.add(b.chunks[0][0].shape)
        ls, gs = m.loss_and_grads(b)
        le, ge = m.eager_loss_and_grads(b)
        assert ls == pytest.approx(le, rel=1e-6)
        for k in gs:
            np.testing.assert_allclose(gs[k], ge[k], rtol=1e-5, atol=1e-7, err_msg=k)
    assert len(shapes) == 4 and len(m.graph.eqns) == n_eqns         # one graph, built once, for four shapes


def test_bucketed_model_predicts_what_the_dynamic_lstm_predicts(data):
    trees, _, vocab = data
    m = build_model("padded-bucketed", len(vocab), seed=1, **BUCKETED)
    dyn = SequenceClassifier(len(vocab), embed_dim=8, hidden=6, num_classes=5, cell="lstm", seed=1)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, dyn.state_dict()[k], err_msg=k)
    b = m.make_batch(trees[:11], vocab)                    # 3 chunks, sorted by length; results in caller order
    assert b.n_chunks == 3
    np.testing.assert_allclose(m.predict_proba(b), dyn.predict_proba(dyn.make_batch(trees[:11], vocab)), rtol=1e-4,
                               atol=1e-6)
    assert m.padding_stats()["pad_steps"] == b.n_pad_steps and m.max_len is None


def test_bucketed_training_loop_and_checkpoint(data, tmp_path):
    from dynnets.train import TrainConfig, load_checkpoint, train
    trees, dev, vocab = data
    m = build_model("padded-bucketed", len(vocab), **BUCKETED, seed=4)
    assert m.is_static and m.kind == "padded-bucketed" and "max_len" not in m.config
    res = train(m, trees[:16], dev, vocab, TrainConfig(epochs=2, batch_size=4, seed=0, out_dir=str(tmp_path),
                                                        progress=False, bucket_batches=2))
    assert len(res.history) == 2 and res.history[1]["train_loss"] < res.history[0]["train_loss"] + 1.0
    best = load_checkpoint(tmp_path / "best.npz")
    assert isinstance(best, DynamicRNNClassifier) and best.config == m.config
    batch = m.make_batch(dev, vocab)
    np.testing.assert_allclose(best.predict_proba(batch), m.predict_proba(batch), rtol=1e-6)
