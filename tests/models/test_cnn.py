"""Kim (2014)'s CNN: every execution gives the same features and gradients,
torch's conv1d agrees, and the kind trains, evaluates and predicts through
the ``dynnets`` command."""
import json

import numpy as np
import pytest
import torch

from dynnets.cli import main
from dynnets.data import Vocabulary, parse_tree
from dynnets.models import build_model
from dynnets.models.cnn import KimCNN
from dynnets.models.common import SentenceExample
from dynnets.train import load_checkpoint, save_checkpoint

EXECUTIONS = ["packed", "padded", "sentence", "autobatch"]


def _examples():
    rng = np.random.default_rng(0)
    # lengths 1 (shorter than every filter) and the batch maximum, twice
    return [SentenceExample(rng.integers(0, 20, n), int(rng.integers(5))) for n in (3, 1, 6, 2, 6)]


def _dense(g):
    return np.array(g.to_dense() if hasattr(g, "to_dense") else g.numpy())


def _run(execution, seed=1):
    m = build_model("cnn", 20, embed_dim=6, hidden=4, dropout=0.0, execution=execution, dtype="float64", seed=seed)
    b = m.collate(_examples())
    f = m.features(b).numpy()
    m.loss(b).backward()
    return m, f, {n: _dense(p.grad) for n, p in m.named_parameters()}


@pytest.mark.parametrize("execution", EXECUTIONS[1:])
def test_every_execution_gives_the_packed_features_and_gradients(execution):
    _, f0, g0 = _run("packed")
    _, f, g = _run(execution)
    np.testing.assert_allclose(f, f0, rtol=1e-12, atol=1e-14)
    for name in g0:
        np.testing.assert_allclose(g[name], g0[name], rtol=1e-10, atol=1e-13, err_msg=name)


