"""Linear algebra: matmul and linear (``x @ w.T + b``). Weight gradients of
products over a few rows stay factored (:class:`..gradtypes.OuterSum`)."""
from __future__ import annotations

import math

import numpy as np

from ..gradtypes import factored_wgrad, tdot
from .core import (batch_rows, Aval, DTypeError, ShapeError, broadcast_shapes, defprim, dims_match, dtype_of, fmt_shape,
                   result_type, ufunc_dtype, unbroadcast)

__all__ = ["matmul_p", "linear_p"]

# --------------------------------------------------------------------------
# linear algebra
# --------------------------------------------------------------------------

def _matmul(x, w):
    if type(x) is np.ndarray and type(w) is np.ndarray and x.ndim == 2 and w.ndim == 2:
        # np.dot: the same product for 2-D operands, without matmul's slow
        # path at k == 1 (see tdot), and ~0.3 us less call overhead
        return np.dot(x, w)
    return np.matmul(x, w)


def _same_kind(op, **avals):
    """PyTorch's products refuse integer and floating-point operands together
    (numpy would compute them in float64): a DTypeError naming both dtypes."""
    kinds = {n: dtype_of(a) for n, a in avals.items() if len(tuple(a.shape)) or not isinstance(a.dtype, (int, float))}
    floats = [n for n, d in kinds.items() if d.kind in "fc"]
    ints = [n for n, d in kinds.items() if d.kind in "biu"]
    if floats and ints:
        desc = ", ".join(f"{n}.dtype={d}" for n, d in kinds.items())
        raise DTypeError(f"{op}: expected operands of one kind, got {desc} (as torch, which refuses this: cast "
                         f"the integer operand first, e.g. {ints[0]}.float())")


def _matmul_shape(x, w):
    _same_kind("matmul", x=x, w=w)
    xs, ws = tuple(x.shape), tuple(w.shape)
    if len(xs) == 0 or len(ws) == 0:
        raise ShapeError(f"matmul: inputs must have at least one dimension, got x.shape={fmt_shape(xs)}, w.shape={fmt_shape(ws)}")
    xk = xs[-1]
    wk = ws[0] if len(ws) == 1 else ws[-2]
    if xk is not None and wk is not None and xk != wk:
        wname = "w.shape[0]" if len(ws) == 1 else ("w.shape[0]" if len(ws) == 2 else "w.shape[-2]")
        raise ShapeError(f"matmul: x.shape[-1]={xk} does not match {wname}={wk} "
                         f"(x.shape={fmt_shape(xs)}, w.shape={fmt_shape(ws)})")
    xb = xs[:-2] if len(xs) > 1 else ()
    wb = ws[:-2] if len(ws) > 1 else ()
    batch = broadcast_shapes("matmul", xb, wb, names=["x batch", "w batch"])
    shp = batch + (xs[-2:-1] if len(xs) > 1 else ()) + (ws[-1:] if len(ws) > 1 else ())
    return Aval(shp, result_type(x.dtype, w.dtype))


def _matmul_vjp_x(g, ins, out):
    x, w = ins
    if w.ndim == 1:
        gx = np.multiply.outer(g, w) if x.ndim > 1 else g * w
    elif x.ndim == 1:
        gx = np.matmul(g[..., None, :], np.swapaxes(w, -1, -2))[..., 0, :]
    else:
        gx = np.matmul(g, np.swapaxes(w, -1, -2))
    return unbroadcast(gx, x.shape)


def _matmul_vjp_w(g, ins, out):
    x, w = ins
    if x.ndim == 2 and w.ndim == 2:
        return factored_wgrad(x, g, w.shape)
    return _matmul_vjp_w_dense(g, ins, out)


def _matmul_vjp_w_dense(g, ins, out):
    x, w = ins
    if x.ndim == 1:
        gw = np.multiply.outer(x, g) if w.ndim > 1 else g * x
        if w.ndim > 2:
            gw = np.matmul(x[:, None], g[..., None, :])
    elif w.ndim == 1:
        gw = np.matmul(np.swapaxes(x, -1, -2), g[..., None])[..., 0]
    elif x.ndim == 2 and w.ndim == 2:
        gw = tdot(x, g)
    else:
        gw = np.matmul(np.swapaxes(x, -1, -2), g)
    return unbroadcast(gw, w.shape)


# static plans densify every gradient at once: there the dense twin of the weight
# VJP forms it directly (a factor object and its product cost more)
matmul_p = defprim("matmul", _matmul, _matmul_shape, vjp=(_matmul_vjp_x, _matmul_vjp_w),
                   dense_vjp=(None, _matmul_vjp_w_dense),
    batch=batch_rows(0, when=lambda x, w: len(x.shape) >= 2 and len(w.shape) == 2))


def _linear(x, w, b):
    """``x @ w.T + b`` with ``w`` of shape (out, in), as ``torch.nn.functional.linear``."""
    return x @ w.T + b


def _linear_shape(x, w, b):
    _same_kind("linear", x=x, weight=w, bias=b)
    if len(w.shape) != 2:
        raise ShapeError(f"linear: weight must be 2-D (out_features, in_features), got w.shape={fmt_shape(w.shape)}")
    if len(x.shape) == 0:
        raise ShapeError(f"linear: x must have at least one dimension (..., in_features), got x.shape={fmt_shape(x.shape)}")
    if x.shape[-1] is not None and w.shape[1] is not None and x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: x.shape[-1]={x.shape[-1]} does not match weight.shape[1]={w.shape[1]} "
                         f"(x.shape={fmt_shape(x.shape)}, weight.shape={fmt_shape(w.shape)})")
    bs = tuple(b.shape)
    if not (bs == () or (len(bs) in (1, 2) and bs[:-1] in ((), (1,), (None,)) and dims_match(bs[-1], w.shape[0]))):
        o = fmt_shape(w.shape[:1])[1:-2]
        raise ShapeError(f"linear: bias.shape={fmt_shape(bs)} does not match weight.shape[0]={o} "
                         f"(expected ({o},), (1, {o}) or ())")
    # the bias broadcasts against x @ w.T: a (1, out) bias on a 1-D x gives (1, out), as in PyTorch
    out = broadcast_shapes("linear", tuple(x.shape[:-1]) + (w.shape[0],), bs, names=["x @ weight.T", "bias"])
    return Aval(out, ufunc_dtype("linear", np.add, Aval((), ufunc_dtype("linear", np.matmul, x, w)), b))



def _linear_vjp(g, ins, out, factor=True):
    x, w, b = ins
    rows = math.prod(x.shape[:-1])         # not -1: a reshape cannot infer it when in_features is 0
    x2 = x.reshape(rows, x.shape[-1])
    g2 = g.reshape(rows, w.shape[0])
    gw = factored_wgrad(g2, x2, w.shape) if factor else tdot(g2, x2)
    gx = (g2 @ w).reshape(x.shape)
    gb = g2.sum(0) if np.ndim(b) else g2.sum()
    return gx, gw, np.reshape(gb, np.shape(b))


def _linear_vjp_dense(g, ins, out):
    return _linear_vjp(g, ins, out, factor=False)


linear_p = defprim("linear", _linear, _linear_shape, joint_vjp=_linear_vjp, dense_vjp=_linear_vjp_dense,
    batch=batch_rows(0, when=lambda x, w, b: len(x.shape) >= 2))

