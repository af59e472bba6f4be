"""Numba kernels: the fused elementwise parts of losses, softmaxes and
gradient scatters.

Which file a kernel goes in: a kernel that returns fresh arrays and needs no
gate activations goes here (losses, softmaxes, gradient scatters). A kernel
that evaluates sigmoid or tanh goes in :mod:`dynnets.autograd.kernels_tree`,
beside the vectorised activations it inlines (the PyTorch-style LSTM and GRU
cells, tree levels, packed sequences, Tree-LSTM nodes): kernels must not call
jitted functions across files, so a kernel lives beside the helpers it calls.
Kernels are named after their primitive, ``<primitive>_fwd`` / ``_bwd``.
The exact GELU is here because numpy has no ``erf``: its kernels call libm's
(``math.erf``, which Numba compiles; the only module besides numpy a kernel
may name).

Every public function here is a forward (``*_fwd``) or backward (``*_bwd``)
kernel with a plain-numpy twin of the same name and signature in
:mod:`dynnets.autograd.reference`; the twin is the specification of record and
``tests/autograd/test_kernels.py`` compares the two and checks every backward
kernel against finite differences of its forward.

Conventions
-----------
* Pure: arrays in, freshly allocated arrays out; inputs are never written.
* No module globals are read inside a kernel (Numba's cache would freeze them as
  constants) and no kernel calls a jitted function from another file (the cache
  would not notice that file changing).
* Matrix products are left to the caller (numpy ``@``): BLAS inside ``njit``
  needs scipy, and the products are where BLAS wins anyway. The kernels do the
  elementwise work in one pass over rows and columns, without temporaries.
* Inputs are C-contiguous 2-D float32 or float64 arrays (index arrays are
  int64); outputs have the dtype of the float inputs. For float32 inputs some
  scalar intermediates are evaluated in float64 (Python float constants
  promote), which is at least as accurate as the twin.
* Inputs are not validated: shape and index checks belong to the caller (the
  primitive's shape rule). In particular index arrays are not bounds-checked.
* N is the number of rows, C the number of classes.
"""

import math

import numpy as np
from numba import njit

__all__ = [
    "gelu_fwd",
    "gelu_bwd",
    "embedding_bwd",
    "softmax_cross_entropy_fwd",
    "softmax_cross_entropy_bwd",
    "softmax_fwd",
    "log_softmax_fwd",
    "outer_sum_fwd",
]


# --------------------------------------------------------------------------
# Embedding
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def embedding_bwd(inverse, dout, n_rows):
    """Scatter-add ``grad_rows[inverse[k]] += dout[k]`` (rows accumulate in
    order of ``k``, as ``np.add.at`` does).

    Parameters
    ----------
    inverse : (N,) int64 array
        Row indices in ``[0, n_rows)``, not bounds-checked. Typically the
        inverse from ``np.unique(ids, return_inverse=True)`` (raveled), so that
        the gradient is row-sparse over the unique ids.
    dout : (N, D) array
        Upstream gradient of the gathered rows.
    n_rows : int
        Number of rows of the result.

    Returns
    -------
    grad_rows : (n_rows, D) array
    """
    N, D = dout.shape
    grad = np.zeros((n_rows, D), dtype=dout.dtype)
    for k in range(N):
        r = inverse[k]
        for d in range(D):
            grad[r, d] += dout[k, d]
    return grad


# --------------------------------------------------------------------------
# Softmax cross-entropy
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def softmax_cross_entropy_fwd(logits, targets, weights):
    """Weighted softmax cross-entropy of each row.

    loss_n = w_n (log Σ_j exp(x_nj - m_n) - (x_{n,t_n} - m_n)), m_n = max_j x_nj,
    which never overflows.

    Parameters
    ----------
    logits : (N, C) array, C >= 1
    targets : (N,) int64 array
        Class indices in ``[0, C)``; not bounds-checked (the caller validates).
    weights : (N,) array, dtype of ``logits``
        Per-row weights; 0 masks a row out.

    Returns
    -------
    losses : (N,) array
    probs : (N, C) array
        Row softmax of ``logits``, saved for the backward pass.
    """
    N, C = logits.shape
    losses = np.empty(N, dtype=logits.dtype)
    probs = np.empty((N, C), dtype=logits.dtype)
    for n in range(N):
        m = logits[n, 0]
        for j in range(1, C):
            if logits[n, j] > m:
                m = logits[n, j]
        s = 0.0
        for j in range(C):
            e = np.exp(logits[n, j] - m)
            probs[n, j] = e
            s += e
        inv = 1.0 / s
        for j in range(C):
            probs[n, j] *= inv
        losses[n] = weights[n] * (np.log(s) - (logits[n, targets[n]] - m))
    return losses, probs


