"""``dynnets.backends.cudnn``: cuDNN's switches as torch names them.

Scripts write ``torch.backends.cudnn.deterministic = True`` and
``torch.backends.cudnn.benchmark = False`` for reproducibility; the
attributes are kept (read back as set) and change nothing: there is no
cuDNN, and dynnets' CPU kernels already give the same results run after run
at a fixed BLAS thread count. ``is_available()`` is False and ``version()``
None, as torch's are without CUDA. ``enabled`` defaults to True as torch's.
"""
from __future__ import annotations

__all__ = ["enabled", "deterministic", "benchmark", "allow_tf32", "is_available", "version"]

enabled = True
deterministic = False
benchmark = False
allow_tf32 = True


def is_available():
    """False: there is no cuDNN."""
    return False


def version():
    """None: there is no cuDNN."""
    return None
