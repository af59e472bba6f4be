"""Numba kernels for level-batched tree models and packed (variable-length)
recurrent sequences.

Every public function has a plain-numpy twin of the same name and signature in
:mod:`dynnets.autograd.reference_tree` (the specification of record);
``tests/autograd/test_kernels_tree.py`` compares the two, also under
``NUMBA_DISABLE_JIT=1``.

Conventions (those of :mod:`dynnets.autograd.kernels`, with one difference)
-------------------------------------------------------------------------
* These kernels work on the *state arrays* of a whole minibatch: ``h_all``
  and ``c_all`` hold one row per tree node (in the level order of
  :class:`dynnets.data.batching.TreeBatch`) or per packed time step. One call
  handles one level (or one time step), reading rows written by earlier calls
  and writing its own rows. So, unlike ``kernels.py``, most kernels write into
  documented output buffers instead of returning fresh arrays (DESIGN.md rule
  3 allows "a documented output buffer"); they never write anything else.
* No module globals inside kernels, no jitted calls across files; the scalar
  helpers below live in this file so that Numba's cache sees their changes.
* Matrix products are left to the caller (numpy ``@``).
* Inputs are C-contiguous float32 or float64 arrays of one dtype (index arrays
  int64) and are not validated: the primitives in
  :mod:`dynnets.autograd.primitives` check shapes and indices first.
* Gate activations use a branch-free exponential (Cody-Waite reduction, a
  Taylor polynomial, the power of two built from its bits) that the compiler
  vectorises, in the kernel's own precision (float32 data: float32 maths,
  16 lanes per AVX-512 instruction). It agrees with ``np.exp`` to a few units
  in the last place; libm's scalar ``exp`` made the gates cost ~13 ns per
  element (measured with ``kernels.tree_lstm_fwd``), this ~0.3 ns in float32.
  Sigmoid uses exp(-|x|) only and tanh uses expm1(-2|x|), so neither overflows
  nor cancels at any input; NaN propagates. ``error_model="numpy"`` lets
  divisions vectorise (Python's model adds a zero check per division).

H is the hidden size; "row i of a level" is global node ``lo + i``.
"""

import numpy as np
from numba import njit

__all__ = [
    "gather_pairs",
    "scatter_pairs_add",
    "tree_lstm_level_fwd",
    "tree_lstm_level_bwd",
    "tanh_rows_fwd",
    "tanh_rows_bwd",
    "childsum_gather",
    "childsum_level_fwd",
    "childsum_level_bwd",
    "childsum_scatter_add",
    "lstm_step_fwd",
    "lstm_step_bwd",
    "gru_step_fwd",
    "gru_step_bwd",
    "sigmoid_rows",
    "tanh_rows",
    "tree_lstm_node_fwd",
    "tree_lstm_node_bwd",
    "tree_lstm_leaf_node_fwd",
    "tree_lstm_leaf_node_bwd",
]

# fastmath without 'nnan'/'ninf'/'reassoc': NaN must still propagate (anomaly
# detection), and results must not depend on how a loop was vectorised.
_FM = {"contract", "arcp", "nsz", "afn"}


