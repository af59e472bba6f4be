"""dynnets.data.vocab: Vocabulary and load_embeddings."""

import json

import numpy as np
import pytest

from dynnets.data.trees import parse_tree
from dynnets.data.vocab import PAD, PAD_ID, UNK, UNK_ID, Vocabulary, load_embeddings

WORDS = "the cat sat on the mat the Cat ran".split()


def test_specials_and_frequency_order():
    v = Vocabulary.build(WORDS)
    assert (v.pad_id, v.unk_id) == (PAD_ID, UNK_ID) == (0, 1)
    assert v.word(0) == PAD and v.word(1) == UNK
    assert v.itos == [PAD, UNK, "the", "Cat", "cat", "mat", "on", "ran", "sat"]  # count desc, then alphabetical
    assert v["the"] == 2 and v["dog"] == UNK_ID
    assert v("cat") == v["cat"]
    assert "cat" in v and "dog" not in v and 3 not in v
    assert v.ids(["the", "dog", "sat"]).tolist() == [2, 1, 8]
    assert v.ids([]).dtype == np.int64
    assert v.words([2, 1]) == ["the", UNK]
    assert list(v) == v.itos and len(v) == 9


def test_min_freq_and_max_size():
    v = Vocabulary.build(WORDS, min_freq=2)
    assert v.itos == [PAD, UNK, "the"]
    assert v["cat"] == UNK_ID
    assert Vocabulary.build(WORDS, max_size=2).itos == [PAD, UNK, "the", "Cat"]
    with pytest.raises(ValueError, match="min_freq"):
        Vocabulary.build(WORDS, min_freq=0)


def test_lowercase():
    v = Vocabulary.build(WORDS, lowercase=True, min_freq=2)
    assert v.itos == [PAD, UNK, "the", "cat"]
    assert v["CAT"] == v["cat"] == 3 and "CaT" in v
    assert v.ids(["The", "Mat"]).tolist() == [2, 1]


def test_from_trees_and_duplicates():
    trees = [parse_tree("(1 (2 a) (2 b))"), parse_tree("(1 (2 a) (2 c))")]
    v = Vocabulary.from_trees(trees)
    assert v.itos[2:] == ["a", "b", "c"] and v.counts == {"a": 2, "b": 1, "c": 1}
    with pytest.raises(ValueError, match="duplicate word 'a'"):
        Vocabulary(["a", "b", "a"])


def test_json_round_trip_atomic(tmp_path):
    v = Vocabulary.build(WORDS + ["naïve", "日本"], lowercase=True)
    p = tmp_path / "vocab.json"
    v.save(p)
    assert [f.name for f in tmp_path.iterdir()] == ["vocab.json"]  # no temporary file left
    w = Vocabulary.load(p)
    assert w == v and w.itos == v.itos and w.lowercase and w.counts == v.counts
    assert w["THE"] == v["the"]
    data = json.loads(p.read_text(encoding="utf-8"))
    assert data["words"][0] == "the"
    v2 = Vocabulary.build(["x"])
    v2.save(p)  # overwrite
    assert Vocabulary.load(p).itos == [PAD, UNK, "x"]


def test_load_errors(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="expected format"):
        Vocabulary.load(p)
    p.write_text('{"format": \n oops')
    with pytest.raises(ValueError, match=r"bad.json:2:\d+: .*invalid JSON"):
        Vocabulary.load(p)


# ---------------------------------------------------------------------------
# Embeddings


@pytest.fixture
def vocab():
    return Vocabulary(["the", "cat", "sat", "zebra"])


GLOVE = "the 0.1 0.2 0.3\ncat 1 2 3\nunused 9 9 9\nsat -1 -2 -3.5e-1\n"


def test_glove_format(tmp_path, vocab):
    p = tmp_path / "glove.txt"
    p.write_text(GLOVE)
    e = load_embeddings(p, vocab, rng=np.random.default_rng(0))
    assert e.matrix.shape == (6, 3) and e.matrix.dtype == np.float32
    assert np.allclose(e.matrix[vocab["cat"]], [1, 2, 3])
    assert np.allclose(e.matrix[vocab["sat"]], [-1, -2, -0.35])
    assert np.all(e.matrix[PAD_ID] == 0)
    assert e.found.tolist() == [False, False, True, True, True, False]
    assert (e.n_found, e.n_words, e.coverage) == (3, 4, 0.75)
    assert "3 of 4" in e.report()
    z = e.matrix[vocab["zebra"]]
    assert np.all(np.abs(z) <= 0.05) and np.any(z != 0)
    again = load_embeddings(p, vocab, rng=np.random.default_rng(0))
    assert np.array_equal(again.matrix, e.matrix)  # reproducible
    other = load_embeddings(p, vocab, rng=np.random.default_rng(1))
    assert not np.array_equal(other.matrix[vocab["zebra"]], z)


