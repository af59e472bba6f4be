"""Optimizers: ``import dynnets.optim`` / ``dynnets.optim.Adagrad``.

A re-export of :mod:`dynnets.nn.optim`, where the update rules, the handling of
row-sparse gradients and the state format are documented.
"""
from .nn.optim import SGD, Adagrad, Adam, Optimizer, clip_grad_norm_

__all__ = ["Optimizer", "SGD", "Adagrad", "Adam", "clip_grad_norm_"]
