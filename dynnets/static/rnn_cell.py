"""TF1's ``tf.nn.rnn_cell`` for static graphs: ``BasicRNNCell``,
``BasicLSTMCell``, ``LSTMCell``, ``GRUCell``, ``LSTMStateTuple``,
``MultiRNNCell`` and ``DropoutWrapper``, with TF1's variables and maths;
``TorchLSTMCell`` and ``TorchGRUCell`` keep PyTorch's.

The TF1 protocol: ``output, new_state = cell(inputs, state)``;
``state_size``, ``output_size``; ``zero_state(batch_size, dtype)`` (the batch
size may be a scalar Value, ``shape(x)[0]``, so the state fits any fed
batch). Variables are created once, at the first call (or ``build``), in the
outermost graph of the inputs, with ``get_variable`` inside
``variable_scope(name or <default name>)``: the default names are made
unique as TF1's layers do (``basic_lstm_cell``, ``basic_lstm_cell_1``...),
and ``dynamic_rnn`` opens ``variable_scope("rnn")`` around them, so a cell's
variables have TF1's names (``rnn/basic_lstm_cell/kernel``,
``rnn/basic_lstm_cell/bias``; a ``Saver`` checkpoint's names are TF1's).

TF1's variables, shapes and initial values:

* ``BasicRNNCell``: ``kernel`` (depth + H, H), ``bias`` (H,) zeros;
  ``h' = act([x, h] kernel + bias)``.
* ``BasicLSTMCell`` / ``LSTMCell``: one ``kernel`` (depth + P, 4H) with the
  gates in TF's order i, j, f, o (P = ``num_proj`` or H), one ``bias``
  (4H,) zeros; ``forget_bias`` (default 1.0) is added to f when the cell
  runs, not stored; ``LSTMCell`` also ``w_f_diag``, ``w_i_diag``,
  ``w_o_diag`` (H,) with peepholes (Sak et al. 2014) and
  ``projection/kernel`` (H, P) with ``num_proj``.
* ``GRUCell`` (Cho et al. 2014, TF1's variant): ``gates/kernel``
  (depth + H, 2H), ``gates/bias`` (2H,) ones, ``candidate/kernel``
  (depth + H, H), ``candidate/bias`` (H,) zeros; ``r, u = σ([x, h] W_g +
  b_g)``, ``c = act([x, r h] W_c + b_c)``, ``h' = u h + (1 - u) c``: the
  reset gate multiplies ``h`` *before* the candidate's product (cuDNN and
  PyTorch apply it after: :class:`TorchGRUCell`).

Kernels default to Glorot-uniform (TF1's ``get_variable`` default), drawn
by TF1's seed rules (``tf.set_random_seed``); a variable scope's
``initializer`` or the cell's own (``initializer=``,
``kernel_initializer=``) replace it, and dynnets' ``rng=`` (a numpy
Generator or seed) draws the Glorot default from that generator instead.

An LSTM step without peepholes, clipping, projection or another activation
is the fused ``lstm_cell`` primitive (the kernel eager ``nn.LSTMCell`` runs):
the cell reads TF1's kernel through PyTorch's layout (its gate columns
reordered i, f, j, o and split into the input and recurrent parts,
transposed) computed once per run when the cell is built, before
``dynamic_rnn``'s loop, so each step costs the fused kernel alone.

``DropoutWrapper`` draws its masks as TF1's (``uniform >= 1 - keep_prob``,
the kept values scaled by ``1 / keep_prob``), a new mask per step and per
run; inside ``dynamic_rnn`` the draws for all steps are made before the
loop and read per step, so the loop's gradient (which recomputes the body)
sees the masks the forward used.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ..autograd import ops
from ..random import default_generator
from .array_ops import ensure_shape, fill, scalar_probability, shape
from .graph import Value, Variable, get_default_graph
from .random import get_seed, random_uniform
from .variable_scope import get_variable, get_variable_scope, variable_scope

__all__ = ["RNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "LSTMStateTuple", "MultiRNNCell",
           "DropoutWrapper", "TorchLSTMCell", "TorchGRUCell"]


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


def _rng_glorot(rng):
    """A Glorot-uniform initializer drawing from numpy Generator ``rng``
    (fans as TF1's: the last two dimensions)."""
    def init(shape, dtype=None, partition_info=None):
        fan_in, fan_out = (shape[0], shape[0]) if len(shape) == 1 else (shape[-2], shape[-1])
        return _glorot(rng, fan_in, fan_out)(tuple(shape), np.dtype(dtype or np.float32))
    return init


def _is_tanh(f):
    return f is None or f is ops.tanh or f is np.tanh


def _outermost(g):
    while g.parent is not None:
        g = g.parent
    return g


def _zeros(batch_size, n, dtype):
    if isinstance(batch_size, Value):
        return fill([batch_size, n], 0, dtype=dtype)
    return np.zeros((int(batch_size), n), dtype=dtype)


def _zero_state(size, batch_size, dtype):
    """Zeros of the state structure ``size`` (ints, LSTMStateTuples, tuples)."""
    if isinstance(size, LSTMStateTuple):
        return LSTMStateTuple(_zeros(batch_size, size.c, dtype), _zeros(batch_size, size.h, dtype))
    if isinstance(size, tuple):
        return tuple(_zero_state(s, batch_size, dtype) for s in size)
    return _zeros(batch_size, size, dtype)


class RNNCell:
    """Base of the cells: variables built once, from the first input's depth
    (TF1's ``tf.nn.rnn_cell.RNNCell`` protocol)."""

    _base_name = "rnn_cell"

    def __init__(self, num_units, name=None, dtype=None, rng=None, reuse=None):
        self._num_units = _positive(type(self).__name__, "num_units", num_units)
        self._given_name = name
        self.name = name or self._base_name
        self.dtype = None if dtype is None else np.dtype(dtype)
        self._rng = None if rng is None else (
            rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng))
        self._reuse = reuse
        self.built = False
        self.variables = []
        self.scope_name = None

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def zero_state(self, batch_size, dtype):
        """Zeros of the state's structure for ``batch_size`` rows (an int or
        an integer scalar Value)."""
        return _zero_state(self.state_size, batch_size, dtype)

    def build(self, inputs_shape, graph=None):
        """Create the variables for inputs of shape ``(..., depth)`` (once),
        in ``graph``'s outermost graph, under ``variable_scope(name or the
        cell's default name made unique)``."""
        if self.built:
            return
        depth = inputs_shape[-1]
        if depth is None:
            raise ValueError(f"{type(self).__name__}: the last dimension of the inputs must be known to build the "
                             f"cell's variables, got shape {tuple(inputs_shape)}")
        dt = self.dtype or np.dtype(np.float32)
        g = _outermost(graph if graph is not None else get_default_graph())
        with g.as_default(), variable_scope(self._given_name, default_name=self._base_name,
                                            reuse=self._reuse) as scope:
            self.scope_name = scope.name
            self._create(int(depth), dt)
        self.built = True

    def _get(self, name, shape, dt, initializer=None):
        """``get_variable(name)`` in the cell's scope; the Glorot default drawn
        from ``rng=`` when the cell has one and nothing else says how."""
        if initializer is None and self._rng is not None and get_variable_scope().initializer is None:
            initializer = _rng_glorot(self._rng)
        v = get_variable(name, shape=tuple(shape), dtype=dt, initializer=initializer)
        self.variables.append(v)
        return v

    @property
    def trainable_variables(self):
        return [v for v in self.variables if v.trainable]

    @property
    def weights(self):
        return list(self.variables)

    def __call__(self, inputs, state, scope=None):
        if len(inputs.shape) != 2:
            raise ValueError(f"{type(self).__name__}: inputs must be 2-D (batch, depth), got shape "
                             f"{tuple(inputs.shape)}")
        self.build(inputs.shape, inputs.graph if isinstance(inputs, Value) else None)
        return self.call(inputs, state)


