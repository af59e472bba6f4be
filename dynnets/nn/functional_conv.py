"""1-D convolution and pooling under PyTorch's functional names
(``conv1d``, ``max_pool1d``, ``avg_pool1d``, ``adaptive_max_pool1d``,
``adaptive_avg_pool1d``; re-exported by :mod:`dynnets.nn.functional`, their
modules are in :mod:`dynnets.nn.conv`). Inputs are (N, C, L) or unbatched
(C, L); the convolution and the pooling windows are the primitives
``conv1d_p`` and ``pool1d_p`` (:mod:`dynnets.autograd.primitives.conv`), so
they run eagerly, in static graphs, traced and under ``dynnets.autobatch()``.
"""
from __future__ import annotations

import numpy as np

from ..autograd import ops
from ..autograd import primitives as P
from ..autograd.engine import bind
from ..autograd.values import is_interpreted

__all__ = ["conv1d", "max_pool1d", "avg_pool1d", "adaptive_max_pool1d", "adaptive_avg_pool1d", "conv_padding",
           "single"]


def single(op, name, v, allow_zero=False):
    """An int or a 1-tuple of one (torch's ``_single``), checked."""
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < (0 if allow_zero else 1):
        want = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{op}: {name} must be {want} integer, got {v!r}")
    return int(v)


def conv_padding(op, padding, kernel_size, stride, dilation):
    """(left, right) of torch's ``padding``: an int or 1-tuple (both sides),
    'valid' (none) or 'same' (output length = input length; stride 1 only, as
    torch; an odd total puts the extra element on the right, as torch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0
        if padding == "same":
            if stride != 1:
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={stride}), "
                                 f"as in torch")
            total = dilation * (kernel_size - 1)
            return total // 2, total - total // 2
        raise ValueError(f"{op}: padding must be an int, a 1-tuple, 'same' or 'valid', got {padding!r}")
    p = single(op, "padding", padding, allow_zero=True)
    return p, p


def _batched(op, input, kind="input"):
    """(input as (N, C, L), whether it was unbatched (C, L))."""
    nd = len(input.shape)
    if nd == 2:
        return ops.unsqueeze(input, 0), True
    if nd != 3:
        raise P.ShapeError(f"{op}: expected a 2-D (unbatched) or 3-D (batched) {kind}, got input.shape="
                           f"{tuple(input.shape)}")
    return input, False


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation, as ``torch.nn.functional.conv1d``.

    Parameters
    ----------
    input : Tensor, shape (N, C_in, L) or (C_in, L)
    weight : Tensor, shape (C_out, C_in, K)
    bias : Tensor, shape (C_out,), or None
    stride, dilation : int or 1-tuple
    padding : int, 1-tuple, 'same' or 'valid'
        Zeros on both sides.
    groups : 1
        Grouped convolutions are not implemented (raises).

    Returns
    -------
    Tensor, shape (N, C_out, T) (or (C_out, T)) with
    ``T = (L + 2 padding - dilation (K - 1) - 1) // stride + 1``.
    """
    op = "conv1d"
    if groups != 1:
        raise NotImplementedError(f"{op}: groups={groups!r} is not supported (only groups=1)")
    stride = single(op, "stride", stride)
    dilation = single(op, "dilation", dilation)
    if len(weight.shape) != 3:
        raise P.ShapeError(f"{op}: weight must be 3-D (C_out, C_in, K), got weight.shape={tuple(weight.shape)}")
    pads = conv_padding(op, padding, weight.shape[2], stride, dilation)
    x, unbatched = _batched(op, input)
    args = (x, weight) if bias is None else (x, weight, bias)
    out = bind(P.conv1d_p, *args, stride=stride, padding=pads, dilation=dilation)
    return ops.squeeze(out, 0) if unbatched else out


def _pool(op, mode, input, kernel_size, stride, padding, dilation, ceil_mode):
    k = single(op, "kernel_size", kernel_size)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else \
        single(op, "stride", stride)
    p = single(op, "padding", padding, allow_zero=True)
    d = single(op, "dilation", dilation)
    x, unbatched = _batched(op, input)
    out = bind(P.pool1d_p, x, kernel_size=k, stride=s, padding=(p, p), dilation=d, ceil_mode=bool(ceil_mode),
               mode=mode)
    return ops.squeeze(out, 0) if unbatched else out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max pooling over windows of the last axis, as
    ``torch.nn.functional.max_pool1d`` (``stride`` defaults to
    ``kernel_size``; implicit padding is -inf). Input (N, C, L) or (C, L)."""
    if return_indices:
        raise NotImplementedError("max_pool1d: return_indices=True is not supported (take ops.argmax over the "
                                  "windows instead)")
    return _pool("max_pool1d", "max", input, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Average pooling over windows of the last axis, as
    ``torch.nn.functional.avg_pool1d`` (``count_include_pad``: the zero
    padding counts in the divisor). Input (N, C, L) or (C, L)."""
    return _pool("avg_pool1d", "avg" if count_include_pad else "avg_exclude_pad", input, kernel_size, stride,
                 padding, 1, ceil_mode)


