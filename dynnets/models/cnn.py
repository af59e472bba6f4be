"""The convolutional sentence classifier of Kim (2014), the standard padded
baseline of the SST literature, run padded or without padding.

Each sentence is a sequence of word vectors; for each filter width ``w``
(3, 4, 5) ``maps`` (100) filters slide over it (a wide convolution: every
window that holds at least one word, with zero vectors beyond the sentence,
so a one-word sentence has ``w`` windows), each map is rectified and
max-pooled over time, and the ``3 * maps`` features go through dropout
(0.5) to a linear softmax classifier (Kim 2014, §2; CNN-rand: random word
vectors ~ U(-0.25, 0.25)). ``max_norm=3`` is Kim's l2 constraint on the
classifier's rows (applied by :meth:`KimCNN.after_step`, which the trainer
calls after every optimizer step); ``phrases=True`` trains, as Kim did on
SST, on every distinct phrase of the training trees (each subtree with its
own label; :meth:`KimCNN.training_trees`), and evaluation stays on
sentences. Adadelta is not reproduced: the trainer's optimizers are used.

The convolution is one matrix product per batch: ``P = x @ W_all`` with the
filters of every width and tap side by side (``W_all`` (E, sum(w) * maps)),
then each width's output at window start ``s`` is ``sum_i P[s + i, block(w,
i)] + b_w`` (shifted slices added), which equals ``torch.nn.Conv1d``
(cross-correlation; the filters are stored in its layout, ``convs.<k>.weight``
(maps, E, w)).

Executions, the same function and gradients:

``packed``
    no padding to a common length: the sentences laid end to end with
    ``max(w) - 1`` zero rows between them (the wide convolution's margins,
    ``n + (max(w) - 1)(B + 1)`` rows), one product, the shifted sums, and
    each sentence's windows gathered for the max;
``padded``
    ``(B, T + 2 (max(w) - 1), E)`` padded to the batch maximum, the product on
    every padded row, windows past a sentence masked before the max;
``sentence`` / ``autobatch``
    one sentence at a time (under ``dn.autobatch()`` for the latter).
"""
from __future__ import annotations

import math

import numpy as np

from .. import nn
from ..autograd import ops
from ..nn.module import Parameter
from .common import RaggedBatch, SentenceExample, SentenceModelBase, collate_ragged, per_sentence, prepare_sentences
from .registry import register

__all__ = ["KimCNN"]

_EXECUTIONS = ("packed", "padded", "sentence", "autobatch")


class _Conv(nn.Module):
    """The parameters of a ``torch.nn.Conv1d(E, maps, w)``: ``weight``
    (maps, E, w), ``bias`` (maps,), torch's initialisation."""

    def __init__(self, E, maps, w, rng, dtype):
        super().__init__()
        bound = 1.0 / math.sqrt(E * w)
        self.width = int(w)
        self.weight = Parameter(rng.uniform(-bound, bound, (maps, E, w)).astype(dtype))
        self.bias = Parameter(rng.uniform(-bound, bound, maps).astype(dtype))


