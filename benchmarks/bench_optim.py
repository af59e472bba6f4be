"""Optimizer step time: row-sparse vs dense embedding updates, and per-parameter overhead.

1. ``sparse``: one step on a 20,000 x 300 float32 embedding whose gradient
   touches 500 rows (a RowSparse of 600 entries, 100 of them repeats, as two
   lookups in one batch give), for SGD, Adagrad and Adam(lazy=True): the
   row-sparse step vs the dense step of the same gradient (``to_dense()``
   computed once beforehand, not timed) vs PyTorch's sparse step
   (SGD / Adagrad on a sparse gradient, SparseAdam) when torch is importable.
2. ``many``: one Adam step over a model of 10 Linear(64, 64) layers (20
   parameters, 41,600 floats): dynnets vs ``torch.optim.Adam`` (foreach and
   single-tensor) — the Python cost per parameter.
3. ``agree`` (needs torch): not a timing but the check that makes the timings
   comparable — in float64, the largest difference from PyTorch of each
   optimizer's parameters after 4 steps (dense and row-sparse gradients), and
   of the cells' outputs and parameter gradients after loading a torch cell's
   state_dict arrays unchanged.

Assigning the gradient (``p._grad = g``) is part of every contender's call.
Contenders run interleaved in one process; figures are medians over
``--repeats`` rounds of ``--number`` calls, with ratios against the dense step
(1) and against torch foreach (2). Run::

    python benchmarks/bench_optim.py --seed 0 --repeats 20

The script re-executes itself once without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE
(it prints so); ``--keep-env`` keeps them.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_us, interleaved, markdown_table, median_us, setup, torch_or_none  # noqa: E402


def _parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="seed of all weights and gradients")
    ap.add_argument("--repeats", type=int, default=20, help="timed rounds per contender (median reported)")
    ap.add_argument("--number", type=int, default=0, help="calls per round (0: chosen per case)")
    ap.add_argument("--only", choices=["sparse", "many", "agree"], help="run one case")
    ap.add_argument("--vocab", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--rows", type=int, default=500, help="distinct rows touched per step")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if importable")
    ap.add_argument("--keep-env", action="store_true", help="do not unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE")
    return ap


def sparse_case(args, torch):
    import numpy as np

    from dynnets import optim
    from dynnets.autograd import RowSparse
    from dynnets.nn import Parameter

    rng = np.random.default_rng(args.seed)
    V, D, R = args.vocab, args.dim, args.rows
    w0 = rng.standard_normal((V, D)).astype(np.float32)
    rows = rng.choice(V, size=R, replace=False)
    rows = np.concatenate([rows, rows[: R // 5]])          # repeats, as two lookups give
    vals = (0.01 * rng.standard_normal((len(rows), D))).astype(np.float32)
    g_sparse = RowSparse(rows, vals, (V, D))
    g_dense = g_sparse.to_dense()

    makers = {
        "SGD": (lambda ps: optim.SGD(ps, lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1)),
        "Adagrad": (lambda ps: optim.Adagrad(ps, lr=0.1), lambda ps: torch.optim.Adagrad(ps, lr=0.1)),
        "Adam lazy": (lambda ps: optim.Adam(ps, lr=1e-3, lazy=True), lambda ps: torch.optim.SparseAdam(ps, lr=1e-3)),
    }
    results = []
    for name, (make, make_torch) in makers.items():
        ps, pd = Parameter(w0), Parameter(w0)
        os_, od = make([ps]), make([pd]) if name != "Adam lazy" else optim.Adam([pd], lr=1e-3)

        def sparse_step():
            ps._grad = g_sparse
            os_.step()

        def dense_step():
            pd._grad = g_dense
            od.step()

        contenders = {"sparse": sparse_step, "dense": dense_step}
        if torch is not None:
            pt = torch.nn.Parameter(torch.from_numpy(w0.copy()))
            ot = make_torch([pt])
            gt = torch.sparse_coo_tensor(torch.from_numpy(rows[None]), torch.from_numpy(vals), (V, D),
                                         check_invariants=False)

            def torch_step():
                pt.grad = gt
                ot.step()
            contenders["torch sparse"] = torch_step
        times = interleaved(contenders, args.repeats, args.number or 5)
        med = {k: median_us(v) for k, v in times.items()}
        dense_label = "dense Adam" if name == "Adam lazy" else "dense"
        results.append([name, fmt_us(med["sparse"]), fmt_us(med["dense"]), f"{med['dense'] / med['sparse']:.0f}x",
                        fmt_us(med["torch sparse"]) if "torch sparse" in med else "-",
                        f"{med['torch sparse'] / med['sparse']:.2f}" if "torch sparse" in med else "-"])
        print(f"# {name}: dense reference is {dense_label}", flush=True)
    print(f"\n## one step, {V} x {D} float32 embedding, {R} rows touched ({len(rows)} gradient rows), "
          f"median us over {args.repeats} rounds\n")
    print(markdown_table(["optimizer", "sparse step us", "dense step us", "dense / sparse", "torch sparse us",
                          "torch / dynnets"], results))


def many_case(args, torch):
    import numpy as np

    from dynnets import nn, optim

    rng = np.random.default_rng(args.seed)
    model = nn.Sequential(*[nn.Linear(64, 64, rng=rng) for _ in range(10)])
    params = list(model.parameters())
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    opt = optim.Adam(params, lr=1e-3)

    def ours():
        for p, g in zip(params, grads):
            p._grad = g
        opt.step()

    contenders = {"dynnets Adam": ours}
    if torch is not None:
        for label, foreach in (("torch Adam foreach", True), ("torch Adam single-tensor", False)):
            tps = [torch.nn.Parameter(torch.from_numpy(p.numpy().copy())) for p in params]
            tgs = [torch.from_numpy(g) for g in grads]
            topt = torch.optim.Adam(tps, lr=1e-3, foreach=foreach)

            def step(tps=tps, tgs=tgs, topt=topt):
                for p, g in zip(tps, tgs):
                    p.grad = g
                topt.step()
            contenders[label] = step
    times = interleaved(contenders, args.repeats, args.number or 50)
    med = {k: median_us(v) for k, v in times.items()}
    ref = med.get("torch Adam foreach")
    rows = [[k, fmt_us(v), f"{v / ref:.2f}" if ref else "-"] for k, v in med.items()]
    print(f"\n## one Adam step, 20 parameters (10 x Linear(64, 64)), median us over {args.repeats} rounds\n")
    print(markdown_table(["contender", "step us", "/ torch foreach"], rows))


def agree_case(args, torch):
    import numpy as np

    from dynnets import nn, optim
    from dynnets.autograd import RowSparse

    rng = np.random.default_rng(args.seed)
    V, D = 30, 4
    w0 = rng.standard_normal((V, D))
    grads = [(rng.integers(0, V, 10), rng.standard_normal((10, D))) for _ in range(4)]
    cases = [
        ("SGD momentum, weight decay, nesterov", False,
         lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True),
         lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
        ("SGD momentum, dampening", False, lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.3),
         lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.3)),
        ("SGD, row-sparse", True, lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
        ("Adagrad lr_decay, weight decay, initial acc.", False,
         lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.2),
         lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.2)),
        ("Adagrad lr_decay, row-sparse", True, lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.05),
         lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.05)),
        ("Adam betas, weight decay", False, lambda p: optim.Adam(p, lr=0.01, betas=(0.8, 0.9), weight_decay=0.01),
         lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.9), weight_decay=0.01)),
        # lazy=True is SparseAdam's maths, eps before the bias correction included
        ("Adam lazy=True vs SparseAdam", True, lambda p: optim.Adam(p, lr=0.01, eps=1e-3, lazy=True),
         lambda p: torch.optim.SparseAdam(p, lr=0.01, eps=1e-3)),
    ]
    rows_out = []
    for name, sparse, make, make_torch in cases:
        pd, pt = nn.Parameter(w0), torch.nn.Parameter(torch.tensor(w0))
        od, ot = make([pd]), make_torch([pt])
        for r, v in grads:
            g = RowSparse(r, v, (V, D))
            gt = torch.sparse_coo_tensor(torch.tensor(r[None]), torch.tensor(v), (V, D), check_invariants=False)
            pd._grad, pt.grad = (g, gt) if sparse else (g.to_dense(), gt.to_dense())
            od.step()
            ot.step()
        rows_out.append([name, f"{np.abs(pd.numpy() - pt.detach().numpy()).max():.1e}"])
    x, h, c = (rng.standard_normal((3, n)) for n in (5, 4, 4))
    for tcls, dcls, kw in ((torch.nn.LSTMCell, nn.LSTMCell, {}), (torch.nn.GRUCell, nn.GRUCell, {}),
                           (torch.nn.RNNCell, nn.RNNCell, {"nonlinearity": "relu"})):
        torch.manual_seed(args.seed)
        tc, dc = tcls(5, 4, **kw).double(), dcls(5, 4, dtype=np.float64, **kw)
        dc.load_state_dict({k: v.detach().numpy() for k, v in tc.state_dict().items()})
        xt, ht, ct = (torch.tensor(a) for a in (x, h, c))
        if dcls is nn.LSTMCell:
            to, do = tc(xt, (ht, ct)), dc(x, (h, c))
            lt, ld = to[0].sum() + (to[1] ** 2).sum(), do[0].sum() + (do[1] ** 2).sum()
        else:
            lt, ld = (tc(xt, ht) ** 2).sum(), (dc(x, h) ** 2).sum()
        lt.backward()
        ld.backward()
        err = max([abs(lt.item() - ld.item())] + [float(np.abs(tp.grad.numpy() - dp.grad.numpy()).max())
                                                  for tp, dp in zip(tc.parameters(), dc.parameters())])
        rows_out.append([f"{dcls.__name__}{'(relu)' if kw else ''}: loss and parameter gradients", f"{err:.1e}"])
    print("\n## agreement with PyTorch, float64: max |dynnets - torch| (parameters after 4 steps; cells)\n")
    print(markdown_table(["case", "max abs diff"], rows_out))


def main(argv=None):
    args = _parser().parse_args(argv)
    setup(__file__, keep_env=args.keep_env)
    torch = None if args.no_torch else torch_or_none(threads=1)
    # torch's sparse Adagrad builds sparse tensors without opting in or out of invariant checks
    warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
    if torch is None:
        print("# PyTorch not used")
    else:
        print(f"# torch {torch.__version__}, 1 thread")
    if args.only in (None, "sparse"):
        sparse_case(args, torch)
    if args.only in (None, "many"):
        many_case(args, torch)
    if args.only in (None, "agree") and torch is not None:
        agree_case(args, torch)


if __name__ == "__main__":
    main()
