"""Training and evaluation of sentiment classifiers: epochs, minibatches,
optimizers, regularisation, early stopping on dev, checkpoints, logs.

Programmatic API (the CLI calls these)::

    from dynnets.train import TrainConfig, train, evaluate, load_checkpoint
    model = build_model("treelstm", len(vocab), hidden=150)
    result = train(model, train_trees, dev_trees, vocab, TrainConfig(epochs=8, seed=0, out_dir="runs/x"))
    best = load_checkpoint("runs/x/best.npz")        # model + .vocab, weights of the best dev epoch
    metrics = evaluate(best, dev_trees, best.vocab)

Model protocols
---------------
An **eager** model (``model.is_static`` false; every model of
:mod:`dynnets.models` except ``padded-lstm``) provides

``prepare(trees, vocab) -> list``
    per-example precomputation, done once per dataset (word ids, per-tree
    schedule arrays);
``collate(examples) -> batch``
    a minibatch of prepared examples (a level schedule, a packed batch);
``make_batch(trees, vocab) -> batch``
    ``collate(prepare(trees, vocab))``;
``loss(batch) -> Tensor``
    the scalar training loss, with dropout when ``model.training``; the
    trainer runs backward, clipping and the optimizer step;
``predict_proba(batch) -> ndarray (n_sentences, C)``
    root (sentence) class probabilities in batch order, in eval mode;
``predict_all(batch) -> (root proba, node proba (n_nodes, C), node labels)``
    tree models only: roots and every node from one forward (all-node accuracy);
``embedding_parameters() -> list``
    parameters that get the embedding learning rate and no L2;
``training_trees(trees) -> list`` (optional)
    the trees the trainer trains on instead of ``train_trees`` (KimCNN's
    phrase-level training);
``after_step()`` (optional)
    called after every optimizer step, before the weight average reads the
    weights: a constraint such as KimCNN's max-norm;
``kind``, ``config``
    the registry name and constructor keyword arguments (checkpoints);

and ``state_dict()``, ``load_state_dict()``, ``parameters()``, ``train()``, ``eval()`` (:class:`dynnets.nn.Module`).

A **static** model (``model.is_static = True``, e.g. the padded baseline)
provides ``make_batch(trees, vocab) -> batch``, ``train_step(batch) -> float``
(forward, backward and update in one call, with its own optimizer),
``predict_proba(batch)``, ``state_dict()``/``load_state_dict()``,
``padding_stats()``/``reset_padding_stats()`` (logged per epoch), and for
checkpoints ``kind`` and ``config``.

Files (``out_dir``)
-------------------
``log.jsonl``
    one JSON object per epoch (loss, speed, dev metrics), appended and
    fsync'ed line by line;
``best.npz``
    the best dev epoch's checkpoint, written atomically: model kind, config,
    vocabulary and weights, enough to rebuild the model
    (:func:`load_checkpoint`);
``config.json``
    the training config (without ``out_dir``) and the model's kind and config.

An earlier run's ``log.jsonl`` and ``best.npz`` in ``out_dir`` are removed
when training starts, so the folder never pairs one run's config with
another's checkpoint; keep an old run by training into a new folder (the
``dynnets train`` command refuses to reuse a run folder unless told to
``--overwrite`` it, and then replaces it only once the new run has a
checkpoint).

With the same seed, the same data and the same config, two runs give the
same metrics (initial weights, batch order and dropout masks all derive from
the seed; ``max_seconds`` is the exception, as it depends on speed), with
the same ``blas_threads``: the thread count changes the last bits of BLAS
products and, over many steps, the metrics (docs/howto/installed-use.md, "BLAS threads").
"""
from __future__ import annotations

import gc
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from . import io as dio
from .autograd import RowSparse
from .blas import blas_threads as _blas
from .data.batching import BucketSampler
from .data.vocab import Vocabulary
from .metrics import DEFAULT_LENGTH_EDGES, classification_report
from .nn.utils import clip_grad_norm_

