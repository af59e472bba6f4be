"""Matrix products: ``matmul`` (``mm``, ``dot``, ``bmm``), ``linear``,
``einsum``, ``outer`` and the fused ``addmm`` / ``baddbmm`` / ``addbmm``."""
from __future__ import annotations

import numpy as np

from .. import primitives as P
from ..engine import bind, bind2
from .elementwise import add, mul
from .array import broadcast_to, reshape
from .reductions import sum

__all__ = ["matmul", "mm", "dot", "linear", "einsum", "bmm", "outer", "addmm", "baddbmm", "addbmm"]


def matmul(input, other):
    """The matrix product, as ``torch.matmul`` (1-D operands are vectors, more
    dimensions are batches that broadcast); both operands of one dtype."""
    return bind2(P.matmul_p, input, other)


def mm(input, mat2):
    """The product of two matrices (both 2-D, no broadcasting), as ``torch.mm``."""
    xs, ys = tuple(input.shape), tuple(mat2.shape)
    if len(xs) != 2 or len(ys) != 2:
        raise P.ShapeError(f"mm: expected 2-D matrices, got input.shape={xs} and mat2.shape={ys}")
    return bind2(P.matmul_p, input, mat2)


def dot(input, tensor):
    """The inner product of two 1-D tensors of one size and dtype, as
    ``torch.dot`` (a 0-d result)."""
    xs, ys = tuple(input.shape), tuple(tensor.shape)
    if len(xs) != 1 or len(ys) != 1:
        raise P.ShapeError(f"dot: expected 1-D tensors, got input.shape={xs} and tensor.shape={ys} (for matrices: "
                           f"mm or matmul)")
    return bind2(P.matmul_p, input, tensor)


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` (weight is (out_features, in_features), as PyTorch);
    ``bias=None`` is ``x @ weight.T``."""
    # a Python 0 for no bias: the one fused primitive, and (a weak scalar) it promotes nothing
    return bind(P.linear_p, x, weight, 0 if bias is None else bias)


def einsum(equation, *operands):
    """Einstein summation, as ``torch.einsum`` / ``numpy.einsum``
    (``einsum('ij,jk->ik', a, b)``; ``...`` for leading dimensions; without
    ``->`` the output is the letters used once, in alphabetical order); the
    operands may also come as one list. One primitive: its gradient
    contracts the output gradient with the other operands."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ins, out = P.parse_einsum(equation, [len(o.shape) if hasattr(o, "shape") else np.ndim(o) for o in operands])
    return bind(P.einsum_p, *operands, equation=",".join(ins) + "->" + out)


def bmm(input, mat2):
    """Batched matrix product of (b, n, m) and (b, m, p), as ``torch.bmm``
    (no broadcasting: both must be 3-D with the same batch size)."""
    xs, ys = tuple(input.shape), tuple(mat2.shape)
    if len(xs) != 3 or len(ys) != 3:
        raise P.ShapeError(f"bmm: expected 3-D tensors, got input.shape={xs} and mat2.shape={ys}")
    if xs[0] is not None and ys[0] is not None and xs[0] != ys[0]:
        raise P.ShapeError(f"bmm: batch sizes differ: input.shape[0]={xs[0]}, mat2.shape[0]={ys[0]}")
    return matmul(input, mat2)


def _ndim_is(op, name, x, n):
    if len(x.shape) != n:
        raise P.ShapeError(f"{op}: expected {name} to be a {n}-D tensor, got {len(x.shape)}-D (shape "
                           f"{tuple(x.shape)})")


def outer(input, vec2):
    """The outer product ``input[i] * vec2[j]`` of two 1-D tensors, as ``torch.outer``.

    Shapes: (n,), (m,) -> (n, m).
    """
    _ndim_is("outer", "input", input, 1)
    _ndim_is("outer", "vec2", vec2, 1)
    return mul(reshape(input, -1, 1), reshape(vec2, 1, -1))


def _scale(v, k):
    return v if k == 1 else mul(v, k)


def _plus_product(op, input, product, beta, alpha):
    """``beta * input + alpha * product``; with ``beta == 0`` ``input`` is
    ignored (its NaN and inf do not propagate), as torch's."""
    for name, v in (("beta", beta), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{op}: {name} must be a number, got {v!r}")
    out = _scale(product, alpha)
    if beta == 0:
        shape = _broadcast_shapes_of(op, input, out)
        return out if tuple(out.shape) == shape else broadcast_to(out, shape)
    return add(_scale(input, beta), out)


def _broadcast_shapes_of(op, a, b):
    return P.broadcast_shapes(op, tuple(a.shape), tuple(b.shape), names=["input", "the product"])


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``, as ``torch.addmm``.

    Shapes: ``mat1`` (n, k), ``mat2`` (k, m), ``input`` broadcastable to (n, m) -> (n, m).
    """
    _ndim_is("addmm", "mat1", mat1, 2)
    _ndim_is("addmm", "mat2", mat2, 2)
    return _plus_product("addmm", input, matmul(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``, as ``torch.baddbmm``.

    Shapes: ``batch1`` (b, n, k), ``batch2`` (b, k, m), ``input`` broadcastable to (b, n, m) -> (b, n, m).
    """
    _ndim_is("baddbmm", "batch1", batch1, 3)
    _ndim_is("baddbmm", "batch2", batch2, 3)
    return _plus_product("baddbmm", input, bmm(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``, as ``torch.addbmm``.

    Shapes: ``batch1`` (b, n, k), ``batch2`` (b, k, m), ``input`` broadcastable to (n, m) -> (n, m).
    """
    _ndim_is("addbmm", "batch1", batch1, 3)
    _ndim_is("addbmm", "batch2", batch2, 3)
    return _plus_product("addbmm", input, sum(bmm(batch1, batch2), 0), beta, alpha)
