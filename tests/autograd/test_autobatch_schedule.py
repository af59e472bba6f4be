"""The autobatch machinery by phase: the schedulers as pure functions of the
record arrays (hypothesis over random mixed graphs), the arena, and guards on
counts (records per tree node, batched calls per minibatch, gathers read
from the arena), never on time; equality with eager on edge-case trees."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynnets as dn
from dynnets.autograd import primitives as P
from dynnets.autograd.autobatch import schedule as S
from dynnets.data.synthetic import random_tree
from dynnets.data.trees import Tree
from dynnets.data.vocab import Vocabulary
from dynnets.models import build_model


# --- the schedulers over random record arrays ------------------------------------------

@st.composite
def _records(draw):
    """Random mixed records as the recorder writes them: each record's pending
    inputs are earlier records; depth = deepest input + 1 for a computing
    node, = deepest input for a view (0 without pending inputs)."""
    n = draw(st.integers(1, 40))
    nsig = draw(st.integers(1, 4))
    sid = []
    depth = []
    src = []
    dst = []
    for i in range(n):
        s = draw(st.sampled_from(list(range(nsig)) + [S.VIEW, S.SINGLE]))
        deps = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else []
        if s == S.VIEW and not deps:
            s = 0
        d = max((depth[j] for j in deps), default=-1)
        depth.append(0 if not deps else (d if s == S.VIEW else d + 1))
        sid.append(s)
        src += deps
        dst += [i] * len(deps)
    rows_sig = np.array([draw(st.booleans()) for _ in range(nsig)])
    a = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    return a(sid), a(depth), a(src), a(dst), rows_sig


def _check_groups(order, starts, sid, depth, src, dst):
    n = len(sid)
    assert sorted(order.tolist()) == list(range(n)), "every record runs once"
    group_of = np.empty(n, dtype=np.int64)
    for g in range(len(starts) - 1):
        members = order[starts[g]:starts[g + 1]]
        assert len(members) >= 1
        assert len(set(sid[members].tolist())) == 1, "a group is one signature"
        if len(members) > 1:
            assert sid[members[0]] >= 0, "views and single nodes run alone"
        group_of[members] = g
    # no record runs before its inputs: a producer's group comes strictly before
    assert (group_of[src] < group_of[dst]).all()
    return group_of


@settings(max_examples=150, deadline=None)
@given(_records())
def test_depth_schedule_groups_are_the_signature_depth_pairs(rec):
    sid, depth, src, dst, rows_sig = rec
    order, starts = S.depth_schedule(sid, depth)
    _check_groups(order, starts, sid, depth, src, dst)
    comp = sid >= 0
    pairs = set(zip(sid[comp].tolist(), depth[comp].tolist()))
    sizes = np.diff(starts)
    heads = sid[order[starts[:-1]]]
    # one batched call per distinct (signature, depth); single nodes and views alone
    assert int((heads >= 0).sum()) == len(pairs)
    assert int((heads < 0).sum()) == int((sid < 0).sum())
    assert sizes.sum() == len(sid)


@settings(max_examples=150, deadline=None)
@given(_records())
def test_agenda_schedule_is_valid_and_the_kernel_equals_its_twin(rec):
    sid, depth, src, dst, rows_sig = rec
    order, starts = S.agenda_schedule(sid, depth, src, dst, rows_sig)
    _check_groups(order, starts, sid, depth, src, dst)
    o2, s2 = S.agenda_schedule(sid, depth, src, dst, rows_sig, kernel=False)
    np.testing.assert_array_equal(order, o2)
    np.testing.assert_array_equal(starts, s2)
    # the agenda never makes more calls than the (signature, depth) pairs (it may merge depths)
    heads = sid[order[starts[:-1]]]
    comp = sid >= 0
    assert int((heads >= 0).sum()) <= len(set(zip(sid[comp].tolist(), depth[comp].tolist())))


def test_schedulers_of_no_records():
    e = np.zeros(0, np.int64)
    for order, starts in (S.depth_schedule(e, e), S.agenda_schedule(e, e, e, e, np.zeros(0, bool))):
        assert order.size == 0 and starts.tolist() == [0]


# --- the arena ----------------------------------------------------------------------------

def test_arena_gather_equals_gather_rows_on_views_and_on_other_sources():
    rng = np.random.default_rng(0)
    arena = rng.standard_normal((9, 3))
    srcs = [arena[0:2], arena[2:6], arena[6:9]]
    offs = np.array([0, 2, 6])
    which = np.array([2, 0, 1, 1, 2, 0])
    rows = np.array([2, 1, 3, 0, 0, 0])
    want = P.gather_rows_p.impl(which, rows, *srcs)
    np.testing.assert_array_equal(P.arena_gather_p.impl(arena, offs, which, rows, *srcs), want)
    copies = [s.copy() for s in srcs]
    np.testing.assert_array_equal(P.arena_gather_p.impl(arena * 0, offs, which, rows, *copies), want)
    # views of the arena that are not row slices (strided rows) are read as gather_rows reads them
    odd = [arena[0:4:2], arena[1:9:2]]
    np.testing.assert_array_equal(P.arena_gather_p.impl(arena, np.array([0, 1]), np.array([1, 0, 1]),
                                                        np.array([3, 1, 0]), *odd),
                                  P.gather_rows_p.impl(np.array([1, 0, 1]), np.array([3, 1, 0]), *odd))
    with pytest.raises(P.IndexRangeError, match="arena_gather: row index 4 is out of range"):
        P.arena_gather_p.impl(arena, offs, which, np.array([2, 1, 4, 0, 0, 0]), *srcs)


def _trees(rng, n, leaves=(1, 12)):
    return [random_tree(rng, int(rng.integers(*leaves))) for _ in range(n)]


@pytest.mark.parametrize("levels", [True, False])
@pytest.mark.parametrize("strategy", ["agenda", "depth"])
def test_tree_lstm_counts(strategy, levels):
    """Guards on counts: one record per tree node (plus the embedding and
    split per tree, the concat and slice of the states), one batched call per
    depth (embedding, leaves, one per internal height, the final slice) or,
    with the levels lowering, one call for every internal node, and every
    gather one read from the arena."""
    rng = np.random.default_rng(3)
    trees = _trees(rng, 7)
    vocab = Vocabulary.from_trees(trees)
    m = build_model("treelstm", len(vocab), embed_dim=5, hidden=4, seed=0, mode="autobatch", dtype="float64")
    m.autobatch_strategy = strategy
    m.autobatch_levels = levels
    m.loss(m.collate(m.prepare(trees, vocab))).backward()
    s = m.last_autobatch.stats
    assert s["nodes"] == sum(t.size for t in trees) + 2 * len(trees) + 2
    assert s["batched_calls"] == 3 + (1 if levels else max(t.height for t in trees))
    assert s["chains"] == int(levels)
    assert s["fallbacks"] == {} and s["forces"] == 1
    assert s["gathers"] > 0 and s["arena_gathers"] == s["gathers"]
    assert s["arena_bytes"] > 0


# --- equality with eager on edge cases ----------------------------------------------------

def _chain(depth):
    """A left-branching binary tree ``depth`` internal nodes deep."""
    t = Tree.leaf(1, "a")
    for k in range(depth):
        t = Tree.node(k % 5, (t, Tree.leaf(2, "bcde"[k % 4])))
    return t


def _batches():
    rng = np.random.default_rng(11)
    return {"single-leaf": [Tree.leaf(3, "a")],
            "chain-60": [_chain(60)],
            "one-tree": _trees(rng, 1, (5, 9)),
            "ragged": _trees(rng, 6, (1, 20)) + [_chain(25), Tree.leaf(0, "c")]}


@pytest.mark.parametrize("name", ["single-leaf", "chain-60", "one-tree", "ragged"])
@pytest.mark.parametrize("kind", ["treelstm", "treernn", "childsum"])
def test_tree_models_equal_eager_on_edge_trees(kind, name):
    trees = _batches()[name]
    vocab = Vocabulary.from_trees(trees)
    res = {}
    for mode in ("recursive", "autobatch"):
        m = build_model(kind, len(vocab), embed_dim=5, hidden=4, seed=0, mode=mode, dtype="float64")
        loss = m.loss(m.collate(m.prepare(trees, vocab)))
        loss.backward()
        # a single leaf gives the internal-node weights no gradient (None in both modes)
        res[mode] = (loss.item(), {n: None if p.grad is None else p.grad.numpy().copy()
                                   for n, p in m.named_parameters()})
    (l1, g1), (l0, g0) = res["autobatch"], res["recursive"]
    assert abs(l1 - l0) <= 1e-10 * abs(l0)
    for n in g0:
        assert (g1[n] is None) == (g0[n] is None), n
        if g0[n] is None:
            continue
        assert np.abs(g1[n] - g0[n]).max() <= 1e-10 * max(np.abs(g0[n]).max(), 1e-30), n
