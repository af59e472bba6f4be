"""The training loop on the shipped sample treebank: the loss goes down,
checkpoints reload to the same accuracy, the same seed gives the same
metrics, logs and early stopping; and the static-model protocol."""
import json
from pathlib import Path

import numpy as np
import pytest

from dynnets.data.sst import load_sst
from dynnets.data.vocab import Vocabulary
from dynnets.models import build_model
from dynnets.train import TrainConfig, evaluate, load_checkpoint, make_optimizer, predict, save_checkpoint, train

SAMPLES = Path(__file__).resolve().parents[1] / "dynnets" / "data" / "samples"
SMALL = dict(embed_dim=16, hidden=12)


@pytest.fixture(scope="module")
def data():
    d = load_sst(SAMPLES, splits=["train", "dev"])
    train_trees, dev_trees = d["train"][:160], d["dev"][:60]
    return train_trees, dev_trees, Vocabulary.from_trees(train_trees)


def _cfg(tmp=None, **kw):
    base = dict(epochs=2, batch_size=20, progress=False, patience=None, seed=0,
                out_dir=str(tmp) if tmp is not None else None)
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("kind", ["treelstm", "bilstm", "childsum"])
def test_a_few_steps_decrease_the_loss(data, kind):
    train_trees, _, vocab = data
    m = build_model(kind, len(vocab), seed=0, **SMALL)
    opt = make_optimizer(m, _cfg(lr=0.05))
    batch = m.make_batch(train_trees[:20], vocab)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = m.loss(batch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_training_improves_dev_accuracy_and_writes_log_and_checkpoint(data, tmp_path):
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=0, **SMALL)
    before = evaluate(m, dev_trees, vocab)
    res = train(m, train_trees, dev_trees, vocab, _cfg(tmp_path, epochs=3))
    assert res.best["root_fine"] > before["root_fine"]
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert len(lines) == len(res.history) == 3
    entries = [json.loads(x) for x in lines]
    assert [e["epoch"] for e in entries] == [1, 2, 3]
    assert {"train_loss", "train_sent_per_s", "dev", "best"} <= set(entries[0])
    assert {"root_fine", "root_binary", "all_nodes", "confusion", "by_length"} <= set(entries[0]["dev"])
    assert entries[0]["train_loss"] > entries[-1]["train_loss"]
    assert json.loads((tmp_path / "config.json").read_text())["model"]["kind"] == "treelstm"
    assert res.checkpoint == str(tmp_path / "best.npz") and (tmp_path / "best.npz").exists()


@pytest.mark.parametrize("kind", ["treelstm", "lstm"])
def test_checkpoint_reload_gives_the_same_accuracy(data, tmp_path, kind):
    train_trees, dev_trees, vocab = data
    m = build_model(kind, len(vocab), seed=1, dropout=0.3, **SMALL)
    res = train(m, train_trees, dev_trees, vocab, _cfg(tmp_path, restore_best=True))
    again = load_checkpoint(res.checkpoint)
    assert again.vocab == vocab and again.kind == kind and again.config == m.config
    assert again.checkpoint["epoch"] == res.best_epoch
    rep = evaluate(again, dev_trees, again.vocab)
    assert rep["root_fine"] == res.best["root_fine"] and rep["root_binary"] == res.best["root_binary"]
    np.testing.assert_array_equal(predict(again, dev_trees, vocab), predict(m, dev_trees, vocab))


def test_same_seed_same_metrics(data):
    train_trees, dev_trees, vocab = data

    def run(seed):
        m = build_model("treelstm", len(vocab), seed=seed, dropout=0.3, embed_dropout=0.2, **SMALL)
        res = train(m, train_trees, dev_trees, vocab, _cfg(seed=seed, bucket_batches=2))
        return [(h["train_loss"], h["dev"]["root_fine"], h["dev"]["all_nodes"]) for h in res.history]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_early_stopping(data):
    train_trees, dev_trees, vocab = data
    m = build_model("lstm", len(vocab), seed=0, **SMALL)
    res = train(m, train_trees, dev_trees, vocab, _cfg(epochs=6, patience=2, lr=0.0, embedding_lr=0.0))
    assert len(res.history) == 3 and res.best_epoch == 1      # nothing can improve with lr = 0
    assert res.stopped.startswith("early stopping")


