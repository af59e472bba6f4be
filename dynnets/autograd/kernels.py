"""Numba kernels: the fused elementwise parts of cells, losses and softmaxes.

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
    "tree_lstm_fwd",
    "tree_lstm_bwd",
    "tree_lstm_leaf_fwd",
    "tree_lstm_leaf_bwd",
    "embedding_fwd",
    "embedding_bwd",
    "softmax_xent_fwd",
    "softmax_xent_bwd",
    "softmax_fwd",
    "softmax_bwd",
    "log_softmax_fwd",
    "log_softmax_bwd",
    "sigmoid_fwd",
    "sigmoid_bwd",
    "tanh_bwd",
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
# Binary constituency Tree-LSTM
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def tree_lstm_fwd(z, c_l, c_r):
    """Internal node of the binary constituency Tree-LSTM (Tai et al. 2015,
    eqs. 9-14 with N = 2 and no input at internal nodes), for N nodes at once.

    i = σ(a_i), f_l = σ(a_fl), f_r = σ(a_fr), o = σ(a_o), u = tanh(a_u);
    c = i * u + f_l * c_l + f_r * c_r (eq. 13);  h = o * tanh(c) (eq. 14).

    Parameters
    ----------
    z : (N, 5H) array
        Pre-activations ``[h_l; h_r] @ U + b`` in chunk order i, f_l, f_r, o, u.
    c_l, c_r : (N, H) arrays
        Cell states of the left and right children.

    Returns
    -------
    h : (N, H) array
    c : (N, H) array
    acts : (N, 5H) array
        ``[σ(a_i), σ(a_fl), σ(a_fr), σ(a_o), tanh(a_u)]``.
    """
    N, H = c_l.shape
    h = np.empty((N, H), dtype=c_l.dtype)
    c = np.empty((N, H), dtype=c_l.dtype)
    acts = np.empty((N, 5 * H), dtype=z.dtype)
    for b in range(N):
        for j in range(H):
            i = _sigmoid(z[b, j])
            fl = _sigmoid(z[b, H + j])
            fr = _sigmoid(z[b, 2 * H + j])
            o = _sigmoid(z[b, 3 * H + j])
            u = np.tanh(z[b, 4 * H + j])
            acts[b, j] = i
            acts[b, H + j] = fl
            acts[b, 2 * H + j] = fr
            acts[b, 3 * H + j] = o
            acts[b, 4 * H + j] = u
            cj = i * u + fl * c_l[b, j] + fr * c_r[b, j]
            c[b, j] = cj
            h[b, j] = o * np.tanh(cj)
    return h, c, acts


@njit(cache=True, fastmath=False, nogil=True)
def tree_lstm_bwd(dh, dc, acts, c_l, c_r, c):
    """Vector-Jacobian product of :func:`tree_lstm_fwd`.

    With t = tanh(c): dc_tot = dc + dh * o * (1 - t²);
    da_i = dc_tot u i(1-i), da_fl = dc_tot c_l f_l(1-f_l),
    da_fr = dc_tot c_r f_r(1-f_r), da_o = dh t o(1-o), da_u = dc_tot i (1-u²);
    dc_l = dc_tot f_l, dc_r = dc_tot f_r.

    Parameters
    ----------
    dh, dc : (N, H) arrays
        Upstream gradients of ``h`` and ``c`` (either may be all zeros).
    acts : (N, 5H) array
        Activations from the forward kernel.
    c_l, c_r : (N, H) arrays
        Children's cell states (forward inputs).
    c : (N, H) array
        Cell state (forward output).

    Returns
    -------
    dz : (N, 5H) array
    dc_l : (N, H) array
    dc_r : (N, H) array
    """
    N, H = c.shape
    dz = np.empty((N, 5 * H), dtype=acts.dtype)
    dc_l = np.empty((N, H), dtype=c.dtype)
    dc_r = np.empty((N, H), dtype=c.dtype)
    for b in range(N):
        for j in range(H):
            i = acts[b, j]
            fl = acts[b, H + j]
            fr = acts[b, 2 * H + j]
            o = acts[b, 3 * H + j]
            u = acts[b, 4 * H + j]
            t = np.tanh(c[b, j])
            dct = dc[b, j] + dh[b, j] * o * (1.0 - t * t)
            dz[b, j] = dct * u * i * (1.0 - i)
            dz[b, H + j] = dct * c_l[b, j] * fl * (1.0 - fl)
            dz[b, 2 * H + j] = dct * c_r[b, j] * fr * (1.0 - fr)
            dz[b, 3 * H + j] = dh[b, j] * t * o * (1.0 - o)
            dz[b, 4 * H + j] = dct * i * (1.0 - u * u)
            dc_l[b, j] = dct * fl
            dc_r[b, j] = dct * fr
    return dz, dc_l, dc_r


@njit(cache=True, fastmath=False, nogil=True)
def tree_lstm_leaf_fwd(z):
    """Leaf node of the Tree-LSTM (Tai et al. 2015, eqs. 9-14 with no
    children, so no forget gates): input only.

    i = σ(a_i), o = σ(a_o), u = tanh(a_u); c = i * u; h = o * tanh(c).

    Parameters
    ----------
    z : (N, 3H) array
        Pre-activations ``x @ W + b`` in chunk order i, o, u.

    Returns
    -------
    h : (N, H) array
    c : (N, H) array
    acts : (N, 3H) array
        ``[σ(a_i), σ(a_o), tanh(a_u)]``.
    """
    N = z.shape[0]
    H = z.shape[1] // 3
    h = np.empty((N, H), dtype=z.dtype)
    c = np.empty((N, H), dtype=z.dtype)
    acts = np.empty((N, 3 * H), dtype=z.dtype)
    for b in range(N):
        for j in range(H):
            i = _sigmoid(z[b, j])
            o = _sigmoid(z[b, H + j])
            u = np.tanh(z[b, 2 * H + j])
            acts[b, j] = i
            acts[b, H + j] = o
            acts[b, 2 * H + j] = u
            cj = i * u
            c[b, j] = cj
            h[b, j] = o * np.tanh(cj)
    return h, c, acts


@njit(cache=True, fastmath=False, nogil=True)
def tree_lstm_leaf_bwd(dh, dc, acts, c):
    """Vector-Jacobian product of :func:`tree_lstm_leaf_fwd`.

    With t = tanh(c): dc_tot = dc + dh * o * (1 - t²);
    da_i = dc_tot u i(1-i), da_o = dh t o(1-o), da_u = dc_tot i (1-u²).

    Parameters
    ----------
    dh, dc : (N, H) arrays
        Upstream gradients of ``h`` and ``c`` (either may be all zeros).
    acts : (N, 3H) array
        Activations from the forward kernel.
    c : (N, H) array
        Cell state (forward output).

    Returns
    -------
    dz : (N, 3H) array
    """
    N, H = c.shape
    dz = np.empty((N, 3 * H), dtype=acts.dtype)
    for b in range(N):
        for j in range(H):
            i = acts[b, j]
            o = acts[b, H + j]
            u = acts[b, 2 * H + j]
            t = np.tanh(c[b, j])
            dct = dc[b, j] + dh[b, j] * o * (1.0 - t * t)
            dz[b, j] = dct * u * i * (1.0 - i)
            dz[b, H + j] = dh[b, j] * t * o * (1.0 - o)
            dz[b, 2 * H + j] = dct * i * (1.0 - u * u)
    return dz


# --------------------------------------------------------------------------
# Embedding
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def embedding_fwd(weight, ids):
    """Row gather ``out[k] = weight[ids[k]]``.

    Parameters
    ----------
    weight : (V, D) array
    ids : (N,) int64 array
        Row indices in ``[0, V)``; not bounds-checked (the caller validates).

    Returns
    -------
    out : (N, D) array
    """
    N = ids.shape[0]
    D = weight.shape[1]
    out = np.empty((N, D), dtype=weight.dtype)
    for k in range(N):
        r = ids[k]
        for d in range(D):
            out[k, d] = weight[r, d]
    return out


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
def softmax_xent_fwd(logits, targets, weights):
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
def softmax_xent_bwd(probs, targets, weights, g):
    """Vector-Jacobian product of :func:`softmax_xent_fwd` w.r.t. ``logits``:
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
def softmax_bwd(y, g):
    """Vector-Jacobian product of :func:`softmax_fwd`:
    ``dx = y * (g - Σ_j g_j y_j)`` per row.

    Parameters
    ----------
    y : (N, C) array
        Softmax output.
    g : (N, C) array
        Upstream gradient.

    Returns
    -------
    dx : (N, C) array
    """
    N, C = y.shape
    dx = np.empty((N, C), dtype=y.dtype)
    for n in range(N):
        s = 0.0
        for j in range(C):
            s += g[n, j] * y[n, j]
        for j in range(C):
            dx[n, j] = y[n, j] * (g[n, j] - s)
    return dx


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


