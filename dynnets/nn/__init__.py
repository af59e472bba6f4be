"""Layers, cells, losses and optimizers with PyTorch's conventions.

``Module`` registers parameters and submodules assigned as attributes; the
layers (``Linear``, ``Embedding``, ``Dropout``, ...), cells (``RNNCell``,
``GRUCell``, ``LSTMCell``) and recurrent layers (``RNN``, ``GRU``, ``LSTM``:
padded, packed or lists of variable-length sequences) use PyTorch's parameter
names, shapes and initialisation, so PyTorch state_dict arrays load
unchanged. Losses: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``,
``BCELoss``, ``BCEWithLogitsLoss``. Constructors and :mod:`dynnets.nn.functional`
take PyTorch's arguments in PyTorch's order (``rng=`` is keyword-only).
Packed sequences: :mod:`dynnets.nn.utils.rnn`. Modules built without
``rng=`` draw from the default generator (:func:`dynnets.manual_seed`).
Optimizers and ``lr_scheduler`` live in :mod:`dynnets.optim` (also
importable as :mod:`dynnets.nn.optim`).
"""
from . import functional, utils
from .cells import GRUCell, LSTMCell, RNNCell
from .layers import Dropout, Embedding, Identity, Linear, ModuleList, ReLU, Sequential, Sigmoid, Tanh
from .layers import GELU, LeakyReLU
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, MSELoss, NLLLoss
from .module import Module, Parameter
from .rnn import GRU, LSTM, RNN, RNNBase

__all__ = ["Module", "Parameter", "Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "Identity",
           "Tanh", "ReLU", "Sigmoid", "RNNCell", "GRUCell", "LSTMCell", "RNNBase", "RNN", "GRU", "LSTM",
           "CrossEntropyLoss", "NLLLoss", "MSELoss", "BCELoss", "BCEWithLogitsLoss", "functional", "utils", "GELU",
           "LeakyReLU"]
from . import init  # noqa: E402  torch's initialisers (issue 22)

__all__ += ["init"]

# torch's other modules real scripts use (issue 22)
from .layers import Flatten, LogSoftmax, Softmax, Unflatten  # noqa: E402
from .loss import KLDivLoss  # noqa: E402

__all__ += ["Flatten", "Unflatten", "Softmax", "LogSoftmax", "KLDivLoss"]

# torch's containers (issue 22)
from .layers import ModuleDict, ParameterDict, ParameterList  # noqa: E402

__all__ += ["ModuleDict", "ParameterList", "ParameterDict"]


from .layers import LayerNorm  # noqa: E402  (issue 22 trials)

__all__ += ["LayerNorm"]

# torch's activations, similarities, L1/Huber losses and BatchNorm1d (branch i22-torch-b)
from .layers import (ELU, SELU, BatchNorm1d, CosineSimilarity, Hardtanh, LogSigmoid, Mish, PairwiseDistance,  # noqa: E402
                     ReLU6, SiLU, Softplus, Softsign)
from .loss import HuberLoss, L1Loss, SmoothL1Loss  # noqa: E402

__all__ += ["Softplus", "ELU", "SELU", "SiLU", "Mish", "Hardtanh", "ReLU6", "Softsign", "LogSigmoid",
            "CosineSimilarity", "PairwiseDistance", "BatchNorm1d", "L1Loss", "SmoothL1Loss", "HuberLoss"]

# 1-D convolution and pooling (issue 25)
from .conv import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AvgPool1d, Conv1d, MaxPool1d  # noqa: E402

__all__ += ["Conv1d", "MaxPool1d", "AvgPool1d", "AdaptiveMaxPool1d", "AdaptiveAvgPool1d"]
from .conv import Conv2d, MaxPool2d  # noqa: E402

__all__ += ["Conv2d", "MaxPool2d"]

# attention (issue 25)
from .attention import MultiheadAttention  # noqa: E402

__all__ += ["MultiheadAttention"]
from .transformer import (LearnedPositionalEmbedding, PositionalEncoding, TransformerEncoder,  # noqa: E402
                          TransformerEncoderLayer)

__all__ += ["TransformerEncoderLayer", "TransformerEncoder", "PositionalEncoding", "LearnedPositionalEmbedding"]
