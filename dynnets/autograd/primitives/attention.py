"""Multi-head softmax attention as two primitives, torch's head layout (head
``h`` is columns ``h D:(h + 1) D`` of the feature axis, as
``torch.nn.MultiheadAttention`` views ``(L, N E)`` as ``(L, N H, D)``):

``attention_probs_p(q, k[, mask], num_heads, scale)``
    ``softmax(q_h k_h^T scale + mask)`` per head: (..., H, L, S);
``attention_apply_p(probs, v)``
    ``probs_h v_h`` with the heads merged back: (..., L, H Dv).

Two primitives rather than one so that dropout on the attention weights and
``need_weights`` sit between them as ordinary ops; each splits the heads
itself, so a static graph with unknown batch and length (a TF1 padded
Transformer) needs no reshape of unknown dimensions. One ``-inf`` additive
mask carries torch's boolean masks (a fully masked row is NaN, as torch's
``MultiheadAttention``)."""
from __future__ import annotations

import numpy as np

from .core import (Aval, DTypeError, ShapeError, batch_rows, broadcast_shapes, defprim, dims_match, dtype_of, fmt_shape,
                   is_int, unbroadcast)

__all__ = ["attention_probs_p", "attention_apply_p"]


def _heads(x, h):
    """(..., L, H D) -> (..., H, L, D): a view."""
    return np.swapaxes(x.reshape(x.shape[:-1] + (h, x.shape[-1] // h)), -2, -3)


def _merge(x):
    """(..., H, L, D) -> (..., L, H D)."""
    y = np.swapaxes(x, -2, -3)
    return y.reshape(y.shape[:-2] + (y.shape[-2] * y.shape[-1],))


def _attention_probs(q, k, mask=None, num_heads=1, scale=1.0, safe=False):
    """Per-head attention weights: q (..., L, E), k (..., S, E), mask an
    additive float array broadcasting to (..., H, L, S); -> (..., H, L, S).
    A fully masked row is NaN, as torch's ``MultiheadAttention`` with
    ``need_weights``; with ``safe`` it is 0, as torch's
    ``scaled_dot_product_attention`` (its ``_safe_softmax``)."""
    s = np.matmul(_heads(q, num_heads), np.swapaxes(_heads(k, num_heads), -1, -2))
    s *= scale
    if mask is not None:
        s = s + mask
    if s.shape[-1] == 0:
        return s
    with np.errstate(invalid="ignore"):
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - m)
        e /= e.sum(axis=-1, keepdims=True)
    if safe and mask is not None:
        e[np.broadcast_to(m == -np.inf, e.shape)] = 0.0
    return e.astype(q.dtype, copy=False)


def _check_heads(name, what, x, num_heads):
    if x.shape[-1] is not None and x.shape[-1] % num_heads:
        raise ShapeError(f"{name}: {what}.shape[-1]={x.shape[-1]} is not divisible by num_heads={num_heads} "
                         f"({what}.shape={fmt_shape(x.shape)})")


def _lead_match(a, b):
    return len(a) == len(b) and all(dims_match(x, y) for x, y in zip(a, b))


def _attention_probs_shape(q, k, mask=None, num_heads=1, scale=1.0, safe=False):
    name = "attention_probs"
    if isinstance(num_heads, bool) or not is_int(num_heads) or num_heads < 1:
        raise ShapeError(f"{name}: num_heads must be a positive integer, got {num_heads!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise ShapeError(f"{name}: scale must be a number, got {scale!r}")
    if not isinstance(safe, (bool, np.bool_)):
        raise ShapeError(f"{name}: safe must be a bool, got {safe!r}")
    dt = dtype_of(q)
    if dt.kind != "f":
        raise DTypeError(f"{name}: expected a floating-point query, got query.dtype={dt}")
    for what, a in (("key", k), ("mask", mask)):
        if a is not None and dtype_of(a) != dt:
            raise DTypeError(f"{name}: {what}.dtype={dtype_of(a)} does not match query.dtype={dt} (a boolean mask: "
                             f"convert it to an additive float mask of -inf and 0 first)")
    if len(q.shape) < 2 or len(k.shape) < 2:
        raise ShapeError(f"{name}: query and key must be at least 2-D (..., L, E), got query.shape="
                         f"{fmt_shape(q.shape)} and key.shape={fmt_shape(k.shape)}")
    if not _lead_match(q.shape[:-2], k.shape[:-2]) or not dims_match(q.shape[-1], k.shape[-1]):
        raise ShapeError(f"{name}: query.shape={fmt_shape(q.shape)} and key.shape={fmt_shape(k.shape)} must agree in "
                         f"every dimension but the length (-2)")
    _check_heads(name, "query", q, num_heads)
    lead = tuple(a if a is not None else b for a, b in zip(q.shape[:-2], k.shape[:-2]))
    out = lead + (num_heads, q.shape[-2], k.shape[-2])
    if mask is not None:
        full = broadcast_shapes(name, out, mask.shape, names=["scores", "mask"])
        if full is not None and (len(full) != len(out) or not all(dims_match(a, b) for a, b in zip(full, out))):
            raise ShapeError(f"{name}: mask.shape={fmt_shape(mask.shape)} does not broadcast to the scores' shape "
                             f"{fmt_shape(out)} (..., heads, L, S)")
    return Aval(out, dt)


def _attention_probs_vjp(g, ins, out, num_heads=1, scale=1.0, safe=False):
    q, k = ins[0], ins[1]
    p = out
    g = np.broadcast_to(g, p.shape)
    # softmax's VJP, rows whose weights are NaN (fully masked) give NaN, as torch's
    gs = p * (g - (g * p).sum(axis=-1, keepdims=True))
    gq = _merge(np.matmul(gs, _heads(k, num_heads))) * scale
    gk = _merge(np.matmul(np.swapaxes(gs, -1, -2), _heads(q, num_heads))) * scale
    res = (gq.astype(q.dtype, copy=False), gk.astype(k.dtype, copy=False))
    if len(ins) > 2:
        m = ins[2]
        res += (None if m is None else unbroadcast(gs, np.shape(m)).astype(m.dtype, copy=False),)
    return res


def _per_instance(q, k, mask=None, num_heads=1, scale=1.0, safe=False):
    """Rows of axis 0 are instances when there is a batch axis. A mask is then
    stacked with them when it has the scores' rank and the queries' rows (each
    instance's own key padding (n, 1, 1, S) or full mask (n, H, L, S)); a mask
    of lower rank, or one row broadcast over several, may be shared by
    instances of other batch sizes: such calls run on their own."""
    if len(q.shape) < 3:
        return False
    return mask is None or (len(mask.shape) == len(q.shape) + 1 and mask.shape[0] == q.shape[0])


attention_probs_p = defprim("attention_probs", _attention_probs, _attention_probs_shape,
                            joint_vjp=_attention_probs_vjp, vjp_reads=(0, 1, "out"),
                            batch=batch_rows(0, 1, 2, when=_per_instance))


def _attention_apply(p, v):
    """probs (..., H, L, S) applied to v (..., S, H Dv): (..., L, H Dv)."""
    return _merge(np.matmul(p, _heads(v, p.shape[-3]))).astype(v.dtype, copy=False)


def _attention_apply_shape(p, v):
    name = "attention_apply"
    dt = dtype_of(v)
    if dt.kind != "f" or dtype_of(p) != dt:
        raise DTypeError(f"{name}: probs and value must be of one floating-point dtype, got probs.dtype="
                         f"{dtype_of(p)} and value.dtype={dt}")
    if len(p.shape) < 3 or len(v.shape) < 2:
        raise ShapeError(f"{name}: probs must be (..., H, L, S) and value (..., S, E), got probs.shape="
                         f"{fmt_shape(p.shape)} and value.shape={fmt_shape(v.shape)}")
    if not _lead_match(p.shape[:-3], v.shape[:-2]) or not dims_match(p.shape[-1], v.shape[-2]):
        raise ShapeError(f"{name}: probs.shape={fmt_shape(p.shape)} does not match value.shape={fmt_shape(v.shape)} "
                         f"(expected probs (..., H, L, S) and value (..., S, E))")
    h = p.shape[-3]
    if h is not None:
        if h < 1:
            raise ShapeError(f"{name}: probs.shape[-3] (heads) must be positive, got probs.shape="
                             f"{fmt_shape(p.shape)}")
        _check_heads(name, "value", v, h)
    lead = tuple(a if a is not None else b for a, b in zip(p.shape[:-3], v.shape[:-2]))
    return Aval(lead + (p.shape[-2], v.shape[-1]), dt)


def _attention_apply_vjp(g, ins, out):
    p, v = ins
    h = p.shape[-3]
    gh = _heads(np.ascontiguousarray(np.broadcast_to(g, out.shape)), h)
    gp = np.matmul(gh, np.swapaxes(_heads(v, h), -1, -2))
    gv = _merge(np.matmul(np.swapaxes(p, -1, -2), gh))
    return gp.astype(p.dtype, copy=False), gv.astype(v.dtype, copy=False)


attention_apply_p = defprim("attention_apply", _attention_apply, _attention_apply_shape,
                            joint_vjp=_attention_apply_vjp, vjp_reads=(0, 1),
                            batch=batch_rows(0, 1, when=lambda p, v: len(v.shape) >= 3))


def _rows_like(table, ref, axis=0):
    """The first ``ref.shape[axis]`` rows of ``table`` (max_len, ...): a
    positional table cut to a sequence's length, also where that length is
    known only when a static graph runs."""
    return table[:ref.shape[axis]]


def _rows_like_shape(table, ref, axis=0):
    name = "rows_like"
    if isinstance(axis, bool) or not is_int(axis):
        raise ShapeError(f"{name}: axis must be an integer, got {axis!r}")
    if len(table.shape) < 1:
        raise ShapeError(f"{name}: table must be at least 1-D (max_len, ...), got table.shape={fmt_shape(table.shape)}")
    nd = len(ref.shape)
    if not -nd <= axis < nd:
        raise ShapeError(f"{name}: axis {axis} is out of range for ref.shape={fmt_shape(ref.shape)}")
    n = ref.shape[axis]
    if n is not None and table.shape[0] is not None and n > table.shape[0]:
        raise ShapeError(f"{name}: the sequence length ref.shape[{axis}]={n} exceeds the table's table.shape[0]="
                         f"{table.shape[0]} positions (table.shape={fmt_shape(table.shape)}; raise max_len)")
    return Aval((n,) + tuple(table.shape[1:]), dtype_of(table))


def _rows_like_vjp(g, ins, out, axis=0):
    table = ins[0]
    gt = np.zeros(np.shape(table), dtype=table.dtype)
    gt[:out.shape[0]] = g
    return gt


rows_like_p = defprim("rows_like", _rows_like, _rows_like_shape, vjp=(_rows_like_vjp, None), nondiff_args=(1,),
                      vjp_reads=((), ()))
__all__ += ["rows_like_p"]
