"""Ragged (packed, variable-length) attention: the layout of FlashAttention's
varlen kernels (``cu_seqlens``) and of PyTorch's nested tensors.

Sentences are concatenated into one ``(N, E)`` array of token rows, with
``offsets`` (``B + 1`` integers, ``offsets[0] == 0``, ``offsets[-1] == N``)
marking each sentence's rows. Projections and feed-forward layers run on the
``N`` real tokens as plain matrix products; this primitive runs each
sentence's multi-head attention over that sentence alone, in one pass of a
kernel that reads the offsets: no padding, no mask, and no ``(B, T, T)`` score
tensor (scores live one row at a time; the backward recomputes them from the
saved log-sum-exp).
"""
from __future__ import annotations

import math
import os

import numpy as np

from .. import kernels_ragged as KR
from .. import reference_ragged as RR
from .core import Aval, ShapeError, batch_ragged, check_index, defprim, dims_match, fmt_shape, kernel_floats

__all__ = ["ragged_attention_p", "ragged_offsets"]


def ragged_offsets(op, offsets, n):
    """``offsets`` as a C-contiguous int64 array after checking it describes
    ``n`` packed rows (starts at 0, never decreases, ends at ``n``)."""
    o = np.ascontiguousarray(offsets, dtype=np.int64)
    if o.ndim != 1 or len(o) < 1:
        raise ShapeError(f"{op}: offsets must be a 1-D integer array of B + 1 sentence boundaries, got shape "
                         f"{fmt_shape(o.shape)}")
    if o[0] != 0 or o[-1] != n:
        raise ShapeError(f"{op}: offsets must start at 0 and end at the number of packed rows {n}, got "
                         f"offsets[0]={int(o[0])}, offsets[-1]={int(o[-1])}")
    if len(o) > 1 and (np.diff(o) < 0).any():
        b = int(np.argmax(np.diff(o) < 0))
        raise ShapeError(f"{op}: offsets must not decrease, got offsets[{b}]={int(o[b])} > "
                         f"offsets[{b + 1}]={int(o[b + 1])}")
    return o