def test_optimizer_groups(data):
    _, _, vocab = data
    m = build_model("treelstm", len(vocab), seed=0, **SMALL)
    opt = make_optimizer(m, _cfg(optimizer="adam", lr=1e-3, embedding_lr=1e-2, weight_decay=1e-4))
    rest, emb = opt.param_groups
    assert emb["params"] == [m.embedding.weight] and emb["lr"] == 1e-2 and emb["weight_decay"] == 0.0
    assert emb["lazy"] is True and rest["lr"] == 1e-3 and rest["weight_decay"] == 1e-4
    assert len(rest["params"]) == len(list(m.parameters())) - 1
    with pytest.raises(ValueError, match="TrainConfig: optimizer must be 'adagrad', 'adam' or 'sgd'"):
        TrainConfig(optimizer="rmsprop")


def test_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.npz")
    from dynnets.io import save
    save({"weights": {}}, tmp_path / "other.npz")
    with pytest.raises(ValueError, match="is not a dynnets checkpoint .*format is None, not 'dynnets.checkpoint/1'"):
        load_checkpoint(tmp_path / "other.npz")

    class NoKind:
        def state_dict(self):
            return {}
    with pytest.raises(TypeError, match="has no 'kind' and 'config'"):
        save_checkpoint(tmp_path / "x.npz", NoKind(), None)


class _StaticBagOfWords:
    """A duck-typed static model: the protocol the padded baseline implements
    (``is_static``, ``make_batch``, ``train_step``, ``predict_proba``,
    ``state_dict``/``load_state_dict``, ``padding_stats``)."""

    is_static = True
    kind = "test-static"

    def __init__(self, vocab_size, classes=5):
        self.w = np.zeros((vocab_size, classes))
        self.config = {"vocab_size": vocab_size}
        self.steps = 0
        self.resets = 0

    def make_batch(self, trees, vocab):
        x = np.zeros((len(trees), self.w.shape[0]))
        for i, t in enumerate(trees):
            np.add.at(x[i], vocab.ids(t.words()), 1.0)
        return x, np.array([t.label for t in trees])

    def predict_proba(self, batch):
        z = batch[0] @ self.w
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def train_step(self, batch):
        x, y = batch
        p = self.predict_proba(batch)
        loss = -np.log(p[np.arange(len(y)), y]).mean()
        p[np.arange(len(y)), y] -= 1
        self.w -= 0.5 * x.T @ p / len(y)
        self.steps += 1
        return loss

    def state_dict(self):
        return {"w": self.w.copy()}

    def load_state_dict(self, state):
        self.w = np.array(state["w"])

    def padding_stats(self):
        return {"steps": self.steps}

    def reset_padding_stats(self):
        self.resets += 1


def test_static_model_protocol(data):
    train_trees, dev_trees, vocab = data
    m = _StaticBagOfWords(len(vocab))
    res = train(m, train_trees, dev_trees, vocab, _cfg(epochs=3, batch_size=40))
    assert m.steps > 0 and m.resets == 3
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    assert [h["padding"]["steps"] for h in res.history] == [4, 8, 12]
    assert "all_nodes" not in res.best and 0.0 <= res.best["root_fine"] <= 1.0


def test_select_on_fine_plus_binary(data):
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=2, **SMALL)
    res = train(m, train_trees, dev_trees, vocab, _cfg(epochs=3, select="fine+binary"))
    sums = [h["dev"]["root_fine"] + h["dev"]["root_binary"] for h in res.history]
    assert res.best_epoch == 1 + int(np.argmax(sums))
    assert [h["best"] for h in res.history] == [s > max(sums[:i], default=-1) for i, s in enumerate(sums)]


def test_weight_averaging_is_what_gets_evaluated_and_saved(data, tmp_path):
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=5, **SMALL)
    res = train(m, train_trees, dev_trees, vocab, _cfg(tmp_path, epochs=2, ema=0.9, ema_every=2))
    again = load_checkpoint(res.checkpoint)
    assert evaluate(again, dev_trees, vocab)["root_fine"] == res.best["root_fine"]
    # restore_best put the averaged weights of the best epoch into the model
    for (n, p), (_, q) in zip(m.named_parameters(), again.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=n)
    plain = build_model("treelstm", len(vocab), seed=5, **SMALL)
    res_plain = train(plain, train_trees, dev_trees, vocab, _cfg(epochs=2))
    assert [h["train_loss"] for h in res_plain.history] == [h["train_loss"] for h in res.history]
    assert not all(np.array_equal(p.data, q.data) for p, q in zip(plain.parameters(), m.parameters()))
    with pytest.raises(ValueError, match=r"TrainConfig: ema must be in \(0, 1\) or None"):
        TrainConfig(ema=1.0)


