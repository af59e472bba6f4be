"""Reverse mode: :func:`backward` over the nodes that :func:`~dynnets.autograd.engine.bind`
records, and in-place writes (:func:`write_inplace`) with the version
checks that backward reads (a value saved for a gradient and overwritten
later raises, as torch's).

:func:`backward` walks the recorded nodes in reverse topological order with
an explicit heap (no Python recursion, so a chain of any length works) and
calls each primitive's VJP from the table in
:mod:`dynnets.autograd.primitives`. Split from the engine by concern
(issue 24): this module reads the engine's public pieces (``check_finite``,
``check_signature``, ``next_seq``, the registered tensor classes) and the
tensors' slots, as the engine does (see :class:`~dynnets.autograd.tensor.Tensor`).
"""
from __future__ import annotations

import weakref
from bisect import bisect_right as _bisect_right
from heapq import heappop as _heappop
from heapq import heappush as _heappush

import numpy as np

from . import engine as _engine
from . import gradtypes as _gt
from .engine import accumulate_grad, is_anomaly_enabled
from .modes import MODES as _MODES
from .modes import STATE as _STATE
from .primitives.core import PRIMITIVES, DTypeError, PromotionNeeded, ShapeError, check_shapes, fmt_shape
from .values import is_interpreted

__all__ = ["backward", "write_inplace", "memory_base", "retain_grad", "retains_grad"]

_check_finite = _engine.check_finite
_check_signature = _engine.check_signature
_next_seq = _engine.next_seq          # the engine's counter: in-place nodes are ordered with the others
_object_new = object.__new__
_NDARRAY = np.ndarray
_WEAK = frozenset({float, int, bool})
_add = _gt.add
_add_inner = _gt.add_inner
_dense = _gt.densify
_form = _gt.form
_OUTER = _gt.OuterSum
_LAZY_T = _gt.LAZY_TYPES


_SEEDS = {}
_FREED_MSG = ("backward: part of this graph was already freed by an earlier backward; "
              "pass retain_graph=True to the first call")


