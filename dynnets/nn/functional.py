"""Stateless ops under PyTorch's ``torch.nn.functional`` names (re-exported
from :mod:`dynnets.autograd.ops`; every one goes through the primitive table)."""
from ..autograd.ops import (cross_entropy, dropout, embedding, gru_cell, linear, log_softmax, lstm_cell, relu,
                            sigmoid, softmax, tanh, tree_lstm_cell, tree_lstm_leaf)

__all__ = ["linear", "embedding", "dropout", "relu", "tanh", "sigmoid", "softmax", "log_softmax",
           "cross_entropy", "lstm_cell", "gru_cell", "tree_lstm_cell", "tree_lstm_leaf"]
