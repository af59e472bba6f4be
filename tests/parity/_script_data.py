"""Small data sets in the files formats the parity scripts read, made from
dynnets' sample treebank (``dynnets/data/samples``): the Stanford Tree-LSTM
preprocessing of SST (``sents.toks``, ``parents.txt``, ``labels.txt``), of
SICK (``a.toks``, ``b.toks``, ``a.parents``, ``b.parents``, ``sim.txt``) and
the movie-review polarity files (``rt-polarity.pos`` / ``.neg``).

This is the "data loading" part the parity check may change; the scripts read
these files with their own code, as their originals do."""
from __future__ import annotations

import numpy as np

from dynnets.data import load_samples


def _sample_trees(split, max_words, n):
    trees = [t for t in load_samples()[split] if len(t.words()) <= max_words]
    return trees[:n]


def _constituency(tree):
    """(words, parents, labels): leaves numbered 1..n left to right, internal
    nodes after them, the root's parent 0 (Stanford's ``parents.txt``)."""
    words = tree.words()
    n = len(words)
    parents, labels = {}, {}
    counter = [n]
    leaf = [0]

    def visit(t):
        if t.is_leaf:
            leaf[0] += 1
            idx = leaf[0]
        else:
            kids = [visit(c) for c in t.children]
            counter[0] += 1
            idx = counter[0]
            for k in kids:
                parents[k] = idx
        labels[idx] = int(t.label) - 2          # SST's -2..2
        return idx

    root = visit(tree)
    parents[root] = 0
    m = counter[0]
    return words, [parents[i] for i in range(1, m + 1)], [labels[i] for i in range(1, m + 1)]


def _dependency(tree):
    """(words, parents): a right-headed dependency tree over the words (the
    head of a constituent is its right child's head; the left child's head
    attaches to it), 1-based, the root's parent 0."""
    words = tree.words()
    parents = [0] * len(words)
    pos = [0]

    def head(t):
        if t.is_leaf:
            pos[0] += 1
            return pos[0]
        heads = [head(c) for c in t.children]
        for h in heads[:-1]:
            parents[h - 1] = heads[-1]
        return heads[-1]

    head(tree)
    return words, parents


def write_sst(root, sizes=(("train", 40), ("dev", 12), ("test", 12)), max_words=14):
    """SST in the Stanford Tree-LSTM layout under ``root``: ``<split>/sents.toks``,
    ``parents.txt``, ``labels.txt``, and ``vocab-cased.txt``."""
    vocab = set()
    for split, n in sizes:
        d = root / split
        d.mkdir(parents=True, exist_ok=True)
        toks, pars, labs = [], [], []
        for t in _sample_trees(split, max_words, n):
            w, p, lab = _constituency(t)
            vocab |= set(w)
            toks.append(" ".join(w))
            pars.append(" ".join(map(str, p)))
            labs.append(" ".join(map(str, lab)))
        (d / "sents.toks").write_text("\n".join(toks) + "\n")
        (d / "parents.txt").write_text("\n".join(pars) + "\n")
        (d / "labels.txt").write_text("\n".join(labs) + "\n")
    (root / "vocab-cased.txt").write_text("\n".join(sorted(vocab)) + "\n")
    return root


def write_sick(root, sizes=(("train", 30), ("dev", 10), ("test", 10)), max_words=12, seed=0):
    """SICK-like sentence pairs under ``root/<split>/``: two sample sentences,
    their dependency parents, and a relatedness score 1 + 4 * (Jaccard
    overlap of their word sets) in ``sim.txt``."""
    rng = np.random.default_rng(seed)
    for split, n in sizes:
        trees = _sample_trees(split, max_words, 2 * n + 5)
        d = root / split
        d.mkdir(parents=True, exist_ok=True)
        rows = {"a.toks": [], "b.toks": [], "a.parents": [], "b.parents": [], "sim.txt": []}
        for k in range(n):
            ta = trees[k]
            # every third pair is a sentence with itself or a near neighbour, for high scores
            tb = ta if k % 3 == 0 else trees[int(rng.integers(n, len(trees)))]
            wa, pa = _dependency(ta)
            wb, pb = _dependency(tb)
            sim = 1 + 4 * len(set(wa) & set(wb)) / len(set(wa) | set(wb))
            rows["a.toks"].append(" ".join(wa))
            rows["b.toks"].append(" ".join(wb))
            rows["a.parents"].append(" ".join(map(str, pa)))
            rows["b.parents"].append(" ".join(map(str, pb)))
            rows["sim.txt"].append(f"{sim:.4f}")
        for name, lines in rows.items():
            (d / name).write_text("\n".join(lines) + "\n")
    return root


def polarity_sentences(n=96, max_words=16, split="train"):
    """(sentences, labels) with labels 1 (positive root) / 0 (negative), neutral
    roots dropped, in file order."""
    sents, labels = [], []
    for t in load_samples()[split]:
        if int(t.label) == 2 or len(t.words()) > max_words:
            continue
        sents.append(" ".join(t.words()))
        labels.append(1 if int(t.label) > 2 else 0)
        if len(sents) == n:
            break
    return sents, labels


def write_polarity(root, n=96, max_words=16):
    """``rt-polarity.pos`` and ``rt-polarity.neg`` under ``root``."""
    sents, labels = polarity_sentences(n, max_words)
    root.mkdir(parents=True, exist_ok=True)
    (root / "rt-polarity.pos").write_text("\n".join(s for s, y in zip(sents, labels) if y) + "\n")
    (root / "rt-polarity.neg").write_text("\n".join(s for s, y in zip(sents, labels) if not y) + "\n")
    return root


def write_lm(root, n_train=40, n_valid=10):
    """``train.txt`` and ``valid.txt`` (one sentence a line) under ``root``,
    pytorch/examples' word_language_model layout."""
    s = load_samples()
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.txt").write_text("\n".join(" ".join(t.words()) for t in s["train"][:n_train]) + "\n")
    (root / "valid.txt").write_text("\n".join(" ".join(t.words()) for t in s["dev"][:n_valid]) + "\n")
    return root
