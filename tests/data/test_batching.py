"""dynnets.data.batching: bucketing sampler, padding, tree-batch schedules."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynnets.data import load_samples
from dynnets.data.batching import BucketSampler, TreeArrays, merge, pad_batch, tree_arrays, tree_batch
from dynnets.data.synthetic import random_tree
from dynnets.data.trees import parse_tree
from dynnets.data.vocab import Vocabulary

SETTINGS = settings(max_examples=100, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

WORDS = ("a", "b", "c", "d", "e")
WORD_ID = {w: i + 2 for i, w in enumerate(WORDS)}


# ---------------------------------------------------------------------------
# Bucketing


def test_bucket_sampler_covers_all_indices_once():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 120, size=1003)
    s = BucketSampler(lengths, 16, seed=3, bucket_batches=4)
    for epoch in range(3):
        batches = s.batches(epoch)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(1003))
        assert len(batches) == len(s) == 63
        assert sum(len(b) < 16 for b in batches) == 1
        assert all(isinstance(i, int) for i in flat)


def test_bucket_sampler_deterministic_and_varies_by_epoch():
    lengths = np.random.default_rng(1).integers(1, 50, size=200)
    a = BucketSampler(lengths, 10, seed=7)
    b = BucketSampler(lengths, 10, seed=7)
    assert list(a) == list(b)  # epoch 0
    assert list(a) == list(b)  # epoch 1
    assert a.epoch == b.epoch == 2
    assert a.batches(0) == b.batches(0) != a.batches(1)
    assert BucketSampler(lengths, 10, seed=8).batches(0) != a.batches(0)


def test_bucket_sampler_groups_similar_lengths():
    lengths = np.random.default_rng(2).integers(1, 200, size=2000)
    s = BucketSampler(lengths, 20, seed=0, bucket_batches=5)
    spread = np.mean([np.ptp(lengths[b]) for b in s.batches(0)])
    random_spread = np.mean([np.ptp(lengths[b]) for b in np.split(np.random.default_rng(0).permutation(2000), 100)])
    assert spread < random_spread / 5


def test_bucket_sampler_options():
    lengths = [5, 1, 3, 2, 4]
    assert BucketSampler(lengths, 2, shuffle=False).batches(0) == [[1, 3], [2, 4], [0]]
    assert BucketSampler(lengths, 2, shuffle=False, drop_last=True).batches(0) == [[1, 3], [2, 4]]
    s = BucketSampler(lengths, 2, seed=0, drop_last=True)
    assert len(s) == 2 and all(len(b) == 2 for b in s.batches(5))
    with pytest.raises(ValueError, match="batch_size"):
        BucketSampler(lengths, 0)


# ---------------------------------------------------------------------------
# Padding


def test_pad_batch_no_truncation():
    b = pad_batch([[5, 6, 7], [8], []])
    assert b.ids.dtype == np.int64 and b.ids.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]
    assert b.mask.dtype == np.float32 and b.mask.tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]
    assert b.lengths.tolist() == [3, 1, 0] and b.orig_lengths.tolist() == [3, 1, 0]
    assert b.n_truncated == 0


def test_pad_batch_post_and_pre_truncation():
    seqs = [np.arange(1, 7), [9, 8], [4, 3, 2, 1]]
    post = pad_batch(seqs, max_len=4, truncate="post", pad_id=-1)
    assert post.ids.tolist() == [[1, 2, 3, 4], [9, 8, -1, -1], [4, 3, 2, 1]]
    assert post.lengths.tolist() == [4, 2, 4] and post.orig_lengths.tolist() == [6, 2, 4]
    assert post.n_truncated == 1
    pre = pad_batch(seqs, max_len=4, truncate="pre", pad_id=-1)
    assert pre.ids.tolist() == [[3, 4, 5, 6], [9, 8, -1, -1], [4, 3, 2, 1]]
    assert pre.n_truncated == 1


def test_pad_batch_fixed_width_and_bool_mask():
    b = pad_batch([[1], [2, 3]], max_len=5, mask_dtype=bool)
    assert b.ids.shape == (2, 5) and b.mask.dtype == bool
    assert b.mask.sum() == 3 and b.n_truncated == 0
    z = pad_batch([[1, 2]], max_len=0)
    assert z.ids.shape == (1, 0) and z.n_truncated == 1 and z.lengths.tolist() == [0]
    with pytest.raises(ValueError, match="truncate"):
        pad_batch([[1]], truncate="middle")


# ---------------------------------------------------------------------------
# Tree-batch schedule, checked against a naive recursive traversal


def naive(trees):
    """Per tree, recursively: postorder nodes with height, label, word, children positions."""
    out = []
    for t in trees:
        nodes = []

        def visit(n):
            kids = [visit(c) for c in n.children]
            h = 0 if n.is_leaf else 1 + max(nodes[k]["h"] for k in kids)
            nodes.append({"h": h, "label": n.label, "word": n.word, "kids": kids})
            return len(nodes) - 1

        visit(t)
        out.append(nodes)
    return out


def check_schedule(trees, b):
    ref = naive(trees)
    N = sum(len(r) for r in ref)
    assert b.n_trees == len(trees) and b.n_nodes == N
    assert b.level_offsets[0] == 0 and b.level_offsets[-1] == N
    assert np.all(np.diff(b.level_offsets) > 0)
    assert b.n_levels == 1 + max(n["h"] for r in ref for n in r)
    assert b.n_leaves == b.level_offsets[1] == sum(n["word"] is not None for r in ref for n in r)
    # Global order: by height, then tree, then postorder position.
    keys = sorted((n["h"], t, p) for t, r in enumerate(ref) for p, n in enumerate(r))
    glob = {(t, p): g for g, (_, t, p) in enumerate(keys)}
    for g, (h, t, p) in enumerate(keys):
        node = ref[t][p]
        assert b.level_offsets[h] <= g < b.level_offsets[h + 1]
        assert b.tree_index[g] == t and b.node_order[g] == p
        assert b.postorder_to_global[b.tree_offsets[t] + p] == g
        assert b.labels[g] == node["label"]
        if node["word"] is not None:
            assert b.leaf_word_ids[g] == WORD_ID[node["word"]]
        else:
            j = g - b.n_leaves
            kids = b.child_idx[b.child_ptr[j]:b.child_ptr[j + 1]].tolist()
            assert kids == [glob[(t, k)] for k in node["kids"]]
            assert np.all(b.edge_parent[b.child_ptr[j]:b.child_ptr[j + 1]] == g)
            assert all(k < b.level_offsets[h] for k in kids)  # children in earlier levels
            if b.is_binary:
                assert [b.left[j], b.right[j]] == kids
    for t, r in enumerate(ref):
        assert b.root_index[t] == glob[(t, len(r) - 1)]
        assert b.n_tokens[t] == len(trees[t].words())
        # Leaves are the sentences, in order, tree after tree.
        s = slice(b.token_offsets[t], b.token_offsets[t + 1])
        assert [WORDS[i - 2] for i in b.leaf_word_ids[s]] == trees[t].words()
        assert np.all(b.tree_index[s] == t)
    for h in range(1, b.n_levels):
        r, e = b.internal(h), b.edges(h)
        assert r.stop - r.start == b.level(h).stop - b.level(h).start
        assert np.all((b.edge_parent[e] >= b.level(h).start) & (b.edge_parent[e] < b.level(h).stop))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.sampled_from([2, 2, 4]))
def test_schedule_matches_naive_traversal(seed, n_trees, max_children):
    rng = np.random.default_rng(seed)
    trees = [random_tree(rng, int(rng.integers(1, 25)), max_children=max_children) for _ in range(n_trees)]
    b = tree_batch(trees, WORD_ID)
    check_schedule(trees, b)
    binary = all(len(n.children) in (0, 2) for t in trees for n in t.postorder())
    assert b.is_binary == binary


def test_schedule_precomputed_merge_equals_direct():
    rng = np.random.default_rng(5)
    trees = [random_tree(rng, int(rng.integers(1, 30))) for _ in range(40)]
    arrays = tree_arrays(trees, WORD_ID)
    idx = [3, 17, 0, 39, 8]
    a = merge([arrays[i] for i in idx])
    d = tree_batch([trees[i] for i in idx], WORD_ID.__getitem__)
    for f in ("level_offsets", "leaf_word_ids", "left", "right", "child_ptr", "child_idx", "labels", "tree_index",
              "node_order", "root_index", "postorder_to_global", "n_tokens", "token_offsets", "edge_parent"):
        assert np.array_equal(getattr(a, f), getattr(d, f)), f
    check_schedule([trees[i] for i in idx], a)


def test_tree_arrays_postorder():
    t = parse_tree("(3 (2 a) (4 (2 b) (3 c)))")
    ta = TreeArrays.from_tree(t, WORD_ID)
    assert ta.labels.tolist() == [2, 2, 3, 4, 3]
    assert ta.heights.tolist() == [0, 0, 0, 1, 2] and ta.height == 2
    assert ta.word_ids.tolist() == [2, 3, 4, -1, -1]
    assert ta.child_ptr.tolist() == [0, 0, 0, 0, 2, 4] and ta.child_idx.tolist() == [1, 2, 0, 3]
    assert ta.n_leaves == 3 and ta.n_nodes == 5
    assert TreeArrays.from_tree(t, WORD_ID, label_fn=lambda l: l * 10).labels.tolist() == [20, 20, 30, 40, 30]


def test_schedule_small_example():
    trees = [parse_tree("(3 (2 a) (4 (2 b) (3 c)))"), parse_tree("(1 d)"), parse_tree("(0 (1 e) (2 a))")]
    b = tree_batch(trees, WORD_ID)
    assert b.level_offsets.tolist() == [0, 6, 8, 9]
    assert b.leaf_word_ids.tolist() == [2, 3, 4, 5, 6, 2]
    assert b.left.tolist() == [1, 4, 0] and b.right.tolist() == [2, 5, 6]
    assert b.root_index.tolist() == [8, 3, 7]
    assert b.labels.tolist() == [2, 2, 3, 1, 1, 2, 4, 0, 3]
    assert b.n_tokens.tolist() == [3, 1, 2] and b.token_offsets.tolist() == [0, 3, 4, 6]


def test_schedule_with_vocabulary_and_level_loop():
    """A level-by-level composition over the schedule equals a per-tree recursion."""
    data = load_samples()
    trees = data["train"][:32]
    vocab = Vocabulary.from_trees(data["train"])
    b = tree_batch(trees, vocab)
    assert b.is_binary
    rng = np.random.default_rng(0)
    H = 4
    E = rng.normal(size=(len(vocab), H))
    W = rng.normal(size=(2 * H, H)) / H

    h = np.empty((b.n_nodes, H))
    h[:b.n_leaves] = E[b.leaf_word_ids]
    for lvl in range(1, b.n_levels):
        s, r = b.level(lvl), b.internal(lvl)
        h[s] = np.tanh(np.concatenate([h[b.left[r]], h[b.right[r]]], axis=1) @ W)

    for t, tree in enumerate(trees):
        states = []
        for n in tree.postorder():  # plain recursion order, one node at a time
            if n.is_leaf:
                states.append(E[vocab[n.word]])
            else:
                r_, l_ = states.pop(), states.pop()
                states.append(np.tanh(np.concatenate([l_, r_]) @ W))
        assert np.allclose(h[b.root_index[t]], states[-1])


def test_merge_empty_and_bad_vocab():
    with pytest.raises(ValueError, match="at least one tree"):
        merge([])
    with pytest.raises(TypeError, match="vocab"):
        tree_batch([parse_tree("(1 a)")], 3)
