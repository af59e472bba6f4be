"""``dynnets.nn.init``: torch's parameter initialisers, filling a tensor in place.

Each function writes new values into the tensor's own array (so a module, an
optimizer or a static graph holding the Parameter sees them) through the
in-place path of ``Tensor.copy_`` under ``no_grad``, as torch's run under
``no_grad`` and bump the version counter: nothing is recorded for autograd,
and a value a pending backward saved that an initialiser overwrites makes
that backward raise instead of giving a silently wrong gradient. It returns
the tensor. The random ones draw from ``generator`` (a ``numpy.random.Generator``,
e.g. :class:`dynnets.Generator`), else from :data:`dynnets.default_generator`
(seeded by :func:`dynnets.manual_seed`): the distributions and the fan rules
are torch's, the numbers numpy's. Values are drawn in float64 and rounded to
the tensor's dtype once.

Fans (torch's ``_calculate_fan_in_and_fan_out``): a weight of shape
``(out, in, *kernel)`` has ``fan_in = in * prod(kernel)`` and ``fan_out = out
* prod(kernel)``, so a Linear weight ``(out, in)``, an LSTM's stacked
``weight_ih`` ``(4 * hidden, input)`` and a Conv2d weight ``(out, in, kh,
kw)`` get torch's bounds.

Typical use, with ``Module.apply`` or a walk over the modules::

    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)

The names without the trailing underscore (``xavier_uniform``...) are torch's
deprecated aliases, with its ``FutureWarning``.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd import Tensor, no_grad
from ..random import generator as _as_generator

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
           "uniform", "normal", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal",
           "orthogonal"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (torch's table).

    ======================  ==============================
    nonlinearity            gain
    ======================  ==============================
    linear, conv*, sigmoid  1
    tanh                    5/3
    relu                    sqrt(2)
    leaky_relu              sqrt(2 / (1 + slope^2)) (slope ``param``, default 0.01)
    selu                    3/4
    ======================  ==============================
    """
    if nonlinearity in _LINEAR:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity}")


def _array(tensor, fn, floating=False):
    """The numpy array the values go into (the tensor's own, written in place)."""
    if isinstance(tensor, np.ndarray):
        arr = tensor
    elif isinstance(tensor, Tensor):
        arr = tensor.numpy()
    else:
        raise TypeError(f"{fn}: expected a Tensor, got {type(tensor).__name__}")
    if not arr.flags.writeable:
        raise RuntimeError(f"{fn}: the tensor of shape {arr.shape} is read-only (a view of a broadcast array, or an "
                           f"input a pending autobatch op reads); cannot fill it in place")
    if floating and arr.dtype.kind != "f":
        raise TypeError(f"{fn}: expected a floating-point tensor, got dtype {arr.dtype}")
    return arr


def _fill(tensor, arr, values):
    """Write ``values`` (broadcast, cast to the dtype) into ``tensor``: a
    Tensor through ``copy_`` under no_grad (logged as an in-place write), a
    numpy array directly."""
    if isinstance(tensor, Tensor):
        with no_grad():
            tensor.copy_(values)
    else:
        arr[...] = values
    return tensor


def _fans(shape, fn):
    if len(shape) < 2:
        raise ValueError(f"{fn}: fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(shape {tuple(shape)})")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _fan(shape, mode, fn):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{fn}: mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(shape, fn)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with draws from U(a, b)."""
    arr = _array(tensor, "uniform_", floating=True)
    if a > b:
        raise ValueError(f"uniform_: expects a [from, to) range, but found from={a} > to={b}")
    return _fill(tensor, arr, _as_generator(generator).uniform(a, b, arr.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with draws from N(mean, std^2)."""
    arr = _array(tensor, "normal_", floating=True)
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0.0, got std={std}")
    return _fill(tensor, arr, _as_generator(generator).normal(mean, std, arr.shape))


# Wichura (1988), algorithm AS241 (PPND16): the standard normal quantile to
# about 1e-16 relative, the rational functions CPython's statistics.NormalDist uses
_AS241_CENTRAL = ((2509.0809287301226727, 33430.575583588128105, 67265.770927008700853, 45921.953931549871457,
                   13731.693765509461125, 1971.5909503065514427, 133.14166789178437745, 3.387132872796366608),
                  (5226.495278852545561, 28729.085735721942674, 39307.89580009271061, 21213.794301586595867,
                   5394.1960214247511077, 687.1870074920579083, 42.313330701600911252, 1.0))
_AS241_INNER = ((7.7454501427834140764e-4, 0.0227238449892691845833, 0.24178072517745061177, 1.27045825245236838258,
                 3.64784832476320460504, 5.7694972214606914055, 4.6303378461565452959, 1.42343711074968357734),
                (1.05075007164441684324e-9, 5.475938084995344946e-4, 0.0151986665636164571966,
                 0.14810397642748007459, 0.68976733498510000455, 1.6763848301838038494, 2.05319162663775882187, 1.0))
_AS241_TAIL = ((2.01033439929228813265e-7, 2.71155556874348757815e-5, 0.0012426609473880784386,
                0.026532189526576123093, 0.29656057182850489123, 1.7848265399172913358, 5.4637849111641143699,
                6.6579046435011037772),
               (2.04426310338993978564e-15, 1.4215117583164458887e-7, 1.8463183175100546818e-5,
                7.868691311456132591e-4, 0.0148753612908506148525, 0.13692988092273580531, 0.59983220655588793769,
                1.0))


