"""The runs behind the CLI and the experiment scripts (dynnets.runs): the
demo, the padded-vs-dynamic comparison, per-node predictions, the
compositional subset and padding arithmetic."""
import json

import numpy as np
import pytest

from dynnets import runs
from dynnets.data import Vocabulary, load_samples, parse_tree


def test_interrupted_compare_keeps_finished_runs(tmp_path, monkeypatch):
    real = runs.run_model
    calls = []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(runs, "run_model", flaky)
    with pytest.raises(KeyboardInterrupt):
        runs.compare_padded_vs_dynamic(out=tmp_path, seeds=[0], epochs=1, embed_dim=4, hidden=4,
                                       variants=("lstm", "bow", "treelstm"), max_sentences=20, progress=False,
                                       workers=0)
    res = json.loads((tmp_path / "results.json").read_text())
    assert [r["kind"] for r in res["runs"]] == ["lstm", "bow"]
    assert [s["label"] for s in res["summary"]] == ["dynamic LSTM (packed)", "bag of words"]


def test_demo_tiny_writes_table(tmp_path):
    res = runs.demo(seed=1, epochs=1, out=tmp_path, progress=False, embed_dim=4, hidden=4, max_sentences=30)
    assert [r["kind"] for r in res["runs"]] == ["treelstm", "lstm", "padded-lstm", "bow"]
    md = (tmp_path / "results.md").read_text()
    assert md.count("\n") == 6 and "negation/contrast" in md
    assert json.loads((tmp_path / "results.json").read_text())["seed"] == 1
    pad = res["runs"][2]["padding"]
    assert pad["max_len"] == runs.length_percentile(load_samples()["train"][:30], 95)


def test_demo_claim_tree_lstm_beats_bag_of_words_on_negation_and_contrast():
    """The demo's settings with fewer epochs: the Tree-LSTM is far above chance
    and above the bag of words on the compositional subset."""
    models = tuple(m for m in runs.DEMO_MODELS if m[1] in ("treelstm", "bow"))
    res = runs.demo(seed=0, epochs=5, progress=False, models=models)
    tl, bow = res["runs"]
    assert tl["test"]["root_fine"] > 0.6
    assert tl["test"]["compositional"]["root_fine"] > bow["test"]["compositional"]["root_fine"] + 0.2


def test_compositional_rule():
    assert runs.is_compositional(parse_tree("(1 (2 it) (1 (2 is) (1 (2 not) (3 good))))"))
    assert runs.is_compositional(parse_tree("(1 (3 good) (1 (2 But) (1 dull)))"))
    assert runs.is_compositional(parse_tree("(1 (2 is) (1 (2 n't) (3 good)))"))
    assert not runs.is_compositional(parse_tree("(3 (2 nothing) (3 good))"))
    mask = runs.compositional_mask(load_samples()["test"])
    assert mask.dtype == bool and 0 < mask.sum() < len(mask)


def test_padding_waste_arithmetic():
    trees = [parse_tree("(2 " + " ".join(f"(2 w{i})" for i in range(n)) + ")") if n > 1 else parse_tree("(2 w)")
             for n in (1, 3, 7)]
    w = runs.padding_waste(trees, max_len=4, batch_size=2)
    # 2 batches x 2 rows x 4 steps = 16 steps; real: 1 + 3 + 4 = 8
    assert w == {"steps": 16, "real_steps": 8, "pad_steps": 8, "pad_fraction": 0.5, "truncated": 1, "n": 3}


def test_node_predictions_follow_the_tree():
    from dynnets.models import build_model
    trees = load_samples()["train"][:5]
    v = Vocabulary.from_trees(trees)
    m = build_model("treelstm", len(v), embed_dim=4, hidden=4, seed=0)
    t = parse_tree("(1 (2 (2 the) (2 film)) (1 (2 is) (1 (2 not) (3 good))))")
    p = runs.node_predictions(m, t, v)
    assert [n["text"] for n in p["nodes"]] == [" ".join(n.words()) for n in t.preorder()]
    assert [n["gold"] for n in p["nodes"]] == [n.label for n in t.preorder()]
    assert m.mode == "level"
    # the per-node (recursive) pass gives the level-batched prediction at the root
    from dynnets.train import predict
    np.testing.assert_allclose(p["nodes"][0]["proba"], p["root"], rtol=1e-6)
    np.testing.assert_allclose(p["root"], predict(m, [t], v)[0], rtol=1e-5)
    assert "not good" in runs.format_node_predictions(p, show_gold=True)
    # spans instead of texts: the same words, and no text unless asked
    lean = runs.node_predictions(m, t, v, gold=False, texts=False)
    assert all("text" not in n and n["gold"] is None for n in lean["nodes"])
    assert [runs.node_text(lean, n) for n in lean["nodes"]] == [n["text"] for n in p["nodes"]]
    assert [(n["start"], n["end"]) for n in lean["nodes"]][:4] == [(0, 5), (0, 2), (0, 1), (1, 2)]
    assert runs.format_node_predictions(lean) == runs.format_node_predictions(p)


def test_compare_without_test_split_reports_dev_only(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev"):
        lines = load_samples()[split][:30]
        (data / f"{split}.txt").write_text("\n".join(str(t) for t in lines) + "\n")
    res = runs.compare_padded_vs_dynamic(data=data, out=tmp_path / "out", seeds=[0], epochs=1, embed_dim=4, hidden=4,
                                         variants=("lstm", "padded-p95"), progress=False, plots=False, workers=0)
    assert res["has_test"] is False and res["eval_split"] == "dev"
    assert "test" not in res["runs"][0] and "test" not in res["summary"][0]
    md = (tmp_path / "out" / "results.md").read_text()
    assert "no test split" in md and "test fine" not in md and "dev negation/contrast" in md
    assert "truncated train / dev" in md and "None" not in md


def test_compare_trains_the_transformer_rows_at_their_own_learning_rate(tmp_path):
    """--lr is the LSTMs' (and the other models'); the Transformer rows train at
    --transformer-lr (0.01 is too high for Adam on it: see COMPARE_TRANSFORMER_LR)."""
    from dynnets.options import COMPARE_TRANSFORMER_LR, add_compare_arguments
    import argparse
    a = add_compare_arguments(argparse.ArgumentParser()).parse_args([])
    assert a.lr == 0.01 and a.transformer_lr == COMPARE_TRANSFORMER_LR < 0.01
    res = runs.compare_padded_vs_dynamic(out=tmp_path, seeds=[0], epochs=1, embed_dim=4, hidden=4, lr=0.02,
                                         transformer_lr=0.004, variants=("bow", "transformer", "transformer-bucketed"),
                                         max_sentences=20, progress=False, plots=False, workers=0)
    assert {r["label"].split(",")[0]: r["lr"] for r in res["runs"]} == {"bag of words": 0.02, "Transformer": 0.004}
    assert len(res["runs"]) == 3 and res["transformer_lr"] == 0.004
    assert "adam lr 0.02 (Transformer lr 0.004)." in (tmp_path / "results.md").read_text()
    lstm_only = runs.compare_padded_vs_dynamic(out=tmp_path / "b", seeds=[0], epochs=1, embed_dim=4, hidden=4,
                                               variants=("bow",), max_sentences=20, progress=False, plots=False,
                                               workers=0)
    assert lstm_only["transformer_lr"] is None and "Transformer lr" not in (tmp_path / "b" / "results.md").read_text()
