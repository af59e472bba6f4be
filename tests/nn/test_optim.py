"""Optimizers against hand-computed updates, sparse vs dense equivalence, lazy
Adam, clipping, param groups and state_dict round trips."""

import math

import numpy as np
import pytest

import dynnets as dn
import dynnets.optim as optim
from dynnets import nn
from dynnets.autograd import RowSparse

GRADS = [0.5, -1.0, 0.25]


def run_scalar(make_opt, grads=GRADS, p0=1.0):
    """Values of a one-element float64 parameter after each step with the given gradients."""
    p = nn.Parameter(np.array([p0], dtype=np.float64))
    opt = make_opt([p])
    out = []
    for g in grads:
        p._grad = np.array([g])
        opt.step()
        out.append(float(p.numpy()[0]))
    return out


# --- hand-computed updates ---------------------------------------------------------

def test_sgd_plain():
    assert run_scalar(lambda ps: optim.SGD(ps, lr=0.1)) == pytest.approx([0.95, 1.05, 1.025], abs=1e-15)


def test_sgd_momentum_weight_decay():
    # d = g + 0.1 p; buf = d (step 1), 0.9 buf + d after; p -= 0.1 buf
    # 1: d = 0.6,                buf = 0.6,                   p = 0.94
    # 2: d = -1 + 0.094 = -0.906, buf = 0.54 - 0.906 = -0.366,  p = 0.94 + 0.0366 = 0.9766
    # 3: d = 0.25 + 0.09766,      buf = -0.3294 + 0.34766 = 0.01826, p = 0.9766 - 0.001826 = 0.974774
    got = run_scalar(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1))
    assert got == pytest.approx([0.94, 0.9766, 0.974774], abs=1e-12)


def test_sgd_nesterov_and_dampening():
    # nesterov: direction = d + 0.9 buf
    # 1: d = 0.6, buf = 0.6, dir = 1.14, p = 0.886
    # 2: d = -1 + 0.0886 = -0.9114, buf = 0.54 - 0.9114 = -0.3714, dir = -0.9114 - 0.33426 = -1.24566,
    #    p = 0.886 + 0.124566 = 1.010566
    got = run_scalar(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True), GRADS[:2])
    assert got == pytest.approx([0.886, 1.010566], abs=1e-12)
    # dampening 0.5, no decay: buf = 0.5 (step 1), then 0.9 * 0.5 + 0.5 * (-1) = -0.05
    got = run_scalar(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5), GRADS[:2])
    assert got == pytest.approx([0.95, 0.955], abs=1e-12)


def test_adagrad():
    # sum starts at 0.1; sum += g^2; p -= lr_t g / (sqrt(sum) + eps), lr_t = 0.1 / (1 + (t-1) 0.5)
    got = run_scalar(lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.5, initial_accumulator_value=0.1))
    p1 = 1 - 0.1 * 0.5 / (math.sqrt(0.35) + 1e-10)
    p2 = p1 - (0.1 / 1.5) * -1.0 / (math.sqrt(1.35) + 1e-10)
    p3 = p2 - (0.1 / 2.0) * 0.25 / (math.sqrt(1.4125) + 1e-10)
    assert got == pytest.approx([p1, p2, p3], abs=1e-14)
    # with weight decay 0.2 and the defaults (sum starts at 0, lr_decay 0)
    got = run_scalar(lambda ps: optim.Adagrad(ps, lr=0.1, weight_decay=0.2), GRADS[:2])
    g1 = 0.5 + 0.2
    q1 = 1 - 0.1 * g1 / (math.sqrt(g1 * g1) + 1e-10)   # = 0.9 (up to eps)
    g2 = -1.0 + 0.2 * q1
    q2 = q1 - 0.1 * g2 / (math.sqrt(g1 * g1 + g2 * g2) + 1e-10)
    assert got == pytest.approx([q1, q2], abs=1e-14)


