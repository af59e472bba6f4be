"""The Stanford Sentiment Treebank (Socher et al., EMNLP 2013) and files in its format.

A dataset directory holds any of ``train.txt``, ``dev.txt``, ``test.txt``,
one tree per line, a label 0-4 on every node (0 very negative, 2 neutral, 4
very positive). The package's own sample treebank (:func:`dynnets.data.samples_dir`)
uses the same layout.

Label views
-----------
fine   5 classes, labels unchanged.
binary 2 classes (the "SST-2" task): trees whose root is 2 are dropped;
       labels 0, 1 -> 0 (negative) and 3, 4 -> 1 (positive) at every node;
       neutral inner nodes get ``IGNORE`` (-1), which a loss should skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from .trees import Tree, read_trees

__all__ = ["SPLITS", "IGNORE", "FINE_CLASSES", "BINARY_CLASSES", "CLASS_NAMES", "class_names", "load_sst",
           "label_view", "binary_label", "root_labels", "node_labels", "unescape_ptb", "escape_ptb"]

SPLITS = ("train", "dev", "test")
IGNORE = -1
FINE_CLASSES = 5
BINARY_CLASSES = 2
#: Names of the classes for 5 (SST fine-grained) and 2 (binary) classes.
CLASS_NAMES = {FINE_CLASSES: ("very negative", "negative", "neutral", "positive", "very positive"),
               BINARY_CLASSES: ("negative", "positive")}


def class_names(C):
    """Names of ``C`` classes (SST's five, the binary two, else the numbers)."""
    return CLASS_NAMES.get(C, tuple(str(i) for i in range(C)))

_UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}
_ESCAPE = {v: k for k, v in _UNESCAPE.items()}


def unescape_ptb(word: str) -> str:
    """Undo PTB escapes: ``-LRB-`` -> ``(`` (also ``-RRB-``, ``-LSB-``, ``-RSB-``,
    ``-LCB-``, ``-RCB-``), ``\\/`` -> ``/``, ``\\*`` -> ``*``."""
    w = _UNESCAPE.get(word)
    if w is not None:
        return w
    if "\\" in word:
        return word.replace("\\/", "/").replace("\\*", "*")
    return word


def escape_ptb(word: str) -> str:
    """Inverse of :func:`unescape_ptb` for brackets, ``/`` and ``*``."""
    w = _ESCAPE.get(word)
    if w is not None:
        return w
    if "/" in word or "*" in word:
        return word.replace("/", "\\/").replace("*", "\\*")
    return word


def load_sst(directory: str | os.PathLike, *, splits: Sequence[str] | None = None, unescape: bool = False,
             num_classes: int = FINE_CLASSES, on_error: str = "raise") -> dict[str, list[Tree]]:
    """Load the SST-format splits found in ``directory``.

    Parameters
    ----------
    directory : path-like
        Holds ``train.txt``, ``dev.txt`` and/or ``test.txt``.
    splits : sequence of str, optional
        Splits that must be present; by default every split file found is loaded.
    unescape : bool
        Apply :func:`unescape_ptb` to every word (the trees then print with
        bare brackets and no longer round-trip through :func:`parse_tree`).
    num_classes : int
        Labels must be in ``0..num_classes-1``.
    on_error : {"raise", "skip"}
        As in :func:`read_trees`.

    Returns
    -------
    dict
        Split name -> list of trees, in the order train, dev, test.

    Raises
    ------
    FileNotFoundError
        The directory does not exist, has no split file, or lacks a requested
        split; the message lists what was found.
    ValueError
        A split file that holds no trees (empty, only blank lines, or every
        line skipped with ``on_error="skip"``); the message names the file.
        An empty split is a truncated copy or a wrong path far more often
        than an intent, and would otherwise surface later as a numpy error
        or as a model trained and selected on nothing.
    """
    d = Path(directory)
    if not d.exists():
        raise FileNotFoundError(f"load_sst: directory '{d}' does not exist")
    if not d.is_dir():
        raise NotADirectoryError(f"load_sst: '{d}' is not a directory")
    present = [s for s in SPLITS if (d / f"{s}.txt").is_file()]
    if splits is None:
        wanted = present
    else:
        unknown = [s for s in splits if s not in SPLITS]
        if unknown:
            raise ValueError(f"load_sst: unknown split(s) {unknown}; expected some of {list(SPLITS)}")
        wanted = list(splits)
    missing = [s for s in wanted if s not in present]
    if not wanted or missing:
        found = sorted(p.name + ("/" if p.is_dir() else "") for p in d.iterdir())
        listing = ", ".join(found[:20]) + (f", ... ({len(found)} entries)" if len(found) > 20 else "")
        need = ", ".join(f"{s}.txt" for s in (missing or SPLITS))
        raise FileNotFoundError(f"load_sst: no {need} in '{d}' (expected "
                                f"{'these split files' if missing else 'at least one of them'}); "
                                f"found: {listing or 'an empty directory'}")
    out: dict[str, list[Tree]] = {}
    for s in SPLITS:
        if s in wanted:
            reader = read_trees(d / f"{s}.txt", num_classes=num_classes, on_error=on_error)
            trees = list(reader)
            if not trees:
                raise ValueError(_no_trees(reader))
            if unescape:
                trees = [t.map_words(unescape_ptb) for t in trees]
            out[s] = trees
    return out


def _no_trees(reader) -> str:
    """Why the file of ``reader`` (read to its end) gave no tree."""
    n = reader.lines_read
    if reader.skipped:
        why = f"all {n} of its lines were skipped as malformed; first: {reader.skipped[0]}"
    elif n == 0:
        why = "the file is empty"
    else:
        why = f"its {n} line{'s are' if n > 1 else ' is'} blank"
    return f"{reader.path}: no trees in this file ({why}); an SST split file holds one tree per line"


def binary_label(label: int) -> int:
    """0, 1 -> 0; 3, 4 -> 1; 2 (neutral) -> ``IGNORE``."""
    if label < 2:
        return 0
    if label > 2:
        return 1
    return IGNORE


def label_view(trees: Iterable[Tree], view: str = "fine") -> list[Tree]:
    """Trees relabelled for a task.

    ``"fine"`` returns the trees unchanged (5 classes). ``"binary"`` drops
    trees whose root label is 2 and maps every node with :func:`binary_label`
    (neutral inner nodes become ``IGNORE``).
    """
    if view == "fine":
        return list(trees)
    if view == "binary":
        return [t.map_labels(binary_label) for t in trees if t.label != 2]
    raise ValueError(f"label_view: view must be 'fine' or 'binary', got {view!r}")


def root_labels(trees: Iterable[Tree]) -> np.ndarray:
    """Root label of each tree, shape ``(n_trees,)``, int64."""
    return np.fromiter((t.label for t in trees), dtype=np.int64)


def node_labels(trees: Iterable[Tree]) -> np.ndarray:
    """Labels of every node, tree by tree, each tree in postorder; int64."""
    return np.fromiter((n.label for t in trees for n in t.postorder()), dtype=np.int64)
