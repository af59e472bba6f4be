"""The tree primitives behind the tree models (``dynnets.autograd.ops``:
``tree_lstm_levels``, ``tree_rnn_levels``, ``childsum_levels`` over a level
schedule; ``tree_lstm_node``, ``tree_lstm_leaf_node`` on packed ``[h | c]``
states; ``split_rows``) against PyTorch compositions of the papers'
equations, node by node: values and the gradients of states and weights, in
float64 and float32, eager and static (known and unknown dimensions), on
contiguous and non-contiguous inputs.
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dynnets.autograd import ops as M  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

_H, _E = 3, 4
MODES = ("eager", "static", "static-unknown")


def _cases():
    out = []
    for dt in C.FLOATS:
        for mode in MODES:
            for lay in ("contiguous", "transposed", "strided") if mode == "eager" else ("contiguous",):
                out.append(pytest.param(dt, mode, lay, id=f"{np.dtype(dt).name}-{mode}-{lay}"))
    return out


CASES = _cases()


def _weights(rng, dtype, *shapes):
    s = 1.0 / math.sqrt(_H)
    return [np.asarray(rng.uniform(-s, s, shape), dtype) * 2.0 for shape in shapes]


# --------------------------------------------------------------------------
# binary trees over a level schedule
# --------------------------------------------------------------------------

# a forest of 6 leaves: level 1 nodes 6 = (0, 1) and 7 = (4, 5), an empty
# level, level 3 nodes 8 = (6, 2) and 9 = (3, 7), level 4 the root 10 = (8, 9)
_N0 = 6
_LEFT = np.array([0, 4, 6, 3, 8])
_RIGHT = np.array([1, 5, 2, 7, 9])
_OFFSETS = np.array([0, 6, 8, 8, 10, 11])


def _torch_tree_lstm(h_l, h_r, c_l, c_r, w, b):
    """Binary Tree-LSTM node without input (Tai et al. 2015, eqs. 9-14):
    z = [h_l; h_r] @ w + b in chunks i, f_l, f_r, o, u."""
    i, f_l, f_r, o, u = (torch.cat([h_l, h_r], -1) @ w + b).chunk(5, -1)
    c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_l) * c_l + torch.sigmoid(f_r) * c_r
    return torch.sigmoid(o) * torch.tanh(c), c


def _torch_leaf(x, w, b):
    """A leaf from its input: chunks i, o, u (eq. 12 without the children)."""
    i, o, u = (x @ w + b).chunk(3, -1)
    c = torch.sigmoid(i) * torch.tanh(u)
    return torch.sigmoid(o) * torch.tanh(c), c


def _torch_levels_lstm(h0, c0, w, b):
    h, c = list(h0), list(c0)
    for l, r in zip(_LEFT, _RIGHT):
        hn, cn = _torch_tree_lstm(h[l], h[r], c[l], c[r], w, b)
        h.append(hn)
        c.append(cn)
    return torch.stack(h), torch.stack(c)


def _torch_levels_rnn(h0, w, b):
    """Recursive neural network (Socher et al. 2011): h = tanh([h_l; h_r] @ w + b)."""
    h = list(h0)
    for l, r in zip(_LEFT, _RIGHT):
        h.append(torch.tanh(torch.cat([h[l], h[r]]) @ w + b))
    return torch.stack(h)


@pytest.mark.parametrize("dtype,mode,lay", CASES)
def test_tree_lstm_levels(dtype, mode, lay):
    rng = np.random.default_rng(80)
    xs = [C.draw(rng, (_N0, _H), dtype) * 0.5 for _ in range(2)] + _weights(rng, dtype, (2 * _H, 5 * _H), (5 * _H,))
    xs = [C.layout(a, lay) for a in xs]
    C.check(lambda h0, c0, w, b: M.tree_lstm_levels(h0, c0, w, b, _LEFT, _RIGHT, _OFFSETS), _torch_levels_lstm,
            xs, range(4), mode=mode)


_ROWS = np.array([3, 0, 3, 1, 2, 0])       # 4 packed leaf states read by the 6 leaves


def _torch_levels_lstm_packed(s0, w, b):
    H = s0.shape[1] // 2
    leaves = s0[torch.from_numpy(_ROWS)]
    return _torch_levels_lstm(leaves[:, :H], leaves[:, H:], w, b)


@pytest.mark.parametrize("dtype,mode,lay", CASES)
def test_tree_lstm_levels_packed(dtype, mode, lay):
    rng = np.random.default_rng(82)
    xs = [C.draw(rng, (4, 2 * _H), dtype) * 0.5] + _weights(rng, dtype, (2 * _H, 5 * _H), (5 * _H,))
    xs = [C.layout(a, lay) for a in xs]
    C.check(lambda s0, w, b: M.tree_lstm_levels_packed(s0, _ROWS, w, b, _LEFT, _RIGHT, _OFFSETS),
            _torch_levels_lstm_packed, xs, range(3), mode=mode)


@pytest.mark.parametrize("dtype,mode,lay", CASES)
def test_tree_rnn_levels(dtype, mode, lay):
    rng = np.random.default_rng(81)
    xs = [C.draw(rng, (_N0, _H), dtype) * 0.5] + _weights(rng, dtype, (2 * _H, _H), (_H,))
    xs = [C.layout(a, lay) for a in xs]
    C.check(lambda h0, w, b: M.tree_rnn_levels(h0, w, b, _LEFT, _RIGHT, _OFFSETS), _torch_levels_rnn,
            xs, range(3), mode=mode)


# --------------------------------------------------------------------------
# child-sum Tree-LSTM (any number of children)
# --------------------------------------------------------------------------

# 6 leaves; level 1: node 6 with children (0, 1, 2), node 7 with (3,);
# level 2: the root 8 with (6, 7, 4, 5)
_CS_PTR = np.array([0, 3, 4, 8])
_CS_IDX = np.array([0, 1, 2, 3, 6, 7, 4, 5])
_CS_OFFSETS = np.array([0, 6, 8, 9])


def _torch_childsum(h0, c0, u_iou, u_f, b_iou, b_f):
    """Child-sum Tree-LSTM without node inputs (Tai et al. 2015, eqs. 2-8):
    h~ = sum_k h_k; i, o, u from h~ @ u_iou + b_iou; f_k = sigmoid(h_k @ u_f + b_f);
    c = i * u + sum_k f_k * c_k; h = o * tanh(c)."""
    h, c = list(h0), list(c0)
    for j in range(len(_CS_PTR) - 1):
        kids = _CS_IDX[_CS_PTR[j]:_CS_PTR[j + 1]]
        hs = torch.stack([h[k] for k in kids])
        cs = torch.stack([c[k] for k in kids])
        i, o, u = (hs.sum(0) @ u_iou + b_iou).chunk(3)
        f = torch.sigmoid(hs @ u_f + b_f)
        cn = torch.sigmoid(i) * torch.tanh(u) + (f * cs).sum(0)
        h.append(torch.sigmoid(o) * torch.tanh(cn))
        c.append(cn)
    return torch.stack(h), torch.stack(c)


@pytest.mark.parametrize("dtype,mode,lay", CASES)
def test_childsum_levels(dtype, mode, lay):
    rng = np.random.default_rng(82)
    xs = [C.draw(rng, (_N0, _H), dtype) * 0.5 for _ in range(2)] \
        + _weights(rng, dtype, (_H, 3 * _H), (_H, _H), (3 * _H,), (_H,))
    xs = [C.layout(a, lay) for a in xs]
    C.check(lambda *a: M.childsum_levels(*a, _CS_PTR, _CS_IDX, _CS_OFFSETS), _torch_childsum, xs, range(6),
            mode=mode)


# --------------------------------------------------------------------------
# per-node execution on packed [h | c] states
# --------------------------------------------------------------------------

def _torch_node(s_l, s_r, w, b):
    h, c = _torch_tree_lstm(s_l[:, :_H], s_r[:, :_H], s_l[:, _H:], s_r[:, _H:], w, b)
    return torch.cat([h, c], 1)


def _torch_leaf_node(x, w, b):
    return torch.cat(_torch_leaf(x, w, b), 1)


# one row takes the fused matrix-vector kernel, several rows the matrix product
@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("dtype,mode,lay", CASES)
def test_tree_lstm_node(rows, dtype, mode, lay):
    rng = np.random.default_rng(83)
    xs = [C.draw(rng, (rows, 2 * _H), dtype) * 0.5 for _ in range(2)] \
        + _weights(rng, dtype, (2 * _H, 5 * _H), (5 * _H,))
    xs = [C.layout(a, lay) for a in xs]
    C.check(M.tree_lstm_node, _torch_node, xs, range(4), mode=mode)


@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("dtype,mode,lay", CASES)
def test_tree_lstm_leaf_node(rows, dtype, mode, lay):
    rng = np.random.default_rng(84)
    xs = [C.draw(rng, (rows, _E), dtype)] + _weights(rng, dtype, (_E, 3 * _H), (3 * _H,))
    xs = [C.layout(a, lay) for a in xs]
    C.check(M.tree_lstm_leaf_node, _torch_leaf_node, xs, range(3), mode=mode)


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_recursive_tree_on_split_rows(mode):
    # a tree ((a b) c) run node by node on the rows of one embedded sentence, as the recursive model does:
    # split_rows' VJP gathers every leaf's row gradient into one array
    rng = np.random.default_rng(85)
    xs = [C.draw(rng, (3, _E))] + _weights(rng, np.float64, (_E, 3 * _H), (3 * _H,), (2 * _H, 5 * _H), (5 * _H,))

    def dn_tree(x, wl, bl, w, b):
        a, b_, c = M.split_rows(x)
        leaves = [M.tree_lstm_leaf_node(r, wl, bl) for r in (a, b_, c)]
        return M.tree_lstm_node(M.tree_lstm_node(leaves[0], leaves[1], w, b), leaves[2], w, b)

    def torch_tree(x, wl, bl, w, b):
        leaves = [_torch_leaf_node(r, wl, bl) for r in x.split(1, 0)]
        return _torch_node(_torch_node(leaves[0], leaves[1], w, b), leaves[2], w, b)

    C.check(dn_tree, torch_tree, xs, range(5), mode=mode)


@pytest.mark.parametrize("dtype,mode", [(dt, m) for dt in C.FLOATS for m in ("eager", "static")],
                         ids=[f"{np.dtype(dt).name}-{m}" for dt in C.FLOATS for m in ("eager", "static")])
def test_split_rows(dtype, mode):
    x = C.layout(C.draw(np.random.default_rng(86), (4, 3), dtype), "transposed" if mode == "eager" else "contiguous")
    C.check(M.split_rows, lambda t: t.split(1, 0), [x], [0], mode=mode)
