"""Define-by-run autograd on numpy, with hot kernels jitted by Numba."""
from . import ops
from .autobatching import LazyTensor, autobatch
from .backprop import backward
from .engine import AnomalyError, bind, detect_anomaly, enable_grad, is_grad_enabled, no_grad
from .gradcheck import GradcheckError, gradcheck
from .primitives import PRIMITIVES, Primitive, RowSparse, ShapeError, defprim
from .tensor import Parameter, Tensor

__all__ = ["ops", "Tensor", "Parameter", "bind", "backward", "no_grad", "enable_grad", "is_grad_enabled",
           "detect_anomaly", "AnomalyError", "gradcheck", "GradcheckError", "PRIMITIVES", "Primitive",
           "RowSparse", "ShapeError", "defprim", "autobatch", "LazyTensor"]
from .variable import Variable  # noqa: E402  torch's pre-0.4 name (issue 22)

__all__ += ["Variable"]

# torch's other grad-mode names (per thread, as no_grad)
from .engine import inference_mode, is_inference_mode_enabled, set_grad_enabled  # noqa: E402

__all__ += ["set_grad_enabled", "inference_mode", "is_inference_mode_enabled"]
from . import function  # noqa: E402  torch.autograd.Function (issue 22)
from .function import Function  # noqa: E402

__all__ += ["Function", "function"]
from .gradients import grad  # noqa: E402  torch.autograd.grad (issue 22, i22-torch-a)

__all__ += ["grad"]
