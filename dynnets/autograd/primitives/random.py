"""Random draws: ``random`` (normal, truncated normal and uniform arrays of a
given shape) and ``dropout_mask`` (an inverted-dropout mask of an input's
shape). Both are declared ``random=True``: ``impl`` takes the generator as
``rng=`` (a fresh one from the ``seed`` attribute when it is not given), a
static plan passes each equation the generator its session keeps for it, so
each ``Session.run`` draws new values, and the compile passes never fold,
merge or cache them (:mod:`dynnets.static.passes` reads ``prim.random``).

``seed`` is a pair of non-negative integers (graph seed, op seed), as TF1's
``get_seed`` returns: the stream of an equation is that of
``numpy.random.default_rng(list(seed))``.
"""
from __future__ import annotations

import numpy as np

from .core import Aval, DTypeError, ShapeError, defprim, dtype_of, fmt_shape, is_int

__all__ = ["random_p", "dropout_mask_p", "make_rng", "draw_dropout_mask", "DISTRIBUTIONS"]

DISTRIBUTIONS = ("normal", "truncated_normal", "uniform")


def make_rng(seed):
    """The generator of an equation with attribute ``seed`` (graph seed, op seed)."""
    return np.random.default_rng([int(s) for s in seed])


def _check_seed(op, seed):
    if not (isinstance(seed, tuple) and len(seed) == 2 and all(is_int(s) and s >= 0 for s in seed)):
        raise ShapeError(f"{op}: seed must be a pair of non-negative integers (graph seed, op seed), got {seed!r}")


def _truncated(rng, shape, dt):
    # TF1's truncated_normal: values beyond two standard deviations are drawn again
    z = rng.standard_normal(shape, dtype=dt)
    bad = np.abs(z) > 2
    while bad.any():
        z[bad] = rng.standard_normal(int(bad.sum()), dtype=dt)
        bad = np.abs(z) > 2
    return z


def _random(*dims, dist, shape, dtype, a, b, seed, rng=None):
    """An array of ``shape`` and ``dtype``: N(a, b**2) for ``normal``, the same
    truncated to [a - 2b, a + 2b] (redrawn) for ``truncated_normal``, U[a, b)
    for ``uniform``. Each None of ``shape`` is the next of ``dims`` (integer
    scalars: sizes known only when a static graph runs, ``tf.shape(x)``)."""
    if rng is None:
        rng = make_rng(seed)
    if dims:
        it = iter(dims)
        shape = tuple(int(next(it)) if d is None else d for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"random: a run-time dimension is negative: shape {shape}")
    dt = np.dtype(dtype)
    if dist == "uniform":
        if dt.kind in "iu":
            return rng.integers(a, b, shape, dtype=dt)
        return rng.random(shape, dtype=dt) * dt.type(b - a) + dt.type(a)
    z = rng.standard_normal(shape, dtype=dt) if dist == "normal" else _truncated(rng, shape, dt)
    return z * dt.type(b) + dt.type(a)


def _random_shape(*dims, dist, shape, dtype, a, b, seed, rng=None):
    if dist not in DISTRIBUTIONS:
        raise ShapeError(f"random: dist must be one of {DISTRIBUTIONS}, got {dist!r}")
    if not (isinstance(shape, tuple) and all(d is None or is_int(d) and d >= 0 for d in shape)
            and sum(d is None for d in shape) == len(dims)):
        raise ShapeError(f"random: shape must be a tuple of non-negative integers, with None for each run-time "
                         f"dimension given as an input ({len(dims)} given), got {shape!r}")
    for k, d in enumerate(dims):
        if d.shape is None or tuple(d.shape) != () or dtype_of(d).kind not in "iu":
            raise ShapeError(f"random: run-time dimension {k} must be an integer scalar, got shape "
                             f"{fmt_shape(d.shape)} and dtype {dtype_of(d)}")
    _check_seed("random", seed)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"random: dtype {dtype!r} is not a numpy dtype") from None
    if dt not in (np.float32, np.float64) and not (dist == "uniform" and dt in (np.int32, np.int64)):
        raise DTypeError(f"random: {dist} draws float32 or float64" + (" (or int32/int64)" if dist == "uniform" else "")
                         + f", got dtype {dt}")
    if dist == "uniform" and not a < b:
        raise ShapeError(f"random: uniform needs minval < maxval, got minval={a!r}, maxval={b!r}")
    if dist != "uniform" and not b >= 0:
        raise ShapeError(f"random: {dist} needs stddev >= 0, got {b!r}")
    return Aval(shape, dt)


random_p = defprim("random", _random, _random_shape, differentiable=False, random=True)


def draw_dropout_mask(rng, shape, dtype, rate):
    """Inverted dropout's mask: 0 with probability ``rate``, else ``1/(1-rate)``."""
    keep = rng.random(shape) >= rate
    return keep.astype(dtype) * np.asarray(1.0 / (1.0 - rate), dtype=dtype)


def _dropout_mask(x, *, rate, seed, rng=None):
    """A mask of ``x``'s shape and dtype for inverted dropout of ``x`` (``x *
    mask``): each element is 0 with probability ``rate``, else ``1/(1-rate)``."""
    if rng is None:
        rng = make_rng(seed)
    return draw_dropout_mask(rng, x.shape, x.dtype, rate)


def _dropout_mask_shape(x, *, rate, seed, rng=None):
    if dtype_of(x).kind != "f":
        raise DTypeError(f"dropout_mask: x must be a floating-point array, got shape {fmt_shape(x.shape)} and dtype "
                         f"{dtype_of(x)}")
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.floating)) or not 0 <= rate < 1:
        raise ShapeError(f"dropout_mask: rate must be a probability in [0, 1), got {rate!r}")
    _check_seed("dropout_mask", seed)
    return Aval(tuple(x.shape), dtype_of(x))


dropout_mask_p = defprim("dropout_mask", _dropout_mask, _dropout_mask_shape, differentiable=False,
                         nondiff_args=(0,), random=True)


# --- i22-tf1-gaps: random_shuffle ------------------------------------------------------------------

def _random_shuffle(x, *, seed, rng=None):
    """``x`` with its first dimension in a random order (TF1's
    ``tf.random_shuffle``); a 0-d ``x`` is returned as it is."""
    if rng is None:
        rng = make_rng(seed)
    x = np.asarray(x)
    if x.ndim == 0:
        return x.copy()
    return x[rng.permutation(x.shape[0])]


def _random_shuffle_shape(x, *, seed, rng=None):
    _check_seed("random_shuffle", seed)
    return Aval(None if x.shape is None else tuple(x.shape), dtype_of(x))


# no gradient, as TF1's RandomShuffle
random_shuffle_p = defprim("random_shuffle", _random_shuffle, _random_shuffle_shape, differentiable=False,
                           nondiff_args=(0,), random=True)
__all__ += ["random_shuffle_p"]
