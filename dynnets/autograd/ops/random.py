"""torch's random sampling on eager tensors: draws into new tensors
(``multinomial``, ``bernoulli``, ``normal``) and into a tensor in place
(``normal_``, ``uniform_``, ``bernoulli_``, ``exponential_``, declared as
:class:`~dynnets.autograd.tensor.Tensor`'s methods), from ``generator=`` (a
:class:`dynnets.Generator` or any ``numpy.random.Generator``) or the default
generator that :func:`dynnets.manual_seed` seeds: numpy's streams, not
torch's numbers, so only the distributions match torch's. A draw is not
differentiable; a static graph draws with :mod:`dynnets.static.random`'s ops.
"""
from __future__ import annotations

import numpy as np

from .. import primitives as P
from ..backprop import write_inplace
from ..engine import wrap_array
from ..primitives.core import DTypeError, ShapeError
from ..values import is_interpreted
from ...random import generator as _generator
from .arguments import shape_tuple

__all__ = ["multinomial", "bernoulli", "normal", "normal_", "uniform_", "bernoulli_", "exponential_"]


def _is_tensor(x):
    return getattr(type(x), "_is_tensor", False)


def _concrete(op, name, x):
    """The float array of a tensor argument of a sampling function."""
    if is_interpreted(x):
        raise TypeError(f"{op}: {name} must be an eager tensor (a static graph draws with dynnets.static.random "
                        f"ops), got a static value")
    if not _is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    a = x.numpy()
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating-point {name}, got dtype {a.dtype}")
    return np.asarray(a)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Category indices drawn with the weights of each row of ``input`` (as
    ``torch.multinomial``): rows need not sum to 1; without ``replacement``
    each row draws ``num_samples`` distinct categories (at most its number of
    non-zero weights).

    Shapes: ``input`` (C,) or (N, C) -> int64 (num_samples,) or (N, num_samples).
    """
    w = _concrete("multinomial", "input", input)
    if w.ndim not in (1, 2):
        raise ShapeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {w.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive integer, got {num_samples!r}")
    rows = w.reshape(-1, w.shape[-1]).astype(np.float64)
    n = rows.shape[1]
    if not replacement and num_samples > n:
        raise ValueError(f"multinomial: cannot sample n_sample={num_samples} > prob_dist.size(-1)={n} samples "
                         f"without replacement")
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise ValueError("multinomial: probability tensor contains either inf, nan or element < 0")
    totals = rows.sum(axis=1)
    if np.any(totals <= 0):
        raise ValueError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and np.any((rows > 0).sum(axis=1) < num_samples):
        raise ValueError(f"multinomial: invalid multinomial distribution (with replacement=False, not enough "
                         f"non-negative category to sample): num_samples={num_samples}")
    rng = _generator(generator)
    out = np.stack([rng.choice(n, size=int(num_samples), replace=bool(replacement), p=r / t)
                    for r, t in zip(rows, totals)]).astype(np.int64)
    return wrap_array(out.reshape(w.shape[:-1] + (int(num_samples),)))


def _probabilities(op, p):
    if np.any(~((p >= 0) & (p <= 1))):
        raise ValueError(f"{op}: all elements of input should be between 0 and 1")
    return p


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or the number ``p``), else 0, in
    ``input``'s shape and dtype, as ``torch.bernoulli``."""
    x = _concrete("bernoulli", "input", input)
    probs = _probabilities("bernoulli", x if p is None else np.full(x.shape, _prob("bernoulli", p)))
    return wrap_array((_generator(generator).random(x.shape) < probs).astype(x.dtype))


def _prob(op, p):
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) or not 0 <= p <= 1:
        raise ValueError(f"{op}: p must be a number in [0, 1], got {p!r}")
    return float(p)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False):
    """Draws from N(mean, std^2), as ``torch.normal``: ``mean`` and ``std``
    tensors (broadcast together) or numbers, the result in the tensors'
    float dtype; two numbers need ``size`` (float32 by default, or
    ``dtype``). The result is a draw, not differentiable: for a
    reparametrised sample write ``mean + std * randn_like(mean)``."""
    tm, ts = _is_tensor(mean), _is_tensor(std)
    if not (tm or ts):
        if size is None:
            raise TypeError("normal: with a number mean and a number std, size is required "
                            "(normal(mean, std, size))")
        dt = np.dtype(np.float32 if dtype is None else dtype)
        if dt.kind != "f":
            raise DTypeError(f"normal: dtype must be a floating-point type, got {dt}")
        if std < 0:
            raise ValueError(f"normal: expects std >= 0.0, but found std {std}")
        arr = _generator(generator).normal(mean, std, shape_tuple((size,)) if isinstance(size, int) else
                                           shape_tuple(size))
        return wrap_array(arr.astype(dt), requires_grad=requires_grad)
    if size is not None:
        raise TypeError("normal: size is only taken with a number mean and a number std")
    m = _concrete("normal", "mean", mean) if tm else np.asarray(mean, dtype=np.float64)
    s = _concrete("normal", "std", std) if ts else np.asarray(std, dtype=np.float64)
    if np.any(s < 0):
        raise ValueError("normal: expects all elements of std >= 0.0")
    dt = np.result_type(*[a.dtype for a, t in ((m, tm), (s, ts)) if t]) if dtype is None else np.dtype(dtype)
    shape = np.broadcast_shapes(m.shape, s.shape)
    arr = _generator(generator).standard_normal(shape) * s + m
    return wrap_array(arr.astype(dt), requires_grad=requires_grad)