def test_adam_bias_correction():
    # m = 0.9 m + 0.1 g; v = 0.999 v + 0.001 g^2; p -= 0.1 (m / (1-0.9^t)) / (sqrt(v / (1-0.999^t)) + 1e-8)
    got = run_scalar(lambda ps: optim.Adam(ps, lr=0.1))
    m, v, p, want = 0.0, 0.0, 1.0, []
    for t, g in enumerate(GRADS, 1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p -= 0.1 * (m / (1 - 0.9 ** t)) / (math.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        want.append(p)
    assert got == pytest.approx(want, abs=1e-12)
    # the first two steps written out: bias correction makes step 1 lr in size (up to eps)
    assert want[0] == pytest.approx(0.9, abs=1e-8)
    assert want[1] == pytest.approx(0.9 + 0.1 * (0.055 / 0.19) / math.sqrt(0.00124975 / 0.001999), abs=1e-8)


def test_adam_weight_decay():
    got = run_scalar(lambda ps: optim.Adam(ps, lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.5))
    m, v, p, want = 0.0, 0.0, 1.0, []
    for t, g in enumerate(GRADS, 1):
        g = g + 0.5 * p
        m = 0.8 * m + 0.2 * g
        v = 0.9 * v + 0.1 * g * g
        p -= 0.01 / (1 - 0.8 ** t) * m / (math.sqrt(v) / math.sqrt(1 - 0.9 ** t) + 1e-6)
        want.append(p)
    assert got == pytest.approx(want, abs=1e-12)


# --- 0-d parameters, eager and static ----------------------------------------------------
# Both modes call the one copy of the update rules (dynnets.nn.optim.*_update).
# A 0-d parameter is the case to watch: np.sqrt of a 0-d array is a numpy
# scalar, not an array the in-place steps after it can write into.

def _expected_0d(kind, grads, p=1.0, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    out, s, m, v = [], 0.0, 0.0, 0.0
    for t, g in enumerate(grads, 1):
        if kind == "sgd":
            p -= lr * g
        elif kind == "adagrad":
            s += g * g
            p -= lr * g / (math.sqrt(s) + 1e-10)
        else:
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            if kind == "adam":          # PyTorch's: eps after the bias correction
                p -= lr / (1 - b1 ** t) * m / (math.sqrt(v) / math.sqrt(1 - b2 ** t) + eps)
            else:                       # "adam-tf1", tf.train.AdamOptimizer's: eps before it ("epsilon hat")
                p -= lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (math.sqrt(v) + eps)
        out.append(p)
    return out


def _eager_0d(kind, dtype, grads):
    p = nn.Parameter(np.array(1.0, dtype))
    opt = {"sgd": optim.SGD, "adagrad": optim.Adagrad, "adam": optim.Adam}[kind]([p], lr=0.1)
    out = []
    for g in grads:
        p._grad = np.array(g, dtype)
        opt.step()
        assert p.numpy().shape == () and p.numpy().dtype == dtype
        out.append(p.numpy().copy())
    return out


def _static_0d(kind, dtype, grads):
    import dynnets.static as ds
    graph = ds.Graph()
    with graph.as_default():
        w = ds.Variable(np.array(1.0, dtype), name="w")
        c = ds.placeholder((), dtype, name="c")
        opt = {"sgd": lambda: ds.train.GradientDescentOptimizer(0.1),
               "adagrad": lambda: ds.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0, epsilon=1e-10),
               "adam": lambda: ds.train.AdamOptimizer(0.1),
               "adam-torch": lambda: ds.train.AdamOptimizer(0.1, torch_epsilon=True)}[kind]()
        step = opt.minimize(w * c)            # d/dw (w * c) = c: the gradient is fed
        init = ds.global_variables_initializer()
    out = []
    with ds.Session(graph) as sess:
        sess.run(init)
        for g in grads:
            sess.run(step, {c: g})
            val = sess.run(w)
            assert val.shape == () and val.dtype == dtype
            out.append(val)
    return out


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-13), (np.float32, 1e-6), (np.float16, 2e-3)])
@pytest.mark.parametrize("kind", ["sgd", "adagrad", "adam"])
def test_zero_dim_parameter_eager_and_static(kind, dtype, rtol):
    eager = _eager_0d(kind, dtype, GRADS)
    static = _static_0d(kind, dtype, GRADS)
    np.testing.assert_allclose(np.array(eager, np.float64), _expected_0d(kind, GRADS), rtol=rtol)
    if kind == "adam":
        # static Adam is TF1's (epsilon hat): the same function, other constants
        np.testing.assert_allclose(np.array(static, np.float64), _expected_0d("adam-tf1", GRADS), rtol=rtol)
        np.testing.assert_array_equal(eager, _static_0d("adam-torch", dtype, GRADS))   # PyTorch's epsilon: eager's bits
    else:
        np.testing.assert_array_equal(eager, static)       # the same function: the same bits


# --- in place, gradients untouched ------------------------------------------------------

