"""Modes are per thread, as torch's grad mode and TF1's default graph stack:
``no_grad()``, ``autobatch()``, ``detect_anomaly()``, a trace's captured
Parameters and the static default graph/session of one thread leave every
other thread's ops as they were.

Each test runs two threads interleaved deterministically: thread A enters a
mode and waits; thread B runs its ops while A is inside; then A goes on.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as tf
from dynnets.autograd import engine, ops
from dynnets.static import trace

TIMEOUT = 30


def _interleaved(inside, meanwhile):
    """Run ``inside(ready, go)`` in thread A and ``meanwhile()`` in thread B
    once A set ``ready``; A continues after B finished (``go``). Returns
    (A's result, B's result); an exception in either is re-raised here."""
    ready, go = threading.Event(), threading.Event()
    res, errs = {}, []

    def run_a():
        try:
            res["a"] = inside(ready, go)
        except BaseException as exc:          # re-raised in the test's thread
            errs.append(exc)
            ready.set()

    def run_b():
        try:
            assert ready.wait(TIMEOUT)
            if not errs:
                res["b"] = meanwhile()
        except BaseException as exc:
            errs.append(exc)
        finally:
            go.set()

    ts = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    if errs:
        raise errs[0]
    return res["a"], res["b"]


def _wait_inside(ready, go):
    ready.set()
    assert go.wait(TIMEOUT)


def test_no_grad_in_one_thread_leaves_the_other_recording():
    x = dn.tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)

    def inside(ready, go):
        with dn.no_grad():
            _wait_inside(ready, go)
            y = x * 2
            return y.requires_grad, dn.is_grad_enabled()

    def meanwhile():
        y = x * 3
        y.sum().backward()
        return y.requires_grad, y.grad_fn is not None, dn.is_grad_enabled()

    a, b = _interleaved(inside, meanwhile)
    assert a == (False, False)
    assert b == (True, True, True)
    np.testing.assert_array_equal(x.grad.data, [3.0, 3.0])


def test_a_new_thread_starts_with_grad_on_and_no_modes():
    out = {}

    def probe():
        s = engine.STATE
        out["modes"] = (dn.is_grad_enabled(), engine.is_anomaly_enabled(), s.stack, engine.current_interpreter(),
                        s.path, dn.is_inference_mode_enabled())

    with dn.no_grad(), dn.detect_anomaly(), dn.autobatch():
        t = threading.Thread(target=probe)
        t.start()
        t.join(TIMEOUT)
    assert out["modes"] == (True, False, (), None, 0, False)


def test_set_grad_enabled_in_one_thread_only():
    x = dn.tensor([1.0], dtype=np.float64, requires_grad=True)

    def inside(ready, go):
        dn.set_grad_enabled(False)            # the function form: set until set again
        try:
            _wait_inside(ready, go)
            return (x * 2).requires_grad
        finally:
            dn.set_grad_enabled(True)

    a, b = _interleaved(inside, lambda: (x * 2).requires_grad)
    assert a is False and b is True


def test_autobatch_in_one_thread_leaves_the_other_eager():
    w = dn.Parameter(np.array([[1.0, 2.0], [3.0, 4.0]]))
    x = dn.tensor([[1.0, 1.0]], dtype=np.float64)

    def inside(ready, go):
        with dn.autobatch() as ab:
            y = x @ w
            _wait_inside(ready, go)
            z = x @ w
            lazy = (type(y), type(z))
        return lazy, y.numpy().copy(), z.numpy().copy(), ab.stats["nodes"]

    def meanwhile():
        y = x @ w
        y.sum().backward()
        return type(y), y.numpy().copy()

    (lazy, ya, za, nodes), (tb, yb) = _interleaved(inside, meanwhile)
    assert lazy == (dn.LazyTensor, dn.LazyTensor) and nodes == 2
    assert tb is dn.Tensor
    for v in (ya, za, yb):
        np.testing.assert_array_equal(v, [[4.0, 6.0]])
    np.testing.assert_array_equal(w.grad.data, [[1.0, 1.0], [1.0, 1.0]])


def test_detect_anomaly_in_one_thread_only():
    x = dn.tensor([0.0, 1.0], dtype=np.float64)

    def inside(ready, go):
        with dn.detect_anomaly():
            _wait_inside(ready, go)
            with pytest.raises(dn.AnomalyError, match="op 'log'"), np.errstate(divide="ignore"):
                ops.log(x)
            return engine.is_anomaly_enabled()

    def meanwhile():
        with np.errstate(divide="ignore"):
            return ops.log(x).numpy().copy(), engine.is_anomaly_enabled()

    a, (yb, anomaly_b) = _interleaved(inside, meanwhile)
    assert a is True and anomaly_b is False
    assert yb[0] == -np.inf and yb[1] == 0.0


def test_a_trace_in_one_thread_leaves_eager_ops_on_its_parameters_in_the_other():
    rng = np.random.default_rng(0)
    w = dn.Parameter(rng.standard_normal((3, 2)))
    b = dn.Parameter(rng.standard_normal(2))
    x = rng.standard_normal((1, 3))
    want = np.tanh(x @ w.data + b.data)

    def inside(ready, go):
        def f(xs):
            h = ops.tanh(xs @ w + b)          # traced: w and b are captured now
            _wait_inside(ready, go)           # thread B runs while the trace is open
            return h.sum()

        step = trace(f, grads_of=[w, b])
        loss, grads = step(x)
        return float(loss.data), grads

    def meanwhile():
        y = ops.tanh(dn.tensor(x, dtype=np.float64) @ w + b)
        y.sum().backward()
        return type(y), y.numpy().copy()

    (loss, grads), (tb, yb) = _interleaved(inside, meanwhile)
    assert tb is dn.Tensor
    np.testing.assert_allclose(yb, want, rtol=1e-12)
    gb = 1 - want[0] ** 2
    # the compiled plan's fused kernels round differently from numpy: ~1e-8
    assert loss == pytest.approx(want.sum(), rel=1e-6)
    np.testing.assert_allclose(grads[1], gb, rtol=1e-6)
    np.testing.assert_allclose(b.grad.data, gb, rtol=1e-12)          # B's eager backward
    np.testing.assert_allclose(w.grad.data, np.outer(x[0], gb), rtol=1e-12)


def test_default_graph_and_session_are_per_thread():
    g = tf.Graph()

    def inside(ready, go):
        with g.as_default(), tf.Session(graph=g) as sess:
            _wait_inside(ready, go)
            return tf.get_default_graph() is g, tf.get_default_session() is sess

    def meanwhile():
        return tf.get_default_graph() is g, tf.get_default_session()

    a, b = _interleaved(inside, meanwhile)
    assert a == (True, True)
    assert b == (False, None)


# --- torch's grad-mode names ----------------------------------------------------------

def test_set_grad_enabled_as_function_context_and_decorator():
    x = dn.tensor([1.0], dtype=np.float64, requires_grad=True)
    with dn.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    dn.set_grad_enabled(False)
    try:
        assert not dn.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        dn.set_grad_enabled(True)
    assert dn.is_grad_enabled()

    @dn.set_grad_enabled(False)
    def f():
        return (x * 2).requires_grad

    assert dn.is_grad_enabled()               # decorating does not leave the mode set
    assert f() is False and dn.is_grad_enabled()
    with pytest.raises(TypeError, match="set_grad_enabled: mode must be a bool, got int"):
        dn.set_grad_enabled(1)


def test_no_grad_decorators_with_and_without_parentheses_and_on_generators():
    x = dn.tensor([1.0], dtype=np.float64, requires_grad=True)

    @dn.no_grad
    def bare():
        return (x * 2).requires_grad

    @dn.no_grad()
    def called():
        return (x * 2).requires_grad

    @dn.no_grad()
    def gen():
        for _ in range(2):
            yield (x * 2).requires_grad, dn.is_grad_enabled()

    assert bare() is False and called() is False
    it = gen()
    assert next(it) == (False, False)
    assert dn.is_grad_enabled()               # between resumptions: the caller's mode
    assert next(it) == (False, False)
    with pytest.raises(StopIteration):
        next(it)

    @dn.enable_grad()
    def on():
        return (x * 2).requires_grad

    with dn.no_grad():
        assert on() is True


def test_inference_mode():
    x = dn.tensor([1.0], dtype=np.float64, requires_grad=True)
    with dn.inference_mode():
        assert not (x * 2).requires_grad
        assert dn.is_inference_mode_enabled() and not dn.is_grad_enabled()
        with dn.inference_mode(False):        # as torch: inference off and grad on
            assert not dn.is_inference_mode_enabled() and (x * 2).requires_grad
        assert dn.is_inference_mode_enabled()
    assert not dn.is_inference_mode_enabled() and dn.is_grad_enabled()

    @dn.inference_mode
    def f():
        return (x * 2).requires_grad

    assert f() is False


def test_direct_writes_to_the_state_keep_the_fast_path_flag_right():
    """Code that sets ``engine.STATE.grad_enabled`` itself (as older code did)
    gets the same behaviour as through no_grad()."""
    x = dn.tensor([1.0], dtype=np.float64, requires_grad=True)
    engine.STATE.grad_enabled = False
    try:
        assert engine.STATE.path == 1 and not (x * 2).requires_grad and not ops.tanh(x).requires_grad
    finally:
        engine.STATE.grad_enabled = True
    assert engine.STATE.path == 0 and (x * 2).requires_grad


def test_two_threads_each_in_their_own_autobatch_context():
    """Both threads record at once (a barrier between their ops), then run:
    each context batches its own thread's ops only, with eager values and
    gradients; the collector, paused by both, is on again after both."""
    import gc

    rng = np.random.default_rng(1)
    ws = [dn.Parameter(rng.standard_normal((3, 3))) for _ in range(2)]
    xs = [rng.standard_normal((1, 3)) for _ in range(4)]
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    out = [None, None]
    errs = []

    def run(k):
        try:
            w = ws[k]
            with dn.autobatch() as ab:
                hs = []
                for x in xs:
                    hs.append(ops.tanh(dn.tensor(x, dtype=np.float64) @ w))
                    barrier.wait()            # the other thread records between two of these
                loss = dn.stack(hs).sum()
                barrier.wait()
            loss.backward()
            out[k] = (loss.item(), w.grad.numpy().copy(), ab.stats["nodes"], ab.stats["batched_calls"])
        except BaseException as exc:
            errs.append(exc)
            barrier.abort()

    assert gc.isenabled()
    ts = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    if errs:
        raise errs[0]
    assert gc.isenabled()
    X = np.concatenate(xs)
    for k in range(2):
        loss, grad, nodes, calls = out[k]
        h = np.tanh(X @ ws[k].data)
        assert loss == pytest.approx(h.sum(), rel=1e-12)
        np.testing.assert_allclose(grad, X.T @ (1 - h ** 2), rtol=1e-12)
        assert nodes == 2 * len(xs) + 2 and calls == 3        # its own ops only: matmul, tanh, sum (stack: a view)


def test_modes_are_counted_per_thread_and_a_finished_thread_is_uncounted():
    """bind reads a thread's mode only while some thread is in one
    (``len(engine._MODES)``); a thread that ends inside a mode stops counting."""
    base = len(engine._MODES)
    inside = []

    def leave_it_off():
        dn.set_grad_enabled(False)            # never set back: the thread just ends
        inside.append(len(engine._MODES))

    t = threading.Thread(target=leave_it_off)
    t.start()
    t.join(TIMEOUT)
    del t
    assert inside == [base + 1]
    assert len(engine._MODES) == base
    with dn.no_grad():
        assert len(engine._MODES) == base + 1
        with dn.detect_anomaly():              # still one thread
            assert len(engine._MODES) == base + 1 and engine.STATE.path == 2
        assert engine.STATE.path == 1
    assert len(engine._MODES) == base and engine.STATE.path == 0
