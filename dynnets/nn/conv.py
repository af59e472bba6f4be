"""1-D convolution and pooling modules with PyTorch's names, arguments and
weight layout: ``Conv1d``, ``MaxPool1d``, ``AvgPool1d``,
``AdaptiveMaxPool1d``, ``AdaptiveAvgPool1d`` (their functional forms are in
:mod:`dynnets.nn.functional_conv`, re-exported by :mod:`dynnets.nn.functional`).
"""
from __future__ import annotations

import math

from .functional_conv import (adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d, conv1d, conv2d, conv2d_padding,
                              conv_padding, max_pool1d, max_pool2d, pair, single)
from .module import (Module, Parameter, as_generator, check_device, check_float_input, float_dtype, positive_int,
                     uniform_)

__all__ = ["Conv1d", "MaxPool1d", "AvgPool1d", "AdaptiveMaxPool1d", "AdaptiveAvgPool1d"]


class Conv1d(Module):
    """1-D convolution, as ``torch.nn.Conv1d``.

    Parameters
    ----------
    in_channels, out_channels, kernel_size : int
    stride, dilation : int
    padding : int, 'same' or 'valid'
    groups : 1
    bias : bool
    padding_mode : 'zeros'
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    rng : int, Generator or None (keyword-only)
        Source of the initial weights (weight drawn before bias).

    Attributes
    ----------
    weight : Parameter, shape (out_channels, in_channels, kernel_size)
        U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels * kernel_size
        (torch's ``kaiming_uniform_(a=sqrt(5))``).
    bias : Parameter, shape (out_channels,), or None
        U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    Shapes: input (N, C_in, L) or (C_in, L) -> (N, C_out, T) or (C_out, T).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, *, rng=None):
        super().__init__()
        op = "Conv1d"
        self.in_channels = positive_int(op, "in_channels", in_channels)
        self.out_channels = positive_int(op, "out_channels", out_channels)
        self.kernel_size = (single(op, "kernel_size", kernel_size),)
        self.stride = (single(op, "stride", stride),)
        self.dilation = (single(op, "dilation", dilation),)
        if groups != 1:
            raise NotImplementedError(f"{op}: groups={groups!r} is not supported (only groups=1)")
        if padding_mode != "zeros":
            raise NotImplementedError(f"{op}: padding_mode={padding_mode!r} is not supported (only 'zeros'; pad "
                                      f"with F.pad first)")
        self.groups = 1
        self.padding_mode = padding_mode
        conv_padding(op, padding, self.kernel_size[0], self.stride[0], self.dilation[0])
        self.padding = padding if isinstance(padding, str) else (single(op, "padding", padding, allow_zero=True),)
        check_device(op, device)
        dt = float_dtype(op, dtype)
        gen = as_generator(rng)
        bound = 1.0 / math.sqrt(self.in_channels * self.kernel_size[0])
        self.weight = Parameter(uniform_(gen, (self.out_channels, self.in_channels, self.kernel_size[0]), bound, dt))
        self.bias = Parameter(uniform_(gen, (self.out_channels,), bound, dt)) if bias else None

    def forward(self, input):
        w = self.weight
        if getattr(input, "dtype", None) is not w.dtype:
            input = check_float_input("Conv1d", input, w)
        pad = self.padding if isinstance(self.padding, str) else self.padding[0]
        return conv1d(input, w, self.bias, self.stride[0], pad, self.dilation[0])

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,):
            s += f", padding={self.padding!r}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.bias is None:
            s += ", bias=False"
        return s


class _MaxPoolNd(Module):
    """torch's ``_MaxPoolNd``: the options of max pooling; ``_pool`` is the functional form."""

    _pool = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        if return_indices:
            raise NotImplementedError(f"{type(self).__name__}: return_indices=True is not supported")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = False
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return self._pool(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max pooling over the last axis, as ``torch.nn.MaxPool1d`` (see :func:`max_pool1d`)."""

    _pool = staticmethod(max_pool1d)


class AvgPool1d(Module):
    """Average pooling over the last axis, as ``torch.nn.AvgPool1d`` (see :func:`avg_pool1d`)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = (single("AvgPool1d", "kernel_size", kernel_size),)
        self.stride = (single("AvgPool1d", "stride", stride if stride is not None else kernel_size),)
        self.padding = (single("AvgPool1d", "padding", padding, allow_zero=True),)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return avg_pool1d(input, self.kernel_size[0], self.stride[0], self.padding[0], self.ceil_mode,
                          self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveMaxPool1d(Module):
    """Max over ``output_size`` adaptive windows, as ``torch.nn.AdaptiveMaxPool1d``;
    ``AdaptiveMaxPool1d(1)`` is max-over-time pooling."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        if return_indices:
            raise NotImplementedError("AdaptiveMaxPool1d: return_indices=True is not supported")
        self.output_size = output_size
        self.return_indices = False

    def forward(self, input):
        return adaptive_max_pool1d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(Module):
    """Mean over ``output_size`` adaptive windows, as ``torch.nn.AdaptiveAvgPool1d``."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class Conv2d(Module):
    """2-D convolution, as ``torch.nn.Conv2d`` (see :func:`conv2d`): weight
    (out_channels, in_channels, KH, KW) and bias (out_channels,), both
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels KH KW; ``groups=1``
    and ``padding_mode='zeros'`` only. ``rng=`` (keyword-only) draws them."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, *, rng=None):
        super().__init__()
        op = "Conv2d"
        self.in_channels = positive_int(op, "in_channels", in_channels)
        self.out_channels = positive_int(op, "out_channels", out_channels)
        self.kernel_size = pair(op, "kernel_size", kernel_size)
        self.stride = pair(op, "stride", stride)
        self.dilation = pair(op, "dilation", dilation)
        if groups != 1:
            raise NotImplementedError(f"{op}: groups={groups!r} is not supported (only groups=1)")
        if padding_mode != "zeros":
            raise NotImplementedError(f"{op}: padding_mode={padding_mode!r} is not supported (only 'zeros')")
        self.groups = 1
        self.padding_mode = padding_mode
        conv2d_padding(op, padding, self.kernel_size, self.stride, self.dilation)
        self.padding = padding if isinstance(padding, str) else pair(op, "padding", padding, allow_zero=True)
        check_device(op, device)
        dt = float_dtype(op, dtype)
        gen = as_generator(rng)
        bound = 1.0 / math.sqrt(self.in_channels * self.kernel_size[0] * self.kernel_size[1])
        self.weight = Parameter(uniform_(gen, (self.out_channels, self.in_channels) + self.kernel_size, bound, dt))
        self.bias = Parameter(uniform_(gen, (self.out_channels,), bound, dt)) if bias else None

    def forward(self, input):
        w = self.weight
        if getattr(input, "dtype", None) is not w.dtype:
            input = check_float_input("Conv2d", input, w)
        return conv2d(input, w, self.bias, self.stride, self.padding, self.dilation)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding!r}, dilation={self.dilation}, bias={self.bias is not None}")


class MaxPool2d(_MaxPoolNd):
    """Max pooling over (KH, KW) windows, as ``torch.nn.MaxPool2d`` (see :func:`max_pool2d`)."""

    _pool = staticmethod(max_pool2d)