@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1),
                                  lambda ps: optim.Adagrad(ps, weight_decay=0.1),
                                  lambda ps: optim.Adam(ps, weight_decay=0.1)])
def test_updates_in_place_and_grads_unchanged(make):
    p = nn.Parameter(np.ones((3, 2), dtype=np.float32))
    data = p.numpy()
    alias = data[1]                            # another holder of the same memory
    g = np.full((3, 2), 0.5, dtype=np.float32)
    p._grad = g
    opt = make([p])
    opt.step()
    opt.step()
    assert p.numpy() is data and p.numpy().dtype == np.float32
    assert np.all(alias == p.numpy()[1]) and np.all(alias != 1)
    np.testing.assert_array_equal(g, 0.5)      # the gradient array was only read


# --- row-sparse gradients ----------------------------------------------------------------

def _sparse_grads(V, D, rng, steps=3, n=12):
    """RowSparse gradients with repeated rows, as several uses of one embedding give."""
    out = []
    for _ in range(steps):
        rows = rng.integers(0, V, n)
        rows[: n // 3] = rows[0]
        out.append(RowSparse(rows, rng.standard_normal((n, D)).astype(np.float32), (V, D)))
    return out


SPARSE_EQUIV = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "sgd_momentum_wd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-2),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1, initial_accumulator_value=0.1),
    "adagrad_lr_decay": lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.1),
    "adagrad_wd": lambda ps: optim.Adagrad(ps, lr=0.1, weight_decay=1e-2),
    "adam_dense": lambda ps: optim.Adam(ps, lr=0.1),
}


@pytest.mark.parametrize("name", sorted(SPARSE_EQUIV))
def test_sparse_matches_dense(name):
    """A row-sparse gradient gives exactly the dense step's result."""
    V, D = 40, 3
    rng = np.random.default_rng(0)
    init = rng.standard_normal((V, D)).astype(np.float32)
    grads = _sparse_grads(V, D, rng)
    ps, pd = nn.Parameter(init), nn.Parameter(init)
    os_, od = SPARSE_EQUIV[name]([ps]), SPARSE_EQUIV[name]([pd])
    for g in grads:
        ps._grad = g
        pd._grad = g.to_dense()
        os_.step()
        od.step()
    np.testing.assert_array_equal(ps.data, pd.data)
    assert set(os_.state.get(ps, {})) == set(od.state.get(pd, {}))
    for k, v in od.state.get(pd, {}).items():
        np.testing.assert_array_equal(os_.state[ps][k], v)


def test_lazy_adam_equals_dense_when_every_row_is_touched():
    # with eps = 0 the two formulas (eps before or after the bias correction) are the same: what remains is
    # the row machinery (repeated rows summed, gathered, scattered back), which must give the dense bits
    V, D = 6, 2
    rng = np.random.default_rng(1)
    init = rng.standard_normal((V, D)).astype(np.float32)
    ps, pd = nn.Parameter(init), nn.Parameter(init)
    os_, od = optim.Adam([ps], lr=0.05, eps=0.0, lazy=True), optim.Adam([pd], lr=0.05, eps=0.0)
    for _ in range(3):
        rows = np.concatenate([rng.permutation(V), [2, 2]])
        g = RowSparse(rows, rng.standard_normal((V + 2, D)).astype(np.float32), (V, D))
        ps._grad, pd._grad = g, g.to_dense()
        os_.step()
        od.step()
    np.testing.assert_array_equal(ps.data, pd.data)