@njit(cache=True, fastmath=False, nogil=True)
def softmax_cross_entropy_bwd(probs, targets, weights, g):
    """Vector-Jacobian product of :func:`softmax_cross_entropy_fwd` w.r.t. ``logits``:
    ``dlogits = (g * weights)[:, None] * (probs - onehot(targets))``.

    Parameters
    ----------
    probs : (N, C) array
        Softmax from the forward kernel.
    targets : (N,) int64 array
        Not bounds-checked (the caller validates).
    weights : (N,) array
    g : (N,) array
        Upstream gradient of each row's loss.

    Returns
    -------
    dlogits : (N, C) array
    """
    N, C = probs.shape
    dlogits = np.empty((N, C), dtype=probs.dtype)
    for n in range(N):
        s = g[n] * weights[n]
        for j in range(C):
            dlogits[n, j] = s * probs[n, j]
        dlogits[n, targets[n]] -= s
    return dlogits


# --------------------------------------------------------------------------
# Row softmax and log-softmax
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def softmax_fwd(x):
    """Softmax over the last axis, ``y = exp(x - m) / Σ exp(x - m)`` with
    ``m`` the row max (no overflow).

    Parameters
    ----------
    x : (N, C) array, C >= 1

    Returns
    -------
    y : (N, C) array
    """
    N, C = x.shape
    y = np.empty((N, C), dtype=x.dtype)
    for n in range(N):
        m = x[n, 0]
        for j in range(1, C):
            if x[n, j] > m:
                m = x[n, j]
        s = 0.0
        for j in range(C):
            e = np.exp(x[n, j] - m)
            y[n, j] = e
            s += e
        inv = 1.0 / s
        for j in range(C):
            y[n, j] *= inv
    return y


@njit(cache=True, fastmath=False, nogil=True)
def log_softmax_fwd(x):
    """Log-softmax over the last axis, ``y = (x - m) - log Σ exp(x - m)`` with
    ``m`` the row max (no overflow).

    Parameters
    ----------
    x : (N, C) array, C >= 1

    Returns
    -------
    y : (N, C) array
    """
    N, C = x.shape
    y = np.empty((N, C), dtype=x.dtype)
    for n in range(N):
        m = x[n, 0]
        for j in range(1, C):
            if x[n, j] > m:
                m = x[n, j]
        s = 0.0
        for j in range(C):
            s += np.exp(x[n, j] - m)
        # (x - m) - log(s), not x - (m + log(s)): m + log(s) rounds to m once
        # |m| dwarfs log(s) (logits of 1e17 gave 0 instead of -log(3))
        ls = np.log(s)
        for j in range(C):
            y[n, j] = (x[n, j] - m) - ls
    return y


# --------------------------------------------------------------------------
# Weight gradients of products over a few rows
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def outer_sum_fwd(a, b):
    """``a.T @ b`` as a sum of outer products of rows, ``Σ_k a[k]ᵀ b[k]``:
    the weight gradient of a product over a batch of K rows.

    Meant for K of 1 or 2 (one step of one sequence), where BLAS gets no
    reuse out of the data and numpy's ``np.dot(a.T, b)`` is ~2.5x slower than
    this single streaming pass (measured, float32, (1, 600) x (1, 300):
    16.4 vs 6.2 us); for larger K, ``a.T @ b`` (BLAS) is faster.

    Parameters
    ----------
    a : (K, M) array
    b : (K, N) array, dtype of ``a``

    Returns
    -------
    out : (M, N) array
        Rows summed in order of ``k``; zeros when K = 0.
    """
    K, M = a.shape
    N = b.shape[1]
    out = np.zeros((M, N), dtype=a.dtype) if K == 0 else np.empty((M, N), dtype=a.dtype)
    if K == 0:
        return out
    for m in range(M):
        s = a[0, m]
        for n in range(N):
            out[m, n] = s * b[0, n]
        for k in range(1, K):
            s = a[k, m]
            for n in range(N):
                out[m, n] += s * b[k, n]
    return out


# --------------------------------------------------------------------------
# GELU (exact): x * Phi(x), Phi the standard normal CDF (Hendrycks and Gimpel 2016)
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def gelu_fwd(x):
    """``0.5 * x * (1 + erf(x / sqrt(2)))``, as PyTorch's ``gelu``.

    Parameters
    ----------
    x : (N,) array
        C-contiguous (the caller flattens).

    Returns
    -------
    y : (N,) array
    """
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = 0.5 * v * (1.0 + math.erf(v * 0.7071067811865476))
    return out


@njit(cache=True, fastmath=False, nogil=True)
def gelu_bwd(x, dy):
    """``dy * (Phi(x) + x * phi(x))``, phi the standard normal density (the
    derivative of :func:`gelu_fwd`, PyTorch's formula).

    Parameters
    ----------
    x, dy : (N,) arrays
        The forward's input and the output gradient, C-contiguous, one dtype.

    Returns
    -------
    dx : (N,) array
    """
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        v = x[i]
        cdf = 0.5 * (1.0 + math.erf(v * 0.7071067811865476))
        pdf = 0.3989422804014327 * math.exp(-0.5 * v * v)
        out[i] = dy[i] * (cdf + v * pdf)
    return out


