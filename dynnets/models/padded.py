"""The padded baseline: an LSTM sentiment classifier as a static graph, the way
TensorFlow 1.x users wrote it.

The graph is built once for a fixed ``batch_size`` and a fixed ``max_len``:
every sentence is cut to its first ``max_len`` tokens and filled up with
``<pad>`` (id 0) to ``max_len``; the last, partial batch of an epoch is filled
with dummy rows (all ``<pad>``, weight 0) that count neither in the loss nor in
the predictions. The LSTM is unrolled over ``max_len`` steps with the fused
``lstm_cell`` primitive: embedding -> LSTM -> final state -> linear ->
softmax cross-entropy on the root label.

``masked=False`` is naive padded code: the pad steps feed the LSTM like words,
so the final state has read ``max_len - n`` pads after the sentence.
``dropout`` (on the final state, before the classifier) and ``embed_dropout``
(on the word vectors) are TF1's ``nn.dropout`` in the training graph: a new
mask at every ``Session.run`` (``dropout_mask`` nodes seeded from ``seed``),
as TF1 users trained; predictions run a second forward without dropout that
shares the variables.

``masked=True`` carries the state through pad steps unchanged,
``h_t = m_t * h_new + (1 - m_t) * h_{t-1}`` (and likewise ``c``), so the final
state is the state after the last real token (the masked update is one fused
Numba kernel per step in the compiled plan).

Initial weights are those of the dynamic
``SequenceClassifier(vocab_size, embed_dim, hidden_size, num_classes,
cell="lstm", seed=seed)``: the same random draws in the same order, and
``state_dict`` uses its names, so weights move between the two.

The forward is written once (:func:`forward`) against dynnets ops; the static
graph is that function applied to placeholders and Variables, and
:meth:`PaddedLSTMClassifier.eager_loss_and_grads` applies it to eager tensors,
so the two modes run the same computation (tested, and compared by
``benchmarks/bench_static.py``).

Training protocol of :mod:`dynnets.train` for static models: ``is_static``,
``make_batch``, ``train_step``, ``predict_proba``, ``state_dict`` /
``load_state_dict``, ``padding_stats`` / ``reset_padding_stats``, ``kind``,
``config``. The optimizer is the model's own (a static train op): the word
embeddings get no weight decay (as the dynamic models' embedding parameter
group) and, with Adam, lazy row updates.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import static as ds
from ..autograd import ops
from ..autograd.tensor import Parameter
from ..data.batching import pad_batch
from .registry import register

__all__ = ["PaddedLSTMClassifier", "PaddedBatch", "forward", "pad_sentences", "train_ops", "DynamicRNNClassifier",
           "BucketedBatch", "bucket_sentences"]

PAD_ID = 0
PARAM_NAMES = ("embedding.weight", "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "out.weight",
               "out.bias")


@dataclass(frozen=True, eq=False)
class PaddedBatch:
    """Sentences padded to ``max_len`` in chunks of ``batch_size`` rows.

    Attributes
    ----------
    ids : (n_chunks, max_len, batch_size) int64
        Time-major word ids; ``<pad>`` (0) after the sentence and in dummy rows.
    mask : (n_chunks, max_len, batch_size, 1) float32
        1 on real tokens, 0 on pads.
    labels : (n_chunks, batch_size) int64
        Root labels (0 in dummy rows).
    weights : (n_chunks, batch_size) float32
        1 for real sentences, 0 for dummy rows.
    n_sentences : int
        Real sentences (rows beyond it are dummies).
    n_real_steps : int
        Real tokens kept, ``sum(min(len, max_len))``.
    n_pad_steps : int
        LSTM steps spent on padding: ``n_chunks * batch_size * max_len - n_real_steps``
        (pads after sentences and the dummy rows' steps).
    n_truncated : int
        Sentences longer than ``max_len`` (their tail is cut).
    """

    ids: np.ndarray
    mask: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    n_sentences: int
    n_real_steps: int
    n_pad_steps: int
    n_truncated: int

    @property
    def n_chunks(self):
        return self.ids.shape[0]

    def rows(self, k):
        """Real rows in chunk ``k``."""
        return int(self.weights[k].sum())


def pad_sentences(id_lists, labels, batch_size, max_len):
    """Pad/truncate sentences (sequences of ids) into a :class:`PaddedBatch`
    with :func:`dynnets.data.batching.pad_batch`: sentences keep their first
    ``max_len`` tokens (``truncate="post"``) and are padded after the last one;
    dummy (empty, weight 0) rows fill the last chunk."""
    n = len(id_lists)
    if n == 0:
        raise ValueError("pad_sentences: no sentences")
    chunks = math.ceil(n / batch_size)
    rows = chunks * batch_size
    empty = np.zeros(0, np.int64)
    pb = pad_batch(list(id_lists) + [empty] * (rows - n), max_len=max_len, truncate="post", pad_id=PAD_ID)
    lab = np.zeros(rows, dtype=np.int64)
    lab[:n] = np.asarray(labels, dtype=np.int64)
    w = np.zeros(rows, dtype=np.float32)
    w[:n] = 1.0
    # time-major chunks: (chunks, T, B)
    ids = np.ascontiguousarray(pb.ids.reshape(chunks, batch_size, max_len).transpose(0, 2, 1))
    mask = np.ascontiguousarray(pb.mask.reshape(chunks, batch_size, max_len).transpose(0, 2, 1))[..., None]
    real = int(pb.lengths.sum())
    return PaddedBatch(ids, mask, lab.reshape(chunks, batch_size), w.reshape(chunks, batch_size), n, real,
                       rows * max_len - real, int(pb.n_truncated))


def forward(params, ids, mask, labels, weights, hidden_size, masked, dropout=0.0, embed_dropout=0.0, rng=None):
    """The classifier as a function of dynnets ops: symbolic values build the
    static graph, eager tensors compute.

    Parameters
    ----------
    params : sequence
        embedding (V, E), weight_ih (4H, E), weight_hh (4H, H), bias_ih (4H,),
        bias_hh (4H,), out weight (C, H), out bias (C,).
    ids : (T, B) int64;  mask : (T, B, 1) float32 (ignored unless ``masked``)
    labels : (B,) int64;  weights : (B,) float32 (0 drops a row from the loss)
    dropout, embed_dropout : float
        Inverted dropout of the final state and of the word vectors; ``rng``
        draws the masks (eager) or the seeds of the graph's mask nodes, which
        draw anew at every run (symbolic).

    Returns
    -------
    loss (mean cross-entropy over rows of weight 1), probabilities (B, C)
    """
    E, w_ih, w_hh, b_ih, b_hh, W, b = params
    T, B = ids.shape
    dt = np.dtype(E.dtype)
    h = np.zeros((B, hidden_size), dt)
    c = h
    for t in range(T):
        x = ops.embedding(E, ids[t])
        if embed_dropout:
            x = ops.dropout(x, embed_dropout, rng)
        h2, c2 = ops.lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh)
        if masked:
            m = mask[t]
            keep = 1.0 - m
            h = m * h2 + keep * h
            c = m * c2 + keep * c
        else:
            h, c = h2, c2
    if dropout:
        h = ops.dropout(h, dropout, rng)
    logits = ops.linear(h, W, b)
    loss = ops.cross_entropy(logits, labels, mask=weights)
    return loss, ops.softmax(logits)


def train_ops(optimizer, lr, wd, loss, variables, embedding="embedding.weight"):
    """The train op of a static classifier and its gradients by variable name.

    ``variables``: name -> Variable. The word embeddings (``embedding``) get
    no weight decay (as the dynamic models' embedding parameter group) and,
    with Adam, lazy row updates; Adagrad has PyTorch's defaults (accumulator
    0, eps 1e-10), as the dynamic models' optimizer.
    """
    emb = variables[embedding]
    rest = [v for v in variables.values() if v is not emb]
    if optimizer == "adagrad":
        o_rest = ds.train.AdagradOptimizer(lr, initial_accumulator_value=0.0, epsilon=1e-10, weight_decay=wd,
                                           name="Adagrad")
        o_emb = ds.train.AdagradOptimizer(lr, initial_accumulator_value=0.0, epsilon=1e-10, name="Adagrad_emb")
    elif optimizer == "adam":
        # PyTorch's epsilon, as the dynamic models' optim.Adam (TF1's AdamOptimizer adds it elsewhere)
        o_rest = ds.train.AdamOptimizer(lr, weight_decay=wd, name="Adam", torch_epsilon=True)
        o_emb = ds.train.AdamOptimizer(lr, lazy=True, name="Adam_emb", torch_epsilon=True)
    else:
        o_rest = ds.train.GradientDescentOptimizer(lr, weight_decay=wd, name="SGD")
        o_emb = ds.train.GradientDescentOptimizer(lr, name="SGD_emb")
    gv = o_rest.compute_gradients(loss, rest + [emb])
    grads = OrderedDict((next(k for k, v in variables.items() if v is var), gr) for gr, var in gv)
    return grads, ds.group(o_rest.apply_gradients(gv[:-1]), o_emb.apply_gradients(gv[-1:]), name="train")


class StaticWeights:
    """What a static-graph model shares with an eager ``nn.Module`` for its
    weights: ``train``/``eval`` and ``state_dict``/``load_state_dict`` over
    ``self.variables`` (name -> Variable) in ``self.session``."""

    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def state_dict(self):
        """Copies of the weights, named as the eager model's with the same kind of network."""
        return OrderedDict((k, self.session.variable_value(v)) for k, v in self.variables.items())

    def load_state_dict(self, state, strict=True):
        """Copy weights in (optimizer state is kept). Raises ``KeyError`` for
        missing/unexpected names (``strict``) and ``ValueError`` for a shape
        mismatch, before changing anything."""
        name = type(self).__name__
        missing = [k for k in self.variables if k not in state]
        unexpected = [k for k in state if k not in self.variables]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict for {name}: missing keys: {missing}; unexpected keys: {unexpected}")
        vals = {}
        for k, v in self.variables.items():
            if k not in state:
                continue
            arr = np.asarray(state[k].numpy() if hasattr(state[k], "numpy") and not isinstance(state[k], np.ndarray)
                             else state[k])
            if arr.shape != tuple(v.shape):
                raise ValueError(f"load_state_dict for {name}: size mismatch for {k}: checkpoint has "
                                 f"shape {arr.shape}, the model has {tuple(v.shape)}")
            vals[k] = arr
        for k, arr in vals.items():
            self.variables[k].load(arr, self.session)
        return missing, unexpected


@register("padded-lstm", aliases={"hidden": "hidden_size"})
class PaddedLSTMClassifier(StaticWeights):
    """Padded, unrolled LSTM classifier as a static graph (see the module docstring).

    Parameters
    ----------
    vocab_size : int
    embed_dim : int, default 300
    hidden_size : int, default 150
    num_classes : int, default 5
    batch_size : int, default 25
        Rows of the graph; larger batches run as several steps of this size.
    max_len : int, default 50
        Unrolled steps; longer sentences are truncated.
    masked : bool, default True
    dropout : float, default 0
        Dropout on the final state (training only; a new mask every step).
    embed_dropout : float, default 0
        Dropout on the word vectors (training only).
    optimizer : {"adagrad", "adam", "sgd"}
        Adagrad has PyTorch's defaults (accumulator 0, eps 1e-10), as the
        dynamic models' optimizer.
    lr : float, default 0.05
    weight_decay : float, default 0
        L2 penalty on every parameter except the word embeddings.
    seed : int
    """

    is_static = True
    kind = "padded-lstm"

    def __init__(self, vocab_size, embed_dim=300, hidden_size=150, num_classes=5, batch_size=25, max_len=50,
                 masked=True, optimizer="adagrad", lr=0.05, weight_decay=0.0, seed=0, dropout=0.0,
                 embed_dropout=0.0):
        if int(max_len) < 1:
            raise ValueError(f"PaddedLSTMClassifier: max_len must be a positive integer, got {max_len}")
        for nm, v in (("dropout", dropout), ("embed_dropout", embed_dropout)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
                raise ValueError(f"PaddedLSTMClassifier: {nm} must be in [0, 1), got {v!r}")
        self.max_len, self.masked = int(max_len), bool(masked)
        self.dropout, self.embed_dropout = float(dropout), float(embed_dropout)
        self._setup(vocab_size, embed_dim, hidden_size, num_classes, batch_size, optimizer, lr, weight_decay, seed,
                    max_len=self.max_len, masked=self.masked, dropout=self.dropout, embed_dropout=self.embed_dropout)

    def _setup(self, vocab_size, embed_dim, hidden_size, num_classes, batch_size, optimizer, lr, weight_decay, seed,
               **extra):
        """Check and record the config (``extra``: a subclass's own entries), draw the weights, build the graph."""
        name = type(self).__name__
        if optimizer not in ("adagrad", "adam", "sgd"):
            raise ValueError(f"{name}: optimizer must be 'adagrad', 'adam' or 'sgd', got {optimizer!r}")
        for nm, v in (("vocab_size", vocab_size), ("embed_dim", embed_dim), ("hidden_size", hidden_size),
                      ("num_classes", num_classes), ("batch_size", batch_size)):
            if int(v) < 1:
                raise ValueError(f"{name}: {nm} must be a positive integer, got {v}")
        self.config = dict(vocab_size=int(vocab_size), embed_dim=int(embed_dim), hidden_size=int(hidden_size),
                           num_classes=int(num_classes), batch_size=int(batch_size), **extra, optimizer=optimizer,
                           lr=float(lr), weight_decay=float(weight_decay), seed=int(seed))
        self.vocab_size, self.embed_dim = int(vocab_size), int(embed_dim)
        self.hidden_size, self.num_classes = int(hidden_size), int(num_classes)
        self.batch_size = int(batch_size)
        self._seed = int(seed)
        self.training = True
        self._initial = self._init_weights(int(seed))
        self._build(optimizer, float(lr), float(weight_decay))
        self.reset_padding_stats()

    # --- weights ------------------------------------------------------------------
    def _init_weights(self, seed):
        """The draws of SequenceClassifier(cell="lstm") with the same seed, in its order."""
        rng = np.random.default_rng([seed, 0])
        V, E, H, C = self.vocab_size, self.embed_dim, self.hidden_size, self.num_classes
        dt = np.float32
        out = OrderedDict()
        out["embedding.weight"] = rng.standard_normal((V, E)).astype(dt)
        bound = 1.0 / math.sqrt(H)
        out["weight_ih_l0"] = rng.uniform(-bound, bound, (4 * H, E)).astype(dt)
        out["weight_hh_l0"] = rng.uniform(-bound, bound, (4 * H, H)).astype(dt)
        out["bias_ih_l0"] = rng.uniform(-bound, bound, (4 * H,)).astype(dt)
        out["bias_hh_l0"] = rng.uniform(-bound, bound, (4 * H,)).astype(dt)
        out["out.weight"] = rng.uniform(-bound, bound, (C, H)).astype(dt)
        out["out.bias"] = rng.uniform(-bound, bound, (C,)).astype(dt)
        return out

    def _build(self, optimizer, lr, wd):
        T, B = self.max_len, self.batch_size
        self.graph = g = ds.Graph()
        with g.as_default():
            self._ids = ds.placeholder((T, B), np.int64, name="ids")
            self._mask = ds.placeholder((T, B, 1), np.float32, name="mask") if self.masked else None
            self._labels = ds.placeholder((B,), np.int64, name="labels")
            self._weights = ds.placeholder((B,), np.float32, name="weights")
            self.variables = OrderedDict((k, ds.Variable(v, name=k)) for k, v in self._initial.items())
            params = list(self.variables.values())
            self._loss, self._probs = forward(params, self._ids, self._mask, self._labels, self._weights,
                                              self.hidden_size, self.masked)
            train_loss = self._loss
            if self.dropout or self.embed_dropout:
                # a training forward of its own, sharing the variables: dropout
                # draws a new mask at every run; predictions read the other one
                with ds.name_scope("train"):
                    train_loss, _ = forward(params, self._ids, self._mask, self._labels, self._weights,
                                            self.hidden_size, self.masked, self.dropout, self.embed_dropout,
                                            np.random.default_rng([self._seed, 1]))
            self._train_loss = train_loss
            self._grads, self._train_op = train_ops(optimizer, lr, wd, train_loss, self.variables)
            init = ds.global_variables_initializer()
        self.session = ds.Session(g)
        self.session.run(init)

    # --- the static-model protocol -------------------------------------------------
    def make_batch(self, trees, vocab):
        """Pad/truncate the trees' leaf words into a :class:`PaddedBatch`."""
        ids = getattr(vocab, "ids", None)
        sents = [ids(t.words()) if ids is not None else [vocab[w] for w in t.words()] for t in trees]
        return pad_sentences(sents, [int(t.label) for t in trees], self.batch_size, self.max_len)

    def _feed(self, batch, k):
        fd = {self._ids: batch.ids[k], self._labels: batch.labels[k], self._weights: batch.weights[k]}
        if self.masked:
            fd[self._mask] = batch.mask[k]
        return fd

    def _check(self, batch):
        if batch.ids.shape[1:] != (self.max_len, self.batch_size):
            raise ValueError(f"PaddedLSTMClassifier: batch was made for max_len={batch.ids.shape[1]}, "
                             f"batch_size={batch.ids.shape[2]}; this model has max_len={self.max_len}, "
                             f"batch_size={self.batch_size}")

    def train_step(self, batch):
        """Forward, backward and update: one ``Session.run`` of the train op per
        chunk of ``batch_size`` rows. Returns the mean loss over the batch's
        sentences."""
        self._check(batch)
        total = 0.0
        for k in range(batch.n_chunks):
            _, lv = self.session.run([self._train_op, self._train_loss], self._feed(batch, k))
            total += float(lv) * batch.rows(k)
        self._count(batch)
        return total / batch.n_sentences

    def predict_proba(self, batch):
        """Root-class probabilities of the real sentences, (n_sentences, num_classes)."""
        self._check(batch)
        out = [self.session.run(self._probs, self._feed(batch, k))[:batch.rows(k)] for k in range(batch.n_chunks)]
        self._count(batch)
        return np.concatenate(out)

    def _count(self, batch):
        st = self._stats
        st["pad_steps"] += batch.n_pad_steps
        st["real_steps"] += batch.n_real_steps
        st["truncated_sentences"] += batch.n_truncated
        st["sentences"] += batch.n_sentences

    def padding_stats(self):
        """Steps and sentences processed (train_step and predict_proba) since
        the last :meth:`reset_padding_stats`: ``pad_steps``, ``real_steps``,
        ``truncated_sentences``, ``sentences``."""
        return dict(self._stats)

    def reset_padding_stats(self):
        self._stats = {"pad_steps": 0, "real_steps": 0, "truncated_sentences": 0, "sentences": 0}

    # --- gradients without an update (tests, benchmarks) ----------------------------
    def loss_and_grads(self, batch, chunk=0):
        """Static forward + backward of one chunk, no update: (loss, {name: dense gradient}) of the
        training loss (with dropout, each call draws new masks)."""
        self._check(batch)
        lv, gs = self.session.run([self._train_loss, list(self._grads.values())], self._feed(batch, chunk))
        return float(lv), OrderedDict(zip(self._grads, gs))

    def eager_loss_and_grads(self, batch, chunk=0):
        """The same chunk through :func:`forward` in eager mode, from the current
        weights: (loss, {name: dense gradient})."""
        self._check(batch)
        params = [Parameter(v) for v in self.state_dict().values()]
        mask = batch.mask[chunk] if self.masked else None
        loss, _ = forward(params, batch.ids[chunk], mask, batch.labels[chunk], batch.weights[chunk],
                          self.hidden_size, self.masked)
        loss.backward()
        return float(loss.numpy()), OrderedDict(
            (k, (p.grad.numpy() if p.grad is not None else np.zeros_like(p.numpy())))
            for k, p in zip(self.variables, params))

    def __repr__(self):
        c = self.config
        return (f"PaddedLSTMClassifier(vocab_size={c['vocab_size']}, embed_dim={c['embed_dim']}, hidden_size="
                f"{c['hidden_size']}, batch_size={c['batch_size']}, max_len={c['max_len']}, masked={c['masked']})")


# --------------------------------------------------------------------------
# the TF1 user's best padded variant: dynamic_rnn, padded per batch, bucketed
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BucketedBatch:
    """Sentences in chunks of at most ``batch_size``, each padded only to its
    own longest sentence (sorted by length first when there are several
    chunks, so each chunk holds similar lengths).

    Attributes
    ----------
    chunks : list of (ids (T_k, b_k) int64 time-major, lengths (b_k,) int64, labels (b_k,) int64)
    order : (n_sentences,) int64
        Sentence of the caller's batch at each row of the chunks, concatenated.
    n_sentences, n_real_steps, n_pad_steps : int
        Padding: ``sum_k b_k * T_k - n_real_steps`` steps read a pad.
    """

    chunks: list
    order: np.ndarray
    n_sentences: int
    n_real_steps: int
    n_pad_steps: int
    n_truncated: int = 0

    @property
    def n_chunks(self):
        return len(self.chunks)

    def rows(self, k):
        return len(self.chunks[k][1])


def bucket_sentences(id_lists, labels, batch_size):
    """A :class:`BucketedBatch` of sentences (sequences of ids): one chunk in
    the given order when they fit in ``batch_size`` rows, else sorted by
    length and cut into chunks of ``batch_size``."""
    n = len(id_lists)
    if n == 0:
        raise ValueError("bucket_sentences: no sentences")
    lengths = np.fromiter((len(s) for s in id_lists), dtype=np.int64, count=n)
    order = np.arange(n) if n <= batch_size else np.argsort(lengths, kind="stable")
    labels = np.asarray(labels, dtype=np.int64)
    chunks, pad = [], 0
    for start in range(0, n, batch_size):
        rows = order[start:start + batch_size]
        pb = pad_batch([id_lists[i] for i in rows], pad_id=PAD_ID)
        chunks.append((np.ascontiguousarray(pb.ids.T), pb.lengths, labels[rows]))
        pad += pb.ids.size - int(pb.lengths.sum())
    return BucketedBatch(chunks, order, n, int(lengths.sum()), pad)


@register("padded-bucketed", aliases={"hidden": "hidden_size"})
class DynamicRNNClassifier(PaddedLSTMClassifier):
    """The padded baseline as a TF1 user's best version: ``nn.dynamic_rnn``
    with ``sequence_length``, one graph for every batch size and length,
    each batch padded only to its own longest sentence (no truncation) and,
    with length bucketing (``TrainConfig.bucket_batches``, ``dynnets train
    --bucket-batches``; the padded-vs-dynamic comparison sets it), little
    padding at all.

    Graph: ids (time, batch) -> embedding -> ``dynamic_rnn(TorchLSTMCell(hidden_size,
    forget_bias=0), sequence_length=lengths, time_major=True)`` -> final
    ``h`` -> linear -> softmax cross-entropy (mean over the batch). Weights,
    names and optimizer are :class:`PaddedLSTMClassifier`'s (those of the
    dynamic ``SequenceClassifier(cell="lstm")`` with the same seed), so the
    three models start from the same numbers.

    Parameters
    ----------
    vocab_size, embed_dim, hidden_size, num_classes, optimizer, lr, weight_decay, seed
        As :class:`PaddedLSTMClassifier`.
    batch_size : int, default 25
        Rows per run: a larger batch (evaluation) is sorted by length and run
        in chunks of this size, each padded to its own maximum.
    """

    kind = "padded-bucketed"
    max_len = None

    def __init__(self, vocab_size, embed_dim=300, hidden_size=150, num_classes=5, batch_size=25, optimizer="adagrad",
                 lr=0.05, weight_decay=0.0, seed=0):
        self._setup(vocab_size, embed_dim, hidden_size, num_classes, batch_size, optimizer, lr, weight_decay, seed)

    def _build(self, optimizer, lr, wd):
        from ..static.nn import dynamic_rnn, rnn_cell
        self.graph = g = ds.Graph()
        with g.as_default():
            self._ids = ds.placeholder((None, None), np.int64, name="ids")
            self._lengths = ds.placeholder((None,), np.int64, name="lengths")
            self._labels = ds.placeholder((None,), np.int64, name="labels")
            emb = ds.Variable(self._initial["embedding.weight"], name="embedding.weight")
            cell = rnn_cell.TorchLSTMCell(self.hidden_size, forget_bias=0.0, name="rnn/lstm_cell")
            x = ops.embedding(emb, self._ids)                                  # (T, B, E)
            cell.build(x.shape, g)
            out_w = ds.Variable(self._initial["out.weight"], name="out.weight")
            out_b = ds.Variable(self._initial["out.bias"], name="out.bias")
            self.variables = OrderedDict([("embedding.weight", emb), ("weight_ih_l0", cell.weight_ih),
                                          ("weight_hh_l0", cell.weight_hh), ("bias_ih_l0", cell.bias_ih),
                                          ("bias_hh_l0", cell.bias_hh), ("out.weight", out_w), ("out.bias", out_b)])
            _, state = dynamic_rnn(cell, x, sequence_length=self._lengths, dtype=np.float32, time_major=True)
            logits = ops.linear(state.h, out_w, out_b)
            self._loss = self._train_loss = ops.cross_entropy(logits, self._labels)
            self._probs = ops.softmax(logits)
            self._grads, self._train_op = train_ops(optimizer, lr, wd, self._loss, self.variables)
            init = ds.global_variables_initializer()
        self.session = ds.Session(g)
        self.session.run(init)
        for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            self.variables[k].load(self._initial[k], self.session)

    def make_batch(self, trees, vocab):
        """The trees' leaf words as a :class:`BucketedBatch`."""
        ids = getattr(vocab, "ids", None)
        sents = [ids(t.words()) if ids is not None else [vocab[w] for w in t.words()] for t in trees]
        return bucket_sentences(sents, [int(t.label) for t in trees], self.batch_size)

    def _feed(self, batch, k):
        ids, lengths, labels = batch.chunks[k]
        return {self._ids: ids, self._lengths: lengths, self._labels: labels}

    def _check(self, batch):
        if not isinstance(batch, BucketedBatch):
            raise TypeError(f"DynamicRNNClassifier: expected a BucketedBatch (make_batch), got {type(batch).__name__}")

    def predict_proba(self, batch):
        """Root-class probabilities in the caller's order, (n_sentences, num_classes)."""
        self._check(batch)
        p = np.concatenate([self.session.run(self._probs, self._feed(batch, k)) for k in range(batch.n_chunks)])
        out = np.empty_like(p)
        out[batch.order] = p
        self._count(batch)
        return out

    def eager_loss_and_grads(self, batch, chunk=0):
        """The same chunk in eager mode, from the current weights, as the
        masked per-step loop of :func:`forward` (state carried past each
        sentence's length): (loss, {name: dense gradient})."""
        self._check(batch)
        ids, lengths, labels = batch.chunks[chunk]
        mask = (np.arange(ids.shape[0])[:, None] < lengths[None, :]).astype(np.float32)[..., None]
        params = [Parameter(v) for v in self.state_dict().values()]
        loss, _ = forward(params, ids, mask, labels, np.ones(len(labels), np.float32), self.hidden_size, True)
        loss.backward()
        return float(loss.numpy()), OrderedDict(
            (k, (p.grad.numpy() if p.grad is not None else np.zeros_like(p.numpy())))
            for k, p in zip(self.variables, params))

    def __repr__(self):
        c = self.config
        return (f"DynamicRNNClassifier(vocab_size={c['vocab_size']}, embed_dim={c['embed_dim']}, hidden_size="
                f"{c['hidden_size']}, batch_size={c['batch_size']})")