def backward(root, gradient=None, retain_graph=False, inputs=None):
    """Reverse-mode sweep from ``root``; see :meth:`Tensor.backward`.

    ``inputs`` (a sequence of tensors, torch's ``backward(inputs=)``):
    gradients are accumulated into those tensors' ``.grad`` only (leaves or
    not) and into no other leaf. Non-leaf tensors marked with
    :func:`retain_grad` get their ``.grad`` too.

    Nodes are processed from a max-heap on creation order, so discovery and
    processing are one pass (no separate topological sort) and no Python
    recursion is involved. A node enters the heap when it first receives a
    gradient; when it is popped, every node created after it that could add
    to its gradient has already been processed. Leaf gradients are applied
    only after the sweep succeeds, so an error (a freed subgraph, an
    anomaly) leaves no leaf half-updated.
    """
    if _ORPHANS:
        _check_orphans()
    if not root.requires_grad:
        raise RuntimeError("backward: tensor does not require grad and has no grad_fn")
    data = root._data
    if gradient is None:
        if data.size != 1:
            raise RuntimeError(
                f"backward: grad can be implicitly created only for scalar outputs; "
                f"got shape {data.shape}, pass gradient= explicitly")
        if data.shape == ():
            # one read-only 1 per dtype (VJPs never write to their g; a leaf
            # given it copies it, see leaf_grad)
            g = _SEEDS.get(data.dtype)
            if g is None:
                g = _SEEDS[data.dtype] = np.array(1, data.dtype)
                g.flags.writeable = False
        else:
            g = np.ones(data.shape, data.dtype)
    else:
        # a copy: the caller's array must not become (or be viewed by) a leaf's .grad
        g = np.array(gradient._data if isinstance(gradient, _engine.Tensor) else gradient, dtype=data.dtype)
        if g.shape != data.shape:
            raise ShapeError(f"backward: gradient shape {g.shape} does not match tensor shape {data.shape}")
    node = root._node
    only = capture = None
    if inputs is not None or _RETAINED:
        only, capture = _targets(inputs)
    if node is None:
        if only is None or id(root) in only:
            accumulate_grad(root, g)
        return
    if node.args is None:
        raise RuntimeError(
            "backward: trying to backward through the graph a second time (the graph was freed "
            "after the first backward); pass retain_graph=True to the first call")
    if node.g is not None:
        raise RuntimeError("backward: a backward pass through this graph is already running")
    if node.prim.multiple_results:
        _seed(node, root._idx, g)
    else:
        node.g = g
    heap = [(-node.seq, node)]
    leaves = []
    factored = {}
    anomaly = _MODES and _STATE.path > 1 and is_anomaly_enabled()
    # the version checks (see "in-place writes"): read once; -1 while no
    # in-place op ever wrote, when each check costs one comparison
    last_write = _last_write
    last_swap = _last_swap
    try:
        while heap:
            n = _heappop(heap)[1]
            gn = n.g
            n.g = None
            prim = n.prim
            if prim.multiple_results:
                # (a list from _seed, only read by the VJP) densified only if needed
                for x in gn:
                    if type(x) in _LAZY_T:
                        gn = [_dense(y, prim.lazy_grads) for y in gn]
                        break
            elif type(gn) in _LAZY_T:
                gn = _dense(gn, prim.lazy_grads)
            if capture is not None and n in capture:
                for t in capture[n]:
                    gt = gn[t._idx] if prim.multiple_results else gn
                    if gt is not None:
                        leaves.append((t, gt))
            parents = n.parents
            attrs = n.attrs
            args = n.args
            out = n.out
            if last_write >= 0 and last_write > n.seq:
                _check_saved(n, args, out, parents, attrs)
            if not retain_graph:
                # free as we go: saved arrays are released while the sweep runs
                # (args None marks the node freed)
                n.args = None
                n.out = None
                n.parents = ()
            joint = prim.joint_vjp
            if joint is not None:
                grads = joint(gn, args, out, **attrs) if attrs else joint(gn, args, out)
            else:
                vjps = prim.vjps
            i = -1
            for p in parents:
                i += 1
                if p is None:
                    continue
                if joint is None:
                    f = vjps[i]
                    if f is None:
                        continue
                    gi = f(gn, args, out, **attrs) if attrs else f(gn, args, out)
                else:
                    gi = grads[i]
                if gi is None:
                    continue
                if anomaly:
                    _check_finite(prim, gi, "backward", i)
                pn = p._node
                if last_swap >= 0 and pn is not None:
                    ps = pn.seq
                    if ps > n.seq or ps < last_swap:
                        p, pn = _history_at(p, pn, n, i)
                tg = type(gi)
                if pn is None:
                    if tg is _OUTER:
                        # factored weight gradients of one leaf are gathered
                        # here and formed with one product after the sweep
                        # (a VJP returns a fresh OuterSum per input, so the
                        # first one can be extended in place)
                        acc = factored.get(id(p))
                        if acc is None:
                            factored[id(p)] = (p, gi)
                        else:
                            acc[1].add(gi)
                    else:
                        leaves.append((p, gi))
                    continue
                if pn.args is None:
                    raise RuntimeError(_FREED_MSG)
                if tg is _NDARRAY:
                    # a gradient takes its input's dtype on every edge, as in
                    # PyTorch (a VJP of a mixed float32/float64 op computes in
                    # float64) and as static gradients are declared
                    dt = p._data.dtype
                    if gi.dtype is not dt and gi.dtype != dt:
                        gi = gi.astype(dt)
                # _seed inline (an edge into every tree node in recursive models)
                pg = pn.g
                if pg is None:
                    _heappush(heap, (-pn.seq, pn))
                    if pn.prim.multiple_results:
                        pn.g = pg = [None] * len(pn.out)
                        pg[p._idx] = gi
                    else:
                        pn.g = gi
                elif pn.prim.multiple_results:
                    k = p._idx
                    old = pg[k]
                    pg[k] = gi if old is None else _add_inner(old, gi)
                else:
                    pn.g = _add_inner(pg, gi)
    except BaseException:
        # no stale gradients left on pending nodes (a retained graph stays usable)
        for _, n in heap:
            n.g = None
        raise
    if only is not None:
        leaves = [(p, gi) for p, gi in leaves if id(p) in only]
        factored = {k: v for k, v in factored.items() if k in only}
    given = None
    many = len(leaves) > 1
    for p, gi in leaves:
        if p._grad is None and type(gi) is _NDARRAY:
            # a fresh array of the leaf's dtype and shape becomes its .grad as
            # it is (accumulate_grad's general case, inline); but one array can
            # reach several leaves (add's VJP passes its g to both operands, a
            # reshape's a view of it), and each .grad gets memory of its own, so
            # that changing one in place (p.grad.data.mul_(s), clamp_) leaves
            # the others as they are, as in torch
            d = p._data
            if gi.dtype == d.dtype and gi.shape == d.shape and gi.flags.writeable:
                if many:
                    key = id(gi) if gi.base is None else id(memory_base(gi))
                    if given is None:
                        given = {key}
                    elif key in given:
                        gi = gi.copy()
                    else:
                        given.add(key)
                p._grad = gi
                continue
        accumulate_grad(p, gi)
    for p, gi in factored.values():
        if p._grad is None:
            # all factors of this parameter in one matrix product
            p._grad = _form(gi, p._data.dtype)
            continue
        accumulate_grad(p, gi)
        p._grad = _form(p._grad, p._data.dtype)



