"""The levels lowering under dynnets.autobatch: a chain of same-signature
tree-node groups runs as one call of the per-level kernel, and equals eager.

Counts, not time: the node primitive makes one call per minibatch where the
chain's conditions hold, one per depth where they do not (the fallback), and
loss and every gradient equal the eager recursive code (float64, 1e-10).
"""
from __future__ import annotations

import numpy as np
import pytest

import dynnets as dn
from dynnets.autograd.ops import tree_lstm_leaf_node, tree_lstm_node
from dynnets.data import Tree, Vocabulary
from dynnets.data.synthetic import random_tree
from dynnets.models import build_model

TOL = 1e-10


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)) if a.size else 0.0


def _chain(depth):
    """A left-branching binary tree ``depth`` internal nodes deep."""
    t = Tree.leaf(1, "a")
    for k in range(depth):
        t = Tree.node(k % 5, (t, Tree.leaf(2, "bcde"[k % 4])))
    return t


def _batches():
    rng = np.random.default_rng(7)
    return {"single-leaf": [Tree.leaf(3, "a")],
            "chain-60": [_chain(60)],
            "one-tree": [random_tree(rng, 9)],
            "ragged": [random_tree(rng, int(rng.integers(1, 15))) for _ in range(9)] + [_chain(12)]}


def _height(t):
    return 0 if not t.children else 1 + max(_height(k) for k in t.children)


def _run(kind, trees, mode, levels=True, strategy="agenda"):
    vocab = Vocabulary.from_trees(trees)
    m = build_model(kind, len(vocab), embed_dim=5, hidden=4, seed=0, mode=mode, dtype="float64")
    m.autobatch_levels = levels
    m.autobatch_strategy = strategy
    loss = m.loss(m.collate(m.prepare(trees, vocab)))
    loss.backward()
    return m, loss.item(), {n: (p.grad.numpy().copy() if p.grad is not None else np.zeros(p.shape))
                            for n, p in m.named_parameters()}


