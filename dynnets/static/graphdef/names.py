"""How a graph file names a primitive: by its name in the shared primitive
table, or as one of the static graph's own primitives (sources, effects,
control flow: every :class:`~dynnets.static.graph.StaticPrimitive` defined at
module level in ``dynnets.static``), and a gradient primitive by the
primitive, input and sparsity it is the VJP of. Reading a file looks names up
here and nowhere else, so a file can name only what these tables hold.
"""
from __future__ import annotations

import sys

from ...autograd.primitives import PRIMITIVES
from ..backward import VjpPrimitive, vjp_primitive
from ..graph import StaticPrimitive

__all__ = ["exportable_name", "resolve", "vjp_source"]

_TABLE: dict = {}        # name -> {differentiable: primitive}, or None for an unusable name; filled by _scan
# the package whose modules define the static graph's own primitives
_STATIC = __package__.rpartition(".")[0]


def _scan():
    """name -> {differentiable: primitive} of the static graph's own
    primitives: every StaticPrimitive at module level (or in a module-level
    dict) of the loaded ``dynnets.static`` modules, so a primitive is
    exportable where it is defined. A name may stand for two primitives that
    differ only in having a gradient (``while`` with and without
    ``back_prop``); a name shared otherwise, or with the table, is unusable
    (``None``)."""
    found = {}
    for modname, mod in list(sys.modules.items()):
        if mod is None or not (modname == _STATIC or modname.startswith(_STATIC + ".")):
            continue
        for v in list(vars(mod).values()):
            for x in (v.values() if type(v) is dict else (v,)):
                if isinstance(x, StaticPrimitive) and not isinstance(x, VjpPrimitive):
                    found[id(x)] = x
    table = {}
    for p in found.values():
        slot = table.setdefault(p.name, {})
        if slot is None:
            continue
        if p.name in PRIMITIVES or bool(p.differentiable) in slot:
            table[p.name] = None
        else:
            slot[bool(p.differentiable)] = p
    _TABLE.clear()
    _TABLE.update(table)


def _slot(name):
    """``{differentiable: primitive}`` for a static primitive's name (None:
    no such name, or an unusable one); a name not seen yet scans the loaded
    modules once more."""
    if name not in _TABLE:
        _scan()
    return _TABLE.get(name)


def exportable_name(p):
    """How a file names primitive ``p``: ``(name, nograd)``, or None when it cannot."""
    if PRIMITIVES.get(p.name) is p:
        return p.name, False
    slot = _TABLE.get(p.name)
    if not slot or slot.get(bool(p.differentiable)) is not p:
        _scan()
        slot = _TABLE.get(p.name)
    if not slot or slot.get(bool(p.differentiable)) is not p:
        return None
    return p.name, (not p.differentiable and True in slot)


def resolve(name, nograd=False):
    """The primitive a file's op name stands for (the one without a gradient
    of a pair when ``nograd``), or None."""
    if not isinstance(name, str):
        return None
    p = PRIMITIVES.get(name)
    if p is not None:
        return p
    slot = _slot(name)
    if not slot:
        return None
    return slot.get(False) if nograd else slot.get(True, slot.get(False))


def vjp_source(p):
    """``(primitive name, input or None, sparse)`` of a gradient primitive,
    read from its name and confirmed by building it again."""
    sparse = p.name.startswith("sparse_vjp_")
    rest = p.name[len("sparse_vjp_" if sparse else "vjp_"):]
    cands = [(rest, None)]
    head, _, tail = rest.rpartition("_")
    if tail.isdigit():
        cands.append((head, int(tail)))
    # only the candidate that names the gradient's own forward primitive is looked up: a name
    # that is no primitive ("matmul_1") misses the table, and a miss rescans every loaded module
    # (an export spent 97% of its time there, one scan per gradient node)
    for of, i in cands:
        if of != p.forward.name:
            continue
        q = resolve(of)
        if q is not None and q.differentiable and vjp_primitive(q, i, sparse) is p:
            return of, i, sparse
    return None
