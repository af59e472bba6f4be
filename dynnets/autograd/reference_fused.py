"""Plain-numpy twins of :mod:`dynnets.autograd.kernels_fused`: the
specification (same names, signatures, outputs and dtypes)."""

import numpy as np

__all__ = ["add_layer_norm_fwd", "add_layer_norm_bwd"]


def _stats(x, r, eps):
    s = x.astype(np.float64) + r
    mu = s.mean(1, keepdims=True)
    c = s - mu
    rstd = 1.0 / np.sqrt((c * c).mean(1, keepdims=True) + eps)
    return c * rstd, rstd


def add_layer_norm_fwd(x, r, w, b, eps):
    """``layer_norm(x + r) * w + b`` over each row, (N, D)."""
    if x.size == 0:
        return np.empty_like(x)
    sh, _ = _stats(x, r, eps)
    return (sh * w + b).astype(x.dtype)


def add_layer_norm_bwd(x, r, w, dy, eps):
    """(ds, dw, db) for the upstream gradient dy (N, D)."""
    d = x.shape[1]
    if x.size == 0:
        return np.empty_like(x), np.zeros(d, x.dtype), np.zeros(d, x.dtype)
    sh, rstd = _stats(x, r, eps)
    g = dy.astype(np.float64)
    gh = g * w
    ds = rstd * (gh - gh.mean(1, keepdims=True) - sh * (gh * sh).mean(1, keepdims=True))
    return ds.astype(x.dtype), (g * sh).sum(0).astype(x.dtype), g.sum(0).astype(x.dtype)
