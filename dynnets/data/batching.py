"""Minibatches: length bucketing, padding, and level-by-level schedules for tree batches.

Tree-batch schedule
-------------------
:class:`TreeBatch` lays out all nodes of a minibatch of trees in one *global
order*: first every leaf (level 0), then every node of height 1, then height
2, ... (height: leaf 0, internal ``1 + max`` child height). Inside a level,
nodes are ordered by tree, then by their position in the tree's postorder; in
particular the leaves are the sentences' tokens in order, tree after tree.
Because every child has a smaller height than its parent, children always lie
in earlier levels, so a model keeps one ``(n_nodes, H)`` state array and fills
it one level slice at a time, with one batched call per level::

    b = tree_batch(trees, vocab)                  # or merge(precomputed arrays)
    h = np.empty((b.n_nodes, H))
    h[:b.n_leaves] = leaf_fn(E[b.leaf_word_ids])  # level 0
    for lvl in range(1, b.n_levels):
        s, r = b.level(lvl), b.internal(lvl)      # node slice, row slice of left/right
        h[s] = compose(h[b.left[r]], h[b.right[r]])
    roots = h[b.root_index]                       # (n_trees, H)

For n-ary trees (child-sum Tree-LSTM) the children of internal node ``g`` are
``child_idx[child_ptr[g - n_leaves]:child_ptr[g - n_leaves + 1]]``; the edges
of one level are contiguous (``b.edges(lvl)``), and ``edge_parent`` gives each
edge's parent, so a level's child sums are one ``np.add.reduceat`` or
``np.add.at``.

Per-tree arrays (:class:`TreeArrays`) are built once per tree with Python and
:func:`merge` combines any selection of them with a fixed number of numpy
calls, so an epoch of minibatches costs no per-node Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .trees import Tree

__all__ = ["BucketSampler", "PaddedBatch", "pad_batch", "TreeArrays", "tree_arrays", "TreeBatch", "merge",
           "tree_batch"]


# ---------------------------------------------------------------------------
# Bucketing


class BucketSampler:
    """Minibatches of indices of similar length.

    Each epoch: the indices are shuffled, stably sorted by length (so equal
    lengths come in random order), cut into buckets of
    ``batch_size * bucket_batches`` consecutive indices, each bucket is
    shuffled and cut into batches, and the batches are shuffled. All
    randomness comes from ``numpy.random.default_rng([seed, epoch])``, so the
    batches are a deterministic function of ``(lengths, seed, epoch)``.

    Parameters
    ----------
    lengths : sequence of int
        Length (e.g. tokens) of each example.
    batch_size : int
    seed : int
    bucket_batches : int
        Batches per bucket; 1 gives the tightest length grouping, larger values
        more randomness.
    shuffle : bool
        ``False`` yields batches in length order, deterministic, epoch-independent.
    drop_last : bool
        Drop the (single) batch smaller than ``batch_size``.

    Notes
    -----
    Iterating yields ``list[int]`` batches of the current ``epoch`` and then
    increments ``epoch``; :meth:`batches` gives any epoch without side effects.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, *, seed: int = 0, bucket_batches: int = 20,
                 shuffle: bool = True, drop_last: bool = False):
        if batch_size < 1:
            raise ValueError(f"BucketSampler: batch_size must be >= 1, got {batch_size}")
        if bucket_batches < 1:
            raise ValueError(f"BucketSampler: bucket_batches must be >= 1, got {bucket_batches}")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1:
            raise ValueError(f"BucketSampler: lengths must be 1-D, got shape {self.lengths.shape}")
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.bucket_batches = int(bucket_batches)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.epoch = 0

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """The batches of ``epoch``."""
        n = len(self.lengths)
        bs = self.batch_size
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            out = [order[i:i + bs].tolist() for i in range(0, n, bs)]
            if self.drop_last and out and len(out[-1]) < bs:
                out.pop()
            return out
        rng = np.random.default_rng([self.seed, epoch])
        perm = rng.permutation(n)
        order = perm[np.argsort(self.lengths[perm], kind="stable")]
        size = bs * self.bucket_batches
        out = []
        for start in range(0, n, size):
            bucket = order[start:start + size].copy()
            rng.shuffle(bucket)
            out.extend(bucket[i:i + bs].tolist() for i in range(0, len(bucket), bs))
        # Only the last bucket can end with a short batch.
        if self.drop_last and out and len(out[-1]) < bs:
            out.pop()
        return [out[i] for i in rng.permutation(len(out))]

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.batches(self.epoch)
        self.epoch += 1
        return iter(batches)


# ---------------------------------------------------------------------------
# Padding