def _seed(node, idx, g):
    if node.prim.multiple_results:
        if node.g is None:
            node.g = [None] * len(node.out)
        node.g[idx] = _add(node.g[idx], g)
    else:
        node.g = _add(node.g, g)


# ---------------------------------------------------------------------------
# in-place writes: torch's in-place ops and version counter
#
# An in-place op (``x += y``, ``x.add_(y)``, ``x[i] = v``...) writes into the
# tensor's array. When it is recorded for gradients, the tensor gets a new
# history: a node of the out-of-place primitive whose first parent is a
# "ghost", a tensor object holding the target's previous history (the nodes
# that read the target before keep pointing at the same Python object, so
# backward walks back from the new node to the ghost for them, see
# _history_at).
#
# Recording pays nothing for this: no node keeps versions. Instead every
# in-place write is logged per block of memory (the numpy base array, which
# views share, as torch counts per storage) with a number from the nodes'
# counter, and backward checks, only where a write came after a node:
#
# * saved values: what a node's VJPs read (its primitive's ``vjp_reads``)
#   must not have been written after the node was recorded (torch's "one of
#   the variables needed for gradient computation has been modified by an
#   inplace operation");
# * histories: a write that gave a tensor a new history changed, without
#   their histories knowing, every other tensor sharing that memory (a view,
#   the tensor a view was taken from, a detach()). A node that read such a
#   tensor after that write would get a wrong gradient, so backward raises,
#   except for the writes the node accounts for: an in-place op through a
#   view from getitem gives the viewed tensor the new history as well
#   (``y[0:2] += x``, torch's CopySlices), and ``x[i] = t`` accounts for
#   what was written through ``t`` when ``t`` is that very region (how
#   Python runs ``x[i] += v`` on a tensor x without history);
# * orphans: a tensor without history whose array is a view, given a
#   history by an in-place op, leaves the tensor it views without it (that
#   one records nothing, so no node can tell): every backward raises until
#   the write is accounted for (``x[i] = t``) or the memory is freed.
# ---------------------------------------------------------------------------

_last_write = -1          # number of the latest in-place write
_last_swap = -1           # ... of the latest one that gave a tensor a new history
_WRITES = {}              # id(base array) -> _Log
_ORPHANS = {}             # id(base array) -> (weakref, {write number: op})


class _Log:
    """The in-place writes to one block of memory: the latest (number and
    op), and those that gave a tensor a new history (increasing numbers)."""

    __slots__ = ("ref", "last", "op", "swaps", "swap_ops")

    def __init__(self, ref):
        self.ref = ref
        self.last = -1
        self.op = None
        self.swaps = []
        self.swap_ops = []


def memory_base(a):
    """The array that owns ``a``'s memory (``a`` itself if it owns it): the
    unit of the in-place version counter, as torch's storage."""
    b = a.base
    while type(b) is np.ndarray or isinstance(b, np.ndarray):
        a = b
        b = a.base
    return a


def _forget(key):
    def gone(ref):
        log = _WRITES.get(key)
        if log is not None and log.ref is ref:
            del _WRITES[key]
        o = _ORPHANS.get(key)
        if o is not None and o[0] is ref:
            del _ORPHANS[key]
    return gone


def _log_of(base, create=False):
    key = id(base)
    log = _WRITES.get(key)
    if log is not None and log.ref() is base:
        return log
    if not create:
        return None
    log = _WRITES[key] = _Log(weakref.ref(base, _forget(key)))
    return log


