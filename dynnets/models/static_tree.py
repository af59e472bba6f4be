"""A Tree-LSTM as one static graph for every tree shape, in the manner of
TensorFlow Fold (Looks et al. 2017): the graph is built and compiled once;
each minibatch feeds its level schedule.

The schedule is :class:`~dynnets.data.batching.TreeBatch`'s global order
(leaves, then the nodes of height 1, 2, ...), fed through placeholders:
the distinct leaf words and each leaf's row among them, the ``left`` /
``right`` children of every internal node, ``level_offsets`` and the node
labels. In the graph, the leaves are one batched ``tree_lstm_leaf_node``
call; then a ``while_loop`` over the levels gathers each level's children
from the states computed so far, runs one batched ``tree_lstm_node`` and
appends the level's states (the states are the loop variable, of shape
invariant ``(None, 2H)``: they grow level by level, and because children
always lie in earlier levels every gather reads finished rows). So the
number of levels, the trees and the batch size are all data.

Parameters, names and initial values are those of the eager
:class:`~dynnets.models.TreeLSTM` with the same seed (``state_dict`` moves
between the two), and the loss is its loss (every node or only the roots
classified, summed, divided by the number of trees): tested against it,
values and gradients (tests/models/test_static_tree.py).

The static-model protocol of :mod:`dynnets.train` (``is_static``,
``make_batch``, ``train_step``, ``predict_proba``, ``predict_all``,
``state_dict`` / ``load_state_dict``); the optimizer is a train op in the
graph, as the padded baseline's (:func:`dynnets.models.padded.train_ops`).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import static as ds
from ..autograd import ops
from ..autograd.ops import tree_lstm_leaf_node, tree_lstm_node
from .common import collate_trees, prepare_trees
from .padded import StaticWeights, train_ops
from .registry import register
from .tree import TreeLSTM

__all__ = ["StaticTreeLSTM", "TreeFeed", "schedule_feed"]


@dataclass(frozen=True, eq=False)
class TreeFeed:
    """One run's schedule arrays (int64), named as the graph's placeholders.

    Attributes
    ----------
    leaf_words : (n_words,)  distinct word ids of the leaves
    leaf_rows : (n_leaves,)  row of each leaf's word in ``leaf_words``
    left, right : (n_internal,)  global indices of each internal node's children
    level_offsets : (n_levels + 1,)
    labels : (n_nodes,)  node labels in the global order
    root_index : (n_trees,)
    """

    leaf_words: np.ndarray
    leaf_rows: np.ndarray
    left: np.ndarray
    right: np.ndarray
    level_offsets: np.ndarray
    labels: np.ndarray
    root_index: np.ndarray

    @property
    def n_trees(self):
        return len(self.root_index)


def schedule_feed(schedule):
    """The :class:`TreeFeed` of a binary :class:`~dynnets.data.batching.TreeBatch`."""
    s = schedule
    if s.left is None and s.n_internal:
        raise ValueError("schedule_feed: the trees must be binary (every internal node with two children)")
    words, rows = np.unique(s.leaf_word_ids, return_inverse=True)
    empty = np.zeros(0, np.int64)
    i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    return TreeFeed(i64(words), i64(rows.reshape(-1)), i64(s.left if s.left is not None else empty),
                    i64(s.right if s.right is not None else empty), i64(s.level_offsets), i64(s.labels),
                    i64(s.root_index))


@dataclass(frozen=True, eq=False)
class StaticTreeBatch:
    """Trees in chunks of at most ``batch_size``: one :class:`TreeFeed` each."""

    feeds: list
    n_sentences: int

    @property
    def n_chunks(self):
        return len(self.feeds)


@register("static-treelstm")
class StaticTreeLSTM(StaticWeights):
    """Binary Tree-LSTM (Tai et al. 2015, eqs. 9-14) as one static graph for
    every minibatch of trees (see the module docstring).

    Parameters
    ----------
    vocab_size : int
    embed_dim : int, default 300
    hidden : int, default 150
    num_classes : int, default 5
    classify : {"all", "root"}
        Nodes in the loss, as :class:`~dynnets.models.TreeLSTM`.
    batch_size : int, default 25
        Trees per run; a larger batch (evaluation) runs in chunks of this size.
    optimizer : {"adagrad", "adam", "sgd"}
    lr : float, default 0.05
    weight_decay : float, default 0
        L2 on every parameter except the word embeddings.
    seed : int
        The eager TreeLSTM's initial weights for this seed.
    dtype : str, "float32" or "float64"
    """

    is_static = True
    is_tree = False          # no recursive mode: per-node predictions come from predict_all
    needs_binary = True
    kind = "static-treelstm"

    def __init__(self, vocab_size, embed_dim=300, hidden=150, num_classes=5, classify="all", batch_size=25,
                 optimizer="adagrad", lr=0.05, weight_decay=0.0, seed=0, dtype="float32"):
        if classify not in ("all", "root"):
            raise ValueError(f"StaticTreeLSTM: classify must be 'all' or 'root', got {classify!r}")
        if optimizer not in ("adagrad", "adam", "sgd"):
            raise ValueError(f"StaticTreeLSTM: optimizer must be 'adagrad', 'adam' or 'sgd', got {optimizer!r}")
        if int(batch_size) < 1:
            raise ValueError(f"StaticTreeLSTM: batch_size must be a positive integer, got {batch_size}")
        eager = TreeLSTM(vocab_size, embed_dim=embed_dim, hidden=hidden, num_classes=num_classes, seed=seed,
                         dtype=dtype)
        self.config = dict(vocab_size=int(vocab_size), embed_dim=int(embed_dim), hidden=int(hidden),
                           num_classes=int(num_classes), classify=classify, batch_size=int(batch_size),
                           optimizer=optimizer, lr=float(lr), weight_decay=float(weight_decay), seed=int(seed),
                           dtype=str(np.dtype(dtype)))
        self.hidden, self.classify, self.batch_size = int(hidden), classify, int(batch_size)
        self.dtype = np.dtype(dtype)
        self.training = True
        initial = OrderedDict((k, np.array(v, copy=True)) for k, v in eager.state_dict().items())
        self._build(initial, optimizer, float(lr), float(weight_decay))

    def _build(self, initial, optimizer, lr, wd):
        H = self.hidden
        self.graph = g = ds.Graph()
        with g.as_default():
            ph = {name: ds.placeholder((None,), np.int64, name=name) for name in TreeFeed.__dataclass_fields__}
            self._ph = ph
            self.variables = OrderedDict((k, ds.Variable(v, name=k)) for k, v in initial.items())
            loss, self._node_probs, self._root_probs = self.forward(
                [self.variables[k] for k in ("embedding.weight", "w_leaf", "b_leaf", "U", "b", "out.weight",
                                             "out.bias")], ph, H, self.classify)
            self._loss = loss
            self._grads, self._train_op = train_ops(optimizer, lr, wd, loss, self.variables)
            init = ds.global_variables_initializer()
        self.session = ds.Session(g)
        self.session.run(init)

    @staticmethod
    def forward(params, ph, H, classify):
        """The graph over placeholders ``ph`` (a dict named as :class:`TreeFeed`):
        (loss, node probabilities, root probabilities)."""
        E, w_leaf, b_leaf, U, b, W, bias = params
        off = ph["level_offsets"]
        leaves = ops.take(tree_lstm_leaf_node(ops.embedding(E, ph["leaf_words"]), w_leaf, b_leaf), ph["leaf_rows"])
        n_leaves = ops.take(off, 1)
        n_levels = ds.shape(off)[0] - 1
        left, right = ph["left"], ph["right"]

        def cond(level, states):
            return ds.less(level, n_levels)

        def body(level, states):
            rows = ds.range(ops.take(off, level) - n_leaves, ops.take(off, level + 1) - n_leaves)
            s_l = ops.take(states, ops.take(left, rows))
            s_r = ops.take(states, ops.take(right, rows))
            return [level + 1, ops.concat([states, tree_lstm_node(s_l, s_r, U, b)], axis=0)]

        level0 = ds.constant(np.asarray(1, dtype=np.int64))
        _, states = ds.while_loop(cond, body, [level0, leaves], shape_invariants=[(), (None, 2 * H)])
        h = states[:, :H]
        roots = ph["root_index"]
        n_trees = ops.astype(ds.shape(roots)[0], states.dtype)
        node_logits = ops.linear(h, W, bias)
        if classify == "all":
            loss = ops.cross_entropy(node_logits, ph["labels"], reduction="sum") / n_trees
        else:
            loss = ops.cross_entropy(ops.take(node_logits, roots), ops.take(ph["labels"], roots),
                                     reduction="sum") / n_trees
        # the roots' probabilities from the roots' states alone: an evaluation that fetches only them
        # runs the output layer on n_trees rows, not on every node
        root_probs = ops.softmax(ops.linear(ops.take(h, roots), W, bias))
        return loss, ops.softmax(node_logits), root_probs

    # --- the static-model protocol -------------------------------------------------
    def make_batch(self, trees, vocab):
        """The trees' level schedules, in chunks of ``batch_size`` trees."""
        ex = prepare_trees(trees, vocab)
        feeds = [schedule_feed(collate_trees(ex[i:i + self.batch_size]).schedule)
                 for i in range(0, len(ex), self.batch_size)]
        return StaticTreeBatch(feeds, len(ex))

    def _feed(self, feed):
        return {p: getattr(feed, name) for name, p in self._ph.items()}

    def train_step(self, batch):
        """Forward, backward and update, one ``Session.run`` per chunk; the
        mean over the batch's trees of the per-tree loss."""
        total = 0.0
        for f in batch.feeds:
            _, lv = self.session.run([self._train_op, self._loss], self._feed(f))
            total += float(lv) * f.n_trees
        return total / batch.n_sentences

    def predict_proba(self, batch):
        """Root-class probabilities (n_trees, num_classes)."""
        return np.concatenate([self.session.run(self._root_probs, self._feed(f)) for f in batch.feeds])

    def predict_all(self, batch):
        """Root probabilities, every node's probabilities (the schedule's
        order, chunk after chunk) and the node labels."""
        roots, nodes, labels = [], [], []
        for f in batch.feeds:
            r, p = self.session.run([self._root_probs, self._node_probs], self._feed(f))
            roots.append(r)
            nodes.append(p)
            labels.append(f.labels)
        return np.concatenate(roots), np.concatenate(nodes), np.concatenate(labels)

    def loss_and_grads(self, batch, chunk=0):
        """Loss and dense gradients of one chunk, no update: (loss, {name: gradient})."""
        lv, gs = self.session.run([self._loss, list(self._grads.values())], self._feed(batch.feeds[chunk]))
        return float(lv), OrderedDict(zip(self._grads, gs))

    def __repr__(self):
        c = self.config
        return (f"StaticTreeLSTM(vocab_size={c['vocab_size']}, embed_dim={c['embed_dim']}, hidden={c['hidden']}, "
                f"classify={c['classify']!r})")