__all__ = ["TrainConfig", "TrainResult", "train", "evaluate", "predict", "make_optimizer", "save_checkpoint",
           "load_checkpoint", "batch_order", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "dynnets.checkpoint/1"
SELECT_METRICS = ("root_fine", "root_binary", "all_nodes", "fine+binary")


@dataclass
class TrainConfig:
    """Hyperparameters of :func:`train` (defaults follow Tai et al. 2015).

    Attributes
    ----------
    epochs : int
        Maximum number of epochs.
    batch_size : int
        Sentences per minibatch.
    optimizer : {"adagrad", "adam", "sgd"}
    lr : float
        Learning rate of every parameter except the word embeddings.
    embedding_lr : float or None
        Learning rate of the word embeddings (None: ``lr``).
    weight_decay : float
        L2 penalty (added to the gradient) on every parameter except the embeddings.
    embedding_weight_decay : float
        L2 penalty on the embeddings (a dense update of the whole table when > 0).
    momentum : float
        SGD momentum.
    adagrad_init : float
        Adagrad's initial accumulator value (PyTorch's
        ``initial_accumulator_value``): a positive value damps the first,
        otherwise learning-rate-sized, steps of rarely seen words.
    clip_norm : float or None
        Clip the global gradient norm to this value before each step.
    patience : int or None
        Stop when the selection metric has not improved for this many epochs.
    select : {"root_fine", "root_binary", "all_nodes", "fine+binary"}
        Dev metric for model selection and early stopping ("fine+binary":
        the sum of root fine-grained and binary accuracy, for a checkpoint
        good at both).
    seed : int
        Batch order (the model's seed sets weights and dropout).
    bucket_batches : int
        Length bucketing of the batch order: batches drawn from buckets of
        ``bucket_batches`` batches of similar length (1: tightest); 0 for a
        plain shuffle.
    eval_batch_size : int
    ema : float or None
        Keep an exponential moving average of the weights (decay per step,
        e.g. 0.998, warmed up as ``min(ema, (1 + t) / (10 + t))`` at step t)
        and evaluate, select and checkpoint the averaged weights. Averaging
        smooths the epoch-to-epoch swings of dev accuracy on a small dataset.
    evals_per_epoch : int
        Dev evaluations (and selection / checkpoint chances) per epoch, at
        equal steps through it; the last at the epoch's end. Above 1,
        ``history`` has one entry per evaluation and an entry's ``epoch`` is
        fractional (e.g. 2.5: halfway through epoch 3). Patience still counts
        epochs (an epoch with no improving evaluation).
    ema_every : int
        Update the average every this many steps (with the decay raised to
        that power), so a 16k-word embedding table costs little.
    max_seconds : float or None
        Stop after the first epoch that ends past this wall-clock budget
        (makes the result depend on speed).
    restore_best : bool
        Load the best epoch's weights into the model when training ends.
    progress : bool
        tqdm progress bars (on stderr).
    out_dir : str or None
        Where ``log.jsonl`` and ``best.npz`` go (nothing written when None).
    blas_threads : int or None
        Threads of numpy's (and Numba's) BLAS while :func:`train` runs,
        restored after (:func:`dynnets.blas.blas_threads`); 0 or None leaves
        them as they are. One by default: the models multiply small matrices,
        which gain nothing from more threads and, on a loaded machine, wait
        for a busy core at every product (docs/howto/installed-use.md, "BLAS threads"). The thread
        count can change the last bits of BLAS results and so, over many
        steps, the metrics; the same seed and the same ``blas_threads`` give
        the same numbers.
    """

    epochs: int = 10
    batch_size: int = 25
    optimizer: str = "adagrad"
    lr: float = 0.05
    embedding_lr: float | None = 0.1
    weight_decay: float = 1e-4
    embedding_weight_decay: float = 0.0
    momentum: float = 0.0
    adagrad_init: float = 0.0
    clip_norm: float | None = None
    patience: int | None = 3
    select: str = "root_fine"
    seed: int = 0
    bucket_batches: int = 0
    eval_batch_size: int = 250
    ema: float | None = None
    ema_every: int = 10
    evals_per_epoch: int = 1
    max_seconds: float | None = None
    restore_best: bool = True
    progress: bool = True
    out_dir: str | None = None
    blas_threads: int | None = 1

    def __post_init__(self):
        if self.optimizer not in ("adagrad", "adam", "sgd"):
            raise ValueError(f"TrainConfig: optimizer must be 'adagrad', 'adam' or 'sgd', got {self.optimizer!r}")
        if self.select not in SELECT_METRICS:
            raise ValueError(f"TrainConfig: select must be one of {SELECT_METRICS}, got {self.select!r}")
        if self.ema is not None and not 0.0 < self.ema < 1.0:
            raise ValueError(f"TrainConfig: ema must be in (0, 1) or None, got {self.ema!r}")
        for name in ("epochs", "batch_size", "eval_batch_size", "ema_every", "evals_per_epoch"):
            v = getattr(self, name)
            if not _is_int(v) or v < 1:
                raise ValueError(f"TrainConfig: {name} must be a positive integer, got {v!r}")
        for name in ("seed", "bucket_batches"):
            v = getattr(self, name)
            if not _is_int(v) or v < 0:
                raise ValueError(f"TrainConfig: {name} must be an integer >= 0, got {v!r}")
        if self.blas_threads is not None and (not _is_int(self.blas_threads) or self.blas_threads < 0):
            raise ValueError(f"TrainConfig: blas_threads must be an integer >= 0 or None, got {self.blas_threads!r}")
        for name, positive, optional in (("lr", False, False), ("embedding_lr", False, True),
                                         ("weight_decay", False, False), ("embedding_weight_decay", False, False),
                                         ("momentum", False, False), ("adagrad_init", False, False),
                                         ("clip_norm", True, True), ("max_seconds", True, True)):
            v = getattr(self, name)
            if v is None and optional:
                continue
            if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                    or not (v > 0 if positive else v >= 0)):
                want = "a finite number > 0" if positive else "a finite number >= 0"
                raise ValueError(f"TrainConfig: {name} must be {want}{' or None' if optional else ''}, got {v!r}")

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, d):
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"TrainConfig.from_dict: unknown keys {unknown}")
        return cls(**d)


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclass
class TrainResult:
    """What :func:`train` returns.

    ``history`` has one dict per epoch (as in ``log.jsonl``); ``best`` is the
    dev report of the best epoch; ``checkpoint`` the path of ``best.npz`` (or None).
    """

    history: list = field(default_factory=list)
    best_epoch: int = 0
    best: dict = field(default_factory=dict)
    checkpoint: str | None = None
    seconds: float = 0.0
    stopped: str = ""


