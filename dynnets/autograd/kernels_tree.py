"""Numba kernels for everything with gate activations: level-batched tree
models, packed (variable-length) recurrent sequences, the Tree-LSTM cell and
leaf, and the PyTorch-style LSTM and GRU cells.

Which file a kernel goes in: here, a kernel that evaluates sigmoid or tanh
(it inlines the vectorised activations below) or works on the state arrays of
a whole minibatch through caller-allocated buffers; in
:mod:`dynnets.autograd.kernels`, the other kernels (losses, softmaxes,
scatters). Kernels must not call jitted functions across files: Numba's
on-disk cache checks only the caller's own file (its modification time and
size), so a cached kernel would keep running the inlined code of an edited
helper elsewhere; :mod:`dynnets.numba_cache` makes the cache safe between
processes, not across files. So a kernel lives beside the helpers it calls. Kernels
are named after their primitive (``<primitive>_fwd`` / ``_bwd``, with ``_mv``
for the variant that does the matrix-vector product itself); the gathers and
scatters shared by several primitives are named after what they do. Every
binary Tree-LSTM kernel (level, per-node, public cell) runs the one cell
implementation :func:`_binary_cells_fwd` / :func:`_binary_cells_bwd`, every
leaf :func:`_leaf_cells_fwd` / :func:`_leaf_cells_bwd`.

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
  The PyTorch-style cells (``lstm_cell_*``, ``gru_cell_*``) return fresh
  arrays and never write their inputs, as the kernels of ``kernels.py`` do.
* No module globals inside kernels, no jitted calls across files; the scalar
  helpers below live in this file so that Numba's cache sees their changes.
* Matrix products are left to the caller (numpy ``@``), except in the
  per-node ``*_mv`` kernels: for one node the product is a matrix-vector
  product bounded by reading the weights from cache, which a plain loop does
  as fast as OpenBLAS's ``sgemv`` (measured: 7.7 vs 9.3 us for 300x750
  float32), and fusing it saves the concatenation, the call and the temporary
  (a Tree-LSTM internal node's forward 12.6 -> 10.5 us, measured).
* Inputs are C-contiguous float32 or float64 arrays of one dtype (index arrays
  int64) and are not validated: the primitives in
  :mod:`dynnets.autograd.primitives` check shapes and indices first.
* Gate activations use a branch-free exponential (Cody-Waite reduction, a
  short polynomial, the power of two built from its bits) written as scalar
  functions that LLVM inlines into each loop and vectorises, in the kernel's
  own precision (float32 data: float32 maths, 8 lanes per AVX2 instruction):
  one pass over the data, everything in registers. Measured over the whole
  range against long-double values: sigmoid and tanh within 2.75 / 2.50 ulp
  in float32 and 2.32 / 3.04 ulp in float64 wherever the result is normal
  (np.tanh: 1.37 / 1.17), NaN propagates, sigmoid(-inf) = 0, tanh(±inf) = ±1.
  libm's scalar ``exp``/``tanh`` cost 3-20 ns per element here (no SVML);
  these ~0.4 ns (sigmoid, float32) and numpy's SIMD ``np.tanh`` ~0.3 ns.
  Sigmoid uses exp(-|x|) only and tanh uses expm1(-2|x|), so neither
  overflows nor cancels at any input. ``error_model="numpy"`` lets
  divisions vectorise (Python's model adds a zero check per division).

H is the hidden size; "row i of a level" is global node ``lo + i``.
"""

import numpy as np
from numba import njit, types
from numba.extending import intrinsic, overload

__all__ = [
    "gather_pairs",
    "scatter_pairs_add",
    "scatter_rows_add",
    "tree_lstm_levels_fwd",
    "tree_lstm_levels_bwd",
    "tanh_rows_fwd",
    "tanh_rows_bwd",
    "childsum_gather",
    "childsum_levels_fwd",
    "childsum_levels_bwd",
    "childsum_scatter_add",
    "lstm_seq_fwd",
    "lstm_seq_bwd",
    "gru_seq_fwd",
    "gru_seq_bwd",
    "tree_lstm_node_fwd",
    "tree_lstm_node_bwd",
    "tree_lstm_leaf_node_fwd",
    "tree_lstm_leaf_node_bwd",
    "tree_lstm_node_fwd_mv",
    "tree_lstm_leaf_node_fwd_mv",
    "tree_lstm_cell_fwd",
    "tree_lstm_cell_bwd",
    "tree_lstm_leaf_fwd",
    "tree_lstm_leaf_bwd",
    "lstm_cell_fwd",
    "lstm_cell_bwd",
    "gru_cell_fwd",
    "gru_cell_bwd",
]

# fastmath without 'nnan'/'ninf'/'reassoc': NaN must still propagate (anomaly
# detection), and results must not depend on how a loop was vectorised.
_FM = {"contract", "arcp", "nsz", "afn"}


# --------------------------------------------------------------------------
# vectorisable activations (private helpers; same file so the cache sees them)
#
# Scalar functions that LLVM inlines into the caller's loop and vectorises:
# every step is branch-free arithmetic, a select, or a reinterpretation of a
# float's bits as an integer (and back), which the intrinsics below emit as
# one LLVM ``bitcast`` (free in a vector register). Each has a plain-Python
# body too (numpy scalar views), which runs under ``NUMBA_DISABLE_JIT=1``; in
# jitted code the overloads replace it.
# --------------------------------------------------------------------------


def _f32_from_bits(k):
    """The float32 whose IEEE bits are the int32 ``k``."""
    return np.int32(k).view(np.float32)


def _f64_from_bits(k):
    """The float64 whose IEEE bits are the int64 ``k``."""
    return np.int64(k).view(np.float64)


def _bits_of_f32(x):
    """The IEEE bits of the float32 ``x`` as an int32."""
    return np.float32(x).view(np.int32)


def _bits_of_f64(x):
    """The IEEE bits of the float64 ``x`` as an int64."""
    return np.float64(x).view(np.int64)


def _bitcast_overload(src, dst):
    @intrinsic
    def bitcast(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(dst))
        return dst(src), codegen

    def typer(x):
        return lambda x: bitcast(x)
    return typer


