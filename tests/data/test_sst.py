"""dynnets.data.sst: loading, label views, PTB escapes; the real SST when present."""

import os
from pathlib import Path

import numpy as np
import pytest

from dynnets.data import load_samples, samples_dir
from dynnets.data.sst import (IGNORE, binary_label, escape_ptb, label_view, load_sst, node_labels, root_labels,
                              unescape_ptb)
from dynnets.data.trees import TreeParseError, parse_tree

REAL_SST = Path(os.environ.get("DYNNETS_SST", "/work/shared/data/sst"))


def test_load_samples_all_splits():
    data = load_sst(samples_dir())
    assert list(data) == ["train", "dev", "test"]
    assert all(len(v) > 0 for v in data.values())
    assert load_samples()["dev"] == data["dev"]


def test_load_subset_and_present_only(tmp_path):
    (tmp_path / "dev.txt").write_text("(1 (2 a) (0 b))\n")
    assert list(load_sst(tmp_path)) == ["dev"]
    assert list(load_sst(samples_dir(), splits=["test", "train"])) == ["train", "test"]


def test_missing_directory():
    with pytest.raises(FileNotFoundError, match="load_sst: directory '.*nowhere' does not exist"):
        load_sst("/nonexistent/nowhere")


def test_no_split_files_lists_what_was_found(tmp_path):
    (tmp_path / "readme.md").write_text("x")
    (tmp_path / "train.csv").write_text("x")
    (tmp_path / "sub").mkdir()
    with pytest.raises(FileNotFoundError) as info:
        load_sst(tmp_path)
    msg = str(info.value)
    assert "train.txt, dev.txt, test.txt" in msg
    assert "found: readme.md, sub/, train.csv" in msg
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="found: an empty directory"):
        load_sst(empty)


def test_requested_split_missing(tmp_path):
    (tmp_path / "train.txt").write_text("(1 a)\n")
    with pytest.raises(FileNotFoundError, match=r"no test.txt in .*found: train.txt"):
        load_sst(tmp_path, splits=["train", "test"])
    with pytest.raises(ValueError, match="unknown split"):
        load_sst(tmp_path, splits=["validation"])
    with pytest.raises(NotADirectoryError):
        load_sst(tmp_path / "train.txt")


def test_load_errors_name_file_line_column(tmp_path):
    (tmp_path / "train.txt").write_text("(1 a)\n(3 (2 b) (9 c))\n")
    with pytest.raises(TreeParseError, match=r"train.txt:2:11: expected an integer label in 0..4"):
        load_sst(tmp_path)
    with pytest.warns(UserWarning, match="skipped 1 of 2 lines: 1 label_range"):
        data = load_sst(tmp_path, on_error="skip")
    assert len(data["train"]) == 1


@pytest.mark.parametrize("text, why", [
    ("", "the file is empty"),
    ("\ufeff", "the file is empty"),
    ("\n \t\n\r\n", "its 3 lines are blank"),
])
def test_a_split_with_no_trees_is_an_error_naming_the_file(tmp_path, text, why):
    (tmp_path / "train.txt").write_text("(1 a)\n")
    (tmp_path / "dev.txt").write_text(text, encoding="utf-8")
    msg = f"{tmp_path / 'dev.txt'}: no trees in this file ({why}); an SST split file holds one tree per line"
    with pytest.raises(ValueError) as info:
        load_sst(tmp_path)
    assert str(info.value) == msg
    assert list(load_sst(tmp_path, splits=["train"])) == ["train"]       # a split not asked for is not read


def test_a_split_whose_every_line_is_skipped_is_an_error(tmp_path):
    (tmp_path / "dev.txt").write_text("(9 a)\n(1 (2 b)\n")
    with pytest.warns(UserWarning, match="skipped 2 of 2 lines"):
        with pytest.raises(ValueError, match=r"dev.txt: no trees in this file \(all 2 of its lines were skipped as "
                                             r"malformed; first: .*dev.txt:1:2: "):
            load_sst(tmp_path, on_error="skip")


def test_unescape():
    assert unescape_ptb("-LRB-") == "(" and unescape_ptb("-RRB-") == ")"
    assert unescape_ptb("writer\\/director") == "writer/director" and unescape_ptb("\\*\\*") == "**"
    assert unescape_ptb("plain") == "plain"
    for w in ["(", ")", "[", "}", "a/b", "*"]:
        assert unescape_ptb(escape_ptb(w)) == w


def test_load_unescape(tmp_path):
    (tmp_path / "train.txt").write_text("(2 (2 -LRB-) (2 (2 and\\/or) (2 -RRB-)))\n")
    t = load_sst(tmp_path, unescape=True)["train"][0]
    assert t.words() == ["(", "and/or", ")"]
    assert load_sst(tmp_path)["train"][0].words() == ["-LRB-", "and\\/or", "-RRB-"]


def test_label_views():
    trees = [parse_tree(s) for s in ["(4 (2 a) (3 b))", "(2 (0 a) (4 b))", "(1 (2 a) (0 b))", "(3 (1 c) (2 d))"]]
    assert label_view(trees, "fine") == trees
    binary = label_view(trees, "binary")
    assert [str(t) for t in binary] == ["(1 (-1 a) (1 b))", "(0 (-1 a) (0 b))", "(1 (0 c) (-1 d))"]
    assert root_labels(trees).tolist() == [4, 2, 1, 3]
    assert root_labels(binary).tolist() == [1, 0, 1]
    assert node_labels(trees[:1]).tolist() == [2, 3, 4]
    assert node_labels(binary).tolist() == [IGNORE, 1, 1, IGNORE, 0, 0, 0, IGNORE, 1]
    assert [binary_label(x) for x in range(5)] == [0, 0, IGNORE, 1, 1]
    with pytest.raises(ValueError, match="view"):
        label_view(trees, "ternary")
    assert root_labels([]).dtype == np.int64


@pytest.mark.skipif(not (REAL_SST / "train.txt").is_file(), reason="real SST not available")
def test_real_sst_round_trip():
    data = load_sst(REAL_SST)
    assert {k: len(v) for k, v in data.items()} == {"train": 8544, "dev": 1101}
    for name, trees in data.items():
        lines = (REAL_SST / f"{name}.txt").read_text(encoding="utf-8").splitlines()
        assert all(str(t) == line for t, line in zip(trees, lines))
    assert all(len(x.children) in (0, 2) for t in data["dev"] for x in t.postorder())
    assert len(label_view(data["dev"], "binary")) == 872  # the standard SST-2 dev size
