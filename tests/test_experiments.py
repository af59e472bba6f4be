"""The experiment scripts in tiny configurations, and the library code behind them."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dynnets import experiments as ex
from dynnets.data import Vocabulary, load_samples, parse_tree

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "experiments"


def script(name, *args, timeout=60):
    r = subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


# --------------------------------------------------------------------------
# the scripts
# --------------------------------------------------------------------------


def test_compare_script_tiny(tmp_path):
    out = tmp_path / "cmp"
    r = script("compare_padded_vs_dynamic.py", "--out", str(out), "--max-sentences", "40", "--epochs", "2",
               "--seeds", "2", "--hidden", "8", "--embed-dim", "8", "--no-progress")
    res = json.loads((out / "results.json").read_text())
    assert len(res["runs"]) == 2 * 5 and [r_["seed"] for r_ in res["runs"]][::5] == [0, 1]
    labels = [s["label"] for s in res["summary"]]
    assert len(labels) == 5 and any("(max)" in lab for lab in labels) and any("(median)" in lab for lab in labels)
    for s in res["summary"]:
        assert s["test"]["root_fine"]["n"] == 2 and s["sent_per_s"]["mean"] > 0
        assert len(s["learning_curve"]) == 2 and len(s["by_length"]) == 5
    pad = {s["label"]: s for s in res["summary"]}
    waste = [s["pad_fraction"]["mean"] for s in res["summary"] if s["kind"] == "padded-lstm"]
    assert waste[0] > waste[1] > waste[2] > 0          # max > p95 > median
    assert all(s["pad_fraction"]["mean"] == 0 for s in pad.values() if s["kind"] != "padded-lstm")
    md = (out / "results.md").read_text()
    assert "| model | epoch s |" in md and "by sentence length" in md
    if ex.have_matplotlib():
        for png in ("accuracy_by_length.png", "throughput.png", "learning_curves.png"):
            assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    assert str(out / "results.json") in r.stdout


def test_train_tree_rnn_script_tiny(tmp_path):
    out = tmp_path / "tree"
    r = script("train_tree_rnn.py", "--model", "treernn", "--out", str(out), "--max-sentences", "60", "--epochs", "1",
               "--hidden", "8", "--embed-dim", "8", "--no-progress", "it is not good .")
    res = json.loads((out / "results.json").read_text())
    assert res["kind"] == "treernn" and len(res["sentences"]) == 1
    nodes = res["sentences"][0]["nodes"]
    assert [n["text"] for n in nodes][:2] == ["it is not good .", "it is not good"] and len(nodes) == 9
    text = (out / "nodes.txt").read_text()
    assert "it is not good ." in text and text in r.stdout + "\n"


def test_graph_overhead_script_tiny(tmp_path):
    out = tmp_path / "go"
    script("graph_overhead.py", "--out", str(out), "--sizes", "1", "4", "--repeats", "2", "--width", "8")
    res = json.loads((out / "results.json").read_text())
    rows = res["rows"]
    assert [r["layers"] for r in rows] == [1, 4] and [r["forward_ops"] for r in rows] == [3, 12]
    for r in rows:
        assert r["eager_ms"] > 0 and r["compile_ms"] > 0 and r["static_run_ms"] > 0 and r["modify_and_run_ms"] > 0
        assert r["graph_equations"] >= r["forward_ops"]
    assert "| layers |" in (out / "results.md").read_text()
    if ex.have_matplotlib():
        assert (out / "graph_overhead.png").stat().st_size > 1000


@pytest.mark.parametrize("name", ["compare_padded_vs_dynamic.py", "train_tree_rnn.py", "graph_overhead.py",
                                  "sst_accuracy.py", "sweep.py"])
def test_script_help(name, monkeypatch, capsys):
    import runpy
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(SCRIPTS / name), run_name="__main__")
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {name}")
    for flag in ("--seed ", "--out", "--no-progress", "--blas-threads"):
        assert flag in out, flag


@pytest.mark.parametrize("name", ["compare_padded_vs_dynamic.py", "train_tree_rnn.py", "graph_overhead.py",
                                  "sst_accuracy.py"])
def test_script_seed_must_be_non_negative(name, tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPTS / name), "--seed", "-1"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (f"{name}: error: argument --seed: expected an integer >= 0 "
                                                 f"(a random seed), got '-1'")


def test_sst_accuracy_from_another_folder(tmp_path):
    """The default data path is beside the repository, not the current folder;
    a missing folder is one line; --seed and --no-progress work."""
    import runpy
    sys.path.insert(0, str(SCRIPTS))
    try:
        mod = runpy.run_path(str(SCRIPTS / "sst_accuracy.py"))
    finally:
        sys.path.remove(str(SCRIPTS))
    assert mod["parse"]([]).data == ROOT.parent / "shared" / "data" / "sst"
    assert mod["parse"](["--seed", "4"]).seeds == [4] and mod["parse"]([]).seeds == [0, 1, 2, 3, 4]
    assert mod["parse"]([]).evals_per_epoch == 1            # selection once per epoch by default
    r = subprocess.run([sys.executable, str(SCRIPTS / "sst_accuracy.py"), "--data", str(tmp_path / "none")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 1 and r.stderr.strip() == (f"sst_accuracy.py: error: no SST folder at "
                                                      f"'{tmp_path / 'none'}'; pass --data DIR")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "train.txt").write_text("(3 (2 a) (3 good)\n")
    (tmp_path / "bad" / "dev.txt").write_text("(3 (2 a) (3 good))\n")
    r = subprocess.run([sys.executable, str(SCRIPTS / "sst_accuracy.py"), "--data", str(tmp_path / "bad")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "train.txt:1:" in r.stderr
    from dynnets.data import samples_dir
    r = subprocess.run([sys.executable, str(SCRIPTS / "sst_accuracy.py"), "--data", str(samples_dir()), "--seed",
                        "3", "--models", "lstm", "--epochs", "1", "--no-progress", "--out", "out"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr == ""                                 # no progress bars or per-epoch lines
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["seeds"] == [3] and [x["seed"] for x in res["runs"]] == [3]


def test_train_tree_rnn_script_non_binary_sentence(tmp_path):
    args = [sys.executable, str(SCRIPTS / "train_tree_rnn.py"), "--max-sentences", "30", "--epochs", "1", "--hidden",
            "4", "--embed-dim", "4", "--no-progress", "--out", str(tmp_path), "(3 (2 a) (2 b) (2 c))"]
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 1 and r.stderr.strip() == (
        "train_tree_rnn.py: error: sentence 1, column 1: this node has 3 children; the model needs binary trees "
        "(two children at every node) (pass --binarize left or --binarize right)")
    assert not list(tmp_path.iterdir())                      # it failed before training
    r = subprocess.run(args + ["--binarize", "right"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((tmp_path / "results.json").read_text())["sentences"][0]["tree"] == "labelled tree"


def test_graph_overhead_no_progress(tmp_path):
    r = script("graph_overhead.py", "--out", str(tmp_path), "--sizes", "1", "--repeats", "1", "--width", "4",
               "--no-plots", "--no-progress")
    assert r.stderr == "" and "| layers |" in r.stdout


# --------------------------------------------------------------------------
# results files
# --------------------------------------------------------------------------


def test_interrupted_compare_keeps_finished_runs(tmp_path, monkeypatch):
    real = ex.run_model
    calls = []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(ex, "run_model", flaky)
    with pytest.raises(KeyboardInterrupt):
        ex.compare_padded_vs_dynamic(out=tmp_path, seeds=[0], epochs=1, embed_dim=4, hidden=4,
                                     variants=("lstm", "bow", "treelstm"), max_sentences=20, progress=False,
                                     workers=0)
    res = json.loads((tmp_path / "results.json").read_text())
    assert [r["kind"] for r in res["runs"]] == ["lstm", "bow"]
    assert [s["label"] for s in res["summary"]] == ["dynamic LSTM (packed)", "bag of words"]


def test_plots_skipped_with_a_note_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ex, "have_matplotlib", lambda: False)
    res = ex.graph_overhead(sizes=(1,), repeats=1, width=4, out=tmp_path, progress=False)
    assert not list(tmp_path.glob("*.png"))
    assert "matplotlib is not installed" in capsys.readouterr().err
    assert sorted(Path(f).name for f in res["files"]) == ["results.json", "results.md"]


def test_demo_tiny_writes_table(tmp_path):
    res = ex.demo(seed=1, epochs=1, out=tmp_path, progress=False, embed_dim=4, hidden=4, max_sentences=30)
    assert [r["kind"] for r in res["runs"]] == ["treelstm", "lstm", "padded-lstm", "bow"]
    md = (tmp_path / "results.md").read_text()
    assert md.count("\n") == 6 and "negation/contrast" in md
    assert json.loads((tmp_path / "results.json").read_text())["seed"] == 1
    pad = res["runs"][2]["padding"]
    assert pad["max_len"] == ex.length_percentile(load_samples()["train"][:30], 95)


def test_demo_claim_tree_lstm_beats_bag_of_words_on_negation_and_contrast():
    """The demo's settings with fewer epochs: the Tree-LSTM is far above chance
    and above the bag of words on the compositional subset."""
    models = tuple(m for m in ex.DEMO_MODELS if m[1] in ("treelstm", "bow"))
    res = ex.demo(seed=0, epochs=5, progress=False, models=models)
    tl, bow = res["runs"]
    assert tl["test"]["root_fine"] > 0.6
    assert tl["test"]["compositional"]["root_fine"] > bow["test"]["compositional"]["root_fine"] + 0.2


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def test_compositional_rule():
    assert ex.is_compositional(parse_tree("(1 (2 it) (1 (2 is) (1 (2 not) (3 good))))"))
    assert ex.is_compositional(parse_tree("(1 (3 good) (1 (2 But) (1 dull)))"))
    assert ex.is_compositional(parse_tree("(1 (2 is) (1 (2 n't) (3 good)))"))
    assert not ex.is_compositional(parse_tree("(3 (2 nothing) (3 good))"))
    mask = ex.compositional_mask(load_samples()["test"])
    assert mask.dtype == bool and 0 < mask.sum() < len(mask)


def test_padding_waste_arithmetic():
    trees = [parse_tree("(2 " + " ".join(f"(2 w{i})" for i in range(n)) + ")") if n > 1 else parse_tree("(2 w)")
             for n in (1, 3, 7)]
    w = ex.padding_waste(trees, max_len=4, batch_size=2)
    # 2 batches x 2 rows x 4 steps = 16 steps; real: 1 + 3 + 4 = 8
    assert w == {"steps": 16, "real_steps": 8, "pad_steps": 8, "pad_fraction": 0.5, "truncated": 1, "n": 3}


def test_tokenize_ptb_style():
    assert ex.tokenize("The film isn't good, but (really) \"fun\".") == [
        "The", "film", "is", "n't", "good", ",", "but", "(", "really", ")", '"', "fun", '"', "."]
    assert ex.tokenize("  ") == []


def _bare(t):
    return t.word if t.is_leaf else "(" + " ".join(_bare(c) for c in t.children) + ")"


@pytest.mark.parametrize("text, tree", [
    ("good", "good"),
    ("it is good .", "((it (is good)) .)"),
    ("good but boring", "(good (but boring))"),
    ("the acting is great, but the script is terrible!",
     "((((the (acting (is great))) ,) (but (the (script (is terrible))))) !)"),
    ("a but b but c", "((a (but b)) (but c))"),
    ("but", "but"),
])
def test_sentence_tree_fallback(text, tree):
    t = ex.sentence_tree(text)
    assert _bare(t) == tree
    assert all(len(n.children) in (0, 2) for n in t.postorder())


def test_read_tree_kinds():
    t, how = ex.read_tree("(3 (2 it) (3 good))")
    assert how == "labelled tree" and t.label == 3
    t, how = ex.read_tree("((it (is good)) .)")
    assert how == "bracketed tree" and _bare(t) == "((it (is good)) .)"
    t, how = ex.read_tree("it is good")
    assert how == "fallback binarisation"
    for bad in ("", "((it is", "(a) (b)"):
        with pytest.raises(ValueError):
            ex.read_tree(bad)


@pytest.mark.parametrize("text, kind, column, fragment", [
    ("(3 (2 it) (9 good))", "label_range", 12, "'9'"),        # a bad label, not an unlabelled tree
    ("(3)", "empty_node", 3, "(3)"),                         # an error, not the word "3"
    ("  (3 (2 it) (3 good)) x", "trailing_text", 23, "'x'"),  # columns count the input as given
    ("((it is", "unbalanced", 2, "not closed"),
    ("(it ())", "empty_node", 5, "empty brackets"),
])
def test_read_tree_errors_name_the_column(text, kind, column, fragment):
    from dynnets.data import TreeParseError
    with pytest.raises(TreeParseError) as e:
        ex.read_tree(text, where="sentence 1")
    assert (e.value.kind, e.value.column, e.value.path) == (kind, column, "sentence 1")
    assert fragment in e.value.reason


def test_read_tree_binary_check_and_binarize():
    from dynnets.data import TreeParseError
    with pytest.raises(TreeParseError) as e:
        ex.read_tree("(3 (2 a) (3 (2 b) (2 c) (2 d)))", binary=True)
    assert (e.value.kind, e.value.column) == ("not_binary", 10) and "3 children" in e.value.reason
    with pytest.raises(TreeParseError) as e:
        ex.read_tree("(it (is very good))", binary=True)          # unlabelled: the bracket's column
    assert (e.value.kind, e.value.column) == ("not_binary", 5)
    with pytest.raises(TreeParseError) as e:
        ex.read_tree("(3 (3 (2 a)) (2 b))", binary=True)          # a unary node
    assert e.value.column == 4 and "1 child;" in e.value.reason
    t, _ = ex.read_tree("(3 (2 a) (3 (2 b) (2 c) (2 d)))", binarize="left")
    assert _bare(t) == "(a ((b c) d))"
    t, _ = ex.read_tree("(3 (3 (2 a)) (2 (2 b) (2 c) (2 d)))", binarize="right", binary=True)
    assert _bare(t) == "(a (b (c d)))" and t.children[0].label == 3    # unary chain kept its top label
    assert ex.read_tree("(3 (2 a) (2 b) (2 c))")[0].children[2].word == "c"   # no check unless asked


def test_node_predictions_follow_the_tree():
    from dynnets.models import build_model
    trees = load_samples()["train"][:5]
    v = Vocabulary.from_trees(trees)
    m = build_model("treelstm", len(v), embed_dim=4, hidden=4, seed=0)
    t = parse_tree("(1 (2 (2 the) (2 film)) (1 (2 is) (1 (2 not) (3 good))))")
    p = ex.node_predictions(m, t, v)
    assert [n["text"] for n in p["nodes"]] == [" ".join(n.words()) for n in t.preorder()]
    assert [n["gold"] for n in p["nodes"]] == [n.label for n in t.preorder()]
    assert m.mode == "level"
    # the per-node (recursive) pass gives the level-batched prediction at the root
    from dynnets.train import predict
    np.testing.assert_allclose(p["nodes"][0]["proba"], p["root"], rtol=1e-6)
    np.testing.assert_allclose(p["root"], predict(m, [t], v)[0], rtol=1e-5)
    assert "not good" in ex.format_node_predictions(p, show_gold=True)
    # spans instead of texts: the same words, and no text unless asked
    lean = ex.node_predictions(m, t, v, gold=False, texts=False)
    assert all("text" not in n and n["gold"] is None for n in lean["nodes"])
    assert [ex.node_text(lean, n) for n in lean["nodes"]] == [n["text"] for n in p["nodes"]]
    assert [(n["start"], n["end"]) for n in lean["nodes"]][:4] == [(0, 5), (0, 2), (0, 1), (1, 2)]
    assert ex.format_node_predictions(lean) == ex.format_node_predictions(p)


def test_compare_without_test_split_reports_dev_only(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev"):
        lines = load_samples()[split][:30]
        (data / f"{split}.txt").write_text("\n".join(str(t) for t in lines) + "\n")
    res = ex.compare_padded_vs_dynamic(data=data, out=tmp_path / "out", seeds=[0], epochs=1, embed_dim=4, hidden=4,
                                       variants=("lstm", "padded-p95"), progress=False, plots=False, workers=0)
    assert res["has_test"] is False and res["eval_split"] == "dev"
    assert "test" not in res["runs"][0] and "test" not in res["summary"][0]
    md = (tmp_path / "out" / "results.md").read_text()
    assert "no test split" in md and "test fine" not in md and "dev negation/contrast" in md
    assert "truncated train / dev" in md and "None" not in md
