"""Incremental compilation: a session that reuses what the passes and the
lowering found for earlier plans (``Session(incremental=True)``, the
default) builds exactly the plans a compile from scratch builds, pass by
pass and instruction by instruction, on random sequences of added ops and
fetches (ops that fold, ops CSE merges with existing nodes, gradients and
variable updates added after a run, fed shapes that change)."""
from __future__ import annotations

import numpy as np
import pytest

import dynnets.static as ds
from dynnets.autograd.primitives import Aval
from dynnets.static import passes
from dynnets.static.graph import constant_p

_UNARY = [ds.tanh, ds.exp, ds.neg, ds.abs, lambda a: a * 2.0, lambda a: a + 1.0, lambda a: ds.square(a) * 0.5]
_BINARY = [ds.add, ds.subtract, ds.multiply, ds.maximum]


class _Sequence:
    """A graph grown step by step: new ops, repeats of ops it has (which CSE
    merges), ops on constants only (which fold), gradients, variable updates."""

    def __init__(self, seed):
        self.rng = rng = np.random.default_rng(seed)
        self.g = g = ds.Graph()
        with g.as_default():
            self.x = ds.placeholder((None, 3), np.float64, name="x")
            self.y = ds.placeholder((None, 3), np.float64, name="y")
            self.w = ds.Variable(rng.standard_normal(3), name="w")
            self.v = ds.Variable(rng.standard_normal(3), name="v")
            c = ds.constant(rng.standard_normal(3))
            k = ds.constant(np.float64(0.5))
            self.consts = [c, k]
            self.pool = [self.x, self.y, self.w, self.v, c, k]
            self.init = ds.global_variables_initializer()
        self.recipes = []         # (fn, args, value) of the ops made, to repeat them
        self.pairs = []           # (value, its repeat)
        self.effects = []

    def pick(self):
        return self.pool[self.rng.integers(len(self.pool))]

    def grow(self):
        rng = self.rng
        r = rng.random()
        with self.g.as_default():
            if r < 0.3:
                fn, args = _UNARY[rng.integers(len(_UNARY))], (self.pick(),)
            elif r < 0.55:
                fn, args = _BINARY[rng.integers(len(_BINARY))], (self.pick(), self.pick())
            elif r < 0.65 and self.recipes:
                fn, args, orig = self.recipes[rng.integers(len(self.recipes))]       # a duplicate, for CSE
                with self.g.as_default():
                    dup = fn(*args)
                self.pool.append(dup)
                self.pairs.append((orig, dup))
                return
            elif r < 0.75:
                a, b = self.consts[rng.integers(len(self.consts))], self.consts[rng.integers(len(self.consts))]
                fn, args = _BINARY[rng.integers(len(_BINARY))], (ds.tanh(a), b)    # folds
            elif r < 0.85:
                target = self.pick()
                loss = ds.reduce_sum(target * target)
                grads = [d for d in ds.gradients(loss, [self.w, self.x]) if d is not None]
                self.pool.extend(grads)
                return
            elif r < 0.92:
                src = self.pick()
                upd = ds.reduce_sum(src, axis=0) if len(src.shape) == 2 else src
                self.effects.append((self.v if rng.random() < 0.5 else self.w).assign_add(upd * 0.01))
                return
            else:
                fn, args = (lambda: ds.random_normal((3,), dtype=np.float64, seed=int(rng.integers(100)))), ()
            out = fn(*args)
            self.pool.append(out)
            self.recipes.append((fn, args, out))

    def fetches(self):
        k = int(self.rng.integers(1, 4))
        f = [self.pool[int(i)] for i in self.rng.choice(len(self.pool), size=min(k, len(self.pool)), replace=False)]
        if self.pairs and self.rng.random() < 0.3:
            f.extend(self.pairs[int(self.rng.integers(len(self.pairs)))])
        if self.effects and self.rng.random() < 0.3:
            f.append(self.effects[int(self.rng.integers(len(self.effects)))])
        return f


def _same_value(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, np.random.Generator):
        return isinstance(b, np.random.Generator)      # each session has its own generators
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return a is b or a == b


def _same_eqn(a, b):
    return (a.prim is b.prim and a.ins == b.ins and a.outs == b.outs and a.name == b.name and a.site == b.site
            and a.buf == b.buf and _same_value(a.attrs, b.attrs))


def _assert_same_graph(a, b, what):
    assert len(a.eqns) == len(b.eqns), what
    for x, y in zip(a.eqns, b.eqns):
        assert _same_eqn(x, y), f"{what}: {x} vs {y}"
    assert tuple(a.outputs) == tuple(b.outputs), what
    for e in a.eqns:
        for o in e.outs:
            assert tuple(a.avals[o].shape) == tuple(b.avals[o].shape), what
            assert a.avals[o].dtype == b.avals[o].dtype, what
    assert a.meta.keys() == b.meta.keys() and _same_value(a.meta, b.meta), what


