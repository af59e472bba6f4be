"""TF1's ``tf.nn.dynamic_rnn`` and ``tf.nn.bidirectional_dynamic_rnn``: a
recurrent cell run over a batch of padded sequences inside the graph, by
``while_loop`` and ``TensorArray``, so one graph serves every batch size and
every length."""
from __future__ import annotations

import numpy as np

from ..autograd import ops
from .array_ops import check_same_size, ensure_shape, reverse_sequence, shape
from .control_flow import TensorArray, while_loop
from .graph import Value, constant
from .random import random_uniform
from .rnn_cell import DropoutWrapper, LSTMStateTuple, MultiRNNCell
from .variable_scope import VariableScope, variable_scope
from ..pytree import tree_flatten

__all__ = ["dynamic_rnn", "bidirectional_dynamic_rnn"]


def _flatten(state):
    """(the arrays of a state structure in order, its TreeDef): one array, an
    LSTMStateTuple, or a tuple of those (MultiRNNCell's)."""
    flat, kind = tree_flatten(state, is_leaf=_state_leaf)
    if any(isinstance(s, list) for s in flat):
        raise TypeError(f"dynamic_rnn: a state must be an array, an LSTMStateTuple or a tuple of them, got a list")
    return flat, kind


def _state_leaf(s):
    return not isinstance(s, tuple)


def _dropout_sites(cell):
    """(wrapper, site, width) of every per-step dropout of ``cell`` (its
    DropoutWrappers, inside MultiRNNCells too)."""
    if isinstance(cell, DropoutWrapper):
        return [(cell, site, w) for site, w in cell.dropout_sites()] + _dropout_sites(cell.wrapped_cell)
    if isinstance(cell, MultiRNNCell):
        return [s for c in cell.cells for s in _dropout_sites(c)]
    return []


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
    with g.as_default(), _scope(scope, "rnn"):
        return _dynamic_rnn(cell, inputs, sequence_length, initial_state, dtype, time_major, g)


def _scope(scope, default):
    """TF1's ``variable_scope(scope or default)``: a VariableScope object is
    re-entered as it is (bidirectional_dynamic_rnn passes its fw/bw scopes)."""
    return variable_scope(scope if isinstance(scope, (str, VariableScope)) and scope else default)


def _dynamic_rnn(cell, inputs, sequence_length, initial_state, dtype, time_major, g):
    x = inputs if time_major else ops.transpose(inputs, 1, 0, 2)          # (T, B, D)
    cell.build(x.shape, g)
    dt = np.dtype(dtype) if dtype is not None else _flatten(initial_state)[0][0].dtype
    steps = shape(x)[0]
    batch = shape(x)[1]
    state = initial_state if initial_state is not None else cell.zero_state(batch, dt)
    flat, kind = _flatten(state)
    if sequence_length is not None:
        if not isinstance(sequence_length, Value):
            sequence_length = constant(np.asarray(sequence_length, dtype=np.int64))
        if len(sequence_length.shape) != 1:
            raise ValueError(f"dynamic_rnn: sequence_length must be 1-D (batch,), got shape {sequence_length.shape}")
        if sequence_length.dtype.kind not in "iu":
            raise TypeError(f"dynamic_rnn: sequence_length must hold integers, got dtype {sequence_length.dtype}")
        # one length per sequence: checked now when both sizes are known, else when the graph runs (inside
        # the loop a mismatch would only surface as a broadcasting error of some op of the cell)
        sequence_length = check_same_size(sequence_length, 0, inputs, 1 if time_major else 0, "dynamic_rnn",
                                          "sequence_length", "inputs", "its batch size")
    input_ta = TensorArray(x.dtype, size=steps, element_shape=x.shape[1:]).unstack(x)
    output_ta = TensorArray(dt, size=steps, element_shape=(x.shape[1], cell.output_size))
    n_state = len(flat)
    # the uniform draws of every step's dropout, made here, outside the loop: the loop's gradient
    # recomputes the body, which must then draw nothing
    sites = _dropout_sites(cell)
    noise = []
    for k, (w, site, width) in enumerate(sites):
        seed = None if w.seed is None else w.seed + 3 * k
        u = random_uniform([steps, batch, width], dtype=dt, seed=seed)
        noise.append(TensorArray(dt, size=steps, element_shape=(x.shape[1], width)).unstack(u))

    def cond(time, out_ta, *state_flat):
        return ops.less(time, steps)

    def body(time, out_ta, *state_flat):
        old = kind.unflatten(state_flat)
        for (w, site, _), ta in zip(sites, noise):
            w.step_noise[site] = ta.read(time)
        try:
            out, new = cell(input_ta.read(time), old)
        finally:
            for w, _, _ in sites:
                w.step_noise.clear()
        new_flat, _ = _flatten(new)
        if sequence_length is not None:
            m = ops.astype(ops.less(time, sequence_length), dt)[:, None]      # (B, 1): 1 while running
            keep = 1.0 - m
            out = out * m
            new_flat = [m * n + keep * o for n, o in zip(new_flat, state_flat)]
        return [time + 1, out_ta.write(time, out), *new_flat]

    time0 = constant(np.asarray(0, dtype=np.int32))
    res = while_loop(cond, body, [time0, output_ta, *flat], maximum_iterations=steps)
    outputs = res[1].stack()
    final = kind.unflatten(res[2:2 + n_state])
    # the sizes the input's static shape knows (the time steps above all) are the outputs' too, as TF1's
    outputs = ensure_shape(outputs, [x.shape[0], x.shape[1], cell.output_size])
    if not time_major:
        outputs = ops.transpose(outputs, 1, 0, 2)
    return outputs, final