_JIT_OPTIONS = {"fastmath": _FM, "nogil": True, "error_model": "numpy"}
overload(_f32_from_bits, jit_options=_JIT_OPTIONS)(_bitcast_overload(types.int32, types.float32))
overload(_f64_from_bits, jit_options=_JIT_OPTIONS)(_bitcast_overload(types.int64, types.float64))
overload(_bits_of_f32, jit_options=_JIT_OPTIONS)(_bitcast_overload(types.float32, types.int32))
overload(_bits_of_f64, jit_options=_JIT_OPTIONS)(_bitcast_overload(types.float64, types.int64))


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _exp_neg64(w):
    """(exp(-w), expm1(-w)) for w >= 0 (or NaN), in float64.

    exp(-w) = 2^-k exp(r) with k = round(w / ln 2), r = k ln2 - w in
    [-ln2/2, ln2/2] (ln 2 split in two parts, Cody & Waite); expm1(r) by its
    Taylor series to r^13 (truncation < 5e-18); 2^-k from its IEEE bits. k
    is rounded by adding and subtracting 1.5 * 2^52, which leaves k in the low
    bits of the sum: no float-to-integer conversion (undefined for NaN in
    LLVM), and NaN flows through r into both results. w is capped at 708.5
    so that 2^-k stays a normal number (k <= 1022); beyond, exp(-w) is 0 or
    subnormal (< 2.5e-308) and is returned as 0, so exp(-inf) = 0 exactly.
    """
    y = 708.5 if w > 708.5 else w
    t = y * 1.4426950408889634 + 6755399441055744.0
    kf = t - 6755399441055744.0
    r = (kf * 6.93147180369123816490e-01 - y) + kf * 1.90821492927058770002e-10
    q = r * (1.0 + r * (0.5 + r * (1.6666666666666666e-01 + r * (4.1666666666666664e-02 + r * (
        8.3333333333333332e-03 + r * (1.3888888888888889e-03 + r * (1.9841269841269841e-04 + r * (
            2.4801587301587302e-05 + r * (2.7557319223985893e-06 + r * (2.7557319223985888e-07 + r * (
                2.5052108385441720e-08 + r * (2.0876756987868100e-09 + r * 1.6059043836821613e-10))))))))))))
    # bits of t are 0x4338000000000000 + k; those of 2^-k are (1023 - k) << 52
    s = _f64_from_bits((np.int64(0x43380000000003FF) - _bits_of_f64(t)) << np.int64(52))
    ex = 0.0 if w > 708.5 else (1.0 + q) * s
    return ex, (q if kf == 0.0 else ex - 1.0)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _exp_neg32(w):
    """:func:`_exp_neg64` in float32 maths (twice the vector lanes): w capped
    at 87.5 (k <= 126; beyond, 0 for exp(-w) < 1.1e-38), rounding constant 1.5 * 2^23, and expm1(r) = r + r^2 P(r) with P
    of degree 4 fitted to the relative error of expm1 on |r| <= ln2/2
    (Lawson's iteration toward minimax; max relative error 1.3e-8, 0.22 ulp,
    where the Taylor series needs degree 8: two fewer operations per element,
    6% of a sigmoid, measured)."""
    y = np.float32(87.5) if w > np.float32(87.5) else w
    t = y * np.float32(1.44269504) + np.float32(12582912.0)
    kf = t - np.float32(12582912.0)
    r = (kf * np.float32(0.693145751953125) - y) + kf * np.float32(1.428606765330187e-06)
    q = r + r * r * (np.float32(0.49999997) + r * (np.float32(0.16666544) + r * (np.float32(0.041667200) + r * (
        np.float32(0.0083665140) + r * np.float32(0.0013882522)))))
    s = _f32_from_bits((np.int32(0x4B40007F) - _bits_of_f32(t)) << np.int32(23))
    ex = np.float32(0.0) if w > np.float32(87.5) else (np.float32(1.0) + q) * s
    return ex, (q if kf == np.float32(0.0) else ex - np.float32(1.0))


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _sigmoid64(x):
    # exp(-|x|) only: never overflows; 1/(1+e) or e/(1+e) by sign
    ex = _exp_neg64(abs(x))[0]
    s = 1.0 / (1.0 + ex)
    return s if x >= 0.0 else ex * s


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _sigmoid32(x):
    ex = _exp_neg32(abs(x))[0]
    s = np.float32(1.0) / (np.float32(1.0) + ex)
    return s if x >= np.float32(0.0) else ex * s


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _tanh64(x):
    # tanh|x| = -expm1(-2|x|) / (2 + expm1(-2|x|)): no overflow, no cancellation
    # near 0; |x| capped where tanh is 1 in every precision, so 2|x| stays finite
    a = abs(x)
    em = _exp_neg64(2.0 * (30.0 if a > 30.0 else a))[1]
    t = -em / (2.0 + em)
    return t if x >= 0.0 else -t


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _tanh32(x):
    a = abs(x)
    em = _exp_neg32(np.float32(2.0) * (np.float32(30.0) if a > np.float32(30.0) else a))[1]
    t = -em / (np.float32(2.0) + em)
    return t if x >= np.float32(0.0) else -t


def _sigmoid(x):
    """σ(x) in the precision of ``x`` (a float32 or float64 scalar)."""
    return _sigmoid32(x) if x.dtype == np.float32 else _sigmoid64(x)


def _tanh(x):
    """tanh(x) in the precision of ``x``."""
    return _tanh32(x) if x.dtype == np.float32 else _tanh64(x)


def _by_precision(f32, f64):
    def typer(x):
        f = f32 if x == types.float32 else f64
        return lambda x: f(x)
    return typer


