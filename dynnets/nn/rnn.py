"""Multi-layer recurrent layers with PyTorch's interface: ``RNN``, ``GRU``, ``LSTM``.

Parameters have ``torch.nn.RNN`` / ``GRU`` / ``LSTM``'s names, shapes and
gate order: ``weight_ih_l{k}`` (G*H, input_size for k = 0, else
num_directions*H), ``weight_hh_l{k}`` (G*H, H), ``bias_ih_l{k}``,
``bias_hh_l{k}`` (G*H,), and the same with the suffix ``_reverse`` for the
backward direction (G = 1, 3, 4), so a PyTorch state_dict loads unchanged
(``layer.load_state_dict({k: v.numpy() for k, v in torch_layer.state_dict().items()})``).
They are initialised U(-1/sqrt(H), 1/sqrt(H)) in that registration order
(layer, direction, then weight_ih, weight_hh, bias_ih, bias_hh).

Execution: every input form becomes a packed batch (see
:mod:`dynnets.nn.utils.rnn`), and each layer and direction is one matrix
product for the input projections of all steps plus one ``lstm_seq`` /
``gru_seq`` / ``rnn_seq`` primitive, whose forward and VJP run only the
sequences still running at each step. The backward direction reads the
packed rows of each sequence in reverse order (the same layout, because a
reversed sequence has the same length), and its outputs are put back in
token order before the next layer. So each sequence gets exactly what it
would get alone, whatever the batch.

Those primitives start from a zero state and know only tanh for ``RNN``. With
an initial state ``hx`` or ``nonlinearity='relu'`` the layer runs one fused
cell op per time step instead (``lstm_cell``, ``gru_cell``, or two ``linear``
ops and the nonlinearity): the same numbers, more ops per sequence.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd import ops
from ..autograd.tensor import Tensor, tensor_like
from . import functional as F
from .module import (Module, Parameter, as_generator, check_device, check_float_input, float_dtype, positive_int,
                     uniform_)
from .utils.rnn import PackedSequence, pack_padded_sequence, pack_sequence, packed_layout, pad_packed_sequence

__all__ = ["RNNBase", "RNN", "GRU", "LSTM"]


def _rows(ts):
    return ts[0] if len(ts) == 1 else ops.concat(ts, axis=0)


class RNNBase(Module):
    """The machinery shared by :class:`RNN`, :class:`GRU` and :class:`LSTM`
    (see the module docstring); use those."""

    _gates = 1
    _cell = "rnn"
    _supports_half = False              # the fused lstm_seq / gru_seq / rnn_seq kernels take float32/float64

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None, *, nonlinearity="tanh", rng=None):
        super().__init__()
        name = type(self).__name__
        if proj_size:
            raise ValueError(f"{name}: proj_size={proj_size!r} is not supported (only 0, no projection)")
        check_device(name, device)
        self.input_size = positive_int(name, "input_size", input_size)
        self.hidden_size = H = positive_int(name, "hidden_size", hidden_size)
        self.num_layers = positive_int(name, "num_layers", num_layers)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"{name}: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float, np.floating)) \
                or not 0.0 <= float(dropout) <= 1.0:
            raise ValueError(f"{name}: dropout must be a probability in [0, 1], got {dropout!r}")
        self.dropout = float(dropout)
        if self.dropout > 0 and self.num_layers == 1:
            warnings.warn(f"{name}: dropout={self.dropout} has no effect with num_layers=1: it applies to the "
                          f"outputs of every layer but the last", UserWarning, stacklevel=2)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.bidirectional = bool(bidirectional)
        dt = float_dtype(name, dtype)
        gen = as_generator(rng)
        # masks of the dropout between layers: from the given generator, or the
        # default one at call time (as nn.Dropout)
        self.rng = None if rng is None else gen
        G, D = self._gates, self.num_directions
        bound = 1.0 / math.sqrt(H)
        self._names = []
        for k in range(self.num_layers):
            fan_in = self.input_size if k == 0 else D * H
            for d in range(D):
                sfx = f"l{k}" + ("_reverse" if d else "")
                names = [f"weight_ih_{sfx}", f"weight_hh_{sfx}"]
                setattr(self, names[0], Parameter(uniform_(gen, (G * H, fan_in), bound, dt)))
                setattr(self, names[1], Parameter(uniform_(gen, (G * H, H), bound, dt)))
                if self.bias:
                    names += [f"bias_ih_{sfx}", f"bias_hh_{sfx}"]
                    setattr(self, names[2], Parameter(uniform_(gen, (G * H,), bound, dt)))
                    setattr(self, names[3], Parameter(uniform_(gen, (G * H,), bound, dt)))
                self._names.append(tuple(names))
        self._zero_bias = np.zeros(G * H, dtype=dt)

    def _cast_constants(self, dtype):
        self._zero_bias = self._zero_bias.astype(dtype)

    def flatten_parameters(self):
        """A no-op, as torch's off cuDNN: torch packs the weights into one
        cuDNN buffer on the GPU; here each weight is its own array and the
        kernels read them where they are. Returns None, as torch's."""

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    @property
    def all_weights(self):
        """The parameters of each layer and direction, ``[[w_ih, w_hh, b_ih, b_hh], ...]`` (as PyTorch)."""
        return [[getattr(self, n) for n in names] for names in self._names]

    def _weights(self, k):
        names = self._names[k]
        w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
        if self.bias:
            return w_ih, w_hh, getattr(self, names[2]), getattr(self, names[3])
        return w_ih, w_hh, self._zero_bias, self._zero_bias

    # --- input forms -------------------------------------------------------------
    def forward(self, input, hx=None, lengths=None):
        """Run the layers over a batch of sequences.

        Parameters
        ----------
        input : one of
            * a Tensor (T, B, input_size), or (B, T, input_size) with
              ``batch_first``: B sequences of T steps each, or of
              ``lengths[i]`` steps each when ``lengths`` is given (a padded
              batch; what lies past a length is never read);
            * a Tensor (T, input_size): one sequence (unbatched);
            * a :class:`~dynnets.nn.utils.rnn.PackedSequence`;
            * a list of Tensors (L_i, input_size) of any lengths, in any order.
        hx : Tensor or None
            Initial hidden state (num_layers * num_directions, B, H), in the
            batch's order ((num_layers * num_directions, H) for an unbatched
            input); for LSTM a pair ``(h_0, c_0)``. None: zeros.
        lengths : (B,) ints in [1, T], optional
            Lengths of a padded Tensor batch, in any order; the same as
            ``pack_padded_sequence(input, lengths, batch_first, enforce_sorted=False)``
            with the output unpacked by ``pad_packed_sequence``.

        Returns
        -------
        output
            Last layer's states at every step, num_directions * H features
            (forward then backward), in the input's form: a padded Tensor
            (zeros past each length), a PackedSequence of the same layout, or
            a list of (L_i, D*H) Tensors.
        h_n : Tensor (num_layers * num_directions, B, H)
            Each layer and direction's state after the last step of each
            sequence (the backward direction's after its first step), in the
            batch's order, rows ordered layer 0 forward, layer 0 backward,
            layer 1 forward, ... For LSTM the second result is ``(h_n, c_n)``.
        """
        who = type(self).__name__
        form, unbatched = None, False
        if isinstance(input, PackedSequence):
            packed, form = input, "packed"
        elif isinstance(input, (list, tuple)):
            packed, form = pack_sequence(list(input), enforce_sorted=False), "list"
        else:
            # a static Value (also what ds.trace records with) stays symbolic
            x = tensor_like(input)
            nd = len(x.shape)
            if nd == 2:
                if lengths is not None:
                    raise ValueError(f"{who}: lengths= needs a batch (T, B, input_size), got an unbatched input "
                                     f"of shape {tuple(x.shape)}")
                unbatched = True
                x = ops.reshape(x, x.shape[0], 1, x.shape[1])
            elif nd != 3:
                raise ValueError(f"{who}: input must be (T, B, {self.input_size}), (B, T, {self.input_size}) with "
                                 f"batch_first=True, or unbatched (T, {self.input_size}); got shape {tuple(x.shape)}")
            batch_first = self.batch_first and not unbatched
            if lengths is not None:
                packed, form = pack_padded_sequence(x, lengths, batch_first, enforce_sorted=False), "padded"
            else:
                if batch_first:
                    x = ops.transpose(x, 1, 0, 2)
                T, B = x.shape[0], x.shape[1]
                if T is None or B is None:
                    raise ValueError(f"{who}: the number of steps and the batch size must be known when the graph "
                                     f"is built (the recurrence is unrolled over them), got input shape "
                                     f"{tuple(x.shape)}; give the placeholder a full shape")
                packed = PackedSequence(ops.reshape(x, T * B, x.shape[2]), np.full(T, B, dtype=np.int64))
                form = "full"
        if lengths is not None and form in ("packed", "list"):
            raise ValueError(f"{who}: lengths= applies to a padded Tensor batch; a {form} input carries its own")
        data, bs = packed.data, np.asarray(packed.batch_sizes, dtype=np.int64)
        data = check_float_input(who, data, self.weight_ih_l0)
        if len(data.shape) != 2 or data.shape[1] != self.input_size:
            raise ValueError(f"{who}: input has {data.shape[-1] if len(data.shape) else 'no'} features per step, "
                             f"but input_size={self.input_size}")
        B = int(bs[0])
        h0, c0 = self._initial_state(hx, B, packed.sorted_indices, unbatched)
        out, h_n, c_n = self._run(data, bs, h0, c0, packed.unsorted_indices)
        if form == "packed":
            output = PackedSequence(out, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
        elif form == "list":
            output = self._unpack_list(out, bs, packed.unsorted_indices)
        elif form == "padded":
            T = input.shape[1] if self.batch_first else input.shape[0]
            output, _ = pad_packed_sequence(PackedSequence(out, bs, packed.sorted_indices, packed.unsorted_indices),
                                            batch_first=self.batch_first, total_length=T)
        else:
            T = len(bs)
            output = ops.reshape(out, T, B, out.shape[1])
            if unbatched:
                output = ops.reshape(output, T, out.shape[1])
                h_n = ops.reshape(h_n, h_n.shape[0], h_n.shape[2])
                c_n = None if c_n is None else ops.reshape(c_n, c_n.shape[0], c_n.shape[2])
            elif self.batch_first:
                output = ops.transpose(output, 1, 0, 2)
        return output, ((h_n, c_n) if self._cell == "lstm" else h_n)

    def _initial_state(self, hx, B, sorted_indices, unbatched):
        """Per layer and direction, the initial (B, H) states in packed (sorted)
        order, or (None, None) for zeros."""
        who = type(self).__name__
        if hx is None:
            return None, None
        if self._cell == "lstm":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{who}: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
            pair = [("h_0", hx[0]), ("c_0", hx[1])]
        else:
            if isinstance(hx, (tuple, list)):
                raise TypeError(f"{who}: hx must be one Tensor h_0, got a {type(hx).__name__}")
            pair = [("h_0", hx)]
        LD, H = self.num_layers * self.num_directions, self.hidden_size
        want = (LD, H) if unbatched else (LD, B, H)
        out = []
        for what, h in pair:
            if not hasattr(h, "shape"):
                h = np.asarray(h)
            if tuple(h.shape) != want:
                raise ValueError(f"{who}: {what} must have shape (num_layers * num_directions, "
                                 f"{'' if unbatched else 'batch, '}hidden_size) = {want}, got {tuple(h.shape)}")
            check_float_input(who, h, self.weight_hh_l0, what)
            if unbatched:
                h = ops.reshape(h, LD, 1, H)
            if sorted_indices is not None:
                h = ops.getitem(h, (slice(None), np.asarray(sorted_indices)))
            out.append([ops.getitem(h, k) for k in range(LD)])
        return out[0], (out[1] if len(out) > 1 else None)

    @staticmethod
    def _unpack_list(out, bs, unsorted):
        """The packed output rows of each sequence, as a list in the caller's order."""
        lay = packed_layout(bs)
        B = len(lay.lengths)
        rank = np.arange(B) if unsorted is None else np.asarray(unsorted)
        return [ops.take(out, lay.offsets[:lay.lengths[j]] + j) for j in rank.tolist()]

    # --- the recurrence --------------------------------------------------------------
    def _run(self, data, bs, h0, c0, unsorted):
        """Every layer and direction over packed ``data`` (total, input_size);
        returns the last layer's output (total, D*H) and the stacked final
        states in the caller's order."""
        lay = packed_layout(bs)
        final = lay.last if unsorted is None else lay.last[np.asarray(unsorted)]
        stepwise = h0 is not None or self.nonlinearity == "relu"
        D = self.num_directions
        x = data
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                k = layer * D + d
                xin = x if d == 0 else ops.take(x, lay.reverse)
                if stepwise:
                    h, c = self._steps(xin, bs, lay.offsets, self._weights(k),
                                       None if h0 is None else h0[k], None if c0 is None else c0[k])
                else:
                    h, c = self._packed(xin, bs, self._weights(k))
                hs.append(ops.take(h, final))
                if c is not None:
                    cs.append(ops.take(c, final))
                outs.append(h if d == 0 else ops.take(h, lay.reverse))
            x = outs[0] if D == 1 else ops.concat(outs, axis=1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True, generator=self.rng)
        return x, ops.stack(hs, axis=0), (ops.stack(cs, axis=0) if cs else None)

    def _packed(self, x, bs, weights):
        w_ih, w_hh, b_ih, b_hh = weights
        gx = ops.linear(x, w_ih, b_ih)
        if self._cell == "lstm":
            return F.lstm_seq(gx, w_hh, b_hh, bs)
        if self._cell == "gru":
            return F.gru_seq(gx, w_hh, b_hh, bs), None
        return F.rnn_seq(gx, w_hh, b_hh, bs), None

    def _steps(self, x, bs, offsets, weights, h, c):
        """One cell op per time step from the initial states ``h`` / ``c`` (B, H)
        (zeros when None); returns the packed states like :meth:`_packed`."""
        w_ih, w_hh, b_ih, b_hh = weights
        B, H = int(bs[0]), self.hidden_size
        dt = np.result_type(x.dtype, w_hh.dtype)
        zero_h = h is None
        if zero_h:
            h = np.zeros((B, H), dtype=dt)
        if self._cell == "lstm" and c is None:
            c = np.zeros((B, H), dtype=dt)
        gx = ops.linear(x, w_ih, b_ih) if self._cell == "rnn" else None
        act = ops.relu if self.nonlinearity == "relu" else ops.tanh
        hs, cs = [], []
        for n, o in zip(bs.tolist(), offsets.tolist()):
            if n < h.shape[0]:
                h = h[:n]
                c = None if c is None else c[:n]
            if self._cell == "lstm":
                h, c = ops.lstm_cell(x[o:o + n], h, c, w_ih, w_hh, b_ih, b_hh)
                cs.append(c)
            elif self._cell == "gru":
                h = ops.gru_cell(x[o:o + n], h, w_ih, w_hh, b_ih, b_hh)
            elif zero_h:
                # 0 W_hh^T + b_hh is b_hh exactly; skipping the product also keeps
                # an op on the Parameters alone out of a trace
                h = act(gx[o:o + n] + b_hh)
                zero_h = False
            else:
                h = act(gx[o:o + n] + ops.linear(h, w_hh, b_hh))
            hs.append(h)
        return _rows(hs), (_rows(cs) if cs else None)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.nonlinearity != "tanh":
            s += f", nonlinearity={self.nonlinearity!r}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Multi-layer Elman RNN (as ``torch.nn.RNN``):
    ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``, act = tanh or relu.

    Parameters
    ----------
    input_size, hidden_size : int
    num_layers : int, default 1
    nonlinearity : {'tanh', 'relu'}
    bias : bool
    batch_first : bool
        Padded Tensor input and output are ``(B, T, *)`` instead of ``(T, B, *)``.
    dropout : float
        Dropout on each layer's output except the last's (training mode).
    bidirectional : bool
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    rng : int, Generator or None (keyword-only)
        Initial weights, then the dropout masks; None: the default
        generator (:func:`dynnets.manual_seed`).

    Notes
    -----
    ``forward(input, hx=None, lengths=None) -> (output, h_n)``; see
    :meth:`RNNBase.forward`. The input and initial states must have the
    layer's dtype: an integer or float32 input to a float64 layer raises
    :class:`~dynnets.autograd.primitives.DTypeError` naming the layer and
    both dtypes, as torch raises.
    """

    _gates = 1
    _cell = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, *, rng=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device,
                         dtype, nonlinearity=nonlinearity, rng=rng)


class GRU(RNNBase):
    """Multi-layer GRU (as ``torch.nn.GRU``; the equations of
    :class:`~dynnets.nn.GRUCell`, gates stacked r, z, n).

    Parameters as :class:`RNN` without ``nonlinearity``.
    ``forward(input, hx=None, lengths=None) -> (output, h_n)``.
    """

    _gates = 3
    _cell = "gru"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, *, rng=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device,
                         dtype, rng=rng)


class LSTM(RNNBase):
    """Multi-layer LSTM (as ``torch.nn.LSTM``; the equations of
    :class:`~dynnets.nn.LSTMCell`, gates stacked i, f, g, o).

    Parameters as :class:`RNN` without ``nonlinearity``, with PyTorch's
    ``proj_size`` after ``bidirectional`` (only 0, no projection, is supported).
    ``forward(input, hx=None, lengths=None) -> (output, (h_n, c_n))``;
    ``hx`` is a pair ``(h_0, c_0)``.
    """

    _gates = 4
    _cell = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None, *, rng=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, proj_size,
                         device, dtype, rng=rng)
