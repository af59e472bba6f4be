"""End-to-end: the users' linear-regression example, a small model that learns,
and the autograd graph being freed step after step."""

import gc
import tracemalloc

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn, optim


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_linear_regression_example(dtype, tol):
    w = dn.tensor(0.1, requires_grad=True, dtype=dtype)
    b = dn.tensor(0.3, requires_grad=True, dtype=dtype)
    x = dn.tensor([1.0, 2.0, 3.0, 4.0], dtype=dtype)
    y = dn.tensor([2.0, 4.0, 6.0, 8.0], dtype=dtype)
    loss = dn.mean((w * x + b - y) ** 2)
    # residuals -1.6, -3.5, -5.4, -7.3: mean of squares (2.56 + 12.25 + 29.16 + 53.29) / 4
    assert loss.item() == pytest.approx(24.315, rel=tol)
    loss.backward()
    # dL/dw = mean(2 r x) = (-1.6 - 7 - 16.2 - 29.2) / 2;  dL/db = mean(2 r) = -17.8 / 2
    assert w.grad.item() == pytest.approx(-27.0, rel=tol)
    assert b.grad.item() == pytest.approx(-8.9, rel=tol)
    optim.SGD([w, b], lr=0.01).step()
    assert w.item() == pytest.approx(0.1 + 0.27, rel=tol)
    assert b.item() == pytest.approx(0.3 + 0.089, rel=tol)


def _tiny(seed):
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(4, 16, rng=rng), nn.Tanh(), nn.Linear(16, 3, rng=rng))
    x = rng.standard_normal((32, 4)).astype(np.float32)
    y = np.argmax(x[:, :3] + 0.5 * x[:, 3:], axis=1)       # a learnable labelling
    return model, x, y


def test_small_model_learns_and_is_reproducible():
    losses = []
    for _ in range(2):
        model, x, y = _tiny(0)
        opt = optim.Adam(model.parameters(), lr=0.05)
        run = []
        for _ in range(150):
            opt.zero_grad()
            loss = dn.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    assert losses[0] == losses[1]                          # same seed, same numbers
    assert losses[0][-1] < 0.2 * losses[0][0]
    acc = (np.argmax(model(x).data, axis=1) == y).mean()
    assert acc > 0.9


def test_training_does_not_grow_memory():
    """1,000 steps of Linear+tanh+Linear with cross_entropy: the memory traced
    between step 100 and step 1000 stays flat, so each step's graph is freed."""
    model, x, y = _tiny(1)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = dn.cross_entropy(model(x), y)
        loss.backward()
        optim.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return loss.item()

    step()                                  # compile/caches before tracing
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(100):
            step()
        gc.collect()
        at_100 = tracemalloc.get_traced_memory()[0]
        for _ in range(900):
            step()
        gc.collect()
        at_1000 = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert at_1000 - at_100 < 200_000, f"memory grew by {at_1000 - at_100} bytes over 900 steps"


def test_leaked_graph_would_be_detected():
    """The bound above is meaningful: keeping each step's loss (and so its
    graph, since it is not backpropagated) grows memory well past it."""
    model, x, y = _tiny(2)
    kept = []
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100):
            kept.append(dn.cross_entropy(model(x), y))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown > 200_000
