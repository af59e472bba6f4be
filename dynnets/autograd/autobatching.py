"""The autobatch context's old home: it lives in the :mod:`dynnets.autograd.autobatch`
package (one module per phase); these names are re-exported for imports
written against this module."""
from .autobatch import AutoBatch, BatchedCall, LazyTensor, ScheduledNode, autobatch

__all__ = ["autobatch", "AutoBatch", "LazyTensor", "ScheduledNode", "BatchedCall"]