# --------------------------------------------------------------------------
# vectorisable activations (private helpers; same file so the cache sees them)
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _expm1_neg64(w, e, em, kb, m):
    """For j < m and w[j] >= 0 (or NaN), in float64: e[j] = exp(-w[j]), em[j] = expm1(-w[j]).

    exp(-w) = 2^-k exp(r) with k = round(w / ln 2), r = k ln2 - w in
    [-ln2/2, ln2/2] (ln 2 split in two parts, Cody & Waite); expm1(r) by its
    Taylor series to r^13 (truncation < 5e-18); 2^-k from its IEEE bits. w is
    capped at 708 so that 2^-k stays a normal number (exp(-708) ~ 3e-308).
    """
    fb = kb.view(np.float64)
    for j in range(m):
        y = w[j]
        y = 708.0 if y > 708.0 else y
        # NaN stays in y (and so in r and the result); k only needs a number
        ki = np.int64((y if y == y else 0.0) * 1.4426950408889634 + 0.5)
        kf = np.float64(ki)
        r = (kf * 6.93147180369123816490e-01 - y) + kf * 1.90821492927058770002e-10
        q = r * (1.0 + r * (0.5 + r * (1.6666666666666666e-01 + r * (4.1666666666666664e-02 + r * (
            8.3333333333333332e-03 + r * (1.3888888888888889e-03 + r * (1.9841269841269841e-04 + r * (
                2.4801587301587302e-05 + r * (2.7557319223985893e-06 + r * (2.7557319223985888e-07 + r * (
                    2.5052108385441720e-08 + r * (2.0876756987868100e-09 + r * 1.6059043836821613e-10))))))))))))
        e[j] = q
        kb[j] = (1023 - ki) << 52
    for j in range(m):
        q = e[j]
        s = fb[j]
        ex = (1.0 + q) * s
        e[j] = ex
        em[j] = q if s == 1.0 else ex - 1.0


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _expm1_neg32(w, e, em, kb, m):
    """:func:`_expm1_neg64` in float32 (twice the vector lanes): w capped at
    87, Taylor series to r^8 (truncation < 6e-9); ``kb`` (int64 scratch) is
    used as int32."""
    kb32 = kb.view(np.int32)
    fb = kb32.view(np.float32)
    for j in range(m):
        y = w[j]
        y = np.float32(87.0) if y > np.float32(87.0) else y
        ki = np.int32((y if y == y else np.float32(0.0)) * np.float32(1.44269504) + np.float32(0.5))
        kf = np.float32(ki)
        r = (kf * np.float32(0.693145751953125) - y) + kf * np.float32(1.428606765330187e-06)
        q = r * (np.float32(1.0) + r * (np.float32(0.5) + r * (np.float32(0.16666667) + r * (
            np.float32(0.041666668) + r * (np.float32(0.008333334) + r * (np.float32(0.0013888889) + r * (
                np.float32(0.0001984127) + r * np.float32(2.4801588e-05))))))))
        e[j] = q
        kb32[j] = (np.int32(127) - ki) << np.int32(23)
    for j in range(m):
        q = e[j]
        s = fb[j]
        ex = (np.float32(1.0) + q) * s
        e[j] = ex
        em[j] = q if s == np.float32(1.0) else ex - np.float32(1.0)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _sigmoid64(x, out, w, e, em, kb, m):
    for j in range(m):
        w[j] = abs(x[j])
    _expm1_neg64(w, e, em, kb, m)
    for j in range(m):
        ex = e[j]
        s = 1.0 / (1.0 + ex)
        out[j] = s if x[j] >= 0 else ex * s


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _sigmoid32(x, out, w, e, em, kb, m):
    for j in range(m):
        w[j] = abs(x[j])
    _expm1_neg32(w, e, em, kb, m)
    for j in range(m):
        ex = e[j]
        s = np.float32(1.0) / (np.float32(1.0) + ex)
        out[j] = s if x[j] >= np.float32(0.0) else ex * s


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _tanh64(x, out, w, e, em, kb, m):
    for j in range(m):
        w[j] = 2.0 * abs(x[j])
    _expm1_neg64(w, e, em, kb, m)
    for j in range(m):
        a = em[j]
        t = -a / (2.0 + a)
        out[j] = t if x[j] >= 0 else -t


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _tanh32(x, out, w, e, em, kb, m):
    for j in range(m):
        w[j] = np.float32(2.0) * abs(x[j])
    _expm1_neg32(w, e, em, kb, m)
    for j in range(m):
        a = em[j]
        t = -a / (np.float32(2.0) + a)
        out[j] = t if x[j] >= np.float32(0.0) else -t


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _sigmoid_into(x, out, w, e, em, kb, m):
    """out[j] = sigmoid(x[j]) for j < m, in the precision of the scratch
    arrays w, e, em (float32 or float64, the kernel's dtype); kb is int64 scratch."""
    if w.itemsize == 4:
        _sigmoid32(x, out, w, e, em, kb, m)
    else:
        _sigmoid64(x, out, w, e, em, kb, m)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _tanh_into(x, out, w, e, em, kb, m):
    """out[j] = tanh(x[j]) = sign(x) * -expm1(-2|x|) / (2 + expm1(-2|x|)) for j < m."""
    if w.itemsize == 4:
        _tanh32(x, out, w, e, em, kb, m)
    else:
        _tanh64(x, out, w, e, em, kb, m)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def sigmoid_rows(x):
    """Logistic function of a 2-D array with the vectorised exponential.

    Parameters
    ----------
    x : (N, M) array

    Returns
    -------
    out : (N, M) array
    """
    N, M = x.shape
    out = np.empty((N, M), dtype=x.dtype)
    w = np.empty(M, dtype=x.dtype)
    e = np.empty(M, dtype=x.dtype)
    em = np.empty(M, dtype=x.dtype)
    kb = np.empty(M, dtype=np.int64)
    for b in range(N):
        _sigmoid_into(x[b], out[b], w, e, em, kb, M)
    return out


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tanh_rows(x):
    """Hyperbolic tangent of a 2-D array with the vectorised exponential.

    Parameters
    ----------
    x : (N, M) array

    Returns
    -------
    out : (N, M) array
    """
    N, M = x.shape
    out = np.empty((N, M), dtype=x.dtype)
    w = np.empty(M, dtype=x.dtype)
    e = np.empty(M, dtype=x.dtype)
    em = np.empty(M, dtype=x.dtype)
    kb = np.empty(M, dtype=np.int64)
    for b in range(N):
        _tanh_into(x[b], out[b], w, e, em, kb, M)
    return out


