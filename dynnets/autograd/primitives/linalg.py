"""Linear algebra: matmul, linear (``x @ w.T + b``) and einsum. Weight gradients of
products over a few rows stay factored (:class:`..gradtypes.OuterSum`)."""
from __future__ import annotations

import math

import numpy as np

from ..gradtypes import factored_wgrad, tdot
from .core import (batch_rows, Aval, DTypeError, NativeUnsupported, ShapeError, broadcast_shapes, defprim, dims_match, dtype_of, fmt_shape,
                   result_type, ufunc_dtype, unbroadcast)

__all__ = ["matmul_p", "linear_p", "einsum_p", "parse_einsum"]

# --------------------------------------------------------------------------
# linear algebra
# --------------------------------------------------------------------------

def _matmul(x, w):
    if type(x) is np.ndarray and type(w) is np.ndarray and x.ndim == 2 and w.ndim == 2:
        # np.dot: the same product for 2-D operands, without matmul's slow
        # path at k == 1 (see tdot), and ~0.3 us less call overhead
        return np.dot(x, w)
    return np.matmul(x, w)


def _same_kind(op, **avals):
    """PyTorch's products take operands of one dtype: integer with floating
    point, float32 with float64 and int32 with int64 all raise there ("expected
    m1 and m2 to have the same dtype"), where numpy would promote (a float32
    model fed one float64 array would silently compute in float64). A
    DTypeError naming the op and every operand's dtype; a Python number (the
    absent bias of ``linear``) takes part in no promotion and is skipped."""
    dts = {n: dtype_of(a) for n, a in avals.items() if len(tuple(a.shape)) or not isinstance(a.dtype, (int, float))}
    if len(set(dts.values())) <= 1:
        return
    desc = ", ".join(f"{n}.dtype={d}" for n, d in dts.items())
    floats = [n for n, d in dts.items() if d.kind in "fc"]
    ints = [n for n, d in dts.items() if d.kind in "biu"]
    if floats and ints:
        raise DTypeError(f"{op}: expected operands of one kind, got {desc} (as torch, which refuses this: cast "
                         f"the integer operand first, e.g. {ints[0]}.float())")
    first = next(iter(dts.values()))
    other = next(n for n, d in dts.items() if d != first)
    raise DTypeError(f"{op}: expected operands of one dtype, got {desc} (as torch, which raises \"expected m1 and "
                     f"m2 to have the same dtype\"; numpy would promote silently): cast one, e.g. "
                     f"{other}.to(dynnets.{first.name})")


def _matmul_shape(x, w):
    _same_kind("matmul", x=x, w=w)
    xs, ws = tuple(x.shape), tuple(w.shape)
    if len(xs) == 0 or len(ws) == 0:
        raise ShapeError(f"matmul: inputs must have at least one dimension, got x.shape={fmt_shape(xs)}, w.shape={fmt_shape(ws)}")
    xk = xs[-1]
    wk = ws[0] if len(ws) == 1 else ws[-2]
    if xk is not None and wk is not None and xk != wk:
        wname = "w.shape[0]" if len(ws) == 1 else ("w.shape[0]" if len(ws) == 2 else "w.shape[-2]")
        raise ShapeError(f"matmul: x.shape[-1]={xk} does not match {wname}={wk} "
                         f"(x.shape={fmt_shape(xs)}, w.shape={fmt_shape(ws)})")
    xb = xs[:-2] if len(xs) > 1 else ()
    wb = ws[:-2] if len(ws) > 1 else ()
    batch = broadcast_shapes("matmul", xb, wb, names=["x batch", "w batch"])
    shp = batch + (xs[-2:-1] if len(xs) > 1 else ()) + (ws[-1:] if len(ws) > 1 else ())
    return Aval(shp, result_type(x.dtype, w.dtype))


def _matmul_vjp_x(g, ins, out):
    x, w = ins
    if w.ndim == 1:
        gx = np.multiply.outer(g, w) if x.ndim > 1 else g * w
    elif x.ndim == 1:
        gx = np.matmul(g[..., None, :], np.swapaxes(w, -1, -2))[..., 0, :]
    else:
        gx = np.matmul(g, np.swapaxes(w, -1, -2))
    return unbroadcast(gx, x.shape)


def _matmul_vjp_w(g, ins, out):
    x, w = ins
    if x.ndim == 2 and w.ndim == 2:
        return factored_wgrad(x, g, w.shape)
    return _matmul_vjp_w_dense(g, ins, out)