overload(_sigmoid, jit_options=_JIT_OPTIONS)(_by_precision(_sigmoid32, _sigmoid64))
overload(_tanh, jit_options=_JIT_OPTIONS)(_by_precision(_tanh32, _tanh64))


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _act_rows(x, xr, b, out, orow, n, c0, c1, tanh):
    """Rows r < n: out[orow + r, c0:c1] = f(x[xr + r, c0:c1] + b[c0:c1]) with
    f = tanh if ``tanh`` else σ. ``x`` may be ``out`` (in place): that case
    gets a loop of its own, since a loop that reads one array and writes an
    overlapping one fails LLVM's runtime overlap check and runs scalar."""
    bb = b[c0:c1]
    m = c1 - c0
    same = xr == orow and x.ctypes.data == out.ctypes.data
    for r in range(n):
        o = out[orow + r][c0:c1]
        if same:
            if tanh:
                for j in range(m):
                    o[j] = _tanh(o[j] + bb[j])
            else:
                for j in range(m):
                    o[j] = _sigmoid(o[j] + bb[j])
        else:
            a = x[xr + r][c0:c1]
            if tanh:
                for j in range(m):
                    o[j] = _tanh(a[j] + bb[j])
            else:
                for j in range(m):
                    o[j] = _sigmoid(a[j] + bb[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _tanh_into(x, xr, xc, out, orow, oc, n, m):
    """out[orow + r, oc:oc+m] = tanh(x[xr + r, xc:xc+m]) for r < n (distinct memory)."""
    for r in range(n):
        a = x[xr + r][xc:xc + m]
        o = out[orow + r][oc:oc + m]
        for j in range(m):
            o[j] = _tanh(a[j])


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
        o = out[i]
        a = h_all[left[i]]
        b = h_all[right[i]]
        for j in range(H):
            o[j] = a[j]
        for j in range(H):
            o[H + j] = b[j]


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
        gi = g[i]
        a = dh_all[left[i]]
        for j in range(H):
            a[j] += gi[j]
        b = dh_all[right[i]]
        for j in range(H):
            b[j] += gi[H + j]


@njit(cache=True)
def scatter_rows_add(g, idx, n, dh_all):
    """Adjoint of a row gather from the first ``n`` rows of ``dh_all``:
    ``dh_all[idx[i]] += g[i]`` (a negative index counts from row ``n``, as
    numpy's), in order of i, so repeated indices add up (``np.add.at``). A
    static loop's gradient adds each iteration's gathered rows' gradient to
    its appended state this way.

    The one kernel here that checks its indices (its caller is a loop's
    gradient, per iteration, where a separate check would cost as much as
    the addition): returns False, having written nothing, when an index lies
    outside ``[-n, n)`` or ``n`` exceeds the rows of ``dh_all``; True after
    the addition.

    Parameters
    ----------
    g : (k, D) array
    idx : (k,) int64 array
    n : int
    dh_all : (N, D) array
        Accumulated in place.
    """
    k = idx.shape[0]
    if n > dh_all.shape[0] or g.shape[0] != k or g.shape[1] != dh_all.shape[1]:
        return False
    for i in range(k):
        r = idx[i]
        if r < -n or r >= n:
            return False
    D = dh_all.shape[1]
    for i in range(k):
        r = idx[i]
        if r < 0:
            r += n
        gi = g[i]
        a = dh_all[r]
        for j in range(D):
            a[j] += gi[j]
    return True


# --------------------------------------------------------------------------
# binary Tree-LSTM cell maths on rows (private). Loops run over 1-D row views
# with one output each: with more arrays in a loop than LLVM's runtime alias
# checks allow (8), it stays scalar. Constants come from the data's dtype (a
# float literal would promote float32 maths to float64).
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _binary_cells_fwd(z, b, acts, cl_all, left, cr_all, right, cc0, c_out, cr0, h_out, hr0, hc0, n, H):
    """Tai et al. eqs. 9-14 for n nodes whose pre-activations are ``z + b``
    (z (n, 5H), may be ``acts``): activations into ``acts`` (n, 5H), c into
    ``c_out[cr0 + r, cc0:cc0+H]``, h into ``h_out[hr0 + r, hc0:hc0+H]``;
    children's cells are ``cl_all[left[r], cc0:cc0+H]`` and ``cr_all[right[r],
    ...]``. The one implementation of the binary cell: a level (children in
    the state arrays) and per-node execution (children in their own packed
    states) both call it."""
    _act_rows(z, 0, b, acts, 0, n, 0, 4 * H, False)
    _act_rows(z, 0, b, acts, 0, n, 4 * H, 5 * H, True)
    for r in range(n):
        act = acts[r]
        ai = act[:H]
        afl = act[H:2 * H]
        afr = act[2 * H:3 * H]
        au = act[4 * H:]
        cl = cl_all[left[r]][cc0:cc0 + H]
        cr = cr_all[right[r]][cc0:cc0 + H]
        c = c_out[cr0 + r][cc0:cc0 + H]
        for j in range(H):
            c[j] = ai[j] * au[j] + afl[j] * cl[j] + afr[j] * cr[j]
    for r in range(n):
        ao = acts[r][3 * H:4 * H]
        c = c_out[cr0 + r][cc0:cc0 + H]
        h = h_out[hr0 + r][hc0:hc0 + H]
        for j in range(H):
            h[j] = ao[j] * _tanh(c[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _binary_cells_bwd(dh_all, dhr0, dc_all, dcr0, cc0, acts, c_all, cr0, cl_all, left, cr_all, right, dz,
                      gl_all, gr_all, n, H, add):
    """VJP of :func:`_binary_cells_fwd` for n nodes: node r's state gradients
    are ``dh_all[dhr0 + r, :H]`` and ``dc_all[dcr0 + r, cc0:cc0+H]``, its cell
    ``c_all[cr0 + r, cc0:...]`` and children's cells ``cl_all[left[r], cc0:...]``,
    ``cr_all[right[r], cc0:...]``; writes dz (n, 5H) and writes (``add`` false)
    or adds the children's cell gradients into ``gl_all[left[r], cc0:cc0+H]``
    and ``gr_all[right[r], ...]``. tanh(c) and dc_tot live in dz's o and u
    blocks until those are formed."""
    _tanh_into(c_all, cr0, cc0, dz, 0, 3 * H, n, H)     # t -> dz[:, o]
    one = acts.dtype.type(1)   # 1 in the data's dtype (a float literal would promote float32 maths)
    for r in range(n):
        act = acts[r]
        ai = act[:H]
        afl = act[H:2 * H]
        afr = act[2 * H:3 * H]
        ao = act[3 * H:4 * H]
        au = act[4 * H:]
        dh = dh_all[dhr0 + r][:H]
        dc = dc_all[dcr0 + r][cc0:cc0 + H]
        z = dz[r]
        t = z[3 * H:4 * H]
        d = z[4 * H:]
        for j in range(H):
            d[j] = dc[j] + dh[j] * ao[j] * (one - t[j] * t[j])
        zi = z[:H]
        for j in range(H):
            zi[j] = d[j] * au[j] * ai[j] * (one - ai[j])
        cl = cl_all[left[r]][cc0:cc0 + H]
        zfl = z[H:2 * H]
        for j in range(H):
            zfl[j] = d[j] * cl[j] * afl[j] * (one - afl[j])
        cr = cr_all[right[r]][cc0:cc0 + H]
        zfr = z[2 * H:3 * H]
        for j in range(H):
            zfr[j] = d[j] * cr[j] * afr[j] * (one - afr[j])
        gl = gl_all[left[r]][cc0:cc0 + H]
        gr = gr_all[right[r]][cc0:cc0 + H]
        if add:
            for j in range(H):
                gl[j] += d[j] * afl[j]
            for j in range(H):
                gr[j] += d[j] * afr[j]
        else:
            for j in range(H):
                gl[j] = d[j] * afl[j]
            for j in range(H):
                gr[j] = d[j] * afr[j]
        for j in range(H):
            t[j] = dh[j] * t[j] * ao[j] * (one - ao[j])
        for j in range(H):
            d[j] = d[j] * ai[j] * (one - au[j] * au[j])


# --------------------------------------------------------------------------
# binary Tree-LSTM, one level
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_levels_fwd(z, b, c_all, left, right, lo, h_all, acts):
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
    _binary_cells_fwd(z, b, acts, c_all, left, c_all, right, 0, c_all, lo, h_all, lo, 0, n, H)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_levels_bwd(dh_all, dc_all, acts, c_all, left, right, lo, dz):
    """Vector-Jacobian product of :func:`tree_lstm_levels_fwd` for one level.

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
    _binary_cells_bwd(dh_all, lo, dc_all, lo, 0, acts, c_all, lo, c_all, left, c_all, right, dz, dc_all, dc_all,
                      n, H, True)


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
    _act_rows(z, 0, b, h_all, lo, n, 0, H, True)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
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
        h = h_all[lo + r]
        d = dh_all[lo + r]
        o = dz[r]
        for j in range(H):
            o[j] = d[j] - d[j] * h[j] * h[j]


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
        s = hsum[i]
        for j in range(H):
            s[j] = 0.0
        for k in range(ptr[i] - e0, ptr[i + 1] - e0):
            src = h_all[idx[k]]
            dst = hch[k]
            for j in range(H):
                dst[j] = src[j]
            for j in range(H):
                s[j] += src[j]


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def childsum_levels_fwd(ziou, zf, b_iou, b_f, c_all, ptr, idx, lo, h_all, acts, facts):
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
    m = zf.shape[0]
    H = h_all.shape[1]
    _act_rows(ziou, 0, b_iou, acts, 0, n, 0, 2 * H, False)
    _act_rows(ziou, 0, b_iou, acts, 0, n, 2 * H, 3 * H, True)
    _act_rows(zf, 0, b_f, facts, 0, m, 0, H, False)
    e0 = ptr[0]
    for r in range(n):
        act = acts[r]
        ai = act[:H]
        au = act[2 * H:]
        c = c_all[lo + r]
        for j in range(H):
            c[j] = ai[j] * au[j]
        for k in range(ptr[r] - e0, ptr[r + 1] - e0):
            fk = facts[k]
            ck = c_all[idx[k]]
            for j in range(H):
                c[j] += fk[j] * ck[j]
    for r in range(n):
        ao = acts[r][H:2 * H]
        c = c_all[lo + r]
        h = h_all[lo + r]
        for j in range(H):
            h[j] = ao[j] * _tanh(c[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def childsum_levels_bwd(dh_all, dc_all, acts, facts, c_all, ptr, idx, lo, dziou, dzf):
    """VJP of :func:`childsum_levels_fwd` for one level.

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
    _tanh_into(c_all, lo, 0, dziou, 0, H, n, H)       # t -> dziou[:, o]
    one = acts.dtype.type(1)
    e0 = ptr[0]
    for r in range(n):
        act = acts[r]
        ai = act[:H]
        ao = act[H:2 * H]
        au = act[2 * H:]
        dh = dh_all[lo + r]
        dc = dc_all[lo + r]
        z = dziou[r]
        t = z[H:2 * H]
        d = z[2 * H:]              # dc_tot until the u block is formed
        for j in range(H):
            d[j] = dc[j] + dh[j] * ao[j] * (one - t[j] * t[j])
        zi = z[:H]
        for j in range(H):
            zi[j] = d[j] * au[j] * ai[j] * (one - ai[j])
        for k in range(ptr[r] - e0, ptr[r + 1] - e0):
            fk = facts[k]
            ck = c_all[idx[k]]
            dck = dc_all[idx[k]]
            zk = dzf[k]
            for j in range(H):
                zk[j] = d[j] * ck[j] * fk[j] * (one - fk[j])
            for j in range(H):
                dck[j] += d[j] * fk[j]
        for j in range(H):
            t[j] = dh[j] * t[j] * ao[j] * (one - ao[j])
        for j in range(H):
            d[j] = d[j] * ai[j] * (one - au[j] * au[j])


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
        s = dhsum[i]
        for k in range(ptr[i] - e0, ptr[i + 1] - e0):
            d = dh_all[idx[k]]
            x = dhch[k]
            for j in range(H):
                d[j] += s[j] + x[j]


# --------------------------------------------------------------------------
# packed recurrent steps (time-major packed rows, as pack_padded_sequence)
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def lstm_seq_fwd(pre, b, c_all, prev, off, h_all, acts):
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
    _act_rows(pre, 0, b, acts, off, n, 0, 2 * H, False)
    _act_rows(pre, 0, b, acts, off, n, 2 * H, 3 * H, True)
    _act_rows(pre, 0, b, acts, off, n, 3 * H, 4 * H, False)
    for r in range(n):
        act = acts[off + r]
        ai = act[:H]
        af = act[H:2 * H]
        ag = act[2 * H:3 * H]
        c = c_all[off + r]
        if prev >= 0:
            cp = c_all[prev + r]
            for j in range(H):
                c[j] = af[j] * cp[j] + ai[j] * ag[j]
        else:
            for j in range(H):
                c[j] = ai[j] * ag[j]
    for r in range(n):
        ao = acts[off + r][3 * H:]
        c = c_all[off + r]
        h = h_all[off + r]
        for j in range(H):
            h[j] = ao[j] * _tanh(c[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def lstm_seq_bwd(dh_all, dc_all, acts, c_all, prev, off, n, dg):
    """VJP of :func:`lstm_seq_fwd`: writes ``dg[off:off+n]`` (gradient of the
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
    _tanh_into(c_all, off, 0, dg, off, 3 * H, n, H)      # t -> dg[:, o]
    one = acts.dtype.type(1)
    for r in range(n):
        g = off + r
        act = acts[g]
        ai = act[:H]
        af = act[H:2 * H]
        ag = act[2 * H:3 * H]
        ao = act[3 * H:]
        dh = dh_all[g]
        dc = dc_all[g]
        z = dg[g]
        t = z[3 * H:]
        d = z[2 * H:3 * H]         # dc_tot until the g block is formed
        for j in range(H):
            d[j] = dc[j] + dh[j] * ao[j] * (one - t[j] * t[j])
        zi = z[:H]
        for j in range(H):
            zi[j] = d[j] * ag[j] * ai[j] * (one - ai[j])
        zf = z[H:2 * H]
        if prev >= 0:
            cp = c_all[prev + r]
            for j in range(H):
                zf[j] = d[j] * cp[j] * af[j] * (one - af[j])
            dcp = dc_all[prev + r]
            for j in range(H):
                dcp[j] += d[j] * af[j]
        else:
            for j in range(H):
                zf[j] = 0
        for j in range(H):
            t[j] = dh[j] * t[j] * ao[j] * (one - ao[j])
        for j in range(H):
            d[j] = d[j] * ai[j] * (one - ag[j] * ag[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def gru_seq_fwd(gi, gh, h_all, prev, off, acts):
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
    for r in range(n):
        x = gi[r][:2 * H]
        y = gh[r][:2 * H]
        a = acts[off + r][:2 * H]
        for j in range(2 * H):
            a[j] = _sigmoid(x[j] + y[j])
    for r in range(n):
        x = gi[r][2 * H:]
        y = gh[r][2 * H:]
        a = acts[off + r]
        ar = a[:H]
        an = a[2 * H:]
        for j in range(H):
            an[j] = _tanh(x[j] + ar[j] * y[j])
    one = acts.dtype.type(1)
    for r in range(n):
        a = acts[off + r]
        az = a[H:2 * H]
        an = a[2 * H:]
        h = h_all[off + r]
        if prev >= 0:
            hp = h_all[prev + r]
            for j in range(H):
                h[j] = (one - az[j]) * an[j] + az[j] * hp[j]
        else:
            for j in range(H):
                h[j] = (one - az[j]) * an[j]


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def gru_seq_bwd(dh_all, acts, gh, h_all, prev, off, n, dgi, dgh):
    """VJP of :func:`gru_seq_fwd`: writes ``dgi``/``dgh`` rows ``off:off+n``
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
    unit = np.ones(1, dtype=acts.dtype)
    one = unit[0]
    for r in range(n):
        g = off + r
        act = acts[g]
        ar = act[:H]
        az = act[H:2 * H]
        an = act[2 * H:]
        d = dh_all[g]
        ghn = gh[g][2 * H:]
        xi = dgi[g]
        xh = dgh[g]
        xn = xi[2 * H:]
        for j in range(H):
            xn[j] = d[j] * (one - az[j]) * (one - an[j] * an[j])
        xr = xi[:H]
        for j in range(H):
            xr[j] = xn[j] * ghn[j] * ar[j] * (one - ar[j])
        xz = xi[H:2 * H]
        if prev >= 0:
            hp = h_all[prev + r]
            for j in range(H):
                xz[j] = d[j] * (hp[j] - an[j]) * az[j] * (one - az[j])
            dp = dh_all[prev + r]
            for j in range(H):
                dp[j] += d[j] * az[j]
        else:
            for j in range(H):
                xz[j] = -d[j] * an[j] * az[j] * (one - az[j])
        for j in range(2 * H):
            xh[j] = xi[j]
        hn = xh[2 * H:]
        for j in range(H):
            hn[j] = xn[j] * ar[j]


# --------------------------------------------------------------------------
# Tree-LSTM nodes with packed states s = [h | c], for per-node (recursive)
# execution; outputs in caller-allocated buffers (numpy allocates them
# faster than Numba's runtime, which fills fresh memory)
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_node_fwd(z, b, s_l, s_r, s, acts):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14, N = 2) on packed
    states: the maths of :func:`tree_lstm_levels_fwd` for n independent nodes.

    Parameters
    ----------
    z : (n, 5H) array
        ``[h_l; h_r] @ U`` (without the bias), chunks i, f_l, f_r, o, u.
    b : (5H,) array
    s_l, s_r : (n, 2H) arrays
        Children's states ``[h | c]``.
    s : (n, 2H) array
        Output buffer: ``[h | c]`` of the nodes.
    acts : (n, 5H) array
        Output buffer: ``[i, f_l, f_r, o, u]``.
    """
    n = z.shape[0]
    H = s_l.shape[1] // 2
    rows = np.arange(n)
    _binary_cells_fwd(z, b, acts, s_l, rows, s_r, rows, H, s, 0, s, 0, 0, n, H)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_node_bwd(ds, acts, s_l, s_r, s, dz, ds_l, ds_r):
    """Vector-Jacobian product of :func:`tree_lstm_node_fwd`.

    Parameters
    ----------
    ds : (n, 2H) array
        Gradient of ``[h | c]``.
    acts : (n, 5H) array
    s_l, s_r, s : (n, 2H) arrays
        Children's states and the node's state (forward inputs and output).
    dz : (n, 5H) array
        Output buffer: gradient of the gate pre-activations.
    ds_l, ds_r : (n, 2H) arrays
        Output buffers: the children's cell gradients are written to columns
        H:2H; columns 0:H are left for the caller (the ``dz @ U.T`` part).
    """
    n = acts.shape[0]
    H = s.shape[1] // 2
    rows = np.arange(n)
    _binary_cells_bwd(ds, 0, ds, 0, H, acts, s, 0, s_l, rows, s_r, rows, dz, ds_l, ds_r, n, H, False)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _leaf_cells_fwd(z, b, acts, c_out, cc0, h_out, hc0, n, H):
    """A Tree-LSTM leaf (Tai et al. 2015 with no children, so no forget gate)
    for n rows whose pre-activations are ``z + b`` (z (n, 3H), may be
    ``acts``): activations into ``acts`` (n, 3H), c into ``c_out[r,
    cc0:cc0+H]``, h into ``h_out[r, hc0:hc0+H]``. The one implementation of
    the leaf: the public cell (separate h and c) and per-node execution
    (packed states) call it."""
    _act_rows(z, 0, b, acts, 0, n, 0, 2 * H, False)
    _act_rows(z, 0, b, acts, 0, n, 2 * H, 3 * H, True)
    for r in range(n):
        act = acts[r]
        ai = act[:H]
        au = act[2 * H:]
        c = c_out[r][cc0:cc0 + H]
        for j in range(H):
            c[j] = ai[j] * au[j]
    for r in range(n):
        ao = acts[r][H:2 * H]
        c = c_out[r][cc0:cc0 + H]
        h = h_out[r][hc0:hc0 + H]
        for j in range(H):
            h[j] = ao[j] * _tanh(c[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _leaf_cells_bwd(dh_all, dc_all, cc0, acts, c_all, dz, n, H):
    """VJP of :func:`_leaf_cells_fwd`: row r's gradients are ``dh_all[r, :H]``
    and ``dc_all[r, cc0:cc0+H]``, its cell ``c_all[r, cc0:cc0+H]``; writes dz
    (n, 3H). tanh(c) and dc_tot live in dz's o and u blocks until those are
    formed."""
    _tanh_into(c_all, 0, cc0, dz, 0, H, n, H)       # t -> dz[:, o]
    one = acts.dtype.type(1)
    for r in range(n):
        act = acts[r]
        ai = act[:H]
        ao = act[H:2 * H]
        au = act[2 * H:]
        dh = dh_all[r][:H]
        dc = dc_all[r][cc0:cc0 + H]
        z = dz[r]
        t = z[H:2 * H]
        d = z[2 * H:]
        for j in range(H):
            d[j] = dc[j] + dh[j] * ao[j] * (one - t[j] * t[j])
        zi = z[:H]
        for j in range(H):
            zi[j] = d[j] * au[j] * ai[j] * (one - ai[j])
        for j in range(H):
            t[j] = dh[j] * t[j] * ao[j] * (one - ao[j])
        for j in range(H):
            d[j] = d[j] * ai[j] * (one - au[j] * au[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_leaf_node_fwd(z, b, s, acts):
    """Tree-LSTM leaf(s) on packed states: a = z + b split into i, o, u;
    c = σ(a_i)*tanh(a_u); h = σ(a_o)*tanh(c).

    Parameters
    ----------
    z : (n, 3H) array
        ``x @ W`` (without the bias).
    b : (3H,) array
    s : (n, 2H) array
        Output buffer: ``[h | c]``.
    acts : (n, 3H) array
        Output buffer: ``[i, o, u]``.
    """
    n = z.shape[0]
    H = z.shape[1] // 3
    _leaf_cells_fwd(z, b, acts, s, H, s, 0, n, H)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_leaf_node_bwd(ds, acts, s, dz):
    """Vector-Jacobian product of :func:`tree_lstm_leaf_node_fwd`.

    Parameters
    ----------
    ds : (n, 2H) array
    acts : (n, 3H) array
    s : (n, 2H) array
    dz : (n, 3H) array
        Output buffer.
    """
    n = acts.shape[0]
    H = s.shape[1] // 2
    _leaf_cells_bwd(ds, ds, H, acts, s, dz, n, H)


# --------------------------------------------------------------------------
# the public Tree-LSTM cell and leaf (primitives tree_lstm_cell and
# tree_lstm_leaf): the same cell maths on separate h and c arrays
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_cell_fwd(z, b, c_l, c_r, h, c, acts):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14, N = 2, no input
    at internal nodes) with the children's states as separate arrays.

    Parameters
    ----------
    z : (n, 5H) array
        ``[h_l; h_r] @ U`` (without the bias), chunks i, f_l, f_r, o, u.
    b : (5H,) array
    c_l, c_r : (n, H) arrays
        Children's cell states.
    h, c : (n, H) arrays
        Output buffers.
    acts : (n, 5H) array
        Output buffer: ``[i, f_l, f_r, o, u]``.
    """
    n = z.shape[0]
    H = c_l.shape[1]
    rows = np.arange(n)
    _binary_cells_fwd(z, b, acts, c_l, rows, c_r, rows, 0, c, 0, h, 0, 0, n, H)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_cell_bwd(dh, dc, acts, c_l, c_r, c, dz, dc_l, dc_r):
    """Vector-Jacobian product of :func:`tree_lstm_cell_fwd`.

    Parameters
    ----------
    dh, dc : (n, H) arrays
        Gradients of ``h`` and ``c``.
    acts : (n, 5H) array
    c_l, c_r, c : (n, H) arrays
        Children's cells and the node's cell (forward inputs and output).
    dz : (n, 5H) array
        Output buffer: gradient of the gate pre-activations.
    dc_l, dc_r : (n, H) arrays
        Output buffers: the children's cell gradients.
    """
    n = acts.shape[0]
    H = c.shape[1]
    rows = np.arange(n)
    _binary_cells_bwd(dh, 0, dc, 0, 0, acts, c, 0, c_l, rows, c_r, rows, dz, dc_l, dc_r, n, H, False)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_leaf_fwd(z, b, h, c, acts):
    """Tree-LSTM leaf(s) with separate h and c outputs: a = z + b split into
    i, o, u; c = σ(a_i)*tanh(a_u); h = σ(a_o)*tanh(c).

    Parameters
    ----------
    z : (n, 3H) array
        ``x @ W`` (without the bias).
    b : (3H,) array
    h, c : (n, H) arrays
        Output buffers.
    acts : (n, 3H) array
        Output buffer: ``[i, o, u]``.
    """
    n = z.shape[0]
    H = z.shape[1] // 3
    _leaf_cells_fwd(z, b, acts, c, 0, h, 0, n, H)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_leaf_bwd(dh, dc, acts, c, dz):
    """Vector-Jacobian product of :func:`tree_lstm_leaf_fwd`.

    Parameters
    ----------
    dh, dc : (n, H) arrays
    acts : (n, 3H) array
    c : (n, H) array
    dz : (n, 3H) array
        Output buffer.
    """
    n = acts.shape[0]
    H = c.shape[1]
    _leaf_cells_bwd(dh, dc, 0, acts, c, dz, n, H)


# --------------------------------------------------------------------------
# Per-node kernels with the matrix-vector product inside (recursive execution
# runs one node at a time, so the product is a matrix-vector product)
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _rowvec_matmul(x, w, z):
    """z[:] = x @ w for a vector x (K,) and w (K, J): four rows of w at a time
    added into z, so the inner loop runs along contiguous rows and vectorises
    without reassociation (one load and store of z per four rows of w)."""
    K, J = w.shape
    for j in range(J):
        z[j] = 0
    k = 0
    while k + 4 <= K:
        a0, a1, a2, a3 = x[k], x[k + 1], x[k + 2], x[k + 3]
        w0, w1, w2, w3 = w[k], w[k + 1], w[k + 2], w[k + 3]
        for j in range(J):
            z[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j]
        k += 4
    while k < K:
        a = x[k]
        wk = w[k]
        for j in range(J):
            z[j] += a * wk[j]
        k += 1


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_node_fwd_mv(s_l, s_r, w, b, s, acts, hcat):
    """:func:`tree_lstm_node_fwd` with the product ``[h_l; h_r] @ w`` done
    here, for a few nodes (one row each; per-node execution).

    Parameters
    ----------
    s_l, s_r : (n, 2H) arrays
        Children's states ``[h | c]``.
    w : (2H, 5H) array;  b : (5H,) array
    s : (n, 2H) array
        Output buffer: ``[h | c]`` of the nodes.
    acts : (n, 5H) array
        Output buffer: ``[i, f_l, f_r, o, u]``.
    hcat : (n, 2H) array
        Output buffer: ``[h_l | h_r]`` (saved for the weight gradient).
    """
    n = s_l.shape[0]
    H = s_l.shape[1] // 2
    for r in range(n):
        hc = hcat[r]
        sl = s_l[r]
        sr = s_r[r]
        for j in range(H):
            hc[j] = sl[j]
            hc[H + j] = sr[j]
        _rowvec_matmul(hc, w, acts[r])
    tree_lstm_node_fwd(acts, b, s_l, s_r, s, acts)


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def tree_lstm_leaf_node_fwd_mv(x, w, b, s, acts):
    """:func:`tree_lstm_leaf_node_fwd` with the product ``x @ w`` done here,
    for a few leaves (one row each; per-node execution).

    Parameters
    ----------
    x : (n, E) array
    w : (E, 3H) array;  b : (3H,) array
    s : (n, 2H) array
        Output buffer: ``[h | c]``.
    acts : (n, 3H) array
        Output buffer: ``[i, o, u]``.
    """
    for r in range(x.shape[0]):
        _rowvec_matmul(x[r], w, acts[r])
    tree_lstm_leaf_node_fwd(acts, b, s, acts)


# --------------------------------------------------------------------------
# PyTorch-style LSTM and GRU cells (primitives lstm_cell and gru_cell): a
# batch of rows, fresh output arrays, the gate activations above
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _gate_sum_vector(gx, gh, b_ih, b_hh, sc):
    """sc = gx + gh + b_ih + b_hh for gate products of one column (B = 1)."""
    G = sc.shape[0]
    x = gx.reshape(G)
    y = gh.reshape(G)
    for k in range(G):
        sc[k] = x[k] + y[k] + b_ih[k] + b_hh[k]


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _gate_sum_major(gx, gh, b_ih, b_hh, sc):
    """sc[k*B + b] = gx[k, b] + gh[k, b] + b_ih[k] + b_hh[k] (gate-major, flat)."""
    G, B = gx.shape
    x = gx.reshape(G * B)
    y = gh.reshape(G * B)
    for m in range(G * B):
        sc[m] = x[m] + y[m]
    for k in range(G):
        bi = b_ih[k]
        bh = b_hh[k]
        o = sc[k * B:(k + 1) * B]
        for b in range(B):
            o[b] = o[b] + bi + bh


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _lstm_gate_acts(sc, m):
    """In place on gate-major LSTM pre-activations (chunks i, f, g, o of m
    elements each): σ on i, f and o, tanh on g."""
    s1 = sc[:2 * m]
    for j in range(2 * m):
        s1[j] = _sigmoid(s1[j])
    s2 = sc[2 * m:3 * m]
    for j in range(m):
        s2[j] = _tanh(s2[j])
    s3 = sc[3 * m:]
    for j in range(m):
        s3[j] = _sigmoid(s3[j])


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _gate_major_to_rows(sc, acts, B):
    """acts[b, k] = sc[k*B + b] for k < 4H (the first 4H columns of each row)."""
    G = sc.shape[0] // B if B > 0 else 0
    for b in range(B):
        a = acts[b]
        for k in range(G):
            a[k] = sc[k * B + b]


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def _lstm_cell_state(acts, c_prev, c, h):
    """c = f*c_prev + i*g, t = tanh(c) into acts[:, 4H:], h = o*t, row by row."""
    B, H = c.shape
    for b in range(B):
        a = acts[b]
        ai = a[:H]
        af = a[H:2 * H]
        ag = a[2 * H:3 * H]
        ao = a[3 * H:4 * H]
        at = a[4 * H:]
        cp = c_prev[b]
        cb = c[b]
        hb = h[b]
        for j in range(H):
            cv = af[j] * cp[j] + ai[j] * ag[j]
            cb[j] = cv
            t = _tanh(cv)
            at[j] = t
            hb[j] = ao[j] * t


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def lstm_cell_fwd(gx, gh, b_ih, b_hh, c_prev):
    """LSTM cell from its two gate products (Hochreiter & Schmidhuber 1997;
    the PyTorch ``LSTMCell`` formulation, without peepholes).

    a = (gx + gh).T + b_ih + b_hh in chunk order i, f, g, o;
    i = σ(a_i), f = σ(a_f), g = tanh(a_g), o = σ(a_o);
    c = f * c_prev + i * g;  h = o * tanh(c).

    The products come in the layout ``W @ x.T`` gives (gates by rows), which
    single-threaded OpenBLAS computes faster than ``x @ W.T``; reading them
    here in that layout, and adding both biases on the way, spares the caller
    a transposing copy and two broadcast additions. The gates are activated
    in that gate-major layout, where each chunk is one contiguous range of
    H*B or 2H*B elements whatever B, and then copied into ``acts``:
    activating after the
    transposing read instead ran it as scalar strided loads, 2x slower
    (float32, H=150, B=25: 44 vs 22 us; B=100: 174 vs 71 us).

    Parameters
    ----------
    gx : (4H, B) array
        ``W_ih @ x.T``.
    gh : (4H, B) array
        ``W_hh @ h_prev.T``.
    b_ih, b_hh : (4H,) arrays
    c_prev : (B, H) array
        Previous cell state.

    Returns
    -------
    h : (B, H) array
    c : (B, H) array
    acts : (B, 5H) array
        ``[σ(a_i), σ(a_f), tanh(a_g), σ(a_o), tanh(c)]``, saved for the
        backward pass (with ``tanh(c)`` saved, the backward needs no
        transcendental function).
    """
    B, H = c_prev.shape
    h = np.empty((B, H), dtype=gx.dtype)
    c = np.empty((B, H), dtype=gx.dtype)
    acts = np.empty((B, 5 * H), dtype=gx.dtype)
    sc = np.empty(4 * H * B, dtype=gx.dtype)
    # the B = 1 sum in its own loop: a branch inside one function cost the
    # general path 1.7x (B=25: 38 vs 22 us), as separate helpers it costs nothing
    if B == 1:
        _gate_sum_vector(gx, gh, b_ih, b_hh, sc)
    else:
        _gate_sum_major(gx, gh, b_ih, b_hh, sc)
    _lstm_gate_acts(sc, H * B)
    _gate_major_to_rows(sc, acts, B)
    _lstm_cell_state(acts, c_prev, c, h)
    return h, c, acts


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def lstm_cell_bwd(dh, dc, acts, c_prev):
    """Vector-Jacobian product of :func:`lstm_cell_fwd`.

    With t = tanh(c) (saved in ``acts``): dc_tot = dc + dh * o * (1 - t²);
    da_i = dc_tot * g * i(1-i), da_f = dc_tot * c_prev * f(1-f),
    da_g = dc_tot * i * (1-g²), da_o = dh * t * o(1-o); dc_prev = dc_tot * f.
    The gradients of ``gx`` and ``gh`` are ``dgates.T``; of both biases, ``db``.

    Parameters
    ----------
    dh, dc : (B, H) arrays
        Upstream gradients of ``h`` and ``c`` (either may be all zeros).
    acts : (B, 5H) array
        Activations returned by the forward kernel.
    c_prev : (B, H) array
        Previous cell state (forward input).

    Returns
    -------
    dgates : (B, 4H) array
        Gradient w.r.t. the gate pre-activations ``a``; the caller turns it
        into gradients of ``x``, ``h_prev`` and the weights.
    dc_prev : (B, H) array
    db : (4H,) array
        ``dgates.sum(0)``, summed in row order.
    """
    B, H = c_prev.shape
    dgates = np.empty((B, 4 * H), dtype=acts.dtype)
    dc_prev = np.empty((B, H), dtype=acts.dtype)
    db = np.zeros(4 * H, dtype=acts.dtype)
    one = acts.dtype.type(1)
    for b in range(B):
        act = acts[b]
        ai = act[:H]
        af = act[H:2 * H]
        ag = act[2 * H:3 * H]
        ao = act[3 * H:4 * H]
        at = act[4 * H:]
        dhb = dh[b]
        dcb = dc[b]
        cp = c_prev[b]
        z = dgates[b]
        zi = z[:H]
        zf = z[H:2 * H]
        zg = z[2 * H:3 * H]
        zo = z[3 * H:]
        dcp = dc_prev[b]
        for j in range(H):
            i = ai[j]
            f = af[j]
            g = ag[j]
            o = ao[j]
            t = at[j]
            dct = dcb[j] + dhb[j] * o * (one - t * t)
            zi[j] = dct * g * i * (one - i)
            zf[j] = dct * cp[j] * f * (one - f)
            zg[j] = dct * i * (one - g * g)
            zo[j] = dhb[j] * t * o * (one - o)
            dcp[j] = dct * f
        # accumulate from the stored (rounded) values, as dgates.sum(0) does
        for k in range(4 * H):
            db[k] += z[k]
    return dgates, dc_prev, db


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def gru_cell_fwd(gi, gh, h_prev):
    """GRU cell, PyTorch formulation (Cho et al. 2014 with the reset gate
    applied after the recurrent product).

    r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r * gh_n),
    h = (1 - z) * n + z * h_prev.

    Parameters
    ----------
    gi : (B, 3H) array
        Input projection ``x @ W_ih.T + b_ih`` in chunk order r, z, n.
    gh : (B, 3H) array
        Recurrent projection ``h_prev @ W_hh.T + b_hh`` in chunk order r, z, n.
    h_prev : (B, H) array

    Returns
    -------
    h : (B, H) array
    acts : (B, 3H) array
        ``[r, z, n]``, saved for the backward pass.
    """
    B, H = h_prev.shape
    h = np.empty((B, H), dtype=h_prev.dtype)
    acts = np.empty((B, 3 * H), dtype=gi.dtype)
    one = acts.dtype.type(1)
    for b in range(B):
        x = gi[b]
        y = gh[b]
        a = acts[b]
        for j in range(2 * H):
            a[j] = _sigmoid(x[j] + y[j])
        r = a[:H]
        z = a[H:2 * H]
        n = a[2 * H:]
        xn = x[2 * H:]
        yn = y[2 * H:]
        hp = h_prev[b]
        hb = h[b]
        # two loops, not one: the fused loop (two outputs, five inputs) ran
        # 2.7x slower (float32, H=150, B=25: 24 vs 9 us), presumably past
        # LLVM's limit of runtime alias checks, so not vectorised
        for j in range(H):
            n[j] = _tanh(xn[j] + r[j] * yn[j])
        for j in range(H):
            hb[j] = (one - z[j]) * n[j] + z[j] * hp[j]
    return h, acts


@njit(cache=True, fastmath=_FM, nogil=True, error_model="numpy")
def gru_cell_bwd(dh, acts, gh, h_prev):
    """Vector-Jacobian product of :func:`gru_cell_fwd`.

    dn = dh (1-z), dz = dh (h_prev - n); with dp_n = dn (1-n²):
    dgi_n = dp_n, dgh_n = dp_n r; dp_r = dp_n gh_n r(1-r), dp_z = dz z(1-z);
    dgi_r = dgh_r = dp_r, dgi_z = dgh_z = dp_z.

    Parameters
    ----------
    dh : (B, H) array
        Upstream gradient of ``h``.
    acts : (B, 3H) array
        ``[r, z, n]`` from the forward kernel.
    gh : (B, 3H) array
        Recurrent projection given to the forward kernel.
    h_prev : (B, H) array

    Returns
    -------
    dgi : (B, 3H) array
    dgh : (B, 3H) array
    dh_prev : (B, H) array
        ``dh * z``, only the direct path; the caller adds ``dgh @ W_hh``.
    """
    B, H = h_prev.shape
    dgi = np.empty((B, 3 * H), dtype=acts.dtype)
    dgh = np.empty((B, 3 * H), dtype=acts.dtype)
    dh_prev = np.empty((B, H), dtype=h_prev.dtype)
    one = acts.dtype.type(1)
    for b in range(B):
        a = acts[b]
        ar = a[:H]
        az = a[H:2 * H]
        an = a[2 * H:]
        ghn = gh[b][2 * H:]
        hp = h_prev[b]
        d = dh[b]
        xi = dgi[b]
        xh = dgh[b]
        dp = dh_prev[b]
        for j in range(H):
            r = ar[j]
            z = az[j]
            n = an[j]
            dp_n = d[j] * (one - z) * (one - n * n)
            dp_r = dp_n * ghn[j] * r * (one - r)
            dp_z = d[j] * (hp[j] - n) * z * (one - z)
            xi[j] = dp_r
            xi[H + j] = dp_z
            xi[2 * H + j] = dp_n
            xh[j] = dp_r
            xh[H + j] = dp_z
            xh[2 * H + j] = dp_n * r
            dp[j] = d[j] * z
    return dgi, dgh, dh_prev
