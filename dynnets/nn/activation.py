"""Activation modules (``torch.nn.modules.activation``): each applies its
function of :mod:`dynnets.nn.functional` (or :mod:`dynnets.autograd.ops`) with
the arguments torch's module takes."""
from __future__ import annotations

from ..autograd import ops
from . import functional as F
from .module import Module

__all__ = ["Tanh", "ReLU", "Sigmoid", "GELU", "LeakyReLU", "Softmax", "LogSoftmax", "Softplus", "ELU", "SELU", "SiLU",
           "Mish", "Hardtanh", "ReLU6", "Softsign", "LogSigmoid"]


class Tanh(Module):
    """Elementwise tanh."""

    def forward(self, x):
        return ops.tanh(x)


class ReLU(Module):
    """Elementwise max(x, 0) (as ``torch.nn.ReLU``). ``inplace=True`` writes
    the result into the input and returns it, as torch (see
    :func:`dynnets.nn.functional.relu`)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)

    def forward(self, x):
        return F.relu(x, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """Elementwise logistic function 1 / (1 + exp(-x))."""

    def forward(self, x):
        return ops.sigmoid(x)


class GELU(Module):
    """GELU ``x * Phi(x)`` (``approximate='tanh'``: its tanh approximation), as ``torch.nn.GELU``."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return ops.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``, as ``torch.nn.LeakyReLU``.
    ``inplace=True`` writes the result into the input and returns it, as torch."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = float(negative_slope)
        self.inplace = bool(inplace)

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softmax(Module):
    """Softmax along ``dim`` (as ``torch.nn.Softmax``; without ``dim``,
    torch's deprecated implicit choice, with its warning)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim`` (as ``torch.nn.LogSoftmax``)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class _Activation(Module):
    """A module applying ``F.<fn>`` with its keyword arguments, as torch's
    activation modules (their ``__init__`` arguments are ``fn``'s)."""

    fn = None
    args = ()

    def forward(self, input):
        return type(self).fn(input, *(getattr(self, a) for a in self.args))

    def extra_repr(self):
        return ", ".join(f"{a}={getattr(self, a)!r}" for a in self.args if a != "inplace" or self.inplace)


class Softplus(_Activation):
    """``F.softplus(input, beta, threshold)`` as ``torch.nn.Softplus``."""
    fn, args = staticmethod(F.softplus), ("beta", "threshold")

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)


class ELU(_Activation):
    """``F.elu(input, alpha)`` as ``torch.nn.ELU``."""
    fn, args = staticmethod(F.elu), ("alpha", "inplace")

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)


class SELU(_Activation):
    """``F.selu`` as ``torch.nn.SELU``."""
    fn, args = staticmethod(F.selu), ("inplace",)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)


class SiLU(_Activation):
    """``F.silu`` (``x * sigmoid(x)``) as ``torch.nn.SiLU``."""
    fn, args = staticmethod(F.silu), ("inplace",)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)


class Mish(_Activation):
    """``F.mish`` as ``torch.nn.Mish``."""
    fn, args = staticmethod(F.mish), ("inplace",)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)


class Hardtanh(_Activation):
    """``F.hardtanh(input, min_val, max_val)`` as ``torch.nn.Hardtanh`` (its
    deprecated ``min_value`` / ``max_value`` override the bounds, with a
    warning, as torch's)."""
    fn, args = staticmethod(F.hardtanh), ("min_val", "max_val", "inplace")

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        import warnings
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        if not max_val > min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = float(min_val), float(max_val), bool(inplace)


class ReLU6(Hardtanh):
    """``F.relu6`` (``hardtanh(input, 0, 6)``) as ``torch.nn.ReLU6``."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Softsign(_Activation):
    """``F.softsign`` as ``torch.nn.Softsign``."""
    fn = staticmethod(F.softsign)

    def __init__(self):
        super().__init__()


class LogSigmoid(_Activation):
    """``F.logsigmoid`` as ``torch.nn.LogSigmoid``."""
    fn = staticmethod(F.logsigmoid)

    def __init__(self):
        super().__init__()