def _concat_matmul(a, b, kernel, bias):
    """``concat([a, b], 1) @ kernel + bias``, as TF1's cells compute their gates."""
    return ops.add(ops.matmul(ops.concat([a, b], axis=1), kernel), bias)


class BasicRNNCell(RNNCell):
    """TF1's ``tf.nn.rnn_cell.BasicRNNCell``: ``h' = act([x, h] kernel + bias)``
    (``kernel`` (depth + H, H), ``bias`` (H,) zeros; tanh by default).

    Parameters
    ----------
    num_units : int
    activation : callable, optional
    reuse, name, dtype
        As TF1's (``name`` default "basic_rnn_cell").
    rng : numpy Generator or int, optional
        dynnets' own: draws the Glorot-uniform kernel.
    """

    _base_name = "basic_rnn_cell"

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None, rng=None):
        super().__init__(num_units, name, dtype, rng, reuse)
        self.activation = activation

    def _create(self, depth, dt):
        H = self._num_units
        self.kernel = self._get("kernel", (depth + H, H), dt)
        self.bias = self._get("bias", (H,), dt, np.zeros((H,), dt))

    def call(self, inputs, state):
        act = self.activation or ops.tanh
        h = act(_concat_matmul(inputs, state, self.kernel, self.bias))
        return h, h


