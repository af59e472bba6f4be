"""Plain-numpy twins of :mod:`dynnets.autograd.kernels`: the specification.

Each function has the name, signature, outputs and dtypes of the kernel it
specifies, written as readable vectorised numpy. The tests require a twin for
every kernel and compare the two; see the kernel docstrings for shapes. The
twins are also a fallback any caller can switch to when debugging a kernel.
"""

import numpy as np

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


def _sigmoid(x):
    # exp(-|x|) <= 1 never overflows; pick the algebraically equal form per sign.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def lstm_cell_fwd(gx, gh, b_ih, b_hh, c_prev):
    """LSTM cell (Hochreiter & Schmidhuber 1997; PyTorch ``LSTMCell``).

    gx = W_ih @ x.T, gh = W_hh @ h_prev.T (4H, B); b_ih, b_hh (4H,);
    c_prev (B, H) -> h, c (B, H), acts (B, 5H) = [i, f, g, o, tanh(c)].
    """
    a = (gx + gh).T + b_ih + b_hh
    a_i, a_f, a_g, a_o = np.split(a, 4, axis=1)
    i, f, g, o = _sigmoid(a_i), _sigmoid(a_f), np.tanh(a_g), _sigmoid(a_o)
    c = f * c_prev + i * g
    t = np.tanh(c)
    return o * t, c, np.concatenate([i, f, g, o, t], axis=1)


def lstm_cell_bwd(dh, dc, acts, c_prev):
    """VJP of :func:`lstm_cell_fwd` -> dgates (B, 4H), dc_prev (B, H), db (4H,)."""
    i, f, g, o, t = np.split(acts, 5, axis=1)
    dc_tot = dc + dh * o * (1 - t * t)
    dgates = np.concatenate(
        [
            dc_tot * g * i * (1 - i),
            dc_tot * c_prev * f * (1 - f),
            dc_tot * i * (1 - g * g),
            dh * t * o * (1 - o),
        ],
        axis=1,
    )
    return dgates, dc_tot * f, dgates.sum(0)


def gru_cell_fwd(gi, gh, h_prev):
    """GRU cell, PyTorch formulation.

    gi, gh (B, 3H) in order r, z, n; h_prev (B, H) -> h (B, H), acts (B, 3H).
    """
    gi_r, gi_z, gi_n = np.split(gi, 3, axis=1)
    gh_r, gh_z, gh_n = np.split(gh, 3, axis=1)
    r = _sigmoid(gi_r + gh_r)
    z = _sigmoid(gi_z + gh_z)
    n = np.tanh(gi_n + r * gh_n)
    h = (1 - z) * n + z * h_prev
    return h, np.concatenate([r, z, n], axis=1)


def gru_cell_bwd(dh, acts, gh, h_prev):
    """VJP of :func:`gru_cell_fwd` -> dgi (B, 3H), dgh (B, 3H), dh_prev (B, H).

    dh_prev is only the direct path ``dh * z``; the path through ``gh`` is the
    caller's (``dgh @ W_hh``).
    """
    r, z, n = np.split(acts, 3, axis=1)
    gh_n = np.split(gh, 3, axis=1)[2]
    dp_n = dh * (1 - z) * (1 - n * n)
    dp_r = dp_n * gh_n * r * (1 - r)
    dp_z = dh * (h_prev - n) * z * (1 - z)
    dgi = np.concatenate([dp_r, dp_z, dp_n], axis=1)
    dgh = np.concatenate([dp_r, dp_z, dp_n * r], axis=1)
    return dgi, dgh, dh * z


def embedding_bwd(inverse, dout, n_rows):
    """Scatter-add: inverse (N,) int64, dout (N, D) -> (n_rows, D)."""
    grad = np.zeros((n_rows, dout.shape[1]), dtype=dout.dtype)
    np.add.at(grad, inverse, dout)
    return grad


def softmax_cross_entropy_fwd(logits, targets, weights):
    """Weighted softmax cross-entropy.

    logits (N, C), targets (N,) int64, weights (N,) -> losses (N,), probs (N, C).
    """
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1)
    picked = shifted[np.arange(len(targets)), targets]
    losses = weights * (np.log(s) - picked)
    return losses, e / s[:, None]


def softmax_cross_entropy_bwd(probs, targets, weights, g):
    """VJP of :func:`softmax_cross_entropy_fwd` w.r.t. logits -> dlogits (N, C)."""
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(targets)), targets] = 1
    return (g * weights)[:, None] * (probs - onehot)


def softmax_fwd(x):
    """Row softmax: x (N, C) -> (N, C)."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def log_softmax_fwd(x):
    """Row log-softmax: x (N, C) -> (N, C)."""
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def outer_sum_fwd(a, b):
    """``a.T @ b`` for a (K, M) and b (K, N) -> (M, N)."""
    return a.T @ b
