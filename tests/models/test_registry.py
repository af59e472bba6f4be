"""The one registry of model kinds (dynnets.models.registry), read by
build_model, the checkpoints, the CLI and the runs."""
import inspect

import pytest

from dynnets import runs
from dynnets.cli import main
from dynnets.models import (MODEL_KINDS, SequenceClassifier, TreeRNN, build_model, model_class, model_kinds,
                            model_parameters, register, registry)

BUILT_IN = ("treelstm", "treernn", "childsum", "lstm", "gru", "rnn", "bilstm", "bigru", "birnn", "bow",
            "padded-lstm", "padded-bucketed", "static-treelstm", "cnn", "transformer")


def test_the_built_in_kinds_in_order():
    assert MODEL_KINDS == model_kinds() == BUILT_IN
    assert model_kinds(tree=True) == ("treelstm", "treernn", "childsum")
    assert model_kinds(tree=False) == BUILT_IN[3:]
    assert model_class("bigru") is model_class("lstm") is SequenceClassifier


@pytest.mark.parametrize("kind", BUILT_IN)
def test_every_kind_builds_and_rebuilds_from_its_config(kind):
    m = build_model(kind, 20, embed_dim=4, hidden=4, seed=0)
    assert m.kind == kind and isinstance(m, model_class(kind))
    cfg = {k: v for k, v in m.config.items() if k != "vocab_size"}     # what a checkpoint stores
    assert build_model(kind, 20, **cfg).config == m.config
    accepted = set(inspect.signature(model_class(kind).__init__).parameters) | {"hidden"}
    assert {"embed_dim", "hidden", "seed"} <= model_parameters(kind) <= accepted


def test_parameters_follow_the_class_not_a_guess():
    assert {"mode", "classify", "side_weight"} <= model_parameters("childsum")
    # the sequence models' modes are "packed" and "autobatch" (issue 23), not the tree models'
    assert "mode" in model_parameters("lstm") and "max_len" not in model_parameters("lstm")
    assert not {"cell", "bidirectional"} & model_parameters("bigru")          # fixed by the kind
    assert {"max_len", "hidden", "hidden_size"} <= model_parameters("padded-lstm")
    assert build_model("padded-lstm", 20, hidden=6, embed_dim=4).config["hidden_size"] == 6


def test_registry_errors():
    with pytest.raises(ValueError, match="build_model: unknown model kind 'nope'; expected one of treelstm, "):
        build_model("nope", 10)
    with pytest.raises(ValueError, match="model kind 'lstm' is registered already"):
        register("lstm", SequenceClassifier, cell="lstm", bidirectional=False)
    with pytest.raises(ValueError, match=r"SequenceClassifier\(\) has no argument 'cells'"):
        register("lstm2", SequenceClassifier, cells="lstm")
    with pytest.raises(ValueError, match="model_class: unknown model kind"):
        model_class("nope")


class _MyTreeRNN(TreeRNN):
    kind = "mytreernn"


@pytest.fixture
def my_tree_kind(monkeypatch):
    """A new tree model kind, registered for one test."""
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    register("mytreernn")(_MyTreeRNN)
    return "mytreernn"


def test_a_new_tree_kind_is_one_registration(my_tree_kind, tmp_path, capsys):
    """The CLI takes the new kind and checks its flags against its own
    constructor (a tree model's: --mode applies, --max-len does not); the
    checkpoint rebuilds it; the runs treat it as a tree model."""
    assert my_tree_kind in model_kinds(tree=True)
    out = tmp_path / "run"
    code = main(["train", "--model", my_tree_kind, "--mode", "recursive", "--classify", "root", "--epochs", "1",
                 "--hidden", "4", "--embed-dim", "4", "--no-progress", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    from dynnets.train import load_checkpoint
    m = load_checkpoint(out / "best.npz")
    assert type(m) is _MyTreeRNN and m.config["mode"] == "recursive" and m.config["classify"] == "root"
    capsys.readouterr()
    code = main(["train", "--model", my_tree_kind, "--max-len", "5", "--out", str(tmp_path / "x")])
    assert code == 2 and f"--max-len does not apply to --model {my_tree_kind}" in capsys.readouterr().err
    res = runs.train_tree_rnn(my_tree_kind, epochs=1, embed_dim=4, hidden=4, max_sentences=20, progress=False,
                              sentences=["it is not good ."])
    assert res["kind"] == my_tree_kind and len(res["sentences"][0]["nodes"]) == 9
