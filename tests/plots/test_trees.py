"""Tree pictures: the tidy layout, the SVG (well-formed, node counts, colours, no overlaps), PNG, predict --svg."""
import json
import struct
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from dynnets.cli import main
from dynnets.data import Tree, Vocabulary, load_samples, parse_tree
from dynnets.models import build_model
from dynnets.plots import (PALETTE, class_names, layout_violations, palette, text_width, tree_layout, tree_png,
                           tree_svg, write_tree_svg)
from dynnets.plots.trees import COUSIN_GAP, SIBLING_GAP
from dynnets.train import save_checkpoint

NS = {"s": "http://www.w3.org/2000/svg"}
SENTENCE = "(1 (1 (3 (3 (2 (2 the) (2 sequel)) (3 (2 is) (3 (2 not) (1 bad)))) (2 ,)) (1 (2 but) (1 (2 it) " \
           "(1 (2 is) (1 (2 not) (4 (2 very) (3 good))))))) (2 .))"
WORDS = ("a", "the", "film", "W", "mmmmmm", "incomprehensibly", "é", "好看", "--", "stomach-knotting", "i", ",")


def _words(rng, n):
    return [WORDS[k] if k < len(WORDS) else "x" * (k - len(WORDS) + 1) for k in rng.integers(0, len(WORDS) + 14, n)]


def balanced(words, label=2):
    nodes = [Tree.leaf(label, w) for w in words]
    while len(nodes) > 1:
        nodes = [Tree.node(label, nodes[i:i + 2]) if i + 1 < len(nodes) else nodes[i] for i in range(0, len(nodes), 2)]
    return nodes[0]


def right_branching(words, label=2):
    t = Tree.leaf(label, words[-1])
    for w in reversed(words[:-1]):
        t = Tree.node(label, (Tree.leaf(label, w), t))
    return t


def left_branching(words, label=2):
    t = Tree.leaf(label, words[0])
    for w in words[1:]:
        t = Tree.node(label, (t, Tree.leaf(label, w)))
    return t


def random_binary(words, rng, label=2):
    nodes = [Tree.leaf(label, w) for w in words]
    while len(nodes) > 1:
        i = int(rng.integers(0, len(nodes) - 1))
        nodes[i:i + 2] = [Tree.node(label, nodes[i:i + 2])]
    return nodes[0]


def random_nary(words, rng, label=2):
    nodes = [Tree.leaf(label, w) for w in words]
    while len(nodes) > 1:
        k = int(rng.integers(2, min(5, len(nodes)) + 1))
        i = int(rng.integers(0, len(nodes) - k + 1))
        nodes[i:i + k] = [Tree.node(label, nodes[i:i + k])]
    return nodes[0]


def sixty_word_trees():
    rng = np.random.default_rng(0)
    words = _words(rng, 60)
    out = [("balanced", balanced(words)), ("right-branching", right_branching(words)),
           ("left-branching", left_branching(words))]
    out += [(f"random binary {k}", random_binary(_words(rng, 60), rng)) for k in range(6)]
    out += [(f"random n-ary {k}", random_nary(_words(rng, 60), rng)) for k in range(3)]
    return out


# --------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name, tree", sixty_word_trees(), ids=lambda x: x if isinstance(x, str) else "")
def test_layout_of_60_word_trees_has_no_overlaps(name, tree):
    assert len(tree.leaves()) == 60
    rng = np.random.default_rng(1)
    widths = rng.uniform(6, 120, tree.size)
    lay = tree_layout(tree, widths)
    assert layout_violations(tree, lay) == [], name
    assert lay.x.min() - widths[np.argmin(lay.x)] / 2 >= -1e-9


def test_layout_violations_finds_overlaps_and_off_centre_parents():
    t = parse_tree("(2 (2 a) (2 b))")
    lay = tree_layout(t, [10, 10, 10])
    assert layout_violations(t, lay) == []
    lay.x[2] = lay.x[1] + 5               # b's box now overlaps a's
    bad = layout_violations(t, lay)
    assert any("apart" in m for m in bad) and any("not centred" in m for m in bad)


