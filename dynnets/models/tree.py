"""Tree models over parse trees, each with two executions of the same parameters.

* ``TreeLSTM``: the binary constituency Tree-LSTM of Tai et al. 2015 (eqs.
  9-14: separate forget gates for the left and right child, words only at the
  leaves).
* ``TreeRNN``: the recursive neural network ``h = tanh(W [h_l; h_r] + b)``
  (Socher et al. 2011), leaves ``h = tanh(W_x x + b_x)``.
* ``ChildSumTreeLSTM``: the child-sum Tree-LSTM of Tai et al. 2015 (eqs. 2-8)
  for nodes with any number of children.

``mode`` selects the execution (it may be changed at any time; the parameters
are the same):

``"recursive"``
    the natural define-by-run code: one tree at a time, one graph node per
    tree node, children before parents (a postorder loop; no Python
    recursion, so any depth works);
``"level"``
    level-batched: all nodes of a minibatch at the same height in one fused
    kernel call per level, from the :class:`~dynnets.data.batching.TreeBatch`
    schedule;
``"autobatch"``
    the same recursive code run under :func:`dynnets.autobatch` with its two
    cells (a leaf, a node) decorated with :func:`dynnets.batchable`: each
    call records one lazy call, and the ready calls of one cell across the
    minibatch run as one call of its traced plan (the scheduler is
    ``model.autobatch_strategy``, "agenda" or "depth"; the last forward's
    context, with its stats and schedule, is ``model.last_autobatch``; the
    decorated cells, with their trace and record counts, are
    ``model.batchable_cells()``). ``autobatch_decorated = False`` records
    the cells op by op instead. Every leaf is computed (level mode computes
    a leaf once per distinct word when no dropout applies).

All give the same loss and gradients (tests/models/test_tree.py). A softmax
classifier reads every node (``classify="all"``, as SST is trained on all
node labels) or only the roots (``classify="root"``); the loss is the sum of
the classified nodes' cross-entropies divided by the number of trees.
Dropout (inverted) applies to the word vectors (``embed_dropout``) and to the
states before the classifier (``dropout``).

Weights use the ``x @ W`` layout, ``W`` of shape (in, out).

The protocol: ``prepare(trees, vocab)`` once per dataset (per-tree arrays),
``collate(examples)`` per minibatch (examples and level schedule), then
``loss(batch)`` (also ``model(batch)``) to train and ``predict_all(batch)``
to evaluate. For a quick call these methods also take a list of trees (their
words looked up in ``vocab=``, else in ``model.vocab``, which
``load_checkpoint`` sets) or the :class:`~dynnets.data.batching.TreeBatch` of
``dynnets.data.tree_batch(trees, vocab)``.
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from .. import nn
from ..autograd import ops
from ..autograd.autobatching import autobatch
from ..autograd.batchable import batchable
from ..data.vocab import UNK_ID
from ..data.batching import TreeBatch
from ..autograd.ops import (childsum_levels, split_rows, tree_lstm_leaf_node, tree_lstm_levels_packed,
                            tree_lstm_node, tree_rnn_levels)
from .common import (ModelBase, TreeExample, TreeMiniBatch, collate_trees, minibatch_from_schedule, prepare_trees,
                     uniform_param)
from .registry import register

__all__ = ["TreeModel", "TreeLSTM", "TreeRNN", "ChildSumTreeLSTM"]

# each model's decorated cells (by identity; freed with the model): a plan
# holds compiled sessions, which are no state of the model's to save or copy
_DECORATED = weakref.WeakKeyDictionary()

MODES = ("recursive", "level", "autobatch")


class TreeModel(ModelBase, nn.Module):
    """Base of the tree models: embedding, dropout, classifier, the protocol.

    Parameters
    ----------
    vocab_size : int
    embed_dim : int, default 300
    hidden : int, default 150
    num_classes : int, default 5
    mode : {"level", "recursive", "autobatch"}
    classify : {"all", "root"}
    dropout : float
        Dropout on node states before the classifier.
    embed_dropout : float
        Dropout on word vectors.
    embed_init : float or None
        Word vectors ~ U(-embed_init, embed_init); None gives N(0, 1) (PyTorch's default).
    word_dropout : float
        In training, each word is replaced by ``<unk>`` (id 1) with this
        probability (Iyyer et al. 2015), so ``<unk>``'s vector learns to
        stand for unseen words and no single word is relied on.
    root_weight : float
        Weight of the roots' cross-entropy relative to the other nodes' with
        ``classify="all"`` (1: every node alike, as Tai et al.). Sentence-level
        accuracy is measured at the root, one node of ~37 in an SST tree.
    side_weight : float
        Weight of an auxiliary term on every non-neutral classified node:
        ``-log P(side)``, P(side) the probability mass of the label's side
        (classes below / above the neutral middle class, e.g. P(0) + P(1) for
        labels 0, 1). It trains the very quantity the SST-2 decision compares,
        from the same 5-class softmax; 0 disables it.
    seed : int
        Initial weights and dropout masks.
    dtype : str
        "float32" (default) or "float64".
    """

    is_tree = True
    modes = MODES
    needs_binary = True
    autobatch_strategy = "agenda"
    autobatch_profile = False
    autobatch_decorated = True
    autobatch_levels = True
    last_autobatch = None
    example_type = TreeExample
    batch_type = TreeMiniBatch

    def __init__(self, vocab_size, embed_dim=300, hidden=150, num_classes=5, mode="level", classify="all",
                 dropout=0.0, embed_dropout=0.0, embed_init=None, word_dropout=0.0, root_weight=1.0,
                 side_weight=0.0, seed=0, dtype="float32"):
        nn.Module.__init__(self)
        if mode not in MODES:
            raise ValueError(f"{type(self).__name__}: mode must be one of {MODES}, got {mode!r}")
        if classify not in ("all", "root"):
            raise ValueError(f"{type(self).__name__}: classify must be 'all' or 'root', got {classify!r}")
        self.config = dict(vocab_size=int(vocab_size), embed_dim=int(embed_dim), hidden=int(hidden),
                           num_classes=int(num_classes), mode=mode, classify=classify, dropout=float(dropout),
                           embed_dropout=float(embed_dropout),
                           embed_init=None if embed_init is None else float(embed_init),
                           word_dropout=float(word_dropout), root_weight=float(root_weight),
                           side_weight=float(side_weight), seed=int(seed), dtype=str(np.dtype(dtype)))
        if side_weight < 0 or (side_weight and num_classes < 3):
            raise ValueError(f"{type(self).__name__}: side_weight must be >= 0 (and needs >= 3 classes), "
                             f"got {side_weight!r} with {num_classes} classes")
        self.side_weight = float(side_weight)
        if not 0.0 <= word_dropout < 1.0:
            raise ValueError(f"{type(self).__name__}: word_dropout must be in [0, 1), got {word_dropout!r}")
        self.word_dropout = float(word_dropout)
        self._word_rng = np.random.default_rng([seed, 3])
        if not root_weight > 0:
            raise ValueError(f"{type(self).__name__}: root_weight must be positive, got {root_weight!r}")
        self.root_weight = float(root_weight)
        self.mode = mode
        self.classify = classify
        self.hidden = int(hidden)
        self.num_classes = int(num_classes)
        dt = np.dtype(dtype)
        rng = np.random.default_rng([seed, 0])
        self.embedding = nn.Embedding(vocab_size, embed_dim, rng=rng, dtype=dt)
        if embed_init is not None:
            self.embedding.weight.numpy()[...] = rng.uniform(-embed_init, embed_init, (vocab_size, embed_dim))
        self._build(rng, dt, embed_dim, self.hidden)
        self.out = nn.Linear(self.hidden, num_classes, rng=rng, dtype=dt)
        self.embed_drop = nn.Dropout(embed_dropout, rng=np.random.default_rng([seed, 1]))
        self.drop = nn.Dropout(dropout, rng=np.random.default_rng([seed, 2]))

    # --- protocol -------------------------------------------------------------------
    def prepare(self, trees, vocab):
        """Per-tree precomputation (once per dataset): a list of TreeExample."""
        return prepare_trees(trees, vocab)

    def collate(self, examples):
        """A TreeMiniBatch (level schedule + examples) from precomputed trees."""
        return self._check_binary(collate_trees(examples))

    def as_batch(self, data, vocab=None):
        """``data`` as a :class:`~dynnets.models.common.TreeMiniBatch`: a
        minibatch as is; a :class:`~dynnets.data.batching.TreeBatch`
        (``tree_batch(trees, vocab)``) with its per-tree examples rebuilt
        (so both modes run on it); trees or prepared examples as
        :meth:`ModelBase.as_batch` says."""
        if isinstance(data, TreeBatch):
            return self._check_binary(minibatch_from_schedule(data))
        return ModelBase.as_batch(self, data, vocab)

    def _check_binary(self, batch):
        s = batch.schedule
        if self.needs_binary and s.left is None and s.n_internal:
            kids = np.diff(s.child_ptr)
            k = int(s.tree_index[s.n_leaves + int(np.flatnonzero(kids != 2)[0])])
            raise ValueError(f"{type(self).__name__}: tree {k} of the batch has a node with other than two "
                             f"children; this model needs binary trees (see dynnets.data.trees.binarize, "
                             f"or use ChildSumTreeLSTM)")
        return batch

    def node_states(self, batch, vocab=None):
        """Hidden states of every node, (n_nodes, H), and their labels and root rows.

        Level mode orders nodes as the schedule (level by level); recursive
        mode tree after tree, each in postorder.
        """
        batch = self.as_batch(batch, vocab)
        if self.mode == "level":
            s = batch.schedule
            return self._level(s), s.labels, s.root_index
        if self.mode == "autobatch":
            with autobatch(self.autobatch_strategy, profile=self.autobatch_profile,
                           levels=self.autobatch_levels) as ab:
                h = self._recursive(batch.examples, ab)
            self.last_autobatch = ab
            return h, batch.postorder_labels, batch.postorder_roots
        return self._recursive(batch.examples), batch.postorder_labels, batch.postorder_roots

    def logits_and_labels(self, batch, which="loss", vocab=None):
        """Logits and labels of the nodes the loss classifies (``which="loss"``:
        every node or the roots, per ``classify``), of the roots (``"roots"``)
        or of every node (``"nodes"``)."""
        h, labels, roots = self.node_states(batch, vocab)
        if which == "roots" or (which == "loss" and self.classify == "root"):
            h = ops.take(h, roots)
            labels = labels[roots]
        return self.out(self.drop(h)), labels

    def loss(self, batch, vocab=None):
        """Sum of the classified nodes' cross-entropies (roots weighted by
        ``root_weight``) / number of trees (a scalar Tensor)."""
        batch = self.as_batch(batch, vocab)
        h, labels, roots = self.node_states(batch)
        if self.classify == "root":
            h, labels, weights = ops.take(h, roots), labels[roots], None
        elif self.root_weight != 1.0:
            weights = np.ones(len(labels), dtype=h.dtype)
            weights[roots] = self.root_weight
        else:
            weights = None
        logits = self.out(self.drop(h))
        loss = ops.cross_entropy(logits, labels, mask=weights, reduction="sum")
        if self.side_weight:
            loss = loss + self.side_weight * _side_nll(logits, labels, self.num_classes, weights)
        return loss * (1.0 / batch.n_trees)

    def predict_all(self, batch, vocab=None):
        """One eval forward: root probabilities (n_trees, C), every node's
        probabilities (n_nodes, C) and the node labels (n_nodes,)."""
        batch = self.as_batch(batch, vocab)

        def run():
            h, labels, roots = self.node_states(batch)
            return self.out(h).numpy(), labels, roots
        logits, labels, roots = self._eval(run)
        p = self._softmax(logits)
        return p[roots], p, labels

    def predict_nodes(self, batch, vocab=None):
        """Probabilities of every node, (n_nodes, C), and the node labels."""
        _, p, labels = self.predict_all(batch, vocab)
        return p, labels

    def forward(self, batch, vocab=None):
        """``model(x)`` is ``model.loss(x)``: ``x`` a minibatch from
        ``collate``, a ``TreeBatch`` from ``tree_batch``, trees or prepared
        examples (see :meth:`as_batch`)."""
        return self.loss(batch, vocab)

    def _embed(self, ids):
        if self.training and self.word_dropout > 0.0:
            ids = np.where(self._word_rng.random(len(ids)) < self.word_dropout, UNK_ID, ids)
        return self.embed_drop(self.embedding(ids))

    def batchable_cells(self):
        """The model's leaf and node cells decorated with
        :func:`dynnets.batchable` (made once per model): what
        ``mode="autobatch"`` calls; their ``traces``, ``records`` and
        ``fallbacks`` count what the forwards did."""
        cells = _DECORATED.get(self)
        if cells is None:
            cells = _DECORATED[self] = (batchable(self._leaf_cell), batchable(self._node_cell))
        return cells

    def _recursive(self, examples, ab=None):
        """The natural define-by-run code, shared by every tree model: one
        tree at a time, its leaves then its internal nodes in postorder (no
        Python recursion, so any depth works), each a call of the model's
        leaf or node cell (decorated under autobatch: one record per call)."""
        if ab is not None and self.autobatch_decorated:
            leaf, node = self.batchable_cells()
        else:
            leaf, node = self._leaf_cell, self._node_cell
        states = []
        for k, e in enumerate(examples):
            if ab is not None:
                ab.tag = (k, None)
            xs = split_rows(self._embed(e.leaf_ids))
            mine = [None] * len(e.children)
            # the leaves first, then the internal nodes in postorder: the leaf
            # weights (E x 3H) and U (2H x 5H) do not fit in L2 together, and
            # alternating them made each per-node product 18% slower (measured)
            for i, x in zip(e.leaves, xs):
                if ab is not None:
                    ab.tag = (k, i)
                mine[i] = leaf(x)
            for i, kids in e.internal:
                if ab is not None:
                    ab.tag = (k, i)
                mine[i] = node(*[mine[j] for j in kids])
            states.extend(mine)
        if ab is not None:
            ab.tag = None
        return self._states(ops.concat(states, axis=0))

    def _states(self, h):
        """The hidden states among the nodes' stacked cell outputs."""
        return h

    def _leaf_states(self, s, leaf):
        """``leaf(word vectors)`` for the leaves of a whole minibatch (level
        mode) and the row of the result each leaf reads. Without embedding
        dropout a leaf's state depends on its word only, so it is computed
        once per distinct word (the schedule's ``leaf_words``; 59% of the
        words of an SST minibatch of 25 are distinct) and each leaf reads its
        word's row (``leaf_rows``): the same numbers. With dropout every leaf
        has its own mask and its own row."""
        if self.training and (self.word_dropout > 0.0 or self.embed_drop.p > 0.0):
            return leaf(self._embed(s.leaf_word_ids)), np.arange(s.n_leaves, dtype=np.int64)
        return leaf(self.embedding(s.leaf_words)), s.leaf_rows

    def _leaf_level(self, s, leaf):
        """The leaves' ``leaf(word vectors)``, one row per leaf (see :meth:`_leaf_states`)."""
        states, rows = self._leaf_states(s, leaf)
        return ops.take(states, rows)

    def extra_repr(self):
        c = self.config
        return f"vocab={c['vocab_size']}, embed={c['embed_dim']}, hidden={c['hidden']}, mode={self.mode}"


