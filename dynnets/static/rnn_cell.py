"""TF1's ``tf.nn.rnn_cell``: ``BasicLSTMCell``, ``LSTMCell``, ``GRUCell`` and
``LSTMStateTuple`` for static graphs.

The TF1 protocol: ``output, new_state = cell(inputs, state)``;
``state_size``, ``output_size``; ``zero_state(batch_size, dtype)`` (the batch
size may be a scalar Value, ``shape(x)[0]``, so the state fits any fed
batch). Variables are created on the first call (or by ``build``), in the
graph of the inputs, named ``<name>/weight_ih`` etc.

Weights use the layout of the fused cell primitives (``lstm_cell``,
``gru_cell``; PyTorch's): ``weight_ih`` (G*H, input depth), ``weight_hh``
(G*H, H), ``bias_ih``, ``bias_hh`` (G*H,), gates stacked i, f, g, o (LSTM) and
r, z, n (GRU). So a step is one fused Numba kernel, the same one eager
``nn.LSTMCell`` / ``nn.LSTM`` run, and their weights move between the two
unchanged. TF1's own ``kernel`` is ``concat([weight_ih, weight_hh], 1).T``
with the gates in TF's order i, j (= g), f, o.

Initial values follow TF1: weights Glorot-uniform over the whole
``[x, h] -> gates`` kernel, biases zero (GRU: the r and z biases one, as
``tf.nn.rnn_cell.GRUCell``), drawn from ``rng=`` or else the default
generator (:func:`dynnets.manual_seed`).

One difference: the GRU applies its reset gate after the recurrent product,
``n = tanh(x W_in + b_in + r * (h W_hn + b_hn))``, as cuDNN, PyTorch and TF's
``CudnnCompatibleGRUCell`` do (the fused kernel's maths), where
``tf.nn.rnn_cell.GRUCell`` multiplies ``h`` by ``r`` before the product.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ..autograd import ops
from ..random import default_generator
from .array_ops import fill
from .graph import Value, Variable, get_default_graph

__all__ = ["RNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "LSTMStateTuple"]


class LSTMStateTuple(namedtuple("LSTMStateTuple", ("c", "h"))):
    """The state of an LSTM cell: memory ``c`` and output ``h`` (TF1's order)."""

    __slots__ = ()

    @property
    def dtype(self):
        return self.c.dtype


def _positive(cls, name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{cls}: {name} must be a positive integer, got {v!r}")
    return int(v)


def _glorot(rng, fan_in, fan_out):
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return lambda shape, dtype: rng.uniform(-limit, limit, shape).astype(dtype)


def _is_tanh(f):
    return f is None or f is ops.tanh or f is np.tanh


class RNNCell:
    """Base of the cells: variables built once, from the first input's depth."""

    _gates = 1

    def __init__(self, num_units, name, dtype, rng):
        self._num_units = _positive(type(self).__name__, "num_units", num_units)
        self.name = name
        self.dtype = None if dtype is None else np.dtype(dtype)
        self._rng = default_generator if rng is None else (
            rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng))
        self.built = False
        self.variables = []

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def zero_state(self, batch_size, dtype):
        """Zeros of the state's structure for ``batch_size`` rows (an int or
        an integer scalar Value)."""
        def z(n):
            if isinstance(batch_size, Value):
                return fill([batch_size, n], 0, dtype=dtype)
            return np.zeros((int(batch_size), n), dtype=dtype)
        size = self.state_size
        return LSTMStateTuple(z(size.c), z(size.h)) if isinstance(size, LSTMStateTuple) else z(size)

    def build(self, inputs_shape, graph=None):
        """Create the variables for inputs of shape ``(..., depth)`` (once)."""
        if self.built:
            return
        depth = inputs_shape[-1]
        if depth is None:
            raise ValueError(f"{type(self).__name__}: the last dimension of the inputs must be known to build the "
                             f"cell's variables, got shape {tuple(inputs_shape)}")
        dt = self.dtype or np.dtype(np.float32)
        g = graph if graph is not None else get_default_graph()
        self._create(int(depth), dt, g)
        self.built = True

    def _var(self, g, name, value):
        v = Variable(value, name=f"{self.name}/{name}", graph=g)
        self.variables.append(v)
        return v

    @property
    def trainable_variables(self):
        return list(self.variables)

    def __call__(self, inputs, state, scope=None):
        if len(inputs.shape) != 2:
            raise ValueError(f"{type(self).__name__}: inputs must be 2-D (batch, depth), got shape "
                             f"{tuple(inputs.shape)}")
        self.build(inputs.shape, inputs.graph if isinstance(inputs, Value) else None)
        return self.call(inputs, state)


class LSTMCell(RNNCell):
    """Long short-term memory cell, TF1's ``tf.nn.rnn_cell.LSTMCell``.

    Parameters
    ----------
    num_units : int
    use_peepholes : bool
        Diagonal peephole connections ``w_i_diag``, ``w_f_diag``,
        ``w_o_diag`` (H,) from the memory to the gates (Sak et al. 2014).
    cell_clip : float, optional
        Clip the memory to [-cell_clip, cell_clip] after each step.
    initializer : callable, optional
        ``initializer(shape, dtype) -> array`` for the weights (default
        Glorot-uniform over the whole kernel).
    num_proj : int, optional
        Project the output to ``num_proj`` units (``projection`` (H, P)).
    proj_clip : float, optional
        Clip the projected output.
    num_unit_shards, num_proj_shards
        Deprecated in TF1 and ignored there; accepted here, where they hold
        their TF1 positions.
    forget_bias : float, default 1.0
        Added to the forget gate's pre-activation (not part of the bias variable).
    state_is_tuple : True
        The state is an :class:`LSTMStateTuple` (TF1's non-tuple state is deprecated there, absent here).
    activation : callable, optional
        Instead of tanh (then the step runs as separate ops, not the fused kernel).
    name : str, default "lstm_cell"
    dtype : numpy dtype, optional
        Of the variables (default float32).
    rng : numpy Generator or int, optional
        Draws the initial weights (default: :data:`dynnets.random.default_generator`).

    Without peepholes, clipping, projection or another activation a step is
    the fused ``lstm_cell`` primitive.
    """

    _gates = 4

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None, num_proj=None,
                 proj_clip=None, num_unit_shards=None, num_proj_shards=None, forget_bias=1.0, state_is_tuple=True,
                 activation=None, reuse=None, name=None, dtype=None, rng=None):
        super().__init__(num_units, name or "lstm_cell", dtype, rng)
        if state_is_tuple is not True:
            raise ValueError(f"{type(self).__name__}: only state_is_tuple=True is supported (the state is an "
                             f"LSTMStateTuple(c, h))")
        self.use_peepholes = bool(use_peepholes)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.num_proj = None if num_proj is None else _positive(type(self).__name__, "num_proj", num_proj)
        self.proj_clip = None if proj_clip is None else float(proj_clip)
        self.forget_bias = float(forget_bias)
        self.activation = activation
        self.initializer = initializer
        self.fused = not (self.use_peepholes or self.cell_clip is not None or self.num_proj is not None
                          or not _is_tanh(activation))

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self.num_proj or self._num_units)

    @property
    def output_size(self):
        return self.num_proj or self._num_units

    def _create(self, depth, dt, g):
        H, P = self._num_units, self.num_proj or self._num_units
        init = self.initializer or _glorot(self._rng, depth + P, 4 * H)
        self.weight_ih = self._var(g, "weight_ih", init((4 * H, depth), dt))
        self.weight_hh = self._var(g, "weight_hh", init((4 * H, P), dt))
        self.bias_ih = self._var(g, "bias_ih", np.zeros(4 * H, dt))
        self.bias_hh = self._var(g, "bias_hh", np.zeros(4 * H, dt))
        if self.use_peepholes:
            self.w_f_diag = self._var(g, "w_f_diag", init((H,), dt))
            self.w_i_diag = self._var(g, "w_i_diag", init((H,), dt))
            self.w_o_diag = self._var(g, "w_o_diag", init((H,), dt))
        if self.num_proj is not None:
            self.projection = self._var(g, "projection", (self.initializer or _glorot(self._rng, H, P))((H, P), dt))
        self._forget = np.zeros(4 * H, dt)
        self._forget[H:2 * H] = self.forget_bias

    def call(self, inputs, state):
        if not isinstance(state, tuple) or len(state) != 2:
            raise TypeError(f"{type(self).__name__}: state must be an LSTMStateTuple(c, h), got "
                            f"{type(state).__name__}")
        c, h = state
        b_hh = self.bias_hh + self._forget if self.forget_bias else self.bias_hh
        if self.fused:
            h2, c2 = ops.lstm_cell(inputs, h, c, self.weight_ih, self.weight_hh, self.bias_ih, b_hh)
            return h2, LSTMStateTuple(c2, h2)
        H = self._num_units
        act = self.activation or ops.tanh
        z = ops.linear(inputs, self.weight_ih, self.bias_ih) + ops.linear(h, self.weight_hh, b_hh)
        i, f, g, o = z[:, :H], z[:, H:2 * H], z[:, 2 * H:3 * H], z[:, 3 * H:]
        if self.use_peepholes:
            i = i + self.w_i_diag * c
            f = f + self.w_f_diag * c
        c2 = ops.sigmoid(f) * c + ops.sigmoid(i) * act(g)
        if self.cell_clip is not None:
            c2 = ops.clip(c2, -self.cell_clip, self.cell_clip)
        if self.use_peepholes:
            o = o + self.w_o_diag * c2
        m = ops.sigmoid(o) * act(c2)
        if self.num_proj is not None:
            m = ops.matmul(m, self.projection)
            if self.proj_clip is not None:
                m = ops.clip(m, -self.proj_clip, self.proj_clip)
        return m, LSTMStateTuple(c2, m)


