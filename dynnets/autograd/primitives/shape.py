"""Shapes: reshape, transpose, broadcast_to, and pad (one primitive for
``torch.nn.functional.pad`` and ``tf.pad``)."""
from __future__ import annotations

import math

import numpy as np

from .core import (BATCH_VIEW, batch_rows, Aval, DTypeError, ShapeError, defprim, dtype_of, fmt_shape, is_int,
                   unbroadcast)

__all__ = ["reshape_p", "transpose_p", "broadcast_to_p", "pad_p"]


def _reshape(x, shape):
    return np.reshape(x, shape)


def _shape_attr(op, shape):
    """A target shape attribute as a tuple of Python ints (DTypeError otherwise)."""
    if not isinstance(shape, (tuple, list)) or not all(is_int(d) for d in shape):
        raise DTypeError(f"{op}: shape must be a tuple of integers, got {shape!r}")
    return tuple(int(d) for d in shape)


def _reshape_shape(x, shape):
    shape = _shape_attr("reshape", shape)
    if any(d < -1 for d in shape):
        raise ShapeError(f"reshape: invalid dimension in shape={shape} (dimensions are >= 0, or -1 for one "
                         f"inferred from the others)")
    if sum(1 for d in shape if d == -1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got shape={shape}")
    rest = math.prod(d for d in shape if d != -1)
    if any(d is None for d in x.shape):
        # the known part of x must fit: its element count divides the result's
        known = math.prod(d for d in x.shape if d is not None)
        if -1 not in shape and (rest % known if known else rest):
            raise ShapeError(f"reshape: cannot reshape x.shape={fmt_shape(x.shape)} into shape={shape}")
        return Aval(tuple(None if d == -1 else d for d in shape), dtype_of(x))
    n = math.prod(x.shape)
    if -1 in shape:
        if rest == 0 or n % rest:
            raise ShapeError(f"reshape: cannot reshape x.shape={fmt_shape(x.shape)} ({n} elements) into shape={shape}")
        shape = tuple(n // rest if d == -1 else d for d in shape)
    elif rest != n:
        raise ShapeError(f"reshape: cannot reshape x.shape={fmt_shape(x.shape)} ({n} elements) into shape={shape}")
    return Aval(shape, dtype_of(x))


reshape_p = defprim("reshape", _reshape, _reshape_shape,
                    vjp=(lambda g, ins, out, shape: g.reshape(np.shape(ins[0])),), vjp_reads=((),),
                    native=lambda gen, ins, attrs: gen.reshape_to(ins.outs[0], ins.args[0]),
                    native_vjp=(lambda gen, ins, attrs: gen.reshape_to(ins.outs[0], ins.args[0]),),
    batch=BATCH_VIEW)


def _transpose(x, axes=None):
    return np.transpose(x, axes)


def _transpose_shape(x, axes=None):
    nd = len(x.shape)
    if axes is None:
        return Aval(tuple(reversed(x.shape)), dtype_of(x))
    if not isinstance(axes, (tuple, list)) or not all(is_int(a) for a in axes):
        raise DTypeError(f"transpose: axes must be a tuple of integers, got {axes!r}")
    axes = tuple(axes)
    if sorted(a % nd if -nd <= a < nd else a for a in axes) != list(range(nd)):
        raise ShapeError(f"transpose: axes={axes} is not a permutation of the {nd} dimensions of x.shape={fmt_shape(x.shape)}")
    return Aval(tuple(x.shape[a] for a in axes), dtype_of(x))


def _transpose_vjp(g, ins, out, axes=None):
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, np.argsort([a % g.ndim for a in axes]))



def _keeps_rows(x, axes=None):
    """A transpose that leaves axis 0 first is row-wise (batches by rows)."""
    return axes is not None and len(x.shape) >= 1 and len(axes) == len(x.shape) and axes[0] % len(x.shape) == 0


def _transpose_native_vjp(gen, ins, attrs):
    g = ins.args[0]
    nd = len(gen.shape[g])
    axes = (attrs or {}).get("axes")
    inv = None if axes is None else tuple(int(i) for i in np.argsort([int(a) % nd for a in axes]))
    gen.transpose_to(ins.outs[0], g, inv)


transpose_p = defprim("transpose", _transpose, _transpose_shape, vjp=(_transpose_vjp,), vjp_reads=((),),
                      native=lambda gen, ins, attrs: gen.transpose_to(ins.outs[0], ins.args[0],
                                                                      (attrs or {}).get("axes")),
                      native_vjp=(_transpose_native_vjp,),
    batch=batch_rows(0, when=_keeps_rows))


def _broadcast_to(x, shape):
    return np.broadcast_to(x, shape)


def _broadcast_to_shape(x, shape):
    shape = _shape_attr("broadcast_to", shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"broadcast_to: shape={shape} has a negative dimension")
    xs = tuple(x.shape)
    if len(xs) > len(shape) or any(d is not None and d != 1 and d != t for d, t in zip(reversed(xs), reversed(shape))):
        raise ShapeError(f"broadcast_to: x.shape={fmt_shape(xs)} cannot be broadcast to shape={shape}")
    return Aval(shape, dtype_of(x))


broadcast_to_p = defprim("broadcast_to", _broadcast_to, _broadcast_to_shape,
                         vjp=(lambda g, ins, out, shape: unbroadcast(g, np.shape(ins[0])),), vjp_reads=((),),
                         native="{0}", native_vjp=("{g}",))


# torch's modes, and TF1's SYMMETRIC (tf.pad; numpy's 'symmetric'); one primitive serves
# torch.nn.functional.pad and tf.pad
_PAD_MODES = ("constant", "reflect", "replicate", "circular", "symmetric")


def _pad_source(mode, n, lo, hi):
    """For a dimension of size ``n`` padded by ``lo``/``hi`` (>= 0), the
    source position of each output position (reflect: mirrored without the
    edge; symmetric: mirrored with it; replicate: the edge repeated; circular:
    wraps)."""
    p = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(p, 0, n - 1)
    if mode == "circular":
        return p % n
    if mode == "symmetric":
        m = p % (2 * n)
        return np.where(m < n, m, 2 * n - 1 - m)
    period = 2 * (n - 1)
    m = p % period if period else p * 0
    return np.where(m < n, m, period - m)


def _crop(pads, shape):
    """Slices keeping what negative pads remove (torch crops first, then pads)."""
    return tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(pads, shape))


