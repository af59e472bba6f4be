"""Recurrent cells with PyTorch's maths, parameter names and shapes.

``weight_ih`` (G*H, input_size), ``weight_hh`` (G*H, H), ``bias_ih`` (G*H,),
``bias_hh`` (G*H,), with the gates stacked in PyTorch's order, so the arrays
of a ``torch.nn.LSTMCell`` / ``GRUCell`` / ``RNNCell`` state_dict load
unchanged (``cell.load_state_dict({k: v.numpy() for k, v in sd.items()})``).

All parameters are initialised U(-1/sqrt(H), 1/sqrt(H)), as PyTorch does, in
the order weight_ih, weight_hh, bias_ih, bias_hh, from ``rng=`` or, without
it, from the default generator (:func:`dynnets.manual_seed`). A step is one fused
primitive (LSTM, GRU: Numba kernels) or two ``linear`` ops and a nonlinearity
(RNN).
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd import ops
from .module import (Module, Parameter, as_generator, check_device, check_float_input, float_dtype, positive_int,
                     uniform_)

__all__ = ["RNNCell", "GRUCell", "LSTMCell"]


class _CellBase(Module):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias, device, dtype, rng):
        super().__init__()
        name = type(self).__name__
        self.input_size = positive_int(name, "input_size", input_size)
        self.hidden_size = positive_int(name, "hidden_size", hidden_size)
        check_device(name, device)
        dt = float_dtype(name, dtype)
        gen = as_generator(rng)
        G, H = self._gates, hidden_size
        bound = 1.0 / math.sqrt(H)
        self.weight_ih = Parameter(uniform_(gen, (G * H, input_size), bound, dt))
        self.weight_hh = Parameter(uniform_(gen, (G * H, H), bound, dt))
        if bias:
            self.bias_ih = Parameter(uniform_(gen, (G * H,), bound, dt))
            self.bias_hh = Parameter(uniform_(gen, (G * H,), bound, dt))
        else:
            self.bias_ih = None
            self.bias_hh = None
            self._zero_bias = np.zeros(G * H, dtype=dt)

    def _cast_constants(self, dtype):
        if self.bias_ih is None:
            self._zero_bias = self._zero_bias.astype(dtype)

    def _biases(self):
        if self.bias_ih is None:
            return self._zero_bias, self._zero_bias
        return self.bias_ih, self.bias_hh

    def _batched(self, x):
        """(x as 2-D, whether it was 1-D). An unbatched (input_size,) input is
        treated as a batch of one, as PyTorch does. Its dtype must be the
        weights' (DTypeError otherwise, as torch)."""
        x = check_float_input(type(self).__name__, x, self.weight_ih)
        shape = x.shape
        if len(shape) == 1:
            return ops.reshape(x, 1, shape[0]), True
        if len(shape) != 2:
            raise ValueError(f"{type(self).__name__}: input must be (batch, {self.input_size}) or "
                             f"({self.input_size},), got shape {tuple(shape)}")
        return x, False

    def _state(self, h, batch, unbatched, what="hx"):
        """A given state reshaped to 2-D, or zeros (batch, H) when ``h`` is None."""
        if h is None:
            if batch is None:
                raise ValueError(f"{type(self).__name__}: the batch size of the input is unknown (a symbolic "
                                 f"value), so the zero initial state cannot be made; pass {what} explicitly")
            # .dtype, not .data.dtype: under functional_call the weight may be a static Value
            return np.zeros((batch, self.hidden_size), dtype=self.weight_ih.dtype)
        if isinstance(h, (list, tuple)) or not hasattr(h, "shape"):
            raise TypeError(f"{type(self).__name__}: {what} must be an array or Tensor, got {type(h).__name__}")
        check_float_input(type(self).__name__, h, self.weight_hh, what)
        if unbatched:
            if len(h.shape) != 1:
                raise ValueError(f"{type(self).__name__}: {what} must be 1-D ({self.hidden_size},) for an unbatched "
                                 f"input, got shape {tuple(h.shape)}")
            return ops.reshape(h, 1, h.shape[0])
        return h

    @staticmethod
    def _unbatch(t):
        return ops.reshape(t, t.shape[1])

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        return s + (", bias=False" if self.bias_ih is None else "")


