"""``@dn.batchable``: one record per decorated call under ``dn.autobatch()``,
equal to per-op autobatch and to eager in values and every gradient; counts
(traces, records, batched calls), not times."""
import warnings

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd.batchable import BatchableError, BatchableFallback

TOL = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=1e-5, atol=1e-6)}


class PlainTreeLSTM:
    """The binary Tree-LSTM of Tai et al. 2015 (eqs. 9-14) from plain ops
    (matmul, slicing, sigmoid, tanh, mul, add): the user-written cell."""

    def __init__(self, E, H, dt, seed=0):
        rng = np.random.default_rng(seed)
        self.H = H
        self.W = dn.Parameter((rng.standard_normal((E, 3 * H)) * 0.4).astype(dt))
        self.bw = dn.Parameter((rng.standard_normal(3 * H) * 0.1).astype(dt))
        self.U = dn.Parameter((rng.standard_normal((2 * H, 5 * H)) * 0.3).astype(dt))
        self.b = dn.Parameter((rng.standard_normal(5 * H) * 0.1).astype(dt))
        self.params = [self.W, self.bw, self.U, self.b]

    def leaf(self, x):
        H = self.H
        z = x @ self.W + self.bw
        c = dn.sigmoid(z[:, :H]) * dn.tanh(z[:, 2 * H:])
        return dn.sigmoid(z[:, H:2 * H]) * dn.tanh(c), c

    def node(self, hl, cl, hr, cr):
        H = self.H
        z = dn.cat([hl, hr], 1) @ self.U + self.b
        i, fl, fr, o, u = (z[:, k * H:(k + 1) * H] for k in range(5))
        c = dn.sigmoid(i) * dn.tanh(u) + dn.sigmoid(fl) * cl + dn.sigmoid(fr) * cr
        return dn.sigmoid(o) * dn.tanh(c), c


def _random_tree(rng, n_leaves):
    """A random binary tree as nested tuples of leaf indices."""
    items = list(range(n_leaves))
    while len(items) > 1:
        k = int(rng.integers(0, len(items) - 1))
        items[k:k + 2] = [(items[k], items[k + 1])]
    return items[0]


def _chain(n):
    t = 0
    for k in range(1, n):
        t = (t, k)
    return t


def _run_tree(t, xs, leaf, node):
    """Postorder without Python recursion (60-deep chains)."""
    stack, out = [(t, False)], []
    while stack:
        s, done = stack.pop()
        if isinstance(s, int):
            out.append(leaf(xs[s]))
        elif done:
            r = out.pop()
            l_ = out.pop()
            out.append(node(l_[0], l_[1], r[0], r[1]))
        else:
            stack += [(s, True), (s[1], False), (s[0], False)]
    return out[0]


def _forest_loss(cell, trees, xs_list, mode):
    for p in cell.params:
        p.grad = None
    leaf, node = cell.leaf, cell.node
    if mode == "decorated":
        leaf, node = dn.batchable(cell.leaf), dn.batchable(cell.node)
    if mode == "eager":
        hs = [_run_tree(t, xs, leaf, node)[0] for t, xs in zip(trees, xs_list)]
        loss = (dn.cat(hs, 0) ** 2).sum() + dn.cat(hs, 0).sum()
        ab = None
    else:
        with dn.autobatch() as ab:
            hs = [_run_tree(t, xs, leaf, node)[0] for t, xs in zip(trees, xs_list)]
            loss = (dn.cat(hs, 0) ** 2).sum() + dn.cat(hs, 0).sum()
    loss.backward()
    return loss.item(), [np.zeros(p.shape) if p.grad is None else p.grad.numpy().copy() for p in cell.params], ab, (leaf, node)


FORESTS = {
    "single-leaf": lambda rng: [0],
    "chain-60": lambda rng: [_chain(60)],
    "minibatch-of-1": lambda rng: [_random_tree(rng, 7)],
    "ragged": lambda rng: [_random_tree(rng, int(n)) for n in rng.integers(1, 12, size=6)],
}