# --------------------------------------------------------------------------
# gathers and scatters of child rows
# --------------------------------------------------------------------------


@njit(cache=True, nogil=True, error_model="numpy")
def gather_pairs(h_all, left, right, out):
    """Concatenate the two children's rows: ``out[i] = [h_all[left[i]], h_all[right[i]]]``.

    Parameters
    ----------
    h_all : (N_nodes, H) array
    left, right : (n,) int64 arrays
        Global indices of the children of the n nodes of a level.
    out : (n, 2H) array
        Output buffer, overwritten.
    """
    n = left.shape[0]
    H = h_all.shape[1]
    for i in range(n):
        a = left[i]
        b = right[i]
        for j in range(H):
            out[i, j] = h_all[a, j]
            out[i, H + j] = h_all[b, j]


@njit(cache=True, nogil=True, error_model="numpy")
def scatter_pairs_add(g, left, right, dh_all):
    """Adjoint of :func:`gather_pairs`: ``dh_all[left[i]] += g[i, :H]``,
    ``dh_all[right[i]] += g[i, H:]`` (in order of i, so repeated indices add up).

    Parameters
    ----------
    g : (n, 2H) array
    left, right : (n,) int64 arrays
    dh_all : (N_nodes, H) array
        Accumulated in place.
    """
    n = left.shape[0]
    H = dh_all.shape[1]
    for i in range(n):
        a = left[i]
        b = right[i]
        for j in range(H):
            dh_all[a, j] += g[i, j]
            dh_all[b, j] += g[i, H + j]


# --------------------------------------------------------------------------
# binary Tree-LSTM, one level
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_level_fwd(z, b, c_all, left, right, lo, h_all, acts):
    """One level of the binary constituency Tree-LSTM (Tai et al. 2015, eqs.
    9-14, N = 2, no input at internal nodes).

    a = z[i] + b split into i, f_l, f_r, o, u; i, f_l, f_r, o = σ(.), u = tanh(.);
    c = i*u + f_l*c_l + f_r*c_r; h = o*tanh(c).

    Parameters
    ----------
    z : (n, 5H) array
        ``[h_l; h_r] @ U`` for the level's nodes (without the bias).
    b : (5H,) array
    c_all : (N_nodes, H) array
        Cell states; rows ``left``/``right`` are read, rows ``lo:lo+n`` written.
    left, right : (n,) int64 arrays
        Global indices of the children (in earlier levels).
    lo : int
        Global index of the level's first node.
    h_all : (N_nodes, H) array
        Rows ``lo:lo+n`` are written.
    acts : (n, 5H) array
        Output buffer: ``[i, f_l, f_r, o, u]`` for the backward pass.
    """
    n = z.shape[0]
    H = h_all.shape[1]
    G = 5 * H
    a = np.empty(G, dtype=z.dtype)
    w = np.empty(G, dtype=z.dtype)
    e = np.empty(G, dtype=z.dtype)
    em = np.empty(G, dtype=z.dtype)
    kb = np.empty(G, dtype=np.int64)
    tc = np.empty(H, dtype=z.dtype)
    for r in range(n):
        for j in range(G):
            a[j] = z[r, j] + b[j]
        act = acts[r]
        _sigmoid_into(a, act, w, e, em, kb, 4 * H)
        _tanh_into(a[4 * H:], act[4 * H:], w, e, em, kb, H)
        cl = left[r]
        cr = right[r]
        g = lo + r
        for j in range(H):
            c_all[g, j] = act[j] * act[4 * H + j] + act[H + j] * c_all[cl, j] + act[2 * H + j] * c_all[cr, j]
        _tanh_into(c_all[g], tc, w, e, em, kb, H)
        for j in range(H):
            h_all[g, j] = act[3 * H + j] * tc[j]


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_level_bwd(dh_all, dc_all, acts, c_all, left, right, lo, dz):
    """Vector-Jacobian product of :func:`tree_lstm_level_fwd` for one level.

    With t = tanh(c): dc_tot = dc + dh*o*(1-t²); dz = [dc_tot u i(1-i),
    dc_tot c_l f_l(1-f_l), dc_tot c_r f_r(1-f_r), dh t o(1-o), dc_tot i (1-u²)];
    the children's cell gradients get dc_tot f_l and dc_tot f_r.

    Parameters
    ----------
    dh_all, dc_all : (N_nodes, H) arrays
        Gradients of all states; rows ``lo:lo+n`` must be complete (every
        parent is in a later level, processed earlier). ``dc_all`` rows of the
        children are accumulated in place.
    acts : (n, 5H) array
    c_all : (N_nodes, H) array
    left, right : (n,) int64 arrays
    lo : int
    dz : (n, 5H) array
        Output buffer: gradient of the gate pre-activations.
    """
    n = acts.shape[0]
    H = c_all.shape[1]
    w = np.empty(H, dtype=acts.dtype)
    e = np.empty(H, dtype=acts.dtype)
    em = np.empty(H, dtype=acts.dtype)
    kb = np.empty(H, dtype=np.int64)
    tc = np.empty(H, dtype=acts.dtype)
    for r in range(n):
        g = lo + r
        cl = left[r]
        cr = right[r]
        _tanh_into(c_all[g], tc, w, e, em, kb, H)
        for j in range(H):
            i = acts[r, j]
            fl = acts[r, H + j]
            fr = acts[r, 2 * H + j]
            o = acts[r, 3 * H + j]
            u = acts[r, 4 * H + j]
            t = tc[j]
            dh = dh_all[g, j]
            dct = dc_all[g, j] + dh * o * (1.0 - t * t)
            dz[r, j] = dct * u * i * (1.0 - i)
            dz[r, H + j] = dct * c_all[cl, j] * fl * (1.0 - fl)
            dz[r, 2 * H + j] = dct * c_all[cr, j] * fr * (1.0 - fr)
            dz[r, 3 * H + j] = dh * t * o * (1.0 - o)
            dz[r, 4 * H + j] = dct * i * (1.0 - u * u)
            dc_all[cl, j] += dct * fl
            dc_all[cr, j] += dct * fr