def bernoulli_(input, p=0.5, *, generator=None):
    """Fill in place with 1 with probability ``p`` (a number, or a tensor
    broadcast to this one's shape), else 0, as ``torch.Tensor.bernoulli_``."""
    shape = _float_shape("bernoulli_", input)
    if _is_tensor(p):
        probs = np.broadcast_to(_probabilities("bernoulli_", _concrete("bernoulli_", "p", p)), shape)
    else:
        probs = _prob("bernoulli_", p)
    draws = _generator(generator).random(shape) < probs
    return _fill("bernoulli_", input, draws)


def exponential_(input, lambd=1.0, *, generator=None):
    """Fill in place with draws from the exponential distribution of rate
    ``lambd`` (mean ``1/lambd``), as ``torch.Tensor.exponential_``."""
    if isinstance(lambd, bool) or not isinstance(lambd, (int, float, np.integer, np.floating)) or not lambd > 0:
        raise ValueError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    shape = _float_shape("exponential_", input)
    draws = _generator(generator).exponential(1.0 / lambd, shape)
    return _fill("exponential_", input, draws)


def normal_(input, mean=0.0, std=1.0, *, generator=None):
    """Fill in place with draws from N(mean, std^2), as ``torch.Tensor.normal_``.

    Parameters
    ----------
    mean, std : float
    generator : numpy.random.Generator, optional
        A :class:`dynnets.Generator` or any numpy generator; by default
        :data:`dynnets.default_generator` (seeded by
        :func:`dynnets.manual_seed`). The numbers are numpy's (drawn in
        float64, rounded to this tensor's dtype once), the same that
        ``dynnets.nn.init.normal_`` draws from the same generator state.
    """
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0.0, but found std {std}")
    shape = _float_shape("normal_", input)
    return _fill("normal_", input, _generator(generator).normal(mean, std, shape))


def uniform_(input, *bounds, generator=None, **names):
    """``uniform_(from=0, to=1, *, generator=None)``: fill in place with
    draws from U(from, to), as ``torch.Tensor.uniform_`` (``from`` is a
    Python keyword: pass the bounds by position, ``x.uniform_(-0.1,
    0.1)``, or as ``**{"from": a, "to": b}``, as in torch). The generator
    and the numbers are as :meth:`normal_`'s (and ``nn.init.uniform_``'s).
    """
    if len(bounds) > 2:
        raise TypeError(f"uniform_: takes at most 2 positional bounds (from, to), got {len(bounds)}")
    for k in names:
        if k not in ("from", "to"):
            raise TypeError(f"uniform_: got an unexpected keyword argument {k!r} (torch's are 'from' and 'to')")
    lo, hi = (tuple(bounds) + (0.0, 1.0)[len(bounds):])
    if "from" in names:
        if len(bounds) >= 1:
            raise TypeError("uniform_: got multiple values for argument 'from'")
        lo = names["from"]
    if "to" in names:
        if len(bounds) == 2:
            raise TypeError("uniform_: got multiple values for argument 'to'")
        hi = names["to"]
    if lo > hi:
        raise ValueError(f"uniform_: expects to return a [from, to) range, but found from={lo} > to={hi}")
    shape = _float_shape("uniform_", input)
    return _fill("uniform_", input, _generator(generator).uniform(lo, hi, shape))


def _float_shape(op, x):
    """The shape of tensor ``x``, which an in-place draw fills: a floating-point one."""
    dt = np.dtype(x.dtype)
    if dt.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point tensor, got dtype {dt}")
    return tuple(x.shape)


_ALL = {"index": Ellipsis}


def _write_set(dst, v, index=Ellipsis):
    dst[index] = v


def _fill(op, x, draws):
    """``x`` set in place to ``draws`` (cast to its dtype), through the
    in-place machinery (version counter, leaf checks), as ``copy_``."""
    return write_inplace(op, x, P.setitem_p, (draws,), _ALL, _write_set, casting="unsafe")
