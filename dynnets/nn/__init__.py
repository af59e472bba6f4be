"""Layers, cells and optimizers with PyTorch's conventions.

``Module`` registers parameters and submodules assigned as attributes; the
layers (``Linear``, ``Embedding``, ``Dropout``, ...) and cells (``RNNCell``,
``GRUCell``, ``LSTMCell``) use PyTorch's parameter names, shapes and
initialisation, so PyTorch state_dict arrays load unchanged. Optimizers live in
:mod:`dynnets.optim` (also importable as :mod:`dynnets.nn.optim`).
"""
from . import functional, utils
from .cells import GRUCell, LSTMCell, RNNCell
from .layers import Dropout, Embedding, Identity, Linear, ModuleList, ReLU, Sequential, Sigmoid, Tanh
from .module import Module, Parameter

__all__ = ["Module", "Parameter", "Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "Identity",
           "Tanh", "ReLU", "Sigmoid", "RNNCell", "GRUCell", "LSTMCell", "functional", "utils"]
