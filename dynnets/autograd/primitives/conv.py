"""1-D convolution and pooling over the last axis, PyTorch's layout: input
(N, C, L), weight (C_out, C_in, K) (``torch.nn.functional.conv1d``,
``max_pool1d``, ``avg_pool1d``).

The convolution is im2col + one matrix product: the windows are a strided
view of the padded input, copied once into (C K, N T) columns, and the whole
batch is one BLAS product (``benchmarks/bench_layers.py`` compares it with a
loop over the K taps)."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .core import Aval, DTypeError, ShapeError, batch_rows, defprim, dims_match, dtype_of, fmt_shape, is_int

__all__ = ["conv1d_p", "pool1d_p", "conv_out_len"]


def conv_out_len(length, k, stride, padding, dilation, ceil_mode=False):
    """Output length of a window of ``k`` taps, ``dilation`` apart, every
    ``stride`` steps over ``length`` plus ``padding = (left, right)``;
    ``ceil_mode`` as torch's pooling (a last partial window that starts inside
    the input or the left padding)."""
    span = dilation * (k - 1) + 1
    total = length + padding[0] + padding[1] - span
    if total < 0:
        return 0
    if not ceil_mode:
        return total // stride + 1
    n = -(-total // stride) + 1
    if (n - 1) * stride >= length + padding[0]:
        n -= 1
    return n


def _windows(xp, k, stride, dilation, n_out):
    """(N, C, K, T) strided view: ``[n, c, j, t] = xp[n, c, t * stride + j * dilation]``."""
    sn, sc, sl = xp.strides
    return as_strided(xp, (xp.shape[0], xp.shape[1], k, n_out), (sn, sc, dilation * sl, stride * sl),
                      writeable=False)


def _pad_last(x, left, right, value=0.0):
    if not left and not right:
        return x
    out = np.full(x.shape[:-1] + (x.shape[-1] + left + right,), value, dtype=x.dtype)
    out[..., left:left + x.shape[-1]] = x
    return out


def _taps_back(gw, shape, k, stride, dilation, n_out, left, length):
    """The adjoint of :func:`_windows` then unpadding: sum window gradients
    ``gw`` (N, C, K, T) into an input gradient of ``shape`` (N, C, L)."""
    gxp = np.zeros(shape, dtype=gw.dtype)
    # taps, not positions: K strided additions (K is a filter width, small)
    for j in range(k):
        start = j * dilation
        stop = start + stride * (n_out - 1) + 1
        gxp[..., start:stop:stride] += gw[:, :, j, :]
    return gxp[..., left:left + length]


def _check_window(name, k, stride, padding, dilation):
    for what, v in (("kernel_size", k), ("stride", stride), ("dilation", dilation)):
        if isinstance(v, bool) or not is_int(v) or v < 1:
            raise ShapeError(f"{name}: {what} must be a positive integer, got {v!r}")
    if (not isinstance(padding, tuple) or len(padding) != 2
            or not all(is_int(p) and not isinstance(p, bool) and p >= 0 for p in padding)):
        raise ShapeError(f"{name}: padding must be a pair (left, right) of non-negative integers, got {padding!r}")


# --------------------------------------------------------------------------
# conv1d
# --------------------------------------------------------------------------

def _cols(xp, k, stride, dilation, n_out):
    """im2col of the padded input (N, C, Lp): (C K, N T), ``[c K + j, n T + t] =
    xp[n, c, t stride + j dilation]`` (one copy, from a strided view)."""
    n, c = xp.shape[:2]
    sn, sc, sl = xp.strides
    win = as_strided(xp, (c, k, n, n_out), (sc, dilation * sl, sn, stride * sl), writeable=False)
    return win.reshape(c * k, n * n_out)


def _conv1d(x, w, b=None, stride=1, padding=(0, 0), dilation=1):
    """Cross-correlation of ``x`` (N, C_in, L) with ``w`` (C_out, C_in, K),
    plus ``b`` (C_out,): (N, C_out, T), ``T = (L + pl + pr - dilation (K - 1) - 1) // stride + 1``.

    One (C_out, C_in K) x (C_in K, N T) product over the whole batch: one
    large GEMM beats N small ones (see ``benchmarks/bench_layers.py``)."""
    n, c, length = x.shape
    o, _, k = w.shape
    t = conv_out_len(length, k, stride, padding, dilation)
    xp = np.ascontiguousarray(_pad_last(x, padding[0], padding[1]))
    out = (w.reshape(o, c * k) @ _cols(xp, k, stride, dilation, t)).reshape(o, n, t)
    if b is not None:
        out += b[:, None, None]
    return np.ascontiguousarray(out.transpose(1, 0, 2)).astype(x.dtype, copy=False)


def _conv1d_shape(x, w, b=None, stride=1, padding=(0, 0), dilation=1):
    name = "conv1d"
    _check_window(name, 1, stride, padding, dilation)
    dt = dtype_of(x)
    if dt.kind != "f":
        raise DTypeError(f"conv1d: expected a floating-point input, got input.dtype={dt}")
    for what, p in (("weight", w), ("bias", b)):
        if p is not None and dtype_of(p) != dt:
            raise DTypeError(f"conv1d: {what}.dtype={dtype_of(p)} does not match input.dtype={dt}")
    if len(x.shape) != 3:
        raise ShapeError(f"conv1d: input must be 3-D (N, C_in, L), got input.shape={fmt_shape(x.shape)}")
    if len(w.shape) != 3:
        raise ShapeError(f"conv1d: weight must be 3-D (C_out, C_in, K), got weight.shape={fmt_shape(w.shape)}")
    if not dims_match(x.shape[1], w.shape[1]):
        raise ShapeError(f"conv1d: input.shape[1]={x.shape[1]} (channels) does not match weight.shape[1]="
                         f"{w.shape[1]} (input.shape={fmt_shape(x.shape)}, weight.shape={fmt_shape(w.shape)})")
    if w.shape[2] is not None and w.shape[2] < 1:
        raise ShapeError(f"conv1d: weight.shape[2] (kernel size) must be positive, got weight.shape="
                         f"{fmt_shape(w.shape)}")
    if b is not None and (len(b.shape) != 1 or not dims_match(b.shape[0], w.shape[0])):
        raise ShapeError(f"conv1d: bias.shape={fmt_shape(b.shape)} does not match weight.shape[0]={w.shape[0]} "
                         f"(weight.shape={fmt_shape(w.shape)})")
    t = None
    if x.shape[2] is not None and w.shape[2] is not None:
        span = dilation * (w.shape[2] - 1) + 1
        if x.shape[2] + padding[0] + padding[1] < span:
            raise ShapeError(f"conv1d: the padded input length {x.shape[2]} + {padding[0]} + {padding[1]} is "
                             f"shorter than the kernel span {span} (weight.shape={fmt_shape(w.shape)}, dilation="
                             f"{dilation}; input.shape={fmt_shape(x.shape)})")
        t = conv_out_len(x.shape[2], w.shape[2], stride, padding, dilation)
    return Aval((x.shape[0], w.shape[0], t), dt)


def _conv1d_vjp(g, ins, out, stride=1, padding=(0, 0), dilation=1):
    x, w = ins[0], ins[1]
    n, c, length = x.shape
    o, _, k = w.shape
    t = out.shape[2]
    g = np.broadcast_to(g, out.shape)
    g2 = np.ascontiguousarray(g.transpose(1, 0, 2)).reshape(o, n * t)
    xp = np.ascontiguousarray(_pad_last(x, padding[0], padding[1]))
    gw = (g2 @ _cols(xp, k, stride, dilation, t).T).reshape(w.shape)
    gc = (w.reshape(o, c * k).T @ g2).reshape(c, k, n, t)
    # the adjoint of im2col: K strided additions (K is a filter width, small)
    gxp = np.zeros((c, n, xp.shape[2]), dtype=gc.dtype)
    for j in range(k):
        start = j * dilation
        gxp[:, :, start:start + stride * (t - 1) + 1:stride] += gc[:, j]
    gx = gxp[:, :, padding[0]:padding[0] + length].transpose(1, 0, 2)
    res = (np.ascontiguousarray(gx).astype(x.dtype, copy=False), gw.astype(w.dtype, copy=False))
    if len(ins) > 2:
        res += (None if ins[2] is None else g.sum(axis=(0, 2)).astype(x.dtype, copy=False),)
    return res


conv1d_p = defprim("conv1d", _conv1d, _conv1d_shape, joint_vjp=_conv1d_vjp, batch=batch_rows(0))


# --------------------------------------------------------------------------
# pooling
# --------------------------------------------------------------------------

_POOL_MODES = ("max", "avg", "avg_exclude_pad")


def _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode):
    length = x.shape[-1]
    t = conv_out_len(length, kernel_size, stride, padding, dilation, ceil_mode)
    # the right padding a ceil-mode last window may reach past the declared padding
    need = (t - 1) * stride + dilation * (kernel_size - 1) + 1 if t else 0
    right = max(need - length - padding[0], padding[1])
    return t, right


def _pool1d(x, kernel_size=1, stride=1, padding=(0, 0), dilation=1, ceil_mode=False, mode="max"):
    """Max or average pooling of ``x`` (N, C, L) over windows of the last
    axis: (N, C, T). ``mode`` 'avg' divides by the window size counting the
    declared padding, 'avg_exclude_pad' by the input positions only
    (torch's ``count_include_pad=False``); a ceil-mode overhang past the
    padding never counts."""
    t, right = _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode)
    fill = -np.inf if mode == "max" else 0.0
    xp = np.ascontiguousarray(_pad_last(x, padding[0], right, fill))
    win = _windows(xp, kernel_size, stride, dilation, t)
    if mode == "max":
        return win.max(axis=2).astype(x.dtype, copy=False)
    return (win.sum(axis=2) / _pool_counts(x.shape[-1], kernel_size, stride, padding, dilation, t, mode)
            ).astype(x.dtype, copy=False)


def _pool_counts(length, k, stride, padding, dilation, t, mode):
    """Per output position, the divisor of an average window (T,)."""
    starts = np.arange(t) * stride - padding[0]
    taps = starts[:, None] + dilation * np.arange(k)[None, :]
    hi = length + padding[1] if mode == "avg" else length
    lo = -padding[0] if mode == "avg" else 0
    return np.maximum(((taps >= lo) & (taps < hi)).sum(axis=1), 1)


def _pool1d_shape(x, kernel_size=1, stride=1, padding=(0, 0), dilation=1, ceil_mode=False, mode="max"):
    name = "max_pool1d" if mode == "max" else "avg_pool1d"
    if mode not in _POOL_MODES:
        raise ShapeError(f"pool1d: mode must be one of {_POOL_MODES}, got {mode!r}")
    _check_window(name, kernel_size, stride, padding, dilation)
    if not isinstance(ceil_mode, (bool, np.bool_)):
        raise ShapeError(f"{name}: ceil_mode must be a bool, got {ceil_mode!r}")
    if max(padding) * 2 > kernel_size:
        raise ShapeError(f"{name}: pad should be at most half of effective kernel size, but got padding="
                         f"{max(padding)} and kernel_size={kernel_size}")
    dt = dtype_of(x)
    if dt.kind != "f":
        raise DTypeError(f"{name}: expected a floating-point input, got input.dtype={dt}")
    if len(x.shape) != 3:
        raise ShapeError(f"{name}: input must be 3-D (N, C, L), got input.shape={fmt_shape(x.shape)}")
    t = None
    if x.shape[2] is not None:
        t = conv_out_len(x.shape[2], kernel_size, stride, padding, dilation, ceil_mode)
        if t < 1:
            raise ShapeError(f"{name}: input.shape={fmt_shape(x.shape)} is too short for kernel_size={kernel_size}, "
                             f"dilation={dilation}, padding={padding}: output length {t}")
    return Aval((x.shape[0], x.shape[1], t), dt)


def _pool1d_vjp(g, ins, out, kernel_size=1, stride=1, padding=(0, 0), dilation=1, ceil_mode=False, mode="max"):
    x = ins[0]
    t, right = _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode)
    g = np.broadcast_to(g, out.shape)
    shape = x.shape[:-1] + (x.shape[-1] + padding[0] + right,)
    if mode == "max":
        xp = np.ascontiguousarray(_pad_last(x, padding[0], right, -np.inf))
        win = _windows(xp, kernel_size, stride, dilation, t)
        # the first maximum of each window takes the gradient, as torch's max_pool1d (its argmax)
        idx = win.argmax(axis=2)
        gw = np.zeros(win.shape, dtype=x.dtype)
        np.put_along_axis(gw, idx[:, :, None, :], g[:, :, None, :], axis=2)
    else:
        cnt = _pool_counts(x.shape[-1], kernel_size, stride, padding, dilation, t, mode)
        gw = np.broadcast_to((g / cnt)[:, :, None, :], x.shape[:2] + (kernel_size, t))
    gx = _taps_back(gw, shape, kernel_size, stride, dilation, t, padding[0], x.shape[-1])
    return (gx.astype(x.dtype, copy=False),)


pool1d_p = defprim("pool1d", _pool1d, _pool1d_shape, joint_vjp=_pool1d_vjp, batch=batch_rows(0))


# --------------------------------------------------------------------------
# 2-D convolution and max pooling (torch's (N, C, H, W) layout)
# --------------------------------------------------------------------------

def _pad_hw(x, pads, value=0.0):
    (t, b), (l, r) = pads
    if not (t or b or l or r):
        return np.ascontiguousarray(x)
    out = np.full(x.shape[:2] + (x.shape[2] + t + b, x.shape[3] + l + r), value, dtype=x.dtype)
    out[:, :, t:t + x.shape[2], l:l + x.shape[3]] = x
    return out


def _win2d(xp, k, stride, dilation, out_hw, channel_first):
    """Strided view of the taps of xp (N, C, Hp, Wp): (C, KH, KW, N, OH, OW)
    (``channel_first``, the im2col order) or (N, C, KH, KW, OH, OW)."""
    sn, sc, sh, sw = xp.strides
    n, c = xp.shape[:2]
    taps = (k[0], k[1])
    tstr = (dilation[0] * sh, dilation[1] * sw)
    ostr = (stride[0] * sh, stride[1] * sw)
    if channel_first:
        return as_strided(xp, (c,) + taps + (n,) + out_hw, (sc,) + tstr + (sn,) + ostr, writeable=False)
    return as_strided(xp, (n, c) + taps + out_hw, (sn, sc) + tstr + ostr, writeable=False)


def _taps_back2d(gw, shape, k, stride, dilation, out_hw, channel_first):
    """Adjoint of :func:`_win2d`: sum tap gradients into (N, C, Hp, Wp)."""
    gxp = np.zeros(shape if not channel_first else (shape[1], shape[0]) + shape[2:], dtype=gw.dtype)
    oh, ow = out_hw
    for i in range(k[0]):
        hs = i * dilation[0]
        for j in range(k[1]):
            ws = j * dilation[1]
            tap = gw[:, i, j] if channel_first else gw[:, :, i, j]
            gxp[..., hs:hs + stride[0] * (oh - 1) + 1:stride[0], ws:ws + stride[1] * (ow - 1) + 1:stride[1]] += tap
    return gxp.transpose(1, 0, 2, 3) if channel_first else gxp


def _check_window2d(name, k, stride, padding, dilation):
    for what, v in (("kernel_size", k), ("stride", stride), ("dilation", dilation)):
        if (not isinstance(v, tuple) or len(v) != 2
                or not all(is_int(a) and not isinstance(a, bool) and a >= 1 for a in v)):
            raise ShapeError(f"{name}: {what} must be a pair of positive integers, got {v!r}")
    if (not isinstance(padding, tuple) or len(padding) != 2
            or not all(isinstance(p, tuple) and len(p) == 2 and all(is_int(a) and not isinstance(a, bool) and a >= 0
                                                                    for a in p) for p in padding)):
        raise ShapeError(f"{name}: padding must be ((top, bottom), (left, right)) of non-negative integers, got "
                         f"{padding!r}")


def _conv2d(x, w, b=None, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1)):
    """Cross-correlation of ``x`` (N, C_in, H, W) with ``w`` (C_out, C_in, KH, KW)
    plus ``b`` (C_out,): (N, C_out, OH, OW), as im2col and one product."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    ohw = tuple(conv_out_len(x.shape[2 + a], w.shape[2 + a], stride[a], padding[a], dilation[a]) for a in (0, 1))
    xp = _pad_hw(x, padding)
    cols = _win2d(xp, (kh, kw), stride, dilation, ohw, True).reshape(c * kh * kw, n * ohw[0] * ohw[1])
    out = (w.reshape(o, c * kh * kw) @ cols).reshape((o, n) + ohw)
    if b is not None:
        out += b[:, None, None, None]
    return np.ascontiguousarray(out.transpose(1, 0, 2, 3)).astype(x.dtype, copy=False)


def _conv2d_shape(x, w, b=None, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1)):
    name = "conv2d"
    _check_window2d(name, (1, 1), stride, padding, dilation)
    dt = dtype_of(x)
    if dt.kind != "f":
        raise DTypeError(f"conv2d: expected a floating-point input, got input.dtype={dt}")
    for what, p in (("weight", w), ("bias", b)):
        if p is not None and dtype_of(p) != dt:
            raise DTypeError(f"conv2d: {what}.dtype={dtype_of(p)} does not match input.dtype={dt}")
    if len(x.shape) != 4:
        raise ShapeError(f"conv2d: input must be 4-D (N, C_in, H, W), got input.shape={fmt_shape(x.shape)}")
    if len(w.shape) != 4:
        raise ShapeError(f"conv2d: weight must be 4-D (C_out, C_in, KH, KW), got weight.shape={fmt_shape(w.shape)}")
    if not dims_match(x.shape[1], w.shape[1]):
        raise ShapeError(f"conv2d: input.shape[1]={x.shape[1]} (channels) does not match weight.shape[1]="
                         f"{w.shape[1]} (input.shape={fmt_shape(x.shape)}, weight.shape={fmt_shape(w.shape)})")
    if b is not None and (len(b.shape) != 1 or not dims_match(b.shape[0], w.shape[0])):
        raise ShapeError(f"conv2d: bias.shape={fmt_shape(b.shape)} does not match weight.shape[0]={w.shape[0]} "
                         f"(weight.shape={fmt_shape(w.shape)})")
    out = []
    for a in (0, 1):
        length, k = x.shape[2 + a], w.shape[2 + a]
        if k is not None and k < 1:
            raise ShapeError(f"conv2d: the kernel size must be positive, got weight.shape={fmt_shape(w.shape)}")
        if length is None or k is None:
            out.append(None)
            continue
        span = dilation[a] * (k - 1) + 1
        if length + sum(padding[a]) < span:
            raise ShapeError(f"conv2d: the padded input size {length} + {padding[a][0]} + {padding[a][1]} along "
                             f"dimension {2 + a} is smaller than the kernel span {span} (input.shape="
                             f"{fmt_shape(x.shape)}, weight.shape={fmt_shape(w.shape)})")
        out.append(conv_out_len(length, k, stride[a], padding[a], dilation[a]))
    return Aval((x.shape[0], w.shape[0]) + tuple(out), dt)


