"""The ``dynnets`` command: help, one-line errors, train -> eval -> predict."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dynnets.cli import main
from dynnets.data import load_samples

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--epochs", "1", "--hidden", "8", "--embed-dim", "8", "--no-progress"]


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, status, *fragments):
    assert code == status, (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert "error:" in lines[0]
    for f in fragments:
        assert f in lines[0], (f, lines[0])


@pytest.mark.parametrize("cmd, options", [
    ([], ["demo", "train", "eval", "predict", "compare"]),
    (["demo"], ["--seed", "--epochs", "--out", "--hidden", "negation"]),
    (["train"], ["--model", "--data", "--out", "--seed", "--epochs", "--lr", "--optimizer", "--hidden", "--mode",
                 "--max-len", "--patience", "padded-lstm", "bow", "treelstm"]),
    (["eval"], ["--checkpoint", "--data", "--split", "--json"]),
    (["predict"], ["--checkpoint", "--nodes", "SENTENCE", "binarised"]),
    (["compare"], ["--data", "--out", "--seeds", "--seed", "--epochs", "--models", "--no-plots"]),
])
def test_help_of_every_command(cmd, options, capsys):
    code, out, err = run(cmd + ["--help"], capsys)
    assert code == 0
    assert out.startswith("usage: dynnets" + "".join(" " + c for c in cmd))
    for o in options:
        assert o in out, o


def test_no_command_prints_help(capsys):
    code, out, _ = run([], capsys)
    assert code == 2 and "usage: dynnets" in out


@pytest.mark.parametrize("argv, status, fragments", [
    (["train", "--model", "nope"], 2, ["--model", "nope"]),
    (["train"], 2, ["--model"]),
    (["train", "--model", "lstm", "--epochs", "0"], 2, ["--epochs", "positive integer"]),
    (["train", "--model", "lstm", "--lr", "abc"], 2, ["--lr"]),
    (["train", "--model", "lstm", "--mode", "level"], 2, ["--mode", "lstm"]),
    (["train", "--model", "padded-lstm", "--dropout", "0.1"], 2, ["--dropout", "padded-lstm"]),
    (["train", "--model", "padded-lstm", "--clip-norm", "1"], 2, ["--clip-norm", "padded-lstm"]),
    (["train", "--model", "lstm", "--data", "/no/such/dir"], 2, ["/no/such/dir", "does not exist"]),
    (["eval", "--checkpoint", "/no/such/file.npz"], 2, ["/no/such/file.npz"]),
    (["predict", "--checkpoint", "/no/such/file.npz", "good"], 2, ["/no/such/file.npz"]),
    (["compare", "--models", "bogus"], 2, ["bogus"]),
    (["frobnicate"], 2, ["frobnicate"]),
])
def test_bad_arguments_give_one_line(argv, status, fragments, capsys):
    code, _, err = run(argv, capsys)
    assert_one_line_error(code, err, status, *fragments)


def test_data_folder_without_splits_is_one_line(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run(["train", "--model", "lstm", "--data", str(tmp_path)] + TINY, capsys)
    assert_one_line_error(code, err, 1, "train.txt", "notes.txt")


def test_malformed_treebank_is_one_line_with_position(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("(3 (2 a) (3 good))\n(2 (2 broken\n")
    (tmp_path / "dev.txt").write_text("(3 (2 a) (3 good))\n")
    code, _, err = run(["train", "--model", "lstm", "--data", str(tmp_path)] + TINY, capsys)
    assert_one_line_error(code, err, 1, "train.txt", "line 2")


def test_garbage_checkpoint_is_one_line(tmp_path, capsys):
    bad = tmp_path / "best.npz"
    bad.write_bytes(b"this is not a checkpoint")
    code, _, err = run(["eval", "--checkpoint", str(bad)], capsys)
    assert_one_line_error(code, err, 1, str(bad))


def test_subprocess_error_has_no_traceback():
    r = subprocess.run([sys.executable, "-m", "dynnets", "train", "--model", "nope"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("dynnets train: error:")


@pytest.fixture(scope="module")
def tree_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("treelstm")
    assert main(["train", "--model", "treelstm", "--out", str(out), "--seed", "3"] + TINY) == 0
    return out


def test_train_writes_checkpoint_log_and_metrics(tree_run):
    for name in ("best.npz", "log.jsonl", "config.json", "metrics.json"):
        assert (tree_run / name).is_file(), name
    m = json.loads((tree_run / "metrics.json").read_text())
    assert m["model"] == "treelstm" and m["config"]["hidden"] == 8 and m["config"]["seed"] == 3
    assert m["test"]["n"] == 186 and 0.0 <= m["test"]["root_fine"] <= 1.0
    assert m["test"]["compositional"]["n"] > 0
    assert len((tree_run / "log.jsonl").read_text().splitlines()) == 1


def test_train_is_deterministic(tree_run, tmp_path):
    assert main(["train", "--model", "treelstm", "--out", str(tmp_path), "--seed", "3"] + TINY) == 0
    a = json.loads((tree_run / "metrics.json").read_text())
    b = json.loads((tmp_path / "metrics.json").read_text())
    assert a["test"] == b["test"] and a["dev"] == b["dev"]


def test_eval_prints_the_metrics_table(tree_run, capsys):
    code, out, err = run(["eval", "--checkpoint", str(tree_run / "best.npz")], capsys)
    assert code == 0, err
    assert "| test | 186 |" in out
    assert "root fine %" in out and "by sentence length" in out and "confusion matrix" in out
    m = json.loads((tree_run / "metrics.json").read_text())
    assert f"{100 * m['test']['root_fine']:.1f}" in out


def test_eval_split_selection_and_json(tree_run, capsys):
    code, out, _ = run(["eval", "--checkpoint", str(tree_run / "best.npz"), "--split", "dev", "--json"], capsys)
    assert code == 0
    rep = json.loads(out)
    assert list(rep) == ["dev"] and rep["dev"]["n"] == 150
    code, out, _ = run(["eval", "--checkpoint", str(tree_run / "best.npz"), "--split", "all", "--json"], capsys)
    assert list(json.loads(out)) == ["train", "dev", "test"]
    code, small, _ = run(["eval", "--checkpoint", str(tree_run / "best.npz"), "--split", "all", "--json",
                          "--batch-size", "7"], capsys)
    assert code == 0 and json.loads(small) == json.loads(out)       # batching does not change the metrics


def test_eval_missing_split_is_one_line(tree_run, tmp_path, capsys):
    (tmp_path / "dev.txt").write_text("(3 (2 a) (3 good))\n")
    code, _, err = run(["eval", "--checkpoint", str(tree_run / "best.npz"), "--data", str(tmp_path),
                        "--split", "test"], capsys)
    assert_one_line_error(code, err, 1, "test.txt")


def test_predict_sentence_and_nodes(tree_run, capsys):
    code, out, err = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "--nodes",
                          "The film isn't good, but the acting is great.", "((it (is (not good))) .)"], capsys)
    assert code == 0, err
    assert "tree (fallback binarisation): ((((The (film (is (n't good)))) ,) (but (the (acting (is great))))) .)" in out
    assert "tree (bracketed tree): ((it (is (not good))) .)" in out
    assert out.count("predicted: ") == 2 and out.count("probabilities: ") == 2
    assert "unknown words: n't, acting" in out
    # one line per node: 9 nodes for "it is not good ."
    block = out.split("tree (bracketed tree)")[1].split("nodes (class, name, probability, words):")[1]
    assert len([ln for ln in block.splitlines() if ln.strip()]) == 9


def test_predict_json_probabilities(tree_run, capsys):
    code, out, _ = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "--json", "--nodes", "it is good ."],
                       capsys)
    assert code == 0
    (r,) = json.loads(out)
    assert len(r["root"]) == 5 and abs(sum(r["root"]) - 1) < 1e-6
    assert [n["text"] for n in r["nodes"]][:2] == ["it is good .", "it is good"]


def test_predict_bad_tree_is_one_line(tree_run, capsys):
    code, _, err = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "((it is"], capsys)
    assert_one_line_error(code, err, 1, "bracket")


@pytest.mark.parametrize("kind, extra", [("lstm", []), ("padded-lstm", ["--max-len", "p95"]), ("bow", [])])
def test_sequence_models_train_and_predict(kind, extra, tmp_path, capsys):
    code, out, err = run(["train", "--model", kind, "--out", str(tmp_path), "--optimizer", "adam", "--lr", "0.01"]
                         + TINY + extra, capsys)
    assert code == 0, err
    m = json.loads((tmp_path / "metrics.json").read_text())
    if kind == "padded-lstm":
        lengths = [len(t.leaves()) for t in load_samples()["train"]]
        assert m["config"]["max_len"] == int(np.ceil(np.percentile(lengths, 95)))
        assert m["config"]["optimizer"] == "adam" and m["config"]["lr"] == 0.01
    code, out, err = run(["predict", "--checkpoint", str(tmp_path / "best.npz"), "--nodes", "it is not good"], capsys)
    assert code == 0, err
    assert "predicted: " in out and "not a tree model" in out


def test_predict_very_long_sentence(tree_run, capsys):
    long = " ".join(["the film is good and"] * 300) + " fine ."       # 1502 tokens, a 1500-deep tree
    code, out, err = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "--nodes", long], capsys)
    assert code == 0, err
    assert out.count("\n") > 3000 and "predicted: " in out