# --------------------------------------------------------------------------
# rows with a tanh: Tree-RNN levels and the Elman RNN steps
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tanh_rows_fwd(z, b, lo, h_all):
    """``h_all[lo + i] = tanh(z[i] + b)`` (a Tree-RNN level, Socher et al.
    2011; or an Elman RNN step).

    Parameters
    ----------
    z : (n, H) array
    b : (H,) array
    lo : int
    h_all : (N, H) array
        Rows ``lo:lo+n`` are written.
    """
    n, H = z.shape
    a = np.empty(H, dtype=z.dtype)
    w = np.empty(H, dtype=z.dtype)
    e = np.empty(H, dtype=z.dtype)
    em = np.empty(H, dtype=z.dtype)
    kb = np.empty(H, dtype=np.int64)
    for r in range(n):
        for j in range(H):
            a[j] = z[r, j] + b[j]
        _tanh_into(a, h_all[lo + r], w, e, em, kb, H)


@njit(cache=True, nogil=True, error_model="numpy")
def tanh_rows_bwd(dh_all, h_all, lo, dz):
    """VJP of :func:`tanh_rows_fwd`: ``dz[i] = dh_all[lo+i] * (1 - h_all[lo+i]²)``.

    Parameters
    ----------
    dh_all, h_all : (N, H) arrays
    lo : int
    dz : (n, H) array
        Output buffer.
    """
    n, H = dz.shape
    for r in range(n):
        g = lo + r
        for j in range(H):
            h = h_all[g, j]
            dz[r, j] = dh_all[g, j] * (1.0 - h * h)


# --------------------------------------------------------------------------
# child-sum Tree-LSTM, one level
# --------------------------------------------------------------------------


