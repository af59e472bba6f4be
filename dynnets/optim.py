"""Optimizers: ``import dynnets.optim`` / ``dynnets.optim.Adagrad``; learning-rate
schedulers in ``dynnets.optim.lr_scheduler`` (as ``torch.optim.lr_scheduler``).

A re-export of :mod:`dynnets.nn.optim`, where the update rules, the handling of
row-sparse gradients and the state format are documented.
"""
import sys as _sys

from .nn import lr_scheduler
from .nn.optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop, clip_grad_norm_

# `import dynnets.optim.lr_scheduler` (torch's spelling) finds the module too
_sys.modules.setdefault(__name__ + ".lr_scheduler", lr_scheduler)

__all__ = ["Optimizer", "SGD", "Adagrad", "Adam", "AdamW", "RMSprop", "clip_grad_norm_", "lr_scheduler"]
