"""Every public op of ``dynnets`` against PyTorch: values, output dtypes and
gradients, in float64 and float32, eager and static (known and unknown
placeholder dimensions), on contiguous and non-contiguous inputs.

The table ``OPS`` pairs each op with the torch computation of the same
maths; ``test_op`` runs every entry in every dtype, mode and memory layout.
Edge values, ties, reductions, indexing, broadcasting, integer inputs and
empty dimensions have their own tests below.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

F = torch.nn.functional


class Op:
    """One op of the table: ``dn_fn`` and ``torch_fn`` take the inputs
    (drawn with ``shapes`` and ``domains``) in the same order; ``diff`` lists
    the inputs differentiated (default: all). ``layouts=False`` keeps the
    inputs contiguous (an op whose point is its indexing, not its memory);
    ``broadcast=False`` leaves out the zero-stride layout, whose repeated
    values tie (max, maximum: their tie conventions are tested apart).
    ``unknown`` selects the placeholder dimensions left unknown in the
    'static-unknown' mode: all (True) or per input a flag per dimension
    (squeeze and split need the size of their axis when the graph is built)."""

    def __init__(self, id, dn_fn, torch_fn, shapes, domains=None, diff=None, layouts=True, broadcast=True,
                 unknown=True, xfail=None):
        self.id = id
        self.dn_fn = dn_fn
        self.torch_fn = torch_fn
        self.shapes = shapes
        self.domains = domains or ["real"] * len(shapes)
        self.diff = tuple(range(len(shapes))) if diff is None else tuple(diff)
        self.layouts = layouts
        self.broadcast = broadcast
        self.unknown = unknown
        self.xfail = xfail or {}

    def inputs(self, dtype, lay, seed):
        rng = np.random.default_rng(seed)
        return [C.layout(C.draw(rng, s, dtype, d), lay) for s, d in zip(self.shapes, self.domains)]


def _dn_setitem(x, v, index):
    from dynnets.autograd.engine import bind
    from dynnets.autograd.primitives import setitem_p
    return bind(setitem_p, x, v, index=index)


def _torch_setitem(x, v, index):
    y = x.clone()
    y[index] = v
    return y


def _perm_rev(t):
    return t.permute(*reversed(range(t.ndim)))


OPS = [
    # elementwise, unary
    Op("exp", dn.exp, torch.exp, [(3, 4)]),
    Op("log", dn.log, torch.log, [(3, 4)], ["pos"]),
    Op("tanh", dn.tanh, torch.tanh, [(3, 4)]),
    Op("sigmoid", dn.sigmoid, torch.sigmoid, [(3, 4)]),
    Op("relu", dn.relu, torch.relu, [(3, 4)]),
    Op("sqrt", dn.sqrt, torch.sqrt, [(3, 4)], ["pos"]),
    Op("abs", dn.abs, torch.abs, [(3, 4)], ["nonzero"]),
    Op("neg", dn.neg, torch.neg, [(3, 4)]),
    Op("square", dn.square, torch.square, [(3, 4)]),
    Op("clip", lambda x: dn.clip(x, -0.5, 0.7), lambda x: torch.clamp(x, -0.5, 0.7), [(3, 4)]),
    Op("clip-lo", lambda x: dn.clip(x, min=-0.3), lambda x: torch.clamp(x, min=-0.3), [(3, 4)]),
    Op("clip-hi", lambda x: dn.clip(x, max=0.2), lambda x: torch.clamp(x, max=0.2), [(3, 4)]),
    Op("astype-f64", lambda x: dn.astype(x, np.float64), lambda x: x.to(torch.float64), [(3, 4)]),
    Op("astype-f32", lambda x: dn.astype(x, np.float32), lambda x: x.to(torch.float32), [(3, 4)]),
    # elementwise, binary (same shapes and broadcasting)
    Op("add", dn.add, torch.add, [(3, 4), (3, 4)]),
    Op("add-bcast", dn.add, torch.add, [(3, 1), (1, 4)]),
    Op("add-row", dn.add, torch.add, [(2, 3, 4), (4,)]),
    Op("add-0d", dn.add, torch.add, [(3, 4), ()]),
    Op("sub", dn.sub, torch.sub, [(3, 4), (3, 4)]),
    Op("sub-bcast", dn.sub, torch.sub, [(2, 1, 4), (3, 1)]),
    Op("mul", dn.mul, torch.mul, [(3, 4), (3, 4)]),
    Op("mul-bcast", dn.mul, torch.mul, [(4,), (3, 1)]),
    Op("div", dn.div, torch.div, [(3, 4), (3, 4)], ["real", "nonzero"]),
    Op("div-bcast", dn.div, torch.div, [(3, 1), (2, 1, 4)], ["real", "nonzero"]),
    Op("pow", dn.pow, torch.pow, [(3, 4), (3, 4)], ["pos", "real"]),
    Op("pow-bcast", dn.pow, torch.pow, [(3, 4), (4,)], ["pos", "real"]),
    Op("maximum", dn.maximum, torch.maximum, [(3, 4), (3, 4)], broadcast=False),
    Op("maximum-bcast", dn.maximum, torch.maximum, [(3, 1), (4,)], broadcast=False),
    Op("minimum", dn.minimum, torch.minimum, [(3, 4), (3, 4)], broadcast=False),
    Op("minimum-bcast", dn.minimum, torch.minimum, [(2, 3, 4), (3, 1)], broadcast=False),
    Op("where", lambda x, y: dn.where(np.arange(12).reshape(3, 4) % 3 == 0, x, y),
       lambda x, y: torch.where(torch.tensor(np.arange(12).reshape(3, 4) % 3 == 0), x, y), [(3, 4), (3, 4)]),
    Op("where-bcast", lambda x, y: dn.where(np.array([True, False, True, False]), x, y),
       lambda x, y: torch.where(torch.tensor([True, False, True, False]), x, y), [(3, 1), (4,)]),
    # Python-scalar operands and the reflected dunders
    Op("radd", lambda x: 2.5 + x, lambda x: 2.5 + x, [(3, 4)]),
    Op("rsub", lambda x: 2.5 - x, lambda x: 2.5 - x, [(3, 4)]),
    Op("rmul", lambda x: 3 * x, lambda x: 3 * x, [(3, 4)]),
    Op("rtruediv", lambda x: 1.5 / x, lambda x: 1.5 / x, [(3, 4)], ["nonzero"]),
    Op("truediv-int", lambda x: x / 4, lambda x: x / 4, [(3, 4)]),
    Op("pow-2", lambda x: x ** 2, lambda x: x ** 2, [(3, 4)]),
    Op("pow-3", lambda x: x ** 3, lambda x: x ** 3, [(3, 4)]),
    Op("pow-half", lambda x: x ** 0.5, lambda x: x ** 0.5, [(3, 4)], ["pos"]),
    Op("pow-neg", lambda x: x ** -1.5, lambda x: x ** -1.5, [(3, 4)], ["pos"]),
    Op("rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, [(3, 4)]),
    Op("dunder-neg", lambda x: -x, lambda x: -x, [(3, 4)]),
    Op("dunder-add", lambda x, y: x + y, lambda x, y: x + y, [(3, 4), (4,)]),
    Op("dunder-sub", lambda x, y: x - y, lambda x, y: x - y, [(3, 4), (3, 1)]),
    Op("dunder-mul", lambda x, y: x * y, lambda x, y: x * y, [(3, 4), (3, 4)]),
    Op("dunder-div", lambda x, y: x / y, lambda x, y: x / y, [(3, 4), (3, 4)], ["real", "nonzero"]),
    Op("dunder-pow", lambda x, y: x ** y, lambda x, y: x ** y, [(3, 4), (3, 4)], ["pos", "real"]),
    Op("dunder-matmul", lambda x, y: x @ y, lambda x, y: x @ y, [(3, 4), (4, 2)]),
    # methods
    Op("method-exp", lambda x: x.exp(), lambda x: x.exp(), [(3, 4)]),
    Op("method-log", lambda x: x.log(), lambda x: x.log(), [(3, 4)], ["pos"]),
    Op("method-tanh", lambda x: x.tanh(), lambda x: x.tanh(), [(3, 4)]),
    Op("method-sigmoid", lambda x: x.sigmoid(), lambda x: x.sigmoid(), [(3, 4)]),
    Op("method-relu", lambda x: x.relu(), lambda x: x.relu(), [(3, 4)]),
    Op("method-sqrt", lambda x: x.sqrt(), lambda x: x.sqrt(), [(3, 4)], ["pos"]),
    Op("method-abs", lambda x: x.abs(), lambda x: x.abs(), [(3, 4)], ["nonzero"]),
    Op("method-clip", lambda x: x.clip(-0.4, 0.4), lambda x: x.clip(-0.4, 0.4), [(3, 4)]),
    Op("method-square", lambda x: x.square(), lambda x: x.square(), [(3, 4)]),
    Op("method-pow", lambda x: x.pow(3.0), lambda x: x.pow(3.0), [(3, 4)]),
    Op("method-matmul", lambda x, w: x.matmul(w), lambda x, w: x.matmul(w), [(3, 4), (4, 5)]),
    Op("method-sum", lambda x: x.sum(), lambda x: x.sum(), [(3, 4)]),
    Op("method-sum-1", lambda x: x.sum(1), lambda x: x.sum(1), [(3, 4)]),
    Op("method-mean-0", lambda x: x.mean(0), lambda x: x.mean(0), [(3, 4)]),
    Op("method-max", lambda x: x.max(), lambda x: x.max(), [(3, 4)], broadcast=False),
    Op("method-min", lambda x: x.min(), lambda x: x.min(), [(3, 4)], broadcast=False),
    Op("method-softmax", lambda x: x.softmax(-1), lambda x: x.softmax(-1), [(3, 4)]),
    Op("method-log_softmax", lambda x: x.log_softmax(0), lambda x: x.log_softmax(0), [(3, 4)]),
    Op("method-reshape", lambda x: x.reshape(4, 3), lambda x: x.reshape(4, 3), [(3, 4)]),
    Op("method-reshape-tuple", lambda x: x.reshape((2, -1)), lambda x: x.reshape((2, -1)), [(3, 4)]),
    Op("method-view", lambda x: x.view(-1), lambda x: x.view(-1), [(3, 4)], layouts=False),
    Op("method-flatten", lambda x: x.flatten(), lambda x: x.flatten(), [(2, 3, 4)]),
    Op("method-squeeze", lambda x: x.squeeze(1), lambda x: x.squeeze(1), [(3, 1, 4)],
       unknown=[(True, False, True)]),
    Op("method-unsqueeze", lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(1), [(3, 4)]),
    Op("method-T", lambda x: x.T, lambda x: x.T, [(3, 4)]),
    Op("method-transpose-perm", lambda x: x.transpose(1, 0, 2), lambda x: x.permute(1, 0, 2), [(2, 3, 4)]),
    Op("method-getitem", lambda x: x[1:, ::2], lambda x: x[1:, ::2], [(3, 4)]),
    # linear algebra
    Op("matmul-2d", dn.matmul, torch.matmul, [(3, 4), (4, 5)]),
    Op("matmul-vec-mat", dn.matmul, torch.matmul, [(4,), (4, 5)]),
    Op("matmul-mat-vec", dn.matmul, torch.matmul, [(3, 4), (4,)]),
    Op("matmul-vec-vec", dn.matmul, torch.matmul, [(4,), (4,)]),
    Op("matmul-3d-2d", dn.matmul, torch.matmul, [(2, 3, 4), (4, 5)]),
    Op("matmul-3d-3d", dn.matmul, torch.matmul, [(2, 3, 4), (2, 4, 5)]),
    Op("matmul-batch-bcast", dn.matmul, torch.matmul, [(2, 1, 3, 4), (3, 4, 2)]),
    Op("matmul-2d-3d", dn.matmul, torch.matmul, [(3, 4), (2, 4, 5)]),
    Op("matmul-vec-3d", dn.matmul, torch.matmul, [(4,), (2, 4, 5)]),
    Op("linear", dn.linear, F.linear, [(3, 4), (5, 4), (5,)]),
    Op("linear-1d", dn.linear, F.linear, [(4,), (5, 4), (5,)]),
    Op("linear-3d", dn.linear, F.linear, [(2, 3, 4), (5, 4), (5,)]),
    # reductions (axis and keepdims combinations are tested apart)
    Op("sum", dn.sum, torch.sum, [(3, 4)]),
    Op("mean", dn.mean, torch.mean, [(3, 4)]),
    Op("max", dn.max, torch.max, [(3, 4)], broadcast=False),
    Op("min", dn.min, torch.min, [(3, 4)], broadcast=False),
    Op("softmax", dn.softmax, lambda x: F.softmax(x, -1), [(3, 4)]),
    Op("softmax-0", lambda x: dn.softmax(x, 0), lambda x: F.softmax(x, 0), [(2, 3, 4)]),
    Op("softmax-1", lambda x: dn.softmax(x, axis=1), lambda x: F.softmax(x, 1), [(2, 3, 4)]),
    Op("log_softmax", dn.log_softmax, lambda x: F.log_softmax(x, -1), [(3, 4)]),
    Op("log_softmax-0", lambda x: dn.log_softmax(x, 0), lambda x: F.log_softmax(x, 0), [(2, 3, 4)]),
    Op("log_softmax-1", lambda x: dn.log_softmax(x, axis=1), lambda x: F.log_softmax(x, 1), [(2, 3, 4)]),
    Op("softmax-1d", dn.softmax, lambda x: F.softmax(x, -1), [(5,)]),
    # shapes
    Op("reshape", lambda x: dn.reshape(x, 4, 3), lambda x: x.reshape(4, 3), [(3, 4)]),
    Op("reshape-infer", lambda x: dn.reshape(x, (-1, 6)), lambda x: x.reshape(-1, 6), [(2, 3, 4)]),
    Op("reshape-0d", lambda x: dn.reshape(x, ()), lambda x: x.reshape(()), [(1, 1)]),
    Op("flatten", dn.flatten, torch.flatten, [(2, 3, 4)]),
    Op("squeeze", lambda x: dn.squeeze(x, 0), lambda x: torch.squeeze(x, 0), [(1, 3, 4)],
       unknown=[(False, True, True)]),
    Op("squeeze-neg", lambda x: dn.squeeze(x, -1), lambda x: torch.squeeze(x, -1), [(3, 4, 1)],
       unknown=[(True, True, False)]),
    Op("squeeze-noop", lambda x: dn.squeeze(x, 1), lambda x: torch.squeeze(x, 1), [(3, 4)],
       unknown=[(True, False)]),
    Op("unsqueeze", lambda x: dn.unsqueeze(x, 0), lambda x: torch.unsqueeze(x, 0), [(3, 4)]),
    Op("unsqueeze-neg", lambda x: dn.unsqueeze(x, -1), lambda x: torch.unsqueeze(x, -1), [(3, 4)]),
    Op("transpose", dn.transpose, _perm_rev, [(3, 4)]),
    Op("transpose-3d", dn.transpose, _perm_rev, [(2, 3, 4)]),
    Op("transpose-perm", lambda x: dn.transpose(x, 2, 0, 1), lambda x: x.permute(2, 0, 1), [(2, 3, 4)]),
    Op("transpose-perm-tuple", lambda x: dn.transpose(x, (0, 2, 1)), lambda x: x.permute(0, 2, 1), [(2, 3, 4)]),
    Op("broadcast_to", lambda x: dn.broadcast_to(x, (2, 3, 4)), lambda x: torch.broadcast_to(x, (2, 3, 4)),
       [(3, 1)]),
    Op("broadcast_to-same", lambda x: dn.broadcast_to(x, (3, 4)), lambda x: torch.broadcast_to(x, (3, 4)),
       [(3, 4)]),
    Op("concat", lambda x, y: dn.concat([x, y]), lambda x, y: torch.cat([x, y]), [(2, 4), (3, 4)]),
    Op("concat-1", lambda x, y, z: dn.concat([x, y, z], axis=1), lambda x, y, z: torch.cat([x, y, z], 1),
       [(3, 1), (3, 4), (3, 2)]),
    Op("cat-neg", lambda x, y: dn.cat([x, y], axis=-1), lambda x, y: torch.cat([x, y], -1),
       [(2, 3, 1), (2, 3, 2)]),
    Op("stack", lambda x, y: dn.stack([x, y]), lambda x, y: torch.stack([x, y]), [(3, 4), (3, 4)]),
    Op("stack-1", lambda x, y, z: dn.stack([x, y, z], axis=1), lambda x, y, z: torch.stack([x, y, z], 1),
       [(3, 4), (3, 4), (3, 4)]),
    Op("stack-neg", lambda x, y: dn.stack([x, y], axis=-1), lambda x, y: torch.stack([x, y], -1),
       [(3, 4), (3, 4)]),
    Op("split-list", lambda x: dn.split(x, [1, 3], axis=1), lambda x: torch.split(x, [1, 3], 1), [(3, 4)],
       unknown=[(True, False)]),
    Op("split-int", lambda x: dn.split(x, 2), lambda x: torch.split(x, 2), [(5, 2)], unknown=[(False, True)]),
    Op("split-int-dim", lambda x: x.split(3, dim=1), lambda x: x.split(3, dim=1), [(2, 7)],
       unknown=[(True, False)]),
    Op("split-list-unknown", lambda x: dn.split(x, [2, 0, 1], dim=1), lambda x: torch.split(x, [2, 0, 1], 1),
       [(3, 3)]),
    Op("chunk", lambda x: dn.chunk(x, 3, dim=0), lambda x: torch.chunk(x, 3, 0), [(6, 2)],
       unknown=[(False, True)]),
    Op("chunk-fewer", lambda x: x.chunk(4, 1), lambda x: x.chunk(4, 1), [(2, 6)], unknown=[(True, False)]),
    Op("array_split", lambda x: dn.array_split(x, 3, axis=1), lambda x: torch.tensor_split(x, 3, 1), [(2, 7)],
       unknown=[(True, False)]),
    Op("array_split-indices", lambda x: dn.array_split(x, [1, 3]), lambda x: torch.tensor_split(x, [1, 3]),
       [(5, 2)], unknown=[(False, True)]),
    # PyTorch's names: activations, gather, masked_fill, clamp, norms, einsum, bmm, pad, and Tensor methods
    Op("gelu", dn.gelu, F.gelu, [(3, 4)]),
    Op("gelu-tanh", lambda x: dn.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), [(3, 4)]),
    Op("gelu-functional", dn.nn.functional.gelu, F.gelu, [(2, 3, 4)]),
    Op("gelu-module", dn.nn.GELU(), torch.nn.GELU(), [(3, 4)]),
    Op("leaky_relu", dn.leaky_relu, F.leaky_relu, [(3, 4)]),
    Op("leaky_relu-slope", lambda x: dn.nn.functional.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2), [(3, 4)]),
    Op("leaky_relu-module", dn.nn.LeakyReLU(0.3), torch.nn.LeakyReLU(0.3), [(2, 5)]),
    Op("gather", lambda x: dn.gather(x, 1, np.array([[0, 3], [2, 2], [1, 0]])),
       lambda x: torch.gather(x, 1, torch.tensor([[0, 3], [2, 2], [1, 0]])), [(3, 4)]),
    Op("gather-0", lambda x: x.gather(0, np.array([[2, 0, 2, 1]])),
       lambda x: x.gather(0, torch.tensor([[2, 0, 2, 1]])), [(3, 4)]),
    Op("gather-3d", lambda x: dn.gather(x, -1, np.array([[[1], [0]], [[2], [2]]])),
       lambda x: torch.gather(x, -1, torch.tensor([[[1], [0]], [[2], [2]]])), [(2, 3, 3)]),
    Op("masked_fill", lambda x: dn.masked_fill(x, np.array([True, False, False, True]), -1.5),
       lambda x: x.masked_fill(torch.tensor([True, False, False, True]), -1.5), [(3, 4)]),
    Op("masked_fill-tensor-value", lambda x, v: x.masked_fill(np.eye(3, 4, dtype=bool), v),
       lambda x, v: x.masked_fill(torch.tensor(np.eye(3, 4, dtype=bool)), v), [(3, 4), ()]),
    Op("clamp", lambda x: dn.clamp(x, -0.5, 0.7), lambda x: torch.clamp(x, -0.5, 0.7), [(3, 4)]),
    Op("clamp-min", lambda x: x.clamp(min=-0.2), lambda x: x.clamp(min=-0.2), [(3, 4)]),
    Op("clamp_min", lambda x: dn.clamp_min(x, 0.1), lambda x: torch.clamp_min(x, 0.1), [(3, 4)]),
    Op("clamp_max", lambda x: x.clamp_max(0.1), lambda x: x.clamp_max(0.1), [(3, 4)]),
    Op("norm", dn.norm, torch.norm, [(3, 4)]),
    Op("norm-dim", lambda x: x.norm(dim=1), lambda x: x.norm(dim=1), [(3, 4)]),
    Op("norm-1-keepdim", lambda x: dn.norm(x, 1, dim=0, keepdim=True), lambda x: torch.norm(x, 1, dim=0, keepdim=True),
       [(3, 4)], ["nonzero"]),
    Op("norm-3", lambda x: dn.norm(x, 3, dim=-1), lambda x: torch.norm(x, 3, dim=-1), [(2, 3, 4)], ["nonzero"]),
    Op("norm-half", lambda x: dn.norm(x, 0.5, dim=1), lambda x: torch.norm(x, 0.5, dim=1), [(3, 4)], ["nonzero"]),
    Op("norm-1.5", lambda x: dn.norm(x, 1.5), lambda x: torch.norm(x, 1.5), [(3, 4)], ["nonzero"]),
    Op("norm-inf", lambda x: dn.norm(x, float("inf"), dim=1), lambda x: torch.norm(x, float("inf"), dim=1),
       [(3, 4)], broadcast=False),
    Op("norm--inf", lambda x: dn.norm(x, -float("inf")), lambda x: torch.norm(x, -float("inf")), [(3, 4)],
       broadcast=False),
    Op("norm-fro-dims", lambda x: dn.norm(x, "fro", dim=(0, 2)), lambda x: torch.norm(x, "fro", dim=(0, 2)),
       [(2, 3, 4)]),
    Op("normalize", dn.nn.functional.normalize, F.normalize, [(3, 4)]),
    Op("normalize-p1-dim0", lambda x: dn.nn.functional.normalize(x, p=1.0, dim=0),
       lambda x: F.normalize(x, p=1.0, dim=0), [(3, 4)], ["nonzero"]),
    Op("einsum", lambda a, b: dn.einsum("ij,jk->ik", a, b), lambda a, b: torch.einsum("ij,jk->ik", a, b),
       [(3, 4), (4, 2)]),
    Op("einsum-batch", lambda a, b: dn.einsum("bij,bkj->bik", a, b), lambda a, b: torch.einsum("bij,bkj->bik", a, b),
       [(2, 3, 4), (2, 5, 4)]),
    Op("einsum-implicit", lambda a, b: dn.einsum("ij,kj", a, b), lambda a, b: torch.einsum("ij,kj", a, b),
       [(3, 4), (2, 4)]),
    Op("einsum-list", lambda a, b: dn.einsum("i,j->ij", [a, b]), lambda a, b: torch.einsum("i,j->ij", [a, b]),
       [(3,), (4,)]),
    Op("einsum-trace", lambda a: dn.einsum("ii->", a), lambda a: torch.einsum("ii->", a), [(3, 3)]),
    Op("einsum-diag", lambda a: dn.einsum("ii->i", a), lambda a: torch.einsum("ii->i", a), [(3, 3)]),
    Op("einsum-sum-own", lambda a, b: dn.einsum("ij,j->i", a, b), lambda a, b: torch.einsum("ij,j->i", a, b),
       [(3, 4), (4,)]),
    Op("einsum-reduce-only", lambda a, b: dn.einsum("ij,kl->ik", a, b), lambda a, b: torch.einsum("ij,kl->ik", a, b),
       [(3, 2), (4, 5)]),
    Op("einsum-ellipsis", lambda a, b: dn.einsum("...ij,...jk->...ik", a, b),
       lambda a, b: torch.einsum("...ij,...jk->...ik", a, b), [(2, 3, 4), (2, 4, 5)]),
    Op("einsum-ellipsis-transpose", lambda a: dn.einsum("...ij->...ji", a), lambda a: torch.einsum("...ij->...ji", a),
       [(2, 3, 4)]),
    Op("einsum-three", lambda a, b, c: dn.einsum("ij,jk,kl->il", a, b, c),
       lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c), [(2, 3), (3, 4), (4, 2)]),
    Op("bmm", dn.bmm, torch.bmm, [(2, 3, 4), (2, 4, 5)]),
    # issue 22's names: sin, cos, dot, mm, std, var, the torch spellings of the elementwise ops
    Op("sin", dn.sin, torch.sin, [(3, 4)]),
    Op("cos", dn.cos, torch.cos, [(3, 4)]),
    Op("sin-0d", dn.sin, torch.sin, [()]),
    Op("method-sin", lambda x: x.sin(), lambda x: x.sin(), [(2, 3)]),
    Op("method-cos", lambda x: x.cos(), lambda x: x.cos(), [(2, 3)]),
    Op("sign", dn.sign, torch.sign, [(3, 4)]),
    Op("method-sign", lambda x: x.sign(), lambda x: x.sign(), [(2, 3)]),
    Op("dot", dn.dot, torch.dot, [(5,), (5,)]),
    Op("method-dot", lambda a, b: a.dot(b), lambda a, b: a.dot(b), [(4,), (4,)]),
    Op("mm", dn.mm, torch.mm, [(3, 4), (4, 2)]),
    Op("method-mm", lambda a, b: a.mm(b), lambda a, b: a.mm(b), [(3, 4), (4, 2)]),
    Op("var", dn.var, torch.var, [(3, 4)]),
    Op("var-dim", lambda x: dn.var(x, 1), lambda x: torch.var(x, 1), [(3, 4)]),
    Op("var-dims-keepdim", lambda x: dn.var(x, (0, 2), keepdim=True), lambda x: torch.var(x, (0, 2), keepdim=True),
       [(2, 3, 4)]),
    Op("var-correction0", lambda x: dn.var(x, dim=0, correction=0), lambda x: torch.var(x, dim=0, correction=0),
       [(3, 4)]),
    Op("var-correction2", lambda x: dn.var(x, dim=-1, correction=2), lambda x: torch.var(x, dim=-1, correction=2),
       [(3, 5)]),
    Op("var-unbiased-false", lambda x: dn.var(x, False), lambda x: torch.var(x, False), [(3, 4)]),
    Op("var-dim-unbiased", lambda x: dn.var(x, 1, False, True), lambda x: torch.var(x, 1, False, True), [(3, 4)]),
    Op("std", dn.std, torch.std, [(3, 4)]),
    Op("std-dim", lambda x: dn.std(x, dim=0), lambda x: torch.std(x, dim=0), [(4, 3)]),
    Op("std-unbiased-false", lambda x: dn.std(x, 1, unbiased=False), lambda x: torch.std(x, 1, unbiased=False),
       [(3, 4)]),
    Op("method-std", lambda x: x.std(1, keepdim=True), lambda x: x.std(1, keepdim=True), [(3, 4)]),
    Op("method-var", lambda x: x.var(correction=0), lambda x: x.var(correction=0), [(3, 4)]),
    Op("method-add-alpha", lambda a, b: a.add(b, alpha=2.5), lambda a, b: a.add(b, alpha=2.5), [(3, 4), (4,)]),
    Op("method-sub-alpha", lambda a, b: a.sub(b, alpha=-0.5), lambda a, b: a.sub(b, alpha=-0.5), [(3, 4), (3, 4)]),
    Op("method-mul", lambda a, b: a.mul(b), lambda a, b: a.mul(b), [(3, 4), (3, 1)]),
    Op("method-div", lambda a, b: a.div(b), lambda a, b: a.div(b), [(3, 4), (4,)], ["real", "pos"]),
    Op("method-neg", lambda x: x.neg(), lambda x: x.neg(), [(3, 4)]),
    Op("t", dn.t, torch.t, [(3, 4)]),
    Op("t-1d", dn.t, torch.t, [(3,)]),
    Op("method-bmm", lambda a, b: a.bmm(b), lambda a, b: a.bmm(b), [(2, 3, 4), (2, 4, 1)]),
    Op("pad", lambda x: dn.nn.functional.pad(x, (1, 2)), lambda x: F.pad(x, (1, 2)), [(3, 4)]),
    Op("pad-value-2d", lambda x: dn.nn.functional.pad(x, (1, 0, 2, 1), value=0.5),
       lambda x: F.pad(x, (1, 0, 2, 1), value=0.5), [(2, 3, 4)]),
    Op("pad-negative", lambda x: dn.nn.functional.pad(x, (-1, 2, 1, -2)), lambda x: F.pad(x, (-1, 2, 1, -2)),
       [(3, 4)]),
    Op("pad-reflect", lambda x: dn.nn.functional.pad(x, (2, 3), mode="reflect"),
       lambda x: F.pad(x, (2, 3), mode="reflect"), [(2, 5)]),
    Op("pad-reflect-2d", lambda x: dn.nn.functional.pad(x, (1, 2, 2, 1), mode="reflect"),
       lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), [(2, 4, 3)]),
    Op("pad-replicate", lambda x: dn.nn.functional.pad(x, (3, 1), mode="replicate"),
       lambda x: F.pad(x, (3, 1), mode="replicate"), [(2, 3)]),
    Op("pad-circular", lambda x: dn.nn.functional.pad(x, (-1, 3, 1, 1), mode="circular"),
       lambda x: F.pad(x, (-1, 3, 1, 1), mode="circular"), [(2, 3, 4)]),
    Op("method-expand", lambda x: x.expand(2, 3, 4), lambda x: x.expand(2, 3, 4), [(3, 1)]),
    Op("method-expand-keep", lambda x: x.expand(-1, 4), lambda x: x.expand(-1, 4), [(3, 1)]),
    Op("method-expand_as", lambda x, y: x.expand_as(y) * y, lambda x, y: x.expand_as(y) * y, [(1, 4), (3, 4)],
       unknown=[(False, True), (False, True)]),
    Op("method-repeat", lambda x: x.repeat(2, 3), lambda x: x.repeat(2, 3), [(3, 4)]),
    Op("method-repeat-new-dims", lambda x: x.repeat(2, 1, 2), lambda x: x.repeat(2, 1, 2), [(4,)]),
    Op("method-float", lambda x: x.float(), lambda x: x.float(), [(3, 4)]),
    Op("method-double", lambda x: x.double(), lambda x: x.double(), [(3, 4)]),
    Op("method-type_as", lambda x, y: x.type_as(y) * 2.0, lambda x, y: x.type_as(y) * 2.0, [(3, 4), (1,)]),
    Op("method-to", lambda x: x.to(dn.float32) + x.to("cpu").to(dn.float64), lambda x: x.to(torch.float32)
       + x.to("cpu").to(torch.float64), [(3, 4)]),
    Op("method-contiguous", lambda x: x.t().contiguous().view(-1), lambda x: x.t().contiguous().view(-1), [(3, 4)]),
    Op("method-cpu", lambda x: x.cpu() * 3.0, lambda x: x.cpu() * 3.0, [(3, 4)]),
    Op("method-new_zeros", lambda x: x + x.new_zeros(3, 4) + x.new_ones((3, 4)) + x.new_full((3, 4), 2.5),
       lambda x: x + x.new_zeros(3, 4) + x.new_ones((3, 4)) + x.new_full((3, 4), 2.5), [(3, 4)]),
    Op("method-new_tensor", lambda x: x * x.new_tensor([1.5, 2.0, -1.0, 0.5]),
       lambda x: x * x.new_tensor([1.5, 2.0, -1.0, 0.5]), [(3, 4)]),
    # indexing
    Op("take", lambda x: dn.take(x, np.array([2, 0, 2])), lambda x: x[torch.tensor([2, 0, 2])], [(3, 4)]),
    # negative ids wrap, as torch's integer-tensor indexing (index_select would reject them)
    Op("take-neg", lambda x: dn.take(x, np.array([-1, 0, -3])), lambda x: x[torch.tensor([-1, 0, -3])], [(3, 4)]),
    Op("take-2d-ids", lambda x: dn.take(x, np.array([[1, 0], [1, 1]])),
       lambda x: x[torch.tensor([[1, 0], [1, 1]])], [(3, 4)]),
    Op("getitem", lambda x: dn.getitem(x, (slice(1, None), 2)), lambda x: x[1:, 2], [(3, 4)]),
    # the primitive of item assignment (x[idx] = v on a tensor), out of place
    # as static graphs bind it; torch: assignment into a clone
    Op("setitem-slice", lambda x, v: _dn_setitem(x, v, (slice(1, 3),)),
       lambda x, v: _torch_setitem(x, v, (slice(1, 3),)), [(4, 3), (2, 3)]),
    Op("setitem-broadcast", lambda x, v: _dn_setitem(x, v, (slice(None), 1)),
       lambda x, v: _torch_setitem(x, v, (slice(None), 1)), [(4, 3), (1,)]),
    Op("setitem-int-array", lambda x, v: _dn_setitem(x, v, np.array([3, 0])),
       lambda x, v: _torch_setitem(x, v, torch.tensor([3, 0])), [(4, 3), (2, 3)], layouts=False),
]

# Every public op of dynnets (and the Tensor methods of the table) must have a
# row above, or a test of its own below; this keeps the table honest.
COVERED_ELSEWHERE = {
    "tensor", "as_tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "randn", "uniform", "arange",
    "cross_entropy", "embedding", "dropout", "lstm_cell", "gru_cell", "tree_lstm_cell", "tree_lstm_leaf",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "argmax",
    "lstm_seq", "gru_seq", "rnn_seq", "tree_lstm_levels", "tree_lstm_levels_packed", "tree_rnn_levels", "childsum_levels",
    "tree_lstm_node", "tree_lstm_leaf_node", "split_rows",
    "clone", "permute", "argmin", "MaxMin",
    # issue 22's torch names: tests/parity/test_torch_round_sort_select.py
    "remainder", "fmod", "floor_divide", "narrow", "sort", "argsort", "topk", "cumsum", "unbind", "index_select",
    "SortResult", "Size",
    # torch's spellings of the comparisons (test_comparison_primitives); equal and allclose give Python bools
    # (test_equal_and_allclose); numel (test_torch_api_names.py)
    "eq", "ne", "lt", "le", "gt", "ge", "allclose", "numel",
}
# ~ & | ^ on boolean masks (test_real_scripts.py::test_gap_boolean_mask_operators)
COVERED_ELSEWHERE |= {"logical_not", "logical_and", "logical_or", "logical_xor"}
# tests/parity/test_torch_maths_sampling.py (branch i22-torch-b)
COVERED_ELSEWHERE |= {"log1p", "expm1", "logsumexp", "prod", "isnan", "isinf", "isfinite", "outer", "addmm",
                      "baddbmm", "addbmm"}


def test_table_covers_every_public_op():
    import dynnets.autograd.ops as ops
    names = {o.id.split("-")[0] for o in OPS}
    missing = sorted(n for n in ops.__all__ if n not in names and n not in COVERED_ELSEWHERE)
    assert not missing, f"public ops without a parity test: {missing}"


# The primitives that no row of the table binds under their own name, and
# the parity test (file, function) that runs each forward and VJP.
PRIMITIVES_ELSEWHERE = {
    "softmax_cross_entropy": ("test_torch_nn.py", "test_cross_entropy"),
    "embedding": ("test_torch_nn.py", "test_embedding"),
    "sigmoid_cross_entropy": ("test_torch_nn_modules.py", "test_binary_cross_entropy_with_logits"),
    "binary_cross_entropy": ("test_torch_nn_modules.py", "test_binary_cross_entropy"),
    "lstm_cell": ("test_torch_nn.py", "test_lstm_cell"),
    "gru_cell": ("test_torch_nn.py", "test_gru_cell"),
    "tree_lstm_cell": ("test_torch_nn.py", "test_tree_lstm_cell"),
    "tree_lstm_leaf": ("test_torch_nn.py", "test_tree_lstm_leaf"),
    "lstm_seq": ("test_torch_nn_losses_rnn.py", "test_rnn_layer"),
    "gru_seq": ("test_torch_nn_losses_rnn.py", "test_rnn_layer"),
    "rnn_seq": ("test_torch_nn_losses_rnn.py", "test_rnn_layer"),
    "tree_lstm_levels": ("test_torch_tree.py", "test_tree_lstm_levels"),
    "tree_lstm_levels_packed": ("test_torch_tree.py", "test_tree_lstm_levels_packed"),
    "tree_rnn_levels": ("test_torch_tree.py", "test_tree_rnn_levels"),
    "childsum_levels": ("test_torch_tree.py", "test_childsum_levels"),
    "tree_lstm_node": ("test_torch_tree.py", "test_tree_lstm_node"),
    "tree_lstm_leaf_node": ("test_torch_tree.py", "test_tree_lstm_leaf_node"),
    "split_rows": ("test_torch_tree.py", "test_split_rows"),
    **{name: ("test_torch_ops.py", "test_comparison_primitives")
       for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "argmax")},
    "segment_sum": ("test_torch_ops.py", "test_autobatch_row_primitives"),
    "copy": ("test_torch_ops.py", "test_clone_permute_argmin_maxmin"),
    "random": ("test_torch_ops.py", "test_random_primitives_match_torch_distributions"),
    "dropout_mask": ("test_torch_ops.py", "test_random_primitives_match_torch_distributions"),
    "gather_rows": ("test_torch_ops.py", "test_autobatch_row_primitives"),
    "arena_gather": ("test_torch_ops.py", "test_autobatch_row_primitives"),
    "custom_function": ("test_torch_autograd_function.py", "test_custom_functions_match_torch"),
}
# the selection and layout primitives of primitives/select.py, through dynnets.static's TF1 names
PRIMITIVES_ELSEWHERE.update({name: ("test_torch_select.py", f"test_{name}")
                             for name in ("gather_nd", "boolean_mask", "argwhere", "top_k", "tile", "pad",
                                          "stop_gradient", "ensure_shape")})


PRIMITIVES_ELSEWHERE.update({
    "round": ("test_torch_round_sort_select.py", "test_round_gradient_is_zero_as_torch"),
    "remainder": ("test_torch_round_sort_select.py", "test_remainder_gradients_as_torch"),
    "fmod": ("test_torch_round_sort_select.py", "test_remainder_gradients_as_torch"),
    "div_rounded": ("test_torch_round_sort_select.py", "test_remainder_gradients_as_torch"),
    "sort": ("test_torch_round_sort_select.py", "test_sort_argsort"),
    "cumsum": ("test_torch_round_sort_select.py", "test_cumsum"),
})
# branch i22-torch-b
PRIMITIVES_ELSEWHERE.update({
    "log1p": ("test_torch_maths_sampling.py", "test_log1p_expm1"),
    "expm1": ("test_torch_maths_sampling.py", "test_log1p_expm1"),
    "prod": ("test_torch_maths_sampling.py", "test_prod_gradient_with_zeros_is_torch_s"),
})

# i22-torch-a: scatter / index_add, flip, tril / triu, nonzero, unique, bincount (eager; values, gradients, errors)
COVERED_ELSEWHERE |= {"scatter", "scatter_add", "index_add", "flip", "tril", "triu", "nonzero", "unique", "bincount"}
PRIMITIVES_ELSEWHERE.update({
    "scatter": ("test_torch_scatter_index.py", "test_scatter_values_and_gradients"),
    "scatter_add": ("test_torch_scatter_index.py", "test_scatter_add_values_and_gradients"),
    "unique": ("test_torch_scatter_index.py", "test_unique"),
    "bincount": ("test_torch_scatter_index.py", "test_bincount"),
})

PRIMITIVES_ELSEWHERE["batchable_call"] = ("test_torch_batchable.py", "test_decorated_plain_tree_lstm_matches_torch")
PRIMITIVES_ELSEWHERE["random_shuffle"] = ("test_torch_ops.py", "test_random_shuffle_permutes_rows_as_torch_randperm")
# tests/parity/test_ragged_attention.py (branch i25-models)
COVERED_ELSEWHERE |= {"ragged_attention", "pack_sequences", "unpack_sequences", "ragged_offsets"}
PRIMITIVES_ELSEWHERE["ragged_attention"] = ("test_ragged_attention.py",
                                            "test_matches_torch_padded_scaled_dot_product_attention_with_mask")


def test_every_primitive_has_a_parity_test():
    from dynnets.autograd.primitives import PRIMITIVES
    names = {o.id.split("-")[0] for o in OPS}
    missing = sorted(n for n in PRIMITIVES if n not in names and n not in PRIMITIVES_ELSEWHERE)
    assert not missing, f"primitives without a parity test: {missing}"
    here = os.path.dirname(__file__)
    for prim, (fname, test) in PRIMITIVES_ELSEWHERE.items():
        assert prim in PRIMITIVES, f"{prim} is no longer a primitive"
        with open(os.path.join(here, fname)) as f:
            assert f"\ndef {test}(" in f.read(), f"{prim}: {fname} has no {test}"


# float64 runs every layout; float32, to keep the suite fast, the contiguous,
# Fortran-order and strided ones eagerly and contiguous feeds in static mode
# (the cells, losses and tree primitives run float32 on other layouts too)
_F32_EAGER = ("contiguous", "transposed", "strided")


def _cases():
    out = []
    for op in OPS:
        for dt in C.FLOATS:
            dname = np.dtype(dt).name
            f64 = dt == np.float64
            lays = (C.LAYOUTS if f64 else _F32_EAGER) if op.layouts else ("contiguous",)
            if not op.broadcast:
                lays = tuple(x for x in lays if x != "broadcast")
            for lay in lays:
                out.append(pytest.param(op, dt, "eager", lay, id=f"{op.id}-{dname}-eager-{lay}"))
            for mode in ("static", "static-unknown") if op.unknown else ("static",):
                for lay in ("contiguous", "transposed") if op.layouts and f64 else ("contiguous",):
                    out.append(pytest.param(op, dt, mode, lay, id=f"{op.id}-{dname}-{mode}-{lay}"))
            out.append(pytest.param(op, dt, "static-fused", "contiguous", id=f"{op.id}-{dname}-static-fused"))
    return out


@pytest.mark.parametrize("op,dtype,mode,lay", _cases())
def test_op(op, dtype, mode, lay):
    seed = sum(map(ord, op.id))
    xs = op.inputs(dtype, lay, seed)
    C.check(op.dn_fn, op.torch_fn, xs, op.diff, mode=mode, seed=seed, unknown=op.unknown)


# --------------------------------------------------------------------------
# edge values: zero, negative, huge magnitudes, infinities
# --------------------------------------------------------------------------

def _big(dtype):
    return float(np.finfo(dtype).max) / 4


EDGES = [
    # (id, dn_fn, torch_fn, values(dtype) -> list of arrays)
    ("exp-huge", dn.exp, torch.exp, lambda dt: [[-1e4, -800.0, -100.0, 0.0, 80.0, 700.0, 1e4]]),
    ("log-zero-neg", dn.log, torch.log, lambda dt: [[0.0, -1.0, 1e-300 if dt == np.float64 else 1e-40, 1.0, _big(dt)]]),
    ("sqrt-zero", dn.sqrt, torch.sqrt, lambda dt: [[0.0, -1.0, 1e-300 if dt == np.float64 else 1e-40, 4.0]]),
    ("sigmoid-huge", dn.sigmoid, torch.sigmoid, lambda dt: [[-1e4, -745.0, -88.0, -40.0, 0.0, 40.0, 88.0, 1e4]]),
    ("tanh-huge", dn.tanh, torch.tanh, lambda dt: [[-1e4, -20.0, -1e-8, 0.0, 20.0, 1e4]]),
    ("softmax-huge", dn.softmax, lambda x: F.softmax(x, -1),
     lambda dt: [[[1e4, 1e4, -1e4], [_big(dt), 0.0, -_big(dt)], [-1e4, -1e4 + 1.0, -1e4 - 1.0]]]),
    ("softmax-inf", dn.softmax, lambda x: F.softmax(x, -1), lambda dt: [[[-np.inf, 0.0, 1.0], [-np.inf, 2.0, 2.0]]]),
    ("softmax-axis0-huge", lambda x: dn.softmax(x, 0), lambda x: F.softmax(x, 0),
     lambda dt: [[[1e4, -1e4], [1e4, 0.0], [-1e4, 1e4]]]),
    ("log_softmax-huge", dn.log_softmax, lambda x: F.log_softmax(x, -1),
     lambda dt: [[[1e4, 1e4, -1e4], [-1e4, -1e4 + 1.0, -1e4 - 1.0], [300.0, 0.0, -300.0]]]),
    ("log_softmax-inf", dn.log_softmax, lambda x: F.log_softmax(x, -1), lambda dt: [[[-np.inf, 0.0, 1.0]]]),
    ("log_softmax-axis0-huge", lambda x: dn.log_softmax(x, 0), lambda x: F.log_softmax(x, 0),
     lambda dt: [[[1e4, -1e4], [1e4, 0.0], [-1e4, 1e4]]]),
    ("div-zero", dn.div, torch.div, lambda dt: [[1.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 2.0]]),
    ("mul-inf", dn.mul, torch.mul, lambda dt: [[np.inf, -np.inf, 1.0], [2.0, 3.0, np.inf]]),
    ("pow-zero-base", dn.pow, torch.pow, lambda dt: [[0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 0.5]]),
    ("pow-zero-base-neg-exp", dn.pow, torch.pow, lambda dt: [[0.0, 0.0], [-1.0, -0.5]]),
    ("pow-neg-base-int-exp", dn.pow, torch.pow, lambda dt: [[-2.0, -2.0, -0.5], [2.0, 3.0, -1.0]]),
    ("pow-neg-base-frac-exp", dn.pow, torch.pow, lambda dt: [[-2.0], [0.5]]),
    ("pow-scalar-0", lambda x: x ** 0, lambda x: x ** 0, lambda dt: [[0.0, -2.0, 3.0]]),
    ("pow-scalar-1", lambda x: x ** 1, lambda x: x ** 1, lambda dt: [[0.0, -2.0, 3.0]]),
    ("pow-scalar-2", lambda x: x ** 2, lambda x: x ** 2, lambda dt: [[0.0, -2.0, 3.0]]),
    ("pow-scalar-half", lambda x: x ** 0.5, lambda x: x ** 0.5, lambda dt: [[0.0, 4.0, -1.0]]),
    ("pow-scalar-neg", lambda x: x ** -1, lambda x: x ** -1, lambda dt: [[0.0, 4.0, -2.0]]),
    ("rpow-zero", lambda x: 0.0 ** x, lambda x: 0.0 ** x, lambda dt: [[0.0, 2.0, -1.0]]),
    ("rpow-neg", lambda x: (-2.0) ** x, lambda x: (-2.0) ** x, lambda dt: [[2.0, 3.0, 0.5]]),
    ("sub-huge", dn.sub, torch.sub, lambda dt: [[_big(dt), -_big(dt)], [-_big(dt), _big(dt)]]),
    ("sum-huge", dn.sum, torch.sum, lambda dt: [[_big(dt), _big(dt), -_big(dt)]]),
    ("mean-huge", dn.mean, torch.mean, lambda dt: [[_big(dt), _big(dt)]]),
    ("matmul-zero", dn.matmul, torch.matmul, lambda dt: [[[0.0, 0.0]], [[1.0], [-1.0]]]),
    ("abs-neg-zero", dn.abs, torch.abs, lambda dt: [[-0.0, 0.0, -3.0]]),
]


def _edge_cases():
    out = []
    for eid, f, tf, vals in EDGES:
        for dt in C.FLOATS:
            for mode in ("eager", "static"):
                out.append(pytest.param(f, tf, vals, dt, mode, id=f"{eid}-{np.dtype(dt).name}-{mode}"))
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f,tf,vals,dtype,mode", _edge_cases())
def test_edge_values(f, tf, vals, dtype, mode):
    xs = [np.asarray(v, dtype=np.float64).astype(dtype) for v in vals(dtype)]
    C.check(f, tf, xs, range(len(xs)), mode=mode)


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("dtype", C.FLOATS)
@pytest.mark.parametrize("x", [np.array([[1e17, 1e17, 1e17]]),
                               np.array([[1e6, 1e6, 1e6 - 1.0], [-1e6, -1e6, -1e6 + 1.0]])],
                         ids=["1e17", "1e6"])
def test_log_softmax_far_from_zero(x, dtype, mode):
    # the last-axis kernel computes (x - max) - log(sum) as torch: x - (max + log(sum)) gave 0 instead of
    # -log(3) for logits [1e17]*3, and a gradient 2e-10 off (relative) at 1e6
    C.check(dn.log_softmax, lambda t: F.log_softmax(t, -1), [x.astype(dtype)], [0], mode=mode)


# --------------------------------------------------------------------------
# ties: the gradient conventions at kinks
# --------------------------------------------------------------------------
# PyTorch's conventions (torch/csrc/autograd/FunctionsManual.cpp, derivatives.yaml):
# relu'(0) = 0 (threshold_backward passes where x > 0); abs'(0) = sgn(0) = 0;
# clamp passes the gradient where lo <= x <= hi (boundaries included);
# maximum/minimum split the gradient 1/2 : 1/2 where x == y; amax/amin and the
# full max()/min() divide it evenly among the tied maxima (torch.max(x, dim),
# which also returns indices, gives it to one index only: dynnets' max has no
# index output and follows amax).

TIES = [
    ("relu-at-0", dn.relu, torch.relu, [[0.0, -0.0, 1.0, -1.0]]),
    ("abs-at-0", dn.abs, torch.abs, [[0.0, -0.0, 1.0, -1.0]]),
    ("clip-at-bounds", lambda x: dn.clip(x, -1.0, 1.0), lambda x: torch.clamp(x, -1.0, 1.0),
     [[-1.0, 1.0, 0.0, 2.0, -2.0]]),
    ("clip-lo-at-bound", lambda x: dn.clip(x, min=0.0), lambda x: torch.clamp(x, min=0.0), [[0.0, 1.0, -1.0]]),
    ("clip-degenerate", lambda x: dn.clip(x, 0.5, 0.5), lambda x: torch.clamp(x, 0.5, 0.5), [[0.5, 1.0, 0.0]]),
    ("maximum-tie", dn.maximum, torch.maximum, [[1.0, 2.0, 3.0, 0.0], [1.0, 0.0, 3.0, 0.0]]),
    ("minimum-tie", dn.minimum, torch.minimum, [[1.0, 2.0, 3.0, 0.0], [1.0, 0.0, 3.0, 0.0]]),
    ("maximum-tie-bcast", dn.maximum, torch.maximum, [[[1.0, 2.0], [2.0, 2.0]], [2.0, 2.0]]),
    ("max-all-ties", dn.max, torch.amax, [[[1.0, 3.0], [3.0, 3.0]]]),
    ("max-axis-ties", lambda x: dn.max(x, axis=1), lambda x: torch.amax(x, 1), [[[3.0, 3.0, 1.0], [0.0, 0.0, 0.0]]]),
    ("max-axis0-ties-keepdims", lambda x: dn.max(x, axis=0, keepdims=True),
     lambda x: torch.amax(x, 0, keepdim=True), [[[3.0, 1.0], [3.0, 2.0], [1.0, 2.0]]]),
    ("max-multi-axis-ties", lambda x: dn.max(x, axis=(0, 2)), lambda x: torch.amax(x, (0, 2)),
     [np.array([[[1.0, 5.0], [2.0, 2.0]], [[5.0, 0.0], [2.0, 1.0]]])]),
    ("min-axis-ties", lambda x: dn.min(x, axis=-1), lambda x: torch.amin(x, -1), [[[0.0, 0.0, 1.0], [2.0, 2.0, 2.0]]]),
    ("min-all-ties", dn.min, torch.amin, [[[-1.0, -1.0], [3.0, -1.0]]]),
    ("method-max-ties", lambda x: x.max(), lambda x: x.max(), [[[1.0, 3.0], [3.0, 3.0]]]),
    ("sqrt-at-0", dn.sqrt, torch.sqrt, [[0.0, 1.0]]),
    ("where-same", lambda x, y: dn.where(np.array([True, False]), x, y),
     lambda x, y: torch.where(torch.tensor([True, False]), x, y), [[1.0, 1.0], [1.0, 1.0]]),
]


def _tie_cases():
    out = []
    for tid, f, tf, vals in TIES:
        for dt in C.FLOATS:
            for mode in ("eager", "static", "static-unknown"):
                out.append(pytest.param(f, tf, vals, dt, mode, id=f"{tid}-{np.dtype(dt).name}-{mode}"))
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f,tf,vals,dtype,mode", _tie_cases())
def test_ties(f, tf, vals, dtype, mode):
    xs = [np.asarray(v, dtype=dtype) for v in vals]
    C.check(f, tf, xs, range(len(xs)), mode=mode)


NANS = [
    # where an input is NaN: relu passes the gradient (threshold_backward), maximum and minimum give the
    # whole gradient to both inputs
    ("relu", dn.relu, torch.relu, [[np.nan, 1.0]], None),
    ("maximum", dn.maximum, torch.maximum, [[1.0, np.nan, np.nan, 2.0], [np.nan, 2.0, np.nan, 2.0]], None),
    ("minimum", dn.minimum, torch.minimum, [[1.0, np.nan, np.nan, 2.0], [np.nan, 2.0, np.nan, 2.0]], None),
    ("clip", lambda x: dn.clip(x, -1.0, 1.0), lambda x: torch.clamp(x, -1.0, 1.0), [[np.nan, 0.5]], None),
    # abs's gradient at NaN is 0 (sgn(NaN) = 0), as torch's
    ("abs", dn.abs, torch.abs, [[np.nan, -1.0, 0.0]], None),
    ("leaky_relu", dn.leaky_relu, F.leaky_relu, [[np.nan, -1.0, 0.0, 2.0]], None),
    ("gelu", dn.gelu, F.gelu, [[np.nan, np.inf, -np.inf, 0.0]], None),
    ("norm", lambda x: dn.norm(x, dim=1), lambda x: torch.norm(x, dim=1), [[[np.nan, 1.0], [0.0, 0.0]]], None),
    ("norm-inf", lambda x: dn.norm(x, float("inf"), dim=1), lambda x: torch.norm(x, float("inf"), dim=1),
     [[[np.nan, 1.0], [2.0, -2.0]]], None),
    ("max", dn.max, torch.amax, [[1.0, np.nan, 3.0]], None),
    ("exp", dn.exp, torch.exp, [[np.nan, np.inf, -np.inf]], None),
    ("sigmoid", dn.sigmoid, torch.sigmoid, [[np.nan, np.inf, -np.inf]], None),
    ("tanh", dn.tanh, torch.tanh, [[np.nan, np.inf, -np.inf]], None),
    ("softmax", dn.softmax, lambda x: F.softmax(x, -1), [[[np.nan, 1.0], [0.0, 1.0]]], None),
]


def _nan_cases():
    out = []
    for nid, f, tf, vals, why in NANS:
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        for mode in ("eager", "static"):
            out.append(pytest.param(f, tf, vals, mode, id=f"{nid}-{mode}", marks=marks))
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f,tf,vals,mode", _nan_cases())
def test_nan_propagation(f, tf, vals, mode):
    xs = [np.asarray(v, dtype=np.float64) for v in vals]
    C.check(f, tf, xs, range(len(xs)), mode=mode)


# --------------------------------------------------------------------------
# reductions: every axis / keepdims combination
# --------------------------------------------------------------------------

REDUCTIONS = {
    "sum": (dn.sum, torch.sum),
    "mean": (dn.mean, torch.mean),
    "max": (dn.max, torch.amax),
    "min": (dn.min, torch.amin),
}
AXES = [None, 0, 1, 2, -1, -3, (0, 1), (0, 2), (1, 2), (2, 0), (0, 1, 2), (-1, 0), [0, 2]]


def _torch_reduce(tf, axis, keepdims):
    def f(t):
        if axis is None:
            return tf(t, dim=tuple(range(t.ndim)), keepdim=True) if keepdims else tf(t)
        return tf(t, dim=tuple(axis) if isinstance(axis, list) else axis, keepdim=keepdims)
    return f


def _reduction_cases():
    out = []
    for name in REDUCTIONS:
        for axis in AXES:
            for keep in (False, True):
                for dt in C.FLOATS:
                    for mode in ("eager", "static", "static-unknown"):
                        out.append(pytest.param(name, axis, keep, dt, mode,
                                                id=f"{name}-{axis}-{'keep' if keep else 'drop'}-"
                                                   f"{np.dtype(dt).name}-{mode}".replace(" ", "")))
    return out


@pytest.mark.parametrize("name,axis,keepdims,dtype,mode", _reduction_cases())
def test_reduction(name, axis, keepdims, dtype, mode):
    f, tf = REDUCTIONS[name]
    x = C.draw(np.random.default_rng(3), (2, 3, 4), dtype)
    lay = "transposed" if mode == "eager" else "contiguous"
    C.check(lambda t: f(t, axis=axis, keepdims=keepdims), _torch_reduce(tf, axis, keepdims),
            [C.layout(x, lay)], [0], mode=mode)


# (Tensor.max/min with an axis are left out: torch's x.max(dim) also returns the indices, and dynnets
# is taking up that form)
@pytest.mark.parametrize("name,method", [("sum", False), ("mean", False), ("max", False), ("min", False),
                                         ("sum", True), ("mean", True)])
def test_reduction_methods_and_positional_axis(name, method):
    f, tf = REDUCTIONS[name]
    x = C.draw(np.random.default_rng(4), (3, 4), np.float64)
    if method:
        C.check(lambda t: getattr(t, name)(1, True), _torch_reduce(tf, 1, True), [x], [0])
    elif name in ("max", "min"):
        # a positional dim gives (values, indices), as torch.max(x, 0, True)
        tmax = getattr(torch, name)
        C.check(lambda t: f(t, 0, True)[0], lambda t: tmax(t, 0, True).values, [x], [0])
        np.testing.assert_array_equal(f(dn.tensor(x), 0, True)[1].data, tmax(torch.tensor(x), 0, True).indices.numpy())
    else:
        C.check(lambda t: f(t, 0, True), _torch_reduce(tf, 0, True), [x], [0])


@pytest.mark.parametrize("f", [lambda t: dn.sum(t, axis=()), lambda t: t.sum(dim=()), lambda t: dn.mean(t, dim=[]),
                               lambda t: dn.max(t, axis=()), lambda t: dn.min(t, axis=())],
                         ids=["sum-axis", "sum-dim", "mean-dim-list", "max-axis", "min-axis"])
def test_sum_over_empty_axis_tuple(f):
    # torch's dim=() reduces every dimension, numpy's axis=() none: either habit would be silently wrong for
    # the other, so it is an error naming both
    x = C.draw(np.random.default_rng(4), (3, 4), np.float64)
    assert float(torch.sum(torch.tensor(x), dim=())) == pytest.approx(x.sum())
    assert np.sum(x, axis=()).shape == (3, 4)
    with pytest.raises(dn.ShapeError, match=r"an empty tuple of dimensions reduces every dimension in PyTorch and "
                                            r"none in numpy; pass dim=None"):
        f(dn.tensor(x))


# --------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------

_X3 = (4, 5, 3)
INDICES = {
    "int": 1, "neg-int": -1, "slice": slice(1, 3), "step": slice(None, None, 2), "neg-start": slice(-3, None),
    "past-end": slice(2, 100), "empty-slice": slice(3, 1), "none": None, "ellipsis": Ellipsis,
    "ellipsis-int": (Ellipsis, 1), "tuple": (1, slice(None), 2), "none-mid": (slice(None), None, 1),
    "all-ints": (1, 2, 0), "int-array": np.array([0, 2, 2]), "int-array-neg": np.array([-1, 0]),
    "list": [0, 3, 3], "0d-array": np.array(2), "two-arrays": (np.array([0, 1]), np.array([2, 3])),
    "array-slice-array": (np.array([0, 1]), slice(None), np.array([2, 0])),
    "slice-2d-array": (slice(None), np.array([[0, 1], [2, 2]])),
    "broadcast-arrays": (np.array([[0], [1]]), np.array([0, 2, 4])),
    "bool-mask": np.array([True, False, True, False]),
    "bool-mask-2d": np.array([[True, False, True, False, False]] * 2 + [[False] * 5] * 2),
}
# the output shape of a boolean mask depends on its values, which a static
# graph does not know when it is built
STATIC_DATA_DEPENDENT = {"bool-mask", "bool-mask-2d"}


def _torch_index(ix):
    def conv(i):
        return torch.tensor(i) if isinstance(i, np.ndarray) else i
    return tuple(conv(i) for i in ix) if isinstance(ix, tuple) else conv(ix)


def _getitem_cases():
    out = []
    for name in INDICES:
        for dt in C.FLOATS:
            for mode in ("eager", "static", "static-unknown"):
                if mode != "eager" and name in STATIC_DATA_DEPENDENT:
                    continue
                for lay in ("contiguous", "strided") if mode == "eager" else ("contiguous",):
                    out.append(pytest.param(name, dt, mode, lay, id=f"{name}-{np.dtype(dt).name}-{mode}-{lay}"))
    return out


@pytest.mark.parametrize("name,dtype,mode,lay", _getitem_cases())
def test_getitem(name, dtype, mode, lay):
    ix = INDICES[name]
    x = C.layout(C.draw(np.random.default_rng(5), _X3, dtype), lay)
    tix = _torch_index(ix)
    C.check(lambda t: t[ix], lambda t: t[tix], [x], [0], mode=mode)
    C.check(lambda t: dn.getitem(t, ix), lambda t: t[tix], [x], [0], mode=mode)


@pytest.mark.parametrize("mode", ["eager", "static", "static-unknown"])
def test_negative_step_slices_match_flip(mode):
    # torch has no negative steps; the same elements come from flip
    x = C.draw(np.random.default_rng(6), (5, 3), np.float64)
    C.check(lambda t: t[::-1], lambda t: torch.flip(t, [0]), [x], [0], mode=mode)
    C.check(lambda t: t[3:0:-2, ::-1], lambda t: torch.flip(t, [0, 1])[1:4:2], [x], [0], mode=mode)


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_repeated_gather_accumulates(mode):
    x = C.draw(np.random.default_rng(7), (4, 3), np.float32)
    ids = np.array([1, 1, 3, 1, 0])
    C.check(lambda t: dn.take(t, ids), lambda t: t[torch.tensor(ids)], [x], [0], mode=mode)
    C.check(lambda t: t[ids, 2], lambda t: t[torch.tensor(ids), 2], [x], [0], mode=mode)


@pytest.mark.parametrize("mode", ["static", "static-unknown"])
def test_take_with_fed_indices(mode):
    # indices as a placeholder (an int64 input of the graph), as a model feeds them
    x = C.draw(np.random.default_rng(8), (4, 3), np.float64)
    ids = np.array([3, 0, 0, 2])
    C.check(dn.take, lambda t, i: t[i], [x, ids], [0], mode=mode)


# --------------------------------------------------------------------------
# broadcasting: random compatible shapes (hypothesis)
# --------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

BINARY = {
    "add": (dn.add, torch.add, "real"),
    "sub": (dn.sub, torch.sub, "real"),
    "mul": (dn.mul, torch.mul, "real"),
    "div": (dn.div, torch.div, "nonzero"),
    "pow": (dn.pow, torch.pow, "pos"),
    "maximum": (dn.maximum, torch.maximum, "real"),
    "minimum": (dn.minimum, torch.minimum, "real"),
}
_BCAST = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=3)


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(derandomize=True, max_examples=12, deadline=None, database=None)
@given(shapes=_BCAST, dt=st.sampled_from(C.FLOATS), mode=st.sampled_from(["eager", "static-unknown"]),
       seed=st.integers(0, 2 ** 16))
def test_broadcast_binary(name, shapes, dt, mode, seed):
    f, tf, dom = BINARY[name]
    rng = np.random.default_rng(seed)
    s1, s2 = shapes.input_shapes
    # the second operand's domain for pow/div; random values never tie, so maximum's convention is moot
    xs = [C.draw(rng, s1, dt, "pos" if name == "pow" else "real"), C.draw(rng, s2, dt, dom)]
    C.check(f, tf, xs, [0, 1], mode=mode)


@settings(derandomize=True, max_examples=15, deadline=None, database=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=1, max_side=3),
       mode=st.sampled_from(["eager", "static-unknown"]), seed=st.integers(0, 2 ** 16))
def test_broadcast_where(shapes, mode, seed):
    rng = np.random.default_rng(seed)
    sc, sx, sy = shapes.input_shapes
    cond = rng.random(sc) < 0.5
    xs = [C.draw(rng, sx, np.float64), C.draw(rng, sy, np.float64)]
    C.check(lambda x, y: dn.where(cond, x, y), lambda x, y: torch.where(torch.tensor(cond), x, y), xs, [0, 1],
            mode=mode)


@settings(derandomize=True, max_examples=15, deadline=None, database=None)
@given(shapes=hnp.mutually_broadcastable_shapes(signature="(m,k),(k,n)->(m,n)", min_dims=0, max_dims=2, min_side=1,
                                                 max_side=3),
       mode=st.sampled_from(["eager", "static", "static-unknown"]), seed=st.integers(0, 2 ** 16))
def test_broadcast_matmul(shapes, mode, seed):
    rng = np.random.default_rng(seed)
    xs = [C.draw(rng, s, np.float64) for s in shapes.input_shapes]
    C.check(dn.matmul, torch.matmul, xs, [0, 1], mode=mode)


@settings(derandomize=True, max_examples=15, deadline=None, database=None)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3), data=st.data(),
       seed=st.integers(0, 2 ** 16))
def test_broadcast_to_random(shape, data, seed):
    other = data.draw(hnp.broadcastable_shapes(shape, min_dims=0, max_dims=4, min_side=0, max_side=3))
    target = np.broadcast_shapes(shape, other)
    x = C.draw(np.random.default_rng(seed), shape, np.float64)
    C.check(lambda t: dn.broadcast_to(t, target), lambda t: torch.broadcast_to(t, target), [x], [0])


# --------------------------------------------------------------------------
# integer and boolean inputs, and dtype promotion
# --------------------------------------------------------------------------

_I = np.array([[-2, 0, 3], [1, 4, -1]])
_P = np.array([[1, 2, 3], [4, 1, 2]])
_F32 = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -3.0]], dtype=np.float32)

# the result dtype follows PyTorch's type promotion (an integer op with a float
# gives the float, or the default float32 for a Python float; a 0-d tensor or
# Python/numpy scalar does not promote within its category), not numpy's NEP 50.
# (id, dn_fn, torch_fn, inputs, how): how None compares with torch, "raises"
# expects both to raise, "float32-grads" compares gradients at float32 tolerance
INTS = [
    ("add", dn.add, torch.add, [_I, _P], None),
    ("sub-scalar", lambda x: x - 2, lambda x: x - 2, [_I], None),
    ("mul-bool", lambda x: x * np.array([True, False, True]), lambda x: x * torch.tensor([True, False, True]),
     [_I], None),
    ("neg", dn.neg, torch.neg, [_I], None),
    ("abs", dn.abs, torch.abs, [_I], None),
    ("square", dn.square, torch.square, [_I], None),
    ("pow-int", lambda x: x ** 2, lambda x: x ** 2, [_I], None),
    ("maximum", dn.maximum, torch.maximum, [_I, _P], None),
    ("minimum", dn.minimum, torch.minimum, [_I, _P], None),
    ("clip", lambda x: dn.clip(x, -1, 2), lambda x: torch.clamp(x, -1, 2), [_I], None),
    ("where", lambda x, y: dn.where(_I > 0, x, y), lambda x, y: torch.where(torch.tensor(_I > 0), x, y), [_I, _P],
     None),
    ("sum", dn.sum, torch.sum, [_I], None),
    ("sum-axis", lambda x: dn.sum(x, axis=1, keepdims=True), lambda x: torch.sum(x, 1, keepdim=True), [_I], None),
    ("sum-int32", dn.sum, torch.sum, [_I.astype(np.int32)], None),
    ("sum-bool", dn.sum, torch.sum, [_I > 0], None),
    ("max", lambda x: dn.max(x, axis=0), lambda x: torch.amax(x, 0), [_I], None),
    ("min", dn.min, torch.amin, [_I], None),
    ("matmul", dn.matmul, torch.matmul, [_I, _P.T.copy()], None),
    ("linear", dn.linear, F.linear, [_I, _P, np.array([1, -1])], None),
    ("reshape", lambda x: dn.reshape(x, 3, 2), lambda x: x.reshape(3, 2), [_I], None),
    ("transpose", dn.transpose, lambda t: t.T, [_I], None),
    ("getitem", lambda x: x[1, ::2], lambda x: x[1, ::2], [_I], None),
    ("take", lambda x: dn.take(x, np.array([1, 1])), lambda x: x[torch.tensor([1, 1])], [_I], None),
    ("concat", lambda x, y: dn.concat([x, y], axis=1), lambda x, y: torch.cat([x, y], 1), [_I, _P], None),
    ("stack", lambda x, y: dn.stack([x, y]), lambda x, y: torch.stack([x, y]), [_I, _P], None),
    ("broadcast_to", lambda x: dn.broadcast_to(x, (2, 2, 3)), lambda x: torch.broadcast_to(x, (2, 2, 3)), [_I],
     None),
    ("astype-float", lambda x: dn.astype(x, np.float32), lambda x: x.to(torch.float32), [_I], None),
    ("astype-to-int", lambda x: dn.astype(x, np.int64), lambda x: x.to(torch.int64),
     [np.array([5.7, -6.7, 7.0, -0.5])], None),
    ("embedding-int32-ids", lambda w: dn.embedding(w, np.array([1, 0, 1], np.int32)),
     lambda w: F.embedding(torch.tensor([1, 0, 1], dtype=torch.int32), w), [_F32], None),
    ("int-pow-negative", lambda x: x ** -1, lambda x: x ** -1, [_P], "raises"),
    # integer input to the float functions computes in float32, as torch's
    ("relu", dn.relu, torch.relu, [_I], None),
    ("exp", dn.exp, torch.exp, [_I], None),
    ("log", dn.log, torch.log, [_P], None),
    ("sqrt", dn.sqrt, torch.sqrt, [_P], None),
    ("tanh", dn.tanh, torch.tanh, [_I], None),
    ("sigmoid", dn.sigmoid, torch.sigmoid, [_I], None),
    # dtype promotion
    ("div-int", dn.div, torch.div, [_I, _P], None),
    ("div-scalar", lambda x: x / 2, lambda x: x / 2, [_I], None),
    ("mul-float-scalar", lambda x: x * 1.5, lambda x: x * 1.5, [_I], None),
    ("pow-float-scalar", lambda x: x ** 0.5, lambda x: x ** 0.5, [_P], None),
    ("add-float32", dn.add, torch.add, [_I, _F32], None),
    ("maximum-float32", dn.maximum, torch.maximum, [_I, _F32], None),
    ("clip-float-bounds", lambda x: dn.clip(x, -0.5, 2.5), lambda x: torch.clamp(x, -0.5, 2.5), [_I], None),
    ("concat-float32", lambda x, y: dn.concat([x, y]), lambda x, y: torch.cat([x, y]), [_I, _F32], None),
    ("float32-plus-0d-float64", dn.add, torch.add, [_F32, np.array(2.0)], "float32-grads"),
    ("int32-plus-0d-int64", dn.add, torch.add, [_I.astype(np.int32), np.array(2)], None),
    ("float32-plus-numpy-float64", lambda x: x + np.float64(2.5), lambda x: x + np.float64(2.5), [_F32], None),
    ("float32-plus-float64", dn.add, torch.add, [_F32, _I.astype(np.float64)], None),
    ("float32-times-python-float", lambda x: x * 2.5, lambda x: x * 2.5, [_F32], None),
    ("float32-times-numpy-float32", lambda x: x * np.float32(2.5), lambda x: x * np.float32(2.5), [_F32], None),
    ("float16-exp", dn.exp, torch.exp, [_F32.astype(np.float16)], None),
    ("float16-plus-python-float", lambda x: x + 1.5, lambda x: x + 1.5, [_F32.astype(np.float16)], None),
]


# static graphs follow TF1 where it differs from torch (i22-tf1-gaps; tests/static/test_tf1_gaps.py): a float
# number does not go into an integer value (TypeError) and int64 / int64 is float64
_TF1_STATIC = {"div-scalar": np.float64, "mul-float-scalar": TypeError, "pow-float-scalar": TypeError}


def _int_cases():
    out = []
    for iid, f, tf, xs, how in INTS:
        for mode in ("eager", "static"):
            if mode == "static" and iid in _TF1_STATIC:
                continue
            out.append(pytest.param(f, tf, xs, how, mode, id=f"{iid}-{mode}"))
    return out


@pytest.mark.parametrize("iid", sorted(_TF1_STATIC))
def test_integer_scalar_operands_in_static_mode_follow_tf1(iid):
    import dynnets.static as ds
    _, f, tf, xs, _ = next(row for row in INTS if row[0] == iid)
    want = _TF1_STATIC[iid]
    with ds.Graph().as_default():
        p = ds.placeholder(xs[0].shape, xs[0].dtype)
        if want is TypeError:
            with pytest.raises(TypeError, match=f"expected {xs[0].dtype} for y"):
                f(p)
            return
        v = f(p)
        with ds.Session() as sess:
            r = sess.run(v, {p: xs[0]})
    assert r.dtype == want
    np.testing.assert_allclose(r, tf(C.to_torch(xs[0])).numpy(), rtol=1e-6)


@pytest.mark.parametrize("f,tf,xs,how,mode", _int_cases())
def test_integer_and_mixed_dtypes(f, tf, xs, how, mode):
    if how == "raises":
        with pytest.raises(RuntimeError):
            tf(*[C.to_torch(x) for x in xs])
        with pytest.raises((ValueError, TypeError)):
            C.run_dn(f, xs, (), [None], mode)
        return
    diff = [k for k, x in enumerate(xs) if x.dtype.kind == "f" and f is not dn.embedding]
    # "float32-grads": the gradient of a float64 operand promoted into a float32 result is a float32 sum
    # (torch's too, summed in another order)
    tol = dict(grad_rtol=2e-5, grad_atol=2e-6) if how == "float32-grads" else {}
    C.check(f, tf, xs, diff, mode=mode, **tol)


# --------------------------------------------------------------------------
# empty dimensions
# --------------------------------------------------------------------------

_E = (0, 3)
EMPTIES = [
    ("exp", dn.exp, torch.exp, [_E], None),
    ("add-bcast", dn.add, torch.add, [_E, (3,)], None),
    ("mul-bcast-to-empty", dn.mul, torch.mul, [(2, 1), (0,)], None),
    ("sum", dn.sum, torch.sum, [_E], None),
    ("sum-axis0", lambda x: dn.sum(x, axis=0), lambda x: torch.sum(x, 0), [_E], None),
    ("sum-axis1", lambda x: dn.sum(x, axis=1, keepdims=True), lambda x: torch.sum(x, 1, keepdim=True), [_E], None),
    ("mean", dn.mean, torch.mean, [_E], None),
    ("mean-axis0", lambda x: dn.mean(x, axis=0), lambda x: torch.mean(x, 0), [_E], None),
    ("mean-axis1", lambda x: dn.mean(x, axis=1), lambda x: torch.mean(x, 1), [_E], None),
    ("max-axis1", lambda x: dn.max(x, axis=1), lambda x: torch.amax(x, 1), [_E], None),
    ("min-axis1", lambda x: dn.min(x, axis=1), lambda x: torch.amin(x, 1), [_E], None),
    ("matmul-empty-k", dn.matmul, torch.matmul, [(2, 0), (0, 4)], None),
    ("matmul-empty-rows", dn.matmul, torch.matmul, [_E, (3, 4)], None),
    ("linear", dn.linear, F.linear, [_E, (4, 3), (4,)], None),
    ("linear-empty-in", dn.linear, F.linear, [(2, 0), (4, 0), (4,)], None),
    ("softmax-rows", dn.softmax, lambda x: F.softmax(x, -1), [_E], None),
    ("softmax-cols", dn.softmax, lambda x: F.softmax(x, -1), [(2, 0)], None),
    ("log_softmax-cols", dn.log_softmax, lambda x: F.log_softmax(x, -1), [(2, 0)], None),
    ("log_softmax-rows", dn.log_softmax, lambda x: F.log_softmax(x, -1), [_E], None),
    ("concat", lambda x, y: dn.concat([x, y]), lambda x, y: torch.cat([x, y]), [_E, (2, 3)], None),
    ("stack", lambda x, y: dn.stack([x, y]), lambda x, y: torch.stack([x, y]), [_E, _E], None),
    ("reshape", lambda x: dn.reshape(x, 3, 0), lambda x: x.reshape(3, 0), [_E], None),
    ("reshape-infer", lambda x: dn.reshape(x, -1, 3), lambda x: x.reshape(-1, 3), [_E], None),
    ("transpose", dn.transpose, lambda t: t.T, [_E], None),
    ("broadcast_to", lambda x: dn.broadcast_to(x, (0, 3)), lambda x: torch.broadcast_to(x, (0, 3)), [(1, 3)], None),
    ("take-none", lambda x: dn.take(x, np.zeros(0, np.int64)), lambda x: x[torch.zeros(0, dtype=torch.long)],
     [(3, 2)], None),
    ("getitem-empty", lambda x: x[2:1], lambda x: x[2:1], [(3, 2)], None),
    ("where", lambda x, y: dn.where(np.zeros(_E, bool), x, y),
     lambda x, y: torch.where(torch.zeros(_E, dtype=torch.bool), x, y), [_E, _E], None),
    ("split", lambda x: dn.split(x, [1, 2], axis=1), lambda x: torch.split(x, [1, 2], 1), [_E], None),
    ("split-empty-parts", lambda x: dn.split(x, [0, 2, 0], axis=0), lambda x: torch.split(x, [0, 2, 0], 0),
     [(2, 3)], None),
    ("embedding", lambda w: dn.embedding(w, np.zeros(0, np.int64)),
     lambda w: F.embedding(torch.zeros(0, dtype=torch.long), w), [(3, 2)], None),
    ("cross_entropy-sum", lambda x: dn.cross_entropy(x, np.zeros(0, np.int64), reduction="sum"),
     lambda x: F.cross_entropy(x, torch.zeros(0, dtype=torch.long), reduction="sum"), [_E], None),
    ("cross_entropy-none", lambda x: dn.cross_entropy(x, np.zeros(0, np.int64), reduction="none"),
     lambda x: F.cross_entropy(x, torch.zeros(0, dtype=torch.long), reduction="none"), [_E], None),
    ("cross_entropy-mean", lambda x: dn.cross_entropy(x, np.zeros(0, np.int64)),
     lambda x: F.cross_entropy(x, torch.zeros(0, dtype=torch.long)), [_E], None),
    ("gather", lambda x: dn.gather(x, 1, np.zeros((0, 2), np.int64)),
     lambda x: torch.gather(x, 1, torch.zeros((0, 2), dtype=torch.long)), [_E], None),
    ("pad", lambda x: dn.nn.functional.pad(x, (1, 1, 0, 2)), lambda x: F.pad(x, (1, 1, 0, 2)), [_E], None),
    ("norm", lambda x: dn.norm(x, dim=0), lambda x: torch.norm(x, dim=0), [_E], None),
    ("norm-all", dn.norm, torch.norm, [_E], None),
    ("einsum", lambda x, y: dn.einsum("ij,jk->ik", x, y), lambda x, y: torch.einsum("ij,jk->ik", x, y),
     [_E, (3, 2)], None),
    ("chunk", lambda x: dn.chunk(x, 2), lambda x: torch.chunk(x, 2), [_E], None),
    ("split-int", lambda x: dn.split(x, 2, dim=1), lambda x: torch.split(x, 2, 1), [_E], None),
    ("gelu", dn.gelu, F.gelu, [_E], None),
    ("masked_fill", lambda x: dn.masked_fill(x, np.array([True, False, True]), 1.0),
     lambda x: x.masked_fill(torch.tensor([True, False, True]), 1.0), [_E], None),
]


# split needs the size of its axis when the graph is built
EMPTY_UNKNOWN = {"split": [(True, False)], "split-empty-parts": [(False, True)], "chunk": [(False, True)],
                 "split-int": [(True, False)]}


def _empty_cases():
    out = []
    for eid, f, tf, shapes, why in EMPTIES:
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        for dt in C.FLOATS:
            for mode in ("eager", "static", "static-unknown"):
                out.append(pytest.param(f, tf, shapes, dt, mode, EMPTY_UNKNOWN.get(eid, True),
                                        id=f"{eid}-{np.dtype(dt).name}-{mode}", marks=marks))
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f,tf,shapes,dtype,mode,unknown", _empty_cases())
def test_empty_dimensions(f, tf, shapes, dtype, mode, unknown):
    rng = np.random.default_rng(9)
    xs = [C.draw(rng, s, dtype) for s in shapes]
    C.check(f, tf, xs, range(len(xs)), mode=mode, unknown=unknown)


@pytest.mark.parametrize("f,tf", [(dn.max, torch.amax), (lambda x: dn.max(x, axis=0), lambda x: torch.amax(x, 0)),
                                  (dn.min, torch.amin)], ids=["max", "max-axis0", "min"])
def test_max_over_empty_axis_is_rejected_as_in_torch(f, tf):
    with pytest.raises((RuntimeError, IndexError)):
        tf(torch.zeros(_E))
    with pytest.raises(ValueError, match="max"):
        f(dn.tensor(np.zeros(_E)))


def test_split_sizes_along_unknown_axis():
    # the sizes give every output's shape when the graph is built; their sum is checked when it runs
    x = C.draw(np.random.default_rng(10), (3, 4), np.float64)
    C.check(lambda t: dn.split(t, [1, 3], axis=1), lambda t: torch.split(t, [1, 3], 1), [x], [0],
            mode="static-unknown")
    import dynnets.static as ds
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder(np.float64, (3, None))
        parts = dn.split(p, [1, 3], dim=1)
        assert [tuple(q.shape) for q in parts] == [(3, 1), (3, 3)]
    with ds.Session(g) as sess, pytest.raises(dn.ShapeError, match=r"split: sizes \[1, 3\] do not add up to "
                                                                  r"x.shape\[1\]=5"):
        sess.run(parts, {p: np.zeros((3, 5))})


# --------------------------------------------------------------------------
# creation
# --------------------------------------------------------------------------

def _same(got, want):
    got = got.numpy() if isinstance(got, dn.Tensor) else np.asarray(got)
    want = want.numpy()
    assert got.dtype == want.dtype, f"dtype {got.dtype}, torch {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape}, torch {want.shape}"
    np.testing.assert_array_equal(got, want)


def _dt(m, name):
    """dtype ``name`` of dynnets (its torch-named dtype) or of torch."""
    return getattr(m, name)


# torch's dtype inference: Python ints int64, bools bool, Python floats the
# default float32, numpy arrays and scalars (and tensors) their own dtype
CREATION = [
    ("tensor-float-list", lambda m: m.tensor([1.5, -2.0])),
    ("tensor-float32-array", lambda m: m.tensor(np.array([1.5], np.float32))),
    ("tensor-int-array", lambda m: m.tensor(np.array([1, 2]))),
    ("tensor-int32-array", lambda m: m.tensor(np.array([1, 2], np.int32))),
    ("tensor-bool-array", lambda m: m.tensor(np.array([True, False]))),
    ("tensor-dtype", lambda m: m.tensor([1, 2], dtype=_dt(m, "float64"))),
    ("tensor-dtype-long", lambda m: m.tensor([1.0, 2.0], dtype=_dt(m, "long"))),
    ("tensor-float64-array", lambda m: m.tensor(np.array([1.5]))),
    ("tensor-int-list", lambda m: m.tensor([1, 0])),
    ("tensor-nested-int-list", lambda m: m.tensor([[1, 2], [3, 4]])),
    ("tensor-mixed-int-float-list", lambda m: m.tensor([1, 2.5])),
    ("tensor-mixed-bool-int-list", lambda m: m.tensor([True, 2])),
    ("tensor-bool-list", lambda m: m.tensor([True])),
    ("tensor-int-scalar", lambda m: m.tensor(3)),
    ("tensor-bool-scalar", lambda m: m.tensor(False)),
    ("tensor-float-scalar", lambda m: m.tensor(2.5)),
    ("tensor-numpy-int64-scalar", lambda m: m.tensor(np.int64(5))),
    ("tensor-numpy-float64-scalar", lambda m: m.tensor(np.float64(5.5))),
    ("tensor-numpy-float32-scalar", lambda m: m.tensor(np.float32(5.5))),
    ("tensor-list-of-numpy-float64", lambda m: m.tensor([np.float64(1.0), 2.0])),
    ("tensor-list-of-numpy-int32", lambda m: m.tensor([np.int32(1), np.int32(2)])),
    ("tensor-empty-list", lambda m: m.tensor([])),
    ("tensor-of-tensor", lambda m: m.tensor(m.tensor([1, 2]))),
    ("as_tensor-float64-array", lambda m: m.as_tensor(np.array([1.5]))),
    ("as_tensor-int-list", lambda m: m.as_tensor([1, 2])),
    ("as_tensor-float-list", lambda m: m.as_tensor([1.5])),
    ("as_tensor-dtype", lambda m: m.as_tensor(np.array([1, 2]), dtype=_dt(m, "float32"))),
    ("from_numpy-float64", lambda m: m.from_numpy(np.array([1.5, 2.0]))),
    ("from_numpy-int32", lambda m: m.from_numpy(np.array([1, 2], np.int32))),
    ("zeros", lambda m: m.zeros(2, 3)),
    ("zeros-tuple", lambda m: m.zeros((2, 3))),
    ("zeros-long", lambda m: m.zeros(2, dtype=_dt(m, "long"))),
    ("ones", lambda m: m.ones(4)),
    ("ones-0d", lambda m: m.ones(())),
    ("ones-int", lambda m: m.ones(2, dtype=_dt(m, "int"))),
    ("full", lambda m: m.full((2,), 3.5)),
    ("full-int-value", lambda m: m.full((2,), 3)),
    ("full-bool-value", lambda m: m.full((2,), True)),
    ("zeros_like", lambda m: m.zeros_like(m.ones(2, 3, dtype=_dt(m, "float64")))),
    ("zeros_like-dtype", lambda m: m.zeros_like(m.ones(2, 3), dtype=_dt(m, "long"))),
    ("ones_like-int", lambda m: m.ones_like(m.arange(3))),
    ("arange", lambda m: m.arange(5)),
    ("arange-start-stop-step", lambda m: m.arange(2, 11, 3)),
    ("arange-float", lambda m: m.arange(0, 1, 0.25)),
    ("arange-numpy-float", lambda m: m.arange(np.float64(3.0))),
]


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
@pytest.mark.parametrize("make", [pytest.param(f, id=i) for i, f in CREATION])
def test_creation(make):
    _same(make(dn), make(torch))


def test_dtype_names_are_torchs():
    for name in ("float32", "float", "float64", "double", "float16", "half", "int64", "long", "int32", "int",
                 "int16", "short", "int8", "uint8", "bool"):
        assert getattr(dn, name) == C.numpy_dtype(getattr(torch, name)), name
        assert dn.zeros(2, dtype=getattr(dn, name)).dtype == getattr(dn, name)
    assert dn.tensor([1.0]).dtype == dn.float and dn.tensor([1]).dtype is dn.long


def test_from_numpy_shares_memory_as_torch():
    a = np.arange(3.0)
    t, tt = dn.from_numpy(a), torch.from_numpy(a.copy())
    a[0] = 7.0
    assert t.data[0] == 7.0 and np.shares_memory(t.data, a)
    _same(dn.as_tensor(a), torch.as_tensor(a))
    assert np.shares_memory(dn.as_tensor(a).data, a)             # as_tensor of an array shares it too
    assert not np.shares_memory(dn.tensor(a).data, a)            # tensor copies
    with pytest.raises(TypeError, match=r"from_numpy: expected np.ndarray \(got list\)"):
        dn.from_numpy([1.0])
    with pytest.raises(TypeError):
        torch.from_numpy([1.0])


def test_integer_labels_train_with_cross_entropy():
    # torch.tensor([1, 0]) is int64, so integer labels are class indices (they were float32, and the loss
    # then failed with a shape message)
    logits = C.draw(np.random.default_rng(13), (2, 3), np.float64)
    labels = [1, 0]
    C.check(lambda t: dn.nn.CrossEntropyLoss()(t, dn.tensor(labels)),
            lambda t: torch.nn.CrossEntropyLoss()(t, torch.tensor(labels)), [logits], [0])


@pytest.mark.parametrize("dtype", C.FLOATS)
def test_random_creation_shapes_dtypes_and_moments(dtype):
    # different generators cannot give torch's numbers; shape, dtype, seeding and moments can be checked
    a = dn.randn(200, 50, rng=1, dtype=dtype)
    b = dn.uniform(200, 50, low=-1.0, high=3.0, rng=1, dtype=dtype)
    assert a.shape == tuple(torch.randn(200, 50).shape) and a.dtype == dtype and b.dtype == dtype
    np.testing.assert_array_equal(a.data, dn.randn(200, 50, rng=1, dtype=dtype).data)
    assert abs(a.numpy().mean()) < 0.05 and abs(a.numpy().std() - 1) < 0.05
    assert b.numpy().min() >= -1.0 and b.numpy().max() < 3.0 and abs(b.numpy().mean() - 1.0) < 0.05
    assert dn.randn(3, requires_grad=True).requires_grad


# --------------------------------------------------------------------------
# where dynnets' API silently computes something else than torch's same call
# --------------------------------------------------------------------------

def test_transpose_two_dims_as_torch():
    x = C.draw(np.random.default_rng(11), (2, 3), np.float64)
    C.check(lambda t: t.transpose(0, 1), lambda t: t.transpose(0, 1), [x], [0])
    y = C.draw(np.random.default_rng(12), (2, 3, 4), np.float64)
    C.check(lambda t: t.transpose(0, 2), lambda t: t.transpose(0, 2), [y], [0])
    C.check(lambda t: dn.transpose(t, -1, 1), lambda t: torch.transpose(t, -1, 1), [y], [0])


@pytest.mark.parametrize("mode", C.MODES)
def test_split_int_as_torch(mode):
    # an int is the size of each part (split(x, 50, dim=1) of 100 columns is two parts, not fifty)
    x = C.draw(np.random.default_rng(12), (6, 2), np.float64)
    C.check(lambda t: dn.split(t, 2), lambda t: torch.split(t, 2), [x], [0], mode=mode, unknown=[(False, True)])
    y = C.draw(np.random.default_rng(13), (2, 100), np.float64)
    C.check(lambda t: dn.split(t, 50, dim=1), lambda t: torch.split(t, 50, dim=1), [y], [0], mode=mode,
            unknown=[(True, False)])


# (left operand, right operand) builders: each side a dynnets value ("t": a
# Tensor, or a placeholder in static mode), a numpy array ("a"), a numpy
# scalar ("s") or a Python number ("n")
_EQ_CASES = [
    ("same-shape", np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0]), "tt"),
    ("broadcast", np.array([[1.0], [2.0], [3.0]]), np.array([1.0, 2.0, 5.0, 3.0]), "tt"),
    ("mixed-dtype", np.array([1, 2, 3], np.int64), np.array([1.0, 2.5, 3.0]), "tt"),
    ("f32-f64", np.array([0.1, 0.5], np.float32), np.array([0.1, 0.5]), "tt"),
    ("tensor-array", np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 4.0]), "ta"),
    ("array-tensor", np.array([1.0, 4.0]), np.array([[1.0, 2.0], [3.0, 4.0]]), "at"),
    ("int-array-tensor", np.array([1, 0, 1]), np.array([1, 1, 1]), "at"),
    ("tensor-number", np.array([1.0, 2.0, 2.0]), 2.0, "tn"),
    ("number-tensor", 2, np.array([1, 2, 2]), "nt"),
    ("npscalar-tensor", np.float64(1.0), np.array([1.0, 2.0]), "st"),
    ("nan", np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), "tt"),
]


def _eq_operand(kind, value, mode, feeds):
    if kind == "a":
        return value
    if kind == "s":
        return value
    if kind == "n":
        return value
    if mode == "eager":
        return dn.tensor(value)
    import dynnets.static as ds
    ph = ds.placeholder(value.dtype, value.shape)
    feeds[ph] = value
    return ph


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("op", ["==", "!="])
@pytest.mark.parametrize("cid,x,y,kinds", _EQ_CASES, ids=[c[0] for c in _EQ_CASES])
def test_equality_is_elementwise_as_torch(cid, x, y, kinds, op, mode):
    """``==`` / ``!=`` compare elementwise (a bool tensor, no gradient), as
    torch's (and TF2's in static mode), with broadcasting, mixed dtypes and a
    numpy array or scalar on either side (numpy defers to the tensor)."""
    import dynnets.static as ds
    fn = (lambda a, b: a == b) if op == "==" else (lambda a, b: a != b)
    tx = torch.tensor(x) if kinds[0] in "ta" else x
    ty = torch.tensor(y) if kinds[1] in "ta" else y
    want = fn(tx, ty)
    feeds = {}
    g = ds.Graph()
    with g.as_default():
        got = fn(_eq_operand(kinds[0], x, mode, feeds), _eq_operand(kinds[1], y, mode, feeds))
    if mode == "eager":
        assert type(got) is dn.Tensor and not got.requires_grad
    else:
        assert isinstance(got, ds.Value) and got.dtype == np.bool_
        with ds.Session(graph=g) as sess:
            got = sess.run(got, feeds)
    _same(got, want)


def test_equality_with_none_and_other_objects_as_torch():
    t, tt = dn.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    for other in (None, "a", object()):
        assert (t == other) is (tt == other) is False
        assert (t != other) is (tt != other) is True
    with pytest.raises(TypeError, match="eq: other must be a tensor"):
        t.eq(None)
    with pytest.raises(TypeError):
        tt.eq(None)


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparison_methods_as_torch(name):
    x = np.array([[1.0, 2.0, 3.0], [3.0, 3.0, 0.0]])
    y = np.array([1.0, 3.0, 0.0])
    _same(getattr(dn.tensor(x), name)(dn.tensor(y)), getattr(torch.tensor(x), name)(torch.tensor(y)))
    _same(getattr(dn.tensor(x), name)(3.0), getattr(torch.tensor(x), name)(3.0))
    _same(getattr(dn.tensor(x), name)(y), getattr(torch.tensor(x), name)(torch.tensor(y)))


def test_equality_keeps_hashing_by_identity_as_torch():
    """Tensors stay dict keys and set members by identity while ``==`` is
    elementwise (as torch's), and the accuracy idiom gives the accuracy."""
    a, b = dn.tensor([1.0, 2.0]), dn.tensor([1.0, 2.0])
    assert hash(a) != hash(b) and len({a, b}) == 2 and {a: 1, b: 2}[b] == 2
    assert a in {a} and b not in {a}
    ta, tb = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert len({ta, tb}) == 2
    pred = dn.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]).argmax(1)
    labels = np.array([1, 0, 0])
    assert float(np.mean(pred == labels)) == pytest.approx(2 / 3)
    assert f"{np.mean(pred == labels):.3f}" == "0.667"
    assert (pred == labels).sum().item() == 2
    tpred = torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]).argmax(1)
    assert (tpred == torch.tensor(labels)).sum().item() == 2