# --------------------------------------------------------------------------
# optimizers
# --------------------------------------------------------------------------


def make_optimizer(model, config):
    """The optimizer of ``config`` over two param groups: word embeddings
    (``embedding_lr``, ``embedding_weight_decay``; lazy row updates for Adam)
    and everything else (``lr``, ``weight_decay``)."""
    from . import optim
    emb = list(model.embedding_parameters()) if hasattr(model, "embedding_parameters") else []
    emb_ids = {id(p) for p in emb}
    rest = [p for p in model.parameters() if id(p) not in emb_ids and p.requires_grad]
    emb = [p for p in emb if p.requires_grad]
    elr = config.lr if config.embedding_lr is None else config.embedding_lr
    groups = [{"params": rest, "lr": config.lr, "weight_decay": config.weight_decay}]
    if emb:
        groups.append({"params": emb, "lr": elr, "weight_decay": config.embedding_weight_decay})
    if config.optimizer == "adagrad":
        return optim.Adagrad(groups, lr=config.lr, initial_accumulator_value=config.adagrad_init)
    if config.optimizer == "adam":
        if emb:
            groups[1]["lazy"] = True
        return optim.Adam(groups, lr=config.lr)
    return optim.SGD(groups, lr=config.lr, momentum=config.momentum)


# --------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------