def _matmul_vjp_w_dense(g, ins, out):
    x, w = ins
    if x.ndim == 1:
        gw = np.multiply.outer(x, g) if w.ndim > 1 else g * x
        if w.ndim > 2:
            gw = np.matmul(x[:, None], g[..., None, :])
    elif w.ndim == 1:
        gw = np.matmul(np.swapaxes(x, -1, -2), g[..., None])[..., 0]
    elif x.ndim == 2 and w.ndim == 2:
        gw = tdot(x, g)
    else:
        gw = np.matmul(np.swapaxes(x, -1, -2), g)
    return unbroadcast(gw, w.shape)


def _matmul_native(gen, ins, attrs):
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    x, w = ins.args
    (m, k), (_, n) = gen.matrix_shapes(x, w)
    gen.bind(o, gen.dot(m, k, n, gen.op(x, dt)[0], False, gen.op(w, dt)[0], False, dt))


def _matmul_native_vjp_x(gen, ins, attrs):
    g, x, w = ins.args[0], ins.args[1], ins.args[2]
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    (m, k), (_, n) = gen.matrix_shapes(x, w)
    # g @ w.T: (m, n) @ (n, k)
    gen.bind(o, gen.dot(m, n, k, gen.op(g, dt)[0], False, gen.op(w, dt)[0], True, dt))


def _matmul_native_vjp_w(gen, ins, attrs):
    g, x, w = ins.args[0], ins.args[1], ins.args[2]
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    (m, k), (_, n) = gen.matrix_shapes(x, w)
    # x.T @ g: (k, m) @ (m, n)
    gen.bind(o, gen.dot(k, m, n, gen.op(x, dt)[0], True, gen.op(g, dt)[0], False, dt))


# static plans densify every gradient at once: there the dense twin of the weight
# VJP forms it directly (a factor object and its product cost more)
matmul_p = defprim("matmul", _matmul, _matmul_shape, vjp=(_matmul_vjp_x, _matmul_vjp_w), vjp_reads=((1,), (0,)),
                   dense_vjp=(None, _matmul_vjp_w_dense), native=_matmul_native,
                   native_vjp=(_matmul_native_vjp_x, _matmul_native_vjp_w),
    batch=batch_rows(0, when=lambda x, w: len(x.shape) >= 2 and len(w.shape) == 2))


def _linear(x, w, b):
    """``x @ w.T + b`` with ``w`` of shape (out, in), as ``torch.nn.functional.linear``."""
    return x @ w.T + b


def _linear_shape(x, w, b):
    _same_kind("linear", x=x, weight=w, bias=b)
    if len(w.shape) != 2:
        raise ShapeError(f"linear: weight must be 2-D (out_features, in_features), got w.shape={fmt_shape(w.shape)}")
    if len(x.shape) == 0:
        raise ShapeError(f"linear: x must have at least one dimension (..., in_features), got x.shape={fmt_shape(x.shape)}")
    if x.shape[-1] is not None and w.shape[1] is not None and x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: x.shape[-1]={x.shape[-1]} does not match weight.shape[1]={w.shape[1]} "
                         f"(x.shape={fmt_shape(x.shape)}, weight.shape={fmt_shape(w.shape)})")
    bs = tuple(b.shape)
    if not (bs == () or (len(bs) in (1, 2) and bs[:-1] in ((), (1,), (None,)) and dims_match(bs[-1], w.shape[0]))):
        o = fmt_shape(w.shape[:1])[1:-2]
        raise ShapeError(f"linear: bias.shape={fmt_shape(bs)} does not match weight.shape[0]={o} "
                         f"(expected ({o},), (1, {o}) or ())")
    # the bias broadcasts against x @ w.T: a (1, out) bias on a 1-D x gives (1, out), as in PyTorch
    out = broadcast_shapes("linear", tuple(x.shape[:-1]) + (w.shape[0],), bs, names=["x @ weight.T", "bias"])
    return Aval(out, ufunc_dtype("linear", np.add, Aval((), ufunc_dtype("linear", np.matmul, x, w)), b))



