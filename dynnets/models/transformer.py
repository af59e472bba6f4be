"""A Transformer encoder over sentences of any length, four ways on the same
weights, and the ``transformer`` sentence classifier.

The ways (issue 25 §2):

``packed`` (ragged dynamic)
    the sentences' tokens concatenated into one ``(N, E)`` array with
    ``offsets`` (FlashAttention's ``cu_seqlens``): projections, feed-forward
    layers and layer norms run on the ``N`` real tokens only, attention is the
    :func:`~dynnets.autograd.ops.ragged_attention` primitive (each sentence
    over itself, no padding, no mask, no ``(B, T, T)`` score tensor);
``padded``
    ``(B, T, E)`` padded to the batch maximum (or a global ``max_len``) with a
    ``key_padding_mask`` (True = padding, torch's convention) that sets padded
    keys' scores to -inf before the softmax, as ``nn.MultiheadAttention``;
``static``
    the padded way as a TF1-style graph (:class:`StaticEncoderGraph`):
    placeholders of unknown batch and length, the mask from the lengths;
``sentence``
    one sentence at a time (:meth:`TransformerEncoder.forward_sentence`;
    its attention is ``ragged_attention`` over offsets ``[0, T]``), also the
    code ``dn.autobatch()`` batches: the sentences' attention calls of any
    lengths join into one call per layer (the primitive's ``"ragged"``
    batching rule shifts and joins their offsets).

The encoder layer is torch's ``nn.TransformerEncoderLayer`` with
``batch_first=True`` and ``norm_first=False`` (post-norm, Vaswani et al. 2017
§3.1): ``x = norm1(x + drop(attn(x))); x = norm2(x + drop(ff(x)))``, with
``ff = linear2(drop(act(linear1(x))))``; its parameters have torch's names and
layouts (``layers.0.self_attn.in_proj_weight`` (3E, E), ...), so a torch
encoder's ``state_dict`` loads (:meth:`TransformerEncoder.load_torch_state_dict`).
"""
from __future__ import annotations

import math

import numpy as np

from .. import nn
from ..autograd import ops
from ..nn.module import Parameter
from ..nn.transformer import sinusoidal_table as sinusoidal_positions  # (n, d): Vaswani et al.'s table
from .common import RaggedBatch, SentenceExample, SentenceModelBase, collate_ragged, per_sentence, prepare_sentences
from .registry import register

__all__ = ["TransformerEncoder", "EncoderLayer", "SelfAttention", "sinusoidal_positions", "pad_batch",
           "StaticEncoderGraph", "TransformerClassifier", "TransformerBatch"]


class SelfAttention(nn.Module):
    """Multi-head self-attention with torch's ``nn.MultiheadAttention``
    parameters: ``in_proj_weight`` (3E, E), ``in_proj_bias`` (3E,),
    ``out_proj`` (E -> E)."""

    def __init__(self, d_model, nhead, rng, dtype):
        super().__init__()
        if d_model % nhead:
            raise ValueError(f"SelfAttention: d_model={d_model} is not divisible by nhead={nhead}")
        self.d_model, self.nhead = int(d_model), int(nhead)
        bound = math.sqrt(6.0 / (4 * d_model))           # xavier_uniform_ over (3E, E), as torch
        self.in_proj_weight = Parameter(rng.uniform(-bound, bound, (3 * d_model, d_model)).astype(dtype))
        self.in_proj_bias = Parameter(np.zeros(3 * d_model, dtype=dtype))
        self.out_proj = nn.Linear(d_model, d_model, rng=rng, dtype=dtype)
        self.out_proj.bias.numpy()[...] = 0

    def qkv(self, x):
        """(..., E) -> q, k, v, each (..., E) and C-contiguous: one
        ``linear_split`` primitive (not a product and three slices)."""
        return ops.linear_split(x, self.in_proj_weight, self.in_proj_bias, chunks=3)

    def _out(self, a):
        # the primitive directly: nn.Linear's call adds module dispatch and dtype checks per layer
        return ops.linear(a, self.out_proj.weight, self.out_proj.bias)

    def packed(self, x, offsets):
        """(N, E) packed rows -> (N, E): the ragged attention primitive."""
        q, k, v = self.qkv(x)
        return self._out(ops.ragged_attention(q, k, v, offsets, num_heads=self.nhead))

    def padded(self, x, key_padding_mask=None):
        """(B, T, E), mask (B, T) bool (True = padding) -> (B, T, E)."""
        B, T, E = x.shape
        H = self.nhead
        D = E // H
        q, k, v = (ops.permute(ops.reshape(a, (B, T, H, D)), (0, 2, 1, 3)) for a in self.qkv(x))
        s = ops.matmul(q, ops.transpose(k, -1, -2)) * (1.0 / math.sqrt(D))          # (B, H, T, T)
        if key_padding_mask is not None:
            s = ops.masked_fill(s, np.asarray(key_padding_mask, dtype=bool)[:, None, None, :], -np.inf)
        a = ops.matmul(ops.softmax(s, -1), v)                                         # (B, H, T, D)
        return self._out(ops.reshape(ops.permute(a, (0, 2, 1, 3)), (B, T, E)))

    def sentence(self, x):
        """(T, E) one sentence -> (T, E): the ragged attention primitive over
        one sentence (offsets ``[0, T]``), whose batching rule joins the
        sentences of a minibatch of any lengths into one call under
        ``dn.autobatch()``."""
        q, k, v = self.qkv(x)
        off = np.array([0, x.shape[0]], dtype=np.int64)
        return self._out(ops.ragged_attention(q, k, v, off, num_heads=self.nhead))