def _conv2d_vjp(g, ins, out, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1)):
    x, w = ins[0], ins[1]
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    ohw = out.shape[2:]
    g = np.broadcast_to(g, out.shape)
    m = n * ohw[0] * ohw[1]
    g2 = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(o, m)
    xp = _pad_hw(x, padding)
    cols = _win2d(xp, (kh, kw), stride, dilation, ohw, True).reshape(c * kh * kw, m)
    gw = (g2 @ cols.T).reshape(w.shape)
    gc = (w.reshape(o, c * kh * kw).T @ g2).reshape((c, kh, kw, n) + tuple(ohw))
    gxp = _taps_back2d(gc, xp.shape, (kh, kw), stride, dilation, ohw, True)
    (t, _), (l, _) = padding
    gx = np.ascontiguousarray(gxp[:, :, t:t + h, l:l + wd])
    res = (gx.astype(x.dtype, copy=False), gw.astype(w.dtype, copy=False))
    if len(ins) > 2:
        res += (None if ins[2] is None else g.sum(axis=(0, 2, 3)).astype(x.dtype, copy=False),)
    return res


conv2d_p = defprim("conv2d", _conv2d, _conv2d_shape, joint_vjp=_conv2d_vjp, batch=batch_rows(0))


def _max_pool2d_args(x, kernel_size, stride, padding, dilation, ceil_mode):
    ohw, pads = [], []
    for a in (0, 1):
        length = x.shape[2 + a]
        t = conv_out_len(length, kernel_size[a], stride[a], padding[a], dilation[a], ceil_mode)
        need = (t - 1) * stride[a] + dilation[a] * (kernel_size[a] - 1) + 1 if t else 0
        ohw.append(t)
        pads.append((padding[a][0], max(need - length - padding[a][0], padding[a][1])))
    return tuple(ohw), tuple(pads)