def _horner(coefs, r):
    out = np.full_like(r, coefs[0])
    for c in coefs[1:]:
        out = out * r + c
    return out


def _ndtri(p):
    """The standard normal quantile Phi^-1(p), elementwise (p in [0, 1]; +-inf at the ends)."""
    p = np.asarray(p, dtype=np.float64)
    q = p - 0.5
    central = np.abs(q) <= 0.425
    out = np.empty_like(p)
    r = 0.180625 - q[central] ** 2
    num, den = _AS241_CENTRAL
    out[central] = q[central] * _horner(num, r) / _horner(den, r)
    tail = ~central
    qt = q[tail]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(-np.log(np.where(qt <= 0.0, p[tail], 1.0 - p[tail])))
        inner = r <= 5.0
        x = np.empty_like(r)
        for mask, shift, (num, den) in ((inner, 1.6, _AS241_INNER), (~inner, 5.0, _AS241_TAIL)):
            rr = r[mask] - shift
            x[mask] = _horner(num, rr) / _horner(den, rr)
    x[np.isinf(r)] = np.inf         # p = 0 or 1: the rational function gives inf/inf
    out[tail] = np.where(qt < 0.0, -x, x)
    return out


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with draws from N(mean, std^2) truncated to [a, b] (torch's
    inverse-CDF method: uniform draws between the CDF's values at ``a`` and
    ``b``, mapped through the normal quantile, clipped to [a, b])."""
    arr = _array(tensor, "trunc_normal_", floating=True)
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("trunc_normal_: mean is more than 2 std from [a, b]; the distribution of values may be "
                      "incorrect", stacklevel=2)
    lo, hi = _norm_cdf((a - mean) / std), _norm_cdf((b - mean) / std)
    u = _as_generator(generator).uniform(lo, hi, arr.shape)
    return _fill(tensor, arr, np.clip(mean + std * _ndtri(u), a, b))


def constant_(tensor, val):
    """Fill with ``val``."""
    return _fill(tensor, _array(tensor, "constant_"), val)


def ones_(tensor):
    """Fill with 1."""
    return _fill(tensor, _array(tensor, "ones_"), 1)


def zeros_(tensor):
    """Fill with 0."""
    return _fill(tensor, _array(tensor, "zeros_"), 0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity (ones on the diagonal of a rectangle too)."""
    arr = _array(tensor, "eye_")
    if arr.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape {arr.shape}")
    return _fill(tensor, arr, np.eye(*arr.shape))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot & Bengio (2010): U(-a, a), ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    arr = _array(tensor, "xavier_uniform_", floating=True)
    fan_in, fan_out = _fans(arr.shape, "xavier_uniform_")
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill(tensor, arr, _as_generator(generator).uniform(-bound, bound, arr.shape))


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot & Bengio (2010): N(0, std^2), ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    arr = _array(tensor, "xavier_normal_", floating=True)
    fan_in, fan_out = _fans(arr.shape, "xavier_normal_")
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill(tensor, arr, _as_generator(generator).normal(0.0, std, arr.shape))


def _kaiming_std(arr, a, mode, nonlinearity, fn):
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(arr.shape, mode, fn))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He et al. (2015): U(-b, b), ``b = gain * sqrt(3 / fan)`` with ``fan``
    the ``mode`` fan and ``gain = calculate_gain(nonlinearity, a)``."""
    arr = _array(tensor, "kaiming_uniform_", floating=True)
    if arr.size == 0:
        warnings.warn("kaiming_uniform_: initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(arr, a, mode, nonlinearity, "kaiming_uniform_")
    return _fill(tensor, arr, _as_generator(generator).uniform(-bound, bound, arr.shape))


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He et al. (2015): N(0, std^2), ``std = gain / sqrt(fan)`` (see :func:`kaiming_uniform_`)."""
    arr = _array(tensor, "kaiming_normal_", floating=True)
    if arr.size == 0:
        warnings.warn("kaiming_normal_: initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = _kaiming_std(arr, a, mode, nonlinearity, "kaiming_normal_")
    return _fill(tensor, arr, _as_generator(generator).normal(0.0, std, arr.shape))


def orthogonal_(tensor, gain=1, generator=None):
    """Saxe et al. (2013): a (semi-)orthogonal matrix times ``gain``.

    The tensor is seen as ``(shape[0], numel / shape[0])``; its rows (or
    columns, whichever are fewer) are orthonormal: the Q of a QR
    decomposition of a standard normal matrix, with the signs of R's
    diagonal folded in so that Q is uniformly (Haar) distributed.
    """
    arr = _array(tensor, "orthogonal_", floating=True)
    if arr.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape {arr.shape}")
    if arr.size == 0:
        return tensor
    rows = arr.shape[0]
    cols = arr.size // rows
    flat = _as_generator(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, arr, (gain * q).reshape(arr.shape))


def _deprecated(new):
    old = new.__name__[:-1]

    def alias(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning,
                      stacklevel=2)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated alias of :func:`{new.__name__}` (as torch's, with its ``FutureWarning``)."
    return alias


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
