"""The autobatch schedule picture: node order, colours and call ids against the schedule given."""
import xml.etree.ElementTree as ET

import pytest

from dynnets.data import parse_tree
from dynnets.plots.schedule import call_colour, preorder_from_postorder, schedule_svg

NS = {"s": "http://www.w3.org/2000/svg"}
# postorder: a=0, good=1, (a good)=2, film=3, root=4; preorder: root, (a good), a, good, film
TREE = "(3 (2 (2 a) (3 good)) (2 film))"


def circles(svg):
    root = ET.fromstring(svg)
    return [(int(c.get("data-tree")), int(c.get("data-index")), int(c.get("data-call")), c.get("fill"))
            for c in root.iter(f"{{{NS['s']}}}circle") if c.get("class") == "node"]


def legend(svg):
    root = ET.fromstring(svg)
    return {int(c.get("data-legend-call")): c.get("fill") for c in root.iter(f"{{{NS['s']}}}circle")
            if c.get("data-legend-call") is not None}


def test_preorder_from_postorder():
    t = parse_tree(TREE)
    assert preorder_from_postorder(t, ["a", "good", "ag", "film", "root"]) == ["root", "ag", "a", "good", "film"]
    deep = parse_tree("(1 (1 (1 (1 x) (1 y)) (1 z)) (1 w))")
    assert preorder_from_postorder(deep, list(range(7))) == [6, 4, 2, 0, 1, 3, 5]
    with pytest.raises(ValueError, match="5 nodes, got 4"):
        preorder_from_postorder(t, [0, 1, 2, 3])


def test_every_node_drawn_with_its_calls_colour():
    t1, t2 = parse_tree(TREE), parse_tree("(1 (2 not) (1 bad))")
    calls = [[7, 3, 0, 0, 0], [4, 0, 0]]
    got = circles(schedule_svg([t1, t2], calls))
    assert [(t, i, k) for t, i, k, _ in got] == [(t, i, k) for t, c in enumerate(calls) for i, k in enumerate(c)]
    for _, _, k, fill in got:
        assert fill == call_colour(k)
    assert legend(schedule_svg([t1, t2], calls)) == {k: call_colour(k) for k in (0, 3, 4, 7)}
    # distinct calls are told apart by colour (golden-angle hues), neighbours in execution order most of all
    assert len({call_colour(k) for k in range(40)}) == 40


def test_caption_counts_and_bad_input():
    t = parse_tree(TREE)
    svg = schedule_svg([t, t], [[2, 1, 0, 0, 0], [2, 1, 0, 0, 0]])
    assert "2 trees, 10 nodes, 3 batched calls" in svg
    with pytest.raises(ValueError, match="tree 0 has 5 nodes, got 3"):
        schedule_svg([t], [[0, 0, 0]])
    with pytest.raises(ValueError, match="2 trees but 1 call lists"):
        schedule_svg([t, t], [[0] * 5])


@pytest.mark.parametrize("strategy", ["agenda", "depth"])
def test_tree_node_calls_match_the_autobatch_schedule(strategy):
    import dynnets as dn
    from dynnets.data import Vocabulary, load_samples
    from dynnets.models import TreeLSTM
    from dynnets.plots.schedule import tree_node_calls
    if not hasattr(dn, "autobatch"):
        pytest.skip("dynnets.autobatch is not on this branch")
    trees = load_samples()["train"][:5]
    vocab = Vocabulary.from_trees(trees)
    model = TreeLSTM(len(vocab), 8, 4, 5, mode="recursive", seed=0)
    calls, names, ab = tree_node_calls(model, trees, vocab, strategy=strategy)
    by_tag = {s.tag: s for s in ab.schedule if s.call >= 0}
    ops = {c.call: c.op for c in ab.calls}
    n_nodes = sum(t.size for t in trees)
    assert sum(len(c) for c in calls) == n_nodes
    for t, (tree, cs) in enumerate(zip(trees, calls)):
        post = preorder_from_postorder(tree, list(range(tree.size)))      # preorder -> postorder index
        order = _pre(tree)
        for v, (node, k) in enumerate(zip(order, cs)):
            assert by_tag[(t, post[v])].call == k
            assert ops[k] == ("tree_lstm_leaf_node" if node.word is not None else "tree_lstm_node")
            for c in node.children:                    # a parent runs after its children
                assert k > cs[order.index(c)]
    # the trees were batched together: far fewer calls than nodes, all leaves in one call
    used = {k for c in calls for k in c}
    assert len(used) < n_nodes / 4
    leaf_calls = {k for tree, cs in zip(trees, calls) for node, k in zip(_pre(tree), cs) if node.word is not None}
    assert len(leaf_calls) == 1 and names[leaf_calls.pop()].startswith("tree_lstm_leaf_node x ")
    svg = schedule_svg(trees, calls, call_names=names)
    fills = {(t, i): (k, f) for t, i, k, f in circles(svg)}
    assert set(legend(svg)) == used and all(names[k] in svg for k in used)
    for t, cs in enumerate(calls):
        for v, k in enumerate(cs):
            assert fills[(t, v)] == (k, call_colour(k))


def _pre(tree):
    out, stack = [], [tree]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children))
    return out