def _linear_vjp(g, ins, out, factor=True):
    x, w, b = ins
    rows = math.prod(x.shape[:-1])         # not -1: a reshape cannot infer it when in_features is 0
    x2 = x.reshape(rows, x.shape[-1])
    g2 = g.reshape(rows, w.shape[0])
    gw = factored_wgrad(g2, x2, w.shape) if factor else tdot(g2, x2)
    gx = (g2 @ w).reshape(x.shape)
    gb = g2.sum(0) if np.ndim(b) else g2.sum()
    return gx, gw, np.reshape(gb, np.shape(b))


def _linear_vjp_dense(g, ins, out):
    return _linear_vjp(g, ins, out, factor=False)


def _linear_native(gen, ins, attrs):
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    x, w, b = ins.args
    (m, k), (n, _) = gen.matrix_shapes(x, w)
    bx, bshape = gen.op(b, dt)
    if bshape not in ((), (n,), (1, n)) or gen.shape[o] != (m, n):
        raise NativeUnsupported("linear with a bias of another shape")
    gen.bind(o, gen.dot(m, k, n, gen.op(x, dt)[0], False, gen.op(w, dt)[0], True, dt, bias=(bx, bshape)))


def _linear_native_vjp(gen, ins, attrs):
    g, x, w, b = ins.args[0], ins.args[1], ins.args[2], ins.args[3]
    ox, ow, ob = ins.outs
    dt = gen.out_dtype(ox)
    for s in (ow, ob):
        gen.out_dtype(s)
    (m, k), (n, _) = gen.matrix_shapes(x, w)
    ge = gen.op(g, dt)[0]
    # gx = g @ w: (m, n) @ (n, k); gw = g.T @ x: (n, m) @ (m, k); gb = g summed over rows
    gen.bind(ox, gen.dot(m, n, k, ge, False, gen.op(w, dt)[0], False, dt))
    gen.bind(ow, gen.dot(n, m, k, ge, True, gen.op(x, dt)[0], False, dt))
    bshape = gen.shape[b]
    gen.ew(ob, (m, n), [(ge, (m, n))], gen.same, dt, acc=() if bshape == () else (1, n))


linear_p = defprim("linear", _linear, _linear_shape, joint_vjp=_linear_vjp, dense_vjp=_linear_vjp_dense,
                   vjp_reads=(0, 1), native=_linear_native, native_vjp=_linear_native_vjp,
    batch=batch_rows(0, when=lambda x, w, b: len(x.shape) >= 2))



# --------------------------------------------------------------------------
# einsum (torch.einsum / numpy.einsum notation)
# --------------------------------------------------------------------------

def parse_einsum(equation, ndims):
    """``equation`` for operands of ``ndims`` dimensions as
    ``(input subscripts, output subscripts)``, explicit: '...' expanded into
    letters the equation does not use (the same trailing letters for every
    operand, as its dimensions broadcast from the right), and an implicit
    output (no '->') made as numpy and torch make it: the '...' dimensions,
    then the letters used once, in alphabetical order. Raises ShapeError
    naming einsum."""
    if not isinstance(equation, str):
        raise ShapeError(f"einsum: the equation must be a string, got {equation!r}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ndims):
        raise ShapeError(f"einsum: the equation {equation!r} names {len(ins)} operands, got {len(ndims)}")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if c not in used]
    n_ell = 0
    for sub, nd in zip(ins, ndims):
        if "..." in sub:
            n_ell = max(n_ell, nd - (len(sub) - 3))
    if n_ell > len(spare):
        raise ShapeError(f"einsum: too many dimensions under '...' in {equation!r}")
    ell = "".join(sorted(spare[:n_ell]))
    out_ins = []
    for k, (sub, nd) in enumerate(zip(ins, ndims)):
        if sub.count("...") > 1 or any(not (c.isalpha() or c == ".") for c in sub):
            raise ShapeError(f"einsum: operand {k}'s subscripts {sub!r} in {equation!r} are not letters with at "
                             f"most one '...'")
        if "..." in sub:
            k_ell = nd - (len(sub) - 3)
            if k_ell < 0:
                raise ShapeError(f"einsum: operand {k} has {nd} dimensions, fewer than its subscripts {sub!r}")
            sub = sub.replace("...", ell[len(ell) - k_ell:] if k_ell else "")
        if "." in sub or len(sub) != nd:
            raise ShapeError(f"einsum: operand {k} has {nd} dimensions but its subscripts {ins[k]!r} in "
                             f"{equation!r} name {len(sub)}")
        out_ins.append(sub)
    if arrow:
        if rhs.count("...") > 1 or any(not (c.isalpha() or c == ".") for c in rhs):
            raise ShapeError(f"einsum: output subscripts {rhs!r} in {equation!r} are not letters with at most one "
                             f"'...'")
        out = rhs.replace("...", ell)
        if "." in out:
            raise ShapeError(f"einsum: invalid output subscripts {rhs!r} in {equation!r}")
    else:
        counts = {}
        for sub in out_ins:
            for c in sub:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    if len(set(out)) != len(out):
        raise ShapeError(f"einsum: output subscripts of {equation!r} repeat a letter")
    missing = [c for c in out if not any(c in s for s in out_ins)]
    if missing:
        raise ShapeError(f"einsum: output letter {missing[0]!r} of {equation!r} names no operand dimension")
    return tuple(out_ins), out


