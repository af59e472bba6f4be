"""Classification metrics for sentiment treebanks.

All functions take class probabilities (or predictions) and integer labels as
arrays and return plain Python values (JSON-ready).

SST conventions
---------------
* *Fine-grained* root accuracy: argmax over the 5 classes at the root.
* *Binary* root accuracy (SST-2): neutral roots (label 2) are dropped; a
  sentence is predicted positive when the positive probability mass exceeds
  the negative mass, P(3) + P(4) > P(0) + P(1) (ties count as negative), and
  compared with the label's side (0, 1 negative; 3, 4 positive). For any odd
  number of classes C the middle class is neutral and the classes below /
  above it are negative / positive; for even C there is no neutral class.
* *All-node* accuracy: fine-grained accuracy over every node of every tree.
"""
from __future__ import annotations

import numpy as np

__all__ = ["accuracy", "root_fine_accuracy", "binary_sides", "binary_predictions", "root_binary_accuracy",
           "node_accuracy", "confusion_matrix", "accuracy_by_length", "classification_report",
           "DEFAULT_LENGTH_EDGES"]

# sentence-length buckets: 1-10, 11-20, 21-30, 31-40, 41+ tokens
DEFAULT_LENGTH_EDGES = (10, 20, 30, 40)


def _proba(proba, name="proba"):
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"{name}: expected a 2-D array (n, num_classes >= 2), got shape {p.shape}")
    return p


def _labels(labels, n, name="labels"):
    y = np.asarray(labels)
    if y.ndim != 1 or y.shape[0] != n or (y.size and y.dtype.kind not in "iu"):
        raise ValueError(f"{name}: expected {n} integer labels (1-D), got shape {y.shape} and dtype {y.dtype}")
    return y.astype(np.int64, copy=False)


def accuracy(pred, labels):
    """Fraction of ``pred == labels`` (0.0 for no examples)."""
    pred = np.asarray(pred)
    y = _labels(labels, len(pred))
    return float(np.mean(pred == y)) if len(y) else 0.0


def root_fine_accuracy(proba, labels):
    """Argmax accuracy over all classes, (n, C) probabilities vs (n,) labels."""
    p = _proba(proba)
    return accuracy(p.argmax(1), _labels(labels, len(p)))


def binary_sides(num_classes):
    """(negative classes, positive classes, neutral class or None) for C classes."""
    C = int(num_classes)
    neg = list(range(C // 2))
    pos = list(range((C + 1) // 2, C))
    return neg, pos, (C // 2 if C % 2 else None)


def binary_predictions(proba):
    """1 where the positive mass exceeds the negative mass, else 0, for each row."""
    p = _proba(proba)
    neg, pos, _ = binary_sides(p.shape[1])
    return (p[:, pos].sum(1) > p[:, neg].sum(1)).astype(np.int64)


def root_binary_accuracy(proba, labels):
    """SST-2 accuracy: neutral roots dropped, sides compared by probability mass.

    Returns
    -------
    (accuracy, n) : (float, int)
        ``n`` is the number of non-neutral sentences scored.
    """
    p = _proba(proba)
    y = _labels(labels, len(p))
    neg, pos, neutral = binary_sides(p.shape[1])
    keep = y != neutral if neutral is not None else np.ones(len(y), dtype=bool)
    if not keep.any():
        return 0.0, 0
    truth = (y[keep] >= pos[0]).astype(np.int64)
    return accuracy(binary_predictions(p[keep]), truth), int(keep.sum())


def node_accuracy(node_proba, node_labels):
    """Fine-grained accuracy over all nodes."""
    return root_fine_accuracy(node_proba, node_labels)


def confusion_matrix(pred, labels, num_classes):
    """(C, C) counts: row = true class, column = predicted class."""
    pred = np.asarray(pred, dtype=np.int64)
    y = _labels(labels, len(pred))
    C = int(num_classes)
    bad = (pred < 0) | (pred >= C) | (y < 0) | (y >= C)
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(f"confusion_matrix: example {k} has label {int(y[k])} / prediction {int(pred[k])} "
                         f"outside 0..{C - 1}")
    m = np.zeros((C, C), dtype=np.int64)
    np.add.at(m, (y, pred), 1)
    return m


def accuracy_by_length(pred, labels, lengths, edges=DEFAULT_LENGTH_EDGES):
    """Accuracy per sentence-length bucket.

    ``edges`` (increasing) split lengths into ``<= edges[0]``,
    ``edges[0]+1 .. edges[1]``, ..., ``> edges[-1]``.

    Returns
    -------
    list of dict
        ``{"bucket": "11-20", "lo": 11, "hi": 20, "n": count, "accuracy": float or None}``
        (``hi`` is None for the open last bucket; accuracy None when empty).
    """
    pred = np.asarray(pred)
    y = _labels(labels, len(pred))
    L = np.asarray(lengths)
    if L.shape != y.shape:
        raise ValueError(f"accuracy_by_length: lengths.shape={L.shape} does not match labels.shape={y.shape}")
    edges = [int(e) for e in edges]
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"accuracy_by_length: edges must increase, got {edges}")
    out = []
    lo = 1
    for hi in edges + [None]:
        sel = (L >= lo) & (L <= hi) if hi is not None else (L >= lo)
        n = int(sel.sum())
        out.append({"bucket": f"{lo}-{hi}" if hi is not None else f"{lo}+", "lo": lo, "hi": hi, "n": n,
                    "accuracy": float(np.mean(pred[sel] == y[sel])) if n else None})
        if hi is not None:
            lo = hi + 1
    return out


def classification_report(root_proba, root_labels, lengths=None, node_proba=None, node_labels=None,
                          edges=DEFAULT_LENGTH_EDGES):
    """Every metric at once, as a JSON-ready dict.

    Keys: ``n``, ``root_fine``, ``root_binary``, ``n_binary``, ``confusion``
    (list of lists), ``by_length`` (when ``lengths`` is given), ``all_nodes``
    and ``n_nodes`` (when node probabilities are given).
    """
    p = _proba(root_proba, "root_proba")
    y = _labels(root_labels, len(p), "root_labels")
    pred = p.argmax(1)
    b, nb = root_binary_accuracy(p, y)
    rep = {"n": int(len(y)), "root_fine": accuracy(pred, y), "root_binary": b, "n_binary": nb,
           "confusion": confusion_matrix(pred, y, p.shape[1]).tolist()}
    if lengths is not None:
        rep["by_length"] = accuracy_by_length(pred, y, lengths, edges)
    if node_proba is not None:
        npr = _proba(node_proba, "node_proba")
        rep["all_nodes"] = node_accuracy(npr, _labels(node_labels, len(npr), "node_labels"))
        rep["n_nodes"] = int(len(npr))
    return rep
