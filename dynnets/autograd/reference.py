"""Plain-numpy twins of :mod:`dynnets.autograd.kernels`: the specification.

Each function has the name, signature, outputs and dtypes of the kernel it
specifies, written as readable vectorised numpy. The tests require a twin for
every kernel and compare the two; see the kernel docstrings for shapes. The
twins are also a fallback any caller can switch to when debugging a kernel.
"""

import math

import numpy as np

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


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_fwd(x):
    """Exact GELU: x (N,) -> 0.5 x (1 + erf(x / sqrt 2)) (N,)."""
    return (0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))).astype(x.dtype)


def gelu_bwd(x, dy):
    """Its derivative times dy: x, dy (N,) -> dy (Phi(x) + x phi(x)) (N,)."""
    cdf = 0.5 * (1.0 + _erf(x / np.sqrt(2.0)))
    pdf = np.exp(-0.5 * x.astype(np.float64) ** 2) / np.sqrt(2.0 * np.pi)
    return (dy * (cdf + x * pdf)).astype(x.dtype)


__all__ += ["layer_norm_fwd", "layer_norm_bwd"]


def layer_norm_fwd(x, w, b, eps):
    """Twin of the kernel: x (N, D), w, b (D,) -> (N, D)."""
    mu = x.mean(axis=1, keepdims=True, dtype=np.float64)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return ((x - mu) / np.sqrt(var + eps) * w + b).astype(x.dtype)


def layer_norm_bwd(x, w, dy, eps):
    """Twin of the kernel: -> dx (N, D), dw (D,), db (D,)."""
    mu = x.mean(axis=1, keepdims=True, dtype=np.float64)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xh = (x - mu) * rstd
    gh = dy * w
    dx = rstd * (gh - gh.mean(axis=1, keepdims=True) - xh * (gh * xh).mean(axis=1, keepdims=True))
    return dx.astype(x.dtype), (dy * xh).sum(axis=0).astype(x.dtype), dy.sum(axis=0).astype(x.dtype)