@pytest.mark.parametrize("strategy", ["agenda", "depth"])
@pytest.mark.parametrize("name", list(_batches()))
def test_tree_lstm_levels_equals_eager_and_is_one_call(name, strategy):
    trees = _batches()[name]
    _, l0, g0 = _run("treelstm", trees, "recursive")
    m, l, g = _run("treelstm", trees, "autobatch", strategy=strategy)
    assert _rel(l, l0) <= TOL
    for n in g0:
        assert _rel(g[n], g0[n]) <= TOL, n
    ab = m.last_autobatch
    node_calls = [c for c in ab.calls if c.op.startswith("tree_lstm_node")]
    n_internal = sum((t.size - 1) // 2 for t in trees)        # binary trees
    height = max(_height(t) for t in trees)
    # a chain needs two depths of internal nodes; one depth is one call anyway
    assert len(node_calls) == (1 if n_internal else 0)
    assert sum(c.size for c in node_calls) == n_internal
    assert ab.stats["chains"] == (1 if height >= 2 else 0)
    assert ab.stats["fallbacks"] == {}
    # blame and tags stay per node: every internal node is in the schedule with its tag
    tagged = {s.tag for s in ab.schedule if s.op == "tree_lstm_node"}
    assert len(tagged) == n_internal


@pytest.mark.parametrize("kind", ["treelstm", "treernn", "childsum"])
def test_tree_models_with_and_without_levels_equal_eager(kind):
    trees = _batches()["ragged"]
    _, l0, g0 = _run(kind, trees, "recursive")
    for levels in (True, False):
        _, l, g = _run(kind, trees, "autobatch", levels=levels)
        assert _rel(l, l0) <= TOL
        for n in g0:
            assert _rel(g[n], g0[n]) <= TOL, (levels, n)


def _user_tree_lstm(trees, read_between, rng_seed=0):
    """A user's recursive Tree-LSTM on the library's node primitives; with
    ``read_between`` every internal state also feeds a loss term, computed
    by an op recorded right after the node (a reader of the chain's outputs
    scheduled between its depths)."""
    rng = np.random.default_rng(rng_seed)
    E, H = 3, 4
    emb = dn.tensor(rng.normal(size=(6, E)), dtype="float64", requires_grad=True)
    wl = dn.tensor(rng.normal(size=(E, 3 * H)) * 0.5, dtype="float64", requires_grad=True)
    bl = dn.tensor(rng.normal(size=(3 * H,)) * 0.1, dtype="float64", requires_grad=True)
    U = dn.tensor(rng.normal(size=(2 * H, 5 * H)) * 0.5, dtype="float64", requires_grad=True)
    b = dn.tensor(rng.normal(size=(5 * H,)) * 0.1, dtype="float64", requires_grad=True)
    extra = []

    def rec(t):
        if not t.children:
            return tree_lstm_leaf_node(dn.take(emb, np.array([len(t.word) % 6])), wl, bl)
        s = tree_lstm_node(rec(t.children[0]), rec(t.children[1]), U, b)
        if read_between:
            extra.append(dn.sum(dn.tanh(s)))
        return s

    def loss():
        extra.clear()
        roots = [rec(t) for t in trees]
        total = dn.sum(dn.concat(roots, axis=0) ** 2)
        for e in extra:
            total = total + e
        return total
    return loss, [emb, wl, bl, U, b]


@pytest.mark.parametrize("read_between", [False, True])
def test_levels_fallback_when_a_reader_runs_between_depths(read_between):
    """A reader of a node's state that the schedule puts before the chain's
    last depth: the chain's conditions do not hold, the groups run one call
    per depth (the fallback) and the result still equals eager."""
    rng = np.random.default_rng(2)
    trees = [random_tree(rng, int(rng.integers(3, 10))) for _ in range(5)] + [_chain(5)]
    loss, params = _user_tree_lstm(trees, read_between)
    l0 = loss()
    l0.backward()
    g0 = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    with dn.autobatch("depth") as ab:
        l = loss()
    l.backward()
    assert _rel(l.item(), l0.item()) <= TOL
    for p, g in zip(params, g0):
        assert _rel(p.grad.numpy(), g) <= TOL
    node_calls = [c for c in ab.calls if c.op == "tree_lstm_node"]
    height = max(_height(t) for t in trees)
    if read_between:
        assert ab.stats["chains"] == 0 and len(node_calls) == height
    else:
        assert ab.stats["chains"] == 1 and len(node_calls) == 1


def test_levels_off_is_one_call_per_depth():
    trees = _batches()["ragged"]
    m, _, _ = _run("treelstm", trees, "autobatch", levels=False, strategy="depth")
    node_calls = [c for c in m.last_autobatch.calls if c.op == "tree_lstm_node"]
    assert len(node_calls) == max(_height(t) for t in trees) and m.last_autobatch.stats["chains"] == 0



def _few_words(rng, n_leaves, words="abc"):
    """A random binary tree over a three-word vocabulary (most leaves share a word)."""
    ts = [Tree.leaf(int(rng.integers(5)), words[int(rng.integers(len(words)))]) for _ in range(n_leaves)]
    while len(ts) > 1:
        k = int(rng.integers(len(ts) - 1))
        ts[k:k + 2] = [Tree.node(int(rng.integers(5)), (ts[k], ts[k + 1]))]
    return ts[0]


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_leaves_once_per_distinct_word(dropout):
    """Without embedding dropout the embedding looks each word up once and the
    leaf cell runs once per distinct word (as level mode); with it every leaf
    draws its own mask and runs on its own row. Loss and gradients equal the
    recursive code either way, and every leaf keeps its node and tag."""
    rng = np.random.default_rng(4)
    trees = [_few_words(rng, int(rng.integers(1, 12))) for _ in range(8)]
    vocab = Vocabulary.from_trees(trees)
    res = {}
    for mode in ("recursive", "autobatch"):
        m = build_model("treelstm", len(vocab), embed_dim=5, hidden=4, seed=0, mode=mode, dtype="float64",
                        embed_dropout=dropout)
        m.train()
        ex = m.prepare(trees, vocab)
        loss = m.loss(m.collate(ex))
        loss.backward()
        res[mode] = (loss.item(), [p.grad.numpy().copy() for p in m.parameters()], m)
    assert _rel(res["autobatch"][0], res["recursive"][0]) <= TOL
    for a, b in zip(res["autobatch"][1], res["recursive"][1]):
        assert _rel(a, b) <= TOL
    ab = res["autobatch"][2].last_autobatch
    n_leaves = sum((t.size + 1) // 2 for t in trees)
    distinct = len({w for e in ex for w in e.leaf_ids.tolist()})
    assert distinct <= 3 < n_leaves
    leaf_calls = [c for c in ab.calls if c.op == "tree_lstm_leaf_node"]
    assert len(leaf_calls) == 1 and leaf_calls[0].size == n_leaves
    # the rows the leaf call ran: one per distinct word, or one per leaf with dropout
    assert ab.stats["rows_shared"].get("tree_lstm_leaf_node", 0) == (n_leaves - distinct if dropout == 0.0 else 0)
    assert len({s.tag for s in ab.schedule if s.op == "tree_lstm_leaf_node"}) == n_leaves


def test_levels_rule_outputs_equal_the_node_primitive():
    """Every output of a lowered chain (states, gate activations, children's
    hidden states) equals the node primitive's own, node by node."""
    from dynnets.autograd import engine
    from dynnets.autograd import primitives as P
    rng = np.random.default_rng(9)
    H = 3
    U = rng.normal(size=(2 * H, 5 * H)) * 0.5
    b = rng.normal(size=(5 * H,)) * 0.1
    leaves = [rng.normal(size=(1, 2 * H)) for _ in range(6)]
    shape = [(0, 1), (2, 3), (6, 4), (7, 8), (9, 5)]      # children of nodes 6..10 (0..5 leaves)

    def run():
        st = [dn.tensor(x, dtype="float64") for x in leaves]
        outs = []
        for l, r in shape:
            o = engine.bind(P.tree_lstm_node_p, st[l], st[r], U, b)
            st.append(o[0])
            outs.append(o)
        return outs
    ref = [[t.numpy().copy() for t in o] for o in run()]
    with dn.autobatch() as ab:
        got = run()
    assert ab.stats["chains"] == 1
    for o, r in zip(got, ref):
        for a, e in zip(o, r):
            np.testing.assert_allclose(a.numpy(), e, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("twice", [False, True])
def test_levels_node_reading_one_state_twice(twice):
    """A DAG: a node whose two children are the same state (the kernel then
    reads and scatters one row twice); equals eager either way."""
    rng = np.random.default_rng(1)
    H = 3
    U = dn.tensor(rng.normal(size=(2 * H, 5 * H)) * 0.5, dtype="float64", requires_grad=True)
    b = dn.tensor(rng.normal(size=(5 * H,)) * 0.1, dtype="float64", requires_grad=True)
    xs = dn.tensor(rng.normal(size=(4, 2 * H)), dtype="float64", requires_grad=True)

    def loss():
        l = dn.split_rows(xs)
        s1 = tree_lstm_node(l[0], l[1], U, b)
        s2 = tree_lstm_node(s1, s1 if twice else l[2], U, b)
        s3 = tree_lstm_node(s2, l[3], U, b)
        return dn.sum(s3 ** 2)
    l0 = loss()
    l0.backward()
    g0 = [p.grad.numpy().copy() for p in (U, b, xs)]
    for p in (U, b, xs):
        p.grad = None
    with dn.autobatch() as ab:
        l = loss()
    l.backward()
    assert _rel(l.item(), l0.item()) <= TOL
    for p, g in zip((U, b, xs), g0):
        assert _rel(p.grad.numpy(), g) <= TOL
    assert len([c for c in ab.calls if c.op == "tree_lstm_node"]) == (1 if ab.stats["chains"] else 3)


def test_decorated_body_with_dropout_on_shared_rows_draws_per_instance():
    """Leaves of one word read one row of the embedding, but a decorated cell
    whose body draws (dropout) still runs once per instance: each its own mask."""
    import dynnets.nn.functional as F
    rng = np.random.default_rng(0)
    emb = dn.tensor(rng.normal(size=(3, 64)) + 3.0, dtype="float64")

    @dn.batchable
    def cell(x):
        return F.dropout(x, p=0.5, training=True) * 1.0

    with dn.autobatch() as ab:
        # two lookups (one batched call) of one word, twice each
        xs = [x for _ in range(2) for x in dn.split_rows(F.embedding(np.array([1, 1]), emb))]
        outs = [cell(x) for x in xs]
        vals = [o.numpy() for o in outs]
    masks = {tuple((v != 0).ravel().tolist()) for v in vals}
    assert len(masks) == 4
    assert ab.stats["rows_shared"].get("embedding", 0) == 3