@pytest.mark.parametrize("op", ["__lt__", "__le__", "__gt__", "__ge__"])
def test_comparisons_and_argmax(op):
    x = np.array([[1.0, 2.0, 3.0], [3.0, 3.0, 0.0]])
    y = np.array([[1.0, 0.0, 4.0], [2.0, 3.0, 1.0]])
    _same(getattr(dn.tensor(x), op)(dn.tensor(y)), getattr(torch.tensor(x), op)(torch.tensor(y)))
    _same(getattr(dn.tensor(x), op)(2.0), getattr(torch.tensor(x), op)(2.0))
    # ties: the first maximal index, as torch
    _same(dn.tensor(x).argmax(axis=1), torch.tensor(x).argmax(1))
    _same(dn.tensor(x).argmax(), torch.tensor(x).argmax())


_COMPARISONS = {"eq": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
                "greater": "gt", "greater_equal": "ge", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


@pytest.mark.parametrize("a,b", [([1.0, 2.0], [1.0, 2.0]), ([1, 2], [1.0, 2.0]), ([1.0, np.nan], [1.0, np.nan]),
                                 ([1.0, 2.0], [[1.0, 2.0]]), ([1.0, 2.0], [1.0, 2.5]), ([], [])])
def test_equal_and_allclose(a, b):
    # torch.equal and torch.allclose answer a Python bool (the elementwise comparison is eq / ==)
    ta, tb, da, db = torch.tensor(a), torch.tensor(b), dn.tensor(a), dn.tensor(b)
    assert dn.equal(da, db) is torch.equal(ta, tb)
    if ta.dtype == tb.dtype:
        for kw in ({}, {"equal_nan": True}, {"rtol": 0.3}, {"atol": 1.0}):
            assert dn.allclose(da, db, **kw) is torch.allclose(ta, tb, **kw)
    else:
        with pytest.raises(RuntimeError):
            torch.allclose(ta, tb)
        with pytest.raises(TypeError, match="allclose: input.dtype=int64 does not match other.dtype=float32"):
            dn.allclose(da, db)


@pytest.mark.parametrize("mode", ["eager", "static", "static-unknown"])
@pytest.mark.parametrize("name", sorted(_COMPARISONS) + ["argmax"])
def test_comparison_primitives(name, mode):
    """The comparison and argmax primitives through the public functions, in
    eager and static mode (known and unknown dims), with broadcasting, NaN and ties."""
    import dynnets.autograd.ops as ops
    import dynnets.static as ds
    x = np.array([[1.0, 2.0, 3.0], [3.0, 3.0, np.nan]])
    y = np.array([[1.0, 0.0, 4.0]])
    tx, ty = torch.tensor(x), torch.tensor(y)
    if name == "argmax":
        # NaN counts as the maximum, ties give the first index, as torch
        cases = [((x,), {"axis": 1}, tx.argmax(1)), ((x,), {}, tx.argmax()),
                 ((x[:, :2],), {"axis": 0}, tx[:, :2].argmax(0))]
        fn = ops.argmax
    else:
        cases = [((x, y), {}, getattr(torch, _COMPARISONS[name])(tx, ty)),
                 ((x, 2.0), {}, getattr(torch, _COMPARISONS[name])(tx, 2.0))]
        fn = getattr(ops, name)
    for args, kw, want in cases:
        if mode == "eager":
            got = fn(*[dn.tensor(a) if isinstance(a, np.ndarray) else a for a in args], **kw).numpy()
        else:
            g = ds.Graph()
            with g.as_default():
                phs = [ds.placeholder(np.float64, a.shape if mode == "static" else (None,) * a.ndim)
                       if isinstance(a, np.ndarray) else a for a in args]
                out = fn(*phs, **kw)
            with ds.Session(graph=g) as sess:
                got = sess.run(out, {p: a for p, a in zip(phs, args) if isinstance(a, np.ndarray)})
        np.testing.assert_array_equal(np.asarray(got), want.numpy())
        assert np.asarray(got).dtype == want.numpy().dtype


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_autobatch_row_primitives(dt):
    """segment_sum and gather_rows (the two primitives autobatch adds) against
    torch's segment sums (index_add_) and row indexing of the concatenated
    sources, values and gradients."""
    from dynnets.autograd.engine import bind
    from dynnets.autograd.primitives import gather_rows_p, segment_sum_p
    rng = np.random.default_rng(0)
    tol = dict(rtol=1e-12, atol=1e-12) if dt == np.float64 else dict(rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((7, 3)).astype(dt)
    starts = np.array([0, 2, 3, 6], np.int64)
    gout = rng.standard_normal((4, 3)).astype(dt)
    xd = dn.tensor(x, requires_grad=True)
    out = bind(segment_sum_p, xd, starts)
    (out * dn.tensor(gout)).sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    seg = torch.tensor(np.repeat(np.arange(4), np.diff(np.append(starts, 7))))
    want = torch.zeros(4, 3, dtype=xt.dtype).index_add_(0, seg, xt)
    (want * torch.tensor(gout)).sum().backward()
    np.testing.assert_allclose(out.data, want.detach().numpy(), **tol)
    np.testing.assert_allclose(xd.grad, xt.grad.numpy(), **tol)

    srcs = [rng.standard_normal((n, 2)).astype(dt) for n in (3, 1, 4)]
    which = np.array([2, 0, 0, 1, 2, 2, 0], np.int64)
    rows = np.array([3, 0, 0, 0, 1, 3, 2], np.int64)
    g2 = rng.standard_normal((7, 2)).astype(dt)
    sd = [dn.tensor(a, requires_grad=True) for a in srcs]
    got = bind(gather_rows_p, which, rows, *sd)
    (got * dn.tensor(g2)).sum().backward()
    st = [torch.tensor(a, requires_grad=True) for a in srcs]
    offsets = np.cumsum([0] + [len(a) for a in srcs])[:-1]
    ref = torch.cat(st)[torch.tensor(offsets[which] + rows)]
    (ref * torch.tensor(g2)).sum().backward()
    np.testing.assert_allclose(got.data, ref.detach().numpy(), **tol)
    for a, b in zip(sd, st):      # a row read twice gets both gradients
        np.testing.assert_allclose(np.asarray(a.grad), b.grad.numpy(), **tol)

    # arena_gather: the same rows read from an arena the sources are row slices of
    from dynnets.autograd.primitives import arena_gather_p
    from dynnets.autograd.tensor import wrap_array
    arena = np.concatenate(srcs)
    sa = [wrap_array(arena[o:o + len(a)], requires_grad=True) for o, a in zip(offsets, srcs)]
    assert all(np.shares_memory(t.numpy(), arena) for t in sa)
    got = bind(arena_gather_p, arena, offsets.astype(np.int64), which, rows, *sa)
    (got * dn.tensor(g2)).sum().backward()
    np.testing.assert_allclose(got.data, ref.detach().numpy(), **tol)
    for a, b in zip(sa, st):
        np.testing.assert_allclose(np.asarray(a.grad), b.grad.numpy(), **tol)


def test_clone_permute_argmin_maxmin():
    x = C.draw(np.random.default_rng(5), (2, 3, 4), np.float64)
    C.check(lambda t: t.clone() * 2.0, lambda t: t.clone() * 2.0, [x], [0])
    C.check(lambda t: t.permute(2, 0, 1), lambda t: t.permute(2, 0, 1), [x], [0])
    C.check(lambda t: dn.max(t, dim=1).values, lambda t: torch.max(t, dim=1).values, [x], [0])
    C.check(lambda t: dn.min(t, dim=2, keepdim=True).values, lambda t: torch.min(t, dim=2, keepdim=True).values,
            [x], [0])
    np.testing.assert_array_equal(dn.argmin(dn.tensor(x), dim=1).data, torch.tensor(x).argmin(dim=1).numpy())
    mm = dn.max(dn.tensor(x), dim=0)
    assert type(mm).__name__ == "MaxMin" and np.array_equal(mm.indices.data, torch.max(torch.tensor(x), 0).indices)


def test_random_primitives_match_torch_distributions():
    """random (normal, truncated normal, uniform) and dropout_mask draw from
    the distributions torch's counterparts draw from: the first two moments
    and the support agree (the streams differ: numpy's generator, not torch's)."""
    from dynnets.autograd.engine import bind
    from dynnets.autograd.primitives import dropout_mask_p, random_p
    n = 200_000
    torch.manual_seed(0)
    pairs = {
        "normal": (dict(dist="normal", a=1.0, b=2.0), torch.randn(n, dtype=torch.float64) * 2.0 + 1.0),
        "truncated_normal": (dict(dist="truncated_normal", a=0.0, b=1.0),
                             torch.nn.init.trunc_normal_(torch.empty(n, dtype=torch.float64), 0.0, 1.0, -2.0, 2.0)),
        "uniform": (dict(dist="uniform", a=-1.0, b=3.0), torch.empty(n, dtype=torch.float64).uniform_(-1.0, 3.0)),
    }
    for name, (kw, ref) in pairs.items():
        got = np.asarray(bind(random_p, shape=(n,), dtype=np.dtype(np.float64), seed=(1, 2), **kw).data)
        ref = ref.numpy()
        assert got.shape == ref.shape and got.dtype == ref.dtype, name
        np.testing.assert_allclose([got.mean(), got.std()], [ref.mean(), ref.std()], atol=0.02, err_msg=name)
        assert got.min() >= ref.min() - 0.05 * abs(ref.min()) - 1e-3 and got.max() <= ref.max() + 0.05 * abs(ref.max()) + 1e-3, name
    x = np.ones(n, np.float32)
    mask = np.asarray(bind(dropout_mask_p, x, rate=0.3, seed=(3, 4)).data)
    ref = torch.nn.functional.dropout(torch.ones(n), p=0.3, training=True).numpy()
    assert set(np.unique(mask)) == set(np.unique(ref))          # {0, 1/(1-p)}
    np.testing.assert_allclose((mask == 0).mean(), (ref == 0).mean(), atol=0.01)


def test_random_shuffle_permutes_rows_as_torch_randperm():
    """random_shuffle (TF1's tf.random_shuffle) is torch's x[torch.randperm(len(x))]: the rows permuted,
    each kept whole; one seed gives one permutation in eager and static mode, and no gradient flows."""
    from dynnets.autograd.engine import bind
    from dynnets.autograd.primitives import random_shuffle_p
    import dynnets.static as ds
    x = np.arange(40, dtype=np.float64).reshape(20, 2)
    got = np.asarray(bind(random_shuffle_p, x, seed=(1, 2)).data)
    ref = C.to_torch(x)[torch.randperm(20)].numpy()
    assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, ref.tolist())) and not np.array_equal(got, x)
    with ds.Graph().as_default():
        p = ds.placeholder(x.shape, x.dtype)
        out = bind(random_shuffle_p, p, seed=(1, 2))
        assert ds.gradients(ds.reduce_sum(out), [p]) == [None]
        with ds.Session() as sess:
            np.testing.assert_array_equal(sess.run(out, {p: x}), got)