def _assert_same_plan(a, b):
    assert a.arg_slots == b.arg_slots and a.n_slots == b.n_slots and a.slot_of == b.slot_of
    assert a.ret == b.ret and a.releases == b.releases
    assert a.consts.keys() == b.consts.keys()
    for k in a.consts:
        assert _same_value(a.consts[k], b.consts[k])
    assert len(a.instrs) == len(b.instrs)
    for i, j in zip(a.instrs, b.instrs):
        assert (i.kind, i.outs, i.args) == (j.kind, j.outs, j.args)
        assert i.fn is j.fn or i.fn == j.fn
        assert _same_value(i.kw, j.kw)
        assert (i.eqn is None) == (j.eqn is None) and (i.eqn is None or _same_eqn(i.eqn, j.eqn))
        if i.kind == "call" and isinstance(i.extra, np.ndarray):
            assert i.extra.shape == j.extra.shape and i.extra.dtype == j.extra.dtype
        else:
            assert _same_value(i.extra, j.extra)
    assert [v.index for v in a.variables] == [v.index for v in b.variables]


@pytest.mark.parametrize("seed", range(12))
def test_incremental_plans_equal_plans_from_scratch(seed):
    s = _Sequence(seed)
    inc = ds.Session(s.g)
    ref = ds.Session(s.g, incremental=False)
    for sess in (inc, ref):
        sess.run(s.init)
    batch = 4
    for step in range(30):
        for _ in range(int(s.rng.integers(1, 4))):
            s.grow()
        if s.rng.random() < 0.15:
            batch = int(s.rng.integers(2, 6))          # other fed shapes: another compile context
        feeds = {s.x: s.rng.standard_normal((batch, 3)), s.y: s.rng.standard_normal((batch, 3))}
        fetch = s.fetches()
        got = inc.run(fetch, feeds)
        want = ref.run(fetch, feeds)
        _assert_same_plan(inc._plan_list[-1], ref._plan_list[-1])
        for a, b in zip(got, want):
            if b is None:
                assert a is None
            else:
                np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(inc.variable_value(s.w), ref.variable_value(s.w))
        np.testing.assert_array_equal(inc.variable_value(s.v), ref.variable_value(s.v))
    assert len(inc._plan_list) == len(ref._plan_list)


@pytest.mark.parametrize("seed", range(12))
def test_every_pass_with_a_cache_equals_the_pass_from_scratch(seed):
    """optimize with a PassCache reused over a sequence of programs gives,
    after every pass, the graph optimize gives from scratch."""
    s = _Sequence(100 + seed)
    caches = {}
    n_folded = n_merged = 0
    for step in range(30):
        for _ in range(int(s.rng.integers(1, 4))):
            s.grow()
        batch = int(s.rng.integers(3, 5))
        ia = {s.x.id: Aval((batch, 3), np.dtype(np.float64)), s.y.id: Aval((batch, 3), np.dtype(np.float64))}
        cache = caches.setdefault(batch, passes.PassCache(batch))
        prog = passes.prune(s.g.with_outputs(s.fetches()))
        with_cache, scratch = [], []
        a = passes.optimize(prog, ia, stages=with_cache, cache=cache, memory_min_size=1, fuse_min_size=None)
        ref_timings = {}
        b = passes.optimize(prog, ia, stages=scratch, memory_min_size=1, fuse_min_size=None, timings=ref_timings)
        assert [n for n, _ in with_cache] == [n for n, _ in scratch]
        for (name, x), (_, y) in zip(with_cache, scratch):
            _assert_same_graph(x, y, f"step {step}, pass {name}")
        _assert_same_graph(a, b, f"step {step}")
        # the session's pipeline (straight calls, no stages), with this cache and from scratch
        timings = {}
        fast = passes.optimize(prog, ia, cache=cache, memory_min_size=1, fuse_min_size=None, timings=timings)
        _assert_same_graph(fast, b, f"step {step}, straight calls with the cache")
        _assert_same_graph(passes.optimize(prog, ia, memory_min_size=1, fuse_min_size=None), b,
                           f"step {step}, straight calls")
        assert set(timings) == set(ref_timings)
        st = dict(scratch)
        n_folded += sum(e.prim is constant_p for e in st["fold_constants"].eqns) - sum(
            e.prim is constant_p for e in st["infer_shapes"].eqns)
        n_merged += len(st["fold_constants"].eqns) - len(st["cse"].eqns)
    # the sequences do exercise folding and merging
    assert n_folded > 0 and n_merged > 0


def test_cse_representative_is_the_first_of_the_program():
    """A node equal to one an earlier plan computed, fetched without it, is
    computed as itself (a cache of merged nodes across programs would
    compute the earlier one instead: the same value, another op)."""
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((3,), name="x")
        a = ds.tanh(x) * 2.0
        b = ds.tanh(x) * 2.0
    sess = ds.Session(g)
    fd = {x: np.ones(3, np.float32)}
    sess.run(a, fd)
    sess.run(b, fd)
    names = [i.eqn.name for i in sess._plan_list[-1].instrs]
    assert names == [e.name for e in g.eqns if e.outs[0] in (b.id, b.id - 1)]
    sess.run([a, b], fd)
    plan = sess._plan_list[-1]
    assert len([i for i in plan.instrs if i.kind == "call"]) == 2     # tanh and mul, once


