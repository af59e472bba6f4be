"""The static graph's own API against PyTorch: the TF1-named ops of
``dynnets.static`` and ``dynnets.static.nn``, symbolic gradients with
``grad_ys`` and several ``ys``, one graph with unknown dimensions fed batches
of several sizes, a model compiled with fusion and the memory plan forced on,
and the static optimizers (``static.train``) against ``torch.optim``.

(Every public op also runs in static mode, with known and unknown placeholder
dimensions, in ``test_torch_ops.py`` and ``test_torch_nn.py``.)
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
import dynnets.static as ds  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

F = torch.nn.functional
STATIC = ("static", "static-unknown", "static-fused")


def _x(*shape, domain="real", seed=0, dtype=np.float64):
    return C.draw(np.random.default_rng(seed), shape, dtype, domain)


_LABELS = np.array([2, 0, 1, 1])
_PROBS = np.random.default_rng(1).dirichlet(np.ones(3), 4)

# (id, static fn, torch fn, inputs, differentiated inputs)
TF_OPS = [
    ("reduce_sum", lambda x: ds.reduce_sum(x), torch.sum, [_x(3, 4)], [0]),
    ("reduce_sum-axis", lambda x: ds.reduce_sum(x, axis=1, keepdims=True), lambda x: x.sum(1, keepdim=True),
     [_x(3, 4)], [0]),
    ("reduce_sum-keep_dims", lambda x: ds.reduce_sum(x, axis=[0, 2], keep_dims=True),
     lambda x: x.sum((0, 2), keepdim=True), [_x(2, 3, 4)], [0]),
    ("reduce_sum-reduction_indices", lambda x: ds.reduce_sum(x, reduction_indices=0), lambda x: x.sum(0),
     [_x(3, 4)], [0]),
    ("reduce_mean", lambda x: ds.reduce_mean(x, axis=-1), lambda x: x.mean(-1), [_x(3, 4)], [0]),
    ("reduce_max", lambda x: ds.reduce_max(x, axis=0), lambda x: x.amax(0), [_x(3, 4)], [0]),
    ("reduce_min", lambda x: ds.reduce_min(x), torch.amin, [_x(3, 4)], [0]),
    ("square", ds.square, torch.square, [_x(3, 4)], [0]),
    ("matmul", ds.matmul, torch.matmul, [_x(3, 4), _x(4, 2, seed=1)], [0, 1]),
    ("matmul-transpose_a", lambda a, b: ds.matmul(a, b, transpose_a=True), lambda a, b: a.T @ b,
     [_x(4, 3), _x(4, 2, seed=1)], [0, 1]),
    ("matmul-transpose_b", lambda a, b: ds.matmul(a, b, transpose_b=True), lambda a, b: a @ b.T,
     [_x(3, 4), _x(2, 4, seed=1)], [0, 1]),
    ("add", ds.add, torch.add, [_x(3, 4), _x(4, seed=1)], [0, 1]),
    ("subtract", ds.subtract, torch.sub, [_x(3, 4), _x(3, 1, seed=1)], [0, 1]),
    ("multiply", ds.multiply, torch.mul, [_x(3, 4), _x(3, 4, seed=1)], [0, 1]),
    ("divide", ds.divide, torch.div, [_x(3, 4), _x(3, 4, domain="nonzero", seed=1)], [0, 1]),
    ("negative", ds.negative, torch.neg, [_x(3, 4)], [0]),
    ("cast", lambda x: ds.cast(x, ds.float32), lambda x: x.to(torch.float32), [_x(3, 4)], [0]),
    ("gather", ds.gather, lambda p, i: p[i], [_x(5, 3), np.array([4, 0, 4])], [0]),
    ("concat", lambda a, b: ds.concat([a, b], 1), lambda a, b: torch.cat([a, b], 1), [_x(3, 2), _x(3, 4, seed=1)],
     [0, 1]),
    ("stack", lambda a, b: ds.stack([a, b], axis=1), lambda a, b: torch.stack([a, b], 1),
     [_x(3, 2), _x(3, 2, seed=1)], [0, 1]),
    ("reshape", lambda x: ds.reshape(x, [-1, 2]), lambda x: x.reshape(-1, 2), [_x(3, 4)], [0]),
    ("transpose", ds.transpose, lambda x: x.T, [_x(3, 4)], [0]),
    ("transpose-perm", lambda x: ds.transpose(x, perm=[1, 2, 0]), lambda x: x.permute(1, 2, 0), [_x(2, 3, 4)],
     [0]),
    ("clip_by_value", lambda x: ds.clip_by_value(x, -0.5, 0.5), lambda x: x.clamp(-0.5, 0.5), [_x(3, 4)], [0]),
    ("identity", lambda x: ds.identity(x, name="same") * 2.0, lambda x: x * 2.0, [_x(3, 4)], [0]),
    ("zeros_like", lambda x: ds.zeros_like(x) + x, lambda x: torch.zeros_like(x) + x, [_x(3, 4)], [0]),
    ("ones_like", lambda x: ds.ones_like(x) * x, lambda x: torch.ones_like(x) * x, [_x(3, 4)], [0]),
    ("equal", lambda x, y: ds.equal(x, y), torch.eq, [np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])], []),
    ("not_equal", lambda x, y: ds.not_equal(x, y), torch.ne, [np.array([1.0, 2.0]), np.array([1.0, 0.0])], []),
    ("less", ds.less, torch.lt, [np.array([1.0, 2.0, 0.0]), np.array([1.0, 3.0, -1.0])], []),
    ("less_equal", ds.less_equal, torch.le, [np.array([1.0, 2.0, 0.0]), np.array([1.0, 3.0, -1.0])], []),
    ("greater", ds.greater, torch.gt, [np.array([1.0, 2.0, 0.0]), np.array([1.0, 3.0, -1.0])], []),
    ("greater_equal", ds.greater_equal, torch.ge, [np.array([1.0, 2.0, 0.0]), np.array([1.0, 3.0, -1.0])], []),
    ("argmax", lambda x: ds.argmax(x, axis=1), lambda x: x.argmax(1), [np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])],
     []),
    # tf.nn
    ("nn.softmax", ds.nn.softmax, lambda x: F.softmax(x, -1), [_x(4, 3)], [0]),
    ("nn.log_softmax", lambda x: ds.nn.log_softmax(x, axis=0), lambda x: F.log_softmax(x, 0), [_x(4, 3)], [0]),
    ("nn.sparse_softmax_cross_entropy_with_logits",
     lambda x, y: ds.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x),
     lambda x, y: F.cross_entropy(x, y, reduction="none"), [_x(4, 3), _LABELS], [0]),
    # TF1's v1 sends no gradient into the labels (torch's cross_entropy would: only the logits' is compared), v2 does
    ("nn.softmax_cross_entropy_with_logits",
     lambda x, p: ds.nn.softmax_cross_entropy_with_logits(labels=p, logits=x),
     lambda x, p: F.cross_entropy(x, p, reduction="none"), [_x(4, 3), _PROBS], [0]),
    ("nn.softmax_cross_entropy_with_logits_v2",
     lambda x, p: ds.nn.softmax_cross_entropy_with_logits_v2(labels=p, logits=x),
     lambda x, p: F.cross_entropy(x, p, reduction="none"), [_x(4, 3), _PROBS], [0, 1]),
    ("nn.sigmoid_cross_entropy_with_logits",
     lambda x, z: ds.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x),
     lambda x, z: F.binary_cross_entropy_with_logits(x, z, reduction="none"), [_x(4, 3), _PROBS], [0, 1]),
    ("nn.tanh", ds.nn.tanh, torch.tanh, [_x(3, 4)], [0]),
    ("nn.sigmoid", ds.nn.sigmoid, torch.sigmoid, [_x(3, 4)], [0]),
    ("nn.relu", ds.nn.relu, torch.relu, [_x(3, 4)], [0]),
    ("nn.embedding_lookup", ds.nn.embedding_lookup, lambda w, i: F.embedding(i, w),
     [_x(5, 3), np.array([[1, 1], [4, 0]])], [0]),
    ("nn.l2_loss", ds.nn.l2_loss, lambda t: (t * t).sum() / 2, [_x(3, 4)], [0]),
    ("nn.bias_add", ds.nn.bias_add, torch.add, [_x(3, 4), _x(4, seed=1)], [0, 1]),
    ("nn.xw_plus_b", ds.nn.xw_plus_b, lambda x, w, b: x @ w + b, [_x(3, 4), _x(4, 2, seed=1), _x(2, seed=2)],
     [0, 1, 2]),
]


def _tf_cases():
    out = []
    for tid, f, tf, xs, diff in TF_OPS:
        for mode in STATIC:
            out.append(pytest.param(f, tf, xs, diff, mode, id=f"{tid}-{mode}"))
    return out


@pytest.mark.parametrize("f,tf,xs,diff,mode", _tf_cases())
def test_tf_names(f, tf, xs, diff, mode):
    C.check(f, tf, xs, diff, mode=mode)


def _mlp_torch(x, y, w1, b1, w2, b2):
    return F.cross_entropy(F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2), y)


def _mlp_dn(x, y, w1, b1, w2, b2):
    return dn.cross_entropy(dn.linear(dn.tanh(dn.linear(x, w1, b1)), w2, b2), y)


def _mlp_params(rng, dtype):
    return [C.draw(rng, s, dtype) * 0.5 for s in ((6, 4), (6,), (3, 6), (3,))]


@pytest.mark.parametrize("dtype", C.FLOATS)
@pytest.mark.parametrize("fused", [False, True])
def test_one_graph_fed_several_batch_sizes(dtype, fused):
    # placeholders (None, 4) and (None,): one graph and one session, batches of 1, 5, 0 and 7 rows
    rng = np.random.default_rng(2)
    params = _mlp_params(rng, dtype)
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None, 4), dtype, name="x")
        y = ds.placeholder((None,), np.int64, name="y")
        ps = [ds.placeholder(p.shape, dtype) for p in params]
        loss = _mlp_dn(x, y, *ps)
        grads = ds.gradients(loss, [x] + ps)
        with ds.Session(g, **(C.STATIC_FUSED if fused else {})) as sess:
            for n in (1, 5, 7, 0, 5):
                xb, yb = C.draw(rng, (n, 4), dtype), rng.integers(0, 3, n)
                feed = {x: xb, y: yb, **dict(zip(ps, params))}
                got = sess.run([loss] + grads, feed)
                tx = [C.to_torch(a, requires_grad=True) for a in [xb] + params]
                tl = _mlp_torch(tx[0], torch.tensor(yb), *tx[1:])
                if n == 0:
                    # the mean over no rows is nan in both (0/0), the gradients 0
                    assert np.isnan(tl.item()) and np.isnan(got[0])
                tl.backward()
                if n:
                    C.assert_close(got[0], tl.detach().numpy(), dtype, f"loss, batch {n}")
                for gv, t in zip(got[1:], tx):
                    C.assert_close(gv, t.grad.numpy(), dtype, f"gradient, batch {n}")


def _chain(m):
    def f(x, w, b):
        # fusible primitives only (add, sub, mul, div, neg, abs, maximum, minimum, relu, sqrt), then a
        # non-fusible one (tanh) that ends one group and starts another
        y = m.relu(x * w + b) - m.abs(x) / (1.0 + m.sqrt(m.abs(w))) + m.maximum(x, w) * m.minimum(x, -w)
        return m.tanh(y) * (-x) + y * b
    return f


@pytest.mark.parametrize("dtype", C.FLOATS)
def test_fusion_on_large_elementwise_chain(dtype):
    # 64 x 64 elements: the default session fuses the forward chain into generated kernels (its gradient
    # graph is made of vjp_* equations, which the fusion pass leaves to numpy, and the forward
    # intermediates the VJPs read cannot be fused away)
    xs = [_x(64, 64, seed=3, dtype=dtype), _x(64, 64, seed=4, dtype=dtype), _x(64, seed=5, dtype=dtype)]
    g = ds.Graph()
    with g.as_default():
        ps = [ds.placeholder(a.shape, dtype) for a in xs]
        out = _chain(dn)(*ps)
        with ds.Session(g) as sess:
            got = sess.run(out, dict(zip(ps, xs)))
            assert sess.stats[0]["fused_kernels"] >= 2
    want = _chain(torch)(*[C.to_torch(a) for a in xs]).numpy()
    C.assert_close(got, want, dtype, "fused forward chain")
    for mode in ("eager", "static", "static-unknown", "static-fused"):
        C.check(_chain(dn), _chain(torch), xs, [0, 1, 2], mode=mode)


def test_gradients_with_grad_ys_and_several_ys():
    x, w = _x(3, 4, seed=6), _x(4, 2, seed=7)
    gy1, gy2 = _x(3, 2, seed=8), _x(3, 4, seed=9)
    g = ds.Graph()
    with g.as_default():
        px, pw = ds.placeholder((None, 4), np.float64), ds.placeholder((4, 2), np.float64)
        y1 = dn.tanh(px @ pw)
        y2 = px * px
        gr = ds.gradients([y1, y2], [px, pw], grad_ys=[gy1, gy2])
        with ds.Session(g) as sess:
            got = sess.run(gr, {px: x, pw: w})
    tx, tw = C.to_torch(x, True), C.to_torch(w, True)
    want = torch.autograd.grad([torch.tanh(tx @ tw), tx * tx], [tx, tw], [torch.tensor(gy1), torch.tensor(gy2)])
    for a, b in zip(got, want):
        C.assert_close(a, b.numpy(), np.float64, "gradient with grad_ys")


def test_gradient_of_an_unused_input_is_none():
    g = ds.Graph()
    with g.as_default():
        a, b = ds.placeholder((3,), np.float64), ds.placeholder((3,), np.float64)
        ga, gb = ds.gradients(dn.sum(a * 2.0), [a, b])
        assert gb is None
        with ds.Session(g) as sess:
            np.testing.assert_array_equal(sess.run(ga, {a: np.ones(3)}), np.full(3, 2.0))
    ta, tb = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    assert torch.autograd.grad((ta * 2).sum(), [ta, tb], allow_unused=True)[1] is None


# --------------------------------------------------------------------------
# static optimizers against torch.optim
# --------------------------------------------------------------------------

STATIC_OPTIMIZERS = [
    ("GradientDescent", dict(learning_rate=0.1), "SGD", dict(lr=0.1)),
    ("GradientDescent", dict(learning_rate=0.1, weight_decay=0.05), "SGD", dict(lr=0.1, weight_decay=0.05)),
    ("Adagrad", dict(learning_rate=0.1), "Adagrad", dict(lr=0.1, initial_accumulator_value=0.1, eps=0.0)),
    ("Adagrad", dict(learning_rate=0.1, initial_accumulator_value=0.0, epsilon=1e-10), "Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(learning_rate=0.1, initial_accumulator_value=0.0, epsilon=1e-10, weight_decay=0.1), "Adagrad",
     dict(lr=0.1, weight_decay=0.1)),
    # TF1's Adam puts epsilon outside the bias correction ("epsilon hat"); torch_epsilon=True is PyTorch's rule
    ("Adam", dict(torch_epsilon=True), "Adam", dict()),
    ("Adam", dict(learning_rate=0.05, beta1=0.8, beta2=0.9, epsilon=1e-3, torch_epsilon=True), "Adam",
     dict(lr=0.05, betas=(0.8, 0.9), eps=1e-3)),
    ("Adam", dict(learning_rate=0.05, weight_decay=0.1, torch_epsilon=True), "Adam", dict(lr=0.05, weight_decay=0.1)),
]


@pytest.mark.parametrize("sname,skw,tname,tkw", STATIC_OPTIMIZERS,
                         ids=[f"{s}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                              for s, kw, _, _ in STATIC_OPTIMIZERS])
def test_static_optimizer_steps(sname, skw, tname, tkw):
    rng = np.random.default_rng(10)
    params = _mlp_params(rng, np.float64)
    xb, yb = C.draw(rng, (5, 4)), rng.integers(0, 3, 5)
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((None, 4), np.float64)
        y = ds.placeholder((None,), np.int64)
        vs = [ds.Variable(p.copy(), name=f"p{k}") for k, p in enumerate(params)]
        loss = _mlp_dn(x, y, *vs)
        train = getattr(ds.train, f"{sname}Optimizer")(**skw).minimize(loss)
        init = ds.global_variables_initializer()
        tps = [torch.nn.Parameter(torch.tensor(p.copy())) for p in params]
        topt = getattr(torch.optim, tname)(tps, **tkw)
        with ds.Session(g) as sess:
            sess.run(init)
            for step in range(5):
                _, lv = sess.run([train, loss], {x: xb, y: yb})
                topt.zero_grad()
                tl = _mlp_torch(torch.tensor(xb), torch.tensor(yb), *tps)
                tl.backward()
                topt.step()
                # a run reads the variables as they were when it started: the loss is before the update
                C.assert_close(lv, tl.detach().numpy(), np.float64, f"loss at step {step + 1}", rtol=1e-9)
                for v, t in zip(vs, tps):
                    C.assert_close(sess.run(v), t.detach().numpy(), np.float64, f"{v.name} after step {step + 1}",
                                   rtol=1e-9)
