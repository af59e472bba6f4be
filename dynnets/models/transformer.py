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
    one sentence at a time with plain ops (:meth:`TransformerEncoder.forward_sentence`),
    also the code ``dn.autobatch()`` batches.

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
from ..nn import functional as F
from ..nn.module import Parameter
from .common import ModelBase, SentenceExample, prepare_sentences
from .registry import register

__all__ = ["TransformerEncoder", "EncoderLayer", "SelfAttention", "sinusoidal_positions", "pad_batch",
           "StaticEncoderGraph", "TransformerClassifier", "TransformerBatch"]


def sinusoidal_positions(n, d, dtype=np.float32):
    """Sinusoidal position encodings (Vaswani et al. 2017, §3.5), (n, d):
    ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(...)``."""
    pos = np.arange(n, dtype=np.float64)[:, None]
    div = np.exp(np.arange(0, d, 2, dtype=np.float64) * (-math.log(10000.0) / d))
    pe = np.zeros((n, d))
    pe[:, 0::2] = np.sin(pos * div)
    pe[:, 1::2] = np.cos(pos * div[: d // 2])
    return pe.astype(dtype)


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
        """(..., E) -> q, k, v, each (..., E)."""
        E = self.d_model
        y = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        return y[..., :E], y[..., E:2 * E], y[..., 2 * E:]

    def packed(self, x, offsets):
        """(N, E) packed rows -> (N, E): the ragged attention primitive."""
        q, k, v = self.qkv(x)
        return self.out_proj(ops.ragged_attention(q, k, v, offsets, num_heads=self.nhead))

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
        return self.out_proj(ops.reshape(ops.permute(a, (0, 2, 1, 3)), (B, T, E)))

    def sentence(self, x):
        """(T, E) one sentence -> (T, E), plain ops."""
        T, E = x.shape
        H = self.nhead
        D = E // H
        q, k, v = (ops.permute(ops.reshape(a, (T, H, D)), (1, 0, 2)) for a in self.qkv(x))
        s = ops.matmul(q, ops.transpose(k, -1, -2)) * (1.0 / math.sqrt(D))          # (H, T, T)
        a = ops.matmul(ops.softmax(s, -1), v)                                         # (H, T, D)
        return self.out_proj(ops.reshape(ops.permute(a, (1, 0, 2)), (T, E)))


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
        x = self.norm1(x + self.dropout(a))
        h = self.linear1(x)
        h = ops.relu(h) if self.activation == "relu" else ops.gelu(h)
        return self.norm2(x + self.dropout(self.linear2(self.dropout(h))))

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

    def __init__(self, encoder, dtype=None):
        from .. import static as tf
        self.tf = tf
        dt = encoder.layers[0].self_attn.in_proj_weight.numpy().dtype if dtype is None else np.dtype(dtype)
        E, H = encoder.d_model, encoder.nhead
        D = E // H
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.x = tf.placeholder(dt, [None, None, E], name="x")
            self.lengths = tf.placeholder(np.int32, [None], name="lengths")
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
                h = F.layer_norm(h + lin(a, "self_attn.out_proj"), (E,), v[p + "norm1.weight"], v[p + "norm1.bias"],
                                 layer.norm1.eps)
                f = lin(h, "linear1")
                f = tf.nn.relu(f) if layer.activation == "relu" else tf.nn.gelu(f)
                h = F.layer_norm(h + lin(f, "linear2"), (E,), v[p + "norm2.weight"], v[p + "norm2.bias"],
                                 layer.norm2.eps)
            self.out = h
            self.init = tf.global_variables_initializer()

    def session(self):
        """A Session on :attr:`graph` with the variables initialised."""
        sess = self.tf.Session(graph=self.graph)
        sess.run(self.init)
        return sess