def test_layout_exact_positions():
    # (a (b c)), every box 10 wide: b and c 10 + SIBLING_GAP apart, their parent centred over them,
    # a beside that parent, the root centred over a and the parent
    t = parse_tree("(2 (2 a) (2 (2 b) (2 c)))")
    lay = tree_layout(t, [10] * 5)
    x = lay.x
    step = 10 + SIBLING_GAP
    assert x[3] == pytest.approx(x[4] - step)               # b, c
    assert x[2] == pytest.approx((x[3] + x[4]) / 2)         # their parent
    assert x[1] == pytest.approx(x[2] - step)               # a, beside it
    assert x[0] == pytest.approx((x[1] + x[2]) / 2)
    assert x[1] - 5 == pytest.approx(0.0)                   # the leftmost box edge at 0
    assert list(lay.depth) == [0, 1, 1, 2, 2]


def test_layout_is_compact_on_a_complete_tree():
    # 64 equal leaves at the bottom: the drawing is exactly as wide as they are, with the gaps
    t = balanced(["w"] * 64)
    lay = tree_layout(t, [10.0] * t.size)
    assert lay.extent == pytest.approx(64 * 10 + 32 * SIBLING_GAP + 31 * COUSIN_GAP)


def test_layout_spaces_out_smaller_middle_subtrees():
    # Walker's improvement, kept by Buchheim et al.: a leaf between two big subtrees
    # sits halfway between them, not pushed against the left one
    big = "(2 (2 (2 a) (2 b)) (2 (2 c) (2 d)))"
    t = parse_tree(f"(2 {big} (2 m) {big})")
    lay = tree_layout(t, [10.0] * t.size)
    kids = [1, 8, 9]                        # preorder: left subtree 1..7, leaf m 8, right subtree 9..15
    assert t.preorder()[8].word == "m"
    assert lay.x[kids[1]] == pytest.approx((lay.x[kids[0]] + lay.x[kids[2]]) / 2)
    assert layout_violations(t, lay) == []


def test_layout_of_a_very_deep_tree_needs_no_recursion():
    t = right_branching(["w"] * 5000)
    lay = tree_layout(t, [8.0] * t.size)
    assert int(lay.depth.max()) == 4999
    assert layout_violations(t, lay) == []


def test_layout_checks_the_number_of_widths():
    with pytest.raises(ValueError, match="3 widths"):
        tree_layout(parse_tree("(2 (2 a) (2 b))"), [1.0, 2.0])


def test_text_width_uses_the_font_metrics():
    assert text_width("", 12) == 0
    assert text_width("iiii", 12) < text_width("mmmm", 12)
    assert text_width("W", 10) == pytest.approx(10 * 2025 / 2048)
    assert text_width("好", 10) == pytest.approx(11.0)        # outside the table: 1.1 em


# --------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------


def _svg_nodes(svg):
    """The parsed SVG and its node groups in preorder."""
    root = ET.fromstring(svg)
    nodes = root.findall(".//s:g[@class='node']", NS) + root.findall(".//s:g[@class='node leaf']", NS)
    return root, sorted(nodes, key=lambda g: int(g.get("data-index")))


