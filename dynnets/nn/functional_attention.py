"""Attention under PyTorch's functional names: ``scaled_dot_product_attention``
(torch 2.x's) and ``multi_head_attention_forward`` (re-exported by
:mod:`dynnets.nn.functional`; the module ``MultiheadAttention`` is in
:mod:`dynnets.nn.attention`).

Both run on the primitives ``attention_probs_p`` and ``attention_apply_p``
(:mod:`dynnets.autograd.primitives.attention`): eagerly, in static graphs
(placeholders of unknown batch and length, a placeholder
``key_padding_mask``), traced and under ``dynnets.autobatch()``.

Masks, as torch: a boolean ``key_padding_mask`` / MHA ``attn_mask`` is True
where a position may NOT be attended; a boolean SDPA ``attn_mask`` is True
where it MAY (torch's two conventions); float masks are added to the scores.
A query whose every key is masked gets NaN weights from
``MultiheadAttention(need_weights=True)`` and zeros from
``scaled_dot_product_attention`` and ``need_weights=False`` (torch's SDPA
path), as torch 2.13.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd import ops
from ..autograd import primitives as P
from ..autograd.engine import bind
from ..autograd.tensor import Tensor
from ..autograd.values import as_operand, is_interpreted
from ..random import generator as _generator

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward", "mha", "additive_mask"]


def additive_mask(op, what, mask, dtype, true_masks=True):
    """``mask`` as an additive float mask of ``dtype`` (0 and -inf for a bool
    mask; ``true_masks``: True marks a masked position, else an allowed one);
    a float mask as given (its dtype must be ``dtype``). None stays None.
    Symbolic masks (static placeholders) become graph ops."""
    if mask is None:
        return None
    dt = np.dtype(dtype)
    if is_interpreted(mask) or (isinstance(mask, Tensor) and mask.requires_grad):
        mdt = np.dtype(mask.dtype)
        if mdt == np.bool_:
            neg, zero = np.array(-np.inf, dt), np.array(0.0, dt)
            return ops.where(mask, neg, zero) if true_masks else ops.where(mask, zero, neg)
        if mdt != dt:
            raise P.DTypeError(f"{op}: {what} must be bool or of the query's dtype {dt}, got dtype {mdt}")
        return mask
    m = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if m.dtype == np.bool_:
        out = np.zeros(m.shape, dt)
        out[m if true_masks else ~m] = -np.inf
        return out
    if m.dtype != dt:
        raise P.DTypeError(f"{op}: {what} must be bool or of the query's dtype {dt}, got dtype {m.dtype}")
    return m


def _add_masks(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a + b
    return ops.add(a, b)


def _expand(m, *axes):
    for ax in axes:
        m = np.expand_dims(m, ax) if isinstance(m, np.ndarray) else ops.unsqueeze(m, ax)
    return m


def _reshape(m, shape):
    return m.reshape(shape) if isinstance(m, np.ndarray) else ops.reshape(m, shape)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, generator=None):
    """``softmax(q k^T scale + mask) v``, as torch 2.x's
    ``torch.nn.functional.scaled_dot_product_attention``.

    Parameters
    ----------
    query : Tensor, shape (..., L, E)
    key : Tensor, shape (..., S, E)
    value : Tensor, shape (..., S, Ev)
    attn_mask : bool (True = may attend) or float (added), broadcasting to (..., L, S), or None
    dropout_p : float
        Dropout on the attention weights, always applied when > 0 (as torch:
        pass ``dropout_p=0.0`` in evaluation).
    is_causal : bool
        Mask the upper triangle (query i sees keys 0..i); not with ``attn_mask``.
    scale : float or None
        Default ``1 / sqrt(E)``.
    enable_gqa : False
    generator : numpy Generator, seed or None (keyword-only)
        Draws the dropout mask.

    Returns
    -------
    Tensor, shape (..., L, Ev). A query with every key masked gives 0 (torch's safe softmax).
    """
    op = "scaled_dot_product_attention"
    if enable_gqa:
        raise NotImplementedError(f"{op}: enable_gqa=True is not supported")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: _scaled_dot_product_attention: Explicit attn_mask should not be set when "
                         f"is_causal=True (torch's rule): pass one of them")
    dt = np.dtype(query.dtype)
    e = query.shape[-1]
    if scale is None:
        if e is None:
            raise P.ShapeError(f"{op}: query.shape[-1] must be known for the default scale 1/sqrt(E), got "
                               f"query.shape={tuple(query.shape)}; pass scale=")
        scale = 1.0 / math.sqrt(e) if e else 1.0
    if is_causal:
        lq, lk = query.shape[-2], key.shape[-2]
        if lq is None or lk is None:
            raise P.ShapeError(f"{op}: is_causal=True needs known lengths, got query.shape={tuple(query.shape)} "
                               f"and key.shape={tuple(key.shape)}; pass a boolean attn_mask")
        attn_mask = np.tril(np.ones((lq, lk), dtype=bool))
    mask = additive_mask(op, "attn_mask", attn_mask, dt, true_masks=False)
    if mask is not None:
        mask = _expand(mask, -3 if len(mask.shape) >= 2 else 0)
    args = (query, key) if mask is None else (query, key, mask)
    probs = bind(P.attention_probs_p, *args, num_heads=1, scale=float(scale), safe=True)
    if dropout_p:
        probs = ops.dropout(probs, float(dropout_p), _generator(generator))
    return bind(P.attention_apply_p, probs, value)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False, *, generator=None):
    """Multi-head attention, as ``torch.nn.functional.multi_head_attention_forward``
    (torch's signature; inputs (L, N, E) or unbatched (L, E)); see
    :class:`MultiheadAttention`. ``bias_k``, ``bias_v``, ``static_k``,
    ``static_v``, separate projection weights and ``add_zero_attn`` are not
    supported (they raise). Returns ``(output, weights or None)``."""
    op = "multi_head_attention_forward"
    for name, v in (("bias_k", bias_k), ("bias_v", bias_v), ("static_k", static_k), ("static_v", static_v),
                    ("q_proj_weight", q_proj_weight), ("k_proj_weight", k_proj_weight),
                    ("v_proj_weight", v_proj_weight)):
        if v is not None:
            raise NotImplementedError(f"{op}: {name} is not supported (pass None)")
    if add_zero_attn or use_separate_proj_weight:
        raise NotImplementedError(f"{op}: add_zero_attn and use_separate_proj_weight are not supported")
    if query.shape[-1] is not None and query.shape[-1] != embed_dim_to_check:
        raise P.ShapeError(f"{op}: was expecting embedding dimension of {embed_dim_to_check}, but got "
                           f"{query.shape[-1]}")
    return mha(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                key_padding_mask, need_weights, attn_mask, average_attn_weights, dropout_p, training, is_causal,
                False, generator)


def mha(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
         key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True, dropout_p=0.0,
         training=True, is_causal=False, batch_first=False, generator=None):
    """Multi-head attention with torch's packed input projection; query (L, N, E)
    (``batch_first``: (N, L, E)) or unbatched (L, E)."""
    op = "MultiheadAttention"
    nd = len(query.shape)
    if nd not in (2, 3):
        raise P.ShapeError(f"{op}: query must be 3-D (batched) or 2-D (unbatched), got query.shape="
                           f"{tuple(query.shape)}")
    if len(key.shape) != nd or len(value.shape) != nd:
        raise P.ShapeError(f"{op}: query, key and value must have the same number of dimensions, got query.shape="
                           f"{tuple(query.shape)}, key.shape={tuple(key.shape)}, value.shape={tuple(value.shape)}")
    if is_causal and attn_mask is None:
        raise RuntimeError(f"{op}: Need attn_mask if specifying the is_causal hint (as torch: pass the causal mask "
                           f"as attn_mask)")
    unbatched = nd == 2
    if unbatched:
        q, k, v = (ops.unsqueeze(t, 0) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = _expand(as_operand(key_padding_mask), 0)
    elif batch_first:
        q, k, v = query, key, value
    else:
        q, k, v = (ops.transpose(t, 0, 1) for t in (query, key, value))
    e = in_proj_weight.shape[1]
    if q.shape[-1] is not None and q.shape[-1] != e:
        raise P.ShapeError(f"{op}: was expecting embedding dimension of {e}, but got {q.shape[-1]} (query.shape="
                           f"{tuple(query.shape)})")
    if key is query and value is query:
        qkv = ops.linear(q, in_proj_weight, in_proj_bias)
        q, k, v = ops.chunk(qkv, 3, -1)
    else:
        ws = [ops.getitem(in_proj_weight, slice(i * e, (i + 1) * e)) for i in range(3)]
        bs = [None if in_proj_bias is None else ops.getitem(in_proj_bias, slice(i * e, (i + 1) * e))
              for i in range(3)]
        q, k, v = (ops.linear(t, w, b) for t, w, b in zip((q, k, v), ws, bs))
    dt = np.dtype(query.dtype)
    mask = None
    if attn_mask is not None:
        am = additive_mask(op, "attn_mask", attn_mask, dt)
        if len(am.shape) == 2:
            am = _expand(am, 0, 0)                                   # (L, S) -> (1, 1, L, S)
        elif len(am.shape) == 3:
            am = _reshape(am, (-1, num_heads) + tuple(am.shape[1:]))  # (N H, L, S) -> (N, H, L, S)
        else:
            raise P.ShapeError(f"{op}: attn_mask must be 2-D (L, S) or 3-D (N * num_heads, L, S), got "
                               f"attn_mask.shape={tuple(attn_mask.shape)}")
        mask = am
    if key_padding_mask is not None:
        kp = additive_mask(op, "key_padding_mask", key_padding_mask, dt)
        if len(kp.shape) != 2:
            raise P.ShapeError(f"{op}: key_padding_mask must be (N, S) (unbatched: (S,)), got key_padding_mask.shape="
                               f"{tuple(key_padding_mask.shape)}")
        mask = _add_masks(mask, _expand(kp, 1, 1))                   # (N, S) -> (N, 1, 1, S)
    hd = e // num_heads
    args = (q, k) if mask is None else (q, k, mask)
    probs = bind(P.attention_probs_p, *args, num_heads=num_heads, scale=1.0 / math.sqrt(hd),
                 safe=not need_weights)
    if dropout_p and training:
        probs = ops.dropout(probs, float(dropout_p), _generator(generator))
    out = ops.linear(bind(P.attention_apply_p, probs, v), out_proj_weight, out_proj_bias)
    if unbatched:
        out = ops.squeeze(out, 0)
    elif not batch_first:
        out = ops.transpose(out, 0, 1)
    if not need_weights:
        return out, None
    w = ops.mean(probs, 1) if average_attn_weights else probs
    return out, (ops.squeeze(w, 0) if unbatched else w)


