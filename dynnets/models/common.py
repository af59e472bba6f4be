"""Shared pieces of the eager models: per-example precomputation and
minibatch collation, the classifier head (the models' ops are in
:mod:`dynnets.autograd.ops`).

Precomputation happens once per example (:meth:`prepare`), so an epoch only
concatenates arrays (:meth:`collate`): no per-node Python per epoch in the
level-batched path, and the recursive path's per-node loop reads a ready list
of child indices.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..autograd import ops
from ..autograd.engine import no_grad
from ..data.batching import TreeArrays, TreeBatch, merge
from ..data.trees import Tree

__all__ = ["TreeExample", "TreeMiniBatch", "prepare_trees", "collate_trees",
           "examples_from_schedule", "minibatch_from_schedule", "SentenceExample", "PackedBatch", "pack_sentences",
           "prepare_sentences", "ModelBase", "uniform_param"]


# --------------------------------------------------------------------------
# trees
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TreeExample:
    """One tree, precomputed once.

    Attributes
    ----------
    arrays : TreeArrays
        Postorder arrays (labels, heights, CSR children, word ids).
    children : tuple of tuples
        Children (postorder indices) of each postorder node; ``()`` for leaves.
    leaf_ids : (n_tokens,) int64
        Word ids of the leaves, left to right (= their postorder order).
    leaves : tuple of int
        Postorder indices of the leaves, left to right.
    internal : tuple of (int, tuple)
        (postorder index, children) of each internal node, in postorder.
    """

    arrays: TreeArrays
    children: tuple
    leaf_ids: np.ndarray
    leaves: tuple = ()
    internal: tuple = ()

    @property
    def n_tokens(self):
        return self.arrays.n_leaves

    @property
    def label(self):
        return int(self.arrays.labels[-1])


def _example(a):
    ptr, idx = a.child_ptr.tolist(), a.child_idx.tolist()
    children = tuple(tuple(idx[ptr[i]:ptr[i + 1]]) for i in range(len(ptr) - 1))
    leaves = tuple(i for i, k in enumerate(children) if not k)
    internal = tuple((i, k) for i, k in enumerate(children) if k)
    return TreeExample(a, children, a.word_ids[a.word_ids >= 0], leaves, internal)


def prepare_trees(trees, vocab):
    """:class:`TreeExample` for each tree (node labels as given, e.g. 0-4)."""
    return [_example(TreeArrays.from_tree(t, vocab)) for t in trees]


def examples_from_schedule(s):
    """The :class:`TreeExample` of each tree of a :class:`~dynnets.data.batching.TreeBatch`
    (what :func:`prepare_trees` gives for the trees ``tree_batch`` was called with)."""
    heights = np.repeat(np.arange(s.n_levels, dtype=np.int64), np.diff(s.level_offsets))
    out = []
    for t in range(s.n_trees):
        g = s.postorder_to_global[s.tree_offsets[t]:s.tree_offsets[t + 1]]     # global node of each postorder position
        leaf = g < s.n_leaves
        word_ids = np.full(len(g), -1, dtype=np.int64)
        word_ids[leaf] = s.leaf_word_ids[g[leaf]]
        rows = g[~leaf] - s.n_leaves
        counts = s.child_ptr[rows + 1] - s.child_ptr[rows]
        n_children = np.zeros(len(g), dtype=np.int64)
        n_children[~leaf] = counts
        ptr = np.zeros(len(g) + 1, dtype=np.int64)
        np.cumsum(n_children, out=ptr[1:])
        seg = np.zeros(len(rows), dtype=np.int64)
        np.cumsum(counts[:-1], out=seg[1:])
        src = np.repeat(s.child_ptr[rows] - seg, counts) + np.arange(int(counts.sum()), dtype=np.int64)
        a = TreeArrays(labels=s.labels[g], heights=heights[g], word_ids=word_ids, n_children=n_children,
                       child_ptr=ptr, child_idx=s.node_order[s.child_idx[src]], n_leaves=int(leaf.sum()))
        out.append(_example(a))
    return out


@dataclass(frozen=True, eq=False)
class TreeMiniBatch:
    """A minibatch of trees: the examples (recursive execution) and their
    level schedule (level-batched execution).

    Attributes
    ----------
    examples : list of TreeExample
    schedule : TreeBatch
    postorder_labels : (n_nodes,) int64
        Node labels tree after tree, each tree in postorder.
    postorder_roots : (n_trees,) int64
        Row of each root in that order.
    root_labels : (n_trees,) int64
    lengths : (n_trees,) int64
        Tokens per sentence.
    """

    examples: list
    schedule: TreeBatch
    postorder_labels: np.ndarray
    postorder_roots: np.ndarray
    root_labels: np.ndarray
    lengths: np.ndarray

    @property
    def n_trees(self):
        return self.schedule.n_trees


def collate_trees(examples):
    """Merge precomputed trees into a :class:`TreeMiniBatch`."""
    sched = merge([e.arrays for e in examples])
    labels = np.concatenate([e.arrays.labels for e in examples])
    roots = sched.tree_offsets[1:] - 1
    return TreeMiniBatch(list(examples), sched, labels, roots, labels[roots], sched.n_tokens.copy())


def minibatch_from_schedule(s):
    """The :class:`TreeMiniBatch` of a :class:`~dynnets.data.batching.TreeBatch`
    (``tree_batch(trees, vocab)``): the same as ``collate_trees(prepare_trees(trees, vocab))``."""
    labels = s.labels[s.postorder_to_global]
    roots = s.tree_offsets[1:] - 1
    return TreeMiniBatch(examples_from_schedule(s), s, labels, roots, labels[roots], s.n_tokens.copy())


# --------------------------------------------------------------------------
# sentences
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SentenceExample:
    """Word ids of one sentence and its label (an SST tree's root label)."""

    ids: np.ndarray
    label: int

    @property
    def n_tokens(self):
        return len(self.ids)


def prepare_sentences(trees, vocab):
    """:class:`SentenceExample` for each tree: its leaf words and root label."""
    ids = getattr(vocab, "ids", None)
    out = []
    for t in trees:
        words = t.words()
        arr = ids(words) if ids is not None else np.fromiter((vocab[w] for w in words), dtype=np.int64)
        out.append(SentenceExample(arr, int(t.label)))
    return out


@dataclass(frozen=True, eq=False)
class PackedBatch:
    """Sentences packed time-major with no padding, longest first (the layout
    of ``torch.nn.utils.rnn.pack_padded_sequence``), built from sentences in
    any order; results come back in the caller's order.

    Attributes
    ----------
    ids : (total,) int64
        Word ids of every packed step: step t holds token t of the
        ``batch_sizes[t]`` longest sentences.
    batch_sizes : (T,) int64
        Sentences still running at each step (non-increasing).
    last : (B,) int64
        Packed row of each sentence's last token, in the caller's order: its
        final state in the forward direction and, because a reversed sentence
        has the same length, also in the backward direction.
    reverse : (total,) int64
        Packed row of the token that the reversed sentences read at each row
        (row (t, j) reads token L_j - 1 - t of sentence j).
    labels : (B,) int64
    lengths : (B,) int64
    words : (n_words,) int64
        The distinct word ids, sorted (``np.unique(ids)``).
    rows : (total,) int64
        Each packed row's word as a row of ``words`` (``words[rows] == ids``):
        a model projecting each distinct word once reads it through these.
    """

    ids: np.ndarray
    batch_sizes: np.ndarray
    last: np.ndarray
    reverse: np.ndarray
    labels: np.ndarray
    lengths: np.ndarray
    words: np.ndarray
    rows: np.ndarray

    @property
    def n_trees(self):
        return len(self.labels)


def pack_sentences(seqs, labels=None):
    """Pack sentences of word ids (any order, any lengths >= 1) into a :class:`PackedBatch`."""
    B = len(seqs)
    if B == 0:
        raise ValueError("pack_sentences: expected at least one sentence, got an empty batch")
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=B)
    if lengths.min() < 1:
        raise ValueError(f"pack_sentences: sentence {int(np.argmin(lengths))} is empty; every sentence needs a token")
    order = np.argsort(-lengths, kind="stable")
    L = lengths[order]
    T = int(L[0])
    padded = np.zeros((B, T), dtype=np.int64)
    for j, i in enumerate(order.tolist()):
        padded[j, :L[j]] = seqs[i]
    steps = np.arange(T)
    mask = steps[:, None] < L[None, :]              # (T, B): step t of sorted sentence j exists
    batch_sizes = mask.sum(1)
    offs = np.zeros(T, dtype=np.int64)
    np.cumsum(batch_sizes[:-1], out=offs[1:])
    ids = padded.T[mask]
    t_idx, j_idx = np.nonzero(mask)                 # packed rows in order
    reverse = offs[L[j_idx] - 1 - t_idx] + j_idx
    rank = np.empty(B, dtype=np.int64)
    rank[order] = np.arange(B)
    last = offs[lengths - 1] + rank
    lab = np.zeros(B, dtype=np.int64) if labels is None else np.asarray(labels, dtype=np.int64)
    words, rows = np.unique(ids, return_inverse=True)
    return PackedBatch(ids, batch_sizes.astype(np.int64), last, reverse, lab, lengths, words.astype(np.int64),
                       rows.reshape(-1).astype(np.int64, copy=False))


