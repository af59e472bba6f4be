"""The ``dynnets`` command: help, one-line errors, train -> eval -> predict."""
import json
import shutil
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
    ([], ["demo", "train", "eval", "predict", "compare", "sweep"]),
    (["demo"], ["--seed", "--epochs", "--out", "--hidden", "negation"]),
    (["train"], ["--model", "--data", "--out", "--seed", "--epochs", "--lr", "--optimizer", "--hidden", "--mode",
                 "--max-len", "--patience", "padded-lstm", "bow", "treelstm", "--phrases", "--max-norm"]),
    (["eval"], ["--checkpoint", "--data", "--split", "--json"]),
    (["predict"], ["--checkpoint", "--nodes", "SENTENCE", "binarised"]),
    (["compare"], ["--data", "--out", "--seeds", "--seed", "--epochs", "--models", "--no-plots", "--workers",
                   "--scheduler"]),
    (["sweep"], ["GRID", "--models", "--seeds", "--set", "--out", "--workers", "--scheduler", "--retries",
                 "--skip-failed", "DASK_SCHEDULER_ADDRESS"]),
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
    (["train", "--model", "padded-lstm", "--mode", "level"], 2, ["--mode", "padded-lstm"]),
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


def test_train_mode_autobatch_matches_level(tree_run, tmp_path):
    """--mode autobatch trains the same model (the recursive code under
    dn.autobatch) to the same metrics as the default level mode."""
    assert main(["train", "--model", "treelstm", "--mode", "autobatch", "--out", str(tmp_path), "--seed", "3"]
                + TINY) == 0
    a = json.loads((tree_run / "metrics.json").read_text())
    b = json.loads((tmp_path / "metrics.json").read_text())
    assert b["config"]["mode"] == "autobatch"
    assert a["test"]["root_fine"] == b["test"]["root_fine"] and a["dev"]["all_nodes"] == b["dev"]["all_nodes"]


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


# --------------------------------------------------------------------------
# run folders
# --------------------------------------------------------------------------


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_train_refuses_to_reuse_a_run_folder_even_the_default(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["train", "--model", "bow"] + TINY, capsys)
    assert code == 0, err
    first = _snapshot(tmp_path / "runs" / "bow")
    assert sorted(first) == ["best.npz", "config.json", "log.jsonl", "metrics.json"]
    code, _, err = run(["train", "--model", "bow", "--seed", "1"] + TINY, capsys)
    assert_one_line_error(code, err, 2, "--out 'runs/bow' already holds a run", "--overwrite")
    assert _snapshot(tmp_path / "runs" / "bow") == first
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["bow"]


def test_overwrite_replaces_a_run_whole_and_only_once_the_new_run_has_a_checkpoint(tree_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(tree_run, out)
    before = _snapshot(out)
    # a run that fails (the loss diverges to NaN in epoch 1) leaves the old folder as it was
    with np.errstate(all="ignore"):
        code, _, err = run(["train", "--model", "treelstm", "--out", str(out), "--overwrite", "--optimizer", "sgd",
                            "--lr", "1e30"] + TINY, capsys)
    assert_one_line_error(code, err, 1, "lower the learning rate")
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]       # its temporary folder is gone
    # a run that succeeds replaces every file
    code, printed, err = run(["train", "--model", "treelstm", "--out", str(out), "--overwrite", "--seed", "5",
                              "--epochs", "2", "--hidden", "7", "--embed-dim", "8", "--no-progress"], capsys)
    assert code == 0, err
    after = _snapshot(out)
    assert sorted(after) == sorted(before) and all(after[k] != before[k] for k in before)
    m = json.loads((out / "metrics.json").read_text())
    assert m["config"]["hidden"] == 7 and m["config"]["seed"] == 5
    assert len((out / "log.jsonl").read_text().splitlines()) == m["epochs"] == 2
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["train"]["seed"] == 5 and "out_dir" not in cfg["train"]
    assert f"checkpoint: {out / 'best.npz'}" in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    code, _, err = run(["eval", "--checkpoint", str(out / "best.npz"), "--json"], capsys)
    assert code == 0, err


