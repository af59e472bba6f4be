"""``dynnets.backends``: torch's backend switches, for scripts that set them.

:mod:`.cudnn` holds ``deterministic``, ``benchmark`` and ``enabled`` as
settable attributes that change nothing (there is no cuDNN: dynnets' kernels
are its own, and give the same results run after run at a fixed BLAS thread
count); :mod:`.mps` says that Apple's GPU is not available.
"""
from . import cudnn, mps

__all__ = ["cudnn", "mps"]