class PaddedBatch(NamedTuple):
    """Result of :func:`pad_batch`.

    Attributes
    ----------
    ids : ndarray, (B, T), int64
        Padded with ``pad_id`` after each sequence.
    mask : ndarray, (B, T)
        1 where ``ids`` holds a token, 0 on padding.
    lengths : ndarray, (B,), int64
        Tokens kept per sequence (after truncation).
    orig_lengths : ndarray, (B,), int64
        Lengths before truncation.
    n_truncated : int
        How many sequences lost tokens.
    """

    ids: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray
    orig_lengths: np.ndarray
    n_truncated: int


def pad_batch(sequences: Sequence[Sequence[int]], max_len: int | None = None, truncate: str = "post",
              pad_id: int = 0, mask_dtype: Any = np.float32) -> PaddedBatch:
    """Pad (and truncate) id sequences into a rectangular array.

    Parameters
    ----------
    sequences : sequence of sequences of int
    max_len : int, optional
        Width ``T`` of the result. ``None``: the longest sequence. Given: every
        batch is exactly ``max_len`` wide (a static graph's fixed shape) and
        longer sequences are truncated.
    truncate : {"post", "pre"}
        ``"post"`` keeps the first ``max_len`` tokens, ``"pre"`` the last ones.
    pad_id : int
    mask_dtype : dtype
        ``np.float32`` (default, multiplies into losses) or ``bool``.

    Returns
    -------
    PaddedBatch
    """
    if truncate not in ("post", "pre"):
        raise ValueError(f"pad_batch: truncate must be 'post' or 'pre', got {truncate!r}")
    arrays = [np.asarray(s, dtype=np.int64).reshape(-1) for s in sequences]
    orig = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    if max_len is None:
        T = int(orig.max()) if len(orig) else 0
    else:
        if max_len < 0:
            raise ValueError(f"pad_batch: max_len must be >= 0, got {max_len}")
        T = int(max_len)
    lengths = np.minimum(orig, T)
    n_trunc = int((orig > T).sum())
    if n_trunc:
        arrays = [a[:T] if truncate == "post" else a[len(a) - T:] for a in arrays]
    mask = np.arange(T)[None, :] < lengths[:, None]
    ids = np.full((len(arrays), T), pad_id, dtype=np.int64)
    if arrays:
        ids[mask] = np.concatenate(arrays)
    return PaddedBatch(ids, mask.astype(mask_dtype, copy=False), lengths, orig, n_trunc)


# ---------------------------------------------------------------------------
# Tree-batch schedules


def _lookup(vocab: Any) -> Callable[[str], int]:
    if callable(vocab):
        return vocab
    if hasattr(vocab, "__getitem__"):
        return vocab.__getitem__
    raise TypeError(f"tree_arrays: vocab must be a Vocabulary, a mapping or a function word -> id, "
                    f"got {type(vocab).__name__}")


@dataclass(frozen=True, eq=False)
class TreeArrays:
    """One tree as flat arrays, nodes numbered in postorder (root last).

    Attributes
    ----------
    labels : (n,) int64
    heights : (n,) int64
        Leaf 0; internal ``1 + max`` child height.
    word_ids : (n,) int64
        Word id of each leaf, -1 for internal nodes.
    n_children : (n,) int64
    child_ptr : (n + 1,) int64
        CSR: the children of node ``i`` are ``child_idx[child_ptr[i]:child_ptr[i+1]]``.
    child_idx : (n_edges,) int64
        Postorder indices, left to right.
    n_leaves : int
    """

    labels: np.ndarray
    heights: np.ndarray
    word_ids: np.ndarray
    n_children: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
    n_leaves: int

    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    @property
    def height(self) -> int:
        return int(self.heights[-1])

    @classmethod
    def from_tree(cls, tree: Tree, vocab: Any, label_fn: Callable[[Any], int] | None = None) -> TreeArrays:
        """Build from a :class:`Tree`; ``vocab`` is a Vocabulary, mapping or function word -> id;
        ``label_fn`` optionally maps labels to ints."""
        lookup = _lookup(vocab)
        po = tree.postorder()
        n = len(po)
        heights = [0] * n
        labels = [0] * n
        word_ids = [-1] * n
        n_children = [0] * n
        child_idx: list[int] = []
        pending: list[int] = []  # postorder indices whose parent is not reached yet
        n_leaves = 0
        for i, node in enumerate(po):
            labels[i] = node.label if label_fn is None else label_fn(node.label)
            k = len(node.children)
            if k == 0:
                word_ids[i] = lookup(node.word)
                n_leaves += 1
            else:
                kids = pending[-k:]
                del pending[-k:]
                child_idx.extend(kids)
                n_children[i] = k
                heights[i] = 1 + max([heights[j] for j in kids])
            pending.append(i)
        nch = np.array(n_children, dtype=np.int64)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(nch, out=ptr[1:])
        return cls(labels=np.array(labels, dtype=np.int64), heights=np.array(heights, dtype=np.int64),
                   word_ids=np.array(word_ids, dtype=np.int64), n_children=nch, child_ptr=ptr,
                   child_idx=np.array(child_idx, dtype=np.int64), n_leaves=n_leaves)


