"""Layers with PyTorch's conventions."""
from .module import Module, Parameter

__all__ = ["Module", "Parameter"]