# --------------------------------------------------------------------------
# model base
# --------------------------------------------------------------------------


def uniform_param(rng, shape, bound, dtype):
    from ..nn.module import Parameter
    return Parameter(rng.uniform(-bound, bound, shape).astype(dtype))


class ModelBase:
    """Mixin of the eager models' training protocol (see :mod:`dynnets.train`).

    Subclasses define ``prepare``, ``collate``, ``logits_and_labels`` and set
    ``kind`` and ``config`` (the constructor's keyword arguments, plain
    values, so that a checkpoint can rebuild the model), ``example_type``
    (what ``prepare`` returns a list of) and ``batch_type`` (what ``collate``
    returns).

    The methods that take a minibatch (``model(batch)``, ``loss``,
    ``logits_and_labels``, ``predict_proba``, ...) also take what
    :meth:`as_batch` turns into one: trees, or prepared examples.
    """

    is_static = False
    kind = None
    example_type = None
    batch_type = None
    #: The vocabulary that :meth:`as_batch` looks the words of trees up in
    #: when a call passes no ``vocab=``. None until set: ``load_checkpoint``
    #: sets it, and so may you (``model.vocab = Vocabulary.from_trees(train)``).
    vocab = None

    def make_batch(self, trees, vocab):
        """``collate(prepare(trees, vocab))`` (the protocol shared with the static models)."""
        return self.collate(self.prepare(trees, vocab))

    def as_batch(self, data, vocab=None):
        """``data`` as this model's minibatch.

        * a :class:`~dynnets.data.trees.Tree` or a list of them:
          ``collate(prepare(trees, vocab))``, with ``vocab`` or else
          :attr:`vocab` (an error if both are None);
        * a list of prepared examples (``prepare``'s output, or part of it):
          ``collate(examples)``;
        * a minibatch (``collate``'s output): itself.

        Training should ``prepare`` a dataset once and ``collate`` each
        minibatch; trees are for a quick call (each call prepares them anew).
        """
        if isinstance(data, Tree):
            data = [data]
        if isinstance(data, (list, tuple)):
            return self._collate_list(data, vocab)
        if self.batch_type is not None and not isinstance(data, self.batch_type):
            raise TypeError(f"{type(self).__name__}: expected a minibatch ({self.batch_type.__name__} from "
                            f"collate), a list of Trees or a list of {self.example_type.__name__} (from prepare), "
                            f"got {type(data).__name__}")
        return data

    def _collate_list(self, data, vocab):
        name = type(self).__name__
        if not data:
            raise ValueError(f"{name}: expected trees or prepared examples, got an empty {type(data).__name__}")
        if isinstance(data[0], Tree):
            bad = next((i for i, t in enumerate(data) if not isinstance(t, Tree)), None)
            if bad is not None:
                raise TypeError(f"{name}: item {bad} of the list is a {type(data[bad]).__name__}, not a Tree")
            v = self.vocab if vocab is None else vocab
            if v is None:
                raise ValueError(f"{name}: got {len(data)} tree(s) but no vocabulary to look their words up: pass "
                                 f"vocab= (model(trees, vocab=vocab)) or set model.vocab (load_checkpoint sets it); "
                                 f"to train, prepare once per dataset and collate per minibatch: "
                                 f"model.collate(model.prepare(trees, vocab))")
            return self.make_batch(list(data), v)
        kind = self.example_type
        if kind is not None:
            bad = next((i for i, e in enumerate(data) if not isinstance(e, kind)), None)
            if bad is not None:
                raise TypeError(f"{name}: expected a list of Trees or of {kind.__name__} (from prepare); item {bad} "
                                f"is a {type(data[bad]).__name__}")
        return self.collate(list(data))

    def _eval(self, fn, *args):
        """``fn(*args)`` in eval mode without recording, restoring the mode after."""
        was = self.training
        self.eval()
        try:
            with no_grad():
                return fn(*args)
        finally:
            self.train(was)

    @staticmethod
    def _softmax(z):
        z = np.asarray(z, dtype=np.float64)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict_proba(self, batch, vocab=None):
        """Class probabilities of each sentence (tree root), (n_sentences, C), in batch order."""
        logits, _ = self._eval(self.logits_and_labels, self.as_batch(batch, vocab), "roots")
        return self._softmax(logits.numpy())

    def embedding_parameters(self):
        """Parameters that get the embedding learning rate (and no L2)."""
        return [self.embedding.weight]