def test_evaluations_within_an_epoch(data, tmp_path):
    train_trees, dev_trees, vocab = data
    kw = dict(SMALL, dropout=0.3, word_dropout=0.1)
    once = train(build_model("treelstm", len(vocab), seed=3, **kw), train_trees, dev_trees, vocab,
                 _cfg(epochs=2, select="fine+binary"))
    m = build_model("treelstm", len(vocab), seed=3, **kw)
    res = train(m, train_trees, dev_trees, vocab, _cfg(tmp_path, epochs=2, select="fine+binary", evals_per_epoch=2))
    assert [h["epoch"] for h in res.history] == [0.5, 1, 1.5, 2]
    # a mid-epoch evaluation leaves training as it was (back in train mode, no
    # random numbers drawn): the epoch-end points match a once-per-epoch run
    for h, h1 in zip(res.history[1::2], once.history):
        assert h["dev"]["root_fine"] == h1["dev"]["root_fine"]
        assert h["dev"]["root_binary"] == h1["dev"]["root_binary"]
        assert h["train_loss"] == h1["train_loss"]
    sums = [h["dev"]["root_fine"] + h["dev"]["root_binary"] for h in res.history]
    assert res.best_epoch == res.history[int(np.argmax(sums))]["epoch"]
    assert [json.loads(line)["epoch"] for line in (tmp_path / "log.jsonl").read_text().splitlines()] == [0.5, 1, 1.5, 2]
    assert evaluate(load_checkpoint(res.checkpoint), dev_trees, vocab)["root_fine"] == res.best["root_fine"]
    with pytest.raises(ValueError, match="TrainConfig: evals_per_epoch must be a positive integer"):
        TrainConfig(evals_per_epoch=0)


# --------------------------------------------------------------------------
# NaN and inf: where they appeared, and whether the learning rate is to blame
# --------------------------------------------------------------------------


def _nan_after(model, calls):
    """Make the loss NaN from call ``calls`` on (as a NaN in the data would)."""
    real, n = model.loss, [0]

    def loss(batch):
        n[0] += 1
        out = real(batch)
        return out * float("nan") if n[0] >= calls else out
    model.loss = loss


def test_nan_at_the_first_step_does_not_blame_the_learning_rate(data):
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=0, **SMALL)
    m.embedding.weight.data[...] = np.nan             # e.g. pretrained vectors with NaN
    with pytest.raises(FloatingPointError) as e:
        train(m, train_trees, dev_trees, vocab, _cfg())
    msg = str(e.value)
    assert msg.startswith("train: the loss became nan at epoch 1, step 1, before any update, so the learning rate "
                          "is not the cause: check the data and the model")
    assert "training sentences" in msg and "lower the learning rate" not in msg


def test_diverging_updates_suggest_a_lower_learning_rate(data):
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=0, **SMALL)
    with np.errstate(all="ignore"), pytest.raises(FloatingPointError) as e:
        train(m, train_trees, dev_trees, vocab, _cfg(optimizer="sgd", lr=1e30))
    msg = str(e.value)
    assert "after 1 updates that grew the weights of" in msg or "updates that grew the weights of" in msg
    assert msg.endswith("the training diverged; lower the learning rate (lr=1e+30) or clip gradients (clip_norm; --clip-norm on the command line)")


def test_nan_later_with_weights_of_normal_size_points_at_the_data(data):
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=0, **SMALL)
    _nan_after(m, 4)
    with pytest.raises(FloatingPointError) as e:
        train(m, train_trees, dev_trees, vocab, _cfg())
    msg = str(e.value)
    assert msg.startswith("train: the loss became nan at epoch 1, step 4, after 3 updates that left every weight "
                          "within 100 times its initial scale, so a too-high learning rate is an unlikely cause")
    assert "lower the learning rate" not in msg


def test_nan_gradient_names_the_parameter_before_it_reaches_the_weights(data):
    import dynnets as dn
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=0, **SMALL)
    real = m.loss
    # sqrt at 0: a finite loss (the term is 0) whose gradient is 0 * inf = NaN
    m.loss = lambda batch: real(batch) + 0.0 * dn.sqrt(dn.sum(m.out.weight * 0.0))
    before = m.out.weight.numpy().copy()
    with np.errstate(all="ignore"), pytest.raises(FloatingPointError) as e:
        train(m, train_trees, dev_trees, vocab, _cfg())
    msg = str(e.value)
    assert msg.startswith("train: the gradient of parameter 'out.weight' has NaN values (the loss was finite, ")
    assert "at epoch 1, step 1, before any update, so the learning rate is not the cause" in msg
    np.testing.assert_array_equal(m.out.weight.data, before)          # no update applied


