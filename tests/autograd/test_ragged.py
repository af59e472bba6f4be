"""The ragged attention primitive: kernel and BLAS-stack methods against the
numpy twin, and its value checks (torch parity: tests/parity/test_ragged_attention.py)."""
import numpy as np
import pytest

import dynnets as dn
from dynnets.autograd import kernels_ragged as KR
from dynnets.autograd import reference_ragged as RR
from dynnets.autograd.primitives import ShapeError


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("lens, heads", [([1, 4, 0, 7, 7], 2), ([12], 1), ([2, 3], 4)])
def test_kernels_match_numpy_twins(lens, heads, dtype, tol):
    rng = np.random.default_rng(len(lens) + heads)
    off = dn.ragged_offsets(lens)
    N, Ed = int(off[-1]), 4 * heads
    q, k, v, g = (rng.standard_normal((N, Ed)).astype(dtype) for _ in range(4))
    glse = rng.standard_normal((N, heads)).astype(dtype)
    out, lse = KR.ragged_attention_fwd(q, k, v, off, heads, 0.5)
    out2, lse2 = RR.ragged_attention_fwd(q, k, v, off, heads, 0.5)
    assert out.dtype == out2.dtype == dtype and lse.dtype == dtype
    np.testing.assert_allclose(out, out2, rtol=tol, atol=tol)
    np.testing.assert_allclose(lse, lse2, rtol=tol, atol=tol)
    for a, b in zip(KR.ragged_attention_bwd(q, k, v, off, heads, 0.5, out, lse, g, glse),
                    RR.ragged_attention_bwd(q, k, v, off, heads, 0.5, out2, lse2, g, glse)):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("offsets, msg", [
    ([0, 2, 3], "offsets must start at 0 and end at the number of packed rows 4, got offsets[0]=0, offsets[-1]=3"),
    ([1, 4], "offsets must start at 0"),
    ([0, 3, 2, 4], "offsets must not decrease, got offsets[1]=3 > offsets[2]=2"),
])
def test_bad_offsets_are_named(offsets, msg):
    x = dn.tensor(np.zeros((4, 2)))
    with pytest.raises(ShapeError, match="ragged_attention: " + msg.replace("[", r"\[").replace("]", r"\]")):
        dn.ragged_attention(x, x, x, np.array(offsets))


def test_pack_and_unpack_sequences_round_trip_with_gradients():
    xs = [dn.tensor(np.full((n, 2), float(n)), requires_grad=True) for n in (2, 1, 3)]
    packed, off = dn.pack_sequences(xs)
    assert packed.shape == (6, 2) and off.tolist() == [0, 2, 3, 6]
    parts = dn.unpack_sequences(packed, off)
    assert [p.shape[0] for p in parts] == [2, 1, 3] and all((p.numpy() == x.numpy()).all() for p, x in zip(parts, xs))
    (packed * 2.0).sum().backward()
    assert all((x.grad.numpy() == 2.0).all() for x in xs)
    with pytest.raises(ShapeError, match="ragged_offsets: lengths must be non-negative"):
        dn.ragged_offsets([2, -1])


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_grouped_blas_method_matches_the_twin(dtype, tol):
    from dynnets.autograd.primitives import ragged as R
    rng = np.random.default_rng(9)
    lens = [3, 0, 3, 1, 5, 3, 5]                      # repeated lengths (stacks), an empty and a single sentence
    off = dn.ragged_offsets(lens)
    N, heads = int(off[-1]), 2
    q, k, v, g = (rng.standard_normal((N, 6)).astype(dtype) for _ in range(4))
    glse = rng.standard_normal((N, heads)).astype(dtype)
    a = R._grouped_fwd(q, k, v, off, heads, 0.4)
    b = RR.ragged_attention_fwd(q, k, v, off, heads, 0.4)
    for x, y in zip(a, b):
        assert x.dtype == dtype
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)
    for x, y in zip(R._grouped_bwd(q, k, v, off, heads, 0.4, *b, g, glse),
                    RR.ragged_attention_bwd(q, k, v, off, heads, 0.4, *b, g, glse)):
        assert x.dtype == dtype
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("method", [None, "kernel", "grouped", "twin"])
def test_every_method_gives_the_same_values_and_gradients(method):
    rng = np.random.default_rng(3)
    off = dn.ragged_offsets([2, 5, 1, 5, 3])
    X = [rng.standard_normal((int(off[-1]), 8)) for _ in range(4)]
    q, k, v = (dn.tensor(a, requires_grad=True) for a in X[:3])
    y = dn.ragged_attention(q, k, v, off, num_heads=2, method=method)
    (y * dn.tensor(X[3])).sum().backward()
    out, lse = RR.ragged_attention_fwd(*X[:3], off, 2, 0.5)
    grads = RR.ragged_attention_bwd(*X[:3], off, 2, 0.5, out, lse, X[3], np.zeros_like(lse))
    np.testing.assert_allclose(y.numpy(), out, rtol=1e-12, atol=1e-13)
    for t, g in zip((q, k, v), grads):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-11, atol=1e-13)