def test_item_float_int_len_iter_bool():
    x = np.array([[1.5, -2.0], [3.0, 4.0]])
    d, t = dn.tensor(x), torch.tensor(x)
    assert len(d) == len(t) and d.ndim == t.ndim and d.numel() == t.numel() and d.size() == tuple(t.size()) and d.shape == tuple(t.shape)
    for rd, rt in zip(d, t):
        _same(rd, rt)
    assert d[1, 0].item() == t[1, 0].item() and float(d[0, 1]) == float(t[0, 1]) and int(d[1, 1]) == int(t[1, 1])
    assert bool(dn.tensor(np.array([0.0]))) == bool(torch.tensor([0.0]))
    with pytest.raises(ValueError):
        d.item()
    with pytest.raises((ValueError, RuntimeError)):
        bool(d)
    np.testing.assert_array_equal(d.tolist(), t.tolist())

# issue 25: the layer primitives' parity tests (against torch's functional and module forms)
PRIMITIVES_ELSEWHERE.update({
    "layer_norm": ("test_transformer_layers.py", "test_layer_norm_primitive"),
    "conv1d": ("test_conv_layers.py", "test_conv1d"),
    "pool1d": ("test_conv_layers.py", "test_max_pool1d"),
    "conv2d": ("test_conv_layers.py", "test_conv2d"),
    "max_pool2d": ("test_conv_layers.py", "test_max_pool2d"),
    "attention_probs": ("test_transformer_layers.py", "test_scaled_dot_product_attention"),
    "attention_apply": ("test_transformer_layers.py", "test_multi_head_attention_forward_with_a_padding_mask_placeholder"),
    "rows_like": ("test_transformer_layers.py", "test_learned_positional_embedding"),
})

# tests/parity/test_torch_fused.py (branch i25-fuse): the fused encoder-layer ops
COVERED_ELSEWHERE |= {"linear_act", "linear_split", "add_layer_norm"}
PRIMITIVES_ELSEWHERE.update({"linear_act": ("test_torch_fused.py", "test_linear_act"),
                             "linear_split": ("test_torch_fused.py", "test_linear_split"),
                             "add_layer_norm": ("test_torch_fused.py", "test_add_layer_norm")})
