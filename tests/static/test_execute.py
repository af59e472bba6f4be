"""The plan executors (:mod:`dynnets.static.execute`): the interpreter a
session's plan starts on, the closures of tier 1 and the generated code of
tier 2 run the same plans to the same bits, fetch structures included, and
an error in any of them names the failing op."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import dynnets.static as ds
from dynnets.static import execute

Pair = collections.namedtuple("Pair", "a b")


def _graph():
    rng = np.random.default_rng(0)
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None, 3), np.float32, name="x")
        w = ds.Variable(rng.standard_normal((3, 2)).astype(np.float32), name="w")
        b = ds.Variable(np.zeros(2, np.float32), name="b")
        h = ds.tanh(ds.matmul(x, w) + b)
        loss = ds.reduce_mean(ds.square(h)) + ds.constant(np.float32(1.0))
        gw, gb = ds.gradients(loss, [w, b])
        parts = ds.split(h, 2, axis=1)
        init = ds.global_variables_initializer()
    feed = {x: rng.standard_normal((4, 3))}       # float64 fed to a float32 placeholder: a cast instruction
    fetches = {"loss": loss, "grads": [gw, gb], "pair": Pair(parts[0], parts[1] * 2.0), "t": (w, h)}
    return g, init, feed, fetches


def _flat(x):
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flat(x[k])]
    if isinstance(x, (list, tuple)):
        return [type(x).__name__] + [y for v in x for y in _flat(v)]
    return [np.asarray(x)]


def test_executors_agree_bit_for_bit():
    g, init, feed, fetches = _graph()
    sess = ds.Session(g, jit_after=1000)
    sess.run(init)
    first = sess.run(fetches, feed)
    plan = sess._plan_list[-1]
    assert plan.tier == 1 and plan.fn is not None
    assert any(i.kind == "cast" for i in plan.instrs) and any(i.kind == "vjp" for i in plan.instrs)
    vals = list(feed.values())
    results = []
    for build in (execute.interpret, execute.tier1, execute.tier2):
        build(plan, sess._storage)
        results.append(plan.fn(*vals))
    assert isinstance(results[0]["pair"], Pair)
    ref = _flat(first)
    for r in results:
        got = _flat(r)
        assert len(got) == len(ref)
        for a, b in zip(got, ref):
            if isinstance(a, str):
                assert a == b
            else:
                assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("build", [execute.interpret, execute.tier1, execute.tier2])
def test_executor_error_names_the_op(build):
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None,), np.float64, name="x")
        y = ds.placeholder((None,), np.float64, name="y")
        t = ds.tanh(x) * 2.0
        z = t + y                                   # the op that fails: shapes (3,) and (2,)
    sess = ds.Session(g)
    sess.run(z, {x: np.ones(3), y: np.ones(3)})
    plan = sess._plan_list[-1]
    build(plan, sess._storage)
    with pytest.raises(Exception) as err:
        try:
            plan.fn(np.ones(3), np.ones(2))
        except Exception as exc:
            raise execute.explain(plan, exc, sess._storage) from exc
    line = next(k for k, ln in enumerate(open(__file__), 1) if "the op that fails" in ln)
    assert f"op 'add' (created at test_execute.py:{line})" in str(err.value)
