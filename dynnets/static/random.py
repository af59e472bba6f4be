"""TF1's random ops and initializers: ``random_normal``, ``truncated_normal``,
``random_uniform``, ``set_random_seed`` and the ``*_initializer`` classes.

A random op is a node of the graph (the ``random`` primitive of the shared
table, declared ``random=True``) that draws **new values at every**
:meth:`Session.run`: each session keeps one generator per random op, so a
new session repeats the same sequence. Seeds follow TF1's ``get_seed``:

* graph seed set (:func:`set_random_seed`), op ``seed=None``: the op seed is
  derived from the graph seed and the op's position in the graph, so the
  same program gives the same numbers;
* op ``seed=`` set, no graph seed: the graph seed is TF1's default, 87654321;
* both set: both are used;
* neither: fresh OS entropy (different numbers in every process, as TF1).

The stream of an op is ``numpy.random.default_rng([graph_seed, op_seed])``
(the numbers are not TF's, only its convention). Initializers draw their
arrays when the variable is created, from the same seeds and the same code.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd.primitives import fmt_shape, make_rng, random_p
from .array_ops import dims_list
from .graph import Value, add_op, get_default_graph, user_site

__all__ = ["set_random_seed", "get_seed", "random_normal", "truncated_normal", "random_uniform",
           "DEFAULT_GRAPH_SEED", "zeros_initializer", "ones_initializer", "constant_initializer",
           "random_normal_initializer", "truncated_normal_initializer", "random_uniform_initializer",
           "glorot_uniform_initializer", "glorot_normal_initializer", "xavier_initializer"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2 ** 31 - 1


def set_random_seed(seed):
    """Set the default graph's graph-level seed (as ``tf.set_random_seed``)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValueError(f"set_random_seed: seed must be a non-negative integer or None, got {seed!r}")
    get_default_graph().seed = None if seed is None else int(seed)


def get_seed(op_seed, graph=None):
    """(graph seed, op seed) for an op created now with ``seed=op_seed``
    (TF1's rules; see the module docstring)."""
    g = graph or get_default_graph()
    if op_seed is not None and (isinstance(op_seed, bool) or not isinstance(op_seed, (int, np.integer))
                                or op_seed < 0):
        raise ValueError(f"seed must be a non-negative integer or None, got {op_seed!r}")
    if g.seed is not None:
        return (g.seed % _MAXINT32, (len(g.eqns) if op_seed is None else int(op_seed)) % _MAXINT32)
    if op_seed is not None:
        return (DEFAULT_GRAPH_SEED, int(op_seed) % _MAXINT32)
    return tuple(int(s) for s in np.random.SeedSequence().generate_state(2))


def _shape(op, shape):
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be a list or tuple of integers, got {shape!r}") from None
    if any(d is None for d in dims):
        raise ValueError(f"{op}: shape must be fully known, got {fmt_shape(dims)} (a size known only when the graph "
                         f"runs is given as a Value: tf.shape(x), or [tf.shape(x)[0], 3])")
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise TypeError(f"{op}: shape must be a list or tuple of non-negative integers, got {shape!r}")
    return tuple(int(d) for d in dims)


def _run_time_shape(op, shape):
    """(template, dims) for a shape with sizes known only when the graph runs
    (``tf.shape(x)``, ``[tf.shape(x)[0], 3]``): None in the template for each
    Value of ``dims``; None when ``shape`` holds no Value."""
    if not (isinstance(shape, Value) or isinstance(shape, (list, tuple)) and any(isinstance(d, Value) for d in shape)):
        return None
    template, dims = [], []
    for k, d in enumerate(dims_list(op, shape)):
        if isinstance(d, Value):
            template.append(None)
            dims.append(d)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
            template.append(int(d))
        else:
            raise TypeError(f"{op}: shape[{k}] must be a non-negative int or an integer scalar Value, got {d!r}")
    return tuple(template), dims


def _random_op(op, dist, shape, a, b, dtype, seed, name):
    g = get_default_graph()
    run_time = _run_time_shape(op, shape)
    if run_time is not None:
        template, dims = run_time
        return add_op(random_p, *dims, name=name or op, dist=dist, shape=template, dtype=np.dtype(dtype), a=a, b=b,
                      seed=get_seed(seed, g))
    attrs = {"dist": dist, "shape": _shape(op, shape), "dtype": np.dtype(dtype), "a": a, "b": b,
             "seed": get_seed(seed, g)}
    out = random_p.shape(**attrs)
    return g.append_equation(random_p, (), attrs, out, name=name or op, site=user_site())


def random_normal(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None, name=None):
    """Values from N(mean, stddev**2), drawn again at every run (``tf.random_normal``)."""
    return _random_op("random_normal", "normal", shape, float(mean), float(stddev), dtype, seed, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None, name=None):
    """As :func:`random_normal`, values beyond two standard deviations drawn
    again (``tf.truncated_normal``)."""
    return _random_op("truncated_normal", "truncated_normal", shape, float(mean), float(stddev), dtype, seed, name)


def random_uniform(shape, minval=0, maxval=None, dtype=np.float32, seed=None, name=None):
    """Values from U[minval, maxval) (``maxval`` defaults to 1 for floats; an
    integer dtype needs it), drawn again at every run (``tf.random_uniform``)."""
    dt = np.dtype(dtype)
    if maxval is None:
        if dt.kind in "iu":
            raise ValueError(f"random_uniform: must specify maxval for integer dtype {dt}")
        maxval = 1
    conv = int if dt.kind in "iu" else float
    return _random_op("random_uniform", "uniform", shape, conv(minval), conv(maxval), dt, seed, name)


# --------------------------------------------------------------------------
# initializers: called with (shape, dtype), they return the initial array
# --------------------------------------------------------------------------