def _boxes(root):
    """(left, top, right, bottom) of every node's shape (its ring when it has one), by data-index."""
    out = {}
    for g in root.iter("{http://www.w3.org/2000/svg}g"):
        if g.get("class") not in ("node", "node leaf"):
            continue
        shapes = [e for e in g if e.tag.endswith(("rect", "circle"))]
        box = None
        for e in shapes:
            if e.tag.endswith("circle"):
                cx, cy, r = (float(e.get(k)) for k in ("cx", "cy", "r"))
                b = (cx - r, cy - r, cx + r, cy + r)
            else:
                x, y, w, h = (float(e.get(k)) for k in ("x", "y", "width", "height"))
                b = (x, y, x + w, y + h)
            box = b if box is None else (min(box[0], b[0]), min(box[1], b[1]), max(box[2], b[2]), max(box[3], b[3]))
        out[int(g.get("data-index"))] = (box, g)
    return out


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _check_geometry(svg, font_size=12.0):
    root, _ = _svg_nodes(svg)
    boxes = _boxes(root)
    items = sorted(boxes.items())
    # no two node boxes overlap: sweep by left edge
    order = sorted(items, key=lambda kv: kv[1][0][0])
    active = []
    for k, (b, _) in order:
        active = [(j, c) for j, c in active if c[2] > b[0]]
        for j, c in active:
            assert not _overlap(b, c), (k, j, b, c)
        active.append((k, b))
    # every label inside its box, set at the width the layout measured
    for k, (b, g) in items:
        for t in g.findall("s:text", NS):
            size = float(t.get("font-size", font_size))
            w = text_width(t.text or "", size)
            cx = float(t.get("x"))
            assert b[0] - 1e-6 <= cx - w / 2 and cx + w / 2 <= b[2] + 1e-6, (k, t.text)
            assert b[1] <= float(t.get("y")) <= b[3], (k, t.text)
    # edges run from a parent's box to its child's and cross no other box
    lines = root.findall(".//s:g[@class='edges']/s:polyline", NS)
    assert len(lines) == len(items) - 1
    for ln in lines:
        pts = [tuple(float(c) for c in p.split(",")) for p in ln.get("points").split()]
        for k, (b, _) in items:
            for p, q in zip(pts, pts[1:]):
                if _segment_hits(p, q, b):
                    assert _touches(pts[0], b) or _touches(pts[-1], b), (k, pts, b)
    return root


def _touches(pt, b, eps=1e-6):
    return b[0] - eps <= pt[0] <= b[2] + eps and b[1] - eps <= pt[1] <= b[3] + eps


def _segment_hits(p, q, b, eps=1e-6):
    """Whether segment p-q passes through the inside of box b (Liang-Barsky clipping)."""
    t0, t1 = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for d, lo, hi, start in ((dx, b[0] + eps, b[2] - eps, p[0]), (dy, b[1] + eps, b[3] - eps, p[1])):
        if abs(d) < 1e-12:
            if not lo < start < hi:
                return False
            continue
        a, c = (lo - start) / d, (hi - start) / d
        t0, t1 = max(t0, min(a, c)), min(t1, max(a, c))
        if t0 >= t1:
            return False
    return True


@pytest.mark.parametrize("name, tree", sixty_word_trees(), ids=lambda x: x if isinstance(x, str) else "")
def test_svg_of_60_word_trees_is_well_formed_without_overlaps(name, tree):
    rng = np.random.default_rng(2)
    proba = rng.dirichlet(np.ones(5), size=tree.size)
    for text in (False, True):
        svg = tree_svg(tree, proba, text=text)
        _check_geometry(svg)
        assert len(_svg_nodes(svg)[1]) == tree.size


def test_svg_nodes_colours_and_titles_follow_the_predictions():
    t = parse_tree(SENTENCE)
    rng = np.random.default_rng(3)
    proba = rng.dirichlet(np.ones(5), size=t.size)
    svg = tree_svg(t, proba, gold=True)
    root, nodes = _svg_nodes(svg)
    assert len(nodes) == t.size == 25
    pre = t.preorder()
    leaves = [g for g in nodes if "leaf" in g.get("class")]
    assert [g.find("s:text", NS).text for g in sorted(leaves, key=lambda g: int(g.get("data-index")))] == t.words()
    for g in nodes:
        k = int(g.get("data-index"))
        pred = int(np.argmax(proba[k]))
        assert int(g.get("data-pred")) == pred
        assert g.get("data-fill") == PALETTE[pred]
        shape = [e for e in g if e.tag.endswith(("rect", "circle")) and e.get("class") != "mismatch"][0]
        assert shape.get("fill") == PALETTE[pred]
        assert int(g.get("data-gold")) == pre[k].label
        title = g.find("s:title", NS).text
        assert f"predicted {pred} {class_names(5)[pred]} ({proba[k, pred]:.3f})" in title
        assert "probabilities: " + " ".join(f"{p:.3f}" for p in proba[k]) in title
        assert f"gold {pre[k].label}" in title
        mismatch = g.find("s:rect[@class='mismatch']", NS) is not None
        assert mismatch == (pred != pre[k].label) == (g.get("data-mismatch") == "1")
    assert [g.get("data-root") for g in nodes].count("1") == 1 and nodes[0].get("data-index") == "0"
    legend = root.findall(".//s:g[@class='legend']/s:text", NS)
    assert [e.text for e in legend] == [f"{k} {n}" for k, n in enumerate(class_names(5))] + ["prediction ≠ gold"]
    cap = root.find(".//s:text[@class='caption']", NS).text
    assert cap.startswith(f"predicted: {int(np.argmax(proba[0]))} ") and cap.endswith(f"gold 1 {class_names(5)[1]}")