@njit(cache=True, nogil=True, error_model="numpy")
def childsum_gather(h_all, ptr, idx, hsum, hch):
    """Children of a level's nodes: their rows and their sum.

    Node i's children are ``idx[ptr[i] - ptr[0] : ptr[i+1] - ptr[0]]``.

    Parameters
    ----------
    h_all : (N_nodes, H) array
    ptr : (n + 1,) int64 array
        CSR pointers of the level (absolute edge numbers).
    idx : (m,) int64 array
        Global child indices of the level's m edges.
    hsum : (n, H) array
        Output buffer: h̃ = Σ_k h_k (Tai et al. 2015, eq. 2).
    hch : (m, H) array
        Output buffer: the child rows, one per edge.
    """
    n = hsum.shape[0]
    H = h_all.shape[1]
    e0 = ptr[0]
    for i in range(n):
        for j in range(H):
            hsum[i, j] = 0.0
        for k in range(ptr[i] - e0, ptr[i + 1] - e0):
            c = idx[k]
            for j in range(H):
                v = h_all[c, j]
                hch[k, j] = v
                hsum[i, j] += v


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def childsum_level_fwd(ziou, zf, b_iou, b_f, c_all, ptr, idx, lo, h_all, acts, facts):
    """One level of the child-sum Tree-LSTM (Tai et al. 2015, eqs. 2-8, with
    no input at internal nodes).

    i, o = σ(z_iou + b_iou)[i, o], u = tanh(.)[u]; f_k = σ(zf_k + b_f) for
    each child k; c = i*u + Σ_k f_k*c_k; h = o*tanh(c).

    Parameters
    ----------
    ziou : (n, 3H) array
        ``h̃ @ U_iou`` (without bias), chunks i, o, u.
    zf : (m, H) array
        ``h_k @ U_f`` per edge (without bias).
    b_iou : (3H,) array
    b_f : (H,) array
    c_all : (N_nodes, H) array
        Children's rows read; rows ``lo:lo+n`` written.
    ptr : (n + 1,) int64 array
    idx : (m,) int64 array
    lo : int
    h_all : (N_nodes, H) array
        Rows ``lo:lo+n`` written.
    acts : (n, 3H) array
        Output buffer: ``[i, o, u]``.
    facts : (m, H) array
        Output buffer: forget gates per edge.
    """
    n = ziou.shape[0]
    H = h_all.shape[1]
    G = 3 * H
    a = np.empty(G, dtype=ziou.dtype)
    af = np.empty(H, dtype=ziou.dtype)
    w = np.empty(G, dtype=ziou.dtype)
    e = np.empty(G, dtype=ziou.dtype)
    em = np.empty(G, dtype=ziou.dtype)
    kb = np.empty(G, dtype=np.int64)
    tc = np.empty(H, dtype=ziou.dtype)
    e0 = ptr[0]
    for r in range(n):
        g = lo + r
        for j in range(G):
            a[j] = ziou[r, j] + b_iou[j]
        act = acts[r]
        _sigmoid_into(a, act, w, e, em, kb, 2 * H)
        _tanh_into(a[2 * H:], act[2 * H:], w, e, em, kb, H)
        for j in range(H):
            c_all[g, j] = act[j] * act[2 * H + j]
        for k in range(ptr[r] - e0, ptr[r + 1] - e0):
            for j in range(H):
                af[j] = zf[k, j] + b_f[j]
            _sigmoid_into(af, facts[k], w, e, em, kb, H)
            c = idx[k]
            for j in range(H):
                c_all[g, j] += facts[k, j] * c_all[c, j]
        _tanh_into(c_all[g], tc, w, e, em, kb, H)
        for j in range(H):
            h_all[g, j] = act[H + j] * tc[j]


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def childsum_level_bwd(dh_all, dc_all, acts, facts, c_all, ptr, idx, lo, dziou, dzf):
    """VJP of :func:`childsum_level_fwd` for one level.

    dc_tot = dc + dh*o*(1-t²); dz_iou = [dc_tot u i(1-i), dh t o(1-o),
    dc_tot i (1-u²)]; per child k: dzf_k = dc_tot c_k f_k(1-f_k) and
    dc_all[k] += dc_tot f_k.

    Parameters
    ----------
    dh_all, dc_all : (N_nodes, H) arrays
        Rows ``lo:lo+n`` complete; children's ``dc_all`` rows accumulated.
    acts : (n, 3H) array
    facts : (m, H) array
    c_all : (N_nodes, H) array
    ptr : (n + 1,) int64 array
    idx : (m,) int64 array
    lo : int
    dziou : (n, 3H) array
        Output buffer.
    dzf : (m, H) array
        Output buffer.
    """
    n = acts.shape[0]
    H = c_all.shape[1]
    w = np.empty(H, dtype=acts.dtype)
    e = np.empty(H, dtype=acts.dtype)
    em = np.empty(H, dtype=acts.dtype)
    kb = np.empty(H, dtype=np.int64)
    tc = np.empty(H, dtype=acts.dtype)
    dct = np.empty(H, dtype=acts.dtype)
    e0 = ptr[0]
    for r in range(n):
        g = lo + r
        _tanh_into(c_all[g], tc, w, e, em, kb, H)
        for j in range(H):
            i = acts[r, j]
            o = acts[r, H + j]
            u = acts[r, 2 * H + j]
            t = tc[j]
            dh = dh_all[g, j]
            d = dc_all[g, j] + dh * o * (1.0 - t * t)
            dct[j] = d
            dziou[r, j] = d * u * i * (1.0 - i)
            dziou[r, H + j] = dh * t * o * (1.0 - o)
            dziou[r, 2 * H + j] = d * i * (1.0 - u * u)
        for k in range(ptr[r] - e0, ptr[r + 1] - e0):
            c = idx[k]
            for j in range(H):
                f = facts[k, j]
                dzf[k, j] = dct[j] * c_all[c, j] * f * (1.0 - f)
                dc_all[c, j] += dct[j] * f


@njit(cache=True, nogil=True, error_model="numpy")
def childsum_scatter_add(dhsum, dhch, ptr, idx, dh_all):
    """Adjoint of :func:`childsum_gather` after the products: every child k
    of node i gets ``dh_all[idx[k]] += dhsum[i] + dhch[k]``.

    Parameters
    ----------
    dhsum : (n, H) array
        Gradient of h̃ per node.
    dhch : (m, H) array
        Gradient of each child row through its forget gate.
    ptr : (n + 1,) int64 array
    idx : (m,) int64 array
    dh_all : (N_nodes, H) array
        Accumulated in place.
    """
    n, H = dhsum.shape
    e0 = ptr[0]
    for i in range(n):
        for k in range(ptr[i] - e0, ptr[i + 1] - e0):
            c = idx[k]
            for j in range(H):
                dh_all[c, j] += dhsum[i, j] + dhch[k, j]


