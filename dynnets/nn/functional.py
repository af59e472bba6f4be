"""Stateless ops under PyTorch's ``torch.nn.functional`` names (re-exported
from :mod:`dynnets.autograd.ops`; every one goes through the primitive table),
the losses of :mod:`dynnets.nn.loss` and the packed recurrences that
``nn.RNN`` / ``GRU`` / ``LSTM`` run on."""
from ..autograd.ops import (cross_entropy, dropout, embedding, gru_cell, gru_seq, linear, log_softmax, lstm_cell,
                            lstm_seq, relu, rnn_seq, sigmoid, softmax, tanh, tree_lstm_cell, tree_lstm_leaf)
from ..autograd.ops import gelu, leaky_relu, normalize, pad
from .loss import mse_loss, nll_loss

__all__ = ["linear", "embedding", "dropout", "relu", "tanh", "sigmoid", "softmax", "log_softmax",
           "cross_entropy", "nll_loss", "mse_loss", "lstm_cell", "gru_cell", "tree_lstm_cell", "tree_lstm_leaf",
           "lstm_seq", "gru_seq", "rnn_seq", "gelu", "leaky_relu", "pad", "normalize"]