class EncoderLayer(nn.Module):
    """One post-norm encoder layer (torch ``nn.TransformerEncoderLayer``,
    ``batch_first=True``, ``norm_first=False``)."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout, activation, rng, dtype, drop_rng):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"EncoderLayer: activation must be 'relu' or 'gelu', got {activation!r}")
        self.self_attn = SelfAttention(d_model, nhead, rng, dtype)
        self.linear1 = nn.Linear(d_model, dim_feedforward, rng=rng, dtype=dtype)
        self.linear2 = nn.Linear(dim_feedforward, d_model, rng=rng, dtype=dtype)
        self.norm1 = nn.LayerNorm(d_model, dtype=dtype)
        self.norm2 = nn.LayerNorm(d_model, dtype=dtype)
        self.activation = activation
        self.dropout = nn.Dropout(dropout, rng=drop_rng)

    def _rest(self, x, a):
        # fused primitives (issue 25 §3): x + a and its norm as one op, linear1
        # with its activation as one; dropout is no op at all at p=0 or in eval
        drop = self.dropout if self.training and self.dropout.p > 0 else None
        n1, n2, l1, l2 = self.norm1, self.norm2, self.linear1, self.linear2
        x = ops.add_layer_norm(x, a if drop is None else drop(a), n1.weight, n1.bias, n1.eps)
        h = ops.linear_act(x, l1.weight, l1.bias, activation=self.activation)
        if drop is not None:
            h = drop(h)
        f = ops.linear(h, l2.weight, l2.bias)
        return ops.add_layer_norm(x, f if drop is None else drop(f), n2.weight, n2.bias, n2.eps)

    def packed(self, x, offsets):
        return self._rest(x, self.self_attn.packed(x, offsets))

    def padded(self, x, key_padding_mask=None):
        return self._rest(x, self.self_attn.padded(x, key_padding_mask))

    def sentence(self, x):
        return self._rest(x, self.self_attn.sentence(x))


class TransformerEncoder(nn.Module):
    """A stack of :class:`EncoderLayer` run four ways (see the module docstring).

    Parameters
    ----------
    d_model, nhead, num_layers, dim_feedforward : int
    dropout : float
    activation : 'relu' or 'gelu'
    seed : int
    dtype : numpy float dtype

    Shapes: :meth:`forward_packed` (N, E) with offsets (B+1,);
    :meth:`forward_padded` (B, T, E) with a (B, T) mask;
    :meth:`forward_sentence` (T, E).
    """

    def __init__(self, d_model=128, nhead=4, num_layers=2, dim_feedforward=256, dropout=0.0, activation="relu",
                 seed=0, dtype=np.float32):
        super().__init__()
        rng = np.random.default_rng([seed, 10])
        self.d_model, self.nhead = int(d_model), int(nhead)
        self.layers = nn.ModuleList([EncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, rng, dtype,
                                                  np.random.default_rng([seed, 11, i])) for i in range(num_layers)])

    def forward_packed(self, x, offsets):
        """Packed rows (N, E) of sentences at ``offsets`` -> (N, E)."""
        for layer in self.layers:
            x = layer.packed(x, offsets)
        return x

    def forward_padded(self, x, key_padding_mask=None):
        """(B, T, E) with ``key_padding_mask`` (B, T) bool, True at padding -> (B, T, E)
        (padded positions hold values that depend on nothing real: ignore them)."""
        for layer in self.layers:
            x = layer.padded(x, key_padding_mask)
        return x

    def forward_sentence(self, x):
        """One sentence (T, E) -> (T, E)."""
        for layer in self.layers:
            x = layer.sentence(x)
        return x

    def forward(self, x, offsets):
        return self.forward_packed(x, offsets)

    def load_torch_state_dict(self, state):
        """Copy a ``torch.nn.TransformerEncoder``'s (or a model holding one
        as its only encoder) ``state_dict`` into this one: keys ending in
        ``layers.<i>.<name>`` with torch's names and layouts."""
        own = dict(self.named_parameters())
        seen = set()
        for key, val in state.items():
            i = key.find("layers.")
            if i < 0:
                continue
            name = key[i:]
            if name not in own:
                raise KeyError(f"load_torch_state_dict: {key!r} has no parameter {name!r} here")
            arr = val.detach().cpu().numpy() if hasattr(val, "detach") else np.asarray(val)
            p = own[name].numpy()
            if arr.shape != p.shape:
                raise ValueError(f"load_torch_state_dict: {key!r} has shape {arr.shape}, {name} {p.shape}")
            p[...] = arr
            seen.add(name)
        missing = sorted(set(own) - seen)
        if missing:
            raise KeyError(f"load_torch_state_dict: the state dict has no value for {missing[:4]}")