def _batches(n, size):
    return [list(range(i, min(n, i + size))) for i in range(0, n, size)]


def _prepared(model, trees, vocab):
    return model.prepare(trees, vocab) if hasattr(model, "prepare") else None


def _batch(model, trees, examples, idx, vocab):
    if examples is not None:
        return model.collate([examples[i] for i in idx])
    return model.make_batch([trees[i] for i in idx], vocab)


def predict(model, trees, vocab, batch_size=250, examples=None, nodes=False, blas_threads=1):
    """Root probabilities of every tree, (n_trees, C), in order; with
    ``nodes=True`` also (node probabilities, node labels) of a tree model
    (None for other models).

    ``blas_threads``: BLAS threads during the call (see ``TrainConfig.blas_threads``)."""
    with _blas(blas_threads):
        return _predict(model, trees, vocab, batch_size, examples, nodes)


def _predict(model, trees, vocab, batch_size, examples, nodes):
    if examples is None:
        examples = _prepared(model, trees, vocab)
    n = len(trees) if trees is not None else len(examples)
    roots, nprob, nlab = [], [], []
    want_nodes = nodes and hasattr(model, "predict_all")
    for idx in _batches(n, batch_size):
        b = _batch(model, trees, examples, idx, vocab)
        if want_nodes:
            r, p, y = model.predict_all(b)          # one forward for roots and nodes
            roots.append(r)
            nprob.append(p)
            nlab.append(y)
        else:
            roots.append(model.predict_proba(b))
    root_p = np.concatenate(roots) if roots else np.zeros((0, 0))
    if not nodes:
        return root_p
    if not want_nodes:
        return root_p, None
    return root_p, (np.concatenate(nprob), np.concatenate(nlab))


def evaluate(model, trees, vocab, batch_size=250, edges=DEFAULT_LENGTH_EDGES, examples=None, blas_threads=1):
    """Metrics of ``model`` on ``trees``: root fine-grained and binary (SST-2)
    accuracy, all-node accuracy (tree models), confusion matrix, accuracy by
    sentence length. See :func:`dynnets.metrics.classification_report`.

    ``blas_threads``: BLAS threads during the call (see ``TrainConfig.blas_threads``)."""
    _need_trees("evaluate", "trees", trees, "no sentence to score")
    root_p, node = predict(model, trees, vocab, batch_size, examples=examples, nodes=True,
                           blas_threads=blas_threads)
    labels = np.fromiter((t.label for t in trees), dtype=np.int64, count=len(trees))
    lengths = np.fromiter((len(t.leaves()) for t in trees), dtype=np.int64, count=len(trees))
    if node is None:
        return classification_report(root_p, labels, lengths, edges=edges)
    return classification_report(root_p, labels, lengths, node[0], node[1], edges=edges)


# --------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------


def save_checkpoint(path, model, vocab, **extra):
    """Write model kind, config, vocabulary and weights (and ``extra`` plain
    values) to ``path`` atomically (:func:`dynnets.io.save`)."""
    kind = getattr(model, "kind", None)
    config = getattr(model, "config", None)
    if kind is None or config is None:
        raise TypeError(f"save_checkpoint: {type(model).__name__} has no 'kind' and 'config' to rebuild it from")
    state = {"format": CHECKPOINT_FORMAT, "kind": kind, "config": dict(config),
             "vocab": vocab.to_dict() if vocab is not None else None,
             "weights": {k: np.asarray(v) for k, v in model.state_dict().items()}, "extra": extra}
    dio.save(state, path)