def _pad(x, pads, mode="constant", value=0.0):
    """``x`` padded by ``pads`` ((before, after) per dimension) as
    ``torch.nn.functional.pad``: constant ``value``, or the edge values
    (reflect, replicate, circular); a negative pad removes elements."""
    x = np.asarray(x)
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        x = x[_crop(pads, x.shape)]
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if mode == "constant":
        out = np.full(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pos)), value, dtype=x.dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, pos))] = x
        return out
    for k, (lo, hi) in enumerate(pos):
        if lo or hi:
            x = np.take(x, _pad_source(mode, x.shape[k], lo, hi), axis=k)
    return x


def _pad_shape(x, pads, mode="constant", value=0.0):
    xs = tuple(x.shape)
    if mode not in _PAD_MODES:
        raise ShapeError(f"pad: mode must be one of {list(_PAD_MODES)}, got {mode!r}")
    if (not isinstance(pads, tuple) or len(pads) != len(xs)
            or not all(isinstance(p, tuple) and len(p) == 2 and all(is_int(v) for v in p) for p in pads)):
        raise DTypeError(f"pad: pads must be one (before, after) pair of integers per dimension of x "
                         f"(x.shape={fmt_shape(xs)}), got {pads!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DTypeError(f"pad: value must be a number, got {value!r}")
    out = []
    for k, ((lo, hi), n) in enumerate(zip(pads, xs)):
        if n is None:
            out.append(None)
            continue
        kept = n - max(-lo, 0) - max(-hi, 0)
        if kept < 0 or (kept == 0 and (lo > 0 or hi > 0) and mode != "constant"):
            raise ShapeError(f"pad: pads ({lo}, {hi}) leave {kept} elements of dimension {k} (x.shape="
                             f"{fmt_shape(xs)}) to pad")
        if mode == "reflect" and (lo >= kept or hi >= kept) and (lo > 0 or hi > 0):
            raise ShapeError(f"pad: reflect padding must be less than the dimension padded, got ({lo}, {hi}) for "
                             f"dimension {k} of size {kept}")
        if mode == "symmetric" and (lo > kept or hi > kept):
            raise ShapeError(f"pad: symmetric padding must be at most the dimension padded, got ({lo}, {hi}) for "
                             f"dimension {k} of size {kept}")
        if mode == "circular" and (lo > kept or hi > kept):
            raise ShapeError(f"pad: circular padding ({lo}, {hi}) would wrap around dimension {k} of size {kept} "
                             f"more than once")
        out.append(kept + max(lo, 0) + max(hi, 0))
    return Aval(tuple(out), dtype_of(x))


def _pad_vjp(g, ins, out, pads, mode="constant", value=0.0):
    x = ins[0]
    shape = np.shape(x)
    crop = _crop(pads, shape)
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if mode == "constant":
        inner = g[tuple(slice(lo, g.shape[k] - hi) for k, (lo, hi) in enumerate(pos))]
    else:
        inner = g
        for k in reversed(range(len(pos))):
            lo, hi = pos[k]
            if lo or hi:
                n = inner.shape[k] - lo - hi
                acc = np.zeros(inner.shape[:k] + (n,) + inner.shape[k + 1:], dtype=g.dtype)
                np.add.at(acc, (slice(None),) * k + (_pad_source(mode, n, lo, hi),), inner)
                inner = acc
    if all(lo >= 0 and hi >= 0 for lo, hi in pads):
        return np.array(inner)          # (ascontiguousarray would make a 0-d gradient 1-d)
    gx = np.zeros(shape, dtype=g.dtype)
    gx[crop] = inner
    return gx


def _pad_rows(x, pads, mode="constant", value=0.0):
    """A pad that leaves dimension 0 alone is row-wise."""
    return len(x.shape) >= 1 and isinstance(pads, tuple) and len(pads) >= 1 and tuple(pads[0]) == (0, 0)


pad_p = defprim("pad", _pad, _pad_shape, vjp=(_pad_vjp,), batch=batch_rows(0, when=_pad_rows))