def test_lazy_adam_semantics():
    """Only touched rows' moments and values change; the step count is global."""
    V, D = 6, 2
    p = nn.Parameter(np.zeros((V, D)))
    opt = optim.Adam([p], lr=0.1, betas=(0.9, 0.99), lazy=True)
    g1 = RowSparse(np.array([1, 3, 1]), np.array([[1.0, 2.0], [0.5, 0.5], [1.0, -1.0]]), (V, D))
    p._grad = g1
    opt.step()
    g2 = RowSparse(np.array([3, 5]), np.array([[-1.0, 1.0], [2.0, 2.0]]), (V, D))
    p._grad = g2
    opt.step()
    st = opt.state[p]
    assert st["step"] == 2

    def adam_row(grads_by_step):
        """Hand-computed lazy Adam for one row: steps where it has no gradient are skipped."""
        m = v = np.zeros(D)
        x = np.zeros(D)
        for t, g in grads_by_step:
            m = 0.9 * m + 0.1 * g
            v = 0.99 * v + 0.01 * g * g
            # torch.optim.SparseAdam's maths: eps before the bias correction
            x = x - 0.1 * math.sqrt(1 - 0.99 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
        return x, m, v

    # row 1: one update at t=1 with its summed gradient [2, 1]; not decayed at t=2
    x1, m1, v1 = adam_row([(1, np.array([2.0, 1.0]))])
    # row 3: updates at t=1 and t=2; row 5 only at t=2 (bias correction of step 2)
    x3, m3, v3 = adam_row([(1, np.array([0.5, 0.5])), (2, np.array([-1.0, 1.0]))])
    x5, m5, v5 = adam_row([(2, np.array([2.0, 2.0]))])
    for r, (x, m, v) in {1: (x1, m1, v1), 3: (x3, m3, v3), 5: (x5, m5, v5)}.items():
        np.testing.assert_allclose(p.data[r], x, rtol=1e-12)
        np.testing.assert_allclose(st["exp_avg"][r], m, rtol=1e-12)
        np.testing.assert_allclose(st["exp_avg_sq"][r], v, rtol=1e-12)
    for r in (0, 2, 4):
        assert np.all(p.numpy()[r] == 0) and np.all(st["exp_avg"][r] == 0) and np.all(st["exp_avg_sq"][r] == 0)
    # the dense (non-lazy) step decays row 1's moments at step 2 and moves it again
    q = nn.Parameter(np.zeros((V, D)))
    dense = optim.Adam([q], lr=0.1, betas=(0.9, 0.99))
    for g in (g1, g2):
        q._grad = g
        dense.step()
    assert np.allclose(dense.state[q]["exp_avg"][1], 0.9 * m1)
    assert not np.allclose(q.numpy()[1], x1)


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1),
                                  lambda ps: optim.Adagrad(ps, lr=0.1, initial_accumulator_value=0.1),
                                  lambda ps: optim.Adam(ps, lr=0.1, lazy=True)])
def test_untouched_rows_bit_identical_large_vocabulary(make, monkeypatch):
    """20,000 x 300 embedding, 500 touched rows: every other row of the
    parameter and of each state array is bit-identical after two steps, and
    the step never builds the dense (20000, 300) gradient."""
    V, D = 20000, 300
    emb = nn.Embedding(V, D, rng=0)
    opt = make(emb.parameters())
    rng = np.random.default_rng(1)
    touched = np.zeros(V, dtype=bool)
    before = emb.weight.numpy().copy()
    for step in range(2):
        ids = rng.choice(V, size=500, replace=False)
        touched[ids] = True
        loss = (emb(ids) * emb(ids[:100])[:1]).sum()     # two lookups: repeated rows in one RowSparse
        loss.backward()
        assert type(emb.weight._grad) is RowSparse
        with monkeypatch.context() as mp:
            def densify(*a):
                raise AssertionError("the sparse step densified the gradient")
            mp.setattr(RowSparse, "to_dense", densify)
            mp.setattr(RowSparse, "add_to_dense", densify)
            opt.step()
        opt.zero_grad()
        if step == 0:
            states = {k: v.copy() for k, v in opt.state.get(emb.weight, {}).items() if isinstance(v, np.ndarray)}
    w = emb.weight.numpy()
    assert np.array_equal(w[~touched].view(np.uint32), before[~touched].view(np.uint32))
    assert not np.array_equal(w[touched], before[touched])
    for k, v in opt.state.get(emb.weight, {}).items():
        if isinstance(v, np.ndarray):
            assert np.array_equal(v[~touched], states[k][~touched]), k


def test_sgd_sparse_untouched_with_repeats():
    p = nn.Parameter(np.arange(8.0).reshape(4, 2))
    before = p.numpy().copy()
    p._grad = RowSparse(np.array([2, 0, 2]), np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]), (4, 2))
    optim.SGD([p], lr=0.5).step()
    np.testing.assert_array_equal(p.data, before - 0.5 * np.array([[2, 2], [0, 0], [4, 4], [0, 0]]))


# --- gradient clipping -------------------------------------------------------------

