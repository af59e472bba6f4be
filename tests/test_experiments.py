"""The experiment scripts (experiments/) in tiny configurations; the library
code they call is tested in test_runs.py, data/test_text.py."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dynnets.plots import figures

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
    assert len(res["runs"]) == 2 * 7 and [r_["seed"] for r_ in res["runs"]][::7] == [0, 1]
    labels = [s["label"] for s in res["summary"]]
    assert len(labels) == 7 and any("(max)" in lab for lab in labels) and any("(median)" in lab for lab in labels)
    for s in res["summary"]:
        assert s["test"]["root_fine"]["n"] == 2 and s["sent_per_s"]["mean"] > 0
        assert len(s["learning_curve"]) == 2 and len(s["by_length"]) == 5
    pad = {s["label"]: s for s in res["summary"]}
    waste = [s["pad_fraction"]["mean"] for s in res["summary"] if s["kind"] == "padded-lstm"]
    assert waste[0] > waste[1] > waste[2] > 0          # max > p95 > median
    bucketed = next(s for s in res["summary"] if s["kind"] == "padded-bucketed")
    assert 0 < bucketed["pad_fraction"]["mean"] < waste[1] and bucketed["truncated_train"] == 0
    assert all(s["pad_fraction"]["mean"] == 0 for s in pad.values() if not s["kind"].startswith("padded"))
    md = (out / "results.md").read_text()
    assert "| model | epoch s |" in md and "by sentence length" in md
    if figures.have_matplotlib():
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
    if figures.have_matplotlib():
        assert (out / "graph_overhead.png").stat().st_size > 1000


@pytest.mark.parametrize("name", ["compare_padded_vs_dynamic.py", "train_tree_rnn.py", "graph_overhead.py",
                                  "sst_accuracy.py", "sweep.py", "execution_strategies.py"])
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
                                  "sst_accuracy.py", "execution_strategies.py"])
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
    assert r.returncode == 0 and "| layers |" in r.stdout
    # no progress output; where Graphviz is missing, only its one-line note per graph picture
    notes = [ln for ln in r.stderr.splitlines() if ln]
    if shutil.which("dot"):
        assert notes == []
    else:
        assert notes and all(ln.startswith("Graphviz's 'dot' is not installed") for ln in notes), r.stderr


# --------------------------------------------------------------------------
# graph_overhead.py's code, in process
# --------------------------------------------------------------------------


def test_plots_skipped_with_a_note_without_matplotlib(tmp_path, monkeypatch, capsys):
    import runpy
    monkeypatch.syspath_prepend(str(SCRIPTS))
    script_mod = runpy.run_path(str(SCRIPTS / "graph_overhead.py"))
    monkeypatch.setattr(figures, "have_matplotlib", lambda: False)
    res = script_mod["graph_overhead"](sizes=(1,), repeats=1, width=4, out=tmp_path, progress=False)
    assert not list(tmp_path.glob("*.png"))
    assert "matplotlib is not installed" in capsys.readouterr().err
    assert sorted(Path(f).name for f in res["files"]) == ["results.json", "results.md"]


def test_execution_strategies_tiny(tmp_path):
    """Every dynnets strategy on the package's sample trees: the same first
    loss, positive speeds, code lines counted, the table and the bar chart."""
    out = tmp_path / "es"
    data = ROOT / "dynnets" / "data" / "samples"
    names = "dynnets recursive,dynnets level,dynnets static"
    script("execution_strategies.py", "--data", str(data), "--out", str(out), "--trees", "12", "--batch-size", "4",
           "--eval-batch", "4", "--embed", "8", "--hidden", "4", "--repeats", "1", "--strategies", names,
           timeout=120)
    res = json.loads((out / "results.json").read_text())
    rows = {r["strategy"]: r for r in res["rows"]}
    assert list(rows) == names.split(",")
    for s in ("dynnets recursive", "dynnets static"):
        assert rows[s]["first_loss"] == pytest.approx(rows["dynnets level"]["first_loss"], rel=1e-5)
    for r in rows.values():
        assert r["train_sent_per_s"] > 0 and r["eval_sent_per_s"] > 0 and 5 <= r["code_lines"] <= 40
    assert "| dynnets level |" in (out / "results.md").read_text()
    assert (out / "execution_strategies.svg").read_text().count('class="bar"') == 6


def test_execution_strategies_code_lines():
    import runpy
    sys.path.insert(0, str(SCRIPTS))
    try:
        mod = runpy.run_path(str(SCRIPTS / "execution_strategies.py"))
    finally:
        sys.path.remove(str(SCRIPTS))
    src = (
        "class M:\n"
        "    def f(self, xs, ab=None):\n"
        "        \"\"\"A docstring\n"
        "        of two lines.\"\"\"\n"
        "        out = []\n"
        "\n"
        "        # a comment\n"
        "        for x in xs:\n"
        "            if ab is not None:\n"
        "                ab.tag = x\n"
        "            out.append(x)\n"
        "        return out\n"
        "\n"
        "    def g(self):\n"
        "        return 1\n")
    assert mod["count_code_lines"](src, "M.f") == 5          # def, out = [], for, append, return
    assert mod["count_code_lines"](src, "M.g") == 2
    with pytest.raises(LookupError, match="M.nope not found"):
        mod["count_code_lines"](src, "M.nope")
    for files, _ in mod["CODE"].values():      # every counted function exists (a cell may be def + return)
        for f, q in files:
            assert mod["code_lines"](f, q) >= 2


@pytest.mark.parametrize("name", sorted(p.name for p in SCRIPTS.glob("*.py") if not p.name.startswith("_")))
def test_every_script_takes_a_seed(name, monkeypatch, capsys):
    import runpy
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(SCRIPTS / name), run_name="__main__")
    assert exit_.value.code == 0
    assert "--seed " in capsys.readouterr().out


def test_check_tree_layout_same_seed_same_numbers(monkeypatch, capsys):
    """The layout check writes random probabilities in the boxes (--seed): the
    same seed gives the same report (the widths come from the boxes without text)."""
    import runpy
    from dynnets.data import samples_dir
    monkeypatch.syspath_prepend(str(SCRIPTS))
    main = runpy.run_path(str(SCRIPTS / "check_tree_layout.py"))["main"]
    import re
    reports = []
    for seed in ("5", "5"):
        assert main(["--data", str(samples_dir()), "--split", "dev", "--seed", seed]) == 0
        reports.append(re.sub(r" \([0-9.]+ s\)", "", capsys.readouterr().out))       # all but the time taken
    assert reports[0] == reports[1] and "150 trees" in reports[0] and "0 layouts break a rule" in reports[0]


def test_train_tree_rnn_max_sentences_zero_names_the_flag(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPTS / "train_tree_rnn.py"), "--max-sentences", "0"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == ("train_tree_rnn.py: error: argument --max-sentences: expected a "
                                                 "positive integer, got '0'")


def test_compare_script_cnn_and_transformer_rows(tmp_path):
    """issue 25: the CNN padded and packed compute the same function (same
    batches: the same accuracy); padding is counted per execution."""
    out = tmp_path / "cmp"
    script("compare_padded_vs_dynamic.py", "--out", str(out), "--max-sentences", "40", "--epochs", "1",
           "--seeds", "1", "--hidden", "8", "--embed-dim", "8", "--no-progress", "--no-plots", "--workers", "0",
           "--models", "cnn-padded", "cnn", "transformer-padded-max", "transformer-bucketed", "transformer")
    res = json.loads((out / "results.json").read_text())
    runs = {r["label"]: r for r in res["runs"]}
    assert len(runs) == 5
    cnn_pad, cnn = (runs[k] for k in runs if k.startswith("CNN"))
    assert cnn_pad["test"]["root_fine"] == cnn["test"]["root_fine"]
    assert cnn_pad["padding"]["pad_fraction"] > cnn["padding"]["pad_fraction"] > 0      # margins only when packed
    tmax, tbuck, tpack = (runs[k]["padding"]["pad_fraction"] for k in runs if k.startswith("Transformer"))
    assert tmax > tbuck > tpack == 0
    assert all(r["padding"]["real_steps"] == cnn["padding"]["real_steps"] for r in runs.values())


def test_bench_transformer_plot_labels_padding_and_writes_atomically(tmp_path, monkeypatch):
    # benchmarks/_common, not tests/parity/_common (the same module name) if a parity test ran first
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.delitem(sys.modules, "_common", raising=False)
    monkeypatch.delitem(sys.modules, "bench_transformer", raising=False)
    import bench_transformer as bt
    rows = [["transformer", "dynnets packed", "bucketed", "42,451", "99,571", "1.49x", "1.39x", "1.52x"],
            ["transformer", "dynnets padded-to-max", "shuffled", "13,893", "39,565", "0.76x", "0.89x", "0.74x"],
            ["transformer", "torch padded", "shuffled", "18,342", "44,229", "1.00x", "1.00x", "-"],
            ["transformer", "torch nested (eval)", "shuffled", "-", "53,778", "-", "-", "1.00x"],
            ["cnn", "dynnets cnn padded", "bucketed", "25,093", "121,458", "0.60x", "0.81x", "-"]]
    padding = {"shuffled": 0.509, "bucketed": 0.029, "max": 0.612}
    labels, train, evals = bt.plot_rows(rows, padding)
    assert labels == ["Transformer: dynnets packed, bucketed batches, 0% padding",
                      "Transformer: dynnets padded-to-max, shuffled batches, 61% padding",
                      "Transformer: torch padded, shuffled batches, 51% padding",
                      "CNN: dynnets padded, bucketed batches, 3% padding"]       # nested (eval only) left out
    assert train == [42451.0, 13893.0, 18342.0, 25093.0] and evals == [99571.0, 39565.0, 44229.0, 121458.0]
    out = tmp_path / "tok.svg"
    out.write_text("old")
    bt.write_plot(str(out), rows, padding, 20187, 25)
    svg = out.read_text()
    assert svg.startswith("<svg") and svg.count('class="bar"') == 8 and 'data-value="121458"' in svg
    assert [p.name for p in tmp_path.iterdir()] == ["tok.svg"]             # no temporary file left behind