def _leaves(t):
    return 1 if isinstance(t, int) else _leaves(t[0]) + _leaves(t[1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("forest", sorted(FORESTS))
def test_decorated_per_op_and_eager_agree_on_trees(forest, dtype):
    rng = np.random.default_rng(3)
    trees = FORESTS[forest](rng)
    E, H = 5, 4
    xs_list = [[dn.tensor(rng.standard_normal((1, E)).astype(dtype)) for _ in range(_leaves(t))] for t in trees]
    cell = PlainTreeLSTM(E, H, dtype)
    le, ge, _, _ = _forest_loss(cell, trees, xs_list, "eager")
    lp, gp, _, _ = _forest_loss(cell, trees, xs_list, "per-op")
    ld, gd, ab, (leaf, node) = _forest_loss(cell, trees, xs_list, "decorated")
    np.testing.assert_allclose(lp, le, **TOL[dtype])
    np.testing.assert_allclose(ld, le, **TOL[dtype])
    for a, b, c in zip(ge, gp, gd):
        np.testing.assert_allclose(b, a, **TOL[dtype])
        np.testing.assert_allclose(c, a, **TOL[dtype])
    n_leaves = sum(len(x) for x in xs_list)
    n_nodes = n_leaves - len(trees)
    # one record per decorated call
    assert leaf.records == n_leaves and node.records == n_nodes
    assert leaf.fallbacks == node.fallbacks == 0
    assert leaf.traces == 1 and node.traces == (1 if n_nodes else 0)
    calls = [c for c in ab.calls if c.op == "batchable_call"]
    assert sum(c.size for c in calls) == n_leaves + n_nodes
    assert not ab.stats["fallbacks"]


def test_chain_runs_one_batched_call_per_depth():
    rng = np.random.default_rng(0)
    cell = PlainTreeLSTM(3, 2, np.float64)
    xs = [dn.tensor(rng.standard_normal((1, 3))) for _ in range(60)]
    *_, ab, (leaf, node) = _forest_loss(cell, [_chain(60)], [xs], "decorated")
    calls = [c for c in ab.calls if c.op == "batchable_call"]
    # every leaf in one call, then the 59 internal nodes one per depth
    assert len(calls) == 1 + 59
    assert max(c.size for c in calls) == 60


def test_traces_once_per_signature_and_again_for_new_shapes():
    w = dn.Parameter(np.ones((3, 2)))

    @dn.batchable
    def f(x):
        return dn.tanh(x @ w)

    with dn.autobatch():
        ys = [f(dn.tensor(np.full((1, 3), k, float))) for k in range(5)]
    assert f.traces == 1 and f.records == 5
    with dn.autobatch():
        ys += [f(dn.tensor(np.ones((2, 3)))), f(dn.tensor(np.ones((2, 3))))]       # rows 2: a new signature
    assert f.traces == 2 and f.records == 7
    with dn.no_grad(), dn.autobatch():
        f(dn.tensor(np.ones((1, 3))))                                              # grad mode: another
    with dn.autobatch():
        f(dn.tensor(np.ones((1, 3))))
    assert f.traces == 3
    np.testing.assert_allclose(ys[5].numpy(), np.tanh(np.ones((2, 3)) @ np.ones((3, 2))))


def test_outside_autobatch_runs_eagerly():
    w = dn.Parameter(np.ones((3, 2)))
    f = dn.batchable(lambda x: x @ w)
    y = f(dn.tensor(np.ones((1, 3))))
    assert type(y) is dn.Tensor and f.traces == 0 and f.records == 0
    np.testing.assert_allclose(y.numpy(), [[3.0, 3.0]])


def test_optimizer_step_between_regions_is_seen_without_retracing():
    rng = np.random.default_rng(1)
    lin = nn.Linear(3, 2, dtype=np.float64)
    f = dn.batchable(lambda x: dn.tanh(lin(x)))
    opt = dn.optim.SGD(lin.parameters(), lr=0.5)
    xs = [dn.tensor(rng.standard_normal((1, 3))) for _ in range(4)]
    losses = []
    for step in range(3):
        opt.zero_grad()
        with dn.autobatch():
            loss = dn.cat([f(x) for x in xs], 0).sum()
        loss.backward()
        losses.append(loss.item())
        # eager reference at the same weights
        ref = dn.cat([dn.tanh(lin(x)) for x in xs], 0).sum().item()
        np.testing.assert_allclose(losses[-1], ref, rtol=1e-12)
        opt.step()
    lin.weight.data = np.zeros((2, 3))           # a replaced array of the same shape
    with dn.autobatch():
        y = f(xs[0])
    np.testing.assert_allclose(y.numpy(), np.tanh(lin.bias.numpy())[None], rtol=1e-12)
    assert f.traces == 1 and len(set(losses)) == 3


def test_item_between_calls_forces_and_matches_eager():
    rng = np.random.default_rng(2)
    w = dn.Parameter(rng.standard_normal((3, 3)))
    f = dn.batchable(lambda x: dn.tanh(x @ w))

    def program(g):
        x = dn.tensor(rng2.standard_normal((1, 3)))
        total = 0.0
        for _ in range(6):
            x = g(x)
            if x.sum().item() > 0:          # data-dependent control flow between calls
                x = g(x * 2.0)
            total = total + x.sum()
        return total

    rng2 = np.random.default_rng(5)
    ref = program(lambda x: dn.tanh(x @ w))
    ref.backward()
    g_ref = w.grad.numpy().copy()
    w.grad = None
    rng2 = np.random.default_rng(5)
    with dn.autobatch() as ab:
        out = program(f)
    out.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), g_ref, rtol=1e-10)
    assert ab.stats["forces"] >= 6 and f.fallbacks == 0


