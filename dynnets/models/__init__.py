"""Models: variable-length sequence classifiers and tree models.

``build_model(kind, vocab_size, **config)`` makes any of them by name (the
names the CLI's ``--model`` takes); a checkpoint stores ``kind`` and the
model's ``config`` so :func:`dynnets.train.load_checkpoint` can rebuild it.
The kinds live in one registry (:mod:`dynnets.models.registry`): a model
module registers its classes (``@register("treelstm")``) and is imported
here; :data:`MODEL_KINDS` lists them in this order.
"""
from __future__ import annotations

from .registry import build_model, model_class, model_kinds, model_parameters, register
from .tree import ChildSumTreeLSTM, TreeLSTM, TreeModel, TreeRNN  # noqa: I001 (import order = kind order)
from .rnn import SequenceClassifier
from .bow import BagOfWords
from .padded import DynamicRNNClassifier, PaddedLSTMClassifier
from .static_tree import StaticTreeLSTM

__all__ = ["SequenceClassifier", "TreeModel", "TreeLSTM", "TreeRNN", "ChildSumTreeLSTM", "BagOfWords",
           "PaddedLSTMClassifier", "DynamicRNNClassifier", "StaticTreeLSTM", "build_model", "register", "model_class",
           "model_kinds", "model_parameters", "MODEL_KINDS"]

#: Every registered kind, tree models first (the order of ``dynnets train --help``).
MODEL_KINDS = model_kinds()

# issue 25 (branch i25-models): registered after the others, so appended to MODEL_KINDS
from .cnn import KimCNN  # noqa: E402
from .transformer import TransformerClassifier  # noqa: E402

__all__ += ["KimCNN", "TransformerClassifier"]
MODEL_KINDS = model_kinds()