def _lstm_options(cell, use_peepholes, cell_clip, initializer, num_proj, proj_clip, forget_bias, state_is_tuple,
                  activation):
    """Check and set an LSTM cell's TF1 options (LSTMCell and TorchLSTMCell
    take the same); ``fused``: none of them needs the unfused step."""
    who = type(cell).__name__
    if state_is_tuple is not True:
        raise ValueError(f"{who}: only state_is_tuple=True is supported (the state is an LSTMStateTuple(c, h))")
    cell.use_peepholes = bool(use_peepholes)
    cell.cell_clip = None if cell_clip is None else float(cell_clip)
    cell.num_proj = None if num_proj is None else _positive(who, "num_proj", num_proj)
    cell.proj_clip = None if proj_clip is None else float(proj_clip)
    cell.forget_bias = float(forget_bias)
    cell.activation = activation
    cell.initializer = initializer
    cell.fused = not (cell.use_peepholes or cell.cell_clip is not None or cell.num_proj is not None
                      or not _is_tanh(activation))


class LSTMCell(RNNCell):
    """Long short-term memory cell, TF1's ``tf.nn.rnn_cell.LSTMCell``
    (Hochreiter and Schmidhuber 1997; peepholes and projection: Sak et al.
    2014): ``i, j, f, o = split([x, m] kernel + bias)``, ``c' = σ(f +
    forget_bias) c + σ(i) act(j)``, ``m' = σ(o) act(c')``.

    Parameters
    ----------
    num_units : int
    use_peepholes : bool
        Diagonal connections ``w_i_diag``, ``w_f_diag``, ``w_o_diag`` (H,)
        from the memory to the gates.
    cell_clip : float, optional
        Clip the memory to [-cell_clip, cell_clip] after each step.
    initializer : callable, optional
        ``initializer(shape, dtype) -> array`` for the kernel, peepholes and
        projection (default: the scope's, else Glorot-uniform).
    num_proj : int, optional
        Project the output to ``num_proj`` units (``projection/kernel`` (H, P)).
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
        Instead of tanh.
    reuse, name, dtype
        As TF1's (``name`` default "lstm_cell").
    rng : numpy Generator or int, optional
        dynnets' own: draws the Glorot-uniform default.

    Without peepholes, clipping, projection or another activation a step is
    the fused ``lstm_cell`` primitive (see the module docstring).
    """

    _base_name = "lstm_cell"

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None, num_proj=None,
                 proj_clip=None, num_unit_shards=None, num_proj_shards=None, forget_bias=1.0, state_is_tuple=True,
                 activation=None, reuse=None, name=None, dtype=None, rng=None):
        super().__init__(num_units, name, dtype, rng, reuse)
        _lstm_options(self, use_peepholes, cell_clip, initializer, num_proj, proj_clip, forget_bias, state_is_tuple,
                      activation)

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self.num_proj or self._num_units)

    @property
    def output_size(self):
        return self.num_proj or self._num_units

    def _create(self, depth, dt):
        H, P = self._num_units, self.num_proj or self._num_units
        self.kernel = self._get("kernel", (depth + P, 4 * H), dt, self.initializer)
        self.bias = self._get("bias", (4 * H,), dt, np.zeros((4 * H,), dt))
        if self.use_peepholes:
            self.w_f_diag = self._get("w_f_diag", (H,), dt, self.initializer)
            self.w_i_diag = self._get("w_i_diag", (H,), dt, self.initializer)
            self.w_o_diag = self._get("w_o_diag", (H,), dt, self.initializer)
        if self.num_proj is not None:
            with variable_scope("projection"):
                self.projection = self._get("kernel", (H, P), dt, self.initializer)
        if self.fused:
            # the fused primitive's layout (PyTorch's: gates i, f, g, o; (4H, depth) and (4H, H)), read from
            # TF1's kernel (gates i, j, f, o; (depth + H, 4H)) once per run, outside any loop over the steps
            perm = np.concatenate([np.arange(0, H), np.arange(2 * H, 3 * H), np.arange(H, 2 * H),
                                   np.arange(3 * H, 4 * H)])
            kt = ops.take(ops.transpose(self.kernel, 1, 0), perm)          # (4H, depth + P), gates i, f, j, o
            self._w_ih, self._w_hh = kt[:, :depth], kt[:, depth:]
            self._b_ih = ops.take(self.bias, perm)
            forget = np.zeros(4 * H, dt)
            forget[H:2 * H] = self.forget_bias
            self._b_hh = forget

    def call(self, inputs, state):
        if not isinstance(state, tuple) or len(state) != 2:
            raise TypeError(f"{type(self).__name__}: state must be an LSTMStateTuple(c, h), got "
                            f"{type(state).__name__}")
        c, m_prev = state
        if self.fused:
            h2, c2 = ops.lstm_cell(inputs, m_prev, c, self._w_ih, self._w_hh, self._b_ih, self._b_hh)
            return h2, LSTMStateTuple(c2, h2)
        H = self._num_units
        act = self.activation or ops.tanh
        z = _concat_matmul(inputs, m_prev, self.kernel, self.bias)
        i, j, f, o = z[:, :H], z[:, H:2 * H], z[:, 2 * H:3 * H], z[:, 3 * H:]
        if self.use_peepholes:
            c2 = (ops.sigmoid(f + self.forget_bias + self.w_f_diag * c) * c
                  + ops.sigmoid(i + self.w_i_diag * c) * act(j))
        else:
            c2 = ops.sigmoid(f + self.forget_bias) * c + ops.sigmoid(i) * act(j)
        if self.cell_clip is not None:
            c2 = ops.clip(c2, -self.cell_clip, self.cell_clip)
        if self.use_peepholes:
            m = ops.sigmoid(o + self.w_o_diag * c2) * act(c2)
        else:
            m = ops.sigmoid(o) * act(c2)
        if self.num_proj is not None:
            m = ops.matmul(m, self.projection)
            if self.proj_clip is not None:
                m = ops.clip(m, -self.proj_clip, self.proj_clip)
        return m, LSTMStateTuple(c2, m)


