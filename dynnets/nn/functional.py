"""Stateless ops under PyTorch's ``torch.nn.functional`` names (re-exported
from :mod:`dynnets.autograd.ops`; every one goes through the primitive table),
the losses of :mod:`dynnets.nn.loss` and the packed recurrences that
``nn.RNN`` / ``GRU`` / ``LSTM`` run on."""
from ..autograd import primitives as P
from ..autograd.engine import bind
from ..autograd.ops import (cross_entropy, dropout, embedding, gru_cell, linear, log_softmax, lstm_cell, relu,
                            sigmoid, softmax, tanh, tree_lstm_cell, tree_lstm_leaf)
from .loss import mse_loss, nll_loss

__all__ = ["linear", "embedding", "dropout", "relu", "tanh", "sigmoid", "softmax", "log_softmax",
           "cross_entropy", "nll_loss", "mse_loss", "lstm_cell", "gru_cell", "tree_lstm_cell", "tree_lstm_leaf",
           "lstm_seq", "gru_seq", "rnn_seq"]


def lstm_seq(gx, w_hh, b_hh, batch_sizes):
    """LSTM over a packed batch from a zero state (the ``lstm_seq`` primitive).

    ``gx`` (total, 4H) holds the input projections ``x W_ih^T + b_ih`` of every
    packed row, ``w_hh`` (4H, H), ``b_hh`` (4H,), ``batch_sizes`` (T,) as a
    :class:`~dynnets.nn.utils.rnn.PackedSequence`'s. Returns ``(h, c)``, the
    states of every packed row, each (total, H).
    """
    h, c, _ = bind(P.lstm_seq_p, gx, w_hh, b_hh, batch_sizes)
    return h, c


def gru_seq(gx, w_hh, b_hh, batch_sizes):
    """GRU over a packed batch from a zero state; ``gx`` (total, 3H) -> h (total, H)."""
    return bind(P.gru_seq_p, gx, w_hh, b_hh, batch_sizes)[0]


def rnn_seq(gx, w_hh, b_hh, batch_sizes):
    """Elman RNN (tanh) over a packed batch from a zero state; ``gx`` (total, H) -> h (total, H)."""
    return bind(P.rnn_seq_p, gx, w_hh, b_hh, batch_sizes)
