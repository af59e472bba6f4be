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
            for c in root.iter(f"{{{NS['s']}}}circle")]


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