# --------------------------------------------------------------------------
# ragged sentences (issue 25: the cnn and transformer kinds)
# --------------------------------------------------------------------------


class SentenceModelBase(ModelBase):
    """:class:`ModelBase` for models with one output per sentence: the loss
    is the mean cross-entropy of :meth:`logits_and_labels`, and
    ``model(batch)`` is ``model.loss(batch)``."""

    def loss(self, batch, vocab=None):
        """Mean cross-entropy over the sentences (a scalar Tensor)."""
        logits, labels = self.logits_and_labels(batch, vocab=vocab)
        return ops.cross_entropy(logits, labels)

    def forward(self, batch, vocab=None):
        """``model(x)`` is ``model.loss(x)``: ``x`` a minibatch, trees or prepared examples."""
        return self.loss(batch, vocab)


def per_sentence(one, batch, autobatched=False):
    """``stack([one(ids) for each sentence of the ragged batch])``: the
    natural per-sentence code, run under ``dn.autobatch()`` when
    ``autobatched`` (its same-signature ops then run batched)."""
    parts = np.split(batch.ids, batch.offsets[1:-1])
    if not autobatched:
        return ops.stack([one(ids) for ids in parts])
    from ..autograd.autobatching import autobatch
    with autobatch():
        return ops.stack([one(ids) for ids in parts])


