"""The levels lowering: a chain of same-signature groups across depths run
as one call of the primitive's per-level kernel (``defprim(levels=...)``,
see :class:`~dynnets.autograd.primitives.core.LevelsRule`).

Per-depth batching runs a tree-node primitive once per depth: a minibatch
of SST trees makes about 20 calls of ``tree_lstm_node``, each gathering its
children's rows, allocating its outputs and leaving its weight gradient to
the tape. Level-batched models instead call the fused per-level kernel once
(``tree_lstm_levels_packed``): the state buffers are allocated once, each
level's children are read in place, and the weight gradient is one product.
:func:`find_chains` finds where the schedule allows the same call (a pure
function of the records and the schedule); :func:`run_chain` makes it.
"""
from __future__ import annotations

import numpy as np

from .lazy import LazyTensor, shape_of, trail_of

__all__ = ["find_chains", "run_chain"]


def find_chains(nodes, order, starts, src, dst):
    """The groups to run as chains.

    Parameters
    ----------
    nodes : list of Node
        The pending records (``nodes[i]`` is record ``i``).
    order, starts : list of int
        The schedule (see :mod:`.schedule`).
    src, dst : (E,) int64
        Dependency edges between the records (producer, consumer).

    Returns
    -------
    dict
        Group index -> (the chain's groups as lists of record indices, the
        number of dependency edges inside the chain), at the chain's last
        group; every other group of a chain maps to None. Empty
        when no primitive of the schedule declares a levels rule or no chain
        holds its conditions (the groups then run one call each).

    A chain is every group of one signature whose primitive has a levels
    rule, when there are at least two such groups, every node is one row,
    no record outside the chain that reads a chain node's output is
    scheduled before the chain's last group (the chain runs there: the
    groups between do not need its outputs). :func:`run_chain` checks the
    rest as it reads the nodes (each node's children are chain nodes' first
    outputs or values from outside the chain, and nothing else inside the
    chain reads a chain node); where that fails, the groups run one call
    each at the chain's last group, which the same edge condition allows.
    """
    by_sig = {}
    for g in range(len(starts) - 1):
        pn = nodes[order[starts[g]]]
        if pn.sid >= 0 and pn.plan.prim.levels is not None:
            by_sig.setdefault(pn.sid, []).append(g)
    if not by_sig:
        return {}
    n = len(nodes)
    gpos = np.empty(n, dtype=np.int64)
    o = np.asarray(order, dtype=np.int64)
    st = np.asarray(starts, dtype=np.int64)
    gpos[o] = np.repeat(np.arange(len(st) - 1, dtype=np.int64), np.diff(st))
    res = {}
    for sid, gs in by_sig.items():
        if len(gs) < 2:
            continue
        pn0 = nodes[order[starts[gs[0]]]]
        rule = pn0.plan.prim.levels
        out0 = pn0.plan.out[0] if pn0.plan.multi else pn0.plan.out
        if len(out0.shape) < 1 or out0.shape[0] != 1:
            continue
        groups = [order[starts[g]:starts[g + 1]] for g in gs]
        member = np.zeros(n, dtype=bool)
        for grp in groups:
            member[grp] = True
        # readers outside the chain must run after its last group
        out = member[src] & ~member[dst]
        if out.any() and gpos[dst[out]].min() <= gs[-1]:
            continue
        for g in gs[:-1]:
            res[g] = None
        # the edges inside the chain: run_chain checks they are all children's reads
        res[gs[-1]] = (groups, int((member[src] & member[dst]).sum()))
    return res


def run_chain(ab, chain, inner):
    """Run a chain (its groups' nodes, depth by depth; ``inner`` dependency
    edges inside it) as one call of the levels rule and assign each node its
    rows of the outputs. False, having run nothing, when a node reads a chain
    node other than as a child's first output."""
    pns = [pn for grp in chain for pn in grp]
    pn0 = pns[0]
    rule = pn0.plan.prim.levels
    # chain nodes are marked through their own slots (pending: call is None),
    # cheaper than a dict keyed by id in this loop over every node
    mark = object()
    for i, pn in enumerate(pns):
        pn.call = mark
        pn.pos = i
    n = len(pns)
    kids = [np.empty(n, dtype=np.int64) for _ in rule.children]
    ext = []
    internal = []
    reads = 0
    ok = True
    for i, pn in enumerate(pns):
        args = pn.args
        prev = None
        for j, p in enumerate(rule.children):
            a = args[p]
            if type(a) is LazyTensor and a._pn.call is mark:
                q = a._pn
                if a._k != 0:
                    ok = False
                kids[j][i] = q.pos
                internal.append((j, i))
                reads += q is not prev
                prev = q
            else:
                # each read its own row of s0 (a state read twice is gathered twice)
                kids[j][i] = len(ext)
                ext.append(a)
    for pn in pns:
        pn.call = None
    if not ok or reads != inner or not ext:
        return False
    n0 = len(ext)
    for j, i in internal:
        kids[j][i] += n0
    offsets = np.empty(len(chain) + 2, dtype=np.int64)
    offsets[0] = 0
    offsets[1] = n0
    np.cumsum([len(grp) for grp in chain], out=offsets[2:])
    offsets[2:] += n0
    trail = trail_of(tuple(shape_of(pn0.args[rule.children[0]])))
    s0 = ab.gather_arg(ext, trail)
    shared = [ab.shared_arg(pn0.args[p]) for p in rule.shared]

    def bind(prim, *args, **attrs):
        return ab.run_call(pn0, prim, args, attrs)

    outs, first = rule.run(bind, s0, np.arange(n0, dtype=np.int64), shared, *kids, offsets)
    rows_of = [None if f == 0 else [(f + i, f + i + 1) for i in range(n)] for f in first]
    ab.assign_outputs(pns, outs, rows_of)
    return True
