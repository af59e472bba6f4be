"""The issue 25 layers, forward + backward in eager mode: the choices made
for their primitives, measured.

1. ``layer_norm`` (x (B, T, 128), weight and bias, float32): the fused
   primitive ``layer_norm_p`` (``F.layer_norm`` today) vs the composite of
   mean / sub / mul / sqrt / div / mul / add it replaced (``F.layer_norm``
   before issue 25, kept here verbatim) vs ``torch.nn.functional.layer_norm``.
   The primitive's Numba kernels (``layer_norm_fwd`` / ``_bwd``) and their
   numpy twins on plain arrays (no autograd) show what the kernel pays.
2. ``conv1d`` (Kim 2014's sizes: embeddings 300, 100 maps, widths 3/4/5,
   sentence length 20; batch 50 and 1; float32): ``F.conv1d`` (im2col + one
   matmul, the primitive) vs the same maths as a loop over the K taps
   (``tap loop (reference)``, numpy forward + backward on plain arrays, no
   autograd) vs the primitive's im2col functions on plain arrays vs
   ``torch.nn.functional.conv1d``.
3. attention (x (B, 20, 128), 4 heads, a key padding mask;
   ``nn.MultiheadAttention``, float32): dynnets' module on the two attention
   primitives vs the same maths composed from matmul / transpose /
   masked_fill / softmax ops vs torch's module (training path:
   ``need_weights=False`` in train mode).

Every contender computes forward and backward (gradients reset each call);
contenders run interleaved, each figure the median of ``--repeats`` rounds.
Run::

    python benchmarks/bench_layers.py --repeats 20
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_us, interleaved, markdown_table, median_us, setup, torch_or_none  # noqa: E402


def _parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=20, help="timed rounds per contender (median reported)")
    ap.add_argument("--only", choices=["layer_norm", "conv1d", "attention"], help="run one case")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--keep-env", action="store_true")
    ap.add_argument("--blas-threads", type=int, default=1)
    return ap


def _report(title, times, base):
    med = {n: median_us(t) for n, t in times.items()}
    rows = [[n, fmt_us(us), f"{us / med[base]:.2f}"] for n, us in med.items()]
    print(f"\n### {title}\n")
    print(markdown_table(["contender", "us / call (median)", f"ratio to {base}"], rows))


def _composite_layer_norm(ops, x, ns, weight, bias, eps):
    """F.layer_norm before issue 25, verbatim."""
    dims = tuple(range(-len(ns), 0))
    centred = ops.sub(x, ops.mean(x, dims, keepdim=True))
    var = ops.mean(ops.mul(centred, centred), dims, keepdim=True)
    out = ops.div(centred, ops.sqrt(ops.add(var, eps)))
    out = ops.mul(out, weight)
    return ops.add(out, bias)


def case_layer_norm(args, dn, torch, np_):
    import dynnets.nn.functional as F
    from dynnets.autograd import ops
    from dynnets.autograd import kernels as K
    from dynnets.autograd import reference as R
    rng = np_.random.default_rng(args.seed)
    for b in (1, 32):
        x = rng.standard_normal((b, 20, 128)).astype(np_.float32)
        w0, b0 = rng.standard_normal(128).astype(np_.float32), rng.standard_normal(128).astype(np_.float32)
        g = rng.standard_normal(x.shape).astype(np_.float32)
        xt, wt, bt = dn.tensor(x, requires_grad=True), dn.Parameter(w0), dn.Parameter(b0)

        def reset():
            xt.grad = wt.grad = bt.grad = None

        def prim():
            reset()
            (F.layer_norm(xt, (128,), wt, bt, 1e-5) * g).sum().backward()

        def composite():
            reset()
            (_composite_layer_norm(ops, xt, (128,), wt, bt, 1e-5) * g).sum().backward()

        x2, g2 = x.reshape(-1, 128), g.reshape(-1, 128)

        def kernels():
            K.layer_norm_fwd(x2, w0, b0, 1e-5)
            K.layer_norm_bwd(x2, w0, g2, 1e-5)

        def twins():
            R.layer_norm_fwd(x2, w0, b0, 1e-5)
            R.layer_norm_bwd(x2, w0, g2, 1e-5)
        cs = {"dynnets layer_norm primitive": prim, "dynnets composite (before)": composite,
              "Numba kernels fwd+bwd (no autograd)": kernels, "their numpy twins (no autograd)": twins}
        if torch is not None:
            tx = torch.tensor(x, requires_grad=True)
            tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
            tg = torch.tensor(g)

            def torch_fn():
                tx.grad = tw.grad = tb.grad = None
                (torch.nn.functional.layer_norm(tx, (128,), tw, tb) * tg).sum().backward()
            cs["torch"] = torch_fn
        _report(f"layer_norm fwd+bwd, x ({b}, 20, 128) float32", interleaved(cs, args.repeats, 20 if b == 1 else 5),
                "dynnets layer_norm primitive")


def _tap_loop(x, w, g):
    """conv1d forward + backward as K matmuls over strided slices (stride 1, no padding)."""
    import numpy as np
    n, c, length = x.shape
    o, _, k = w.shape
    t = length - k + 1
    out = np.zeros((n, o, t), x.dtype)
    for j in range(k):
        out += np.matmul(w[:, :, j], x[:, :, j:j + t])
    gx = np.zeros_like(x)
    gw = np.empty_like(w)
    for j in range(k):
        gx[:, :, j:j + t] += np.matmul(w[:, :, j].T, g)
        gw[:, :, j] = np.tensordot(g, x[:, :, j:j + t], axes=([0, 2], [0, 2]))
    return out, gx, gw


def case_conv1d(args, dn, torch, np_):
    import dynnets.nn.functional as F
    from dynnets.autograd.primitives import conv as CV
    rng = np_.random.default_rng(args.seed)
    for b in (1, 50):
        for k in (3, 5):
            x = rng.standard_normal((b, 300, 20)).astype(np_.float32)
            w0 = (rng.standard_normal((100, 300, k)) * 0.05).astype(np_.float32)
            b0 = rng.standard_normal(100).astype(np_.float32)
            g = rng.standard_normal((b, 100, 20 - k + 1)).astype(np_.float32)
            xt, wt, bt = dn.tensor(x, requires_grad=True), dn.Parameter(w0), dn.Parameter(b0)

            def prim():
                xt.grad = wt.grad = bt.grad = None
                (F.conv1d(xt, wt, bt) * g).sum().backward()

            def im2col():
                out = CV._conv1d(x, w0, b0)
                CV._conv1d_vjp(g, (x, w0, b0), out)

            def taps():
                _tap_loop(x, w0, g)
            cs = {"dynnets conv1d (im2col primitive)": prim, "im2col impl+vjp (no autograd)": im2col,
                  "tap loop (reference, no autograd)": taps}
            if torch is not None:
                tx = torch.tensor(x, requires_grad=True)
                tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
                tg = torch.tensor(g)

                def torch_fn():
                    tx.grad = tw.grad = tb.grad = None
                    (torch.nn.functional.conv1d(tx, tw, tb) * tg).sum().backward()
                cs["torch"] = torch_fn
            _report(f"conv1d fwd+bwd, x ({b}, 300, 20), w (100, 300, {k}) float32",
                    interleaved(cs, args.repeats, 10 if b == 1 else 2), "dynnets conv1d (im2col primitive)")


def _composite_attention(dn, m, x, pad):
    """MultiheadAttention's maths from generic ops (batch_first, self-attention)."""
    from dynnets.autograd import ops
    n, t, e = x.shape
    h = m.num_heads
    d = e // h
    q, k, v = ops.chunk(ops.linear(x, m.in_proj_weight, m.in_proj_bias), 3, -1)

    def heads(z):
        return ops.transpose(ops.reshape(z, n, t, h, d), 1, 2)
    s = ops.matmul(heads(q), ops.transpose(heads(k), -1, -2)) * (1.0 / d ** 0.5)
    s = ops.masked_fill(s, pad[:, None, None, :], float("-inf"))
    p = ops.softmax(s, -1)
    o = ops.reshape(ops.transpose(ops.matmul(p, heads(v)), 1, 2), n, t, e)
    return ops.linear(o, m.out_proj.weight, m.out_proj.bias)