def _log_write(dst, seq, op, swap):
    global _last_write, _last_swap
    log = _log_of(memory_base(dst), create=True)
    log.last = seq
    log.op = op
    _last_write = seq
    if swap:
        log.swaps.append(seq)
        log.swap_ops.append(op)
        _last_swap = seq
    return log


def _ghost(t):
    """A stand-in holding ``t``'s current history, before ``t`` gets a new one."""
    g = _object_new(_engine.Tensor)
    g._data = t._data
    g._grad = None
    g.requires_grad = t.requires_grad
    g._node = t._node
    g._idx = t._idx
    g.name = None
    return g


def _inplace_chain(t):
    """The numbers of the in-place writes in ``t``'s history since its last
    ordinary op (the writes made through ``t``)."""
    seqs = []
    n = t._node
    while n is not None:
        ip = getattr(n, "inplace", None)
        if ip is None:
            break
        seqs.append(n.seq)
        n = ip[0]._node
    return seqs


def _is_basic_index(index):
    for i in (index if type(index) is tuple else (index,)):
        if not (i is None or i is Ellipsis or type(i) in (int, slice) or isinstance(i, np.integer)):
            return False
    return True


def _view_origin(op, t, dst):
    """The tensor ``t`` is a view of by getitem, with the index: ``(p,
    index)``, or None. Raises for a view of a leaf that requires grad (as
    torch). Only getitem views are followed (reshape, transpose... views are
    not: the viewed tensor's later uses then raise in backward)."""
    n = t._node
    while n is not None:
        ip = getattr(n, "inplace", None)
        if ip is None:
            break
        n = ip[0]._node
    if n is None or n.args is None or not n.parents:
        return None
    p, a0 = n.parents[0], n.args[0]
    if p is None or type(a0) is not np.ndarray or memory_base(a0) is not memory_base(dst):
        return None
    if p._node is None:
        raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used in an in-place "
                           f"operation (as torch: wrap it in dn.no_grad(), or change a clone())")
    if n.prim.name == "getitem" and memory_base(p._data) is memory_base(dst) and _is_basic_index(n.attrs["index"]):
        return p, n.attrs["index"]
    return None


def _rebase(op, origin, value, seq):
    """Give the tensor ``value`` is a view of (``origin``: tensor and index)
    the history ``p[index] = value`` after ``value`` was changed in place by
    write ``seq`` (torch's CopySlices), and so on up a chain of views."""
    p, index = origin
    up = _view_origin(op, p, p._data)
    ghost = _ghost(p)
    node = _object_new(_engine.Node)
    node.prim = PRIMITIVES["setitem"]
    node.args = (p._data, value._data)
    node.parents = (ghost, value)
    node.attrs = {"index": index}
    node.out = p._data
    node.g = None
    node.seq = _next_seq()
    node.inplace = (ghost, frozenset((seq,)))
    p._node = node
    p._idx = 0
    if up is not None:
        _rebase(op, up, p, seq)


def _orphan(dst, seq, op):
    base = memory_base(dst)
    log = _log_of(base, create=True)
    entry = _ORPHANS.get(id(base))
    if entry is None or entry[0] is not log.ref:
        entry = _ORPHANS[id(base)] = (log.ref, {})
    entry[1][seq] = op


def _check_orphans():
    """Raise for an orphan write whose memory is still alive. Memory that is
    only held by unreachable objects (a reference cycle: a test's or a loop's
    leftovers) is collected first, so whether backward raises never depends
    on when the cyclic collector last ran (rare: only after an orphan write)."""
    import gc
    gc.collect()
    if _ORPHANS:
        _raise_orphan()


def _raise_orphan():
    seq, op = next(iter(next(iter(_ORPHANS.values()))[1].items()))
    raise RuntimeError(
        f"backward: an in-place '{op}' gave a value that requires grad to a view of another tensor's memory "
        f"(such as t = out[0] of a tensor out that requires no grad, then t += v or t[1] = v); the tensor "
        f"it views does not record it, so gradients through that tensor would be wrong. Index the tensor "
        f"itself (out[0] += v, out[0, 1] = v), or change a clone() of the view. This error remains until "
        f"that memory is freed.")


