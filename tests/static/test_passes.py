"""Each compiler pass on its own (Graph -> Graph, input untouched), and
random graphs: optimised execution equals unoptimised execution."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets.static as ds
from dynnets.autograd import primitives as P
from dynnets.static import passes
from dynnets.static.graph import placeholder_p


def _prog(g, outs):
    return passes.prune(g.with_outputs(outs))


def _run(prog, feeds, storage=None):
    return passes.evaluate(prog, feeds, storage)


def _prims(g):
    return [e.prim.name for e in g.eqns]


def test_prune_keeps_only_what_outputs_need():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((3,), name="a")
        b = ds.placeholder((3,), name="b")
        used = ds.exp(a) + 1.0
        ds.tanh(b) * 2.0                         # unrelated branch
        v = ds.Variable(np.ones(3, np.float32))
        v.assign(a)                              # an effect nobody fetches
    n = len(g.eqns)
    p = _prog(g, [used])
    assert len(g.eqns) == n                       # input untouched
    assert _prims(p) == ["placeholder", "exp", "constant", "add"]
    assert [e.prim is placeholder_p for e in p.eqns].count(True) == 1
    with pytest.raises(ValueError, match="not produced"):
        passes.prune(g.with_outputs([10 ** 6]))


def test_infer_shapes_refines_unknown_dims_and_validates():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((None, 3), name="a")
        w = ds.constant(np.ones((3, 2), np.float32))
        y = ds.reduce_sum(ds.matmul(a, w), axis=1)
    p = _prog(g, [y])
    assert y.shape == (None,)
    p2 = passes.infer_shapes(p, {a.id: P.Aval((5, 3), np.dtype(np.float32))})
    assert p2.avals[y.id].shape == (5,)
    assert g.avals[y.id].shape == (None,)          # the user's graph is unchanged
    assert passes.infer_shapes(p, {a.id: P.Aval((None, 3), np.dtype(np.float32))}) is p
    with pytest.raises(P.ShapeError, match="matmul.*op 'matmul'"):
        passes.infer_shapes(p, {a.id: P.Aval((5, 4), np.dtype(np.float32))})


def test_fold_constants():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((3,), name="a")
        c = ds.exp(ds.constant([0.0, 1.0, 2.0])) * 2.0       # all constant
        y = a + c
        big = ds.reduce_sum(ds.constant(np.ones(100, np.float32)) * 3.0)
    p = _prog(g, [y, big])
    f = passes.fold_constants(p)
    names = _prims(f)
    assert "exp" not in names and "mul" not in names and "add" in names
    assert names.count("constant") >= 2
    feeds = {a: np.arange(3, dtype=np.float32)}
    for want, got in zip(_run(p, feeds), _run(f, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # results above max_size stay computed
    f2 = passes.fold_constants(p, max_size=10)
    assert "mul" in _prims(f2) or "sum" in _prims(f2)
    assert passes.fold_constants(_prog(g, [a])) is not None


def test_cse_merges_equal_expressions_only():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((4,), name="a")
        x1 = ds.tanh(a) * 3.0
        x2 = ds.tanh(a) * 3.0                  # same as x1
        x3 = ds.tanh(a) * 3                    # Python int 3: another constant, not merged with 3.0
        s1 = ds.reduce_sum(a, axis=0)
        s2 = ds.reduce_sum(a, axis=0, keepdims=True)       # other attrs
        out = [x1, x2, x3, s1, s2]
    p = _prog(g, out)
    c = passes.cse(p)
    assert _prims(c).count("tanh") == 1
    assert _prims(c).count("mul") == 2
    assert _prims(c).count("sum") == 2
    assert c.outputs[0] == c.outputs[1] and c.outputs[2] != c.outputs[0]
    feeds = {a: np.linspace(-1, 1, 4).astype(np.float32)}
    for want, got in zip(_run(p, feeds), _run(c, feeds)):
        np.testing.assert_array_equal(got, want)
    assert passes.cse(c) is c


def test_cse_never_merges_effects_or_placeholders():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((2,), name="a")
        b = ds.placeholder((2,), name="b")
        v = ds.Variable(np.zeros(2, np.float32))
        u1 = v.assign_add(a)
        u2 = v.assign_add(a)
    c = passes.cse(_prog(g, [u1, u2, a, b]))
    assert _prims(c).count("assign") == 2 and _prims(c).count("placeholder") == 2


def test_eliminate_dead_code():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((2,), name="a")
        y = ds.exp(a) + ds.exp(a)
        z = ds.exp(ds.constant(2.0)) + a
    c = passes.cse(_prog(g, [y]))
    assert passes.eliminate_dead_code(c) is c          # nothing dead: returns its input
    folded = passes.fold_constants(_prog(g, [z]))
    # folding exp(2.0) leaves the constant 2.0 unused
    dce = passes.eliminate_dead_code(folded)
    assert len(dce.eqns) == len(folded.eqns) - 1
    assert "exp" not in _prims(dce)
    feeds = {a: np.array([1.0, 2.0], np.float32)}
    np.testing.assert_allclose(_run(dce, feeds)[0], np.exp(2.0) + feeds[a], rtol=1e-6)


def test_schedule_puts_effects_last():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((2,), name="a")
        v = ds.Variable(np.ones(2, np.float32), name="v")
        upd = v.assign(a)
        late = ds.reduce_sum(v * 2.0)
        after = upd * 10.0                     # depends on the effect
    p = _prog(g, [upd, late, after])
    s = passes.schedule(p)
    order = _prims(s)
    assert order.index("assign") > order.index("sum")
    assert order.index("assign") < len(order) - 1 and order[-1] == "mul"
    storage = {v.index: np.ones(2, np.float32)}
    u, l_, af = _run(s, {a: np.array([5.0, 6.0], np.float32)}, storage)
    assert l_ == 4.0                            # read before the update
    np.testing.assert_array_equal(af, [50, 60])


def _chain_graph(n, dtype=np.float64):
    g = ds.Graph()
    with g.as_default():
        m = ds.placeholder((n, 1), dtype, name="m")
        h = ds.placeholder((n, 7), dtype, name="h")
        hp = ds.placeholder((n, 7), dtype, name="hp")
        y = m * h + (1.0 - m) * hp              # the masked-state update of the padded LSTM
        z = ds.exp(y) * 2.0                     # exp is not fused (numpy's SIMD exp is faster)
    return g, (m, h, hp), y, z


def test_fuse_elementwise_chain_with_broadcasting():
    g, (m, h, hp), y, z = _chain_graph(600)
    p = _prog(g, [y, z])
    f = passes.fuse_elementwise(p, min_size=1024)
    names = _prims(f)
    assert names.count("fused") == 1, names
    assert "exp" in names and names.count("mul") == 1
    fused = next(e for e in f.eqns if e.prim.name == "fused")
    assert "a0[i0, 0]" in fused.prim.kernel_source or "a1[i0, 0]" in fused.prim.kernel_source or "[i0, 0]" in fused.prim.kernel_source
    rng = np.random.default_rng(0)
    feeds = {m: (rng.random((600, 1)) > 0.5).astype(np.float64), h: rng.standard_normal((600, 7)),
             hp: rng.standard_normal((600, 7))}
    for want, got in zip(_run(p, feeds), _run(f, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    # below the size threshold nothing is fused
    assert passes.fuse_elementwise(p, min_size=10 ** 6) is p


def test_fusion_cache_reuses_kernels():
    before = dict(passes.KERNEL_STATS)
    for _ in range(2):
        g, _, y, z = _chain_graph(300)
        passes.fuse_elementwise(_prog(g, [y]), min_size=1)
    assert passes.KERNEL_STATS["reused"] >= before["reused"] + 1


def test_fusion_skips_values_used_twice_and_outputs():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((64, 64), np.float64, name="a")
        t = a * 2.0
        u = t + 1.0
        v = t - 1.0                              # t is used twice: it must be materialised
        w = u * v
    p = _prog(g, [w, t])
    f = passes.fuse_elementwise(p, min_size=1)
    fused = [e for e in f.eqns if e.prim.name == "fused"]
    assert len(fused) == 1 and t.id in fused[0].ins
    feeds = {a: np.random.default_rng(1).standard_normal((64, 64))}
    for want, got in zip(_run(p, feeds), _run(f, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_plan_memory_reuses_buffers():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((100, 100), np.float64, name="a")
        x = a
        for k in range(6):
            x = ds.tanh(x * 0.5) - 0.5
        y = ds.reduce_sum(x)
    p = passes.schedule(_prog(g, [y, x]))
    mp = passes.plan_memory(p, min_size=1000)
    bufs = [e.buf for e in mp.eqns if e.buf is not None]
    assert len(bufs) >= 10                              # every elementwise result but the output
    assert len(mp.meta["buffers"]) <= 2                 # a chain needs at most two slots (in place: one)
    assert next(e for e in mp.eqns if x.id in e.outs).buf is None      # fetched: no buffer
    feeds = {a: np.random.default_rng(2).standard_normal((100, 100))}
    ref = _run(p, feeds)
    with ds.Session(g, memory_min_size=1000) as sess:
        for _ in range(3):
            got = sess.run([y, x], feeds)
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
            np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
        first = sess.run(x, feeds)
        second = sess.run(x, {a: feeds[a] * 0})
        assert not np.allclose(first, second)           # the earlier result was not overwritten
        assert sess.stats[0]["buffers"] >= 1


def test_plan_memory_keeps_aliased_buffers_alive():
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((50, 100), np.float64, name="a")
        t = ds.exp(a)                        # buffered
        view = ds.reshape(t, (100, 50))      # a view of t's buffer
        u = ds.tanh(a) * 3.0                 # would reuse t's buffer if the view were ignored
        out = ds.reduce_sum(view) + ds.reduce_sum(u)
    p = passes.schedule(_prog(g, [out, view]))
    mp = passes.plan_memory(p, min_size=100)
    feeds = {a: np.random.default_rng(3).standard_normal((50, 100))}
    np.testing.assert_allclose(_run(mp, feeds)[0], _run(p, feeds)[0], rtol=1e-12)
    assert view.id in mp.meta["copy_outputs"]
    with ds.Session(g, memory_min_size=100) as sess:
        for _ in range(3):
            o, v = sess.run([out, view], feeds)
        np.testing.assert_allclose(o, _run(p, feeds)[0], rtol=1e-12)
        np.testing.assert_allclose(v, np.exp(feeds[a]).reshape(100, 50), rtol=1e-12)


# --------------------------------------------------------------------------
# random graphs: every pass preserves results
# --------------------------------------------------------------------------

_UNARY = [ds.exp, ds.tanh, ds.sigmoid, ds.relu, ds.abs, ds.neg,
          lambda x: ds.sqrt(ds.abs(x) + 1.0), lambda x: ds.log(ds.abs(x) + 1.0)]
_BINARY = [ds.add, ds.subtract, ds.multiply, lambda x, y: x / (ds.abs(y) + 1.0), ds.maximum, ds.minimum]


def _random_graph(rng, n_ops, shape):
    g = ds.Graph()
    with g.as_default():
        phs = [ds.placeholder(shape, np.float64, name=f"p{k}") for k in range(3)]
        row = ds.placeholder(shape[1:], np.float64, name="row")
        pool = list(phs) + [row, ds.constant(rng.standard_normal(shape)), ds.constant(0.5)]
        for _ in range(n_ops):
            r = rng.random()
            a = pool[rng.integers(len(pool))]
            if r < 0.35:
                v = _UNARY[rng.integers(len(_UNARY))](a)
            elif r < 0.8:
                b = pool[rng.integers(len(pool))]
                v = _BINARY[rng.integers(len(_BINARY))](a, b)
            elif r < 0.9:
                # a repeated subexpression, for CSE
                v = ds.tanh(a) * 2.0
            elif len(a.shape) == 2:
                v = ds.reduce_sum(a, axis=1, keepdims=True) * 0.1 + a
            else:
                v = a * 1.0
            pool.append(v)
        outs = [pool[-1], pool[-2], ds.reduce_sum(pool[-3])]
    feeds = {p: rng.standard_normal(shape) for p in phs}
    feeds[row] = rng.standard_normal(shape[1:])
    return g, outs, feeds


@pytest.mark.parametrize("seed", range(30))
def test_random_graphs_optimised_equals_unoptimised(seed):
    rng = np.random.default_rng(seed)
    g, outs, feeds = _random_graph(rng, 25, (8, 5))
    ref = passes.evaluate(passes.prune(g.with_outputs(outs)), feeds)
    prog = passes.prune(g.with_outputs(outs))
    # every pass alone, then the whole pipeline
    for name, fn in [("fold_constants", passes.fold_constants), ("cse", passes.cse),
                     ("eliminate_dead_code", passes.eliminate_dead_code), ("schedule", passes.schedule),
                     ("plan_memory", lambda x: passes.plan_memory(passes.schedule(x), min_size=1))]:
        got = passes.evaluate(fn(prog), feeds)
        for w, o in zip(ref, got):
            np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-12, err_msg=name)
    with ds.Session(g, fuse_min_size=None, memory_min_size=1) as sess:
        for _ in range(3):
            got = sess.run(outs, feeds)
            for w, o in zip(ref, got):
                np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_random_graphs_with_fusion(seed):
    rng = np.random.default_rng(100 + seed)
    g, outs, feeds = _random_graph(rng, 20, (40, 60))
    ref = passes.evaluate(passes.prune(g.with_outputs(outs)), feeds)
    with ds.Session(g, fuse_min_size=1, memory_min_size=1) as sess:
        for _ in range(3):
            got = sess.run(outs, feeds)
            for w, o in zip(ref, got):
                np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-12)


def test_gradient_sums_are_not_merged_by_cse():
    """Two gradient sums with equal terms must stay two arrays: each is added
    into in place by its own accumulation chain."""
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((3,), np.float64, name="x")
        y1, y2 = ds.tanh(x), ds.tanh(x)                 # equal after CSE
        l1 = ds.reduce_sum(y1 * 2.0) + ds.reduce_sum(y1 * 3.0) + ds.reduce_sum(y1 * 5.0)
        l2 = ds.reduce_sum(y2 * 2.0) + ds.reduce_sum(y2 * 3.0)
        g1, = ds.gradients(l1, [y1])
        g2, = ds.gradients(l2, [y2])
    feeds = {x: np.array([0.1, 0.2, 0.3])}
    with ds.Session(g) as sess:
        for _ in range(3):
            a, b = sess.run([g1, g2], feeds)
            np.testing.assert_allclose(a, 10.0)
            np.testing.assert_allclose(b, 5.0)


def test_fusion_compiles_in_memory_without_the_disk_cache(monkeypatch):
    # DYNNETS_NO_DISK_CACHE=1 compiles the generated source in memory, in its own namespace
    monkeypatch.setenv("DYNNETS_NO_DISK_CACHE", "1")
    g = ds.Graph()
    with g.as_default():
        a = ds.placeholder((47, 3), np.float64, name="a")
        y = ((a - 0.125) * 7.0 + 0.5) / 3.0          # a chain no other test fuses: a new kernel source
    f = passes.fuse_elementwise(_prog(g, [y]), min_size=1)
    assert any(e.prim.name == "fused" for e in f.eqns)
    x = np.random.default_rng(5).standard_normal((47, 3))
    np.testing.assert_allclose(_run(f, {a: x})[0], ((x - 0.125) * 7.0 + 0.5) / 3.0, rtol=1e-15)