def _logsumexp_cols(z, cols):
    """log Σ_{c in cols} exp(z[:, c]) for (N, C) logits, stable (max subtracted)."""
    cols = list(cols)
    parts = [z[:, c:c + 1] for c in cols]
    m = z.numpy()[:, cols].max(axis=1, keepdims=True)    # a constant shift: it cancels, no gradient needed
    total = ops.exp(parts[0] - m)
    for p in parts[1:]:
        total = total + ops.exp(p - m)
    return ops.log(total) + m


def _side_nll(logits, labels, C, weights=None):
    """Σ over non-neutral nodes of -log P(label's side) (see ``side_weight``)."""
    neg, pos = list(range(C // 2)), list(range((C + 1) // 2, C))
    is_neg = labels < neg[-1] + 1
    is_pos = labels >= pos[0]
    keep = (is_neg | is_pos).astype(logits.dtype)
    if weights is not None:
        keep = keep * weights
    lse_all = _logsumexp_cols(logits, range(C))
    side = ops.where(is_neg[:, None], _logsumexp_cols(logits, neg), _logsumexp_cols(logits, pos))
    return ops.sum((lse_all - side)[:, 0] * keep)


def _init(rng, shape, fan_in, dt):
    return uniform_param(rng, shape, 1.0 / math.sqrt(fan_in), dt)


@register("treelstm")
class TreeLSTM(TreeModel):
    """Binary constituency Tree-LSTM (Tai et al. 2015, eqs. 9-14).

    Leaves: [i, o, u] = x W_leaf + b_leaf, c = σ(i) tanh(u), h = σ(o) tanh(c).
    Internal nodes: [i, f_l, f_r, o, u] = [h_l; h_r] U + b,
    c = σ(i) tanh(u) + σ(f_l) c_l + σ(f_r) c_r, h = σ(o) tanh(c).

    Parameters: ``w_leaf`` (E, 3H), ``b_leaf`` (3H,), ``U`` (2H, 5H), ``b`` (5H,);
    see :class:`TreeModel` for the rest.
    """

    kind = "treelstm"

    def _build(self, rng, dt, E, H):
        self.w_leaf = _init(rng, (E, 3 * H), E, dt)
        self.b_leaf = _init(rng, (3 * H,), E, dt)
        self.U = _init(rng, (2 * H, 5 * H), 2 * H, dt)
        self.b = _init(rng, (5 * H,), 2 * H, dt)

    def _level(self, s):
        s0, rows = self._leaf_states(s, lambda x: tree_lstm_leaf_node(x, self.w_leaf, self.b_leaf))
        h, _ = tree_lstm_levels_packed(s0, rows, self.U, self.b, s.left, s.right, s.level_offsets)
        return h

    def _leaf_cell(self, x):
        return tree_lstm_leaf_node(x, self.w_leaf, self.b_leaf)

    def _node_cell(self, left, right):
        return tree_lstm_node(left, right, self.U, self.b)

    def _states(self, h):
        return h[:, :self.hidden]


@register("treernn")
class TreeRNN(TreeModel):
    """Recursive neural network (Socher et al. 2011): leaves
    h = tanh(x W_leaf + b_leaf), internal nodes h = tanh([h_l; h_r] W + b).

    Parameters: ``w_leaf`` (E, H), ``b_leaf`` (H,), ``W`` (2H, H), ``b`` (H,).
    """

    kind = "treernn"

    def _build(self, rng, dt, E, H):
        self.w_leaf = _init(rng, (E, H), E, dt)
        self.b_leaf = _init(rng, (H,), E, dt)
        self.W = _init(rng, (2 * H, H), 2 * H, dt)
        self.b = _init(rng, (H,), 2 * H, dt)

    def _level(self, s):
        h0 = self._leaf_level(s, lambda x: ops.tanh(ops.matmul(x, self.w_leaf) + self.b_leaf))
        return tree_rnn_levels(h0, self.W, self.b, s.left, s.right, s.level_offsets)

    def _leaf_cell(self, x):
        return ops.tanh(x @ self.w_leaf + self.b_leaf)

    def _node_cell(self, left, right):
        return ops.tanh(ops.concat([left, right], axis=1) @ self.W + self.b)


@register("childsum")
class ChildSumTreeLSTM(TreeModel):
    """Child-sum Tree-LSTM (Tai et al. 2015, eqs. 2-8) for any number of
    children; words only at the leaves (internal nodes have x = 0).

    Leaves: as :class:`TreeLSTM` with ``w_iou``/``b_iou``. Internal node with
    children k: h̃ = Σ_k h_k; [i, o, u] = h̃ U_iou + b_iou;
    f_k = σ(h_k U_f + b_f); c = σ(i) tanh(u) + Σ_k f_k c_k; h = σ(o) tanh(c).

    Parameters: ``w_iou`` (E, 3H), ``b_iou`` (3H,) (shared by leaves and
    internal nodes, as in eqs. 3-5 with x = 0), ``u_iou`` (H, 3H), ``u_f`` (H, H), ``b_f`` (H,).
    """

    kind = "childsum"
    needs_binary = False

    def _build(self, rng, dt, E, H):
        self.w_iou = _init(rng, (E, 3 * H), E, dt)
        self.b_iou = _init(rng, (3 * H,), E, dt)
        self.u_iou = _init(rng, (H, 3 * H), H, dt)
        self.u_f = _init(rng, (H, H), H, dt)
        self.b_f = _init(rng, (H,), H, dt)

    def _level(self, s):
        H = self.hidden
        s0 = self._leaf_level(s, lambda x: tree_lstm_leaf_node(x, self.w_iou, self.b_iou))
        h, _ = childsum_levels(s0[:, :H], s0[:, H:], self.u_iou, self.u_f, self.b_iou, self.b_f,
                               s.child_ptr, s.child_idx, s.level_offsets)
        return h

    def _leaf_cell(self, x):
        return tree_lstm_leaf_node(x, self.w_iou, self.b_iou)

    def _node_cell(self, *kids):
        """One internal node from its children's packed states (each (1, 2H)),
        with plain ops, child by child (so every op is row-wise and the
        decorated cell is one plan per number of children)."""
        H = self.hidden
        hs = [k[:, :H] for k in kids]
        h_sum = hs[0]
        for h in hs[1:]:
            h_sum = h_sum + h
        iou = h_sum @ self.u_iou + self.b_iou
        i, o, u = ops.sigmoid(iou[:, :H]), ops.sigmoid(iou[:, H:2 * H]), ops.tanh(iou[:, 2 * H:])
        c = i * u
        for h, k in zip(hs, kids):
            c = c + ops.sigmoid(h @ self.u_f + self.b_f) * k[:, H:]
        return ops.concat([o * ops.tanh(c), c], axis=1)

    def _states(self, h):
        return h[:, :self.hidden]