def _data_dependent(x):
    if x.sum() > 0:                         # a value read inside the body
        return x * 2.0
    return x * 3.0


def test_data_dependent_body_falls_back_per_op_with_one_warning():
    f = dn.batchable(_data_dependent)
    xs = [dn.tensor(np.full((1, 2), v)) for v in (1.0, -1.0, 2.0)]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with dn.autobatch():
            ys = [f(x) for x in xs]
    msgs = [str(w.message) for w in rec if issubclass(w.category, BatchableFallback)]
    assert len(msgs) == 1 and "_data_dependent" in msgs[0] and "test_batchable.py" in msgs[0]
    assert f.fallbacks == 3 and f.records == 0
    np.testing.assert_allclose(np.concatenate([y.numpy() for y in ys]), [[2, 2], [-3, -3], [4, 4]])


def test_strict_raises_naming_function_and_line():
    f = dn.batchable(strict=True)(_data_dependent)
    line = _data_dependent.__code__.co_firstlineno + 1
    with pytest.raises(BatchableError, match=rf"_data_dependent \(.*test_batchable.py:{line}\)"):
        with dn.autobatch():
            f(dn.tensor(np.ones((1, 2))))


def test_rows_mixing_body_falls_back():
    @dn.batchable
    def total(x):
        return x.sum(0, keepdim=True)            # sums over the rows: not row-wise

    with pytest.warns(BatchableFallback, match="not row-wise: sum at .*test_batchable.py"):
        with dn.autobatch():
            ys = [total(dn.tensor(np.ones((2, 3)) * k)) for k in range(3)]
    np.testing.assert_allclose(ys[2].numpy(), [[4.0, 4.0, 4.0]])
    with pytest.raises(BatchableError, match="not row-wise: sum at .*test_batchable.py"):
        dn.batchable(strict=True)(total.fn).plan(dn.tensor(np.ones((2, 3))))


def test_dropout_draws_a_mask_per_instance():
    @dn.batchable(strict=True)
    def drop(x):
        return dn.nn.functional.dropout(x * 1.0, 0.5, True)

    xs = [dn.tensor(np.ones((1, 64))) for _ in range(4)]
    with dn.no_grad(), dn.autobatch():
        ys = [drop(x) for x in xs]
    masks = [y.numpy()[0] for y in ys]
    # with gradients: the backward reads the forward's masks (not a second draw)
    xs2 = [dn.tensor(np.ones((1, 64)), requires_grad=True) for _ in range(4)]
    with dn.autobatch() as ab:
        zs = [drop(x) for x in xs2]
        total = dn.cat(zs, 0).sum()
    total.backward()
    assert drop.records == 8 and drop.fallbacks == 0
    assert [c.size for c in ab.calls if c.op == "batchable_call"] == [4]
    masks += [z.numpy()[0] for z in zs]
    for k, m in enumerate(masks):
        assert set(np.unique(m)) <= {0.0, 2.0}
        for m2 in masks[k + 1:]:
            assert not np.array_equal(m, m2)
    for x, z in zip(xs2, zs):
        np.testing.assert_allclose(x.grad.numpy(), z.numpy())        # d(x * mask)/dx = mask