def _sample(**attrs):
    return random_p.impl(**attrs)


class _Initializer:
    dtype = np.float32

    def __call__(self, shape, dtype=None, partition_info=None):
        shape = _shape(type(self).__name__, shape)
        dt = np.dtype(dtype if dtype is not None else self.dtype)
        return self._draw(shape, dt)

    def __repr__(self):
        return f"{type(self).__name__}()"


class zeros_initializer(_Initializer):
    """Zeros of the variable's shape (``tf.zeros_initializer``)."""

    def __init__(self, dtype=np.float32):
        self.dtype = dtype

    def _draw(self, shape, dt):
        return np.zeros(shape, dt)


class ones_initializer(_Initializer):
    """Ones of the variable's shape (``tf.ones_initializer``)."""

    def __init__(self, dtype=np.float32):
        self.dtype = dtype

    def _draw(self, shape, dt):
        return np.ones(shape, dt)


class constant_initializer(_Initializer):
    """``value`` broadcast to the shape (a full array must have the shape)."""

    def __init__(self, value=0, dtype=np.float32):
        self.value = np.asarray(value)
        self.dtype = dtype

    def _draw(self, shape, dt):
        if self.value.ndim and self.value.shape != shape:
            if self.value.size != math.prod(shape):
                raise ValueError(f"constant_initializer: {self.value.size} values for shape {fmt_shape(shape)}")
            return self.value.reshape(shape).astype(dt)
        return np.full(shape, self.value, dt)


class _Seeded(_Initializer):
    def _rng(self):
        return make_rng(get_seed(self.seed))


class random_normal_initializer(_Seeded):
    """Draws from N(mean, stddev**2) (``tf.random_normal_initializer``); ``seed``
    as the op-level seed of TF1's random ops."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=np.float32):
        self.mean, self.stddev, self.seed, self.dtype = float(mean), float(stddev), seed, dtype

    def _draw(self, shape, dt):
        return _sample(dist="normal", shape=shape, dtype=dt, a=self.mean, b=self.stddev, seed=None, rng=self._rng())


class truncated_normal_initializer(_Seeded):
    """Draws from N(mean, stddev**2), redrawn beyond two standard deviations
    (``tf.truncated_normal_initializer``); ``seed`` as the op-level seed."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=np.float32):
        self.mean, self.stddev, self.seed, self.dtype = float(mean), float(stddev), seed, dtype

    def _draw(self, shape, dt):
        return _sample(dist="truncated_normal", shape=shape, dtype=dt, a=self.mean, b=self.stddev, seed=None,
                       rng=self._rng())


class random_uniform_initializer(_Seeded):
    """Draws from U(minval, maxval), ``maxval`` 1 by default
    (``tf.random_uniform_initializer``); ``seed`` as the op-level seed."""

    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=np.float32):
        self.minval, self.maxval, self.seed, self.dtype = minval, 1.0 if maxval is None else maxval, seed, dtype

    def _draw(self, shape, dt):
        return _sample(dist="uniform", shape=shape, dtype=dt, a=self.minval, b=self.maxval, seed=None,
                       rng=self._rng())


def _fans(shape):
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


class glorot_uniform_initializer(_Seeded):
    """U[-limit, limit), limit = sqrt(6 / (fan_in + fan_out)) (Glorot and
    Bengio 2010; TF1's default for ``get_variable`` and ``layers.dense``)."""

    def __init__(self, seed=None, dtype=np.float32):
        self.seed, self.dtype = seed, dtype

    def _draw(self, shape, dt):
        fan_in, fan_out = _fans(shape)
        limit = math.sqrt(6.0 / max(1.0, fan_in + fan_out))
        return _sample(dist="uniform", shape=shape, dtype=dt, a=-limit, b=limit, seed=None, rng=self._rng())


class glorot_normal_initializer(_Seeded):
    """Truncated N(0, s**2), s = sqrt(2 / (fan_in + fan_out)) / 0.8796 (the
    correction for the truncation at two standard deviations, as TF1)."""

    def __init__(self, seed=None, dtype=np.float32):
        self.seed, self.dtype = seed, dtype

    def _draw(self, shape, dt):
        fan_in, fan_out = _fans(shape)
        s = math.sqrt(2.0 / max(1.0, fan_in + fan_out)) / .87962566103423978
        return _sample(dist="truncated_normal", shape=shape, dtype=dt, a=0.0, b=s, seed=None, rng=self._rng())


class xavier_initializer(_Seeded):
    """``tf.contrib.layers.xavier_initializer``: TF1's
    ``variance_scaling_initializer(factor=1.0, mode='FAN_AVG')`` (Glorot and
    Bengio 2010): U[-sqrt(6 / (fan_in + fan_out)), +...] when ``uniform``,
    else a normal truncated at two standard deviations with standard
    deviation ``sqrt(1.3 * 2 / (fan_in + fan_out))`` (contrib's correction
    for the truncation)."""

    def __init__(self, uniform=True, seed=None, dtype=np.float32):
        if np.dtype(dtype).kind != "f":
            raise TypeError(f"xavier_initializer: dtype must be a floating-point type, got {np.dtype(dtype)}")
        self.uniform, self.seed, self.dtype = bool(uniform), seed, dtype

    def _draw(self, shape, dt):
        fan_in, fan_out = _fans(shape)
        n = max(1.0, (fan_in + fan_out) / 2.0)
        if self.uniform:
            limit = math.sqrt(3.0 / n)
            return _sample(dist="uniform", shape=shape, dtype=dt, a=-limit, b=limit, seed=None, rng=self._rng())
        return _sample(dist="truncated_normal", shape=shape, dtype=dt, a=0.0, b=math.sqrt(1.3 / n), seed=None,
                       rng=self._rng())