@pytest.mark.parametrize("key, value, fragment", [
    ("lr", float("inf"), "lr must be a finite number >= 0"), ("lr", float("nan"), "lr must be a finite"),
    ("embedding_lr", -1.0, "embedding_lr must be a finite number >= 0 or None"),
    ("clip_norm", 0.0, "clip_norm must be a finite number > 0 or None"),
    ("weight_decay", float("inf"), "weight_decay must be a finite number >= 0"),
    ("seed", -1, "seed must be an integer >= 0"), ("seed", 1.5, "seed must be an integer >= 0"),
    ("blas_threads", -1, "blas_threads must be an integer >= 0 or None"),
])
def test_train_config_rejects_bad_numbers(key, value, fragment):
    with pytest.raises(ValueError, match=f"TrainConfig: {fragment}"):
        TrainConfig(**{key: value})


def test_an_earlier_runs_files_do_not_survive_a_new_run(data, tmp_path):
    train_trees, dev_trees, vocab = data
    train(build_model("treelstm", len(vocab), seed=0, **SMALL), train_trees, dev_trees, vocab, _cfg(tmp_path))
    assert (tmp_path / "best.npz").is_file()
    m = build_model("treelstm", len(vocab), seed=1, **SMALL)
    _nan_after(m, 1)
    with pytest.raises(FloatingPointError):
        train(m, train_trees, dev_trees, vocab, _cfg(tmp_path, lr=0.07))
    # the folder describes the failed run only: no checkpoint of the earlier one beside its config
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["train"]["lr"] == 0.07 and cfg["model"]["config"]["seed"] == 1 and "out_dir" not in cfg["train"]


# --------------------------------------------------------------------------
# BLAS threads
# --------------------------------------------------------------------------


def _record_threads(model, seen):
    from dynnets.blas import blas_thread_counts
    for name in ("loss", "predict_proba", "predict_all"):
        real = getattr(model, name)
        setattr(model, name, lambda b, real=real: (seen.add(tuple(sorted(blas_thread_counts().values()))), real(b))[1])


@pytest.mark.parametrize("setting, inside", [(None, None), (1, 1), (2, 2), (0, 3)])
def test_train_evaluate_predict_run_on_blas_threads(data, setting, inside):
    """TrainConfig.blas_threads (default 1) holds for the duration of each call and is
    restored after; 0 leaves the caller's setting. Behaviour only: whichever BLAS
    libraries this process has loaded (numpy's at least), each one follows the setting."""
    from threadpoolctl import threadpool_limits

    from dynnets.blas import blas_thread_counts
    train_trees, dev_trees, vocab = data
    m = build_model("treelstm", len(vocab), seed=0, **SMALL)
    seen = set()
    _record_threads(m, seen)
    kw = {} if setting is None else {"blas_threads": setting}
    want = 1 if setting is None else inside
    with threadpool_limits(3, user_api="blas"):
        before = blas_thread_counts()
        assert before and set(before.values()) == {3}       # numpy's BLAS is loaded and limited
        train(m, train_trees[:40], dev_trees[:10], vocab, _cfg(epochs=1, **kw))
        assert seen and all(set(s) == {want} for s in seen), seen
        after = blas_thread_counts()
        assert {k: after[k] for k in before} == before      # the caller's setting is back
        seen.clear()
        evaluate(m, dev_trees[:10], vocab, **kw)
        assert seen and all(set(s) == {want} for s in seen), seen
        seen.clear()
        predict(m, dev_trees[:10], vocab, **kw)
        assert seen and all(set(s) == {want} for s in seen), seen
        after = blas_thread_counts()
        assert {k: after[k] for k in before} == before


def test_blas_threads_restores_after_an_error_and_when_nested():
    from threadpoolctl import threadpool_limits

    from dynnets.blas import blas_thread_counts, blas_threads
    with threadpool_limits(3, user_api="blas"):
        before = blas_thread_counts()
        with pytest.raises(KeyError):
            with blas_threads(1):
                assert set(blas_thread_counts().values()) == {1}
                raise KeyError("x")
        assert blas_thread_counts() == before
        with blas_threads(2):
            with blas_threads(1):
                assert set(blas_thread_counts().values()) == {1}
            assert set(blas_thread_counts().values()) == {2}
            with blas_threads(0):
                assert set(blas_thread_counts().values()) == {2}
        assert blas_thread_counts() == before
    with pytest.raises(ValueError, match="blas_threads: expected a thread count"):
        with blas_threads(-1):
            pass