class RNNCell(_CellBase):
    """Elman RNN cell (as ``torch.nn.RNNCell``):

    h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh),  act = tanh or relu.

    Parameters
    ----------
    input_size, hidden_size : int
    bias : bool
    nonlinearity : {'tanh', 'relu'}
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    rng : int, Generator or None (keyword-only)

    Inputs and states must have the weights' dtype (DTypeError otherwise, as
    torch raises).

    Notes
    -----
    Attributes: ``weight_ih`` (H, input_size), ``weight_hh`` (H, H),
    ``bias_ih``, ``bias_hh`` (H,), all U(-1/sqrt(H), 1/sqrt(H)).

    ``forward(x (B, input_size) or (input_size,), h=None) -> h' (B, H) or (H,)``;
    ``h`` defaults to zeros.
    """

    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None, *, rng=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, device, dtype, rng)
        self.nonlinearity = nonlinearity

    def forward(self, x, h=None):
        x2, unb = self._batched(x)
        h2 = self._state(h, x2.shape[0], unb, "h")
        b_ih, b_hh = self._biases()
        pre = ops.linear(x2, self.weight_ih, b_ih) + ops.linear(h2, self.weight_hh, b_hh)
        out = ops.tanh(pre) if self.nonlinearity == "tanh" else ops.relu(pre)
        return self._unbatch(out) if unb else out

    def extra_repr(self):
        s = super().extra_repr()
        return s + (f", nonlinearity={self.nonlinearity!r}" if self.nonlinearity != "tanh" else "")


class GRUCell(_CellBase):
    """Gated recurrent unit cell (Cho et al. 2014), PyTorch's formulation:

    r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr)
    z = sigmoid(x W_iz^T + b_iz + h W_hz^T + b_hz)
    n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))
    h' = (1 - z) * n + z * h

    Attributes: ``weight_ih`` (3H, input_size) stacking W_ir, W_iz, W_in;
    ``weight_hh`` (3H, H); ``bias_ih``, ``bias_hh`` (3H,); all
    U(-1/sqrt(H), 1/sqrt(H)).

    ``forward(x (B, input_size) or (input_size,), h=None) -> h' (B, H) or (H,)``;
    one fused ``gru_cell`` primitive.
    """

    _gates = 3
    _supports_half = False              # the fused gru_cell kernel takes float32/float64

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None, *, rng=None):
        super().__init__(input_size, hidden_size, bias, device, dtype, rng)

    def forward(self, x, h=None):
        x2, unb = self._batched(x)
        h2 = self._state(h, x2.shape[0], unb, "h")
        b_ih, b_hh = self._biases()
        out = ops.gru_cell(x2, h2, self.weight_ih, self.weight_hh, b_ih, b_hh)
        return self._unbatch(out) if unb else out


class LSTMCell(_CellBase):
    """Long short-term memory cell (Hochreiter & Schmidhuber 1997), PyTorch's
    formulation with gates stacked i, f, g, o:

    [i, f, g, o] = x W_ih^T + b_ih + h W_hh^T + b_hh
    i, f, o = sigmoid(.), g = tanh(.)
    c' = f * c + i * g;  h' = o * tanh(c')

    Attributes: ``weight_ih`` (4H, input_size), ``weight_hh`` (4H, H),
    ``bias_ih``, ``bias_hh`` (4H,); all U(-1/sqrt(H), 1/sqrt(H)).

    ``forward(x (B, input_size) or (input_size,), hx=None) -> (h', c')``, each
    (B, H) or (H,); ``hx = (h, c)`` defaults to zeros. One fused
    ``lstm_cell`` primitive.
    """

    _gates = 4
    _supports_half = False              # the fused lstm_cell kernel takes float32/float64

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None, *, rng=None):
        super().__init__(input_size, hidden_size, bias, device, dtype, rng)

    def forward(self, x, hx=None):
        x2, unb = self._batched(x)
        if hx is None:
            h2 = c2 = self._state(None, x2.shape[0], unb)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"LSTMCell: hx must be a pair (h, c) of (batch, {self.hidden_size}) states, "
                                f"got {type(hx).__name__}")
            h2 = self._state(hx[0], x2.shape[0], unb, "h")
            c2 = self._state(hx[1], x2.shape[0], unb, "c")
        b_ih, b_hh = self._biases()
        h, c = ops.lstm_cell(x2, h2, c2, self.weight_ih, self.weight_hh, b_ih, b_hh)
        if unb:
            return self._unbatch(h), self._unbatch(c)
        return h, c