def test_shape_rule_names_the_function():
    w = dn.Parameter(np.ones((3, 2)))

    @dn.batchable
    def cell(x):
        return dn.tanh(x @ w)

    plan = cell.plan(dn.tensor(np.ones((1, 3))))
    from dynnets.autograd.primitives.call import batchable_call_p
    with pytest.raises(dn.ShapeError, match=r"batchable_call: .*cell: input 0 should be of shape \(\?, 3\)"):
        dn.autograd.engine.bind(batchable_call_p, np.ones((2, 4)), w, plan=plan)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lstm_cell_loop_over_random_lengths(dtype):
    rng = np.random.default_rng(4)
    cell = nn.LSTMCell(3, 4, dtype=dtype)
    step = dn.batchable(lambda x, h, c: cell(x, (h, c)))
    seqs = [rng.standard_normal((int(n), 3)).astype(dtype) for n in rng.integers(1, 9, size=7)]

    def run(f, ctx):
        for p in cell.parameters():
            p.grad = None
        with ctx:
            finals = []
            for s in seqs:
                h = dn.zeros(1, 4, dtype=dtype)
                c = dn.zeros(1, 4, dtype=dtype)
                for t in range(len(s)):
                    h, c = f(dn.tensor(s[t:t + 1]), h, c)
                finals.append(h)
            loss = (dn.cat(finals, 0) ** 2).sum()
        loss.backward()
        return loss.item(), [p.grad.numpy().copy() for p in cell.parameters()]

    import contextlib
    le, ge = run(lambda x, h, c: cell(x, (h, c)), contextlib.nullcontext())
    ld, gd = run(step, dn.autobatch())
    np.testing.assert_allclose(ld, le, **TOL[dtype])
    for a, b in zip(ge, gd):
        np.testing.assert_allclose(b, a, **TOL[dtype])
    assert step.records == sum(len(s) for s in seqs) and step.traces == 1


# --- the tree models: mode="autobatch" runs their decorated cells --------------------

def _tree_text(rng, shape, words, max_children=2):
    """A bracketed tree: "leaf", "chain-60", or a random tree of up to 9 leaves."""
    def leaf():
        return f"({int(rng.integers(0, 5))} {words[int(rng.integers(0, len(words)))]})"
    if shape == "leaf":
        return leaf()
    if shape == "chain-60":
        t = leaf()
        for _ in range(59):
            t = f"({int(rng.integers(0, 5))} {t} {leaf()})"
        return t
    items = [leaf() for _ in range(int(rng.integers(1, 10)))]
    while len(items) > 1:
        k = int(rng.integers(2, max_children + 1))
        k = min(k, len(items))
        i = int(rng.integers(0, len(items) - k + 1))
        items[i:i + k] = [f"({int(rng.integers(0, 5))} {' '.join(items[i:i + k])})"]
    return items[0]


MODEL_FORESTS = {"single-leaf": ["leaf"], "chain-60": ["chain-60"], "minibatch-of-1": ["random"],
                 "ragged": ["random"] * 5 + ["leaf", "chain-60"]}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("forest", sorted(MODEL_FORESTS))
