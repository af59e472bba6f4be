"""Numba kernels of ragged (packed, variable-length) attention.

Sentences are concatenated into one packed ``(N, E)`` array of token rows;
``offsets`` (``B + 1`` int64, FlashAttention's ``cu_seqlens``) marks where
each one starts and ends. Each sentence attends only to itself, so no
``(B, T, T)`` padded score tensor and no mask exist: a row's scores are its
own sentence's ``T`` keys, one score buffer of the longest sentence's length
serves every row.

BLAS inside ``njit`` needs scipy (not a dependency), so the products are
loops, written in axpy form (the innermost loop adds a multiple of one
contiguous row to another) so that LLVM vectorises them without fastmath's
reassociation: scores use a per-head transposed copy of the sentence's keys.

Each kernel has a plain-numpy twin of the same name and signature in
:mod:`dynnets.autograd.reference_ragged` (the specification), compared in
``tests/autograd/test_ragged.py``.

Shapes: ``q, k, v, out, g`` (N, E) C-contiguous of one float dtype,
``E = num_heads * D``; head ``h`` is columns ``h*D:(h+1)*D`` (torch's
``MultiheadAttention`` layout); ``lse`` (N, num_heads); offsets are not
validated here (the primitive does it).
"""

import math

import numpy as np
from numba import njit

__all__ = ["ragged_attention_fwd", "ragged_attention_bwd"]


@njit(cache=True, nogil=True)
def ragged_attention_fwd(q, k, v, offsets, num_heads, scale):
    """Softmax attention of each packed sentence over itself.

    Returns
    -------
    out : (N, E)
        ``softmax(scale * q_s k_s^T) v_s`` per sentence ``s`` and head.
    lse : (N, num_heads)
        Log-sum-exp of each row's scaled scores (the backward recomputes the
        probabilities from it, as FlashAttention, instead of storing them).
    """
    N, E = q.shape
    D = E // num_heads
    out = np.zeros((N, E), dtype=q.dtype)
    lse = np.empty((N, num_heads), dtype=q.dtype)
    B = offsets.shape[0] - 1
    tmax = 0
    for b in range(B):
        tmax = max(tmax, offsets[b + 1] - offsets[b])
    kt = np.empty((D, tmax), dtype=q.dtype)
    s = np.empty(tmax, dtype=q.dtype)
    for b in range(B):
        o0 = offsets[b]
        T = offsets[b + 1] - o0
        for h in range(num_heads):
            c0 = h * D
            for t in range(T):
                for d in range(D):
                    kt[d, t] = k[o0 + t, c0 + d]
            for i in range(T):
                r = o0 + i
                for j in range(T):
                    s[j] = 0.0
                for d in range(D):
                    qd = q[r, c0 + d] * scale
                    for j in range(T):
                        s[j] += qd * kt[d, j]
                m = s[0]
                for j in range(1, T):
                    if s[j] > m:
                        m = s[j]
                tot = 0.0
                for j in range(T):
                    e = math.exp(s[j] - m)
                    s[j] = e
                    tot += e
                inv = 1.0 / tot
                for j in range(T):
                    p = s[j] * inv
                    for d in range(D):
                        out[r, c0 + d] += p * v[o0 + j, c0 + d]
                lse[r, h] = m + math.log(tot)
    return out, lse


@njit(cache=True, nogil=True)
def ragged_attention_bwd(q, k, v, offsets, num_heads, scale, out, lse, g, glse):
    """Gradients of :func:`ragged_attention_fwd` with respect to ``q, k, v``.

    ``g`` (N, E) is the output's gradient, ``glse`` (N, num_heads) the
    log-sum-exp's (zeros when it has none). With ``p = softmax(s)`` of a row,
    ``dv_j += p_j g``, ``dp_j = g . v_j``, and
    ``ds_j = p_j (dp_j - g . out + glse)`` (``g . out = sum_j p_j dp_j``);
    then ``dq += scale ds_j k_j`` and ``dk_j += scale ds_j q``.

    Returns
    -------
    dq, dk, dv : (N, E)
    """
    N, E = q.shape
    D = E // num_heads
    dq = np.zeros((N, E), dtype=q.dtype)
    dk = np.zeros((N, E), dtype=q.dtype)
    dv = np.zeros((N, E), dtype=q.dtype)
    B = offsets.shape[0] - 1
    tmax = 0
    for b in range(B):
        tmax = max(tmax, offsets[b + 1] - offsets[b])
    kt = np.empty((D, tmax), dtype=q.dtype)
    vt = np.empty((D, tmax), dtype=q.dtype)
    p = np.empty(tmax, dtype=q.dtype)
    dp = np.empty(tmax, dtype=q.dtype)
    for b in range(B):
        o0 = offsets[b]
        T = offsets[b + 1] - o0
        for h in range(num_heads):
            c0 = h * D
            for t in range(T):
                for d in range(D):
                    kt[d, t] = k[o0 + t, c0 + d]
                    vt[d, t] = v[o0 + t, c0 + d]
            for i in range(T):
                r = o0 + i
                for j in range(T):
                    p[j] = 0.0
                    dp[j] = 0.0
                for d in range(D):
                    qd = q[r, c0 + d] * scale
                    gd = g[r, c0 + d]
                    for j in range(T):
                        p[j] += qd * kt[d, j]
                        dp[j] += gd * vt[d, j]
                m = lse[r, h]
                di = 0.0
                for d in range(D):
                    di += g[r, c0 + d] * out[r, c0 + d]
                di -= glse[r, h]
                for j in range(T):
                    pj = math.exp(p[j] - m)
                    ds = pj * (dp[j] - di) * scale
                    for d in range(D):
                        dv[o0 + j, c0 + d] += pj * g[r, c0 + d]
                        dq[r, c0 + d] += ds * k[o0 + j, c0 + d]
                        dk[o0 + j, c0 + d] += ds * q[r, c0 + d]
    return dq, dk, dv