def load_checkpoint(path):
    """Rebuild the model saved by :func:`save_checkpoint`.

    Returns the model (in eval mode) with attributes ``vocab`` (a
    :class:`~dynnets.data.vocab.Vocabulary`) and ``checkpoint`` (the saved
    extra values, e.g. epoch and dev metrics).
    """
    from .models import build_model
    state = dio.load(path)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        got = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise dio.NotACheckpointError(f"load_checkpoint: {path} is not a dynnets checkpoint (saved by "
                                      f"dynnets.save, but its format is {got!r}, not {CHECKPOINT_FORMAT!r})")
    config = dict(state["config"])
    vocab_size = config.pop("vocab_size")
    model = build_model(state["kind"], vocab_size, **config)
    model.load_state_dict(state["weights"])
    v = state.get("vocab")
    vocab = None
    if v is not None:
        words = list(v["words"])
        counts = list(v.get("counts") or [])
        vocab = Vocabulary(words, lowercase=bool(v["lowercase"]), min_freq=int(v.get("min_freq", 1)),
                           counts={w: int(c) for w, c in zip(words, counts) if c})
    model.vocab = vocab
    model.checkpoint = state.get("extra") or {}
    if hasattr(model, "eval"):
        model.eval()
    return model


# --------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------


def _append_line(path, obj):
    """One JSON line, flushed and fsync'ed (a crash loses at most the line being written)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(obj, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _progress(total, desc, enabled):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="batch", leave=False, file=sys.stderr, dynamic_ncols=True)


def batch_order(n, lengths, config, epoch):
    """The minibatches (lists of example indices) of ``epoch`` (from 1) for
    ``n`` examples of the given lengths: bucketed by length with
    ``config.bucket_batches``, else a permutation cut into ``config.batch_size``."""
    if config.bucket_batches > 0:
        return BucketSampler(lengths, config.batch_size, seed=config.seed,
                             bucket_batches=config.bucket_batches).batches(epoch)
    rng = np.random.default_rng([config.seed, epoch])
    perm = rng.permutation(n).tolist()
    return [perm[i:i + config.batch_size] for i in range(0, n, config.batch_size)]


def _score(report, select):
    if select == "fine+binary":
        return report["root_fine"] + report["root_binary"]
    return report.get(select)


class _Average:
    """Exponential moving average of parameters (see ``TrainConfig.ema``)."""

    def __init__(self, params, decay, every):
        self.pairs = [(p, p.numpy().copy()) for p in params]
        self.decay, self.every, self.steps = decay, every, 0

    def update(self):
        self.steps += 1
        if self.steps % self.every:
            return
        d = min(self.decay, (1.0 + self.steps) / (10.0 + self.steps)) ** self.every
        for p, avg in self.pairs:
            avg *= d
            avg += (1.0 - d) * p.numpy()

    def swap(self):
        """Exchange the live and the averaged weights (call twice to undo)."""
        for k, (p, avg) in enumerate(self.pairs):
            live = p.numpy()
            p.data = avg
            self.pairs[k] = (p, live)


class _Divergence:
    """Stops training at the first NaN or inf in the loss or a gradient (before
    the update that would spread it into the weights), saying where it
    appeared and whether a too-high learning rate is a plausible cause:
    only after updates, and only when some weights have grown far beyond
    their initial scale. Diverging updates do that (measured on the samples,
    Tree-LSTM and LSTM with SGD, Adagrad and Adam at lr 10 to 1e6: the
    largest weight grew 4e3 to 1e8 times, to inf in the two runs that hit a
    NaN; a healthy run, LSTM with SGD at lr 10, 25 times), whereas a NaN that
    meets weights of ordinary size comes from the data or the model.
    Checking the gradients costs under 1% of a step (one BLAS dot product
    per parameter: 0.07 of 10.4 ms for a 300/150 Tree-LSTM step of 25
    sentences, measured)."""

    GROWTH = 100.0

    def __init__(self, model, config, static):
        self.config = config
        self.static = static
        self.named = [] if static else [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.scale0 = [_max_abs(p.numpy()) for _, p in self.named]
        emb = model.embedding_parameters() if hasattr(model, "embedding_parameters") and not static else []
        self.embedding_ids = {id(p) for p in emb}
        self.updates = 0

    def check_loss(self, lv, epoch, step, idx):
        if not math.isfinite(lv):
            raise FloatingPointError(self._message(f"the loss became {lv}", epoch, step, idx))

    def check_grads(self, lv, epoch, step, idx):
        for name, p in self.named:
            g = p.raw_grad
            if g is None:
                continue
            v = (g.values if type(g) is RowSparse else g).reshape(-1)
            # v . v (one BLAS call, 2x faster than a sum) is NaN or inf when an
            # element is, or when it overflows: then the elementwise test decides
            with np.errstate(over="ignore", invalid="ignore"):
                sq = np.dot(v, v)
            if not math.isfinite(sq) and not np.isfinite(v).all():
                what = "NaN" if np.isnan(v).any() else "inf"
                raise FloatingPointError(self._message(f"the gradient of parameter {name!r} has {what} values "
                                                       f"(the loss was finite, {lv:.6g})", epoch, step, idx))

    def _message(self, what, epoch, step, idx):
        where = f"train: {what} at epoch {epoch}, step {step}"
        shown = ", ".join(str(i) for i in idx[:5]) + (", ..." if len(idx) > 5 else "")
        batch = f"the batch holds training sentences {shown}"
        if self.updates == 0:
            return (f"{where}, before any update, so the learning rate is not the cause: check the data and the "
                    f"model ({batch}; e.g. NaN or inf in pretrained word vectors, or a forward pass that overflows)")
        grown = None
        for (name, p), s0 in zip(self.named, self.scale0):
            s = _max_abs(p.numpy())
            ratio = s / (s0 if s0 > 0 else 1.0)
            if not math.isfinite(s) or ratio >= self.GROWTH:
                if grown is None or not math.isfinite(s) or ratio > grown[3]:
                    grown = (name, s0, s, ratio, id(p) in self.embedding_ids)
        lr = f"lr={self.config.lr:g}"
        if self.static:
            return (f"{where}, after {self.updates} updates: lower the learning rate ({lr}) if the loss had been "
                    f"rising, else check the data ({batch})")
        if grown is not None:
            name, s0, s, _, embedding = grown
            if embedding and self.config.embedding_lr is not None:
                lr = f"embedding_lr={self.config.embedding_lr:g}"
            return (f"{where}, after {self.updates} updates that grew the weights of {name!r} from at most {s0:.3g} "
                    f"to {s:.3g}: the training diverged; lower the learning rate ({lr}) or clip gradients "
                    f"(clip_norm; --clip-norm on the command line)")
        return (f"{where}, after {self.updates} updates that left every weight within {self.GROWTH:g} times its "
                f"initial scale, so a too-high learning rate is an unlikely cause: check the data and the model "
                f"({batch})")


def _max_abs(a):
    return float(np.max(np.abs(a))) if a.size else 0.0


def _recorded(config):
    """The config as a run folder records it: without ``out_dir``, the
    folder's own location, so the folder stays valid when moved."""
    d = config.to_dict()
    d.pop("out_dir", None)
    return d


