"""Sequence classifiers: packed (no padding) execution equals running every
sentence alone, and equals a plain step-by-step reference built from the
single-step cell ops; packing layout; gradients."""
import numpy as np

import dynnets as dn
import pytest

from dynnets.autograd import ops
from dynnets.autograd.gradcheck import gradcheck
from dynnets.models import SequenceClassifier, build_model
from dynnets.models.common import SentenceExample, pack_sentences
from dynnets.nn.utils import functional_call

CELLS = ["rnn", "gru", "lstm"]
V, E, H, C = 13, 4, 3, 5


def _sentences(rng, lengths=(5, 1, 7, 3, 7, 2)):
    """Unsorted lengths, with a tie and a one-token sentence."""
    return [SentenceExample(rng.integers(0, V, n), int(rng.integers(0, C))) for n in lengths]


def _model(cell, bi, seed=0):
    return SequenceClassifier(V, E, H, C, cell=cell, bidirectional=bi, seed=seed, dtype="float64")


def _grads(model):
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p._grad is not None}


def test_pack_sentences_layout():
    b = pack_sentences([[1, 2], [3, 4, 5], [6]], labels=[0, 1, 2])
    # sorted by length: [3,4,5], [1,2], [6]; step 0 has all three, step 1 two, step 2 one
    np.testing.assert_array_equal(b.batch_sizes, [3, 2, 1])
    np.testing.assert_array_equal(b.ids, [3, 1, 6, 4, 2, 5])
    np.testing.assert_array_equal(b.last, [4, 5, 2])          # caller's order
    # reversed sentences read [5,4,3], [2,1], [6] at the same packed rows
    np.testing.assert_array_equal(b.ids[b.reverse], [5, 2, 6, 4, 1, 3])
    np.testing.assert_array_equal(b.lengths, [2, 3, 1])
    with pytest.raises(ValueError, match="pack_sentences: sentence 1 is empty"):
        pack_sentences([[1], []])


@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("cell", CELLS)
def test_packed_batch_equals_each_sentence_alone(cell, bi):
    rng = np.random.default_rng(1)
    sents = _sentences(rng)
    m = _model(cell, bi)
    batch = m.collate(sents)
    logits, labels = m.logits_and_labels(batch)
    (ops.cross_entropy(logits, labels, reduction="sum")).backward()
    g_batch = _grads(m)
    alone, g_sum = [], None
    for s in sents:
        m.zero_grad()
        lg, lb = m.logits_and_labels(m.collate([s]))
        alone.append(lg.numpy()[0])
        ops.cross_entropy(lg, lb, reduction="sum").backward()
        g = _grads(m)
        g_sum = g if g_sum is None else {k: g_sum[k] + g[k] for k in g}
    np.testing.assert_allclose(logits.numpy(), np.stack(alone), rtol=1e-12, atol=1e-12)
    for k in g_batch:
        np.testing.assert_allclose(g_batch[k], g_sum[k], rtol=1e-10, atol=1e-12, err_msg=k)


def _reference_states(m, ids):
    """Final state(s) of one sentence from the single-step cell ops (PyTorch
    cell maths), written out step by step."""
    x = m.embedding.weight.data[ids]
    outs = []
    for d, seq in (("l0", x), ("l0_reverse", x[::-1])):
        if d == "l0_reverse" and not m.bidirectional:
            break
        w_ih, w_hh = getattr(m, f"weight_ih_{d}"), getattr(m, f"weight_hh_{d}")
        b_ih, b_hh = getattr(m, f"bias_ih_{d}"), getattr(m, f"bias_hh_{d}")
        h = dn.zeros(1, H, dtype=np.float64)
        c = dn.zeros(1, H, dtype=np.float64)
        for t in range(len(seq)):
            xt = dn.tensor(seq[t:t + 1], dtype=np.float64)
            if m.cell == "lstm":
                h, c = ops.lstm_cell(xt, h, c, w_ih, w_hh, b_ih, b_hh)
            elif m.cell == "gru":
                h = ops.gru_cell(xt, h, w_ih, w_hh, b_ih, b_hh)
            else:
                h = ops.tanh(ops.linear(xt, w_ih, b_ih) + ops.linear(h, w_hh, b_hh))
        outs.append(h.numpy()[0])
    return np.concatenate(outs)


@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("cell", CELLS)
def test_packed_states_equal_step_by_step_reference(cell, bi):
    rng = np.random.default_rng(2)
    sents = _sentences(rng)
    m = _model(cell, bi, seed=3)
    got = m.final_states(m.collate(sents)).numpy()
    want = np.stack([_reference_states(m, s.ids) for s in sents])
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("kind", ["lstm", "bigru", "birnn"])
def test_sequence_model_gradcheck(kind):
    """Finite differences through the whole model (float64), every parameter."""
    rng = np.random.default_rng(4)
    sents = _sentences(rng, lengths=(3, 1, 2))
    m = build_model(kind, 6, embed_dim=2, hidden=2, num_classes=3, seed=5, dtype="float64")
    sents = [SentenceExample(s.ids % 6, s.label % 3) for s in sents]
    batch = m.collate(sents)
    names = [n for n, _ in m.named_parameters()]
    gradcheck(lambda *ps: functional_call(m, dict(zip(names, ps)), batch),
              [p.data for _, p in m.named_parameters()], atol=1e-6, rtol=1e-5)


def test_predict_proba_rows_are_distributions_in_caller_order():
    rng = np.random.default_rng(6)
    sents = _sentences(rng)
    m = _model("lstm", True)
    p = m.predict_proba(m.collate(sents))
    assert p.shape == (len(sents), C)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    p_rev = m.predict_proba(m.collate(sents[::-1]))
    np.testing.assert_allclose(p_rev[::-1], p, rtol=1e-12)
    assert m.training                          # predict restores the mode


def test_dropout_only_in_training_and_reproducible():
    rng = np.random.default_rng(7)
    sents = _sentences(rng)
    a = SequenceClassifier(V, E, H, C, dropout=0.5, embed_dropout=0.3, seed=1, dtype="float64")
    b = SequenceClassifier(V, E, H, C, dropout=0.5, embed_dropout=0.3, seed=1, dtype="float64")
    batch = a.collate(sents)
    first = a.loss(batch).item()
    assert first == b.loss(batch).item()                          # same seed, same masks
    assert a.loss(batch).item() != first                          # a fresh mask per call
    p1, p2 = a.predict_proba(batch), a.predict_proba(batch)
    np.testing.assert_array_equal(p1, p2)                         # eval: no dropout


def test_unknown_cell_is_a_clear_error():
    with pytest.raises(ValueError, match="SequenceClassifier: cell must be one of"):
        SequenceClassifier(V, E, H, C, cell="transformer")
