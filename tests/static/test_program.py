"""The one compiled-program object (:mod:`dynnets.static.program`): a
session's plans, loop bodies, loop gradients and ``cond`` branches are
compiled by the same pipeline into plans that move up the same tiers."""
import numpy as np

import dynnets.static as tf
from dynnets.static import control_flow
from dynnets.static.core.program import CompiledProgram


def _loop_graph():
    g = tf.Graph()
    with g.as_default():
        n = tf.placeholder((), np.int32, name="n")
        x = tf.placeholder((3,), np.float64, name="x")
        _, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * x + 1.0), [0, x])
        loss = tf.reduce_sum(y)
        (gx,) = tf.gradients(loss, [x])
        z = tf.cond(loss > 0.0, lambda: x * 2.0, lambda: x - 1.0)
    loop = next(e for e in g.eqns if e.prim is control_flow.while_p)
    return g, n, x, y, gx, z, loop


def _want(xv, k):
    y = xv.copy()
    for _ in range(k):
        y = y * xv + 1.0
    return y


def test_session_loops_and_branches_share_one_program_object():
    g, n, x, y, gx, z, loop = _loop_graph()
    xv = np.array([0.5, 1.5, -2.0])
    with tf.Session(g) as sess:
        got_y, got_z = sess.run([y, z], {n: 3, x: xv})
        np.testing.assert_allclose(got_y, _want(xv, 3), rtol=1e-12)
        np.testing.assert_allclose(got_z, xv * 2.0 if _want(xv, 3).sum() > 0 else xv - 1.0, rtol=1e-12)
        assert isinstance(sess._program, CompiledProgram)
        progs = list(loop.attrs["body"].programs.values())
        assert progs and all(isinstance(p, CompiledProgram) for p in progs)
        # a body's plan has the statistics a session's plan has: its compile and pass times
        sub = [s for st in sess.stats for s in st["subprograms"]]
        body = next(s for s in sub if s["role"] == "body")
        assert body["compile_ms"] > 0 and "prune" in body["pass_ms"] and "infer_shapes" in body["pass_ms"]


def test_a_loop_body_moves_up_the_tiers_at_a_session_plans_run_counts():
    g, n, x, y, gx, z, loop = _loop_graph()
    xv = np.array([0.5, 1.5, -2.0])
    with tf.Session(g, jit_after=4, native_after=None) as sess:
        plan_entry = None
        for k in (1, 2):                                  # 1, then 3 iterations: tier 1
            np.testing.assert_allclose(sess.run(y, {n: k, x: xv}), _want(xv, k), rtol=1e-12)
            (plan_entry,) = loop.attrs["body"].programs["fwd"].plans.values()
        assert plan_entry.plan.runs == 3 and plan_entry.plan.tier == 1
        assert plan_entry.plan.next_tier == 4
        np.testing.assert_allclose(sess.run(y, {n: 1, x: xv}), _want(xv, 1), rtol=1e-12)
        assert plan_entry.plan.tier == 2 and plan_entry.plan.runs == 4
        # never again: no native tier asked for
        assert plan_entry.plan.next_tier == float("inf")
        np.testing.assert_allclose(sess.run(gx, {n: 2, x: xv}),
                                   (_want(xv + 1e-6, 2) - _want(xv - 1e-6, 2)) / 2e-6, rtol=1e-6)
