"""Numba kernels: the fused elementwise parts of cells, losses and softmaxes.

Which file a kernel goes in: a kernel that returns fresh arrays and evaluates
its activations with scalar libm maths goes here (the PyTorch-style LSTM and
GRU cells, losses, softmaxes, gradient scatters). A kernel that needs the
vectorised gate activations, or works on the state arrays of a whole minibatch
through caller-allocated buffers (tree levels, packed sequences, Tree-LSTM
nodes), goes in :mod:`dynnets.autograd.kernels_tree`: kernels must not call
jitted functions across files, so a kernel lives beside the helpers it calls.
Kernels are named after their primitive, ``<primitive>_fwd`` / ``_bwd``.

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
  would not notice that file changing). The private scalar helpers below live in
  this file for that reason.
* Matrix products are left to the caller (numpy ``@``): BLAS inside ``njit``
  needs scipy, and the products are where BLAS wins anyway. The kernels do the
  elementwise work in one pass over rows and columns, without temporaries.
* Inputs are C-contiguous 2-D float32 or float64 arrays (index arrays are
  int64); outputs have the dtype of the float inputs. For float32 inputs some
  scalar intermediates are evaluated in float64 (Python float constants
  promote), which is at least as accurate as the twin.
* Inputs are not validated: shape and index checks belong to the caller (the
  primitive's shape rule). In particular index arrays are not bounds-checked.
* B is the number of rows (batch), H the hidden size. Gate layouts follow
  PyTorch: LSTM chunks ``i, f, g, o``; GRU chunks ``r, z, n``.
"""

import numpy as np
from numba import njit

__all__ = [
    "lstm_cell_fwd",
    "lstm_cell_bwd",
    "gru_cell_fwd",
    "gru_cell_bwd",
    "embedding_bwd",
    "softmax_cross_entropy_fwd",
    "softmax_cross_entropy_bwd",
    "softmax_fwd",
    "log_softmax_fwd",
    "outer_sum_fwd",
]


# --------------------------------------------------------------------------
# scalar helpers (private; same file so that the cache sees their changes)
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def _sigmoid(x):
    # exp of a non-positive argument only: never overflows for any |x|.
    if x >= 0.0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


# --------------------------------------------------------------------------
# LSTM cell
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def lstm_cell_fwd(gx, gh, b_ih, b_hh, c_prev):
    """LSTM cell from its two gate products (Hochreiter & Schmidhuber 1997;
    the PyTorch ``LSTMCell`` formulation, without peepholes).

    a = (gx + gh).T + b_ih + b_hh in chunk order i, f, g, o;
    i = σ(a_i), f = σ(a_f), g = tanh(a_g), o = σ(a_o);
    c = f * c_prev + i * g;  h = o * tanh(c).

    The products come in the layout ``W @ x.T`` gives (gates by rows), which
    single-threaded OpenBLAS computes faster than ``x @ W.T``; reading them
    here in that layout, and adding both biases on the way, spares the caller
    a transposing copy and two broadcast additions.

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
    # Separate passes rather than one pass per unit: within a pass the libm
    # calls are independent, so the CPU overlaps them; the single-pass loop,
    # chained through c, ran 1.4x slower (float32, H=150: B=1 7.5 vs 5.4 us,
    # B=4 25 vs 17 us).
    for b in range(B):
        for k in range(2 * H):
            acts[b, k] = _sigmoid(gx[k, b] + gh[k, b] + b_ih[k] + b_hh[k])
        for k in range(2 * H, 3 * H):
            acts[b, k] = np.tanh(gx[k, b] + gh[k, b] + b_ih[k] + b_hh[k])
        for k in range(3 * H, 4 * H):
            acts[b, k] = _sigmoid(gx[k, b] + gh[k, b] + b_ih[k] + b_hh[k])
        for j in range(H):
            c[b, j] = acts[b, H + j] * c_prev[b, j] + acts[b, j] * acts[b, 2 * H + j]
        for j in range(H):
            t = np.tanh(c[b, j])
            acts[b, 4 * H + j] = t
            h[b, j] = acts[b, 3 * H + j] * t
    return h, c, acts


@njit(cache=True, fastmath=False, nogil=True)
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
    for b in range(B):
        for j in range(H):
            i = acts[b, j]
            f = acts[b, H + j]
            g = acts[b, 2 * H + j]
            o = acts[b, 3 * H + j]
            t = acts[b, 4 * H + j]
            dct = dc[b, j] + dh[b, j] * o * (1.0 - t * t)
            d_i = dct * g * i * (1.0 - i)
            d_f = dct * c_prev[b, j] * f * (1.0 - f)
            d_g = dct * i * (1.0 - g * g)
            d_o = dh[b, j] * t * o * (1.0 - o)
            dgates[b, j] = d_i
            dgates[b, H + j] = d_f
            dgates[b, 2 * H + j] = d_g
            dgates[b, 3 * H + j] = d_o
            dc_prev[b, j] = dct * f
        # accumulate from the stored (rounded) values, as dgates.sum(0) does
        for k in range(4 * H):
            db[k] += dgates[b, k]
    return dgates, dc_prev, db


# --------------------------------------------------------------------------
# GRU cell
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
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
    for b in range(B):
        for j in range(H):
            r = _sigmoid(gi[b, j] + gh[b, j])
            z = _sigmoid(gi[b, H + j] + gh[b, H + j])
            n = np.tanh(gi[b, 2 * H + j] + r * gh[b, 2 * H + j])
            acts[b, j] = r
            acts[b, H + j] = z
            acts[b, 2 * H + j] = n
            h[b, j] = (1.0 - z) * n + z * h_prev[b, j]
    return h, acts


@njit(cache=True, fastmath=False, nogil=True)
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
    for b in range(B):
        for j in range(H):
            r = acts[b, j]
            z = acts[b, H + j]
            n = acts[b, 2 * H + j]
            d = dh[b, j]
            dp_n = d * (1.0 - z) * (1.0 - n * n)
            dp_r = dp_n * gh[b, 2 * H + j] * r * (1.0 - r)
            dp_z = d * (h_prev[b, j] - n) * z * (1.0 - z)
            dgi[b, j] = dp_r
            dgi[b, H + j] = dp_z
            dgi[b, 2 * H + j] = dp_n
            dgh[b, j] = dp_r
            dgh[b, H + j] = dp_z
            dgh[b, 2 * H + j] = dp_n * r
            dh_prev[b, j] = d * z
    return dgi, dgh, dh_prev


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