def _einsum_sizes(ins, avals):
    """Each letter's size (None unknown), checking operands agree."""
    sizes = {}
    for k, (sub, a) in enumerate(zip(ins, avals)):
        for c, d in zip(sub, tuple(a.shape)):
            old = sizes.get(c)
            if old is None:
                sizes[c] = d
            elif d is not None and d != old:
                raise ShapeError(f"einsum: subscript {c!r} has size {d} in operand {k} (shape {fmt_shape(a.shape)}) "
                                 f"and {old} elsewhere")
    return sizes


def _einsum(*ops, equation):
    # optimize: a contraction of two or more operands goes through tensordot (BLAS) in a good order
    return np.asarray(np.einsum(equation, *ops, optimize=len(ops) > 1))


def _einsum_shape(*ops, equation):
    if not isinstance(equation, str) or "->" not in equation or "." in equation:
        raise ShapeError(f"einsum: equation must be explicit ('ij,jk->ik', as dynnets.einsum makes it), got "
                         f"{equation!r}")
    if not ops:
        raise ShapeError("einsum: expected at least one operand")
    lhs, out = equation.split("->")
    ins = lhs.split(",")
    if len(ins) != len(ops):
        raise ShapeError(f"einsum: the equation {equation!r} names {len(ins)} operands, got {len(ops)}")
    for k, (sub, a) in enumerate(zip(ins, ops)):
        if len(sub) != len(tuple(a.shape)):
            raise ShapeError(f"einsum: operand {k} has shape {fmt_shape(a.shape)} but its subscripts {sub!r} name "
                             f"{len(sub)} dimensions")
    _same_kind("einsum", **{f"operand{k}": a for k, a in enumerate(ops)})
    sizes = _einsum_sizes(ins, ops)
    if len(set(out)) != len(out) or any(c not in sizes for c in out):
        raise ShapeError(f"einsum: invalid output subscripts in {equation!r}")
    return Aval(tuple(sizes[c] for c in out), result_type(*[a.dtype for a in ops]))


def _einsum_vjp(g, ins, out, equation):
    """Operand k's gradient: the output gradient contracted with the other
    operands onto k's letters; a letter summed within operand k alone is
    broadcast back (the sum's derivative is 1 everywhere); a repeated letter
    (a diagonal) is written on its diagonal, zeros elsewhere."""
    lhs, osub = equation.split("->")
    subs = lhs.split(",")
    arrays = [np.asarray(a) for a in ins]
    grads = []
    for k, (sub, x) in enumerate(zip(subs, arrays)):
        uniq = "".join(dict.fromkeys(sub))
        others = [s for j, s in enumerate(subs) if j != k]
        keep = "".join(c for c in uniq if c in osub or any(c in s for s in others))
        gk = np.einsum(",".join([osub] + others) + "->" + keep, g, *[a for j, a in enumerate(arrays) if j != k],
                       optimize=len(arrays) > 1)
        size = dict(zip(sub, x.shape))
        if keep != uniq:
            gk = np.broadcast_to(np.reshape(gk, [size[c] if c in keep else 1 for c in uniq]),
                                 tuple(size[c] for c in uniq))
        if uniq != sub:
            full = np.zeros(x.shape, dtype=g.dtype)
            np.einsum(sub + "->" + uniq, full)[...] = gk       # a writeable view of the diagonal
            gk = full
        grads.append(np.ascontiguousarray(gk, dtype=x.dtype))
    return tuple(grads)


einsum_p = defprim("einsum", _einsum, _einsum_shape, joint_vjp=_einsum_vjp)