def case_attention(args, dn, torch, np_):
    rng = np_.random.default_rng(args.seed)
    for b in (1, 32):
        x = rng.standard_normal((b, 20, 128)).astype(np_.float32)
        lengths = rng.integers(1, 21, b)
        lengths[0] = 20
        pad = np_.arange(20)[None, :] >= lengths[:, None]
        g = rng.standard_normal(x.shape).astype(np_.float32)
        m = dn.nn.MultiheadAttention(128, 4, batch_first=True, rng=0)
        xt = dn.tensor(x, requires_grad=True)

        def reset():
            xt.grad = None
            for p in m.parameters():
                p.grad = None

        def prim():
            reset()
            (m(xt, xt, xt, key_padding_mask=pad, need_weights=False)[0] * g).sum().backward()

        def composite():
            reset()
            (_composite_attention(dn, m, xt, pad) * g).sum().backward()
        cs = {"dynnets MHA (attention primitives)": prim, "dynnets MHA composite (matmul/softmax ops)": composite}
        if torch is not None:
            tm = torch.nn.MultiheadAttention(128, 4, batch_first=True)
            tm.load_state_dict({k: torch.tensor(np_.asarray(v)) for k, v in m.state_dict().items()})
            tx, tp, tg = torch.tensor(x, requires_grad=True), torch.tensor(pad), torch.tensor(g)

            def torch_fn():
                tx.grad = None
                tm.zero_grad(set_to_none=True)
                (tm(tx, tx, tx, key_padding_mask=tp, need_weights=False)[0] * tg).sum().backward()
            cs["torch"] = torch_fn
        _report(f"MultiheadAttention fwd+bwd, x ({b}, 20, 128), 4 heads, padding mask, float32",
                interleaved(cs, args.repeats, 10 if b == 1 else 3), "dynnets MHA (attention primitives)")


def main(argv=None):
    args = _parser().parse_args(argv)
    info = setup(__file__, keep_env=args.keep_env, blas_threads=args.blas_threads)
    import numpy as np

    import dynnets as dn
    import dynnets.nn  # noqa: F401
    torch = None if args.no_torch else torch_or_none(1)
    print(f"BLAS threads: {info['blas_threads']}; torch: {getattr(torch, '__version__', 'not used')}")
    for name, fn in (("layer_norm", case_layer_norm), ("conv1d", case_conv1d), ("attention", case_attention)):
        if args.only in (None, name):
            fn(args, dn, torch, np)


if __name__ == "__main__":
    main()