@register("cnn")
class KimCNN(SentenceModelBase, nn.Module):
    """Kim (2014)'s CNN sentence classifier (see the module docstring).

    Parameters
    ----------
    vocab_size : int
    embed_dim : int, default 300
    hidden : int, default 100
        Feature maps per filter width.
    widths : tuple of int, default (3, 4, 5)
    num_classes : int, default 5
    dropout : float, default 0.5
        On the pooled features, before the classifier.
    execution : 'packed', 'padded', 'sentence' or 'autobatch'
    embed_init : float or None, default 0.25
        Word vectors ~ U(-embed_init, embed_init); None: N(0, 1).
    max_norm : float or None, default None
        Kim's l2 max-norm on the classifier's rows (he used 3); None: no
        constraint. See :meth:`after_step`.
    phrases : bool, default False
        Train on every distinct phrase of the training trees, not only the
        sentences (Kim's SST protocol). See :meth:`training_trees`.
    seed : int
    dtype : str
    """

    kind = "cnn"
    example_type = SentenceExample
    batch_type = RaggedBatch

    def __init__(self, vocab_size, embed_dim=300, hidden=100, widths=(3, 4, 5), num_classes=5, dropout=0.5,
                 execution="packed", embed_init=0.25, max_norm=None, phrases=False, seed=0, dtype="float32"):
        nn.Module.__init__(self)
        if max_norm is not None and not float(max_norm) > 0:
            raise ValueError(f"KimCNN: max_norm must be positive or None, got {max_norm!r}")
        widths = tuple(int(w) for w in widths)
        if not widths or min(widths) < 1:
            raise ValueError(f"KimCNN: widths must be positive integers, got {widths}")
        if int(hidden) < 1:
            raise ValueError(f"KimCNN: hidden (feature maps per width) must be >= 1, got {hidden}")
        if execution not in _EXECUTIONS:
            raise ValueError(f"KimCNN: execution must be one of {', '.join(_EXECUTIONS)}, got {execution!r}")
        dt = np.dtype(dtype)
        self.config = dict(vocab_size=int(vocab_size), embed_dim=int(embed_dim), hidden=int(hidden),
                           widths=list(widths), num_classes=int(num_classes), dropout=float(dropout),
                           execution=execution, embed_init=None if embed_init is None else float(embed_init),
                           max_norm=None if max_norm is None else float(max_norm), phrases=bool(phrases),
                           seed=int(seed), dtype=str(dt))
        self._dtype = dt
        self.execution = execution
        self.widths = widths
        self.maps = int(hidden)
        self.margin = max(widths) - 1
        rng = np.random.default_rng([seed, 0])
        self.embedding = nn.Embedding(vocab_size, embed_dim, rng=rng, dtype=dt)
        if embed_init is not None:
            self.embedding.weight.numpy()[...] = rng.uniform(-embed_init, embed_init, (vocab_size, embed_dim))
        self.convs = nn.ModuleList([_Conv(int(embed_dim), self.maps, w, rng, dt) for w in widths])
        self.out = nn.Linear(len(widths) * self.maps, num_classes, rng=rng, dtype=dt)
        self.drop = nn.Dropout(dropout, rng=np.random.default_rng([seed, 2]))

    def prepare(self, trees, vocab):
        return prepare_sentences(trees, vocab)

    def collate(self, examples):
        return collate_ragged("KimCNN", examples)

    def _filters(self):
        """Every filter tap side by side, (E, sum(w) * maps): block ``i`` of
        width ``w`` is ``weight[:, :, i].T``."""
        E = self.config["embed_dim"]
        return ops.concat([ops.reshape(ops.permute(c.weight, (1, 2, 0)), (E, c.width * self.maps))
                           for c in self.convs], 1)

    def _conv(self, P, axis, n_win):
        """Each width's convolution (before the bias) from the tap products
        ``P``, ``n_win`` window starts along ``axis`` (0 or 1)."""
        out, col, m = [], 0, self.maps
        for c in self.convs:
            acc = None
            for i in range(c.width):
                sl = P[i:i + n_win, col:col + m] if axis == 0 else P[:, i:i + n_win, col:col + m]
                acc = sl if acc is None else acc + sl
                col += m
            out.append(acc + c.bias)
        return out

    def features(self, batch, vocab=None):
        """The max-pooled features of each sentence, (B, len(widths) * maps)."""
        b = self.as_batch(batch, vocab)
        B, M, m = len(b.lengths), self.margin, self.maps
        ex = self.execution
        if ex == "packed":
            n = len(b.ids)
            starts = M * np.arange(1, B + 1) + b.offsets[:-1]                      # first token of each sentence
            L = n + M * (B + 1)
            pos = np.repeat(starts - b.offsets[:-1], b.lengths) + np.arange(n)
            layout = np.zeros(L, dtype=np.int64)
            layout[pos] = b.ids
            keep = np.zeros((L, 1), dtype=self._dtype)
            keep[pos] = 1
            # the embedding primitive's row-sparse VJP, then zero rows between
            # the sentences (a gather from an extra zero row scatters its
            # gradient back with np.add.at: 30% of a training step, measured)
            P = ops.matmul(self.embedding(layout) * keep, self._filters())
            feats = []
            for c, conv in zip(self.convs, self._conv(P, 0, L - self.margin)):
                w = c.width
                R = ops.concat([ops.relu(conv), np.zeros((1, m), dtype=self._dtype)])
                span = int(b.lengths.max()) + w - 1
                j = np.arange(span)[None, :]
                idx = np.where(j < (b.lengths + w - 1)[:, None], starts[:, None] - (w - 1) + j, R.shape[0] - 1)
                # the embedding primitive: its VJP is a Numba scatter-add (np.add.at for a
                # getitem cost as much as the products, measured)
                feats.append(ops.max(ops.embedding(R, idx), axis=1))
            return ops.concat(feats, 1)
        if ex == "padded":
            T = int(b.lengths.max())
            Tp = T + 2 * M
            ids = b.padded_ids(Tp, left=M, fill=-1)
            keep = (ids >= 0).astype(self._dtype)[:, :, None]
            P = ops.matmul(self.embedding(np.maximum(ids, 0)) * keep, self._filters())   # (B, Tp, C): padding too
            feats = []
            s = np.arange(T + M)[None, :]
            for c, conv in zip(self.convs, self._conv(P, 1, T + M)):
                w = c.width
                valid = (s >= M - (w - 1)) & (s <= M - 1 + b.lengths[:, None])
                feats.append(ops.max(ops.relu(conv) * valid[:, :, None].astype(self._dtype), axis=1))
            return ops.concat(feats, 1)
        W = self._filters()
        E = self.config["embed_dim"]
        zeros = np.zeros((M, E), dtype=self._dtype)

        def one(ids):
            T = len(ids)
            P = ops.matmul(ops.concat([zeros, self.embedding(ids), zeros]), W)
            feats = []
            for c, conv in zip(self.convs, self._conv(P, 0, T + M)):
                feats.append(ops.max(ops.relu(conv[M - (c.width - 1):M + T]), axis=0))
            return ops.concat(feats)

        return per_sentence(one, b, autobatched=ex == "autobatch")

    def logits_and_labels(self, batch, which="loss", vocab=None):
        """Logits (B, C) and labels (one output per sentence)."""
        b = self.as_batch(batch, vocab)
        return self.out(self.drop(self.features(b))), b.labels

    def epoch_padding(self, trees, batches):
        """Rows the convolution's product computes in an epoch of ``batches``
        and how many are padding (zero rows): the wide convolution's
        ``max(w) - 1`` margins per sentence (shared between neighbours when
        packed), plus the padding to the batch maximum when padded. The keys
        of :func:`dynnets.runs.padding_waste`."""
        lengths = np.fromiter((len(t.leaves()) for t in trees), dtype=np.int64, count=len(trees))
        real = int(lengths.sum())
        M = self.margin
        if self.execution == "packed":
            steps = real + sum(M * (len(b) + 1) for b in batches if len(b))
        elif self.execution == "padded":
            steps = sum(len(b) * (int(lengths[b].max()) + 2 * M) for b in batches if len(b))
        else:
            steps = real + 2 * M * len(lengths)
        return {"steps": steps, "real_steps": real, "pad_steps": steps - real,
                "pad_fraction": (steps - real) / steps if steps else 0.0, "truncated": 0, "n": len(lengths),
                "max_len": None}

    def training_trees(self, trees):
        """The trees the trainer trains on: ``trees`` unchanged, or with
        ``phrases=True`` every subtree of every tree (a phrase with its own
        SST label), each distinct word sequence once (its first occurrence,
        tree by tree, each in preorder), as Kim (2014) trained on SST's
        phrases. Dev and test stay sentences."""
        if not self.config["phrases"]:
            return trees
        seen, out = set(), []
        for t in trees:
            for node in t.preorder():
                key = tuple(node.words())
                if key not in seen:
                    seen.add(key)
                    out.append(node)
        return out

    def after_step(self):
        """Kim's max-norm constraint: each row of the classifier's weight
        (C, 3 * maps), one class's weight vector, whose l2 norm exceeds
        ``max_norm`` is scaled back to norm ``max_norm`` (in place, after the
        optimizer step, as Kim's update does). No-op when ``max_norm`` is None."""
        s = self.config["max_norm"]
        if s is None:
            return
        w = self.out.weight.numpy()
        norms = np.sqrt(np.einsum("ij,ij->i", w, w))
        over = norms > s
        if over.any():
            w[over] *= (s / norms[over])[:, None].astype(w.dtype)

    def extra_repr(self):
        c = self.config
        return f"vocab={c['vocab_size']}, embed={c['embed_dim']}, widths={c['widths']}x{c['hidden']}, {c['execution']}"