def _max_pool2d(x, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), ceil_mode=False):
    """Max pooling of ``x`` (N, C, H, W) over (KH, KW) windows: (N, C, OH, OW);
    implicit padding is -inf, as torch's ``max_pool2d``."""
    ohw, pads = _max_pool2d_args(x, kernel_size, stride, padding, dilation, ceil_mode)
    win = _win2d(_pad_hw(x, pads, -np.inf), kernel_size, stride, dilation, ohw, False)
    return win.max(axis=(2, 3)).astype(x.dtype, copy=False)


def _max_pool2d_shape(x, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1),
                      ceil_mode=False):
    name = "max_pool2d"
    _check_window2d(name, kernel_size, stride, padding, dilation)
    if not isinstance(ceil_mode, (bool, np.bool_)):
        raise ShapeError(f"{name}: ceil_mode must be a bool, got {ceil_mode!r}")
    if any(max(padding[a]) * 2 > kernel_size[a] for a in (0, 1)):
        raise ShapeError(f"{name}: pad should be at most half of effective kernel size, but got padding={padding} "
                         f"and kernel_size={kernel_size}")
    dt = dtype_of(x)
    if dt.kind != "f":
        raise DTypeError(f"{name}: expected a floating-point input, got input.dtype={dt}")
    if len(x.shape) != 4:
        raise ShapeError(f"{name}: input must be 4-D (N, C, H, W), got input.shape={fmt_shape(x.shape)}")
    out = []
    for a in (0, 1):
        if x.shape[2 + a] is None:
            out.append(None)
            continue
        t = conv_out_len(x.shape[2 + a], kernel_size[a], stride[a], padding[a], dilation[a], ceil_mode)
        if t < 1:
            raise ShapeError(f"{name}: input.shape={fmt_shape(x.shape)} is too small for kernel_size={kernel_size}, "
                             f"dilation={dilation}, padding={padding}: output size {t} along dimension {2 + a}")
        out.append(t)
    return Aval((x.shape[0], x.shape[1]) + tuple(out), dt)


