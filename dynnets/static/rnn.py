"""TF1's ``tf.nn.dynamic_rnn``: a recurrent cell run over a batch of padded
sequences inside the graph, by ``while_loop`` and ``TensorArray``, so one
graph serves every batch size and every length."""
from __future__ import annotations

import numpy as np

from ..autograd import ops
from .array_ops import shape
from .control_flow import TensorArray, while_loop
from .graph import Value, constant
from .rnn_cell import LSTMStateTuple

__all__ = ["dynamic_rnn"]


def _flatten(state):
    if isinstance(state, LSTMStateTuple):
        return [state.c, state.h], LSTMStateTuple
    if isinstance(state, (tuple, list)):
        raise TypeError(f"dynamic_rnn: a state must be one array or an LSTMStateTuple, got {type(state).__name__}")
    return [state], None


def _pack(flat, kind):
    return LSTMStateTuple(*flat) if kind is LSTMStateTuple else flat[0]


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None, parallel_iterations=None,
                swap_memory=False, time_major=False, scope=None):
    """Run ``cell`` over ``inputs``; returns ``(outputs, final_state)``, as TF1.

    Parameters
    ----------
    cell : an :mod:`~dynnets.static.rnn_cell` cell
        ``cell(x_t, state) -> (output, new_state)``; its variables are built
        before the loop, so the loop body only reads them.
    inputs : Value
        (batch, time, depth), or (time, batch, depth) with ``time_major``;
        batch and time may be unknown (None) dimensions.
    sequence_length : Value or array of ints, optional
        (batch,) lengths: past its length a sequence's outputs are zero and
        its state is carried unchanged, so ``final_state`` is the state after
        its last step (as TF1). Without it every sequence runs all steps.
    initial_state : optional
        The cell's state structure; default ``cell.zero_state(batch, dtype)``.
    dtype : numpy dtype
        Needed when ``initial_state`` is not given (as TF1).
    time_major : bool

    Returns
    -------
    outputs : Value
        (batch, time, output_size), or time-major with ``time_major``.
    final_state : the cell's state structure (an LSTMStateTuple for LSTM cells)

    The loop runs ``time`` iterations (the fed length: pad a batch to its
    own longest sequence to spend no step on padding at the end). Its
    gradient is the ``while_loop``'s. ``parallel_iterations``,
    ``swap_memory`` and ``scope`` are accepted for TF1 code and change nothing.
    """
    if not isinstance(inputs, Value):
        raise TypeError(f"dynamic_rnn: inputs must be a Value of a static graph (a placeholder or an op on one), got "
                        f"{type(inputs).__name__}")
    if len(inputs.shape) != 3:
        raise ValueError(f"dynamic_rnn: inputs must be 3-D ({'time, batch' if time_major else 'batch, time'}, depth), "
                         f"got '{inputs.name}' with shape {inputs.shape}")
    if initial_state is None and dtype is None:
        raise ValueError("dynamic_rnn: if there is no initial_state, you must give a dtype")
    g = inputs.graph
    x = inputs if time_major else ops.transpose(inputs, 1, 0, 2)          # (T, B, D)
    cell.build(x.shape, g)
    dt = np.dtype(dtype) if dtype is not None else _flatten(initial_state)[0][0].dtype
    steps = shape(x)[0]
    batch = shape(x)[1]
    state = initial_state if initial_state is not None else cell.zero_state(batch, dt)
    flat, kind = _flatten(state)
    if sequence_length is not None:
        if not isinstance(sequence_length, Value):
            with g.as_default():
                sequence_length = constant(np.asarray(sequence_length, dtype=np.int64))
        if len(sequence_length.shape) != 1:
            raise ValueError(f"dynamic_rnn: sequence_length must be 1-D (batch,), got shape {sequence_length.shape}")
    with g.as_default():
        input_ta = TensorArray(x.dtype, size=steps, element_shape=x.shape[1:]).unstack(x)
        output_ta = TensorArray(dt, size=steps, element_shape=(x.shape[1], cell.output_size))
    n_state = len(flat)

    def cond(time, out_ta, *state_flat):
        return ops.less(time, steps)

    def body(time, out_ta, *state_flat):
        old = _pack(list(state_flat), kind)
        out, new = cell(input_ta.read(time), old)
        new_flat, _ = _flatten(new)
        if sequence_length is not None:
            m = ops.astype(ops.less(time, sequence_length), dt)[:, None]      # (B, 1): 1 while running
            keep = 1.0 - m
            out = out * m
            new_flat = [m * n + keep * o for n, o in zip(new_flat, state_flat)]
        return [time + 1, out_ta.write(time, out), *new_flat]

    with g.as_default():
        time0 = constant(np.asarray(0, dtype=np.int64))
        res = while_loop(cond, body, [time0, output_ta, *flat], maximum_iterations=steps)
    outputs = res[1].stack()
    final = _pack(list(res[2:2 + n_state]), kind)
    if not time_major:
        outputs = ops.transpose(outputs, 1, 0, 2)
    return outputs, final
