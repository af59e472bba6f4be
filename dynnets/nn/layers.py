"""Layers with PyTorch's names, parameter shapes and initialisation.

Constructors take PyTorch's arguments in PyTorch's order (``device`` only
``None`` or ``'cpu'``; ``dtype`` a numpy float type, ``None`` for float32),
and, keyword-only, ``rng=`` (a seed or a ``numpy.random.Generator``) so
initialisation is reproducible. Without ``rng=`` the
weights come from the default generator, which ``dynnets.manual_seed(seed)``
seeds (as ``torch.manual_seed``; see :mod:`dynnets.random`). Samples are drawn
in float64 and then cast, so the same seed gives the same numbers (up to
rounding) in float32 and float64.

The layers live by kind, in the modules torch's ``torch.nn.modules`` names:
:mod:`.linear` (Identity, Linear, Embedding), :mod:`.dropout`, :mod:`.flatten`,
:mod:`.activation`, :mod:`.container`, :mod:`.normalization` (LayerNorm,
BatchNorm1d) and :mod:`.distance`; the shared constructor helpers
(``as_generator``, ``float_dtype``, ``positive_int``, ``uniform_``) in
:mod:`.module`. This module imports them all, so ``dynnets.nn.layers.X``
keeps working for every layer it defined before issue 24 split it.
"""
from __future__ import annotations

# every name this module held before the split stays importable from it (other modules and users import
# from here); __all__ is the one it had
from ..autograd.tensor import Tensor  # noqa: F401
from .activation import (ELU, GELU, SELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, ReLU,  # noqa: F401
                         ReLU6, Sigmoid, SiLU, Softmax, Softplus, Softsign, Tanh)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .linear import Embedding, Identity, Linear  # noqa: F401
from .module import (Module, Parameter, as_generator, check_device, check_float_input, float_dtype,  # noqa: F401
                     positive_int, uniform_)
from .normalization import BatchNorm1d, LayerNorm  # noqa: F401

__all__ = ["Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "Identity", "Tanh", "ReLU", "Sigmoid",
           "as_generator", "GELU", "LeakyReLU", "Flatten", "Unflatten", "Softmax", "LogSoftmax", "LayerNorm"]