def _scale(scale, E, num_heads):
    # a head width of 0 has all-zero scores: any scale (no division by zero)
    return 1.0 / math.sqrt(max(E // num_heads, 1)) if scale is None else float(scale)


def _split_heads(x, rows, n, L, H, D, order):
    return x[rows].reshape(n, L, H, D).transpose(order)


def _thread_count():
    """The threads the user allows for work outside BLAS: Numba's count of
    the calling thread, which :func:`dynnets.set_num_threads` and
    :func:`dynnets.blas.blas_threads` set."""
    import numba
    return numba.get_num_threads()


#: below this much work (``sum n L (L + D)``, about 15 ns each for the forward
#: at one thread: an SST minibatch of 25 with d_model 128 and 4 heads is ~26k)
#: a call runs on the calling thread alone: a hand-off to a pool thread and
#: back costs tens of microseconds
_SPLIT_MIN_WORK = 8192
_POOLS = {}
# a forked child has none of its parent's pool threads, but the executor
# would think it had and queue work nobody runs: the child starts its own
os.register_at_fork(after_in_child=_POOLS.clear)


def _pool(workers):
    """A lazily started pool of ``workers`` daemon threads (one per count, kept
    for the process: starting threads per call costs more than the work)."""
    pool = _POOLS.get(workers)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor
        pool = _POOLS.setdefault(workers, ThreadPoolExecutor(workers, thread_name_prefix="dynnets-ragged"))
    return pool


def _balanced_parts(offsets, D, threads):
    """The sentences grouped by length, as ``(L, n, rows)`` per distinct
    length ``L > 0`` (``rows`` the packed rows of its ``n`` sentences in
    order: a slice for one sentence, else (n * L,) int64), dealt into at most
    ``threads`` lists of about equal work (``L (L + D)`` multiply-adds per
    head and sentence): the sentences sorted by length are
    cut into ``threads`` runs of equal work (to within one sentence), and each
    run is grouped by length, so a cut costs at most one extra group (a
    length-bucketed batch of one length is cut in two). A single list when the
    call is too small to pay for a hand-off to another thread."""
    lens = np.diff(offsets)
    order = np.argsort(lens, kind="stable")
    order = order[lens[order] > 0]
    if not len(order):
        return [[]]
    sl = lens[order]
    cum = np.cumsum(sl * (sl + D))
    if threads > 1 and cum[-1] >= _SPLIT_MIN_WORK:
        target = cum[-1] * np.arange(1, threads) / threads
        cuts = np.searchsorted(cum, target)               # cum[cuts] >= target: cut after it or before it
        after = cum[cuts] - target < target - np.where(cuts > 0, cum[cuts - 1], 0)
        cuts = cuts + after
        bounds = np.unique(np.concatenate([[0], cuts, [len(order)]]))
    else:
        bounds = np.array([0, len(order)])
    parts = []
    for a, e in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        run = sl[a:e]
        edges = np.concatenate([[0], np.flatnonzero(np.diff(run)) + 1, [e - a]]).tolist()
        part = []
        for i, j in zip(edges[:-1], edges[1:]):
            L, st = int(run[i]), offsets[order[a + i:a + j]]
            if j - i == 1:
                part.append((L, 1, slice(int(st[0]), int(st[0]) + L)))
            else:
                part.append((L, j - i, (st[:, None] + np.arange(L)[None]).reshape(-1)))
        parts.append(part)
    return parts


def _run_parts(fn, parts, *args):
    """``fn(part, *args)`` for every part: the first on the calling thread,
    the others on the pool (numpy's matmul and ufuncs release the GIL, so the
    parts' BLAS calls and elementwise passes overlap). Every part finishes
    before an error propagates, so none writes into the outputs afterwards."""
    if len(parts) == 1:
        fn(parts[0], *args)
        return
    futures = [_pool(len(parts) - 1).submit(fn, p, *args) for p in parts[1:]]
    try:
        fn(parts[0], *args)
    finally:
        for f in futures:
            f.exception()
    for f in futures:
        f.result()


def _fwd_groups(groups, q, k, v, num_heads, scale, out, lse):
    N, E = q.shape
    H = num_heads
    D = E // H
    for L, n, rows in groups:
        qs = _split_heads(q, rows, n, L, H, D, (0, 2, 1, 3))
        s = np.matmul(qs, _split_heads(k, rows, n, L, H, D, (0, 2, 3, 1)))        # (n, H, L, L)
        s *= scale
        m = s.max(-1, keepdims=True)
        s -= m
        np.exp(s, out=s)
        tot = s.sum(-1, keepdims=True)
        s /= tot
        o = np.matmul(s, _split_heads(v, rows, n, L, H, D, (0, 2, 1, 3)))
        out[rows] = o.transpose(0, 2, 1, 3).reshape(n * L, E)
        np.log(tot, out=tot)
        tot += m
        lse[rows] = tot[..., 0].transpose(0, 2, 1).reshape(n * L, H)


def _grouped_fwd(q, k, v, offsets, num_heads, scale, threads=None):
    """:func:`kernels_ragged.ragged_attention_fwd` with BLAS: the sentences
    of each distinct length as one stack of ``(n * H)`` small products
    (``numpy.matmul`` calls BLAS per matrix). Each sentence still attends to
    itself only, with no padding. With ``threads`` > 1 (default: the count
    :func:`dynnets.set_num_threads` allows) the groups are dealt to that many
    threads (:func:`_balanced_parts`): BLAS does not split products this
    small over its own threads."""
    out = np.empty_like(q)
    lse = np.empty((q.shape[0], num_heads), dtype=q.dtype)
    parts = _balanced_parts(offsets, q.shape[1] // num_heads, _thread_count() if threads is None else threads)
    _run_parts(_fwd_groups, parts, q, k, v, num_heads, scale, out, lse)
    return out, lse


def _bwd_groups(groups, q, k, v, num_heads, scale, out, lse, g, glse, dq, dk, dv):
    N, E = q.shape
    H = num_heads
    D = E // H
    heads = (0, 2, 1, 3)
    for L, n, rows in groups:
        qs = _split_heads(q, rows, n, L, H, D, heads)
        ks = _split_heads(k, rows, n, L, H, D, heads)
        vs = _split_heads(v, rows, n, L, H, D, heads)
        gs = _split_heads(g, rows, n, L, H, D, heads)
        p = np.matmul(qs, ks.transpose(0, 1, 3, 2))
        p *= scale
        p -= lse[rows].reshape(n, L, H).transpose(0, 2, 1)[..., None]
        np.exp(p, out=p)                                                         # (n, H, L, L)
        dv[rows] = np.matmul(p.transpose(0, 1, 3, 2), gs).transpose(heads).reshape(n * L, E)
        di = (g[rows] * out[rows]).reshape(n * L, H, D).sum(-1) - glse[rows]
        ds = np.matmul(gs, vs.transpose(0, 1, 3, 2))
        ds -= di.reshape(n, L, H).transpose(0, 2, 1)[..., None]
        ds *= p
        ds *= scale
        dq[rows] = np.matmul(ds, ks).transpose(heads).reshape(n * L, E)
        dk[rows] = np.matmul(ds.transpose(0, 1, 3, 2), qs).transpose(heads).reshape(n * L, E)


def _grouped_bwd(q, k, v, offsets, num_heads, scale, out, lse, g, glse, threads=None):
    """:func:`kernels_ragged.ragged_attention_bwd` with BLAS, grouped by
    length and dealt to threads as :func:`_grouped_fwd`."""
    dq, dk, dv = np.empty_like(q), np.empty_like(q), np.empty_like(q)
    parts = _balanced_parts(offsets, q.shape[1] // num_heads, _thread_count() if threads is None else threads)
    _run_parts(_bwd_groups, parts, q, k, v, num_heads, scale, out, lse, g, glse, dq, dk, dv)
    return dq, dk, dv


_METHODS = {"kernel": (KR.ragged_attention_fwd, KR.ragged_attention_bwd),
            "grouped": (_grouped_fwd, _grouped_bwd),
            "twin": (RR.ragged_attention_fwd, RR.ragged_attention_bwd)}


def _method(method, offsets):
    # None: the BLAS stacks. Measured on SST minibatches of 25 (1000 training
    # sentences, d_model 128, 4 heads, float32, forward + backward, one
    # thread): shuffled batches (~20 distinct lengths each) kernel 0.61 s,
    # grouped 0.41-0.52 s; length-bucketed batches (~2 lengths) kernel
    # 0.33-0.46 s, grouped 0.16-0.20 s (benchmarks/bench_transformer.py
    # --only attention prints these rows). The Numba kernel's products are
    # loops (no BLAS inside njit without scipy) over rows of ~20 keys, which
    # do not reach BLAS's speed. Threads: the grouped method deals its groups
    # to Python threads (numpy releases the GIL). A Numba parallel=True
    # kernel (prange over (sentence, head) blocks) was tried and measured on
    # synthetic batches of 25 (lengths 1-49): forward + backward 335 ms of CPU
    # at one thread against 141 ms for the serial kernel (the outlined loop
    # body is not vectorised) and 89 ms grouped, and its OpenMP workers spin
    # while they wait, which on a loaded machine made two threads 4x slower
    # than one.
    return _METHODS["grouped" if method is None else method]


def _ragged_attention(q, k, v, offsets, num_heads=1, scale=None, method=None):
    """Multi-head softmax attention of each packed sentence over itself.

    Parameters
    ----------
    q, k, v : (N, E)
        Queries, keys and values of the packed tokens; head ``h`` is columns
        ``h*D:(h+1)*D``, ``D = E // num_heads`` (torch's layout).
    offsets : (B + 1,) int
        Sentence ``b`` is rows ``offsets[b]:offsets[b+1]`` (an empty sentence
        is allowed and has no rows).
    num_heads : int
    scale : float or None
        Factor of the scores; None gives ``1 / sqrt(D)``.
    method : None, 'kernel', 'grouped' or 'twin'
        ``kernel``: the Numba kernel (one pass over the offsets);
        ``grouped``: BLAS products on stacks of the sentences of each
        distinct length (no padding either), on as many threads as
        :func:`dynnets.set_num_threads` allows; ``twin``: the kernel's numpy
        specification (:mod:`..reference_ragged`); None chooses ``grouped``
        (the fastest, measured: see :func:`_method`).

    Returns
    -------
    out : (N, E)
        ``softmax(scale q_b k_b^T) v_b`` of each sentence ``b`` and head.
    lse : (N, num_heads)
        Each row's log-sum-exp of its scaled scores (saved for the VJP; it
        has a gradient too).
    """
    o = ragged_offsets("ragged_attention", offsets, q.shape[0])
    dt = np.result_type(q, k, v)
    q, k, v = (np.ascontiguousarray(a, dtype=dt) for a in (q, k, v))
    return _method(method, o)[0](q, k, v, o, int(num_heads), _scale(scale, q.shape[1], num_heads))


def _ragged_attention_shape(q, k, v, offsets, num_heads=1, scale=None, method=None):
    op = "ragged_attention"
    dt = kernel_floats(op, q=q, k=k, v=v)
    for name, a in (("q", q), ("k", k), ("v", v)):
        if len(a.shape) != 2:
            raise ShapeError(f"{op}: {name} must be 2-D (total_tokens, embed_dim) packed rows, got "
                             f"{name}.shape={fmt_shape(a.shape)}")
    for name, a in (("k", k), ("v", v)):
        if not (dims_match(a.shape[0], q.shape[0]) and dims_match(a.shape[1], q.shape[1])):
            raise ShapeError(f"{op}: {name}.shape={fmt_shape(a.shape)} does not match q.shape={fmt_shape(q.shape)} "
                             f"(one packed row per token, the same embed_dim)")
    if not isinstance(num_heads, (int, np.integer)) or isinstance(num_heads, bool) or num_heads < 1:
        raise ShapeError(f"{op}: num_heads must be a positive integer, got {num_heads!r}")
    E = q.shape[1]
    if E is not None and E % num_heads:
        raise ShapeError(f"{op}: embed_dim={E} (q.shape[1]) is not divisible by num_heads={num_heads}")
    if scale is not None and not isinstance(scale, (int, float, np.floating, np.integer)):
        raise ShapeError(f"{op}: scale must be a number or None, got {scale!r}")
    if method not in (None, "kernel", "grouped", "twin"):
        raise ShapeError(f"{op}: method must be None, 'kernel', 'grouped' or 'twin', got {method!r}")
    check_index(op, "offsets", offsets)
    n = q.shape[0]
    return Aval((n, E), dt), Aval((n, num_heads), dt)


def _ragged_attention_vjp(g, ins, out, num_heads=1, scale=None, method=None):
    q, k, v, offsets = ins
    o, lse = out
    off = ragged_offsets("ragged_attention", offsets, o.shape[0])
    dt = o.dtype
    go = np.zeros_like(o) if g[0] is None else np.ascontiguousarray(g[0], dtype=dt)
    gl = np.zeros_like(lse) if g[1] is None else np.ascontiguousarray(g[1], dtype=dt)
    q, k, v = (np.ascontiguousarray(a, dtype=dt) for a in (q, k, v))
    dq, dk, dv = _method(method, off)[1](q, k, v, off, int(num_heads), _scale(scale, q.shape[1], num_heads),
                                           o, lse, go, gl)
    return (dq.astype(ins[0].dtype, copy=False), dk.astype(ins[1].dtype, copy=False),
            dv.astype(ins[2].dtype, copy=False), None)


# under autobatch, per-sentence calls (offsets [0, T]) of any lengths run as
# one call: their rows stacked, their offsets shifted and joined
ragged_attention_p = defprim("ragged_attention", _ragged_attention, _ragged_attention_shape,
                             joint_vjp=_ragged_attention_vjp, multiple_results=True, nondiff_args=(3,),
                             batch=batch_ragged(0, 1, 2, offsets=3))