def test_clip_grad_norm_dense():
    a, b = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros((1, 1)))
    ga, gb = np.array([3.0, 4.0]), np.array([[12.0]])
    a._grad, b._grad = ga, gb
    assert nn.utils.clip_grad_norm_([a, b], 100.0) == pytest.approx(13.0)
    assert a._grad is ga                       # nothing to clip: untouched
    total = optim.clip_grad_norm_(iter([a, b]), 6.5)
    assert total == pytest.approx(13.0)
    np.testing.assert_allclose(a._grad, [1.5, 2.0], rtol=1e-6)
    np.testing.assert_allclose(b._grad, [[6.0]], rtol=1e-6)
    np.testing.assert_array_equal(ga, [3.0, 4.0])   # reassigned, not modified in place
    np.testing.assert_array_equal(gb, [[12.0]])
    a._grad, b._grad = ga, gb
    assert nn.utils.clip_grad_norm_([a, b], 1.0, norm_type=math.inf) == 12.0
    np.testing.assert_allclose(b._grad, [[1.0]], rtol=1e-6)
    a._grad, b._grad = ga, gb
    assert nn.utils.clip_grad_norm_([a, b], 1.0, norm_type=1) == pytest.approx(19.0)
    c = nn.Parameter(np.zeros(1))              # no gradient: ignored
    assert nn.utils.clip_grad_norm_(c, 1.0) == 0.0
    d = nn.Parameter(np.zeros(1))
    d._grad = np.array([np.nan])
    with pytest.raises(RuntimeError, match="total norm .* is nan"):
        nn.utils.clip_grad_norm_([d], 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_sparse():
    emb, dense = nn.Parameter(np.zeros((5, 2))), nn.Parameter(np.zeros(1))
    vals = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 4.0]])
    emb._grad = RowSparse(np.array([2, 2, 0]), vals, (5, 2))
    dense._grad = np.array([12.0])
    # coalesced: row 2 = [3, 0], row 0 = [0, 4] -> norm 5 (not sqrt(21)); with 12: 13
    total = nn.utils.clip_grad_norm_([emb, dense], 1.3)
    assert total == pytest.approx(13.0)
    g = emb._grad
    assert type(g) is RowSparse
    np.testing.assert_allclose(g.to_dense(), 0.1 * np.array([[0, 4], [0, 0], [3, 0], [0, 0], [0, 0]]), rtol=1e-6)
    np.testing.assert_array_equal(vals, [[1.0, 0.0], [2.0, 0.0], [0.0, 4.0]])
    np.testing.assert_allclose(dense._grad, [1.2], rtol=1e-6)


# --- groups, errors, zero_grad, closure ------------------------------------------------------

def test_param_groups_with_separate_lr():
    emb = nn.Embedding(5, 2, rng=0)
    lin = nn.Linear(2, 2, rng=0)
    opt = optim.Adagrad([{"params": emb.parameters(), "lr": 0.5}, {"params": lin.parameters()}], lr=0.01)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.01]
    assert opt.param_groups[1]["eps"] == 1e-10
    for p in list(emb.parameters()) + list(lin.parameters()):
        p._grad = np.ones(p.shape, dtype=np.float32)
    w_e, w_l = emb.weight.numpy().copy(), lin.weight.numpy().copy()
    opt.step()
    # first Adagrad step with unit gradient moves each entry by lr
    np.testing.assert_allclose(w_e - emb.weight.data, 0.5, rtol=1e-6)
    np.testing.assert_allclose(w_l - lin.weight.data, 0.01, rtol=1e-5)
    opt.param_groups[0]["lr"] = 0.0             # schedules edit the groups
    w_e = emb.weight.numpy().copy()
    opt.step()
    np.testing.assert_array_equal(emb.weight.data, w_e)


def test_optimizer_errors():
    p, q = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(2))
    assert optim.SGD([p]).param_groups[0]["lr"] == 1e-3        # torch's default since 2.x
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="got a single Tensor"):
        optim.Adam(p)
    with pytest.raises(ValueError, match="parameter 1 appears twice in group 0"):
        optim.SGD([p, p], lr=0.1)
    with pytest.raises(ValueError, match="parameter 0 of group 1 is already in another param group"):
        optim.SGD([{"params": [p]}, {"params": [p, q]}], lr=0.1)
    with pytest.raises(TypeError, match="parameter 0 of group 0 must be a Tensor, got ndarray"):
        optim.SGD([np.zeros(2)], lr=0.1)
    with pytest.raises(ValueError, match="Adam: betas must be a pair of numbers in \\[0, 1\\), got \\(0.9, 1.0\\)"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Adagrad: lr must be non-negative, got -1"):
        optim.Adagrad([p], lr=-1)
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)


