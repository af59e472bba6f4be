"""``@dn.batchable`` cells under ``dn.autobatch()`` against torch: a plain-op
Tai et al. Tree-LSTM over a random forest (values and every gradient) and an
``LSTMCell`` step loop over sequences of different lengths."""
import numpy as np
import torch

import dynnets as dn
from dynnets import nn

from ._common import tol


def _forest(rng, n_trees):
    """Random binary trees as postorder programs: ("leaf", word) / ("node",)."""
    out = []
    for _ in range(n_trees):
        n = int(rng.integers(1, 9))
        items = [[("leaf", int(w))] for w in rng.integers(0, 6, size=n)]
        while len(items) > 1:
            k = int(rng.integers(0, len(items) - 1))
            items[k:k + 2] = [items[k] + items[k + 1] + [("node",)]]
        out.append(items[0])
    return out


def _run(prog, emb, leaf, node, cat):
    stack = []
    for step in prog:
        if step[0] == "leaf":
            stack.append(leaf(emb[step[1]]))
        else:
            (hr, cr), (hl, cl) = stack.pop(), stack.pop()
            stack.append(node(hl, cl, hr, cr))
    return stack[0][0]


def test_decorated_plain_tree_lstm_matches_torch():
    rng = np.random.default_rng(0)
    E, H = 4, 3
    arrays = dict(emb=rng.standard_normal((6, 1, E)), W=rng.standard_normal((E, 3 * H)) * 0.5,
                  bw=rng.standard_normal(3 * H) * 0.1, U=rng.standard_normal((2 * H, 5 * H)) * 0.4,
                  b=rng.standard_normal(5 * H) * 0.1)
    forest = _forest(rng, 5)

    def cells(p, lib, cat):
        def leaf(x):
            z = x @ p["W"] + p["bw"]
            c = lib.sigmoid(z[:, :H]) * lib.tanh(z[:, 2 * H:])
            return lib.sigmoid(z[:, H:2 * H]) * lib.tanh(c), c

        def node(hl, cl, hr, cr):
            z = cat([hl, hr], 1) @ p["U"] + p["b"]
            i, fl, fr, o, u = (z[:, k * H:(k + 1) * H] for k in range(5))
            c = lib.sigmoid(i) * lib.tanh(u) + lib.sigmoid(fl) * cl + lib.sigmoid(fr) * cr
            return lib.sigmoid(o) * lib.tanh(c), c
        return leaf, node

    tp = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    leaf, node = cells(tp, torch, torch.cat)
    temb = [tp["emb"][k] for k in range(6)]
    tloss = sum((_run(f, temb, leaf, node, torch.cat) ** 2).sum() for f in forest)
    tloss.backward()

    dp = {k: dn.Parameter(v.copy()) for k, v in arrays.items()}
    leaf, node = cells(dp, dn, dn.cat)
    leaf, node = dn.batchable(leaf), dn.batchable(node)
    with dn.autobatch():
        demb = [dp["emb"][k] for k in range(6)]
        dloss = sum((_run(f, demb, leaf, node, dn.cat) ** 2).sum() for f in forest)
    dloss.backward()
    rtol, atol = tol(np.float64)
    np.testing.assert_allclose(dloss.item(), tloss.item(), rtol=rtol, atol=atol)
    for k in arrays:
        np.testing.assert_allclose(dp[k].grad.numpy(), tp[k].grad.numpy(), rtol=rtol, atol=atol, err_msg=k)
    assert leaf.records == sum(len([s for s in f if s[0] == "leaf"]) for f in forest)


def test_decorated_lstm_cell_loop_matches_torch():
    rng = np.random.default_rng(1)
    cell = nn.LSTMCell(3, 4, dtype=np.float64)
    tcell = torch.nn.LSTMCell(3, 4).double()
    with torch.no_grad():
        for (n, p), (tn, tp) in zip(cell.named_parameters(), tcell.named_parameters()):
            assert n == tn
            tp.copy_(torch.tensor(p.numpy()))
    seqs = [rng.standard_normal((int(n), 1, 3)) for n in rng.integers(1, 7, size=5)]
    step = dn.batchable(lambda x, h, c: cell(x, (h, c)))
    with dn.autobatch():
        finals = []
        for s in seqs:
            h = c = dn.zeros(1, 4, dtype=np.float64)
            for x in s:
                h, c = step(dn.tensor(x), h, c)
            finals.append(h)
        loss = (dn.cat(finals, 0) ** 3).sum()
    loss.backward()
    tfinals = []
    for s in seqs:
        h = c = torch.zeros(1, 4, dtype=torch.float64)
        for x in s:
            h, c = tcell(torch.tensor(x), (h, c))
        tfinals.append(h)
    tloss = (torch.cat(tfinals, 0) ** 3).sum()
    tloss.backward()
    rtol, atol = tol(np.float64)
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=rtol, atol=atol)
    for (n, p), (_, tp) in zip(cell.named_parameters(), tcell.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=rtol, atol=atol, err_msg=n)
