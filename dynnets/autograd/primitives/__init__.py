"""The table of primitives: the only home of forward rules, shape rules and gradients.

A package split by domain (as JAX splits its rules and chainer its
``functions/``): :mod:`.core` holds :class:`Primitive`, :func:`defprim`,
:data:`PRIMITIVES`, :class:`Aval`, the errors and the shape/dtype helpers;
:mod:`.elementwise`, :mod:`.array`, :mod:`.linalg`, :mod:`.nn`, :mod:`.cells`,
:mod:`.tree` and :mod:`.seq` declare the primitives. Importing this package
imports them all, so :data:`PRIMITIVES` is complete, and
``grep -rn "vjp=" dynnets`` lists every gradient in the project.
"""
from __future__ import annotations

import numpy as np

from . import array, cells, elementwise, linalg, nn, seq, tree
from ..gradtypes import MatmulT, OuterSum, RowSparse
from .array import *  # noqa: F401,F403
from .cells import *  # noqa: F401,F403
from .core import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .seq import *  # noqa: F401,F403
from .tree import *  # noqa: F401,F403

# --------------------------------------------------------------------------
# VJPs as primitives (for the static graph's symbolic gradients)
# --------------------------------------------------------------------------

_VJP_PRIMS: dict = {}


_LAZY = (RowSparse, OuterSum, MatmulT)

# VJPs that return a factored (OuterSum) gradient for a few rows, and their
# dense twins for callers that densify at once (static plans): there a factor
# object and its product cost more than forming the gradient directly
DENSE_VJPS = {("matmul", 1): linalg._matmul_vjp_w_dense, ("linear", None): linalg._linear_vjp_dense}


def _dense_like(a, x):
    if a is None:
        return None
    if type(a) in _LAZY:
        a = a.to_dense()
    dt = getattr(x, "dtype", None)
    return a if dt is None or a.dtype == dt else np.asarray(a).astype(dt)


def vjp_primitive(prim, i=None):
    """A primitive whose forward *is* ``prim``'s VJP for input ``i`` (or the
    joint VJP when ``i`` is None). Inputs: (g, *prim_inputs, out) where ``g``
    and ``out`` are tuples packed as separate arguments for multiple-result
    primitives: (g_0..g_k, x_0..x_n, out_0..out_k). Not itself differentiable
    (no second-order gradients)."""
    key = (prim.name, i)
    p = _VJP_PRIMS.get(key)
    if p is not None:
        return p
    fn = DENSE_VJPS.get(key) or (prim.joint_vjp if i is None else prim.vjps[i])

    def impl(*args, _n_in, **attrs):
        if prim.multiple_results:
            nout = (len(args) - _n_in) // 2
            g = tuple(args[:nout])
            ins = args[nout:nout + _n_in]
            out = tuple(args[nout + _n_in:])
        else:
            g, ins, out = args[0], args[1:1 + _n_in], args[1 + _n_in]
        r = fn(g, ins, out, **attrs)
        # dense, in each input's dtype (the static graph declares that)
        if i is None:
            return tuple(_dense_like(a, x) for a, x in zip(r, ins))
        return _dense_like(r, ins[i])

    def shape(*avals, _n_in, **attrs):
        if prim.multiple_results:
            nout = (len(avals) - _n_in) // 2
            gs, ins, outs = avals[:nout], avals[nout:nout + _n_in], avals[nout + _n_in:]
        else:
            gs, ins, outs = avals[:1], avals[1:1 + _n_in], avals[1 + _n_in:]
        # each output gradient (a None constant where an output has none) must
        # have its output's shape: the VJPs' kernels index them unchecked
        for k, (ga, oa) in enumerate(zip(gs, outs)):
            if not (ga.shape == () and dtype_of(ga) == object) and not fits(tuple(ga.shape), tuple(oa.shape)):
                raise ShapeError(f"{name}: gradient of output {k} has shape {fmt_shape(ga.shape)}, the output "
                                 f"{fmt_shape(oa.shape)}")
        if i is None:
            return tuple(Aval(tuple(a.shape), dtype_of(a)) for a in ins)
        return Aval(tuple(ins[i].shape), dtype_of(ins[i]))

    name = f"vjp_{prim.name}" + ("" if i is None else f"_{i}")
    p = Primitive(name, impl, shape, multiple_results=(i is None), differentiable=False)
    _VJP_PRIMS[key] = p
    return p


VJP_PRIMITIVES = _VJP_PRIMS

