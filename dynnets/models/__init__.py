"""Models: variable-length sequence classifiers and tree models.

``build_model(kind, vocab_size, **config)`` makes any of them by name (the
names the CLI's ``--model`` takes); a checkpoint stores ``kind`` and the
model's ``config`` so :func:`dynnets.train.load_checkpoint` can rebuild it.
"""
from __future__ import annotations

from .rnn import SequenceClassifier
from .tree import ChildSumTreeLSTM, TreeLSTM, TreeModel, TreeRNN

__all__ = ["SequenceClassifier", "TreeModel", "TreeLSTM", "TreeRNN", "ChildSumTreeLSTM", "build_model",
           "MODEL_KINDS"]

_SEQ = {"lstm": ("lstm", False), "gru": ("gru", False), "rnn": ("rnn", False),
        "bilstm": ("lstm", True), "bigru": ("gru", True), "birnn": ("rnn", True)}
_TREE = {"treelstm": TreeLSTM, "treernn": TreeRNN, "childsum": ChildSumTreeLSTM}
MODEL_KINDS = tuple(_TREE) + tuple(_SEQ) + ("bow", "padded-lstm")


def build_model(kind, vocab_size, **config):
    """A model by name: ``treelstm``, ``treernn``, ``childsum`` (tree models;
    ``mode="level"`` or ``"recursive"``), ``lstm``, ``gru``, ``rnn``,
    ``bilstm``, ``bigru``, ``birnn`` (sequence classifiers), ``bow`` (mean of
    word vectors, :mod:`dynnets.models.bow`), ``padded-lstm``
    (the static padded baseline, :mod:`dynnets.models.padded`).

    ``config`` holds the constructor's keyword arguments (e.g. ``hidden=150``);
    for a sequence kind, ``cell`` and ``bidirectional`` come from the name.
    """
    if kind in _TREE:
        return _TREE[kind](vocab_size, **config)
    if kind in _SEQ:
        cell, bi = _SEQ[kind]
        config = {k: v for k, v in config.items() if k not in ("cell", "bidirectional")}
        return SequenceClassifier(vocab_size, cell=cell, bidirectional=bi, **config)
    if kind == "bow":
        from .bow import BagOfWords
        return BagOfWords(vocab_size, **config)
    if kind == "padded-lstm":
        from . import padded
        return padded.build(vocab_size, **config)
    raise ValueError(f"build_model: unknown model kind {kind!r}; expected one of {', '.join(MODEL_KINDS)}")
