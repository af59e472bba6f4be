"""Error blame: a batched call that failed on values its shape rule cannot
see (an id or a class out of range) is rerun node by node, and the first
node's own error is raised naming the op, the node, its tag and the file and
line that recorded it."""
from __future__ import annotations

import os
import sys

_PKG = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def caller():
    """``file:line`` of the innermost frame outside the dynnets package."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else None


def blame(ab, group, exc):
    """A batched call failed (a value the shape rule cannot see: an id or
    a class out of range): run its nodes one at a time and raise the first
    node's own error, naming where it was recorded."""
    for pn in group:
        try:
            if len(group) > 1:
                ab.run_single(pn)
        except (ValueError, IndexError, TypeError, FloatingPointError) as e:
            err = e
        else:
            if len(group) > 1:
                continue
            err = exc
        where = f"{pn.where}" if pn.where else "(dn.autobatch(debug=True) names the file and line)"
        msg = (f"{err} [autobatch: in node {pn.index} ({pn.plan.prim.name}"
               f"{', tag ' + repr(pn.tag) if pn.tag is not None else ''}), recorded at {where}]")
        try:
            new = type(err)(msg)
        except TypeError:
            return
        raise new from err