def test_overwrite_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = run(["train", "--model", "bow", "--out", str(tmp_path), "--overwrite"] + TINY, capsys)
    assert_one_line_error(code, err, 2, "notes.txt", "not a dynnets run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_train_into_an_empty_folder(tmp_path, capsys):
    code, _, err = run(["train", "--model", "bow", "--out", str(tmp_path)] + TINY, capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.npz", "config.json", "log.jsonl", "metrics.json"]


# --------------------------------------------------------------------------
# input files and sentences
# --------------------------------------------------------------------------


def _treebank(tmp_path, train_lines, dev_lines=("(3 (2 a) (3 good))",)):
    d = tmp_path / "data"
    d.mkdir()
    (d / "train.txt").write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in train_lines) + b"\n")
    (d / "dev.txt").write_text("\n".join(dev_lines) + "\n")
    return d


def test_undecodable_bytes_name_file_line_column(tmp_path, capsys):
    d = _treebank(tmp_path, ["(3 (2 a) (3 good))", "", "(1 (2 a) (1 caf\xe9))".encode("latin-1")])
    code, _, err = run(["train", "--model", "lstm", "--data", str(d)] + TINY, capsys)
    assert_one_line_error(code, err, 1, f"{d / 'train.txt'}:3:16:", "byte 0xe9", "not valid UTF-8")


def test_non_binary_tree_names_file_line_column_and_binarize_fixes_it(tmp_path, tree_run, capsys):
    d = _treebank(tmp_path, ["(3 (2 a) (3 good))", "", "(1 (2 a) (1 (2 not) (2 very) (3 good)))"])
    code, _, err = run(["train", "--model", "treelstm", "--data", str(d), "--out", str(tmp_path / "r")] + TINY, capsys)
    assert_one_line_error(code, err, 1, f"{d / 'train.txt'}:3:10:", "3 children", "--binarize left")
    assert not (tmp_path / "r").exists()
    for how in ("left", "right"):
        code, _, err = run(["train", "--model", "treelstm", "--data", str(d), "--out", str(tmp_path / how),
                            "--binarize", how] + TINY, capsys)
        assert code == 0, err
        assert json.loads((tmp_path / how / "metrics.json").read_text())["binarize"] == how
    code, _, err = run(["train", "--model", "childsum", "--data", str(d), "--out", str(tmp_path / "cs")] + TINY,
                       capsys)
    assert code == 0, err                           # the child-sum Tree-LSTM takes any tree
    (d / "dev.txt").write_text("(3 (2 a) (3 good))\n(3 (2 a) (2 b) (3 c))\n")
    ck = str(tree_run / "best.npz")
    code, _, err = run(["eval", "--checkpoint", ck, "--data", str(d), "--split", "dev"], capsys)
    assert_one_line_error(code, err, 1, f"{d / 'dev.txt'}:2:1:", "3 children", "--binarize")
    code, out, err = run(["eval", "--checkpoint", ck, "--data", str(d), "--split", "dev", "--json", "--binarize",
                          "left"], capsys)
    assert code == 0 and json.loads(out)["dev"]["n"] == 2, err


@pytest.mark.parametrize("sentence, fragments", [
    ("(3 (2 it) (9 good))", ["sentence 1, column 12:", "'9'", "0..4"]),
    ("(3)", ["sentence 1, column 3:", "empty node '(3)'"]),
    ("(3 (2 a) (2 b) (2 c))", ["sentence 1, column 1:", "3 children", "--binarize"]),
    ("((a b c) d)", ["sentence 1, column 2:", "3 children", "--binarize"]),
])
def test_predict_bad_trees_name_the_column(tree_run, capsys, sentence, fragments):
    code, _, err = run(["predict", "--checkpoint", str(tree_run / "best.npz"), sentence], capsys)
    assert_one_line_error(code, err, 1, *fragments)


def test_predict_binarize(tree_run, capsys):
    code, out, err = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "--binarize", "right",
                          "(3 (2 a) (2 b) (2 c))", "((a b c) d)"], capsys)
    assert code == 0, err
    assert "tree (labelled tree): (a (b c))" in out and "tree (bracketed tree): ((a (b c)) d)" in out


