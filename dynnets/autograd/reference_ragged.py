"""Plain-numpy twins of :mod:`dynnets.autograd.kernels_ragged`: the
specification (same names, signatures, outputs and dtypes), one sentence at a
time with the heads as a batch of matrix products."""

import numpy as np

__all__ = ["ragged_attention_fwd", "ragged_attention_bwd"]


def _heads(x, num_heads):
    """(T, E) -> (num_heads, T, D)."""
    T, E = x.shape
    return x.reshape(T, num_heads, E // num_heads).transpose(1, 0, 2)


def _merge(x):
    """(num_heads, T, D) -> (T, E)."""
    H, T, D = x.shape
    return x.transpose(1, 0, 2).reshape(T, H * D)


def ragged_attention_fwd(q, k, v, offsets, num_heads, scale):
    """out (N, E), lse (N, num_heads): softmax attention within each sentence."""
    out = np.zeros_like(q)
    lse = np.empty((q.shape[0], num_heads), dtype=q.dtype)
    for b in range(len(offsets) - 1):
        a, e = int(offsets[b]), int(offsets[b + 1])
        if e == a:
            continue
        qs, ks, vs = _heads(q[a:e], num_heads), _heads(k[a:e], num_heads), _heads(v[a:e], num_heads)
        s = scale * (qs @ ks.transpose(0, 2, 1))                       # (H, T, T)
        m = s.max(-1, keepdims=True)
        ex = np.exp(s - m)
        tot = ex.sum(-1, keepdims=True)
        out[a:e] = _merge((ex / tot) @ vs)
        lse[a:e] = (m + np.log(tot))[..., 0].T
    return out, lse


def ragged_attention_bwd(q, k, v, offsets, num_heads, scale, out, lse, g, glse):
    """dq, dk, dv (N, E) of :func:`ragged_attention_fwd`."""
    dq, dk, dv = np.zeros_like(q), np.zeros_like(q), np.zeros_like(q)
    for b in range(len(offsets) - 1):
        a, e = int(offsets[b]), int(offsets[b + 1])
        if e == a:
            continue
        qs, ks, vs = _heads(q[a:e], num_heads), _heads(k[a:e], num_heads), _heads(v[a:e], num_heads)
        gs, os = _heads(g[a:e], num_heads), _heads(out[a:e], num_heads)
        p = np.exp(scale * (qs @ ks.transpose(0, 2, 1)) - lse[a:e].T[..., None])
        dv[a:e] = _merge(p.transpose(0, 2, 1) @ gs)
        dp = gs @ vs.transpose(0, 2, 1)
        di = (gs * os).sum(-1, keepdims=True) - glse[a:e].T[..., None]
        ds = p * (dp - di) * scale
        dq[a:e] = _merge(ds @ ks)
        dk[a:e] = _merge(ds.transpose(0, 2, 1) @ qs)
    return dq, dk, dv