def write_inplace(op, target, prim, others, attrs, write, casting="same_kind", absorb=None):
    """Apply in-place op ``op`` (``"add_"``, ``"setitem"``...) to eager tensor
    ``target``: ``target`` takes the value of ``prim(target, *others,
    **attrs)``, which ``write(dst, *arrays, **attrs)`` writes into ``target``'s
    array (the same array object, so whoever holds it, ``target.data`` or
    ``target.numpy()``, sees the change).

    As torch: the result must keep ``target``'s shape and, with ``casting=
    "same_kind"``, its dtype must cast to ``target``'s (an int tensor cannot
    take ``/= 2``); a leaf that requires grad raises outside ``no_grad``;
    under grad mode, when ``target`` or an operand requires grad, the
    application is recorded and ``target`` takes its new place in the graph.
    ``absorb``: for ``x[i] = t`` where ``t`` is the very region ``x[i]``, the
    tensor whose in-place writes this write accounts for.

    Returns ``target``.
    """
    state = _STATE
    lazy = _engine.lazy_type()
    if _MODES and state.path > 1 and any(getattr(i, "deferred", False) for i in state.stack):
        raise RuntimeError(
            f"{op}: in-place operations are not supported inside dn.autobatch(): the pending ops read their "
            f"inputs when the batch runs, so a write would change what they compute. Write it out of place "
            f"(y = y + x; dn.where for an item assignment), or before entering or after leaving the context")
    if lazy is not None and isinstance(target, lazy):
        raise RuntimeError(
            f"{op}: this tensor was computed by dn.autobatch() (its array is a view of a batch's results); "
            f"in-place operations on it are not supported: write it out of place (y = y + x) or change "
            f"y.clone()")
    dst = target._data
    if type(dst) is not np.ndarray:
        # a numpy scalar (a whole-tensor reduction's result): immutable and
        # shared with no other tensor, so it becomes an array of its own
        dst = target._data = np.array(dst)
    had = target.requires_grad
    grad = state.grad_enabled
    if grad and had and target._node is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation "
                           f"(as torch: wrap the update in dn.no_grad(), as an optimizer step does, or change "
                           f"a clone())")
    arrays = [dst]
    parents = [None]
    rg = False
    for a in others:
        if isinstance(a, _engine.Tensor):
            if a is target:
                arrays.append(dst)
                parents.append(a if had else None)     # the ghost, once made
                rg = rg or had
                continue
            if lazy is not None and type(a) is lazy:
                a = a._eager()
            arrays.append(a._data)
            parents.append(a if a.requires_grad else None)
            rg = rg or a.requires_grad
        elif is_interpreted(a):
            raise TypeError(f"{op}: cannot write a static-graph value into an eager tensor (got {a!r})")
        else:
            # a numpy scalar counts as its Python number (weak), as in torch
            arrays.append(a.item() if isinstance(a, np.generic) else a)
            parents.append(None)
    try:
        try:
            aval = _checked(prim, arrays, attrs)
        except PromotionNeeded:
            # a float tensor updated by an integer or bool operand (x.add_(idx)), an
            # int32 one by an int64 (+, -, *: the low bits are the same): torch computes
            # in x's dtype, numpy would promote float32 to float64, int32 to int64
            rest = arrays[1:]
            if not (dst.dtype.kind == "f" or (dst.dtype.kind in "iu" and prim.name in ("add", "sub", "mul"))) or \
                    not all(a is dst or (isinstance(a, np.ndarray) and a.dtype.kind in "biu") for a in rest):
                raise
            arrays = [dst] + [a if a is dst else a.astype(dst.dtype) for a in rest]
            aval = _checked(prim, arrays, attrs)
    except ShapeError as e:
        raise type(e)(f"{op}: {e}") from None
    if tuple(aval.shape) != dst.shape:
        raise ShapeError(f"{op}: output with shape {fmt_shape(dst.shape)} doesn't match the broadcast shape "
                         f"{fmt_shape(tuple(aval.shape))} (an in-place op keeps the tensor's shape, as torch)")
    if casting == "same_kind" and aval.dtype != dst.dtype and not np.can_cast(aval.dtype, dst.dtype, "same_kind"):
        raise DTypeError(f"{op}: result type {aval.dtype} can't be cast to the desired output type {dst.dtype} "
                         f"(an in-place op keeps the tensor's dtype, as torch)")
    record = grad and prim.differentiable and (had or rg)
    origin = None
    if record:
        if dst.dtype.kind != "f":
            raise DTypeError(f"{op}: a value that requires grad cannot be written into a tensor of dtype "
                             f"{dst.dtype} (only floating-point tensors have gradients)")
        if had:
            origin = _view_origin(op, target, dst)
    if not dst.flags.writeable:
        raise RuntimeError(f"{op}: the tensor's array is read-only (an expanded or broadcast view, whose "
                           f"elements share memory, the dense copy p.grad gives of a row-sparse gradient, or an "
                           f"array made read-only): change a clone() instead")
    saved = arrays
    if record:
        # what the VJPs will read of the inputs must survive the write: a
        # copy of each such input that shares memory with the target
        reads = prim.vjp_reads
        need = set()
        for i, pa in enumerate(parents):
            if pa is not None or (i == 0 and had):
                need.update(range(len(arrays)) if reads is None else reads if prim.joint_vjp is not None
                            else reads[i])
        saved = list(arrays)
        for j in need:
            if j != "out" and type(arrays[j]) is np.ndarray and np.may_share_memory(arrays[j], dst):
                saved[j] = arrays[j].copy()
    try:
        write(*arrays, **attrs)
    except (ValueError, TypeError, OverflowError) as e:
        kind = DTypeError if isinstance(e, TypeError) else ShapeError
        raise kind(f"{op}: {e}") from None
    seq = _next_seq()
    _log_write(dst, seq, op, record)
    if not record:
        return target
    ghost = _ghost(target)
    parents = [ghost if (pa is target or i == 0) and had else pa for i, pa in enumerate(parents)]
    absorbed = ()
    if absorb is not None:
        absorbed = frozenset(_inplace_chain(absorb))
        entry = _ORPHANS.get(id(memory_base(dst)))
        if entry is not None:
            for w in absorbed:
                entry[1].pop(w, None)
            if not entry[1]:
                del _ORPHANS[id(memory_base(dst))]
    node = _object_new(_engine.Node)
    node.prim = prim
    node.args = tuple(saved)
    node.parents = tuple(parents)
    node.attrs = attrs
    node.out = dst
    node.g = None
    node.seq = seq
    node.inplace = (ghost, absorbed)
    target._node = node
    target._idx = 0
    target.requires_grad = True
    if origin is not None:
        _rebase(op, origin, target, seq)
    elif not had and dst.base is not None:
        _orphan(dst, seq, op)
    return target