class BasicLSTMCell(LSTMCell):
    """TF1's ``tf.nn.rnn_cell.BasicLSTMCell``: an :class:`LSTMCell` without
    peepholes, clipping or projection (one fused ``lstm_cell`` step), its
    variables ``basic_lstm_cell/kernel`` and ``basic_lstm_cell/bias``.

    Parameters: ``num_units``, ``forget_bias`` (default 1.0),
    ``state_is_tuple``, ``activation``, ``reuse``, ``name`` (default
    "basic_lstm_cell"), ``dtype``, ``rng``.
    """

    _base_name = "basic_lstm_cell"

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, rng=None):
        super().__init__(num_units, forget_bias=forget_bias, state_is_tuple=state_is_tuple, activation=activation,
                         reuse=reuse, name=name, dtype=dtype, rng=rng)


class GRUCell(RNNCell):
    """Gated recurrent unit cell, TF1's ``tf.nn.rnn_cell.GRUCell`` (Cho et al.
    2014): ``r, u = σ([x, h] W_g + b_g)``, ``c = act([x, r h] W_c + b_c)``,
    ``h' = u h + (1 - u) c`` (the reset gate applied to the state before the
    candidate's product; :class:`TorchGRUCell` is cuDNN's / PyTorch's).

    Parameters
    ----------
    num_units : int
    activation : callable, optional
        Instead of tanh.
    reuse : optional
    kernel_initializer, bias_initializer : callable, optional
        ``init(shape, dtype) -> array``; by default the kernels are the
        scope's or Glorot-uniform, ``gates/bias`` ones and
        ``candidate/bias`` zeros, as TF1.
    name : str, default "gru_cell"
    dtype, rng : as :class:`LSTMCell`.
    """

    _base_name = "gru_cell"

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None, bias_initializer=None,
                 name=None, dtype=None, rng=None):
        super().__init__(num_units, name, dtype, rng, reuse)
        self.activation = activation
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def _create(self, depth, dt):
        H = self._num_units
        with variable_scope("gates"):
            self.gates_kernel = self._get("kernel", (depth + H, 2 * H), dt, self.kernel_initializer)
            self.gates_bias = self._get("bias", (2 * H,), dt, self.bias_initializer or np.ones((2 * H,), dt))
        with variable_scope("candidate"):
            self.candidate_kernel = self._get("kernel", (depth + H, H), dt, self.kernel_initializer)
            self.candidate_bias = self._get("bias", (H,), dt, self.bias_initializer or np.zeros((H,), dt))

    def call(self, inputs, state):
        H = self._num_units
        value = ops.sigmoid(_concat_matmul(inputs, state, self.gates_kernel, self.gates_bias))
        r, u = value[:, :H], value[:, H:]
        c = (self.activation or ops.tanh)(_concat_matmul(inputs, r * state, self.candidate_kernel,
                                                           self.candidate_bias))
        h2 = u * state + (1.0 - u) * c
        return h2, h2


