"""``MultiheadAttention`` with PyTorch's names, arguments and parameter
layout (``in_proj_weight`` / ``in_proj_bias`` / ``out_proj``, so a torch
``state_dict`` loads unchanged), on the attention primitives through
:func:`dynnets.nn.functional_attention.mha` (see there for the masks).
"""
from __future__ import annotations

import numpy as np

from .functional_attention import mha
from .init import xavier_uniform_
from .linear import Linear
from .module import Module, Parameter, as_generator, check_device, check_float_input, float_dtype, positive_int

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Multi-head attention (Vaswani et al. 2017, sec. 3.2.2), as
    ``torch.nn.MultiheadAttention``.

    Parameters
    ----------
    embed_dim, num_heads : int
        ``embed_dim`` must be divisible by ``num_heads``.
    dropout : float
        Dropout on the attention weights in training mode.
    bias : bool
    add_bias_kv, add_zero_attn : False
    kdim, vdim : None or embed_dim
    batch_first : bool
        Inputs (N, L, E) instead of (L, N, E).
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    rng : int, Generator or None (keyword-only)
        Initial weights (in_proj_weight, then out_proj's) and dropout masks.

    Attributes
    ----------
    in_proj_weight : Parameter (3 embed_dim, embed_dim), rows [W_q; W_k; W_v], Xavier-uniform
    in_proj_bias : Parameter (3 embed_dim,) of zeros, or None
    out_proj : Linear(embed_dim, embed_dim), bias zeros

    Notes
    -----
    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    ``(attn_output, attn_weights)``: output as the query, weights (N, L, S)
    averaged over heads (``average_attn_weights=False``: (N, H, L, S)) or
    None when ``need_weights=False``.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None, *, rng=None):
        super().__init__()
        op = "MultiheadAttention"
        self.embed_dim = positive_int(op, "embed_dim", embed_dim)
        self.num_heads = positive_int(op, "num_heads", num_heads)
        if self.embed_dim % self.num_heads:
            raise ValueError(f"{op}: embed_dim must be divisible by num_heads, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads}")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError(f"{op}: add_bias_kv and add_zero_attn are not supported")
        for name, d in (("kdim", kdim), ("vdim", vdim)):
            if d is not None and d != embed_dim:
                raise NotImplementedError(f"{op}: {name}={d} different from embed_dim={embed_dim} is not supported")
        if not 0.0 <= float(dropout) <= 1.0:
            raise ValueError(f"{op}: dropout must be in [0, 1], got {dropout!r}")
        check_device(op, device)
        dt = float_dtype(op, dtype)
        self.kdim = self.vdim = self.embed_dim
        self._qkv_same_embed_dim = True
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        self.head_dim = self.embed_dim // self.num_heads
        self._gen = as_generator(rng)
        self.in_proj_weight = Parameter(np.zeros((3 * self.embed_dim, self.embed_dim), dtype=dt))
        xavier_uniform_(self.in_proj_weight, generator=self._gen)
        self.in_proj_bias = Parameter(np.zeros(3 * self.embed_dim, dtype=dt)) if bias else None
        self.out_proj = Linear(self.embed_dim, self.embed_dim, bias=bias, dtype=dt, rng=self._gen)
        if bias:
            self.out_proj.bias = Parameter(np.zeros(self.embed_dim, dtype=dt))     # torch's constant_(0.)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        w = self.in_proj_weight
        if getattr(query, "dtype", None) is not w.dtype:
            query = check_float_input("MultiheadAttention", query, w, what="query")
        return mha(
            query, key, value, self.num_heads, w, self.in_proj_bias, self.out_proj.weight, self.out_proj.bias,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            average_attn_weights=average_attn_weights, dropout_p=self.dropout, training=self.training,
            is_causal=is_causal, batch_first=self.batch_first, generator=self._gen)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, " \
               f"batch_first={self.batch_first}"
