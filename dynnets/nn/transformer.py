"""Transformer encoder layers with PyTorch's names, arguments and parameter
layout (``nn.TransformerEncoderLayer``, ``nn.TransformerEncoder``: a torch
``state_dict`` loads unchanged) and the two usual positional encodings, which
torch does not ship: :class:`PositionalEncoding` (sinusoidal, the PyTorch
tutorial's module of that name, buffer ``pe`` of shape (max_len, 1, d_model))
and :class:`LearnedPositionalEmbedding` (a trained table ``weight`` of shape
(max_len, d_model), as BERT's position embeddings).

Everything is built from the table's primitives (``attention_probs``,
``attention_apply``, ``layer_norm``, ``linear``, ``rows_like``...), so it runs
eagerly, in static graphs of unknown batch and length, traced and under
``dynnets.autobatch()``.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ..autograd import ops
from ..autograd import primitives as P
from ..autograd.engine import bind, is_grad_enabled
from ..autograd.values import as_operand, concrete
from . import functional as F
from .attention import MultiheadAttention
from .layers import Dropout, LayerNorm, Linear, ModuleList, as_generator, float_dtype, positive_int
from .module import Module, Parameter, check_device

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "PositionalEncoding", "LearnedPositionalEmbedding",
           "sinusoidal_table"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual
    connection and layer norm (Vaswani et al. 2017, sec. 3.1), as
    ``torch.nn.TransformerEncoderLayer``.

    Parameters
    ----------
    d_model, nhead : int
    dim_feedforward : int, default 2048
    dropout : float, default 0.1
        After the attention, inside and after the feed-forward block, and on
        the attention weights.
    activation : 'relu', 'gelu' or a callable (a function or a module)
    layer_norm_eps : float
    batch_first : bool
        (N, L, E) instead of (L, N, E).
    norm_first : bool
        Pre-norm (``x + sa(norm1(x))``) instead of post-norm (``norm1(x + sa(x))``).
    bias : bool
        Biases of the projections, linear layers and layer norms.
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    rng : int, Generator or None (keyword-only)

    Notes
    -----
    Submodules (torch's names): ``self_attn``, ``linear1``, ``dropout``,
    ``linear2``, ``norm1``, ``norm2``, ``dropout1``, ``dropout2``.

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``:
    src (L, N, E) / (N, L, E) / unbatched (L, E) -> the same shape.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None, *, rng=None):
        super().__init__()
        op = "TransformerEncoderLayer"
        check_device(op, device)
        dt = float_dtype(op, dtype)
        gen = as_generator(rng)
        d_model = positive_int(op, "d_model", d_model)
        dim_feedforward = positive_int(op, "dim_feedforward", dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dt, rng=gen)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dt, rng=gen)
        self.dropout = Dropout(dropout, rng=gen)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dt, rng=gen)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt)
        self.dropout1 = Dropout(dropout, rng=gen)
        self.dropout2 = Dropout(dropout, rng=gen)
        self.batch_first = bool(batch_first)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise RuntimeError(f"{op}: activation should be relu/gelu, not {activation}")
            activation = _ACTIVATIONS[activation]
        elif not callable(activation):
            raise TypeError(f"{op}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
        # torch's flag for its fast path (see TransformerEncoder)
        self.activation_relu_or_gelu = activation is F.relu or activation is F.gelu
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of ``encoder_layer`` (deep copies, so
    every layer starts from the same weights, as torch's), then ``norm``, as
    ``torch.nn.TransformerEncoder``.

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)``.

    Padded positions, as torch 2.13: where torch takes its nested-tensor fast
    path (``enable_nested_tensor``, evaluation mode, no gradients recorded,
    batch_first, post-norm, relu/gelu, an even number of heads, a padding
    mask and no ``mask``) the outputs at padded positions are 0 before
    ``norm``; otherwise they are computed like any other position. The real
    tokens' outputs are the same either way.
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        num_layers = positive_int("TransformerEncoder", "num_layers", num_layers)
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = bool(enable_nested_tensor)
        self.mask_check = bool(mask_check)
        el = encoder_layer
        self.use_nested_tensor = bool(
            enable_nested_tensor and isinstance(el, TransformerEncoderLayer) and not el.norm_first
            and el.self_attn.batch_first and el.self_attn.in_proj_bias is not None and el.activation_relu_or_gelu
            and el.norm1.eps == el.norm2.eps and el.self_attn.num_heads % 2 == 0)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self._fast_path(src, mask, src_key_padding_mask):
            x = ops.masked_fill(x, ops.unsqueeze(as_operand(src_key_padding_mask), -1), 0.0)
        if self.norm is not None:
            x = self.norm(x)
        return x

    def _fast_path(self, src, mask, pad):
        """Whether torch 2.13 would run its nested-tensor fast path (its padded outputs are then 0)."""
        if not self.use_nested_tensor or self.layers[0].training or len(src.shape) != 3 or pad is None \
                or mask is not None:
            return False
        if is_grad_enabled() and (getattr(src, "requires_grad", False)
                                  or any(p.requires_grad for p in self.parameters())):
            return False
        m = concrete(pad)
        if m is None:       # a static graph's mask: its values exist only when the graph runs
            return True
        if m.dtype != np.bool_:
            return False
        # torch checks that every row's padding is a suffix (left-aligned tokens)
        return not self.mask_check or bool((np.diff(m.astype(np.int8), axis=-1) >= 0).all())


def sinusoidal_table(max_len, d_model, dtype=np.float32):
    """(max_len, d_model): ``sin(pos / 10000^(2i / d))`` in even columns and
    ``cos`` in odd ones (Vaswani et al. 2017, sec. 3.5), as the PyTorch
    tutorial computes it."""
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    div = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(pos * div)
    pe[:, 1::2] = np.cos(pos * div[:d_model // 2])
    return pe.astype(dtype)


class PositionalEncoding(Module):
    """Sinusoidal positional encoding added to the input, then dropout: the
    PyTorch tutorial's ``PositionalEncoding(d_model, dropout=0.1, max_len=5000)``
    (its buffer ``pe`` (max_len, 1, d_model) loads unchanged).

    Shapes: x (L, N, d_model) (``batch_first=True``: (N, L, d_model)) -> the same.
    The length may be unknown in a static graph (the table is cut when it runs).
    """

    def __init__(self, d_model, dropout=0.1, max_len=5000, *, batch_first=False, dtype=None, rng=None):
        super().__init__()
        d_model = positive_int("PositionalEncoding", "d_model", d_model)
        self.max_len = positive_int("PositionalEncoding", "max_len", max_len)
        self.batch_first = bool(batch_first)
        self.dropout = Dropout(p=dropout, rng=rng)
        dt = float_dtype("PositionalEncoding", dtype)
        self.register_buffer("pe", sinusoidal_table(self.max_len, d_model, dt)[:, None, :])

    def forward(self, x):
        table = self.pe[:, 0] if self.batch_first else self.pe
        return self.dropout(x + bind(P.rows_like_p, table, x, axis=1 if self.batch_first else 0))


class LearnedPositionalEmbedding(Module):
    """A learned position table ``weight`` (max_len, d_model), N(0, 1) as
    ``nn.Embedding``, whose first L rows are added to the input, then dropout.

    Shapes: x (L, N, d_model) (``batch_first=True``: (N, L, d_model)) -> the same.
    """

    def __init__(self, max_len, d_model, dropout=0.0, *, batch_first=False, dtype=None, rng=None):
        super().__init__()
        self.max_len = positive_int("LearnedPositionalEmbedding", "max_len", max_len)
        d_model = positive_int("LearnedPositionalEmbedding", "d_model", d_model)
        self.batch_first = bool(batch_first)
        dt = float_dtype("LearnedPositionalEmbedding", dtype)
        gen = as_generator(rng)
        self.weight = Parameter(gen.standard_normal((self.max_len, d_model)).astype(dt))
        self.dropout = Dropout(p=dropout, rng=gen)

    def forward(self, x):
        pos = bind(P.rows_like_p, self.weight, x, axis=1 if self.batch_first else 0)
        if not self.batch_first:
            pos = ops.unsqueeze(pos, 1)
        return self.dropout(x + pos)