def test_svg_without_predictions_draws_the_tree_labels():
    t = parse_tree(SENTENCE)
    _, nodes = _svg_nodes(tree_svg(t))
    assert [g.get("data-fill") for g in nodes] == [PALETTE[n.label] for n in t.preorder()]
    assert all(g.get("data-gold") is None and g.get("data-mismatch") is None for g in nodes)


def test_svg_from_a_model_record(tmp_path):
    from dynnets.runs import node_predictions
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    model = build_model("treelstm", len(vocab), embed_dim=8, hidden=8, seed=0)
    t = parse_tree(SENTENCE)
    rec = node_predictions(model, t, vocab, texts=False)
    svg = tree_svg(t, rec)
    _, nodes = _svg_nodes(svg)
    for g, n in zip(sorted(nodes, key=lambda g: int(g.get("data-index"))), rec["nodes"]):
        assert int(g.get("data-pred")) == n["pred"] and int(g.get("data-gold")) == n["gold"]
    path = write_tree_svg(tmp_path / "t.svg", t, rec)
    assert path.read_text() == svg
    with pytest.raises(ValueError, match="per-node"):
        tree_svg(t, dict(rec, nodes=None))


def test_svg_escapes_every_word():
    words = ["<script>", "a&b", '"q"', "it's", "\x01bell", "\ud800", "]]>"]
    t = right_branching(words)
    svg = tree_svg(t)
    root, nodes = _svg_nodes(svg)           # parses: nothing unescaped, no character XML forbids
    texts = [g.find("s:text", NS).text for g in sorted(nodes, key=lambda g: int(g.get("data-index")))
             if "leaf" in g.get("class")]
    assert texts == ["<script>", "a&b", '"q"', "it's", "\ufffdbell", "\ufffd", "]]>"]
    assert "<script>" not in svg