def test_new_plan_lowers_only_new_equations():
    """What an earlier plan lowered is reused: a new fetch on top of it
    lowers (and infers shapes for) its new equations only."""
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None,), name="x")
        h = ds.tanh(x * 3.0) + 1.0
    sess = ds.Session(g)
    fd = {x: np.ones(4, np.float32)}
    sess.run(h, fd)
    cache, = sess._caches.values()
    assert not cache.memos                 # the first plan of a context compiles from scratch
    sess.run([h], fd)
    lowered = dict(cache.memo("lower"))
    shapes = dict(cache.memo("infer_shapes")["done"])
    with g.as_default():
        z = h * 5.0
    sess.run(z, fd)
    new_lowered = {o for o, r in cache.memo("lower").items() if lowered.get(o) is not r}
    assert new_lowered == {z.id}
    assert set(cache.memo("infer_shapes")["done"]) - set(shapes) == {z.id, z.id - 1}     # z and its constant 5.0
    np.testing.assert_allclose(sess.run(z, fd), (np.tanh(3.0) + 1.0) * 5.0, rtol=1e-6)


def test_shape_rule_results_are_reused_by_signature(monkeypatch):
    """A new equation with the primitive, input avals and attributes of one
    inferred before takes that result without running its rule; one that
    differs in any of them (an attribute's value, an input's fed shape) runs it."""
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None, 3), np.float64, name="x")
        a = ds.reduce_sum(ds.tanh(x) * 2.0, axis=1)
    sess = ds.Session(g)
    fd = {x: np.ones((4, 3))}
    sess.run(a, fd)
    sess.run([a], fd)          # the context's second plan: the first one with a cache
    calls = []
    real = passes.P.run_rule
    monkeypatch.setattr(passes.P, "run_rule", lambda p, avals, attrs: calls.append(p.name) or real(p, avals, attrs))
    with g.as_default():
        b = ds.reduce_sum(ds.tanh(x) * 2.0, axis=1)
        c = ds.reduce_sum(ds.tanh(x) * 2.0, axis=0)
    np.testing.assert_array_equal(sess.run(b, fd), np.full(4, 6 * np.tanh(1.0)))
    assert calls == []
    np.testing.assert_array_equal(sess.run(c, fd), np.full(3, 8 * np.tanh(1.0)))
    assert len(calls) == 1         # the sum over another axis
    assert sess.run(c, {x: np.ones((2, 3))}).shape == (3,)
    assert len(calls) == 4         # another fed shape: tanh, mul and the sum run their rules


@pytest.mark.parametrize("seed", range(4))
def test_plans_lowered_from_a_checkpoint_equal_plans_from_scratch(seed):
    """Programs that grow on top of one base (the lowering resumes from its
    state after the shared prefix) equal plans from scratch, also when a
    fetch lies inside the prefix, a feed is cast or an effect follows."""
    rng = np.random.default_rng(seed)
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None,), name="x")
        y = ds.placeholder((None,), name="y")
        w = ds.Variable(np.float32(0.5), name="w")
        h = ds.tanh(w * x + 1.0) - y
        loss = ds.reduce_mean(ds.square(h))
        train = ds.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = ds.global_variables_initializer()
    inc = ds.Session(g)
    ref = ds.Session(g, incremental=False)
    for sess in (inc, ref):
        sess.run(init)
    makers = [lambda: loss * 2.0, lambda: ds.exp(loss) + h, lambda: ds.square(w) + loss, lambda: [h, loss / 3.0],
              lambda: ds.reduce_sum(ds.exp(h) - 1.0), lambda: w.assign_add(loss * 0.01),
              lambda: [loss * 2.0, ds.reshape(w, (1,))]]
    fetched = []
    for step in range(24):
        with g.as_default():
            z = makers[int(rng.integers(len(makers)))]()
        fetched.append(z)
        fetch = fetched[int(rng.integers(len(fetched)))] if rng.random() < 0.2 else z
        dt = np.float64 if rng.random() < 0.3 else np.float32
        feeds = {x: np.arange(4, dtype=dt), y: np.ones(4, np.float32)}
        got = inc.run(fetch, feeds)
        want = ref.run(fetch, feeds)
        _assert_same_plan(inc._plan_list[-1], ref._plan_list[-1])
        for a, b in zip(got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(inc.variable_value(w), ref.variable_value(w))
    kept = [c for cache in inc._caches.values() for c in cache.memo("lower_checkpoints").get("kept", ())]
    assert kept and all(c.m >= 4 for c in kept)