def pad_batch(rows, offsets, max_len=None):
    """Packed rows (N, ...) (an array) at ``offsets`` -> (padded (B, T, ...),
    key_padding_mask (B, T) bool, True at padding), ``T`` the longest
    sentence or ``max_len``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lens = np.diff(offsets)
    T = int(lens.max()) if max_len is None else int(max_len)
    if lens.max() > T:
        raise ValueError(f"pad_batch: a sentence of {int(lens.max())} tokens is longer than max_len={T}")
    B = len(lens)
    mask = np.arange(T)[None, :] >= lens[:, None]
    out = np.zeros((B, T) + rows.shape[1:], dtype=rows.dtype)
    out[~mask] = rows
    return out, mask


class StaticEncoderGraph:
    """The padded encoder as a TF1-style graph in :mod:`dynnets.static`,
    built once from a :class:`TransformerEncoder`'s weights (copied into
    ``tf.Variable``s of the same names).

    Parameters
    ----------
    encoder : TransformerEncoder
    dtype : float dtype or None
        The graph's (default: the encoder's).
    graph, x, lengths : optional
        Build into this graph on these values (padded inputs (B, T, E) and
        int32 lengths (B,)) instead of a new graph with placeholders.

    Attributes
    ----------
    graph : dynnets.static.Graph
    x : placeholder (None, None, E)
        Padded inputs, batch and length unknown until fed.
    lengths : placeholder (None,) int32
        Each sentence's length; the key-padding mask is ``sequence_mask``'s
        complement.
    out : (B, T, E)
        The encoder's output (positions past a sentence's length are padding).
    variables : dict
        The encoder's parameter names -> ``tf.Variable``.
    """

    def __init__(self, encoder, dtype=None, graph=None, x=None, lengths=None):
        from .. import static as tf
        self.tf = tf
        dt = encoder.layers[0].self_attn.in_proj_weight.numpy().dtype if dtype is None else np.dtype(dtype)
        E, H = encoder.d_model, encoder.nhead
        D = E // H
        self.graph = tf.Graph() if graph is None else graph
        with self.graph.as_default():
            # x and lengths may be values of a larger graph (ids -> embeddings, a classifier on top)
            self.x = tf.placeholder(dt, [None, None, E], name="x") if x is None else x
            self.lengths = tf.placeholder(np.int32, [None], name="lengths") if lengths is None else lengths
            self.variables = {name: tf.Variable(p.numpy().astype(dt), name=name.replace(".", "/"))
                              for name, p in encoder.named_parameters()}
            v = self.variables
            s = tf.shape(self.x)
            B, T = s[0], s[1]
            # -inf on padded keys, 0 elsewhere, broadcast over heads and queries
            real = tf.sequence_mask(self.lengths, T)
            bias = tf.reshape(tf.where(real, tf.zeros_like(real, dtype=dt), tf.fill(tf.shape(real),
                                                                                      np.asarray(-np.inf, dt))),
                              tf.stack([B, 1, 1, T]))
            h = self.x
            for i, layer in enumerate(encoder.layers):
                p = f"layers.{i}."

                def lin(a, name):
                    return tf.einsum("bti,oi->bto", a, v[p + name + ".weight"]) + v[p + name + ".bias"]

                qkv = tf.einsum("bti,oi->bto", h, v[p + "self_attn.in_proj_weight"]) + v[p + "self_attn.in_proj_bias"]
                q, k, w = (tf.transpose(tf.reshape(qkv[:, :, j * E:(j + 1) * E], tf.stack([B, T, H, D])),
                                        [0, 2, 1, 3]) for j in range(3))
                sc = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(D)) + bias
                a = tf.matmul(tf.nn.softmax(sc), w)
                a = tf.reshape(tf.transpose(a, [0, 2, 1, 3]), tf.stack([B, T, E]))
                # the fused primitives of the eager layer (issue 25 §3), through the same table
                h = ops.add_layer_norm(h, lin(a, "self_attn.out_proj"), v[p + "norm1.weight"], v[p + "norm1.bias"],
                                       layer.norm1.eps)
                f = ops.linear_act(h, v[p + "linear1.weight"], v[p + "linear1.bias"], activation=layer.activation)
                h = ops.add_layer_norm(h, lin(f, "linear2"), v[p + "norm2.weight"], v[p + "norm2.bias"],
                                       layer.norm2.eps)
            self.out = h
            self.init = tf.global_variables_initializer()

    def session(self):
        """A Session on :attr:`graph` with the variables initialised."""
        sess = self.tf.Session(graph=self.graph)
        sess.run(self.init)
        return sess


# --------------------------------------------------------------------------
# the ``transformer`` model kind
# --------------------------------------------------------------------------

TransformerBatch = RaggedBatch
_EXECUTIONS = ("packed", "padded", "sentence", "autobatch")


@register("transformer")
class TransformerClassifier(SentenceModelBase, nn.Module):
    """A small Transformer encoder sentence classifier: word vectors plus
    sinusoidal positions, :class:`TransformerEncoder`, mean or first-token
    pooling, dropout, a linear classifier.

    Parameters
    ----------
    vocab_size : int
    embed_dim : int, default 128
        ``d_model``.
    hidden : int, default 256
        ``dim_feedforward``.
    num_layers : int, default 2
    nhead : int, default 4
    num_classes : int, default 5
    dropout : float, default 0.1
        In the encoder layers (torch's places) and before the classifier.
    pooling : 'mean' or 'first'
    execution : 'packed', 'padded', 'sentence' or 'autobatch'
        How a minibatch runs (same function, same gradients): packed tokens
        with ragged attention; padded to the batch maximum (or ``max_len``)
        with a key-padding mask (length bucketing is the batch order's:
        ``TrainConfig.bucket_batches``, ``--bucket-batches``); one sentence at
        a time; one sentence at a time under ``dn.autobatch()``.
    max_len : int or None
        ``padded`` only: pad every batch to this length (the TF1 habit of
        one fixed length; a batch holding a longer sentence is padded to
        that one: nothing is cut); None pads to the batch maximum.
    activation : 'relu' or 'gelu'
    seed : int
    dtype : str
    """

    kind = "transformer"
    example_type = SentenceExample
    batch_type = RaggedBatch

    def __init__(self, vocab_size, embed_dim=128, hidden=256, num_layers=2, nhead=4, num_classes=5, dropout=0.1,
                 pooling="mean", execution="packed", max_len=None, activation="relu", seed=0, dtype="float32"):
        nn.Module.__init__(self)
        if pooling not in ("mean", "first"):
            raise ValueError(f"TransformerClassifier: pooling must be 'mean' or 'first', got {pooling!r}")
        if execution not in _EXECUTIONS:
            raise ValueError(f"TransformerClassifier: execution must be one of {', '.join(_EXECUTIONS)}, got "
                             f"{execution!r}")
        if int(embed_dim) % int(nhead):
            raise ValueError(f"TransformerClassifier: embed_dim={embed_dim} (d_model) is not divisible by "
                             f"nhead={nhead}")
        if max_len is not None and int(max_len) < 1:
            raise ValueError(f"TransformerClassifier: max_len must be a positive integer or None, got {max_len}")
        dt = np.dtype(dtype)
        self.config = dict(vocab_size=int(vocab_size), embed_dim=int(embed_dim), hidden=int(hidden),
                           num_layers=int(num_layers), nhead=int(nhead), num_classes=int(num_classes),
                           dropout=float(dropout), pooling=pooling, execution=execution,
                           max_len=None if max_len is None else int(max_len), activation=activation, seed=int(seed),
                           dtype=str(dt))
        self._dtype = dt
        self.pooling, self.execution, self.pad_to = pooling, execution, self.config["max_len"]
        rng = np.random.default_rng([seed, 0])
        self.embedding = nn.Embedding(vocab_size, embed_dim, rng=rng, dtype=dt)
        self.encoder = TransformerEncoder(embed_dim, nhead, num_layers, hidden, dropout, activation, seed, dt)
        self.out = nn.Linear(embed_dim, num_classes, rng=rng, dtype=dt)
        self.drop = nn.Dropout(dropout, rng=np.random.default_rng([seed, 2]))
        self._pe = sinusoidal_positions(64, int(embed_dim), dt)

    def _positions(self, n):
        if n > len(self._pe):
            self._pe = sinusoidal_positions(max(n, 2 * len(self._pe)), self.config["embed_dim"], self._dtype)
        return self._pe

    def prepare(self, trees, vocab):
        return prepare_sentences(trees, vocab)

    def collate(self, examples):
        return collate_ragged("TransformerClassifier", examples)

    def sentence_vectors(self, batch, vocab=None):
        """Pooled encoder output of each sentence, (B, E)."""
        b = self.as_batch(batch, vocab)
        ex = self.execution
        if ex == "packed":
            pos = np.arange(len(b.ids)) - np.repeat(b.offsets[:-1], b.lengths)
            x = self.embedding(b.ids) + self._positions(int(b.lengths.max()))[pos]
            y = self.encoder.forward_packed(x, b.offsets)
            if self.pooling == "first":
                return y[b.offsets[:-1]]
            rows = np.repeat(np.arange(len(b.lengths)), b.lengths)
            avg = np.zeros((len(b.lengths), len(b.ids)), dtype=self._dtype)
            avg[rows, np.arange(len(b.ids))] = (1.0 / b.lengths)[rows]
            return ops.matmul(avg, y)
        if ex == "padded":
            T = max(int(b.lengths.max()), self.pad_to or 0)
            ids = b.padded_ids(T, fill=0)
            lens = b.lengths
            mask = np.arange(T)[None, :] >= lens[:, None]
            x = self.embedding(ids) + self._positions(T)[:T]
            y = self.encoder.forward_padded(x, mask)
            if self.pooling == "first":
                return y[:, 0]
            w = (~mask / lens[:, None]).astype(self._dtype)
            return ops.sum(y * w[:, :, None], 1)
        pe = self._positions(int(b.lengths.max()))

        def one(ids):
            y = self.encoder.forward_sentence(self.embedding(ids) + pe[:len(ids)])
            return y[0] if self.pooling == "first" else ops.mean(y, 0)

        return per_sentence(one, b, autobatched=ex == "autobatch")

    def logits_and_labels(self, batch, which="loss", vocab=None):
        """Logits (B, C) and labels (one output per sentence)."""
        b = self.as_batch(batch, vocab)
        return self.out(self.drop(self.sentence_vectors(b))), b.labels

    def epoch_padding(self, trees, batches):
        """Token rows the encoder computes in an epoch of ``batches`` (lists
        of indices into ``trees``) and how many are padding: ``steps``,
        ``real_steps``, ``pad_steps``, ``pad_fraction``, ``truncated`` (0),
        ``n``, ``max_len`` (as :func:`dynnets.runs.padding_waste`)."""
        lengths = np.fromiter((len(t.leaves()) for t in trees), dtype=np.int64, count=len(trees))
        real = int(lengths.sum())
        steps = real
        if self.execution == "padded":
            steps = sum(len(b) * max(int(lengths[b].max()), self.pad_to or 0) for b in batches if len(b))
        return {"steps": steps, "real_steps": real, "pad_steps": steps - real,
                "pad_fraction": (steps - real) / steps if steps else 0.0, "truncated": 0, "n": len(lengths),
                "max_len": self.pad_to}

    def extra_repr(self):
        c = self.config
        return (f"vocab={c['vocab_size']}, d_model={c['embed_dim']}, ff={c['hidden']}, layers={c['num_layers']}, "
                f"heads={c['nhead']}, {c['pooling']} pooling, {c['execution']}")