@pytest.mark.parametrize("C", [2, 3, 5, 7])
def test_palette_runs_from_negative_to_positive(C):
    p = palette(C)
    assert len(p) == C and p[0] == PALETTE[0] and p[-1] == PALETTE[-1]
    if C % 2:
        assert p[C // 2] == PALETTE[2]


def test_bad_predictions_are_refused():
    t = parse_tree("(2 (2 a) (2 b))")
    with pytest.raises(ValueError, match=r"\(3, C\)"):
        tree_svg(t, np.ones((2, 5)))
    with pytest.raises(ValueError, match="finite"):
        tree_svg(t, np.full((3, 5), np.nan))
    with pytest.raises(ValueError, match="gold"):
        tree_svg(t, np.ones((3, 5)), gold=[0, 1, 9])


def test_deep_tree_svg_is_linear():
    t = right_branching(["word"] * 3000)
    svg = tree_svg(t, np.tile([0.1, 0.2, 0.4, 0.2, 0.1], (t.size, 1)))
    _, nodes = _svg_nodes(svg)
    assert len(nodes) == t.size
    assert len(svg) < 600 * t.size          # titles show at most 12 words of a span


# --------------------------------------------------------------------------
# PNG
# --------------------------------------------------------------------------


def test_png_draws_the_same_picture():
    mpl = pytest.importorskip("matplotlib", reason="PNG pictures need matplotlib (pip install 'dynnets[plot]')")
    import io
    from matplotlib.image import imread
    t = parse_tree(SENTENCE)
    proba = np.eye(5)[[n.label for n in t.preorder()]] * 0.6 + 0.08
    svg = tree_svg(t, proba)
    root = ET.fromstring(svg)
    png = tree_png(t, proba, scale=2.0)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", png[16:24])
    assert (w, h) == (round(2 * float(root.get("width"))), round(2 * float(root.get("height"))))
    img = imread(io.BytesIO(png))
    root_g = root.find(".//s:g[@data-root='1']", NS)
    c = root_g.find("s:circle", NS)
    x, y = float(c.get("cx")), float(c.get("cy"))
    rgb = img[int(round(2 * y)), int(round(2 * x)), :3]
    want = np.array([int(PALETTE[1][k:k + 2], 16) / 255 for k in (1, 3, 5)])
    assert np.allclose(rgb, want, atol=0.02), (rgb, want)
    assert mpl is not None


def test_png_without_matplotlib_says_how_to_install(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(ImportError, match=r"pip install 'dynnets\[plot\]'"):
        tree_png(parse_tree("(2 (2 a) (2 b))"))


# --------------------------------------------------------------------------
# dynnets predict --svg / --png
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    path = tmp_path_factory.mktemp("ck") / "best.npz"
    save_checkpoint(path, build_model("treelstm", len(vocab), embed_dim=8, hidden=8, seed=0), vocab)
    return path


def test_predict_svg(checkpoint, tmp_path, capsys):
    out = tmp_path / "tree.svg"
    assert main(["predict", "--checkpoint", str(checkpoint), "--svg", str(out), SENTENCE]) == 0
    text = capsys.readouterr().out
    assert f"picture: {out}" in text
    root, nodes = _svg_nodes(out.read_text())
    assert len(nodes) == 25
    assert main(["predict", "--checkpoint", str(checkpoint), "--json", "--nodes", SENTENCE]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    by_index = sorted(nodes, key=lambda g: int(g.get("data-index")))
    assert [int(g.get("data-pred")) for g in by_index] == [n["pred"] for n in rec["nodes"]]
    assert [int(g.get("data-gold")) for g in by_index] == [n["gold"] for n in rec["nodes"]]


def test_predict_svg_numbers_the_files_of_several_sentences_and_keeps_json_clean(checkpoint, tmp_path, capsys):
    out = tmp_path / "t.svg"
    assert main(["predict", "--checkpoint", str(checkpoint), "--json", "--svg", str(out), "--picture-text",
                 "it is good .", "it is not good ."]) == 0
    recs = json.loads(capsys.readouterr().out)          # stdout is only the JSON
    assert len(recs) == 2 and recs[0]["nodes"] is None
    for k, words in ((1, 4), (2, 5)):
        _, nodes = _svg_nodes((tmp_path / f"t-{k}.svg").read_text())
        assert len(nodes) == 2 * words - 1
    assert not out.exists()


def test_predict_svg_needs_a_tree_model(tmp_path, capsys):
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    path = tmp_path / "lstm.npz"
    save_checkpoint(path, build_model("lstm", len(vocab), embed_dim=8, hidden=8, seed=0), vocab)
    assert main(["predict", "--checkpoint", str(path), "--svg", str(tmp_path / "x.svg"), "it is good"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--svg" in err and "lstm" in err
    assert not (tmp_path / "x.svg").exists()


def test_predict_png_without_matplotlib_is_one_line(checkpoint, tmp_path, capsys, monkeypatch):
    import dynnets.plots
    monkeypatch.setattr(dynnets.plots, "have_matplotlib", lambda: False)
    assert main(["predict", "--checkpoint", str(checkpoint), "--png", str(tmp_path / "x.png"), "it is good"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'dynnets[plot]'" in err