# --------------------------------------------------------------------------
# packed recurrent steps (time-major packed rows, as pack_padded_sequence)
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def lstm_step_fwd(pre, b, c_all, prev, off, h_all, acts):
    """One packed LSTM step (PyTorch ``LSTMCell`` maths, chunks i, f, g, o) for
    the n sequences still running.

    a = pre + b; i, f, o = σ(.), g = tanh(.); c = f*c_prev + i*g; h = o*tanh(c).

    Parameters
    ----------
    pre : (n, 4H) array
        ``x W_ih^T + b_ih + h_prev W_hh^T`` for the running sequences.
    b : (4H,) array
        Recurrent bias ``b_hh``.
    c_all : (T_total, H) array
        Rows ``prev:prev+n`` read (when ``prev >= 0``), rows ``off:off+n`` written.
    prev : int
        First packed row of the previous step, or -1 at the first step
        (zero initial state).
    off : int
        First packed row of this step.
    h_all : (T_total, H) array
        Rows ``off:off+n`` written.
    acts : (T_total, 4H) array
        Rows ``off:off+n`` written: ``[i, f, g, o]``.
    """
    n = pre.shape[0]
    H = h_all.shape[1]
    G = 4 * H
    a = np.empty(G, dtype=pre.dtype)
    w = np.empty(G, dtype=pre.dtype)
    e = np.empty(G, dtype=pre.dtype)
    em = np.empty(G, dtype=pre.dtype)
    kb = np.empty(G, dtype=np.int64)
    tc = np.empty(H, dtype=pre.dtype)
    for r in range(n):
        g = off + r
        for j in range(G):
            a[j] = pre[r, j] + b[j]
        act = acts[g]
        _sigmoid_into(a, act, w, e, em, kb, 2 * H)
        _tanh_into(a[2 * H:], act[2 * H:], w, e, em, kb, H)
        _sigmoid_into(a[3 * H:], act[3 * H:], w, e, em, kb, H)
        if prev >= 0:
            p = prev + r
            for j in range(H):
                c_all[g, j] = act[H + j] * c_all[p, j] + act[j] * act[2 * H + j]
        else:
            for j in range(H):
                c_all[g, j] = act[j] * act[2 * H + j]
        _tanh_into(c_all[g], tc, w, e, em, kb, H)
        for j in range(H):
            h_all[g, j] = act[3 * H + j] * tc[j]


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def lstm_step_bwd(dh_all, dc_all, acts, c_all, prev, off, n, dg):
    """VJP of :func:`lstm_step_fwd`: writes ``dg[off:off+n]`` (gradient of the
    gate pre-activations) and adds ``dc_tot * f`` into ``dc_all[prev:prev+n]``.

    Parameters
    ----------
    dh_all, dc_all : (T_total, H) arrays
        Rows ``off:off+n`` complete (later steps were processed first).
    acts : (T_total, 4H) array
    c_all : (T_total, H) array
    prev : int
        -1 at the first step.
    off, n : int
    dg : (T_total, 4H) array
        Output buffer (rows ``off:off+n``).
    """
    H = c_all.shape[1]
    w = np.empty(H, dtype=acts.dtype)
    e = np.empty(H, dtype=acts.dtype)
    em = np.empty(H, dtype=acts.dtype)
    kb = np.empty(H, dtype=np.int64)
    tc = np.empty(H, dtype=acts.dtype)
    for r in range(n):
        g = off + r
        _tanh_into(c_all[g], tc, w, e, em, kb, H)
        for j in range(H):
            i = acts[g, j]
            f = acts[g, H + j]
            gg = acts[g, 2 * H + j]
            o = acts[g, 3 * H + j]
            t = tc[j]
            dh = dh_all[g, j]
            dct = dc_all[g, j] + dh * o * (1.0 - t * t)
            cp = c_all[prev + r, j] if prev >= 0 else 0.0
            dg[g, j] = dct * gg * i * (1.0 - i)
            dg[g, H + j] = dct * cp * f * (1.0 - f)
            dg[g, 2 * H + j] = dct * i * (1.0 - gg * gg)
            dg[g, 3 * H + j] = dh * t * o * (1.0 - o)
            if prev >= 0:
                dc_all[prev + r, j] += dct * f


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def gru_step_fwd(gi, gh, h_all, prev, off, acts):
    """One packed GRU step (PyTorch ``GRUCell``: chunks r, z, n).

    r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r*gh_n),
    h = (1-z)*n + z*h_prev.

    Parameters
    ----------
    gi : (n, 3H) array
        ``x W_ih^T + b_ih`` of the running sequences.
    gh : (n, 3H) array
        ``h_prev W_hh^T + b_hh``.
    h_all : (T_total, H) array
        Rows ``prev:prev+n`` read (``prev >= 0``), rows ``off:off+n`` written.
    prev, off : int
    acts : (T_total, 3H) array
        Rows ``off:off+n`` written: ``[r, z, n]``.
    """
    n = gi.shape[0]
    H = h_all.shape[1]
    a = np.empty(3 * H, dtype=gi.dtype)
    w = np.empty(3 * H, dtype=gi.dtype)
    e = np.empty(3 * H, dtype=gi.dtype)
    em = np.empty(3 * H, dtype=gi.dtype)
    kb = np.empty(3 * H, dtype=np.int64)
    for r in range(n):
        g = off + r
        act = acts[g]
        for j in range(2 * H):
            a[j] = gi[r, j] + gh[r, j]
        _sigmoid_into(a, act, w, e, em, kb, 2 * H)
        for j in range(H):
            a[2 * H + j] = gi[r, 2 * H + j] + act[j] * gh[r, 2 * H + j]
        _tanh_into(a[2 * H:], act[2 * H:], w, e, em, kb, H)
        for j in range(H):
            z = act[H + j]
            hp = h_all[prev + r, j] if prev >= 0 else 0.0
            h_all[g, j] = (1.0 - z) * act[2 * H + j] + z * hp


