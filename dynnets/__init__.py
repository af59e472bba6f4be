"""dynnets: dynamic (define-by-run) and static (define-then-run) neural networks
on numpy and Numba, built from one table of primitives."""
from . import numba_cache as _numba_cache

_numba_cache.install()      # before any kernel is compiled or loaded: see dynnets/numba_cache.py

from .autograd import (AnomalyError, LazyTensor, autobatch, GradcheckError, Parameter, ShapeError, Tensor, detect_anomaly,
                       enable_grad, gradcheck, is_grad_enabled, no_grad)
from .autograd.ops import *  # noqa: F401,F403
from .autograd.ops import __all__ as _ops_all
from .autograd.creation import arange, as_tensor, full, ones, ones_like, randn, tensor, uniform, zeros, zeros_like
from .autograd.creation import from_numpy
from .io import load, save
from .random import default_generator, initial_seed, manual_seed, seed

__version__ = "0.2.0.dev0"   # the one place: pyproject.toml reads it (CHANGELOG.md lists the changes)

# PyTorch's dtype names, as numpy dtypes (every function that takes dtype= takes
# them; x.dtype == dn.float32 and dn.long == np.int64 hold)
import numpy as _np  # noqa: E402
float32 = float = _np.dtype(_np.float32)
float64 = double = _np.dtype(_np.float64)
float16 = half = _np.dtype(_np.float16)
int64 = long = _np.dtype(_np.int64)
int32 = int = _np.dtype(_np.int32)
int16 = short = _np.dtype(_np.int16)
int8 = _np.dtype(_np.int8)
uint8 = _np.dtype(_np.uint8)
bool = _np.dtype(_np.bool_)

__all__ = ["Tensor", "Parameter", "ShapeError", "AnomalyError", "GradcheckError", "no_grad", "enable_grad",
           "is_grad_enabled", "detect_anomaly", "gradcheck", "save", "load", "manual_seed", "seed", "initial_seed",
           "default_generator", "tensor", "as_tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "randn",
           "uniform", "arange", "autobatch", "LazyTensor", *_ops_all,
           # (float, int and bool stay out of a star import, which would shadow the builtins)
           "from_numpy", "float32", "float64", "double", "float16", "half", "int64", "long", "int32", "int16", "short",
           "int8", "uint8"]


def __getattr__(name):
    # subpackages load on first use, so `import dynnets` stays light
    import importlib
    if name in ("nn", "optim", "static", "models", "data", "train", "plots"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dynnets' has no attribute {name!r}")

# torch's scaffolding names (issue 22): devices, the CUDA and cuDNN queries
# a CPU library answers, generator objects, data loading
from . import backends, cuda, utils  # noqa: E402
# the decorator itself is light; the plans it builds load dynnets.static on first use
from .autograd.batchable import batchable  # noqa: E402
__all__.append("batchable")
from .devices import device  # noqa: E402
from .generator import Generator  # noqa: E402

__all__ += ["device", "Generator", "cuda", "backends", "utils"]

# torch's other grad-mode names (per thread, as no_grad)
from .autograd import inference_mode, is_inference_mode_enabled, set_grad_enabled  # noqa: E402

__all__ += ["set_grad_enabled", "inference_mode", "is_inference_mode_enabled"]

# torch's other creation functions, the default dtype and the legacy tensor types (issue 22)
from .autograd.creation import *  # noqa: E402,F401,F403
from .autograd.creation import __all__ as _creation_all  # noqa: E402

__all__ += [n for n in _creation_all if n not in __all__]

# torch's names that are also builtins' (issue 22): importable by name, kept out
# of a star import, as float, int and bool are
from .autograd.ops import all, any, round  # noqa: E402
from .autograd.creation import range  # noqa: E402

# torch's sampling functions (branch i22-torch-b)
from .autograd.ops import bernoulli, multinomial, normal  # noqa: E402

__all__ += ["bernoulli", "multinomial", "normal"]

# i22-torch-a: scatter / index_add, flip, tril / triu, nonzero, unique, bincount
from .autograd.ops import bincount, flip, index_add, nonzero, scatter, scatter_add, tril, triu, unique  # noqa: E402

__all__ += ["scatter", "scatter_add", "index_add", "flip", "tril", "triu", "nonzero", "unique", "bincount"]

# i24-modes: torch.is_anomaly_enabled (anomaly detection is an interpreter on the thread's stack)
from .autograd.engine import is_anomaly_enabled  # noqa: E402

__all__ += ["is_anomaly_enabled"]

# torch's intra-op thread count: BLAS and Numba's parallel kernels alike
from .blas import get_num_threads, set_num_threads  # noqa: E402
__all__ += ["set_num_threads", "get_num_threads"]