def _reverse_time(x, sequence_length, time_major):
    """``x`` with each sequence's first ``sequence_length`` steps reversed (all
    steps without lengths), as TF1's bidirectional RNN reverses its inputs."""
    t_axis, b_axis = (0, 1) if time_major else (1, 0)
    if sequence_length is None:
        return ops.getitem(x, (slice(None),) * t_axis + (slice(None, None, -1),))
    return reverse_sequence(x, sequence_length, seq_axis=t_axis, batch_axis=b_axis)


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None, initial_state_fw=None,
                              initial_state_bw=None, dtype=None, parallel_iterations=None, swap_memory=False,
                              time_major=False, scope=None):
    """A forward and a backward :func:`dynamic_rnn` over the same inputs
    (TF1's ``tf.nn.bidirectional_dynamic_rnn``).

    The backward cell reads each sequence from its last real step to its
    first: its inputs are reversed per sequence by ``reverse_sequence`` (the
    first ``sequence_length[b]`` steps of sequence ``b``; the padding stays in
    place) and its outputs reversed back the same way, so ``output_bw[:, t]``
    is aligned with ``inputs[:, t]``. Variables are made under
    ``<scope>/fw`` and ``<scope>/bw`` (scope default ``bidirectional_rnn``),
    as TF1's: ``bidirectional_rnn/fw/basic_lstm_cell/kernel``.

    Returns
    -------
    (output_fw, output_bw) : Values
        (batch, time, units) each (time-major with ``time_major``); past a
        sequence's length both are zero.
    (output_state_fw, output_state_bw)
        Each cell's state after the last real step of every sequence.
    """
    if not isinstance(inputs, Value):
        raise TypeError(f"bidirectional_dynamic_rnn: inputs must be a Value of a static graph, got "
                        f"{type(inputs).__name__}")
    g = inputs.graph
    if sequence_length is not None and not isinstance(sequence_length, Value):
        with g.as_default():
            sequence_length = constant(np.asarray(sequence_length, dtype=np.int64))
    with g.as_default(), _scope(scope, "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = dynamic_rnn(cell_fw, inputs, sequence_length, initial_state_fw, dtype,
                                           time_major=time_major, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            rev = _reverse_time(inputs, sequence_length, time_major)
            out_rev, state_bw = dynamic_rnn(cell_bw, rev, sequence_length, initial_state_bw, dtype,
                                            time_major=time_major, scope=bw_scope)
            out_bw = _reverse_time(out_rev, sequence_length, time_major)
    return (out_fw, out_bw), (state_fw, state_bw)
