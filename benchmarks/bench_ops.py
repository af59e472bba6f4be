"""Eager-mode speed: per-op overhead and the fused LSTM cell, against PyTorch and numpy.

1. ``tanh(x @ W + b).sum()`` forward + backward, x (1, 150), W (150, 150),
   b (150,), float32, W and b require grad: dynnets vs PyTorch CPU (one
   thread) vs the same maths written by hand in numpy (the floor: no graph).
2. LSTM cell forward + backward (input 300, hidden 150, batch 1 and 25; x, h,
   c and all weights require grad; loss = h'.sum() + c'.sum()): the fused
   Numba primitive ``ops.lstm_cell`` vs the same cell composed from dynnets
   primitives (matmul, add, getitem, sigmoid, tanh, mul) vs
   ``torch.nn.LSTMCell``.

3. A 20-step ``LSTMCell`` loop at batch 1 (input 300, hidden 150; loss =
   final h.sum()): ``dynnets.nn.LSTMCell`` called step by step, as a PyTorch
   user writes it, vs ``torch.nn.LSTMCell`` the same way. It measures what a
   define-by-run loop costs beyond one cell: per-step graph recording and the
   weight gradients summed over the steps.

Case 1 also times a reference pass, ``minimal tape (reference)``: the least
Python any define-by-run autograd does for that graph (one call, one object
and one tape append per op forward; one VJP call and one accumulation per
input backward, the tape walked in reverse) around numpy calls, with no
input checks or dtype rules: a lower bound for the per-op overhead, not a
contender.

Every contender resets its gradients (``= None``) each call. Contenders run
interleaved in one process; each figure is the median over ``--repeats``
rounds of ``--number`` calls. Run::

    python benchmarks/bench_ops.py --seed 0 --repeats 30

The script re-executes itself once without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE
(it prints so; ``--keep-env`` keeps them) and with OPENBLAS_NUM_THREADS=1, so
numpy's BLAS, like PyTorch, uses one thread (``--blas-threads``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_us, interleaved, markdown_table, median_us, setup, torch_or_none  # noqa: E402


def _parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="seed of all inputs and weights")
    ap.add_argument("--repeats", type=int, default=30, help="timed rounds per contender (median reported)")
    ap.add_argument("--number", type=int, default=0, help="calls per round (0: chosen per case)")
    ap.add_argument("--only", choices=["overhead", "lstm", "loop"], help="run one case")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if importable")
    ap.add_argument("--keep-env", action="store_true", help="do not unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="OPENBLAS_NUM_THREADS for numpy (default 1, as torch's 1 thread; 0 = OpenBLAS default)")
    return ap


# --------------------------------------------------------------------------
# 1. per-op overhead
# --------------------------------------------------------------------------

def overhead_contenders(seed, torch):
    import numpy as np

    import dynnets as dn
    from dynnets.autograd import ops
    from dynnets.autograd.tensor import Tensor

    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal((1, 150)).astype(np.float32)
    W0 = (rng.standard_normal((150, 150)) / np.sqrt(150)).astype(np.float32)
    b0 = rng.standard_normal(150).astype(np.float32)

    x = Tensor(x0.copy())
    W = Tensor(W0.copy(), requires_grad=True)
    b = Tensor(b0.copy(), requires_grad=True)

    def dynnets_step():
        W._grad = None
        b._grad = None
        ops.tanh(x @ W + b).sum().backward()
        return W._grad, b._grad

    hand = {}

    def numpy_step():
        hand.clear()                                   # the same "zero_grad" as the others
        t = np.tanh(x0 @ W0 + b0)
        t.sum()
        dz = 1 - t * t                                 # d sum / d t = 1
        # np.dot, not x0.T @ dz: with a contracted dimension of 1 numpy's
        # matmul leaves BLAS for a loop ~8x slower; the floor is the best hand code
        hand["W"] = np.dot(x0.T, dz)
        hand["b"] = dz.sum(0)
        return hand["W"], hand["b"]

    # reference passes that split dynnets' time: the forward alone, with and
    # without recording the graph, against numpy's forward alone
    from dynnets.autograd.engine import no_grad

    def dynnets_fwd():
        return ops.tanh(x @ W + b).sum()

    def dynnets_fwd_nograd():
        with no_grad():
            return ops.tanh(x @ W + b).sum()

    def numpy_fwd():
        return np.tanh(x0 @ W0 + b0).sum()

    out = {"dynnets": dynnets_step, "numpy (hand-written)": numpy_step,
           "dynnets forward only": dynnets_fwd, "dynnets forward, no_grad": dynnets_fwd_nograd,
           "numpy forward only": numpy_fwd, MINIMAL: minimal_tape_step(x0, W0, b0)}
    if torch is not None:
        tx = torch.from_numpy(x0.copy())
        tW = torch.from_numpy(W0.copy()).requires_grad_()
        tb = torch.from_numpy(b0.copy()).requires_grad_()

        def torch_step():
            tW.grad = None
            tb.grad = None
            torch.tanh(tx @ tW + tb).sum().backward()
            return tW.grad, tb.grad

        out["pytorch"] = torch_step
    n_ops = graph_ops(dynnets_fwd())
    # the contenders must compute the same thing
    ref = numpy_step()
    for name, f in out.items():
        if "forward" in name:
            continue
        gW, gb = f()
        gW = np.asarray(gW.numpy() if hasattr(gW, "numpy") else gW)
        gb = np.asarray(gb.numpy() if hasattr(gb, "numpy") else gb)
        if not (np.allclose(gW, ref[0], atol=1e-4) and np.allclose(gb, ref[1], atol=1e-4)):
            raise SystemExit(f"bench_ops: {name} computes different gradients from the numpy reference")
    return out, n_ops


MINIMAL = "minimal tape (reference)"


def minimal_tape_step(x0, W0, b0):
    """A reference pass: the least Python any define-by-run autograd does for
    this graph, around numpy calls. Forward, per op: one function call, one
    result object, one tape append; backward, per op: one VJP call (a plain
    function) and, per input that needs a gradient, one accumulation; the
    tape is walked in reverse recording order. The numpy work is what a
    generic op-by-op gradient cannot avoid beyond the hand-written code: the
    sum's adjoint as an array (filled with the incoming gradient) and the
    tanh VJP times its incoming gradient. No input checks, dtype rules,
    broadcasting rules beyond this graph's, graph freeing or grad modes, so
    it is a lower bound for a framework, not a contender."""
    import numpy as np

    class Box:
        __slots__ = ("data", "g", "rg")

    new = object.__new__

    def leaf(a, rg):
        t = new(Box)
        t.data = a
        t.g = None
        t.rg = rg
        return t

    x, W, b = leaf(x0, False), leaf(W0, True), leaf(b0, True)

    def op(tape, vjp, data, *ins):
        t = new(Box)
        t.data = data
        t.g = None
        t.rg = True
        tape.append((vjp, ins, t))
        return t

    def matmul_vjp(g, ins, out):
        a, w = ins
        return (np.dot(g, w.data.T) if a.rg else None, np.dot(a.data.T, g) if w.rg else None)

    def add_vjp(g, ins, out):
        return g, np.add.reduce(g, 0)          # b broadcast over the rows: the only case here

    def tanh_vjp(g, ins, out):
        return (g * (1 - out.data * out.data),)

    def sum_vjp(g, ins, out):
        d = np.empty(ins[0].data.shape, dtype=out.data.dtype)
        d.fill(g)
        return (d,)

    def step():
        tape = []
        W.g = b.g = None
        y = op(tape, matmul_vjp, np.dot(x.data, W.data), x, W)
        y = op(tape, add_vjp, np.add(y.data, b.data), y, b)
        y = op(tape, tanh_vjp, np.tanh(y.data), y)
        y = op(tape, sum_vjp, np.add.reduce(y.data, None), y)
        y.g = np.array(1, y.data.dtype)
        for vjp, ins, out in reversed(tape):
            for i, gi in zip(ins, vjp(out.g, ins, out)):
                if i.rg:
                    i.g = gi if i.g is None else i.g + gi
        return W.g, b.g

    return step


def graph_ops(t):
    """Number of primitive applications recorded behind tensor ``t`` (each is
    one ``bind`` forward and one VJP call in backward)."""
    seen, stack = set(), [t._node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(p._node for p in n.parents if p is not None)
    return len(seen)


# --------------------------------------------------------------------------
# 2. LSTM cell
# --------------------------------------------------------------------------

def lstm_contenders(seed, batch, torch, I=300, H=150):
    import numpy as np

    import dynnets as dn
    from dynnets.autograd import ops
    from dynnets.autograd.tensor import Tensor

    rng = np.random.default_rng(seed)
    k = 1 / np.sqrt(H)
    arrs = {
        "x": rng.standard_normal((batch, I)).astype(np.float32),
        "h": rng.standard_normal((batch, H)).astype(np.float32),
        "c": rng.standard_normal((batch, H)).astype(np.float32),
        "w_ih": rng.uniform(-k, k, (4 * H, I)).astype(np.float32),
        "w_hh": rng.uniform(-k, k, (4 * H, H)).astype(np.float32),
        "b_ih": rng.uniform(-k, k, 4 * H).astype(np.float32),
        "b_hh": rng.uniform(-k, k, 4 * H).astype(np.float32),
    }
    names = list(arrs)

    fused = {n: Tensor(a.copy(), requires_grad=True) for n, a in arrs.items()}

    def fused_step():
        for t in fused.values():
            t._grad = None
        h2, c2 = ops.lstm_cell(*(fused[n] for n in names))
        (h2.sum() + c2.sum()).backward()
        return fused

    # The composed cell keeps its weights pre-transposed, (in, 4H), as a user
    # writing it from matmuls would; that spares it two transposes per step.
    comp = {n: Tensor((a.T if n.startswith("w_") else a).copy(), requires_grad=True) for n, a in arrs.items()}

    def composed_step():
        for t in comp.values():
            t._grad = None
        x, h, c, wi, wh, bi, bh = (comp[n] for n in names)
        gates = x @ wi + h @ wh + bi + bh
        i = ops.sigmoid(gates[:, :H])
        f = ops.sigmoid(gates[:, H:2 * H])
        g = ops.tanh(gates[:, 2 * H:3 * H])
        o = ops.sigmoid(gates[:, 3 * H:])
        c2 = f * c + i * g
        h2 = o * ops.tanh(c2)
        (h2.sum() + c2.sum()).backward()
        return comp

    out = {"fused (ops.lstm_cell)": fused_step, "composed (dynnets ops)": composed_step}

    if torch is not None:
        cell = torch.nn.LSTMCell(I, H)
        with torch.no_grad():
            for n in ("w_ih", "w_hh", "b_ih", "b_hh"):
                getattr(cell, "weight_" + n[2:] if n.startswith("w_") else "bias_" + n[2:]).copy_(
                    torch.from_numpy(arrs[n]))
        tin = {n: torch.from_numpy(arrs[n].copy()).requires_grad_() for n in ("x", "h", "c")}
        params = list(cell.parameters())

        def torch_step():
            for p in params:
                p.grad = None
            for t in tin.values():
                t.grad = None
            h2, c2 = cell(tin["x"], (tin["h"], tin["c"]))
            (h2.sum() + c2.sum()).backward()
            return cell, tin

        out["torch.nn.LSTMCell"] = torch_step

    # agreement check: gradients of x and w_ih
    fused_step()
    composed_step()
    checks = [("x", fused["x"]._grad, comp["x"]._grad), ("w_ih", fused["w_ih"]._grad, comp["w_ih"]._grad.T)]
    if torch is not None:
        torch_step()
        checks += [("x (torch)", fused["x"]._grad, tin["x"].grad.numpy()),
                   ("w_ih (torch)", fused["w_ih"]._grad, cell.weight_ih.grad.numpy())]
    for what, a, b in checks:
        if not np.allclose(a, b, atol=1e-4, rtol=1e-3):
            raise SystemExit(f"bench_ops: LSTM contenders disagree on the gradient of {what}")
    return out


def loop_contenders(seed, torch, steps=20, I=300, H=150):
    import numpy as np

    from dynnets import nn
    import dynnets as dn
    from dynnets.autograd import ops

    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((steps, 1, I)).astype(np.float32)
    cell = nn.LSTMCell(I, H, rng=rng)
    xts = [dn.tensor(x) for x in xs]
    params = list(cell.parameters())

    def dynnets_loop():
        for p in params:
            p._grad = None
        h, c = dn.zeros(1, H), dn.zeros(1, H)
        for x in xts:
            h, c = cell(x, (h, c))
        h.sum().backward()
        return params

    out = {"dynnets nn.LSTMCell": dynnets_loop}
    if torch is not None:
        tcell = torch.nn.LSTMCell(I, H)
        with torch.no_grad():
            for n, p in cell.named_parameters():
                getattr(tcell, n).copy_(torch.from_numpy(p.numpy()))
        txs = [torch.from_numpy(x) for x in xs]
        tparams = list(tcell.parameters())

        def torch_loop():
            for p in tparams:
                p.grad = None
            h, c = torch.zeros(1, H), torch.zeros(1, H)
            for x in txs:
                h, c = tcell(x, (h, c))
            h.sum().backward()
            return tcell

        out["torch.nn.LSTMCell"] = torch_loop
        dynnets_loop()
        torch_loop()
        if not np.allclose(cell.weight_ih.grad.numpy(), tcell.weight_ih.grad.numpy(), atol=1e-4, rtol=1e-3):
            raise SystemExit("bench_ops: the LSTMCell loops disagree on the gradient of weight_ih")
    return out


def main(argv=None):
    opts = _parser().parse_args(argv)
    setup(__file__, keep_env=opts.keep_env, blas_threads=opts.blas_threads)
    torch = None if opts.no_torch else torch_or_none(threads=1)
    print(f"# torch: {'not used' if torch is None else torch.__version__ + ', 1 thread'}; "
          f"seed {opts.seed}, {opts.repeats} rounds; medians in microseconds per forward+backward; "
          "timings are noisy on a shared machine")

    rows = []
    targets = []
    if opts.only in (None, "overhead"):
        cont, n_ops = overhead_contenders(opts.seed, torch)
        t = interleaved(cont, opts.repeats, opts.number or 200, warmup=2)
        med = {n: median_us(v) for n, v in t.items()}
        d = med["dynnets"]
        hand = med["numpy (hand-written)"]
        print("\n## 1. eager per-op overhead: tanh(x @ W + b).sum(), x (1,150), W (150,150), float32")
        for n, v in med.items():
            print(f"{n:<26}{v:9.1f} us   ({d / v:5.2f}x dynnets/this)")
        per_op = (d - hand) / n_ops
        print(f"ops bound: {n_ops} (each one forward bind and one VJP); overhead on top of numpy by hand: "
              f"({d:.1f} - {hand:.1f}) / {n_ops} = {per_op:.2f} us per op")
        fwd, fwd_ng, np_fwd = med["dynnets forward only"], med["dynnets forward, no_grad"], med["numpy forward only"]
        print(f"  forward without recording: ({fwd_ng:.1f} - {np_fwd:.1f}) / {n_ops} = {(fwd_ng - np_fwd) / n_ops:.2f} "
              f"us per op; recording: {(fwd - fwd_ng) / n_ops:.2f} us per op; backward (all of it minus the forward, "
              f"against numpy's backward): {((d - fwd) - (hand - np_fwd)) / n_ops:.2f} us per op")
        mt = med[MINIMAL]
        print(f"reference, {MINIMAL}: ({mt:.1f} - {hand:.1f}) / {n_ops} = {(mt - hand) / n_ops:.2f} us per op on top "
              f"of numpy by hand (the least Python a define-by-run op costs; dynnets is "
              f"{(d - mt) / n_ops:.2f} us per op above it)")
        tt = med.get("pytorch")
        if tt:
            print(f"pytorch on top of numpy by hand: ({tt:.1f} - {hand:.1f}) / {n_ops} = {(tt - hand) / n_ops:.2f} us "
                  f"per op")
            targets.append(f"overhead: dynnets/PyTorch = {d / tt:.2f} (target <= 1.0, goal 0.5): "
                           f"{'met' if d <= tt else 'NOT met'}")
        targets.append(f"overhead: {per_op:.2f} us per op on top of numpy (target <= 1.5): "
                       f"{'met' if per_op <= 1.5 else 'NOT met'}")
        rows.append(["`tanh(x@W+b).sum()` fwd+bwd, x 1x150", fmt_us(d), fmt_us(tt) if tt else "n/a",
                     f"{fmt_us(hand)} (numpy by hand); {n_ops} ops: {per_op:.2f} us/op overhead",
                     f"{d / tt:.2f}" if tt else "n/a"])

    if opts.only in (None, "lstm"):
        for batch in (1, 25):
            cont = lstm_contenders(opts.seed, batch, torch)
            number = opts.number or (50 if batch == 1 else 20)
            t = interleaved(cont, opts.repeats, number, warmup=2)
            med = {n: median_us(v) for n, v in t.items()}
            f = med["fused (ops.lstm_cell)"]
            c = med["composed (dynnets ops)"]
            print(f"\n## 2. LSTM cell fwd+bwd, input 300, hidden 150, batch {batch}, float32")
            for n, v in med.items():
                print(f"{n:<24}{v:9.1f} us   ({f / v:5.2f}x fused/this)")
            print(f"composed/fused speed-up: {c / f:.2f}x")
            targets.append(f"LSTM batch {batch}: composed/fused = {c / f:.2f} (target >= 2): "
                           f"{'met' if c >= 2 * f else 'NOT met'}")
            tt = med.get("torch.nn.LSTMCell")
            if tt:
                targets.append(f"LSTM batch {batch}: fused/PyTorch = {f / tt:.2f} (target <= 1.0): "
                               f"{'met' if f <= tt else 'NOT met'}")
            rows.append([f"LSTM cell fwd+bwd, batch {batch}, fused `lstm_cell`", fmt_us(f),
                         fmt_us(tt) if tt else "n/a", f"{fmt_us(c)} (composed, {c / f:.2f}x fused)",
                         f"{f / tt:.2f}" if tt else "n/a"])

    if opts.only in (None, "loop"):
        cont = loop_contenders(opts.seed, torch)
        t = interleaved(cont, opts.repeats, opts.number or 5, warmup=2)
        med = {n: median_us(v) for n, v in t.items()}
        d = med["dynnets nn.LSTMCell"]
        tt = med.get("torch.nn.LSTMCell")
        print("\n## 3. 20-step LSTMCell loop fwd+bwd, batch 1, input 300, hidden 150, float32")
        for n, v in med.items():
            print(f"{n:<24}{v:9.1f} us   ({d / v:5.2f}x dynnets/this)")
        rows.append(["20-step `nn.LSTMCell` loop fwd+bwd, batch 1", fmt_us(d), fmt_us(tt) if tt else "n/a",
                     "-", f"{d / tt:.2f}" if tt else "n/a"])

    print("\n## targets")
    for line in targets:
        print(line)
    print("\n## markdown (shared 2-core machine; medians, us per forward+backward)\n")
    print(markdown_table(["case", "dynnets", "PyTorch 1 thread", "reference", "dynnets / PyTorch"], rows))


if __name__ == "__main__":
    main()