def _checked(prim, arrays, attrs):
    """The output aval of ``prim`` on ``arrays``: the shape rule's result,
    looked up in the primitive's input-check cache under bind's key for the
    same signature (a miss runs the rule and fills the cache)."""
    sig = []
    for a in arrays:
        tp = type(a)
        if tp is _NDARRAY:
            sig.append(a.shape)
            sig.append(a.dtype)
        elif tp in _WEAK:
            sig.append(tp)
            sig.append(None)
        else:
            return check_shapes(prim, arrays, attrs)      # a list...: no cheap signature
    sig = tuple(sig)
    ak = prim.attr_key
    try:
        key = sig if not attrs else (sig, *attrs.items(), *map(type, attrs.values())) if ak is None \
            else (sig, ak(**attrs))
        aval = prim.checked.get(key)
    except TypeError:
        return check_shapes(prim, arrays, attrs)          # an attribute holds an array
    return aval if aval is not None else _check_signature(prim, key, arrays, attrs)


def _written_after(a, seq):
    """The op of an in-place write to ``a``'s memory after ``seq``, or None."""
    log = _log_of(memory_base(a))
    if log is not None and log.last > seq:
        return log.op
    return None


def _check_saved(n, args, out, parents, attrs):
    """Raise if a value the VJPs of node ``n`` read was written in place after
    ``n`` was recorded (torch's version-counter check)."""
    prim = n.prim
    reads = prim.vjp_reads
    if args is None:
        return                       # freed: backward reports that itself
    if reads is None:
        need = list(range(len(args))) + ["out"]
    elif prim.joint_vjp is not None:
        need = reads
    else:
        need = []
        for i, p in enumerate(parents):
            if p is not None:
                need.extend(reads[i])
    seq = n.seq
    for j in need:
        if j == "out":
            for o in (out if prim.multiple_results else (out,)):
                if type(o) is np.ndarray:
                    op = _written_after(o, seq)
                    if op is not None:
                        _raise_saved(prim, "its output", o, op)
        else:
            a = args[j]
            if type(a) is np.ndarray:
                op = _written_after(a, seq)
                if op is not None:
                    _raise_saved(prim, f"its input {j}", a, op)
    # index arrays among the attributes (getitem's) are read by the VJPs too
    for v in attrs.values():
        for a in (v if type(v) is tuple else (v,)):
            if type(a) is np.ndarray:
                op = _written_after(a, seq)
                if op is not None:
                    _raise_saved(prim, "an index array", a, op)