def _copy_state(model):
    return {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


def _need_trees(fn, name, trees, why):
    """A ValueError naming ``fn`` and its argument ``name`` when ``trees`` is empty."""
    if len(trees) == 0:
        raise ValueError(f"{fn}: {name} is empty ({why}): expected at least one tree")


def train(model, train_trees, dev_trees, vocab, config=None):
    """Train ``model`` on ``train_trees``, select on ``dev_trees``.

    Parameters
    ----------
    model : an eager or static model (see the module docstring)
    train_trees, dev_trees : lists of :class:`~dynnets.data.trees.Tree`
    vocab : Vocabulary
    config : TrainConfig, optional

    Returns
    -------
    TrainResult

    Raises
    ------
    ValueError
        ``train_trees`` or ``dev_trees`` is empty.
    """
    config = config or TrainConfig()
    # an empty split would train on nothing, or fail deep inside numpy
    _need_trees("train", "train_trees", train_trees, "nothing to train on")
    _need_trees("train", "dev_trees", dev_trees, "the best epoch is selected on dev")
    t_start = time.perf_counter()
    out = Path(config.out_dir) if config.out_dir else None
    log_path = ckpt_path = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        log_path = out / "log.jsonl"
        ckpt_path = out / "best.npz"
        for old in (log_path, ckpt_path):       # an earlier run's files (see the module docstring)
            if old.exists():
                old.unlink()
        dio.atomic_write_text(out / "config.json", json.dumps(
            {"train": _recorded(config), "model": {"kind": getattr(model, "kind", None),
                                                   "config": getattr(model, "config", None)}}, indent=1,
            sort_keys=True))
    static = bool(getattr(model, "is_static", False))
    if hasattr(model, "training_trees"):        # e.g. KimCNN(phrases=True): every phrase a training example
        train_trees = model.training_trees(train_trees)
    train_ex = None if static else model.prepare(train_trees, vocab)
    dev_ex = None if static else _prepared(model, dev_trees, vocab)
    lengths = [len(t.leaves()) for t in train_trees]
    opt = None if static else make_optimizer(model, config)
    params = [] if static else [p for p in model.parameters() if p.requires_grad]
    if config.ema is not None and static:
        raise ValueError("train: ema needs an eager model (a static model updates its own weights)")
    average = _Average(params, config.ema, config.ema_every) if config.ema is not None else None
    result = TrainResult(checkpoint=str(ckpt_path) if ckpt_path else None)
    # Everything alive now (the trees, the prepared examples, the model) is
    # moved out of the cyclic garbage collector's view while training: the
    # graph objects a define-by-run model makes per node trigger collections,
    # and each full one walked every tree node of the dataset (recursive
    # Tree-LSTM forward on SST: 1004 -> 666 us per sentence, measured).
    gc.freeze()
    try:
        with _blas(config.blas_threads):
            _epochs(model, config, train_trees, dev_trees, vocab, train_ex, dev_ex, lengths, opt, params, average,
                    static, log_path, ckpt_path, result, t_start)
    finally:
        gc.unfreeze()
    result.seconds = time.perf_counter() - t_start
    return result


def _epochs(model, config, train_trees, dev_trees, vocab, train_ex, dev_ex, lengths, opt, params, average, static,
            log_path, ckpt_path, result, t_start):
    state = {"best_score": -math.inf, "best_state": None}
    since_best = 0
    watch = _Divergence(model, config, static)
    for epoch in range(1, config.epochs + 1):
        batches = batch_order(len(train_trees), lengths, config, epoch)
        n_evals = min(config.evals_per_epoch, len(batches))
        # evaluation points at equal steps, the last one at the epoch's end
        stops = {round(len(batches) * k / n_evals): k for k in range(1, n_evals + 1)}
        if hasattr(model, "train"):
            model.train()
        if static and hasattr(model, "reset_padding_stats"):
            model.reset_padding_stats()
        bar = _progress(len(batches), f"epoch {epoch}", config.progress)
        total_loss, seen, t0 = 0.0, 0, time.perf_counter()
        improved_in_epoch, eval_s = False, 0.0
        for step, idx in enumerate(batches, 1):
            batch = _batch(model, train_trees, train_ex, idx, vocab)
            if static:
                lv = float(model.train_step(batch))
                watch.check_loss(lv, epoch, step, idx)
            else:
                opt.zero_grad()
                loss = model.loss(batch)
                lv = float(loss.item())
                watch.check_loss(lv, epoch, step, idx)
                loss.backward()
                watch.check_grads(lv, epoch, step, idx)
                if config.clip_norm:
                    clip_grad_norm_(params, config.clip_norm)
                opt.step()
                if hasattr(model, "after_step"):
                    model.after_step()      # a weight constraint (KimCNN's max-norm), before the average reads it
                if average is not None:
                    average.update()
            watch.updates += 1
            total_loss += lv * len(idx)
            seen += len(idx)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{total_loss / seen:.4f}", sent_s=f"{seen / (time.perf_counter() - t0):.0f}")
            if step in stops:
                k = stops[step]
                last = k == n_evals
                if last and bar is not None:
                    bar.close()
                at = epoch if n_evals == 1 else round(epoch - 1 + k / n_evals, 4)
                t1 = time.perf_counter()
                improved_in_epoch |= _checkpoint_point(model, config, dev_trees, vocab, dev_ex, average, static,
                                                       log_path, ckpt_path, result, t_start, state, at,
                                                       total_loss, seen, t1 - t0 - eval_s)
                eval_s += time.perf_counter() - t1      # train_seconds excludes this epoch's earlier evaluations
                if not last and hasattr(model, "train"):
                    model.train()   # evaluate() left the model in eval mode
        since_best = 0 if improved_in_epoch else since_best + 1
        if config.patience is not None and since_best >= config.patience:
            result.stopped = f"early stopping: no {config.select} improvement for {config.patience} epochs"
            break
        if config.max_seconds is not None and time.perf_counter() - t_start > config.max_seconds:
            result.stopped = f"time budget of {config.max_seconds} s reached"
            break
    best_state = state["best_state"]
    if config.restore_best and best_state is not None:
        model.load_state_dict(best_state)


def _checkpoint_point(model, config, dev_trees, vocab, dev_ex, average, static, log_path, ckpt_path, result,
                      t_start, state, epoch, total_loss, seen, train_s):
    """One dev evaluation: log it, and keep / save the weights if the selection metric improved."""
    t1 = time.perf_counter()
    if average is not None:
        average.swap()          # evaluate, select and save the averaged weights
    dev = evaluate(model, dev_trees, vocab, config.eval_batch_size, examples=dev_ex, blas_threads=None)
    eval_s = time.perf_counter() - t1
    score = _score(dev, config.select)
    if score is None:
        raise ValueError(f"train: select={config.select!r} is not available for {type(model).__name__}")
    improved = score > state["best_score"]
    entry = {"epoch": epoch, "train_loss": total_loss / max(seen, 1), "train_seconds": round(train_s, 3),
             "train_sent_per_s": round(seen / train_s, 1) if train_s > 0 else None,
             "eval_seconds": round(eval_s, 3), "dev": dev, "best": improved,
             "elapsed": round(time.perf_counter() - t_start, 3)}
    if static and hasattr(model, "padding_stats"):
        entry["padding"] = model.padding_stats()
    if improved:
        state["best_score"] = score
        result.best_epoch, result.best = epoch, dev
        state["best_state"] = _copy_state(model)
        if ckpt_path is not None:
            save_checkpoint(ckpt_path, model, vocab, epoch=epoch, dev=dev, train_config=_recorded(config))
    if average is not None:
        average.swap()
    result.history.append(entry)
    if log_path is not None:
        _append_line(log_path, entry)
    if config.progress:
        print(f"epoch {epoch}: loss {entry['train_loss']:.4f}  dev fine {dev['root_fine']:.4f}  binary "
              f"{dev['root_binary']:.4f}" + (f"  nodes {dev['all_nodes']:.4f}" if 'all_nodes' in dev else "")
              + f"  {entry['train_sent_per_s']} sent/s" + ("  *" if improved else ""), file=sys.stderr)
    return improved