@pytest.mark.parametrize("kind", ["treelstm", "treernn", "childsum"])
def test_tree_models_decorated_per_op_and_recursive_agree(kind, forest, dtype):
    from dynnets.data.trees import parse_tree
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import build_model
    rng = np.random.default_rng(11)
    words = ["a", "b", "c", "d", "e", "f"]
    trees = [parse_tree(_tree_text(rng, s, words, 3 if kind == "childsum" else 2))
             for s in MODEL_FORESTS[forest]]
    vocab = Vocabulary.from_trees(trees)
    tol = TOL[np.dtype(dtype).type]
    res = {}
    for mode, decorated in (("recursive", None), ("autobatch", True), ("autobatch", False)):
        m = build_model(kind, len(vocab), embed_dim=5, hidden=4, seed=0, mode=mode, dtype=dtype)
        if decorated is not None:
            m.autobatch_decorated = decorated
        batch = m.collate(m.prepare(trees, vocab))
        loss = m.loss(batch)
        loss.backward()
        res[(mode, decorated)] = (loss.item(), [p.grad.numpy().copy() if p.grad is not None else np.zeros(p.shape)
                                                for p in m.parameters()], m.predict_all(batch)[1])
        if decorated:
            leaf, node = m.batchable_cells()
            n_nodes = sum(len(e.children) for e in batch.examples)
            n_leaves = sum(len(e.leaves) for e in batch.examples)
            # one record per call, twice (the loss's forward and predict_all's)
            assert leaf.records == 2 * n_leaves and node.records == 2 * (n_nodes - n_leaves)
            assert leaf.fallbacks == node.fallbacks == 0
            arities = {len(k) for e in batch.examples for _, k in e.internal}
            assert leaf.traces == 2 and node.traces == 2 * len(arities)      # grad and no-grad signatures
            assert not m.last_autobatch.stats["fallbacks"]
    l0, g0, p0 = res[("recursive", None)]
    for key in (("autobatch", True), ("autobatch", False)):
        l, g, p = res[key]
        np.testing.assert_allclose(l, l0, **tol)
        for a, b in zip(g, g0):
            np.testing.assert_allclose(a, b, **tol)
        np.testing.assert_allclose(p, p0, **tol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn", "bilstm"])
def test_sequence_models_decorated_steps_equal_packed(kind, dtype):
    from dynnets.data.trees import parse_tree
    from dynnets.data.vocab import Vocabulary
    from dynnets.models import build_model
    rng = np.random.default_rng(12)
    words = ["a", "b", "c", "d", "e", "f"]
    trees = [parse_tree(_tree_text(rng, "random", words)) for _ in range(6)] + \
        [parse_tree(_tree_text(rng, "leaf", words))]
    vocab = Vocabulary.from_trees(trees)
    tol = TOL[np.dtype(dtype).type]
    res = {}
    for mode in ("packed", "autobatch"):
        m = build_model(kind, len(vocab), embed_dim=5, hidden=4, seed=0, mode=mode, dtype=dtype)
        batch = m.collate(m.prepare(trees, vocab))
        loss = m.loss(batch)
        loss.backward()
        res[mode] = (loss.item(), [p.grad.numpy().copy() if p.grad is not None else np.zeros(p.shape)
                                   for p in m.parameters()])
    step = m.batchable_step()
    n_tokens = int(batch.lengths.sum()) * (2 if kind == "bilstm" else 1)
    assert step.records == n_tokens and step.fallbacks == 0
    assert step.traces == (2 if kind == "bilstm" else 1)
    np.testing.assert_allclose(res["autobatch"][0], res["packed"][0], **tol)
    for a, b in zip(res["autobatch"][1], res["packed"][1]):
        np.testing.assert_allclose(a, b, **tol)


def test_backward_reads_the_forward_residuals_without_a_second_forward():
    rng = np.random.default_rng(6)
    cell = PlainTreeLSTM(3, 2, np.float64)
    xs = [dn.tensor(rng.standard_normal((1, 3))) for _ in range(5)]
    *_, (leaf, node) = _forest_loss(cell, [_random_tree(rng, 5)], [xs], "decorated")
    for f, args in ((leaf, (xs[0],)), (node, (dn.zeros(1, 2, dtype=np.float64),) * 4)):
        plan = f.plan(*args)
        assert plan.bwd_session.stats and not plan.full_session.stats      # backward only, no recompute


def test_a_one_primitive_body_is_recorded_as_that_primitive():
    cell = nn.LSTMCell(3, 4, dtype=np.float64)
    step = dn.batchable(lambda x, h, c: cell(x, (h, c)))
    x, h = dn.tensor(np.ones((1, 3))), dn.zeros(1, 4, dtype=np.float64)
    with dn.autobatch() as ab:
        outs = [step(x, h, h) for _ in range(3)]
    assert step.records == 3 and step.traces == 1 and step.fallbacks == 0
    assert [(c.op, c.size) for c in ab.calls] == [("lstm_cell", 3)]
    np.testing.assert_allclose(outs[2][0].numpy(), cell(x, (h, h))[0].numpy(), rtol=1e-12)
    with pytest.raises(BatchableError, match="one primitive application"):
        step.plan(x, h, h)


def test_keyword_arguments_are_recorded_per_op_with_a_warning():
    f = dn.batchable(lambda x, scale=2.0: x * scale)
    with pytest.warns(BatchableFallback, match="keyword arguments"):
        with dn.autobatch():
            y = f(dn.tensor(np.ones((1, 2))), scale=3.0)
    np.testing.assert_allclose(y.numpy(), [[3.0, 3.0]])
    assert f.fallbacks == 1 and f.records == 0