def test_word2vec_format(tmp_path, vocab):
    p = tmp_path / "w2v.txt"
    p.write_text("4 3\n" + GLOVE)
    e = load_embeddings(p, vocab, rng=np.random.default_rng(0))
    g = tmp_path / "glove.txt"
    g.write_text(GLOVE)
    assert np.array_equal(e.matrix, load_embeddings(g, vocab, rng=np.random.default_rng(0)).matrix)
    assert e.coverage == 0.75


def test_lowercase_vocab_prefers_exact_match(tmp_path):
    v = Vocabulary(["the", "cat"], lowercase=True)
    p = tmp_path / "e.txt"
    p.write_text("The 9 9\nthe 1 1\nCAT 2 2\n")
    e = load_embeddings(p, v, rng=np.random.default_rng(0))
    assert e.matrix[v["the"]].tolist() == [1, 1] and e.matrix[v["cat"]].tolist() == [2, 2]
    assert e.n_found == 2


def test_embedding_errors_name_file_line_column(tmp_path, vocab):
    p = tmp_path / "e.txt"
    p.write_text("the 1 2 3\ncat 1 2\n")
    with pytest.raises(ValueError, match=r"e.txt:2:5: load_embeddings: expected 3 numbers after the word 'cat', got 2"):
        load_embeddings(p, vocab, rng=np.random.default_rng(0))
    p.write_text("the 1 2 3\ncat 1 x 3\n")
    with pytest.raises(ValueError, match=r"e.txt:2:7: load_embeddings: expected a number, got 'x'"):
        load_embeddings(p, vocab, rng=np.random.default_rng(0))
    p.write_text("")
    with pytest.raises(ValueError, match=r"e.txt:1:1: .*empty file"):
        load_embeddings(p, vocab, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        load_embeddings(p, vocab, rng=0)


@pytest.mark.parametrize("value, what", [("nan", "NaN"), ("-inf", "inf"), ("inf", "inf"),
                                         ("1e39", "a number beyond float32's range")])
def test_embedding_nan_inf_rejected_with_file_line_column(tmp_path, vocab, value, what):
    p = tmp_path / "e.txt"
    p.write_text(f"the 1 2 3\nunused nan nan nan\ncat 1  {value} 3\n")      # a word outside the vocabulary is not read
    with pytest.raises(ValueError) as e:
        load_embeddings(p, vocab, rng=np.random.default_rng(0))
    assert str(e.value) == (f"{p}:3:8: load_embeddings: the vector of 'cat' has {what} at component 2 "
                            f"({value!r}); expected finite numbers")


def test_embedding_undecodable_bytes_name_file_line_column(tmp_path, vocab):
    p = tmp_path / "e.txt"
    p.write_bytes(b"the 1 2 3\n" * 3000 + "caf\u00e9 1 2 3\n".encode("latin-1"))
    with pytest.raises(ValueError) as e:
        load_embeddings(p, vocab, rng=np.random.default_rng(0))
    assert str(e.value).startswith(f"{p}:3001:4: load_embeddings: byte 0xe9 (byte offset 30003 of the file) is "
                                   f"not valid UTF-8")


def test_vocabulary_load_undecodable_bytes_name_file_line_column(tmp_path, vocab):
    p = tmp_path / "vocab.json"
    p.write_bytes(b'{"format": 1,\n "words": ["caf\xe9"]}')
    with pytest.raises(ValueError) as e:
        Vocabulary.load(p)
    assert str(e.value).startswith(f"{p}:2:16: Vocabulary.load: byte 0xe9 (byte offset 29 of the file) is not valid")


def test_vocabulary_save_is_atomic(tmp_path, vocab):
    import os
    p = tmp_path / "vocab.json"
    vocab.save(p)
    assert Vocabulary.load(p).to_dict() == vocab.to_dict()
    assert os.listdir(tmp_path) == ["vocab.json"]
