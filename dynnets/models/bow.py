"""A bag-of-words baseline: the mean of a sentence's word vectors, one tanh
layer, a softmax.

It sees which words occur and how often, never their order or the tree, so
on a compositional treebank it marks what structure adds: "good but boring"
and "boring but good" get the same prediction, and "not" can only shift the
class the same way whatever it governs.
"""
from __future__ import annotations

import numpy as np

from .. import nn
from ..autograd import ops
from .common import SentenceExample, SentenceModelBase, prepare_sentences
from .registry import register

__all__ = ["BagOfWords", "BowBatch"]


class BowBatch:
    """Sentences as one flat id array and a row-averaging matrix.

    Attributes
    ----------
    ids : (total,) int64
        Word ids of every token, sentence after sentence.
    average : (B, total) float
        Row b holds ``1 / len(sentence b)`` over that sentence's tokens, so
        ``average @ vectors`` is each sentence's mean vector (one matrix
        product, whose VJP spreads the gradient back over the tokens).
    labels : (B,) int64
    lengths : (B,) int64
    """

    __slots__ = ("ids", "average", "labels", "lengths")

    def __init__(self, ids, average, labels, lengths):
        self.ids, self.average, self.labels, self.lengths = ids, average, labels, lengths

    @property
    def n_trees(self):
        return len(self.labels)


@register("bow")
class BagOfWords(SentenceModelBase, nn.Module):
    """Mean of word vectors -> tanh(linear) -> linear -> softmax.

    Parameters
    ----------
    vocab_size : int
    embed_dim : int, default 300
    hidden : int, default 150
        Width of the tanh layer; 0 classifies the mean vector directly.
    num_classes : int, default 5
    dropout : float
        Dropout on the hidden layer before the classifier.
    embed_dropout : float
        Dropout on the word vectors.
    embed_init : float or None
        Word vectors ~ U(-embed_init, embed_init); None gives N(0, 1).
    seed : int
    dtype : str
    """

    kind = "bow"
    example_type = SentenceExample
    batch_type = BowBatch

    def __init__(self, vocab_size, embed_dim=300, hidden=150, num_classes=5, dropout=0.0, embed_dropout=0.0,
                 embed_init=None, seed=0, dtype="float32"):
        nn.Module.__init__(self)
        if int(hidden) < 0:
            raise ValueError(f"BagOfWords: hidden must be >= 0, got {hidden}")
        self.config = dict(vocab_size=int(vocab_size), embed_dim=int(embed_dim), hidden=int(hidden),
                           num_classes=int(num_classes), dropout=float(dropout), embed_dropout=float(embed_dropout),
                           embed_init=None if embed_init is None else float(embed_init), seed=int(seed),
                           dtype=str(np.dtype(dtype)))
        dt = np.dtype(dtype)
        self._dtype = dt
        self.hidden = int(hidden)
        rng = np.random.default_rng([seed, 0])
        self.embedding = nn.Embedding(vocab_size, embed_dim, rng=rng, dtype=dt)
        if embed_init is not None:
            self.embedding.weight.numpy()[...] = rng.uniform(-embed_init, embed_init, (vocab_size, embed_dim))
        width = int(embed_dim)
        if self.hidden:
            self.proj = nn.Linear(width, self.hidden, rng=rng, dtype=dt)
            width = self.hidden
        self.out = nn.Linear(width, num_classes, rng=rng, dtype=dt)
        self.embed_drop = nn.Dropout(embed_dropout, rng=np.random.default_rng([seed, 1]))
        self.drop = nn.Dropout(dropout, rng=np.random.default_rng([seed, 2]))

    # --- protocol -------------------------------------------------------------------
    def prepare(self, trees, vocab):
        """Word ids and root label of each tree (once per dataset)."""
        return prepare_sentences(trees, vocab)

    def collate(self, examples):
        """A :class:`BowBatch` of the sentences in the given order."""
        if not examples:
            raise ValueError("BagOfWords.collate: expected at least one sentence, got an empty batch")
        lengths = np.fromiter((len(e.ids) for e in examples), dtype=np.int64, count=len(examples))
        if lengths.min() < 1:
            k = int(np.argmin(lengths))
            raise ValueError(f"BagOfWords.collate: sentence {k} of the batch is empty; every sentence needs a token")
        ids = np.concatenate([e.ids for e in examples])
        starts = np.zeros(len(examples) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        rows = np.repeat(np.arange(len(examples)), lengths)
        average = np.zeros((len(examples), len(ids)), dtype=self._dtype)
        average[rows, np.arange(len(ids))] = (1.0 / lengths)[rows]
        labels = np.fromiter((e.label for e in examples), dtype=np.int64, count=len(examples))
        return BowBatch(ids, average, labels, lengths)

    def sentence_vectors(self, batch, vocab=None):
        """Mean word vector of each sentence, (B, E)."""
        batch = self.as_batch(batch, vocab)
        return ops.matmul(batch.average, self.embed_drop(self.embedding(batch.ids)))

    def logits_and_labels(self, batch, which="loss", vocab=None):
        """Logits (B, C) and labels (``which`` as in the tree models; a sentence has one output)."""
        batch = self.as_batch(batch, vocab)
        h = self.sentence_vectors(batch)
        if self.hidden:
            h = ops.tanh(self.proj(h))
        return self.out(self.drop(h)), batch.labels

    def extra_repr(self):
        c = self.config
        return f"vocab={c['vocab_size']}, embed={c['embed_dim']}, hidden={c['hidden']}"