def _raise_saved(prim, what, a, op):
    raise RuntimeError(
        f"backward: one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: {what} (shape {fmt_shape(a.shape)}, {a.dtype}), saved by '{prim.name}' for its "
        f"gradient, was changed by '{op}' after '{prim.name}' was recorded. Compute out of place "
        f"(y = y + x rather than y += x), or change a clone()")


def _history_at(p, pn, n, k):
    """The history of parent ``k`` of node ``n`` (tensor ``p``, its node
    ``pn``) as ``n`` read it: older than ``n`` (an in-place op since gave
    ``p`` a new one: back through the ghosts), and raising when an in-place
    op through other tensors sharing ``p``'s memory changed its value
    between that history and ``n``."""
    seq = n.seq
    while pn is not None and pn.seq > seq:
        p = pn.inplace[0]
        pn = p._node
    if pn is None:
        return p, pn
    log = _log_of(memory_base(p._data))
    if log is None or not log.swaps or log.swaps[-1] <= pn.seq:
        return p, pn
    swaps = log.swaps
    ip = getattr(n, "inplace", None)
    absorbed = ip[1] if ip is not None and k == 0 and ip[0] is p else ()
    j = _bisect_right(swaps, pn.seq)
    while j < len(swaps) and swaps[j] < seq:
        if swaps[j] not in absorbed:
            raise RuntimeError(
                f"backward: input {k} of '{n.prim.name}' was changed in place by '{log.swap_ops[j]}' through "
                f"another tensor sharing its memory (a view of it, or the tensor it is a view of) after "
                f"'{pn.prim.name}' computed it and before '{n.prim.name}' read it, so its recorded history no "
                f"longer gives its value and the gradient would be wrong. Change a clone(), or index the "
                f"tensor itself (y[0:2] += x rather than changing a reshape or transpose of y)")
        j += 1
    return p, pn


# --- i22-torch-a: retain_grad and backward(inputs=) ---------------------------------------------------

# the non-leaf tensors whose .grad backward fills (Tensor.retain_grad), by
# id: weak references, so that marking a tensor does not keep it (or its
# graph) alive (not a WeakSet: its lookups compare tensors with ==, which is
# elementwise)
_RETAINED = {}


def retain_grad(t):
    """Mark non-leaf tensor ``t`` so that backward fills its ``.grad`` (torch's
    ``Tensor.retain_grad``); a leaf is unchanged (its ``.grad`` is filled
    anyway)."""
    if not t.requires_grad:
        raise RuntimeError("retain_grad: can't retain_grad on a tensor that has requires_grad=False")
    if t._node is not None and id(t) not in _RETAINED:
        k = id(t)
        _RETAINED[k] = weakref.ref(t, lambda _, k=k: _RETAINED.pop(k, None))


def retains_grad(t):
    """Whether :func:`retain_grad` marked ``t`` and ``t`` is not a leaf."""
    r = _RETAINED.get(id(t))
    return t._node is not None and r is not None and r() is t


def _targets(inputs):
    """``(only, capture)`` of one backward: the ids of the tensors to fill
    (None: every leaf) and, by node, the non-leaf tensors that receive the
    gradient of their output of that node (each tensor's node read now: an
    in-place op since the mark moved it to a new one, as torch's)."""
    capture = {}
    seen = set()
    only = None
    if inputs is not None:
        only = set()
        for t in inputs:
            if not isinstance(t, _engine.Tensor):
                raise TypeError(f"backward: inputs must be tensors, got {type(t).__name__}")
            if id(t) in only:
                continue
            only.add(id(t))
            if t._node is not None:
                capture.setdefault(t._node, []).append(t)
                seen.add(id(t))
    for r in list(_RETAINED.values()):
        t = r()
        if t is not None and t._node is not None and id(t) not in seen and (only is None or id(t) in only):
            capture.setdefault(t._node, []).append(t)
    return only, (capture or None)