@njit(cache=True, nogil=True, error_model="numpy")
def gru_step_bwd(dh_all, acts, gh, h_all, prev, off, n, dgi, dgh):
    """VJP of :func:`gru_step_fwd`: writes ``dgi``/``dgh`` rows ``off:off+n``
    and adds the direct path ``dh * z`` into ``dh_all[prev:prev+n]`` (the
    caller adds ``dgh @ W_hh``).

    Parameters
    ----------
    dh_all : (T_total, H) array
    acts : (T_total, 3H) array
    gh : (T_total, 3H) array
        Recurrent projections saved by the forward pass.
    h_all : (T_total, H) array
    prev, off, n : int
    dgi, dgh : (T_total, 3H) arrays
        Output buffers.
    """
    H = h_all.shape[1]
    for r in range(n):
        g = off + r
        for j in range(H):
            rr = acts[g, j]
            z = acts[g, H + j]
            nn = acts[g, 2 * H + j]
            d = dh_all[g, j]
            hp = h_all[prev + r, j] if prev >= 0 else 0.0
            dp_n = d * (1.0 - z) * (1.0 - nn * nn)
            dp_r = dp_n * gh[g, 2 * H + j] * rr * (1.0 - rr)
            dp_z = d * (hp - nn) * z * (1.0 - z)
            dgi[g, j] = dp_r
            dgi[g, H + j] = dp_z
            dgi[g, 2 * H + j] = dp_n
            dgh[g, j] = dp_r
            dgh[g, H + j] = dp_z
            dgh[g, 2 * H + j] = dp_n * rr
            if prev >= 0:
                dh_all[prev + r, j] += d * z