def test_predict_json_gold_is_null_for_unlabelled_input(tree_run, capsys):
    code, out, err = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "--json", "--nodes",
                          "((it (is good)) .)", "it is good .", "(3 (2 it) (4 (2 is) (4 good)))"], capsys)
    assert code == 0, err
    bracketed, plain, labelled = json.loads(out)
    assert {n["gold"] for n in bracketed["nodes"]} == {None} == {n["gold"] for n in plain["nodes"]}
    assert [n["gold"] for n in labelled["nodes"]] == [3, 2, 4, 2, 4]
    assert [n["text"] for n in labelled["nodes"]] == ["it is good", "it", "is good", "is", "good"]
    code, out, _ = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "--json", "it is good ."], capsys)
    assert json.loads(out)[0]["nodes"] is None                  # per-node output with --nodes only


def test_predict_is_linear_in_the_sentence_length(tree_run, capsys):
    """Without --nodes, predict's memory grows linearly with the sentence: the
    peak traced allocation of a 4x longer (and 4x deeper) sentence is at most
    about 4x (gathering every node's words, it was 12x)."""
    import tracemalloc

    def peak(n_words):
        sentence = " ".join(["the film is good and"] * (n_words // 5))
        tracemalloc.start()
        try:
            code, out, err = run(["predict", "--checkpoint", str(tree_run / "best.npz"), "--json", sentence], capsys)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert code == 0, err
    peak(200)                                           # one-time allocations (caches, kernels)
    small, large = peak(1000), peak(4000)
    assert large < 5 * small, (small, large)


# --------------------------------------------------------------------------
# flags, checkpoints, pipes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("argv, fragments", [
    (["train", "--model", "lstm", "--seed", "-1"], ["--seed", "-1", "integer >= 0"]),
    (["demo", "--seed", "-3"], ["--seed", "-3"]),
    (["compare", "--seed", "x"], ["--seed", "'x'"]),
    (["train", "--model", "lstm", "--lr", "inf"], ["--lr", "'inf'", "finite"]),
    (["train", "--model", "lstm", "--lr", "nan"], ["--lr", "'nan'"]),
    (["train", "--model", "lstm", "--weight-decay", "inf"], ["--weight-decay", "'inf'"]),
    (["train", "--model", "lstm", "--max-seconds", "inf"], ["--max-seconds", "'inf'"]),
])
def test_bad_numbers_name_the_flag(argv, fragments, capsys):
    code, _, err = run(argv, capsys)
    assert_one_line_error(code, err, 2, *fragments)


@pytest.mark.parametrize("content", [b'{"model": "treelstm"}', b"\x00\x01 garbage", None])
def test_non_checkpoints_are_named_so(tmp_path, capsys, content):
    bad = tmp_path / "best.npz"
    if content is None:
        np.savez(bad, weights=np.zeros(3))              # an .npz, but not ours
    else:
        bad.write_bytes(content)
    for cmd in (["eval", "--checkpoint", str(bad)], ["predict", "--checkpoint", str(bad), "good"]):
        code, _, err = run(cmd, capsys)
        assert_one_line_error(code, err, 1, str(bad), "is not a dynnets checkpoint")
        assert "pickle" not in err


def test_eval_into_a_closed_pipe_exits_quietly(tree_run):
    """`dynnets eval ... | head`: the reader has gone before the output is written."""
    import os
    r, w = os.pipe()
    os.close(r)                                          # nobody will read: every write fails with EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "dynnets", "eval", "--checkpoint", str(tree_run / "best.npz")],
                           stdout=w, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(w)
    assert p.stderr == "" and p.returncode == 141


# --------------------------------------------------------------------------
# empty and missing data
# --------------------------------------------------------------------------

GOOD_TREE = "(3 (2 a) (3 good))\n"


def _folder(tmp_path, **splits):
    d = tmp_path / "data"
    d.mkdir()
    for name, text in splits.items():
        (d / f"{name}.txt").write_text(text)
    return d