class BasicLSTMCell(LSTMCell):
    """TF1's ``tf.nn.rnn_cell.BasicLSTMCell``: an :class:`LSTMCell` without
    peepholes, clipping or projection (one fused ``lstm_cell`` step).

    Parameters: ``num_units``, ``forget_bias`` (default 1.0),
    ``state_is_tuple``, ``activation``, ``name`` (default
    "basic_lstm_cell"), ``dtype``, ``rng``.
    """

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, rng=None):
        super().__init__(num_units, forget_bias=forget_bias, state_is_tuple=state_is_tuple, activation=activation,
                         name=name or "basic_lstm_cell", dtype=dtype, rng=rng)


class GRUCell(RNNCell):
    """Gated recurrent unit cell (Cho et al. 2014), TF1's
    ``tf.nn.rnn_cell.GRUCell`` interface with the fused kernel's maths (see
    the module docstring): r = σ(x W_ir + b_ir + h W_hr + b_hr), z likewise,
    n = act(x W_in + b_in + r (h W_hn + b_hn)), h' = (1 - z) n + z h.

    Parameters
    ----------
    num_units : int
    activation : callable, optional
        Instead of tanh (then the step runs as separate ops).
    kernel_initializer, bias_initializer : callable, optional
        ``init(shape, dtype) -> array``; biases default to one for r and z
        (``bias_ih``) and zero elsewhere, as TF1.
    name : str, default "gru_cell"
    dtype, rng : as :class:`LSTMCell`.
    """

    _gates = 3

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None, bias_initializer=None,
                 name=None, dtype=None, rng=None):
        super().__init__(num_units, name or "gru_cell", dtype, rng)
        self.activation = activation
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def _create(self, depth, dt, g):
        H = self._num_units
        init = self.kernel_initializer or _glorot(self._rng, depth + H, 3 * H)
        self.weight_ih = self._var(g, "weight_ih", init((3 * H, depth), dt))
        self.weight_hh = self._var(g, "weight_hh", init((3 * H, H), dt))
        if self.bias_initializer is not None:
            b_ih, b_hh = self.bias_initializer((3 * H,), dt), self.bias_initializer((3 * H,), dt)
        else:
            b_ih, b_hh = np.zeros(3 * H, dt), np.zeros(3 * H, dt)
            b_ih[:2 * H] = 1.0
        self.bias_ih = self._var(g, "bias_ih", b_ih)
        self.bias_hh = self._var(g, "bias_hh", b_hh)

    def call(self, inputs, state):
        if _is_tanh(self.activation):
            h2 = ops.gru_cell(inputs, state, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
            return h2, h2
        H = self._num_units
        gi = ops.linear(inputs, self.weight_ih, self.bias_ih)
        gh = ops.linear(state, self.weight_hh, self.bias_hh)
        r = ops.sigmoid(gi[:, :H] + gh[:, :H])
        z = ops.sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
        n = self.activation(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        h2 = (1.0 - z) * n + z * state
        return h2, h2
