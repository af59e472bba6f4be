"""Numerical gradient checks: central finite differences in float64."""
from __future__ import annotations

import numpy as np

from .backprop import backward
from .tensor import Tensor, wrap_array

__all__ = ["gradcheck", "GradcheckError", "numerical_grad"]


class GradcheckError(AssertionError):
    """Analytic and numerical gradients disagree; the message gives the worst
    mismatch: which input, which index, analytic vs numeric."""


def _as64(x):
    if isinstance(x, Tensor):
        arr = x.numpy()
    else:
        arr = np.asarray(x)
    if arr.dtype.kind == "f":
        return wrap_array(arr.astype(np.float64), requires_grad=True)
    return wrap_array(arr)


def _scalarize(out, rng):
    """Reduce ``fn``'s output(s) to a scalar with fixed random weights, so a
    vector-valued function is checked along one random cotangent per output."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = None
    weights = []
    for o in outs:
        if o is None or not isinstance(o, Tensor) or o.dtype.kind != "f":
            weights.append(None)
            continue
        w = rng.standard_normal(o.shape)
        weights.append(w)
        term = (o * w).sum()
        total = term if total is None else total + term
    return total, weights


def _value(fn, ts, weights):
    out = fn(*ts)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    v = 0.0
    for o, w in zip(outs, weights):
        if w is not None:
            v += float(np.sum(o.numpy() * w))
    return v


def numerical_grad(fn, ts, weights, i, eps):
    x = ts[i].numpy()
    g = np.zeros(x.shape, dtype=x.dtype)
    # index in place: x.reshape(-1) would be a copy for a non-contiguous x, and
    # perturbing the copy would leave fn's input untouched
    for k in np.ndindex(x.shape):
        orig = x[k]
        x[k] = orig + eps
        fp = _value(fn, ts, weights)
        x[k] = orig - eps
        fm = _value(fn, ts, weights)
        x[k] = orig
        g[k] = (fp - fm) / (2 * eps)
    return g


def gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5, seed=0, raise_exception=True):
    """Compare ``fn``'s autograd gradients with central finite differences.

    Parameters
    ----------
    fn : callable
        Function of tensors returning a tensor or a tuple of tensors.
    inputs : sequence
        Tensors or arrays. Floating-point inputs are converted to float64 and
        checked; integer inputs (indices, labels) are passed as constants.

    Returns
    -------
    bool
        True, or raises :class:`GradcheckError` (returns False when
        ``raise_exception=False``) with the worst mismatch.
    """
    rng = np.random.default_rng(seed)
    ts = [_as64(x) for x in inputs]
    out = fn(*ts)
    total, weights = _scalarize(out, rng)
    if total is None:
        raise GradcheckError("gradcheck: fn returned no floating-point tensor")
    if total.requires_grad:
        backward(total)
    worst = None
    for i, t in enumerate(ts):
        if not t.requires_grad:
            continue
        g = t.grad                  # densified (a row-sparse gradient's dense copy)
        analytic = np.zeros_like(t.numpy()) if g is None else np.asarray(g.numpy(), dtype=np.float64)
        numeric = numerical_grad(fn, ts, weights, i, eps)
        err = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
        if err.size:
            k = int(np.argmax(err))
            e = float(err.reshape(-1)[k])
            if worst is None or e > worst[0]:
                idx = np.unravel_index(k, t.shape) if t.shape else ()
                worst = (e, i, idx, float(analytic.reshape(-1)[k]), float(numeric.reshape(-1)[k]))
    if worst is not None and worst[0] > 0:
        e, i, idx, a, n = worst
        msg = (f"gradcheck: gradients disagree for input {i} at index {tuple(int(j) for j in idx)}: "
               f"analytic {a:.8g} vs numeric {n:.8g} (|diff| {abs(a - n):.3g}, atol {atol}, rtol {rtol})")
        if raise_exception:
            raise GradcheckError(msg)
        return False
    return True
