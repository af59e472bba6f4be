"""Recording's plans: what every application of one primitive with one
input signature shares (the shape rule's output avals, raising ShapeError at
the user's line; which inputs are per-instance), from the primitive's
batching rule (``defprim(batch=...)``)."""
from __future__ import annotations

import numpy as np

from ..primitives.core import run_rule
from ..tensor import Parameter
from .lazy import WEAK, LazyTensor, Plan, aval_of, bkey_id, desc_id, ident
from .schedule import SINGLE, VIEW

_NDARRAY = np.ndarray
_object_new = object.__new__
_WEAK = WEAK

PLANS = {}
PLANS_MAX = 20000


def _cls_rows(rule, prim, args, avals, out, attrs):
    if rule.when is not None and not rule.when(*avals, **attrs):
        return None
    b = rule.batched
    if callable(b):
        b = b(**attrs)          # positions that depend on the attributes (a batchable_call's plan)
    parts = []
    kinds = []
    for i, a in enumerate(args):
        if i in b:
            av = avals[i]
            shp = av.shape
            if not shp:
                return None
            parts.append(shp[1:])
            parts.append(av.dtype)
            kinds.append(1)
        else:
            parts.append(ident(a))
            kinds.append(0)
    return tuple(parts), kinds


def _cls_ragged(rule, prim, args, avals, out, attrs):
    if rule.when is not None and not rule.when(*avals, **attrs):
        return None
    oi = rule.offsets
    o = args[oi]
    # the offsets are joined when the call runs: they must be values now
    if type(o) is not _NDARRAY or o.ndim != 1 or o.dtype.kind not in "iu":
        return None
    parts = []
    kinds = []
    for i, a in enumerate(args):
        if i == oi:
            parts.append("offsets")
            kinds.append(1)
        elif i in rule.batched:
            shp = avals[i].shape
            if not shp:
                return None
            parts.append(shp[1:])
            parts.append(avals[i].dtype)
            kinds.append(1)
        else:
            parts.append(ident(a))
            kinds.append(0)
    return tuple(parts), kinds


def _cls_elementwise(rule, prim, args, avals, out, attrs):
    S = tuple(out.shape)
    nd = len(S)
    parts = []
    kinds = []
    for a, av in zip(args, avals):
        tp = type(a)
        if tp in _WEAK or av is None or isinstance(a, np.generic):
            parts.append(ident(a))
            kinds.append(0)
            continue
        shp = tuple(av.shape)
        full = shp == S
        # per-instance unless a parameter that broadcasts as it is (a (1, H) weight)
        if full and (tp is not Parameter or (nd and S[0] != 1)):
            parts.append(shp[1:])
            parts.append(av.dtype)
            kinds.append(1)
            continue
        # a shared operand: it must broadcast the same way against stacked rows
        if nd == 0:
            if shp:
                return None
        elif len(shp) == nd and shp[0] != 1:
            return None
        parts.append(ident(a))
        kinds.append(0)
    if 1 not in kinds:
        return None
    return tuple(parts), kinds


def reduce_axes(attrs, nd):
    ax = attrs.get("axis")
    if ax is None:
        return tuple(range(nd))
    if isinstance(ax, (tuple, list)):
        return tuple(int(a) % nd for a in ax)
    return (int(ax) % nd,)


def _cls_reduce(rule, prim, args, avals, out, attrs):
    av = avals[0]
    nd = len(av.shape)
    if nd == 0:
        return None
    ax = reduce_axes(attrs, nd)
    if 0 in ax:
        if prim.name == "max":
            return None
        return (("segment",), av.shape[1:], av.dtype), [1]
    return (av.shape[1:], av.dtype), [1]


def _cls_xent(rule, prim, args, avals, out, attrs):
    parts = []
    for av in avals:
        if av is None or not av.shape:
            return None
        parts.append(av.shape[1:])
        parts.append(av.dtype)
    return tuple(parts), [1] * len(args)