# --------------------------------------------------------------------------
# Tree-LSTM nodes with packed states s = [h | c], for per-node (recursive)
# execution: fresh outputs, like kernels.py
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_node_fwd(z, b, s_l, s_r):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14, N = 2) on packed
    states: the maths of :func:`tree_lstm_level_fwd` for n independent nodes.

    Parameters
    ----------
    z : (n, 5H) array
        ``[h_l; h_r] @ U`` (without the bias), chunks i, f_l, f_r, o, u.
    b : (5H,) array
    s_l, s_r : (n, 2H) arrays
        Children's states ``[h | c]``.

    Returns
    -------
    s : (n, 2H) array
        ``[h | c]`` of the nodes.
    acts : (n, 5H) array
        ``[i, f_l, f_r, o, u]``.
    """
    n = z.shape[0]
    H = s_l.shape[1] // 2
    G = 5 * H
    s = np.empty((n, 2 * H), dtype=z.dtype)
    acts = np.empty((n, G), dtype=z.dtype)
    a = np.empty(G, dtype=z.dtype)
    w = np.empty(G, dtype=z.dtype)
    e = np.empty(G, dtype=z.dtype)
    em = np.empty(G, dtype=z.dtype)
    kb = np.empty(G, dtype=np.int64)
    for r in range(n):
        for j in range(G):
            a[j] = z[r, j] + b[j]
        act = acts[r]
        _sigmoid_into(a, act, w, e, em, kb, 4 * H)
        _tanh_into(a[4 * H:], act[4 * H:], w, e, em, kb, H)
        for j in range(H):
            s[r, H + j] = act[j] * act[4 * H + j] + act[H + j] * s_l[r, H + j] + act[2 * H + j] * s_r[r, H + j]
        _tanh_into(s[r, H:], s[r, :H], w, e, em, kb, H)
        for j in range(H):
            s[r, j] *= act[3 * H + j]
    return s, acts


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_node_bwd(ds, acts, s_l, s_r, s):
    """Vector-Jacobian product of :func:`tree_lstm_node_fwd`.

    Parameters
    ----------
    ds : (n, 2H) array
        Gradient of ``[h | c]``.
    acts : (n, 5H) array
    s_l, s_r, s : (n, 2H) arrays
        Children's states and the node's state (forward inputs and output).

    Returns
    -------
    dz : (n, 5H) array
        Gradient of the gate pre-activations.
    ds_l, ds_r : (n, 2H) arrays
        The children's cell gradients in columns H:2H; columns 0:H are zero
        (the caller adds the ``dz @ U.T`` part).
    """
    n = acts.shape[0]
    H = s.shape[1] // 2
    dz = np.empty((n, 5 * H), dtype=acts.dtype)
    ds_l = np.zeros((n, 2 * H), dtype=acts.dtype)
    ds_r = np.zeros((n, 2 * H), dtype=acts.dtype)
    w = np.empty(H, dtype=acts.dtype)
    e = np.empty(H, dtype=acts.dtype)
    em = np.empty(H, dtype=acts.dtype)
    kb = np.empty(H, dtype=np.int64)
    tc = np.empty(H, dtype=acts.dtype)
    for r in range(n):
        _tanh_into(s[r, H:], tc, w, e, em, kb, H)
        for j in range(H):
            i = acts[r, j]
            fl = acts[r, H + j]
            fr = acts[r, 2 * H + j]
            o = acts[r, 3 * H + j]
            u = acts[r, 4 * H + j]
            t = tc[j]
            dh = ds[r, j]
            dct = ds[r, H + j] + dh * o * (1.0 - t * t)
            dz[r, j] = dct * u * i * (1.0 - i)
            dz[r, H + j] = dct * s_l[r, H + j] * fl * (1.0 - fl)
            dz[r, 2 * H + j] = dct * s_r[r, H + j] * fr * (1.0 - fr)
            dz[r, 3 * H + j] = dh * t * o * (1.0 - o)
            dz[r, 4 * H + j] = dct * i * (1.0 - u * u)
            ds_l[r, H + j] = dct * fl
            ds_r[r, H + j] = dct * fr
    return dz, ds_l, ds_r


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_leaf_node_fwd(z, b):
    """Tree-LSTM leaf(s) on packed states: a = z + b split into i, o, u;
    c = σ(a_i)*tanh(a_u); h = σ(a_o)*tanh(c).

    Parameters
    ----------
    z : (n, 3H) array
        ``x @ W`` (without the bias).
    b : (3H,) array

    Returns
    -------
    s : (n, 2H) array
        ``[h | c]``.
    acts : (n, 3H) array
        ``[i, o, u]``.
    """
    n = z.shape[0]
    H = z.shape[1] // 3
    G = 3 * H
    s = np.empty((n, 2 * H), dtype=z.dtype)
    acts = np.empty((n, G), dtype=z.dtype)
    a = np.empty(G, dtype=z.dtype)
    w = np.empty(G, dtype=z.dtype)
    e = np.empty(G, dtype=z.dtype)
    em = np.empty(G, dtype=z.dtype)
    kb = np.empty(G, dtype=np.int64)
    for r in range(n):
        for j in range(G):
            a[j] = z[r, j] + b[j]
        act = acts[r]
        _sigmoid_into(a, act, w, e, em, kb, 2 * H)
        _tanh_into(a[2 * H:], act[2 * H:], w, e, em, kb, H)
        for j in range(H):
            s[r, H + j] = act[j] * act[2 * H + j]
        _tanh_into(s[r, H:], s[r, :H], w, e, em, kb, H)
        for j in range(H):
            s[r, j] *= act[H + j]
    return s, acts


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_leaf_node_bwd(ds, acts, s):
    """Vector-Jacobian product of :func:`tree_lstm_leaf_node_fwd`.

    Parameters
    ----------
    ds : (n, 2H) array
    acts : (n, 3H) array
    s : (n, 2H) array

    Returns
    -------
    dz : (n, 3H) array
    """
    n = acts.shape[0]
    H = s.shape[1] // 2
    dz = np.empty((n, 3 * H), dtype=acts.dtype)
    w = np.empty(H, dtype=acts.dtype)
    e = np.empty(H, dtype=acts.dtype)
    em = np.empty(H, dtype=acts.dtype)
    kb = np.empty(H, dtype=np.int64)
    tc = np.empty(H, dtype=acts.dtype)
    for r in range(n):
        _tanh_into(s[r, H:], tc, w, e, em, kb, H)
        for j in range(H):
            i = acts[r, j]
            o = acts[r, H + j]
            u = acts[r, 2 * H + j]
            t = tc[j]
            dh = ds[r, j]
            dct = ds[r, H + j] + dh * o * (1.0 - t * t)
            dz[r, j] = dct * u * i * (1.0 - i)
            dz[r, H + j] = dh * t * o * (1.0 - o)
            dz[r, 2 * H + j] = dct * i * (1.0 - u * u)
    return dz