def tree_arrays(trees: Iterable[Tree], vocab: Any, label_fn: Callable[[Any], int] | None = None) -> list[TreeArrays]:
    """:meth:`TreeArrays.from_tree` for each tree: precompute once, :func:`merge` per batch."""
    return [TreeArrays.from_tree(t, vocab, label_fn) for t in trees]


@dataclass(frozen=True, eq=False)
class TreeBatch:
    """Level-by-level schedule for a minibatch of trees (see the module docstring).

    Nodes are numbered ``0..n_nodes-1`` in the global order: level by level
    (level = height), inside a level by tree, then by postorder position.
    Arrays are int64.

    Attributes
    ----------
    n_trees, n_nodes, n_leaves, n_levels : int
        ``n_levels`` is the largest height + 1.
    level_offsets : (n_levels + 1,)
        Level ``h`` is nodes ``level_offsets[h]:level_offsets[h+1]``;
        ``level_offsets[1] == n_leaves``.
    leaf_word_ids : (n_leaves,)
        Word id of each leaf; the sentences' tokens in order, tree after tree.
    left, right : (n_nodes - n_leaves,) or None
        Global indices of the two children of internal node ``n_leaves + j``
        (row ``j``); ``None`` unless every internal node has two children.
    child_ptr : (n_nodes - n_leaves + 1,)
    child_idx : (n_edges,)
        CSR children of every internal node (row ``j`` is node ``n_leaves + j``), left to right.
    edge_parent : (n_edges,)
        Global index of the parent of each ``child_idx`` entry.
    labels : (n_nodes,)
        Label of each node.
    tree_index : (n_nodes,)
        Which tree (0..n_trees-1) each node belongs to.
    node_order : (n_nodes,)
        Each node's position in its tree's postorder (``tree.postorder()``).
    root_index : (n_trees,)
        Global index of each tree's root.
    tree_offsets : (n_trees + 1,)
        Nodes per tree, cumulated (tree ``t`` owns ``tree_offsets[t+1] - tree_offsets[t]`` nodes).
    postorder_to_global : (n_nodes,)
        Global index of the node at position ``p`` of tree ``t``'s postorder
        is ``postorder_to_global[tree_offsets[t] + p]``.
    n_tokens : (n_trees,)
        Leaves per tree.
    token_offsets : (n_trees + 1,)
        Tree ``t``'s leaves are global nodes ``token_offsets[t]:token_offsets[t+1]``.
    leaf_words : (n_words,)
        The distinct word ids of the leaves, sorted (``np.unique(leaf_word_ids)``).
    leaf_rows : (n_leaves,)
        Each leaf's word as a row of ``leaf_words``
        (``leaf_words[leaf_rows] == leaf_word_ids``): a model computing a
        leaf once per distinct word reads it through these, so the
        schedule carries them rather than every forward sorting the ids.
    """

    n_trees: int
    n_nodes: int
    n_leaves: int
    n_levels: int
    level_offsets: np.ndarray
    leaf_word_ids: np.ndarray
    left: np.ndarray | None
    right: np.ndarray | None
    child_ptr: np.ndarray
    child_idx: np.ndarray
    edge_parent: np.ndarray
    labels: np.ndarray
    tree_index: np.ndarray
    node_order: np.ndarray
    root_index: np.ndarray
    tree_offsets: np.ndarray
    postorder_to_global: np.ndarray
    n_tokens: np.ndarray
    token_offsets: np.ndarray
    leaf_words: np.ndarray
    leaf_rows: np.ndarray

    @property
    def n_internal(self) -> int:
        return self.n_nodes - self.n_leaves

    @property
    def is_binary(self) -> bool:
        return self.left is not None

    def level(self, h: int) -> slice:
        """Global node indices of level ``h``."""
        return slice(int(self.level_offsets[h]), int(self.level_offsets[h + 1]))

    def internal(self, h: int) -> slice:
        """Rows of ``left`` / ``right`` / ``child_ptr`` for level ``h >= 1``."""
        if h < 1:
            raise ValueError(f"TreeBatch.internal: level {h} has no internal nodes (levels start at 1)")
        return slice(int(self.level_offsets[h]) - self.n_leaves, int(self.level_offsets[h + 1]) - self.n_leaves)

    def edges(self, h: int) -> slice:
        """Entries of ``child_idx`` / ``edge_parent`` for the children of level ``h >= 1``."""
        r = self.internal(h)
        return slice(int(self.child_ptr[r.start]), int(self.child_ptr[r.stop]))

    def level_sizes(self) -> np.ndarray:
        """Nodes per level, shape ``(n_levels,)``."""
        return np.diff(self.level_offsets)