def test_zero_grad_and_closure():
    p = nn.Parameter(np.array([2.0]))
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 4.0 and p.numpy()[0] == 1.0       # grad 2p = 4
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p._grad, [0.0])
    opt.zero_grad()
    assert p._grad is None
    opt.step()                                           # no gradient: no change
    assert p.numpy()[0] == 1.0


# --- state_dict ------------------------------------------------------------------------------

class Tagger(nn.Module):
    def __init__(self, rng):
        super().__init__()
        self.emb = nn.Embedding(30, 4, rng=rng)
        self.out = nn.Linear(4, 3, rng=rng)

    def forward(self, ids):
        return self.out(dn.tanh(self.emb(ids)))


def _train(model, opt, batches, clip=None):
    for ids, y in batches:
        opt.zero_grad()
        loss = dn.cross_entropy(model(ids), y)
        loss.backward()
        if clip:
            optim.clip_grad_norm_(model.parameters(), clip)
        opt.step()


MAKERS = {
    "sgd_momentum": lambda m: optim.SGD([{"params": m.emb.parameters(), "lr": 0.5}, {"params": m.out.parameters()}],
                                        lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True),
    "sgd_sparse": lambda m: optim.SGD(m.parameters(), lr=0.3),
    "adagrad": lambda m: optim.Adagrad([{"params": m.emb.parameters(), "lr": 0.2}, {"params": m.out.parameters()}],
                                       lr=0.05, lr_decay=1e-2, initial_accumulator_value=0.1),
    "adam": lambda m: optim.Adam(m.parameters(), lr=0.01, betas=(0.8, 0.95), weight_decay=1e-4),
    "adam_lazy": lambda m: optim.Adam(m.parameters(), lr=0.01, lazy=True),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_state_dict_round_trip_through_save_load(name, tmp_path):
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, 30, 8), rng.integers(0, 3, 8)) for _ in range(6)]
    ref = Tagger(rng=1)
    ref_opt = MAKERS[name](ref)
    _train(ref, ref_opt, batches, clip=1.0)                 # uninterrupted: 6 steps

    a = Tagger(rng=1)
    a_opt = MAKERS[name](a)
    _train(a, a_opt, batches[:3], clip=1.0)
    dn.save({"model": a.state_dict(), "optimizer": a_opt.state_dict()}, tmp_path / "ckpt.npz")

    b = Tagger(rng=2)                                       # different init, fresh optimizer
    b_opt = MAKERS[name](b)
    ck = dn.load(tmp_path / "ckpt.npz")
    b.load_state_dict(ck["model"])
    b_opt.load_state_dict(ck["optimizer"])
    assert [{k: v for k, v in g.items() if k != "params"} for g in b_opt.param_groups] == \
        [{k: v for k, v in g.items() if k != "params"} for g in a_opt.param_groups]
    _train(b, b_opt, batches[3:], clip=1.0)
    for (k, v), (_, w) in zip(ref.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(v, w, err_msg=k)


def test_state_dict_is_a_copy_and_load_errors():
    p = nn.Parameter(np.zeros(3))
    opt = optim.Adam([p], lr=0.1)
    p._grad = np.ones(3)
    opt.step()
    sd = opt.state_dict()
    assert sd["state"][0]["step"] == 1 and sd["param_groups"][0]["params"] == [0]
    opt.step()
    assert sd["state"][0]["step"] == 1 and not np.array_equal(sd["state"][0]["exp_avg"], opt.state[p]["exp_avg"])
    other = optim.Adam([nn.Parameter(np.zeros(3)), nn.Parameter(np.zeros(1))])
    with pytest.raises(ValueError, match="param group 0 has 1 parameters in the state and 2 in the optimizer"):
        other.load_state_dict(sd)
    two = optim.Adam([{"params": [nn.Parameter(np.zeros(3))]}, {"params": [nn.Parameter(np.zeros(1))]}])
    with pytest.raises(ValueError, match="the state has 1 param groups, the optimizer has 2"):
        two.load_state_dict(sd)
    wrong = optim.Adam([nn.Parameter(np.zeros(4))])
    with pytest.raises(ValueError, match=r"state 'exp_avg' of parameter 0 has shape \(3,\), the parameter has "
                                         r"shape \(4,\)"):
        wrong.load_state_dict(sd)
    with pytest.raises(ValueError, match="expected a dict with 'state' and 'param_groups'"):
        wrong.load_state_dict({"model": 1})