@dataclass(frozen=True, eq=False)
class RaggedBatch:
    """Sentences concatenated in the caller's order, with offsets.

    Attributes
    ----------
    ids : (n,) int64
        Word ids of every token, sentence after sentence.
    offsets : (B + 1,) int64
        Sentence ``b`` is tokens ``offsets[b]:offsets[b+1]`` (``cu_seqlens``).
    lengths : (B,) int64
    labels : (B,) int64
    """

    ids: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray

    @property
    def n_trees(self):
        return len(self.labels)

    def padded_ids(self, width, left=0, fill=-1):
        """(B, width) ids with sentence ``b`` at columns ``left:left+len``
        and ``fill`` elsewhere (a sentence longer than fits is cut)."""
        B = len(self.lengths)
        out = np.full((B, width), fill, dtype=np.int64)
        pos = np.arange(len(self.ids)) - np.repeat(self.offsets[:-1], self.lengths) + left
        keep = pos < width
        out[np.repeat(np.arange(B), self.lengths)[keep], pos[keep]] = self.ids[keep]
        return out


def collate_ragged(owner, examples):
    """A :class:`RaggedBatch` of :class:`SentenceExample` s (each with >= 1 token)."""
    if not examples:
        raise ValueError(f"{owner}.collate: expected at least one sentence, got an empty batch")
    lengths = np.fromiter((len(e.ids) for e in examples), dtype=np.int64, count=len(examples))
    if lengths.min() < 1:
        raise ValueError(f"{owner}.collate: sentence {int(np.argmin(lengths))} of the batch is empty; every "
                         f"sentence needs a token")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    labels = np.fromiter((e.label for e in examples), dtype=np.int64, count=len(examples))
    return RaggedBatch(np.concatenate([e.ids for e in examples]).astype(np.int64, copy=False), offsets, lengths,
                       labels)


__all__ += ["RaggedBatch", "collate_ragged"]
