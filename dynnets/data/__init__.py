"""Data layer: parse trees, the SST format, vocabularies, a compositional sample
treebank, and minibatch layouts. Depends on numpy and networkx only.

The modules::

    trees      Tree, parse_tree, read_trees, write_trees, networkx, binarize, collapse_unary,
               binary_tree, first_nonbinary / node_position / tree_line (locating a node in its file),
               from the two modules that define them:
    tree       the immutable Tree, networkx, the binary rewrites and first_nonbinary
    ptb        the bracket format: parse_tree, read_trees, write_trees, node_position, tree_line
    text       tokenize, sentence_tree (plain text -> binary tree), read_tree (user input: an SST
               tree, an unlabelled bracketed tree or plain text)
    encoding   where a file stops being UTF-8 (line, column, byte offset)
    sst        load_sst, label views (fine / binary), the class names, PTB unescaping
    vocab      Vocabulary, load_embeddings
    synthetic  seeded generator of compositional sentiment trees; the labelling rules
    batching   BucketSampler, pad_batch, TreeArrays / merge / TreeBatch (level schedules)
"""

from __future__ import annotations

from pathlib import Path

from .batching import BucketSampler, PaddedBatch, TreeArrays, TreeBatch, merge, pad_batch, tree_arrays, tree_batch
from .sst import (BINARY_CLASSES, CLASS_NAMES, FINE_CLASSES, IGNORE, binary_label, class_names, escape_ptb, label_view,
                  load_sst, node_labels, root_labels, unescape_ptb)
from .text import read_tree, sentence_tree, tokenize
from .trees import (Tree, TreeParseError, TreeParseWarning, binarize, binary_tree, collapse_unary, from_networkx,
                    parse_tree, read_trees, to_networkx, write_trees)
from .vocab import Embeddings, Vocabulary, load_embeddings

__all__ = [
    "Tree", "TreeParseError", "TreeParseWarning", "parse_tree", "read_trees", "write_trees", "to_networkx",
    "from_networkx", "binarize", "collapse_unary", "binary_tree", "tokenize", "sentence_tree", "read_tree",
    "load_sst", "label_view", "binary_label", "root_labels", "node_labels", "unescape_ptb", "escape_ptb",
    "IGNORE", "FINE_CLASSES", "BINARY_CLASSES", "CLASS_NAMES", "class_names",
    "Vocabulary", "Embeddings", "load_embeddings",
    "BucketSampler", "PaddedBatch", "pad_batch", "TreeArrays", "tree_arrays", "TreeBatch", "merge", "tree_batch",
    "samples_dir", "load_samples",
]


def samples_dir() -> Path:
    """Directory of the shipped sample treebank (``train.txt``, ``dev.txt``, ``test.txt``)."""
    return Path(__file__).resolve().parent / "samples"


def load_samples(**kwargs) -> dict:
    """``load_sst(samples_dir(), **kwargs)``."""
    return load_sst(samples_dir(), **kwargs)