# --------------------------------------------------------------------------
# wrappers
# --------------------------------------------------------------------------

class MultiRNNCell(RNNCell):
    """Cells stacked (TF1's ``tf.nn.rnn_cell.MultiRNNCell``): cell k reads
    cell k-1's output; the state is the tuple of the cells' states; cell k's
    variables live under ``multi_rnn_cell/cell_<k>/`` (TF1's names).

    Parameters
    ----------
    cells : list of cells
    state_is_tuple : True
        TF1's concatenated state is deprecated there and absent here.
    """

    _base_name = "multi_rnn_cell"

    def __init__(self, cells, state_is_tuple=True):
        cells = list(cells)
        if not cells:
            raise ValueError("MultiRNNCell: must specify at least one cell")
        if state_is_tuple is not True:
            raise ValueError("MultiRNNCell: only state_is_tuple=True is supported (the state is a tuple of the "
                             "cells' states)")
        self._cells = cells
        self._given_name = None
        self.name = self._base_name
        self.dtype = None
        self._rng = None
        self._reuse = None
        self.built = False
        self.scope_name = None
        self._num_units = cells[-1].output_size

    @property
    def cells(self):
        return list(self._cells)

    @property
    def state_size(self):
        return tuple(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    @property
    def variables(self):
        return [v for c in self._cells for v in c.variables]

    def build(self, inputs_shape, graph=None):
        if self.built:
            return
        g = _outermost(graph if graph is not None else get_default_graph())
        depth = inputs_shape[-1]
        with g.as_default(), variable_scope(None, default_name=self._base_name) as scope:
            self.scope_name = scope.name
            for k, cell in enumerate(self._cells):
                with variable_scope(f"cell_{k}"):
                    cell.build((None, depth), g)
                depth = cell.output_size
        self.built = True

    def call(self, inputs, state):
        if not isinstance(state, tuple) or isinstance(state, LSTMStateTuple) or len(state) != len(self._cells):
            raise TypeError(f"MultiRNNCell: state must be a tuple of {len(self._cells)} cell states, got "
                            f"{type(state).__name__}")
        cur, new = inputs, []
        for cell, s in zip(self._cells, state):
            cur, ns = cell(cur, s)
            new.append(ns)
        return cur, tuple(new)


def _keep(name, p):
    """A keep probability: a float in (0, 1], or a scalar Value (a placeholder
    made without a shape gets rank 0, checked when the graph runs)."""
    if isinstance(p, Value):
        return p
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 < p <= 1:
        raise ValueError(f"DropoutWrapper: {name} must be a float in (0, 1] or a scalar Value, got {p!r}")
    return float(p)


class DropoutWrapper(RNNCell):
    """Dropout on a cell's inputs, outputs and state (TF1's
    ``tf.nn.rnn_cell.DropoutWrapper``; Srivastava et al. 2014, Zaremba et
    al. 2014 for the non-recurrent connections).

    Parameters
    ----------
    cell : a cell
    input_keep_prob, output_keep_prob, state_keep_prob : float or scalar Value
        The probability to keep each element (1.0: no dropout there; a
        placeholder fed 1.0 at evaluation, as TF1 scripts do, is exact).
        The state's dropout applies to ``h`` of an LSTM state, not ``c``
        (TF1's default ``dropout_state_filter_visitor``).
    variational_recurrent : False
        One mask per sequence (Gal and Ghahramani 2016) is not supported:
        an error.
    input_size, dtype
        Accepted (they matter to TF1 only with ``variational_recurrent``).
    seed : int, optional
        The op seed of the masks (TF1's seed rules).
    dropout_state_filter_visitor : None
        Not supported unless None (TF1's default).

    Notes
    -----
    Masks are TF1's: an element is kept where a uniform draw is ``>= 1 -
    keep_prob`` and scaled by ``1 / keep_prob``; new at every step and run.
    """

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None):
        if variational_recurrent:
            raise ValueError("DropoutWrapper: variational_recurrent=True (one mask per sequence, Gal and "
                             "Ghahramani 2016) is not supported; use variational_recurrent=False (a new mask at "
                             "every step)")
        if dropout_state_filter_visitor is not None:
            raise ValueError("DropoutWrapper: dropout_state_filter_visitor is not supported (the state's dropout "
                             "applies to h of an LSTM state and to the whole state of other cells, TF1's default)")
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(f"DropoutWrapper: cell must be an RNN cell, got {type(cell).__name__}")
        self._cell = cell
        self._keeps = {"input": _keep("input_keep_prob", input_keep_prob),
                       "output": _keep("output_keep_prob", output_keep_prob),
                       "state": _keep("state_keep_prob", state_keep_prob)}
        for k, p in self._keeps.items():
            if isinstance(p, Value):
                # in the keep probability's own graph, before any loop: a loop body captures the scalar
                with _outermost(p.graph).as_default():
                    self._keeps[k] = scalar_probability("DropoutWrapper", f"{k}_keep_prob", p, p.dtype)
        self.seed = seed
        self._given_name = None
        self.name = getattr(cell, "name", "dropout_wrapper")
        self.dtype = None
        self._rng = None
        self._reuse = None
        self.built = False
        self.scope_name = None
        self._input_depth = None
        # site -> this step's uniform draws, set by dynamic_rnn while it builds its loop body (so the body
        # itself draws nothing)
        self.step_noise = {}

    @property
    def wrapped_cell(self):
        return self._cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    @property
    def variables(self):
        return self._cell.variables

    def zero_state(self, batch_size, dtype):
        return self._cell.zero_state(batch_size, dtype)

    def build(self, inputs_shape, graph=None):
        if self.built:
            return
        self._input_depth = inputs_shape[-1]
        self._cell.build(inputs_shape, graph)
        self.built = True

    def _applies(self, site):
        p = self._keeps[site]
        return isinstance(p, Value) or p < 1.0      # TF1's _should_dropout: a Value always

    def dropout_sites(self):
        """(site, width) of each dropout this wrapper applies per step (the
        masks ``dynamic_rnn`` draws before its loop)."""
        out = []
        if self._applies("input"):
            out.append(("input", self._input_depth))
        if self._applies("state"):
            s = self._cell.state_size
            out.append(("state", s.h if isinstance(s, LSTMStateTuple) else s))
        if self._applies("output"):
            out.append(("output", self._cell.output_size))
        return out

    def _drop(self, site, x, k):
        if not self._applies(site):
            return x
        p = self._keeps[site]
        dt = x.dtype
        keep = p if isinstance(p, Value) else np.asarray(p, dt)
        if isinstance(keep, Value) and keep.dtype != dt:
            keep = ops.astype(keep, dt)
        u = self.step_noise.get(site)
        if u is None:
            seed = None if self.seed is None else self.seed + k
            u = random_uniform(shape(x), dtype=dt, seed=seed)
        rate = ops.sub(1.0, keep)
        kept = ops.astype(ops.greater_equal(u, rate), dt)
        return ops.mul(ops.mul(x, ops.div(1.0, ops.sub(1.0, rate))), kept)

    def __call__(self, inputs, state, scope=None):
        self.build(inputs.shape, inputs.graph if isinstance(inputs, Value) else None)
        return self.call(inputs, state)

    def call(self, inputs, state):
        inputs = self._drop("input", inputs, 0)
        out, new = self._cell(inputs, state)
        if self._applies("state"):
            if isinstance(new, LSTMStateTuple):
                new = LSTMStateTuple(new.c, self._drop("state", new.h, 1))
            elif isinstance(new, tuple):
                raise TypeError("DropoutWrapper: state_keep_prob of a cell whose state is a tuple other than an "
                                "LSTMStateTuple is not supported")
            else:
                new = self._drop("state", new, 1)
        return self._drop("output", out, 2), new