def _ragged_case(rng, lens, E, dtype=np.float64):
    off = dn.ragged_offsets(lens)
    return off, [rng.standard_normal((int(off[-1]), E)).astype(dtype) for _ in range(4)]


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("lens", [
    [9] * 12,                                           # one length (a bucketed batch): the group is halved
    [1, 4, 0, 7, 7, 1, 12, 4, 4, 1, 30, 2, 7],          # many lengths, length-1 and empty sentences
    [5],                                                # one sentence: nothing to split
])
def test_grouped_method_on_threads_matches_the_twin(monkeypatch, lens, threads):
    from dynnets.autograd.primitives import ragged as R
    monkeypatch.setattr(R, "_SPLIT_MIN_WORK", 0)       # split even these small calls
    rng = np.random.default_rng(len(lens) + threads)
    heads = 2
    off, (q, k, v, g) = _ragged_case(rng, lens, 6)
    glse = rng.standard_normal((q.shape[0], heads))
    parts = R._balanced_parts(off, 3, threads)
    # one length: cut into `threads` runs; the 30-token sentence outweighs a third of lens[1]'s work
    assert len(parts) == {1: 1, 12: threads, 13: 2}[len(lens)]
    covered = np.concatenate([np.arange(q.shape[0])[r].reshape(-1) for p in parts for _, _, r in p])
    assert sorted(covered.tolist()) == list(range(q.shape[0]))          # every row once
    a = R._grouped_fwd(q, k, v, off, heads, 0.4, threads=threads)
    b = RR.ragged_attention_fwd(q, k, v, off, heads, 0.4)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    for x, y in zip(R._grouped_bwd(q, k, v, off, heads, 0.4, *b, g, glse, threads=threads),
                    RR.ragged_attention_bwd(q, k, v, off, heads, 0.4, *b, g, glse)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_balanced_parts_share_the_work():
    from dynnets.autograd.primitives import ragged as R
    off = dn.ragged_offsets([40] * 10 + [3] * 30)       # ten long sentences carry nearly all the work
    parts = R._balanced_parts(off, 32, 2)
    work = [sum(n * L * (L + 32) for L, n, _ in p) for p in parts]
    assert len(parts) == 2 and max(work) - min(work) <= 40 * 72                 # to within one sentence
    assert [[(L, n) for L, n, _ in p] for p in parts] == [[(3, 30), (40, 4)], [(40, 6)]]
    assert len(R._balanced_parts(dn.ragged_offsets([2, 3]), 32, 2)) == 1       # too small to hand off


def test_an_error_in_a_worker_part_reaches_the_caller(monkeypatch):
    from dynnets.autograd.primitives import ragged as R
    calls = []

    def fn(part, tag):
        calls.append(tag)
        if part == "bad":
            raise FloatingPointError("in a worker")
    with pytest.raises(FloatingPointError, match="in a worker"):
        R._run_parts(fn, ["good", "bad"], 1)
    assert calls == [1, 1]


def test_the_default_follows_set_num_threads(monkeypatch):
    """dn.ragged_attention (method None) reads the thread count the user set:
    the same values and gradients on one and on two threads."""
    import numba

    from dynnets.autograd.primitives import ragged as R
    monkeypatch.setattr(R, "_SPLIT_MIN_WORK", 0)
    seen = []
    orig = R._run_parts
    monkeypatch.setattr(R, "_run_parts", lambda fn, parts, *a: (seen.append(len(parts)), orig(fn, parts, *a))[1])
    rng = np.random.default_rng(5)
    off, X = _ragged_case(rng, [3, 1, 6, 6, 2, 9], 8)
    before = numba.get_num_threads()
    res = []
    try:
        for n in (1, 2):
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
            q, k, v = (dn.tensor(a, requires_grad=True) for a in X[:3])
            y = dn.ragged_attention(q, k, v, off, num_heads=2)
            (y * dn.tensor(X[3])).sum().backward()
            res.append([y.numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()])
    finally:
        numba.set_num_threads(before)
    want = [1, 1] + ([2, 2] if numba.config.NUMBA_NUM_THREADS > 1 else [1, 1])
    assert seen == want
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _attention_in_child(conn):
    from dynnets.autograd.primitives import ragged as R
    off = dn.ragged_offsets([30, 20, 20, 9])
    q = np.random.default_rng(0).standard_normal((int(off[-1]), 8))
    out, _ = R._grouped_fwd(q, q, q, off, 2, 0.5, threads=2)
    conn.send(float(np.abs(out - RR.ragged_attention_fwd(q, q, q, off, 2, 0.5)[0]).max()))


def test_the_thread_pool_works_in_a_forked_child(monkeypatch):
    """A child forked after the parent used the pool gets a pool of its own
    (the parent's threads do not exist in it: queued work would never run)."""
    import multiprocessing as mp

    from dynnets.autograd.primitives import ragged as R
    monkeypatch.setattr(R, "_SPLIT_MIN_WORK", 0)       # the child inherits it
    off = dn.ragged_offsets([30, 20, 20, 9])
    q = np.ones((int(off[-1]), 8))
    R._grouped_fwd(q, q, q, off, 2, 0.5, threads=2)
    assert R._POOLS
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_attention_in_child, args=(send,))
    child.start()
    try:
        assert recv.poll(60), "the forked child's attention did not finish"
        assert recv.recv() < 1e-12
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