@pytest.mark.parametrize("train, dev, bad, why", [
    ("", GOOD_TREE, "train", "the file is empty"),
    (GOOD_TREE, "", "dev", "the file is empty"),
    ("\n   \n", GOOD_TREE, "train", "its 2 lines are blank"),
    (GOOD_TREE, "\n", "dev", "its 1 line is blank"),
])
@pytest.mark.parametrize("kind", ["bow", "treelstm"])
def test_train_on_a_split_with_no_trees_names_the_file(kind, train, dev, bad, why, tmp_path, capsys):
    d = _folder(tmp_path, train=train, dev=dev)
    code, out, err = run(["train", "--model", kind, "--data", str(d), "--out", str(tmp_path / "r")] + TINY, capsys)
    assert_one_line_error(code, err, 1)
    assert err.strip() == (f"dynnets train: error: {d / (bad + '.txt')}: no trees in this file ({why}); an SST "
                           f"split file holds one tree per line")
    assert out == "" and not (tmp_path / "r").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_eval_reads_only_the_splits_it_evaluates(tree_run, tmp_path, capsys):
    ck = str(tree_run / "best.npz")
    d = _folder(tmp_path, train="", dev=GOOD_TREE, test="\n\n")
    code, _, err = run(["eval", "--checkpoint", ck, "--data", str(d)], capsys)          # test.txt by default
    assert_one_line_error(code, err, 1, f"{d / 'test.txt'}: no trees in this file (its 2 lines are blank)")
    code, _, err = run(["eval", "--checkpoint", ck, "--data", str(d), "--split", "all"], capsys)
    assert_one_line_error(code, err, 1, f"{d / 'train.txt'}: no trees in this file (the file is empty)")
    code, out, err = run(["eval", "--checkpoint", ck, "--data", str(d), "--split", "dev", "--json"], capsys)
    assert code == 0 and json.loads(out)["dev"]["n"] == 1, err      # the empty train.txt is not read


def test_eval_does_not_fall_back_to_the_training_split(tree_run, tmp_path, capsys):
    d = _folder(tmp_path, train=GOOD_TREE)
    code, out, err = run(["eval", "--checkpoint", str(tree_run / "best.npz"), "--data", str(d)], capsys)
    assert_one_line_error(code, err, 1, "has neither test.txt nor dev.txt (found: train.txt)", "--split train")
    assert out == ""
    code, out, err = run(["eval", "--checkpoint", str(tree_run / "best.npz"), "--data", str(d), "--split", "train",
                          "--json"], capsys)
    assert code == 0 and json.loads(out)["train"]["n"] == 1, err


@pytest.mark.parametrize("splits, fragments", [
    ({"train": GOOD_TREE}, ["has no dev.txt"]),
    ({"dev": GOOD_TREE}, ["has no train.txt"]),
])
def test_train_names_a_missing_split(splits, fragments, tmp_path, capsys):
    d = _folder(tmp_path, **splits)
    code, _, err = run(["train", "--model", "bow", "--data", str(d), "--out", str(tmp_path / "r")] + TINY, capsys)
    assert_one_line_error(code, err, 1, str(d), *fragments)


@pytest.mark.parametrize("argv", [["compare", "--max-sentences", "0"], ["sweep", "--max-sentences", "0"]])
def test_max_sentences_zero_names_the_flag(argv, tmp_path, capsys):
    code, _, err = run(argv + ["--out", str(tmp_path / "o")], capsys)
    assert code in (1, 2)
    assert_one_line_error(code, err, code, "--max-sentences", "positive integer")
    assert not (tmp_path / "o").exists()


def test_bom_and_crlf_tree_files_train_as_plain_ones(tmp_path, capsys):
    """A treebank saved by a Windows editor (a UTF-8 byte-order mark, CRLF line
    ends) trains to the same numbers as the same trees with LF ends."""
    samples = load_samples(splits=["train", "dev"])
    results = []
    for name, bom, end in (("plain", b"", b"\n"), ("windows", b"\xef\xbb\xbf", b"\r\n")):
        d = tmp_path / name
        d.mkdir()
        for split, trees in samples.items():
            (d / f"{split}.txt").write_bytes(bom + end.join(str(t).encode() for t in trees[:120]) + end)
        code, _, err = run(["train", "--model", "treelstm", "--data", str(d), "--out", str(tmp_path / f"r-{name}")]
                           + TINY, capsys)
        assert code == 0, err
        results.append(json.loads((tmp_path / f"r-{name}" / "metrics.json").read_text())["dev"])
    assert results[0] == results[1] and results[0]["n"] == 120


def test_train_and_evaluate_name_an_empty_list():
    """The Python API behind the commands: an empty split is a ValueError that names it, not numpy's."""
    from dynnets.data import Vocabulary
    from dynnets.models import build_model
    from dynnets.train import TrainConfig, evaluate, train
    trees = load_samples(splits=["dev"])["dev"][:20]
    vocab = Vocabulary.from_trees(trees)
    model = build_model("treelstm", len(vocab), embed_dim=4, hidden=4, seed=0)
    cfg = TrainConfig(epochs=1, progress=False)
    with pytest.raises(ValueError, match=r"^train: train_trees is empty \(nothing to train on\)"):
        train(model, [], trees, vocab, cfg)
    with pytest.raises(ValueError, match=r"^train: dev_trees is empty \(the best epoch is selected on dev\)"):
        train(model, trees, [], vocab, cfg)
    with pytest.raises(ValueError, match=r"^evaluate: trees is empty"):
        evaluate(model, [], vocab)