# --------------------------------------------------------------------------
# Layer normalisation over the last axis (issue 25)
# --------------------------------------------------------------------------

__all__ += ["layer_norm_fwd", "layer_norm_bwd"]


@njit(cache=True, fastmath=False, nogil=True, error_model="numpy")
def _row_sum8(x, i, d, acc):
    """``sum_j x[i, j]`` in float64 over 8 interleaved partial sums:
    independent lanes that LLVM vectorises without fastmath's reassociation,
    added in an order fixed by ``d`` alone (the same value whatever the row
    count). ``acc`` (8,) float64 is the caller's scratch (one allocation per
    call, not per row). Rows of 128: the layer norm kernels ran 1.6-2x faster
    than with one running sum (figures in the i25-threads report)."""
    for k in range(8):
        acc[k] = 0.0
    d8 = d - d % 8
    for j0 in range(0, d8, 8):
        for k in range(8):
            acc[k] += x[i, j0 + k]
    tot = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
    for j in range(d8, d):
        tot += x[i, j]
    return tot


@njit(cache=True, fastmath=False, nogil=True, error_model="numpy")
def _row_sq8(x, i, d, mu, acc):
    """``sum_j (x[i, j] - mu)**2`` in float64, 8 lanes as :func:`_row_sum8`."""
    for k in range(8):
        acc[k] = 0.0
    d8 = d - d % 8
    for j0 in range(0, d8, 8):
        for k in range(8):
            t = x[i, j0 + k] - mu
            acc[k] += t * t
    tot = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
    for j in range(d8, d):
        t = x[i, j] - mu
        tot += t * t
    return tot


@njit(cache=True, fastmath=False, nogil=True, error_model="numpy")
def layer_norm_fwd(x, w, b, eps):
    """Rows of x (N, D) normalised, ``(x - mean) / sqrt(var + eps) * w + b``
    (biased variance; w, b (D,)): (N, D). Two passes per row, statistics in
    float64 (Ba et al. 2016, eq. 4). numpy's error model: a constant row with
    eps 0 gives NaN, as torch, not a ZeroDivisionError."""
    n, d = x.shape
    out = np.empty_like(x)
    acc = np.empty(8, dtype=np.float64)
    # the statistics rounded to x's dtype: the last pass then runs in x's
    # dtype (twice the float32 lanes, no conversions) with torch's float32
    # rounding
    st = np.empty(2, dtype=x.dtype)
    for i in range(n):
        mu = _row_sum8(x, i, d, acc) / d
        st[0] = mu
        st[1] = 1.0 / math.sqrt(_row_sq8(x, i, d, mu, acc) / d + eps)
        m = st[0]
        r = st[1]
        for j in range(d):
            out[i, j] = (x[i, j] - m) * r * w[j] + b[j]
    return out


@njit(cache=True, fastmath=False, nogil=True, error_model="numpy")
def layer_norm_bwd(x, w, dy, eps):
    """The VJP of :func:`layer_norm_fwd` for dy (N, D): (dx (N, D), dw (D,),
    db (D,)), ``dx = rstd (gh - mean(gh) - xhat mean(gh xhat))`` with
    ``gh = dy * w``; the statistics are recomputed (nothing saved)."""
    n, d = x.shape
    dx = np.empty_like(x)
    dw = np.zeros(d, dtype=x.dtype)
    db = np.zeros(d, dtype=x.dtype)
    acc1 = np.zeros(8, dtype=np.float64)
    acc2 = np.zeros(8, dtype=np.float64)
    d8 = d - d % 8
    for i in range(n):
        mu = _row_sum8(x, i, d, acc1) / d
        rstd = 1.0 / math.sqrt(_row_sq8(x, i, d, mu, acc1) / d + eps)
        # s1 = sum gh, s2 = sum gh xhat over 8 lanes (see _row_sum8)
        for k in range(8):
            acc1[k] = 0.0
            acc2[k] = 0.0
        for j0 in range(0, d8, 8):
            for k in range(8):
                j = j0 + k
                xh = (x[i, j] - mu) * rstd
                gh = dy[i, j] * w[j]
                acc1[k] += gh
                acc2[k] += gh * xh
        s1 = ((acc1[0] + acc1[4]) + (acc1[1] + acc1[5])) + ((acc1[2] + acc1[6]) + (acc1[3] + acc1[7]))
        s2 = ((acc2[0] + acc2[4]) + (acc2[1] + acc2[5])) + ((acc2[2] + acc2[6]) + (acc2[3] + acc2[7]))
        for j in range(d8, d):
            xh = (x[i, j] - mu) * rstd
            gh = dy[i, j] * w[j]
            s1 += gh
            s2 += gh * xh
        s1 /= d
        s2 /= d
        for j in range(d):
            xh = (x[i, j] - mu) * rstd
            dw[j] += dy[i, j] * xh
            db[j] += dy[i, j]
            dx[i, j] = rstd * (dy[i, j] * w[j] - s1 - xh * s2)
    return dx, dw, db
