"""Automatic operation batching (Neubig, Goldberg and Dyer 2017), by phase
(DyNet's profile, schedule, allocate, execute):

* :mod:`.lazy` -- lazy handles (:class:`LazyTensor`), the node and plan
  records, interned descriptions;
* :mod:`.record` -- plans from the primitives' batching rules (the shape
  rule raises at the user's line);
* :mod:`.context` -- :class:`AutoBatch`, the context: recording into flat
  arrays (its ``bind`` is the interpreter interface), forcing;
* :mod:`.schedule` -- a pure function from the record arrays to groups
  (depth: numpy; agenda: a Numba kernel);
* :mod:`.storage` -- sources, the arena, pieces, gathers;
* :mod:`.execute` -- one batched call per group, by rule kind;
* :mod:`.blame` -- a failing batched call rerun node by node.
"""
from .context import AutoBatch, BatchedCall, ScheduledNode, autobatch
from .lazy import LazyTensor

__all__ = ["autobatch", "AutoBatch", "LazyTensor", "ScheduledNode", "BatchedCall"]