def _cls_view(rule, prim, args, avals, out, attrs):
    name = prim.name
    if name == "concat":
        if attrs.get("axis", 0) != 0 or any(not av.shape for av in avals):
            return _cls_rows_all(rule, prim, args, avals, out, attrs)
        return VIEW
    if name == "stack":
        ax = attrs.get("axis", 0)
        if ax == 0:
            return VIEW
        return _cls_rows_all(rule, prim, args, avals, out, attrs)
    if name in ("reshape", "split_rows"):
        return VIEW
    if name == "take":
        if len(avals[1].shape) == 1 and type(args[1]) is _NDARRAY:
            return VIEW
        return None
    if name == "getitem":
        idx = attrs["index"]
        first = idx[0] if type(idx) is tuple and len(idx) == 1 else idx
        if type(idx) is not tuple or len(idx) == 1:
            if type(first) is int or (type(first) is slice and first.step in (None, 1)):
                return VIEW
        if type(idx) is tuple and len(idx) >= 2 and idx[0] == slice(None):
            for i in idx[1:]:
                if not (type(i) in (int, slice) or i is None or i is Ellipsis):
                    return None
            if Ellipsis in idx[1:] and len(avals[0].shape) < 1:
                return None
            av = avals[0]
            if not av.shape:
                return None
            return (av.shape[1:], av.dtype), [1]
        if type(idx) is tuple and len(idx) >= 2 and idx[0] is Ellipsis:
            # x[..., a:b] (a q/k/v split of a fused projection) keeps axis 0 whole when it indexes fewer axes
            rest = idx[1:]
            av = avals[0]
            if len(rest) < len(av.shape) and all(type(i) in (int, slice) for i in rest):
                return (av.shape[1:], av.dtype), [1]
        return None
    return None


def _cls_rows_all(rule, prim, args, avals, out, attrs):
    """Every input per-instance, stacked along axis 0 (concat/stack along another axis)."""
    parts = []
    for av in avals:
        if not av.shape:
            return None
        parts.append(av.shape[1:])
        parts.append(av.dtype)
    if len(set(av.shape[0] for av in avals)) != 1:
        return None
    return tuple(parts), [1] * len(args)


def make_plan(prim, args, attrs, gm, key):
    """The plan of a new input signature: the shape rule's output avals (it
    raises ShapeError for bad inputs) and the batching rule's classification."""
    avals = [aval_of(a) for a in args]
    out = run_rule(prim, avals, attrs)
    plan = _object_new(Plan)
    plan.prim = prim
    plan.out = out
    plan.multi = prim.multiple_results
    plan.gm = gm
    plan.diff = gm and prim.differentiable
    plan.descs = tuple(desc_id(tuple(o.shape), np.dtype(o.dtype), LazyTensor)
                       for o in (out if plan.multi else (out,)))
    plan.kinds = None
    plan.shared = ()
    plan.bkey = None
    plan.last = None
    rule = prim.batch
    cls = None if rule is None else _CLASSIFY[rule.kind](rule, prim, args, avals, out, attrs)
    if cls is None:
        plan.sid = SINGLE
    elif cls is VIEW:
        plan.sid = VIEW
    else:
        kinds = cls[1]
        plan.kinds = kinds
        plan.shared = tuple(i for i, k in enumerate(kinds) if k == 0)
        # the signature without the shared inputs' identities (added per
        # application): per-instance inputs by trailing shape and dtype, so
        # applications with different row counts batch together
        parts = [prim, gm]
        for a, av, k in zip(args, avals, kinds):
            parts.append((av.shape[1:], np.dtype(av.dtype)) if k else type(a))
        try:
            if attrs:
                ak = prim.attr_key
                parts.append(ak(**attrs) if ak is not None else tuple(attrs.items()))
                parts.append(tuple(map(type, attrs.values())))
            plan.bkey = bkey_id(tuple(parts))
            plan.sid = 0
        except TypeError:
            plan.sid = SINGLE
    if key is not None:
        if len(PLANS) >= PLANS_MAX:
            PLANS.clear()
        PLANS[key] = plan
    return plan


_CLASSIFY = {"rows": _cls_rows, "elementwise": _cls_elementwise, "reduce": _cls_reduce, "xent": _cls_xent,
             "view": _cls_view, "ragged": _cls_ragged}