# --------------------------------------------------------------------------
# diverging runs and diverged checkpoints: no numpy warning reaches the user
# --------------------------------------------------------------------------


def test_a_diverging_run_prints_one_line_and_no_numpy_warning(tmp_path):
    r = subprocess.run([sys.executable, "-m", "dynnets", "train", "--model", "bow", "--lr", "1e8", "--optimizer",
                        "sgd", "--out", str(tmp_path / "r")] + TINY, capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 1
    assert r.stderr.startswith("dynnets train: error: train: the loss became ")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Warning" not in r.stderr and not (tmp_path / "r").exists()


def test_the_command_scope_does_not_leak_into_the_library(recwarn):
    """quiet_numpy covers a command only: afterwards numpy warns as before."""
    from dynnets.cli import quiet_numpy
    with quiet_numpy():
        np.array([1e308]) * 10
    assert len(recwarn) == 0
    with pytest.warns(RuntimeWarning, match="overflow"):
        np.array([1e308]) * 10


@pytest.fixture(scope="module")
def diverged_checkpoint(tmp_path_factory):
    from dynnets.data import Vocabulary
    from dynnets.models import build_model
    from dynnets.train import save_checkpoint
    vocab = Vocabulary.from_trees(load_samples()["train"])
    model = build_model("treelstm", len(vocab), embed_dim=8, hidden=8, seed=0)
    state = model.state_dict()
    name = sorted(state)[0]
    state[name] = np.full_like(state[name], np.inf)
    model.load_state_dict(state)
    path = tmp_path_factory.mktemp("diverged") / "best.npz"
    save_checkpoint(path, model, vocab)
    return path, name


@pytest.mark.parametrize("cmd", [["eval"], ["predict", "it is good ."], ["eval", "--split", "all", "--json"]])
def test_a_checkpoint_with_nan_or_inf_weights_is_refused(diverged_checkpoint, cmd, recwarn, capsys):
    path, name = diverged_checkpoint
    code, out, err = run([cmd[0], "--checkpoint", str(path), *cmd[1:]], capsys)
    assert_one_line_error(code, err, 1, f"checkpoint '{path}' has NaN or inf in its weights ({name!r})", "diverged")
    assert out == "" and not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# --------------------------------------------------------------------------
# predict --json: the sentence's prediction at the top level of every record
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bow_checkpoint(tmp_path_factory):
    from dynnets.data import Vocabulary
    from dynnets.models import build_model
    from dynnets.train import save_checkpoint
    vocab = Vocabulary.from_trees(load_samples()["train"])
    path = tmp_path_factory.mktemp("bow") / "best.npz"
    save_checkpoint(path, build_model("bow", len(vocab), seed=0), vocab)
    return path


RECORD_KEYS = ["words", "root", "pred", "pred_name", "gold", "nodes", "input", "tree", "brackets", "unknown_words"]


@pytest.mark.parametrize("which", ["tree", "bow"])
@pytest.mark.parametrize("nodes", [False, True])
def test_predict_json_records_carry_the_root_prediction_and_gold(which, nodes, tree_run, bow_checkpoint, capsys):
    ck = tree_run / "best.npz" if which == "tree" else bow_checkpoint
    sentences = ["(4 (2 it) (4 (2 is) (4 good)))", "((it (is good)) .)", "it is not good ."]
    code, out, err = run(["predict", "--checkpoint", str(ck), "--json", *(["--nodes"] if nodes else []),
                          *sentences], capsys)
    assert code == 0, err
    records = json.loads(out)
    names = ["very negative", "negative", "neutral", "positive", "very positive"]
    for rec, gold in zip(records, [4, None, None]):
        assert list(rec) == RECORD_KEYS
        assert rec["pred"] == int(np.argmax(rec["root"])) and rec["pred_name"] == names[rec["pred"]]
        assert rec["gold"] == gold
        if nodes and which == "tree":
            assert rec["nodes"][0]["pred"] == rec["pred"] and rec["nodes"][0]["gold"] == gold
            assert rec["nodes"][0]["proba"] == rec["root"]
        else:
            assert rec["nodes"] is None
    code, text, _ = run(["predict", "--checkpoint", str(ck), *sentences[:2]], capsys)
    first, second = text.split("\n\n")
    assert f"predicted: {records[0]['pred']} {records[0]['pred_name']}\ngold: 4 very positive\n" in first
    assert "gold:" not in second


# --------------------------------------------------------------------------
# --seed on every command
# --------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["demo", "train", "eval", "predict", "compare", "serve", "sweep"])
def test_every_command_takes_a_seed(cmd, capsys):
    code, out, _ = run([cmd, "--help"], capsys)
    assert code == 0 and "--seed " in out
    code, _, err = run([cmd, "--seed", "-1"], capsys)
    assert code == 2 and "--seed" in err and "Traceback" not in err


def test_eval_and_predict_seed_the_default_generator_and_give_the_same_numbers(tree_run, capsys):
    """eval and predict draw no random numbers: any seed gives the same output. The
    command seeds dynnets' default generator, so a model that drew from it would repeat too."""
    import dynnets.random as dr
    ck = str(tree_run / "best.npz")
    outs = []
    for seed in ("0", "7", "7"):
        code, ev, err = run(["eval", "--checkpoint", ck, "--json", "--seed", seed], capsys)
        assert code == 0, err
        assert dr.initial_seed() == int(seed)
        code, pr, err = run(["predict", "--checkpoint", ck, "--json", "--seed", seed, "it is not good ."], capsys)
        assert code == 0, err
        outs.append((ev, pr))
    assert outs[0] == outs[1] == outs[2]


def _out_weight(path):
    from dynnets.train import load_checkpoint
    return np.array(load_checkpoint(path).out.weight.numpy())


def test_train_cnn_phrases_and_max_norm(tmp_path, capsys):
    """--phrases trains on every phrase (Kim's SST protocol: more examples, other
    weights); --max-norm F keeps every row of the output weight at l2 norm <= F."""
    small = ["train", "--model", "cnn", "--epochs", "1", "--hidden", "4", "--embed-dim", "8", "--no-progress"]
    runs = {}
    for name, extra in (("plain", []), ("kim", ["--phrases", "--max-norm", "0.05"])):
        code, _, err = run(small + extra + ["--out", str(tmp_path / name)], capsys)
        assert code == 0, err
        runs[name] = json.loads((tmp_path / name / "config.json").read_text())["model"]["config"]
    assert (runs["plain"]["phrases"], runs["plain"]["max_norm"]) == (False, None)
    assert (runs["kim"]["phrases"], runs["kim"]["max_norm"]) == (True, 0.05)
    plain, kim = _out_weight(tmp_path / "plain" / "best.npz"), _out_weight(tmp_path / "kim" / "best.npz")
    assert np.linalg.norm(plain, axis=1).max() > 0.05
    np.testing.assert_array_less(np.linalg.norm(kim, axis=1), 0.05 + 1e-6)
    # the phrases: one epoch of many more examples takes many more optimizer steps
    steps = {n: json.loads((tmp_path / n / "log.jsonl").read_text().splitlines()[0]) for n in runs}
    seen = {n: s["train_sent_per_s"] * s["train_seconds"] for n, s in steps.items()}
    assert seen["kim"] > 5 * seen["plain"], seen


@pytest.mark.parametrize("extra, flag", [(["--phrases"], "--phrases"), (["--max-norm", "3"], "--max-norm")])
@pytest.mark.parametrize("kind", ["lstm", "bow", "treelstm", "transformer"])
def test_train_kim_flags_name_the_flag_where_they_do_not_apply(kind, extra, flag, tmp_path, capsys):
    code, _, err = run(["train", "--model", kind, *extra, "--out", str(tmp_path / "r")] + TINY, capsys)
    assert_one_line_error(code, err, 2, flag, f"--model {kind}", "applies to --model cnn")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_train_max_norm_must_be_positive(value, tmp_path, capsys):
    code, _, err = run(["train", "--model", "cnn", "--max-norm", value, "--out", str(tmp_path / "r")] + TINY, capsys)
    assert_one_line_error(code, err, 2, "--max-norm", value)
