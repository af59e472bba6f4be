"""Sentence classifiers over variable-length sequences: RNN, GRU and LSTM,
uni- or bidirectional, with no padding.

A minibatch of sentences in any order is packed time-major, longest first
(:func:`~dynnets.models.common.pack_sentences`, the layout of PyTorch's
``pack_padded_sequence`` without asking the caller to sort): step t computes
only the sentences that are still running. The input projections of all
steps are one matrix product; the recurrence is one primitive per direction
(``lstm_seq`` / ``gru_seq`` / ``rnn_seq``) whose forward and VJP loop over
the steps with one product and one fused kernel call each. The backward
direction reads the same packed rows in reverse token order (same lengths,
so the same layout), and each sentence is classified from its final states.
So every sentence gets exactly what it would get alone (tested).

``mode="autobatch"`` runs the same parameters as the natural per-sentence
code instead: one sentence at a time, one step at a time, each step a call
of the cell (``torch.nn.LSTMCell`` / ``GRUCell`` / ``RNNCell`` maths)
decorated with :func:`dynnets.batchable`, under :func:`dynnets.autobatch`:
each step records one lazy call, and the ready steps of all sentences run as
one call of the step's traced plan. The same loss and gradients as
``"packed"`` (tests/autograd/test_batchable.py).

Parameters follow ``torch.nn.LSTM`` / ``GRU`` / ``RNN`` names and layouts
(``weight_ih_l0`` (G*H, E), ``weight_hh_l0`` (G*H, H), ``bias_ih_l0``,
``bias_hh_l0``, and ``*_reverse`` for the backward direction).
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from .. import nn
from ..autograd import ops
from ..autograd.autobatching import autobatch
from ..autograd.batchable import batchable
from ..autograd.creation import zeros
from ..data.vocab import UNK_ID
from ..nn import functional as F
from .common import PackedBatch, SentenceExample, SentenceModelBase, pack_sentences, prepare_sentences, uniform_param
from .registry import register

__all__ = ["SequenceClassifier"]


def _lstm_h(gx, w_hh, b_hh, batch_sizes):
    return F.lstm_seq(gx, w_hh, b_hh, batch_sizes)[0]


CELLS = {"lstm": (4, _lstm_h), "gru": (3, F.gru_seq), "rnn": (1, F.rnn_seq)}
MODES = ("packed", "autobatch")

# each model's decorated step (by identity; freed with the model)
_DECORATED = weakref.WeakKeyDictionary()


class SequenceClassifier(SentenceModelBase, nn.Module):
    """Embedding -> (bi)directional RNN/GRU/LSTM -> final states -> softmax.

    Parameters
    ----------
    vocab_size : int
    embed_dim : int, default 300
    hidden : int, default 150
    num_classes : int, default 5
    cell : {"lstm", "gru", "rnn"}
    bidirectional : bool
    dropout : float
        Dropout on the final states before the classifier.
    embed_dropout : float
        Dropout on word vectors.
    embed_init : float or None
        Word vectors ~ U(-embed_init, embed_init); None gives N(0, 1).
    word_dropout : float
        In training, each word is replaced by ``<unk>`` (id 1) with this probability.
    seed : int
    dtype : str
    mode : {"packed", "autobatch"}
        The packed sequence primitives, or a decorated step loop per
        sentence under autobatch (see the module docstring).

    Notes
    -----
    The methods that take a minibatch also take trees or prepared examples
    (:meth:`~dynnets.models.common.ModelBase.as_batch`).
    """

    example_type = SentenceExample
    batch_type = PackedBatch
    last_autobatch = None
    autobatch_profile = False
    modes = MODES

    def __init__(self, vocab_size, embed_dim=300, hidden=150, num_classes=5, cell="lstm", bidirectional=False,
                 dropout=0.0, embed_dropout=0.0, embed_init=None, word_dropout=0.0, seed=0, dtype="float32",
                 mode="packed"):
        nn.Module.__init__(self)
        if cell not in CELLS:
            raise ValueError(f"SequenceClassifier: cell must be one of {sorted(CELLS)}, got {cell!r}")
        if mode not in MODES:
            raise ValueError(f"SequenceClassifier: mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.config = dict(vocab_size=int(vocab_size), embed_dim=int(embed_dim), hidden=int(hidden),
                           num_classes=int(num_classes), cell=cell, bidirectional=bool(bidirectional),
                           dropout=float(dropout), embed_dropout=float(embed_dropout),
                           embed_init=None if embed_init is None else float(embed_init),
                           word_dropout=float(word_dropout), seed=int(seed), dtype=str(np.dtype(dtype)),
                           mode=mode)
        if not 0.0 <= word_dropout < 1.0:
            raise ValueError(f"SequenceClassifier: word_dropout must be in [0, 1), got {word_dropout!r}")
        self.word_dropout = float(word_dropout)
        self._word_rng = np.random.default_rng([seed, 3])
        self.cell = cell
        self.bidirectional = bool(bidirectional)
        self.hidden = H = int(hidden)
        G, self._seq = CELLS[cell]
        dt = np.dtype(dtype)
        rng = np.random.default_rng([seed, 0])
        self.embedding = nn.Embedding(vocab_size, embed_dim, rng=rng, dtype=dt)
        if embed_init is not None:
            self.embedding.weight.numpy()[...] = rng.uniform(-embed_init, embed_init, (vocab_size, embed_dim))
        bound = 1.0 / math.sqrt(H)            # torch.nn.LSTM's initialisation
        self._dirs = ["l0"] + (["l0_reverse"] if self.bidirectional else [])
        for d in self._dirs:
            setattr(self, f"weight_ih_{d}", uniform_param(rng, (G * H, embed_dim), bound, dt))
            setattr(self, f"weight_hh_{d}", uniform_param(rng, (G * H, H), bound, dt))
            setattr(self, f"bias_ih_{d}", uniform_param(rng, (G * H,), bound, dt))
            setattr(self, f"bias_hh_{d}", uniform_param(rng, (G * H,), bound, dt))
        self.out = nn.Linear(H * len(self._dirs), num_classes, rng=rng, dtype=dt)
        self.embed_drop = nn.Dropout(embed_dropout, rng=np.random.default_rng([seed, 1]))
        self.drop = nn.Dropout(dropout, rng=np.random.default_rng([seed, 2]))

    @property
    def kind(self):
        return ("bi" if self.bidirectional else "") + self.cell

    # --- protocol -------------------------------------------------------------------
    def prepare(self, trees, vocab):
        """Word ids and root label of each tree (once per dataset)."""
        return prepare_sentences(trees, vocab)

    def collate(self, examples):
        """A PackedBatch (no padding) of sentences in the given order."""
        return pack_sentences([e.ids for e in examples], [e.label for e in examples])

    def final_states(self, batch, vocab=None):
        """Final hidden state(s) of each sentence, (B, H) or (B, 2H), in batch order."""
        batch = self.as_batch(batch, vocab)
        ids = batch.ids
        dropped = self.training and self.word_dropout > 0.0
        if dropped:
            ids = np.where(self._word_rng.random(len(ids)) < self.word_dropout, UNK_ID, ids)
        if self.mode == "autobatch":
            return self._stepwise_states(batch, ids)
        if self.training and self.embed_drop.p > 0.0:
            # a dropout mask per token: project every token's vector
            x, rows = self.embed_drop(self.embedding(ids)), None          # (total, E)
        else:
            # the input projection of each distinct word once, then gathered per
            # token: the same numbers with ~40% fewer multiply-adds on SST
            # minibatches of 25 (59% of the tokens are distinct), in the forward
            # product and in both backward ones (linearity: the tokens' output
            # gradients are summed per word first, by take's VJP); the batch
            # carries the distinct words unless word dropout changed them
            uniq, rows = np.unique(ids, return_inverse=True) if dropped else (batch.words, batch.rows)
            x = self.embedding(uniq)                                     # (distinct, E)
        outs = []
        for d in self._dirs:
            w_ih, b_ih = getattr(self, f"weight_ih_{d}"), getattr(self, f"bias_ih_{d}")
            if rows is None:
                gx = ops.linear(x if d == "l0" else ops.take(x, batch.reverse), w_ih, b_ih)
            else:
                gx = ops.take(ops.linear(x, w_ih, b_ih), rows if d == "l0" else rows[batch.reverse])
            h = self._seq(gx, getattr(self, f"weight_hh_{d}"), getattr(self, f"bias_hh_{d}"), batch.batch_sizes)
            outs.append(ops.take(h, batch.last))
        return outs[0] if len(outs) == 1 else ops.concat(outs, axis=1)

    def batchable_step(self):
        """The cell step ``step(x, h, c, direction)`` decorated with
        :func:`dynnets.batchable` (made once per model; its ``traces``,
        ``records`` and ``fallbacks`` count what ``mode="autobatch"`` did)."""
        step = _DECORATED.get(self)
        if step is None:
            step = _DECORATED[self] = batchable(self._step)
        return step

    def _step(self, x, h, c, d):
        """One step of direction ``d`` for rows ``x`` (n, E), ``h``, ``c``
        (n, H): (h', c') (``c`` is unused, and returned, by GRU and RNN)."""
        w_ih, w_hh = getattr(self, f"weight_ih_{d}"), getattr(self, f"weight_hh_{d}")
        b_ih, b_hh = getattr(self, f"bias_ih_{d}"), getattr(self, f"bias_hh_{d}")
        if self.cell == "lstm":
            return ops.lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh)
        if self.cell == "gru":
            return ops.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh), c
        return ops.tanh(ops.linear(x, w_ih, b_ih) + ops.linear(h, w_hh, b_hh)), c

    def _stepwise_states(self, batch, ids):
        """``final_states`` as the natural per-sentence code under autobatch:
        each sentence's tokens in order (and reversed for the backward
        direction), one decorated step call per token."""
        step = self.batchable_step()
        H = self.hidden
        dt = self.embedding.weight.dtype
        offs = np.zeros(len(batch.batch_sizes), dtype=np.int64)
        np.cumsum(batch.batch_sizes[:-1], out=offs[1:])
        with autobatch(profile=self.autobatch_profile) as ab:
            x = self.embed_drop(self.embedding(ids))                            # (total, E), packed order
            finals = []
            for i, L in enumerate(batch.lengths.tolist()):
                rank = int(batch.last[i] - offs[L - 1])
                xs = ops.split_rows(ops.take(x, offs[:L] + rank))
                outs = []
                for d in self._dirs:
                    h = c = zeros(1, H, dtype=dt)
                    for xt in (xs if d == "l0" else xs[::-1]):
                        h, c = step(xt, h, c, d)
                    outs.append(h)
                finals.append(outs[0] if len(outs) == 1 else ops.concat(outs, axis=1))
            out = ops.concat(finals, axis=0)
        self.last_autobatch = ab
        return out

    def logits_and_labels(self, batch, which="loss", vocab=None):
        """Logits (B, C) and labels of the sentences (``which`` is accepted for
        the protocol shared with tree models: a sentence has one output)."""
        batch = self.as_batch(batch, vocab)
        return self.out(self.drop(self.final_states(batch))), batch.labels

    def extra_repr(self):
        return f"{self.kind}, hidden={self.hidden}"


# one kind per cell and direction, all of one class
register("lstm", SequenceClassifier, cell="lstm", bidirectional=False)
register("gru", SequenceClassifier, cell="gru", bidirectional=False)
register("rnn", SequenceClassifier, cell="rnn", bidirectional=False)
register("bilstm", SequenceClassifier, cell="lstm", bidirectional=True)
register("bigru", SequenceClassifier, cell="gru", bidirectional=True)
register("birnn", SequenceClassifier, cell="rnn", bidirectional=True)
