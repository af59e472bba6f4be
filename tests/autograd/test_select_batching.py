"""The batching rules of the selection and layout primitives
(``dynnets/autograd/primitives/select.py``): under ``dynnets.autobatch``,
per-instance ``tile``, ``pad`` and ``top_k`` applications of one signature run
as one batched call and give eager mode's values and gradients."""
import numpy as np

import dynnets as dn
import dynnets.static as tf


def _loss(xs, w):
    total = None
    for x in xs:
        h = dn.tanh(x @ w)                                     # (1, 3): one row per instance
        t = tf.tile(h, [1, 2])                                 # rows kept: batched by rows
        p = tf.pad(t, [[0, 0], [1, 2]], constant_values=0.5)
        v = tf.nn.top_k(p, k=2).values
        r = tf.pad(h, [[0, 0], [1, 1]], mode="REFLECT") * tf.stop_gradient(h[:, :1])
        term = dn.sum(v * v) + dn.sum(r)
        total = term if total is None else total + term
    return total


def test_tile_pad_top_k_batch_by_rows_and_match_eager():
    rng = np.random.default_rng(0)
    xs = [dn.tensor(rng.standard_normal((1, 4))) for _ in range(5)]
    w0 = rng.standard_normal((4, 3))
    grads, values = [], []
    for batched in (False, True):
        w = dn.Parameter(w0.copy())
        if batched:
            with dn.autobatch() as ab:
                loss = _loss(xs, w)
                loss.backward()
        else:
            loss = _loss(xs, w)
            loss.backward()
        values.append(float(loss.data))
        grads.append(w.grad.numpy().copy())
    np.testing.assert_allclose(values[1], values[0], rtol=1e-12)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
    assert ab.stats["fallbacks"] == {}
    for op in ("tile", "pad", "top_k", "stop_gradient"):
        assert any(c.op == op and c.size == len(xs) for c in ab.calls), op