def merge(arrays: Sequence[TreeArrays]) -> TreeBatch:
    """Combine per-tree arrays into one :class:`TreeBatch` with O(1) numpy calls
    per field (plus one ``np.concatenate`` over the trees)."""
    T = len(arrays)
    if T == 0:
        raise ValueError("merge: expected at least one tree, got an empty batch")
    sizes = np.fromiter((a.labels.shape[0] for a in arrays), dtype=np.int64, count=T)
    n_edges_t = np.fromiter((a.child_idx.shape[0] for a in arrays), dtype=np.int64, count=T)
    n_tokens = np.fromiter((a.n_leaves for a in arrays), dtype=np.int64, count=T)
    tree_offsets = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(sizes, out=tree_offsets[1:])
    N = int(tree_offsets[-1])

    heights = np.concatenate([a.heights for a in arrays])
    labels = np.concatenate([a.labels for a in arrays])
    word_ids = np.concatenate([a.word_ids for a in arrays])
    n_children = np.concatenate([a.n_children for a in arrays])
    # Children in concatenated numbering.
    child_cat = np.concatenate([a.child_idx for a in arrays]) + np.repeat(tree_offsets[:-1], n_edges_t)
    cat_ptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(n_children, out=cat_ptr[1:])

    # Stable sort by height keeps (tree, postorder) order inside each level.
    order = np.argsort(heights, kind="stable")
    rank = np.empty(N, dtype=np.int64)
    rank[order] = np.arange(N, dtype=np.int64)
    level_sizes = np.bincount(heights)
    n_levels = len(level_sizes)
    level_offsets = np.zeros(n_levels + 1, dtype=np.int64)
    np.cumsum(level_sizes, out=level_offsets[1:])
    n_leaves = int(level_offsets[1])

    internal = order[n_leaves:]
    k = n_children[internal]
    child_ptr = np.zeros(len(internal) + 1, dtype=np.int64)
    np.cumsum(k, out=child_ptr[1:])
    E = int(child_ptr[-1])
    # Gather each internal node's CSR segment in the new order.
    src = np.repeat(cat_ptr[internal] - child_ptr[:-1], k) + np.arange(E, dtype=np.int64)
    child_idx = rank[child_cat[src]]
    edge_parent = np.repeat(np.arange(n_leaves, N, dtype=np.int64), k)
    if len(internal) == 0 or np.all(k == 2):
        # contiguous copies: the tree primitives would otherwise copy these
        # strided views on every forward and backward
        left = np.ascontiguousarray(child_idx[0::2])
        right = np.ascontiguousarray(child_idx[1::2])
    else:
        left = right = None

    tree_of = np.repeat(np.arange(T, dtype=np.int64), sizes)
    token_offsets = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(n_tokens, out=token_offsets[1:])
    leaf_ids = word_ids[order[:n_leaves]]
    leaf_words, leaf_rows = np.unique(leaf_ids, return_inverse=True)
    return TreeBatch(
        n_trees=T, n_nodes=N, n_leaves=n_leaves, n_levels=n_levels, level_offsets=level_offsets,
        leaf_word_ids=leaf_ids, left=left, right=right, child_ptr=child_ptr,
        child_idx=child_idx, edge_parent=edge_parent, labels=labels[order], tree_index=tree_of[order],
        node_order=(np.arange(N, dtype=np.int64) - tree_offsets[tree_of])[order],
        root_index=rank[tree_offsets[1:] - 1], tree_offsets=tree_offsets, postorder_to_global=rank,
        n_tokens=n_tokens, token_offsets=token_offsets, leaf_words=leaf_words.astype(np.int64, copy=False),
        leaf_rows=leaf_rows.reshape(-1).astype(np.int64, copy=False))


def tree_batch(trees: Sequence[Tree], vocab: Any, label_fn: Callable[[Any], int] | None = None) -> TreeBatch:
    """Schedule for ``trees`` in one call (``merge(tree_arrays(trees, vocab))``)."""
    return merge(tree_arrays(trees, vocab, label_fn))
