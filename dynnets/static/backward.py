"""Moved to :mod:`dynnets.static.core.backward` (the compiler core); this path is the same module."""
import sys

from .core import backward as _moved

# the old import path names the very module object (its private names, monkeypatching), not a copy
sys.modules[__name__] = _moved