@njit(cache=True, fastmath=False, nogil=True)
def log_softmax_bwd(y, g):
    """Vector-Jacobian product of :func:`log_softmax_fwd`:
    ``dx = g - exp(y) * Σ_j g_j`` per row.

    Parameters
    ----------
    y : (N, C) array
        Log-softmax output.
    g : (N, C) array
        Upstream gradient.

    Returns
    -------
    dx : (N, C) array
    """
    N, C = y.shape
    dx = np.empty((N, C), dtype=y.dtype)
    for n in range(N):
        s = 0.0
        for j in range(C):
            s += g[n, j]
        for j in range(C):
            dx[n, j] = g[n, j] - np.exp(y[n, j]) * s
    return dx


# --------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------


@njit(cache=True, fastmath=False, nogil=True)
def sigmoid_fwd(x):
    """Logistic sigmoid, evaluated without overflow for any ``|x|``.

    Parameters
    ----------
    x : (N, C) array

    Returns
    -------
    y : (N, C) array
    """
    N, C = x.shape
    y = np.empty((N, C), dtype=x.dtype)
    for n in range(N):
        for j in range(C):
            y[n, j] = _sigmoid(x[n, j])
    return y


@njit(cache=True, fastmath=False, nogil=True)
def sigmoid_bwd(y, g):
    """Vector-Jacobian product of :func:`sigmoid_fwd`: ``dx = g * y * (1 - y)``.

    Parameters
    ----------
    y : (N, C) array
        Sigmoid output.
    g : (N, C) array
        Upstream gradient.

    Returns
    -------
    dx : (N, C) array
    """
    N, C = y.shape
    dx = np.empty((N, C), dtype=y.dtype)
    for n in range(N):
        for j in range(C):
            yj = y[n, j]
            dx[n, j] = g[n, j] * yj * (1.0 - yj)
    return dx


@njit(cache=True, fastmath=False, nogil=True)
def tanh_bwd(y, g):
    """Vector-Jacobian product of ``tanh``: ``dx = g * (1 - y²)``.

    Parameters
    ----------
    y : (N, C) array
        ``tanh`` output.
    g : (N, C) array
        Upstream gradient.

    Returns
    -------
    dx : (N, C) array
    """
    N, C = y.shape
    dx = np.empty((N, C), dtype=y.dtype)
    for n in range(N):
        for j in range(C):
            yj = y[n, j]
            dx[n, j] = g[n, j] * (1.0 - yj * yj)
    return dx


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