def _max_pool2d_vjp(g, ins, out, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1),
                    ceil_mode=False):
    x = ins[0]
    ohw, pads = _max_pool2d_args(x, kernel_size, stride, padding, dilation, ceil_mode)
    xp = _pad_hw(x, pads, -np.inf)
    n, c = x.shape[:2]
    kk = kernel_size[0] * kernel_size[1]
    win = _win2d(xp, kernel_size, stride, dilation, ohw, False).reshape((n, c, kk) + ohw)
    # the first maximum of each window (row-major over the taps) takes the gradient, as torch's argmax
    idx = win.argmax(axis=2)
    gw = np.zeros((n, c, kk) + ohw, dtype=x.dtype)
    np.put_along_axis(gw, idx[:, :, None], np.broadcast_to(g, out.shape)[:, :, None], axis=2)
    gw = gw.reshape((n, c) + tuple(kernel_size) + ohw)
    gxp = _taps_back2d(gw, xp.shape, kernel_size, stride, dilation, ohw, False)
    (t, _), (l, _) = pads
    return (np.ascontiguousarray(gxp[:, :, t:t + x.shape[2], l:l + x.shape[3]]).astype(x.dtype, copy=False),)


max_pool2d_p = defprim("max_pool2d", _max_pool2d, _max_pool2d_shape, joint_vjp=_max_pool2d_vjp,
                       batch=batch_rows(0))
__all__ += ["conv2d_p", "max_pool2d_p"]