# --------------------------------------------------------------------------
# PyTorch's layout
# --------------------------------------------------------------------------

class _TorchCell(RNNCell):
    """Base of the PyTorch-layout cells: ``Variable``s named ``<name>/...``
    in the open name scope, Glorot-uniform weights from ``rng=`` or
    dynnets' default generator (:func:`dynnets.manual_seed`)."""

    def __init__(self, num_units, name, dtype, rng):
        super().__init__(num_units, name, dtype, rng)
        if self._rng is None:
            self._rng = default_generator

    def build(self, inputs_shape, graph=None):
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


class TorchLSTMCell(_TorchCell):
    """Long short-term memory cell with PyTorch's variables and layout
    (``weight_ih`` (4H, depth), ``weight_hh`` (4H, H), ``bias_ih``,
    ``bias_hh``, gates i, f, g, o): ``torch.nn.LSTMCell``'s maths with
    ``LSTMCell``'s interface and options, the fused ``lstm_cell`` step, the
    eager ``nn.LSTMCell``'s weights unchanged. Not TF1's: its two bias
    variables each take an optimizer step (TF1's one bias moves half as far),
    and its names are not TF1's. dynnets' static models that must take the
    eager models' steps use it.

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
        The variables are ``<name>/weight_ih`` etc. (inside the open name scope).
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
        _lstm_options(self, use_peepholes, cell_clip, initializer, num_proj, proj_clip, forget_bias, state_is_tuple,
                      activation)

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




class TorchGRUCell(_TorchCell):
    """Gated recurrent unit cell (Cho et al. 2014) with the maths and
    variables of cuDNN and PyTorch (``torch.nn.GRUCell``, TF's
    ``CudnnCompatibleGRUCell`` maths): the reset gate applied after the
    recurrent product, r = σ(x W_ir + b_ir + h W_hr + b_hr), z likewise,
    n = act(x W_in + b_in + r (h W_hn + b_hn)), h' = (1 - z) n + z h; one
    fused ``gru_cell`` step. Not ``tf.nn.rnn_cell.GRUCell`` (:class:`GRUCell`),
    which multiplies ``h`` by ``r`` before its candidate product.

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