def _adaptive(op, input, output_size, reduce):
    n_out = single(op, "output_size", output_size)
    x, unbatched = _batched(op, input)
    length = x.shape[2]
    if length is None:
        if n_out != 1:
            raise P.ShapeError(f"{op}: output_size={n_out} needs a known input length, got input.shape="
                               f"{tuple(input.shape)} (output_size=1 works with any length)")
        out = reduce(x, 2)
    elif n_out == 1 and length and reduce is _max_keep:
        # one window over the whole length: the pooling primitive (the first maximum takes the gradient, as torch)
        out = bind(P.pool1d_p, x, kernel_size=length, stride=1, padding=(0, 0), dilation=1, ceil_mode=False,
                   mode="max")
    else:
        # torch's windows: [floor(i L / n), ceil((i + 1) L / n))
        parts = [reduce(x[:, :, (i * length) // n_out:-(-(i + 1) * length // n_out)], 2) for i in range(n_out)]
        out = ops.concat(parts, 2)
    return ops.squeeze(out, 0) if unbatched else out


def _max_keep(x, d):
    if is_interpreted(x):
        return ops.max(x, axis=d, keepdims=True)
    return ops.max(x, d, keepdim=True).values


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over ``output_size`` adaptive windows of the last axis, as
    ``torch.nn.functional.adaptive_max_pool1d``; ``output_size=1`` is
    max-over-time pooling (Kim 2014), for any length."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool1d: return_indices=True is not supported")
    return _adaptive("adaptive_max_pool1d", input, output_size, _max_keep)


def adaptive_avg_pool1d(input, output_size):
    """Mean over ``output_size`` adaptive windows of the last axis, as
    ``torch.nn.functional.adaptive_avg_pool1d``."""
    return _adaptive("adaptive_avg_pool1d", input, output_size, lambda x, d: ops.mean(x, d, keepdim=True))




# --- 2-D: conv2d and max_pool2d -----------------------------------------------------

def pair(op, name, v, allow_zero=False):
    """An int (both dimensions) or a pair of ints (torch's ``_pair``), checked."""
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(vals) != 2:
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    return tuple(single(op, name, a, allow_zero) for a in vals)


def conv2d_padding(op, padding, kernel_size, stride, dilation):
    """((top, bottom), (left, right)) of torch's ``padding``: an int or pair
    (both sides), 'valid' or 'same' (stride 1; an odd total puts the extra row
    or column at the end, as torch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={stride}), "
                                 f"as in torch")
            totals = [d * (k - 1) for d, k in zip(dilation, kernel_size)]
            return tuple((t // 2, t - t // 2) for t in totals)
        raise ValueError(f"{op}: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
    ph, pw = pair(op, "padding", padding, allow_zero=True)
    return (ph, ph), (pw, pw)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation, as ``torch.nn.functional.conv2d``: input
    (N, C_in, H, W) or (C_in, H, W), weight (C_out, C_in, KH, KW), bias
    (C_out,); ``stride``, ``padding`` (or 'same' / 'valid'), ``dilation`` ints
    or pairs; ``groups=1`` only. Returns (N, C_out, OH, OW)."""
    op = "conv2d"
    if groups != 1:
        raise NotImplementedError(f"{op}: groups={groups!r} is not supported (only groups=1)")
    stride, dilation = pair(op, "stride", stride), pair(op, "dilation", dilation)
    if len(weight.shape) != 4:
        raise P.ShapeError(f"{op}: weight must be 4-D (C_out, C_in, KH, KW), got weight.shape={tuple(weight.shape)}")
    pads = conv2d_padding(op, padding, tuple(weight.shape[2:]), stride, dilation)
    nd = len(input.shape)
    if nd not in (3, 4):
        raise P.ShapeError(f"{op}: expected a 3-D (unbatched) or 4-D (batched) input, got input.shape="
                           f"{tuple(input.shape)}")
    x = ops.unsqueeze(input, 0) if nd == 3 else input
    args = (x, weight) if bias is None else (x, weight, bias)
    out = bind(P.conv2d_p, *args, stride=stride, padding=pads, dilation=dilation)
    return ops.squeeze(out, 0) if nd == 3 else out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max pooling over (KH, KW) windows, as ``torch.nn.functional.max_pool2d``
    (``stride`` defaults to ``kernel_size``; implicit padding -inf). Input
    (N, C, H, W) or (C, H, W)."""
    op = "max_pool2d"
    if return_indices:
        raise NotImplementedError(f"{op}: return_indices=True is not supported")
    k = pair(op, "kernel_size", kernel_size)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else pair(op, "stride", stride)
    ph, pw = pair(op, "padding", padding, allow_zero=True)
    nd = len(input.shape)
    if nd not in (3, 4):
        raise P.ShapeError(f"{op}: expected a 3-D (unbatched) or 4-D (batched) input, got input.shape="
                           f"{tuple(input.shape)}")
    x = ops.unsqueeze(input, 0) if nd == 3 else input
    out = bind(P.max_pool2d_p, x, kernel_size=k, stride=s, padding=((ph, ph), (pw, pw)),
               dilation=pair(op, "dilation", dilation), ceil_mode=bool(ceil_mode))
    return ops.squeeze(out, 0) if nd == 3 else out


__all__ += ["conv2d", "max_pool2d", "pair", "conv2d_padding"]