def test_features_and_gradients_match_torch_conv1d():
    m, f, g = _run("packed")
    W = torch.tensor(m.embedding.weight.numpy(), requires_grad=True)
    convs = [(torch.tensor(c.weight.numpy(), requires_grad=True), torch.tensor(c.bias.numpy(), requires_grad=True))
             for c in m.convs]
    rows = []
    for s in _examples():
        x = W[torch.tensor(s.ids)].T[None]                                   # (1, E, T)
        rows.append(torch.cat([torch.relu(torch.nn.functional.conv1d(x, w, b, padding=w.shape[2] - 1)).amax(-1)[0]
                               for w, b in convs]))
    ft = torch.stack(rows)
    np.testing.assert_allclose(f, ft.detach().numpy(), rtol=1e-12, atol=1e-14)
    out = torch.nn.functional.linear(ft, torch.tensor(m.out.weight.numpy()), torch.tensor(m.out.bias.numpy()))
    torch.nn.functional.cross_entropy(out, torch.tensor([s.label for s in _examples()])).backward()
    np.testing.assert_allclose(g["embedding.weight"], W.grad.numpy(), rtol=1e-10, atol=1e-13)
    for k, (w, b) in enumerate(convs):
        np.testing.assert_allclose(g[f"convs.{k}.weight"], w.grad.numpy(), rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(g[f"convs.{k}.bias"], b.grad.numpy(), rtol=1e-10, atol=1e-13)


def test_defaults_are_kims_and_bad_arguments_are_named(tmp_path):
    m = KimCNN(30)
    assert m.widths == (3, 4, 5) and m.maps == 100 and m.drop.p == 0.5 and m.config["embed_dim"] == 300
    assert [tuple(c.weight.shape) for c in m.convs] == [(100, 300, 3), (100, 300, 4), (100, 300, 5)]
    assert np.abs(m.embedding.weight.numpy()).max() <= 0.25
    with pytest.raises(ValueError, match="KimCNN: execution must be one of packed, padded"):
        KimCNN(10, execution="ragged")
    with pytest.raises(ValueError, match="KimCNN: widths must be positive"):
        KimCNN(10, widths=(0, 3))
    with pytest.raises(ValueError, match="empty batch"):
        m.collate([])
    small = KimCNN(20, embed_dim=4, hidden=3, execution="padded", seed=2)
    vocab = Vocabulary.from_trees([parse_tree("(2 (2 a) (2 b))")])
    save_checkpoint(tmp_path / "m.npz", small, vocab)
    back = load_checkpoint(tmp_path / "m.npz")
    assert back.execution == "padded"
    b = small.collate(_examples())
    np.testing.assert_allclose(back.predict_proba(b), small.predict_proba(b))


@pytest.mark.parametrize("kind, extra", [("cnn", ["--dropout", "0.5"]), ("transformer", ["--dropout", "0.1"])])
def test_train_eval_predict_and_sweep_through_the_command(kind, extra, tmp_path, capsys):
    tiny = ["--epochs", "1", "--hidden", "8", "--embed-dim", "8", "--no-progress"]
    code = main(["train", "--model", kind, "--out", str(tmp_path / "r"), "--optimizer", "adam", "--lr", "0.01"]
                + tiny + extra)
    out, err = capsys.readouterr()
    assert code == 0, err
    m = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert m["config"]["hidden"] == 8 and m["config"]["embed_dim"] == 8
    code = main(["eval", "--checkpoint", str(tmp_path / "r" / "best.npz"), "--split", "dev", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)["dev"]
    assert res["n"] == 150 and 0.0 <= res["root_fine"] <= 1.0 and 0.0 <= res["root_binary"] <= 1.0
    code = main(["predict", "--checkpoint", str(tmp_path / "r" / "best.npz"), "--nodes", "it is not good"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "predicted: " in out
    code = main(["sweep", "--models", kind, "--seeds", "0", "--set", "epochs=1", "--set", "hidden=4",
                 "--set", "embed_dim=4", "--max-sentences", "20", "--workers", "0", "--out", str(tmp_path / "s"),
                 "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "1 runs: 0 finished earlier, 1 ran now (0 failed)" in out and f"| {kind} " in out


def test_max_norm_is_kims_row_constraint_applied_by_the_trainer():
    from dynnets.data import load_samples
    from dynnets.train import TrainConfig, train
    m = KimCNN(20, embed_dim=4, hidden=3, max_norm=0.5, seed=1)
    w = m.out.weight.numpy()
    w[...] = 0.0
    w[0, :] = 1.0        # norm 3: scaled back to 0.5, its direction kept
    w[1, 0] = 0.25       # under the limit: untouched
    m.after_step()
    np.testing.assert_allclose(w[0], np.full(9, 0.5 / 3.0), rtol=1e-6)
    assert w[1, 0] == np.float32(0.25) and not w[2:].any()
    with pytest.raises(ValueError, match="KimCNN: max_norm must be positive or None, got 0"):
        KimCNN(10, max_norm=0)
    # the trainer calls after_step after every step: Adam at lr 0.5 pushes the
    # rows far past 0.1 within one step, and they end on the sphere
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    m = build_model("cnn", len(vocab), embed_dim=8, hidden=4, max_norm=0.1, seed=0)
    free = build_model("cnn", len(vocab), embed_dim=8, hidden=4, seed=0)
    for model in (m, free):
        train(model, data["train"][:50], data["dev"][:20], vocab,
              TrainConfig(epochs=1, batch_size=25, optimizer="adam", lr=0.5, embedding_lr=0.5, progress=False))
    norms = np.linalg.norm(m.out.weight.numpy(), axis=1)
    assert norms.max() <= 0.1 * (1 + 1e-5) and norms.max() >= 0.1 * (1 - 1e-5)
    assert np.linalg.norm(free.out.weight.numpy(), axis=1).max() > 1.0


def test_phrases_trains_on_every_distinct_phrase_and_evaluates_sentences():
    from dynnets.train import TrainConfig, train
    trees = [parse_tree("(3 (2 the) (4 (3 good) (2 film)))"), parse_tree("(1 (2 the) (1 film))")]
    m = KimCNN(20, embed_dim=4, hidden=3, phrases=True)
    got = [(" ".join(t.words()), int(t.label)) for t in m.training_trees(trees)]
    assert got == [("the good film", 3), ("the", 2), ("good film", 4), ("good", 3), ("film", 2), ("the film", 1)]
    assert KimCNN(20, embed_dim=4, hidden=3).training_trees(trees) is trees
    # the trainer trains on the phrases: 6 examples in batches of 4 are 2 steps; dev is the 2 sentences
    vocab = Vocabulary.from_trees(trees)
    m = KimCNN(len(vocab), embed_dim=4, hidden=3, phrases=True, dropout=0.0)
    prepared = []
    m.prepare = lambda ts, v: prepared.append(len(ts)) or KimCNN.prepare(m, ts, v)
    res = train(m, trees, trees, vocab, TrainConfig(epochs=1, batch_size=4, optimizer="adam", lr=0.01,
                                                  progress=False))
    assert prepared[0] == 6 and res.history[0]["dev"]["n"] == 2      # trained on 6 phrases, selected on 2 sentences
